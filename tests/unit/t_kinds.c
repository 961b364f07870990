/*
 * The kind registry on its own: every kind has its facts
 * (core/kinds.c) and its stage_ops (engine/kinds/registry.c), a name
 * parses back to its kind unless a plugin names it, the flags the
 * generic code routes on are where the families need them, and a
 * type's own ops win over its kinds' (a bug-fix fix returns to its
 * review). The seam itself, that the driver, the door and routing name
 * no kind and no family, is t0094's.
 */
#include "util/compat.h"

#include "core/kinds.h"
#include "core/pipeline.h"
#include "engine/kinds/kind.h"
#include "test.h"
#include "util/err.h"

TEST(every_kind_has_facts_and_ops)
{
	struct pipeline p = { .type = (char *)"feature" };
	struct stage s = { .next = -1 };
	int k;

	for (k = 0; k < KIND__COUNT; k++) {
		const struct kind_info *ki = kind_info((enum stage_kind)k);
		enum stage_kind back;

		ASSERT(ki->name && *ki->name);
		ASSERT(ki->status && *ki->status);
		ASSERT_STREQ(stage_kind_name((enum stage_kind)k), ki->name);
		s.kind = (enum stage_kind)k;
		ASSERT(stage_ops_for(&p, &s)->run != NULL);
		if (ki->flags & KF_UNNAMED) {
			ASSERT_EQ(stage_kind_parse(ki->name, &back),
				  BATON_ENOTFOUND);
			continue;
		}
		ASSERT_EQ(stage_kind_parse(ki->name, &back), 0);
		ASSERT_EQ((int)back, k);
		/* an agent plays it, or the engine does */
		ASSERT(!ki->role == !!(ki->flags & KF_ENGINE) ||
		       k == KIND_PLUGIN);
	}
	ASSERT_STREQ(stage_kind_name(KIND__COUNT), "?");
}

TEST(flags_the_routing_reads)
{
	ASSERT(kind_is(KIND_VALIDATE, KF_ON_FAIL | KF_ENGINE));
	ASSERT(!kind_is(KIND_REVIEW, KF_ON_FAIL));
	ASSERT(kind_is(KIND_REVIEW, KF_ON_CHANGES));
	ASSERT(kind_is(KIND_CODE_REVIEW, KF_ROUNDS | KF_ASKS | KF_ON_CHANGES));
	ASSERT(kind_is(KIND_PLAN_REVIEW, KF_ROUNDS));
	ASSERT(!kind_is(KIND_REVIEW, KF_ROUNDS));
	ASSERT(kind_is(KIND_JUDGE, KF_ON_CHANGES));
	ASSERT(kind_is(KIND_PLAN, KF_PLAN_ENTRY));
	ASSERT(kind_is(KIND_LOOP_PLAN, KF_PLAN_ENTRY));
	ASSERT(kind_is(KIND_CLAIMS, KF_PLAN_ENTRY));
	ASSERT(kind_is(KIND_FIX, KF_GOES_BACK));
	ASSERT(kind_is(KIND_REVISE, KF_GOES_BACK));
	ASSERT_STREQ(kind_info(KIND_ACT)->phase, "act");
	ASSERT(kind_info(KIND_PLAN)->phase == NULL);
	ASSERT_STREQ(kind_info(KIND_VALIDATE)->looped, "validation failed");
	ASSERT_STREQ(kind_info(KIND_REVIEW)->artifact[1], "review.md");
	ASSERT_STREQ(kind_family_name(kind_info(KIND_RCA)->family), "bugfix");
}

TEST(a_type_s_own_ops_win)
{
	struct pipeline feature = { .type = (char *)"feature" };
	struct pipeline bugfix = { .type = (char *)"bugfix" };
	struct stage fix = { .kind = KIND_FIX, .next = STAGE_BACK };
	struct stage review = { .kind = KIND_CODE_REVIEW, .next = -1 };

	/* a feature fix goes on by its next; a bug-fix one goes back */
	ASSERT(stage_ops_for(&feature, &fix)->back == NULL);
	ASSERT(stage_ops_for(&bugfix, &fix)->back != NULL);
	ASSERT(stage_ops_for(&bugfix, &review)->pending != NULL);
	ASSERT(stage_ops_for(&bugfix, &review)->exhausted != NULL);
	ASSERT_STREQ(type_ops_for(&bugfix)->type, "bugfix");
	ASSERT(type_ops_for(&feature)->stamp == NULL);
	ASSERT(type_ops_for(&(struct pipeline){ .type = (char *)"loop" })
		       ->stamp != NULL);
	ASSERT(type_ops_for(&(struct pipeline){ .type = (char *)"assist" })
		       ->gate != NULL);
}
