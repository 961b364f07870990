/*
 * The webhook deliverer (server/notify.c) against a real receiver: a
 * civetweb server on 127.0.0.1 in the test process records every request
 * (method, path, the X-Baton-* headers, the body) and answers 500 to the
 * first fail_first of them, then 200. Events are written to a SQLite store
 * in the test's directory, which also stands for .baton/ (the cursor
 * file). Each test waits for what it expects with a deadline, never with
 * a fixed sleep, except to check that nothing more arrives.
 */
#include "util/compat.h"

#include <civetweb.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <unistd.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "server/server_int.h"
#include "store/store.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#endif

/* Under ASan each test ends with a leak check: the runner's children
 * leave with _exit(), which skips LeakSanitizer's own. */
#ifdef T_ASAN
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() ASSERT_EQ(__lsan_do_recoverable_leak_check(), 0)
#else
#define LEAK_CHECK()                                                           \
	do {                                                                   \
	} while (0)
#endif

#define SECRET_VAR "T_NOTIFY_SECRET"
#define SECRET	   "s3cret-hmac-key"
#define MAX_REQS   32
#define WAIT_MS	   10000

/* ---- the receiver ----------------------------------------------------- */

struct rec {
	char *method, *uri, *type, *agent;
	char *event, *delivery, *signature; /* X-Baton-*; NULL when absent */
	char *body;
	int64_t at; /* time_mono_ms() when it arrived */
	int status; /* what was answered */
};

struct receiver {
	struct mg_context *ctx;
	int port;
	pthread_mutex_t mu;
	int fail_first;	  /* answer 500 to this many requests */
	int slow_ms;	  /* sleep this long before answering */
	const char *dead; /* a path always answered 500, or NULL */
	int nr;
	struct rec reqs[MAX_REQS];
};

static char *
header_copy(const struct mg_connection *c, const char *name)
{
	return xstrdup_or_null(mg_get_header(c, name));
}

static int
on_request(struct mg_connection *c, void *arg)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	struct receiver *r = arg;
	struct buf body = BUF_INIT;
	struct rec *q = NULL;
	char chunk[4096];
	int n, status, slow;

	while ((n = mg_read(c, chunk, sizeof(chunk))) > 0)
		buf_add(&body, chunk, (size_t)n);
	pthread_mutex_lock(&r->mu);
	status = r->nr < r->fail_first ||
			 (r->dead && !strcmp(ri->local_uri, r->dead))
		     ? 500
		     : 200;
	slow = r->slow_ms;
	if (r->nr < MAX_REQS)
		q = &r->reqs[r->nr];
	r->nr++;
	if (q) {
		q->method = xstrdup(ri->request_method);
		q->uri = xstrdup(ri->local_uri);
		q->type = header_copy(c, "Content-Type");
		q->agent = header_copy(c, "User-Agent");
		q->event = header_copy(c, "X-Baton-Event");
		q->delivery = header_copy(c, "X-Baton-Delivery");
		q->signature = header_copy(c, "X-Baton-Signature");
		q->body = buf_detach(&body, NULL);
		q->at = time_mono_ms();
		q->status = status;
	}
	pthread_mutex_unlock(&r->mu);
	if (slow)
		usleep((useconds_t)slow * 1000);
	mg_printf(c,
		  "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n"
		  "Connection: close\r\n\r\n",
		  status, status == 200 ? "OK" : "Internal Server Error");
	buf_release(&body);
	return status;
}

static void
receiver_start(struct receiver *r, int fail_first)
{
	const char *opts[] = { "listening_ports", "127.0.0.1:0", "num_threads",
			       "4", NULL };
	struct mg_server_port port;

	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	r->fail_first = fail_first;
	mg_init_library(0);
	r->ctx = mg_start(NULL, NULL, opts);
	ASSERT(r->ctx);
	mg_set_request_handler(r->ctx, "/", on_request, r);
	ASSERT_EQ(mg_get_server_ports(r->ctx, 1, &port), 1);
	r->port = port.port;
}

static void
receiver_stop(struct receiver *r)
{
	int i;

	mg_stop(r->ctx);
	for (i = 0; i < r->nr && i < MAX_REQS; i++) {
		struct rec *q = &r->reqs[i];

		free(q->method);
		free(q->uri);
		free(q->type);
		free(q->agent);
		free(q->event);
		free(q->delivery);
		free(q->signature);
		free(q->body);
	}
	pthread_mutex_destroy(&r->mu);
	mg_exit_library();
}

static int
received(struct receiver *r)
{
	int n;

	pthread_mutex_lock(&r->mu);
	n = r->nr;
	pthread_mutex_unlock(&r->mu);
	return n;
}

/* Waits until want requests arrived; fails the test after WAIT_MS. */
static void
wait_requests(struct receiver *r, int want)
{
	int64_t end = time_mono_ms() + WAIT_MS;

	while (received(r) < want && time_mono_ms() < end)
		usleep(5000);
	if (received(r) < want)
		test_fail(__FILE__, __LINE__, "%d requests, wanted %d",
			  received(r), want);
}

/* ---- the store, the cursor, the config -------------------------------- */

static char *
notify_store_spec(void)
{
	return xasprintf("%s/baton.db", test_tmpdir());
}

static struct store *
open_store(void)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char *spec = notify_store_spec();

	ASSERT_OK(store_open(spec, &s, &e), &e);
	free(spec);
	return s;
}

static void
make_run(struct store *s, const char *task, struct run *out)
{
	struct err e = ERR_INIT;

	memset(out, 0, sizeof(*out));
	run_set(&out->task, task);
	run_set(&out->status, "created");
	run_set(&out->pipeline, "feature");
	run_set(&out->phase, RUN_PHASE_PENDING);
	ASSERT_OK(store_run_create(s, out, &e), &e);
}

/* Appends an event; to and data may be NULL. Returns its seq. */
static int64_t
add_event(struct store *s, const char *run_id, int64_t task_id,
	  const char *type, const char *to, const char *data)
{
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	int64_t seq;

	ev.run_id = xstrdup(run_id);
	ev.task_id = task_id;
	ev.type = xstrdup(type);
	ev.from = to ? xstrdup("executing") : NULL;
	ev.to = xstrdup_or_null(to);
	ev.data = xstrdup_or_null(data);
	ASSERT_OK(store_event_add(s, &ev, &e), &e);
	seq = ev.seq;
	event_release(&ev);
	return seq;
}

static int64_t
transition(struct store *s, const char *run_id, const char *to,
	   const char *data)
{
	return add_event(s, run_id, 0, "transition", to, data);
}

/* The seq in the cursor file, or -1 when there is none. */
static int64_t
cursor(void)
{
	struct buf b = BUF_INIT;
	char *path = xasprintf("%s/notify.cursor", test_tmpdir());
	int64_t v = -1;

	if (!fs_read(path, &b, 64, NULL))
		v = strtoll(b.ptr, NULL, 10);
	buf_release(&b);
	free(path);
	return v;
}

/* Waits until the deliverer has handled every event up to seq. */
static void
wait_cursor(int64_t seq)
{
	int64_t end = time_mono_ms() + WAIT_MS;

	while (cursor() < seq && time_mono_ms() < end)
		usleep(5000);
	if (cursor() < seq)
		test_fail(__FILE__, __LINE__, "cursor %lld, wanted %lld",
			  (long long)cursor(), (long long)seq);
}

/* cfg from notify.webhooks written as YAML, with PORT replaced. */
static void
load_config(const char *hooks, int port, struct config *cfg)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	struct buf y = BUF_INIT;
	const char *p;

	buf_adds(&y, "notify:\n  webhooks:\n");
	for (p = hooks; *p; p++) {
		if (!strncmp(p, "PORT", 4)) {
			buf_addf(&y, "%d", port);
			p += 3;
		} else {
			buf_addch(&y, *p);
		}
	}
	config_builder_init(&b);
	ASSERT_OK(config_add_yaml(&b, "test.yaml", y.ptr, y.len, &e), &e);
	ASSERT_OK(config_finish(&b, cfg, &e), &e);
	buf_release(&y);
}

static struct notifier *
start(const struct config *cfg)
{
	struct workspace ws = { 0 };
	struct err e = ERR_INIT;
	struct notifier *n;
	char *spec = notify_store_spec();

	ws.dir = (char *)test_tmpdir();
	n = notify_start(cfg, &ws, spec, &e);
	if (!n)
		test_fail(__FILE__, __LINE__, "notify_start: %s", e.msg);
	free(spec);
	return n;
}

/* lowercase hex HMAC-SHA256 of body under SECRET, as "sha256=..." */
static void
expected_signature(const char *body, char *out, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;
	size_t at;

	ASSERT(HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET),
		    (const unsigned char *)body, strlen(body), md, &n));
	at = (size_t)snprintf(out, len, "sha256=");
	for (i = 0; i < n; i++)
		at += (size_t)snprintf(out + at, len - at, "%02x", md[i]);
}

static json_t *
parse(const char *body)
{
	json_t *o = json_loads(body, 0, NULL);

	ASSERT(json_is_object(o));
	return o;
}

static const char *
str_at(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static long long
int_at(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* Checks request i: one POST of kind about event seq, signed. */
static json_t *
check_request(struct receiver *r, int i, const char *kind, int64_t seq)
{
	struct rec *q = &r->reqs[i];
	char want[160], seqs[32];
	json_t *o;

	ASSERT_STREQ(q->method, "POST");
	ASSERT_STREQ(q->uri, "/hook");
	ASSERT_STREQ(q->type, "application/json");
	ASSERT(q->agent && !strncmp(q->agent, "baton/", 6));
	ASSERT_STREQ(q->event, kind);
	snprintf(seqs, sizeof(seqs), "%lld", (long long)seq);
	ASSERT_STREQ(q->delivery, seqs);
	expected_signature(q->body, want, sizeof(want));
	ASSERT_STREQ(q->signature, want);
	o = parse(q->body);
	ASSERT_STREQ(str_at(o, "kind"), kind);
	ASSERT_EQ(int_at(o, "seq"), seq);
	ASSERT_EQ(int_at(json_object_get(o, "event"), "seq"), seq);
	ASSERT_STREQ(str_at(json_object_get(o, "event"), "type"), "transition");
	/* ts is the event's, in ISO 8601 UTC */
	ASSERT_STREQ(str_at(o, "ts"),
		     str_at(json_object_get(o, "event"), "ts"));
	ASSERT_EQ(strlen(str_at(o, "ts")), 24);
	ASSERT_EQ(str_at(o, "ts")[23], 'Z');
	return o;
}

/* Points stderr at a file of the test's directory; returns the old fd. */
static int
capture_stderr(void)
{
	char *path = xasprintf("%s/stderr", test_tmpdir());
	int old = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ASSERT(old >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	free(path);
	return old;
}

static void
restore_stderr(int old, struct buf *out)
{
	char *path = xasprintf("%s/stderr", test_tmpdir());

	dup2(old, 2);
	close(old);
	ASSERT_EQ(fs_read(path, out, 0, NULL), 0);
	free(path);
}

static const char one_hook[] = "    - url: http://127.0.0.1:PORT/hook\n"
			       "      secret_env: " SECRET_VAR "\n"
			       "      retries: 2\n"
			       "      backoff_seconds: 0\n";

/* ---- tests -------------------------------------------------------------- */

TEST(no_webhooks_no_notifier)
{
	struct workspace ws = { 0 };
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	struct config cfg;

	config_builder_init(&b);
	ASSERT_OK(config_finish(&b, &cfg, &e), &e);
	ws.dir = (char *)test_tmpdir();
	ASSERT(!notify_start(&cfg, &ws, "/nonexistent/dir/baton.db", &e));
	ASSERT_EQ(e.rc, 0);
	ASSERT_EQ(cursor(), -1);
	notify_poke(NULL);
	notify_stop(NULL);
	config_release(&cfg);
	LEAK_CHECK();
}

TEST(each_kind_one_signed_post)
{
	struct receiver r;
	struct config cfg;
	struct store *s;
	struct notifier *n;
	struct run a, b;
	struct pipeline *feature = NULL;
	struct run_move mv;
	struct err e = ERR_INIT;
	struct event ev = { 0 };
	int64_t approval, budget, failed, aborted, last;
	json_t *o;

	setenv(SECRET_VAR, SECRET, 1);
	receiver_start(&r, 0);
	load_config(one_hook, r.port, &cfg);
	s = open_store();
	make_run(s, "first", &a);
	make_run(s, "second", &b);
	n = start(&cfg);
	ASSERT_EQ(cursor(), 2); /* the two creations are history */

	approval = transition(s, a.id, "waiting_for_approval",
			      "{\"gate\": \"executing\"}");
	transition(s, a.id, "executing", NULL); /* not notified */
	transition(s, a.id, "paused", "{\"resume_to\": \"x\"}"); /* nor this */
	add_event(s, a.id, 0, "stage_started", NULL, "{}");	 /* nor this */
	budget = transition(s, a.id, "paused",
			    "{\"cause\": \"budget\", \"reason\": "
			    "\"cost 5.20 USD over 5 USD\"}");
	failed = add_event(s, a.id, 7, "transition", "failed",
			   "{\"reason\": \"boom\"}");
	/* no reason in the event: the run's record has it */
	run_set(&b.status, "aborted");
	run_set(&b.reason, "aborted by ann");
	ev.type = (char *)"transition";
	ev.from = (char *)"created";
	ev.to = (char *)"aborted";
	ASSERT_OK(pipeline_load(NULL, "feature", &feature, &e), &e);
	mv = (struct run_move){ feature, "created", "aborted" };
	ASSERT_OK(store_run_move(s, &b, &mv, &ev, &e), &e);
	pipeline_free(feature);
	aborted = ev.seq;
	last = add_event(s, b.id, 0, "steer", NULL, NULL);
	notify_poke(n);

	wait_requests(&r, 4);
	wait_cursor(last);
	o = check_request(&r, 0, "approval_requested", approval);
	ASSERT_STREQ(str_at(o, "run"), a.id);
	ASSERT(json_is_null(json_object_get(o, "task")));
	ASSERT_STREQ(str_at(o, "status"), "waiting_for_approval");
	ASSERT_STREQ(str_at(o, "reason"),
		     "approval needed before stage 'executing'");
	json_decref(o);
	o = check_request(&r, 1, "budget_crossed", budget);
	ASSERT_STREQ(str_at(o, "status"), "paused");
	ASSERT_STREQ(str_at(o, "reason"), "cost 5.20 USD over 5 USD");
	ASSERT_STREQ(
	    str_at(json_object_get(json_object_get(o, "event"), "data"),
		   "cause"),
	    "budget");
	json_decref(o);
	o = check_request(&r, 2, "run_terminal", failed);
	ASSERT_EQ(int_at(o, "task"), 7);
	ASSERT_STREQ(str_at(o, "status"), "failed");
	ASSERT_STREQ(str_at(o, "reason"), "boom");
	json_decref(o);
	o = check_request(&r, 3, "run_terminal", aborted);
	ASSERT_STREQ(str_at(o, "run"), b.id);
	ASSERT_STREQ(str_at(o, "reason"), "aborted by ann");
	json_decref(o);

	usleep(200 * 1000);
	ASSERT_EQ(received(&r), 4);
	notify_stop(n);
	ASSERT_EQ(cursor(), last);
	run_release(&a);
	run_release(&b);
	store_close(s);
	config_release(&cfg);
	receiver_stop(&r);
	LEAK_CHECK();
}

TEST(only_subscribed_kinds_are_sent)
{
	static const char hooks[] =
	    "    - url: http://127.0.0.1:PORT/terminal\n"
	    "      events: [run_terminal]\n"
	    "    - url: http://127.0.0.1:PORT/approval\n"
	    "      events: approval_requested\n";
	struct receiver r;
	struct config cfg;
	struct store *s;
	struct notifier *n;
	struct run a;
	int64_t approval, done, last;

	receiver_start(&r, 0);
	load_config(hooks, r.port, &cfg);
	s = open_store();
	make_run(s, "subs", &a);
	n = start(&cfg);
	approval = transition(s, a.id, "waiting_for_approval", NULL);
	transition(s, a.id, "paused", "{\"cause\": \"budget\"}");
	done = transition(s, a.id, "merge_ready", NULL);
	last = transition(s, a.id, "paused", "{\"cause\": \"budget\"}");
	notify_poke(n);
	wait_cursor(last);
	ASSERT_EQ(received(&r), 2);
	ASSERT_STREQ(r.reqs[0].uri, "/approval");
	ASSERT_STREQ(r.reqs[0].event, "approval_requested");
	ASSERT_EQ(strtoll(r.reqs[0].delivery, NULL, 10), approval);
	ASSERT(!r.reqs[0].signature); /* no secret_env: unsigned */
	ASSERT_STREQ(r.reqs[1].uri, "/terminal");
	ASSERT_STREQ(r.reqs[1].event, "run_terminal");
	ASSERT_EQ(strtoll(r.reqs[1].delivery, NULL, 10), done);
	notify_stop(n);
	ASSERT_EQ(received(&r), 2);
	run_release(&a);
	store_close(s);
	config_release(&cfg);
	receiver_stop(&r);
	LEAK_CHECK();
}

/* A webhook waiting for its retry does not hold up the others' first try. */
TEST(webhooks_are_tried_side_by_side)
{
	static const char hooks[] = "    - url: http://127.0.0.1:PORT/dead\n"
				    "      retries: 1\n"
				    "      backoff_seconds: 1\n"
				    "    - url: http://127.0.0.1:PORT/hook\n";
	struct receiver r;
	struct config cfg;
	struct store *s;
	struct notifier *n;
	struct run a;
	int64_t seq;

	receiver_start(&r, 0);
	pthread_mutex_lock(&r.mu);
	r.dead = "/dead";
	pthread_mutex_unlock(&r.mu);
	load_config(hooks, r.port, &cfg);
	s = open_store();
	make_run(s, "sides", &a);
	n = start(&cfg);
	seq = transition(s, a.id, "completed", NULL);
	notify_poke(n);
	wait_cursor(seq);
	ASSERT_EQ(received(&r), 3);
	ASSERT_STREQ(r.reqs[0].uri, "/dead");
	ASSERT_STREQ(r.reqs[1].uri, "/hook");
	ASSERT_EQ(r.reqs[1].status, 200);
	ASSERT(r.reqs[1].at - r.reqs[0].at < 500);
	ASSERT_STREQ(r.reqs[2].uri, "/dead");
	ASSERT(r.reqs[2].at - r.reqs[0].at >= 900);
	notify_stop(n);
	run_release(&a);
	store_close(s);
	config_release(&cfg);
	receiver_stop(&r);
	LEAK_CHECK();
}

TEST(failed_twice_third_try_lands)
{
	struct receiver r;
	struct config cfg;
	struct store *s;
	struct notifier *n;
	struct run a;
	int64_t seq;
	int i;

	setenv(SECRET_VAR, SECRET, 1);
	receiver_start(&r, 2);
	load_config(one_hook, r.port, &cfg);
	s = open_store();
	make_run(s, "retry", &a);
	n = start(&cfg);
	seq = transition(s, a.id, "completed", NULL);
	notify_poke(n);
	wait_cursor(seq);
	ASSERT_EQ(received(&r), 3);
	for (i = 0; i < 3; i++) {
		json_decref(check_request(&r, i, "run_terminal", seq));
		ASSERT_STREQ(r.reqs[i].body, r.reqs[0].body);
	}
	ASSERT_EQ(r.reqs[1].status, 500);
	ASSERT_EQ(r.reqs[2].status, 200);
	notify_stop(n);
	run_release(&a);
	store_close(s);
	config_release(&cfg);
	receiver_stop(&r);
	LEAK_CHECK();
}

TEST(backoff_is_waited)
{
	static const char hooks[] = "    - url: http://127.0.0.1:PORT/hook\n"
				    "      retries: 1\n"
				    "      backoff_seconds: 1\n";
	struct receiver r;
	struct config cfg;
	struct store *s;
	struct notifier *n;
	struct run a;
	int64_t seq;

	receiver_start(&r, 1);
	load_config(hooks, r.port, &cfg);
	s = open_store();
	make_run(s, "backoff", &a);
	n = start(&cfg);
	seq = transition(s, a.id, "blocked", NULL);
	notify_poke(n);
	wait_cursor(seq);
	ASSERT_EQ(received(&r), 2);
	ASSERT(r.reqs[1].at - r.reqs[0].at >= 900);
	notify_stop(n);
	run_release(&a);
	store_close(s);
	config_release(&cfg);
	receiver_stop(&r);
	LEAK_CHECK();
}

/*
 * A receiver that keeps failing is given up after retries + 1 tries, with
 * a warning that names it, the kind and the seq, but neither the secret
 * nor the URL's credentials; the next notification still goes out.
 */
TEST(given_up_then_next_goes_out)
{
	static const char hooks[] =
	    "    - url: http://ann:pw0rd@127.0.0.1:PORT/hook?token=t0ken\n"
	    "      secret_env: " SECRET_VAR "\n"
	    "      retries: 2\n"
	    "      backoff_seconds: 0\n";
	struct receiver r;
	struct config cfg;
	struct buf log = BUF_INIT;
	struct store *s;
	struct notifier *n;
	struct run a;
	char want[128];
	int64_t lost, next;
	int i, old;

	setenv(SECRET_VAR, SECRET, 1);
	receiver_start(&r, 3);
	load_config(hooks, r.port, &cfg);
	s = open_store();
	make_run(s, "giveup", &a);
	old = capture_stderr();
	n = start(&cfg);
	lost = transition(s, a.id, "waiting_for_approval", NULL);
	next = transition(s, a.id, "failed", NULL);
	notify_poke(n);
	wait_cursor(next);
	notify_stop(n);
	restore_stderr(old, &log);
	ASSERT_EQ(received(&r), 4);
	for (i = 0; i < 3; i++) {
		ASSERT_STREQ(r.reqs[i].event, "approval_requested");
		ASSERT_EQ(r.reqs[i].status, 500);
	}
	ASSERT_STREQ(r.reqs[3].event, "run_terminal");
	ASSERT_EQ(strtoll(r.reqs[3].delivery, NULL, 10), next);
	ASSERT_EQ(r.reqs[3].status, 200);
	snprintf(want, sizeof(want),
		 "webhook http://127.0.0.1:%d/hook: gave up on "
		 "approval_requested of event %lld after 3 tries: HTTP 500",
		 r.port, (long long)lost);
	ASSERT_CONTAINS(log.ptr, want);
	ASSERT(!strstr(log.ptr, SECRET));
	ASSERT(!strstr(log.ptr, "pw0rd"));
	ASSERT(!strstr(log.ptr, "t0ken"));
	buf_release(&log);
	run_release(&a);
	store_close(s);
	config_release(&cfg);
	receiver_stop(&r);
	LEAK_CHECK();
}

/*
 * The first start sends nothing from history; the cursor file follows the
 * handled events; a restarted deliverer sends exactly what happened while
 * it was stopped.
 */
TEST(cursor_survives_restart)
{
	struct receiver r;
	struct config cfg;
	struct store *s;
	struct notifier *n;
	struct run a, b;
	int64_t old, first, second, third;

	setenv(SECRET_VAR, SECRET, 1);
	receiver_start(&r, 0);
	load_config(one_hook, r.port, &cfg);
	s = open_store();
	make_run(s, "history", &a);
	transition(s, a.id, "waiting_for_approval", NULL);
	old = transition(s, a.id, "failed", "{\"reason\": \"old\"}");
	n = start(&cfg);
	ASSERT_EQ(cursor(), old);
	notify_poke(n);
	usleep(300 * 1000);
	ASSERT_EQ(received(&r), 0);

	make_run(s, "live", &b);
	first = transition(s, b.id, "waiting_for_approval", NULL);
	notify_poke(n);
	wait_requests(&r, 1);
	wait_cursor(first);
	notify_stop(n);
	ASSERT_EQ(cursor(), first);

	second = transition(s, b.id, "paused", "{\"cause\": \"budget\"}");
	third = transition(s, b.id, "completed", NULL);
	n = start(&cfg); /* no poke: a start looks by itself */
	wait_requests(&r, 3);
	wait_cursor(third);
	json_decref(check_request(&r, 0, "approval_requested", first));
	json_decref(check_request(&r, 1, "budget_crossed", second));
	json_decref(check_request(&r, 2, "run_terminal", third));
	usleep(200 * 1000);
	ASSERT_EQ(received(&r), 3);
	notify_stop(n);
	run_release(&a);
	run_release(&b);
	store_close(s);
	config_release(&cfg);
	receiver_stop(&r);
	LEAK_CHECK();
}

/*
 * notify_stop does not wait out a backoff: it returns at once, leaves the
 * cursor before the event, and the next start delivers it.
 */
TEST(stop_during_backoff_is_prompt)
{
	static const char hooks[] = "    - url: http://127.0.0.1:PORT/hook\n"
				    "      retries: 5\n"
				    "      backoff_seconds: 60\n";
	struct receiver r;
	struct config cfg;
	struct store *s;
	struct notifier *n;
	struct run a;
	int64_t before, seq, t0;

	receiver_start(&r, 1);
	load_config(hooks, r.port, &cfg);
	s = open_store();
	make_run(s, "stop", &a);
	n = start(&cfg);
	before = cursor();
	seq = transition(s, a.id, "aborted", NULL);
	notify_poke(n);
	wait_requests(&r, 1);
	usleep(100 * 1000);
	t0 = time_mono_ms();
	notify_stop(n);
	ASSERT(time_mono_ms() - t0 < 1000);
	ASSERT_EQ(cursor(), before);

	n = start(&cfg);
	wait_cursor(seq);
	ASSERT_EQ(received(&r), 2);
	ASSERT_EQ(r.reqs[1].status, 200);
	ASSERT_EQ(strtoll(r.reqs[1].delivery, NULL, 10), seq);
	notify_stop(n);
	run_release(&a);
	store_close(s);
	config_release(&cfg);
	receiver_stop(&r);
	LEAK_CHECK();
}

/* notify_stop cuts a request in flight short too. */
TEST(stop_during_request_is_prompt)
{
	static const char hooks[] = "    - url: http://127.0.0.1:PORT/hook\n"
				    "      timeout_seconds: 30\n";
	struct receiver r;
	struct config cfg;
	struct store *s;
	struct notifier *n;
	struct run a;
	int64_t before, t0;

	receiver_start(&r, 0);
	pthread_mutex_lock(&r.mu);
	r.slow_ms = 3000;
	pthread_mutex_unlock(&r.mu);
	load_config(hooks, r.port, &cfg);
	s = open_store();
	make_run(s, "slow", &a);
	n = start(&cfg);
	before = cursor();
	transition(s, a.id, "merge_ready", NULL);
	notify_poke(n);
	wait_requests(&r, 1);
	t0 = time_mono_ms();
	notify_stop(n);
	ASSERT(time_mono_ms() - t0 < 2000);
	ASSERT_EQ(cursor(), before);
	run_release(&a);
	store_close(s);
	config_release(&cfg);
	receiver_stop(&r);
	LEAK_CHECK();
}
