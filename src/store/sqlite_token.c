/*
 * Named API tokens on SQLite (store.h, store_token_add; schema in
 * sql/013-api-tokens.sql). Each operation is one statement: the primary
 * key on name and the unique hash decide between two adds.
 */
#include "util/compat.h"

#include <sqlite3.h>

#include "store/sqlite_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/timeutil.h"

#define TOKEN_COLS "name, role, created_at, last_used_at, revoked_at"

static void
read_token(sqlite3_stmt *st, struct api_token *t)
{
	t->name = sqlite__column_text(st, 0);
	t->role = sqlite__column_text(st, 1);
	t->created_at = sqlite3_column_int64(st, 2);
	t->last_used_at = sqlite3_column_int64(st, 3);
	t->revoked_at = sqlite3_column_int64(st, 4);
}

int
sqlite__token_add(struct store *s, const char *name, const char *role,
		  const char *sha, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	char what[160];
	int rc, src;

	snprintf(what, sizeof(what), "add API token '%.100s'", name);
	rc = sqlite__prepare(ss, &st,
			     "INSERT INTO api_tokens (name, role,"
			     " secret_sha256, created_at) VALUES (?, ?, ?, ?)",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, role, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, sha, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 4, time_now_ms());
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_DONE)
		rc = 0;
	else if (sqlite3_extended_errcode(ss->db) ==
		     SQLITE_CONSTRAINT_PRIMARYKEY ||
		 sqlite3_extended_errcode(ss->db) == SQLITE_CONSTRAINT_UNIQUE)
		rc = err_set(e, BATON_EEXIST,
			     "cannot %s: a token of that name exists (names "
			     "stay taken after a revoke)",
			     what);
	else
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__token_find(struct store *s, const char *sha, struct api_token *out,
		   struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "look up an API token";
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "SELECT " TOKEN_COLS " FROM api_tokens"
			     " WHERE secret_sha256 = ?",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, sha, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		read_token(st, out);
		rc = 1;
	} else if (src == SQLITE_DONE) {
		rc = 0;
	} else {
		rc = sqlite__fail(ss, e, what);
	}
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__token_list(struct store *s, store_token_cb *cb, void *arg,
		   struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "list the API tokens";
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "SELECT " TOKEN_COLS " FROM api_tokens"
			     " ORDER BY name",
			     0, what, e);
	if (rc < 0)
		return rc;
	rc = 0;
	while (!rc && (src = sqlite3_step(st)) == SQLITE_ROW) {
		struct api_token t = { 0 };

		read_token(st, &t);
		rc = cb(&t, arg);
		api_token_release(&t);
	}
	if (!rc && src != SQLITE_DONE)
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__token_revoke(struct store *s, const char *name, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	char what[160];
	int rc, src, changed;

	snprintf(what, sizeof(what), "revoke API token '%.100s'", name);
	rc = sqlite__prepare(ss, &st,
			     "UPDATE api_tokens SET revoked_at = ?"
			     " WHERE name = ? AND revoked_at = 0",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_int64(st, 1, time_now_ms());
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	changed = src == SQLITE_DONE ? sqlite3_changes(ss->db) : 0;
	rc = src == SQLITE_DONE ? 0 : sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	st = NULL;
	if (rc || changed)
		return rc ? rc : 1;
	/* nothing changed: revoked before, or no such token */
	rc = sqlite__prepare(ss, &st, "SELECT 1 FROM api_tokens WHERE name = ?",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		rc = 0;
	else if (src == SQLITE_DONE)
		rc = err_set(e, BATON_ENOTFOUND, "cannot %s: no such token",
			     what);
	else
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__token_used(struct store *s, const char *name, int64_t now,
		   struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "record an API token's use";
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "UPDATE api_tokens SET last_used_at = ?"
			     " WHERE name = ? AND last_used_at < ?",
			     0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_int64(st, 1, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 3, now - 60000);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	rc = src == SQLITE_DONE ? 0 : sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}
