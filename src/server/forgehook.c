/*
 * POST /api/v1/forge/webhook: GitHub's webhook deliveries (issue 19,
 * docs/api.md). GitHub cannot send baton's bearer token, so a delivery
 * proves itself by its X-Hub-Signature-256, the HMAC-SHA256 of the raw
 * body under the secret in the variable forge.webhook_secret_env names:
 *
 *   no forge or no secret ──▶ 404
 *   body over the limit ───▶ 413
 *   signature missing, malformed or not the body's ──▶ 401, nothing kept
 *   no X-GitHub-Event / X-GitHub-Delivery, not JSON ──▶ 400, nothing kept
 *   delivery id seen before ──▶ 200 {"duplicate": true}, nothing done
 *   issues, pull_request, pull_request_review(_comment), check_run,
 *   check_suite, status ──▶ forge_wake: the companion syncs now; 200
 *   ping ──▶ 200;  any other event ──▶ 202, ignored
 *
 * Every new, verified delivery is kept (store_forge_delivery_seen, so a
 * redelivery acts once on any host of the store), counted
 * (forge_stats.webhooks) and recorded as a forge_webhook event. The
 * payload itself is not acted on: it only says that something changed,
 * and the sync reads the truth from the API, so a delivery can wake a
 * sync and do no more.
 */
#include "util/compat.h"

#include <ctype.h>
#include <strings.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/config.h"
#include "core/run.h"
#include "forge/forge.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/log.h"
#include "util/xalloc.h"

#undef LOG_MODULE
#define LOG_MODULE "http"

#define SHA256_LEN   32
#define DELIVERY_MAX 100 /* GitHub's are GUIDs: 36 characters */
#define EVENT_MAX    64

/* The events whose news a sync acts on (docs/api.md). */
static const char *const sync_events[] = {
	"issues",
	"pull_request",
	"pull_request_review",
	"pull_request_review_comment",
	"check_run",
	"check_suite",
	"status",
};

static int
is_sync_event(const char *event)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sync_events); i++)
		if (!strcmp(event, sync_events[i]))
			return 1;
	return 0;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Whether sig ("sha256=" and 64 hex digits) is the HMAC-SHA256 of body
 * under secret. The digests are compared with CRYPTO_memcmp, in time
 * that does not depend on where they differ.
 */
static int
signature_ok(const char *sig, const char *secret, const struct buf *body)
{
	unsigned char want[EVP_MAX_MD_SIZE], given[SHA256_LEN];
	unsigned int len = 0;
	size_t i;

	if (strncmp(sig, "sha256=", 7) || strlen(sig + 7) != 2 * SHA256_LEN)
		return 0;
	for (i = 0; i < SHA256_LEN; i++) {
		int hi = hexval(sig[7 + 2 * i]), lo = hexval(sig[8 + 2 * i]);

		if (hi < 0 || lo < 0)
			return 0;
		given[i] = (unsigned char)(hi << 4 | lo);
	}
	if (!HMAC(EVP_sha256(), secret, (int)strlen(secret),
		  (const unsigned char *)body->ptr, body->len, want, &len) ||
	    len != SHA256_LEN)
		return 0;
	return CRYPTO_memcmp(want, given, SHA256_LEN) == 0;
}

/* Whether s is 1..max characters of letters, digits and seps. */
static int
is_token(const char *s, size_t max, const char *seps)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!isalnum((unsigned char)s[n]) && !strchr(seps, s[n]))
			return 0;
	return n > 0 && n <= max;
}

/* The secret, or NULL when webhooks are off (404 sent). */
static const char *
webhook_secret(struct req *rq)
{
	const struct config_forge *f = &rq->srv->cfg->forge;
	const char *secret;

	if (!f->type) {
		http_error(rq, 404, "not_found",
			   "no forge is configured: forge webhooks are off");
		return NULL;
	}
	if (!f->webhook_secret_env) {
		http_error(rq, 404, "not_found",
			   "forge webhooks are off: no "
			   "forge.webhook_secret_env in the config");
		return NULL;
	}
	secret = getenv(f->webhook_secret_env);
	if (!secret || !*secret) {
		/* an empty key would let anyone sign */
		log_warn("a forge webhook came, but %s (forge.webhook_"
			 "secret_env) is not set or empty: answered 404",
			 f->webhook_secret_env);
		http_error(rq, 404, "not_found",
			   "forge webhooks are off: the variable "
			   "forge.webhook_secret_env names is not set in "
			   "serve's environment");
		return NULL;
	}
	return secret;
}

/* Records the delivery as the event forge_webhook (kept in the log). */
static int
record(struct req *rq, const char *delivery, const char *event, json_t *payload,
       const char *outcome, struct err *e)
{
	json_t *action = json_object_get(payload, "action");
	struct event ev = { 0 };
	char *data;
	int rc;

	data = json_dumps(
	    json_pack("{s:s, s:s, s:s?, s:s}", "delivery", delivery, "event",
		      event, "action",
		      json_is_string(action) ? json_string_value(action) : NULL,
		      "outcome", outcome),
	    JSON_COMPACT | JSON_ENSURE_ASCII);
	ev.type = (char *)"forge_webhook";
	ev.data = data;
	rc = store_event_add(rq->store, &ev, e);
	free(data);
	return rc;
}

void
forge_webhook(struct req *rq)
{
	struct forge_stats one = { .webhooks = 1 };
	const char *secret, *sig, *event, *delivery, *type, *outcome;
	struct err e = ERR_INIT;
	json_t *payload = NULL;
	int rc, status;

	secret = webhook_secret(rq);
	if (!secret || http_body(rq))
		return;
	sig = http_header(rq, "X-Hub-Signature-256");
	if (!sig || !*sig) {
		http_error(rq, 401, "unauthorized",
			   "the delivery has no X-Hub-Signature-256 header: "
			   "give the webhook a secret on GitHub, the one in "
			   "forge.webhook_secret_env");
		return;
	}
	if (!signature_ok(sig, secret, &rq->body)) {
		log_warn("a forge webhook with a bad X-Hub-Signature-256 "
			 "was refused (%zu bytes)",
			 rq->body.len);
		http_error(rq, 401, "unauthorized",
			   "X-Hub-Signature-256 is not the HMAC-SHA256 of the "
			   "body under the secret in forge.webhook_secret_env");
		return;
	}
	event = http_header(rq, "X-GitHub-Event");
	delivery = http_header(rq, "X-GitHub-Delivery");
	if (!event || !is_token(event, EVENT_MAX, "_")) {
		http_error(rq, 400, "bad_request",
			   "X-GitHub-Event is missing or not an event name");
		return;
	}
	if (!delivery || !is_token(delivery, DELIVERY_MAX, "-_.")) {
		http_error(rq, 400, "bad_request",
			   "X-GitHub-Delivery is missing or not a delivery id "
			   "(a GUID)");
		return;
	}
	type = http_header(rq, "Content-Type");
	if (type &&
	    !strncasecmp(type, "application/x-www-form-urlencoded", 33)) {
		http_error(rq, 400, "bad_request",
			   "the delivery is form-encoded: set the webhook's "
			   "content type to application/json on GitHub");
		return;
	}
	if (http_body_json(rq, (void **)&payload))
		return; /* 400, naming where the body stops being JSON */
	rc = store_forge_delivery_seen(rq->store, delivery, event, &e);
	if (rc < 0)
		goto fail;
	if (rc == 0) {
		log_info("forge webhook %s (%s) came again: already acted on",
			 delivery, event);
		http_json(rq, 200,
			  json_pack("{s:s, s:s, s:b, s:s}", "delivery",
				    delivery, "event", event, "duplicate", 1,
				    "outcome", "duplicate"));
		goto out;
	}
	if (is_sync_event(event)) {
		outcome = "sync";
		status = 200;
	} else if (!strcmp(event, "ping")) {
		outcome = "pong";
		status = 200;
	} else {
		outcome = "ignored";
		status = 202;
	}
	/* first: waking cannot fail, and the delivery is now taken */
	if (!strcmp(outcome, "sync"))
		forge_wake(rq->srv->ws);
	if (record(rq, delivery, event, payload, outcome, &e) ||
	    store_forge_stats_add(rq->store, &one, &e))
		goto fail;
	log_info("forge webhook %s (%s): %s", delivery, event, outcome);
	http_json(rq, status,
		  json_pack("{s:s, s:s, s:b, s:s}", "delivery", delivery,
			    "event", event, "duplicate", 0, "outcome",
			    outcome));
	goto out;
fail:
	http_fail(rq, &e);
out:
	json_decref(payload);
}
