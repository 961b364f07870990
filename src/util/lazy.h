/*
 * Shared libraries loaded when a command first needs them, not at every
 * start: libpq (a postgres:// store), libcurl (the HTTP agent, the forge,
 * webhooks) and libcrypto (receipts, webhook signatures). baton is not
 * linked with them; src/util/lazy/<lib>.c defines each function baton
 * calls, with the prototype of the library's own header (a mismatch does
 * not compile), as a trampoline that opens the library with dlopen on
 * the first call and jumps to the real function. `baton status` and the
 * other commands that need none of them never load them, nor the dozens
 * of libraries they pull in.
 */
#ifndef BATON_UTIL_LAZY_H
#define BATON_UTIL_LAZY_H

#include <pthread.h>
#include <stddef.h>

struct err;

/* One library: filled statically by its file under src/util/lazy/. */
struct lazy_lib {
	const char *soname;	  /* "libpq.so.5" */
	const char *feature;	  /* "PostgreSQL support", for the error */
	const char *const *names; /* the functions, nr of them */
	void **fns;		  /* resolved here, nr of them */
	size_t nr;
	pthread_once_t once;
	void (*init)(void); /* lazy_open(this), for pthread_once */
	char msg[512]; /* why loading failed; "" when it worked */
};

/* What lib->init calls, once: opens and resolves, or fills lib->msg. */
void lazy_open(struct lazy_lib *lib);

/*
 * Opens lib and resolves all its functions, once per process (thread
 * safe; a failure is remembered). 0, or BATON_ENOTFOUND with "FEATURE
 * needs SONAME: DLERROR" in e when the library or a function is missing.
 */
int lazy_load(struct lazy_lib *lib, struct err *e);
/*
 * The function i of lib, loading lib first. When it cannot be loaded the
 * process exits with "baton: FEATURE needs SONAME: DLERROR" on stderr:
 * a trampoline has no error to return, so callers that can fail
 * gracefully call the library's lazy_*_load first.
 */
void *lazy_fn(struct lazy_lib *lib, size_t i);

/* lazy_load for each library baton loads on demand. */
int lazy_pq_load(struct err *e);
int lazy_curl_load(struct err *e);
int lazy_crypto_load(struct err *e);
int lazy_mhd_load(struct err *e);
int lazy_wslay_load(struct err *e);

/*
 * For a file under src/util/lazy/: with LIST(X, V, H) the library's
 * functions as X(RET, NAME, (PARAMS), (ARGS)), V(NAME, (PARAMS), (ARGS))
 * for a void one, H(NAME) for one whose trampoline the file writes by
 * hand (a variadic one, using LAZY_NAME as its index), defines the
 * table, the struct lazy_lib named lib and the other trampolines.
 */
#define LAZY__ENUM(r, n, p, a) LAZY_##n,
#define LAZY__VENUM(n, p, a) LAZY_##n,
#define LAZY__NAME(r, n, p, a) #n,
#define LAZY__VNAME(n, p, a) #n,
#define LAZY__HENUM(n) LAZY_##n,
#define LAZY__HNAME(n) #n,
#define LAZY__HDEF(n)
#define LAZY__DEF(r, n, p, a)                                        \
	r n p                                                        \
	{                                                            \
		__typeof__(n) *fn_ = lazy_fn(&lib, LAZY_##n);        \
		return fn_ a;                                        \
	}
#define LAZY__VDEF(n, p, a)                                          \
	void n p                                                     \
	{                                                            \
		__typeof__(n) *fn_ = lazy_fn(&lib, LAZY_##n);        \
		fn_ a;                                               \
	}
#define LAZY_LIBRARY(LIST, SONAME, FEATURE)                          \
	enum { LIST(LAZY__ENUM, LAZY__VENUM, LAZY__HENUM) LAZY__NR };              \
	static const char *const names[] = {                         \
		LIST(LAZY__NAME, LAZY__VNAME, LAZY__HNAME) };        \
	static void *fns[LAZY__NR];                                  \
	static void lazy_init(void);                                 \
	static struct lazy_lib lib = {                               \
		.soname = SONAME, .feature = FEATURE,                \
		.names = names, .fns = fns, .nr = LAZY__NR,          \
		.once = PTHREAD_ONCE_INIT, .init = lazy_init,        \
	};                                                           \
	static void lazy_init(void)                                  \
	{                                                            \
		lazy_open(&lib);                                     \
	}                                                            \
	LIST(LAZY__DEF, LAZY__VDEF, LAZY__HDEF)

#endif
