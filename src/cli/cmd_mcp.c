/*
 * baton mcp: a Model Context Protocol server on stdin/stdout, so that a
 * coding agent or an editor can drive baton (docs/mcp.md).
 *
 * The wire is JSON-RPC 2.0, one message a line (the MCP stdio
 * transport). It answers initialize (the client's protocolVersion when
 * it is one of ours, else our newest), ping, tools/list, tools/call,
 * resources/list, resources/read and resources/templates/list; it takes
 * the notifications (notifications/initialized, cancelled) and answers
 * none. Protocol errors carry JSON-RPC codes: -32700 a line that is not
 * JSON (or longer than MCP_LINE_MAX), -32600 not a request, -32601 an
 * unknown method, -32602 params that do not fit (a tool's arguments are
 * checked against its inputSchema, and a run or task id must look like
 * one), -32002 a resource that does not exist. A tool that runs and
 * fails (no such run, a run not waiting at a gate) answers a result with
 * isError true and the engine's message.
 *
 * Every tool goes through the doors the commands use (sched_task_add,
 * store_run_list, engine_pause, engine_decide, engine_steer_mode ...), so
 * what MCP may do is what the CLI may do. stdout carries nothing but the
 * protocol; diagnostics go to stderr. The server ends when stdin ends,
 * after answering what it has read.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "core/gate.h"
#include "core/mcpcheck.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/version.h"
#include "util/xalloc.h"

/* The longest message line read; a longer one is refused (-32700). */
#define MCP_LINE_MAX (1024 * 1024)
/* Runs and tasks a list answers with by default (at most 500: LIST_PROPS). */
#define MCP_LIST_DEFAULT 50
/* Runs resources/list names (their report and diff), newest first. */
#define MCP_RESOURCE_RUNS 20
/* The longest run or task reference taken. */

enum {
	RPC_PARSE = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_NO_METHOD = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL = -32603,
	RPC_NO_RESOURCE = -32002,
};

/* The protocol versions spoken, newest first. */
static const char *const versions[] = { "2025-06-18", "2025-03-26",
					"2024-11-05" };

/*
 * The session. Requests before initialize are answered too: the state
 * is all in the store, and a client that skips the handshake gets what
 * it asks for.
 */
struct mcp {
	struct cli *c;
};

/* ---- answers ------------------------------------------------------------- */

/* Writes one message, a line; -1 when stdout is gone. */
static int
send_msg(json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	int rc = 0;

	json_decref(msg);
	if (!s)
		return -1;
	if (fputs(s, stdout) == EOF || fputc('\n', stdout) == EOF ||
	    fflush(stdout) == EOF)
		rc = -1;
	free(s);
	return rc;
}

static int
send_result(json_t *id, json_t *result)
{
	return send_msg(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
				  id ? id : json_null(), "result", result));
}

static int __attribute__((format(printf, 3, 4)))
send_error(json_t *id, int code, const char *fmt, ...)
{
	struct buf msg = BUF_INIT;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	buf_vaddf(&msg, fmt, ap);
	va_end(ap);
	rc = send_msg(json_pack("{s:s, s:O, s:{s:i, s:o}}", "jsonrpc", "2.0",
				"id", id ? id : json_null(), "error", "code",
				code, "message",
				json_lossy(msg.ptr, msg.len)));
	buf_release(&msg);
	return rc;
}

/*
 * What a tool call ends with: a result (isError false) with data as
 * indented JSON text and as structuredContent, or a tool error
 * (isError true) with a message, or a protocol error (-32602).
 */
struct outcome {
	json_t *data;	 /* a result's data, an object; or NULL */
	char *text;	 /* a result's text, when not data */
	int proto;	 /* a protocol error code, or 0 */
	struct buf msg;	 /* an error's message */
};

static void __attribute__((format(printf, 3, 4)))
fail(struct outcome *o, int proto, const char *fmt, ...)
{
	va_list ap;

	o->proto = proto;
	buf_reset(&o->msg);
	va_start(ap, fmt);
	buf_vaddf(&o->msg, fmt, ap);
	va_end(ap);
}

/* A tool error with the engine's message. */
static void
fail_err(struct outcome *o, const struct err *e)
{
	fail(o, 0, "%s", e->msg);
}

static int
answer_tool(json_t *id, struct outcome *o)
{
	json_t *res, *content;

	if (o->proto)
		return send_error(id, o->proto, "%s", o->msg.ptr);
	content = json_array();
	res = json_object();
	if (o->msg.len) {
		json_array_append_new(
			content,
			json_pack("{s:s, s:o}", "type", "text", "text",
				  json_lossy(o->msg.ptr, o->msg.len)));
		json_object_set_new(res, "isError", json_true());
	} else if (o->data) {
		char *s = json_dumps(o->data, JSON_INDENT(2));

		json_array_append_new(content,
				      json_pack("{s:s, s:o}", "type", "text",
						"text", json_lossy_str(s)));
		free(s);
		json_object_set(res, "structuredContent", o->data);
		json_object_set_new(res, "isError", json_false());
	} else {
		json_array_append_new(content,
				      json_pack("{s:s, s:o}", "type", "text",
						"text",
						json_lossy_str(o->text ?
								       o->text :
								       "")));
		json_object_set_new(res, "isError", json_false());
	}
	json_object_set_new(res, "content", content);
	return send_result(id, res);
}

/* ---- argument checks ----------------------------------------------------- */

/* args' string key, or NULL. */
static const char *
arg_str(const json_t *args, const char *key)
{
	return json_string_value(json_object_get(args, key));
}

/* The "run" argument, checked (ref_ok); NULL after failing o. */
static const char *
run_arg(const json_t *args, struct outcome *o)
{
	const char *ref = arg_str(args, "run");

	if (!mcp_ref_ok(ref)) {
		struct buf shown = BUF_INIT;

		json_describe(json_object_get(args, "run"), 60, &shown);
		fail(o, RPC_INVALID_PARAMS,
		     "\"run\": %s is not a run id (r7, 7 or the full id: "
		     "letters, digits, '.', '_' and '-')",
		     shown.ptr);
		buf_release(&shown);
		return NULL;
	}
	return ref;
}

/* Refuses a text argument holding a control character (control_at). */
static int
text_ok(const json_t *args, const char *key, struct outcome *o)
{
	const char *s = arg_str(args, key);
	long at;

	if (!s || (at = mcp_control_at(s)) < 0)
		return 1;
	fail(o, RPC_INVALID_PARAMS,
	     "\"%s\": control character 0x%02x at byte %ld is not allowed "
	     "(tab and newline are)",
	     key, (unsigned char)s[at], at);
	return 0;
}

/* ---- tools --------------------------------------------------------------- */

static struct sched_ctx
ctx_of(struct mcp *m)
{
	struct sched_ctx x = { .store = m->c->store, .ws = &m->c->ws,
			       .cfg = &m->c->cfg, .holder = "mcp",
			       .store_spec = m->c->store_spec };

	return x;
}

/* A strvec of args' string array key as JSON array text; NULL if none. */
static char *
json_list_arg(const json_t *args, const char *key)
{
	const json_t *a = json_object_get(args, key);

	if (!json_array_size(a))
		return NULL;
	return json_dumps(a, JSON_COMPACT);
}

static void
tool_add_task(struct mcp *m, const json_t *args, struct outcome *o)
{
	struct sched_ctx x = ctx_of(m);
	const json_t *after = json_object_get(args, "after");
	const char *pipeline = arg_str(args, "pipeline");
	struct err e = ERR_INIT;
	struct task t = { 0 };
	size_t i, n;

	if (!text_ok(args, "title", o) || !text_ok(args, "body", o))
		return;
	n = json_array_size(after);
	if (n)
		t.deps = xcalloc(n, sizeof(*t.deps));
	for (i = 0; t.deps && i < n; i++) {
		const char *ref = json_string_value(json_array_get(after, i));
		int64_t id = sched_task_ref(ref);

		if (!id) {
			fail(o, RPC_INVALID_PARAMS,
			     "\"after\": '%.60s' is not a task id (t7 or 7)",
			     ref);
			goto out;
		}
		t.deps[t.nr_deps++] = id;
	}
	if (pipeline) {
		struct pipeline *p = NULL;

		if (engine_pipeline(&m->c->en, pipeline, &p, &e)) {
			fail_err(o, &e);
			goto out;
		}
		pipeline_free(p);
	}
	t.title = xstrdup(arg_str(args, "title"));
	t.body = arg_str(args, "body") ? xstrdup(arg_str(args, "body")) : NULL;
	t.area = arg_str(args, "area") && *arg_str(args, "area") ?
			 xstrdup(arg_str(args, "area")) :
			 NULL;
	t.pipeline = pipeline ? xstrdup(pipeline) : NULL;
	t.priority = (int)json_integer_value(json_object_get(args, "priority"));
	t.max_attempts =
		(int)json_integer_value(json_object_get(args, "max_attempts"));
	t.allowed_paths = json_list_arg(args, "allow");
	t.verify = json_list_arg(args, "verify");
	if (sched_task_add(&x, &t, &e)) {
		fail_err(o, &e);
		goto out;
	}
	sched_wake(&m->c->ws);
	o->data = sched_task_json(m->c->store, &t, 1);
out:
	task_release(&t);
}

struct task_rows {
	struct store *s;
	json_t *arr;
};

static int
add_task_json(const struct task *t, void *arg)
{
	struct task_rows *l = arg;

	json_array_append_new(l->arr, sched_task_json(l->s, t, 0));
	return 0;
}

static int
list_limit(const json_t *args)
{
	const json_t *v = json_object_get(args, "limit");

	return v ? (int)json_integer_value(v) : MCP_LIST_DEFAULT;
}

static void
tool_list_tasks(struct mcp *m, const json_t *args, struct outcome *o)
{
	struct task_rows l = { m->c->store, json_array() };
	struct store_task_filter f = { 0 };
	struct err e = ERR_INIT;

	f.status = arg_str(args, "status");
	f.limit = list_limit(args);
	f.newest_first = 1;
	if ((f.status && task_status_check(f.status, &e)) ||
	    store_task_list(m->c->store, &f, add_task_json, &l, &e)) {
		json_decref(l.arr);
		fail_err(o, &e);
		return;
	}
	o->data = json_pack("{s:o}", "tasks", l.arr);
}

static void
tool_show_task(struct mcp *m, const json_t *args, struct outcome *o)
{
	const char *ref = arg_str(args, "task");
	int64_t id = mcp_ref_ok(ref) ? sched_task_ref(ref) : 0;
	struct err e = ERR_INIT;
	struct task t = { 0 };

	if (!id) {
		fail(o, RPC_INVALID_PARAMS,
		     "\"task\": '%.60s' is not a task id (t7 or 7)", ref);
		return;
	}
	if (store_task_get(m->c->store, id, &t, &e)) {
		fail(o, 0, "%s",
		     e.rc == BATON_ENOTFOUND ? "no such task" : e.msg);
		return;
	}
	o->data = sched_task_json(m->c->store, &t, 1);
	task_release(&t);
}

static int
add_run_json(const struct run *r, void *arg)
{
	json_array_append_new(arg, engine_run_json(r));
	return 0;
}

static void
tool_list_runs(struct mcp *m, const json_t *args, struct outcome *o)
{
	struct store_run_filter f = { NULL, 0, 0 };
	struct err e = ERR_INIT;
	json_t *arr = json_array();

	f.status = arg_str(args, "status");
	f.limit = list_limit(args);
	if ((f.status && engine_check_status(&m->c->en, f.status, &e)) ||
	    store_run_list(m->c->store, &f, add_run_json, arr, &e)) {
		json_decref(arr);
		fail_err(o, &e);
		return;
	}
	o->data = json_pack("{s:o}", "runs", arr);
}

/* Loads args' run; 0, or -1 after failing o. */
static int
load_run(struct mcp *m, const json_t *args, struct run *r, struct outcome *o)
{
	const char *ref = run_arg(args, o);
	struct err e = ERR_INIT;

	if (!ref)
		return -1;
	if (store_run_get(m->c->store, ref, r, &e)) {
		fail_err(o, &e);
		return -1;
	}
	return 0;
}

static void
tool_show_run(struct mcp *m, const json_t *args, struct outcome *o)
{
	struct run r = { 0 };
	char *dir;

	if (load_run(m, args, &r, o))
		return;
	o->data = engine_run_json(&r);
	dir = workspace_run_dir(&m->c->ws, r.id);
	json_object_set_new(o->data, "run_dir", json_lossy_str(dir));
	json_object_set_new(o->data, "resources",
			    json_pack("{s:s++, s:s++}", "report", "baton://runs/",
				      r.id, "/report", "diff", "baton://runs/",
				      r.id, "/diff"));
	free(dir);
	run_release(&r);
}

static int
add_approval(const struct run *r, void *arg)
{
	json_array_append_new(
		arg, json_pack("{s:s, s:o, s:s?, s:s?, s:o}", "run", r->id,
			       "task_id",
			       r->task_id ? json_integer(r->task_id) :
					    json_null(),
			       "gate", r->gate_status, "redo", r->gate_back,
			       "title", json_lossy_str(r->task)));
	return 0;
}

static void
tool_list_approvals(struct mcp *m, const json_t *args, struct outcome *o)
{
	struct store_run_filter f = { ST_WAITING, 0, 0 };
	struct err e = ERR_INIT;
	json_t *arr = json_array();

	(void)args;
	if (store_run_list(m->c->store, &f, add_approval, arr, &e)) {
		json_decref(arr);
		fail_err(o, &e);
		return;
	}
	o->data = json_pack("{s:o}", "approvals", arr);
}

/* The run's record after an action, noting when nothing drives it. */
static void
after_action(struct mcp *m, struct run *r, struct outcome *o)
{
	o->data = engine_run_json(r);
	json_object_set_new(o->data, "driven",
			    json_boolean(status_is_terminal(r->status) ||
					 r->task_id ||
					 engine_driver_pid(&m->c->en, r->id)));
	run_release(r);
}

static void
tool_decide(struct mcp *m, const json_t *args, struct outcome *o)
{
	const char *ref = run_arg(args, o);
	enum gate_decision d;
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (!ref || !text_ok(args, "guidance", o))
		return;
	if (gate_decision_parse(arg_str(args, "decision"), &d, &e)) {
		fail(o, RPC_INVALID_PARAMS, "\"decision\": %s", e.msg);
		return;
	}
	if (engine_decide(&m->c->en, ref, d, arg_str(args, "guidance"), &r,
			  &e)) {
		fail_err(o, &e);
		return;
	}
	sched_wake(&m->c->ws);
	after_action(m, &r, o);
}

static void
tool_pause(struct mcp *m, const json_t *args, struct outcome *o)
{
	const char *ref = run_arg(args, o);
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (!ref)
		return;
	if (engine_pause(&m->c->en, ref, &r, &e)) {
		fail_err(o, &e);
		return;
	}
	after_action(m, &r, o);
}

static void
tool_abort(struct mcp *m, const json_t *args, struct outcome *o)
{
	const char *ref = run_arg(args, o);
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (!ref)
		return;
	if (engine_abort(&m->c->en, ref, &r, &e)) {
		fail_err(o, &e);
		return;
	}
	after_action(m, &r, o);
}

/*
 * The API's resume (POST /runs/{id}/resume): the drift settled by
 * "config" first, then engine_resume. A bare run nothing drives waits
 * for `baton resume` in a terminal, which the answer says.
 */
static void
tool_resume(struct mcp *m, const json_t *args, struct outcome *o)
{
	static const struct {
		const char *name;
		enum drift_choice choice;
	} choices[] = {
		{ "snapshot", DRIFT_SNAPSHOT },
		{ "current", DRIFT_CURRENT },
		{ "fresh", DRIFT_FRESH },
	};
	const char *ref = run_arg(args, o), *config = arg_str(args, "config");
	struct sched_ctx x = ctx_of(m);
	struct sched_rerun rerun = { &x, 1 };
	enum drift_choice choice = DRIFT_ASK;
	struct drift_outcome d = { 0 };
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int drive = 0;
	size_t i;

	if (!ref)
		return;
	for (i = 0; config && i < ARRAY_SIZE(choices); i++)
		if (!strcmp(config, choices[i].name))
			choice = choices[i].choice;
	strvec_init(&d.changes);
	if (engine_settle_drift(&m->c->en, ref, choice, sched_task_rerun,
				&rerun, &d, &e)) {
		fail_err(o, &e);
	} else if (d.result == DRIFT_UNDECIDED) {
		fail(o, 0, "config changed since %s started: ", d.run.id);
		for (i = 0; i < d.changes.nr; i++)
			buf_addf(&o->msg, "%s%s", i ? "; " : "",
				 d.changes.v[i]);
		buf_adds(&o->msg, "; resume with \"config\": \"snapshot\" (the "
				  "config it started with), \"current\" or "
				  "\"fresh\"");
	} else if (d.result == DRIFT_RESTARTED) {
		o->data = engine_run_json(&d.fresh);
		json_object_set_new(o->data, "fresh_of",
				    json_string(d.run.id));
		sched_wake(&m->c->ws);
	} else if (engine_resume(&m->c->en, ref, &drive, &r, &e)) {
		fail_err(o, &e);
	} else {
		sched_wake(&m->c->ws);
		o->data = engine_run_json(&r);
		json_object_set_new(o->data, "driven",
				    json_boolean(!drive || r.task_id));
		if (drive && !r.task_id)
			json_object_set_new(
				o->data, "note",
				json_pack("s++", "no process drives it: run `"
						 "baton resume ", r.id,
					  "` in a terminal"));
		run_release(&r);
	}
	drift_outcome_release(&d);
}

static void
tool_steer(struct mcp *m, const json_t *args, struct outcome *o)
{
	const char *ref = run_arg(args, o), *mode = arg_str(args, "mode");
	struct err e = ERR_INIT;
	int sm = STEER_FOLLOWUP;

	if (!ref || !text_ok(args, "text", o))
		return;
	if (mode)
		sm = steer_mode_parse(mode);
	if (sm < 0) {
		fail(o, RPC_INVALID_PARAMS, "\"mode\": '%s' is not a mode",
		     mode);
		return;
	}
	if (engine_steer_mode(&m->c->en, ref, arg_str(args, "text"), sm, &e)) {
		fail_err(o, &e);
		return;
	}
	o->data = json_pack("{s:b, s:s, s:s}", "ok", 1, "run", ref, "mode",
			    steer_mode_name(sm));
}

/* The run's diff against its base into out (cmd_diff.c's door). */
static int
run_diff(struct mcp *m, const struct run *r, int stat, struct buf *out,
	 struct err *e)
{
	if (!r->worktree || !r->base_commit || !fs_is_dir(r->worktree))
		return err_set(e, BATON_ENOTFOUND,
			       "run '%s' has no worktree yet", r->id);
	return worktree_diff(&m->c->ws, r->worktree, r->base_commit, stat, out,
			     e);
}

static void
tool_diff(struct mcp *m, const json_t *args, struct outcome *o)
{
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (load_run(m, args, &r, o))
		return;
	if (run_diff(m, &r, json_is_true(json_object_get(args, "stat")), &out,
		     &e))
		fail_err(o, &e);
	else
		o->text = buf_detach(&out, NULL);
	buf_release(&out);
	run_release(&r);
}

/* The name of the run's newest report file ("reports/003.md"). */
static int
newest_report(const struct store_file *f, void *arg)
{
	char **best = arg;
	size_t n = strlen(f->name);

	if (strncmp(f->name, "reports/", 8) || n < 11 ||
	    strcmp(f->name + n - 3, ".md"))
		return 0;
	if (!*best || strcmp(f->name, *best) > 0) {
		free(*best);
		*best = xstrdup(f->name);
	}
	return 0;
}

/*
 * The run's newest report (engine/report.c: reports/NNN.md, kept in the
 * store) into out. BATON_ENOTFOUND when it has none yet.
 */
static int
run_report(struct mcp *m, const struct run *r, struct buf *out, struct err *e)
{
	struct store_file f = { 0 };
	char *name = NULL;
	int rc;

	rc = store_file_list(m->c->store, r->id, newest_report, &name, e);
	if (!rc && !name)
		rc = err_set(e, BATON_ENOTFOUND,
			     "run '%s' has no report yet (a run reports when "
			     "it ends, and on the way when it runs long)",
			     r->id);
	if (!rc)
		rc = store_file_get(m->c->store, r->id, name, &f, e);
	if (!rc) {
		buf_add(out, f.content, f.len);
		store_file_release(&f);
	}
	free(name);
	return rc;
}

static void
tool_report(struct mcp *m, const json_t *args, struct outcome *o)
{
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (load_run(m, args, &r, o))
		return;
	if (run_report(m, &r, &out, &e))
		fail_err(o, &e);
	else
		o->text = buf_detach(&out, NULL);
	buf_release(&out);
	run_release(&r);
}

#define RUN_PROP                                                              \
	"\"run\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": "   \
	"128, \"description\": \"the run: its id, r7 or 7\"}"
#define LIST_PROPS                                                            \
	"\"status\": {\"type\": \"string\", \"description\": \"only those in " \
	"this status\"}, \"limit\": {\"type\": \"integer\", \"minimum\": 1, " \
	"\"maximum\": 500, \"description\": \"at most this many, newest "     \
	"first (default 50)\"}"

struct tool {
	const char *name, *title, *description;
	const char *schema; /* the inputSchema, JSON text */
	int read_only;
	void (*fn)(struct mcp *m, const json_t *args, struct outcome *o);
};

static const struct tool tools[] = {
	{ "add_task", "Add a task",
	  "Queue a task for baton serve's workers: a title, optionally a body "
	  "for the agent, a priority, dependencies, an area, allowed paths, "
	  "verify commands, a pipeline. Returns the task.",
	  "{\"type\": \"object\", \"properties\": {"
	  "\"title\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": "
	  "4096, \"description\": \"what to do, one line\"}, "
	  "\"body\": {\"type\": \"string\", \"maxLength\": 1048576, "
	  "\"description\": \"longer text for the agent\"}, "
	  "\"priority\": {\"type\": \"integer\", \"minimum\": -1000, "
	  "\"maximum\": 1000, \"description\": \"higher runs first (0)\"}, "
	  "\"after\": {\"type\": \"array\", \"maxItems\": 100, \"items\": "
	  "{\"type\": \"string\"}, \"description\": \"task ids (t3) it waits "
	  "for\"}, "
	  "\"area\": {\"type\": \"string\", \"maxLength\": 4096, "
	  "\"description\": \"the path it works in\"}, "
	  "\"allow\": {\"type\": \"array\", \"maxItems\": 100, \"items\": "
	  "{\"type\": \"string\"}, \"description\": \"globs of the paths it "
	  "may change\"}, "
	  "\"verify\": {\"type\": \"array\", \"maxItems\": 100, \"items\": "
	  "{\"type\": \"string\"}, \"description\": \"shell commands that "
	  "must pass\"}, "
	  "\"pipeline\": {\"type\": \"string\", \"maxLength\": 256}, "
	  "\"max_attempts\": {\"type\": \"integer\", \"minimum\": 1, "
	  "\"maximum\": 100}}, "
	  "\"required\": [\"title\"], \"additionalProperties\": false}",
	  0, tool_add_task },
	{ "list_tasks", "List tasks",
	  "The task queue, newest first: id, status, title, run.",
	  "{\"type\": \"object\", \"properties\": {" LIST_PROPS "}, "
	  "\"additionalProperties\": false}",
	  1, tool_list_tasks },
	{ "show_task", "Show a task",
	  "One task with its runs and dependencies.",
	  "{\"type\": \"object\", \"properties\": {\"task\": {\"type\": "
	  "\"string\", \"minLength\": 1, \"maxLength\": 32, \"description\": "
	  "\"t7 or 7\"}}, \"required\": [\"task\"], "
	  "\"additionalProperties\": false}",
	  1, tool_show_task },
	{ "list_runs", "List runs",
	  "Runs, newest first: id, status, stage, cost, the question a "
	  "person is asked.",
	  "{\"type\": \"object\", \"properties\": {" LIST_PROPS "}, "
	  "\"additionalProperties\": false}",
	  1, tool_list_runs },
	{ "show_run", "Show a run",
	  "One run's record, with its report and diff resource URIs.",
	  "{\"type\": \"object\", \"properties\": {" RUN_PROP "}, "
	  "\"required\": [\"run\"], \"additionalProperties\": false}",
	  1, tool_show_run },
	{ "list_approvals", "List questions",
	  "The runs waiting at a gate for a person's decision.",
	  "{\"type\": \"object\", \"properties\": {}, "
	  "\"additionalProperties\": false}",
	  1, tool_list_approvals },
	{ "decide", "Answer a question",
	  "Decide a run waiting at a gate: approve (enter the gated stage), "
	  "reject (end it blocked), request-changes (redo the stage before "
	  "the gate with guidance), revise or defer.",
	  "{\"type\": \"object\", \"properties\": {" RUN_PROP ", "
	  "\"decision\": {\"type\": \"string\", \"enum\": [\"approve\", "
	  "\"reject\", \"request-changes\", \"revise\", \"defer\"]}, "
	  "\"guidance\": {\"type\": \"string\", \"maxLength\": 65536, "
	  "\"description\": \"what to change (request-changes, revise)\"}}, "
	  "\"required\": [\"run\", \"decision\"], "
	  "\"additionalProperties\": false}",
	  0, tool_decide },
	{ "pause_run", "Pause a run",
	  "Pause a run at its next stage boundary.",
	  "{\"type\": \"object\", \"properties\": {" RUN_PROP "}, "
	  "\"required\": [\"run\"], \"additionalProperties\": false}",
	  0, tool_pause },
	{ "resume_run", "Resume a run",
	  "Take back a pause or continue a paused run. When the config "
	  "changed since the run started, say which to use.",
	  "{\"type\": \"object\", \"properties\": {" RUN_PROP ", "
	  "\"config\": {\"type\": \"string\", \"enum\": [\"snapshot\", "
	  "\"current\", \"fresh\"], \"description\": \"after a config "
	  "change: the run's own config, the current one, or a fresh run\"}}, "
	  "\"required\": [\"run\"], \"additionalProperties\": false}",
	  0, tool_resume },
	{ "abort_run", "Abort a run",
	  "End a run aborted, stopping its agent; the worktree is kept.",
	  "{\"type\": \"object\", \"properties\": {" RUN_PROP "}, "
	  "\"required\": [\"run\"], \"additionalProperties\": false}",
	  0, tool_abort },
	{ "steer_run", "Steer a run",
	  "Guidance for a run: followup (the next stage reads it, the "
	  "default), steer (the agent working now takes it at once) or "
	  "collect (the task's next run).",
	  "{\"type\": \"object\", \"properties\": {" RUN_PROP ", "
	  "\"text\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": "
	  "65536}, \"mode\": {\"type\": \"string\", \"enum\": [\"followup\", "
	  "\"steer\", \"collect\"]}}, "
	  "\"required\": [\"run\", \"text\"], \"additionalProperties\": false}",
	  0, tool_steer },
	{ "run_diff", "A run's diff",
	  "The run's change against the commit it branched from.",
	  "{\"type\": \"object\", \"properties\": {" RUN_PROP ", "
	  "\"stat\": {\"type\": \"boolean\", \"description\": \"the summary "
	  "only\"}}, \"required\": [\"run\"], \"additionalProperties\": false}",
	  1, tool_diff },
	{ "run_report", "A run's report",
	  "The run's newest report (markdown): what changed, blockers, next "
	  "steps, budget, evidence.",
	  "{\"type\": \"object\", \"properties\": {" RUN_PROP "}, "
	  "\"required\": [\"run\"], \"additionalProperties\": false}",
	  1, tool_report },
};

static json_t *schemas[ARRAY_SIZE(tools)];

static json_t *
schema_of(size_t i)
{
	json_error_t je;

	if (!schemas[i]) {
		schemas[i] = json_loads(tools[i].schema, 0, &je);
		if (!schemas[i])
			BUG("tool %s: bad inputSchema: %s", tools[i].name,
			    je.text);
	}
	return schemas[i];
}

static int
tools_list(json_t *id)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; i < ARRAY_SIZE(tools); i++)
		json_array_append_new(
			arr,
			json_pack("{s:s, s:s, s:s, s:O, s:{s:b, s:b}}", "name",
				  tools[i].name, "title", tools[i].title,
				  "description", tools[i].description,
				  "inputSchema", schema_of(i), "annotations",
				  "readOnlyHint", tools[i].read_only,
				  "destructiveHint",
				  tools[i].fn == tool_abort));
	return send_result(id, json_pack("{s:o}", "tools", arr));
}

static int
tools_call(struct mcp *m, json_t *id, const json_t *params)
{
	const char *name = json_get_str(params, "name");
	const json_t *args = json_object_get(params, "arguments");
	struct outcome o = { NULL, NULL, 0, BUF_INIT };
	json_t *empty = NULL;
	size_t i;
	int rc;

	if (!name)
		return send_error(id, RPC_INVALID_PARAMS,
				  "tools/call needs a \"name\" (a string)");
	for (i = 0; i < ARRAY_SIZE(tools); i++)
		if (!strcmp(tools[i].name, name))
			break;
	if (i == ARRAY_SIZE(tools))
		return send_error(id, RPC_INVALID_PARAMS,
				  "unknown tool '%.100s' (tools/list names "
				  "them)",
				  name);
	if (!args || json_is_null(args))
		args = empty = json_object();
	if (mcp_schema_check(args, schema_of(i), "arguments", &o.msg))
		o.proto = RPC_INVALID_PARAMS;
	else
		tools[i].fn(m, args, &o);
	rc = answer_tool(id, &o);
	json_decref(o.data);
	json_decref(empty);
	free(o.text);
	buf_release(&o.msg);
	return rc;
}

/* ---- resources ----------------------------------------------------------- */

static const struct {
	const char *tail, *name, *mime, *description;
} kinds[] = {
	{ "report", "report", "text/markdown",
	  "the run's newest report: what changed, blockers, next steps, "
	  "budget, evidence" },
	{ "diff", "diff", "text/x-diff",
	  "the run's change against the commit it branched from" },
	{ "", "record", "application/json", "the run's record" },
};

static int
templates_list(json_t *id)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; i < ARRAY_SIZE(kinds); i++)
		json_array_append_new(
			arr, json_pack("{s:s++, s:s+, s:s, s:s}", "uriTemplate",
				       "baton://runs/{id}", *kinds[i].tail ? "/" : "",
				       kinds[i].tail, "name", "run-",
				       kinds[i].name, "description",
				       kinds[i].description, "mimeType",
				       kinds[i].mime));
	return send_result(id, json_pack("{s:o}", "resourceTemplates", arr));
}

static int
add_run_resources(const struct run *r, void *arg)
{
	size_t i;

	for (i = 0; i < 2; i++)
		json_array_append_new(
			arg, json_pack("{s:s+++, s:s++, s:s, s:s}", "uri",
				       "baton://runs/", r->id, "/",
				       kinds[i].tail, "name", r->id, " ",
				       kinds[i].name, "description",
				       kinds[i].description, "mimeType",
				       kinds[i].mime));
	return 0;
}

static int
resources_list(struct mcp *m, json_t *id)
{
	struct store_run_filter f = { NULL, MCP_RESOURCE_RUNS, 1 };
	struct err e = ERR_INIT;
	json_t *arr = json_array();

	if (store_run_list(m->c->store, &f, add_run_resources, arr, &e)) {
		json_decref(arr);
		return send_error(id, RPC_INTERNAL, "%s", e.msg);
	}
	return send_result(id, json_pack("{s:o}", "resources", arr));
}

/*
 * baton://runs/ID[/report|/diff]: only that, with ID a run reference
 * (ref_ok); every other URI is refused as invalid params.
 */
static int
resources_read(struct mcp *m, json_t *id, const json_t *params)
{
	const char *uri = json_get_str(params, "uri"), *rest, *slash;
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	struct run r = { 0 };
	char ref[MCP_REF_MAX + 1];
	size_t kind, len;
	int rc;

	if (!uri)
		return send_error(id, RPC_INVALID_PARAMS,
				  "resources/read needs a \"uri\" (a string)");
	if (strncmp(uri, "baton://runs/", 13))
		return send_error(id, RPC_INVALID_PARAMS,
				  "'%.200s' is not a baton resource: the URIs "
				  "are baton://runs/{id}, "
				  "baton://runs/{id}/report and "
				  "baton://runs/{id}/diff",
				  uri);
	rest = uri + 13;
	slash = strchr(rest, '/');
	len = slash ? (size_t)(slash - rest) : strlen(rest);
	kind = 2; /* the record */
	if (slash) {
		for (kind = 0; kind < 2; kind++)
			if (!strcmp(slash + 1, kinds[kind].tail))
				break;
		if (kind == 2)
			goto bad;
	}
	if (len > MCP_REF_MAX)
		goto bad;
	memcpy(ref, rest, len);
	ref[len] = '\0';
	if (!mcp_ref_ok(ref))
		goto bad;
	if (store_run_get(m->c->store, ref, &r, &e)) {
		rc = e.rc == BATON_ENOTFOUND ?
			     send_error(id, RPC_NO_RESOURCE,
					"resource not found: %s", e.msg) :
			     send_error(id, RPC_INTERNAL, "%s", e.msg);
		goto out;
	}
	if (kind == 2) {
		json_t *o = engine_run_json(&r);
		char *s = json_dumps(o, JSON_INDENT(2));

		json_decref(o);
		buf_adds(&out, s);
		free(s);
		rc = 0;
	} else if (kind == 0) {
		rc = run_report(m, &r, &out, &e);
	} else {
		rc = run_diff(m, &r, 0, &out, &e);
	}
	if (rc) {
		rc = send_error(id,
				e.rc == BATON_ENOTFOUND ? RPC_NO_RESOURCE :
							  RPC_INTERNAL,
				"%s", e.msg);
		goto out;
	}
	rc = send_result(id, json_pack("{s:[{s:s, s:s, s:o}]}", "contents",
				       "uri", uri, "mimeType", kinds[kind].mime,
				       "text", json_lossy(out.ptr, out.len)));
out:
	buf_release(&out);
	run_release(&r);
	return rc;
bad:
	return send_error(id, RPC_INVALID_PARAMS,
			  "'%.200s' is not a baton resource: the URIs are "
			  "baton://runs/{id}, baton://runs/{id}/report and "
			  "baton://runs/{id}/diff, with {id} a run id",
			  uri);
}

/* ---- the session --------------------------------------------------------- */

static int
initialize(json_t *id, const json_t *params)
{
	const char *asked = json_get_str(params, "protocolVersion");
	const char *v = versions[0];
	size_t i;

	if (!asked)
		return send_error(id, RPC_INVALID_PARAMS,
				  "initialize needs a \"protocolVersion\"");
	for (i = 0; i < ARRAY_SIZE(versions); i++)
		if (!strcmp(asked, versions[i]))
			v = versions[i];
	return send_result(
		id,
		json_pack("{s:s, s:{s:{s:b}, s:{s:b, s:b}}, s:{s:s, s:s, s:s}, "
			  "s:s}",
			  "protocolVersion", v, "capabilities", "tools",
			  "listChanged", 0, "resources", "subscribe", 0,
			  "listChanged", 0, "serverInfo", "name", "baton",
			  "title", "baton", "version", BATON_VERSION,
			  "instructions",
			  "baton runs AI coding-agent work through durable "
			  "pipelines. add_task queues work for baton serve; "
			  "list_runs and show_run follow it; list_approvals "
			  "and decide answer its questions; pause_run, "
			  "resume_run, abort_run and steer_run control a run. "
			  "baton://runs/{id}/report and /diff are a run's "
			  "report and change."));
}

/* Handles one message; -1 when the answer could not be written. */
static int
handle(struct mcp *m, json_t *msg)
{
	json_t *id = json_object_get(msg, "id"), *params;
	const char *method = json_get_str(msg, "method");

	if (!json_is_object(msg))
		return send_error(NULL, RPC_INVALID_REQUEST,
				  json_is_array(msg) ?
					  "batches are not supported: send "
					  "one message a line" :
					  "a message is a JSON object");
	if (id && !json_is_string(id) && !json_is_integer(id))
		return send_error(NULL, RPC_INVALID_REQUEST,
				  "\"id\" must be a string or an integer");
	if (!method) {
		/* a response to nothing we asked: ignored */
		if (json_object_get(msg, "result") ||
		    json_object_get(msg, "error"))
			return 0;
		return send_error(id, RPC_INVALID_REQUEST,
				  "a request needs a \"method\" (a string)");
	}
	if (strcmp(json_get_str(msg, "jsonrpc") ? json_get_str(msg, "jsonrpc") :
						  "",
		   "2.0"))
		return id ? send_error(id, RPC_INVALID_REQUEST,
				       "\"jsonrpc\" must be \"2.0\"") :
			    0;
	if (!id)
		return 0; /* a notification: initialized, cancelled, ... */
	params = json_object_get(msg, "params");
	if (params && !json_is_object(params))
		return send_error(id, RPC_INVALID_PARAMS,
				  "\"params\" must be an object");
	if (!strcmp(method, "initialize"))
		return initialize(id, params);
	if (!strcmp(method, "ping"))
		return send_result(id, json_object());
	if (!strcmp(method, "tools/list"))
		return tools_list(id);
	if (!strcmp(method, "tools/call"))
		return tools_call(m, id, params);
	if (!strcmp(method, "resources/list"))
		return resources_list(m, id);
	if (!strcmp(method, "resources/templates/list"))
		return templates_list(id);
	if (!strcmp(method, "resources/read"))
		return resources_read(m, id, params);
	return send_error(id, RPC_NO_METHOD, "method not found: '%.100s'",
			  method);
}

/*
 * Reads one line into line; 1 when there is one, 0 at the end. A line
 * longer than MCP_LINE_MAX is read past and *too_long set.
 */
static int
read_line(struct buf *line, int *too_long)
{
	int ch, any = 0;

	buf_reset(line);
	*too_long = 0;
	while ((ch = getchar()) != EOF) {
		any = 1;
		if (ch == '\n')
			return 1;
		if (line->len < MCP_LINE_MAX)
			buf_addch(line, (char)ch);
		else
			*too_long = 1;
	}
	return any;
}

static int
mcp_exec(struct cli *c, int argc, char **argv)
{
	struct mcp m = { c };
	struct buf line = BUF_INIT;
	int too_long, rc = EXIT_OK;
	size_t i;

	(void)argv;
	if (argc != 1)
		return cli_usage(&cmd_mcp);
	/* what a client decides is on record as decided over MCP */
	c->en.actor = "mcp";
	while (read_line(&line, &too_long)) {
		json_error_t je;
		json_t *msg;
		int sent;

		if (line.len && line.ptr[line.len - 1] == '\r')
			line.ptr[--line.len] = '\0';
		if (too_long) {
			sent = send_error(NULL, RPC_PARSE,
					  "message longer than %d bytes",
					  MCP_LINE_MAX);
		} else if (!line.len) {
			continue;
		} else if (!(msg = json_loadb(line.ptr, line.len,
					      JSON_REJECT_DUPLICATES |
						      JSON_DECODE_ANY,
					      &je))) {
			sent = send_error(NULL, RPC_PARSE,
					  "parse error at column %d: %s",
					  je.column, je.text);
		} else {
			sent = handle(&m, msg);
			json_decref(msg);
		}
		if (sent) {
			cli_error("mcp: cannot write to stdout: %s",
				  strerror(errno));
			rc = EXIT_FAIL;
			break;
		}
	}
	buf_release(&line);
	for (i = 0; i < ARRAY_SIZE(schemas); i++) {
		json_decref(schemas[i]);
		schemas[i] = NULL;
	}
	return rc;
}

const struct cmd cmd_mcp = {
	.name = "mcp",
	.usage = "mcp [--store SPEC]",
	.summary = "a Model Context Protocol server on stdin/stdout, for "
		   "coding agents and editors",
	.needs = CLI_NEEDS_STORE,
	.exec = mcp_exec,
};
