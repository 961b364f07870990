/*
 * What the store front end (store.c, records.c) and its backends
 * (sqlite.c with sqlite_queue.c, postgres.c with postgres_queue.c)
 * share, and nothing else sees. A backend is a table of
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
 * must fail under fault injection. The fence (store_fence) is recorded
 * in struct store; each backend checks it inside its write transactions.
 */
#ifndef BATON_STORE_STORE_INT_H
#define BATON_STORE_STORE_INT_H

#include <stdint.h>

#include "store/store.h"

struct err;
struct json_t;
struct event;
struct merge_item;
struct run;
struct store_key;
struct task;
struct worker_rec;

/* Bumped whenever struct store_ops changes shape. */
#define STORE_OPS_VERSION 6

/*
 * The fields of struct task by kind, for the code that copies, frees,
 * binds and reads them (records.c and each backend): one list, so a
 * field added to the struct cannot be forgotten by one of them. The
 * strings are all owned; the "mutable" ones are what an update writes.
 * id, created_at, updated_at and version are set by the store, and the
 * dependencies live in a table of their own.
 */
#define TASK_STRINGS(X)                                                        \
	X(title) X(body) X(kind) X(pipeline) X(status) X(block_reason)         \
	X(reason) X(area) X(allowed_paths) X(verify) X(base_ref) X(origin)     \
	X(run_id) X(failure_sig) X(lease_holder) X(judged_by)
#define TASK_INTS_MUTABLE(X)                                                   \
	X(priority) X(depth) X(attempts) X(max_attempts) X(not_before)         \
	X(failure_count) X(lease_token) X(lease_expires_at) X(judged_at)       \
	X(judgement_version) X(started_at) X(ended_at)
/* Ids of other rows: 0 in the struct is NULL in the database. */
#define TASK_IDS_MUTABLE(X) X(parent_id) X(plan_id)

/*
 * The columns of struct run. The mutable ones are written by every
 * update; the requests only by store_run_request; the others (seq, id,
 * task, created_at, updated_at, version) are set by the store. These
 * lists generate the SQL and the code that binds and reads it, so the
 * three cannot drift apart.
 */
#define RUN_TEXT_MUTABLE(X)                                                    \
	X(pipeline) X(status) X(stage) X(phase) X(paused_at_status)            \
	X(gate_status) X(gate_back) X(reason) X(worktree) X(branch)            \
	X(base_ref) X(base_commit) X(checkpoint) X(config_hash)                \
	X(config_snapshot) X(outcome) X(progress)
#define RUN_INT_MUTABLE(X)                                                     \
	X(review_loops) X(max_review_loops) X(attempt) X(agent_pid)            \
	X(steer_seq) X(tokens_in) X(tokens_out) X(active_ms) X(started_at)     \
	X(phase_started_at) X(ended_at) X(task_id)
/*
 * Written at creation and by store_run_request only, never by an update:
 * a request from another process must survive the driver's next write.
 */
#define RUN_REQUESTS(X) X(pause_requested) X(abort_requested)

/* The fields of struct merge_item, in the same spirit (run_id is fixed). */
#define MERGE_STRINGS_MUTABLE(X)                                               \
	X(branch) X(base_ref) X(status) X(claimed_by) X(merged_commit)         \
	X(reason)
#define MERGE_STRINGS(X) X(run_id) MERGE_STRINGS_MUTABLE(X)
#define MERGE_INTS_MUTABLE(X) X(attempts) X(not_before) X(claim_expires_at)
#define MERGE_IDS_MUTABLE(X) X(task_id)

/*
 * The fields of struct forge_link that store_forge_link_put writes
 * (task_id is the key; created_at, updated_at and version are set by
 * the store). The numbers are 0 in the struct for NULL in the database:
 * the unique keys on (repo, issue_number) and (repo, pr_number) must
 * not make two tasks without an issue, or without a PR, collide.
 */
#define FORGE_LINK_STRINGS(X)                                                  \
	X(repo) X(issue_url) X(pr_url) X(pr_branch) X(pr_head_sha)             \
	X(pr_state) X(checks) X(review) X(reacted) X(commented)
#define FORGE_LINK_NUMBERS(X) X(issue_number) X(pr_number)
#define FORGE_LINK_INTS(X) X(reaction_rounds)
/* The counters of struct forge_stats, one column each (forge_stats). */
#define FORGE_STATS(X)                                                         \
	X(calls) X(not_modified) X(rate_waits) X(rate_wait_seconds) X(syncs)   \
	X(webhooks)

/*
 * The status guard of the versioned updates (run_update, task_update,
 * merge_update): froms is "|a|b|", the statuses the stored row may have
 * for the write to go through (store.c builds it from the transition
 * tables: the run's move, core/queue.h). The backend adds it to the
 * UPDATE's WHERE; when no row changed although the version is the one
 * read, the guard refused and the backend returns STORE_EREFUSED, which
 * store.c turns into the message that says why. It never leaves store.c.
 */
#define STORE_EREFUSED BATON_EBADSTATE

/*
 * A backend. Each operation has the contract of the store_* function of
 * the same name in store.h (the updates take the guard above too);
 * open receives the spec with its scheme already resolved (a file path
 * for SQLite, the whole URL for PostgreSQL), applies pending
 * migrations, and returns a handle whose base.ops points back at this
 * table.
 */
struct store_ops {
	int version; /* STORE_OPS_VERSION */
	const char *name;

	int (*open)(const char *target, struct store **out, struct err *e);
	void (*close)(struct store *s);

	int (*run_create)(struct store *s, struct run *r, struct err *e);
	int (*run_get)(struct store *s, const char *ref, struct run *out,
		       struct err *e);
	int (*run_update)(struct store *s, struct run *r, const char *froms,
			  struct event *ev, struct err *e);
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

	/* 1 added; 0 k's key was claimed before (k only); or < 0 */
	int (*task_add)(struct store *s, struct task *t, struct event *ev,
			struct store_key *k, struct err *e);
	int (*task_get)(struct store *s, int64_t id, struct task *out,
			struct err *e);
	int (*task_update)(struct store *s, struct task *t, const char *froms,
			   struct event *ev, struct err *e);
	int (*task_list)(struct store *s, const struct store_task_filter *f,
			 store_task_cb *cb, void *arg, struct err *e);
	int (*task_counts)(struct store *s, const char *const *statuses,
			   int64_t *counts, size_t n, struct err *e);
	int (*task_claim)(struct store *s, const char *holder,
			  int64_t lease_ms, struct task *out, struct err *e);
	/* NULL: task_update then task_claim (store_task_settle_claim) */
	int (*task_settle_claim)(struct store *s, struct task *t,
				 const char *froms, struct event *ev,
				 const char *holder, int64_t lease_ms,
				 struct task *next, struct err *e);
	int (*task_claim_batch)(struct store *s, const char *holder,
				int64_t lease_ms, size_t max,
				struct task *out, size_t *n, struct err *e);
	/*
	 * The settles of v whose rc is 0 (froms[i] their statuses), in
	 * one transaction; sets each v[i].rc (STORE_EREFUSED: the row is
	 * as read but refused the move).
	 */
	int (*task_settle_batch)(struct store *s, struct store_settle *v,
				 const struct buf *froms, size_t n,
				 struct err *e);
	/*
	 * task_settle_batch, then up to max claims for holder in the same
	 * transaction; *got of them in out. NULL: task_settle_batch then
	 * task_claim_batch (store_task_settle_claim_batch).
	 */
	int (*task_settle_claim_batch)(struct store *s,
				       struct store_settle *v,
				       const struct buf *froms, size_t n,
				       const char *holder, int64_t lease_ms,
				       size_t max, struct task *out,
				       size_t *got, struct err *e);
	int (*task_renew)(struct store *s, int64_t id, int64_t token,
			  int64_t lease_ms, struct err *e);
	int (*task_next_due)(struct store *s, int64_t *out, struct err *e);
	int (*forge_delivery_seen)(struct store *s, const char *delivery_id,
				   const char *event, struct err *e);
	int (*idem_claim)(struct store *s, const char *key, const char *sha,
			  int64_t *task_id, char sha_out[65], struct err *e);
	int (*idem_bind)(struct store *s, const char *key, int64_t task_id,
			 struct err *e);
	int (*chat_create)(struct store *s, const char *phase,
			   int64_t *id_out, struct err *e);
	int (*chat_get)(struct store *s, int64_t id, struct chat_conv *out,
			struct err *e);
	int (*chat_add)(struct store *s, int64_t id, const char *role,
			const char *kind, const char *content,
			int64_t *msg_id, struct err *e);
	int (*chat_update)(struct store *s, int64_t id, const char *from,
			   const struct chat_conv *set, struct err *e);
	int (*chat_list)(struct store *s, const char *phase, int64_t **ids,
			 size_t *nr, struct err *e);
	int (*memory_put)(struct store *s, const char *id, const char *run_id,
			  const char *kind, const char *body, struct err *e);
	int (*memory_forget)(struct store *s, const char *id, struct err *e);
	int (*memory_list)(struct store *s, struct json_t **out, struct err *e);
	int (*token_add)(struct store *s, const char *name, const char *role,
			 const char *sha, struct err *e);
	int (*token_find)(struct store *s, const char *sha,
			  struct api_token *out, struct err *e);
	int (*token_list)(struct store *s, store_token_cb *cb, void *arg,
			  struct err *e);
	int (*token_revoke)(struct store *s, const char *name, struct err *e);
	int (*token_used)(struct store *s, const char *name, int64_t now,
			  struct err *e);
	int (*forge_intake)(struct store *s, struct task *t,
			    struct forge_link *l, struct event *ev,
			    struct err *e);
	int (*forge_link_get)(struct store *s, int64_t task_id,
			      struct forge_link *out, struct err *e);
	int (*forge_link_put)(struct store *s, struct forge_link *l,
			      struct err *e);
	int (*forge_links)(struct store *s, const char *repo,
			   store_forge_link_cb *cb, void *arg, struct err *e);
	int (*forge_cursor_get)(struct store *s, const char *url, char **etag,
				char **cursor, struct err *e);
	int (*forge_cursor_set)(struct store *s, const char *url,
				const char *etag, const char *cursor,
				struct err *e);
	int (*forge_stats_add)(struct store *s, const struct forge_stats *d,
			       struct err *e);
	int (*forge_stats_get)(struct store *s, struct forge_stats *out,
			       struct err *e);
	int (*task_events)(struct store *s, int64_t task_id,
			   int64_t after_seq, store_event_cb *cb, void *arg,
			   struct err *e);

	int (*worker_beat)(struct store *s, const struct worker_rec *w,
			   struct err *e);
	int (*worker_stop)(struct store *s, const char *id, struct err *e);
	int (*worker_list)(struct store *s, store_worker_cb *cb, void *arg,
			   struct err *e);

	int (*merge_add)(struct store *s, struct merge_item *m,
			 struct event *ev, struct err *e);
	int (*merge_get)(struct store *s, int64_t id, const char *run_id,
			 struct merge_item *out, struct err *e);
	int (*merge_update)(struct store *s, struct merge_item *m,
			    const char *froms, struct event *ev,
			    struct err *e);
	int (*merge_list)(struct store *s, const char *status,
			  store_merge_cb *cb, void *arg, struct err *e);
	int (*merge_claim)(struct store *s, const char *holder,
			   int64_t claim_ms, struct merge_item *out,
			   struct err *e);

	int (*plan_add)(struct store *s, const char *source,
			const char *content, int64_t *id, int *version,
			struct err *e);

	int (*event_last_seq)(struct store *s, int64_t *out, struct err *e);
	int (*run_stats)(struct store *s, store_run_stat_cb *cb, void *arg,
			 struct err *e);
	int (*watch_fd)(struct store *s, struct err *e);
	unsigned (*watch_drain)(struct store *s);

	int (*file_put)(struct store *s, struct store_file *f, struct err *e);
	int (*file_get)(struct store *s, const char *run_id, const char *name,
			struct store_file *out, struct err *e);
	int (*file_list)(struct store *s, const char *run_id,
			 store_file_cb *cb, void *arg, struct err *e);
	/*
	 * The database's clock minus this host's, ms, into *out; NULL for
	 * a backend whose clock is the host's.
	 */
	int (*clock_offset)(struct store *s, int64_t *out, struct err *e);
	/* baton clean --vacuum: compacts the store (store_vacuum) */
	int (*vacuum)(struct store *s, struct err *e);
};

/* The part of every backend handle that store.c reads and writes. */
struct store {
	const struct store_ops *ops;
	char *spec;	/* what store_open was given (store_spec) */
	/*
	 * Set by store.c before a write operation: nonzero means the
	 * backend must do the transaction's statements and then fail with
	 * store__fault() instead of committing (BATON_FAULT_STORE).
	 */
	int fault;
	/*
	 * The fence (store_fence): when fence_task is not 0, every fenced
	 * write checks inside its transaction that the task's lease_token
	 * is still fence_token, and fails with BATON_EFENCED if not.
	 */
	int64_t fence_task, fence_token;
	/* time_mono_ms of the last clock measurement (store_clock_sync) */
	int64_t clock_synced;
};

/*
 * The fence's verdict on have, the lease_token the fenced task has now
 * (-1: the task is gone): 0 when it is still s->fence_token, else
 * BATON_EFENCED saying why this worker may not "what".
 */
int store__fence_verdict(const struct store *s, int64_t have,
			 const char *what, struct err *e);

extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_postgres_ops;

/*
 * Fills the error of an injected fault ("cannot WHAT: injected fault")
 * and returns BATON_ESTORE. what is what the transaction was doing.
 */
int store__fault(struct err *e, const char *what);

/*
 * 0 when ev's type is in the registry of event types (core/events.h);
 * else BATON_EINVAL with "cannot WHAT: event type 'T' is not in the
 * registry (src/core/events.c)" (or "...: event has no type"). Each
 * backend's one event insert calls it first, so no event of a type
 * that is not registered is ever written.
 */
int store__event_check(const struct event *ev, const char *what,
		       struct err *e);

/*
 * Whether ref (a full id, "r7-add-a" or "7") names the run with this
 * id, given that the seq it names already matched: a ref longer than
 * "rN" must also be a prefix of the id.
 */
int store__ref_matches(const char *ref, const char *id);

/* Defaults of a task's NOT NULL columns (store.h). */
#define TASK_DEFAULT_KIND	  "code"
#define TASK_DEFAULT_ORIGIN	  "user"
#define TASK_DEFAULT_MAX_ATTEMPTS 3

/*
 * records.c: a copy of t, borrowing its strings, with the defaults put
 * in for the NOT NULL text columns the caller left empty. The defaults
 * live in the caller's d so that nothing is allocated.
 */
struct store_task_defaults {
	char kind[sizeof(TASK_DEFAULT_KIND)];
	char origin[sizeof(TASK_DEFAULT_ORIGIN)];
	char status[sizeof(TASK_QUEUED)];
};
struct task store__task_with_defaults(const struct task *t,
				      struct store_task_defaults *d);

/*
 * records.c: after the commit of a task's insert, what store_task_add
 * promises the caller: t gets id, version 1, created_at, updated_at and
 * the defaults row applied (allocated); ev (may be NULL) its task_id,
 * ts and seq.
 */
void store__task_added(struct task *t, const struct task *row, int64_t id,
		       int64_t created, int64_t now, struct event *ev,
		       int64_t ts, int64_t seq);

/*
 * records.c: the errors of store_forge_link_put, the same on every
 * backend. BATON_EEXIST: task other (0: unknown, a race the unique key
 * caught) holds l's PR (pr set) or issue already; BATON_ECONFLICT:
 * l->version is not the stored one (a link the caller thinks new,
 * version 0, that exists is stale too).
 */
int store__forge_link_taken(const struct forge_link *l, int64_t other,
			    int pr, const char *what, struct err *e);
int store__forge_link_stale(const struct forge_link *l, const char *what,
			    struct err *e);

/* records.c: the data of a "task_claimed" event, {"worker", "token",
 * "attempt"}, and of a "merge_claimed" one, {"item", "worker"}, the same
 * on every backend; the caller frees them. */
char *store__claim_data(const char *holder, int64_t token, int attempt);
char *store__merge_claim_data(int64_t id, const char *holder);

/*
 * The migration number of an embedded file named "NNN-anything.sql"
 * (NNN: one or more digits, > 0), or 0 if name is not a migration.
 */
int store__migration_number(const char *name);

#endif
