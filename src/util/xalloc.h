/*
 * Allocation that cannot fail: on out-of-memory these abort with a message
 * (tmux, redis), so no caller checks for NULL.
 */
#ifndef BATON_UTIL_XALLOC_H
#define BATON_UTIL_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* xstrdup(NULL) is an error; xstrdup_or_null(NULL) returns NULL. */
char *xstrdup_or_null(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a new string. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define FREE_AND_NULL(p)                                                       \
	do {                                                                   \
		free(p);                                                       \
		(p) = NULL;                                                    \
	} while (0)

/* Grow array x (with alloc slots) so that it holds at least nr elements. */
#define ALLOC_GROW(x, nr, alloc)                                               \
	do {                                                                   \
		if ((nr) > (alloc)) {                                          \
			(alloc) = (alloc) < 8 ? 8 : (alloc)*2;                 \
			if ((alloc) < (nr))                                    \
				(alloc) = (nr);                                \
			(x) = xrealloc((x), (alloc) * sizeof(*(x)));           \
		}                                                              \
	} while (0)

#endif
