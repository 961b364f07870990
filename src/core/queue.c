/*
 * The transition tables of tasks and merge items: see queue.h. Each edge
 * is one the code takes today, with the place that takes it; an edge
 * added here without code behind it, or code that moves a record along
 * an edge missing here, shows up in t_queue (the pinned tables) or as
 * the store's refusal.
 */
#include "util/compat.h"

#include "core/queue.h"
#include "util/buf.h"
#include "util/err.h"

const struct queue_move task_moves[] = {
	{ TASK_QUEUED, TASK_RUNNING, "claimed by a worker (store_task_claim)" },
	{ TASK_QUEUED, TASK_BLOCKED,
	  "a dependency did not succeed (sweep); started afresh in a "
	  "terminal (resume --fresh)" },
	{ TASK_QUEUED, TASK_CANCELLED,
	  "cancelled on request; its issue closed before it started" },
	{ TASK_RUNNING, TASK_QUEUED,
	  "its worker is gone or its lease expired (sweep); an attempt "
	  "failed and it is retried; serve stopped under it; its run was "
	  "started afresh for a worker" },
	{ TASK_RUNNING, TASK_DONE, "its run finished" },
	{ TASK_RUNNING, TASK_FAILED, "its last attempt failed" },
	{ TASK_RUNNING, TASK_BLOCKED,
	  "its run rests: awaiting its judge or an approval, paused, a "
	  "quota wait, needs rework, its pull request; started afresh in "
	  "a terminal" },
	{ TASK_RUNNING, TASK_CANCELLED, "its run was aborted" },
	{ TASK_FAILED, TASK_QUEUED,
	  "retried on request; its unended run started afresh for a worker" },
	{ TASK_FAILED, TASK_BLOCKED,
	  "its unended run started afresh in a terminal (resume --fresh)" },
	{ TASK_BLOCKED, TASK_QUEUED,
	  "the gate was decided, the run resumed, the quota reset, the "
	  "issue linked (sweep, forge); retried on request; started afresh "
	  "for a worker" },
	{ TASK_BLOCKED, TASK_DONE,
	  "the judge approved it; its rework was approved; its pull request "
	  "was merged or took the fix round" },
	{ TASK_BLOCKED, TASK_CANCELLED,
	  "cancelled on request; its pull request was closed, or a person "
	  "declined to go on; its issue closed before it started" },
	{ TASK_CANCELLED, TASK_QUEUED, "retried on request" },
};
const size_t nr_task_moves = ARRAY_SIZE(task_moves);

const struct queue_move merge_moves[] = {
	{ MERGE_PENDING, MERGE_PROCESSING, "claimed (store_merge_claim)" },
	{ MERGE_PROCESSING, MERGE_PENDING,
	  "tried again: the base moved, a conflict within the retries, an "
	  "error that may pass" },
	{ MERGE_PROCESSING, MERGE_MERGED,
	  "landed, or already contained in the base" },
	{ MERGE_PROCESSING, MERGE_FAILED,
	  "the checks failed, conflicts past the retries, its run or branch "
	  "is gone" },
	{ MERGE_FAILED, MERGE_PENDING, "merged again on request" },
};
const size_t nr_merge_moves = ARRAY_SIZE(merge_moves);

static int
check(const struct queue_move *t, size_t n, const char *from, const char *to,
      struct err *e)
{
	struct buf legal = BUF_INIT;
	size_t i;
	int rc;

	if (!strcmp(from, to))
		return 0;
	for (i = 0; i < n; i++)
		if (!strcmp(t[i].from, from) && !strcmp(t[i].to, to))
			return 0;
	for (i = 0; i < n; i++)
		if (!strcmp(t[i].from, from))
			buf_addf(&legal, "%s%s", legal.len ? ", " : "",
				 t[i].to);
	if (legal.len)
		rc = err_set(e, BATON_EBADSTATE,
			     "illegal transition '%s' -> '%s' (from '%s' "
			     "only: %s)",
			     from, to, from, legal.ptr);
	else
		rc = err_set(e, BATON_EBADSTATE,
			     "illegal transition '%s' -> '%s' ('%s' is final)",
			     from, to, from);
	buf_release(&legal);
	return rc;
}

static void
froms(const struct queue_move *t, size_t n, const char *to, struct buf *out)
{
	size_t i;

	buf_addf(out, "|%s|", to);
	for (i = 0; i < n; i++)
		if (!strcmp(t[i].to, to))
			buf_addf(out, "%s|", t[i].from);
}

int
task_move_check(const char *from, const char *to, struct err *e)
{
	return check(task_moves, nr_task_moves, from, to, e);
}

int
merge_move_check(const char *from, const char *to, struct err *e)
{
	return check(merge_moves, nr_merge_moves, from, to, e);
}

void
task_move_froms(const char *to, struct buf *out)
{
	froms(task_moves, nr_task_moves, to, out);
}

void
merge_move_froms(const char *to, struct buf *out)
{
	froms(merge_moves, nr_merge_moves, to, out);
}
