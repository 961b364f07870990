/*
 * Allocation wrappers. Running out of memory is not an error baton can
 * recover from meaningfully, so it is reported and the process aborts.
 */
#include "util/compat.h"

#include "util/xalloc.h"

static _Noreturn void
oom(size_t n)
{
	fprintf(stderr, "baton: out of memory allocating %zu bytes\n", n);
	abort();
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom(n);
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

	if (!p)
		oom(nmemb * size);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		oom(n);
	return q;
}

char *
xstrdup(const char *s)
{
	char *p;

	if (!s)
		BUG("xstrdup(NULL)");
	p = strdup(s);
	if (!p)
		oom(strlen(s));
	return p;
}

char *
xstrdup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

char *
xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);

	if (!p)
		oom(n);
	return p;
}

char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom(strlen(fmt));
	return p;
}

void
baton_bug(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "baton: BUG at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}
