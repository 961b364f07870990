/*
 * Run and event records: see run.h.
 */
#include "util/compat.h"

#include "core/run.h"
#include "util/err.h"
#include "util/limits.h"
#include "util/xalloc.h"

#define RUN_STRINGS(X)                                                         \
	X(id) X(task) X(pipeline) X(status) X(stage) X(phase)                  \
	X(paused_at_status) X(gate_status) X(gate_back) X(reason)              \
	X(worktree) X(branch) X(base_ref) X(base_commit) X(checkpoint)        \
	X(config_hash) X(config_snapshot) X(outcome) X(progress)

int
run_task_text_fits(size_t len, struct err *e)
{
	if (len <= TASK_TEXT_MAX)
		return 0;
	return err_set(e, BATON_EINVAL,
		       "task text is %zu bytes, over the limit of %d bytes "
		       "(%d KiB): put the detail in a file of the repository "
		       "and name it in the task",
		       len, TASK_TEXT_MAX, TASK_TEXT_MAX / 1024);
}

void
run_release(struct run *r)
{
#define FREE_FIELD(f) FREE_AND_NULL(r->f);
	RUN_STRINGS(FREE_FIELD)
#undef FREE_FIELD
}

void
run_copy(struct run *dst, const struct run *src)
{
	*dst = *src;
#define DUP_FIELD(f) dst->f = xstrdup_or_null(src->f);
	RUN_STRINGS(DUP_FIELD)
#undef DUP_FIELD
}

void
run_set(char **field, const char *value)
{
	char *copy = xstrdup_or_null(value);

	free(*field);
	*field = copy;
}

void
event_release(struct event *ev)
{
	FREE_AND_NULL(ev->run_id);
	FREE_AND_NULL(ev->type);
	FREE_AND_NULL(ev->from);
	FREE_AND_NULL(ev->to);
	FREE_AND_NULL(ev->data);
}
