/*
 * The runtime tables of the store (store.h from "Fencing" on): tasks and
 * their dependencies, the claim and its area and dependency rules, the
 * fencing tokens and what a stale one may no longer write, workers, the
 * merge queue and plans. Every test works on a real SQLite file in its
 * own temporary directory; the concurrency tests fork processes that
 * each open that store, as the workers of a `baton serve` do.
 *
 * With BATON_TEST_PG_DSN set (a PostgreSQL database the suite may wipe)
 * the same tests run against that database instead: the first handle a
 * test opens wipes it, and the counts the tests take behind the API's
 * back are taken there. Only claim_uses_index, which reads SQLite's
 * query plans, is skipped.
 *
 * Each test runs in a process of its own, so fault injection
 * (BATON_FAULT_STORE) counts that test's writes from zero.
 */
#include "util/compat.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/pipeline.h"
#include "core/queue.h"
#include "core/run.h"
#include "store/store.h"
#include "run_move.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* A test races bare child processes against each other: banned.h keeps
 * fork and waitpid for spawn.c in baton itself, not here. */
#undef fork
#undef kill
#undef waitpid

#define HOUR_MS (3600 * 1000)

/* ---- helpers ---------------------------------------------------------- */

static char *
db_path(void)
{
	return xasprintf("%s/baton.db", test_tmpdir());
}

/* The PostgreSQL database the tests run against, or NULL for SQLite. */
static const char *
pg_dsn(void)
{
	const char *dsn = getenv("BATON_TEST_PG_DSN");

	return dsn && *dsn ? dsn : NULL;
}

/* Runs sql on a connection of its own; the caller PQclears the result. */
static PGresult *
pg_query(const char *sql)
{
	PGconn *c = PQconnectdb(pg_dsn());
	PGresult *res;

	if (PQstatus(c) != CONNECTION_OK)
		test_fail(__FILE__, __LINE__, "cannot connect to %s: %s",
			  pg_dsn(), PQerrorMessage(c));
	res = PQexec(c, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK &&
	    PQresultStatus(res) != PGRES_COMMAND_OK)
		test_fail(__FILE__, __LINE__, "%s: %s", sql,
			  PQerrorMessage(c));
	PQfinish(c);
	return res;
}

/* What every handle of the test opens: the file, or the database. */
static char *
queue_store_spec(void)
{
	return pg_dsn() ? xstrdup(pg_dsn()) : db_path();
}

/*
 * A handle on the test's store. A SQLite file starts empty in the
 * test's own directory; the PostgreSQL database is wiped by the first
 * open of the test's process (a later one, or a forked claimer's, must
 * not wipe what the test has written).
 */
static struct store *
open_store(void)
{
	static int wiped;
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char *spec = queue_store_spec();

	if (pg_dsn() && !wiped) {
		PQclear(pg_query("SET client_min_messages = warning;"
				 " DROP SCHEMA public CASCADE;"
				 " CREATE SCHEMA public"));
		wiped = 1;
	}
	ASSERT_OK(store_open(spec, &s, &e), &e);
	free(spec);
	return s;
}

/*
 * Adds a queued task; deps is a 0-terminated list of ids (NULL: none).
 * Returns its id.
 */
static int64_t
add_task(struct store *s, const char *title, int priority, const char *area,
	 const int64_t *deps)
{
	struct err e = ERR_INIT;
	struct task t = { 0 };
	int64_t id;

	t.title = xstrdup(title);
	t.area = xstrdup_or_null(area);
	t.priority = priority;
	while (deps && deps[t.nr_deps])
		t.nr_deps++;
	if (t.nr_deps) {
		t.deps = xcalloc(t.nr_deps, sizeof(*t.deps));
		memcpy(t.deps, deps, t.nr_deps * sizeof(*t.deps));
	}
	ASSERT_OK(store_task_add(s, &t, NULL, &e), &e);
	ASSERT(t.id > 0);
	id = t.id;
	task_release(&t);
	return id;
}

static void
get_task(struct store *s, int64_t id, struct task *out)
{
	struct err e = ERR_INIT;

	ASSERT_OK(store_task_get(s, id, out, &e), &e);
}

/* Claims one task as holder and returns its id (0: nothing to claim). */
static int64_t
claim(struct store *s, const char *holder, struct task *out)
{
	struct err e = ERR_INIT;
	struct task t = { 0 };
	int rc = store_task_claim(s, holder, HOUR_MS, &t, &e);
	int64_t id = t.id;

	if (rc == BATON_ENOTFOUND) {
		ASSERT_STREQ(e.msg, "nothing to claim");
		return 0;
	}
	ASSERT_OK(rc, &e);
	id = t.id;
	if (out)
		*out = t;
	else
		task_release(&t);
	return id;
}

/* One move of task id to status (versioned update with an event). */
static void
move_status(struct store *s, int64_t id, const char *status)
{
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct task t;

	get_task(s, id, &t);
	ev.type = xstrdup("transition");
	ev.from = xstrdup(t.status);
	ev.to = xstrdup(status);
	run_set(&t.status, status);
	ASSERT_OK(store_task_update(s, &t, &ev, &e), &e);
	ASSERT_EQ(ev.task_id, id);
	event_release(&ev);
	task_release(&t);
}

/* The index of status in task_statuses. */
static size_t
status_index(const char *status)
{
	size_t i;

	for (i = 0; i < NR_TASK_STATUSES; i++)
		if (!strcmp(task_statuses[i], status))
			return i;
	test_fail(__FILE__, __LINE__, "no task status '%s'", status);
}

/*
 * Sets the status of task id: straight there when the task table allows
 * it, else along the shortest path of its moves (queued -> running ->
 * done), one versioned update with an event each.
 */
static void
set_status(struct store *s, int64_t id, const char *status)
{
	size_t prev[NR_TASK_STATUSES], queue[NR_TASK_STATUSES];
	size_t path[NR_TASK_STATUSES], head = 0, tail = 0, n = 0, i, at;
	size_t start, goal = status_index(status);
	struct task t;

	get_task(s, id, &t);
	start = status_index(t.status);
	task_release(&t);
	for (i = 0; i < NR_TASK_STATUSES; i++)
		prev[i] = NR_TASK_STATUSES;
	prev[start] = start;
	queue[tail++] = start;
	while (head < tail) {
		at = queue[head++];
		for (i = 0; i < nr_task_moves; i++) {
			size_t to = status_index(task_moves[i].to);

			if (strcmp(task_moves[i].from, task_statuses[at]) ||
			    prev[to] != NR_TASK_STATUSES)
				continue;
			prev[to] = at;
			queue[tail++] = to;
		}
	}
	if (start == goal) {
		move_status(s, id, status);
		return;
	}
	ASSERT(prev[goal] != NR_TASK_STATUSES);
	for (at = goal; at != start; at = prev[at])
		path[n++] = at;
	while (n--)
		move_status(s, id, task_statuses[path[n]]);
}

/* A count from the raw database (the test's view behind the API). */
static int64_t
raw_count(const char *sql)
{
	char *path = db_path();
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t n = -1;

	if (pg_dsn()) {
		PGresult *res = pg_query(sql);

		if (PQntuples(res) > 0)
			n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		free(path);
		return n;
	}
	ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
	ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(path);
	return n;
}

/* The last column of each row of sql, joined by '|' (SQLite only). */
static char *
raw_text(const char *sql)
{
	char *path = db_path();
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char *out = xstrdup("");

	ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
	ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		int last = sqlite3_column_count(st) - 1;
		char *both = xasprintf("%s%s%s", out, *out ? "|" : "",
				       sqlite3_column_text(st, last));

		free(out);
		out = both;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(path);
	return out;
}

/* Copies of the events a list handed out. */
struct events {
	int n, alloc;
	struct event *ev;
};

static int
collect_event(const struct event *ev, void *arg)
{
	struct events *l = arg;
	struct event *c;

	ALLOC_GROW(l->ev, l->n + 1, l->alloc);
	c = &l->ev[l->n++];
	memset(c, 0, sizeof(*c));
	c->seq = ev->seq;
	c->ts = ev->ts;
	c->task_id = ev->task_id;
	c->run_id = xstrdup_or_null(ev->run_id);
	c->type = xstrdup_or_null(ev->type);
	c->from = xstrdup_or_null(ev->from);
	c->to = xstrdup_or_null(ev->to);
	c->data = xstrdup_or_null(ev->data);
	return 0;
}

static void
events_release(struct events *l)
{
	int i;

	for (i = 0; i < l->n; i++)
		event_release(&l->ev[i]);
	FREE_AND_NULL(l->ev);
	l->n = l->alloc = 0;
}

static int
count_events(struct store *s, const char *type)
{
	struct err e = ERR_INIT;
	struct events l = { 0 };
	int n;

	ASSERT_OK(store_event_list(s, NULL, 0, type, collect_event, &l, &e),
		  &e);
	n = l.n;
	events_release(&l);
	return n;
}

/*
 * count_events once it reaches want, or what it is after 10 s: a
 * PostgreSQL follower stops before a hole (a rolled-back event's seq)
 * while a transaction that began before the event after it runs
 * anywhere on the server (pg/001-init.sql), as t_store's events_seen.
 */
static int
events_seen(struct store *s, const char *type, int want)
{
	int n, i;

	for (i = 0; (n = count_events(s, type)) < want && i < 500; i++)
		usleep(20 * 1000);
	return n;
}

/* Copies of the tasks a list handed out. */
struct tasks {
	int n, alloc;
	struct task *t;
	struct store *write_to; /* non-NULL: update each task from the cb */
};

static int
collect_task(const struct task *t, void *arg)
{
	struct tasks *l = arg;

	ALLOC_GROW(l->t, l->n + 1, l->alloc);
	task_copy(&l->t[l->n++], t);
	if (l->write_to) {
		struct err e = ERR_INIT;
		struct task w;

		task_copy(&w, t);
		run_set(&w.reason, "touched from a callback");
		ASSERT_OK(store_task_update(l->write_to, &w, NULL, &e), &e);
		task_release(&w);
	}
	return 0;
}

static void
tasks_release(struct tasks *l)
{
	int i;

	for (i = 0; i < l->n; i++)
		task_release(&l->t[i]);
	FREE_AND_NULL(l->t);
	l->n = l->alloc = 0;
}

static void
list_tasks(struct store *s, const char *status, int64_t parent, int limit,
	   struct tasks *out)
{
	struct store_task_filter f = { .status = status, .parent_id = parent, .limit = limit };
	struct err e = ERR_INIT;
	struct store *w = out->write_to;

	memset(out, 0, sizeof(*out));
	out->write_to = w;
	ASSERT_OK(store_task_list(s, &f, collect_task, out, &e), &e);
}

static void
get_run(struct store *s, const char *ref, struct run *out)
{
	struct err e = ERR_INIT;

	ASSERT_OK(store_run_get(s, ref, out, &e), &e);
}

static void
make_run(struct store *s, const char *task, int64_t task_id, struct run *out)
{
	struct err e = ERR_INIT;

	memset(out, 0, sizeof(*out));
	run_set(&out->task, task);
	run_set(&out->status, "running");
	out->task_id = task_id;
	ASSERT_OK(store_run_create(s, out, &e), &e);
}

/* ---- tasks ------------------------------------------------------------- */

/* Add, get and list round-trip every field, the defaults and the deps. */
TEST(task_add_get_list_deps)
{
	struct store *s = open_store();
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct task t = { 0 }, got;
	struct tasks l = { 0 };
	int64_t a, b, deps[4];
	int i;

	a = add_task(s, "first", 0, NULL, NULL);
	deps[0] = a;
	deps[1] = 0;
	b = add_task(s, "second", 0, "src", deps);
	ASSERT_EQ(a, 1);
	ASSERT_EQ(b, 2);

	/* A task with every field set, deps repeated, and its event. */
	t.title = xstrdup("third 'q\" é");
	t.body = xstrdup("the long text");
	t.kind = xstrdup("plan");
	t.pipeline = xstrdup("quick");
	t.status = xstrdup(TASK_BLOCKED);
	t.block_reason = xstrdup(BLOCK_PAUSED);
	t.reason = xstrdup("why");
	t.priority = 7;
	t.area = xstrdup("src/x");
	t.allowed_paths = xstrdup("[\"src/**\"]");
	t.verify = xstrdup("[\"make\"]");
	t.base_ref = xstrdup("main");
	t.origin = xstrdup("rework");
	t.parent_id = a;
	t.depth = 2;
	t.plan_id = 5;
	t.max_attempts = 9;
	t.not_before = 123;
	t.failure_sig = xstrdup("sig");
	t.failure_count = 4;
	t.judged_by = xstrdup("judge");
	t.created_at = 1000;
	t.nr_deps = 3;
	t.deps = xcalloc(3, sizeof(*t.deps));
	t.deps[0] = b;
	t.deps[1] = a;
	t.deps[2] = b;
	ev.type = xstrdup("task_added");
	ev.data = xstrdup("{\"by\":\"test\"}");
	ASSERT_OK(store_task_add(s, &t, &ev, &e), &e);
	ASSERT_EQ(t.id, 3);
	ASSERT_EQ(t.version, 1);
	ASSERT_EQ(t.created_at, 1000);
	ASSERT(t.updated_at > 1000);
	ASSERT_EQ(ev.task_id, 3);
	ASSERT(ev.seq > 0);
	event_release(&ev);

	get_task(s, 3, &got);
	ASSERT_STREQ(got.title, "third 'q\" é");
	ASSERT_STREQ(got.body, "the long text");
	ASSERT_STREQ(got.kind, "plan");
	ASSERT_STREQ(got.pipeline, "quick");
	ASSERT_STREQ(got.status, TASK_BLOCKED);
	ASSERT_STREQ(got.block_reason, BLOCK_PAUSED);
	ASSERT_STREQ(got.reason, "why");
	ASSERT_EQ(got.priority, 7);
	ASSERT_STREQ(got.area, "src/x");
	ASSERT_STREQ(got.allowed_paths, "[\"src/**\"]");
	ASSERT_STREQ(got.verify, "[\"make\"]");
	ASSERT_STREQ(got.base_ref, "main");
	ASSERT_STREQ(got.origin, "rework");
	ASSERT_EQ(got.parent_id, a);
	ASSERT_EQ(got.depth, 2);
	ASSERT_EQ(got.plan_id, 5);
	ASSERT_EQ(got.max_attempts, 9);
	ASSERT_EQ(got.not_before, 123);
	ASSERT_STREQ(got.failure_sig, "sig");
	ASSERT_EQ(got.failure_count, 4);
	ASSERT_STREQ(got.judged_by, "judge");
	ASSERT(got.run_id == NULL);
	ASSERT(got.lease_holder == NULL);
	ASSERT_EQ(got.created_at, 1000);
	ASSERT_EQ(got.updated_at, t.updated_at);
	ASSERT_EQ(got.version, 1);
	ASSERT_EQ(got.nr_deps, 2); /* b once, a: in id order */
	ASSERT_EQ(got.deps[0], a);
	ASSERT_EQ(got.deps[1], b);
	task_release(&got);
	task_release(&t);

	/* The defaults of a bare task. */
	get_task(s, a, &got);
	ASSERT_STREQ(got.kind, "code");
	ASSERT_STREQ(got.origin, "user");
	ASSERT_STREQ(got.status, TASK_QUEUED);
	ASSERT_EQ(got.max_attempts, 3);
	ASSERT_EQ(got.parent_id, 0);
	ASSERT_EQ(got.nr_deps, 0);
	ASSERT(got.deps == NULL);
	ASSERT(got.area == NULL);
	task_release(&got);

	ASSERT_EQ(store_task_get(s, 99, &got, &e), BATON_ENOTFOUND);
	ASSERT_STREQ(e.msg, "no task 99");

	/* More than a page, each with a dependency on the one before. */
	for (i = 4; i <= 150; i++) {
		deps[0] = i - 1;
		deps[1] = i % 2 ? a : 0;
		deps[2] = 0;
		ASSERT_EQ(add_task(s, "many", 0, NULL, deps), i);
	}
	list_tasks(s, NULL, 0, 0, &l);
	ASSERT_EQ(l.n, 150);
	for (i = 0; i < l.n; i++)
		ASSERT_EQ(l.t[i].id, i + 1);
	ASSERT_EQ(l.t[0].nr_deps, 0);
	ASSERT_EQ(l.t[1].nr_deps, 1);
	ASSERT_EQ(l.t[2].nr_deps, 2);
	for (i = 3; i < l.n; i++) {
		ASSERT_EQ(l.t[i].nr_deps, (i + 1) % 2 ? 2 : 1);
		ASSERT_EQ(l.t[i].deps[l.t[i].nr_deps - 1], i);
	}
	tasks_release(&l);

	list_tasks(s, TASK_BLOCKED, 0, 0, &l);
	ASSERT_EQ(l.n, 1);
	ASSERT_EQ(l.t[0].id, 3);
	ASSERT_EQ(l.t[0].nr_deps, 2);
	tasks_release(&l);
	list_tasks(s, NULL, a, 0, &l); /* children of a */
	ASSERT_EQ(l.n, 1);
	ASSERT_EQ(l.t[0].id, 3);
	tasks_release(&l);
	list_tasks(s, TASK_QUEUED, 0, 70, &l);
	ASSERT_EQ(l.n, 70);
	ASSERT_EQ(l.t[69].id, 71);
	ASSERT_EQ(l.t[69].nr_deps, 2);
	tasks_release(&l);

	/* Callbacks may write, across pages. */
	l.write_to = s;
	list_tasks(s, TASK_QUEUED, 0, 0, &l);
	ASSERT_EQ(l.n, 149);
	tasks_release(&l);
	get_task(s, 150, &got);
	ASSERT_EQ(got.version, 2);
	ASSERT_STREQ(got.reason, "touched from a callback");
	ASSERT_EQ(got.nr_deps, 1); /* an update leaves deps alone */
	task_release(&got);
	store_close(s);
}

/* A dependency (or parent) that does not exist: refused, nothing written. */
/*
 * A newest-first list (the API's and the dashboard's) carries every
 * task's dependencies too. On SQLite it came back without any: the
 * dependencies were looked up between the first and the last id of the
 * page, which is an empty range when the page runs downwards.
 */
TEST(task_list_newest_first_has_deps)
{
	struct store_task_filter f = { .newest_first = 1 };
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct tasks l = { 0 };
	int64_t deps[3];

	add_task(s, "a", 0, NULL, NULL);
	deps[0] = 1;
	deps[1] = 0;
	add_task(s, "b", 0, NULL, deps);
	deps[1] = 2;
	deps[2] = 0;
	add_task(s, "c", 0, NULL, deps);
	ASSERT_OK(store_task_list(s, &f, collect_task, &l, &e), &e);
	ASSERT_EQ(l.n, 3);
	ASSERT_EQ(l.t[0].id, 3);
	ASSERT_EQ(l.t[0].nr_deps, 2);
	ASSERT_EQ(l.t[0].deps[0], 1);
	ASSERT_EQ(l.t[0].deps[1], 2);
	ASSERT_EQ(l.t[1].id, 2);
	ASSERT_EQ(l.t[1].nr_deps, 1);
	ASSERT_EQ(l.t[1].deps[0], 1);
	ASSERT_EQ(l.t[2].nr_deps, 0);
	tasks_release(&l);
	store_close(s);
}

TEST(task_missing_dependency_refused)
{
	struct store *s = open_store();
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct task t = { 0 };
	int64_t a = add_task(s, "exists", 0, NULL, NULL);

	t.title = xstrdup("waits for a ghost");
	t.nr_deps = 2;
	t.deps = xcalloc(2, sizeof(*t.deps));
	t.deps[0] = a;
	t.deps[1] = 9;
	ev.type = xstrdup("task_added");
	ASSERT_EQ(store_task_add(s, &t, &ev, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "task 9 (a dependency) does not exist");
	ASSERT_EQ(t.id, 0);
	ASSERT(t.kind == NULL); /* no defaults filled in either */
	ASSERT_EQ(ev.seq, 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"), 1);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM task_deps"), 0);
	ASSERT_EQ(count_events(s, NULL), 0);

	t.deps[1] = a;
	t.parent_id = 42;
	ASSERT_EQ(store_task_add(s, &t, &ev, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "task 42 (the parent) does not exist");
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"), 1);

	/* Fixed, it goes in, with the next id. */
	t.parent_id = a;
	ASSERT_OK(store_task_add(s, &t, &ev, &e), &e);
	ASSERT_EQ(t.id, 2);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM task_deps"), 1);
	ASSERT_EQ(count_events(s, "task_added"), 1);
	event_release(&ev);
	task_release(&t);
	store_close(s);
}

/* Payload hashes for the idempotency keys: 64 hex digits each. */
#define SHA8(c) c c c c c c c c
#define SHA64(c) SHA8(SHA8(c))
static const char sha_a[] = SHA64("a"), sha_b[] = SHA64("b"),
		  sha_c[] = SHA64("c");
_Static_assert(sizeof(sha_a) == 65, "a payload hash is 64 hex digits");

/* A keyed add of a task titled title under key, payload hash sha. */
static int
add_keyed(struct store *s, const char *title, const char *key,
	  const char *sha, int64_t dep, struct store_key *k, int64_t *id)
{
	struct err e = ERR_INIT;
	struct event ev = { .type = (char *)"task_added" };
	struct task t = { 0 };
	int rc;

	t.title = xstrdup(title);
	if (dep) {
		t.nr_deps = 1;
		t.deps = xcalloc(1, sizeof(*t.deps));
		t.deps[0] = dep;
	}
	*k = (struct store_key){ .key = key, .sha = sha };
	rc = store_task_add_keyed(s, &t, &ev, k, &e);
	if (rc < 0)
		fprintf(stderr, "keyed add: %s\n", e.msg);
	*id = t.id;
	task_release(&t);
	return rc;
}

/*
 * A keyed add claims its key, makes its task and binds the key in one
 * commit: a second add of the key writes nothing and names the task; a
 * refused add leaves the key free; a claim that names no task (made by
 * store_idem_claim and never bound) is read as such.
 */
TEST(task_add_keyed_is_one_commit)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct store_key k;
	char was[65];
	int64_t id, other = -1;

	ASSERT_EQ(add_keyed(s, "first", "k1", sha_a, 0, &k, &id), 1);
	ASSERT_EQ(id, 1);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM idempotency_keys"
			    " WHERE idem_key = 'k1' AND task_id = 1"),
		  1);

	ASSERT_EQ(add_keyed(s, "again", "k1", sha_a, 0, &k, &id), 0);
	ASSERT_EQ(id, 0);
	ASSERT_EQ(k.task_id, 1);
	ASSERT_STREQ(k.sha_was, sha_a);
	ASSERT_EQ(add_keyed(s, "other", "k1", sha_b, 0, &k, &id), 0);
	ASSERT_EQ(k.task_id, 1);
	ASSERT_STREQ(k.sha_was, sha_a);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"), 1);
	ASSERT_EQ(count_events(s, "task_added"), 1);

	ASSERT_EQ(add_keyed(s, "ghost dep", "k2", sha_a, 9, &k, &id),
		  BATON_ENOTFOUND);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM idempotency_keys"
			    " WHERE idem_key = 'k2'"),
		  0);
	ASSERT_EQ(add_keyed(s, "real dep", "k2", sha_a, 1, &k, &id), 1);
	ASSERT_EQ(id, 2);

	ASSERT_EQ(store_idem_claim(s, "k3", sha_a, &other, was, &e), 1);
	ASSERT_EQ(add_keyed(s, "late", "k3", sha_a, 0, &k, &id), 0);
	ASSERT_EQ(k.task_id, 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"), 2);
	store_close(s);
}

/*
 * A task whose event names a run not on record is refused whole, the
 * run named: no row, no event (on PostgreSQL the row and its event are
 * one statement).
 */
TEST(task_add_event_of_missing_run_refused)
{
	struct store *s = open_store();
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct task t = { 0 };

	t.title = xstrdup("about a ghost run");
	ev.type = xstrdup("task_added");
	ev.run_id = xstrdup("r-ghost");
	ASSERT_EQ(store_task_add(s, &t, &ev, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "r-ghost");
	ASSERT_EQ(t.id, 0);
	ASSERT_EQ(ev.seq, 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"), 0);
	ASSERT_EQ(count_events(s, NULL), 0);
	event_release(&ev);
	task_release(&t);
	store_close(s);
}

TEST(task_update_conflict)
{
	struct store *s = open_store();
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct task a, b, got;
	int64_t id = add_task(s, "contested", 0, NULL, NULL);

	get_task(s, id, &a);
	get_task(s, id, &b);
	run_set(&a.status, TASK_CANCELLED);
	ASSERT_OK(store_task_update(s, &a, NULL, &e), &e);
	ASSERT_EQ(a.version, 2);

	run_set(&b.status, TASK_RUNNING);
	ev.type = xstrdup("transition");
	ASSERT_EQ(store_task_update(s, &b, &ev, &e), BATON_ECONFLICT);
	ASSERT_STREQ(e.msg, "task 1 changed concurrently (expected version 1)");
	ASSERT_EQ(b.version, 1);
	ASSERT_EQ(ev.seq, 0);
	ASSERT_EQ(count_events(s, NULL), 0);
	get_task(s, id, &got);
	ASSERT_STREQ(got.status, TASK_CANCELLED);
	ASSERT_EQ(got.version, 2);
	task_release(&got);

	/* A task that does not exist is not a conflict. */
	b.id = 77;
	ASSERT_EQ(store_task_update(s, &b, &ev, &e), BATON_ENOTFOUND);
	ASSERT_STREQ(e.msg, "no task 77");

	/* The loser re-reads and writes. */
	task_release(&b);
	get_task(s, id, &b);
	run_set(&b.reason, "re-read");
	ASSERT_OK(store_task_update(s, &b, &ev, &e), &e);
	ASSERT_EQ(b.version, 3);
	ASSERT_EQ(count_events(s, NULL), 1);
	event_release(&ev);
	task_release(&a);
	task_release(&b);
	store_close(s);
}

TEST(task_counts_and_events)
{
	static const char *const statuses[] = { TASK_QUEUED, TASK_RUNNING,
						TASK_DONE, "nonsense" };
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct events l = { 0 };
	int64_t counts[4] = { -1, -1, -1, -1 };
	int i;

	for (i = 0; i < 5; i++)
		add_task(s, "t", 0, NULL, NULL);
	ASSERT_EQ(claim(s, "w", NULL), 1);
	ASSERT_EQ(claim(s, "w", NULL), 2);
	set_status(s, 1, TASK_DONE);
	ASSERT_OK(store_task_counts(s, statuses, counts, 4, &e), &e);
	ASSERT_EQ(counts[0], 3);
	ASSERT_EQ(counts[1], 1);
	ASSERT_EQ(counts[2], 1);
	ASSERT_EQ(counts[3], 0);

	/* Task 1's story: claimed, then done. */
	ASSERT_OK(store_task_events(s, 1, 0, collect_event, &l, &e), &e);
	ASSERT_EQ(l.n, 2);
	ASSERT_STREQ(l.ev[0].type, "task_claimed");
	ASSERT_EQ(l.ev[0].task_id, 1);
	ASSERT(l.ev[0].run_id == NULL);
	ASSERT_STREQ(l.ev[1].type, "transition");
	ASSERT_STREQ(l.ev[1].to, TASK_DONE);
	ASSERT(l.ev[1].seq > l.ev[0].seq);
	i = (int)l.ev[0].seq;
	events_release(&l);
	ASSERT_OK(store_task_events(s, 1, i, collect_event, &l, &e), &e);
	ASSERT_EQ(l.n, 1);
	ASSERT_STREQ(l.ev[0].type, "transition");
	events_release(&l);
	ASSERT_OK(store_task_events(s, 4, 0, collect_event, &l, &e), &e);
	ASSERT_EQ(l.n, 0);
	store_close(s);
}

/* ---- the claim ---------------------------------------------------------- */

/* Priority first, then id; every field the claim sets; then nothing. */
TEST(claim_order)
{
	struct store *s = open_store();
	struct events l = { 0 };
	struct err e = ERR_INIT;
	struct task t, got;
	int64_t before = time_now_ms();

	add_task(s, "low", 0, NULL, NULL);   /* 1 */
	add_task(s, "high", 5, NULL, NULL);  /* 2 */
	add_task(s, "high2", 5, NULL, NULL); /* 3 */
	add_task(s, "mid", 1, NULL, NULL);   /* 4 */
	add_task(s, "neg", -3, NULL, NULL);  /* 5 */

	ASSERT_EQ(claim(s, "host:1:0", &t), 2);
	ASSERT_STREQ(t.status, TASK_RUNNING);
	ASSERT_STREQ(t.lease_holder, "host:1:0");
	ASSERT_EQ(t.lease_token, 1);
	ASSERT_EQ(t.attempts, 1);
	ASSERT_EQ(t.version, 2);
	ASSERT(t.started_at >= before);
	ASSERT(t.lease_expires_at >= t.started_at + HOUR_MS);
	get_task(s, 2, &got);
	ASSERT_STREQ(got.status, TASK_RUNNING);
	ASSERT_EQ(got.lease_token, 1);
	ASSERT_EQ(got.lease_expires_at, t.lease_expires_at);
	task_release(&got);
	task_release(&t);

	ASSERT_EQ(claim(s, "w", NULL), 3);
	ASSERT_EQ(claim(s, "w", NULL), 4);
	ASSERT_EQ(claim(s, "w", NULL), 1);
	ASSERT_EQ(claim(s, "w", NULL), 5);
	ASSERT_EQ(claim(s, "w", NULL), 0);

	/* One event per claim, naming worker, token and attempt. */
	ASSERT_OK(store_task_events(s, 2, 0, collect_event, &l, &e), &e);
	ASSERT_EQ(l.n, 1);
	ASSERT_STREQ(l.ev[0].type, "task_claimed");
	ASSERT_STREQ(l.ev[0].data,
		     "{\"worker\":\"host:1:0\",\"token\":1,\"attempt\":1}");
	events_release(&l);
	ASSERT_EQ(count_events(s, "task_claimed"), 5);

	/* Cancelled, blocked and done tasks are never claimed. */
	set_status(s, 1, TASK_QUEUED);
	set_status(s, 1, TASK_CANCELLED);
	add_task(s, "later", 0, NULL, NULL);
	set_status(s, 6, TASK_BLOCKED);
	ASSERT_EQ(claim(s, "w", NULL), 0);
	store_close(s);
}

/* The claim walks the claim index: no scan of tasks, no sort. */
TEST(claim_uses_index)
{
	struct store *s;
	char *plan;

	if (pg_dsn())
		return;
	s = open_store();
	store_close(s);
	plan = raw_text("EXPLAIN QUERY PLAN SELECT t.id FROM tasks AS t"
			" WHERE t.status = 'queued' AND t.not_before <= 5"
			" ORDER BY t.priority DESC, t.id LIMIT 1");
	ASSERT_CONTAINS(plan, "tasks_claim");
	ASSERT(!strstr(plan, "TEMP B-TREE"));
	free(plan);
	plan = raw_text("EXPLAIN QUERY PLAN SELECT seq FROM events"
			" WHERE seq > 0 AND task_id = 3 ORDER BY seq LIMIT 64");
	ASSERT_CONTAINS(plan, "events_task_seq");
	ASSERT(!strstr(plan, "TEMP B-TREE"));
	free(plan);
}

/* A dependency that is not done holds a task back until it is. */
TEST(claim_waits_for_dependencies)
{
	struct store *s = open_store();
	int64_t deps[3] = { 0 };
	int64_t a, b, c, d;

	a = add_task(s, "a", 0, NULL, NULL);
	deps[0] = a;
	b = add_task(s, "b needs a", 10, NULL, deps);
	c = add_task(s, "c", 0, NULL, NULL);
	deps[1] = c;
	d = add_task(s, "d needs a and c", 20, NULL, deps);

	ASSERT_EQ(claim(s, "w", NULL), a); /* b and d outrank it, but wait */
	ASSERT_EQ(claim(s, "w", NULL), c);
	ASSERT_EQ(claim(s, "w", NULL), 0); /* a running is not a done */
	set_status(s, a, TASK_FAILED);
	ASSERT_EQ(claim(s, "w", NULL), 0); /* failed is not done either */
	set_status(s, a, TASK_DONE);
	ASSERT_EQ(claim(s, "w", NULL), b); /* d still waits for c */
	set_status(s, c, TASK_DONE);
	ASSERT_EQ(claim(s, "w", NULL), d);
	store_close(s);
}

/*
 * Areas: a running task excludes the same path, its parents and its
 * children, not a sibling that merely shares a prefix.
 */
TEST(claim_area_exclusive)
{
	struct store *s = open_store();
	int64_t export, csv, src, exporter, none, docs, same, srcx;

	export = add_task(s, "export", 100, "src/export", NULL);
	csv = add_task(s, "csv", 90, "src/export/csv", NULL);
	src = add_task(s, "src", 80, "src", NULL);
	exporter = add_task(s, "exporter", 70, "src/exporter", NULL);
	none = add_task(s, "no area", 60, NULL, NULL);
	same = add_task(s, "same", 50, "src/export", NULL);
	docs = add_task(s, "docs", 40, "docs", NULL);
	srcx = add_task(s, "srcx", 30, "srcx", NULL);

	ASSERT_EQ(claim(s, "w", NULL), export);
	ASSERT_EQ(claim(s, "w", NULL), exporter); /* csv, src: excluded */
	ASSERT_EQ(claim(s, "w", NULL), none);
	ASSERT_EQ(claim(s, "w", NULL), docs);
	ASSERT_EQ(claim(s, "w", NULL), srcx);
	ASSERT_EQ(claim(s, "w", NULL), 0);

	/* "src/export" done: csv can go, and then excludes src and same. */
	set_status(s, export, TASK_DONE);
	ASSERT_EQ(claim(s, "w", NULL), csv);
	ASSERT_EQ(claim(s, "w", NULL), 0);
	/* csv done: same can go; src still has "src/exporter" under it. */
	set_status(s, csv, TASK_DONE);
	ASSERT_EQ(claim(s, "w", NULL), same);
	ASSERT_EQ(claim(s, "w", NULL), 0);
	set_status(s, exporter, TASK_DONE);
	ASSERT_EQ(claim(s, "w", NULL), 0); /* and "src/export" (same) */
	set_status(s, same, TASK_BLOCKED); /* only running tasks exclude */
	ASSERT_EQ(claim(s, "w", NULL), src);
	store_close(s);
}

/*
 * The claim's SQL and store_areas_overlap (what baton doctor counts
 * with) are one rule: for each pair, a task of area b is claimable next
 * to a running task of area a exactly when they do not overlap.
 */
TEST(claim_area_rule_is_store_areas_overlap)
{
	static const char *const pairs[][2] = {
		{ "src", "src" },
		{ "src", "src/x" },
		{ "src/x", "src" },
		{ "src", "srcx" },
		{ "src/export", "src/exporter" },
		{ "a/b", "a/b/c/d" },
		{ "a/b/c/d", "a/b" },
		{ "src/", "src/x" },
		{ "docs", "src" },
		{ NULL, "src" },
		{ "src", NULL },
		{ NULL, NULL },
		{ "a.b", "a/b" },
	};
	struct store *s = open_store();
	size_t i;

	for (i = 0; i < ARRAY_SIZE(pairs); i++) {
		const char *a = pairs[i][0], *b = pairs[i][1];
		int64_t first = add_task(s, "first", 100, a, NULL), second;
		int64_t got;

		ASSERT_EQ(claim(s, "w", NULL), first);
		second = add_task(s, "second", 100, b, NULL);
		got = claim(s, "w", NULL);
		if ((got == second) == store_areas_overlap(a, b))
			test_fail(__FILE__, __LINE__,
				  "areas '%s' and '%s': the claim %s, "
				  "store_areas_overlap says %d",
				  a ? a : "(none)", b ? b : "(none)",
				  got == second ? "ran both" : "held one back",
				  store_areas_overlap(a, b));
		set_status(s, first, TASK_DONE);
		set_status(s, second, TASK_DONE);
	}
	store_close(s);
}

TEST(claim_respects_not_before)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct task t;
	int64_t id = add_task(s, "later", 0, NULL, NULL), due = -1;
	int64_t at = time_now_ms() + 60 * 1000;

	get_task(s, id, &t);
	t.not_before = at;
	ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
	ASSERT_EQ(claim(s, "w", NULL), 0);
	ASSERT_OK(store_task_next_due(s, &due, &e), &e);
	ASSERT_EQ(due, at);

	t.not_before = time_now_ms() - 1;
	ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
	ASSERT_EQ(claim(s, "w", NULL), id);
	task_release(&t);
	store_close(s);
}

/* Every claim draws a larger token, a re-claim of the same task too. */
TEST(claim_tokens_increase)
{
	struct store *s = open_store();
	struct task t, got;
	int64_t prev = 0;
	int i;

	for (i = 0; i < 10; i++)
		add_task(s, "t", 0, NULL, NULL);
	for (i = 0; i < 10; i++) {
		ASSERT(claim(s, "w", &t) > 0);
		ASSERT(t.lease_token > prev);
		prev = t.lease_token;
		task_release(&t);
	}
	/* Task 3 goes back to the queue (its lease expired) and comes out
	 * again: a new token, a second attempt. */
	set_status(s, 3, TASK_QUEUED);
	ASSERT_EQ(claim(s, "other", &t), 3);
	ASSERT(t.lease_token > prev);
	ASSERT_EQ(t.attempts, 2);
	ASSERT_STREQ(t.lease_holder, "other");
	get_task(s, 3, &got);
	ASSERT_EQ(got.lease_token, t.lease_token);
	task_release(&got);
	task_release(&t);
	ASSERT_EQ(raw_count(pg_dsn() ? "SELECT last_value FROM lease_tokens"
				      : "SELECT value FROM counters"
					" WHERE name = 'lease_token'"),
		  11);
	store_close(s);
}

TEST(renew_extends_or_fences)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct task t, got;
	int64_t old;

	add_task(s, "long job", 0, NULL, NULL);
	ASSERT_EQ(claim(s, "w", &t), 1);
	old = t.lease_expires_at;
	ASSERT_OK(store_task_renew(s, 1, t.lease_token, 2 * HOUR_MS, &e), &e);
	get_task(s, 1, &got);
	ASSERT(got.lease_expires_at >= old + HOUR_MS - 1000);
	ASSERT_EQ(got.version, t.version); /* no version bump, no event */
	ASSERT_EQ(count_events(s, NULL), 1);
	task_release(&got);

	/* Another token: fenced, and the lease is not touched. */
	ASSERT_EQ(store_task_renew(s, 1, t.lease_token + 1, HOUR_MS, &e),
		  BATON_EFENCED);
	ASSERT_CONTAINS(e.msg, "cannot renew the lease on task 1");
	get_task(s, 1, &got);
	ASSERT(got.lease_expires_at >= old + HOUR_MS - 1000);
	task_release(&got);

	/* Taken over: the old holder's token is stale. */
	set_status(s, 1, TASK_QUEUED);
	ASSERT_EQ(claim(s, "w2", NULL), 1);
	ASSERT_EQ(store_task_renew(s, 1, t.lease_token, HOUR_MS, &e),
		  BATON_EFENCED);
	/* No longer running: nobody renews it. */
	get_task(s, 1, &got);
	set_status(s, 1, TASK_DONE);
	ASSERT_EQ(store_task_renew(s, 1, got.lease_token, HOUR_MS, &e),
		  BATON_EFENCED);
	ASSERT_EQ(store_task_renew(s, 9, 1, HOUR_MS, &e), BATON_EFENCED);
	task_release(&got);
	task_release(&t);
	store_close(s);
}

/*
 * Fencing: a worker whose lease was taken over writes nothing through a
 * fenced handle, whatever it tries; with the current token it writes.
 */
TEST(fence_refuses_stale_writer)
{
	struct store *s = open_store(), *late = open_store();
	struct store_output o = { 0 };
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct events l = { 0 };
	struct merge_item m = { 0 };
	struct task t, mine, now;
	struct run r, r2 = { 0 }, got;
	int64_t id, old_token, plan_id = 0;
	int plan_v = 0;

	id = add_task(s, "contested", 0, NULL, NULL);
	ASSERT_EQ(claim(late, "slow", &mine), id);
	old_token = mine.lease_token;
	make_run(late, "contested", id, &r);
	ASSERT_EQ(r.task_id, id);

	/* The lease expires, a sweep requeues, another worker claims. */
	set_status(s, id, TASK_QUEUED);
	ASSERT_EQ(claim(s, "fast", &now), id);
	ASSERT(now.lease_token > old_token);

	/* The slow worker wakes up, fenced with its old token. */
	store_fence(late, id, old_token);
	run_set(&r.status, "verifying");
	ev.type = xstrdup("transition");
	ev.to = xstrdup("verifying");
	ASSERT_EQ(door_update(late, &r, "running", &ev, &e), BATON_EFENCED);
	ASSERT_CONTAINS(e.msg, "the lease on task 1 was taken over (token 1 "
			       "is stale, the task now has 2): this worker "
			       "may not write");
	ASSERT_EQ(r.version, 1);
	ASSERT_EQ(ev.seq, 0);
	ASSERT_EQ(store_event_add(late, &ev, &e), BATON_EFENCED);
	ASSERT_EQ(ev.seq, 0);
	o.run_id = xstrdup(r.id);
	o.stage = xstrdup("build");
	o.artifact = xstrdup("diff");
	o.content = xstrdup("stale work");
	ASSERT_EQ(store_output_add(late, &o, &e), BATON_EFENCED);
	run_set(&mine.status, TASK_DONE);
	ASSERT_EQ(store_task_update(late, &mine, NULL, &e), BATON_EFENCED);
	ASSERT_EQ(mine.version, 2);
	ASSERT_EQ(store_run_request(late, r.id, "abort_requested", 1, NULL,
				    &e),
		  BATON_EFENCED);
	run_set(&r2.task, "another");
	run_set(&r2.status, "queued");
	ASSERT_EQ(store_run_create(late, &r2, &e), BATON_EFENCED);
	ASSERT(r2.id == NULL);
	m.run_id = xstrdup(r.id);
	m.branch = xstrdup("baton/r1");
	ASSERT_EQ(store_merge_add(late, &m, NULL, &e), BATON_EFENCED);
	ASSERT_EQ(m.id, 0);
	ASSERT_EQ(store_plan_add(late, "plan.md", "[]", &plan_id, &plan_v, &e),
		  BATON_EFENCED);
	t = (struct task){ 0 };
	t.title = xstrdup("rework");
	ASSERT_EQ(store_task_add(late, &t, NULL, &e), BATON_EFENCED);
	task_release(&t);

	/* Nothing of it reached the database. */
	get_run(s, r.id, &got);
	ASSERT_EQ(got.version, 1);
	ASSERT_STREQ(got.status, "running");
	ASSERT_EQ(got.abort_requested, 0);
	run_release(&got);
	get_task(s, id, &t);
	ASSERT_STREQ(t.status, TASK_RUNNING);
	ASSERT_EQ(t.version, now.version);
	task_release(&t);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM runs"), 1);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM stage_outputs"), 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM merge_queue"), 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM plans"), 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"), 1);
	/* claimed, run created, requeued, claimed again: no more */
	ASSERT_EQ(count_events(s, NULL), 4);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM events WHERE run_id IS NOT"
			    " NULL"),
		  1);

	/* Reads are never fenced. */
	get_run(late, r.id, &got);
	run_release(&got);

	/* The current holder, fenced with the current token, writes. */
	store_fence(s, id, now.lease_token);
	ASSERT_OK(door_update(s, &r, "running", &ev, &e), &e);
	ASSERT_EQ(r.version, 2);
	ASSERT_EQ(ev.task_id, 0); /* the caller's event is not changed */
	ASSERT_OK(store_event_add(s, &ev, &e), &e);
	ASSERT_OK(store_output_add(s, &o, &e), &e);
	ASSERT_OK(store_merge_add(s, &m, NULL, &e), &e);
	ASSERT_OK(store_plan_add(s, "plan.md", "[]", &plan_id, &plan_v, &e),
		  &e);
	run_set(&now.status, TASK_DONE);
	ASSERT_OK(store_task_update(s, &now, NULL, &e), &e);

	/* The run's events (task_id 0 given) are found by its task. */
	ASSERT_OK(store_task_events(s, id, 0, collect_event, &l, &e), &e);
	ASSERT_EQ(l.n, 5); /* claimed, run created, requeued, claimed, run */
	events_release(&l);
	ASSERT_OK(store_event_list(s, r.id, 0, NULL, collect_event, &l, &e),
		  &e);
	ASSERT_EQ(l.n, 2);
	ASSERT_EQ(l.ev[0].task_id, id); /* the creation */
	ASSERT_EQ(l.ev[1].task_id, id); /* the update */
	events_release(&l);

	/* store_fence(s, 0, 0) lifts the fence. */
	store_fence(late, 0, 0);
	ASSERT_OK(store_run_update(late, &r, NULL, &e), &e);

	store_output_release(&o);
	merge_item_release(&m);
	event_release(&ev);
	run_release(&r);
	run_release(&r2);
	task_release(&mine);
	task_release(&now);
	store_close(late);
	store_close(s);
}

/*
 * A stale fence undoes a write its guard let through: on PostgreSQL the
 * fence is read in the round trip of the write, after the write ran
 * (pg__begin_exec), and the rollback must take the write back.
 */
TEST(fence_undoes_a_write_it_let_run)
{
	struct store *s = open_store(), *late = open_store();
	struct err e = ERR_INIT;
	struct task mine, now, by;
	int64_t id, other, version, events;

	id = add_task(s, "contested", 0, NULL, NULL);
	other = add_task(s, "bystander", 0, NULL, NULL);
	ASSERT_EQ(claim(late, "slow", &mine), id);
	set_status(s, id, TASK_QUEUED);
	ASSERT_EQ(claim(s, "fast", &now), id);
	get_task(late, other, &by);
	version = by.version;
	run_set(&by.title, "rewritten by a stale worker");
	events = count_events(s, NULL);
	store_fence(late, id, mine.lease_token);
	ASSERT_EQ(store_task_update(late, &by, NULL, &e), BATON_EFENCED);
	ASSERT_EQ(by.version, version);
	task_release(&by);

	get_task(s, other, &by);
	ASSERT_STREQ(by.title, "bystander");
	ASSERT_EQ(by.version, version);
	task_release(&by);
	ASSERT_EQ(count_events(s, NULL), events);

	task_release(&mine);
	task_release(&now);
	store_close(late);
	store_close(s);
}

/* A fence on a task that is gone fences too. */
TEST(fence_on_missing_task)
{
	struct store *s = open_store();
	struct event ev = { 0 };
	struct err e = ERR_INIT;

	add_task(s, "t", 0, NULL, NULL);
	store_fence(s, 12, 1);
	ev.type = xstrdup("steer");
	ASSERT_EQ(store_event_add(s, &ev, &e), BATON_EFENCED);
	ASSERT_CONTAINS(e.msg, "task 12");
	ASSERT_CONTAINS(e.msg, "no longer exists");
	ASSERT_EQ(count_events(s, NULL), 0);
	/* Claiming is not fenced: it is how a worker gets a lease. */
	ASSERT_EQ(claim(s, "w", NULL), 1);
	event_release(&ev);
	store_close(s);
}

/*
 * store_fence_check: what a worker asks before it acts outside the store
 * (a checkpoint push): no fence holds; the holder's token holds; a stale
 * token or a task gone does not. It writes nothing.
 */
TEST(fence_check_reads_the_lease)
{
	struct store *s = open_store(), *other = open_store();
	struct err e = ERR_INIT;
	struct task mine = { 0 }, now = { 0 };
	int64_t id;
	int events;

	id = add_task(other, "contested", 0, NULL, NULL);
	ASSERT_OK(store_fence_check(s, "push a checkpoint", &e), &e);
	ASSERT_EQ(claim(s, "slow", &mine), id);
	store_fence(s, id, mine.lease_token);
	ASSERT_OK(store_fence_check(s, "push a checkpoint", &e), &e);
	/* the lease expires, a sweep requeues, another worker claims */
	set_status(other, id, TASK_QUEUED);
	ASSERT_EQ(claim(other, "fast", &now), id);
	events = count_events(other, NULL);
	ASSERT_EQ(store_fence_check(s, "push a checkpoint", &e),
		  BATON_EFENCED);
	ASSERT_CONTAINS(e.msg, "cannot push a checkpoint: the lease on task 1 "
			       "was taken over (token 1 is stale, the task "
			       "now has 2)");
	e = (struct err)ERR_INIT;
	store_fence(s, id, now.lease_token);
	ASSERT_OK(store_fence_check(s, "push a checkpoint", &e), &e);
	store_fence(s, 12, 1);
	ASSERT_EQ(store_fence_check(s, "push a checkpoint", &e),
		  BATON_EFENCED);
	ASSERT_CONTAINS(e.msg, "task 12 (whose lease this worker holds) no "
			       "longer exists");
	ASSERT_EQ(count_events(other, NULL), events);
	task_release(&mine);
	task_release(&now);
	store_close(s);
	store_close(other);
}

#define CLAIMERS 8
#define CLAIM_TASKS 200

/* How the claimers of claim_race take and settle their tasks. */
enum claim_mode {
	ONE_AT_A_TIME,	/* store_task_claim, store_task_update */
	SETTLE_CLAIM,	/* store_task_settle_claim takes the next */
	BATCHES,	/* store_task_claim_batch, store_task_settle_batch */
	ROUNDS,		/* store_task_settle_claim_batch: a host's rounds */
};

/* Tasks per batch in BATCHES: not a divisor of CLAIM_TASKS. */
#define CLAIM_BATCH 7

/*
 * A worker process of BATCHES: claims up to CLAIM_BATCH tasks at once
 * and settles them at once until there is nothing left. In ROUNDS each
 * settle of a batch claims the next batch in its transaction.
 */
static void
batch_claimer(struct store *s, const char *holder, int who,
	      enum claim_mode mode)
{
	struct task got[CLAIM_BATCH], next[CLAIM_BATCH];
	struct store_settle v[CLAIM_BATCH];
	struct err e = ERR_INIT;
	size_t n = 0, settled, i;
	int rc = BATON_ENOTFOUND;

	if (mode == ROUNDS)
		rc = store_task_settle_claim_batch(s, v, 0, holder, HOUR_MS,
						   CLAIM_BATCH, got, &n, &e);
	for (;;) {
		if (mode == BATCHES)
			rc = store_task_claim_batch(s, holder, HOUR_MS,
						    CLAIM_BATCH, got, &n, &e);
		else if (rc == 0 && n == 0)
			rc = store_task_claim_batch(s, holder, HOUR_MS,
						    CLAIM_BATCH, got, &n, &e);
		if (rc == BATON_ENOTFOUND)
			break;
		if (rc < 0 || n == 0 || n > CLAIM_BATCH) {
			fprintf(stderr, "claimer %d: %s\n", who, e.msg);
			_exit(3);
		}
		for (i = 0; i < n; i++) {
			v[i] = (struct store_settle){ .task = &got[i],
						      .token =
							      got[i].lease_token };
			run_set(&got[i].status, TASK_DONE);
			got[i].ended_at = time_now_ms();
		}
		settled = n;
		if (mode == ROUNDS)
			rc = store_task_settle_claim_batch(s, v, settled,
							   holder, HOUR_MS,
							   CLAIM_BATCH, next,
							   &n, &e);
		else
			rc = store_task_settle_batch(s, v, settled, &e);
		for (i = 0; i < settled; i++) {
			if (rc == 0 && v[i].rc != 0) {
				fprintf(stderr, "claimer %d: task %lld: %d\n",
					who, (long long)got[i].id, v[i].rc);
				_exit(5);
			}
			task_release(&got[i]);
		}
		if (rc < 0) {
			fprintf(stderr, "claimer %d: %s\n", who, e.msg);
			_exit(4);
		}
		if (mode == ROUNDS)
			memcpy(got, next, n * sizeof(*got));
	}
}

/*
 * One worker process: its own connection, claiming and finishing tasks
 * until there is nothing left. Exits 0 when all went well.
 */
static void
claimer(int who, enum claim_mode mode)
{
	char *path = queue_store_spec();
	char holder[32];
	struct err e = ERR_INIT;
	struct store *s = NULL;
	struct task next = { 0 };
	int rc;

	snprintf(holder, sizeof(holder), "w%d", who);
	if (store_open(path, &s, &e) < 0) {
		fprintf(stderr, "claimer %d: %s\n", who, e.msg);
		_exit(2);
	}
	if (mode == BATCHES || mode == ROUNDS)
		batch_claimer(s, holder, who, mode);
	while (mode != BATCHES && mode != ROUNDS) {
		struct task t = { 0 };

		if (next.id) { /* the last settle claimed it */
			t = next;
			memset(&next, 0, sizeof(next));
			rc = 0;
		} else {
			rc = store_task_claim(s, holder, HOUR_MS, &t, &e);
		}
		if (rc == BATON_ENOTFOUND)
			break;
		if (rc < 0) {
			fprintf(stderr, "claimer %d: %s\n", who, e.msg);
			_exit(3);
		}
		store_fence(s, t.id, t.lease_token);
		run_set(&t.status, TASK_DONE);
		t.ended_at = time_now_ms();
		if (mode == SETTLE_CLAIM)
			rc = store_task_settle_claim(s, &t, NULL, holder,
						     HOUR_MS, &next, &e);
		else
			rc = store_task_update(s, &t, NULL, &e);
		store_fence(s, 0, 0);
		task_release(&t);
		if (rc < 0) {
			fprintf(stderr, "claimer %d: %s\n", who, e.msg);
			_exit(4);
		}
	}
	store_close(s);
	free(path);
	_exit(0);
}

/*
 * Many processes claiming at once, each in mode: each task exactly
 * once, each token once, each settle once.
 */
static void
claim_race(enum claim_mode mode)
{
	static const char *const done[] = { TASK_DONE };
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct events l = { 0 };
	pid_t pids[CLAIMERS];
	int claims[CLAIM_TASKS + 1] = { 0 };
	int64_t ndone = 0;
	int i, status;

	for (i = 0; i < CLAIM_TASKS; i++)
		add_task(s, "race", i % 3, NULL, NULL);
	fflush(NULL);
	for (i = 0; i < CLAIMERS; i++) {
		pids[i] = fork();
		ASSERT(pids[i] >= 0);
		if (pids[i] == 0)
			claimer(i, mode); /* never returns */
	}
	for (i = 0; i < CLAIMERS; i++) {
		ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
		ASSERT(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
	}

	ASSERT_OK(store_event_list(s, NULL, 0, "task_claimed", collect_event,
				   &l, &e),
		  &e);
	ASSERT_EQ(l.n, CLAIM_TASKS);
	for (i = 0; i < l.n; i++) {
		ASSERT(l.ev[i].task_id >= 1 && l.ev[i].task_id <= CLAIM_TASKS);
		claims[l.ev[i].task_id]++;
	}
	for (i = 1; i <= CLAIM_TASKS; i++)
		ASSERT_EQ(claims[i], 1);
	events_release(&l);
	ASSERT_OK(store_task_counts(s, done, &ndone, 1, &e), &e);
	ASSERT_EQ(ndone, CLAIM_TASKS);
	/* No token was drawn twice. */
	ASSERT_EQ(raw_count("SELECT COUNT(DISTINCT lease_token) FROM tasks"),
		  CLAIM_TASKS);
	ASSERT_EQ(raw_count("SELECT MAX(lease_token) FROM tasks"), CLAIM_TASKS);
	/* every task settled once: one done event each, none lost */
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE version <> 3"),
		  0);
	store_close(s);
}

TEST(claim_concurrent_processes)
{
	claim_race(ONE_AT_A_TIME);
}

/* The same with settle-and-claim-next: still each task exactly once. */
TEST(settle_claim_concurrent_processes)
{
	claim_race(SETTLE_CLAIM);
}

/* The same a batch at a time: still each task exactly once. */
TEST(claim_batch_concurrent_processes)
{
	claim_race(BATCHES);
}

/* The same a host's round at a time: settles and claims together. */
TEST(settle_claim_batch_concurrent_processes)
{
	claim_race(ROUNDS);
}

/*
 * A batch of claims keeps the claim's rules: priority order, no two
 * overlapping areas (in the batch or with a running task), nothing
 * whose dependencies are not done; it stops at max and says "nothing
 * to claim" when nothing is left.
 */
TEST(claim_batch_rules)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct task got[8], busy;
	int64_t ia, iab, ic, ifree, idep, dep[2] = { 0 }, ibusy;
	size_t n = 99, i;

	ibusy = add_task(s, "busy", 9, "lib", NULL);
	ASSERT_EQ(claim(s, "other", &busy), ibusy);
	ia = add_task(s, "a", 5, "src", NULL);
	iab = add_task(s, "a/b", 4, "src/b", NULL);
	ic = add_task(s, "c", 3, "doc", NULL);
	add_task(s, "under busy", 3, "lib/x", NULL);
	ifree = add_task(s, "free", 2, NULL, NULL);
	dep[0] = ifree;
	idep = add_task(s, "after free", 8, NULL, dep);
	add_task(s, "last", 0, NULL, NULL);

	ASSERT_OK(store_task_claim_batch(s, "w", HOUR_MS, 3, got, &n, &e),
		  &e);
	ASSERT_EQ(n, 3);
	ASSERT_EQ(got[0].id, ia);
	ASSERT_EQ(got[1].id, ic);
	ASSERT_EQ(got[2].id, ifree);
	for (i = 0; i < n; i++) {
		ASSERT_STREQ(got[i].status, TASK_RUNNING);
		ASSERT_STREQ(got[i].lease_holder, "w");
		ASSERT(got[i].lease_token > busy.lease_token);
		ASSERT(i == 0 || got[i].lease_token > got[i - 1].lease_token);
		task_release(&got[i]);
	}
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM events"
			    " WHERE type = 'task_claimed'"),
		  4);
	/* left: a/b and "under busy" (areas), after-free (its dep), last */
	ASSERT_OK(store_task_claim_batch(s, "w", HOUR_MS, 8, got, &n, &e),
		  &e);
	ASSERT_EQ(n, 1);
	ASSERT(got[0].id != iab && got[0].id != idep);
	ASSERT_STREQ(got[0].title, "last");
	task_release(&got[0]);
	ASSERT_EQ(store_task_claim_batch(s, "w", HOUR_MS, 8, got, &n, &e),
		  BATON_ENOTFOUND);
	ASSERT_EQ(n, 0);
	ASSERT_EQ(store_task_claim_batch(s, "w", HOUR_MS, 0, got, &n, &e),
		  BATON_EINVAL);
	task_release(&busy);
	store_close(s);
}

/*
 * A batch is the claim order, tasks with areas between tasks without
 * included, with tokens and task_claimed events increasing in that
 * order, and stops at its max.
 */
TEST(claim_batch_keeps_order_across_areas)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct task got[8];
	int64_t want[6];
	size_t n = 0, i;

	want[0] = add_task(s, "first", 9, NULL, NULL);
	want[1] = add_task(s, "second", 8, NULL, NULL);
	want[2] = add_task(s, "in src", 7, "src", NULL);
	want[3] = add_task(s, "third", 6, NULL, NULL);
	add_task(s, "under src", 5, "src/x", NULL);
	want[4] = add_task(s, "in doc", 4, "doc", NULL);
	want[5] = add_task(s, "fourth", 3, NULL, NULL);
	add_task(s, "beyond the batch", 2, NULL, NULL);

	ASSERT_OK(store_task_claim_batch(s, "w", HOUR_MS, 6, got, &n, &e),
		  &e);
	ASSERT_EQ(n, 6);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(got[i].id, want[i]);
		ASSERT_EQ(got[i].attempts, 1);
		ASSERT(i == 0 || got[i].lease_token > got[i - 1].lease_token);
		task_release(&got[i]);
	}
	/* the events in claim order, one each */
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM events AS a"
			    " JOIN events AS b ON b.type = a.type"
			    " AND b.seq > a.seq JOIN tasks AS ta"
			    " ON ta.id = a.task_id JOIN tasks AS tb"
			    " ON tb.id = b.task_id"
			    " WHERE a.type = 'task_claimed'"
			    " AND ta.lease_token > tb.lease_token"),
		  0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM events"
			    " WHERE type = 'task_claimed'"),
		  6);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"
			    " WHERE status = 'queued'"),
		  2);
	store_close(s);
}

/*
 * A batch of settles: each row fenced by its own token. A task whose
 * lease was taken over is refused with BATON_EFENCED and written
 * nothing, a stale version is BATON_ECONFLICT, a status that does not
 * exist is BATON_EINVAL, and the others commit with their events.
 */
TEST(settle_batch_fences_each)
{
	struct store *s = open_store(), *late = open_store();
	struct err e = ERR_INIT;
	struct task got[4], again, stale;
	struct event ev[4];
	struct store_settle v[4];
	char type[] = "task_done";
	size_t n = 0, i;

	for (i = 0; i < 4; i++)
		add_task(s, "batch", 0, NULL, NULL);
	ASSERT_OK(store_task_claim_batch(late, "slow", HOUR_MS, 4, got, &n,
					 &e),
		  &e);
	ASSERT_EQ(n, 4);
	/* got[1]'s lease expires and another worker takes it */
	set_status(s, got[1].id, TASK_QUEUED);
	ASSERT_EQ(claim(s, "fast", &again), got[1].id);
	/* got[2] was changed by someone else since it was read */
	get_task(s, got[2].id, &stale);
	stale.priority = 7;
	ASSERT_OK(store_task_update(s, &stale, NULL, &e), &e);
	for (i = 0; i < 4; i++) {
		ev[i] = (struct event){ .type = type };
		v[i] = (struct store_settle){ .task = &got[i], .ev = &ev[i],
					      .token = got[i].lease_token };
		run_set(&got[i].status, i == 3 ? "nonsense" : TASK_DONE);
	}
	ASSERT_OK(store_task_settle_batch(late, v, 4, &e), &e);
	ASSERT_EQ(v[0].rc, 0);
	ASSERT_EQ(v[1].rc, BATON_EFENCED);
	ASSERT_EQ(v[2].rc, BATON_ECONFLICT);
	ASSERT_EQ(v[3].rc, BATON_EINVAL);
	ASSERT(ev[0].seq > 0);
	ASSERT_EQ(ev[1].seq, 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE status = 'done'"),
		  1);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM events"
			    " WHERE type = 'task_done'"),
		  1);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE id = 2"
			    " AND status = 'running' AND lease_holder = 'fast'"),
		  1);
	/* an empty batch writes nothing and is no error */
	ASSERT_OK(store_task_settle_batch(late, v, 0, &e), &e);
	for (i = 0; i < 4; i++)
		task_release(&got[i]);
	task_release(&again);
	task_release(&stale);
	store_close(late);
	store_close(s);
}

/*
 * A batch's events are written as given, each with its own ts, from, to
 * and data (quotes, backslashes, braces, commas, NULL), in the batch's
 * order, and each event handed back has the seq it was written with;
 * a settle without an event or a refused one takes no seq.
 */
TEST(settle_batch_events_as_given)
{
	static const char *const datas[4] = {
		"{\"says\":\"a \\\"quote\\\", a \\\\ and {braces}, commas\"}",
		NULL, "NULL", "{\"é\":\"\\u2603 ☃\"}"
	};
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct task got[4], stale;
	struct event ev[4];
	struct store_settle v[4];
	struct events l = { 0 };
	size_t n = 0, i;

	for (i = 0; i < 4; i++)
		add_task(s, "batch", 0, NULL, NULL);
	ASSERT_OK(store_task_claim_batch(s, "w", HOUR_MS, 4, got, &n, &e), &e);
	ASSERT_EQ(n, 4);
	/* got[2] was changed by someone else since it was read */
	get_task(s, got[2].id, &stale);
	stale.priority = 7;
	ASSERT_OK(store_task_update(s, &stale, NULL, &e), &e);
	for (i = 0; i < 4; i++) {
		ev[i] = (struct event){ .type = (char *)"transition",
					.from = (char *)TASK_RUNNING,
					.to = (char *)TASK_DONE,
					.ts = i == 3 ? 12345 : 0,
					.data = (char *)datas[i] };
		v[i] = (struct store_settle){ .task = &got[i],
					      .ev = i == 1 ? NULL : &ev[i],
					      .token = got[i].lease_token };
		run_set(&got[i].status, TASK_DONE);
	}
	ASSERT_OK(store_task_settle_batch(s, v, 4, &e), &e);
	ASSERT_EQ(v[0].rc, 0);
	ASSERT_EQ(v[1].rc, 0);
	ASSERT_EQ(v[2].rc, BATON_ECONFLICT);
	ASSERT_EQ(v[3].rc, 0);
	ASSERT(ev[0].seq > 0);
	ASSERT_EQ(ev[2].seq, 0);
	ASSERT(ev[3].seq > ev[0].seq);
	ASSERT_EQ(ev[3].ts, 12345);
	for (i = 0; i < 4; i++) {
		if (i == 1 || i == 2) {
			ASSERT_OK(store_task_events(s, got[i].id, 0,
						    collect_event, &l, &e),
				  &e);
			ASSERT_EQ(l.n, 1); /* task_claimed alone */
			events_release(&l);
			continue;
		}
		ASSERT_OK(store_task_events(s, got[i].id, 0, collect_event,
					    &l, &e),
			  &e);
		ASSERT_EQ(l.n, 2);
		ASSERT_STREQ(l.ev[1].type, "transition");
		ASSERT_STREQ(l.ev[1].from, TASK_RUNNING);
		ASSERT_STREQ(l.ev[1].to, TASK_DONE);
		ASSERT_STREQ(l.ev[1].data, datas[i]);
		ASSERT_EQ(l.ev[1].task_id, got[i].id);
		ASSERT(l.ev[1].run_id == NULL);
		ASSERT_EQ(l.ev[1].seq, ev[i].seq);
		ASSERT_EQ(l.ev[1].ts, ev[i].ts);
		events_release(&l);
	}
	for (i = 0; i < 4; i++)
		task_release(&got[i]);
	task_release(&stale);
	store_close(s);
}

/*
 * A batch writes each row as given, every kind of field: text with
 * quotes, backslashes, braces, commas, the word NULL, an empty string
 * and NULL; numbers, negative and large; an id and no id. The same task
 * twice in one batch is settled once: the second is a lost update.
 */
TEST(settle_batch_rows_as_given)
{
	static const char *const title =
		"a \"quote\", a \\ and {braces}, commas, \xc3\xa9";
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct task got[2], twice, back;
	struct store_settle v[3];
	size_t n = 0;

	add_task(s, "batch", 0, NULL, NULL);
	add_task(s, "batch", 0, NULL, NULL);
	ASSERT_OK(store_task_claim_batch(s, "w", HOUR_MS, 2, got, &n, &e), &e);
	ASSERT_EQ(n, 2);
	run_set(&got[0].status, TASK_BLOCKED);
	run_set(&got[0].title, title);
	run_set(&got[0].body, "NULL");
	run_set(&got[0].reason, "");
	run_set(&got[0].block_reason, NULL);
	run_set(&got[0].area, "src/{x}");
	got[0].priority = -3;
	got[0].not_before = INT64_C(9007199254740993);
	got[0].plan_id = got[1].id;
	got[0].parent_id = 0;
	twice = got[1];
	run_set(&got[1].status, TASK_DONE);
	v[0] = (struct store_settle){ .task = &got[0],
				      .token = got[0].lease_token };
	v[1] = (struct store_settle){ .task = &got[1],
				      .token = got[1].lease_token };
	v[2] = (struct store_settle){ .task = &twice,
				      .token = got[1].lease_token };
	twice.status = (char *)TASK_FAILED;
	ASSERT_OK(store_task_settle_batch(s, v, 3, &e), &e);
	ASSERT_EQ(v[0].rc, 0);
	ASSERT_EQ(v[1].rc + v[2].rc, BATON_ECONFLICT);
	get_task(s, got[0].id, &back);
	ASSERT_STREQ(back.status, TASK_BLOCKED);
	ASSERT_STREQ(back.title, title);
	ASSERT_STREQ(back.body, "NULL");
	ASSERT_STREQ(back.reason, "");
	ASSERT(back.block_reason == NULL);
	ASSERT_STREQ(back.area, "src/{x}");
	ASSERT_EQ(back.priority, -3);
	ASSERT_EQ(back.not_before, INT64_C(9007199254740993));
	ASSERT_EQ(back.plan_id, got[1].id);
	ASSERT_EQ(back.parent_id, 0);
	ASSERT_EQ(back.version, got[0].version);
	ASSERT_STREQ(back.lease_holder, "w");
	task_release(&back);
	get_task(s, got[1].id, &back);
	ASSERT_STREQ(back.status, v[1].rc ? TASK_FAILED : TASK_DONE);
	task_release(&back);
	task_release(&got[0]);
	task_release(&got[1]);
	store_close(s);
}

/*
 * A host's round (store_task_settle_claim_batch): the settles are
 * fenced each as in a batch, a refused one takes nothing from the
 * others, and the claims after them see the tasks they settled (a
 * dependent of a task settled in the round is claimable in it). No
 * settles is a claim alone, a max of 0 a settle alone.
 */
TEST(settle_claim_batch_round)
{
	struct store *s = open_store(), *host = open_store();
	struct err e = ERR_INIT;
	struct task got[3], next[4], again;
	struct store_settle v[3];
	int64_t first, dep[2] = { 0 }, after;
	size_t n = 0, i;

	first = add_task(s, "first", 9, NULL, NULL);
	dep[0] = first;
	add_task(s, "second", 8, NULL, NULL);
	add_task(s, "third", 7, NULL, NULL);
	after = add_task(s, "after first", 0, NULL, dep);
	/* no settles: a claim alone */
	ASSERT_OK(store_task_settle_claim_batch(host, v, 0, "host", HOUR_MS, 3,
						got, &n, &e),
		  &e);
	ASSERT_EQ(n, 3);
	ASSERT_EQ(got[0].id, first);
	/* got[1]'s lease is taken over */
	set_status(s, got[1].id, TASK_QUEUED);
	ASSERT_EQ(claim(s, "other", &again), got[1].id);
	for (i = 0; i < 3; i++) {
		v[i] = (struct store_settle){ .task = &got[i],
					      .token = got[i].lease_token };
		run_set(&got[i].status, TASK_DONE);
	}
	ASSERT_OK(store_task_settle_claim_batch(host, v, 3, "host", HOUR_MS, 4,
						next, &n, &e),
		  &e);
	ASSERT_EQ(v[0].rc, 0);
	ASSERT_EQ(v[1].rc, BATON_EFENCED);
	ASSERT_EQ(v[2].rc, 0);
	/* the dependent of the task settled in this round */
	ASSERT_EQ(n, 1);
	ASSERT_EQ(next[0].id, after);
	ASSERT_STREQ(next[0].lease_holder, "host");
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE status = 'done'"),
		  2);
	/* a max of 0: the settle alone */
	v[0] = (struct store_settle){ .task = &next[0],
				      .token = next[0].lease_token };
	run_set(&next[0].status, TASK_DONE);
	ASSERT_OK(store_task_settle_claim_batch(host, v, 1, NULL, 0, 0, NULL,
						&n, &e),
		  &e);
	ASSERT_EQ(v[0].rc, 0);
	ASSERT_EQ(n, 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE status = 'done'"),
		  3);
	/* nothing claimable: no error, nothing claimed */
	ASSERT_OK(store_task_settle_claim_batch(host, v, 0, "host", HOUR_MS, 3,
						next + 1, &n, &e),
		  &e);
	ASSERT_EQ(n, 0);
	ASSERT_EQ(store_task_settle_claim_batch(host, v, 0, "", HOUR_MS, 3,
						next + 1, &n, &e),
		  BATON_EINVAL);
	for (i = 0; i < 3; i++)
		task_release(&got[i]);
	task_release(&next[0]);
	task_release(&again);
	store_close(host);
	store_close(s);
}

/*
 * A host's round whose settles fail as a whole (an event names a run
 * not on record) claims nothing either: on PostgreSQL the claims go in
 * the message of the settles, and must not commit without them.
 */
TEST(settle_claim_batch_failed_settles_claim_nothing)
{
	static const char *const queued[] = { TASK_QUEUED };
	struct store *s = open_store(), *host = open_store();
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	struct task got, next[2];
	struct store_settle v;
	int64_t left = 0, events;
	size_t n = 0;

	add_task(s, "first", 1, NULL, NULL);
	add_task(s, "waiting", 0, NULL, NULL);
	ASSERT_OK(store_task_settle_claim_batch(host, &v, 0, "host", HOUR_MS,
						1, &got, &n, &e),
		  &e);
	ASSERT_EQ(n, 1);
	events = count_events(s, NULL);
	run_set(&got.status, TASK_DONE);
	ev.type = xstrdup("task_settled");
	ev.run_id = xstrdup("r-not-on-record");
	v = (struct store_settle){ .task = &got, .token = got.lease_token,
				   .ev = &ev };
	ASSERT_EQ(store_task_settle_claim_batch(host, &v, 1, "host", HOUR_MS,
						2, next, &n, &e),
		  BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "run");
	ASSERT_EQ(n, 0);
	ASSERT_OK(store_task_counts(s, queued, &left, 1, &e), &e);
	ASSERT_EQ(left, 1);
	ASSERT_EQ(count_events(s, NULL), events);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE status = 'done'"),
		  0);
	event_release(&ev);
	task_release(&got);
	store_close(host);
	store_close(s);
}

/*
 * store_task_settle_claim settles and takes the next task by the
 * claim's rules; with nothing left it settles and claims nothing; a
 * stale holder (fenced with a token taken over) is refused and neither
 * settles nor claims.
 */
TEST(settle_claim_next_and_fence)
{
	static const char *const queued[] = { TASK_QUEUED };
	struct store *s = open_store(), *late = open_store();
	struct err e = ERR_INIT;
	struct task a, b, again, next = { 0 }, stale;
	int64_t ia, ib, ic, left = 0;

	ia = add_task(s, "first", 2, NULL, NULL);
	ib = add_task(s, "second", 1, NULL, NULL);
	ASSERT_EQ(claim(s, "w", &a), ia);
	store_fence(s, a.id, a.lease_token);
	run_set(&a.status, TASK_DONE);
	ASSERT_OK(store_task_settle_claim(s, &a, NULL, "w", HOUR_MS, &next,
					  &e),
		  &e);
	store_fence(s, 0, 0);
	ASSERT_EQ(next.id, ib);
	ASSERT_STREQ(next.status, TASK_RUNNING);
	ASSERT_STREQ(next.lease_holder, "w");
	ASSERT(next.lease_token > a.lease_token);
	ASSERT_EQ(next.attempts, 1);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE id = 1"
			    " AND status = 'done'"),
		  1);
	b = next;
	memset(&next, 0, sizeof(next));

	/* nothing left: settled, nothing claimed, not an error */
	store_fence(s, b.id, b.lease_token);
	run_set(&b.status, TASK_DONE);
	ASSERT_OK(store_task_settle_claim(s, &b, NULL, "w", HOUR_MS, &next,
					  &e),
		  &e);
	store_fence(s, 0, 0);
	ASSERT_EQ(next.id, 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE status = 'done'"),
		  2);

	/* a stale holder: its lease was taken over */
	ic = add_task(s, "contested", 0, NULL, NULL);
	add_task(s, "bystander", 0, NULL, NULL);
	ASSERT_EQ(claim(late, "slow", &stale), ic);
	set_status(s, ic, TASK_QUEUED);
	ASSERT_EQ(claim(s, "fast", &again), ic);
	store_fence(late, ic, stale.lease_token);
	run_set(&stale.status, TASK_DONE);
	ASSERT_EQ(store_task_settle_claim(late, &stale, NULL, "slow", HOUR_MS,
					  &next, &e),
		  BATON_EFENCED);
	store_fence(late, 0, 0);
	ASSERT_EQ(next.id, 0);
	ASSERT_OK(store_task_counts(s, queued, &left, 1, &e), &e);
	ASSERT_EQ(left, 1); /* the bystander was not taken */
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE id = 3"
			    " AND status = 'running' AND lease_holder = 'fast'"),
		  1);
	task_release(&a);
	task_release(&b);
	task_release(&again);
	task_release(&stale);
	store_close(late);
	store_close(s);
}

/*
 * A settle-and-claim whose settle lost its row (written first by
 * another) claims nothing either: on PostgreSQL the claim runs in the
 * message of the settle, and the rollback must take it back.
 */
TEST(settle_claim_lost_row_claims_nothing)
{
	static const char *const queued[] = { TASK_QUEUED };
	struct store *s = open_store(), *other = open_store();
	struct err e = ERR_INIT;
	struct task mine, theirs, next = { 0 };
	int64_t id, left = 0, events;

	id = add_task(s, "contested", 1, NULL, NULL);
	add_task(s, "bystander", 0, NULL, NULL);
	ASSERT_EQ(claim(s, "w", &mine), id);
	get_task(other, id, &theirs);
	run_set(&theirs.title, "written first");
	ASSERT_OK(store_task_update(other, &theirs, NULL, &e), &e);
	events = count_events(s, NULL);

	run_set(&mine.status, TASK_DONE);
	ASSERT_EQ(store_task_settle_claim(s, &mine, NULL, "w", HOUR_MS, &next,
					  &e),
		  BATON_ECONFLICT);
	ASSERT_EQ(next.id, 0);
	ASSERT_OK(store_task_counts(s, queued, &left, 1, &e), &e);
	ASSERT_EQ(left, 1);
	ASSERT_EQ(count_events(s, NULL), events);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks WHERE status = 'done'"),
		  0);
	task_release(&mine);
	task_release(&theirs);
	store_close(other);
	store_close(s);
}

/* ---- a connection cut after a COMMIT is sent (pg__exec_commit) --------- */

/*
 * A TCP proxy between a store and the PostgreSQL server, one
 * connection at a time, that relays bytes until armed. Armed with
 * CUT_REPLY, it passes on the next message of the client that runs
 * statements (the store's writes send BEGIN to COMMIT as one, and its
 * COMMIT is a prepared statement: that message is the first with an
 * Execute), swallows the server's whole answer (up to its
 * ReadyForQuery) and closes both ends: the server committed, the client
 * heard nothing. Armed with CUT_REQUEST, it drops that message and
 * closes: the server never saw it. Armed with CUT_PART, it passes on
 * the answer up to its keep-th CommandComplete and the message after
 * it (the next statement's BindComplete), then closes: the client heard
 * the first statements and half of the next. Armed with CUT_SENT, it
 * passes on that message and closes at once: the server runs it for a
 * client that is gone, and learns so only when it answers. Each time it
 * runs on_cut (if set) before closing, and then relays the client's
 * next connection as before. Apart from cutting, it runs on_seen (if
 * set) once, when the client has run seen_times times (at least once)
 * the statement it prepared whose text holds seen. With
 * pooled set it stands for a pooler such as PgBouncer, which hands each
 * client a process number of its own: it replaces the server's in the
 * BackendKeyData of every connection.
 */
enum { CUT_NONE, CUT_REPLY, CUT_REQUEST, CUT_PART, CUT_SENT };

struct cut_proxy {
	int lfd, port, server_port;
	int armed;	/* CUT_*: what to do with the next Execute */
	int cuts;	/* connections cut so far */
	int keep;	/* CUT_PART: CommandCompletes passed on */
	void (*on_cut)(void);
	const char *seen;
	int seen_times;
	char seen_name[64]; /* the name it prepared seen's statement as */
	void (*on_seen)(void);
	int pooled;
	int counting;	/* set: count the client's round trips in trips */
	int trips;	/* its Syncs and simple Queries while counting */
	int stop[2];
	pthread_t thread;
};

static int
tcp_connect_local(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * How many of the client's messages in its bytes p are of one of the
 * types (a type byte, then a length that counts itself), walking on
 * from *at as part_cut does: libpq writes a message in one piece, and
 * the walk starts between two requests, so at a message's start.
 */
static int
count_msgs(const char *p, size_t n, size_t *at, const char *types)
{
	size_t i = *at;
	uint32_t len;
	int count = 0;

	while (i + 5 <= n) {
		memcpy(&len, p + i + 1, 4);
		count += p[i] && strchr(types, p[i]);
		i += 1 + ntohl(len);
	}
	*at = i - n;
	return count;
}

/* Whether the client's bytes p (whole messages) hold an Execute. */
static int
holds_execute(const char *p, size_t n)
{
	size_t at = 0;

	return count_msgs(p, n, &at, "E") > 0;
}

/*
 * The round trips the client's bytes p open: its Syncs (an
 * extended-protocol message, a pipeline's too, ends in one) and simple
 * Queries.
 */
static int
trips_in(const char *p, size_t n, size_t *at)
{
	return count_msgs(p, n, at, "SQ");
}

/*
 * Where CUT_PART cuts the server's bytes p: after x->keep CommandCompletes
 * ('C') and the message that follows (counting on from *at, an offset
 * into p: where the next message starts, carried from the last read).
 * The length to pass on, or -1 when the cut is not in p.
 */
static ssize_t
part_cut(struct cut_proxy *x, const char *p, size_t n, size_t *at,
	 int *seen)
{
	size_t i = *at;
	uint32_t len;

	while (i + 5 <= n) {
		memcpy(&len, p + i + 1, 4);
		len = ntohl(len);
		if (*seen == x->keep)
			return i + 1 + len <= n ? (ssize_t)(i + 1 + len) : -1;
		if (p[i] == 'C')
			(*seen)++;
		i += 1 + len;
	}
	*at = i - n; /* the header never straddles in these tests */
	return -1;
}

/* The server's answer ends in ReadyForQuery: 'Z', length 5, a status. */
static int
ends_ready(const char *p, size_t n)
{
	return n >= 6 && !memcmp(p + n - 6, "Z\0\0\0\5", 5);
}

/*
 * Walks the client's messages in p (whole ones, as holds_execute
 * does): learns the name of the prepared statement whose text holds
 * x->seen (a Parse: 'P', length, name, text), and counts down
 * x->seen_times for each Bind of it ('B', length, portal, name).
 * Whether one was counted.
 */
static int
statement_runs(struct cut_proxy *x, const char *p, size_t n)
{
	size_t i = 0;
	uint32_t len;
	int ran = 0;

	while (i + 5 <= n) {
		const char *body = p + i + 5;

		memcpy(&len, p + i + 1, 4);
		len = ntohl(len);
		if (i + 1 + len > n || len < 5)
			break;
		if (p[i] == 'P' && memmem(body, len - 4, x->seen,
					  strlen(x->seen)))
			snprintf(x->seen_name, sizeof(x->seen_name), "%.*s",
				 (int)sizeof(x->seen_name) - 1, body);
		if (p[i] == 'B' && x->seen_name[0] &&
		    !strcmp(body + strlen(body) + 1, x->seen_name)) {
			x->seen_times--;
			ran = 1;
		}
		i += 1 + len;
	}
	return ran;
}

/*
 * Replaces the process number of the BackendKeyData in the server's
 * bytes p ('K', length 12, the number, the secret) by 1, a process no
 * session has. Whether it was there.
 */
static int
fake_backend_key(char *p, size_t n)
{
	static const char head[] = "K\0\0\0\014";
	char *k = memmem(p, n, head, sizeof(head) - 1);
	uint32_t one = htonl(1);

	if (!k || (size_t)(k - p) + 9 > n)
		return 0;
	memcpy(k + 5, &one, 4);
	return 1;
}

/* Relays one client connection c to the server until either side ends. */
static void
cut_proxy_relay(struct cut_proxy *x, int c)
{
	int sv = tcp_connect_local(x->server_port), swallow = 0, part = 0;
	int seen = 0, counting = 0, keyed = !x->pooled, ready = 0;
	size_t at = 0, cat = 0;
	char buf[65536];

	while (sv >= 0) {
		struct pollfd p[3] = { { c, POLLIN, 0 }, { sv, POLLIN, 0 },
				       { x->stop[0], POLLIN, 0 } };
		ssize_t n;

		if (poll(p, 3, -1) < 0 || p[2].revents)
			break;
		if (p[0].revents) {
			n = read(c, buf, sizeof(buf));
			if (n <= 0)
				break;
			if (!counting)
				cat = 0;
			counting = __atomic_load_n(&x->counting,
						   __ATOMIC_SEQ_CST);
			/* not the SSLRequest and startup packets before the
			 * first ReadyForQuery: they have no type byte */
			if (counting && ready)
				__atomic_add_fetch(&x->trips,
						   trips_in(buf, (size_t)n,
							    &cat),
						   __ATOMIC_SEQ_CST);
			if (x->seen && statement_runs(x, buf, (size_t)n) &&
			    x->seen_times <= 0) {
				x->seen = NULL;
				x->on_seen();
			}
			if (x->armed && holds_execute(buf, (size_t)n)) {
				if (x->armed == CUT_REQUEST)
					goto cut;
				if (x->armed == CUT_SENT) {
					write_all(sv, buf, (size_t)n);
					goto cut;
				}
				swallow = x->armed == CUT_REPLY;
				part = x->armed == CUT_PART;
			}
			if (write_all(sv, buf, (size_t)n) < 0)
				break;
		}
		if (p[1].revents) {
			n = read(sv, buf, sizeof(buf));
			if (n <= 0)
				break;
			if (!keyed)
				keyed = fake_backend_key(buf, (size_t)n);
			/* the startup's answer ends in ReadyForQuery */
			if (!ready && n >= 6 && buf[n - 6] == 'Z')
				ready = 1;
			if (swallow) {
				if (ends_ready(buf, (size_t)n))
					goto cut;
				continue;
			}
			if (part) {
				ssize_t m = part_cut(x, buf, (size_t)n, &at,
						     &seen);

				if (m >= 0) {
					write_all(c, buf, (size_t)m);
					goto cut;
				}
			}
			if (write_all(c, buf, (size_t)n) < 0)
				break;
		}
	}
	goto out;
cut:
	x->armed = CUT_NONE;
	if (x->on_cut)
		x->on_cut();
	__atomic_add_fetch(&x->cuts, 1, __ATOMIC_SEQ_CST);
out:
	if (sv >= 0)
		close(sv);
	close(c);
}

static void *
cut_proxy_main(void *arg)
{
	struct cut_proxy *x = arg;

	for (;;) {
		struct pollfd p[2] = { { x->lfd, POLLIN, 0 },
				       { x->stop[0], POLLIN, 0 } };
		int c;

		if (poll(p, 2, -1) < 0 || p[1].revents)
			return NULL;
		c = accept4(x->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0)
			cut_proxy_relay(x, c);
	}
}

/* The port of the test's DSN (postgres://user@host:port/db, tools/pg.sh). */
static int
url_port(const char *url)
{
	const char *at = strrchr(url, '@');
	const char *colon = strchr(at ? at : url, ':');

	if (!at || !colon)
		test_fail(__FILE__, __LINE__, "no port in '%s'", url);
	return (int)strtol(colon + 1, NULL, 10);
}

/*
 * Starts x in front of the test's server; *url gets the DSN through it
 * (the caller's to free).
 */
static void
cut_proxy_start(struct cut_proxy *x, char **url)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	x->server_port = url_port(pg_dsn());
	x->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT(x->lfd >= 0);
	ASSERT_EQ(bind(x->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ASSERT_EQ(listen(x->lfd, 8), 0);
	ASSERT_EQ(getsockname(x->lfd, (struct sockaddr *)&a, &len), 0);
	x->port = ntohs(a.sin_port);
	ASSERT_EQ(pipe(x->stop), 0);
	ASSERT_EQ(pthread_create(&x->thread, NULL, cut_proxy_main, x), 0);
	*url = xasprintf("%s%sport=%d", pg_dsn(),
			 strchr(pg_dsn(), '?') ? "&" : "?", x->port);
}

static void
cut_proxy_stop(struct cut_proxy *x)
{
	ASSERT_EQ(write(x->stop[1], "", 1), 1);
	pthread_join(x->thread, NULL);
	close(x->stop[0]);
	close(x->stop[1]);
	close(x->lfd);
}

/* A handle on the test's database through x, wiped as open_store's. */
static struct store *
open_store_via(struct cut_proxy *x)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char *url;

	store_close(open_store());
	cut_proxy_start(x, &url);
	ASSERT_OK(store_open(url, &s, &e), &e);
	free(url);
	return s;
}

/*
 * A settle and the next claim whose message's answer the proxy cuts
 * (how, keep: see struct cut_proxy): the store lands it once, and hands
 * back the task the lost message claimed and the seq of its event.
 */
static void
settle_claim_cut_lands_once(int how, int keep)
{
	struct cut_proxy x = { .keep = keep };
	struct store *s, *direct;
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	struct task mine, next = { 0 }, after;
	int64_t id, other;

	direct = open_store();
	s = open_store_via(&x);
	id = add_task(s, "settled unheard", 1, NULL, NULL);
	other = add_task(s, "claimed unheard", 0, NULL, NULL);
	ASSERT_EQ(claim(s, "w", &mine), id);

	x.armed = how;
	run_set(&mine.status, TASK_DONE);
	ev.type = xstrdup("task_settled");
	ASSERT_OK(store_task_settle_claim(s, &mine, &ev, "w", HOUR_MS, &next,
					  &e),
		  &e);
	ASSERT_EQ(x.cuts, 1);
	ASSERT_EQ(next.id, other);
	ASSERT_STREQ(next.status, TASK_RUNNING);
	ASSERT_STREQ(next.lease_holder, "w");
	ASSERT_EQ(next.attempts, 1);
	get_task(direct, id, &after);
	ASSERT_STREQ(after.status, TASK_DONE);
	ASSERT_EQ(after.version, mine.version);
	ASSERT_EQ(count_events(direct, "task_settled"), 1);
	ASSERT_EQ(count_events(direct, "task_claimed"), 2);
	ASSERT(ev.seq > 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM events"
			    " WHERE type = 'task_settled' AND seq = (SELECT"
			    " MAX(seq) FROM events WHERE type = 'task_settled')"),
		  1);
	task_release(&after);
	task_release(&next);
	task_release(&mine);
	event_release(&ev);
	store_close(s);
	cut_proxy_stop(&x);
	store_close(direct);
}

/*
 * The connection dies once the message of a settle and the next claim
 * is sent, with nothing heard back: the store cannot know whether it
 * committed (the xid never came). Cut after the server committed, the
 * retry finds the row as the settle wrote it and takes that as done:
 * one settle, one claim, and the caller gets the task the lost message
 * claimed and the seq of the event it wrote.
 */
TEST(settle_claim_reply_lost_lands_once)
{
	if (pg_dsn()) /* SQLite has no connection to lose */
		settle_claim_cut_lands_once(CUT_REPLY, 0);
}

/*
 * The connection dies in the middle of the answer to a settle and the
 * next claim: the client heard the BEGIN, the xid and the settle, and
 * of the claim only its start. The claim's half answer is not a result:
 * the store must not take the xid as enough, find the transaction
 * committed and hand back the claim's missing rows as "nothing
 * claimed". It runs again and finds its own write, as when nothing came
 * back at all.
 */
TEST(settle_claim_reply_cut_midway_lands_once)
{
	if (pg_dsn()) /* heard: the BEGIN, the xid, the settle */
		settle_claim_cut_lands_once(CUT_PART, 3);
}

/* A task update whose message the server never saw runs again, once. */
TEST(task_update_request_lost_lands_once)
{
	struct cut_proxy x = { 0 };
	struct store *s, *direct;
	struct err e = ERR_INIT;
	struct task t, after;
	int64_t id;

	if (!pg_dsn())
		return;
	direct = open_store();
	s = open_store_via(&x);
	id = add_task(s, "sent twice", 0, NULL, NULL);
	get_task(s, id, &t);

	x.armed = CUT_REQUEST;
	run_set(&t.title, "written once");
	ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
	ASSERT_EQ(x.cuts, 1);
	get_task(direct, id, &after);
	ASSERT_STREQ(after.title, "written once");
	ASSERT_EQ(after.version, 2);
	ASSERT_EQ(t.version, 2);
	task_release(&after);
	task_release(&t);
	store_close(s);
	cut_proxy_stop(&x);
	store_close(direct);
}

/*
 * The session dies inside the COMMIT of a settle sent in one message (a
 * deferred trigger kills it, once): the store finds out what became of
 * the transaction and the settle lands exactly once, event and all.
 */
TEST(task_update_killed_at_commit_lands_once)
{
	struct store *s;
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	struct task t, after;
	int64_t id;

	if (!pg_dsn())
		return;
	s = open_store();
	id = add_task(s, "dies at commit", 0, NULL, NULL);
	PQclear(pg_query(
		"CREATE SEQUENCE kill_once;"
		"CREATE FUNCTION kill_me() RETURNS trigger LANGUAGE plpgsql AS"
		" $$ BEGIN IF nextval('kill_once') = 1 THEN"
		" PERFORM pg_terminate_backend(pg_backend_pid()); END IF;"
		" RETURN NULL; END $$;"
		"CREATE CONSTRAINT TRIGGER kill_at_commit AFTER UPDATE ON tasks"
		" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
		" EXECUTE FUNCTION kill_me()"));
	get_task(s, id, &t);
	run_set(&t.status, TASK_BLOCKED);
	ev.type = xstrdup("task_blocked");
	ASSERT_OK(store_task_update(s, &t, &ev, &e), &e);
	ASSERT_EQ(t.version, 2);
	ASSERT(ev.seq > 0);
	get_task(s, id, &after);
	ASSERT_EQ(after.version, 2);
	ASSERT_STREQ(after.status, TASK_BLOCKED);
	/* the killed try's event left a hole (see events_seen) */
	ASSERT_EQ(events_seen(s, "task_blocked", 1), 1);
	ASSERT_EQ(raw_count("SELECT last_value FROM kill_once"), 2);
	task_release(&after);
	task_release(&t);
	event_release(&ev);
	store_close(s);
}

/*
 * A claim whose message's connection the proxy cuts (how, keep: see
 * struct cut_proxy): the store finds out what became of it and hands
 * back the one task claimed, whether the server committed the claim
 * (CUT_REPLY, CUT_PART) or never saw it (CUT_REQUEST).
 */
static void
claim_cut_lands_once(int how, int keep)
{
	struct cut_proxy x = { .keep = keep };
	struct store *s, *direct;
	struct err e = ERR_INIT;
	struct task t = { 0 }, after;
	int64_t id, other;

	direct = open_store();
	s = open_store_via(&x);
	id = add_task(s, "claimed unheard", 1, NULL, NULL);
	other = add_task(s, "left queued", 0, NULL, NULL);
	x.armed = how;
	ASSERT_OK(store_task_claim(s, "w", HOUR_MS, &t, &e), &e);
	ASSERT_EQ(x.cuts, 1);
	ASSERT_EQ(t.id, id);
	ASSERT_STREQ(t.status, TASK_RUNNING);
	ASSERT_STREQ(t.lease_holder, "w");
	ASSERT_EQ(t.attempts, 1);
	ASSERT_EQ(count_events(direct, "task_claimed"), 1);
	get_task(direct, other, &after);
	ASSERT_STREQ(after.status, TASK_QUEUED);
	task_release(&after);
	task_release(&t);
	store_close(s);
	cut_proxy_stop(&x);
	store_close(direct);
}

/*
 * PostgreSQL: a claim is one message, its COMMIT in it. Cut once the
 * server committed, the client heard nothing: the claim is found by
 * what it wrote (the holder, its start, its lease), not made again.
 */
TEST(claim_reply_lost_lands_once)
{
	if (pg_dsn())
		claim_cut_lands_once(CUT_REPLY, 0);
}

/* The same, the client having heard the BEGIN and half of the claim. */
TEST(claim_reply_cut_midway_lands_once)
{
	if (pg_dsn())
		claim_cut_lands_once(CUT_PART, 1);
}

/* A claim the server never saw runs again, once. */
TEST(claim_request_lost_lands_once)
{
	if (pg_dsn())
		claim_cut_lands_once(CUT_REQUEST, 0);
}

/* A session holding the area lock, as a long claim of another would. */
static PGconn *area_locker;

static void
release_area_lock(void)
{
	PQclear(PQexec(area_locker, "SELECT pg_advisory_unlock_all()"));
}

/*
 * PostgreSQL: the connection of a claim is cut while the server runs
 * it, waiting for the area lock (a claim of another worker holds it).
 * The server goes on and commits the claim once the lock is free. The
 * store must wait for that session to end before it looks for what the
 * claim took: looking first, it would find nothing, pass over the task
 * (locked by that claim) and take another or none, and the task would
 * sit claimed by nobody until its lease ran out. The lock is released
 * only once the store asks after that session a second time (the first
 * found it running). pooled: through a
 * stand-in for a pooler, whose process numbers are its own, so the store
 * must ask the server which process its session is.
 */
static void
claim_lost_while_running_lands_once(int pooled)
{
	struct cut_proxy x = { .pooled = pooled };
	struct store *s, *direct;
	struct err e = ERR_INIT;
	struct task t = { 0 };
	int64_t id;

	direct = open_store();
	s = open_store_via(&x);
	id = add_task(s, "claimed while cut", 0, "a", NULL);
	area_locker = PQconnectdb(pg_dsn());
	ASSERT_EQ(PQstatus(area_locker), CONNECTION_OK);
	PQclear(PQexec(area_locker,
		       "SELECT pg_advisory_lock(108170700680706)"));

	x.seen = "pg_stat_activity";
	x.seen_times = 2; /* asked after once, found running, asked again */
	x.on_seen = release_area_lock;
	x.armed = CUT_SENT;
	ASSERT_OK(store_task_claim(s, "w", HOUR_MS, &t, &e), &e);
	ASSERT_EQ(x.cuts, 1);
	ASSERT(x.seen == NULL);
	ASSERT_EQ(t.id, id);
	ASSERT_STREQ(t.lease_holder, "w");
	ASSERT_EQ(count_events(direct, "task_claimed"), 1);
	release_area_lock();
	PQfinish(area_locker);
	task_release(&t);
	store_close(s);
	cut_proxy_stop(&x);
	store_close(direct);
}

TEST(claim_lost_while_running_lands_once)
{
	if (pg_dsn())
		claim_lost_while_running_lands_once(0);
}

TEST(claim_lost_while_running_behind_a_pooler_lands_once)
{
	if (pg_dsn())
		claim_lost_while_running_lands_once(1);
}

/* What another writer does while the proxy has the connection cut. */
static void
write_first(void)
{
	PQclear(pg_query("UPDATE tasks SET status = 'blocked',"
			 " version = version + 1, updated_at = 1"));
}

/*
 * The message was lost before the server saw it, and another writer
 * changed the row before the retry: the row is not the one this update
 * would have written, so the retry's conflict stands.
 */
TEST(task_update_request_lost_then_changed_conflicts)
{
	struct cut_proxy x = { .on_cut = write_first };
	struct store *s, *direct;
	struct err e = ERR_INIT;
	struct task t, after;
	int64_t id;

	if (!pg_dsn())
		return;
	direct = open_store();
	s = open_store_via(&x);
	id = add_task(s, "contested unheard", 0, NULL, NULL);
	get_task(s, id, &t);

	x.armed = CUT_REQUEST;
	run_set(&t.title, "never written");
	ASSERT_EQ(store_task_update(s, &t, NULL, &e), BATON_ECONFLICT);
	ASSERT_EQ(x.cuts, 1);
	get_task(direct, id, &after);
	ASSERT_STREQ(after.title, "contested unheard");
	ASSERT_STREQ(after.status, "blocked");
	task_release(&after);
	task_release(&t);
	store_close(s);
	cut_proxy_stop(&x);
	store_close(direct);
}

/* The cluster's next xid, drawn by a session of its own (it takes one). */
static int64_t
pg_next_xid(void)
{
	return raw_count("SELECT pg_current_xact_id()::text::bigint");
}

/*
 * PostgreSQL: a claim that finds nothing writes nothing, not even an
 * xid (each empty claim used to take one, and every idle worker woken
 * made one).
 */
TEST(claim_empty_takes_no_xid)
{
	struct store *s;
	struct task t = { 0 };
	struct err e = ERR_INIT;
	int64_t before, after;
	int i;

	if (!pg_dsn())
		return;
	s = open_store();
	ASSERT_EQ(store_task_claim(s, "w", HOUR_MS, &t, &e), BATON_ENOTFOUND);
	before = pg_next_xid();
	for (i = 0; i < 20; i++) {
		e = (struct err)ERR_INIT;
		ASSERT_EQ(store_task_claim(s, "w", HOUR_MS, &t, &e),
			  BATON_ENOTFOUND);
	}
	after = pg_next_xid();
	/* our own probe takes one; a stray autovacuum at most a couple */
	ASSERT(after - before <= 4);
	store_close(s);
}

/* Counts the round trips through x from here ... */
static void
trips_begin(struct cut_proxy *x)
{
	__atomic_store_n(&x->trips, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&x->counting, 1, __ATOMIC_SEQ_CST);
}

/* ... to here, and returns them. */
static int
trips_end(struct cut_proxy *x)
{
	__atomic_store_n(&x->counting, 0, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&x->trips, __ATOMIC_SEQ_CST);
}

/*
 * PostgreSQL: each write is one message, its BEGIN to its COMMIT, so one
 * round trip: a lease renewal (refused or not), a worker's beat and its
 * stop, a settle and the next claim, a claim on its own. (A statement's first use in a
 * session prepares it, a round trip of its own: the counted calls come
 * second.)
 */
TEST(writes_take_one_round_trip)
{
	struct cut_proxy x = { 0 };
	struct store *s;
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	struct worker_rec w = { 0 };
	struct task a, b = { 0 }, next = { 0 }, other, none = { 0 };
	int64_t c, d;

	if (!pg_dsn())
		return;
	s = open_store_via(&x);
	add_task(s, "a", 2, NULL, NULL);
	add_task(s, "b", 1, NULL, NULL);
	c = add_task(s, "c", 0, NULL, NULL);
	claim(s, "w", &a);
	ASSERT_OK(store_task_renew(s, a.id, a.lease_token, HOUR_MS, &e), &e);
	trips_begin(&x);
	ASSERT_OK(store_task_renew(s, a.id, a.lease_token, HOUR_MS, &e), &e);
	ASSERT_EQ(trips_end(&x), 1);
	trips_begin(&x);
	ASSERT_EQ(store_task_renew(s, a.id, a.lease_token + 9, HOUR_MS, &e),
		  BATON_EFENCED);
	ASSERT_EQ(trips_end(&x), 1);
	ASSERT_CONTAINS(e.msg, "no longer holds it");
	e = (struct err)ERR_INIT;

	w.id = xstrdup("host:1:0");
	w.host = xstrdup("host");
	w.pid = 1;
	ASSERT_OK(store_worker_beat(s, &w, &e), &e);
	trips_begin(&x);
	ASSERT_OK(store_worker_beat(s, &w, &e), &e);
	ASSERT_EQ(trips_end(&x), 1);
	ASSERT_OK(store_worker_stop(s, w.id, &e), &e);
	trips_begin(&x);
	ASSERT_OK(store_worker_stop(s, w.id, &e), &e);
	ASSERT_EQ(trips_end(&x), 1);

	/* a settle and the next claim, twice: a, then b, then c claimed */
	run_set(&a.status, TASK_DONE);
	ev.type = xstrdup("task_settled");
	ASSERT_OK(store_task_settle_claim(s, &a, &ev, "w", HOUR_MS, &b, &e),
		  &e);
	run_set(&b.status, TASK_DONE);
	ev.seq = 0;
	trips_begin(&x);
	ASSERT_OK(store_task_settle_claim(s, &b, &ev, "w", HOUR_MS, &next, &e),
		  &e);
	ASSERT_EQ(trips_end(&x), 1);
	ASSERT_EQ(next.id, c);
	ASSERT_EQ(count_events(s, "task_settled"), 2);

	/* a claim on its own, which takes a task or finds none */
	d = add_task(s, "d", 0, NULL, NULL);
	trips_begin(&x);
	ASSERT_EQ(claim(s, "w2", &other), d);
	ASSERT_EQ(trips_end(&x), 1);
	trips_begin(&x);
	ASSERT_EQ(store_task_claim(s, "w2", HOUR_MS, &none, &e),
		  BATON_ENOTFOUND);
	ASSERT_EQ(trips_end(&x), 1);
	task_release(&other);
	task_release(&next);
	task_release(&b);
	task_release(&a);
	event_release(&ev);
	free(w.id);
	free(w.host);
	store_close(s);
	cut_proxy_stop(&x);
}

/*
 * PostgreSQL: opening a store whose schema is up to date takes two round
 * trips after the startup: the session's settings with the reading of
 * the database's clock, and one look at schema_migrations. (The clock
 * took one of its own, and the look twenty-one, through the advisory
 * lock and a query a migration.)
 */
TEST(open_of_a_migrated_store_takes_two_round_trips)
{
	struct cut_proxy x = { 0 };
	struct store *s = NULL, *direct;
	struct err e = ERR_INIT;
	char *url;
	int v;

	if (!pg_dsn())
		return;
	direct = open_store(); /* migrated */
	v = store_schema_version(direct, &e);
	ASSERT(v >= 17);
	store_close(direct);
	cut_proxy_start(&x, &url);
	trips_begin(&x);
	ASSERT_OK(store_open(url, &s, &e), &e);
	ASSERT_EQ(trips_end(&x), 2);
	ASSERT_EQ(store_schema_version(s, &e), v);
	store_close(s);
	free(url);
	cut_proxy_stop(&x);
}

/* Waits up to ms for the watch fd and drains it; the drain's mask. */
static unsigned
watch_wait(struct store *s, int fd, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	unsigned got = 0;
	int64_t end = time_mono_ms() + ms;

	while (time_mono_ms() < end) {
		if (poll(&pf, 1, 50) > 0)
			got |= store_watch_drain(s);
	}
	return got | store_watch_drain(s);
}

/*
 * PostgreSQL: the queue NOTIFYs work only from commits that make some,
 * with a count: an add wakes one worker, a claim and a settle without
 * dependents wake nobody, a settle with two dependents waiting says 2.
 * Events are still announced.
 */
TEST(watch_counts_units_of_work)
{
	struct store *s, *w;
	struct task t, u;
	struct err e = ERR_INIT;
	int64_t deps[2] = { 0, 0 };
	unsigned got;
	int fd;

	if (!pg_dsn())
		return;
	s = open_store();
	w = open_store();
	fd = store_watch_fd(w, &e);
	ASSERT(fd >= 0);
	watch_wait(w, fd, 100);

	deps[0] = add_task(s, "base", 0, NULL, NULL);
	got = watch_wait(w, fd, 400);
	ASSERT(got & STORE_WATCH_WORK);
	ASSERT_EQ(STORE_WATCH_UNITS(got), 1);

	add_task(s, "after 1", 0, NULL, deps);
	add_task(s, "after 2", 0, NULL, deps);
	got = watch_wait(w, fd, 400);
	ASSERT(!(got & STORE_WATCH_WORK)); /* waiting for base */

	ASSERT_EQ(claim(s, "w", &t), deps[0]);
	got = watch_wait(w, fd, 400);
	ASSERT(got & STORE_WATCH_EVENTS);
	ASSERT(!(got & STORE_WATCH_WORK));

	run_set(&t.status, TASK_DONE);
	ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
	got = watch_wait(w, fd, 400);
	ASSERT(got & STORE_WATCH_WORK);
	ASSERT_EQ(STORE_WATCH_UNITS(got), 2);

	ASSERT(claim(s, "w", &u) > 0);
	run_set(&u.status, TASK_DONE);
	ASSERT_OK(store_task_update(s, &u, NULL, &e), &e);
	got = watch_wait(w, fd, 400);
	ASSERT(!(got & STORE_WATCH_WORK)); /* nothing depends on it */
	task_release(&t);
	task_release(&u);
	store_close(w);
	store_close(s);
}

#define AREA_FAMILIES 4
#define AREA_TASKS    48

/* Fails the claimer when a running task other than t overlaps it. */
static int
check_no_overlap(const struct task *r, void *arg)
{
	const struct task *t = arg;

	if (r->id != t->id && store_areas_overlap(r->area, t->area))
		test_fail(__FILE__, __LINE__,
			  "task %lld (%s) runs next to task %lld (%s)",
			  (long long)r->id, r->area, (long long)t->id,
			  t->area);
	return 0;
}

/*
 * A worker process for the area race: claims, looks at every running
 * task while it holds its own (none may overlap it), finishes, and
 * claims again until no task is left queued. A claim that finds nothing
 * while tasks wait for an area to come free just tries again.
 */
static void
area_claimer(int who)
{
	static const char *const queued[] = { TASK_QUEUED };
	struct store_task_filter running = { .status = TASK_RUNNING };
	char *spec = queue_store_spec();
	char holder[32];
	struct err e = ERR_INIT;
	struct store *s = NULL;
	int rc;

	/* the test's alarm is not inherited: a stuck claimer ends too */
	alarm(60);
	snprintf(holder, sizeof(holder), "w%d", who);
	ASSERT_OK(store_open(spec, &s, &e), &e);
	for (;;) {
		struct task t = { 0 };
		int64_t left = 0;

		rc = store_task_claim(s, holder, HOUR_MS, &t, &e);
		if (rc == BATON_ENOTFOUND) {
			ASSERT_OK(store_task_counts(s, queued, &left, 1, &e),
				  &e);
			if (!left)
				break;
			usleep(1000);
			continue;
		}
		ASSERT_OK(rc, &e);
		/* hold it a while, so that a task running next to it would
		 * be seen by one of the two holders */
		usleep(500);
		ASSERT_OK(store_task_list(s, &running, check_no_overlap, &t,
					  &e),
			  &e);
		usleep(500);
		store_fence(s, t.id, t.lease_token);
		run_set(&t.status, TASK_DONE);
		t.ended_at = time_now_ms();
		ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
		store_fence(s, 0, 0);
		task_release(&t);
	}
	store_close(s);
	free(spec);
	_exit(0);
}

/*
 * Many processes claiming tasks whose areas overlap within a family
 * ("f1", "f1/a", "f1/a/b": every pair of them) but not across families
 * ("f1x" is a sibling of "f1"): at most one task of a family runs at a
 * time, yet every task is claimed exactly once. On PostgreSQL this is
 * the race the area lock closes: two claimers picking two overlapping
 * tasks at once.
 */
TEST(claim_areas_concurrent_processes)
{
	static const char *const chain[] = { "", "/a", "/a/b", "/a/b/c" };
	static const char *const done[] = { TASK_DONE };
	struct store *s = open_store();
	struct err e = ERR_INIT;
	pid_t pids[CLAIMERS];
	int64_t ndone = 0;
	int i, status;

	for (i = 0; i < AREA_TASKS; i++) {
		int fam = i % (AREA_FAMILIES + 1);
		char *area = fam == AREA_FAMILIES
				     ? xasprintf("f%dx", i % AREA_FAMILIES)
				     : xasprintf("f%d%s", fam,
						 chain[i / AREA_FAMILIES % 4]);

		add_task(s, "area race", i % 3, area, NULL);
		free(area);
	}
	fflush(NULL);
	for (i = 0; i < CLAIMERS; i++) {
		pids[i] = fork();
		ASSERT(pids[i] >= 0);
		if (pids[i] == 0)
			area_claimer(i); /* never returns */
	}
	for (i = 0; i < CLAIMERS; i++) {
		ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
		ASSERT(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
	}
	ASSERT_OK(store_task_counts(s, done, &ndone, 1, &e), &e);
	ASSERT_EQ(ndone, AREA_TASKS);
	ASSERT_EQ(count_events(s, "task_claimed"), AREA_TASKS);
	store_close(s);
}

TEST(next_due)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct task t;
	int64_t due = -1, soon = time_now_ms() + 50000;

	ASSERT_OK(store_task_next_due(s, &due, &e), &e);
	ASSERT_EQ(due, 0);

	/* A queued task due now is claimable now, not "due later". */
	add_task(s, "ready", 0, NULL, NULL);
	ASSERT_OK(store_task_next_due(s, &due, &e), &e);
	ASSERT_EQ(due, 0);

	add_task(s, "cooling down", 0, NULL, NULL);
	get_task(s, 2, &t);
	t.not_before = soon;
	ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
	task_release(&t);
	ASSERT_OK(store_task_next_due(s, &due, &e), &e);
	ASSERT_EQ(due, soon);

	/* A running task's lease that ends first wins. */
	ASSERT_OK(store_task_claim(s, "w", 1000, &t, &e), &e);
	ASSERT_EQ(t.id, 1);
	ASSERT_OK(store_task_next_due(s, &due, &e), &e);
	ASSERT_EQ(due, t.lease_expires_at);
	task_release(&t);
	store_close(s);
}

/*
 * A task whose judge could not decide waits blocked(awaiting_judge) for
 * its cooldown: due then, as a queued task's cooldown is. Claimed by a
 * judge (judged_at set), it is not due at its old cooldown.
 */
TEST(next_due_judge_cooldown)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct task t;
	int64_t due = -1, soon = time_now_ms() + 50000;

	add_task(s, "judged later", 0, NULL, NULL);
	get_task(s, 1, &t);
	run_set(&t.status, TASK_BLOCKED);
	run_set(&t.block_reason, BLOCK_AWAITING_JUDGE);
	t.not_before = soon;
	ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
	ASSERT_OK(store_task_next_due(s, &due, &e), &e);
	ASSERT_EQ(due, soon);

	t.judged_at = time_now_ms();
	ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
	ASSERT_OK(store_task_next_due(s, &due, &e), &e);
	ASSERT_EQ(due, 0);

	/* blocked for another reason: a person decides, nothing falls due */
	t.judged_at = 0;
	run_set(&t.block_reason, BLOCK_NEEDS_REWORK);
	ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
	ASSERT_OK(store_task_next_due(s, &due, &e), &e);
	ASSERT_EQ(due, 0);
	task_release(&t);
	store_close(s);
}

/* ---- workers ------------------------------------------------------------ */

struct workers {
	int n;
	char ids[8][32];
	int64_t task[8], started[8], beat[8];
};

static int
collect_worker(const struct worker_rec *w, void *arg)
{
	struct workers *l = arg;

	ASSERT(l->n < 8);
	snprintf(l->ids[l->n], sizeof(l->ids[0]), "%s", w->id);
	l->task[l->n] = w->task_id;
	l->started[l->n] = w->started_at;
	l->beat[l->n] = w->heartbeat_at;
	l->n++;
	return 0;
}

TEST(workers_beat_list_stop)
{
	struct store *s = open_store();
	struct worker_rec w = { 0 };
	struct workers l = { 0 };
	struct err e = ERR_INIT;

	w.id = xstrdup("host:2:0");
	w.host = xstrdup("host");
	w.pid = 2;
	w.started_at = 500;
	ASSERT_OK(store_worker_beat(s, &w, &e), &e);
	free(w.id);
	w.id = xstrdup("host:1:0");
	w.started_at = 0;
	ASSERT_OK(store_worker_beat(s, &w, &e), &e);
	ASSERT_OK(store_worker_list(s, collect_worker, &l, &e), &e);
	ASSERT_EQ(l.n, 2);
	ASSERT_STREQ(l.ids[0], "host:1:0");
	ASSERT_STREQ(l.ids[1], "host:2:0");
	ASSERT_EQ(l.started[1], 500);
	ASSERT(l.started[0] > 500); /* 0: now */

	/* A refresh keeps started_at and moves the heartbeat. */
	free(w.id);
	w.id = xstrdup("host:2:0");
	w.task_id = 7;
	w.started_at = 0;
	usleep(2000);
	ASSERT_OK(store_worker_beat(s, &w, &e), &e);
	memset(&l, 0, sizeof(l));
	ASSERT_OK(store_worker_list(s, collect_worker, &l, &e), &e);
	ASSERT_EQ(l.n, 2);
	ASSERT_EQ(l.started[1], 500);
	ASSERT_EQ(l.task[1], 7);
	ASSERT(l.beat[1] > l.beat[0]);

	ASSERT_OK(store_worker_stop(s, "host:1:0", &e), &e);
	memset(&l, 0, sizeof(l));
	ASSERT_OK(store_worker_list(s, collect_worker, &l, &e), &e);
	ASSERT_EQ(l.n, 1);
	ASSERT_STREQ(l.ids[0], "host:2:0");
	ASSERT_EQ(store_worker_stop(s, "nobody", &e), BATON_ENOTFOUND);
	ASSERT_STREQ(e.msg, "no worker 'nobody'");
	free(w.id);
	free(w.host);
	store_close(s);
}

/* ---- the merge queue ---------------------------------------------------- */

struct items {
	int n;
	int64_t id[8];
};

static int
collect_item(const struct merge_item *m, void *arg)
{
	struct items *l = arg;

	ASSERT(l->n < 8);
	l->id[l->n++] = m->id;
	return 0;
}

static void
queue_run(struct store *s, const struct run *r, struct merge_item *m)
{
	struct event ev = { 0 };
	struct err e = ERR_INIT;

	memset(m, 0, sizeof(*m));
	m->run_id = xstrdup(r->id);
	m->branch = xasprintf("baton/%s", r->id);
	m->task_id = r->task_id;
	ev.type = xstrdup("merge_queued");
	ASSERT_OK(store_merge_add(s, m, &ev, &e), &e);
	ASSERT(ev.seq > 0);
	event_release(&ev);
}

TEST(merge_add_claim_update)
{
	struct store *s = open_store();
	struct merge_item a, b, dup = { 0 }, got, c;
	struct events l = { 0 };
	struct items items = { 0 };
	struct err e = ERR_INIT;
	struct run r1, r2, r3;

	make_run(s, "one", 4, &r1);
	make_run(s, "two", 0, &r2);
	make_run(s, "three", 0, &r3);
	queue_run(s, &r1, &a);
	queue_run(s, &r2, &b);
	ASSERT_EQ(a.id, 1);
	ASSERT_EQ(b.id, 2);
	ASSERT_EQ(a.version, 1);
	ASSERT_STREQ(a.status, MERGE_PENDING);

	/* Queued twice: busy, naming the item, and nothing written. */
	dup.run_id = xstrdup(r1.id);
	dup.branch = xstrdup("other");
	ASSERT_EQ(store_merge_add(s, &dup, NULL, &e), BATON_EBUSY);
	ASSERT_CONTAINS(e.msg, "already queued (item 1)");
	ASSERT_EQ(dup.id, 0);
	ASSERT(dup.status == NULL);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM merge_queue"), 2);
	free(dup.run_id);
	dup.run_id = xstrdup("r9-ghost");
	ASSERT_EQ(store_merge_add(s, &dup, NULL, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "r9-ghost");
	merge_item_release(&dup);

	/* The event of an item is its run's (and its task's). */
	ASSERT_OK(store_event_list(s, r1.id, 0, "merge_queued", collect_event,
				   &l, &e),
		  &e);
	ASSERT_EQ(l.n, 1);
	ASSERT_EQ(l.ev[0].task_id, 4);
	events_release(&l);

	/* By id and by run. */
	ASSERT_OK(store_merge_get(s, 2, NULL, &got, &e), &e);
	ASSERT_STREQ(got.run_id, r2.id);
	merge_item_release(&got);
	ASSERT_OK(store_merge_get(s, 0, r1.id, &got, &e), &e);
	ASSERT_EQ(got.id, 1);
	ASSERT_EQ(got.task_id, 4);
	ASSERT_STREQ(got.branch, a.branch);
	merge_item_release(&got);
	ASSERT_EQ(store_merge_get(s, 0, r3.id, &got, &e), BATON_ENOTFOUND);
	ASSERT_EQ(store_merge_get(s, 5, NULL, &got, &e), BATON_ENOTFOUND);

	/* Claims go in queue order; a claimed item is not claimed again. */
	ASSERT_OK(store_merge_claim(s, "lander", HOUR_MS, &c, &e), &e);
	ASSERT_EQ(c.id, 1);
	ASSERT_STREQ(c.status, MERGE_PROCESSING);
	ASSERT_STREQ(c.claimed_by, "lander");
	ASSERT(c.claim_expires_at > time_now_ms());
	ASSERT_EQ(c.version, 2);
	merge_item_release(&c);
	ASSERT_OK(store_event_list(s, r1.id, 0, "merge_claimed", collect_event,
				   &l, &e),
		  &e);
	ASSERT_EQ(l.n, 1);
	ASSERT_STREQ(l.ev[0].data, "{\"item\":1,\"worker\":\"lander\"}");
	events_release(&l);

	/* Item 2 waits (backoff); nothing else is due. */
	merge_item_release(&b);
	ASSERT_OK(store_merge_get(s, 2, NULL, &b, &e), &e);
	b.not_before = time_now_ms() + HOUR_MS;
	ASSERT_OK(store_merge_update(s, &b, NULL, &e), &e);
	ASSERT_EQ(store_merge_claim(s, "lander", HOUR_MS, &c, &e),
		  BATON_ENOTFOUND);

	/* A lander that died: its claim runs out and item 3 is taken over. */
	queue_run(s, &r3, &c);
	merge_item_release(&c);
	ASSERT_OK(store_merge_claim(s, "dies", 1, &c, &e), &e);
	ASSERT_EQ(c.id, 3);
	merge_item_release(&c);
	usleep(5000);
	ASSERT_OK(store_merge_claim(s, "rescuer", HOUR_MS, &c, &e), &e);
	ASSERT_EQ(c.id, 3);
	ASSERT_STREQ(c.claimed_by, "rescuer");

	/* Versioned update; the stale copy conflicts. */
	run_set(&c.status, MERGE_MERGED);
	run_set(&c.merged_commit, "abc123");
	ASSERT_OK(store_merge_update(s, &c, NULL, &e), &e);
	ASSERT_EQ(c.version, 4);
	run_set(&a.status, MERGE_FAILED);
	ASSERT_EQ(store_merge_update(s, &a, NULL, &e), BATON_ECONFLICT);
	ASSERT_CONTAINS(e.msg, "merge item 1 changed concurrently");
	ASSERT_OK(store_merge_get(s, 3, NULL, &got, &e), &e);
	ASSERT_STREQ(got.status, MERGE_MERGED);
	ASSERT_STREQ(got.merged_commit, "abc123");
	merge_item_release(&got);

	ASSERT_OK(store_merge_list(s, NULL, collect_item, &items, &e), &e);
	ASSERT_EQ(items.n, 3);
	ASSERT_EQ(items.id[2], 3);
	memset(&items, 0, sizeof(items));
	ASSERT_OK(store_merge_list(s, MERGE_PENDING, collect_item, &items, &e),
		  &e);
	ASSERT_EQ(items.n, 1);
	ASSERT_EQ(items.id[0], 2);

	merge_item_release(&a);
	merge_item_release(&b);
	merge_item_release(&c);
	run_release(&r1);
	run_release(&r2);
	run_release(&r3);
	store_close(s);
}

/* ---- plans -------------------------------------------------------------- */

/* ---- the transition tables (core/queue.h) --------------------------- */

/* The edges of a table as "from>to" lines, in table order. */
static char *
edges_of(const struct queue_move *t, size_t n,
	 int (*check)(const char *, const char *, struct err *),
	 const char *const *statuses, size_t nr)
{
	struct buf b = BUF_INIT;
	size_t i, j;

	/* every edge is one check allows, and check allows no other */
	for (i = 0; i < n; i++)
		ASSERT_EQ(check(t[i].from, t[i].to, NULL), 0);
	for (i = 0; i < nr; i++)
		for (j = 0; j < nr; j++)
			if (i != j && !check(statuses[i], statuses[j], NULL))
				buf_addf(&b, "%s>%s\n", statuses[i],
					 statuses[j]);
	ASSERT_EQ(check(statuses[0], statuses[0], NULL), 0);
	return buf_detach(&b, NULL);
}

/* The task table, pinned: changing it is a decision, not an accident. */
TEST(task_transition_table_pinned)
{
	char *got = edges_of(task_moves, nr_task_moves, task_move_check,
			     task_statuses, NR_TASK_STATUSES);
	struct err e = ERR_INIT;

	ASSERT_STREQ(got, "queued>running\n"
			  "queued>blocked\n"
			  "queued>cancelled\n"
			  "running>queued\n"
			  "running>done\n"
			  "running>failed\n"
			  "running>blocked\n"
			  "running>cancelled\n"
			  "failed>queued\n"
			  "failed>blocked\n"
			  "blocked>queued\n"
			  "blocked>done\n"
			  "blocked>cancelled\n"
			  "cancelled>queued\n");
	free(got);
	ASSERT_EQ(task_move_check(TASK_DONE, TASK_QUEUED, &e),
		  BATON_EBADSTATE);
	ASSERT_STREQ(e.msg, "illegal transition 'done' -> 'queued' ('done' "
			    "is final)");
	ASSERT_EQ(task_move_check(TASK_QUEUED, TASK_DONE, &e),
		  BATON_EBADSTATE);
	ASSERT_STREQ(e.msg, "illegal transition 'queued' -> 'done' (from "
			    "'queued' only: running, blocked, cancelled)");
}

TEST(merge_transition_table_pinned)
{
	static const char *const statuses[] = { MERGE_PENDING,
						MERGE_PROCESSING, MERGE_MERGED,
						MERGE_FAILED };
	char *got = edges_of(merge_moves, nr_merge_moves, merge_move_check,
			     statuses, ARRAY_SIZE(statuses));
	struct buf froms = BUF_INIT;

	ASSERT_STREQ(got, "pending>processing\n"
			  "processing>pending\n"
			  "processing>merged\n"
			  "processing>failed\n"
			  "failed>pending\n");
	free(got);
	merge_move_froms(MERGE_PENDING, &froms);
	ASSERT_STREQ(froms.ptr, "|pending|processing|failed|");
	buf_release(&froms);
}

/*
 * The store refuses a task write that moves its status along no edge of
 * the table, against the status stored (not the one the writer read),
 * and writes nothing; a legal move and a write that keeps the status go
 * through.
 */
TEST(task_illegal_transition_refused)
{
	struct store *s = open_store();
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct task t, got;
	int64_t id = add_task(s, "moves", 0, NULL, NULL);

	get_task(s, id, &t);
	run_set(&t.status, TASK_DONE);
	ev.type = xstrdup("task_settled");
	ASSERT_EQ(store_task_update(s, &t, &ev, &e), BATON_EBADSTATE);
	ASSERT_STREQ(e.msg, "task 1: illegal transition 'queued' -> 'done' "
			    "(from 'queued' only: running, blocked, "
			    "cancelled)");
	ASSERT_EQ(t.version, 1);
	ASSERT_EQ(ev.seq, 0);
	get_task(s, id, &got);
	ASSERT_STREQ(got.status, TASK_QUEUED);
	ASSERT_EQ(got.version, 1);
	task_release(&got);
	ASSERT_EQ(count_events(s, NULL), 0);

	/* legal: queued -> cancelled; then cancelled is left only by a retry */
	run_set(&t.status, TASK_CANCELLED);
	ASSERT_OK(store_task_update(s, &t, &ev, &e), &e);
	ASSERT_EQ(t.version, 2);
	run_set(&t.status, TASK_RUNNING);
	ASSERT_EQ(store_task_update(s, &t, NULL, &e), BATON_EBADSTATE);
	ASSERT_CONTAINS(e.msg, "task 1: illegal transition 'cancelled' -> "
			       "'running' (from 'cancelled' only: queued)");
	/* a write that keeps the status moves nothing */
	run_set(&t.status, TASK_CANCELLED);
	run_set(&t.reason, "still cancelled");
	ASSERT_OK(store_task_update(s, &t, NULL, &e), &e);
	/* an unknown status is refused before anything */
	run_set(&t.status, "nope");
	ASSERT_EQ(store_task_update(s, &t, NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "cannot update task 1: unknown task status "
			       "'nope'");
	/* a stale writer is still told of the conflict, not the move */
	run_set(&t.status, TASK_DONE);
	t.version = 1;
	ASSERT_EQ(store_task_update(s, &t, NULL, &e), BATON_ECONFLICT);
	get_task(s, id, &got);
	ASSERT_STREQ(got.status, TASK_CANCELLED);
	ASSERT_EQ(got.version, 3);
	task_release(&got);

	event_release(&ev);
	task_release(&t);
	store_close(s);
}

TEST(merge_item_illegal_transition_refused)
{
	struct store *s = open_store();
	struct merge_item m, got;
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct run r;

	make_run(s, "lands", 0, &r);
	queue_run(s, &r, &m);
	ASSERT_STREQ(m.status, MERGE_PENDING);
	run_set(&m.status, MERGE_MERGED);
	ev.type = xstrdup("merge_landed");
	ASSERT_EQ(store_merge_update(s, &m, &ev, &e), BATON_EBADSTATE);
	ASSERT_STREQ(e.msg, "merge item 1: illegal transition 'pending' -> "
			    "'merged' (from 'pending' only: processing)");
	ASSERT_EQ(m.version, 1);
	ASSERT_EQ(ev.seq, 0);
	ASSERT_OK(store_merge_get(s, m.id, NULL, &got, &e), &e);
	ASSERT_STREQ(got.status, MERGE_PENDING);
	ASSERT_EQ(got.version, 1);
	merge_item_release(&got);

	/* claimed, landed: merged is final */
	merge_item_release(&m);
	ASSERT_OK(store_merge_claim(s, "lander", HOUR_MS, &m, &e), &e);
	run_set(&m.status, MERGE_MERGED);
	ASSERT_OK(store_merge_update(s, &m, &ev, &e), &e);
	run_set(&m.status, MERGE_PENDING);
	ASSERT_EQ(store_merge_update(s, &m, NULL, &e), BATON_EBADSTATE);
	ASSERT_STREQ(e.msg, "merge item 1: illegal transition 'merged' -> "
			    "'pending' ('merged' is final)");
	ASSERT_OK(store_merge_get(s, m.id, NULL, &got, &e), &e);
	ASSERT_STREQ(got.status, MERGE_MERGED);
	merge_item_release(&got);

	event_release(&ev);
	merge_item_release(&m);
	run_release(&r);
	store_close(s);
}

TEST(plan_versions)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	int64_t id1 = 0, id2 = 0, id3 = 0;
	int v1 = 0, v2 = 0, v3 = 0;

	ASSERT_OK(store_plan_add(s, "docs/plan.md", "[1]", &id1, &v1, &e), &e);
	ASSERT_OK(store_plan_add(s, "docs/plan.md", "[2]", &id2, &v2, &e), &e);
	ASSERT_OK(store_plan_add(s, "other.md", "[3]", &id3, &v3, &e), &e);
	ASSERT_EQ(v1, 1);
	ASSERT_EQ(v2, 2);
	ASSERT_EQ(v3, 1);
	ASSERT(id1 > 0 && id2 > id1 && id3 > id2);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM plans"
			    " WHERE source = 'docs/plan.md'"),
		  2);
	store_close(s);
}

/* ---- fault injection and the front end ---------------------------------- */

/* An injected fault in a task add leaves no task, dep or event. */
/*
 * An injected fault on the idempotency keys: a claim and a binding (one
 * statement each) fail before they write; a keyed add fails whole, its
 * key with its task.
 */
TEST(fault_idempotency_keys_write_nothing)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct store_key k;
	char was[65];
	int64_t id = 0;

	setenv("BATON_FAULT_STORE", "1", 1);
	ASSERT_EQ(store_idem_claim(s, "f1", sha_c, &id, was, &e), BATON_ESTORE);
	ASSERT_CONTAINS(e.msg, "injected fault");
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM idempotency_keys"), 0);
	ASSERT_EQ(store_idem_claim(s, "f1", sha_c, &id, was, &e), 1);

	setenv("BATON_FAULT_STORE", "3", 1);
	ASSERT_EQ(store_idem_bind(s, "f1", 7, &e), BATON_ESTORE);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM idempotency_keys"
			    " WHERE task_id IS NULL"),
		  1);

	setenv("BATON_FAULT_STORE", "4", 1);
	ASSERT_EQ(add_keyed(s, "doomed", "f2", sha_c, 0, &k, &id), BATON_ESTORE);
	ASSERT_EQ(id, 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"), 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM idempotency_keys"
			    " WHERE idem_key = 'f2'"),
		  0);
	ASSERT_EQ(count_events(s, NULL), 0);
	unsetenv("BATON_FAULT_STORE");
	ASSERT_EQ(add_keyed(s, "lives", "f2", sha_c, 0, &k, &id), 1);
	store_close(s);
}

TEST(fault_task_add_writes_nothing)
{
	struct store *s = open_store();
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct task t = { 0 }, got;
	int64_t deps[2] = { 0 };

	setenv("BATON_FAULT_STORE", "2", 1);
	deps[0] = add_task(s, "write 1", 0, NULL, NULL);
	t.title = xstrdup("write 2, doomed");
	t.nr_deps = 1;
	t.deps = xcalloc(1, sizeof(*t.deps));
	t.deps[0] = deps[0];
	ev.type = xstrdup("task_added");
	ASSERT_EQ(store_task_add(s, &t, &ev, &e), BATON_ESTORE);
	ASSERT_CONTAINS(e.msg, "injected fault");
	ASSERT_EQ(t.id, 0);
	ASSERT_EQ(ev.seq, 0);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"), 1);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM task_deps"), 0);
	ASSERT_EQ(count_events(s, NULL), 0);

	/* Write 3 succeeds; write 4, a claim, fails whole: no token. */
	ASSERT_OK(store_task_add(s, &t, &ev, &e), &e);
	/* PostgreSQL's ids come from a sequence, which does not roll back */
	ASSERT_EQ(t.id, pg_dsn() ? 3 : 2);
	setenv("BATON_FAULT_STORE", "4", 1);
	ASSERT_EQ(store_task_claim(s, "w", HOUR_MS, &got, &e), BATON_ESTORE);
	get_task(s, 1, &got);
	ASSERT_STREQ(got.status, TASK_QUEUED);
	ASSERT_EQ(got.attempts, 0);
	task_release(&got);
	ASSERT_EQ(count_events(s, "task_claimed"), 0);
	unsetenv("BATON_FAULT_STORE");
	ASSERT_EQ(claim(s, "w", &got), 1);
	/* A sequence does not roll back: the failed claim's token is gone. */
	ASSERT_EQ(got.lease_token, pg_dsn() ? 2 : 1);
	task_release(&got);
	event_release(&ev);
	task_release(&t);
	store_close(s);
}

/*
 * An injected fault in a task update (a settle in one message on
 * PostgreSQL, ending in ROLLBACK) writes nothing, row or event, and the
 * update then goes through.
 */
TEST(fault_task_update_writes_nothing)
{
	struct store *s = open_store();
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct task t, got;
	int64_t id;

	id = add_task(s, "write 1", 0, NULL, NULL);
	get_task(s, id, &t);
	setenv("BATON_FAULT_STORE", "2", 1);
	run_set(&t.status, TASK_BLOCKED);
	ev.type = xstrdup("task_blocked");
	ASSERT_EQ(store_task_update(s, &t, &ev, &e), BATON_ESTORE);
	ASSERT_CONTAINS(e.msg, "injected fault");
	ASSERT_EQ(t.version, 1);
	ASSERT_EQ(ev.seq, 0);
	get_task(s, id, &got);
	ASSERT_STREQ(got.status, TASK_QUEUED);
	ASSERT_EQ(got.version, 1);
	task_release(&got);
	ASSERT_EQ(count_events(s, "task_blocked"), 0);
	unsetenv("BATON_FAULT_STORE");
	ASSERT_OK(store_task_update(s, &t, &ev, &e), &e);
	ASSERT_EQ(t.version, 2);
	ASSERT_EQ(events_seen(s, "task_blocked", 1), 1); /* after a hole */
	event_release(&ev);
	task_release(&t);
	store_close(s);
}

/* NULL arguments are refused by name, before any backend runs. */
TEST(front_end_checks)
{
	struct store *s = open_store();
	struct err e = ERR_INIT;
	struct task t = { 0 };
	struct merge_item m = { 0 };
	int64_t id, n;
	int v;

	ASSERT_EQ(store_task_add(s, NULL, NULL, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "cannot add task: the task is NULL");
	ASSERT_EQ(store_task_add(s, &t, NULL, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "cannot add task: no title");
	ASSERT_EQ(store_task_get(s, 1, NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "out is NULL");
	ASSERT_EQ(store_task_claim(s, NULL, 1000, &t, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "no holder");
	ASSERT_EQ(store_task_claim(s, "w", 1000, NULL, &e), BATON_EINVAL);
	ASSERT_EQ(store_task_claim(s, "w", 0, &t, &e), BATON_EINVAL);
	ASSERT_EQ(store_task_update(s, &t, NULL, &e), BATON_EINVAL);
	ASSERT_EQ(store_task_list(s, NULL, NULL, NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "the callback is NULL");
	ASSERT_EQ(store_task_next_due(s, NULL, &e), BATON_EINVAL);
	ASSERT_EQ(store_task_counts(s, NULL, &n, 1, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "statuses is NULL");
	ASSERT_EQ(store_merge_add(s, &m, NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "no run");
	ASSERT_EQ(store_merge_get(s, 0, NULL, &m, &e), BATON_EINVAL);
	ASSERT_EQ(store_merge_claim(s, "w", 1000, NULL, &e), BATON_EINVAL);
	ASSERT_EQ(store_plan_add(s, NULL, "x", &id, &v, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "the source is NULL");
	ASSERT_EQ(store_plan_add(s, "a", "x", &id, NULL, &e), BATON_EINVAL);
	ASSERT_EQ(store_worker_beat(s, NULL, &e), BATON_EINVAL);
	ASSERT_EQ(store_worker_stop(s, NULL, &e), BATON_EINVAL);
	ASSERT_EQ(store_task_events(s, 0, 0, collect_event, NULL, &e),
		  BATON_EINVAL);
	ASSERT_EQ(raw_count("SELECT COUNT(*) FROM tasks"), 0);
	store_close(s);
}

TEST(task_copy_is_deep)
{
	struct task a = { 0 }, b;

	a.title = xstrdup("copied");
	a.area = xstrdup("src");
	a.priority = 3;
	a.nr_deps = 2;
	a.deps = xcalloc(2, sizeof(*a.deps));
	a.deps[0] = 4;
	a.deps[1] = 5;
	task_copy(&b, &a);
	task_release(&a);
	ASSERT_STREQ(b.title, "copied");
	ASSERT_STREQ(b.area, "src");
	ASSERT_EQ(b.priority, 3);
	ASSERT_EQ(b.nr_deps, 2);
	ASSERT_EQ(b.deps[1], 5);
	ASSERT(b.body == NULL);
	task_release(&b);
	ASSERT(b.title == NULL && b.deps == NULL && b.nr_deps == 0);
	task_release(NULL);
	merge_item_release(NULL);
}
