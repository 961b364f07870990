/*
 * Unit tests for the budget keys of the config (core/config.c): the turn
 * limits, on_limit and the per-line actions, the downgrade map and its
 * lookup by role, and errors that name file:line:col and the key.
 */
#include "util/compat.h"

#include "core/config.h"
#include "util/err.h"
#include "test.h"

#define REPO ".baton/config.yaml"

static int
load(const char *yaml, struct config *c, struct err *e)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	int rc;

	config_builder_init(&b);
	rc = config_add_yaml(&b, REPO, yaml, strlen(yaml), e);
	if (rc < 0) {
		config_builder_release(&b);
		return rc;
	}
	return config_finish(&b, c, e);
}

/* Loads yaml expecting failure; the message is in e. */
static void
load_err(const char *yaml, struct err *e)
{
	struct config c;
	int rc;

	*e = (struct err)ERR_INIT;
	rc = load(yaml, &c, e);
	if (rc == 0) {
		config_release(&c);
		test_fail(__FILE__, __LINE__, "config loaded: %s", yaml);
	}
	ASSERT_EQ(rc, BATON_EINVAL);
}

TEST(budget_defaults_pause_every_line)
{
	struct err e = ERR_INIT;
	struct config c;
	int l;

	ASSERT_OK(load("budget: {max_tokens: 10}\n", &c, &e), &e);
	ASSERT_EQ(c.budget.max_turns_per_run, 0);
	ASSERT_EQ(c.budget.max_turns_per_day, 0);
	for (l = 0; l < BUDGET_LINE_N; l++)
		ASSERT_EQ(c.budget.actions[l], BUDGET_PAUSE);
	ASSERT(config_downgrade_for(&c, "implementer") == NULL);
	config_release(&c);
}

TEST(budget_turns_actions_and_downgrades)
{
	struct err e = ERR_INIT;
	struct config c;

	ASSERT_OK(load("budget:\n"
		       "  max_turns_per_run: 40\n"
		       "  max_turns_per_day: 400\n"
		       "  on_limit: stop\n"
		       "  actions: {max_cost_usd: downgrade,\n"
		       "            max_turns_per_day: reduce_effort}\n"
		       "  downgrade: {implementer: cheap, default: small}\n",
		       &c, &e),
		  &e);
	ASSERT_EQ(c.budget.max_turns_per_run, 40);
	ASSERT_EQ(c.budget.max_turns_per_day, 400);
	ASSERT_EQ(c.budget.actions[BUDGET_COST], BUDGET_DOWNGRADE);
	ASSERT_EQ(c.budget.actions[BUDGET_TOKENS], BUDGET_STOP);
	ASSERT_EQ(c.budget.actions[BUDGET_WALL], BUDGET_STOP);
	ASSERT_EQ(c.budget.actions[BUDGET_TURNS_RUN], BUDGET_STOP);
	ASSERT_EQ(c.budget.actions[BUDGET_TURNS_DAY], BUDGET_REDUCE_EFFORT);
	ASSERT_STREQ(config_downgrade_for(&c, "implementer"), "cheap");
	/* a role without its own takes default's; a prefix is no match */
	ASSERT_STREQ(config_downgrade_for(&c, "reviewer"), "small");
	ASSERT_STREQ(config_downgrade_for(&c, "implement"), "small");
	ASSERT_STREQ(budget_line_name(BUDGET_TURNS_DAY), "max_turns_per_day");
	ASSERT_STREQ(budget_action_name(BUDGET_REDUCE_EFFORT),
		     "reduce_effort");
	config_release(&c);
}

TEST(budget_errors_name_where_and_key)
{
	struct err e = ERR_INIT;

	load_err("budget: {on_limit: sleep}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:20: budget.on_limit: 'sleep' is not "
				    "one of: pause, stop, downgrade, "
				    "reduce_effort");
	load_err("budget:\n  actions: {max_tokens: nap}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":2:25: budget.actions.max_tokens: 'nap' "
				    "is not one of");
	load_err("budget:\n  actions: {max_fun: stop}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":2:");
	ASSERT_CONTAINS(e.msg, "max_fun");
	load_err("budget:\n  downgrade: {wizard: cheap}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":2:");
	ASSERT_CONTAINS(e.msg, "wizard");
	load_err("budget:\n  downgrade: {implementer: \"\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "budget.downgrade.implementer: expected a "
			       "non-empty string");
	load_err("budget: {max_turns_per_run: -1}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:29: budget.max_turns_per_run");
	load_err("budget: {max_turns_per_day: many}\n", &e);
	ASSERT_CONTAINS(e.msg, "budget.max_turns_per_day");
	load_err("runtime: {unattended: maybe}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:23: runtime.unattended");
}
