/*
 * Pipelines as data, and the transition table derived from them.
 *
 * A pipeline is an ordered list of stages. Each stage has a kind (what the
 * engine does there and what contract its output must meet), the status
 * the run shows while it works, an optional resting status after it
 * ("planned"), and outcome edges: where success goes (`next`), where a
 * failed check goes (`on_fail`, validate stages) and where requested
 * changes go (`on_changes`, review stages). A `side` stage is not in the
 * main line; it is entered only through those loop edges.
 *
 *   # the built-in feature pipeline (src/core/pipelines/feature.yaml)
 *   name: feature
 *   terminal: merge_ready
 *   stages:
 *     - {name: plan, kind: plan}
 *     - {name: architect, kind: architect}
 *     - {name: execute, kind: execute}
 *     - {name: validate, kind: validate, on_fail: fix}
 *     - {name: review, kind: review, on_changes: fix}
 *     - {name: verify, kind: verify}
 *     - {name: fix, kind: fix, side: true, next: validate}
 *
 * From the stages alone, pipeline_derive() builds every legal edge
 * between statuses; nothing else may move a run (DESIGN.md section 2):
 *
 *   flow      created → first stage; stage → its resting status; resting
 *             point → next stage or the terminal; loop edges
 *   gate      each boundary A → X into a stage: A → waiting_for_approval,
 *             waiting_for_approval → X (approve), → the stage that ended
 *             at A (request changes), → blocked (reject)
 *   pause     each boundary A → X: A → paused, paused → X (resume)
 *   defer     waiting_for_approval → paused (a gate or question put
 *             off), paused → waiting_for_approval (resume asks again)
 *   always    any non-terminal → failed, aborted; any stage status →
 *             blocked, interrupted; interrupted → that stage again
 *   back      a side stage with next: back → every stage that sends work
 *             to it (re-review), as a boundary
 *   group     each member of a parallel group → the group's successor
 *   person    seed reviews, consolidate and a phased implementation →
 *             waiting_for_approval (ask) and back (answer); a plan review
 *             also waiting_for_approval → the first rca (re-examine)
 *   needs     every stage an agent does → waiting_for_approval (ask) and
 *             back (answer): a credential it lacks (added last, so a
 *             pair a gate has keeps the gate's name)
 *
 *   # the built-in bug-fix pipeline (src/core/pipelines/bugfix.yaml)
 *   type: bugfix
 *   stages: [rca, rca, plan-review, implementation, code-review,
 *            code-review, code-review]
 *   # implied: consolidate after the rca run; fix and revise as side
 *   # stages with next: back, the on_changes of code and plan reviews
 *
 * Pure: no I/O. Built-in definitions are compiled in (util/embed.h).
 */
#ifndef BATON_CORE_PIPELINE_H
#define BATON_CORE_PIPELINE_H

#include <stddef.h>

#include "core/kinds.h"
#include "util/strvec.h"

struct buf;
struct cnode;
struct err;
struct plugin_kind;

/* Statuses every pipeline shares. */
#define ST_CREATED     "created"
#define ST_WAITING     "waiting_for_approval"
#define ST_PAUSED      "paused"
#define ST_INTERRUPTED "interrupted"
#define ST_BLOCKED     "blocked"
#define ST_FAILED      "failed"
#define ST_ABORTED     "aborted"
#define ST_MERGE_READY "merge_ready"
#define ST_COMPLETED   "completed"

/* stage.next of a side stage that returns to the stage that sent it. */
#define STAGE_BACK (-2)

/* One reviewer of a phased implementation (phased_reviews: [...]). */
struct phased_reviewer {
	char *provider;	 /* a provider name */
	char *model;	 /* NULL: the provider's */
	int parallel;	 /* runs at once with its parallel neighbours */
};

struct stage {
	char *name;	 /* "plan"; unique in the pipeline */
	enum stage_kind kind;
	char *status;	 /* shown while the stage works: "planning" */
	char *done;	 /* resting status after success ("planned") or NULL */
	char *role;	 /* who does it ("planner"); NULL for validate and
			    consolidate */
	int side;	 /* entered only by on_fail / on_changes edges */
	int next;	 /* stage index after success; -1: the terminal;
			    STAGE_BACK: the stage that sent it here */
	int on_fail;	 /* validate: stage index when a check fails; -1 */
	int on_changes;	 /* review: stage index on CHANGES_REQUESTED (seed
			    reviews: needs_changes); -1 */
	char *where;	 /* "file:line:col" of the definition, for errors
			    found later (providers); "" when unknown */
	int implicit;	 /* added by the parser, not written (a bug-fix
			    pipeline's consolidate, fix and revise) */
	int index;	 /* 1-based among the stages of its kind (the seed's
			    stageIndex, used in output file names) */
	struct strvec providers; /* provider: one or a list; empty: the
				    role's providers */
	char *model;	 /* model: overrides the provider's; NULL: none */
	int parallel;	 /* parallel: true */
	int group;	 /* parallel group number (1, 2, ...); 0: none. A
			    group is 2+ consecutive seed reviews of one
			    kind, all parallel; they run at once */
	int gate;	 /* gate: true: a person approves entry */
	int timeout_seconds; /* overrides the provider's; 0: the provider's */
	/* budget: what the stage's agent calls may spend together in a
	 * run, its retries, re-reviews and fix rounds included; 0: no
	 * limit */
	double max_cost_usd;
	long max_tokens;
	int on_reject_stop; /* code-review: rejected ends the run
			       (code_rejected) instead of a rework round */
	struct phased_reviewer *phased; /* implementation: phased_reviews */
	size_t nr_phased;
	int review_interval;	   /* steps per phased review batch: 1 */
	int max_phased_iterations; /* fix rounds per batch before a gate: 3 */
	/* KIND_PLUGIN: the kind, borrowed from the plugin registry, which
	   outlives every pipeline; NULL for the others */
	const struct plugin_kind *pkind;
	char *prompt;	 /* prompt: the template used instead of the
			    kind's (a built-in name, which .baton/prompts/
			    may override); NULL: the kind's */
	char *findings;	 /* findings: a contract on a review's findings
			    ("security": severity, file, line, category,
			    evidence each); NULL: none */
};

/* Why an edge exists; shown by `baton pipeline show`. */
enum edge_why {
	WHY_START,    /* created → first stage */
	WHY_DONE,     /* stage → its resting status */
	WHY_NEXT,     /* on to the next stage or the terminal */
	WHY_FAIL,     /* a check failed: into the fix loop */
	WHY_CHANGES,  /* review asked for changes: into the fix loop */
	WHY_GATE,     /* a gate stops the run before a stage */
	WHY_APPROVE,  /* the gate was approved */
	WHY_REDO,     /* the gate asked for changes: re-run the stage before */
	WHY_REJECT,   /* the gate was rejected */
	WHY_PAUSE,    /* a pause took effect at a boundary */
	WHY_RESUME,   /* resumed to where the pause was taken */
	WHY_BLOCK,    /* contract broken or loop budget spent */
	WHY_FAILED,   /* an unrecoverable error */
	WHY_ABORT,    /* a person aborted */
	WHY_INTERRUPT, /* the driver died mid-stage */
	WHY_RECOVER,  /* re-enter the interrupted stage */
	WHY_REREVIEW, /* a fix goes back to the review that asked for it */
	WHY_ASK,      /* the engine asks a person (disagreeing RCAs,
			 needs_clarification, a rejected plan, exhausted
			 phased rounds) */
	WHY_ANSWER,   /* the person answered: the stage runs again */
	WHY_REEXAMINE, /* a rejected plan: analyse the bug again */
	WHY_CONTINUE, /* a loop's evaluation: another iteration */
	WHY_GOAL,     /* a loop's plan finds the goal met */
	WHY_REWORK,   /* a research judge sends weak claims back */
	WHY_REVISE,   /* feedback: plan again with the person's notes */
	WHY_DEFER,    /* a person put the gate or question off (paused) */
	WHY_ASK_AGAIN, /* resumed: the deferred gate or question asks again */
};

/*
 * The most stages a pipeline may have. Far past any real one: it keeps a
 * runaway generated config from costing every command that loads it.
 */
#define PIPELINE_MAX_STAGES 1000

struct edge {
	const char *from, *to; /* borrowed from the pipeline's status list */
	size_t from_at, to_at; /* their indexes in it: the table's order */
	enum edge_why why;
};

struct pipeline {
	char *name;
	char *description;
	char *type;	 /* "feature" or "bugfix": which stage kinds it may
			    use (pipeline_kind_allowed) */
	int max_iterations; /* fix and re-review rounds over all seed
			       reviews before max_iterations_reached: 10 */
	char *terminal;	 /* merge_ready or completed */
	int no_git;	 /* workspace: none (research): no worktree; agents
			    work in the run folder */
	int read_only;	 /* read_only: true: no stage may change the
			    worktree (the sandbox mounts it read-only; any
			    change is a policy violation that blocks) */
	/* states: the seed's names for baton's statuses ("created:
	   pending"), shown beside the status; state_of[i] is the name
	   of statuses[i] or NULL */
	char **state_of;
	int builtin;
	char *plugin;	 /* the id of the plugin that provides it, or NULL */
	struct stage *stages;
	size_t nr_stages;
	char **statuses; /* every status, in display order */
	size_t nr_statuses;
	struct edge *edges; /* sorted by from, then to (status order) */
	size_t nr_edges;
};

/* The kind of s by name: a plugin kind's own name, else the built-in's. */
const char *stage_kind_label(const struct stage *s);
const char *edge_why_name(enum edge_why w);

/*
 * Builds a pipeline from its definition (a map node; name comes from the
 * caller) and derives its table. Errors name the place and the stage:
 * ".baton/config.yaml:12:9: pipelines.quick.stages[2] (review): on_changes
 * names no stage 'fixx'". The caller pipeline_free()s *out.
 */
int pipeline_parse(const char *name, const struct cnode *def, int builtin,
		   struct pipeline **out, struct err *e);
void pipeline_free(struct pipeline *p);

/*
 * Looks name up in the config's pipelines map (may be NULL), then among
 * the built-ins, then the enabled plugins' (core/plugin.h; p->plugin
 * names the one). BATON_ENOTFOUND names the pipelines that exist.
 */
int pipeline_load(const struct cnode *user_pipelines, const char *name,
		  struct pipeline **out, struct err *e);
/* Names of the built-in pipelines, NULL-terminated, static. */
const char **pipeline_builtin_names(void);

/* The seed's name for status in p (its states: map), or NULL. */
const char *pipeline_state(const struct pipeline *p, const char *status);

/* The edge from → to, or NULL when the table has none. */
const struct edge *pipeline_edge(const struct pipeline *p, const char *from,
				 const char *to);
/*
 * Checks from → to against the table: 0, or BATON_EBADSTATE with
 * "illegal transition 'from' -> 'to' in pipeline 'name'" and the legal
 * targets from 'from'.
 */
int pipeline_check(const struct pipeline *p, const char *from, const char *to,
		   struct err *e);

/*
 * A move of a run's status, as the transition door (engine_transition)
 * hands it to the store after pipeline_check: store_run_move checks it
 * again against p's table, and against the run as stored, before it
 * writes; store_run_update refuses any change of status (store.h). So
 * the one way a run's status changes is along an edge of its table.
 * Borrowed pointers, valid for the call.
 */
struct run_move {
	const struct pipeline *p; /* the run's, whose table allows it */
	const char *from, *to;
};

/* 1 if status is one of the pipeline's statuses. */
int pipeline_has_status(const struct pipeline *p, const char *status);
/* The stage whose working status is status, or NULL. */
const struct stage *pipeline_stage_at(const struct pipeline *p,
				      const char *status);
/* The stage whose resting status is status, or NULL. */
const struct stage *pipeline_stage_done_at(const struct pipeline *p,
					   const char *status);
const struct stage *pipeline_stage_named(const struct pipeline *p,
					 const char *name);
/* The first stage of the main line. */
const struct stage *pipeline_first(const struct pipeline *p);
/* Index of s in p->stages. */
int pipeline_stage_index(const struct pipeline *p, const struct stage *s);

/* 1 if a pipeline of type ("feature", "bugfix") may have a stage of k. */
int pipeline_kind_allowed(const char *type, enum stage_kind k);
/*
 * The round bound (a run's max_review_loops) a run of p counts against:
 * the feature and assist fix loops' max_review_loops (the config's
 * workflow.max_review_loops), a loop's loop_max_iterations when set,
 * else the pipeline's own max_iterations.
 */
int pipeline_run_bound(const struct pipeline *p, int max_review_loops,
		       int loop_max_iterations);
/* The stages of parallel group g (first index and count); 0 when none. */
size_t pipeline_group(const struct pipeline *p, int g, size_t *first);
/*
 * The main-line stage after s's group (or after s): index or -1 (the
 * terminal); STAGE_BACK for a side stage that returns to its sender.
 */
int pipeline_after(const struct pipeline *p, const struct stage *s);

/* 1 for merge_ready, completed, blocked, failed, aborted. */
int status_is_terminal(const char *status);

/* Human listing: stages, then the table grouped by source status. */
void pipeline_describe(const struct pipeline *p, struct buf *out);

#endif
