/*
 * baton's own git: the options and environment every git call of the
 * workspace starts with.
 *
 * The agent is untrusted, and so is every file it could have written.
 * In a run's worktree that is all of it: the .git file (which names the
 * git directory a plain `git -C worktree` would use), the worktree's
 * admin directory (its HEAD and index; the sandbox leaves it writable so
 * that the agent's own git works) and, without a sandbox, the repository's
 * config and hooks too. A git that trusted them would run the agent's
 * core.fsmonitor command or hook outside the sandbox, commit into a
 * repository of the agent's choosing, or move whatever branch the
 * worktree's HEAD was pointed at. So:
 *
 *   - hooks and fsmonitor are off, whatever the config says;
 *   - replace refs and grafts are ignored, so what baton diffs and
 *     reviews is the commit itself, not the one a refs/replace/ entry or
 *     info/grafts puts in its place;
 *   - in a run's worktree, the git directory is the repository's common
 *     one (found from the main checkout when the workspace opens) and the
 *     work tree is named explicitly; the index is baton's own, and HEAD
 *     is never used: checkpoints are made with commit-tree and update-ref
 *     on the run's branch (worktree.c).
 */
#include "util/compat.h"

#include <assert.h>

#include "util/spawn.h"
#include "util/strvec.h"
#include "workspace/workspace.h"
#include "workspace/workspace_int.h"

void
workspace__git_start(const struct workspace *ws, const struct git_at *at,
		     struct spawn_opts *o)
{
	strvec_push(&o->argv, "git");
	if (ws && ws->identity)
		strvec_pushl(&o->argv, "-c", "user.name=baton", "-c",
			     "user.email=baton@localhost", NULL);
	strvec_pushl(&o->argv, "-c", "core.hooksPath=/dev/null", "-c",
		     "core.fsmonitor=false", "--no-replace-objects", NULL);
	assert(ws || (at->dir && !at->work_tree));
	if (at->work_tree) {
		strvec_pushf(&o->argv, "--git-dir=%s", ws->common);
		strvec_pushf(&o->argv, "--work-tree=%s", at->work_tree);
		o->cwd = at->work_tree;
	} else if (at->dir) {
		strvec_pushl(&o->argv, "-C", at->dir, NULL);
	} else {
		strvec_pushf(&o->argv, "--git-dir=%s", ws->common);
	}
	strvec_pushl(&o->env, "GIT_NO_REPLACE_OBJECTS=1",
		     "GIT_GRAFT_FILE=/dev/null", "GIT_TERMINAL_PROMPT=0", NULL);
	if (at->index)
		strvec_pushf(&o->env, "GIT_INDEX_FILE=%s", at->index);
	if (at->read_only)
		strvec_push(&o->env, "GIT_OPTIONAL_LOCKS=0");
	if (at->in) {
		o->in = at->in;
		o->in_len = strlen(at->in);
	}
}
