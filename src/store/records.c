/*
 * The records of the runtime tables that callers hold: struct task and
 * struct merge_item (store.h). Plain data with owned strings; the field
 * lists of store_int.h say which those are, so a field added there is
 * freed and copied here without anyone having to remember.
 */
#include "util/compat.h"

#include <jansson.h>

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
