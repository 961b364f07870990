/*
 * The cycle manager's sweep: the runtime's self-repair. Nothing here
 * runs an agent; each rule looks at one task and, when its wait is over
 * or its holder is gone, moves it on with an event that says why:
 *
 *   running, lease expired           -> queued   (lease_expired)
 *   running, worker process gone     -> queued   (worker_gone)
 *   blocked(quota_wait), reset passed -> queued
 *   blocked(awaiting_approval | paused), run moved on -> queued
 *                                    (once no terminal drives it)
 *   blocked(awaiting_approval), its question timed out -> queued (the
 *                                    next driver applies the default)
 *   queued, a dependency failed/cancelled -> blocked(dependency_failed)
 *   blocked(awaiting_judge), its judge gone or its claim expired
 *                                    -> claim given back, the judge's
 *                                    agent group killed (judge_gone,
 *                                    judge_expired)
 *   blocked(awaiting_judge), its cooldown over -> the workers are woken
 *
 * A requeued task keeps its run: the next worker resumes it where it
 * stopped. The sweep runs when serve starts (which is what turns a kill
 * -9 into a resume), every runtime.sweep_seconds, and whenever a worker
 * wakes the supervisor.
 */
#include "util/compat.h"

#include <signal.h>
#include <stdlib.h>

#include <jansson.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "engine/engine.h"
#include "sched/sched.h"
#include "sched/sched_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"
#include "util/spawn.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#undef LOG_MODULE
#define LOG_MODULE "sweep"

struct sweep {
	struct sched_ctx *x;
	int64_t since, now, next;
	int changed;
	struct err *e;
	int rc;
};

/* Notes t as the earliest time this sweep has work again. */
static void
due_at(struct sweep *sw, int64_t when)
{
	if (when > sw->now && (!sw->next || when < sw->next))
		sw->next = when;
}

/* Whether holder ("host:pid:n") names a worker of this host. */
static int
on_this_host(const char *holder)
{
	const char *host = sched__host();
	size_t n = strlen(host);

	return holder && !strncmp(holder, host, n) && holder[n] == ':';
}

/*
 * Whether the worker named holder ("host:pid:n") is known to be gone: it
 * ran on this host and its process no longer exists. A worker elsewhere
 * is only ever given up by its lease.
 */
static int
holder_gone(const char *holder)
{
	long pid;

	if (!on_this_host(holder))
		return 0;
	pid = strtol(holder + strlen(sched__host()) + 1, NULL, 10);
	return pid > 0 && spawn_signal((pid_t)pid, 0) == -ESRCH;
}

static int
requeue(struct sweep *sw, struct task *t, const char *type,
	const char *why)
{
	char *data = json_take_text(json_pack("{s:s?, s:s}", "worker",
					  t->lease_holder, "reason", why));
	int rc;

	sched__drop_lease(t);
	run_set(&t->status, TASK_QUEUED);
	run_set(&t->block_reason, NULL);
	run_set(&t->reason, why);
	t->not_before = 0;
	rc = sched_task_write(sw->x, t, type, data, sw->e);
	free(data);
	return rc;
}

static int
sweep_running(struct sweep *sw, struct task *t)
{
	char *why;
	int rc;

	if (holder_gone(t->lease_holder)) {
		why = xasprintf("worker %s is gone; the run resumes where it "
				"stopped",
				t->lease_holder);
		rc = requeue(sw, t, "worker_gone", why);
		free(why);
		return rc ? rc : 1;
	}
	if (t->lease_expires_at <= sw->now) {
		why = xasprintf("the lease of %s expired", t->lease_holder);
		rc = requeue(sw, t, "lease_expired", why);
		free(why);
		return rc ? rc : 1;
	}
	due_at(sw, t->lease_expires_at + 1);
	return 0;
}

/*
 * Whether a blocked task's run is in the hands of a terminal: `baton
 * resume` drives it (a live driver: no worker drives a blocked task's
 * run), or `baton resume --fresh` made it and is about to (created, see
 * sched_task_rerun). A worker would take such a run over as if its
 * lease had been lost, aborting it; the task waits for the driver to be
 * gone, and a worker then settles it from where the run stopped.
 */
static int
driven_in_terminal(struct sweep *sw, const struct run *r)
{
	struct engine en;
	int64_t pid;

	if (!strcmp(r->status, ST_CREATED))
		return 1;
	engine_init(&en, sw->x->store, sw->x->ws, sw->x->cfg);
	pid = engine_driver_pid(&en, r->id);
	engine_release(&en);
	return pid > 0;
}

/*
 * A blocked task whose run went on without it (approved, resumed), or
 * whose question timed out: its default applies when a worker drives
 * the run again. A question that times out later is due then. A run a
 * terminal drives is left to it.
 */
static int
run_moved_on(struct sweep *sw, const struct task *t)
{
	struct run r = { 0 };
	struct err ignored = ERR_INIT;
	int64_t deadline;
	int moved;

	if (!t->run_id ||
	    store_run_get(sw->x->store, t->run_id, &r, &ignored))
		return 0;
	if (!strcmp(t->block_reason, BLOCK_AWAITING_APPROVAL)) {
		moved = strcmp(r.status, ST_WAITING) != 0;
		deadline = engine_ask_deadline(&r);
		if (!deadline)
			deadline = engine_gate_deadline(sw->x->cfg, &r);
		if (!moved && deadline && deadline <= sw->now)
			moved = 1;
		else if (!moved && deadline)
			due_at(sw, deadline);
	} else {
		moved = strcmp(r.status, ST_PAUSED) != 0;
	}
	if (moved && driven_in_terminal(sw, &r))
		moved = 0;
	run_release(&r);
	return moved;
}

/* A task whose cooldown ran out since the last sweep (queued, or
 * awaiting its judge) counts as a change: nobody else will wake the
 * workers for it. */
static int
cooled(struct sweep *sw, const struct task *t)
{
	due_at(sw, t->not_before);
	return t->not_before > sw->since && t->not_before <= sw->now;
}

/*
 * When the claim of t's judge is given up for lost: the judge call's
 * own timeout (the judge role's provider) plus a lease for the write
 * that follows. A judge still alive past that is wedged; its late write
 * loses to the version the sweep's write bumps.
 */
static int64_t
judge_claim_expiry(const struct sched_ctx *x, const struct task *t)
{
	const struct config_provider *prov =
		config_provider_for(x->cfg, "judge");
	int64_t call_ms = (int64_t)(prov ? prov->timeout_seconds : 1800) * 1000;

	return t->judged_at + call_ms +
	       (int64_t)x->cfg->runtime.lease_seconds * 1000;
}

/* The judge whose agent kill_judge_agent looks for, and its pid. */
struct judge_pid {
	const struct task *t;
	int64_t pid;
};

/* Keeps the pid of a judge_started event of t's current judgement. */
static int
note_judge_pid(const struct event *ev, void *arg)
{
	struct judge_pid *jp = arg;
	const char *judge;
	json_t *d;

	if (strcmp(ev->type, "judge_started") || !ev->data)
		return 0;
	d = json_loads(ev->data, 0, NULL);
	judge = json_string_value(json_object_get(d, "judge"));
	if (judge && !strcmp(judge, jp->t->judged_by) &&
	    json_integer_value(json_object_get(d, "judgement_version")) ==
		    jp->t->judgement_version)
		jp->pid = json_integer_value(json_object_get(d, "pid"));
	json_decref(d);
	return 0;
}

/*
 * Kills what the lost judge of t had started: its agent's process group,
 * on record as "judge_started" (judge.c). The agent runs in a session of
 * its own, so it outlives its worker; only a judge of this host has a
 * group we can reach. Returns the group's pid, or 0 when none was found.
 */
static int64_t
kill_judge_agent(struct sweep *sw, const struct task *t)
{
	struct judge_pid jp = { t, 0 };
	struct err ignored = ERR_INIT;

	if (!on_this_host(t->judged_by))
		return 0;
	store_task_events(sw->x->store, t->id, 0, note_judge_pid, &jp,
			  &ignored);
	if (jp.pid > 1)
		spawn_kill_group((pid_t)jp.pid, 2000);
	return jp.pid > 1 ? jp.pid : 0;
}

/*
 * A task awaiting its judge. Unclaimed, it waits for its cooldown (a
 * judge that could not decide) and wakes the workers when it ends.
 * Claimed, the claim is given back when its judge is gone (its worker's
 * process, on this host) or the claim expired, after killing the
 * agent the judge left running; the next idle worker judges it anew.
 */
static int
sweep_judging(struct sweep *sw, struct task *t)
{
	const char *type = "judge_gone";
	int64_t expires, pid;
	char *why, *data;
	int rc;

	if (!t->judged_at)
		return cooled(sw, t);
	expires = judge_claim_expiry(sw->x, t);
	if (holder_gone(t->judged_by)) {
		why = xasprintf("judge %s is gone; the task is judged again",
				t->judged_by);
	} else if (expires <= sw->now) {
		type = "judge_expired";
		why = xasprintf("the claim of judge %s expired; the task is "
				"judged again",
				t->judged_by);
	} else {
		due_at(sw, expires);
		return 0;
	}
	pid = kill_judge_agent(sw, t);
	data = json_take_text(json_pack("{s:s?, s:I, s:s}", "judge",
					t->judged_by, "pid", (json_int_t)pid,
					"reason", why));
	t->judged_at = 0;
	t->not_before = 0;
	run_set(&t->reason, why);
	rc = sched_task_write(sw->x, t, type, data, sw->e);
	free(why);
	free(data);
	return rc ? rc : 1;
}

static int
sweep_blocked(struct sweep *sw, struct task *t)
{
	const char *why = t->block_reason ? t->block_reason : "";
	int rc;

	if (!strcmp(why, BLOCK_QUOTA_WAIT)) {
		if (t->not_before > sw->now) {
			due_at(sw, t->not_before);
			return 0;
		}
		rc = requeue(sw, t, "quota_reset",
			     "the rate limit has reset; resuming");
		return rc ? rc : 1;
	}
	if (!strcmp(why, BLOCK_AWAITING_JUDGE))
		return sweep_judging(sw, t);
	if ((!strcmp(why, BLOCK_AWAITING_APPROVAL) ||
	     !strcmp(why, BLOCK_PAUSED)) &&
	    run_moved_on(sw, t)) {
		rc = requeue(sw, t, "task_resumed",
			     !strcmp(why, BLOCK_PAUSED) ?
				     "the run was resumed" :
				     "the gate was decided");
		return rc ? rc : 1;
	}
	return 0;
}

/* A dependency of t that failed or was cancelled, or 0. */
static int64_t
failed_dependency(struct sweep *sw, const struct task *t)
{
	struct err ignored = ERR_INIT;
	size_t i;

	for (i = 0; i < t->nr_deps; i++) {
		struct task d = { 0 };
		int bad = 0;

		if (!store_task_get(sw->x->store, t->deps[i], &d, &ignored))
			bad = !strcmp(d.status, TASK_FAILED) ||
			      !strcmp(d.status, TASK_CANCELLED) ||
			      (!strcmp(d.status, TASK_BLOCKED) &&
			       !strcmp(d.block_reason, BLOCK_DEPENDENCY));
		task_release(&d);
		if (bad)
			return t->deps[i];
	}
	return 0;
}

static int
sweep_queued(struct sweep *sw, struct task *t)
{
	int64_t dep = failed_dependency(sw, t);
	char *why, *data;
	int rc;

	if (!dep)
		return cooled(sw, t);
	why = xasprintf("depends on t%lld, which did not succeed",
			(long long)dep);
	data = json_take_text(json_pack("{s:I, s:s}", "dependency",
				    (json_int_t)dep, "reason", why));
	run_set(&t->status, TASK_BLOCKED);
	run_set(&t->block_reason, BLOCK_DEPENDENCY);
	run_set(&t->reason, why);
	rc = sched_task_write(sw->x, t, "task_blocked", data, sw->e);
	free(why);
	free(data);
	return rc ? rc : 1;
}

static int
sweep_one(const struct task *t0, void *arg)
{
	struct sweep *sw = arg;
	struct task t;
	int rc = 0;

	task_copy(&t, t0);
	if (!strcmp(t.status, TASK_RUNNING))
		rc = sweep_running(sw, &t);
	else if (!strcmp(t.status, TASK_BLOCKED))
		rc = sweep_blocked(sw, &t);
	else if (!strcmp(t.status, TASK_QUEUED) && t.nr_deps)
		rc = sweep_queued(sw, &t);
	else if (!strcmp(t.status, TASK_QUEUED))
		rc = cooled(sw, &t);
	task_release(&t);
	if (rc == BATON_ECONFLICT) {
		/* a worker wrote it meanwhile: its write wins */
		return 0;
	}
	if (rc < 0) {
		sw->rc = rc;
		return 1;
	}
	sw->changed += rc;
	return 0;
}

int
sched_sweep(struct sched_ctx *x, int64_t since_ms, int64_t *next_ms,
	    struct err *e)
{
	static const char *const live[] = { TASK_RUNNING, TASK_BLOCKED,
					    TASK_QUEUED };
	struct sweep sw = { x, since_ms, time_now_ms(), 0, 0, e, 0 };
	size_t i;
	int rc = 0;

	for (i = 0; i < sizeof(live) / sizeof(live[0]) && !rc; i++) {
		struct store_task_filter f = { .status = live[i] };

		rc = store_task_list(x->store, &f, sweep_one, &sw, e);
		if (!rc)
			rc = sw.rc;
	}
	if (next_ms)
		*next_ms = sw.next;
	if (rc)
		return rc;
	if (sw.changed)
		log_info("sweep moved %d task%s", sw.changed,
			 sw.changed == 1 ? "" : "s");
	return sw.changed;
}
