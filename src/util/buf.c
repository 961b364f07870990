/*
 * struct buf: see buf.h. The empty buffer points at a shared one-byte
 * "slop" string so that BUF_INIT needs no allocation (git's strbuf).
 */
#include "util/compat.h"

#include "util/buf.h"
#include "util/xalloc.h"

char buf_slopbuf[1];

void
buf_init(struct buf *b, size_t max)
{
	b->ptr = buf_slopbuf;
	b->len = b->cap = 0;
	b->max = max;
}

void
buf_release(struct buf *b)
{
	if (b->cap)
		free(b->ptr);
	b->ptr = buf_slopbuf;
	b->len = b->cap = 0;
}

void
buf_reset(struct buf *b)
{
	if (b->cap)
		b->ptr[0] = '\0';
	b->len = 0;
}

char *
buf_detach(struct buf *b, size_t *len)
{
	char *p = b->cap ? b->ptr : xstrdup("");

	if (len)
		*len = b->len;
	b->ptr = buf_slopbuf;
	b->len = b->cap = 0;
	return p;
}

static void
grow(struct buf *b, size_t extra)
{
	size_t want = b->len + extra + 1;
	int fresh = !b->cap;

	if (want <= b->cap)
		return;
	if (want < b->cap * 2)
		want = b->cap * 2;
	if (want < 64)
		want = 64;
	b->ptr = xrealloc(fresh ? NULL : b->ptr, want);
	b->cap = want;
	if (fresh)
		b->ptr[0] = '\0';
}

int
buf_add(struct buf *b, const void *data, size_t len)
{
	int rc = 0;

	if (b->max && b->len + len > b->max) {
		len = b->max > b->len ? b->max - b->len : 0;
		rc = -ENOBUFS;
	}
	if (len) {
		grow(b, len);
		memcpy(b->ptr + b->len, data, len);
		b->len += len;
		b->ptr[b->len] = '\0';
	}
	return rc;
}

void
buf_escape_nul(struct buf *b)
{
	struct buf out = BUF_INIT;
	const char *p = b->ptr, *end = b->ptr + b->len, *nul;

	if (!memchr(b->ptr, '\0', b->len))
		return;
	while ((nul = memchr(p, '\0', (size_t)(end - p)))) {
		buf_add(&out, p, (size_t)(nul - p));
		buf_add(&out, "\\0", 2);
		p = nul + 1;
	}
	buf_add(&out, p, (size_t)(end - p));
	out.max = b->max > out.len ? b->max : 0;
	buf_release(b);
	*b = out;
}

int
buf_adds(struct buf *b, const char *s)
{
	return buf_add(b, s, strlen(s));
}

int
buf_addch(struct buf *b, int c)
{
	char ch = (char)c;

	return buf_add(b, &ch, 1);
}

int
buf_vaddf(struct buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	/* Uncapped and with room already (a buffer being filled line by
	 * line): one pass, the way strbuf_addf does it. */
	if (!b->max && b->cap - b->len > 1) {
		va_copy(cp, ap);
		n = vsnprintf(b->ptr + b->len, b->cap - b->len, fmt, cp);
		va_end(cp);
		if (n < 0)
			BUG("vsnprintf failed for '%s'", fmt);
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return 0;
		}
		b->ptr[b->len] = '\0'; /* the cut text is no content */
	}
	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		BUG("vsnprintf failed for '%s'", fmt);
	if (b->max && b->len + (size_t)n > b->max) {
		char *tmp = xmalloc((size_t)n + 1);
		int rc;

		vsnprintf(tmp, (size_t)n + 1, fmt, ap);
		rc = buf_add(b, tmp, (size_t)n);
		free(tmp);
		return rc;
	}
	grow(b, (size_t)n);
	vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int
buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_vaddf(b, fmt, ap);
	va_end(ap);
	return rc;
}

void
buf_add_tail(struct buf *b, const void *data, size_t len)
{
	const char *p = data;

	if (!b->max)
		BUG("buf_add_tail on an uncapped buffer");
	if (len >= b->max) {
		p += len - b->max;
		len = b->max;
		b->len = 0;
	} else if (b->len + len > b->max) {
		size_t drop = b->len + len - b->max;

		memmove(b->ptr, b->ptr + drop, b->len - drop);
		b->len -= drop;
	}
	grow(b, len);
	memcpy(b->ptr + b->len, p, len);
	b->len += len;
	b->ptr[b->len] = '\0';
}

void
buf_setlen(struct buf *b, size_t len)
{
	if (len > b->len)
		BUG("buf_setlen(%zu) beyond length %zu", len, b->len);
	b->len = len;
	if (b->cap)
		b->ptr[len] = '\0';
}

void
buf_rtrim(struct buf *b)
{
	while (b->len && strchr(" \t\r\n", b->ptr[b->len - 1]))
		b->len--;
	if (b->cap)
		b->ptr[b->len] = '\0';
}

size_t
utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

void
buf_add_cut(struct buf *b, const char *s, size_t len, size_t max)
{
	size_t dots = max < 3 ? max : 3;

	if (len <= max) {
		buf_add(b, s, len);
		return;
	}
	buf_add(b, s, utf8_cut(s, len, max - dots));
	buf_add(b, "...", dots);
}
