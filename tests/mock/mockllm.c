/*
 * mockllm: the mock model server of baton's tests.
 *
 * It speaks just enough of four model wire APIs for the agent CLIs that
 * baton drives (Claude Code, Codex, Gemini CLI, Qwen Code, opencode), and
 * for baton's own HTTP agent, to run a whole agent loop offline:
 *
 *   POST .../v1/messages                       Anthropic Messages  "anthropic"
 *   POST .../chat/completions                  OpenAI Chat         "chat"
 *   POST .../responses                         OpenAI Responses    "responses"
 *   POST .../models/M:streamGenerateContent    Gemini (SSE)        "gemini"
 *   POST .../models/M:generateContent          Gemini (JSON)       "gemini"
 *
 * plus HEAD (connectivity probes), GET .../models and count_tokens. The
 * shapes are those each real CLI was seen to accept when run against a
 * mock, streaming (SSE) and not.
 *
 * Every answer is decided from the request alone (apart from the --fail
 * counter), so a client's retries and side requests need no server state:
 *
 *   request ─┬─> user text ──> first script rule whose "match" occurs in it
 *            ├─> k = number of tool results in the request
 *            └─> tools offered?  no ───────────────> the rule's text
 *                                yes, k < #actions ─> action k as a tool call
 *                                yes, otherwise ───> the rule's text
 *
 * A "write" action is mapped onto whichever write tool (or, failing that,
 * shell tool) the client offers, with the argument names of that tool's
 * schema, so that one script drives every CLI. tests/mock/README.md has
 * the script format.
 *
 * The server is a single poll loop over non-blocking sockets bound to
 * 127.0.0.1. Each connection carries one request and is closed after the
 * response (Connection: close):
 *
 *   accept ──> READING ──request complete──> WRITING ──all sent──> closed
 *                 │   (a 100 Continue may be       │
 *                 │    sent while reading)          └─ request not read in
 *                 │                                    full (413, 400):
 *                 │                                    shut down our side,
 *                 │                                    LINGER reading until
 *                 │                                    EOF or 2 s ──> closed
 *                 ├── EOF, error or idle timeout ──> closed
 *                 └── a "hang" rule's text ──> HOLD: no answer, reading
 *                     until EOF or 600 s ──> closed
 *
 * Lingering keeps the kernel from answering the client's unread bytes
 * with a reset that could destroy our response before it is read.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define REQ_MAX	       (16u << 20) /* a whole request: head and body */
#define READ_CHUNK     65536
#define CONN_MAX       1024
#define IDLE_SECONDS   120 /* a connection silent this long is dropped */
#define LINGER_SECONDS 2
#define HOLD_SECONDS   600 /* a "hang" rule holds its connection this long */
#define DEFAULT_TEXT   "OK"
#define DEFAULT_MODEL  "mock-model"
#define DEFAULT_IN     100
#define DEFAULT_OUT    20

/* --- small helpers ------------------------------------------------------ */

static void fatalx(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/* Prints "mockllm: MSG" to stderr and exits 1. */
static void
fatalx(const char *fmt, ...)
{
	va_list ap;

	fputs("mockllm: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

static void *
xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		abort();
	return p;
}

static char *
xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static char *
xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

static int
has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !memcmp(s + n - m, suffix, m);
}

/*
 * Growable byte strings with the strbuf invariant: ptr is never NULL and
 * always NUL-terminated. Allocation failure aborts.
 */
struct sbuf {
	char *ptr;
	size_t len, cap;
};

static char sbuf_slop[1];
/* clang-format off */
#define SBUF_INIT { sbuf_slop, 0, 0 }
/* clang-format on */

static void
sb_init(struct sbuf *b)
{
	b->ptr = sbuf_slop;
	b->len = 0;
	b->cap = 0;
}

/* Makes room for extra more bytes (and the NUL). */
static void
sb_grow(struct sbuf *b, size_t extra)
{
	size_t want;

	if (extra > SIZE_MAX / 2 - b->len)
		abort();
	want = b->len + extra + 1;
	if (want <= b->cap)
		return;
	if (want < b->cap * 2)
		want = b->cap * 2;
	if (want < 64)
		want = 64;
	if (b->cap == 0) {
		b->ptr = xmalloc(want);
		b->ptr[0] = '\0';
	} else {
		b->ptr = xrealloc(b->ptr, want);
	}
	b->cap = want;
}

static void
sb_add(struct sbuf *b, const void *data, size_t n)
{
	sb_grow(b, n);
	memcpy(b->ptr + b->len, data, n);
	b->len += n;
	b->ptr[b->len] = '\0';
}

static void
sb_adds(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void sb_addf(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
sb_addf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
	sb_grow(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void
sb_release(struct sbuf *b)
{
	if (b->cap)
		free(b->ptr);
	sb_init(b);
}

/* Appends j as compact JSON. */
static void
sb_add_json(struct sbuf *b, const json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);

	if (!s)
		abort();
	sb_adds(b, s);
	free(s);
}

/* Appends a piece of prompt text, newline-separated from what is there. */
static void
sb_add_piece(struct sbuf *b, const char *s)
{
	if (b->len && b->ptr[b->len - 1] != '\n')
		sb_adds(b, "\n");
	sb_adds(b, s);
}

/* Returns a copy of s with every "{cwd}" replaced by cwd ("." if NULL). */
static char *
subst_cwd(const char *s, const char *cwd)
{
	struct sbuf b = SBUF_INIT;
	const char *p;

	if (!cwd)
		cwd = ".";
	for (p = strstr(s, "{cwd}"); p; p = strstr(s, "{cwd}")) {
		sb_add(&b, s, (size_t)(p - s));
		sb_adds(&b, cwd);
		s = p + 5;
	}
	sb_adds(&b, s);
	if (!b.cap)
		return xstrdup("");
	return b.ptr;
}

/* Replaces "{cwd}" in every string inside j, in place. */
static void
subst_cwd_json(json_t *j, const char *cwd)
{
	const char *key;
	json_t *v;
	size_t i;
	char *s;

	if (json_is_object(j)) {
		json_object_foreach(j, key, v)
		{
			if (json_is_string(v)) {
				s = subst_cwd(json_string_value(v), cwd);
				json_object_set_new(j, key, json_string(s));
				free(s);
			} else {
				subst_cwd_json(v, cwd);
			}
		}
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
		{
			if (json_is_string(v)) {
				s = subst_cwd(json_string_value(v), cwd);
				json_array_set_new(j, i, json_string(s));
				free(s);
			} else {
				subst_cwd_json(v, cwd);
			}
		}
	}
}

/* Appends s to b quoted for sh: 'it'\''s'. */
static void
sb_add_shquote(struct sbuf *b, const char *s)
{
	sb_adds(b, "'");
	for (; *s; s++) {
		if (*s == '\'')
			sb_adds(b, "'\\''");
		else
			sb_add(b, s, 1);
	}
	sb_adds(b, "'");
}

/* --- options and script ------------------------------------------------- */

static struct {
	int port;
	const char *port_file;
	const char *script_file;
	const char *log_file;
	const char *require_key;
	long context_limit; /* a model request body larger than this gets
			       its wire's context-length error; 0: none */
	long fail_left; /* model requests still to fail */
	int fail_status;
	long fail_reset; /* Retry-After seconds for 429; -1: none */
} opt = { .fail_reset = -1 };

static json_t *rules;	  /* the script's "rules" array, or NULL */
static FILE *log_fp;	  /* --log, or NULL */
static unsigned long seq; /* requests served so far */
static volatile sig_atomic_t stopping;

static void
usage(void)
{
	fputs(
	    "usage: mockllm [--port N] [--port-file F] [--script F] [--log F]\n"
	    "               [--fail N:STATUS[:RESET_SECONDS]] "
	    "[--require-key KEY]\n"
	    "               [--context-limit BYTES]\n",
	    stderr);
	exit(2);
}

/* Parses a decimal number in [min, max] ending at end; 0 or -1. */
static int
parse_long(const char *s, char **end, long min, long max, long *out)
{
	long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, end, 10);
	if (errno || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* --fail N:STATUS[:RESET] */
static void
parse_fail(const char *arg)
{
	char *p;
	long n, status, reset = -1;

	if (parse_long(arg, &p, 0, 1000000, &n) || *p != ':')
		goto bad;
	if (parse_long(p + 1, &p, 400, 599, &status))
		goto bad;
	if (*p == ':') {
		if (parse_long(p + 1, &p, 0, 86400, &reset))
			goto bad;
	}
	if (*p)
		goto bad;
	opt.fail_left = n;
	opt.fail_status = (int)status;
	opt.fail_reset = reset;
	return;
bad:
	fprintf(stderr,
		"mockllm: bad --fail '%s' (want N:STATUS[:RESET], "
		"STATUS 400-599)\n",
		arg);
	exit(2);
}

static void script_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

static void
script_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mockllm: bad script '%s': ", opt.script_file);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/*
 * Reads and checks the --script file; any error exits 2 with a message,
 * so a broken test fixture is loud rather than answering "OK".
 */
static void
load_script(void)
{
	json_error_t jerr;
	json_t *doc, *r, *a, *w, *c, *u;
	size_t i, j;

	doc = json_load_file(opt.script_file, 0, &jerr);
	if (!doc)
		script_error("line %d: %s", jerr.line, jerr.text);
	rules = json_incref(json_object_get(doc, "rules"));
	json_decref(doc);
	if (!json_is_array(rules))
		script_error("no \"rules\" array");
	json_array_foreach(rules, i, r)
	{
		if (!json_is_object(r))
			script_error("rule %zu is not an object", i);
		if (json_object_get(r, "match") &&
		    !json_is_string(json_object_get(r, "match")))
			script_error("rule %zu: \"match\" is not a string", i);
		if (json_object_get(r, "text") &&
		    !json_is_string(json_object_get(r, "text")))
			script_error("rule %zu: \"text\" is not a string", i);
		if (json_object_get(r, "hang") &&
		    !json_is_boolean(json_object_get(r, "hang")))
			script_error("rule %zu: \"hang\" is not a boolean", i);
		u = json_object_get(r, "usage");
		if (u && (!json_is_object(u) ||
			  (json_object_get(u, "in") &&
			   !json_is_integer(json_object_get(u, "in"))) ||
			  (json_object_get(u, "out") &&
			   !json_is_integer(json_object_get(u, "out")))))
			script_error("rule %zu: \"usage\" wants integers "
				     "\"in\" and \"out\"",
				     i);
		a = json_object_get(r, "actions");
		if (a && !json_is_array(a))
			script_error("rule %zu: \"actions\" is not an array",
				     i);
		json_array_foreach(a, j, c)
		{
			w = json_object_get(c, "write");
			if (w) {
				if (!json_is_string(
					json_object_get(w, "path")) ||
				    !json_is_string(
					json_object_get(w, "content")))
					script_error(
					    "rule %zu action %zu: \"write\" "
					    "wants strings \"path\" and "
					    "\"content\"",
					    i, j);
				continue;
			}
			w = json_object_get(c, "call");
			if (w) {
				if (!json_is_string(
					json_object_get(w, "name")) ||
				    (json_object_get(w, "args") &&
				     !json_is_object(
					 json_object_get(w, "args"))))
					script_error(
					    "rule %zu action %zu: \"call\" "
					    "wants a string \"name\" and an "
					    "object \"args\"",
					    i, j);
				continue;
			}
			script_error("rule %zu action %zu: neither \"write\" "
				     "nor \"call\"",
				     i, j);
		}
	}
}

/* --- what a model request asks for -------------------------------------- */

enum wire {
	WIRE_OTHER,
	WIRE_ANTHROPIC,
	WIRE_CHAT,
	WIRE_RESPONSES,
	WIRE_GEMINI
};

/* The parts of a model request that decide the answer, in any wire. */
struct ask {
	char *model; /* echoed back */
	int stream;
	int include_usage;    /* chat: stream_options.include_usage */
	struct sbuf user;     /* all text the user role sent */
	struct sbuf sys;      /* system / developer text */
	json_t *tool_names;   /* array: the offered tools, in order */
	json_t *tool_schemas; /* object: name -> JSON schema (or null) */
	json_t *custom_tools; /* object: name -> true (Responses "custom") */
	int tool_results;
};

static void
ask_init(struct ask *a)
{
	memset(a, 0, sizeof(*a));
	sb_init(&a->user);
	sb_init(&a->sys);
	a->tool_names = json_array();
	a->tool_schemas = json_object();
	a->custom_tools = json_object();
}

static void
ask_release(struct ask *a)
{
	free(a->model);
	sb_release(&a->user);
	sb_release(&a->sys);
	json_decref(a->tool_names);
	json_decref(a->tool_schemas);
	json_decref(a->custom_tools);
	memset(a, 0, sizeof(*a));
}

static void
add_tool(struct ask *a, const char *name, json_t *schema, int custom)
{
	if (!name || !*name)
		return;
	json_array_append_new(a->tool_names, json_string(name));
	json_object_set(a->tool_schemas, name, schema ? schema : json_null());
	if (custom)
		json_object_set_new(a->custom_tools, name, json_true());
}

/*
 * Appends the text of a message's content to b: a string, or the "text" of
 * every part of an array whose "type" is type1 or type2 (any part with
 * text when type1 is NULL; Gemini parts have no type). Thought parts are
 * skipped.
 */
static void
add_text(struct sbuf *b, json_t *content, const char *type1, const char *type2)
{
	const char *s, *t;
	json_t *part;
	size_t i;

	if (json_is_string(content)) {
		sb_add_piece(b, json_string_value(content));
		return;
	}
	json_array_foreach(content, i, part)
	{
		s = json_string_value(json_object_get(part, "text"));
		t = json_string_value(json_object_get(part, "type"));
		if (!s || json_is_true(json_object_get(part, "thought")))
			continue;
		if (type1 &&
		    !(t && (!strcmp(t, type1) || (type2 && !strcmp(t, type2)))))
			continue;
		sb_add_piece(b, s);
	}
}

static int
str_is(json_t *j, const char *s)
{
	const char *v = json_string_value(j);

	return v && !strcmp(v, s);
}

/*
 * Anthropic Messages: system is a string or text blocks; user messages
 * hold strings or text blocks, and tool_result blocks count as results.
 */
static void
extract_anthropic(json_t *body, struct ask *a)
{
	json_t *m, *blk, *t;
	size_t i, j;

	add_text(&a->sys, json_object_get(body, "system"), "text", NULL);
	json_array_foreach(json_object_get(body, "messages"), i, m)
	{
		if (!str_is(json_object_get(m, "role"), "user"))
			continue;
		add_text(&a->user, json_object_get(m, "content"), "text", NULL);
		json_array_foreach(json_object_get(m, "content"), j, blk)
		{
			if (str_is(json_object_get(blk, "type"), "tool_result"))
				a->tool_results++;
		}
	}
	json_array_foreach(json_object_get(body, "tools"), i, t)
	    add_tool(a, json_string_value(json_object_get(t, "name")),
		     json_object_get(t, "input_schema"), 0);
}

/* OpenAI Chat Completions: each role "tool" message is one result. */
static void
extract_chat(json_t *body, struct ask *a)
{
	json_t *m, *t, *role, *fn;
	size_t i;

	a->include_usage = json_is_true(json_object_get(
	    json_object_get(body, "stream_options"), "include_usage"));
	json_array_foreach(json_object_get(body, "messages"), i, m)
	{
		role = json_object_get(m, "role");
		if (str_is(role, "user"))
			add_text(&a->user, json_object_get(m, "content"),
				 "text", NULL);
		else if (str_is(role, "system") || str_is(role, "developer"))
			add_text(&a->sys, json_object_get(m, "content"), "text",
				 NULL);
		else if (str_is(role, "tool") || str_is(role, "function"))
			a->tool_results++;
	}
	json_array_foreach(json_object_get(body, "tools"), i, t)
	{
		fn = json_object_get(t, "function");
		add_tool(a, json_string_value(json_object_get(fn, "name")),
			 json_object_get(fn, "parameters"), 0);
	}
	json_array_foreach(json_object_get(body, "functions"), i, fn)
	    add_tool(a, json_string_value(json_object_get(fn, "name")),
		     json_object_get(fn, "parameters"), 0);
}

/*
 * OpenAI Responses (Codex): input is a string or a list of items; user
 * messages carry input_text parts, the system prompt travels as
 * instructions or developer messages, and function_call_output /
 * custom_tool_call_output items are the results.
 */
static void
extract_responses(json_t *body, struct ask *a)
{
	json_t *input, *it, *t, *role, *type;
	size_t i;

	add_text(&a->sys, json_object_get(body, "instructions"), NULL, NULL);
	input = json_object_get(body, "input");
	if (json_is_string(input))
		sb_add_piece(&a->user, json_string_value(input));
	json_array_foreach(input, i, it)
	{
		type = json_object_get(it, "type");
		role = json_object_get(it, "role");
		if (str_is(type, "function_call_output") ||
		    str_is(type, "custom_tool_call_output")) {
			a->tool_results++;
		} else if (str_is(type, "message") || (!type && role)) {
			if (str_is(role, "user"))
				add_text(&a->user,
					 json_object_get(it, "content"),
					 "input_text", "text");
			else if (str_is(role, "developer") ||
				 str_is(role, "system"))
				add_text(&a->sys,
					 json_object_get(it, "content"),
					 "input_text", "text");
		}
	}
	json_array_foreach(json_object_get(body, "tools"), i, t)
	    add_tool(a, json_string_value(json_object_get(t, "name")),
		     json_object_get(t, "parameters"),
		     str_is(json_object_get(t, "type"), "custom"));
}

/* Gemini: user text parts, functionResponse parts are the results. */
static void
extract_gemini(json_t *body, struct ask *a)
{
	json_t *c, *p, *t, *d, *decls, *si, *schema;
	size_t i, j;
	int user;

	json_array_foreach(json_object_get(body, "contents"), i, c)
	{
		user = !json_object_get(c, "role") ||
		       str_is(json_object_get(c, "role"), "user");
		json_array_foreach(json_object_get(c, "parts"), j, p)
		{
			if (json_object_get(p, "functionResponse") ||
			    json_object_get(p, "function_response"))
				a->tool_results++;
		}
		if (user)
			add_text(&a->user, json_object_get(c, "parts"), NULL,
				 NULL);
	}
	si = json_object_get(body, "systemInstruction");
	if (!si)
		si = json_object_get(body, "system_instruction");
	if (json_is_string(si))
		sb_add_piece(&a->sys, json_string_value(si));
	else
		add_text(&a->sys, json_object_get(si, "parts"), NULL, NULL);
	json_array_foreach(json_object_get(body, "tools"), i, t)
	{
		decls = json_object_get(t, "functionDeclarations");
		if (!decls)
			decls = json_object_get(t, "function_declarations");
		json_array_foreach(decls, j, d)
		{
			schema = json_object_get(d, "parametersJsonSchema");
			if (!schema)
				schema = json_object_get(d, "parameters");
			add_tool(a,
				 json_string_value(json_object_get(d, "name")),
				 schema, 0);
		}
	}
}

/*
 * Where the client works. baton's prompts carry a "Worktree: /abs" line;
 * the CLIs announce their cwd in their own words. A candidate counts only
 * if it is an existing directory (a loose match once produced the path
 * "/description>").
 */
static const struct cwd_marker {
	const char *prefix;
	const char *skip; /* characters skipped before the value */
	const char *end;  /* the value ends here (or at a newline) */
	int line_start;	  /* the prefix must open a line */
} cwd_markers[] = {
	{ "Worktree:", " \t", "\n", 1 },		  /* baton */
	{ "Primary working directory:", " \t", "\n", 0 }, /* Claude */
	{ "<cwd>", " \t", "</cwd>", 0 },		  /* Codex */
	{ "I'm currently working in the directory:", " \t", "\n", 0 },
	{ "Working directory:", " \t", "\n", 0 }, /* opencode */
	/* Gemini CLI 0.61: the first of a list on the following lines */
	{ "**Workspace Directories:**", " \t\r\n-", "\n", 0 },
};

/* Returns the first valid directory after marker m in text (owned). */
static char *
cwd_in(const char *text, const struct cwd_marker *m)
{
	const char *p, *v, *e, *nl, *q;
	struct stat st;
	char *dir;
	size_t n;

	for (p = strstr(text, m->prefix); p; p = strstr(p, m->prefix)) {
		v = p + strlen(m->prefix);
		if (m->line_start) {
			for (q = p;
			     q > text && (q[-1] == ' ' || q[-1] == '\t');)
				q--;
			if (q > text && q[-1] != '\n') {
				p = v;
				continue;
			}
		}
		while (*v && strchr(m->skip, *v))
			v++;
		e = strstr(v, m->end);
		nl = strchr(v, '\n');
		if (!e || (nl && nl < e))
			e = nl ? nl : v + strlen(v);
		n = (size_t)(e - v);
		while (n && strchr(" \t\r", v[n - 1]))
			n--;
		while (n > 1 && v[n - 1] == '/')
			n--;
		p = v;
		if (!n || v[0] != '/')
			continue;
		dir = xstrndup(v, n);
		if (!stat(dir, &st) && S_ISDIR(st.st_mode))
			return dir;
		free(dir);
	}
	return NULL;
}

/* The client's working directory (owned), or NULL when not found. */
static char *
find_cwd(const struct ask *a)
{
	size_t i;
	char *dir;

	for (i = 0; i < sizeof(cwd_markers) / sizeof(cwd_markers[0]); i++) {
		dir = cwd_in(a->user.ptr, &cwd_markers[i]);
		if (!dir)
			dir = cwd_in(a->sys.ptr, &cwd_markers[i]);
		if (dir)
			return dir;
	}
	return NULL;
}

/* --- deciding the answer ------------------------------------------------ */

struct answer {
	int rule;     /* index of the matched rule, or -1 */
	char *text;   /* the final text (owned) */
	char *tool;   /* the tool to call (owned), or NULL for text */
	json_t *args; /* its arguments: an object */
	int custom;   /* Responses: a custom (free-form input) tool */
	json_int_t in, out;
	char call_id[48];
	int hang;     /* the rule's "hang": the text is never sent */
	json_t *seen; /* indices of the rules whose match the text has */
};

static void
answer_release(struct answer *ans)
{
	free(ans->text);
	free(ans->tool);
	json_decref(ans->args);
	json_decref(ans->seen);
	memset(ans, 0, sizeof(*ans));
}

/* Tools a portable "write" action may become, best first. */
static const char *const write_tools[] = { "Write",	  "write_file", "write",
					   "create_file", "editor",	NULL };
static const char *const path_keys[] = { "file_path",	  "filePath",
					 "filepath",	  "path",
					 "absolute_path", NULL };
static const char *const content_keys[] = { "content", "contents", "new_text",
					    "text", NULL };
static const char *const shell_tools[] = {
	"exec_command",	     "shell",	    "Bash", "bash",
	"run_shell_command", "run_command", NULL
};
static const char *const command_keys[] = { "cmd", "command", NULL };

/* The first of names that the request offers, or NULL. */
static const char *
offered(const struct ask *a, const char *const *names)
{
	for (; *names; names++) {
		if (json_object_get(a->tool_schemas, *names))
			return *names;
	}
	return NULL;
}

/* The first of keys among a schema's properties, else fallback. */
static const char *
schema_key(json_t *schema, const char *const *keys, const char *fallback)
{
	json_t *props = json_object_get(schema, "properties");

	for (; *keys; keys++) {
		if (json_object_get(props, *keys))
			return *keys;
	}
	return fallback;
}

/*
 * The "write" action: a call of the client's own write tool, or a shell
 * command that writes the file. Leaves ans untouched (the final text then
 * goes out) when the request offers neither.
 */
static void
plan_write(const struct ask *a, json_t *w, const char *cwd, struct answer *ans)
{
	const char *rel = json_string_value(json_object_get(w, "path"));
	const char *content = json_string_value(json_object_get(w, "content"));
	const char *name, *key, *slash;
	struct sbuf path = SBUF_INIT, cmd = SBUF_INIT;
	json_t *schema, *prop;
	char *dir = NULL;

	if (cwd && rel[0] != '/')
		sb_addf(&path, "%s/%s", cwd, rel);
	else
		sb_adds(&path, rel);
	name = offered(a, write_tools);
	if (name) {
		schema = json_object_get(a->tool_schemas, name);
		ans->args = json_object();
		json_object_set_new(ans->args,
				    schema_key(schema, path_keys, "file_path"),
				    json_string(path.ptr));
		json_object_set_new(ans->args,
				    schema_key(schema, content_keys, "content"),
				    json_string(content));
		ans->tool = xstrdup(name);
		goto out;
	}
	name = offered(a, shell_tools);
	if (!name)
		goto out;
	/* mkdir -p 'DIR' && printf '%s' 'CONTENT' > 'PATH' */
	slash = strrchr(path.ptr, '/');
	if (slash && slash > path.ptr) {
		dir = xstrndup(path.ptr, (size_t)(slash - path.ptr));
		sb_adds(&cmd, "mkdir -p ");
		sb_add_shquote(&cmd, dir);
		sb_adds(&cmd, " && ");
	}
	sb_adds(&cmd, "printf '%s' ");
	sb_add_shquote(&cmd, content);
	sb_adds(&cmd, " > ");
	sb_add_shquote(&cmd, path.ptr);
	schema = json_object_get(a->tool_schemas, name);
	key = schema_key(schema, command_keys,
			 strcmp(name, "exec_command") ? "command" : "cmd");
	prop = json_object_get(json_object_get(schema, "properties"), key);
	ans->args = json_object();
	if (str_is(json_object_get(prop, "type"), "array"))
		json_object_set_new(ans->args, key,
				    json_pack("[sss]", "bash", "-lc", cmd.ptr));
	else
		json_object_set_new(ans->args, key, json_string(cmd.ptr));
	ans->tool = xstrdup(name);
out:
	free(dir);
	sb_release(&path);
	sb_release(&cmd);
}

/* The "call" action: exactly that call, "{cwd}" replaced in its args. */
static void
plan_call(json_t *c, const char *cwd, struct answer *ans)
{
	json_t *args = json_object_get(c, "args");

	ans->tool = xstrdup(json_string_value(json_object_get(c, "name")));
	ans->args = args ? json_deep_copy(args) : json_object();
	subst_cwd_json(ans->args, cwd);
}

/*
 * Decides the answer to a model request (request number n) from the
 * script: see the diagram at the top of the file.
 */
static void
decide(const struct ask *a, unsigned long n, struct answer *ans)
{
	json_t *rule = NULL, *r, *usage, *actions, *action;
	const char *match, *text = DEFAULT_TEXT;
	char *cwd;
	size_t i, k = (size_t)a->tool_results;

	memset(ans, 0, sizeof(*ans));
	ans->rule = -1;
	ans->in = DEFAULT_IN;
	ans->out = DEFAULT_OUT;
	ans->seen = json_array();
	json_array_foreach(rules, i, r)
	{
		match = json_string_value(json_object_get(r, "match"));
		if (match && *match && strstr(a->user.ptr, match))
			json_array_append_new(ans->seen, json_integer((int)i));
		if (!rule && (!match || !*match || strstr(a->user.ptr, match))) {
			rule = r;
			ans->rule = (int)i;
		}
	}
	cwd = find_cwd(a);
	if (json_is_string(json_object_get(rule, "text")))
		text = json_string_value(json_object_get(rule, "text"));
	usage = json_object_get(rule, "usage");
	if (json_is_integer(json_object_get(usage, "in")))
		ans->in = json_integer_value(json_object_get(usage, "in"));
	if (json_is_integer(json_object_get(usage, "out")))
		ans->out = json_integer_value(json_object_get(usage, "out"));
	ans->text = subst_cwd(text, cwd);
	actions = json_object_get(rule, "actions");
	if (json_array_size(a->tool_names) && k < json_array_size(actions)) {
		action = json_array_get(actions, k);
		if (json_object_get(action, "write"))
			plan_write(a, json_object_get(action, "write"), cwd,
				   ans);
		else if (json_object_get(action, "call"))
			plan_call(json_object_get(action, "call"), cwd, ans);
	}
	if (ans->tool)
		ans->custom =
		    json_object_get(a->custom_tools, ans->tool) != NULL;
	else if (json_array_size(a->tool_names))
		/* a side request without tools (a title) is answered */
		ans->hang = json_is_true(json_object_get(rule, "hang"));
	snprintf(ans->call_id, sizeof(ans->call_id), "call_%lu_0", n);
	free(cwd);
}

/* --- HTTP --------------------------------------------------------------- */

struct http_req {
	char *method;
	char *path;		  /* percent-decoded, without the query */
	char *query;		  /* after '?', or "" */
	char *key;		  /* the credential seen, or NULL */
	long long content_length; /* -1: none */
	int chunked;
	int expect_continue;
	struct sbuf body;
};

static void
http_req_release(struct http_req *r)
{
	free(r->method);
	free(r->path);
	free(r->query);
	free(r->key);
	sb_release(&r->body);
	memset(r, 0, sizeof(*r));
	sb_init(&r->body);
	r->content_length = -1;
}

static const struct {
	int status;
	const char *reason;
} reasons[] = {
	{ 100, "Continue" },
	{ 200, "OK" },
	{ 400, "Bad Request" },
	{ 401, "Unauthorized" },
	{ 403, "Forbidden" },
	{ 404, "Not Found" },
	{ 408, "Request Timeout" },
	{ 413, "Payload Too Large" },
	{ 422, "Unprocessable Entity" },
	{ 429, "Too Many Requests" },
	{ 500, "Internal Server Error" },
	{ 502, "Bad Gateway" },
	{ 503, "Service Unavailable" },
	{ 504, "Gateway Timeout" },
	{ 529, "Overloaded" },
};

static const char *
reason_of(int status)
{
	size_t i;

	for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
		if (reasons[i].status == status)
			return reasons[i].reason;
	}
	return status < 500 ? "Client Error" : "Server Error";
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A percent-decoded copy of s[0..n) (owned). */
static char *
url_decode(const char *s, size_t n)
{
	char *out = xmalloc(n + 1), *o = out;
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 &&
		    hexval(s[i + 2]) >= 0) {
			*o++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	return out;
}

/* The percent-decoded value of name in a query string (owned), or NULL. */
static char *
query_param(const char *query, const char *name)
{
	size_t n = strlen(name), len;
	const char *p = query;

	while (*p) {
		len = strcspn(p, "&");
		if (len > n && !strncmp(p, name, n) && p[n] == '=')
			return url_decode(p + n + 1, len - n - 1);
		p += len;
		if (*p == '&')
			p++;
	}
	return NULL;
}

/* Offset just past the blank line ending the head, or 0 if not there. */
static size_t
head_end(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n; i++) {
		if (p[i] != '\n')
			continue;
		if (p[i + 1] == '\n')
			return i + 2;
		if (p[i + 1] == '\r' && i + 2 < n && p[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/*
 * Parses the request head p[0..n) into r. Returns 0, or the HTTP status
 * to answer when it is malformed.
 */
static int
parse_head(struct http_req *r, const char *p, size_t n)
{
	char *head = xstrndup(p, n), *line, *next, *sp1, *sp2, *q, *e, *colon;
	const char *v;
	char *bearer = NULL, *xkey = NULL, *gkey = NULL;
	int rc = 400, first = 1;

	for (line = head; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		e = line + strlen(line);
		while (e > line && (e[-1] == '\r' || e[-1] == ' '))
			*--e = '\0';
		if (first) {
			first = 0;
			sp1 = strchr(line, ' ');
			sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
			if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7))
				goto out;
			r->method = xstrndup(line, (size_t)(sp1 - line));
			*sp2 = '\0';
			q = strchr(sp1 + 1, '?');
			r->path = url_decode(sp1 + 1, q ? (size_t)(q - sp1 - 1)
							: strlen(sp1 + 1));
			r->query = xstrdup(q ? q + 1 : "");
			continue;
		}
		colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		if (!strcasecmp(line, "content-length")) {
			errno = 0;
			r->content_length = strtoll(v, &e, 10);
			if (errno || *e || e == v || r->content_length < 0)
				goto out;
		} else if (!strcasecmp(line, "transfer-encoding")) {
			r->chunked = strcasestr(v, "chunked") != NULL;
		} else if (!strcasecmp(line, "expect")) {
			r->expect_continue = !strcasecmp(v, "100-continue");
		} else if (!strcasecmp(line, "x-api-key")) {
			free(xkey);
			xkey = xstrdup(v);
		} else if (!strcasecmp(line, "authorization") &&
			   !strncasecmp(v, "Bearer ", 7)) {
			free(bearer);
			bearer = xstrdup(v + 7);
		} else if (!strcasecmp(line, "x-goog-api-key")) {
			free(gkey);
			gkey = xstrdup(v);
		}
	}
	if (!r->method)
		goto out;
	/* The credential: x-api-key, Bearer, x-goog-api-key, then ?key=. */
	if (xkey) {
		r->key = xkey;
		xkey = NULL;
	} else if (bearer) {
		r->key = bearer;
		bearer = NULL;
	} else if (gkey) {
		r->key = gkey;
		gkey = NULL;
	} else {
		r->key = query_param(r->query, "key");
	}
	rc = 0;
out:
	free(head);
	free(xkey);
	free(bearer);
	free(gkey);
	return rc;
}

/*
 * Decodes a chunked body at p[0..n). Returns 1 when it is complete (*used
 * set to the bytes it took, the data appended to out unless out is NULL),
 * 0 when more input is needed, -1 when it is malformed. Each call starts
 * from the beginning; that costs a scan of the chunk headers only.
 */
static int
chunked_decode(const char *p, size_t n, struct sbuf *out, size_t *used)
{
	size_t i = 0, size, j;
	const char *nl;
	int digits;

	for (;;) {
		nl = memchr(p + i, '\n', n - i);
		if (!nl)
			return n - i > 1024 ? -1 : 0;
		size = 0;
		digits = 0;
		for (j = i; p + j < nl && hexval(p[j]) >= 0; j++) {
			if (++digits > 15)
				return -1;
			size = size * 16 + (size_t)hexval(p[j]);
		}
		if (!digits)
			return -1;
		i = (size_t)(nl - p) + 1;
		if (size == 0) {
			/* Trailers, then a blank line. */
			for (;;) {
				nl = memchr(p + i, '\n', n - i);
				if (!nl)
					return 0;
				j = (size_t)(nl - p);
				if (j == i || (j == i + 1 && p[i] == '\r')) {
					*used = j + 1;
					return 1;
				}
				i = j + 1;
			}
		}
		if (n - i < size + 1)
			return 0;
		if (out)
			sb_add(out, p + i, size);
		i += size;
		if (p[i] == '\r') {
			if (n - i < 2)
				return 0;
			i++;
		}
		if (p[i] != '\n')
			return -1;
		i++;
	}
}

/* --- responses ---------------------------------------------------------- */

/* One request being answered. */
struct exchange {
	struct http_req *req;
	enum wire wire;
	unsigned long n; /* request number, from 1 */
	struct ask ask;
	struct answer ans;
	int have_ask;
	int status;
	char *reply;	  /* log: text | tool:<name> | error:<status> | other */
	struct sbuf *out; /* where the response goes */
	int hang;	  /* no response: hold the connection */
	int sse_seq;	  /* Responses: sequence_number of the next event */
};

/* Appends a response head; content_length < 0: none (SSE, until close). */
static void
http_head(struct exchange *x, int status, const char *ctype,
	  long long content_length, const char *extra)
{
	x->status = status;
	sb_addf(x->out, "HTTP/1.1 %d %s\r\n", status, reason_of(status));
	if (ctype)
		sb_addf(x->out, "Content-Type: %s\r\n", ctype);
	if (content_length >= 0)
		sb_addf(x->out, "Content-Length: %lld\r\n", content_length);
	if (ctype && !strcmp(ctype, "text/event-stream"))
		sb_adds(x->out, "Cache-Control: no-cache\r\n");
	sb_addf(x->out, "Connection: close\r\n%s\r\n", extra ? extra : "");
}

/* Answers status with the JSON j (stolen). */
static void
respond_json(struct exchange *x, int status, json_t *j, const char *extra)
{
	char *s = json_dumps(j, JSON_COMPACT);

	if (!s)
		abort();
	http_head(x, status, "application/json", (long long)strlen(s), extra);
	sb_adds(x->out, s);
	free(s);
	json_decref(j);
}

static void
sse_begin(struct exchange *x)
{
	http_head(x, 200, "text/event-stream", -1, NULL);
}

/* One SSE event: "event: E" (unless NULL) and "data: J"; j is stolen. */
static void
sse_event(struct exchange *x, const char *event, json_t *j)
{
	if (event)
		sb_addf(x->out, "event: %s\n", event);
	sb_adds(x->out, "data: ");
	sb_add_json(x->out, j);
	sb_adds(x->out, "\n\n");
	json_decref(j);
}

static void set_reply(struct exchange *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_reply(struct exchange *x, const char *fmt, ...)
{
	va_list ap;
	int n;

	free(x->reply);
	va_start(ap, fmt);
	n = vasprintf(&x->reply, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();
}

/* Error bodies, one builder per wire family. */

static const struct {
	int status;
	const char *anthropic; /* error.type */
	const char *google;    /* error.status */
} error_kinds[] = {
	{ 400, "invalid_request_error", "INVALID_ARGUMENT" },
	{ 401, "authentication_error", "UNAUTHENTICATED" },
	{ 403, "permission_error", "PERMISSION_DENIED" },
	{ 404, "not_found_error", "NOT_FOUND" },
	{ 413, "request_too_large", "INVALID_ARGUMENT" },
	{ 429, "rate_limit_error", "RESOURCE_EXHAUSTED" },
	{ 500, "api_error", "INTERNAL" },
	{ 503, "api_error", "UNAVAILABLE" },
	{ 504, "api_error", "DEADLINE_EXCEEDED" },
	{ 529, "overloaded_error", "UNAVAILABLE" },
};

static size_t
error_kind(int status)
{
	size_t i;

	for (i = 0; i < sizeof(error_kinds) / sizeof(error_kinds[0]); i++) {
		if (error_kinds[i].status == status)
			return i;
	}
	return status < 500 ? 0 : 6; /* invalid request / internal */
}

static json_t *
error_anthropic(int status, const char *msg)
{
	return json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type",
			 error_kinds[error_kind(status)].anthropic, "message",
			 msg);
}

static json_t *
error_openai(int status, const char *msg)
{
	const char *type = "invalid_request_error", *code = NULL;

	if (status == 401)
		code = "invalid_api_key";
	else if (status == 429)
		type = "rate_limit_error", code = "rate_limit_exceeded";
	else if (status == 404)
		type = "not_found_error";
	else if (status >= 500)
		type = "server_error";
	return json_pack("{s:{s:s,s:s,s:s?}}", "error", "message", msg, "type",
			 type, "code", code);
}

static json_t *
error_gemini(int status, const char *msg)
{
	return json_pack("{s:{s:i,s:s,s:s}}", "error", "code", status,
			 "message", msg, "status",
			 error_kinds[error_kind(status)].google);
}

/* Anthropic Messages: a message object, or its SSE event sequence. */
static void
render_anthropic(struct exchange *x)
{
	const struct answer *ans = &x->ans;
	const char *model = x->ask.model ? x->ask.model : DEFAULT_MODEL;
	const char *stop = ans->tool ? "tool_use" : "end_turn";
	char id[48], *partial;
	json_t *block;

	snprintf(id, sizeof(id), "msg_%lu", x->n);
	if (!x->ask.stream) {
		if (ans->tool)
			block =
			    json_pack("{s:s,s:s,s:s,s:O}", "type", "tool_use",
				      "id", ans->call_id, "name", ans->tool,
				      "input", ans->args);
		else
			block = json_pack("{s:s,s:s}", "type", "text", "text",
					  ans->text);
		respond_json(x, 200,
			     json_pack("{s:s,s:s,s:s,s:s,s:[o],s:s,s:n,"
				       "s:{s:I,s:I,s:i,s:i}}",
				       "id", id, "type", "message", "role",
				       "assistant", "model", model, "content",
				       block, "stop_reason", stop,
				       "stop_sequence", "usage", "input_tokens",
				       ans->in, "output_tokens", ans->out,
				       "cache_creation_input_tokens", 0,
				       "cache_read_input_tokens", 0),
			     NULL);
		return;
	}
	sse_begin(x);
	sse_event(x, "message_start",
		  json_pack("{s:s,s:{s:s,s:s,s:s,s:s,s:[],s:n,s:n,"
			    "s:{s:I,s:i,s:i,s:i}}}",
			    "type", "message_start", "message", "id", id,
			    "type", "message", "role", "assistant", "model",
			    model, "content", "stop_reason", "stop_sequence",
			    "usage", "input_tokens", ans->in, "output_tokens",
			    1, "cache_creation_input_tokens", 0,
			    "cache_read_input_tokens", 0));
	if (ans->tool) {
		partial = json_dumps(ans->args, JSON_COMPACT);
		sse_event(x, "content_block_start",
			  json_pack("{s:s,s:i,s:{s:s,s:s,s:s,s:{}}}", "type",
				    "content_block_start", "index", 0,
				    "content_block", "type", "tool_use", "id",
				    ans->call_id, "name", ans->tool, "input"));
		sse_event(x, "content_block_delta",
			  json_pack("{s:s,s:i,s:{s:s,s:s}}", "type",
				    "content_block_delta", "index", 0, "delta",
				    "type", "input_json_delta", "partial_json",
				    partial));
		free(partial);
	} else {
		sse_event(x, "content_block_start",
			  json_pack("{s:s,s:i,s:{s:s,s:s}}", "type",
				    "content_block_start", "index", 0,
				    "content_block", "type", "text", "text",
				    ""));
		sse_event(x, "content_block_delta",
			  json_pack("{s:s,s:i,s:{s:s,s:s}}", "type",
				    "content_block_delta", "index", 0, "delta",
				    "type", "text_delta", "text", ans->text));
	}
	sse_event(
	    x, "content_block_stop",
	    json_pack("{s:s,s:i}", "type", "content_block_stop", "index", 0));
	sse_event(x, "message_delta",
		  json_pack("{s:s,s:{s:s,s:n},s:{s:I}}", "type",
			    "message_delta", "delta", "stop_reason", stop,
			    "stop_sequence", "usage", "output_tokens",
			    ans->out));
	sse_event(x, "message_stop",
		  json_pack("{s:s}", "type", "message_stop"));
}

/* Chat Completions: one chunk of a stream (delta stolen). */
static json_t *
chat_chunk(struct exchange *x, long long created, json_t *delta,
	   const char *finish)
{
	char id[48];

	snprintf(id, sizeof(id), "chatcmpl-%lu", x->n);
	return json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:s?}]}", "id", id,
			 "object", "chat.completion.chunk", "created",
			 (json_int_t)created, "model",
			 x->ask.model ? x->ask.model : DEFAULT_MODEL, "choices",
			 "index", 0, "delta", delta, "finish_reason", finish);
}

static json_t *
chat_usage(const struct answer *ans)
{
	return json_pack("{s:I,s:I,s:I}", "prompt_tokens", ans->in,
			 "completion_tokens", ans->out, "total_tokens",
			 ans->in + ans->out);
}

/* OpenAI Chat Completions: a chat.completion, or chunks and [DONE]. */
static void
render_chat(struct exchange *x)
{
	const struct answer *ans = &x->ans;
	const char *finish = ans->tool ? "tool_calls" : "stop";
	long long created = (long long)time(NULL);
	char id[48], *args = NULL;
	json_t *msg, *last;

	snprintf(id, sizeof(id), "chatcmpl-%lu", x->n);
	if (ans->tool)
		args = json_dumps(ans->args, JSON_COMPACT);
	if (!x->ask.stream) {
		if (ans->tool)
			msg = json_pack("{s:s,s:n,s:[{s:s,s:s,s:{s:s,s:s}}]}",
					"role", "assistant", "content",
					"tool_calls", "id", ans->call_id,
					"type", "function", "function", "name",
					ans->tool, "arguments", args);
		else
			msg = json_pack("{s:s,s:s}", "role", "assistant",
					"content", ans->text);
		respond_json(
		    x, 200,
		    json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:s}],"
			      "s:o}",
			      "id", id, "object", "chat.completion", "created",
			      (json_int_t)created, "model",
			      x->ask.model ? x->ask.model : DEFAULT_MODEL,
			      "choices", "index", 0, "message", msg,
			      "finish_reason", finish, "usage",
			      chat_usage(ans)),
		    NULL);
		free(args);
		return;
	}
	sse_begin(x);
	if (ans->tool) {
		sse_event(x, NULL,
			  chat_chunk(x, created,
				     json_pack("{s:s,s:n,s:[{s:i,s:s,s:s,"
					       "s:{s:s,s:s}}]}",
					       "role", "assistant", "content",
					       "tool_calls", "index", 0, "id",
					       ans->call_id, "type", "function",
					       "function", "name", ans->tool,
					       "arguments", ""),
				     NULL));
		sse_event(x, NULL,
			  chat_chunk(x, created,
				     json_pack("{s:[{s:i,s:{s:s}}]}",
					       "tool_calls", "index", 0,
					       "function", "arguments", args),
				     NULL));
	} else {
		sse_event(x, NULL,
			  chat_chunk(x, created,
				     json_pack("{s:s,s:s}", "role", "assistant",
					       "content", ans->text),
				     NULL));
	}
	last = chat_chunk(x, created, json_object(), finish);
	if (x->ask.include_usage) {
		sse_event(x, NULL, last);
		last = json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", id,
				 "object", "chat.completion.chunk", "created",
				 (json_int_t)created, "model",
				 x->ask.model ? x->ask.model : DEFAULT_MODEL,
				 "choices", "usage", chat_usage(ans));
	} else {
		/* Not asked for: ride on the last chunk, as many servers do. */
		json_object_set_new(last, "usage", chat_usage(ans));
	}
	sse_event(x, NULL, last);
	sb_adds(x->out, "data: [DONE]\n\n");
	free(args);
}

/* The output item of a Responses answer; done: its final state. */
static json_t *
responses_item(struct exchange *x, int done)
{
	const struct answer *ans = &x->ans;
	const char *status = done ? "completed" : "in_progress";
	char id[48], *args;
	json_t *item;

	if (ans->tool && ans->custom) {
		snprintf(id, sizeof(id), "ctc_%lu_0", x->n);
		args = json_is_string(json_object_get(ans->args, "input"))
			   ? xstrdup(json_string_value(
				 json_object_get(ans->args, "input")))
			   : json_dumps(ans->args, JSON_COMPACT);
		item = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type",
				 "custom_tool_call", "id", id, "call_id",
				 ans->call_id, "name", ans->tool, "input",
				 done ? args : "", "status", status);
		free(args);
	} else if (ans->tool) {
		snprintf(id, sizeof(id), "fc_%lu_0", x->n);
		args = json_dumps(ans->args, JSON_COMPACT);
		item = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type",
				 "function_call", "id", id, "call_id",
				 ans->call_id, "name", ans->tool, "arguments",
				 done ? args : "", "status", status);
		free(args);
	} else {
		snprintf(id, sizeof(id), "msg_%lu", x->n);
		item = json_pack("{s:s,s:s,s:s,s:s,s:[]}", "type", "message",
				 "id", id, "role", "assistant", "status",
				 status, "content");
		if (done)
			json_array_append_new(
			    json_object_get(item, "content"),
			    json_pack("{s:s,s:s,s:[]}", "type", "output_text",
				      "text", ans->text, "annotations"));
	}
	return item;
}

/* The Responses response object; done: completed with output and usage. */
static json_t *
responses_object(struct exchange *x, int done)
{
	const struct answer *ans = &x->ans;
	char id[48];
	json_t *r;

	snprintf(id, sizeof(id), "resp_%lu", x->n);
	r = json_pack("{s:s,s:s,s:I,s:s,s:s,s:[],s:n,s:n}", "id", id, "object",
		      "response", "created_at", (json_int_t)time(NULL),
		      "status", done ? "completed" : "in_progress", "model",
		      x->ask.model ? x->ask.model : DEFAULT_MODEL, "output",
		      "error", "incomplete_details");
	if (done) {
		json_array_append_new(json_object_get(r, "output"),
				      responses_item(x, 1));
		json_object_set_new(
		    r, "usage",
		    json_pack("{s:I,s:{s:i},s:I,s:{s:i},s:I}", "input_tokens",
			      ans->in, "input_tokens_details", "cached_tokens",
			      0, "output_tokens", ans->out,
			      "output_tokens_details", "reasoning_tokens", 0,
			      "total_tokens", ans->in + ans->out));
	}
	return r;
}

/* A named Responses event, with type and sequence_number; j is stolen. */
static void
responses_event(struct exchange *x, const char *type, json_t *j)
{
	json_object_set_new(j, "type", json_string(type));
	json_object_set_new(j, "sequence_number", json_integer(x->sse_seq++));
	sse_event(x, type, j);
}

/* OpenAI Responses (Codex): the response object, or its named events. */
static void
render_responses(struct exchange *x)
{
	const struct answer *ans = &x->ans;
	char item_id[48];
	json_t *item;

	if (!x->ask.stream) {
		respond_json(x, 200, responses_object(x, 1), NULL);
		return;
	}
	sse_begin(x);
	responses_event(x, "response.created",
			json_pack("{s:o}", "response", responses_object(x, 0)));
	responses_event(x, "response.in_progress",
			json_pack("{s:o}", "response", responses_object(x, 0)));
	item = responses_item(x, 0);
	snprintf(item_id, sizeof(item_id), "%s",
		 json_string_value(json_object_get(item, "id")));
	responses_event(
	    x, "response.output_item.added",
	    json_pack("{s:i,s:o}", "output_index", 0, "item", item));
	if (!ans->tool) {
		responses_event(x, "response.content_part.added",
				json_pack("{s:s,s:i,s:i,s:{s:s,s:s,s:[]}}",
					  "item_id", item_id, "output_index", 0,
					  "content_index", 0, "part", "type",
					  "output_text", "text", "",
					  "annotations"));
		responses_event(x, "response.output_text.delta",
				json_pack("{s:s,s:i,s:i,s:s}", "item_id",
					  item_id, "output_index", 0,
					  "content_index", 0, "delta",
					  ans->text));
		responses_event(x, "response.output_text.done",
				json_pack("{s:s,s:i,s:i,s:s}", "item_id",
					  item_id, "output_index", 0,
					  "content_index", 0, "text",
					  ans->text));
		responses_event(x, "response.content_part.done",
				json_pack("{s:s,s:i,s:i,s:{s:s,s:s,s:[]}}",
					  "item_id", item_id, "output_index", 0,
					  "content_index", 0, "part", "type",
					  "output_text", "text", ans->text,
					  "annotations"));
	}
	responses_event(x, "response.output_item.done",
			json_pack("{s:i,s:o}", "output_index", 0, "item",
				  responses_item(x, 1)));
	responses_event(x, "response.completed",
			json_pack("{s:o}", "response", responses_object(x, 1)));
}

/* Gemini: one generateContent response, as JSON or a single SSE chunk. */
static void
render_gemini(struct exchange *x)
{
	const struct answer *ans = &x->ans;
	json_t *part, *r;

	if (ans->tool)
		part = json_pack("{s:{s:s,s:O}}", "functionCall", "name",
				 ans->tool, "args", ans->args);
	else
		part = json_pack("{s:s}", "text", ans->text);
	r = json_pack("{s:[{s:{s:s,s:[o]},s:s,s:i}],s:{s:I,s:I,s:I},s:s}",
		      "candidates", "content", "role", "model", "parts", part,
		      "finishReason", "STOP", "index", 0, "usageMetadata",
		      "promptTokenCount", ans->in, "candidatesTokenCount",
		      ans->out, "totalTokenCount", ans->in + ans->out,
		      "modelVersion",
		      x->ask.model ? x->ask.model : DEFAULT_MODEL);
	if (!x->ask.stream) {
		respond_json(x, 200, r, NULL);
		return;
	}
	sse_begin(x);
	sse_event(x, NULL, r);
}

/* How each wire reads a request, writes an answer and reports an error. */
static const struct wire_ops {
	const char *name;
	void (*extract)(json_t *body, struct ask *a);
	void (*render)(struct exchange *x);
	json_t *(*error)(int status, const char *msg);
	const char *auth_message; /* for --require-key */
} wires[] = {
	[WIRE_OTHER] = { "other", NULL, NULL, error_openai,
			 "Incorrect API key provided" },
	[WIRE_ANTHROPIC] = { "anthropic", extract_anthropic, render_anthropic,
			     error_anthropic, "invalid x-api-key" },
	[WIRE_CHAT] = { "chat", extract_chat, render_chat, error_openai,
			"Incorrect API key provided" },
	[WIRE_RESPONSES] = { "responses", extract_responses, render_responses,
			     error_openai, "Incorrect API key provided" },
	[WIRE_GEMINI] = { "gemini", extract_gemini, render_gemini, error_gemini,
			  "API key not valid" },
};

/* Answers an error in the exchange's wire format. */
static void
respond_error(struct exchange *x, int status, const char *msg,
	      const char *extra)
{
	respond_json(x, status, wires[x->wire].error(status, msg), extra);
	set_reply(x, "error:%d", status);
}

/*
 * The body of len bytes is over --context-limit: each provider's own
 * "context window exceeded" answer (a 400), as baton must recognise them.
 */
static void
respond_context(struct exchange *x, size_t len)
{
	long tokens = (long)len / 4, max = opt.context_limit / 4;
	char msg[256];
	json_t *j;

	switch (x->wire) {
	case WIRE_ANTHROPIC:
		snprintf(msg, sizeof(msg), "prompt is too long: %ld tokens > "
			 "%ld maximum", tokens, max);
		j = error_anthropic(400, msg);
		break;
	case WIRE_GEMINI:
		snprintf(msg, sizeof(msg), "The input token count (%ld) "
			 "exceeds the maximum number of tokens allowed (%ld).",
			 tokens, max);
		j = error_gemini(400, msg);
		break;
	default:
		snprintf(msg, sizeof(msg), "This model's maximum context "
			 "length is %ld tokens. However, your messages "
			 "resulted in %ld tokens. Please reduce the length of "
			 "the messages.", max, tokens);
		j = json_pack("{s:{s:s,s:s,s:s,s:n}}", "error", "message", msg,
			      "type", "invalid_request_error", "code",
			      "context_length_exceeded", "param");
		break;
	}
	respond_json(x, 400, j, NULL);
	set_reply(x, "error:context");
}

/* --- routes ------------------------------------------------------------- */

static void
serve_head(struct exchange *x)
{
	http_head(x, 200, "text/plain", 0, NULL);
}

static void
serve_models(struct exchange *x)
{
	respond_json(x, 200,
		     json_pack("{s:s,s:[{s:s,s:s,s:i,s:s}]}", "object", "list",
			       "data", "id", DEFAULT_MODEL, "object", "model",
			       "created", 0, "owned_by", "mockllm"),
		     NULL);
}

static void
serve_count_tokens(struct exchange *x)
{
	respond_json(x, 200, json_pack("{s:i}", "input_tokens", DEFAULT_IN),
		     NULL);
}

/* The model of a Gemini path: .../models/<model>:method. */
static char *
gemini_model(const char *path)
{
	const char *p = NULL, *q, *colon = strrchr(path, ':');

	for (q = strstr(path, "/models/"); q; q = strstr(q + 1, "/models/"))
		p = q;
	p = p ? p + 8 : (strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
	if (!colon || colon < p)
		colon = p + strlen(p);
	return xstrndup(p, (size_t)(colon - p));
}

/*
 * A model request: parse, check the key, maybe inject a failure, decide
 * and render. The --fail counter counts only requests that get this far
 * with a valid body and key.
 */
static void
serve_model(struct exchange *x)
{
	const struct wire_ops *w = &wires[x->wire];
	json_error_t jerr;
	json_t *body;
	char msg[256], extra[64];
	const char *model;

	body = json_loadb(x->req->body.ptr, x->req->body.len, 0, &jerr);
	if (!json_is_object(body)) {
		snprintf(msg, sizeof(msg), "invalid JSON body: %s",
			 body ? "not an object" : jerr.text);
		json_decref(body);
		respond_error(x, 400, msg, NULL);
		return;
	}
	ask_init(&x->ask);
	x->have_ask = 1;
	if (x->wire == WIRE_GEMINI) {
		x->ask.model = gemini_model(x->req->path);
		x->ask.stream =
		    has_suffix(x->req->path, ":streamGenerateContent");
	} else {
		model = json_string_value(json_object_get(body, "model"));
		x->ask.model = model ? xstrdup(model) : NULL;
		x->ask.stream = json_is_true(json_object_get(body, "stream"));
	}
	w->extract(body, &x->ask);
	json_decref(body);

	if (opt.require_key &&
	    (!x->req->key || strcmp(x->req->key, opt.require_key))) {
		respond_error(x, 401, w->auth_message, NULL);
		return;
	}
	if (opt.context_limit > 0 &&
	    x->req->body.len > (size_t)opt.context_limit) {
		respond_context(x, x->req->body.len);
		return;
	}
	if (opt.fail_left > 0) {
		opt.fail_left--;
		extra[0] = '\0';
		if (opt.fail_status == 429 && opt.fail_reset >= 0) {
			snprintf(msg, sizeof(msg),
				 "rate limited: try again in %ld seconds",
				 opt.fail_reset);
			snprintf(extra, sizeof(extra), "Retry-After: %ld\r\n",
				 opt.fail_reset);
		} else if (opt.fail_status == 401) {
			snprintf(msg, sizeof(msg), "invalid x-api-key");
		} else {
			snprintf(msg, sizeof(msg), "mock injected HTTP %d",
				 opt.fail_status);
		}
		respond_error(x, opt.fail_status, msg, extra);
		return;
	}
	decide(&x->ask, x->n, &x->ans);
	if (x->ans.hang) {
		/* held: the connection gets no answer until it closes */
		x->hang = 1;
		set_reply(x, "hang");
		return;
	}
	w->render(x);
	if (x->ans.tool)
		set_reply(x, "tool:%s", x->ans.tool);
	else
		set_reply(x, "text");
}

/*
 * The routes, matched in order by method and path suffix (the query is
 * not part of the path). HEAD answers on any path.
 */
static const struct route {
	const char *method;
	const char *suffix;
	enum wire wire;
	void (*serve)(struct exchange *x);
} routes[] = {
	{ "HEAD", "", WIRE_OTHER, serve_head },
	{ "GET", "/models", WIRE_OTHER, serve_models },
	{ "POST", "/messages/count_tokens", WIRE_ANTHROPIC,
	  serve_count_tokens },
	{ "POST", "/messages", WIRE_ANTHROPIC, serve_model },
	{ "POST", "/chat/completions", WIRE_CHAT, serve_model },
	{ "POST", "/responses", WIRE_RESPONSES, serve_model },
	{ "POST", ":streamGenerateContent", WIRE_GEMINI, serve_model },
	{ "POST", ":generateContent", WIRE_GEMINI, serve_model },
};

/* The wire a path would speak, for errors answered before routing. */
static enum wire
wire_of_path(const char *path)
{
	size_t i;

	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (routes[i].serve == serve_model &&
		    has_suffix(path, routes[i].suffix))
			return routes[i].wire;
	}
	return WIRE_OTHER;
}

/* Appends the exchange's line to the --log file. */
static void
log_exchange(const struct exchange *x)
{
	const struct http_req *r = x->req;
	json_t *line;

	if (!log_fp)
		return;
	line = json_pack(
	    "{s:I,s:s?,s:s?,s:s,s:s?,s:b,s:s?,s:o,s:i,s:o,s:s,"
	    "s:i}",
	    "n", (json_int_t)x->n, "method", r->method, "path", r->path, "wire",
	    wires[x->wire].name, "model", x->have_ask ? x->ask.model : NULL,
	    "stream", x->have_ask && x->ask.stream, "key", r->key, "tools",
	    x->have_ask ? json_copy(x->ask.tool_names) : json_array(),
	    "tool_results", x->have_ask ? x->ask.tool_results : 0, "rule",
	    x->have_ask && x->ans.text && x->ans.rule >= 0
		? json_integer(x->ans.rule)
		: json_null(),
	    "reply", x->reply ? x->reply : "other", "status", x->status);
	if (!line)
		return;
	json_object_set_new(line, "seen",
			    x->have_ask && x->ans.seen ? json_copy(x->ans.seen)
						       : json_array());
	json_dumpf(line, log_fp, JSON_COMPACT);
	fputc('\n', log_fp);
	fflush(log_fp);
	json_decref(line);
}

/* --- connections -------------------------------------------------------- */

enum conn_state { CONN_READING, CONN_WRITING, CONN_LINGER, CONN_HOLD };

struct conn {
	int fd; /* -1 once closed */
	enum conn_state state;
	struct sbuf in, out;
	size_t out_off;	 /* bytes of out already sent */
	size_t head_len; /* 0 until the head has been parsed */
	int complete;	 /* the whole request was read */
	struct http_req req;
	time_t deadline; /* dropped when reached */
};

static struct conn *conns[CONN_MAX];
static size_t nconns;

static struct conn *
conn_new(int fd, time_t now)
{
	struct conn *c = xmalloc(sizeof(*c));

	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->state = CONN_READING;
	sb_init(&c->in);
	sb_init(&c->out);
	sb_init(&c->req.body);
	c->req.content_length = -1;
	c->deadline = now + IDLE_SECONDS;
	return c;
}

static void
conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static void
conn_free(struct conn *c)
{
	conn_close(c);
	sb_release(&c->in);
	sb_release(&c->out);
	http_req_release(&c->req);
	free(c);
}

/*
 * Puts the response to c's request in c->out, logs it and moves c to
 * WRITING. A nonzero early_status means the request was not read in full
 * or is malformed: it gets that error (message msg) instead of a route.
 */
static void
conn_answer(struct conn *c, int early_status, const char *msg)
{
	struct exchange x;
	const struct route *rt = NULL;
	size_t i;

	memset(&x, 0, sizeof(x));
	x.req = &c->req;
	x.out = &c->out;
	x.n = ++seq;
	if (early_status) {
		x.wire = c->req.path ? wire_of_path(c->req.path) : WIRE_OTHER;
		respond_error(&x, early_status, msg, NULL);
		goto out;
	}
	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (!strcmp(c->req.method, routes[i].method) &&
		    has_suffix(c->req.path, routes[i].suffix)) {
			rt = &routes[i];
			break;
		}
	}
	if (!rt) {
		char text[256];

		x.wire = WIRE_OTHER;
		snprintf(text, sizeof(text), "no route for %.16s %.200s",
			 c->req.method, c->req.path);
		respond_error(&x, 404, text, NULL);
		goto out;
	}
	x.wire = rt->wire;
	rt->serve(&x);
out:
	log_exchange(&x);
	if (x.have_ask)
		ask_release(&x.ask);
	answer_release(&x.ans);
	free(x.reply);
	c->state = x.hang ? CONN_HOLD : CONN_WRITING;
	if (x.hang)
		c->deadline = time(NULL) + HOLD_SECONDS;
}

/*
 * Looks at what c has read so far: parses the head once it is complete,
 * sends 100 Continue when asked, and answers once the body is complete
 * (or as soon as the request is known to be bad or too large).
 */
static void
conn_process(struct conn *c)
{
	const char *body;
	size_t avail, used;
	int rc;

	if (!c->head_len) {
		c->head_len = head_end(c->in.ptr, c->in.len);
		if (!c->head_len) {
			if (c->in.len > REQ_MAX)
				conn_answer(c, 413, "request too large");
			return;
		}
		rc = parse_head(&c->req, c->in.ptr, c->head_len);
		if (rc) {
			conn_answer(c, rc, "malformed request head");
			return;
		}
		if (c->req.content_length >
		    (long long)(REQ_MAX - c->head_len)) {
			conn_answer(c, 413, "request too large");
			return;
		}
		if (c->req.expect_continue &&
		    (c->req.chunked ||
		     c->req.content_length >
			 (long long)(c->in.len - c->head_len)))
			sb_adds(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
	}
	body = c->in.ptr + c->head_len;
	avail = c->in.len - c->head_len;
	if (c->req.chunked) {
		rc = chunked_decode(body, avail, NULL, &used);
		if (rc < 0) {
			conn_answer(c, 400, "malformed chunked body");
			return;
		}
		if (rc == 0) {
			if (c->in.len > REQ_MAX)
				conn_answer(c, 413, "request too large");
			return;
		}
		chunked_decode(body, avail, &c->req.body, &used);
	} else if (c->req.content_length > 0) {
		if ((long long)avail < c->req.content_length)
			return;
		sb_add(&c->req.body, body, (size_t)c->req.content_length);
	}
	c->complete = 1;
	conn_answer(c, 0, NULL);
}

/*
 * Sends what is pending in c->out. Once the response is out, closes c, or
 * shuts down our side and lingers when the request was not read in full.
 */
static void
conn_flush(struct conn *c, time_t now)
{
	ssize_t n;

	while (c->out_off < c->out.len) {
		n = send(c->fd, c->out.ptr + c->out_off,
			 c->out.len - c->out_off, MSG_NOSIGNAL);
		if (n > 0) {
			c->out_off += (size_t)n;
			c->deadline = now + IDLE_SECONDS;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		conn_close(c);
		return;
	}
	if (c->state != CONN_WRITING)
		return; /* a 100 Continue went out; the request goes on */
	if (c->complete) {
		conn_close(c);
		return;
	}
	shutdown(c->fd, SHUT_WR);
	c->state = CONN_LINGER;
	c->deadline = now + LINGER_SECONDS;
}

/* Reads what c's socket has (discarding it when lingering). */
static void
conn_read(struct conn *c, time_t now)
{
	char junk[4096];
	size_t room;
	ssize_t n;
	int eof = 0;

	if (c->state == CONN_LINGER || c->state == CONN_HOLD) {
		for (;;) {
			n = read(c->fd, junk, sizeof(junk));
			if (n > 0 || (n < 0 && errno == EINTR))
				continue;
			if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
				conn_close(c);
			return;
		}
	}
	for (;;) {
		room = REQ_MAX + 1 - c->in.len;
		if (!room)
			break;
		if (room > READ_CHUNK)
			room = READ_CHUNK;
		sb_grow(&c->in, room);
		n = read(c->fd, c->in.ptr + c->in.len, room);
		if (n > 0) {
			c->in.len += (size_t)n;
			c->in.ptr[c->in.len] = '\0';
			continue;
		}
		if (n == 0) {
			eof = 1;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		conn_close(c);
		return;
	}
	c->deadline = now + IDLE_SECONDS;
	conn_process(c);
	if (c->state == CONN_READING && eof)
		conn_close(c); /* the client gave up mid-request */
	else if (c->out_off < c->out.len)
		conn_flush(c, now);
}

static short
conn_events(const struct conn *c)
{
	switch (c->state) {
	case CONN_READING:
		return POLLIN | (c->out_off < c->out.len ? POLLOUT : 0);
	case CONN_WRITING:
		return POLLOUT;
	case CONN_LINGER:
	case CONN_HOLD:
		return POLLIN;
	}
	return 0;
}

static void
on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/*
 * The event loop: until SIGTERM or SIGINT (blocked except inside ppoll,
 * so a signal cannot slip in between the check and the wait), accept
 * connections and move each one along.
 */
static void
serve(int lfd, const sigset_t *waitmask)
{
	struct pollfd *pfd = xmalloc((CONN_MAX + 1) * sizeof(*pfd));
	struct timespec tick = { 1, 0 };
	struct conn *c;
	size_t i, j, n;
	time_t now;
	short re;
	int fd;

	while (!stopping) {
		n = nconns;
		pfd[0].fd = lfd;
		pfd[0].events = n < CONN_MAX ? POLLIN : 0;
		pfd[0].revents = 0;
		for (i = 0; i < n; i++) {
			pfd[i + 1].fd = conns[i]->fd;
			pfd[i + 1].events = conn_events(conns[i]);
			pfd[i + 1].revents = 0;
		}
		if (ppoll(pfd, n + 1, &tick, waitmask) < 0) {
			if (errno == EINTR)
				continue;
			fatalx("poll: %s", strerror(errno));
		}
		now = time(NULL);
		for (i = 0; i < n; i++) {
			c = conns[i];
			re = pfd[i + 1].revents;
			if (c->state != CONN_WRITING &&
			    (re & (POLLIN | POLLHUP | POLLERR)))
				conn_read(c, now);
			if (c->fd >= 0 && c->out_off < c->out.len &&
			    (re & (POLLOUT | POLLHUP | POLLERR)))
				conn_flush(c, now);
			if (c->fd >= 0 && now >= c->deadline)
				conn_close(c);
		}
		while ((pfd[0].revents & POLLIN) && nconns < CONN_MAX) {
			fd = accept4(lfd, NULL, NULL,
				     SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0)
				break; /* EAGAIN, or out of fds: try later */
			conns[nconns++] = conn_new(fd, now);
		}
		for (i = j = 0; i < nconns; i++) {
			if (conns[i]->fd < 0)
				conn_free(conns[i]);
			else
				conns[j++] = conns[i];
		}
		nconns = j;
	}
	for (i = 0; i < nconns; i++)
		conn_free(conns[i]);
	nconns = 0;
	free(pfd);
}

/* A listening socket on 127.0.0.1:port; *out gets the actual port. */
static int
listen_on(int port, int *out)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fatalx("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		fatalx("cannot bind 127.0.0.1:%d: %s", port, strerror(errno));
	if (listen(fd, 128) < 0)
		fatalx("listen: %s", strerror(errno));
	if (getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
		fatalx("getsockname: %s", strerror(errno));
	*out = ntohs(sin.sin_port);
	return fd;
}

/* Writes "PORT\n" to path through path.tmp and a rename. */
static void
write_port_file(const char *path, int port)
{
	struct sbuf tmp = SBUF_INIT;
	FILE *f;

	sb_addf(&tmp, "%s.tmp", path);
	f = fopen(tmp.ptr, "we");
	if (!f)
		fatalx("cannot create '%s': %s", tmp.ptr, strerror(errno));
	fprintf(f, "%d\n", port);
	if (fflush(f) || fsync(fileno(f)) || fclose(f))
		fatalx("cannot write '%s': %s", tmp.ptr, strerror(errno));
	if (rename(tmp.ptr, path))
		fatalx("cannot rename '%s' to '%s': %s", tmp.ptr, path,
		       strerror(errno));
	sb_release(&tmp);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "port-file", required_argument, NULL, 'f' },
		{ "script", required_argument, NULL, 's' },
		{ "log", required_argument, NULL, 'l' },
		{ "fail", required_argument, NULL, 'F' },
		{ "require-key", required_argument, NULL, 'k' },
		{ "context-limit", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	pid_t parent = getppid();
	struct sigaction sa;
	sigset_t block, waitmask;
	char *end;
	long v;
	int c, lfd, port;

	for (;;) {
		c = getopt_long(argc, argv, "", longopts, NULL);
		if (c == -1)
			break;
		switch (c) {
		case 'p':
			if (parse_long(optarg, &end, 0, 65535, &v) || *end)
				usage();
			opt.port = (int)v;
			break;
		case 'f':
			opt.port_file = optarg;
			break;
		case 's':
			opt.script_file = optarg;
			break;
		case 'l':
			opt.log_file = optarg;
			break;
		case 'F':
			parse_fail(optarg);
			break;
		case 'k':
			opt.require_key = optarg;
			break;
		case 'C':
			if (parse_long(optarg, &end, 1, REQ_MAX, &v) || *end)
				usage();
			opt.context_limit = v;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	if (opt.script_file)
		load_script();
	if (opt.log_file) {
		log_fp = fopen(opt.log_file, "ae");
		if (!log_fp)
			fatalx("cannot open '%s': %s", opt.log_file,
			       strerror(errno));
	}

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	/* Never outlive the shell that started us; it may already be gone. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
		fatalx("prctl: %s", strerror(errno));
	if (getppid() != parent)
		return 0;

	lfd = listen_on(opt.port, &port);
	if (opt.port_file)
		write_port_file(opt.port_file, port);
	serve(lfd, &waitmask);
	close(lfd);
	if (log_fp)
		fclose(log_fp);
	json_decref(rules);
	return 0;
}
