/*
 * Pipeline definitions on their own (no engine, no store): the built-in
 * bug-fix pipeline and what the parser adds to it, the numbering of
 * repeated kinds, parallel groups and their edges, and one test per
 * validation rule, each asserting that the error names the place, the
 * stage and the rule.
 */
#include "util/compat.h"

#include "core/cnode.h"
#include "core/pipeline.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"

/* Parses yaml as pipeline "t" from "p.yaml"; *out only on success. */
static int
parse_p(const char *yaml, struct pipeline **out, struct err *e)
{
	struct cnode *n = NULL;
	struct pipeline *p = NULL;
	int rc;

	rc = cnode_parse_yaml(yaml, strlen(yaml), "p.yaml", &n, e);
	if (!rc)
		rc = pipeline_parse("t", n, 0, &p, e);
	cnode_free(n);
	if (!rc && out)
		*out = p;
	else
		pipeline_free(p);
	return rc;
}

/* Parses yaml, which must fail with BATON_EINVAL; e holds the message. */
static void
refused(const char *yaml, struct err *e)
{
	int rc = parse_p(yaml, NULL, e);

	if (rc != BATON_EINVAL)
		test_fail(__FILE__, __LINE__, "rc %d, want EINVAL for: %s", rc,
			  yaml);
}

static const struct stage *
named(const struct pipeline *p, const char *name)
{
	const struct stage *s = pipeline_stage_named(p, name);

	if (!s)
		test_fail(__FILE__, __LINE__, "no stage '%s'", name);
	return s;
}

TEST(bugfix_builtin_parses_with_its_implicit_stages)
{
	static const struct {
		const char *name, *kind, *status;
		int index, side, implicit;
	} want[] = {
		{ "rca-1", "rca", "analyzing_1", 1, 0, 0 },
		{ "rca-2", "rca", "analyzing_2", 2, 0, 0 },
		{ "consolidate", "consolidate", "consolidating", 1, 0, 1 },
		{ "plan-review", "plan-review", "reviewing_plan", 1, 0, 0 },
		{ "implementation", "implementation", "implementing", 1, 0, 0 },
		{ "code-review-1", "code-review", "reviewing_code_1", 1, 0, 0 },
		{ "code-review-2", "code-review", "reviewing_code_2", 2, 0, 0 },
		{ "code-review-3", "code-review", "reviewing_code_3", 3, 0, 0 },
		{ "fix", "fix", "fixing", 1, 1, 1 },
		{ "revise", "revise", "revising_plan", 1, 1, 1 },
	};
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	size_t i;

	ASSERT_OK(pipeline_load(NULL, "bugfix", &p, &e), &e);
	ASSERT_STREQ(p->type, "bugfix");
	ASSERT_STREQ(p->terminal, "merge_ready");
	ASSERT_EQ(p->max_iterations, 10);
	ASSERT(p->builtin);
	ASSERT_EQ(p->nr_stages, ARRAY_SIZE(want));
	for (i = 0; i < ARRAY_SIZE(want); i++) {
		const struct stage *s = &p->stages[i];

		ASSERT_STREQ(s->name, want[i].name);
		ASSERT_STREQ(stage_kind_name(s->kind), want[i].kind);
		ASSERT_STREQ(s->status, want[i].status);
		ASSERT_EQ(s->index, want[i].index);
		ASSERT_EQ(s->side, want[i].side);
		ASSERT_EQ(s->implicit, want[i].implicit);
		ASSERT_EQ(s->providers.nr, 0);
		ASSERT(!s->model);
		ASSERT_EQ(s->group, 0);
		ASSERT_CONTAINS(s->where, "<built-in bugfix.yaml>:");
	}
	ASSERT_STREQ(named(p, "consolidate")->done, "diagnosed");
	ASSERT(!named(p, "consolidate")->role);
	ASSERT_STREQ(named(p, "rca-1")->role, "analyst");
	ASSERT_STREQ(named(p, "revise")->role, "planner");
	/* reviews send changes to the implicit side stages, which go back */
	ASSERT_EQ(named(p, "plan-review")->on_changes,
		  pipeline_stage_index(p, named(p, "revise")));
	ASSERT_EQ(named(p, "code-review-2")->on_changes,
		  pipeline_stage_index(p, named(p, "fix")));
	ASSERT_EQ(named(p, "fix")->next, STAGE_BACK);
	ASSERT_EQ(named(p, "revise")->next, STAGE_BACK);
	/* the last code review is the final gate */
	ASSERT_EQ(named(p, "code-review-1")->on_reject_stop, 0);
	ASSERT_EQ(named(p, "code-review-2")->on_reject_stop, 0);
	ASSERT_EQ(named(p, "code-review-3")->on_reject_stop, 1);
	ASSERT_EQ(pipeline_after(p, named(p, "code-review-3")), -1);
	ASSERT_EQ(pipeline_after(p, named(p, "rca-2")),
		  pipeline_stage_index(p, named(p, "consolidate")));
	ASSERT_EQ(pipeline_group(p, 1, &i), 0);
	ASSERT_STREQ(pipeline_first(p)->name, "rca-1");
	pipeline_free(p);
}

TEST(bugfix_show_names_types_side_stages_and_groups)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	struct buf out = BUF_INIT;

	ASSERT_OK(pipeline_load(NULL, "bugfix", &p, &e), &e);
	pipeline_describe(p, &out);
	ASSERT_CONTAINS(out.ptr, "type bugfix, terminal merge_ready, "
				 "max_iterations 10");
	ASSERT_CONTAINS(out.ptr, "kind consolidate");
	ASSERT_CONTAINS(out.ptr, "then diagnosed");
	ASSERT_CONTAINS(out.ptr, "next back (side, implicit)");
	ASSERT_CONTAINS(out.ptr, "on_changes revise");
	ASSERT_CONTAINS(out.ptr, "on_reject stop");
	ASSERT_CONTAINS(out.ptr, "parallel groups: none");
	ASSERT_CONTAINS(out.ptr, "(re-review)");
	ASSERT_CONTAINS(out.ptr, "analyzing_1 (re-examine)");
	buf_release(&out);
	pipeline_free(p);
}

TEST(kind_tables_per_pipeline_type)
{
	ASSERT(pipeline_kind_allowed("feature", KIND_EXECUTE));
	ASSERT(!pipeline_kind_allowed("feature", KIND_RCA));
	ASSERT(pipeline_kind_allowed(NULL, KIND_REVIEW));
	ASSERT(pipeline_kind_allowed("bugfix", KIND_CODE_REVIEW));
	ASSERT(pipeline_kind_allowed("bugfix", KIND_VALIDATE));
	ASSERT(!pipeline_kind_allowed("bugfix", KIND_EXECUTE));
	ASSERT(!pipeline_kind_allowed("nope", KIND_FIX));
}

TEST(repeated_kinds_are_numbered_unless_named)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;

	ASSERT_OK(parse_p("type: bugfix\n"
			  "stages:\n"
			  "  - {type: rca, name: first}\n"
			  "  - {kind: rca, status: second_look}\n"
			  "  - implementation\n",
			  &p, &e),
		  &e);
	ASSERT_STREQ(p->stages[0].name, "first");
	ASSERT_STREQ(p->stages[0].status, "analyzing_1");
	ASSERT_STREQ(p->stages[1].name, "rca-2");
	ASSERT_STREQ(p->stages[1].status, "second_look");
	ASSERT_EQ(p->stages[1].index, 2);
	ASSERT_STREQ(p->stages[2].name, "consolidate");
	ASSERT(pipeline_edge(p, "second_look", "consolidating"));
	pipeline_free(p);

	/* the same in a feature pipeline: two reviews no longer collide */
	ASSERT_OK(parse_p("stages: [execute, review, review]\n", &p, &e), &e);
	ASSERT_STREQ(p->stages[1].name, "review-1");
	ASSERT_STREQ(p->stages[2].status, "reviewing_2");
	ASSERT(pipeline_edge(p, "reviewing_1", "reviewing_2"));
	pipeline_free(p);
}

TEST(stage_options_are_read)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	const struct stage *s;

	ASSERT_OK(parse_p("type: bugfix\n"
			  "max_iterations: 4\n"
			  "stages:\n"
			  "  - {type: rca, provider: claude, model: sonnet}\n"
			  "  - type: implementation\n"
			  "    provider: [codex, claude]\n"
			  "    model: 'gpt-5.1:high/x@2+y'\n"
			  "    gate: true\n"
			  "    timeout_seconds: 900\n"
			  "    phased_reviews:\n"
			  "      - {provider: claude, model: opus}\n"
			  "      - {provider: codex, parallel: true}\n"
			  "    review_interval: 2\n"
			  "    max_phased_iterations: 5\n"
			  "  - {type: code-review, on_reject: stop}\n"
			  "  - {type: code-review, on_reject: rework}\n",
			  &p, &e),
		  &e);
	ASSERT_EQ(p->max_iterations, 4);
	s = named(p, "rca");
	ASSERT_EQ(s->providers.nr, 1);
	ASSERT_STREQ(s->providers.v[0], "claude");
	ASSERT_STREQ(s->model, "sonnet");
	ASSERT_CONTAINS(s->where, "p.yaml:4:");
	s = named(p, "implementation");
	ASSERT_EQ(s->providers.nr, 2);
	ASSERT_STREQ(s->providers.v[1], "claude");
	ASSERT_STREQ(s->model, "gpt-5.1:high/x@2+y");
	ASSERT(s->gate);
	ASSERT_EQ(s->timeout_seconds, 900);
	ASSERT_EQ(s->nr_phased, 2);
	ASSERT_STREQ(s->phased[0].provider, "claude");
	ASSERT_STREQ(s->phased[0].model, "opus");
	ASSERT(!s->phased[1].model);
	ASSERT(s->phased[1].parallel);
	ASSERT_EQ(s->review_interval, 2);
	ASSERT_EQ(s->max_phased_iterations, 5);
	/* a phased implementation may ask a person */
	ASSERT(pipeline_edge(p, "implementing", "waiting_for_approval"));
	ASSERT(pipeline_edge(p, "waiting_for_approval", "implementing"));
	/* on_reject says; the last review is not the final gate by default */
	ASSERT_EQ(named(p, "code-review-1")->on_reject_stop, 1);
	ASSERT_EQ(named(p, "code-review-2")->on_reject_stop, 0);
	/* a definition without plan reviews gets no revise stage */
	ASSERT(!pipeline_stage_named(p, "revise"));
	ASSERT(pipeline_stage_named(p, "fix"));
	pipeline_free(p);
}

TEST(parallel_groups_lead_to_their_successor)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	size_t first = 0, n, j;
	int verify;

	ASSERT_OK(parse_p("type: bugfix\n"
			  "stages:\n"
			  "  - rca\n"
			  "  - {type: plan-review, parallel: true}\n"
			  "  - {type: plan-review, parallel: true}\n"
			  "  - implementation\n"
			  "  - {type: code-review, parallel: true}\n"
			  "  - {type: code-review, parallel: true}\n"
			  "  - {type: code-review, parallel: true}\n"
			  "  - verify\n",
			  &p, &e),
		  &e);
	n = pipeline_group(p, 1, &first);
	ASSERT_EQ(n, 2);
	ASSERT_STREQ(p->stages[first].name, "plan-review-1");
	ASSERT(pipeline_edge(p, "reviewing_plan_1", "implementing"));
	ASSERT(pipeline_edge(p, "reviewing_plan_2", "implementing"));

	n = pipeline_group(p, 2, &first);
	ASSERT_EQ(n, 3);
	ASSERT_STREQ(p->stages[first].name, "code-review-1");
	verify = pipeline_stage_index(p, named(p, "verify"));
	for (j = first; j < first + n; j++) {
		const struct stage *s = &p->stages[j];
		const struct edge *g = pipeline_edge(p, s->status, "verifying");

		ASSERT_EQ(s->group, 2);
		ASSERT_EQ(pipeline_after(p, s), verify);
		if (!g)
			test_fail(__FILE__, __LINE__, "no edge %s -> verifying",
				  s->status);
		ASSERT_EQ(g->why, WHY_NEXT);
		/* and the gate and pause around that boundary */
		ASSERT(pipeline_edge(p, "paused", "verifying"));
		ASSERT(pipeline_edge(p, s->status, "paused"));
	}
	ASSERT_EQ(named(p, "verify")->group, 0);
	ASSERT_EQ(pipeline_group(p, 3, &first), 0);
	/* the final gate is the last code review, in a group or not */
	ASSERT_EQ(named(p, "code-review-3")->on_reject_stop, 1);
	pipeline_free(p);

	/* a group at the end leads to the terminal */
	ASSERT_OK(parse_p("type: bugfix\n"
			  "stages:\n"
			  "  - implementation\n"
			  "  - {type: code-review, parallel: true}\n"
			  "  - {type: code-review, parallel: true}\n"
			  "  - {type: code-review, parallel: true}\n",
			  &p, &e),
		  &e);
	ASSERT_EQ(pipeline_group(p, 1, &first), 3);
	ASSERT(pipeline_edge(p, "reviewing_code_1", "merge_ready"));
	ASSERT(pipeline_edge(p, "reviewing_code_2", "merge_ready"));
	ASSERT(pipeline_edge(p, "reviewing_code_3", "merge_ready"));
	ASSERT_EQ(pipeline_after(p, named(p, "code-review-1")), -1);
	pipeline_free(p);
}

TEST(next_back_returns_to_every_sender)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;

	ASSERT_OK(parse_p("stages:\n"
			  "  - execute\n"
			  "  - {kind: validate, on_fail: repair}\n"
			  "  - {kind: review, on_changes: repair}\n"
			  "  - {name: repair, kind: fix, side: true, "
			  "next: back}\n",
			  &p, &e),
		  &e);
	ASSERT_EQ(named(p, "repair")->next, STAGE_BACK);
	ASSERT_EQ(pipeline_edge(p, "fixing", "validating")->why,
		  WHY_REREVIEW);
	ASSERT_EQ(pipeline_edge(p, "fixing", "reviewing")->why, WHY_REREVIEW);
	ASSERT(!pipeline_edge(p, "fixing", "merge_ready"));
	ASSERT(pipeline_edge(p, "fixing", "waiting_for_approval"));
	ASSERT(pipeline_edge(p, "waiting_for_approval", "fixing"));
	pipeline_free(p);

	refused("stages: [execute, {kind: verify, next: back}]\n", &e);
	ASSERT_CONTAINS(e.msg, "p.yaml:1:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (verify)");
	ASSERT_CONTAINS(e.msg, "next: back is only for side fix and revise");
}

TEST(rule_a_types_allowed_per_pipeline_type)
{
	struct err e = ERR_INIT;

	refused("stages: [execute, rca]\n", &e);
	ASSERT_CONTAINS(e.msg, "p.yaml:1:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (rca)");
	ASSERT_CONTAINS(e.msg, "type 'rca' is not allowed in a feature "
			       "pipeline (allowed: plan, architect, execute, "
			       "validate, review, fix, verify)");

	refused("type: bugfix\nstages: [rca, execute, implementation]\n", &e);
	ASSERT_CONTAINS(e.msg, "p.yaml:2:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (execute)");
	ASSERT_CONTAINS(e.msg, "not allowed in a bugfix pipeline (allowed: "
			       "rca, consolidate, plan-review, "
			       "implementation, code-review, validate, fix, "
			       "revise, verify, arbiter)");

	refused("type: hotfix\nstages: [execute]\n", &e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.type: expected feature, bugfix, loop, assist or research");

	refused("stages: [execute, {kind: dance}]\n", &e);
	ASSERT_CONTAINS(e.msg, "unknown stage kind 'dance' (expected one of "
			       "plan, architect");
	ASSERT_CONTAINS(e.msg, "code-review, revise, loop-plan, act, observe, "
			       "evaluate, intake, report, claims, collect, "
			       "challenge, compose, judge, arbiter)");

	refused("stages: [{kind: execute, type: execute}]\n", &e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[0]");
	ASSERT_CONTAINS(e.msg, "not both");

	refused("stages: [{name: x}]\n", &e);
	ASSERT_CONTAINS(e.msg, "missing 'type' (or 'kind')");
}

TEST(rule_b_singletons)
{
	struct err e = ERR_INIT;

	refused("type: bugfix\n"
		"stages: [rca, consolidate, consolidate, implementation]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "p.yaml:2:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[2] (consolidate-2)");
	ASSERT_CONTAINS(e.msg, "consolidate may appear only once");

	refused("type: bugfix\nstages: [rca, implementation, implementation]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[2] (implementation-2)");
	ASSERT_CONTAINS(e.msg, "implementation may appear only once: its "
			       "impl-result.json is a singleton");
}

TEST(rule_c_bugfix_order)
{
	struct err e = ERR_INIT;
	struct pipeline *p = NULL;

	refused("type: bugfix\nstages: [rca, plan-review]\n", &e);
	ASSERT_CONTAINS(e.msg, "p.yaml:2:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages: a bugfix pipeline needs "
			       "an implementation stage");

	refused("type: bugfix\nstages: [rca, implementation, rca]\n", &e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[2] (rca-2)");
	ASSERT_CONTAINS(e.msg, "rca stages must come first, one after another "
			       "(this one comes after 'implementation')");

	refused("type: bugfix\nstages: [rca, implementation, consolidate]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[2] (consolidate)");
	ASSERT_CONTAINS(e.msg, "directly after the last rca stage");

	refused("type: bugfix\nstages: [consolidate, implementation]\n", &e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[0] (consolidate)");
	ASSERT_CONTAINS(e.msg, "consolidate needs rca stages before it");

	refused("type: bugfix\nstages: [plan-review, implementation]\n", &e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[0] (plan-review)");
	ASSERT_CONTAINS(e.msg, "a plan-review needs a fix plan");

	refused("type: bugfix\nstages: [rca, implementation, plan-review]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[2] (plan-review)");
	ASSERT_CONTAINS(e.msg, "a plan-review must come before the "
			       "implementation stage");

	refused("type: bugfix\nstages: [rca, code-review, implementation]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (code-review)");
	ASSERT_CONTAINS(e.msg, "a code-review must come after the "
			       "implementation stage");

	/* an explicit consolidate in its place is taken as written */
	ASSERT_OK(parse_p("type: bugfix\nstages: [rca, {type: consolidate, "
			  "gate: true}, implementation]\n",
			  &p, &e),
		  &e);
	ASSERT_EQ(p->nr_stages, 3);
	ASSERT(!p->stages[1].implicit);
	ASSERT(p->stages[1].gate);
	pipeline_free(p);

	/* without rca there is nothing to consolidate: nothing is added */
	ASSERT_OK(parse_p("type: bugfix\nstages: [implementation]\n", &p, &e),
		  &e);
	ASSERT_EQ(p->nr_stages, 1);
	pipeline_free(p);
}

TEST(rule_d_parallel_groups)
{
	struct err e = ERR_INIT;

	refused("type: bugfix\n"
		"stages: [{type: rca, parallel: true}, rca, implementation]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "p.yaml:2:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[0] (rca-1)");
	ASSERT_CONTAINS(e.msg, "parallel is only for plan-review and "
			       "code-review stages");

	refused("type: bugfix\n"
		"stages: [rca, {type: plan-review, parallel: true}, "
		"implementation]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (plan-review)");
	ASSERT_CONTAINS(e.msg, "a parallel group needs two or more "
			       "consecutive plan-review stages with "
			       "parallel: true");

	/* consecutive, not just of one kind: a sequential one breaks it */
	refused("type: bugfix\n"
		"stages:\n"
		"  - implementation\n"
		"  - {type: code-review, parallel: true}\n"
		"  - code-review\n"
		"  - {type: code-review, parallel: true}\n",
		&e);
	ASSERT_CONTAINS(e.msg, "p.yaml:4:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (code-review-1)");
	ASSERT_CONTAINS(e.msg, "consecutive code-review stages");

	refused("type: bugfix\n"
		"stages: [implementation, {type: code-review, parallel: "
		"maybe}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "(code-review): parallel: expected true or "
			       "false");
}

TEST(rule_e_safe_model_and_provider_names)
{
	static const char *const bad_models[] = {
		"'-rf'", "a/../b", "'sonnet 4'", "'x;y'", "''",
	};
	struct err e = ERR_INIT;
	char yaml[512];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bad_models); i++) {
		snprintf(yaml, sizeof(yaml),
			 "type: bugfix\nstages: [{type: implementation, "
			 "model: %s}]\n",
			 bad_models[i]);
		refused(yaml, &e);
		ASSERT_CONTAINS(e.msg, "p.yaml:2:");
		ASSERT_CONTAINS(e.msg,
				"pipelines.t.stages[0] (implementation)");
		ASSERT_CONTAINS(e.msg, "is unsafe");
	}
	snprintf(yaml, sizeof(yaml),
		 "type: bugfix\nstages: [{type: implementation, model: "
		 "%0101d}]\n",
		 0);
	refused(yaml, &e);
	ASSERT_CONTAINS(e.msg, "is unsafe (a model name is 1 to 100");

	refused("type: bugfix\n"
		"stages: [{type: implementation, provider: Claude}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[0] (implementation)");
	ASSERT_CONTAINS(e.msg, "provider: 'Claude' is not a valid provider "
			       "name");

	refused("type: bugfix\n"
		"stages: [{type: implementation, provider: [a, 'b c']}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "'b c' is not a valid provider name");

	refused("type: bugfix\n"
		"stages: [{type: implementation, provider: []}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "non-empty list");

	refused("type: bugfix\n"
		"stages:\n"
		"  - type: implementation\n"
		"    phased_reviews: [{provider: a, model: '../x'}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "p.yaml:4:");
	ASSERT_CONTAINS(e.msg, "phased_reviews[0].model: model name '../x' "
			       "is unsafe");

	refused("type: bugfix\n"
		"stages:\n"
		"  - type: implementation\n"
		"    phased_reviews: [{provider: 'A!'}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "phased_reviews[0].provider: 'A!' is not a "
			       "valid provider name");
}

TEST(rule_f_phased_reviews_and_numbers)
{
	struct err e = ERR_INIT;

	refused("type: bugfix\n"
		"stages: [implementation, {type: code-review, "
		"phased_reviews: [{provider: a}]}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "p.yaml:2:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (code-review)");
	ASSERT_CONTAINS(e.msg, "phased_reviews is only for implementation "
			       "stages");

	refused("type: bugfix\n"
		"stages: [{type: implementation, phased_reviews: []}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[0] (implementation)");
	ASSERT_CONTAINS(e.msg, "phased_reviews: expected a non-empty list");

	refused("type: bugfix\n"
		"stages: [{type: implementation, phased_reviews: "
		"[{model: m}]}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "phased_reviews[0]: needs a provider");

	refused("type: bugfix\n"
		"stages: [{type: implementation, phased_reviews: "
		"[{provider: a, effort: high}]}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "effort");

	refused("type: bugfix\n"
		"stages: [{type: implementation, review_interval: 2}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[0] (implementation)");
	ASSERT_CONTAINS(e.msg, "review_interval is only for an implementation "
			       "stage with phased_reviews");

	refused("type: bugfix\n"
		"stages: [{type: implementation, max_phased_iterations: 2}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "max_phased_iterations is only for");

	refused("type: bugfix\n"
		"stages: [{type: implementation, review_interval: 0, "
		"phased_reviews: [{provider: a}]}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "(implementation): review_interval: expected "
			       "an integer from 1");

	refused("type: bugfix\n"
		"stages: [{type: implementation, timeout_seconds: 0}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "p.yaml:2:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[0] (implementation): "
			       "timeout_seconds: expected an integer from 1");

	refused("type: bugfix\nmax_iterations: 0\nstages: [implementation]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.max_iterations");

	refused("type: bugfix\n"
		"stages: [rca, {type: plan-review, on_reject: stop}, "
		"implementation]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (plan-review)");
	ASSERT_CONTAINS(e.msg, "on_reject is only for code-review stages");

	refused("type: bugfix\n"
		"stages: [implementation, {type: code-review, on_reject: "
		"maybe}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "on_reject: expected stop or rework");
}

TEST(implicit_stage_names_may_collide)
{
	struct err e = ERR_INIT;

	refused("type: bugfix\n"
		"stages: [implementation, code-review, "
		"{name: fix, type: verify}]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages (fix, implicit)");
	ASSERT_CONTAINS(e.msg, "a stage named 'fix' already exists");
}

TEST(seed_pipelines_builtin_parse_with_their_edges)
{
	static const char *const names[] = { "loop", "assist", "research" };
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(names); i++) {
		ASSERT_OK(pipeline_load(NULL, names[i], &p, &e), &e);
		ASSERT_STREQ(p->type, names[i]);
		ASSERT_STREQ(p->terminal, ST_COMPLETED);
		if (!strcmp(names[i], "loop")) {
			ASSERT_EQ(pipeline_edge(p, "evaluating", "planning")->why,
				  WHY_CONTINUE);
			ASSERT_EQ(pipeline_edge(p, "planning", "completed")->why,
				  WHY_GOAL);
			ASSERT_STREQ(pipeline_state(p, "acting"), "running");
			ASSERT_STREQ(pipeline_state(p, "paused"), "interrupted");
		} else if (!strcmp(names[i], "assist")) {
			ASSERT_EQ(pipeline_edge(p, ST_WAITING, "planning")->why,
				  WHY_REVISE);
			ASSERT_EQ(pipeline_edge(p, ST_WAITING, ST_PAUSED)->why,
				  WHY_DEFER);
			ASSERT_EQ(pipeline_edge(p, ST_PAUSED, "planning")->why,
				  WHY_RESUME);
			ASSERT_EQ(pipeline_edge(p, "executing", ST_WAITING)->why,
				  WHY_ASK);
			ASSERT_STREQ(pipeline_state(p, ST_WAITING),
				     "awaiting_feedback");
		} else {
			ASSERT(p->no_git);
			ASSERT_EQ(pipeline_edge(p, "judging", "collecting")->why,
				  WHY_REWORK);
			ASSERT(!pipeline_state(p, "judging"));
		}
		pipeline_free(p);
		p = NULL;
	}
}

TEST(seed_pipelines_need_their_stages_once_and_in_order)
{
	struct err e = ERR_INIT;

	refused("type: loop\nstages: [loop-plan, evaluate]\n", &e);
	ASSERT_CONTAINS(e.msg, "a loop pipeline needs exactly one act stage "
			       "(it has 0)");
	refused("type: loop\nstages: [act, loop-plan, evaluate]\n", &e);
	ASSERT_CONTAINS(e.msg, "act must come after loop-plan in a loop "
			       "pipeline");
	refused("type: research\nstages: [claims, collect, compose, judge, "
		"judge]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "exactly one judge stage (it has 2)");
	refused("type: assist\nstages: [intake, rca, report]\n", &e);
	ASSERT_CONTAINS(e.msg, "type 'rca' is not allowed in an assist");
	refused("type: research\nworkspace: none\nterminal: merge_ready\n"
		"stages: [claims, collect, compose, judge]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "its terminal must be completed");
	refused("type: loop\nstates: {nosuch: x}\n"
		"stages: [loop-plan, act, evaluate]\n",
		&e);
	ASSERT_CONTAINS(e.msg, "states.nosuch: the pipeline has no status "
			       "'nosuch'");
}
