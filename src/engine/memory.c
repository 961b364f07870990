/*
 * The repository's memory (core/memory.h; docs/operations.md "Memory"):
 * a run that ends writes what it decided and how it ended; later runs
 * of the same repository read the entries that bear on their task.
 *
 * The entries live in the store (table memory) and are mirrored as
 * files under the main repository's .baton/memory/<id>.md for people to
 * read. Only baton writes either, from what it recorded itself (the
 * run's task, status, reason and changed files): nothing is read from
 * the agent's worktree, so an agent that writes .baton/memory/ there
 * changes nothing. What is read back goes into a prompt as untrusted
 * text, delimited with a tag the entries cannot know.
 */
#include "util/compat.h"

#include <sys/random.h>

#include "core/memory.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "engine/kinds/kind.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* Changed files an entry names, at most. */
#define MEMORY_FILES_MAX 20

static char *
entry_path(const struct workspace *ws, const char *id)
{
	return xasprintf("%s/memory/%s.md", ws->dir, id);
}

int
engine_memory_save(const struct workspace *ws, struct store *st, const char *id,
		   const char *run_id, const char *kind, const char *body,
		   struct err *e)
{
	char *dir, *path;
	int rc;

	if (!memory_id_ok(id))
		return err_set(e, BATON_EINVAL,
			       "memory id '%s': expected 1 to %d characters "
			       "a-z, 0-9 or '-', starting with a letter",
			       id, MEMORY_ID_MAX);
	if (strlen(body) > MEMORY_BODY_MAX)
		return err_set(e, BATON_EINVAL,
			       "memory entry '%s': %zu bytes, more than the "
			       "%d an entry may have",
			       id, strlen(body), MEMORY_BODY_MAX);
	rc = store_memory_put(st, id, run_id, kind, body, e);
	if (rc)
		return rc;
	dir = xasprintf("%s/memory", ws->dir);
	path = entry_path(ws, id);
	rc = fs_mkdir_p(dir, 0755, e);
	if (!rc)
		rc = fs_write_atomic(path, body, strlen(body), e);
	free(path);
	free(dir);
	return rc;
}

int
engine_memory_forget(const struct workspace *ws, struct store *st,
		     const char *id, struct err *e)
{
	char *path;
	int rc;

	if (!memory_id_ok(id))
		return 0;
	rc = store_memory_forget(st, id, e);
	if (rc < 0)
		return rc;
	path = entry_path(ws, id);
	fs_unlink(path, NULL);
	free(path);
	return rc;
}

/* The files the run's diff changed, one "- path" line each. */
static void
changed_files(struct drive *d, struct buf *out)
{
	struct buf diff = BUF_INIT;
	const char *p;
	size_t n = 0;

	if (!d->r.worktree || !d->r.base_commit ||
	    worktree_diff(d->en->ws, d->r.worktree, d->r.base_commit, 0, &diff,
			  NULL))
		goto out;
	for (p = diff.ptr; p && *p;
	     p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		const char *end = strchr(p, '\n');

		if (strncmp(p, "+++ b/", 6))
			continue;
		if (n++ == MEMORY_FILES_MAX) {
			buf_adds(out, "- ...\n");
			break;
		}
		buf_adds(out, "- ");
		buf_add(out, p + 6,
			end ? (size_t)(end - p - 6) : strlen(p + 6));
		buf_addch(out, '\n');
	}
out:
	buf_release(&diff);
}

void
engine__memory_record(struct drive *d, const char *to, const char *data)
{
	json_t *move = data ? json_loads(data, 0, NULL) : NULL;
	const char *reason = json_get_str(move, "reason");
	struct buf body = BUF_INIT, files = BUF_INIT;
	struct err e = ERR_INIT;
	char *id;

	if (!strcmp(to, ST_ABORTED)) {
		json_decref(move);
		return;
	}
	buf_addf(&body, "Run %s (pipeline %s) ended %s.\n", d->r.id,
		 d->r.pipeline ? d->r.pipeline : "?", to);
	buf_adds(&body, "Task: ");
	buf_add_cut(&body, d->r.task ? d->r.task : "",
		    d->r.task ? strlen(d->r.task) : 0, 600);
	buf_addch(&body, '\n');
	if (reason) {
		buf_adds(&body, "Why: ");
		buf_add_cut(&body, reason, strlen(reason), 600);
		buf_addch(&body, '\n');
	}
	changed_files(d, &files);
	if (files.len)
		buf_addf(&body, "Changed:\n%s", files.ptr);
	id = xasprintf("run-%s", d->r.id);
	if (engine_memory_save(d->en->ws, d->en->store, id, d->r.id, "outcome",
			       body.ptr, &e))
		log_warn("run '%s': cannot write its memory entry: %s", d->r.id,
			 e.msg);
	else
		engine__note(d, "memory_written",
			     json_pack("{s:s, s:I}", "id", id, "bytes",
				       (json_int_t)body.len),
			     NULL);
	free(id);
	buf_release(&files);
	buf_release(&body);
	json_decref(move);
}

void
engine__memory_context(struct drive *d, struct buf *ctx, size_t *budget)
{
	unsigned char raw[6];
	char tag[13];
	json_t *list = NULL;
	struct err e = ERR_INIT;
	size_t max = *budget < MEMORY_PROMPT_MAX ? *budget : MEMORY_PROMPT_MAX;
	size_t before = ctx->len, i;

	if (store_memory_list(d->en->store, &list, &e)) {
		log_warn("run '%s': cannot read the memory: %s", d->r.id,
			 e.msg);
		return;
	}
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		memset(raw, 0x5a, sizeof(raw));
	for (i = 0; i < sizeof(raw); i++)
		snprintf(tag + 2 * i, 3, "%02x", raw[i]);
	/* this run's own entry (a resumed run) is not memory of another */
	for (i = json_array_size(list); i-- > 0;) {
		const char *run = json_get_str(json_array_get(list, i), "run");

		if (run && d->r.id && !strcmp(run, d->r.id))
			json_array_remove(list, i);
	}
	memory_prompt(list, d->r.task, tag, max, ctx);
	if (ctx->len > before) {
		buf_addch(ctx, '\n');
		*budget -=
		    ctx->len - before < *budget ? ctx->len - before : *budget;
	}
	json_decref(list);
}
