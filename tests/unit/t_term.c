/*
 * term_escape: what a person's terminal is shown of text baton does not
 * control (util/term.h).
 */
#include "util/compat.h"

#include "test.h"
#include "util/buf.h"
#include "util/term.h"

static void
check(const char *in, size_t len, const char *want)
{
	struct buf out = BUF_INIT;

	term_escape(&out, in, len);
	ASSERT_STREQ(out.ptr, want);
	buf_release(&out);
}

/* in is a literal: its length counts a NUL inside it */
#define CHECK(in, want) check(in, sizeof(in) - 1, want)

TEST(term_escape_shows_controls)
{
	/* OSC title, clear screen, carriage return, BEL, DEL */
	CHECK("a\033]0;t\007 \033[2J\rb\177",
	      "a\\x1b]0;t\\x07 \\x1b[2J\\rb\\x7f");
	/* a NUL inside the text is shown, not an end */
	CHECK("x\0y", "x\\x00y");
}

TEST(term_escape_keeps_newlines_tabs_and_utf8)
{
	CHECK("line 1\n\tline 2 \xe2\x9c\x93 \xc3\xa9",
	      "line 1\n\tline 2 \xe2\x9c\x93 \xc3\xa9");
	CHECK("", "");
}

TEST(term_escape_shows_c1_and_bytes_that_are_not_utf8)
{
	/* U+009B (CSI) as UTF-8, a lone 0x9b byte, a cut sequence */
	CHECK("\302\2331m", "\\u009b1m");
	CHECK("a\233b", "a\\x9bb");
	CHECK("\xe2\x9c", "\\xe2\\x9c");
	/* U+00A0 is not a control: kept */
	CHECK("\xc2\xa0", "\xc2\xa0");
}
