/*
 * A GitHub REST (v3) client over libcurl: the foundation of issue 19.
 * It knows one repository ("owner/name") under one API base URL
 * (https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise)
 * and one token, which the caller reads from the variable that
 * forge.token_env names and passes in: this module reads no config.
 *
 * The token goes into the Authorization header and nowhere else: errors
 * and the request log name the variable (token_env), never the value.
 */
#ifndef BATON_FORGE_GITHUB_H
#define BATON_FORGE_GITHUB_H

#include <jansson.h>
#include <stdint.h>

struct err;

/*
 * Asked before the client waits out a rate limit: seconds to wait and why
 * ("secondary rate limit", "primary rate limit"). Return 0 once the wait
 * is done (the callback does the waiting, as the scheduler's quota waits
 * do), or non-zero to give up: the request then fails with BATON_EBUSY.
 */
typedef int (*gh_wait_fn)(void *arg, int64_t seconds, const char *why);

struct gh_etag;

struct gh_client {
	char *api_url;   /* no trailing slash */
	char *repo;      /* owner/name */
	char *token;     /* the secret; only ever in the Authorization header */
	char *token_env; /* its variable's name, for messages */
	/*
	 * The request log: one JSON line per request and answer in
	 * log_dir/log-YYYY-MM-DD.jsonl (UTC), at most log_cap bytes a day,
	 * the token and every secret redact.h knows replaced. log_dir is
	 * made 0700 when missing and must be a directory of this user, not
	 * a link; the file is opened without following a link (0600), and
	 * days older than log_keep_days are removed. NULL: no log.
	 */
	char *log_dir;
	size_t log_cap;     /* bytes per day's log; 0: 8 MiB */
	int log_keep_days;  /* days of logs kept, today included; 0: 7 */
	char *log_error;    /* why the last line was not logged, or NULL */
	char log_day[16];   /* the day last logged (pruning runs once a day) */
	gh_wait_fn wait; /* NULL: sleep when the wait is <= max_wait_s */
	void *wait_arg;
	int64_t max_wait_s; /* without a wait callback; default 60 */
	struct gh_etag *etags; /* URL -> ETag, in memory */
	/* counters for /metrics */
	uint64_t calls, not_modified, waits;
	int64_t wait_seconds;
	long rate_remaining; /* last X-RateLimit-Remaining; -1 unknown */
	int64_t rate_reset;  /* last X-RateLimit-Reset (epoch seconds) */
};

struct gh_response {
	long status;
	int not_modified; /* a 304: the caller's copy is current */
	json_t *json;     /* parsed body (NULL for 304 or an empty body) */
	char *next_url;   /* Link rel="next", or NULL */
	char *etag;
	long rate_remaining;
	int64_t rate_reset;
	int64_t retry_after; /* seconds; -1 when absent */
};

/* Sets c up; token may be NULL (anonymous). Returns 0 or BATON_EINVAL. */
int gh_client_init(struct gh_client *c, const char *api_url, const char *repo,
		   const char *token, const char *token_env, struct err *e);
void gh_client_release(struct gh_client *c);

/*
 * The ETag map, so that the caller can persist and restore it; a NULL
 * etag forgets the URL's (its next GET is asked for in full).
 */
const char *gh_etag_get(const struct gh_client *c, const char *url);
void gh_etag_set(struct gh_client *c, const char *url, const char *etag);
/* Calls fn for each (url, etag); stops at the first non-zero return. */
int gh_etag_each(const struct gh_client *c,
		 int (*fn)(void *arg, const char *url, const char *etag),
		 void *arg);

/*
 * One request. path is "/repos/..." (relative to api_url) or a full URL
 * (a Link "next"). body may be NULL. A GET carries If-None-Match when an
 * ETag is known for its URL. Rate limits are waited out (see gh_wait_fn),
 * at most three times. A 2xx or 304 returns 0; a 4xx returns BATON_EINVAL,
 * a 5xx or a transport failure -EIO, a rate limit not waited out
 * BATON_EBUSY (r->rate_reset / r->retry_after say until when); e then
 * says "METHOD PATH: STATUS MESSAGE" with GitHub's message.
 */
int gh_request(struct gh_client *c, const char *method, const char *path,
	       json_t *body, struct gh_response *r, struct err *e);
void gh_response_release(struct gh_response *r);

/*
 * GET path (which may carry a query) with per_page=100, following every
 * Link rel="next"; *out is one array of all items. *not_modified is set
 * when the first page answered 304 (then *out is NULL).
 */
int gh_list(struct gh_client *c, const char *path, json_t **out,
	    int *not_modified, struct err *e);

/* Thin wrappers (paths under /repos/OWNER/NAME). */
int gh_issues_with_label(struct gh_client *c, const char *label,
			 json_t **out, int *not_modified, struct err *e);
int gh_issue_get(struct gh_client *c, long number, json_t **out,
		 struct err *e);
int gh_issue_comment(struct gh_client *c, long number, const char *text,
		     json_t **out, struct err *e);
int gh_labels_add(struct gh_client *c, long number, const char *const *labels,
		  struct err *e);
int gh_pull_create(struct gh_client *c, const char *title, const char *head,
		   const char *base, const char *text, int draft, json_t **out,
		   struct err *e);
int gh_pull_get(struct gh_client *c, long number, json_t **out,
		struct err *e);
int gh_pulls_for_head(struct gh_client *c, const char *head, json_t **out,
		      struct err *e);
int gh_pull_merge(struct gh_client *c, long number, const char *method,
		  json_t **out, struct err *e);
int gh_pull_reviews(struct gh_client *c, long number, json_t **out,
		    struct err *e);
int gh_pull_review_comments(struct gh_client *c, long number, json_t **out,
			    struct err *e);
int gh_statuses(struct gh_client *c, const char *ref, json_t **out,
		struct err *e);
int gh_combined_status(struct gh_client *c, const char *ref, json_t **out,
		       struct err *e);
int gh_check_runs(struct gh_client *c, const char *ref, json_t **out,
		  struct err *e);

#endif
