/*
 * util/lazy: a library opened on first use. A missing library or
 * function is an error that names the feature, the library and dlerror's
 * reason; a library made with LAZY_LIBRARY resolves its trampolines to
 * the real functions; the three libraries baton loads this way resolve
 * every function they list.
 */
#include "util/compat.h"

#include <jansson.h>
#include <string.h>

#include "test.h"
#include "util/err.h"
#include "util/lazy.h"

static void missing_init(void);
static void nofn_init(void);

static const char *const missing_names[] = { "nothing" };
static void *missing_fns[1];
static struct lazy_lib missing = {
	.soname = "libbaton-missing.so.0",
	.feature = "widget support",
	.names = missing_names,
	.fns = missing_fns,
	.nr = 1,
	.once = PTHREAD_ONCE_INIT,
	.init = missing_init,
};

static void
missing_init(void)
{
	lazy_open(&missing);
}

static const char *const nofn_names[] = { "json_object",
					  "json_no_such_function" };
static void *nofn_fns[2];
static struct lazy_lib nofn = {
	.soname = "libjansson.so.4",
	.feature = "widget support",
	.names = nofn_names,
	.fns = nofn_fns,
	.nr = 2,
	.once = PTHREAD_ONCE_INIT,
	.init = nofn_init,
};

static void
nofn_init(void)
{
	lazy_open(&nofn);
}

/* A library the LAZY_LIBRARY way: one jansson function, its trampoline
 * defined here with the prototype of <jansson.h>. */
#define TEST_FUNCTIONS(X, V, H) \
	X(const char *, jansson_version_str, (void), ())
LAZY_LIBRARY(TEST_FUNCTIONS, "libjansson.so.4", "JSON")

TEST(a_missing_library_names_the_feature_the_library_and_why)
{
	struct err e = ERR_INIT;

	ASSERT_EQ(lazy_load(&missing, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "widget support needs libbaton-missing.so.0: ");
	ASSERT_CONTAINS(e.msg, "cannot open shared object file");
	/* remembered: the second call says the same without trying again */
	memset(&e, 0, sizeof(e));
	ASSERT_EQ(lazy_load(&missing, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "libbaton-missing.so.0");
	ASSERT(!missing_fns[0]);
}

TEST(a_missing_function_is_named)
{
	struct err e = ERR_INIT;

	ASSERT_EQ(lazy_load(&nofn, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "widget support needs libjansson.so.4 with "
			       "json_no_such_function");
}

TEST(a_trampoline_reaches_the_real_function)
{
	struct err e = ERR_INIT;

	ASSERT_STREQ(jansson_version_str(), JANSSON_VERSION);
	ASSERT_OK(lazy_load(&lib, &e), &e);
	ASSERT(fns[LAZY_jansson_version_str] != NULL);
	ASSERT(fns[LAZY_jansson_version_str] != (void *)jansson_version_str);
}

TEST(pq_curl_and_crypto_resolve_every_function_they_list)
{
	struct err e = ERR_INIT;

	ASSERT_OK(lazy_pq_load(&e), &e);
	ASSERT_OK(lazy_curl_load(&e), &e);
	ASSERT_OK(lazy_crypto_load(&e), &e);
}
