/*
 * The runtime half of the PostgreSQL backend (store.h from "Fencing" on;
 * schema in sql/pg/003-runtime.sql): the task queue and its leases, the
 * workers and the merge queue, with the contracts and the messages of
 * sqlite_queue.c. What differs is how the claim stays safe: SQLite lets
 * one writer in at a time, PostgreSQL lets them all in at once, so the
 * database has to do the claiming, locking and waking itself.
 *
 * The claim is one READ COMMITTED transaction. Its SELECT takes the best
 * claimable task with FOR NO KEY UPDATE SKIP LOCKED, so concurrent
 * claimers each lock a different row instead of queueing behind the
 * first, and a row another claimer just made running is rechecked and
 * passed over:
 *
 *	worker A: BEGIN ─ pick+lock t3 ─ t3 running, token 8 ─ COMMIT
 *	worker B: BEGIN ─ pick+lock t4 (t3 locked: skipped) ─ token 9 ─ ...
 *
 * Row locks cannot enforce the area rule, which is about two different
 * rows: A and B could each pick one of two overlapping tasks while
 * neither claim is committed. So a task with an area is only taken
 * under one advisory lock that all such claims share, and the overlap is
 * checked again in a new statement once the lock is held. Under READ
 * COMMITTED that statement sees every claim committed by an earlier
 * holder of the lock, and ours is committed before the lock is released
 * (at the end of the transaction), so the next holder sees ours:
 *
 *	worker A: pick t5 (src) ─ lock ─ recheck: free ─ take ─ COMMIT+unlock
 *	worker B: pick t6 (src/x) ─ lock (waits) ───────────── recheck: t5
 *	          overlaps ─ ROLLBACK, pick again without t6
 *
 * Fencing tokens come from the sequence lease_tokens: nextval is
 * monotonic across sessions and takes no row lock, so claims do not
 * serialize on a counter row (as they would on SQLite's counters).
 * A claim that rolls back after drawing leaves a gap: tokens only grow.
 *
 * Every write that may make work for somebody (a task or merge item
 * added or changed, a lease taken) queues a NOTIFY on PG_CHANNEL_WORK,
 * sent at the commit, which wakes supervisors sleeping on
 * store_watch_fd.
 *
 * Each operation is a try and a retry loop around it (pg_int.h); lists
 * read a page per statement and run its callbacks outside any
 * transaction, so a callback may write through the same handle.
 */
#include "util/compat.h"

#include <libpq-fe.h>

#include "core/run.h"
#include "store/pg_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* ---- columns ------------------------------------------------------------ */

/*
 * Every column of tasks in the order read_task() reads them: the four
 * the store sets, then the lists of store_int.h. The statements are
 * generated from the same lists as the code that binds and reads them.
 */
#define TASK_COLUMNS                                                           \
	"id, created_at, updated_at, version" TASK_STRINGS(SQL_COMMA_NAME)     \
	TASK_INTS_MUTABLE(SQL_COMMA_NAME) TASK_IDS_MUTABLE(SQL_COMMA_NAME)
#define MERGE_COLUMNS                                                          \
	"id, run_id, created_at, updated_at, version"                          \
	MERGE_STRINGS_MUTABLE(SQL_COMMA_NAME)                                  \
	MERGE_INTS_MUTABLE(SQL_COMMA_NAME) MERGE_IDS_MUTABLE(SQL_COMMA_NAME)

#define FIELD_NAME(f) #f,
static const char *const task_fields[] = { TASK_STRINGS(FIELD_NAME)
		TASK_INTS_MUTABLE(FIELD_NAME) TASK_IDS_MUTABLE(FIELD_NAME) };
static const char *const merge_fields[] = { MERGE_STRINGS_MUTABLE(FIELD_NAME)
		MERGE_INTS_MUTABLE(FIELD_NAME) MERGE_IDS_MUTABLE(FIELD_NAME) };
#undef FIELD_NAME

/*
 * The claim's pick, area recheck, take and event are one server-side
 * function, baton_task_claim of sql/pg/008-claim.sql, so that a claim
 * is one statement: the first claimable task in the order of SQLite's
 * sql_claim_pick, locked FOR NO KEY UPDATE SKIP LOCKED (the lock the
 * take's UPDATE takes: two claimers exclude each other, but a task
 * added with this one as its dependency or parent, a foreign key's KEY
 * SHARE, does not wait), minus the ids this claim already found
 * overlapping. A task with an area is then taken only under the area
 * lock ("baton" + 2 in the numbering of postgres.c's locks), once a
 * statement of its own has seen no committed claim overlap it. The
 * function's plan walks tasks_queued (pg/007-queue.sql) in the claim's
 * order whatever the statistics say (its SET clauses price sorts and
 * bitmap scans out).
 */

/*
 * How many tasks one claim passes over because a concurrent claim took
 * an overlapping one first, before it gives up with "nothing to claim"
 * (the commit of that claim's task later wakes it again).
 */
#define CLAIM_MAX_SKIPS 16

/* ---- parameters (struct params: pg_int.h) ------------------------------ */

/*
 * Appends ", f = $n" (set) or ", $n" for each of fields, numbering from
 * *n on, and advances *n: the placeholders of the parameters that
 * bind_task() or bind_merge() pushes in the same order.
 */
static void
add_fields(struct buf *sql, const char *const *fields, size_t nr, int set,
	   int *n)
{
	size_t k;

	for (k = 0; k < nr; k++) {
		if (set)
			buf_addf(sql, ", %s = $%d", fields[k], (*n)++);
		else
			buf_addf(sql, ", $%d", (*n)++);
	}
}

/* ids as a PostgreSQL array literal ("{1,2}"), for a $n::bigint[]. */
static void
add_id_array(struct buf *b, const int64_t *ids, size_t n)
{
	size_t k;

	buf_addch(b, '{');
	for (k = 0; k < n; k++)
		buf_addf(b, "%s%lld", k ? "," : "", (long long)ids[k]);
	buf_addch(b, '}');
}

/*
 * Appends s to b as an element of a PostgreSQL array literal (the
 * caller writes the braces; k > 0 puts a comma first): quoted, with
 * quote and backslash escaped, or NULL for NULL.
 */
static void
add_text_elem(struct buf *b, size_t k, const char *s)
{
	if (k)
		buf_addch(b, ',');
	if (!s) {
		buf_adds(b, "NULL");
		return;
	}
	buf_addch(b, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_addch(b, '\\');
		buf_addch(b, *s);
	}
	buf_addch(b, '"');
}

/* Pushes the mutable fields of t (borrowed) in the order of task_fields. */
static void
bind_task(struct params *p, const struct task *t)
{
#define PARAM_TEXT(f) param_text(p, t->f);
#define PARAM_INT(f)  param_int(p, t->f);
#define PARAM_ID(f)   param_id(p, t->f);
	TASK_STRINGS(PARAM_TEXT)
	TASK_INTS_MUTABLE(PARAM_INT)
	TASK_IDS_MUTABLE(PARAM_ID)
#undef PARAM_TEXT
#undef PARAM_INT
#undef PARAM_ID
}

static void
bind_merge(struct params *p, const struct merge_item *m)
{
#define PARAM_TEXT(f) param_text(p, m->f);
#define PARAM_INT(f)  param_int(p, m->f);
#define PARAM_ID(f)   param_id(p, m->f);
	MERGE_STRINGS_MUTABLE(PARAM_TEXT)
	MERGE_INTS_MUTABLE(PARAM_INT)
	MERGE_IDS_MUTABLE(PARAM_ID)
#undef PARAM_TEXT
#undef PARAM_INT
#undef PARAM_ID
}

/* Fills t (overwritten, not released) from row of a TASK_COLUMNS result. */
static void
read_task(const PGresult *res, int row, struct task *t)
{
	int i = 4;

	memset(t, 0, sizeof(*t));
	t->id = pg__int64(res, row, 0);
	t->created_at = pg__int64(res, row, 1);
	t->updated_at = pg__int64(res, row, 2);
	t->version = pg__int64(res, row, 3);
#define READ_TEXT(f) t->f = pg__text(res, row, i++);
#define READ_INT(f)  t->f = pg__int64(res, row, i++);
	TASK_STRINGS(READ_TEXT)
	TASK_INTS_MUTABLE(READ_INT)
	TASK_IDS_MUTABLE(READ_INT)
#undef READ_TEXT
#undef READ_INT
}

static void
read_merge(const PGresult *res, int row, struct merge_item *m)
{
	int i = 5;

	memset(m, 0, sizeof(*m));
	m->id = pg__int64(res, row, 0);
	m->run_id = pg__text(res, row, 1);
	m->created_at = pg__int64(res, row, 2);
	m->updated_at = pg__int64(res, row, 3);
	m->version = pg__int64(res, row, 4);
#define READ_TEXT(f) m->f = pg__text(res, row, i++);
#define READ_INT(f)  m->f = pg__int64(res, row, i++);
	MERGE_STRINGS_MUTABLE(READ_TEXT)
	MERGE_INTS_MUTABLE(READ_INT)
	MERGE_IDS_MUTABLE(READ_INT)
#undef READ_TEXT
#undef READ_INT
}

/* ---- small helpers ------------------------------------------------------ */

/* Runs a write that returns no rows; *changed gets the rows it touched. */
static int
run_count(struct pg_store *ps, const char *sql, const struct params *p,
	  int64_t *changed, const char *what, struct err *e)
{
	PGresult *res = pg__exec(ps, sql, p->n, p->v, what, e);

	if (!res)
		return BATON_ESTORE;
	*changed = strtoll(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return 0;
}

/*
 * A write of one statement that is not fenced, in one message with its
 * BEGIN and COMMIT (pg__exec_commit_unfenced); *changed gets the rows it
 * touched (NULL: not wanted).
 */
static int
write_count(struct pg_store *ps, const char *sql, const struct params *p,
	    int64_t *changed, const char *what, struct err *e)
{
	PGresult *res = NULL;
	int rc = pg__exec_commit_unfenced(
		ps, &(struct pg_stmt){ sql, p->n, p->v }, 1, &res, what, e);

	if (rc == 0 && changed)
		*changed = strtoll(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return rc;
}

/* Whether task id exists: BATON_ENOTFOUND naming it as role if not. */
static int
task_must_exist(struct pg_store *ps, int64_t id, const char *role,
		const char *what, struct err *e)
{
	struct params p = { 0 };
	int64_t n = 0;
	int rc;

	param_int(&p, id);
	rc = pg__query_int(ps, "SELECT COUNT(*) FROM tasks WHERE id = $1", &p, &n,
		       what, e);
	if (rc == 0 && !n)
		rc = err_set(e, BATON_ENOTFOUND,
			     "cannot %s: task %lld (%s) does not exist", what,
			     (long long)id, role);
	return rc;
}

/* Appends dep to t->deps (which has exactly t->nr_deps slots). */
static void
push_dep(struct task *t, int64_t dep)
{
	t->deps = xrealloc(t->deps, (t->nr_deps + 1) * sizeof(*t->deps));
	t->deps[t->nr_deps++] = dep;
}

/* The dependencies a claim read back as text: "3,5", or "" for none. */
static void
push_deps(struct task *t, const char *dep)
{
	while (*dep) {
		char *end;
		int64_t d = strtoll(dep, &end, 10);

		if (end == dep)
			break;
		push_dep(t, d);
		dep = *end == ',' ? end + 1 : end;
	}
}

/*
 * Fills the deps of rows[0..n), which are in increasing id order, or in
 * decreasing order when desc: the deps are read in the same order, so
 * one walk through both pairs them up.
 */
static int
load_deps(struct pg_store *ps, struct task *rows, int n, int desc,
	  const char *what, struct err *e)
{
	struct buf ids = BUF_INIT;
	struct params p = { 0 };
	PGresult *res = NULL;
	int64_t k[PG_LIST_PAGE];
	int i, j = 0, rc = 0;

	if (n == 0)
		return 0;
	assert(n <= PG_LIST_PAGE);
	for (i = 0; i < n; i++)
		k[i] = rows[i].id;
	add_id_array(&ids, k, (size_t)n);
	param_text(&p, ids.ptr);
	res = pg__exec(ps,
		       desc ? "SELECT task_id, depends_on FROM task_deps"
			      " WHERE task_id = ANY ($1::bigint[])"
			      " ORDER BY task_id DESC, depends_on"
			    : "SELECT task_id, depends_on FROM task_deps"
			      " WHERE task_id = ANY ($1::bigint[])"
			      " ORDER BY task_id, depends_on",
		       p.n, p.v, what, e);
	if (!res) {
		rc = BATON_ESTORE;
		goto out;
	}
	for (i = 0; i < PQntuples(res); i++) {
		int64_t id = pg__int64(res, i, 0);

		while (j < n && rows[j].id != id)
			j++;
		if (j < n)
			push_dep(&rows[j], pg__int64(res, i, 1));
	}
out:
	PQclear(res);
	buf_release(&ids);
	return rc;
}

/*
 * Reads task id (deps included) into *out, inside or outside a
 * transaction. Returns 1 when found, 0 when not, or an error.
 */
static int
read_task_by_id(struct pg_store *ps, int64_t id, struct task *out,
		const char *what, struct err *e)
{
	struct params p = { 0 };
	struct task t = { 0 };
	PGresult *res;
	int rc = 0;

	param_int(&p, id);
	res = pg__exec(ps, "SELECT " TASK_COLUMNS " FROM tasks WHERE id = $1",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) > 0) {
		read_task(res, 0, &t);
		rc = 1;
	}
	PQclear(res);
	if (rc == 1) {
		int drc = load_deps(ps, &t, 1, 0, what, e);

		if (drc < 0)
			rc = drc;
	}
	if (rc == 1)
		*out = t;
	else
		task_release(&t);
	return rc;
}

/*
 * Reads into *out the task whose id sql (with p) returns, if it returns
 * one: 1 when found, 0 when not, or an error.
 */
static int
read_task_found(struct pg_store *ps, const char *sql, const struct params *p,
		struct task *out, const char *what, struct err *e)
{
	int64_t id = 0;
	int rc = pg__query_int(ps, sql, p, &id, what, e);

	if (rc < 0 || id == 0)
		return rc;
	return read_task_by_id(ps, id, out, what, e);
}

/*
 * Appends a copy of ev with the given run, task and time inside the
 * caller's transaction; *ts_out and *seq_out get what was written.
 */
static int
add_event(struct pg_store *ps, const struct event *ev, char *run_id,
	  int64_t task_id, int64_t now, int64_t *ts_out, int64_t *seq_out,
	  const char *what, struct err *e)
{
	struct event row = *ev;

	row.run_id = ev->run_id ? ev->run_id : run_id;
	row.task_id = ev->task_id ? ev->task_id : task_id;
	row.ts = ev->ts ? ev->ts : now;
	*ts_out = row.ts;
	return pg__insert_event(ps, &row, seq_out, what, e);
}

/*
 * Zero rows changed by a versioned UPDATE: BATON_ENOTFOUND when the row
 * is gone, BATON_ECONFLICT when somebody else wrote it first. sql reads
 * the row's version by id.
 */
static int
lost_update(struct pg_store *ps, const char *sql, const char *noun,
	    int64_t id, int64_t version, const char *what, struct err *e)
{
	struct params p = { 0 };
	int64_t found = -1;
	int rc;

	param_int(&p, id);
	rc = pg__query_int(ps, sql, &p, &found, what, e);
	if (rc < 0)
		return rc;
	if (found < 0)
		return err_set(e, BATON_ENOTFOUND, "no %s %lld", noun,
			       (long long)id);
	if (found == version)
		return err_set(e, STORE_EREFUSED, "%s %lld: status refused",
			       noun, (long long)id);
	return err_set(e, BATON_ECONFLICT,
		       "%s %lld changed concurrently (expected version %lld)",
		       noun, (long long)id, (long long)version);
}

/* ---- tasks -------------------------------------------------------------- */

/*
 * Appends to the statement of a task's row (insert_stmt, update_stmt)
 * the event tev about that row, its task the row's id column, its other
 * values the parameters from $n on.
 */
static void
add_row_event(struct buf *sql, struct params *p, int n,
	      const struct event *tev)
{
	buf_addf(sql, ", baton_event_add($%d, id, $%d, $%d, $%d, $%d, $%d)",
		 n, n + 1, n + 2, n + 3, n + 4, n + 5);
	param_text(p, tev->run_id);
	param_int(p, tev->ts);
	param_text(p, tev->type);
	param_text(p, tev->from);
	param_text(p, tev->to);
	param_text(p, tev->data);
}

/*
 * A statement of a task's row and its event tev (NULL: none) failed: a
 * missing run is named, anything else is BATON_ESTORE (ps->state says
 * why).
 */
static int
row_stmt_failed(struct pg_store *ps, const struct event *tev,
		const char *what, struct err *e)
{
	if (tev && tev->run_id && !strcmp(ps->state, "23503"))
		return err_set(e, BATON_ENOTFOUND, "cannot %s: no run '%s'",
			       what, tev->run_id);
	return BATON_ESTORE;
}

/* The ts and seq of add_row_event's event tev, from the row of res. */
static void
row_event_read(struct pg_store *ps, const PGresult *res,
	       const struct event *tev, int64_t *ts_out, int64_t *seq_out)
{
	*ts_out = tev->ts;
	*seq_out = pg__int64(res, 0, 1);
	ps->notify_events = 1;
}

/*
 * The INSERT of a task as row and, when ev is given, its event *tev
 * (borrowing from ev; about the new task, whatever ev->task_id says),
 * in one statement into sql and p, which borrows from row and *tev. It
 * returns the new id and the event's seq.
 */
static int
insert_stmt(const struct task *row, int64_t created, int64_t now,
	    const struct event *ev, struct event *tev, struct buf *sql,
	    struct params *p, const char *what, struct err *e)
{
	int n = 4, rc;

	if (ev) {
		*tev = *ev;
		tev->task_id = 0;
		tev->ts = ev->ts ? ev->ts : now;
		rc = store__event_check(tev, what, e);
		if (rc < 0)
			return rc;
	}
	buf_adds(sql, "WITH i AS (INSERT INTO tasks (created_at, updated_at,"
		      " version"
		      TASK_STRINGS(SQL_COMMA_NAME)
		      TASK_INTS_MUTABLE(SQL_COMMA_NAME)
		      TASK_IDS_MUTABLE(SQL_COMMA_NAME) ") VALUES ($1, $2, $3");
	add_fields(sql, task_fields, ARRAY_SIZE(task_fields), 0, &n);
	buf_adds(sql, ") RETURNING id) SELECT id");
	param_int(p, created);
	param_int(p, now);
	param_int(p, 1);
	bind_task(p, row);
	if (ev)
		add_row_event(sql, p, n, tev);
	buf_adds(sql, " FROM i");
	return 0;
}

/*
 * What insert_stmt returned (res, NULL when it failed): the id into
 * *id_out and, with an event (tev), its ts and seq.
 */
static int
insert_result(struct pg_store *ps, const PGresult *res,
	      const struct event *tev, int64_t *id_out, int64_t *ts_out,
	      int64_t *seq_out, const char *what, struct err *e)
{
	if (!res)
		return row_stmt_failed(ps, tev, what, e);
	if (PQntuples(res) != 1)
		return err_set(e, BATON_ESTORE, "cannot %s: no id came back",
			       what);
	*id_out = pg__int64(res, 0, 0);
	if (tev)
		row_event_read(ps, res, tev, ts_out, seq_out);
	return 0;
}

/*
 * After the row of task t (id) is in: its dependencies, and the NOTIFY
 * of the work it makes when it is claimable now (queued, no dependency
 * left to wait for; one with not_before ahead is the supervisors'
 * timers').
 */
static int
insert_rest(struct pg_store *ps, const struct task *t, const struct task *row,
	    int64_t id, const char *what, struct err *e)
{
	struct buf deps = BUF_INIT;
	struct params p = { 0 };
	int64_t waiting = 0;
	int rc = 0;

	if (t->nr_deps) {
		add_id_array(&deps, t->deps, t->nr_deps);
		param_int(&p, id);
		param_text(&p, deps.ptr);
		rc = pg__run(ps,
			     "INSERT INTO task_deps (task_id, depends_on)"
			     " SELECT DISTINCT $1::bigint, d"
			     " FROM unnest($2::bigint[]) AS d",
			     p.n, p.v, what, e);
		buf_release(&deps);
	}
	if (rc == 0 && !strcmp(row->status, TASK_QUEUED) && t->nr_deps) {
		memset(&p, 0, sizeof(p));
		param_int(&p, id);
		rc = pg__query_int(ps,
				   "SELECT COUNT(*) FROM task_deps AS d"
				   " JOIN tasks AS p ON p.id = d.depends_on"
				   " WHERE d.task_id = $1 AND p.status <> 'done'",
				   &p, &waiting, what, e);
	}
	if (rc == 0 && !strcmp(row->status, TASK_QUEUED) && !waiting)
		pg__notify_work(ps, 1);
	return rc;
}

int
pg__task_insert(struct pg_store *ps, const struct task *t,
		const struct task *row, int64_t created, int64_t now,
		const struct event *ev, int64_t *id_out, int64_t *ts_out,
		int64_t *seq_out, const char *what, struct err *e)
{
	struct buf sql = BUF_INIT;
	struct params p = { 0 };
	struct event tev = { 0 };
	PGresult *res = NULL;
	int64_t id = 0;
	size_t k;
	int rc = 0;

	if (t->parent_id)
		rc = task_must_exist(ps, t->parent_id, "the parent", what, e);
	for (k = 0; rc == 0 && k < t->nr_deps; k++)
		rc = task_must_exist(ps, t->deps[k], "a dependency", what, e);
	if (rc == 0)
		rc = insert_stmt(row, created, now, ev, &tev, &sql, &p, what,
				 e);
	if (rc == 0) {
		res = pg__exec(ps, sql.ptr, p.n, p.v, what, e);
		rc = insert_result(ps, res, ev ? &tev : NULL, &id, ts_out,
				   seq_out, what, e);
	}
	if (rc == 0)
		rc = insert_rest(ps, t, row, id, what, e);
	if (rc == 0)
		*id_out = id;
	PQclear(res);
	buf_release(&sql);
	return rc;
}

/*
 * BEGIN and the row with its event in one round trip (pg__begin_exec),
 * for a task with no parent and no dependencies to check first.
 */
static int
task_add_begin(struct pg_store *ps, const struct task *t,
	       const struct task *row, int64_t created, int64_t now,
	       const struct event *ev, int64_t *id_out, int64_t *ts_out,
	       int64_t *seq_out, const char *what, struct err *e)
{
	struct buf sql = BUF_INIT;
	struct params p = { 0 };
	struct event tev = { 0 };
	PGresult *res = NULL;
	int rc;

	rc = insert_stmt(row, created, now, ev, &tev, &sql, &p, what, e);
	if (rc == 0)
		rc = pg__begin_exec(ps, &(struct pg_stmt){ sql.ptr, p.n, p.v },
				    1, &res, what, e);
	if (rc == 0 || rc == BATON_ESTORE) /* a missing run is named */
		rc = insert_result(ps, res, ev ? &tev : NULL, id_out, ts_out,
				   seq_out, what, e);
	if (rc == 0)
		rc = insert_rest(ps, t, row, *id_out, what, e);
	PQclear(res);
	buf_release(&sql);
	return rc;
}

/*
 * One try of task_add: k's claim (with k), pg__task_insert and the
 * key's binding in a transaction of its own: 1 added, with *id_out,
 * *ts_out and *seq_out what was written; 0 when k's key was claimed
 * before; 2 when that claim was given up before it could be read; or
 * an error.
 */
static int
task_add_try(struct pg_store *ps, const struct task *t, const struct task *row,
	     int64_t created, int64_t now, const struct event *ev,
	     struct store_key *k, int64_t *id_out, int64_t *ts_out,
	     int64_t *seq_out, const char *what, struct err *e)
{
	int64_t id = 0, ts = 0, evseq = 0;
	int taken = 1, rc;

	if (!k && !t->parent_id && !t->nr_deps) {
		rc = task_add_begin(ps, t, row, created, now, ev, &id, &ts,
				    &evseq, what, e);
	} else {
		rc = pg__begin_fenced(ps, what, e);
		/* the key first: a loser writes nothing, not even a seq */
		if (rc == 0 && k) {
			taken = pg__idem_take(ps, k, what, e);
			rc = taken < 0 ? taken : 0;
		}
		if (rc == 0 && taken == 1)
			rc = pg__task_insert(ps, t, row, created, now, ev, &id,
					     &ts, &evseq, what, e);
		if (rc == 0 && taken == 1 && k)
			rc = pg__idem_set(ps, k->key, id, what, e);
	}
	if (rc == 0 && taken == 1)
		rc = pg__commit(ps, what, e);
	if (rc == 0 && taken == 1) {
		*id_out = id;
		*ts_out = ts;
		*seq_out = evseq;
	}
	pg__rollback(ps);
	return rc < 0 ? rc : taken;
}

/* t and ev change only on success (store.h). */
int
pg__task_add(struct store *s, struct task *t, struct event *ev,
	     struct store_key *k, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct store_task_defaults d;
	struct task row = store__task_with_defaults(t, &d);
	int64_t now = time_now_ms(), id = 0, ts = 0, evseq = 0;
	int64_t created = t->created_at ? t->created_at : now;
	char what[256];
	int rc, tries = 0, gone = 0;

	snprintf(what, sizeof(what), "add task '%.200s'", t->title);
	if (!row.max_attempts)
		row.max_attempts = TASK_DEFAULT_MAX_ATTEMPTS;
	do {
		rc = task_add_try(ps, t, &row, created, now, ev, k, &id, &ts,
				  &evseq, what, e);
		/* the claim in our way was given up: claim again */
		if (rc == 2 && ++gone < 3)
			continue;
		if (rc == 2)
			return err_set(e, BATON_ESTORE,
				       "cannot %s: its idempotency key keeps "
				       "being given up",
				       what);
	} while (rc == 2 || pg__again(ps, rc, &tries, e));
	if (rc == 1)
		store__task_added(t, &row, id, created, now, ev, ts, evseq);
	return rc;
}

int
pg__task_get(struct store *s, int64_t id, struct task *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[64];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "read task %lld", (long long)id);
	do
		rc = read_task_by_id(ps, id, out, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc == 0)
		return err_set(e, BATON_ENOTFOUND, "no task %lld",
			       (long long)id);
	return rc < 0 ? rc : 0;
}

/*
 * The units of claimable work an update of a task to row makes (see
 * pg__notify_work): 1 when it is queued (again); when it is done, one
 * per task that depends on it (dependents, read by the update); 1 more
 * when it has an area and is not running (the area may be free now).
 * Everything else (a claim, a heartbeat, a task blocked or failed
 * without dependents) wakes nobody.
 */
static int
update_work(const struct task *row, int64_t dependents)
{
	int n = 0;

	if (!strcmp(row->status, TASK_QUEUED))
		n = 1;
	else if (!strcmp(row->status, TASK_DONE))
		n = (int)(dependents < 64 ? dependents : 64);
	if (row->area && *row->area && strcmp(row->status, TASK_RUNNING))
		n++;
	return n;
}

/*
 * The event ev of the update of row, as it is written (*tev, borrowing
 * from ev): about the task, at now unless ev says when.
 */
static int
update_event(const struct task *row, int64_t now, const struct event *ev,
	     struct event *tev, const char *what, struct err *e)
{
	*tev = *ev;
	tev->task_id = row->id;
	tev->ts = ev->ts ? ev->ts : now;
	return store__event_check(tev, what, e);
}

/*
 * The statement of a guarded update of a task (settle_exec): sql and p
 * get the UPDATE of the task to row and, when ev is given, its event
 * *tev (through baton_event_add, after the update, in the same
 * statement). An update that finds no row to change (gone, changed, or
 * in a status not in froms) raises PG_STATE_LOST_ROW, which aborts the
 * transaction. p borrows from row, froms and *tev.
 */
static int
update_stmt(const struct task *row, const char *froms, int64_t now,
	    const struct event *ev, struct event *tev, struct buf *sql,
	    struct params *p, const char *what, struct err *e)
{
	int n = 2, rc;

	if (ev) {
		rc = update_event(row, now, ev, tev, what, e);
		if (rc < 0)
			return rc;
	}
	buf_adds(sql, "WITH u AS (UPDATE tasks SET version = version + 1,"
		      " updated_at = $1");
	add_fields(sql, task_fields, ARRAY_SIZE(task_fields), 1, &n);
	buf_addf(sql, " WHERE id = $%d AND version = $%d"
		      " AND strpos($%d, '|' || status || '|') > 0"
		      " RETURNING id) SELECT id",
		 n, n + 1, n + 2);
	param_int(p, now);
	bind_task(p, row);
	param_int(p, row->id);
	param_int(p, row->version);
	param_text(p, froms);
	if (ev)
		add_row_event(sql, p, n + 3, tev);
	buf_adds(sql, " FROM (SELECT 1) AS o LEFT JOIN u ON true"
		      " WHERE baton_check(u.id IS NOT NULL, '"
		      PG_STATE_LOST_ROW "', NULL)");
	return 0;
}

/*
 * The NOTIFY of the work a task done makes, after its commit: one unit
 * a task that depends on it ($1, at most 64), plus $2 (1: it had an
 * area, which is free now); nothing when that is 0.
 */
#define DONE_WORK_SQL                                                          \
	"SELECT pg_notify('" PG_CHANNEL_WORK "', n::text)"                     \
	" FROM (SELECT LEAST(COUNT(*), 64) + $2::int AS n FROM task_deps"      \
	" WHERE depends_on = $1::bigint) AS w WHERE n > 0"

/*
 * The NOTIFYs after the settle of a task to row commits, into nf: the
 * events' (events: it or a claim with it wrote one), and the work it
 * makes (update_work), which for a task done is counted after the
 * commit from its dependents (DONE_WORK_SQL).
 */
static void
settle_notify(const struct task *row, int events, struct pg_notify *nf)
{
	int work = update_work(row, 0); /* done: only its area's unit */

	if (events)
		pg__notify_add(nf, PG_NOTIFY_EVENTS_SQL, 0, 0, 0);
	if (!strcmp(row->status, TASK_DONE))
		pg__notify_add(nf, DONE_WORK_SQL, 2, row->id, work);
	else if (work)
		pg__notify_add(nf, PG_NOTIFY_WORK_SQL, 1, work, 0);
}

/*
 * Whether the write of row at now is on record: after a try that lost
 * its connection once its COMMIT was sent (ps->unsure), a later try
 * found the row changed. It is this settle's own write when the row
 * holds the version after row's, row's status and now as updated_at.
 * Then *seq_out gets the seq of the event of that write of type (NULL:
 * none), found by its xmin, which is the row's. 1 when it is, 0 when
 * not, or an error.
 */
static int
settle_landed(struct pg_store *ps, const struct task *row, int64_t now,
	      const char *type, int64_t *seq_out, const char *what,
	      struct err *e)
{
	struct params p = { 0 };
	PGresult *res;
	int ours;

	param_int(&p, row->id);
	param_int(&p, row->version + 1);
	param_text(&p, row->status);
	param_int(&p, now);
	param_text(&p, type);
	res = pg__exec(ps,
		       "SELECT (SELECT e.seq FROM events AS e"
		       " WHERE e.task_id = t.id AND e.xmin = t.xmin"
		       " AND e.type = $5 ORDER BY e.seq LIMIT 1)"
		       " FROM tasks AS t WHERE t.id = $1 AND t.version = $2"
		       " AND t.status = $3 AND t.updated_at = $4",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	ours = PQntuples(res) == 1;
	if (ours)
		*seq_out = pg__int64(res, 0, 0);
	PQclear(res);
	return ours;
}

/*
 * One try of the settle of a task to row (fenced), with its event, then
 * (NULL: none) after it, and the COMMIT in one message: one round trip
 * (pg__exec_commit). *then_out gets then's result, *ts_out and *seq_out
 * the event's. A row that changed first is the error of lost_update,
 * unless an earlier try left the outcome unknown (*unsure) and the row
 * is the one this settle wrote (settle_landed): then it is done, and
 * *then_out is NULL.
 */
static int
settle_exec(struct pg_store *ps, const struct task *row, const char *froms,
	    int64_t now, const struct event *ev, const struct pg_stmt *then,
	    PGresult **then_out, int *unsure, int64_t *ts_out,
	    int64_t *seq_out, const char *what, struct err *e)
{
	struct buf sql = BUF_INIT;
	struct params p = { 0 };
	struct event tev = { 0 };
	struct pg_notify after = { .n = 0 };
	struct pg_stmt stmts[2];
	PGresult *res[2] = { NULL, NULL };
	int rc, lost;

	*then_out = NULL;
	rc = update_stmt(row, froms, now, ev, &tev, &sql, &p, what, e);
	if (rc < 0)
		goto out;
	stmts[0] = (struct pg_stmt){ sql.ptr, p.n, p.v };
	if (then)
		stmts[1] = *then;
	settle_notify(row, ev || then, &after);
	rc = pg__exec_commit(ps, stmts, then ? 2 : 1, &after, res, what, e);
	*unsure |= ps->unsure;
	lost = rc == BATON_EFENCED || !strcmp(ps->state, PG_STATE_LOST_ROW);
	if (rc < 0 && lost && *unsure) {
		int landed = settle_landed(ps, row, now, ev ? tev.type : NULL,
					   seq_out, what, e);

		if (landed != 0) {
			*ts_out = tev.ts;
			rc = landed < 0 ? landed : 0;
			goto out;
		}
	}
	if (rc < 0 && rc != BATON_EFENCED && lost)
		rc = lost_update(ps, "SELECT version FROM tasks WHERE id = $1",
				 "task", row->id, row->version, what, e);
	else if (rc == BATON_ESTORE) /* a missing run is named */
		rc = row_stmt_failed(ps, ev ? &tev : NULL, what, e);
	if (rc < 0)
		goto out;
	if (ev) {
		*ts_out = tev.ts;
		*seq_out = pg__int64(res[0], 0, 1);
	}
	*then_out = res[1];
	res[1] = NULL;
out:
	PQclear(res[0]);
	PQclear(res[1]);
	buf_release(&sql);
	return rc;
}

/* One try of the guarded update of a task: row and event, or neither. */
static int
task_update_try(struct pg_store *ps, const struct task *row,
		const char *froms, int64_t now, const struct event *ev,
		int *unsure, int64_t *ts_out, int64_t *seq_out,
		const char *what, struct err *e)
{
	PGresult *none;

	return settle_exec(ps, row, froms, now, ev, NULL, &none, unsure,
			   ts_out, seq_out, what, e);
}

int
pg__task_update(struct store *s, struct task *t, const char *froms,
		struct event *ev, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct store_task_defaults d;
	struct task row = store__task_with_defaults(t, &d);
	int64_t now = time_now_ms(), ts = 0, evseq = 0;
	char what[64];
	int rc, tries = 0, unsure = 0;

	snprintf(what, sizeof(what), "update task %lld", (long long)t->id);
	do
		rc = task_update_try(ps, &row, froms, now, ev, &unsure, &ts,
				     &evseq, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc < 0)
		return rc;

	t->version++;
	t->updated_at = now;
	if (ev) {
		ev->task_id = t->id;
		ev->ts = ts;
		ev->seq = evseq;
	}
	return 0;
}

/*
 * One page of a task list into rows (deps filled); *n_out gets the
 * number of rows, which are the caller's to release on success only.
 */
static int
task_page_try(struct pg_store *ps, const char *sql, const struct params *p,
	      int desc, struct task *rows, int *n_out, const char *what,
	      struct err *e)
{
	PGresult *res = pg__exec(ps, sql, p->n, p->v, what, e);
	int i, n, rc;

	if (!res)
		return BATON_ESTORE;
	n = PQntuples(res);
	assert(n <= PG_LIST_PAGE);
	for (i = 0; i < n; i++)
		read_task(res, i, &rows[i]);
	PQclear(res);
	rc = load_deps(ps, rows, n, desc, what, e);
	if (rc < 0) {
		for (i = 0; i < n; i++)
			task_release(&rows[i]);
		return rc;
	}
	*n_out = n;
	return 0;
}

/*
 * Tasks in id order (or newest first), a page at a time: each page
 * continues past the last id of the previous one and has its deps
 * filled before its callbacks run.
 */
int
pg__task_list(struct store *s, const struct store_task_filter *f,
	      store_task_cb *cb, void *arg, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *what = "list tasks";
	struct task *rows = xcalloc(PG_LIST_PAGE, sizeof(*rows));
	struct buf sql = BUF_INIT;
	int64_t cursor = !f->newest_first ? 0 :
			 f->before_id > 0 ? f->before_id :
					    INT64_MAX;
	int remaining = f->limit > 0 ? f->limit : -1;
	int rc = 0, n = 0, i, page, stop = 0, k = 3;

	buf_addf(&sql, "SELECT " TASK_COLUMNS " FROM tasks WHERE id %s $1",
		 f->newest_first ? "<" : ">");
	if (f->status)
		buf_addf(&sql, " AND status = $%d", k++);
	if (f->parent_id)
		buf_addf(&sql, " AND parent_id = $%d", k++);
	buf_addf(&sql, " ORDER BY id%s LIMIT $2",
		 f->newest_first ? " DESC" : "");
	while (!stop && remaining != 0) {
		struct params p = { 0 };
		int tries = 0;

		page = remaining > 0 && remaining < PG_LIST_PAGE
			       ? remaining
			       : PG_LIST_PAGE;
		param_int(&p, cursor);
		param_int(&p, page);
		if (f->status)
			param_text(&p, f->status);
		if (f->parent_id)
			param_int(&p, f->parent_id);
		do
			rc = task_page_try(ps, sql.ptr, &p, f->newest_first,
					   rows, &n, what, e);
		while (pg__again(ps, rc, &tries, e));
		if (rc < 0)
			goto out;
		for (i = 0; i < n && !stop; i++)
			stop = cb(&rows[i], arg);
		if (n < page)
			break;
		cursor = rows[n - 1].id;
		if (remaining > 0)
			remaining -= n;
		for (i = 0; i < n; i++)
			task_release(&rows[i]);
		n = 0;
	}
out:
	for (i = 0; i < n; i++)
		task_release(&rows[i]);
	free(rows);
	buf_release(&sql);
	return rc;
}

static int
task_counts_try(struct pg_store *ps, const char *const *statuses,
		int64_t *got, size_t n, struct err *e)
{
	size_t k;
	int rc = 0;

	for (k = 0; rc == 0 && k < n; k++) {
		struct params p = { 0 };

		got[k] = 0;
		param_text(&p, statuses[k]);
		rc = pg__query_int(ps, "SELECT COUNT(*) FROM tasks WHERE status = $1",
			       &p, &got[k], "count tasks", e);
	}
	return rc;
}

/* One COUNT per status, through the (status, ...) index. */
int
pg__task_counts(struct store *s, const char *const *statuses,
		int64_t *counts, size_t n, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t *got = xcalloc(n ? n : 1, sizeof(*got));
	int rc, tries = 0;

	do
		rc = task_counts_try(ps, statuses, got, n, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc == 0 && n)
		memcpy(counts, got, n * sizeof(*counts));
	free(got);
	return rc;
}

/* What a claim try returns when its pick overlapped a committed claim. */
#define CLAIM_OVERLAPS 1

/*
 * The holder as the JSON string store__claim_data writes for it (the
 * "worker" of the task_claimed event that baton_task_claim writes):
 * cut out of that function's own output, so both backends agree.
 */
static char *
claim_worker_json(const char *holder)
{
	static const char head[] = "{\"worker\":";
	static const char tail[] = ",\"token\":0,\"attempt\":0}";
	char *data = store__claim_data(holder, 0, 0);
	size_t len = data ? strlen(data) : 0;
	char *out;

	if (len < strlen(head) + strlen(tail) ||
	    strncmp(data, head, strlen(head)) ||
	    strcmp(data + len - strlen(tail), tail)) {
		free(data);
		return xstrdup("null");
	}
	out = xstrndup(data + strlen(head), len - strlen(head) - strlen(tail));
	free(data);
	return out;
}

/*
 * The columns of a claim (baton_task_claim of pg/008-claim.sql) that
 * claim_read reads: the task, its dependencies, the overlap.
 */
#define CLAIM_SELECT                                                           \
	"SELECT " TASK_COLUMNS ", claim_deps, claim_overlap FROM (SELECT"      \
	" (c.claim_task).*, c.claim_deps, c.claim_overlap"                     \
	" FROM baton_task_claim("

/*
 * What a claim statement returned: no row is BATON_ENOTFOUND, a row
 * with claim_overlap is CLAIM_OVERLAPS with *overlap set (nothing
 * written either way), else 0 with *out filled. The statement was
 * committed in its message (claim_try, settle_claim_try).
 */
static int
claim_read(const PGresult *res, int64_t *overlap, struct task *out,
	   const char *what, struct err *e)
{
	int nf = PQnfields(res);
	struct task t = { 0 };

	if (PQntuples(res) == 0)
		return err_set(e, BATON_ENOTFOUND, "nothing to claim");
	if (!PQgetisnull(res, 0, nf - 1)) {
		*overlap = pg__int64(res, 0, nf - 1);
		return CLAIM_OVERLAPS;
	}
	if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0))
		return err_set(e, BATON_ESTORE, "cannot %s: no task came back",
			       what);
	read_task(res, 0, &t);
	push_deps(&t, PQgetvalue(res, 0, nf - 2));
	*out = t;
	return 0;
}

/*
 * The claim statement (see the top of the file and pg/008-claim.sql):
 * it picks and locks the best task not in skip ($5), rechecks its area
 * under the area lock, takes it with a fresh token, and logs.
 * claim_read reads what it returns; claim_params gives its parameters.
 */
#define CLAIM_SQL CLAIM_SELECT "$1, $2, $3, $4, $5::bigint[]) AS c) AS r"

/*
 * The parameters of CLAIM_SQL into p, which borrows holder, skip and
 * *worker (the holder's JSON: the caller's to free).
 */
static void
claim_params(const char *holder, int64_t lease_ms, int64_t now,
	     const char *skip, char **worker, struct params *p)
{
	*worker = claim_worker_json(holder);
	param_int(p, now);
	param_text(p, holder);
	param_text(p, *worker);
	param_int(p, now + lease_ms);
	param_text(p, skip);
}

/*
 * The NOTIFY after a claim's COMMIT: of its event, when it took a task
 * (pg/017-claim-notify.sql). No NOTIFY of work: a lease makes none; the
 * supervisors learn when it falls due from their sweeps
 * (store_task_next_due).
 */
#define CLAIM_NOTIFY_SQL                                                       \
	"SELECT pg_notify('" PG_CHANNEL_EVENTS "', '')"                        \
	" WHERE current_setting('baton.claimed', true) = 'y'"

/* A claim's message as sent, for finding out what it did when lost. */
struct claim_sent {
	int unsure; /* its connection was lost once it was sent */
	int pid;    /* the server process of its session */
	int64_t now; /* the claim's started_at (lease: now + lease_ms) */
};

/*
 * The task that a claim whose connection was lost took (sent), into
 * *out: 1 when it took one, 0 when not, or an error. Its session may
 * still be running it (waiting for the area lock, say), so first that
 * session must run nothing (pg__wait_idle); one left idle inside its
 * transaction never got its COMMIT and takes nothing. Then the claim
 * is on record or never will be: the running task of holder that it
 * started at its now with the lease it asked for. A holder is one
 * worker, which claims one task at a time, and each try draws its own
 * now, so no other claim of the holder matches.
 */
static int
claim_landed_alone(struct pg_store *ps, const char *holder, int64_t lease_ms,
		   const struct claim_sent *sent, struct task *out,
		   const char *what, struct err *e)
{
	struct params p = { 0 };

	if (pg__wait_idle(ps, sent->pid, what, e))
		return BATON_ESTORE;
	param_text(&p, holder);
	param_int(&p, sent->now);
	param_int(&p, sent->now + lease_ms);
	return read_task_found(ps,
			       "SELECT id FROM tasks WHERE status = 'running'"
			       " AND lease_holder = $1 AND started_at = $2"
			       " AND lease_expires_at = $3",
			       &p, out, what, e);
}

/*
 * One try of the claim: BEGIN, CLAIM_SQL, the COMMIT and the NOTIFY of
 * its event (CLAIM_NOTIFY_SQL), in one message: one round trip. A try
 * after one whose connection was lost once sent (sent->unsure) first
 * finds out whether that one took a task (claim_landed_alone), and
 * returns it when it did.
 */
static int
claim_try(struct pg_store *ps, const char *holder, int64_t lease_ms,
	  const char *skip, struct claim_sent *sent, int64_t *overlap,
	  struct task *out, struct err *e)
{
	const char *what = "claim a task";
	struct pg_notify after = { .n = 0 };
	struct params p = { 0 };
	PGresult *res = NULL;
	char *worker;
	int rc;

	if (sent->unsure) {
		rc = claim_landed_alone(ps, holder, lease_ms, sent, out, what,
					e);
		if (rc != 0)
			return rc < 0 ? rc : 0;
		sent->unsure = 0;
	}
	sent->now = time_now_ms();
	sent->pid = ps->pid;
	claim_params(holder, lease_ms, sent->now, skip, &worker, &p);
	pg__notify_add(&after, CLAIM_NOTIFY_SQL, 0, 0, 0);
	rc = pg__exec_commit_xidless(ps,
				     &(struct pg_stmt){ CLAIM_SQL, p.n, p.v },
				     1, &after, &res, what, e);
	sent->unsure |= ps->unsure;
	if (rc == 0)
		rc = claim_read(res, overlap, out, what, e);
	PQclear(res);
	free(worker);
	return rc;
}

/*
 * The claim: tries until one takes a task or finds none, passing over
 * each task whose area a concurrent claim took first. Not fenced:
 * claiming is how a worker gets a lease.
 */
int
pg__task_claim(struct store *s, const char *holder, int64_t lease_ms,
	       struct task *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t skipped[CLAIM_MAX_SKIPS];
	struct buf skip = BUF_INIT;
	size_t nr = 0;
	int rc;

	for (;;) {
		struct claim_sent sent = { 0 };
		int64_t overlap = 0;
		int tries = 0;

		buf_reset(&skip);
		add_id_array(&skip, skipped, nr);
		do
			rc = claim_try(ps, holder, lease_ms, skip.ptr, &sent,
				       &overlap, out, e);
		while (pg__again(ps, rc, &tries, e));
		if (rc != CLAIM_OVERLAPS)
			break;
		if (nr == CLAIM_MAX_SKIPS) {
			rc = err_set(e, BATON_ENOTFOUND, "nothing to claim");
			break;
		}
		skipped[nr++] = overlap;
	}
	buf_release(&skip);
	return rc;
}

/*
 * The task that the transaction of the settle of task settled claimed
 * for holder, into *next: after a lost connection, the settle was found
 * on record (settle_landed), and what its claim took is the running
 * task of holder that the same transaction wrote (the same xmin). 1
 * when there is one, 0 when not, or an error.
 */
static int
claim_landed(struct pg_store *ps, int64_t settled, const char *holder,
	     struct task *next, const char *what, struct err *e)
{
	struct params p = { 0 };

	param_int(&p, settled);
	param_text(&p, holder);
	return read_task_found(ps,
			       "SELECT n.id FROM tasks AS n JOIN tasks AS t"
			       " ON n.xmin = t.xmin WHERE t.id = $1"
			       " AND n.status = 'running'"
			       " AND n.lease_holder = $2 AND n.id <> t.id",
			       &p, next, what, e);
}

/*
 * One try of settle-and-claim: the settle (fenced), then the claim of
 * the next task, and the COMMIT, in one message (settle_exec). A
 * settle that fails aborts the claim with it. A pick whose area a
 * concurrent claim took first leaves the claim to pg__task_claim, after
 * the commit (*overlap set). A settle found on record after a lost
 * connection (settle_landed) returns what its claim took (claim_landed).
 */
static int
settle_claim_try(struct pg_store *ps, const struct task *row,
		 const char *froms, int64_t now, const struct event *ev,
		 const char *holder, int64_t lease_ms, int *unsure,
		 int64_t *ts_out, int64_t *seq_out, int64_t *overlap,
		 struct task *next, const char *what, struct err *e)
{
	struct params p = { 0 };
	struct pg_stmt claim;
	struct task t = { 0 };
	PGresult *res = NULL;
	char *worker;
	int rc;

	*overlap = 0;
	claim_params(holder, lease_ms, now, "{}", &worker, &p);
	claim = (struct pg_stmt){ CLAIM_SQL, p.n, p.v };
	rc = settle_exec(ps, row, froms, now, ev, &claim, &res, unsure,
			 ts_out, seq_out, what, e);
	free(worker);
	if (rc < 0)
		return rc;
	/* settled: a claim that fails is no claim (store.h) */
	if (!res)
		claim_landed(ps, row->id, holder, next, "claim a task", NULL);
	else if (claim_read(res, overlap, &t, "claim a task", NULL))
		task_release(&t);
	else
		*next = t;
	PQclear(res);
	return 0;
}

int
pg__task_settle_claim(struct store *s, struct task *t, const char *froms,
		      struct event *ev, const char *holder, int64_t lease_ms,
		      struct task *next, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct store_task_defaults d;
	struct task row = store__task_with_defaults(t, &d);
	int64_t now = time_now_ms(), ts = 0, evseq = 0, overlap = 0;
	char what[64];
	int rc, tries = 0, unsure = 0;

	snprintf(what, sizeof(what), "update task %lld", (long long)t->id);
	do
		rc = settle_claim_try(ps, &row, froms, now, ev, holder,
				      lease_ms, &unsure, &ts, &evseq, &overlap,
				      next, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc < 0)
		return rc;

	t->version++;
	t->updated_at = now;
	if (ev) {
		ev->task_id = t->id;
		ev->ts = ts;
		ev->seq = evseq;
	}
	if (overlap && pg__task_claim(s, holder, lease_ms, next, e) && e)
		*e = (struct err)ERR_INIT;
	return 0;
}

/* ---- the batched queue (store_task_claim_batch, _settle_batch) ---------- */

/* The columns of a batch of claims (pg/009-batch.sql). */
#define CLAIM_BATCH_SELECT                                                     \
	"SELECT " TASK_COLUMNS ", claim_deps, claim_xid, claim_seq"            \
	" FROM (SELECT (c.claim_task).*, c.claim_deps, c.claim_xid,"           \
	" c.claim_seq FROM baton_task_claim_batch("

/* Row i of a claim batch into *out, its dependencies included. */
static void
claim_batch_row(const PGresult *res, int i, struct task *out)
{
	read_task(res, i, out);
	push_deps(out, PQgetvalue(res, i, PQnfields(res) - 3));
}

/* A batch of claims (pg/009-batch.sql); claim_batch_params gives its values. */
#define CLAIM_BATCH_SQL                                                        \
	CLAIM_BATCH_SELECT "$1, $2, $3, $4, $5::integer) AS c) AS r"

/*
 * The parameters of CLAIM_BATCH_SQL into p, which borrows holder and
 * *worker (the holder's JSON: the caller's to free).
 */
static void
claim_batch_params(const char *holder, int64_t lease_ms, int64_t now,
		   size_t max, char **worker, struct params *p)
{
	*worker = claim_worker_json(holder);
	param_int(p, now);
	param_text(p, holder);
	param_text(p, *worker);
	param_int(p, now + lease_ms);
	param_int(p, (int64_t)max);
}

/*
 * What a batch of claims returned (res: the rows, at most max): 0, or
 * BATON_ESTORE when more came back. Marks the events for NOTIFY and
 * ps->xid with the claims' xid when there are rows.
 */
static int
claim_batch_check(struct pg_store *ps, const PGresult *res, size_t max,
		  const char *what, struct err *e)
{
	size_t got = (size_t)PQntuples(res);

	if (got > max)
		return err_set(e, BATON_ESTORE,
			       "cannot %s: %zu came back for a batch of %zu",
			       what, got, max);
	if (got) {
		snprintf(ps->xid, sizeof(ps->xid), "%s",
			 PQgetvalue(res, 0, PQnfields(res) - 2));
		ps->notify_events = 1;
	}
	return 0;
}

/*
 * One try of a batch of claims: BEGIN and baton_task_claim_batch in one
 * round trip, then the commit. *n gets the number of rows in out.
 */
static int
claim_batch_try(struct pg_store *ps, const char *holder, int64_t lease_ms,
		size_t max, struct task *out, size_t *n, struct err *e)
{
	const char *what = "claim tasks";
	struct params p = { 0 };
	PGresult *res;
	size_t i, got = 0;
	char *worker;
	int rc;

	claim_batch_params(holder, lease_ms, time_now_ms(), max, &worker, &p);
	res = pg__begin_query(ps, &(struct pg_stmt){ CLAIM_BATCH_SQL, p.n,
						     p.v },
			      what, e);
	free(worker);
	if (!res)
		return BATON_ESTORE;
	rc = claim_batch_check(ps, res, max, what, e);
	got = (size_t)PQntuples(res);
	if (rc == 0 && got == 0)
		rc = err_set(e, BATON_ENOTFOUND, "nothing to claim");
	if (rc == 0)
		rc = pg__commit(ps, what, e);
	if (rc == 0) {
		for (i = 0; i < got; i++)
			claim_batch_row(res, (int)i, &out[i]);
		*n = got;
	}
	pg__rollback(ps);
	PQclear(res);
	return rc;
}

int
pg__task_claim_batch(struct store *s, const char *holder, int64_t lease_ms,
		     size_t max, struct task *out, size_t *n, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int rc, tries = 0;

	do
		rc = claim_batch_try(ps, holder, lease_ms, max, out, n, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}

/* The claims a batch of settles makes after it (settle_batch). */
struct pg_claims {
	const char *holder;
	int64_t lease_ms;
	size_t max;
	struct task *out; /* max of them */
	size_t got;
};

/* The committed claims of res into c->out. */
static void
claims_read(const PGresult *res, struct pg_claims *c)
{
	size_t i;

	c->got = (size_t)PQntuples(res);
	for (i = 0; i < c->got; i++)
		claim_batch_row(res, (int)i, &c->out[i]);
}

/*
 * Why the row of a fenced settle refused it: BATON_EFENCED when the
 * lease moved on, else as lost_update says.
 */
static int
settle_refused(struct pg_store *ps, const struct task *row, int64_t token,
	       const char *what, struct err *e)
{
	struct params p = { 0 };
	int64_t have = -1;
	int rc;

	param_int(&p, row->id);
	rc = pg__query_int(ps, "SELECT COALESCE(lease_token, 0) FROM tasks"
			       " WHERE id = $1",
			   &p, &have, what, e);
	if (rc < 0)
		return rc;
	if (have >= 0 && have != token)
		return err_set(e, BATON_EFENCED,
			       "cannot %s: the lease on task %lld was taken "
			       "over",
			       what, (long long)row->id);
	return lost_update(ps, "SELECT version FROM tasks WHERE id = $1",
			   "task", row->id, row->version, what, e);
}

/*
 * A batch of settles is one statement (settle_set_sql): the rows go as
 * parallel arrays, one per column, one element a settle, and one UPDATE
 * takes them all, fenced and guarded as update_stmt's one row is; the
 * events of the rows it matched go to baton_events_add
 * (pg/014-claim-set.sql) in the same statement, in the batch's order.
 * A statement a settle, even pipelined, cost the server about as much
 * again in its own start and end as the update itself.
 */

/* The SQL type of the array of each of task_fields. */
#define TEXT_ARRAY(f) "text[]",
#define INT_ARRAY(f)  "bigint[]",
static const char *const task_field_arrays[] = { TASK_STRINGS(TEXT_ARRAY)
		TASK_INTS_MUTABLE(INT_ARRAY) TASK_IDS_MUTABLE(INT_ARRAY) };
#undef TEXT_ARRAY
#undef INT_ARRAY

/*
 * The arrays of a batch, in the order of their parameters from $2 on
 * ($1 is the time): each settle's id, version, froms and lease token
 * (store_task_settle_batch fences every one), its row's task_fields,
 * then its event (type NULL: none).
 */
enum {
	SA_ID,
	SA_VERSION,
	SA_FROMS,
	SA_TOKEN,
	SA_FIELDS,
	SA_EV_RUN = SA_FIELDS + ARRAY_SIZE(task_fields),
	SA_EV_TS,
	SA_EV_TYPE,
	SA_EV_FROM,
	SA_EV_TO,
	SA_EV_DATA,
	SA_NR
};
_Static_assert(1 + SA_NR <= PARAMS_MAX, "a batch's arrays fit PARAMS_MAX");

/*
 * The statement of a batch: v numbers the settles (s_ord, from 1), u is
 * the UPDATE of those whose row still matches, e their events. A row
 * comes back for each settle that went through: its s_ord, how many
 * tasks depend on it (update_work) and the seqs of all the events, in
 * s_ord order.
 */
static void
settle_set_sql(struct buf *sql)
{
	static const char *const events[] = { "u.e_run", "u.s_id", "u.e_ts",
					      "u.e_type", "u.e_from",
					      "u.e_to", "u.e_data" };
	size_t k;
	int n = 6; /* after $1, the time, and the four of SA_ID .. SA_TOKEN */

	buf_adds(sql, "WITH v AS (SELECT * FROM unnest($2::bigint[],"
		      " $3::bigint[], $4::text[], $5::bigint[]");
	for (k = 0; k < ARRAY_SIZE(task_fields); k++)
		buf_addf(sql, ", $%d::%s", n++, task_field_arrays[k]);
	buf_addf(sql, ", $%d::text[], $%d::bigint[], $%d::text[],"
		      " $%d::text[], $%d::text[], $%d::text[])",
		 n, n + 1, n + 2, n + 3, n + 4, n + 5);
	buf_adds(sql, " WITH ORDINALITY AS v(s_id, s_version, s_froms,"
		      " s_token");
	for (k = 0; k < ARRAY_SIZE(task_fields); k++)
		buf_addf(sql, ", %s", task_fields[k]);
	buf_adds(sql, ", e_run, e_ts, e_type, e_from, e_to, e_data, s_ord)),"
		      " u AS (UPDATE tasks AS t SET version = t.version + 1,"
		      " updated_at = $1");
	for (k = 0; k < ARRAY_SIZE(task_fields); k++)
		buf_addf(sql, ", %s = v.%s", task_fields[k], task_fields[k]);
	buf_adds(sql, " FROM v WHERE t.id = v.s_id"
		      " AND t.version = v.s_version"
		      " AND strpos(v.s_froms, '|' || t.status || '|') > 0"
		      " AND t.lease_token = v.s_token"
		      " RETURNING v.s_ord, v.s_id, v.e_run, v.e_ts, v.e_type,"
		      " v.e_from, v.e_to, v.e_data, (SELECT COUNT(*)"
		      " FROM task_deps AS d WHERE d.depends_on = t.id)"
		      " AS dependents),"
		      " e AS (SELECT baton_events_add(");
	for (k = 0; k < ARRAY_SIZE(events); k++)
		buf_addf(sql, "%sarray_agg(%s ORDER BY u.s_ord)",
			 k ? ", " : "", events[k]);
	buf_adds(sql, ") AS seqs FROM u WHERE u.e_type IS NOT NULL"
		      " HAVING COUNT(*) > 0)"
		      " SELECT u.s_ord, u.dependents, (SELECT seqs FROM e)"
		      " FROM u ORDER BY u.s_ord");
}

/* A number of a batch's array a, NULL when has is 0. */
static void
add_int_elem(struct buf *a, size_t k, int has, int64_t v)
{
	if (k)
		buf_addch(a, ',');
	if (has)
		buf_addf(a, "%lld", (long long)v);
	else
		buf_adds(a, "NULL");
}

/* Appends settle k of a batch (row, its event tev or NULL) to arrays a. */
static void
settle_set_add(struct buf *a, size_t k, const struct task *row,
	       const char *froms, int64_t token, const struct event *tev)
{
	int c = SA_FIELDS;

	add_int_elem(&a[SA_ID], k, 1, row->id);
	add_int_elem(&a[SA_VERSION], k, 1, row->version);
	add_text_elem(&a[SA_FROMS], k, froms);
	add_int_elem(&a[SA_TOKEN], k, 1, token);
#define ELEM_TEXT(f) add_text_elem(&a[c++], k, row->f);
#define ELEM_INT(f)  add_int_elem(&a[c++], k, 1, row->f);
#define ELEM_ID(f)   add_int_elem(&a[c++], k, row->f != 0, row->f);
	TASK_STRINGS(ELEM_TEXT)
	TASK_INTS_MUTABLE(ELEM_INT)
	TASK_IDS_MUTABLE(ELEM_ID)
#undef ELEM_TEXT
#undef ELEM_INT
#undef ELEM_ID
	add_text_elem(&a[SA_EV_RUN], k, tev ? tev->run_id : NULL);
	add_int_elem(&a[SA_EV_TS], k, tev != NULL, tev ? tev->ts : 0);
	add_text_elem(&a[SA_EV_TYPE], k, tev ? tev->type : NULL);
	add_text_elem(&a[SA_EV_FROM], k, tev ? tev->from : NULL);
	add_text_elem(&a[SA_EV_TO], k, tev ? tev->to : NULL);
	add_text_elem(&a[SA_EV_DATA], k, tev ? tev->data : NULL);
}

/*
 * The next number of a bigint array literal ("{4,5}") from *cur (at its
 * '{' or at a ',') into *out, *cur moving past it: 0, or -1 when there
 * is none.
 */
static int
array_next(const char **cur, int64_t *out)
{
	char *end;

	if (**cur != '{' && **cur != ',')
		return -1;
	errno = 0;
	*out = strtoll(*cur + 1, &end, 10);
	if (end == *cur + 1 || errno)
		return -1;
	*cur = end;
	return 0;
}

/* The sent settles of a batch: which of v each is, and its event. */
struct settle_sent {
	size_t i;
	struct store_task_defaults d;
	struct task row;
	struct event tev;
	int has_ev;
};

/*
 * What the statement of a batch returned into changed, ts and seq (by
 * index of v), *work adding up the work of the settles that went
 * through.
 */
static int
settle_set_read(struct pg_store *ps, const PGresult *res,
		const struct settle_sent *sent, size_t k, int64_t *changed,
		int64_t *ts, int64_t *seq, int *work, const char *what,
		struct err *e)
{
	int r, nr = PQntuples(res);
	/* every row has the seqs of all the events, in the rows' order */
	const char *seqs = nr && !PQgetisnull(res, 0, 2) ?
				   PQgetvalue(res, 0, 2) :
				   "";
	size_t nev = 0;

	for (r = 0; r < nr; r++) {
		int64_t ord = pg__int64(res, r, 0);
		const struct settle_sent *s;

		if (ord < 1 || (size_t)ord > k)
			return err_set(e, BATON_ESTORE,
				       "cannot %s: settle %lld came back "
				       "for a batch of %zu",
				       what, (long long)ord, k);
		s = &sent[ord - 1];
		changed[s->i] = 1;
		*work += update_work(&s->row, pg__int64(res, r, 1));
		if (!s->has_ev)
			continue;
		nev++;
		if (array_next(&seqs, &seq[s->i]) < 0)
			return err_set(e, BATON_ESTORE,
				       "cannot %s: no seq came back for the "
				       "event of task %lld",
				       what, (long long)s->row.id);
		ts[s->i] = s->tev.ts;
	}
	if (nev)
		ps->notify_events = 1;
	return 0;
}

/*
 * The statement of a batch's settles (those of v with no rc yet), with
 * what settle_set_read needs to read its rows: k of them were sent.
 */
struct settle_msg {
	struct settle_sent *sent;
	size_t k;
	struct buf sql, a[SA_NR];
	struct params p;
};

static void
settle_msg_release(struct settle_msg *m)
{
	int c;

	free(m->sent);
	buf_release(&m->sql);
	for (c = 0; c < SA_NR; c++)
		buf_release(&m->a[c]);
}

/* Fills m (m->k 0: no settle to send). */
static int
settle_msg_build(struct settle_msg *m, struct store_settle *v,
		 const struct buf *froms, size_t n, int64_t now,
		 const char *what, struct err *e)
{
	size_t i;
	int c, rc = 0;

	*m = (struct settle_msg){ .sent = xcalloc(n ? n : 1,
						  sizeof(*m->sent)),
				  .sql = BUF_INIT };
	for (c = 0; c < SA_NR; c++) {
		m->a[c] = (struct buf)BUF_INIT;
		buf_addch(&m->a[c], '{');
	}
	for (i = 0; rc == 0 && i < n; i++) {
		struct settle_sent *s = &m->sent[m->k];

		if (v[i].rc)
			continue;
		s->i = i;
		s->row = store__task_with_defaults(v[i].task, &s->d);
		s->has_ev = v[i].ev != NULL;
		if (s->has_ev)
			rc = update_event(&s->row, now, v[i].ev, &s->tev,
					  what, e);
		if (rc == 0)
			settle_set_add(m->a, m->k++, &s->row, froms[i].ptr,
				       v[i].token, s->has_ev ? &s->tev : NULL);
	}
	if (rc < 0 || m->k == 0)
		return rc;
	param_int(&m->p, now);
	for (c = 0; c < SA_NR; c++) {
		buf_addch(&m->a[c], '}');
		param_text(&m->p, m->a[c].ptr);
	}
	settle_set_sql(&m->sql);
	return 0;
}

/*
 * One try of a batch of settles in one transaction: BEGIN (fenced),
 * their statement (settle_msg) and, when c is not NULL, c's claims
 * after them, in one message; then the reason of each settle that
 * matched nothing, and COMMIT. A row that refuses is written nothing
 * and the rest go on. rcs holds each settle's rc as the try found it
 * (0: to do); ts and seq get the events'.
 */
static int
settle_batch_try(struct pg_store *ps, struct store_settle *v,
		 const struct buf *froms, const int *rcs, size_t n,
		 int64_t now, int64_t *ts, int64_t *seq,
		 struct pg_claims *c, struct err *e)
{
	const char *what = "settle tasks";
	int64_t *changed = xcalloc(n ? n : 1, sizeof(*changed));
	struct pg_stmt stmts[2];
	PGresult *res[2] = { NULL, NULL }, *claimed = NULL;
	struct settle_msg m;
	struct params cp = { 0 };
	char *worker = NULL;
	size_t i;
	int rc, work = 0, ns = 0;

	for (i = 0; i < n; i++)
		v[i].rc = rcs[i];
	rc = settle_msg_build(&m, v, froms, n, now, what, e);
	if (m.k)
		stmts[ns++] = (struct pg_stmt){ m.sql.ptr, m.p.n, m.p.v };
	if (c) {
		claim_batch_params(c->holder, c->lease_ms, now, c->max,
				   &worker, &cp);
		stmts[ns++] = (struct pg_stmt){ CLAIM_BATCH_SQL, cp.n, cp.v };
	}
	if (rc == 0)
		rc = ns ? pg__begin_exec(ps, stmts, ns, res, what, e)
			: pg__begin_fenced(ps, what, e);
	if (rc == BATON_ESTORE && !strcmp(ps->state, "23503"))
		rc = err_set(e, BATON_ENOTFOUND,
			     "cannot %s: an event names a run that is not on "
			     "record",
			     what);
	if (rc == 0 && m.k)
		rc = settle_set_read(ps, res[0], m.sent, m.k, changed, ts, seq,
				     &work, what, e);
	for (i = 0; rc == 0 && i < n; i++) {
		struct err one = ERR_INIT;

		if (v[i].rc || changed[i])
			continue;
		v[i].rc = settle_refused(ps, v[i].task, v[i].token, what,
					 &one);
		if (v[i].rc == BATON_ESTORE) {
			rc = v[i].rc;
			if (e)
				*e = one;
		}
	}
	if (c && rc == 0) {
		claimed = res[ns - 1];
		rc = claim_batch_check(ps, claimed, c->max, "claim tasks", e);
	}
	if (rc == 0) {
		pg__notify_work(ps, work);
		rc = pg__commit(ps, what, e);
	}
	if (rc == 0 && claimed)
		claims_read(claimed, c);
	pg__rollback(ps);
	PQclear(res[0]);
	PQclear(res[1]);
	settle_msg_release(&m);
	free(worker);
	free(changed);
	return rc;
}

/*
 * The settles of v (as pg__task_settle_batch) and, when c is not NULL,
 * up to c->max claims for c->holder after them, in one transaction.
 */
static int
settle_batch(struct store *s, struct store_settle *v, const struct buf *froms,
	     size_t n, struct pg_claims *c, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t now = time_now_ms();
	size_t m = n ? n : 1;
	int64_t *ts = xcalloc(m, sizeof(*ts)), *seq = xcalloc(m, sizeof(*seq));
	int *rcs = xcalloc(m, sizeof(*rcs));
	size_t i;
	int rc, tries = 0;

	for (i = 0; i < n; i++)
		rcs[i] = v[i].rc;
	do
		rc = settle_batch_try(ps, v, froms, rcs, n, now, ts, seq, c,
				      e);
	while (pg__again(ps, rc, &tries, e));
	for (i = 0; rc == 0 && i < n; i++) {
		if (v[i].rc)
			continue;
		v[i].task->version++;
		v[i].task->updated_at = now;
		if (v[i].ev) {
			v[i].ev->task_id = v[i].task->id;
			v[i].ev->ts = ts[i];
			v[i].ev->seq = seq[i];
		}
	}
	free(ts);
	free(seq);
	free(rcs);
	return rc;
}

int
pg__task_settle_batch(struct store *s, struct store_settle *v,
		      const struct buf *froms, size_t n, struct err *e)
{
	return settle_batch(s, v, froms, n, NULL, e);
}

int
pg__task_settle_claim_batch(struct store *s, struct store_settle *v,
			    const struct buf *froms, size_t n,
			    const char *holder, int64_t lease_ms, size_t max,
			    struct task *out, size_t *got, struct err *e)
{
	struct pg_claims c = { holder, lease_ms, max, out, 0 };
	int rc = settle_batch(s, v, froms, n, max ? &c : NULL, e);

	*got = rc ? 0 : c.got;
	return rc;
}

/*
 * The heartbeat, one guarded UPDATE in one message: it matches only
 * while the task is still running under this very token. One that
 * matches nothing wrote nothing, committed or not.
 */
static int
renew_try(struct pg_store *ps, int64_t id, int64_t token, int64_t lease_ms,
	  const char *what, struct err *e)
{
	struct params p = { 0 };
	int64_t changed = 0;
	int rc;

	param_int(&p, time_now_ms() + lease_ms);
	param_int(&p, id);
	param_int(&p, token);
	rc = write_count(ps,
			 "UPDATE tasks SET lease_expires_at = $1"
			 " WHERE id = $2 AND lease_token = $3"
			 " AND status = 'running'",
			 &p, &changed, what, e);
	if (rc == 0 && changed == 0)
		rc = err_set(e, BATON_EFENCED,
			     "cannot %s: token %lld no longer holds it (the "
			     "lease was taken over or the task stopped "
			     "running)",
			     what, (long long)token);
	return rc;
}

int
pg__task_renew(struct store *s, int64_t id, int64_t token, int64_t lease_ms,
	       struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[64];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "renew the lease on task %lld",
		 (long long)id);
	do
		rc = renew_try(ps, id, token, lease_ms, what, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}

int
pg__task_next_due(struct store *s, int64_t *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t due = 0;
	int rc, tries = 0;

	do {
		struct params p = { 0 };

		param_int(&p, time_now_ms());
		rc = pg__query_int(ps,
			       "SELECT COALESCE(MIN(v), 0) FROM ("
			       " SELECT MIN(not_before) AS v FROM tasks"
			       "  WHERE status = 'queued' AND not_before > $1"
			       " UNION ALL"
			       " SELECT MIN(not_before) FROM tasks"
			       "  WHERE status = 'blocked'"
			       "  AND block_reason = 'awaiting_judge'"
			       "  AND judged_at = 0 AND not_before > $1"
			       " UNION ALL"
			       " SELECT MIN(lease_expires_at) FROM tasks"
			       "  WHERE status = 'running') AS due",
			       &p, &due, "find when a task is due", e);
	} while (pg__again(ps, rc, &tries, e));
	if (rc == 0)
		*out = due;
	return rc;
}

int
pg__task_events(struct store *s, int64_t task_id, int64_t after_seq,
		store_event_cb *cb, void *arg, struct err *e)
{
	return pg__list_events(pg__store(s), NULL, task_id, after_seq, NULL,
			       cb, arg, e);
}

/* ---- workers ------------------------------------------------------------ */

static int
worker_beat_try(struct pg_store *ps, const struct worker_rec *w,
		const char *what, struct err *e)
{
	struct params p = { 0 };
	int64_t now = time_now_ms();

	param_text(&p, w->id);
	param_text(&p, w->host ? w->host : "");
	param_int(&p, w->pid);
	param_id(&p, w->task_id);
	param_int(&p, w->started_at ? w->started_at : now);
	param_int(&p, now);
	param_int(&p, w->skew_ms);
	return write_count(ps,
			   "INSERT INTO workers (id, host, pid, task_id,"
			   " started_at, heartbeat_at, stopped_at,"
			   " clock_skew_ms)"
			   " VALUES ($1, $2, $3, $4, $5, $6, 0, $7)"
			   " ON CONFLICT (id) DO UPDATE SET"
			   " host = excluded.host, pid = excluded.pid,"
			   " task_id = excluded.task_id,"
			   " heartbeat_at = excluded.heartbeat_at,"
			   " clock_skew_ms = excluded.clock_skew_ms,"
			   " stopped_at = 0",
			   &p, NULL, what, e);
}

/* Insert or refresh; a stopped worker that beats again is alive again. */
int
pg__worker_beat(struct store *s, const struct worker_rec *w, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[256];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "record worker '%.200s'", w->id);
	do
		rc = worker_beat_try(ps, w, what, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}

static int
worker_stop_try(struct pg_store *ps, const char *id, const char *what,
		struct err *e)
{
	struct params p = { 0 };
	int64_t changed = 0;
	int rc;

	param_int(&p, time_now_ms());
	param_text(&p, id);
	rc = write_count(ps, "UPDATE workers SET stopped_at = $1 WHERE id = $2",
			 &p, &changed, what, e);
	if (rc == 0 && changed == 0)
		rc = err_set(e, BATON_ENOTFOUND, "no worker '%s'", id);
	return rc;
}

int
pg__worker_stop(struct store *s, const char *id, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[256];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "stop worker '%.200s'", id);
	do
		rc = worker_stop_try(ps, id, what, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}

static void
worker_release(struct worker_rec *w)
{
	FREE_AND_NULL(w->id);
	FREE_AND_NULL(w->host);
}

/*
 * Live workers by id. They are few (one per process of a serve), so all
 * are read before the first callback runs.
 */
int
pg__worker_list(struct store *s, store_worker_cb *cb, void *arg,
		struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct worker_rec *rows = NULL;
	PGresult *res = NULL;
	int rc = 0, n = 0, i, stop = 0, tries = 0;

	do {
		res = pg__exec(ps,
			       "SELECT id, host, pid, task_id, started_at,"
			       " heartbeat_at, stopped_at, clock_skew_ms"
			       " FROM workers WHERE stopped_at = 0 ORDER BY id",
			       0, NULL, "list workers", e);
		rc = res ? 0 : BATON_ESTORE;
	} while (pg__again(ps, rc, &tries, e));
	if (rc < 0)
		goto out;
	n = PQntuples(res);
	rows = xcalloc(n ? (size_t)n : 1, sizeof(*rows));
	for (i = 0; i < n; i++) {
		struct worker_rec *w = &rows[i];

		w->id = pg__text(res, i, 0);
		w->host = pg__text(res, i, 1);
		w->pid = pg__int64(res, i, 2);
		w->task_id = pg__int64(res, i, 3);
		w->started_at = pg__int64(res, i, 4);
		w->heartbeat_at = pg__int64(res, i, 5);
		w->stopped_at = pg__int64(res, i, 6);
		w->skew_ms = pg__int64(res, i, 7);
	}
	PQclear(res);
	res = NULL;
	for (i = 0; i < n && !stop; i++)
		stop = cb(&rows[i], arg);
out:
	for (i = 0; i < n; i++)
		worker_release(&rows[i]);
	free(rows);
	PQclear(res);
	return rc;
}

/* ---- the merge queue ---------------------------------------------------- */

/* Reads item id, or the item of run_id when id is 0: 1, 0 or an error. */
static int
read_merge_item(struct pg_store *ps, int64_t id, const char *run_id,
		struct merge_item *out, const char *what, struct err *e)
{
	struct params p = { 0 };
	PGresult *res;
	int rc = 0;

	if (id)
		param_int(&p, id);
	else
		param_text(&p, run_id);
	res = pg__exec(ps,
		       id ? "SELECT " MERGE_COLUMNS
			    " FROM merge_queue WHERE id = $1"
			  : "SELECT " MERGE_COLUMNS
			    " FROM merge_queue WHERE run_id = $1",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) > 0) {
		read_merge(res, 0, out);
		rc = 1;
	}
	PQclear(res);
	return rc;
}

/* BATON_EBUSY naming item id, which has the run already. */
static int
already_queued(int64_t id, const char *what, struct err *e)
{
	return err_set(e, BATON_EBUSY,
		       "cannot %s: it is already queued (item %lld)", what,
		       (long long)id);
}

/*
 * One try of merge_add. A run is queued at most once (merge_queue.run_id
 * is UNIQUE): the item that has it already is found first; one added by
 * a concurrent add after that is met by ON CONFLICT, which waits for
 * that add to commit, and then found by a statement of its own (READ
 * COMMITTED: a new snapshot).
 */
static int
merge_add_try(struct pg_store *ps, const struct merge_item *m,
	      const struct merge_item *row, int64_t created, int64_t now,
	      const struct event *ev, int64_t *id_out, int64_t *ts_out,
	      int64_t *seq_out, const char *what, struct err *e)
{
	static const char sql_queued[] =
		"SELECT id FROM merge_queue WHERE run_id = $1";
	struct buf sql = BUF_INIT;
	struct params p = { 0 };
	PGresult *res = NULL;
	int64_t id = 0, ts = 0, evseq = 0, runs = 0;
	int rc, n = 5;

	rc = pg__begin_fenced(ps, what, e);
	if (rc < 0)
		goto out;
	param_text(&p, m->run_id);
	rc = pg__query_int(ps, sql_queued, &p, &id, what, e);
	if (rc == 0 && !id)
		rc = pg__query_int(ps, "SELECT COUNT(*) FROM runs WHERE id = $1",
			       &p, &runs, what, e);
	if (rc == 0 && !id && !runs)
		rc = err_set(e, BATON_ENOTFOUND, "cannot %s: no run '%s'",
			     what, m->run_id);
	if (rc == 0 && id)
		rc = already_queued(id, what, e);
	if (rc < 0)
		goto out;

	buf_adds(&sql, "INSERT INTO merge_queue (run_id, created_at,"
		       " updated_at, version"
		       MERGE_STRINGS_MUTABLE(SQL_COMMA_NAME)
		       MERGE_INTS_MUTABLE(SQL_COMMA_NAME)
		       MERGE_IDS_MUTABLE(SQL_COMMA_NAME)
		       ") VALUES ($1, $2, $3, $4");
	add_fields(&sql, merge_fields, ARRAY_SIZE(merge_fields), 0, &n);
	buf_adds(&sql, ") ON CONFLICT (run_id) DO NOTHING RETURNING id");
	memset(&p, 0, sizeof(p));
	param_text(&p, m->run_id);
	param_int(&p, created);
	param_int(&p, now);
	param_int(&p, 1);
	bind_merge(&p, row);
	res = pg__exec(ps, sql.ptr, p.n, p.v, what, e);
	if (!res) {
		rc = BATON_ESTORE;
		goto out;
	}
	if (PQntuples(res) == 0) {
		memset(&p, 0, sizeof(p));
		param_text(&p, m->run_id);
		rc = pg__query_int(ps, sql_queued, &p, &id, what, e);
		if (rc == 0)
			rc = already_queued(id, what, e);
		goto out;
	}
	id = pg__int64(res, 0, 0);
	if (ev)
		rc = add_event(ps, ev, m->run_id, m->task_id, now, &ts, &evseq,
			       what, e);
	if (rc == 0)
		pg__notify_work(ps, 1);
	if (rc == 0)
		rc = pg__commit(ps, what, e);
	if (rc < 0)
		goto out;
	*id_out = id;
	*ts_out = ts;
	*seq_out = evseq;
out:
	pg__rollback(ps);
	PQclear(res);
	buf_release(&sql);
	return rc;
}

/* m and ev change only on success (store.h). */
int
pg__merge_add(struct store *s, struct merge_item *m, struct event *ev,
	      struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char pending[] = MERGE_PENDING;
	struct merge_item row = *m;
	int64_t now = time_now_ms(), id = 0, ts = 0, evseq = 0;
	int64_t created = m->created_at ? m->created_at : now;
	char what[256];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "queue run '%.200s' for merging",
		 m->run_id);
	if (!row.status)
		row.status = pending;
	do
		rc = merge_add_try(ps, m, &row, created, now, ev, &id, &ts,
				   &evseq, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc < 0)
		return rc;

	m->id = id;
	m->version = 1;
	m->created_at = created;
	m->updated_at = now;
	if (!m->status)
		m->status = xstrdup(row.status);
	if (ev) {
		ev->ts = ts;
		ev->seq = evseq;
	}
	return 0;
}

int
pg__merge_get(struct store *s, int64_t id, const char *run_id,
	      struct merge_item *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[256];
	int rc, tries = 0;

	if (id)
		snprintf(what, sizeof(what), "read merge item %lld",
			 (long long)id);
	else
		snprintf(what, sizeof(what), "read the merge item of run '%s'",
			 run_id);
	do
		rc = read_merge_item(ps, id, run_id, out, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc == 0 && id)
		return err_set(e, BATON_ENOTFOUND, "no merge item %lld",
			       (long long)id);
	if (rc == 0)
		return err_set(e, BATON_ENOTFOUND,
			       "run '%s' is not in the merge queue", run_id);
	return rc < 0 ? rc : 0;
}

/* One try of the guarded update of an item, with its event, or neither. */
static int
merge_update_try(struct pg_store *ps, const struct merge_item *m,
		 const char *froms, int64_t now, const struct event *ev,
		 int64_t *ts_out, int64_t *seq_out, const char *what,
		 struct err *e)
{
	struct buf sql = BUF_INIT;
	struct params p = { 0 };
	int64_t changed = 0, ts = 0, evseq = 0;
	int rc, n = 2;

	buf_adds(&sql, "UPDATE merge_queue SET version = version + 1,"
		       " updated_at = $1");
	add_fields(&sql, merge_fields, ARRAY_SIZE(merge_fields), 1, &n);
	buf_addf(&sql, " WHERE id = $%d AND version = $%d"
		       " AND strpos($%d, '|' || status || '|') > 0",
		 n, n + 1, n + 2);
	param_int(&p, now);
	bind_merge(&p, m);
	param_int(&p, m->id);
	param_int(&p, m->version);
	param_text(&p, froms);

	rc = pg__begin_fenced(ps, what, e);
	if (rc == 0)
		rc = run_count(ps, sql.ptr, &p, &changed, what, e);
	if (rc < 0)
		goto out;
	if (changed == 0) {
		rc = lost_update(ps,
				 "SELECT version FROM merge_queue WHERE id = $1",
				 "merge item", m->id, m->version, what, e);
		goto out;
	}
	if (ev)
		rc = add_event(ps, ev, m->run_id, m->task_id, now, &ts, &evseq,
			       what, e);
	if (rc == 0)
		pg__notify_work(ps, 1);
	if (rc == 0)
		rc = pg__commit(ps, what, e);
	if (rc < 0)
		goto out;
	*ts_out = ts;
	*seq_out = evseq;
out:
	pg__rollback(ps);
	buf_release(&sql);
	return rc;
}

int
pg__merge_update(struct store *s, struct merge_item *m, const char *froms,
		 struct event *ev, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t now = time_now_ms(), ts = 0, evseq = 0;
	char what[64];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "update merge item %lld",
		 (long long)m->id);
	do
		rc = merge_update_try(ps, m, froms, now, ev, &ts, &evseq,
				      what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc < 0)
		return rc;

	m->version++;
	m->updated_at = now;
	if (ev) {
		ev->ts = ts;
		ev->seq = evseq;
	}
	return 0;
}

/* One page of merge items into rows; *n_out gets how many. */
static int
merge_page_try(struct pg_store *ps, const char *sql, const struct params *p,
	       struct merge_item *rows, int *n_out, struct err *e)
{
	PGresult *res = pg__exec(ps, sql, p->n, p->v, "list the merge queue",
				 e);
	int i, n;

	if (!res)
		return BATON_ESTORE;
	n = PQntuples(res);
	assert(n <= PG_LIST_PAGE);
	for (i = 0; i < n; i++)
		read_merge(res, i, &rows[i]);
	PQclear(res);
	*n_out = n;
	return 0;
}

/* Items in id order, a page at a time (callbacks may write). */
int
pg__merge_list(struct store *s, const char *status, store_merge_cb *cb,
	       void *arg, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct merge_item *rows = xcalloc(PG_LIST_PAGE, sizeof(*rows));
	int64_t cursor = 0;
	int rc = 0, n = 0, i, stop = 0;

	while (!stop) {
		struct params p = { 0 };
		int tries = 0;

		param_int(&p, cursor);
		param_int(&p, PG_LIST_PAGE);
		if (status)
			param_text(&p, status);
		do
			rc = merge_page_try(ps,
					    status ? "SELECT " MERGE_COLUMNS
						     " FROM merge_queue"
						     " WHERE status = $3"
						     " AND id > $1"
						     " ORDER BY id LIMIT $2"
						   : "SELECT " MERGE_COLUMNS
						     " FROM merge_queue"
						     " WHERE id > $1"
						     " ORDER BY id LIMIT $2",
					    &p, rows, &n, e);
		while (pg__again(ps, rc, &tries, e));
		if (rc < 0)
			goto out;
		for (i = 0; i < n && !stop; i++)
			stop = cb(&rows[i], arg);
		if (n < PG_LIST_PAGE)
			break;
		cursor = rows[n - 1].id;
		for (i = 0; i < n; i++)
			merge_item_release(&rows[i]);
		n = 0;
	}
out:
	for (i = 0; i < n; i++)
		merge_item_release(&rows[i]);
	free(rows);
	return rc;
}

/*
 * One try of the merge claim: the first item in queue order that is due
 * (pending and past its not_before) or abandoned (processing, but its
 * claim ran out: its lander died), locked with SKIP LOCKED so that
 * concurrent landers take different items, and taken in the same
 * statement.
 */
static int
merge_claim_try(struct pg_store *ps, const char *holder, int64_t claim_ms,
		struct merge_item *out, struct err *e)
{
	const char *what = "claim a merge item";
	char type[] = "merge_claimed";
	struct merge_item m = { 0 };
	struct params p = { 0 };
	struct event ev = { 0 };
	PGresult *res = NULL;
	int64_t now = time_now_ms(), seq = 0;
	int rc;

	param_text(&p, holder);
	param_int(&p, now + claim_ms);
	param_int(&p, now);
	rc = pg__begin(ps, what, e);
	if (rc < 0)
		goto out;
	res = pg__exec(ps,
		       "UPDATE merge_queue SET status = 'processing',"
		       " claimed_by = $1, claim_expires_at = $2,"
		       " version = version + 1, updated_at = $3"
		       " WHERE id = (SELECT id FROM merge_queue"
		       "  WHERE (status = 'pending' AND not_before <= $3)"
		       "  OR (status = 'processing'"
		       "   AND claim_expires_at < $3)"
		       "  ORDER BY id LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED)"
		       " RETURNING " MERGE_COLUMNS,
		       p.n, p.v, what, e);
	if (!res) {
		rc = BATON_ESTORE;
		goto out;
	}
	if (PQntuples(res) == 0) {
		rc = err_set(e, BATON_ENOTFOUND, "nothing to merge");
		goto out;
	}
	read_merge(res, 0, &m);
	ev.run_id = m.run_id;
	ev.task_id = m.task_id;
	ev.ts = now;
	ev.type = type;
	ev.data = store__merge_claim_data(m.id, holder);
	rc = pg__insert_event(ps, &ev, &seq, what, e);
	free(ev.data);
	if (rc == 0)
		rc = pg__commit(ps, what, e);
	if (rc < 0)
		goto out;
	*out = m;
	memset(&m, 0, sizeof(m));
out:
	pg__rollback(ps);
	PQclear(res);
	merge_item_release(&m);
	return rc;
}

/* Not fenced, like the task claim. */
int
pg__merge_claim(struct store *s, const char *holder, int64_t claim_ms,
		struct merge_item *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int rc, tries = 0;

	do
		rc = merge_claim_try(ps, holder, claim_ms, out, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}
