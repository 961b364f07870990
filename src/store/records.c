/*
 * The records of the runtime tables that callers hold: struct task,
 * struct merge_item and struct forge_link (store.h). Plain data with owned strings; the field
 * lists of store_int.h say which those are, so a field added there is
 * freed and copied here without anyone having to remember.
 */
#include "util/compat.h"

#include <jansson.h>

#include "core/run.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/xalloc.h"

const char *const task_statuses[NR_TASK_STATUSES] = {
	TASK_QUEUED, TASK_RUNNING, TASK_DONE,
	TASK_FAILED, TASK_BLOCKED, TASK_CANCELLED,
};

int
task_status_check(const char *status, struct err *e)
{
	struct buf list = BUF_INIT;
	size_t i;
	int rc;

	for (i = 0; i < NR_TASK_STATUSES; i++)
		if (!strcmp(status, task_statuses[i]))
			return 0;
	for (i = 0; i < NR_TASK_STATUSES; i++)
		buf_addf(&list, "%s%s", i ? ", " : "", task_statuses[i]);
	rc = err_set(e, BATON_EINVAL, "unknown task status '%s' (%s)", status,
		     list.ptr);
	buf_release(&list);
	return rc;
}

void
task_release(struct task *t)
{
	if (!t)
		return;
#define FREE_FIELD(f) FREE_AND_NULL(t->f);
	TASK_STRINGS(FREE_FIELD)
#undef FREE_FIELD
	FREE_AND_NULL(t->deps);
	t->nr_deps = 0;
}

/*
 * A deep copy: dst gets its own strings and its own deps array. dst is
 * overwritten, not released (as run_copy).
 */
void
task_copy(struct task *dst, const struct task *src)
{
	*dst = *src;
#define DUP_FIELD(f) dst->f = xstrdup_or_null(src->f);
	TASK_STRINGS(DUP_FIELD)
#undef DUP_FIELD
	dst->deps = NULL;
	if (src->nr_deps) {
		dst->deps = xmalloc(src->nr_deps * sizeof(*dst->deps));
		memcpy(dst->deps, src->deps, src->nr_deps * sizeof(*dst->deps));
	}
}

void
merge_item_release(struct merge_item *m)
{
	if (!m)
		return;
#define FREE_FIELD(f) FREE_AND_NULL(m->f);
	MERGE_STRINGS(FREE_FIELD)
#undef FREE_FIELD
}

char *
store__claim_data(const char *holder, int64_t token, int attempt)
{
	return json_take_text(json_pack("{s:o, s:I, s:i}", "worker",
					json_lossy_str(holder), "token",
					(json_int_t)token, "attempt", attempt));
}

char *
store__merge_claim_data(int64_t id, const char *holder)
{
	return json_take_text(json_pack("{s:I, s:o}", "item", (json_int_t)id,
					"worker", json_lossy_str(holder)));
}

void
store__task_added(struct task *t, const struct task *row, int64_t id,
		  int64_t created, int64_t now, struct event *ev, int64_t ts,
		  int64_t seq)
{
	t->id = id;
	t->version = 1;
	t->created_at = created;
	t->updated_at = now;
	t->max_attempts = row->max_attempts;
	if (!t->kind)
		t->kind = xstrdup(row->kind);
	if (!t->origin)
		t->origin = xstrdup(row->origin);
	if (!t->status)
		t->status = xstrdup(row->status);
	if (ev) {
		ev->task_id = id;
		ev->ts = ts;
		ev->seq = seq;
	}
}

void
forge_link_release(struct forge_link *l)
{
	if (!l)
		return;
#define FREE_FIELD(f) FREE_AND_NULL(l->f);
	FORGE_LINK_STRINGS(FREE_FIELD)
#undef FREE_FIELD
}

int
store__forge_link_taken(const struct forge_link *l, int64_t other, int pr,
			const char *what, struct err *e)
{
	int64_t n = pr ? l->pr_number : l->issue_number;

	if (!other)
		return err_set(e, BATON_EEXIST,
			       "cannot %s: its issue or PR of %s is linked to "
			       "another task already",
			       what, l->repo);
	return err_set(e, BATON_EEXIST,
		       "cannot %s: %s #%lld of %s is linked to task %lld "
		       "already",
		       what, pr ? "PR" : "issue", (long long)n, l->repo,
		       (long long)other);
}

int
store__forge_link_stale(const struct forge_link *l, const char *what,
			struct err *e)
{
	if (!l->version)
		return err_set(e, BATON_ECONFLICT,
			       "cannot %s: task %lld has a link already "
			       "(written concurrently)",
			       what, (long long)l->task_id);
	return err_set(e, BATON_ECONFLICT,
		       "cannot %s: the link of task %lld changed concurrently "
		       "(expected version %lld)",
		       what, (long long)l->task_id, (long long)l->version);
}

struct task
store__task_with_defaults(const struct task *t, struct store_task_defaults *d)
{
	struct task row = *t;

	memcpy(d->kind, TASK_DEFAULT_KIND, sizeof(d->kind));
	memcpy(d->origin, TASK_DEFAULT_ORIGIN, sizeof(d->origin));
	memcpy(d->status, TASK_QUEUED, sizeof(d->status));
	if (!row.kind)
		row.kind = d->kind;
	if (!row.origin)
		row.origin = d->origin;
	if (!row.status)
		row.status = d->status;
	return row;
}
