/*
 * The GitHub REST (v3) client: one request function, Link pagination,
 * ETags, rate limits and the per-day request log. See github.h.
 */
#include "util/compat.h"

#include "forge/github.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/redact.h"
#include "util/xalloc.h"

#define GH_BODY_MAX (64u << 20)   /* a response larger than this fails */
#define GH_LOG_CAP (8u << 20)     /* default bytes per day's log */
#define GH_LOG_BODY 2048          /* bytes of a body kept in the log */
#define GH_TRIES 3                /* rate-limit waits per request */
#define GH_LOG_DAYS 7             /* default days of logs kept */
#define GH_USER_AGENT "baton-forge"
#define GH_API_VERSION "2022-11-28"

struct gh_etag {
	char *url, *etag;
	struct gh_etag *next;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int
gh_client_init(struct gh_client *c, const char *api_url, const char *repo,
	       const char *token, const char *token_env, struct err *e)
{
	size_t n;

	memset(c, 0, sizeof(*c));
	if (!api_url || !*api_url)
		return err_set(e, BATON_EINVAL, "forge: api_url is empty");
	if (!repo || !strchr(repo, '/') || strchr(repo, '/') == repo ||
	    strchr(strchr(repo, '/') + 1, '/') || repo[strlen(repo) - 1] == '/')
		return err_set(e, BATON_EINVAL,
			       "forge: repo '%s' is not owner/name",
			       repo ? repo : "");
	c->api_url = xstrdup(api_url);
	n = strlen(c->api_url);
	while (n > 0 && c->api_url[n - 1] == '/')
		c->api_url[--n] = '\0';
	c->repo = xstrdup(repo);
	c->token = xstrdup_or_null(token && *token ? token : NULL);
	c->token_env = xstrdup(token_env ? token_env : "the token variable");
	c->max_wait_s = 60;
	c->rate_remaining = -1;
	pthread_once(&curl_once, curl_init);
	return 0;
}

void
gh_client_release(struct gh_client *c)
{
	struct gh_etag *t, *next;

	for (t = c->etags; t; t = next) {
		next = t->next;
		free(t->url);
		free(t->etag);
		free(t);
	}
	if (c->token)
		memset(c->token, 0, strlen(c->token));
	free(c->api_url);
	free(c->repo);
	free(c->token);
	free(c->token_env);
	free(c->log_dir);
	free(c->log_error);
	memset(c, 0, sizeof(*c));
}

const char *
gh_etag_get(const struct gh_client *c, const char *url)
{
	const struct gh_etag *t;

	for (t = c->etags; t; t = t->next)
		if (strcmp(t->url, url) == 0)
			return t->etag;
	return NULL;
}

void
gh_etag_set(struct gh_client *c, const char *url, const char *etag)
{
	struct gh_etag *t;

	for (t = c->etags; t; t = t->next)
		if (strcmp(t->url, url) == 0)
			break;
	if (!t) {
		t = xcalloc(1, sizeof(*t));
		t->url = xstrdup(url);
		t->next = c->etags;
		c->etags = t;
	}
	free(t->etag);
	t->etag = etag ? xstrdup(etag) : NULL;
}

int
gh_etag_each(const struct gh_client *c,
	     int (*fn)(void *arg, const char *url, const char *etag),
	     void *arg)
{
	const struct gh_etag *t;
	int rc;

	for (t = c->etags; t; t = t->next)
		if (t->etag && (rc = fn(arg, t->url, t->etag)) != 0)
			return rc;
	return 0;
}

void
gh_response_release(struct gh_response *r)
{
	json_decref(r->json);
	free(r->next_url);
	free(r->etag);
	memset(r, 0, sizeof(*r));
}

/* --- one exchange ------------------------------------------------------ */

struct exchange {
	struct buf body;
	struct gh_response *r;
};

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
	struct exchange *x = arg;

	if (buf_add(&x->body, data, size * n) < 0)
		return 0; /* over GH_BODY_MAX: curl fails the transfer */
	return size * n;
}

/* The URL of rel="next" in a Link header value, or NULL. */
static char *
link_next(const char *v)
{
	const char *lt, *gt;

	while ((lt = strchr(v, '<')) != NULL) {
		gt = strchr(lt, '>');
		if (!gt)
			return NULL;
		v = gt + 1;
		{
			const char *end = strchr(v, ',');
			size_t span = end ? (size_t)(end - v) : strlen(v);
			const char *rel = strstr(v, "rel=\"next\"");

			if (rel && (size_t)(rel - v) < span) {
				char *url = xmalloc((size_t)(gt - lt));

				memcpy(url, lt + 1, (size_t)(gt - lt - 1));
				url[gt - lt - 1] = '\0';
				return url;
			}
		}
	}
	return NULL;
}

static char *
header_value(const char *line, size_t len, const char *name)
{
	size_t nl = strlen(name);
	const char *v, *end = line + len;

	if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return NULL;
	v = line + nl + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' ||
			   end[-1] == ' '))
		end--;
	{
		char *s = xmalloc((size_t)(end - v) + 1);

		memcpy(s, v, (size_t)(end - v));
		s[end - v] = '\0';
		return s;
	}
}

static size_t
on_header(char *data, size_t size, size_t n, void *arg)
{
	struct exchange *x = arg;
	size_t len = size * n;
	char *v;

	if ((v = header_value(data, len, "etag")) != NULL) {
		free(x->r->etag);
		x->r->etag = v;
	} else if ((v = header_value(data, len, "link")) != NULL) {
		free(x->r->next_url);
		x->r->next_url = link_next(v);
		free(v);
	} else if ((v = header_value(data, len, "x-ratelimit-remaining"))) {
		x->r->rate_remaining = strtol(v, NULL, 10);
		free(v);
	} else if ((v = header_value(data, len, "x-ratelimit-reset"))) {
		x->r->rate_reset = strtoll(v, NULL, 10);
		free(v);
	} else if ((v = header_value(data, len, "retry-after"))) {
		x->r->retry_after = strtoll(v, NULL, 10);
		free(v);
	}
	return len;
}

/* The full URL of path: path itself when it is one already. */
static char *
full_url(const struct gh_client *c, const char *path)
{
	struct buf u = BUF_INIT;

	if (strncmp(path, "http://", 7) == 0 ||
	    strncmp(path, "https://", 8) == 0)
		buf_adds(&u, path);
	else
		buf_addf(&u, "%s%s", c->api_url, path);
	return buf_detach(&u, NULL);
}

/* The endpoint for messages: the URL less api_url and its query. */
static void
endpoint(const struct gh_client *c, const char *url, struct buf *out)
{
	size_t n = strlen(c->api_url);
	const char *p = strncmp(url, c->api_url, n) == 0 ? url + n : url;

	buf_add(out, p, strcspn(p, "?"));
}

/* Replaces each copy of the token in b with [redacted:TOKEN_ENV]. */
static void
hide_token(const struct gh_client *c, struct buf *b)
{
	struct buf out = BUF_INIT;
	const char *p, *hit;
	size_t tl;

	if (!c->token || !(tl = strlen(c->token)) || !strstr(b->ptr, c->token))
		return;
	for (p = b->ptr; (hit = strstr(p, c->token)) != NULL; p = hit + tl) {
		buf_add(&out, p, (size_t)(hit - p));
		buf_addf(&out, "[redacted:%s]", c->token_env);
	}
	buf_adds(&out, p);
	buf_reset(b);
	buf_add(b, out.ptr, out.len);
	buf_release(&out);
}

/* The record's copy of text: the client's token and every secret
 * redact.h knows (the environment's, forge.token_env's) replaced. */
static void
redact_line(const struct gh_client *c, struct buf *b)
{
	hide_token(c, b);
	redact_buf(b);
}

static void
log_fail(struct gh_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Keeps why a line was not logged (the first reason until one is). */
static void
log_fail(struct gh_client *c, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	free(c->log_error);
	c->log_error = buf_detach(&b, NULL);
}

/*
 * log_dir, made 0700 when missing; 0 when it is a directory of ours that
 * is no link (a link there would send the log, and the requests and
 * answers it holds, wherever the link points).
 */
static int
log_dir_ready(struct gh_client *c)
{
	struct err e = ERR_INIT;
	struct stat st;

	if (fs_mkdir_p(c->log_dir, 0700, &e) < 0) {
		log_fail(c, "forge log: %s", e.msg);
		return -1;
	}
	if (lstat(c->log_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_fail(c, "forge log: '%s' is not a directory", c->log_dir);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		log_fail(c, "forge log: '%s' belongs to uid %ld, not to baton's "
			 "user (%ld): not logging there", c->log_dir,
			 (long)st.st_uid, (long)geteuid());
		return -1;
	}
	return 0;
}

/*
 * Removes the logs of days before the last keep days (by the date in
 * their names; anything else in log_dir is left alone). unlink removes a
 * link itself, never what it points to.
 */
static void
log_prune(const struct gh_client *c, time_t now, int keep)
{
	time_t oldest = now - (time_t)(keep - 1) * 86400;
	char cut[16], name[32];
	struct tm tm;
	struct dirent *d;
	DIR *dir;

	gmtime_r(&oldest, &tm);
	strftime(cut, sizeof(cut), "%Y-%m-%d", &tm);
	dir = opendir(c->log_dir);
	if (!dir)
		return;
	while ((d = readdir(dir)) != NULL) {
		const char *n = d->d_name;
		char *path;

		/* log-YYYY-MM-DD.jsonl: 20 characters, the date at 4 */
		if (strlen(n) != 20 || strncmp(n, "log-", 4) != 0 ||
		    strcmp(n + 14, ".jsonl") != 0)
			continue;
		snprintf(name, sizeof(name), "%.10s", n + 4);
		if (strcmp(name, cut) >= 0)
			continue;
		path = xasprintf("%s/%s", c->log_dir, n);
		unlink(path);
		free(path);
	}
	closedir(dir);
}

/* A JSON object of the headers worth keeping (none secret). */
static json_t *
log_headers_sent(const struct gh_client *c, const char *method,
		 const char *url)
{
	json_t *h = json_pack("{s:s, s:s}", "accept",
			      "application/vnd.github+json",
			      "x-github-api-version", GH_API_VERSION);
	const char *tag = strcmp(method, "GET") == 0 ? gh_etag_get(c, url) :
						       NULL;

	if (c->token) {
		/* the value is never put in, to be taken out again */
		char *v = xasprintf("Bearer [redacted:%s]", c->token_env);

		json_object_set_new(h, "authorization", json_string(v));
		free(v);
	}
	if (tag)
		json_object_set_new(h, "if-none-match", json_string(tag));
	return h;
}

static json_t *
log_headers_got(const struct gh_response *r)
{
	json_t *h = json_object();

	if (r->etag)
		json_object_set_new(h, "etag", json_string(r->etag));
	if (r->next_url)
		json_object_set_new(h, "link-next", json_string(r->next_url));
	if (r->rate_remaining >= 0)
		json_object_set_new(h, "x-ratelimit-remaining",
				    json_integer(r->rate_remaining));
	if (r->rate_reset > 0)
		json_object_set_new(h, "x-ratelimit-reset",
				    json_integer(r->rate_reset));
	if (r->retry_after >= 0)
		json_object_set_new(h, "retry-after",
				    json_integer(r->retry_after));
	return h;
}

/*
 * One line in the day's log, redacted. When the next line would pass the
 * cap, one last line says the log is capped and the rest of the day is
 * not kept. The file is opened with O_NOFOLLOW (fs_open_nofollow): a link
 * planted at its path is refused, not written through.
 */
static void
log_request(struct gh_client *c, const char *method, const char *url,
	    const struct gh_response *r, long ms, const json_t *sent,
	    const struct buf *body)
{
	struct buf path = BUF_INIT, line = BUF_INIT, ep = BUF_INIT;
	size_t cap = c->log_cap ? c->log_cap : GH_LOG_CAP;
	int keep = c->log_keep_days > 0 ? c->log_keep_days : GH_LOG_DAYS;
	size_t n = strlen(c->api_url);
	struct err e = ERR_INIT;
	time_t now = time(NULL);
	struct tm tm;
	char day[16], ts[32];
	struct stat st;
	json_t *j;
	char *s;
	int fd;

	if (!c->log_dir || log_dir_ready(c) < 0)
		return;
	gmtime_r(&now, &tm);
	strftime(day, sizeof(day), "%Y-%m-%d", &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (strcmp(day, c->log_day) != 0) {
		log_prune(c, now, keep);
		snprintf(c->log_day, sizeof(c->log_day), "%s", day);
	}
	buf_addf(&path, "%s/log-%s.jsonl", c->log_dir, day);
	endpoint(c, url, &ep);
	j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:o, s:o}",
		      "time", ts,
		      "method", method, "path", ep.ptr, "url",
		      strncmp(url, c->api_url, n) == 0 ? url + n : url,
		      "status", (json_int_t)r->status, "ms", (json_int_t)ms,
		      "rate_remaining", (json_int_t)r->rate_remaining,
		      "request_headers", log_headers_sent(c, method, url),
		      "response_headers", log_headers_got(r));
	if (sent) {
		struct buf b = BUF_INIT;
		char *d = json_dumps(sent, JSON_COMPACT);

		buf_add_cut(&b, d ? d : "", d ? strlen(d) : 0, GH_LOG_BODY);
		free(d);
		json_object_set_new(j, "request", json_string(b.ptr));
		buf_release(&b);
	}
	if (body && body->len) {
		struct buf b = BUF_INIT;

		buf_add_cut(&b, body->ptr, body->len, GH_LOG_BODY);
		json_object_set_new(j, "response", json_stringn(b.ptr, b.len));
		buf_release(&b);
	}
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	buf_adds(&line, s ? s : "{}");
	free(s);
	buf_addch(&line, '\n');
	redact_line(c, &line);
	fd = fs_open_nofollow(path.ptr, O_WRONLY | O_APPEND | O_CREAT, 0600,
			      &e);
	if (fd < 0) {
		log_fail(c, "forge log: %s", e.msg);
		goto out;
	}
	if (fstat(fd, &st) == 0 && (size_t)st.st_size >= cap) {
		close(fd); /* capped, and said so already */
		goto out;
	}
	if ((size_t)st.st_size + line.len >= cap) {
		buf_reset(&line);
		buf_addf(&line, "{\"capped\":true,\"cap_bytes\":%zu,\"note\":"
			 "\"the log of this day reached its cap: later "
			 "requests are not logged\"}\n", cap);
	}
	if (fs_write_all(fd, line.ptr, line.len) < 0)
		log_fail(c, "forge log: cannot write '%s': %s", path.ptr,
			 strerror(errno));
	close(fd);
out:
	buf_release(&path);
	buf_release(&line);
	buf_release(&ep);
}

/*
 * "METHOD /endpoint: STATUS message[: first error's message]". GitHub's
 * errors say "message" and "errors"; an answer in RFC 7807's
 * problem+json (a proxy in front of GitHub Enterprise, or Prism in the
 * tests, whose list is "validation") says "title" and "detail".
 */
static int
http_error(const struct gh_client *c, const char *method, const char *url,
	   const struct gh_response *r, int rc, struct err *e)
{
	struct buf m = BUF_INIT, ep = BUF_INIT;
	const char *msg = NULL, *first = NULL;
	json_t *errs;

	endpoint(c, url, &ep);
	if (r->json) {
		msg = json_string_value(json_object_get(r->json, "message"));
		if (!msg)
			msg = json_string_value(json_object_get(r->json,
								"title"));
		errs = json_object_get(r->json, "errors");
		if (!json_is_array(errs))
			errs = json_object_get(r->json, "validation");
		if (json_is_array(errs) && json_array_size(errs) > 0)
			first = json_string_value(json_object_get(
				json_array_get(errs, 0), "message"));
	}
	buf_addf(&m, "%s %s: %ld", method, ep.ptr, r->status);
	if (first)
		buf_addf(&m, " %s", first);
	else if (msg)
		buf_addf(&m, " %s", msg);
	if (first && msg && strcmp(msg, "Validation Failed") != 0)
		buf_addf(&m, " (%s)", msg);
	if (r->status == 401)
		buf_addf(&m, ": check the token in $%s", c->token_env);
	else if (r->status == 404)
		buf_addf(&m, ": no repository %s at %s, or $%s may not see it",
			 c->repo, c->api_url, c->token_env);
	redact_line(c, &m);
	rc = err_set(e, rc, "%s", m.ptr);
	buf_release(&m);
	buf_release(&ep);
	return rc;
}

/* One HTTP exchange, no retries. Returns 0, or -EIO with e set. */
static int
exchange(struct gh_client *c, const char *method, const char *url,
	 const char *payload, struct gh_response *r, struct buf *raw,
	 struct err *e)
{
	struct exchange x = { BUF_INIT, r };
	struct curl_slist *h = NULL;
	struct buf auth = BUF_INIT, inm = BUF_INIT, ep = BUF_INIT;
	const char *tag = strcmp(method, "GET") == 0 ? gh_etag_get(c, url) :
						       NULL;
	CURL *curl;
	CURLcode cc;
	int rc = 0;

	buf_init(&x.body, GH_BODY_MAX);
	memset(r, 0, sizeof(*r));
	r->rate_remaining = -1;
	r->retry_after = -1;
	curl = curl_easy_init();
	if (!curl)
		return err_set(e, -ENOMEM, "forge: curl_easy_init failed");
	h = curl_slist_append(h, "Accept: application/vnd.github+json");
	h = curl_slist_append(h, "X-GitHub-Api-Version: " GH_API_VERSION);
	h = curl_slist_append(h, "Content-Type: application/json");
	if (c->token) {
		buf_addf(&auth, "Authorization: Bearer %s", c->token);
		h = curl_slist_append(h, auth.ptr);
	}
	if (tag) {
		buf_addf(&inm, "If-None-Match: %s", tag);
		h = curl_slist_append(h, inm.ptr);
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, GH_USER_AGENT);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, &x);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, 300L);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	if (payload)
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload);
	c->calls++;
	cc = curl_easy_perform(curl);
	if (cc != CURLE_OK) {
		endpoint(c, url, &ep);
		rc = err_set(e, -EIO, "%s %s: %s", method, ep.ptr,
			     curl_easy_strerror(cc));
	} else {
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
		/* a NUL (\u0000) is kept: its reader refuses that text by
		 * name (an issue's body) rather than the whole answer failing */
		if (x.body.len)
			r->json = json_loadb(x.body.ptr, x.body.len,
					     JSON_ALLOW_NUL, NULL);
	}
	buf_add(raw, x.body.ptr, x.body.len);
	curl_easy_cleanup(curl);
	curl_slist_free_all(h);
	if (auth.len)
		memset(auth.ptr, 0, auth.len);
	buf_release(&auth);
	buf_release(&inm);
	buf_release(&ep);
	buf_release(&x.body);
	return rc;
}

/* Seconds this answer asks us to wait, or -1 when it is no rate limit. */
static int64_t
rate_wait(const struct gh_response *r, const char **why)
{
	int64_t now = (int64_t)time(NULL);

	if (r->status != 403 && r->status != 429)
		return -1;
	if (r->retry_after >= 0) {
		*why = "secondary rate limit";
		return r->retry_after;
	}
	if (r->rate_remaining == 0) {
		*why = "primary rate limit";
		return r->rate_reset > now ? r->rate_reset - now : 0;
	}
	return -1;
}

static int
wait_out(struct gh_client *c, int64_t seconds, const char *why)
{
	if (c->wait)
		return c->wait(c->wait_arg, seconds, why);
	if (seconds > c->max_wait_s)
		return 1;
	if (seconds > 0)
		sleep((unsigned)seconds);
	return 0;
}

int
gh_request(struct gh_client *c, const char *method, const char *path,
	   json_t *body, struct gh_response *r, struct err *e)
{
	char *url = full_url(c, path), *payload = NULL;
	struct timespec t0, t1;
	struct buf raw = BUF_INIT;
	const char *why = NULL;
	int64_t secs;
	int rc = 0, tries;

	if (body)
		payload = json_dumps(body, JSON_COMPACT);
	for (tries = 0;; tries++) {
		buf_reset(&raw);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = exchange(c, method, url, payload, r, &raw, e);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		log_request(c, method, url, r,
			    (long)((t1.tv_sec - t0.tv_sec) * 1000 +
				   (t1.tv_nsec - t0.tv_nsec) / 1000000),
			    body, &raw);
		if (rc < 0)
			goto out;
		if (r->rate_remaining >= 0) {
			c->rate_remaining = r->rate_remaining;
			c->rate_reset = r->rate_reset;
		}
		secs = rate_wait(r, &why);
		if (secs < 0)
			break;
		if (tries + 1 >= GH_TRIES || wait_out(c, secs, why) != 0) {
			rc = http_error(c, method, url, r, BATON_EBUSY, e);
			err_prefix(e, "%s: waiting %llds refused", why,
				   (long long)secs);
			goto out;
		}
		c->waits++;
		c->wait_seconds += secs;
		gh_response_release(r);
	}
	if (r->status == 304) {
		r->not_modified = 1;
		c->not_modified++;
	} else if (r->status >= 200 && r->status < 300) {
		if (r->etag && strcmp(method, "GET") == 0)
			gh_etag_set(c, url, r->etag);
	} else {
		rc = http_error(c, method, url, r,
				r->status < 500 ? BATON_EINVAL : -EIO, e);
	}
out:
	buf_release(&raw);
	free(payload);
	free(url);
	return rc;
}

/* path with per_page=100 added to its query. */
static char *
paged(const char *path)
{
	struct buf b = BUF_INIT;

	buf_addf(&b, "%s%cper_page=100", path, strchr(path, '?') ? '&' : '?');
	return buf_detach(&b, NULL);
}

int
gh_list(struct gh_client *c, const char *path, json_t **out,
	int *not_modified, struct err *e)
{
	struct gh_response r = { 0 };
	char *next = paged(path);
	json_t *all = json_array();
	int rc = 0, first = 1;

	*out = NULL;
	if (not_modified)
		*not_modified = 0;
	while (next) {
		rc = gh_request(c, "GET", next, NULL, &r, e);
		free(next);
		next = NULL;
		if (rc < 0) {
			gh_response_release(&r); /* the error's body */
			break;
		}
		if (r.not_modified && first) {
			/* the first page unchanged: so is the listing, as far
			 * as an ETag can tell (GitHub's ETag covers the page) */
			if (not_modified)
				*not_modified = 1;
			gh_response_release(&r);
			json_decref(all);
			return 0;
		}
		if (!json_is_array(r.json)) {
			rc = err_set(e, BATON_EINVAL,
				     "GET %s: %ld answer is not a JSON array",
				     path, r.status);
			gh_response_release(&r);
			break;
		}
		json_array_extend(all, r.json);
		next = r.next_url ? xstrdup(r.next_url) : NULL;
		first = 0;
		gh_response_release(&r);
	}
	if (rc < 0) {
		json_decref(all);
		return rc;
	}
	*out = all;
	return 0;
}

/* --- thin wrappers ------------------------------------------------------ */

static char *
repo_path(const struct gh_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static char *
repo_path(const struct gh_client *c, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	buf_addf(&b, "/repos/%s", c->repo);
	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	return buf_detach(&b, NULL);
}

/* A request whose JSON answer goes to *out (NULL: dropped). */
static int
call(struct gh_client *c, const char *method, char *path, json_t *body,
     json_t **out, struct err *e)
{
	struct gh_response r = { 0 };
	int rc = gh_request(c, method, path, body, &r, e);

	free(path);
	json_decref(body);
	if (out)
		*out = NULL;
	if (rc == 0 && out) {
		*out = r.json;
		r.json = NULL;
	}
	gh_response_release(&r);
	return rc;
}

static int
list(struct gh_client *c, char *path, json_t **out, int *not_modified,
     struct err *e)
{
	int rc = gh_list(c, path, out, not_modified, e);

	free(path);
	return rc;
}

int
gh_issues_with_label(struct gh_client *c, const char *label, json_t **out,
		     int *not_modified, struct err *e)
{
	char *esc = curl_easy_escape(NULL, label, 0);
	int rc = list(c, repo_path(c, "/issues?state=open&labels=%s", esc),
		      out, not_modified, e);
	size_t i;

	curl_free(esc);
	if (rc < 0 || !*out)
		return rc;
	/* GitHub's issue list has the pull requests too: skip them */
	for (i = json_array_size(*out); i-- > 0;)
		if (json_object_get(json_array_get(*out, i), "pull_request"))
			json_array_remove(*out, i);
	return 0;
}

int
gh_issue_get(struct gh_client *c, long number, json_t **out, struct err *e)
{
	return call(c, "GET", repo_path(c, "/issues/%ld", number), NULL, out,
		    e);
}

int
gh_issue_comment(struct gh_client *c, long number, const char *text,
		 json_t **out, struct err *e)
{
	return call(c, "POST", repo_path(c, "/issues/%ld/comments", number),
		    json_pack("{s:s}", "body", text), out, e);
}

int
gh_labels_add(struct gh_client *c, long number, const char *const *labels,
	      struct err *e)
{
	json_t *arr = json_array();

	for (; *labels; labels++)
		json_array_append_new(arr, json_string(*labels));
	return call(c, "POST", repo_path(c, "/issues/%ld/labels", number),
		    json_pack("{s:o}", "labels", arr), NULL, e);
}

int
gh_pull_create(struct gh_client *c, const char *title, const char *head,
	       const char *base, const char *text, int draft, json_t **out,
	       struct err *e)
{
	return call(c, "POST", repo_path(c, "/pulls"),
		    json_pack("{s:s, s:s, s:s, s:s, s:b}", "title", title,
			      "head", head, "base", base, "body",
			      text ? text : "", "draft", draft),
		    out, e);
}

int
gh_pull_get(struct gh_client *c, long number, json_t **out, struct err *e)
{
	return call(c, "GET", repo_path(c, "/pulls/%ld", number), NULL, out,
		    e);
}

int
gh_pulls_for_head(struct gh_client *c, const char *head, json_t **out,
		  struct err *e)
{
	char owner[256];
	size_t n = strcspn(c->repo, "/");
	char *esc = curl_easy_escape(NULL, head, 0);
	int rc;

	snprintf(owner, sizeof(owner), "%.*s", (int)n, c->repo);
	rc = list(c, repo_path(c, "/pulls?state=all&head=%s:%s", owner, esc),
		  out, NULL, e);
	curl_free(esc);
	return rc;
}

int
gh_pull_merge(struct gh_client *c, long number, const char *method,
	      json_t **out, struct err *e)
{
	return call(c, "PUT", repo_path(c, "/pulls/%ld/merge", number),
		    json_pack("{s:s}", "merge_method",
			      method ? method : "merge"),
		    out, e);
}

int
gh_pull_reviews(struct gh_client *c, long number, json_t **out,
		struct err *e)
{
	return list(c, repo_path(c, "/pulls/%ld/reviews", number), out, NULL,
		    e);
}

int
gh_pull_review_comments(struct gh_client *c, long number, json_t **out,
			struct err *e)
{
	return list(c, repo_path(c, "/pulls/%ld/comments", number), out, NULL,
		    e);
}

int
gh_statuses(struct gh_client *c, const char *ref, json_t **out,
	    struct err *e)
{
	return list(c, repo_path(c, "/commits/%s/statuses", ref), out, NULL,
		    e);
}

int
gh_combined_status(struct gh_client *c, const char *ref, json_t **out,
		   struct err *e)
{
	return call(c, "GET", repo_path(c, "/commits/%s/status", ref), NULL,
		    out, e);
}

int
gh_check_runs(struct gh_client *c, const char *ref, json_t **out,
	      struct err *e)
{
	return call(c, "GET", repo_path(c, "/commits/%s/check-runs", ref),
		    NULL, out, e);
}
