/*
 * Chat intake on SQLite (store.h, store_chat_*; schema in
 * sql/011-chat.sql): conversations and their messages. Every write is
 * one transaction (so fault injection covers it); the start of a
 * conversation's execution is an UPDATE guarded by the phase it leaves,
 * so that of two starts one changes the row and the other is told
 * BATON_ECONFLICT.
 */
#include "util/compat.h"

#include <sqlite3.h>

#include "store/sqlite_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

int
sqlite__chat_create(struct store *s, const char *phase, int64_t *id_out,
		    struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "create a conversation";
	sqlite3_stmt *st = NULL;
	int64_t now = time_now_ms(), id = 0;
	int rc, src;

	rc = sqlite__begin(ss, what, e);
	if (rc)
		return rc;
	rc = sqlite__prepare(ss, &st,
			     "INSERT INTO chat_conversations (phase,"
			     " created_at, updated_at) VALUES (?, ?, ?)",
			     0, what, e);
	if (rc)
		goto out;
	src = sqlite3_bind_text(st, 1, phase, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 2, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 3, now);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}
	id = sqlite3_last_insert_rowid(ss->db);
	rc = sqlite__commit(ss, what, e);
	if (!rc)
		*id_out = id;
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	return rc;
}

/* The messages of conversation id into c, oldest first. */
static int
read_messages(struct sqlite_store *ss, int64_t id, struct chat_conv *c,
	      const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	size_t alloc = 0;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "SELECT id, role, kind, content, created_at"
			     " FROM chat_messages WHERE conversation_id = ?"
			     " ORDER BY id",
			     0, what, e);
	if (rc)
		return rc;
	src = sqlite3_bind_int64(st, 1, id);
	while (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
		struct chat_msg *m;

		ALLOC_GROW(c->msgs, c->nr_msgs + 1, alloc);
		m = &c->msgs[c->nr_msgs++];
		m->id = sqlite3_column_int64(st, 0);
		m->role = sqlite__column_text(st, 1);
		m->kind = sqlite__column_text(st, 2);
		m->content = sqlite__column_text(st, 3);
		if (!m->content)
			m->content = xstrdup("");
		m->created_at = sqlite3_column_int64(st, 4);
		src = SQLITE_OK;
	}
	rc = src == SQLITE_DONE ? 0 : sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__chat_get(struct store *s, int64_t id, struct chat_conv *out,
		 struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "read a conversation";
	struct chat_conv c = { 0 };
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__exec(ss, "BEGIN", what, e);
	if (rc)
		return rc;
	rc = sqlite__prepare(ss, &st,
			     "SELECT phase, mode, plan, tasks, created_at,"
			     " updated_at FROM chat_conversations"
			     " WHERE id = ?",
			     0, what, e);
	if (rc)
		goto out;
	src = sqlite3_bind_int64(st, 1, id);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_DONE) {
		rc = err_set(e, BATON_ENOTFOUND, "no conversation %lld",
			     (long long)id);
		goto out;
	}
	if (src != SQLITE_ROW) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}
	c.id = id;
	c.phase = sqlite__column_text(st, 0);
	c.mode = sqlite__column_text(st, 1);
	c.plan = sqlite__column_text(st, 2);
	c.tasks = sqlite__column_text(st, 3);
	c.created_at = sqlite3_column_int64(st, 4);
	c.updated_at = sqlite3_column_int64(st, 5);
	rc = read_messages(ss, id, &c, what, e);
	if (!rc) {
		*out = c;
		memset(&c, 0, sizeof(c));
	}
out:
	sqlite3_finalize(st);
	sqlite__exec(ss, "COMMIT", what, NULL);
	chat_conv_release(&c);
	return rc;
}

/* Sets updated_at of conversation id; BATON_ENOTFOUND when none. */
static int
touch(struct sqlite_store *ss, int64_t id, int64_t now, const char *what,
      struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "UPDATE chat_conversations SET updated_at = ?"
			     " WHERE id = ?",
			     0, what, e);
	if (rc)
		return rc;
	src = sqlite3_bind_int64(st, 1, now);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 2, id);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE)
		rc = sqlite__fail(ss, e, what);
	else if (sqlite3_changes(ss->db) != 1)
		rc = err_set(e, BATON_ENOTFOUND, "no conversation %lld",
			     (long long)id);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__chat_add(struct store *s, int64_t id, const char *role,
		 const char *kind, const char *content, int64_t *msg_id,
		 struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "add a chat message";
	sqlite3_stmt *st = NULL;
	int64_t now = time_now_ms(), mid = 0;
	int rc, src;

	rc = sqlite__begin(ss, what, e);
	if (rc)
		return rc;
	rc = touch(ss, id, now, what, e);
	if (!rc)
		rc = sqlite__prepare(ss, &st,
				     "INSERT INTO chat_messages"
				     " (conversation_id, role, kind, content,"
				     " created_at) VALUES (?, ?, ?, ?, ?)",
				     0, what, e);
	if (rc)
		goto out;
	src = sqlite3_bind_int64(st, 1, id);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, role, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 4, content, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 5, now);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}
	mid = sqlite3_last_insert_rowid(ss->db);
	rc = sqlite__commit(ss, what, e);
	if (!rc && msg_id)
		*msg_id = mid;
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	return rc;
}

/* The phase of conversation id into *out (caller frees); ENOTFOUND. */
static int
read_phase(struct sqlite_store *ss, int64_t id, char **out, const char *what,
	   struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "SELECT phase FROM chat_conversations"
			     " WHERE id = ?",
			     0, what, e);
	if (rc)
		return rc;
	src = sqlite3_bind_int64(st, 1, id);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		*out = sqlite__column_text(st, 0);
	else if (src == SQLITE_DONE)
		rc = err_set(e, BATON_ENOTFOUND, "no conversation %lld",
			     (long long)id);
	else
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__chat_update(struct store *s, int64_t id, const char *from,
		    const struct chat_conv *set, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "update a conversation";
	sqlite3_stmt *st = NULL;
	char *phase = NULL;
	int rc, src;

	rc = sqlite__begin(ss, what, e);
	if (rc)
		return rc;
	rc = read_phase(ss, id, &phase, what, e);
	if (!rc && from && strcmp(phase ? phase : "", from))
		rc = err_set(e, BATON_ECONFLICT,
			     "conversation %lld is in phase %s, not %s",
			     (long long)id, phase ? phase : "?", from);
	if (!rc)
		rc = sqlite__prepare(ss, &st,
				     "UPDATE chat_conversations SET"
				     " phase = COALESCE(?, phase),"
				     " mode = COALESCE(?, mode),"
				     " plan = COALESCE(?, plan),"
				     " tasks = COALESCE(?, tasks),"
				     " updated_at = ? WHERE id = ?",
				     0, what, e);
	if (rc)
		goto out;
	src = sqlite3_bind_text(st, 1, set->phase, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 2, set->mode, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 3, set->plan, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 4, set->tasks, -1, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 5, time_now_ms());
	if (src == SQLITE_OK)
		src = sqlite3_bind_int64(st, 6, id);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		rc = sqlite__fail(ss, e, what);
		goto out;
	}
	rc = sqlite__commit(ss, what, e);
out:
	sqlite3_finalize(st);
	sqlite__rollback(ss);
	free(phase);
	return rc;
}

int
sqlite__chat_list(struct store *s, const char *phase, int64_t **ids, size_t *nr,
		  struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "list conversations";
	sqlite3_stmt *st = NULL;
	int64_t *v = NULL;
	size_t n = 0, alloc = 0;
	int rc, src;

	rc = sqlite__prepare(ss, &st,
			     "SELECT id FROM chat_conversations"
			     " WHERE phase = ? ORDER BY id",
			     0, what, e);
	if (rc)
		return rc;
	src = sqlite3_bind_text(st, 1, phase, -1, SQLITE_STATIC);
	while (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
		ALLOC_GROW(v, n + 1, alloc);
		v[n++] = sqlite3_column_int64(st, 0);
		src = SQLITE_OK;
	}
	rc = src == SQLITE_DONE ? 0 : sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	if (rc) {
		free(v);
		return rc;
	}
	*ids = v;
	*nr = n;
	return 0;
}
