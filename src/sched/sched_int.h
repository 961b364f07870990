/*
 * Shared inside sched/: helpers between the worker, the sweeps, the
 * judge and the supervisor.
 */
#ifndef BATON_SCHED_SCHED_INT_H
#define BATON_SCHED_SCHED_INT_H

#include <stdint.h>

struct config;
struct event;
struct err;
struct run;
struct sched_ctx;
struct task;
struct workspace;

/* wake.c: the directory of the serve FIFOs (caller frees). */
char *sched__wake_dir(const struct workspace *ws);

/* tasks.c: what the agents read of a task: its title, then its body. */
char *sched__task_text(const struct task *t);

/*
 * tasks.c: cuts a task baton makes itself (a rework with the judge's
 * findings, a merge conflict) to TASK_TEXT_MAX, so that sched_task_add
 * takes it and its runs can start: a title over 1 KiB keeps its first
 * KiB, then the middle of the body goes, with a line that says so; its
 * head (what was asked) and tail (the findings) stay.
 */
void sched__task_fit(struct task *t);

/*
 * tasks.c: a failure's signature: the reason with its numbers, hashes
 * and quoted names blurred, hashed to 16 hex digits, so that "timed out
 * after 31 s" and "timed out after 30 s" are one failure.
 */
void sched__failure_sig(const char *reason, char out[17]);

/*
 * tasks.c: clears the lease fields of t (holder, token, expiry), as
 * every write that takes a task out of running does.
 */
void sched__drop_lease(struct task *t);


/*
 * worker.c: how the task whose run just stopped goes on, from the run's
 * status: judged, done, blocked (and why), queued again after a
 * cooldown, or failed. resume_after_ms is the engine's quota hand-back
 * time (0: none).
 */
int sched__settle(struct sched_ctx *x, struct task *t, const struct run *r,
		  int64_t resume_after_ms, struct err *e);

/*
 * worker.c: whether run r has a worktree that is not in this clone: it
 * was driven on another worker host (repo.url), whose files are out of
 * reach here.
 */
int sched__elsewhere(const struct sched_ctx *x, const struct run *r);

/* worker.c: this host's name, for worker ids and dead-worker checks. */
const char *sched__host(void);

/*
 * Whether run r of task t, finished and approved, is landed through a
 * pull request (a forge is configured: forge/pr.c) instead of the local
 * merge queue; the task then waits in blocked(pull_request).
 */
int sched__on_forge(const struct sched_ctx *x, const struct task *t,
		    const struct run *r);

#endif
