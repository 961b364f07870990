/*
 * A NULL-terminated array of owned strings, for argv and environments
 * (git's strvec). v is never NULL: an empty strvec points at a static
 * { NULL } array.
 */
#ifndef BATON_UTIL_STRVEC_H
#define BATON_UTIL_STRVEC_H

#include <stddef.h>

struct strvec {
	const char **v;
	size_t nr, alloc;
};

extern const char *strvec_empty[];
#define STRVEC_INIT { strvec_empty, 0, 0 }

void strvec_init(struct strvec *sv);
/* Appends a copy of s. */
void strvec_push(struct strvec *sv, const char *s);
void strvec_pushf(struct strvec *sv, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends each argument up to a NULL. */
void strvec_pushl(struct strvec *sv, ...) __attribute__((sentinel));
/* Appends copies of a NULL-terminated array. */
void strvec_pushv(struct strvec *sv, const char *const *items);
/* Frees every string; sv is empty and usable afterwards. */
void strvec_clear(struct strvec *sv);
/* 1 when s is one of sv's strings (sv may be NULL). */
int strvec_has(const struct strvec *sv, const char *s);
/* 1 when s is one of the strings of list, a NULL-terminated array. */
int str_in_list(const char *const *list, const char *s);
/* 1 when s is NULL or holds nothing but white space: no text at all. */
int str_blank(const char *s);

#endif
