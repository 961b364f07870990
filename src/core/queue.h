/*
 * The lifecycles of the queue's records: a task's status and a merge
 * item's, each with its transition table, as a run has its pipeline's
 * (pipeline.h). The store refuses a write that moves a task or an item
 * along an edge its table does not have (store.h), so the tables are the
 * whole truth about how these records move; tests pin them (t_queue).
 *
 * Tasks (sched/: dispatch, workers, the sweep, the judge; forge/):
 *
 *   queued  ──claim──────────────────────────────────▶ running
 *   running ──its run finished───────────────────────▶ done (final)
 *   running ──its last attempt failed────────────────▶ failed
 *   running ──its run aborted────────────────────────▶ cancelled
 *   running ──its run rests: judge, gate, pause,
 *             quota, rework, pull request─────────────▶ blocked
 *   running ──lease lost, retried, serve stopped─────▶ queued
 *   queued  ──a dependency failed─────────────────────▶ blocked
 *   blocked ──gate decided, resumed, quota reset,
 *             issue linked, retried──────────────────▶ queued
 *   blocked ──judge approved, pull request merged────▶ done
 *   queued, blocked ──cancel, pull request closed────▶ cancelled
 *   failed, cancelled ──retry────────────────────────▶ queued
 *   queued, running, failed ──a fresh run driven in
 *             a terminal (resume --fresh)────────────▶ blocked
 *
 * Merge items (sched/merge.c):
 *
 *   pending ──claim──▶ processing ──landed──▶ merged
 *      ▲                 │    │
 *      └──── retry ──────┘    └──checks, conflicts, gone──▶ failed
 *      └──────────────── merged again on request ◀──────────────┘
 *
 * A write that keeps the status moves nothing and is always allowed
 * (a lease renewed, a block reason changed, a claim taken over).
 *
 * Pure: no I/O.
 */
#ifndef BATON_CORE_QUEUE_H
#define BATON_CORE_QUEUE_H

#include <stddef.h>

struct buf;
struct err;

/* Task statuses (tasks.status). */
#define TASK_QUEUED    "queued"
#define TASK_RUNNING   "running"
#define TASK_DONE      "done"
#define TASK_FAILED    "failed"
#define TASK_BLOCKED   "blocked"
#define TASK_CANCELLED "cancelled"

/* Merge item statuses (merge_queue.status). */
#define MERGE_PENDING	 "pending"
#define MERGE_PROCESSING "processing"
#define MERGE_MERGED	 "merged"
#define MERGE_FAILED	 "failed"

/* One edge of a table, and why the code takes it (for docs and tests). */
struct queue_move {
	const char *from, *to;
	const char *why;
};

/* The tables, in from order, and their sizes; static. */
extern const struct queue_move task_moves[];
extern const size_t nr_task_moves;
extern const struct queue_move merge_moves[];
extern const size_t nr_merge_moves;

/*
 * Whether a task may go from → to: 0 when the table has the edge or the
 * status stays; else BATON_EBADSTATE with "illegal transition 'done' ->
 * 'queued' ('done' is final)" or "... (from 'failed' only: queued,
 * blocked)" in e. The caller prefixes the task.
 */
int task_move_check(const char *from, const char *to, struct err *e);
/* The same for a merge item. */
int merge_move_check(const char *from, const char *to, struct err *e);

/*
 * The statuses from which a task may be written with status to, as
 * "|to|a|b|" appended to out: to itself first, then every from of an
 * edge into to. The store's guarded update matches the stored status
 * against it inside its transaction.
 */
void task_move_froms(const char *to, struct buf *out);
void merge_move_froms(const char *to, struct buf *out);

#endif
