/*
 * The driver's own: what engine.c, stage.c, control.c, record.c and the
 * reports share beyond the context API the stage kinds see
 * (kinds/kind.h, which this includes).
 */
#ifndef BATON_ENGINE_ENGINE_INT_H
#define BATON_ENGINE_ENGINE_INT_H

#include <jansson.h>

#include "core/config.h"
#include "core/run.h"
#include "engine/kinds/kind.h"
#include "util/strvec.h"

struct buf;
struct config;
struct engine;
struct err;
struct pipeline;
struct stage;
struct strvec;

/* stage.c: runs d->r's current stage; *reason gets a message (freed by
 * the caller) for BLOCK and FAIL. */
int engine__run_stage(struct drive *d, const struct stage *s,
		      enum stage_result *out, char **reason, struct err *e);




/*
 * engine.c: the round bound a run of pipeline p counts against under cfg
 * (its max_review_loops): the seed pipelines' own max_iterations (a
 * loop's overridden by loop.max_iterations), the feature and assist fix
 * loops' workflow.max_review_loops.
 */
struct config;
int engine__run_bound(const struct config *cfg, const struct pipeline *p);

/*
 * route.c. engine__route routes stage s's result res (reason: its own,
 * for a block or a fail; may be NULL) to the run's next status;
 * engine__after_success takes the run on from s's resting status;
 * engine__cross crosses the boundary into stage x (back: the stage that
 * just ended, what a gate's request-changes re-runs; loop: entering the
 * fix loop spends a round): a gate, a pause, a spent budget, or x.
 */
int engine__route(struct drive *d, const struct stage *s,
		  enum stage_result res, char *reason, struct err *e);
int engine__after_success(struct drive *d, const struct stage *s,
			  struct err *e);
int engine__cross(struct drive *d, const struct stage *x,
		  const struct stage *back, int loop, struct err *e);

/*
 * stage.c: the move to the pipeline's terminal. Before merge_ready, every
 * commit from the fork point (base_commit) to the branch's tip is held to
 * the block policies (policies.allowed_paths, baton's own .baton/): a
 * commit that changed a blocked path blocks the run even when a later
 * commit put the path back and every review approved.
 */
int engine__finish(struct drive *d, struct err *e);

/*
 * resume.c: continuing an earlier call's session (the top of resume.c).
 * engine__resume_plan reads the last call of stage s (and d->call's
 * part) by prov from the journal and fills rp: path "native" (continue
 * rp->session), "summary" (a fresh call told what the cut-off one did)
 * or NULL (a fresh call), and the note to put before the prompt. A
 * session id that is not a plain token is dropped with a
 * "session_refused" event. engine__resume_fallback turns a native plan
 * whose call the agent refused into a summary one (why: the agent's
 * message). engine__resume_note records the path taken as an
 * "agent_resumed" event (none for a fresh call).
 * engine__resume_keeps_worktree: 1 when stage s's last call will be
 * continued natively (its provider is configured with the same type,
 * which resumes, and it named a valid session), with *session set
 * (caller frees); else 0.
 */
struct resume_plan {
	const char *path;  /* "native", "summary", or NULL: fresh */
	char *session;	   /* native: the session to continue */
	char *from_call;   /* the earlier call on record, or NULL */
	char *note;	   /* text before the prompt, or NULL */
	const char *type;  /* the earlier call's type, when prov's */
	int cut_off;	   /* the earlier call did not end cleanly */
	char how[160];	   /* how it ended */
};
int engine__resume_plan(struct drive *d, const struct stage *s,
			const struct config_provider *prov,
			struct resume_plan *rp, struct err *e);
void engine__resume_fallback(struct drive *d, const struct stage *s,
			     const struct config_provider *prov,
			     struct resume_plan *rp, const char *why);
int engine__resume_note(struct drive *d, const struct stage *s,
			const struct config_provider *prov,
			const struct resume_plan *rp, struct err *e);
void engine__resume_release(struct resume_plan *rp);
int engine__resume_keeps_worktree(struct drive *d, const struct stage *s,
				  char **session);

/*
 * prompt.c: stage s's prompt for its next call into out: its template
 * (d->call's, else the kind's) with the run's variables, steers and the
 * context; retry (may be NULL) says why the last answer was refused.
 * out_dir is the call's output folder.
 */
void engine__render_prompt(struct drive *d, const struct stage *s,
			   const char *steers, const char *retry,
			   const char *out_dir, struct buf *out);

/* engine.c: tells the engine's watcher (en->note) what r did. */
enum engine_note;
void engine__tell(struct engine *en, enum engine_note what,
		  const struct run *r);

/*
 * data (an event's JSON text, NULL: none) with en->actor added as
 * "actor" when the engine acts for someone: a new string, or NULL when
 * there is nothing to write. Data that is not an object is kept as is.
 */
char *engine__stamp(const struct engine *en, const char *data);
/* door.c: a transition's data as the text an event keeps (redacted;
 * caller frees), NULL for none. */
char *engine__event_text(const json_t *data);
/* door.c: moves the run to to with reason on record ("reason": reason). */
int engine__move_why(struct drive *d, const char *to, const char *reason,
		     struct err *e);

/* door.c: transition with a data object (consumed; may be NULL). */
int engine__move(struct drive *d, const char *to, json_t *data,
		 struct err *e);
/* Ends the run aborted on a person's request (no agent is running). */
int engine__abort(struct drive *d, struct err *e);
/*
 * The door engine__note uses, for callers without a driver: writes r
 * (version-checked and fenced like every run write) with an event of
 * type whose data (consumed; may be NULL) is redacted, then mirrors the
 * events to events.jsonl. r's version moves on.
 */
int engine__record(struct engine *en, struct run *r, const char *type,
		   json_t *data, struct err *e);
/*
 * An event about a run on its own, not a run write (steers, drift notes, a
 * parallel member's events): data is a JSON object text or NULL. Mirrors
 * it to events.jsonl.
 */
int engine__add_event(struct engine *en, const char *run_id,
		      int64_t task_id, const char *type, const char *data,
		      struct err *e);
/* Re-reads d->r from the store. */
int engine__reload(struct drive *d, struct err *e);

/*
 * engine.c: sleeps until until_ms (epoch). Returns 1 early when the run
 * should stop (an abort request or a signal), else 0. Other wake-ups
 * (a steer, a pause request) do not end the sleep.
 */
int engine__sleep(struct drive *d, int64_t until_ms);

/*
 * engine.c, in a child process the driver forked: a wake pipe and signal
 * handlers of its own (the parent's pipe stays the parent's). Returns
 * the read end, or -1 with e set.
 */
int engine__child_signals(struct err *e);

/* engine.c: the signal (SIGINT, SIGTERM, SIGHUP) that asked the driver
 * to stop, or 0. */
int engine__signalled(void);

/* record.c */
/* The steer notes not yet handed to an agent, newest last; *upto gets the
 * seq of the last one. */
int engine__pending_steers(struct drive *d, struct buf *out, int64_t *upto,
			   struct err *e);
/* 1 when guidance to steer now (STEER_NOW) is pending: the agent working
 * is to be stopped and its call made again with it. */
int engine__steer_now(struct drive *d);

/*
 * Before r moves to the terminal status to (data: the transition's, or
 * NULL): the run's final report. engine__move calls it for the driver;
 * whoever else ends a run (control.c) should call it just before its
 * engine_transition. Failures are logged.
 */
void engine__report_final(struct engine *en, const struct pipeline *p,
			  struct run *r, const char *to, const char *data);
/*
 * After r moved (engine__move): a milestone report when a stage just
 * ended (stage_ended), r is not terminal and the run is older than
 * reports.milestone_after_seconds. Failures are logged, not returned:
 * the move itself is done.
 */
void engine__report_moved(struct engine *en, const struct pipeline *p,
			  struct run *r, int stage_ended);
/*
 * On a tick of d's stage: a periodic report when the run is older than
 * reports.periodic_after_seconds and the last report is
 * reports.interval_seconds old. Failures are logged.
 */
void engine__report_tick(struct drive *d);

/*
 * The repository's memory (memory.c): the entry of a run that moves to
 * the terminal status to (data: the move's JSON, its reason), written
 * before the move; and the section of a prompt that gives the entries
 * bearing on the run's task, spending from *budget.
 */
void engine__memory_record(struct drive *d, const char *to, const char *data);
void engine__memory_context(struct drive *d, struct buf *ctx, size_t *budget);

/*
 * snapshot.c: the config a run keeps to. engine__config_snapshot gives
 * en's merged config as JSON text (redacted; caller frees) for a new
 * run. engine__run_config builds the config of r's snapshot into *own
 * (caller config_release()s and frees it) when r has a snapshot whose
 * hash differs from en's config; else *own is NULL and en's config
 * applies.
 */
char *engine__config_snapshot(const struct engine *en);
int engine__run_config(const struct engine *en, const struct run *r,
		       struct config **own, struct err *e);

/* control.c: the run's lock file (caller frees). */
char *engine__lock_path(const struct engine *en, const char *run_id);
/* Wakes the live driver of run_id, if any. */
void engine__wake(const struct engine *en, const char *run_id);

/*
 * hooks.c: the driver's lifecycle hooks (hooks.h), none of them for a
 * run without a worktree or in a parallel member. engine__hooks runs
 * point's commands (status: BATON_STATUS, may be NULL) as hooks_run.
 * engine__stage_hooks, around a stage (d->r in its status): at
 * HOOK_BEFORE_STAGE first worktree_setup, unless this worktree has been
 * set up already, then before_stage; a veto sets *res to STAGE_BLOCK and
 * *reason (caller frees), a stop to STAGE_STOPPED; else STAGE_PASS. At
 * HOOK_AFTER_STAGE res and reason may be NULL and failures are only on
 * record. engine__hooks_remake makes the worktree again when it is lost
 * (worktree_remake) and then has its setup run again before the next
 * stage. engine__terminal_hooks runs on_terminal for a move to the
 * terminal status to, logging failures.
 */
int engine__hooks(struct drive *d, enum hook_point point, const char *status,
		  char **reason_out, struct err *e);
int engine__stage_hooks(struct drive *d, enum hook_point point,
			enum stage_result *res, char **reason, struct err *e);
int engine__hooks_remake(struct drive *d, struct err *e);
void engine__terminal_hooks(struct drive *d, const char *to);

#endif
