/*
 * Who is asking, and whether they may (docs/security.md, "Users and
 * roles"): the bearer token of a request resolved to a name and a role,
 * and the role each route needs checked against it.
 *
 * Two kinds of token open the API. The repository's own token
 * (.baton/token, made by init and serve) is the admin "owner", as it
 * always was. Named tokens (`baton token add NAME --role ROLE`) live in
 * the store's api_tokens table, which keeps only the SHA-256 of each
 * secret: the secret is 32 random bytes, so the hash alone opens
 * nothing, and reading the table (the store sits in .baton/, outside
 * every worktree) gives no way in. A request's token is hashed and
 * looked up by its hash; the owner token is compared in constant time.
 * A token's last use is written at most once a minute.
 */
#include "util/compat.h"

#include <ctype.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include "server/server.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/json.h"
#include "util/lazy.h"
#include "util/log.h"
#include "util/timeutil.h"

#undef LOG_MODULE
#define LOG_MODULE "http"

/* A token longer than this is no token of ours: refused unhashed. */
#define TOKEN_MAX 256
/* A token's last use is written at most this often. */
#define LAST_USE_MS 60000

static const char *const role_names[] = {
	[ROLE_UNSET] = "admin", /* a route that forgot its role: fail closed */
	[ROLE_PUBLIC] = "public",     [ROLE_VIEWER] = "viewer",
	[ROLE_OPERATOR] = "operator", [ROLE_ADMIN] = "admin",
};

const char *
api_role_name(enum api_role r)
{
	return (unsigned)r < ARRAY_SIZE(role_names) ? role_names[r] : "admin";
}

int
api_role_parse(const char *word)
{
	if (!word)
		return -1;
	if (!strcmp(word, "viewer"))
		return ROLE_VIEWER;
	if (!strcmp(word, "operator"))
		return ROLE_OPERATOR;
	if (!strcmp(word, "admin"))
		return ROLE_ADMIN;
	return -1;
}

int
api_token_name_check(const char *name, struct err *e)
{
	size_t i, n = name ? strlen(name) : 0;

	if (!n || n > 64)
		return err_set(e, BATON_EINVAL,
			       "a token's name has 1 to 64 characters");
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return err_set(e, BATON_EINVAL,
				       "token name '%s': use letters, digits, "
				       "'.', '_' and '-' only",
				       name);
	if (!strcmp(name, API_OWNER))
		return err_set(e, BATON_EINVAL,
			       "token name '%s' is taken by the repository's "
			       "own token (.baton/token)",
			       name);
	return 0;
}

int
api_token_sha(const char *secret, char sha[65], struct err *e)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;
	int rc = lazy_crypto_load(e);

	if (rc)
		return rc;
	if (!EVP_Digest(secret, strlen(secret), md, &n, EVP_sha256(), NULL) ||
	    n != 32)
		return err_set(e, BATON_EINVAL, "cannot hash the token");
	for (i = 0; i < n; i++)
		snprintf(sha + 2 * i, 3, "%02x", md[i]);
	return 0;
}

int
api_token_new(char secret[65], char sha[65], struct err *e)
{
	unsigned char raw[32];
	size_t i;

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return err_set(e, -errno, "cannot draw random bytes: %s",
			       strerror(errno));
	for (i = 0; i < sizeof(raw); i++)
		snprintf(secret + 2 * i, 3, "%02x", raw[i]);
	return api_token_sha(secret, sha, e);
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

/* The token the request carries, or NULL; query: ?access_token= too. */
static const char *
given_token(const struct req *rq, int query, char *q, size_t len)
{
	const char *h = http_header(rq, "Authorization");

	if (h && !strncasecmp(h, "Bearer ", 7))
		return h + 7;
	if (query && http_query(rq, "access_token", q, len))
		return q;
	return NULL;
}

int
http_authenticate(struct req *rq, int query)
{
	struct api_token t = { 0 };
	struct err e = ERR_INIT;
	char q[TOKEN_MAX + 8], sha[65];
	const char *tok = given_token(rq, query, q, sizeof(q));
	int64_t now;
	int rc;

	if (!tok || !*tok)
		return AUTH_NONE;
	if (strlen(tok) > TOKEN_MAX)
		return AUTH_UNKNOWN;
	if (rq->srv->token && token_equal(tok, rq->srv->token)) {
		snprintf(rq->actor, sizeof(rq->actor), "%s", API_OWNER);
		rq->role = ROLE_ADMIN;
		return AUTH_OK;
	}
	if (!rq->store || api_token_sha(tok, sha, &e))
		return AUTH_FAILED;
	rc = store_token_find(rq->store, sha, &t, &e);
	if (rc < 0) {
		log_warn("cannot look the token up: %s", e.msg);
		return AUTH_FAILED;
	}
	if (rc == 0)
		return AUTH_UNKNOWN;
	snprintf(rq->actor, sizeof(rq->actor), "%s", t.name);
	if (t.revoked_at) {
		api_token_release(&t);
		return AUTH_REVOKED;
	}
	rq->role =
	    api_role_parse(t.role) > 0 ? api_role_parse(t.role) : ROLE_VIEWER;
	now = time_now_ms();
	if (now - t.last_used_at >= LAST_USE_MS &&
	    store_token_used(rq->store, t.name, now, &e))
		log_warn("cannot record token '%s''s use: %s", t.name, e.msg);
	api_token_release(&t);
	return AUTH_OK;
}

int
http_permit(struct req *rq, const struct route *r)
{
	enum api_role need = r->role == ROLE_UNSET ? ROLE_ADMIN : r->role;
	char msg[300];

	if (need == ROLE_PUBLIC || rq->role >= need)
		return 0;
	snprintf(
	    msg, sizeof(msg), "%s %s needs the %s role; token '%s' is %s %s",
	    r->method, r->pattern, api_role_name(need), rq->actor,
	    rq->role == ROLE_ADMIN || rq->role == ROLE_OPERATOR ? "an" : "a",
	    api_role_name(rq->role));
	http_error_with(rq, 403, "forbidden", msg,
			json_pack("{s:s, s:s, s:s}", "role_needed",
				  api_role_name(need), "role",
				  api_role_name(rq->role), "token", rq->actor));
	return -1;
}

/* ---- the token routes (admin) -------------------------------------------- */

json_t *
api_token_json(const struct api_token *t)
{
	return json_pack(
	    "{s:s, s:s, s:o, s:o, s:b, s:o}", "name", t->name, "role", t->role,
	    "created_at", json_time(t->created_at), "last_used_at",
	    t->last_used_at ? json_time(t->last_used_at) : json_null(),
	    "revoked", t->revoked_at != 0, "revoked_at",
	    t->revoked_at ? json_time(t->revoked_at) : json_null());
}

static int
add_token(const struct api_token *t, void *arg)
{
	json_array_append_new(arg, api_token_json(t));
	return 0;
}

void
tokens_list(struct req *rq)
{
	struct err e = ERR_INIT;
	json_t *arr = json_array();

	if (store_token_list(rq->store, add_token, arr, &e)) {
		json_decref(arr);
		http_fail(rq, &e);
		return;
	}
	http_json(rq, 200, json_pack("{s:o}", "tokens", arr));
}

void
tokens_create(struct req *rq)
{
	struct err e = ERR_INIT;
	json_t *body = NULL;
	const char *name, *role;
	char secret[65], sha[65];

	if (http_body_json(rq, (void **)&body))
		return;
	name = json_string_value(json_object_get(body, "name"));
	role = json_string_value(json_object_get(body, "role"));
	if (api_token_name_check(name, &e)) {
		http_error(rq, 400, "bad_request", "\"name\": %s", e.msg);
		goto out;
	}
	if (api_role_parse(role) < 0) {
		http_error(rq, 400, "bad_request",
			   "\"role\" must be viewer, operator or admin");
		goto out;
	}
	if (api_token_new(secret, sha, &e) ||
	    store_token_add(rq->store, name, role, sha, &e)) {
		http_fail(rq, &e);
		goto out;
	}
	log_info("token '%s' (%s) added by '%s'", name, role, rq->actor);
	http_json(rq, 201,
		  json_pack("{s:s, s:s, s:s}", "name", name, "role", role,
			    "token", secret));
out:
	json_decref(body);
}

void
token_revoke(struct req *rq)
{
	struct err e = ERR_INIT;
	int rc = store_token_revoke(rq->store, rq->params[0], &e);

	if (rc < 0) {
		http_fail(rq, &e);
		return;
	}
	log_info("token '%s' revoked by '%s'", rq->params[0], rq->actor);
	stream_revoke(rq->params[0]); /* its open streams end now */
	http_json(rq, 200,
		  json_pack("{s:s, s:b, s:b}", "name", rq->params[0], "revoked",
			    1, "already", rc == 0));
}
