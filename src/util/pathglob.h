/*
 * Path globs for conditional checks (validate.commands[].when_changed):
 * does a repository path, '/'-separated and relative to the top, match a
 * pattern? '*' is any run of characters but '/', '?' one character but
 * '/', [abc] and [!abc] one of (or none of) a set, '\' makes the next
 * character literal, and '**' as a whole path segment stands for any
 * number of directories, none included. A pattern also matches every path
 * below a directory it matches: "docs" and "docs/" match
 * "docs/a/b.md". There is no match-at-any-depth rule: "*.md" matches a
 * top-level file only; put '**' and a '/' before it for any depth.
 */
#ifndef BATON_UTIL_PATHGLOB_H
#define BATON_UTIL_PATHGLOB_H

/* 1 when path matches pattern, else 0. A leading "./" of either is
   ignored. */
int pathglob_match(const char *pattern, const char *path);

/*
 * NULL when pattern is well formed, else a static sentence saying what is
 * wrong with it (empty, an absolute path, a '..' segment, an unclosed
 * '[', a trailing '\').
 */
const char *pathglob_check(const char *pattern);

#endif
