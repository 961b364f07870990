/*
 * Inside the forge module: what one sync round shares between its parts.
 * sync.c makes the context and runs the parts in order: intake.c (issues
 * in), then pr.c (pull requests out, CI and review back in).
 */
#ifndef BATON_FORGE_FORGE_INT_H
#define BATON_FORGE_FORGE_INT_H

#include "forge/forge.h"
#include "forge/github.h"
#include "sched/sched.h"
#include "util/strvec.h"

struct forge_ctx {
	const struct config *cfg;
	struct store *s;
	const struct workspace *ws;
	struct gh_client gh;	/* token from cfg->forge.token_env */
	struct forge_round *round;
	/* paths ("/repos/O/N/issues?") whose listings' first-page ETags
	 * are kept in the store between rounds (forge__keep_etags) */
	struct strvec keep;
};

/*
 * intake.c: open issues with the intake label become tasks (exactly once,
 * store_forge_intake); a task of a closed or unlabelled issue that has
 * not run is cancelled; the issue is told when a run starts and ends.
 */
int forge__intake(struct forge_ctx *fx, struct err *e);

/*
 * pr.c: tasks waiting in blocked(pull_request) get their branch pushed
 * and one PR; open PRs are read (state, head, checks, reviews) and turned
 * into fix rounds, a question for a person, a merge, or the task's end.
 */
int forge__pulls(struct forge_ctx *fx, struct err *e);

/*
 * intake.c, after forge__pulls (so that a run's end can name its PR):
 * each issue whose task's run started or ended since the last round gets
 * one comment saying so (the link's commented field keeps it to one).
 */
int forge__comments(struct forge_ctx *fx, struct err *e);

/*
 * sync.c: makes fx for one round (the client; see forge__keep_etags for
 * its ETags); forge__end persists the kept ETags (when keep) and
 * adds the client's counters to the store's forge stats, then releases.
 */
int forge__begin(struct forge_ctx *fx, const struct config *cfg,
		 struct store *s, const struct workspace *ws,
		 struct forge_round *round, struct err *e);
void forge__end(struct forge_ctx *fx, int keep);

/*
 * sync.c: keeps the ETags of the first pages of the listings whose URL
 * starts with path (relative to api_url, e.g. "/repos/O/N/issues?")
 * between rounds, and restores what earlier rounds kept of them now: a
 * later process sends If-None-Match. Only for listings whose caller
 * reads a 304 as "nothing changed" (gh_list's not_modified); a listing
 * nobody asked to keep is always asked for in full.
 */
void forge__keep_etags(struct forge_ctx *fx, const char *path);

/*
 * sync.c: GET path (relative to api_url) whose answer is kept in the
 * store with its ETag (forge_cursors: the body in its cursor), so that
 * while nothing changes every later GET, in any round of any process,
 * costs one conditional request answered 304 (GitHub does not count it
 * against the rate limit) and gives the kept body. An answer with more
 * pages is read whole (gh_list) and not kept. *out is the caller's.
 */
int forge__get_kept(struct forge_ctx *fx, const char *path, json_t **out,
		    struct err *e);

/* sync.c: the scheduler's context for the tasks a round writes. */
struct sched_ctx forge__sched(const struct forge_ctx *fx);

#endif
