/*
 * The forge's tables on PostgreSQL (store.h from store_forge_delivery_seen
 * on; schema in sql/pg/005-forge.sql), with the contracts and the
 * messages of sqlite_forge.c.
 *
 * Intake is exactly once per (repo, issue) however many syncs run. On
 * SQLite one writer at a time makes the look-up of the issue's link and
 * the insert of task and link safe together; PostgreSQL lets racing
 * intakes all in at once, each READ COMMITTED, so the look-up alone
 * proves nothing. The unique key on (repo, issue_number) decides: the
 * link's INSERT ... ON CONFLICT (repo, issue_number) DO NOTHING of the
 * second intake waits for the first to commit, then inserts nothing,
 * and that intake rolls back, task included, and reads the winner's
 * task in a new statement (a new snapshot, which sees that commit):
 *
 *	sync A: BEGIN ─ no link ─ task 7 ─ link #12 → 7 ──── COMMIT
 *	sync B: BEGIN ─ no link ─ task 8 ─ link #12 (waits) ─ nothing ─
 *	        ROLLBACK (no task 8) ─ link #12 → 7: t->id = 7
 *
 * A lost task id (8) is all the race costs. Each operation is a try and
 * a retry loop around it (pg_int.h).
 */
#include "util/compat.h"

#include <libpq-fe.h>

#include "core/run.h"
#include "store/pg_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* The columns of forge_links in the order read_link() reads them. */
#define LINK_COLUMNS                                                           \
	"task_id, created_at, updated_at, version"                             \
	FORGE_LINK_STRINGS(SQL_COMMA_NAME) FORGE_LINK_NUMBERS(SQL_COMMA_NAME)  \
	FORGE_LINK_INTS(SQL_COMMA_NAME)

#define FIELD_NAME(f) #f,
static const char *const link_fields[] = { FORGE_LINK_STRINGS(FIELD_NAME)
		FORGE_LINK_NUMBERS(FIELD_NAME) FORGE_LINK_INTS(FIELD_NAME) };
static const char *const stats_fields[] = { FORGE_STATS(FIELD_NAME) };
#undef FIELD_NAME

/* Pushes the fields put writes, in the order of link_fields. */
static void
bind_link(struct params *p, const struct forge_link *l)
{
#define PARAM_TEXT(f)	param_text(p, l->f);
#define PARAM_NUMBER(f) param_id(p, l->f);
#define PARAM_INT(f)	param_int(p, l->f);
	FORGE_LINK_STRINGS(PARAM_TEXT)
	FORGE_LINK_NUMBERS(PARAM_NUMBER)
	FORGE_LINK_INTS(PARAM_INT)
#undef PARAM_TEXT
#undef PARAM_NUMBER
#undef PARAM_INT
}

/* Fills l (overwritten, not released) from row of a LINK_COLUMNS result. */
static void
read_link(const PGresult *res, int row, struct forge_link *l)
{
	int i = 4;

	memset(l, 0, sizeof(*l));
	l->task_id = pg__int64(res, row, 0);
	l->created_at = pg__int64(res, row, 1);
	l->updated_at = pg__int64(res, row, 2);
	l->version = pg__int64(res, row, 3);
#define READ_TEXT(f) l->f = pg__text(res, row, i++);
#define READ_INT(f)  l->f = pg__int64(res, row, i++);
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
linked_task(struct pg_store *ps, const char *repo, int pr, int64_t n,
	    int64_t not, int64_t *out, const char *what, struct err *e)
{
	struct params p = { 0 };

	param_text(&p, repo);
	param_int(&p, n);
	param_int(&p, not);
	return pg__query_int(ps,
			 pr ? "SELECT task_id FROM forge_links WHERE"
			      " repo = $1 AND pr_number = $2 AND task_id <> $3"
			    : "SELECT task_id FROM forge_links WHERE"
			      " repo = $1 AND issue_number = $2"
			      " AND task_id <> $3",
			 &p, out, what, e);
}

/* The stored version of task_id's link into *out; left alone if none. */
static int
link_version(struct pg_store *ps, int64_t task_id, int64_t *out,
	     const char *what, struct err *e)
{
	struct params p = { 0 };

	param_int(&p, task_id);
	return pg__query_int(ps,
			 "SELECT version FROM forge_links WHERE task_id = $1",
			 &p, out, what, e);
}

/*
 * The INSERT of l as the link of task_id (version 1, created and
 * updated now), ending in ON CONFLICT conflict (a column list) DO
 * NOTHING: *inserted is 0 when that target was hit. A foreign key that
 * fails is BATON_ENOTFOUND, another unique key BATON_EEXIST.
 */
static int
insert_link(struct pg_store *ps, const struct forge_link *l, int64_t task_id,
	    int64_t now, const char *conflict, int *inserted,
	    const char *what, struct err *e)
{
	struct buf sql = BUF_INIT;
	struct params p = { 0 };
	PGresult *res;
	size_t k;

	buf_adds(&sql, "INSERT INTO forge_links (" LINK_COLUMNS
		       ") VALUES ($1, $2, $3, $4");
	for (k = 0; k < ARRAY_SIZE(link_fields); k++)
		buf_addf(&sql, ", $%zu", k + 5);
	buf_addf(&sql, ") ON CONFLICT %s DO NOTHING RETURNING task_id",
		 conflict);
	param_int(&p, task_id);
	param_int(&p, now);
	param_int(&p, now);
	param_int(&p, 1);
	bind_link(&p, l);
	res = pg__exec(ps, sql.ptr, p.n, p.v, what, e);
	buf_release(&sql);
	if (!res && !strcmp(ps->state, "23503"))
		return err_set(e, BATON_ENOTFOUND, "cannot %s: no task %lld",
			       what, (long long)task_id);
	if (!res && !strcmp(ps->state, "23505"))
		return store__forge_link_taken(l, 0, 0, what, e);
	if (!res)
		return BATON_ESTORE;
	*inserted = PQntuples(res);
	PQclear(res);
	return 0;
}

/* ---- deliveries --------------------------------------------------------- */

/* ON CONFLICT DO NOTHING on the primary key: a redelivery acts once. */
int
pg__forge_delivery_seen(struct store *s, const char *delivery_id,
			const char *event, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[160];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "record webhook delivery '%.100s'",
		 delivery_id);
	do {
		struct params p = { 0 };
		PGresult *res;

		param_text(&p, delivery_id);
		param_text(&p, event);
		param_int(&p, time_now_ms());
		res = pg__exec(ps,
			       "INSERT INTO forge_deliveries"
			       " (delivery_id, event, received_at)"
			       " VALUES ($1, $2, $3)"
			       " ON CONFLICT (delivery_id) DO NOTHING"
			       " RETURNING 1",
			       p.n, p.v, what, e);
		rc = res ? PQntuples(res) == 1 : BATON_ESTORE;
		PQclear(res);
	} while (pg__again(ps, rc, &tries, e));
	return rc;
}

/* ---- links -------------------------------------------------------------- */

/* What one try of intake wrote, for the caller's structs. */
struct intake_out {
	int64_t id, ts, seq;
	int64_t had; /* the issue's task already, when not 0 */
};

/*
 * One try of intake (see the top of the file): 1 with *o's id, ts and
 * seq when it made the task; 0 with o->had when the issue had one.
 */
static int
intake_try(struct pg_store *ps, const struct task *t,
	   const struct task *row, const struct forge_link *l, int64_t created,
	   int64_t now, const struct event *ev, struct intake_out *o,
	   const char *what, struct err *e)
{
	int64_t other = 0;
	int rc, inserted = 0;

	memset(o, 0, sizeof(*o));
	rc = pg__begin_fenced(ps, what, e);
	if (rc == 0)
		rc = linked_task(ps, l->repo, 0, l->issue_number, 0, &o->had,
				 what, e);
	if (rc < 0 || o->had)
		goto out;
	if (l->pr_number)
		rc = linked_task(ps, l->repo, 1, l->pr_number, 0, &other, what,
				 e);
	if (rc == 0 && other)
		rc = store__forge_link_taken(l, other, 1, what, e);
	if (rc == 0)
		rc = pg__task_insert(ps, t, row, created, now, ev, &o->id,
				     &o->ts, &o->seq, what, e);
	if (rc == 0)
		rc = insert_link(ps, l, o->id, now, "(repo, issue_number)",
				 &inserted, what, e);
	if (rc < 0)
		goto out;
	if (!inserted) {
		/* lost the race: undo our task, take the winner's */
		pg__rollback(ps);
		rc = linked_task(ps, l->repo, 0, l->issue_number, 0, &o->had,
				 what, e);
		if (rc == 0 && !o->had)
			rc = err_set(e, BATON_ESTORE,
				     "cannot %s: the link that won the race "
				     "is gone",
				     what);
		goto out;
	}
	rc = pg__commit(ps, what, e);
	if (rc == 0)
		rc = 1;
out:
	pg__rollback(ps);
	return rc;
}

/* t, l and ev change only on success; on 0 only t->id does. */
int
pg__forge_intake(struct store *s, struct task *t, struct forge_link *l,
		 struct event *ev, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct store_task_defaults d;
	struct task row = store__task_with_defaults(t, &d);
	struct intake_out o;
	int64_t now = time_now_ms();
	int64_t created = t->created_at ? t->created_at : now;
	char what[256];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "take issue #%lld of %.200s in",
		 (long long)l->issue_number, l->repo);
	if (!row.max_attempts)
		row.max_attempts = TASK_DEFAULT_MAX_ATTEMPTS;
	do
		rc = intake_try(ps, t, &row, l, created, now, ev, &o, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc == 0) {
		t->id = o.had;
	} else if (rc == 1) {
		store__task_added(t, &row, o.id, created, now, ev, o.ts,
				  o.seq);
		l->task_id = o.id;
		l->created_at = now;
		l->updated_at = now;
		l->version = 1;
	}
	return rc;
}

/* Reads the link of task_id into *out: 1, 0 when none, or an error. */
static int
read_link_by_task(struct pg_store *ps, int64_t task_id,
		  struct forge_link *out, const char *what, struct err *e)
{
	struct params p = { 0 };
	PGresult *res;
	int rc = 0;

	param_int(&p, task_id);
	res = pg__exec(ps,
		       "SELECT " LINK_COLUMNS
		       " FROM forge_links WHERE task_id = $1",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) > 0) {
		read_link(res, 0, out);
		rc = 1;
	}
	PQclear(res);
	return rc;
}

int
pg__forge_link_get(struct store *s, int64_t task_id,
		   struct forge_link *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[80];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "read the forge link of task %lld",
		 (long long)task_id);
	do
		rc = read_link_by_task(ps, task_id, out, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc == 0)
		return err_set(e, BATON_ENOTFOUND,
			       "task %lld has no forge link",
			       (long long)task_id);
	return rc < 0 ? rc : 0;
}

/* The versioned UPDATE of l; 0 rows changed is a lost race or no link. */
static int
update_link(struct pg_store *ps, const struct forge_link *l, int64_t now,
	    const char *what, struct err *e)
{
	struct buf sql = BUF_INIT;
	struct params p = { 0 };
	PGresult *res;
	int64_t found = -1;
	size_t k;
	int rc = 0, changed;

	buf_adds(&sql, "UPDATE forge_links SET version = version + 1,"
		       " updated_at = $1");
	for (k = 0; k < ARRAY_SIZE(link_fields); k++)
		buf_addf(&sql, ", %s = $%zu", link_fields[k], k + 2);
	buf_addf(&sql, " WHERE task_id = $%zu AND version = $%zu",
		 ARRAY_SIZE(link_fields) + 2, ARRAY_SIZE(link_fields) + 3);
	param_int(&p, now);
	bind_link(&p, l);
	param_int(&p, l->task_id);
	param_int(&p, l->version);
	res = pg__exec(ps, sql.ptr, p.n, p.v, what, e);
	buf_release(&sql);
	if (!res)
		return !strcmp(ps->state, "23505")
			       ? store__forge_link_taken(l, 0, 0, what, e)
			       : BATON_ESTORE;
	changed = (int)strtol(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	if (changed == 1)
		return 0;
	rc = link_version(ps, l->task_id, &found, what, e);
	if (rc == 0 && found < 0)
		rc = err_set(e, BATON_ENOTFOUND,
			     "cannot %s: task %lld has no forge link", what,
			     (long long)l->task_id);
	else if (rc == 0)
		rc = store__forge_link_stale(l, what, e);
	return rc;
}

/*
 * One try of link_put. The numbers are looked up first for a message
 * that names the task holding them; a holder that commits after that
 * look-up is caught by the unique keys (BATON_EEXIST without a name).
 * A new link (version 0) whose task got one meanwhile meets ON CONFLICT
 * (task_id): stale.
 */
static int
link_put_try(struct pg_store *ps, const struct forge_link *l, int64_t now,
	     const char *what, struct err *e)
{
	int64_t other = 0;
	int rc, inserted = 0;

	rc = pg__begin_fenced(ps, what, e);
	if (rc == 0 && l->issue_number)
		rc = linked_task(ps, l->repo, 0, l->issue_number, l->task_id,
				 &other, what, e);
	if (rc == 0 && other)
		rc = store__forge_link_taken(l, other, 0, what, e);
	if (rc == 0 && l->pr_number)
		rc = linked_task(ps, l->repo, 1, l->pr_number, l->task_id,
				 &other, what, e);
	if (rc == 0 && other)
		rc = store__forge_link_taken(l, other, 1, what, e);
	if (rc < 0)
		goto out;
	if (l->version == 0) {
		rc = insert_link(ps, l, l->task_id, now, "(task_id)",
				 &inserted, what, e);
		if (rc == 0 && !inserted)
			rc = store__forge_link_stale(l, what, e);
	} else {
		rc = update_link(ps, l, now, what, e);
	}
	if (rc == 0)
		rc = pg__commit(ps, what, e);
out:
	pg__rollback(ps);
	return rc;
}

int
pg__forge_link_put(struct store *s, struct forge_link *l, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t now = time_now_ms();
	char what[80];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "write the forge link of task %lld",
		 (long long)l->task_id);
	do
		rc = link_put_try(ps, l, now, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc < 0)
		return rc;
	if (l->version == 0)
		l->created_at = now;
	l->version++;
	l->updated_at = now;
	return 0;
}

/* One page of links past task id after into rows; *n gets how many. */
static int
links_page_try(struct pg_store *ps, const char *repo, int64_t after,
	       struct forge_link *rows, int *n, const char *what,
	       struct err *e)
{
	struct params p = { 0 };
	PGresult *res;
	int i;

	param_text(&p, repo);
	param_int(&p, after);
	param_int(&p, PG_LIST_PAGE);
	res = pg__exec(ps,
		       "SELECT " LINK_COLUMNS " FROM forge_links"
		       " WHERE repo = $1 AND task_id > $2"
		       " ORDER BY task_id LIMIT $3",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	*n = PQntuples(res);
	for (i = 0; i < *n; i++)
		read_link(res, i, &rows[i]);
	PQclear(res);
	return 0;
}

/* The links of repo by task id, a page at a time (callbacks may write). */
int
pg__forge_links(struct store *s, const char *repo, store_forge_link_cb *cb,
		void *arg, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *what = "list forge links";
	struct forge_link *rows = xcalloc(PG_LIST_PAGE, sizeof(*rows));
	int64_t after = 0;
	int rc = 0, n, i, stop = 0;

	while (!stop) {
		int tries = 0;

		n = 0;
		do
			rc = links_page_try(ps, repo, after, rows, &n, what,
					    e);
		while (pg__again(ps, rc, &tries, e));
		if (rc < 0)
			break;
		for (i = 0; i < n && !stop; i++)
			stop = cb(&rows[i], arg);
		if (n > 0)
			after = rows[n - 1].task_id;
		for (i = 0; i < n; i++)
			forge_link_release(&rows[i]);
		if (n < PG_LIST_PAGE)
			break;
	}
	free(rows);
	return rc;
}

/* ---- cursors and counters ----------------------------------------------- */

static int
cursor_get_try(struct pg_store *ps, const char *url, char **etag,
	       char **cursor, const char *what, struct err *e)
{
	struct params p = { 0 };
	PGresult *res;

	param_text(&p, url);
	res = pg__exec(ps,
		       "SELECT etag, cursor FROM forge_cursors WHERE url = $1",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) > 0) {
		*etag = pg__text(res, 0, 0);
		*cursor = pg__text(res, 0, 1);
	}
	PQclear(res);
	return 0;
}

int
pg__forge_cursor_get(struct store *s, const char *url, char **etag,
		     char **cursor, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[320];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "read the cursor of '%.280s'", url);
	do
		rc = cursor_get_try(ps, url, etag, cursor, what, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}

/* One upsert: the URL's row is created or replaced whole. */
int
pg__forge_cursor_set(struct store *s, const char *url, const char *etag,
		     const char *cursor, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[320];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "write the cursor of '%.280s'", url);
	do {
		struct params p = { 0 };

		param_text(&p, url);
		param_text(&p, etag);
		param_text(&p, cursor);
		param_int(&p, time_now_ms());
		rc = pg__run(ps,
			     "INSERT INTO forge_cursors"
			     " (url, etag, cursor, updated_at)"
			     " VALUES ($1, $2, $3, $4)"
			     " ON CONFLICT (url) DO UPDATE"
			     " SET etag = excluded.etag,"
			     " cursor = excluded.cursor,"
			     " updated_at = excluded.updated_at",
			     p.n, p.v, what, e);
	} while (pg__again(ps, rc, &tries, e));
	return rc;
}

/*
 * One upsert that adds: concurrent adds from many processes all count
 * (the second waits on the row's lock, then adds to the committed sum).
 */
int
pg__forge_stats_add(struct store *s, const struct forge_stats *d,
		    struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *what = "count forge calls";
	struct buf sql = BUF_INIT;
	size_t k;
	int rc, tries = 0;

	buf_adds(&sql, "INSERT INTO forge_stats (id");
	for (k = 0; k < ARRAY_SIZE(stats_fields); k++)
		buf_addf(&sql, ", %s", stats_fields[k]);
	buf_adds(&sql, ") VALUES (1");
	for (k = 0; k < ARRAY_SIZE(stats_fields); k++)
		buf_addf(&sql, ", $%zu", k + 1);
	buf_adds(&sql, ") ON CONFLICT (id) DO UPDATE SET id = 1");
	for (k = 0; k < ARRAY_SIZE(stats_fields); k++)
		buf_addf(&sql, ", %s = forge_stats.%s + excluded.%s",
			 stats_fields[k], stats_fields[k], stats_fields[k]);
	do {
		struct params p = { 0 };

#define PARAM_STAT(f) param_int(&p, d->f);
		FORGE_STATS(PARAM_STAT)
#undef PARAM_STAT
		rc = pg__run(ps, sql.ptr, p.n, p.v, what, e);
	} while (pg__again(ps, rc, &tries, e));
	buf_release(&sql);
	return rc;
}

static int
stats_get_try(struct pg_store *ps, struct forge_stats *out, const char *what,
	      struct err *e)
{
	struct buf sql = BUF_INIT;
	PGresult *res;
	size_t k;
	int i = 0;

	buf_adds(&sql, "SELECT 0");
	for (k = 0; k < ARRAY_SIZE(stats_fields); k++)
		buf_addf(&sql, ", %s", stats_fields[k]);
	buf_adds(&sql, " FROM forge_stats WHERE id = 1");
	res = pg__exec(ps, sql.ptr, 0, NULL, what, e);
	buf_release(&sql);
	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) > 0) {
#define READ_STAT(f) out->f = pg__int64(res, 0, ++i);
		FORGE_STATS(READ_STAT)
#undef READ_STAT
	}
	PQclear(res);
	return 0;
}

int
pg__forge_stats_get(struct store *s, struct forge_stats *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int rc, tries = 0;

	do
		rc = stats_get_try(ps, out, "read the forge counters", e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}
