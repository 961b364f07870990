/*
 * What the store front end (store.c) and its backends (sqlite.c, and
 * postgres.c later) share, and nothing else sees. A backend is a table of
 * operations, struct store_ops, plus a handle whose first member is
 * struct store, so that store.c can dispatch every call through
 * s->ops without knowing the backend's layout:
 *
 *	struct sqlite_store {
 *		struct store base;	<- what callers hold
 *		sqlite3 *db;		<- the backend's own state
 *		...
 *	};
 *
 * store.c has already checked the arguments every backend would check
 * (NULL pointers, a run without a status, a flag that is not a request
 * flag) before an operation runs, and has decided whether this write
 * must fail under fault injection.
 */
#ifndef BATON_STORE_STORE_INT_H
#define BATON_STORE_STORE_INT_H

#include <stdint.h>

#include "store/store.h"

struct err;
struct event;
struct run;

/* Bumped whenever struct store_ops changes shape. */
#define STORE_OPS_VERSION 1

/*
 * A backend. Each operation has the contract of the store_* function of
 * the same name in store.h; open receives the spec with its scheme
 * already resolved (a file path for SQLite, the whole URL for
 * PostgreSQL), applies pending migrations, and returns a handle whose
 * base.ops points back at this table.
 */
struct store_ops {
	int version; /* STORE_OPS_VERSION */
	const char *name;

	int (*open)(const char *target, struct store **out, struct err *e);
	void (*close)(struct store *s);

	int (*run_create)(struct store *s, struct run *r, struct err *e);
	int (*run_get)(struct store *s, const char *ref, struct run *out,
		       struct err *e);
	int (*run_update)(struct store *s, struct run *r, struct event *ev,
			  struct err *e);
	int (*run_request)(struct store *s, const char *run_id,
			   const char *flag, int value, struct event *ev,
			   struct err *e);
	int (*event_add)(struct store *s, struct event *ev, struct err *e);
	int (*run_list)(struct store *s, const struct store_run_filter *f,
			store_run_cb *cb, void *arg, struct err *e);
	int (*event_list)(struct store *s, const char *run_id,
			  int64_t after_seq, const char *type,
			  store_event_cb *cb, void *arg, struct err *e);
	int (*output_add)(struct store *s, struct store_output *o,
			  struct err *e);
	int (*output_list)(struct store *s, const char *run_id,
			   store_output_cb *cb, void *arg, struct err *e);
	int (*schema_version)(struct store *s, struct err *e);
};

/* The part of every backend handle that store.c reads and writes. */
struct store {
	const struct store_ops *ops;
	/*
	 * Set by store.c before a write operation: nonzero means the
	 * backend must do the transaction's statements and then fail with
	 * store__fault() instead of committing (BATON_FAULT_STORE).
	 */
	int fault;
};

extern const struct store_ops store_sqlite_ops;

/*
 * Fills the error of an injected fault ("cannot WHAT: injected fault")
 * and returns BATON_ESTORE. what is what the transaction was doing.
 */
int store__fault(struct err *e, const char *what);

/*
 * Whether ref (a full id, "r7-add-a" or "7") names the run with this
 * id, given that the seq it names already matched: a ref longer than
 * "rN" must also be a prefix of the id.
 */
int store__ref_matches(const char *ref, const char *id);

/*
 * The migration number of an embedded file named "NNN-anything.sql"
 * (NNN: one or more digits, > 0), or 0 if name is not a migration.
 */
int store__migration_number(const char *name);

#endif
