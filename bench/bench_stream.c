/*
 * bench_stream: thousands of SSE clients against one `baton serve`, in
 * one process and one thread (epoll, non-blocking connects, no client
 * library: a raw HTTP/1.1 reader that takes chunked answers too).
 *
 *   bench_stream HOST:PORT TOKEN --store PATH --pid PID
 *                [--clients N] [--events E] [--rate R] [--ws]
 *
 *   1. Reads the resident memory of the HTTP process PID (VmRSS).
 *   2. Opens N (default 10000) connections to GET /api/v1/events at
 *      once and waits until every one has the answer's head and first
 *      bytes: the connect time. A refusal (503, a reset) fails the run.
 *      With --ws, WebSockets instead: each upgrades /api/v1/ws (101)
 *      and counts as open at its first message (connection:welcome);
 *      the frames are read by hand (RFC 6455: the server's are not
 *      masked), each event is one text message, and the server's pings
 *      are answered, as a browser does.
 *   3. Idles 2 s and reads PID's memory again: per idle stream, the
 *      difference over N; and PID's threads.
 *   4. Appends E (default 200) events of type "bench" through the store
 *      at PATH, R per second (default 20), each its own transaction and
 *      carrying the monotonic time just before its append and its
 *      index. Every client takes, for each event it receives, the
 *      delivery latency (now minus that time); p50/p99/max over all
 *      deliveries are printed.
 *   5. Checks that every client got every event exactly once, in seq
 *      order (ids strictly increasing), within 60 s of the last append.
 *
 * Prints a "key:" line with the figures for bench/README.md. Exit 1
 * when a client could not connect or missed an event.
 */
#include "util/compat.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "core/run.h"
#include "store/store.h"
#include "util/err.h"
#include "util/xalloc.h"

#define LINE_MAX_LEN 65536

struct client {
	int fd;
	int sent;      /* bytes of the request written */
	int head_done; /* the answer's head is in */
	char head[1024];
	size_t hlen;
	int chunked;
	/* chunked decoding: reading a size line, the data, the CRLF after */
	int cstate;
	size_t cleft;
	char csize[32];
	size_t cslen;
	char *line; /* the SSE line, or the WebSocket frame, so far */
	size_t len, alloc;
	char *msg; /* a WebSocket message's text so far (fragments) */
	size_t mlen, malloc_;
	int64_t last_id;
	long got, disorder, dup;
	unsigned char *seen;
	int closed;
	int upgraded; /* --ws: the 101 is in */
};

static struct client *cl;
static long nclients, nevents;
static int64_t origin;
static int64_t *lat;
static atomic_long nlat;
static long connected, complete;
static char request[1024];
static size_t request_len;
static int ws_mode;

enum { CS_SIZE, CS_DATA, CS_CRLF };

/* A message's seq: its order on the stream, which must increase. */
static void
saw_seq(struct client *c, int64_t id)
{
	if (id <= c->last_id)
		c->disorder++;
	c->last_id = id;
}

/*
 * An event's JSON text (an SSE data line, a WebSocket message): a bench
 * event gives its delivery latency and counts toward the client's set.
 */
static void
deliver(struct client *c, const char *p, size_t len)
{
	const char *t;
	char *end;
	int64_t sent;
	long i;

	t = memmem(p, len, "bench_t", 7);
	if (!t)
		return;
	while (t < p + len && (*t < '0' || *t > '9'))
		t++;
	sent = strtoll(t, &end, 10);
	if (sent < origin)
		return;
	lat[atomic_fetch_add(&nlat, 1)] = mono_ns() - sent;
	t = memmem(end, (size_t)(p + len - end), "\"i", 2);
	if (!t)
		return;
	while (t < p + len && (*t < '0' || *t > '9'))
		t++;
	i = strtol(t, NULL, 10);
	if (i < 0 || i >= nevents)
		return;
	if (c->seen[i]++) {
		c->dup++;
		return;
	}
	if (++c->got == nevents)
		complete++;
}

static void
sse_line(struct client *c, const char *p, size_t len)
{
	if (len > 4 && !strncmp(p, "id: ", 4))
		saw_seq(c, strtoll(p + 4, NULL, 10));
	else if (len >= 6 && !strncmp(p, "data: ", 6))
		deliver(c, p, len);
}

/* A whole WebSocket text message: the welcome opens it, an event has a
 * seq. */
static void
ws_message(struct client *c, const char *p, size_t len)
{
	const char *t = memmem(p, len, "\"seq\":", 6);

	if (!c->head_done) {
		c->head_done = 1;
		connected++;
		return;
	}
	if (t)
		saw_seq(c, strtoll(t + 6, NULL, 10));
	deliver(c, p, len);
}

/* The pong to a ping, with its payload; masked (with a zero key, which
 * leaves the payload as it is), as every client frame must be. */
static void
ws_pong(struct client *c, const unsigned char *payload, size_t n)
{
	unsigned char f[2 + 4 + 125] = { 0x8a, (unsigned char)(0x80 | n) };

	memcpy(f + 6, payload, n);
	if (send(c->fd, f, 6 + n, MSG_NOSIGNAL) != (ssize_t)(6 + n))
		fail("client %ld: cannot send a pong: %s", (long)(c - cl),
		     strerror(errno));
}

/*
 * The frames in c->line[0..len): each whole one is taken (text and its
 * continuations into c->msg, a ping answered, a close ends the client)
 * and the rest kept for the next read.
 */
static void
ws_frames(struct client *c)
{
	const unsigned char *f = (const unsigned char *)c->line;
	size_t at = 0, hdr, n;

	while (c->len - at >= 2) {
		int op = f[at] & 0x0f, fin = f[at] & 0x80;

		n = f[at + 1] & 0x7f;
		hdr = 2;
		if (f[at + 1] & 0x80)
			fail("client %ld: a masked frame from the server",
			     (long)(c - cl));
		if (n == 126 || n == 127) {
			size_t k, ext = n == 126 ? 2 : 8;

			if (c->len - at < 2 + ext)
				break;
			for (n = 0, k = 0; k < ext; k++)
				n = n << 8 | f[at + 2 + k];
			hdr += ext;
		}
		if (c->len - at < hdr + n)
			break;
		if (op == 0x1 || op == 0x0) {
			ALLOC_GROW(c->msg, c->mlen + n + 1, c->malloc_);
			memcpy(c->msg + c->mlen, f + at + hdr, n);
			c->mlen += n;
			if (fin) {
				ws_message(c, c->msg, c->mlen);
				c->mlen = 0;
			}
		} else if (op == 0x9) {
			ws_pong(c, f + at + hdr, n);
		} else if (op == 0x8) {
			fprintf(stderr, "%s: client %ld: the server closed the "
				"WebSocket\n", bench_name, (long)(c - cl));
			c->closed = 1;
		}
		at += hdr + n;
	}
	memmove(c->line, c->line + at, c->len - at);
	c->len -= at;
}

static void
ws_bytes(struct client *c, const char *p, size_t n)
{
	ALLOC_GROW(c->line, c->len + n, c->alloc);
	memcpy(c->line + c->len, p, n);
	c->len += n;
	ws_frames(c);
}

static void
sse_bytes(struct client *c, const char *p, size_t n)
{
	size_t i, start = 0;

	for (i = 0; i < n; i++) {
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
	if (start < n) {
		if (c->len + n - start > LINE_MAX_LEN)
			fail("client %ld: a line over %d bytes",
			     (long)(c - cl), LINE_MAX_LEN);
		ALLOC_GROW(c->line, c->len + n - start, c->alloc);
		memcpy(c->line + c->len, p + start, n - start);
		c->len += n - start;
	}
}

/* The body's bytes, de-chunked when the answer is chunked. */
static void
body_bytes(struct client *c, const char *p, size_t n)
{
	size_t take;

	if (ws_mode) {
		ws_bytes(c, p, n);
		return;
	}
	if (!c->chunked) {
		sse_bytes(c, p, n);
		return;
	}
	while (n) {
		switch (c->cstate) {
		case CS_SIZE:
			if (*p == '\n') {
				c->csize[c->cslen] = '\0';
				c->cleft = strtoul(c->csize, NULL, 16);
				c->cslen = 0;
				c->cstate = c->cleft ? CS_DATA : CS_CRLF;
			} else if (c->cslen + 1 < sizeof(c->csize)) {
				c->csize[c->cslen++] = *p;
			}
			p++;
			n--;
			break;
		case CS_DATA:
			take = n < c->cleft ? n : c->cleft;
			sse_bytes(c, p, take);
			p += take;
			n -= take;
			c->cleft -= take;
			if (!c->cleft)
				c->cstate = CS_CRLF;
			break;
		case CS_CRLF:
			if (*p == '\n')
				c->cstate = CS_SIZE;
			p++;
			n--;
			break;
		}
	}
}

static void
on_readable(struct client *c)
{
	char b[65536];
	ssize_t n;

	while (!c->closed) {
		n = recv(c->fd, b, sizeof(b), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			if (!c->closed)
				fprintf(stderr, "%s: client %ld: the server "
					"closed the stream (%s)\n",
					bench_name, (long)(c - cl),
					n < 0 ? strerror(errno) : "eof");
			c->closed = 1;
			close(c->fd);
			return;
		}
		if (!c->head_done && !c->upgraded) {
			size_t take = (size_t)n, k;
			char *end;

			if (c->hlen + take >= sizeof(c->head))
				take = sizeof(c->head) - 1 - c->hlen;
			memcpy(c->head + c->hlen, b, take);
			c->hlen += take;
			c->head[c->hlen] = '\0';
			end = strstr(c->head, "\r\n\r\n");
			if (!end) {
				if (c->hlen + 1 >= sizeof(c->head))
					fail("client %ld: no end of head",
					     (long)(c - cl));
				continue;
			}
			if (strncmp(c->head, ws_mode ? "HTTP/1.1 101" :
						       "HTTP/1.1 200", 12))
				fail("client %ld: refused: %.60s", (long)(c - cl),
				     c->head);
			for (k = 0; c->head[k]; k++)
				c->head[k] = (char)tolower(
					(unsigned char)c->head[k]);
			c->chunked = strstr(c->head, "transfer-encoding: chunked") &&
				     strstr(c->head, "transfer-encoding: chunked") <
					     end;
			/* a WebSocket is open at its first message */
			if (ws_mode) {
				c->upgraded = 1;
			} else {
				c->head_done = 1;
				connected++;
			}
			k = (size_t)(end + 4 - c->head);
			/* what came after the head in this read */
			body_bytes(c, b + (k - (c->hlen - take)),
				   (size_t)n - (k - (c->hlen - take)));
			continue;
		}
		body_bytes(c, b, (size_t)n);
	}
}

static void
on_writable(int ep, struct client *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	ssize_t n;

	while ((size_t)c->sent < request_len) {
		n = send(c->fd, request + c->sent, request_len - (size_t)c->sent,
			 MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0)
			fail("client %ld: cannot send: %s", (long)(c - cl),
			     strerror(errno));
		c->sent += (int)n;
	}
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void
pump(int ep, int timeout_ms)
{
	struct epoll_event evs[1024];
	int n, i;

	n = epoll_wait(ep, evs, 1024, timeout_ms);
	for (i = 0; i < n; i++) {
		struct client *c = evs[i].data.ptr;

		if (c->closed)
			continue;
		if (evs[i].events & EPOLLOUT)
			on_writable(ep, c);
		else
			on_readable(c);
	}
}

/* VmRSS of pid in KiB; its thread count in *threads. */
static long
rss_kib(long pid, long *threads)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	f = fopen(path, "r");
	if (!f)
		fail("cannot read %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "VmRSS:", 6))
			kib = strtol(line + 6, NULL, 10);
		if (!strncmp(line, "Threads:", 8))
			*threads = strtol(line + 8, NULL, 10);
	}
	fclose(f);
	return kib;
}

struct appender {
	const char *path;
	double rate;
	int64_t done_ns;
};

static void *
append_all(void *arg)
{
	struct appender *a = arg;
	struct store *s = open_store(a->path);
	int64_t start = mono_ns();
	long i;

	for (i = 0; i < nevents; i++) {
		int64_t at = start + (int64_t)(i * 1e9 / a->rate), now;
		struct event ev = { 0 };
		struct err e = ERR_INIT;
		char data[96];

		while ((now = mono_ns()) < at) {
			struct timespec ts = { 0, (long)(at - now) };

			nanosleep(&ts, NULL);
		}
		snprintf(data, sizeof(data), "{\"bench_t\": %lld, \"i\": %ld}",
			 (long long)mono_ns(), i);
		/* a type of the registry that nothing acts on */
		ev.type = (char *)"observed";
		ev.data = data;
		if (store_event_add(s, &ev, &e))
			fail("store_event_add: %s", e.msg);
		free(ev.run_id);
	}
	a->done_ns = mono_ns();
	store_close(s);
	return NULL;
}

static int
cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	const char *addr, *token, *store = NULL, *colon;
	struct appender ap = { .rate = 20 };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct rlimit rl;
	long pid = 0, i, rss0, rss1, threads0 = 0, threads1 = 0, missing = 0,
			 disorder = 0, dup = 0, closed = 0, n;
	int64_t t0, t_conn, deadline;
	pthread_t th;
	double p50, p99, pmax;
	int ep;

	bench_name = "bench_stream";
	nclients = 10000;
	nevents = 200;
	if (argc < 3)
		fail("usage: bench_stream HOST:PORT TOKEN --store PATH --pid PID "
		     "[--clients N] [--events E] [--rate R] [--ws]");
	addr = argv[1];
	token = argv[2];
	for (i = 3; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "";

		if (!strcmp(argv[i], "--ws")) {
			ws_mode = 1;
			continue;
		}
		if (!strcmp(argv[i], "--clients"))
			nclients = count_arg(v, "--clients");
		else if (!strcmp(argv[i], "--events"))
			nevents = count_arg(v, "--events");
		else if (!strcmp(argv[i], "--rate"))
			ap.rate = (double)count_arg(v, "--rate");
		else if (!strcmp(argv[i], "--store"))
			store = v;
		else if (!strcmp(argv[i], "--pid"))
			pid = count_arg(v, "--pid");
		else
			fail("unknown option '%s'", argv[i]);
		i++;
	}
	if (!store || !pid)
		fail("--store and --pid are required");
	colon = strrchr(addr, ':');
	if (!colon || inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr) != 1)
		fail("HOST:PORT wanted, not '%s'", addr);
	sin.sin_port = htons((uint16_t)strtol(colon + 1, NULL, 10));
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < (rlim_t)nclients + 64)
			fail("%ld clients need %ld descriptors; the limit is %ld",
			     nclients, nclients + 64, (long)rl.rlim_cur);
	}
	request_len = (size_t)snprintf(
		request, sizeof(request),
		ws_mode ? "GET /api/v1/ws HTTP/1.1\r\nHost: %s\r\n"
			  "Authorization: Bearer %s\r\nUpgrade: websocket\r\n"
			  "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
			  "Sec-WebSocket-Key: YmF0b24tYmVuY2gtc3RyZWFt\r\n\r\n" :
			  "GET /api/v1/events HTTP/1.1\r\nHost: %s\r\n"
			  "Authorization: Bearer %s\r\n"
			  "Accept: text/event-stream\r\n\r\n",
		addr, token);
	cl = xcalloc((size_t)nclients, sizeof(*cl));
	lat = xcalloc((size_t)(nclients * nevents), sizeof(*lat));
	ep = epoll_create1(EPOLL_CLOEXEC);
	rss0 = rss_kib(pid, &threads0);
	origin = mono_ns();

	t0 = mono_ns();
	for (i = 0; i < nclients; i++) {
		struct client *c = &cl[i];
		struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
		int one = 1;

		c->seen = xcalloc((size_t)nevents, 1);
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			       0);
		if (c->fd < 0)
			fail("socket: %s", strerror(errno));
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(c->fd, (struct sockaddr *)&sin, sizeof(sin)) &&
		    errno != EINPROGRESS)
			fail("connect: %s", strerror(errno));
		epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
		/* keep the accept queue drained as we go */
		if (i % 256 == 255)
			pump(ep, 0);
	}
	deadline = mono_ns() + 120 * 1000000000LL;
	while (connected < nclients) {
		if (mono_ns() > deadline)
			fail("only %ld of %ld streams opened in 120 s", connected,
			     nclients);
		pump(ep, 100);
	}
	t_conn = mono_ns() - t0;
	printf("connect: %ld %s open (%s) in %.2f s\n", nclients,
	       ws_mode ? "WebSockets" : "SSE streams",
	       ws_mode ? "101 and the welcome" : "head and first bytes",
	       t_conn / 1e9);
	deadline = mono_ns() + 2000000000LL;
	while (mono_ns() < deadline)
		pump(ep, 100);
	rss1 = rss_kib(pid, &threads1);
	printf("memory: serve's HTTP process %ld KiB before, %ld KiB with %ld "
	       "idle streams: %.1f KiB a stream; threads %ld before, %ld with\n",
	       rss0, rss1, nclients, (double)(rss1 - rss0) / nclients, threads0,
	       threads1);

	ap.path = store;
	if (pthread_create(&th, NULL, append_all, &ap))
		fail("cannot start the appender");
	deadline = 0;
	for (;;) {
		pump(ep, 50);
		if (complete == nclients)
			break;
		if (!deadline && ap.done_ns)
			deadline = ap.done_ns + 60 * 1000000000LL;
		if (deadline && mono_ns() > deadline)
			break;
	}
	pthread_join(th, NULL);
	for (i = 0; i < nclients; i++) {
		missing += nevents - cl[i].got;
		disorder += cl[i].disorder;
		dup += cl[i].dup;
		closed += cl[i].closed;
	}
	n = atomic_load(&nlat);
	qsort(lat, (size_t)n, sizeof(*lat), cmp64);
	p50 = n ? lat[n / 2] / 1e6 : 0;
	p99 = n ? lat[(long)(n * 0.99)] / 1e6 : 0;
	pmax = n ? lat[n - 1] / 1e6 : 0;
	printf("delivery: %ld events at %.0f/s to %ld streams: %ld deliveries, "
	       "latency p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
	       nevents, ap.rate, nclients, n, p50, p99, pmax);
	printf("check: %ld of %ld clients have every event; missing %ld, out "
	       "of order %ld, twice %ld, closed by the server %ld\n",
	       complete, nclients, missing, disorder, dup, closed);
	printf("key: kind=%s clients=%ld connect_s=%.2f p50_ms=%.1f p99_ms=%.1f "
	       "kib_per_stream=%.1f rss0_kib=%ld rss_kib=%ld threads=%ld "
	       "complete=%ld\n",
	       ws_mode ? "ws" : "sse",
	       nclients, t_conn / 1e9, p50, p99,
	       (double)(rss1 - rss0) / nclients, rss0, rss1, threads1,
	       complete);
	return complete == nclients && !disorder && !dup ? 0 : 1;
}
