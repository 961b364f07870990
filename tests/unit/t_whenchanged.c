/*
 * The path globs of conditional checks (validate.commands[].when_changed,
 * util/pathglob.h): '**', '*', '?', classes, directories, and the
 * patterns the config refuses.
 */
#include "util/compat.h"

#include "test.h"
#include "util/pathglob.h"

TEST(star_stays_in_one_segment)
{
	ASSERT_EQ(pathglob_match("*.c", "main.c"), 1);
	ASSERT_EQ(pathglob_match("*.c", "src/main.c"), 0);
	ASSERT_EQ(pathglob_match("src/*.c", "src/main.c"), 1);
	ASSERT_EQ(pathglob_match("src/*.c", "src/engine/main.c"), 0);
	ASSERT_EQ(pathglob_match("src/*", "src/engine/main.c"), 1); /* dir */
	ASSERT_EQ(pathglob_match("*", "x"), 1);
	ASSERT_EQ(pathglob_match("a*b*c", "aXXbYYc"), 1);
	ASSERT_EQ(pathglob_match("a*b*c", "aXXbYYd"), 0);
	ASSERT_EQ(pathglob_match("a*c", "ab/c"), 0);
}

TEST(double_star_spans_directories_none_included)
{
	ASSERT_EQ(pathglob_match("engine/**", "engine/a.c"), 1);
	ASSERT_EQ(pathglob_match("engine/**", "engine/x/y/z.c"), 1);
	ASSERT_EQ(pathglob_match("engine/**", "engines/a.c"), 0);
	ASSERT_EQ(pathglob_match("engine/**", "renderer/engine/a.c"), 0);
	ASSERT_EQ(pathglob_match("**/*.md", "README.md"), 1);
	ASSERT_EQ(pathglob_match("**/*.md", "docs/a/b.md"), 1);
	ASSERT_EQ(pathglob_match("**/*.md", "docs/a/b.mdx"), 0);
	ASSERT_EQ(pathglob_match("src/**/test.c", "src/test.c"), 1);
	ASSERT_EQ(pathglob_match("src/**/test.c", "src/a/b/test.c"), 1);
	ASSERT_EQ(pathglob_match("src/**/test.c", "src/a/b/xtest.c"), 0);
	ASSERT_EQ(pathglob_match("**", "anything/at/all"), 1);
	/* '**' inside a segment is two single stars */
	ASSERT_EQ(pathglob_match("a**b", "aXb"), 1);
	ASSERT_EQ(pathglob_match("a**b", "a/b"), 0);
}

TEST(question_mark_and_classes)
{
	ASSERT_EQ(pathglob_match("t?.c", "t1.c"), 1);
	ASSERT_EQ(pathglob_match("t?.c", "t12.c"), 0);
	ASSERT_EQ(pathglob_match("a?b", "a/b"), 0);
	ASSERT_EQ(pathglob_match("t[0-9].c", "t7.c"), 1);
	ASSERT_EQ(pathglob_match("t[0-9].c", "tx.c"), 0);
	ASSERT_EQ(pathglob_match("t[!0-9].c", "tx.c"), 1);
	ASSERT_EQ(pathglob_match("t[!0-9].c", "t7.c"), 0);
	ASSERT_EQ(pathglob_match("[]x]", "]"), 1);
	ASSERT_EQ(pathglob_match("a\\*", "a*"), 1);
	ASSERT_EQ(pathglob_match("a\\*", "ab"), 0);
}

TEST(directories_match_what_is_below_them)
{
	ASSERT_EQ(pathglob_match("docs", "docs/a/b.md"), 1);
	ASSERT_EQ(pathglob_match("docs/", "docs/a.md"), 1);
	ASSERT_EQ(pathglob_match("docs", "docs"), 1);
	ASSERT_EQ(pathglob_match("docs", "docsx/a.md"), 0);
	ASSERT_EQ(pathglob_match("docs/", "docs"), 0);
	ASSERT_EQ(pathglob_match("./docs", "docs/a.md"), 1);
	ASSERT_EQ(pathglob_match("docs", "./docs/a.md"), 1);
	ASSERT_EQ(pathglob_match("", "a"), 0);
	ASSERT_EQ(pathglob_match("a", ""), 0);
}

TEST(malformed_patterns_are_named)
{
	ASSERT(pathglob_check("src/**") == NULL);
	ASSERT(pathglob_check("a\\[b") == NULL);
	ASSERT(pathglob_check("") != NULL);
	ASSERT(pathglob_check("./") != NULL);
	ASSERT(pathglob_check("/etc/passwd") != NULL);
	ASSERT(pathglob_check("../x") != NULL);
	ASSERT(pathglob_check("a/../b") != NULL);
	ASSERT(pathglob_check("t[0-9") != NULL);
	ASSERT(pathglob_check("a\\") != NULL);
}
