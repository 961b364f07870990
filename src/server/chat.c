/*
 * Chat intake over HTTP (docs/chat.md): the /api/v1/chat routes, one
 * worker thread that runs the planner's turns, and the reply buffers
 * the conversations' streams read.
 *
 *   POST .../messages ─▶ chat_say (stored) ─▶ queue ─▶ 202
 *   worker thread ─▶ chat_reply ─▶ chunks ─▶ buffer ─▶ stream_poke
 *   GET .../stream ─▶ stream_sse_with(buffer_fill): replays the buffer
 *                     from its start, parks, follows; ends after the
 *                     terminal event (done or error)
 *   worker, every CHAT_TICK_MS: progress of the conversations in
 *   monitoring (chat_progress); buffers finished CHAT_KEEP_MS ago dropped
 *
 * The planner call blocks for as long as the agent works, so it runs on
 * this file's one thread with a queue (turns of all conversations in
 * order), never on libmicrohttpd's request threads. A conversation has
 * one reply running at a time: a message while its reply runs is 409.
 */
#include "util/compat.h"

#include <jansson.h>
#include <pthread.h>

#include "core/config.h"
#include "forge/forge.h"
#include "sched/chat.h"
#include "sched/sched.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#undef LOG_MODULE
#define LOG_MODULE "chat"

/* A reply's buffer is dropped this long after its terminal event. */
#define CHAT_KEEP_MS (60 * 1000)
/* How often the worker looks at the conversations in monitoring. */
#define CHAT_TICK_MS 2000

/* One reply's stream: its events as SSE text, from the start. */
struct reply {
	int64_t conv;
	uint64_t gen;	 /* which reply of the conversation */
	struct buf text; /* SSE events so far */
	int finished;	 /* the terminal event is in text */
	int64_t finished_ms;
	int refs; /* the list's one, plus each stream reading it */
	struct reply *next;
};

static struct {
	struct server *srv;
	pthread_t thread;
	int stop;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct reply *replies;
	int64_t *queue; /* conversations waiting for their turn */
	size_t nr_queue, alloc_queue;
	uint64_t gen;
} cs = { .mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void
reply_unref(struct reply *r)
{
	if (--r->refs)
		return;
	buf_release(&r->text);
	free(r);
}

/* The live reply of conv (under cs.mu), or NULL. */
static struct reply *
reply_find(int64_t conv)
{
	struct reply *r;

	for (r = cs.replies; r; r = r->next)
		if (r->conv == conv)
			return r;
	return NULL;
}

/* Takes r out of the list (under cs.mu); its readers keep it alive. */
static void
reply_unlink(struct reply *r)
{
	struct reply **pp = &cs.replies;

	while (*pp && *pp != r)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = r->next;
		reply_unref(r);
	}
}

/* Appends one event to conv's reply and wakes its streams. */
static void
reply_event(int64_t conv, const char *event, json_t *data, int last)
{
	struct reply *r;
	char *s = json_dumps(data, JSON_COMPACT);

	pthread_mutex_lock(&cs.mu);
	r = reply_find(conv);
	if (r && !r->finished) {
		buf_addf(&r->text, "event: %s\ndata: %s\n\n", event, s);
		if (last) {
			r->finished = 1;
			r->finished_ms = time_mono_ms();
		}
	}
	pthread_mutex_unlock(&cs.mu);
	free(s);
	json_decref(data);
	stream_poke();
}

static void
on_chunk(void *arg, const char *text, size_t len)
{
	int64_t conv = *(int64_t *)arg;

	reply_event(conv, "chunk", json_pack("{s:s%}", "text", text, len), 0);
}

/* Drops the replies finished CHAT_KEEP_MS ago (under cs.mu). */
static void
drop_old(int64_t now)
{
	struct reply **pp = &cs.replies, *r;

	while ((r = *pp)) {
		if (r->finished && now - r->finished_ms >= CHAT_KEEP_MS) {
			*pp = r->next;
			reply_unref(r);
			continue;
		}
		pp = &r->next;
	}
}

/* The progress of every conversation in monitoring. */
static void
monitor(struct sched_ctx *x)
{
	struct err e = ERR_INIT;
	int64_t *ids = NULL;
	size_t nr = 0, i;

	if (store_chat_list(x->store, CHAT_MONITORING, &ids, &nr, &e)) {
		log_warn("cannot list the conversations: %s", e.msg);
		return;
	}
	for (i = 0; i < nr; i++) {
		e = (struct err)ERR_INIT;
		if (chat_progress(x, ids[i], NULL, &e))
			log_warn("conversation %lld: %s", (long long)ids[i],
				 e.msg);
	}
	free(ids);
}

static void *
chat_main(void *arg)
{
	struct sched_ctx x = { 0 };
	int64_t last_tick = 0;

	(void)arg;
	x.ws = cs.srv->ws;
	x.cfg = cs.srv->cfg;
	x.holder = "chat";
	x.store_spec = cs.srv->store_spec;
	pthread_mutex_lock(&cs.mu);
	while (!cs.stop) {
		int64_t now = time_mono_ms(), conv;
		struct err e = ERR_INIT;
		struct chat_conv c = { 0 };
		int rc;

		drop_old(now);
		if (!cs.nr_queue && now - last_tick < CHAT_TICK_MS) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&cs.cond, &cs.mu, &ts);
			continue;
		}
		pthread_mutex_unlock(&cs.mu);
		x.store = http_thread_store(cs.srv);
		if (!x.store) {
			pthread_mutex_lock(&cs.mu);
			last_tick = now;
			continue;
		}
		if (now - last_tick >= CHAT_TICK_MS) {
			monitor(&x);
			last_tick = now;
		}
		pthread_mutex_lock(&cs.mu);
		if (!cs.nr_queue)
			continue;
		conv = cs.queue[0];
		memmove(cs.queue, cs.queue + 1,
			--cs.nr_queue * sizeof(*cs.queue));
		pthread_mutex_unlock(&cs.mu);
		rc = chat_reply(&x, conv, on_chunk, &conv, &e);
		if (!rc)
			rc = store_chat_get(x.store, conv, &c, &e);
		if (rc)
			reply_event(conv, "error",
				    json_pack("{s:s}", "message", e.msg), 1);
		else
			reply_event(conv, "done",
				    json_pack("{s:s}", "phase", c.phase), 1);
		chat_conv_release(&c);
		pthread_mutex_lock(&cs.mu);
	}
	pthread_mutex_unlock(&cs.mu);
	return NULL;
}

int
chat_serve_start(struct server *srv, struct err *e)
{
	cs.srv = srv;
	if (pthread_create(&cs.thread, NULL, chat_main, NULL))
		return err_set(e, BATON_EINVAL, "cannot start the chat worker");
	return 0;
}

/* ---- the routes ------------------------------------------------------- */

static struct sched_ctx
ctx_of(struct req *rq)
{
	struct sched_ctx x = { .store = rq->store, .ws = rq->srv->ws,
			       .cfg = rq->srv->cfg, .holder = "http",
			       .store_spec = rq->srv->store_spec };

	return x;
}

/* The {id} of the route; 0 with a 404 sent when it is no id. */
static int64_t
conv_id(struct req *rq)
{
	const char *s = rq->params[0];
	char *end;
	long long n = strtoll(s, &end, 10);

	if (*s && !*end && n > 0)
		return n;
	http_error(rq, 404, "not_found", "no conversation '%.40s'", s);
	return 0;
}

void
chat_api_create(struct req *rq)
{
	struct sched_ctx x = ctx_of(rq);
	struct err e = ERR_INIT;
	int64_t id = 0;

	if (chat_new(&x, &id, &e)) {
		http_fail(rq, &e);
		return;
	}
	http_json(rq, 201,
		  json_pack("{s:I, s:s}", "id", (json_int_t)id, "phase",
			    CHAT_GREETING));
}

/* The choices of a mode_selection message. */
static json_t *
mode_options(const struct server *srv)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < chat_nr_modes; i++) {
		const struct chat_mode *m = &chat_modes[i];

		json_array_append_new(
		    a,
		    json_pack("{s:s, s:s, s:s, s:b}", "mode", m->name, "label",
			      m->label, "about", m->about, "available",
			      strcmp(m->name, "github") ||
				  srv->cfg->forge.type != NULL));
	}
	return a;
}

void
chat_api_show(struct req *rq)
{
	struct chat_conv c = { 0 };
	struct err e = ERR_INIT;
	json_t *o, *msgs;
	int64_t id = conv_id(rq);
	size_t i;
	int replying;

	if (!id)
		return;
	if (store_chat_get(rq->store, id, &c, &e)) {
		http_fail(rq, &e);
		return;
	}
	msgs = json_array();
	for (i = 0; i < c.nr_msgs; i++) {
		const struct chat_msg *m = &c.msgs[i];
		json_t *mo = json_pack("{s:I, s:s, s:s, s:s, s:I}", "id",
				       (json_int_t)m->id, "role", m->role,
				       "kind", m->kind, "content", m->content,
				       "created_at", (json_int_t)m->created_at);

		if (!strcmp(m->kind, "mode_selection"))
			json_object_set_new(mo, "options",
					    mode_options(rq->srv));
		json_array_append_new(msgs, mo);
	}
	pthread_mutex_lock(&cs.mu);
	replying = reply_find(id) && !reply_find(id)->finished;
	pthread_mutex_unlock(&cs.mu);
	o = json_pack("{s:I, s:s, s:o, s:o, s:b, s:o, s:I, s:I}", "id",
		      (json_int_t)c.id, "phase", c.phase, "mode",
		      c.mode ? json_string(c.mode) : json_null(), "plan",
		      c.plan ? json_loads(c.plan, 0, NULL) : json_null(),
		      "replying", replying, "messages", msgs, "created_at",
		      (json_int_t)c.created_at, "updated_at",
		      (json_int_t)c.updated_at);
	if (!json_object_get(o, "plan"))
		json_object_set_new(o, "plan", json_null());
	http_json(rq, 200, o);
	chat_conv_release(&c);
}

void
chat_api_message(struct req *rq)
{
	struct sched_ctx x = ctx_of(rq);
	struct err e = ERR_INIT;
	struct reply *r;
	json_t *body = NULL;
	const char *text;
	char *stream;
	int64_t id = conv_id(rq);

	if (!id || http_body_json(rq, (void **)&body))
		return;
	text = json_get_str(body, "content");
	if (!text) {
		http_error(rq, 400, "bad_request",
			   "the body must be {\"content\": \"...\"}, the "
			   "person's message");
		goto out;
	}
	if (strlen(text) > CHAT_MAX_MESSAGE) {
		http_error(rq, 413, "too_large",
			   "the message is %zu bytes, more than the %d a chat "
			   "message may hold",
			   strlen(text), CHAT_MAX_MESSAGE);
		goto out;
	}
	pthread_mutex_lock(&cs.mu);
	r = reply_find(id);
	if (r && !r->finished) {
		pthread_mutex_unlock(&cs.mu);
		http_error(rq, 409, "conflict",
			   "the planner is still answering conversation "
			   "%lld: wait for its reply (the stream's done "
			   "event)",
			   (long long)id);
		goto out;
	}
	/*
	 * The new reply is taken now, under the lock, so that of two
	 * messages at once one is answered and the other is 409; it
	 * replaces the finished one.
	 */
	if (r)
		reply_unlink(r);
	r = xcalloc(1, sizeof(*r));
	r->conv = id;
	r->gen = ++cs.gen;
	r->text = (struct buf)BUF_INIT;
	r->refs = 1;
	r->next = cs.replies;
	cs.replies = r;
	pthread_mutex_unlock(&cs.mu);
	if (chat_say(&x, id, text, &e)) {
		pthread_mutex_lock(&cs.mu);
		/* refused: no reply; a stream that found it ends empty */
		r->finished = 1;
		r->finished_ms = time_mono_ms();
		reply_unlink(r);
		pthread_mutex_unlock(&cs.mu);
		stream_poke();
		http_fail(rq, &e);
		goto out;
	}
	pthread_mutex_lock(&cs.mu);
	ALLOC_GROW(cs.queue, cs.nr_queue + 1, cs.alloc_queue);
	cs.queue[cs.nr_queue++] = id;
	pthread_cond_broadcast(&cs.cond);
	pthread_mutex_unlock(&cs.mu);
	stream =
	    xasprintf("/api/v1/chat/conversations/%lld/stream", (long long)id);
	http_json(
	    rq, 202,
	    json_pack("{s:I, s:s}", "id", (json_int_t)id, "stream", stream));
	free(stream);
out:
	json_decref(body);
}

/* A stream's place in its reply. */
struct reader {
	struct reply *r; /* NULL: no reply to follow */
	size_t off;
	char *idle; /* with no reply: the one event to send */
};

static int
reader_fill(void *arg, struct buf *out)
{
	struct reader *rd = arg;
	int fin;

	if (!rd->r) {
		buf_adds(out, rd->idle);
		return 1;
	}
	pthread_mutex_lock(&cs.mu);
	buf_add(out, rd->r->text.ptr + rd->off, rd->r->text.len - rd->off);
	rd->off = rd->r->text.len;
	fin = rd->r->finished;
	pthread_mutex_unlock(&cs.mu);
	return fin;
}

static void
reader_free(void *arg)
{
	struct reader *rd = arg;

	if (rd->r) {
		pthread_mutex_lock(&cs.mu);
		reply_unref(rd->r);
		pthread_mutex_unlock(&cs.mu);
	}
	free(rd->idle);
	free(rd);
}

void
chat_api_stream(struct req *rq)
{
	struct chat_conv c = { 0 };
	struct err e = ERR_INIT;
	struct reader *rd;
	int64_t id = conv_id(rq);

	if (!id)
		return;
	if (store_chat_get(rq->store, id, &c, &e)) {
		http_fail(rq, &e);
		return;
	}
	rd = xcalloc(1, sizeof(*rd));
	pthread_mutex_lock(&cs.mu);
	rd->r = reply_find(id);
	if (rd->r)
		rd->r->refs++;
	pthread_mutex_unlock(&cs.mu);
	if (!rd->r)
		rd->idle = xasprintf("event: done\ndata: {\"phase\":\"%s\","
				     "\"idle\":true}\n\n",
				     c.phase);
	chat_conv_release(&c);
	stream_sse_with(rq, reader_fill, rd, reader_free);
}

/* forge_startup's counts, as the preflight note. */
static int
preflight(void *arg, struct buf *note, struct err *e)
{
	struct req *rq = arg;
	struct forge_startup fs = { 0 };
	struct err why = ERR_INIT;

	(void)e;
	if (forge_startup(rq->srv->cfg, rq->store, rq->srv->ws, &fs, &why))
		buf_addf(note, "Start-up preflight: %s. ", why.msg);
	buf_addf(note,
		 "Start-up preflight: %d open issue%s wait%s for intake, %d "
		 "task%s wait%s for the judge.",
		 fs.issue_backlog, fs.issue_backlog == 1 ? "" : "s",
		 fs.issue_backlog == 1 ? "s" : "", fs.judge_backlog,
		 fs.judge_backlog == 1 ? "" : "s",
		 fs.judge_backlog == 1 ? "s" : "");
	return 0;
}

void
chat_api_start(struct req *rq)
{
	struct sched_ctx x = ctx_of(rq);
	struct chat_conv c = { 0 };
	struct err e = ERR_INIT;
	json_t *body = NULL;
	const char *mode;
	int64_t id = conv_id(rq);
	size_t nr = 0;

	if (!id || http_body_json(rq, (void **)&body))
		return;
	mode = json_get_str(body, "mode");
	if (chat_start(&x, id, mode, preflight, rq, &nr, &e)) {
		http_fail(rq, &e);
		goto out;
	}
	sched_wake(rq->srv->ws);
	if (store_chat_get(rq->store, id, &c, &e)) {
		http_fail(rq, &e);
		goto out;
	}
	http_json(rq, 200,
		  json_pack("{s:I, s:s, s:s, s:I, s:o}", "id", (json_int_t)id,
			    "phase", c.phase, "mode", c.mode, "queued",
			    (json_int_t)nr, "tasks",
			    json_loads(c.tasks ? c.tasks : "{}", 0, NULL)));
	chat_conv_release(&c);
	/* the monitor reports from now on */
	pthread_mutex_lock(&cs.mu);
	pthread_cond_broadcast(&cs.cond);
	pthread_mutex_unlock(&cs.mu);
out:
	json_decref(body);
}
