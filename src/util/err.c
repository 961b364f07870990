/*
 * Error codes and messages: see err.h.
 */
#include "util/compat.h"

#include "util/err.h"

static const char *const names[] = {
	[BATON_ENOTFOUND - BATON_EFIRST] = "not found",
	[BATON_ECONFLICT - BATON_EFIRST] = "conflict: changed concurrently",
	[BATON_EBADSTATE - BATON_EFIRST] = "illegal transition",
	[BATON_ETIMEDOUT - BATON_EFIRST] = "timed out",
	[BATON_EINVAL - BATON_EFIRST] = "invalid input",
	[BATON_EBUSY - BATON_EFIRST] = "busy",
	[BATON_ECONTRACT - BATON_EFIRST] = "output broke its contract",
	[BATON_EAMBIGUOUS - BATON_EFIRST] = "ambiguous",
	[BATON_ESTORE - BATON_EFIRST] = "database error",
	[BATON_ECHILD - BATON_EFIRST] = "child process failed",
	[BATON_EABORTED - BATON_EFIRST] = "aborted",
	[BATON_ENOREPO - BATON_EFIRST] = "not a git repository",
	[BATON_EFENCED - BATON_EFIRST] = "lease taken over",
	[BATON_EEXIST - BATON_EFIRST] = "exists already",
};

const char *
baton_strerror(int rc)
{
	if (rc > BATON_EFIRST && rc < BATON_ELAST && names[rc - BATON_EFIRST])
		return names[rc - BATON_EFIRST];
	if (rc < 0 && rc > -4096)
		return strerror(-rc);
	return rc ? "unknown error" : "success";
}

int
err_set(struct err *e, int rc, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return rc;
	e->rc = rc;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return rc;
}

int
err_prefix(struct err *e, const char *fmt, ...)
{
	char old[sizeof(e->msg)];
	va_list ap;
	size_t n;
	int w;

	if (!e)
		return 0;
	memcpy(old, e->msg, sizeof(old));
	va_start(ap, fmt);
	w = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	n = w < 0 ? 0 : (size_t)w;
	if (n + 2 < sizeof(e->msg)) {
		memcpy(e->msg + n, ": ", 2);
		n += 2;
		memcpy(e->msg + n, old, sizeof(e->msg) - n - 1);
		e->msg[sizeof(e->msg) - 1] = '\0';
	}
	return e->rc;
}
