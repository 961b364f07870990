/*
 * Deterministic run ids: see ids.h.
 */
#include "util/compat.h"

#include <ctype.h>

#include "core/ids.h"
#include "util/buf.h"
#include "util/xalloc.h"

#define SLUG_MAX 24

char *
run_id_make(int64_t seq, const char *task)
{
	struct buf b = BUF_INIT;
	size_t start;
	int dash = 0;

	buf_addf(&b, "r%lld", (long long)seq);
	start = b.len;
	for (; task && *task && b.len - start < SLUG_MAX; task++) {
		unsigned char c = (unsigned char)*task;

		if (isalnum(c) && c < 128) {
			if (dash || b.len == start)
				buf_addch(&b, '-');
			buf_addch(&b, tolower(c));
			dash = 0;
		} else {
			dash = 1;
		}
	}
	while (b.len > start && b.ptr[b.len - 1] == '-')
		buf_setlen(&b, b.len - 1);
	return buf_detach(&b, NULL);
}

int64_t
run_id_seq(const char *ref)
{
	int64_t n = 0;

	if (*ref == 'r')
		ref++;
	if (!isdigit((unsigned char)*ref))
		return 0;
	for (; isdigit((unsigned char)*ref); ref++) {
		if (n > INT64_MAX / 10 - 10)
			return 0;
		n = n * 10 + (*ref - '0');
	}
	return *ref == '\0' || *ref == '-' ? n : 0;
}
