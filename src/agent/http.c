/*
 * baton's own agent: a bounded tool loop over a model's HTTP API, for the
 * `openai` (Chat Completions) and `anthropic` (Messages) provider types.
 * No program to install: baton posts the conversation with libcurl, runs
 * the tools the model asks for (tools.c) in the worktree, and posts the
 * results back until the model answers without a tool call.
 *
 *   [system, user: prompt] ──POST──▶ model ──▶ usage, steps++
 *          ▲                                      │
 *          │ assistant + tool results             ▼
 *          └──────── tools_call() ◀──── tool calls? ──no──▶ final text
 *
 * Each POST is retried on 408, 409, 429, 5xx and transient transport
 * errors with exponential backoff (1 s, 2 s, 4 s ... 60 s, jittered),
 * honouring Retry-After, never past the deadline. A server that asks for
 * more than a minute ends the call: a 429 becomes AGENT_FAIL_QUOTA with
 * reset_at_ms, and the engine's quota wait takes over.
 * Every request and response is kept in req->home (NNN-request.json,
 * NNN-response.json; the key is never in them) and a human transcript
 * goes to req->out_path. The transfer's progress callback and the
 * backoff sleeps watch req->wake_fd and send ticks, so an abort stops the
 * call within about a second, as it stops a CLI agent.
 */
#include "util/compat.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "agent/tools.h"
#include "core/config.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/redact.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define HTTP_DEFAULT_STEPS	  50
#define HTTP_DEFAULT_RETRIES	  4
#define HTTP_BACKOFF_MAX_MS	  (60 * 1000)
#define HTTP_CONNECT_MS		  (30 * 1000)
#define HTTP_ANTHROPIC_MAX_TOKENS 8192
/* Bytes of an error body quoted in a message when it has no message. */
#define HTTP_ERROR_QUOTE 300
/* A tool result this short is kept when the context window is full. */
#define HTTP_DROPPED_MIN 200

/* What differs between the two APIs, besides the JSON shapes. */
struct wire {
	const char *type;
	const char *key_env;	  /* the key's default variable */
	const char *default_base; /* base_url when the provider has none */
	const char *path;	  /* appended to the base */
	int anthropic;
};

static const struct wire openai_wire = {
	.type = "openai",
	.key_env = "OPENAI_API_KEY",
	.default_base = "https://api.openai.com/v1",
	.path = "/chat/completions",
};

static const struct wire anthropic_wire = {
	.type = "anthropic",
	.key_env = "ANTHROPIC_API_KEY",
	.default_base = "https://api.anthropic.com",
	.path = "/v1/messages",
	.anthropic = 1,
};

/* One call of the agent: from the first request to the final text. */
struct call {
	const struct agent_request *req;
	const struct config_provider *p;
	const struct wire *w;
	struct agent_result *r;
	CURL *curl;
	struct curl_slist *headers;
	char *url;
	char *root;		/* realpath of req->cwd */
	json_t *messages;	/* the conversation, without the system prompt
				   on the anthropic wire */
	json_t *tools;		/* tools_schema() for the wire */
	struct strvec tool_env; /* req->env, and the key variable blanked */
	int64_t start;		/* time_mono_ms() when the call began */
	int64_t deadline;	/* time_mono_ms() limit; 0: none */
	int64_t next_tick;	/* 0: no ticks */
	int wake_fd;		/* req->wake_fd while it is open, else -1 */
	int stopped;		/* on_event asked to stop */
	int nreq;		/* requests so far, for NNN- file names */
	int out_fd;		/* the transcript, or -1 */
	uint64_t rng;		/* jitter */
	struct buf body;	/* the response body being read (capped) */
	char curl_err[CURL_ERROR_SIZE];
};

/* One model response, in a shape common to both wires. */
struct turn {
	json_t *assistant; /* the message to append to the conversation */
	json_t *calls;	   /* [{id, name, input (object) | error (string)}] */
	struct buf text;   /* text blocks / content */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void
curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/*
 * Appends one line (a newline is added) to the transcript, with secrets
 * redacted. A transcript that cannot be written loses the line: the
 * requests in req->home remain the record.
 */
static void __attribute__((format(printf, 2, 3)))
note(struct call *c, const char *fmt, ...)
{
	struct buf line = BUF_INIT;
	va_list ap;

	if (c->out_fd < 0)
		return;
	va_start(ap, fmt);
	buf_vaddf(&line, fmt, ap);
	va_end(ap);
	buf_addch(&line, '\n');
	redact_buf(&line);
	if (fs_write_all(c->out_fd, line.ptr, line.len) == 0)
		c->r->out_bytes += line.len;
	buf_release(&line);
}

/*
 * Ends the call: how it ended, why, and a one-line message (also in the
 * transcript). status is 0 only for AGENT_OK.
 */
static void __attribute__((format(printf, 4, 5)))
finish(struct call *c, enum agent_outcome o, enum agent_failure f,
       const char *fmt, ...)
{
	struct agent_result *r = c->r;
	va_list ap;

	r->outcome = o;
	r->failure = f;
	r->status = o == AGENT_OK ? 0 : 1;
	buf_reset(&r->message);
	va_start(ap, fmt);
	buf_vaddf(&r->message, fmt, ap);
	va_end(ap);
	if (r->message.len)
		note(c, "error: %s", r->message.ptr);
}

/*
 * Reads fd until it is empty; -1 when it is at EOF (closed). The fd may
 * be blocking: after a short read, poll says whether more is there.
 */
static int
drain(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char junk[512];
	ssize_t n;

	for (;;) {
		n = read(fd, junk, sizeof(junk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			return -1;
		if (n < 0)
			return 0;
		if ((size_t)n < sizeof(junk) && poll(&pfd, 1, 0) <= 0)
			return 0;
	}
}

/* Calls on_event; a nonzero answer marks the call stopped. */
static void
event(struct call *c, enum spawn_event ev)
{
	if (c->req->on_event && c->req->on_event(c->req->arg, ev, 0))
		c->stopped = 1;
}

/*
 * Waits up to timeout_ms for wake_fd (0: only looks), then delivers a
 * wake-up and a due tick. Returns nonzero once the call is stopped.
 */
static int
watch(struct call *c, int timeout_ms)
{
	struct pollfd pfd = { .fd = c->wake_fd, .events = POLLIN };

	if (c->stopped)
		return 1;
	if (c->wake_fd >= 0) {
		if (poll(&pfd, 1, timeout_ms) > 0) {
			if ((pfd.revents & POLLNVAL) || drain(c->wake_fd) < 0)
				c->wake_fd = -1; /* closed: stop watching */
			event(c, SPAWN_EV_WAKE);
		}
	} else if (timeout_ms > 0) {
		poll(NULL, 0, timeout_ms);
	}
	if (c->next_tick && time_mono_ms() >= c->next_tick) {
		event(c, SPAWN_EV_TICK);
		c->next_tick = time_mono_ms() + c->req->tick_ms;
	}
	return c->stopped;
}

/* Sleeps ms, waking for wake_fd and ticks. Nonzero: stopped meanwhile. */
static int
nap(struct call *c, int64_t ms)
{
	int64_t now = time_mono_ms(), end = now + ms, step;

	while (!c->stopped && now < end) {
		step = end - now;
		if (c->next_tick && c->next_tick - now < step)
			step = c->next_tick > now ? c->next_tick - now : 0;
		watch(c, (int)step);
		now = time_mono_ms();
	}
	return c->stopped;
}

/* The events of a tool's child: wake-ups and ticks go to the engine. */
static int
tool_event(void *arg, enum spawn_event ev, pid_t pid)
{
	struct call *c = arg;

	(void)pid;
	/*
	 * The engine knows the agent as in-process (pid 0); a tool's child
	 * is not a new agent, so its start is not reported.
	 */
	if (ev == SPAWN_EV_STARTED)
		return 0;
	if (ev == SPAWN_EV_TICK && c->req->tick_ms > 0)
		c->next_tick = time_mono_ms() + c->req->tick_ms;
	event(c, ev);
	return c->stopped;
}

static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
	    curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return watch(arg, 0);
}

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
	struct call *c = arg;

	if (buf_add(&c->body, data, size * n) < 0)
		return 0; /* too big: CURLE_WRITE_ERROR */
	return size * n;
}

/* The value of response header name (copied), or NULL. */
static char *
header(struct call *c, const char *name)
{
	struct curl_header *h;

	if (curl_easy_header(c->curl, name, 0, CURLH_HEADER, -1, &h) !=
	    CURLHE_OK)
		return NULL;
	return xstrdup(h->value);
}

/*
 * A Go duration as OpenAI's x-ratelimit-reset-* headers send it ("1s",
 * "6m0s", "20ms", "1h2m3.5s") in ms, or -1.
 */
static int64_t
parse_duration(const char *s)
{
	double total = 0, v;
	char *end;

	if (!*s)
		return -1;
	while (*s) {
		v = strtod(s, &end);
		if (end == s || v < 0)
			return -1;
		s = end;
		if (!strncmp(s, "ms", 2)) {
			total += v;
			s += 2;
		} else if (*s == 'h') {
			total += v * 3600000;
			s++;
		} else if (*s == 'm') {
			total += v * 60000;
			s++;
		} else if (*s == 's') {
			total += v * 1000;
			s++;
		} else {
			return -1;
		}
	}
	return (int64_t)total;
}

/*
 * How long the server asked us to wait, in ms: retry-after-ms, else
 * Retry-After in seconds or as an HTTP date. -1 when it did not say. The
 * raw Retry-After value is left in *raw (caller frees) for the record.
 */
static int64_t
retry_after(struct call *c, char **raw)
{
	char *v, *end;
	int64_t ms = -1;
	double d;
	time_t t;

	*raw = header(c, "retry-after");
	v = header(c, "retry-after-ms");
	if (v) {
		d = strtod(v, &end);
		if (end != v && d >= 0)
			ms = (int64_t)d;
		free(v);
		if (ms >= 0)
			return ms;
	}
	if (!*raw)
		return -1;
	d = strtod(*raw, &end);
	while (*end == ' ')
		end++;
	if (end != *raw && !*end && d >= 0)
		return (int64_t)(d * 1000);
	t = curl_getdate(*raw, NULL);
	if (t < 0)
		return -1;
	ms = (int64_t)t * 1000 - time_now_ms();
	return ms < 0 ? 0 : ms;
}

/*
 * When a quota resets (epoch ms), from the rate-limit headers: the
 * Anthropic RFC 3339 times and the OpenAI durations; the latest wins, as
 * every limit must have reset. 0 when none is given.
 */
static int64_t
reset_from_headers(struct call *c)
{
	static const char *const times[] = {
		"anthropic-ratelimit-requests-reset",
		"anthropic-ratelimit-tokens-reset",
		"anthropic-ratelimit-input-tokens-reset",
		"anthropic-ratelimit-output-tokens-reset",
	};
	static const char *const durations[] = {
		"x-ratelimit-reset-requests",
		"x-ratelimit-reset-tokens",
	};
	int64_t best = 0, t, now = time_now_ms();
	char *v;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(times); i++) {
		v = header(c, times[i]);
		t = v ? time_parse_iso(v) : 0;
		if (t > best)
			best = t;
		free(v);
	}
	for (i = 0; i < ARRAY_SIZE(durations); i++) {
		v = header(c, durations[i]);
		t = v ? parse_duration(v) : -1;
		if (t >= 0 && now + t > best)
			best = now + t;
		free(v);
	}
	return best;
}

/* Appends s to out as one line of at most max bytes. */
static void
add_one_line(struct buf *out, const char *s, size_t len, size_t max)
{
	size_t i;

	for (i = 0; i < len && i < max; i++)
		buf_addch(out, s[i] == '\n' || s[i] == '\r' ? ' ' : s[i]);
	if (len > max)
		buf_adds(out, "...");
}

/*
 * The API's own words about a failure: error.message (both APIs), an
 * error string (Ollama), a top-level message, else the start of the body.
 */
static void
api_message(json_t *j, const struct buf *raw, struct buf *out)
{
	json_t *err;
	const char *m = NULL;

	if (json_is_array(j))
		j = json_array_get(j, 0);
	err = json_object_get(j, "error");
	if (json_is_object(err))
		m = json_get_str(err, "message");
	else if (json_is_string(err))
		m = json_string_value(err);
	if (!m)
		m = json_get_str(j, "message");
	if (m && *m)
		add_one_line(out, m, strlen(m), HTTP_ERROR_QUOTE);
	else if (raw->len)
		add_one_line(out, raw->ptr, raw->len, HTTP_ERROR_QUOTE);
	else
		buf_adds(out, "no error message");
}

/*
 * Writes text to req->home/NNN-what.json, secrets redacted. Returns 0 or
 * a negative code (e filled): the record is part of the run.
 */
static int
record(struct call *c, const char *what, const char *text, struct err *e)
{
	struct buf b = BUF_INIT;
	char *path;
	int rc;

	if (!c->req->home)
		return 0;
	path = xasprintf("%s/%03d-%s.json", c->req->home, c->nreq, what);
	buf_adds(&b, text);
	buf_addch(&b, '\n');
	redact_buf(&b);
	rc = fs_write_atomic(path, b.ptr, b.len, e);
	buf_release(&b);
	free(path);
	return rc;
}

static int
record_response(struct call *c, long status, const char *ra, json_t *parsed,
		CURLcode cres, struct err *e)
{
	json_t *j;
	char *text;
	int rc;

	j = json_pack("{s:i, s:o, s:o}", "status", (int)status, "retry_after",
		      ra ? json_lossy_str(ra) : json_null(), "body",
		      parsed ? json_incref(parsed)
			     : json_lossy(c->body.ptr, c->body.len));
	if (cres != CURLE_OK)
		json_object_set_new(
		    j, "error",
		    json_lossy_str(c->curl_err[0] ? c->curl_err
						  : curl_easy_strerror(cres)));
	text = json_dumps(j, JSON_INDENT(2));
	rc = record(c, "response", text, e);
	free(text);
	json_decref(j);
	return rc;
}

/* The request body for the conversation so far. */
static json_t *
build_body(struct call *c, const char *sys_prompt)
{
	const struct config_provider *p = c->p;
	json_t *body;

	if (c->w->anthropic)
		return json_pack("{s:o, s:i, s:o, s:O, s:O, s:b}", "model",
				 json_lossy_str(p->model), "max_tokens",
				 HTTP_ANTHROPIC_MAX_TOKENS, "system",
				 json_lossy_str(sys_prompt), "messages",
				 c->messages, "tools", c->tools, "stream", 0);
	body = json_pack("{s:o, s:O, s:O, s:s, s:b}", "model",
			 json_lossy_str(p->model), "messages", c->messages,
			 "tools", c->tools, "tool_choice", "auto", "stream", 0);
	if (p->effort && *p->effort)
		json_object_set_new(body, "reasoning_effort",
				    json_lossy_str(p->effort));
	return body;
}

/* Exponential backoff for attempt (0, 1, ...) with jitter, in ms. */
static int64_t
backoff(struct call *c, int attempt)
{
	int64_t base = HTTP_BACKOFF_MAX_MS, d;

	if (attempt < 16)
		base = (int64_t)1000 << attempt;
	if (base > HTTP_BACKOFF_MAX_MS)
		base = HTTP_BACKOFF_MAX_MS;
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	d = base + (int64_t)(c->rng % (uint64_t)(base / 4 + 1));
	return d > HTTP_BACKOFF_MAX_MS ? HTTP_BACKOFF_MAX_MS : d;
}

/*
 * Transport errors worth another try: the server or the network may be
 * back in a moment. A bad URL or a certificate that fails to verify will
 * not get better.
 */
static int
transient(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_HTTP3:
	case CURLE_QUIC_CONNECT_ERROR:
		return 1;
	default:
		return 0;
	}
}

static int
retryable(long status)
{
	return status == 408 || status == 409 || status == 429 ||
	       (status >= 500 && status <= 599);
}

/* The fix to suggest when the API refuses the credentials. */
static void
auth_hint(struct call *c, struct buf *out)
{
	if (c->p->api_key_env)
		buf_addf(out, "check the key in %s", c->p->api_key_env);
	else
		buf_addf(out, "set %s or providers.%s.api_key_env",
			 c->w->key_env, c->p->name);
}

/*
 * POSTs the conversation and reads the answer, retrying as the API asks.
 * Returns 0 with the parsed 2xx body in *out (caller decrefs), 1 when the
 * call ended (c->r says how), or a negative code when the record could
 * not be written (e filled).
 */
static int
post(struct call *c, const char *sys_prompt, json_t **out, struct err *e)
{
	const char *name = c->p->name;
	int max_retries =
	    c->p->max_retries < 0 ? HTTP_DEFAULT_RETRIES : c->p->max_retries;
	json_t *body = build_body(c, sys_prompt), *parsed = NULL;
	char *compact = NULL, *pretty = NULL, *ra_raw = NULL;
	struct buf msg = BUF_INIT;
	int64_t now, left, ra, delay;
	long status = 0;
	int attempt, rc = 1;
	CURLcode cres;

	if (!body)
		BUG("cannot build the request body");
	compact = json_dumps(body, JSON_COMPACT);
	pretty = json_dumps(body, JSON_INDENT(2));
	for (attempt = 0;; attempt++) {
		json_decref(parsed);
		parsed = NULL;
		FREE_AND_NULL(ra_raw);
		buf_reset(&msg);
		now = time_mono_ms();
		left = c->deadline ? c->deadline - now : 0;
		if (c->deadline && left <= 0) {
			finish(c, AGENT_TIMEOUT, AGENT_FAIL_TIMEOUT,
			       "%s: timed out after %d s", name,
			       c->p->timeout_seconds);
			goto out;
		}
		if (watch(c, 0)) {
			finish(c, AGENT_STOPPED, AGENT_FAIL_NONE, "%s: stopped",
			       name);
			goto out;
		}
		c->nreq++;
		rc = record(c, "request", pretty, e);
		if (rc < 0)
			goto out;
		buf_reset(&c->body);
		c->curl_err[0] = '\0';
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, compact);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)strlen(compact));
		curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)left);
		curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS,
				 (long)(left && left < HTTP_CONNECT_MS
					    ? left
					    : HTTP_CONNECT_MS));
		cres = curl_easy_perform(c->curl);
		status = 0;
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
		ra = retry_after(c, &ra_raw);
		if (c->body.len)
			parsed = json_loadb(c->body.ptr, c->body.len, 0, NULL);
		rc = record_response(c, status, ra_raw, parsed, cres, e);
		if (rc < 0)
			goto out;
		rc = 1;
		if (c->stopped || cres == CURLE_ABORTED_BY_CALLBACK) {
			finish(c, AGENT_STOPPED, AGENT_FAIL_NONE, "%s: stopped",
			       name);
			goto out;
		}
		if (cres == CURLE_OPERATION_TIMEDOUT && c->deadline &&
		    time_mono_ms() >= c->deadline) {
			finish(c, AGENT_TIMEOUT, AGENT_FAIL_TIMEOUT,
			       "%s: timed out after %d s", name,
			       c->p->timeout_seconds);
			goto out;
		}
		/* The status of the last failure; a success clears it. */
		c->r->http_status =
		    status >= 200 && status <= 299 ? 0 : (int)status;
		if (cres == CURLE_WRITE_ERROR) {
			finish(c, AGENT_EXIT, AGENT_FAIL_BAD_OUTPUT,
			       "%s: the response from %s is larger than %d "
			       "bytes",
			       name, c->url, HTTP_MAX_RESPONSE);
			goto out;
		}
		if (cres != CURLE_OK) {
			buf_addf(&msg, "cannot reach %s: %s", c->url,
				 c->curl_err[0] ? c->curl_err
						: curl_easy_strerror(cres));
			if (!transient(cres)) {
				finish(c, AGENT_EXIT, AGENT_FAIL_CRASH,
				       "%s: %s", name, msg.ptr);
				goto out;
			}
		} else if (status >= 200 && status <= 299) {
			if (!json_is_object(parsed)) {
				buf_addf(&msg,
					 "%s: HTTP %ld but the body is "
					 "not a JSON object: ",
					 name, status);
				add_one_line(&msg, c->body.ptr, c->body.len,
					     HTTP_ERROR_QUOTE);
				finish(c, AGENT_EXIT, AGENT_FAIL_BAD_OUTPUT,
				       "%s", msg.ptr);
				goto out;
			}
			*out = parsed;
			parsed = NULL;
			rc = 0;
			goto out;
		} else {
			buf_addf(&msg, "HTTP %ld: ", status);
			api_message(parsed, &c->body, &msg);
			if (status == 401 || status == 403) {
				buf_adds(&msg, "; ");
				auth_hint(c, &msg);
				finish(c, AGENT_EXIT, AGENT_FAIL_AUTH, "%s: %s",
				       name, msg.ptr);
				goto out;
			}
			if (agent_context_overflow(msg.ptr)) {
				finish(c, AGENT_EXIT, AGENT_FAIL_CONTEXT,
				       "%s: %s", name, msg.ptr);
				goto out;
			}
			if (!retryable(status)) {
				finish(c, AGENT_EXIT, AGENT_FAIL_CRASH,
				       "%s: %s", name, msg.ptr);
				goto out;
			}
		}
		/*
		 * Retryable: a transport error, 408, 409, 429 or 5xx. A
		 * server asking for more than a minute is left to the
		 * engine, whose quota wait shows in the run's status.
		 */
		delay = ra >= 0 ? ra : backoff(c, attempt);
		if (attempt < max_retries && delay <= HTTP_BACKOFF_MAX_MS &&
		    (!c->deadline || time_mono_ms() + delay < c->deadline)) {
			note(c, "retry %d of %d in %.1f s: %s", attempt + 1,
			     max_retries, (double)delay / 1000, msg.ptr);
			if (nap(c, delay)) {
				finish(c, AGENT_STOPPED, AGENT_FAIL_NONE,
				       "%s: stopped", name);
				goto out;
			}
			continue;
		}
		if (status == 429) {
			c->r->reset_at_ms = reset_from_headers(c);
			if (ra >= 0)
				c->r->reset_at_ms = time_now_ms() + ra;
			finish(c, AGENT_EXIT, AGENT_FAIL_QUOTA, "%s: %s", name,
			       msg.ptr);
		} else {
			finish(c, AGENT_EXIT, AGENT_FAIL_UNAVAILABLE, "%s: %s",
			       name, msg.ptr);
		}
		goto out;
	}
out:
	buf_release(&msg);
	free(ra_raw);
	free(compact);
	free(pretty);
	json_decref(parsed);
	json_decref(body);
	return rc;
}

/* Adds usage counts to r (a missing field counts 0). */
static void
add_usage(struct call *c, json_t *resp)
{
	json_t *u = json_object_get(resp, "usage");

	if (c->w->anthropic) {
		c->r->tokens_in +=
		    json_integer_value(json_object_get(u, "input_tokens")) +
		    json_integer_value(
			json_object_get(u, "cache_creation_input_tokens")) +
		    json_integer_value(
			json_object_get(u, "cache_read_input_tokens"));
		c->r->tokens_out +=
		    json_integer_value(json_object_get(u, "output_tokens"));
	} else {
		c->r->tokens_in +=
		    json_integer_value(json_object_get(u, "prompt_tokens"));
		c->r->tokens_out +=
		    json_integer_value(json_object_get(u, "completion_tokens"));
	}
}

/*
 * Reads a Chat Completions response into t. The assistant message is
 * rebuilt rather than echoed, with arguments always a JSON string (some
 * servers send an object) and an id for every call. -1: not a chat
 * completion.
 */
static int
parse_openai(struct call *c, json_t *resp, struct turn *t)
{
	json_t *msg, *content, *calls, *call, *fn, *args, *input, *out_calls;
	const char *name, *id;
	char *args_text;
	size_t i, j;

	msg = json_object_get(
	    json_array_get(json_object_get(resp, "choices"), 0), "message");
	if (!json_is_object(msg))
		return -1;
	content = json_object_get(msg, "content");
	if (json_is_string(content)) {
		buf_adds(&t->text, json_string_value(content));
	} else if (json_is_array(content)) {
		json_array_foreach(
		    content, j,
		    call) if (json_is_string(json_object_get(call, "text")))
		    buf_adds(&t->text, json_get_str(call, "text"));
	}
	calls = json_object_get(msg, "tool_calls");
	if (!json_is_array(calls) || !json_array_size(calls))
		return 0;
	out_calls = json_array();
	t->assistant =
	    json_pack("{s:s, s:o, s:o}", "role", "assistant", "content",
		      t->text.len ? json_string(t->text.ptr) : json_null(),
		      "tool_calls", out_calls);
	json_array_foreach(calls, i, call)
	{
		fn = json_object_get(call, "function");
		name = json_get_str(fn, "name");
		id = json_get_str(call, "id");
		if (!name)
			return -1;
		args = json_object_get(fn, "arguments");
		input = NULL;
		if (json_is_string(args)) {
			/* No arguments at all ("") mean none: {}. */
			args_text = xstrdup(*json_string_value(args)
						? json_string_value(args)
						: "{}");
			input = json_loads(args_text, JSON_DECODE_ANY, NULL);
		} else {
			input = args ? json_incref(args) : json_object();
			args_text =
			    json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY);
		}
		json_array_append_new(
		    out_calls,
		    json_pack("{s:o, s:s, s:{s:s, s:s}}", "id",
			      id ? json_string(id)
				 : json_sprintf("call_%d_%zu", c->r->steps, i),
			      "type", "function", "function", "name", name,
			      "arguments", args_text));
		if (json_is_object(input))
			json_array_append_new(
			    t->calls,
			    json_pack("{s:O, s:s, s:o}", "id",
				      json_object_get(
					  json_array_get(out_calls, i), "id"),
				      "name", name, "input", input));
		else
			json_array_append_new(
			    t->calls,
			    json_pack("{s:O, s:s, s:s}", "id",
				      json_object_get(
					  json_array_get(out_calls, i), "id"),
				      "name", name, "error",
				      "the arguments are not a JSON "
				      "object"));
		if (!json_is_object(input))
			json_decref(input);
		free(args_text);
	}
	return 0;
}

/*
 * Reads a Messages response into t. The content blocks go back as they
 * came (thinking blocks must). -1: not a message.
 */
static int
parse_anthropic(struct call *c, json_t *resp, struct turn *t)
{
	json_t *content = json_object_get(resp, "content"), *b, *input;
	const char *type, *name, *id;
	size_t i;

	(void)c;
	if (!json_is_array(content))
		return -1;
	json_array_foreach(content, i, b)
	{
		type = json_get_str(b, "type");
		if (!type)
			continue;
		if (!strcmp(type, "text") && json_get_str(b, "text")) {
			if (t->text.len)
				buf_addch(&t->text, '\n');
			buf_adds(&t->text, json_get_str(b, "text"));
		} else if (!strcmp(type, "tool_use")) {
			name = json_get_str(b, "name");
			id = json_get_str(b, "id");
			input = json_object_get(b, "input");
			if (!name || !id)
				return -1;
			if (json_is_object(input))
				json_array_append_new(
				    t->calls,
				    json_pack("{s:s, s:s, s:O}", "id", id,
					      "name", name, "input", input));
			else
				json_array_append_new(
				    t->calls,
				    json_pack("{s:s, s:s, s:s}", "id", id,
					      "name", name, "error",
					      "the input is not a JSON "
					      "object"));
		}
	}
	if (json_array_size(t->calls))
		t->assistant = json_pack("{s:s, s:O}", "role", "assistant",
					 "content", content);
	return 0;
}

/*
 * Runs the tool calls of t, appends the assistant message and the
 * results to the conversation, and writes a transcript line per call.
 */
static void
run_tools(struct call *c, struct turn *t)
{
	struct tools_ctx ctx = {
		.cwd = c->root,
		.sandbox = c->req->sandbox,
		.env = &c->tool_env,
		.wake_fd = c->wake_fd,
		.tick_ms = c->req->tick_ms,
		.on_event = tool_event,
		.arg = c,
		.deadline_ms = c->deadline,
	};
	struct buf out = BUF_INIT, line = BUF_INIT;
	json_t *call, *results = json_array(), *content;
	const char *err;
	size_t i;
	int rc;

	json_array_append(c->messages, t->assistant);
	json_array_foreach(t->calls, i, call)
	{
		buf_reset(&out);
		buf_reset(&line);
		err = json_get_str(call, "error");
		if (c->stopped) {
			buf_adds(&out, "stopped before it ran");
			rc = -1;
		} else if (err) {
			buf_adds(&out, err);
			rc = -1;
		} else {
			ctx.wake_fd = c->wake_fd;
			rc = tools_call(&ctx, json_get_str(call, "name"),
					json_object_get(call, "input"), &out);
		}
		tools_describe(json_get_str(call, "name"),
			       json_object_get(call, "input"), rc, &out, &line);
		note(c, "step %d: %s", c->r->steps, line.ptr);
		content = out.len ? json_lossy(out.ptr, out.len)
				  : json_string("(no output)");
		if (c->w->anthropic)
			json_array_append_new(
			    results,
			    json_pack("{s:s, s:O, s:o, s:b}", "type",
				      "tool_result", "tool_use_id",
				      json_object_get(call, "id"), "content",
				      content, "is_error", rc < 0));
		else
			json_array_append_new(
			    c->messages, json_pack("{s:s, s:O, s:o}", "role",
						   "tool", "tool_call_id",
						   json_object_get(call, "id"),
						   "content", content));
	}
	if (c->w->anthropic)
		json_array_append_new(c->messages,
				      json_pack("{s:s, s:O}", "role", "user",
						"content", results));
	json_decref(results);
	buf_release(&line);
	buf_release(&out);
}

/* The conversation's size as sent (compact JSON), in bytes. */
static int64_t
messages_size(const json_t *messages)
{
	char *s = json_dumps(messages, JSON_COMPACT);
	int64_t n = s ? (int64_t)strlen(s) : 0;

	free(s);
	return n;
}

/* Replaces the text holder[key] of a tool result with a short note. */
static int
drop_result(json_t *holder, const char *key)
{
	const char *old = json_string_value(json_object_get(holder, key));
	size_t len = old ? strlen(old) : 0;

	if (!old || len <= HTTP_DROPPED_MIN)
		return 0;
	json_object_set_new(holder, key,
			    json_sprintf("[an earlier tool result of %zu "
					 "bytes, dropped to fit the model's "
					 "context window; run the tool again "
					 "if you need it]",
					 len));
	return 1;
}

/*
 * The model's context window is full: every tool result but those of
 * the latest turn becomes a short note, as OpenViber compacts a
 * conversation. Returns how many were dropped (0: nothing to drop).
 */
static int
compact_messages(struct call *c)
{
	size_t i, j, last = json_array_size(c->messages);
	int n = 0;

	/* the latest turn's results: from the last assistant message on */
	while (last > 0) {
		const char *role = json_get_str(
		    json_array_get(c->messages, last - 1), "role");

		if (role && !strcmp(role, "assistant"))
			break;
		last--;
	}
	if (last)
		last--;
	for (i = 0; i < last; i++) {
		json_t *m = json_array_get(c->messages, i), *parts;
		const char *role = json_get_str(m, "role");

		if (role && !strcmp(role, "tool")) {
			n += drop_result(m, "content");
			continue;
		}
		parts = json_object_get(m, "content");
		for (j = 0; json_is_array(parts) && j < json_array_size(parts);
		     j++) {
			json_t *part = json_array_get(parts, j);
			const char *type = json_get_str(part, "type");

			if (type && !strcmp(type, "tool_result"))
				n += drop_result(part, "content");
		}
	}
	return n;
}

/* Reads the key; 0, or 1 when the call ended for want of it. */
static int
get_key(struct call *c, const char **key)
{
	const char *var = c->p->api_key_env;

	*key = getenv(var ? var : c->w->key_env);
	if (*key && !**key)
		*key = NULL;
	if (!*key && var) {
		finish(c, AGENT_EXIT, AGENT_FAIL_AUTH,
		       "the API key variable %s is not set", var);
		return 1;
	}
	return 0;
}

/* Sets up the handle: URL, headers, callbacks. 0, or -1 (e filled). */
static int
setup_curl(struct call *c, const char *key, struct err *e)
{
	const char *base = c->p->base_url && *c->p->base_url
			       ? c->p->base_url
			       : c->w->default_base;
	size_t n = strlen(base);
	char *h;

	if (n && base[n - 1] == '/')
		n--;
	c->url = xasprintf("%.*s%s", (int)n, base, c->w->path);
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return err_set(e, BATON_EINVAL, "cannot initialise libcurl: %s",
			       curl_easy_strerror(curl_init_rc));
	c->curl = curl_easy_init();
	if (!c->curl)
		return err_set(e, BATON_EINVAL, "cannot initialise libcurl");
	c->headers =
	    curl_slist_append(c->headers, "Content-Type: application/json");
	c->headers = curl_slist_append(c->headers, "Expect:");
	if (c->w->anthropic)
		c->headers = curl_slist_append(c->headers,
					       "anthropic-version: 2023-06-01");
	if (key) {
		h = c->w->anthropic
			? xasprintf("x-api-key: %s", key)
			: xasprintf("Authorization: Bearer %s", key);
		c->headers = curl_slist_append(c->headers, h);
		explicit_bzero(h, strlen(h));
		free(h);
	}
	if (!c->headers)
		return err_set(e, -ENOMEM, "cannot build the HTTP headers");
	curl_easy_setopt(c->curl, CURLOPT_URL, c->url);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
	curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "baton");
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->curl_err);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
	return 0;
}

/*
 * The tool loop. Returns 0 when the call was made (r says how it ended),
 * or a negative code when baton could not do its part: no model, an
 * unusable worktree, a record that cannot be written.
 */
static int
http_run(const struct wire *w, const struct agent_request *req,
	 struct agent_result *r, struct err *e)
{
	const struct config_provider *p = req->provider;
	struct call c = {
		.req = req,
		.p = p,
		.w = w,
		.r = r,
		.wake_fd = req->wake_fd,
		.out_fd = -1,
		.body = BUF_INIT,
		.tool_env = STRVEC_INIT,
	};
	struct turn t = { .text = BUF_INIT };
	int max_steps = p->max_steps > 0 ? p->max_steps : HTTP_DEFAULT_STEPS;
	json_t *resp = NULL;
	char *sys_prompt = NULL;
	const char *key;
	int rc = 0;

	c.start = time_mono_ms();
	c.rng = (uint64_t)time_now_ms() ^ ((uint64_t)getpid() << 32) ^ 1;
	if (p->timeout_seconds > 0)
		c.deadline = c.start + (int64_t)p->timeout_seconds * 1000;
	if (req->tick_ms > 0)
		c.next_tick = c.start + req->tick_ms;
	buf_init(&c.body, HTTP_MAX_RESPONSE);
	buf_release(&r->text);
	buf_init(&r->text, BUF_MAX_AGENT_TAIL);
	r->outcome = AGENT_EXIT;
	r->status = 1;
	if (req->out_path) {
		c.out_fd = fs_open_nofollow(req->out_path,
					    O_WRONLY | O_CREAT | O_APPEND,
					    0644, e);
		if (c.out_fd < 0) {
			rc = c.out_fd;
			goto fail;
		}
	}
	if (!p->model || !*p->model) {
		rc = err_set(e, BATON_EINVAL,
			     "provider '%s': no model is set "
			     "(providers.%s.model)",
			     p->name, p->name);
		goto fail;
	}
	c.root = realpath(req->cwd, NULL);
	if (!c.root) {
		rc = err_set(e, -errno, "cannot resolve the worktree '%s': %s",
			     req->cwd, strerror(errno));
		goto fail;
	}
	if (req->home) {
		rc = fs_mkdir_p(req->home, 0755, e);
		if (rc < 0)
			goto fail;
	}
	if (get_key(&c, &key))
		goto out;
	rc = setup_curl(&c, key, e);
	if (rc < 0)
		goto fail;
	event(&c, SPAWN_EV_STARTED);
	sys_prompt = xasprintf(
	    "You are a coding agent working in the directory %s, a git "
	    "worktree. Do the task you are given by using the tools: "
	    "read, search and change files there and run commands; "
	    "relative paths are relative to that directory. When the "
	    "task is done, answer with a final message and no tool "
	    "calls: that message is your report.",
	    c.root);
	/* Commands the model runs have no use for the key: blank it. */
	if (req->env)
		strvec_pushv(&c.tool_env, req->env->v);
	strvec_pushf(&c.tool_env,
		     "%s=", p->api_key_env ? p->api_key_env : w->key_env);
	c.tools = tools_schema(w->anthropic);
	c.messages = json_array();
	if (!w->anthropic)
		json_array_append_new(c.messages,
				      json_pack("{s:s, s:o}", "role", "system",
						"content",
						json_lossy_str(sys_prompt)));
	json_array_append_new(c.messages,
			      json_pack("{s:s, s:o}", "role", "user", "content",
					json_lossy_str(req->prompt)));
	note(&c, "%s: %s model %s at %s", p->name, w->type, p->model, c.url);
	for (;;) {
		if (r->steps >= max_steps) {
			finish(&c, AGENT_EXIT, AGENT_FAIL_LIMIT,
			       "%s: stopped after %d steps, the limit "
			       "(providers.%s.max_steps)",
			       p->name, max_steps, p->name);
			break;
		}
		if (p->max_tokens > 0 &&
		    r->tokens_in + r->tokens_out > p->max_tokens) {
			finish(&c, AGENT_EXIT, AGENT_FAIL_LIMIT,
			       "%s: used %lld tokens, more than the limit of "
			       "%lld (providers.%s.max_tokens)",
			       p->name, (long long)r->tokens_in + r->tokens_out,
			       p->max_tokens, p->name);
			break;
		}
		rc = post(&c, sys_prompt, &resp, e);
		if (rc < 0)
			goto fail;
		if (rc > 0 && r->failure == AGENT_FAIL_CONTEXT &&
		    !r->compacted_before) {
			/* once: older tool results go, and the request again */
			int64_t before = messages_size(c.messages);
			int n = compact_messages(&c);

			if (n) {
				r->compacted_before = before;
				r->compacted_after = messages_size(c.messages);
				note(&c, "the context window is full: %d "
				     "earlier tool result%s dropped (%lld to "
				     "%lld bytes); asking again",
				     n, n == 1 ? "" : "s", (long long)before,
				     (long long)r->compacted_after);
				r->outcome = AGENT_OK;
				r->failure = AGENT_FAIL_NONE;
				r->status = 0;
				r->http_status = 0;
				buf_reset(&r->message);
				continue;
			}
		}
		if (rc > 0) {
			rc = 0;
			break;
		}
		r->steps++;
		add_usage(&c, resp);
		json_decref(t.assistant);
		json_decref(t.calls);
		t.assistant = NULL;
		t.calls = json_array();
		buf_reset(&t.text);
		if ((w->anthropic ? parse_anthropic(&c, resp, &t)
				  : parse_openai(&c, resp, &t)) < 0) {
			finish(&c, AGENT_EXIT, AGENT_FAIL_BAD_OUTPUT,
			       "%s: the response is not a %s", p->name,
			       w->anthropic ? "message" : "chat completion");
			break;
		}
		json_decref(resp);
		resp = NULL;
		note(&c, "step %d: %zu tool call%s (%lld tokens in, %lld out)",
		     r->steps, json_array_size(t.calls),
		     json_array_size(t.calls) == 1 ? "" : "s",
		     (long long)r->tokens_in, (long long)r->tokens_out);
		if (!json_array_size(t.calls)) {
			buf_add(&r->text, t.text.ptr, t.text.len);
			note(&c, "%s", t.text.ptr);
			finish(&c, AGENT_OK, AGENT_FAIL_NONE, "%s", "");
			break;
		}
		if (t.text.len)
			note(&c, "%s", t.text.ptr);
		run_tools(&c, &t);
		if (c.stopped) {
			finish(&c, AGENT_STOPPED, AGENT_FAIL_NONE,
			       "%s: stopped", p->name);
			break;
		}
	}
	goto out;
fail:
	r->outcome = AGENT_EXIT;
	r->failure = AGENT_FAIL_CRASH;
	r->status = 1;
	buf_reset(&r->message);
	buf_adds(&r->message, e && e->msg[0] ? e->msg : baton_strerror(rc));
out:
	agent__price(p, r);
	r->duration_ms = time_mono_ms() - c.start;
	/* Keeps the class set here; adds a reset time read from the text. */
	agent_classify(r);
	json_decref(resp);
	json_decref(t.assistant);
	json_decref(t.calls);
	buf_release(&t.text);
	json_decref(c.messages);
	json_decref(c.tools);
	strvec_clear(&c.tool_env);
	free(sys_prompt);
	if (c.curl)
		curl_easy_cleanup(c.curl);
	curl_slist_free_all(c.headers);
	free(c.url);
	free(c.root);
	buf_release(&c.body);
	if (c.out_fd >= 0)
		close(c.out_fd);
	return rc;
}

static int
openai_run(const struct agent_request *req, struct agent_result *r,
	   struct err *e)
{
	return http_run(&openai_wire, req, r, e);
}

static int
anthropic_run(const struct agent_request *req, struct agent_result *r,
	      struct err *e)
{
	return http_run(&anthropic_wire, req, r, e);
}

const struct agent_adapter agent_openai_adapter = {
	.info = {
		.type = "openai",
		.program = NULL,
		.install_hint = "nothing to install: baton calls the API "
				"itself (base_url, model, api_key_env)",
		.auth_hint = "set OPENAI_API_KEY or providers.NAME.api_key_env",
		.is_cli = 0,
	},
	.run = openai_run,
	.parse = NULL,
};

const struct agent_adapter agent_anthropic_adapter = {
	.info = {
		.type = "anthropic",
		.program = NULL,
		.install_hint = "nothing to install: baton calls the API "
				"itself (base_url, model, api_key_env)",
		.auth_hint =
			"set ANTHROPIC_API_KEY or providers.NAME.api_key_env",
		.is_cli = 0,
	},
	.run = anthropic_run,
	.parse = NULL,
};
