/*
 * The terminal UI over a remote serve's API (tui/remote.h). Requests are
 * plain blocking libcurl calls with a bounded time; the SSE stream is
 * read by one thread, which writes a byte to a pipe for every chunk that
 * arrives and reconnects after a second when the stream ends.
 */
#include "util/compat.h"

#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core/run.h"
#include "store/store.h"
#include "tui/remote.h"
#include "tui/tui.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/lazy.h"
#include "util/timeutil.h"
#include "util/limits.h"
#include "util/xalloc.h"

/* A request's bound; the stream has none. */
#define REMOTE_TIMEOUT_MS (15 * 1000)

struct tui_remote {
	char *url;   /* without a trailing '/' */
	char *auth;  /* "Authorization: Bearer ..." */
	int pipe[2]; /* the stream thread writes, the loop reads */
	pthread_t thread;
	int started;
	atomic_int stop;
};

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;

	if (buf_add(b, p, size * n))
		return 0; /* too big: ends the transfer */
	return size * n;
}

/*
 * method path [body]: the answer parsed into *out (NULL when it is not
 * JSON). Errors: cannot connect; 401/403 (the token); any other status
 * >= 400, with serve's error.message.
 */
/*
 * The certificates an https:// serve is checked against: the system's,
 * or the file CURL_CA_BUNDLE names, as for the curl tool (a serve with
 * its own self-signed certificate: docs/security.md "TLS").
 */
static void
trust(CURL *c)
{
	const char *ca = getenv("CURL_CA_BUNDLE");

	if (ca && *ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, ca);
}

static int
request(struct tui_remote *r, const char *method, const char *path,
	const char *body, json_t **out, struct err *e)
{
	struct curl_slist *h = NULL;
	char *url = xasprintf("%s%s", r->url, path);
	char cerr[CURL_ERROR_SIZE] = "";
	struct buf b = BUF_INIT;
	long status = 0;
	json_t *j = NULL;
	CURLcode cc;
	CURL *c;
	int rc = 0;

	buf_init(&b, HTTP_MAX_RESPONSE);
	c = curl_easy_init();
	if (!c) {
		rc = err_set(e, -ENOMEM, "cannot start a request to '%s'",
			     r->url);
		goto out;
	}
	h = curl_slist_append(h, r->auth);
	h = curl_slist_append(h, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)REMOTE_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	trust(c);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	cc = curl_easy_perform(c);
	if (cc != CURLE_OK) {
		rc = err_set(e, -EHOSTUNREACH, "cannot reach '%s': %s", r->url,
			     *cerr ? cerr : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	j = json_loadb(b.ptr, b.len, 0, NULL);
	/* a 403 is a role too low (its message says which): below */
	if (status == 401) {
		rc = err_set(e, -EACCES,
			     "'%s' refused the token (%ld): check --token-file "
			     "(serve's token is in its .baton/token)",
			     r->url, status);
		goto out;
	}
	if (status >= 400) {
		const char *msg = json_string_value(
		    json_object_get(json_object_get(j, "error"), "message"));

		rc = err_set(e, BATON_EINVAL, "%s", msg ? msg : "");
		if (!msg)
			err_set(e, BATON_EINVAL, "%s %s: HTTP %ld", method,
				path, status);
		goto out;
	}
	*out = j;
	j = NULL;
out:
	json_decref(j);
	if (c)
		curl_easy_cleanup(c);
	curl_slist_free_all(h);
	buf_release(&b);
	free(url);
	return rc;
}

struct tui_remote *
tui_remote_open(const char *url, const char *token, struct err *e)
{
	struct tui_remote *r;
	json_t *j = NULL;
	size_t len = strlen(url);

	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		err_set(e, BATON_EINVAL,
			"--url '%s': not an http:// or https:// URL", url);
		return NULL;
	}
	if (lazy_curl_load(e))
		return NULL;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	r = xcalloc(1, sizeof(*r));
	while (len && url[len - 1] == '/')
		len--;
	r->url = xasprintf("%.*s", (int)len, url);
	r->auth = xasprintf("Authorization: Bearer %s", token);
	r->pipe[0] = r->pipe[1] = -1;
	if (request(r, "GET", "/api/v1/runs?limit=1", NULL, &j, e)) {
		tui_remote_free(r);
		return NULL;
	}
	json_decref(j);
	return r;
}

static size_t
on_stream(char *p, size_t size, size_t n, void *arg)
{
	struct tui_remote *r = arg;
	char c = 0;

	(void)p;
	if (write(r->pipe[1], &c, 1) < 0) {
		/* full: a wake-up is pending already */
	}
	return size * n;
}

static int
on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct tui_remote *r = arg;

	(void)a;
	(void)b;
	(void)c;
	(void)d;
	return atomic_load(&r->stop);
}

/* The stream thread: follows GET /api/v1/events until told to stop. */
static void *
follow(void *arg)
{
	struct tui_remote *r = arg;
	char *url = xasprintf("%s/api/v1/events", r->url);

	while (!atomic_load(&r->stop)) {
		struct curl_slist *h = curl_slist_append(NULL, r->auth);
		CURL *c = curl_easy_init();
		int i;

		if (c) {
			curl_easy_setopt(c, CURLOPT_URL, url);
			curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
			curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
			curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR,
					 "http,https");
			trust(c);
			curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
			curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
			curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
			curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION,
					 on_progress);
			curl_easy_setopt(c, CURLOPT_XFERINFODATA, r);
			curl_easy_perform(c);
			curl_easy_cleanup(c);
		}
		curl_slist_free_all(h);
		/* a second before reconnecting, in steps, to stop quickly */
		for (i = 0; i < 10 && !atomic_load(&r->stop); i++)
			usleep(100 * 1000);
		on_stream(NULL, 0, 0, r); /* what happened meanwhile */
	}
	free(url);
	return NULL;
}

int
tui_remote_watch(struct tui_remote *r, struct err *e)
{
	int rc;

	if (r->started)
		return r->pipe[0];
	if (pipe2(r->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return err_set(e, -errno, "cannot make a pipe: %s",
			       strerror(errno));
	rc = pthread_create(&r->thread, NULL, follow, r);
	if (rc)
		return err_set(e, -rc, "cannot start a thread: %s",
			       strerror(rc));
	r->started = 1;
	return r->pipe[0];
}

void
tui_remote_drain(struct tui_remote *r)
{
	char b[256];

	while (r->pipe[0] >= 0 && read(r->pipe[0], b, sizeof(b)) > 0)
		;
}

void
tui_remote_free(struct tui_remote *r)
{
	if (!r)
		return;
	if (r->started) {
		atomic_store(&r->stop, 1);
		pthread_join(r->thread, NULL);
	}
	if (r->pipe[0] >= 0) {
		close(r->pipe[0]);
		close(r->pipe[1]);
	}
	free(r->url);
	free(r->auth);
	free(r);
}

static char *
str(json_t *o, const char *key)
{
	return (char *)json_string_value(json_object_get(o, key));
}

int
tui_remote_load_board(struct tui_remote *r, struct tui_model *m, struct err *e)
{
	json_t *runs = NULL, *page = NULL, *v;
	struct tui_model b;
	struct strvec pages;
	struct buf counts = BUF_INIT;
	json_int_t next = 0;
	size_t i, k;
	int rc;

	tui_model_init(&b);
	strvec_init(&pages);
	rc = request(r, "GET", "/api/v1/runs?limit=1000", NULL, &runs, e);
	if (rc)
		goto out;
	json_array_foreach(json_object_get(runs, "runs"), i, v)
	{
		struct run x = { 0 };

		x.id = str(v, "id");
		x.status = str(v, "status");
		x.stage = str(v, "stage");
		x.task = str(v, "task");
		x.gate_status = str(v, "gate_status");
		x.pause_requested =
		    json_is_true(json_object_get(v, "pause_requested"));
		if (x.id && x.status)
			tui_model_add_run(&b, &x);
	}
	/* tasks come newest first, a page at a time; the board wants them
	 * in id order: the pages are kept and walked backwards */
	do {
		char *path = next ? xasprintf("/api/v1/tasks?limit=1000&"
					      "before=%lld",
					      (long long)next)
				  : xstrdup("/api/v1/tasks?limit=1000");

		rc = request(r, "GET", path, NULL, &page, e);
		free(path);
		if (rc)
			goto out;
		if (!counts.len) {
			const char *key;

			json_object_foreach(json_object_get(page, "counts"),
					    key, v) if (json_integer_value(v))
			    buf_addf(&counts, "%s%s %lld",
				     counts.len ? ", " : "", key,
				     (long long)json_integer_value(v));
		}
		next = json_integer_value(json_object_get(page, "next"));
		{
			char *d = json_dumps(page, JSON_COMPACT);

			strvec_push(&pages, d ? d : "{}");
			free(d);
		}
		json_decref(page);
		page = NULL;
	} while (next > 0 && pages.nr < 100);
	for (k = pages.nr; k-- > 0;) {
		json_t *p = json_loads(pages.v[k], 0, NULL), *list;

		list = json_object_get(p, "tasks");
		for (i = json_array_size(list); i-- > 0;) {
			struct task t = { 0 };
			json_t *o = json_array_get(list, i);

			t.id = json_integer_value(json_object_get(o, "id"));
			t.title = str(o, "title");
			t.status = str(o, "status");
			t.block_reason = str(o, "block_reason");
			t.run_id = str(o, "run");
			if (t.id && t.status)
				tui_model_add_task(&b, &t);
		}
		json_decref(p);
	}
	b.counts = buf_detach(&counts, NULL);
	tui_model_take_board(m, &b);
out:
	json_decref(runs);
	json_decref(page);
	strvec_clear(&pages);
	buf_release(&counts);
	tui_model_release(&b);
	return rc;
}

int
tui_remote_load_detail(struct tui_remote *r, struct tui_model *m,
		       const char *run_id, struct err *e)
{
	json_t *j = NULL, *v;
	struct strvec tl;
	char *path = xasprintf("/api/v1/runs/%s/events?limit=5000", run_id);
	size_t i;
	int rc;

	strvec_init(&tl);
	rc = request(r, "GET", path, NULL, &j, e);
	free(path);
	if (rc)
		return rc;
	json_array_foreach(json_object_get(j, "events"), i, v)
	{
		struct event ev = { 0 };
		json_t *data = json_object_get(v, "data");
		char *d = data ? json_dumps(data, JSON_COMPACT) : NULL;
		const char *ts = str(v, "ts");

		ev.seq = json_integer_value(json_object_get(v, "seq"));
		ev.ts = ts ? time_parse_iso(ts) : 0;
		ev.type = str(v, "type");
		ev.from = str(v, "from");
		ev.to = str(v, "to");
		ev.data = d;
		if (ev.type)
			tui_timeline_add(&tl, &ev);
		free(d);
	}
	json_decref(j);
	strvec_clear(&m->timeline);
	m->timeline = tl;
	strvec_clear(&m->output);
	free(m->output_name);
	m->output_name = xstrdup("(not shown over the API)");
	if (!m->detail_run || strcmp(m->detail_run, run_id)) {
		free(m->detail_run);
		m->detail_run = xstrdup(run_id);
	}
	return 0;
}

int
tui_remote_act(struct tui_remote *r, const char *verb, const char *run,
	       const char *text, char **status_out, struct err *e)
{
	int gate = !strcmp(verb, "approve") || !strcmp(verb, "reject") ||
		   !strcmp(verb, "request-changes");
	json_t *body, *ans = NULL;
	char *path, *s;
	const char *st;
	int rc;

	if (gate) {
		body = json_pack("{s:s}", "decision", verb);
		if (text)
			json_object_set_new(body, "guidance",
					    json_string(text));
		path = xasprintf("/api/v1/approvals/%s", run);
	} else {
		body = json_object();
		if (text)
			json_object_set_new(body, "text", json_string(text));
		path = xasprintf("/api/v1/runs/%s/%s", run, verb);
	}
	s = json_dumps(body, JSON_COMPACT);
	rc = request(r, "POST", path, s, &ans, e);
	if (!rc) {
		st = json_string_value(json_object_get(ans, "status"));
		if (!st)
			st = json_string_value(json_object_get(
			    json_object_get(ans, "run"), "status"));
		*status_out = xstrdup(st ? st : "");
	}
	json_decref(ans);
	json_decref(body);
	free(s);
	free(path);
	return rc;
}

int
tui_remote_call(struct tui_remote *r, const char *method, const char *path,
		const char *body, void **out, struct err *e)
{
	json_t *j = NULL;
	int rc = request(r, method, path, body, &j, e);

	if (!rc && out)
		*out = j;
	else
		json_decref(j);
	return rc;
}

/* An SSE answer being read: the bytes of the event not yet complete. */
struct follower {
	struct buf pending;
	tui_remote_event_fn *fn;
	void *arg;
};

/* Hands each complete event ("event: X\ndata: Y\n\n") in f->pending on. */
static void
follow_events(struct follower *f)
{
	char *end;

	while ((end = strstr(f->pending.ptr, "\n\n"))) {
		char *line = f->pending.ptr, *event = NULL, *data = NULL;
		size_t used = (size_t)(end - f->pending.ptr) + 2;

		*end = 0;
		while (line && *line) {
			char *nl = strchr(line, '\n');

			if (nl)
				*nl = 0;
			if (!strncmp(line, "event: ", 7))
				event = line + 7;
			else if (!strncmp(line, "data: ", 6))
				data = line + 6;
			line = nl ? nl + 1 : NULL;
		}
		if (event && data)
			f->fn(f->arg, event, data);
		memmove(f->pending.ptr, f->pending.ptr + used,
			f->pending.len - used);
		buf_setlen(&f->pending, f->pending.len - used);
	}
}

static size_t
on_events(char *p, size_t size, size_t n, void *arg)
{
	struct follower *f = arg;

	if (buf_add(&f->pending, p, size * n))
		return 0;
	follow_events(f);
	return size * n;
}

int
tui_remote_follow(struct tui_remote *r, const char *path,
		  tui_remote_event_fn *fn, void *arg, struct err *e)
{
	struct follower f = { .fn = fn, .arg = arg };
	struct curl_slist *h = curl_slist_append(NULL, r->auth);
	char *url = xasprintf("%s%s", r->url, path);
	char cerr[CURL_ERROR_SIZE] = "";
	long status = 0;
	CURLcode cc;
	CURL *c = curl_easy_init();
	int rc = 0;

	buf_init(&f.pending, HTTP_MAX_RESPONSE);
	if (!c) {
		rc = err_set(e, -ENOMEM, "cannot start a request to '%s'",
			     r->url);
		goto out;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_events);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &f);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (cc != CURLE_OK)
		rc = err_set(e, -EHOSTUNREACH, "cannot follow '%s': %s", url,
			     *cerr ? cerr : curl_easy_strerror(cc));
	else if (status >= 400)
		rc = err_set(e, BATON_EINVAL, "GET %s: HTTP %ld", path,
			     status);
out:
	if (c)
		curl_easy_cleanup(c);
	curl_slist_free_all(h);
	buf_release(&f.pending);
	free(url);
	return rc;
}
