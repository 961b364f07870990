/*
 * Growable byte buffers with the strbuf invariant: ptr is never NULL and
 * always NUL-terminated, so a buf can be printed at any time. A buffer may
 * carry a cap (max): an append that would pass it returns -ENOBUFS and keeps
 * what fits, so buffers fed by children, sockets or files stay bounded.
 */
#ifndef BATON_UTIL_BUF_H
#define BATON_UTIL_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *ptr;
	size_t len, cap, max; /* max == 0: uncapped */
};

extern char buf_slopbuf[];
#define BUF_INIT { buf_slopbuf, 0, 0, 0 }

/* Empty buffer holding at most max bytes (0: uncapped). */
void buf_init(struct buf *b, size_t max);
/* Frees the contents; b is empty and usable afterwards. Accepts BUF_INIT. */
void buf_release(struct buf *b);
/* Empties b, keeping its memory. */
void buf_reset(struct buf *b);
/* Hands the string to the caller (who frees it); b becomes empty. */
char *buf_detach(struct buf *b, size_t *len);

/* Appends; return 0, or -ENOBUFS when the cap cut the data short. */
int buf_add(struct buf *b, const void *data, size_t len);
int buf_adds(struct buf *b, const char *s);
int buf_addch(struct buf *b, int c);
int buf_addf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int buf_vaddf(struct buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/*
 * Appends, keeping only the last b->max bytes: the bounded tail of a
 * stream. Requires a capped buffer. Never fails.
 */
void buf_add_tail(struct buf *b, const void *data, size_t len);

/* Shortens b to len bytes (len <= b->len). */
void buf_setlen(struct buf *b, size_t len);
/* Removes trailing whitespace. */
void buf_rtrim(struct buf *b);
/*
 * Writes each NUL byte in b as the two characters "\0", so that text read
 * from a child and then handed on as a C string (an artifact, a reason)
 * loses nothing after one. Text with NULs grows by one byte for each, and
 * b keeps it whatever its cap (at most twice what the cap let in).
 */
void buf_escape_nul(struct buf *b);

/* The length of s (len bytes) cut to at most max bytes without splitting
 * a UTF-8 sequence: a cut before a continuation byte moves back. */
size_t utf8_cut(const char *s, size_t len, size_t max);
/* Appends at most max bytes of s (len bytes), ending "..." when cut. */
void buf_add_cut(struct buf *b, const char *s, size_t len, size_t max);

#endif
