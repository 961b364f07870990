/*
 * The hub: one thread follows the store's event log and keeps the
 * newest events, already turned into live-protocol messages, in a ring
 * that every stream reads from. The thread sleeps on store_watch_fd (any
 * process's commit wakes it), reads what is new after the last seq it
 * saw, appends it, and wakes the streams. A stream that asks for events
 * older than the ring holds (a client back after a long absence) reads
 * those from the store itself, so a reconnect misses nothing.
 *
 *   store commit ─▶ inotify ─▶ hub thread ─▶ ring ─▶ cond broadcast ─▶ readers
 *                                          ├─▶ hub_on_new's callback (the
 *                                          │   event loop's streams)
 *                                          └─▶ notify_poke (webhooks)
 */
#include "util/compat.h"

#include <assert.h>
#include <jansson.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core/pipeline.h"
#include "core/run.h"
#include "engine/engine.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#undef LOG_MODULE
#define LOG_MODULE "hub"

#define RING 4096
/* When the store cannot be watched: how often to look. */
#define FALLBACK_POLL_MS 500
/* How often the hub looks for tokens revoked behind serve's back. */
#define REVOKED_LOOK_MS 1000

/*
 * inotify hears a commit when its WAL frames are written, which is a
 * moment before the commit can be read (the writer still syncs and then
 * publishes it in the -shm index, which inotify cannot see). So after a
 * wake-up the hub looks again a few times, sooner first, until one
 * second passes with no new write: a lone commit is never left waiting
 * for the next one.
 */
static const int settle_ms[] = { 2, 10, 50, 250, 700 };

/* Stage duration buckets for /metrics, in seconds. */
static const double buckets[] = { 1, 5, 15, 60, 300, 900, 3600 };
#define NR_BUCKETS ARRAY_SIZE(buckets)

struct stage_hist {
	char *stage;
	int64_t counts[NR_BUCKETS + 1]; /* the last: +Inf */
	double sum;
	int64_t n;
};

/* When a run entered the status it is in (for stage durations). */
struct entered {
	char *run_id;
	char *status;
	int64_t ts;
};

struct hub {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct store *s;
	struct notifier *notifier;
	int stop_pipe[2];
	int stopping;
	int64_t last_seq;
	/* every event with seq > floor is in the ring */
	int64_t floor;
	struct hub_msg ring[RING];
	size_t head, count; /* oldest at head */
	/* metrics */
	hub_wake_fn *wake; /* hub_on_new's */
	void *wake_arg;
	hub_revoke_fn *revoke; /* hub_on_revoke's */
	int64_t events_total, takeovers;
	struct stage_hist *hist;
	size_t nr_hist;
	struct entered *open;
	size_t nr_open;
};

/* ---- messages ------------------------------------------------------------ */

/*
 * A message's strings, in one block: the run id, then the SSE event with
 * the JSON line in it. Every stream that sends the message holds a
 * reference rather than a copy, so hub_read takes the hub's lock only
 * to count them, and no stream formats what the hub already did.
 */
struct hub_text {
	atomic_uint refs;
	char s[];
};

void
hub_msg_release(struct hub_msg *m)
{
	if (m->text && atomic_fetch_sub_explicit(&m->text->refs, 1,
						 memory_order_acq_rel) == 1)
		free(m->text);
	memset(m, 0, sizeof(*m));
}

static void
msg_copy(struct hub_msg *dst, const struct hub_msg *src)
{
	*dst = *src;
	atomic_fetch_add_explicit(&src->text->refs, 1, memory_order_relaxed);
}

/* Makes m's text of its run id and its JSON line json (freed). */
static void
msg_text(struct hub_msg *m, const char *run_id, char *json)
{
	size_t rl = run_id ? strlen(run_id) + 1 : 0;
	char head[64 + 32];
	int hl = snprintf(head, sizeof(head), "id: %lld\nevent: %s\ndata: ",
			  (long long)m->seq, m->type);
	size_t jl = strlen(json), sl = (size_t)hl + jl + 2;
	struct hub_text *t = xmalloc(sizeof(*t) + rl + sl + 1);
	char *p = t->s;

	assert(hl > 0 && (size_t)hl < sizeof(head)); /* types are short */
	atomic_init(&t->refs, 1);
	if (run_id) {
		memcpy(p, run_id, rl);
		m->run_id = p;
		p += rl;
	}
	/* each with its NUL, which the next overwrites */
	memcpy(p, head, (size_t)hl + 1);
	memcpy(p + hl, json, jl + 1);
	memcpy(p + hl + jl, "\n\n", 3);
	m->sse = p;
	m->sse_len = sl;
	m->json = p + hl;
	m->json_len = jl;
	m->text = t;
	free(json);
}

/* The protocol type of a transition, and the fields it adds. */
static const char *
transition_type(const struct event *ev, json_t *data, json_t *msg)
{
	const char *to = ev->to ? ev->to : "", *from = ev->from ? ev->from : "";

	json_object_set_new(msg, "status", json_string(to));
	json_object_set_new(msg, "from", json_string(from));
	if (!strcmp(from, ST_WAITING) && json_get_str(data, "decision")) {
		json_object_set(msg, "decision",
				json_object_get(data, "decision"));
		json_object_set_new(msg, "approval_id",
				    json_string(ev->run_id ? ev->run_id : ""));
		json_object_set_new(
			msg, "approved",
			json_boolean(!strcmp(json_get_str(data, "decision"),
					     "approve")));
		return "approval:decided";
	}
	if (!strcmp(to, ST_WAITING)) {
		/* a gate is answered by its run's id (approval:response) */
		json_object_set_new(msg, "approval_id",
				    json_string(ev->run_id ? ev->run_id : ""));
		if (json_object_get(data, "timeout_ms"))
			json_object_set(msg, "timeout_ms",
					json_object_get(data, "timeout_ms"));
		json_object_set_new(msg, "gate",
				    json_string(json_get_str(data, "gate") ?
							json_get_str(data, "gate") :
							""));
		return "approval:requested";
	}
	if (!strcmp(to, ST_MERGE_READY) || !strcmp(to, ST_COMPLETED))
		return "task:completed";
	if (!strcmp(to, ST_ABORTED))
		return "task:stopped";
	if (!strcmp(to, ST_FAILED) || !strcmp(to, ST_BLOCKED)) {
		json_object_set(msg, "reason", json_object_get(data, "reason") ?
						       json_object_get(data, "reason") :
						       json_null());
		return "task:error";
	}
	if (!strcmp(from, ST_CREATED))
		return "task:started";
	return "task:progress";
}

void
hub_msg_from_event(const struct event *ev, struct hub_msg *out)
{
	char *line = engine_event_line(ev);
	json_t *full = json_loads(line, 0, NULL);
	json_t *data = json_object_get(full, "data");
	json_t *msg = json_object();
	char ts[40];

	free(line);
	time_fmt_iso(ev->ts, ts, sizeof(ts));
	json_object_set_new(msg, "type", json_null()); /* first key */
	json_object_set_new(msg, "seq", json_integer(ev->seq));
	json_object_set_new(msg, "ts", json_string(ts));
	json_object_set_new(msg, "task", ev->task_id ?
						 json_integer(ev->task_id) :
						 json_null());
	json_object_set_new(msg, "run",
			    ev->run_id ? json_string(ev->run_id) : json_null());
	/* OpenViber's name of the task, beside baton's */
	json_object_set(msg, "task_id", json_object_get(msg, "task"));
	if (!strcmp(ev->type, "transition")) {
		out->type = transition_type(ev, data, msg);
	} else if (!strcmp(ev->type, "agent_output")) {
		out->type = "task:delta";
		json_object_set(msg, "stage", json_object_get(data, "stage"));
		json_object_set(msg, "text", json_object_get(data, "text"));
	} else if (!strcmp(ev->type, "question") &&
		   json_get_str(data, "needs")) {
		/* OpenViber's Executing → Blocked: what the run needs, before
		 * the question asking for it (approval:requested) */
		out->type = "task:progress";
		json_object_set_new(msg, "status", json_string("blocked"));
		json_object_set(msg, "stage", json_object_get(data, "stage"));
		json_object_set(msg, "needs", json_object_get(data, "needs"));
		json_object_set(msg, "question",
				json_object_get(data, "question"));
	} else if (!strcmp(ev->type, "task_cancelled")) {
		out->type = "task:stopped";
	} else if (!strcmp(ev->type, "approval_timeout")) {
		/* the gate's rejection follows (approval:decided) */
		out->type = "approval:timeout";
		json_object_set_new(msg, "approval_id",
				    json_string(ev->run_id ? ev->run_id : ""));
		json_object_set_new(msg, "code",
				    json_string("approval_timeout"));
	} else {
		out->type = "event";
	}
	json_object_set_new(msg, "type", json_string(out->type));
	json_object_set_new(msg, "event", full ? full : json_null());
	out->seq = ev->seq;
	out->task_id = ev->task_id;
	msg_text(out, ev->run_id, json_dumps(msg, JSON_COMPACT));
	json_decref(msg);
}

/* ---- metrics kept from the events ---------------------------------------- */

static struct stage_hist *
hist_for(struct hub *h, const char *stage)
{
	size_t i;

	for (i = 0; i < h->nr_hist; i++)
		if (!strcmp(h->hist[i].stage, stage))
			return &h->hist[i];
	h->hist = xrealloc(h->hist, (h->nr_hist + 1) * sizeof(*h->hist));
	memset(&h->hist[h->nr_hist], 0, sizeof(*h->hist));
	h->hist[h->nr_hist].stage = xstrdup(stage);
	return &h->hist[h->nr_hist++];
}

static void
observe(struct hub *h, const char *stage, double seconds)
{
	struct stage_hist *sh = hist_for(h, stage);
	size_t b;

	for (b = 0; b < NR_BUCKETS && seconds > buckets[b]; b++)
		;
	sh->counts[b]++;
	sh->sum += seconds;
	sh->n++;
}

/*
 * A transition ends the time its run spent in the status it leaves: a
 * stage's duration when that status is a working one. Working statuses
 * are the "-ing" ones (planning, implementing, reviewing ...), the
 * resting ones ("planned") and waits are not stages at work.
 */
static int
working(const char *status)
{
	size_t n = strlen(status);

	return n > 3 && !strcmp(status + n - 3, "ing") &&
	       strcmp(status, ST_WAITING);
}

static void
track(struct hub *h, const struct event *ev)
{
	size_t i;

	h->events_total++;
	if (!strcmp(ev->type, "lease_expired") ||
	    !strcmp(ev->type, "worker_gone"))
		h->takeovers++;
	if (strcmp(ev->type, "transition") || !ev->run_id || !ev->to)
		return;
	for (i = 0; i < h->nr_open; i++)
		if (!strcmp(h->open[i].run_id, ev->run_id))
			break;
	if (i < h->nr_open) {
		struct entered *en = &h->open[i];

		if (ev->from && !strcmp(en->status, ev->from) &&
		    working(ev->from))
			observe(h, ev->from, (double)(ev->ts - en->ts) / 1000);
		if (status_is_terminal(ev->to)) {
			free(en->run_id);
			free(en->status);
			h->open[i] = h->open[--h->nr_open];
			return;
		}
		free(en->status);
		en->status = xstrdup(ev->to);
		en->ts = ev->ts;
		return;
	}
	if (status_is_terminal(ev->to))
		return;
	h->open = xrealloc(h->open, (h->nr_open + 1) * sizeof(*h->open));
	h->open[h->nr_open++] = (struct entered){ xstrdup(ev->run_id),
						  xstrdup(ev->to), ev->ts };
}

void
hub_metrics(struct hub *h, struct buf *out)
{
	size_t i, b;

	pthread_mutex_lock(&h->mu);
	buf_adds(out, "# HELP baton_stage_duration_seconds Time runs spent in "
		      "each working status, since this serve started.\n"
		      "# TYPE baton_stage_duration_seconds histogram\n");
	for (i = 0; i < h->nr_hist; i++) {
		struct stage_hist *sh = &h->hist[i];
		int64_t cum = 0;

		for (b = 0; b <= NR_BUCKETS; b++) {
			cum += sh->counts[b];
			if (b < NR_BUCKETS)
				buf_addf(out,
					 "baton_stage_duration_seconds_bucket"
					 "{stage=\"%s\",le=\"%g\"} %lld\n",
					 sh->stage, buckets[b], (long long)cum);
			else
				buf_addf(out,
					 "baton_stage_duration_seconds_bucket"
					 "{stage=\"%s\",le=\"+Inf\"} %lld\n",
					 sh->stage, (long long)cum);
		}
		buf_addf(out,
			 "baton_stage_duration_seconds_sum{stage=\"%s\"} %.3f\n"
			 "baton_stage_duration_seconds_count{stage=\"%s\"} "
			 "%lld\n",
			 sh->stage, sh->sum, sh->stage, (long long)sh->n);
	}
	buf_addf(out,
		 "# HELP baton_lease_takeovers_total Tasks taken from a dead "
		 "or stalled worker, since this serve started.\n"
		 "# TYPE baton_lease_takeovers_total counter\n"
		 "baton_lease_takeovers_total %lld\n"
		 "# HELP baton_events_total Events recorded since this serve "
		 "started.\n"
		 "# TYPE baton_events_total counter\n"
		 "baton_events_total %lld\n",
		 (long long)h->takeovers, (long long)h->events_total);
	pthread_mutex_unlock(&h->mu);
}

/* ---- the thread ---------------------------------------------------------- */

static void
push(struct hub *h, struct hub_msg *m)
{
	size_t tail;

	if (h->count == RING) {
		h->floor = h->ring[h->head].seq;
		hub_msg_release(&h->ring[h->head]);
		h->head = (h->head + 1) % RING;
		h->count--;
	}
	tail = (h->head + h->count) % RING;
	h->ring[tail] = *m;
	h->count++;
}

struct batch {
	struct hub *h;
	int n;
};

static int
take(const struct event *ev, void *arg)
{
	struct batch *b = arg;
	struct hub *h = b->h;
	struct hub_msg m = { 0 };

	hub_msg_from_event(ev, &m);
	pthread_mutex_lock(&h->mu);
	track(h, ev);
	push(h, &m);
	h->last_seq = ev->seq;
	pthread_mutex_unlock(&h->mu);
	return ++b->n >= 512; /* wake the readers now and then */
}

/* Reads what is new; returns how many events came. */
static int
catch_up(struct hub *h)
{
	struct err e = ERR_INIT;
	int total = 0;

	for (;;) {
		struct batch b = { h, 0 };

		if (store_event_list(h->s, NULL, h->last_seq, NULL, take, &b,
				     &e)) {
			log_error("cannot read events: %s", e.msg);
			break;
		}
		total += b.n;
		if (b.n) {
			hub_wake_fn *wake;
			void *arg;

			pthread_mutex_lock(&h->mu);
			pthread_cond_broadcast(&h->cond);
			wake = h->wake;
			arg = h->wake_arg;
			pthread_mutex_unlock(&h->mu);
			if (wake)
				wake(arg);
		}
		if (b.n < 512)
			break;
	}
	if (total && h->notifier)
		notify_poke(h->notifier);
	return total;
}

/* hub_on_revoke's callback, for store_token_list's. */
struct revoke_cb {
	hub_revoke_fn *fn;
};

/* store_token_list's callback for look_for_revoked. */
static int
tell_revoked(const struct api_token *t, void *arg)
{
	const struct revoke_cb *cb = arg;

	if (t->revoked_at)
		cb->fn(t->name);
	return 0;
}

/*
 * The tokens revoked, to hub_on_revoke's callback: what a CLI or another
 * host revoked reaches the streams without the event loop asking.
 */
static void
look_for_revoked(struct hub *h)
{
	struct err e = ERR_INIT;
	struct revoke_cb cb;

	pthread_mutex_lock(&h->mu);
	cb.fn = h->revoke;
	pthread_mutex_unlock(&h->mu);
	if (cb.fn && store_token_list(h->s, tell_revoked, &cb, &e) < 0)
		log_warn("cannot look for revoked tokens: %s", e.msg);
}

static void *
hub_main(void *arg)
{
	struct hub *h = arg;
	struct err e = ERR_INIT;
	struct pollfd pf[2];
	size_t settle = 0;
	int fd = store_watch_fd(h->s, &e), wait, n;
	/*
	 * A PostgreSQL watch fd stays quiet while its connection is down
	 * (the drain mends it), and a gap a rolled-back transaction left
	 * in the seqs is passed once older transactions end, which may
	 * send nothing: there the hub also looks once a second.
	 */
	int idle = strcmp(store_backend(h->s), "postgres") ? -1 : 1000;
	/*
	 * Tokens revoked behind serve's back (the CLI, another host): on
	 * SQLite every commit wakes the hub, a revocation's too, and it
	 * looks at every turn (a local read); on PostgreSQL a revocation
	 * notifies nobody, so a turn woken by events tells nothing about
	 * tokens: it looks once a second, a round trip a second where it
	 * was one a turn (six for each wake-up, with the re-reads).
	 */
	int look_every_turn = idle < 0;
	int64_t looked = 0;

	if (fd < 0)
		log_warn("%s: looking for new events every %d ms", e.msg,
			 FALLBACK_POLL_MS);
	pf[0] = (struct pollfd){ .fd = h->stop_pipe[0], .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = fd, .events = POLLIN };
	for (;;) {
		/* drain before reading: a commit after the read wakes us */
		store_watch_drain(h->s);
		catch_up(h);
		if (look_every_turn ||
		    time_mono_ms() - looked >= REVOKED_LOOK_MS) {
			look_for_revoked(h);
			looked = time_mono_ms();
		}
		if (fd < 0)
			wait = FALLBACK_POLL_MS;
		else if (settle < ARRAY_SIZE(settle_ms))
			wait = settle_ms[settle++];
		else
			wait = idle;
		if (!look_every_turn) { /* the next look, on time */
			int64_t due = looked + REVOKED_LOOK_MS - time_mono_ms();

			if (due < wait)
				wait = due > 0 ? (int)due : 0;
		}
		n = poll(pf, fd >= 0 ? 2 : 1, wait);
		if (n < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break;
		if (n > 0)
			settle = 0; /* a new write: look again soon after it */
	}
	return NULL;
}

int
hub_start(const char *store_spec, struct notifier *n, struct hub **out,
	  struct err *e)
{
	struct hub *h = xcalloc(1, sizeof(*h));
	int rc;

	h->notifier = n;
	h->stop_pipe[0] = h->stop_pipe[1] = -1;
	rc = store_open(store_spec, &h->s, e);
	if (!rc)
		rc = store_event_last_seq(h->s, &h->last_seq, e);
	if (!rc && pipe2(h->stop_pipe, O_CLOEXEC) < 0)
		rc = err_set(e, -errno, "cannot create a pipe: %s",
			     strerror(errno));
	if (rc) {
		store_close(h->s);
		free(h);
		return rc;
	}
	h->floor = h->last_seq;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cond, NULL);
	if (pthread_create(&h->thread, NULL, hub_main, h)) {
		close(h->stop_pipe[0]);
		close(h->stop_pipe[1]);
		store_close(h->s);
		free(h);
		return err_set(e, BATON_EINVAL, "cannot start the hub thread");
	}
	*out = h;
	return 0;
}

void
hub_on_new(struct hub *h, hub_wake_fn *fn, void *arg)
{
	pthread_mutex_lock(&h->mu);
	h->wake = fn;
	h->wake_arg = arg;
	pthread_mutex_unlock(&h->mu);
}

void
hub_on_revoke(struct hub *h, hub_revoke_fn *fn)
{
	pthread_mutex_lock(&h->mu);
	h->revoke = fn;
	pthread_mutex_unlock(&h->mu);
}

void
hub_stop(struct hub *h)
{
	size_t i;

	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->stopping = 1;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->mu);
	if (write(h->stop_pipe[1], "x", 1) < 0)
		log_warn("cannot stop the hub: %s", strerror(errno));
	pthread_join(h->thread, NULL);
	for (i = 0; i < h->count; i++)
		hub_msg_release(&h->ring[(h->head + i) % RING]);
	for (i = 0; i < h->nr_hist; i++)
		free(h->hist[i].stage);
	free(h->hist);
	for (i = 0; i < h->nr_open; i++) {
		free(h->open[i].run_id);
		free(h->open[i].status);
	}
	free(h->open);
	close(h->stop_pipe[0]);
	close(h->stop_pipe[1]);
	store_close(h->s);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cond);
	free(h);
}

int64_t
hub_last_seq(struct hub *h)
{
	int64_t seq;

	pthread_mutex_lock(&h->mu);
	seq = h->last_seq;
	pthread_mutex_unlock(&h->mu);
	return seq;
}

/* ---- readers ------------------------------------------------------------- */

static int
wanted(const struct hub_msg *m, const struct hub_filter *f)
{
	if (f->task_id && m->task_id != f->task_id)
		return 0;
	if (f->run_id && (!m->run_id || strcmp(m->run_id, f->run_id)))
		return 0;
	return 1;
}

struct from_store {
	const struct hub_filter *f;
	struct hub_msg *out;
	int max, n;
};

static int
take_old(const struct event *ev, void *arg)
{
	struct from_store *fs = arg;
	struct hub_msg m = { 0 };

	hub_msg_from_event(ev, &m);
	if (!wanted(&m, fs->f)) {
		hub_msg_release(&m);
		return 0;
	}
	fs->out[fs->n++] = m;
	return fs->n >= fs->max;
}

/* Events the ring no longer holds, read from the store. */
static int
read_old(struct store *s, int64_t after, const struct hub_filter *f,
	 struct hub_msg *out, int max)
{
	struct from_store fs = { f, out, max, 0 };
	struct err e = ERR_INIT;
	int rc;

	if (f->task_id)
		rc = store_task_events(s, f->task_id, after, take_old, &fs, &e);
	else
		rc = store_event_list(s, f->run_id, after, NULL, take_old, &fs,
				      &e);
	if (rc) {
		log_error("cannot read events after %lld: %s",
			  (long long)after, e.msg);
		while (fs.n)
			hub_msg_release(&out[--fs.n]);
		return -1;
	}
	return fs.n;
}

/* Index in the ring of the first message with seq > after. */
static size_t
first_after(const struct hub *h, int64_t after)
{
	size_t lo = 0, hi = h->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (h->ring[(h->head + mid) % RING].seq <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int
hub_read(struct hub *h, struct store *s, int64_t after,
	 const struct hub_filter *f, struct hub_msg *out, int max,
	 int wait_ms)
{
	int64_t deadline = time_mono_ms() + wait_ms;
	int n = 0;

	pthread_mutex_lock(&h->mu);
	while (!h->stopping) {
		size_t i;

		if (after < h->floor) {
			pthread_mutex_unlock(&h->mu);
			n = read_old(s, after, f, out, max);
			if (n != 0)
				return n;
			/* nothing of ours back there: go on from the floor */
			pthread_mutex_lock(&h->mu);
			after = h->floor;
			continue;
		}
		for (i = first_after(h, after); i < h->count && n < max; i++) {
			const struct hub_msg *m = &h->ring[(h->head + i) % RING];

			if (wanted(m, f))
				msg_copy(&out[n++], m);
		}
		if (n)
			break;
		/* all up to here matched nothing; but the client may be ahead
		 * of the hub (it read the store directly): never go back */
		if (h->last_seq > after)
			after = h->last_seq;
		{
			int64_t left = deadline - time_mono_ms();
			struct timespec ts;

			if (left <= 0)
				break;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += left / 1000;
			ts.tv_nsec += (left % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&h->cond, &h->mu, &ts);
		}
	}
	n = h->stopping && !n ? -1 : n;
	pthread_mutex_unlock(&h->mu);
	return n;
}
