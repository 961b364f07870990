/*
 * Idempotency keys on SQLite (store.h, store_idem_claim; schema in
 * sql/010-idempotency.sql). The primary key on idem_key decides: of two
 * claims of one key, by any processes on the store, the second INSERT
 * OR IGNORE inserts nothing and reads the first one's row instead.
 */
#include "util/compat.h"

#include <sqlite3.h>

#include "store/sqlite_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/timeutil.h"

/* The claimed row of key into *task_id and sha_out; 0 when it has none. */
static int
read_claim(struct sqlite_store *ss, const char *key, int64_t *task_id,
	   char sha_out[65], const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "SELECT payload_sha256, task_id"
			     " FROM idempotency_keys WHERE idem_key = ?",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		const unsigned char *sha = sqlite3_column_text(st, 0);

		snprintf(sha_out, 65, "%s", sha ? (const char *)sha : "");
		*task_id = sqlite3_column_int64(st, 1);
		rc = 1;
	} else if (src == SQLITE_DONE) {
		rc = 0;
	} else {
		rc = sqlite__fail(ss, e, what);
	}
	sqlite3_finalize(st);
	return rc;
}

/* Inserts key's claim: 1, 0 when it was claimed before, or < 0. */
static int
insert_claim(struct sqlite_store *ss, const char *key, const char *sha,
	     const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "INSERT OR IGNORE INTO idempotency_keys"
			     " (idem_key, payload_sha256, task_id, created_at)"
			     " VALUES (?, ?, NULL, ?)",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, sha, -1, SQLITE_STATIC);
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

int
sqlite__idem_claim(struct store *s, const char *key, const char *sha,
		   int64_t *task_id, char sha_out[65], struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	char what[160];
	int tries, rc;

	snprintf(what, sizeof(what), "claim idempotency key '%.100s'", key);
	/* a claim given up between our INSERT and SELECT: claim again */
	for (tries = 0; tries < 3; tries++) {
		rc = insert_claim(ss, key, sha, what, e);
		if (rc)
			return rc;
		rc = read_claim(ss, key, task_id, sha_out, what, e);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	return err_set(e, BATON_ESTORE, "cannot %s: it keeps being given up",
		       what);
}

int
sqlite__idem_take(struct sqlite_store *ss, struct store_key *k,
		  const char *what, struct err *e)
{
	int rc = insert_claim(ss, k->key, k->sha, what, e);

	if (rc)
		return rc;
	/* the write lock is ours: the row that stopped ours stays */
	rc = read_claim(ss, k->key, &k->task_id, k->sha_was, what, e);
	if (rc == 0)
		return err_set(e, BATON_ESTORE,
			       "cannot %s: idempotency key '%.100s' is neither "
			       "free nor claimed",
			       what, k->key);
	return rc < 0 ? rc : 0;
}

int
sqlite__idem_set(struct sqlite_store *ss, const char *key, int64_t task_id,
		 const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     task_id ? "UPDATE idempotency_keys SET task_id = ?"
				       " WHERE idem_key = ?"
				     : "DELETE FROM idempotency_keys"
				       " WHERE idem_key = ? AND task_id IS NULL",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = task_id ? sqlite3_bind_int64(st, 1, task_id) : SQLITE_OK;
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, task_id ? 2 : 1, key, -1,
					SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	rc = src == SQLITE_DONE ? 0 : sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__idem_bind(struct store *s, const char *key, int64_t task_id,
		  struct err *e)
{
	char what[160];

	snprintf(what, sizeof(what), "bind idempotency key '%.100s'", key);
	return sqlite__idem_set(sqlite__store(s), key, task_id, what, e);
}
