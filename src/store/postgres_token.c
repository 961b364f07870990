/*
 * Named API tokens on PostgreSQL (store.h, store_token_add; schema in
 * sql/pg/013-api-tokens.sql), with the contracts of sqlite_token.c.
 */
#include "util/compat.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define TOKEN_COLS "name, role, created_at, last_used_at, revoked_at"

static void
read_token(PGresult *res, int row, struct api_token *t)
{
	t->name = xstrdup(PQgetvalue(res, row, 0));
	t->role = xstrdup(PQgetvalue(res, row, 1));
	t->created_at = strtoll(PQgetvalue(res, row, 2), NULL, 10);
	t->last_used_at = strtoll(PQgetvalue(res, row, 3), NULL, 10);
	t->revoked_at = strtoll(PQgetvalue(res, row, 4), NULL, 10);
}

int
pg__token_add(struct store *s, const char *name, const char *role,
	      const char *sha, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[160];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "add API token '%.100s'", name);
	do {
		struct params p = { 0 };
		PGresult *res;

		param_text(&p, name);
		param_text(&p, role);
		param_text(&p, sha);
		param_int(&p, time_now_ms());
		res = pg__exec(ps,
			       "INSERT INTO api_tokens (name, role,"
			       " secret_sha256, created_at)"
			       " VALUES ($1, $2, $3, $4)"
			       " ON CONFLICT DO NOTHING RETURNING 1",
			       p.n, p.v, what, e);
		if (!res)
			rc = BATON_ESTORE;
		else if (PQntuples(res) != 1)
			rc = err_set(e, BATON_EEXIST,
				     "cannot %s: a token of that name exists "
				     "(names stay taken after a revoke)",
				     what);
		else
			rc = 0;
		PQclear(res);
	} while (pg__again(ps, rc, &tries, e));
	return rc;
}

int
pg__token_find(struct store *s, const char *sha, struct api_token *out,
	       struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *what = "look up an API token";
	int rc, tries = 0;

	do {
		struct params p = { 0 };
		PGresult *res;

		param_text(&p, sha);
		res = pg__exec(ps,
			       "SELECT " TOKEN_COLS " FROM api_tokens"
			       " WHERE secret_sha256 = $1",
			       p.n, p.v, what, e);
		if (!res) {
			rc = BATON_ESTORE;
		} else if (PQntuples(res) == 1) {
			read_token(res, 0, out);
			rc = 1;
		} else {
			rc = 0;
		}
		PQclear(res);
	} while (pg__again(ps, rc, &tries, e));
	return rc;
}

int
pg__token_list(struct store *s, store_token_cb *cb, void *arg, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *what = "list the API tokens";
	PGresult *res = NULL;
	int rc, tries = 0, i;

	do {
		PQclear(res);
		res = pg__exec(ps,
			       "SELECT " TOKEN_COLS " FROM api_tokens"
			       " ORDER BY name",
			       0, NULL, what, e);
		rc = res ? 0 : BATON_ESTORE;
	} while (pg__again(ps, rc, &tries, e));
	for (i = 0; !rc && i < PQntuples(res); i++) {
		struct api_token t = { 0 };

		read_token(res, i, &t);
		rc = cb(&t, arg);
		api_token_release(&t);
	}
	PQclear(res);
	return rc;
}

int
pg__token_revoke(struct store *s, const char *name, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[160];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "revoke API token '%.100s'", name);
	do {
		struct params p = { 0 };
		PGresult *res;

		param_text(&p, name);
		param_int(&p, time_now_ms());
		/* the row's revoked_at before the update: 0 means revoked now
		 */
		res = pg__exec(ps,
			       "WITH old AS (SELECT revoked_at FROM api_tokens"
			       " WHERE name = $1 FOR UPDATE),"
			       " upd AS (UPDATE api_tokens SET revoked_at = $2"
			       " WHERE name = $1 AND revoked_at = 0)"
			       " SELECT revoked_at FROM old",
			       p.n, p.v, what, e);
		if (!res)
			rc = BATON_ESTORE;
		else if (PQntuples(res) != 1)
			rc = err_set(e, BATON_ENOTFOUND,
				     "cannot %s: no such token", what);
		else
			rc = !strcmp(PQgetvalue(res, 0, 0), "0");
		PQclear(res);
	} while (pg__again(ps, rc, &tries, e));
	return rc;
}

int
pg__token_used(struct store *s, const char *name, int64_t now, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *what = "record an API token's use";
	int rc, tries = 0;

	do {
		struct params p = { 0 };

		param_text(&p, name);
		param_int(&p, now);
		param_int(&p, now - 60000);
		rc = pg__run(ps,
			     "UPDATE api_tokens SET last_used_at = $2"
			     " WHERE name = $1 AND last_used_at < $3",
			     p.n, p.v, what, e);
	} while (pg__again(ps, rc, &tries, e));
	return rc;
}
