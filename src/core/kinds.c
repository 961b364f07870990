/*
 * The table of stage kinds: see kinds.h.
 */
#include "util/compat.h"

#include "core/kinds.h"
#include "util/err.h"

#define CHECKS "validation failed", "validation still fails"

static const struct kind_info kinds[KIND__COUNT] = {
	[KIND_PLAN] = { "plan", "planning", "planned", "planner",
			FAMILY_FEATURE, KF_PLAN_ENTRY, NULL,
			{ "plan.md", NULL }, NULL, NULL, NULL },
	[KIND_ARCHITECT] = { "architect", "architecting", "architected",
			     "architect", FAMILY_FEATURE, 0, NULL,
			     { "architecture.md", NULL }, NULL, NULL, NULL },
	[KIND_EXECUTE] = { "execute", "executing", NULL, "implementer",
			   FAMILY_FEATURE, 0, NULL,
			   { "execution.log", "escalation.json" }, NULL, NULL,
			   NULL },
	[KIND_VALIDATE] = { "validate", "validating", NULL, NULL,
			    FAMILY_FEATURE, KF_ENGINE | KF_ON_FAIL, NULL,
			    { "validation.json", NULL }, NULL, CHECKS },
	[KIND_REVIEW] = { "review", "reviewing", NULL, "reviewer",
			  FAMILY_FEATURE, KF_ON_CHANGES | KF_SHOWS_DIFF, NULL,
			  { "review.json", "review.md" }, NULL, NULL, NULL },
	[KIND_FIX] = { "fix", "fixing", NULL, "fixer", FAMILY_FEATURE,
		       KF_GOES_BACK, NULL, { "finding-responses.md", NULL },
		       NULL, NULL, NULL },
	[KIND_VERIFY] = { "verify", "verifying", NULL, "verifier",
			  FAMILY_FEATURE, KF_SHOWS_DIFF, NULL,
			  { "verification.json", "verification.md" }, NULL,
			  NULL, NULL },
	[KIND_RCA] = { "rca", "analyzing", NULL, "analyst", FAMILY_BUGFIX, 0,
		       NULL, { NULL, NULL }, NULL, NULL, NULL },
	[KIND_CONSOLIDATE] = { "consolidate", "consolidating", "diagnosed",
			       NULL, FAMILY_BUGFIX, KF_ENGINE | KF_ASKS, NULL,
			       { NULL, NULL },
			       "one consolidation writes the diagnosis and "
			       "the fix plan",
			       NULL, NULL },
	[KIND_PLAN_REVIEW] = { "plan-review", "reviewing_plan", NULL,
			       "reviewer", FAMILY_BUGFIX,
			       KF_ROUNDS | KF_ASKS | KF_ON_CHANGES |
				       KF_SHOWS_DIFF,
			       NULL, { NULL, NULL }, NULL, NULL, NULL },
	[KIND_IMPLEMENT] = { "implementation", "implementing", NULL,
			     "implementer", FAMILY_BUGFIX, 0, NULL,
			     { NULL, NULL },
			     "its impl-result.json is a singleton", NULL,
			     NULL },
	[KIND_CODE_REVIEW] = { "code-review", "reviewing_code", NULL,
			       "reviewer", FAMILY_BUGFIX,
			       KF_ROUNDS | KF_ASKS | KF_ON_CHANGES |
				       KF_SHOWS_DIFF,
			       NULL, { NULL, NULL }, NULL, NULL, NULL },
	[KIND_REVISE] = { "revise", "revising_plan", NULL, "planner",
			  FAMILY_BUGFIX, KF_GOES_BACK, NULL, { NULL, NULL },
			  NULL, NULL, NULL },
	[KIND_LOOP_PLAN] = { "loop-plan", "planning", NULL, "planner",
			     FAMILY_LOOP, KF_PLAN_ENTRY, "plan",
			     { NULL, NULL }, NULL, NULL, NULL },
	[KIND_ACT] = { "act", "acting", NULL, "implementer", FAMILY_LOOP, 0,
		       "act", { NULL, NULL }, NULL, NULL, NULL },
	[KIND_OBSERVE] = { "observe", "observing", NULL, NULL, FAMILY_LOOP,
			   KF_ENGINE, "observe", { NULL, NULL }, NULL, NULL,
			   NULL },
	[KIND_EVALUATE] = { "evaluate", "evaluating", NULL, "reviewer",
			    FAMILY_LOOP, KF_ON_CHANGES, "evaluate",
			    { NULL, NULL }, NULL, NULL, NULL },
	[KIND_INTAKE] = { "intake", "intake", NULL, NULL, FAMILY_ASSIST,
			  KF_ENGINE, NULL, { NULL, NULL }, NULL, NULL, NULL },
	[KIND_REPORT] = { "report", "reporting", NULL, NULL, FAMILY_ASSIST,
			  KF_ENGINE, NULL, { NULL, NULL }, NULL, NULL, NULL },
	[KIND_CLAIMS] = { "claims", "planning", NULL, "planner",
			  FAMILY_RESEARCH, KF_PLAN_ENTRY, NULL,
			  { NULL, NULL }, NULL, NULL, NULL },
	[KIND_COLLECT] = { "collect", "collecting", NULL, "researcher",
			   FAMILY_RESEARCH, 0, NULL, { NULL, NULL }, NULL,
			   NULL, NULL },
	[KIND_CHALLENGE] = { "challenge", "challenging", NULL, "reviewer",
			     FAMILY_RESEARCH, 0, NULL, { NULL, NULL }, NULL,
			     NULL, NULL },
	[KIND_COMPOSE] = { "compose", "composing", NULL, "writer",
			   FAMILY_RESEARCH, 0, NULL, { NULL, NULL }, NULL,
			   NULL, NULL },
	[KIND_JUDGE] = { "judge", "judging", NULL, "judge", FAMILY_RESEARCH,
			 KF_ON_CHANGES, NULL, { NULL, NULL }, NULL, NULL,
			 NULL },
	[KIND_ARBITER] = { "arbiter", "arbitrating", NULL, NULL,
			   FAMILY_BUGFIX, KF_ENGINE, NULL,
			   { "panel-verdict.json", "panel-verdict.md" }, NULL,
			   NULL, NULL },
	[KIND_PLUGIN] = { "plugin", "plugin", NULL, NULL, FAMILY_PLUGIN,
			  KF_UNNAMED | KF_ON_CHANGES, NULL, { NULL, NULL },
			  NULL, NULL, NULL },
};

static const char *const families[] = {
	[FAMILY_FEATURE] = "feature", [FAMILY_BUGFIX] = "bugfix",
	[FAMILY_LOOP] = "loop",	      [FAMILY_ASSIST] = "assist",
	[FAMILY_RESEARCH] = "research", [FAMILY_PLUGIN] = "plugin",
};

const struct kind_info *
kind_info(enum stage_kind k)
{
	if ((unsigned)k >= KIND__COUNT)
		BUG("no stage kind %d", (int)k);
	return &kinds[k];
}

int
kind_is(enum stage_kind k, unsigned flags)
{
	return (kind_info(k)->flags & flags) == flags;
}

const char *
stage_kind_name(enum stage_kind k)
{
	return (unsigned)k < KIND__COUNT ? kinds[k].name : "?";
}

int
stage_kind_parse(const char *name, enum stage_kind *out)
{
	int k;

	for (k = 0; k < KIND__COUNT; k++)
		if (!(kinds[k].flags & KF_UNNAMED) &&
		    !strcmp(kinds[k].name, name)) {
			*out = (enum stage_kind)k;
			return 0;
		}
	return BATON_ENOTFOUND;
}

const char *
kind_family_name(enum kind_family f)
{
	return families[f];
}
