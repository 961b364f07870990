/*
 * The run record and the event record: the two things the store keeps and
 * the engine writes. Plain data, owned strings; run_release() frees them.
 *
 * Times are ms since the epoch (0: not yet). Craik's rules hold: a phase
 * change refreshes phase_started_at, a terminal status sets ended_at, and
 * updated_at moves with every write.
 */
#ifndef BATON_CORE_RUN_H
#define BATON_CORE_RUN_H

#include <stddef.h>
#include <stdint.h>

struct err;

/* Where a run is inside its current status. */
#define RUN_PHASE_PENDING "pending" /* entered; the stage has not started */
#define RUN_PHASE_RUNNING "running" /* the stage's work is under way */
/* the stage's edits are committed and passed: it is never run again, the
 * next driver goes straight on to what follows it */
#define RUN_PHASE_CHECKPOINTED "checkpointed"
#define RUN_PHASE_DONE	  "done"    /* the status is a resting point */

/* How a run ended (runs.outcome). */
#define RUN_OUTCOME_COMPLETED	   "completed"
#define RUN_OUTCOME_MAX_ITERATIONS "max_iterations_reached"
#define RUN_OUTCOME_PLAN_REJECTED  "plan_rejected"
#define RUN_OUTCOME_CODE_REJECTED  "code_rejected"
#define RUN_OUTCOME_IMPL_FAILED	   "implementation_failed"
#define RUN_OUTCOME_GATE_REJECTED  "gate_rejected"
/* a loop's act: the policy denied a side effect, or the act wrote what
 * no grant covers */
#define RUN_OUTCOME_POLICY	   "policy_denied"
/* a loop stopped before an act: a budget crossed */
#define RUN_OUTCOME_BUDGET	   "budget_exhausted"
/* a loop stopped before an act: the stop file, a changed intent lock */
#define RUN_OUTCOME_STOPPED	   "stop_condition"
/* a read-only audit whose review asked for changes: completed, with its
 * findings on record */
#define RUN_OUTCOME_FINDINGS	   "changes_requested"
/* and "blocked", "failed", "aborted": the status itself */

/*
 * Whether task text of len bytes may be a run's task: 0, or BATON_EINVAL
 * with a message naming the size and the limit (TASK_TEXT_MAX). Every
 * door a task comes in by asks, so a task accepted is one that can run.
 */
int run_task_text_fits(size_t len, struct err *e);

struct run {
	char *id;	    /* "r7-add-a-version-flag": deterministic, see ids.h */
	int64_t seq;	    /* the number in the id, allocated by the store */
	char *task;	    /* what the user asked for */
	char *pipeline;	    /* pipeline name */
	char *status;	    /* lifecycle status */
	char *stage;	    /* current (or last) stage name; NULL before any */
	char *phase;	    /* RUN_PHASE_* */
	char *paused_at_status; /* where resume goes (status paused) */
	char *gate_status;  /* the status a gate waits to enter */
	char *gate_back;    /* the status request-changes re-runs */
	char *reason;	    /* why it ended blocked, failed or aborted */
	char *worktree, *branch;
	char *base_ref, *base_commit;
	char *checkpoint;   /* commit of the last stage checkpoint */
	char *config_hash;
	char *config_snapshot; /* the merged config as JSON at creation: the
				  run keeps to it (see engine_drift) */
	char *outcome;	    /* how it ended (RUN_OUTCOME_*); NULL while live */
	char *progress;	    /* the bug-fix pipeline's state, a JSON object
			       text (DESIGN.md section 2); NULL: none */
	int review_loops, max_review_loops;
	int pause_requested, abort_requested;
	int attempt;	    /* tries of the current stage (contract retries) */
	int64_t agent_pid;  /* process group of the running agent; 0: none */
	int64_t steer_seq;  /* steer events up to this seq have been used */
	int64_t tokens_in, tokens_out;
	double cost_usd;
	int64_t active_ms;  /* time spent inside stages (the wall budget) */
	int64_t created_at, started_at, phase_started_at, updated_at, ended_at;
	int64_t version;    /* bumped by every write; guards each update */
	int64_t task_id;    /* the task this run attempts; 0: none */
};

struct event {
	int64_t seq;	/* global, strictly increasing; set by the store */
	char *run_id;
	int64_t task_id; /* the task it is about, or 0 */
	int64_t ts;
	char *type;	/* "transition", "stage_started", "steer", ... */
	char *from, *to; /* transitions only */
	char *data;	/* a JSON object as text, or NULL */
};

void run_release(struct run *r);
/* Deep copy of src into dst (dst is overwritten, not released). */
void run_copy(struct run *dst, const struct run *src);
/* Replaces *field with a copy of value (NULL allowed). */
void run_set(char **field, const char *value);
void event_release(struct event *ev);

#endif
