/*
 * bench_http: a bounded load tool for `baton serve`'s HTTP API and live
 * stream, on libcurl's multi interface (one thread drives every
 * connection, so the tool costs one core at most).
 *
 *   bench_http get URL TOKEN [--conns C] [--seconds S]
 *       C keep-alive connections (default 1) each issue GET URL with
 *       the bearer TOKEN back to back for S seconds (default 5).
 *       Prints requests/s, the p50/p99/max latency of one request, the
 *       connections opened (C when keep-alive holds) and the errors (a
 *       transfer that failed or an answer other than 200).
 *
 *   bench_http sse URL TOKEN [--clients N] [--events E] --store PATH
 *                  [--no-nudge]
 *       Opens N (default 100) SSE connections to URL (/api/v1/events)
 *       and waits until every one has its answer's first bytes (the
 *       server fixes a stream's cursor before it answers, so from then
 *       on each client is owed every new event). Appends through the
 *       store API, from this process, to the store at PATH:
 *
 *       - a probe: one event ("bench_probe") and then nothing for up to
 *         2 s, and says on how many streams it arrived and when;
 *       - E (default 5000) events of type "bench", each its own
 *         transaction (store_event_add), back to back; then, unless
 *         --no-nudge, one more ("bench_nudge", not counted).
 *
 *       and measures the time from the first of the E appends until
 *       every client has received every one. Each event carries the
 *       monotonic time just before its append; a client that receives
 *       it takes the difference: the delivery latency (commit, the hub's
 *       wake-up and read, the server's write, curl's read). Prints
 *       events appended/s, deliveries/s (E * N over that time) and the
 *       p50/p99 of the delivery latency, and checks every client got
 *       every event once, in seq order.
 *
 *       Why the nudge: the hub is woken by inotify on the write() of a
 *       commit's WAL frames, but a reader sees the commit only when the
 *       writer has updated the WAL index in the -shm file (after its
 *       fsync), which is a store to shared memory that inotify does not
 *       hear. A hub that wakes in between reads nothing new and sleeps
 *       until the next commit: the last event of a burst (and an event
 *       alone: the probe) then waits for whatever commits next. The
 *       nudge is that next commit, so the figures measure the stream,
 *       not the wait; --no-nudge shows the wait.
 *
 *   bench_http fill PATH N
 *       Creates N runs (status created) in the store at PATH, as the
 *       engine does when it creates one, so GET /api/v1/runs has a list
 *       to serve.
 *
 * Figures are reported, never asserted. Everything stops by itself: a
 * get run after S seconds (plus the requests then in flight), an sse run
 * when every event is delivered or, at the latest, 120 s after the last
 * append (then it reports what arrived and exits 1).
 */
#include "util/compat.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "core/run.h"
#include "store/store.h"
#include "util/err.h"
#include "util/xalloc.h"

/* How long an sse run waits for connections, then for deliveries. */
#define CONNECT_PATIENCE_MS 30000
#define DELIVER_PATIENCE_MS 60000
/* How long the probe (one event, then quiet) may take to arrive. */
#define PROBE_WAIT_MS 2000

/* Growable list of latencies in nanoseconds. */
struct lat {
	int64_t *ns;
	size_t nr, alloc;
};

static void
lat_add(struct lat *l, int64_t ns)
{
	ALLOC_GROW(l->ns, l->nr + 1, l->alloc);
	l->ns[l->nr++] = ns;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile p (0-100) of sorted l, in milliseconds. */
static double
lat_ms(const struct lat *l, int p)
{
	size_t r;

	if (!l->nr)
		return 0;
	r = (l->nr * (size_t)p + 99) / 100;
	if (r < 1)
		r = 1;
	return l->ns[r - 1] / 1e6;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* CPU time (user + system) of the calling thread, in milliseconds. */
static double
thread_cpu_ms(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) < 0)
		return 0;
	return ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 +
	       ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
}

static struct curl_slist *
auth_header(const char *token)
{
	char *h = xasprintf("Authorization: Bearer %s", token);
	struct curl_slist *l = curl_slist_append(NULL, h);

	free(h);
	if (!l)
		fail("out of memory");
	return l;
}

/* ---- get ----------------------------------------------------------------- */

struct getter {
	CURL *h;
	int64_t t0; /* when the request in flight was added */
};

static size_t
discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

static void
get_start(CURLM *m, struct getter *g)
{
	CURLMcode mc;

	g->t0 = mono_ns();
	mc = curl_multi_add_handle(m, g->h);
	if (mc != CURLM_OK)
		fail("curl_multi_add_handle: %s", curl_multi_strerror(mc));
}

static int
cmd_get(const char *url, const char *token, long conns, long seconds)
{
	struct curl_slist *hdr = auth_header(token);
	struct getter *g = xcalloc(conns, sizeof(*g));
	struct lat l = { 0 };
	int64_t t_start, deadline, t_end;
	long i, errors = 0, opened = 0, inflight = 0, code;
	CURLMsg *msg;
	CURLM *m;
	int running, left;

	m = curl_multi_init();
	if (!m)
		fail("curl_multi_init failed");
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, conns);
	for (i = 0; i < conns; i++) {
		g[i].h = curl_easy_init();
		if (!g[i].h)
			fail("curl_easy_init failed");
		curl_easy_setopt(g[i].h, CURLOPT_URL, url);
		curl_easy_setopt(g[i].h, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(g[i].h, CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(g[i].h, CURLOPT_PRIVATE, &g[i]);
		curl_easy_setopt(g[i].h, CURLOPT_TIMEOUT_MS, 10000L);
		curl_easy_setopt(g[i].h, CURLOPT_NOPROXY, "*");
	}
	t_start = mono_ns();
	deadline = t_start + (int64_t)seconds * 1000000000LL;
	for (i = 0; i < conns; i++, inflight++)
		get_start(m, &g[i]);
	while (inflight > 0) {
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left))) {
			struct getter *gg;
			long nc = 0;
			int64_t now = mono_ns();

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
					  (char **)&gg);
			code = 0;
			curl_easy_getinfo(gg->h, CURLINFO_RESPONSE_CODE, &code);
			curl_easy_getinfo(gg->h, CURLINFO_NUM_CONNECTS, &nc);
			opened += nc;
			if (msg->data.result != CURLE_OK || code != 200) {
				if (errors < 3)
					fprintf(stderr,
						"%s: GET %s: %s, status %ld\n",
						bench_name, url,
						curl_easy_strerror(
						    msg->data.result),
						code);
				errors++;
			} else if (now <= deadline) {
				lat_add(&l, now - gg->t0);
			}
			curl_multi_remove_handle(m, gg->h);
			inflight--;
			if (now < deadline) {
				get_start(m, gg);
				inflight++;
			}
		}
		if (inflight > 0)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	t_end = mono_ns();
	if (t_end > deadline)
		t_end = deadline;
	qsort(l.ns, l.nr, sizeof(*l.ns), cmp_i64);
	printf("GET %s: %ld keep-alive connections, %ld s\n", url, conns,
	       seconds);
	printf("requests %zu  errors %ld  connections opened %ld\n", l.nr,
	       errors, opened);
	printf(
	    "requests/s %.1f  latency p50 %.2f ms  p99 %.2f ms  max %.2f ms\n",
	    l.nr / ((t_end - t_start) / 1e9), lat_ms(&l, 50), lat_ms(&l, 99),
	    lat_ms(&l, 100));
	printf("key: rps=%.1f p50_ms=%.2f p99_ms=%.2f errors=%ld\n",
	       l.nr / ((t_end - t_start) / 1e9), lat_ms(&l, 50), lat_ms(&l, 99),
	       errors);
	for (i = 0; i < conns; i++)
		curl_easy_cleanup(g[i].h);
	curl_multi_cleanup(m);
	curl_slist_free_all(hdr);
	free(g);
	free(l.ns);
	return errors ? 1 : 0;
}

/* ---- sse ----------------------------------------------------------------- */

struct client {
	CURL *h;
	char *line; /* the partial line read so far */
	size_t len, alloc;
	int connected;
	long got;	     /* bench events received */
	int64_t last_id;     /* the last id: seen */
	long disorder;	     /* ids not above the one before */
	int64_t done_ns;     /* when it had every event, or 0 */
	int64_t probe_ns;    /* when the probe event arrived, or 0 */
	unsigned char *seen; /* seen[i]: event i arrived */
};

struct sse {
	struct client *c;
	long nclients, events;
	atomic_long connected;
	atomic_long complete; /* clients that have every event */
	atomic_int stop;
	atomic_llong last_done_ns;
	int64_t origin;	    /* when this run began: older events are not ours */
	atomic_long probed; /* clients that have the probe event */
	atomic_llong last_probe_ns;
	struct lat lat; /* delivery latencies, written by the reader */
	double reader_cpu_ms;
	CURLM *m;
};

static struct sse sse;

/* One complete line of client c's stream, without its newline. */
static void
sse_line(struct client *c, const char *p, size_t len)
{
	const char *t;
	char *end;
	int64_t id, sent;
	long i;

	if (len > 4 && !strncmp(p, "id: ", 4)) {
		id = strtoll(p + 4, NULL, 10);
		if (id <= c->last_id)
			c->disorder++;
		c->last_id = id;
		return;
	}
	if (len < 6 || strncmp(p, "data: ", 6))
		return;
	t = memmem(p, len, "bench_probe_t", 13);
	if (t) {
		while (t < p + len && (*t < '0' || *t > '9'))
			t++;
		if (!c->probe_ns && strtoll(t, NULL, 10) >= sse.origin) {
			c->probe_ns = mono_ns();
			atomic_store(&sse.last_probe_ns, c->probe_ns);
			atomic_fetch_add(&sse.probed, 1);
		}
		return;
	}
	/* the data may hold it as an object or as escaped text */
	t = memmem(p, len, "bench_t", 7);
	if (!t)
		return;
	while (t < p + len && (*t < '0' || *t > '9'))
		t++;
	sent = strtoll(t, &end, 10);
	if (sent < sse.origin)
		return; /* left by an earlier run, delivered only now */
	lat_add(&sse.lat, mono_ns() - sent);
	t = memmem(end, p + len - end, "\"i", 2);
	if (t) {
		while (t < p + len && (*t < '0' || *t > '9'))
			t++;
		i = strtol(t, NULL, 10);
		if (i >= 0 && i < sse.events)
			c->seen[i]++;
	}
	if (++c->got == sse.events) {
		c->done_ns = mono_ns();
		atomic_store(&sse.last_done_ns, c->done_ns);
		atomic_fetch_add(&sse.complete, 1);
	}
}

static size_t
sse_write(char *p, size_t size, size_t n, void *arg)
{
	struct client *c = arg;
	size_t len = size * n, i, start = 0;

	if (!c->connected) {
		c->connected = 1;
		atomic_fetch_add(&sse.connected, 1);
	}
	for (i = 0; i < len; i++) {
		if (p[i] != '\n')
			continue;
		if (c->len) {
			ALLOC_GROW(c->line, c->len + i - start, c->alloc);
			memcpy(c->line + c->len, p + start, i - start);
			sse_line(c, c->line, c->len + i - start);
			c->len = 0;
		} else {
			sse_line(c, p + start, i - start);
		}
		start = i + 1;
	}
	if (start < len) {
		ALLOC_GROW(c->line, c->len + len - start, c->alloc);
		memcpy(c->line + c->len, p + start, len - start);
		c->len += len - start;
	}
	return len;
}

/* The reader thread: drives every SSE connection until told to stop. */
static void *
sse_reader(void *arg)
{
	int running = 1;
	CURLMsg *msg;
	int left;
	long code;

	(void)arg;
	while (!atomic_load(&sse.stop)) {
		curl_multi_perform(sse.m, &running);
		while ((msg = curl_multi_info_read(sse.m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			code = 0;
			curl_easy_getinfo(msg->easy_handle,
					  CURLINFO_RESPONSE_CODE, &code);
			fprintf(stderr, "%s: a stream ended: %s, status %ld\n",
				bench_name,
				curl_easy_strerror(msg->data.result), code);
		}
		curl_multi_poll(sse.m, NULL, 0, 50, NULL);
	}
	sse.reader_cpu_ms = thread_cpu_ms();
	return NULL;
}

/* Appends one event of type with data, in a transaction of its own. */
static void
append(struct store *s, const char *type, char *data)
{
	struct event ev = { 0 };
	struct err e = ERR_INIT;

	ev.type = (char *)type;
	ev.data = data;
	if (store_event_add(s, &ev, &e))
		fail("store_event_add: %s", e.msg);
	free(ev.run_id);
}

/* Which events the first incomplete client lacks (at most 10 named). */
static void
missing_report(long events)
{
	struct client *c = NULL;
	long i, k, n = 0;

	for (k = 0; k < sse.nclients && !c; k++)
		if (sse.c[k].got < events)
			c = &sse.c[k];
	if (!c)
		return;
	printf("client %ld lacks events (index of the append, 0-based):",
	       (long)(c - sse.c));
	for (i = 0; i < events; i++)
		if (!c->seen[i] && n++ < 10)
			printf(" %ld", i);
	printf("%s (%ld in all)\n", n > 10 ? " ..." : "", n);
}

static int
cmd_sse(const char *url, const char *token, long nclients, long events,
	const char *path, int nudge)
{
	struct curl_slist *hdr = auth_header(token);
	int64_t t0, t_appended = 0, t_done, wait_from;
	struct store *s;
	pthread_t reader;
	long i, got_min = -1, disorder = 0, complete = 0;
	double secs, app_secs, app_cpu = 0;
	char probe[64];
	int rc = 0;

	sse.origin = mono_ns();
	sse.c = xcalloc(nclients, sizeof(*sse.c));
	sse.nclients = nclients;
	sse.events = events;
	sse.m = curl_multi_init();
	if (!sse.m)
		fail("curl_multi_init failed");
	curl_multi_setopt(sse.m, CURLMOPT_MAXCONNECTS, nclients);
	for (i = 0; i < nclients; i++) {
		CURL *h = curl_easy_init();

		if (!h)
			fail("curl_easy_init failed");
		sse.c[i].h = h;
		sse.c[i].seen = xcalloc(events, 1);
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sse_write);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &sse.c[i]);
		curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
		/* one connection each: no multiplexing, no reuse */
		curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
		if (curl_multi_add_handle(sse.m, h) != CURLM_OK)
			fail("curl_multi_add_handle failed");
	}
	s = open_store(path);
	if (pthread_create(&reader, NULL, sse_reader, NULL))
		fail("cannot start the reader thread");

	t0 = mono_ns();
	while (atomic_load(&sse.connected) < nclients) {
		if (mono_ns() - t0 > CONNECT_PATIENCE_MS * 1000000LL) {
			fprintf(
			    stderr,
			    "%s: only %ld of %ld streams connected after %d s "
			    "(each holds a server thread: server.threads?)\n",
			    bench_name, atomic_load(&sse.connected), nclients,
			    CONNECT_PATIENCE_MS / 1000);
			rc = 1;
			goto stop;
		}
		sleep_ms(5);
	}
	printf("SSE %s: %ld streams connected in %.0f ms\n", url, nclients,
	       (mono_ns() - t0) / 1e6);

	/*
	 * The probe: one event on its own, then quiet, as most events
	 * come in an idle repository (a gate waiting, a run finished).
	 */
	t0 = mono_ns();
	snprintf(probe, sizeof(probe), "{\"bench_probe_t\": %lld}",
		 (long long)t0);
	append(s, "observed", probe);
	while (atomic_load(&sse.probed) < nclients &&
	       mono_ns() - t0 < PROBE_WAIT_MS * 1000000LL)
		sleep_ms(2);
	if (atomic_load(&sse.probed) == nclients)
		printf("one event alone, then quiet: on all %ld streams after "
		       "%.1f ms\n",
		       nclients, (atomic_load(&sse.last_probe_ns) - t0) / 1e6);
	else
		printf("one event alone, then quiet: on %ld of %ld streams "
		       "within %d ms (NOT DELIVERED to the rest while no "
		       "other commit came)\n",
		       atomic_load(&sse.probed), nclients, PROBE_WAIT_MS);

	t0 = mono_ns();
	app_cpu = thread_cpu_ms();
	for (i = 0; i < events; i++) {
		char data[96];

		snprintf(data, sizeof(data), "{\"bench_t\": %lld, \"i\": %ld}",
			 (long long)mono_ns(), i);
		append(s, "observed", data);
	}
	t_appended = mono_ns();
	app_cpu = thread_cpu_ms() - app_cpu;
	/* see the top of the file: the last commit of a burst may wake nobody
	 */
	if (nudge)
		append(s, "observed", NULL);

	wait_from = mono_ns();
	while (atomic_load(&sse.complete) < nclients &&
	       mono_ns() - wait_from < DELIVER_PATIENCE_MS * 1000000LL)
		sleep_ms(2);
	complete = atomic_load(&sse.complete);
	if (complete < nclients)
		rc = 1;
stop:
	atomic_store(&sse.stop, 1);
	pthread_join(reader, NULL);
	store_close(s);
	if (atomic_load(&sse.connected) < nclients)
		goto out; /* nothing was appended */

	for (i = 0; i < nclients; i++) {
		if (got_min < 0 || sse.c[i].got < got_min)
			got_min = sse.c[i].got;
		disorder += sse.c[i].disorder;
	}
	t_done = atomic_load(&sse.last_done_ns);
	secs = (t_done - t0) / 1e9;
	app_secs = (t_appended - t0) / 1e9;
	qsort(sse.lat.ns, sse.lat.nr, sizeof(*sse.lat.ns), cmp_i64);
	printf("events appended %ld in %.2f s: %.1f events/s (%.2f ms each, "
	       "appender CPU %.0f ms)\n",
	       events, app_secs, events / app_secs, app_secs * 1e3 / events,
	       app_cpu);
	if (complete < nclients) {
		printf("NOT DELIVERED: %ld of %ld clients had every event "
		       "%d s after the last append; the fewest any had: %ld\n",
		       complete, nclients, DELIVER_PATIENCE_MS / 1000, got_min);
		missing_report(events);
	} else {
		printf("delivered %ld x %ld = %ld messages in %.2f s from the "
		       "first append: %.1f deliveries/s\n",
		       events, nclients, events * nclients, secs,
		       events * nclients / secs);
		printf("last delivery %.1f ms after the last append\n",
		       (t_done - t_appended) / 1e6);
	}
	printf("delivery latency (append start to receipt), %zu samples: "
	       "p50 %.2f ms  p99 %.2f ms  max %.2f ms\n",
	       sse.lat.nr, lat_ms(&sse.lat, 50), lat_ms(&sse.lat, 99),
	       lat_ms(&sse.lat, 100));
	printf("ids out of order or repeated: %ld; reader thread CPU %.0f ms\n",
	       disorder, sse.reader_cpu_ms);
	if (complete == nclients)
		printf("key: appended_per_s=%.1f deliveries_per_s=%.1f "
		       "ratio=%.1f p50_ms=%.2f p99_ms=%.2f\n",
		       events / app_secs, events * nclients / secs,
		       (events * nclients / secs) / (events / app_secs),
		       lat_ms(&sse.lat, 50), lat_ms(&sse.lat, 99));
	if (disorder)
		rc = 1;
out:
	for (i = 0; i < nclients; i++) {
		curl_multi_remove_handle(sse.m, sse.c[i].h);
		curl_easy_cleanup(sse.c[i].h);
		free(sse.c[i].line);
		free(sse.c[i].seen);
	}
	curl_multi_cleanup(sse.m);
	curl_slist_free_all(hdr);
	free(sse.c);
	free(sse.lat.ns);
	return rc;
}

/* ---- fill ---------------------------------------------------------------- */

/* N runs in status created, as engine_create writes them. */
static int
cmd_fill(const char *path, long n)
{
	struct store *s = open_store(path);
	struct err e = ERR_INIT;
	int64_t t0 = mono_ns();
	long i;

	for (i = 0; i < n; i++) {
		struct run r;

		memset(&r, 0, sizeof(r));
		r.task =
		    xasprintf("benchmark task %ld: add a --version flag", i);
		run_set(&r.pipeline, "feature");
		run_set(&r.status, "created");
		run_set(&r.phase, "done");
		run_set(&r.config_hash, "3f1c0ffee0ddba11");
		r.max_review_loops = 2;
		r.created_at = wall_ms();
		if (store_run_create(s, &r, &e))
			fail("store_run_create: %s", e.msg);
		run_release(&r);
	}
	store_close(s);
	printf("%ld runs created in %.0f ms\n", n, (mono_ns() - t0) / 1e6);
	return 0;
}

/* ---- main ---------------------------------------------------------------- */

static _Noreturn void
usage(void)
{
	fprintf(stderr,
		"usage: bench_http get URL TOKEN [--conns C] [--seconds S]\n"
		"       bench_http sse URL TOKEN [--clients N] [--events E] "
		"--store PATH [--no-nudge]\n"
		"       bench_http fill PATH N\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	long conns = 1, seconds = 5, clients = 100, events = 5000;
	int nudge = 1;
	const char *store = NULL;
	int i, rc;

	bench_name = "bench_http";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "fill")) {
		if (argc != 4)
			usage();
		return cmd_fill(argv[2], count_arg(argv[3], "N"));
	}
	if (argc < 4 || (strcmp(argv[1], "get") && strcmp(argv[1], "sse")))
		usage();
	for (i = 4; i < argc; i++) {
		if (!strcmp(argv[i], "--no-nudge")) {
			nudge = 0;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--conns"))
			conns = count_arg(argv[++i], "--conns");
		else if (!strcmp(argv[i], "--seconds"))
			seconds = count_arg(argv[++i], "--seconds");
		else if (!strcmp(argv[i], "--clients"))
			clients = count_arg(argv[++i], "--clients");
		else if (!strcmp(argv[i], "--events"))
			events = count_arg(argv[++i], "--events");
		else if (!strcmp(argv[i], "--store"))
			store = argv[++i];
		else
			usage();
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT))
		fail("curl_global_init failed");
	if (!strcmp(argv[1], "get")) {
		rc = cmd_get(argv[2], argv[3], conns, seconds);
	} else {
		if (!store)
			usage();
		rc = cmd_sse(argv[2], argv[3], clients, events, store, nudge);
	}
	curl_global_cleanup();
	return rc;
}
