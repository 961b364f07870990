/*
 * json_lossy: text as a JSON string, each byte that is not part of valid
 * UTF-8 (and each NUL) replaced by U+FFFD, everything else kept as it
 * is. Valid text takes jansson's own check; the rest the slow path.
 */
#include "util/compat.h"

#include <jansson.h>

#include "test.h"
#include "util/json.h"

#define FFFD "\xef\xbf\xbd"

/* What json_lossy makes of len bytes of s, compared with want. */
static int
lossy_is(const char *s, size_t len, const char *want)
{
	json_t *j = json_lossy(s, len);
	int same = json_is_string(j) &&
		   json_string_length(j) == strlen(want) &&
		   !memcmp(json_string_value(j), want, strlen(want));

	if (!same)
		fprintf(stderr, "  json_lossy gave '%s', wanted '%s'\n",
			json_string_value(j), want);
	json_decref(j);
	return same;
}

TEST(lossy_keeps_valid_text_whole)
{
	ASSERT(lossy_is("", 0, ""));
	ASSERT(lossy_is("plain ascii", 11, "plain ascii"));
	/* two, three and four bytes a character */
	ASSERT(lossy_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
			"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
	/* only len bytes are read */
	ASSERT(lossy_is("abcdef", 3, "abc"));
}

TEST(lossy_replaces_each_bad_byte_and_keeps_the_rest)
{
	/* a stray continuation byte, a byte no UTF-8 has */
	ASSERT(lossy_is("a\x80z", 3, "a" FFFD "z"));
	ASSERT(lossy_is("\xff\xfe", 2, FFFD FFFD));
	/* an overlong '/', a UTF-16 surrogate, past U+10FFFF */
	ASSERT(lossy_is("\xc0\xaf!", 3, FFFD FFFD "!"));
	ASSERT(lossy_is("x\xed\xa0\x80y", 5, "x" FFFD FFFD FFFD "y"));
	ASSERT(lossy_is("\xf4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD));
	/* a sequence cut short at the end, after valid text */
	ASSERT(lossy_is("ok \xe2\x82", 5, "ok " FFFD FFFD));
	/* valid characters on both sides of a bad byte survive */
	ASSERT(lossy_is("\xc3\xa9\x80\xc3\xa9", 5, "\xc3\xa9" FFFD "\xc3\xa9"));
}

TEST(lossy_replaces_a_nul_which_valid_utf8_allows)
{
	ASSERT(lossy_is("a\0b", 3, "a" FFFD "b"));
	ASSERT(lossy_is("\0", 1, FFFD));
}

TEST(lossy_str_of_null_is_null)
{
	json_t *j = json_lossy_str(NULL);

	ASSERT(json_is_null(j));
	json_decref(j);
	j = json_lossy_str("v\xc3\xa9");
	ASSERT_STREQ(json_string_value(j), "v\xc3\xa9");
	json_decref(j);
}
