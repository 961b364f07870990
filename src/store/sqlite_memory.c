/*
 * The repository's memory on SQLite (store.h, store_memory_put; schema
 * in sql/012-memory.sql): one row per entry, replaced whole on an edit.
 */
#include "util/compat.h"

#include <jansson.h>
#include <sqlite3.h>

#include "store/sqlite_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/json.h"
#include "util/timeutil.h"

int
sqlite__memory_put(struct store *s, const char *id, const char *run_id,
		   const char *kind, const char *body, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	const char *what = "write a memory entry";
	int64_t now = time_now_ms();
	int rc, src;

	rc =
	    sqlite__prepare(ss, &st,
			    "INSERT INTO memory (id, run_id, kind, body,"
			    " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)"
			    " ON CONFLICT (id) DO UPDATE SET"
			    " body = excluded.body, kind = excluded.kind,"
			    " updated_at = excluded.updated_at",
			    0, what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = run_id
			  ? sqlite3_bind_text(st, 2, run_id, -1, SQLITE_STATIC)
			  : sqlite3_bind_null(st, 2);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 4, body, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 5, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 6, now);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	rc = src == SQLITE_DONE ? 0 : sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__memory_forget(struct store *s, const char *id, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	const char *what = "forget a memory entry";
	int rc, src;

	rc = sqlite__prepare(ss, &st, "DELETE FROM memory WHERE id = ?", 0,
			     what, e);
	if (rc < 0)
		return rc;
	src = sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	rc = src == SQLITE_DONE ? sqlite3_changes(ss->db) > 0
				: sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

static const char *
col(sqlite3_stmt *st, int i)
{
	const unsigned char *v = sqlite3_column_text(st, i);

	return v ? (const char *)v : NULL;
}

int
sqlite__memory_list(struct store *s, struct json_t **out, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	sqlite3_stmt *st = NULL;
	const char *what = "list the memory";
	json_t *list = json_array();
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "SELECT id, run_id, kind, body, created_at,"
			     " updated_at FROM memory"
			     " ORDER BY created_at, seq",
			     0, what, e);
	if (rc < 0) {
		json_decref(list);
		return rc;
	}
	while ((src = sqlite3_step(st)) == SQLITE_ROW)
		json_array_append_new(
		    list, json_pack("{s:o, s:o, s:o, s:o, s:I, s:I}", "id",
				    json_lossy_str(col(st, 0)), "run",
				    json_lossy_str(col(st, 1)), "kind",
				    json_lossy_str(col(st, 2)), "body",
				    json_lossy_str(col(st, 3) ? col(st, 3) : ""),
				    "created_at",
				    (json_int_t)sqlite3_column_int64(st, 4),
				    "updated_at",
				    (json_int_t)sqlite3_column_int64(st, 5)));
	rc = src == SQLITE_DONE ? 0 : sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	if (rc)
		json_decref(list);
	else
		*out = list;
	return rc;
}
