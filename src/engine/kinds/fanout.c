/*
 * A parallel group: several agent calls of one stage at once, each in a
 * child process of its own (the fan-out), and the parent waiting for all
 * of them (the fan-in). The bug-fix pipeline's parallel reviewers and the
 * research pipeline's evidence collectors run this way.
 *
 *   parent (owns the run record)          child, one per member
 *   ─────────────────────────────          ─────────────────────────────
 *   spawn_fork_call ─────────────────────> own store handle, own wake
 *   poll every 50 ms: abort? signal?       pipe, PR_SET_PDEATHSIG;
 *     yes: SIGTERM every live member       work(): agent calls, bare
 *   spawn_reap(WNOHANG) reaped ┐           events only (never a run
 *     read members/<key>.result │           write), then
 *     add its usage to the run  │          members/<key>.result:
 *     done(): the caller's note ┘          {res, reason, out, usage}
 *
 * At most at_once members run together; the next starts as one ends.
 * The parent owns the run record: a child's notes are bare events
 * (d->member), and what it did comes back in its result file.
 */
#include "util/compat.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/pipeline.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/spawn.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* The largest result file a member may hand back. */
#define RESULT_MAX (64 * 1024)
/* How often the parent looks at its members. */
#define POLL_MS 50

static char *
result_path(const struct drive *d, const struct fanout_member *m)
{
	return xasprintf("%s/members/%s.result", d->run_dir, m->key);
}

/*
 * The child's side: a store handle and signal pipe of its own, a private
 * copy of the run, the member's work, then its result in a file. Never
 * returns.
 */
static void __attribute__((noreturn))
member_main(struct drive *d, struct fanout_member *m, int no,
	    const char *steers)
{
	struct engine cen = *d->en;
	struct drive cd = *d;
	struct err e = ERR_INIT;
	char *path = result_path(d, m), *text;
	json_t *out = json_object(), *o;

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* a member drives its own agents: their orphans are its to kill */
	spawn_adopt_orphans();
	cen.lock_fd = -1;
	cen.note = NULL; /* the parent speaks for the run */
	cd.en = &cen;
	cd.member = 1;
	cd.member_no = no;
	cd.ask = NULL;
	cd.ask_to = NULL;
	run_copy(&cd.r, &d->r);
	run_set(&cd.r.stage, m->s->name);
	cd.r.tokens_in = cd.r.tokens_out = 0;
	cd.r.cost_usd = 0;
	/* never a periodic report (a run write): the parent makes them */
	cd.report_ms = INT64_MAX;
	m->res = STAGE_FAIL;
	cd.wake_fd = engine__child_signals(&e);
	if (cd.wake_fd < 0 ||
	    store_open(store_spec(d->en->store), &cen.store, &e)) {
		m->reason = xasprintf("%s: %s", m->label, e.msg);
	} else if (m->work(&cd, m, steers, out, &e)) {
		m->res = STAGE_FAIL;
		m->reason = xasprintf("%s: %s", m->label, e.msg);
	}
	o = json_pack("{s:i, s:s*, s:O, s:I, s:I, s:f, s:I}", "res",
		      (int)m->res, "reason", m->reason, "out", out, "tokens_in",
		      (json_int_t)cd.r.tokens_in, "tokens_out",
		      (json_int_t)cd.r.tokens_out, "cost_usd", cd.r.cost_usd,
		      "active_ms", (json_int_t)(time_now_ms() - m->started_ms));
	text = json_dumps(o, JSON_COMPACT);
	fs_write_atomic(path, text, strlen(text), NULL);
	_exit(0);
}

/* The parent takes an exited member's result and its usage. */
static void
member_reap(struct drive *d, struct fanout_member *m, int status)
{
	char *path = result_path(d, m);
	struct buf text = BUF_INIT;
	json_t *o = NULL;
	json_int_t tokens_in, tokens_out;
	double cost;

	m->ended_ms = time_now_ms();
	m->pid = 0;
	if (fs_read_nofollow(path, &text, RESULT_MAX, NULL) == 0)
		o = json_loads(text.ptr, 0, NULL);
	if (!o) {
		m->res = STAGE_FAIL;
		m->reason =
		    xasprintf("%s: its process ended (%s %d) without "
			      "a result",
			      m->label, WIFSIGNALED(status) ? "signal" : "exit",
			      WIFSIGNALED(status) ? WTERMSIG(status)
						  : WEXITSTATUS(status));
		goto out;
	}
	m->res =
	    (enum stage_result)json_integer_value(json_object_get(o, "res"));
	m->reason = xstrdup_or_null(json_get_str(o, "reason"));
	if (json_is_object(json_object_get(o, "out")))
		m->out = json_incref(json_object_get(o, "out"));
	tokens_in = json_integer_value(json_object_get(o, "tokens_in"));
	tokens_out = json_integer_value(json_object_get(o, "tokens_out"));
	cost = json_number_value(json_object_get(o, "cost_usd"));
	d->r.tokens_in += tokens_in;
	d->r.tokens_out += tokens_out;
	d->r.cost_usd += cost;
	engine__stage_spent(d, m->s, tokens_in + tokens_out, cost);
out:
	fs_unlink(path, NULL);
	json_decref(o);
	buf_release(&text);
	free(path);
}

/* What member_call hands member_main in the child. */
struct member_arg {
	struct drive *d;
	struct fanout_member *m;
	int no; /* its place in the group, from 1 */
	const char *steers;
};

static int
member_call(void *arg)
{
	struct member_arg *a = arg;

	member_main(a->d, a->m, a->no, a->steers);
}

/* Forks member m; a fork that fails fails the member. 1 if it runs. */
static int
member_start(struct drive *d, struct fanout_member *m, int no,
	     const char *steers)
{
	struct member_arg a = { d, m, no, steers };
	int rc;

	m->started_ms = time_now_ms();
	/* kept: ours, not an agent's orphan */
	rc = spawn_fork_call(member_call, &a, SPAWN_FORK_KEEP, &m->pid);
	if (rc < 0) {
		m->pid = 0;
		m->res = STAGE_FAIL;
		m->reason =
		    xasprintf("%s: cannot fork: %s", m->label, strerror(-rc));
		return 0;
	}
	return 1;
}

/*
 * 1 when the group should stop: a signal, or (after a wake-up) an abort
 * request on the run.
 */
static int
should_stop(struct drive *d, int woken)
{
	struct run fresh = { 0 };
	int stop = 0;

	if (engine__signalled())
		return 1;
	if (!woken)
		return 0;
	if (store_run_get(d->en->store, d->r.id, &fresh, NULL) == 0 &&
	    fresh.abort_requested)
		stop = 1;
	run_release(&fresh);
	return stop;
}

int
engine__fanout(struct drive *d, struct fanout_member *m, size_t n,
	       size_t at_once, const char *steers, fanout_done_fn *done,
	       struct err *e)
{
	struct pollfd pfd = { .fd = d->wake_fd, .events = POLLIN };
	char *dir = engine__run_file(d, "members");
	size_t i, next = 0, alive = 0;
	int rc = fs_mkdir_p(dir, 0755, e), stopping = 0;
	int64_t last_tick = time_now_ms();

	free(dir);
	if (rc)
		return rc;
	if (!at_once)
		at_once = n;
	for (;;) {
		char drain[64];
		int status, woken;

		while (!stopping && next < n && alive < at_once) {
			alive += member_start(d, &m[next], (int)next + 1,
					      steers);
			next++;
		}
		if (!alive)
			break;
		/* a short nap: an exited member is taken within POLL_MS */
		woken = poll(&pfd, 1, POLL_MS) > 0;
		while (read(d->wake_fd, drain, sizeof(drain)) > 0)
			;
		if (!stopping && should_stop(d, woken))
			stopping = 1;
		for (i = 0; i < next; i++) {
			if (!m[i].pid)
				continue;
			if (stopping)
				spawn_signal(m[i].pid, SIGTERM);
			if (spawn_reap(m[i].pid, &status, WNOHANG) != m[i].pid)
				continue;
			alive--;
			spawn_forget(m[i].pid);
			member_reap(d, &m[i], status);
			if (!rc && done)
				rc = done(d, &m[i], e);
		}
		if (time_now_ms() - last_tick >= 1000) {
			last_tick = time_now_ms();
			engine__report_tick(d);
			if (d->en->note)
				d->en->note(d->en->note_arg, ENGINE_NOTE_TICK,
					    &d->r);
		}
	}
	for (; next < n; next++)
		m[next].res = STAGE_STOPPED; /* never started */
	if (stopping)
		d->stop = 1;
	return rc;
}

int
engine__fanout_failed(struct fanout_member *m, size_t n, enum stage_result *res,
		      char **reason)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (m[i].res != STAGE_PASS) {
			*res = m[i].res;
			*reason = m[i].reason;
			m[i].reason = NULL;
			return 1;
		}
	return 0;
}

void
engine__fanout_release(struct fanout_member *m, size_t n)
{
	size_t i;

	for (i = 0; m && i < n; i++) {
		FREE_AND_NULL(m[i].reason);
		json_decref(m[i].out);
		m[i].out = NULL;
	}
}
