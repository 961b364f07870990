/*
 * Shared by the bug-fix family's files (bugfix.c: the run's bug-fix
 * state, who plays a stage, what it reads, questions, rca, consolidate
 * and fix rounds; bugfix_review.c: plan and code reviews, alone or as a
 * parallel group; bugfix_phased.c: the implementation, whole or step by
 * step). Nothing outside src/engine/kinds/bugfix*.c includes it.
 */
#ifndef BATON_ENGINE_KINDS_BUGFIX_INT_H
#define BATON_ENGINE_KINDS_BUGFIX_INT_H

#include <jansson.h>
#include <stddef.h>

#include "core/bugfix.h"
#include "core/config.h"
#include "core/kinds.h"
#include "engine/kinds/kind.h"
#include "util/strvec.h"

struct buf;

/* What the next stage reads of each earlier one (progressive enrichment). */
#define SUMMARY_MAX 500
#define GROUP_SUMMARY_MAX 250
/* The context a bug-fix stage adds, before the stage's own sections. */
#define SEED_CONTEXT_MAX (32 * 1024)
/* A phased implementation of more steps asks a person first (the seed's
 * "Recommended maximum: 20-30 plan steps"). */
#define PHASED_STEPS_ASK 30

/* What a verdict call leaves for its caller (call_spec.arg). */
struct verdict_out {
	enum bugfix_review_kind kind;
	char status[32];
	int findings;
};

/* One review to make: of a stage, or of a batch of plan steps. */
struct review_req {
	enum bugfix_review_kind kind;
	int version;
	char *file;		/* the verdict file it writes */
	const char *extra;	/* context before the stage's own; or NULL */
	const char *template;	/* NULL: the stage kind's */
	const char *kind_name;	/* BATON_STAGE_KIND; NULL: the stage's */
	struct strvec env;	/* extra environment */
	struct verdict_out out;
};

/* One reviewer among several that run at once (fanout.c). */
struct member {
	const struct stage *s;	   /* the stage it reviews for */
	struct config_provider prov;
	struct review_req rq;	   /* what it reviews, and its verdict */
	enum stage_result res;
	char *reason;
	int missing;		   /* blocked: its agent is not installed */
	int refused;		   /* blocked: its agent was refused its
				      credentials (a person provides them) */
	int unanswered;		   /* failed: its agent gave no answer */
};

/*
 * The person's answer to the question of that kind the run waited on,
 * taken (the question and its answer leave progress): a copy, "" when
 * it was approved without guidance, NULL when it was not asked.
 */
char *bf_take_answer(struct drive *d, const char *kind);
/* Records the verdict (or "complete") on a stage's current version. */
void bf_mark(struct drive *d, const char *stage, int version, const char *status,
	     const char *file);
/* progress.<key>.<name>, created when absent; borrowed from p. */
json_t *bf_prog_obj(json_t *p, const char *key, const char *name);
/*
 * The seed's "Codex error: ask to skip or install": stage s waits for a
 * person, who installs the agent and approves to run it again, or
 * approves with "skip" to go on without it. why names what is missing.
 */
int bf_ask_install(struct drive *d, const struct stage *s, const char *why,
		   const char *what, enum stage_result *res);
/* A call of s that blocked on a missing agent asks, when s may be
 * skipped. */
int bf_ask_missing(struct drive *d, const struct stage *s, enum stage_result *res,
		   char **reason);
/*
 * Ends the stage with a question: the run waits for approval, an answer
 * (approve with guidance) enters ask_to, a rejection ends the run.
 */
int bf_ask(struct drive *d, const struct stage *s, const char *kind,
	   const char *question, json_t *options, const char *ask_to,
	   enum stage_result *res);
/* The first stage of kind k in p, or NULL. */
const struct stage *bf_first_of(const struct pipeline *p, enum stage_kind k);
/*
 * VCP's "Suggesting Restart": instead of ending the run (why, outcome), s
 * asks a person (question kind) to restart from the RCA, revise the fix
 * plan, or continue with stage cont (round: continuing spends a fix
 * round); a rejection ends the run with outcome.
 */
int bf_ask_restart(struct drive *d, const struct stage *s, const char *kind,
		   const char *why, const char *outcome,
		   const struct stage *cont, int round, enum stage_result *res);
/* The text of the answer that took option at a routed question (taken
 * from progress), or NULL. */
char *bf_take_option(struct drive *d, const char *option);
/*
 * On entering stage s after an agent_missing question: when the person
 * said "skip", the stage is recorded as skipped and *res is PASS. Any
 * other answer runs the stage again (*res is left alone).
 */
int bf_skip_answered(struct drive *d, const struct stage *s, enum stage_result *res,
		     struct err *e);
void bf_prog_set_str(struct drive *d, const char *key, const char *value);
/*
 * The version a stage's next output gets: its current one while no
 * verdict was taken on it (a re-run after a crash writes it again), else
 * the next. Recorded, with the verdict cleared.
 */
int bf_begin_version(struct drive *d, const struct stage *s);
/* The documents a stage of kind k works from. */
void bf_seed_context(struct drive *d, const struct stage *s, struct buf *ctx,
		     size_t *budget);
/*
 * The provider of a bug-fix call: named (a phased reviewer), the stage's
 * own, or its role's; with the stage's model and timeout over it. A copy
 * sharing the config's strings. NULL with *reason set when none plays it.
 */
int bf_who(struct drive *d, const struct stage *s, const char *name,
	   const char *model, struct config_provider *out, char **reason);
/* progress.stages[name].<key> as a string (a copy), or NULL. */
char *bf_stage_str(const struct drive *d, const char *name, const char *key);
/* A string of progress (a copy; NULL when absent). */
char *bf_prog_str(const struct drive *d, const char *key);
/* Review r is re-reviewed alone after its fix round; NULL: no longer. */
void bf_set_rereview(struct drive *d, const struct stage *r);
/* Records stage s as skipped by a person. */
int bf_mark_skipped(struct drive *d, const struct stage *s, struct err *e);
/* One reviewer call for stage s. */
int bf_review_call(struct drive *d, const struct stage *s,
		   const struct config_provider *prov, const char *steers,
		   struct review_req *rq, enum stage_result *res, char **reason,
		   struct err *e);
/*
 * Runs the members at once, one child process each, and waits for all
 * (engine__fanout). An abort or a signal stops them all. Each member's
 * end is recorded ("review_done", with its times) as it comes.
 */
int bf_run_members(struct drive *d, struct member *m, size_t n, const char *steers,
		   struct err *e);
void bf_members_release(struct member *m, size_t n);
/*
 * The first member that failed or was stopped, as the stage's result; a
 * missing agent or a refused credential is not a failure here (the group
 * asks about them: members_missing, members_refused).
 */
int bf_members_failed(struct member *m, size_t n, enum stage_result *res,
		      char **reason);
void bf_review_req_release(struct review_req *rq);

/* Each part's ops (registry.c) besides bugfix.c's. */
int bf_review_stage(struct drive *d, const struct stage *s,
		    const char *steers, enum stage_result *res, char **reason,
		    struct err *e);
int bf_implement_stage(struct drive *d, const struct stage *s,
		       const char *steers, enum stage_result *res,
		       char **reason, struct err *e);

#endif
