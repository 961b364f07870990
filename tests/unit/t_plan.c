/*
 * The planner's task graph (sched/plan.c) and role calls (sched/call.c):
 * good plans are read and put in dependency order; every way a plan can
 * be wrong is refused with a message naming the place; a plan is found
 * in an agent's final text; a plan is queued with its dependencies; a
 * role call leaves its files and runs where it is told.
 */
#include "util/compat.h"

#include <sys/stat.h>

#include "agent/agent.h"
#include "core/config.h"
#include "sched/plan.h"
#include "sched/sched.h"
#include "store/store.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

static const char good[] =
	"{\"tasks\": [\n"
	"  {\"key\": \"b\", \"title\": \"  Second\\n step \", "
	"\"depends_on\": [\"a\", \"a\"], \"area\": \"./src//b/\", "
	"\"priority\": 5, \"body\": \"do b\"},\n"
	"  {\"key\": \"a\", \"title\": \"First\", \"area\": \"src/a\", "
	"\"allowed_paths\": [\"src/a/**\"], \"verify\": [\"make test\"]},\n"
	"  {\"key\": \"c\", \"title\": \"Alone\", \"area\": null, "
	"\"depends_on\": []}\n"
	"], \"summary\": \"three\"}";

/* plan_parse of text must fail with BATON_EINVAL and a message with want. */
static void
expect_error(const char *text, const char *want)
{
	struct plan p = PLAN_INIT;
	struct err e = ERR_INIT;
	int rc = plan_parse(text, "plan.json", &p, &e);

	if (rc != BATON_EINVAL)
		test_fail(__FILE__, __LINE__, "rc %d for %s", rc, text);
	ASSERT_CONTAINS(e.msg, want);
	ASSERT_EQ(p.nr, 0);
}

TEST(good_plan_in_dependency_order)
{
	struct plan p = PLAN_INIT;
	struct err e = ERR_INIT;

	ASSERT_OK(plan_parse(good, "plan.json", &p, &e), &e);
	ASSERT_EQ(p.nr, 3);
	/* b waits for a; otherwise the planner's order stays */
	ASSERT_STREQ(p.tasks[0].key, "a");
	ASSERT_STREQ(p.tasks[1].key, "b");
	ASSERT_STREQ(p.tasks[2].key, "c");
	ASSERT_STREQ(p.tasks[1].title, "Second step");
	ASSERT_STREQ(p.tasks[1].body, "do b");
	ASSERT_STREQ(p.tasks[1].area, "src/b");
	ASSERT_EQ(p.tasks[1].priority, 5);
	ASSERT_EQ(p.tasks[1].depends_on.nr, 1);
	ASSERT_STREQ(p.tasks[1].depends_on.v[0], "a");
	ASSERT_STREQ(p.tasks[0].allowed_paths, "[\"src/a/**\"]");
	ASSERT_STREQ(p.tasks[0].verify, "[\"make test\"]");
	ASSERT(!p.tasks[0].body);
	ASSERT(!p.tasks[2].area);
	ASSERT(!p.tasks[2].allowed_paths);
	ASSERT_EQ(p.tasks[2].depends_on.nr, 0);
	ASSERT_STREQ(p.summary, "three");
	plan_release(&p);
	plan_release(&p);
}

TEST(normalised_json_reads_back_the_same)
{
	struct plan p = PLAN_INIT, q = PLAN_INIT;
	struct buf a = BUF_INIT, b = BUF_INIT;
	struct err e = ERR_INIT;

	ASSERT_OK(plan_parse(good, "plan.json", &p, &e), &e);
	plan_to_json(&p, &a);
	ASSERT_CONTAINS(a.ptr, "\"key\": \"a\"");
	ASSERT_CONTAINS(a.ptr, "\"body\": null");
	ASSERT_CONTAINS(a.ptr, "\"summary\": \"three\"");
	ASSERT_OK(plan_parse(a.ptr, "again", &q, &e), &e);
	plan_to_json(&q, &b);
	ASSERT_STREQ(a.ptr, b.ptr);
	plan_release(&p);
	plan_release(&q);
	buf_release(&a);
	buf_release(&b);
}

TEST(document_errors)
{
	struct buf many = BUF_INIT;
	int i;

	expect_error("{\"tasks\": [", "plan.json is not valid JSON: line 1");
	expect_error("{\"tasks\": [], \"tasks\": []}", "duplicate");
	expect_error("[1]", "plan.json must be a JSON object with a \"tasks\" "
			    "list, got a list");
	expect_error("{}", "plan.json has no \"tasks\" list");
	expect_error("{\"tasks\": {}}",
		     "plan.json: \"tasks\" must be a list, got an object");
	expect_error("{\"tasks\": []}", "plan.json: \"tasks\" is empty");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\"}], "
		     "\"notes\": 1}",
		     "plan.json has an unknown member \"notes\" (known: tasks, "
		     "summary)");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\"}], "
		     "\"summary\": 3}",
		     "plan.json: \"summary\" must be a string, got a number");
	buf_adds(&many, "{\"tasks\": [");
	for (i = 0; i <= PLAN_MAX_TASKS; i++)
		buf_addf(&many, "%s{\"key\": \"k%d\", \"title\": \"T\"}",
			 i ? ", " : "", i);
	buf_adds(&many, "]}");
	expect_error(many.ptr, "plan.json: 201 tasks, more than the 200");
	buf_release(&many);
}

TEST(task_errors)
{
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\"}, 7]}",
		     "plan.json: tasks[1] must be an object, got a number");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"deps\": [\"x\"]}]}",
		     "plan.json: tasks[0] has an unknown member \"deps\" "
		     "(known: key, title, body, area, priority, depends_on, "
		     "allowed_paths, verify)");
	expect_error("{\"tasks\": [{\"title\": \"A\"}]}",
		     "plan.json: tasks[0] has no \"key\"");
	expect_error("{\"tasks\": [{\"key\": 1, \"title\": \"A\"}]}",
		     "plan.json: tasks[0].key must be a string, got a number");
	expect_error("{\"tasks\": [{\"key\": \"\", \"title\": \"A\"}]}",
		     "plan.json: tasks[0].key is empty");
	expect_error("{\"tasks\": [{\"key\": \"a b\", \"title\": \"A\"}]}",
		     "plan.json: tasks[0].key 'a b' may hold only letters");
	expect_error("{\"tasks\": [{\"key\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", "
		     "\"title\": \"A\"}]}",
		     "is longer than 64 characters");
	expect_error("{\"tasks\": [{\"key\": \"a\"}]}",
		     "plan.json: tasks[0] has no \"title\"");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \" \\n \"}]}",
		     "plan.json: tasks[0].title is empty");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": [\"A\"]}]}",
		     "plan.json: tasks[0].title must be a string, got a list");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"body\": {}}]}",
		     "plan.json: tasks[0].body must be a string, got an "
		     "object");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"area\": \"/etc\"}]}",
		     "plan.json: tasks[0].area '/etc' must be a path inside "
		     "the repository");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"area\": \"src/../..\"}]}",
		     "tasks[0].area 'src/../..' must be a path inside");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"priority\": \"high\"}]}",
		     "plan.json: tasks[0].priority must be an integer, got a "
		     "string");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"priority\": 1.5}]}",
		     "tasks[0].priority must be an integer, got a number");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"priority\": 5000}]}",
		     "tasks[0].priority 5000 is out of range (-1000 to 1000)");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"depends_on\": \"b\"}]}",
		     "plan.json: tasks[0].depends_on must be a list of task "
		     "keys, got a string");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"depends_on\": [2]}]}",
		     "plan.json: tasks[0].depends_on[0] must be a non-empty "
		     "string (task keys), got a number");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"allowed_paths\": [\"x\", \"\"]}]}",
		     "tasks[0].allowed_paths[1] must be a non-empty string "
		     "(globs), got an empty string");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"verify\": \"make\"}]}",
		     "tasks[0].verify must be a list of shell commands, got a "
		     "string");
}

/* A task whose text could never reach an agent is refused with the plan. */
TEST(task_text_over_the_limit)
{
	struct buf text = BUF_INIT;
	size_t i;

	buf_adds(&text, "{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
			"\"body\": \"");
	for (i = 0; i < 70000; i++)
		buf_addch(&text, 'x');
	buf_adds(&text, "\"}]}");
	expect_error(text.ptr, "plan.json: tasks[0]: task text is 70003 bytes, "
			       "over the limit of 65536 bytes (64 KiB)");
	buf_release(&text);
}

TEST(keys_and_dependencies)
{
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\"}, "
		     "{\"key\": \"b\", \"title\": \"B\"}, "
		     "{\"key\": \"a\", \"title\": \"C\"}]}",
		     "plan.json: tasks[2].key 'a' is also the key of tasks[0]");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\"}, "
		     "{\"key\": \"b\", \"title\": \"B\"}, "
		     "{\"key\": \"c\", \"title\": \"C\", "
		     "\"depends_on\": [\"a\", \"x\"]}]}",
		     "plan.json: tasks[2].depends_on names 'x', which is not "
		     "a task of this plan");
}

TEST(cycles_name_their_keys)
{
	expect_error("{\"tasks\": ["
		     "{\"key\": \"a\", \"title\": \"A\", "
		     "\"depends_on\": [\"b\"]},"
		     "{\"key\": \"b\", \"title\": \"B\", "
		     "\"depends_on\": [\"c\"]},"
		     "{\"key\": \"c\", \"title\": \"C\", "
		     "\"depends_on\": [\"a\"]}"
		     "]}",
		     "plan.json: the dependencies form a cycle: a -> b -> c -> "
		     "a (each depends on the next)");
	expect_error("{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", "
		     "\"depends_on\": [\"a\"]}]}",
		     "form a cycle: a -> a");
	/* the cycle is reported from where it starts, not from x */
	expect_error("{\"tasks\": ["
		     "{\"key\": \"x\", \"title\": \"X\", "
		     "\"depends_on\": [\"y\"]},"
		     "{\"key\": \"y\", \"title\": \"Y\", "
		     "\"depends_on\": [\"z\"]},"
		     "{\"key\": \"z\", \"title\": \"Z\", "
		     "\"depends_on\": [\"y\"]}"
		     "]}",
		     "form a cycle: y -> z -> y (");
}

TEST(diamond_is_no_cycle)
{
	struct plan p = PLAN_INIT;
	struct err e = ERR_INIT;

	ASSERT_OK(plan_parse("{\"tasks\": ["
			     "{\"key\": \"d\", \"title\": \"D\", "
			     "\"depends_on\": [\"b\", \"c\"]},"
			     "{\"key\": \"c\", \"title\": \"C\", "
			     "\"depends_on\": [\"a\"]},"
			     "{\"key\": \"b\", \"title\": \"B\", "
			     "\"depends_on\": [\"a\"]},"
			     "{\"key\": \"a\", \"title\": \"A\"}]}",
			     "plan.json", &p, &e),
		  &e);
	ASSERT_STREQ(p.tasks[0].key, "a");
	ASSERT_STREQ(p.tasks[1].key, "c");
	ASSERT_STREQ(p.tasks[2].key, "b");
	ASSERT_STREQ(p.tasks[3].key, "d");
	plan_release(&p);
}

TEST(find_json_takes_the_last_fenced_block)
{
	char *s = plan_find_json(
		"Here is a draft:\n```json\n{\"tasks\": 1}\n```\n"
		"and a shell block:\n```sh\n{ echo; }\n```\n"
		"The final plan:\n\n"
		"  ```JSON\n{\"tasks\": [2]}\n  ```\nDone.\n");

	ASSERT_STREQ(s, "{\"tasks\": [2]}\n");
	free(s);
	/* an answer cut short still yields its block */
	s = plan_find_json("```json\n{\"tasks\": [\n");
	ASSERT_STREQ(s, "{\"tasks\": [\n");
	free(s);
	ASSERT(!plan_find_json("no plan here, only {braces}\n"));
	ASSERT(!plan_find_json(""));
}

TEST(find_json_takes_the_last_bare_object)
{
	struct plan p = PLAN_INIT;
	struct err e = ERR_INIT;
	char *s = plan_find_json(
		"I looked at the code {briefly}.\n"
		"{\"note\": \"not the plan\"}\n"
		"{\n  \"tasks\": [\n    {\"key\": \"a\", \"title\": \"A\"},\n"
		"    {\"key\": \"b\", \"title\": \"B\"}\n  ]\n}\n"
		"{\"other\": true}\n"
		"That is all.\n");

	ASSERT(s);
	ASSERT_OK(plan_parse(s, "the answer", &p, &e), &e);
	ASSERT_EQ(p.nr, 2);
	plan_release(&p);
	free(s);
	s = plan_find_json("text\n{\"a\": 1}\n{\"b\": 2}\n");
	ASSERT_STREQ(s, "{\"b\": 2}");
	free(s);
}

TEST(render_is_a_numbered_table)
{
	struct plan p = PLAN_INIT;
	struct err e = ERR_INIT;
	struct buf out = BUF_INIT;
	int64_t ids[3] = { 7, 8, 9 };

	ASSERT_OK(plan_parse("{\"tasks\": ["
			     "{\"key\": \"b\", \"title\": \"A title that is "
			     "much longer than the table wants to show\", "
			     "\"depends_on\": [\"a\"], \"area\": \"src/b\"},"
			     "{\"key\": \"a\", \"title\": \"First\"}]}",
			     "plan.json", &p, &e),
		  &e);
	plan_render(&p, NULL, &out);
	ASSERT_CONTAINS(out.ptr, "#  key  title");
	ASSERT_CONTAINS(out.ptr, "area");
	ASSERT_CONTAINS(out.ptr, "depends on\n");
	ASSERT_CONTAINS(out.ptr, "\n1  a    First");
	ASSERT_CONTAINS(out.ptr, "\n2  b    A title that is much longer than "
				 "the table wa...  src/b  a\n");
	buf_reset(&out);
	plan_render(&p, ids, &out);
	ASSERT_CONTAINS(out.ptr, "#  id  key");
	ASSERT_CONTAINS(out.ptr, "\n1  t7  a ");
	ASSERT_CONTAINS(out.ptr, "\n2  t8  b ");
	buf_release(&out);
	plan_release(&p);
}

/* ---- with a store ----------------------------------------------------- */

struct fixture {
	struct workspace ws;
	struct config cfg;
	struct store *store;
};

static void
setup(struct fixture *f, const char *yaml)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	char *db;

	memset(f, 0, sizeof(*f));
	f->ws.repo = xstrdup(test_tmpdir());
	f->ws.dir = xasprintf("%s/.baton", test_tmpdir());
	f->ws.common = xasprintf("%s/.git", test_tmpdir());
	ASSERT_OK(fs_mkdir_p(f->ws.dir, 0755, &e), &e);
	config_builder_init(&b);
	ASSERT_OK(config_add_yaml(&b, "test.yaml", yaml, strlen(yaml), &e),
		  &e);
	ASSERT_OK(config_finish(&b, &f->cfg, &e), &e);
	db = xasprintf("%s/baton.db", f->ws.dir);
	ASSERT_OK(store_open(db, &f->store, &e), &e);
	free(db);
}

static void
teardown(struct fixture *f)
{
	store_close(f->store);
	config_release(&f->cfg);
	workspace_release(&f->ws);
}

TEST(enqueue_maps_keys_to_ids)
{
	struct fixture f;
	struct sched_ctx x;
	struct plan p = PLAN_INIT;
	struct err e = ERR_INIT;
	struct task t = { 0 };
	int64_t ids[3], id;
	int version;

	setup(&f, "providers: {a: {type: command, command: [\"true\"]}}\n"
		  "roles: {default: a}\n");
	x = (struct sched_ctx){ .store = f.store, .ws = &f.ws, .cfg = &f.cfg };
	ASSERT_OK(plan_parse(good, "plan.json", &p, &e), &e);
	ASSERT_OK(store_plan_add(f.store, "req.md", "{}", &id, &version, &e),
		  &e);
	ASSERT_EQ(version, 1);
	ASSERT_OK(plan_enqueue(&x, &p, id, ids, &e), &e);
	ASSERT(ids[0] > 0 && ids[1] > ids[0] && ids[2] > ids[1]);
	ASSERT_OK(store_task_get(f.store, ids[1], &t, &e), &e);
	ASSERT_STREQ(t.title, "Second step");
	ASSERT_STREQ(t.status, TASK_QUEUED);
	ASSERT_STREQ(t.origin, "plan");
	ASSERT_STREQ(t.area, "src/b");
	ASSERT_EQ(t.plan_id, id);
	ASSERT_EQ(t.priority, 5);
	ASSERT_EQ(t.nr_deps, 1);
	ASSERT_EQ(t.deps[0], ids[0]);
	task_release(&t);
	ASSERT_OK(store_task_get(f.store, ids[0], &t, &e), &e);
	ASSERT_STREQ(t.allowed_paths, "[\"src/a/**\"]");
	ASSERT_STREQ(t.verify, "[\"make test\"]");
	ASSERT_EQ(t.nr_deps, 0);
	task_release(&t);
	/* the same source again is version 2 */
	ASSERT_OK(store_plan_add(f.store, "req.md", "{}", &id, &version, &e),
		  &e);
	ASSERT_EQ(version, 2);
	plan_release(&p);
	teardown(&f);
}

/* ---- role calls ------------------------------------------------------- */

TEST(call_role_leaves_its_files)
{
	struct fixture f;
	struct agent_result ar = AGENT_RESULT_INIT;
	struct role_call c = { 0 };
	struct err e = ERR_INIT;
	struct buf text = BUF_INIT;
	char *script = xasprintf("%s/agent.sh", test_tmpdir());
	char *yaml, *dir = xasprintf("%s/calls", test_tmpdir()), *path;
	static const char body[] =
		"#!/bin/sh\n"
		"cat >/dev/null\n"
		"echo \"role=$BATON_ROLE cwd=$(pwd)\"\n"
		"echo \"prompt=$(cat \"$BATON_PROMPT_FILE\")\"\n"
		"echo oops >&2\n"
		"echo '{}' >plan.json\n";

	ASSERT_OK(fs_write_atomic(script, body, strlen(body), &e), &e);
	ASSERT(chmod(script, 0755) == 0);
	yaml = xasprintf("providers: {p: {type: command, command: [\"%s\"]}}\n"
			 "roles: {planner: p}\n",
			 script);
	setup(&f, yaml);
	c.role = "planner";
	c.cwd = f.ws.repo;
	c.prompt = "You are the planner. Plan it.";
	c.dir = dir;
	c.name = "req-1";
	ASSERT_OK(sched_call_role(&f.cfg, &c, &ar, &e), &e);
	ASSERT_EQ(ar.outcome, AGENT_OK);
	ASSERT_EQ(ar.failure, AGENT_FAIL_NONE);
	ASSERT_CONTAINS(ar.text.ptr, "role=planner cwd=");
	ASSERT_CONTAINS(ar.text.ptr, test_tmpdir());
	ASSERT_CONTAINS(ar.text.ptr, "prompt=You are the planner. Plan it.");
	path = xasprintf("%s/req-1.prompt.md", dir);
	ASSERT_OK(fs_read(path, &text, 0, &e), &e);
	ASSERT_STREQ(text.ptr, "You are the planner. Plan it.");
	free(path);
	buf_reset(&text);
	path = xasprintf("%s/req-1.stderr", dir);
	ASSERT_OK(fs_read(path, &text, 0, &e), &e);
	ASSERT_STREQ(text.ptr, "oops\n");
	free(path);
	path = xasprintf("%s/req-1.stdout", dir);
	ASSERT(fs_exists(path));
	free(path);
	path = xasprintf("%s/plan.json", f.ws.repo);
	ASSERT(fs_exists(path));
	free(path);
	agent_result_release(&ar);
	buf_release(&text);
	teardown(&f);
	free(yaml);
	free(script);
	free(dir);
}

TEST(call_role_without_a_provider)
{
	struct fixture f;
	struct agent_result ar = AGENT_RESULT_INIT;
	struct role_call c = { .role = "judge", .cwd = ".", .prompt = "p",
			       .dir = "calls", .name = "x" };
	struct err e = ERR_INIT;

	setup(&f, "providers: {a: {type: command, command: [\"true\"]}}\n"
		  "roles: {planner: a}\n");
	ASSERT_EQ(sched_call_role(&f.cfg, &c, &ar, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "no provider plays the judge role: set roles.judge "
			    "or roles.default");
	agent_result_release(&ar);
	teardown(&f);
}
