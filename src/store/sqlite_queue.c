/*
 * The runtime half of the SQLite backend (store.h from "Fencing" on;
 * schema in sql/003-runtime.sql): the task queue and its leases, the
 * workers, the merge queue and the planner's task graphs.
 *
 * The claim is the heart of it. Many worker processes call it at once,
 * each on its own connection, and each claim is one BEGIN IMMEDIATE
 * transaction: SQLite lets one writer in at a time, so the SELECT of the
 * best claimable task, the draw of a fresh fencing token and the UPDATE
 * that makes the task ours see no other claim in between. No task is
 * claimed twice and no token is drawn twice:
 *
 *	worker A: BEGIN IMMEDIATE ─ pick t3 ─ token 8 ─ t3 running ─ COMMIT
 *	worker B:        (waits for the lock) ─────────────────────── BEGIN
 *	          IMMEDIATE ─ pick t4 (t3 is no longer queued) ─ token 9 ...
 *
 * The token is what makes a lease safe to lose: a worker that stalls
 * past its lease finds, on waking, that every write it makes through a
 * fenced handle is refused (sqlite__begin_fenced), because the task
 * now carries the token of whoever claimed it next.
 *
 * Lists read a page of rows, reset their statement and only then run the
 * callbacks, so a callback may write (sqlite.c does the same for runs).
 */
#include "util/compat.h"

#include <sqlite3.h>

#include "core/run.h"
#include "store/sqlite_int.h"
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
 * the store sets, then the lists of store_int.h. The INSERT, the UPDATE
 * and the SELECTs are generated from the same lists as the code that
 * binds and reads them.
 */
#define TASK_COLUMNS                                                           \
	"id, created_at, updated_at, version" TASK_STRINGS(SQL_COMMA_NAME)     \
	TASK_INTS_MUTABLE(SQL_COMMA_NAME) TASK_IDS_MUTABLE(SQL_COMMA_NAME)

static const char sql_task_insert[] =
	"INSERT INTO tasks (" TASK_COLUMNS ") VALUES (?, ?, ?, ?"
	TASK_STRINGS(SQL_COMMA_QMARK) TASK_INTS_MUTABLE(SQL_COMMA_QMARK)
	TASK_IDS_MUTABLE(SQL_COMMA_QMARK) ")";
/* A guarded update's status check: the row's status is one of the
 * "|a|b|" list bound last (store__froms, store_int.h). */
#define STATUS_GUARD " AND instr(?, '|' || status || '|') > 0"

static const char sql_task_update[] =
	"UPDATE tasks SET version = version + 1, updated_at = ?"
	TASK_STRINGS(SQL_SET_QMARK) TASK_INTS_MUTABLE(SQL_SET_QMARK)
	TASK_IDS_MUTABLE(SQL_SET_QMARK) " WHERE id = ? AND version = ?"
	STATUS_GUARD;
/* The same, fenced by the token the row must still hold (a batch). */
static const char sql_task_update_token[] =
	"UPDATE tasks SET version = version + 1, updated_at = ?"
	TASK_STRINGS(SQL_SET_QMARK) TASK_INTS_MUTABLE(SQL_SET_QMARK)
	TASK_IDS_MUTABLE(SQL_SET_QMARK) " WHERE id = ? AND version = ?"
	STATUS_GUARD " AND lease_token = ?";
static const char sql_task_by_id[] =
	"SELECT " TASK_COLUMNS " FROM tasks WHERE id = ?";

/*
 * The first claimable task. It walks tasks_claim (status, priority
 * DESC, id) from the top of the queued tasks, so it stops at the first
 * row that passes and never sorts the backlog. A task is claimable when
 * its not_before has passed, every task it depends on is done, and no
 * running task's area overlaps its own: the same path, or one is a
 * directory of the other ("src/export" overlaps "src" and
 * "src/export/csv", not "src/exporter"). A NULL area overlaps nothing.
 * The running tasks are few (one per worker) and are found through the
 * same index.
 */
static const char sql_claim_pick[] =
	"SELECT t.id FROM tasks AS t"
	" WHERE t.status = 'queued' AND t.not_before <= ?1"
	" AND NOT EXISTS (SELECT 1 FROM task_deps AS d"
	"  JOIN tasks AS p ON p.id = d.depends_on"
	"  WHERE d.task_id = t.id AND p.status <> 'done')"
	" AND (t.area IS NULL OR NOT EXISTS (SELECT 1 FROM tasks AS r"
	"  WHERE r.status = 'running' AND r.area IS NOT NULL"
	"  AND (r.area = t.area"
	"   OR substr(r.area, 1, length(t.area) + 1) = t.area || '/'"
	"   OR substr(t.area, 1, length(r.area) + 1) = r.area || '/')))"
	" ORDER BY t.priority DESC, t.id LIMIT 1";

#define MERGE_COLUMNS                                                          \
	"id, run_id, created_at, updated_at, version"                          \
	MERGE_STRINGS_MUTABLE(SQL_COMMA_NAME)                                  \
	MERGE_INTS_MUTABLE(SQL_COMMA_NAME) MERGE_IDS_MUTABLE(SQL_COMMA_NAME)

static const char sql_merge_insert[] =
	"INSERT INTO merge_queue (" MERGE_COLUMNS ") VALUES (?, ?, ?, ?, ?"
	MERGE_STRINGS_MUTABLE(SQL_COMMA_QMARK)
	MERGE_INTS_MUTABLE(SQL_COMMA_QMARK)
	MERGE_IDS_MUTABLE(SQL_COMMA_QMARK) ")";
static const char sql_merge_update[] =
	"UPDATE merge_queue SET version = version + 1, updated_at = ?"
	MERGE_STRINGS_MUTABLE(SQL_SET_QMARK) MERGE_INTS_MUTABLE(SQL_SET_QMARK)
	MERGE_IDS_MUTABLE(SQL_SET_QMARK) " WHERE id = ? AND version = ?"
	STATUS_GUARD;

/* ---- small helpers ------------------------------------------------------ */

/*
 * Binds the mutable fields of t from parameter *i on, in the order of
 * TASK_STRINGS, TASK_INTS_MUTABLE, TASK_IDS_MUTABLE, and advances *i.
 * Strings are bound SQLITE_STATIC: t must outlive the step.
 */
static int
bind_task(sqlite3_stmt *st, int *i, const struct task *t)
{
	int rc = SQLITE_OK;

#define BIND_TEXT(f)                                                           \
	if (rc == SQLITE_OK)                                                   \
		rc = sqlite3_bind_text(st, (*i)++, t->f, -1, SQLITE_STATIC);
#define BIND_INT(f)                                                            \
	if (rc == SQLITE_OK)                                                   \
		rc = sqlite3_bind_int64(st, (*i)++, (sqlite3_int64)t->f);
#define BIND_ID(f)                                                             \
	if (rc == SQLITE_OK)                                                   \
		rc = sqlite__bind_id(st, (*i)++, t->f);
	TASK_STRINGS(BIND_TEXT)
	TASK_INTS_MUTABLE(BIND_INT)
	TASK_IDS_MUTABLE(BIND_ID)
#undef BIND_TEXT
#undef BIND_INT
#undef BIND_ID
	return rc;
}

/* Fills t (overwritten, not released) from a row of TASK_COLUMNS. */
static void
read_task(sqlite3_stmt *st, struct task *t)
{
	int i = 4;

	memset(t, 0, sizeof(*t));
	t->id = sqlite3_column_int64(st, 0);
	t->created_at = sqlite3_column_int64(st, 1);
	t->updated_at = sqlite3_column_int64(st, 2);
	t->version = sqlite3_column_int64(st, 3);
#define READ_TEXT(f) t->f = sqlite__column_text(st, i++);
#define READ_INT(f)  t->f = sqlite3_column_int64(st, i++);
	TASK_STRINGS(READ_TEXT)
	TASK_INTS_MUTABLE(READ_INT)
	TASK_IDS_MUTABLE(READ_INT)
#undef READ_TEXT
#undef READ_INT
}

static int
bind_merge(sqlite3_stmt *st, int *i, const struct merge_item *m)
{
	int rc = SQLITE_OK;

#define BIND_TEXT(f)                                                           \
	if (rc == SQLITE_OK)                                                   \
		rc = sqlite3_bind_text(st, (*i)++, m->f, -1, SQLITE_STATIC);
#define BIND_INT(f)                                                            \
	if (rc == SQLITE_OK)                                                   \
		rc = sqlite3_bind_int64(st, (*i)++, (sqlite3_int64)m->f);
#define BIND_ID(f)                                                             \
	if (rc == SQLITE_OK)                                                   \
		rc = sqlite__bind_id(st, (*i)++, m->f);
	MERGE_STRINGS_MUTABLE(BIND_TEXT)
	MERGE_INTS_MUTABLE(BIND_INT)
	MERGE_IDS_MUTABLE(BIND_ID)
#undef BIND_TEXT
#undef BIND_INT
#undef BIND_ID
	return rc;
}

static void
read_merge(sqlite3_stmt *st, struct merge_item *m)
{
	int i = 5;

	memset(m, 0, sizeof(*m));
	m->id = sqlite3_column_int64(st, 0);
	m->run_id = sqlite__column_text(st, 1);
	m->created_at = sqlite3_column_int64(st, 2);
	m->updated_at = sqlite3_column_int64(st, 3);
	m->version = sqlite3_column_int64(st, 4);
#define READ_TEXT(f) m->f = sqlite__column_text(st, i++);
#define READ_INT(f)  m->f = sqlite3_column_int64(st, i++);
	MERGE_STRINGS_MUTABLE(READ_TEXT)
	MERGE_INTS_MUTABLE(READ_INT)
	MERGE_IDS_MUTABLE(READ_INT)
#undef READ_TEXT
#undef READ_INT
}

/*
 * Runs a statement that takes one integer parameter and returns at most
 * one integer; *out is left alone when there is no row.
 */
static int
query_int(struct sqlite_store *ss, const char *sql, int64_t param,
	  int64_t *out, const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite__prepare(ss, &st, sql, 0, what, e);
	if (rc == 0 && sqlite3_bind_int64(st, 1, param) != SQLITE_OK)
		rc = sqlite__fail(ss, e, what);
	if (rc == 0)
		rc = sqlite__step_int(ss, st, out, what, e);
	sqlite3_finalize(st);
	return rc;
}

/* Runs a statement to its end (an INSERT, an UPDATE) and finalizes it. */
static int
step_done(struct sqlite_store *ss, sqlite3_stmt *st, int src,
	  const char *what, struct err *e)
{
	int rc = 0;

	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE && src != SQLITE_ROW)
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

/* Whether task id exists: BATON_ENOTFOUND naming it as role if not. */
static int
task_must_exist(struct sqlite_store *ss, int64_t id, const char *role,
		const char *what, struct err *e)
{
	int64_t n = 0;
	int rc;

	rc = query_int(ss, "SELECT COUNT(*) FROM tasks WHERE id = ?", id, &n,
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

/*
 * Fills the deps of rows[0..n), which are in increasing id order, with
 * one query over their id range; the rows in that range that were not
 * asked for (another status) are skipped.
 */
static int
load_deps(struct sqlite_store *ss, struct task *rows, int n,
	  const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc, src, j = 0;
	/* a newest-first page: the dependencies are walked the same way */
	int desc = n > 1 && rows[0].id > rows[n - 1].id;

	if (n == 0)
		return 0;
	rc = sqlite__prepare(ss, &st,
			     desc ? "SELECT task_id, depends_on FROM task_deps"
				    " WHERE task_id BETWEEN ?2 AND ?1"
				    " ORDER BY task_id DESC, depends_on" :
				    "SELECT task_id, depends_on FROM task_deps"
				    " WHERE task_id BETWEEN ?1 AND ?2"
				    " ORDER BY task_id, depends_on",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_int64(st, 1, rows[0].id);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 2, rows[n - 1].id);
	while (src == SQLITE_OK) {
		int64_t id;

		src = sqlite3_step(st);
		if (src != SQLITE_ROW)
			break;
		src = SQLITE_OK;
		id = sqlite3_column_int64(st, 0);
		while (j < n && (desc ? rows[j].id > id : rows[j].id < id))
			j++;
		if (j < n && rows[j].id == id)
			push_dep(&rows[j], sqlite3_column_int64(st, 1));
	}
	if (src != SQLITE_DONE)
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

/*
 * Reads task id (deps included) into *out, inside or outside a
 * transaction. Returns 1 when found, 0 when not, or an error.
 */
static int
read_task_by_id(struct sqlite_store *ss, int64_t id, struct task *out,
		const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	struct task t = { 0 };
	int rc, src;

	rc = sqlite__prepare(ss, &st, sql_task_by_id, 0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_int64(st, 1, id);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		read_task(st, &t);
		rc = 1;
	} else if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
	}
	sqlite3_finalize(st);
	if (rc == 1) {
		int drc = load_deps(ss, &t, 1, what, e);

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
 * Appends a copy of ev with the given run, task and time inside the
 * caller's transaction; *ts_out and *seq_out get what was written.
 */
static int
add_event(struct sqlite_store *ss, const struct event *ev, char *run_id,
	  int64_t task_id, int64_t now, int64_t *ts_out, int64_t *seq_out,
	  const char *what, struct err *e)
{
	struct event row = *ev;

	row.run_id = ev->run_id ? ev->run_id : run_id;
	row.task_id = ev->task_id ? ev->task_id : task_id;
	row.ts = ev->ts ? ev->ts : now;
	*ts_out = row.ts;
	return sqlite__insert_event(ss, &row, seq_out, what, e);
}

/* ---- tasks -------------------------------------------------------------- */

/*
 * The dependencies of the new task must all exist already, which also
 * means the graph can have no cycle: a task can only wait for older
 * ones. A dependency listed twice is recorded once.
 */
static int
insert_deps(struct sqlite_store *ss, int64_t id, const struct task *t,
	    const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	size_t k;
	int rc, src = SQLITE_OK;

	rc = sqlite__prepare(ss, &st,
			     "INSERT OR IGNORE INTO task_deps"
			     " (task_id, depends_on) VALUES (?, ?)",
			     0, what, e);
	for (k = 0; rc == 0 && k < t->nr_deps; k++) {
		src = sqlite3_bind_int64(st, 1, id);
		if (src == SQLITE_OK)
			src = sqlite3_bind_int64(st, 2, t->deps[k]);
		if (src == SQLITE_OK)
			src = sqlite3_step(st);
		if (src != SQLITE_DONE)
			rc = sqlite__fail(ss, e, what);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__task_insert(struct sqlite_store *ss, const struct task *t,
		    const struct task *row, int64_t created, int64_t now,
		    const struct event *ev, int64_t *id_out, int64_t *ts_out,
		    int64_t *seq_out, const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int64_t id;
	size_t k;
	int rc = 0, src, i = 1;

	if (t->parent_id)
		rc = task_must_exist(ss, t->parent_id, "the parent", what, e);
	for (k = 0; rc == 0 && k < t->nr_deps; k++)
		rc = task_must_exist(ss, t->deps[k], "a dependency", what, e);
	if (rc < 0)
		return rc;

	rc = sqlite__prepare(ss, &st, sql_task_insert, 0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_null(st, i++);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, created);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, 1);
	if (src == SQLITE_OK)
		src = bind_task(st, &i, row);
	rc = step_done(ss, st, src, what, e);
	if (rc < 0)
		return rc;
	id = sqlite3_last_insert_rowid(ss->db);
	rc = insert_deps(ss, id, t, what, e);
	if (rc == 0 && ev) {
		/* about the new task, whatever ev->task_id says */
		struct event tev = *ev;

		tev.task_id = id;
		rc = add_event(ss, &tev, NULL, id, now, ts_out, seq_out, what,
			       e);
	}
	if (rc == 0)
		*id_out = id;
	return rc;
}

/*
 * Claims k's key (with k), checks the parent and the dependencies,
 * inserts the row, its dependencies and ev, binds the key, and commits;
 * t and ev change only on success.
 */
int
sqlite__task_add(struct store *s, struct task *t, struct event *ev,
		 struct store_key *k, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	struct store_task_defaults d;
	struct task row = store__task_with_defaults(t, &d);
	int64_t now = time_now_ms(), id = 0, ts = 0, evseq = 0;
	int64_t created = t->created_at ? t->created_at : now;
	char what[256];
	int rc;

	snprintf(what, sizeof(what), "add task '%.200s'", t->title);
	if (!row.max_attempts)
		row.max_attempts = TASK_DEFAULT_MAX_ATTEMPTS;
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc == 0 && k)
		rc = sqlite__idem_take(ss, k, what, e);
	if (rc < 0 || (k && rc == 0))
		goto out; /* the key was claimed before: nothing written */
	rc = sqlite__task_insert(ss, t, &row, created, now, ev, &id, &ts,
				 &evseq, what, e);
	if (rc == 0 && k)
		rc = sqlite__idem_set(ss, k->key, id, what, e);
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	if (rc == 0) {
		store__task_added(t, &row, id, created, now, ev, ts, evseq);
		rc = 1;
	}
out:
	sqlite__rollback(ss);
	return rc;
}

int
sqlite__task_get(struct store *s, int64_t id, struct task *out,
		 struct err *e)
{
	char what[64];
	int rc;

	snprintf(what, sizeof(what), "read task %lld", (long long)id);
	rc = read_task_by_id(sqlite__store(s), id, out, what, e);
	if (rc == 0)
		return err_set(e, BATON_ENOTFOUND, "no task %lld",
			       (long long)id);
	return rc < 0 ? rc : 0;
}

/*
 * Zero rows changed by a versioned UPDATE: BATON_ENOTFOUND when the row
 * is gone, BATON_ECONFLICT when somebody else wrote it first, and
 * STORE_EREFUSED when its version is the one expected: the status guard
 * refused it (store.c says why). sql reads the row's version by id.
 */
static int
lost_update(struct sqlite_store *ss, const char *sql, const char *noun,
	    int64_t id, int64_t version, const char *what, struct err *e)
{
	int64_t found = -1;
	int rc;

	rc = query_int(ss, sql, id, &found, what, e);
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

/*
 * The guarded update of task t to row, and its event, inside the open
 * transaction; token > 0 also requires the row to hold that lease token
 * (BATON_EFENCED when it does not). *ts and *seq get the event's.
 * *refused is set when the row refused the update: then nothing was
 * written and the transaction can go on.
 */
static int
update_in_tx(struct sqlite_store *ss, const struct task *t,
	     const struct task *row, const char *froms, int64_t token,
	     int64_t now, const struct event *ev, int64_t *ts, int64_t *seq,
	     int *refused, const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int64_t have = -1;
	int rc, src, i = 1;

	rc = sqlite__prepare(ss, &st,
			     token > 0 ? sql_task_update_token : sql_task_update,
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_int64(st, i++, now);
	if (src == SQLITE_OK)
		src = bind_task(st, &i, row);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, t->id);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, t->version);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, i++, froms, -1, SQLITE_STATIC);
	if (src == SQLITE_OK && token > 0)
		src = sqlite3_bind_int64(st, i++, token);
	rc = step_done(ss, st, src, what, e);
	if (rc < 0)
		return rc;
	if (sqlite3_changes(ss->db) == 0) {
		*refused = 1;
		if (token > 0) {
			rc = query_int(ss, "SELECT IFNULL(lease_token, 0)"
					   " FROM tasks WHERE id = ?",
				       t->id, &have, what, e);
			if (rc < 0)
				return rc;
			if (have >= 0 && have != token)
				return err_set(e, BATON_EFENCED,
					       "cannot %s: the lease on task "
					       "%lld was taken over",
					       what, (long long)t->id);
		}
		return lost_update(ss, "SELECT version FROM tasks WHERE id = ?",
				   "task", t->id, t->version, what, e);
	}
	if (ev) {
		struct event tev = *ev;

		tev.task_id = t->id;
		rc = add_event(ss, &tev, NULL, t->id, now, ts, seq, what, e);
	}
	return rc;
}

/* What a settled task and its event become once their commit is done. */
static void
settled(struct task *t, struct event *ev, int64_t now, int64_t ts,
	int64_t seq)
{
	t->version++;
	t->updated_at = now;
	if (ev) {
		ev->task_id = t->id;
		ev->ts = ts;
		ev->seq = seq;
	}
}

/*
 * The guarded update of a task, as sqlite_run_update does for runs:
 * row and event in one transaction, or neither.
 */
int
sqlite__task_update(struct store *s, struct task *t, const char *froms,
		    struct event *ev, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	struct store_task_defaults d;
	struct task row = store__task_with_defaults(t, &d);
	int64_t now = time_now_ms(), ts = 0, evseq = 0;
	char what[64];
	int rc, refused = 0;

	snprintf(what, sizeof(what), "update task %lld", (long long)t->id);
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc == 0)
		rc = update_in_tx(ss, t, &row, froms, 0, now, ev, &ts, &evseq,
				  &refused, what, e);
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	if (rc == 0)
		settled(t, ev, now, ts, evseq);
	sqlite__rollback(ss);
	return rc;
}

/*
 * The settles of a batch in one transaction (store_task_settle_batch).
 * A settle its row refuses wrote nothing and the rest go on; any other
 * failure undoes them all.
 */
int
sqlite__task_settle_batch(struct store *s, struct store_settle *v,
			  const struct buf *froms, size_t n, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "settle tasks";
	int64_t now = time_now_ms();
	int64_t *ts = xcalloc(n, sizeof(*ts)), *seq = xcalloc(n, sizeof(*seq));
	size_t i;
	int rc;

	rc = sqlite__begin_fenced(ss, what, e);
	for (i = 0; rc == 0 && i < n; i++) {
		struct store_task_defaults d;
		struct task row;
		struct err one = ERR_INIT;
		int refused = 0;

		if (v[i].rc)
			continue;
		row = store__task_with_defaults(v[i].task, &d);
		v[i].rc = update_in_tx(ss, v[i].task, &row, froms[i].ptr,
				       v[i].token, now, v[i].ev, &ts[i],
				       &seq[i], &refused, what, &one);
		if (v[i].rc && !refused) {
			rc = v[i].rc;
			if (e)
				*e = one;
		}
	}
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	sqlite__rollback(ss);
	for (i = 0; rc == 0 && i < n; i++)
		if (v[i].rc == 0)
			settled(v[i].task, v[i].ev, now, ts[i], seq[i]);
	free(ts);
	free(seq);
	return rc;
}

/*
 * Tasks in id order (or newest first), a page at a time: each page
 * continues past the last id of the previous one and has its deps
 * filled before its callbacks run.
 */
int
sqlite__task_list(struct store *s, const struct store_task_filter *f,
		  store_task_cb *cb, void *arg, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "list tasks";
	struct task *rows = xcalloc(STORE_LIST_PAGE, sizeof(*rows));
	sqlite3_stmt *st = NULL;
	int64_t cursor = !f->newest_first ? 0 :
			 f->before_id > 0 ? f->before_id :
					    INT64_MAX;
	int remaining = f->limit > 0 ? f->limit : -1;
	char sql[sizeof(sql_task_by_id) + 256];
	int rc, src, n = 0, i, page, stop = 0;

	snprintf(sql, sizeof(sql),
		 "SELECT " TASK_COLUMNS " FROM tasks WHERE id %s ?1%s%s"
		 " ORDER BY id%s LIMIT ?2",
		 f->newest_first ? "<" : ">",
		 f->status ? " AND status = ?3" : "",
		 f->parent_id ? " AND parent_id = ?4" : "",
		 f->newest_first ? " DESC" : "");
	rc = sqlite__prepare(ss, &st, sql, 0, what, e);
	if (rc < 0)
		goto out;
	while (!stop && remaining != 0) {
		page = remaining > 0 && remaining < STORE_LIST_PAGE
			       ? remaining
			       : STORE_LIST_PAGE;
		src = sqlite3_bind_int64(st, 1, cursor);
		if (src == SQLITE_OK)
			src = sqlite3_bind_int(st, 2, page);
		if (src == SQLITE_OK && f->status)
			src = sqlite3_bind_text(st, 3, f->status, -1,
						SQLITE_STATIC);
		if (src == SQLITE_OK && f->parent_id)
			src = sqlite3_bind_int64(st, 4, f->parent_id);
		while (src == SQLITE_OK && n < page) {
			src = sqlite3_step(st);
			if (src != SQLITE_ROW)
				break;
			read_task(st, &rows[n++]);
			src = SQLITE_OK;
		}
		if (src != SQLITE_OK && src != SQLITE_DONE) {
			rc = sqlite__fail(ss, e, what);
			goto out;
		}
		sqlite3_reset(st);
		rc = load_deps(ss, rows, n, what, e);
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
	sqlite3_finalize(st);
	return rc;
}

/* One COUNT per status, through the (status, ...) index. */
int
sqlite__task_counts(struct store *s, const char *const *statuses,
		    int64_t *counts, size_t n, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "count tasks";
	int64_t *got = xcalloc(n ? n : 1, sizeof(*got));
	sqlite3_stmt *st = NULL;
	size_t k;
	int rc;

	rc = sqlite__prepare(ss, &st,
			     "SELECT COUNT(*) FROM tasks WHERE status = ?", 0,
			     what, e);
	for (k = 0; rc == 0 && k < n; k++) {
		if (sqlite3_bind_text(st, 1, statuses[k], -1, SQLITE_STATIC))
			rc = sqlite__fail(ss, e, what);
		else
			rc = sqlite__step_int(ss, st, &got[k], what, e);
		sqlite3_reset(st);
	}
	if (rc == 0 && n)
		memcpy(counts, got, n * sizeof(*counts));
	sqlite3_finalize(st);
	free(got);
	return rc;
}

/* Draws the next fencing token (counters.lease_token + 1). */
static int
next_token(struct sqlite_store *ss, int64_t *out, const char *what,
	   struct err *e)
{
	sqlite3_stmt *st = NULL;
	int64_t token = 0;
	int rc;

	rc = sqlite__prepare(ss, &st,
			     "UPDATE counters SET value = value + 1"
			     " WHERE name = 'lease_token' RETURNING value",
			     0, what, e);
	if (rc == 0)
		rc = sqlite__step_int(ss, st, &token, what, e);
	sqlite3_finalize(st);
	if (rc == 0 && token <= 0)
		rc = err_set(e, BATON_ESTORE,
			     "cannot %s: the lease_token counter is missing",
			     what);
	if (rc == 0)
		*out = token;
	return rc;
}

/* The id of the first claimable task into *id (left 0 when none). */
static int
pick_task(struct sqlite_store *ss, int64_t now, int64_t *id,
	  const char *what, struct err *e)
{
	int rc;

	rc = sqlite__prepare(ss, &ss->claim, sql_claim_pick, 1, what, e);
	if (rc < 0)
		return rc;
	if (sqlite3_bind_int64(ss->claim, 1, now) != SQLITE_OK)
		rc = sqlite__fail(ss, e, what);
	else
		rc = sqlite__step_int(ss, ss->claim, id, what, e);
	sqlite__done(ss->claim);
	return rc;
}

/* Makes task id running under holder with token, for lease_ms. */
static int
take_task(struct sqlite_store *ss, int64_t id, const char *holder,
	  int64_t token, int64_t now, int64_t lease_ms, const char *what,
	  struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "UPDATE tasks SET status = 'running',"
			     " attempts = attempts + 1, started_at = ?1,"
			     " lease_holder = ?2, lease_token = ?3,"
			     " lease_expires_at = ?4,"
			     " version = version + 1, updated_at = ?1"
			     " WHERE id = ?5",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_int64(st, 1, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, holder, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 3, token);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 4, now + lease_ms);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 5, id);
	return step_done(ss, st, src, what, e);
}

/*
 * One claim inside the open write transaction: pick, draw a token, take,
 * read back and log. BATON_ENOTFOUND when nothing is claimable.
 */
static int
claim_in_tx(struct sqlite_store *ss, const char *holder, int64_t lease_ms,
	    int64_t now, struct task *out, const char *what, struct err *e)
{
	char type[] = "task_claimed";
	struct event ev = { 0 };
	struct task t = { 0 };
	int64_t id = 0, token = 0, seq = 0;
	int rc;

	rc = pick_task(ss, now, &id, what, e);
	if (rc == 0 && !id)
		return err_set(e, BATON_ENOTFOUND, "nothing to claim");
	if (rc == 0)
		rc = next_token(ss, &token, what, e);
	if (rc == 0)
		rc = take_task(ss, id, holder, token, now, lease_ms, what, e);
	if (rc == 0)
		rc = read_task_by_id(ss, id, &t, what, e);
	if (rc == 0) /* the row this transaction just wrote */
		rc = err_set(e, BATON_ESTORE, "cannot %s: task %lld vanished",
			     what, (long long)id);
	if (rc < 0)
		return rc;
	ev.task_id = id;
	ev.ts = now;
	ev.type = type;
	ev.data = store__claim_data(holder, token, t.attempts);
	rc = sqlite__insert_event(ss, &ev, &seq, what, e);
	free(ev.data);
	if (rc < 0) {
		task_release(&t);
		return rc;
	}
	*out = t;
	return 0;
}

/*
 * The claim, all inside one BEGIN IMMEDIATE, so two workers can never
 * take the same task or the same token. Not fenced: claiming is how a
 * worker gets a lease.
 */
int
sqlite__task_claim(struct store *s, const char *holder, int64_t lease_ms,
		   struct task *out, struct err *e)
{
	size_t n = 0;

	return sqlite__task_claim_batch(s, holder, lease_ms, 1, out, &n, e);
}

/* Up to max claims in one transaction (store_task_claim_batch). */
int
sqlite__task_claim_batch(struct store *s, const char *holder,
			 int64_t lease_ms, size_t max, struct task *out,
			 size_t *n, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = max > 1 ? "claim tasks" : "claim a task";
	int64_t now = time_now_ms();
	size_t got = 0;
	int rc;

	rc = sqlite__begin(ss, what, e);
	while (rc == 0 && got < max) {
		rc = claim_in_tx(ss, holder, lease_ms, now, &out[got], what, e);
		if (rc == 0)
			got++;
	}
	if (rc == BATON_ENOTFOUND && got) {
		rc = 0;
		if (e)
			*e = (struct err)ERR_INIT;
	}
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	sqlite__rollback(ss);
	if (rc == 0) {
		*n = got;
		return 0;
	}
	while (got)
		task_release(&out[--got]);
	return rc;
}

/*
 * The heartbeat, one guarded UPDATE: it matches only while the task is
 * still running under this very token.
 */
int
sqlite__task_renew(struct store *s, int64_t id, int64_t token,
		   int64_t lease_ms, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	int64_t now = time_now_ms();
	char what[64];
	int rc, src;

	snprintf(what, sizeof(what), "renew the lease on task %lld",
		 (long long)id);
	rc = sqlite__begin(ss, what, e);
	if (rc == 0)
		rc = sqlite__prepare(ss, &st,
				     "UPDATE tasks SET lease_expires_at = ?"
				     " WHERE id = ? AND lease_token = ?"
				     " AND status = 'running'",
				     0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_int64(st, 1, now + lease_ms);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 2, id);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 3, token);
	rc = step_done(ss, st, src, what, e);
	if (rc == 0 && sqlite3_changes(ss->db) == 0)
		rc = err_set(e, BATON_EFENCED,
			     "cannot %s: token %lld no longer holds it (the "
			     "lease was taken over or the task stopped "
			     "running)",
			     what, (long long)token);
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
out:
	sqlite__rollback(ss);
	return rc;
}

int
sqlite__task_next_due(struct store *s, int64_t *out, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	int64_t due = 0;
	int rc;

	rc = query_int(ss,
		       "SELECT COALESCE(MIN(v), 0) FROM ("
		       " SELECT MIN(not_before) AS v FROM tasks"
		       "  WHERE status = 'queued' AND not_before > ?1"
		       " UNION ALL"
		       " SELECT MIN(not_before) FROM tasks"
		       "  WHERE status = 'blocked'"
		       "  AND block_reason = 'awaiting_judge'"
		       "  AND judged_at = 0 AND not_before > ?1"
		       " UNION ALL"
		       " SELECT MIN(lease_expires_at) FROM tasks"
		       "  WHERE status = 'running')",
		       time_now_ms(), &due, "find when a task is due", e);
	if (rc == 0)
		*out = due;
	return rc;
}

int
sqlite__task_events(struct store *s, int64_t task_id, int64_t after_seq,
		    store_event_cb *cb, void *arg, struct err *e)
{
	return sqlite__list_events(sqlite__store(s), NULL, task_id, after_seq,
				   NULL, cb, arg, e);
}

/* ---- workers ------------------------------------------------------------ */

/* Insert or refresh; a stopped worker that beats again is alive again. */
int
sqlite__worker_beat(struct store *s, const struct worker_rec *w,
		    struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	int64_t now = time_now_ms();
	char what[256];
	int rc, src;

	snprintf(what, sizeof(what), "record worker '%.200s'", w->id);
	rc = sqlite__begin(ss, what, e);
	if (rc == 0)
		rc = sqlite__prepare(
			ss, &st,
			"INSERT INTO workers (id, host, pid, task_id,"
			" started_at, heartbeat_at, stopped_at)"
			" VALUES (?, ?, ?, ?, ?, ?, 0)"
			" ON CONFLICT (id) DO UPDATE SET host = excluded.host,"
			" pid = excluded.pid, task_id = excluded.task_id,"
			" heartbeat_at = excluded.heartbeat_at, stopped_at = 0",
			0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_text(st, 1, w->id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, w->host ? w->host : "", -1,
					SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 3, w->pid);
	if (src == SQLITE_OK)
		src = sqlite__bind_id(st, 4, w->task_id);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 5,
					 w->started_at ? w->started_at : now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 6, now);
	rc = step_done(ss, st, src, what, e);
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
out:
	sqlite__rollback(ss);
	return rc;
}

int
sqlite__worker_stop(struct store *s, const char *id, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	char what[256];
	int rc, src;

	snprintf(what, sizeof(what), "stop worker '%.200s'", id);
	rc = sqlite__begin(ss, what, e);
	if (rc == 0)
		rc = sqlite__prepare(ss, &st,
				     "UPDATE workers SET stopped_at = ?"
				     " WHERE id = ?",
				     0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_int64(st, 1, time_now_ms());
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	rc = step_done(ss, st, src, what, e);
	if (rc == 0 && sqlite3_changes(ss->db) == 0)
		rc = err_set(e, BATON_ENOTFOUND, "no worker '%s'", id);
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
out:
	sqlite__rollback(ss);
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
sqlite__worker_list(struct store *s, store_worker_cb *cb, void *arg,
		    struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "list workers";
	struct worker_rec *rows = NULL;
	sqlite3_stmt *st = NULL;
	int rc, src, n = 0, alloc = 0, i, stop = 0;

	rc = sqlite__prepare(ss, &st,
			     "SELECT id, host, pid, task_id, started_at,"
			     " heartbeat_at, stopped_at, clock_skew_ms"
			     " FROM workers WHERE stopped_at = 0 ORDER BY id",
			     0, what, e);
	if (rc < 0)
		goto out;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct worker_rec *w;

		ALLOC_GROW(rows, n + 1, alloc);
		w = &rows[n++];
		w->id = sqlite__column_text(st, 0);
		w->host = sqlite__column_text(st, 1);
		w->pid = sqlite3_column_int64(st, 2);
		w->task_id = sqlite3_column_int64(st, 3);
		w->started_at = sqlite3_column_int64(st, 4);
		w->heartbeat_at = sqlite3_column_int64(st, 5);
		w->stopped_at = sqlite3_column_int64(st, 6);
		w->skew_ms = sqlite3_column_int64(st, 7);
	}
	if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}
	sqlite3_finalize(st);
	st = NULL;
	for (i = 0; i < n && !stop; i++)
		stop = cb(&rows[i], arg);
out:
	for (i = 0; i < n; i++)
		worker_release(&rows[i]);
	free(rows);
	sqlite3_finalize(st);
	return rc;
}

/* ---- the merge queue ---------------------------------------------------- */

/*
 * Reads the merge item a statement selects (MERGE_COLUMNS) into *out.
 * Returns 1 when found, 0 when not, or an error.
 */
static int
step_merge(struct sqlite_store *ss, sqlite3_stmt *st, int src,
	   struct merge_item *out, const char *what, struct err *e)
{
	int rc = 0;

	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		read_merge(st, out);
		rc = 1;
	} else if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
	}
	sqlite3_finalize(st);
	return rc;
}

/* Reads item id, or the item of run_id when id is 0: 1, 0 or an error. */
static int
read_merge_item(struct sqlite_store *ss, int64_t id, const char *run_id,
		struct merge_item *out, const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     id ? "SELECT " MERGE_COLUMNS
				  " FROM merge_queue WHERE id = ?"
				: "SELECT " MERGE_COLUMNS
				  " FROM merge_queue WHERE run_id = ?",
			     0, what, e);
	if (rc < 0)
		return rc;
	if (id)
		src = sqlite3_bind_int64(st, 1, id);
	else
		src = sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
	return step_merge(ss, st, src, out, what, e);
}

/*
 * A run is queued at most once (merge_queue.run_id is UNIQUE): a second
 * add is BATON_EBUSY naming the item that has it, and writes nothing.
 */
int
sqlite__merge_add(struct store *s, struct merge_item *m, struct event *ev,
		  struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	char pending[] = MERGE_PENDING;
	struct merge_item row = *m;
	sqlite3_stmt *st = NULL;
	int64_t now = time_now_ms(), id = 0, ts = 0, evseq = 0;
	int64_t created = m->created_at ? m->created_at : now;
	char what[256];
	int rc, src, i = 1;

	snprintf(what, sizeof(what), "queue run '%.200s' for merging",
		 m->run_id);
	if (!row.status)
		row.status = pending;
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc < 0)
		goto out;
	rc = sqlite__prepare(ss, &st,
			     "SELECT id FROM merge_queue WHERE run_id = ?", 0,
			     what, e);
	if (rc < 0)
		goto out;
	if (sqlite3_bind_text(st, 1, m->run_id, -1, SQLITE_STATIC))
		rc = sqlite__fail(ss, e, what);
	else
		rc = sqlite__step_int(ss, st, &id, what, e);
	sqlite3_finalize(st);
	st = NULL;
	if (rc == 0 && id)
		rc = err_set(e, BATON_EBUSY,
			     "cannot %s: it is already queued (item %lld)",
			     what, (long long)id);
	if (rc < 0)
		goto out;

	rc = sqlite__prepare(ss, &st, sql_merge_insert, 0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_null(st, i++);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, i++, m->run_id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, created);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, 1);
	if (src == SQLITE_OK)
		src = bind_merge(st, &i, &row);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		if (sqlite3_extended_errcode(ss->db) ==
		    SQLITE_CONSTRAINT_FOREIGNKEY)
			rc = err_set(e, BATON_ENOTFOUND,
				     "cannot %s: no run '%s'", what,
				     m->run_id);
		else
			rc = sqlite__fail(ss, e, what);
		goto out;
	}
	id = sqlite3_last_insert_rowid(ss->db);
	if (ev)
		rc = add_event(ss, ev, m->run_id, m->task_id, now, &ts, &evseq,
			       what, e);
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;

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
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	return rc;
}

int
sqlite__merge_get(struct store *s, int64_t id, const char *run_id,
		  struct merge_item *out, struct err *e)
{
	char what[256];
	int rc;

	if (id)
		snprintf(what, sizeof(what), "read merge item %lld",
			 (long long)id);
	else
		snprintf(what, sizeof(what), "read the merge item of run '%s'",
			 run_id);
	rc = read_merge_item(sqlite__store(s), id, run_id, out, what, e);
	if (rc == 0 && id)
		return err_set(e, BATON_ENOTFOUND, "no merge item %lld",
			       (long long)id);
	if (rc == 0)
		return err_set(e, BATON_ENOTFOUND,
			       "run '%s' is not in the merge queue", run_id);
	return rc < 0 ? rc : 0;
}

/* The guarded update of an item, with its event, or neither. */
int
sqlite__merge_update(struct store *s, struct merge_item *m,
		     const char *froms, struct event *ev, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	int64_t now = time_now_ms(), ts = 0, evseq = 0;
	char what[64];
	int rc, src, i = 1;

	snprintf(what, sizeof(what), "update merge item %lld",
		 (long long)m->id);
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc == 0)
		rc = sqlite__prepare(ss, &st, sql_merge_update, 0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_int64(st, i++, now);
	if (src == SQLITE_OK)
		src = bind_merge(st, &i, m);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, m->id);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, m->version);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, i++, froms, -1, SQLITE_STATIC);
	rc = step_done(ss, st, src, what, e);
	if (rc < 0)
		goto out;
	if (sqlite3_changes(ss->db) == 0) {
		rc = lost_update(ss,
				 "SELECT version FROM merge_queue WHERE id = ?",
				 "merge item", m->id, m->version, what, e);
		goto out;
	}
	if (ev)
		rc = add_event(ss, ev, m->run_id, m->task_id, now, &ts, &evseq,
			       what, e);
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;

	m->version++;
	m->updated_at = now;
	if (ev) {
		ev->ts = ts;
		ev->seq = evseq;
	}
out:
	sqlite__rollback(ss);
	return rc;
}

/* Items in id order, a page at a time (callbacks may write). */
int
sqlite__merge_list(struct store *s, const char *status, store_merge_cb *cb,
		   void *arg, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "list the merge queue";
	struct merge_item *rows = xcalloc(STORE_LIST_PAGE, sizeof(*rows));
	sqlite3_stmt *st = NULL;
	int64_t cursor = 0;
	int rc, src, n = 0, i, stop = 0;

	rc = sqlite__prepare(ss, &st,
			     status ? "SELECT " MERGE_COLUMNS
				      " FROM merge_queue"
				      " WHERE status = ?3 AND id > ?1"
				      " ORDER BY id LIMIT ?2"
				    : "SELECT " MERGE_COLUMNS
				      " FROM merge_queue"
				      " WHERE id > ?1 ORDER BY id LIMIT ?2",
			     0, what, e);
	if (rc < 0)
		goto out;
	while (!stop) {
		src = sqlite3_bind_int64(st, 1, cursor);
		if (src == SQLITE_OK)
			src = sqlite3_bind_int(st, 2, STORE_LIST_PAGE);
		if (src == SQLITE_OK && status)
			src = sqlite3_bind_text(st, 3, status, -1,
						SQLITE_STATIC);
		while (src == SQLITE_OK && n < STORE_LIST_PAGE) {
			src = sqlite3_step(st);
			if (src != SQLITE_ROW)
				break;
			read_merge(st, &rows[n++]);
			src = SQLITE_OK;
		}
		if (src != SQLITE_OK && src != SQLITE_DONE) {
			rc = sqlite__fail(ss, e, what);
			goto out;
		}
		sqlite3_reset(st);
		for (i = 0; i < n && !stop; i++)
			stop = cb(&rows[i], arg);
		if (n < STORE_LIST_PAGE)
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
	sqlite3_finalize(st);
	return rc;
}

/*
 * The merge claim, like the task claim one transaction: the first item
 * in queue order that is due (pending and past its not_before) or
 * abandoned (processing, but its claim ran out: its lander died).
 */
int
sqlite__merge_claim(struct store *s, const char *holder, int64_t claim_ms,
		    struct merge_item *out, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "claim a merge item";
	char type[] = "merge_claimed";
	struct merge_item m = { 0 };
	struct event ev = { 0 };
	sqlite3_stmt *st = NULL;
	int64_t now = time_now_ms(), id = 0, seq = 0;
	int rc, src;

	rc = sqlite__begin(ss, what, e);
	if (rc == 0)
		rc = query_int(ss,
			       "SELECT id FROM merge_queue"
			       " WHERE (status = 'pending'"
			       "  AND not_before <= ?1)"
			       " OR (status = 'processing'"
			       "  AND claim_expires_at < ?1)"
			       " ORDER BY id LIMIT 1",
			       now, &id, what, e);
	if (rc == 0 && !id)
		rc = err_set(e, BATON_ENOTFOUND, "nothing to merge");
	if (rc == 0)
		rc = sqlite__prepare(ss, &st,
				     "UPDATE merge_queue SET"
				     " status = 'processing', claimed_by = ?1,"
				     " claim_expires_at = ?2,"
				     " version = version + 1, updated_at = ?3"
				     " WHERE id = ?4",
				     0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_text(st, 1, holder, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 2, now + claim_ms);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 3, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 4, id);
	rc = step_done(ss, st, src, what, e);
	if (rc == 0)
		rc = read_merge_item(ss, id, NULL, &m, what, e);
	if (rc == 0) /* the row this transaction just wrote */
		rc = err_set(e, BATON_ESTORE, "cannot %s: item %lld vanished",
			     what, (long long)id);
	if (rc < 0)
		goto out;
	ev.run_id = m.run_id;
	ev.task_id = m.task_id;
	ev.ts = now;
	ev.type = type;
	ev.data = store__merge_claim_data(id, holder);
	rc = sqlite__insert_event(ss, &ev, &seq, what, e);
	free(ev.data);
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;
	*out = m;
	memset(&m, 0, sizeof(m));
out:
	sqlite__rollback(ss);
	merge_item_release(&m);
	return rc;
}

/* ---- plans -------------------------------------------------------------- */

/* Version MAX + 1 of source, read under the write lock. */
int
sqlite__plan_add(struct store *s, const char *source, const char *content,
		 int64_t *id, int *version, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	int64_t v = 0;
	char what[256];
	int rc, src;

	snprintf(what, sizeof(what), "store a plan of '%.200s'", source);
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc == 0)
		rc = sqlite__prepare(ss, &st,
				     "SELECT COALESCE(MAX(version), 0) + 1"
				     " FROM plans WHERE source = ?",
				     0, what, e);
	if (rc < 0)
		goto out;
	if (sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC))
		rc = sqlite__fail(ss, e, what);
	else
		rc = sqlite__step_int(ss, st, &v, what, e);
	sqlite3_finalize(st);
	st = NULL;
	if (rc == 0)
		rc = sqlite__prepare(ss, &st,
				     "INSERT INTO plans (source, version,"
				     " content, created_at)"
				     " VALUES (?, ?, ?, ?)",
				     0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 2, v);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, content, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 4, time_now_ms());
	rc = step_done(ss, st, src, what, e);
	st = NULL;
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;
	*id = sqlite3_last_insert_rowid(ss->db);
	*version = (int)v;
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	return rc;
}
