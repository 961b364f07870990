/*
 * The HTTP process: GNU libmicrohttpd set up, one dispatcher for every
 * request (Host and Origin check, token check, body limit, route
 * match), the response helpers, and the process around it
 * (server_spawn).
 *
 * Why libmicrohttpd (docs/architecture.md, "The HTTP server"): a live
 * stream must not hold a thread, and 10,000 of them must fit in one
 * process. civetweb gives every connection a thread for as long as it is
 * open. libmicrohttpd (Debian's libmicrohttpd-dev) runs server.threads
 * event loops (epoll, MHD_USE_EPOLL with MHD_OPTION_THREAD_POOL_SIZE),
 * each with its share of the connections: a request's handler runs on
 * its loop's thread from start to end, and an SSE stream with nothing to
 * send is suspended (MHD_suspend_connection), costing its socket and a
 * few KiB, until the hub has news (stream.c). A WebSocket is upgraded
 * (MHD_ALLOW_UPGRADE) and its socket handed to stream.c's own loop.
 * libh2o would do as well but wants its own event loop and libuv; libuv
 * has no HTTP parser. Each thread opens its own store connection on
 * first use and closes it when the thread ends: SQLite connections are
 * not shared between threads.
 *
 *   accept ─▶ loop thread k (epoll) ─▶ uri_log: the raw query
 *                 │ headers, body (bounded) ─▶ on_request ─▶ dispatch ─▶ route
 *                 └─ reaper thread: a request not in within HTTP_REQUEST_MS
 *                    has its socket shut down
 */
#include "util/compat.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "server/server.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/lazy.h"
#include "util/log.h"
#include "util/spawn.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#undef LOG_MODULE
#define LOG_MODULE "http"

#define TOKEN_BYTES 32

/*
 * A connection costs a socket and a few KiB, not a thread, but a process
 * on this machine or a web page that opens connections and trickles a
 * header, or says nothing, could still pile them up to the descriptor
 * limit. A request (headers and body) must arrive in full within
 * HTTP_REQUEST_MS of its connection, or HTTP_KEEP_ALIVE_MS of the
 * previous answer on a kept-alive one: the reaper shuts the socket down
 * then, however steadily it trickles. An answer whose connection neither
 * reads nor writes for HTTP_IDLE_S seconds is cut (conn_idle_timeout). A
 * browser or curl sends a request in milliseconds. A live stream is not
 * bound by them (stream.c has its own pings and timeouts).
 */
#define HTTP_REQUEST_MS	   5000
#define HTTP_KEEP_ALIVE_MS 1000
#define HTTP_IDLE_S	   5
#define REAPER_TICK_MS	   250
/*
 * What one connection may use for its request's head and the answer's
 * buffers: an idle stream costs this at most. A request head larger is
 * refused (431).
 */
#define CONN_MEMORY (16 * 1024)
/* Descriptors kept for the hub, the loops, logs and children; and for
 * each thread's store connection (a database, its WAL and -shm). */
#define FD_RESERVE 128
#define FD_PER_THREAD 4

/* This thread's store connection, opened on its first request, closed
 * by the key's destructor when the thread ends. */
static pthread_key_t store_key;
static pthread_once_t store_key_once = PTHREAD_ONCE_INIT;

/*
 * One TCP connection, for the reaper: when the request now due began to
 * be awaited (waiting set), or none is due (a handler runs, or the
 * connection is a live stream).
 */
struct conn {
	int fd;
	int waiting;
	int streaming;
	int cut;
	int64_t due_ms; /* time_mono_ms() by which the request must be in */
	struct pending *pending; /* the request being read, if any */
	struct conn *prev, *next;
};

static pthread_mutex_t conns_mu = PTHREAD_MUTEX_INITIALIZER;
static struct conn *conns;

/* One request being read: its raw query and its body so far. */
struct pending {
	char *query; /* NULL: none */
	struct buf body;
	int too_large;
	int started; /* the handler has been called once (headers in) */
};

static void
pending_free(struct pending *p)
{
	if (!p)
		return;
	buf_release(&p->body);
	free(p->query);
	free(p);
}

/* ---- responses ----------------------------------------------------------- */

void
http_common_headers(struct MHD_Response *r)
{
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
}

/* Queues the one answer of rq (libmicrohttpd leaves the body out for
 * HEAD); csp: the page's Content-Security-Policy, or NULL. */
static void
send_answer(struct req *rq, int status, const char *type, const char *text,
	    size_t len, const char *csp)
{
	struct MHD_Response *r;

	if (rq->status) {
		log_warn("%s %s: a second answer (%d) dropped", rq->method,
			 rq->path, status);
		return;
	}
	rq->status = status;
	r = MHD_create_response_from_buffer(len, (void *)text,
					    MHD_RESPMEM_MUST_COPY);
	if (!r)
		return;
	MHD_add_response_header(r, "Content-Type", type);
	http_common_headers(r);
	if (csp)
		MHD_add_response_header(r, "Content-Security-Policy", csp);
	MHD_queue_response(rq->conn, (unsigned)status, r);
	MHD_destroy_response(r);
}

void
http_text(struct req *rq, int status, const char *type, const char *text,
	  size_t len)
{
	if (rq->capture) {
		rq->status = status;
		buf_add(rq->capture, text, len);
		return;
	}
	send_answer(rq, status, type, text, len, NULL);
}

void
http_page(struct req *rq, const char *type, const char *text, size_t len)
{
	send_answer(rq, 200, type, text, len,
		    "default-src 'none'; "
		    "script-src 'self'; style-src 'self'; img-src 'self' data:; "
		    "connect-src 'self'; base-uri 'none'; form-action 'self'; "
		    "frame-ancestors 'none'");
}

void
http_html(struct req *rq, int status, const char *text, size_t len)
{
	if (rq->capture) {
		http_text(rq, status, "text/html; charset=utf-8", text, len);
		return;
	}
	send_answer(rq, status, "text/html; charset=utf-8", text, len,
		    "default-src 'none'; style-src 'unsafe-inline'; "
		    "base-uri 'none'; form-action 'self'; "
		    "frame-ancestors 'none'");
}

void
http_json(struct req *rq, int status, void *body)
{
	json_t *j = body;
	char *text = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	if (!text) {
		http_error(rq, 500, "internal", "cannot encode the answer");
		return;
	}
	http_text(rq, status, "application/json", text, strlen(text));
	free(text);
}

void
http_error(struct req *rq, int status, const char *code, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_error_with(rq, status, code, msg, NULL);
}

void
http_error_with(struct req *rq, int status, const char *code, const char *msg,
		void *extra)
{
	json_t *err = json_pack("{s:s, s:o}", "code", code, "message",
				json_lossy_str(msg));

	if (extra)
		json_object_update_missing(err, extra);
	json_decref(extra);
	http_json(rq, status, json_pack("{s:o}", "error", err));
}

void
http_fail(struct req *rq, const struct err *e)
{
	switch (e->rc) {
	case BATON_ENOTFOUND:
		http_error(rq, 404, "not_found", "%s", e->msg);
		break;
	case BATON_EBADSTATE:
		http_error(rq, 409, "illegal_transition", "%s", e->msg);
		break;
	case BATON_ECONFLICT:
	case BATON_EBUSY:
	case BATON_EFENCED:
	case BATON_EEXIST:
		http_error(rq, 409, "conflict", "%s", e->msg);
		break;
	case BATON_EINVAL:
	case BATON_EAMBIGUOUS:
		http_error(rq, 400, "bad_request", "%s", e->msg);
		break;
	default:
		http_error(rq, 500, "internal", "%s", e->msg);
	}
}

/* ---- requests ------------------------------------------------------------ */

static int
hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes %XX and '+' of a[0..n) into out (NUL-ended); -1 when it does
 * not fit. */
static int
url_decode(const char *a, size_t n, char *out, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		int c = (unsigned char)a[i];

		if (c == '+') {
			c = ' ';
		} else if (c == '%' && i + 2 < n && hex_digit(a[i + 1]) >= 0 &&
			   hex_digit(a[i + 2]) >= 0) {
			c = hex_digit(a[i + 1]) * 16 + hex_digit(a[i + 2]);
			i += 2;
		}
		if (o + 1 >= len)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return (int)o;
}

/* The raw value of query's parameter name ("" for a bare name) and its
 * length in *vlen, or NULL when the query has none. */
static const char *
query_raw(const char *query, const char *name, size_t *vlen)
{
	size_t nlen = strlen(name);
	const char *p = query;

	while (p && *p) {
		const char *end = strchr(p, '&');
		size_t plen = end ? (size_t)(end - p) : strlen(p);

		if (plen > nlen && !strncmp(p, name, nlen) && p[nlen] == '=') {
			*vlen = plen - nlen - 1;
			return p + nlen + 1;
		}
		if (plen == nlen && !strncmp(p, name, nlen)) {
			*vlen = 0;
			return "";
		}
		p = end ? end + 1 : NULL;
	}
	return NULL;
}

int
http_query_var(const char *query, const char *name, char *out, size_t len)
{
	size_t vlen;
	const char *v = query_raw(query, name, &vlen);

	return v ? url_decode(v, vlen, out, len) : -1;
}

int
http_query(const struct req *rq, const char *name, char *out, size_t len)
{
	if (!rq->query || len == 0)
		return 0;
	return http_query_var(rq->query, name, out, len) >= 0;
}

const char *
http_header(const struct req *rq, const char *name)
{
	if (!rq->conn)
		return NULL;
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

int
http_body(struct req *rq)
{
	/* the dispatcher read it (up to the limit) before the handler ran:
	 * not ready means it was over */
	if (rq->body_ready)
		return 0;
	http_error(rq, 413, "too_large",
		   "the request body is over the limit of %zu bytes "
		   "(server.max_body_kb)",
		   rq->srv->max_body);
	return -1;
}

int
http_body_json_opt(struct req *rq, void **out)
{
	size_t i;

	*out = NULL;
	if (http_body(rq))
		return -1;
	for (i = 0; i < rq->body.len; i++) {
		char c = rq->body.ptr[i];

		if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
			return http_body_json(rq, out);
	}
	return 0;
}

const char *
http_duplicate_key(struct json_error_t *je)
{
	char *near = strstr(je->text, "near '");
	char *end = strrchr(je->text, '\'');

	if (!near || !end || end < near + 6)
		return "(unnamed)";
	*end = '\0';
	return near + 6;
}

int
http_body_json(struct req *rq, void **out)
{
	json_error_t je;
	json_t *j;

	*out = NULL;
	if (http_body(rq))
		return -1;
	/* a key given twice is refused: which one counts is nobody's guess */
	j = json_loadb(rq->body.ptr ? rq->body.ptr : "", rq->body.len,
		       JSON_REJECT_DUPLICATES, &je);
	if (!j && json_error_code(&je) == json_error_duplicate_key) {
		http_error(rq, 400, "bad_request",
			   "the body gives the key %s more than once (line "
			   "%d, column %d)",
			   http_duplicate_key(&je), je.line, je.column);
		return -1;
	}
	if (!j) {
		http_error(rq, 400, "bad_request",
			   "the body is not JSON: %s (line %d, column %d)",
			   je.text, je.line, je.column);
		return -1;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		http_error(rq, 400, "bad_request",
			   "the body must be a JSON object");
		return -1;
	}
	*out = j;
	return 0;
}

/* ---- who may ask --------------------------------------------------------- */

/*
 * The address of an IP literal as a URL writes it ("127.0.0.1",
 * "[::1]") into out: its length, 4 or 16; 0 when host is a name.
 */
static size_t
ip_literal(const char *host, unsigned char out[16])
{
	char v6[INET6_ADDRSTRLEN];
	size_t n = strlen(host);

	if (inet_pton(AF_INET, host, out) == 1)
		return 4;
	if (n < 3 || host[0] != '[' || host[n - 1] != ']' ||
	    n - 2 >= sizeof(v6))
		return 0;
	memcpy(v6, host + 1, n - 2);
	v6[n - 2] = '\0';
	return inet_pton(AF_INET6, v6, out) == 1 ? 16 : 0;
}

/* Whether serve listens on every address (0.0.0.0, [::]). */
static int
listens_everywhere(const struct server *srv)
{
	static const unsigned char any[16];
	unsigned char a[16];
	size_t n = ip_literal(srv->listen_host, a);

	return n && !memcmp(a, any, n);
}

/*
 * Whether host (no port) names this server: localhost, 127.0.0.1, [::1],
 * the HOST serve listens on, or, when that is every address, any IP
 * address. What the check stops is a page whose DNS name is made to
 * point here (DNS rebinding): it has to come with that name, and an
 * address is not one.
 */
static int
host_is_ours(const struct server *srv, const char *host)
{
	static const unsigned char lo4[4] = { 127, 0, 0, 1 };
	static const unsigned char lo6[16] = { [15] = 1 };
	unsigned char a[16], l[16];
	size_t n, ln;

	if (!strcasecmp(host, "localhost") ||
	    !strcasecmp(host, srv->listen_host))
		return 1;
	n = ip_literal(host, a);
	if (!n)
		return 0;
	if (!memcmp(a, n == 4 ? lo4 : lo6, n) || listens_everywhere(srv))
		return 1;
	ln = ip_literal(srv->listen_host, l);
	return ln == n && !memcmp(a, l, n);
}

/*
 * Whether authority ("host", "host:port", "[v6]:port") names this server
 * and its port. Without a port it is port 80 when default_80 (an
 * Origin's); a Host without one passes on its name (civetweb's
 * WebSocket client, which the tests use, sends none, and a browser names any port but 80).
 */
static int
authority_is_ours(const struct server *srv, const char *authority,
		  int default_80)
{
	const char *bracket = NULL, *colon;
	char host[256], *end = NULL;
	size_t len;
	long port = srv->port;

	if (authority[0] == '[')
		bracket = strchr(authority, ']');
	colon = strchr(bracket ? bracket : authority, ':');
	len = colon ? (size_t)(colon - authority) : strlen(authority);
	if (!len || len >= sizeof(host))
		return 0;
	memcpy(host, authority, len);
	host[len] = '\0';
	if (colon) {
		if (!isdigit((unsigned char)colon[1]))
			return 0;
		port = strtol(colon + 1, &end, 10);
		if (*end)
			return 0;
	} else if (default_80) {
		port = 80;
	}
	return port == srv->port && host_is_ours(srv, host);
}

/* The name a message tells a client to ask for. */
static const char *
own_name(const struct server *srv)
{
	return listens_everywhere(srv) ? "127.0.0.1" : srv->listen_host;
}

/*
 * The Origin half of http_guard: a request with an Origin that is not
 * this server's is 403 (sent, -1).
 */
static int
guard_origin(struct req *rq)
{
	const char *origin = http_header(rq, "Origin");
	const char *scheme = rq->srv->tls ? "https://" : "http://";
	size_t n = strlen(scheme);

	if (origin &&
	    (strncmp(origin, scheme, n) || strchr(origin + n, '/') ||
	     !authority_is_ours(rq->srv, origin + n, 1))) {
		http_error(rq, 403, "forbidden_origin",
			   "the Origin header '%s' is not this server's own "
			   "(%s%s:%d): a page from elsewhere may not call "
			   "baton",
			   origin, scheme, own_name(rq->srv), rq->srv->port);
		return -1;
	}
	return 0;
}

int
http_guard(struct req *rq)
{
	const char *host = http_header(rq, "Host");
	const char *own = own_name(rq->srv);
	int port = rq->srv->port;

	if (!host || !*host) {
		http_error(rq, 421, "misdirected_request",
			   "the request has no Host header: ask for %s:%d",
			   own, port);
		return -1;
	}
	if (!authority_is_ours(rq->srv, host, 0)) {
		http_error(rq, 421, "misdirected_request",
			   "the Host header '%s' does not name this server: "
			   "ask for %s:%d (or localhost, 127.0.0.1, [::1] "
			   "with that port)",
			   host, own, port);
		return -1;
	}
	return guard_origin(rq);
}

/* ---- routing ------------------------------------------------------------- */

/*
 * Matches path against a pattern whose {name} segments take any one
 * segment, saving those into rq->params (pointing into segs, a copy of
 * path cut at each '/').
 */
static int
route_match(const char *pattern, char *segs, struct req *rq)
{
	const char *p = pattern;
	char *s = segs;
	int nparams = 0;

	while (*p && *s) {
		const char *pend = strchr(p + 1, '/');
		char *send = strchr(s + 1, '/');
		size_t plen = pend ? (size_t)(pend - p) : strlen(p);
		size_t slen = send ? (size_t)(send - s) : strlen(s);

		if (p[1] == '{') {
			if (slen < 2 || nparams >= (int)ARRAY_SIZE(rq->params))
				return 0;
			rq->params[nparams++] = s + 1;
		} else if (plen != slen || strncmp(p, s, plen)) {
			return 0;
		}
		p += plen;
		s += slen;
	}
	if (*p || *s)
		return 0;
	/* cut the segments only once the whole path matched */
	for (s = segs + 1; *s; s++)
		if (*s == '/')
			*s = '\0';
	return 1;
}

/*
 * The route for rq; NULL when none, with *path_known set when the path
 * exists under another method (405 rather than 404).
 */
static const struct route *
find_route(struct req *rq, char *segs, int *path_known)
{
	size_t i, len = strlen(rq->path) + 1;

	*path_known = 0;
	for (i = 0; i < api_nr_routes; i++) {
		const struct route *r = &api_routes[i];

		memcpy(segs, rq->path, len); /* route_match cuts it */
		if (!route_match(r->pattern, segs, rq))
			continue;
		*path_known = 1;
		if (!strcmp(r->method, rq->method) ||
		    (!strcmp(r->method, "GET") && !strcmp(rq->method, "HEAD")))
			return r;
	}
	return NULL;
}

static void
store_key_close(void *s)
{
	store_close(s);
}

static void
store_key_make(void)
{
	if (pthread_key_create(&store_key, store_key_close))
		BUG("cannot make a thread key");
}

struct store *
http_thread_store(struct server *srv)
{
	struct err e = ERR_INIT;
	struct store *s;

	pthread_once(&store_key_once, store_key_make);
	s = pthread_getspecific(store_key);
	if (!s) {
		if (store_open(srv->store_spec, &s, &e)) {
			log_error("cannot open the store: %s", e.msg);
			return NULL;
		}
		pthread_setspecific(store_key, s);
	}
	return s;
}

int
http_call(struct server *srv, const char *actor, enum api_role role,
	  const char *method, const char *path, const char *body, size_t len,
	  struct buf *out)
{
	struct req rq = { .srv = srv, .method = method, .path = path,
			  .body = BUF_INIT, .body_ready = 1, .capture = out,
			  .role = role };
	const struct route *r;
	char *segs = xstrdup(path);
	int known;

	snprintf(rq.actor, sizeof(rq.actor), "%s", actor ? actor : "");
	buf_add(&rq.body, body ? body : "", len);
	r = find_route(&rq, segs, &known);
	rq.store = http_thread_store(srv);
	if (!r)
		http_error(&rq, 404, "not_found", "no route %s %s", method,
			   path);
	else if (!rq.store)
		http_error(&rq, 500, "internal", "cannot open the store");
	else if (!http_permit(&rq, r))
		r->fn(&rq);
	buf_release(&rq.body);
	free(segs);
	return rq.status;
}

static int
is_api(const char *path)
{
	return !strncmp(path, "/api/", 5) || !strcmp(path, "/api") ||
	       !strcmp(path, "/metrics");
}

/* Whether the request asks for a WebSocket (Upgrade: websocket). */
static int
wants_websocket(const struct req *rq)
{
	const char *up = http_header(rq, "Upgrade");

	return up && !strcasecmp(up, "websocket");
}

/*
 * Sends the 401 for what http_authenticate found (auth) and returns -1;
 * 0 when it found a token.
 */
static int
unauthorized(struct req *rq, int auth)
{
	switch (auth) {
	case AUTH_OK:
		return 0;
	case AUTH_REVOKED:
		http_error(rq, 401, "unauthorized",
			   "token '%s' was revoked: ask an admin for a new "
			   "one (baton token add)",
			   rq->actor);
		break;
	case AUTH_UNKNOWN:
		http_error(rq, 401, "unauthorized",
			   "a bearer token is required: Authorization: "
			   "Bearer $(cat .baton/token), or a token from "
			   "baton token add (the one given is not this "
			   "server's)");
		break;
	case AUTH_FAILED:
		http_error(rq, 500, "internal",
			   "cannot check the bearer token: the token store "
			   "cannot be read");
		break;
	default:
		http_error(rq, 401, "unauthorized",
			   "a bearer token is required: Authorization: "
			   "Bearer $(cat .baton/token)");
	}
	return -1;
}

/* Whether query has a parameter name, whatever its value. */
static int
has_param(const char *query, const char *name)
{
	size_t vlen;

	return query_raw(query, name, &vlen) != NULL;
}

/*
 * Answers one request whose head and body (p) are in: the guards, the
 * route, its handler. Returns the status sent (0: none).
 */
static int
dispatch(struct server *srv, struct MHD_Connection *conn, const char *url,
	 const char *method, struct pending *p)
{
	struct req rq = { .srv = srv, .conn = conn, .body = BUF_INIT };
	const struct route *r;
	char *path, *segs;
	size_t len;
	int known = 0, query_token, signed_route;

	rq.method = method;
	path = xstrdup(url && *url ? url : "/");
	len = strlen(path);
	if (len > 1 && path[len - 1] == '/')
		path[len - 1] = '\0'; /* "/api/v1/runs/" is "/api/v1/runs" */
	rq.path = path;
	rq.query = p->query;
	rq.body = p->body;
	p->body = (struct buf)BUF_INIT;
	rq.body_ready = !p->too_large;
	segs = xmalloc(len + 1);
	r = is_api(rq.path) ? find_route(&rq, segs, &known) : NULL;
	signed_route = r && (r->flags & (ROUTE_F_SIGNED | ROUTE_F_LINK));
	/* a signed route proves its requests itself: its Host is free; a
	 * link's page posts to itself under the public name, with Origin
	 * "null" (no-referrer), so its Origin is free too */
	if (!(r && (r->flags & ROUTE_F_LINK)) &&
	    (signed_route ? guard_origin(&rq) : http_guard(&rq)))
		goto out;
	if (!is_api(rq.path)) {
		if (!assets_serve(&rq))
			http_error(&rq, 404, "not_found", "no page '%s'",
				   rq.path);
		goto out;
	}
	query_token = r && (r->flags & ROUTE_F_QUERY_TOKEN);
	rq.store = http_thread_store(rq.srv);
	if (!rq.store) {
		http_error(&rq, 500, "internal", "cannot open the store");
		goto out;
	}
	/* a token in a URL ends up in logs and histories: only the live
	 * stream, which a browser opens without headers, takes one, and
	 * elsewhere it is refused even beside a header's */
	if (!query_token && has_param(rq.query, "access_token")) {
		http_error(&rq, 401, "unauthorized",
			   "?access_token= opens the live stream only "
			   "(/api/v1/events, /api/v1/ws): send "
			   "Authorization: Bearer $(cat .baton/token)");
		goto out;
	}
	/* a public route proves its requests itself (a signed webhook) */
	if (!(r && r->role == ROLE_PUBLIC) &&
	    unauthorized(&rq, http_authenticate(&rq, query_token)))
		goto out;
	if (!r) {
		if (known)
			http_error(&rq, 405, "method_not_allowed",
				   "%s is not allowed on %s", rq.method,
				   rq.path);
		else
			http_error(&rq, 404, "not_found", "no route %s %s",
				   rq.method, rq.path);
		goto out;
	}
	if (http_permit(&rq, r))
		goto out;
	if (!strcmp(rq.path, "/api/v1/ws") && wants_websocket(&rq))
		stream_ws(&rq);
	else
		r->fn(&rq);
	if (!rq.status)
		http_error(&rq, 500, "internal", "%s %s gave no answer",
			   rq.method, rq.path);
out:
	metrics_count(rq.status);
	buf_release(&rq.body);
	free(segs);
	free(path);
	return rq.status;
}

/* The connection's reaper entry (NULL: none). */
static struct conn *
conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

void
http_streaming(struct req *rq)
{
	struct conn *c = rq->conn ? conn_of(rq->conn) : NULL;

	if (!c)
		return;
	pthread_mutex_lock(&conns_mu);
	c->streaming = 1;
	c->waiting = 0;
	pthread_mutex_unlock(&conns_mu);
}

/* A request is due on c by now + ms (ms < 0: none is). */
static void
conn_due(struct conn *c, int64_t ms)
{
	if (!c)
		return;
	pthread_mutex_lock(&conns_mu);
	c->waiting = ms >= 0 && !c->streaming;
	c->due_ms = time_mono_ms() + ms;
	pthread_mutex_unlock(&conns_mu);
}

/*
 * libmicrohttpd's idle timeout (HTTP_IDLE_S) counts from a connection's
 * last read or write, and a loop looks for timeouts before it reads what
 * came in meanwhile: a request that arrived while a slow handler held
 * its loop would be closed unanswered. So it is set only while an answer
 * is under way (seconds); while a request is awaited (0: none) the
 * reaper alone keeps the time, and it spares bytes waiting unread.
 */
static void
conn_idle_timeout(struct MHD_Connection *mc, unsigned seconds)
{
	MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

static void
on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
	      enum MHD_ConnectionNotificationCode toe)
{
	const union MHD_ConnectionInfo *ci;
	struct conn *c;

	(void)cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		ci = MHD_get_connection_info(mc,
					     MHD_CONNECTION_INFO_CONNECTION_FD);
		c = xcalloc(1, sizeof(*c));
		c->fd = ci ? ci->connect_fd : -1;
		c->waiting = 1;
		c->due_ms = time_mono_ms() + HTTP_REQUEST_MS;
		pthread_mutex_lock(&conns_mu);
		c->next = conns;
		if (conns)
			conns->prev = c;
		conns = c;
		pthread_mutex_unlock(&conns_mu);
		*socket_context = c;
		conn_idle_timeout(mc, 0);
		return;
	}
	c = *socket_context;
	if (!c)
		return;
	/* a request cut before its handler ran has no completion call */
	pending_free(c->pending);
	/* before libmicrohttpd closes the socket: the reaper never shuts
	 * down a descriptor that is someone else's by then */
	pthread_mutex_lock(&conns_mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&conns_mu);
	free(c);
	*socket_context = NULL;
}

/* The raw URI, before libmicrohttpd parses it: its query is kept. */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
	struct pending *p = xcalloc(1, sizeof(*p));
	const char *q = uri ? strchr(uri, '?') : NULL;
	struct conn *c = conn_of(mc);

	(void)cls;
	p->body = (struct buf)BUF_INIT;
	if (q) {
		size_t n = strcspn(q + 1, "#");

		p->query = xstrndup(q + 1, n);
	}
	if (c) {
		pending_free(c->pending); /* never: completed freed it */
		c->pending = p;
	}
	return p;
}

static void
on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
	     enum MHD_RequestTerminationCode toe)
{
	struct pending *p = *con_cls;
	struct conn *c = conn_of(mc);

	(void)cls;
	if (c && c->pending == p)
		c->pending = NULL;
	pending_free(p);
	*con_cls = NULL;
	conn_due(c, HTTP_KEEP_ALIVE_MS);
	/*
	 * The next request is awaited. Only an answer that ended well, and
	 * never a stream's: libmicrohttpd tells the end of an upgraded
	 * connection holding a lock that setting the option takes again.
	 */
	if (c && !c->streaming && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		conn_idle_timeout(mc, 0);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *mc, const char *url,
	   const char *method, const char *version, const char *upload,
	   size_t *upload_size, void **con_cls)
{
	struct server *srv = cls;
	struct pending *p = *con_cls;
	const char *cl;

	(void)version;
	if (!p) /* on_uri makes it; never without */
		return MHD_NO;
	if (!p->started) {
		p->started = 1;
		cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						 "Content-Length");
		if (cl && strtoull(cl, NULL, 10) > srv->max_body)
			p->too_large = 1;
		/* refused before the body is read: 413 and the connection
		 * closes */
		if (!p->too_large)
			return MHD_YES;
	} else if (*upload_size) {
		if (!p->too_large &&
		    p->body.len + *upload_size > srv->max_body) {
			p->too_large = 1;
			buf_release(&p->body);
		}
		if (!p->too_large)
			buf_add(&p->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	conn_due(conn_of(mc), -1);
	conn_idle_timeout(mc, HTTP_IDLE_S);
	return dispatch(srv, mc, url, method, p) ? MHD_YES : MHD_NO;
}


/* ---- the process --------------------------------------------------------- */

static void
log_message(void *cls, const char *fmt, va_list ap)
{
	char msg[1024];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	log_warn("%s", msg);
}

/*
 * The reaper: shuts down the socket of every connection whose request
 * is overdue, which libmicrohttpd then closes (its own timeout only
 * counts silence, and a trickle is not silent). Holding conns_mu keeps
 * on_connection from letting the descriptor go meanwhile. A connection
 * with bytes waiting unread in its socket is not the client's fault:
 * its loop is busy (a slow handler, a store opening), and the bytes of
 * a trickle never wait there, as the loop reads them as they come.
 */
static atomic_int reaper_stop;

/* Whether bytes wait unread in the socket fd. */
static int
unread(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

static void *
reaper(void *arg)
{
	(void)arg;
	while (!atomic_load(&reaper_stop)) {
		int64_t now = time_mono_ms();
		struct conn *c;

		pthread_mutex_lock(&conns_mu);
		for (c = conns; c; c = c->next)
			if (c->waiting && !c->cut && c->fd >= 0 &&
			    now > c->due_ms && !unread(c->fd)) {
				c->cut = 1;
				shutdown(c->fd, SHUT_RDWR);
			}
		pthread_mutex_unlock(&conns_mu);
		poll(NULL, 0, REAPER_TICK_MS);
	}
	return NULL;
}

/*
 * Raises this process's descriptor limit to its hard limit: every
 * stream is a socket. Returns how many connections fit under it, with
 * threads store connections beside them.
 */
static unsigned
raise_nofile(int threads)
{
	unsigned reserve = FD_RESERVE + FD_PER_THREAD * (unsigned)(threads + 1);
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 1024 > 2 * reserve ? 1024 - reserve : 512;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			log_warn("cannot raise the descriptor limit: %s",
				 strerror(errno));
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1 << 20)
		return 1 << 20;
	return rl.rlim_cur > 2 * reserve ? (unsigned)(rl.rlim_cur - reserve) :
					   (unsigned)(rl.rlim_cur / 2);
}

/*
 * Creates the token file at path with a new token (mode 0600, never
 * through a link, never over a file that exists: -EEXIST then). Fills
 * *out with the token; the caller frees it.
 */
static int
make_token(const char *path, char **out, struct err *e)
{
	unsigned char raw[TOKEN_BYTES];
	char hex[TOKEN_BYTES * 2 + 2];
	size_t i, len;
	int fd, rc = 0;

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return err_set(e, -errno, "cannot draw random bytes: %s",
			       strerror(errno));
	for (i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	len = strlen(hex);
	hex[len] = '\n';
	fd = fs_open_nofollow(path, O_WRONLY | O_CREAT | O_EXCL, 0600, e);
	if (fd < 0)
		return fd;
	if (write(fd, hex, len + 1) != (ssize_t)(len + 1) || fsync(fd) < 0) {
		rc = err_set(e, -errno, "cannot write '%s': %s", path,
			     strerror(errno));
		close(fd);
		unlink(path);
		return rc;
	}
	close(fd);
	hex[len] = '\0';
	*out = xstrdup(hex);
	return 0;
}

/*
 * The secret in .baton/NAME (what: "API token", "answer key" for the
 * messages), created as make_token makes it when missing.
 */
static int
secret_file(const struct workspace *ws, const char *name, const char *what,
	    char **out, struct err *e)
{
	char *path = xasprintf("%s/%s", ws->dir, name);
	struct buf b = BUF_INIT;
	struct err re = ERR_INIT;
	int rc, tries;

	*out = NULL;
	/* twice at most: a serve or init that made the file between our
	 * read and our create has the token, and it is read again */
	for (tries = 0; tries < 2; tries++) {
		rc = fs_read_nofollow(path, &b, 4096, &re);
		if (rc == 0) {
			buf_rtrim(&b);
			if (b.len >= 16)
				*out = buf_detach(&b, NULL);
			else
				rc = err_set(e, BATON_EINVAL,
					     "%s holds no %s (at least 16 "
					     "characters); remove it and a new "
					     "one is made",
					     path, what);
			goto out;
		}
		if (rc != -ENOENT) {
			rc = err_set(e, rc, "cannot read the %s: %s",
				     what, re.msg);
			goto out;
		}
		re = (struct err)ERR_INIT;
		rc = make_token(path, out, &re);
		if (rc != -EEXIST)
			break;
	}
	if (rc)
		err_set(e, rc, "cannot create the %s: %s", what,
			re.msg);
out:
	buf_release(&b);
	free(path);
	return rc;
}

int
server_token(const struct workspace *ws, char **out, struct err *e)
{
	return secret_file(ws, "token", "API token", out, e);
}

int
server_answer_key(const struct workspace *ws, char **out, struct err *e)
{
	return secret_file(ws, "answer.key", "answer key", out, e);
}

/*
 * Binds HOST:PORT ("127.0.0.1:7070", "[::1]:0", "0.0.0.0:7070",
 * "localhost:7070") and listens: the socket in *fd, its HOST in host.
 */
static int
bind_listen(const char *listen_addr, char *host, size_t hlen, int *fd,
	    struct err *e)
{
	const char *colon = strrchr(listen_addr, ':');
	struct addrinfo hints = { 0 }, *res = NULL, *ai;
	char name[256];
	size_t n;
	int rc, s = -1, one = 1, saved = 0;

	if (!colon || colon == listen_addr || !colon[1])
		return err_set(e, BATON_EINVAL,
			       "--listen wants HOST:PORT, such as "
			       "127.0.0.1:7070, not '%s'",
			       listen_addr);
	n = (size_t)(colon - listen_addr);
	if (n >= hlen || n >= sizeof(name))
		return err_set(e, BATON_EINVAL, "--listen: the host of '%s' is "
			       "too long", listen_addr);
	memcpy(host, listen_addr, n);
	host[n] = '\0';
	/* "[::1]" is ::1 to the resolver */
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
		snprintf(name, sizeof(name), "%.*s", (int)(n - 2), host + 1);
	else
		snprintf(name, sizeof(name), "%s", host);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(*name ? name : NULL, colon + 1, &hints, &res);
	if (rc)
		return err_set(e, BATON_EINVAL, "cannot listen on %s: %s",
			       listen_addr, gai_strerror(rc));
	for (ai = res; ai; ai = ai->ai_next) {
		s = socket(ai->ai_family,
			   ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			   ai->ai_protocol);
		if (s < 0) {
			saved = errno;
			continue;
		}
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(s, 4096) == 0)
			break;
		saved = errno;
		close(s);
		s = -1;
	}
	freeaddrinfo(res);
	if (s < 0)
		return err_set(e, BATON_EINVAL,
			       "cannot listen on %s: %s (is the port taken? "
			       "--listen HOST:PORT picks another, port 0 any "
			       "free one)",
			       listen_addr, strerror(saved));
	*fd = s;
	return 0;
}

/* The port a bound socket took. */
static int
bound_port(int fd)
{
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} u;
	socklen_t len = sizeof(u);

	memset(&u, 0, sizeof(u));
	if (getsockname(fd, &u.sa, &len))
		return -1;
	return ntohs(u.sa.sa_family == AF_INET6 ? u.in6.sin6_port :
						  u.in.sin_port);
}

/* Starts the hub, the streams and libmicrohttpd; fills url. */
static int
start(struct server *srv, const char *listen_addr, const char *tls,
      const char *tls_key, struct MHD_Daemon **dp, char *url, size_t url_len,
      struct err *e)
{
	unsigned limit = raise_nofile(srv->cfg->server.threads);
	struct MHD_Daemon *d;
	char host[256];
	int fd = -1, rc;

	/* opened here, not at a first request: a missing library is told
	 * when serve starts */
	rc = lazy_mhd_load(e);
	if (!rc)
		rc = lazy_wslay_load(e);
	if (!rc)
		rc = lazy_crypto_load(e); /* the WebSocket handshake's SHA-1 */
	if (!rc)
		rc = bind_listen(listen_addr, host, sizeof(host), &fd, e);
	if (rc)
		return rc;
	/* set before any handler runs: starting the threads publishes them */
	snprintf(srv->listen_host, sizeof(srv->listen_host), "%s", host);
	srv->port = bound_port(fd);
	srv->max_conns = limit;
	rc = hub_start(srv->store_spec, NULL, &srv->hub, e);
	if (rc)
		goto fail;
	rc = stream_start(srv, e);
	if (rc)
		goto fail;
	rc = chat_serve_start(srv, e);
	if (rc)
		goto fail;
	if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		rc = err_set(e, BATON_EINVAL,
			     "server.tls is set, but this libmicrohttpd was "
			     "built without TLS (GnuTLS)");
		goto fail;
	}
	srv->tls = tls != NULL;
	/* without TLS the two options end the list early: both unused */
	d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE |
			(tls ? MHD_USE_TLS : 0),
		0, NULL, NULL, on_request, srv,
		MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_THREAD_POOL_SIZE,
		(unsigned)srv->cfg->server.threads,
		MHD_OPTION_CONNECTION_LIMIT, limit,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
		MHD_OPTION_EXTERNAL_LOGGER, log_message, srv,
		tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, tls,
		MHD_OPTION_HTTPS_MEM_KEY, tls ? tls_key : NULL,
		MHD_OPTION_END);
	if (!d) {
		rc = err_set(e, BATON_EINVAL,
			     "cannot start the HTTP server on %s", listen_addr);
		goto fail;
	}
	fd = -1; /* the daemon's now */
	if (!strcmp(host, "0.0.0.0") || !*host)
		snprintf(host, sizeof(host), "127.0.0.1");
	snprintf(url, url_len, "%s://%s:%d/", tls ? "https" : "http", host,
		 srv->port);
	*dp = d;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Removes the address file, unless a newer serve has written its own. */
static void
forget_url(const char *path, const char *url)
{
	struct buf b = BUF_INIT;

	if (fs_read(path, &b, 4096, NULL) == 0 && b.ptr && !strcmp(b.ptr, url))
		unlink(path);
	buf_release(&b);
}

/* The HTTP process: serves until SIGTERM or its parent's death. */
static void __attribute__((noreturn))
server_main(const struct server_opts *o, int ready_fd)
{
	struct server srv = { 0 };
	struct MHD_Daemon *d = NULL;
	struct err e = ERR_INIT;
	char url[320], *url_file;
	pthread_t reaper_thread;

	srv.ws = o->ws;
	srv.cfg = o->cfg;
	srv.store_spec = o->store_spec;
	srv.token = o->token;
	srv.max_body = (size_t)o->cfg->server.max_body_kb * 1024;
	srv.started_ms = time_now_ms();
	/* answer links are checked only where they are made */
	if (o->cfg->server.public_url &&
	    server_answer_key(o->ws, &srv.answer_key, &e)) {
		dprintf(ready_fd, "ERR %s\n", e.msg);
		_exit(1);
	}
	if (start(&srv, o->listen, o->tls_cert, o->tls_key, &d, url,
		  sizeof(url), &e) == 0) {
		url_file = xasprintf("%s/http.url", o->ws->dir);
		fs_write_atomic(url_file, url, strlen(url), NULL);
		dprintf(ready_fd, "OK %s\n", url);
	} else {
		dprintf(ready_fd, "ERR %s\n", e.msg);
		_exit(1);
	}
	close(ready_fd);
	if (pthread_create(&reaper_thread, NULL, reaper, NULL))
		BUG("cannot start the reaper thread");
	server__await_stop();
	atomic_store(&reaper_stop, 1);
	pthread_join(reaper_thread, NULL);
	stream_stop();
	MHD_stop_daemon(d);
	hub_stop(srv.hub);
	forget_url(url_file, url);
	free(url_file);
	_exit(0);
}

/* The signals that stop a server process. */
static void
stop_signals(sigset_t *stop)
{
	sigemptyset(stop);
	sigaddset(stop, SIGTERM);
	sigaddset(stop, SIGINT);
	sigaddset(stop, SIGHUP);
}

/*
 * In a server process, before its body runs: it dies with the supervisor,
 * is named for ps and the benchmarks, and leaves a terminal's Ctrl-C to
 * the supervisor. The stop signals are blocked, and every thread the body
 * makes inherits that, so only server__await_stop takes them.
 */
static void
companion_begin(const char *comm)
{
	sigset_t stop;

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	prctl(PR_SET_NAME, comm);
	setpgid(0, 0);
	stop_signals(&stop);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
}

void
server__await_stop(void)
{
	sigset_t stop;
	int sig;

	stop_signals(&stop);
	while (sigwait(&stop, &sig) != 0)
		;
}

/*
 * Forks a process of the server module, named comm, that runs
 * fn(o, ready_fd) and reports on ready_fd: "OK DETAIL\n" once it
 * works, "ERR WHY\n" before it exits. Returns once it said which (*pid
 * set and DETAIL in detail on OK; the process reaped and WHY in e on
 * ERR). what names it in errors.
 */
/* What companion_call hands the new process. */
struct companion_arg {
	server__main_fn *fn;
	const struct server_opts *o;
	const char *comm;
	const int *fds; /* the ready pipe */
};

static int
companion_call(void *arg)
{
	const struct companion_arg *a = arg;

	/*
	 * The supervisor's other descriptors stay open: among them are its
	 * store's, and SQLite keeps per-process state about open files
	 * that closing them under it would corrupt. The process dies with
	 * the supervisor (PDEATHSIG) in any case.
	 */
	close(a->fds[0]);
	companion_begin(a->comm);
	a->fn(a->o, a->fds[1]);
	return 1; /* fn does not return */
}

int
server__fork_ready(server__main_fn *fn, const struct server_opts *o,
		   const char *comm, const char *what, pid_t *pid,
		   char *detail, size_t len, struct err *e)
{
	struct companion_arg a;
	char line[1200];
	struct buf got = BUF_INIT;
	ssize_t n;
	int fds[2], rc = 0;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return err_set(e, -errno, "cannot create a pipe: %s",
			       strerror(errno));
	a.fn = fn;
	a.o = o;
	a.comm = comm;
	a.fds = fds;
	rc = spawn_fork_call(companion_call, &a, 0, pid);
	if (rc < 0) {
		*pid = 0;
		rc = err_set(e, rc, "cannot start the %s: %s", what,
			     strerror(-rc));
		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	close(fds[1]);
	while ((n = read(fds[0], line, sizeof(line))) > 0 ||
	       (n < 0 && errno == EINTR))
		if (n > 0)
			buf_add(&got, line, (size_t)n);
	close(fds[0]);
	if (got.len > 3 && !strncmp(got.ptr, "OK ", 3)) {
		snprintf(detail, len, "%.*s", (int)(got.len - 4), got.ptr + 3);
	} else {
		if (got.len > 4)
			rc = err_set(e, BATON_EINVAL, "%.*s",
				     (int)(got.len - 5), got.ptr + 4);
		else
			rc = err_set(e, BATON_EINVAL,
				     "the %s died as it started", what);
		spawn_reap(*pid, NULL, 0);
		*pid = 0;
	}
	buf_release(&got);
	return rc;
}

int
server_spawn(const struct server_opts *o, pid_t *pid, char *url, size_t url_len,
	     struct err *e)
{
	return server__fork_ready(server_main, o, "baton http", "HTTP server",
				  pid, url, url_len, e);
}
