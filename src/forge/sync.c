/*
 * One sync round (docs/forge.md, "Sync and serve"): the frame the parts
 * share. forge_sync makes the client (the token read from the variable
 * forge.token_env names, at the moment of the round, and kept nowhere
 * but in the client's memory), restores the ETags earlier rounds kept,
 * runs intake.c and pr.c, tells the issues about their runs, and adds
 * the client's counters to the store's, for /metrics.
 *
 * ETags live in the store's forge_cursors, one row per listing URL, so
 * that a `baton forge sync` run tomorrow, or serve's companion after a
 * restart, still asks "changed since?" (a 304 costs no quota). Only the
 * first pages of listings whose callers read a 304 as "nothing new" are
 * kept (forge__keep_etags): a 304 on a single GET would leave its caller
 * without the body it came for. They are written only after a round that
 * went through: a round that failed half-way must not have a later 304
 * hide the issues it did not get to. The row "forge:etags" lists the
 * URLs kept, since the store has no listing of cursors.
 */
#include "util/compat.h"

#define LOG_MODULE "forge"

#include <stdlib.h>
#include <time.h>

#include <jansson.h>

#include "core/config.h"
#include "forge/forge.h"
#include "forge/forge_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* The cursor row that lists the URLs whose ETags are kept. */
#define ETAG_INDEX "forge:etags"

int
forge_check(const struct config *cfg, struct err *e)
{
	const struct config_forge *f = &cfg->forge;
	const char *token;

	if (!f->type || !f->repo)
		return err_set(e, BATON_EINVAL,
			       "the forge is not configured: add a forge: "
			       "section (type, repo, token_env) to "
			       ".baton/config.yaml (docs/forge.md)");
	if (strcmp(f->type, "github"))
		return err_set(e, BATON_EINVAL,
			       "forge.type '%s' is not one baton knows "
			       "(github)",
			       f->type);
	if (!f->token_env || !*f->token_env)
		return err_set(e, BATON_EINVAL,
			       "forge.token_env is empty: name the variable "
			       "that holds the GitHub token (GITHUB_TOKEN)");
	token = getenv(f->token_env);
	if (!token || !*token)
		return err_set(e, BATON_EINVAL,
			       "the variable %s (forge.token_env) is not set: "
			       "export the GitHub token for %s in it",
			       f->token_env, f->repo);
	return 0;
}

/* Whether url is the first page of a listing a part asked to keep. */
static int
kept(const struct forge_ctx *fx, const char *url)
{
	const char *q = strchr(url, '?');
	size_t i, n = strlen(fx->gh.api_url);

	if (!q || strncmp(url, fx->gh.api_url, n) || strstr(q, "&page=") ||
	    strstr(q, "?page="))
		return 0;
	for (i = 0; i < fx->keep.nr; i++)
		if (!strncmp(url + n, fx->keep.v[i], strlen(fx->keep.v[i])))
			return 1;
	return 0;
}

/* Restores the ETags of the URLs ETAG_INDEX lists that are kept now. */
static void
etags_load(struct forge_ctx *fx)
{
	struct err e = ERR_INIT;
	char *etag = NULL, *list = NULL;
	json_t *urls;
	const json_t *u;
	size_t i;

	if (store_forge_cursor_get(fx->s, ETAG_INDEX, &etag, &list, &e)) {
		log_warn("forge: cannot read the kept ETags: %s", e.msg);
		return;
	}
	free(etag);
	urls = list ? json_loads(list, 0, NULL) : NULL;
	free(list);
	json_array_foreach(urls, i, u) {
		char *tag = NULL, *cursor = NULL;

		if (!json_is_string(u) || !kept(fx, json_string_value(u)))
			continue;
		if (!store_forge_cursor_get(fx->s, json_string_value(u), &tag,
					    &cursor, &e) &&
		    tag)
			gh_etag_set(&fx->gh, json_string_value(u), tag);
		e = (struct err)ERR_INIT;
		free(tag);
		free(cursor);
	}
	json_decref(urls);
}

struct etag_save {
	struct forge_ctx *fx;
	json_t *urls;
	struct err *e;
};

static int
save_one(void *arg, const char *url, const char *etag)
{
	struct etag_save *sv = arg;

	if (!kept(sv->fx, url))
		return 0;
	json_array_append_new(sv->urls, json_string(url));
	return store_forge_cursor_set(sv->fx->s, url, etag, NULL, sv->e);
}

/* Writes the kept ETags and their index. */
static void
etags_save(struct forge_ctx *fx)
{
	struct err e = ERR_INIT;
	struct etag_save sv = { fx, json_array(), &e };
	char *list = NULL;

	if (!gh_etag_each(&fx->gh, save_one, &sv)) {
		list = json_dumps(sv.urls, JSON_COMPACT);
		store_forge_cursor_set(fx->s, ETAG_INDEX, NULL, list, &e);
	}
	if (e.rc)
		log_warn("forge: cannot keep the ETags: %s", e.msg);
	free(list);
	json_decref(sv.urls);
}

void
forge__keep_etags(struct forge_ctx *fx, const char *path)
{
	size_t i;

	for (i = 0; i < fx->keep.nr; i++)
		if (!strcmp(fx->keep.v[i], path))
			return;
	strvec_push(&fx->keep, path);
	etags_load(fx); /* what earlier rounds kept of it */
}

int
forge__begin(struct forge_ctx *fx, const struct config *cfg, struct store *s,
	     const struct workspace *ws, struct forge_round *round,
	     struct err *e)
{
	const struct config_forge *f = &cfg->forge;
	const char *token;
	char *dir = NULL;
	int rc;

	memset(fx, 0, sizeof(*fx));
	strvec_init(&fx->keep);
	rc = forge_check(cfg, e);
	if (rc)
		return rc;
	token = getenv(f->token_env);
	rc = gh_client_init(&fx->gh,
			    f->api_url ? f->api_url : "https://api.github.com",
			    f->repo, token, f->token_env, e);
	if (rc)
		return rc;
	dir = xasprintf("%s/forge", ws->dir);
	if (fs_mkdir_p(dir, 0700, NULL) == 0)
		fx->gh.log_dir = dir; /* else no log: it is no reason to stop */
	else
		free(dir);
	fx->cfg = cfg;
	fx->s = s;
	fx->ws = ws;
	fx->round = round;
	return 0;
}

void
forge__end(struct forge_ctx *fx, int keep)
{
	struct forge_stats d = { 0 };
	struct err e = ERR_INIT;

	if (!fx->s)
		goto out; /* forge__begin did not get that far */
	if (keep)
		etags_save(fx);
	d.calls = (int64_t)fx->gh.calls;
	d.not_modified = (int64_t)fx->gh.not_modified;
	d.rate_waits = (int64_t)fx->gh.waits;
	d.rate_wait_seconds = fx->gh.wait_seconds;
	d.syncs = 1;
	if (store_forge_stats_add(fx->s, &d, &e))
		log_warn("forge: cannot count the round: %s", e.msg);
	if (fx->round)
		fx->round->calls += d.calls;
out:
	gh_client_release(&fx->gh);
	strvec_clear(&fx->keep);
	memset(fx, 0, sizeof(*fx));
}

int
forge_sync(const struct config *cfg, struct store *s,
	   const struct workspace *ws, struct forge_round *out, struct err *e)
{
	struct forge_ctx fx;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = forge__begin(&fx, cfg, s, ws, out, e);
	if (rc)
		goto out;
	rc = forge__intake(&fx, e);
	if (!rc)
		rc = forge__pulls(&fx, e);
	if (!rc)
		rc = forge__comments(&fx, e);
	if (rc == BATON_EBUSY) {
		int64_t now = (int64_t)time(NULL);

		out->retry_at =
		    fx.gh.rate_reset > now ? fx.gh.rate_reset : now + 60;
	}
out:
	forge__end(&fx, rc == 0);
	return rc;
}

/* An answer bigger than this is not kept (it is asked for in full). */
#define KEPT_MAX (1024 * 1024)

int
forge__get_kept(struct forge_ctx *fx, const char *path, json_t **out,
		struct err *e)
{
	struct gh_response r = { 0 };
	struct err ignored = ERR_INIT;
	char *url = xasprintf("%s%s", fx->gh.api_url, path);
	char *etag = NULL, *body = NULL, *text;
	json_t *kept = NULL;
	int rc;

	*out = NULL;
	if (!store_forge_cursor_get(fx->s, url, &etag, &body, &ignored) &&
	    etag && body)
		kept = json_loads(body, JSON_ALLOW_NUL, NULL);
	/* without a body to give, ask for one: never If-None-Match */
	gh_etag_set(&fx->gh, url, kept ? etag : NULL);
	rc = gh_request(&fx->gh, "GET", path, NULL, &r, e);
	if (rc)
		goto out;
	if (r.not_modified && kept) {
		*out = json_incref(kept);
	} else if (r.not_modified) {
		rc = err_set(e, BATON_EINVAL, "GET %s: 304 with no kept answer",
			     path);
	} else if (r.next_url) {
		rc = gh_list(&fx->gh, path, out, NULL, e);
	} else {
		*out = json_incref(r.json);
		text = r.etag && r.json ? json_dumps(r.json, JSON_COMPACT)
					: NULL;
		if (text && strlen(text) <= KEPT_MAX &&
		    store_forge_cursor_set(fx->s, url, r.etag, text, &ignored))
			log_warn("cannot keep the answer of GET %s: %s", path,
				 ignored.msg);
		free(text);
	}
out:
	gh_response_release(&r);
	json_decref(kept);
	free(etag);
	free(body);
	free(url);
	return rc;
}

struct sched_ctx
forge__sched(const struct forge_ctx *fx)
{
	struct sched_ctx x = { .store = fx->s, .ws = fx->ws, .cfg = fx->cfg,
			       .holder = "forge" };

	return x;
}

/* ---- waking serve's companion ------------------------------------------ */

char *
forge_wake_dir(const struct workspace *ws)
{
	return xasprintf("%s/forge-wake.d", ws->dir);
}

void
forge_wake(const struct workspace *ws)
{
	char *dir = forge_wake_dir(ws);

	fs_wake_fifos(dir);
	free(dir);
}
