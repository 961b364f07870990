/*
 * A run survives its host. With a shared remote (repo.url) each stage's
 * checkpoint goes to the remote with the run folder's files
 * (workspace/ckpt.c) before the store says the stage is done; when the
 * host dies and another host's worker claims the task, it takes the run
 * over: fetches the checkpoint, makes the run's worktree in its own clone
 * at the checkpoint the store has on record, puts the run folder's files
 * back, and drives the run on from the stored record like a driver
 * resuming after a crash on one host (engine.c: a stage at phase running
 * is interrupted and re-entered from its checkpoint; a stage done is
 * never run again).
 *
 * The order keeps one rule: the store never names a checkpoint that the
 * remote does not hold. The push comes first; a host that dies between
 * the two leaves the remote ahead, which is harmless (the stage runs
 * again from the checkpoint before it). When the rule is broken anyway
 * (the remote refused a push, a stalled host pushed late over it) the
 * takeover sees that the checkpoint on record is not in the remote's and
 * falls back to starting the task afresh, saying why.
 */
#include "util/compat.h"

#include "core/config.h"
#include "core/pipeline.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

int
engine__ckpt_push(struct drive *d, const char *commit)
{
	const struct config *cfg = d->en->cfg;
	struct err e = ERR_INIT;
	char *files = NULL;
	int rc;

	if (!cfg->repo_url || !d->r.worktree || !commit || d->member)
		return 0;
	/* the files are a help to the next host, not the checkpoint: a
	 * folder that cannot be read is pushed without */
	if (ckpt_files_save(d->en->ws, d->run_dir, d->r.id, &files, &e)) {
		log_warn("run %s: %s", d->r.id, e.msg);
		e = (struct err)ERR_INIT;
	}
	rc = ckpt_push(d->en->ws, cfg->repo_url, d->r.id, commit, files, &e);
	if (rc)
		log_warn("run %s: %s (another host could not take the run "
			 "over from here)",
			 d->r.id, e.msg);
	free(files);
	return rc ? rc : 1;
}

void
engine__ckpt_forget(struct drive *d)
{
	const struct config *cfg = d->en->cfg;
	struct err e = ERR_INIT;

	if (cfg->repo_url && d->r.worktree && !d->member &&
	    ckpt_forget(d->en->ws, cfg->repo_url, d->r.id, &e))
		log_warn("run %s: %s", d->r.id, e.msg);
}

/* The run's worktree in this clone at the checkpoint, its port claimed. */
static int
make_here(struct engine *en, const struct run *r, const char *path,
	  struct err *e)
{
	int port = 0, rc;

	/* makes the branch at the checkpoint and the worktree on it (or,
	 * when this clone drove the run before, puts both back there) */
	rc = worktree_reset(en->ws, path, r->checkpoint, e);
	if (!rc)
		rc = workspace_port(en->ws, r->id, &port, e);
	return rc;
}

/* Records that the run cannot be taken over, and why. */
static void
note_fallback(struct engine *en, const struct run *r, const char *holder,
	      const char *why)
{
	struct err ignored = ERR_INIT;
	char *data;

	data = json_take_text(json_pack("{s:s?, s:s?, s:s, s:s?}", "from",
					r->worktree, "holder", holder,
					"reason", why, "checkpoint",
					r->checkpoint));
	engine__add_event(en, r->id, r->task_id, "run_takeover_failed", data,
			  &ignored);
	free(data);
}

int
engine_take_over(struct engine *en, struct run *r, const char *holder,
		 char **why_out, struct err *e)
{
	const struct config *cfg = en->cfg;
	char *tip = NULL, *files = NULL, *path = NULL, *dir = NULL,
	     *from = NULL, *why = NULL;
	struct err fe = ERR_INIT;
	size_t restored = 0;
	json_t *data;
	int rc = 1;

	*why_out = NULL;
	if (!cfg->repo_url) {
		why = xstrdup("no shared remote (repo.url) holds its "
			      "checkpoints");
		goto out;
	}
	if (!r->branch || !r->checkpoint) {
		why = xstrdup("the run has no checkpoint on record");
		goto out;
	}
	if (ckpt_fetch(en->ws, cfg->repo_url, r->id, &tip, &files, &fe)) {
		why = fe.rc == BATON_ENOTFOUND ?
			      xasprintf("no checkpoint was pushed yet: %s",
					fe.msg) :
			      xstrdup(fe.msg);
		goto out;
	}
	if (!ckpt_contains(en->ws, tip, r->checkpoint)) {
		why = xasprintf("the checkpoint on record, %.12s, is not in "
				"the one pushed to '%s' (at %.12s)",
				r->checkpoint, cfg->repo_url, tip);
		goto out;
	}
	dir = workspace_run_dir(en->ws, r->id);
	path = workspace_worktree_dir(en->ws, r->id);
	if (files &&
	    ckpt_files_restore(en->ws, files, dir, &restored, &fe)) {
		why = xstrdup(fe.msg);
		goto out;
	}
	if (make_here(en, r, path, &fe)) {
		why = xstrdup(fe.msg);
		goto out;
	}
	from = r->worktree ? xstrdup(r->worktree) : NULL;
	run_set(&r->worktree, path);
	/* the agent's process group was on the other host: no pid of
	 * this one is the run's to kill */
	r->agent_pid = 0;
	data = json_pack("{s:s?, s:s, s:s?, s:s, s:s, s:s?, s:s?, s:I}",
			 "from", from, "to", path, "holder", holder,
			 "checkpoint", r->checkpoint, "pushed", tip, "stage",
			 r->stage, "status", r->status, "files",
			 (json_int_t)restored);
	rc = engine__record(en, r, "run_taken_over", data, e);
	if (rc)
		goto out;
	log_info("run %s taken over from %s at checkpoint %.12s (%s)", r->id,
		 from ? from : "?", r->checkpoint, r->status);
out:
	if (why) {
		note_fallback(en, r, holder, why);
		*why_out = why;
		why = NULL;
	}
	free(tip);
	free(files);
	free(path);
	free(dir);
	free(from);
	free(why);
	return rc;
}
