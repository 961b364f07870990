/*
 * The transition door as the store sees it, for store tests: r->status
 * was from, and the move to r->status comes with a table (of the run's
 * pipeline) that has that one edge. The engine's door is tested in
 * t_engine; this is the store's side of it (t_store, t_queue).
 */
#ifndef BATON_TESTS_RUN_MOVE_H
#define BATON_TESTS_RUN_MOVE_H

#include "core/pipeline.h"
#include "store/store.h"

static inline int
door_update(struct store *s, struct run *r, const char *from,
	    struct event *ev, struct err *e)
{
	struct edge edge = { .from = from, .to = r->status };
	char *statuses[2] = { (char *)from, r->status };
	struct pipeline p = { .name = r->pipeline, .statuses = statuses,
			      .nr_statuses = 2, .edges = &edge,
			      .nr_edges = 1 };
	struct run_move mv = { &p, from, r->status };

	return store_run_move(s, r, &mv, ev, e);
}

#endif
