/*
 * A tiny unit-test harness. Each TEST() registers itself; the runner forks
 * every test into its own process with a timeout, so a crash or a hang
 * names its test instead of killing the suite (libuv's runner).
 *
 *   TEST(buf_grows) { ... ASSERT_EQ(b.len, 3); ... }
 *
 * Run a test binary with a name to run only tests whose name contains it.
 * Output: "ok NAME" / "FAIL NAME: why", then "N passed, N failed".
 */
#ifndef BATON_TESTS_LIB_TEST_H
#define BATON_TESTS_LIB_TEST_H

#include <stdio.h>
#include <string.h>

typedef void test_fn(void);

void test_register(const char *name, test_fn *fn);
/* Fails the current test: prints where and why, exits the test process. */
_Noreturn void test_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A fresh empty directory for this test, removed when the test passes. */
const char *test_tmpdir(void);

#define TEST(name)                                                             \
	static void test_##name(void);                                         \
	__attribute__((constructor)) static void register_##name(void)        \
	{                                                                      \
		test_register(#name, test_##name);                             \
	}                                                                      \
	static void test_##name(void)

#define ASSERT(cond)                                                           \
	do {                                                                   \
		if (!(cond))                                                   \
			test_fail(__FILE__, __LINE__, "assertion failed: %s",  \
				  #cond);                                      \
	} while (0)

#define ASSERT_EQ(a, b)                                                        \
	do {                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);            \
		if (a_ != b_)                                                  \
			test_fail(__FILE__, __LINE__,                          \
				  "%s == %s: %lld != %lld", #a, #b, a_, b_);   \
	} while (0)

#define ASSERT_STREQ(a, b)                                                     \
	do {                                                                   \
		const char *a_ = (a), *b_ = (b);                               \
		if (!a_ || !b_ || strcmp(a_, b_))                              \
			test_fail(__FILE__, __LINE__,                          \
				  "%s == %s: \"%s\" != \"%s\"", #a, #b,        \
				  a_ ? a_ : "(null)", b_ ? b_ : "(null)");     \
	} while (0)

/* haystack contains needle */
#define ASSERT_CONTAINS(hay, needle)                                           \
	do {                                                                   \
		const char *h_ = (hay), *n_ = (needle);                        \
		if (!h_ || !strstr(h_, n_))                                    \
			test_fail(__FILE__, __LINE__,                          \
				  "%s does not contain \"%s\": \"%s\"", #hay,  \
				  n_, h_ ? h_ : "(null)");                     \
	} while (0)

/* rc == 0, printing the err message otherwise */
#define ASSERT_OK(rc, e)                                                       \
	do {                                                                   \
		int rc_ = (rc);                                                \
		if (rc_ != 0)                                                  \
			test_fail(__FILE__, __LINE__, "%s: rc %d: %s", #rc,    \
				  rc_, (e)->msg);                              \
	} while (0)

#endif
