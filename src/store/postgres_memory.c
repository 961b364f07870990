/*
 * The repository's memory on PostgreSQL (store.h, store_memory_put;
 * schema in sql/pg/012-memory.sql), with the contracts of
 * sqlite_memory.c.
 */
#include "util/compat.h"

#include <jansson.h>
#include <libpq-fe.h>

#include "store/pg_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/json.h"
#include "util/timeutil.h"

int
pg__memory_put(struct store *s, const char *id, const char *run_id,
	       const char *kind, const char *body, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *what = "write a memory entry";
	int rc, tries = 0;

	do {
		struct params p = { 0 };
		PGresult *res;

		param_text(&p, id);
		param_text(&p, run_id);
		param_text(&p, kind);
		param_text(&p, body);
		param_int(&p, time_now_ms());
		res = pg__exec(ps,
			       "INSERT INTO memory (id, run_id, kind, body,"
			       " created_at, updated_at)"
			       " VALUES ($1, $2, $3, $4, $5, $5)"
			       " ON CONFLICT (id) DO UPDATE SET"
			       " body = EXCLUDED.body, kind = EXCLUDED.kind,"
			       " updated_at = EXCLUDED.updated_at",
			       p.n, p.v, what, e);
		rc = res ? 0 : BATON_ESTORE;
		PQclear(res);
	} while (pg__again(ps, rc, &tries, e));
	return rc;
}

int
pg__memory_forget(struct store *s, const char *id, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *what = "forget a memory entry";
	int rc, tries = 0;

	do {
		struct params p = { 0 };
		PGresult *res;

		param_text(&p, id);
		res = pg__exec(ps, "DELETE FROM memory WHERE id = $1", p.n, p.v,
			       what, e);
		rc =
		    res ? strtol(PQcmdTuples(res), NULL, 10) > 0 : BATON_ESTORE;
		PQclear(res);
	} while (pg__again(ps, rc < 0 ? rc : 0, &tries, e));
	return rc;
}

int
pg__memory_list(struct store *s, json_t **out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *what = "list the memory";
	int rc, tries = 0, i;

	do {
		PGresult *res = pg__exec(ps,
					 "SELECT id, run_id, kind, body,"
					 " created_at, updated_at FROM memory"
					 " ORDER BY created_at, seq",
					 0, NULL, what, e);
		json_t *list;

		rc = res ? 0 : BATON_ESTORE;
		if (!res)
			continue;
		list = json_array();
		for (i = 0; i < PQntuples(res); i++)
			json_array_append_new(
			    list,
			    json_pack("{s:o, s:o, s:o, s:o, s:I, s:I}", "id",
				      json_lossy_str(PQgetvalue(res, i, 0)),
				      "run",
				      json_lossy_str(PQgetisnull(res, i, 1)
						 ? NULL
						 : PQgetvalue(res, i, 1)),
				      "kind",
				      json_lossy_str(PQgetvalue(res, i, 2)),
				      "body",
				      json_lossy_str(PQgetvalue(res, i, 3)),
				      "created_at",
				      (json_int_t)strtoll(PQgetvalue(res, i, 4),
							  NULL, 10),
				      "updated_at",
				      (json_int_t)strtoll(PQgetvalue(res, i, 5),
							  NULL, 10)));
		PQclear(res);
		*out = list;
	} while (pg__again(ps, rc, &tries, e));
	return rc;
}
