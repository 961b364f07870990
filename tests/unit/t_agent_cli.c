/*
 * Tests for the coding-agent CLI adapters (agent/cli.c) and the failure
 * classifier (agent/classify.c): every stream parser against output the
 * real CLIs printed (tests/fixtures/agent-streams/, captured for
 * research/agent-clis.md), agent_classify and agent_parse_reset on tables
 * of messages, the argv, environment and private home each preset builds,
 * and the runner end to end with fake CLIs (shell scripts on PATH).
 */
#include "util/compat.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/cli_int.h"
#include "agent/versions.h"
#include "core/config.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/strvec.h"
#include "util/xalloc.h"

#define NOW_MS 1000000000000LL

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#endif

/* Under ASan a test can end with a leak check (children leave by _exit). */
#ifdef T_ASAN
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() ASSERT_EQ(__lsan_do_recoverable_leak_check(), 0)
#else
#define LEAK_CHECK()                                                           \
	do {                                                                   \
	} while (0)
#endif

/* ---- helpers ----------------------------------------------------------- */

/* An absolute path to fixture file name (static buffer, 4 in rotation). */
static const char *
fixture(const char *name)
{
	static char path[4][PATH_MAX];
	static int i;
	const char *f = __FILE__, *slash = strrchr(f, '/');
	char rel[PATH_MAX];

	i = (i + 1) % 4;
	snprintf(rel, sizeof(rel), "%.*s/../fixtures/agent-streams/%s",
		 slash ? (int)(slash - f) : 1, slash ? f : ".", name);
	if (!realpath(rel, path[i]))
		test_fail(__FILE__, __LINE__, "no fixture '%s'", rel);
	return path[i];
}

/* A path in the test's directory (static buffer, 4 in rotation). */
static const char *
tmp_path(const char *name)
{
	static char path[4][PATH_MAX];
	static int i;

	i = (i + 1) % 4;
	snprintf(path[i], sizeof(path[i]), "%s/%s", test_tmpdir(), name);
	return path[i];
}

/*
 * Parses fixture name.stdout as a stream of type, takes the exit status
 * from name.rc, and classifies, as the runner would.
 */
static void
parse_fixture(const char *type, const char *name, struct agent_result *r)
{
	struct buf out = BUF_INIT, rc = BUF_INIT;
	struct err e = ERR_INIT;
	char file[256];

	snprintf(file, sizeof(file), "%s.stdout", name);
	ASSERT_OK(fs_read(fixture(file), &out, 0, &e), &e);
	snprintf(file, sizeof(file), "%s.rc", name);
	ASSERT_OK(fs_read(fixture(file), &rc, 0, &e), &e);
	r->status = (int)strtol(rc.ptr, NULL, 10);
	r->outcome = r->status ? AGENT_EXIT : AGENT_OK;
	agent_parse_stream(type, out.ptr, out.len, r);
	agent_classify(r);
	buf_release(&out);
	buf_release(&rc);
}

static void
provider_init(struct config_provider *p, const char *type)
{
	memset(p, 0, sizeof(*p));
	p->name = xstrdup("p1");
	p->type = xstrdup(type);
	strvec_init(&p->command);
	strvec_init(&p->args);
	strvec_init(&p->env);
	p->timeout_seconds = 60;
	p->max_retries = -1;
}

static void
provider_release(struct config_provider *p)
{
	free(p->name);
	free(p->type);
	free(p->model);
	free(p->effort);
	free(p->base_url);
	free(p->api_key_env);
	strvec_clear(&p->command);
	strvec_clear(&p->args);
	strvec_clear(&p->env);
}

static void
request_init(struct agent_request *req, const struct config_provider *p)
{
	memset(req, 0, sizeof(*req));
	req->provider = p;
	req->cwd = test_tmpdir();
	req->prompt = "-do the thing";
	req->wake_fd = -1;
}

/* argv (or env) joined with " | ", for one readable comparison. */
static const char *
joined(const struct strvec *v)
{
	static struct buf b = BUF_INIT;
	size_t i;

	buf_reset(&b);
	for (i = 0; i < v->nr; i++)
		buf_addf(&b, "%s%s", i ? " | " : "", v->v[i]);
	return b.ptr;
}

/* The index of s in v, or -1. */
static int
find(const struct strvec *v, const char *s)
{
	size_t i;

	for (i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return (int)i;
	return -1;
}

static int
file_mode(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : (int)(st.st_mode & 07777);
}

static json_t *
load_json(const char *path)
{
	json_error_t je;
	json_t *j = json_load_file(path, 0, &je);

	if (!j)
		test_fail(__FILE__, __LINE__, "%s: %s", path, je.text);
	return j;
}

/* ---- parsers against captured output ------------------------------------ */

TEST(parse_claude_stream_json)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("claude-code", "claude-stream-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "MOCK_DONE: wrote hello.txt");
	ASSERT_STREQ(r.session_id, "f73e3392-0df3-4099-bacf-222c95e47c6c");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.tokens_out, 40);
	ASSERT(r.cost_known);
	ASSERT(fabs(r.cost_usd - 0.0012) < 1e-9);
	ASSERT_EQ(r.steps, 2);
	ASSERT_EQ(r.http_status, 0);
	ASSERT_EQ(r.message.len, 0);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_claude_error401)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("claude-code", "claude-error401", &r);
	ASSERT_EQ(r.outcome, AGENT_EXIT);
	ASSERT_EQ(r.http_status, 401);
	ASSERT_EQ(r.failure, AGENT_FAIL_AUTH);
	ASSERT_STREQ(r.message.ptr,
		     "Failed to authenticate. API Error: 401 mockllm "
		     "injected HTTP 401");
	ASSERT_EQ(r.text.len, 0);
	ASSERT_STREQ(r.session_id, "78da959d-a618-43c5-82ad-ecab3906a1a7");
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_claude_error500)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("claude-code", "claude-error500-maxretries0", &r);
	ASSERT_EQ(r.http_status, 500);
	ASSERT_EQ(r.failure, AGENT_FAIL_UNAVAILABLE);
	ASSERT_CONTAINS(r.message.ptr, "API Error: 500");
	ASSERT(!strchr(r.message.ptr, '\n'));
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_claude_max_turns)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("claude-code", "claude-maxturns1", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_LIMIT);
	ASSERT_STREQ(r.message.ptr, "Reached maximum number of turns (1)");
	ASSERT_EQ(r.tokens_in, 100);
	ASSERT_EQ(r.tokens_out, 20);
	ASSERT(fabs(r.cost_usd - 0.0006) < 1e-9);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_codex_json)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("codex", "codex-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "MOCK_DONE: wrote hello.txt");
	ASSERT_STREQ(r.session_id, "01a20026-1d2e-7893-b1b1-9eb3b97a1f82");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.tokens_out, 40);
	ASSERT(!r.cost_known);
	ASSERT_EQ(r.steps, 1);
	/* the "model metadata not found" item is a warning, not a failure */
	ASSERT_EQ(r.message.len, 0);
	agent_result_release(&r);

	r = (struct agent_result)AGENT_RESULT_INIT;
	parse_fixture("codex", "codex-apply-patch", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "MOCK_DONE: wrote hello.txt");
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_codex_errors)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("codex", "codex-error401", &r);
	ASSERT_EQ(r.http_status, 401);
	ASSERT_EQ(r.failure, AGENT_FAIL_AUTH);
	ASSERT_CONTAINS(r.message.ptr, "unexpected status 401 Unauthorized");
	ASSERT_EQ(r.text.len, 0);
	agent_result_release(&r);

	r = (struct agent_result)AGENT_RESULT_INIT;
	parse_fixture("codex", "codex-error500", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_UNAVAILABLE);
	ASSERT_CONTAINS(r.message.ptr, "experiencing high demand");
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_gemini_stream_json)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("gemini", "gemini-stream-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "MOCK_DONE: wrote hello.txt");
	ASSERT_STREQ(r.session_id, "3005d799-a220-4857-ae6b-66d8ff0d9e27");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.tokens_out, 40);
	ASSERT_EQ(r.steps, 2);
	ASSERT(!r.cost_known);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_gemini_errors)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("gemini", "gemini-error401", &r);
	ASSERT_EQ(r.status, 145);
	ASSERT_EQ(r.http_status, 401);
	ASSERT_EQ(r.failure, AGENT_FAIL_AUTH);
	ASSERT_CONTAINS(r.message.ptr, "[API Error:");
	agent_result_release(&r);

	r = (struct agent_result)AGENT_RESULT_INIT;
	parse_fixture("gemini", "gemini-error500", &r);
	ASSERT_EQ(r.status, 244);
	ASSERT_EQ(r.http_status, 500);
	ASSERT_EQ(r.failure, AGENT_FAIL_UNAVAILABLE);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_qwen)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("qwen", "qwen-stream-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "MOCK_DONE: wrote hello.txt");
	ASSERT_STREQ(r.session_id, "1ff7ef20-2078-4261-871e-ca1b1f7f701a");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.tokens_out, 40);
	ASSERT_EQ(r.steps, 2);
	agent_result_release(&r);

	/* exit 0, is_error false, and still a failure */
	r = (struct agent_result)AGENT_RESULT_INIT;
	parse_fixture("qwen", "qwen-error500", &r);
	ASSERT_EQ(r.outcome, AGENT_OK);
	ASSERT_EQ(r.http_status, 500);
	ASSERT_EQ(r.failure, AGENT_FAIL_UNAVAILABLE);
	ASSERT_STREQ(r.message.ptr,
		     "[API Error: 500 mockllm injected HTTP 500]");
	ASSERT_EQ(r.text.len, 0);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_opencode)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("opencode", "opencode-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "MOCK_DONE: wrote hello.txt");
	ASSERT_STREQ(r.session_id, "ses_dffd5179bffer7Cpn8S2gUNbo3");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.tokens_out, 40);
	ASSERT_EQ(r.steps, 2);
	ASSERT(r.cost_known);
	ASSERT(r.cost_usd == 0);
	agent_result_release(&r);

	r = (struct agent_result)AGENT_RESULT_INIT;
	parse_fixture("opencode", "opencode-error500", &r);
	ASSERT_EQ(r.http_status, 500);
	ASSERT_EQ(r.failure, AGENT_FAIL_UNAVAILABLE);
	ASSERT_STREQ(r.message.ptr, "mockllm injected HTTP 500");
	ASSERT_STREQ(r.session_id, "ses_dffd4fe2affe09s7DxugDheWNE");
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_aider_plain_text)
{
	static const char out[] = "\nAider v0.86.1\nModel: openai/m\n\n"
				  "Done: wrote hello.txt\n\n";
	struct agent_result r = AGENT_RESULT_INIT;

	agent_parse_stream("aider", out, sizeof(out) - 1, &r);
	ASSERT_STREQ(r.text.ptr,
		     "Aider v0.86.1\nModel: openai/m\n\nDone: wrote hello.txt");
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_skips_junk_and_reads_a_last_line_without_newline)
{
	static const char out[] =
	    "Warning: something on stdout\n"
	    "{broken json\n"
	    "[1,2,3]\n"
	    "{\"type\":\"assistant\",\"session_id\":\"s1\",\"message\":"
	    "{\"content\":[{\"type\":\"text\",\"text\":\"partial\"}]}}\n"
	    "{\"type\":\"result\",\"is_error\":false,\"result\":\"  final "
	    "answer \\n\",\"usage\":{\"input_tokens\":5,"
	    "\"cache_read_input_tokens\":7,\"output_tokens\":3}}";
	struct agent_result r = AGENT_RESULT_INIT;

	agent_parse_stream("claude-code", out, sizeof(out) - 1, &r);
	ASSERT_STREQ(r.text.ptr, "final answer");
	ASSERT_STREQ(r.session_id, "s1");
	ASSERT_EQ(r.tokens_in, 12); /* cache reads count as input */
	ASSERT_EQ(r.tokens_out, 3);
	ASSERT(!r.cost_known);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_falls_back_to_the_last_assistant_text)
{
	static const char claude[] =
	    "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":"
	    "\"text\",\"text\":\"first\"}]}}\n"
	    "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":"
	    "\"text\",\"text\":\"the last words\"}]}}\n"
	    "{\"type\":\"result\",\"is_error\":false,\"result\":\"\"}\n";
	static const char opencode[] =
	    "{\"type\":\"step_start\",\"sessionID\":\"s\"}\n"
	    "{\"type\":\"text\",\"part\":{\"text\":\"step one text\"}}\n"
	    "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1}}}\n"
	    "{\"type\":\"step_start\"}\n"
	    "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1}}}\n";
	struct agent_result r = AGENT_RESULT_INIT;

	agent_parse_stream("claude-code", claude, sizeof(claude) - 1, &r);
	ASSERT_STREQ(r.text.ptr, "the last words");
	agent_result_release(&r);

	r = (struct agent_result)AGENT_RESULT_INIT;
	agent_parse_stream("opencode", opencode, sizeof(opencode) - 1, &r);
	ASSERT_STREQ(r.text.ptr, "step one text");
	ASSERT_EQ(r.tokens_in, 2);
	ASSERT(!r.cost_known);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_claude_retries_without_a_result)
{
	static const char out[] =
	    "{\"type\":\"system\",\"subtype\":\"api_retry\",\"attempt\":1,"
	    "\"error_status\":429,\"error\":\"rate_limit\"}\n";
	struct agent_result r = AGENT_RESULT_INIT;

	agent_parse_stream("claude-code", out, sizeof(out) - 1, &r);
	ASSERT_STREQ(r.message.ptr, "API error 429 (rate_limit), retrying");
	r.outcome = AGENT_EXIT;
	r.status = 1;
	agent_classify(&r);
	ASSERT_EQ(r.failure, AGENT_FAIL_QUOTA);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_survives_odd_shapes)
{
	static const char odd[] =
	    "{\"type\":\"result\",\"usage\":\"x\",\"result\":5,"
	    "\"is_error\":\"yes\",\"errors\":{},\"num_turns\":-3}\n"
	    "{\"type\":\"assistant\",\"message\":{\"content\":7}}\n"
	    "{\"type\":\"assistant\",\"message\":[]}\n"
	    "{\"type\":\"item.completed\",\"item\":[1]}\n"
	    "{\"type\":\"turn.failed\",\"error\":\"str\"}\n"
	    "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":"
	    "1e300}}\n"
	    "{\"type\":\"message\",\"role\":\"assistant\",\"content\":"
	    "null}\n"
	    "{\"type\":\"result\",\"status\":3,\"error\":[]}\n"
	    "{\"type\":\"step_finish\",\"part\":{\"tokens\":[],"
	    "\"cost\":\"1\"}}\n"
	    "{\"type\":\"error\",\"error\":{\"data\":7}}\n"
	    "{\"type\":\"text\",\"part\":null}\n"
	    "{\"type\":7,\"session_id\":[],\"sessionID\":{}}\n"
	    "{\"type\":\"thread.started\",\"thread_id\":\""
	    "0123456789012345678901234567890123456789012345678901234567890123"
	    "456789012345678901234567890123456789012345678901234567890123456"
	    "789\"}\n"
	    "\xff\xfe{\"type\":\"result\"}\n\n\n";
	static const char *const types[] = {
		"claude-code", "codex",	  "gemini", "qwen",  "opencode",
		"aider",       "copilot", "pi",	    "kilo",  "cline",
		"continue",    "amp",	  "auggie", "crush",
	};
	struct agent_result r;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		r = (struct agent_result)AGENT_RESULT_INIT;
		agent_parse_stream(types[i], odd, sizeof(odd) - 1, &r);
		r.outcome = AGENT_EXIT;
		r.status = 1;
		agent_classify(&r);
		ASSERT(r.failure != AGENT_FAIL_NONE);
		ASSERT(strlen(r.session_id) < sizeof(r.session_id));
		agent_result_release(&r);
	}
	LEAK_CHECK();
}

/* ---- classification ------------------------------------------------------ */

struct classify_case {
	enum agent_outcome outcome;
	int status, http;
	const char *message, *err_tail;
	enum agent_failure want;
	const char *want_message; /* NULL: unchanged */
};

static const struct classify_case classify_cases[] = {
	{ AGENT_OK, 0, 0, "", "noise on stderr", AGENT_FAIL_NONE, "" },
	{ AGENT_STOPPED, 143, 0, "", "", AGENT_FAIL_NONE, "" },
	{ AGENT_TIMEOUT, 143, 0, "", "x\n", AGENT_FAIL_TIMEOUT, "timed out" },
	{ AGENT_EXIT, 1, 429, "slow down", "", AGENT_FAIL_QUOTA, NULL },
	{ AGENT_EXIT, 1, 0, "Claude AI usage limit reached|1735689600", "",
	  AGENT_FAIL_QUOTA, NULL },
	{ AGENT_EXIT, 1, 0, "RESOURCE_EXHAUSTED: quota", "", AGENT_FAIL_QUOTA,
	  NULL },
	{ AGENT_EXIT, 1, 0, "429 Too Many Requests", "", AGENT_FAIL_QUOTA,
	  NULL },
	{ AGENT_EXIT, 1, 0, "You've hit your usage limit.", "",
	  AGENT_FAIL_QUOTA, NULL },
	{ AGENT_EXIT, 1, 0, "Invalid API key · Please run /login", "",
	  AGENT_FAIL_AUTH, NULL },
	{ AGENT_EXIT, 1, 403, "forbidden", "", AGENT_FAIL_AUTH, NULL },
	{ AGENT_EXIT, 41, 0, "Invalid auth method selected.", "",
	  AGENT_FAIL_AUTH, NULL },
	{ AGENT_EXIT, 1, 0, "Not logged in", "", AGENT_FAIL_AUTH, NULL },
	{ AGENT_EXIT, 1, 0, "API Error: 529 Overloaded", "",
	  AGENT_FAIL_UNAVAILABLE, NULL },
	{ AGENT_EXIT, 1, 0, "unexpected status 503 Service Unavailable", "",
	  AGENT_FAIL_UNAVAILABLE, NULL },
	{ AGENT_EXIT, 1, 0, "API Error: Unable to connect to API", "",
	  AGENT_FAIL_UNAVAILABLE, NULL },
	{ AGENT_EXIT, 1, 0, "API Error: 400 bad request", "", AGENT_FAIL_CRASH,
	  NULL },
	{ AGENT_EXIT, 2, 0, "", "starting\nsomething went wrong  \n\n",
	  AGENT_FAIL_CRASH, "something went wrong" },
	{ AGENT_EXIT, 3, 0, "", "", AGENT_FAIL_CRASH, "exited with status 3" },
	{ AGENT_CRASHED, 137, 0, "", "", AGENT_FAIL_CRASH,
	  "killed by signal 9" },
	{ AGENT_EXIT, 1, 0, "", "Error: 401 Unauthorized\n", AGENT_FAIL_AUTH,
	  "Error: 401 Unauthorized" },
	{ AGENT_EXIT, 1, 0, "", "    at x (y.js:1)\n  status: 429\n}\n",
	  AGENT_FAIL_QUOTA, "}" },
	/* exit 0 with a reported error goes by the same rules */
	{ AGENT_OK, 0, 500, "[API Error: 500 x]", "", AGENT_FAIL_UNAVAILABLE,
	  NULL },
	{ AGENT_OK, 0, 0, "something odd", "", AGENT_FAIL_CRASH, NULL },
	/* stderr of a successful run is not read */
	{ AGENT_OK, 0, 0, "", "rate limit warning", AGENT_FAIL_NONE, "" },
};

TEST(classify_table)
{
	const struct classify_case *c;
	struct agent_result r;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(classify_cases); i++) {
		c = &classify_cases[i];
		r = (struct agent_result)AGENT_RESULT_INIT;
		r.outcome = c->outcome;
		r.status = c->status;
		r.signal = c->outcome == AGENT_CRASHED ? c->status - 128 : 0;
		r.http_status = c->http;
		buf_adds(&r.message, c->message);
		buf_adds(&r.err_tail, c->err_tail);
		agent_classify(&r);
		if (r.failure != c->want)
			test_fail(__FILE__, __LINE__,
				  "case %zu (\"%s\" / \"%s\"): %s, want %s", i,
				  c->message, c->err_tail,
				  agent_failure_name(r.failure),
				  agent_failure_name(c->want));
		if (c->want_message && strcmp(r.message.ptr, c->want_message))
			test_fail(__FILE__, __LINE__,
				  "case %zu: message \"%s\", want \"%s\"", i,
				  r.message.ptr, c->want_message);
		agent_result_release(&r);
	}
	LEAK_CHECK();
}

TEST(classify_keeps_a_class_the_adapter_set)
{
	struct agent_result r = AGENT_RESULT_INIT;

	r.outcome = AGENT_EXIT;
	r.status = 1;
	r.http_status = 500;
	r.failure = AGENT_FAIL_LIMIT;
	agent_classify(&r);
	ASSERT_EQ(r.failure, AGENT_FAIL_LIMIT);
	ASSERT_STREQ(r.message.ptr, "exited with status 1");
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(classify_reads_the_quota_reset)
{
	struct agent_result r = AGENT_RESULT_INIT;
	int64_t t0 = time(NULL) * 1000LL;

	r.outcome = AGENT_EXIT;
	r.status = 1;
	buf_adds(&r.message, "Claude AI usage limit reached|1735689600");
	agent_classify(&r);
	ASSERT_EQ(r.failure, AGENT_FAIL_QUOTA);
	ASSERT_EQ(r.reset_at_ms, 1735689600000LL);
	agent_result_release(&r);

	/* from stderr when the message names no time */
	r = (struct agent_result)AGENT_RESULT_INIT;
	r.outcome = AGENT_EXIT;
	r.status = 1;
	r.http_status = 429;
	buf_adds(&r.message, "rate limited");
	buf_adds(&r.err_tail, "retry after 120 seconds\n");
	agent_classify(&r);
	ASSERT_EQ(r.failure, AGENT_FAIL_QUOTA);
	ASSERT(r.reset_at_ms >= t0 + 120000);
	ASSERT(r.reset_at_ms <= t0 + 125000);
	agent_result_release(&r);
	LEAK_CHECK();
}

struct reset_case {
	const char *text;
	int64_t want; /* absolute epoch ms; NOW_MS + x for relative ones */
};

static const struct reset_case reset_cases[] = {
	{ "try again in 2 hours 5 minutes", NOW_MS + 7500000 },
	{ "Please try again in 30 seconds.", NOW_MS + 30000 },
	{ "Rate limit reached. Please try again in 45s", NOW_MS + 45000 },
	{ "try again in 1h2m", NOW_MS + 3720000 },
	{ "try again in 1h 2m 3s", NOW_MS + 3723000 },
	{ "usage limit; try again in 2 hours and 5 minutes", NOW_MS + 7500000 },
	{ "Please retry in 1.5s", NOW_MS + 1500 },
	{ "Please retry in 250ms", NOW_MS + 250 },
	{ "retry after 30", NOW_MS + 30000 },
	{ "retry after 7 (seconds)", NOW_MS + 7000 },
	{ "Retry-After: 120", NOW_MS + 120000 },
	{ "try again in 2 days", NOW_MS + 2 * 86400000LL },
	{ "quota resets at 2026-11-21T15:00:00Z", 1795273200000LL },
	{ "limit will reset 2026-11-21T15:00:00.250+01:00", 1795269600250LL },
	{ "reset: 2026-11-21 15:00:00", 1795273200000LL },
	{ "Claude AI usage limit reached|1735689600", 1735689600000LL },
	{ "anthropic-ratelimit-unified-reset: 1735689600", 1735689600000LL },
	{ "try again in a moment", 0 },
	{ "rate limit exceeded", 0 },
	/* a clock time: the next 3 PM in the host's zone (UTC below),
	 * NOW_MS being 01:46:40 (t_failclass has openTiger's cases) */
	{ "your limit will reset at 3pm", 1000047600000LL },
	{ "", 0 },
};

TEST(parse_reset_table)
{
	size_t i;
	int64_t got;

	setenv("TZ", "UTC", 1);
	tzset();
	for (i = 0; i < ARRAY_SIZE(reset_cases); i++) {
		got = agent_parse_reset(reset_cases[i].text, NOW_MS);
		if (got != reset_cases[i].want)
			test_fail(__FILE__, __LINE__, "\"%s\": %lld, want %lld",
				  reset_cases[i].text, (long long)got,
				  (long long)reset_cases[i].want);
	}
	ASSERT_EQ(agent_parse_reset(NULL, NOW_MS), 0);
	LEAK_CHECK();
}

TEST(status_in_text)
{
	ASSERT_EQ(agent__status_in_text("API Error: 500 boom"), 500);
	ASSERT_EQ(agent__status_in_text("[API Error: 429 slow]"), 429);
	ASSERT_EQ(agent__status_in_text("unexpected status 401 Unauthorized"),
		  401);
	ASSERT_EQ(agent__status_in_text("{\"code\":403,\"status\":\"x\"}"),
		  403);
	ASSERT_EQ(agent__status_in_text("  status: 502\n"), 502);
	ASSERT_EQ(agent__status_in_text("HTTP 503 from upstream"), 503);
	ASSERT_EQ(agent__status_in_text("status 200 then status 404"), 404);
	ASSERT_EQ(agent__status_in_text("API Error: 5000"), 0);
	ASSERT_EQ(agent__status_in_text("exit status 1"), 0);
	ASSERT_EQ(agent__status_in_text(NULL), 0);
	LEAK_CHECK();
}

/* ---- argv, env and home ---------------------------------------------- */

TEST(build_claude)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT, renv = STRVEC_INIT;
	struct err e = ERR_INIT;
	const char *home = tmp_path("home");
	char want[PATH_MAX];

	setenv("T_KEY", "sk-test", 1);
	provider_init(&p, "claude-code");
	p.model = xstrdup("sonnet");
	p.base_url = xstrdup("http://127.0.0.1:9");
	p.api_key_env = xstrdup("T_KEY");
	p.max_retries = 0;
	p.isolated = 1;
	strvec_pushl(&p.args, "--allowedTools", "Write", "Edit", NULL);
	strvec_pushl(&p.env, "FOO=1", "ANTHROPIC_BASE_URL=http://override",
		     NULL);
	strvec_push(&renv, "BATON_RUN_DIR=/runs/1");
	request_init(&req, &p);
	req.home = home;
	req.env = &renv;
	ASSERT_OK(cli__build(&req, "/opt/bin/claude", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv),
		     "/opt/bin/claude | -p | --output-format | stream-json | "
		     "--verbose | --dangerously-skip-permissions | --model | "
		     "sonnet | --allowedTools | Write | Edit | -- | "
		     "-do the thing");
	ASSERT(find(&env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1") >= 0);
	ASSERT(find(&env, "DISABLE_AUTOUPDATER=1") >= 0);
	ASSERT(find(&env, "DISABLE_TELEMETRY=1") >= 0);
	ASSERT(find(&env, "DISABLE_ERROR_REPORTING=1") >= 0);
	ASSERT(find(&env, "ANTHROPIC_API_KEY=sk-test") >= 0);
	ASSERT(find(&env, "CLAUDE_CODE_MAX_RETRIES=0") >= 0);
	ASSERT_EQ(find(&env, "IS_SANDBOX=1") >= 0, geteuid() == 0);
	snprintf(want, sizeof(want), "CLAUDE_CONFIG_DIR=%s", home);
	ASSERT(find(&env, want) >= 0);
	/* baton's, then the provider's (which win), then the request's */
	ASSERT(find(&env, "ANTHROPIC_BASE_URL=http://127.0.0.1:9") >= 0);
	ASSERT(find(&env, "ANTHROPIC_BASE_URL=http://127.0.0.1:9") <
	       find(&env, "ANTHROPIC_BASE_URL=http://override"));
	ASSERT(find(&env, "FOO=1") < find(&env, "BATON_RUN_DIR=/runs/1"));
	ASSERT_STREQ(env.v[env.nr - 1], "BATON_RUN_DIR=/runs/1");
	ASSERT_EQ(file_mode(home), 0700);
	strvec_clear(&argv);
	strvec_clear(&env);
	strvec_clear(&renv);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_claude_plain_and_command_prefix)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	size_t i;

	unsetenv("T_NONE");
	provider_init(&p, "claude-code");
	p.api_key_env = xstrdup("T_NONE");
	strvec_pushl(&p.command, "npx", "-y", "@anthropic-ai/claude-code",
		     NULL);
	request_init(&req, &p);
	req.home = tmp_path("home"); /* not isolated: not used */
	ASSERT_OK(cli__build(&req, "/usr/bin/npx", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv),
		     "/usr/bin/npx | -y | @anthropic-ai/claude-code | -p | "
		     "--output-format | stream-json | --verbose | "
		     "--dangerously-skip-permissions | -- | -do the thing");
	for (i = 0; i < env.nr; i++) {
		ASSERT(strncmp(env.v[i], "ANTHROPIC_", 10));
		ASSERT(strncmp(env.v[i], "CLAUDE_CONFIG_DIR=", 18));
		ASSERT(strncmp(env.v[i], "CLAUDE_CODE_MAX_RETRIES=", 24));
	}
	ASSERT(!fs_exists(tmp_path("home")));
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_codex)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	const char *home = tmp_path("codex-home");
	struct buf toml = BUF_INIT;
	char want[PATH_MAX];

	provider_init(&p, "codex");
	p.model = xstrdup("gpt-5.5");
	p.effort = xstrdup("high");
	p.base_url = xstrdup("http://127.0.0.1:9/v1");
	p.max_retries = 2;
	p.isolated = 1;
	request_init(&req, &p);
	req.cwd = "/work tree";
	req.home = home;
	ASSERT_OK(cli__build(&req, "codex", &argv, &env, &e), &e);
	ASSERT_STREQ(
	    joined(&argv),
	    "codex | exec | --json | --skip-git-repo-check | -s | "
	    "workspace-write | -c | approval_policy=\"never\" | -c | "
	    "analytics.enabled=false | --disable | plugins | --disable | "
	    "remote_plugin | --disable | apps | -C | /work tree | -c | "
	    "model_reasoning_effort=\"high\" | -c | model_provider=baton | "
	    "-c | model_providers.baton={name=\"baton\",base_url=\"http://"
	    "127.0.0.1:9/v1\",wire_api=\"responses\",env_key=\"BATON_CODEX_"
	    "KEY\",request_max_retries=2,stream_max_retries=2} | -m | "
	    "gpt-5.5 | -- | -do the thing");
	ASSERT(find(&env, "BATON_CODEX_KEY=baton") >= 0);
	snprintf(want, sizeof(want), "CODEX_HOME=%s", home);
	ASSERT(find(&env, want) >= 0);
	snprintf(want, sizeof(want), "TMPDIR=%s/tmp", home);
	ASSERT(find(&env, want) >= 0);
	ASSERT(fs_is_dir(want + strlen("TMPDIR=")));
	snprintf(want, sizeof(want), "%s/config.toml", home);
	ASSERT_EQ(file_mode(want), 0600);
	ASSERT_OK(fs_read(want, &toml, 0, &e), &e);
	ASSERT_CONTAINS(toml.ptr, "check_for_update_on_startup = false");
	buf_release(&toml);
	strvec_clear(&argv);
	strvec_clear(&env);

	/* a named key variable; no base_url: the key goes to CODEX_API_KEY */
	free(p.base_url);
	p.base_url = NULL;
	p.api_key_env = xstrdup("T_KEY");
	setenv("T_KEY", "sk-codex", 1);
	p.isolated = 0;
	ASSERT_OK(cli__build(&req, "codex", &argv, &env, &e), &e);
	ASSERT_EQ(find(&argv, "model_provider=baton"), -1);
	ASSERT(find(&env, "CODEX_API_KEY=sk-codex") >= 0);
	ASSERT_EQ(find(&env, "BATON_CODEX_KEY=baton"), -1);
	strvec_clear(&argv);
	strvec_clear(&env);

	/* with base_url the key is named, not copied */
	p.base_url = xstrdup("http://h/v1");
	ASSERT_OK(cli__build(&req, "codex", &argv, &env, &e), &e);
	ASSERT_CONTAINS(joined(&argv), "env_key=\"T_KEY\",");
	ASSERT_EQ(find(&env, "CODEX_API_KEY=sk-codex"), -1);
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_gemini)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	const char *home = tmp_path("gemini-home");
	char want[PATH_MAX];
	json_t *j;

	setenv("T_KEY", "g-key", 1);
	provider_init(&p, "gemini");
	p.model = xstrdup("gemini-2.5-flash");
	p.base_url = xstrdup("http://127.0.0.1:9");
	p.api_key_env = xstrdup("T_KEY");
	p.max_retries = 0;
	p.isolated = 1;
	request_init(&req, &p);
	req.home = home;
	ASSERT_OK(cli__build(&req, "gemini", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv),
		     "gemini | --output-format | stream-json | --yolo | "
		     "--skip-trust | --model | gemini-2.5-flash | "
		     "--prompt=-do the thing");
	ASSERT(find(&env, "GEMINI_CLI_NO_RELAUNCH=true") >= 0);
	ASSERT(find(&env, "GEMINI_CLI_TRUST_WORKSPACE=true") >= 0);
	ASSERT(find(&env, "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9") >= 0);
	ASSERT(find(&env, "GEMINI_API_KEY=g-key") >= 0);
	snprintf(want, sizeof(want), "HOME=%s", home);
	ASSERT(find(&env, want) >= 0);
	snprintf(want, sizeof(want), "%s/.gemini/settings.json", home);
	ASSERT_EQ(file_mode(want), 0600);
	j = load_json(want);
	ASSERT_STREQ(
	    json_string_value(json_object_get(
		json_object_get(json_object_get(j, "security"), "auth"),
		"selectedType")),
	    "gemini-api-key");
	ASSERT_EQ(json_integer_value(json_object_get(
		      json_object_get(j, "general"), "maxAttempts")),
		  1);
	ASSERT(json_is_false(json_object_get(json_object_get(j, "privacy"),
					     "usageStatisticsEnabled")));
	ASSERT(json_is_false(
	    json_object_get(json_object_get(j, "telemetry"), "enabled")));
	ASSERT(json_is_true(json_object_get(json_object_get(j, "general"),
					    "disableAutoUpdate")));
	json_decref(j);
	strvec_clear(&argv);
	strvec_clear(&env);

	/* not isolated: the user's own HOME and settings */
	p.isolated = 0;
	req.home = tmp_path("gemini-home2");
	ASSERT_OK(cli__build(&req, "gemini", &argv, &env, &e), &e);
	ASSERT(!fs_exists(req.home));
	ASSERT(strncmp(env.v[env.nr - 1], "HOME=", 5));
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_qwen)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	const char *home = tmp_path("qwen-home");
	char want[PATH_MAX];
	json_t *j;

	setenv("T_KEY", "q-key", 1);
	provider_init(&p, "qwen");
	p.model = xstrdup("mock-model");
	p.base_url = xstrdup("http://127.0.0.1:9/v1");
	p.api_key_env = xstrdup("T_KEY");
	p.max_retries = 0;
	p.isolated = 1;
	request_init(&req, &p);
	req.home = home;
	ASSERT_OK(cli__build(&req, "qwen", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv),
		     "qwen | --output-format | stream-json | --yolo | "
		     "--auth-type | openai | --model | mock-model | "
		     "--prompt=-do the thing");
	ASSERT(find(&env, "OPENAI_BASE_URL=http://127.0.0.1:9/v1") >= 0);
	ASSERT(find(&env, "OPENAI_API_KEY=q-key") >= 0);
	ASSERT(find(&env, "OPENAI_MODEL=mock-model") >= 0);
	snprintf(want, sizeof(want), "HOME=%s", home);
	ASSERT(find(&env, want) >= 0);
	snprintf(want, sizeof(want), "%s/.qwen/settings.json", home);
	ASSERT_EQ(file_mode(want), 0600);
	j = load_json(want);
	ASSERT_STREQ(
	    json_string_value(json_object_get(
		json_object_get(json_object_get(j, "security"), "auth"),
		"selectedType")),
	    "openai");
	ASSERT_EQ(json_integer_value(json_object_get(
		      json_object_get(json_object_get(j, "model"),
				      "generationConfig"),
		      "maxRetries")),
		  0);
	ASSERT(json_is_false(json_object_get(json_object_get(j, "privacy"),
					     "usageStatisticsEnabled")));
	json_decref(j);
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_opencode)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	const char *home = tmp_path("oc-home");
	char want[PATH_MAX];
	json_t *j, *baton;

	provider_init(&p, "opencode");
	p.model = xstrdup("mock-model");
	p.base_url = xstrdup("http://127.0.0.1:9/v1");
	p.api_key_env = xstrdup("T_KEY");
	p.isolated = 1;
	request_init(&req, &p);
	req.home = home;
	ASSERT_OK(cli__build(&req, "opencode", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv),
		     "opencode | run | --format | json | --model | "
		     "baton/mock-model | -- | -do the thing");
	ASSERT(find(&env, "OPENCODE_DISABLE_AUTOUPDATE=1") >= 0);
	ASSERT(find(&env, "OPENCODE_DISABLE_MODELS_FETCH=1") >= 0);
	ASSERT(find(&env, "OPENCODE_DISABLE_LSP_DOWNLOAD=1") >= 0);
	ASSERT(find(&env, "OPENCODE_DISABLE_DEFAULT_PLUGINS=1") >= 0);
	ASSERT(find(&env, "OPENCODE_DISABLE_SHARE=1") >= 0);
	snprintf(want, sizeof(want), "XDG_DATA_HOME=%s/data", home);
	ASSERT(find(&env, want) >= 0);
	snprintf(want, sizeof(want), "XDG_CONFIG_HOME=%s/config", home);
	ASSERT(find(&env, want) >= 0);
	snprintf(want, sizeof(want), "OPENCODE_CONFIG=%s/opencode.json", home);
	ASSERT(find(&env, want) >= 0);
	snprintf(want, sizeof(want), "%s/opencode.json", home);
	ASSERT_EQ(file_mode(want), 0600);
	j = load_json(want);
	baton = json_object_get(json_object_get(j, "provider"), "baton");
	ASSERT_STREQ(json_string_value(json_object_get(
			 json_object_get(baton, "options"), "apiKey")),
		     "{env:T_KEY}");
	ASSERT_STREQ(json_string_value(json_object_get(
			 json_object_get(baton, "options"), "baseURL")),
		     "http://127.0.0.1:9/v1");
	ASSERT(json_is_true(json_object_get(
	    json_object_get(json_object_get(baton, "models"), "mock-model"),
	    "tool_call")));
	ASSERT_STREQ(json_string_value(json_object_get(j, "model")),
		     "baton/mock-model");
	ASSERT(json_is_false(json_object_get(j, "autoupdate")));
	ASSERT_STREQ(json_string_value(json_object_get(
			 json_object_get(j, "permission"), "edit")),
		     "allow");
	json_decref(j);
	strvec_clear(&argv);
	strvec_clear(&env);

	/* no home, no isolation: the config travels in the environment */
	free(p.base_url);
	p.base_url = NULL;
	p.isolated = 0;
	req.home = NULL;
	ASSERT_OK(cli__build(&req, "opencode", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv), "opencode | run | --format | json | "
				    "--model | mock-model | -- | "
				    "-do the thing");
	ASSERT_CONTAINS(joined(&env), "OPENCODE_CONFIG_CONTENT={");
	ASSERT_CONTAINS(joined(&env), "\"autoupdate\":false");
	ASSERT(!strstr(joined(&env), "XDG_DATA_HOME="));
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_aider)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;

	setenv("T_KEY", "sk-aider", 1);
	provider_init(&p, "aider");
	p.model = xstrdup("mock-model");
	p.base_url = xstrdup("http://127.0.0.1:9/v1");
	p.api_key_env = xstrdup("T_KEY");
	strvec_push(&p.args, "--edit-format=whole");
	request_init(&req, &p);
	ASSERT_OK(cli__build(&req, "aider", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv),
		     "aider | --yes-always | --no-auto-commits | "
		     "--no-check-update | --analytics-disable | "
		     "--no-show-model-warnings | --no-pretty | --no-stream | "
		     "--no-gitignore | --model | openai/mock-model | "
		     "--openai-api-base | http://127.0.0.1:9/v1 | "
		     "--edit-format=whole | --message=-do the thing");
	ASSERT(find(&env, "OPENAI_API_KEY=sk-aider") >= 0);
	ASSERT(!strstr(joined(&argv), "sk-aider"));
	strvec_clear(&argv);
	strvec_clear(&env);

	/* with a home, its history files go there */
	req.home = tmp_path("aider-home");
	ASSERT_OK(cli__build(&req, "aider", &argv, &env, &e), &e);
	ASSERT_CONTAINS(joined(&argv), "--chat-history-file | ");
	ASSERT_CONTAINS(joined(&argv), "aider-home/aider.chat.history.md");
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_rejects_other_types)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;

	provider_init(&p, "openai");
	request_init(&req, &p);
	ASSERT_EQ(cli__build(&req, "x", &argv, &env, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "not a CLI type");
	provider_release(&p);
	LEAK_CHECK();
}

/*
 * A session to resume goes into argv as each CLI takes it, glued to its
 * option (or, for codex, as an operand after "--"), so an id can never
 * read as a flag; one that is not a plain token is refused.
 */
TEST(build_resume)
{
	static const struct {
		const char *type, *want;
	} cases[] = {
		{ "claude-code", "claude | -p | --output-format | stream-json | "
				 "--verbose | --dangerously-skip-permissions | "
				 "--resume=0a1b-c2 | --x | -- | -do the thing" },
		{ "gemini", "gemini | --output-format | stream-json | --yolo | "
			    "--skip-trust | --resume=0a1b-c2 | --x | "
			    "--prompt=-do the thing" },
		{ "qwen", "qwen | --output-format | stream-json | --yolo | "
			  "--auth-type | openai | --resume=0a1b-c2 | --x | "
			  "--prompt=-do the thing" },
		{ "opencode", "opencode | run | --format | json | "
			      "--session=0a1b-c2 | --x | -- | -do the thing" },
	};
	static const char *const hostile[] = {
		"-rf", "--dangerously-skip-permissions", "a b", "a;touch x",
		"$(id)", "a\nb", "../../etc/passwd", "", "a`b`", "\xc3\xa9t\xc3\xa9",
	};
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	char long_id[AGENT_SESSION_MAX + 2];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		provider_init(&p, cases[i].type);
		strvec_push(&p.args, "--x");
		request_init(&req, &p);
		req.resume_session = "0a1b-c2";
		ASSERT_OK(cli__build(&req, agent_info(cases[i].type)->program,
				     &argv, &env, &e),
			  &e);
		ASSERT_STREQ(joined(&argv), cases[i].want);
		ASSERT(agent_info(cases[i].type)->resumes);
		strvec_clear(&argv);
		strvec_clear(&env);
		provider_release(&p);
	}
	/* codex: the resume subcommand after every exec option */
	provider_init(&p, "codex");
	request_init(&req, &p);
	req.cwd = "/wt";
	req.resume_session = "01a2-b3";
	ASSERT_OK(cli__build(&req, "codex", &argv, &env, &e), &e);
	ASSERT_CONTAINS(joined(&argv), "| -C | /wt | ");
	ASSERT_CONTAINS(joined(&argv),
			"| resume | -- | 01a2-b3 | -do the thing");
	strvec_clear(&argv);
	strvec_clear(&env);
	/* hostile ids: refused before anything is built */
	for (i = 0; i < ARRAY_SIZE(hostile); i++) {
		req.resume_session = hostile[i];
		ASSERT(!agent_session_id_ok(hostile[i]));
		ASSERT_EQ(cli__build(&req, "codex", &argv, &env, &e),
			  BATON_EINVAL);
		ASSERT_CONTAINS(e.msg, "not a plain token");
		ASSERT_EQ(argv.nr, 0);
	}
	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	ASSERT(!agent_session_id_ok(long_id));
	long_id[AGENT_SESSION_MAX] = '\0';
	ASSERT(agent_session_id_ok(long_id));
	ASSERT(agent_session_id_ok("ses_de3ccd10ffferGx5QFqVoyWhVW"));
	ASSERT(agent_session_id_ok("7fbe7640-ffa8-4836-8159-8555a6289184"));
	ASSERT(!agent_session_id_ok(NULL));
	provider_release(&p);
	/* a type without native resume refuses one */
	provider_init(&p, "aider");
	request_init(&req, &p);
	req.resume_session = "abc";
	ASSERT(!agent_info("aider")->resumes);
	ASSERT_EQ(cli__build(&req, "aider", &argv, &env, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "cannot resume");
	provider_release(&p);
	ASSERT(!agent_info("command")->resumes);
	ASSERT(!agent_info("openai")->resumes);
	LEAK_CHECK();
}

TEST(infos)
{
	const struct agent_info *i = agent_info("claude-code");

	ASSERT(i && i->is_cli);
	ASSERT_STREQ(i->program, "claude");
	ASSERT_STREQ(i->install_hint,
		     "npm install -g @anthropic-ai/claude-code");
	ASSERT_STREQ(agent_info("codex")->install_hint,
		     "npm install -g @openai/codex");
	ASSERT_STREQ(agent_info("gemini")->install_hint,
		     "npm install -g @google/gemini-cli");
	ASSERT_STREQ(agent_info("qwen")->install_hint,
		     "npm install -g @qwen-code/qwen-code");
	ASSERT_STREQ(agent_info("opencode")->install_hint,
		     "npm install -g opencode-ai");
	ASSERT_STREQ(agent_info("aider")->install_hint,
		     "pipx install aider-chat");
	ASSERT_STREQ(agent_info("command")->type, "command");
	ASSERT(agent_info("command")->program == NULL);
	LEAK_CHECK();
}

/* ---- the runner, with fake CLIs ---------------------------------------- */

/*
 * A fake CLI called name in tmp/bin, first on PATH: it records its
 * arguments (one per line) and environment, prints $FAKE_OUT to stdout
 * and "fake stderr" to stderr, sleeps $FAKE_SLEEP, exits $FAKE_RC.
 */
static void
fake_cli(const char *name)
{
	char *dir = xasprintf("%s/bin", test_tmpdir());
	char *path = xasprintf("%s/%s", dir, name);
	char *search = xasprintf("%s:/usr/bin:/bin", dir);
	struct err e = ERR_INIT;
	FILE *f;

	ASSERT_OK(fs_mkdir_p(dir, 0755, &e), &e);
	f = fopen(path, "w");
	ASSERT(f);
	fprintf(f, "#!/bin/sh\n"
		   "printf '%%s\\n' \"$@\" > \"$FAKE_DIR/args\"\n"
		   "env > \"$FAKE_DIR/env\"\n"
		   "pwd > \"$FAKE_DIR/pwd\"\n"
		   "[ -n \"$FAKE_OUT\" ] && cat \"$FAKE_OUT\"\n"
		   "echo 'fake stderr' >&2\n"
		   "[ -n \"$FAKE_ERR\" ] && printf '%%s\\n' \"$FAKE_ERR\" >&2\n"
		   "[ -n \"$FAKE_SLEEP\" ] && sleep \"$FAKE_SLEEP\"\n"
		   "exit ${FAKE_RC:-0}\n");
	fclose(f);
	ASSERT_EQ(chmod(path, 0755), 0);
	setenv("PATH", search, 1);
	free(dir);
	free(path);
	free(search);
}

/* Runs provider p on the usual request; the fake's files are in tmp. */
static int
run(const struct config_provider *p, struct agent_result *r, struct err *e)
{
	struct agent_request req;

	request_init(&req, p);
	req.out_path = tmp_path("out");
	req.err_path = tmp_path("err");
	req.home = tmp_path("home");
	unlink(req.out_path);
	unlink(req.err_path);
	return agent_run(&req, r, e);
}

static void
fake_env(struct config_provider *p, const char *fixture_name, int rc)
{
	strvec_pushf(&p->env, "FAKE_DIR=%s", test_tmpdir());
	if (fixture_name)
		strvec_pushf(&p->env, "FAKE_OUT=%s", fixture(fixture_name));
	strvec_pushf(&p->env, "FAKE_RC=%d", rc);
}

TEST(run_fake_claude_end_to_end)
{
	struct config_provider p;
	struct agent_result r = AGENT_RESULT_INIT;
	struct err e = ERR_INIT;
	struct buf args = BUF_INIT, env = BUF_INIT, out = BUF_INIT;
	char want[PATH_MAX];

	fake_cli("claude");
	provider_init(&p, "claude-code");
	p.isolated = 1;
	p.model = xstrdup("sonnet");
	fake_env(&p, "claude-stream-json.stdout", 0);
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.outcome, AGENT_OK);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "MOCK_DONE: wrote hello.txt");
	ASSERT_STREQ(r.session_id, "f73e3392-0df3-4099-bacf-222c95e47c6c");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.tokens_out, 40);
	ASSERT(r.cost_known && fabs(r.cost_usd - 0.0012) < 1e-9);
	ASSERT_STREQ(r.err_tail.ptr, "fake stderr\n");
	ASSERT(r.out_bytes > 1000);

	/* the raw stream is kept where the request said */
	ASSERT_OK(fs_read(tmp_path("out"), &out, 0, &e), &e);
	ASSERT_EQ(out.len, r.out_bytes);
	ASSERT_OK(fs_read(tmp_path("args"), &args, 0, &e), &e);
	ASSERT_STREQ(args.ptr, "-p\n--output-format\nstream-json\n--verbose\n"
			       "--dangerously-skip-permissions\n--model\n"
			       "sonnet\n--\n-do the thing\n");
	ASSERT_OK(fs_read(tmp_path("env"), &env, 0, &e), &e);
	snprintf(want, sizeof(want), "\nCLAUDE_CONFIG_DIR=%s\n",
		 tmp_path("home"));
	ASSERT_CONTAINS(env.ptr, want);
	ASSERT_CONTAINS(env.ptr,
			"\nCLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n");
	/* the child's $PWD is its cwd, not ours */
	snprintf(want, sizeof(want), "\nPWD=%s\n", test_tmpdir());
	ASSERT_CONTAINS(env.ptr, want);
	buf_release(&args);
	buf_release(&env);
	buf_release(&out);
	agent_result_release(&r);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(run_fake_claude_auth_failure_has_the_hint)
{
	struct config_provider p;
	struct agent_result r = AGENT_RESULT_INIT;
	struct err e = ERR_INIT;

	fake_cli("claude");
	provider_init(&p, "claude-code");
	fake_env(&p, "claude-error401.stdout", 1);
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.outcome, AGENT_EXIT);
	ASSERT_EQ(r.status, 1);
	ASSERT_EQ(r.failure, AGENT_FAIL_AUTH);
	ASSERT_EQ(r.http_status, 401);
	ASSERT_CONTAINS(r.message.ptr, "Failed to authenticate");
	ASSERT_CONTAINS(r.message.ptr,
			"set ANTHROPIC_API_KEY (providers.p1.api_key_env)");
	agent_result_release(&r);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(run_qwen_exit0_api_error_is_a_failure)
{
	struct config_provider p;
	struct agent_result r = AGENT_RESULT_INIT;
	struct err e = ERR_INIT;

	fake_cli("qwen");
	provider_init(&p, "qwen");
	fake_env(&p, "qwen-error500.stdout", 0);
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.outcome, AGENT_OK);
	ASSERT_EQ(r.failure, AGENT_FAIL_UNAVAILABLE);
	ASSERT_EQ(r.http_status, 500);
	agent_result_release(&r);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(run_no_result_is_bad_output)
{
	struct config_provider p;
	struct agent_result r = AGENT_RESULT_INIT;
	struct err e = ERR_INIT;

	fake_cli("codex");
	provider_init(&p, "codex");
	fake_env(&p, NULL, 0);
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.outcome, AGENT_OK);
	ASSERT_EQ(r.failure, AGENT_FAIL_BAD_OUTPUT);
	ASSERT_CONTAINS(r.message.ptr, "without a result");
	agent_result_release(&r);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(run_gemini_exit_codes)
{
	struct config_provider p;
	struct agent_result r = AGENT_RESULT_INIT;
	struct err e = ERR_INIT;

	/* no stream at all: the exit status alone says 401 */
	fake_cli("gemini");
	provider_init(&p, "gemini");
	fake_env(&p, NULL, 145);
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.outcome, AGENT_EXIT);
	ASSERT_EQ(r.http_status, 401);
	ASSERT_EQ(r.failure, AGENT_FAIL_AUTH);
	ASSERT_CONTAINS(r.message.ptr, "fake stderr");
	ASSERT_CONTAINS(r.message.ptr, "GEMINI_API_KEY");
	agent_result_release(&r);
	provider_release(&p);

	r = (struct agent_result)AGENT_RESULT_INIT;
	provider_init(&p, "gemini");
	fake_env(&p, NULL, 173);
	strvec_push(&p.env, "FAKE_ERR=Quota exceeded, retry in 90s");
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.http_status, 429);
	ASSERT_EQ(r.failure, AGENT_FAIL_QUOTA);
	ASSERT(r.reset_at_ms > time(NULL) * 1000LL + 80000);
	agent_result_release(&r);
	provider_release(&p);

	r = (struct agent_result)AGENT_RESULT_INIT;
	provider_init(&p, "gemini");
	fake_env(&p, NULL, 41);
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.failure, AGENT_FAIL_AUTH);
	agent_result_release(&r);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(run_pricing_when_the_agent_reports_no_cost)
{
	struct config_provider p;
	struct agent_result r = AGENT_RESULT_INIT;
	struct err e = ERR_INIT;

	fake_cli("codex");
	provider_init(&p, "codex");
	p.price_in = 3;
	p.price_out = 15;
	fake_env(&p, "codex-json.stdout", 0);
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT(r.cost_known);
	ASSERT(fabs(r.cost_usd - (200 * 3 + 40 * 15) / 1e6) < 1e-12);
	agent_result_release(&r);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(run_reads_only_its_own_output)
{
	struct config_provider p;
	struct agent_request req;
	struct agent_result r = AGENT_RESULT_INIT;
	struct err e = ERR_INIT;

	fake_cli("codex");
	provider_init(&p, "codex");
	fake_env(&p, "codex-json.stdout", 0);
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.tokens_in, 200);
	agent_result_release(&r);
	strvec_clear(&p.env);
	fake_env(&p, "codex-apply-patch.stdout", 0);

	/* the same out_path again: spawn appends to it */
	r = (struct agent_result)AGENT_RESULT_INIT;
	request_init(&req, &p);
	req.out_path = tmp_path("out");
	req.err_path = tmp_path("err");
	ASSERT_OK(agent_run(&req, &r, &e), &e);
	ASSERT_STREQ(r.session_id, "01a20026-21fa-7a52-87f8-fdccf76221cc");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.steps, 1);
	ASSERT(fs_size(req.out_path) > (long long)r.out_bytes);
	agent_result_release(&r);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(run_timeout)
{
	struct config_provider p;
	struct agent_result r = AGENT_RESULT_INIT;
	struct err e = ERR_INIT;

	fake_cli("opencode");
	provider_init(&p, "opencode");
	p.timeout_seconds = 1;
	fake_env(&p, NULL, 0);
	strvec_push(&p.env, "FAKE_SLEEP=30");
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.outcome, AGENT_TIMEOUT);
	ASSERT_EQ(r.failure, AGENT_FAIL_TIMEOUT);
	ASSERT_STREQ(r.message.ptr, "timed out");
	ASSERT(r.duration_ms < 10000);
	agent_result_release(&r);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(run_missing_program)
{
	struct config_provider p;
	struct agent_result r = AGENT_RESULT_INIT;
	struct err e = ERR_INIT;

	setenv("PATH", test_tmpdir(), 1);
	provider_init(&p, "codex");
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.outcome, AGENT_EXIT);
	ASSERT_EQ(r.status, 127);
	ASSERT_EQ(r.failure, AGENT_FAIL_MISSING);
	ASSERT_STREQ(r.message.ptr,
		     "provider 'p1' (codex): 'codex' is not installed or not "
		     "on PATH; install it with `npm install -g @openai/codex` "
		     "or set providers.p1.command");
	ASSERT(!fs_exists(tmp_path("out")));
	agent_result_release(&r);

	/* an explicit command that does not exist */
	r = (struct agent_result)AGENT_RESULT_INIT;
	strvec_push(&p.command, "/nonexistent/codex");
	ASSERT_OK(run(&p, &r, &e), &e);
	ASSERT_EQ(r.failure, AGENT_FAIL_MISSING);
	ASSERT_CONTAINS(r.message.ptr, "'/nonexistent/codex' is not installed");
	agent_result_release(&r);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(which)
{
	char *w;

	fake_cli("claude");
	w = agent_which("claude");
	ASSERT(w);
	ASSERT_CONTAINS(w, "/bin/claude");
	ASSERT_EQ(w[0], '/');
	free(w);
	w = agent_which("sh");
	ASSERT(w);
	free(w);
	ASSERT(agent_which("no-such-program-here") == NULL);
	ASSERT(agent_which("") == NULL);
	ASSERT(agent_which("/nonexistent/x") == NULL);
	w = agent_which("/bin/sh");
	ASSERT_STREQ(w, "/bin/sh");
	free(w);
	w = agent_which("./relative/tool");
	ASSERT_STREQ(w, "./relative/tool");
	free(w);
	LEAK_CHECK();
}

/* ---- the presets added for issue 22 ------------------------------------- */

TEST(parse_pi)
{
	struct agent_result r = AGENT_RESULT_INIT;
	static const char err[] =
	    "{\"type\":\"session\",\"id\":\"s-1\"}\n"
	    "{\"type\":\"message_end\",\"message\":{\"role\":"
	    "\"assistant\",\"content\":[],\"stopReason\":\"error\","
	    "\"errorMessage\":\"Connection error.\"}}\n"
	    "{\"type\":\"auto_retry_start\",\"errorMessage\":\"x\"}\n"
	    "{\"type\":\"message_end\",\"message\":{\"role\":"
	    "\"assistant\",\"content\":[],\"stopReason\":\"error\","
	    "\"errorMessage\":\"401 Incorrect API key provided\"}}\n"
	    "{\"type\":\"agent_end\",\"messages\":[]}\n";
	static const char retried[] =
	    "{\"type\":\"message_end\",\"message\":{\"role\":"
	    "\"assistant\",\"content\":[],\"stopReason\":\"error\","
	    "\"errorMessage\":\"500 boom\"}}\n"
	    "{\"type\":\"message_end\",\"message\":{\"role\":"
	    "\"assistant\",\"content\":[{\"type\":\"text\",\"text\":"
	    "\"fine\"}],\"stopReason\":\"stop\"}}\n"
	    "{\"type\":\"agent_end\"}\n";

	parse_fixture("pi", "pi-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "Wrote hello.txt.");
	ASSERT_STREQ(r.session_id, "01a21c32-fef6-7567-9a4f-f034a6a4679c");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.tokens_out, 40);
	ASSERT_EQ(r.steps, 2);
	ASSERT(r.cost_known);
	agent_result_release(&r);

	/* pi exits 0 after a failed model call: the stream says it failed */
	r = (struct agent_result)AGENT_RESULT_INIT;
	agent_parse_stream("pi", err, sizeof(err) - 1, &r);
	r.outcome = AGENT_OK;
	agent_classify(&r);
	ASSERT_EQ(r.http_status, 401);
	ASSERT_EQ(r.failure, AGENT_FAIL_AUTH);
	ASSERT_STREQ(r.message.ptr, "401 Incorrect API key provided");
	ASSERT_STREQ(r.session_id, "s-1");
	agent_result_release(&r);

	/* a retry that worked: the last message decides */
	r = (struct agent_result)AGENT_RESULT_INIT;
	agent_parse_stream("pi", retried, sizeof(retried) - 1, &r);
	r.outcome = AGENT_OK;
	agent_classify(&r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_EQ(r.http_status, 0);
	ASSERT_STREQ(r.text.ptr, "fine");
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_copilot)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("copilot", "copilot-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "Wrote hello.txt.");
	ASSERT_STREQ(r.session_id, "7cbe6eab-ed0b-459a-ad4d-5c06c9257f97");
	ASSERT_EQ(r.steps, 2);
	ASSERT_EQ(r.tokens_in, 0); /* it reports none */
	agent_result_release(&r);

	r = (struct agent_result)AGENT_RESULT_INIT;
	parse_fixture("copilot", "copilot-error401", &r);
	ASSERT_EQ(r.http_status, 401);
	ASSERT_EQ(r.failure, AGENT_FAIL_AUTH);
	ASSERT_CONTAINS(r.message.ptr, "Authentication failed with provider");
	ASSERT(!strchr(r.message.ptr, '\n'));
	ASSERT_STREQ(r.session_id, "0006a724-5fa3-4f43-815f-4d1a1f014585");
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_cline)
{
	struct agent_result r = AGENT_RESULT_INIT;

	parse_fixture("cline", "cline-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "Wrote hello.txt.");
	ASSERT_STREQ(r.session_id, "conv_1795769794724_4ha3i5w");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.tokens_out, 40);
	ASSERT_EQ(r.steps, 2);
	ASSERT(r.cost_known);
	agent_result_release(&r);

	/* its errorClass "auth" names the class the text does not */
	r = (struct agent_result)AGENT_RESULT_INIT;
	parse_fixture("cline", "cline-error401", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_AUTH);
	ASSERT_STREQ(r.message.ptr, "Incorrect API key provided");
	ASSERT_EQ(r.text.len, 0);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(parse_continue_and_kilo)
{
	struct agent_result r = AGENT_RESULT_INIT;
	static const char raw[] = "{\"plan\":[1,2]}\n";

	parse_fixture("continue", "continue-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "Wrote hello.txt.");
	agent_result_release(&r);

	/* an answer that is JSON itself is printed as it is */
	r = (struct agent_result)AGENT_RESULT_INIT;
	agent_parse_stream("continue", raw, sizeof(raw) - 1, &r);
	ASSERT_STREQ(r.text.ptr, "{\"plan\":[1,2]}");
	agent_result_release(&r);

	/* kilo is opencode's stream */
	r = (struct agent_result)AGENT_RESULT_INIT;
	parse_fixture("kilo", "kilo-json", &r);
	ASSERT_EQ(r.failure, AGENT_FAIL_NONE);
	ASSERT_STREQ(r.text.ptr, "Wrote hello.txt.");
	ASSERT_STREQ(r.session_id, "ses_de3ccd770ffeZEIAsGT0qJAa5j");
	ASSERT_EQ(r.tokens_in, 200);
	ASSERT_EQ(r.tokens_out, 40);
	agent_result_release(&r);
	LEAK_CHECK();
}

TEST(build_copilot)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	const char *home = tmp_path("copilot-home");
	char want[PATH_MAX];

	setenv("T_KEY", "c-key", 1);
	provider_init(&p, "copilot");
	p.model = xstrdup("mock-model");
	p.base_url = xstrdup("http://127.0.0.1:9/v1");
	p.api_key_env = xstrdup("T_KEY");
	p.isolated = 1;
	request_init(&req, &p);
	req.home = home;
	ASSERT_OK(cli__build(&req, "copilot", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv),
		     "copilot | --output-format | json | --allow-all-tools | "
		     "--no-ask-user | --no-auto-update | "
		     "--disable-client-telemetry | --model | mock-model | "
		     "--prompt=-do the thing");
	ASSERT(find(&env, "COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:9/v1") >=
	       0);
	ASSERT(find(&env, "COPILOT_PROVIDER_API_KEY=c-key") >= 0);
	ASSERT(find(&env, "COPILOT_OFFLINE=true") >= 0);
	snprintf(want, sizeof(want), "COPILOT_HOME=%s", home);
	ASSERT(find(&env, want) >= 0);
	strvec_clear(&argv);
	strvec_clear(&env);

	/* no base_url: the key is a GitHub token, and it stays online */
	FREE_AND_NULL(p.base_url);
	p.isolated = 0;
	ASSERT_OK(cli__build(&req, "copilot", &argv, &env, &e), &e);
	ASSERT(find(&env, "COPILOT_GITHUB_TOKEN=c-key") >= 0);
	ASSERT(!strstr(joined(&env), "COPILOT_OFFLINE"));
	ASSERT(!strstr(joined(&env), "COPILOT_HOME"));
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_pi)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	const char *home = tmp_path("pi-home");
	char want[PATH_MAX];
	json_t *j, *baton;

	provider_init(&p, "pi");
	p.model = xstrdup("mock-model");
	p.base_url = xstrdup("http://127.0.0.1:9/v1");
	p.api_key_env = xstrdup("T_KEY");
	p.max_retries = 0;
	p.isolated = 1;
	request_init(&req, &p);
	req.home = home;
	ASSERT_OK(cli__build(&req, "pi", &argv, &env, &e), &e);
	/* no "--" (pi refuses it): a prompt starting with '-' gets a newline */
	ASSERT_STREQ(joined(&argv), "pi | -p | --mode | json | --provider | "
				    "baton | --model | mock-model | "
				    "\n-do the thing");
	ASSERT(find(&env, "PI_OFFLINE=1") >= 0);
	snprintf(want, sizeof(want), "PI_CODING_AGENT_DIR=%s/agent", home);
	ASSERT(find(&env, want) >= 0);
	snprintf(want, sizeof(want), "%s/agent/models.json", home);
	ASSERT_EQ(file_mode(want), 0600);
	j = load_json(want);
	baton = json_object_get(json_object_get(j, "providers"), "baton");
	ASSERT_STREQ(json_string_value(json_object_get(baton, "baseUrl")),
		     "http://127.0.0.1:9/v1");
	ASSERT_STREQ(json_string_value(json_object_get(baton, "api")),
		     "openai-completions");
	/* the variable's name: pi reads the key itself, it is in no file */
	ASSERT_STREQ(json_string_value(json_object_get(baton, "apiKey")),
		     "T_KEY");
	ASSERT_STREQ(
	    json_string_value(json_object_get(
		json_array_get(json_object_get(baton, "models"), 0), "id")),
	    "mock-model");
	json_decref(j);
	snprintf(want, sizeof(want), "%s/agent/settings.json", home);
	j = load_json(want);
	ASSERT(json_is_false(
	    json_object_get(json_object_get(j, "retry"), "enabled")));
	json_decref(j);
	strvec_clear(&argv);
	strvec_clear(&env);

	/* '@' would include a file; a plain prompt goes as it is */
	req.prompt = "@/etc/passwd";
	ASSERT_OK(cli__build(&req, "pi", &argv, &env, &e), &e);
	ASSERT_STREQ(argv.v[argv.nr - 1], "\n@/etc/passwd");
	strvec_clear(&argv);
	strvec_clear(&env);
	req.prompt = "You are the implementer";
	ASSERT_OK(cli__build(&req, "pi", &argv, &env, &e), &e);
	ASSERT_STREQ(argv.v[argv.nr - 1], "You are the implementer");
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_cline_continue_kilo)
{
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	const char *home = tmp_path("more-home");
	char want[PATH_MAX];
	json_t *j, *set, *m;

	setenv("T_KEY", "k-key", 1);
	provider_init(&p, "cline");
	p.model = xstrdup("mock-model");
	p.base_url = xstrdup("http://127.0.0.1:9/v1");
	p.api_key_env = xstrdup("T_KEY");
	p.isolated = 1;
	request_init(&req, &p);
	req.home = home;
	ASSERT_OK(cli__build(&req, "cline", &argv, &env, &e), &e);
	snprintf(want, sizeof(want),
		 "cline | --json | --auto-approve | true | --config | "
		 "%s/config | --data-dir | %s/data | -m | mock-model | -- | "
		 "-do the thing",
		 home, home);
	ASSERT_STREQ(joined(&argv), want);
	snprintf(want, sizeof(want), "%s/data/settings/providers.json", home);
	ASSERT_EQ(file_mode(want), 0600);
	j = load_json(want);
	ASSERT_STREQ(json_string_value(json_object_get(j, "lastUsedProvider")),
		     "openai-compatible");
	set = json_object_get(json_object_get(json_object_get(j, "providers"),
					      "openai-compatible"),
			      "settings");
	ASSERT_STREQ(json_string_value(json_object_get(set, "baseUrl")),
		     "http://127.0.0.1:9/v1");
	ASSERT_STREQ(json_string_value(json_object_get(set, "apiKey")),
		     "k-key");
	ASSERT_STREQ(json_string_value(json_object_get(set, "model")),
		     "mock-model");
	json_decref(j);
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);

	provider_init(&p, "continue");
	p.model = xstrdup("mock-model");
	p.base_url = xstrdup("http://127.0.0.1:9/v1");
	p.api_key_env = xstrdup("T_KEY");
	p.isolated = 1;
	request_init(&req, &p);
	req.home = home;
	ASSERT_OK(cli__build(&req, "cn", &argv, &env, &e), &e);
	snprintf(want, sizeof(want),
		 "cn | -p | --format | json | --auto | --config | "
		 "%s/continue.yaml | -- | -do the thing",
		 home);
	ASSERT_STREQ(joined(&argv), want);
	ASSERT(find(&env, "CONTINUE_CLI_ENABLE_TELEMETRY=0") >= 0);
	snprintf(want, sizeof(want), "CONTINUE_GLOBAL_DIR=%s/continue", home);
	ASSERT(find(&env, want) >= 0);
	snprintf(want, sizeof(want), "%s/continue.yaml", home);
	ASSERT_EQ(file_mode(want), 0600);
	j = load_json(want); /* JSON is YAML too */
	m = json_array_get(json_object_get(j, "models"), 0);
	ASSERT_STREQ(json_string_value(json_object_get(m, "apiBase")),
		     "http://127.0.0.1:9/v1");
	ASSERT_STREQ(json_string_value(json_object_get(m, "apiKey")),
		     "${{ secrets.T_KEY }}");
	ASSERT_STREQ(json_string_value(json_object_get(m, "model")),
		     "mock-model");
	json_decref(j);
	strvec_clear(&argv);
	strvec_clear(&env);
	/* no base_url: the model is a hub slug */
	FREE_AND_NULL(p.base_url);
	p.isolated = 0;
	ASSERT_OK(cli__build(&req, "cn", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv), "cn | -p | --format | json | --auto | "
				    "--model | mock-model | -- | "
				    "-do the thing");
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);

	provider_init(&p, "kilo");
	p.model = xstrdup("mock-model");
	p.base_url = xstrdup("http://127.0.0.1:9/v1");
	p.api_key_env = xstrdup("T_KEY");
	p.isolated = 1;
	request_init(&req, &p);
	req.home = home;
	ASSERT_OK(cli__build(&req, "kilo", &argv, &env, &e), &e);
	ASSERT_STREQ(joined(&argv), "kilo | run | --format | json | --model | "
				    "baton/mock-model | -- | -do the thing");
	ASSERT(find(&env, "KILO_DISABLE_AUTOUPDATE=1") >= 0);
	ASSERT(!strstr(joined(&env), "OPENCODE_"));
	snprintf(want, sizeof(want), "KILO_CONFIG=%s/kilo.json", home);
	ASSERT(find(&env, want) >= 0);
	snprintf(want, sizeof(want), "%s/kilo.json", home);
	j = load_json(want);
	ASSERT_STREQ(
	    json_string_value(json_object_get(
		json_object_get(
		    json_object_get(json_object_get(j, "provider"), "baton"),
		    "options"),
		"apiKey")),
	    "{env:T_KEY}");
	json_decref(j);
	strvec_clear(&argv);
	strvec_clear(&env);
	provider_release(&p);
	LEAK_CHECK();
}

TEST(build_refuses_a_base_url_for_vendor_only_clis)
{
	static const char *const types[] = { "amp", "auggie", "crush" };
	struct config_provider p;
	struct agent_request req;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct err e = ERR_INIT;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(types); i++) {
		provider_init(&p, types[i]);
		p.base_url = xstrdup("http://127.0.0.1:9/v1");
		request_init(&req, &p);
		req.home = tmp_path("vendor-home");
		ASSERT_EQ(cli__build(&req, types[i], &argv, &env, &e),
			  BATON_EINVAL);
		ASSERT_CONTAINS(e.msg, "base_url is not supported");
		ASSERT_CONTAINS(e.msg, types[i]);
		strvec_clear(&argv);
		strvec_clear(&env);
		provider_release(&p);
	}
	LEAK_CHECK();
}

TEST(new_infos)
{
	static const char *const want[][3] = {
		{ "copilot", "copilot", "npm install -g @github/copilot" },
		{ "pi", "pi", "npm install -g @mariozechner/pi-coding-agent" },
		{ "kilo", "kilo", "npm install -g @kilocode/cli" },
		{ "cline", "cline", "npm install -g cline" },
		{ "continue", "cn", "npm install -g @continuedev/cli" },
		{ "amp", "amp", "npm install -g @sourcegraph/amp" },
		{ "auggie", "auggie", "npm install -g @augmentcode/auggie" },
		{ "crush", "crush", "npm install -g @charmland/crush" },
	};
	const struct agent_info *i;
	size_t k;

	for (k = 0; k < ARRAY_SIZE(want); k++) {
		i = agent_info(want[k][0]);
		ASSERT(i && i->is_cli && i->auth_hint);
		ASSERT_STREQ(i->program, want[k][1]);
		ASSERT_STREQ(i->install_hint, want[k][2]);
	}
	LEAK_CHECK();
}

TEST(versions)
{
	char v[16];

	ASSERT_STREQ(agent_tested_version("claude-code"), "2.1.197");
	ASSERT_STREQ(agent_tested_version("continue"), "1.5.47");
	ASSERT(agent_tested_version("aider") == NULL);
	ASSERT(agent_tested_version("amp") == NULL);
	ASSERT(agent_tested_version(NULL) == NULL);

	ASSERT_EQ(agent_version_in("codex-cli 0.169.0", v, sizeof(v)), 0);
	ASSERT_STREQ(v, "0.169.0");
	ASSERT_EQ(agent_version_in("GitHub Copilot CLI 1.0.102.", v, sizeof(v)),
		  0);
	ASSERT_STREQ(v, "1.0.102");
	ASSERT_EQ(agent_version_in("2.1.197 (Claude Code)", v, sizeof(v)), 0);
	ASSERT_STREQ(v, "2.1.197");
	/* a word with digits is no version; a bare number neither */
	ASSERT_EQ(agent_version_in("x86_64 build 7 v3 at 1.2", v, sizeof(v)),
		  0);
	ASSERT_STREQ(v, "1.2");
	ASSERT_EQ(agent_version_in("nightly 42", v, sizeof(v)), -1);
	ASSERT_STREQ(v, "");
	ASSERT_EQ(agent_version_in("1.2345678901234567890", v, sizeof(v)), 0);
	ASSERT_EQ(strlen(v), sizeof(v) - 1);

	ASSERT(agent_version_cmp("1.0.102", "1.0.102") == 0);
	ASSERT(agent_version_cmp("1.0.103", "1.0.102") > 0);
	ASSERT(agent_version_cmp("1.0.99", "1.0.102") < 0);
	ASSERT(agent_version_cmp("2", "1.99.99") > 0);
	ASSERT(agent_version_cmp("1.2", "1.2.0") == 0);
	ASSERT(agent_version_cmp("1.2.1", "1.2") > 0);
	ASSERT(agent_version_cmp("1.2.0-beta", "1.2.0") == 0);
	ASSERT(agent_version_cmp("0.0.1790142911", "0.0.1790142910") > 0);
	ASSERT(agent_version_cmp("", "") == 0);
	LEAK_CHECK();
}
