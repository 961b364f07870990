/*
 * The runtime (DESIGN.md section 3, "sched/"): the task queue drained by
 * workers under leases, the recovery sweeps, the judge, the merge queue
 * and the planner. The store does the claiming and the fencing
 * (store.h); this layer decides what a worker does with what it claimed
 * and what becomes of a task when its run ends.
 *
 *   baton serve ─┬─ supervisor: sweeps, wakes idle workers, reaps them
 *                ├─ worker 1: claim ─▶ drive the task's run ─▶ settle
 *                ├─ worker 2:   ... or judge a finished run
 *                └─ worker N:   ... or land an approved branch
 *
 * Workers are processes, each with its own store connection and its own
 * lease thread (the keeper, on a connection of its own, which also keeps
 * the worker's record). A worker idle for lack of work sleeps on a pipe; anyone
 * who makes work (`baton task add`, a run that ends, an approval) writes
 * to the repository's wake FIFO (.baton/wake), the supervisor reads it
 * and wakes every idle worker: nothing polls between an enqueue and the
 * claim.
 */
#ifndef BATON_SCHED_SCHED_H
#define BATON_SCHED_SCHED_H

#include <stdint.h>
#include <sys/types.h>

struct agent_result;
struct config;
struct err;
struct merge_item;
struct run;
struct store;
struct store_key;
struct task;
struct worker_rec;
struct workspace;

/* What a piece of the runtime works with; all borrowed. */
struct sched_ctx {
	struct store *store;
	const struct workspace *ws;
	const struct config *cfg;
	const char *holder; /* this worker's id: "host:pid:n" */
	const char *store_spec; /* what a worker's own threads reopen */
	int tasks_only;	/* a worker host: never judges or lands */
	/*
	 * A serve worker's: the task its last settle claimed in the same
	 * transaction (id 0: none), which sched_work_once works next.
	 * NULL: each task is claimed on its own.
	 */
	struct task *next;
	/* a serve worker's lease keeper (worker.c: sched_worker_begin);
	 * NULL elsewhere */
	struct sched_keeper *keeper;
};

/* ---- wake.c ------------------------------------------------------------ */

/*
 * Tells a `baton serve` of this repository that there is new work (a
 * byte into .baton/wake). Never blocks and never fails: with nobody
 * listening there is nobody to wake.
 */
void sched_wake(const struct workspace *ws);

/* ---- tasks.c ----------------------------------------------------------- */

/*
 * Adds a task (title required; the rest of t as given) with a
 * "task_added" event, then wakes serve. Fills t->id. BATON_EINVAL, and
 * nothing written, when its text is over TASK_TEXT_MAX (it could never
 * run) or its area leaves the repository; t->area is normalised.
 */
int sched_task_add(struct sched_ctx *x, struct task *t, struct err *e);
/* sched_task_add for someone (serve's API: a token's name, recorded as
 * "actor" in the task_added event); actor NULL is sched_task_add. */
int sched_task_add_by(struct sched_ctx *x, struct task *t, const char *actor,
		      struct err *e);
/*
 * sched_task_add_by under an idempotency key (store_task_add_keyed; k
 * NULL: none): 1 added; 0 when k's key was claimed before (nothing
 * written; k says by what); or an error.
 */
int sched_task_add_keyed(struct sched_ctx *x, struct task *t,
			 const char *actor, struct store_key *k,
			 struct err *e);

/*
 * Writes t (a versioned update) with an event of type (data: a JSON
 * object text or NULL), then wakes serve. The usual way to change a task.
 */
int sched_task_write(struct sched_ctx *x, struct task *t, const char *type,
		     const char *data, struct err *e);

/*
 * A task's area as baton keeps it: raw relative to the repository,
 * without "..", normalised ("./a//b/" is "a/b"); "" and "." mean no area
 * (*out NULL). BATON_EINVAL for a path that leaves the repository, named
 * in the message as what ("area", "tasks[2].area"). *out is the
 * caller's to free. Every writer of an area asks: the planner, task add,
 * the API (through sched_task_add).
 */
int sched_task_area(const char *raw, const char *what, char **out,
		    struct err *e);

/*
 * Cuts a task baton makes from outside text (a forge issue) to
 * TASK_TEXT_MAX, as it does its own (a rework, a merge conflict): a
 * title over 1 KiB keeps its first KiB; the middle of the body goes,
 * with a line that says how much. t's strings are replaced in place.
 */
void sched_task_fit(struct task *t);

/*
 * Makes w a rework of t on top of base_ref: t's kind, pipeline,
 * priority, area, allowed paths and verify commands, origin "rework",
 * parent t, one deeper. The judge's changes and the forge's fix rounds
 * are made so; the caller gives the title and body.
 */
void sched_task_rework_of(struct task *w, const struct task *t,
			  const char *base_ref);

/* "t7" / "7" -> 7; 0 when ref is not a task reference. */
int64_t sched_task_ref(const char *ref);

/*
 * The task as JSON (docs/api.md); with_runs adds "runs", the id of every
 * run it had (read from its events). The caller decrefs.
 */
struct json_t;
struct json_t *sched_task_json(struct store *s, const struct task *t,
			       int with_runs);

/*
 * Cancels task id: a queued or blocked one at once (its waiting run
 * aborted); a running one has its run aborted and its worker settles it
 * cancelled. BATON_EBADSTATE when it has ended already. *out (may be
 * NULL) gets the task as it is afterwards.
 */
struct engine;
int sched_task_cancel(struct sched_ctx *x, struct engine *en, int64_t id,
		      struct task *out, struct err *e);
/*
 * Puts a failed, cancelled or blocked task back in the queue afresh
 * (attempts reset), the task_retried event naming by (may be NULL) as
 * its "actor". BATON_EBADSTATE for a queued, running or done one. A
 * cancel names en->actor the same way.
 */
int sched_task_retry(struct sched_ctx *x, int64_t id, const char *by,
		     struct task *out, struct err *e);

/* What sched_task_rerun works with (its arg); borrowed. */
struct sched_rerun {
	struct sched_ctx *x;
	/*
	 * 1: the task goes back to the queue, for a worker of serve to
	 * drive the new run (the API). 0: a terminal drives it (`baton
	 * resume --fresh`): the task waits blocked (paused), which the
	 * sweep takes up once that driver is gone (sweep.c).
	 */
	int queue;
};

/*
 * engine_settle_drift's engine_rerun_cb, arg a struct sched_rerun: makes
 * fresh, a run started afresh in place of old, the current run of their
 * task (fresh->task_id), with a "task_run" event {run, fresh_of}. The
 * task stays the same task: its attempts, history and dependants are
 * kept; it gives up any lease (a worker still driving old is fenced off
 * and leaves the task alone). BATON_ECONFLICT when old is no longer the
 * task's current run or the task changed under us.
 */
int sched_task_rerun(void *arg, const struct run *old, const struct run *fresh,
		     struct err *e);
/*
 * A rewind's new run of a task's finished run (engine_rewind, o->anew)
 * made the task's current run by sched_task_rerun, unless the task is
 * done, which is final: it stays done with its run, and the new one,
 * still its task's, is driven by whoever asks (returns 1). 0 once the
 * task has the new run; negative on an error.
 */
int sched_task_rewound(struct sched_rerun *rr, const char *old_id,
		       const struct run *fresh, struct err *e);

/* ---- call.c ------------------------------------------------------------ */

/* One call of a role's provider outside any run (planner, judge). */
struct role_call {
	const char *role;   /* "planner", "judge" ... (falls back to default) */
	const char *cwd;    /* where the agent works */
	const char *prompt; /* the full prompt */
	const char *dir;    /* where prompt, stdout and stderr are kept */
	const char *name;   /* file stem inside dir */
	const char *repo;   /* the repository top, hidden in the sandbox */
	const char *common; /* its common git dir (read-only in the sandbox) */
	const char *gitdir; /* cwd's git admin folder (a worktree), or NULL */
	/*
	 * NULL, or the call's output folder (BATON_OUT_DIR): made empty
	 * before the call, the one place besides a worktree cwd that the
	 * agent may write in the sandbox; the caller reads it after.
	 */
	const char *out_dir;
	/*
	 * NULL, or called once the agent's process exists, with its pid
	 * (the leader of its process group), so that whoever finds the
	 * caller dead can kill what the call left (the judge records it,
	 * sweep.c kills it). Not called for an agent without a process.
	 */
	void (*on_started)(void *arg, int64_t pid);
	void *arg;
};

/*
 * Runs the first provider of c->role on the prompt, with the same
 * redaction, sandbox and failure classes as a stage. Returns 0 when the
 * call was made (read out->failure) or an error when baton could not do
 * its part. out is always filled and must be released.
 */
int sched_call_role(const struct config *cfg, const struct role_call *c,
		    struct agent_result *out, struct err *e);

/* ---- merge.c ----------------------------------------------------------- */

/*
 * Queues the branch of run (which must be merge_ready or completed with
 * a branch) for landing, with a "merge_queued" event. BATON_EBUSY when it
 * is already queued (*out still filled with the item).
 */
int sched_merge_enqueue(struct sched_ctx *x, const struct run *run,
			struct merge_item *out, struct err *e);

/*
 * Claims and processes the next due item of the merge queue: merges the
 * branch onto the current base in the merge worktree, runs the project's
 * checks there, and fast-forwards the base only if they pass. A conflict
 * is retried with exponential backoff (merge.retries,
 * merge.backoff_seconds); after the last retry the item fails and a
 * conflict-resolution task is queued. Returns 1 when an item was
 * processed, 0 when none was due, negative on error.
 */
int sched_merge_next(struct sched_ctx *x, struct err *e);

/* ---- judge.c ----------------------------------------------------------- */

/*
 * Finds a task blocked(awaiting_judge) that nobody judged yet, claims
 * the judgement (judged_at, judgement_version, a versioned update: of two
 * judges one wins) and reviews the run's final diff with the judge role.
 * Approve: the task is done and its branch queued for merging. Changes:
 * a rework task linked to it (depth capped by runtime.max_rework_depth)
 * and the task blocked(needs_rework). Returns 1 when it judged one, 0
 * when there was nothing to judge.
 */
int sched_judge_next(struct sched_ctx *x, struct err *e);

/* ---- worker.c ---------------------------------------------------------- */

/*
 * One worker's work while there is some: (auto_merge) lands the next
 * due branch; else claims a task (or takes the one x->next holds) and
 * drives its run to a resting point, settling the task after (and, with
 * x->next and no auto_merge, claiming the next in the settle's
 * transaction); else judges. A worker host (tasks_only) does
 * tasks alone. Returns 1 when it did something, 0 when there was
 * nothing to do, negative on error.
 */
int sched_work_once(struct sched_ctx *x, struct err *e);

/*
 * A serve worker begins, before its first sched_work_once: its lease
 * keeper starts, a thread on a store connection of its own that puts
 * rec (the worker's record: id, host, pid; its strings must outlive the
 * worker) on record now and again every third of runtime.lease_seconds,
 * with the task it works on, and renews that task's lease. Fails when
 * the keeper's connection cannot be opened.
 */
int sched_worker_begin(struct sched_ctx *x, const struct worker_rec *rec,
		       struct err *e);

/*
 * A worker ends: with a task its last settle claimed (x->next) it gives
 * that back (queued again, the attempt not spent, a task_released event
 * on record; best effort: a task left leased is requeued by the sweep
 * once its lease runs out), stops its lease keeper and marks its record
 * stopped.
 */
void sched_worker_end(struct sched_ctx *x);

/* ---- sweep.c ----------------------------------------------------------- */

/*
 * The cycle manager's pass: requeues running tasks whose lease expired
 * or whose worker is gone, blocked tasks whose wait is over (quota_wait
 * after its reset, awaiting_approval and paused once their run moved
 * on); blocks queued tasks whose dependency failed. Every change is an
 * event with the reason. *next_ms gets the earliest time a sweep has
 * something to do again (0: nothing known). Returns how many tasks it
 * changed plus how many queued tasks became claimable since since_ms (a
 * cooldown ran out): either way idle workers should look again.
 */
int sched_sweep(struct sched_ctx *x, int64_t since_ms, int64_t *next_ms,
		struct err *e);

/* ---- schedule.c -------------------------------------------------------- */

struct schedule;

/* A slot that came this long before serve started is still on time. */
#define SCHED_SLOT_GRACE_MS (60 * 1000)

/* What one serve has decided about each schedule's slots. */
struct sched_slots {
	int64_t started;  /* when serve began: slots before it were missed */
	int64_t *handled; /* per schedule of the config: the last slot seen */
	int64_t *since;	  /* per schedule: when it was first seen (0: not
			     read yet) */
	size_t n;
};

void sched_slots_init(struct sched_slots *st, const struct config *cfg,
		      int64_t now);
void sched_slots_release(struct sched_slots *st);

/* The store key of s's slot ("schedule NAME ISO-TIME"); caller frees. */
char *sched_slot_key(const struct schedule *s, int64_t slot_ms);

/*
 * Makes s's task for slot once across every process on the store (the
 * slot's key, see schedule.c): 1 when this call made it (*task_out its
 * id, a "schedule_fired" event), 0 when the slot was made before or
 * elsewhere, or its task could not be made (a "schedule_failed" event;
 * the slot is not tried again), negative when the store failed.
 */
int sched_schedule_fire(struct sched_ctx *x, const struct schedule *s,
			int64_t slot, int missed, int64_t *task_out,
			struct err *e);

/*
 * One turn of serve's supervisor: each schedule's latest slot at now
 * that st has not seen is made (or skipped, when it was missed and the
 * schedule says skip). Returns how many tasks it made, or a negative
 * store error; *next_ms gets the earliest next slot (0: none).
 */
int sched_schedules(struct sched_ctx *x, struct sched_slots *st, int64_t now,
		    int64_t *next_ms, struct err *e);

/* ---- serve.c ----------------------------------------------------------- */

/*
 * A process serve keeps beside its workers (the HTTP server, the webhook
 * notifier): started before them, started again when it dies, sent
 * SIGTERM when serve ends. start forks it and returns once it is ready
 * (or why it cannot be).
 */
struct serve_companion {
	const char *name;
	int (*start)(void *arg, pid_t *pid, struct err *e);
	void *arg;
};

#define SERVE_MAX_COMPANIONS 3

struct serve_opts {
	int workers;	     /* worker processes */
	int exit_when_idle;  /* stop once nothing is left to do */
	const char *store;   /* the spec workers open */
	/* the companions, the first nr_companions of them */
	const struct serve_companion *companions[SERVE_MAX_COMPANIONS];
	int nr_companions;
};

/*
 * Runs the supervisor and its workers until SIGINT/SIGTERM (the first
 * drains: no new claims, in-flight runs finish; the second stops them
 * at once, their runs left for the next serve) or, with exit_when_idle,
 * until no task is queued, running or due.
 */
int sched_serve(struct sched_ctx *x, const struct serve_opts *o,
		struct err *e);

#endif
