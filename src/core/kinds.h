/*
 * Stage kinds: one table of what each kind is (DESIGN.md section 2).
 *
 * A kind says what the engine does in a stage and what its output must
 * meet. Everything the parser, the transition table and the engine's
 * generic code need to know about a kind is a fact in this table: its
 * names, the statuses it shows, the role that plays it, the family that
 * owns it, and flags. Generic code asks the table ("may this kind end
 * with a question?"), never the kind's name; what a kind does is its
 * family's code, registered in src/engine/kinds/registry.c.
 *
 * Adding a kind: a line in enum stage_kind, a line in kinds.c, and its
 * stage_ops in src/engine/kinds/ (docs/architecture.md).
 *
 * Pure: no I/O.
 */
#ifndef BATON_CORE_KINDS_H
#define BATON_CORE_KINDS_H

enum stage_kind {
	KIND_PLAN,
	KIND_ARCHITECT,
	KIND_EXECUTE,
	KIND_VALIDATE,
	KIND_REVIEW,
	KIND_FIX,
	KIND_VERIFY,
	/* the bug-fix family (VCP seed 002): type names in parentheses */
	KIND_RCA,	   /* (rca) an agent's root-cause analysis record */
	KIND_CONSOLIDATE,  /* (consolidate) the engine merges the RCAs and
			      writes the user story and the fix plan */
	KIND_PLAN_REVIEW,  /* (plan-review) a verdict on diagnosis and plan */
	KIND_IMPLEMENT,	   /* (implementation) the fix, maybe step by step */
	KIND_CODE_REVIEW,  /* (code-review) a verdict on the change */
	KIND_REVISE,	   /* (revise) side: rewrites the fix plan for a
			      plan review that asked for changes */
	/* the loop family (Craik seed 004): bounded iterations */
	KIND_LOOP_PLAN,	   /* (loop-plan) the next step and its effects */
	KIND_ACT,	   /* (act) one governed step: stop conditions,
			      policy, the agent, a receipt */
	KIND_OBSERVE,	   /* (observe) the engine records what the act
			      left and runs the project's checks */
	KIND_EVALUATE,	   /* (evaluate) continue, done or blocked */
	/* the assist family (OpenViber seed 003) */
	KIND_INTAKE,	   /* (intake) the engine classifies the task */
	KIND_REPORT,	   /* (report) the engine reports with evidence
			      and asks for feedback */
	/* the research family (openTiger seed 001): no git */
	KIND_CLAIMS,	   /* (claims) the question as claims */
	KIND_COLLECT,	   /* (collect) evidence, one agent per claim, at
			      once */
	KIND_CHALLENGE,	   /* (challenge) counter-evidence */
	KIND_COMPOSE,	   /* (compose) the report */
	KIND_JUDGE,	   /* (judge) pass, or rework of the weak claims */
	KIND_ARBITER,	   /* (arbiter) one verdict from a parallel group
			      of reviews: their findings merged */
	/* a kind a plugin implements with a command (core/plugin.h); the
	   stage's pkind says which. Written by its own name, never as
	   "plugin" */
	KIND_PLUGIN,
	KIND__COUNT
};

/* The family whose code does a kind's work (src/engine/kinds/<family>). */
enum kind_family {
	FAMILY_FEATURE,
	FAMILY_BUGFIX,
	FAMILY_LOOP,
	FAMILY_ASSIST,
	FAMILY_RESEARCH,
	FAMILY_PLUGIN,	/* kinds plugins implement (kinds/plugin.c) */
};

/* Facts about a kind, as flags. */
enum kind_flag {
	KF_ENGINE = 1 << 0,	 /* the engine does it itself, no agent:
				    guidance waits for the next agent */
	KF_ROUNDS = 1 << 1,	 /* a versioned verdict with fix rounds of
				    its own, counted against the pipeline's
				    max_iterations; may run as a parallel
				    group */
	KF_ASKS = 1 << 2,	 /* may end with a question for a person */
	KF_PLAN_ENTRY = 1 << 3,	 /* feedback sends the run back here to
				    plan again */
	KF_ON_FAIL = 1 << 4,	 /* may have on_fail: a failed check */
	KF_ON_CHANGES = 1 << 5,	 /* may have on_changes: asked for changes,
				    another iteration, rework */
	KF_GOES_BACK = 1 << 6,	 /* as a side stage may return (next:
				    back) to the stage that sent it */
	KF_SHOWS_DIFF = 1 << 7,	 /* its agent reads the change's diff */
	KF_UNNAMED = 1 << 8,	 /* never written by its name: a plugin's
				    kind names it (stage.pkind) */
};

struct kind_info {
	const char *name;	/* in pipeline definitions: "plan-review" */
	const char *status;	/* shown while it works: "reviewing_plan" */
	const char *done;	/* resting status after success, or NULL */
	const char *role;	/* who plays it; NULL for the engine's own */
	enum kind_family family;
	unsigned flags;		/* enum kind_flag */
	const char *phase;	/* a loop's phase in it (Craik), or NULL */
	/* the files it leaves in the run folder: [0] the main one */
	const char *artifact[2];
	/* why a pipeline may have only one stage of it, or NULL */
	const char *once;
	/* its loop edge, as a sentence's subject: "validation failed",
	   "validation still fails" (NULL: a review's) */
	const char *looped, *still;
};

/* The facts of kind k (k < KIND__COUNT). */
const struct kind_info *kind_info(enum stage_kind k);
/* 1 when kind k has every flag of flags. */
int kind_is(enum stage_kind k, unsigned flags);

/* Name of k ("?" past the table); the kind named name. */
const char *stage_kind_name(enum stage_kind k);
int stage_kind_parse(const char *name, enum stage_kind *out);

/* The name of family f: "feature", "bugfix", ... */
const char *kind_family_name(enum kind_family f);

#endif
