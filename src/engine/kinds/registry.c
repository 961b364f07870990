/*
 * The registry of stage kinds and pipeline types: which family's code
 * does each kind's work and keeps each type's rules (kinds/kind.h). The
 * one place where a kind or a type is tied to code; adding a kind is a
 * line here and its file beside this one.
 */
#include "util/compat.h"

#include "core/pipeline.h"
#include "engine/kinds/kind.h"

static const struct stage_ops *const by_kind[KIND__COUNT] = {
	[KIND_PLAN] = &feature_agent_ops,
	[KIND_ARCHITECT] = &feature_agent_ops,
	[KIND_EXECUTE] = &feature_agent_ops,
	[KIND_VALIDATE] = &feature_validate_ops,
	[KIND_REVIEW] = &feature_agent_ops,
	[KIND_FIX] = &feature_agent_ops,
	[KIND_VERIFY] = &feature_agent_ops,
	[KIND_RCA] = &bugfix_ops,
	[KIND_CONSOLIDATE] = &bugfix_consolidate_ops,
	[KIND_PLAN_REVIEW] = &bugfix_review_ops,
	[KIND_IMPLEMENT] = &bugfix_implement_ops,
	[KIND_CODE_REVIEW] = &bugfix_review_ops,
	[KIND_REVISE] = &bugfix_back_ops,
	[KIND_LOOP_PLAN] = &loop_ops,
	[KIND_ACT] = &loop_ops,
	[KIND_OBSERVE] = &loop_ops,
	[KIND_EVALUATE] = &loop_ops,
	[KIND_INTAKE] = &assist_ops,
	[KIND_REPORT] = &assist_ops,
	[KIND_CLAIMS] = &research_ops,
	[KIND_COLLECT] = &research_ops,
	[KIND_CHALLENGE] = &research_ops,
	[KIND_COMPOSE] = &research_ops,
	[KIND_JUDGE] = &research_judge_ops,
	[KIND_ARBITER] = &bugfix_arbiter_ops,
	[KIND_PLUGIN] = &plugin_ops,
};

/* The types with rules of their own; the others have none. */
static const struct type_ops *const types[] = {
	&bugfix_type,
	&loop_type,
	&assist_type,
};

static const struct type_ops no_rules = { "", NULL, NULL, NULL, NULL, NULL };

const struct type_ops *
type_ops_for(const struct pipeline *p)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(types); i++)
		if (p->type && !strcmp(types[i]->type, p->type))
			return types[i];
	return &no_rules;
}

const struct stage_ops *
stage_ops_for(const struct pipeline *p, const struct stage *s)
{
	const struct type_ops *t = type_ops_for(p);
	const struct stage_ops *own = t->ops ? t->ops(s) : NULL;

	if (own)
		return own;
	if ((unsigned)s->kind >= KIND__COUNT || !by_kind[s->kind])
		BUG("no stage_ops for kind %d", (int)s->kind);
	return by_kind[s->kind];
}
