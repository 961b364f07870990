/*
 * The vocabulary of events: one registry of every event type baton
 * writes, with when it is written and what its data holds. The store
 * refuses to append an event whose type is not here (store.c and the
 * backends' one insert each), so a type cannot be written without being
 * registered, and the Events section of docs/lifecycle.md is the
 * registry printed as markdown (`baton events --types`), which
 * tests/integration/t0057-docs-events.sh checks line for line.
 *
 * Adding an event type: add its row to the table in events.c (in the
 * group it belongs to), then paste `baton events --types` into
 * docs/lifecycle.md between the markers there.
 */
#ifndef BATON_CORE_EVENTS_H
#define BATON_CORE_EVENTS_H

#include <stddef.h>

struct buf;
struct err;

/* The groups the registry is listed in, in the order the docs show them. */
enum event_group {
	EVENT_G_RUN,	  /* the run itself */
	EVENT_G_AGENT,	  /* agent calls */
	EVENT_G_STEER,	  /* people and processes steering a run */
	EVENT_G_BUGFIX,	  /* the bug-fix pipeline */
	EVENT_G_LOOP,	  /* the loop pipeline */
	EVENT_G_ASSIST,	  /* the assist pipeline */
	EVENT_G_RESEARCH, /* the research pipeline */
	EVENT_G_TASK,	  /* a task in the queue */
	EVENT_G_JUDGE,	  /* the judge */
	EVENT_G_MERGE,	  /* the merge queue */
	EVENT_G_FORGE,	  /* the forge (GitHub) */
	EVENT_G_NR
};

struct event_type {
	const char *name; /* "stage_started" */
	enum event_group group;
	const char *when; /* when it is written: one line of markdown */
	const char *data; /* its data object's fields: markdown */
};

/*
 * The registered type called name, or NULL (name NULL: NULL). The
 * returned row is static.
 */
const struct event_type *event_type_find(const char *name);
/* The i-th row of the registry (in listing order); NULL past the end. */
const struct event_type *event_type_at(size_t i);
/*
 * 0 when name is a registered type; else BATON_EINVAL with "event type
 * 'NAME' is not in the registry (src/core/events.c)" (or "event has no
 * type" for NULL) in e.
 */
int event_type_check(const char *name, struct err *e);
/* The short name of group g, e.g. "agent". Static. */
const char *event_group_name(enum event_group g);
/* The heading line of group g, e.g. "Agent calls:". Static. */
const char *event_group_title(enum event_group g);
/*
 * Appends the registry to out as markdown: per group its heading line
 * and a table `| type | written when | `data` |`, groups separated by a
 * blank line. This is what docs/lifecycle.md holds between its markers.
 */
void event_types_markdown(struct buf *out);

#endif
