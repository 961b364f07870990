/*
 * A task's place on the forge as callers see it: sched_task_json gives a
 * task with a forge link (made by the real store's intake and link
 * writes) a "forge" object {repo, issue, issue_url, pr, pr_url, pr_state,
 * checks, review, rounds}, and a task without one "forge": null. The
 * store operations themselves are in t_store (both backends); the CLI's
 * text in tests/integration/t0060-forge-store.sh.
 */
#include "util/compat.h"

#include <jansson.h>

#include "core/run.h"
#include "sched/sched.h"
#include "store/store.h"
#include "test.h"
#include "util/err.h"
#include "util/xalloc.h"

static struct store *
open_store(void)
{
	char *spec = xasprintf("sqlite:%s/baton.db", test_tmpdir());
	struct err e = ERR_INIT;
	struct store *s = NULL;

	ASSERT_OK(store_open(spec, &s, &e), &e);
	free(spec);
	return s;
}

/* Issue n of acme/app taken in as a task; its id. */
static int64_t
intake(struct store *s, int64_t n, struct forge_link *out)
{
	struct err e = ERR_INIT;
	struct task t = { 0 };
	int64_t id;

	memset(out, 0, sizeof(*out));
	t.title = xasprintf("issue %lld", (long long)n);
	out->repo = xstrdup("acme/app");
	out->issue_number = n;
	out->issue_url = xasprintf("https://github.com/acme/app/issues/%lld",
				   (long long)n);
	ASSERT_EQ(store_forge_intake(s, &t, out, NULL, &e), 1);
	id = t.id;
	task_release(&t);
	return id;
}

/* The task's JSON, as `task show --json` makes it. */
static json_t *
task_json(struct store *s, int64_t id)
{
	struct err e = ERR_INIT;
	struct task t;
	json_t *o;

	ASSERT_OK(store_task_get(s, id, &t, &e), &e);
	o = sched_task_json(s, &t, 1);
	task_release(&t);
	return o;
}

static const char *
str_at(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	ASSERT(json_is_string(v));
	return json_string_value(v);
}

TEST(task_json_has_the_issue)
{
	struct store *s = open_store();
	struct forge_link l;
	int64_t id = intake(s, 12, &l);
	json_t *o = task_json(s, id), *f;

	f = json_object_get(o, "forge");
	ASSERT(json_is_object(f));
	ASSERT_STREQ(str_at(f, "repo"), "acme/app");
	ASSERT_EQ(json_integer_value(json_object_get(f, "issue")), 12);
	ASSERT_STREQ(str_at(f, "issue_url"),
		     "https://github.com/acme/app/issues/12");
	/* no PR yet: nulls, and no round */
	ASSERT(json_is_null(json_object_get(f, "pr")));
	ASSERT(json_is_null(json_object_get(f, "pr_url")));
	ASSERT(json_is_null(json_object_get(f, "pr_state")));
	ASSERT(json_is_null(json_object_get(f, "checks")));
	ASSERT(json_is_null(json_object_get(f, "review")));
	ASSERT_EQ(json_integer_value(json_object_get(f, "rounds")), 0);
	ASSERT_EQ(json_object_size(f), 9);
	json_decref(o);
	forge_link_release(&l);
	store_close(s);
}

TEST(task_json_has_the_pull_request)
{
	struct err e = ERR_INIT;
	struct store *s = open_store();
	struct forge_link l;
	int64_t id = intake(s, 12, &l);
	json_t *o, *f;

	l.pr_number = 34;
	l.pr_url = xstrdup("https://github.com/acme/app/pull/34");
	l.pr_state = xstrdup("open");
	l.checks = xstrdup("failure");
	l.review = xstrdup("changes_requested");
	l.reaction_rounds = 2;
	ASSERT_OK(store_forge_link_put(s, &l, &e), &e);
	o = task_json(s, id);
	f = json_object_get(o, "forge");
	ASSERT_EQ(json_integer_value(json_object_get(f, "issue")), 12);
	ASSERT_EQ(json_integer_value(json_object_get(f, "pr")), 34);
	ASSERT_STREQ(str_at(f, "pr_url"), "https://github.com/acme/app/pull/34");
	ASSERT_STREQ(str_at(f, "pr_state"), "open");
	ASSERT_STREQ(str_at(f, "checks"), "failure");
	ASSERT_STREQ(str_at(f, "review"), "changes_requested");
	ASSERT_EQ(json_integer_value(json_object_get(f, "rounds")), 2);
	json_decref(o);
	forge_link_release(&l);
	store_close(s);
}

/* A task with a PR but no issue: issue is null, the PR is there. */
TEST(task_json_pr_without_issue)
{
	struct err e = ERR_INIT;
	struct store *s = open_store();
	struct forge_link l = { 0 };
	struct task t = { 0 };
	json_t *o, *f;

	t.title = xstrdup("made here");
	ASSERT_OK(store_task_add(s, &t, NULL, &e), &e);
	l.task_id = t.id;
	l.repo = xstrdup("acme/app");
	l.pr_number = 35;
	l.pr_state = xstrdup("merged");
	ASSERT_OK(store_forge_link_put(s, &l, &e), &e);
	o = task_json(s, t.id);
	f = json_object_get(o, "forge");
	ASSERT(json_is_null(json_object_get(f, "issue")));
	ASSERT(json_is_null(json_object_get(f, "issue_url")));
	ASSERT_EQ(json_integer_value(json_object_get(f, "pr")), 35);
	ASSERT_STREQ(str_at(f, "pr_state"), "merged");
	json_decref(o);
	forge_link_release(&l);
	task_release(&t);
	store_close(s);
}

TEST(task_json_without_link_is_null)
{
	struct err e = ERR_INIT;
	struct store *s = open_store();
	struct task t = { 0 };
	json_t *o;

	t.title = xstrdup("plain");
	ASSERT_OK(store_task_add(s, &t, NULL, &e), &e);
	o = task_json(s, t.id);
	ASSERT(json_object_get(o, "forge") != NULL);
	ASSERT(json_is_null(json_object_get(o, "forge")));
	json_decref(o);
	task_release(&t);
	store_close(s);
}
