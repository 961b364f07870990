/*
 * Pull requests out, CI and review back in (docs/forge.md, "Pull
 * requests" and "Reactions"). Each round, for the tasks waiting in
 * blocked(pull_request) (sched__on_forge put them there instead of the
 * local merge queue):
 *
 *   no PR yet          push the run's branch to forge.remote, open one
 *                      PR (a 422 "already exists" adopts it: a crash
 *                      between the two never makes a second)
 *   a fix round's own  push its tip to the parent's PR branch, with a
 *   finished run       lease on the head baton last saw; the round is
 *                      done, the PR told what changed
 *   an open PR         read state, head, checks and reviews: merged ends
 *                      the task done, closed cancelled; a head baton did
 *                      not push stops it (a person's commits are never
 *                      overwritten); a failing check or "changes
 *                      requested" makes a fix round on the PR's head;
 *                      after reactions.max_rounds a person is asked;
 *                      approved and green merges with auto_merge
 *
 * A fix round is a task of origin "rework" whose parent is the PR's
 * task, based on the PR's head commit. The link's `reacted` keeps what
 * was answered last ("ci:SHA", "review:ID", "asked:..."), so that one
 * failure makes one round however many rounds read it.
 */
#include "util/compat.h"

#define LOG_MODULE "forge"

#include <jansson.h>
#include <stdlib.h>

#include "core/config.h"
#include "core/gate.h"
#include "core/run.h"
#include "forge/forge_int.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* An excerpt of a check's output or a comment kept in a prompt. */
#define EXCERPT_MAX 4000

static int
is_waiting(const struct task *t)
{
	return !strcmp(t->status, TASK_BLOCKED) && t->block_reason &&
	       !strcmp(t->block_reason, BLOCK_PULL_REQUEST);
}

struct idvec {
	int64_t *v;
	size_t nr, alloc;
};

static int
collect_waiting(const struct task *t, void *arg)
{
	struct idvec *ids = arg;

	if (is_waiting(t)) {
		ALLOC_GROW(ids->v, ids->nr + 1, ids->alloc);
		ids->v[ids->nr++] = t->id;
	}
	return 0;
}

static int
collect_open_rounds(const struct task *t, void *arg)
{
	int *open = arg;

	if (strcmp(t->status, TASK_DONE) && strcmp(t->status, TASK_CANCELLED) &&
	    strcmp(t->status, TASK_FAILED))
		(*open)++;
	return 0;
}

/* Whether a fix round of task id is still under way. */
static int
round_open(struct forge_ctx *fx, int64_t id, struct err *e)
{
	struct store_task_filter f = { .parent_id = id };
	int open = 0, rc;

	rc = store_task_list(fx->s, &f, collect_open_rounds, &open, e);
	return rc ? rc : open > 0;
}

/* Writes t with an event; a conflict means another round moved it. */
static int
write_task(struct forge_ctx *fx, struct task *t, const char *type,
	   json_t *data, struct err *e)
{
	struct sched_ctx x = forge__sched(fx);
	char *text = json_take_text(data);
	int rc = sched_task_write(&x, t, type, text, e);

	free(text);
	if (rc == BATON_ECONFLICT) {
		*e = (struct err)ERR_INIT;
		rc = 0;
	}
	return rc;
}

/* Ends task t (done or cancelled) with reason, from its PR's fate. */
static int
end_task(struct forge_ctx *fx, struct task *t, const struct forge_link *l,
	 const char *status, const char *reason, struct err *e)
{
	run_set(&t->status, status);
	run_set(&t->block_reason, NULL);
	run_set(&t->reason, reason);
	t->ended_at = time_now_ms();
	return write_task(fx, t,
			  !strcmp(status, TASK_DONE) ? "task_done"
						     : "task_cancelled",
			  json_pack("{s:s, s:I}", "reason", reason, "pr",
				    (json_int_t)l->pr_number),
			  e);
}

/*
 * Asks a person about the PR of task t: the PR gets forge's label, the
 * task keeps waiting with a reason saying what is asked, listed by
 * `baton approvals`. what (e.g. "asked:head:SHA") is kept in reacted so
 * that one question is asked once.
 */
static int
ask_person(struct forge_ctx *fx, struct task *t, struct forge_link *l,
	   const char *what, const char *question, struct err *e)
{
	const char *labels[] = { fx->cfg->forge.human_label, NULL };
	char *reason;
	int rc;

	if (l->reacted && !strcmp(l->reacted, what))
		return 0;
	run_set(&l->reacted, what);
	rc = store_forge_link_put(fx->s, l, e);
	if (rc)
		return rc == BATON_ECONFLICT ? (*e = (struct err)ERR_INIT, 0)
					     : rc;
	rc = gh_labels_add(&fx->gh, (long)l->pr_number, labels, e);
	if (rc)
		return rc;
	reason = xasprintf("asks a person: %s (pull request #%lld)", question,
			   (long long)l->pr_number);
	run_set(&t->reason, reason);
	rc = write_task(fx, t, "forge_asked",
			json_pack("{s:s, s:I}", "question", question, "pr",
				  (json_int_t)l->pr_number),
			e);
	free(reason);
	if (!rc)
		fx->round->asked++;
	return rc;
}

/* ---- opening ----------------------------------------------------------- */

/* The PR's body: what changed, checks, cost, and the issue it closes. */
static void
pr_body(struct forge_ctx *fx, const struct task *t, const struct run *r,
	const struct forge_link *l, struct buf *out)
{
	struct strvec paths = STRVEC_INIT;
	struct err ignored = ERR_INIT;
	size_t i;

	buf_addf(out, "baton carried task t%lld through run `%s` (%s).\n",
		 (long long)t->id, r->id, r->status);
	if (t->body && *t->body) {
		size_t n = utf8_cut(t->body, strlen(t->body), EXCERPT_MAX);

		buf_addf(out, "\n## Task\n\n%.*s%s\n", (int)n, t->body,
			 t->body[n] ? " [...]" : "");
	}
	if (r->base_commit &&
	    !worktree_changed_paths(fx->ws, NULL, r->base_commit, r->branch,
				    &paths, &ignored)) {
		buf_addf(out, "\n## What changed\n\n");
		for (i = 0; i < paths.nr && i < 100; i++)
			buf_addf(out, "- `%s`\n", paths.v[i]);
		if (paths.nr > 100)
			buf_addf(out, "- and %zu more\n", paths.nr - 100);
	}
	buf_addf(out, "\n## Checks\n\n");
	if (!fx->cfg->validate_commands.nr)
		buf_addf(out, "No validate commands are configured.\n");
	for (i = 0; i < fx->cfg->validate_commands.nr; i++)
		buf_addf(out, "- `%s` passed\n", fx->cfg->validate_commands.v[i]);
	buf_addf(out, "\nThe run's review stages approved it%s.\n",
		 fx->cfg->runtime.judge ? ", and so did the judge" : "");
	if (r->cost_usd > 0)
		buf_addf(out, "\nCost: $%.2f\n", r->cost_usd);
	if (l->issue_number > 0)
		buf_addf(out, "\nCloses #%lld\n", (long long)l->issue_number);
	strvec_clear(&paths);
}

/* The number, URL and head of the PR whose head is branch, if any. */
static int
find_pr(struct forge_ctx *fx, const char *branch, struct forge_link *l,
	struct err *e)
{
	json_t *list = NULL, *pr;
	size_t i;
	int rc = gh_pulls_for_head(&fx->gh, branch, &list, e);

	json_array_foreach(list, i, pr) {
		l->pr_number = json_integer_value(json_object_get(pr, "number"));
		run_set(&l->pr_url,
			json_string_value(json_object_get(pr, "html_url")));
		break;
	}
	json_decref(list);
	return rc;
}

static int
open_pr(struct forge_ctx *fx, struct task *t, struct forge_link *l,
	struct err *e)
{
	struct run r = { 0 };
	struct buf body = BUF_INIT;
	char *base = NULL, *tip = NULL, *ref = NULL;
	json_t *pr = NULL;
	int rc;

	rc = store_run_get(fx->s, t->run_id, &r, e);
	if (rc)
		goto out;
	if (!r.branch) {
		rc = err_set(e, BATON_EINVAL, "run '%s' has no branch to push",
			     r.id);
		goto out;
	}
	rc = worktree_base_branch(fx->ws, fx->cfg->merge.base_branch, &base,
				  e);
	if (!rc)
		rc = remote_push(fx->ws, fx->cfg->forge.remote, r.branch, 0, e);
	if (rc)
		goto out;
	fx->round->pushes++;
	ref = xasprintf("refs/heads/%s", r.branch);
	rc = workspace_resolve(fx->ws, ref, &tip, e);
	if (!rc && !tip)
		rc = err_set(e, BATON_EINVAL, "run '%s': branch '%s' is gone",
			     r.id, r.branch);
	if (rc)
		goto out;
	pr_body(fx, t, &r, l, &body);
	rc = gh_pull_create(&fx->gh, t->title, r.branch, base, body.ptr,
			    0, &pr, e);
	if (rc == BATON_EINVAL && strstr(e->msg, "already exists")) {
		/* made by a round that died before it kept the number */
		*e = (struct err)ERR_INIT;
		rc = find_pr(fx, r.branch, l, e);
		if (!rc && !l->pr_number)
			rc = err_set(e, BATON_EINVAL,
				     "GitHub says a pull request for '%s' "
				     "exists, but lists none",
				     r.branch);
	} else if (!rc) {
		l->pr_number =
			json_integer_value(json_object_get(pr, "number"));
		run_set(&l->pr_url,
			json_string_value(json_object_get(pr, "html_url")));
		fx->round->prs_opened++;
	}
	if (rc)
		goto out;
	run_set(&l->pr_branch, r.branch);
	run_set(&l->pr_head_sha, tip);
	run_set(&l->pr_state, "open");
	rc = store_forge_link_put(fx->s, l, e);
	if (!rc)
		log_info("task %lld: pull request #%lld opened for %s",
			 (long long)t->id, (long long)l->pr_number, r.branch);
out:
	json_decref(pr);
	buf_release(&body);
	free(base);
	free(tip);
	free(ref);
	run_release(&r);
	return rc;
}

/* ---- a fix round's push ------------------------------------------------ */

static int
push_round(struct forge_ctx *fx, struct task *t, struct task *parent,
	   struct forge_link *pl, struct err *e)
{
	struct run r = { 0 };
	struct buf text = BUF_INIT;
	char *tip = NULL, *ref = NULL, *reason = NULL;
	int rc;

	rc = store_run_get(fx->s, t->run_id, &r, e);
	if (rc)
		goto out;
	ref = xasprintf("refs/heads/%s", r.branch ? r.branch : "");
	if (!r.branch || workspace_resolve(fx->ws, ref, &tip, e) < 0 ||
	    !tip) {
		rc = err_set(e, BATON_EINVAL, "fix round t%lld: run '%s' has "
			     "no branch to push", (long long)t->id, r.id);
		goto out;
	}
	rc = remote_push_lease(fx->ws, fx->cfg->forge.remote, tip,
			       pl->pr_branch, pl->pr_head_sha, e);
	if (rc) {
		struct err ignored = ERR_INIT;
		char *what = xasprintf("asked:push:%s", tip);

		log_warn("task %lld: %s", (long long)parent->id, e->msg);
		*e = (struct err)ERR_INIT;
		rc = ask_person(fx, parent, pl, what,
				"its branch moved under baton's fix round "
				"(someone pushed to it); baton does not "
				"overwrite a person's commits",
				&ignored);
		free(what);
		goto out;
	}
	fx->round->pushes++;
	run_set(&pl->pr_head_sha, tip);
	rc = store_forge_link_put(fx->s, pl, e);
	if (rc)
		goto out;
	buf_addf(&text,
		 "baton pushed fix round %d (task t%lld, run `%s`) to this "
		 "pull request: %s.",
		 pl->reaction_rounds, (long long)t->id, r.id, t->title);
	rc = gh_issue_comment(&fx->gh, (long)pl->pr_number, text.ptr, NULL, e);
	if (rc)
		goto out;
	reason = xasprintf("pushed to pull request #%lld",
			   (long long)pl->pr_number);
	rc = end_task(fx, t, pl, TASK_DONE, reason, e);
out:
	buf_release(&text);
	free(reason);
	free(tip);
	free(ref);
	run_release(&r);
	return rc;
}

/* ---- reading a PR ------------------------------------------------------ */

struct pr_state {
	const char *checks; /* success | failure | pending | NULL: no CI */
	struct buf failing; /* what failed, for the fix round's prompt */
	const char *review; /* approved | changes_requested | NULL */
	int64_t review_id;  /* the changes_requested review */
	json_t *reviews;    /* the listing, read once a round: a second GET
			       would be answered 304, without a body */
};

static void
add_excerpt(struct buf *b, const char *label, const char *text)
{
	size_t n;

	if (!text || !*text)
		return;
	n = utf8_cut(text, strlen(text), EXCERPT_MAX);
	buf_addf(b, "%s%.*s%s\n", label, (int)n, text, text[n] ? " [...]" : "");
}

/* Combined status and check runs at sha: their state and failures. */
static int
read_checks(struct forge_ctx *fx, const char *sha, struct pr_state *ps,
	    struct err *e)
{
	json_t *combined = NULL, *runs = NULL, *st, *cr;
	char *path;
	int failing = 0, pending = 0, seen = 0, rc;
	size_t i;

	path = xasprintf("/repos/%s/commits/%s/status", fx->cfg->forge.repo,
			 sha);
	rc = forge__get_kept(fx, path, &combined, e);
	free(path);
	path = xasprintf("/repos/%s/commits/%s/check-runs",
			 fx->cfg->forge.repo, sha);
	if (!rc)
		rc = forge__get_kept(fx, path, &runs, e);
	free(path);
	if (rc)
		goto out;
	json_array_foreach(json_object_get(combined, "statuses"), i, st) {
		const char *state = json_string_value(
			json_object_get(st, "state"));

		seen++;
		if (!state || !strcmp(state, "pending")) {
			pending++;
		} else if (strcmp(state, "success")) {
			failing++;
			buf_addf(&ps->failing, "### Status `%s`: %s\n\n",
				 json_string_value(json_object_get(st, "context")),
				 state);
			add_excerpt(&ps->failing, "Description: ",
				    json_string_value(json_object_get(
					    st, "description")));
			add_excerpt(&ps->failing, "Details: ",
				    json_string_value(json_object_get(
					    st, "target_url")));
			buf_addch(&ps->failing, '\n');
		}
	}
	json_array_foreach(json_object_get(runs, "check_runs"), i, cr) {
		const char *status = json_string_value(
			json_object_get(cr, "status"));
		const char *concl = json_string_value(
			json_object_get(cr, "conclusion"));
		json_t *o = json_object_get(cr, "output");

		seen++;
		if (!status || strcmp(status, "completed")) {
			pending++;
		} else if (concl && strcmp(concl, "success") &&
			   strcmp(concl, "neutral") &&
			   strcmp(concl, "skipped")) {
			failing++;
			buf_addf(&ps->failing, "### Check run `%s`: %s\n\n",
				 json_string_value(json_object_get(cr, "name")),
				 concl);
			add_excerpt(&ps->failing, "",
				    json_string_value(json_object_get(o, "title")));
			add_excerpt(&ps->failing, "",
				    json_string_value(
					    json_object_get(o, "summary")));
			add_excerpt(&ps->failing, "",
				    json_string_value(json_object_get(o, "text")));
			add_excerpt(&ps->failing, "Details: ",
				    json_string_value(json_object_get(
					    cr, "details_url")));
			buf_addch(&ps->failing, '\n');
		}
	}
	ps->checks = failing ? "failure"
		     : pending ? "pending"
		     : seen    ? "success"
			       : NULL;
out:
	json_decref(combined);
	json_decref(runs);
	return rc;
}

/* Each reviewer's latest decision: changes requested wins over approval. */
static int
read_reviews(struct forge_ctx *fx, int64_t pr, struct pr_state *ps,
	     struct err *e)
{
	json_t *list = NULL, *rv, *latest = json_object();
	char *path = xasprintf("/repos/%s/pulls/%lld/reviews?per_page=100",
			       fx->cfg->forge.repo, (long long)pr);
	const char *who;
	size_t i;
	int rc = forge__get_kept(fx, path, &list, e);

	free(path);

	ps->reviews = json_incref(list);

	json_array_foreach(list, i, rv) {
		const char *state = json_string_value(
			json_object_get(rv, "state"));

		who = json_string_value(
			json_object_get(json_object_get(rv, "user"), "login"));
		if (!who || !state || !strcmp(state, "COMMENTED") ||
		    !strcmp(state, "PENDING"))
			continue;
		json_object_set(latest, who, rv); /* listed oldest first */
	}
	json_object_foreach(latest, who, rv) {
		const char *state = json_string_value(
			json_object_get(rv, "state"));

		if (!strcmp(state, "CHANGES_REQUESTED")) {
			ps->review = "changes_requested";
			ps->review_id = json_integer_value(
				json_object_get(rv, "id"));
		} else if (!strcmp(state, "APPROVED") && !ps->review) {
			ps->review = "approved";
		}
	}
	json_decref(latest);
	json_decref(list);
	return rc;
}

/* The text of the review asking for changes, with its line comments. */
static int
review_text(struct forge_ctx *fx, const struct forge_link *l,
	    const struct pr_state *ps, struct buf *out, struct err *e)
{
	json_t *comments = NULL, *x;
	size_t i;
	int rc;

	rc = gh_pull_review_comments(&fx->gh, (long)l->pr_number, &comments,
				     e);
	if (rc)
		goto out;
	json_array_foreach(ps->reviews, i, x) {
		if (json_integer_value(json_object_get(x, "id")) !=
		    ps->review_id)
			continue;
		buf_addf(out, "### Review by %s: changes requested\n\n",
			 json_string_value(json_object_get(
				 json_object_get(x, "user"), "login")));
		add_excerpt(out, "",
			    json_string_value(json_object_get(x, "body")));
		buf_addch(out, '\n');
	}
	json_array_foreach(comments, i, x) {
		json_t *line = json_object_get(x, "line");

		if (json_integer_value(json_object_get(
			    x, "pull_request_review_id")) != ps->review_id)
			continue;
		if (!json_is_integer(line))
			line = json_object_get(x, "original_line");
		buf_addf(out, "- `%s` line %lld: ",
			 json_string_value(json_object_get(x, "path")),
			 (long long)json_integer_value(line));
		add_excerpt(out, "",
			    json_string_value(json_object_get(x, "body")));
	}
out:
	json_decref(comments);
	return rc;
}

/* ---- reacting ---------------------------------------------------------- */

/* A fix round: a task on the PR's head whose prompt carries what. */
static int
add_round(struct forge_ctx *fx, struct task *t, struct forge_link *l,
	  const char *sig, const char *kind, const char *what,
	  struct err *e)
{
	struct sched_ctx x = forge__sched(fx);
	struct task w = { 0 };
	char *fetched = NULL;
	int rc;

	/* the round starts from the PR's head, which may be a person's
	 * commit this clone has never seen (a go-on after their push) */
	rc = remote_fetch_base(fx->ws, fx->cfg->forge.remote, l->pr_branch,
			       &fetched, e);
	free(fetched);
	if (rc)
		return rc;
	l->reaction_rounds++;
	run_set(&l->reacted, sig);
	rc = store_forge_link_put(fx->s, l, e);
	if (rc)
		return rc == BATON_ECONFLICT ? (*e = (struct err)ERR_INIT, 0)
					     : rc;
	w.title = xasprintf("Fix round %d of t%lld (%s): %s",
			    l->reaction_rounds, (long long)t->id, kind,
			    t->title);
	w.body = xasprintf("%s%sPull request #%lld of this task needs a fix: "
			   "%s. Fix it on top of the pull request's head "
			   "(%.12s):\n\n%s",
			   t->body ? t->body : "", t->body ? "\n\n" : "",
			   (long long)l->pr_number, kind, l->pr_head_sha, what);
	sched_task_rework_of(&w, t, l->pr_head_sha);
	sched_task_fit(&w);
	rc = sched_task_add(&x, &w, e);
	if (!rc) {
		fx->round->rounds++;
		log_info("task %lld: fix round %d (%s) is t%lld",
			 (long long)t->id, l->reaction_rounds, kind,
			 (long long)w.id);
	}
	task_release(&w);
	return rc;
}

/*
 * What the PR's CI and reviews ask of baton: a fix round, a question, or
 * nothing (answered already, a round under way, or reactions "ignore").
 */
static int
react(struct forge_ctx *fx, struct task *t, struct forge_link *l,
      struct pr_state *ps, struct err *e)
{
	const struct config_forge *f = &fx->cfg->forge;
	struct buf what = BUF_INIT;
	const char *how = NULL, *kind = NULL;
	char *sig = NULL, *asked = NULL;
	int rc = round_open(fx, t->id, e);

	if (rc)
		return rc < 0 ? rc : 0;
	if (ps->checks && !strcmp(ps->checks, "failure")) {
		how = f->on_ci_failed;
		kind = "CI failed";
		sig = xasprintf("ci:%s", l->pr_head_sha);
		buf_add(&what, ps->failing.ptr, ps->failing.len);
	} else if (ps->review && !strcmp(ps->review, "changes_requested")) {
		how = f->on_changes_requested;
		kind = "changes requested";
		sig = xasprintf("review:%lld", (long long)ps->review_id);
		rc = review_text(fx, l, ps, &what, e);
	}
	if (rc || !sig || !strcmp(how, "ignore"))
		goto out;
	asked = xasprintf("asked:%s", sig);
	if ((l->reacted && !strcmp(l->reacted, sig)) ||
	    (l->reacted && !strcmp(l->reacted, asked)))
		goto out;
	if (!strcmp(how, "ask")) {
		rc = ask_person(fx, t, l, asked, kind, e);
	} else if (l->reaction_rounds >= f->max_rounds) {
		char *q = xasprintf("%s after %d fix rounds "
				    "(forge.reactions.max_rounds)",
				    kind, l->reaction_rounds);

		rc = ask_person(fx, t, l, asked, q, e);
		free(q);
	} else {
		rc = add_round(fx, t, l, sig, kind, what.ptr, e);
	}
out:
	free(sig);
	free(asked);
	buf_release(&what);
	return rc;
}

/*
 * The PR conflicts with its base (GitHub says mergeable false, state
 * dirty): as the local merge queue does, a round redoes the change on
 * the base as forge.remote has it now, keeping what the base gained; its
 * tip then replaces the PR's branch (with the lease, as any round).
 */
static int
conflict_round(struct forge_ctx *fx, struct task *t, struct forge_link *l,
	       const char *base_branch, struct err *e)
{
	const struct config_forge *f = &fx->cfg->forge;
	struct sched_ctx x = forge__sched(fx);
	struct task w = { 0 };
	struct buf diff = BUF_INIT, body = BUF_INIT;
	char *fetched = NULL, *base = NULL, *sig = NULL, *asked = NULL;
	char *dir = NULL, *path = NULL, *text = NULL;
	int rc, cut = 0;

	rc = remote_fetch_base(fx->ws, f->remote, base_branch, &fetched, e);
	if (!rc)
		rc = workspace_resolve(fx->ws, fetched, &base, e);
	if (!rc && !base)
		rc = err_set(e, BATON_EINVAL, "the base branch '%s' is not on "
			     "'%s'", base_branch, f->remote);
	if (rc)
		goto out;
	sig = xasprintf("conflict:%s:%s", l->pr_head_sha, base);
	asked = xasprintf("asked:%s", sig);
	if (l->reacted && (!strcmp(l->reacted, sig) ||
			   !strcmp(l->reacted, asked)))
		goto out;
	if (l->reaction_rounds >= f->max_rounds) {
		rc = ask_person(fx, t, l, asked,
				"it conflicts with its base after the fix "
				"rounds (forge.reactions.max_rounds)",
				e);
		goto out;
	}
	dir = xasprintf("%s/forge", fx->ws->dir);
	path = xasprintf("%s/pr-%lld-conflict.diff", dir,
			 (long long)l->pr_number);
	if (fs_mkdir_p(dir, 0700, e) < 0 ||
	    worktree_branch_diff(fx->ws, fetched, l->pr_head_sha, path,
				 EXCERPT_MAX * 4, &diff, &cut, e) < 0) {
		rc = -1;
		goto out;
	}
	text = xasprintf("%s%s%s", t->title, t->body ? "\n\n" : "",
			 t->body ? t->body : "");
	buf_addf(&body,
		 "Pull request #%lld (branch %s) conflicts with what %s has "
		 "now. Starting from the current %s, make the change the "
		 "original task asks for again, keeping what %s gained "
		 "meanwhile. The pull request's change is below for "
		 "reference.\n\n## The original task\n\n%s\n\n"
		 "## The pull request's change (git diff %s...%.12s)\n\n"
		 "```diff\n%s%s```\n%s",
		 (long long)l->pr_number, l->pr_branch, base_branch,
		 base_branch, base_branch, text, base_branch, l->pr_head_sha,
		 diff.ptr,
		 diff.len && diff.ptr[diff.len - 1] != '\n' ? "\n" : "",
		 cut ? "\n(cut; the whole diff is in .baton/forge/)\n" : "");
	l->reaction_rounds++;
	run_set(&l->reacted, sig);
	rc = store_forge_link_put(fx->s, l, e);
	if (rc)
		goto out;
	w.title = xasprintf("Fix round %d of t%lld (merge conflict): %s",
			    l->reaction_rounds, (long long)t->id, t->title);
	w.body = buf_detach(&body, NULL);
	sched_task_rework_of(&w, t, base);
	free(w.origin);
	w.origin = xstrdup("conflict");
	sched_task_fit(&w);
	rc = sched_task_add(&x, &w, e);
	if (!rc)
		fx->round->rounds++;
out:
	task_release(&w);
	buf_release(&diff);
	buf_release(&body);
	free(fetched);
	free(base);
	free(sig);
	free(asked);
	free(dir);
	free(path);
	free(text);
	return rc;
}

static int
merge_pr(struct forge_ctx *fx, struct task *t, struct forge_link *l,
	 struct err *e)
{
	char *reason;
	int rc = gh_pull_merge(&fx->gh, (long)l->pr_number,
			       fx->cfg->forge.merge_method, NULL, e);

	if (rc == BATON_EINVAL) {
		/* refused (protection, conflict): said on the task once, and
		 * tried again next round (the protection may be satisfied) */
		if (t->reason && !strcmp(t->reason, e->msg)) {
			*e = (struct err)ERR_INIT;
			return 0;
		}
		run_set(&t->reason, e->msg);
		*e = (struct err)ERR_INIT;
		return write_task(fx, t, "forge_merge_refused",
				  json_pack("{s:s, s:I}", "reason", t->reason,
					    "pr", (json_int_t)l->pr_number),
				  e);
	}
	if (rc)
		return rc;
	fx->round->merged++;
	run_set(&l->pr_state, "merged");
	rc = store_forge_link_put(fx->s, l, e);
	if (rc)
		return rc == BATON_ECONFLICT ? (*e = (struct err)ERR_INIT, 0)
					     : rc;
	reason = xasprintf("its pull request #%lld was merged by baton",
			   (long long)l->pr_number);
	rc = end_task(fx, t, l, TASK_DONE, reason, e);
	free(reason);
	return rc;
}

static int
watch_pr(struct forge_ctx *fx, struct task *t, struct forge_link *l,
	 struct err *e)
{
	struct pr_state ps = { .failing = BUF_INIT };
	json_t *pr = NULL;
	const char *state, *sha, *mstate;
	char *reason = NULL;
	int rc, changed;

	reason = xasprintf("/repos/%s/pulls/%lld", fx->cfg->forge.repo,
			   (long long)l->pr_number);
	rc = forge__get_kept(fx, reason, &pr, e);
	FREE_AND_NULL(reason);
	if (rc)
		goto out;
	state = json_string_value(json_object_get(pr, "state"));
	sha = json_string_value(
		json_object_get(json_object_get(pr, "head"), "sha"));
	if (json_is_true(json_object_get(pr, "merged")) ||
	    (state && strcmp(state, "open"))) {
		int merged = json_is_true(json_object_get(pr, "merged"));

		run_set(&l->pr_state, merged ? "merged" : "closed");
		rc = store_forge_link_put(fx->s, l, e);
		if (rc)
			goto out;
		reason = xasprintf(merged ? "its pull request #%lld was merged"
					  : "its pull request #%lld was closed "
					    "without merging",
				   (long long)l->pr_number);
		rc = end_task(fx, t, l, merged ? TASK_DONE : TASK_CANCELLED,
			      reason, e);
		goto out;
	}
	if (sha && !l->pr_head_sha) {
		/* a person said go on from the head as it is */
		run_set(&l->pr_head_sha, sha);
		rc = store_forge_link_put(fx->s, l, e);
		if (rc)
			goto out;
	}
	if (sha && l->pr_head_sha && strcmp(sha, l->pr_head_sha)) {
		char *what = xasprintf("asked:head:%s", sha);

		rc = ask_person(fx, t, l, what,
				"its branch was pushed by someone else (head "
				"now at a commit baton did not push); baton "
				"does not overwrite a person's commits",
				e);
		free(what);
		goto out;
	}
	rc = read_checks(fx, l->pr_head_sha, &ps, e);
	if (!rc)
		rc = read_reviews(fx, l->pr_number, &ps, e);
	if (rc)
		goto out;
	changed = strcmp(l->checks ? l->checks : "", ps.checks ? ps.checks : "") ||
		  strcmp(l->review ? l->review : "", ps.review ? ps.review : "");
	if (changed) {
		run_set(&l->checks, ps.checks);
		run_set(&l->review, ps.review);
		rc = store_forge_link_put(fx->s, l, e);
		if (rc)
			goto out;
	}
	mstate = json_string_value(json_object_get(pr, "mergeable_state"));
	if (json_is_false(json_object_get(pr, "mergeable")) && mstate &&
	    !strcmp(mstate, "dirty")) {
		rc = round_open(fx, t->id, e);
		if (rc == 0)
			rc = conflict_round(
				fx, t, l,
				json_string_value(json_object_get(
					json_object_get(pr, "base"), "ref")),
				e);
		goto out;
	}
	if (ps.review && !strcmp(ps.review, "approved") &&
	    (!ps.checks || !strcmp(ps.checks, "success"))) {
		if (fx->cfg->forge.auto_merge && round_open(fx, t->id, e) == 0)
			rc = merge_pr(fx, t, l, e);
		goto out;
	}
	rc = react(fx, t, l, &ps, e);
out:
	if (rc == BATON_ECONFLICT) {
		*e = (struct err)ERR_INIT; /* another round moved it */
		rc = 0;
	}
	free(reason);
	buf_release(&ps.failing);
	json_decref(ps.reviews);
	json_decref(pr);
	return rc;
}

/* ---- the round --------------------------------------------------------- */

static int
one_task(struct forge_ctx *fx, int64_t id, struct err *e)
{
	struct task t = { 0 }, parent = { 0 };
	struct forge_link l = { 0 }, pl = { 0 };
	int rc = store_task_get(fx->s, id, &t, e);

	if (rc || !is_waiting(&t))
		goto out;
	/* a fix round of a PR: its work goes to its parent's PR */
	if (t.parent_id &&
	    (!strcmp(t.origin, "rework") || !strcmp(t.origin, "conflict")) &&
	    store_forge_link_get(fx->s, t.parent_id, &pl, e) == 0 &&
	    pl.pr_number > 0) {
		rc = store_task_get(fx->s, t.parent_id, &parent, e);
		if (!rc)
			rc = push_round(fx, &t, &parent, &pl, e);
		goto out;
	}
	*e = (struct err)ERR_INIT;
	rc = store_forge_link_get(fx->s, id, &l, e);
	if (rc == BATON_ENOTFOUND) {
		*e = (struct err)ERR_INIT;
		l.task_id = id;
		l.repo = xstrdup(fx->cfg->forge.repo);
		rc = 0;
	}
	if (rc)
		goto out;
	rc = l.pr_number ? watch_pr(fx, &t, &l, e) : open_pr(fx, &t, &l, e);
	if (rc)
		err_prefix(e, "task t%lld", (long long)id);
out:
	task_release(&t);
	task_release(&parent);
	forge_link_release(&l);
	forge_link_release(&pl);
	return rc;
}

int
forge__pulls(struct forge_ctx *fx, struct err *e)
{
	struct store_task_filter f = { .status = TASK_BLOCKED };
	struct idvec ids = { 0 };
	size_t i;
	int rc, first = 0;

	rc = store_task_list(fx->s, &f, collect_waiting, &ids, e);
	/* one task's trouble (a refused push, a 422) is said and kept on
	 * record; the other tasks still get their round */
	for (i = 0; !rc && i < ids.nr; i++) {
		struct err one = ERR_INIT;
		int r1 = one_task(fx, ids.v[i], &one);

		if (r1 == BATON_EBUSY || r1 == -EIO) {
			*e = one;
			rc = r1; /* rate limited or GitHub away: stop */
		} else if (r1) {
			log_warn("%s", one.msg);
			if (!first)
				first = r1;
		}
	}
	free(ids.v);
	(void)first;
	return rc;
}

/* ---- a person's answer ------------------------------------------------- */

int
forge_answer(struct store *s, const struct workspace *ws,
	     const struct config *cfg, int64_t id, int approve,
	     struct err *e)
{
	struct forge_ctx fx = { .cfg = cfg, .s = s, .ws = ws };
	struct forge_link l = { 0 };
	struct task t = { 0 };
	char *reason = NULL;
	int rc = store_task_get(s, id, &t, e);

	if (!rc && (!is_waiting(&t) || !t.reason ||
		    strncmp(t.reason, "asks a person", 13)))
		rc = err_set(e, BATON_EINVAL,
			     "task t%lld asks nothing: it is %s%s%s (baton "
			     "approvals lists what waits for an answer)",
			     (long long)id, t.status,
			     t.block_reason ? " " : "",
			     t.block_reason ? t.block_reason : "");
	if (!rc)
		rc = store_forge_link_get(s, id, &l, e);
	if (rc)
		goto out;
	if (!approve) {
		reason = xasprintf("a person declined to go on with pull "
				   "request #%lld (it stays open on GitHub)",
				   (long long)l.pr_number);
		rc = end_task(&fx, &t, &l, TASK_CANCELLED, reason, e);
		goto out;
	}
	/* go on: from the PR's head as it is, with max_rounds more rounds */
	if (l.reacted && (!strncmp(l.reacted, "asked:head:", 11) ||
			  !strncmp(l.reacted, "asked:push:", 11)))
		FREE_AND_NULL(l.pr_head_sha);
	FREE_AND_NULL(l.reacted);
	l.reaction_rounds = 0;
	rc = store_forge_link_put(s, &l, e);
	if (rc)
		goto out;
	run_set(&t.reason, "waiting for its pull request");
	rc = write_task(&fx, &t, "forge_answered",
			json_pack("{s:s, s:I}", "answer",
				  gate_decision_name(GATE_APPROVE), "pr",
				  (json_int_t)l.pr_number),
			e);
out:
	free(reason);
	forge_link_release(&l);
	task_release(&t);
	return rc;
}
