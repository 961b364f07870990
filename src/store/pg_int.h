/*
 * What the files of the PostgreSQL backend share: postgres.c (the
 * connection and its recovery, the migrations, runs, events, outputs,
 * plans, the stats and the LISTEN connection) and postgres_queue.c
 * (tasks, claims, leases, workers, the merge queue). Nothing outside
 * src/store/postgres*.c includes this.
 *
 * Every write follows one pattern, as on SQLite, with one addition: a
 * try that lost the connection before it committed is run again, whole,
 * on a fresh connection (pg__again). So an operation is a function that
 * does one try, and a loop around it:
 *
 *	static int
 *	task_update_try(struct pg_store *ps, ..., struct err *e)
 *	{
 *		rc = pg__begin_fenced(ps, what, e);  BEGIN, xid, fence
 *		... statements, each failure "goto out" ...
 *		rc = pg__commit(ps, what, e);	      or the injected fault
 *		... only now touch the caller's structs ...
 *	out:
 *		pg__rollback(ps);		      no-op after a commit
 *		return rc;
 *	}
 *
 *	int
 *	pg__task_update(struct store *s, ...)
 *	{
 *		struct pg_store *ps = pg__store(s);
 *		int rc, tries = 0;
 *
 *		do
 *			rc = task_update_try(ps, ..., e);
 *		while (pg__again(ps, rc, &tries, e));
 *		return rc;
 *	}
 *
 * A try must leave the caller's structs untouched until its commit
 * succeeded, so that running it again starts from the same input. Reads
 * follow the same loop (without begin/commit).
 *
 * Parameters are sent as text with PQexecParams ($1, $2 ...); NULL
 * pointers are SQL NULL. Ids that may be 0 ("none") go through
 * pg__id_param so that 0 is NULL, as on SQLite.
 */
#ifndef BATON_STORE_PG_INT_H
#define BATON_STORE_PG_INT_H

#include <assert.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "store/store_int.h"

struct err;
struct json_t;
struct event;
struct store_key;

/* Rows read per page of a list before its callbacks run. */
#define PG_LIST_PAGE 256
/* Reconnecting after a lost connection: first wait, cap, and the total. */
#define PG_RETRY_FIRST_MS 50
#define PG_RETRY_MAX_MS	  2000
#define PG_RETRY_TOTAL_MS 60000

/*
 * NOTIFY channels. A write does not NOTIFY inside its own transaction:
 * PostgreSQL holds one cluster-wide lock from a notifying transaction's
 * pre-commit until its commit record is flushed, so notifying commits
 * go one at a time and never share an fsync. pg__commit sends the
 * NOTIFYs after the COMMIT instead, in the same message, as a statement
 * of their own: a transaction that writes nothing else flushes nothing,
 * so the lock is held for microseconds and the writes group-commit.
 * What the listeners get is then always visible to them.
 */
#define PG_CHANNEL_EVENTS "baton_events" /* an event was appended */
#define PG_CHANNEL_WORK	  "baton_work"	 /* claimable work was made */

/*
 * baton's own SQLSTATEs, raised by baton_check (pg/016-one-message.sql)
 * to abort a transaction whose COMMIT is in the same message: a stale
 * fence (detail: the task's lease token, -1 when it is gone), and a
 * guarded update that found no row to change.
 */
#define PG_STATE_FENCED	  "BT002"
#define PG_STATE_LOST_ROW "BT003"

/* The same X-macro helpers as sqlite_int.h, for $n placeholders. */
#define SQL_COMMA_NAME(f) ", " #f

/*
 * How many distinct statements a session prepares (pg__prepared); the
 * rest run unnamed. baton's store has about fifty texts with parameters,
 * and the half dozen without that every message sends (BEGIN, COMMIT).
 */
#define PG_STMTS_MAX 96

struct pg_store {
	struct store base; /* first: store.c sees only this */
	PGconn *conn;
	char *url;	   /* as given, for reconnecting */
	char *safe_url;	   /* without a password, for messages */
	int in_tx;	   /* a transaction is open on conn */
	int pid;	   /* conn's server process (pg__connect) */
	/* the database's clock against this host's as conn's connect
	   read it, and when (time_mono_ms; 0: taken) */
	int64_t hello_offset, hello_at;
	char xid[32];	   /* the open write transaction's xid, as text */
	int lost;	   /* the last failure was a lost connection */
	int unsure;	   /* ... after a COMMIT was sent, before its xid
			      came back (pg__exec_commit) */
	char state[6];	   /* SQLSTATE of the last failure, "" if none */
	/* the LISTEN connection behind store_watch_fd */
	PGconn *listen;
	int watch_fd;	   /* stable: a dup2 of listen's socket, or a
			      pipe that never becomes readable while down */
	int watch_dead[2]; /* that pipe */
	int64_t listen_retry_at; /* next reconnect try while down */
	/* what the open transaction sends once committed (pg__commit) */
	int notify_events;	 /* it appended an event */
	int notify_work;	 /* units of claimable work it made */
	int adds;		 /* tasks added through this handle since the
				    last ANALYZE of tasks (postgres_queue.c) */
	/* the statements prepared on conn (pg__prepared): "s<i>" runs
	   stmt_sql[i] */
	char *stmt_sql[PG_STMTS_MAX];
	uint64_t stmt_hash[PG_STMTS_MAX];
	int nstmts;
};

struct pg_store *pg__store(struct store *s);

/*
 * Connects to ps->url as every baton session does (UTC, application
 * name "baton" unless the URL names one, a connect timeout). Returns the
 * connection, with *pid (NULL: not asked) the server process of its
 * session as the server tells it (a pooler such as PgBouncer hands the
 * client a number of its own) and *offset (NULL: not asked) the
 * database's clock minus this host's, read in the same round trip
 * (pg_clock_offset's way), or NULL with e filled ("cannot open store
 * 'URL': ...", the URL without its password).
 */
PGconn *pg__connect(const struct pg_store *ps, int *pid, int64_t *offset,
		    struct err *e);

/*
 * Fills e with "cannot WHAT: " and the server's message (the first line
 * of PQerrorMessage or the result's), and returns BATON_ESTORE. Sets
 * ps->lost when the connection is gone (PQstatus not OK, or a SQLSTATE
 * of class 08 or 57P0x: the server shut down or was restarted). Keeps
 * the SQLSTATE in ps->state, so that a caller can tell a foreign key
 * (23503) or a unique key (23505) from other failures. A fence the
 * server found stale (PG_STATE_FENCED) is BATON_EFENCED, with the
 * message of SQLite's.
 */
int pg__fail(struct pg_store *ps, const PGresult *res, const char *what,
	     struct err *e);

/*
 * Runs sql with n text parameters (NULL is SQL NULL). Returns the result
 * (PGRES_COMMAND_OK or PGRES_TUPLES_OK) for the caller to PQclear, or
 * NULL with e filled by pg__fail.
 */
/*
 * The name of the statement prepared on ps->conn for sql with n
 * parameters, preparing it the first time (one round trip): "s<i>".
 * Each text is planned once per session, not once per run (PostgreSQL
 * keeps the plan, or re-plans it when the tables change). NULL when
 * the session holds its most already, or the prepare failed: then the
 * caller runs the text unnamed, which reports any error in it.
 */
const char *pg__prepared(struct pg_store *ps, const char *sql, int n,
			 char name[static 16]);

/* Forgets the prepared statements (their connection is gone). */
void pg__forget_prepared(struct pg_store *ps);

PGresult *pg__exec(struct pg_store *ps, const char *sql, int n,
		   const char *const *params, const char *what,
		   struct err *e);

/* pg__exec for a statement whose rows nobody reads; 0 or BATON_ESTORE. */
int pg__run(struct pg_store *ps, const char *sql, int n,
	    const char *const *params, const char *what, struct err *e);

/*
 * Opens a write transaction: BEGIN (READ COMMITTED), then takes the
 * transaction's xid at once (pg_current_xact_id(), kept in ps->xid) so
 * that an event appended later is ordered correctly against readers
 * (see baton_event_add in pg/001-init.sql) and a lost COMMIT can be
 * resolved (pg__commit). Under a fence, locks the fencing task's row
 * (SELECT ... FOR NO KEY UPDATE) and checks its lease_token: a stale one
 * is BATON_EFENCED with the transaction rolled back. The row stays
 * locked until the commit, so a takeover waits for this write instead of
 * slipping in between the check and the commit.
 */
int pg__begin_fenced(struct pg_store *ps, const char *what, struct err *e);
/* The same without the fence. */
int pg__begin(struct pg_store *ps, const char *what, struct err *e);

/* A statement and its text parameters (NULL: SQL NULL). */
struct pg_stmt {
	const char *sql;
	int n;
	const char *const *params;
};

/* The most statements pg__begin_exec sends after its BEGIN. */
#define PG_EXEC_MAX 4

/*
 * pg__begin_fenced and pg__exec of each of the n statements in one
 * round trip: one message in libpq's pipeline mode, each statement by
 * the extended protocol (prepared once a session, the BEGIN and the
 * COMMIT too), its parameters as text. 0 with statement i's result in
 * out[i] (the caller's to PQclear), or an error (all NULL, the
 * transaction rolled back): BATON_EFENCED as pg__begin_fenced's, BATON_ESTORE when a
 * statement failed (ps->state says why; those after it did not run). A
 * stale fence aborts before the first statement runs; each statement
 * runs whatever the ones before it changed.
 */
int pg__begin_exec(struct pg_store *ps, const struct pg_stmt *stmts, int n,
		   PGresult **out, const char *what, struct err *e);

/*
 * The NOTIFYs sent after a COMMIT, in its message (see PG_CHANNEL_EVENTS
 * above): statements with at most two numbers as parameters, held here.
 */
#define PG_NOTIFY_MAX 2
#define PG_NOTIFY_EVENTS_SQL "NOTIFY " PG_CHANNEL_EVENTS
#define PG_NOTIFY_WORK_SQL                                                     \
	"SELECT pg_notify('" PG_CHANNEL_WORK "', $1::text)" /* n units */
struct pg_notify {
	struct pg_stmt stmts[PG_NOTIFY_MAX];
	const char *params[PG_NOTIFY_MAX][2];
	char num[PG_NOTIFY_MAX][2][24];
	int n;
};

/* Adds sql to nf, with a and b as its $1 and $2 (nparams of them). */
void pg__notify_add(struct pg_notify *nf, const char *sql, int nparams,
		    int64_t a, int64_t b);

/*
 * pg__begin_exec with the COMMIT in the same message, and after it the
 * NOTIFYs of after (NULL: none): one round trip. So every check must be
 * made on the server: a statement that raises (baton_check) aborts the
 * transaction, the server skips the rest of the message, and the error
 * is as pg__begin_exec's, with the transaction rolled back. 0 when
 * committed, with out as pg__begin_exec's. Under fault injection the
 * message ends in ROLLBACK instead and the result is store__fault's.
 *
 * A connection lost once the message is sent leaves the outcome unknown
 * to the client. When every result before the COMMIT's came back, the
 * xid among them, it is resolved as pg__commit resolves it. Else
 * ps->unsure is set, with ps->lost: the caller's next try runs against
 * a transaction that may have committed, and must tell its own write
 * from another's (a guarded update that finds its row changed looks at
 * whether the row is the one it wrote).
 */
int pg__exec_commit(struct pg_store *ps, const struct pg_stmt *stmts, int n,
		    const struct pg_notify *after, PGresult **out,
		    const char *what, struct err *e);

/*
 * pg__exec_commit without the fence, for the writes that are not fenced
 * (a lease renewal, guarded by its own token; a worker's record): one
 * round trip, where pg__begin and pg__commit take three.
 */
int pg__exec_commit_unfenced(struct pg_store *ps, const struct pg_stmt *stmts,
			     int n, PGresult **out, const char *what,
			     struct err *e);

/*
 * pg__exec_commit without the fence or the xid, for a statement that
 * draws an xid only when it writes (a claim: one that finds nothing
 * must not take one). A connection lost once the message was sent
 * always leaves ps->unsure set: there is no xid to ask about, so the
 * caller finds out what became of its write (claim_landed_alone in
 * postgres_queue.c). after as pg__exec_commit's.
 */
int pg__exec_commit_xidless(struct pg_store *ps, const struct pg_stmt *stmts,
			    int n, const struct pg_notify *after,
			    PGresult **out, const char *what, struct err *e);

/*
 * After a lost connection: waits until server process pid (the lost
 * session's: PQbackendPID before the loss) runs no statement, so that
 * what it was running has committed or rolled back. 0, or BATON_ESTORE
 * when it still runs after PG_RETRY_TOTAL_MS (or the question fails).
 */
int pg__wait_idle(struct pg_store *ps, int pid, const char *what,
		  struct err *e);

/*
 * BEGIN (READ COMMITTED) and stmt in one round trip, as pg__begin_exec
 * sends its statements, for a claim: no xid is taken, so one that finds
 * nothing writes nothing and consumes no xid. stmt or the caller fills
 * ps->xid (a RETURNING pg_current_xact_id()) as soon as it writes, and
 * before it appends an event or commits. Returns stmt's result for the
 * caller to PQclear, or NULL with e filled and the transaction rolled
 * back.
 */
PGresult *pg__begin_query(struct pg_store *ps, const struct pg_stmt *stmt,
			  const char *what, struct err *e);

/* Rolls back the open transaction, if any. */
void pg__rollback(struct pg_store *ps);

/*
 * Commits, unless fault injection picked this transaction (then fails
 * with store__fault; the caller's rollback undoes it). When the
 * connection is lost during COMMIT the outcome is unknown to the client:
 * pg__commit reconnects and asks the server (pg_xact_status of ps->xid).
 * Committed is success; aborted sets ps->lost so the try runs again.
 */
int pg__commit(struct pg_store *ps, const char *what, struct err *e);

/*
 * After a try returned rc: when rc is BATON_ESTORE with ps->lost set and
 * the time spent retrying (from *tries) is under PG_RETRY_TOTAL_MS,
 * waits (doubling from PG_RETRY_FIRST_MS to PG_RETRY_MAX_MS), reconnects
 * and returns 1 with e reset: run the try again. Otherwise returns 0
 * and rc stands. Logs one warning when a connection is lost and one
 * when it is back.
 */
int pg__again(struct pg_store *ps, int rc, int *tries, struct err *e);

/* Text of a parameter: an int64 into buf (at least 24 bytes). */
const char *pg__int(char *buf, int64_t v);
/* The same, but 0 is NULL (an id that may be "none"). */
const char *pg__id_param(char *buf, int64_t v);

/* Enough for the widest statement: a task's UPDATE with its event. */
#define PARAMS_MAX 48

/* The text parameters of one statement, with room for the numbers. */
struct params {
	int n;
	const char *v[PARAMS_MAX];
	char num[PARAMS_MAX][24];
};

/*
 * Runs a statement that returns at most one integer into *out; *out is
 * left alone when there is no row or the value is NULL.
 */
int pg__query_int(struct pg_store *ps, const char *sql,
		  const struct params *p, int64_t *out, const char *what,
		  struct err *e);

/* Borrows s (NULL is SQL NULL) until the statement ran. */
static inline void
param_text(struct params *p, const char *s)
{
	assert(p->n < PARAMS_MAX);
	p->v[p->n++] = s;
}

static inline void
param_int(struct params *p, int64_t v)
{
	assert(p->n < PARAMS_MAX);
	p->v[p->n] = pg__int(p->num[p->n], v);
	p->n++;
}

/* An id that may be 0: NULL then, so no foreign key looks for row 0. */
static inline void
param_id(struct params *p, int64_t v)
{
	assert(p->n < PARAMS_MAX);
	p->v[p->n] = pg__id_param(p->num[p->n], v);
	p->n++;
}

/* Field (row, col) as a new string, NULL for SQL NULL. */
char *pg__text(const PGresult *res, int row, int col);
/* Field (row, col) as an integer; 0 for SQL NULL. */
int64_t pg__int64(const PGresult *res, int row, int col);

/*
 * Appends ev inside the caller's transaction exactly as given (its ts
 * must be set) through baton_event_add (the ordering rule of
 * pg/001-init.sql), and returns its seq in *seq_out. An event of a run
 * without a task_id takes the run's. A run_id that names no run is
 * BATON_ENOTFOUND. The commit then NOTIFYs on PG_CHANNEL_EVENTS.
 */
int pg__insert_event(struct pg_store *ps, const struct event *ev,
		     int64_t *seq_out, const char *what, struct err *e);

/*
 * Events with seq > after_seq in seq order, a page at a time, of one
 * run (run_id not NULL), of one task (task_id not 0) and of one type
 * (type not NULL), or of all; never past an event that a transaction
 * still running could precede (the "safe horizon" of pg/001-init.sql).
 */
int pg__list_events(struct pg_store *ps, const char *run_id, int64_t task_id,
		    int64_t after_seq, const char *type, store_event_cb *cb,
		    void *arg, struct err *e);

/*
 * Says that the open transaction made n units of claimable work (a task
 * added or put back, a dependency done, an area freed, a merge item
 * queued): pg__commit then sends one NOTIFY on PG_CHANNEL_WORK with n as
 * its payload, so that a supervisor wakes n idle workers, not all.
 * Nothing is sent when the transaction rolls back.
 */
void pg__notify_work(struct pg_store *ps, int n);

/* postgres_watch.c: the stats, and the LISTEN connection of watch_fd. */
int pg__run_stats(struct store *s, store_run_stat_cb *cb, void *arg,
		  struct err *e);
int pg__watch_fd(struct store *s, struct err *e);
unsigned pg__watch_drain(struct store *s);
/* Closes what pg__watch_fd opened; for close. */
void pg__watch_close(struct pg_store *ps);

/*
 * postgres_queue.c: the insert of a new task (row: t with its defaults
 * put in, see store__task_with_defaults) with its dependencies and ev,
 * inside the caller's open write transaction, and a NOTIFY of new work;
 * *id_out, *ts_out and *seq_out get what was written (*ts_out and
 * *seq_out only with ev). A parent or dependency that does not exist is
 * BATON_ENOTFOUND. For store_task_add and the forge's intake, which adds
 * a link in the same transaction.
 */
int pg__task_insert(struct pg_store *ps, const struct task *t,
		    const struct task *row, int64_t created, int64_t now,
		    const struct event *ev, int64_t *id_out, int64_t *ts_out,
		    int64_t *seq_out, const char *what, struct err *e);

/*
 * postgres_idem.c, one statement each, in the caller's transaction or
 * in one of their own: pg__idem_take claims k->key for k->sha, 1; 0
 * when it was claimed before, with k->task_id and k->sha_was what the
 * claim holds (a claim not yet committed is waited for); 2 when that
 * claim was given up before it could be read; or < 0. pg__idem_set
 * binds key to task_id (0: gives an unbound claim up).
 */
int pg__idem_take(struct pg_store *ps, struct store_key *k, const char *what,
		  struct err *e);
int pg__idem_set(struct pg_store *ps, const char *key, int64_t task_id,
		 const char *what, struct err *e);

/*
 * The operations of postgres_queue.c, with the contracts of the store_*
 * functions of the same names (store.h); postgres.c puts them in
 * store_postgres_ops.
 */
int pg__task_add(struct store *s, struct task *t, struct event *ev,
		 struct store_key *k, struct err *e);
int pg__task_get(struct store *s, int64_t id, struct task *out,
		 struct err *e);
int pg__task_update(struct store *s, struct task *t, const char *froms,
		    struct event *ev, struct err *e);
int pg__task_list(struct store *s, const struct store_task_filter *f,
		  store_task_cb *cb, void *arg, struct err *e);
int pg__task_counts(struct store *s, const char *const *statuses,
		    int64_t *counts, size_t n, struct err *e);
int pg__task_claim(struct store *s, const char *holder, int64_t lease_ms,
		   struct task *out, struct err *e);
int pg__task_settle_claim(struct store *s, struct task *t, const char *froms,
			  struct event *ev, const char *holder,
			  int64_t lease_ms, struct task *next, struct err *e);
int pg__task_claim_batch(struct store *s, const char *holder,
			 int64_t lease_ms, size_t max, struct task *out,
			 size_t *n, struct err *e);
int pg__task_settle_batch(struct store *s, struct store_settle *v,
			  const struct buf *froms, size_t n, struct err *e);
int pg__task_settle_claim_batch(struct store *s, struct store_settle *v,
				const struct buf *froms, size_t n,
				const char *holder, int64_t lease_ms,
				size_t max, struct task *out, size_t *got,
				struct err *e);
int pg__task_renew(struct store *s, int64_t id, int64_t token,
		   int64_t lease_ms, struct err *e);
int pg__task_next_due(struct store *s, int64_t *out, struct err *e);
int pg__task_events(struct store *s, int64_t task_id, int64_t after_seq,
		    store_event_cb *cb, void *arg, struct err *e);
int pg__worker_beat(struct store *s, const struct worker_rec *w,
		    struct err *e);
int pg__worker_stop(struct store *s, const char *id, struct err *e);
int pg__worker_list(struct store *s, store_worker_cb *cb, void *arg,
		    struct err *e);
int pg__merge_add(struct store *s, struct merge_item *m, struct event *ev,
		  struct err *e);
int pg__merge_get(struct store *s, int64_t id, const char *run_id,
		  struct merge_item *out, struct err *e);
int pg__merge_update(struct store *s, struct merge_item *m, const char *froms,
		     struct event *ev, struct err *e);
int pg__merge_list(struct store *s, const char *status, store_merge_cb *cb,
		   void *arg, struct err *e);
int pg__merge_claim(struct store *s, const char *holder, int64_t claim_ms,
		    struct merge_item *out, struct err *e);

/* postgres_forge.c: the forge's tables (sql/pg/005-forge.sql) */
int pg__forge_delivery_seen(struct store *s, const char *delivery_id,
			    const char *event, struct err *e);
/* postgres_chat.c: store_chat_* */
int pg__chat_create(struct store *s, const char *phase, int64_t *id_out,
			struct err *e);
int pg__chat_get(struct store *s, int64_t id, struct chat_conv *out,
		     struct err *e);
int pg__chat_add(struct store *s, int64_t id, const char *role,
		     const char *kind, const char *content, int64_t *msg_id,
		     struct err *e);
int pg__chat_update(struct store *s, int64_t id, const char *from,
			const struct chat_conv *set, struct err *e);
int pg__chat_list(struct store *s, const char *phase, int64_t **ids,
		      size_t *nr, struct err *e);
int pg__token_add(struct store *s, const char *name, const char *role,
		  const char *sha, struct err *e);
int pg__token_find(struct store *s, const char *sha, struct api_token *out,
		   struct err *e);
int pg__token_list(struct store *s, store_token_cb *cb, void *arg,
		   struct err *e);
int pg__token_revoke(struct store *s, const char *name, struct err *e);
int pg__token_used(struct store *s, const char *name, int64_t now,
		   struct err *e);
int pg__idem_claim(struct store *s, const char *key, const char *sha,
		   int64_t *task_id, char sha_out[65], struct err *e);
int pg__memory_put(struct store *s, const char *id, const char *run_id,
		   const char *kind, const char *body, struct err *e);
int pg__memory_forget(struct store *s, const char *id, struct err *e);
int pg__memory_list(struct store *s, struct json_t **out, struct err *e);
int pg__idem_bind(struct store *s, const char *key, int64_t task_id,
		  struct err *e);
int pg__forge_intake(struct store *s, struct task *t, struct forge_link *l,
		     struct event *ev, struct err *e);
int pg__forge_link_get(struct store *s, int64_t task_id,
		       struct forge_link *out, struct err *e);
int pg__forge_link_put(struct store *s, struct forge_link *l, struct err *e);
int pg__forge_links(struct store *s, const char *repo,
		    store_forge_link_cb *cb, void *arg, struct err *e);
int pg__forge_cursor_get(struct store *s, const char *url, char **etag,
			 char **cursor, struct err *e);
int pg__forge_cursor_set(struct store *s, const char *url, const char *etag,
			 const char *cursor, struct err *e);
int pg__forge_stats_add(struct store *s, const struct forge_stats *d,
			struct err *e);
int pg__forge_stats_get(struct store *s, struct forge_stats *out,
			struct err *e);

#endif
