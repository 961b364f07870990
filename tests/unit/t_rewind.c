/*
 * Unit tests for the stage a rewind names (engine/rewind.c,
 * engine_rewind_stage): a stage's name or its status, and a clear error
 * naming the stages the pipeline has for anything else.
 */
#include "util/compat.h"

#include "core/pipeline.h"
#include "engine/engine.h"
#include "util/err.h"
#include "test.h"

TEST(rewind_stage_by_name_or_status)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	const struct stage *s;

	ASSERT_OK(pipeline_load(NULL, "feature", &p, &e), &e);
	s = engine_rewind_stage(p, "execute", &e);
	ASSERT(s != NULL);
	ASSERT_STREQ(s->name, "execute");
	s = engine_rewind_stage(p, "executing", &e);
	ASSERT(s != NULL);
	ASSERT_STREQ(s->name, "execute");
	s = engine_rewind_stage(p, "planning", &e);
	ASSERT(s != NULL);
	ASSERT_STREQ(s->name, "plan");
	pipeline_free(p);
}

TEST(rewind_unknown_stage_names_the_stages)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;

	ASSERT_OK(pipeline_load(NULL, "feature", &p, &e), &e);
	ASSERT(engine_rewind_stage(p, "deploy", &e) == NULL);
	ASSERT_EQ(e.rc, BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "pipeline 'feature' has no stage 'deploy': its "
			       "stages are plan (planning), architect "
			       "(architecting), execute (executing)");
	ASSERT_CONTAINS(e.msg, "verify (verifying)");
	/* a resting status is not a stage */
	e = (struct err)ERR_INIT;
	ASSERT(engine_rewind_stage(p, "planned", &e) == NULL);
	ASSERT_CONTAINS(e.msg, "no stage 'planned'");
	pipeline_free(p);
}
