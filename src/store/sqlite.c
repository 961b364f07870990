/*
 * The SQLite backend of the store (store.h, store_int.h): one database
 * file shared by every baton process working in a repository, typically
 * a foreground "baton run" and a "baton pause" typed in another
 * terminal.
 *
 * How that sharing stays safe:
 *   - WAL, so readers never block the writer and the writer never blocks
 *     readers; synchronous=FULL, so a COMMIT that returned is on disk.
 *   - Every write is one BEGIN IMMEDIATE transaction: it takes the write
 *     lock up front (waiting up to STORE_BUSY_TIMEOUT_MS for another
 *     process to finish), so a transaction never fails halfway because
 *     someone else started writing after it read.
 *   - Under a fence (store_fence), each of those transactions first
 *     checks that the fencing task's lease is still ours
 *     (sqlite__begin_fenced), so a worker whose lease was taken over
 *     writes nothing, however late it wakes.
 *   - A run update is "UPDATE ... WHERE id = ? AND version = ?" plus its
 *     event, committed together; zero rows changed means another writer
 *     got there first (BATON_ECONFLICT) and the transaction is rolled
 *     back.
 *   - List callbacks run while no statement is active: rows are read a
 *     page at a time and handed out between pages, so a callback may
 *     call back into the store, writes included.
 *
 * The schema comes from the numbered migrations in sql/, compiled into
 * the binary; open applies those not yet recorded in schema_migrations,
 * each in its own transaction.
 *
 * The task queue, workers, the merge queue and plans are in
 * sqlite_queue.c; what both files share is in sqlite_int.h.
 */
#include "util/compat.h"

#include <errno.h>
#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

#include "core/ids.h"
#include "core/run.h"
#include "store/store.h"
#include "store/sqlite_int.h"
#include "store/store_int.h"
#include "util/buf.h"
#include "util/embed.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define RUN_COLUMNS                                                            \
	"seq, id, task, created_at, updated_at, version"                       \
	RUN_TEXT_MUTABLE(SQL_COMMA_NAME) RUN_INT_MUTABLE(SQL_COMMA_NAME)       \
	", cost_usd" RUN_REQUESTS(SQL_COMMA_NAME)

static const char sql_run_insert[] =
	"INSERT INTO runs (" RUN_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?"
	RUN_TEXT_MUTABLE(SQL_COMMA_QMARK) RUN_INT_MUTABLE(SQL_COMMA_QMARK) ", ?"
	RUN_REQUESTS(SQL_COMMA_QMARK) ")";
static const char sql_run_update[] =
	"UPDATE runs SET version = version + 1, updated_at = ?"
	RUN_TEXT_MUTABLE(SQL_SET_QMARK) RUN_INT_MUTABLE(SQL_SET_QMARK)
	", cost_usd = ? WHERE id = ? AND version = ?"
	" AND instr(?, '|' || status || '|') > 0";
static const char sql_run_by_id[] =
	"SELECT " RUN_COLUMNS " FROM runs WHERE id = ?";
static const char sql_run_by_seq[] =
	"SELECT " RUN_COLUMNS " FROM runs WHERE seq = ?";
/*
 * An event without a task_id (?7 NULL) takes its run's, if the run has
 * one: the run's row is written before its events in every transaction,
 * so the subquery sees the task_id being written.
 */
static const char sql_event_insert[] =
	"INSERT INTO events (run_id, ts, type, from_status, to_status, data,"
	" task_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, COALESCE(?7,"
	" (SELECT NULLIF(task_id, 0) FROM runs WHERE id = ?1)))";

struct sqlite_store *
sqlite__store(struct store *s)
{
	return (struct sqlite_store *)s;
}

int
sqlite__fail(struct sqlite_store *ss, struct err *e, const char *what)
{
	int code = sqlite3_extended_errcode(ss->db);

	if ((code & 0xff) == SQLITE_BUSY)
		return err_set(e, BATON_ESTORE,
			       "cannot %s: %s (another process kept it busy "
			       "for more than %d s)",
			       what, sqlite3_errmsg(ss->db),
			       STORE_BUSY_TIMEOUT_MS / 1000);
	/* Out of space: -ENOSPC, so that a driver can tell it from a bad
	 * database and leave its run to be resumed. */
	if ((code & 0xff) == SQLITE_FULL ||
	    sqlite3_system_errno(ss->db) == ENOSPC)
		return err_set(e, -ENOSPC,
			       "cannot %s: the disk holding store '%s' is "
			       "full (%s): free space there", what, ss->path,
			       sqlite3_errmsg(ss->db));
	if ((code & 0xff) == SQLITE_READONLY || ss->read_only)
		return err_set(e, -EROFS,
			       "cannot %s: store '%s' is read-only (%s), so "
			       "only commands that read work (status, show, "
			       "events, diff); this one writes: make its "
			       "folder writable for this user", what, ss->path,
			       sqlite3_errmsg(ss->db));
	return err_set(e, BATON_ESTORE, "cannot %s: %s", what,
		       sqlite3_errmsg(ss->db));
}

int
sqlite__exec(struct sqlite_store *ss, const char *sql, const char *what,
	     struct err *e)
{
	if (sqlite3_exec(ss->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return sqlite__fail(ss, e, what);
	return 0;
}

void
sqlite__rollback(struct sqlite_store *ss)
{
	if (!sqlite3_get_autocommit(ss->db))
		sqlite3_exec(ss->db, "ROLLBACK", NULL, NULL, NULL);
}

int
sqlite__commit(struct sqlite_store *ss, const char *what, struct err *e)
{
	if (ss->base.fault) {
		ss->base.fault = 0;
		return store__fault(e, what);
	}
	return sqlite__exec(ss, "COMMIT", what, e);
}

int
sqlite__prepare(struct sqlite_store *ss, sqlite3_stmt **st, const char *sql,
		int cached, const char *what, struct err *e)
{
	unsigned flags = cached ? SQLITE_PREPARE_PERSISTENT : 0;

	if (*st)
		return 0;
	if (sqlite3_prepare_v3(ss->db, sql, -1, flags, st, NULL) != SQLITE_OK)
		return sqlite__fail(ss, e, what);
	return 0;
}

void
sqlite__done(sqlite3_stmt *st)
{
	if (st) {
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
}

char *
sqlite__column_text(sqlite3_stmt *st, int i)
{
	return xstrdup_or_null((const char *)sqlite3_column_text(st, i));
}

int
sqlite__bind_id(sqlite3_stmt *st, int i, int64_t id)
{
	if (!id)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_int64(st, i, (sqlite3_int64)id);
}

int
sqlite__begin(struct sqlite_store *ss, const char *what, struct err *e)
{
	return sqlite__exec(ss, "BEGIN IMMEDIATE", what, e);
}

/*
 * The fence check, inside the caller's write transaction so that no
 * claim can slip in between the check and the commit. A task that is
 * gone fences as surely as one claimed by somebody else.
 */
static int
check_fence(struct sqlite_store *ss, const char *what, struct err *e)
{
	int64_t have = -1;
	int rc;

	rc = sqlite__prepare(ss, &ss->fence,
			     "SELECT lease_token FROM tasks WHERE id = ?", 1,
			     what, e);
	if (rc < 0)
		return rc;
	if (sqlite3_bind_int64(ss->fence, 1, ss->base.fence_task) != SQLITE_OK)
		rc = sqlite__fail(ss, e, what);
	else
		rc = sqlite__step_int(ss, ss->fence, &have, what, e);
	sqlite__done(ss->fence);
	if (rc < 0)
		return rc;
	return store__fence_verdict(&ss->base, have, what, e);
}

int
sqlite__begin_fenced(struct sqlite_store *ss, const char *what,
		     struct err *e)
{
	int rc = sqlite__begin(ss, what, e);

	if (rc == 0 && ss->base.fence_task)
		rc = check_fence(ss, what, e);
	if (rc < 0)
		sqlite__rollback(ss);
	return rc;
}

/*
 * Binds the mutable fields of r from parameter *i on (the order of
 * RUN_TEXT_MUTABLE, RUN_INT_MUTABLE, cost_usd) and advances *i. The
 * strings are bound SQLITE_STATIC: r must outlive the statement's step.
 * Returns SQLITE_OK or the first failure.
 */
static int
bind_mutable(sqlite3_stmt *st, int *i, const struct run *r)
{
	int rc = SQLITE_OK;

#define BIND_TEXT(f)                                                           \
	if (rc == SQLITE_OK)                                                   \
		rc = sqlite3_bind_text(st, (*i)++, r->f, -1, SQLITE_STATIC);
#define BIND_INT(f)                                                            \
	if (rc == SQLITE_OK)                                                   \
		rc = sqlite3_bind_int64(st, (*i)++, (sqlite3_int64)r->f);
	RUN_TEXT_MUTABLE(BIND_TEXT)
	RUN_INT_MUTABLE(BIND_INT)
#undef BIND_TEXT
#undef BIND_INT
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_double(st, (*i)++, r->cost_usd);
	return rc;
}

/*
 * Fills r (overwritten, not released) from a row of RUN_COLUMNS. The
 * request flags are int in struct run: 0 or 1 in practice.
 */
static void
read_run(sqlite3_stmt *st, struct run *r)
{
	int i = 6;

	memset(r, 0, sizeof(*r));
	r->seq = sqlite3_column_int64(st, 0);
	r->id = sqlite__column_text(st, 1);
	r->task = sqlite__column_text(st, 2);
	r->created_at = sqlite3_column_int64(st, 3);
	r->updated_at = sqlite3_column_int64(st, 4);
	r->version = sqlite3_column_int64(st, 5);
#define READ_TEXT(f) r->f = sqlite__column_text(st, i++);
#define READ_INT(f) r->f = sqlite3_column_int64(st, i++);
	RUN_TEXT_MUTABLE(READ_TEXT)
	RUN_INT_MUTABLE(READ_INT)
	r->cost_usd = sqlite3_column_double(st, i++);
	RUN_REQUESTS(READ_INT)
#undef READ_TEXT
#undef READ_INT
}

/*
 * What a listing shows (store_run_filter.brief), read by read_brief: not
 * the task, the config snapshot or the progress, which are most of a
 * row's bytes.
 */
#define BRIEF_COLUMNS                                                          \
	"seq, id, status, outcome, stage, created_at, review_loops,"           \
	" max_review_loops, cost_usd, pause_requested"

static void
read_brief(sqlite3_stmt *st, struct run *r)
{
	memset(r, 0, sizeof(*r));
	r->seq = sqlite3_column_int64(st, 0);
	r->id = sqlite__column_text(st, 1);
	r->status = sqlite__column_text(st, 2);
	r->outcome = sqlite__column_text(st, 3);
	r->stage = sqlite__column_text(st, 4);
	r->created_at = sqlite3_column_int64(st, 5);
	r->review_loops = sqlite3_column_int64(st, 6);
	r->max_review_loops = sqlite3_column_int64(st, 7);
	r->cost_usd = sqlite3_column_double(st, 8);
	r->pause_requested = sqlite3_column_int64(st, 9);
}

/*
 * Steps a statement that returns at most one run. Returns 1 with *out
 * filled, 0 when there is no row, or BATON_ESTORE.
 */
static int
step_run(struct sqlite_store *ss, sqlite3_stmt *st, struct run *out,
	 const char *what, struct err *e)
{
	int src = sqlite3_step(st);

	if (src == SQLITE_ROW) {
		read_run(st, out);
		return 1;
	}
	if (src == SQLITE_DONE)
		return 0;
	return sqlite__fail(ss, e, what);
}

int
sqlite__step_int(struct sqlite_store *ss, sqlite3_stmt *st, int64_t *out,
		 const char *what, struct err *e)
{
	int src = sqlite3_step(st);

	if (src == SQLITE_ROW) {
		*out = sqlite3_column_int64(st, 0);
		return 0;
	}
	if (src == SQLITE_DONE)
		return 0;
	return sqlite__fail(ss, e, what);
}

int
sqlite__insert_event(struct sqlite_store *ss, const struct event *ev,
		     int64_t *seq_out, const char *what, struct err *e)
{
	sqlite3_stmt *st;
	int rc, src;

	rc = store__event_check(ev, what, e);
	if (rc < 0)
		return rc;
	rc = sqlite__prepare(ss, &ss->event_insert, sql_event_insert, 1, what,
			     e);
	if (rc < 0)
		return rc;
	st = ss->event_insert;
	src = sqlite3_bind_text(st, 1, ev->run_id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 2, ev->ts);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, ev->type, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 4, ev->from, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 5, ev->to, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 6, ev->data, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite__bind_id(st, 7, ev->task_id);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_DONE)
		*seq_out = sqlite3_last_insert_rowid(ss->db);
	else if (sqlite3_extended_errcode(ss->db) ==
		 SQLITE_CONSTRAINT_FOREIGNKEY)
		rc = err_set(e, BATON_ENOTFOUND, "cannot %s: no run '%s'",
			     what, ev->run_id);
	else
		rc = sqlite__fail(ss, e, what);
	sqlite__done(st);
	return rc;
}

/* The highest migration recorded in schema_migrations, into *out. */
static int
sqlite_version(struct sqlite_store *ss, int64_t *out, struct err *e)
{
	const char *what = "read the schema version";
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite__prepare(ss, &st,
			     "SELECT COALESCE(MAX(version), 0)"
			     " FROM schema_migrations",
			     0, what, e);
	if (rc == 0)
		rc = sqlite__step_int(ss, st, out, what, e);
	sqlite3_finalize(st);
	return rc;
}

/*
 * Applies the embedded migrations this database has not seen, in number
 * order, each in its own IMMEDIATE transaction that first checks again
 * whether another process applied it meanwhile. The common case, an
 * up-to-date database, costs one read and takes no write lock.
 */
static int
migrate(struct sqlite_store *ss, struct err *e)
{
	const struct embedded_file *f;
	sqlite3_stmt *st = NULL;
	int64_t cur = 0, latest = 0, have = 0;
	int rc = 0, n, src;

	for (f = embedded_files; f->name; f++) {
		n = store__migration_number(f->name);
		if (n > latest)
			latest = n;
	}
	rc = sqlite__prepare(ss, &st,
			     "SELECT COUNT(*) FROM sqlite_master"
			     " WHERE type = 'table'"
			     " AND name = 'schema_migrations'",
			     0, "read the schema version", e);
	if (rc == 0)
		rc = sqlite__step_int(ss, st, &have,
				      "read the schema version", e);
	sqlite3_finalize(st);
	st = NULL;
	if (rc == 0 && have)
		rc = sqlite_version(ss, &cur, e);
	if (rc < 0)
		goto out;
	if (cur > latest) {
		rc = err_set(e, BATON_ESTORE,
			     "schema version %lld is newer than this baton "
			     "knows (%lld)",
			     (long long)cur, (long long)latest);
		goto out;
	}
	/* Applied in number order, whatever order they were embedded in. */
	for (n = 1; cur < latest && n <= latest; n++) {
		char what[256];

		for (f = embedded_files; f->name; f++)
			if (store__migration_number(f->name) == n)
				break;
		if (!f->name)
			continue;
		snprintf(what, sizeof(what), "apply migration %s", f->name);
		rc = sqlite__exec(ss,
				  "BEGIN IMMEDIATE;"
				  "CREATE TABLE IF NOT EXISTS"
				  " schema_migrations ("
				  " version INTEGER PRIMARY KEY,"
				  " name TEXT NOT NULL,"
				  " applied_at INTEGER NOT NULL)",
				  what, e);
		if (rc < 0)
			goto out;
		rc = sqlite__prepare(ss, &st,
				     "SELECT COUNT(*) FROM schema_migrations"
				     " WHERE version = ?",
				     0, what, e);
		if (rc < 0)
			goto out;
		have = 0;
		if (sqlite3_bind_int(st, 1, n) != SQLITE_OK)
			rc = sqlite__fail(ss, e, what);
		else
			rc = sqlite__step_int(ss, st, &have, what, e);
		sqlite3_finalize(st);
		st = NULL;
		if (rc < 0)
			goto out;
		if (!have) {
			rc = sqlite__exec(ss, f->text, what, e);
			if (rc < 0)
				goto out;
			rc = sqlite__prepare(ss, &st,
					     "INSERT INTO schema_migrations"
					     " (version, name, applied_at)"
					     " VALUES (?, ?, ?)",
					     0, what, e);
			if (rc < 0)
				goto out;
			src = sqlite3_bind_int(st, 1, n);
			if (src == SQLITE_OK)
				src = sqlite3_bind_text(st, 2, f->name, -1,
							SQLITE_STATIC);
			if (src == SQLITE_OK)
				src = sqlite3_bind_int64(st, 3,
							 time_now_ms());
			if (src == SQLITE_OK)
				src = sqlite3_step(st);
			if (src != SQLITE_DONE) {
				rc = sqlite__fail(ss, e, what);
				goto out;
			}
			sqlite3_finalize(st);
			st = NULL;
		}
		rc = sqlite__exec(ss, "COMMIT", what, e);
		if (rc < 0)
			goto out;
	}
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	return rc;
}

static void
sqlite_close(struct store *s)
{
	struct sqlite_store *ss = sqlite__store(s);

	sqlite3_finalize(ss->get_by_id);
	sqlite3_finalize(ss->get_by_seq);
	sqlite3_finalize(ss->update);
	sqlite3_finalize(ss->event_insert);
	sqlite3_finalize(ss->fence);
	sqlite3_finalize(ss->claim);
	sqlite3_close(ss->db);
	if (ss->watch_fd >= 0)
		close(ss->watch_fd);
	free(ss->path);
	free(ss);
}

/*
 * Whether this process cannot write the existing database at path or the
 * folder holding it (a read-only mount, another user's .baton/). SQLite
 * in WAL mode needs both: the -wal and -shm files live beside it.
 */
static int
cannot_write(const char *path)
{
	char *dir = xstrdup(path), *slash = strrchr(dir, '/');
	int no;

	if (slash)
		slash[slash == dir] = '\0';
	no = access(path, F_OK) == 0 &&
	     (access(path, W_OK) < 0 ||
	      access(slash ? dir : ".", W_OK) < 0);
	free(dir);
	return no;
}

/*
 * The URI that opens the database at path for reading only. While a
 * -wal file is there a writer may be at work, so the WAL is read through
 * it (mode=ro: SQLite reads the -wal and -shm files it cannot write).
 * Without one, nobody is writing (a writer would have made it), and
 * immutable=1 reads the file alone, with no -shm to create
 * (https://www.sqlite.org/wal.html#readonly).
 */
static char *
read_only_uri(const char *path)
{
	char *wal = xasprintf("%s-wal", path);
	struct buf uri = BUF_INIT;
	const char *p;

	buf_adds(&uri, "file:");
	for (p = path; *p; p++) {
		if (*p == '%' || *p == '?' || *p == '#')
			buf_addf(&uri, "%%%02X", (unsigned char)*p);
		else
			buf_addch(&uri, *p);
	}
	buf_adds(&uri, fs_exists(wal) ? "?mode=ro" : "?immutable=1");
	free(wal);
	return buf_detach(&uri, NULL);
}

/*
 * Opens the database file at path (created if missing; its directory
 * must exist), sets up the connection and migrates. Every error names
 * the path.
 */
static int
sqlite_open(const char *path, struct store **out, struct err *e)
{
	struct sqlite_store *ss = xcalloc(1, sizeof(*ss));
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	char *uri = NULL;
	int rc = 0, sys;

	ss->watch_fd = -1;
	ss->base.ops = &store_sqlite_ops;
	ss->path = xstrdup(path);
	ss->read_only = cannot_write(path);
	if (ss->read_only) {
		uri = read_only_uri(path);
		flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
	}
	if (sqlite3_open_v2(uri ? uri : path, &ss->db, flags, NULL) !=
	    SQLITE_OK) {
		sys = ss->db ? sqlite3_system_errno(ss->db) : 0;
		if (!ss->db)
			rc = err_set(e, BATON_ESTORE,
				     "cannot open store '%s': out of memory",
				     path);
		else if (sys)
			rc = err_set(e, BATON_ESTORE,
				     "cannot open store '%s': %s (%s)", path,
				     sqlite3_errmsg(ss->db), strerror(sys));
		else
			rc = err_set(e, BATON_ESTORE,
				     "cannot open store '%s': %s", path,
				     sqlite3_errmsg(ss->db));
		goto out;
	}
	sqlite3_extended_result_codes(ss->db, 1);
	sqlite3_busy_timeout(ss->db, STORE_BUSY_TIMEOUT_MS);
	rc = sqlite__exec(ss,
			  ss->read_only ? "PRAGMA foreign_keys = ON" :
			  "PRAGMA journal_mode = WAL;"
			  "PRAGMA synchronous = FULL;"
			  "PRAGMA foreign_keys = ON",
			  "set up the connection", e);
	if (rc == 0)
		rc = migrate(ss, e);
	if (rc < 0) {
		err_prefix(e, "cannot open store '%s'", path);
		goto out;
	}
	*out = &ss->base;
	ss = NULL;
out:
	if (ss)
		sqlite_close(&ss->base);
	free(uri);
	return rc;
}

static int
sqlite_schema_version(struct store *s, struct err *e)
{
	int64_t v = 0;
	int rc = sqlite_version(sqlite__store(s), &v, e);

	return rc < 0 ? rc : (int)v;
}

/*
 * Allocates the next seq (MAX + 1 under the write lock, or r->seq when
 * that is higher: see store.h), derives the id
 * from it, inserts the row and its creation event, and commits. r is
 * changed only on success.
 */
static int
sqlite_run_create(struct store *s, struct run *r, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "create run";
	sqlite3_stmt *st = NULL;
	int64_t seq = 0, now = time_now_ms(), evseq = 0;
	int64_t created = r->created_at ? r->created_at : now;
	char type[] = "transition";
	struct event ev = { 0 };
	char *id = NULL;
	int rc, src, i = 1;

	rc = sqlite__begin_fenced(ss, what, e);
	if (rc < 0)
		goto out;
	rc = sqlite__prepare(ss, &st,
			     "SELECT MAX(COALESCE(MAX(seq), 0) + 1, ?) FROM runs",
			     0, what, e);
	if (rc == 0 && sqlite3_bind_int64(st, 1, r->seq) != SQLITE_OK)
		rc = sqlite__fail(ss, e, what);
	if (rc == 0)
		rc = sqlite__step_int(ss, st, &seq, what, e);
	sqlite3_finalize(st);
	st = NULL;
	if (rc < 0)
		goto out;
	id = run_id_make(seq, r->task);

	rc = sqlite__prepare(ss, &st, sql_run_insert, 0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_int64(st, i++, seq);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, i++, id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, i++, r->task, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, created);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, 1);
	if (src == SQLITE_OK)
		src = bind_mutable(st, &i, r);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int(st, i++, r->pause_requested);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int(st, i++, r->abort_requested);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}

	ev.run_id = id;
	ev.task_id = r->task_id;
	ev.ts = now;
	ev.type = type;
	ev.to = r->status;
	rc = sqlite__insert_event(ss, &ev, &evseq, what, e);
	if (rc < 0)
		goto out;
	rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;

	free(r->id);
	r->id = id;
	id = NULL;
	r->seq = seq;
	r->version = 1;
	r->created_at = created;
	r->updated_at = now;
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	free(id);
	return rc;
}

/*
 * Finds a run by exact id first, then by the seq the reference names
 * (checking that a longer reference is a prefix of the id).
 */
static int
sqlite_run_get(struct store *s, const char *ref, struct run *out,
	       struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	struct run r = { 0 };
	char what[256];
	int64_t seq;
	int rc;

	snprintf(what, sizeof(what), "read run '%s'", ref);
	rc = sqlite__prepare(ss, &ss->get_by_id, sql_run_by_id, 1, what, e);
	if (rc < 0)
		goto out;
	if (sqlite3_bind_text(ss->get_by_id, 1, ref, -1, SQLITE_STATIC)) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}
	rc = step_run(ss, ss->get_by_id, &r, what, e);
	if (rc != 0)
		goto out;

	seq = run_id_seq(ref);
	if (seq > 0) {
		rc = sqlite__prepare(ss, &ss->get_by_seq, sql_run_by_seq, 1,
				     what, e);
		if (rc < 0)
			goto out;
		if (sqlite3_bind_int64(ss->get_by_seq, 1, seq)) {
			rc = sqlite__fail(ss, e, what);
			goto out;
		}
		rc = step_run(ss, ss->get_by_seq, &r, what, e);
		if (rc < 0)
			goto out;
		if (rc == 1 && !store__ref_matches(ref, r.id)) {
			run_release(&r);
			rc = 0;
		}
	}
	if (rc == 0)
		rc = err_set(e, BATON_ENOTFOUND, "no run '%s'", ref);
out:
	sqlite__done(ss->get_by_id);
	sqlite__done(ss->get_by_seq);
	if (rc == 1) {
		*out = r;
		return 0;
	}
	run_release(&r);
	return rc;
}

/*
 * The guarded update: row and event in one IMMEDIATE transaction, or
 * neither. Zero rows changed is a conflict if the run exists and
 * BATON_ENOTFOUND if it does not; STORE_EREFUSED when its version is
 * the one read but its status is not one of froms (store_int.h). The
 * request flags are not written (sql_run_update leaves them out), so a
 * request that landed since r was read survives.
 */
static int
sqlite_run_update(struct store *s, struct run *r, const char *froms,
		  struct event *ev, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	char *ev_run = ev && ev->run_id ? ev->run_id : r->id;
	int64_t now = time_now_ms(), ts = 0, evseq = 0, found = -1;
	struct event row;
	char what[256];
	int rc, src, i = 1;

	snprintf(what, sizeof(what), "update run '%s'", r->id);
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc < 0)
		goto out;
	rc = sqlite__prepare(ss, &ss->update, sql_run_update, 1, what, e);
	if (rc < 0)
		goto out;
	st = ss->update;
	src = sqlite3_bind_int64(st, i++, now);
	if (src == SQLITE_OK)
		src = bind_mutable(st, &i, r);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, i++, r->id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, i++, r->version);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, i++, froms, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}
	sqlite__done(st);
	st = NULL;

	if (sqlite3_changes(ss->db) == 0) {
		rc = sqlite__prepare(ss, &st,
				     "SELECT version FROM runs WHERE id = ?", 0,
				     what, e);
		if (rc == 0 &&
		    sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC))
			rc = sqlite__fail(ss, e, what);
		if (rc == 0)
			rc = sqlite__step_int(ss, st, &found, what, e);
		sqlite3_finalize(st);
		st = NULL;
		if (rc < 0)
			goto out;
		if (found < 0)
			rc = err_set(e, BATON_ENOTFOUND, "no run '%s'", r->id);
		else if (found == r->version)
			rc = err_set(e, STORE_EREFUSED,
				     "run '%s': status refused", r->id);
		else
			rc = err_set(e, BATON_ECONFLICT,
				     "run '%s' changed concurrently (expected "
				     "version %lld)",
				     r->id, (long long)r->version);
		goto out;
	}

	if (ev) {
		row = *ev;
		row.run_id = ev_run;
		row.ts = ts = ev->ts ? ev->ts : now;
		if (!row.task_id)
			row.task_id = r->task_id;
		rc = sqlite__insert_event(ss, &row, &evseq, what, e);
		if (rc < 0)
			goto out;
	}
	rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;

	r->version++;
	r->updated_at = now;
	if (ev) {
		ev->ts = ts;
		ev->seq = evseq;
	}
out:
	if (st == ss->update)
		sqlite__done(st);
	else
		sqlite3_finalize(st);
	sqlite__rollback(ss);
	return rc;
}

/*
 * Sets one request flag and appends ev, in one transaction, leaving the
 * version alone so that the run's driver does not lose its next write
 * to a person's request. The column comes from a fixed table, never from
 * the caller's text.
 */
static int
sqlite_run_request(struct store *s, const char *run_id, const char *flag,
		   int value, struct event *ev, struct err *e)
{
	static const struct {
		const char *flag, *sql;
	} requests[] = {
		{ "pause_requested", "UPDATE runs SET pause_requested = ?,"
				     " updated_at = ? WHERE id = ?" },
		{ "abort_requested", "UPDATE runs SET abort_requested = ?,"
				     " updated_at = ? WHERE id = ?" },
	};
	struct sqlite_store *ss = sqlite__store(s);
	const char *ev_run = ev && ev->run_id ? ev->run_id : run_id;
	const char *sql = NULL;
	sqlite3_stmt *st = NULL;
	int64_t now = time_now_ms(), ts = 0, evseq = 0;
	struct event row;
	char what[256];
	size_t k;
	int rc, src;

	snprintf(what, sizeof(what), "set '%s' of run '%s'", flag, run_id);
	for (k = 0; k < ARRAY_SIZE(requests); k++)
		if (!strcmp(flag, requests[k].flag))
			sql = requests[k].sql;
	if (!sql)
		return err_set(e, BATON_EINVAL, "cannot %s: not a request flag",
			       what);
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc < 0)
		goto out;
	rc = sqlite__prepare(ss, &st, sql, 0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_int(st, 1, value);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 2, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, run_id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}
	if (sqlite3_changes(ss->db) == 0) {
		rc = err_set(e, BATON_ENOTFOUND, "no run '%s'", run_id);
		goto out;
	}
	if (ev) {
		/* row is only read: the cast drops no promise */
		row = *ev;
		row.run_id = (char *)ev_run;
		row.ts = ts = ev->ts ? ev->ts : now;
		rc = sqlite__insert_event(ss, &row, &evseq, what, e);
		if (rc < 0)
			goto out;
	}
	rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;
	if (ev) {
		ev->ts = ts;
		ev->seq = evseq;
	}
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	return rc;
}

/* An event on its own, in a transaction of its own. */
static int
sqlite_event_add(struct store *s, struct event *ev, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	int64_t ts = ev->ts ? ev->ts : time_now_ms(), seq = 0;
	struct event row;
	char what[256];
	int rc;

	if (ev->run_id)
		snprintf(what, sizeof(what), "add event to run '%s'",
			 ev->run_id);
	else
		snprintf(what, sizeof(what), "add event");
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc < 0)
		goto out;
	row = *ev;
	row.ts = ts;
	rc = sqlite__insert_event(ss, &row, &seq, what, e);
	if (rc < 0)
		goto out;
	rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;
	ev->ts = ts;
	ev->seq = seq;
out:
	sqlite__rollback(ss);
	return rc;
}

/*
 * Runs newest first, a page at a time: each page continues below the
 * smallest seq of the previous one, so runs created meanwhile are not
 * seen and none is seen twice.
 */
static int
sqlite_run_list(struct store *s, const struct store_run_filter *f,
		store_run_cb *cb, void *arg, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "list runs";
	struct run *rows = xcalloc(STORE_LIST_PAGE, sizeof(*rows));
	sqlite3_stmt *st = NULL;
	int64_t cursor = INT64_MAX;
	int remaining = f->limit > 0 ? f->limit : -1;
	int rc, src, n = 0, i, page, stop = 0;

#define LIST_SQL(cols, where)                                                  \
	"SELECT " cols " FROM runs WHERE " where "seq < ?1"                    \
	" ORDER BY seq DESC LIMIT ?2"
	static const char *const sql[2][2] = {
		{ LIST_SQL(RUN_COLUMNS, ""),
		  LIST_SQL(RUN_COLUMNS, "status = ?3 AND ") },
		{ LIST_SQL(BRIEF_COLUMNS, ""),
		  LIST_SQL(BRIEF_COLUMNS, "status = ?3 AND ") },
	};
#undef LIST_SQL

	rc = sqlite__prepare(ss, &st, sql[!!f->brief][!!f->status], 0, what,
			     e);
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
		while (src == SQLITE_OK && n < page) {
			src = sqlite3_step(st);
			if (src != SQLITE_ROW)
				break;
			if (f->brief)
				read_brief(st, &rows[n++]);
			else
				read_run(st, &rows[n++]);
			src = SQLITE_OK;
		}
		if (src != SQLITE_OK && src != SQLITE_DONE) {
			rc = sqlite__fail(ss, e, what);
			goto out;
		}
		sqlite3_reset(st);
		for (i = 0; i < n && !stop; i++)
			stop = cb(&rows[i], arg);
		if (n < page)
			break;
		cursor = rows[n - 1].seq;
		if (remaining > 0)
			remaining -= n;
		for (i = 0; i < n; i++)
			run_release(&rows[i]);
		n = 0;
	}
out:
	for (i = 0; i < n; i++)
		run_release(&rows[i]);
	free(rows);
	sqlite3_finalize(st);
	return rc;
}

/*
 * Events in seq order, a page at a time, each page continuing after the
 * last seq handed out.
 */
int
sqlite__list_events(struct sqlite_store *ss, const char *run_id,
		    int64_t task_id, int64_t after_seq, const char *type,
		    store_event_cb *cb, void *arg, struct err *e)
{
	const char *what = "list events";
	struct event *rows = xcalloc(STORE_LIST_PAGE, sizeof(*rows));
	sqlite3_stmt *st = NULL;
	char sql[512];
	int rc, src, n = 0, i, stop = 0;

	snprintf(sql, sizeof(sql),
		 "SELECT seq, run_id, ts, type, from_status, to_status, data,"
		 " task_id FROM events WHERE seq > ?1%s%s%s ORDER BY seq"
		 " LIMIT %d",
		 run_id ? " AND run_id = ?2" : "",
		 type ? " AND type = ?3" : "",
		 task_id ? " AND task_id = ?4" : "", STORE_LIST_PAGE);
	rc = sqlite__prepare(ss, &st, sql, 0, what, e);
	if (rc < 0)
		goto out;
	while (!stop) {
		src = sqlite3_bind_int64(st, 1, after_seq);
		if (src == SQLITE_OK && run_id)
			src = sqlite3_bind_text(st, 2, run_id, -1,
						SQLITE_STATIC);
		if (src == SQLITE_OK && type)
			src = sqlite3_bind_text(st, 3, type, -1,
						SQLITE_STATIC);
		if (src == SQLITE_OK && task_id)
			src = sqlite3_bind_int64(st, 4, task_id);
		while (src == SQLITE_OK && n < STORE_LIST_PAGE) {
			struct event *ev = &rows[n];

			src = sqlite3_step(st);
			if (src != SQLITE_ROW)
				break;
			n++;
			ev->seq = sqlite3_column_int64(st, 0);
			ev->run_id = sqlite__column_text(st, 1);
			ev->ts = sqlite3_column_int64(st, 2);
			ev->type = sqlite__column_text(st, 3);
			ev->from = sqlite__column_text(st, 4);
			ev->to = sqlite__column_text(st, 5);
			ev->data = sqlite__column_text(st, 6);
			ev->task_id = sqlite3_column_int64(st, 7);
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
		after_seq = rows[n - 1].seq;
		for (i = 0; i < n; i++)
			event_release(&rows[i]);
		n = 0;
	}
out:
	for (i = 0; i < n; i++)
		event_release(&rows[i]);
	free(rows);
	sqlite3_finalize(st);
	return rc;
}

static int
sqlite_event_list(struct store *s, const char *run_id, int64_t after_seq,
		  const char *type, store_event_cb *cb, void *arg,
		  struct err *e)
{
	return sqlite__list_events(sqlite__store(s), run_id, 0, after_seq,
				   type, cb, arg, e);
}

/*
 * Adds version MAX + 1 of (run, stage, artifact), reading MAX under the
 * write lock so two writers cannot pick the same number.
 */
static int
sqlite_output_add(struct store *s, struct store_output *o, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	int64_t version = 0, created = o->created_at ? o->created_at
						      : time_now_ms();
	char what[512];
	int rc, src;

	snprintf(what, sizeof(what), "add output '%s/%s' to run '%s'",
		 o->stage, o->artifact, o->run_id);
	rc = sqlite__begin_fenced(ss, what, e);
	if (rc < 0)
		goto out;
	rc = sqlite__prepare(ss, &st,
			     "SELECT COALESCE(MAX(version), 0) + 1"
			     " FROM stage_outputs WHERE run_id = ?"
			     " AND stage = ? AND artifact = ?",
			     0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_text(st, 1, o->run_id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, o->stage, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, o->artifact, -1, SQLITE_STATIC);
	if (src != SQLITE_OK) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}
	rc = sqlite__step_int(ss, st, &version, what, e);
	sqlite3_finalize(st);
	st = NULL;
	if (rc < 0)
		goto out;

	rc = sqlite__prepare(ss, &st,
			     "INSERT INTO stage_outputs (run_id, stage,"
			     " artifact, version, decision, content,"
			     " created_at)"
			     " VALUES (?, ?, ?, ?, ?, ?, ?)",
			     0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_text(st, 1, o->run_id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, o->stage, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, o->artifact, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 4, version);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 5, o->decision, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 6, o->content, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 7, created);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		if (sqlite3_extended_errcode(ss->db) ==
		    SQLITE_CONSTRAINT_FOREIGNKEY)
			rc = err_set(e, BATON_ENOTFOUND,
				     "cannot %s: no run '%s'", what,
				     o->run_id);
		else
			rc = sqlite__fail(ss, e, what);
		goto out;
	}
	rc = sqlite__commit(ss, what, e);
	if (rc < 0)
		goto out;
	o->version = (int)version;
	o->created_at = created;
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	return rc;
}

/* A run's outputs in the order they were written (rowid order). */
static int
sqlite_output_list(struct store *s, const char *run_id, store_output_cb *cb,
		   void *arg, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	struct store_output *rows = xcalloc(STORE_LIST_PAGE, sizeof(*rows));
	int64_t *rowids = xcalloc(STORE_LIST_PAGE, sizeof(*rowids));
	sqlite3_stmt *st = NULL;
	int64_t cursor = 0;
	char what[256];
	int rc, src, n = 0, i, stop = 0;

	snprintf(what, sizeof(what), "list outputs of run '%s'", run_id);
	rc = sqlite__prepare(ss, &st,
			     "SELECT rowid, run_id, stage, artifact, version,"
			     " decision, content, created_at FROM stage_outputs"
			     " WHERE run_id = ?1 AND rowid > ?2 ORDER BY rowid"
			     " LIMIT ?3",
			     0, what, e);
	if (rc < 0)
		goto out;
	while (!stop) {
		src = sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
		if (src == SQLITE_OK)
			src = sqlite3_bind_int64(st, 2, cursor);
		if (src == SQLITE_OK)
			src = sqlite3_bind_int(st, 3, STORE_LIST_PAGE);
		while (src == SQLITE_OK && n < STORE_LIST_PAGE) {
			struct store_output *o = &rows[n];

			src = sqlite3_step(st);
			if (src != SQLITE_ROW)
				break;
			rowids[n++] = sqlite3_column_int64(st, 0);
			o->run_id = sqlite__column_text(st, 1);
			o->stage = sqlite__column_text(st, 2);
			o->artifact = sqlite__column_text(st, 3);
			o->version = sqlite3_column_int(st, 4);
			o->decision = sqlite__column_text(st, 5);
			o->content = sqlite__column_text(st, 6);
			o->created_at = sqlite3_column_int64(st, 7);
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
		cursor = rowids[n - 1];
		for (i = 0; i < n; i++)
			store_output_release(&rows[i]);
		n = 0;
	}
out:
	for (i = 0; i < n; i++)
		store_output_release(&rows[i]);
	free(rows);
	free(rowids);
	sqlite3_finalize(st);
	return rc;
}

/* ---- run files ---------------------------------------------------------- */

static int
sqlite_file_put(struct store *s, struct store_file *f, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	int64_t now = time_now_ms();
	char what[512];
	int rc, src;

	snprintf(what, sizeof(what), "keep file '%.200s' of run '%.200s'",
		 f->name, f->run_id);
	rc = sqlite__begin(ss, what, e);
	if (rc == 0)
		rc = sqlite__prepare(
			ss, &st,
			"INSERT INTO run_files (run_id, name, size, sha256,"
			" truncated, content, host, path, updated_at)"
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
			" ON CONFLICT (run_id, name) DO UPDATE SET"
			" size = excluded.size, sha256 = excluded.sha256,"
			" truncated = excluded.truncated,"
			" content = excluded.content, host = excluded.host,"
			" path = excluded.path, updated_at = excluded.updated_at",
			0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_text(st, 1, f->run_id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, f->name, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 3, f->size);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 4, f->sha256, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int(st, 5, f->truncated ? 1 : 0);
	if (src == SQLITE_OK)
		src = sqlite3_bind_blob64(st, 6, f->content ? f->content : "",
					  f->len, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 7, f->host, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 8, f->path, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 9, now);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		if (sqlite3_extended_errcode(ss->db) ==
		    SQLITE_CONSTRAINT_FOREIGNKEY)
			rc = err_set(e, BATON_ENOTFOUND,
				     "cannot %s: no run '%s'", what,
				     f->run_id);
		else
			rc = sqlite__fail(ss, e, what);
		goto out;
	}
	rc = sqlite__commit(ss, what, e);
	if (rc == 0)
		f->updated_at = now;
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	return rc;
}

#define FILE_COLUMNS                                                           \
	"run_id, name, size, sha256, truncated, length(content), host, path,"  \
	" updated_at"

/* The row st is on into *f (the content too when with_content). */
static void
read_file_row(sqlite3_stmt *st, int with_content, struct store_file *f)
{
	f->run_id = sqlite__column_text(st, 0);
	f->name = sqlite__column_text(st, 1);
	f->size = sqlite3_column_int64(st, 2);
	f->sha256 = sqlite__column_text(st, 3);
	f->truncated = sqlite3_column_int(st, 4) != 0;
	f->len = (size_t)sqlite3_column_int64(st, 5);
	f->host = sqlite__column_text(st, 6);
	f->path = sqlite__column_text(st, 7);
	f->updated_at = sqlite3_column_int64(st, 8);
	if (with_content) {
		const void *blob = sqlite3_column_blob(st, 9);

		f->len = (size_t)sqlite3_column_bytes(st, 9);
		f->content = xmalloc(f->len + 1);
		if (f->len)
			memcpy(f->content, blob, f->len);
		f->content[f->len] = '\0';
	}
}

static int
sqlite_file_get(struct store *s, const char *run_id, const char *name,
		struct store_file *out, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	struct store_file f = { 0 };
	char what[512];
	int rc, src;

	snprintf(what, sizeof(what), "read file '%.200s' of run '%.200s'",
		 name, run_id);
	rc = sqlite__prepare(ss, &st,
			     "SELECT " FILE_COLUMNS ", content FROM run_files"
			     " WHERE run_id = ? AND name = ?",
			     0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		read_file_row(st, 1, &f);
		*out = f;
	} else if (src == SQLITE_DONE) {
		rc = err_set(e, BATON_ENOTFOUND, "run '%s' has no file '%s'",
			     run_id, name);
	} else {
		rc = sqlite__fail(ss, e, what);
	}
out:
	sqlite3_finalize(st);
	return rc;
}

/* A run's files by name; all are read before the first callback. */
static int
sqlite_file_list(struct store *s, const char *run_id, store_file_cb *cb,
		 void *arg, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	struct store_file *rows = NULL;
	sqlite3_stmt *st = NULL;
	char what[256];
	int rc, src, n = 0, alloc = 0, i, stop = 0;

	snprintf(what, sizeof(what), "list files of run '%.200s'", run_id);
	rc = sqlite__prepare(ss, &st,
			     "SELECT " FILE_COLUMNS " FROM run_files"
			     " WHERE run_id = ? ORDER BY name",
			     0, what, e);
	if (rc < 0)
		goto out;
	src = sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
	while (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
		ALLOC_GROW(rows, n + 1, alloc);
		memset(&rows[n], 0, sizeof(rows[n]));
		read_file_row(st, 0, &rows[n++]);
		src = SQLITE_OK;
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
		store_file_release(&rows[i]);
	free(rows);
	sqlite3_finalize(st);
	return rc;
}

static int
sqlite_vacuum(struct store *s, struct err *e)
{
	return sqlite__exec(sqlite__store(s), "VACUUM", "vacuum the store", e);
}

const struct store_ops store_sqlite_ops = {
	.version = STORE_OPS_VERSION,
	.name = "sqlite",
	.open = sqlite_open,
	.close = sqlite_close,
	.run_create = sqlite_run_create,
	.run_get = sqlite_run_get,
	.run_update = sqlite_run_update,
	.run_request = sqlite_run_request,
	.event_add = sqlite_event_add,
	.run_list = sqlite_run_list,
	.event_list = sqlite_event_list,
	.output_add = sqlite_output_add,
	.output_list = sqlite_output_list,
	.schema_version = sqlite_schema_version,
	.task_add = sqlite__task_add,
	.task_get = sqlite__task_get,
	.task_update = sqlite__task_update,
	.task_list = sqlite__task_list,
	.task_counts = sqlite__task_counts,
	.task_claim = sqlite__task_claim,
	.task_claim_batch = sqlite__task_claim_batch,
	.task_settle_batch = sqlite__task_settle_batch,
	.task_renew = sqlite__task_renew,
	.task_next_due = sqlite__task_next_due,
	.forge_delivery_seen = sqlite__forge_delivery_seen,
	.token_add = sqlite__token_add,
	.token_find = sqlite__token_find,
	.token_list = sqlite__token_list,
	.token_revoke = sqlite__token_revoke,
	.token_used = sqlite__token_used,
	.idem_claim = sqlite__idem_claim,
	.idem_bind = sqlite__idem_bind,
	.chat_create = sqlite__chat_create,
	.chat_get = sqlite__chat_get,
	.chat_add = sqlite__chat_add,
	.chat_update = sqlite__chat_update,
	.chat_list = sqlite__chat_list,
	.memory_put = sqlite__memory_put,
	.memory_forget = sqlite__memory_forget,
	.memory_list = sqlite__memory_list,
	.forge_intake = sqlite__forge_intake,
	.forge_link_get = sqlite__forge_link_get,
	.forge_link_put = sqlite__forge_link_put,
	.forge_links = sqlite__forge_links,
	.forge_cursor_get = sqlite__forge_cursor_get,
	.forge_cursor_set = sqlite__forge_cursor_set,
	.forge_stats_add = sqlite__forge_stats_add,
	.forge_stats_get = sqlite__forge_stats_get,
	.task_events = sqlite__task_events,
	.worker_beat = sqlite__worker_beat,
	.worker_stop = sqlite__worker_stop,
	.worker_list = sqlite__worker_list,
	.merge_add = sqlite__merge_add,
	.merge_get = sqlite__merge_get,
	.merge_update = sqlite__merge_update,
	.merge_list = sqlite__merge_list,
	.merge_claim = sqlite__merge_claim,
	.plan_add = sqlite__plan_add,
	.event_last_seq = sqlite__event_last_seq,
	.run_stats = sqlite__run_stats,
	.watch_fd = sqlite__watch_fd,
	.watch_drain = sqlite__watch_drain,
	.file_put = sqlite_file_put,
	.file_get = sqlite_file_get,
	.file_list = sqlite_file_list,
	.vacuum = sqlite_vacuum,
};
