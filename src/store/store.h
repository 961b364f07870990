/*
 * The persistence interface. Callers see only these functions; a backend
 * (SQLite today, PostgreSQL later) sits behind a table of operations
 * chosen by the store spec, so callers never change when a backend is
 * added (DESIGN.md section 4).
 *
 * The rule everything leans on: a run changes in ONE transaction that
 * updates the row only if its version is still the one the caller read
 * (WHERE id = ? AND version = ?) and appends the event that explains the
 * change. A writer that lost a race gets BATON_ECONFLICT and nothing was
 * written; it re-reads and decides again.
 *
 * Strings returned inside structs are owned by the caller (run_release,
 * event_release, store_output_release). Callback arguments are borrowed
 * for the duration of the call.
 */
#ifndef BATON_STORE_STORE_H
#define BATON_STORE_STORE_H

#include <stdint.h>

struct err;
struct event;
struct run;
struct store;

/*
 * Opens (creating if needed) the store named by spec: a file path or
 * "sqlite:PATH" for SQLite. Applies pending numbered migrations. On
 * SQLite: WAL, a busy timeout, foreign keys, synchronous=FULL so every
 * commit is durable. Returns 0 and *out, or an error naming the spec.
 */
int store_open(const char *spec, struct store **out, struct err *e);
/* Closes; NULL is fine. */
void store_close(struct store *s);
/* "sqlite" or "postgres". */
const char *store_backend(const struct store *s);
/* Schema version after migrations (the highest applied NNN). */
int store_schema_version(struct store *s, struct err *e);

/*
 * Inserts a new run. The store allocates r->seq, sets r->id to
 * run_id_make(seq, r->task), r->version = 1, r->created_at and
 * r->updated_at, and appends the creation event (type "transition",
 * from NULL, to r->status) in the same transaction.
 */
int store_run_create(struct store *s, struct run *r, struct err *e);

/*
 * Reads the run named by ref: its full id, "r7" or "7" (the seq). Fills
 * *out (caller releases). BATON_ENOTFOUND when nothing matches.
 */
int store_run_get(struct store *s, const char *ref, struct run *out,
		  struct err *e);

/*
 * Writes every mutable field of r (but the request flags, see
 * store_run_request) if the stored version still equals
 * r->version; then r->version is incremented and r->updated_at set. If ev
 * is not NULL it is appended in the same transaction (ev->run_id NULL
 * means r->id; ev->seq and ev->ts are filled in, nothing is allocated).
 * A version mismatch returns BATON_ECONFLICT ("run 'x' changed
 * concurrently") and writes nothing.
 */
int store_run_update(struct store *s, struct run *r, struct event *ev,
		     struct err *e);

/*
 * Sets a request flag of a run, "pause_requested" or "abort_requested",
 * to value and appends ev (may be NULL) in one transaction, WITHOUT
 * touching the version: a person's request never makes the driver's next
 * write lose its race. For the same reason store_run_update never writes
 * these two fields. BATON_ENOTFOUND for an unknown run; BATON_EINVAL for
 * another field name.
 */
int store_run_request(struct store *s, const char *run_id, const char *flag,
		      int value, struct event *ev, struct err *e);

/* Appends an event on its own; fills ev->seq and ev->ts. */
int store_event_add(struct store *s, struct event *ev, struct err *e);

/* Return nonzero from a callback to stop early; the list returns 0. */
typedef int store_run_cb(const struct run *r, void *arg);
typedef int store_event_cb(const struct event *ev, void *arg);

struct store_run_filter {
	const char *status; /* NULL: any */
	int limit;	    /* 0: no limit */
};

/* Runs, newest first. */
int store_run_list(struct store *s, const struct store_run_filter *f,
		   store_run_cb *cb, void *arg, struct err *e);

/*
 * Events with seq > after_seq in seq order: of one run (run_id) or of all
 * (NULL); of one type or of all (type NULL).
 */
int store_event_list(struct store *s, const char *run_id, int64_t after_seq,
		     const char *type, store_event_cb *cb, void *arg,
		     struct err *e);

/*
 * A stage's output, versioned: adding an output for (run, stage,
 * artifact) that exists writes version N+1 and never overwrites N.
 */
struct store_output {
	char *run_id, *stage, *artifact;
	int version;	/* set by store_output_add */
	char *decision; /* APPROVED, PASSED ...; NULL when none */
	char *content;	/* the artifact's text */
	int64_t created_at;
};

typedef int store_output_cb(const struct store_output *o, void *arg);

int store_output_add(struct store *s, struct store_output *o, struct err *e);
/* Outputs of a run in the order they were written. */
int store_output_list(struct store *s, const char *run_id, store_output_cb *cb,
		      void *arg, struct err *e);
void store_output_release(struct store_output *o);

#endif
