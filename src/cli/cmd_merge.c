/*
 * baton merge: lands finished runs' branches on the base branch through
 * the merge queue (sched/merge.c), in the foreground.
 *
 *   baton merge RUN              queue RUN unless it is queued, then work
 *                                the queue until RUN is merged or failed
 *   baton merge --add RUN...     only queue (for --queue or a serve)
 *   baton merge --queue          work every due item; wait for those in
 *                [--no-wait]     backoff unless --no-wait
 *   baton merge --list [--json]  the queue
 *
 * What happened is read back from the items themselves: after each step
 * the items whose version moved are printed, so a landing done by another
 * process (a serve with runtime.auto_merge) shows up too.
 */
#include "util/compat.h"

#include <jansson.h>
#include <time.h>

#include "cli/cli.h"
#include "core/run.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* When nothing tells us how long to wait (another process is landing). */
#define POLL_MS 500

/* What was last seen of an item, to tell what changed. */
struct seen {
	int64_t id, version;
	int attempts;
};

struct watch {
	struct seen *v;
	size_t nr, alloc;
	int merged, failed; /* outcomes printed */
	int print;	    /* 0 while taking the first snapshot */
	int retries;	    /* merge.retries, for "retry 1/3" */
	int64_t now;
};

static struct seen *
seen_find(struct watch *w, int64_t id)
{
	size_t i;

	for (i = 0; i < w->nr; i++)
		if (w->v[i].id == id)
			return &w->v[i];
	ALLOC_GROW(w->v, w->nr + 1, w->alloc);
	w->v[w->nr] = (struct seen){ id, -1, 0 };
	return &w->v[w->nr++];
}

/* Seconds until ms (rounded up), for "in 5 s". */
static long
secs_until(int64_t ms, int64_t now)
{
	return ms > now ? (long)((ms - now + 999) / 1000) : 0;
}

/* Prints text's first line, then its other lines indented. */
static void
print_reason(const char *head, const char *text)
{
	const char *nl = strchr(text, '\n');
	const char *p;

	cli_printf("%s%.*s\n", head, nl ? (int)(nl - text) : (int)strlen(text),
		   text);
	for (p = nl; p && p[1]; p = nl) {
		const char *line = p + 1;

		nl = strchr(line, '\n');
		cli_printf("    %.*s\n",
			   nl ? (int)(nl - line) : (int)strlen(line), line);
	}
}

/* One line for an item that reached a new resting state. */
static void
print_outcome(struct watch *w, const struct merge_item *m, int before)
{
	const char *base = m->base_ref ? m->base_ref : "the base";
	struct buf head = BUF_INIT;
	long in = secs_until(m->not_before, w->now);

	if (!strcmp(m->status, MERGE_MERGED)) {
		w->merged++;
		if (m->reason)
			cli_printf("%s: already in %s (%.7s)\n", m->run_id,
				   base,
				   m->merged_commit ? m->merged_commit : "");
		else
			cli_printf("%s: merged as %.7s onto %s\n", m->run_id,
				   m->merged_commit ? m->merged_commit : "",
				   base);
	} else if (!strcmp(m->status, MERGE_FAILED)) {
		w->failed++;
		buf_addf(&head, "%s: failed: ", m->run_id);
		print_reason(head.ptr, m->reason ? m->reason : "(no reason)");
	} else if (!strcmp(m->status, MERGE_PENDING) && m->reason) {
		if (m->attempts > before)
			cli_printf("%s: %s (retry %d/%d in %ld s)\n", m->run_id,
				   m->reason, m->attempts, w->retries, in);
		else if (in)
			cli_printf("%s: %s (retrying in %ld s)\n", m->run_id,
				   m->reason, in);
		else
			cli_printf("%s: %s (retrying at once)\n", m->run_id,
				   m->reason);
	}
	buf_release(&head);
	fflush(stdout);
}

static int
watch_cb(const struct merge_item *m, void *arg)
{
	struct watch *w = arg;
	struct seen *s = seen_find(w, m->id);

	if (s->version == m->version)
		return 0;
	if (w->print && strcmp(m->status, MERGE_PROCESSING))
		print_outcome(w, m, s->version < 0 ? 0 : s->attempts);
	s->version = m->version;
	s->attempts = m->attempts;
	return 0;
}

/* Prints what changed in the queue since the last look. */
static int
watch_look(struct cli *c, struct watch *w, struct err *e)
{
	w->now = time_now_ms();
	return store_merge_list(c->store, NULL, watch_cb, w, e);
}

struct due {
	int64_t now, next; /* next: earliest not_before in the future */
	int pending, waiting;
};

static int
due_cb(const struct merge_item *m, void *arg)
{
	struct due *d = arg;

	if (strcmp(m->status, MERGE_PENDING))
		return 0;
	d->pending++;
	if (m->not_before > d->now) {
		d->waiting++;
		if (!d->next || m->not_before < d->next)
			d->next = m->not_before;
	}
	return 0;
}

static void
sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000),
			       (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Sleeps until the earliest retry of a pending item, or a moment when
 * items are due but someone else holds the landing lock.
 */
static void
wait_for_due(const struct due *d)
{
	int64_t ms = d->next ? d->next - time_now_ms() : POLL_MS;

	if (d->pending > d->waiting || ms < 0)
		ms = d->pending > d->waiting ? POLL_MS : 0;
	sleep_ms(ms + 10); /* a little after, so it is surely due */
}

static void
ctx_init(struct cli *c, struct sched_ctx *x)
{
	x->store = c->store;
	x->ws = &c->ws;
	x->cfg = &c->cfg;
	x->holder = NULL; /* "merge:<pid>" */
}

/* Queues one run; prints what became of it. */
static int
queue_one(struct cli *c, struct sched_ctx *x, const char *ref,
	  struct merge_item *m, struct run *r, struct err *e)
{
	int rc;

	rc = store_run_get(c->store, ref, r, e);
	if (!rc)
		rc = sched_merge_enqueue(x, r, m, e);
	if (!rc)
		cli_printf("%s: queued to land on %s\n", r->id,
			   m->base_ref ? m->base_ref :
					 "the checked-out branch");
	else if (rc == BATON_EBUSY && m->status &&
		 !strcmp(m->status, MERGE_MERGED))
		cli_printf("%s: already merged as %.7s onto %s\n", r->id,
			   m->merged_commit ? m->merged_commit : "",
			   m->base_ref ? m->base_ref : "the base");
	else if (rc == BATON_EBUSY)
		cli_printf("%s: already in the merge queue (%s)\n", r->id,
			   m->status);
	return rc;
}

/* baton merge RUN */
static int
merge_run(struct cli *c, const char *ref)
{
	struct sched_ctx x;
	struct watch w = { 0 };
	struct merge_item m = { 0 };
	struct run r = { 0 };
	struct err e = ERR_INIT;
	int rc, n, ex = EXIT_FAIL;

	ctx_init(c, &x);
	rc = queue_one(c, &x, ref, &m, &r, &e);
	if ((rc && rc != BATON_EBUSY) || !m.status)
		goto fail;
	w.retries = c->cfg.merge.retries;
	if (watch_look(c, &w, &e))
		goto fail;
	w.print = 1;
	for (;;) {
		if (!strcmp(m.status, MERGE_MERGED)) {
			ex = EXIT_OK;
			break;
		}
		if (!strcmp(m.status, MERGE_FAILED))
			break;
		n = sched_merge_next(&x, &e);
		/* (on an error the item's line would only repeat it) */
		if (n < 0 || watch_look(c, &w, &e))
			goto fail;
		merge_item_release(&m);
		if (store_merge_get(c->store, 0, r.id, &m, &e))
			goto fail;
		if (!n && strcmp(m.status, MERGE_MERGED) &&
		    strcmp(m.status, MERGE_FAILED)) {
			struct due d = { time_now_ms(), 0, 1, 0 };

			if (!strcmp(m.status, MERGE_PENDING) &&
			    m.not_before > d.now) {
				d.next = m.not_before;
				d.waiting = 1;
			}
			wait_for_due(&d);
		}
	}
	goto out;
fail:
	cli_error("%s", e.msg);
out:
	free(w.v);
	merge_item_release(&m);
	run_release(&r);
	return ex;
}

/* baton merge --add RUN... */
static int
merge_add(struct cli *c, int argc, char **argv)
{
	struct sched_ctx x;
	int i, rc, ex = EXIT_OK;

	ctx_init(c, &x);
	for (i = 0; i < argc; i++) {
		struct merge_item m = { 0 };
		struct run r = { 0 };
		struct err e = ERR_INIT;

		rc = queue_one(c, &x, argv[i], &m, &r, &e);
		if (rc && rc != BATON_EBUSY) {
			cli_error("%s", e.msg);
			ex = EXIT_FAIL;
		}
		merge_item_release(&m);
		run_release(&r);
	}
	return ex;
}

/* baton merge --queue [--no-wait] */
static int
merge_queue(struct cli *c, int no_wait)
{
	struct sched_ctx x;
	struct watch w = { 0 };
	struct due d = { 0 };
	struct err e = ERR_INIT;
	int n, ex = EXIT_OK;

	ctx_init(c, &x);
	w.retries = c->cfg.merge.retries;
	if (watch_look(c, &w, &e))
		goto fail;
	w.print = 1;
	for (;;) {
		n = sched_merge_next(&x, &e);
		/* (on an error the item's line would only repeat it) */
		if (n < 0 || watch_look(c, &w, &e))
			goto fail;
		if (n)
			continue;
		memset(&d, 0, sizeof(d));
		d.now = time_now_ms();
		if (store_merge_list(c->store, MERGE_PENDING, due_cb, &d, &e))
			goto fail;
		if (!d.pending || no_wait)
			break;
		wait_for_due(&d);
	}
	cli_printf("merge queue: %d merged, %d failed, %d waiting\n", w.merged,
		   w.failed, d.pending);
	if (w.failed || d.pending)
		ex = EXIT_FAIL;
	goto out;
fail:
	cli_error("%s", e.msg);
	ex = EXIT_FAIL;
out:
	free(w.v);
	return ex;
}

static json_t *
item_json(const struct merge_item *m)
{
	char nb[32], cr[32], up[32];

	time_fmt_iso(m->not_before, nb, sizeof(nb));
	time_fmt_iso(m->created_at, cr, sizeof(cr));
	time_fmt_iso(m->updated_at, up, sizeof(up));
	return json_pack("{s:I, s:s, s:s, s:s?, s:I, s:s, s:i, s:s?, s:s?, "
			 "s:s?, s:s?, s:s, s:s}",
			 "id", (json_int_t)m->id, "run", m->run_id, "branch",
			 m->branch, "base", m->base_ref, "task",
			 (json_int_t)m->task_id, "status", m->status,
			 "attempts", m->attempts, "not_before",
			 m->not_before ? nb : NULL, "claimed_by",
			 m->claimed_by, "merged_commit", m->merged_commit,
			 "reason", m->reason, "created_at", cr, "updated_at",
			 up);
}

struct list_ctx {
	int json, rows;
	int64_t now;
};

static int
list_cb(const struct merge_item *m, void *arg)
{
	struct list_ctx *l = arg;
	struct buf detail = BUF_INIT;
	const char *nl;

	if (l->json) {
		json_t *o = item_json(m);
		char *s = json_dumps(o, JSON_INDENT(2));

		printf("%s%s", l->rows++ ? ",\n" : "[\n", s);
		free(s);
		json_decref(o);
		return 0;
	}
	if (!l->rows++)
		cli_printf("%-5s %-28s %-10s %5s %-10s %s\n", "ITEM", "RUN",
			   "STATUS", "TRIES", "BASE", "DETAIL");
	if (!strcmp(m->status, MERGE_MERGED))
		buf_addf(&detail, "%.12s ",
			 m->merged_commit ? m->merged_commit : "");
	else if (!strcmp(m->status, MERGE_PROCESSING))
		buf_addf(&detail, "claimed by %s",
			 m->claimed_by ? m->claimed_by : "?");
	else if (!strcmp(m->status, MERGE_PENDING) && m->not_before > l->now)
		buf_addf(&detail, "retry in %ld s: ",
			 secs_until(m->not_before, l->now));
	if (m->reason && strcmp(m->status, MERGE_PROCESSING)) {
		nl = strchr(m->reason, '\n');
		buf_addf(&detail, "%.*s",
			 nl ? (int)(nl - m->reason) : (int)strlen(m->reason),
			 m->reason);
	}
	cli_printf("%-5lld %-28.28s %-10s %5d %-10s %s\n", (long long)m->id,
		   m->run_id, m->status, m->attempts,
		   m->base_ref ? m->base_ref : "-", detail.ptr);
	buf_release(&detail);
	return 0;
}

/* baton merge --list [--json] */
static int
merge_list(struct cli *c, int json)
{
	struct list_ctx l = { json, 0, time_now_ms() };
	struct err e = ERR_INIT;

	if (store_merge_list(c->store, NULL, list_cb, &l, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (json)
		puts(l.rows ? "\n]" : "[]");
	else if (!l.rows)
		cli_printf("the merge queue is empty: baton merge RUN\n");
	return EXIT_OK;
}

static int
merge_exec(struct cli *c, int argc, char **argv)
{
	int queue = 0, no_wait = 0, list = 0, json = 0, add = 0, n;
	struct cli_opt opts[] = {
		{ "--add", &add, NULL },
		{ "--queue", &queue, NULL },
		{ "--no-wait", &no_wait, NULL },
		{ "--list", &list, NULL },
		{ "--json", &json, NULL },
	};

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	if (add + list + queue > 1 || (add && !n) || (!add && n > 1) ||
	    (!add && !list && !queue && n != 1) ||
	    ((list || queue) && n) || (json && !list) || (no_wait && !queue))
		return cli_usage(&cmd_merge);
	if (list)
		return merge_list(c, json);
	if (add)
		return merge_add(c, n, argv + 1);
	/* merge commits need an author even where git has none set */
	workspace_detect_identity(&c->ws);
	if (queue)
		return merge_queue(c, no_wait);
	return merge_run(c, argv[1]);
}

const struct cmd cmd_merge = {
	.name = "merge",
	.usage = "merge RUN | --add RUN... | --queue [--no-wait] | --list "
		 "[--json]",
	.summary = "land finished runs on the base branch through the merge "
		   "queue: merged, checked, then fast-forwarded",
	.needs = CLI_NEEDS_STORE,
	.exec = merge_exec,
};
