/*
 * Tests for util/spawn: real children through /bin/sh -c snippets. They
 * cover exit statuses, capture of each stream, stdin feeding, output
 * floods, timeouts and the TERM -> KILL sequence on whole process groups,
 * grandchildren left behind, exec and chdir failures, events, the
 * environment, and spawn_capture's messages.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* Fills o->argv with /bin/sh -c script. */
static void
sh(struct spawn_opts *o, const char *script)
{
	strvec_pushl(&o->argv, "/bin/sh", "-c", script, NULL);
}

/* A path in the test's directory; returns a static buffer. */
static const char *
tmp_path(const char *name)
{
	static char path[4][4096];
	static int i;

	i = (i + 1) % 4;
	snprintf(path[i], sizeof(path[i]), "%s/%s", test_tmpdir(), name);
	return path[i];
}

/* The first number in file path, or -1. */
static long
read_pid(const char *path)
{
	char line[64];
	FILE *f = fopen(path, "r");
	long pid = -1;

	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		pid = strtol(line, NULL, 10);
	fclose(f);
	return pid;
}

/* Whether pid runs (exists and is not a zombie waiting for init). */
static int
proc_alive(long pid)
{
	char path[64], line[256], *p;
	FILE *f;
	int alive = 0;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(line, sizeof(line), f)) {
		p = strrchr(line, ')');
		alive = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
	}
	fclose(f);
	return alive;
}

static long long
file_size(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -1;
	return (long long)st.st_size;
}

static char *
read_file(const char *path)
{
	struct buf b = BUF_INIT;
	char chunk[4096];
	size_t n;
	FILE *f = fopen(path, "r");

	if (!f)
		return NULL;
	for (;;) {
		n = fread(chunk, 1, sizeof(chunk), f);
		if (!n)
			break;
		buf_add(&b, chunk, n);
	}
	fclose(f);
	return buf_detach(&b, NULL);
}

TEST(exit_code)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;

	sh(&o, "exit 3");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 3);
	ASSERT_EQ(r.timed_out, 0);
	ASSERT_EQ(r.stopped, 0);
	ASSERT(r.duration_ms >= 0 && r.duration_ms < 2000);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(signal_status)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;

	sh(&o, "kill -KILL $$");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 128 + SIGKILL);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(stdout_stderr_separate)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	char *f1, *f2;
	FILE *f;

	/* Files are appended to, not truncated. */
	f = fopen(tmp_path("out.log"), "w");
	ASSERT(f != NULL);
	fputs("before\n", f);
	fclose(f);
	sh(&o, "echo out; echo err >&2; echo out2");
	o.out_path = tmp_path("out.log");
	o.err_path = tmp_path("err.log");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 0);
	ASSERT_STREQ(r.out.ptr, "out\nout2\n");
	ASSERT_STREQ(r.err.ptr, "err\n");
	ASSERT_EQ(r.out_bytes, 9);
	ASSERT_EQ(r.err_bytes, 4);
	f1 = read_file(o.out_path);
	f2 = read_file(o.err_path);
	ASSERT_STREQ(f1, "before\nout\nout2\n");
	ASSERT_STREQ(f2, "err\n");
	free(f1);
	free(f2);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(merge_err)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	char *f1;

	sh(&o, "echo a; echo b >&2; echo c");
	o.merge_err = 1;
	o.out_path = tmp_path("merged.log");
	o.err_path = tmp_path("unused.log");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_STREQ(r.out.ptr, "a\nb\nc\n");
	ASSERT_STREQ(r.err.ptr, "");
	ASSERT_EQ(r.out_bytes, 6);
	ASSERT_EQ(r.err_bytes, 0);
	f1 = read_file(o.out_path);
	ASSERT_STREQ(f1, "a\nb\nc\n");
	ASSERT_EQ(file_size(o.err_path), -1);
	free(f1);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(bad_out_path)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;

	sh(&o, "exit 0");
	o.out_path = "/nonexistent-dir/x.log";
	ASSERT_EQ(spawn_run(&o, &r, &e), -ENOENT);
	ASSERT_CONTAINS(e.msg, "cannot open '/nonexistent-dir/x.log'");
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(stdin_fed)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;

	strvec_push(&o.argv, "cat");
	o.in = "hello\nworld\n";
	o.in_len = strlen(o.in);
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 0);
	ASSERT_STREQ(r.out.ptr, "hello\nworld\n");
	spawn_result_release(&r);

	/* Empty input: stdin is closed at once, cat sees EOF. */
	o.in = "";
	o.in_len = 0;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 0);
	ASSERT_EQ(r.out_bytes, 0);
	spawn_result_release(&r);

	/* No input: /dev/null. */
	o.in = NULL;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 0);
	ASSERT_EQ(r.out_bytes, 0);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(stdin_large_through_cat)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	size_t n = 1024 * 1024, i;
	char *in = malloc(n);

	for (i = 0; i < n; i++)
		in[i] = (char)('a' + i % 26);
	strvec_push(&o.argv, "cat");
	o.in = in;
	o.in_len = n;
	o.out_path = tmp_path("cat.out");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 0);
	ASSERT_EQ(r.out_bytes, n);
	ASSERT_EQ(r.out.len, 64 * 1024); /* the default tail */
	ASSERT(!memcmp(r.out.ptr, in + n - r.out.len, r.out.len));
	ASSERT_EQ(file_size(o.out_path), (long long)n);
	free(in);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(stdin_large_not_read)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	size_t n = 1024 * 1024;
	char *in = calloc(1, n);
	struct sigaction sa;

	sh(&o, "sleep 0.1; echo done; exit 4");
	o.in = in;
	o.in_len = n;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 4);
	ASSERT_STREQ(r.out.ptr, "done\n");
	ASSERT(r.duration_ms < 3000);
	/* SIGPIPE (ignored during the run) and SIGCHLD are restored. */
	sigaction(SIGPIPE, NULL, &sa);
	ASSERT(sa.sa_handler == SIG_DFL);
	sigaction(SIGCHLD, NULL, &sa);
	ASSERT(sa.sa_handler == SIG_DFL);
	free(in);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(output_flood)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	size_t i;

	sh(&o, "head -c 50000000 /dev/zero | tr '\\0' x; echo tail >&2");
	o.tail_max = 4096;
	o.out_path = tmp_path("flood.out");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 0);
	ASSERT_EQ(r.out_bytes, 50000000);
	ASSERT_EQ(r.out.len, 4096);
	for (i = 0; i < r.out.len; i++)
		ASSERT_EQ(r.out.ptr[i], 'x');
	ASSERT_STREQ(r.err.ptr, "tail\n");
	ASSERT_EQ(file_size(o.out_path), 50000000);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(timeout_kills_group)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	const char *pidfile = tmp_path("grandchild.pid");
	char *script;
	long gpid;

	script = xasprintf("sleep 100 & echo $! > '%s'; sleep 100", pidfile);
	sh(&o, script);
	o.timeout_ms = 300;
	o.kill_grace_ms = 2000;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.timed_out, 1);
	ASSERT_EQ(r.stopped, 0);
	ASSERT_EQ(r.status, 128 + SIGTERM);
	ASSERT(r.duration_ms >= 300 && r.duration_ms < 2000);
	gpid = read_pid(pidfile);
	ASSERT(gpid > 0);
	ASSERT_EQ(proc_alive(gpid), 0);
	free(script);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(term_ignored_then_killed)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;

	/* The ignored TERM is inherited by the loop's sleeps too. */
	sh(&o, "trap '' TERM; while :; do sleep 0.05; done");
	o.timeout_ms = 200;
	o.kill_grace_ms = 300;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.timed_out, 1);
	ASSERT_EQ(r.status, 128 + SIGKILL);
	ASSERT(r.duration_ms >= 500 && r.duration_ms < 3000);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(exec_failure)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;

	strvec_pushl(&o.argv, "baton-no-such-program", "x", NULL);
	ASSERT_EQ(spawn_run(&o, &r, &e), -ENOENT);
	ASSERT_EQ(e.rc, -ENOENT);
	ASSERT_STREQ(e.msg, "cannot run 'baton-no-such-program': "
			    "No such file or directory");
	ASSERT_EQ(r.status, 127);
	spawn_result_release(&r);
	spawn_opts_release(&o);

	/* Found but not executable. */
	strvec_push(&o.argv, "/dev/null");
	ASSERT_EQ(spawn_run(&o, &r, &e), -EACCES);
	ASSERT_CONTAINS(e.msg, "cannot run '/dev/null'");
	spawn_result_release(&r);
	spawn_opts_release(&o);

	ASSERT_EQ(spawn_run(&o, &r, &e), BATON_EINVAL);
	spawn_result_release(&r);
}

TEST(cwd)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	char *real = realpath(test_tmpdir(), NULL);

	sh(&o, "pwd -P");
	o.cwd = test_tmpdir();
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	buf_rtrim(&r.out);
	ASSERT_STREQ(r.out.ptr, real);
	spawn_result_release(&r);

	o.cwd = "/nonexistent/baton-dir";
	ASSERT_EQ(spawn_run(&o, &r, &e), -ENOENT);
	ASSERT_STREQ(e.msg, "cannot run '/bin/sh' in '/nonexistent/baton-dir': "
			    "No such file or directory");
	free(real);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

struct events {
	int started, ticks, wakes, stop_at_tick, stop_on_wake;
	pid_t pid;
	int wake_fd;
	int drained; /* the wake pipe was empty when WAKE came */
};

static int
on_event(void *arg, enum spawn_event ev, pid_t pid)
{
	struct events *x = arg;
	char c;

	switch (ev) {
	case SPAWN_EV_STARTED:
		x->started++;
		x->pid = pid;
		return 0;
	case SPAWN_EV_TICK:
		x->ticks++;
		return x->stop_at_tick && x->ticks >= x->stop_at_tick;
	case SPAWN_EV_WAKE:
		x->wakes++;
		x->drained = read(x->wake_fd, &c, 1) < 0 && errno == EAGAIN;
		return x->stop_on_wake;
	}
	return 0;
}

TEST(stop_on_tick)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	struct events x = {.stop_at_tick = 3, .wake_fd = -1};

	sh(&o, "sleep 100");
	o.tick_ms = 50;
	o.on_event = on_event;
	o.arg = &x;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(x.started, 1);
	ASSERT(x.pid > 0);
	ASSERT(x.ticks >= 3);
	ASSERT_EQ(r.stopped, 1);
	ASSERT_EQ(r.timed_out, 0);
	ASSERT_EQ(r.status, 128 + SIGTERM);
	ASSERT(r.duration_ms >= 150 && r.duration_ms < 2000);
	ASSERT_EQ(spawn_group_alive(x.pid), 0);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(stop_on_wake)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	struct events x = {.stop_on_wake = 1};
	int p[2];

	ASSERT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	ASSERT_EQ(write(p[1], "wake", 4), 4);
	x.wake_fd = p[0];
	sh(&o, "sleep 100");
	o.wake_fd = p[0];
	o.on_event = on_event;
	o.arg = &x;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(x.started, 1);
	ASSERT_EQ(x.wakes, 1);
	ASSERT_EQ(x.drained, 1);
	ASSERT_EQ(r.stopped, 1);
	ASSERT_EQ(r.status, 128 + SIGTERM);
	ASSERT(r.duration_ms < 2000);
	close(p[0]);
	close(p[1]);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(wake_without_stop)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	struct events x = {0};
	int p[2];

	/* The writer closes: WAKE once, then the fd is no longer watched. */
	ASSERT_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	ASSERT_EQ(write(p[1], "w", 1), 1);
	close(p[1]);
	x.wake_fd = p[0];
	sh(&o, "sleep 0.2; echo ok");
	o.wake_fd = p[0];
	o.on_event = on_event;
	o.arg = &x;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(x.wakes, 1);
	ASSERT_EQ(r.stopped, 0);
	ASSERT_EQ(r.status, 0);
	ASSERT_STREQ(r.out.ptr, "ok\n");
	close(p[0]);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(env)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;

	setenv("BATON_T_OLD", "old", 1);
	setenv("BATON_T_KEEP", "kept", 1);
	setenv("BATON_T_GONE", "gone", 1);
	sh(&o, "echo \"$BATON_T_OLD $BATON_T_NEW $BATON_T_KEEP "
	       "${BATON_T_GONE-unset}\"; env | grep -c '^BATON_T_OLD='");
	strvec_pushl(&o.env, "BATON_T_OLD=first", "BATON_T_NEW=new",
		     "BATON_T_OLD=replaced", "BATON_T_GONE", NULL);
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_STREQ(r.out.ptr, "replaced new kept unset\n1\n");
	ASSERT_STREQ(getenv("BATON_T_OLD"), "old");
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(grandchild_killed_after_exit)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	const char *pidfile = tmp_path("bg.pid");
	char *script;
	long gpid;

	/* The background sleep keeps stdout open after sh exits. */
	script = xasprintf("sleep 100 & echo $! > '%s'; echo done", pidfile);
	sh(&o, script);
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 0);
	ASSERT_EQ(r.timed_out, 0);
	ASSERT_STREQ(r.out.ptr, "done\n");
	ASSERT(r.duration_ms < 2000);
	gpid = read_pid(pidfile);
	ASSERT(gpid > 0);
	ASSERT_EQ(proc_alive(gpid), 0);
	free(script);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(escaped_grandchild_does_not_hang)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	const char *pidfile = tmp_path("escaped.pid");
	char *script;
	long gpid;

	/*
	 * setsid takes the sleep out of the group, still holding stdout:
	 * the run ends once the group is empty, without waiting for EOF.
	 */
	script = xasprintf("setsid sh -c 'echo $$ > %s.tmp; mv %s.tmp %s; "
			   "exec sleep 100' & "
			   "while [ ! -f %s ]; do sleep 0.01; done; echo hi",
			   pidfile, pidfile, pidfile, pidfile);
	sh(&o, script);
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 0);
	ASSERT_STREQ(r.out.ptr, "hi\n");
	ASSERT(r.duration_ms < 2000);
	gpid = read_pid(pidfile);
	ASSERT(gpid > 0);
	ASSERT(proc_alive(gpid));
	ASSERT_EQ(spawn_kill_group((pid_t)gpid, 1000), 1);
	ASSERT_EQ(proc_alive(gpid), 0);
	free(script);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(kill_group)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	struct events x = {.wake_fd = -1};
	const char *pidfile = tmp_path("orphan.pid");
	char *script;
	long pgid;

	/* A dead group: nothing to do. */
	sh(&o, "exit 0");
	o.on_event = on_event;
	o.arg = &x;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT(x.pid > 0);
	ASSERT_EQ(spawn_group_alive(x.pid), 0);
	ASSERT_EQ(spawn_kill_group(x.pid, 100), 0);
	spawn_result_release(&r);
	spawn_opts_release(&o);

	/* An orphan group (its own session) that ignores TERM. */
	script = xasprintf("setsid sh -c 'trap \"\" TERM; echo $$ > %s.tmp; "
			   "mv %s.tmp %s; sleep 100; sleep 100' "
			   ">/dev/null 2>&1 & "
			   "while [ ! -f %s ]; do sleep 0.01; done",
			   pidfile, pidfile, pidfile, pidfile);
	sh(&o, script);
	o.timeout_ms = 5000;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 0);
	pgid = read_pid(pidfile);
	ASSERT(pgid > 0);
	ASSERT_EQ(spawn_group_alive((pid_t)pgid), 1);
	ASSERT_EQ(spawn_kill_group((pid_t)pgid, 200), 1);
	ASSERT_EQ(spawn_group_alive((pid_t)pgid), 0);
	ASSERT_EQ(proc_alive(pgid), 0);

	/* Refused: ourselves, everything. */
	ASSERT_EQ(spawn_kill_group(0, 10), 0);
	ASSERT_EQ(spawn_kill_group(1, 10), 0);
	ASSERT_EQ(spawn_kill_group(getpgrp(), 10), 0);
	free(script);
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(signal_pid)
{
	ASSERT_EQ(spawn_signal(getpid(), 0), 0);
	ASSERT_EQ(spawn_signal(0, SIGTERM), -EINVAL);
	ASSERT_EQ(spawn_signal(-1, SIGTERM), -EINVAL);
	ASSERT_EQ(spawn_group_alive(getpgrp()), 1);
}

/* A child of spawn_fork_call: exits with *arg, or waits for a signal. */
static int
child_exits(void *arg)
{
	int code = *(int *)arg;

	if (code < 0)
		pause();
	return code;
}

TEST(fork_call_runs_fn_in_a_child)
{
	pid_t pid = 0, me = getpid();
	int code = 7, st = 0;

	ASSERT_EQ(spawn_fork_call(child_exits, &code, 0, &pid), 0);
	ASSERT(pid > 0 && pid != me);
	ASSERT_EQ(spawn_reap(pid, &st, 0), pid);
	ASSERT(WIFEXITED(st));
	ASSERT_EQ(WEXITSTATUS(st), 7);
	/* reaped: nothing is left of it */
	ASSERT_EQ(spawn_reap(pid, &st, WNOHANG), -ECHILD);
	ASSERT_EQ(spawn_signal(pid, 0), -ESRCH);
}

TEST(fork_call_signal_and_reap)
{
	pid_t pid = 0;
	int code = -1, st = 0;

	ASSERT_EQ(spawn_fork_call(child_exits, &code, 0, &pid), 0);
	/* alive until signalled: WNOHANG finds nothing */
	ASSERT_EQ(spawn_reap(pid, &st, WNOHANG), 0);
	ASSERT_EQ(spawn_signal(pid, 0), 0);
	ASSERT_EQ(spawn_signal(pid, SIGTERM), 0);
	ASSERT_EQ(spawn_reap(pid, &st, 0), pid);
	ASSERT(WIFSIGNALED(st));
	ASSERT_EQ(WTERMSIG(st), SIGTERM);
	ASSERT_EQ(spawn_reap(-1, NULL, WNOHANG), -ECHILD);
}

/*
 * A child kept in the same step as its fork is spared by the orphan
 * sweep; one forked without the flag is a stray to it, killed.
 */
TEST(fork_call_keep_spares_the_child)
{
	pid_t kept = 0, stray = 0;
	int code = -1, st = 0;

	ASSERT_EQ(spawn_adopt_orphans(), 0);
	ASSERT_EQ(spawn_fork_call(child_exits, &code, SPAWN_FORK_KEEP, &kept),
		  0);
	ASSERT_EQ(spawn_fork_call(child_exits, &code, 0, &stray), 0);
	ASSERT_EQ(spawn_kill_orphans(), 1);
	ASSERT_EQ(spawn_reap(stray, &st, WNOHANG), -ECHILD);
	ASSERT_EQ(spawn_reap(kept, &st, WNOHANG), 0);
	ASSERT_EQ(spawn_signal(kept, SIGKILL), 0);
	ASSERT_EQ(spawn_reap(kept, &st, 0), kept);
	spawn_forget(kept);
}

TEST(inherit_out)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;

	sh(&o, "echo '    (inherit_out: this line is expected)'; exit 5");
	o.inherit_out = 1;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 5);
	ASSERT_EQ(r.out_bytes, 0);
	ASSERT_STREQ(r.out.ptr, "");
	spawn_result_release(&r);
	spawn_opts_release(&o);
}

TEST(run_without_result)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct err e = ERR_INIT;

	sh(&o, "echo fine");
	ASSERT_OK(spawn_run(&o, NULL, &e), &e);
	spawn_opts_release(&o);
	sh(&o, "echo 'fatal: no' >&2; exit 2");
	ASSERT_EQ(spawn_run(&o, NULL, &e), BATON_ECHILD);
	ASSERT_CONTAINS(e.msg, "exited with 2: fatal: no");
	spawn_opts_release(&o);
}

TEST(capture_ok)
{
	const char *argv[] = {"/bin/sh", "-c", "printf 'a b\\nc'", NULL};
	const char *pwd[] = {"pwd", NULL};
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	char *real = realpath(test_tmpdir(), NULL);

	buf_adds(&out, ">");
	ASSERT_OK(spawn_capture(argv, NULL, &out, 100, 5000, &e), &e);
	ASSERT_STREQ(out.ptr, ">a b\nc");
	buf_reset(&out);
	ASSERT_OK(spawn_capture(pwd, real, &out, 0, 0, &e), &e);
	buf_rtrim(&out);
	ASSERT_STREQ(out.ptr, real);
	ASSERT_OK(spawn_capture(argv, NULL, NULL, 0, 5000, &e), &e);
	/* Exactly max bytes is fine. */
	buf_reset(&out);
	ASSERT_OK(spawn_capture(argv, NULL, &out, 5, 5000, &e), &e);
	ASSERT_EQ(out.len, 5);
	free(real);
	buf_release(&out);
}

TEST(capture_fails)
{
	const char *script = "echo progress; echo 'error: one' >&2; "
			     "echo '  hint: two  ' >&2; echo >&2; "
			     "echo 'fatal: three' >&2; exit 128";
	const char *fail[] = {"/bin/sh", "-c", script, "x", "y", NULL};
	const char *quiet[] = {"/bin/sh", "-c", "echo only-stdout; exit 1",
			       NULL};
	const char *big[] = {"head", "-c", "2000", "/dev/zero", NULL};
	const char *slow[] = {"sleep", "10", NULL};
	const char *missing[] = {"baton-no-such-program", NULL};
	struct strvec git = STRVEC_INIT;
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	int64_t t0;

	buf_adds(&out, "keep");
	ASSERT_EQ(spawn_capture(fail, NULL, &out, 100, 5000, &e), BATON_ECHILD);
	ASSERT_EQ(e.rc, BATON_ECHILD);
	ASSERT_CONTAINS(e.msg, "'/bin/sh -c echo progress");
	ASSERT_CONTAINS(e.msg, "x ...' exited with 128: "
			       "error: one; hint: two; fatal: three");
	ASSERT_STREQ(out.ptr, "keep"); /* untouched on failure */

	ASSERT_EQ(spawn_capture(quiet, NULL, NULL, 0, 0, &e), BATON_ECHILD);
	ASSERT_CONTAINS(e.msg, "exited with 1: only-stdout");

	ASSERT_EQ(spawn_capture(big, NULL, &out, 1000, 5000, &e), BATON_ECHILD);
	ASSERT_STREQ(e.msg, "output of 'head -c 2000 /dev/zero' exceeds "
			    "1000 bytes");
	ASSERT_STREQ(out.ptr, "keep");

	t0 = time_mono_ms();
	ASSERT_EQ(spawn_capture(slow, NULL, &out, 0, 200, &e), BATON_ETIMEDOUT);
	ASSERT_STREQ(e.msg, "'sleep 10' timed out after 200 ms");
	ASSERT(time_mono_ms() - t0 < 2000);

	ASSERT_EQ(spawn_capture(missing, NULL, &out, 0, 0, &e), -ENOENT);
	ASSERT_CONTAINS(e.msg, "cannot run 'baton-no-such-program'");

	strvec_pushl(&git, "git", "-C", "/nonexistent", "worktree", "add", "-b",
		     "br", "/tmp/x", NULL);
	ASSERT_EQ(spawn_capture(git.v, NULL, &out, 0, 5000, &e), BATON_ECHILD);
	ASSERT_CONTAINS(e.msg, "'git worktree add -b ...' exited with 128: ");
	strvec_clear(&git);
	buf_release(&out);
}

/* Number of open descriptors of this process. */
static int
count_fds(void)
{
	char path[64];
	int fd, n = 0;

	for (fd = 0; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (access(path, F_OK) == 0)
			n++;
	}
	return n;
}

TEST(no_fd_leaks)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	int fd, before;

	/* Whatever we inherited stays ours: the child gets exactly 0-2. */
	for (fd = 3; fd < 1024; fd++)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	sh(&o, "ls /proc/$$/fd"); /* no pipeline: sh holds no pipe */
	o.in = "x";
	o.in_len = 1;
	o.out_path = tmp_path("fds.out");
	o.err_path = tmp_path("fds.err");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_STREQ(r.out.ptr, "0\n1\n2\n");
	spawn_result_release(&r);

	/* The SIGCHLD pipe now exists; nothing else may stay open. */
	before = count_fds();
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	spawn_result_release(&r);
	o.cwd = "/nonexistent";
	ASSERT_EQ(spawn_run(&o, &r, &e), -ENOENT);
	spawn_result_release(&r);
	o.cwd = NULL;
	o.timeout_ms = 100;
	spawn_opts_release(&o);
	sh(&o, "sleep 10");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.timed_out, 1);
	spawn_result_release(&r);
	ASSERT_EQ(count_fds(), before);
	spawn_opts_release(&o);
}

TEST(sigchld_blocked_by_caller)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	sigset_t set;

	/* No pipes to wake us: only SIGCHLD can, and the caller blocks it. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sh(&o, "sleep 0.1; exit 6");
	o.inherit_out = 1;
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.status, 6);
	ASSERT(r.duration_ms < 2000);
	sigprocmask(SIG_BLOCK, NULL, &set);
	ASSERT(sigismember(&set, SIGCHLD));
	spawn_result_release(&r);
	spawn_opts_release(&o);
}
