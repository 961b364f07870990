/*
 * The planner's task graph (`baton plan`): a requirement goes to the
 * planner role, which answers with a JSON document; this module checks
 * that document, orders its tasks so that every task comes after the
 * tasks it depends on, and puts them in the queue.
 *
 *   {"tasks": [{"key": "csv-export",          unique; letters, digits,
 *               "title": "Export as CSV",      '-', '_', '.'
 *               "body": "What to do ...",     optional
 *               "area": "src/export",         optional, repo-relative
 *               "priority": 0,                optional integer
 *               "depends_on": ["other-key"],  keys of this plan
 *               "allowed_paths": ["src/export/"],
 *               "verify": ["make test"]}],    optional
 *    "summary": "..."}                        optional
 *
 * The answer is plan.json, written by the agent in its working
 * directory, or, failing that, the last ```json block (else the last
 * bare JSON object) of its final text: plan_find_json.
 */
#ifndef BATON_SCHED_PLAN_H
#define BATON_SCHED_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "util/strvec.h"

struct buf;
struct err;
struct sched_ctx;

/* A plan holds at most this many tasks. */
#define PLAN_MAX_TASKS 200
/* A task key is at most this long. */
#define PLAN_MAX_KEY 64

struct plan_task {
	char *key, *title;
	char *body, *area;	 /* NULL when not given */
	int priority;
	struct strvec depends_on; /* keys, each once, in the order given */
	char *allowed_paths;	 /* a JSON array as text, or NULL */
	char *verify;		 /* a JSON array as text, or NULL */
};

struct plan {
	struct plan_task *tasks; /* in dependency order: a task comes after
				    every task it depends on, otherwise in
				    the order the planner gave */
	size_t nr;
	char *summary; /* NULL when not given */
};

#define PLAN_INIT { NULL, 0, NULL }

/*
 * Reads and checks the planner's JSON document text; file is what error
 * messages call it ("plan.json"). On success fills *out (caller
 * plan_release()s) with the tasks in dependency order and the area
 * normalised ("./src/x/" is "src/x"). Otherwise BATON_EINVAL and *out
 * untouched, with the first problem found in e, named by place:
 * "plan.json: tasks[2].depends_on names 'x', which is not a task of this
 * plan". Checked: valid JSON, an object with a non-empty "tasks" list of
 * at most PLAN_MAX_TASKS objects, no unknown members, every member's
 * type, keys present, well-formed and unique, titles not empty, areas
 * relative to the repository, dependencies naming tasks of the plan and
 * forming no cycle (the message lists the keys around it: "a -> b -> a").
 */
int plan_parse(const char *text, const char *file, struct plan *out,
	       struct err *e);

/*
 * The plan inside an agent's final text: the last fenced block tagged
 * json, else the last JSON object that starts a line. Returns a copy the
 * caller frees, or NULL when the text holds neither. Does not check it.
 */
char *plan_find_json(const char *text);

void plan_release(struct plan *p);

/*
 * Appends the plan as normalised JSON (the format above, every member
 * present, tasks in dependency order, indented) to out: what the store
 * and .baton/plans/ keep.
 */
void plan_to_json(const struct plan *p, struct buf *out);

/*
 * Appends a numbered table of the tasks for the terminal: #, key, title,
 * area and the keys it depends on; with ids (may be NULL) the queue id
 * of each task too. Long titles are cut to fit.
 */
void plan_render(const struct plan *p, const int64_t *ids, struct buf *out);

/*
 * Queues the tasks of p (origin "plan", plan_id, status queued) in their
 * dependency order, each with a "task_added" event, its dependencies
 * mapped to the ids of the tasks just added, allowed_paths and verify as
 * JSON array text. ids_out (room for p->nr) receives the id of each task,
 * index for index. Each task is its own transaction: when the store
 * fails part-way the tasks added so far stay queued, the error says how
 * many, and ids_out holds their ids (0 for the rest).
 */
int plan_enqueue(struct sched_ctx *x, const struct plan *p, int64_t plan_id,
		 int64_t *ids_out, struct err *e);
/* plan_enqueue with the tasks' origin ("chat", "chat-direct"). */
int plan_enqueue_as(struct sched_ctx *x, const struct plan *p,
		    int64_t plan_id, const char *origin, int64_t *ids_out,
		    struct err *e);

#endif
