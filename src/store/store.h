/*
 * The persistence interface. Callers see only these functions; a backend
 * (SQLite or PostgreSQL) sits behind a table of operations
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

#include <stddef.h>
#include <stdint.h>

#include "core/queue.h"

struct err;
struct json_t;
struct event;
struct merge_item;
struct run;
struct run_move;
struct store;
struct task;

/*
 * Opens (creating if needed) the store named by spec: a file path or
 * "sqlite:PATH" for SQLite; a "postgres://" or "postgresql://" URL for
 * PostgreSQL (a libpq connection URL, passed whole; the database must
 * exist). Applies pending numbered migrations. On SQLite: WAL, a busy
 * timeout, foreign keys, synchronous=FULL so every commit is durable.
 * Returns 0 and *out, or an error naming the spec (a URL without its
 * password).
 */
int store_open(const char *spec, struct store **out, struct err *e);
/* Closes; NULL is fine. */
void store_close(struct store *s);
/* The spec it was opened with: a second handle (a child process's) is
 * store_open(store_spec(s)). */
const char *store_spec(const struct store *s);
/* "sqlite" or "postgres". */
const char *store_backend(const struct store *s);
/* Schema version after migrations (the highest applied NNN). */
int store_schema_version(struct store *s, struct err *e);
/*
 * Compacts the store (SQLite VACUUM; PostgreSQL VACUUM of baton's
 * tables). Must not be called inside a transaction.
 */
int store_vacuum(struct store *s, struct err *e);

/*
 * Inserts a new run. The store allocates r->seq (one past the highest it
 * holds, or the r->seq given when that is higher: the first number the
 * caller knows to be free outside the store), sets r->id to
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
 *
 * The status is not this function's to change: r->status must be the
 * stored one. A different one is refused with BATON_EBADSTATE ("run
 * 'x': status 'a' -> 'b' was not handed by the transition door") and
 * nothing is written; a status moves only through store_run_move.
 */
int store_run_update(struct store *s, struct run *r, struct event *ev,
		     struct err *e);

/*
 * store_run_update for the one write that changes a run's status: the
 * transition door's (engine_transition), which hands the move it
 * checked (struct run_move, core/pipeline.h). The store checks it again
 * and refuses it with BATON_EBADSTATE, writing nothing, when mv is
 * NULL, mv->to is not r->status, mv->p is not the pipeline the run
 * names, mv->p's table has no edge mv->from -> mv->to, or (inside the
 * transaction) the stored status is not mv->from. Otherwise as
 * store_run_update.
 */
int store_run_move(struct store *s, struct run *r, const struct run_move *mv,
		   struct event *ev, struct err *e);

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
	int brief;	    /* only what a listing shows (seq, id, status,
			       outcome, stage, created_at, review_loops,
			       max_review_loops, cost_usd, pause_requested)
			       need be filled; the other fields may be NULL
			       or 0. A backend may fill them all. */
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

/*
 * A file of a run folder, kept in the store as well (table run_files),
 * so that any host can show it: artifacts, reports, agent transcripts,
 * logs. name is its path in the run folder ("calls/0007-execute-x-0.
 * stdout"), one row per name, replaced when written again. content
 * holds len bytes: the whole file, or when truncated is set only its
 * first len bytes, and then size (bytes) and sha256 (hex, 64 digits)
 * describe the whole file and host and path say where it is.
 */
struct store_file {
	char *run_id, *name;
	int64_t size;
	char *sha256;
	int truncated;
	char *content;	/* len bytes, NUL-terminated too; may hold NULs */
	size_t len;
	char *host, *path;
	int64_t updated_at; /* set by store_file_put */
};

typedef int store_file_cb(const struct store_file *f, void *arg);

/*
 * Inserts or replaces the row of (f->run_id, f->name). Not fenced: the
 * files describe what happened on a host, and a newer copy of the same
 * file always wins. BATON_ENOTFOUND when the run does not exist.
 */
int store_file_put(struct store *s, struct store_file *f, struct err *e);
/*
 * The file name of run run_id into *out (caller releases);
 * BATON_ENOTFOUND when there is none.
 */
int store_file_get(struct store *s, const char *run_id, const char *name,
		   struct store_file *out, struct err *e);
/*
 * The files of a run by name, without their content (content NULL, len
 * still the stored length). cb returning nonzero stops the walk.
 */
int store_file_list(struct store *s, const char *run_id, store_file_cb *cb,
		    void *arg, struct err *e);
void store_file_release(struct store_file *f);

/*
 * Measures the database's clock against this host's and sets the
 * process's clock offset (util/timeutil: time_now_ms then follows the
 * database). PostgreSQL only; a no-op for SQLite, whose clock is the
 * host's. At most once per STORE_CLOCK_EVERY_MS unless force is set.
 * Returns 0 or the store's error (the offset is then left as it was).
 */
#define STORE_CLOCK_EVERY_MS (30 * 1000)
int store_clock_sync(struct store *s, int force, struct err *e);

/*
 * Fencing (DESIGN.md section 4). After store_fence(s, task, token) every
 * write through this handle (run create/update/request, event, output,
 * task add/update, merge add/update, plan add) first checks, inside its
 * own transaction, that the task's lease_token still equals token; when
 * it does not (or the task is gone), the write is refused with
 * BATON_EFENCED ("the lease on task 7 was taken over") and nothing is
 * written. A worker whose lease expired and was claimed by another thus
 * cannot write, however late it wakes. store_fence(s, 0, 0) lifts the
 * fence. Not fenced: the claims (store_task_claim, store_merge_claim:
 * taking new work is how a worker gets a lease), store_task_renew (it
 * checks its own token) and the worker records, which say the process
 * is alive whatever its lease.
 *
 * The check compares tokens exactly: a holder that gives its lease up
 * itself (a task update that clears lease_token) is fenced from then on,
 * and lifts the fence before it writes again.
 */
void store_fence(struct store *s, int64_t task_id, int64_t token);

/*
 * Whether the fence still holds, for an action outside the store that
 * only the lease holder may take (pushing a run's checkpoint to the
 * shared remote): 0 when there is no fence or the task's lease_token is
 * still the fence's; BATON_EFENCED ("cannot WHAT: the lease on task 7
 * was taken over ...") when the task is gone or its lease was taken
 * over. One read.
 */
int store_fence_check(struct store *s, const char *what, struct err *e);

/* ---- tasks: the queue ------------------------------------------------ */

/*
 * Task statuses (TASK_*, tasks.status) and merge item statuses (MERGE_*)
 * come with their transition tables from core/queue.h; block reasons
 * (tasks.block_reason) follow.
 */

/* Every task status, in the order counts are shown (records.c). */
#define NR_TASK_STATUSES 6
extern const char *const task_statuses[NR_TASK_STATUSES];
/*
 * 0 when status is a task status; else BATON_EINVAL, e naming them all:
 * "unknown task status 'nope' (queued, running, done, ...)".
 */
int task_status_check(const char *status, struct err *e);

#define BLOCK_AWAITING_JUDGE	"awaiting_judge"
#define BLOCK_AWAITING_APPROVAL "awaiting_approval"
#define BLOCK_PAUSED		"paused"
#define BLOCK_QUOTA_WAIT	"quota_wait"
#define BLOCK_NEEDS_REWORK	"needs_rework"
#define BLOCK_DEPENDENCY	"dependency_failed"
#define BLOCK_ISSUE_LINKING	"issue_linking" /* forge: the issue link is being recorded */
#define BLOCK_PULL_REQUEST	"pull_request"  /* forge: waits on its open PR (CI, review, merge) */

struct task {
	int64_t id;	    /* allocated by the store; shown as "t7" or 7 */
	char *title, *body; /* body: NULL or longer text for the agent */
	char *kind;	    /* "code" (default) */
	char *pipeline;	    /* NULL: workflow.pipeline */
	char *status;	    /* TASK_* */
	char *block_reason; /* BLOCK_* when blocked, else NULL */
	char *reason;	    /* a sentence: why blocked / failed / retried */
	int priority;	    /* higher runs first; default 0 */
	char *area;	    /* target area (a path); NULL: none */
	char *allowed_paths; /* JSON array of globs, or NULL */
	char *verify;	     /* JSON array of shell commands, or NULL */
	char *base_ref;	     /* branch or commit the run starts from */
	char *origin;	     /* user, plan, rework, conflict */
	int64_t parent_id;   /* rework/conflict: the task it came from */
	int depth;	     /* rework depth (parent's + 1) */
	int64_t plan_id;     /* the plan that proposed it, or 0 */
	int attempts, max_attempts;
	char *run_id;	     /* the current (latest) run, or NULL */
	int64_t not_before;  /* not claimable before (cooldown, quota) */
	char *failure_sig;   /* signature of the last failure */
	int failure_count;   /* how many times in a row it was that one */
	char *lease_holder;  /* worker id while running */
	int64_t lease_token, lease_expires_at;
	int64_t judged_at;
	int judgement_version;
	char *judged_by;
	int64_t created_at, updated_at, started_at, ended_at;
	int64_t version;
	/* dependencies (ids); filled by get and list */
	int64_t *deps;
	size_t nr_deps;
};

/* Frees the strings and deps of t, which may be NULL. */
void task_release(struct task *t);
/* Deep copy of src into dst (dst is overwritten, not released). */
void task_copy(struct task *dst, const struct task *src);

/*
 * Inserts t (title required; NULL status is queued, NULL kind "code",
 * NULL origin "user", max_attempts 0 is 3; created_at 0 is now) with
 * its dependencies, and appends ev (may be NULL; type "task_added" by
 * convention) carrying the new id in ev->task_id, in one transaction.
 * On success fills t->id, version, created_at, updated_at and the
 * defaults it applied (the strings allocated), and ev->task_id, seq and
 * ts. A dependency or parent_id that does not exist is BATON_ENOTFOUND
 * naming it ("task 9 (a dependency) does not exist"); nothing is
 * written. t->deps / t->nr_deps are the dependencies to record (a
 * repeated one once).
 */
int store_task_add(struct store *s, struct task *t, struct event *ev,
		   struct err *e);

/*
 * An idempotency key for store_task_add_keyed: key and sha (the
 * payload's SHA-256, 64 hex digits) in; task_id and sha_was out.
 */
struct store_key {
	const char *key;
	const char *sha;
	int64_t task_id;  /* the task an earlier claim made; 0: none */
	char sha_was[65]; /* the payload hash it was claimed with */
};

/*
 * store_task_add under an idempotency key (docs/api.md "Idempotency"):
 * the key, claimed with k->sha and bound to the new task, the task and
 * ev in one transaction. 1 when added; 0 when k->key was claimed before,
 * by this or any other process on the store: nothing is written, and
 * k->task_id and k->sha_was say what the claim holds. An add racing
 * another of the same key waits for the other's commit, so it reads the
 * task made; one that fails gives nothing to claim. Or an error.
 */
int store_task_add_keyed(struct store *s, struct task *t, struct event *ev,
			 struct store_key *k, struct err *e);

/* Reads task id (deps included). BATON_ENOTFOUND when there is none. */
int store_task_get(struct store *s, int64_t id, struct task *out,
		   struct err *e);

/*
 * Writes every mutable field of t (everything but id, created_at and the
 * dependencies) if the stored version is still t->version, bumps it, sets
 * updated_at, and appends ev (may be NULL; its task_id is set to t->id,
 * its seq and ts filled) in the same transaction. Stale version:
 * BATON_ECONFLICT; no such task: BATON_ENOTFOUND. Under a fence
 * (store_fence) a stale token is BATON_EFENCED. A change of status that
 * the task table (core/queue.h) does not have is BATON_EBADSTATE ("task
 * 7: illegal transition 'done' -> 'queued' ('done' is final)"), checked
 * against the stored status inside the transaction; nothing is written.
 */
int store_task_update(struct store *s, struct task *t, struct event *ev,
		      struct err *e);

struct store_task_filter {
	const char *status; /* NULL: any */
	int64_t parent_id;  /* 0: any */
	int limit;	    /* 0: no limit */
	int newest_first;   /* descending ids instead of ascending */
	int64_t before_id;  /* newest_first: only ids below it; 0: all */
};

typedef int store_task_cb(const struct task *t, void *arg);

/* Tasks in id order (deps included); callbacks may write. */
int store_task_list(struct store *s, const struct store_task_filter *f,
		    store_task_cb *cb, void *arg, struct err *e);

/* Number of tasks per status: fills counts in the order of statuses. */
int store_task_counts(struct store *s, const char *const *statuses,
		      int64_t *counts, size_t n, struct err *e);

/*
 * The claim, in ONE transaction: picks the first task, by priority (high
 * first) then id, that is queued, whose not_before has passed, whose
 * dependencies are all done, and whose area overlaps no running task's
 * area (one is the other or a parent directory of it: "src/export"
 * overlaps "src" and "src/export/csv", not "src/exporter"; a NULL area
 * overlaps nothing); moves it to running with attempts + 1, started_at,
 * lease_holder = holder, lease_expires_at = now + lease_ms (> 0) and a
 * fresh lease_token, larger than any token drawn before; appends a
 * "task_claimed" event {worker, token, attempt}. Fills *out (caller
 * releases). BATON_ENOTFOUND ("nothing to claim") when nothing is
 * claimable (not an error to report). Not fenced.
 */
int store_task_claim(struct store *s, const char *holder, int64_t lease_ms,
		     struct task *out, struct err *e);

/*
 * store_task_update of t (fenced, as that is) and then store_task_claim
 * for holder: a worker that settles a task and looks for its next.
 * PostgreSQL does both in ONE transaction (one commit a task instead of
 * two); SQLite in two, the settle first. Returns the settle's failure
 * (then nothing was claimed), or 0 once the settle committed, with
 * *next filled, or with next->id 0 when nothing was claimed (nothing
 * claimable, or a claim that failed after the settle: the caller's next
 * store_task_claim reports what is wrong). t and ev change as with
 * store_task_update. The fence stays as it was: the caller fences the
 * new lease itself.
 */
int store_task_settle_claim(struct store *s, struct task *t,
			    struct event *ev, const char *holder,
			    int64_t lease_ms, struct task *next,
			    struct err *e);

/*
 * The batched queue: a worker that takes many short tasks at once
 * (graphile-worker's local queue) claims up to max of them in ONE
 * transaction and settles many in ONE transaction, with the guarantees
 * of one at a time (exactly once, fenced, every event on record).
 *
 * store_task_claim_batch claims as store_task_claim does, up to max
 * times in one transaction: out[0..*n) in claim order, each with its
 * own token and task_claimed event, no two with overlapping areas.
 * BATON_ENOTFOUND (and *n 0) when nothing is claimable. Not fenced.
 */
int store_task_claim_batch(struct store *s, const char *holder,
			   int64_t lease_ms, size_t max, struct task *out,
			   size_t *n, struct err *e);

/*
 * One settle of a batch: the task's new row (version as read), its
 * event (or NULL), and the lease token it was claimed with, which
 * fences it. rc is set by store_task_settle_batch: 0 when the row was
 * written (task and ev change as with store_task_update), else why not
 * (BATON_EFENCED: the lease moved on; BATON_ECONFLICT: the row changed;
 * BATON_ENOTFOUND; BATON_EINVAL: a move the table refuses), with
 * nothing written for it.
 */
struct store_settle {
	struct task *task;
	struct event *ev;
	int64_t token;
	int rc;
};

/*
 * Settles v[0..n) in ONE transaction: each row guarded by its version,
 * status and token, each with its event. A settle that is refused is
 * skipped (its rc says why) and the others commit. Returns 0 once the
 * transaction committed, or a negative code when nothing was written.
 * Uses no store_fence: the tokens are the fences.
 */
int store_task_settle_batch(struct store *s, struct store_settle *v, size_t n,
			    struct err *e);

/*
 * A host's round (one claimer feeding its workers): store_task_settle_batch
 * of v[0..n) and then store_task_claim_batch of up to max tasks for
 * holder. PostgreSQL does both in ONE transaction (one commit for the
 * round), SQLite in two, the settles first. n or max may be 0. Returns
 * a negative code when the settles were not written (and nothing was
 * claimed), or 0 once they committed, each v[i].rc as the settles of
 * store_task_settle_batch set it, with out[0..*got) claimed (*got 0
 * when nothing was claimable, or when a claim failed after the
 * settles: the next round reports what is wrong).
 */
int store_task_settle_claim_batch(struct store *s, struct store_settle *v,
				  size_t n, const char *holder,
				  int64_t lease_ms, size_t max,
				  struct task *out, size_t *got,
				  struct err *e);

/*
 * The claim's area rule: whether areas a and b overlap, one being the
 * other or a directory of it ("src/export" overlaps "src" and
 * "src/export/csv", not "src/exporter"); NULL overlaps nothing. Each
 * backend's claim SQL says the same (t_queue checks that they agree);
 * this is the rule for code that counts what a claim would take
 * (baton doctor).
 */
int store_areas_overlap(const char *a, const char *b);

/*
 * Heartbeat: extends the lease of task id to now + lease_ms if token is
 * still its lease_token and it is running; else BATON_EFENCED. Writes no
 * event and does not bump the version.
 */
int store_task_renew(struct store *s, int64_t id, int64_t token,
		     int64_t lease_ms, struct err *e);

/*
 * The earliest time something not claimable now becomes claimable: the
 * smallest not_before in the future of a queued task or of an unclaimed
 * task awaiting its judge (a judge that could not decide gave it back
 * with a cooldown), the smallest lease_expires_at of a running task, or
 * 0 when there is none. The supervisor's sweep (sched/sweep.c) keeps
 * the same account to sleep until then and for serve --exit-when-idle.
 */
int store_task_next_due(struct store *s, int64_t *out, struct err *e);

/*
 * The forge (issue 19): records that the webhook delivery delivery_id
 * (GitHub's X-GitHub-Delivery) of type event (NULL: unknown) arrived.
 * Returns 1 the first time, 0 for a redelivery already recorded (by
 * this or any other process on the store), or an error.
 */
int store_forge_delivery_seen(struct store *s, const char *delivery_id,
			      const char *event, struct err *e);

/*
 * Idempotency keys of task submissions (issue 23, table
 * idempotency_keys; docs/api.md "Idempotency"). store_idem_claim claims
 * key for a submission whose payload hashes to sha (64 hex digits):
 * 1 when this call claimed it (the caller makes the task, then binds
 * the key to it), 0 when the key was claimed before, by this or any
 * other process on the store, with *task_id its task (0 while its
 * claimer has not made it yet) and sha_out the payload hash it was
 * claimed with; or an error.
 */
int store_idem_claim(struct store *s, const char *key, const char *sha,
		     int64_t *task_id, char sha_out[65], struct err *e);
/* Binds a claimed key to its task; task_id 0 gives the key up. */
int store_idem_bind(struct store *s, const char *key, int64_t task_id,
		    struct err *e);

/*
 * Chat intake (issue 23, tables chat_conversations and chat_messages;
 * docs/chat.md). A conversation's phase is one of greeting,
 * requirement_gathering, plan_proposal, execution, monitoring; see
 * sched/chat.h for what moves it.
 */
struct chat_msg {
	int64_t id;
	char *role;    /* user, assistant, system */
	char *kind;    /* text, mode_selection, progress, error */
	char *content;
	int64_t created_at;
};

struct chat_conv {
	int64_t id;
	char *phase;
	char *mode;  /* direct, local, github; NULL until execution */
	char *plan;  /* the proposed plan as plan.json text, or NULL */
	char *tasks; /* {"<task id>": "<status last reported>"}, or NULL */
	int64_t created_at, updated_at;
	struct chat_msg *msgs; /* store_chat_get: oldest first */
	size_t nr_msgs;
};

/* Frees what c holds (c itself is the caller's); NULL is fine. */
void chat_conv_release(struct chat_conv *c);

/* A new conversation in phase; its id in *id_out. */
int store_chat_create(struct store *s, const char *phase, int64_t *id_out,
		      struct err *e);
/*
 * Conversation id with its messages into *out (caller releases);
 * BATON_ENOTFOUND when there is none.
 */
int store_chat_get(struct store *s, int64_t id, struct chat_conv *out,
		   struct err *e);
/*
 * Appends a message to conversation id (BATON_ENOTFOUND when there is
 * none); its id in *msg_id (may be NULL).
 */
int store_chat_add(struct store *s, int64_t id, const char *role,
		   const char *kind, const char *content, int64_t *msg_id,
		   struct err *e);
/*
 * Sets the members of set that are not NULL (phase, mode, plan, tasks)
 * on conversation id, only while its phase is from (NULL: any):
 * BATON_ECONFLICT when it is another, so of two starts one wins;
 * BATON_ENOTFOUND when there is no such conversation.
 */
int store_chat_update(struct store *s, int64_t id, const char *from,
		      const struct chat_conv *set, struct err *e);
/*
 * The ids of the conversations in phase, oldest first, into *ids (caller
 * frees) and *nr.
 */
int store_chat_list(struct store *s, const char *phase, int64_t **ids,
		    size_t *nr, struct err *e);

/*
 * The repository's memory (table memory; docs/operations.md "Memory"):
 * entries {"id", "run", "kind": "outcome" | "note", "body",
 * "created_at", "updated_at"} (ms). store_memory_put inserts or replaces
 * entry id (created_at is kept on a replace); store_memory_forget
 * deletes it: 1 when it was there, 0 when not; store_memory_list gives
 * every entry, oldest first, as a new JSON array.
 */
int store_memory_put(struct store *s, const char *id, const char *run_id,
		     const char *kind, const char *body, struct err *e);
int store_memory_forget(struct store *s, const char *id, struct err *e);
int store_memory_list(struct store *s, struct json_t **out, struct err *e);

/*
 * Named API tokens (issue 24 part 5, table api_tokens; docs/security.md
 * "Users and roles"). The secret itself is never stored, only its
 * SHA-256 (sha, 64 hex digits). Times are ms since the epoch, 0 for
 * "never" (last_used_at, revoked_at).
 */
struct api_token {
	char *name;
	char *role; /* "viewer", "operator", "admin" */
	int64_t created_at, last_used_at, revoked_at;
};

void api_token_release(struct api_token *t);

/* Adds a token: BATON_EEXIST when the name (or the hash) is taken. */
int store_token_add(struct store *s, const char *name, const char *role,
		    const char *sha, struct err *e);
/*
 * The token whose secret hashes to sha into *out (revoked ones too, with
 * revoked_at set): 1 when found, 0 when none, or an error.
 */
int store_token_find(struct store *s, const char *sha, struct api_token *out,
		     struct err *e);
typedef int store_token_cb(const struct api_token *t, void *arg);
/* Every token, by name; cb returning non-zero stops with that value. */
int store_token_list(struct store *s, store_token_cb *cb, void *arg,
		     struct err *e);
/* Revokes name: 1 when revoked now, 0 when already revoked; or
 * BATON_ENOTFOUND. */
int store_token_revoke(struct store *s, const char *name, struct err *e);
/*
 * Records a use of name at now, unless one was recorded within the last
 * minute (the write is skipped then): keeps the write cheap.
 */
int store_token_used(struct store *s, const char *name, int64_t now,
		     struct err *e);

/*
 * A task's place on the forge (table forge_links): the issue it came
 * from and the pull request that carries it. Numbers are 0 when absent.
 * version guards updates as a task's does.
 */
struct forge_link {
	int64_t task_id;
	char *repo;		/* owner/name */
	int64_t issue_number;	/* 0: the task came from no issue */
	char *issue_url;
	int64_t pr_number;	/* 0: no pull request yet */
	char *pr_url;
	char *pr_branch;	/* the PR's head branch on forge.remote */
	char *pr_head_sha;	/* the last head baton pushed or saw */
	char *pr_state;		/* open | closed | merged, or NULL */
	char *checks;		/* success | failure | pending, or NULL */
	char *review;		/* approved | changes_requested, or NULL */
	char *reacted;		/* what the last reaction answered (a
				   signature), so one failure makes one round */
	char *commented;	/* the last run comment: "started:RUN" or
				   "ended:RUN" */
	int reaction_rounds;	/* fix rounds made from CI and reviews */
	int64_t created_at, updated_at;
	int64_t version;
};

void forge_link_release(struct forge_link *l);

/*
 * Intake of one issue, exactly once whatever the number of syncs and
 * hosts: in one transaction, inserts t (as store_task_add does, with ev)
 * and the link l (l->repo and l->issue_number set; task_id is filled),
 * unless (repo, issue_number) is linked already. Returns 1 when it made
 * the task, 0 when the issue had one (t->id is then that task's id and
 * nothing was written), or an error.
 *
 * On 1, t and ev are filled as by store_task_add, and l gets task_id,
 * version 1, created_at and updated_at. The other fields of l (a PR
 * already known, say) are written as given; a PR number another task
 * holds is BATON_EEXIST. A write counted by fault injection; fenced.
 */
int store_forge_intake(struct store *s, struct task *t,
		       struct forge_link *l, struct event *ev, struct err *e);

/* The link of task_id; BATON_ENOTFOUND when it has none. */
int store_forge_link_get(struct store *s, int64_t task_id,
			 struct forge_link *out, struct err *e);

/*
 * Inserts l (version 0) or updates it when l->version is the stored one
 * (BATON_ECONFLICT otherwise); l->version and updated_at are advanced.
 * BATON_EEXIST when another task holds its issue or PR number.
 *
 * Every field but task_id and created_at is written (issue_number and
 * pr_number 0 are "none"). Version 0 for a task that has a link already
 * is BATON_ECONFLICT too; an update of a task without a link, or an
 * insert for a task that does not exist, is BATON_ENOTFOUND. Nothing is
 * written on any error. A write counted by fault injection; fenced.
 */
int store_forge_link_put(struct store *s, struct forge_link *l,
			 struct err *e);

typedef int store_forge_link_cb(const struct forge_link *l, void *arg);
/* Every link of repo, by task id; a non-zero return from cb stops. */
int store_forge_links(struct store *s, const char *repo,
		      store_forge_link_cb *cb, void *arg, struct err *e);

/*
 * The ETag and cursor last kept for a polled URL (either may come back
 * NULL; both NULL when none; the caller frees them) and their update,
 * which replaces both (a NULL clears it). Bookkeeping: not counted by
 * fault injection.
 */
int store_forge_cursor_get(struct store *s, const char *url, char **etag,
			   char **cursor, struct err *e);
int store_forge_cursor_set(struct store *s, const char *url,
			   const char *etag, const char *cursor,
			   struct err *e);

/*
 * Counters of the forge client for /metrics, kept in the store because
 * the sync runs in its own process: adds the deltas (atomically: adds
 * from many processes all count); get reads totals (all 0 before the
 * first add). Bookkeeping: not counted by fault injection.
 */
struct forge_stats {
	int64_t calls, not_modified, rate_waits, rate_wait_seconds;
	int64_t syncs, webhooks;
};
int store_forge_stats_add(struct store *s, const struct forge_stats *d,
			  struct err *e);
int store_forge_stats_get(struct store *s, struct forge_stats *out,
			  struct err *e);

/* Events about task id (task_id set), seq > after_seq, in order. */
int store_task_events(struct store *s, int64_t task_id, int64_t after_seq,
		      store_event_cb *cb, void *arg, struct err *e);

/* ---- workers ---------------------------------------------------------- */

struct worker_rec {
	char *id, *host;
	int64_t pid, task_id;
	int64_t started_at, heartbeat_at, stopped_at;
	/* the host's clock minus the database's, ms, at the last beat
	   (set by store_worker_beat; 0 on SQLite) */
	int64_t skew_ms;
};

/*
 * Inserts or refreshes w (id required; heartbeat_at = now; started_at 0
 * is now on insert and kept on refresh; stopped_at back to 0).
 */
int store_worker_beat(struct store *s, const struct worker_rec *w,
		      struct err *e);
/* Marks a worker stopped (stopped_at = now); BATON_ENOTFOUND if unknown. */
int store_worker_stop(struct store *s, const char *id, struct err *e);
typedef int store_worker_cb(const struct worker_rec *w, void *arg);
/* Workers not stopped, by id. */
int store_worker_list(struct store *s, store_worker_cb *cb, void *arg,
		      struct err *e);

/* ---- the merge queue -------------------------------------------------- */

struct merge_item {
	int64_t id;
	char *run_id, *branch, *base_ref;
	int64_t task_id;
	char *status;	      /* MERGE_* */
	int attempts;
	int64_t not_before;
	char *claimed_by;
	int64_t claim_expires_at;
	char *merged_commit, *reason;
	int64_t created_at, updated_at, version;
};

void merge_item_release(struct merge_item *m);

/*
 * Adds m (run_id and branch required; NULL status is pending) and ev
 * (may be NULL; its run_id defaults to m->run_id) in one transaction;
 * fills id, version, created_at, updated_at (and status) on success. A
 * run already queued is BATON_EBUSY naming its item, nothing written
 * and nothing filled (store_merge_get by run_id finds the item); a run
 * that does not exist is BATON_ENOTFOUND.
 */
int store_merge_add(struct store *s, struct merge_item *m, struct event *ev,
		    struct err *e);
/* By item id, or by run id when id is 0; BATON_ENOTFOUND. */
int store_merge_get(struct store *s, int64_t id, const char *run_id,
		    struct merge_item *out, struct err *e);
/*
 * Versioned update of every mutable field, with ev; BATON_ECONFLICT. A
 * change of status that the merge item table (core/queue.h) does not
 * have is BATON_EBADSTATE ("merge item 3: illegal transition 'merged'
 * -> 'pending' ('merged' is final)"); nothing is written.
 */
int store_merge_update(struct store *s, struct merge_item *m,
		       struct event *ev, struct err *e);
typedef int store_merge_cb(const struct merge_item *m, void *arg);
/* Items of a status (NULL: all) in id order. */
int store_merge_list(struct store *s, const char *status, store_merge_cb *cb,
		     void *arg, struct err *e);
/*
 * Claims the next item to land, in one transaction: the oldest (lowest
 * id) item that is pending with its not_before passed, or processing
 * with its claim expired; moves it to processing, claimed_by = holder,
 * claim_expires_at = now + claim_ms (> 0), with a "merge_claimed" event
 * {item, worker}. Fills *out (caller releases). BATON_ENOTFOUND when
 * none is due. Not fenced.
 */
int store_merge_claim(struct store *s, const char *holder, int64_t claim_ms,
		      struct merge_item *out, struct err *e);

/* ---- plans ------------------------------------------------------------ */

/*
 * Stores content (the task graph, JSON) as the next version of source
 * (1 + the highest so far, 1 for a new source); fills *id and *version.
 */
int store_plan_add(struct store *s, const char *source, const char *content,
		   int64_t *id, int *version, struct err *e);

/* ---- what the dashboard and /metrics read ----------------------------- */

/* Runs of one status, with what they spent. */
struct store_run_stat {
	const char *status;
	int64_t runs, tokens_in, tokens_out;
	double cost_usd;
};

typedef int store_run_stat_cb(const struct store_run_stat *st, void *arg);

/* The seq of the newest event (0 when there is none). */
int store_event_last_seq(struct store *s, int64_t *out, struct err *e);

/* One callback per run status present. */
int store_run_stats(struct store *s, store_run_stat_cb *cb, void *arg,
		    struct err *e);

/*
 * A file descriptor that becomes readable when the store may have
 * changed, whoever wrote (another process, another host): the live
 * stream and the supervisor sleep on it instead of polling. SQLite
 * watches its files with inotify; PostgreSQL LISTENs on a connection of
 * its own. Returns -1 (with e set) when the backend cannot tell; the
 * caller then has to look from time to time. The fd belongs to s and
 * keeps its number for the life of s (a lost LISTEN connection is
 * replaced behind it), but while the database is unreachable it stays
 * quiet: callers that wait on it also wake from time to time and call
 * store_watch_drain, which reconnects.
 */
int store_watch_fd(struct store *s, struct err *e);

/* What store_watch_drain says changed. */
#define STORE_WATCH_EVENTS 0x1u /* events were appended */
#define STORE_WATCH_WORK   0x2u /* claimable work may have been made */
/*
 * With STORE_WATCH_WORK, how many units of work (tasks that became
 * claimable) were made, when the backend can tell: a supervisor wakes
 * that many idle workers rather than all. 0: unknown, wake them all.
 */
#define STORE_WATCH_UNITS(mask) ((mask) >> 8)

/*
 * Empties the watch fd after a wake-up and says what changed: a mask of
 * STORE_WATCH_*, and STORE_WATCH_UNITS. SQLite cannot tell one change
 * from another and says both, with no count, whenever anything was
 * written; PostgreSQL says STORE_WATCH_WORK only for commits that made
 * claimable work, with their count, and both without a count after its
 * LISTEN connection came back (what happened meanwhile is unknown).
 */
unsigned store_watch_drain(struct store *s);

#endif
