/*
 * struct strvec: see strvec.h.
 */
#include "util/compat.h"

#include <ctype.h>

#include "util/strvec.h"
#include "util/xalloc.h"

const char *strvec_empty[] = { NULL };

void
strvec_init(struct strvec *sv)
{
	sv->v = strvec_empty;
	sv->nr = sv->alloc = 0;
}

static void
push_nodup(struct strvec *sv, char *s)
{
	if (sv->v == strvec_empty) {
		sv->v = NULL;
		sv->alloc = 0;
	}
	ALLOC_GROW(sv->v, sv->nr + 2, sv->alloc);
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): grown above */
	sv->v[sv->nr++] = s;
	sv->v[sv->nr] = NULL;
}

void
strvec_push(struct strvec *sv, const char *s)
{
	push_nodup(sv, xstrdup(s));
}

void
strvec_pushf(struct strvec *sv, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		BUG("vasprintf failed");
	va_end(ap);
	push_nodup(sv, s);
}

void
strvec_pushl(struct strvec *sv, ...)
{
	va_list ap;
	const char *s;

	va_start(ap, sv);
	while ((s = va_arg(ap, const char *)))
		strvec_push(sv, s);
	va_end(ap);
}

void
strvec_pushv(struct strvec *sv, const char *const *items)
{
	for (; items && *items; items++)
		strvec_push(sv, *items);
}

int
strvec_has(const struct strvec *sv, const char *s)
{
	size_t i;

	for (i = 0; sv && i < sv->nr; i++)
		if (!strcmp(sv->v[i], s))
			return 1;
	return 0;
}

int
str_in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return 1;
	return 0;
}

int
str_blank(const char *s)
{
	while (s && isspace((unsigned char)*s))
		s++;
	return !s || !*s;
}

void
strvec_clear(struct strvec *sv)
{
	size_t i;

	if (sv->v != strvec_empty) {
		for (i = 0; i < sv->nr; i++)
			free((char *)sv->v[i]);
		free(sv->v);
	}
	strvec_init(sv);
}
