/*
 * Chat intake (sched/chat.c): the plan-ready marker counts only alone
 * at the very end of an answer and outside fenced blocks; the phases
 * move as the planner answers; a plan starts once, in a known mode, as
 * queued tasks with their dependencies; progress is reported once per
 * change.
 */
#include "util/compat.h"

#include <sys/stat.h>

#include "core/config.h"
#include "core/queue.h"
#include "sched/chat.h"
#include "sched/sched.h"
#include "store/store.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#define PLAN_JSON                                                              \
	"{\"tasks\": [{\"key\": \"a\", \"title\": \"A\", \"area\": "           \
	"\"src/a\"},"                                                          \
	" {\"key\": \"b\", \"title\": \"B\", \"depends_on\": [\"a\"]}]}"

static void
expect_ready(const char *text, size_t want_cut)
{
	size_t cut = 12345;

	ASSERT_EQ(chat_plan_ready(text, &cut), 1);
	ASSERT_EQ(cut, want_cut);
}

static void
expect_not_ready(const char *text)
{
	size_t cut = 12345;

	ASSERT_EQ(chat_plan_ready(text, &cut), 0);
	ASSERT_EQ(cut, 12345);
}

TEST(chat_marker_at_the_end_only)
{
	expect_ready("plan\n---PLAN_READY---", 4);
	expect_ready("plan\n\n---PLAN_READY---\n\n  ", 4);
	expect_ready("```json\n{}\n```\n---PLAN_READY---\n", 14);
	expect_ready("  ---PLAN_READY---", 0);
	expect_ready("---PLAN_READY---", 0);
	/* mid-text, or not alone on its line */
	expect_not_ready("---PLAN_READY---\nand more");
	expect_not_ready("done ---PLAN_READY---");
	expect_not_ready("say ---PLAN_READY--- then stop");
	expect_not_ready("plan\n---PLAN_READY----");
	expect_not_ready("plan\n--PLAN_READY---");
	expect_not_ready("");
	/* inside a fenced block that is still open */
	expect_not_ready("```\n---PLAN_READY---");
	expect_not_ready("```json\n{}\n```\n```\n---PLAN_READY---\n");
	expect_not_ready("~~~\n---PLAN_READY---");
	expect_ready("```a\n```\n~~~\n~~~\n---PLAN_READY---", 16);
}

TEST(chat_modes_known)
{
	ASSERT(chat_mode_find("direct") != NULL);
	ASSERT(chat_mode_find("local") != NULL);
	ASSERT(chat_mode_find("github") != NULL);
	ASSERT(chat_mode_find("Direct") == NULL);
	ASSERT(chat_mode_find("") == NULL);
	ASSERT(chat_mode_find(NULL) == NULL);
}

/* ---- with a store and a scripted planner ------------------------------- */

struct fixture {
	struct workspace ws;
	struct config cfg;
	struct store *store;
	struct sched_ctx x;
	char *answer; /* what the planner prints, a file it cats */
};

static void
setup(struct fixture *f)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	char *db, *script, *yaml, *body;

	memset(f, 0, sizeof(*f));
	f->ws.repo = xstrdup(test_tmpdir());
	f->ws.dir = xasprintf("%s/.baton", test_tmpdir());
	f->ws.common = xasprintf("%s/.git", test_tmpdir());
	ASSERT_OK(fs_mkdir_p(f->ws.dir, 0755, &e), &e);
	f->answer = xasprintf("%s/answer.txt", test_tmpdir());
	script = xasprintf("%s/planner.sh", test_tmpdir());
	body = xasprintf("#!/bin/sh\ncat >/dev/null\ncat \"%s\"\n", f->answer);
	ASSERT_OK(fs_write_atomic(script, body, strlen(body), &e), &e);
	ASSERT(chmod(script, 0755) == 0);
	yaml = xasprintf("providers: {p: {type: command, command: [\"%s\"]}}\n"
			 "roles: {default: p}\n",
			 script);
	config_builder_init(&b);
	ASSERT_OK(config_add_yaml(&b, "test.yaml", yaml, strlen(yaml), &e), &e);
	ASSERT_OK(config_finish(&b, &f->cfg, &e), &e);
	db = xasprintf("%s/baton.db", f->ws.dir);
	ASSERT_OK(store_open(db, &f->store, &e), &e);
	f->x = (struct sched_ctx){ .store = f->store,
				   .ws = &f->ws,
				   .cfg = &f->cfg };
	free(db);
	free(script);
	free(yaml);
	free(body);
}

static void
teardown(struct fixture *f)
{
	store_close(f->store);
	config_release(&f->cfg);
	workspace_release(&f->ws);
	free(f->answer);
}

static void
answer(struct fixture *f, const char *text)
{
	struct err e = ERR_INIT;

	ASSERT_OK(fs_write_atomic(f->answer, text, strlen(text), &e), &e);
}

static void
collect(void *arg, const char *text, size_t len)
{
	buf_add(arg, text, len);
}

TEST(chat_turns_move_the_phases)
{
	struct fixture f;
	struct chat_conv c = { 0 };
	struct err e = ERR_INIT;
	struct buf got = BUF_INIT, prompt = BUF_INIT;
	char *path;
	int64_t id = 0;

	setup(&f);
	ASSERT_OK(chat_new(&f.x, &id, &e), &e);
	ASSERT_EQ(chat_say(&f.x, id, " \n ", &e), BATON_EINVAL);
	ASSERT_OK(chat_say(&f.x, id, "export the board", &e), &e);
	answer(&f, "CSV or JSON?\n");
	ASSERT_OK(chat_reply(&f.x, id, collect, &got, &e), &e);
	ASSERT_STREQ(got.ptr, "CSV or JSON?\n");
	/* the prompt sched_call_role kept: turn 2 (greeting, message) */
	path =
	    xasprintf("%s/chat/%lld/turn-2.prompt.md", f.ws.dir, (long long)id);
	ASSERT_OK(fs_read(path, &prompt, 0, &e), &e);
	ASSERT_CONTAINS(prompt.ptr, "### Person\n\nexport the board");
	ASSERT_CONTAINS(prompt.ptr, "---PLAN_READY---");
	free(path);
	ASSERT_OK(store_chat_get(f.store, id, &c, &e), &e);
	ASSERT_STREQ(c.phase, CHAT_GATHERING);
	chat_conv_release(&c);
	/* a plan: the marker is cut from the chunks and the message */
	buf_reset(&got);
	ASSERT_OK(chat_say(&f.x, id, "JSON", &e), &e);
	answer(&f, "Plan:\n```json\n" PLAN_JSON "\n```\n---PLAN_READY---\n");
	ASSERT_OK(chat_reply(&f.x, id, collect, &got, &e), &e);
	ASSERT(!strstr(got.ptr, "PLAN_READY"));
	ASSERT_OK(store_chat_get(f.store, id, &c, &e), &e);
	ASSERT_STREQ(c.phase, CHAT_PROPOSAL);
	ASSERT(c.plan != NULL);
	ASSERT_STREQ(c.msgs[c.nr_msgs - 1].kind, "mode_selection");
	ASSERT_CONTAINS(c.msgs[c.nr_msgs - 1].content, "2 tasks");
	ASSERT(!strstr(c.msgs[c.nr_msgs - 2].content, "PLAN_READY"));
	chat_conv_release(&c);
	buf_release(&got);
	buf_release(&prompt);
	teardown(&f);
}

TEST(chat_start_once_then_progress)
{
	struct fixture f;
	struct chat_conv c = { 0 };
	struct task t = { 0 };
	struct err e = ERR_INIT;
	int64_t id = 0;
	size_t nr = 0;
	int said = -1;

	setup(&f);
	ASSERT_OK(chat_new(&f.x, &id, &e), &e);
	ASSERT_EQ(chat_start(&f.x, id, "direct", NULL, NULL, &nr, &e),
		  BATON_ECONFLICT);
	ASSERT_OK(chat_say(&f.x, id, "go", &e), &e);
	answer(&f, "```json\n" PLAN_JSON "\n```\n---PLAN_READY---");
	ASSERT_OK(chat_reply(&f.x, id, NULL, NULL, &e), &e);
	ASSERT_EQ(chat_start(&f.x, id, "yolo", NULL, NULL, &nr, &e),
		  BATON_EINVAL);
	ASSERT_EQ(chat_start(&f.x, id, "github", NULL, NULL, &nr, &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "needs a forge");
	ASSERT_OK(chat_start(&f.x, id, "direct", NULL, NULL, &nr, &e), &e);
	ASSERT_EQ(nr, 2);
	ASSERT_EQ(chat_start(&f.x, id, "local", NULL, NULL, &nr, &e),
		  BATON_ECONFLICT);
	ASSERT_EQ(chat_say(&f.x, id, "more", &e), BATON_EBADSTATE);
	ASSERT_OK(store_chat_get(f.store, id, &c, &e), &e);
	ASSERT_STREQ(c.phase, CHAT_MONITORING);
	ASSERT_STREQ(c.mode, "direct");
	ASSERT_STREQ(c.tasks, "{\"1\":\"queued\",\"2\":\"queued\"}");
	chat_conv_release(&c);
	ASSERT_OK(store_task_get(f.store, 2, &t, &e), &e);
	ASSERT_STREQ(t.origin, "chat-direct");
	ASSERT_EQ(t.nr_deps, 1);
	ASSERT_EQ(t.deps[0], 1);
	task_release(&t);
	/* nothing changed: nothing said */
	ASSERT_OK(chat_progress(&f.x, id, &said, &e), &e);
	ASSERT_EQ(said, 0);
	ASSERT_OK(store_task_get(f.store, 1, &t, &e), &e);
	free(t.status);
	t.status = xstrdup(TASK_RUNNING);
	ASSERT_OK(store_task_update(f.store, &t, NULL, &e), &e);
	free(t.status);
	t.status = xstrdup(TASK_DONE);
	ASSERT_OK(store_task_update(f.store, &t, NULL, &e), &e);
	task_release(&t);
	ASSERT_OK(chat_progress(&f.x, id, &said, &e), &e);
	ASSERT_EQ(said, 1);
	ASSERT_OK(chat_progress(&f.x, id, &said, &e), &e);
	ASSERT_EQ(said, 0);
	ASSERT_OK(store_chat_get(f.store, id, &c, &e), &e);
	ASSERT_CONTAINS(c.msgs[c.nr_msgs - 1].content, "Task t1 \"A\" is done");
	ASSERT(!strstr(c.msgs[c.nr_msgs - 1].content, "All 2"));
	chat_conv_release(&c);
	teardown(&f);
}

TEST(chat_failed_planner_is_an_error_message)
{
	struct fixture f;
	struct chat_conv c = { 0 };
	struct err e = ERR_INIT;
	int64_t id = 0;

	setup(&f);
	ASSERT_OK(chat_new(&f.x, &id, &e), &e);
	ASSERT_OK(chat_say(&f.x, id, "hi", &e), &e);
	answer(&f, ""); /* an empty answer */
	ASSERT(chat_reply(&f.x, id, NULL, NULL, &e) != 0);
	ASSERT_CONTAINS(e.msg, "empty answer");
	ASSERT_OK(store_chat_get(f.store, id, &c, &e), &e);
	ASSERT_STREQ(c.msgs[c.nr_msgs - 1].kind, "error");
	ASSERT_STREQ(c.phase, CHAT_GREETING);
	chat_conv_release(&c);
	ASSERT_EQ(chat_reply(&f.x, 77, NULL, NULL, &e), BATON_ENOTFOUND);
	teardown(&f);
}
