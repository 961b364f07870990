/*
 * The unit-test runner behind test.h: forks each registered test with a
 * timeout (BATON_TEST_TIMEOUT seconds, default 60) and prints one line per
 * test and a summary line "N passed, N failed".
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define HAVE_LSAN 1
#endif

struct test {
	const char *name;
	test_fn *fn;
};

static struct test tests[512];
static int ntests;
static char tmpdir[4096];

void
test_register(const char *name, test_fn *fn)
{
	if (ntests == (int)(sizeof(tests) / sizeof(tests[0]))) {
		fprintf(stderr, "too many tests\n");
		abort();
	}
	tests[ntests].name = name;
	tests[ntests].fn = fn;
	ntests++;
}

void
test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "    %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(1);
}

const char *
test_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR");

		snprintf(tmpdir, sizeof(tmpdir), "%s/baton-test-XXXXXX",
			 base ? base : "/tmp");
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			_exit(1);
		}
	}
	return tmpdir;
}

static void
rm_tmpdir(void)
{
	pid_t pid;

	if (!tmpdir[0])
		return;
	pid = fork();
	if (pid == 0) {
		execlp("rm", "rm", "-rf", tmpdir, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static int
run_one(const struct test *t, int timeout)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		alarm((unsigned)timeout);
		t->fn();
#ifdef HAVE_LSAN
		/* Tests end with _exit, which skips LeakSanitizer's own
		 * check at exit: run it here so a leak fails its test. */
		if (__lsan_do_recoverable_leak_check())
			_exit(1);
#endif
		rm_tmpdir();
		fflush(NULL);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("ok %s\n", t->name);
		return 0;
	}
	if (WIFSIGNALED(status))
		printf("FAIL %s: %s%s\n", t->name, strsignal(WTERMSIG(status)),
		       WTERMSIG(status) == SIGALRM ? " (timed out)" : "");
	else
		printf("FAIL %s\n", t->name);
	return 1;
}

int
main(int argc, char **argv)
{
	const char *tv = getenv("BATON_TEST_TIMEOUT");
	int timeout = tv ? (int)strtol(tv, NULL, 10) : 60;
	int i, passed = 0, failed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < ntests; i++) {
		if (argc > 1 && !strstr(tests[i].name, argv[1]))
			continue;
		if (run_one(&tests[i], timeout > 0 ? timeout : 60))
			failed++;
		else
			passed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
