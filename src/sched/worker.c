/*
 * A worker's unit of work: claim a task, drive its run until the run
 * rests, settle the task from where the run stopped.
 *
 * The lease. The claim gives the worker a lease with a fencing token;
 * from then until the task is settled every write of this worker's
 * store handle is fenced with that token (store_fence), and a keeper
 * thread renews the lease every third of its length on a connection of
 * its own. A worker that stalls (SIGSTOP, a swapped-out machine) stops
 * renewing with everything else; once the lease expires a sweep gives
 * the task to another worker, and when the stalled one wakes its first
 * write is refused. When the keeper finds the lease gone it wakes the
 * engine, which re-reads the run and stops at the abort the new holder
 * asked for.
 *
 * The run. A task keeps its run across workers: a run left mid-stage by
 * a dead worker is resumed where it was (the engine resets the worktree
 * to the stage's checkpoint), on another host too, from the checkpoint
 * pushed to repo.url (engine/takeover.c); only a run still locked by a
 * live but stalled driver is given up, with an abort request, for a
 * fresh one.
 */
#include "util/compat.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

#include "core/config.h"
#include "core/failclass.h"
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
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#undef LOG_MODULE
#define LOG_MODULE "worker"

const char *
sched__host(void)
{
	static char host[256];

	if (!host[0] && gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "localhost");
	return host;
}

/* ---- the lease keeper ------------------------------------------------- */

/*
 * One keeper a serve worker, from its start to its end
 * (sched_worker_begin, sched_worker_end), on a store connection of its
 * own, opened once (on PostgreSQL a connection a task would be a server
 * process a task). Every third of the lease it renews the lease of the
 * worker's task, if it has one, and refreshes the worker's record: alive,
 * and on which task. So an idle worker is heard of as often as a busy
 * one, and the worker's own connection makes no write for its record.
 */
struct sched_keeper {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct store *store;   /* the keeper's own connection */
	struct worker_rec rec; /* the worker's; its strings borrowed */
	int64_t task_id, token; /* the task whose lease it keeps; 0: none */
	int64_t lease_ms;
	int quit, lost;
};

/*
 * One renewal of the lease of task id under token; *lost when the lease
 * was taken over. Without k->mu held: the store may take seconds.
 */
static void
keeper_renew(struct sched_keeper *k, int64_t id, int64_t token, int *lost)
{
	struct err e = ERR_INIT;
	int rc = store_task_renew(k->store, id, token, k->lease_ms, &e);

	if (rc == BATON_EFENCED) {
		*lost = 1;
		log_warn("%s", e.msg);
		/* wake the engine: it re-reads the run */
		spawn_signal(getpid(), SIGUSR1);
	} else if (rc) {
		log_warn("cannot renew the lease on task %lld: %s",
			 (long long)id, e.msg);
	}
}

/* The worker's record, on task id (0: none), without k->mu held. */
static void
keeper_beat(struct sched_keeper *k, int64_t id)
{
	struct worker_rec rec = k->rec;
	struct err e = ERR_INIT;

	rec.task_id = id;
	if (store_worker_beat(k->store, &rec, &e))
		log_warn("worker %s: %s", rec.id, e.msg);
}

/* One turn: the lease of the task k keeps now, then the record. */
static void
keeper_turn(struct sched_keeper *k)
{
	int64_t id = k->lost ? 0 : k->task_id, token = k->token;
	int lost = 0;

	pthread_mutex_unlock(&k->mu);
	if (id)
		keeper_renew(k, id, token, &lost);
	keeper_beat(k, lost ? 0 : id);
	pthread_mutex_lock(&k->mu);
	if (lost && k->task_id == id && k->token == token)
		k->lost = 1;
}

static void *
keeper_main(void *arg)
{
	struct sched_keeper *k = arg;
	struct timespec ts;
	sigset_t all;

	/* signals are for the engine's thread: its handlers wake it */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&k->mu);
	while (!k->quit) {
		/*
		 * The wait is on this host's clock (pthread_cond_timedwait
		 * takes CLOCK_REALTIME), not the database's time_now_ms: with
		 * a host clock off by minutes a deadline on the database's
		 * clock would be minutes early or late, and the lease lost.
		 * A task given meanwhile is renewed at the next turn, within
		 * a third of its lease.
		 */
		int64_t at = time_host_ms() + k->lease_ms / 3;

		ts.tv_sec = at / 1000;
		ts.tv_nsec = (at % 1000) * 1000000;
		while (!k->quit && time_host_ms() < at)
			pthread_cond_timedwait(&k->cv, &k->mu, &ts);
		if (!k->quit)
			keeper_turn(k);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

/*
 * A keeper on a connection of its own to spec, for leases of lease_ms,
 * beating rec, which it puts on record at once; NULL (e says why).
 */
static struct sched_keeper *
keeper_start(const char *spec, const struct worker_rec *rec,
	     int64_t lease_ms, struct err *e)
{
	struct sched_keeper *k = xcalloc(1, sizeof(*k));
	int rc;

	if (store_open(spec, &k->store, e)) {
		free(k);
		return NULL;
	}
	k->rec = *rec;
	k->lease_ms = lease_ms;
	keeper_beat(k, 0);
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	rc = pthread_create(&k->thread, NULL, keeper_main, k);
	if (rc) {
		store_close(k->store);
		pthread_mutex_destroy(&k->mu);
		pthread_cond_destroy(&k->cv);
		free(k);
		err_set(e, -rc, "cannot start the lease keeper: %s",
			strerror(rc));
		return NULL;
	}
	return k;
}

/* Gives k the lease of task_id to keep (task_id 0: none any more). */
static void
keeper_keep(struct sched_keeper *k, int64_t task_id, int64_t token)
{
	pthread_mutex_lock(&k->mu);
	k->task_id = task_id;
	k->token = token;
	k->lost = 0;
	pthread_mutex_unlock(&k->mu);
}

/* Whether k found the lease of its task taken over. */
static int
keeper_lost(struct sched_keeper *k)
{
	int lost;

	pthread_mutex_lock(&k->mu);
	lost = k->lost;
	pthread_mutex_unlock(&k->mu);
	return lost;
}

static void
keeper_stop(struct sched_keeper *k)
{
	pthread_mutex_lock(&k->mu);
	k->quit = 1;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->thread, NULL);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	store_close(k->store);
	free(k);
}

/* ---- settling a task -------------------------------------------------- */

/* How long a failed task waits before its next try: longer for
 * failures that take long to clear, doubling with each attempt. */
static int64_t
cooldown_ms(const struct config *cfg, const char *reason, int attempts)
{
	int64_t base = (int64_t)cfg->runtime.cooldown_seconds * 1000;
	int shift = attempts > 1 ? attempts - 1 : 0;

	if (reason && (strstr(reason, "timed out") ||
		       strstr(reason, "unavailable")))
		base *= 3;
	return base << (shift < 6 ? shift : 6);
}

/*
 * A run that ended failed or blocked: retry, give up, or ask for rework.
 * A permission prompt or a run that changed nothing is never retried
 * (core/failclass.h): the task asks for rework at once.
 */
static int
settle_failure(struct sched_ctx *x, struct task *t, const struct run *r,
	       struct err *e)
{
	const struct config_runtime *rt = &x->cfg->runtime;
	const char *why = r->reason ? r->reason : r->status;
	struct fail_verdict v;
	char sig[17], *data;
	int rc;

	sched__failure_sig(why, sig);
	if (t->failure_sig && !strcmp(t->failure_sig, sig))
		t->failure_count++;
	else
		t->failure_count = 1;
	free(t->failure_sig);
	t->failure_sig = xstrdup(sig);
	free(t->reason);
	fail_classify(why, NULL, &v);
	if (t->failure_count >= rt->failure_repeat_limit) {
		run_set(&t->status, TASK_BLOCKED);
		run_set(&t->block_reason, BLOCK_NEEDS_REWORK);
		t->reason = xasprintf("the same failure %d times in a row: %s",
				      t->failure_count, why);
	} else if (v.cls == FAIL_CLASS_PERMISSION ||
		   v.cls == FAIL_CLASS_NOOP) {
		/* never tried again, by a new run either (core/failclass.h) */
		run_set(&t->status, TASK_BLOCKED);
		run_set(&t->block_reason, BLOCK_NEEDS_REWORK);
		t->reason = xasprintf("a %s failure is never tried again: %s",
				      fail_class_name(v.cls), why);
	} else if (t->attempts >= t->max_attempts) {
		run_set(&t->status, TASK_FAILED);
		t->ended_at = time_now_ms();
		t->reason = xasprintf("failed after %d attempt%s: %s",
				      t->attempts, t->attempts == 1 ? "" : "s",
				      why);
	} else {
		run_set(&t->status, TASK_QUEUED);
		run_set(&t->run_id, NULL); /* the next try is a new run */
		t->not_before = time_now_ms() +
				cooldown_ms(x->cfg, why, t->attempts);
		t->reason = xasprintf("retrying (attempt %d of %d failed): %s",
				      t->attempts, t->max_attempts, why);
	}
	data = json_take_text(json_pack("{s:s, s:s, s:s, s:i, s:I}", "run", r->id,
				    "status", t->status, "reason", t->reason,
				    "failures", t->failure_count,
				    "not_before", (json_int_t)t->not_before));
	rc = sched_task_write(x, t, "task_settled", data, e);
	free(data);
	return rc;
}

int
sched__on_forge(const struct sched_ctx *x, const struct task *t,
		const struct run *r)
{
	return x->cfg->forge.type && !strcmp(t->kind, "code") && r->branch;
}

/* Where a run rests, as the task's status and block reason. */
static void
rest_of(const struct run *r, int judge, const char **status,
	const char **block)
{
	*block = NULL;
	if (!strcmp(r->status, ST_MERGE_READY) ||
	    !strcmp(r->status, ST_COMPLETED)) {
		*status = judge && r->branch ? TASK_BLOCKED : TASK_DONE;
		*block = judge && r->branch ? BLOCK_AWAITING_JUDGE : NULL;
	} else if (!strcmp(r->status, ST_WAITING)) {
		*status = TASK_BLOCKED;
		*block = BLOCK_AWAITING_APPROVAL;
	} else if (!strcmp(r->status, ST_PAUSED)) {
		*status = TASK_BLOCKED;
		*block = BLOCK_PAUSED;
	} else if (!strcmp(r->status, ST_ABORTED)) {
		*status = TASK_CANCELLED;
	} else {
		*status = NULL; /* failed, blocked: settle_failure */
	}
}

/*
 * With a shared remote, a branch that is to be judged or landed goes to
 * the remote first: the judge and the lander may be on another machine.
 * A push that fails settles the run as failed (a new run next time),
 * since nobody else can ever reach this branch.
 */
static int
publish(struct sched_ctx *x, struct task *t, const struct run *r,
	struct err *e)
{
	struct err pe = ERR_INIT;
	struct run failed;

	if (!x->cfg->repo_url || !r->branch ||
	    !remote_push(x->ws, x->cfg->repo_url, r->branch, 1, &pe))
		return 1;
	failed = *r;
	failed.status = (char *)ST_FAILED;
	failed.reason = pe.msg;
	return settle_failure(x, t, &failed, e);
}

/*
 * Without a judge, a finished run is approved by its own review stages:
 * with runtime.auto_merge its branch goes straight to the merge queue,
 * while this worker still holds the task's lease (the settling write
 * gives it up). A worker that dies in between leaves the item queued and
 * the task running; whoever takes the task over settles it from the
 * finished run, and its enqueue finds the item there already.
 */
static int
queue_landing(struct sched_ctx *x, const struct task *t, const struct run *r,
	      struct err *e)
{
	struct merge_item m = { 0 };
	int rc;

	if (!x->cfg->runtime.auto_merge || !r->branch ||
	    strcmp(t->kind, "code"))
		return 0;
	rc = sched_merge_enqueue(x, r, &m, e);
	merge_item_release(&m);
	if (rc == BATON_EBUSY) {
		*e = (struct err)ERR_INIT;
		rc = 0;
	}
	return rc;
}

/*
 * A run that has ended needs its checkpoints on the shared remote no
 * more (its branch goes there itself when it is to be judged or landed):
 * they are deleted, so that the remote does not fill up. Best effort.
 */
static void
forget_checkpoints(struct sched_ctx *x, const struct run *r)
{
	struct err e = ERR_INIT;

	if (x->cfg->repo_url && r->worktree &&
	    ckpt_forget(x->ws, x->cfg->repo_url, r->id, &e))
		log_warn("run %s: %s", r->id, e.msg);
}

/* How long a claim of this worker lasts without a renewal. */
static int64_t
claim_lease_ms(const struct sched_ctx *x)
{
	return (int64_t)x->cfg->runtime.lease_seconds * 1000;
}

/*
 * The settling write of t (its task_settled event with data). A serve
 * worker claims its next task in the same transaction (x->next): one
 * commit where a settle and a claim took two. Not with auto_merge,
 * where landing comes before the next claim (sched_work_once).
 */
static int
settle_write(struct sched_ctx *x, struct task *t, const char *data,
	     struct err *e)
{
	struct event ev = { .type = (char *)"task_settled",
			    .data = (char *)data };
	int rc;

	if (!x->next || x->cfg->runtime.auto_merge)
		return sched_task_write(x, t, ev.type, data, e);
	task_release(x->next);
	memset(x->next, 0, sizeof(*x->next));
	rc = store_task_settle_claim(x->store, t, &ev, x->holder,
				     claim_lease_ms(x), x->next, e);
	if (!rc)
		sched_wake(x->ws);
	return rc;
}

int
sched__settle(struct sched_ctx *x, struct task *t, const struct run *r,
	      int64_t resume_after_ms, struct err *e)
{
	const char *status, *block;
	char *data;
	/* a chat started in Direct mode runs without the judge */
	int rc, judge = x->cfg->runtime.judge && !strcmp(t->kind, "code") &&
			(!t->origin || strcmp(t->origin, "chat-direct"));

	sched__drop_lease(t);
	if (status_is_terminal(r->status))
		forget_checkpoints(x, r);
	if (!strcmp(r->status, ST_INTERRUPTED) && resume_after_ms) {
		/* a quota hand-back: wait without holding a worker, and
		 * without spending an attempt */
		run_set(&t->status, TASK_BLOCKED);
		run_set(&t->block_reason, BLOCK_QUOTA_WAIT);
		t->not_before = resume_after_ms;
		t->attempts--;
		free(t->reason);
		t->reason = xasprintf("the provider is rate limited; resumes "
				      "at stage %s after the reset",
				      r->stage ? r->stage : "?");
	} else {
		rest_of(r, judge, &status, &block);
		if (!status)
			return settle_failure(x, t, r, e);
		if ((!strcmp(status, TASK_DONE) || (block &&
		     !strcmp(block, BLOCK_AWAITING_JUDGE))) &&
		    (rc = publish(x, t, r, e)) != 1)
			return rc;
		if (!strcmp(status, TASK_DONE) && sched__on_forge(x, t, r)) {
			/* the pull request lands it (forge/pr.c) */
			status = TASK_BLOCKED;
			block = BLOCK_PULL_REQUEST;
		} else if (!judge && !strcmp(status, TASK_DONE) &&
			   (rc = queue_landing(x, t, r, e))) {
			return rc;
		}
		run_set(&t->status, status);
		run_set(&t->block_reason, block);
		run_set(&t->reason, block ? r->reason : NULL);
		/* a run held by a person (a gate, a pause) is taken up again
		 * when they let it go: that is no new try */
		if (block && (!strcmp(block, BLOCK_AWAITING_APPROVAL) ||
			      !strcmp(block, BLOCK_PAUSED)))
			t->attempts--;
		if (block && !strcmp(block, BLOCK_PULL_REQUEST))
			run_set(&t->reason, "waiting for its pull request");
		t->judged_at = 0;
		t->failure_count = 0;
		if (!strcmp(t->status, TASK_DONE) ||
		    !strcmp(t->status, TASK_CANCELLED))
			t->ended_at = time_now_ms();
		if (!strcmp(t->status, TASK_CANCELLED))
			run_set(&t->reason, "its run was aborted");
	}
	data = json_take_text(json_pack("{s:s, s:s, s:s?, s:s?}", "run", r->id,
				    "status", t->status, "block_reason",
				    t->block_reason, "reason", t->reason));
	rc = settle_write(x, t, data, e);
	free(data);
	return rc;
}

/* ---- one task ----------------------------------------------------------- */

/* Makes the task's next run and records it as the task's current one. */
static int
new_run(struct sched_ctx *x, struct engine *en, struct task *t,
	struct err *e)
{
	struct run_spec spec = { 0 };
	struct run r = { 0 };
	char *text = sched__task_text(t), *data;
	int rc;

	spec.task = text;
	spec.pipeline = t->pipeline;
	spec.base_ref = t->base_ref;
	spec.task_id = t->id;
	rc = engine_create_spec(en, &spec, &r, e);
	free(text);
	if (rc)
		return rc;
	run_set(&t->run_id, r.id);
	data = json_take_text(json_pack("{s:s}", "run", r.id));
	rc = sched_task_write(x, t, "task_run", data, e);
	free(data);
	run_release(&r);
	return rc;
}

int
sched__elsewhere(const struct sched_ctx *x, const struct run *r)
{
	char *here;
	int other;

	if (!r->worktree)
		return 0;
	here = workspace_worktree_dir(x->ws, r->id);
	other = strcmp(here, r->worktree) != 0;
	free(here);
	return other;
}

/*
 * The task's run was driven in another clone (a worker host that died):
 * it is taken over from its last checkpoint on the shared remote
 * (engine/takeover.c) and resumed at its stage. When it cannot be (no
 * checkpoint pushed yet, the remote out of reach) its work is out of
 * reach: it is aborted, the reason on record, and the task starts over
 * from the remote's base.
 */
static int
take_over(struct sched_ctx *x, struct engine *en, struct task *t,
	  struct run *cur, struct err *e)
{
	struct err ignored = ERR_INIT;
	struct run gone = { 0 };
	char *why = NULL, *reason;
	int rc;

	rc = engine_take_over(en, cur, x->holder, &why, e);
	if (rc <= 0) {
		if (!rc)
			log_info("task %lld: run %s taken over at %s",
				 (long long)t->id, cur->id, cur->status);
		return rc;
	}
	log_warn("task %lld: run %s was driven in %s, and this host cannot "
		 "take it over (%s): starting afresh",
		 (long long)t->id, cur->id, cur->worktree, why);
	reason = xasprintf("its host is gone and it cannot be taken over: %s",
			   why);
	engine_abort_reason(en, cur->id, reason, &gone, &ignored);
	forget_checkpoints(x, cur);
	run_release(&gone);
	free(reason);
	free(why);
	return new_run(x, en, t, e);
}

/*
 * The run this claim works on. The task's current run when it can go on
 * (resumed where it stopped); when it already ended, its worker died
 * before settling the task, so the caller settles from it (1) instead
 * of running the task twice; a new run when there is none. A current
 * run still locked by a live driver belongs to a worker whose lease we
 * took over: it is asked to abort, and we start afresh. A run whose
 * worktree is in another clone (a worker host that died) is taken over
 * from its last pushed checkpoint (take_over).
 */
static int
pick_run(struct sched_ctx *x, struct engine *en, struct task *t,
	 struct err *e)
{
	struct run cur = { 0 };
	struct err ignored = ERR_INIT;
	int rc = 0;

	if (t->run_id) {
		rc = store_run_get(x->store, t->run_id, &cur, e);
		if (rc && rc != BATON_ENOTFOUND)
			return rc; /* the store is busy: not a reason to
				      start the task over */
		if (rc) {
			log_warn("task %lld: its run %s is gone: starting "
				 "afresh",
				 (long long)t->id, t->run_id);
			*e = (struct err)ERR_INIT;
		}
	}
	if (!t->run_id || rc)
		rc = new_run(x, en, t, e);
	else if (status_is_terminal(cur.status))
		rc = 1;
	else if (sched__elsewhere(x, &cur))
		rc = take_over(x, en, t, &cur, e);
	else if (engine_driver_pid(en, cur.id) > 0) {
		struct event ev = { 0 };

		ev.type = (char *)"superseded";
		ev.data = (char *)"{\"cause\":\"lease taken over\"}";
		store_run_request(x->store, cur.id, "abort_requested", 1, &ev,
				  &ignored);
		engine_wake(en, cur.id);
		rc = new_run(x, en, t, e);
	}
	run_release(&cur);
	return rc;
}

/* The task goes back to the queue with its run, which resumes next time. */
static int
retry_same_run(struct sched_ctx *x, struct task *t, const struct err *cause)
{
	struct err e = ERR_INIT;
	char *data;
	int rc;

	sched__drop_lease(t);
	run_set(&t->status, TASK_QUEUED);
	t->not_before = time_now_ms() +
			cooldown_ms(x->cfg, cause->msg, t->attempts);
	free(t->reason);
	t->reason = xasprintf("retrying the same run %s: %s", t->run_id,
			      cause->msg);
	data = json_take_text(json_pack("{s:s, s:s, s:s}", "run", t->run_id,
				    "status", t->status, "reason", t->reason));
	rc = sched_task_write(x, t, "task_settled", data, &e);
	free(data);
	return rc;
}

/*
 * baton could not drive the run (the disk, the store, git): the task goes
 * back to the queue after a cooldown, the attempt spent, the error on
 * record; the run, if the engine ended it, stays as it ended. A run that
 * did not end (its lock was still held, the store was busy) is kept: the
 * next try resumes it instead of starting the task over.
 */
static int
give_back(struct sched_ctx *x, struct task *t, const struct err *cause)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int rc;

	if (t->run_id && !store_run_get(x->store, t->run_id, &r, &e)) {
		rc = 1;
		if (status_is_terminal(r.status))
			rc = sched__settle(x, t, &r, 0, &e);
		else if (t->attempts < t->max_attempts)
			rc = retry_same_run(x, t, cause);
		run_release(&r);
		if (rc != 1)
			return rc;
	}
	run_release(&r);
	r.id = t->run_id ? t->run_id : (char *)"-";
	r.status = (char *)ST_FAILED;
	r.reason = (char *)cause->msg;
	sched__drop_lease(t);
	return settle_failure(x, t, &r, &e);
}

/* The claim is ours: drive the task's run and settle the task. */
static int
work_task(struct sched_ctx *x, struct task *t, struct err *e)
{
	struct engine en;
	struct run r = { 0 };
	int rc, lost;

	if (!x->keeper)
		BUG("task %lld worked before sched_worker_begin",
		    (long long)t->id);
	keeper_keep(x->keeper, t->id, t->lease_token);
	store_fence(x->store, t->id, t->lease_token);
	engine_init(&en, x->store, x->ws, x->cfg);
	en.detach = 1;
	en.unattended = x->cfg->runtime.unattended;
	rc = pick_run(x, &en, t, e);
	fprintf(stderr, "t%lld  claimed by %s (attempt %d) -> %s\n",
		(long long)t->id, x->holder, t->attempts,
		t->run_id ? t->run_id : "?");
	if (rc == 1)
		rc = store_run_get(x->store, t->run_id, &r, e);
	else if (!rc)
		rc = engine_drive(&en, t->run_id, &r, e);
	lost = keeper_lost(x->keeper);
	if (rc == BATON_EFENCED || lost) {
		log_warn("task %lld: %s", (long long)t->id,
			 rc ? e->msg : "lease lost");
		rc = 0; /* the new holder owns the task now */
	} else if (rc == BATON_EABORTED) {
		/* serve is stopping: the next worker resumes the run */
		struct err ignored = ERR_INIT;

		sched__drop_lease(t);
		run_set(&t->status, TASK_QUEUED);
		t->attempts--;
		store_task_update(x->store, t, NULL, &ignored);
	} else if (rc == 0) {
		rc = sched__settle(x, t, &r, en.resume_after_ms, e);
	} else {
		rc = give_back(x, t, e);
	}
	fprintf(stderr, "t%lld  %s%s%s%s%s\n", (long long)t->id, t->status,
		t->block_reason ? "(" : "",
		t->block_reason ? t->block_reason : "",
		t->block_reason ? ")" : "", rc ? " (lease lost)" : "");
	store_fence(x->store, 0, 0);
	keeper_keep(x->keeper, 0, 0);
	engine_release(&en);
	run_release(&r);
	return rc;
}

int
sched_work_once(struct sched_ctx *x, struct err *e)
{
	struct task t = { 0 };
	int rc;

	/* landing first: new runs start from the base it moves, and a
	 * lander that only lands when no task is queued lands last */
	if (!x->tasks_only && x->cfg->runtime.auto_merge) {
		rc = sched_merge_next(x, e);
		if (rc)
			return rc;
	}
	if (x->next && x->next->id) {
		t = *x->next; /* claimed by the last settle */
		memset(x->next, 0, sizeof(*x->next));
		rc = 0;
	} else {
		rc = store_task_claim(x->store, x->holder, claim_lease_ms(x),
				      &t, e);
	}
	if (rc == 0) {
		rc = work_task(x, &t, e);
		task_release(&t);
		return rc ? rc : 1;
	}
	if (rc != BATON_ENOTFOUND)
		return rc;
	if (x->tasks_only || !x->cfg->runtime.judge)
		return 0;
	return sched_judge_next(x, e);
}

/* sched_worker_end's give-back of x->next. */
static void
release_next(struct sched_ctx *x)
{
	struct err e = ERR_INIT;
	struct task *t = x->next;
	char *data;

	if (!t)
		return;
	if (!t->id) {
		task_release(t);
		return;
	}
	data = json_take_text(json_pack("{s:s, s:s}", "worker", x->holder,
					"reason",
					"the worker stopped before it "
					"started the task"));
	store_fence(x->store, t->id, t->lease_token);
	sched__drop_lease(t);
	run_set(&t->status, TASK_QUEUED);
	t->attempts--;
	if (sched_task_write(x, t, "task_released", data, &e))
		log_warn("task %lld: %s (the sweep requeues it once its lease "
			 "runs out)",
			 (long long)t->id, e.msg);
	store_fence(x->store, 0, 0);
	free(data);
	task_release(t);
	memset(t, 0, sizeof(*t));
}

int
sched_worker_begin(struct sched_ctx *x, const struct worker_rec *rec,
		   struct err *e)
{
	x->keeper = keeper_start(x->store_spec, rec, claim_lease_ms(x), e);
	return x->keeper ? 0 : e->rc;
}

void
sched_worker_end(struct sched_ctx *x)
{
	struct err e = ERR_INIT;
	const char *id;

	release_next(x);
	if (!x->keeper)
		return;
	/* the keeper first: a beat after the stop would undo it */
	id = x->keeper->rec.id;
	keeper_stop(x->keeper);
	x->keeper = NULL;
	if (store_worker_stop(x->store, id, &e))
		log_warn("worker %s: %s", id, e.msg);
}
