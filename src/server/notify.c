/*
 * Webhooks: lifecycle notifications POSTed to the URLs of notify.webhooks
 * (docs/api.md, "Webhooks").
 *
 * The deliverer is one thread with a store connection of its own. It
 * follows the event log from a cursor, the seq of the last event it
 * handled, kept in .baton/notify.cursor so that a restart neither loses
 * nor (beyond the one event in flight) repeats notifications:
 *
 *   hub: new events ──notify_poke──▶ wake ──▶ events after the cursor
 *                                               │ map each to a kind,
 *                                               │ or skip it
 *                                               ▼
 *          POST to every webhook that subscribed to the kind; a failure
 *          is retried after backoff, 2 x backoff, ... (the webhooks of one
 *          event are tried side by side, so a dead one does not hold up
 *          the first try of the others)
 *                                               │ all delivered or given up
 *                                               ▼
 *                                   cursor = seq, written atomically
 *
 * notify_stop may abandon a delivery in the middle: its event is still
 * after the cursor, so the next start sends it again (at least once).
 * Receivers tell repeats apart by X-Baton-Delivery, the event's seq.
 */
#include "util/compat.h"

#define LOG_MODULE "notify"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "engine/engine.h"
#include "server/server.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/version.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* Without a poke the thread still looks at the log this often. */
#define NOTIFY_SAFETY_MS (5 * 60 * 1000)
/* The doubling backoff stops growing here. */
#define NOTIFY_MAX_DELAY_MS (3600 * 1000)
/* Events looked at per pass, so the cursor file keeps up in a flood. */
#define NOTIFY_BATCH 256
/* The cursor file holds one number. */
#define NOTIFY_CURSOR_MAX 64

enum kind { KIND_APPROVAL, KIND_TERMINAL, KIND_BUDGET, KIND_SCHEDULE };

static int is_approval(const struct event *ev, const json_t *data);
static int is_terminal(const struct event *ev, const json_t *data);
static int is_budget(const struct event *ev, const json_t *data);
static int is_schedule(const struct event *ev, const json_t *data);

/*
 * The notification kinds, named as notify.webhooks[].events names them
 * (config.c keeps the same list). Only transitions are notified, and
 * a schedule's reports (sched/schedule.c): its task made, or not.
 */
static const struct kind_entry {
	enum kind kind;
	const char *name;
	int (*match)(const struct event *ev, const json_t *data);
} kinds[] = {
	{ KIND_APPROVAL, "approval_requested", is_approval },
	{ KIND_TERMINAL, "run_terminal", is_terminal },
	{ KIND_BUDGET, "budget_crossed", is_budget },
	{ KIND_SCHEDULE, "schedule", is_schedule },
};

/* One webhook, copied out of the config so the config may go away. */
struct hook {
	char *url;
	char *shown; /* url for logs: no credentials, no query */
	char *name;  /* notify.targets[].name: "link:NAME" decides */
	enum notify_format format;
	unsigned kinds; /* bit (1 << kind) per subscribed kind */
	char *secret;	/* the HMAC key; NULL: unsigned */
	size_t secret_len;
	int retries, backoff_seconds, timeout_seconds;
	CURL *curl; /* kept between posts: connections are reused */
	char curl_err[CURL_ERROR_SIZE];
};

struct notifier {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* on CLOCK_MONOTONIC */
	int poked;	     /* under mu: there may be new events */
	atomic_int stopping; /* set under mu; read bare by curl callbacks */
	struct store *store; /* the thread's own connection */
	char *cursor_path;
	int64_t cursor; /* the last event handled */
	int64_t saved;	/* what the cursor file says */
	struct hook *hooks;
	size_t nr_hooks;
	char *answer_key; /* signs answer links; NULL: no links */
	char *public_url; /* server.public_url, or NULL */
	int link_ttl;	  /* seconds an answer link lives */
};

/* One event's notification while it is delivered. */
struct note {
	const struct kind_entry *k;
	const struct event *ev;
	const json_t *data; /* the event's data, or NULL */
	char *text;	    /* what happened, for people: the question of an
			       approval, else the reason (may be NULL) */
	char *task;	    /* the run's task line, or NULL */
};

/* The links of a note to h (NULL members when there is no link). */
struct links {
	char *run;		/* the run in the dashboard */
	char *approve, *reject; /* answer links, approvals only */
};

/* Where one webhook is with one note. */
struct attempt {
	char *body; /* what this webhook gets (its format, its links) */
	struct links links;
	int tries;	 /* failed tries so far */
	int done;	 /* delivered, given up, or not subscribed */
	int64_t next_ms; /* time_mono_ms() of the next try */
	struct buf last; /* the last failure, for the warning */
};

/* One pass over the log. */
struct pass {
	struct notifier *n;
	int seen;    /* events looked at */
	int stopped; /* a delivery was abandoned: notify_stop */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void
curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- which events are notified ---------------------------------------- */

static int
is_approval(const struct event *ev, const json_t *data)
{
	(void)data;
	return !strcmp(ev->to, ST_WAITING);
}

static int
is_terminal(const struct event *ev, const json_t *data)
{
	(void)data;
	return status_is_terminal(ev->to);
}

/* Pauses have several causes; only the budget's is a notification. */
static int
is_budget(const struct event *ev, const json_t *data)
{
	const char *cause = json_get_str(data, "cause");

	return !strcmp(ev->to, ST_PAUSED) && cause && !strcmp(cause, "budget");
}

static int
is_schedule(const struct event *ev, const json_t *data)
{
	(void)data;
	return !strcmp(ev->type, "schedule_fired") ||
	       !strcmp(ev->type, "schedule_failed");
}

/* The kind ev is a notification of, or NULL when it is none. */
static const struct kind_entry *
event_kind(const struct event *ev, const json_t *data)
{
	size_t i;

	if (is_schedule(ev, data))
		return &kinds[KIND_SCHEDULE];
	if (strcmp(ev->type, "transition") || !ev->to)
		return NULL;
	for (i = 0; i < ARRAY_SIZE(kinds); i++)
		if (kinds[i].match(ev, data))
			return &kinds[i];
	return NULL;
}

/* ---- the body ---------------------------------------------------------- */

/*
 * Why the run got there: the event's own reason; else, for a run that
 * ended, the reason on its record; else, for a gate, the stage it holds.
 * JSON null when there is none. A failing store read only loses the
 * reason, never the notification.
 */
static json_t *
note_reason(struct notifier *n, const struct note *no, const json_t *data)
{
	struct run r = { 0 };
	json_t *v = NULL;
	const char *s;

	if ((s = json_get_str(data, "reason")))
		return json_string(s);
	if (no->k->kind == KIND_SCHEDULE && (s = json_get_str(data, "error")))
		return json_lossy_str(s);
	if (no->k->kind == KIND_TERMINAL && no->ev->run_id &&
	    !store_run_get(n->store, no->ev->run_id, &r, NULL) && r.reason)
		v = json_lossy_str(r.reason);
	run_release(&r);
	if (!v && no->k->kind == KIND_APPROVAL &&
	    (s = json_get_str(data, "gate")))
		v = json_sprintf("approval needed before stage '%s'", s);
	return v ? v : json_null();
}

/*
 * What the note tells people (note->text, note->task): for an approval,
 * the question the run asks (progress.ask.question) or else the reason;
 * for the other kinds the reason. A failing store read only loses them.
 */
static void
note_text(struct notifier *n, struct note *no)
{
	struct run r = { 0 };
	json_t *reason = note_reason(n, no, no->data), *p = NULL;
	const char *q = NULL;

	if (no->ev->run_id &&
	    !store_run_get(n->store, no->ev->run_id, &r, NULL)) {
		if (r.task)
			no->task = xstrdup(r.task);
		if (no->k->kind == KIND_APPROVAL && r.progress)
			p = json_loads(r.progress, 0, NULL);
		q = json_get_str(json_object_get(p, "ask"), "question");
	}
	if (q)
		no->text = xstrdup(q);
	else if (json_is_string(reason))
		no->text = xstrdup(json_string_value(reason));
	json_decref(p);
	json_decref(reason);
	run_release(&r);
}

static char *
answer_link(struct notifier *n, const struct hook *h, const struct note *no,
	    const char *decision)
{
	char *tok = answer_token_mint(
	    n->answer_key, no->ev->run_id, no->ev->seq, decision,
	    time_now_ms() / 1000 + n->link_ttl, h->name);
	char *url = xasprintf("%s/api/v1/answers/%s", n->public_url, tok);

	free(tok);
	return url;
}

static void
links_make(struct notifier *n, const struct hook *h, const struct note *no,
	   struct links *l)
{
	memset(l, 0, sizeof(*l));
	if (!n->public_url || !no->ev->run_id)
		return;
	l->run = xasprintf("%s/#/runs/%s", n->public_url, no->ev->run_id);
	if (no->k->kind != KIND_APPROVAL || !n->answer_key)
		return;
	l->approve = answer_link(n, h, no, "approve");
	l->reject = answer_link(n, h, no, "reject");
}

static void
links_release(struct links *l)
{
	free(l->run);
	free(l->approve);
	free(l->reject);
}

static const char *
schedule_name(const struct note *no)
{
	const char *name = json_get_str(no->data, "schedule");

	return name ? name : "?";
}

/* The one line a person reads first. */
static char *
note_title(const struct note *no)
{
	const char *run = no->ev->run_id ? no->ev->run_id : "?";

	switch (no->k->kind) {
	case KIND_APPROVAL:
		return xasprintf("baton: run %s asks for a decision", run);
	case KIND_TERMINAL:
		return xasprintf("baton: run %s ended %s", run, no->ev->to);
	case KIND_BUDGET:
		return xasprintf("baton: run %s paused on its budget", run);
	case KIND_SCHEDULE:
		return xasprintf("baton: schedule %s %s", schedule_name(no),
				 strcmp(no->ev->type, "schedule_failed") ?
					 "made its task" :
					 "could not make its task");
	}
	BUG("unknown notification kind");
}

/* s cut to at most max bytes, not inside a UTF-8 sequence, "…" marking
 * a cut (caller frees). */
static char *
cut(const char *s, size_t max)
{
	size_t len = strlen(s);
	struct buf b = BUF_INIT;

	if (len <= max)
		return xstrdup(s);
	len = max > 3 ? max - 3 : 0;
	while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
		len--;
	buf_add(&b, s, len);
	buf_adds(&b, "\xe2\x80\xa6");
	return buf_detach(&b, NULL);
}

static char *
dump(json_t *o, const struct note *no)
{
	char *text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);

	json_decref(o);
	if (!text)
		BUG("cannot serialise the notification of event %lld",
		    (long long)no->ev->seq);
	return text;
}

/*
 * baton's own body: the summary a receiver routes on, the event itself
 * as `baton events --json` prints it, and the question and links.
 */
static char *
body_generic(struct notifier *n, const struct hook *h, const struct note *no,
	     const struct links *l)
{
	const struct event *ev = no->ev;
	json_t *o = json_object(), *whole = NULL;
	char ts[40], *line = engine_event_line(ev);

	time_fmt_iso(ev->ts, ts, sizeof(ts));
	json_object_set_new(o, "kind", json_string(no->k->name));
	json_object_set_new(o, "seq", json_integer(ev->seq));
	json_object_set_new(o, "ts", json_string(ts));
	json_object_set_new(o, "run", json_lossy_str(ev->run_id));
	json_object_set_new(
	    o, "task", ev->task_id ? json_integer(ev->task_id) : json_null());
	json_object_set_new(o, "status", json_lossy_str(ev->to));
	json_object_set_new(o, "reason", note_reason(n, no, no->data));
	if (no->k->kind == KIND_APPROVAL)
		json_object_set_new(o, "question", json_lossy_str(no->text));
	json_object_set_new(o, "target", json_lossy_str(h->name));
	if (l->run)
		json_object_set_new(o, "links",
				    json_pack("{s:s, s:s?, s:s?}", "run",
					      l->run, "approve", l->approve,
					      "reject", l->reject));
	if (line)
		whole = json_loads(line, 0, NULL);
	json_object_set_new(o, "event", whole ? whole : json_null());
	free(line);
	return dump(o, no);
}

/* Text for Slack's mrkdwn: &, < and > escaped, as Slack asks. */
static void
slack_escape(struct buf *b, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '&')
			buf_adds(b, "&amp;");
		else if (*s == '<')
			buf_adds(b, "&lt;");
		else if (*s == '>')
			buf_adds(b, "&gt;");
		else
			buf_addch(b, *s);
	}
}

static json_t *
slack_button(const char *label, const char *url, const char *id,
	     const char *style)
{
	json_t *b = json_pack("{s:s, s:{s:s, s:s}, s:s, s:s}", "type", "button",
			      "text", "type", "plain_text", "text", label,
			      "url", url, "action_id", id);

	if (style)
		json_object_set_new(b, "style", json_string(style));
	return b;
}

/*
 * A Slack incoming webhook's message: "text" (the notification's and
 * the fallback) and "blocks": a header, a mrkdwn section (3000
 * characters at most), and link buttons that open the answer links'
 * confirmation pages and the run.
 */
static char *
body_slack(const struct note *no, const struct links *l)
{
	char *title = note_title(no), *head = cut(title, 150), *sec;
	struct buf md = BUF_INIT, fallback = BUF_INIT;
	json_t *blocks = json_array(), *buttons = json_array(), *o;

	buf_adds(&fallback, title);
	if (no->text) {
		buf_adds(&fallback, ": ");
		buf_adds(&fallback, no->text);
	}
	buf_adds(&md, "*Run* `");
	slack_escape(&md, no->ev->run_id);
	buf_adds(&md, "`");
	if (no->task) {
		buf_adds(&md, " \xe2\x80\x94 ");
		slack_escape(&md, no->task);
	}
	buf_addf(&md, "\n*Status:* %s", no->ev->to);
	if (no->text) {
		buf_adds(&md, "\n>");
		slack_escape(&md, no->text);
	}
	sec = cut(md.ptr, 3000);
	json_array_append_new(blocks,
			      json_pack("{s:s, s:{s:s, s:s, s:b}}", "type",
					"header", "text", "type", "plain_text",
					"text", head, "emoji", 1));
	/* the task and question may hold bytes that are not UTF-8 */
	json_array_append_new(
	    blocks, json_pack("{s:s, s:{s:s, s:o}}", "type", "section", "text",
			      "type", "mrkdwn", "text", json_lossy_str(sec)));
	if (l->approve)
		json_array_append_new(buttons,
				      slack_button("Approve", l->approve,
						   "baton-approve", "primary"));
	if (l->reject)
		json_array_append_new(buttons,
				      slack_button("Reject", l->reject,
						   "baton-reject", "danger"));
	if (l->run)
		json_array_append_new(buttons, slack_button("Open run", l->run,
							    "baton-run", NULL));
	if (json_array_size(buttons))
		json_array_append_new(blocks,
				      json_pack("{s:s, s:o}", "type", "actions",
						"elements", buttons));
	else
		json_decref(buttons);
	o = json_pack("{s:o, s:o}", "text", json_lossy_str(fallback.ptr),
		      "blocks", blocks);
	free(title);
	free(head);
	free(sec);
	buf_release(&md);
	buf_release(&fallback);
	return dump(o, no);
}

/*
 * A Discord webhook's message: "content" (2000 characters at most),
 * one embed (title 256, description 4096, field values 1024) whose
 * description ends with the answer links as Markdown links, and
 * allowed_mentions that mention nobody whatever the text says.
 */
static char *
body_discord(const struct note *no, const struct links *l)
{
	char *title = note_title(no), *content = cut(title, 2000);
	char *etitle = NULL, *desc, *task;
	struct buf d = BUF_INIT, et = BUF_INIT;
	json_t *embed, *fields = json_array(), *o;
	int color = no->k->kind == KIND_APPROVAL ? 0xF1C40F
		    : !strcmp(no->ev->to, ST_MERGE_READY) ||
			    !strcmp(no->ev->to, ST_COMPLETED)
			? 0x2ECC71
			: 0xE74C3C;

	buf_addf(&et, "Run %s", no->ev->run_id ? no->ev->run_id : "?");
	etitle = cut(et.ptr, 256);
	if (no->text)
		buf_adds(&d, no->text);
	if (l->approve || l->reject) {
		char *q = cut(d.ptr ? d.ptr : "", 3000);

		buf_reset(&d);
		buf_adds(&d, q);
		free(q);
		buf_addf(&d, "\n\n[Approve](%s) \xc2\xb7 [Reject](%s)",
			 l->approve, l->reject);
	}
	desc = cut(d.len ? d.ptr : no->ev->to, 4096);
	task = cut(no->task ? no->task : "-", 1024);
	json_array_append_new(fields,
			      json_pack("{s:s, s:s, s:b}", "name", "Status",
					"value", no->ev->to, "inline", 1));
	json_array_append_new(
	    fields, json_pack("{s:s, s:o, s:b}", "name", "Task", "value",
			      json_lossy_str(task), "inline", 0));
	embed =
	    json_pack("{s:o, s:o, s:i, s:o}", "title", json_lossy_str(etitle),
		      "description", json_lossy_str(desc), "color", color,
		      "fields", fields);
	if (l->run)
		json_object_set_new(embed, "url", json_string(l->run));
	o = json_pack("{s:o, s:[o], s:{s:[]}}", "content",
		      json_lossy_str(content), "embeds", embed,
		      "allowed_mentions", "parse");
	free(title);
	free(content);
	free(etitle);
	free(desc);
	free(task);
	buf_release(&d);
	buf_release(&et);
	return dump(o, no);
}

/* ntfy's message: plain text; the rest goes in headers (ntfy_headers). */
static char *
body_ntfy(const struct note *no)
{
	struct buf b = BUF_INIT;

	if (no->text) {
		buf_adds(&b, no->text);
		buf_addch(&b, '\n');
	}
	buf_addf(&b, "Run %s", no->ev->run_id ? no->ev->run_id : "?");
	if (no->task)
		buf_addf(&b, ": %s", no->task);
	buf_addf(&b, " (%s)", no->ev->to);
	return buf_detach(&b, NULL);
}

/* The body of no for h with its links l (caller frees). */
static char *
hook_body(struct notifier *n, const struct hook *h, const struct note *no,
	  const struct links *l)
{
	switch (h->format) {
	case NOTIFY_GENERIC:
		return body_generic(n, h, no, l);
	case NOTIFY_SLACK:
		return body_slack(no, l);
	case NOTIFY_DISCORD:
		return body_discord(no, l);
	case NOTIFY_NTFY:
		return body_ntfy(no);
	}
	BUG("unknown notify format");
}

/* "sha256=" and the lowercase hex HMAC-SHA256 of body under h's secret. */
static void
sign(const struct hook *h, const char *body, struct buf *out)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0, i;

	if (!HMAC(EVP_sha256(), h->secret, (int)h->secret_len,
		  (const unsigned char *)body, strlen(body), md, &len))
		BUG("HMAC-SHA256 failed");
	buf_adds(out, "sha256=");
	for (i = 0; i < len; i++) {
		buf_addch(out, hex[md[i] >> 4]);
		buf_addch(out, hex[md[i] & 15]);
	}
}

/* ---- one POST ----------------------------------------------------------- */

/* The receiver's answer is not used: a 2xx status is all that counts. */
static size_t
discard(char *ptr, size_t size, size_t nmemb, void *arg)
{
	(void)ptr;
	(void)arg;
	return size * nmemb;
}

/* curl calls this often during a transfer: notify_stop cuts it short. */
static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
	    curl_off_t ulnow)
{
	struct notifier *n = arg;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return atomic_load(&n->stopping);
}

/* A header line appended to list; running out of memory aborts. */
static struct curl_slist *__attribute__((format(printf, 2, 3)))
header(struct curl_slist *list, const char *fmt, ...)
{
	struct curl_slist *l;
	struct buf line = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&line, fmt, ap);
	va_end(ap);
	l = curl_slist_append(list, line.ptr);
	buf_release(&line);
	if (!l) {
		fprintf(stderr, "baton: out of memory building a header\n");
		abort();
	}
	return l;
}

/* A header value: bytes outside printable ASCII become '?'. */
static void
header_safe(struct buf *b, const char *s)
{
	for (; s && *s; s++)
		buf_addch(b,
			  (unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f
			      ? *s
			      : '?');
}

/*
 * ntfy's headers: Title, Priority (4, high, for a question or a budget
 * pause), Tags (emoji short codes), Click (the run), and Actions: "view"
 * buttons that open the answer links' confirmation pages.
 */
static struct curl_slist *
ntfy_headers(struct curl_slist *hdr, const struct note *no,
	     const struct links *l)
{
	static const char *const tags[] = {
		[KIND_APPROVAL] = "question,baton",
		[KIND_TERMINAL] = "checkered_flag,baton",
		[KIND_BUDGET] = "money_with_wings,baton",
	};
	struct buf v = BUF_INIT;
	char *title = note_title(no);

	hdr = header(hdr, "Content-Type: text/plain; charset=utf-8");
	header_safe(&v, title);
	hdr = header(hdr, "Title: %s", v.ptr);
	hdr = header(hdr, "Priority: %d", no->k->kind == KIND_TERMINAL ? 3 : 4);
	hdr = header(hdr, "Tags: %s", tags[no->k->kind]);
	if (l->run) {
		buf_reset(&v);
		header_safe(&v, l->run);
		hdr = header(hdr, "Click: %s", v.ptr);
	}
	if (l->approve && l->reject) {
		buf_reset(&v);
		buf_adds(&v, "view, Approve, ");
		header_safe(&v, l->approve);
		buf_adds(&v, ", clear=true; view, Reject, ");
		header_safe(&v, l->reject);
		buf_adds(&v, ", clear=true");
		hdr = header(hdr, "Actions: %s", v.ptr);
	}
	free(title);
	buf_release(&v);
	return hdr;
}

/*
 * The handle of h, made on first use and kept, so that deliveries to one
 * receiver share its connection. Returns -1 with why filled when libcurl
 * cannot be set up.
 */
static int
hook_curl(struct notifier *n, struct hook *h, struct buf *why)
{
	long ms = (long)h->timeout_seconds * 1000;
	CURL *c;

	if (h->curl)
		return 0;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		buf_addf(why, "cannot initialise libcurl: %s",
			 curl_easy_strerror(curl_init_rc));
		return -1;
	}
	c = curl_easy_init();
	if (!c) {
		buf_adds(why, "cannot initialise libcurl");
		return -1;
	}
	curl_easy_setopt(c, CURLOPT_URL, h->url);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "baton/" BATON_VERSION);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	/* A redirect is an answer other than 2xx, hence a failure: following
	 * it would send the signed body somewhere nobody configured. */
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	/* The daemon's environment is not the user's shell: an http_proxy
	 * left there must not reroute (or break) a webhook on 127.0.0.1. */
	curl_easy_setopt(c, CURLOPT_PROXY, "");
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->curl_err);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, n);
	h->curl = c;
	return 0;
}

/*
 * POSTs no to h once. Returns 0 when the receiver answered 2xx; else -1
 * with why filled (curl's error, or the status).
 */
static int
post(struct notifier *n, struct hook *h, const struct note *no,
     const struct attempt *at, struct buf *why)
{
	const char *body = at->body;
	struct curl_slist *hdr = NULL;
	struct buf sig = BUF_INIT;
	long status = 0;
	CURLcode cres;
	int rc = -1;

	if (hook_curl(n, h, why) < 0)
		goto out;
	if (h->format == NOTIFY_NTFY)
		hdr = ntfy_headers(hdr, no, &at->links);
	else
		hdr = header(hdr, "Content-Type: application/json");
	hdr = header(hdr, "Expect:"); /* no 100-continue round trip */
	hdr = header(hdr, "X-Baton-Event: %s", no->k->name);
	hdr = header(hdr, "X-Baton-Delivery: %lld", (long long)no->ev->seq);
	if (h->secret) {
		sign(h, body, &sig);
		hdr = header(hdr, "X-Baton-Signature: %s", sig.ptr);
	}
	h->curl_err[0] = '\0';
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)strlen(body));
	cres = curl_easy_perform(h->curl);
	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
	if (cres != CURLE_OK)
		buf_adds(why, h->curl_err[0] ? h->curl_err
					     : curl_easy_strerror(cres));
	else if (status < 200 || status > 299)
		buf_addf(why, "HTTP %ld", status);
	else
		rc = 0;
out:
	curl_slist_free_all(hdr);
	buf_release(&sig);
	return rc;
}

/* ---- delivery with retries ---------------------------------------------- */

/* An absolute CLOCK_MONOTONIC time for pthread_cond_timedwait. */
static void
mono_timespec(int64_t ms, struct timespec *out)
{
	out->tv_sec = (time_t)(ms / 1000);
	out->tv_nsec = (long)(ms % 1000) * 1000000L;
}

/*
 * Sleeps until deadline (a time_mono_ms() value) or notify_stop, which
 * ever comes first: a poke does not end it. Returns 1 when stopping.
 */
static int
sleep_until(struct notifier *n, int64_t deadline)
{
	struct timespec ts;
	int stop;

	mono_timespec(deadline, &ts);
	pthread_mutex_lock(&n->mu);
	while (!(stop = atomic_load(&n->stopping)) && time_mono_ms() < deadline)
		pthread_cond_timedwait(&n->cv, &n->mu, &ts);
	pthread_mutex_unlock(&n->mu);
	return stop;
}

/* The wait before retry number `tries`: backoff, doubling, capped. */
static int64_t
retry_delay(const struct hook *h, int tries)
{
	int64_t ms = (int64_t)h->backoff_seconds * 1000;

	while (--tries > 0 && ms < NOTIFY_MAX_DELAY_MS)
		ms *= 2;
	return ms < NOTIFY_MAX_DELAY_MS ? ms : NOTIFY_MAX_DELAY_MS;
}

/*
 * One try of no at h. On success, or on the failure that uses up the
 * retries (with a warning), the attempt is done; otherwise its next try
 * is scheduled. Returns 1 when the try was cut short by notify_stop,
 * which counts as no try at all.
 */
static int
try_once(struct notifier *n, struct hook *h, const struct note *no,
	 struct attempt *at)
{
	buf_reset(&at->last);
	if (!post(n, h, no, at, &at->last)) {
		log_debug("%s: %s: delivered %s of event %lld", __func__,
			  h->shown, no->k->name, (long long)no->ev->seq);
		at->done = 1;
		return 0;
	}
	if (atomic_load(&n->stopping))
		return 1;
	if (++at->tries > h->retries) {
		log_warn("webhook %s: gave up on %s of event %lld after %d "
			 "tries: %s",
			 h->shown, no->k->name, (long long)no->ev->seq,
			 at->tries, at->last.ptr);
		at->done = 1;
		return 0;
	}
	at->next_ms = time_mono_ms() + retry_delay(h, at->tries);
	log_info("webhook %s: %s of event %lld failed (%s); retry %d of %d",
		 h->shown, no->k->name, (long long)no->ev->seq, at->last.ptr,
		 at->tries, h->retries);
	return 0;
}

/*
 * Delivers no to every webhook subscribed to its kind. The webhooks are
 * tried side by side: each failure schedules that webhook's next try, and
 * the thread sleeps until the earliest one is due. Returns 0 once every
 * webhook got it or was given up, 1 when notify_stop came first (the
 * event is then left for the next start).
 */
static int
deliver(struct notifier *n, const struct note *no)
{
	struct attempt *at = xcalloc(n->nr_hooks, sizeof(*at));
	size_t i, left = 0;
	int64_t wake;
	int stop = 0;

	for (i = 0; i < n->nr_hooks; i++) {
		buf_init(&at[i].last, 0);
		at[i].done = !(n->hooks[i].kinds & (1u << no->k->kind));
		left += !at[i].done;
		if (at[i].done)
			continue;
		links_make(n, &n->hooks[i], no, &at[i].links);
		at[i].body = hook_body(n, &n->hooks[i], no, &at[i].links);
	}
	while (left && !stop) {
		wake = INT64_MAX;
		for (i = 0; i < n->nr_hooks && !stop; i++) {
			if (at[i].done)
				continue;
			if (at[i].next_ms <= time_mono_ms())
				stop = try_once(n, &n->hooks[i], no, &at[i]);
			if (at[i].done)
				left--;
			else if (at[i].next_ms < wake)
				wake = at[i].next_ms;
		}
		if (left && !stop)
			stop = sleep_until(n, wake);
	}
	for (i = 0; i < n->nr_hooks; i++) {
		buf_release(&at[i].last);
		links_release(&at[i].links);
		free(at[i].body);
	}
	free(at);
	return stop;
}

/* ---- following the log -------------------------------------------------- */

/* Writes the cursor when it moved. A failure is said and retried later. */
static void
save_cursor(struct notifier *n)
{
	struct err e = ERR_INIT;
	char text[32];
	int len;

	if (n->cursor == n->saved)
		return;
	len = snprintf(text, sizeof(text), "%lld\n", (long long)n->cursor);
	if (fs_write_atomic(n->cursor_path, text, (size_t)len, &e) < 0) {
		log_warn("cannot save the webhook cursor: %s", e.msg);
		return;
	}
	n->saved = n->cursor;
}

/*
 * The list callback: notifies ev if it is a notification, then moves the
 * cursor past it. Stops the list when notify_stop interrupts a delivery
 * (the cursor stays before ev) and after NOTIFY_BATCH events.
 */
static int
on_event(const struct event *ev, void *arg)
{
	struct pass *p = arg;
	struct notifier *n = p->n;
	struct note no = { NULL, ev, NULL, NULL, NULL };
	json_t *data = NULL;

	if (atomic_load(&n->stopping)) {
		p->stopped = 1;
		return 1;
	}
	if (ev->data)
		data = json_loads(ev->data, 0, NULL);
	no.k = event_kind(ev, data);
	no.data = data;
	if (no.k) {
		note_text(n, &no);
		p->stopped = deliver(n, &no);
	}
	if (!p->stopped) {
		n->cursor = ev->seq;
		if (no.k)
			save_cursor(n);
	}
	free(no.text);
	free(no.task);
	json_decref(data);
	return p->stopped || ++p->seen >= NOTIFY_BATCH;
}

/* Handles every event after the cursor, in batches. */
static void
drain(struct notifier *n)
{
	struct pass p = { n, 0, 0 };
	struct err e = ERR_INIT;
	int rc;

	do {
		p.seen = 0;
		rc = store_event_list(n->store, NULL, n->cursor, NULL, on_event,
				      &p, &e);
		save_cursor(n); /* the skipped events at the end */
		if (rc < 0)
			log_warn("cannot read the event log: %s", e.msg);
	} while (rc >= 0 && !p.stopped && p.seen >= NOTIFY_BATCH);
}

/*
 * The thread: drains the log at start and after each poke, until
 * notify_stop. The timed wait is only a safety net for a lost poke or a
 * store error; new events arrive through notify_poke.
 */
static void *
notify_main(void *arg)
{
	struct notifier *n = arg;
	struct timespec ts;

	pthread_mutex_lock(&n->mu);
	while (!atomic_load(&n->stopping)) {
		if (!n->poked) {
			mono_timespec(time_mono_ms() + NOTIFY_SAFETY_MS, &ts);
			pthread_cond_timedwait(&n->cv, &n->mu, &ts);
			if (atomic_load(&n->stopping))
				break;
		}
		n->poked = 0;
		pthread_mutex_unlock(&n->mu);
		drain(n);
		pthread_mutex_lock(&n->mu);
	}
	pthread_mutex_unlock(&n->mu);
	return NULL;
}

/* ---- start and stop ----------------------------------------------------- */

/*
 * url without user:password@ and without ?query or #fragment, for logs
 * (caller frees): credentials in a URL are secrets too.
 */
static char *
url_shown(const char *url)
{
	const char *sep = strstr(url, "://");
	const char *host = sep ? sep + 3 : url;
	const char *end = host + strcspn(host, "/?#");
	const char *at = memrchr(host, '@', (size_t)(end - host));
	struct buf b = BUF_INIT;

	buf_add(&b, url, (size_t)(host - url));
	if (at)
		host = at + 1;
	buf_add(&b, host, (size_t)(end - host));
	buf_add(&b, end, strcspn(end, "?#"));
	return buf_detach(&b, NULL);
}

/*
 * Copies webhook w into h. The secret is read from the environment once,
 * here; a secret_env that is unset (or empty) is warned about, and that
 * webhook's notifications go out unsigned.
 */
static void
hook_init(struct hook *h, const struct config_webhook *w)
{
	const char *secret = w->secret_env ? getenv(w->secret_env) : NULL;
	size_t i, j;

	h->url = xstrdup(w->url);
	h->shown = url_shown(w->url);
	h->name = xstrdup(w->name ? w->name : "webhook");
	h->format = w->format;
	for (i = 0; i < ARRAY_SIZE(kinds); i++) {
		for (j = 0; j < w->events.nr; j++)
			if (!strcmp(w->events.v[j], kinds[i].name))
				break;
		if (!w->events.nr || j < w->events.nr)
			h->kinds |= 1u << kinds[i].kind;
	}
	if (secret && *secret) {
		h->secret = xstrdup(secret);
		h->secret_len = strlen(secret);
	} else if (w->secret_env) {
		log_warn("webhook %s: secret_env %s is not set; its "
			 "notifications go out unsigned",
			 h->shown, w->secret_env);
	}
	h->retries = w->retries;
	h->backoff_seconds = w->backoff_seconds;
	h->timeout_seconds = w->timeout_seconds;
}

static void
hook_release(struct hook *h)
{
	if (h->curl)
		curl_easy_cleanup(h->curl);
	if (h->secret)
		explicit_bzero(h->secret, h->secret_len);
	free(h->secret);
	free(h->url);
	free(h->shown);
	free(h->name);
}

/*
 * The seq in the cursor file into *out. Returns 0 when there is one, 1
 * when there is no file (the first start) or no usable one (said in a
 * warning): either way notifications then start from the newest event,
 * as flooding a receiver with history is worse than missing it.
 */
static int
load_cursor(const char *path, int64_t *out)
{
	struct err e = ERR_INIT;
	struct buf b = BUF_INIT;
	char *end = NULL;
	long long v;
	int rc = fs_read(path, &b, NOTIFY_CURSOR_MAX, &e);

	if (rc == -ENOENT) {
		rc = 1;
		goto out;
	}
	if (rc < 0) {
		log_warn("%s; webhooks start from the newest event", e.msg);
		rc = 1;
		goto out;
	}
	buf_rtrim(&b);
	errno = 0;
	v = strtoll(b.ptr, &end, 10);
	if (errno || end == b.ptr || *end || v < 0) {
		log_warn("'%s' holds no event seq; webhooks start from the "
			 "newest event",
			 path);
		rc = 1;
		goto out;
	}
	*out = v;
	rc = 0;
out:
	buf_release(&b);
	return rc;
}

static void
notifier_free(struct notifier *n)
{
	size_t i;

	for (i = 0; i < n->nr_hooks; i++)
		hook_release(&n->hooks[i]);
	free(n->hooks);
	store_close(n->store);
	free(n->cursor_path);
	if (n->answer_key)
		explicit_bzero(n->answer_key, strlen(n->answer_key));
	free(n->answer_key);
	free(n->public_url);
	pthread_cond_destroy(&n->cv);
	pthread_mutex_destroy(&n->mu);
	free(n);
}

/*
 * Where the thread begins: the cursor file, or at the first start the
 * newest event, written to the file at once so that a stop before any
 * notification still remembers where history ended.
 */
static int
find_cursor(struct notifier *n, struct err *e)
{
	int rc = load_cursor(n->cursor_path, &n->cursor);

	if (!rc) {
		n->saved = n->cursor;
		return 0;
	}
	rc = store_event_last_seq(n->store, &n->cursor, e);
	if (rc < 0)
		return rc;
	n->saved = -1;
	save_cursor(n);
	return 0;
}

struct notifier *
notify_start(const struct config *cfg, const struct workspace *ws,
	     const char *store_spec, struct err *e)
{
	struct notifier *n;
	pthread_condattr_t ca;
	size_t i;
	int rc;

	if (!cfg->nr_webhooks)
		return NULL;
	n = xcalloc(1, sizeof(*n));
	pthread_mutex_init(&n->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cv, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&n->stopping, 0);
	n->poked = 1; /* what happened while serve was down */
	n->cursor_path = xasprintf("%s/notify.cursor", ws->dir);
	n->hooks = xcalloc(cfg->nr_webhooks, sizeof(*n->hooks));
	for (i = 0; i < cfg->nr_webhooks; i++)
		hook_init(&n->hooks[n->nr_hooks++], &cfg->webhooks[i]);
	n->link_ttl = cfg->link_ttl_seconds;
	rc = 0;
	if (cfg->server.public_url) {
		n->public_url = xstrdup(cfg->server.public_url);
		rc = server_answer_key(ws, &n->answer_key, e);
	}
	if (rc >= 0)
		rc = store_open(store_spec, &n->store, e);
	if (rc < 0)
		goto out;
	rc = find_cursor(n, e);
	if (rc < 0)
		goto out;
	rc = pthread_create(&n->thread, NULL, notify_main, n);
	if (rc) {
		rc = err_set(e, -rc, "cannot start the webhook thread: %s",
			     strerror(rc));
		goto out;
	}
	log_info("webhooks: %zu, from event %lld", n->nr_hooks,
		 (long long)n->cursor);
out:
	if (rc < 0) {
		notifier_free(n);
		n = NULL;
	}
	return n;
}

/* The thread holds mu only between waits, never while it delivers. */
void
notify_poke(struct notifier *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->mu);
	n->poked = 1;
	pthread_cond_signal(&n->cv);
	pthread_mutex_unlock(&n->mu);
}

void
notify_stop(struct notifier *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->mu);
	atomic_store(&n->stopping, 1);
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
	pthread_join(n->thread, NULL);
	notifier_free(n);
}

/* ---- the notifier process ------------------------------------------------ */

/*
 * The notifier's own process, beside the workers and the HTTP process:
 * a hub (its thread hears new events and pokes) and the notify thread.
 * It serves until SIGTERM or its parent's death, the way the HTTP
 * process does, and needs no listener: webhooks go out with
 * --listen off as well.
 */
static void __attribute__((noreturn))
notifier_main(const struct server_opts *o, int ready_fd)
{
	struct notifier *n;
	struct hub *hub = NULL;
	struct err e = ERR_INIT;

	n = notify_start(o->cfg, o->ws, o->store_spec, &e);
	if (n && hub_start(o->store_spec, n, &hub, &e) == 0) {
		dprintf(ready_fd, "OK %zu\n", o->cfg->nr_webhooks);
	} else {
		dprintf(ready_fd, "ERR %s\n",
			e.rc ? e.msg : "no webhooks to deliver to");
		_exit(1);
	}
	close(ready_fd);
	server__await_stop();
	hub_stop(hub);
	notify_stop(n);
	_exit(0);
}

int
notify_spawn(const struct server_opts *o, pid_t *pid, struct err *e)
{
	char detail[64];

	return server__fork_ready(notifier_main, o, "baton notify",
				  "webhook notifier", pid, detail,
				  sizeof(detail), e);
}
