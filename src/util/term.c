/*
 * Escaping text for a terminal: see term.h.
 */
#include "util/compat.h"

#include "util/buf.h"
#include "util/json.h"
#include "util/term.h"

/* 1 for a code point a terminal acts on rather than shows. */
static int
is_control(unsigned int cp)
{
	return (cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7f ||
	       (cp >= 0x80 && cp <= 0x9f);
}

static void
add_control(struct buf *out, unsigned int cp)
{
	if (cp == '\r')
		buf_adds(out, "\\r");
	else if (cp < 0x80)
		buf_addf(out, "\\x%02x", cp);
	else
		buf_addf(out, "\\u%04x", cp);
}

void
term_escape(struct buf *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, n, plain = 0;
	unsigned int cp;

	/* Runs of plain text go out in one append. */
	while (i < len) {
		/* printable ASCII, the common case, needs no decoding */
		if ((p[i] >= 0x20 && p[i] < 0x7f) || p[i] == '\n' ||
		    p[i] == '\t') {
			i++;
			continue;
		}
		n = utf8_decode(p + i, len - i, &cp);
		if (n && !is_control(cp)) {
			i += n;
			continue;
		}
		buf_add(out, p + plain, i - plain);
		if (n)
			add_control(out, cp);
		else
			buf_addf(out, "\\x%02x", p[i]);
		i += n ? n : 1;
		plain = i;
	}
	buf_add(out, p + plain, len - plain);
}

int
term_vprintf(FILE *f, const char *fmt, va_list ap)
{
	struct buf raw = BUF_INIT, shown = BUF_INIT;
	int rc = -1;

	buf_vaddf(&raw, fmt, ap);
	term_escape(&shown, raw.ptr, raw.len);
	if (fwrite(shown.ptr, 1, shown.len, f) == shown.len)
		rc = (int)shown.len;
	buf_release(&raw);
	buf_release(&shown);
	return rc;
}

int
term_printf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = term_vprintf(f, fmt, ap);
	va_end(ap);
	return rc;
}
