/*
 * The live stream on its two transports (docs/api.md, "The live
 * stream"): Server-Sent Events at /api/v1/events and a WebSocket at
 * /api/v1/ws. Both read the hub from a cursor (the last seq the client
 * has), so a client that reconnects with its cursor gets every event
 * after it exactly once, then the live ones.
 *
 * An SSE client keeps its civetweb thread; a WebSocket client has a
 * pusher thread of its own (civetweb's thread reads its frames), and its
 * commands are run through the REST routes (http_call), so both doors
 * check and do exactly the same.
 */
#include "util/compat.h"

#include <civetweb.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "core/config.h"
#include "core/run.h"
#include "sched/sched.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#undef LOG_MODULE
#define LOG_MODULE "stream"

#define BATCH 64
/* A comment or ping this often keeps proxies and idle clients awake. */
#define KEEPALIVE_MS 15000
/* How often a WebSocket pusher checks that its client is still there. */
#define WS_CHECK_MS 1000

static atomic_int clients;

int
stream_clients(void)
{
	return atomic_load(&clients);
}

/*
 * How many live streams may be open at once. Each holds one of
 * server.threads for as long as it lives, so streams alone could leave
 * no thread to answer a request (the dashboard's page, the CLI's API
 * calls): an eighth of the threads, and at least 2, are kept for
 * requests. civetweb cannot tell peers apart before a request, and every
 * local client is the one peer 127.0.0.1, so the cap is on all streams.
 */
static int
streams_max(const struct server *srv)
{
	int threads = srv->cfg->server.threads, keep = threads / 8;

	return threads - (keep < 2 ? 2 : keep);
}

/*
 * Whether one more stream may open (counted in clients when *take); 0
 * with a 503 answered when the streams are at their cap.
 */
static int
stream_admit(struct req *rq, int take)
{
	int max = streams_max(rq->srv), n = atomic_load(&clients);

	for (;;) {
		if (n >= max) {
			http_error(rq, 503, "too_many_streams",
				   "%d live streams are open, as many as "
				   "server.threads (%d) allows while keeping "
				   "threads for requests: close one, or raise "
				   "server.threads",
				   n, rq->srv->cfg->server.threads);
			return 0;
		}
		if (!take || atomic_compare_exchange_weak(&clients, &n, n + 1))
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
	if (query && mg_get_var(query, strlen(query), "task", v, sizeof(v)) >= 0) {
		c->f.task_id = sched_task_ref(v);
		if (!c->f.task_id) {
			snprintf(msg, len, "task must be a task id, not '%s'", v);
			return -1;
		}
	}
	if (query && mg_get_var(query, strlen(query), "run", v, sizeof(v)) >= 0) {
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
	if ((query && mg_get_var(query, strlen(query), "after", v, sizeof(v)) >= 0) ||
	    (last_id && snprintf(v, sizeof(v), "%s", last_id) > 0)) {
		c->after = strtoll(v, &end, 10);
		if (*end || c->after < 0) {
			snprintf(msg, len, "after must be an event seq, not '%s'",
				 v);
			return -1;
		}
	}
	return 0;
}

/* ---- Server-Sent Events -------------------------------------------------- */

void
stream_sse(struct req *rq)
{
	struct hub_msg msgs[BATCH];
	struct cursor c;
	struct buf out = BUF_INIT;
	char why[300];
	int n, i, ok = 1;

	if (read_cursor(rq->srv, rq->store, rq->query,
			mg_get_header(rq->conn, "Last-Event-ID"), &c, why,
			sizeof(why))) {
		http_error(rq, strncmp(why, "no run", 6) ? 400 : 404,
			   strncmp(why, "no run", 6) ? "bad_request" :
						       "not_found",
			   "%s", why);
		return;
	}
	if (!stream_admit(rq, 1))
		return;
	rq->status = 200;
	mg_printf(rq->conn, "HTTP/1.1 200 OK\r\n"
			    "Content-Type: text/event-stream\r\n"
			    "Cache-Control: no-store\r\n"
			    "X-Accel-Buffering: no\r\n"
			    "Connection: close\r\n\r\n"
			    "retry: 2000\n\n");
	while (ok) {
		n = hub_read(rq->srv->hub, rq->store, c.after, &c.f, msgs,
			     BATCH, KEEPALIVE_MS);
		if (n < 0)
			break;
		buf_reset(&out);
		if (n == 0)
			buf_adds(&out, ": ping\n\n");
		for (i = 0; i < n; i++) {
			buf_addf(&out, "id: %lld\nevent: %s\ndata: %s\n\n",
				 (long long)msgs[i].seq, msgs[i].type,
				 msgs[i].json);
			c.after = msgs[i].seq;
			hub_msg_release(&msgs[i]);
		}
		ok = mg_write(rq->conn, out.ptr, out.len) == (int)out.len;
	}
	atomic_fetch_sub(&clients, 1);
	buf_release(&out);
}

/* ---- WebSocket ----------------------------------------------------------- */

struct ws_client {
	struct server *srv;
	struct mg_connection *conn;
	struct cursor c;
	pthread_t pusher;
	atomic_int stop;
	int started;
	/* a fragmented message so far (civetweb's reading thread only) */
	struct buf msg;
	int msg_opcode; /* its first frame's opcode; 0: none under way */
};

static int
ws_send(struct ws_client *w, const char *text, size_t len)
{
	return mg_websocket_write(w->conn, MG_WEBSOCKET_OPCODE_TEXT, text,
				  len) > 0;
}

static void *
ws_push(void *arg)
{
	struct ws_client *w = arg;
	struct hub_msg msgs[BATCH];
	struct store *s = NULL;
	struct err e = ERR_INIT;
	int64_t quiet = 0;
	int n, i;

	if (store_open(w->srv->store_spec, &s, &e))
		log_error("cannot open the store: %s", e.msg);
	while (!atomic_load(&w->stop)) {
		n = hub_read(w->srv->hub, s, w->c.after, &w->c.f, msgs, BATCH,
			     WS_CHECK_MS);
		if (n < 0)
			break;
		if (n == 0 && (quiet += WS_CHECK_MS) >= KEEPALIVE_MS) {
			quiet = 0;
			if (mg_websocket_write(w->conn, MG_WEBSOCKET_OPCODE_PING,
					       "", 0) < 0)
				break;
		}
		for (i = 0; i < n; i++) {
			if (!atomic_load(&w->stop) &&
			    !ws_send(w, msgs[i].json, strlen(msgs[i].json)))
				atomic_store(&w->stop, 1);
			w->c.after = msgs[i].seq;
			hub_msg_release(&msgs[i]);
		}
		if (n > 0)
			quiet = 0;
	}
	store_close(s);
	return NULL;
}

static int
ws_connect(const struct mg_connection *cconn, void *arg)
{
	struct mg_connection *conn = (struct mg_connection *)cconn;
	const struct mg_request_info *ri = mg_get_request_info(conn);
	struct req rq = { .srv = arg, .conn = conn,
			  .method = ri->request_method,
			  .path = ri->local_uri, .query = ri->query_string,
			  .body = BUF_INIT };

	if (http_guard(&rq))
		goto refused;
	if (!http_authorized(&rq, 1)) {
		http_error(&rq, 401, "unauthorized",
			   "a token is required: ?access_token=TOKEN");
		goto refused;
	}
	/* counted once it is ready (ws_ready); two that race here may
	 * both pass, which overshoots the cap by that race, never by more */
	if (!stream_admit(&rq, 0))
		goto refused;
	return 0;
refused:
	metrics_count(rq.status);
	return 1;
}

static void
ws_ready(struct mg_connection *conn, void *arg)
{
	const struct mg_request_info *ri = mg_get_request_info(conn);
	struct ws_client *w = xcalloc(1, sizeof(*w));
	char why[300];

	w->srv = arg;
	w->conn = conn;
	w->msg = (struct buf)BUF_INIT;
	mg_set_user_connection_data(conn, w);
	if (read_cursor(w->srv, http_thread_store(w->srv), ri->query_string,
			NULL, &w->c, why, sizeof(why))) {
		json_t *j = json_pack("{s:s, s:{s:s, s:s}}", "type", "error",
				      "error", "code", "bad_request", "message",
				      why);
		char *text = json_dumps(j, JSON_COMPACT);

		ws_send(w, text, strlen(text));
		free(text);
		json_decref(j);
		mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE,
				   "", 0);
		return;
	}
	atomic_fetch_add(&clients, 1);
	w->started = !pthread_create(&w->pusher, NULL, ws_push, w);
}

/* The REST route a command stands for. */
static int
command_route(json_t *m, const char *type, char *path, size_t len,
	      json_t **body)
{
	const char *run = json_string_value(json_object_get(m, "run"));
	json_t *task = json_object_get(m, "task");
	static const char *const run_verbs[] = { "pause", "resume", "abort",
						 "steer" };
	size_t i;

	*body = NULL;
	if (!strcmp(type, "task:submit")) {
		snprintf(path, len, "/api/v1/tasks");
		*body = json_incref(json_is_object(task) ? task : m);
		return 0;
	}
	if (!strcmp(type, "task:stop")) {
		if (json_is_integer(task))
			snprintf(path, len, "/api/v1/tasks/%lld/cancel",
				 (long long)json_integer_value(task));
		else if (json_is_string(task))
			snprintf(path, len, "/api/v1/tasks/%s/cancel",
				 json_string_value(task));
		else if (run)
			snprintf(path, len, "/api/v1/runs/%s/abort", run);
		else
			return -1;
		return 0;
	}
	if (!run || !*run || strchr(run, '/'))
		return -1;
	if (!strcmp(type, "approval:decide")) {
		snprintf(path, len, "/api/v1/approvals/%s", run);
		*body = json_incref(m);
		return 0;
	}
	for (i = 0; i < ARRAY_SIZE(run_verbs); i++) {
		if (strncmp(type, "run:", 4) || strcmp(type + 4, run_verbs[i]))
			continue;
		snprintf(path, len, "/api/v1/runs/%s/%s", run, run_verbs[i]);
		*body = json_incref(m);
		return 0;
	}
	return -1;
}

/* Runs one command and answers with an ack. */
static void
ws_command(struct ws_client *w, const char *data, size_t len)
{
	json_error_t je;
	/* a key given twice is refused, as in a request's body */
	json_t *m = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je),
	       *body = NULL, *ack, *res;
	const char *type = json_string_value(json_object_get(m, "type"));
	struct buf out = BUF_INIT;
	char path[512], *text, *btext = NULL;
	int status;

	ack = json_pack("{s:s, s:O?}", "type", "ack", "id",
			json_object_get(m, "id"));
	if (!m && json_error_code(&je) == json_error_duplicate_key) {
		json_object_set_new(ack, "ok", json_false());
		json_object_set_new(
			ack, "error",
			json_pack("{s:s, s:s++}", "code", "bad_request",
				  "message", "the command gives the key ",
				  http_duplicate_key(&je), " more than once"));
		goto send;
	}
	if (!m || !type || command_route(m, type, path, sizeof(path), &body)) {
		json_object_set_new(ack, "ok", json_false());
		json_object_set_new(
			ack, "error",
			json_pack("{s:s, s:s}", "code", "bad_request", "message",
				  "expected a JSON command: task:submit, "
				  "task:stop, approval:decide, run:pause, "
				  "run:resume, run:abort or run:steer (with "
				  "run or task)"));
		goto send;
	}
	btext = body ? json_dumps(body, JSON_COMPACT) : NULL;
	status = http_call(w->srv, "POST", path, btext,
			   btext ? strlen(btext) : 0, &out);
	res = json_loadb(out.ptr ? out.ptr : "", out.len, 0, NULL);
	json_object_set_new(ack, "ok", json_boolean(status < 300));
	json_object_set_new(ack, "status", json_integer(status));
	if (status >= 300 && res && json_object_get(res, "error"))
		json_object_set(ack, "error", json_object_get(res, "error"));
	else if (res)
		json_object_set(ack, "result", res);
	json_decref(res);
send:
	text = json_dumps(ack, JSON_COMPACT);
	ws_send(w, text, strlen(text));
	free(text);
	free(btext);
	json_decref(ack);
	json_decref(body);
	json_decref(m);
	buf_release(&out);
}

/* Close codes of RFC 6455, section 7.4.1. */
#define WS_CLOSE_PROTOCOL_ERROR 1002
#define WS_CLOSE_TOO_BIG	1009
/* A control frame's payload is at most this (RFC 6455, section 5.5). */
#define WS_CONTROL_MAX 125

/* Says goodbye with code; returns 0, which makes civetweb close. */
static int
ws_refuse(struct mg_connection *conn, unsigned code)
{
	char payload[2] = { (char)(code >> 8), (char)(code & 0xff) };

	mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, payload,
			   sizeof(payload));
	return 0;
}

/*
 * One frame from the client. A message may come in fragments: a text
 * (or binary) frame without FIN, continuation frames, the last with FIN;
 * control frames (close, ping, pong) may come between them and are never
 * fragmented themselves. The fragments are put together, up to
 * server.max_body_kb (1009 past it), and only the whole message is read
 * as a command. Anything else RFC 6455 forbids closes with 1002: a
 * continuation with no message under way, a new message inside one, a
 * fragmented or oversized control frame, reserved bits or opcodes.
 *
 *   TEXT fin ──────────────────────────────▶ command
 *   TEXT !fin ─▶ CONT !fin ... ─▶ CONT fin ─▶ command
 *                  ▲  PING / PONG between ─┘
 *
 * civetweb unmasks the payload before this is called and does not say
 * whether the frame was masked (its handler gets the first byte only):
 * an unmasked client frame cannot be told apart here.
 */
static int
ws_data(struct mg_connection *conn, int bits, char *data, size_t len,
	void *arg)
{
	struct ws_client *w = mg_get_user_connection_data(conn);
	int opcode = bits & 0xf, fin = bits & 0x80;

	(void)arg;
	if (!w)
		return 1;
	if (bits & 0x70) /* RSV1-3: no extension was agreed */
		return ws_refuse(conn, WS_CLOSE_PROTOCOL_ERROR);
	if (opcode >= MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE) {
		if (!fin || len > WS_CONTROL_MAX ||
		    opcode > MG_WEBSOCKET_OPCODE_PONG)
			return ws_refuse(conn, WS_CLOSE_PROTOCOL_ERROR);
		if (opcode == MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE)
			return 0;
		if (opcode == MG_WEBSOCKET_OPCODE_PING)
			mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_PONG, data,
					   len);
		return 1;
	}
	if (opcode == MG_WEBSOCKET_OPCODE_CONTINUATION) {
		if (!w->msg_opcode)
			return ws_refuse(conn, WS_CLOSE_PROTOCOL_ERROR);
	} else if (w->msg_opcode || (opcode != MG_WEBSOCKET_OPCODE_TEXT &&
				     opcode != MG_WEBSOCKET_OPCODE_BINARY)) {
		return ws_refuse(conn, WS_CLOSE_PROTOCOL_ERROR);
	} else {
		w->msg_opcode = opcode;
	}
	if (len > w->srv->max_body || w->msg.len > w->srv->max_body - len)
		return ws_refuse(conn, WS_CLOSE_TOO_BIG);
	buf_add(&w->msg, data, len);
	if (!fin)
		return 1;
	/* a binary message is no command: it is dropped, as it always was */
	if (w->msg_opcode == MG_WEBSOCKET_OPCODE_TEXT)
		ws_command(w, w->msg.ptr, w->msg.len);
	buf_reset(&w->msg);
	w->msg_opcode = 0;
	return 1;
}

static void
ws_close(const struct mg_connection *conn, void *arg)
{
	struct ws_client *w = mg_get_user_connection_data(conn);

	(void)arg;
	if (!w)
		return;
	atomic_store(&w->stop, 1);
	if (w->started) {
		pthread_join(w->pusher, NULL);
		atomic_fetch_sub(&clients, 1);
	}
	buf_release(&w->msg);
	free(w);
}

void
stream_ws_register(void *ctx, struct server *srv)
{
	mg_set_websocket_handler(ctx, "/api/v1/ws", ws_connect, ws_ready,
				 ws_data, ws_close, srv);
}
