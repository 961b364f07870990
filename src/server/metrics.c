/*
 * /metrics in the Prometheus text format (docs/api.md, "Metrics"). The
 * gauges are read from the store at each scrape, so they are true
 * whichever process changed what; the counters of things that happen
 * (stage durations, lease takeovers, events, requests) are kept by this
 * process from the events it sees and start at zero with it.
 */
#include "util/compat.h"

#include <stdatomic.h>
#include <stddef.h>

#include "core/config.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"

/* Answered requests by status class: 2xx, 3xx, 4xx, 5xx. */
static atomic_llong answered[4];

void
metrics_count(int status)
{
	if (status >= 200 && status < 600)
		atomic_fetch_add(&answered[status / 100 - 2], 1);
}

static const char *const block_reasons[] = {
	BLOCK_AWAITING_JUDGE, BLOCK_AWAITING_APPROVAL, BLOCK_PAUSED,
	BLOCK_QUOTA_WAIT,     BLOCK_NEEDS_REWORK,      BLOCK_DEPENDENCY,
	BLOCK_ISSUE_LINKING,  BLOCK_PULL_REQUEST,
};

static const char *const merge_statuses[] = {
	MERGE_PENDING, MERGE_PROCESSING, MERGE_MERGED, MERGE_FAILED,
};

struct tally {
	int64_t blocked[ARRAY_SIZE(block_reasons)];
	int64_t merges[ARRAY_SIZE(merge_statuses)];
};

static int
count_blocked(const struct task *t, void *arg)
{
	struct tally *ty = arg;
	size_t i;

	for (i = 0; t->block_reason && i < ARRAY_SIZE(block_reasons); i++)
		if (!strcmp(t->block_reason, block_reasons[i]))
			ty->blocked[i]++;
	return 0;
}

static int
count_merge(const struct merge_item *m, void *arg)
{
	struct tally *ty = arg;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(merge_statuses); i++)
		if (!strcmp(m->status, merge_statuses[i]))
			ty->merges[i]++;
	return 0;
}

struct run_totals {
	struct buf *out;
	int64_t tokens_in, tokens_out;
	double cost;
};

static int
add_runs(const struct store_run_stat *st, void *arg)
{
	struct run_totals *rt = arg;

	buf_addf(rt->out, "baton_runs{status=\"%s\"} %lld\n", st->status,
		 (long long)st->runs);
	rt->tokens_in += st->tokens_in;
	rt->tokens_out += st->tokens_out;
	rt->cost += st->cost_usd;
	return 0;
}

static int
store_part(struct store *s, struct buf *out, struct err *e)
{
	struct store_task_filter blocked = { .status = TASK_BLOCKED };
	int64_t counts[NR_TASK_STATUSES];
	struct run_totals rt = { out, 0, 0, 0 };
	struct tally ty = { { 0 }, { 0 } };
	size_t i;
	int rc;

	rc = store_task_counts(s, task_statuses, counts,
			       NR_TASK_STATUSES, e);
	if (!rc)
		rc = store_task_list(s, &blocked, count_blocked, &ty, e);
	if (!rc)
		rc = store_merge_list(s, NULL, count_merge, &ty, e);
	if (rc)
		return rc;
	buf_adds(out, "# HELP baton_tasks Tasks by status.\n"
		      "# TYPE baton_tasks gauge\n");
	for (i = 0; i < NR_TASK_STATUSES; i++)
		buf_addf(out, "baton_tasks{status=\"%s\"} %lld\n",
			 task_statuses[i], (long long)counts[i]);
	buf_adds(out, "# HELP baton_tasks_blocked Blocked tasks by reason.\n"
		      "# TYPE baton_tasks_blocked gauge\n");
	for (i = 0; i < ARRAY_SIZE(block_reasons); i++)
		buf_addf(out, "baton_tasks_blocked{reason=\"%s\"} %lld\n",
			 block_reasons[i], (long long)ty.blocked[i]);
	buf_addf(out,
		 "# HELP baton_queue_depth Tasks queued for a worker.\n"
		 "# TYPE baton_queue_depth gauge\n"
		 "baton_queue_depth %lld\n",
		 (long long)counts[0]); /* task_statuses[0]: queued */
	buf_adds(out, "# HELP baton_runs Runs by status.\n"
		      "# TYPE baton_runs gauge\n");
	rc = store_run_stats(s, add_runs, &rt, e);
	if (rc)
		return rc;
	buf_addf(out,
		 "# HELP baton_tokens_total Tokens the agents used, all runs.\n"
		 "# TYPE baton_tokens_total counter\n"
		 "baton_tokens_total{direction=\"in\"} %lld\n"
		 "baton_tokens_total{direction=\"out\"} %lld\n"
		 "# HELP baton_cost_usd_total What the agents cost, all runs.\n"
		 "# TYPE baton_cost_usd_total counter\n"
		 "baton_cost_usd_total %.6f\n",
		 (long long)rt.tokens_in, (long long)rt.tokens_out, rt.cost);
	buf_adds(out, "# HELP baton_merge_queue Merge queue items by status.\n"
		      "# TYPE baton_merge_queue gauge\n");
	for (i = 0; i < ARRAY_SIZE(merge_statuses); i++)
		buf_addf(out, "baton_merge_queue{status=\"%s\"} %lld\n",
			 merge_statuses[i], (long long)ty.merges[i]);
	return 0;
}

/*
 * The forge client's counters (store_forge_stats_get: kept in the store,
 * as the sync runs in serve's companion and in `baton forge sync`), when
 * a forge is configured.
 */
static int
forge_part(struct store *s, struct buf *out, struct err *e)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} counters[] = {
		{ "baton_forge_api_calls_total",
		  "Requests made to the forge's API.",
		  offsetof(struct forge_stats, calls) },
		{ "baton_forge_not_modified_total",
		  "Conditional requests the forge answered 304 Not Modified.",
		  offsetof(struct forge_stats, not_modified) },
		{ "baton_forge_rate_limit_waits_total",
		  "Waits for the forge's rate limits.",
		  offsetof(struct forge_stats, rate_waits) },
		{ "baton_forge_rate_limit_wait_seconds_total",
		  "Seconds spent waiting for the forge's rate limits.",
		  offsetof(struct forge_stats, rate_wait_seconds) },
		{ "baton_forge_syncs_total", "Forge sync rounds.",
		  offsetof(struct forge_stats, syncs) },
		{ "baton_forge_webhooks_total",
		  "Forge webhook deliveries taken (signature verified, not a "
		  "redelivery).",
		  offsetof(struct forge_stats, webhooks) },
	};
	struct forge_stats st = { 0 };
	size_t i;
	int rc = store_forge_stats_get(s, &st, e);

	if (rc)
		return rc;
	for (i = 0; i < ARRAY_SIZE(counters); i++) {
		int64_t v;

		memcpy(&v, (const char *)&st + counters[i].off, sizeof(v));
		buf_addf(out, "# HELP %s %s\n# TYPE %s counter\n%s %lld\n",
			 counters[i].name, counters[i].help, counters[i].name,
			 counters[i].name, (long long)v);
	}
	return 0;
}

void
metrics_page(struct req *rq)
{
	static const char *const classes[] = { "2xx", "3xx", "4xx", "5xx" };
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	size_t i;

	if (store_part(rq->store, &out, &e) ||
	    (rq->srv->cfg->forge.type && forge_part(rq->store, &out, &e))) {
		buf_release(&out);
		http_fail(rq, &e);
		return;
	}
	hub_metrics(rq->srv->hub, &out);
	buf_addf(&out,
		 "# HELP baton_stream_clients Live streams open (SSE and "
		 "WebSocket).\n"
		 "# TYPE baton_stream_clients gauge\n"
		 "baton_stream_clients %d\n"
		 "# HELP baton_http_requests_total Requests answered, by "
		 "status class, since this serve started.\n"
		 "# TYPE baton_http_requests_total counter\n",
		 stream_clients());
	for (i = 0; i < ARRAY_SIZE(classes); i++)
		buf_addf(&out, "baton_http_requests_total{code=\"%s\"} %lld\n",
			 classes[i], (long long)atomic_load(&answered[i]));
	http_text(rq, 200, "text/plain; version=0.0.4; charset=utf-8",
		  out.ptr, out.len);
	buf_release(&out);
}
