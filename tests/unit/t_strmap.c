/*
 * strmap: names to indexes, and buf_escape_nul, the two small helpers of
 * issue 18 (items 15 and 16).
 */
#include "util/compat.h"

#include <stdio.h>

#include "test.h"
#include "util/buf.h"
#include "util/strmap.h"

TEST(strmap_adds_once_and_finds_every_key_across_growth)
{
	struct strmap m = STRMAP_INIT;
	char key[32];
	size_t i, v = 0;

	ASSERT_EQ(strmap_get(&m, "missing", &v), 0);
	for (i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "st%zu", i);
		ASSERT_EQ(strmap_add(&m, key, i), 1);
	}
	ASSERT_EQ(strmap_add(&m, "st7", 99), 0); /* there: kept as it was */
	for (i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "st%zu", i);
		ASSERT_EQ(strmap_get(&m, key, &v), 1);
		ASSERT_EQ(v, i);
	}
	ASSERT_EQ(strmap_get(&m, "st5000", &v), 0);
	ASSERT_EQ(strmap_get(&m, "", &v), 0);
	ASSERT_EQ(m.nr, 5000);
	strmap_release(&m);
	ASSERT_EQ(strmap_get(&m, "st1", &v), 0);
}

TEST(escape_nul_keeps_what_follows_each_nul)
{
	struct buf b = BUF_INIT;

	buf_add(&b, "before\0after\0", 13);
	buf_escape_nul(&b);
	ASSERT_STREQ(b.ptr, "before\\0after\\0");
	ASSERT_EQ(b.len, 15);
	buf_escape_nul(&b); /* none left: unchanged */
	ASSERT_EQ(b.len, 15);
	buf_release(&b);
}
