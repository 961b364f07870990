/*
 * The live stream on its two transports (docs/api.md, "The live
 * stream"): Server-Sent Events at /api/v1/events and a WebSocket at
 * /api/v1/ws. Both read the hub from a cursor (the last seq the client
 * has), so a client that reconnects with its cursor gets every event
 * after it exactly once, then the live ones.
 *
 * No stream holds a thread. An SSE stream is an answer libmicrohttpd
 * reads from sse_read on its event loop; with nothing to send, the
 * connection is suspended and put on the waiting list, and the hub's
 * callback (stream_wake) resumes every waiting stream when news comes
 * (taking them off the list under its lock, resuming them outside it).
 * A generation count closes the gap between "nothing to read" and
 * "suspended": a stream suspends only when no news came since it looked.
 * WebSocket connections are upgraded and their sockets handed, in
 * turn, to one of a few threads of this file's own (ws_loop: epoll,
 * frames by libwslay; one a CPU, at least two), each of which pushes
 * the news to its sockets and runs their commands through the REST
 * routes (http_call), so both doors check and do exactly the same.
 * Sending is most of a stream's cost (a send a message), and one
 * thread alone could use one CPU only.
 *
 *   hub thread ─▶ stream_wake ─┬─ gen++, resume waiting SSE ─▶ sse_read (loops)
 *                              └─ eventfd each ─▶ ws_loops ─▶ wslay ─▶ sockets
 *   ws_loop, every STREAM_TICK_MS: keepalives due (WS pings; the first
 *            loop the SSE ": ping"s too)
 *   hub thread, at each look at the store ─▶ stream_revoke of a token
 *            revoked elsewhere (hub_on_revoke)
 *
 * A stream runs as the token that opened it, so it ends when that token
 * is revoked: at once when this serve revokes it (stream_revoke), when
 * the hub next looks at the store when `baton token revoke` or another
 * host did. The event loop itself never waits on the store for it.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "core/config.h"
#include "core/run.h"
#include "sched/sched.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/version.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#undef LOG_MODULE
#define LOG_MODULE "stream"

#define BATCH 64
/* A comment or ping this often keeps proxies and idle clients awake. */
#define KEEPALIVE_MS 15000
/* How often the keepalives due are looked for. */
#define STREAM_TICK_MS 5000
/*
 * A WebSocket that sends nothing (not even the pong to our pings) for
 * this long is gone.
 */
#define WS_READ_MS 45000
/* How long a closed WebSocket's client has to close its side. */
#define WS_LINGER_MS 2000
/*
 * An SSE client that reads nothing for this long (its socket full) is
 * cut; it comes back with Last-Event-ID.
 */
#define SSE_STALL_S 60
/* Messages queued on one WebSocket before its cursor waits for it. */
#define WS_QUEUE_MAX 256
/* Connections kept for requests when streams are capped by descriptors. */
#define STREAMS_KEEP 64
/* WebSocket loops: one a CPU, within these. */
#define WS_LOOPS_MIN 2
#define WS_LOOPS_MAX 16

static atomic_int clients;

int
stream_clients(void)
{
	return atomic_load(&clients);
}

/*
 * How many live streams may be open at once: server.max_streams, within
 * what the descriptor limit leaves after STREAMS_KEEP connections for
 * requests (a stream costs no thread, only its socket and a few KiB).
 */
static int
streams_max(const struct server *srv)
{
	int max = srv->cfg->server.max_streams;

	if (srv->max_conns > STREAMS_KEEP &&
	    srv->max_conns - STREAMS_KEEP < (unsigned)max)
		max = (int)(srv->max_conns - STREAMS_KEEP);
	return max;
}

/*
 * Whether one more stream may open (counted in clients); 0 with a 503
 * answered when the streams are at their cap.
 */
static int
stream_admit(struct req *rq)
{
	int max = streams_max(rq->srv), n = atomic_load(&clients);

	for (;;) {
		if (n >= max) {
			http_error(rq, 503, "too_many_streams",
				   "%d live streams are open, as many as "
				   "server.max_streams (%d) and the descriptor "
				   "limit allow: close one, or raise "
				   "server.max_streams",
				   n, rq->srv->cfg->server.max_streams);
			return 0;
		}
		if (atomic_compare_exchange_weak(&clients, &n, n + 1))
			return 1;
	}
}

/* The filter and cursor of a stream, from its query (and headers). */
struct cursor {
	struct hub_filter f;
	char run_id[256];
	int64_t after;
};

/*
 * Reads task=, run= and after= (or Last-Event-ID); fills *msg and returns
 * -1 when one is bad. A run is named as anywhere else (7, r7, the id).
 */
static int
read_cursor(struct server *srv, struct store *s, const char *query,
	    const char *last_id, struct cursor *c, char *msg, size_t len)
{
	char v[256];
	char *end;

	memset(c, 0, sizeof(*c));
	c->after = hub_last_seq(srv->hub);
	if (query && http_query_var(query, "task", v, sizeof(v)) >= 0) {
		c->f.task_id = sched_task_ref(v);
		if (!c->f.task_id) {
			snprintf(msg, len, "task must be a task id, not '%s'", v);
			return -1;
		}
	}
	if (query && http_query_var(query, "run", v, sizeof(v)) >= 0) {
		struct run r = { 0 };
		struct err e = ERR_INIT;

		if (!s || store_run_get(s, v, &r, &e)) {
			snprintf(msg, len, "no run '%s'", v);
			return -1;
		}
		snprintf(c->run_id, sizeof(c->run_id), "%s", r.id);
		c->f.run_id = c->run_id;
		run_release(&r);
	}
	/* A browser that reconnects keeps the stream's URL, after= and
	 * all, and says in Last-Event-ID how far it got: that wins. */
	if (last_id && *last_id)
		snprintf(v, sizeof(v), "%s", last_id);
	else if (!query || http_query_var(query, "after", v, sizeof(v)) < 0)
		return 0;
	c->after = strtoll(v, &end, 10);
	if (*end || c->after < 0) {
		snprintf(msg, len, "%s must be an event seq, not '%s'",
			 last_id && *last_id ? "Last-Event-ID" : "after", v);
		return -1;
	}
	return 0;
}

/* ---- Server-Sent Events -------------------------------------------------- */

struct sse {
	struct server *srv;
	struct MHD_Connection *conn;
	struct cursor c;
	struct buf out; /* what is to be sent; from off on */
	size_t off;
	int64_t last_ms; /* when it last had something to send */
	int fd;		 /* its socket, to see a client leave while parked */
	int waiting;	 /* on the waiting list (suspended) */
	int gone;	 /* the client hung up while it was parked */
	/* stream_sse_with: where its bytes come from, instead of the hub */
	stream_fill_fn *fill;
	void *arg;
	void (*release)(void *arg);
	int ended; /* fill said it is finished: end once out is sent */
	int watch;	 /* a run's stream: its watch lock (baton clean) */
	char actor[72];	     /* whose token opened it */
	/* as it last looked (revoked_since); 0 from the start, so its
	 * first read looks the set up: a revocation between the request's
	 * token check and the stream's start is not missed */
	unsigned revocations;
	struct sse *prev, *next;
};

/*
 * The waiting list, and the news count that closes the race. A stream
 * is resumed after it is taken off the list, outside wait_mu: each
 * MHD_resume_connection wakes the connection's event loop, which takes
 * microseconds, and thousands of streams resumed under the lock would
 * hold every stream that goes back to wait behind them. A connection
 * taken off stays suspended until it is resumed, so nothing else can
 * end it but the server's stop, which waits for the passes under way
 * (resuming) first.
 */
static pthread_mutex_t wait_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t resumed_cv = PTHREAD_COND_INITIALIZER;
static struct sse *waiting;
static int resuming; /* passes resuming what they took off; wait_mu */
static atomic_ullong news;

/* The connections a pass took off the waiting list, to resume. */
struct taken {
	struct MHD_Connection **conns;
	size_t n, alloc;
};

/*
 * The tokens revoked while this serve runs (a name is never given out
 * again, so the set only grows), and how many were added: a stream
 * looks the set up only when that count moved since it last looked.
 */
static pthread_mutex_t revoked_mu = PTHREAD_MUTEX_INITIALIZER;
static struct strvec revoked = STRVEC_INIT;
static atomic_uint revocations;

/* Whether actor's token was revoked since *seen; moves *seen on. */
static int
revoked_since(const char *actor, unsigned *seen)
{
	unsigned now = atomic_load(&revocations);
	int hit;

	if (now == *seen)
		return 0;
	*seen = now;
	pthread_mutex_lock(&revoked_mu);
	hit = strvec_has(&revoked, actor);
	pthread_mutex_unlock(&revoked_mu);
	return hit;
}

/* What a stream of a revoked token is told last. */
static char *
revoked_json(const char *type, const char *actor)
{
	char msg[160];
	json_t *j;
	char *text;

	snprintf(msg, sizeof(msg),
		 "token '%s' was revoked: this stream is closed", actor);
	j = json_pack("{s:s, s:{s:s, s:s}}", "type", type, "error", "code",
		      "unauthorized", "message", msg);
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return text;
}

static void
wait_unlink(struct sse *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		waiting = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	s->waiting = 0;
}

/* Takes s off the waiting list into t, with wait_mu held. */
static void
take(struct taken *t, struct sse *s)
{
	wait_unlink(s);
	ALLOC_GROW(t->conns, t->n + 1, t->alloc);
	t->conns[t->n++] = s->conn;
}

/*
 * Resumes what t took, without wait_mu; the caller counted the pass in
 * resuming when it took them.
 */
static void
resume_taken(struct taken *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		MHD_resume_connection(t->conns[i]);
	free(t->conns);
	pthread_mutex_lock(&wait_mu);
	if (!--resuming)
		pthread_cond_broadcast(&resumed_cv);
	pthread_mutex_unlock(&wait_mu);
}

/* Resumes every waiting SSE stream (they look at the hub again). */
static void
sse_resume_all(void)
{
	struct taken t = { 0 };

	pthread_mutex_lock(&wait_mu);
	atomic_fetch_add(&news, 1);
	while (waiting)
		take(&t, waiting);
	resuming++;
	pthread_mutex_unlock(&wait_mu);
	resume_taken(&t);
}

/*
 * The tick: resumes the waiting streams whose ping is due and those
 * whose client hung up (a suspended connection is not watched by
 * libmicrohttpd, so one poll over all their sockets looks for it).
 */
static void
sse_tick(int64_t now)
{
	struct pollfd *pfd = NULL;
	struct sse **who = NULL, *s;
	struct taken t = { 0 };
	size_t n = 0, alloc = 0, i;

	pthread_mutex_lock(&wait_mu);
	for (s = waiting; s; s = s->next) {
		ALLOC_GROW(pfd, n + 1, alloc);
		pfd[n] = (struct pollfd){ .fd = s->fd, .events = POLLRDHUP };
		n++;
	}
	who = xcalloc(n ? n : 1, sizeof(*who));
	for (i = 0, s = waiting; s; s = s->next)
		who[i++] = s;
	if (n && poll(pfd, n, 0) < 0)
		n = 0;
	for (i = 0; i < n; i++) {
		s = who[i];
		if (pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
			s->gone = 1;
		else if (now - s->last_ms < KEEPALIVE_MS)
			continue;
		take(&t, s);
	}
	resuming++;
	pthread_mutex_unlock(&wait_mu);
	resume_taken(&t);
	free(pfd);
	free(who);
}

/*
 * Fills s->out with what is new for the stream (or a ping when it has
 * been quiet for KEEPALIVE_MS); -1 when the hub stops.
 */
static int
sse_fill(struct sse *s)
{
	struct hub_msg msgs[BATCH];
	int64_t now = time_mono_ms();
	int n, i;

	buf_reset(&s->out);
	s->off = 0;
	n = hub_read(s->srv->hub, http_thread_store(s->srv), s->c.after,
		     &s->c.f, msgs, BATCH, 0);
	if (n < 0)
		return -1;
	for (i = 0; i < n; i++) {
		buf_add(&s->out, msgs[i].sse, msgs[i].sse_len);
		s->c.after = msgs[i].seq;
		hub_msg_release(&msgs[i]);
	}
	if (!n && now - s->last_ms >= KEEPALIVE_MS)
		buf_adds(&s->out, ": ping\n\n");
	if (s->out.len)
		s->last_ms = now;
	return 0;
}

/* sse_fill for a stream of stream_sse_with. */
static int
custom_fill(struct sse *s)
{
	int64_t now = time_mono_ms();
	int rc;

	buf_reset(&s->out);
	s->off = 0;
	rc = s->fill(s->arg, &s->out);
	if (rc < 0)
		return -1;
	s->ended = rc > 0;
	if (!s->out.len && !s->ended && now - s->last_ms >= KEEPALIVE_MS)
		buf_adds(&s->out, ": ping\n\n");
	if (s->out.len)
		s->last_ms = now;
	return 0;
}

/*
 * libmicrohttpd asks for the next bytes of the stream. With none, the
 * connection is suspended on the waiting list, unless news came since
 * the hub was read (then it reads again).
 */
static ssize_t
sse_read(void *cls, uint64_t pos, char *dst, size_t max)
{
	struct sse *s = cls;
	size_t n;

	(void)pos;
	if (s->gone)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (!s->ended && revoked_since(s->actor, &s->revocations)) {
		char *text = revoked_json("revoked", s->actor);

		/* after what is still unsent: the client reads it last */
		buf_addf(&s->out, "event: revoked\ndata: %s\n\n", text);
		free(text);
		s->ended = 1;
	}
	while (s->off == s->out.len) {
		unsigned long long seen = atomic_load(&news);

		if (s->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (s->fill ? custom_fill(s) : sse_fill(s))
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (s->out.len)
			break;
		pthread_mutex_lock(&wait_mu);
		if (atomic_load(&news) == seen) {
			s->next = waiting;
			if (waiting)
				waiting->prev = s;
			waiting = s;
			s->waiting = 1;
			MHD_suspend_connection(s->conn);
			pthread_mutex_unlock(&wait_mu);
			return 0;
		}
		pthread_mutex_unlock(&wait_mu);
	}
	n = s->out.len - s->off;
	if (n > max)
		n = max;
	memcpy(dst, s->out.ptr + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

/*
 * The answer is done with (the connection ends). wait_mu is taken only
 * when the stream is still parked, which a connection that ends is not
 * (a suspended one ends only as the server stops); and no MHD call is
 * made under it, so libmicrohttpd's own locks, which it may hold here,
 * never wait for it.
 */
static void
sse_free(void *cls)
{
	struct sse *s = cls;

	if (s->waiting) {
		pthread_mutex_lock(&wait_mu);
		if (s->waiting)
			wait_unlink(s);
		pthread_mutex_unlock(&wait_mu);
	}
	atomic_fetch_sub(&clients, 1);
	if (s->release)
		s->release(s->arg);
	workspace_watch_end(s->watch);
	buf_release(&s->out);
	free(s);
}

/* A stream on rq's connection, nothing in it yet but the retry hint. */
static struct sse *
sse_new(struct req *rq)
{
	struct sse *s = xcalloc(1, sizeof(*s));
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	s->srv = rq->srv;
	s->conn = rq->conn;
	s->watch = -1;
	memcpy(s->actor, rq->actor, sizeof(s->actor));
	s->out = (struct buf)BUF_INIT;
	buf_adds(&s->out, "retry: 2000\n\n");
	s->last_ms = time_mono_ms();
	s->fd = ci ? ci->connect_fd : -1;
	return s;
}

/* Answers rq with s as an event stream; s is the response's from here. */
static void
sse_open(struct req *rq, struct sse *s)
{
	struct MHD_Response *r;

	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read,
					      s, sse_free);
	if (!r) {
		sse_free(s);
		http_error(rq, 500, "internal", "cannot open the stream");
		return;
	}
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	http_common_headers(r);
	http_streaming(rq);
	MHD_set_connection_option(rq->conn, MHD_CONNECTION_OPTION_TIMEOUT,
				  (unsigned)SSE_STALL_S);
	rq->status = 200;
	MHD_queue_response(rq->conn, 200, r);
	MHD_destroy_response(r);
}

void
stream_poke(void)
{
	sse_resume_all();
}

void
stream_sse_with(struct req *rq, stream_fill_fn *fill, void *arg,
		void (*release)(void *arg))
{
	struct sse *s;

	if (!stream_admit(rq)) {
		if (release)
			release(arg);
		return;
	}
	s = sse_new(rq);
	s->fill = fill;
	s->arg = arg;
	s->release = release;
	sse_open(rq, s);
}

void
stream_sse(struct req *rq)
{
	struct sse *s;
	struct cursor c;
	char why[300];

	if (read_cursor(rq->srv, rq->store, rq->query,
			http_header(rq, "Last-Event-ID"), &c, why,
			sizeof(why))) {
		http_error(rq, strncmp(why, "no run", 6) ? 400 : 404,
			   strncmp(why, "no run", 6) ? "bad_request" :
						       "not_found",
			   "%s", why);
		return;
	}
	if (!stream_admit(rq))
		return;
	s = sse_new(rq);
	s->c = c;
	if (c.f.run_id) {
		s->c.f.run_id = s->c.run_id; /* into its own copy */
		s->watch = workspace_watch_begin(rq->srv->ws, s->c.run_id);
	}
	sse_open(rq, s);
}

/* ---- WebSocket ----------------------------------------------------------- */

struct ws_client {
	struct server *srv;
	/* whose token opened it: its commands run as that token */
	char actor[72];
	enum api_role role;
	int fd;
	struct MHD_UpgradeResponseHandle *urh;
	wslay_event_context_ptr ctx;
	struct cursor c;
	char *refusal; /* the cursor was bad: say this, then close */
	struct buf in; /* bytes read with the request, from in_off on */
	size_t in_off;
	int64_t last_recv_ms, last_ping_ms;
	int64_t linger_ms; /* our close is sent: reading till EOF since */
	int sock_failed;   /* the socket failed or the client closed it */
	uint32_t events; /* what epoll waits for now */
	int watch;	 /* a run's stream: its watch lock (baton clean) */
	unsigned revocations; /* as an SSE stream's (struct sse) */
	int revoked;	      /* its token was: closing, commands refused */
	/* a close to queue once the messages before it are out (libwslay
	 * sends a queued close ahead of them, and then nothing more) */
	uint16_t close_code;
	char close_reason[100];
	struct ws_loop *loop; /* the one it lives in */
	struct ws_client *prev, *next;
};

/* A WebSocket loop: its thread, epoll, wake-up, clients. */
struct ws_loop {
	pthread_t thread;
	int made;    /* ep, wake and mu are (for good) */
	int started; /* its thread runs */
	int first;   /* the loop that keeps the SSE streams' time too */
	int ep, wake;
	atomic_int news;
	pthread_mutex_t mu; /* guards incoming */
	struct ws_client *incoming;
	struct ws_client *all;
};

static struct {
	struct server *srv;
	atomic_int stop;
	atomic_uint turn; /* the loop the next socket goes to, mod nr */
	int nr;
	struct ws_loop loops[WS_LOOPS_MAX];
} wl;

static void
loop_poke(struct ws_loop *l)
{
	uint64_t one = 1;

	if (l->wake >= 0 && write(l->wake, &one, sizeof(one)) < 0 &&
	    errno != EAGAIN)
		log_warn("cannot wake a WebSocket loop: %s", strerror(errno));
}

/* Every loop looks at its sockets again. */
static void
loops_news(void)
{
	int i;

	for (i = 0; i < wl.nr; i++) {
		atomic_store(&wl.loops[i].news, 1);
		loop_poke(&wl.loops[i]);
	}
}

/* The hub has news: every stream looks again. */
static void
stream_wake(void *arg)
{
	(void)arg;
	sse_resume_all();
	loops_news();
}

void
stream_revoke(const char *name)
{
	int known;

	pthread_mutex_lock(&revoked_mu);
	known = strvec_has(&revoked, name);
	if (!known)
		strvec_push(&revoked, name);
	pthread_mutex_unlock(&revoked_mu);
	if (known)
		return;
	atomic_fetch_add(&revocations, 1);
	sse_resume_all();
	loops_news();
}

static void
ws_send(struct ws_client *w, const char *text, size_t len)
{
	struct wslay_event_msg m = { .opcode = WSLAY_TEXT_FRAME,
				     .msg = (const uint8_t *)text,
				     .msg_length = len };

	wslay_event_queue_msg(w->ctx, &m);
}

static ssize_t
ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *dst, size_t len, int flags,
	   void *user)
{
	struct ws_client *w = user;
	ssize_t n;

	(void)flags;
	if (w->in_off < w->in.len) {
		n = (ssize_t)(w->in.len - w->in_off);
		if ((size_t)n > len)
			n = (ssize_t)len;
		memcpy(dst, w->in.ptr + w->in_off, (size_t)n);
		w->in_off += (size_t)n;
		w->last_recv_ms = time_mono_ms();
		return n;
	}
	do
		n = recv(w->fd, dst, len, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (n <= 0) {
		w->sock_failed = 1;
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	w->last_recv_ms = time_mono_ms();
	return n;
}

static ssize_t
ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
	   int flags, void *user)
{
	struct ws_client *w = user;
	ssize_t n;

	(void)flags;
	do
		n = send(w->fd, data, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			w->sock_failed = 1;
		wslay_event_set_error(ctx, w->sock_failed ?
					   WSLAY_ERR_CALLBACK_FAILURE :
					   WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	return n;
}

static void ws_command(struct ws_client *w, const char *data, size_t len);

/*
 * Closes w with code and reason once what is queued before is sent
 * (ws_update queues the close then).
 */
static void
ws_close_after(struct ws_client *w, uint16_t code, const char *reason)
{
	w->close_code = code;
	snprintf(w->close_reason, sizeof(w->close_reason), "%s",
		 reason ? reason : "");
}

/* store_token_list's callback for revoked_in_store: the token named. */
static int
token_named(const struct api_token *t, void *arg)
{
	const char *name = arg;

	return strcmp(t->name, name) ? 0 : t->revoked_at ? 1 : 2;
}

/*
 * Whether the store has the token of actor revoked (the repository's
 * own token is in no store: never). A store that cannot say is taken at
 * its last word: not revoked, logged.
 */
static int
revoked_in_store(const char *actor)
{
	struct store *st = http_thread_store(wl.srv);
	struct err e = ERR_INIT;
	int rc;

	if (!strcmp(actor, API_OWNER) || !st)
		return 0;
	rc = store_token_list(st, token_named, (void *)actor, &e);
	if (rc < 0)
		log_warn("cannot look token '%s' up: %s", actor, e.msg);
	return rc == 1;
}

/*
 * w's token was revoked: it is told so (an error message, then a close
 * of code 1008, policy violation), is sent nothing more and runs no
 * command it sends before its close.
 */
static void
ws_revoke(struct ws_client *w)
{
	char *text = revoked_json("error", w->actor);
	char reason[sizeof(w->close_reason)];

	w->revoked = 1;
	snprintf(reason, sizeof(reason), "token '%s' was revoked", w->actor);
	ws_send(w, text, strlen(text));
	free(text);
	ws_close_after(w, WSLAY_CODE_POLICY_VIOLATION, reason);
}

/*
 * A whole message from the client. libwslay has put the fragments
 * together (up to server.max_body_kb, closing with 1009 past it),
 * answered pings, and closed with 1002 on what RFC 6455 forbids: a
 * continuation with no message under way, a new message inside one, a
 * fragmented or oversized control frame, reserved bits, an unmasked
 * frame. A binary message is no command: it is dropped.
 */
static void
ws_on_msg(wslay_event_context_ptr ctx,
	  const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
	struct ws_client *w = user;

	(void)ctx;
	if (arg->opcode != WSLAY_TEXT_FRAME || w->revoked)
		return; /* revoked: nothing more is run */
	/* a command runs as the token: one revoked since is refused,
	 * wherever it was revoked (a tick would be late) */
	if (revoked_since(w->actor, &w->revocations) ||
	    revoked_in_store(w->actor)) {
		stream_revoke(w->actor);
		ws_revoke(w);
		return;
	}
	ws_command(w, (const char *)arg->msg, arg->msg_length);
}

static const struct wslay_event_callbacks ws_callbacks = {
	.recv_callback = ws_recv_cb,
	.send_callback = ws_send_cb,
	.on_msg_recv_callback = ws_on_msg,
};

/* Closes the socket of w, which is in no loop, and frees w. */
static void
ws_forget(struct ws_client *w)
{
	MHD_upgrade_action(w->urh, MHD_UPGRADE_ACTION_CLOSE);
	atomic_fetch_sub(&clients, 1);
	workspace_watch_end(w->watch);
	buf_release(&w->in);
	free(w->refusal);
	free(w);
}

static void
ws_close(struct ws_client *w)
{
	epoll_ctl(w->loop->ep, EPOLL_CTL_DEL, w->fd, NULL);
	if (w->prev)
		w->prev->next = w->next;
	else
		w->loop->all = w->next;
	if (w->next)
		w->next->prev = w->prev;
	wslay_event_context_free(w->ctx);
	ws_forget(w);
}

/*
 * Our close frame is out: the write side is shut and what the client
 * still sends is read and dropped until it closes (or WS_LINGER_MS), so
 * that unread bytes do not turn our close into a reset that destroys
 * the close frame before the client reads it.
 */
static void
ws_linger(struct ws_client *w)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };

	w->linger_ms = time_mono_ms();
	shutdown(w->fd, SHUT_WR);
	w->events = EPOLLIN;
	epoll_ctl(w->loop->ep, EPOLL_CTL_MOD, w->fd, &ev);
}

/* Reads and drops what a lingering client sends; 1 when it is gone. */
static int
ws_drain(struct ws_client *w)
{
	char scratch[16384];
	ssize_t n;

	while ((n = recv(w->fd, scratch, sizeof(scratch), 0)) > 0)
		;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	ws_close(w);
	return 1;
}

/*
 * libwslay failed to read: the socket is gone, or a frame broke the
 * framing itself (a fragmented or oversized control frame, a reserved
 * opcode), for which libwslay queues a close with no code. That one is
 * dropped with all else queued: the client is told 1002 (written here,
 * whole, as the last thing on the socket) and the connection lingers.
 * What RFC 6455 forbids within the framing, libwslay closes with its
 * code itself and keeps reading (wslay_event_recv returns 0).
 */
static void
ws_fail(struct ws_client *w)
{
	static const unsigned char close_1002[] = { 0x88, 0x02, 0x03, 0xea };

	if (w->sock_failed) {
		ws_close(w);
		return;
	}
	if (send(w->fd, close_1002, sizeof(close_1002), MSG_NOSIGNAL) < 0)
		log_debug("cannot send a close: %s", strerror(errno));
	ws_linger(w);
}

/* Queues what is new for w, up to WS_QUEUE_MAX messages waiting. */
static void
ws_push(struct ws_client *w)
{
	struct hub_msg msgs[BATCH];
	int n, i;

	if (w->refusal || w->revoked || w->linger_ms ||
	    !wslay_event_want_read(w->ctx))
		return; /* closing */
	while (wslay_event_get_queued_msg_count(w->ctx) < WS_QUEUE_MAX) {
		n = hub_read(w->srv->hub, http_thread_store(w->srv),
			     w->c.after, &w->c.f, msgs, BATCH, 0);
		if (n <= 0)
			break;
		for (i = 0; i < n; i++) {
			ws_send(w, msgs[i].json, msgs[i].json_len);
			w->c.after = msgs[i].seq;
			hub_msg_release(&msgs[i]);
		}
	}
}

/*
 * Sends what is queued and sets what epoll waits for; closes w when
 * libwslay is done with it (1 returned: w is gone).
 */
static int
ws_update(struct ws_client *w)
{
	struct epoll_event ev = { 0 };

	if (w->linger_ms)
		return 0;
	if (wslay_event_want_write(w->ctx) && wslay_event_send(w->ctx)) {
		ws_close(w);
		return 1;
	}
	/*
	 * Drained: the cursor may move on, or a close that waited for the
	 * messages before it (a refusal, a revoked token) goes. Not queued
	 * with them: libwslay sends a control frame ahead of the messages
	 * queued before it, and none after it, so the client would never
	 * read why.
	 */
	if (!wslay_event_get_queued_msg_count(w->ctx) && w->close_code) {
		if (wslay_event_get_write_enabled(w->ctx))
			wslay_event_queue_close(w->ctx, w->close_code,
						(const uint8_t *)w->close_reason,
						strlen(w->close_reason));
		w->close_code = 0;
	} else if (!wslay_event_get_queued_msg_count(w->ctx)) {
		ws_push(w); /* nothing for a socket that is closing */
	}
	if (wslay_event_want_write(w->ctx) && wslay_event_send(w->ctx)) {
		ws_close(w);
		return 1;
	}
	if (!wslay_event_want_read(w->ctx) && !wslay_event_want_write(w->ctx)) {
		ws_linger(w);
		return 0;
	}
	ev.events = (wslay_event_want_read(w->ctx) ? EPOLLIN : 0) |
		    (wslay_event_want_write(w->ctx) ? EPOLLOUT : 0);
	ev.data.ptr = w;
	if (ev.events != w->events) {
		w->events = ev.events;
		epoll_ctl(w->loop->ep, EPOLL_CTL_MOD, w->fd, &ev);
	}
	return 0;
}

/* Takes a client the upgrade handed over into the loop. */
/*
 * The first message on a socket (OpenViber's connection:welcome): who
 * answers, the protocol and what it can do. The token was checked at
 * the upgrade, so there is no challenge to answer.
 */
static void
ws_welcome(struct ws_client *w)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:[sssss], s:I}", "type",
			      "connection:welcome", "server", "baton",
			      "daemon_version", BATON_VERSION,
			      "protocol_version", 1, "capabilities",
			      "streaming", "approval", "steer", "idempotency",
			      "health", "last_seq",
			      (json_int_t)hub_last_seq(w->srv->hub));
	char *text = json_dumps(j, JSON_COMPACT);

	ws_send(w, text, strlen(text));
	free(text);
	json_decref(j);
}

static void
ws_adopt(struct ws_client *w)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };

	w->events = EPOLLIN;
	w->last_recv_ms = w->last_ping_ms = time_mono_ms();
	if (wslay_event_context_server_init(&w->ctx, &ws_callbacks, w)) {
		ws_forget(w);
		return;
	}
	wslay_event_config_set_max_recv_msg_length(w->ctx, w->srv->max_body);
	w->next = w->loop->all;
	if (w->loop->all)
		w->loop->all->prev = w;
	w->loop->all = w;
	epoll_ctl(w->loop->ep, EPOLL_CTL_ADD, w->fd, &ev);
	if (w->refusal) {
		/* ws_update closes once it is out */
		ws_send(w, w->refusal, strlen(w->refusal));
		ws_close_after(w, WSLAY_CODE_NORMAL_CLOSURE, NULL);
	} else if (revoked_since(w->actor, &w->revocations)) {
		ws_revoke(w); /* since its upgrade was let through */
	} else {
		ws_welcome(w);
		ws_push(w);
	}
	/* bytes that came with the request are frames already */
	if (w->in_off < w->in.len && wslay_event_recv(w->ctx)) {
		ws_fail(w);
		return;
	}
	ws_update(w);
}

/* Pings the quiet, drops the silent; the first loop looks at the SSE
 * streams too. */
static void
ws_tick(struct ws_loop *l, int64_t now)
{
	struct ws_client *w, *next;

	for (w = l->all; w; w = next) {
		/* ws_close unlinks a client from w->loop, which is l: the
		 * analyzer cannot tell, and takes l->all for one freed */
		/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
		next = w->next;
		if (w->linger_ms) {
			if (now - w->linger_ms >= WS_LINGER_MS)
				ws_close(w);
			continue;
		}
		if (now - w->last_recv_ms >= WS_READ_MS) {
			ws_close(w);
			continue;
		}
		if (now - w->last_ping_ms >= KEEPALIVE_MS) {
			struct wslay_event_msg m = { .opcode = WSLAY_PING };

			w->last_ping_ms = now;
			wslay_event_queue_msg(w->ctx, &m);
			ws_update(w);
		}
	}
	if (l->first)
		sse_tick(now);
}

/* The sockets handed to l since it last looked (ws_upgraded). */
static struct ws_client *
take_incoming(struct ws_loop *l)
{
	struct ws_client *in;

	pthread_mutex_lock(&l->mu);
	in = l->incoming;
	l->incoming = NULL;
	pthread_mutex_unlock(&l->mu);
	return in;
}

static void *
ws_loop(void *arg)
{
	struct ws_loop *l = arg;
	struct epoll_event evs[256];
	struct ws_client *in, *w, *next;
	int64_t last_tick = time_mono_ms();

	while (!atomic_load(&wl.stop)) {
		int n = epoll_wait(l->ep, evs, ARRAY_SIZE(evs), 1000), i;
		int64_t now;

		for (i = 0; i < n; i++) {
			w = evs[i].data.ptr;
			if (!w) {
				uint64_t v;

				if (read(l->wake, &v, sizeof(v)) < 0 &&
				    errno != EAGAIN)
					log_warn("wake: %s", strerror(errno));
				continue;
			}
			if (w->linger_ms) {
				ws_drain(w);
				continue;
			}
			if ((evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) &&
			    wslay_event_recv(w->ctx)) {
				ws_fail(w);
				continue;
			}
			ws_update(w);
		}
		for (in = take_incoming(l); in; in = next) {
			next = in->next;
			in->next = NULL;
			ws_adopt(in);
		}
		if (atomic_exchange(&l->news, 0))
			for (w = l->all; w; w = next) {
				next = w->next;
				if (!w->revoked && !w->linger_ms &&
				    revoked_since(w->actor, &w->revocations))
					ws_revoke(w);
				ws_push(w);
				ws_update(w);
			}
		now = time_mono_ms();
		if (now - last_tick >= STREAM_TICK_MS) {
			last_tick = now;
			ws_tick(l, now);
		}
	}
	for (w = l->all; w; w = next) {
		next = w->next;
		ws_close(w);
	}
	for (in = take_incoming(l); in; in = next) {
		next = in->next;
		ws_forget(in); /* handed over as the loop stopped */
	}
	return NULL;
}

/* libmicrohttpd has sent the 101: the socket is the loop's now. */
static void
ws_upgraded(void *cls, struct MHD_Connection *conn, void *con_cls,
	    const char *extra_in, size_t extra_in_size, MHD_socket sock,
	    struct MHD_UpgradeResponseHandle *urh)
{
	struct ws_client *w = cls;
	struct ws_loop *l;
	int fl;

	(void)conn;
	(void)con_cls;
	w->fd = sock;
	w->urh = urh;
	if (atomic_load(&wl.stop)) {
		ws_forget(w); /* the loops are stopping: nobody to adopt it */
		return;
	}
	l = &wl.loops[atomic_fetch_add(&wl.turn, 1) % (unsigned)wl.nr];
	w->loop = l;
	if (extra_in_size)
		buf_add(&w->in, extra_in, extra_in_size);
	fl = fcntl(sock, F_GETFL);
	if (fl >= 0)
		fcntl(sock, F_SETFL, fl | O_NONBLOCK);
	pthread_mutex_lock(&l->mu);
	w->next = l->incoming;
	l->incoming = w;
	pthread_mutex_unlock(&l->mu);
	loop_poke(l);
}

/* Sec-WebSocket-Accept for key (RFC 6455, section 4.2.2) into out. */
static int
ws_accept_key(const char *key, char out[64])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char *both = xasprintf("%s%s", key, guid);
	int ok = EVP_Digest(both, strlen(both), md, &mdlen, EVP_sha1(), NULL);

	free(both);
	if (!ok || mdlen != 20)
		return -1;
	EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
	return 0;
}

void
stream_ws(struct req *rq)
{
	const char *key = http_header(rq, "Sec-WebSocket-Key"),
		   *version = http_header(rq, "Sec-WebSocket-Version");
	struct MHD_Response *r;
	struct ws_client *w;
	char accept[64], why[300];

	if (!key || !*key || strlen(key) > 64 || !version ||
	    strcmp(version, "13") || ws_accept_key(key, accept)) {
		http_error(rq, 400, "bad_request",
			   "a WebSocket handshake wants Sec-WebSocket-Key and "
			   "Sec-WebSocket-Version: 13");
		return;
	}
	if (!stream_admit(rq))
		return;
	w = xcalloc(1, sizeof(*w));
	w->srv = rq->srv;
	memcpy(w->actor, rq->actor, sizeof(w->actor));
	w->role = rq->role;
	w->fd = -1;
	w->watch = -1;
	w->in = (struct buf)BUF_INIT;
	if (read_cursor(rq->srv, rq->store, rq->query, NULL, &w->c, why,
			sizeof(why))) {
		json_t *j = json_pack("{s:s, s:{s:s, s:s}}", "type", "error",
				      "error", "code", "bad_request", "message",
				      why);

		w->refusal = json_dumps(j, JSON_COMPACT);
		json_decref(j);
	} else if (w->c.f.run_id) {
		w->c.f.run_id = w->c.run_id;
		w->watch = workspace_watch_begin(rq->srv->ws, w->c.run_id);
	}
	r = MHD_create_response_for_upgrade(ws_upgraded, w);
	if (!r) {
		atomic_fetch_sub(&clients, 1);
		workspace_watch_end(w->watch);
		free(w->refusal);
		free(w);
		http_error(rq, 500, "internal", "cannot upgrade");
		return;
	}
	MHD_add_response_header(r, "Upgrade", "websocket");
	MHD_add_response_header(r, "Sec-WebSocket-Accept", accept);
	http_streaming(rq);
	rq->status = 101;
	MHD_queue_response(rq->conn, MHD_HTTP_SWITCHING_PROTOCOLS, r);
	MHD_destroy_response(r);
}

/* How many WebSocket loops: one a CPU, within WS_LOOPS_MIN..MAX. */
static int
loops_wanted(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	return cpus < WS_LOOPS_MIN ? WS_LOOPS_MIN :
	       cpus > WS_LOOPS_MAX ? WS_LOOPS_MAX :
				     (int)cpus;
}

/*
 * Starts loop l; its epoll, eventfd and lock are made once and kept
 * for the process's life, so that an upgrade that comes in as the
 * loops stop never pokes a descriptor that was closed.
 */
static int
loop_start(struct ws_loop *l, struct err *e)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

	if (!l->made) {
		l->ep = epoll_create1(EPOLL_CLOEXEC);
		l->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (l->ep < 0 || l->wake < 0 ||
		    epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake, &ev))
			return err_set(e, -errno,
				       "cannot set up a WebSocket loop: %s",
				       strerror(errno));
		pthread_mutex_init(&l->mu, NULL);
		l->made = 1;
	}
	if (pthread_create(&l->thread, NULL, ws_loop, l))
		return err_set(e, BATON_EINVAL,
			       "cannot start a WebSocket loop");
	l->started = 1;
	return 0;
}

/* Stops every loop started (each closes its sockets as it ends). */
static void
stream_stop_loops(void)
{
	int i;

	atomic_store(&wl.stop, 1);
	for (i = 0; i < wl.nr; i++)
		loop_poke(&wl.loops[i]);
	for (i = 0; i < wl.nr; i++) {
		if (wl.loops[i].started)
			pthread_join(wl.loops[i].thread, NULL);
		wl.loops[i].started = 0;
	}
}

int
stream_start(struct server *srv, struct err *e)
{
	int i, rc = 0;

	wl.srv = srv;
	atomic_store(&wl.stop, 0);
	wl.nr = loops_wanted();
	wl.loops[0].first = 1;
	for (i = 0; i < wl.nr && !rc; i++)
		rc = loop_start(&wl.loops[i], e);
	if (rc) {
		stream_stop_loops();
		return rc;
	}
	hub_on_new(srv->hub, stream_wake, NULL);
	hub_on_revoke(srv->hub, stream_revoke);
	return 0;
}

void
stream_stop(void)
{
	if (!wl.loops[0].started)
		return;
	hub_on_new(wl.srv->hub, NULL, NULL);
	hub_on_revoke(wl.srv->hub, NULL);
	stream_stop_loops();
	/* waiting SSE streams are resumed so the server can close them,
	 * and no pass may still be resuming one as it does */
	sse_resume_all();
	pthread_mutex_lock(&wait_mu);
	while (resuming)
		pthread_cond_wait(&resumed_cv, &wait_mu);
	pthread_mutex_unlock(&wait_mu);
	pthread_mutex_lock(&revoked_mu);
	strvec_clear(&revoked);
	pthread_mutex_unlock(&revoked_mu);
}

/*
 * The messages a client sends (docs/api.md, "WebSocket"), in the
 * envelope of the OpenViber protocol: {"type", "id", "timestamp",
 * "payload"}. The fields of a command may sit in payload or beside
 * type; baton's own names and OpenViber's are both taken.
 */

/* A message's field: beside type, else in its payload. */
static json_t *
field(json_t *m, const char *key)
{
	json_t *v = json_object_get(m, key);

	return v ? v : json_object_get(json_object_get(m, "payload"), key);
}

static const char *
field_str(json_t *m, const char *key)
{
	return json_string_value(field(m, key));
}

/* Sets why (the protocol_error's message) when the envelope is bad. */
static int
envelope_bad(json_t *m, char *why, size_t len)
{
	json_t *id = json_object_get(m, "id"),
	       *ts = json_object_get(m, "timestamp"),
	       *pl = json_object_get(m, "payload");

	if (!json_is_object(m))
		snprintf(why, len, "a message is a JSON object: {\"type\", "
				   "\"id\", \"timestamp\", \"payload\"}");
	else if (!json_is_string(json_object_get(m, "type")) ||
		 !*json_string_value(json_object_get(m, "type")))
		snprintf(why, len, "the message has no \"type\" (a string "
				   "such as \"task:submit\")");
	else if (id && !json_is_string(id) && !json_is_integer(id))
		snprintf(why, len, "\"id\" must be a string or a number");
	else if (ts && (!json_is_string(ts) ||
			time_parse_iso(json_string_value(ts)) <= 0))
		snprintf(why, len, "\"timestamp\" must be an ISO 8601 time");
	else if (pl && !json_is_object(pl))
		snprintf(why, len, "\"payload\" must be an object");
	else
		return 0;
	return 1;
}

/* A task id (7, "7", "t7") of the message's task or task_id, or 0. */
static int64_t
task_of(json_t *m)
{
	json_t *t = field(m, "task_id");

	if (!t)
		t = field(m, "task");
	if (json_is_integer(t))
		return json_integer_value(t) > 0 ? json_integer_value(t) : 0;
	return json_is_string(t) ? sched_task_ref(json_string_value(t)) : 0;
}

/*
 * The body of a task:submit: the "task" object, else the payload, else
 * the message itself without its envelope. OpenViber's "goal" is the
 * title when there is none; the idempotency key may sit anywhere.
 */
static json_t *
submit_body(json_t *m)
{
	json_t *t = json_object_get(m, "task"), *b, *key;

	if (json_is_object(t))
		b = json_copy(t);
	else if (json_is_object(json_object_get(m, "payload")))
		b = json_copy(json_object_get(m, "payload"));
	else {
		b = json_copy(m);
		json_object_del(b, "type");
		json_object_del(b, "id");
		json_object_del(b, "timestamp");
	}
	if (!json_object_get(b, "title") && json_is_string(field(m, "goal")))
		json_object_set(b, "title", field(m, "goal"));
	json_object_del(b, "goal");
	key = field(m, "idempotency_key");
	if (key && !json_object_get(b, "idempotency_key"))
		json_object_set(b, "idempotency_key", key);
	return b;
}

/* The run a message names: run, else approval_id, else its task's run. */
static int
run_of(struct ws_client *w, json_t *m, const char *key, char *out,
       size_t len)
{
	const char *run = field_str(m, key);
	int64_t task;
	char path[64];
	struct buf ans = BUF_INIT;
	json_t *t;

	if (run && *run && !strchr(run, '/'))
		return snprintf(out, len, "%s", run) < (int)len ? 0 : -1;
	task = task_of(m);
	if (!task)
		return -1;
	snprintf(path, sizeof(path), "/api/v1/tasks/%lld", (long long)task);
	if (http_call(w->srv, w->actor, w->role, "GET", path, NULL, 0, &ans) != 200) {
		buf_release(&ans);
		return -1;
	}
	t = json_loadb(ans.ptr, ans.len, 0, NULL);
	buf_release(&ans);
	run = json_string_value(json_object_get(t, "run"));
	if (run)
		snprintf(out, len, "%s", run);
	json_decref(t);
	return run ? 0 : -1;
}

/*
 * The REST route a command stands for, its path and body; -1 when the
 * type is not a command or a field it needs is missing.
 */
static int
command_route(struct ws_client *w, json_t *m, const char *type, char *path,
	      size_t len, json_t **body)
{
	static const char *const run_verbs[] = { "pause", "resume", "abort",
						 "steer" };
	char run[256];
	int64_t task = task_of(m);
	size_t i;

	*body = NULL;
	if (!strcmp(type, "task:submit")) {
		snprintf(path, len, "/api/v1/tasks");
		*body = submit_body(m);
		return 0;
	}
	if (!strcmp(type, "task:stop")) {
		if (task)
			snprintf(path, len, "/api/v1/tasks/%lld/cancel",
				 (long long)task);
		else if (!run_of(w, m, "run", run, sizeof(run)))
			snprintf(path, len, "/api/v1/runs/%s/abort", run);
		else
			return -1;
		return 0;
	}
	if (!strcmp(type, "task:message")) {
		const char *text = field_str(m, "message");

		if (run_of(w, m, "run", run, sizeof(run)))
			return -1;
		snprintf(path, len, "/api/v1/runs/%s/steer", run);
		*body = json_pack("{s:s?, s:s}", "text",
				  text ? text : field_str(m, "text"), "mode",
				  field_str(m, "injection_mode") ?
					  field_str(m, "injection_mode") :
					  "followup");
		return 0;
	}
	if (!strcmp(type, "approval:response")) {
		json_t *ok = field(m, "approved");
		const char *why = field_str(m, "reason");

		if (!json_is_boolean(ok) ||
		    run_of(w, m, "approval_id", run, sizeof(run)))
			return -1;
		snprintf(path, len, "/api/v1/approvals/%s", run);
		*body = json_pack("{s:s, s:s?}", "decision",
				  json_is_true(ok) ? "approve" : "reject",
				  "guidance", why);
		return 0;
	}
	if (!strcmp(type, "approval:decide")) {
		if (run_of(w, m, "run", run, sizeof(run)))
			return -1;
		snprintf(path, len, "/api/v1/approvals/%s", run);
		*body = json_copy(json_is_object(json_object_get(m, "payload")) ?
					  json_object_get(m, "payload") :
					  m);
		return 0;
	}
	for (i = 0; i < ARRAY_SIZE(run_verbs); i++) {
		if (strncmp(type, "run:", 4) || strcmp(type + 4, run_verbs[i]))
			continue;
		if (run_of(w, m, "run", run, sizeof(run)))
			return -1;
		snprintf(path, len, "/api/v1/runs/%s/%s", run, run_verbs[i]);
		*body = json_copy(json_is_object(json_object_get(m, "payload")) ?
					  json_object_get(m, "payload") :
					  m);
		return 0;
	}
	return -1;
}

/* The message's "id" on its answer, and the answer sent and freed. */
static void
ws_answer(struct ws_client *w, json_t *m, json_t *ans)
{
	char *text;

	if (json_object_get(m, "id"))
		json_object_set(ans, "id", json_object_get(m, "id"));
	text = json_dumps(ans, JSON_COMPACT);
	ws_send(w, text, strlen(text));
	free(text);
	json_decref(ans);
}

/*
 * health:ping: the server's time and, from the client's (an ISO 8601
 * time or epoch milliseconds), how far apart the two clocks and the
 * wire put them.
 */
static json_t *
health_pong(json_t *m)
{
	json_t *ct = field(m, "client_time");
	int64_t now = time_now_ms(), then = -1;
	char ts[40];

	if (json_is_integer(ct))
		then = json_integer_value(ct);
	else if (json_is_string(ct) &&
		 time_parse_iso(json_string_value(ct)) > 0)
		then = time_parse_iso(json_string_value(ct));
	time_fmt_iso(now, ts, sizeof(ts));
	return json_pack("{s:s, s:s, s:o}", "type", "health:pong",
			 "server_time", ts, "latency_ms",
			 then >= 0 ? json_integer(now - then) : json_null());
}

/*
 * health:status (OpenViber's status:viber): what GET /api/v1/health
 * says, the tasks by status, and whether work is going on.
 */
static json_t *
health_status(struct ws_client *w)
{
	struct buf ans = BUF_INIT;
	json_t *h, *t, *counts, *cur = json_null(), *it;
	int64_t running;
	size_t i;

	http_call(w->srv, w->actor, w->role, "GET", "/api/v1/health", NULL, 0, &ans);
	h = json_loadb(ans.ptr ? ans.ptr : "", ans.len, 0, NULL);
	buf_reset(&ans);
	http_call(w->srv, w->actor, w->role, "GET", "/api/v1/tasks", NULL, 0, &ans);
	t = json_loadb(ans.ptr ? ans.ptr : "", ans.len, 0, NULL);
	buf_release(&ans);
	counts = json_object_get(t, "counts");
	running = json_integer_value(json_object_get(counts, "running"));
	json_array_foreach(json_object_get(t, "tasks"), i, it)
		if (json_is_string(json_object_get(it, "status")) &&
		    !strcmp(json_string_value(json_object_get(it, "status")),
			    "running")) {
			cur = json_incref(json_object_get(it, "id"));
			break;
		}
	it = json_pack("{s:s, s:s, s:o, s:O?, s:O?}", "type", "health:status",
		       "status",
		       !h ? "error" : running ? "running" : "idle",
		       "current_task_id", cur, "counts", counts, "health", h);
	json_decref(h);
	json_decref(t);
	return it;
}

/*
 * An answer {"type": "ack", "ok": false, "status": 400, "error": {code,
 * message}}: the status a route would have answered the same mistake
 * with, as every other ack has its status.
 */
static json_t *
refused(const char *code, const char *msg)
{
	return json_pack("{s:s, s:b, s:i, s:{s:s, s:s}}", "type", "ack",
			 "ok", 0, "status", 400, "error", "code", code,
			 "message", msg);
}

/* Runs one command and answers with an ack (or the answer it asks). */
static void
ws_command(struct ws_client *w, const char *data, size_t len)
{
	json_error_t je;
	/* a key given twice is refused, as in a request's body */
	json_t *m = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je),
	       *body = NULL, *ack, *res;
	const char *type;
	struct buf out = BUF_INIT;
	char path[512], why[200], *btext = NULL;
	int status;

	if (!m && json_error_code(&je) == json_error_duplicate_key) {
		char *msg = xasprintf("the command gives the key %s more "
				      "than once",
				      http_duplicate_key(&je));

		ack = refused("bad_request", msg);
		free(msg);
		goto send;
	}
	if (!m || envelope_bad(m, why, sizeof(why))) {
		ack = refused("protocol_error",
			      m ? why :
				  "the message is not JSON: a message is a "
				  "JSON object {\"type\", \"id\", "
				  "\"timestamp\", \"payload\"}");
		goto send;
	}
	type = json_string_value(json_object_get(m, "type"));
	if (!strcmp(type, "health:ping")) {
		ws_answer(w, m, health_pong(m));
		goto out;
	}
	if (!strcmp(type, "health:status") || !strcmp(type, "status:viber")) {
		ws_answer(w, m, health_status(w));
		goto out;
	}
	if (command_route(w, m, type, path, sizeof(path), &body)) {
		char *msg = xasprintf(
		    "'%s' is no command, or lacks what it needs: expected "
		    "task:submit, task:stop (task or run), task:message "
		    "(task or run, message), approval:response (approval_id, "
		    "approved true or false), approval:decide, run:pause, "
		    "run:resume, run:abort or run:steer (run), health:ping, "
		    "health:status",
		    type);

		ack = refused("bad_request", msg);
		free(msg);
		goto send;
	}
	btext = body ? json_dumps(body, JSON_COMPACT) : NULL;
	status = http_call(w->srv, w->actor, w->role, "POST", path, btext,
			   btext ? strlen(btext) : 0, &out);
	res = json_loadb(out.ptr ? out.ptr : "", out.len, 0, NULL);
	ack = json_pack("{s:s, s:b, s:i}", "type", "ack", "ok", status < 300,
			"status", status);
	if (status >= 300 && res && json_object_get(res, "error"))
		json_object_set(ack, "error", json_object_get(res, "error"));
	else if (res)
		json_object_set(ack, "result", res);
	json_decref(res);
send:
	ws_answer(w, m, ack);
out:
	free(btext);
	json_decref(body);
	json_decref(m);
	buf_release(&out);
}
