/*
 * libcurl on first use (util/lazy.h): the HTTP agent, the forge's API
 * and webhooks need it, with the thirty libraries it is linked with
 * (TLS, HTTP/2, IDN, SSH, LDAP...). Each function below is defined with
 * the prototype of <curl/curl.h>, so one that differs does not compile.
 * curl_easy_setopt and curl_easy_getinfo are variadic and written out:
 * their one argument after the option is read as libcurl itself reads
 * it, by the option's type range.
 */
#include "util/compat.h"

/* the type-checking macros of curl/typecheck-gcc.h would rename the
 * two variadic functions defined here */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <stdarg.h>

#include "util/lazy.h"

#define CURL_FUNCTIONS(X, V, H)                                             \
	X(CURLcode, curl_global_init, (long flags), (flags))                \
	X(CURL *, curl_easy_init, (void), ())                               \
	X(CURLcode, curl_easy_perform, (CURL * h), (h))                     \
	V(curl_easy_cleanup, (CURL * h), (h))                               \
	X(const char *, curl_easy_strerror, (CURLcode c), (c))              \
	X(char *, curl_easy_escape, (CURL * h, const char *s, int n),       \
	  (h, s, n))                                                        \
	V(curl_free, (void *p), (p))                                        \
	X(struct curl_slist *, curl_slist_append,                           \
	  (struct curl_slist * l, const char *s), (l, s))                   \
	V(curl_slist_free_all, (struct curl_slist * l), (l))                \
	X(time_t, curl_getdate, (const char *p, const time_t *unused),      \
	  (p, unused))                                                      \
	X(CURLHcode, curl_easy_header,                                      \
	  (CURL * h, const char *name, size_t i, unsigned int origin,       \
	   int request, struct curl_header **hout),                         \
	  (h, name, i, origin, request, hout))                              \
	H(curl_easy_setopt)                                                 \
	H(curl_easy_getinfo)

LAZY_LIBRARY(CURL_FUNCTIONS, "libcurl.so.4", "HTTP (the HTTP agent, the "
					      "forge, webhooks)")

/* Any function pointer, as passed through the ... of curl_easy_setopt. */
typedef void (*any_fn)(void);

CURLcode
curl_easy_setopt(CURL *h, CURLoption opt, ...)
{
	__typeof__(curl_easy_setopt) *fn = lazy_fn(&lib, LAZY_curl_easy_setopt);
	CURLcode rc;
	va_list ap;

	va_start(ap, opt);
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		rc = fn(h, opt, va_arg(ap, long));
	else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
		rc = fn(h, opt, va_arg(ap, void *));
	else if (opt < CURLOPTTYPE_OFF_T)
		rc = fn(h, opt, va_arg(ap, any_fn));
	else if (opt < CURLOPTTYPE_BLOB)
		rc = fn(h, opt, va_arg(ap, curl_off_t));
	else
		rc = fn(h, opt, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

CURLcode
curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
	__typeof__(curl_easy_getinfo) *fn =
		lazy_fn(&lib, LAZY_curl_easy_getinfo);
	CURLcode rc;
	va_list ap;

	/* every CURLINFO_* takes a pointer to where the answer goes */
	va_start(ap, info);
	rc = fn(h, info, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

int
lazy_curl_load(struct err *e)
{
	return lazy_load(&lib, e);
}
