/*
 * Lifecycle hooks: see hooks.h. hooks_run is the one runner, for the
 * driver (engine__hooks below, at the worktree, stage and terminal
 * points), the merge queue (before_merge) and `baton clean`
 * (worktree_teardown). The commands come from the config the caller
 * holds (the user's .baton/config.yaml or the run's snapshot of it),
 * never from the worktree, which the agent writes.
 */
#include "util/compat.h"

#include <jansson.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/plugin.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "engine/hooks.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/log.h"
#include "util/redact.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* Of a failing command's output, what its reason and its event show. */
#define HOOK_REASON_TAIL 512
#define HOOK_EVENT_TAIL	 2048

/* A plugin's hook points are the config's, in the same order. */
_Static_assert((int)PLUGIN_HOOK__COUNT == (int)HOOK__COUNT,
	       "plugin hook points are the config's");

/*
 * The commands of point: the config's (hooks:), then each enabled
 * plugin's, in the order plugins load (requires first). Borrowed.
 */
static void
hook_cmds(const struct config *cfg, enum hook_point point,
	  struct strvec *out)
{
	const struct plugin *pl;
	size_t n, i, j;

	for (i = 0; i < cfg->hooks.cmds[point].nr; i++)
		strvec_push(out, cfg->hooks.cmds[point].v[i]);
	pl = plugins_all(&n);
	for (i = 0; pl && i < n; i++) {
		if (pl[i].status != PLUGIN_ENABLED)
			continue;
		for (j = 0; j < pl[i].hooks[point].nr; j++)
			strvec_push(out, pl[i].hooks[point].v[j]);
	}
}

int
hooks_any(const struct config *cfg, enum hook_point point)
{
	struct strvec cmds = STRVEC_INIT;
	int any;

	hook_cmds(cfg, point, &cmds);
	any = cmds.nr > 0;
	strvec_clear(&cmds);
	return any;
}

static int
is_veto(enum hook_point point)
{
	return point == HOOK_WORKTREE_SETUP || point == HOOK_BEFORE_STAGE ||
	       point == HOOK_BEFORE_MERGE;
}

/*
 * The sandbox of a hook: as a validation command's, but with network
 * (worktree_setup fetches dependencies) and the main checkout readable
 * (BATON_REPO, to copy a .env from), all but .baton/, which stays hidden
 * with the store, the token and the other runs.
 */
static void
hook_sandbox(const struct workspace *ws, const struct config *cfg,
	     const char *worktree, const char *run_dir, struct sandbox *sb)
{
	char *gitdir = NULL;
	int on = sandbox_mode(cfg->sandbox, NULL);

	sandbox_init(sb, on, 0);
	if (!on)
		return;
	worktree_git_dir(ws, worktree, &gitdir, NULL);
	sandbox_hide_user(sb, ws->repo);
	sandbox_ro(sb, ws->repo);
	sandbox_hide(sb, ws->dir);
	sandbox_git(sb, ws->common, gitdir);
	sandbox_ro(sb, run_dir);
	sandbox_rw(sb, worktree);
	free(gitdir);
}

/* "hooks/before_stage-executing-0.log": where command i's output goes. */
static char *
artifact_name(enum hook_point point, const char *stage, size_t i)
{
	return xasprintf("hooks/%s%s%s-%zu.log", config_hook_name(point),
			 stage ? "-" : "", stage ? stage : "", i);
}

/* The last max bytes of out, redacted, starting at a line when it can. */
static char *
tail_of(const struct buf *out, size_t max)
{
	struct buf b = BUF_INIT;
	const char *p = out->ptr, *nl;

	if (out->len > max) {
		p = out->ptr + out->len - max;
		nl = memchr(p, '\n', max);
		if (nl && nl + 1 < out->ptr + out->len)
			p = nl + 1;
	}
	buf_adds(&b, p);
	redact_buf(&b);
	buf_rtrim(&b);
	return buf_detach(&b, NULL);
}

/* One command: runs it, records it; *ok says whether it passed. */
static int
run_one(enum hook_point point, const struct hook_ctx *c, size_t i,
	const char *cmd, const struct sandbox *sb, const char *run_dir,
	int port, int *ok, char **reason_out, struct err *e)
{
	const struct config *cfg = c->en->cfg;
	const char *name = config_hook_name(point);
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result res = SPAWN_RESULT_INIT;
	struct store_output so = { 0 };
	struct strvec sh = STRVEC_INIT;
	struct buf text = BUF_INIT;
	char *art = artifact_name(point, c->stage, i);
	char *path = xasprintf("%s/%s", run_dir, art);
	char *tail = NULL, *data = NULL, *label = NULL;
	int rc, timeout_s = cfg->hooks.timeout_seconds;

	*ok = 0;
	rc = fs_mkdir_p(run_dir, 0755, e);
	if (!rc) {
		char *dir = xasprintf("%s/hooks", run_dir);

		rc = fs_mkdir_p(dir, 0755, e);
		free(dir);
	}
	if (!rc)
		rc = fs_unlink(path, e);
	if (rc)
		goto out;
	strvec_pushl(&sh, "sh", "-c", cmd, NULL);
	sandbox_wrap(sb, &sh, &o.argv);
	strvec_pushf(&o.env, "BATON_REPO=%s", c->en->ws->repo);
	strvec_pushf(&o.env, "BATON_WORKTREE=%s", c->worktree);
	strvec_pushf(&o.env, "BATON_RUN_DIR=%s", run_dir);
	strvec_pushf(&o.env, "BATON_RUN_ID=%s", c->run_id);
	strvec_pushf(&o.env, "BATON_PORT=%d", port);
	strvec_pushf(&o.env, "BATON_HOOK=%s", name);
	if (c->stage)
		strvec_pushf(&o.env, "BATON_STAGE=%s", c->stage);
	if (c->status)
		strvec_pushf(&o.env, "BATON_STATUS=%s", c->status);
	o.cwd = c->worktree;
	o.merge_err = 1;
	o.out_path = path;
	o.tail_max = BUF_MAX_VALIDATE_TAIL;
	o.timeout_ms = timeout_s * 1000;
	o.wake_fd = c->wake_fd;
	o.on_event = c->on_event;
	o.arg = c->arg;
	rc = spawn_run(&o, &res, e);
	/* the hook ran code the agent wrote (npm's scripts, a Makefile):
	   what it daemonized dies with it, as after an agent's call */
	spawn_kill_orphans();
	if (rc < 0)
		goto out;
	/* its output, as a call's transcript is: redacted, then kept in the
	   store for every host */
	redact_file(path, NULL);
	engine_keep_file(c->en, c->run_id, art, NULL);
	*ok = res.status == 0 && !res.timed_out && !res.stopped;
	tail = tail_of(&res.out, HOOK_EVENT_TAIL);
	data = json_take_text(json_pack(
		"{s:s, s:I, s:o, s:s?, s:i, s:b, s:b, s:I, s:s, s:o}", "point",
		name, "index", (json_int_t)i, "command", json_lossy_str(cmd),
		"stage", c->stage, "exit", res.status, "timed_out",
		res.timed_out, "passed", *ok, "duration_ms",
		(json_int_t)res.duration_ms, "artifact", art, "output_tail",
		json_lossy_str(tail)));
	/* the command too: it may name a secret of the environment */
	buf_adds(&text, data);
	redact_buf(&text);
	rc = engine__add_event(c->en, c->run_id, c->task_id, "hook", text.ptr,
			       e);
	if (rc)
		goto out;
	free(tail);
	tail = tail_of(&res.out, BUF_MAX_VALIDATE_TAIL);
	so.run_id = (char *)c->run_id;
	so.stage = (char *)(c->stage ? c->stage : name);
	so.artifact = art;
	so.decision = (char *)(*ok ? "PASSED" : "FAILED");
	so.content = tail;
	rc = store_output_add(c->en->store, &so, e);
	if (rc || *ok)
		goto out;
	if (res.stopped) {
		rc = err_set(e, BATON_EABORTED, "hook %s[%zu] stopped", name,
			     i);
		goto out;
	}
	free(tail);
	tail = tail_of(&res.out, HOOK_REASON_TAIL);
	label = res.timed_out ? xasprintf("timed out after %d s", timeout_s) :
				xasprintf("exited %d", res.status);
	log_warn("run %s: hook %s[%zu] `%s` %s", c->run_id, name, i, cmd,
		 label);
	if (reason_out && is_veto(point))
		*reason_out = xasprintf("hook %s[%zu] `%s` %s%s%s", name, i,
					cmd, label, *tail ? ": " : "",
					tail);
out:
	spawn_opts_release(&o);
	spawn_result_release(&res);
	strvec_clear(&sh);
	buf_release(&text);
	free(label);
	free(data);
	free(tail);
	free(path);
	free(art);
	return rc;
}

int
hooks_run(enum hook_point point, const struct hook_ctx *c, char **reason_out,
	  struct err *e)
{
	struct strvec cmds = STRVEC_INIT;
	struct sandbox sb = SANDBOX_INIT;
	char *run_dir = NULL;
	size_t i;
	int rc = 0, port, ok = 1;

	hook_cmds(c->en->cfg, point, &cmds);
	if (!cmds.nr)
		return 0;
	if (!c->worktree || !fs_is_dir(c->worktree)) {
		strvec_clear(&cmds);
		return err_set(e, BATON_ENOTFOUND,
			       "cannot run the %s hooks of run '%s': its "
			       "worktree '%s' is gone",
			       config_hook_name(point), c->run_id,
			       c->worktree ? c->worktree : "(none)");
	}
	rc = workspace_port(c->en->ws, c->run_id, &port, e);
	if (rc) {
		strvec_clear(&cmds);
		return rc;
	}
	run_dir = workspace_run_dir(c->en->ws, c->run_id);
	hook_sandbox(c->en->ws, c->en->cfg, c->worktree, run_dir, &sb);
	for (i = 0; i < cmds.nr; i++) {
		rc = run_one(point, c, i, cmds.v[i], &sb, run_dir, port, &ok,
			     reason_out, e);
		if (rc)
			break;
		if (!ok && is_veto(point)) {
			rc = 1;
			break;
		}
	}
	sandbox_release(&sb);
	strvec_clear(&cmds);
	free(run_dir);
	return rc;
}

/*
 * The driver's hooks: stopped as its stages are, by a signal to the
 * driver or an abort request; on_terminal only by a signal (an abort is
 * what may have brought the run there).
 */
struct hook_watch {
	struct drive *d;
	enum hook_point point;
};

static int
watch_hook(void *arg, enum spawn_event ev, pid_t pid)
{
	struct hook_watch *w = arg;
	struct run fresh = { 0 };
	struct err ignored = ERR_INIT;
	int stop = 0;

	(void)pid;
	if (ev != SPAWN_EV_WAKE)
		return 0;
	if (engine__signalled())
		return 1;
	if (w->point == HOOK_ON_TERMINAL)
		return 0;
	if (store_run_get(w->d->en->store, w->d->r.id, &fresh, &ignored) == 0)
		stop = fresh.abort_requested;
	run_release(&fresh);
	return stop;
}

int
engine__hooks(struct drive *d, enum hook_point point, const char *status,
	      char **reason_out, struct err *e)
{
	struct hook_ctx c = HOOK_CTX_INIT;
	struct hook_watch w = { d, point };

	if (!hooks_any(d->en->cfg, point) || !d->r.worktree || d->member)
		return 0;
	c.en = d->en;
	c.run_id = d->r.id;
	c.task_id = d->r.task_id;
	c.worktree = d->r.worktree;
	if (point == HOOK_BEFORE_STAGE || point == HOOK_AFTER_STAGE)
		c.stage = d->r.status;
	c.status = status;
	c.wake_fd = d->wake_fd;
	c.on_event = watch_hook;
	c.arg = &w;
	return hooks_run(point, &c, reason_out, e);
}

/*
 * The run folder's note that the worktree as it is now has been set up.
 * It lives in .baton/, out of the agent's reach; a worktree made again
 * drops it (engine__hooks_remake), so its setup runs again.
 */
#define SETUP_MARK "hooks/worktree_setup.done"

int
engine__hooks_remake(struct drive *d, struct err *e)
{
	char *mark;
	int rc, remade = 0;

	rc = worktree_remake(d->en->ws, d->r.worktree, d->r.checkpoint,
			     &remade, e);
	if (rc || !remade)
		return rc;
	mark = engine__run_file(d, SETUP_MARK);
	rc = fs_unlink(mark, e);
	free(mark);
	if (!rc)
		rc = engine__note(d, "worktree_remade",
				  json_pack("{s:s, s:s}", "path",
					    d->r.worktree, "commit",
					    d->r.checkpoint),
				  e);
	return rc;
}

int
engine__stage_hooks(struct drive *d, enum hook_point point,
		    enum stage_result *res, char **reason, struct err *e)
{
	char *mark = NULL, *why = NULL;
	int rc = 0;

	if (res)
		*res = STAGE_PASS;
	if (point == HOOK_BEFORE_STAGE && d->r.worktree &&
	    hooks_any(d->en->cfg, HOOK_WORKTREE_SETUP)) {
		mark = engine__run_file(d, SETUP_MARK);
		if (!fs_exists(mark)) {
			rc = engine__hooks(d, HOOK_WORKTREE_SETUP, NULL, &why,
					   e);
			if (!rc)
				rc = fs_write_atomic(mark, d->r.worktree,
						     strlen(d->r.worktree), e);
		}
	}
	if (!rc)
		rc = engine__hooks(d, point, NULL, &why, e);
	if (rc == 1 && res) {
		*res = STAGE_BLOCK;
		*reason = why;
		why = NULL;
		rc = 0;
	} else if (rc == 1) {
		rc = 0;
	} else if (rc == BATON_EABORTED) {
		/* the next step sees the abort, the loop the signal */
		if (res)
			*res = STAGE_STOPPED;
		rc = engine__reload(d, e);
	}
	free(why);
	free(mark);
	return rc;
}

void
engine__terminal_hooks(struct drive *d, const char *to)
{
	struct err e = ERR_INIT;

	if (engine__hooks(d, HOOK_ON_TERMINAL, to, NULL, &e) < 0)
		log_warn("run %s: on_terminal hooks: %s", d->r.id, e.msg);
}

int
engine_remove_worktree(struct engine *en, const char *ref, char **path_out,
		       struct err *e)
{
	struct hook_ctx c = HOOK_CTX_INIT;
	struct err ignored = ERR_INIT;
	struct run r = { 0 };
	char *data = NULL;
	int rc, port, here;

	if (path_out)
		*path_out = NULL;
	rc = store_run_get(en->store, ref, &r, e);
	if (rc)
		return rc;
	if (!status_is_terminal(r.status)) {
		rc = err_set(e, BATON_EBADSTATE,
			     "run '%s' is %s: only the worktree of a run that "
			     "has ended can be removed (abort it first)",
			     r.id, r.status);
		goto out;
	}
	here = r.worktree && fs_is_dir(r.worktree);
	port = workspace_port_get(en->ws, r.id);
	if (here) {
		c.en = en;
		c.run_id = r.id;
		c.task_id = r.task_id;
		c.worktree = r.worktree;
		rc = hooks_run(HOOK_WORKTREE_TEARDOWN, &c, NULL, e);
		if (rc < 0)
			goto out;
		rc = worktree_remove(en->ws, r.worktree, e);
		if (rc)
			goto out;
	}
	workspace_port_release(en->ws, r.id);
	/* its checkpoints on the shared remote (takeover.c), if any */
	if (en->cfg->repo_url && r.worktree &&
	    ckpt_forget(en->ws, en->cfg->repo_url, r.id, &ignored) < 0) {
		log_warn("run %s: %s", r.id, ignored.msg);
		ignored = (struct err)ERR_INIT;
	}
	if (!here && !port)
		goto out; /* nothing was left: nothing to record */
	data = json_take_text(json_pack("{s:s?, s:i, s:s?}", "path",
					here ? r.worktree : NULL, "port", port,
					"branch", r.branch));
	rc = engine__add_event(en, r.id, r.task_id, "worktree_removed", data,
			       e);
	if (!rc && here && path_out)
		*path_out = xstrdup(r.worktree);
out:
	free(data);
	run_release(&r);
	return rc;
}
