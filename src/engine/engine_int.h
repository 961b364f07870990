/*
 * Shared inside the engine: the driver's context while it runs one run,
 * and helpers between engine.c, stage.c, control.c and record.c.
 */
#ifndef BATON_ENGINE_ENGINE_INT_H
#define BATON_ENGINE_ENGINE_INT_H

#include <jansson.h>

#include "core/run.h"
#include "util/strvec.h"

struct buf;
struct config;
struct engine;
struct err;
struct pipeline;
struct stage;
struct strvec;

/* How a stage ended, as the engine routes it. */
enum stage_result {
	STAGE_PASS,	/* success: on to next */
	STAGE_LOOP,	/* checks failed or changes requested: the fix loop */
	STAGE_BLOCK,	/* the run should stop: reason set */
	STAGE_FAIL,	/* unrecoverable: reason set */
	STAGE_STOPPED,	/* stopped by abort or a signal */
	STAGE_ASK,	/* a person must answer: d->ask, d->ask_to */
};

struct call_spec;

/* One driver working on one run. */
struct drive {
	struct engine *en;
	struct pipeline *p;
	struct run r;
	char *run_dir;
	int wake_fd;	/* read end of the self-pipe signals write to */
	int stop;	/* an abort or a signal asked the stage to stop */
	int leave;	/* hand the run back (paused at a budget): the next
			   driver starts with the config as it is then */
	int64_t report_ms; /* when the last report was due or made, for
			      the periodic ones; 0: read it from the store */
	/*
	 * A member of a parallel group runs in a child process of its own
	 * (seed.c): its notes are bare events, never run writes, and what
	 * it did goes back to the parent in a result file.
	 */
	int member;
	const char *outcome;	/* RUN_OUTCOME_* for a BLOCK or FAIL */
	int finish;		/* a PASS that ends the run: the terminal
				   instead of the next stage (a loop's plan
				   finds the goal met) */
	int in_steps;		/* a phased implementation: a checkpoint
				   ends a step, not the stage */
	int missing;		/* the last call blocked because its agent
				   program is not installed */
	const struct call_spec *call; /* set around a bug-fix stage's call */
	json_t *ask;		/* STAGE_ASK: the question event's data */
	/* paths of the worktree the stage's calls changed that a diff does
	   not show (ignored files), for the checkpoint's policy */
	struct strvec unseen;
	char *ask_to;		/* STAGE_ASK: the status an answer enters */
};

/*
 * What a bug-fix stage's agent call differs in (seed.c sets it around
 * call_provider): the file it writes, extra context, how its output is
 * held to its contract.
 */
struct call_spec {
	const char *artifact;	/* path relative to the run folder */
	const char *kind;	/* BATON_STAGE_KIND; NULL: the stage's */
	const char *context;	/* prompt context before the stage's own */
	const char *template;	/* prompt template name; NULL: the kind's */
	struct strvec *env;	/* extra "K=V" for the agent */
	int version;		/* BATON_OUTPUT_VERSION; 0: none */
	const char *artifact_var; /* a variable that also names where the
				     artifact goes ("BATON_OUTCOME"); NULL */
	const char *ro_dir;	/* a folder the call's sandbox may read (a
				   plugin's); NULL: none */
	/* holds the output to its contract (BATON_ECONTRACT: retry) */
	int (*accept)(struct drive *d, const struct stage *s,
		      const char *text, enum stage_result *res,
		      char **reason, struct err *e);
	void *arg;
};


/*
 * stage.c: appends to paths the worktree paths the stage's calls changed
 * that no diff shows (d->unseen: ignored files), each once, and empties
 * d->unseen: what a checkpoint holds to its policy.
 */
void engine__take_unseen(struct drive *d, struct strvec *paths);

/* stage.c: runs d->r's current stage; *reason gets a message (freed by
 * the caller) for BLOCK and FAIL. */
int engine__run_stage(struct drive *d, const struct stage *s,
		      enum stage_result *out, char **reason, struct err *e);

/*
 * stage.c: one call of provider prov for stage s: prompt, agent,
 * contract (retried once), usage and events. The stop paths (abort,
 * signal) give STAGE_STOPPED.
 */
struct config_provider;
int engine__call(struct drive *d, const struct stage *s,
		 const struct config_provider *prov, const char *steers,
		 enum stage_result *res, char **reason, struct err *e);

/*
 * stage.c: provider p as stage s runs it, with the stage's model and
 * timeout_seconds over p's: a copy sharing p's strings.
 */
struct config_provider engine__stage_provider(const struct stage *s,
					      const struct config_provider *p);

/*
 * stage.c: commits the worktree as the stage's checkpoint and holds the
 * edits to policies.allowed_paths (a path outside them: STAGE_BLOCK).
 * The run write carries d->r as it is, progress included.
 */
int engine__checkpoint(struct drive *d, const struct stage *s,
		       enum stage_result *res, char **reason, struct err *e);

/*
 * seed.c: the bug-fix stages (rca, plan-review, implementation,
 * code-review, revise, and fix when it returns to its review). A
 * question for a person is STAGE_ASK with d->ask and d->ask_to set; an
 * end with an outcome of its own sets d->outcome.
 */
int engine__seed_stage(struct drive *d, const struct stage *s,
		       const char *steers, enum stage_result *res,
		       char **reason, struct err *e);
/*
 * loop.c: the loop's stages (loop-plan, act, observe, evaluate): stop
 * conditions, policy, receipts. assist.c: intake and report. research.c:
 * claims, collect (one child per claim, at once), challenge, compose,
 * judge. Same conventions as engine__seed_stage.
 */
int engine__loop_stage(struct drive *d, const struct stage *s,
		       const char *steers, enum stage_result *res,
		       char **reason, struct err *e);
int engine__assist_stage(struct drive *d, const struct stage *s,
			 const char *steers, enum stage_result *res,
			 char **reason, struct err *e);
int engine__research_stage(struct drive *d, const struct stage *s,
			   const char *steers, enum stage_result *res,
			   char **reason, struct err *e);
/*
 * plugin_kind.c: a stage of a kind a plugin implements with a command
 * (s->pkind): the command runs as a command agent, and its structured
 * outcome routes the run: pass on, changes to on_changes, block, fail.
 * A missing or malformed outcome is a contract error (retried once).
 */
int engine__plugin_stage(struct drive *d, const struct stage *s,
			 const char *steers, enum stage_result *res,
			 char **reason, struct err *e);
/*
 * progress.c. The run's progress object (runs.progress), parsed (the
 * caller json_decref()s; an empty object when there is none), and
 * written back into d->r (saved with the next run write).
 */
json_t *engine__prog_load(const struct drive *d);
void engine__prog_save(struct drive *d, json_t *p);
/* A run-folder JSON file: NULL with BATON_ENOTFOUND or BATON_ECONTRACT
 * (invalid JSON, with line and column) in e. */
json_t *engine__load_json(const struct drive *d, const char *name,
			  struct err *e);
/* The JSON an agent left: its artifact file when it wrote one, else the
 * object at the end of its final text; NULL with BATON_ECONTRACT. */
json_t *engine__take_json(struct drive *d, const char *artifact,
			  const char *text, struct err *e);
/* Writes doc as a run-folder file (its folder made) and keeps it as a
 * stage output with decision (may be NULL). */
int engine__keep_json(struct drive *d, const char *name, const char *decision,
		      json_t *doc, struct err *e);

/*
 * progress.c: ends stage s with a question for a person: STAGE_ASK, the
 * run waits for approval and an answer (approve with guidance) enters
 * ask_to. progress.ask keeps {kind, stage, to} and extra's keys (consumed;
 * may be NULL: a default, a deadline), which also go into the "question"
 * event beside the question and its options (consumed).
 */
int engine__ask(struct drive *d, const struct stage *s, const char *kind,
		const char *question, json_t *options, json_t *extra,
		const char *ask_to, enum stage_result *res);

/*
 * progress.c: one agent call of stage s as cs says (the folder of its
 * artifact made, d->call set around engine__call).
 */
int engine__call_as(struct drive *d, const struct stage *s,
		    const struct config_provider *prov, const char *steers,
		    struct call_spec *cs, enum stage_result *res, char **reason,
		    struct err *e);

/*
 * progress.c: a stage's budget (its budget: key). engine__stage_spent
 * adds a call's usage to progress.usage.<stage> (only for a stage with
 * a budget); engine__stage_budget says how run r crossed it, or NULL
 * while it holds (caller frees).
 */
void engine__stage_spent(struct drive *d, const struct stage *s,
			 int64_t tokens, double cost_usd);
char *engine__stage_budget(const struct pipeline *p, const struct stage *s,
			   const struct run *r);

/*
 * engine.c: when stage s's budget is spent, pauses the run to go on at
 * stage at (s, or the first of s's parallel group) once it is raised,
 * and sets *res to STAGE_STOPPED; the driver leaves the run. Returns 1
 * when it paused, *rc then the pause's result; 0 while the budget holds.
 */
int engine__stage_pause(struct drive *d, const struct stage *s,
			const struct stage *at, enum stage_result *res,
			int *rc, struct err *e);

/* progress.c: a run-folder file as a prompt section titled title, when
 * it exists and is not empty, within *budget. */
void engine__add_file(struct drive *d, struct buf *ctx, const char *title,
		      const char *name, size_t *budget);

/* stage.c: runs the project's checks (validation.json): PASS or LOOP
 * (a check failed) or STOPPED. */
int engine__validate(struct drive *d, const struct stage *s,
		     enum stage_result *res, struct err *e);
/*
 * assist.c: an execute stage's escalation (escalation.json in the run
 * folder), when the agent left one: checked (BATON_ECONTRACT), kept, and
 * asked as a question with a default and a deadline (STAGE_ASK). 0 and
 * *res untouched when there is none.
 */
int engine__escalation(struct drive *d, const struct stage *s,
		       enum stage_result *res, struct err *e);
/* assist.c: 1 when an assist run must have its plan approved before
 * stage x (the execution mode, or the plan asks for it). */
int engine__assist_gate(const struct engine *en, const struct pipeline *p,
			const struct run *r, const struct stage *x);

/* stage.c: where the run's agents work: the worktree, or the run folder
 * for a pipeline without one (workspace: none). */
const char *engine__work_dir(const struct drive *d);

/* seed.c: the engine's own stage, consolidating the RCAs. */
int engine__consolidate(struct drive *d, const struct stage *s,
			enum stage_result *res, char **reason,
			struct err *e);
/* seed.c: the stage a returning side stage goes back to, or NULL. */
const struct stage *engine__seed_back(struct drive *d);
/*
 * seed.c: after a seed review passed: the review in s's group still
 * waiting for a fix round, or NULL (then the run goes on past the group).
 */
const struct stage *engine__seed_pending(struct drive *d,
					 const struct stage *s);
/*
 * seed.c, around a fix round: review r sends the run to its fix (the
 * fix comes back to r), and the fix sends the run back to r for a
 * re-review of r alone (not its whole parallel group).
 */
void engine__seed_sent(struct drive *d, const struct stage *r);
void engine__seed_rereview(struct drive *d, const struct stage *r);

/*
 * fanout.c: a parallel group of one stage's agent calls, each member in a
 * child process of its own with a store handle of its own. A member's
 * work runs in its child: its notes are bare events (d->member), never
 * run writes; it sets m->res (and m->reason, owned, for BLOCK and FAIL)
 * and may put fields in out, which the parent finds in m->out. A work
 * that returns an error fails the member with e's message.
 */
struct fanout_member;
typedef int fanout_work_fn(struct drive *cd, struct fanout_member *m,
			   const char *steers, json_t *out, struct err *e);
/* In the parent as each member ends (res, reason, out and times set). */
typedef int fanout_done_fn(struct drive *d, struct fanout_member *m,
			   struct err *e);

struct fanout_member {
	const struct stage *s;	/* the stage it works for (the child's
				   run.stage) */
	const char *key;	/* unique in the group: its result file */
	const char *label;	/* names it in messages: "claim c2" */
	fanout_work_fn *work;
	void *arg;		/* the caller's */
	/* set by engine__fanout */
	enum stage_result res;
	char *reason;		/* BLOCK, FAIL: why; owned */
	json_t *out;		/* what the child handed back, or NULL */
	int pid;
	int64_t started_ms, ended_ms;
};

/*
 * Runs the n members, at most at_once together (0: all at once), and
 * waits for all; done (may be NULL) records each end as it comes. The
 * members' usage is added to d->r. An abort or a signal stops them all
 * (SIGTERM), sets d->stop and leaves members never started at
 * STAGE_STOPPED. Returns 0 or the first error of done or the run folder.
 */
int engine__fanout(struct drive *d, struct fanout_member *m, size_t n,
		   size_t at_once, const char *steers, fanout_done_fn *done,
		   struct err *e);
/* The first member that did not pass, as the stage's result (its reason
 * moves to *reason): 1, or 0 when all passed. */
int engine__fanout_failed(struct fanout_member *m, size_t n,
			  enum stage_result *res, char **reason);
/* Frees what engine__fanout left in each member (not m itself). */
void engine__fanout_release(struct fanout_member *m, size_t n);

/*
 * engine.c: the round bound a run of pipeline p counts against under cfg
 * (its max_review_loops): the seed pipelines' own max_iterations (a
 * loop's overridden by loop.max_iterations), the feature and assist fix
 * loops' workflow.max_review_loops.
 */
struct config;
int engine__run_bound(const struct config *cfg, const struct pipeline *p);

/* engine.c: transition with a data object (consumed; may be NULL). */
int engine__move(struct drive *d, const char *to, json_t *data,
		 struct err *e);
/* Ends the run aborted on a person's request (no agent is running). */
int engine__abort(struct drive *d, struct err *e);
/* Writes d->r with an event of type (data consumed; may be NULL). */
int engine__note(struct drive *d, const char *type, json_t *data,
		 struct err *e);
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
 * engine.c: the budget line (config budget) run r has crossed, as a
 * sentence, or NULL (caller frees). Cost and tokens count what the
 * agents reported; time counts the stages.
 */
char *engine__budget_crossed(const struct config *cfg, const struct run *r);

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
/* Path of a file in the run folder (caller frees). */
char *engine__run_file(const struct drive *d, const char *name);
/* Stores an artifact's text as a new version of (stage, artifact). */
int engine__keep_output(struct drive *d, const char *artifact,
			const char *decision, const char *content,
			struct err *e);
/* The steer notes not yet handed to an agent, newest last; *upto gets the
 * seq of the last one. */
int engine__pending_steers(struct drive *d, struct buf *out, int64_t *upto,
			   struct err *e);

/*
 * report.c: run reports on the OpenViber cadence (config reports, see
 * docs/api.md "Reports"). engine__report records one now: a "report"
 * event (data: n, kind, elapsed_ms, status, stage, changed, blockers,
 * next, budget, evidence, file) through engine__record, and the same as
 * markdown in the run folder's reports/NNN.md. kind is "milestone",
 * "periodic" or "final". to and data (NULL: none) are a move of r about
 * to be made, with its transition data: the report describes the run as
 * it will be after it. Returns 0 or the store's error (the markdown is
 * best effort).
 */
int engine__report(struct engine *en, const struct pipeline *p,
		   struct run *r, const char *kind, const char *to,
		   const char *data, struct err *e);
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

#endif
