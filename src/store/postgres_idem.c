/*
 * Idempotency keys on PostgreSQL (store.h, store_idem_claim; schema in
 * sql/pg/010-idempotency.sql), with the contracts of sqlite_idem.c. The
 * primary key decides a race: the second claim's INSERT ... ON CONFLICT
 * DO NOTHING waits for the first to commit, inserts nothing, and the
 * SELECT that follows (a new statement, a new snapshot) reads the
 * first one's row.
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

int
pg__idem_take(struct pg_store *ps, struct store_key *k, const char *what,
	      struct err *e)
{
	struct params p = { 0 };
	PGresult *res;
	int rc;

	param_text(&p, k->key);
	param_text(&p, k->sha);
	param_int(&p, time_now_ms());
	res = pg__exec(ps,
		       "INSERT INTO idempotency_keys"
		       " (idem_key, payload_sha256, task_id, created_at)"
		       " VALUES ($1, $2, NULL, $3)"
		       " ON CONFLICT (idem_key) DO NOTHING RETURNING 1",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	rc = PQntuples(res) == 1;
	PQclear(res);
	if (rc)
		return 1;
	p.n = 0;
	param_text(&p, k->key);
	res = pg__exec(ps,
		       "SELECT payload_sha256, COALESCE(task_id, 0)"
		       " FROM idempotency_keys WHERE idem_key = $1",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return 2;
	}
	snprintf(k->sha_was, sizeof(k->sha_was), "%s", PQgetvalue(res, 0, 0));
	k->task_id = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	return 0;
}

int
pg__idem_set(struct pg_store *ps, const char *key, int64_t task_id,
	     const char *what, struct err *e)
{
	struct params p = { 0 };
	PGresult *res;

	param_text(&p, key);
	if (task_id)
		param_int(&p, task_id);
	res = pg__exec(ps,
		       task_id ? "UPDATE idempotency_keys"
				 " SET task_id = $2 WHERE idem_key = $1"
			       : "DELETE FROM idempotency_keys"
				 " WHERE idem_key = $1 AND task_id IS NULL",
		       p.n, p.v, what, e);
	PQclear(res);
	return res ? 0 : BATON_ESTORE;
}

int
pg__idem_claim(struct store *s, const char *key, const char *sha,
	       int64_t *task_id, char sha_out[65], struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct store_key k = { .key = key, .sha = sha };
	char what[160];
	int rc, tries = 0, gone = 0;

	snprintf(what, sizeof(what), "claim idempotency key '%.100s'", key);
	do {
		rc = pg__idem_take(ps, &k, what, e);
		/* a claim given up between our INSERT and SELECT */
		if (rc == 2 && ++gone < 3)
			continue;
		if (rc == 2)
			return err_set(e, BATON_ESTORE,
				       "cannot %s: it keeps being given up",
				       what);
	} while (rc == 2 || pg__again(ps, rc, &tries, e));
	if (rc == 0) {
		*task_id = k.task_id;
		memcpy(sha_out, k.sha_was, sizeof(k.sha_was));
	}
	return rc;
}

int
pg__idem_bind(struct store *s, const char *key, int64_t task_id,
	      struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[160];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "bind idempotency key '%.100s'", key);
	do
		rc = pg__idem_set(ps, key, task_id, what, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}
