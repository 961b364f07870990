/*
 * The engine: runs a pipeline for a run, and is the ONE writer of run
 * status (DESIGN.md section 3). Every status change goes through
 * engine_transition(): the edge is checked against the pipeline's derived
 * table, then the run row and its event are written in one store
 * transaction guarded by the row version, then the event is mirrored to
 * the run's events.jsonl.
 *
 * One process at a time drives a run: the driver holds a POSIX lock on
 * .baton/runs/<id>/lock for as long as it works. Other processes (a second
 * terminal's pause, abort, approve, steer) write their request to the
 * store and wake the driver with SIGUSR1; it never polls for them. A run
 * whose status is a stage at phase "running" with nobody holding its lock
 * lost its driver (kill -9, a crash): the next driver moves it to
 * interrupted, resets the worktree to the last checkpoint and re-runs the
 * stage.
 *
 *   driver loop:  created ─▶ worktree ─▶ boundary ─▶ stage ─▶ outcome ─▶ ...
 *                 boundary: gate? ─▶ waiting_for_approval (sleep until woken)
 *                           pause requested? ─▶ paused (sleep until woken)
 *                           else enter the next stage
 */
#ifndef BATON_ENGINE_ENGINE_H
#define BATON_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/gate.h" /* enum gate_decision */
#include "core/run.h"
#include "util/strvec.h"

struct config;
struct event;
struct err;
struct pipeline;
struct store;
struct workspace;

/* What the engine reports to its front door (the CLI's progress line). */
enum engine_note {
	ENGINE_NOTE_TRANSITION, /* r->status just changed */
	ENGINE_NOTE_TICK,	/* about once a second while a stage works */
	ENGINE_NOTE_WAITING,	/* sleeping at a gate or pause */
};

typedef void engine_note_cb(void *arg, enum engine_note what,
			    const struct run *r);

struct engine {
	struct store *store;	      /* borrowed */
	const struct workspace *ws;   /* borrowed */
	const struct config *cfg;     /* borrowed */
	engine_note_cb *note;
	void *note_arg;
	int lock_fd;		      /* held while driving; else -1 */
	/*
	 * Set by a worker of `baton serve`: instead of sleeping where the
	 * run must wait (a gate, a pause, a quota reset), the driver hands
	 * the run back so the worker can take other work. After a quota
	 * hand-back the run is interrupted and resume_after_ms says when
	 * to try again.
	 */
	int detach;
	int64_t resume_after_ms;
	/*
	 * `baton run --unattended`, runtime.unattended for serve: nobody
	 * waits on the run. A gate or a question without a default ends it
	 * blocked with the question on record, and a budget's pause is a
	 * stop (budget.c, engine.c).
	 */
	int unattended;
	/*
	 * Who asked (serve's API: the token's name); NULL: the local user.
	 * Every event this engine writes carries it as "actor" in its data,
	 * so a decision stays on record with who made it.
	 */
	const char *actor;
};

/*
 * The repository's memory (engine/memory.c): writes entry id to the
 * store and its file .baton/memory/<id>.md; forgets it from both (1 when
 * it was there, 0 when not).
 */
int engine_memory_save(const struct workspace *ws, struct store *st,
		       const char *id, const char *run_id, const char *kind,
		       const char *body, struct err *e);
int engine_memory_forget(const struct workspace *ws, struct store *st,
			 const char *id, struct err *e);

void engine_init(struct engine *en, struct store *s,
		 const struct workspace *ws, const struct config *cfg);
void engine_release(struct engine *en);

/*
 * Creates a run of task on pipeline (NULL: workflow.pipeline) in status
 * created. Checks that the pipeline exists and that every role it needs
 * has a provider before anything is written. Fills *out.
 */
int engine_create(struct engine *en, const char *task, const char *pipeline,
		  struct run *out, struct err *e);

/* What a new run is made of when it attempts a queued task. */
struct run_spec {
	const char *task;     /* the text the agents read */
	const char *pipeline; /* NULL: workflow.pipeline */
	const char *base_ref; /* NULL: HEAD */
	int64_t task_id;      /* the task it attempts; 0: none */
	int read_only;	      /* a read-only run: pipeline NULL means
				 plan-only, and a pipeline without
				 read_only: true is refused */
};

/* engine_create with a base and a task: the same checks, the same event. */
int engine_create_spec(struct engine *en, const struct run_spec *spec,
		       struct run *out, struct err *e);

/*
 * Drives the run ref until it is terminal, sleeping at gates and pauses
 * until another process wakes it. A run paused because a budget was
 * crossed is handed back instead (status paused, reason set): the next
 * driver, after `baton resume`, reads the raised budget. Returns 0 with
 * the final record in *out,
 * BATON_EBUSY when another live process drives the run, or
 * BATON_EABORTED when SIGINT/SIGTERM stopped this driver (the run is left
 * interrupted or at its resting point, ready for `baton resume`).
 */
int engine_drive(struct engine *en, const char *ref, struct run *out,
		 struct err *e);

/*
 * The one door for status changes. Moves r to status to if the pipeline
 * allows r->status → to; fills the status-dependent fields (phase and
 * phase_started_at, started_at, ended_at, stage) and writes r with a
 * "transition" event carrying data (a JSON object text or NULL) in one
 * transaction. On success r holds the new record. BATON_EBADSTATE for an
 * edge not in the table, BATON_ECONFLICT when r changed under us; in both
 * cases nothing was written and r is unchanged.
 */
int engine_transition(struct engine *en, const struct pipeline *p,
		      struct run *r, const char *to, const char *data,
		      struct err *e);

/* Requests from any process. Each records an event and wakes the driver. */

/* Pause at the next stage boundary. */
int engine_pause(struct engine *en, const char *ref, struct run *out,
		 struct err *e);
/*
 * Cancels a pause request, or moves a paused run back to paused_at_status.
 * *drive_out is set to 1 when no live process drives the run, so the
 * caller should drive it (a resumed run after kill -9 lands here too).
 * The run goes on under its config snapshot (see engine_drift below),
 * whose budget must allow it; when nothing but budget keys changed and
 * no live process drives it, it first adopts the current config
 * (engine_adopt_config): raising a budget is how a run paused by one
 * goes on.
 */
int engine_resume(struct engine *en, const char *ref, int *drive_out,
		  struct run *out, struct err *e);
/*
 * Aborts: the driver kills the agent's process group and ends the run
 * aborted; with no live driver the run is aborted here. Waits (bounded)
 * for the run to be terminal. The worktree is kept.
 */
int engine_abort(struct engine *en, const char *ref, struct run *out,
		 struct err *e);
/*
 * engine_abort with the reason on record when the run is ended here
 * (NULL: "aborted on request"); a live driver ends it with its own.
 */
int engine_abort_reason(struct engine *en, const char *ref,
			const char *reason, struct run *out, struct err *e);
/* Guidance the next stage's agent will read. */
int engine_steer(struct engine *en, const char *ref, const char *text,
		 struct err *e);

/*
 * How guidance reaches a running task (docs/lifecycle.md, "Steering"),
 * the injection modes of the OpenViber protocol:
 * - FOLLOWUP: the next stage's agent reads it (engine_steer);
 * - NOW: the agent working now is stopped and its stage's call made
 *   again with the guidance (on the driver's host at once; a driver
 *   elsewhere takes it at its next stage, as a follow-up);
 * - COLLECT: held for the task's next run (a retry, a rework): every
 *   message collected on a run reaches the first agent of the run that
 *   follows it, merged into one guidance block. A run without a task has
 *   no next run, and refuses it.
 */
enum steer_mode { STEER_FOLLOWUP, STEER_NOW, STEER_COLLECT };
/* The mode named word (steer, followup, collect), or -1. */
int steer_mode_parse(const char *word);
const char *steer_mode_name(enum steer_mode m);
int engine_steer_mode(struct engine *en, const char *ref, const char *text,
		      enum steer_mode mode, struct err *e);

/*
 * Config drift. A run keeps the config it was made under (its snapshot,
 * runs.config_snapshot, and its hash): a driver runs it under that
 * snapshot while en's config differs, until the run adopts the new one.
 * Runs made before snapshots existed have none and follow the config.
 */

/*
 * Pushes on changes what differs between run ref's snapshot and en's
 * config, one line per key (config_diff: "workflow.max_review_loops:
 * 2 -> 3"), both sides redacted. Nothing when the hashes match or the
 * run has no snapshot; a snapshot that cannot be read is one line
 * ("config snapshot: unreadable (...)"). Returns 0, or an error reading
 * the run.
 */
int engine_drift(struct engine *en, const char *ref, struct strvec *changes,
		 struct err *e);
/* 1 when there are changes and each is a key under budget, the run's
 * or a pipeline stage's. */
int engine_drift_budget_only(const struct strvec *changes);
/*
 * Run ref takes en's config: its snapshot and hash are replaced, and its
 * max_review_loops follows workflow.max_review_loops, with a
 * "config_adopted" event {changes, from, to (the hashes)}. Nothing is
 * written when the hashes already match. BATON_EBADSTATE for a terminal
 * run, BATON_EBUSY while a live driver holds it (that driver keeps the
 * config it loaded), BATON_ECONFLICT when the run changed under us.
 * engine_resume does this by itself when only budget keys changed.
 */
int engine_adopt_config(struct engine *en, const char *ref, struct err *e);
/*
 * Records a person's answer to run ref's drift without writing the run:
 * a "config_drift" event {choice, changes}, where choice is "snapshot"
 * (the run keeps to its snapshot) or "fresh" (it is replaced: fresh_run
 * names the new run, NULL if not known yet).
 */
int engine_note_drift(struct engine *en, const char *ref, const char *choice,
		      const struct strvec *changes, const char *fresh_run,
		      struct err *e);

/* A person's answer to a run's drift (`baton resume`, the API's resume). */
enum drift_choice {
	DRIFT_ASK,	/* none yet: settle what needs no answer */
	DRIFT_SNAPSHOT, /* go on under the snapshot */
	DRIFT_CURRENT,	/* adopt the current config and go on */
	DRIFT_FRESH,	/* abort the run for a new one under the config */
};

/* What engine_settle_drift did. */
enum drift_result {
	DRIFT_NONE,	 /* nothing to settle: resume */
	DRIFT_BUDGET,	 /* only budget keys changed, adopted: resume */
	DRIFT_DRIVEN,	 /* a live driver keeps its config: resume */
	DRIFT_UNDECIDED, /* it changed and nobody chose: nothing written */
	DRIFT_KEPT,	 /* it goes on under its snapshot: resume */
	DRIFT_ADOPTED,	 /* it took the current config: resume */
	DRIFT_RESTARTED, /* aborted for a fresh run, which waits for a driver */
};

struct drift_outcome {
	enum drift_result result;
	/* engine_drift's lines: what changed since the run started */
	struct strvec changes;
	/* the config changed but the run has no snapshot: it follows it */
	int no_snapshot;
	int64_t driver_pid; /* the run's live driver, or 0 */
	struct run run;	    /* the run as read; RESTARTED: as it ended */
	struct run fresh;   /* RESTARTED: the new run */
};

/* Frees what an outcome holds; it may be released twice. */
void drift_outcome_release(struct drift_outcome *o);

/*
 * How engine_settle_drift makes a fresh run its task's: called when the
 * old run is its task's current run, after fresh (whose task_id is the
 * task's) is made and before old is aborted. An error stops the fresh
 * start there, old untouched. sched_task_rerun is the one there is.
 */
typedef int engine_rerun_cb(void *arg, const struct run *old,
			    const struct run *fresh, struct err *e);

/*
 * Settles the config drift of run ref before it resumes, as choice says;
 * the caller then resumes it (engine_resume) unless the result says
 * otherwise. The one decision `baton resume` and the API share:
 *
 *   - a terminal run: NONE, nothing read but the run (engine_resume
 *     refuses it);
 *   - a run whose config has not changed: NONE, with no_snapshot when
 *     it has no snapshot to compare; FRESH and CURRENT still act, on no
 *     changes;
 *   - ASK, no live driver, only budget keys changed: the run adopts the
 *     config (engine_adopt_config), BUDGET;
 *   - ASK or SNAPSHOT while a live driver holds the run: DRIVEN, nothing
 *     written (that driver keeps the config it loaded);
 *   - ASK otherwise: UNDECIDED, nothing written;
 *   - SNAPSHOT: a "config_drift" event records it, KEPT;
 *   - CURRENT: engine_adopt_config, ADOPTED;
 *   - FRESH: a new run of the same task text, pipeline and base under
 *     en's config is made first, so that a config it cannot start under
 *     (a pipeline gone, a role without a provider) leaves the run as it
 *     was. When the run is its task's current run, the new run attempts
 *     the same task and rerun (may be NULL: it attempts none) makes it
 *     the task's. Then a "config_drift" event names the new run and the
 *     run is aborted ("started afresh under the changed config"):
 *     RESTARTED, the new run in out->fresh, created and not driven.
 *
 * Unlike most out parameters, *out is filled in every case and released
 * by the caller even on failure: an error found after the changes (a
 * live driver refusing CURRENT, a failed abort) leaves them in
 * out->changes, for the caller to show beside the error. Errors: reading
 * the run, adopting (BATON_EBUSY, BATON_EBADSTATE), making the fresh run
 * ("cannot start 'ID' afresh: ..."), rerun's, recording and aborting
 * (the message then names the run left over and how to abort it).
 */
int engine_settle_drift(struct engine *en, const char *ref,
			enum drift_choice choice, engine_rerun_cb *rerun,
			void *rerun_arg, struct drift_outcome *out,
			struct err *e);

/*
 * Decides a run waiting for approval: approve enters the gated stage,
 * reject ends the run blocked, request changes re-runs the stage before
 * the gate with guidance. Defer pauses the run at its gate or question,
 * which keeps gate_status and gate_back; resume asks the same again
 * (without the question's deadline: a person put it off). Feedback on
 * an assist report: revise plans again with the guidance, and defer
 * pauses the run so that resume plans again. BATON_EBADSTATE when the
 * run is not waiting.
 */
int engine_decide(struct engine *en, const char *ref, enum gate_decision d,
		  const char *guidance, struct run *out, struct err *e);
/*
 * engine_decide with who decided on record: by (NULL: not said) goes
 * into the decision's transition event as "by", such as "link:ops" for
 * an answer link of notify target ops.
 */
int engine_decide_by(struct engine *en, const char *ref,
		     enum gate_decision d, const char *guidance,
		     const char *by, struct run *out, struct err *e);

/*
 * 1 when r is paused at a gate or question that a person deferred:
 * paused, with paused_at_status waiting_for_approval and the gate's
 * gate_status and gate_back kept for when resume asks again.
 */
int engine_gate_deferred(const struct run *r);

/*
 * When the question run r waits on times out and its default applies (an
 * assist escalation), in ms since the epoch; 0 when it waits for ever.
 */
int64_t engine_ask_deadline(const struct run *r);
/*
 * When run r's gate is rejected for want of a decision
 * (policies.approval_timeout_seconds of c), in ms since the epoch; 0
 * when r waits at no gate (a question is not one) or c sets no timeout.
 */
int64_t engine_gate_deadline(const struct config *c, const struct run *r);

/*
 * takeover.c: takes over run r, whose worktree is in another clone (its
 * host died), for this host's worker holder (a name for the record):
 * fetches the run's checkpoint from repo.url, makes the run's worktree
 * here at the checkpoint r has on record, puts back the run folder's
 * files pushed with it, and writes r (worktree here, no agent pid) with a
 * "run_taken_over" event; engine_drive then goes on from r's stage as
 * after a crash. 1 with *why_out (caller frees) and a
 * "run_takeover_failed" event when the run cannot be taken over: no
 * repo.url, no checkpoint pushed, the remote unreachable, the checkpoint
 * on record not in the pushed one. Negative when the write fails.
 */
int engine_take_over(struct engine *en, struct run *r, const char *holder,
		     char **why_out, struct err *e);

/*
 * Rewind (rewind.c): re-enters run ref at stage from (a stage's name or
 * status) with its worktree at the checkpoint it had when it first
 * entered that stage and the earlier stages' artifacts kept. A terminal
 * run gets a new run of its task instead (anew set; the old one is left
 * as it was). o->run is the run that goes on, o->drive set when no live
 * process drives it. BATON_EINVAL for a stage the pipeline lacks (the
 * message names the stages it has), BATON_EBUSY for a run live in a stage.
 */
struct rewind_outcome {
	struct run run;	  /* the run rewound, or the new one */
	char *stage;	  /* the stage it re-enters */
	char *checkpoint; /* the commit its worktree is at */
	int anew;	  /* a new run of a terminal one */
	char *from;	  /* anew: the run rewound (its whole id) */
	int drive;	  /* no live process drives run */
};

int engine_rewind(struct engine *en, const char *ref, const char *from,
		  struct rewind_outcome *o, struct err *e);
void rewind_outcome_release(struct rewind_outcome *o);
/* The stage of p that from names (name or status), or NULL with e set. */
const struct stage *engine_rewind_stage(const struct pipeline *p,
					const char *from, struct err *e);

/* Pid of the live process driving run_id, or 0 when there is none. */
int64_t engine_driver_pid(const struct engine *en, const char *run_id);

/*
 * baton clean: takes run_id's lock as its driver would (a resume waits
 * or fails with BATON_EBUSY while it is held); *fd_out holds it until
 * closed. BATON_EBUSY naming the pid when a process drives the run;
 * BATON_ENOTFOUND when the run has no folder.
 */
int engine_lock_idle(const struct engine *en, const char *run_id,
		     int *fd_out, struct err *e);
/* Wakes the live driver of run_id (it re-reads its requests), if any. */
void engine_wake(const struct engine *en, const char *run_id);

/*
 * Loads the pipeline a run follows (user definition or built-in).
 */
int engine_pipeline(const struct engine *en, const char *name,
		    struct pipeline **out, struct err *e);
/*
 * The names of the pipelines this repository can run, pushed on out:
 * the config's first, then the built-ins and the enabled plugins' it
 * does not redefine. Returns how many came from config.
 */
struct strvec;
size_t engine_pipeline_names(const struct engine *en, struct strvec *out);

/*
 * Checks that each name of policies.require_approval_at_stages is a
 * stage or a stage's status of some pipeline this repository can run.
 * A name that is none gates nothing, so a typo would turn a person's
 * gate off without a word: BATON_EINVAL naming it and the workflow
 * pipeline's stages. A pipeline that does not load is passed over
 * (loading it reports its error).
 */
int engine_check_gates(const struct engine *en, struct err *e);

/*
 * Checks that status is one a run can have: a status of some pipeline
 * this repository can run (a filter such as `baton status --status` or
 * GET /api/v1/runs?status=). 0, or BATON_EINVAL with e naming them all:
 * "unknown status 'nope' (a run's status is one of created, planning,
 * ...)". A pipeline of the config that does not load adds nothing.
 */
int engine_check_status(const struct engine *en, const char *status,
			struct err *e);

/*
 * Keeps the run folder's file name (a path inside it: "plan.md",
 * "calls/0007-execute-x-0.stdout") in the store as well, so every host
 * can show it (engine/runfile.c): at most runtime.file_cap_kib of it,
 * with its size, sha256, this host and its path. A link or anything but
 * a regular file in its place is refused, never followed; a missing file
 * is not an error (nothing is kept). Failures are logged and returned;
 * callers may go on, the run folder has the file.
 */
int engine_keep_file(struct engine *en, const char *run_id,
		     const char *name, struct err *e);
/*
 * A run file as the API and `baton show --json` print it: name, size,
 * stored, sha256, truncated, host, path, updated_at, and content (text,
 * invalid UTF-8 replaced) when with_content. The caller decrefs.
 */
struct json_t;
struct store_file;
struct json_t *engine_file_json(const struct store_file *f, int with_content);

/*
 * Appends to the run's events.jsonl every event the store has that the
 * file lacks (the file is a mirror; the store is the truth). Safe to call
 * from several processes at once.
 */
int engine_mirror_events(struct engine *en, const char *run_id,
			 struct err *e);

/*
 * One event as the JSON object `baton events --json` and events.jsonl
 * print: seq, ts, run, type, from and to for transitions, data. The
 * caller frees the string (no trailing newline).
 */
char *engine_event_line(const struct event *ev);

/* The run record as a JSON object (runjson.c); the caller decrefs. */
struct json_t;
struct json_t *engine_run_json(const struct run *r);

#endif
