/*
 * The forge's tables on SQLite (store.h from store_forge_delivery_seen
 * on; schema in sql/005-forge.sql): the webhook deliveries acted on, the
 * links of tasks to issues and pull requests, the polled listings'
 * cursors and the client's counters.
 *
 * Intake is exactly once per (repo, issue) however many syncs run, on
 * however many hosts: the look-up of the issue's link, the insert of the
 * task and the insert of the link are one BEGIN IMMEDIATE transaction,
 * and SQLite lets one writer in at a time, so the second of two racing
 * syncs finds the first one's link and takes its task:
 *
 *	sync A: BEGIN IMMEDIATE ─ no link ─ task 7 ─ link #12 → 7 ─ COMMIT
 *	sync B:        (waits for the lock) ─────────────── BEGIN IMMEDIATE
 *	        ─ link #12 → 7: nothing written, t->id = 7
 *
 * The unique key on (repo, issue_number) stands behind that: were the
 * look-up ever skipped, the link's insert would fail, not duplicate.
 */
#include "util/compat.h"

#include <sqlite3.h>

#include "core/run.h"
#include "store/sqlite_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/*
 * Every column of forge_links in the order read_link() reads them: the
 * four the store sets, then the lists of store_int.h, from which the
 * INSERT and the UPDATE are generated too.
 */
#define LINK_COLUMNS                                                           \
	"task_id, created_at, updated_at, version"                             \
	FORGE_LINK_STRINGS(SQL_COMMA_NAME) FORGE_LINK_NUMBERS(SQL_COMMA_NAME)  \
	FORGE_LINK_INTS(SQL_COMMA_NAME)

static const char sql_link_insert[] =
	"INSERT INTO forge_links (" LINK_COLUMNS ") VALUES (?, ?, ?, ?"
	FORGE_LINK_STRINGS(SQL_COMMA_QMARK) FORGE_LINK_NUMBERS(SQL_COMMA_QMARK)
	FORGE_LINK_INTS(SQL_COMMA_QMARK) ")";
static const char sql_link_update[] =
	"UPDATE forge_links SET version = version + 1, updated_at = ?"
	FORGE_LINK_STRINGS(SQL_SET_QMARK) FORGE_LINK_NUMBERS(SQL_SET_QMARK)
	FORGE_LINK_INTS(SQL_SET_QMARK) " WHERE task_id = ? AND version = ?";
static const char sql_link_by_task[] =
	"SELECT " LINK_COLUMNS " FROM forge_links WHERE task_id = ?";

#define STATS_SET_ADD(f) ", " #f " = " #f " + excluded." #f
static const char sql_stats_add[] =
	"INSERT INTO forge_stats (id" FORGE_STATS(SQL_COMMA_NAME)
	") VALUES (1" FORGE_STATS(SQL_COMMA_QMARK) ") ON CONFLICT (id)"
	" DO UPDATE SET id = 1" FORGE_STATS(STATS_SET_ADD);
#undef STATS_SET_ADD
static const char sql_stats_get[] =
	"SELECT 0" FORGE_STATS(SQL_COMMA_NAME) " FROM forge_stats WHERE id = 1";

/* Binds the fields put writes from parameter *i on, and advances *i. */
static int
bind_link(sqlite3_stmt *st, int *i, const struct forge_link *l)
{
	int src = SQLITE_OK;

#define BIND_TEXT(f)                                                           \
	if (src == SQLITE_OK)                                                  \
		src = sqlite3_bind_text(st, (*i)++, l->f, -1, SQLITE_STATIC);
#define BIND_NUMBER(f)                                                         \
	if (src == SQLITE_OK)                                                  \
		src = sqlite__bind_id(st, (*i)++, l->f);
#define BIND_INT(f)                                                            \
	if (src == SQLITE_OK)                                                  \
		src = sqlite3_bind_int64(st, (*i)++, l->f);
	FORGE_LINK_STRINGS(BIND_TEXT)
	FORGE_LINK_NUMBERS(BIND_NUMBER)
	FORGE_LINK_INTS(BIND_INT)
#undef BIND_TEXT
#undef BIND_NUMBER
#undef BIND_INT
	return src;
}

/* Fills l (overwritten, not released) from a LINK_COLUMNS row. */
static void
read_link(sqlite3_stmt *st, struct forge_link *l)
{
	int i = 4;

	memset(l, 0, sizeof(*l));
	l->task_id = sqlite3_column_int64(st, 0);
	l->created_at = sqlite3_column_int64(st, 1);
	l->updated_at = sqlite3_column_int64(st, 2);
	l->version = sqlite3_column_int64(st, 3);
#define READ_TEXT(f) l->f = sqlite__column_text(st, i++);
#define READ_INT(f)  l->f = sqlite3_column_int64(st, i++);
	FORGE_LINK_STRINGS(READ_TEXT)
	FORGE_LINK_NUMBERS(READ_INT)
	FORGE_LINK_INTS(READ_INT)
#undef READ_TEXT
#undef READ_INT
}

/*
 * The task linked to number n of repo, as an issue (pr 0) or a pull
 * request (pr 1), other than task not (0: any): into *out, left alone
 * when there is none.
 */
static int
linked_task(struct sqlite_store *ss, const char *repo, int pr, int64_t n,
	    int64_t not, int64_t *out, const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     pr ? "SELECT task_id FROM forge_links WHERE"
				  " repo = ? AND pr_number = ? AND task_id <> ?"
				: "SELECT task_id FROM forge_links WHERE"
				  " repo = ? AND issue_number = ?"
				  " AND task_id <> ?",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, repo, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 2, n);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 3, not);
	if (src != SQLITE_OK)
		rc = sqlite__fail(ss, e, what);
	else
		rc = sqlite__step_int(ss, st, out, what, e);
	sqlite3_finalize(st);
	return rc;
}

/*
 * Inserts l as the link of task_id (version 1, created and updated now)
 * inside the caller's transaction. A unique key that fails is
 * BATON_EEXIST, a task that does not exist BATON_ENOTFOUND.
 */
static int
insert_link(struct sqlite_store *ss, const struct forge_link *l,
	    int64_t task_id, int64_t now, const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = 0, src, i = 1;

	rc = sqlite__prepare(ss, &st, sql_link_insert, 0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_int64(st, i++, task_id);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, 1);
	if (src == SQLITE_OK)
		src = bind_link(st, &i, l);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		int code = sqlite3_extended_errcode(ss->db);

		if (code == SQLITE_CONSTRAINT_FOREIGNKEY)
			rc = err_set(e, BATON_ENOTFOUND,
				     "cannot %s: no task %lld", what,
				     (long long)task_id);
		else if (code == SQLITE_CONSTRAINT_UNIQUE ||
			 code == SQLITE_CONSTRAINT_PRIMARYKEY)
			rc = store__forge_link_taken(l, 0, 0, what, e);
		else
			rc = sqlite__fail(ss, e, what);
	}
	sqlite3_finalize(st);
	return rc;
}

/* ---- deliveries --------------------------------------------------------- */

/*
 * INSERT OR IGNORE on the delivery id's primary key: one statement, so
 * two servers handling one redelivery at once still act once.
 */
int
sqlite__forge_delivery_seen(struct store *s, const char *delivery_id,
			    const char *event, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	char what[160];
	int rc, src;

	snprintf(what, sizeof(what), "record webhook delivery '%.100s'",
		 delivery_id);
	rc = sqlite__prepare(ss, &st,
			     "INSERT OR IGNORE INTO forge_deliveries"
			     " (delivery_id, event, received_at)"
			     " VALUES (?, ?, ?)",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, delivery_id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = event ? sqlite3_bind_text(st, 2, event, -1,
						SQLITE_STATIC)
			    : sqlite3_bind_null(st, 2);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 3, time_now_ms());
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_DONE)
		rc = sqlite3_changes(ss->db) == 1;
	else
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

/* ---- links -------------------------------------------------------------- */

/*
 * The task, its link and ev, or nothing: see the top of the file. t, l
 * and ev change only on success; when the issue had a task already
 * only t->id does.
 */
int
sqlite__forge_intake(struct store *s, struct task *t, struct forge_link *l,
		     struct event *ev, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	struct store_task_defaults d;
	struct task row = store__task_with_defaults(t, &d);
	int64_t now = time_now_ms(), id = 0, ts = 0, evseq = 0, had = 0;
	int64_t created = t->created_at ? t->created_at : now;
	char what[256];
	int rc;

	snprintf(what, sizeof(what), "take issue #%lld of %.200s in",
		 (long long)l->issue_number, l->repo);
	if (!row.max_attempts)
		row.max_attempts = TASK_DEFAULT_MAX_ATTEMPTS;
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc == 0)
		rc = linked_task(ss, l->repo, 0, l->issue_number, 0, &had,
				 what, e);
	if (rc < 0 || had)
		goto out;
	if (l->pr_number)
		rc = linked_task(ss, l->repo, 1, l->pr_number, 0, &id, what,
				 e);
	if (rc == 0 && id)
		rc = store__forge_link_taken(l, id, 1, what, e);
	if (rc == 0)
		rc = sqlite__task_insert(ss, t, &row, created, now, ev, &id,
					 &ts, &evseq, what, e);
	if (rc == 0)
		rc = insert_link(ss, l, id, now, what, e);
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;

	store__task_added(t, &row, id, created, now, ev, ts, evseq);
	l->task_id = id;
	l->created_at = now;
	l->updated_at = now;
	l->version = 1;
	rc = 1;
out:
	sqlite__rollback(ss);
	if (rc == 0 && had)
		t->id = had;
	return rc;
}

/* Reads the link of task_id into *out: 1, 0 when none, or an error. */
static int
read_link_by_task(struct sqlite_store *ss, int64_t task_id,
		  struct forge_link *out, const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = 0, src;

	rc = sqlite__prepare(ss, &st, sql_link_by_task, 0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_int64(st, 1, task_id);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		read_link(st, out);
		rc = 1;
	} else if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
	}
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__forge_link_get(struct store *s, int64_t task_id,
		       struct forge_link *out, struct err *e)
{
	char what[80];
	int rc;

	snprintf(what, sizeof(what), "read the forge link of task %lld",
		 (long long)task_id);
	rc = read_link_by_task(sqlite__store(s), task_id, out, what, e);
	if (rc == 0)
		return err_set(e, BATON_ENOTFOUND,
			       "task %lld has no forge link",
			       (long long)task_id);
	return rc < 0 ? rc : 0;
}

/* The versioned UPDATE of l; 0 rows changed is a lost race or no link. */
static int
update_link(struct sqlite_store *ss, const struct forge_link *l, int64_t now,
	    const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int64_t found = -1;
	int rc, src, i = 1;

	rc = sqlite__prepare(ss, &st, sql_link_update, 0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_int64(st, i++, now);
	if (src == SQLITE_OK)
		src = bind_link(st, &i, l);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, l->task_id);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, l->version);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		int code = sqlite3_extended_errcode(ss->db);

		if (code == SQLITE_CONSTRAINT_UNIQUE)
			rc = store__forge_link_taken(l, 0, 0, what, e);
		else
			rc = sqlite__fail(ss, e, what);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc < 0 || sqlite3_changes(ss->db) == 1)
		return rc;

	rc = sqlite__prepare(ss, &st,
			     "SELECT version FROM forge_links WHERE task_id = ?",
			     0, what, e);
	if (rc == 0 && sqlite3_bind_int64(st, 1, l->task_id) != SQLITE_OK)
		rc = sqlite__fail(ss, e, what);
	if (rc == 0)
		rc = sqlite__step_int(ss, st, &found, what, e);
	sqlite3_finalize(st);
	if (rc == 0 && found < 0)
		rc = err_set(e, BATON_ENOTFOUND,
			     "cannot %s: task %lld has no forge link", what,
			     (long long)l->task_id);
	else if (rc == 0)
		rc = store__forge_link_stale(l, what, e);
	return rc;
}

/*
 * Version 0 inserts, any other updates if it is still the stored one.
 * The issue and PR numbers are looked up first, so that a number held
 * by another task is an error naming that task.
 */
int
sqlite__forge_link_put(struct store *s, struct forge_link *l, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	int64_t now = time_now_ms(), other = 0, found = -1;
	char what[80];
	int rc;

	snprintf(what, sizeof(what), "write the forge link of task %lld",
		 (long long)l->task_id);
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc == 0 && l->issue_number)
		rc = linked_task(ss, l->repo, 0, l->issue_number, l->task_id,
				 &other, what, e);
	if (rc == 0 && other)
		rc = store__forge_link_taken(l, other, 0, what, e);
	if (rc == 0 && l->pr_number)
		rc = linked_task(ss, l->repo, 1, l->pr_number, l->task_id,
				 &other, what, e);
	if (rc == 0 && other)
		rc = store__forge_link_taken(l, other, 1, what, e);
	if (rc < 0)
		goto out;
	if (l->version == 0) {
		sqlite3_stmt *st = NULL;

		rc = sqlite__prepare(ss, &st,
				     "SELECT version FROM forge_links"
				     " WHERE task_id = ?",
				     0, what, e);
		if (rc == 0 &&
		    sqlite3_bind_int64(st, 1, l->task_id) != SQLITE_OK)
			rc = sqlite__fail(ss, e, what);
		if (rc == 0)
			rc = sqlite__step_int(ss, st, &found, what, e);
		sqlite3_finalize(st);
		if (rc == 0 && found >= 0)
			rc = store__forge_link_stale(l, what, e);
		if (rc == 0)
			rc = insert_link(ss, l, l->task_id, now, what, e);
	} else {
		rc = update_link(ss, l, now, what, e);
	}
	if (rc == 0)
		rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;

	if (l->version == 0)
		l->created_at = now;
	l->version++;
	l->updated_at = now;
out:
	sqlite__rollback(ss);
	return rc;
}

/* The links of repo by task id, a page at a time (callbacks may write). */
int
sqlite__forge_links(struct store *s, const char *repo,
		    store_forge_link_cb *cb, void *arg, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "list forge links";
	struct forge_link *rows = xcalloc(STORE_LIST_PAGE, sizeof(*rows));
	sqlite3_stmt *st = NULL;
	int64_t cursor = 0;
	int rc, src, n = 0, i, stop = 0;

	rc = sqlite__prepare(ss, &st,
			     "SELECT " LINK_COLUMNS " FROM forge_links"
			     " WHERE repo = ?1 AND task_id > ?2"
			     " ORDER BY task_id LIMIT ?3",
			     0, what, e);
	while (rc == 0 && !stop) {
		src = sqlite3_bind_text(st, 1, repo, -1, SQLITE_STATIC);
		if (src == SQLITE_OK)
			src = sqlite3_bind_int64(st, 2, cursor);
		if (src == SQLITE_OK)
			src = sqlite3_bind_int(st, 3, STORE_LIST_PAGE);
		while (src == SQLITE_OK && n < STORE_LIST_PAGE) {
			src = sqlite3_step(st);
			if (src != SQLITE_ROW)
				break;
			read_link(st, &rows[n++]);
			src = SQLITE_OK;
		}
		if (src != SQLITE_OK && src != SQLITE_DONE) {
			rc = sqlite__fail(ss, e, what);
			break;
		}
		sqlite3_reset(st);
		for (i = 0; i < n && !stop; i++)
			stop = cb(&rows[i], arg);
		if (n < STORE_LIST_PAGE)
			break;
		cursor = rows[n - 1].task_id;
		for (i = 0; i < n; i++)
			forge_link_release(&rows[i]);
		n = 0;
	}
	for (i = 0; i < n; i++)
		forge_link_release(&rows[i]);
	free(rows);
	sqlite3_finalize(st);
	return rc;
}

/* ---- cursors and counters ----------------------------------------------- */

int
sqlite__forge_cursor_get(struct store *s, const char *url, char **etag,
			 char **cursor, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	char what[320];
	int rc, src;

	snprintf(what, sizeof(what), "read the cursor of '%.280s'", url);
	rc = sqlite__prepare(ss, &st,
			     "SELECT etag, cursor FROM forge_cursors"
			     " WHERE url = ?",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, url, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		*etag = sqlite__column_text(st, 0);
		*cursor = sqlite__column_text(st, 1);
	} else if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
	}
	sqlite3_finalize(st);
	return rc;
}

/* One upsert: the URL's row is created or replaced whole. */
int
sqlite__forge_cursor_set(struct store *s, const char *url, const char *etag,
			 const char *cursor, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	char what[320];
	int rc, src;

	snprintf(what, sizeof(what), "write the cursor of '%.280s'", url);
	rc = sqlite__prepare(ss, &st,
			     "INSERT INTO forge_cursors"
			     " (url, etag, cursor, updated_at)"
			     " VALUES (?, ?, ?, ?) ON CONFLICT (url) DO UPDATE"
			     " SET etag = excluded.etag,"
			     " cursor = excluded.cursor,"
			     " updated_at = excluded.updated_at",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, url, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, etag, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, cursor, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 4, time_now_ms());
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE)
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

/* One upsert that adds: concurrent adds from many processes all count. */
int
sqlite__forge_stats_add(struct store *s, const struct forge_stats *d,
			struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "count forge calls";
	sqlite3_stmt *st = NULL;
	int rc, src = SQLITE_OK, i = 1;

	rc = sqlite__prepare(ss, &st, sql_stats_add, 0, what, e);
	if (rc < 0)
		return rc;
#define BIND_STAT(f)                                                           \
	if (src == SQLITE_OK)                                                  \
		src = sqlite3_bind_int64(st, i++, d->f);
	FORGE_STATS(BIND_STAT)
#undef BIND_STAT
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE)
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__forge_stats_get(struct store *s, struct forge_stats *out,
			struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "read the forge counters";
	sqlite3_stmt *st = NULL;
	int rc, src, i = 1;

	rc = sqlite__prepare(ss, &st, sql_stats_get, 0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
#define READ_STAT(f) out->f = sqlite3_column_int64(st, i++);
		FORGE_STATS(READ_STAT)
#undef READ_STAT
	} else if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
	}
	sqlite3_finalize(st);
	return rc;
}
