/*
 * The HTTP process: civetweb set up, one dispatcher for every request
 * (Host and Origin check, token check, body limit, route match), the
 * response helpers, and the process around it (server_spawn).
 *
 * civetweb answers each connection on one of its own threads; a handler
 * runs there from start to end, and a live stream keeps its thread for as
 * long as the client listens (server.threads bounds both). Each thread
 * opens its own store connection on first use and closes it when the
 * thread ends: SQLite connections are not shared between threads.
 */
#include "util/compat.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <ctype.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/random.h>
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
#include "util/log.h"
#include "util/spawn.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#undef LOG_MODULE
#define LOG_MODULE "http"

#define TOKEN_BYTES 32

/*
 * Each connection holds one of server.threads from its first byte, and
 * civetweb has no cap per peer: a process on this machine or a web page
 * that opens connections and trickles a header, or says nothing, holds
 * threads until these run out. A request must arrive in full within
 * HTTP_REQUEST_MS of its connection (or of the previous answer on a
 * kept-alive one, HTTP_KEEP_ALIVE_MS), a stalled read or write of an
 * answer gives up as long after; a browser or curl sends a request in
 * milliseconds. A live stream is not bound by them (its WebSocket reads
 * wait HTTP_WS_READ_MS, and the stream pings well within that).
 */
#define HTTP_REQUEST_MS	   "5000"
#define HTTP_KEEP_ALIVE_MS "1000"
#define HTTP_WS_READ_MS	   "30000"

/* This thread's store connection, opened on its first request. */
static __thread struct store *thread_store;

/* ---- responses ----------------------------------------------------------- */

/* Headers every answer carries: nothing cached, nothing sniffed. */
#define COMMON_HEADERS                                                         \
	"Cache-Control: no-store\r\n"                                          \
	"X-Content-Type-Options: nosniff\r\n"                                  \
	"Referrer-Policy: no-referrer\r\n"

static void
send_head(struct req *rq, int status, const char *type, size_t len,
	  const char *extra)
{
	rq->status = status;
	mg_printf(rq->conn,
		  "HTTP/1.1 %d %s\r\n"
		  "Content-Type: %s\r\n"
		  "Content-Length: %zu\r\n" COMMON_HEADERS "%s\r\n",
		  status, mg_get_response_code_text(rq->conn, status), type,
		  len, extra ? extra : "");
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
	send_head(rq, status, type, len, NULL);
	if (len && strcmp(rq->method, "HEAD"))
		mg_write(rq->conn, text, len);
}

void
http_page(struct req *rq, const char *type, const char *text, size_t len)
{
	send_head(rq, 200, type, len,
		  "Content-Security-Policy: default-src 'none'; "
		  "script-src 'self'; style-src 'self'; img-src 'self' data:; "
		  "connect-src 'self'; base-uri 'none'; form-action 'self'; "
		  "frame-ancestors 'none'\r\n");
	if (len && strcmp(rq->method, "HEAD"))
		mg_write(rq->conn, text, len);
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

int
http_query(const struct req *rq, const char *name, char *out, size_t len)
{
	if (!rq->query || len == 0)
		return 0;
	return mg_get_var(rq->query, strlen(rq->query), name, out, len) >= 0;
}

int
http_body(struct req *rq)
{
	const struct mg_request_info *ri;
	char chunk[8192];
	int n;

	if (rq->body_ready)
		return 0;
	ri = mg_get_request_info(rq->conn);
	if (ri->content_length > (long long)rq->srv->max_body)
		goto too_large;
	while ((n = mg_read(rq->conn, chunk, sizeof(chunk))) > 0) {
		if (rq->body.len + (size_t)n > rq->srv->max_body)
			goto too_large;
		buf_add(&rq->body, chunk, (size_t)n);
	}
	rq->body_ready = 1;
	return 0;
too_large:
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

/*
 * Compares in time that depends only on the expected token's length, so
 * a wrong guess tells nothing about how much of it was right.
 */
static int
token_equal(const char *given, const char *want)
{
	size_t lg = strlen(given), lw = strlen(want), i;
	unsigned char diff = lg != lw;

	for (i = 0; i < lw; i++)
		diff |= (unsigned char)(want[i] ^ (i < lg ? given[i] : 0));
	return diff == 0;
}

int
http_authorized(const struct req *rq, int query_token)
{
	const char *h = mg_get_header(rq->conn, "Authorization");
	char q[TOKEN_BYTES * 2 + 8];

	if (h && !strncasecmp(h, "Bearer ", 7))
		return token_equal(h + 7, rq->srv->token);
	if (query_token && http_query(rq, "access_token", q, sizeof(q)))
		return token_equal(q, rq->srv->token);
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
 * Origin's); a Host without one passes on its name (civetweb's own
 * WebSocket client sends none, and a browser names any port but 80).
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
	const char *origin = mg_get_header(rq->conn, "Origin");

	if (origin &&
	    (strncmp(origin, "http://", 7) || strchr(origin + 7, '/') ||
	     !authority_is_ours(rq->srv, origin + 7, 1))) {
		http_error(rq, 403, "forbidden_origin",
			   "the Origin header '%s' is not this server's own "
			   "(http://%s:%d): a page from elsewhere may not call "
			   "baton",
			   origin, own_name(rq->srv), rq->srv->port);
		return -1;
	}
	return 0;
}

int
http_guard(struct req *rq)
{
	const char *host = mg_get_header(rq->conn, "Host");
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

struct store *
http_thread_store(struct server *srv)
{
	struct err e = ERR_INIT;

	if (!thread_store && store_open(srv->store_spec, &thread_store, &e))
		log_error("cannot open the store: %s", e.msg);
	return thread_store;
}

int
http_call(struct server *srv, const char *method, const char *path,
	  const char *body, size_t len, struct buf *out)
{
	struct req rq = { .srv = srv, .method = method, .path = path,
			  .body = BUF_INIT, .body_ready = 1, .capture = out };
	const struct route *r;
	char *segs = xstrdup(path);
	int known;

	buf_add(&rq.body, body ? body : "", len);
	r = find_route(&rq, segs, &known);
	rq.store = http_thread_store(srv);
	if (!r)
		http_error(&rq, 404, "not_found", "no route %s %s", method,
			   path);
	else if (!rq.store)
		http_error(&rq, 500, "internal", "cannot open the store");
	else
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

static int
dispatch(struct mg_connection *conn, void *arg)
{
	const struct mg_request_info *ri = mg_get_request_info(conn);
	struct req rq = { .srv = arg, .conn = conn, .body = BUF_INIT };
	const struct route *r;
	char *path, *segs, q[256];
	size_t len;
	int known = 0, query_token, signed_route;

	rq.method = ri->request_method;
	path = xstrdup(ri->local_uri ? ri->local_uri : "/");
	len = strlen(path);
	if (len > 1 && path[len - 1] == '/')
		path[len - 1] = '\0'; /* "/api/v1/runs/" is "/api/v1/runs" */
	rq.path = path;
	rq.query = ri->query_string;
	segs = xmalloc(len + 1);
	r = is_api(rq.path) ? find_route(&rq, segs, &known) : NULL;
	signed_route = r && (r->flags & ROUTE_F_SIGNED);
	/* a signed route proves its requests itself: its Host is free */
	if (signed_route ? guard_origin(&rq) : http_guard(&rq))
		goto out;
	if (!is_api(rq.path)) {
		if (!assets_serve(&rq))
			http_error(&rq, 404, "not_found", "no page '%s'",
				   rq.path);
		goto out;
	}
	query_token = r && (r->flags & ROUTE_F_QUERY_TOKEN);
	if (!signed_route && !http_authorized(&rq, query_token)) {
		if (!query_token &&
		    http_query(&rq, "access_token", q, sizeof(q)))
			http_error(&rq, 401, "unauthorized",
				   "?access_token= opens the live stream only "
				   "(/api/v1/events, /api/v1/ws): send "
				   "Authorization: Bearer $(cat .baton/token)");
		else
			http_error(&rq, 401, "unauthorized",
				   "a bearer token is required: Authorization: "
				   "Bearer $(cat .baton/token)");
		goto out;
	}
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
	rq.store = http_thread_store(rq.srv);
	if (!rq.store) {
		http_error(&rq, 500, "internal", "cannot open the store");
		goto out;
	}
	r->fn(&rq);
out:
	metrics_count(rq.status);
	buf_release(&rq.body);
	free(segs);
	free(path);
	return rq.status ? rq.status : 200;
}

/* ---- the process --------------------------------------------------------- */

static void
exit_thread(const struct mg_context *ctx, int type, void *ptr)
{
	(void)ctx;
	(void)type;
	(void)ptr;
	store_close(thread_store);
	thread_store = NULL;
}

static int
log_message(const struct mg_connection *conn, const char *msg)
{
	(void)conn;
	log_warn("%s", msg);
	return 1;
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

int
server_token(const struct workspace *ws, char **out, struct err *e)
{
	char *path = xasprintf("%s/token", ws->dir);
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
					     "%s holds no token (at least 16 "
					     "characters); remove it and a new "
					     "one is made",
					     path);
			goto out;
		}
		if (rc != -ENOENT) {
			rc = err_set(e, rc, "cannot read the API token: %s",
				     re.msg);
			goto out;
		}
		re = (struct err)ERR_INIT;
		rc = make_token(path, out, &re);
		if (rc != -EEXIST)
			break;
	}
	if (rc)
		err_set(e, rc, "cannot create the API token: %s", re.msg);
out:
	buf_release(&b);
	free(path);
	return rc;
}

/* "HOST:PORT" -> what civetweb's listening_ports wants ("HOST:PORT"). */
static int
check_listen(const char *listen, struct err *e)
{
	const char *colon = strrchr(listen, ':');

	if (!colon || colon == listen || !colon[1])
		return err_set(e, BATON_EINVAL,
			       "--listen wants HOST:PORT, such as "
			       "127.0.0.1:7070, not '%s'",
			       listen);
	return 0;
}

/* Starts civetweb and the hub; fills url. */
static int
start(struct server *srv, const char *listen, struct mg_context **ctxp,
      char *url, size_t url_len, struct err *e)
{
	struct mg_callbacks cb;
	struct mg_server_port port;
	struct mg_context *ctx;
	char threads[16], host[256];
	/* civetweb answers CORS preflights itself, allowing any origin
	 * ("*"), unless these are empty: the dashboard is same-origin and
	 * a page anywhere else gets no CORS at all */
	const char *options[] = {
		"listening_ports", listen, "num_threads", threads,
		"enable_keep_alive", "yes", "tcp_nodelay", "1",
		"request_timeout_ms", HTTP_REQUEST_MS,
		"keep_alive_timeout_ms", HTTP_KEEP_ALIVE_MS,
		"websocket_timeout_ms", HTTP_WS_READ_MS,
		"access_control_allow_origin", "",
		"access_control_allow_methods", "",
		"access_control_allow_headers", "", NULL,
	};
	size_t hlen;
	int rc;

	rc = check_listen(listen, e);
	if (rc)
		return rc;
	snprintf(threads, sizeof(threads), "%d", srv->cfg->server.threads);
	memset(&cb, 0, sizeof(cb));
	cb.exit_thread = exit_thread;
	cb.log_message = log_message;
	rc = hub_start(srv->store_spec, NULL, &srv->hub, e);
	if (rc)
		return rc;
	ctx = mg_start(&cb, srv, options);
	if (!ctx)
		return err_set(e, BATON_EINVAL,
			       "cannot listen on %s (is the port taken? "
			       "--listen HOST:PORT picks another, port 0 any "
			       "free one)",
			       listen);
	if (mg_get_server_ports(ctx, 1, &port) < 1) {
		mg_stop(ctx);
		return err_set(e, BATON_EINVAL, "cannot tell the port of %s",
			       listen);
	}
	hlen = (size_t)(strrchr(listen, ':') - listen);
	if (hlen >= sizeof(host))
		hlen = sizeof(host) - 1;
	memcpy(host, listen, hlen);
	host[hlen] = '\0';
	/* set before any handler is: the registration's lock publishes
	 * them to civetweb's threads */
	snprintf(srv->listen_host, sizeof(srv->listen_host), "%s", host);
	srv->port = port.port;
	mg_set_request_handler(ctx, "/", dispatch, srv);
	stream_ws_register(ctx, srv);
	if (!strcmp(host, "0.0.0.0") || !*host)
		snprintf(host, sizeof(host), "127.0.0.1");
	snprintf(url, url_len, "http://%s:%d/", host, port.port);
	*ctxp = ctx;
	return 0;
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
	struct mg_context *ctx = NULL;
	struct err e = ERR_INIT;
	char url[320], *url_file;

	srv.ws = o->ws;
	srv.cfg = o->cfg;
	srv.store_spec = o->store_spec;
	srv.token = o->token;
	srv.max_body = (size_t)o->cfg->server.max_body_kb * 1024;
	srv.started_ms = time_now_ms();
	mg_init_library(0);
	if (start(&srv, o->listen, &ctx, url, sizeof(url), &e) == 0) {
		url_file = xasprintf("%s/http.url", o->ws->dir);
		fs_write_atomic(url_file, url, strlen(url), NULL);
		dprintf(ready_fd, "OK %s\n", url);
	} else {
		dprintf(ready_fd, "ERR %s\n", e.msg);
		_exit(1);
	}
	close(ready_fd);
	server__await_stop();
	mg_stop(ctx);
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
