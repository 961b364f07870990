/*
 * Answer links (docs/api.md, "Answer links"): the approve and reject
 * URLs a notification carries, PUBLIC_URL/api/v1/answers/TOKEN, that
 * decide a question once from a phone without the API token.
 *
 *   notifier (notify.c) ── answer_token_mint ──▶ link in the message
 *   GET  the link ─▶ a confirmation page with a form; nothing is decided
 *                    (link unfurlers and previews fetch it)
 *   POST the form ─▶ token checked, the question still open, the link's
 *                    use claimed in the store, engine_decide_by
 *
 * A token is base64url(payload) "." base64url(HMAC-SHA256(key, payload))
 * with payload "v1|RUN|SEQ|DECISION|EXPIRES|TARGET": SEQ is the event
 * that opened the question (a later question of the same run is another
 * one), EXPIRES seconds since the epoch, TARGET the notify target the
 * link went to, which the decision names as who made it ("link:TARGET").
 * The key is .baton/answer.key (server_answer_key), which the sandbox
 * hides from the agent.
 *
 * Once: the first POST claims the key "answer-link<TAB>RUN<TAB>SEQ" in
 * the store's idempotency_keys (migration 010), by primary key, so one
 * question is answered through links once, whichever link, process or
 * host, across restarts. A tab keeps the key out of reach of task
 * submissions, whose keys are printable ASCII.
 */
#include "util/compat.h"

#define LOG_MODULE "answer"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>

#include "core/config.h"
#include "core/gate.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "engine/engine.h"
#include "sched/sched.h"
#include "server/server.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MAC_LEN 32 /* SHA-256 */

/* ---- base64url, without padding ------------------------------------------ */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void
b64url_encode(const unsigned char *in, size_t n, struct buf *out)
{
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 |
			     in[i + 2];

		buf_addch(out, b64[v >> 18 & 63]);
		buf_addch(out, b64[v >> 12 & 63]);
		buf_addch(out, b64[v >> 6 & 63]);
		buf_addch(out, b64[v & 63]);
	}
	if (n - i == 1) {
		unsigned v = (unsigned)in[i] << 16;

		buf_addch(out, b64[v >> 18 & 63]);
		buf_addch(out, b64[v >> 12 & 63]);
	} else if (n - i == 2) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;

		buf_addch(out, b64[v >> 18 & 63]);
		buf_addch(out, b64[v >> 12 & 63]);
		buf_addch(out, b64[v >> 6 & 63]);
	}
}

static int
b64_value(int c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

/*
 * Decodes in[0..n) into out (room for n * 3 / 4 bytes): the length, or
 * -1 when it is not canonical base64url without padding.
 */
static int
b64url_decode(const char *in, size_t n, unsigned char *out)
{
	unsigned v = 0;
	size_t i;
	int bits = 0, o = 0, d;

	if (n % 4 == 1)
		return -1;
	for (i = 0; i < n; i++) {
		d = b64_value((unsigned char)in[i]);
		if (d < 0)
			return -1;
		v = v << 6 | (unsigned)d;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(v >> bits);
			v &= (1u << bits) - 1;
		}
	}
	return v ? -1 : o; /* leftover bits must be zero */
}

/* ---- tokens ---------------------------------------------------------------
 */

static void
mac(const char *key, const char *payload, size_t len, unsigned char md[MAC_LEN])
{
	unsigned int mlen = 0;

	if (!HMAC(EVP_sha256(), key, (int)strlen(key),
		  (const unsigned char *)payload, len, md, &mlen) ||
	    mlen != MAC_LEN)
		BUG("HMAC-SHA256 failed");
}

char *
answer_token_mint(const char *key, const char *run, int64_t seq,
		  const char *decision, int64_t expires, const char *target)
{
	struct buf payload = BUF_INIT, tok = BUF_INIT;
	unsigned char md[MAC_LEN];

	buf_addf(&payload, "v1|%s|%lld|%s|%lld|%s", run, (long long)seq,
		 decision, (long long)expires, target);
	mac(key, payload.ptr, payload.len, md);
	b64url_encode((const unsigned char *)payload.ptr, payload.len, &tok);
	buf_addch(&tok, '.');
	b64url_encode(md, sizeof(md), &tok);
	buf_release(&payload);
	return buf_detach(&tok, NULL);
}

/* The next '|'-ended field of *p into out (size len); -1 when none fits. */
static int
field(char **p, char *out, size_t len)
{
	char *bar = strchr(*p, '|');
	size_t n = bar ? (size_t)(bar - *p) : strlen(*p);

	if (!n || n >= len)
		return -1;
	memcpy(out, *p, n);
	out[n] = '\0';
	*p += n + (bar ? 1 : 0);
	return 0;
}

static int
number(const char *s, int64_t *out)
{
	char *end = NULL;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v <= 0)
		return -1;
	*out = v;
	return 0;
}

enum answer_verdict
answer_token_open(const char *key, const char *token, int64_t now,
		  struct answer_claim *out)
{
	unsigned char payload[ANSWER_TOKEN_MAX], md[MAC_LEN];
	unsigned char got[MAC_LEN + 3];
	char text[ANSWER_TOKEN_MAX + 1], num[24], *p;
	const char *dot;
	size_t len = strlen(token);
	int plen;

	memset(out, 0, sizeof(*out));
	if (!len || len > ANSWER_TOKEN_MAX || !(dot = strchr(token, '.')) ||
	    strchr(dot + 1, '.') ||
	    strspn(token, b64) != (size_t)(dot - token) ||
	    strspn(dot + 1, b64) != strlen(dot + 1))
		return ANSWER_MALFORMED;
	if (strlen(dot + 1) != 43 || /* 32 bytes */
	    b64url_decode(dot + 1, 43, got) != MAC_LEN)
		return ANSWER_MALFORMED;
	plen = b64url_decode(token, (size_t)(dot - token), payload);
	if (plen <= 0)
		return ANSWER_MALFORMED;
	memcpy(text, payload, (size_t)plen);
	text[plen] = '\0';
	mac(key, text, (size_t)plen, md);
	if (strlen(text) != (size_t)plen || CRYPTO_memcmp(md, got, MAC_LEN))
		return ANSWER_FORGED;
	/* signed by us: the fields are ours, but checked all the same */
	p = text;
	if (strncmp(p, "v1|", 3))
		return ANSWER_FORGED;
	p += 3;
	if (field(&p, out->run, sizeof(out->run)) ||
	    field(&p, num, sizeof(num)) || number(num, &out->seq) ||
	    field(&p, out->decision, sizeof(out->decision)) ||
	    field(&p, num, sizeof(num)) || number(num, &out->expires) ||
	    field(&p, out->target, sizeof(out->target)) || *p)
		return ANSWER_FORGED;
	if (strcmp(out->decision, "approve") && strcmp(out->decision, "reject"))
		return ANSWER_FORGED;
	if (now >= out->expires)
		return ANSWER_EXPIRED;
	return ANSWER_OK;
}

/* ---- pages ----------------------------------------------------------------
 */

static void
html_escape(struct buf *out, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<':
			buf_adds(out, "&lt;");
			break;
		case '>':
			buf_adds(out, "&gt;");
			break;
		case '&':
			buf_adds(out, "&amp;");
			break;
		case '"':
			buf_adds(out, "&quot;");
			break;
		case '\'':
			buf_adds(out, "&#39;");
			break;
		default:
			buf_addch(out, *s);
		}
	}
}

/* Sends a page: title, then body (already HTML), with status. */
static void
page(struct req *rq, int status, const char *title, const char *body)
{
	struct buf b = BUF_INIT;

	buf_adds(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
		     "<meta name=\"viewport\" content=\"width=device-width, "
		     "initial-scale=1\"><meta name=\"robots\" "
		     "content=\"noindex\"><title>baton: ");
	html_escape(&b, title);
	buf_adds(&b, "</title><style>body{font-family:sans-serif;max-width:"
		     "36em;margin:2em auto;padding:0 1em}button{font-size:"
		     "1.2em;padding:.5em 1.5em}</style></head><body><h1>");
	html_escape(&b, title);
	buf_adds(&b, "</h1>\n");
	buf_adds(&b, body);
	buf_adds(&b, "\n</body></html>\n");
	http_html(rq, status, b.ptr, b.len);
	buf_release(&b);
}

/* A refusal: status, a title and one paragraph of plain text. */
static void __attribute__((format(printf, 4, 5)))
refuse(struct req *rq, int status, const char *title, const char *fmt, ...)
{
	struct buf text = BUF_INIT, body = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&text, fmt, ap);
	va_end(ap);
	buf_adds(&body, "<p class=\"refused\">");
	html_escape(&body, text.ptr);
	buf_adds(&body, "</p>");
	page(rq, status, title, body.ptr);
	buf_release(&text);
	buf_release(&body);
}

/* ---- the question ---------------------------------------------------------
 */

struct last_wait {
	int64_t seq; /* the newest transition into waiting_for_approval */
};

static int
on_transition(const struct event *ev, void *arg)
{
	struct last_wait *w = arg;

	if (ev->to && !strcmp(ev->to, ST_WAITING))
		w->seq = ev->seq;
	return 0;
}

/*
 * The token of rq checked: *c filled and 0, or the refusal sent and -1.
 */
static int
claim_of(struct req *rq, struct answer_claim *c)
{
	const char *token = rq->params[0];

	if (!rq->srv->answer_key) {
		refuse(rq, 404, "Answer links are off",
		       "This server makes no answer links: server.public_url "
		       "is not set in its config.");
		return -1;
	}
	switch (answer_token_open(rq->srv->answer_key, token,
				  time_now_ms() / 1000, c)) {
	case ANSWER_OK:
		return 0;
	case ANSWER_MALFORMED:
		refuse(rq, 400, "Not an answer link",
		       "This is not an answer link baton made (%zu "
		       "characters; a link is at most %d of A-Z a-z 0-9 - _ "
		       "and one dot). Nothing was decided.",
		       strlen(token), ANSWER_TOKEN_MAX);
		return -1;
	case ANSWER_FORGED:
		log_warn("refused a forged answer link");
		refuse(rq, 403, "Link refused",
		       "This link's signature does not hold: it was changed "
		       "or not made by this server. Nothing was decided.");
		return -1;
	case ANSWER_EXPIRED:
		refuse(rq, 410, "Link expired",
		       "This link to %s run %s expired; decide in the "
		       "dashboard or with 'baton approve'/'baton reject'. "
		       "Nothing was decided.",
		       c->decision, c->run);
		return -1;
	}
	BUG("unknown answer verdict");
}

/*
 * Whether c's question is still open: its run waits, and on the event
 * c names (not on a later question). 0 with *r read, or the refusal
 * sent and -1.
 */
static int
question_open(struct req *rq, const struct answer_claim *c, struct run *r)
{
	struct last_wait w = { 0 };
	struct err e = ERR_INIT;

	if (store_run_get(rq->store, c->run, r, &e)) {
		if (e.rc == BATON_ENOTFOUND)
			refuse(rq, 404, "No such run",
			       "Run %s is not in this server's store.", c->run);
		else
			refuse(rq, 500, "Cannot read the run", "%s", e.msg);
		return -1;
	}
	if (strcmp(r->status, ST_WAITING)) {
		refuse(rq, 409, "Already answered",
		       "Run %s is %s: the question this link answers is no "
		       "longer open. Nothing was decided.",
		       r->id, r->status);
		return -1;
	}
	if (store_event_list(rq->store, r->id, 0, "transition", on_transition,
			     &w, &e)) {
		refuse(rq, 500, "Cannot read the run", "%s", e.msg);
		return -1;
	}
	if (w.seq != c->seq) {
		refuse(rq, 409, "Already answered",
		       "Run %s waits on a later question than the one this "
		       "link answers. Nothing was decided.",
		       r->id);
		return -1;
	}
	return 0;
}

/* What the run asks, as text: its question, else the gate's. */
static char *
question_text(const struct run *r)
{
	json_t *p = r->progress ? json_loads(r->progress, 0, NULL) : NULL;
	const char *q = json_get_str(json_object_get(p, "ask"), "question");
	char *s = q ? xstrdup(q)
		    : xasprintf("Approval needed before stage '%s'.",
				r->gate_status ? r->gate_status : "?");

	json_decref(p);
	return s;
}

static void
question_html(struct buf *b, const struct run *r, const char *decision)
{
	char *q = question_text(r);

	buf_adds(b, "<p>Run <b>");
	html_escape(b, r->id);
	buf_adds(b, "</b>");
	if (r->task) {
		buf_adds(b, ": ");
		html_escape(b, r->task);
	}
	buf_adds(b, "</p>\n<blockquote>");
	html_escape(b, q);
	buf_adds(b, "</blockquote>\n<p>This link will <b>");
	html_escape(b, decision);
	buf_adds(b, "</b>.</p>\n");
	free(q);
}

/* ---- the routes -----------------------------------------------------------
 */

void
answer_page(struct req *rq)
{
	struct answer_claim c;
	struct run r = { 0 };
	struct buf b = BUF_INIT;

	if (claim_of(rq, &c) || question_open(rq, &c, &r))
		goto out;
	question_html(&b, &r, c.decision);
	buf_adds(&b, "<form method=\"post\"><input type=\"hidden\" "
		     "name=\"token\" value=\"");
	html_escape(&b, rq->params[0]);
	buf_addf(&b,
		 "\"><button type=\"submit\">%s</button></form>\n"
		 "<p><small>Nothing is decided until you press the "
		 "button; the link then works no more.</small></p>",
		 !strcmp(c.decision, "approve") ? "Approve" : "Reject");
	page(rq, 200,
	     !strcmp(c.decision, "approve") ? "Approve this run?"
					    : "Reject this run?",
	     b.ptr);
out:
	buf_release(&b);
	run_release(&r);
}

/* The SHA-256 of s as 64 hex digits. */
static void
sha256_hex(const char *s, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int i, n = 0;

	if (!EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL) || n != 32)
		BUG("SHA-256 failed");
	for (i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/*
 * Claims the one use of c's question: 0 ours, or the refusal sent and
 * -1 (the question was answered through a link before).
 */
static int
claim_use(struct req *rq, const struct answer_claim *c, char *key, size_t klen)
{
	struct err e = ERR_INIT;
	char sha[65], was[65];
	int64_t task = 0;
	int rc;

	snprintf(key, klen, "answer-link\t%s\t%lld", c->run, (long long)c->seq);
	sha256_hex(rq->params[0], sha);
	rc = store_idem_claim(rq->store, key, sha, &task, was, &e);
	if (rc < 0) {
		refuse(rq, 500, "Cannot record the answer", "%s", e.msg);
		return -1;
	}
	if (rc == 1)
		return 0;
	if (!strcmp(was, sha))
		refuse(rq, 409, "Link already used",
		       "This link was used before: it acts once. Nothing "
		       "was decided.");
	else
		refuse(rq, 409, "Already answered",
		       "This question was answered through another of its "
		       "links. Nothing was decided.");
	return -1;
}

/* Nothing was decided: the question's links may be tried again. */
static void
give_back(struct req *rq, const char *key)
{
	struct err e = ERR_INIT;

	if (store_idem_bind(rq->store, key, 0, &e))
		log_warn("cannot give back an answer link's use: %s", e.msg);
}

void
answer_post(struct req *rq)
{
	char form[ANSWER_TOKEN_MAX + 1], key[200];
	struct answer_claim c;
	struct run r = { 0 }, out = { 0 };
	struct err e = ERR_INIT;
	struct engine en;
	enum gate_decision d;
	struct buf by = BUF_INIT, b = BUF_INIT;
	int rc;

	if (claim_of(rq, &c))
		goto done;
	/* the confirmation page's form: the token again, in the body */
	if (http_body(rq))
		goto done;
	buf_addch(&rq->body, '\0');
	if (http_query_var(rq->body.ptr, "token", form, sizeof(form)) < 0 ||
	    strcmp(form, rq->params[0])) {
		refuse(rq, 400, "Confirm on the page",
		       "Open the link and press its button: a POST acts only "
		       "with the form of its confirmation page. Nothing was "
		       "decided.");
		goto done;
	}
	/* the use first: a used link says so whatever the run did since */
	if (claim_use(rq, &c, key, sizeof(key)))
		goto done;
	if (question_open(rq, &c, &r)) {
		give_back(rq, key);
		goto done;
	}
	if (gate_decision_parse(c.decision, &d, &e))
		BUG("a signed decision '%s' does not parse", c.decision);
	buf_addf(&by, "link:%s", c.target);
	engine_init(&en, rq->store, rq->srv->ws, rq->srv->cfg);
	rc = engine_decide_by(&en, r.id, d, NULL, by.ptr, &out, &e);
	engine_release(&en);
	if (rc) {
		give_back(rq, key);
		refuse(rq, rc == BATON_EBADSTATE ? 409 : 500, "Not decided",
		       "%s", e.msg);
		goto done;
	}
	if (out.task_id && store_idem_bind(rq->store, key, out.task_id, &e))
		log_warn("answer link of %s: %s", out.id, e.msg);
	log_info("run %s: %s through a link of %s", out.id, c.decision,
		 c.target);
	sched_wake(rq->srv->ws);
	buf_adds(&b, "<p>Run <b>");
	html_escape(&b, out.id);
	buf_adds(&b, "</b> is now ");
	html_escape(&b, out.status);
	buf_adds(&b, ".</p>");
	page(rq, 200, d == GATE_APPROVE ? "Approved" : "Rejected", b.ptr);
done:
	buf_release(&by);
	buf_release(&b);
	run_release(&r);
	run_release(&out);
}
