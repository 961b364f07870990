/*
 * ACP, the Agent Client Protocol, as a provider (type: acp): baton is
 * the client of an agent that speaks JSON-RPC 2.0, one JSON object per
 * line, over its stdin and stdout (gemini --acp, qwen --acp,
 * claude-code-acp, codex-acp). A stage is one session of one prompt
 * turn in the run's worktree:
 *
 *   baton (client)                                agent (command, args)
 *   initialize {protocolVersion 1, fs, terminal} ──▶
 *                    ◀── {protocolVersion, agentCapabilities.loadSession}
 *   session/load {sessionId}    (req->resume_session, when offered) or
 *   session/new {cwd: worktree, mcpServers: []} ──▶
 *                                      ◀── {sessionId, models?}
 *   session/set_model {modelId}  (providers.NAME.model) ──▶  ◀── {}
 *   session/prompt {prompt} ──▶
 *        ◀── session/update: message and thought chunks, tool calls and
 *            their updates, the plan, usage
 *        ◀── session/request_permission ──▶ the allow or reject option,
 *            from baton's policy (agent.h: policy, allowed_paths)
 *        ◀── fs/read_text_file, fs/write_text_file, terminal methods ──▶
 *            answered here, confined to the worktree as baton's own
 *            agent tools are (tools_resolve)
 *                                   ◀── {stopReason, usage?}
 *   stdin closed: the agent exits, or its group is killed after
 *   ACP_EXIT_MS
 *
 *   abort or signal (on_event says stop): session/cancel ──▶, up to
 *   ACP_CANCEL_MS for {stopReason: cancelled}, then the group is killed
 *
 * The call's out_path is its transcript: every JSON-RPC line both ways,
 * as sent and received, and between them baton's own notes, lines that
 * are not JSON ("[denied] ...", "[cancel] ..."). agent_watch reads it
 * with acp__view_feed, which turns it into readable text.
 *
 * A terminal runs to its end inside terminal/create (through spawn and
 * the sandbox, with the time the call has left), so terminal/output and
 * terminal/wait_for_exit answer at once and terminal/kill has nothing
 * left to kill; an abort that comes meanwhile stops the command first.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "agent/tools.h"
#include "core/config.h"
#include "core/policy.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/version.h"
#include "util/xalloc.h"

#define ACP_PROTOCOL_VERSION 1
/* The spawn loop's tick: the cancel and exit waits are checked on it. */
#define ACP_TICK_MS 200
/* After session/cancel: how long the turn may take to end. */
#define ACP_CANCEL_MS 3000
/* After the turn, stdin closed: how long the agent may take to exit. */
#define ACP_EXIT_MS 2000
/* Between TERM and KILL of the agent's group. */
#define ACP_KILL_GRACE_MS 3000
/* Terminals alive at once (not yet released). */
#define ACP_TERMS_MAX 32
/* A terminal's output kept when the agent names no limit. */
#define ACP_TERM_OUTPUT (1024 * 1024)
/* The final text kept (its head). */
#define ACP_TEXT_MAX BUF_MAX_ARTIFACT
/* r->message: one line. */
#define ACP_MESSAGE_MAX 1024
/* Tool titles the view remembers for their updates. */
#define ACP_VIEW_TITLES 256

/* JSON-RPC error codes (ACP's schema). */
#define RPC_INVALID_PARAMS   -32602
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INTERNAL	     -32603
#define RPC_AUTH_REQUIRED    -32000
#define RPC_NOT_FOUND	     -32002

/* Where the session is: what the awaited answer moves it to. */
enum acp_phase {
	ACP_INIT,   /* initialize sent */
	ACP_LOAD,   /* session/load sent */
	ACP_NEW,    /* session/new sent */
	ACP_MODEL,  /* session/set_model sent */
	ACP_PROMPT, /* session/prompt sent: the turn */
	ACP_DONE,   /* the turn ended (or failed): stdin closed */
};

/* One terminal, run to its end by terminal/create. */
struct acp_term {
	char id[24];
	struct buf out; /* the output, its last `limit` bytes */
	int truncated;
	int status; /* exit code, or -1 when killed by signal */
	int signal;
};

struct acp {
	const struct agent_request *req;
	struct agent_result *r;
	struct spawn_talk talk;
	struct tools_ctx tc; /* the worktree (realpath'd), for paths */
	struct sandbox sb;   /* the agent's, also its terminals' */
	struct strvec env;   /* the agent's additions, also its terminals' */
	int log;	     /* the transcript (req->out_path), or -1 */
	struct buf line;     /* a line of stdout not yet ended */
	int skipping;	     /* that line is too long: dropped */
	json_int_t next_id, wait_id;
	enum acp_phase phase;
	int can_load; /* agentCapabilities.loadSession */
	char session[128];
	struct buf turn; /* the agent's text since its last tool call */
	struct buf last; /* the last non-empty such text */
	int answered;	 /* session/prompt answered */
	int64_t meta_in, meta_out; /* usage the agent put in _meta */
	int meta_seen;
	int64_t deadline;  /* the provider's timeout, time_mono_ms */
	int64_t next_tick; /* when req->on_event gets the next tick */
	int asked_stop;	   /* the engine asked to stop (abort, signal) */
	int cancel_sent;
	int64_t cancel_until;
	int64_t exit_until; /* the turn is over: kill after this */
	int stop_now;	    /* the callbacks say stop */
	struct acp_term terms[ACP_TERMS_MAX];
	int nterms_made;
};

/* ---- the transcript ---------------------------------------------------- */

static void
log_bytes(struct acp *a, const char *p, size_t n)
{
	if (a->log < 0)
		return;
	if (fs_write_all(a->log, p, n) < 0) {
		close(a->log);
		a->log = -1;
	}
}

/* A note of baton's own, one line, into the transcript. */
static void __attribute__((format(printf, 2, 3)))
note(struct acp *a, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	for (i = 0; i < b.len; i++)
		if (b.ptr[i] == '\n' || b.ptr[i] == '\r')
			b.ptr[i] = ' ';
	buf_addch(&b, '\n');
	log_bytes(a, b.ptr, b.len);
	buf_release(&b);
}

/* r->message = a one-line account (the first one set stays). */
static void __attribute__((format(printf, 2, 3)))
fail(struct acp *a, const char *fmt, ...)
{
	struct agent_result *r = a->r;
	va_list ap;
	size_t i;

	if (r->message.len)
		return;
	va_start(ap, fmt);
	buf_vaddf(&r->message, fmt, ap);
	va_end(ap);
	if (r->message.len > ACP_MESSAGE_MAX)
		buf_setlen(&r->message, ACP_MESSAGE_MAX);
	for (i = 0; i < r->message.len; i++)
		if ((unsigned char)r->message.ptr[i] < 0x20)
			r->message.ptr[i] = ' ';
}

/* ---- sending ------------------------------------------------------------ */

/* Queues msg (consumed) for the agent's stdin and the transcript. */
static void
send_msg(struct acp *a, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	size_t at = a->talk.in.len;

	json_decref(msg);
	if (!s)
		BUG("cannot serialize a JSON-RPC message");
	buf_adds(&a->talk.in, s);
	buf_addch(&a->talk.in, '\n');
	log_bytes(a, a->talk.in.ptr + at, a->talk.in.len - at);
	free(s);
}

/* A request whose answer moves the session to phase. */
static void
request(struct acp *a, const char *method, json_t *params, enum acp_phase phase)
{
	a->wait_id = ++a->next_id;
	a->phase = phase;
	send_msg(a, json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id",
			      (json_int_t)a->wait_id, "method", method,
			      "params", params));
}

static void
respond(struct acp *a, json_t *id, json_t *result)
{
	send_msg(a, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
			      "result", result ? result : json_null()));
}

static void __attribute__((format(printf, 4, 5)))
respond_error(struct acp *a, json_t *id, int code, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	send_msg(a, json_pack("{s:s, s:O, s:{s:i, s:o}}", "jsonrpc", "2.0",
			      "id", id, "error", "code", code, "message",
			      json_lossy(b.ptr, b.len)));
	buf_release(&b);
}

/* The turn is over (or cannot start): close stdin, let the agent go. */
static void
end_session(struct acp *a)
{
	a->phase = ACP_DONE;
	a->talk.close_in = 1;
	a->exit_until = time_mono_ms() + ACP_EXIT_MS;
	/* a cancelled turn has ended: nothing more to wait for */
	if (a->asked_stop)
		a->stop_now = 1;
}

/*
 * The engine asked to stop: cancel the turn when one is under way and
 * wait for it to end; otherwise stop at once. Returns nonzero to stop
 * the agent now.
 */
static int
begin_stop(struct acp *a)
{
	a->asked_stop = 1;
	if (a->cancel_sent)
		return 0;
	if (a->phase != ACP_PROMPT || !a->session[0])
		return a->stop_now = 1;
	a->cancel_sent = 1;
	a->cancel_until = time_mono_ms() + ACP_CANCEL_MS;
	note(a,
	     "[cancel] the run is stopping: session/cancel sent, the "
	     "agent has %d ms to end its turn",
	     ACP_CANCEL_MS);
	send_msg(a, json_pack("{s:s, s:s, s:{s:s}}", "jsonrpc", "2.0", "method",
			      "session/cancel", "params", "sessionId",
			      a->session));
	return 0;
}

/* ---- the session ------------------------------------------------------- */

static void
send_prompt(struct acp *a)
{
	const char *text = a->req->prompt ? a->req->prompt : "";

	buf_reset(&a->turn);
	buf_reset(&a->last);
	request(a, "session/prompt",
		json_pack("{s:s, s:[{s:s, s:o}]}", "sessionId", a->session,
			  "prompt", "type", "text", "text",
			  json_lossy_str(text)),
		ACP_PROMPT);
}

static void
new_session(struct acp *a)
{
	request(a, "session/new",
		json_pack("{s:s, s:[]}", "cwd", a->tc.cwd, "mcpServers"),
		ACP_NEW);
}

static void
start_session(struct acp *a)
{
	const char *id = a->req->resume_session;

	if (id && *id && a->can_load) {
		snprintf(a->session, sizeof(a->session), "%s", id);
		request(a, "session/load",
			json_pack("{s:s, s:s, s:[]}", "sessionId", id, "cwd",
				  a->tc.cwd, "mcpServers"),
			ACP_LOAD);
		return;
	}
	if (id && *id)
		note(a,
		     "[session] the agent cannot load session %s "
		     "(no loadSession): a new one starts",
		     id);
	new_session(a);
}

/*
 * providers.NAME.model against the models session/new offered: the
 * modelId itself or the id of the model of that name. Sends
 * session/set_model unless it is the current one. Returns 0 when the
 * prompt may go at once, 1 when session/set_model was sent, -1 when the
 * agent offers no choice of model (a failure, in r->message).
 */
static int
pick_model(struct acp *a, const json_t *res)
{
	const char *want = a->req->provider->model, *id = NULL, *mid, *name;
	const json_t *models = json_object_get(res, "models"), *m;
	size_t i;

	if (!want)
		return 0;
	if (!json_is_object(models)) {
		fail(a,
		     "provider '%s' (acp): model '%s' is set, but the agent "
		     "offers no choice of model over ACP; drop "
		     "providers.%s.model or give the agent its own flag in "
		     "args",
		     a->req->provider->name, want, a->req->provider->name);
		return -1;
	}
	json_array_foreach(json_object_get(models, "availableModels"), i, m)
	{
		mid = json_get_str(m, "modelId");
		name = json_get_str(m, "name");
		if (mid && !strcmp(mid, want)) {
			id = mid;
			break;
		}
		if (!id && mid && name && !strcmp(name, want))
			id = mid;
	}
	if (!id)
		id = want;
	mid = json_get_str(models, "currentModelId");
	if (mid && !strcmp(mid, id))
		return 0;
	request(a, "session/set_model",
		json_pack("{s:s, s:s}", "sessionId", a->session, "modelId", id),
		ACP_MODEL);
	return 1;
}

/* An integer member, or -1 when absent or not a number. */
static int64_t
jint(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_real(v) && json_real_value(v) >= 0 &&
	    json_real_value(v) < 9e18)
		return (int64_t)json_real_value(v);
	return -1;
}

/*
 * Usage the agent reported: ACP's usage {inputTokens, outputTokens} in
 * the prompt's answer, which wins; Gemini CLI's
 * _meta.quota.token_count {input_tokens, output_tokens} there; Qwen
 * Code's _meta.usage {inputTokens, outputTokens} on each model call's
 * last message chunk, summed over the turn.
 */
static void
prompt_usage(struct acp *a, const json_t *res)
{
	const json_t *u = json_object_get(res, "usage");
	const json_t *q = json_object_get(
	    json_object_get(json_object_get(res, "_meta"), "quota"),
	    "token_count");

	if (json_is_object(u) && jint(u, "inputTokens") >= 0) {
		a->r->tokens_in = jint(u, "inputTokens");
		a->r->tokens_out =
		    jint(u, "outputTokens") > 0 ? jint(u, "outputTokens") : 0;
	} else if (json_is_object(q) && jint(q, "input_tokens") >= 0) {
		a->r->tokens_in = jint(q, "input_tokens");
		a->r->tokens_out =
		    jint(q, "output_tokens") > 0 ? jint(q, "output_tokens") : 0;
	} else if (a->meta_seen) {
		a->r->tokens_in = a->meta_in;
		a->r->tokens_out = a->meta_out;
	}
}

static void
prompt_answered(struct acp *a, const json_t *res)
{
	const char *why = json_get_str(res, "stopReason");

	a->answered = 1;
	prompt_usage(a, res);
	if (!why || !strcmp(why, "end_turn")) {
		/* done */
	} else if (!strcmp(why, "max_tokens") ||
		   !strcmp(why, "max_turn_requests")) {
		a->r->failure = AGENT_FAIL_LIMIT;
		fail(a, "the agent stopped its turn: %s", why);
	} else if (!strcmp(why, "cancelled")) {
		if (!a->asked_stop)
			fail(a, "the agent cancelled its turn by itself");
	} else {
		fail(a, "the agent ended its turn with stopReason '%s'", why);
	}
	end_session(a);
}

/* An error answer to one of our requests: the session cannot go on. */
static void
request_failed(struct acp *a, const char *method, const json_t *error)
{
	const char *msg = json_get_str(error, "message");
	json_int_t code = jint(error, "code");
	char *data = NULL;

	if (json_object_get(error, "data"))
		data = json_dumps(json_object_get(error, "data"),
				  JSON_COMPACT | JSON_ENCODE_ANY);
	if (code == RPC_AUTH_REQUIRED)
		a->r->failure = AGENT_FAIL_AUTH;
	fail(a, "the agent refused %s: %s%s%s%s", method,
	     msg ? msg : "an error",
	     code == RPC_AUTH_REQUIRED ? " (authentication required)" : "",
	     data ? ": " : "", data ? data : "");
	free(data);
	end_session(a);
}

static const char *const phase_methods[] = {
	[ACP_INIT] = "initialize",	 [ACP_LOAD] = "session/load",
	[ACP_NEW] = "session/new",	 [ACP_MODEL] = "session/set_model",
	[ACP_PROMPT] = "session/prompt", [ACP_DONE] = "nothing",
};

/* An answer from the agent: moves the session on. */
static void
on_response(struct acp *a, const json_t *msg)
{
	const json_t *res = json_object_get(msg, "result");
	const json_t *error = json_object_get(msg, "error");
	const char *sid;
	json_int_t v;
	int rc;

	if (!json_is_integer(json_object_get(msg, "id")) ||
	    json_integer_value(json_object_get(msg, "id")) != a->wait_id ||
	    a->phase == ACP_DONE)
		return; /* an answer to nothing we wait for */
	if (error && a->phase == ACP_LOAD) {
		note(a, "[session] session/load failed: a new session starts");
		a->session[0] = '\0';
		new_session(a);
		return;
	}
	if (error) {
		request_failed(a, phase_methods[a->phase], error);
		return;
	}
	switch (a->phase) {
	case ACP_INIT:
		v = jint(res, "protocolVersion");
		if (v != ACP_PROTOCOL_VERSION) {
			fail(a,
			     "the agent speaks ACP version %lld; baton speaks "
			     "version %d",
			     (long long)v, ACP_PROTOCOL_VERSION);
			end_session(a);
			return;
		}
		a->can_load = json_is_true(json_object_get(
		    json_object_get(res, "agentCapabilities"), "loadSession"));
		start_session(a);
		return;
	case ACP_LOAD:
		snprintf(a->r->session_id, sizeof(a->r->session_id), "%s",
			 a->session);
		rc = pick_model(a, res);
		if (rc == 0)
			send_prompt(a);
		else if (rc < 0)
			end_session(a);
		return;
	case ACP_NEW:
		sid = json_get_str(res, "sessionId");
		if (!sid || !*sid || strlen(sid) >= sizeof(a->session)) {
			fail(a, "session/new answered without a usable "
				"sessionId");
			end_session(a);
			return;
		}
		snprintf(a->session, sizeof(a->session), "%s", sid);
		snprintf(a->r->session_id, sizeof(a->r->session_id), "%s", sid);
		rc = pick_model(a, res);
		if (rc == 0)
			send_prompt(a);
		else if (rc < 0)
			end_session(a);
		return;
	case ACP_MODEL:
		send_prompt(a);
		return;
	case ACP_PROMPT:
		prompt_answered(a, res);
		return;
	case ACP_DONE:
		return;
	}
}

/* The text of a content block, or NULL. */
static const char *
block_text(const json_t *content)
{
	const char *type = json_get_str(content, "type");

	return type && !strcmp(type, "text") ? json_get_str(content, "text")
					     : NULL;
}

/* A session/update: the turn's text, steps and usage. */
static void
on_update(struct acp *a, const json_t *params)
{
	const json_t *up = json_object_get(params, "update");
	const char *kind = json_get_str(up, "sessionUpdate");
	const json_t *u, *cost;
	const char *text;

	if (!kind || a->phase != ACP_PROMPT)
		return; /* what session/load replays is not this turn's */
	u = json_object_get(json_object_get(up, "_meta"), "usage");
	if (json_is_object(u) && jint(u, "inputTokens") >= 0) {
		a->meta_in += jint(u, "inputTokens");
		a->meta_out +=
		    jint(u, "outputTokens") > 0 ? jint(u, "outputTokens") : 0;
		a->meta_seen = 1;
	}
	if (!strcmp(kind, "agent_message_chunk")) {
		text = block_text(json_object_get(up, "content"));
		if (text && a->turn.len < ACP_TEXT_MAX)
			buf_add(&a->turn, text, strlen(text));
	} else if (!strcmp(kind, "tool_call")) {
		a->r->steps++;
		if (a->turn.len) {
			buf_reset(&a->last);
			buf_add(&a->last, a->turn.ptr, a->turn.len);
			buf_reset(&a->turn);
		}
	} else if (!strcmp(kind, "usage_update")) {
		cost = json_object_get(up, "cost");
		if (json_is_number(json_object_get(cost, "amount")) &&
		    json_get_str(cost, "currency") &&
		    !strcmp(json_get_str(cost, "currency"), "USD")) {
			a->r->cost_usd =
			    json_number_value(json_object_get(cost, "amount"));
			a->r->cost_known = 1;
		}
	}
}

/* ---- what the agent may do --------------------------------------------- */

/* Records a refusal for the engine (r->refused) and the transcript. */
static void
refuse(struct acp *a, const char *tool, const char *kind, const char *path,
       const char *reason)
{
	if (!a->r->refused)
		a->r->refused = json_array();
	json_array_append_new(
	    a->r->refused,
	    json_pack("{s:o, s:s, s:o, s:o}", "tool", json_lossy_str(tool),
		      "kind", kind, "path", json_lossy_str(path ? path : ""),
		      "reason", json_lossy_str(reason)));
	note(a, "[denied] %s %s%s%s: %s", kind, tool, path ? " " : "",
	     path ? path : "", reason);
}

/* The worktree-relative form of real, a path tools_resolve gave. */
static const char *
rel_of(const struct acp *a, const char *real)
{
	const char *rel = real + strlen(a->tc.cwd);

	while (*rel == '/')
		rel++;
	return rel;
}

/*
 * Whether the agent may write real (a resolved path): never baton's
 * own config (.baton/, which a checkpoint refuses anyway), then the loop
 * policy's write rule or policies.allowed_paths. 0, or -1 with why.
 */
static int
may_write(struct acp *a, const char *real, struct buf *why)
{
	const char *rel = rel_of(a, real);
	char *w = NULL;

	if (!strncmp(rel, ".baton", 6) && (!rel[6] || rel[6] == '/')) {
		buf_addf(why,
			 "'%s' is baton's own config (.baton/), which no "
			 "agent may change",
			 rel);
		return -1;
	}
	if (a->req->policy) {
		if (!policy_check(a->req->policy, "write", rel, NULL, &w))
			return 0;
		buf_adds(why, w ? w : "not granted");
		free(w);
		return -1;
	}
	if (config_globs_allow(a->req->allowed_paths, rel))
		return 0;
	buf_addf(why, "'%s' is outside policies.allowed_paths", rel);
	return -1;
}

/* A run or network effect under a loop policy: 0, or -1 with why. */
static int
may_do(struct acp *a, const char *kind, const char *target, struct buf *why)
{
	char *w = NULL;

	if (!a->req->policy)
		return 0; /* the sandbox holds commands and fetches */
	if (!policy_check(a->req->policy, kind, target, NULL, &w))
		return 0;
	buf_adds(why, w ? w : "not granted");
	free(w);
	return -1;
}

/* The paths a tool call names: its locations, rawInput's, its diffs'. */
static void
ask_paths(const json_t *tc, struct strvec *out)
{
	static const char *const keys[] = {
		"file_path", "path",	      "absolute_path",
		"filePath",  "notebook_path", "dir_path",
		"directory", "new_path",      "destination",
	};
	const json_t *in = json_object_get(tc, "rawInput"), *v;
	const char *p;
	size_t i, j;

	json_array_foreach(json_object_get(tc, "locations"), i,
			   v) if ((p = json_get_str(v, "path")))
	    strvec_push(out, p);
	for (j = 0; j < ARRAY_SIZE(keys); j++)
		if ((p = json_get_str(in, keys[j])))
			strvec_push(out, p);
	json_array_foreach(json_object_get(tc, "content"), i,
			   v) if ((p = json_get_str(v, "path")))
	    strvec_push(out, p);
}

/* The command a tool call would run: rawInput.command, else its title. */
static void
ask_command(const json_t *tc, struct buf *out)
{
	const json_t *cmd = json_object_get(json_object_get(tc, "rawInput"),
					    "command"),
		     *v;
	size_t i;

	if (json_is_string(cmd)) {
		buf_adds(out, json_string_value(cmd));
		return;
	}
	json_array_foreach(cmd, i, v) if (json_is_string(v))
	    buf_addf(out, "%s%s", i ? " " : "", json_string_value(v));
	if (!out->len && json_get_str(tc, "title"))
		buf_adds(out, json_get_str(tc, "title"));
}

/* The host of rawInput.url ("https://host:port/x" gives "host"). */
static void
ask_host(const json_t *tc, struct buf *out)
{
	const char *url = json_get_str(json_object_get(tc, "rawInput"), "url");
	const char *s, *e;

	if (!url)
		return;
	s = strstr(url, "://");
	s = s ? s + 3 : url;
	e = s + strcspn(s, "/:?#");
	buf_add(out, s, (size_t)(e - s));
}

/*
 * Judges one ask. Every path must lie in the worktree (tools_resolve);
 * an edit, delete or move must be a write the policy allows, an execute
 * a run, a fetch a network reach. Kinds that name no effect (read,
 * search, think, switch_mode, other) need only their paths confined.
 * Returns 0, or -1 with why and what (the path or target) filled.
 */
static int
judge_ask(struct acp *a, const json_t *tc, const char *kind, struct buf *what,
	  struct buf *why)
{
	struct strvec paths = STRVEC_INIT;
	struct buf res = BUF_INIT, target = BUF_INIT;
	int write = !strcmp(kind, "edit") || !strcmp(kind, "delete") ||
		    !strcmp(kind, "move");
	int rc = 0;
	size_t i;

	ask_paths(tc, &paths);
	for (i = 0; !rc && i < paths.nr; i++) {
		buf_reset(what);
		buf_adds(what, paths.v[i]);
		if (tools_resolve(&a->tc, paths.v[i], &res, why) < 0 ||
		    (write && may_write(a, res.ptr, why) < 0))
			rc = -1;
	}
	if (!rc && !strcmp(kind, "execute")) {
		ask_command(tc, &target);
		buf_reset(what);
		buf_adds(what, target.ptr);
		rc = may_do(a, "run", target.ptr, why);
	} else if (!rc && !strcmp(kind, "fetch")) {
		ask_host(tc, &target);
		buf_reset(what);
		buf_adds(what, target.ptr);
		rc = target.len ? may_do(a, "network", target.ptr, why) : 0;
	}
	strvec_clear(&paths);
	buf_release(&res);
	buf_release(&target);
	return rc;
}

/*
 * session/request_permission: the policy's answer as one of the options
 * offered. Allowed: allow_once (never allow_always, which would let the
 * agent skip later asks, as Qwen Code's "Allow All Edits" switches its
 * mode); refused: reject_once, else reject_always, else cancelled.
 */
static void
on_permission(struct acp *a, json_t *id, const json_t *params)
{
	static const char *const allow[] = { "allow_once", "allow_always" };
	static const char *const reject[] = { "reject_once", "reject_always" };
	const json_t *tc = json_object_get(params, "toolCall"), *o;
	const json_t *opts = json_object_get(params, "options");
	const char *kind = json_get_str(tc, "kind");
	const char *title = json_get_str(tc, "title");
	const char *const *want;
	const char *chosen = NULL;
	struct buf what = BUF_INIT, why = BUF_INIT;
	size_t i, k;
	int ok;

	if (!kind)
		kind = "other";
	if (!title)
		title = json_get_str(tc, "toolCallId");
	ok = judge_ask(a, tc, kind, &what, &why) == 0;
	if (!ok)
		refuse(a, title ? title : "?", kind, what.len ? what.ptr : NULL,
		       why.ptr);
	want = ok ? allow : reject;
	for (k = 0; k < 2 && !chosen; k++)
		json_array_foreach(opts, i, o)
		{
			const char *ok_kind = json_get_str(o, "kind");

			if (ok_kind && !strcmp(ok_kind, want[k]) &&
			    json_get_str(o, "optionId")) {
				chosen = json_get_str(o, "optionId");
				break;
			}
		}
	if (chosen)
		respond(a, id,
			json_pack("{s:{s:s, s:s}}", "outcome", "outcome",
				  "selected", "optionId", chosen));
	else if (ok)
		respond_error(a, id, RPC_INVALID_PARAMS,
			      "no allow option was offered");
	else
		respond(
		    a, id,
		    json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled"));
	buf_release(&what);
	buf_release(&why);
}

/* fs/read_text_file {path, line?, limit?}: the file's text, confined. */
static void
on_read(struct acp *a, json_t *id, const json_t *params)
{
	const char *path = json_get_str(params, "path");
	struct buf res = BUF_INIT, why = BUF_INIT, data = BUF_INIT;
	int64_t line = jint(params, "line"), limit = jint(params, "limit");
	const char *s, *e, *end;
	struct stat st;

	if (!path) {
		respond_error(a, id, RPC_INVALID_PARAMS, "path is required");
		goto out;
	}
	if (tools_resolve(&a->tc, path, &res, &why) < 0) {
		refuse(a, "fs/read_text_file", "read", path, why.ptr);
		respond_error(a, id, RPC_INVALID_PARAMS, "%s", why.ptr);
		goto out;
	}
	if (lstat(res.ptr, &st) < 0) {
		if (errno == ENOENT)
			respond_error(a, id, RPC_NOT_FOUND,
				      "Resource not found: '%s' does not "
				      "exist (ENOENT)",
				      path);
		else
			respond_error(a, id, RPC_INTERNAL,
				      "cannot read '%s': %s", path,
				      strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		respond_error(a, id, RPC_INVALID_PARAMS,
			      "'%s' is not a regular file", path);
		goto out;
	}
	if (fs_read_nofollow(res.ptr, &data, TOOLS_FILE_MAX, NULL) < 0) {
		respond_error(a, id, RPC_INTERNAL,
			      "cannot read '%s' (more than %d bytes?)", path,
			      TOOLS_FILE_MAX);
		goto out;
	}
	if (memchr(data.ptr, '\0', data.len)) {
		respond_error(a, id, RPC_INVALID_PARAMS,
			      "'%s' is a binary file", path);
		goto out;
	}
	s = data.ptr;
	end = data.ptr + data.len;
	for (; line > 1 && s < end; line--) {
		s = memchr(s, '\n', (size_t)(end - s));
		s = s ? s + 1 : end;
	}
	e = s;
	if (limit > 0) {
		for (; limit > 0 && e < end; limit--) {
			e = memchr(e, '\n', (size_t)(end - e));
			e = e ? e + 1 : end;
		}
	} else {
		e = end;
	}
	respond(a, id,
		json_pack("{s:o}", "content", json_lossy(s, (size_t)(e - s))));
out:
	buf_release(&res);
	buf_release(&why);
	buf_release(&data);
}

/* fs/write_text_file {path, content}: confined, and held to the policy. */
static void
on_write(struct acp *a, json_t *id, const json_t *params)
{
	const char *path = json_get_str(params, "path");
	const json_t *content = json_object_get(params, "content");
	struct buf res = BUF_INIT, why = BUF_INIT;
	char *parent = NULL, *slash;
	int fd = -1, rc;

	if (!path || !json_is_string(content)) {
		respond_error(a, id, RPC_INVALID_PARAMS,
			      "path and content are required");
		goto out;
	}
	if (tools_resolve(&a->tc, path, &res, &why) < 0 ||
	    may_write(a, res.ptr, &why) < 0) {
		refuse(a, "fs/write_text_file", "edit", path, why.ptr);
		respond_error(a, id, RPC_INVALID_PARAMS, "%s", why.ptr);
		goto out;
	}
	if (fs_is_dir(res.ptr)) {
		respond_error(a, id, RPC_INVALID_PARAMS, "'%s' is a directory",
			      path);
		goto out;
	}
	parent = xstrdup(res.ptr);
	slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		/* what does not exist yet holds no symlink (tools_resolve) */
		fs_mkdir_p(parent, 0755, NULL);
	}
	fd = open(res.ptr,
		  O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	rc = fd < 0 ? -errno
		    : fs_write_all(fd, json_string_value(content),
				   json_string_length(content));
	if (rc < 0) {
		respond_error(a, id, RPC_INTERNAL, "cannot write '%s': %s",
			      path, strerror(-rc));
		goto out;
	}
	respond(a, id, json_object());
out:
	if (fd >= 0)
		close(fd);
	free(parent);
	buf_release(&res);
	buf_release(&why);
}

/* ---- terminals --------------------------------------------------------- */

/*
 * Called by the spawn of a terminal's command: ticks go on to the
 * engine (its output events), and a stop it asks for stops the command
 * (the turn is cancelled once terminal/create has answered).
 */
static int
term_event(void *arg, enum spawn_event ev, pid_t pid)
{
	struct acp *a = arg;
	const struct agent_request *req = a->req;
	int64_t now;

	if (!req->on_event || ev == SPAWN_EV_STARTED)
		return 0;
	if (ev == SPAWN_EV_TICK) {
		now = time_mono_ms();
		if (now < a->next_tick)
			return 0;
		a->next_tick = now + (req->tick_ms > 0 ? req->tick_ms : 1000);
	}
	if (req->on_event(req->arg, ev, pid)) {
		a->asked_stop = 1;
		return 1;
	}
	return 0;
}

static struct acp_term *
term_find(struct acp *a, const json_t *params)
{
	const char *id = json_get_str(params, "terminalId");
	size_t i;

	for (i = 0; id && i < ACP_TERMS_MAX; i++)
		if (a->terms[i].id[0] && !strcmp(a->terms[i].id, id))
			return &a->terms[i];
	return NULL;
}

static json_t *
term_exit(const struct acp_term *t)
{
	static const struct {
		int sig;
		const char *name;
	} names[] = {
		{ SIGTERM, "SIGTERM" }, { SIGKILL, "SIGKILL" },
		{ SIGINT, "SIGINT" },	{ SIGHUP, "SIGHUP" },
		{ SIGSEGV, "SIGSEGV" }, { SIGABRT, "SIGABRT" },
		{ SIGPIPE, "SIGPIPE" },
	};
	const char *sig = NULL;
	size_t i;

	if (!t->signal)
		return json_pack("{s:i, s:n}", "exitCode", t->status, "signal");
	for (i = 0; i < ARRAY_SIZE(names); i++)
		if (names[i].sig == t->signal)
			sig = names[i].name;
	return json_pack("{s:n, s:o}", "exitCode", "signal",
			 sig ? json_string(sig)
			     : json_sprintf("SIG%d", t->signal));
}

/*
 * terminal/create {command, args?, env?, cwd?, outputByteLimit?}: runs
 * the command to its end in the worktree (cwd must lie in it), in the
 * agent's sandbox, with the time the call has left. A command without
 * args is a shell string (sh -c), as agents send it.
 */
static void
on_term_create(struct acp *a, json_t *id, const json_t *params)
{
	const char *cmd = json_get_str(params, "command");
	const char *cwd = json_get_str(params, "cwd");
	const json_t *args = json_object_get(params, "args"), *v;
	int64_t limit = jint(params, "outputByteLimit"), left;
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result res = SPAWN_RESULT_INIT;
	struct strvec argv = STRVEC_INIT;
	struct buf line = BUF_INIT, dir = BUF_INIT, why = BUF_INIT;
	struct err e = ERR_INIT;
	struct acp_term *t = NULL;
	const char *p;
	size_t i, skip;

	if (!cmd || !*cmd) {
		respond_error(a, id, RPC_INVALID_PARAMS, "command is required");
		goto out;
	}
	buf_adds(&line, cmd);
	json_array_foreach(args, i, v) if (json_is_string(v))
	    buf_addf(&line, " %s", json_string_value(v));
	if (tools_resolve(&a->tc, cwd ? cwd : ".", &dir, &why) < 0) {
		refuse(a, "terminal/create", "execute", cwd, why.ptr);
		respond_error(a, id, RPC_INVALID_PARAMS, "%s", why.ptr);
		goto out;
	}
	if (may_do(a, "run", line.ptr, &why) < 0) {
		refuse(a, "terminal/create", "execute", line.ptr, why.ptr);
		respond_error(a, id, RPC_INVALID_PARAMS, "%s", why.ptr);
		goto out;
	}
	for (i = 0; i < ACP_TERMS_MAX && !t; i++)
		if (!a->terms[i].id[0])
			t = &a->terms[i];
	if (!t) {
		respond_error(a, id, RPC_INTERNAL,
			      "%d terminals are open: release one first",
			      ACP_TERMS_MAX);
		goto out;
	}
	left = a->deadline ? a->deadline - time_mono_ms() : 0;
	if (a->deadline && left <= 0) {
		respond_error(a, id, RPC_INTERNAL,
			      "no time is left to run '%s'", line.ptr);
		goto out;
	}
	if (json_array_size(args)) {
		strvec_push(&argv, cmd);
		json_array_foreach(args, i, v) if (json_is_string(v))
		    strvec_push(&argv, json_string_value(v));
	} else {
		strvec_pushl(&argv, "sh", "-c", cmd, NULL);
	}
	sandbox_wrap(&a->sb, &argv, &o.argv);
	strvec_pushv(&o.env, a->env.v);
	json_array_foreach(json_object_get(params, "env"), i, v)
	{
		const char *name = json_get_str(v, "name");
		const char *val = json_get_str(v, "value");

		if (name && val && *name && !strchr(name, '='))
			strvec_pushf(&o.env, "%s=%s", name, val);
	}
	o.cwd = dir.ptr;
	o.merge_err = 1;
	o.tail_max = limit > 0 && limit < TOOLS_FILE_MAX ? (size_t)limit
							 : ACP_TERM_OUTPUT;
	o.timeout_ms = left > 0 && left < INT_MAX ? (int)left : 0;
	o.kill_grace_ms = ACP_KILL_GRACE_MS;
	o.wake_fd = a->req->wake_fd;
	o.tick_ms = ACP_TICK_MS;
	o.on_event = term_event;
	o.arg = a;
	memset(t, 0, sizeof(*t));
	snprintf(t->id, sizeof(t->id), "term-%d", ++a->nterms_made);
	t->out = (struct buf)BUF_INIT;
	if (spawn_run(&o, &res, &e) < 0) {
		t->status = 127;
		buf_addf(&t->out, "%s\n", e.msg);
	} else {
		t->status = res.status;
		t->signal = res.signal;
		/* the tail may start inside a character */
		p = res.out.ptr;
		for (skip = 0; skip < res.out.len && skip < 4 &&
			       ((unsigned char)p[skip] & 0xc0) == 0x80;
		     skip++)
			;
		if (res.out_bytes > res.out.len) {
			t->truncated = 1;
			p += skip;
		} else {
			skip = 0;
		}
		buf_add(&t->out, p, res.out.len - skip);
	}
	respond(a, id, json_pack("{s:s}", "terminalId", t->id));
out:
	spawn_result_release(&res);
	spawn_opts_release(&o);
	strvec_clear(&argv);
	buf_release(&line);
	buf_release(&dir);
	buf_release(&why);
}

static void
on_term(struct acp *a, const char *method, json_t *id, const json_t *params)
{
	struct acp_term *t = term_find(a, params);

	if (!t) {
		respond_error(a, id, RPC_INVALID_PARAMS, "no terminal '%s'",
			      json_get_str(params, "terminalId")
				  ? json_get_str(params, "terminalId")
				  : "");
		return;
	}
	if (!strcmp(method, "terminal/output"))
		respond(a, id,
			json_pack("{s:o, s:b, s:o}", "output",
				  json_lossy(t->out.ptr, t->out.len),
				  "truncated", t->truncated, "exitStatus",
				  term_exit(t)));
	else if (!strcmp(method, "terminal/wait_for_exit"))
		respond(a, id, term_exit(t));
	else if (!strcmp(method, "terminal/kill"))
		respond(a, id, json_object()); /* it has ended already */
	else {
		buf_release(&t->out);
		memset(t, 0, sizeof(*t));
		respond(a, id, json_object());
	}
}

/* A request from the agent: answered here, always. */
static void
on_request(struct acp *a, const char *method, json_t *id, const json_t *params)
{
	const char *sid = json_get_str(params, "sessionId");

	if (!json_is_object(params)) {
		respond_error(a, id, RPC_INVALID_PARAMS,
			      "params must be an "
			      "object");
		return;
	}
	if (!sid || strcmp(sid, a->session)) {
		respond_error(a, id, RPC_INVALID_PARAMS, "unknown sessionId");
		return;
	}
	if (!strcmp(method, "session/request_permission"))
		on_permission(a, id, params);
	else if (!strcmp(method, "fs/read_text_file"))
		on_read(a, id, params);
	else if (!strcmp(method, "fs/write_text_file"))
		on_write(a, id, params);
	else if (!strcmp(method, "terminal/create"))
		on_term_create(a, id, params);
	else if (!strcmp(method, "terminal/output") ||
		 !strcmp(method, "terminal/wait_for_exit") ||
		 !strcmp(method, "terminal/kill") ||
		 !strcmp(method, "terminal/release"))
		on_term(a, method, id, params);
	else
		respond_error(a, id, RPC_METHOD_NOT_FOUND,
			      "Method not found: %s", method);
	/* an abort that came while a terminal ran */
	if (a->asked_stop && !a->cancel_sent)
		begin_stop(a);
}

/* One line from the agent. */
static void
on_line(struct acp *a, const char *p, size_t len)
{
	json_t *msg = json_loadb(p, len, 0, NULL), *id;
	const char *method;

	if (!json_is_object(msg))
		goto out;
	method = json_get_str(msg, "method");
	id = json_object_get(msg, "id");
	if (method && id)
		on_request(a, method, id, json_object_get(msg, "params"));
	else if (method && !strcmp(method, "session/update"))
		on_update(a, json_object_get(msg, "params"));
	else if (!method && id)
		on_response(a, msg);
out:
	json_decref(msg);
}

/* spawn's on_out: stdout in chunks, cut into lines. */
static int
acp_out(void *arg, const char *p, size_t len)
{
	struct acp *a = arg;
	const char *nl, *end = p + len;

	log_bytes(a, p, len);
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl) {
			if (a->skipping ||
			    a->line.len + (size_t)(end - p) > CLI_LINE_MAX) {
				a->skipping = 1;
				buf_reset(&a->line);
			} else {
				buf_add(&a->line, p, (size_t)(end - p));
			}
			break;
		}
		if (!a->skipping) {
			buf_add(&a->line, p, (size_t)(nl - p));
			on_line(a, a->line.ptr, a->line.len);
		}
		buf_reset(&a->line);
		a->skipping = 0;
		p = nl + 1;
	}
	return a->stop_now;
}

/* spawn's on_event: the engine's events, the cancel and exit waits. */
static int
acp_event(void *arg, enum spawn_event ev, pid_t pid)
{
	struct acp *a = arg;
	const struct agent_request *req = a->req;
	int64_t now = time_mono_ms();

	switch (ev) {
	case SPAWN_EV_STARTED:
		return req->on_event ? req->on_event(req->arg, ev, pid) : 0;
	case SPAWN_EV_WAKE:
		if (req->on_event && req->on_event(req->arg, ev, pid))
			return begin_stop(a);
		return a->stop_now;
	case SPAWN_EV_TICK:
		if (req->on_event && now >= a->next_tick) {
			a->next_tick =
			    now + (req->tick_ms > 0 ? req->tick_ms : 1000);
			if (req->on_event(req->arg, ev, pid) && begin_stop(a))
				return 1;
		}
		if (a->cancel_sent && now >= a->cancel_until)
			a->stop_now = 1;
		if (a->phase == ACP_DONE && now >= a->exit_until)
			a->stop_now = 1;
		return a->stop_now;
	}
	return 0;
}

/* ---- the adapter ------------------------------------------------------- */

/* The agent's sandbox: the call's, its program, a HOME its env names. */
static void
acp_sandbox(const struct agent_request *req, const char *program,
	    struct sandbox *sb)
{
	const struct strvec *env = &req->provider->env;
	const char *home = NULL;
	size_t i;

	sandbox_copy(sb, req->sandbox);
	sandbox_program(sb, program);
	for (i = 0; i < env->nr; i++)
		if (!strncmp(env->v[i], "HOME=", 5))
			home = env->v[i] + 5;
	if (home && home[0] == '/' && fs_is_dir(home))
		sandbox_rw(sb, home);
}

static void
set_outcome(struct acp *a, const struct spawn_result *res)
{
	struct agent_result *r = a->r;

	r->status = res->status;
	r->signal = res->signal;
	r->duration_ms = res->duration_ms;
	if (res->timed_out)
		r->outcome = AGENT_TIMEOUT;
	else if (a->asked_stop)
		r->outcome = AGENT_STOPPED;
	else if (a->answered)
		r->outcome = AGENT_OK; /* killed after its turn: fine */
	else if (res->signal)
		r->outcome = AGENT_CRASHED;
	else
		r->outcome = res->status ? AGENT_EXIT : AGENT_OK;
}

static int
acp_run(const struct agent_request *req, struct agent_result *r, struct err *e)
{
	const struct config_provider *p = req->provider;
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result res = SPAWN_RESULT_INIT;
	struct strvec argv = STRVEC_INIT;
	struct acp a;
	char *path = NULL, *cwd = NULL;
	const char *prog = agent_program(p);
	long long timeout;
	size_t i;
	int rc = 0;

	memset(&a, 0, sizeof(a));
	a.req = req;
	a.r = r;
	a.log = -1;
	a.talk.in = (struct buf)BUF_INIT;
	a.talk.on_out = acp_out;
	a.line = (struct buf)BUF_INIT;
	a.turn = (struct buf)BUF_INIT;
	a.last = (struct buf)BUF_INIT;
	a.sb = (struct sandbox)SANDBOX_INIT;
	strvec_init(&a.env);

	path = agent_which(prog);
	if (!path) {
		r->outcome = AGENT_EXIT;
		r->status = 127;
		r->failure = AGENT_FAIL_MISSING;
		buf_addf(&r->message,
			 "provider '%s' (acp): '%s' is not installed or not "
			 "on PATH; install it or set providers.%s.command",
			 p->name, prog ? prog : "", p->name);
		goto out;
	}
	cwd = realpath(req->cwd ? req->cwd : ".", NULL);
	if (!cwd) {
		rc = err_set(e, -errno, "cannot resolve the worktree '%s': %s",
			     req->cwd ? req->cwd : ".", strerror(errno));
		goto out;
	}
	a.tc.cwd = cwd;
	a.tc.sandbox = req->sandbox;
	if (req->out_path) {
		a.log = fs_open_nofollow(
		    req->out_path, O_WRONLY | O_CREAT | O_APPEND, 0644, e);
		if (a.log < 0) {
			rc = a.log;
			goto out;
		}
	}
	strvec_push(&argv, path);
	strvec_pushv(&argv, p->command.v + 1);
	strvec_pushv(&argv, p->args.v);
	strvec_pushv(&a.env, p->env.v);
	if (req->env)
		strvec_pushv(&a.env, req->env->v);
	acp_sandbox(req, path, &a.sb);
	sandbox_wrap(&a.sb, &argv, &o.argv);
	strvec_pushv(&o.env, a.env.v);
	o.cwd = cwd;
	o.err_path = req->err_path;
	o.tail_max = BUF_MAX_AGENT_TAIL;
	timeout = (long long)p->timeout_seconds * 1000;
	o.timeout_ms = timeout > INT_MAX ? INT_MAX : (int)timeout;
	o.kill_grace_ms = ACP_KILL_GRACE_MS;
	o.wake_fd = req->wake_fd;
	o.tick_ms = ACP_TICK_MS;
	o.on_event = acp_event;
	o.arg = &a;
	o.talk = &a.talk;
	if (o.timeout_ms > 0)
		a.deadline = time_mono_ms() + o.timeout_ms;

	request(&a, "initialize",
		json_pack("{s:i, s:{s:{s:b, s:b}, s:b}, s:{s:s, s:s}}",
			  "protocolVersion", ACP_PROTOCOL_VERSION,
			  "clientCapabilities", "fs", "readTextFile", 1,
			  "writeTextFile", 1, "terminal", 1, "clientInfo",
			  "name", "baton", "version", BATON_VERSION),
		ACP_INIT);
	rc = spawn_run(&o, &res, e);
	if (rc < 0) {
		r->outcome = AGENT_EXIT;
		r->status = 127;
		r->failure = AGENT_FAIL_CRASH;
		fail(&a, "%s",
		     e && e->msg[0] ? e->msg : "cannot start the agent");
		rc = 0;
		goto out;
	}
	if (!res.signal && !res.timed_out && !a.asked_stop && !a.answered)
		res.signal = sandbox_signal(&a.sb, res.status);
	set_outcome(&a, &res);
	r->out_bytes = res.out_bytes;
	buf_release(&r->err_tail);
	r->err_tail = res.err;
	res.err = (struct buf)BUF_INIT;
	if (a.cancel_sent && a.answered)
		note(&a, "[cancel] the agent ended its turn");
	else if (a.cancel_sent)
		note(&a, "[cancel] the agent did not end its turn in time: "
			 "its process group was killed");
	if (a.turn.len)
		buf_add(&r->text, a.turn.ptr, a.turn.len);
	else
		buf_add(&r->text, a.last.ptr, a.last.len);
	buf_rtrim(&r->text);
	if (r->outcome == AGENT_OK && !a.answered && !r->message.len)
		fail(&a,
		     "provider '%s' (acp): the agent exited before it "
		     "answered %s",
		     p->name, phase_methods[a.phase]);
	if (r->outcome == AGENT_OK && !a.answered &&
	    r->failure == AGENT_FAIL_NONE)
		r->failure = a.phase == ACP_INIT ? AGENT_FAIL_BAD_OUTPUT
						 : AGENT_FAIL_CRASH;
	agent__price(p, r);
	agent_classify(r);
out:
	if (a.log >= 0)
		close(a.log);
	buf_release(&a.talk.in);
	buf_release(&a.line);
	buf_release(&a.turn);
	buf_release(&a.last);
	for (i = 0; i < ACP_TERMS_MAX; i++)
		buf_release(&a.terms[i].out);
	sandbox_release(&a.sb);
	strvec_clear(&a.env);
	strvec_clear(&argv);
	spawn_result_release(&res);
	spawn_opts_release(&o);
	free(path);
	free(cwd);
	return rc;
}

/* ---- the transcript, read for people (agent_watch) -------------------- */

struct acp_view {
	struct buf line; /* the line not yet ended */
	int skipping;
	int open;	/* the shown text ends mid-line */
	int thinking;	/* a "[thought]" line is open */
	json_t *titles; /* toolCallId -> title */
};

struct acp_view *
acp__view_new(void)
{
	struct acp_view *v = xcalloc(1, sizeof(*v));

	v->line = (struct buf)BUF_INIT;
	v->titles = json_object();
	return v;
}

/* Ends an open line of text (the agent's, or a thought). */
static void
view_close(struct acp_view *v, struct buf *out)
{
	if (v->open || v->thinking)
		buf_addch(out, '\n');
	v->open = v->thinking = 0;
}

static void __attribute__((format(printf, 3, 4)))
view_line(struct acp_view *v, struct buf *out, const char *fmt, ...)
{
	va_list ap;

	view_close(v, out);
	va_start(ap, fmt);
	buf_vaddf(out, fmt, ap);
	va_end(ap);
	buf_addch(out, '\n');
}

static void
view_text(struct acp_view *v, struct buf *out, const char *s, int thought)
{
	size_t n = strlen(s);

	if (!n)
		return;
	if (thought != v->thinking || (!thought && !v->open && v->thinking))
		view_close(v, out);
	if (thought && !v->thinking)
		buf_adds(out, "[thought] ");
	buf_add(out, s, n);
	if (thought) {
		v->thinking = 1;
		return;
	}
	v->open = s[n - 1] != '\n';
}

static void
view_update(struct acp_view *v, const json_t *up, struct buf *out)
{
	const char *kind = json_get_str(up, "sessionUpdate");
	const char *id = json_get_str(up, "toolCallId");
	const char *title = json_get_str(up, "title");
	const char *status = json_get_str(up, "status");
	const char *text, *tkind;
	const json_t *e;
	size_t i;

	if (!kind)
		return;
	if (!strcmp(kind, "agent_message_chunk") ||
	    !strcmp(kind, "agent_thought_chunk")) {
		text = block_text(json_object_get(up, "content"));
		if (text)
			view_text(v, out, text, kind[6] == 't');
	} else if (!strcmp(kind, "tool_call") ||
		   !strcmp(kind, "tool_call_update")) {
		if (id && title &&
		    json_object_size(v->titles) < ACP_VIEW_TITLES)
			json_object_set_new(v->titles, id, json_string(title));
		if (!title && id)
			title =
			    json_string_value(json_object_get(v->titles, id));
		tkind = json_get_str(up, "kind");
		if (!strcmp(kind, "tool_call") || status)
			view_line(v, out, "[tool] %s%s%s%s%s%s",
				  title ? title
				  : id	? id
					: "?",
				  tkind ? " (" : "", tkind ? tkind : "",
				  tkind ? ")" : "", status ? ": " : "",
				  status ? status : "");
	} else if (!strcmp(kind, "plan")) {
		view_line(v, out, "[plan]");
		json_array_foreach(json_object_get(up, "entries"), i, e)
		{
			status = json_get_str(e, "status");
			buf_addf(out, "  [%s] %s\n",
				 status && !strcmp(status, "completed") ? "x"
				 : status && !strcmp(status, "in_progress")
				     ? ">"
				     : " ",
				 json_get_str(e, "content")
				     ? json_get_str(e, "content")
				     : "");
		}
	}
}

/* A request the agent made, in a few words. */
static void
view_request(struct acp_view *v, const char *method, const json_t *params,
	     struct buf *out)
{
	const json_t *tc = json_object_get(params, "toolCall"), *x;
	const char *path = json_get_str(params, "path");
	struct buf cmd = BUF_INIT;
	size_t i;

	if (!strcmp(method, "session/request_permission")) {
		/* its updates may come without their title */
		if (json_get_str(tc, "toolCallId") &&
		    json_get_str(tc, "title") &&
		    json_object_size(v->titles) < ACP_VIEW_TITLES)
			json_object_set_new(
			    v->titles, json_get_str(tc, "toolCallId"),
			    json_string(json_get_str(tc, "title")));
		view_line(v, out, "[ask] %s",
			  json_get_str(tc, "title") ? json_get_str(tc, "title")
						    : "permission");
	} else if (!strcmp(method, "fs/read_text_file")) {
		view_line(v, out, "[read] %s", path ? path : "?");
	} else if (!strcmp(method, "fs/write_text_file")) {
		view_line(v, out, "[write] %s", path ? path : "?");
	} else if (!strcmp(method, "terminal/create")) {
		buf_adds(&cmd, json_get_str(params, "command")
				   ? json_get_str(params, "command")
				   : "?");
		json_array_foreach(json_object_get(params, "args"), i,
				   x) if (json_is_string(x))
		    buf_addf(&cmd, " %s", json_string_value(x));
		view_line(v, out, "[run] %s", cmd.ptr);
	}
	buf_release(&cmd);
}

static void
view_parse(struct acp_view *v, const char *p, size_t len, struct buf *out)
{
	json_t *msg, *err;
	const char *method;

	while (len && (*p == ' ' || *p == '\t' || *p == '\r')) {
		p++;
		len--;
	}
	if (!len)
		return;
	if (*p != '{') {
		/* baton's own notes */
		view_close(v, out);
		buf_add(out, p, len);
		buf_addch(out, '\n');
		return;
	}
	msg = json_loadb(p, len, 0, NULL);
	method = json_get_str(msg, "method");
	err = json_object_get(msg, "error");
	if (method && !strcmp(method, "session/update"))
		view_update(
		    v,
		    json_object_get(json_object_get(msg, "params"), "update"),
		    out);
	else if (method && json_object_get(msg, "id"))
		view_request(v, method, json_object_get(msg, "params"), out);
	else if (!method && err)
		view_line(v, out, "[error] %s",
			  json_get_str(err, "message")
			      ? json_get_str(err, "message")
			      : "an error");
	json_decref(msg);
}

size_t
acp__view_feed(struct acp_view *v, const char *p, size_t len, struct buf *out)
{
	size_t before = out->len;
	const char *nl, *end = p + len;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl) {
			if (v->skipping ||
			    v->line.len + (size_t)(end - p) > CLI_LINE_MAX) {
				v->skipping = 1;
				buf_reset(&v->line);
			} else {
				buf_add(&v->line, p, (size_t)(end - p));
			}
			break;
		}
		if (!v->skipping) {
			buf_add(&v->line, p, (size_t)(nl - p));
			view_parse(v, v->line.ptr, v->line.len, out);
		}
		buf_reset(&v->line);
		v->skipping = 0;
		p = nl + 1;
	}
	return out->len - before;
}

size_t
acp__view_finish(struct acp_view *v, struct buf *out)
{
	size_t before = out->len;

	if (v->line.len && !v->skipping)
		view_parse(v, v->line.ptr, v->line.len, out);
	buf_reset(&v->line);
	v->skipping = 0;
	view_close(v, out);
	return out->len - before;
}

void
acp__view_free(struct acp_view *v)
{
	if (!v)
		return;
	buf_release(&v->line);
	json_decref(v->titles);
	free(v);
}

const struct agent_adapter agent_acp_adapter = {
	.info = {
		.type = "acp",
		.program = NULL,
		.install_hint = "install the agent and set providers.NAME."
				"command, such as [gemini, --acp], [qwen, "
				"--acp] or [claude-code-acp] (npm install -g "
				"@zed-industries/claude-code-acp)",
		.auth_hint = "log the agent in once, or give it its key in "
			     "providers.NAME.env",
		.is_cli = 1,
		/* session/load, when the agent offers loadSession */
		.resumes = 1,
	},
	.run = acp_run,
};
