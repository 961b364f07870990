/*
 * What the files of the SQLite backend share: sqlite.c (the connection,
 * the migrations, runs, events and outputs) and sqlite_queue.c (tasks,
 * leases, workers, the merge queue and plans). Nothing outside
 * src/store/sqlite*.c includes this.
 *
 * Every write follows one pattern, and these helpers are its steps:
 *
 *	rc = sqlite__begin_fenced(ss, what, e);	  BEGIN IMMEDIATE + fence
 *	... statements, each failure "goto out" ...
 *	rc = sqlite__commit(ss, what, e);	  or the injected fault
 *	... only now touch the caller's structs ...
 *   out:
 *	sqlite__rollback(ss);			  no-op after a commit
 */
#ifndef BATON_STORE_SQLITE_INT_H
#define BATON_STORE_SQLITE_INT_H

#include <sqlite3.h>
#include <stdint.h>

#include "store/store_int.h"

struct err;
struct json_t;
struct event;
struct merge_item;
struct store_key;
struct task;
struct worker_rec;

/* How long a write waits for another process's write lock. */
#define STORE_BUSY_TIMEOUT_MS 10000
/* Rows read per step of a list before its callbacks run. */
#define STORE_LIST_PAGE 64

/*
 * For the X-macro lists of columns (RUN_TEXT_MUTABLE, TASK_STRINGS ...):
 * each turns a field name into its piece of a column list, a VALUES list
 * or a SET list, so that the SQL is generated from the same list as the
 * code that binds and reads it.
 */
#define SQL_COMMA_NAME(f)  ", " #f
#define SQL_COMMA_QMARK(f) ", ?"
#define SQL_SET_QMARK(f)   ", " #f " = ?"

struct sqlite_store {
	struct store base; /* first: store.c sees only this */
	sqlite3 *db;
	char *path;
	int read_only; /* opened for reading: the file or folder is not ours
			  to write */
	/* Statements on the hot paths, prepared on first use. */
	sqlite3_stmt *get_by_id, *get_by_seq, *update, *event_insert;
	sqlite3_stmt *fence, *claim;
	int watch_fd; /* inotify on the database's folder; -1: none yet */
};

struct sqlite_store *sqlite__store(struct store *s);

/*
 * Fills e with what failed ("cannot WHAT") and the database's reason,
 * and returns BATON_ESTORE. Call it before anything else touches the
 * connection (a ROLLBACK replaces the message).
 */
int sqlite__fail(struct sqlite_store *ss, struct err *e, const char *what);

/* Runs sql (no rows expected); BATON_ESTORE naming what on failure. */
int sqlite__exec(struct sqlite_store *ss, const char *sql, const char *what,
		 struct err *e);

/*
 * Opens a write transaction (BEGIN IMMEDIATE: the write lock is taken
 * now, so nothing read inside can change before the commit) and, when
 * the handle is fenced (store_fence), checks that the fencing task's
 * lease_token is still the fence's token. A stale token is
 * BATON_EFENCED with the transaction rolled back: the holder of a lease
 * that was taken over must not write anything.
 */
int sqlite__begin_fenced(struct sqlite_store *ss, const char *what,
			 struct err *e);

/* BEGIN IMMEDIATE without the fence: claims, heartbeats. */
int sqlite__begin(struct sqlite_store *ss, const char *what, struct err *e);

/* Ends a write transaction that failed, if one is still open. */
void sqlite__rollback(struct sqlite_store *ss);

/*
 * Commits the current write transaction, unless fault injection picked
 * this one: then the transaction's work is done but it fails here, and
 * the caller's rollback undoes all of it.
 */
int sqlite__commit(struct sqlite_store *ss, const char *what, struct err *e);

/*
 * Makes *st a ready statement for sql: a cached one is prepared once and
 * kept for the life of the connection (the caller resets it after use
 * with sqlite__done()); an uncached one is finalized by the caller.
 */
int sqlite__prepare(struct sqlite_store *ss, sqlite3_stmt **st,
		    const char *sql, int cached, const char *what,
		    struct err *e);

/* Readies a cached statement for its next use; NULL is fine. */
void sqlite__done(sqlite3_stmt *st);

/* Column i as a new string, NULL for SQL NULL. */
char *sqlite__column_text(sqlite3_stmt *st, int i);

/*
 * Binds an id that may be 0 ("none"): 0 is bound as NULL, so that a
 * foreign key is not asked to find row 0.
 */
int sqlite__bind_id(sqlite3_stmt *st, int i, int64_t id);

/*
 * Steps a statement that returns one integer (a MAX, a COUNT) into *out.
 * A statement that returns no row leaves *out alone.
 */
int sqlite__step_int(struct sqlite_store *ss, sqlite3_stmt *st, int64_t *out,
		     const char *what, struct err *e);

/*
 * Inserts ev inside the caller's transaction, exactly as given (its ts
 * must be set), and returns its seq in *seq_out. An event of a run
 * without a task_id takes the run's task_id, so that every event of a
 * task's run is found by task. A run_id that names no run is
 * BATON_ENOTFOUND.
 */
int sqlite__insert_event(struct sqlite_store *ss, const struct event *ev,
			 int64_t *seq_out, const char *what, struct err *e);

/*
 * Events with seq > after_seq in seq order, a page at a time, of one
 * run (run_id not NULL), of one task (task_id not 0) and of one type
 * (type not NULL), or of all.
 */
int sqlite__list_events(struct sqlite_store *ss, const char *run_id,
			int64_t task_id, int64_t after_seq, const char *type,
			store_event_cb *cb, void *arg, struct err *e);

/*
 * sqlite_queue.c: the insert of a new task (row: t with its defaults
 * put in, see store__task_with_defaults) with its dependencies and ev,
 * inside the caller's open write transaction; *id_out, *ts_out and
 * *seq_out get what was written (*ts_out and *seq_out only with ev).
 * A parent or dependency that does not exist is BATON_ENOTFOUND. For
 * store_task_add and the forge's intake, which adds a link in the same
 * transaction.
 */
int sqlite__task_insert(struct sqlite_store *ss, const struct task *t,
			const struct task *row, int64_t created, int64_t now,
			const struct event *ev, int64_t *id_out,
			int64_t *ts_out, int64_t *seq_out, const char *what,
			struct err *e);

/*
 * sqlite_idem.c, inside the caller's open write transaction: claims
 * k->key for k->sha, 1; or 0 when it was claimed before, with k->task_id
 * and k->sha_was what the claim holds; or an error. sqlite__idem_set
 * binds key to task_id (0: gives an unbound claim up).
 */
int sqlite__idem_take(struct sqlite_store *ss, struct store_key *k,
		      const char *what, struct err *e);
int sqlite__idem_set(struct sqlite_store *ss, const char *key, int64_t task_id,
		     const char *what, struct err *e);

/*
 * The operations of sqlite_queue.c, with the contracts of the store_*
 * functions of the same names (store.h); sqlite.c puts them in
 * store_sqlite_ops.
 */
int sqlite__task_add(struct store *s, struct task *t, struct event *ev,
		     struct store_key *k, struct err *e);
int sqlite__task_get(struct store *s, int64_t id, struct task *out,
		     struct err *e);
int sqlite__task_update(struct store *s, struct task *t, const char *froms,
			struct event *ev, struct err *e);
int sqlite__task_list(struct store *s, const struct store_task_filter *f,
		      store_task_cb *cb, void *arg, struct err *e);
int sqlite__task_counts(struct store *s, const char *const *statuses,
			int64_t *counts, size_t n, struct err *e);
int sqlite__task_claim(struct store *s, const char *holder, int64_t lease_ms,
		       struct task *out, struct err *e);
int sqlite__task_claim_batch(struct store *s, const char *holder,
			     int64_t lease_ms, size_t max, struct task *out,
			     size_t *n, struct err *e);
int sqlite__task_settle_batch(struct store *s, struct store_settle *v,
			      const struct buf *froms, size_t n,
			      struct err *e);
int sqlite__task_renew(struct store *s, int64_t id, int64_t token,
		       int64_t lease_ms, struct err *e);
int sqlite__task_next_due(struct store *s, int64_t *out, struct err *e);
int sqlite__task_events(struct store *s, int64_t task_id, int64_t after_seq,
			store_event_cb *cb, void *arg, struct err *e);
int sqlite__worker_beat(struct store *s, const struct worker_rec *w,
			struct err *e);
int sqlite__worker_stop(struct store *s, const char *id, struct err *e);
int sqlite__worker_list(struct store *s, store_worker_cb *cb, void *arg,
			struct err *e);
int sqlite__merge_add(struct store *s, struct merge_item *m, struct event *ev,
		      struct err *e);
int sqlite__merge_get(struct store *s, int64_t id, const char *run_id,
		      struct merge_item *out, struct err *e);
int sqlite__merge_update(struct store *s, struct merge_item *m,
			 const char *froms, struct event *ev, struct err *e);
int sqlite__merge_list(struct store *s, const char *status,
		       store_merge_cb *cb, void *arg, struct err *e);
int sqlite__merge_claim(struct store *s, const char *holder,
			int64_t claim_ms, struct merge_item *out,
			struct err *e);
int sqlite__plan_add(struct store *s, const char *source, const char *content,
		     int64_t *id, int *version, struct err *e);

/* sqlite_forge.c: the forge's tables (sql/005-forge.sql) */
int sqlite__forge_delivery_seen(struct store *s, const char *delivery_id,
				const char *event, struct err *e);
/* sqlite_chat.c: store_chat_* */
int sqlite__chat_create(struct store *s, const char *phase, int64_t *id_out,
			struct err *e);
int sqlite__chat_get(struct store *s, int64_t id, struct chat_conv *out,
		     struct err *e);
int sqlite__chat_add(struct store *s, int64_t id, const char *role,
		     const char *kind, const char *content, int64_t *msg_id,
		     struct err *e);
int sqlite__chat_update(struct store *s, int64_t id, const char *from,
			const struct chat_conv *set, struct err *e);
int sqlite__chat_list(struct store *s, const char *phase, int64_t **ids,
		      size_t *nr, struct err *e);
int sqlite__token_add(struct store *s, const char *name, const char *role,
		  const char *sha, struct err *e);
int sqlite__token_find(struct store *s, const char *sha, struct api_token *out,
		   struct err *e);
int sqlite__token_list(struct store *s, store_token_cb *cb, void *arg,
		   struct err *e);
int sqlite__token_revoke(struct store *s, const char *name, struct err *e);
int sqlite__token_used(struct store *s, const char *name, int64_t now,
		   struct err *e);
int sqlite__idem_claim(struct store *s, const char *key, const char *sha,
		       int64_t *task_id, char sha_out[65], struct err *e);
int sqlite__memory_put(struct store *s, const char *id, const char *run_id,
		       const char *kind, const char *body, struct err *e);
int sqlite__memory_forget(struct store *s, const char *id, struct err *e);
int sqlite__memory_list(struct store *s, struct json_t **out, struct err *e);
int sqlite__idem_bind(struct store *s, const char *key, int64_t task_id,
		      struct err *e);
int sqlite__forge_intake(struct store *s, struct task *t,
			 struct forge_link *l, struct event *ev,
			 struct err *e);
int sqlite__forge_link_get(struct store *s, int64_t task_id,
			   struct forge_link *out, struct err *e);
int sqlite__forge_link_put(struct store *s, struct forge_link *l,
			   struct err *e);
int sqlite__forge_links(struct store *s, const char *repo,
			store_forge_link_cb *cb, void *arg, struct err *e);
int sqlite__forge_cursor_get(struct store *s, const char *url, char **etag,
			     char **cursor, struct err *e);
int sqlite__forge_cursor_set(struct store *s, const char *url,
			     const char *etag, const char *cursor,
			     struct err *e);
int sqlite__forge_stats_add(struct store *s, const struct forge_stats *d,
			    struct err *e);
int sqlite__forge_stats_get(struct store *s, struct forge_stats *out,
			    struct err *e);

/* sqlite_watch.c */
int sqlite__event_last_seq(struct store *s, int64_t *out, struct err *e);
int sqlite__run_stats(struct store *s, store_run_stat_cb *cb, void *arg,
		      struct err *e);
int sqlite__watch_fd(struct store *s, struct err *e);
unsigned sqlite__watch_drain(struct store *s);

#endif
