/*
 * The REST routes under /api/v1 (docs/api.md lists each with examples;
 * t0024-api checks that the two agree). A handler parses the request,
 * calls the same door the CLI calls (sched_task_add, engine_pause ...)
 * and answers JSON; it holds no lifecycle logic of its own.
 */
#include "util/compat.h"

#include <jansson.h>
#include <openssl/evp.h>

#include "core/config.h"
#include "core/gate.h"
#include "core/pipeline.h"
#include "core/plugin.h"
#include "core/run.h"
#include "engine/engine.h"
#include "sched/sched.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/version.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#define LIST_DEFAULT 100
#define LIST_MAX     1000
#define EVENTS_DEFAULT 500
#define EVENTS_MAX     5000

#undef LOG_MODULE
#define LOG_MODULE "api"

/* ---- small helpers ------------------------------------------------------- */

/*
 * Query parameter name as an integer in [min, max], def when absent.
 * Sends 400 and returns -1 when it is not one.
 */
static int
query_int(struct req *rq, const char *name, int64_t def, int64_t min,
	  int64_t max, int64_t *out)
{
	char v[32], *end = NULL;
	long long n;

	*out = def;
	if (!http_query(rq, name, v, sizeof(v)))
		return 0;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (!*v || *end || errno || n < min || n > max) {
		http_error(rq, 400, "bad_request",
			   "%s must be a number from %lld to %lld, not '%s'",
			   name, (long long)min, (long long)max, v);
		return -1;
	}
	*out = n;
	return 0;
}

/*
 * A body key not in keys (NULL-terminated) is a mistake of the client's
 * (a misspelling, or the record's own name for a field): dropping it in
 * silence would lose what it meant, a dependency say. Sends 400 naming
 * it and the keys the route takes, and returns -1. Not for a WebSocket
 * command (http_call, no connection): its protocol's messages carry
 * keys of their own (OpenViber's "messages", say), which it ignores.
 */
static int
known_keys(struct req *rq, json_t *body, const char *const *keys)
{
	struct buf list = BUF_INIT;
	const char *key, *const *k;
	json_t *v;

	if (!rq->conn)
		return 0;
	json_object_foreach(body, key, v) {
		for (k = keys; *k && strcmp(*k, key); k++)
			;
		if (*k)
			continue;
		for (k = keys; *k; k++)
			buf_addf(&list, "%s%s", k == keys ? "" : ", ", *k);
		http_error(rq, 400, "bad_request",
			   "the body has a key \"%s\" that this route does "
			   "not take (it takes: %s)",
			   key, list.ptr);
		buf_release(&list);
		return -1;
	}
	return 0;
}

static struct sched_ctx
ctx_of(struct req *rq)
{
	struct sched_ctx x = { .store = rq->store, .ws = rq->srv->ws,
			       .cfg = rq->srv->cfg, .holder = "http",
			       .store_spec = rq->srv->store_spec };

	return x;
}

static void
engine_of(struct req *rq, struct engine *en)
{
	engine_init(en, rq->store, rq->srv->ws, rq->srv->cfg);
	en->actor = rq->actor[0] ? rq->actor : NULL;
}

/* The task named by params[0]; sends 404 and returns -1 when none. */
static int
load_task(struct req *rq, struct task *t)
{
	struct err e = ERR_INIT;
	int64_t id = sched_task_ref(rq->params[0]);

	if (!id) {
		http_error(rq, 404, "not_found",
			   "'%s' is not a task id (t7 or 7)", rq->params[0]);
		return -1;
	}
	if (store_task_get(rq->store, id, t, &e)) {
		if (e.rc == BATON_ENOTFOUND)
			http_error(rq, 404, "not_found", "no task t%lld",
				   (long long)id);
		else
			http_fail(rq, &e);
		return -1;
	}
	return 0;
}

static int
load_run(struct req *rq, struct run *r)
{
	struct err e = ERR_INIT;

	if (store_run_get(rq->store, rq->params[0], r, &e)) {
		if (e.rc == BATON_ENOTFOUND)
			http_error(rq, 404, "not_found", "no run '%s'",
				   rq->params[0]);
		else
			http_fail(rq, &e);
		return -1;
	}
	return 0;
}

/* Collects events as JSON objects up to a limit. */
struct event_page {
	json_t *arr;
	int64_t limit, last;
	const char *type; /* NULL: any */
};

static int
add_event(const struct event *ev, void *arg)
{
	struct event_page *pg = arg;
	char *line;

	if (pg->type && strcmp(ev->type, pg->type))
		return 0;
	line = engine_event_line(ev);
	json_array_append_new(pg->arr, json_loads(line, 0, NULL));
	free(line);
	pg->last = ev->seq;
	return (int64_t)json_array_size(pg->arr) >= pg->limit;
}

static void
send_events(struct req *rq, struct event_page *pg, int rc,
	    const struct err *e)
{
	if (rc) {
		json_decref(pg->arr);
		http_fail(rq, e);
		return;
	}
	http_json(rq, 200,
		  json_pack("{s:o, s:o}", "events", pg->arr, "next",
			    (int64_t)json_array_size(pg->arr) >= pg->limit ?
				    json_integer(pg->last) :
				    json_null()));
}

/* ---- index and health ---------------------------------------------------- */

static void
api_index(struct req *rq)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; i < api_nr_routes; i++)
		json_array_append_new(
			arr, json_pack("{s:s, s:s, s:s, s:s}", "method",
				       api_routes[i].method, "path",
				       api_routes[i].pattern, "summary",
				       api_routes[i].summary, "role",
				       api_role_name(api_routes[i].role)));
	http_json(rq, 200, json_pack("{s:o}", "routes", arr));
}

static void
api_health(struct req *rq)
{
	struct err e = ERR_INIT;
	int schema = store_schema_version(rq->store, &e);

	if (schema < 0) {
		http_fail(rq, &e);
		return;
	}
	http_json(rq, 200,
		  json_pack("{s:s, s:s, s:s, s:i, s:I, s:I}", "status", "ok",
			    "version", BATON_VERSION, "store",
			    store_backend(rq->store), "schema", schema,
			    "last_seq", (json_int_t)hub_last_seq(rq->srv->hub),
			    "uptime_seconds",
			    (json_int_t)((time_now_ms() - rq->srv->started_ms) /
					 1000)));
}

/* ---- tasks --------------------------------------------------------------- */

struct task_page {
	struct store *s;
	json_t *arr;
	int64_t last;
};

static int
add_task(const struct task *t, void *arg)
{
	struct task_page *pg = arg;

	json_array_append_new(pg->arr, sched_task_json(pg->s, t, 0));
	pg->last = t->id;
	return 0;
}

static void
tasks_list(struct req *rq)
{
	int64_t counts[NR_TASK_STATUSES], limit, before;
	struct store_task_filter f = { .newest_first = 1 };
	struct task_page pg = { rq->store, NULL, 0 };
	struct err e = ERR_INIT;
	char status[32];
	json_t *c;
	size_t i;

	if (query_int(rq, "limit", LIST_DEFAULT, 1, LIST_MAX, &limit) ||
	    query_int(rq, "before", 0, 0, INT64_MAX, &before))
		return;
	if (http_query(rq, "status", status, sizeof(status))) {
		if (task_status_check(status, &e)) {
			http_fail(rq, &e);
			return;
		}
		f.status = status;
	}
	f.limit = (int)limit;
	f.before_id = before;
	if (store_task_counts(rq->store, task_statuses, counts,
			      NR_TASK_STATUSES, &e)) {
		http_fail(rq, &e);
		return;
	}
	pg.arr = json_array();
	if (store_task_list(rq->store, &f, add_task, &pg, &e)) {
		json_decref(pg.arr);
		http_fail(rq, &e);
		return;
	}
	c = json_object();
	for (i = 0; i < NR_TASK_STATUSES; i++)
		json_object_set_new(c, task_statuses[i],
				    json_integer(counts[i]));
	http_json(rq, 200,
		  json_pack("{s:o, s:o, s:o}", "tasks", pg.arr, "counts", c,
			    "next",
			    (int64_t)json_array_size(pg.arr) == limit ?
				    json_integer(pg.last) :
				    json_null()));
}

/* A JSON list of strings as the JSON text a task keeps, or NULL. */
static int
string_list(struct req *rq, json_t *body, const char *key, char **out)
{
	json_t *v = json_object_get(body, key), *it;
	size_t i;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		goto bad;
	json_array_foreach(v, i, it)
		if (!json_is_string(it) || !*json_string_value(it))
			goto bad;
	if (json_array_size(v))
		*out = json_dumps(v, JSON_COMPACT);
	return 0;
bad:
	http_error(rq, 400, "bad_request",
		   "'%s' must be a list of non-empty strings", key);
	return -1;
}

/* Optional string field; sends 400 when it is there but not a string. */
static int
opt_string(struct req *rq, json_t *body, const char *key, char **out)
{
	json_t *v = json_object_get(body, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v)) {
		http_error(rq, 400, "bad_request", "'%s' must be a string",
			   key);
		return -1;
	}
	*out = xstrdup(json_string_value(v));
	return 0;
}

static int
opt_int(struct req *rq, json_t *body, const char *key, int min, int max,
	int *out)
{
	json_t *v = json_object_get(body, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max) {
		http_error(rq, 400, "bad_request",
			   "'%s' must be an integer from %d to %d", key, min,
			   max);
		return -1;
	}
	*out = (int)json_integer_value(v);
	return 0;
}

/* "after": ids (7 or "t7") the task waits for. */
static int
read_deps(struct req *rq, json_t *body, struct task *t)
{
	json_t *v = json_object_get(body, "after"), *it;
	size_t i;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		goto bad;
	t->deps = xcalloc(json_array_size(v) + 1, sizeof(*t->deps));
	json_array_foreach(v, i, it) {
		int64_t id = json_is_integer(it) ? json_integer_value(it) :
			     json_is_string(it) ?
						 sched_task_ref(json_string_value(it)) :
						 0;

		if (id <= 0)
			goto bad;
		t->deps[t->nr_deps++] = id;
	}
	return 0;
bad:
	http_error(rq, 400, "bad_request",
		   "'after' must be a list of task ids (7 or \"t7\")");
	return -1;
}

/* The longest idempotency key taken. */
#define IDEM_KEY_MAX 255

/*
 * The idempotency key of a submission (docs/api.md, "Idempotency"): the
 * Idempotency-Key header or the body's "idempotency_key", into *key
 * (NULL: none). Sends 400 and returns -1 when it is malformed or the two
 * disagree.
 */
static int
idem_key(struct req *rq, json_t *body, const char **key)
{
	const char *h = http_header(rq, "Idempotency-Key");
	json_t *v = json_object_get(body, "idempotency_key");
	const char *k;

	*key = NULL;
	if (v && !json_is_null(v) && !json_is_string(v)) {
		http_error(rq, 400, "bad_request",
			   "'idempotency_key' must be a string");
		return -1;
	}
	k = v && json_is_string(v) ? json_string_value(v) : h;
	if (h && k != h && strcmp(h, k)) {
		http_error(rq, 400, "bad_request",
			   "the Idempotency-Key header and the body's "
			   "\"idempotency_key\" differ");
		return -1;
	}
	if (!k)
		return 0;
	if (!*k || strlen(k) > IDEM_KEY_MAX)
		goto bad;
	for (const char *c = k; *c; c++)
		if (*c < 0x21 || *c > 0x7e)
			goto bad;
	*key = k;
	return 0;
bad:
	http_error(rq, 400, "bad_request",
		   "an idempotency key is 1 to %d printable ASCII characters "
		   "without spaces",
		   IDEM_KEY_MAX);
	return -1;
}

/*
 * The SHA-256 (hex) of a submission: its JSON with sorted keys, the
 * idempotency key left out, so a retry hashes the same however its
 * client ordered the keys.
 */
static int
idem_sha(json_t *body, char out[65])
{
	json_t *c = json_copy(body);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;
	char *text;
	int ok;

	json_object_del(c, "idempotency_key");
	text = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(c);
	ok = text && EVP_Digest(text, strlen(text), md, &n, EVP_sha256(),
				NULL);
	free(text);
	if (!ok || n != 32)
		return -1;
	for (i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/*
 * The answer to a submission whose idempotency key k was claimed before
 * (store_task_add_keyed): 422 for another payload, else 409 with the
 * first submission's task.
 */
static void
idem_answer(struct req *rq, const struct store_key *k)
{
	struct err e = ERR_INIT;
	struct task t = { 0 };

	if (strcmp(k->sha_was, k->sha)) {
		http_error_with(rq, 422, "idempotency_mismatch",
				"the idempotency key was used before for "
				"another submission; a new task needs a new "
				"key",
				json_pack("{s:s, s:o}", "idempotency_key",
					  k->key, "task_id",
					  k->task_id ? json_integer(k->task_id)
						     : json_null()));
		return;
	}
	if (k->task_id && store_task_get(rq->store, k->task_id, &t, &e) == 0) {
		http_error_with(rq, 409, "already_running",
				"this idempotency key was submitted before: "
				"the task is the first submission's",
				json_pack("{s:s, s:o}", "idempotency_key",
					  k->key, "task",
					  sched_task_json(rq->store, &t, 0)));
		task_release(&t);
		return;
	}
	/* a claim made by a baton from before the key and its task were
	   one commit, cut short in between */
	http_error_with(rq, 409, "already_running",
			"this idempotency key was submitted before, and its "
			"submission was cut short before its task was made",
			json_pack("{s:s, s:n}", "idempotency_key", k->key,
				  "task"));
}

/*
 * What POST /api/v1/tasks takes; "messages" is an OpenViber submission's
 * (task:submit's payload, which a client may post here as it is: its
 * idempotency key then matches), taken and ignored.
 */
static const char *const task_keys[] = {
	"title", "body", "area", "pipeline", "priority", "max_attempts",
	"allow", "verify", "after", "read_only", "idempotency_key",
	"messages", NULL
};

static void
tasks_create(struct req *rq)
{
	struct sched_ctx x = ctx_of(rq);
	struct task t = { 0 };
	struct err e = ERR_INIT;
	json_t *body = NULL, *ro;
	const char *key = NULL;
	char sha[65];
	struct store_key k = { .sha = sha };
	int rc;

	if (http_body_json(rq, (void **)&body))
		return;
	if (known_keys(rq, body, task_keys) || idem_key(rq, body, &key) ||
	    opt_string(rq, body, "title", &t.title) ||
	    opt_string(rq, body, "body", &t.body) ||
	    opt_string(rq, body, "area", &t.area) ||
	    opt_string(rq, body, "pipeline", &t.pipeline) ||
	    opt_int(rq, body, "priority", -1000, 1000, &t.priority) ||
	    opt_int(rq, body, "max_attempts", 1, 100, &t.max_attempts) ||
	    string_list(rq, body, "allow", &t.allowed_paths) ||
	    string_list(rq, body, "verify", &t.verify) ||
	    read_deps(rq, body, &t))
		goto out;
	if (!t.title || !*t.title) {
		http_error(rq, 400, "bad_request",
			   "a task needs a \"title\" (a non-empty string)");
		goto out;
	}
	ro = json_object_get(body, "read_only");
	if (ro && !json_is_boolean(ro)) {
		http_error(rq, 400, "bad_request",
			   "'read_only' must be true or false");
		goto out;
	}
	/* a read-only task is one whose pipeline is read-only: plan-only
	   unless it names another (the run's pipeline says it for good) */
	if (json_is_true(ro) && !t.pipeline)
		t.pipeline = xstrdup("plan-only");
	if (t.pipeline) {
		struct engine en;
		struct pipeline *p = NULL;

		engine_of(rq, &en);
		if (engine_pipeline(&en, t.pipeline, &p, &e)) {
			engine_release(&en);
			http_error(rq, 400, "bad_request", "%s", e.msg);
			goto out;
		}
		if (json_is_true(ro) && !p->read_only) {
			http_error(rq, 400, "bad_request",
				   "a read-only task needs a read-only "
				   "pipeline, and '%s' may edit the worktree",
				   p->name);
			pipeline_free(p);
			engine_release(&en);
			goto out;
		}
		pipeline_free(p);
		engine_release(&en);
	}
	if (key && idem_sha(body, sha)) {
		http_error(rq, 500, "internal",
			   "cannot hash the submission for its idempotency "
			   "key");
		goto out;
	}
	k.key = key;
	rc = sched_task_add_keyed(&x, &t, rq->actor[0] ? rq->actor : NULL,
				  key ? &k : NULL, &e);
	if (rc == 0) {
		idem_answer(rq, &k);
		goto out;
	}
	if (rc < 0) {
		if (e.rc == BATON_ENOTFOUND)
			e.rc = BATON_EINVAL; /* a dependency named in the body */
		http_fail(rq, &e);
		goto out;
	}
	http_json(rq, 201, sched_task_json(rq->store, &t, 0));
out:
	json_decref(body);
	task_release(&t);
}

static void
task_show(struct req *rq)
{
	struct task t = { 0 };

	if (load_task(rq, &t))
		return;
	http_json(rq, 200, sched_task_json(rq->store, &t, 1));
	task_release(&t);
}

/* cancel and retry: the same door as `baton task cancel | retry`. */
static void
task_act(struct req *rq, int cancel)
{
	struct sched_ctx x = ctx_of(rq);
	struct task t = { 0 }, after = { 0 };
	struct err e = ERR_INIT;
	struct engine en;
	int rc;

	if (load_task(rq, &t))
		return;
	engine_of(rq, &en);
	rc = cancel ? sched_task_cancel(&x, &en, t.id, &after, &e) :
		      sched_task_retry(&x, t.id, en.actor, &after, &e);
	engine_release(&en);
	if (rc)
		http_fail(rq, &e);
	else
		http_json(rq, 200, sched_task_json(rq->store, &after, 0));
	task_release(&after);
	task_release(&t);
}

static void
task_cancel(struct req *rq)
{
	task_act(rq, 1);
}

static void
task_retry(struct req *rq)
{
	task_act(rq, 0);
}

static void
task_events(struct req *rq)
{
	struct event_page pg = { NULL, 0, 0, NULL };
	struct err e = ERR_INIT;
	struct task t = { 0 };
	int64_t after;
	int rc;

	if (load_task(rq, &t))
		return;
	if (query_int(rq, "after", 0, 0, INT64_MAX, &after) ||
	    query_int(rq, "limit", EVENTS_DEFAULT, 1, EVENTS_MAX, &pg.limit))
		goto out;
	pg.arr = json_array();
	rc = store_task_events(rq->store, t.id, after, add_event, &pg, &e);
	send_events(rq, &pg, rc, &e);
out:
	task_release(&t);
}

/* ---- runs ---------------------------------------------------------------- */

static int
add_run(const struct run *r, void *arg)
{
	json_array_append_new(arg, engine_run_json(r));
	return 0;
}

static void
runs_list(struct req *rq)
{
	struct store_run_filter f = { NULL, 0, 0 };
	struct err e = ERR_INIT;
	char status[64];
	int64_t limit;
	json_t *arr;

	if (query_int(rq, "limit", LIST_DEFAULT, 1, LIST_MAX, &limit))
		return;
	if (http_query(rq, "status", status, sizeof(status))) {
		struct engine en;
		int rc;

		engine_of(rq, &en);
		rc = engine_check_status(&en, status, &e);
		engine_release(&en);
		if (rc) {
			http_fail(rq, &e);
			return;
		}
		f.status = status;
	}
	f.limit = (int)limit;
	arr = json_array();
	if (store_run_list(rq->store, &f, add_run, arr, &e)) {
		json_decref(arr);
		http_fail(rq, &e);
		return;
	}
	http_json(rq, 200, json_pack("{s:o}", "runs", arr));
}

static void
run_show(struct req *rq)
{
	struct run r = { 0 };

	if (load_run(rq, &r))
		return;
	http_json(rq, 200, engine_run_json(&r));
	run_release(&r);
}

static void
run_events_typed(struct req *rq, const char *type, const char *key)
{
	struct event_page pg = { NULL, 0, 0, type };
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int64_t after;
	int rc;

	if (load_run(rq, &r))
		return;
	if (query_int(rq, "after", 0, 0, INT64_MAX, &after) ||
	    query_int(rq, "limit", EVENTS_DEFAULT, 1, EVENTS_MAX, &pg.limit))
		goto out;
	pg.arr = json_array();
	rc = store_event_list(rq->store, r.id, after, type, add_event, &pg,
			      &e);
	if (!key || rc) {
		send_events(rq, &pg, rc, &e);
	} else {
		/* reports: their data, oldest first */
		json_t *list = json_array(), *ev;
		size_t i;

		for (i = 0; i < json_array_size(pg.arr); i++) {
			ev = json_array_get(pg.arr, i);
			json_array_append(list, json_object_get(ev, "data"));
		}
		json_decref(pg.arr);
		http_json(rq, 200, json_pack("{s:o}", key, list));
	}
out:
	run_release(&r);
}

static void
run_events(struct req *rq)
{
	run_events_typed(rq, NULL, NULL);
}

static void
run_reports(struct req *rq)
{
	run_events_typed(rq, "report", "reports");
}

struct artifacts {
	json_t *arr;
	const char *name; /* one artifact: the newest or this version */
	int64_t version;
	struct store_output found;
	int have;
};

static int
add_artifact(const struct store_output *o, void *arg)
{
	struct artifacts *a = arg;

	if (a->name) {
		if (strcmp(o->artifact, a->name) ||
		    (a->version && o->version != a->version) ||
		    (a->have && o->version < a->found.version))
			return 0;
		store_output_release(&a->found);
		a->found.content = xstrdup(o->content ? o->content : "");
		a->found.version = o->version;
		a->have = 1;
		return 0;
	}
	json_array_append_new(
		a->arr,
		json_pack("{s:s, s:s, s:i, s:o, s:I, s:I}", "stage", o->stage,
			  "artifact", o->artifact, "version", o->version,
			  "decision",
			  o->decision ? json_string(o->decision) : json_null(),
			  "created_at", (json_int_t)o->created_at, "size",
			  (json_int_t)(o->content ? strlen(o->content) : 0)));
	return 0;
}

static void
run_artifacts(struct req *rq)
{
	struct artifacts a = { json_array(), NULL, 0, { 0 }, 0 };
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (load_run(rq, &r)) {
		json_decref(a.arr);
		return;
	}
	if (store_output_list(rq->store, r.id, add_artifact, &a, &e)) {
		json_decref(a.arr);
		http_fail(rq, &e);
	} else {
		http_json(rq, 200, json_pack("{s:o}", "artifacts", a.arr));
	}
	run_release(&r);
}

static void
run_artifact(struct req *rq)
{
	struct artifacts a = { NULL, rq->params[1], 0, { 0 }, 0 };
	struct err e = ERR_INIT;
	struct run r = { 0 };
	const char *dot;

	if (query_int(rq, "version", 0, 1, INT32_MAX, &a.version) ||
	    load_run(rq, &r))
		return;
	if (store_output_list(rq->store, r.id, add_artifact, &a, &e)) {
		http_fail(rq, &e);
	} else if (!a.have) {
		http_error(rq, 404, "not_found",
			   "run '%s' has no artifact '%s'%s", r.id, a.name,
			   a.version ? " of that version" : "");
	} else {
		dot = strrchr(a.name, '.');
		http_text(rq, 200,
			  dot && !strcmp(dot, ".json") ?
				  "application/json" :
				  "text/plain; charset=utf-8",
			  a.found.content, strlen(a.found.content));
	}
	store_output_release(&a.found);
	run_release(&r);
}

static int
add_file(const struct store_file *f, void *arg)
{
	json_array_append_new(arg, engine_file_json(f, 0));
	return 0;
}

/* The run folder's files the store keeps (any host's runs), by name. */
static void
run_files(struct req *rq)
{
	json_t *arr = json_array();
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (load_run(rq, &r)) {
		json_decref(arr);
		return;
	}
	if (store_file_list(rq->store, r.id, add_file, arr, &e)) {
		json_decref(arr);
		http_fail(rq, &e);
	} else {
		http_json(rq, 200, json_pack("{s:o}", "files", arr));
	}
	run_release(&r);
}

/*
 * One run file, ?name=calls/0007-execute-x-0.stdout: its content as the
 * store keeps it, with truncated, size, sha256, host and path saying
 * where the whole file is when the store has only its first part.
 */
static void
run_file(struct req *rq)
{
	struct store_file f = { 0 };
	struct err e = ERR_INIT;
	struct run r = { 0 };
	char name[1024];

	if (!http_query(rq, "name", name, sizeof(name)) || !name[0]) {
		http_error(rq, 400, "bad_request",
			   "name is required: ?name=PATH in the run folder");
		return;
	}
	if (load_run(rq, &r))
		return;
	if (store_file_get(rq->store, r.id, name, &f, &e))
		http_fail(rq, &e);
	else
		http_json(rq, 200, engine_file_json(&f, 1));
	store_file_release(&f);
	run_release(&r);
}

/*
 * The run's changes: from its worktree while it has one, else from its
 * branch (a merged or cleaned run).
 */
static void
run_diff(struct req *rq)
{
	struct err e = ERR_INIT;
	struct buf out = BUF_INIT;
	struct run r = { 0 };
	int rc = BATON_ENOTFOUND;

	if (load_run(rq, &r))
		return;
	if (!r.base_commit) {
		http_text(rq, 200, "text/plain; charset=utf-8", "", 0);
		goto out;
	}
	if (r.worktree && fs_is_dir(r.worktree))
		rc = worktree_diff(rq->srv->ws, r.worktree, r.base_commit, 0,
				   &out, &e);
	if (rc && r.branch) {
		buf_reset(&out);
		e = (struct err)ERR_INIT;
		rc = worktree_range_diff(rq->srv->ws, r.base_commit, r.branch,
					 &out, &e);
	}
	if (rc)
		http_fail(rq, &e);
	else
		http_text(rq, 200, "text/plain; charset=utf-8",
			  out.ptr ? out.ptr : "", out.len);
out:
	buf_release(&out);
	run_release(&r);
}

enum run_act { ACT_PAUSE, ACT_ABORT };

static void
run_act(struct req *rq, enum run_act act)
{
	struct engine en;
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int rc;

	engine_of(rq, &en);
	if (act == ACT_PAUSE)
		rc = engine_pause(&en, rq->params[0], &r, &e);
	else
		rc = engine_abort(&en, rq->params[0], &r, &e);
	engine_release(&en);
	if (rc) {
		http_fail(rq, &e);
		return;
	}
	http_json(rq, 200, engine_run_json(&r));
	run_release(&r);
}

static void
run_pause(struct req *rq)
{
	run_act(rq, ACT_PAUSE);
}

static void
run_abort(struct req *rq)
{
	run_act(rq, ACT_ABORT);
}

/* The answers to a drift a resume's "config" may give. */
static const struct {
	const char *name;
	enum drift_choice choice;
} drift_choices[] = {
	{ "snapshot", DRIFT_SNAPSHOT },
	{ "current", DRIFT_CURRENT },
	{ "fresh", DRIFT_FRESH },
};

/* 409 config_drift: what changed, and the three answers. */
static void
drift_undecided(struct req *rq, const struct drift_outcome *o)
{
	struct buf msg = BUF_INIT;
	json_t *changes = json_array();
	size_t i;

	buf_addf(&msg, "config changed since %s started: ", o->run.id);
	for (i = 0; i < o->changes.nr; i++) {
		buf_addf(&msg, "%s%s", i ? "; " : "", o->changes.v[i]);
		json_array_append_new(changes, json_lossy_str(o->changes.v[i]));
	}
	buf_adds(&msg, "; resume with {\"config\": \"snapshot\"} (the "
		       "config it started with), \"current\" or \"fresh\"");
	http_error_with(rq, 409, "config_drift", msg.ptr,
			json_pack("{s:o}", "changes", changes));
	buf_release(&msg);
}

/*
 * The same doors as `baton resume`: the drift settled first
 * (engine_settle_drift, with the body's "config" as the answer), then
 * engine_resume. A run started afresh is answered with the new run; a
 * task's is queued for a worker (sched_task_rerun), a bare one waits for
 * `baton resume` in a terminal, as a bare run resumed here does.
 */
/*
 * {"from": STAGE}: a rewind (engine_rewind), answered with the run that
 * goes on (201 and "rewound_from" for a new run of a terminal one).
 */
static void
run_rewind(struct req *rq, const char *from)
{
	struct rewind_outcome o;
	struct engine en;
	struct err e = ERR_INIT;
	json_t *ans;
	int rc, queued = 0;

	engine_of(rq, &en);
	rc = engine_rewind(&en, rq->params[0], from, &o, &e);
	engine_release(&en);
	if (rc) {
		http_fail(rq, &e);
		return;
	}
	/* a new run of a task's run is its task's, queued for a worker
	 * (unless the task is done: then it waits for `baton resume`) */
	if (o.anew && o.run.task_id) {
		struct sched_ctx x = ctx_of(rq);
		struct sched_rerun rr = { &x, 1 };

		rc = sched_task_rewound(&rr, o.from, &o.run, &e);
		if (rc < 0) {
			http_fail(rq, &e);
			rewind_outcome_release(&o);
			return;
		}
		queued = rc == 0;
	}
	ans = engine_run_json(&o.run);
	json_object_set_new(ans, "rewound_to", json_string(o.stage));
	json_object_set_new(ans, "checkpoint", json_string(o.checkpoint));
	if (o.anew)
		json_object_set_new(ans, "rewound_from", json_string(o.from));
	/* a bare run nobody drives waits for `baton resume` in a terminal */
	json_object_set_new(ans, "driven", json_boolean(!o.drive || queued));
	sched_wake(rq->srv->ws);
	http_json(rq, o.anew ? 201 : 200, ans);
	rewind_outcome_release(&o);
}

static void
run_resume(struct req *rq)
{
	struct sched_ctx x = ctx_of(rq);
	struct sched_rerun rerun = { &x, 1 };
	enum drift_choice choice = DRIFT_ASK;
	struct drift_outcome o = { 0 };
	struct engine en;
	struct err e = ERR_INIT;
	struct run r = { 0 };
	json_t *body = NULL, *ans;
	char *config = NULL, *from = NULL;
	int drive = 0, rc;
	size_t i;

	strvec_init(&o.changes);
	if (http_body_json_opt(rq, (void **)&body) ||
	    opt_string(rq, body, "config", &config) ||
	    opt_string(rq, body, "from", &from))
		goto out;
	if (from && config) {
		http_error(rq, 400, "bad_request",
			   "\"from\" (a rewind) and \"config\" do not go "
			   "together");
		goto out;
	}
	if (from) {
		run_rewind(rq, from);
		goto out;
	}
	for (i = 0; config && i < ARRAY_SIZE(drift_choices); i++)
		if (!strcmp(config, drift_choices[i].name))
			choice = drift_choices[i].choice;
	if (config && choice == DRIFT_ASK) {
		http_error(rq, 400, "bad_request",
			   "\"config\" must be \"snapshot\", \"current\" or "
			   "\"fresh\", not '%s'",
			   config);
		goto out;
	}
	engine_of(rq, &en);
	rc = engine_settle_drift(&en, rq->params[0], choice, sched_task_rerun,
				 &rerun, &o, &e);
	if (!rc && o.result == DRIFT_UNDECIDED) {
		drift_undecided(rq, &o);
	} else if (!rc && o.result == DRIFT_RESTARTED) {
		ans = engine_run_json(&o.fresh);
		json_object_set_new(ans, "fresh_of", json_string(o.run.id));
		json_object_set_new(ans, "driven",
				    json_boolean(o.fresh.task_id != 0));
		sched_wake(rq->srv->ws);
		http_json(rq, 201, ans);
	} else if (!rc) {
		rc = engine_resume(&en, rq->params[0], &drive, &r, &e);
	}
	engine_release(&en);
	if (rc) {
		http_fail(rq, &e);
		goto out;
	}
	if (r.id) {
		ans = engine_run_json(&r);
		/* a task's run is taken up by a worker; a bare run waits
		 * for `baton resume` in a terminal */
		json_object_set_new(ans, "driven",
				    json_boolean(!drive || r.task_id));
		sched_wake(rq->srv->ws);
		http_json(rq, 200, ans);
	}
out:
	drift_outcome_release(&o);
	run_release(&r);
	free(config);
	free(from);
	json_decref(body);
}

static void
run_steer(struct req *rq)
{
	struct engine en;
	struct err e = ERR_INIT;
	json_t *body = NULL;
	char *text = NULL, *mode = NULL;
	int rc, m = STEER_FOLLOWUP;

	static const char *const keys[] = { "text", "mode", NULL };

	if (http_body_json(rq, (void **)&body))
		return;
	if (known_keys(rq, body, keys) ||
	    opt_string(rq, body, "text", &text) ||
	    opt_string(rq, body, "mode", &mode))
		goto out;
	if (!text || !*text) {
		http_error(rq, 400, "bad_request",
			   "steer needs a \"text\" (a non-empty string)");
		goto out;
	}
	if (mode && (m = steer_mode_parse(mode)) < 0) {
		http_error(rq, 400, "bad_request",
			   "\"mode\": '%s' is not an injection mode: steer "
			   "(now), followup (the next stage) or collect (the "
			   "task's next run)",
			   mode);
		goto out;
	}
	engine_of(rq, &en);
	rc = engine_steer_mode(&en, rq->params[0], text, m, &e);
	engine_release(&en);
	if (rc)
		http_fail(rq, &e);
	else
		http_json(rq, 202,
			  json_pack("{s:b, s:s}", "ok", 1, "mode",
				    steer_mode_name(m)));
out:
	free(text);
	free(mode);
	json_decref(body);
}

/* ---- approvals ----------------------------------------------------------- */

static int
add_approval(const struct run *r, void *arg)
{
	char since[40];

	time_fmt_iso(r->phase_started_at ? r->phase_started_at : r->updated_at,
		     since, sizeof(since));
	json_array_append_new(
		arg, json_pack("{s:s, s:o, s:s?, s:s, s:o, s:s}", "run", r->id,
			       "task_id",
			       r->task_id ? json_integer(r->task_id) :
					    json_null(),
			       "gate", r->gate_status, "waiting_since", since,
			       "title", json_lossy_str(r->task), "pipeline",
			       r->pipeline));
	return 0;
}

static void
approvals_list(struct req *rq)
{
	struct store_run_filter f = { ST_WAITING, 0, 0 };
	struct err e = ERR_INIT;
	json_t *arr = json_array();

	if (store_run_list(rq->store, &f, add_approval, arr, &e)) {
		json_decref(arr);
		http_fail(rq, &e);
		return;
	}
	http_json(rq, 200, json_pack("{s:o}", "approvals", arr));
}

static void
approval_decide(struct req *rq)
{
	enum gate_decision d;
	struct engine en;
	struct err e = ERR_INIT;
	struct run r = { 0 };
	json_t *body = NULL;
	char *decision = NULL, *guidance = NULL;
	int rc;

	if (http_body_json(rq, (void **)&body))
		return;
	if (opt_string(rq, body, "decision", &decision) ||
	    opt_string(rq, body, "guidance", &guidance))
		goto out;
	/* the one registry of decisions and their aliases (core/gate.h) */
	if (gate_decision_parse(decision, &d, &e)) {
		http_error(rq, 400, "bad_request", "\"decision\": %s", e.msg);
		goto out;
	}
	engine_of(rq, &en);
	rc = engine_decide(&en, rq->params[0], d, guidance, &r, &e);
	engine_release(&en);
	if (rc) {
		http_fail(rq, &e);
		goto out;
	}
	sched_wake(rq->srv->ws);
	http_json(rq, 200, engine_run_json(&r));
	run_release(&r);
out:
	free(decision);
	free(guidance);
	json_decref(body);
}

/* ---- pipelines, workers, merges ------------------------------------------ */

static json_t *
pipeline_json(const struct pipeline *p, int full)
{
	json_t *stages = json_array(), *o;
	size_t i;

	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];

		json_array_append_new(
			stages,
			json_pack("{s:s, s:s, s:s, s:s?, s:s?}", "name",
				  s->name, "kind", stage_kind_label(s),
				  "status", s->status, "done", s->done, "role",
				  s->role));
	}
	o = json_pack("{s:s, s:o, s:b, s:s?, s:s, s:o}", "name", p->name,
		      "description",
		      p->description ? json_string(p->description) :
				       json_null(),
		      "builtin", p->builtin, "plugin", p->plugin, "terminal",
		      p->terminal, "stages", stages);
	if (full) {
		json_t *edges = json_array();

		for (i = 0; i < p->nr_edges; i++)
			json_array_append_new(
				edges,
				json_pack("{s:s, s:s, s:s}", "from",
					  p->edges[i].from, "to",
					  p->edges[i].to, "why",
					  edge_why_name(p->edges[i].why)));
		json_object_set_new(o, "transitions", edges);
	}
	return o;
}

static void
pipelines_list(struct req *rq)
{
	json_t *arr = json_array();
	struct strvec names = STRVEC_INIT;
	struct err e = ERR_INIT;
	struct engine en;
	size_t i;

	engine_of(rq, &en);
	engine_pipeline_names(&en, &names);
	for (i = 0; i < names.nr; i++) {
		struct pipeline *p = NULL;

		if (engine_pipeline(&en, names.v[i], &p, &e)) {
			json_array_append_new(
				arr, json_pack("{s:s, s:s}", "name", names.v[i],
					       "error", e.msg));
			e = (struct err)ERR_INIT;
			continue;
		}
		json_array_append_new(arr, pipeline_json(p, 0));
		pipeline_free(p);
	}
	engine_release(&en);
	strvec_clear(&names);
	http_json(rq, 200, json_pack("{s:o}", "pipelines", arr));
}

static void
pipeline_show(struct req *rq)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	struct engine en;
	int rc;

	engine_of(rq, &en);
	rc = engine_pipeline(&en, rq->params[0], &p, &e);
	engine_release(&en);
	if (rc) {
		http_fail(rq, &e);
		return;
	}
	http_json(rq, 200, pipeline_json(p, 1));
	pipeline_free(p);
}

/* The plugins in load order, each with its status and what it provides. */
static void
plugins_list(struct req *rq)
{
	json_t *arr = json_array();
	const struct plugin *pl;
	size_t i, n;

	pl = plugins_all(&n);
	for (i = 0; i < n; i++)
		json_array_append_new(arr, plugin_to_json(&pl[i]));
	http_json(rq, 200, json_pack("{s:o}", "plugins", arr));
}

static int
add_worker(const struct worker_rec *w, void *arg)
{
	json_array_append_new(
		arg, json_pack("{s:s, s:s?, s:I, s:o, s:o, s:o, s:o}", "id",
			       w->id, "host", w->host, "pid",
			       (json_int_t)w->pid, "task",
			       w->task_id ? json_integer(w->task_id) :
					    json_null(),
			       "started_at", json_time(w->started_at),
			       "heartbeat_at", json_time(w->heartbeat_at),
			       "stopped_at", json_time(w->stopped_at)));
	return 0;
}

static void
workers_list(struct req *rq)
{
	struct err e = ERR_INIT;
	json_t *arr = json_array();

	if (store_worker_list(rq->store, add_worker, arr, &e)) {
		json_decref(arr);
		http_fail(rq, &e);
		return;
	}
	http_json(rq, 200, json_pack("{s:o}", "workers", arr));
}

static int
add_merge(const struct merge_item *m, void *arg)
{
	json_array_append_new(
		arg,
		json_pack("{s:I, s:s, s:s?, s:s?, s:o, s:s, s:i, s:s?, s:s?, "
			  "s:o, s:o}",
			  "id", (json_int_t)m->id, "run", m->run_id, "branch",
			  m->branch, "base", m->base_ref, "task",
			  m->task_id ? json_integer(m->task_id) : json_null(),
			  "status", m->status, "attempts", m->attempts,
			  "merged_commit", m->merged_commit, "reason",
			  m->reason, "created_at", json_time(m->created_at),
			  "updated_at", json_time(m->updated_at)));
	return 0;
}

static void
merges_list(struct req *rq)
{
	struct err e = ERR_INIT;
	json_t *arr = json_array();

	if (store_merge_list(rq->store, NULL, add_merge, arr, &e)) {
		json_decref(arr);
		http_fail(rq, &e);
		return;
	}
	http_json(rq, 200, json_pack("{s:o}", "merges", arr));
}

/* A plain GET of the WebSocket's path (the dispatcher takes upgrades). */
static void
ws_plain(struct req *rq)
{
	http_error(rq, 400, "bad_request",
		   "/api/v1/ws speaks WebSocket: send an Upgrade request");
}

const struct route api_routes[] = {
	{ "GET", "/api/v1", api_index, "the route table", 0, ROLE_VIEWER },
	{ "GET", "/api/v1/health", api_health, "liveness, version, store",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/tasks", tasks_list, "tasks, newest first",
	  0, ROLE_VIEWER },
	{ "POST", "/api/v1/tasks", tasks_create, "add a task",
	  0, ROLE_OPERATOR },
	{ "GET", "/api/v1/tasks/{id}", task_show, "one task", 0, ROLE_VIEWER },
	{ "POST", "/api/v1/tasks/{id}/cancel", task_cancel, "cancel a task",
	  0, ROLE_OPERATOR },
	{ "POST", "/api/v1/tasks/{id}/retry", task_retry, "queue it again",
	  0, ROLE_OPERATOR },
	{ "GET", "/api/v1/tasks/{id}/events", task_events, "a task's events",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/runs", runs_list, "runs, newest first",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/runs/{id}", run_show, "one run", 0, ROLE_VIEWER },
	{ "GET", "/api/v1/runs/{id}/events", run_events, "a run's events",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/runs/{id}/artifacts", run_artifacts,
	  "a run's artifacts", 0, ROLE_VIEWER },
	{ "GET", "/api/v1/runs/{id}/artifacts/{name}", run_artifact,
	  "one artifact's text", 0, ROLE_VIEWER },
	{ "GET", "/api/v1/runs/{id}/files", run_files,
	  "the run folder's files the store keeps", 0, ROLE_VIEWER },
	{ "GET", "/api/v1/runs/{id}/file", run_file,
	  "one run file (?name=), maybe truncated", 0, ROLE_VIEWER },
	{ "GET", "/api/v1/runs/{id}/diff", run_diff, "a run's changes",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/runs/{id}/reports", run_reports,
	  "a run's periodic reports", 0, ROLE_VIEWER },
	{ "POST", "/api/v1/runs/{id}/pause", run_pause, "pause a run",
	  0, ROLE_OPERATOR },
	{ "POST", "/api/v1/runs/{id}/resume", run_resume, "resume a run",
	  0, ROLE_OPERATOR },
	{ "POST", "/api/v1/runs/{id}/abort", run_abort, "abort a run",
	  0, ROLE_OPERATOR },
	{ "POST", "/api/v1/runs/{id}/steer", run_steer, "steer a run",
	  0, ROLE_OPERATOR },
	{ "GET", "/api/v1/approvals", approvals_list, "runs at a gate",
	  0, ROLE_VIEWER },
	{ "POST", "/api/v1/approvals/{id}", approval_decide, "decide a gate",
	  0, ROLE_OPERATOR },
	{ "GET", "/api/v1/pipelines", pipelines_list, "the pipelines",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/pipelines/{name}", pipeline_show, "one pipeline",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/plugins", plugins_list,
	  "the plugins, with status and what they provide", 0, ROLE_VIEWER },
	{ "GET", "/api/v1/workers", workers_list, "the workers",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/merges", merges_list, "the merge queue",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/stats", api_stats,
	  "queue depth, throughput, cost per day (the charts)",
	  0, ROLE_VIEWER },
	{ "GET", "/api/v1/events", stream_sse, "the live stream (SSE)",
	  ROUTE_F_QUERY_TOKEN, ROLE_VIEWER },
	{ "GET", "/api/v1/ws", ws_plain, "the live stream (WebSocket)",
	  ROUTE_F_QUERY_TOKEN, ROLE_VIEWER },
	/* a turn calls the planner's agent: it spends, as a task would */
	{ "POST", "/api/v1/chat/conversations", chat_api_create,
	  "start a conversation with the planner", 0, ROLE_OPERATOR },
	{ "GET", "/api/v1/chat/conversations/{id}", chat_api_show,
	  "a conversation: phase and messages", 0, ROLE_VIEWER },
	{ "POST", "/api/v1/chat/conversations/{id}/messages", chat_api_message,
	  "say something; the reply streams", 0, ROLE_OPERATOR },
	{ "GET", "/api/v1/chat/conversations/{id}/stream", chat_api_stream,
	  "the reply being written (SSE)", ROUTE_F_QUERY_TOKEN, ROLE_VIEWER },
	{ "POST", "/api/v1/chat/conversations/{id}/start-execution",
	  chat_api_start, "queue the proposed plan's tasks in a mode", 0,
	  ROLE_OPERATOR },
	{ "GET", "/api/v1/answers/{token}", answer_page,
	  "an answer link's confirmation page (signed, no token)",
	  ROUTE_F_LINK, ROLE_PUBLIC },
	{ "POST", "/api/v1/answers/{token}", answer_post,
	  "decide through an answer link, once", ROUTE_F_LINK, ROLE_PUBLIC },
	{ "POST", "/api/v1/forge/webhook", forge_webhook,
	  "GitHub's webhooks (signed, no token)", ROUTE_F_SIGNED, ROLE_PUBLIC },
	{ "GET", "/api/v1/tokens", tokens_list,
	  "the named API tokens (no secrets)", 0, ROLE_ADMIN },
	{ "POST", "/api/v1/tokens", tokens_create,
	  "add a named token (its secret shown once)", 0, ROLE_ADMIN },
	{ "POST", "/api/v1/tokens/{name}/revoke", token_revoke,
	  "revoke a named token", 0, ROLE_ADMIN },
	{ "GET", "/metrics", metrics_page, "Prometheus metrics",
	  0, ROLE_VIEWER },
};

const size_t api_nr_routes = ARRAY_SIZE(api_routes);
