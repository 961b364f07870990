/*
 * Inside the HTTP process (server.h): the request plumbing shared by the
 * route handlers, the event hub that feeds the live streams, the
 * webhooks and the metrics.
 */
#ifndef BATON_SERVER_SERVER_INT_H
#define BATON_SERVER_SERVER_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "server/server.h"
#include "util/buf.h"

struct config;
struct err;
struct event;
struct hub;
struct MHD_Connection;
struct MHD_Response;
struct notifier;
struct store;
struct workspace;

/* What every handler can reach; one per process, read-only once built. */
struct server {
	const struct workspace *ws;
	const struct config *cfg;
	const char *store_spec;
	const char *token;
	char *answer_key; /* signs answer links; NULL: no server.public_url */
	size_t max_body;
	struct hub *hub;
	int64_t started_ms;
	/*
	 * Who may ask (http_guard): the HOST of serve's HOST:PORT as given
	 * ("127.0.0.1", "[::1]", "box.lan", "0.0.0.0") and the port it
	 * listens on (port 0's pick).
	 */
	char listen_host[256];
	int port;
	/* connections the descriptor limit leaves room for (http.c) */
	unsigned max_conns;
	int tls; /* it speaks HTTPS (server.tls) */
};

/* ---- http.c: requests and responses ------------------------------------ */

struct server_opts;

/* A server process's body: reports on ready_fd, never returns. */
typedef void server__main_fn(const struct server_opts *o, int ready_fd);

/*
 * Forks a process named comm ("baton http", as ps shows it) that dies
 * with its parent and runs fn(o, ready_fd); fn writes "OK DETAIL\n" to
 * ready_fd once it works or "ERR WHY\n" before it exits. Returns 0 once
 * OK came (*pid set, DETAIL in detail), or the reason in e (the process
 * reaped, *pid 0). what names the process in messages ("HTTP server").
 */
int server__fork_ready(server__main_fn *fn, const struct server_opts *o,
		       const char *comm, const char *what, pid_t *pid,
		       char *detail, size_t len, struct err *e);

/* In a process of server__fork_ready: waits for SIGTERM, SIGINT or
 * SIGHUP, which only this wait takes. */
void server__await_stop(void);

struct req {
	struct server *srv;
	struct MHD_Connection *conn; /* NULL in http_call */
	const char *method, *path, *query; /* query: NULL when none */
	const char *params[3];	/* the {id} parts of the route, in order */
	struct store *store;	/* this request thread's own connection */
	struct buf body;	/* the request body, read before the handler runs */
	int body_ready;	/* body holds it (0: it was over the limit) */
	struct buf *capture;	/* http_call: the answer goes here */
	int status;		/* what was sent, for the log and metrics */
	/* who asks (http_authenticate): the token's name and role */
	char actor[72];
	enum api_role role;
};

/* A route handler; it sends exactly one response (or keeps the stream). */
typedef void route_fn(struct req *rq);

/*
 * The route takes its token as ?access_token= too: a browser can set no
 * header on an EventSource. Only the live stream has it; elsewhere a
 * token in the URL would end up in logs and histories for nothing.
 */
#define ROUTE_F_QUERY_TOKEN 0x1
/*
 * The route proves its requests itself and takes no bearer token: the
 * forge webhook, signed by GitHub (forgehook.c). Its Host need not name
 * this server either, as a delivery comes through a proxy or tunnel
 * under a public name; the Origin check stays.
 */
#define ROUTE_F_SIGNED 0x2
/*
 * The route's path is its own proof, a signed answer link (answer.c):
 * no bearer token, and any Host and Origin, as the link is opened under
 * server.public_url from a chat message.
 */
#define ROUTE_F_LINK 0x4

struct route {
	const char *method;  /* "GET", "POST" */
	const char *pattern; /* "/api/v1/runs/{id}/events" */
	route_fn *fn;
	const char *summary; /* one line, as docs/api.md has it */
	unsigned flags;	     /* ROUTE_F_* */
	/*
	 * The role a request needs (server.h, enum api_role): ROLE_VIEWER
	 * to read, ROLE_OPERATOR to decide and steer, ROLE_ADMIN to
	 * configure, ROLE_PUBLIC for a route that proves its requests
	 * itself (a signed webhook or link: no bearer token). Left out it
	 * is ROLE_UNSET, which needs admin, and t_roles fails.
	 */
	enum api_role role;
};

/* The REST routes (api.c), for the router and GET /api/v1. */
extern const struct route api_routes[];
extern const size_t api_nr_routes;

/* Sends status with a JSON body; consumes body (a jansson json_t *). */
void http_json(struct req *rq, int status, void *body);
/*
 * Sends {"error": {"code": code, "message": "..."}} with status: codes
 * are words such as bad_request, unauthorized, not_found, conflict,
 * illegal_transition, too_large, internal.
 */
void http_error(struct req *rq, int status, const char *code,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/*
 * http_error with a message of any length and more fields: the members
 * of extra (a jansson object, consumed; NULL: none) join code and
 * message in the error object, e.g. the "changes" of config_drift.
 */
void http_error_with(struct req *rq, int status, const char *code,
		     const char *msg, void *extra);
/* An err from a lower layer as the fitting status and code. */
void http_fail(struct req *rq, const struct err *e);
/* Sends one of the dashboard's files, with its security policy. */
void http_page(struct req *rq, const char *type, const char *text,
	       size_t len);
/* Sends an HTML page (answer links) with a policy that runs no script. */
void http_html(struct req *rq, int status, const char *text, size_t len);
/* Sends text with a content type. */
void http_text(struct req *rq, int status, const char *type, const char *text,
	       size_t len);
/*
 * Reads the raw body into rq->body, bounded by srv->max_body: 413 sent
 * and -1 returned when bigger; 0 otherwise (again: nothing to do).
 */
int http_body(struct req *rq);
/*
 * Reads the body (bounded by srv->max_body: 413 sent and -1 returned
 * when bigger) and parses it as a JSON object: 400 sent and -1 returned
 * when it is not one. *out is a json_t * the caller decrefs.
 */
int http_body_json(struct req *rq, void **out);

/*
 * The key a parse with JSON_REJECT_DUPLICATES found twice, as jansson
 * quotes it ("title" with its quotes), cut out of je->text: borrowed
 * until je is used again.
 */
struct json_error_t;
const char *http_duplicate_key(struct json_error_t *je);
/*
 * http_body_json for a body that may be left out: an empty one (or only
 * white space) is no body, *out NULL and 0 returned.
 */
int http_body_json_opt(struct req *rq, void **out);
/* The value of query parameter name, copied into out; 0 when absent. */
int http_query(const struct req *rq, const char *name, char *out, size_t len);
/*
 * The value of name in query (a=1&b=x%20y, no '?'), decoded, into out:
 * its length, -1 when absent or longer than len allows.
 */
int http_query_var(const char *query, const char *name, char *out, size_t len);
/* The request header name (any case); NULL when absent. */
const char *http_header(const struct req *rq, const char *name);
/* Adds the headers every answer carries: nothing cached, nothing sniffed. */
void http_common_headers(struct MHD_Response *r);
/*
 * The request's connection becomes a live stream: the request deadline
 * no longer applies to it.
 */
void http_streaming(struct req *rq);
/*
 * Whether the request is this server's to answer, before its token is
 * looked at: its Host names the server (the address it listens on, or
 * localhost, 127.0.0.1 or [::1], with its port), else 421, so a page
 * whose own name was rebound to this address cannot read it; and its
 * Origin, when it has one, is this server's (http://HOST:PORT of such a
 * Host), else 403, so a page elsewhere cannot drive it. Sends the error
 * and returns -1 when it is not; 0 when it is.
 */
int http_guard(struct req *rq);
/* What http_authenticate found. */
enum {
	AUTH_OK = 0,
	AUTH_NONE,    /* no token */
	AUTH_UNKNOWN, /* a token nobody issued */
	AUTH_REVOKED, /* a revoked named token (rq->actor names it) */
	AUTH_FAILED,  /* the token store could not be read */
};
/*
 * Who the request's token is: Authorization: Bearer TOKEN, or with
 * query_token (the live stream's routes) ?access_token=TOKEN too. On
 * AUTH_OK rq->actor and rq->role are set: the repository's token is the
 * admin "owner", a named token (rq->store's api_tokens) its own name
 * and role, its last use recorded (at most once a minute).
 */
int http_authenticate(struct req *rq, int query_token);
/*
 * Whether rq's role is enough for route r: 0 when it is, else 403 sent
 * (with the role needed) and -1.
 */
int http_permit(struct req *rq, const struct route *r);
/*
 * Runs a route in-process, as if requested (the WebSocket's commands
 * use the REST routes this way) for actor with role (the WebSocket's
 * token: the route's role is checked as for a request): returns the
 * status, the answer's body in out.
 */
int http_call(struct server *srv, const char *actor, enum api_role role,
	      const char *method, const char *path, const char *body,
	      size_t len, struct buf *out);
/* This thread's store connection (opened on first use); NULL on failure. */
struct store *http_thread_store(struct server *srv);

/* ---- auth.c: the token routes ---------------------------------------- */

struct api_token;
/* One token as the API shows it (a json_t *; never the secret). */
struct json_t *api_token_json(const struct api_token *t);
/* GET /api/v1/tokens, POST /api/v1/tokens, POST /api/v1/tokens/{name}/revoke */
void tokens_list(struct req *rq);
void tokens_create(struct req *rq);
void token_revoke(struct req *rq);

/* ---- hub.c: the live event feed ---------------------------------------- */

/*
 * One event as the live protocol sends it: the baton event plus the
 * protocol message type it maps to (task:started, task:progress,
 * task:delta, task:completed, task:error, task:stopped,
 * approval:requested, approval:decided, or "event" for the rest).
 */
struct hub_msg {
	int64_t seq;
	int64_t task_id;
	const char *run_id; /* NULL when the event is about a task only */
	const char *type;   /* the protocol type (static) */
	/* the message as an SSE event ("id: SEQ\nevent: TYPE\ndata:
	   JSON\n\n"), and its JSON line inside it (not NUL-terminated) */
	const char *sse, *json;
	size_t sse_len, json_len;
	/* what the strings live in: made once per event, shared by every
	   copy hub_read hands out (a reference each), never changed */
	struct hub_text *text;
};

struct hub_filter {
	int64_t task_id; /* 0: any */
	const char *run_id; /* NULL: any */
};

/* Starts the hub thread following store_spec's event log from now. */
int hub_start(const char *store_spec, struct notifier *n, struct hub **out,
	      struct err *e);
void hub_stop(struct hub *h);
typedef void hub_wake_fn(void *arg);
/*
 * Calls fn(arg) on the hub's thread each time new events are in the
 * ring (after hub_read's waiters are woken); fn must not block, nor call
 * into the hub. Set it once, before streams open.
 */
void hub_on_new(struct hub *h, hub_wake_fn *fn, void *arg);
typedef void hub_revoke_fn(const char *token_name);
/*
 * Calls fn(name) on the hub's thread for each revoked token it finds
 * when it looks at the store (each time a commit wakes it; once a
 * second on PostgreSQL), revoked by this process or any other, again at
 * each look: fn tells the new from the known. Same rules as hub_on_new.
 */
void hub_on_revoke(struct hub *h, hub_revoke_fn *fn);
/* The seq of the newest event the hub has seen. */
int64_t hub_last_seq(struct hub *h);
/*
 * Up to max messages after seq `after` passing f, oldest first, into
 * out[] (release each with hub_msg_release). Messages older than the
 * hub's memory come from s. When there are none it waits up to wait_ms
 * for new ones. Returns how many, 0 after the wait, -1 when the hub
 * stops.
 */
int hub_read(struct hub *h, struct store *s, int64_t after,
	     const struct hub_filter *f, struct hub_msg *out, int max,
	     int wait_ms);
/* Drops m's reference to its text (the last frees it). */
void hub_msg_release(struct hub_msg *m);
/* The protocol message of one event (for the WebSocket's replies). */
void hub_msg_from_event(const struct event *ev, struct hub_msg *out);
/* Counters for /metrics: stage durations and lease takeovers seen. */
void hub_metrics(struct hub *h, struct buf *out);

/* SSE and WebSocket endpoints (stream.c). */
void stream_sse(struct req *rq);
/*
 * A stream's source other than the hub: appends what is new to out and
 * returns 0 (more may come: the stream parks until stream_poke), 1
 * (finished: the stream ends once out is sent) or -1 (end now). Called
 * on libmicrohttpd's threads; must not block.
 */
typedef int stream_fill_fn(void *arg, struct buf *out);
/*
 * An SSE answer (counted and capped like the live stream, parked while
 * it has nothing to send, pinged) whose bytes come from fill; release
 * (may be NULL) frees arg when the stream ends, or at once when it
 * cannot open.
 */
void stream_sse_with(struct req *rq, stream_fill_fn *fill, void *arg,
		     void (*release)(void *arg));
/* Wakes every parked SSE stream to look for news again. */
void stream_poke(void);
/*
 * Token name was revoked: every stream it opened ends now (SSE: a last
 * "revoked" event; WebSocket: an error message and a close of code
 * 1008) and runs nothing more.
 */
void stream_revoke(const char *name);
/* GET /api/v1/ws with Upgrade: websocket (guards passed): 101 and the
 * socket joins the WebSocket loop, or an error answered. */
void stream_ws(struct req *rq);
/* Starts the WebSocket loop and hooks the streams to srv->hub. */
int stream_start(struct server *srv, struct err *e);
/* Closes every WebSocket and stops the loop. */
void stream_stop(void);
/* Live streams open now (SSE and WebSocket), for /metrics. */
int stream_clients(void);

/* ---- chat.c: chat intake (docs/chat.md) --------------------------------- */

/*
 * Starts the chat worker thread (the planner's turns, the monitor). It
 * lives as long as the HTTP process: a planner call cannot be cut short
 * cleanly, and the process's end takes the thread with it.
 */
int chat_serve_start(struct server *srv, struct err *e);
/* POST /api/v1/chat/conversations */
void chat_api_create(struct req *rq);
/* GET /api/v1/chat/conversations/{id} */
void chat_api_show(struct req *rq);
/* POST /api/v1/chat/conversations/{id}/messages */
void chat_api_message(struct req *rq);
/* GET /api/v1/chat/conversations/{id}/stream (SSE) */
void chat_api_stream(struct req *rq);
/* POST /api/v1/chat/conversations/{id}/start-execution */
void chat_api_start(struct req *rq);

/* ---- forgehook.c: GitHub's webhooks in -------------------------------- */

/* POST /api/v1/forge/webhook (ROUTE_F_SIGNED). */
void forge_webhook(struct req *rq);

/* ---- answer.c: answer links ------------------------------------------- */

/* The longest answer token taken; a longer path segment is refused. */
#define ANSWER_TOKEN_MAX 512

/* What a valid answer token says. */
struct answer_claim {
	char run[128];	   /* the run that asked */
	int64_t seq;	   /* the event that opened the question */
	char decision[16]; /* approve | reject */
	int64_t expires;   /* seconds since the epoch */
	char target[80];   /* the notify target it went to */
};

enum answer_verdict {
	ANSWER_OK,
	ANSWER_MALFORMED, /* not a token at all: too long, bad characters */
	ANSWER_FORGED,	  /* its signature does not hold */
	ANSWER_EXPIRED,
};

/*
 * A token for deciding question seq of run as decision ("approve",
 * "reject"), until expires (seconds since the epoch), sent to target:
 * base64url(payload) "." base64url(HMAC-SHA256(key, payload)). Caller
 * frees.
 */
char *answer_token_mint(const char *key, const char *run, int64_t seq,
			const char *decision, int64_t expires,
			const char *target);
/*
 * Opens token under key at time now (seconds): ANSWER_OK with *out
 * filled, or why not; the signature is checked before anything the
 * payload says, so a changed expiry or decision is FORGED.
 */
enum answer_verdict answer_token_open(const char *key, const char *token,
				      int64_t now, struct answer_claim *out);

/* GET and POST /api/v1/answers/{token} (ROUTE_F_LINK). */
void answer_page(struct req *rq);
void answer_post(struct req *rq);

/* ---- charts.c ----------------------------------------------------------- */

/*
 * GET /api/v1/stats?hours=H&days=D: queue depth and throughput per bucket
 * over the last H hours, agent tokens and cost per UTC day over the last D
 * days, all derived from the store's events (docs/api.md, "Stats").
 */
void api_stats(struct req *rq);

/* ---- metrics.c ---------------------------------------------------------- */

void metrics_page(struct req *rq);
/* Counts one answered request for /metrics. */
void metrics_count(int status);

/* ---- notify.c: webhooks ------------------------------------------------- */

/*
 * Starts the webhook deliverer when cfg has notify.webhooks (NULL
 * otherwise). It follows the event log from .baton/notify.cursor (the
 * last event it handled; at the first start, the newest event), with a
 * store connection and a thread of its own, and POSTs approval_requested,
 * run_terminal and budget_crossed notifications, signed with
 * X-Baton-Signature: sha256=HMAC(secret, body), retrying with doubling
 * backoff.
 */
struct notifier *notify_start(const struct config *cfg,
			      const struct workspace *ws,
			      const char *store_spec, struct err *e);
/* New events exist: the hub calls this; never blocks. */
void notify_poke(struct notifier *n);
/* Stops it; pending deliveries are left for the next start (cursor). */
void notify_stop(struct notifier *n);

/* ---- assets.c: the dashboard ------------------------------------------- */

/* Serves the built-in dashboard file of rq->path; 0 when there is none. */
int assets_serve(struct req *rq);

#endif
