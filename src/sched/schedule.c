/*
 * Schedules under `baton serve` (config `schedules:`, core/schedule.h):
 * the supervisor looks at each schedule's latest slot every turn and,
 * once per slot, makes the schedule's task.
 *
 * Once per slot across restarts and hosts: a slot is claimed in the
 * store's idempotency_keys table (migration 010) under the key
 * "schedule NAME SLOT" — with spaces, which the API's Idempotency-Key
 * refuses, so no submission can take a slot's key — in the commit that
 * makes the slot's task (store_task_add_keyed), so a serve killed
 * halfway leaves the slot to the next. A slot whose task cannot be made
 * (an unknown pipeline) is claimed alone, with no task.
 *
 * Missed slots: a slot that came while this serve was not running (more
 * than SCHED_SLOT_GRACE_MS before it started) is skipped, or, with
 * `missed: catch_up`, made once — only the latest one, the slot the
 * first turn finds; its claim keeps a slot another serve already made
 * from being made again. A slot from before any serve first saw the
 * schedule (key "schedule NAME since", its time in the payload column)
 * is not caught up: a new schedule starts with its next slot.
 *
 * Reports (the seed's cadence for overnight work): a "schedule_fired"
 * event when the task is made (the start), a "schedule_failed" one when
 * it cannot be; the task's run then reports as every run does, ending
 * with its terminal transition (completion or error). The notifier
 * (server/notify.c) sends the first two as the "schedule" kind.
 */
#include "util/compat.h"

#define LOG_MODULE "schedule"

#include "core/config.h"
#include "core/pipeline.h"
#include "core/receipt.h"
#include "core/run.h"
#include "core/schedule.h"
#include "engine/engine.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

void
sched_slots_init(struct sched_slots *st, const struct config *cfg,
		 int64_t now)
{
	st->started = now;
	st->n = cfg->nr_schedules;
	st->handled = xcalloc(st->n ? st->n : 1, sizeof(*st->handled));
	st->since = xcalloc(st->n ? st->n : 1, sizeof(*st->since));
}

void
sched_slots_release(struct sched_slots *st)
{
	FREE_AND_NULL(st->handled);
	FREE_AND_NULL(st->since);
	st->n = 0;
}

char *
sched_slot_key(const struct schedule *s, int64_t slot_ms)
{
	char when[40];

	time_fmt_iso(slot_ms, when, sizeof(when));
	return xasprintf("schedule %s %s", s->name, when);
}

/* An event of the schedule's, with no run; task_id 0: none. */
static void
note(struct sched_ctx *x, const char *type, int64_t task_id, json_t *data)
{
	struct event ev = { 0 };
	struct err e = ERR_INIT;

	ev.type = (char *)type;
	ev.task_id = task_id;
	ev.data = json_dumps(data, JSON_COMPACT);
	json_decref(data);
	if (store_event_add(x->store, &ev, &e))
		log_warn("cannot record %s: %s", type, e.msg);
	free(ev.data);
}

/*
 * The task of s for slot, made under the slot's key k in one commit
 * with it and filled into *t: 1; 0 when the slot was claimed before,
 * by this or another serve; or an error.
 */
static int
make_task(struct sched_ctx *x, const struct schedule *s, int64_t slot,
	  struct store_key *k, struct task *t, struct err *e)
{
	if (s->pipeline) {
		struct engine en;
		struct pipeline *p = NULL;
		int rc;

		engine_init(&en, x->store, x->ws, x->cfg);
		rc = engine_pipeline(&en, s->pipeline, &p, e);
		pipeline_free(p);
		engine_release(&en);
		if (rc)
			return rc;
	}
	t->title = schedule_title(s, slot);
	t->body = s->body ? xstrdup(s->body) : NULL;
	t->kind = s->kind ? xstrdup(s->kind) : NULL;
	t->area = s->area ? xstrdup(s->area) : NULL;
	t->pipeline = s->pipeline ? xstrdup(s->pipeline) : NULL;
	t->priority = s->priority;
	t->origin = xstrdup("schedule");
	return sched_task_add_keyed(x, t, NULL, k, e);
}

int
sched_schedule_fire(struct sched_ctx *x, const struct schedule *s,
		    int64_t slot, int missed, int64_t *task_out, struct err *e)
{
	struct task t = { 0 };
	struct err why = ERR_INIT;
	char sha[65], was[65], when[40];
	char *key = sched_slot_key(s, slot);
	struct store_key k = { .key = key, .sha = sha };
	const char *type;
	int64_t other = 0;
	int rc;

	*task_out = 0;
	receipt_sha256_hex(key, strlen(key), sha);
	time_fmt_iso(slot, when, sizeof(when));
	rc = make_task(x, s, slot, &k, &t, &why);
	if (rc < 0 && why.rc == BATON_ESTORE) {
		*e = why;
		goto out; /* the next turn tries the slot again */
	}
	if (rc < 0) {
		/* the slot is claimed all the same: not tried twice, by
		   anyone */
		rc = store_idem_claim(x->store, key, sha, &other, was, e);
		if (rc <= 0)
			goto out;
		log_error("%s: slot %s: %s", s->name, when, why.msg);
		type = "schedule_failed";
		note(x, type, 0,
		     json_pack("{s:s, s:s, s:s}", "schedule", s->name, "slot",
			       when, "error", why.msg));
		rc = 0;
		goto out;
	}
	if (rc == 0) {
		fprintf(stderr, "schedule %s: slot %s was made elsewhere\n",
			s->name, when);
		goto out;
	}
	type = "schedule_fired";
	note(x, type, t.id,
	     json_pack("{s:s, s:s, s:I, s:s, s:b}", "schedule", s->name, "slot",
		       when, "task", (json_int_t)t.id, "title", t.title,
		       "missed", missed));
	fprintf(stderr, "schedule %s: slot %s made task t%lld\n", s->name,
		when, (long long)t.id);
	*task_out = t.id;
out:
	task_release(&t);
	free(key);
	return rc;
}

/*
 * When a serve first saw schedule s, in *since (ms): the row of the key
 * "schedule NAME since" holds it (in its payload column, as 64 digits),
 * written by the first serve that looked.
 */
static int
first_seen(struct sched_ctx *x, const struct schedule *s, int64_t now,
	   int64_t *since, struct err *e)
{
	char mine[65], was[65];
	char *key;
	int64_t unused = 0;
	int rc;

	if (*since)
		return 0;
	key = xasprintf("schedule %s since", s->name);
	snprintf(mine, sizeof(mine), "%064lld", (long long)now);
	rc = store_idem_claim(x->store, key, mine, &unused, was, e);
	free(key);
	if (rc < 0)
		return rc;
	*since = rc == 1 ? now : strtoll(was, NULL, 10);
	if (*since <= 0)
		*since = now;
	return 0;
}

int
sched_schedules(struct sched_ctx *x, struct sched_slots *st, int64_t now,
		int64_t *next_ms, struct err *e)
{
	const struct config *cfg = x->cfg;
	int64_t next = 0, slot, n, task;
	size_t i;
	int made = 0, rc;

	for (i = 0; i < cfg->nr_schedules && i < st->n; i++) {
		const struct schedule *s = &cfg->schedules[i];
		char when[40];
		int missed;

		/* first: a schedule is seen from the first turn on */
		if (s->catch_up && !st->since[i]) {
			rc = first_seen(x, s, now, &st->since[i], e);
			if (rc < 0)
				return rc;
		}
		n = cron_next(&s->cron, now);
		if (n && (!next || n < next))
			next = n;
		slot = cron_prev(&s->cron, now);
		if (!slot || slot <= st->handled[i])
			continue;
		missed = slot < st->started - SCHED_SLOT_GRACE_MS;
		/* a slot from before the schedule was first seen is no
		 * missed slot: a new schedule does not start by catching up */
		if (missed && s->catch_up && slot < st->since[i]) {
			time_fmt_iso(slot, when, sizeof(when));
			fprintf(stderr, "schedule %s: slot %s came before the "
				"schedule was first seen: not caught up\n",
				s->name, when);
			st->handled[i] = slot;
			continue;
		}
		if (missed && !s->catch_up) {
			time_fmt_iso(slot, when, sizeof(when));
			fprintf(stderr, "schedule %s: slot %s was missed "
				"while serve was down: skipped (missed: "
				"skip)\n", s->name, when);
			st->handled[i] = slot;
			continue;
		}
		rc = sched_schedule_fire(x, s, slot, missed, &task, e);
		if (rc < 0)
			return rc; /* the store failed: the next turn tries */
		st->handled[i] = slot;
		made += rc;
	}
	*next_ms = next;
	return made;
}
