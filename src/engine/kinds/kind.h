/*
 * The context API of the stage kinds: what a family's code in
 * src/engine/kinds/ may use of the engine, and the registry it plugs
 * into (docs/architecture.md).
 *
 * A family implements its kinds as struct stage_ops and its pipeline
 * type's rules as struct type_ops; registry.c maps each kind and type to
 * them. The driver, the transition door and the routing call only these
 * hooks: none of them names a family or a kind. A family in turn talks
 * to the engine only through what this header declares: the run it
 * works on (struct drive), notes and questions, agent calls, its files
 * in the run folder, checkpoints and the project's checks. It never
 * includes engine_int.h, the driver's own.
 *
 *   stage runner (stage.c)     ──▶ stage_ops_for(p, s)->run
 *   routing (route.c)          ──▶ ->pending, ->back, ->on_loop, ->exhausted,
 *                                  ->stuck, type_ops_for(p)->gate
 *   door (door.c)              ──▶ type_ops_for(p)->stamp
 *   call, prompt (call.c,      ──▶ ->context, ->accept
 *   prompt.c)
 *   feature kinds              ──▶ type_ops_for(p)->after_edit
 */
#ifndef BATON_ENGINE_KINDS_KIND_H
#define BATON_ENGINE_KINDS_KIND_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/run.h"
#include "util/strvec.h"

struct buf;
struct config;
struct config_provider;
struct engine;
struct err;
struct pipeline;
struct policy;
struct stage;

/* How a stage ended, as the engine routes it. */
enum stage_result {
	STAGE_PASS,	/* success: on to next */
	STAGE_LOOP,	/* checks failed or changes requested: the fix loop */
	STAGE_BLOCK,	/* the run should stop: reason set */
	STAGE_FAIL,	/* unrecoverable: reason set */
	STAGE_STOPPED,	/* stopped by abort or a signal */
	STAGE_ASK,	/* a person must answer: d->ask, d->ask_to */
	STAGE_FINISH,	/* success that ends the run: the terminal instead
			   of the next stage (a loop's plan finds the goal
			   met) */
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
	int steered;	/* the agent was stopped to be steered now */
	int leave;	/* hand the run back (paused at a budget): the next
			   driver starts with the config as it is then */
	int64_t report_ms; /* when the last report was due or made, for
			      the periodic ones; 0: read it from the store */
	/*
	 * A member of a parallel group runs in a child process of its own
	 * (kinds/fanout.c): its notes are bare events, never run writes, and what
	 * it did goes back to the parent in a result file.
	 */
	int member;
	int member_no;		/* a member: its place in the group, from 1;
				   in its calls' names, as two members of
				   one stage may call one provider */
	const char *outcome;	/* RUN_OUTCOME_* for a BLOCK or FAIL */
	int in_steps;		/* a phased implementation: a checkpoint
				   ends a step, not the stage */
	int missing;		/* the last call blocked because its agent
				   program is not installed */
	const char *needs;	/* the last call blocked for want of what a
				   person can provide ("credential"): the
				   run waits for it (route.c) */
	int unanswered;		/* the last call failed because its agent
				   gave no usable answer (exited, crashed,
				   timed out, or wrote nothing valid after
				   its retries); not a veto, breach or
				   budget */
	const struct call_spec *call; /* set around a bug-fix stage's call */
	json_t *ask;		/* STAGE_ASK: the question event's data */
	/* paths of the worktree the stage's calls changed that a diff does
	   not show (ignored files), for the checkpoint's policy */
	struct strvec unseen;
	/* the last engine__checkpoint found a change (a commit or an
	   unseen path): an editing stage that made none and said nothing
	   produced nothing */
	int ckpt_changed;
	char *ask_to;		/* STAGE_ASK: the status an answer enters */
	/* what failed on the stage's last call, for the prompt of the call
	   that tries again (call.c); NULL: nothing */
	char *fail_delta;
	/* budget.c: what the budget's actions did to the run so far, read
	   from its "budget_action" events once (budget_loaded) */
	struct strvec downgraded; /* "ROLE=PROVIDER_OR_MODEL" */
	unsigned reduced;	  /* lines whose action lowered the effort */
	int budget_loaded;
	/* takeover.c: where the shared remote's checkpoint ref of the run
	   is, as far as this driver knows (NULL: none there); read once a
	   drive (ckpt_read), then moved by each push */
	char *ckpt_tip;
	int ckpt_read;
};

/*
 * What a family's agent call differs in from a feature stage's (set
 * around engine__call by engine__call_as): the file it writes, extra context, how its output is
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
	const struct policy *policy; /* what an ACP agent's asks are held
					to (agent.h); NULL: allowed_paths */
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


/*
 * call.c: one call of provider prov for stage s: prompt, agent,
 * contract (retried once), a failed call tried again as its failure
 * class allows (the next prompt carrying d->fail_delta), usage and
 * events. The stop paths (abort, signal) give STAGE_STOPPED.
 */
int engine__call(struct drive *d, const struct stage *s,
		 const struct config_provider *prov, const char *steers,
		 enum stage_result *res, char **reason, struct err *e);

/* A run-folder file read whole into out (capped, never through a link):
 * 0, or negative when absent or too big. */
int engine__read_file(const struct drive *d, const char *name,
		      struct buf *out);
/* Writes a run-folder file atomically. */
int engine__write_file(const struct drive *d, const char *name,
		       const char *text, struct err *e);

/*
 * stage.c: the providers that play stage s, at most max (up to
 * ENGINE_MAX_PLAYERS): the stage's own (provider:) when it names them,
 * else its role's; each with the stage's model and timeout_seconds over
 * its own (copies sharing the config's strings). 0 with *reason (owned)
 * when none plays it.
 */
#define ENGINE_MAX_PLAYERS 8
size_t engine__players(const struct drive *d, const struct stage *s,
		       struct config_provider *out, size_t max,
		       char **reason);


/*
 * stage.c: commits the worktree as the stage's checkpoint and holds the
 * edits to policies.allowed_paths (a path outside them: STAGE_BLOCK).
 * The run write carries d->r as it is, progress included.
 */
int engine__checkpoint(struct drive *d, const struct stage *s,
		       enum stage_result *res, char **reason, struct err *e);

/*
 * takeover.c: with a shared remote (repo.url), pushes commit as the
 * run's checkpoint and the run folder's files with it, so that another
 * host can take the run over; called before the run write that records
 * commit. 1 when pushed, 0 when there is nothing to push to; a failure
 * is logged and returned (negative), for the caller to put on record.
 */
int engine__ckpt_push(struct drive *d, const char *commit);
/* takeover.c: deletes the run's checkpoint refs (here and on repo.url)
 * once it has ended; failures are logged. */
void engine__ckpt_forget(struct drive *d);


/*
 * progress.c. The run's progress object (runs.progress), parsed (the
 * caller json_decref()s; an empty object when there is none), and
 * written back into d->r (saved with the next run write).
 */
json_t *engine__prog_load(const struct drive *d);
void engine__prog_save(struct drive *d, json_t *p);
/* obj.<key> as an object, made (empty) when absent or not an object;
 * borrowed from obj. A family keeps its state in one such part. */
json_t *engine__prog_part(json_t *obj, const char *key);
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
 * progress.c: stage s cannot go on without what a person can provide
 * (needs: "credential", "access", "resource" or "permission"; why says
 * what, and how to fix it). OpenViber's Blocked: the run waits at a
 * question (kind "needs", routed: approving runs s again), and a
 * rejection ends it blocked with why. extra (consumed; may be NULL) adds
 * to the question.
 */
int engine__ask_needs(struct drive *d, const struct stage *s,
		      const char *needs, const char *why, json_t *extra,
		      enum stage_result *res);

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


/* call.c: runs the project's checks (validation.json): PASS or LOOP
 * (a check failed) or STOPPED. */
int engine__validate(struct drive *d, const struct stage *s,
		     enum stage_result *res, struct err *e);

/* stage.c: where the run's agents work: the worktree, or the run folder
 * for a pipeline without one (workspace: none). */
const char *engine__work_dir(const struct drive *d);


/*
 * kinds/fanout.c: a parallel group of one stage's agent calls, each member in a
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


/* Writes d->r with an event of type (data consumed; may be NULL). */
int engine__note(struct drive *d, const char *type, json_t *data,
		 struct err *e);

/*
 * budget.c: the budget line (config budget) run r has crossed, as a
 * sentence, or NULL (caller frees); *line (may be NULL) says which. Cost
 * and tokens count what the agents reported; time counts the stages;
 * turns count agent calls in en's store (en NULL: turns are not counted).
 */
char *engine__budget_crossed(struct engine *en, const struct config *cfg,
			     const struct run *r, enum budget_line *line);
/*
 * Before an agent call of stage s by prov: a line reached takes its
 * action. Returns 1 when the stage must not call (*res: STAGE_BLOCK with
 * *reason, or STAGE_STOPPED when paused; *rc an error), 0 to go on.
 */
int engine__budget_check(struct drive *d, const struct stage *s,
			 const struct config_provider *prov,
			 enum stage_result *res, char **reason, int *rc,
			 struct err *e);
/* At the boundary into x: a line whose action is pause pauses there (1). */
int engine__budget_boundary(struct drive *d, const struct stage *x, int *rc,
			    struct err *e);
/* prov as the run's downgrades and effort make it (tmp holds a copy). */
const struct config_provider *
engine__budget_provider(struct drive *d, const struct stage *s,
			const struct config_provider *prov,
			struct config_provider *tmp);


/* Path of a file in the run folder (caller frees). */
char *engine__run_file(const struct drive *d, const char *name);

/* Stores an artifact's text as a new version of (stage, artifact). */
int engine__keep_output(struct drive *d, const char *artifact,
			const char *decision, const char *content,
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
 * What one stage kind does, as hooks. run is required; the rest may be
 * NULL, which means the generic behaviour.
 */
struct stage_ops {
	/* Does the stage's work: *res, and *reason (owned) for BLOCK and
	 * FAIL. A question for a person is STAGE_ASK (engine__ask). */
	int (*run)(struct drive *d, const struct stage *s, const char *steers,
		   enum stage_result *res, char **reason, struct err *e);
	/* After s passed: a stage (of s's parallel group) still waiting
	 * for a fix round, routed as if it had asked for changes; NULL:
	 * on past s. */
	const struct stage *(*pending)(struct drive *d, const struct stage *s);
	/* A side stage that returns (next: back) passed: the stage it goes
	 * back to, set up for its re-review; NULL: nobody waits for it. */
	const struct stage *(*back)(struct drive *d, const struct stage *s);
	/* s sends the run into its fix loop (a round is spent). */
	void (*on_loop)(struct drive *d, const struct stage *s);
	/* s asked for another round with the round budget spent: why the
	 * run blocks (caller frees) and its outcome (RUN_OUTCOME_*, or
	 * NULL). reason is the stage's own (may be NULL). NULL hook: the
	 * fix loop's sentence naming workflow.max_review_loops. */
	char *(*exhausted)(struct drive *d, const struct stage *s,
			   const char *reason, const char **outcome);
	/* The run is about to end blocked after s (why, outcome: may be
	 * NULL): 0 with *res STAGE_ASK when s asks a person instead
	 * (engine__ask), 0 with *res left alone to end it. */
	int (*stuck)(struct drive *d, const struct stage *s, const char *why,
		     const char *outcome, enum stage_result *res);
	/* A stage run by engine__call without a call_spec: the context its
	 * agent reads within *budget, and how its output is held to the
	 * kind's contract (BATON_ECONTRACT: retry). */
	void (*context)(struct drive *d, const struct stage *s,
			struct buf *ctx, size_t *budget);
	int (*accept)(struct drive *d, const struct stage *s,
		      const char *text, enum stage_result *res, char **reason,
		      struct err *e);
};

/*
 * The rules of a pipeline type (core/pipeline.c has its parse-time
 * rules), as hooks; each may be NULL.
 */
struct type_ops {
	const char *type;	/* "feature", "bugfix", ... */
	/* the ops of stage s when the type's differ from its kind's */
	const struct stage_ops *(*ops)(const struct stage *s);
	/* keeps the type's part of the run's view in prog as the run
	 * enters stage s (NULL: a wait, a pause or the end; terminal: the
	 * end) */
	void (*stamp)(json_t *prog, const struct stage *s, int terminal);
	/* after a stage's edits passed their checkpoint */
	int (*after_edit)(struct drive *d, const struct stage *s,
			  enum stage_result *res, struct err *e);
	/* what the type adds to the context of stage s's agent */
	void (*context)(struct drive *d, const struct stage *s,
			struct buf *ctx, size_t *budget);
	/* 1 when a person approves run r of p before stage x */
	int (*gate)(const struct engine *en, const struct pipeline *p,
		    const struct run *r, const struct stage *x);
};

/* registry.c: the ops of stage s of p, and of p's type. */
const struct stage_ops *stage_ops_for(const struct pipeline *p,
				      const struct stage *s);
const struct type_ops *type_ops_for(const struct pipeline *p);

/* Each family's ops (kinds/<family>.c). */
extern const struct stage_ops feature_agent_ops, feature_validate_ops;
extern const struct stage_ops bugfix_ops, bugfix_review_ops,
	bugfix_consolidate_ops, bugfix_back_ops, bugfix_implement_ops,
	bugfix_arbiter_ops;
extern const struct type_ops bugfix_type;
extern const struct stage_ops loop_ops;
extern const struct type_ops loop_type;
extern const struct stage_ops assist_ops;
extern const struct type_ops assist_type;
extern const struct stage_ops research_ops, research_judge_ops;
extern const struct stage_ops plugin_ops;

#endif
