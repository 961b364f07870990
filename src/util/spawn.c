/*
 * Running child processes: see spawn.h. This is the only file in baton that
 * calls fork, exec, kill or waitpid (banned.h bans them everywhere else).
 *
 * spawn_run() is one blocking poll() loop per child. Before the fork it
 * builds everything the child needs (argv, envp, pipes, /dev/null), because
 * between fork and exec the child may only make async-signal-safe calls.
 * The child reports a failed chdir or exec as errno down a CLOEXEC status
 * pipe; the parent reads that pipe to EOF, so it knows whether the program
 * started before it calls anything a "running child" (libuv, git).
 *
 * SIGCHLD reaches the loop through a self-pipe: the handler writes a byte,
 * ppoll() (which unblocks SIGCHLD while it waits, in case the caller
 * blocks it) wakes, and the loop reaps with waitpid(pid, WNOHANG). The
 * loop also calls waitpid on every turn, so a wake-up eaten by a nested
 * spawn_run (from an on_event callback) costs nothing.
 *
 * A run moves through these states:
 *
 *   RUNNING ──exit──▶ REAPED ──group empty──▶ drain pipes ──▶ done
 *      │                 │ group still alive: TERM it (grandchildren)
 *      │ timeout / stop  ▼
 *      └──────────▶ TERM sent ──kill_grace_ms──▶ KILL sent ──2 s──▶ done
 *                                                  (give up on the group)
 *
 * The run is over when the direct child has been reaped AND its process
 * group is empty. An agent's stage ends when the agent exits; anything it
 * left running in its group (a dev server, a watcher, "sleep 100 &") would
 * keep editing the worktree and holding our pipes, so it is sent TERM and,
 * after kill_grace_ms, KILL. Once the group is empty nothing in it can
 * write to the pipes any more: what is left in them is read without
 * waiting for EOF, so a process that escaped the group (setsid) and kept
 * the pipe open cannot hang us.
 */
#include "util/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define LOG_MODULE "spawn"
#include "util/log.h"

/* The one file that may call them (banned.h). */
#undef fork
#undef kill
#undef waitpid

extern char **environ;

#define DEFAULT_TAIL	 (64 * 1024)
#define DEFAULT_GRACE_MS 5000
/* After KILL, how long to wait for the group before giving up on it. */
#define GIVE_UP_MS 2000
/* How often the group is checked once the direct child is reaped. */
#define GROUP_POLL_MS 20
/* Reads per stream per poll() wake-up, so one flood cannot starve ticks. */
#define READS_PER_WAKE 16
/* Reads of the final drain: more than any pipe buffer (pipe-max-size). */
#define READS_FINAL 64
#define CHUNK	    (64 * 1024)
/* Lines of stderr quoted in spawn_capture's error message. */
#define CAPTURE_ERR_LINES 3
#define CAPTURE_ERR_BYTES 600
/* Tail spawn_capture keeps of each stream at least, for that message. */
#define CAPTURE_ERR_TAIL (16 * 1024)

/* Children spared by spawn_kill_orphans at most (running + kept). */
#define OWN_MAX 256
/* Orphans killed per round of spawn_kill_orphans at most. */
#define ORPHANS_PER_ROUND 64

/* What the child reports on the status pipe before _exit(127). */
enum child_stage { STAGE_CHDIR = 1, STAGE_EXEC };

struct child_status {
	int stage;
	int errnum;
};

enum kill_phase { PHASE_NONE, PHASE_TERM, PHASE_KILL };

struct run;

/* One output stream of the child: its pipe, file, tail and total. */
struct stream {
	int fd;		  /* read end of the pipe; -1 once at EOF */
	int file;	  /* the stream's file, or -1 */
	const char *path; /* for messages */
	struct buf *tail;
	uint64_t *bytes;
	struct run *talk; /* stdout of a talk: its run, for on_out; or NULL */
};

/* One spawn_run in progress. */
struct run {
	const struct spawn_opts *o;
	struct spawn_result *r;
	pid_t pid;
	int reaped;
	int in_fd; /* write end of the child's stdin, or -1 */
	size_t in_off;
	int wake_fd; /* o->wake_fd while it is open, else -1 */
	struct stream out, err;
	enum kill_phase phase;
	int grace_ms;
	int64_t kill_at;	  /* PHASE_TERM: when to send KILL */
	int64_t give_up_at;	  /* PHASE_KILL: when to stop waiting */
	int64_t deadline;	  /* the timeout, or 0 */
	int64_t next_tick;	  /* or 0 */
	int64_t next_group_check; /* once reaped: rate of /proc scans */
};

/*
 * The SIGCHLD self-pipe. It is created on first use and kept for the life
 * of the process, so nested or repeated runs share it and the handler can
 * never see a closed descriptor.
 */
static int sigchld_pipe[2] = {-1, -1};

/*
 * baton's own children, which spawn_kill_orphans spares: the child of
 * every spawn_run in progress (in any thread) and those kept with
 * spawn_keep. spawn_run holds the lock across fork(), so no other
 * thread's spawn_kill_orphans can see its child before it is listed.
 */
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t own[OWN_MAX];
static size_t own_nr;
/* spawn_adopt_orphans succeeded: this process reaps orphans. */
static int adopting;

/* With own_lock held. A full list (never seen) leaves pid unlisted. */
static void
own_add_locked(pid_t pid)
{
	if (own_nr < OWN_MAX)
		own[own_nr++] = pid;
	else
		log_warn("too many children to track; %ld is not spared",
			 (long)pid);
}

static int
own_has_locked(pid_t pid)
{
	size_t i;

	for (i = 0; i < own_nr; i++)
		if (own[i] == pid)
			return 1;
	return 0;
}

void
spawn_keep(pid_t pid)
{
	pthread_mutex_lock(&own_lock);
	own_add_locked(pid);
	pthread_mutex_unlock(&own_lock);
}

void
spawn_forget(pid_t pid)
{
	size_t i;

	pthread_mutex_lock(&own_lock);
	for (i = 0; i < own_nr; i++) {
		if (own[i] == pid) {
			own[i] = own[--own_nr];
			break;
		}
	}
	pthread_mutex_unlock(&own_lock);
}

static void
on_sigchld(int sig)
{
	int saved = errno;
	ssize_t n;

	(void)sig;
	/* A full pipe already holds a wake-up; nothing is lost. */
	n = write(sigchld_pipe[1], "c", 1);
	(void)n;
	errno = saved;
}

/* Drains a non-blocking pipe. Returns 0, or -1 once the pipe hit EOF. */
static int
drain_fd(int fd)
{
	char junk[512];
	struct pollfd p;
	ssize_t n;

	for (;;) {
		n = read(fd, junk, sizeof(junk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			return -1;
		if (n < 0)
			return 0;
		if ((size_t)n < sizeof(junk)) {
			/*
			 * A short read of a pipe means it is empty. Asking
			 * poll keeps a blocking fd from wedging us.
			 */
			p.fd = fd;
			p.events = POLLIN;
			if (poll(&p, 1, 0) <= 0)
				return 0;
		}
	}
}

static int
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/*
 * Moves fd above 2, so that dup2()ing the child's stdio onto 0, 1 and 2
 * can never overwrite a descriptor still to be dup2()ed (which happens when
 * our own 0, 1 or 2 was closed). Returns the new fd or -errno; on failure
 * fd is closed.
 */
static int
fd_above_stdio(int fd)
{
	int nfd;

	if (fd < 0 || fd > 2)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (nfd < 0)
		nfd = -errno;
	close(fd);
	return nfd;
}

/* pipe2(O_CLOEXEC) with both ends above 2. Returns 0 or -errno. */
static int
make_pipe(int fds[2])
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	p[0] = fd_above_stdio(p[0]);
	p[1] = fd_above_stdio(p[1]);
	if (p[0] < 0 || p[1] < 0) {
		int rc = p[0] < 0 ? p[0] : p[1];

		if (p[0] >= 0)
			close(p[0]);
		if (p[1] >= 0)
			close(p[1]);
		return rc;
	}
	fds[0] = p[0];
	fds[1] = p[1];
	return 0;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int
sigchld_pipe_open(void)
{
	int rc;

	if (sigchld_pipe[0] >= 0)
		return 0;
	rc = make_pipe(sigchld_pipe);
	if (rc < 0)
		return rc;
	if (set_nonblock(sigchld_pipe[0]) < 0 ||
	    set_nonblock(sigchld_pipe[1]) < 0) {
		rc = -errno;
		close_fd(&sigchld_pipe[0]);
		close_fd(&sigchld_pipe[1]);
	}
	return rc;
}

/* Length of the name in "K=V" (or all of "K", which means unset K). */
static size_t
env_key_len(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? (size_t)(eq - kv) : strlen(kv);
}

/* Whether extra (opts->env) names the variable of environ entry kv. */
static int
env_overridden(const struct strvec *extra, const char *kv)
{
	size_t i, n = env_key_len(kv);

	for (i = 0; i < extra->nr; i++)
		if (env_key_len(extra->v[i]) == n &&
		    !strncmp(extra->v[i], kv, n))
			return 1;
	return 0;
}

/*
 * The child's environment: ours, with each opts->env "K=V" replacing any
 * inherited K (and a later entry for K replacing an earlier one). An
 * entry without '=' ("K") removes K, as in git's child_process. The
 * strings are copies owned by envp.
 */
static void
build_env(const struct strvec *extra, struct strvec *envp)
{
	struct strvec later = STRVEC_INIT;
	char **p;
	size_t i;

	for (p = environ; p && *p; p++)
		if (!env_overridden(extra, *p))
			strvec_push(envp, *p);
	for (i = 0; i < extra->nr; i++) {
		later.v = extra->v + i + 1;
		later.nr = extra->nr - i - 1;
		if (strchr(extra->v[i], '=') &&
		    !env_overridden(&later, extra->v[i]))
			strvec_push(envp, extra->v[i]);
	}
}

static int
open_log(const char *path, int *fd, struct err *e)
{
	*fd = -1;
	if (!path)
		return 0;
	/* The run folder is the agent's to write: never follow a link. */
	*fd = fs_open_nofollow(path, O_WRONLY | O_CREAT | O_APPEND, 0644, e);
	if (*fd < 0)
		return *fd;
	*fd = fd_above_stdio(*fd);
	if (*fd < 0)
		return err_set(e, *fd, "cannot open '%s': %s", path,
			       strerror(-*fd));
	return 0;
}

/*
 * The child between fork and exec. Only async-signal-safe calls: every
 * string and descriptor was prepared by the parent. Never returns.
 */
static _Noreturn void
child(const struct spawn_opts *o, const char *const *argv,
      const char *const *envp, pid_t parent, int status_fd, int fd0, int fd1,
      int fd2)
{
	struct child_status st = {STAGE_EXEC, 0};
	struct sigaction dfl;
	sigset_t none;
	ssize_t n;
	int sig;

	/* Signals are all blocked (see spawn_run): reset, then unblock. */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	setsid();
	/* Die with baton; and if baton already died, do not start. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);

	if (o->cwd && chdir(o->cwd) < 0) {
		st.stage = STAGE_CHDIR;
		goto fail;
	}
	if (dup2(fd0, 0) < 0 || (fd1 >= 0 && dup2(fd1, 1) < 0) ||
	    (fd2 >= 0 && dup2(fd2, 2) < 0)) {
		st.stage = STAGE_EXEC;
		goto fail;
	}
	/* PATH is searched as in our environment, not envp (glibc). */
	execvpe(argv[0], (char *const *)argv, (char *const *)envp);
fail:
	st.errnum = errno;
	n = write(status_fd, &st, sizeof(st));
	(void)n;
	_exit(127);
}

/*
 * Reads the child's status pipe to EOF. Returns 0 when exec succeeded,
 * else -errno with the message in e; the child has then exited with 127.
 */
static int
read_child_status(int fd, const struct spawn_opts *o, struct err *e)
{
	struct child_status st;
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(st)) {
		n = read(fd, (char *)&st + got, sizeof(st) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got == 0)
		return 0;
	if (got < sizeof(st) || st.errnum <= 0)
		return err_set(e, BATON_ECHILD, "cannot run '%s': %s",
			       o->argv.v[0], "child failed before exec");
	if (st.stage == STAGE_CHDIR)
		return err_set(e, -st.errnum, "cannot run '%s' in '%s': %s",
			       o->argv.v[0], o->cwd, strerror(st.errnum));
	return err_set(e, -st.errnum, "cannot run '%s': %s", o->argv.v[0],
		       strerror(st.errnum));
}

/* Shell-style exit status: the exit code, or 128 + signal. */
static int
normal_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 255;
}

/* waitpid(pid, WNOHANG). Returns 1 once reaped (status in *st). */
static int
try_reap(pid_t pid, int *st)
{
	pid_t w;

	do
		w = waitpid(pid, st, WNOHANG);
	while (w < 0 && errno == EINTR);
	if (w == pid)
		return 1;
	if (w < 0 && errno == ECHILD) {
		/* Someone else reaped it (a caller's waitpid(-1)). */
		log_warn("child %ld was reaped elsewhere", (long)pid);
		*st = 0xff00; /* exit code 255 */
		return 1;
	}
	return 0;
}

/* TERM to the group, and CONT in case it was stopped (then TERM waits). */
static void
group_term(pid_t pgid)
{
	kill(-pgid, SIGTERM);
	kill(-pgid, SIGCONT);
}

/* What /proc/<pid>/stat says of one process. */
struct proc_stat {
	pid_t pid, ppid, pgrp;
	int live; /* 0 for a zombie (or one being reaped) */
};

/*
 * Calls fn for every process /proc lists, until fn returns nonzero.
 * Processes that exit meanwhile are skipped. Returns fn's nonzero value,
 * 0 when it never stopped, -1 when /proc cannot be read.
 */
static int
each_proc(int (*fn)(const struct proc_stat *ps, void *arg), void *arg)
{
	char path[64], line[256], *p, *end;
	struct proc_stat ps;
	struct dirent *de;
	DIR *d = opendir("/proc");
	int fd, rc = 0;
	ssize_t n;
	long pid;

	if (!d)
		return -1;
	while (!rc && (de = readdir(d))) {
		pid = strtol(de->d_name, &end, 10);
		if (pid <= 0 || *end)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* it just exited */
		n = read(fd, line, sizeof(line) - 1);
		close(fd);
		if (n <= 0)
			continue;
		line[n] = '\0';
		/* "pid (comm) S ppid pgrp ...": comm may hold anything. */
		p = strrchr(line, ')');
		if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
			continue;
		ps.pid = (pid_t)pid;
		ps.live = p[2] != 'Z' && p[2] != 'X';
		ps.ppid = (pid_t)strtol(p + 4, &end, 10);
		ps.pgrp = (pid_t)strtol(end, &end, 10);
		rc = fn(&ps, arg);
	}
	closedir(d);
	return rc;
}

static int
is_live_member(const struct proc_stat *ps, void *arg)
{
	return ps->live && ps->pgrp == *(const pid_t *)arg;
}

/*
 * Whether group pgid has a member that is not a zombie, read from /proc.
 * A zombie runs no code and holds no descriptors, but counts for
 * kill(-pgid, 0) until its parent reaps it; a grandchild's parent is
 * often init, which may take seconds. Returns 1 or 0, or -1 when /proc
 * cannot be read.
 */
static int
group_has_live_member(pid_t pgid)
{
	return each_proc(is_live_member, &pgid);
}

/*
 * kill(-pgid, 0) first, which is cheap and exact when the group is gone;
 * when it says the group exists, /proc tells whether only zombies are
 * left. EPERM means the group exists but is not ours: alive.
 */
int
spawn_group_alive(pid_t pgid)
{
	if (pgid <= 1)
		return 0;
	if (kill(-pgid, 0) < 0 && errno == ESRCH)
		return 0;
	return group_has_live_member(pgid) != 0;
}

/* Starts TERM -> KILL on the run's group, unless already under way. */
static void
run_kill(struct run *run, int64_t now)
{
	if (run->phase != PHASE_NONE)
		return;
	group_term(run->pid);
	run->phase = PHASE_TERM;
	run->kill_at = now + run->grace_ms;
}

/* Advances TERM -> KILL when its time has come. */
static void
run_escalate(struct run *run, int64_t now)
{
	if (run->phase == PHASE_TERM && now >= run->kill_at) {
		kill(-run->pid, SIGKILL);
		run->phase = PHASE_KILL;
		run->give_up_at = now + GIVE_UP_MS;
	}
}

static void talk_out(struct run *run, const char *p, size_t n);

static void
stream_put(struct stream *s, const char *p, size_t n)
{
	int rc;

	if (s->file >= 0) {
		rc = fs_write_all(s->file, p, n);
		if (rc < 0) {
			log_warn("cannot write '%s': %s; the rest of the "
				 "output is not kept there",
				 s->path, strerror(-rc));
			close_fd(&s->file);
		}
	}
	buf_add_tail(s->tail, p, n);
	*s->bytes += n;
	if (s->talk)
		talk_out(s->talk, p, n);
}

/*
 * Reads what the pipe has, at most max_reads chunks. At EOF or on an
 * error the pipe is closed. The chunk is on the heap: a thread of the
 * HTTP server runs children too (an abort's final report runs git), on
 * a stack that libmicrohttpd sizes, not baton.
 */
static void
stream_read(struct stream *s, int max_reads)
{
	char *chunk;
	ssize_t n;

	if (s->fd < 0 || max_reads <= 0)
		return;
	chunk = xmalloc(CHUNK);
	while (s->fd >= 0 && max_reads > 0) {
		n = read(s->fd, chunk, CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			close_fd(&s->fd);
			break;
		}
		stream_put(s, chunk, (size_t)n);
		max_reads--;
	}
	free(chunk);
}

/*
 * A talk's stdin: writes what talk->in holds as far as the pipe takes it,
 * dropping what was written from the buffer; closes stdin once the
 * buffer is empty and close_in is set. EPIPE (the child closed its end)
 * closes it and drops the rest.
 */
static void
feed_talk(struct run *run)
{
	struct spawn_talk *t = run->o->talk;
	ssize_t n;

	while (run->in_fd >= 0 && t->in.len) {
		n = write(run->in_fd, t->in.ptr, t->in.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			close_fd(&run->in_fd);
			break;
		}
		memmove(t->in.ptr, t->in.ptr + n, t->in.len - (size_t)n);
		buf_setlen(&t->in, t->in.len - (size_t)n);
	}
	if (run->in_fd < 0)
		buf_reset(&t->in);
	else if (t->close_in)
		close_fd(&run->in_fd);
}

/* Writes as much of o->in as the pipe takes; closes stdin when done. */
static void
feed_stdin(struct run *run)
{
	const struct spawn_opts *o = run->o;
	ssize_t n;

	if (o->talk) {
		feed_talk(run);
		return;
	}
	while (run->in_fd >= 0 && run->in_off < o->in_len) {
		n = write(run->in_fd, o->in + run->in_off,
			  o->in_len - run->in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			/* EPIPE: the child will not read the rest. */
			close_fd(&run->in_fd);
			return;
		}
		run->in_off += (size_t)n;
	}
	close_fd(&run->in_fd);
}

/* Calls on_event; a nonzero answer stops a child still running. */
static void
run_event(struct run *run, enum spawn_event ev, int64_t now)
{
	const struct spawn_opts *o = run->o;

	if (!o->on_event)
		return;
	if (o->on_event(o->arg, ev, run->pid) && !run->reaped &&
	    run->phase == PHASE_NONE) {
		run->r->stopped = 1;
		run_kill(run, now);
	}
}

/*
 * A chunk of a talk's stdout: to on_out, whose nonzero answer stops the
 * child; what the callback queued for stdin is written at once.
 */
static void
talk_out(struct run *run, const char *p, size_t n)
{
	const struct spawn_talk *t = run->o->talk;

	if (t->on_out && t->on_out(run->o->arg, p, n) && !run->reaped &&
	    run->phase == PHASE_NONE) {
		run->r->stopped = 1;
		run_kill(run, time_mono_ms());
	}
	feed_stdin(run);
}

/* The poll() timeout: the nearest of the run's timers, -1 for none. */
static int
run_poll_timeout(const struct run *run, int64_t now)
{
	int64_t t = -1, at[4];
	size_t i, n = 0;

	if (run->deadline && !run->reaped && run->phase == PHASE_NONE)
		at[n++] = run->deadline;
	if (run->next_tick)
		at[n++] = run->next_tick;
	if (run->phase == PHASE_TERM)
		at[n++] = run->kill_at;
	if (run->reaped)
		at[n++] = now + GROUP_POLL_MS;
	for (i = 0; i < n; i++) {
		int64_t d = at[i] > now ? at[i] - now : 0;

		if (t < 0 || d < t)
			t = d;
	}
	return t > INT32_MAX ? INT32_MAX : (int)t;
}

/*
 * Whether the run is over; called after each turn of the loop. Once the
 * direct child is reaped, its leftover group is killed and the run ends
 * when the group is empty (or, after KILL, when we give up on it).
 */
static int
run_done(struct run *run, int64_t now)
{
	if (!run->reaped || now < run->next_group_check)
		return 0;
	run->next_group_check = now + GROUP_POLL_MS;
	if (spawn_group_alive(run->pid)) {
		run_kill(run, now);
		if (run->phase != PHASE_KILL || now < run->give_up_at)
			return 0;
		log_warn("process group %ld survived SIGKILL; giving up",
			 (long)run->pid);
	}
	/* Nothing in the group can write any more: take what is left. */
	stream_read(&run->out, READS_FINAL);
	stream_read(&run->err, READS_FINAL);
	return 1;
}

/* Appends fd to the poll set; returns its index, or -1 for no fd. */
static int
pfd_add(struct pollfd *pfd, int *n, int fd, short events)
{
	if (fd < 0)
		return -1;
	pfd[*n].fd = fd;
	pfd[*n].events = events;
	pfd[*n].revents = 0;
	return (*n)++;
}

/*
 * The loop: drains stdout and stderr, feeds stdin, reaps, runs timers and
 * events, until run_done(). Returns 0, or -errno if poll() fails (the
 * group has then been killed and the child reaped).
 */
static int
run_loop(struct run *run, struct err *e)
{
	const struct spawn_opts *o = run->o;
	struct pollfd pfd[5];
	int64_t now;
	struct timespec ts;
	sigset_t mask;
	int st = 0, n, i_in, i_out, i_err, i_wake, i_chld, timeout, rc;

	/* Wait with SIGCHLD deliverable even if the caller blocks it. */
	sigprocmask(SIG_BLOCK, NULL, &mask);
	sigdelset(&mask, SIGCHLD);
	for (;;) {
		now = time_mono_ms();
		if (!run->reaped && try_reap(run->pid, &st)) {
			run->reaped = 1;
			run->r->status = normal_status(st);
			run->r->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
			close_fd(&run->in_fd);
		}
		if (!run->reaped && run->deadline && now >= run->deadline &&
		    run->phase == PHASE_NONE) {
			run->r->timed_out = 1;
			run_kill(run, now);
		}
		run_escalate(run, now);
		if (run->next_tick && now >= run->next_tick) {
			run_event(run, SPAWN_EV_TICK, now);
			/* From after the callback, however long it took. */
			now = time_mono_ms();
			run->next_tick = now + o->tick_ms;
		}
		if (run_done(run, now))
			return 0;
		/* what a callback queued (a talk); o->in is fed on POLLOUT */
		if (o->talk && run->in_fd >= 0)
			feed_stdin(run);

		n = 0;
		i_chld = pfd_add(pfd, &n, sigchld_pipe[0], POLLIN);
		i_in = pfd_add(pfd, &n,
			       o->talk && !o->talk->in.len ? -1 : run->in_fd,
			       POLLOUT);
		i_out = pfd_add(pfd, &n, run->out.fd, POLLIN);
		i_err = pfd_add(pfd, &n, run->err.fd, POLLIN);
		i_wake = pfd_add(pfd, &n, run->wake_fd, POLLIN);
		timeout = run_poll_timeout(run, now);
		ts.tv_sec = timeout / 1000;
		ts.tv_nsec = (long)(timeout % 1000) * 1000000L;
		if (ppoll(pfd, (nfds_t)n, timeout < 0 ? NULL : &ts, &mask) <
		    0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			kill(-run->pid, SIGKILL);
			while (waitpid(run->pid, &st, 0) < 0 && errno == EINTR)
				;
			run->reaped = 1;
			run->r->status = normal_status(st);
			run->r->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
			return err_set(e, rc, "cannot wait for '%s': %s",
				       o->argv.v[0], strerror(-rc));
		}
		if (pfd[i_chld].revents)
			drain_fd(sigchld_pipe[0]);
		if (i_in >= 0 && pfd[i_in].revents)
			feed_stdin(run);
		if (i_out >= 0 && pfd[i_out].revents)
			stream_read(&run->out, READS_PER_WAKE);
		if (i_err >= 0 && pfd[i_err].revents)
			stream_read(&run->err, READS_PER_WAKE);
		if (i_wake >= 0 && pfd[i_wake].revents) {
			if (drain_fd(run->wake_fd) < 0 ||
			    (pfd[i_wake].revents & POLLNVAL))
				run->wake_fd = -1; /* closed: stop watching */
			run_event(run, SPAWN_EV_WAKE, time_mono_ms());
		}
	}
}

/*
 * "git worktree add x" for messages: argv[0] and up to three arguments,
 * leaving out "-C dir" (noise in a message), then "..." if more follow.
 */
static void
describe_argv(const char *const *argv, struct buf *b)
{
	int shown = 0;
	size_t i;

	buf_adds(b, argv[0]);
	for (i = 1; argv[i]; i++) {
		if (!strcmp(argv[i], "-C") && argv[i + 1]) {
			i++;
			continue;
		}
		if (shown == 3) {
			buf_adds(b, " ...");
			break;
		}
		buf_addf(b, " %s", argv[i]);
		shown++;
	}
}

static int
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/*
 * The last few non-blank lines of a child's output, each trimmed, joined
 * with "; ", for an error message ("error: x; hint: y; fatal: z").
 */
static void
last_lines(const struct buf *tail, struct buf *b)
{
	const char *beg[CAPTURE_ERR_LINES] = {NULL};
	const char *end[CAPTURE_ERR_LINES] = {NULL};
	const char *lo = tail->ptr, *p = tail->ptr + tail->len, *e, *s;
	int n = 0;

	if (tail->len > CAPTURE_ERR_BYTES)
		lo = p - CAPTURE_ERR_BYTES;
	while (p > lo && n < CAPTURE_ERR_LINES) {
		e = p;
		while (p > lo && p[-1] != '\n')
			p--;
		s = p;
		if (p > lo)
			p--; /* the '\n' before this line */
		while (s < e && is_space(*s))
			s++;
		while (e > s && is_space(e[-1]))
			e--;
		if (e > s) {
			beg[n] = s;
			end[n] = e;
			n++;
		}
	}
	while (n-- > 0) {
		buf_add(b, beg[n], (size_t)(end[n] - beg[n]));
		if (n)
			buf_adds(b, "; ");
	}
}

/*
 * Turns a finished run into an error for callers that want "exit 0 or
 * fail": BATON_ETIMEDOUT, BATON_ECHILD naming the command and quoting the
 * end of its stderr (or of its stdout, when stderr is empty), or 0.
 */
static int
result_error(const char *const *argv, const struct spawn_result *r,
	     int timeout_ms, struct err *e)
{
	struct buf what = BUF_INIT, why = BUF_INIT;
	int rc = 0;

	describe_argv(argv, &what);
	if (r->timed_out) {
		rc = err_set(e, BATON_ETIMEDOUT, "'%s' timed out after %d ms",
			     what.ptr, timeout_ms);
	} else if (r->stopped) {
		rc = err_set(e, BATON_EABORTED, "'%s' was stopped", what.ptr);
	} else if (r->status) {
		last_lines(r->err.len ? &r->err : &r->out, &why);
		rc = err_set(e, BATON_ECHILD, "'%s' exited with %d%s%s",
			     what.ptr, r->status, why.len ? ": " : "", why.ptr);
	}
	buf_release(&what);
	buf_release(&why);
	return rc;
}

void
spawn_opts_release(struct spawn_opts *o)
{
	strvec_clear(&o->argv);
	strvec_clear(&o->env);
}

void
spawn_result_release(struct spawn_result *r)
{
	buf_release(&r->out);
	buf_release(&r->err);
}

/*
 * Runs o->argv; see spawn.h. *out is overwritten (not released) first.
 *
 * The order matters: files, pipes and the environment are made before the
 * fork; SIGCHLD is routed to the self-pipe and SIGPIPE ignored (so that
 * feeding a child that closed its stdin gives EPIPE, not death) for the
 * length of the call, and both are restored before returning. All signals
 * are blocked across fork() so that the child cannot run one of our
 * handlers before it has reset them.
 *
 * With out == NULL (as in STYLE.md's worktree example) the output is
 * discarded and an exit status other than 0 is an error: BATON_ECHILD, or
 * BATON_ETIMEDOUT.
 */
int
spawn_run(const struct spawn_opts *o, struct spawn_result *out, struct err *e)
{
	struct spawn_result local = SPAWN_RESULT_INIT;
	struct spawn_result *r = out ? out : &local;
	struct strvec envp = STRVEC_INIT;
	struct sigaction sa_chld, old_chld, sa_pipe, old_pipe;
	sigset_t all, old_mask;
	struct run run;
	int status_p[2] = {-1, -1}, in_p[2] = {-1, -1};
	int out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
	int devnull = -1, out_file = -1, err_file = -1;
	int fd0, fd1, fd2, rc, handlers = 0;
	int64_t start = time_mono_ms();
	size_t tail_max = o->tail_max ? o->tail_max : DEFAULT_TAIL;
	pid_t parent = getpid(), pid = -1;

	memset(r, 0, sizeof(*r));
	buf_init(&r->out, tail_max);
	buf_init(&r->err, tail_max);
	memset(&run, 0, sizeof(run));
	run.o = o;
	run.r = r;
	run.in_fd = run.out.fd = run.err.fd = -1;
	run.out.file = run.err.file = -1;
	run.wake_fd = o->wake_fd;

	if (!o->argv.nr) {
		rc = err_set(e, BATON_EINVAL, "cannot run an empty command");
		goto out;
	}
	if (o->cwd) {
		/* Programs that trust $PWD (node, bun) must see the cwd
		 * they start in, not ours. */
		struct strvec env = STRVEC_INIT;
		char *abs = realpath(o->cwd, NULL);

		strvec_pushf(&env, "PWD=%s", abs ? abs : o->cwd);
		strvec_pushv(&env, o->env.v);
		build_env(&env, &envp);
		strvec_clear(&env);
		free(abs);
	} else {
		build_env(&o->env, &envp);
	}
	rc = open_log(o->out_path, &out_file, e);
	if (!rc && !o->merge_err)
		rc = open_log(o->err_path, &err_file, e);
	if (rc < 0)
		goto out;
	rc = sigchld_pipe_open();
	if (!rc)
		rc = make_pipe(status_p);
	if (!rc && (o->in || o->talk))
		rc = make_pipe(in_p);
	if (!rc && !o->in && !o->talk) {
		devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		rc = devnull < 0 ? -errno : 0;
		if (!rc) {
			devnull = fd_above_stdio(devnull);
			rc = devnull < 0 ? devnull : 0;
		}
	}
	if (!rc && !o->inherit_out)
		rc = make_pipe(out_p);
	if (!rc && !o->inherit_out && !o->merge_err)
		rc = make_pipe(err_p);
	if (!rc && in_p[1] >= 0)
		rc = set_nonblock(in_p[1]);
	if (!rc && out_p[0] >= 0)
		rc = set_nonblock(out_p[0]);
	if (!rc && err_p[0] >= 0)
		rc = set_nonblock(err_p[0]);
	if (rc < 0) {
		err_set(e, rc, "cannot run '%s': %s", o->argv.v[0],
			strerror(-rc));
		goto out;
	}
	fd0 = o->in || o->talk ? in_p[0] : devnull;
	fd1 = o->inherit_out ? -1 : out_p[1];
	fd2 = o->inherit_out ? -1 : o->merge_err ? out_p[1] : err_p[1];

	memset(&sa_chld, 0, sizeof(sa_chld));
	sa_chld.sa_handler = on_sigchld;
	sa_chld.sa_flags = SA_RESTART | SA_NOCLDSTOP;
	sigemptyset(&sa_chld.sa_mask);
	memset(&sa_pipe, 0, sizeof(sa_pipe));
	sa_pipe.sa_handler = SIG_IGN;
	sigemptyset(&sa_pipe.sa_mask);
	sigaction(SIGCHLD, &sa_chld, &old_chld);
	sigaction(SIGPIPE, &sa_pipe, &old_pipe);
	handlers = 1;

	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old_mask);
	pthread_mutex_lock(&own_lock);
	pid = fork();
	if (pid == 0)
		child(o, o->argv.v, envp.v, parent, status_p[1], fd0, fd1, fd2);
	rc = pid < 0 ? -errno : 0;
	if (pid > 0)
		own_add_locked(pid);
	pthread_mutex_unlock(&own_lock);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	if (rc < 0) {
		err_set(e, rc, "cannot fork for '%s': %s", o->argv.v[0],
			strerror(-rc));
		goto out;
	}

	close_fd(&status_p[1]);
	close_fd(&in_p[0]);
	close_fd(&out_p[1]);
	close_fd(&err_p[1]);
	close_fd(&devnull);
	rc = read_child_status(status_p[0], o, e);
	if (rc < 0) {
		int st;

		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		r->status = 127;
		goto out;
	}

	run.pid = pid;
	run.in_fd = in_p[1];
	in_p[1] = -1;
	run.out = (struct stream){out_p[0], out_file, o->out_path, &r->out,
				  &r->out_bytes, o->talk ? &run : NULL};
	run.err = (struct stream){err_p[0], err_file, o->err_path, &r->err,
				  &r->err_bytes, NULL};
	out_p[0] = err_p[0] = out_file = err_file = -1;
	run.grace_ms =
	    o->kill_grace_ms > 0 ? o->kill_grace_ms : DEFAULT_GRACE_MS;
	if (o->timeout_ms > 0)
		run.deadline = start + o->timeout_ms;
	if (o->tick_ms > 0)
		run.next_tick = start + o->tick_ms;
	if (run.in_fd >= 0)
		feed_stdin(&run); /* closes at once when in_len is 0 */
	run_event(&run, SPAWN_EV_STARTED, time_mono_ms());
	rc = run_loop(&run, e);
	if (rc == 0 && !out)
		rc = result_error(o->argv.v, r, o->timeout_ms, e);
out:
	if (pid > 0)
		spawn_forget(pid);
	r->duration_ms = time_mono_ms() - start;
	if (handlers) {
		sigaction(SIGPIPE, &old_pipe, NULL);
		sigaction(SIGCHLD, &old_chld, NULL);
	}
	close_fd(&run.in_fd);
	close_fd(&run.out.fd);
	close_fd(&run.out.file);
	close_fd(&run.err.fd);
	close_fd(&run.err.file);
	close_fd(&status_p[0]);
	close_fd(&status_p[1]);
	close_fd(&in_p[0]);
	close_fd(&in_p[1]);
	close_fd(&out_p[0]);
	close_fd(&out_p[1]);
	close_fd(&err_p[0]);
	close_fd(&err_p[1]);
	close_fd(&devnull);
	close_fd(&out_file);
	close_fd(&err_file);
	strvec_clear(&envp);
	spawn_result_release(&local);
	return rc;
}

/*
 * Runs a short command and reads its stdout; see spawn.h. stdin is
 * /dev/null. stdout is kept up to max bytes (0: BUF_MAX_GIT_OUTPUT) and
 * more is an error rather than a silent cut, because a caller parsing
 * half of "git status" would act on a lie. out is written only on success.
 */
int
spawn_capture(const char *const *argv, const char *cwd, struct buf *out,
	      size_t max, int timeout_ms, struct err *e)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct buf what = BUF_INIT;
	int rc;

	if (!max)
		max = BUF_MAX_GIT_OUTPUT;
	strvec_pushv(&o.argv, argv);
	o.cwd = cwd;
	o.timeout_ms = timeout_ms;
	/* One byte more than allowed, to tell "exactly max" from "more". */
	o.tail_max = out ? max + 1 : CAPTURE_ERR_TAIL;
	if (o.tail_max < CAPTURE_ERR_TAIL)
		o.tail_max = CAPTURE_ERR_TAIL;
	rc = spawn_run(&o, &r, e);
	if (rc < 0)
		goto out;
	rc = result_error(argv, &r, timeout_ms, e);
	if (rc < 0 || !out)
		goto out;
	describe_argv(argv, &what);
	if (r.out_bytes > max)
		rc = err_set(e, BATON_ECHILD,
			     "output of '%s' exceeds %zu bytes", what.ptr, max);
	else if (buf_add(out, r.out.ptr, r.out.len) < 0)
		rc = err_set(e, BATON_ECHILD,
			     "output of '%s' does not fit in its buffer",
			     what.ptr);
out:
	buf_release(&what);
	spawn_result_release(&r);
	spawn_opts_release(&o);
	return rc;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Waits up to ms for group pgid to empty, reaping its leader if it is our
 * own child (a zombie still counts as a member). Returns 1 if it emptied.
 */
static int
wait_group_gone(pid_t pgid, int ms)
{
	int64_t end = time_mono_ms() + ms;
	int st;

	for (;;) {
		while (waitpid(pgid, &st, WNOHANG) < 0 && errno == EINTR)
			;
		if (!spawn_group_alive(pgid))
			return 1;
		if (time_mono_ms() >= end)
			return 0;
		sleep_ms(20);
	}
}

/*
 * TERM, grace, KILL for a group we may not have started (an orphan of a
 * dead driver). pgid 0 or 1 and our own group are refused (0), since
 * kill(-0) and kill(-1) would hit ourselves or everything.
 */
int
spawn_kill_group(pid_t pgid, int grace_ms)
{
	if (pgid <= 1 || pgid == getpgrp())
		return 0;
	if (kill(-pgid, 0) < 0 && errno == ESRCH)
		return 0;
	if (kill(-pgid, SIGTERM) < 0 && errno == EPERM) {
		log_warn("cannot signal process group %ld: %s", (long)pgid,
			 strerror(errno));
		return 1;
	}
	kill(-pgid, SIGCONT);
	if (wait_group_gone(pgid, grace_ms > 0 ? grace_ms : 0))
		return 1;
	kill(-pgid, SIGKILL);
	if (!wait_group_gone(pgid, 1000))
		log_warn("process group %ld survived SIGKILL", (long)pgid);
	return 1;
}

int
spawn_adopt_orphans(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return -errno;
	adopting = 1;
	return 0;
}

/* What stray_children gathers. */
struct strays {
	pid_t *out;
	int *live;
	size_t max, n;
	pid_t me;
};

static int
add_stray(const struct proc_stat *ps, void *arg)
{
	struct strays *st = arg;

	if (ps->ppid != st->me || own_has_locked(ps->pid))
		return 0;
	st->live[st->n] = ps->live;
	st->out[st->n++] = ps->pid;
	return st->n == st->max;
}

/*
 * The children of this process that baton did not start on purpose,
 * read from /proc: up to max pids in out, with live[i] 0 for a zombie.
 * With own_lock held. Returns how many.
 */
static size_t
stray_children(pid_t *out, int *live, size_t max)
{
	struct strays st = { out, live, max, 0, getpid() };

	if (max)
		each_proc(add_stray, &st);
	return st.n;
}

/* Reaps pid, a child just sent SIGKILL (or a zombie), waiting until end. */
static void
reap_until(pid_t pid, int64_t end)
{
	pid_t w;
	int st;

	for (;;) {
		w = waitpid(pid, &st, WNOHANG);
		if (w == pid || (w < 0 && errno != EINTR))
			return;
		if (time_mono_ms() >= end) {
			log_warn("orphan %ld survived SIGKILL", (long)pid);
			return;
		}
		if (w == 0)
			sleep_ms(5);
	}
}

/*
 * See spawn.h. Kills under own_lock, so a spawn_run starting in another
 * thread cannot have its new child taken for an orphan; reaps outside it.
 */
int
spawn_kill_orphans(void)
{
	pid_t found[ORPHANS_PER_ROUND];
	int live[ORPHANS_PER_ROUND];
	int64_t end = time_mono_ms() + GIVE_UP_MS;
	size_t n, i;
	int killed = 0;

	if (!adopting)
		return 0;
	for (;;) {
		pthread_mutex_lock(&own_lock);
		n = stray_children(found, live, ORPHANS_PER_ROUND);
		for (i = 0; i < n; i++)
			if (live[i])
				kill(found[i], SIGKILL);
		pthread_mutex_unlock(&own_lock);
		if (!n)
			break;
		for (i = 0; i < n; i++) {
			reap_until(found[i], end);
			killed += live[i];
		}
		if (time_mono_ms() >= end) {
			log_warn("orphans are still appearing; giving up");
			break;
		}
	}
	if (killed)
		log_info("killed %d process%s left behind by a child", killed,
			 killed == 1 ? "" : "es");
	return killed;
}

int
spawn_signal(pid_t pid, int sig)
{
	if (pid <= 0)
		return -EINVAL;
	return kill(pid, sig) < 0 ? -errno : 0;
}

/*
 * See spawn.h. The fork happens under own_lock, so that a kept child is
 * on the list before spawn_kill_orphans (another thread) can see it,
 * and so that the child never inherits the lock held by another thread
 * (it would deadlock at its first spawn_run). The child starts with an
 * empty list: its parent's children are not its own.
 */
int
spawn_fork_call(spawn_fork_fn *fn, void *arg, unsigned flags, pid_t *out)
{
	pid_t pid;
	int saved;

	fflush(NULL);
	pthread_mutex_lock(&own_lock);
	pid = fork();
	if (pid == 0) {
		own_nr = 0;
		pthread_mutex_unlock(&own_lock);
		_exit(fn(arg) & 0xff);
	}
	saved = errno;
	if (pid > 0 && (flags & SPAWN_FORK_KEEP))
		own_add_locked(pid);
	pthread_mutex_unlock(&own_lock);
	if (pid < 0)
		return -saved;
	*out = pid;
	return 0;
}

pid_t
spawn_reap(pid_t pid, int *status, int flags)
{
	pid_t w = waitpid(pid, status, flags);

	return w < 0 ? -errno : w;
}
