/*
 * Path globs with '**' (pathglob.h): a small recursive matcher over the
 * pattern and the path at once. '*' never crosses a '/', so the work is
 * bounded by the segments' lengths; patterns come from the user's config,
 * paths from baton's own git.
 */
#include "util/compat.h"

#include <string.h>

#include "util/pathglob.h"

/* The end of the [...] class at p (p at '['), or NULL when unclosed. */
static const char *
class_end(const char *p)
{
	const char *q = p + 1;

	if (*q == '!' || *q == '^')
		q++;
	if (*q == ']')
		q++; /* a leading ']' is literal */
	for (; *q && *q != '/'; q++)
		if (*q == ']')
			return q;
	return NULL;
}

/* 1 when c is in the class from p ('[') to end (']'). */
static int
class_has(const char *p, const char *end, char c)
{
	const char *q = p + 1;
	int neg = 0, in = 0;

	if (*q == '!' || *q == '^') {
		neg = 1;
		q++;
	}
	for (; q < end; q++) {
		if (q + 2 < end && q[1] == '-') {
			if (c >= q[0] && c <= q[2])
				in = 1;
			q += 2;
		} else if (*q == c) {
			in = 1;
		}
	}
	return in != neg;
}

static int
match(const char *pat, const char *p, const char *s)
{
	for (;;) {
		if (!*p)
			/* a directory above the path matches it too */
			return !*s || *s == '/';
		if (p[0] == '*' && p[1] == '*' && (p == pat || p[-1] == '/') &&
		    (p[2] == '/' || !p[2])) {
			if (!p[2])
				return 1;
			/* zero directories, then after each '/' of the path */
			if (match(pat, p + 3, s))
				return 1;
			for (; *s; s++)
				if (*s == '/' && match(pat, p + 3, s + 1))
					return 1;
			return 0;
		}
		switch (*p) {
		case '*':
			for (;; s++) {
				if (match(pat, p + 1, s))
					return 1;
				if (!*s || *s == '/')
					return 0;
			}
		case '?':
			if (!*s || *s == '/')
				return 0;
			break;
		case '[': {
			const char *end = class_end(p);

			if (!end) {
				if (*s != '[')
					return 0;
				break;
			}
			if (!*s || *s == '/' || !class_has(p, end, *s))
				return 0;
			p = end;
			break;
		}
		case '/':
			if (*s != '/')
				return 0;
			if (!p[1])
				return 1; /* "dir/": anything below dir */
			break;
		case '\\':
			if (p[1])
				p++;
			/* fall through */
		default:
			if (*s != *p)
				return 0;
		}
		p++;
		s++;
	}
}

static const char *
skip_dot_slash(const char *s)
{
	while (s[0] == '.' && s[1] == '/')
		s += 2;
	return s;
}

int
pathglob_match(const char *pattern, const char *path)
{
	pattern = skip_dot_slash(pattern);
	path = skip_dot_slash(path);
	if (!*pattern || !*path)
		return 0;
	return match(pattern, pattern, path);
}

const char *
pathglob_check(const char *pattern)
{
	const char *p = skip_dot_slash(pattern), *seg;

	if (!*p)
		return "an empty pattern matches nothing";
	if (*p == '/')
		return "a pattern is a path inside the repository, not an "
		       "absolute path";
	for (seg = p; seg; seg = strchr(seg, '/'), seg = seg ? seg + 1 : NULL)
		if (seg[0] == '.' && seg[1] == '.' &&
		    (seg[2] == '/' || !seg[2]))
			return "a '..' segment leaves the repository";
	for (; *p; p++) {
		if (*p == '\\' && !p[1])
			return "a trailing '\\' escapes nothing";
		if (*p == '\\')
			p++;
		else if (*p == '[' && !class_end(p))
			return "an unclosed '['";
	}
	return NULL;
}
