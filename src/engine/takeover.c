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
 * again from the checkpoint before it). Only the holder of the task's
 * lease pushes: a worker checks its fence before it pushes, and every
 * push holds a lease on where the remote's ref was (git push
 * --force-with-lease), so a stalled host that wakes after its run was
 * taken over cannot push over its new holder's checkpoint, even if it
 * passed the check just before it stalled. When the rule is broken
 * anyway (the remote refused a push) the takeover sees that the
 * checkpoint on record is not in the remote's and falls back to
 * starting the task afresh, saying why.
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

static const char *
or_none(const char *commit)
{
	return commit ? commit : "none";
}

/*
 * ckpt_push with the lease d->ckpt_tip. When the remote's ref moved
 * since (the push is refused and the ref is elsewhere), another driver
 * of the run pushed: a stalled host that woke after its run was taken
 * over, whose lease is gone. Only the holder of the task's lease may
 * push over that, once, from where the ref is now.
 */
static int
push_leased(struct drive *d, const char *commit, const char *files,
	    struct err *e)
{
	const struct workspace *ws = d->en->ws;
	const char *url = d->en->cfg->repo_url, *id = d->r.id;
	struct err ignored = ERR_INIT;
	char *was;
	int rc;

	if (!d->ckpt_read) {
		rc = ckpt_remote_tip(ws, url, id, &d->ckpt_tip, e);
		if (rc)
			return rc;
		d->ckpt_read = 1;
	}
	rc = ckpt_push(ws, url, id, commit, files, d->ckpt_tip, e);
	if (!rc)
		goto pushed;
	was = d->ckpt_tip;
	d->ckpt_tip = NULL;
	d->ckpt_read = !ckpt_remote_tip(ws, url, id, &d->ckpt_tip, &ignored);
	if (!d->ckpt_read || !strcmp(or_none(was), or_none(d->ckpt_tip))) {
		free(was);
		return rc; /* the ref did not move: the push failed itself */
	}
	log_warn("run %s: the checkpoint ref on '%s' moved from %.12s to "
		 "%.12s, pushed by another driver of the run",
		 id, url, or_none(was), or_none(d->ckpt_tip));
	free(was);
	*e = (struct err)ERR_INIT;
	rc = store_fence_check(d->en->store, "push a checkpoint over it", e);
	if (!rc)
		rc = ckpt_push(ws, url, id, commit, files, d->ckpt_tip, e);
	if (rc)
		return rc;
pushed:
	run_set(&d->ckpt_tip, commit);
	return 0;
}

int
engine__ckpt_push(struct drive *d, const char *commit)
{
	const struct config *cfg = d->en->cfg;
	struct err e = ERR_INIT;
	char *files = NULL;
	int rc;

	if (!cfg->repo_url || !d->r.worktree || !commit || d->member)
		return 0;
	/* a worker whose lease was taken over pushes nothing: the run's
	 * checkpoints are its new holder's */
	rc = store_fence_check(d->en->store, "push a checkpoint", &e);
	if (rc) {
		log_warn("run %s: %s", d->r.id, e.msg);
		return rc;
	}
	/* the files are a help to the next host, not the checkpoint: a
	 * folder that cannot be read is pushed without */
	if (ckpt_files_save(d->en->ws, d->run_dir, d->r.id, &files, &e)) {
		log_warn("run %s: %s", d->r.id, e.msg);
		e = (struct err)ERR_INIT;
	}
	rc = push_leased(d, commit, files, &e);
	if (rc == BATON_EFENCED)
		log_warn("run %s: %s", d->r.id, e.msg);
	else if (rc)
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
