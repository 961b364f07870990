/*
 * Running child processes: the only code in baton that execs another
 * program or signals and reaps a process it did not make itself
 * (DESIGN.md section 6, STYLE.md section 7).
 *
 * baton also forks copies of itself, each of which runs baton's own code
 * and never execs: serve's workers (sched/serve.c), the HTTP server
 * (server/http.c) and the members of a parallel stage group
 * (engine/kinds/fanout.c). They are made by spawn_fork_call() and signalled
 * and reaped through spawn_signal() and spawn_reap(): fork, kill and
 * waitpid are banned outside spawn.c (banned.h). Each parent reaps its
 * own; a run's driver, which sweeps stray children (spawn_adopt_orphans
 * below), keeps its group members (SPAWN_FORK_KEEP, spawn_keep()) so
 * the sweep leaves them alone.
 *
 * Every child gets its own session and process group (setsid), so the
 * child and all its grandchildren can be signalled as one. Its stdout and
 * stderr are read through non-blocking pipes drained together with poll();
 * each stream goes in full to a file (when asked) and its last tail_max
 * bytes stay in memory, so a child printing 100 MB costs 100 MB of disk and
 * a bounded amount of memory. stdin is fed from memory through the same
 * loop, so a child that never reads its input cannot wedge us.
 *
 *   spawn_run() ──fork──▶ child: sigmask reset, setsid, chdir, dup2, execvp
 *        │                  (exec failure: errno down a CLOEXEC pipe, _exit 127)
 *        ▼
 *   poll(stdin, stdout, stderr, wake_fd, SIGCHLD self-pipe) until
 *   reaped AND both pipes at EOF; on timeout or stop request:
 *   kill(-pgid, TERM), after kill_grace_ms kill(-pgid, KILL)
 */
#ifndef BATON_UTIL_SPAWN_H
#define BATON_UTIL_SPAWN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/strvec.h"

struct err;

enum spawn_event {
	SPAWN_EV_STARTED, /* the child exists; pid (== pgid) is known */
	SPAWN_EV_WAKE,	  /* wake_fd became readable (it has been drained) */
	SPAWN_EV_TICK,	  /* tick_ms passed */
};

/*
 * Called from spawn_run's loop. Return 0 to go on, nonzero to stop the
 * child: its group is sent TERM, then KILL after kill_grace_ms, and the
 * result is marked stopped.
 */
typedef int spawn_event_cb(void *arg, enum spawn_event ev, pid_t pid);

/*
 * A conversation with the child over its stdin and stdout (a protocol
 * such as ACP's JSON-RPC). With spawn_opts.talk set, stdin is a pipe
 * that stays open (o->in is ignored) and is fed from talk->in: bytes a
 * callback appends there are written as the pipe takes them and removed
 * from the front of the buffer; once close_in is set and talk->in is
 * empty, stdin is closed (EOF for the child). Each chunk read from
 * stdout goes to on_out (as well as to the tail and out_path), from the
 * same loop, so a callback may answer at once; its nonzero return stops
 * the child as on_event's does. A child that closed its stdin loses
 * what is queued. The caller owns talk and releases talk->in.
 */
typedef int spawn_out_cb(void *arg, const char *p, size_t len);

struct spawn_talk {
	struct buf in;	     /* queued for stdin; callbacks append */
	int close_in;	     /* close stdin once in is written */
	spawn_out_cb *on_out; /* each chunk of stdout; may be NULL */
};

struct spawn_opts {
	struct strvec argv; /* argv[0] is looked up in PATH */
	struct strvec env;  /* "K=V" entries added to the inherited environment */
	const char *cwd;    /* NULL: the current directory */
	const char *in;	    /* bytes written to stdin; NULL: /dev/null */
	size_t in_len;
	const char *out_path; /* full stdout appended here; NULL: not kept */
	const char *err_path; /* full stderr appended here; NULL: not kept */
	int merge_err;	      /* stderr into the stdout stream and file */
	int inherit_out;      /* stdout/stderr go to ours (no capture) */
	size_t tail_max;      /* bytes of each stream kept; 0: 64 KiB */
	int timeout_ms;	      /* 0: no limit */
	int kill_grace_ms;    /* between TERM and KILL; 0: 5000 */
	int wake_fd;	      /* -1: none */
	int tick_ms;	      /* 0: no ticks */
	spawn_event_cb *on_event;
	void *arg;
	struct spawn_talk *talk; /* NULL: stdin is o->in (see above) */
};

#define SPAWN_OPTS_INIT                                                        \
	{ .argv = STRVEC_INIT, .env = STRVEC_INIT, .wake_fd = -1 }

struct spawn_result {
	int status;	  /* exit code, or 128 + signal number (shell style) */
	int signal;	  /* the signal that killed it, or 0 if it exited */
	int timed_out;	  /* the timeout fired and the group was killed */
	int stopped;	  /* on_event asked to stop and the group was killed */
	struct buf out;	  /* tail of stdout (capped, see tail_max) */
	struct buf err;	  /* tail of stderr */
	uint64_t out_bytes, err_bytes; /* totals, including what was dropped */
	int64_t duration_ms;
};

#define SPAWN_RESULT_INIT { .out = BUF_INIT, .err = BUF_INIT }

void spawn_opts_release(struct spawn_opts *o);
void spawn_result_release(struct spawn_result *r);

/*
 * Runs o->argv to completion (or timeout, or stop). Returns 0 when the
 * child ran, whatever its exit status (read r->status); a negative code
 * when it could not be started (-ENOENT for a missing program, with
 * "cannot run 'x': ..." in e). *out is filled in both cases and must be
 * released by the caller.
 */
int spawn_run(const struct spawn_opts *o, struct spawn_result *out,
	      struct err *e);

/*
 * Convenience for short commands such as git: runs argv in cwd, puts up
 * to max bytes of stdout in out (may be NULL), and returns 0 only when the
 * child exits 0; otherwise BATON_ECHILD with the command and the tail of
 * its stderr in e.
 */
int spawn_capture(const char *const *argv, const char *cwd, struct buf *out,
		  size_t max, int timeout_ms, struct err *e);

/*
 * Signals the whole process group pgid: TERM, then KILL once grace_ms
 * passes while any member is alive. Returns 1 if the group existed, 0 if
 * not. Used for orphans left by a dead driver.
 */
int spawn_kill_group(pid_t pgid, int grace_ms);

/* 1 if any process in group pgid is alive. */
int spawn_group_alive(pid_t pgid);

/*
 * Orphans. An agent can leave its session and group (setsid, a double
 * fork) and so escape the group kill that ends its call; without a
 * sandbox such a daemon would go on editing the worktree after review.
 * A process that drives runs (baton run and resume, a serve worker, a
 * parallel group's member) calls spawn_adopt_orphans() once: with
 * PR_SET_CHILD_SUBREAPER every descendant whose parent dies is
 * reparented to it instead of init. At the end of each agent call (also
 * when it was stopped, aborted or timed out) the engine calls
 * spawn_kill_orphans(), which SIGKILLs and reaps every child of this
 * process that baton did not start on purpose: children of a spawn_run
 * in progress (in any thread) and those registered with spawn_keep()
 * (parallel group members) are spared.
 *
 *   agent ──fork──▶ sh ──setsid, fork──▶ daemon        agent exits: sh and
 *     ▲ reaped by spawn_run                            daemon reparent to
 *   baton (subreaper) ◀────────────────────────────    baton, which kills
 *                                                      them, then whatever
 *                                                      they left, in rounds
 */

/*
 * Makes this process the reaper of its orphaned descendants. Not
 * inherited across fork: each driving process calls it. 0 or -errno.
 */
int spawn_adopt_orphans(void);
/*
 * Registers pid, a child this process forked itself and reaps itself,
 * so that spawn_kill_orphans spares it; spawn_forget once it is reaped.
 * Thread-safe.
 */
void spawn_keep(pid_t pid);
void spawn_forget(pid_t pid);
/*
 * SIGKILLs and reaps every child of this process that is neither running
 * under spawn_run nor kept, round after round (a killed process's own
 * children are reparented to us next), until none is left or about two
 * seconds pass. Zombies of such children are reaped. Returns how many
 * were killed; a no-op unless spawn_adopt_orphans succeeded.
 */
int spawn_kill_orphans(void);

/*
 * kill(pid, sig) for one process (pid > 0; a group is signalled with
 * spawn_kill_group): waking another baton process, stopping a child
 * made by spawn_fork_call, or, with sig 0, asking whether pid exists
 * (-ESRCH when not). 0 or -errno; -EINVAL for pid <= 0.
 */
int spawn_signal(pid_t pid, int sig);

/*
 * Runs fn(arg) in a child: a forked copy of this process, which exits
 * with fn's return value (& 0xff) and never returns here. This is the
 * one way baton runs its own code in a child (spawn_run execs a
 * program). stdio is flushed first, so nothing buffered is written
 * twice. The child keeps every descriptor, the signal handlers and the
 * mask of the caller: fn closes what it must not hold. With
 * SPAWN_FORK_KEEP the child is registered as by spawn_keep() in the
 * same step as the fork, so spawn_kill_orphans (in any thread) never
 * takes it for an orphan; the caller spawn_forget()s it once reaped.
 * Returns 0 and *out (the child's pid) in the parent, or -errno when no
 * child was made (*out untouched). The caller reaps it (spawn_reap).
 */
typedef int spawn_fork_fn(void *arg);
#define SPAWN_FORK_KEEP 0x1u
int spawn_fork_call(spawn_fork_fn *fn, void *arg, unsigned flags, pid_t *out);

/*
 * waitpid(pid, status, flags) for a child made by spawn_fork_call (pid
 * -1: any child): the pid reaped, 0 under WNOHANG when none has ended,
 * or -errno (-ECHILD: nothing left to reap; -EINTR: a signal came, as
 * waitpid says it). status may be NULL.
 */
pid_t spawn_reap(pid_t pid, int *status, int flags);

#endif
