/*
 * Failure classes and quota waits against openTiger's own cases
 * (../shared/conformance/opentiger/failure-classification-cases.json and
 * quota-retry-cases.json, beside the source tree as in CI), read at run
 * time so that they stay data: core/failclass.c's classifier, limits and
 * signatures, agent_failure_class on the same texts as an agent's
 * stderr, and agent_parse_reset / agent_retry_at on clock times in more
 * than one time zone. Where baton differs on purpose the test says so.
 */
#include "util/compat.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include "agent/agent.h"
#include "core/config.h"
#include "core/failclass.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"

/* The file name under ../shared/conformance/opentiger/, loaded. */
static json_t *
cases(const char *name)
{
	char rel[PATH_MAX], path[PATH_MAX];
	const char *f = __FILE__, *slash = strrchr(f, '/');
	json_error_t je;
	json_t *j;

	/* __FILE__ is tests/unit/t_failclass.c: up two to the tree, one more */
	snprintf(rel, sizeof(rel),
		 "%.*s/../../../shared/conformance/opentiger/%s",
		 slash ? (int)(slash - f) : 1, slash ? f : ".", name);
	if (!realpath(rel, path))
		test_fail(__FILE__, __LINE__, "no openTiger cases at '%s'", rel);
	j = json_load_file(path, 0, &je);
	if (!j)
		test_fail(__FILE__, __LINE__, "%s:%d: %s", path, je.line,
			  je.text);
	return j;
}

static const char *
str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* ---- classification ---------------------------------------------------- */

TEST(every_classification_case_of_opentiger)
{
	json_t *all = cases("failure-classification-cases.json"), *c;
	struct fail_verdict v;
	size_t i;

	ASSERT(json_array_size(json_object_get(all, "cases")) >= 14);
	json_array_foreach(json_object_get(all, "cases"), i, c)
	{
		const json_t *x = json_object_get(c, "expect");

		fail_classify(str(c, "message"), str(c, "failureCode"), &v);
		if (strcmp(fail_class_name(v.cls), str(x, "category")) ||
		    v.retryable != json_is_true(json_object_get(x, "retryable")) ||
		    strcmp(v.reason, str(x, "reason")))
			test_fail(__FILE__, __LINE__,
				  "case %zu (\"%s\", code %s): got %s/%d/%s, "
				  "openTiger says %s/%d/%s",
				  i, str(c, "message") ? str(c, "message") : "",
				  str(c, "failureCode") ? str(c, "failureCode") :
							  "none",
				  fail_class_name(v.cls), v.retryable, v.reason,
				  str(x, "category"),
				  json_is_true(json_object_get(x, "retryable")),
				  str(x, "reason"));
	}
	json_decref(all);
}

/*
 * The same texts as what a failed agent printed: a command agent that
 * exits 1 with the text on stderr. agent_classify calls it a crash (no
 * quota, auth or outage words), and agent_failure_class reads the class
 * from the text. The cases that only a structured code decides (their
 * message is null or "ignored") are skipped here on purpose: an agent
 * reports no failure codes, only text.
 */
TEST(every_case_as_an_agents_stderr)
{
	json_t *all = cases("failure-classification-cases.json"), *c;
	struct fail_verdict v, want;
	size_t i, n = 0;

	json_array_foreach(json_object_get(all, "cases"), i, c)
	{
		struct agent_result r = AGENT_RESULT_INIT;
		const char *msg = str(c, "message");

		fail_classify(msg, NULL, &want);
		if (!msg || !strcmp(msg, "ignored") ||
		    !strcmp(msg, "ignored message"))
			continue;
		/* only codes baton never has decide the rest */
		r.outcome = AGENT_EXIT;
		r.status = 1;
		buf_addf(&r.err_tail, "some noise first\n%s\n", msg);
		agent_classify(&r);
		ASSERT_STREQ(agent_failure_name(r.failure), "crash");
		agent_failure_class(&r, &v);
		ASSERT_STREQ(fail_class_name(v.cls),
			     str(json_object_get(c, "expect"), "category"));
		ASSERT_EQ(v.retryable, want.retryable);
		agent_result_release(&r);
		n++;
	}
	ASSERT(n >= 6);
	json_decref(all);
}

/*
 * Each pattern of openTiger's message rules (the abridged list, in its
 * order) lands in its rule's class, and with its rule's retryable: no
 * earlier rule steals it.
 */
TEST(every_message_rule_pattern_lands_in_its_class)
{
	json_t *all = cases("failure-classification-cases.json"), *rule;
	struct fail_verdict v;
	size_t i;

	json_array_foreach(json_object_get(all,
					   "message_rules_in_order_abridged"),
			   i, rule)
	{
		const char *pats = json_string_value(json_array_get(rule, 0));
		const char *cls = json_string_value(json_array_get(rule, 1));
		int retry = json_is_true(json_array_get(rule, 2));
		char *copy = xstrdup(pats), *p = copy, *bar;

		for (; p; p = bar ? bar + 3 : NULL) {
			bar = strstr(p, " | ");
			if (bar)
				*bar = '\0';
			if (!strcmp(p, "(anything else)")) {
				fail_classify("nothing any rule names", NULL,
					      &v);
			} else if (!strcmp(p, "no commits between") &&
				   strcmp(cls, "noop")) {
				continue; /* listed twice; the noop rule wins */
			} else {
				fail_classify(p, NULL, &v);
			}
			if (strcmp(fail_class_name(v.cls), cls) ||
			    v.retryable != retry)
				test_fail(__FILE__, __LINE__,
					  "pattern '%s': got %s/%d, rule %zu "
					  "says %s/%d",
					  p, fail_class_name(v.cls),
					  v.retryable, i, cls, retry);
		}
		free(copy);
	}
	json_decref(all);
}

TEST(a_known_code_decides_an_unknown_one_falls_to_the_text)
{
	struct fail_verdict v;

	fail_classify("Permission required: external_directory",
		      "EXECUTION_FAILED", &v);
	ASSERT_STREQ(fail_class_name(v.cls), "permission");
	fail_classify("doom loop detected", "TEST_FAILURE", &v);
	ASSERT_STREQ(fail_class_name(v.cls), "test");
	fail_classify("Doom loop detected after 40 turns", NULL, &v);
	ASSERT_STREQ(fail_class_name(v.cls), "model_loop");
	ASSERT_EQ(v.retryable, 1);
	fail_classify("fatal: no changes were made to the tree", NULL, &v);
	ASSERT_STREQ(fail_class_name(v.cls), "noop");
	ASSERT_EQ(v.retryable, 0);
	fail_classify(NULL, NULL, &v);
	ASSERT_STREQ(fail_class_name(v.cls), "model");
	/* the command substitution shape of an unsupported check */
	fail_classify("Verification failed at echo $(cat x) [explicit]: "
		      "stderr unavailable",
		      NULL, &v);
	ASSERT_STREQ(v.reason, "verification_command_unsupported_format");
	/* a presence check outside an output folder is not a sequence issue */
	fail_classify("Verification failed at test -f src/main.c [explicit]: "
		      "stderr unavailable",
		      NULL, &v);
	ASSERT_STREQ(v.reason, "model_or_unknown_failure");
}

/* ---- limits --------------------------------------------------------------- */

/* yaml as .baton/config.yaml, into *c; the error's code otherwise. */
static int
load(const char *yaml, struct config *c, struct err *e)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	int rc;

	config_builder_init(&b);
	rc = config_add_yaml(&b, ".baton/config.yaml", yaml, strlen(yaml), e);
	if (rc < 0) {
		config_builder_release(&b);
		return rc;
	}
	return config_finish(&b, c, e);
}

TEST(class_limits_and_the_cap_as_opentiger_has_them)
{
	json_t *all = cases("failure-classification-cases.json"), *x, *c;
	struct config cfg;
	const char *name;
	size_t i;
	int cls;

	struct err e = ERR_INIT;

	ASSERT_OK(load("", &cfg, &e), &e);
	json_object_foreach(json_object_get(all, "category_retry_limits"),
			    name, x)
	{
		cls = fail_class_from_name(name);
		ASSERT(cls >= 0);
		ASSERT_EQ(fail_class_default_limit(cls), json_integer_value(x));
		/* the config's defaults are the same */
		ASSERT_EQ(cfg.retry_limits[cls], json_integer_value(x));
	}
	ASSERT_EQ(cfg.retry_cap, -1);
	json_array_foreach(json_object_get(all, "retry_limit_cases"), i, c)
	{
		cls = fail_class_from_name(str(c, "category"));
		ASSERT(cls >= 0);
		ASSERT_EQ(fail_retry_limit(
				  fail_class_default_limit(cls),
				  (int)json_integer_value(
					  json_object_get(c, "global_limit"))),
			  json_integer_value(json_object_get(c, "expect")));
	}
	ASSERT_EQ(fail_class_from_name("nonsense"), -1);
	config_release(&cfg);
	json_decref(all);
}

TEST(config_sets_limits_and_names_bad_ones)
{
	struct config c;
	struct err e = ERR_INIT;

	ASSERT_OK(load("execution:\n  retry_cap: 2\n  host_ttl_seconds: 5\n"
		       "  retry_limits: {flaky: 1, permission: 2}\n",
		       &c, &e),
		  &e);
	ASSERT_EQ(c.retry_limits[FAIL_CLASS_FLAKY], 1);
	ASSERT_EQ(c.retry_limits[FAIL_CLASS_PERMISSION], 2);
	ASSERT_EQ(c.retry_limits[FAIL_CLASS_ENV], 5);
	ASSERT_EQ(c.retry_cap, 2);
	ASSERT_EQ(c.host_ttl_seconds, 5);
	config_release(&c);
	ASSERT(load("execution:\n  retry_limits: {flakey: 1}\n", &c, &e) < 0);
	ASSERT_CONTAINS(e.msg, ".baton/config.yaml:2:");
	ASSERT_CONTAINS(e.msg, "flakey");
	e = (struct err)ERR_INIT;
	ASSERT(load("execution:\n  retry_limits: {env: 101}\n", &c, &e) < 0);
	ASSERT_CONTAINS(e.msg, "execution.retry_limits.env");
	e = (struct err)ERR_INIT;
	ASSERT(load("execution: {retry_cap: -2}\n", &c, &e) < 0);
	ASSERT_CONTAINS(e.msg, "execution.retry_cap");
}

/* The agent's own classes map where they are certain. */
TEST(agent_classes_map_to_failure_classes)
{
	struct agent_result r = AGENT_RESULT_INIT;
	struct fail_verdict v;

	/*
	 * baton differs on purpose: a call that ran past its own
	 * timeout_seconds is not openTiger's "timed out" (a request, a
	 * flaky network) but an agent that used all its time, which it is
	 * likely to do again: one more try, as a loop.
	 */
	r.failure = AGENT_FAIL_TIMEOUT;
	agent_failure_class(&r, &v);
	ASSERT_STREQ(fail_class_name(v.cls), "model_loop");
	r.failure = AGENT_FAIL_UNAVAILABLE;
	agent_failure_class(&r, &v);
	ASSERT_STREQ(fail_class_name(v.cls), "flaky");
	/*
	 * baton differs on purpose: openTiger retries "authentication
	 * failed" as setup three times; baton blocks the run at once and
	 * names what to set, since the same credentials fail the same way.
	 */
	r.failure = AGENT_FAIL_AUTH;
	agent_failure_class(&r, &v);
	ASSERT_STREQ(fail_class_name(v.cls), "setup");
	ASSERT_EQ(v.retryable, 0);
	r.failure = AGENT_FAIL_CRASH;
	buf_adds(&r.message, "ECONNRESET while talking to the model");
	agent_failure_class(&r, &v);
	ASSERT_STREQ(fail_class_name(v.cls), "flaky");
	agent_result_release(&r);
}

/* ---- signatures ----------------------------------------------------------- */

TEST(signature_is_stable_across_numbers_paths_and_ids)
{
	struct buf a = BUF_INIT, b = BUF_INIT;
	char ha[17], hb[17], hc[17];

	fail_signature("\x1b[31mError\x1b[0m in /home/u/wt/r12/src/main.c:42 "
		       "(run 3f2a9c1e-1111-2222-3333-444455556666)",
		       &a, ha);
	fail_signature("Error in /tmp/x/r13/src/main.c:97   (run "
		       "0badcafe-9999-8888-7777-666655554444)",
		       &b, hb);
	ASSERT_STREQ(a.ptr, b.ptr);
	ASSERT_STREQ(ha, hb);
	ASSERT_STREQ(a.ptr, "error in <path>:<n> (run <uuid>)");
	fail_signature("Error in <something else>", NULL, hc);
	ASSERT(strcmp(ha, hc) != 0);
	ASSERT_EQ(strlen(ha), 16);
	buf_release(&a);
	buf_release(&b);
}

/* ---- quota waits at a clock time -------------------------------------- */

static void
set_tz(const char *tz)
{
	setenv("TZ", tz, 1);
	tzset();
}

/* "2026-02-20T13:41:35" as local time, in epoch ms. */
static int64_t
local_ms(const char *s)
{
	struct tm tm = { 0 };

	ASSERT(sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon,
		      &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec) == 6);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	tm.tm_isdst = -1;
	return (int64_t)mktime(&tm) * 1000;
}

/*
 * Every quota case, in three time zones: a clock time is the host's
 * local time (docs/agents.md), so the wait is the same wherever the
 * host is. The explicit time gets no jitter: agent_retry_at waits for it
 * exactly. (baton differs on purpose in one second: the engine waits
 * until a second past the reset, so that the provider agrees it passed;
 * engine/call.c adds it, agent_retry_at does not.)
 */
TEST(every_quota_case_of_opentiger_in_three_zones)
{
	static const char *const zones[] = { "UTC", "America/New_York",
					     "Asia/Kolkata" };
	json_t *all = cases("quota-retry-cases.json"), *c, *x;
	int64_t now, at;
	size_t i, z;

	for (z = 0; z < ARRAY_SIZE(zones); z++) {
		set_tz(zones[z]);
		json_array_foreach(json_object_get(all, "cases"), i, c)
		{
			now = local_ms(str(c, "now_local"));
			at = agent_parse_reset(str(c, "message"), now);
			x = json_object_get(c, "expect");
			if (json_object_get(c, "expect_delay_ms")) {
				ASSERT_EQ(at - now,
					  json_integer_value(json_object_get(
						  c, "expect_delay_ms")));
				continue;
			}
			ASSERT(x);
			ASSERT_EQ(at - now,
				  json_integer_value(
					  json_object_get(x, "retryHintMs")));
			/* explicit: the wait is the hint, with no jitter,
			 * whatever the backoff and its jitter would be */
			ASSERT_EQ(agent_retry_at(at, now, 30, 0, 99) - now,
				  json_integer_value(
					  json_object_get(x, "cooldownMs")));
			ASSERT_EQ(json_integer_value(
					  json_object_get(x, "jitterMs")),
				  0);
		}
	}
	set_tz("UTC");
	json_decref(all);
}

TEST(clock_times_more_shapes)
{
	int64_t now;

	set_tz("UTC");
	now = local_ms("2026-02-20T13:41:35");
	ASSERT_EQ(agent_parse_reset("limit reached, resets 2pm", now) - now,
		  1105000);
	ASSERT_EQ(agent_parse_reset("retry at 13:50", now) - now, 505000);
	ASSERT_EQ(agent_parse_reset("try again at 2 p.m.", now) - now,
		  1105000);
	/* a bare hour without am/pm names no time */
	ASSERT_EQ(agent_parse_reset("try again at 2", now), 0);
	/* "UTC" after the time: read in UTC whatever the host's zone */
	set_tz("Asia/Kolkata");
	now = local_ms("2026-02-20T19:11:35"); /* 13:41:35 UTC */
	ASSERT_EQ(agent_parse_reset("Try again at 1:50 PM UTC.", now) - now,
		  505000);
	/* the day the clocks go forward: tomorrow's 1:10 PM is 23 hours on
	 * the clock but 22 in fact */
	set_tz("America/New_York");
	now = local_ms("2026-03-07T13:41:35");
	ASSERT_EQ(agent_parse_reset("Try again at 1:10 PM.", now) - now,
		  84505000 - 3600000);
	/* a time exactly now is tomorrow */
	now = local_ms("2026-02-20T13:50:00");
	ASSERT_EQ(agent_parse_reset("Try again at 1:50 PM", now) - now,
		  86400000);
	set_tz("UTC");
}

TEST(retry_at_backs_off_when_no_reset_is_named)
{
	/* 30 s doubled twice, plus 5 % of a tenth of it */
	ASSERT_EQ(agent_retry_at(0, 1000, 30, 2, 50), 1000 + 120000 + 6000);
	/* never more than a day */
	ASSERT_EQ(agent_retry_at(1000 + 3LL * 86400000, 1000, 30, 0, 0),
		  1000 + AGENT_MAX_WAIT_MS);
}
