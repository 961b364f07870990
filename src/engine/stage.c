/*
 * One stage: its pending steers, its start event and its kind's run
 * (kinds/kind.h), then what a stop leaves (aborted or interrupted). And
 * the services a stage's work uses that are neither a call nor a prompt:
 * the run folder's files, checkpoints held to policies.allowed_paths,
 * and who plays a stage.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "core/verdict.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/redact.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/limits.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"


const char *
engine__work_dir(const struct drive *d)
{
	return d->r.worktree ? d->r.worktree : d->run_dir;
}

int
engine__read_file(const struct drive *d, const char *name, struct buf *out)
{
	char *path = engine__run_file(d, name);
	int rc = fs_read_nofollow(path, out, BUF_MAX_ARTIFACT, NULL);

	free(path);
	return rc;
}

int
engine__write_file(const struct drive *d, const char *name, const char *text,
		   struct err *e)
{
	char *path = engine__run_file(d, name);
	int rc = fs_write_atomic(path, text, strlen(text), e);

	if (!rc)
		engine_keep_file(d->en, d->r.id, name, NULL);
	free(path);
	return rc;
}

void
engine__take_unseen(struct drive *d, struct strvec *paths)
{
	size_t i, j;

	for (i = 0; i < d->unseen.nr; i++) {
		for (j = 0; j < paths->nr; j++)
			if (!strcmp(paths->v[j], d->unseen.v[i]))
				break;
		if (j == paths->nr)
			strvec_push(paths, d->unseen.v[i]);
	}
	strvec_clear(&d->unseen);
}

/*
 * Records a checkpoint commit after a stage that edits code, then holds
 * the edits to policies.allowed_paths: a path outside them blocks the run
 * with every such path named (the commit stays, for people to look at).
 */
/* 1 for a path of baton's own config and state: .baton or below it. */
static int
is_batons(const char *path)
{
	return !strncmp(path, ".baton", 6) &&
	       (path[6] == '\0' || path[6] == '/');
}

int
engine__checkpoint(struct drive *d, const struct stage *s,
		   enum stage_result *res, char **reason, struct err *e)
{
	const struct config *cfg = d->en->cfg;
	char *msg = xasprintf("baton %s: %s\n\nRun: %s\nTask: %s", d->r.id,
			      s->name, d->r.id, d->r.task);
	char *prev = xstrdup(d->r.checkpoint ? d->r.checkpoint :
					       d->r.base_commit);
	struct strvec paths = STRVEC_INIT;
	struct buf outside = BUF_INIT, own = BUF_INIT;
	const char *policy = "allowed_paths";
	char *commit = NULL;
	int changed = 0, pushed, rc;
	size_t i, n = 0, nown = 0;

	rc = worktree_checkpoint(d->en->ws, d->r.worktree, msg, &commit,
				 &changed, e);
	if (rc)
		goto out;
	if (changed && prev)
		rc = worktree_changed_paths(d->en->ws, d->r.worktree, prev,
					    commit, &paths, e);
	/* and what the calls changed that git did not commit */
	engine__take_unseen(d, &paths);
	d->ckpt_changed = changed || paths.nr;
	for (i = 0; !rc && i < paths.nr; i++) {
		if (is_batons(paths.v[i]))
			buf_addf(&own, "%s%s", nown++ ? ", " : "", paths.v[i]);
		else if (!config_path_allowed(cfg, paths.v[i]))
			buf_addf(&outside, "%s%s", n++ ? ", " : "",
				 paths.v[i]);
	}
	if (rc)
		goto out;
	if (nown) {
		/* baton's own first: it is what a landing would make the
		   repository's config, hooks and all */
		struct buf tmp = outside;

		outside = own;
		own = tmp;
		n = nown;
		policy = "baton_config";
	}
	/* On the shared remote first (takeover.c): the store never names a
	 * checkpoint another host could not fetch. */
	pushed = engine__ckpt_push(d, commit);
	/* A stage whose edits are in and allowed is done for good: a driver
	 * killed after this write goes on from here, never re-running it. */
	run_set(&d->r.checkpoint, commit);
	if (!n && !d->in_steps)
		run_set(&d->r.phase, RUN_PHASE_CHECKPOINTED);
	rc = engine__note(d, "checkpoint",
			  json_pack("{s:s, s:s, s:b, s:o*}", "stage", s->name,
				    "commit", commit, "changed", changed,
				    "pushed", pushed ? json_boolean(pushed > 0) :
						       NULL),
			  e);
	if (!rc && n) {
		*res = STAGE_BLOCK;
		*reason = xasprintf("stage %s edited %zu file%s %s: %s",
				    s->name, n, n == 1 ? "" : "s",
				    nown ? "of baton's own config (.baton/), "
					   "which no agent may change" :
					   "outside policies.allowed_paths",
				    outside.ptr);
		rc = engine__note(d, "policy_violation",
				  json_pack("{s:s, s:s, s:s}", "stage",
					    s->name, "policy", policy,
					    "paths", outside.ptr),
				  e);
	}
out:
	strvec_clear(&paths);
	buf_release(&outside);
	buf_release(&own);
	free(commit);
	free(prev);
	free(msg);
	return rc;
}

/*
 * Why a landing of the run's history would bring in a blocked change:
 * each commit from the fork point to tip that changed a path outside
 * policies.allowed_paths or under .baton/, as "path (commit abc1234)",
 * into out; the number of them is returned. The final diff is not
 * enough: a commit that changes a blocked path and a later one that puts
 * it back leave no trace in it, but both are in the history a merge
 * brings in, and the first is what an agent could use to smuggle
 * content (a hook, a config) past a reviewer who sees only the diff.
 */
static size_t
history_breaches(struct drive *d, const char *tip, struct buf *out,
		 struct err *e)
{
	struct strvec paths = STRVEC_INIT, commits = STRVEC_INIT;
	size_t i, n = 0;

	if (worktree_history_paths(d->en->ws, d->r.base_commit, tip, &paths,
				   &commits, e) < 0) {
		/* unreadable history: refuse rather than pass it */
		buf_addf(out, "the history could not be read: %s", e->msg);
		n = 1;
		goto out;
	}
	for (i = 0; i < paths.nr; i++) {
		if (!is_batons(paths.v[i]) &&
		    config_path_allowed(d->en->cfg, paths.v[i]))
			continue;
		if (n < 20)
			buf_addf(out, "%s%s (commit %.12s)", n ? ", " : "",
				 paths.v[i], commits.v[i]);
		n++;
	}
	if (n > 20)
		buf_addf(out, " and %zu more", n - 20);
out:
	strvec_clear(&paths);
	strvec_clear(&commits);
	return n;
}

int
engine__finish(struct drive *d, struct err *e)
{
	struct buf why = BUF_INIT;
	struct err ignored = ERR_INIT;
	char *ref = NULL, *tip = NULL, *reason;
	size_t n;
	int rc;

	if (strcmp(d->p->terminal, ST_MERGE_READY) || d->p->no_git ||
	    !d->r.base_commit || !d->r.branch)
		return engine__move(d, d->p->terminal, NULL, e);
	ref = xasprintf("refs/heads/%s", d->r.branch);
	if (workspace_resolve(d->en->ws, ref, &tip, &ignored) || !tip)
		tip = xstrdup(d->r.checkpoint ? d->r.checkpoint :
						d->r.base_commit);
	n = history_breaches(d, tip, &why, &ignored);
	if (!n) {
		rc = engine__move(d, d->p->terminal, NULL, e);
		goto out;
	}
	rc = engine__note(d, "policy_violation",
			  json_pack("{s:s, s:s, s:s, s:s}", "stage", "history",
				    "policy", "history", "paths", why.ptr,
				    "since", d->r.base_commit),
			  e);
	if (rc)
		goto out;
	reason = xasprintf("the run's history since its fork point %.12s "
			   "has %zu change%s to blocked paths (outside "
			   "policies.allowed_paths or of .baton/), which a "
			   "merge would bring in even where a later commit "
			   "undid them: %s",
			   d->r.base_commit, n, n == 1 ? "" : "s", why.ptr);
	rc = engine__move_why(d, ST_BLOCKED, reason, e);
	free(reason);
out:
	buf_release(&why);
	free(ref);
	free(tip);
	return rc;
}

size_t
engine__players(const struct drive *d, const struct stage *s,
		struct config_provider *out, size_t max, char **reason)
{
	const struct config_provider *found[ENGINE_MAX_PLAYERS];
	size_t i, n = 0;

	if (max > ARRAY_SIZE(found))
		max = ARRAY_SIZE(found);
	if (s->providers.nr) {
		for (; n < s->providers.nr && n < max; n++)
			found[n] = config_find_provider(d->en->cfg,
							s->providers.v[n]);
	} else {
		n = config_providers_for(d->en->cfg, s->role, found, max);
	}
	/* names the config does not define: the run was checked against
	   them when made (engine_create_spec), but its config may differ */
	for (i = 0; i < n && found[i]; i++)
		;
	n = i;
	if (!n) {
		*reason = xasprintf("stage %s: no provider plays the %s role "
				    "(set roles.%s or roles.default)",
				    s->name, s->role, s->role);
		return 0;
	}
	for (i = 0; i < n; i++) {
		out[i] = *found[i];
		if (s->model)
			out[i].model = s->model;
		if (s->timeout_seconds)
			out[i].timeout_seconds = s->timeout_seconds;
	}
	return n;
}

/*
 * The stage was stopped by an abort request or a signal: end the run
 * aborted, or leave it interrupted for `baton resume`.
 */
static int
stopped(struct drive *d, struct err *e)
{
	int rc = engine__reload(d, e);

	if (rc)
		return rc;
	if (d->r.abort_requested)
		return engine__abort(d, e);
	if (!strcmp(d->r.status, ST_INTERRUPTED) ||
	    !strcmp(d->r.status, ST_PAUSED))
		return 0; /* handed back: a quota wait (detach), a budget */
	return engine__move(d, ST_INTERRUPTED,
			    json_pack("{s:s, s:s}", "stage", d->r.stage,
				      "cause", "driver stopped by signal"),
			    e);
}

int
engine__run_stage(struct drive *d, const struct stage *s,
		  enum stage_result *res, char **reason, struct err *e)
{
	struct buf steers = BUF_INIT;
	int64_t upto = d->r.steer_seq, started;
	int rc;

	*res = STAGE_FAIL;
	rc = engine__pending_steers(d, &steers, &upto, e);
	if (rc)
		goto out;
	if (!d->p->no_git && (!d->r.worktree || !fs_is_dir(d->r.worktree))) {
		*reason = xasprintf("the run's worktree '%s' is gone",
				    d->r.worktree ? d->r.worktree : "(none)");
		goto out;
	}
	run_set(&d->r.phase, RUN_PHASE_RUNNING);
	d->r.phase_started_at = time_now_ms();
	/* Guidance waits for the next stage an agent does. */
	if (!kind_is(s->kind, KF_ENGINE))
		d->r.steer_seq = upto;
	rc = engine__note(d, "stage_started",
			  json_pack("{s:s, s:s, s:i, s:i}", "stage", s->name,
				    "kind", stage_kind_label(s), "attempt",
				    d->r.attempt, "review_loops",
				    d->r.review_loops),
			  e);
	if (rc)
		goto out;
	d->stop = 0;
	started = time_now_ms();
	rc = stage_ops_for(d->p, s)->run(d, s, steers.ptr, res, reason, e);
	d->r.active_ms += time_now_ms() - started;
	if (!rc && *res == STAGE_STOPPED)
		rc = stopped(d, e);
out:
	buf_release(&steers);
	return rc;
}
