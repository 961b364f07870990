/*
 * The store conformance suite (STYLE.md section 11). Every case is a
 * function of an open store and the spec it was opened from, so the
 * same cases run against every backend: each case becomes one test
 * "sqlite_<case>" on a fresh database file, and "postgres_conformance"
 * runs them all against BATON_TEST_PG_DSN when that is set. A few tests
 * at the end look inside the SQLite file itself (WAL, the migrations
 * table, the list index, the busy message), and a few look at what only
 * PostgreSQL has (the order of events committed out of order, lost
 * connections, the LISTEN wake-up), with BATON_TEST_PG_DSN set.
 *
 * Fault injection counts the write calls of the process, and each case
 * runs in a process of its own that has written nothing before it, so
 * a case can say "the 2nd write fails" and mean its own 2nd write.
 */
#include "util/compat.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ids.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "store/store.h"
#include "store/store_int.h" /* the ops table: a backend's own insert */
#include "run_move.h"
#include "test.h"
#include "util/buf.h"
#include "util/embed.h"
#include "util/err.h"
#include "util/json.h"
#include "util/xalloc.h"

/* A test races bare child processes against each other: banned.h keeps
 * fork and waitpid for spawn.c in baton itself, not here. */
#undef fork
#undef kill
#undef waitpid

typedef void store_case_fn(struct store *s, const char *spec);

struct store_case {
	const char *name;
	store_case_fn *fn;
};

/* ---- helpers ---------------------------------------------------------- */

static struct store *
open_spec(const char *spec)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;

	ASSERT_OK(store_open(spec, &s, &e), &e);
	ASSERT(s != NULL);
	return s;
}

static char *
sqlite_spec(void)
{
	return xasprintf("sqlite:%s/baton.db", test_tmpdir());
}

/* Opens a fresh store from spec and runs one case against it. */
static void
run_case(store_case_fn *fn, const char *spec)
{
	struct store *s = open_spec(spec);

	fn(s, spec);
	store_close(s);
}

/* Creates a run with the fields every run has; out is the caller's. */
static void
make_run(struct store *s, const char *task, const char *status,
	 struct run *out)
{
	struct err e = ERR_INIT;

	memset(out, 0, sizeof(*out));
	run_set(&out->task, task);
	run_set(&out->status, status);
	run_set(&out->pipeline, "default");
	run_set(&out->phase, RUN_PHASE_PENDING);
	out->max_review_loops = 3;
	ASSERT_OK(store_run_create(s, out, &e), &e);
}

static void
get_run(struct store *s, const char *ref, struct run *out)
{
	struct err e = ERR_INIT;

	ASSERT_OK(store_run_get(s, ref, out, &e), &e);
}

/* Copies of the events a list handed out. */
struct events {
	int n, alloc;
	struct event *ev;
	int stop_after; /* > 0: stop the list after this many */
};

static int
collect_event(const struct event *ev, void *arg)
{
	struct events *l = arg;
	struct event *c;

	ALLOC_GROW(l->ev, l->n + 1, l->alloc);
	c = &l->ev[l->n++];
	c->seq = ev->seq;
	c->ts = ev->ts;
	c->task_id = ev->task_id;
	c->run_id = xstrdup_or_null(ev->run_id);
	c->type = xstrdup_or_null(ev->type);
	c->from = xstrdup_or_null(ev->from);
	c->to = xstrdup_or_null(ev->to);
	c->data = xstrdup_or_null(ev->data);
	return l->stop_after > 0 && l->n >= l->stop_after;
}

static void
events_release(struct events *l)
{
	int i;

	for (i = 0; i < l->n; i++)
		event_release(&l->ev[i]);
	FREE_AND_NULL(l->ev);
	l->n = l->alloc = 0;
}

static void
list_events(struct store *s, const char *run_id, int64_t after,
	    const char *type, struct events *out)
{
	struct err e = ERR_INIT;

	memset(out, 0, sizeof(*out));
	ASSERT_OK(store_event_list(s, run_id, after, type, collect_event, out,
				   &e),
		  &e);
}

static int
count_events(struct store *s, const char *run_id, const char *type)
{
	struct events l;
	int n;

	list_events(s, run_id, 0, type, &l);
	n = l.n;
	events_release(&l);
	return n;
}

/*
 * count_events once it reaches want, or what it is after 10 s. A
 * PostgreSQL follower stops before a hole (the seq of a rolled-back
 * event) while a transaction that began before the event after it runs
 * anywhere on the server (pg/001-init.sql), and the suite's other tests
 * share the server: one's CREATE DATABASE can hold a case that made a
 * hole on purpose for a moment. The count only ever catches up.
 */
static int
events_seen(struct store *s, const char *run_id, const char *type, int want)
{
	int n, i;

	for (i = 0; (n = count_events(s, run_id, type)) < want && i < 500;
	     i++)
		usleep(20 * 1000);
	return n;
}

/* Copies of the runs a list handed out. */
struct runs {
	int n, alloc;
	struct run *r;
	int stop_after;
	struct store *write_to; /* non-NULL: update each run from the cb */
};

static int
collect_run(const struct run *r, void *arg)
{
	struct runs *l = arg;
	struct err e = ERR_INIT;

	ALLOC_GROW(l->r, l->n + 1, l->alloc);
	run_copy(&l->r[l->n++], r);
	if (l->write_to) {
		struct run w;

		run_copy(&w, r);
		run_set(&w.reason, "touched from a callback");
		ASSERT_OK(store_run_update(l->write_to, &w, NULL, &e), &e);
		run_release(&w);
	}
	return l->stop_after > 0 && l->n >= l->stop_after;
}

static void
runs_release(struct runs *l)
{
	int i;

	for (i = 0; i < l->n; i++)
		run_release(&l->r[i]);
	FREE_AND_NULL(l->r);
	l->n = l->alloc = 0;
}

static void
list_runs(struct store *s, const char *status, int limit, struct runs *out)
{
	struct store_run_filter f = { status, limit, 0 };
	struct err e = ERR_INIT;
	struct store *w = out->write_to;
	int stop = out->stop_after;

	memset(out, 0, sizeof(*out));
	out->write_to = w;
	out->stop_after = stop;
	ASSERT_OK(store_run_list(s, &f, collect_run, out, &e), &e);
}

/* Copies of the outputs a list handed out. */
struct outputs {
	int n;
	struct store_output o[16];
};

static int
collect_output(const struct store_output *o, void *arg)
{
	struct outputs *l = arg;
	struct store_output *c;

	ASSERT(l->n < (int)ARRAY_SIZE(l->o));
	c = &l->o[l->n++];
	*c = *o;
	c->run_id = xstrdup_or_null(o->run_id);
	c->stage = xstrdup_or_null(o->stage);
	c->artifact = xstrdup_or_null(o->artifact);
	c->decision = xstrdup_or_null(o->decision);
	c->content = xstrdup_or_null(o->content);
	return 0;
}

static void
outputs_release(struct outputs *l)
{
	int i;

	for (i = 0; i < l->n; i++)
		store_output_release(&l->o[i]);
	l->n = 0;
}

static int
add_output(struct store *s, const char *run_id, const char *stage,
	   const char *artifact, const char *content, struct err *e)
{
	struct store_output o = { 0 };
	int rc;

	o.run_id = xstrdup(run_id);
	o.stage = xstrdup(stage);
	o.artifact = xstrdup(artifact);
	o.content = xstrdup(content);
	rc = store_output_add(s, &o, e);
	if (rc == 0)
		rc = o.version;
	store_output_release(&o);
	return rc;
}

/* The highest migration number among the embedded files. */
static int
latest_migration(void)
{
	const struct embedded_file *f;
	int latest = 0;

	for (f = embedded_files; f->name; f++) {
		size_t len = strlen(f->name);
		long n;

		if (len < 5 || strcmp(f->name + len - 4, ".sql"))
			continue;
		n = strtol(f->name, NULL, 10);
		if (n > latest)
			latest = (int)n;
	}
	return latest;
}

/* ---- the conformance cases --------------------------------------------- */

static void
case_create_allocates_seq(struct store *s, const char *spec)
{
	static const char *tasks[] = { "Add a --version flag",
				       "fix the flaky test", "third" };
	struct run r[3], got;
	struct events l;
	char *want;
	int i;

	(void)spec;
	for (i = 0; i < 3; i++) {
		make_run(s, tasks[i], "queued", &r[i]);
		ASSERT_EQ(r[i].seq, i + 1);
		want = run_id_make(i + 1, tasks[i]);
		ASSERT_STREQ(r[i].id, want);
		free(want);
		ASSERT_EQ(r[i].version, 1);
		ASSERT(r[i].created_at > 0);
		ASSERT_EQ(r[i].updated_at, r[i].created_at);
	}
	ASSERT_STREQ(r[0].id, "r1-add-a-version-flag");
	ASSERT_STREQ(r[1].id, "r2-fix-the-flaky-test");

	/* What the store returns is what it wrote. */
	get_run(s, r[2].id, &got);
	ASSERT_EQ(got.task_id, 0); /* a foreground run: no task */
	ASSERT_EQ(got.seq, 3);
	ASSERT_EQ(got.version, 1);
	ASSERT_EQ(got.created_at, r[2].created_at);
	ASSERT_EQ(got.updated_at, r[2].updated_at);
	run_release(&got);

	/* Each creation appended exactly one transition event. */
	for (i = 0; i < 3; i++) {
		list_events(s, r[i].id, 0, NULL, &l);
		ASSERT_EQ(l.n, 1);
		ASSERT_STREQ(l.ev[0].type, "transition");
		ASSERT(l.ev[0].from == NULL);
		ASSERT_STREQ(l.ev[0].to, "queued");
		ASSERT_STREQ(l.ev[0].run_id, r[i].id);
		ASSERT_EQ(l.ev[0].task_id, 0);
		events_release(&l);
		run_release(&r[i]);
	}

	/* A created_at and a task the caller chose are kept. */
	memset(&r[0], 0, sizeof(r[0]));
	run_set(&r[0].task, "imported");
	run_set(&r[0].status, "done");
	r[0].created_at = 1000;
	r[0].task_id = 7;
	{
		struct err e = ERR_INIT;

		ASSERT_OK(store_run_create(s, &r[0], &e), &e);
	}
	ASSERT_EQ(r[0].seq, 4);
	ASSERT_EQ(r[0].created_at, 1000);
	get_run(s, "r4", &got);
	ASSERT_EQ(got.created_at, 1000);
	ASSERT_EQ(got.task_id, 7);
	run_release(&got);
	run_release(&r[0]);
}

/*
 * A seq the caller asks for is a floor: the first number free outside the
 * store (run folders and branches of another store in the repository).
 * The store takes it when it is above its own next number, never below.
 */
static void
case_create_seq_floor(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct run r, got;

	(void)spec;
	memset(&r, 0, sizeof(r));
	run_set(&r.task, "after another store");
	run_set(&r.status, "queued");
	r.seq = 5;
	ASSERT_OK(store_run_create(s, &r, &e), &e);
	ASSERT_EQ(r.seq, 5);
	ASSERT_STREQ(r.id, "r5-after-another-store");
	get_run(s, "r5", &got);
	ASSERT_EQ(got.seq, 5);
	run_release(&got);
	run_release(&r);

	/* the store's own next number wins over a lower floor */
	memset(&r, 0, sizeof(r));
	run_set(&r.task, "lower");
	run_set(&r.status, "queued");
	r.seq = 2;
	ASSERT_OK(store_run_create(s, &r, &e), &e);
	ASSERT_EQ(r.seq, 6);
	run_release(&r);

	/* and no floor (0) is the next number */
	make_run(s, "plain", "queued", &r);
	ASSERT_EQ(r.seq, 7);
	run_release(&r);
}

static void
case_create_rejects_missing_fields(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };
	struct runs l = { 0 };

	(void)spec;
	run_set(&r.task, "no status");
	ASSERT_EQ(store_run_create(s, &r, &e), BATON_EINVAL);
	ASSERT(r.id == NULL);
	run_release(&r);
	list_runs(s, NULL, 0, &l);
	ASSERT_EQ(l.n, 0);
	runs_release(&l);
}

static void
case_get_by_ref(struct store *s, const char *spec)
{
	static const char *found[] = {
		"r2-fix-the-flaky-test", "r2", "2", "r2-fix", "r2-fi",
	};
	static const char *missing[] = {
		"r9", "9", "r2-nope", "fix", "r", "", "r2x", "r1-fix",
	};
	struct err e = ERR_INIT;
	struct run a, b, got;
	size_t i;

	(void)spec;
	make_run(s, "add a flag", "queued", &a);
	make_run(s, "fix the flaky test", "queued", &b);
	for (i = 0; i < ARRAY_SIZE(found); i++) {
		memset(&got, 0xa5, sizeof(got)); /* filled, never read */
		get_run(s, found[i], &got);
		ASSERT_STREQ(got.id, b.id);
		ASSERT_EQ(got.seq, 2);
		ASSERT_STREQ(got.task, "fix the flaky test");
		run_release(&got);
	}
	get_run(s, "1", &got);
	ASSERT_STREQ(got.id, "r1-add-a-flag");
	run_release(&got);
	for (i = 0; i < ARRAY_SIZE(missing); i++) {
		e = (struct err)ERR_INIT;
		ASSERT_EQ(store_run_get(s, missing[i], &got, &e),
			  BATON_ENOTFOUND);
		ASSERT_EQ(e.rc, BATON_ENOTFOUND);
	}
	e = (struct err)ERR_INIT;
	ASSERT_EQ(store_run_get(s, "r9", &got, &e), BATON_ENOTFOUND);
	ASSERT_STREQ(e.msg, "no run 'r9'");
	run_release(&a);
	run_release(&b);
}

static void
case_update_appends_event(struct store *s, const char *spec)
{
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct run r, got;
	struct events l;
	int64_t before;

	(void)spec;
	make_run(s, "update me", "queued", &r);
	before = r.updated_at;
	run_set(&r.status, "planning");
	run_set(&r.stage, "plan");
	run_set(&r.phase, RUN_PHASE_RUNNING);
	ev.type = xstrdup("transition");
	ev.from = xstrdup("queued");
	ev.to = xstrdup("planning");
	ev.data = xstrdup("{\"why\":\"leased\"}");
	ASSERT_OK(door_update(s, &r, "queued", &ev, &e), &e);
	ASSERT_EQ(r.version, 2);
	ASSERT(r.updated_at >= before);
	ASSERT(ev.seq > 0);
	ASSERT(ev.ts > 0);
	ASSERT(ev.run_id == NULL); /* meant r.id; nothing is allocated */

	get_run(s, "r1", &got);
	ASSERT_EQ(got.version, 2);
	ASSERT_EQ(got.updated_at, r.updated_at);
	ASSERT_STREQ(got.status, "planning");
	ASSERT_STREQ(got.stage, "plan");
	ASSERT_STREQ(got.phase, RUN_PHASE_RUNNING);
	run_release(&got);

	list_events(s, r.id, 0, NULL, &l);
	ASSERT_EQ(l.n, 2);
	ASSERT_STREQ(l.ev[0].to, "queued");
	ASSERT_EQ(l.ev[1].seq, ev.seq);
	ASSERT_EQ(l.ev[1].ts, ev.ts);
	ASSERT_STREQ(l.ev[1].from, "queued");
	ASSERT_STREQ(l.ev[1].to, "planning");
	ASSERT_STREQ(l.ev[1].data, "{\"why\":\"leased\"}");
	events_release(&l);
	event_release(&ev);

	/* Without an event only the row changes; a given ts is kept. */
	run_set(&r.phase, RUN_PHASE_DONE);
	ASSERT_OK(store_run_update(s, &r, NULL, &e), &e);
	ASSERT_EQ(r.version, 3);
	ASSERT_EQ(count_events(s, r.id, NULL), 2);
	memset(&ev, 0, sizeof(ev));
	ev.type = xstrdup("steer");
	ev.ts = 42;
	ASSERT_OK(store_run_update(s, &r, &ev, &e), &e);
	ASSERT_EQ(ev.ts, 42);
	list_events(s, r.id, 0, "steer", &l);
	ASSERT_EQ(l.n, 1);
	ASSERT_EQ(l.ev[0].ts, 42);
	events_release(&l);
	event_release(&ev);
	run_release(&r);
}

static void
case_update_stale_conflicts(struct store *s, const char *spec)
{
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct run r, other, got, ghost = { 0 };

	(void)spec;
	make_run(s, "contested", "queued", &r);
	run_copy(&other, &r);
	run_set(&other.status, "planning");
	ASSERT_OK(door_update(s, &other, "queued", NULL, &e), &e);

	run_set(&r.status, "aborted");
	run_set(&r.reason, "stale writer");
	ev.type = xstrdup("transition");
	ev.to = xstrdup("aborted");
	ASSERT_EQ(store_run_update(s, &r, &ev, &e), BATON_ECONFLICT);
	ASSERT_CONTAINS(e.msg, "run 'r1-contested' changed concurrently");
	ASSERT_CONTAINS(e.msg, "(expected version 1)");
	ASSERT_EQ(r.version, 1); /* untouched */
	ASSERT_EQ(ev.seq, 0);
	ASSERT(ev.run_id == NULL);

	get_run(s, r.id, &got);
	ASSERT_EQ(got.version, 2);
	ASSERT_STREQ(got.status, "planning");
	ASSERT(got.reason == NULL);
	run_release(&got);
	ASSERT_EQ(count_events(s, r.id, NULL), 1);

	/* A run that does not exist is not a conflict. */
	run_set(&ghost.id, "r99-ghost");
	run_set(&ghost.status, "queued");
	ghost.version = 1;
	e = (struct err)ERR_INIT;
	ASSERT_EQ(store_run_update(s, &ghost, &ev, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "r99-ghost");
	ASSERT_EQ(count_events(s, NULL, NULL), 1);

	run_release(&ghost);
	event_release(&ev);
	run_release(&r);
	run_release(&other);
}

/* r (as read) was refused with BATON_EBADSTATE and nothing was written. */
static void
assert_refused(struct store *s, struct run *r, int rc, const struct err *e,
	       const char *msg)
{
	struct run got;

	ASSERT_EQ(rc, BATON_EBADSTATE);
	ASSERT_CONTAINS(e->msg, msg);
	ASSERT_EQ(r->version, 1);
	get_run(s, r->id, &got);
	ASSERT_EQ(got.version, 1);
	ASSERT_STREQ(got.status, "created");
	run_release(&got);
	ASSERT_EQ(count_events(s, r->id, NULL), 1);
}

/*
 * A run's status changes only with the transition door's move, along an
 * edge of its pipeline's table, from the status it has: the store
 * refuses everything else and writes nothing.
 */
static void
case_status_only_through_the_door(struct store *s, const char *spec)
{
	struct pipeline *p = NULL, *other = NULL;
	struct run_move mv;
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct run r, got;

	(void)spec;
	ASSERT_OK(pipeline_load(NULL, "feature", &p, &e), &e);
	ASSERT_OK(pipeline_load(NULL, "bugfix", &other, &e), &e);
	memset(&r, 0, sizeof(r));
	run_set(&r.task, "door");
	run_set(&r.status, "created");
	run_set(&r.pipeline, "feature");
	ASSERT_OK(store_run_create(s, &r, &e), &e);
	ev.type = xstrdup("transition");

	/* Not handed by the door: a plain update that changes the status. */
	run_set(&r.status, "planning");
	assert_refused(s, &r, store_run_update(s, &r, &ev, &e), &e,
		       "run 'r1-door': status 'created' -> 'planning' was "
		       "not handed by the transition door");
	ASSERT_EQ(ev.seq, 0);
	/* ... nor a move of NULL */
	assert_refused(s, &r, store_run_move(s, &r, NULL, &ev, &e), &e,
		       "needs the transition door's move");

	/* A move that is not in the table. */
	run_set(&r.status, "merge_ready");
	mv = (struct run_move){ p, "created", "merge_ready" };
	assert_refused(s, &r, store_run_move(s, &r, &mv, &ev, &e), &e,
		       "run 'r1-door': illegal transition 'created' -> "
		       "'merge_ready' in pipeline 'feature'");
	/* A move to another status than the one written. */
	mv = (struct run_move){ p, "created", "planning" };
	assert_refused(s, &r, store_run_move(s, &r, &mv, &ev, &e), &e,
		       "does not lead to 'merge_ready'");
	/* A move of another pipeline's table. */
	run_set(&r.status, "analyzing_1");
	mv = (struct run_move){ other, "created", "analyzing_1" };
	assert_refused(s, &r, store_run_move(s, &r, &mv, &ev, &e), &e,
		       "comes from pipeline 'bugfix', not the run's "
		       "'feature'");
	/* A legal move that starts from another status than the stored. */
	run_set(&r.status, "aborted");
	mv = (struct run_move){ p, "planning", "aborted" };
	assert_refused(s, &r, store_run_move(s, &r, &mv, &ev, &e), &e,
		       "run 'r1-door' is 'created': the move 'planning' -> "
		       "'aborted' handed by the transition door starts "
		       "elsewhere");

	/* The door's move goes through, with its event. */
	run_set(&r.status, "planning");
	mv = (struct run_move){ p, "created", "planning" };
	ASSERT_OK(store_run_move(s, &r, &mv, &ev, &e), &e);
	ASSERT_EQ(r.version, 2);
	ASSERT(ev.seq > 0);
	get_run(s, r.id, &got);
	ASSERT_STREQ(got.status, "planning");
	run_release(&got);
	/* and an update that keeps the status still does */
	run_set(&r.phase, RUN_PHASE_RUNNING);
	ASSERT_OK(store_run_update(s, &r, NULL, &e), &e);
	ASSERT_EQ(r.version, 3);

	event_release(&ev);
	run_release(&r);
	pipeline_free(p);
	pipeline_free(other);
}

static void
case_two_handles_race(struct store *s, const char *spec)
{
	struct store *s2 = open_spec(spec);
	struct err e = ERR_INIT;
	struct run r, a, b, got;
	struct event ea = { 0 }, eb = { 0 };

	make_run(s, "raced", "queued", &r);
	get_run(s, "r1", &a);
	get_run(s2, "r1", &b);
	ASSERT_EQ(a.version, 1);
	ASSERT_EQ(b.version, 1);

	run_set(&a.status, "planning");
	run_set(&b.status, "aborted");
	ea.type = xstrdup("transition");
	eb.type = xstrdup("transition");
	ASSERT_OK(door_update(s, &a, "queued", &ea, &e), &e);
	ASSERT_EQ(door_update(s2, &b, "queued", &eb, &e), BATON_ECONFLICT);

	get_run(s2, "r1", &got);
	ASSERT_EQ(got.version, 2);
	ASSERT_STREQ(got.status, "planning");
	run_release(&got);
	ASSERT_EQ(count_events(s2, r.id, NULL), 2);

	/* The loser re-reads and decides again. */
	run_release(&b);
	get_run(s2, "r1", &b);
	run_set(&b.status, "aborted");
	ASSERT_OK(door_update(s2, &b, "planning", &eb, &e), &e);
	ASSERT_EQ(b.version, 3);
	get_run(s, "r1", &got);
	ASSERT_STREQ(got.status, "aborted");
	run_release(&got);

	event_release(&ea);
	event_release(&eb);
	run_release(&r);
	run_release(&a);
	run_release(&b);
	store_close(s2);
}

static void
case_requests_keep_version(struct store *s, const char *spec)
{
	struct store *person = open_spec(spec);
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	struct run driver, got;

	make_run(s, "pause me", "running", &driver);

	/* Another process asks for a pause while the driver works. */
	ev.type = xstrdup("pause_requested");
	ASSERT_OK(store_run_request(person, driver.id, "pause_requested", 1,
				    &ev, &e),
		  &e);
	ASSERT(ev.seq > 0);
	ASSERT(ev.ts > 0);
	ASSERT(ev.run_id == NULL); /* meant driver.id; nothing allocated */
	event_release(&ev);
	get_run(s, "r1", &got);
	ASSERT_EQ(got.version, 1);
	ASSERT_EQ(got.pause_requested, 1);
	ASSERT_EQ(got.abort_requested, 0);
	run_release(&got);

	/* The driver's next write does not conflict and keeps the flag. */
	run_set(&driver.stage, "build");
	ASSERT_EQ(driver.pause_requested, 0);
	ASSERT_OK(store_run_update(s, &driver, NULL, &e), &e);
	ASSERT_EQ(driver.version, 2);
	get_run(s, "r1", &got);
	ASSERT_EQ(got.pause_requested, 1);
	ASSERT_STREQ(got.stage, "build");
	run_release(&got);
	ASSERT_EQ(count_events(s, driver.id, "pause_requested"), 1);

	/* Clearing, with no event. */
	ASSERT_OK(store_run_request(s, driver.id, "pause_requested", 0, NULL,
				    &e),
		  &e);
	ASSERT_OK(store_run_request(s, driver.id, "abort_requested", 1, NULL,
				    &e),
		  &e);
	get_run(s, "r1", &got);
	ASSERT_EQ(got.pause_requested, 0);
	ASSERT_EQ(got.abort_requested, 1);
	ASSERT_EQ(got.version, 2);
	run_release(&got);
	ASSERT_EQ(count_events(s, driver.id, NULL), 2);

	ASSERT_EQ(store_run_request(s, "r9-ghost", "abort_requested", 1, NULL,
				    &e),
		  BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "r9-ghost");
	ASSERT_EQ(store_run_request(s, driver.id, "status", 1, NULL, &e),
		  BATON_EINVAL);
	ASSERT_EQ(store_run_request(s, driver.id, "version", 1, NULL, &e),
		  BATON_EINVAL);
	run_release(&driver);
	store_close(person);
}

static void
case_fault_rolls_back(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	struct outputs o = { 0 };
	struct runs l = { 0 };
	struct run r = { 0 }, got;

	(void)spec;
	/* Write 1: the creation fails, leaving no run and no event. */
	setenv("BATON_FAULT_STORE", "1", 1);
	run_set(&r.task, "doomed");
	run_set(&r.status, "queued");
	ASSERT_EQ(store_run_create(s, &r, &e), BATON_ESTORE);
	ASSERT_CONTAINS(e.msg, "injected fault");
	ASSERT(r.id == NULL);
	ASSERT_EQ(r.seq, 0);
	run_release(&r);
	list_runs(s, NULL, 0, &l);
	ASSERT_EQ(l.n, 0);
	runs_release(&l);
	ASSERT_EQ(count_events(s, NULL, NULL), 0);

	/* Writes 2 and 3 succeed; write 4, an update, fails whole. */
	setenv("BATON_FAULT_STORE", "4", 1);
	make_run(s, "survivor", "queued", &r);
	ASSERT_EQ(r.seq, 1);
	ev.run_id = xstrdup(r.id);
	ev.type = xstrdup("steer");
	ASSERT_OK(store_event_add(s, &ev, &e), &e);
	event_release(&ev);
	memset(&ev, 0, sizeof(ev));

	run_set(&r.status, "planning");
	ev.type = xstrdup("transition");
	ev.to = xstrdup("planning");
	e = (struct err)ERR_INIT;
	ASSERT_EQ(door_update(s, &r, "queued", &ev, &e), BATON_ESTORE);
	ASSERT_CONTAINS(e.msg, "cannot update run 'r1-survivor'");
	ASSERT_EQ(r.version, 1);
	ASSERT_EQ(ev.seq, 0);
	get_run(s, "r1", &got);
	ASSERT_EQ(got.version, 1);
	ASSERT_STREQ(got.status, "queued");
	run_release(&got);
	ASSERT_EQ(events_seen(s, r.id, NULL, 2), 2);
	ASSERT_EQ(events_seen(s, NULL, "transition", 1), 1);

	/* Write 5 adds an output; write 6 fails and adds nothing. */
	setenv("BATON_FAULT_STORE", "6", 1);
	ASSERT_EQ(add_output(s, r.id, "plan", "plan.md", "one", &e), 1);
	ASSERT_EQ(add_output(s, r.id, "plan", "plan.md", "two", &e),
		  BATON_ESTORE);
	ASSERT_OK(store_output_list(s, r.id, collect_output, &o, &e), &e);
	ASSERT_EQ(o.n, 1);
	ASSERT_STREQ(o.o[0].content, "one");
	outputs_release(&o);

	/* Write 7 (an event on its own) fails, and so does 8, a request
	 * with its event; 9 and on are back to normal. */
	setenv("BATON_FAULT_STORE", "7", 1);
	ASSERT_EQ(store_event_add(s, &ev, &e), BATON_ESTORE);
	ASSERT_EQ(ev.seq, 0);
	ASSERT_EQ(events_seen(s, NULL, NULL, 2), 2);
	setenv("BATON_FAULT_STORE", "8", 1);
	ASSERT_EQ(store_run_request(s, r.id, "abort_requested", 1, &ev, &e),
		  BATON_ESTORE);
	ASSERT_EQ(ev.seq, 0);
	get_run(s, "r1", &got);
	ASSERT_EQ(got.abort_requested, 0);
	run_release(&got);
	ASSERT_EQ(events_seen(s, NULL, NULL, 2), 2);
	unsetenv("BATON_FAULT_STORE");
	ASSERT_OK(door_update(s, &r, "queued", &ev, &e), &e);
	ASSERT_EQ(r.version, 2);
	ASSERT_EQ(events_seen(s, r.id, NULL, 3), 3);

	event_release(&ev);
	run_release(&r);
}

static void
case_events_global_seq(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct run a, b;
	struct events l;
	int64_t prev, mid;
	int i;

	(void)spec;
	make_run(s, "alpha", "queued", &a);
	make_run(s, "beta", "queued", &b);
	for (i = 0; i < 150; i++) {
		struct event ev = { 0 };

		ev.run_id = xstrdup(i % 3 == 2 ? b.id : a.id);
		ev.type = xstrdup(i % 2 ? "steer" : "agent_output");
		if (i == 75) /* one event of no run */
			FREE_AND_NULL(ev.run_id);
		ASSERT_OK(store_event_add(s, &ev, &e), &e);
		ASSERT(ev.seq > 0);
		ASSERT(ev.ts > 0);
		event_release(&ev);
	}

	/* All of them, across pages, in strictly increasing seq order. */
	list_events(s, NULL, 0, NULL, &l);
	ASSERT_EQ(l.n, 152);
	for (prev = 0, i = 0; i < l.n; i++) {
		ASSERT(l.ev[i].seq > prev);
		prev = l.ev[i].seq;
	}
	ASSERT(l.ev[77].run_id == NULL);
	mid = l.ev[100].seq;
	events_release(&l);

	list_events(s, a.id, 0, NULL, &l);
	ASSERT_EQ(l.n, 1 + 99);
	for (prev = 0, i = 0; i < l.n; i++) {
		ASSERT_STREQ(l.ev[i].run_id, a.id);
		ASSERT(l.ev[i].seq > prev);
		prev = l.ev[i].seq;
	}
	events_release(&l);
	ASSERT_EQ(count_events(s, b.id, NULL), 1 + 50);
	ASSERT_EQ(count_events(s, NULL, "steer"), 75);
	ASSERT_EQ(count_events(s, NULL, "transition"), 2);
	ASSERT_EQ(count_events(s, b.id, "transition"), 1);
	ASSERT_EQ(count_events(s, "r9-nothing", NULL), 0);

	list_events(s, NULL, mid, NULL, &l);
	ASSERT_EQ(l.n, 51);
	ASSERT(l.ev[0].seq > mid);
	events_release(&l);

	/* A callback that returns nonzero stops the list, which is not an
	 * error. */
	memset(&l, 0, sizeof(l));
	l.stop_after = 3;
	ASSERT_OK(store_event_list(s, NULL, 0, NULL, collect_event, &l, &e),
		  &e);
	ASSERT_EQ(l.n, 3);
	events_release(&l);

	/* An event of a run that does not exist is refused. */
	{
		struct event ev = { 0 };

		ev.run_id = xstrdup("r9-nothing");
		ev.type = xstrdup("agent_output");
		ASSERT_EQ(store_event_add(s, &ev, &e), BATON_ENOTFOUND);
		ASSERT_CONTAINS(e.msg, "r9-nothing");
		event_release(&ev);
	}
	run_release(&a);
	run_release(&b);
}

static void
case_outputs_versioned(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct store_output o = { 0 };
	struct outputs l = { 0 };
	struct run r, r2;

	(void)spec;
	make_run(s, "write a plan", "planning", &r);
	make_run(s, "another", "planning", &r2);
	ASSERT_EQ(add_output(s, r.id, "plan", "plan.md", "v1", &e), 1);
	ASSERT_EQ(add_output(s, r.id, "plan", "plan.md", "v2", &e), 2);
	ASSERT_EQ(add_output(s, r2.id, "plan", "plan.md", "other", &e), 1);
	ASSERT_EQ(add_output(s, r.id, "review", "review.md", "ok", &e), 1);

	o.run_id = xstrdup(r.id);
	o.stage = xstrdup("plan");
	o.artifact = xstrdup("plan.md");
	o.decision = xstrdup("APPROVED");
	o.content = xstrdup("v3");
	ASSERT_OK(store_output_add(s, &o, &e), &e);
	ASSERT_EQ(o.version, 3);
	ASSERT(o.created_at > 0);
	store_output_release(&o);

	ASSERT_OK(store_output_list(s, r.id, collect_output, &l, &e), &e);
	ASSERT_EQ(l.n, 4);
	ASSERT_STREQ(l.o[0].content, "v1");
	ASSERT_EQ(l.o[0].version, 1);
	ASSERT(l.o[0].decision == NULL);
	ASSERT_STREQ(l.o[1].content, "v2");
	ASSERT_EQ(l.o[1].version, 2);
	ASSERT_STREQ(l.o[2].stage, "review");
	ASSERT_STREQ(l.o[2].artifact, "review.md");
	ASSERT_EQ(l.o[2].version, 1);
	ASSERT_STREQ(l.o[3].content, "v3");
	ASSERT_STREQ(l.o[3].decision, "APPROVED");
	ASSERT_EQ(l.o[3].version, 3);
	ASSERT_STREQ(l.o[3].run_id, r.id);
	ASSERT(l.o[3].created_at > 0);
	outputs_release(&l);

	ASSERT_EQ(add_output(s, "r9-nothing", "plan", "plan.md", "x", &e),
		  BATON_ENOTFOUND);
	run_release(&r);
	run_release(&r2);
}

static void
case_migrations_stable(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct store *again;
	struct run r, got;
	int v, i;

	make_run(s, "persist", "queued", &r);
	v = store_schema_version(s, &e);
	ASSERT(v >= 1);
	ASSERT_EQ(v, latest_migration());
	for (i = 0; i < 3; i++) {
		again = open_spec(spec);
		ASSERT_EQ(store_schema_version(again, &e), v);
		get_run(again, "r1", &got);
		ASSERT_STREQ(got.id, r.id);
		run_release(&got);
		store_close(again);
	}
	ASSERT_EQ(store_schema_version(s, &e), v);
	run_release(&r);
}

/* Every field of struct run set to a value no other field has. */
static void
fill_run(struct run *r, int salt)
{
	char v[64];

#define SET(f)                                                                 \
	snprintf(v, sizeof(v), "%s-%d 'q\" é", #f, salt);                     \
	run_set(&r->f, v);
	SET(pipeline) SET(status) SET(stage) SET(phase)
	SET(paused_at_status) SET(gate_status) SET(gate_back) SET(reason)
	SET(worktree) SET(branch) SET(base_ref) SET(base_commit)
	SET(checkpoint) SET(config_hash) SET(config_snapshot) SET(outcome)
	SET(progress)
#undef SET
	r->review_loops = 1 + salt;
	r->max_review_loops = 2 + salt;
	r->pause_requested = 3 + salt;
	r->abort_requested = 4 + salt;
	r->attempt = 5 + salt;
	r->agent_pid = 6 + salt + 4000000000LL;
	r->steer_seq = 7 + salt;
	r->tokens_in = 8 + salt + 5000000000LL;
	r->tokens_out = 9 + salt;
	r->cost_usd = 1.25 + salt;
	r->started_at = 10 + salt;
	r->phase_started_at = 11 + salt;
	r->ended_at = 12 + salt;
	r->task_id = 13 + salt + 6000000000LL;
}

static void
assert_same_run(const struct run *a, const struct run *b)
{
#define SAME_STR(f)                                                            \
	if (a->f || b->f)                                                      \
		ASSERT_STREQ(a->f, b->f);
#define SAME_NUM(f) ASSERT_EQ(a->f, b->f);
	SAME_STR(id) SAME_STR(task) SAME_STR(pipeline) SAME_STR(status)
	SAME_STR(stage) SAME_STR(phase) SAME_STR(paused_at_status)
	SAME_STR(gate_status) SAME_STR(gate_back) SAME_STR(reason)
	SAME_STR(worktree) SAME_STR(branch) SAME_STR(base_ref)
	SAME_STR(base_commit) SAME_STR(checkpoint) SAME_STR(config_hash)
	SAME_STR(config_snapshot) SAME_STR(outcome) SAME_STR(progress)
	SAME_NUM(seq) SAME_NUM(review_loops) SAME_NUM(max_review_loops)
	SAME_NUM(pause_requested) SAME_NUM(abort_requested) SAME_NUM(attempt)
	SAME_NUM(agent_pid) SAME_NUM(steer_seq) SAME_NUM(tokens_in)
	SAME_NUM(tokens_out) SAME_NUM(created_at) SAME_NUM(started_at)
	SAME_NUM(phase_started_at) SAME_NUM(updated_at) SAME_NUM(ended_at)
	SAME_NUM(version) SAME_NUM(task_id)
#undef SAME_STR
#undef SAME_NUM
	ASSERT(a->cost_usd == b->cost_usd);
}

static void
case_run_fields_roundtrip(struct store *s, const char *spec)
{
	char *from;
	struct err e = ERR_INIT;
	struct run r = { 0 }, got;
	struct events l;

	(void)spec;
	run_set(&r.task, "Round-trip every field: 'quotes', \"dq\", ünïcode");
	fill_run(&r, 0);
	ASSERT_OK(store_run_create(s, &r, &e), &e);
	get_run(s, r.id, &got);
	assert_same_run(&got, &r);
	ASSERT_EQ(got.cost_usd * 100, 125);
	ASSERT_EQ(got.task_id, 6000000013LL);
	run_release(&got);
	/* The creation event is about the run's task too. */
	list_events(s, r.id, 0, NULL, &l);
	ASSERT_EQ(l.n, 1);
	ASSERT_EQ(l.ev[0].task_id, r.task_id);
	events_release(&l);

	/* An update writes every field but the two request flags. */
	from = xstrdup(r.status);
	fill_run(&r, 100);
	ASSERT_OK(door_update(s, &r, from, NULL, &e), &e);
	free(from);
	get_run(s, "r1", &got);
	ASSERT_EQ(got.pause_requested, 3);
	ASSERT_EQ(got.abort_requested, 4);
	got.pause_requested = r.pause_requested;
	got.abort_requested = r.abort_requested;
	assert_same_run(&got, &r);
	ASSERT_EQ(got.tokens_in, 5000000108LL);
	run_release(&got);
	r.pause_requested = 3;
	r.abort_requested = 4;

	/* Clearing strings stores NULL, not "". */
	run_set(&r.stage, NULL);
	run_set(&r.reason, NULL);
	r.cost_usd = 0;
	ASSERT_OK(store_run_update(s, &r, NULL, &e), &e);
	get_run(s, "r1", &got);
	ASSERT(got.stage == NULL);
	ASSERT(got.reason == NULL);
	assert_same_run(&got, &r);
	run_release(&got);
	run_release(&r);
}

static void
case_list_status_limit(struct store *s, const char *spec)
{
	struct runs l = { 0 };
	struct run r;
	int i;

	(void)spec;
	for (i = 1; i <= 150; i++) {
		make_run(s, "job", i % 3 ? "queued" : "running", &r);
		run_release(&r);
	}
	list_runs(s, NULL, 0, &l);
	ASSERT_EQ(l.n, 150);
	for (i = 0; i < l.n; i++)
		ASSERT_EQ(l.r[i].seq, 150 - i);
	runs_release(&l);

	list_runs(s, "running", 0, &l);
	ASSERT_EQ(l.n, 50);
	for (i = 0; i < l.n; i++) {
		ASSERT_EQ(l.r[i].seq, 150 - 3 * i);
		ASSERT_STREQ(l.r[i].status, "running");
	}
	runs_release(&l);

	list_runs(s, "queued", 70, &l);
	ASSERT_EQ(l.n, 70);
	ASSERT_EQ(l.r[0].seq, 149);
	ASSERT_EQ(l.r[1].seq, 148);
	ASSERT_EQ(l.r[2].seq, 146);
	runs_release(&l);

	list_runs(s, NULL, 2, &l);
	ASSERT_EQ(l.n, 2);
	ASSERT_EQ(l.r[0].seq, 150);
	ASSERT_EQ(l.r[1].seq, 149);
	runs_release(&l);

	list_runs(s, "nobody", 0, &l);
	ASSERT_EQ(l.n, 0);
	runs_release(&l);

	l.stop_after = 1;
	list_runs(s, NULL, 0, &l);
	ASSERT_EQ(l.n, 1);
	runs_release(&l);
}

/* A brief list (what status shows) has those fields as the full one. */
static void
case_list_brief(struct store *s, const char *spec)
{
	struct store_run_filter f = { NULL, 0, 1 };
	struct runs full = { 0 }, brief = { 0 };
	struct err e = ERR_INIT;
	struct run r;
	int i;

	(void)spec;
	for (i = 1; i <= 70; i++) {
		make_run(s, "a long task text", i % 2 ? "queued" : "blocked",
			 &r);
		run_set(&r.stage, i % 3 ? "review" : NULL);
		run_set(&r.outcome, i % 2 ? NULL : "max_iterations_reached");
		run_set(&r.progress, "{\"stages\": []}");
		r.review_loops = i % 4;
		r.cost_usd = i / 64.0;
		ASSERT_OK(store_run_update(s, &r, NULL, &e), &e);
		if (i % 5 == 0)
			ASSERT_OK(store_run_request(s, r.id, "pause_requested",
						    1, NULL, &e), &e);
		run_release(&r);
	}
	list_runs(s, NULL, 0, &full);
	ASSERT_OK(store_run_list(s, &f, collect_run, &brief, &e), &e);
	ASSERT_EQ(brief.n, 70);
	ASSERT_EQ(full.n, 70);
	for (i = 0; i < brief.n; i++) {
		const struct run *a = &full.r[i], *b = &brief.r[i];

		ASSERT_EQ(b->seq, a->seq);
		ASSERT_STREQ(b->id, a->id);
		ASSERT_STREQ(b->status, a->status);
		ASSERT_EQ(!b->outcome, !a->outcome);
		if (a->outcome)
			ASSERT_STREQ(b->outcome, a->outcome);
		ASSERT_EQ(!b->stage, !a->stage);
		if (a->stage)
			ASSERT_STREQ(b->stage, a->stage);
		ASSERT_EQ(b->created_at, a->created_at);
		ASSERT_EQ(b->review_loops, a->review_loops);
		ASSERT_EQ(b->max_review_loops, a->max_review_loops);
		ASSERT(b->cost_usd == a->cost_usd);
		ASSERT_EQ(b->pause_requested, a->pause_requested);
	}
	ASSERT(full.r[0].pause_requested || full.r[1].pause_requested ||
	       full.r[4].pause_requested);
	runs_release(&full);
	runs_release(&brief);
	f.status = "blocked";
	ASSERT_OK(store_run_list(s, &f, collect_run, &brief, &e), &e);
	ASSERT_EQ(brief.n, 35);
	ASSERT_STREQ(brief.r[0].status, "blocked");
	runs_release(&brief);
}

static void
case_callbacks_may_write(struct store *s, const char *spec)
{
	struct runs l = { 0 };
	struct run r, got;
	int i;

	(void)spec;
	for (i = 0; i < 70; i++) {
		make_run(s, "touch me", "queued", &r);
		run_release(&r);
	}
	l.write_to = s;
	list_runs(s, "queued", 0, &l);
	ASSERT_EQ(l.n, 70);
	runs_release(&l);
	get_run(s, "r70", &got);
	ASSERT_EQ(got.version, 2);
	ASSERT_STREQ(got.reason, "touched from a callback");
	run_release(&got);
	get_run(s, "r1", &got);
	ASSERT_EQ(got.version, 2);
	run_release(&got);
}

#define RACERS 2
#define RACER_UPDATES 200

/*
 * One racer: RACER_UPDATES updates of run r1 through its own store
 * handle, re-reading whenever another process got there first. Exits 0
 * when all landed.
 */
static void
racer(const char *spec, int who)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	struct run r;
	int done = 0, rc, conflicts = 0;

	if (store_open(spec, &s, &e) < 0) {
		fprintf(stderr, "racer %d: %s\n", who, e.msg);
		_exit(2);
	}
	while (done < RACER_UPDATES) {
		struct event ev = { 0 };

		if (store_run_get(s, "r1", &r, &e) < 0) {
			fprintf(stderr, "racer %d: %s\n", who, e.msg);
			_exit(3);
		}
		r.tokens_in++;
		ev.type = xstrdup("agent_output");
		ev.data = xasprintf("{\"racer\":%d}", who);
		rc = store_run_update(s, &r, &ev, &e);
		if (rc == 0) {
			done++;
		} else if (rc == BATON_ECONFLICT) {
			conflicts++;
		} else {
			fprintf(stderr, "racer %d: %s\n", who, e.msg);
			_exit(4);
		}
		event_release(&ev);
		run_release(&r);
	}
	store_close(s);
	_exit(0);
}

static void
case_processes_race(struct store *s, const char *spec)
{
	pid_t pids[RACERS];
	struct run r, got;
	int i, status;

	make_run(s, "contended", "running", &r);
	fflush(NULL);
	for (i = 0; i < RACERS; i++) {
		pids[i] = fork();
		ASSERT(pids[i] >= 0);
		if (pids[i] == 0)
			racer(spec, i); /* never returns */
	}
	for (i = 0; i < RACERS; i++) {
		ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
		ASSERT(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
	}
	get_run(s, "r1", &got);
	ASSERT_EQ(got.version, 1 + RACERS * RACER_UPDATES);
	ASSERT_EQ(got.tokens_in, RACERS * RACER_UPDATES);
	run_release(&got);
	ASSERT_EQ(count_events(s, r.id, "agent_output"), RACERS * RACER_UPDATES);
	ASSERT_EQ(count_events(s, r.id, NULL), 1 + RACERS * RACER_UPDATES);
	run_release(&r);
}

/*
 * A webhook delivery id is recorded once: the first sighting says 1,
 * a redelivery 0, through this handle or another one on the store.
 */
static void
case_forge_delivery_once(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct store *other = open_spec(spec);

	ASSERT_EQ(store_forge_delivery_seen(s, "d-1", "issues", &e), 1);
	ASSERT_EQ(store_forge_delivery_seen(s, "d-1", "issues", &e), 0);
	ASSERT_EQ(store_forge_delivery_seen(other, "d-1", NULL, &e), 0);
	ASSERT_EQ(store_forge_delivery_seen(other, "d-2", NULL, &e), 1);
	ASSERT_EQ(store_forge_delivery_seen(s, "d-2", "status", &e), 0);
	ASSERT_EQ(store_forge_delivery_seen(s, "", NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "no delivery id");
	store_close(other);
}

/* ---- the forge's links, cursors and counters ------------------------ */

/* A task as intake makes one, from issue n of owner/app. */
static void
issue_task(struct task *t, struct forge_link *l, int64_t n)
{
	memset(t, 0, sizeof(*t));
	memset(l, 0, sizeof(*l));
	t->title = xasprintf("issue %lld", (long long)n);
	t->body = xstrdup("the issue's body");
	t->origin = xstrdup("forge");
	l->repo = xstrdup("owner/app");
	l->issue_number = n;
	l->issue_url = xasprintf("https://github.com/owner/app/issues/%lld",
				 (long long)n);
}

static int
count_task(const struct task *t, void *arg)
{
	(void)t;
	(*(int *)arg)++;
	return 0;
}

static int
count_tasks(struct store *s)
{
	struct err e = ERR_INIT;
	int n = 0;

	ASSERT_OK(store_task_list(s, NULL, count_task, &n, &e), &e);
	return n;
}

/*
 * Intake makes the task, its link and its event together, once per
 * issue: a second intake of the issue (through this handle or another)
 * writes nothing and names the task that has it. An injected fault
 * leaves nothing behind.
 */
static void
case_forge_intake_once(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct store *other = open_spec(spec);
	struct task t, again, got;
	struct forge_link l, l2, link;
	struct event ev = { 0 }, ev2 = { 0 };
	struct events evs;

	issue_task(&t, &l, 12);
	ev.type = xstrdup("task_added");
	ev.data = xstrdup("{\"issue\":12}");
	ASSERT_EQ(store_forge_intake(s, &t, &l, &ev, &e), 1);
	ASSERT(t.id > 0);
	ASSERT_EQ(t.version, 1);
	ASSERT_STREQ(t.status, TASK_QUEUED);
	ASSERT_STREQ(t.kind, "code");
	ASSERT_EQ(ev.task_id, t.id);
	ASSERT(ev.seq > 0);
	ASSERT_EQ(l.task_id, t.id);
	ASSERT_EQ(l.version, 1);
	ASSERT(l.created_at > 0);

	ASSERT_OK(store_task_get(s, t.id, &got, &e), &e);
	ASSERT_STREQ(got.title, "issue 12");
	ASSERT_STREQ(got.origin, "forge");
	task_release(&got);
	ASSERT_OK(store_forge_link_get(other, t.id, &link, &e), &e);
	ASSERT_EQ(link.task_id, t.id);
	ASSERT_STREQ(link.repo, "owner/app");
	ASSERT_EQ(link.issue_number, 12);
	ASSERT_STREQ(link.issue_url, "https://github.com/owner/app/issues/12");
	ASSERT_EQ(link.pr_number, 0);
	ASSERT(link.pr_url == NULL);
	ASSERT(link.checks == NULL);
	ASSERT_EQ(link.reaction_rounds, 0);
	ASSERT_EQ(link.version, 1);
	forge_link_release(&link);

	/* the same issue again, from another handle: nothing written */
	issue_task(&again, &l2, 12);
	ev2.type = xstrdup("task_added");
	ASSERT_EQ(store_forge_intake(other, &again, &l2, &ev2, &e), 0);
	ASSERT_EQ(again.id, t.id);
	ASSERT_EQ(again.version, 0);
	ASSERT_EQ(l2.task_id, 0);
	ASSERT_EQ(ev2.seq, 0);
	ASSERT_EQ(count_tasks(s), 1);
	list_events(s, NULL, 0, "task_added", &evs);
	ASSERT_EQ(evs.n, 1);
	ASSERT_EQ(evs.ev[0].task_id, t.id);
	events_release(&evs);
	task_release(&again);
	forge_link_release(&l2);

	/* the same number in another repository is another issue */
	issue_task(&again, &l2, 12);
	free(l2.repo);
	l2.repo = xstrdup("owner/lib");
	ASSERT_EQ(store_forge_intake(s, &again, &l2, NULL, &e), 1);
	ASSERT(again.id != t.id);
	task_release(&again);
	forge_link_release(&l2);

	/* a fault after every statement ran: no task, no link, no event */
	issue_task(&again, &l2, 13);
	setenv("BATON_FAULT_STORE", "4", 1);
	ASSERT_EQ(store_forge_intake(s, &again, &l2, &ev2, &e), BATON_ESTORE);
	unsetenv("BATON_FAULT_STORE");
	ASSERT_CONTAINS(e.msg, "issue #13 of owner/app");
	ASSERT_EQ(again.id, 0);
	ASSERT_EQ(count_tasks(s), 2);
	list_events(s, NULL, 0, "task_added", &evs);
	ASSERT_EQ(evs.n, 1);
	events_release(&evs);
	ASSERT_EQ(store_forge_intake(s, &again, &l2, NULL, &e), 1);
	ASSERT_EQ(count_tasks(s), 3);
	task_release(&again);
	forge_link_release(&l2);

	/* bad input is refused before the database */
	issue_task(&again, &l2, 0);
	ASSERT_EQ(store_forge_intake(s, &again, &l2, NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "no issue number");
	task_release(&again);
	forge_link_release(&l2);

	event_release(&ev);
	event_release(&ev2);
	task_release(&t);
	forge_link_release(&l);
	store_close(other);
}

/* A plain task for a link to point at. */
static int64_t
add_task(struct store *s, const char *title)
{
	struct err e = ERR_INIT;
	struct task t = { 0 };
	int64_t id;

	t.title = xstrdup(title);
	ASSERT_OK(store_task_add(s, &t, NULL, &e), &e);
	id = t.id;
	task_release(&t);
	return id;
}

/*
 * put inserts (version 0) and updates (the stored version) every field;
 * a stale version is BATON_ECONFLICT, an issue or PR number another
 * task holds BATON_EEXIST naming that task, and nothing is written by
 * either.
 */
static void
case_forge_link_put(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct store *other = open_spec(spec);
	int64_t a = add_task(s, "a"), b = add_task(s, "b");
	int64_t c = add_task(s, "c");
	struct forge_link l = { 0 }, got, m = { 0 }, n = { 0 };

	l.task_id = a;
	l.repo = xstrdup("owner/app");
	l.issue_number = 7;
	l.issue_url = xstrdup("https://github.com/owner/app/issues/7");
	ASSERT_OK(store_forge_link_put(s, &l, &e), &e);
	ASSERT_EQ(l.version, 1);
	ASSERT(l.created_at > 0 && l.updated_at >= l.created_at);

	/* every field round-trips */
	l.pr_number = 34;
	l.pr_url = xstrdup("https://github.com/owner/app/pull/34");
	l.pr_branch = xstrdup("baton/t1-a");
	l.pr_head_sha = xstrdup("0123456789abcdef0123456789abcdef01234567");
	l.pr_state = xstrdup("open");
	l.checks = xstrdup("failure");
	l.review = xstrdup("changes_requested");
	l.reacted = xstrdup("checks:0123456");
	l.commented = xstrdup("started:r1-a");
	l.reaction_rounds = 2;
	ASSERT_OK(store_forge_link_put(s, &l, &e), &e);
	ASSERT_EQ(l.version, 2);
	ASSERT_OK(store_forge_link_get(other, a, &got, &e), &e);
	ASSERT_EQ(got.task_id, a);
	ASSERT_STREQ(got.repo, "owner/app");
	ASSERT_EQ(got.issue_number, 7);
	ASSERT_STREQ(got.issue_url, "https://github.com/owner/app/issues/7");
	ASSERT_EQ(got.pr_number, 34);
	ASSERT_STREQ(got.pr_url, "https://github.com/owner/app/pull/34");
	ASSERT_STREQ(got.pr_branch, "baton/t1-a");
	ASSERT_STREQ(got.pr_head_sha,
		     "0123456789abcdef0123456789abcdef01234567");
	ASSERT_STREQ(got.pr_state, "open");
	ASSERT_STREQ(got.checks, "failure");
	ASSERT_STREQ(got.review, "changes_requested");
	ASSERT_STREQ(got.reacted, "checks:0123456");
	ASSERT_STREQ(got.commented, "started:r1-a");
	ASSERT_EQ(got.reaction_rounds, 2);
	ASSERT_EQ(got.version, 2);
	ASSERT_EQ(got.created_at, l.created_at);
	ASSERT_EQ(got.updated_at, l.updated_at);

	/* another writer moves first: ours is stale and writes nothing */
	free(got.checks);
	got.checks = xstrdup("success");
	ASSERT_OK(store_forge_link_put(other, &got, &e), &e);
	free(l.review);
	l.review = xstrdup("approved");
	ASSERT_EQ(store_forge_link_put(s, &l, &e), BATON_ECONFLICT);
	ASSERT_CONTAINS(e.msg, "changed concurrently");
	ASSERT_EQ(l.version, 2);
	forge_link_release(&got);
	ASSERT_OK(store_forge_link_get(s, a, &got, &e), &e);
	ASSERT_STREQ(got.checks, "success");
	ASSERT_STREQ(got.review, "changes_requested");
	ASSERT_EQ(got.version, 3);
	forge_link_release(&got);

	/* a new link for a task that has one is stale too */
	m.task_id = a;
	m.repo = xstrdup("owner/app");
	ASSERT_EQ(store_forge_link_put(s, &m, &e), BATON_ECONFLICT);
	ASSERT_EQ(m.version, 0);

	/* the issue or the PR of another task */
	m.task_id = b;
	m.issue_number = 7;
	ASSERT_EQ(store_forge_link_put(s, &m, &e), BATON_EEXIST);
	ASSERT_CONTAINS(e.msg, "issue #7 of owner/app is linked to task");
	m.issue_number = 0;
	m.pr_number = 34;
	ASSERT_EQ(store_forge_link_put(s, &m, &e), BATON_EEXIST);
	ASSERT_CONTAINS(e.msg, "PR #34 of owner/app");
	ASSERT_EQ(m.version, 0);
	ASSERT_EQ(store_forge_link_get(s, b, &got, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "has no forge link");

	/* tasks without an issue, or without a PR, do not collide */
	m.pr_number = 0;
	ASSERT_OK(store_forge_link_put(s, &m, &e), &e);
	n.task_id = c;
	n.repo = xstrdup("owner/app");
	ASSERT_OK(store_forge_link_put(s, &n, &e), &e);
	/* ... and the same PR number elsewhere is another PR */
	n.pr_number = 34;
	free(n.repo);
	n.repo = xstrdup("owner/lib");
	ASSERT_OK(store_forge_link_put(s, &n, &e), &e);
	ASSERT_EQ(n.version, 2);
	/* an update taking another's PR number is refused too */
	m.pr_number = 34;
	ASSERT_EQ(store_forge_link_put(s, &m, &e), BATON_EEXIST);
	ASSERT_CONTAINS(e.msg, "PR #34 of owner/app is linked to task");
	ASSERT_EQ(m.version, 1);

	/* no such task, no such link */
	n.task_id = 999;
	n.pr_number = 0;
	n.version = 0;
	ASSERT_EQ(store_forge_link_put(s, &n, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "no task 999");
	n.version = 4;
	ASSERT_EQ(store_forge_link_put(s, &n, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "task 999 has no forge link");
	ASSERT_EQ(store_forge_link_get(s, 999, &got, &e), BATON_ENOTFOUND);
	free(n.repo);
	n.repo = NULL;
	ASSERT_EQ(store_forge_link_put(s, &n, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "no repository");

	forge_link_release(&l);
	forge_link_release(&m);
	forge_link_release(&n);
	store_close(other);
}

/* The links a list handed out, as "task:issue" words. */
struct link_walk {
	struct buf seen;
	int n, stop_after;
};

static int
walk_link(const struct forge_link *l, void *arg)
{
	struct link_walk *w = arg;

	buf_addf(&w->seen, "%s%lld:%lld", w->n ? " " : "",
		 (long long)l->task_id, (long long)l->issue_number);
	w->n++;
	return w->stop_after && w->n >= w->stop_after;
}

/*
 * The links of one repository, by task id, across pages; a callback
 * may stop the list.
 */
static void
case_forge_links_list(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct link_walk w = { BUF_INIT, 0, 0 };
	int i, made = 0;

	(void)spec;
	for (i = 1; i <= 150; i++) {
		struct task t;
		struct forge_link l;

		issue_task(&t, &l, i);
		if (i % 3 == 0) {
			free(l.repo);
			l.repo = xstrdup("owner/other");
		}
		ASSERT_EQ(store_forge_intake(s, &t, &l, NULL, &e), 1);
		made += i % 3 != 0;
		task_release(&t);
		forge_link_release(&l);
	}
	ASSERT_OK(store_forge_links(s, "owner/app", walk_link, &w, &e), &e);
	ASSERT_EQ(w.n, made);
	ASSERT(!strncmp(w.seen.ptr, "1:1 2:2 4:4 5:5 ", 16));
	ASSERT_CONTAINS(w.seen.ptr, " 148:148 149:149");
	ASSERT(!strstr(w.seen.ptr, " 150:150"));
	ASSERT(!strstr(w.seen.ptr, " 3:3 "));
	buf_release(&w.seen);

	memset(&w, 0, sizeof(w));
	w.stop_after = 3;
	ASSERT_OK(store_forge_links(s, "owner/other", walk_link, &w, &e), &e);
	ASSERT_EQ(w.n, 3);
	ASSERT_STREQ(w.seen.ptr, "3:3 6:6 9:9");
	buf_release(&w.seen);

	memset(&w, 0, sizeof(w));
	ASSERT_OK(store_forge_links(s, "nobody/none", walk_link, &w, &e), &e);
	ASSERT_EQ(w.n, 0);
	buf_release(&w.seen);
}

/* A URL's ETag and cursor: none, set, replaced whole, per URL. */
static void
case_forge_cursors(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct store *other = open_spec(spec);
	const char *u1 = "https://api.github.com/repos/o/a/issues?state=open";
	const char *u2 = "https://api.github.com/repos/o/a/pulls";
	char *etag = (char *)"x", *cursor = (char *)"x";

	ASSERT_OK(store_forge_cursor_get(s, u1, &etag, &cursor, &e), &e);
	ASSERT(etag == NULL && cursor == NULL);
	ASSERT_OK(store_forge_cursor_set(s, u1, "W/\"abc\"",
					 "2026-11-26T10:00:00Z", &e),
		  &e);
	ASSERT_OK(store_forge_cursor_set(s, u2, "\"p1\"", NULL, &e), &e);
	ASSERT_OK(store_forge_cursor_get(other, u1, &etag, &cursor, &e), &e);
	ASSERT_STREQ(etag, "W/\"abc\"");
	ASSERT_STREQ(cursor, "2026-11-26T10:00:00Z");
	free(etag);
	free(cursor);
	ASSERT_OK(store_forge_cursor_get(other, u2, &etag, &cursor, &e), &e);
	ASSERT_STREQ(etag, "\"p1\"");
	ASSERT(cursor == NULL);
	free(etag);

	ASSERT_OK(store_forge_cursor_set(other, u1, NULL,
					 "2026-11-26T11:00:00Z", &e),
		  &e);
	ASSERT_OK(store_forge_cursor_get(s, u1, &etag, &cursor, &e), &e);
	ASSERT(etag == NULL);
	ASSERT_STREQ(cursor, "2026-11-26T11:00:00Z");
	free(cursor);

	ASSERT_EQ(store_forge_cursor_set(s, "", NULL, NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "no URL");
	store_close(other);
}

#define STAT_ADDERS 4
#define STAT_ADDS 50

/*
 * The counters add up from every handle and every process at once;
 * nothing counted reads 0.
 */
static void
case_forge_stats(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	struct store *other = open_spec(spec);
	struct forge_stats d = { 0 }, got;
	pid_t pids[STAT_ADDERS];
	int i, status;

	memset(&got, 0xff, sizeof(got));
	ASSERT_OK(store_forge_stats_get(s, &got, &e), &e);
	ASSERT_EQ(got.calls, 0);
	ASSERT_EQ(got.webhooks, 0);
	d.calls = 5;
	d.not_modified = 2;
	d.syncs = 1;
	ASSERT_OK(store_forge_stats_add(s, &d, &e), &e);
	d.rate_waits = 1;
	d.rate_wait_seconds = 30;
	d.webhooks = 4;
	ASSERT_OK(store_forge_stats_add(other, &d, &e), &e);
	ASSERT_OK(store_forge_stats_get(s, &got, &e), &e);
	ASSERT_EQ(got.calls, 10);
	ASSERT_EQ(got.not_modified, 4);
	ASSERT_EQ(got.rate_waits, 1);
	ASSERT_EQ(got.rate_wait_seconds, 30);
	ASSERT_EQ(got.syncs, 2);
	ASSERT_EQ(got.webhooks, 4);
	store_close(other);

	/* processes adding at once: every add counts */
	fflush(NULL);
	for (i = 0; i < STAT_ADDERS; i++) {
		pids[i] = fork();
		ASSERT(pids[i] >= 0);
		if (pids[i] == 0) {
			struct store *mine = NULL;
			struct forge_stats one = { .calls = 1, .syncs = 1 };
			int k;

			if (store_open(spec, &mine, &e) < 0)
				_exit(2);
			for (k = 0; k < STAT_ADDS; k++)
				if (store_forge_stats_add(mine, &one, &e) < 0) {
					fprintf(stderr, "adder %d: %s\n", i,
						e.msg);
					_exit(3);
				}
			store_close(mine);
			_exit(0);
		}
	}
	for (i = 0; i < STAT_ADDERS; i++) {
		ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
		ASSERT(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
	}
	ASSERT_OK(store_forge_stats_get(s, &got, &e), &e);
	ASSERT_EQ(got.calls, 10 + STAT_ADDERS * STAT_ADDS);
	ASSERT_EQ(got.syncs, 2 + STAT_ADDERS * STAT_ADDS);
	ASSERT_EQ(got.webhooks, 4);
}

#define INTAKERS 4
#define INTAKE_ISSUES 40

/*
 * One intaker: takes issues 1..INTAKE_ISSUES of owner/app in, each a
 * few times, through a store handle of its own, checking that an
 * intake that made nothing names the task that has the issue. Exits 0
 * when all went so.
 */
static void
intaker(const char *spec, int who)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	int i, rc;

	if (store_open(spec, &s, &e) < 0) {
		fprintf(stderr, "intaker %d: %s\n", who, e.msg);
		_exit(2);
	}
	for (i = 0; i < 3 * INTAKE_ISSUES; i++) {
		/* each racer walks the issues from another place */
		int64_t n = 1 + (i + who * 7) % INTAKE_ISSUES;
		struct event ev = { 0 };
		struct forge_link l, got;
		struct task t;

		issue_task(&t, &l, n);
		ev.type = xstrdup("task_added");
		rc = store_forge_intake(s, &t, &l, &ev, &e);
		if (rc < 0) {
			fprintf(stderr, "intaker %d: %s\n", who, e.msg);
			_exit(3);
		}
		if (store_forge_link_get(s, t.id, &got, &e) < 0 ||
		    got.issue_number != n) {
			fprintf(stderr, "intaker %d: issue %lld: task %lld "
				"is not its task\n", who, (long long)n,
				(long long)t.id);
			_exit(4);
		}
		forge_link_release(&got);
		event_release(&ev);
		task_release(&t);
		forge_link_release(&l);
	}
	store_close(s);
	_exit(0);
}

/*
 * Processes racing to take the same issues in make exactly one task,
 * one link and one event per issue.
 */
static void
case_forge_intake_race(struct store *s, const char *spec)
{
	struct link_walk w = { BUF_INIT, 0, 0 };
	struct err e = ERR_INIT;
	pid_t pids[INTAKERS];
	struct events evs;
	int i, status;

	fflush(NULL);
	for (i = 0; i < INTAKERS; i++) {
		pids[i] = fork();
		ASSERT(pids[i] >= 0);
		if (pids[i] == 0)
			intaker(spec, i); /* never returns */
	}
	for (i = 0; i < INTAKERS; i++) {
		ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
		ASSERT(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
	}
	ASSERT_EQ(count_tasks(s), INTAKE_ISSUES);
	list_events(s, NULL, 0, "task_added", &evs);
	ASSERT_EQ(evs.n, INTAKE_ISSUES);
	events_release(&evs);
	ASSERT_OK(store_forge_links(s, "owner/app", walk_link, &w, &e), &e);
	ASSERT_EQ(w.n, INTAKE_ISSUES);
	buf_release(&w.seen);
}

/*
 * An event whose type is not in the registry (core/events.h) is refused
 * by every write operation that takes one, before anything is written,
 * and by the backend's own insert, which the backend's own events (a
 * run's creation, a claim) go through: reached here through the ops
 * table, past store.c's check. Nothing is written either way; a
 * registered type then goes in.
 */
static int64_t last_seq(struct store *s);

static void
case_event_type_registered(struct store *s, const char *spec)
{
	const char *refused = "event type 'made_up' is not in the registry "
			      "(src/core/events.c)";
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	struct merge_item m = { 0 };
	struct forge_link l;
	struct task t = { 0 }, it, got_t;
	struct run r, got;
	int64_t before, id;

	(void)spec;
	make_run(s, "typed", "queued", &r);
	id = add_task(s, "plain");
	before = last_seq(s);
	ev.run_id = xstrdup(r.id);
	ev.type = xstrdup("made_up");

	ASSERT_EQ(store_event_add(s, &ev, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "cannot add event: ");
	ASSERT_CONTAINS(e.msg, refused);

	run_set(&r.status, "planning");
	ASSERT_EQ(store_run_update(s, &r, &ev, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, refused);
	ASSERT_EQ(store_run_request(s, r.id, "pause_requested", 1, &ev, &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, refused);
	get_run(s, r.id, &got);
	ASSERT_STREQ(got.status, "queued");
	ASSERT_EQ(got.version, r.version);
	ASSERT_EQ(got.pause_requested, 0);
	run_release(&got);

	t.title = xstrdup("typed task");
	ASSERT_EQ(store_task_add(s, &t, &ev, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, refused);
	ASSERT_EQ(t.id, 0);
	ASSERT_OK(store_task_get(s, id, &got_t, &e), &e);
	ASSERT_EQ(store_task_update(s, &got_t, &ev, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, refused);
	task_release(&got_t);
	ASSERT_OK(store_task_get(s, id, &got_t, &e), &e);
	ASSERT_EQ(got_t.version, 1);
	task_release(&got_t);

	issue_task(&it, &l, 7);
	ASSERT_EQ(store_forge_intake(s, &it, &l, &ev, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, refused);

	m.run_id = xstrdup(r.id);
	m.branch = xstrdup("baton/typed");
	ASSERT_EQ(store_merge_add(s, &m, &ev, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, refused);
	m.id = 1;
	m.status = xstrdup(MERGE_PENDING);
	ASSERT_EQ(store_merge_update(s, &m, &ev, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, refused);

	/* the backend's insert, as its own events reach it */
	ASSERT_EQ(s->ops->event_add(s, &ev, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, refused);
	ASSERT_EQ(last_seq(s), before);

	free(ev.type);
	ev.type = NULL;
	ASSERT_EQ(s->ops->event_add(s, &ev, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "event has no type");

	ev.type = xstrdup("steer");
	ASSERT_OK(store_event_add(s, &ev, &e), &e);
	ASSERT(ev.seq > before);

	event_release(&ev);
	merge_item_release(&m);
	task_release(&t);
	task_release(&it);
	forge_link_release(&l);
	run_release(&r);
}

/* Names of the files a list handed out, joined by spaces. */
static int
collect_file(const struct store_file *f, void *arg)
{
	struct buf *b = arg;

	ASSERT(f->content == NULL);
	buf_addf(b, "%s:%lld:%zu:%d ", f->name, (long long)f->size, f->len,
		 f->truncated);
	return 0;
}

/*
 * Run files: one row per (run, name), replaced when put again; bytes
 * (NULs, not UTF-8) come back as they went in; the list has no content;
 * a file of no run is BATON_ENOTFOUND; a missing one too.
 */
static void
case_run_files(struct store *s, const char *spec)
{
	static const char bytes[] = { 'a', 0, (char)0xff, 'z' };
	struct err e = ERR_INIT;
	struct store_file f = { 0 }, got = { 0 };
	struct buf names = BUF_INIT;
	struct run r;

	(void)spec;
	make_run(s, "keep files", "executing", &r);
	f.run_id = r.id;
	f.name = (char *)"calls/0001-plan-x-0.stdout";
	f.size = 4;
	f.sha256 = (char *)"00ff";
	f.content = (char *)bytes;
	f.len = sizeof(bytes);
	f.host = (char *)"host-a";
	f.path = (char *)"/srv/a/.baton/runs/r1/calls/0001-plan-x-0.stdout";
	ASSERT_OK(store_file_put(s, &f, &e), &e);
	ASSERT(f.updated_at > 0);
	ASSERT_OK(store_file_get(s, r.id, f.name, &got, &e), &e);
	ASSERT_EQ(got.len, sizeof(bytes));
	ASSERT(!memcmp(got.content, bytes, sizeof(bytes)));
	ASSERT_EQ(got.size, 4);
	ASSERT_EQ(got.truncated, 0);
	ASSERT_STREQ(got.sha256, "00ff");
	ASSERT_STREQ(got.host, "host-a");
	ASSERT_STREQ(got.path, f.path);
	store_file_release(&got);

	/* put again: replaced, now truncated */
	f.size = 1000000;
	f.truncated = 1;
	f.content = (char *)"head";
	f.len = 4;
	ASSERT_OK(store_file_put(s, &f, &e), &e);
	f.name = (char *)"plan.md";
	f.size = 0;
	f.truncated = 0;
	f.content = NULL;
	f.len = 0;
	ASSERT_OK(store_file_put(s, &f, &e), &e);
	ASSERT_OK(store_file_list(s, r.id, collect_file, &names, &e), &e);
	ASSERT_STREQ(names.ptr, "calls/0001-plan-x-0.stdout:1000000:4:1 "
				"plan.md:0:0:0 ");
	ASSERT_OK(store_file_get(s, r.id, "calls/0001-plan-x-0.stdout", &got,
				 &e),
		  &e);
	ASSERT_STREQ(got.content, "head");
	ASSERT_EQ(got.truncated, 1);
	store_file_release(&got);

	ASSERT_EQ(store_file_get(s, r.id, "nope", &got, &e), BATON_ENOTFOUND);
	f.run_id = (char *)"r99-nobody";
	ASSERT_EQ(store_file_put(s, &f, &e), BATON_ENOTFOUND);
	buf_release(&names);
	run_release(&r);
}

/*
 * Chat intake's tables: a conversation and its messages round-trip in
 * order, an update sets only what it names and only from its phase
 * (the second start of a plan is a conflict), unknown ids are
 * not found, and the list is by phase.
 */
static void
case_chat_conversations(struct store *s, const char *spec)
{
	struct chat_conv c = { 0 }, set = { 0 };
	struct err e = ERR_INIT;
	int64_t a = 0, b = 0, mid = 0, *ids = NULL;
	size_t nr = 0;

	(void)spec;
	ASSERT_EQ(store_chat_create(s, "greeting", &a, &e), 0);
	ASSERT_EQ(store_chat_create(s, "greeting", &b, &e), 0);
	ASSERT(a > 0 && b > a);
	ASSERT_EQ(store_chat_add(s, a, "assistant", "text", "hello", &mid, &e),
		  0);
	ASSERT(mid > 0);
	ASSERT_EQ(store_chat_add(s, a, "user", "text", "\u00e9 \"x\"\n", NULL,
				 &e),
		  0);
	ASSERT_EQ(store_chat_add(s, 999, "user", "text", "x", NULL, &e),
		  BATON_ENOTFOUND);
	ASSERT_EQ(store_chat_get(s, a, &c, &e), 0);
	ASSERT_STREQ(c.phase, "greeting");
	ASSERT(c.mode == NULL && c.plan == NULL && c.tasks == NULL);
	ASSERT_EQ(c.nr_msgs, 2);
	ASSERT_EQ(c.msgs[0].id, mid);
	ASSERT_STREQ(c.msgs[0].role, "assistant");
	ASSERT_STREQ(c.msgs[1].content, "\u00e9 \"x\"\n");
	chat_conv_release(&c);
	set.phase = (char *)"plan_proposal";
	set.plan = (char *)"{\"tasks\": []}";
	ASSERT_EQ(store_chat_update(s, a, NULL, &set, &e), 0);
	memset(&set, 0, sizeof(set));
	set.phase = (char *)"execution";
	set.mode = (char *)"direct";
	ASSERT_EQ(store_chat_update(s, a, "plan_proposal", &set, &e), 0);
	set.mode = (char *)"local";
	ASSERT_EQ(store_chat_update(s, a, "plan_proposal", &set, &e),
		  BATON_ECONFLICT);
	ASSERT_EQ(store_chat_update(s, 999, NULL, &set, &e), BATON_ENOTFOUND);
	ASSERT_EQ(store_chat_get(s, a, &c, &e), 0);
	ASSERT_STREQ(c.phase, "execution");
	ASSERT_STREQ(c.mode, "direct");
	ASSERT_STREQ(c.plan, "{\"tasks\": []}");
	chat_conv_release(&c);
	ASSERT_EQ(store_chat_get(s, 999, &c, &e), BATON_ENOTFOUND);
	ASSERT_STREQ(e.msg, "no conversation 999");
	ASSERT_EQ(store_chat_list(s, "greeting", &ids, &nr, &e), 0);
	ASSERT_EQ(nr, 1);
	ASSERT_EQ(ids[0], b);
	free(ids);
	ASSERT_EQ(store_chat_list(s, "monitoring", &ids, &nr, &e), 0);
	ASSERT_EQ(nr, 0);
	free(ids);
}

/* The memory: put inserts then replaces (created_at kept), list is
 * oldest first, forget says whether the entry was there. */
static void
case_memory_entries(struct store *s, const char *spec)
{
	struct err e = ERR_INIT;
	json_t *list = NULL, *m;
	json_int_t created;

	(void)spec;
	ASSERT_OK(store_memory_put(s, "run-r1", "r1", "outcome", "first\n",
				   &e),
		  &e);
	ASSERT_OK(store_memory_put(s, "note-2", NULL, "note", "a note", &e),
		  &e);
	ASSERT_OK(store_memory_list(s, &list, &e), &e);
	ASSERT_EQ(json_array_size(list), 2);
	m = json_array_get(list, 0);
	ASSERT_STREQ(json_string_value(json_object_get(m, "id")), "run-r1");
	ASSERT_STREQ(json_string_value(json_object_get(m, "run")), "r1");
	ASSERT_STREQ(json_string_value(json_object_get(m, "body")), "first\n");
	ASSERT(json_is_null(json_object_get(json_array_get(list, 1), "run")) ||
	       !json_object_get(json_array_get(list, 1), "run"));
	created = json_integer_value(json_object_get(m, "created_at"));
	json_decref(list);
	ASSERT_OK(store_memory_put(s, "run-r1", "r1", "outcome", "edited", &e),
		  &e);
	ASSERT_OK(store_memory_list(s, &list, &e), &e);
	m = json_array_get(list, 0);
	ASSERT_STREQ(json_string_value(json_object_get(m, "body")), "edited");
	ASSERT_EQ(json_integer_value(json_object_get(m, "created_at")),
		  created);
	json_decref(list);
	ASSERT_EQ(store_memory_forget(s, "run-r1", &e), 1);
	ASSERT_EQ(store_memory_forget(s, "run-r1", &e), 0);
	ASSERT_OK(store_memory_list(s, &list, &e), &e);
	ASSERT_EQ(json_array_size(list), 1);
	json_decref(list);
}

#define STORE_CASES(X)                                                         \
	X(create_allocates_seq)                                                \
	X(create_seq_floor)                                                    \
	X(create_rejects_missing_fields)                                       \
	X(get_by_ref)                                                          \
	X(update_appends_event)                                                \
	X(update_stale_conflicts)                                              \
	X(status_only_through_the_door)                                        \
	X(two_handles_race)                                                    \
	X(requests_keep_version)                                               \
	X(fault_rolls_back)                                                    \
	X(events_global_seq)                                                   \
	X(outputs_versioned)                                                   \
	X(migrations_stable)                                                   \
	X(run_fields_roundtrip)                                                \
	X(list_status_limit)                                                   \
	X(list_brief)                                                          \
	X(callbacks_may_write)                                                 \
	X(processes_race)                                                      \
	X(forge_delivery_once)                                                 \
	X(forge_intake_once)                                                   \
	X(forge_link_put)                                                      \
	X(forge_links_list)                                                    \
	X(forge_cursors)                                                       \
	X(forge_stats)                                                         \
	X(forge_intake_race)                                                   \
	X(event_type_registered)                                               \
	X(run_files)                                                           \
	X(chat_conversations)                                                  \
	X(memory_entries)

#define CASE_ENTRY(name) { #name, case_##name },
static const struct store_case cases[] = { STORE_CASES(CASE_ENTRY) };
#undef CASE_ENTRY

/* Each case against SQLite, as a test of its own. */
#define SQLITE_TEST(name)                                                      \
	TEST(sqlite_##name)                                                    \
	{                                                                      \
		char *spec = sqlite_spec();                                    \
		run_case(case_##name, spec);                                   \
		free(spec);                                                    \
	}
STORE_CASES(SQLITE_TEST)
#undef SQLITE_TEST

/* ---- PostgreSQL ------------------------------------------------------- */

/* BATON_TEST_PG_DSN, or NULL when the PostgreSQL tests are to be skipped. */
static const char *
pg_dsn(void)
{
	const char *dsn = getenv("BATON_TEST_PG_DSN");

	return dsn && *dsn ? dsn : NULL;
}

/* A raw connection to the test database, beside the store's own. */
static PGconn *
pg_raw(const char *dsn)
{
	PGconn *c = PQconnectdb(dsn);

	if (PQstatus(c) != CONNECTION_OK)
		test_fail(__FILE__, __LINE__, "cannot connect to %s: %s", dsn,
			  PQerrorMessage(c));
	return c;
}

/* Runs sql on c; the first column of the last row, "" when none. */
static char *
pg_sql(PGconn *c, const char *sql)
{
	PGresult *res = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(res);
	char *v;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		test_fail(__FILE__, __LINE__, "%s: %s", sql,
			  PQresultErrorMessage(res));
	v = xstrdup(PQntuples(res) > 0 ? PQgetvalue(res, PQntuples(res) - 1, 0)
				       : "");
	PQclear(res);
	return v;
}

static void
pg_do(PGconn *c, const char *sql)
{
	free(pg_sql(c, sql));
}

/* Empties the test database: every case starts from nothing. */
static void
pg_wipe(const char *dsn)
{
	PGconn *c = pg_raw(dsn);

	pg_do(c, "SET client_min_messages = warning;"
		 "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
	PQfinish(c);
}

/* A fresh store on the wiped test database. */
static struct store *
pg_open_fresh(const char *dsn)
{
	pg_wipe(dsn);
	return open_spec(dsn);
}

/*
 * Every case against PostgreSQL when BATON_TEST_PG_DSN names a database
 * the suite may wipe (it is emptied before each case); each case runs in
 * a child process of its own so that fault injection counts from zero.
 */
TEST(postgres_conformance)
{
	const char *dsn = pg_dsn();
	size_t i;
	int status;
	pid_t pid;

	if (!dsn)
		return;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		pg_wipe(dsn);
		fflush(NULL);
		pid = fork();
		ASSERT(pid >= 0);
		if (pid == 0) {
			run_case(cases[i].fn, dsn);
			_exit(0);
		}
		ASSERT_EQ(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			test_fail(__FILE__, __LINE__, "case %s failed",
				  cases[i].name);
	}
}

/* The seq of the newest event a follower may see. */
static int64_t
last_seq(struct store *s)
{
	struct err e = ERR_INIT;
	int64_t v = -1;

	ASSERT_OK(store_event_last_seq(s, &v, &e), &e);
	return v;
}

/* Appends an event of type to run_id through s. */
static int64_t
add_event(struct store *s, const char *run_id, const char *type)
{
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	int64_t seq;

	ev.run_id = xstrdup(run_id);
	ev.type = xstrdup(type);
	ASSERT_OK(store_event_add(s, &ev, &e), &e);
	seq = ev.seq;
	event_release(&ev);
	return seq;
}

/*
 * The ordering rule (sql/pg/001-init.sql): a transaction holds seq 2 open
 * while seq 3 commits. A follower must not see 3 before 2 exists or is
 * known gone: it stops at 1, and gets 2 and 3 once 2 commits.
 */
TEST(postgres_events_wait_for_older_seq)
{
	const char *dsn = pg_dsn();
	struct store *s;
	struct events l;
	struct run r;
	PGconn *held;

	if (!dsn)
		return;
	s = pg_open_fresh(dsn);
	make_run(s, "gap", "queued", &r); /* its event is seq 1 */
	held = pg_raw(dsn);
	pg_do(held, "BEGIN");
	free(pg_sql(held, "SELECT baton_event_add('r1-gap', NULL, 1, 'held',"
			  " NULL, NULL, NULL)"));
	ASSERT_EQ(add_event(s, r.id, "steer"), 3);

	list_events(s, NULL, 0, NULL, &l);
	ASSERT_EQ(l.n, 1);
	ASSERT_EQ(l.ev[0].seq, 1);
	events_release(&l);
	list_events(s, r.id, 1, NULL, &l);
	ASSERT_EQ(l.n, 0);
	events_release(&l);
	ASSERT_EQ(last_seq(s), 1);

	pg_do(held, "COMMIT");
	list_events(s, NULL, 1, NULL, &l);
	ASSERT_EQ(l.n, 2);
	ASSERT_EQ(l.ev[0].seq, 2);
	ASSERT_STREQ(l.ev[0].type, "held");
	ASSERT_EQ(l.ev[1].seq, 3);
	events_release(&l);
	ASSERT_EQ(last_seq(s), 3);
	PQfinish(held);
	run_release(&r);
	store_close(s);
}

/*
 * A seq whose transaction rolled back never fills: the hole is skipped,
 * but only once no transaction that began before the later event is
 * still running (it might own a seq below it).
 */
TEST(postgres_rolled_back_gap_skipped)
{
	const char *dsn = pg_dsn();
	PGconn *older, *doomed;
	struct store *s;
	struct events l;
	struct run r;
	int i;

	if (!dsn)
		return;
	s = pg_open_fresh(dsn);
	make_run(s, "hole", "queued", &r); /* seq 1 */
	older = pg_raw(dsn);
	doomed = pg_raw(dsn);
	pg_do(older, "BEGIN");
	free(pg_sql(older, "SELECT pg_current_xact_id()"));
	pg_do(doomed, "BEGIN");
	free(pg_sql(doomed, "SELECT baton_event_add('r1-hole', NULL, 1,"
			    " 'doomed', NULL, NULL, NULL)"));
	ASSERT_EQ(add_event(s, r.id, "checkpoint"), 3);
	pg_do(doomed, "ROLLBACK");

	/* 2 is gone, but the older transaction might still own a seq. */
	list_events(s, NULL, 1, NULL, &l);
	ASSERT_EQ(l.n, 0);
	events_release(&l);
	ASSERT_EQ(last_seq(s), 1);

	pg_do(older, "COMMIT");
	/* The oldest running transaction is the cluster's: other tests'
	 * databases on the same server may hold the hole a while longer. */
	list_events(s, NULL, 1, NULL, &l);
	for (i = 0; l.n == 0 && i < 1500; i++) {
		events_release(&l);
		usleep(20 * 1000);
		list_events(s, NULL, 1, NULL, &l);
	}
	ASSERT_EQ(l.n, 1);
	ASSERT_EQ(l.ev[0].seq, 3);
	ASSERT_STREQ(l.ev[0].type, "checkpoint");
	events_release(&l);
	ASSERT_EQ(last_seq(s), 3);

	/* Without a hole, a transaction left open delays nobody. */
	pg_do(older, "BEGIN");
	free(pg_sql(older, "SELECT pg_current_xact_id()"));
	ASSERT_EQ(add_event(s, r.id, "steer"), 4);
	ASSERT_EQ(last_seq(s), 4);
	ASSERT_EQ(count_events(s, NULL, NULL), 3);
	pg_do(older, "ROLLBACK");
	PQfinish(older);
	PQfinish(doomed);
	run_release(&r);
	store_close(s);
}

/* Ends every session of the store (named "baton") and waits until gone. */
static void
pg_kill_sessions(PGconn *admin)
{
	char *left = NULL;
	int i;

	pg_do(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
		     " WHERE application_name = 'baton'"
		     " AND datname = current_database()");
	for (i = 0; i < 100; i++) {
		free(left);
		left = pg_sql(admin, "SELECT COUNT(*) FROM pg_stat_activity"
				     " WHERE application_name = 'baton'"
				     " AND datname = current_database()");
		if (!strcmp(left, "0"))
			break;
		usleep(50 * 1000);
	}
	ASSERT_STREQ(left, "0");
	free(left);
}

/*
 * A session killed between two operations (a restart, a failover, an
 * administrator) is replaced behind the next one, which succeeds: reads,
 * guarded updates and events alike.
 */
TEST(postgres_reconnects)
{
	const char *dsn = pg_dsn();
	struct err e = ERR_INIT;
	struct store *s;
	struct run r, got;
	PGconn *admin;

	if (!dsn)
		return;
	s = pg_open_fresh(dsn);
	admin = pg_raw(dsn);
	make_run(s, "survive", "queued", &r);

	pg_kill_sessions(admin);
	get_run(s, "r1", &got);
	ASSERT_STREQ(got.id, r.id);
	run_release(&got);

	pg_kill_sessions(admin);
	run_set(&r.status, "planning");
	ASSERT_OK(door_update(s, &r, "queued", NULL, &e), &e);
	ASSERT_EQ(r.version, 2);

	pg_kill_sessions(admin);
	ASSERT_EQ(add_event(s, r.id, "steer"), 2);
	pg_kill_sessions(admin);
	ASSERT_EQ(count_events(s, r.id, NULL), 2);
	get_run(s, r.id, &got);
	ASSERT_EQ(got.version, 2);
	ASSERT_STREQ(got.status, "planning");
	run_release(&got);
	PQfinish(admin);
	run_release(&r);
	store_close(s);
}

/*
 * The session dies inside COMMIT (a deferred trigger kills it, once):
 * the store asks the server what became of the transaction and either
 * keeps it or runs the update again, so it lands exactly once.
 */
TEST(postgres_commit_lost_lands_once)
{
	const char *dsn = pg_dsn();
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	struct store *s;
	struct run r, got;
	PGconn *admin;

	if (!dsn)
		return;
	s = pg_open_fresh(dsn);
	make_run(s, "dies at commit", "queued", &r);
	admin = pg_raw(dsn);
	pg_do(admin,
	      "CREATE SEQUENCE kill_once;"
	      "CREATE FUNCTION kill_me() RETURNS trigger LANGUAGE plpgsql AS"
	      " $$ BEGIN IF nextval('kill_once') = 1 THEN"
	      " PERFORM pg_terminate_backend(pg_backend_pid()); END IF;"
	      " RETURN NULL; END $$;"
	      "CREATE CONSTRAINT TRIGGER kill_at_commit AFTER UPDATE ON runs"
	      " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
	      " EXECUTE FUNCTION kill_me()");
	run_set(&r.status, "planning");
	ev.type = xstrdup("transition");
	ev.to = xstrdup("planning");
	ASSERT_OK(door_update(s, &r, "queued", &ev, &e), &e);
	ASSERT_EQ(r.version, 2);
	ASSERT(ev.seq > 0);
	get_run(s, r.id, &got);
	ASSERT_EQ(got.version, 2);
	ASSERT_STREQ(got.status, "planning");
	run_release(&got);
	/* the killed try's event left a hole (see events_seen) */
	ASSERT_EQ(events_seen(s, r.id, "transition", 2), 2);
	free(pg_sql(admin, "SELECT last_value FROM kill_once"));
	PQfinish(admin);
	event_release(&ev);
	run_release(&r);
	store_close(s);
}

TEST(postgres_newer_schema_refused)
{
	const char *dsn = pg_dsn();
	struct err e = ERR_INIT;
	struct store *s;
	PGconn *c;

	if (!dsn)
		return;
	s = pg_open_fresh(dsn);
	store_close(s);
	s = NULL;
	c = pg_raw(dsn);
	pg_do(c, "INSERT INTO schema_migrations"
		 " VALUES (999, '999-future.sql', 0)");
	PQfinish(c);
	ASSERT_EQ(store_open(dsn, &s, &e), BATON_ESTORE);
	ASSERT(s == NULL);
	ASSERT_CONTAINS(e.msg, dsn);
	ASSERT_CONTAINS(e.msg, "schema version 999 is newer than this baton "
			       "knows");
	ASSERT_CONTAINS(e.msg, "upgrade baton");
}

/*
 * Polls fd until it is readable and store_watch_drain reports all of
 * want, for up to 5 s. Returns what the drains said.
 */
static unsigned
watch_until(struct store *s, int fd, unsigned want)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	unsigned got = 0;
	int i;

	for (i = 0; i < 50 && (got & want) != want; i++) {
		if (poll(&pfd, 1, 100) > 0 || i % 10 == 9)
			got |= store_watch_drain(s);
	}
	return got;
}

/*
 * The watch fd wakes on an event written through another handle, keeps
 * its number when its connection is killed, says "everything" once it
 * is back, and wakes again afterwards.
 */
TEST(postgres_watch_wakes)
{
	const char *dsn = pg_dsn();
	struct err e = ERR_INIT;
	struct store *s, *writer;
	struct pollfd pfd;
	PGconn *admin;
	struct run r;
	int fd;

	if (!dsn)
		return;
	s = pg_open_fresh(dsn);
	writer = open_spec(dsn);
	fd = store_watch_fd(s, &e);
	ASSERT(fd >= 0);
	ASSERT_EQ(store_watch_fd(s, &e), fd);
	make_run(writer, "watched", "queued", &r);
	ASSERT(watch_until(s, fd, STORE_WATCH_EVENTS) & STORE_WATCH_EVENTS);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	ASSERT_EQ(poll(&pfd, 1, 0), 0); /* drained */

	admin = pg_raw(dsn);
	pg_kill_sessions(admin);
	PQfinish(admin);
	ASSERT_EQ(watch_until(s, fd, STORE_WATCH_EVENTS | STORE_WATCH_WORK),
		  STORE_WATCH_EVENTS | STORE_WATCH_WORK);
	ASSERT_EQ(store_watch_fd(s, &e), fd);
	add_event(writer, r.id, "steer");
	ASSERT(watch_until(s, fd, STORE_WATCH_EVENTS) & STORE_WATCH_EVENTS);
	run_release(&r);
	store_close(writer);
	store_close(s);
}

/* Every migration has its PostgreSQL dialect (pg/NNN-...) and back. */
TEST(postgres_migrations_match)
{
	const struct embedded_file *f;
	char *other;
	int n = 0;

	for (f = embedded_files; f->name; f++) {
		size_t len = strlen(f->name);

		if (len < 5 || strcmp(f->name + len - 4, ".sql"))
			continue;
		if (!strncmp(f->name, "pg/", 3))
			other = xstrdup(f->name + 3);
		else
			other = xasprintf("pg/%s", f->name);
		if (!embed_get(other))
			test_fail(__FILE__, __LINE__,
				  "migration %s has no %s", f->name, other);
		free(other);
		n++;
	}
	ASSERT_EQ(n, 2 * latest_migration());
}

/* ---- the front end and SQLite specifics --------------------------------- */

TEST(open_bad_path_names_it)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char *path = xasprintf("%s/no/such/dir/baton.db", test_tmpdir());
	char *spec = xasprintf("sqlite:%s", path);

	ASSERT_EQ(store_open(spec, &s, &e), BATON_ESTORE);
	ASSERT(s == NULL);
	ASSERT_CONTAINS(e.msg, path);
	ASSERT_CONTAINS(e.msg, "unable to open database file");
	ASSERT_CONTAINS(e.msg, "No such file or directory");

	e = (struct err)ERR_INIT;
	ASSERT_EQ(store_open(path, &s, &e), BATON_ESTORE); /* plain path */
	ASSERT_CONTAINS(e.msg, path);
	free(spec);
	free(path);
}

TEST(open_not_a_database)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char *path = xasprintf("%s/junk.db", test_tmpdir());
	FILE *f = fopen(path, "w");

	ASSERT(f != NULL);
	fputs("this is not a database, not even close to one, no.......\n"
	      "...............................................................",
	      f);
	fclose(f);
	ASSERT_EQ(store_open(path, &s, &e), BATON_ESTORE);
	ASSERT_CONTAINS(e.msg, path);
	ASSERT_CONTAINS(e.msg, "not a database");
	free(path);
}

TEST(open_spec_forms)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char *path = xasprintf("%s/plain.db", test_tmpdir());
	struct run r;

	/* Nothing listens on port 1: the URL is named, not its password. */
	ASSERT_EQ(store_open("postgres://baton:s3cret@127.0.0.1:1/x", &s, &e),
		  BATON_ESTORE);
	ASSERT_CONTAINS(e.msg,
			"cannot open store 'postgres://baton@127.0.0.1:1/x'");
	ASSERT(!strstr(e.msg, "s3cret"));
	ASSERT_EQ(store_open("postgresql://127.0.0.1:1/x?password=s3cret"
			     "&connect_timeout=5",
			     &s, &e),
		  BATON_ESTORE);
	ASSERT_CONTAINS(e.msg,
			"'postgresql://127.0.0.1:1/x?connect_timeout=5'");
	ASSERT(!strstr(e.msg, "s3cret"));
	ASSERT_EQ(store_open("mysql://db", &s, &e), BATON_EINVAL);
	ASSERT_EQ(store_open("sqlite:", &s, &e), BATON_EINVAL);
	ASSERT_EQ(store_open("", &s, &e), BATON_EINVAL);
	ASSERT(s == NULL);

	/* A plain path and "sqlite:" + that path are the same store. */
	s = open_spec(path);
	ASSERT_STREQ(store_backend(s), "sqlite");
	make_run(s, "plain", "queued", &r);
	run_release(&r);
	store_close(s);
	free(path);
	path = xasprintf("sqlite:%s/plain.db", test_tmpdir());
	s = open_spec(path);
	get_run(s, "r1", &r);
	ASSERT_STREQ(r.task, "plain");
	run_release(&r);
	store_close(s);
	store_close(NULL);
	free(path);
}

/*
 * Runs one query on the raw database file; returns the last column of
 * each row, joined by '|' (for EXPLAIN QUERY PLAN, the plan's text).
 */
static char *
raw_query(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char *out = NULL;

	ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
	ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		int last = sqlite3_column_count(st) - 1;
		char *row;

		row = xstrdup((const char *)sqlite3_column_text(st, last));
		if (out) {
			char *both = xasprintf("%s|%s", out, row);

			free(out);
			free(row);
			row = both;
		}
		out = row;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return out ? out : xstrdup("");
}

TEST(sqlite_file_settings)
{
	char *path = xasprintf("%s/baton.db", test_tmpdir());
	char *want = xasprintf("%d", latest_migration());
	struct store *s = open_spec(path);
	char *v;

	v = raw_query(path, "PRAGMA journal_mode");
	ASSERT_STREQ(v, "wal");
	free(v);
	v = raw_query(path, "SELECT COUNT(*) FROM schema_migrations");
	ASSERT_STREQ(v, want);
	free(v);
	v = raw_query(path, "SELECT name FROM schema_migrations"
			    " WHERE version = 1");
	ASSERT_STREQ(v, "001-init.sql");
	free(v);

	/* Reopening applies nothing twice. */
	store_close(s);
	s = open_spec(path);
	store_close(s);
	v = raw_query(path, "SELECT COUNT(*) FROM schema_migrations");
	ASSERT_STREQ(v, want);
	free(v);

	/* Listing by status, newest first, walks an index: no scan, no
	 * sort. */
	v = raw_query(path, "EXPLAIN QUERY PLAN SELECT * FROM runs"
			    " WHERE status = 'queued' AND seq < 99"
			    " ORDER BY seq DESC LIMIT 64");
	ASSERT_CONTAINS(v, "runs_status_seq");
	ASSERT(!strstr(v, "TEMP B-TREE"));
	free(v);
	v = raw_query(path, "EXPLAIN QUERY PLAN SELECT * FROM events"
			    " WHERE seq > 0 AND run_id = 'x'"
			    " ORDER BY seq LIMIT 64");
	ASSERT_CONTAINS(v, "events_run_seq");
	ASSERT(!strstr(v, "TEMP B-TREE"));
	free(v);
	free(want);
	free(path);
}

TEST(sqlite_newer_schema_refused)
{
	char *path = xasprintf("%s/baton.db", test_tmpdir());
	struct err e = ERR_INIT;
	struct store *s = open_spec(path);
	char *v;

	store_close(s);
	s = NULL;
	v = raw_query(path, "INSERT INTO schema_migrations"
			    " VALUES (999, '999-future.sql', 0) RETURNING 1");
	free(v);
	ASSERT_EQ(store_open(path, &s, &e), BATON_ESTORE);
	ASSERT_CONTAINS(e.msg, path);
	ASSERT_CONTAINS(e.msg, "schema version 999 is newer");
	free(path);
}

/*
 * Another process holding the write lock past the busy timeout: the
 * update waits, then fails with a message that says what it was doing
 * and why. Takes the full timeout (10 s).
 */
TEST(sqlite_busy_is_clear)
{
	char *path = xasprintf("%s/baton.db", test_tmpdir());
	struct err e = ERR_INIT;
	struct store *s = open_spec(path);
	sqlite3 *db = NULL;
	struct run r, got;

	make_run(s, "locked out", "queued", &r);
	ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
	ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
		  SQLITE_OK);
	run_set(&r.status, "planning");
	ASSERT_EQ(door_update(s, &r, "queued", NULL, &e), BATON_ESTORE);
	ASSERT_CONTAINS(e.msg, "cannot update run 'r1-locked-out': "
			       "database is locked");
	ASSERT_EQ(r.version, 1);
	/* Readers are not blocked by the writer (WAL). */
	get_run(s, "r1", &got);
	ASSERT_STREQ(got.status, "queued");
	run_release(&got);
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(db);
	ASSERT_OK(door_update(s, &r, "queued", NULL, &e), &e);
	run_release(&r);
	store_close(s);
	free(path);
}
