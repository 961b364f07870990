/*
 * GET /api/v1/stats: the numbers behind the dashboard's charts of the
 * whole queue (docs/api.md, "Stats"). Everything is derived from the
 * store's event log, so the pictures survive a restart of serve and agree
 * with whichever process did the work:
 *
 *   queue depth   the task events replayed in seq order, each task queued
 *                 or not (task_added, a requeue, a retry: queued; a claim,
 *                 a cancel, a settle elsewhere: not), sampled at the end
 *                 of each bucket, then pinned to the store's own count of
 *                 queued tasks at the right edge (a requeue that wrote no
 *                 event would otherwise leave the past off by one);
 *   throughput    task_claimed and task_settled (by status) per bucket;
 *   cost, tokens  agent_exited's tokens_in, tokens_out and cost_usd summed
 *                 per UTC day.
 *
 * The window is bounded (STATS_MAX_HOURS, at most STATS_MAX_BUCKETS
 * buckets; STATS_MAX_DAYS days), so the answer stays small whatever the
 * history; reading it costs one pass over the task and agent_exited
 * events.
 */
#include "util/compat.h"

#include <jansson.h>
#include <stdlib.h>
#include <time.h>

#include "core/run.h"
#include "core/queue.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/json.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define STATS_MAX_HOURS	  48
#define STATS_MAX_DAYS	  90
#define STATS_MAX_BUCKETS 360
#define DAY_MS		  (86400LL * 1000)

/* What a task event does to the task's place in the queue. */
enum qmove {
	Q_ENTER, /* queued now */
	Q_LEAVE, /* not queued now */
	Q_SETTLE /* task_settled: queued when its status is */
};

static const struct {
	const char *type;
	enum qmove move;
} queue_events[] = {
	{ "task_added", Q_ENTER },     { "lease_expired", Q_ENTER },
	{ "worker_gone", Q_ENTER },    { "quota_reset", Q_ENTER },
	{ "task_resumed", Q_ENTER },   { "task_retried", Q_ENTER },
	{ "task_linked", Q_ENTER },    { "task_claimed", Q_LEAVE },
	{ "task_cancelled", Q_LEAVE }, { "task_blocked", Q_LEAVE },
	{ "task_done", Q_LEAVE },      { "task_settled", Q_SETTLE },
};

/* One task event, kept for the replay. */
struct qev {
	int64_t seq, task, ts;
	unsigned char type;   /* index into queue_events */
	unsigned char status; /* task_settled: a settle_statuses index + 1 */
};

static const char *const settle_statuses[] = {
	"queued", "done", "failed", "blocked", "cancelled",
};

struct qcollect {
	struct qev *v;
	size_t nr, alloc;
	unsigned char type;
};

static int
collect_qev(const struct event *ev, void *arg)
{
	struct qcollect *c = arg;
	struct qev *q;
	json_t *d;
	size_t i;

	if (ev->task_id <= 0)
		return 0;
	ALLOC_GROW(c->v, c->nr + 1, c->alloc);
	q = &c->v[c->nr++];
	q->seq = ev->seq;
	q->task = ev->task_id;
	q->ts = ev->ts;
	q->type = c->type;
	q->status = 0;
	if (queue_events[c->type].move == Q_ENTER && ev->data &&
	    !strcmp(queue_events[c->type].type, "task_added")) {
		/* a task made of an issue waits for its link, not a worker */
		d = json_loads(ev->data, 0, NULL);
		if (d && json_object_get(d, "issue"))
			q->status = 1;
		json_decref(d);
	}
	if (queue_events[c->type].move == Q_SETTLE && ev->data) {
		const char *st;

		d = json_loads(ev->data, 0, NULL);
		st = json_get_str(d, "status");
		for (i = 0; st && i < ARRAY_SIZE(settle_statuses); i++)
			if (!strcmp(st, settle_statuses[i]))
				q->status = (unsigned char)(i + 1);
		json_decref(d);
	}
	return 0;
}

static int
by_seq(const void *a, const void *b)
{
	const struct qev *x = a, *y = b;

	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* One bucket of the queue chart. */
struct bucket {
	int64_t depth, claimed;
	int64_t settled[ARRAY_SIZE(settle_statuses)];
};

/*
 * Replays the task events into the buckets [from, from + n * step).
 * Fills *end_depth with the depth the replay ends at.
 */
static void
replay(struct qcollect *c, int64_t from, int64_t step, struct bucket *b,
       size_t n, int64_t *end_depth)
{
	unsigned char *queued = NULL; /* by task id */
	size_t qalloc = 0, i, k = 0;
	int64_t depth = 0, end = from + (int64_t)n * step;

	if (c->nr) /* no events: c->v is NULL, which qsort may not take */
		qsort(c->v, c->nr, sizeof(*c->v), by_seq);
	for (i = 0; i < c->nr; i++) {
		const struct qev *q = &c->v[i];
		enum qmove mv = queue_events[q->type].move;
		int now;
		size_t id = (size_t)q->task;

		/* the buckets that ended before this event: its depth */
		while (k < n && q->ts >= from + (int64_t)(k + 1) * step)
			b[k++].depth = depth;
		if (id >= qalloc) {
			size_t old = qalloc;

			qalloc = id + 1 > 2 * qalloc ? id + 1 : 2 * qalloc;
			queued = xrealloc(queued, qalloc);
			memset(queued + old, 0, qalloc - old);
		}
		if (mv == Q_SETTLE)
			now = q->status == 1;
		else if (mv == Q_ENTER)
			now = q->status == 0; /* an issue's task waits */
		else
			now = 0;
		depth += now - queued[id];
		queued[id] = (unsigned char)now;
		if (q->ts < from || q->ts >= end)
			continue;
		if (!strcmp(queue_events[q->type].type, "task_claimed"))
			b[(q->ts - from) / step].claimed++;
		if (mv == Q_SETTLE && q->status)
			b[(q->ts - from) / step].settled[q->status - 1]++;
	}
	while (k < n)
		b[k++].depth = depth;
	*end_depth = depth;
	free(queued);
}

/* Per-day usage from agent_exited. */
struct days {
	int64_t first; /* the first day's start, UTC ms */
	size_t n;
	int64_t *calls, *tin, *tout;
	double *cost;
};

static int
add_usage(const struct event *ev, void *arg)
{
	struct days *d = arg;
	json_t *j;
	int64_t day;
	const json_t *v;

	if (ev->ts < d->first)
		return 0;
	day = (ev->ts - d->first) / DAY_MS;
	if (day >= (int64_t)d->n || !ev->data)
		return 0;
	j = json_loads(ev->data, 0, NULL);
	if (!j)
		return 0;
	d->calls[day]++;
	v = json_object_get(j, "tokens_in");
	if (json_is_integer(v) && json_integer_value(v) > 0)
		d->tin[day] += json_integer_value(v);
	v = json_object_get(j, "tokens_out");
	if (json_is_integer(v) && json_integer_value(v) > 0)
		d->tout[day] += json_integer_value(v);
	v = json_object_get(j, "cost_usd");
	if (json_is_number(v) && json_number_value(v) > 0)
		d->cost[day] += json_number_value(v);
	json_decref(j);
	return 0;
}

static json_t *
days_json(const struct days *d)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; i < d->n; i++) {
		char day[16];
		int64_t ms = d->first + (int64_t)i * DAY_MS;
		time_t t = (time_t)(ms / 1000);
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(day, sizeof(day), "%Y-%m-%d", &tm);
		json_array_append_new(
		    arr,
		    json_pack("{s:s, s:I, s:I, s:I, s:I, s:f}", "day", day, "t",
			      (json_int_t)ms, "calls", (json_int_t)d->calls[i],
			      "tokens_in", (json_int_t)d->tin[i], "tokens_out",
			      (json_int_t)d->tout[i], "cost_usd", d->cost[i]));
	}
	return arr;
}

static json_t *
buckets_json(const struct bucket *b, size_t n, int64_t from, int64_t step)
{
	json_t *arr = json_array();
	size_t i, j;

	for (i = 0; i < n; i++) {
		int64_t t = from + (int64_t)i * step;
		json_t *o = json_pack("{s:I, s:I, s:I}", "t", (json_int_t)t,
				      "queued", (json_int_t)b[i].depth,
				      "claimed", (json_int_t)b[i].claimed);

		for (j = 1; j < ARRAY_SIZE(settle_statuses); j++)
			json_object_set_new(o, settle_statuses[j],
					    json_integer(b[i].settled[j]));
		json_array_append_new(arr, o);
	}
	return arr;
}

static int
query_range(struct req *rq, const char *name, int64_t def, int64_t max,
	    int64_t *out)
{
	char v[32], *end = NULL;
	long long n;

	*out = def;
	if (!http_query(rq, name, v, sizeof(v)))
		return 0;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (!*v || *end || errno || n < 1 || n > max) {
		http_error(rq, 400, "bad_request",
			   "%s must be a number from 1 to %lld, not '%s'", name,
			   (long long)max, v);
		return -1;
	}
	*out = n;
	return 0;
}

void
api_stats(struct req *rq)
{
	struct qcollect c = { NULL, 0, 0, 0 };
	struct days d = { 0 };
	struct bucket *b = NULL;
	struct err e = ERR_INIT;
	int64_t hours, ndays, step, from, now = time_now_ms(), end_depth;
	int64_t counts[1];
	const char *queued[] = { TASK_QUEUED };
	size_t n, i;
	int rc = 0;

	if (query_range(rq, "hours", 6, STATS_MAX_HOURS, &hours) ||
	    query_range(rq, "days", 14, STATS_MAX_DAYS, &ndays))
		return;
	/* a whole number of minutes per bucket, at most 360 buckets */
	step =
	    60000 * ((hours * 60 + STATS_MAX_BUCKETS - 1) / STATS_MAX_BUCKETS);
	n = (size_t)(hours * 3600000 / step);
	/* the last bucket ends at the next whole step after now */
	from = (now / step + 1) * step - (int64_t)n * step;
	for (i = 0; !rc && i < ARRAY_SIZE(queue_events); i++) {
		c.type = (unsigned char)i;
		rc = store_event_list(rq->store, NULL, 0, queue_events[i].type,
				      collect_qev, &c, &e);
	}
	if (!rc)
		rc = store_task_counts(rq->store, queued, counts, 1, &e);
	d.n = (size_t)ndays;
	d.first = (now / DAY_MS - (ndays - 1)) * DAY_MS;
	d.calls = xcalloc(d.n, sizeof(*d.calls));
	d.tin = xcalloc(d.n, sizeof(*d.tin));
	d.tout = xcalloc(d.n, sizeof(*d.tout));
	d.cost = xcalloc(d.n, sizeof(*d.cost));
	if (!rc)
		rc = store_event_list(rq->store, NULL, 0, "agent_exited",
				      add_usage, &d, &e);
	if (rc) {
		http_fail(rq, &e);
		goto out;
	}
	b = xcalloc(n, sizeof(*b));
	replay(&c, from, step, b, n, &end_depth);
	/* pinned to the store's count at the right edge */
	for (i = 0; i < n; i++) {
		b[i].depth += counts[0] - end_depth;
		if (b[i].depth < 0)
			b[i].depth = 0;
	}
	http_json(rq, 200,
		  json_pack("{s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "now",
			    (json_int_t)now, "hours", (json_int_t)hours,
			    "step_seconds", (json_int_t)(step / 1000), "from",
			    (json_int_t)from, "queued", (json_int_t)counts[0],
			    "queue", buckets_json(b, n, from, step), "days",
			    days_json(&d)));
out:
	free(b);
	free(c.v);
	free(d.calls);
	free(d.tin);
	free(d.tout);
	free(d.cost);
}
