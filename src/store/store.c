/*
 * The store front end: picks a backend from the store spec, then passes
 * every call through that backend's table of operations (store_int.h).
 * What all backends have in common lives here too: argument checks
 * (among them that an event's type is in the registry, core/events.h),
 * the reading of run references, and fault injection for tests.
 *
 * Fault injection: when the environment variable BATON_FAULT_STORE is
 * N > 0, the Nth write operation of the process runs its statements and
 * then fails with BATON_ESTORE instead of committing, so tests can show
 * that nothing is ever half-applied. The write operations, counted
 * together from process start, are store_run_create, store_run_update
 * (and store_run_move), store_run_request, store_event_add, store_output_add,
 * store_task_add, store_task_update, store_task_claim,
 * store_worker_stop, store_merge_add, store_merge_update,
 * store_merge_claim, store_plan_add, store_forge_delivery_seen,
 * store_idem_claim, store_idem_bind, store_chat_create, store_chat_add,
 * store_chat_update, store_memory_put, store_memory_forget,
 * store_memory_list,
 * store_forge_intake, store_forge_link_put and store_task_add_keyed.
 * Those without a transaction to commit (the delivery, idempotency and
 * memory ones: one statement each) fail before they write. The two
 * heartbeats, store_task_renew and store_worker_beat, are not counted:
 * they run on timers (a worker's lease thread), so counting them would
 * make "the Nth write" depend on timing; they never fail by injection.
 *
 * Fencing (store_fence) is only recorded here; the backend checks it
 * inside each write transaction.
 */
#include "util/compat.h"

#include <ctype.h>
#include <stdatomic.h>

#include "core/events.h"
#include "core/pipeline.h"
#include "core/queue.h"
#include "core/run.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/*
 * Every event the backends write passes here first, in their one insert
 * each (sqlite__insert_event, pg__insert_event), and every event handed
 * to a write operation is checked here before its transaction begins:
 * an event type that is not in the registry (core/events.h) is a bug in
 * the code that writes it, refused before anything is written.
 */
int
store__event_check(const struct event *ev, const char *what, struct err *e)
{
	struct err why = ERR_INIT;

	if (!event_type_check(ev->type, &why))
		return 0;
	return err_set(e, BATON_EINVAL, "cannot %s: %s", what, why.msg);
}

/*
 * Store specs by scheme. A spec that matches no scheme is a SQLite
 * path.
 */
static const struct backend {
	const char *scheme;
	int strip; /* pass the spec without its scheme to open */
	const struct store_ops *ops;
} backends[] = {
	{ "sqlite:", 1, &store_sqlite_ops },
	{ "postgres://", 0, &store_postgres_ops },
	{ "postgresql://", 0, &store_postgres_ops },
};

/*
 * The write operations counted so far by fault injection. Atomic: a
 * worker's lease thread writes through a store handle of its own while
 * the main thread writes through another.
 */
static atomic_long fault_writes;

/*
 * Counts one write operation and says whether it is the one that
 * BATON_FAULT_STORE asks to fail. The variable is read at every write so
 * that a test can set it in the middle of a process.
 */
static int
fault_next(void)
{
	const char *v = getenv("BATON_FAULT_STORE");
	long n, count = atomic_fetch_add(&fault_writes, 1) + 1;

	if (!v || !*v)
		return 0;
	n = strtol(v, NULL, 10);
	return n > 0 && n == count;
}

int
store__fault(struct err *e, const char *what)
{
	return err_set(e, BATON_ESTORE,
		       "cannot %s: injected fault (BATON_FAULT_STORE)", what);
}

/*
 * The injected fault of an operation with no transaction of its own to
 * commit (one statement, or a read): it fails before it writes, which
 * is the same as failing instead of committing.
 */
static int
fault_first(struct store *s, const char *what, struct err *e)
{
	s->fault = 0;
	return fault_next() ? store__fault(e, what) : 0;
}

int
store__ref_matches(const char *ref, const char *id)
{
	const char *p = ref;

	if (*p == 'r')
		p++;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '\0')
		return 1; /* "7" or "r7": the seq alone decides */
	return !strncmp(id, ref, strlen(ref));
}

int
store__migration_number(const char *name)
{
	const char *p = name;
	size_t len = strlen(name);
	long n = 0;

	if (len < 5 || strcmp(name + len - 4, ".sql"))
		return 0;
	for (; isdigit((unsigned char)*p); p++) {
		if (n > 100000)
			return 0;
		n = n * 10 + (*p - '0');
	}
	if (p == name || *p != '-')
		return 0;
	return (int)n;
}

/*
 * Resolves spec to a backend and opens it. "sqlite:PATH" and a plain
 * path mean SQLite; a "postgres://" or "postgresql://" URL means
 * PostgreSQL, and the whole URL goes to libpq as its connection string.
 * Any other "scheme://" is BATON_EINVAL.
 */
int
store_open(const char *spec, struct store **out, struct err *e)
{
	const struct backend *b = NULL;
	const char *target = spec;
	struct store *s = NULL;
	size_t i;
	int rc;

	if (!spec || !*spec)
		return err_set(e, BATON_EINVAL, "cannot open store: no spec");
	for (i = 0; i < ARRAY_SIZE(backends); i++) {
		size_t n = strlen(backends[i].scheme);

		if (!strncmp(spec, backends[i].scheme, n)) {
			b = &backends[i];
			if (b->strip)
				target = spec + n;
			break;
		}
	}
	if (!b && strstr(spec, "://"))
		return err_set(e, BATON_EINVAL,
			       "cannot open store '%s': unknown kind of store",
			       spec);
	if (!b)
		b = &backends[0];
	if (!*target)
		return err_set(e, BATON_EINVAL,
			       "cannot open store '%s': no path", spec);
	if (b->ops->version != STORE_OPS_VERSION)
		BUG("store backend '%s' has ops version %d, not %d",
		    b->ops->name, b->ops->version, STORE_OPS_VERSION);
	rc = b->ops->open(target, &s, e);
	if (rc < 0)
		return rc;
	s->ops = b->ops;
	s->spec = xstrdup(spec);
	s->fault = 0;
	s->fence_task = 0;
	s->fence_token = 0;
	s->clock_synced = 0;
	/* from the first lease on, time is the database's */
	rc = store_clock_sync(s, 1, e);
	if (rc < 0) {
		store_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void
store_close(struct store *s)
{
	if (!s)
		return;
	free(s->spec);
	s->ops->close(s);
}

const char *
store_spec(const struct store *s)
{
	return s->spec;
}

const char *
store_backend(const struct store *s)
{
	return s->ops->name;
}

int
store_vacuum(struct store *s, struct err *e)
{
	return s->ops->vacuum(s, e);
}

int
store_schema_version(struct store *s, struct err *e)
{
	return s->ops->schema_version(s, e);
}

int
store_run_create(struct store *s, struct run *r, struct err *e)
{
	if (!r->task)
		return err_set(e, BATON_EINVAL, "cannot create run: no task");
	if (!r->status)
		return err_set(e, BATON_EINVAL,
			       "cannot create run: no status");
	s->fault = fault_next();
	return s->ops->run_create(s, r, e);
}

int
store_run_get(struct store *s, const char *ref, struct run *out,
	      struct err *e)
{
	if (!ref || !*ref)
		return err_set(e, BATON_ENOTFOUND, "no run ''");
	return s->ops->run_get(s, ref, out, e);
}

/*
 * What a guarded update refused (STORE_EREFUSED, store_int.h) said in
 * full: the record is read again, and a version that moved since is
 * the conflict it is; otherwise the stored status is not one the new
 * one may follow.
 */
static int
run_refused(struct store *s, const struct run *r, const struct run_move *mv,
	    struct err *e)
{
	struct run cur = { 0 };
	struct err ignored = ERR_INIT;
	int rc;

	if (s->ops->run_get(s, r->id, &cur, &ignored) ||
	    cur.version != r->version)
		rc = err_set(e, BATON_ECONFLICT,
			     "run '%s' changed concurrently (expected version "
			     "%lld)",
			     r->id, (long long)r->version);
	else if (!mv)
		rc = err_set(e, BATON_EBADSTATE,
			     "run '%s': status '%s' -> '%s' was not handed by "
			     "the transition door",
			     r->id, cur.status, r->status);
	else
		rc = err_set(e, BATON_EBADSTATE,
			     "run '%s' is '%s': the move '%s' -> '%s' handed "
			     "by the transition door starts elsewhere",
			     r->id, cur.status, mv->from, mv->to);
	run_release(&cur);
	return rc;
}

/* The checks store_run_update and store_run_move share. */
static int
run_update_args(const struct run *r, const struct event *ev, struct err *e)
{
	if (!r->id)
		return err_set(e, BATON_EINVAL, "cannot update run: no id");
	if (!r->status)
		return err_set(e, BATON_EINVAL,
			       "cannot update run '%s': no status", r->id);
	if (ev && !ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot update run '%s': event has no type",
			       r->id);
	if (ev && !event_type_find(ev->type))
		return store__event_check(ev, "update run", e);
	return 0;
}

/* The update itself, with the status guard froms ("|a|"). */
static int
run_write(struct store *s, struct run *r, const struct run_move *mv,
	  const char *from, struct event *ev, struct err *e)
{
	struct buf froms = BUF_INIT;
	int rc;

	buf_addf(&froms, "|%s|", from);
	s->fault = fault_next();
	rc = s->ops->run_update(s, r, froms.ptr, ev, e);
	if (rc == STORE_EREFUSED)
		rc = run_refused(s, r, mv, e);
	buf_release(&froms);
	return rc;
}

int
store_run_update(struct store *s, struct run *r, struct event *ev,
		 struct err *e)
{
	int rc = run_update_args(r, ev, e);

	return rc ? rc : run_write(s, r, NULL, r->status, ev, e);
}

int
store_run_move(struct store *s, struct run *r, const struct run_move *mv,
	       struct event *ev, struct err *e)
{
	int rc = run_update_args(r, ev, e);

	if (rc)
		return rc;
	if (!mv || !mv->p || !mv->from || !mv->to)
		return err_set(e, BATON_EBADSTATE,
			       "run '%s': a move of its status to '%s' needs "
			       "the transition door's move",
			       r->id, r->status);
	if (strcmp(mv->to, r->status))
		return err_set(e, BATON_EBADSTATE,
			       "run '%s': the move '%s' -> '%s' does not lead "
			       "to '%s', the status written",
			       r->id, mv->from, mv->to, r->status);
	if (r->pipeline && strcmp(mv->p->name, r->pipeline))
		return err_set(e, BATON_EBADSTATE,
			       "run '%s': the move '%s' -> '%s' comes from "
			       "pipeline '%s', not the run's '%s'",
			       r->id, mv->from, mv->to, mv->p->name,
			       r->pipeline);
	rc = pipeline_check(mv->p, mv->from, mv->to, e);
	if (rc) {
		err_prefix(e, "run '%s'", r->id);
		return rc;
	}
	return run_write(s, r, mv, mv->from, ev, e);
}

/*
 * Only the two request flags may be set this way: they are the fields a
 * second process (a "baton pause" in another terminal) writes while the
 * run's driver holds the version.
 */
int
store_run_request(struct store *s, const char *run_id, const char *flag,
		  int value, struct event *ev, struct err *e)
{
	if (!run_id)
		return err_set(e, BATON_EINVAL, "cannot set '%s': no run",
			       flag ? flag : "");
	if (!flag || (strcmp(flag, "pause_requested") &&
		      strcmp(flag, "abort_requested")))
		return err_set(e, BATON_EINVAL,
			       "cannot set '%s' of run '%s': not a request "
			       "flag",
			       flag ? flag : "", run_id);
	if (ev && !ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot set '%s' of run '%s': event has no "
			       "type",
			       flag, run_id);
	if (ev && !event_type_find(ev->type))
		return store__event_check(ev, "set a request of a run", e);
	s->fault = fault_next();
	return s->ops->run_request(s, run_id, flag, value, ev, e);
}

int
store_event_add(struct store *s, struct event *ev, struct err *e)
{
	if (!ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot add event: no type");
	if (!event_type_find(ev->type))
		return store__event_check(ev, "add event", e);
	s->fault = fault_next();
	return s->ops->event_add(s, ev, e);
}

int
store_run_list(struct store *s, const struct store_run_filter *f,
	       store_run_cb *cb, void *arg, struct err *e)
{
	static const struct store_run_filter all = { NULL, 0, 0 };

	return s->ops->run_list(s, f ? f : &all, cb, arg, e);
}

int
store_event_list(struct store *s, const char *run_id, int64_t after_seq,
		 const char *type, store_event_cb *cb, void *arg,
		 struct err *e)
{
	return s->ops->event_list(s, run_id, after_seq, type, cb, arg, e);
}

int
store_output_add(struct store *s, struct store_output *o, struct err *e)
{
	if (!o->run_id || !o->stage || !o->artifact)
		return err_set(e, BATON_EINVAL,
			       "cannot add output: run, stage and artifact "
			       "are all required");
	s->fault = fault_next();
	return s->ops->output_add(s, o, e);
}

int
store_output_list(struct store *s, const char *run_id, store_output_cb *cb,
		  void *arg, struct err *e)
{
	return s->ops->output_list(s, run_id, cb, arg, e);
}

void
store_output_release(struct store_output *o)
{
	if (!o)
		return;
	FREE_AND_NULL(o->run_id);
	FREE_AND_NULL(o->stage);
	FREE_AND_NULL(o->artifact);
	FREE_AND_NULL(o->decision);
	FREE_AND_NULL(o->content);
}

/* ---- the runtime -------------------------------------------------------- */

/*
 * The argument checks of the runtime operations. A NULL where a pointer
 * is required is the caller's bug, but the store says which argument it
 * was rather than crash inside a backend.
 */
static int
null_arg(struct err *e, const char *what, const char *name)
{
	return err_set(e, BATON_EINVAL, "cannot %s: %s is NULL", what, name);
}

/* ---- run files and the clock ------------------------------------------- */

int
store_file_put(struct store *s, struct store_file *f, struct err *e)
{
	if (!f->run_id || !f->name || !*f->name || !f->sha256 || !f->host ||
	    !f->path || (!f->content && f->len))
		return err_set(e, BATON_EINVAL,
			       "cannot keep a run file: run, name, sha256, "
			       "host and path are all required");
	/* a copy of a file the run folder has: not counted, so that the
	   fault numbers of the lifecycle's writes stay where they are */
	s->fault = 0;
	return s->ops->file_put(s, f, e);
}

int
store_file_get(struct store *s, const char *run_id, const char *name,
	       struct store_file *out, struct err *e)
{
	if (!run_id || !name)
		return null_arg(e, "read a run file", "the run or the name");
	return s->ops->file_get(s, run_id, name, out, e);
}

int
store_file_list(struct store *s, const char *run_id, store_file_cb *cb,
		void *arg, struct err *e)
{
	if (!run_id || !cb)
		return null_arg(e, "list run files", "the run or the callback");
	return s->ops->file_list(s, run_id, cb, arg, e);
}

void
store_file_release(struct store_file *f)
{
	if (!f)
		return;
	FREE_AND_NULL(f->run_id);
	FREE_AND_NULL(f->name);
	FREE_AND_NULL(f->sha256);
	FREE_AND_NULL(f->content);
	FREE_AND_NULL(f->host);
	FREE_AND_NULL(f->path);
	f->len = 0;
}

int
store_clock_sync(struct store *s, int force, struct err *e)
{
	int64_t now = time_mono_ms(), offset = 0;
	int rc;

	if (!s->ops->clock_offset)
		return 0;
	if (!force && s->clock_synced &&
	    now - s->clock_synced < STORE_CLOCK_EVERY_MS)
		return 0;
	rc = s->ops->clock_offset(s, &offset, e);
	if (rc)
		return rc;
	s->clock_synced = now;
	time_set_offset_ms(offset);
	return 0;
}

void
store_fence(struct store *s, int64_t task_id, int64_t token)
{
	s->fence_task = task_id;
	s->fence_token = task_id ? token : 0;
}

int
store_fence_check(struct store *s, const char *what, struct err *e)
{
	struct task t = { 0 };
	int64_t have;
	int rc;

	if (!s)
		return null_arg(e, what, "the store");
	if (!s->fence_task)
		return 0;
	rc = store_task_get(s, s->fence_task, &t, e);
	have = rc ? -1 : t.lease_token;
	task_release(&t);
	if (rc && rc != BATON_ENOTFOUND)
		return rc;
	*e = (struct err)ERR_INIT;
	return store__fence_verdict(s, have, what, e);
}

int
store__fence_verdict(const struct store *s, int64_t have, const char *what,
		     struct err *e)
{
	if (have < 0)
		return err_set(e, BATON_EFENCED,
			       "cannot %s: task %lld (whose lease this worker "
			       "holds) no longer exists: this worker may not "
			       "write",
			       what, (long long)s->fence_task);
	if (have != s->fence_token)
		return err_set(e, BATON_EFENCED,
			       "cannot %s: the lease on task %lld was taken "
			       "over (token %lld is stale, the task now has "
			       "%lld): this worker may not write",
			       what, (long long)s->fence_task,
			       (long long)s->fence_token, (long long)have);
	return 0;
}

/* The checks of store_task_add and store_task_add_keyed. */
static int
task_add_check(struct store *s, struct task *t, struct event *ev,
	       struct err *e)
{
	const char *what = "add task";

	if (!s)
		return null_arg(e, what, "the store");
	if (!t)
		return null_arg(e, what, "the task");
	if (!t->title || !*t->title)
		return err_set(e, BATON_EINVAL, "cannot add task: no title");
	if (t->nr_deps && !t->deps)
		return null_arg(e, what, "the dependency array");
	if (ev && !ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot add task '%s': event has no type",
			       t->title);
	if (ev && !event_type_find(ev->type))
		return store__event_check(ev, what, e);
	return 0;
}

int
store_task_add(struct store *s, struct task *t, struct event *ev,
	       struct err *e)
{
	int rc = task_add_check(s, t, ev, e);

	if (rc)
		return rc;
	s->fault = fault_next();
	rc = s->ops->task_add(s, t, ev, NULL, e);
	return rc < 0 ? rc : 0;
}

int
store_task_add_keyed(struct store *s, struct task *t, struct event *ev,
		     struct store_key *k, struct err *e)
{
	int rc = task_add_check(s, t, ev, e);

	if (rc)
		return rc;
	if (!k || !k->key || !k->sha)
		return null_arg(e, "add task", "the idempotency key");
	k->task_id = 0;
	k->sha_was[0] = '\0';
	s->fault = fault_next();
	return s->ops->task_add(s, t, ev, k, e);
}

int
store_task_get(struct store *s, int64_t id, struct task *out, struct err *e)
{
	if (!s)
		return null_arg(e, "read a task", "the store");
	if (!out)
		return null_arg(e, "read a task", "out");
	if (id <= 0)
		return err_set(e, BATON_ENOTFOUND, "no task %lld",
			       (long long)id);
	return s->ops->task_get(s, id, out, e);
}

/* The task side of run_refused: the table says why. */
static int
task_refused(struct store *s, const struct task *t, struct err *e)
{
	struct task cur = { 0 };
	struct err ignored = ERR_INIT;
	int rc;

	if (s->ops->task_get(s, t->id, &cur, &ignored) ||
	    cur.version != t->version ||
	    !task_move_check(cur.status, t->status, NULL)) {
		rc = err_set(e, BATON_ECONFLICT,
			     "task %lld changed concurrently (expected "
			     "version %lld)",
			     (long long)t->id, (long long)t->version);
	} else {
		rc = task_move_check(cur.status, t->status, e);
		err_prefix(e, "task %lld", (long long)t->id);
	}
	task_release(&cur);
	return rc;
}

/* What store_task_update checks before the backend sees t; fills froms. */
static int
task_update_check(struct store *s, const struct task *t,
		  const struct event *ev, struct buf *froms, struct err *e)
{
	const char *what = "update task";

	if (!s)
		return null_arg(e, what, "the store");
	if (!t)
		return null_arg(e, what, "the task");
	if (t->id <= 0)
		return err_set(e, BATON_EINVAL, "cannot update task: no id");
	if (!t->title || !t->status)
		return err_set(e, BATON_EINVAL,
			       "cannot update task %lld: no %s",
			       (long long)t->id, t->title ? "status" : "title");
	if (ev && !ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot update task %lld: event has no type",
			       (long long)t->id);
	if (ev && !event_type_find(ev->type))
		return store__event_check(ev, "update task", e);
	if (task_status_check(t->status, e)) {
		err_prefix(e, "cannot update task %lld", (long long)t->id);
		return BATON_EINVAL;
	}
	task_move_froms(t->status, froms);
	return 0;
}

int
store_task_update(struct store *s, struct task *t, struct event *ev,
		  struct err *e)
{
	struct buf froms = BUF_INIT;
	int rc = task_update_check(s, t, ev, &froms, e);

	if (rc == 0) {
		s->fault = fault_next();
		rc = s->ops->task_update(s, t, froms.ptr, ev, e);
		if (rc == STORE_EREFUSED)
			rc = task_refused(s, t, e);
	}
	buf_release(&froms);
	return rc;
}

/* A claim's holder and lease, as every claim call checks them. */
static int
claim_args(const char *what, const char *holder, int64_t lease_ms,
	   struct err *e)
{
	if (!holder || !*holder)
		return err_set(e, BATON_EINVAL, "cannot %s: no holder", what);
	if (lease_ms <= 0)
		return err_set(e, BATON_EINVAL, "cannot %s: lease of %lld ms",
			       what, (long long)lease_ms);
	return 0;
}

int
store_task_settle_claim(struct store *s, struct task *t, struct event *ev,
			const char *holder, int64_t lease_ms,
			struct task *next, struct err *e)
{
	const char *what = "claim a task";
	struct buf froms = BUF_INIT;
	int rc;

	if (!next)
		return null_arg(e, what, "next");
	memset(next, 0, sizeof(*next));
	rc = claim_args(what, holder, lease_ms, e);
	if (rc)
		return rc;
	rc = task_update_check(s, t, ev, &froms, e);
	if (rc == 0 && s->ops->task_settle_claim) {
		s->fault = fault_next();
		rc = s->ops->task_settle_claim(s, t, froms.ptr, ev, holder,
					       lease_ms, next, e);
		if (rc == STORE_EREFUSED)
			rc = task_refused(s, t, e);
	} else if (rc == 0) {
		s->fault = fault_next();
		rc = s->ops->task_update(s, t, froms.ptr, ev, e);
		if (rc == STORE_EREFUSED)
			rc = task_refused(s, t, e);
		if (rc == 0) {
			s->fault = fault_next();
			/* settled: a claim that fails is no claim (the
			 * caller's next store_task_claim says why) */
			if (s->ops->task_claim(s, holder, lease_ms, next, e) &&
			    e)
				*e = (struct err)ERR_INIT;
		}
	}
	buf_release(&froms);
	return rc;
}

int
store_task_claim_batch(struct store *s, const char *holder, int64_t lease_ms,
		       size_t max, struct task *out, size_t *n, struct err *e)
{
	const char *what = "claim tasks";

	if (!s || !out || !n)
		return null_arg(e, what, !s ? "the store" : "out or n");
	*n = 0;
	if (claim_args(what, holder, lease_ms, e))
		return BATON_EINVAL;
	if (max == 0)
		return err_set(e, BATON_EINVAL, "cannot %s: a batch of 0",
			       what);
	memset(out, 0, max * sizeof(*out));
	s->fault = fault_next();
	return s->ops->task_claim_batch(s, holder, lease_ms, max, out, n, e);
}

/*
 * The checks of store_task_settle_batch on v[0..n): each v[i].rc is 0
 * (to write, froms[i] its statuses) or why not. Returns how many are
 * to write.
 */
static size_t
settles_check(struct store *s, struct store_settle *v, struct buf *froms,
	      size_t n)
{
	size_t i, todo = 0;

	for (i = 0; i < n; i++) {
		struct err bad = ERR_INIT;

		froms[i] = (struct buf)BUF_INIT;
		v[i].rc = task_update_check(s, v[i].task, v[i].ev, &froms[i],
					    &bad);
		if (v[i].rc == 0 && v[i].token <= 0)
			v[i].rc = BATON_EINVAL;
		if (v[i].rc == 0)
			todo++;
	}
	return todo;
}

/* After a batch of settles: the reason of each the table refused. */
static void
settles_done(struct store *s, struct store_settle *v, struct buf *froms,
	     size_t n, int rc)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct err ignored = ERR_INIT;

		if (rc == 0 && v[i].rc == STORE_EREFUSED)
			v[i].rc = task_refused(s, v[i].task, &ignored);
		buf_release(&froms[i]);
	}
	free(froms);
}

int
store_task_settle_batch(struct store *s, struct store_settle *v, size_t n,
			struct err *e)
{
	const char *what = "settle tasks";
	struct buf *froms;
	int rc = 0;

	if (!s || (n && !v))
		return null_arg(e, what, !s ? "the store" : "the settles");
	froms = xcalloc(n ? n : 1, sizeof(*froms));
	if (settles_check(s, v, froms, n)) {
		s->fault = fault_next();
		rc = s->ops->task_settle_batch(s, v, froms, n, e);
	}
	settles_done(s, v, froms, n, rc);
	return rc;
}

int
store_task_settle_claim_batch(struct store *s, struct store_settle *v,
			      size_t n, const char *holder, int64_t lease_ms,
			      size_t max, struct task *out, size_t *got,
			      struct err *e)
{
	const char *what = "settle and claim tasks";
	struct buf *froms;
	int rc = 0;

	if (!s || (n && !v) || (max && !out) || !got)
		return null_arg(e, what, !s ? "the store" :
					 (n && !v) ? "the settles" :
						     "out or got");
	*got = 0;
	if (max && claim_args(what, holder, lease_ms, e))
		return BATON_EINVAL;
	if (max)
		memset(out, 0, max * sizeof(*out));
	froms = xcalloc(n ? n : 1, sizeof(*froms));
	if (s->ops->task_settle_claim_batch) {
		/* the claims go with the settles even when none is left
		 * to write: one transaction either way, none for nothing */
		if (!settles_check(s, v, froms, n) && !max)
			goto out;
		s->fault = fault_next();
		rc = s->ops->task_settle_claim_batch(s, v, froms, n, holder,
						     lease_ms, max, out, got,
						     e);
	} else {
		if (settles_check(s, v, froms, n)) {
			s->fault = fault_next();
			rc = s->ops->task_settle_batch(s, v, froms, n, e);
		}
		/* settled: a claim that fails is no claim (as
		 * store_task_settle_claim) */
		if (rc == 0 && max) {
			s->fault = fault_next();
			if (s->ops->task_claim_batch(s, holder, lease_ms, max,
						     out, got, e) &&
			    e)
				*e = (struct err)ERR_INIT;
		}
	}
out:
	settles_done(s, v, froms, n, rc);
	return rc;
}

int
store_task_list(struct store *s, const struct store_task_filter *f,
		store_task_cb *cb, void *arg, struct err *e)
{
	static const struct store_task_filter all = { .status = NULL };

	if (!s)
		return null_arg(e, "list tasks", "the store");
	if (!cb)
		return null_arg(e, "list tasks", "the callback");
	return s->ops->task_list(s, f ? f : &all, cb, arg, e);
}

int
store_task_counts(struct store *s, const char *const *statuses,
		  int64_t *counts, size_t n, struct err *e)
{
	size_t i;

	if (!s)
		return null_arg(e, "count tasks", "the store");
	if (n && (!statuses || !counts))
		return null_arg(e, "count tasks",
				statuses ? "counts" : "statuses");
	for (i = 0; i < n; i++)
		if (!statuses[i])
			return null_arg(e, "count tasks", "a status");
	return s->ops->task_counts(s, statuses, counts, n, e);
}

int
store_task_claim(struct store *s, const char *holder, int64_t lease_ms,
		 struct task *out, struct err *e)
{
	const char *what = "claim a task";

	if (!s)
		return null_arg(e, what, "the store");
	if (!holder || !*holder)
		return err_set(e, BATON_EINVAL, "cannot %s: no holder", what);
	if (!out)
		return null_arg(e, what, "out");
	if (lease_ms <= 0)
		return err_set(e, BATON_EINVAL,
			       "cannot %s: lease of %lld ms", what,
			       (long long)lease_ms);
	s->fault = fault_next();
	return s->ops->task_claim(s, holder, lease_ms, out, e);
}

int
store_task_renew(struct store *s, int64_t id, int64_t token,
		 int64_t lease_ms, struct err *e)
{
	if (!s)
		return null_arg(e, "renew a lease", "the store");
	if (lease_ms <= 0)
		return err_set(e, BATON_EINVAL,
			       "cannot renew the lease on task %lld: lease of "
			       "%lld ms",
			       (long long)id, (long long)lease_ms);
	s->fault = 0; /* a heartbeat: not counted, see the top */
	/* a lease is measured on the database's clock: keep it current
	   (a failed measurement keeps the last offset; the renew says
	   whether the store is reachable) */
	store_clock_sync(s, 0, NULL);
	return s->ops->task_renew(s, id, token, lease_ms, e);
}

int
store_areas_overlap(const char *a, const char *b)
{
	size_t la, lb;

	if (!a || !b)
		return 0;
	la = strlen(a);
	lb = strlen(b);
	if (la == lb)
		return !strcmp(a, b);
	if (la > lb)
		return !strncmp(a, b, lb) && a[lb] == '/';
	return !strncmp(a, b, la) && b[la] == '/';
}

int
store_task_next_due(struct store *s, int64_t *out, struct err *e)
{
	if (!s)
		return null_arg(e, "find when a task is due", "the store");
	if (!out)
		return null_arg(e, "find when a task is due", "out");
	return s->ops->task_next_due(s, out, e);
}

int
store_forge_delivery_seen(struct store *s, const char *delivery_id,
			  const char *event, struct err *e)
{
	const char *what = "record a webhook delivery";

	if (!s)
		return null_arg(e, what, "the store");
	if (!delivery_id || !*delivery_id)
		return err_set(e, BATON_EINVAL,
			       "cannot %s: no delivery id", what);
	if (fault_first(s, what, e))
		return BATON_ESTORE;
	return s->ops->forge_delivery_seen(s, delivery_id, event, e);
}

void
api_token_release(struct api_token *t)
{
	if (!t)
		return;
	free(t->name);
	free(t->role);
	memset(t, 0, sizeof(*t));
}

int
store_token_add(struct store *s, const char *name, const char *role,
		const char *sha, struct err *e)
{
	const char *what = "add an API token";

	if (!s)
		return null_arg(e, what, "the store");
	if (!name || !*name || !role || !sha || strlen(sha) != 64)
		return err_set(e, BATON_EINVAL,
			       "cannot %s: no name, role or hash", what);
	return s->ops->token_add(s, name, role, sha, e);
}

int
store_token_find(struct store *s, const char *sha, struct api_token *out,
		 struct err *e)
{
	const char *what = "look up an API token";

	if (!s)
		return null_arg(e, what, "the store");
	memset(out, 0, sizeof(*out));
	if (!sha || strlen(sha) != 64)
		return 0;
	return s->ops->token_find(s, sha, out, e);
}

int
store_token_list(struct store *s, store_token_cb *cb, void *arg,
		 struct err *e)
{
	if (!s)
		return null_arg(e, "list the API tokens", "the store");
	return s->ops->token_list(s, cb, arg, e);
}

int
store_token_revoke(struct store *s, const char *name, struct err *e)
{
	const char *what = "revoke an API token";

	if (!s)
		return null_arg(e, what, "the store");
	if (!name || !*name)
		return err_set(e, BATON_EINVAL, "cannot %s: no name", what);
	return s->ops->token_revoke(s, name, e);
}

int
store_token_used(struct store *s, const char *name, int64_t now,
		 struct err *e)
{
	if (!s)
		return null_arg(e, "record an API token's use", "the store");
	if (!name || !*name)
		return 0;
	return s->ops->token_used(s, name, now, e);
}

int
store_idem_claim(struct store *s, const char *key, const char *sha,
		 int64_t *task_id, char sha_out[65], struct err *e)
{
	const char *what = "claim an idempotency key";

	if (!s)
		return null_arg(e, what, "the store");
	if (!key || !*key || !sha || !task_id || !sha_out)
		return err_set(e, BATON_EINVAL, "cannot %s: no key", what);
	*task_id = 0;
	sha_out[0] = 0;
	if (fault_first(s, what, e))
		return BATON_ESTORE;
	return s->ops->idem_claim(s, key, sha, task_id, sha_out, e);
}

int
store_idem_bind(struct store *s, const char *key, int64_t task_id,
		struct err *e)
{
	const char *what = "bind an idempotency key";

	if (!s)
		return null_arg(e, what, "the store");
	if (!key || !*key)
		return err_set(e, BATON_EINVAL, "cannot %s: no key", what);
	if (fault_first(s, what, e))
		return BATON_ESTORE;
	return s->ops->idem_bind(s, key, task_id, e);
}

void
chat_conv_release(struct chat_conv *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->nr_msgs; i++) {
		free(c->msgs[i].role);
		free(c->msgs[i].kind);
		free(c->msgs[i].content);
	}
	free(c->msgs);
	free(c->phase);
	free(c->mode);
	free(c->plan);
	free(c->tasks);
	memset(c, 0, sizeof(*c));
}

int
store_chat_create(struct store *s, const char *phase, int64_t *id_out,
		  struct err *e)
{
	const char *what = "create a conversation";

	if (!s || !id_out)
		return null_arg(e, what, "the store or the id");
	if (!phase || !*phase)
		return err_set(e, BATON_EINVAL, "cannot %s: no phase", what);
	*id_out = 0;
	s->fault = fault_next();
	return s->ops->chat_create(s, phase, id_out, e);
}

int
store_chat_get(struct store *s, int64_t id, struct chat_conv *out,
	       struct err *e)
{
	const char *what = "read a conversation";

	if (!s || !out)
		return null_arg(e, what, "the store or the conversation");
	if (id <= 0)
		return err_set(e, BATON_ENOTFOUND, "no conversation %lld",
			       (long long)id);
	return s->ops->chat_get(s, id, out, e);
}

int
store_chat_add(struct store *s, int64_t id, const char *role,
	       const char *kind, const char *content, int64_t *msg_id,
	       struct err *e)
{
	const char *what = "add a chat message";

	if (!s)
		return null_arg(e, what, "the store");
	if (!role || !*role || !kind || !*kind || !content)
		return err_set(e, BATON_EINVAL,
			       "cannot %s: no role, kind or content", what);
	if (id <= 0)
		return err_set(e, BATON_ENOTFOUND, "no conversation %lld",
			       (long long)id);
	s->fault = fault_next();
	return s->ops->chat_add(s, id, role, kind, content, msg_id, e);
}

int
store_chat_update(struct store *s, int64_t id, const char *from,
		  const struct chat_conv *set, struct err *e)
{
	const char *what = "update a conversation";

	if (!s || !set)
		return null_arg(e, what, "the store or the change");
	if (id <= 0)
		return err_set(e, BATON_ENOTFOUND, "no conversation %lld",
			       (long long)id);
	s->fault = fault_next();
	return s->ops->chat_update(s, id, from, set, e);
}

int
store_chat_list(struct store *s, const char *phase, int64_t **ids,
		size_t *nr, struct err *e)
{
	const char *what = "list conversations";

	if (!s || !phase || !ids || !nr)
		return null_arg(e, what, "the store, phase or list");
	*ids = NULL;
	*nr = 0;
	return s->ops->chat_list(s, phase, ids, nr, e);
}

int
store_memory_put(struct store *s, const char *id, const char *run_id,
		 const char *kind, const char *body, struct err *e)
{
	const char *what = "write a memory entry";

	if (!s)
		return null_arg(e, what, "the store");
	if (!id || !*id || !kind || !body)
		return err_set(e, BATON_EINVAL, "cannot %s: no id", what);
	if (fault_first(s, what, e))
		return BATON_ESTORE;
	return s->ops->memory_put(s, id, run_id, kind, body, e);
}

int
store_memory_forget(struct store *s, const char *id, struct err *e)
{
	const char *what = "forget a memory entry";

	if (!s)
		return null_arg(e, what, "the store");
	if (!id || !*id)
		return err_set(e, BATON_EINVAL, "cannot %s: no id", what);
	if (fault_first(s, what, e))
		return BATON_ESTORE;
	return s->ops->memory_forget(s, id, e);
}

int
store_memory_list(struct store *s, struct json_t **out, struct err *e)
{
	const char *what = "list the memory";

	*out = NULL;
	if (!s)
		return null_arg(e, what, "the store");
	if (fault_first(s, what, e))
		return BATON_ESTORE;
	return s->ops->memory_list(s, out, e);
}

int
store_forge_intake(struct store *s, struct task *t, struct forge_link *l,
		   struct event *ev, struct err *e)
{
	const char *what = "take an issue in";

	if (!s)
		return null_arg(e, what, "the store");
	if (!t)
		return null_arg(e, what, "the task");
	if (!l)
		return null_arg(e, what, "the link");
	if (!l->repo || !*l->repo)
		return err_set(e, BATON_EINVAL, "cannot %s: no repository",
			       what);
	if (l->issue_number <= 0)
		return err_set(e, BATON_EINVAL,
			       "cannot %s: no issue number (%s)", what,
			       l->repo);
	if (!t->title || !*t->title)
		return err_set(e, BATON_EINVAL,
			       "cannot %s: issue #%lld of %s has no title",
			       what, (long long)l->issue_number, l->repo);
	if (t->nr_deps && !t->deps)
		return null_arg(e, what, "the dependency array");
	if (ev && !ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot %s: event has no type", what);
	if (ev && !event_type_find(ev->type))
		return store__event_check(ev, what, e);
	s->fault = fault_next();
	return s->ops->forge_intake(s, t, l, ev, e);
}

int
store_forge_link_get(struct store *s, int64_t task_id,
		     struct forge_link *out, struct err *e)
{
	if (!s)
		return null_arg(e, "read a forge link", "the store");
	if (!out)
		return null_arg(e, "read a forge link", "out");
	if (task_id <= 0)
		return err_set(e, BATON_ENOTFOUND,
			       "task %lld has no forge link",
			       (long long)task_id);
	return s->ops->forge_link_get(s, task_id, out, e);
}

int
store_forge_link_put(struct store *s, struct forge_link *l, struct err *e)
{
	const char *what = "write a forge link";

	if (!s)
		return null_arg(e, what, "the store");
	if (!l)
		return null_arg(e, what, "the link");
	if (l->task_id <= 0)
		return err_set(e, BATON_EINVAL, "cannot %s: no task", what);
	if (!l->repo || !*l->repo)
		return err_set(e, BATON_EINVAL,
			       "cannot %s of task %lld: no repository", what,
			       (long long)l->task_id);
	if (l->issue_number < 0 || l->pr_number < 0)
		return err_set(e, BATON_EINVAL,
			       "cannot %s of task %lld: a negative number",
			       what, (long long)l->task_id);
	s->fault = fault_next();
	return s->ops->forge_link_put(s, l, e);
}

int
store_forge_links(struct store *s, const char *repo, store_forge_link_cb *cb,
		  void *arg, struct err *e)
{
	if (!s)
		return null_arg(e, "list forge links", "the store");
	if (!repo)
		return null_arg(e, "list forge links", "the repository");
	if (!cb)
		return null_arg(e, "list forge links", "the callback");
	return s->ops->forge_links(s, repo, cb, arg, e);
}

int
store_forge_cursor_get(struct store *s, const char *url, char **etag,
		       char **cursor, struct err *e)
{
	if (!s)
		return null_arg(e, "read a forge cursor", "the store");
	if (!url || !etag || !cursor)
		return null_arg(e, "read a forge cursor",
				!url ? "the URL" : !etag ? "etag" : "cursor");
	*etag = NULL;
	*cursor = NULL;
	return s->ops->forge_cursor_get(s, url, etag, cursor, e);
}

/*
 * The cursors and the counters are bookkeeping written on the sync's
 * timer, like the heartbeats: not counted by fault injection (the top
 * of the file), so "the Nth write" stays the same whatever the timing.
 */
int
store_forge_cursor_set(struct store *s, const char *url, const char *etag,
		       const char *cursor, struct err *e)
{
	if (!s)
		return null_arg(e, "write a forge cursor", "the store");
	if (!url || !*url)
		return err_set(e, BATON_EINVAL,
			       "cannot write a forge cursor: no URL");
	s->fault = 0;
	return s->ops->forge_cursor_set(s, url, etag, cursor, e);
}

int
store_forge_stats_add(struct store *s, const struct forge_stats *d,
		      struct err *e)
{
	if (!s || !d)
		return null_arg(e, "count forge calls",
				s ? "the deltas" : "the store");
	s->fault = 0;
	return s->ops->forge_stats_add(s, d, e);
}

int
store_forge_stats_get(struct store *s, struct forge_stats *out,
		      struct err *e)
{
	if (!s || !out)
		return null_arg(e, "read the forge counters",
				s ? "out" : "the store");
	memset(out, 0, sizeof(*out));
	return s->ops->forge_stats_get(s, out, e);
}

int
store_task_events(struct store *s, int64_t task_id, int64_t after_seq,
		  store_event_cb *cb, void *arg, struct err *e)
{
	if (!s)
		return null_arg(e, "list task events", "the store");
	if (!cb)
		return null_arg(e, "list task events", "the callback");
	if (task_id <= 0)
		return err_set(e, BATON_EINVAL,
			       "cannot list task events: no task");
	return s->ops->task_events(s, task_id, after_seq, cb, arg, e);
}

int
store_worker_beat(struct store *s, const struct worker_rec *w, struct err *e)
{
	struct worker_rec me;
	int rc;

	if (!s)
		return null_arg(e, "record a worker", "the store");
	if (!w)
		return null_arg(e, "record a worker", "the worker");
	if (!w->id || !*w->id)
		return err_set(e, BATON_EINVAL,
			       "cannot record a worker: no id");
	s->fault = 0; /* a heartbeat: not counted, see the top */
	rc = store_clock_sync(s, 0, e);
	if (rc)
		return rc;
	me = *w;
	me.skew_ms = -time_offset_ms();
	return s->ops->worker_beat(s, &me, e);
}

int
store_worker_stop(struct store *s, const char *id, struct err *e)
{
	if (!s)
		return null_arg(e, "stop a worker", "the store");
	if (!id)
		return null_arg(e, "stop a worker", "the id");
	s->fault = fault_next();
	return s->ops->worker_stop(s, id, e);
}

int
store_worker_list(struct store *s, store_worker_cb *cb, void *arg,
		  struct err *e)
{
	if (!s)
		return null_arg(e, "list workers", "the store");
	if (!cb)
		return null_arg(e, "list workers", "the callback");
	return s->ops->worker_list(s, cb, arg, e);
}

int
store_merge_add(struct store *s, struct merge_item *m, struct event *ev,
		struct err *e)
{
	const char *what = "queue a run for merging";

	if (!s)
		return null_arg(e, what, "the store");
	if (!m)
		return null_arg(e, what, "the item");
	if (!m->run_id || !m->branch)
		return err_set(e, BATON_EINVAL, "cannot %s: no %s", what,
			       m->run_id ? "branch" : "run");
	if (ev && !ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot %s: event has no type", what);
	if (ev && !event_type_find(ev->type))
		return store__event_check(ev, what, e);
	s->fault = fault_next();
	return s->ops->merge_add(s, m, ev, e);
}

int
store_merge_get(struct store *s, int64_t id, const char *run_id,
		struct merge_item *out, struct err *e)
{
	const char *what = "read a merge item";

	if (!s)
		return null_arg(e, what, "the store");
	if (!out)
		return null_arg(e, what, "out");
	if (!id && !run_id)
		return err_set(e, BATON_EINVAL,
			       "cannot %s: neither an item nor a run", what);
	return s->ops->merge_get(s, id, run_id, out, e);
}

/* The merge item side of run_refused. */
static int
merge_refused(struct store *s, const struct merge_item *m, struct err *e)
{
	struct merge_item cur = { 0 };
	struct err ignored = ERR_INIT;
	int rc;

	if (s->ops->merge_get(s, m->id, NULL, &cur, &ignored) ||
	    cur.version != m->version ||
	    !merge_move_check(cur.status, m->status, NULL)) {
		rc = err_set(e, BATON_ECONFLICT,
			     "merge item %lld changed concurrently (expected "
			     "version %lld)",
			     (long long)m->id, (long long)m->version);
	} else {
		rc = merge_move_check(cur.status, m->status, e);
		err_prefix(e, "merge item %lld", (long long)m->id);
	}
	merge_item_release(&cur);
	return rc;
}

int
store_merge_update(struct store *s, struct merge_item *m, struct event *ev,
		   struct err *e)
{
	const char *what = "update a merge item";
	struct buf froms = BUF_INIT;
	int rc;

	if (!s)
		return null_arg(e, what, "the store");
	if (!m)
		return null_arg(e, what, "the item");
	if (m->id <= 0 || !m->branch || !m->status)
		return err_set(e, BATON_EINVAL, "cannot %s: no %s", what,
			       m->id <= 0 ? "id" : m->branch ? "status"
							    : "branch");
	if (ev && !ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot update merge item %lld: event has no "
			       "type",
			       (long long)m->id);
	if (ev && !event_type_find(ev->type))
		return store__event_check(ev, what, e);
	merge_move_froms(m->status, &froms);
	s->fault = fault_next();
	rc = s->ops->merge_update(s, m, froms.ptr, ev, e);
	if (rc == STORE_EREFUSED)
		rc = merge_refused(s, m, e);
	buf_release(&froms);
	return rc;
}

int
store_merge_list(struct store *s, const char *status, store_merge_cb *cb,
		 void *arg, struct err *e)
{
	if (!s)
		return null_arg(e, "list the merge queue", "the store");
	if (!cb)
		return null_arg(e, "list the merge queue", "the callback");
	return s->ops->merge_list(s, status, cb, arg, e);
}

int
store_merge_claim(struct store *s, const char *holder, int64_t claim_ms,
		  struct merge_item *out, struct err *e)
{
	const char *what = "claim a merge item";

	if (!s)
		return null_arg(e, what, "the store");
	if (!holder || !*holder)
		return err_set(e, BATON_EINVAL, "cannot %s: no holder", what);
	if (!out)
		return null_arg(e, what, "out");
	if (claim_ms <= 0)
		return err_set(e, BATON_EINVAL, "cannot %s: claim of %lld ms",
			       what, (long long)claim_ms);
	s->fault = fault_next();
	return s->ops->merge_claim(s, holder, claim_ms, out, e);
}

int
store_plan_add(struct store *s, const char *source, const char *content,
	       int64_t *id, int *version, struct err *e)
{
	const char *what = "store a plan";

	if (!s)
		return null_arg(e, what, "the store");
	if (!source)
		return null_arg(e, what, "the source");
	if (!content)
		return null_arg(e, what, "the content");
	if (!id || !version)
		return null_arg(e, what, id ? "version" : "id");
	s->fault = fault_next();
	return s->ops->plan_add(s, source, content, id, version, e);
}

int
store_run_stats(struct store *s, store_run_stat_cb *cb, void *arg,
		struct err *e)
{
	if (!s || !cb)
		return null_arg(e, "count runs", s ? "the callback" : "the store");
	return s->ops->run_stats(s, cb, arg, e);
}

int
store_watch_fd(struct store *s, struct err *e)
{
	if (!s)
		return null_arg(e, "watch the store", "the store");
	return s->ops->watch_fd(s, e);
}

unsigned
store_watch_drain(struct store *s)
{
	return s ? s->ops->watch_drain(s) : 0;
}

int
store_event_last_seq(struct store *s, int64_t *out, struct err *e)
{
	if (!s || !out)
		return null_arg(e, "read the last event", s ? "out" : "the store");
	return s->ops->event_last_seq(s, out, e);
}
