/*
 * Tests for the ACP provider's parts that run without an agent: a child
 * talked to over its stdio (spawn's talk mode, which acp.c drives), the
 * transcript read for people (agent_watch of type acp, over a transcript
 * in tests/fixtures/agent-streams/ fed in pieces), and the config of
 * `type: acp` (its required command, the keys it refuses, with file,
 * line, column and key named).
 */
#include "util/compat.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include "agent/agent.h"
#include "core/config.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#endif

#ifdef T_ASAN
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() ASSERT_EQ(__lsan_do_recoverable_leak_check(), 0)
#else
#define LEAK_CHECK()                                                           \
	do {                                                                   \
	} while (0)
#endif

/* ---- spawn's talk mode -------------------------------------------------- */

/* What the talking callback saw and did. */
struct chat {
	struct spawn_talk talk;
	struct buf heard;
	int lines, stop_at;
};

/* Answers each line cat echoes with the next one; closes after three. */
static int
chat_out(void *arg, const char *p, size_t len)
{
	struct chat *c = arg;
	size_t i;

	buf_add(&c->heard, p, len);
	for (i = 0; i < len; i++) {
		if (p[i] != '\n')
			continue;
		c->lines++;
		if (c->stop_at && c->lines == c->stop_at)
			return 1;
		if (c->lines < 3)
			buf_addf(&c->talk.in, "line %d\n", c->lines + 1);
		else
			c->talk.close_in = 1;
	}
	return 0;
}

TEST(spawn_talk_answers_each_line_then_closes_stdin)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	struct chat c = { .talk = { .in = BUF_INIT, .on_out = chat_out },
			  .heard = BUF_INIT };

	strvec_push(&o.argv, "cat");
	o.talk = &c.talk;
	o.arg = &c;
	o.timeout_ms = 10000;
	buf_adds(&c.talk.in, "line 1\n");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	/* cat exits 0 only because its stdin was closed: no timeout */
	ASSERT_EQ(r.status, 0);
	ASSERT_EQ(r.timed_out, 0);
	ASSERT_EQ(r.stopped, 0);
	ASSERT_STREQ(c.heard.ptr, "line 1\nline 2\nline 3\n");
	ASSERT_STREQ(r.out.ptr, "line 1\nline 2\nline 3\n");
	ASSERT_EQ(c.talk.in.len, 0);
	buf_release(&c.heard);
	buf_release(&c.talk.in);
	spawn_result_release(&r);
	spawn_opts_release(&o);
	LEAK_CHECK();
}

TEST(spawn_talk_stop_from_on_out_kills_the_child)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	struct chat c = { .talk = { .in = BUF_INIT, .on_out = chat_out },
			  .heard = BUF_INIT,
			  .stop_at = 2 };

	/* never exits by itself: the stop must kill it */
	strvec_pushl(&o.argv, "sh", "-c", "cat; sleep 100", NULL);
	o.talk = &c.talk;
	o.arg = &c;
	o.timeout_ms = 20000;
	o.kill_grace_ms = 500;
	buf_adds(&c.talk.in, "line 1\n");
	ASSERT_OK(spawn_run(&o, &r, &e), &e);
	ASSERT_EQ(r.stopped, 1);
	ASSERT_EQ(r.timed_out, 0);
	ASSERT(r.duration_ms < 10000);
	ASSERT_STREQ(c.heard.ptr, "line 1\nline 2\n");
	buf_release(&c.heard);
	buf_release(&c.talk.in);
	spawn_result_release(&r);
	spawn_opts_release(&o);
	LEAK_CHECK();
}

/* ---- the transcript, read for people ------------------------------------ */

static const char *
fixture(const char *name)
{
	static char path[PATH_MAX];
	const char *f = __FILE__, *slash = strrchr(f, '/');
	char rel[PATH_MAX];

	snprintf(rel, sizeof(rel), "%.*s/../fixtures/agent-streams/%s",
		 slash ? (int)(slash - f) : 1, slash ? f : ".", name);
	if (!realpath(rel, path))
		test_fail(__FILE__, __LINE__, "no fixture '%s'", rel);
	return path;
}

/* Feeds the transcript to a watcher in pieces of step bytes. */
static void
watch_transcript(size_t step, struct buf *out)
{
	struct buf all = BUF_INIT;
	struct err e = ERR_INIT;
	struct agent_watch *w;
	char *path = xasprintf("%s/call.stdout", test_tmpdir());
	size_t at, n, before;
	int fd;

	ASSERT_OK(fs_read(fixture("acp-transcript.stdout"), &all, 0, &e), &e);
	w = agent_watch_new("acp", path);
	for (at = 0; at < all.len; at += n) {
		n = all.len - at < step ? all.len - at : step;
		fd =
		    open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		ASSERT(fd >= 0);
		ASSERT_EQ(fs_write_all(fd, all.ptr + at, n), 0);
		close(fd);
		before = out->len;
		ASSERT_EQ(agent_watch_read(w, out), out->len - before);
	}
	before = out->len;
	ASSERT_EQ(agent_watch_finish(w, out), out->len - before);
	agent_watch_free(w);
	buf_release(&all);
	free(path);
}

static const char acp_view_expected[] =
    "[thought] Let me think.\n"
    "[plan]\n"
    "  [>] Write hello.txt\n"
    "  [ ] Check it\n"
    "I'll write the file.\n"
    "[ask] Writing to hello.txt\n"
    "[tool] Writing to hello.txt (edit): in_progress\n"
    "[write] /srv/wt/hello.txt\n"
    "[tool] Writing to hello.txt: completed\n"
    "[read] /etc/passwd\n"
    "[denied] read fs/read_text_file /etc/passwd: '/etc/passwd' is "
    "outside the worktree\n"
    "[error] '/etc/passwd' is outside the worktree\n"
    "[run] make test\n"
    "Wrote hello.txt.\n";

TEST(watch_acp_transcript_in_pieces)
{
	struct buf out = BUF_INIT;

	watch_transcript(61, &out);
	ASSERT_STREQ(out.ptr, acp_view_expected);
	/* neither the prompt nor the protocol shows */
	ASSERT(!strstr(out.ptr, "Do not show"));
	ASSERT(!strstr(out.ptr, "jsonrpc"));
	buf_release(&out);
	LEAK_CHECK();
}

TEST(watch_acp_transcript_at_once)
{
	struct buf out = BUF_INIT;

	watch_transcript(1 << 20, &out);
	ASSERT_STREQ(out.ptr, acp_view_expected);
	buf_release(&out);
	LEAK_CHECK();
}

/* ---- config -------------------------------------------------------------- */

static int
load(const char *yaml, struct config *c, struct err *e)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	int rc;

	config_builder_init(&b);
	rc =
	    config_add_yaml(&b, "/r/.baton/config.yaml", yaml, strlen(yaml), e);
	if (rc < 0) {
		config_builder_release(&b);
		return rc;
	}
	return config_finish(&b, c, e);
}

TEST(config_acp_provider)
{
	struct config c;
	struct err e = ERR_INIT;

	ASSERT_OK(load("providers:\n"
		       "  g:\n"
		       "    type: acp\n"
		       "    command: [gemini, --acp]\n"
		       "    args: [--debug]\n"
		       "    model: gemini-2.5-flash\n"
		       "    env: {HOME: /h}\n"
		       "    timeout_seconds: 60\n"
		       "roles: {default: g}\n",
		       &c, &e),
		  &e);
	ASSERT_STREQ(c.providers[0].type, "acp");
	ASSERT_STREQ(c.providers[0].command.v[1], "--acp");
	ASSERT_STREQ(c.providers[0].env.v[0], "HOME=/h");
	ASSERT_STREQ(agent_program(&c.providers[0]), "gemini");
	config_release(&c);
	LEAK_CHECK();
}

TEST(config_acp_needs_a_command)
{
	struct config c;
	struct err e = ERR_INIT;

	ASSERT_EQ(load("providers:\n  g: {type: acp, model: m}\n", &c, &e),
		  BATON_EINVAL);
	ASSERT_STREQ(e.msg, "/r/.baton/config.yaml:2:6: providers.g: missing "
			    "required key 'command' (an ACP provider needs "
			    "the agent to start, such as [gemini, --acp])");
	LEAK_CHECK();
}

TEST(config_acp_refuses_what_it_cannot_use)
{
	static const char *const keys[] = {
		"base_url: http://x", "api_key_env: K", "effort: low",
		"max_retries: 1",     "max_steps: 3",	"max_tokens: 9",
		"isolated: true",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(keys); i++) {
		struct config c;
		struct err e = ERR_INIT;
		char *y = xasprintf("providers:\n"
				    "  g:\n"
				    "    type: acp\n"
				    "    command: [qwen, --acp]\n"
				    "    %s\n",
				    keys[i]);
		char *want = xasprintf("/r/.baton/config.yaml:5:%d: "
				       "providers.g.%.*s: an ACP agent takes "
				       "no such key",
				       5 + (int)strcspn(keys[i], ":") + 2,
				       (int)strcspn(keys[i], ":"), keys[i]);

		ASSERT_EQ(load(y, &c, &e), BATON_EINVAL);
		ASSERT(!strncmp(e.msg, want, strlen(want)));
		ASSERT(strstr(e.msg, "env"));
		free(want);
		free(y);
	}
	LEAK_CHECK();
}

/* ---- the adapter, against the scripted agent (tests/lib/acp-agent.py) ---- */

/* One call of the scripted agent. */
struct call {
	struct config_provider p;
	struct agent_request req;
	struct agent_result r;
	char *script, *log, *out;
};

/*
 * Sets up a call of the scripted agent with the "K=V" settings in env,
 * resuming session resume (or NULL), with providers.a.model model (or
 * NULL); call_go makes it.
 */
static void
call_init(struct call *c, const char *const *env, const char *resume,
	  const char *model)
{
	const char *f = __FILE__, *slash = strrchr(f, '/');
	char *rel = xasprintf("%.*s/../lib/acp-agent.py",
			      slash ? (int)(slash - f) : 1, slash ? f : ".");

	memset(c, 0, sizeof(*c));
	/* the agent runs in the temporary directory */
	c->script = realpath(rel, NULL);
	if (!c->script)
		test_fail(__FILE__, __LINE__, "no '%s'", rel);
	free(rel);
	c->log = xasprintf("%s/agent.log", test_tmpdir());
	c->out = xasprintf("%s/call.stdout", test_tmpdir());
	unlink(c->log);
	unlink(c->out);
	c->p.name = (char *)"a";
	c->p.type = (char *)"acp";
	c->p.model = (char *)model;
	strvec_init(&c->p.command);
	strvec_init(&c->p.args);
	strvec_init(&c->p.env);
	strvec_pushl(&c->p.command, "python3", c->script, NULL);
	strvec_pushf(&c->p.env, "ACP_LOG=%s", c->log);
	strvec_pushv(&c->p.env, env);
	c->p.timeout_seconds = 30;
	c->p.max_retries = -1;
	c->req.provider = &c->p;
	c->req.cwd = test_tmpdir();
	c->req.prompt = "You are the implementer.";
	c->req.out_path = c->out;
	c->req.wake_fd = -1;
	c->req.resume_session = resume;
	c->r = (struct agent_result)AGENT_RESULT_INIT;
}

static void
call_go(struct call *c)
{
	struct err e = ERR_INIT;

	ASSERT_OK(agent_run(&c->req, &c->r, &e), &e);
}

static void
call_run(struct call *c, const char *const *env, const char *resume,
	 const char *model)
{
	call_init(c, env, resume, model);
	call_go(c);
}

/* Whether the file at path (the agent's log, the transcript) holds s. */
static int
logged(const char *path, const char *s)
{
	struct buf b = BUF_INIT;
	int yes;

	fs_read(path, &b, 0, NULL);
	yes = strstr(b.ptr, s) != NULL;
	buf_release(&b);
	return yes;
}

static void
call_release(struct call *c)
{
	agent_result_release(&c->r);
	strvec_clear(&c->p.command);
	strvec_clear(&c->p.args);
	strvec_clear(&c->p.env);
	free(c->script);
	free(c->log);
	free(c->out);
}

static const char *const no_env[] = { NULL };

TEST(acp_a_new_session)
{
	struct call c;

	call_run(&c, no_env, NULL, NULL);
	ASSERT_EQ(c.r.outcome, AGENT_OK);
	ASSERT_EQ(c.r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(c.r.text.ptr, "OK");
	ASSERT(!strncmp(c.r.session_id, "sess-", 5));
	ASSERT(logged(c.out, "\"method\":\"session/new\""));
	ASSERT(logged(c.out, "\"stopReason\":\"end_turn\""));
	ASSERT(logged(c.log, "\"event\": \"eof\""));
	call_release(&c);
}

TEST(acp_resume_loads_the_session_when_offered)
{
	static const char *const env[] = { "ACP_LOAD=1", NULL };
	struct call c;

	call_run(&c, env, "sess-old", NULL);
	ASSERT_EQ(c.r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(c.r.session_id, "sess-old");
	ASSERT(logged(c.log, "\"event\": \"load\", \"id\": \"sess-old\""));
	ASSERT(!logged(c.out, "\"method\":\"session/new\""));
	/* what the load replayed is not this turn's text */
	ASSERT_STREQ(c.r.text.ptr, "OK");
	call_release(&c);
}

TEST(acp_resume_falls_back_to_a_new_session)
{
	static const char *const load[] = { "ACP_LOAD=1", NULL };
	struct call c;

	call_run(&c, load, "bad-1", NULL);
	ASSERT_EQ(c.r.failure, AGENT_FAIL_NONE);
	ASSERT(!strncmp(c.r.session_id, "sess-", 5));
	ASSERT(logged(c.out, "[session] session/load failed"));
	call_release(&c);

	call_run(&c, no_env, "sess-old", NULL);
	ASSERT_EQ(c.r.failure, AGENT_FAIL_NONE);
	ASSERT(!logged(c.out, "\"method\":\"session/load\""));
	ASSERT(logged(c.out, "cannot load session sess-old"));
	call_release(&c);
}

#define MODELS                                                                 \
	"ACP_MODELS={\"currentModelId\": \"d\", \"availableModels\": "         \
	"[{\"modelId\": \"d\", \"name\": \"default\"}, {\"modelId\": "         \
	"\"x-1(openai)\", \"name\": \"x-1\"}]}"

TEST(acp_model_is_chosen_by_id_or_name)
{
	static const char *const env[] = { MODELS, NULL };
	struct call c;

	call_run(&c, env, NULL, NULL);
	ASSERT(!logged(c.log, "set_model"));
	call_release(&c);
	call_run(&c, env, NULL, "x-1");
	ASSERT_EQ(c.r.failure, AGENT_FAIL_NONE);
	ASSERT(logged(c.log, "\"model\": \"x-1(openai)\""));
	call_release(&c);
	call_run(&c, env, NULL, "default"); /* the current one: not set */
	ASSERT_EQ(c.r.failure, AGENT_FAIL_NONE);
	ASSERT(!logged(c.log, "set_model"));
	call_release(&c);
}

TEST(acp_model_without_a_choice_fails_saying_so)
{
	struct call c;

	call_run(&c, no_env, NULL, "x-1");
	ASSERT(c.r.failure != AGENT_FAIL_NONE);
	ASSERT_CONTAINS(c.r.message.ptr, "offers no choice of model");
	ASSERT(!logged(c.out, "\"method\":\"session/prompt\""));
	call_release(&c);
}

TEST(acp_failures_are_classified)
{
	static const char *const version[] = { "ACP_VERSION=2", NULL };
	static const char *const auth[] = {
		"ACP_NEW_ERROR=-32000:Authentication required", NULL
	};
	static const char *const limit[] = { "ACP_STOP=max_tokens", NULL };
	static const char *const exits[] = { "ACP_EXIT=prompt", NULL };
	struct call c;

	call_run(&c, version, NULL, NULL);
	ASSERT(c.r.failure != AGENT_FAIL_NONE);
	ASSERT_CONTAINS(c.r.message.ptr, "the agent speaks ACP version 2");
	call_release(&c);

	call_run(&c, auth, NULL, NULL);
	ASSERT_EQ(c.r.failure, AGENT_FAIL_AUTH);
	ASSERT_CONTAINS(c.r.message.ptr, "session/new");
	call_release(&c);

	call_run(&c, limit, NULL, NULL);
	ASSERT_EQ(c.r.failure, AGENT_FAIL_LIMIT);
	ASSERT_CONTAINS(c.r.message.ptr, "max_tokens");
	call_release(&c);

	call_run(&c, exits, NULL, NULL);
	ASSERT_EQ(c.r.outcome, AGENT_EXIT);
	ASSERT_EQ(c.r.failure, AGENT_FAIL_CRASH);
	call_release(&c);
}

TEST(acp_timeout_kills_the_agent)
{
	static const char slow[] =
	    "{\"rules\": [{\"steps\": [{\"wait_cancel\": 60}]}]}";
	char *script = xasprintf("%s/slow.json", test_tmpdir());
	char *setting = xasprintf("ACP_SCRIPT=%s", script);
	const char *env[] = { setting, NULL };
	struct err e = ERR_INIT;
	struct call c;

	ASSERT_OK(fs_write_atomic(script, slow, strlen(slow), &e), &e);
	call_init(&c, env, NULL, NULL);
	/* long enough for python to start and reach the wait on a loaded
	 * machine (1 s was not, in a full CI run), far short of its 60 s */
	c.p.timeout_seconds = 4;
	call_go(&c);
	ASSERT_EQ(c.r.outcome, AGENT_TIMEOUT);
	ASSERT_EQ(c.r.failure, AGENT_FAIL_TIMEOUT);
	ASSERT(c.r.duration_ms < 30000);
	ASSERT(logged(c.log, "\"event\": \"waiting\""));
	call_release(&c);
	free(script);
	free(setting);
}
