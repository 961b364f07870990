/*
 * Chat intake on PostgreSQL (store.h, store_chat_*; schema in
 * sql/pg/011-chat.sql), with the contracts of sqlite_chat.c. The start
 * of execution is an UPDATE ... WHERE phase = $from: of two starts the
 * second waits for the first's row lock, then finds the phase changed
 * and updates nothing (BATON_ECONFLICT).
 */
#include "util/compat.h"

#include <libpq-fe.h>

#include "store/pg_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static char *
text_or_null(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return NULL;
	return xstrdup(PQgetvalue(res, row, col));
}

static int
create_try(struct pg_store *ps, const char *phase, int64_t *id_out,
	   struct err *e)
{
	const char *what = "create a conversation";
	struct params p = { 0 };
	int64_t now = time_now_ms(), id = 0;
	PGresult *res = NULL;
	int rc;

	rc = pg__begin(ps, what, e);
	if (rc)
		return rc;
	param_text(&p, phase);
	param_int(&p, now);
	res = pg__exec(ps,
		       "INSERT INTO chat_conversations (phase, created_at,"
		       " updated_at) VALUES ($1, $2, $2) RETURNING id",
		       p.n, p.v, what, e);
	if (!res || PQntuples(res) != 1) {
		rc = res ? err_set(e, BATON_ESTORE, "cannot %s: no id", what)
			 : BATON_ESTORE;
		goto out;
	}
	id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	rc = pg__commit(ps, what, e);
	if (!rc)
		*id_out = id;
out:
	PQclear(res);
	pg__rollback(ps);
	return rc;
}

int
pg__chat_create(struct store *s, const char *phase, int64_t *id_out,
		struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int rc, tries = 0;

	do
		rc = create_try(ps, phase, id_out, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}

static int
get_try(struct pg_store *ps, int64_t id, struct chat_conv *out, struct err *e)
{
	const char *what = "read a conversation";
	struct chat_conv c = { 0 };
	struct params p = { 0 };
	PGresult *res = NULL;
	int rc = 0, i, n;

	param_int(&p, id);
	res = pg__exec(ps,
		       "SELECT phase, mode, plan, tasks, created_at,"
		       " updated_at FROM chat_conversations WHERE id = $1",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) != 1) {
		PQclear(res);
		return err_set(e, BATON_ENOTFOUND, "no conversation %lld",
			       (long long)id);
	}
	c.id = id;
	c.phase = text_or_null(res, 0, 0);
	c.mode = text_or_null(res, 0, 1);
	c.plan = text_or_null(res, 0, 2);
	c.tasks = text_or_null(res, 0, 3);
	c.created_at = strtoll(PQgetvalue(res, 0, 4), NULL, 10);
	c.updated_at = strtoll(PQgetvalue(res, 0, 5), NULL, 10);
	PQclear(res);
	res = pg__exec(ps,
		       "SELECT id, role, kind, content, created_at"
		       " FROM chat_messages WHERE conversation_id = $1"
		       " ORDER BY id",
		       p.n, p.v, what, e);
	if (!res) {
		rc = BATON_ESTORE;
		goto out;
	}
	n = PQntuples(res);
	c.msgs = xcalloc(n ? (size_t)n : 1, sizeof(*c.msgs));
	for (i = 0; i < n; i++) {
		struct chat_msg *m = &c.msgs[c.nr_msgs++];

		m->id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		m->role = xstrdup(PQgetvalue(res, i, 1));
		m->kind = xstrdup(PQgetvalue(res, i, 2));
		m->content = xstrdup(PQgetvalue(res, i, 3));
		m->created_at = strtoll(PQgetvalue(res, i, 4), NULL, 10);
	}
	*out = c;
	memset(&c, 0, sizeof(c));
out:
	PQclear(res);
	chat_conv_release(&c);
	return rc;
}

int
pg__chat_get(struct store *s, int64_t id, struct chat_conv *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int rc, tries = 0;

	do
		rc = get_try(ps, id, out, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}

static int
add_try(struct pg_store *ps, int64_t id, const char *role, const char *kind,
	const char *content, int64_t *msg_id, struct err *e)
{
	const char *what = "add a chat message";
	struct params p = { 0 };
	int64_t now = time_now_ms(), mid = 0;
	PGresult *res = NULL;
	int rc;

	rc = pg__begin(ps, what, e);
	if (rc)
		return rc;
	param_int(&p, id);
	param_int(&p, now);
	res = pg__exec(ps,
		       "UPDATE chat_conversations SET updated_at = $2"
		       " WHERE id = $1 RETURNING 1",
		       p.n, p.v, what, e);
	if (!res) {
		rc = BATON_ESTORE;
		goto out;
	}
	if (PQntuples(res) != 1) {
		rc = err_set(e, BATON_ENOTFOUND, "no conversation %lld",
			     (long long)id);
		goto out;
	}
	PQclear(res);
	param_text(&p, role);
	param_text(&p, kind);
	param_text(&p, content);
	res = pg__exec(ps,
		       "INSERT INTO chat_messages (conversation_id, role,"
		       " kind, content, created_at)"
		       " VALUES ($1, $3, $4, $5, $2) RETURNING id",
		       p.n, p.v, what, e);
	if (!res || PQntuples(res) != 1) {
		rc = res ? err_set(e, BATON_ESTORE, "cannot %s: no id", what)
			 : BATON_ESTORE;
		goto out;
	}
	mid = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	rc = pg__commit(ps, what, e);
	if (!rc && msg_id)
		*msg_id = mid;
out:
	PQclear(res);
	pg__rollback(ps);
	return rc;
}

int
pg__chat_add(struct store *s, int64_t id, const char *role, const char *kind,
	     const char *content, int64_t *msg_id, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int rc, tries = 0;

	do
		rc = add_try(ps, id, role, kind, content, msg_id, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}

static int
update_try(struct pg_store *ps, int64_t id, const char *from,
	   const struct chat_conv *set, struct err *e)
{
	const char *what = "update a conversation";
	struct params p = { 0 };
	PGresult *res = NULL;
	int rc;

	rc = pg__begin(ps, what, e);
	if (rc)
		return rc;
	param_int(&p, id);
	res = pg__exec(ps,
		       "SELECT phase FROM chat_conversations WHERE id = $1"
		       " FOR UPDATE",
		       p.n, p.v, what, e);
	if (!res) {
		rc = BATON_ESTORE;
		goto out;
	}
	if (PQntuples(res) != 1) {
		rc = err_set(e, BATON_ENOTFOUND, "no conversation %lld",
			     (long long)id);
		goto out;
	}
	if (from && strcmp(PQgetvalue(res, 0, 0), from)) {
		rc = err_set(e, BATON_ECONFLICT,
			     "conversation %lld is in phase %s, not %s",
			     (long long)id, PQgetvalue(res, 0, 0), from);
		goto out;
	}
	PQclear(res);
	res = NULL;
	param_text(&p, set->phase);
	param_text(&p, set->mode);
	param_text(&p, set->plan);
	param_text(&p, set->tasks);
	param_int(&p, time_now_ms());
	rc = pg__run(ps,
		     "UPDATE chat_conversations SET"
		     " phase = COALESCE($2, phase), mode = COALESCE($3, mode),"
		     " plan = COALESCE($4, plan), tasks = COALESCE($5, tasks),"
		     " updated_at = $6 WHERE id = $1",
		     p.n, p.v, what, e);
	if (!rc)
		rc = pg__commit(ps, what, e);
out:
	PQclear(res);
	pg__rollback(ps);
	return rc;
}

int
pg__chat_update(struct store *s, int64_t id, const char *from,
		const struct chat_conv *set, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int rc, tries = 0;

	do
		rc = update_try(ps, id, from, set, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}

static int
list_try(struct pg_store *ps, const char *phase, int64_t **ids, size_t *nr,
	 struct err *e)
{
	const char *what = "list conversations";
	struct params p = { 0 };
	PGresult *res;
	int64_t *v;
	int i, n;

	param_text(&p, phase);
	res = pg__exec(ps,
		       "SELECT id FROM chat_conversations WHERE phase = $1"
		       " ORDER BY id",
		       p.n, p.v, what, e);
	if (!res)
		return BATON_ESTORE;
	n = PQntuples(res);
	v = xcalloc(n ? (size_t)n : 1, sizeof(*v));
	for (i = 0; i < n; i++)
		v[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
	PQclear(res);
	*ids = v;
	*nr = (size_t)n;
	return 0;
}

int
pg__chat_list(struct store *s, const char *phase, int64_t **ids, size_t *nr,
	      struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int rc, tries = 0;

	do
		rc = list_try(ps, phase, ids, nr, e);
	while (pg__again(ps, rc, &tries, e));
	return rc;
}
