/*
 * Landing a run's branch on the base branch: the git half of the merge
 * queue (sched/merge.c is the other half). The rule it keeps is the one
 * the queue exists for: nothing reaches the base that did not pass the
 * project's checks in exactly the state the base will then have.
 *
 *   base tip OLD ──checkout──▶ .baton/worktrees/.merge (detached HEAD)
 *        │ git merge --no-ff BRANCH        conflict ─▶ LAND_CONFLICT
 *        ▼                                             (merge --abort)
 *   NEW, the merge commit ──checks──▶ failing ─▶ LAND_CHECKS_FAILED
 *        │ passing
 *        ▼
 *   base OLD ─▶ NEW, compare-and-swap      moved meanwhile ─▶ LAND_RACED
 *   (update-ref B NEW OLD, or merge --ff-only NEW where B is checked out)
 *
 * Merge rather than rebase: a rebase rewrites the agent's commits, which
 * the run's record and checkpoints name, and lands each of them on the
 * base, though only the last was checked. A --no-ff merge keeps the
 * branch as it was and gives the base one commit per landing, so its
 * first-parent history is the sequence of states that passed the checks.
 *
 * The merge worktree is shared by every landing of the repository, so
 * landings take an flock first (worktree_land_lock); they must happen one
 * at a time anyway, each on top of the last.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"
#include "workspace/workspace_int.h"

#define GIT_TIMEOUT_MS (120 * 1000)
/* Files named in the error about local changes; the rest are counted. */
#define MAX_NAMED_FILES 10

/*
 * Runs "git [baton's options] -C dir ARGS" (git.c; ARGS from ap, up to a
 * NULL): no hooks, no fsmonitor, no replace refs. The exit
 * status goes to *status, stdout (trimmed) to out and the tail of stderr
 * (trimmed) to errout, both optional. Returns negative only when git
 * could not be run or timed out: a git that ran and failed is the
 * caller's to judge, from *status.
 */
static int
git_va(const struct workspace *ws, const char *dir, struct buf *out,
       struct buf *errout, int *status, struct err *e, va_list ap)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct git_at at = { .dir = dir };
	const char *arg;
	int rc;

	workspace__git_start(ws, &at, &o);
	while ((arg = va_arg(ap, const char *)))
		strvec_push(&o.argv, arg);
	o.timeout_ms = GIT_TIMEOUT_MS;
	o.tail_max = BUF_MAX_GIT_OUTPUT;
	rc = spawn_run(&o, &r, e);
	if (rc < 0)
		goto out;
	if (r.timed_out) {
		rc = err_set(e, BATON_ETIMEDOUT, "git in '%s' timed out after "
			     "%d s", dir, GIT_TIMEOUT_MS / 1000);
		goto out;
	}
	*status = r.status;
	if (out) {
		buf_add(out, r.out.ptr, r.out.len);
		buf_rtrim(out);
	}
	if (errout) {
		buf_add(errout, r.err.ptr, r.err.len);
		buf_rtrim(errout);
	}
out:
	spawn_result_release(&r);
	spawn_opts_release(&o);
	return rc;
}

/* git_va with its arguments inline; see there. */
static int
git_try(const struct workspace *ws, const char *dir, struct buf *out,
	struct buf *errout, int *status, struct err *e, ...)
{
	va_list ap;
	int rc;

	va_start(ap, e);
	rc = git_va(ws, dir, out, errout, status, e, ap);
	va_end(ap);
	return rc;
}

/*
 * Runs git and requires it to exit 0: otherwise BATON_ECHILD with what
 * it said on stderr. out (may be NULL) gets stdout, trimmed.
 */
static int
git(const struct workspace *ws, const char *dir, struct buf *out,
    struct err *e, ...)
{
	struct buf errout = BUF_INIT;
	va_list ap;
	int rc, status = 0;

	va_start(ap, e);
	rc = git_va(ws, dir, out, &errout, &status, e, ap);
	va_end(ap);
	if (!rc && status)
		rc = err_set(e, BATON_ECHILD, "git in '%s' failed: %s", dir,
			     errout.len ? errout.ptr : "(no message)");
	buf_release(&errout);
	return rc;
}

void
land_result_release(struct land_result *r)
{
	FREE_AND_NULL(r->base_branch);
	FREE_AND_NULL(r->base_commit);
	FREE_AND_NULL(r->commit);
	strvec_clear(&r->conflicts);
	buf_release(&r->summary);
}

int
worktree_base_branch(const struct workspace *ws, const char *configured,
		     char **out, struct err *e)
{
	struct buf name = BUF_INIT;
	int rc, status = 0;

	if (configured && *configured) {
		if (!strncmp(configured, "refs/heads/", 11))
			configured += 11;
		*out = xstrdup(configured);
		return 0;
	}
	rc = git_try(ws, ws->repo, &name, NULL, &status, e, "symbolic-ref",
		     "--quiet", "--short", "HEAD", NULL);
	if (rc < 0)
		goto out;
	if (status || !name.len) {
		rc = err_set(e, BATON_EINVAL,
			     "merge.base_branch is not set and the repository "
			     "is on a detached HEAD");
		goto out;
	}
	*out = buf_detach(&name, NULL);
out:
	buf_release(&name);
	return rc;
}

int
worktree_land_lock(const struct workspace *ws, int wait, int *fd_out,
		   struct err *e)
{
	char *dir = xasprintf("%s/worktrees", ws->dir);
	char *path = xasprintf("%s/.merge.lock", dir);
	int fd = -1, rc;

	rc = fs_mkdir_p(dir, 0755, e);
	if (rc < 0)
		goto out;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = err_set(e, -errno, "cannot open '%s': %s", path,
			     strerror(errno));
		goto out;
	}
	while ((rc = flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB))) < 0 &&
	       errno == EINTR)
		;
	if (rc < 0 && errno == EWOULDBLOCK) {
		rc = err_set(e, BATON_EBUSY,
			     "another merge is landing in '%s' (lock '%s')",
			     ws->repo, path);
		goto out;
	}
	if (rc < 0) {
		rc = err_set(e, -errno, "cannot lock '%s': %s", path,
			     strerror(errno));
		goto out;
	}
	*fd_out = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	free(dir);
	free(path);
	return rc;
}

void
worktree_land_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* the flock goes with its last descriptor */
}

/* "refs/heads/NAME" for a short branch name; full refs stay as they are. */
static char *
branch_ref(const char *name)
{
	if (!name)
		return xstrdup("HEAD");
	if (!strncmp(name, "refs/", 5))
		return xstrdup(name);
	return xasprintf("refs/heads/%s", name);
}

/*
 * The commit ref points at, or NULL in *out when there is no such ref
 * (which is not an error here: the callers say what was missing).
 */
static int
resolve(const struct workspace *ws, const char *ref, char **out,
	struct err *e)
{
	char *spec = xasprintf("%s^{commit}", ref);
	struct buf hash = BUF_INIT;
	int rc, status = 0;

	rc = git_try(ws, ws->repo, &hash, NULL, &status, e, "rev-parse",
		     "--verify", "--quiet", spec, NULL);
	*out = !rc && !status && hash.len ? buf_detach(&hash, NULL) : NULL;
	free(spec);
	buf_release(&hash);
	return rc;
}

/* The tip of branch B now (NULL if B is gone), for the race checks. */
static int
base_tip(const struct workspace *ws, const char *base, char **out,
	 struct err *e)
{
	char *ref = branch_ref(base);
	int rc = resolve(ws, ref, out, e);

	free(ref);
	return rc;
}

/* 1 in *yes when commit is an ancestor of (or equal to) of. */
static int
is_ancestor(const struct workspace *ws, const char *commit, const char *of,
	    int *yes, struct err *e)
{
	struct buf errout = BUF_INIT;
	int rc, status = 0;

	rc = git_try(ws, ws->repo, NULL, &errout, &status, e, "merge-base",
		     "--is-ancestor", commit, of, NULL);
	if (!rc && status > 1)
		rc = err_set(e, BATON_ECHILD,
			     "cannot compare %.12s with %.12s: %s", commit, of,
			     errout.ptr);
	if (!rc)
		*yes = status == 0;
	buf_release(&errout);
	return rc;
}

/* NUL-separated names (git -z output) appended to out. */
static void
split_z(const struct buf *names, struct strvec *out)
{
	size_t i = 0;

	while (i < names->len) {
		size_t n = strnlen(names->ptr + i, names->len - i);

		if (n)
			strvec_pushf(out, "%.*s", (int)n, names->ptr + i);
		i += n + 1;
	}
}

/* 1 when path is a worktree of its own (not a folder of ws->repo). */
static int
is_worktree(const struct workspace *ws, const char *path)
{
	struct buf top = BUF_INIT;
	char *dotgit = xasprintf("%s/.git", path);
	int status = 1, yes;

	if (fs_exists(dotgit))
		git_try(ws, path, &top, NULL, &status, NULL, "rev-parse",
			"--show-toplevel", NULL);
	yes = !status && !strcmp(top.ptr, path);
	free(dotgit);
	buf_release(&top);
	return yes;
}

/*
 * Makes the merge worktree a clean checkout of commit, detached: reused
 * when it is there (reset, then cleaned of everything, ignored files
 * too, so a check never sees what an earlier landing built), made again
 * when it is missing or half made.
 */
static int
merge_tree(const struct workspace *ws, const char *commit, char **path_out,
	   struct err *e)
{
	char *path = xasprintf("%s/worktrees/.merge", ws->dir);
	int rc, lock;

	if (is_worktree(ws, path)) {
		/* reset first: it also ends a merge a crash left open */
		rc = git(ws, path, NULL, e, "reset", "--quiet", "--hard", NULL);
		if (!rc)
			rc = git(ws, path, NULL, e, "checkout", "--quiet",
				 "--force", "--detach", commit, NULL);
		if (!rc)
			rc = git(ws, path, NULL, e, "clean", "-ffdxq", NULL);
		goto out;
	}
	lock = workspace_lock_worktrees(ws, e);
	if (lock < 0) {
		rc = lock;
		goto out;
	}
	rc = fs_remove_tree(path, e);
	worktree_repair_admin(ws);
	if (!rc)
		rc = git(ws, ws->repo, NULL, e, "worktree", "add", "--quiet",
			 "--detach", path, commit, NULL);
	workspace_unlock_worktrees(lock);
out:
	if (rc < 0) {
		err_prefix(e, "cannot prepare the merge worktree '%s'", path);
		free(path);
		return rc;
	}
	*path_out = path;
	return 0;
}

/*
 * Merges tip (of rq->branch) into the merge worktree's HEAD. On a
 * conflict the unmerged paths go to res->conflicts and the merge is
 * aborted; otherwise res->commit gets the merge commit.
 */
static int
merge_branch(const struct workspace *ws, const char *path,
	     const struct land_request *rq, const char *base,
	     struct land_result *res, struct err *e)
{
	char *msg = rq->message ? xstrdup(rq->message) :
				  xasprintf("Merge branch '%s' into %s",
					    rq->branch, base);
	struct buf errout = BUF_INIT, names = BUF_INIT, head = BUF_INIT;
	struct err ignored = ERR_INIT;
	int rc, status = 0;

	/*
	 * --no-verify: the checks below are the gate, not the hooks;
	 * --no-gpg-sign: nobody is there to unlock a key
	 */
	rc = git_try(ws, path, NULL, &errout, &status, e, "merge", "--quiet",
		     "--no-ff", "--no-edit", "--no-verify", "--no-autostash",
		     "--no-gpg-sign", "-m", msg, rq->branch, NULL);
	if (rc < 0)
		goto out;
	if (!status) {
		rc = git(ws, path, &head, e, "rev-parse", "HEAD", NULL);
		if (!rc)
			res->commit = buf_detach(&head, NULL);
		goto out;
	}
	rc = git(ws, path, &names, e, "diff", "--name-only", "-z",
		 "--diff-filter=U", NULL);
	if (!rc)
		split_z(&names, &res->conflicts);
	git(ws, path, NULL, &ignored, "merge", "--abort", NULL);
	if (!rc && !res->conflicts.nr)
		rc = err_set(e, BATON_ECHILD, "cannot merge '%s' onto '%s': %s",
			     rq->branch, base,
			     errout.len ? errout.ptr : "git merge failed");
	if (!rc)
		res->outcome = LAND_CONFLICT;
out:
	free(msg);
	buf_release(&errout);
	buf_release(&names);
	buf_release(&head);
	return rc;
}

/* Appends a line to the checks' log saying which landing they are for. */
static void
log_landing(const char *log_path, const char *branch, const char *base,
	    const char *commit)
{
	struct buf line = BUF_INIT;
	int fd;

	if (!log_path)
		return;
	fd = fs_open_nofollow(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644,
			      NULL);
	if (fd < 0)
		return;
	buf_addf(&line, "\n# checks of %.12s: '%s' merged onto '%s'\n", commit,
		 branch, base);
	/* best effort, like validate.c's headers: the result is the record */
	fs_write_all(fd, line.ptr, line.len);
	close(fd);
	buf_release(&line);
}

/*
 * Runs the checks in the merge worktree. Failing ones make the outcome
 * LAND_CHECKS_FAILED with their summary.
 */
static int
run_checks(const struct workspace *ws, const char *path,
	   const struct land_request *rq, const char *base,
	   struct land_result *res, struct err *e)
{
	struct workspace_hooks hooks = { -1, 0, NULL, NULL, NULL };
	struct validate_result vr = { 0 };
	struct strvec none = STRVEC_INIT;
	struct buf dir = BUF_INIT;
	struct sandbox sb = SANDBOX_INIT;
	char *gitdir = NULL, *json = NULL;
	int rc;

	if (rq->hooks)
		hooks = *rq->hooks;
	hooks.sandbox = NULL;
	/* the merge worktree is baton's alone: its git may say */
	rc = git(ws, path, &dir, e, "rev-parse", "--absolute-git-dir", NULL);
	if (rc < 0)
		goto out;
	gitdir = buf_detach(&dir, NULL);
	if (rq->sandbox) {
		/* the checks see the merge, not the user's home or .baton/ */
		sandbox_init(&sb, 1, 1);
		sandbox_hide_user(&sb, ws->repo);
		sandbox_git(&sb, ws->common, gitdir);
		sandbox_rw(&sb, path);
		if (!strcmp(path, ws->repo))
			sandbox_hide(&sb, ws->dir);
		hooks.sandbox = &sb;
	}
	json = rq->json_path ? xstrdup(rq->json_path) :
			       xasprintf("%s/baton-validation.json", gitdir);
	log_landing(rq->log_path, rq->branch, base, res->commit);
	rc = validate_run(path, rq->checks ? rq->checks : &none, rq->timeout_s,
			  json, rq->log_path, &hooks, NULL, &vr, e);
	if (rc < 0)
		goto out;
	if (vr.stopped) {
		rc = err_set(e, BATON_EABORTED,
			     "the checks of '%s' merged onto '%s' were stopped",
			     rq->branch, base);
		goto out;
	}
	if (!vr.passed) {
		res->outcome = LAND_CHECKS_FAILED;
		buf_add(&res->summary, vr.summary.ptr, vr.summary.len);
	}
out:
	validate_result_release(&vr);
	sandbox_release(&sb);
	free(gitdir);
	buf_release(&dir);
	free(json);
	return rc;
}

/*
 * The worktree (main or linked) that has base checked out, or NULL in
 * *out. Such a worktree must follow the move of its branch, or its files
 * would no longer match its HEAD.
 */
static int
checked_out_in(const struct workspace *ws, const char *base, char **out,
	       struct err *e)
{
	char *ref = branch_ref(base);
	struct buf list = BUF_INIT;
	char *line, *next, *wt = NULL;
	int rc;

	*out = NULL;
	rc = git(ws, ws->repo, &list, e, "worktree", "list", "--porcelain",
		 NULL);
	for (line = list.ptr; !rc && line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!strncmp(line, "worktree ", 9))
			wt = line + 9;
		else if (!strncmp(line, "branch ", 7) && wt &&
			 !strcmp(line + 7, ref)) {
			*out = xstrdup(wt);
			break;
		}
	}
	free(ref);
	buf_release(&list);
	return rc;
}

/*
 * The paths of changed that the worktree wt has local changes to
 * (modified, staged or untracked), appended to out: what a fast-forward
 * would overwrite.
 */
static int
dirty_among(const struct workspace *ws, const char *wt,
	    const struct strvec *changed, struct strvec *out, struct err *e)
{
	struct buf st = BUF_INIT;
	size_t i = 0, k;
	int rc;

	rc = git(ws, wt, &st, e, "status", "--porcelain=v1", "-z",
		 "--untracked-files=all", NULL);
	while (!rc && i + 3 < st.len) {
		const char *name = st.ptr + i + 3;
		size_t n = strnlen(name, st.len - i - 3);
		int renamed = st.ptr[i] == 'R' || st.ptr[i] == 'C';

		for (k = 0; k < changed->nr; k++)
			if (!strcmp(changed->v[k], name)) {
				strvec_push(out, name);
				break;
			}
		i += 3 + n + 1;
		/* a rename is followed by the name it had */
		if (renamed && i < st.len)
			i += strnlen(st.ptr + i, st.len - i) + 1;
	}
	buf_release(&st);
	return rc;
}

/* The error for a fast-forward that local changes in wt stand in the way of. */
static int
overwritten_error(const struct workspace *ws, const char *wt,
		  const char *base, const char *old, const char *new,
		  const char *git_said, struct err *e)
{
	struct strvec changed = STRVEC_INIT, dirty = STRVEC_INIT;
	struct buf names = BUF_INIT;
	size_t i;
	int rc;

	rc = worktree_changed_paths(ws, wt, old, new, &changed, e);
	if (!rc)
		rc = dirty_among(ws, wt, &changed, &dirty, e);
	if (rc < 0)
		goto out;
	if (!dirty.nr) {
		rc = err_set(e, BATON_ECHILD,
			     "cannot fast-forward '%s' in '%s' to %.12s: %s",
			     base, wt, new, git_said);
		goto out;
	}
	for (i = 0; i < dirty.nr && i < MAX_NAMED_FILES; i++)
		buf_addf(&names, "%s%s", i ? ", " : "", dirty.v[i]);
	if (dirty.nr > MAX_NAMED_FILES)
		buf_addf(&names, " and %zu more", dirty.nr - MAX_NAMED_FILES);
	rc = err_set(e, BATON_EBUSY,
		     "cannot fast-forward '%s' in '%s' to %.12s: your local "
		     "changes to %s would be overwritten; commit or stash "
		     "them, then merge again (nothing was changed)",
		     base, wt, new, names.ptr);
out:
	strvec_clear(&changed);
	strvec_clear(&dirty);
	buf_release(&names);
	return rc;
}

/*
 * Moves base, checked out in wt, from old to new with `git merge
 * --ff-only`, which updates the files too and refuses to overwrite local
 * changes. The tip is checked before (a commit made there meanwhile is
 * a race) and after a refusal, to tell a race from local changes.
 */
static int
fast_forward(const struct workspace *ws, const char *wt, const char *base,
	     const char *old, struct land_result *res, struct err *e)
{
	struct buf errout = BUF_INIT;
	char *tip = NULL;
	int rc, status = 0;

	rc = base_tip(ws, base, &tip, e);
	if (rc < 0)
		goto out;
	if (!tip || !old || strcmp(tip, old)) {
		res->outcome = LAND_RACED;
		goto out;
	}
	rc = git_try(ws, wt, NULL, &errout, &status, e, "merge", "--quiet",
		     "--ff-only", "--no-autostash", res->commit, NULL);
	if (rc < 0 || !status)
		goto out;
	FREE_AND_NULL(tip);
	rc = base_tip(ws, base, &tip, e);
	if (rc < 0)
		goto out;
	if (!tip || !old || strcmp(tip, old)) {
		res->outcome = LAND_RACED;
		goto out;
	}
	rc = overwritten_error(ws, wt, base, old, res->commit,
			       errout.len ? errout.ptr : "git merge failed",
			       e);
out:
	free(tip);
	buf_release(&errout);
	return rc;
}

/*
 * Moves base from old to res->commit, only if it is still at old: the
 * compare-and-swap that makes "checked on the final base" hold even when
 * someone commits to the base during the checks.
 */
static int
move_base(const struct workspace *ws, const char *base, const char *old,
	  const char *branch, struct land_result *res, struct err *e)
{
	char *wt = NULL, *ref = branch_ref(base), *tip = NULL;
	char *msg = xasprintf("baton: land %s", branch);
	struct buf errout = BUF_INIT;
	int rc, status = 0;

	rc = checked_out_in(ws, base, &wt, e);
	if (rc < 0)
		goto out;
	if (wt) {
		rc = fast_forward(ws, wt, base, old, res, e);
		goto out;
	}
	rc = git_try(ws, ws->repo, NULL, &errout, &status, e, "update-ref",
		     "-m", msg, ref, res->commit, old, NULL);
	if (rc < 0 || !status)
		goto out;
	rc = base_tip(ws, base, &tip, e);
	if (rc < 0)
		goto out;
	if (!tip || !old || strcmp(tip, old))
		res->outcome = LAND_RACED;
	else
		rc = err_set(e, BATON_ECHILD, "cannot move '%s' to %.12s: %s",
			     base, res->commit, errout.ptr);
out:
	free(wt);
	free(ref);
	free(tip);
	free(msg);
	buf_release(&errout);
	return rc;
}

int
worktree_land(const struct workspace *ws0, const struct land_request *rq,
	      struct land_result *out, struct err *e)
{
	struct land_result res = LAND_RESULT_INIT;
	struct workspace wsi = *ws0; /* borrowed strings: never released */
	const struct workspace *ws = &wsi;
	char *path = NULL, *ref = NULL, *tip = NULL;
	int rc, contained = 0;

	/* the merge commit needs an author, whoever the caller is */
	if (!wsi.identity)
		workspace_detect_identity(&wsi);

	rc = worktree_base_branch(ws, rq->base_branch, &res.base_branch, e);
	if (rc < 0)
		goto out;
	rc = base_tip(ws, res.base_branch, &res.base_commit, e);
	if (!rc && !res.base_commit)
		rc = err_set(e, BATON_EINVAL,
			     "the base branch '%s' does not exist in '%s'",
			     res.base_branch, ws->repo);
	if (rc < 0)
		goto out;
	ref = branch_ref(rq->branch);
	rc = resolve(ws, ref, &tip, e);
	if (!rc && !tip)
		rc = err_set(e, BATON_ENOTFOUND,
			     "the branch '%s' does not exist in '%s'",
			     rq->branch, ws->repo);
	if (!rc)
		rc = is_ancestor(ws, tip, res.base_commit, &contained, e);
	if (rc < 0)
		goto out;
	if (contained) {
		res.outcome = LAND_NOTHING;
		res.commit = xstrdup(res.base_commit);
		goto done;
	}
	res.outcome = LAND_MERGED;
	rc = merge_tree(ws, res.base_commit, &path, e);
	if (!rc)
		rc = merge_branch(ws, path, rq, res.base_branch, &res, e);
	if (rc < 0 || res.outcome != LAND_MERGED)
		goto done;
	rc = run_checks(ws, path, rq, res.base_branch, &res, e);
	if (rc < 0 || res.outcome != LAND_MERGED)
		goto done;
	rc = move_base(ws, res.base_branch, res.base_commit, rq->branch, &res,
		       e);
done:
	if (rc < 0)
		goto out;
	*out = res;
	res = (struct land_result)LAND_RESULT_INIT;
out:
	land_result_release(&res);
	free(path);
	free(ref);
	free(tip);
	return rc;
}

int
worktree_branch_diff(const struct workspace *ws, const char *base,
		     const char *branch, const char *path, size_t max,
		     struct buf *out, int *cut_out, struct err *e)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct git_at at = { .dir = ws->repo };
	char *range = xasprintf("%s...%s", base, branch);
	char chunk[8192];
	size_t got = 0;
	int rc, fd = -1;

	rc = fs_unlink(path, e);
	if (rc < 0)
		goto out;
	workspace__git_start(ws, &at, &o);
	strvec_pushl(&o.argv, "diff", "--no-color", "--no-ext-diff",
		     "--no-textconv", range, "--", NULL);
	o.out_path = path;
	o.timeout_ms = GIT_TIMEOUT_MS;
	rc = spawn_run(&o, &r, e);
	if (rc < 0)
		goto out;
	if (r.status || r.timed_out) {
		rc = err_set(e, BATON_ECHILD, "cannot diff '%s': %s", range,
			     r.timed_out ? "timed out" : r.err.ptr);
		goto out;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* no output at all: git wrote nothing, so no file */
		rc = errno == ENOENT ? 0 : err_set(e, -errno,
						   "cannot read '%s': %s",
						   path, strerror(errno));
		goto out;
	}
	while (!max || got < max) {
		size_t want = sizeof(chunk);
		ssize_t n;

		if (max && max - got < want)
			want = max - got;
		n = read(fd, chunk, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = err_set(e, -errno, "cannot read '%s': %s", path,
				     strerror(errno));
			goto out;
		}
		if (!n)
			break;
		buf_add(out, chunk, (size_t)n);
		got += (size_t)n;
	}
	if (cut_out)
		*cut_out = max && r.out_bytes > max;
out:
	if (fd >= 0)
		close(fd);
	free(range);
	spawn_result_release(&r);
	spawn_opts_release(&o);
	return rc;
}

/*
 * ---- worker hosts sharing one remote (repo.url) ------------------------
 *
 * When repo.url names a shared remote, every machine keeps a clone of
 * its own and the remote is the only thing they share besides the
 * database. A run starts from the base as the remote has it now, not as
 * this clone last saw it; a run's branch travels to the remote before
 * its task is settled, so whoever judges or lands it, on whichever
 * machine, fetches it from there; and the one lander pushes the base
 * after each landing.
 *
 * Fetched bases live under refs/remotes/baton/, out of the way of the
 * clone's own branches. Fetches never write FETCH_HEAD: workers of one
 * clone fetch side by side, and that file is one for all of them.
 */

/*
 * git fetch of one refspec. Two workers of this clone fetching the same
 * ref at once may find it locked by the other: one more try settles it.
 */
static int
fetch(const struct workspace *ws, const char *url, const char *refspec,
      struct err *e)
{
	int rc = git(ws, ws->repo, NULL, e, "fetch", "--quiet",
		     "--no-write-fetch-head", url, refspec, NULL);

	if (rc < 0) {
		*e = (struct err)ERR_INIT;
		rc = git(ws, ws->repo, NULL, e, "fetch", "--quiet",
			 "--no-write-fetch-head", url, refspec, NULL);
	}
	return rc;
}

int
remote_fetch_base(const struct workspace *ws, const char *url,
		  const char *branch, char **ref_out, struct err *e)
{
	char *ref = xasprintf("refs/remotes/baton/%s", branch);
	char *spec = xasprintf("+refs/heads/%s:%s", branch, ref);
	int rc = fetch(ws, url, spec, e);

	free(spec);
	if (rc < 0) {
		err_prefix(e, "cannot fetch the base '%s' from '%s'", branch,
			   url);
		free(ref);
		return rc;
	}
	*ref_out = ref;
	return 0;
}

int
remote_fetch_branch(const struct workspace *ws, const char *url,
		    const char *branch, struct err *e)
{
	char *ref = branch_ref(branch), *tip = NULL, *spec;
	int rc = resolve(ws, ref, &tip, e);

	/* made here, or fetched before: git refuses to fetch into a branch
	 * a worktree has checked out, and there is nothing new to get */
	if (rc < 0 || tip) {
		free(tip);
		free(ref);
		return rc;
	}
	spec = xasprintf("+%s:%s", ref, ref);
	rc = fetch(ws, url, spec, e);
	if (rc < 0)
		err_prefix(e, "cannot fetch the branch '%s' from '%s'", branch,
			   url);
	free(spec);
	free(ref);
	return rc;
}

int
remote_push(const struct workspace *ws, const char *url, const char *branch,
	    int force, struct err *e)
{
	char *spec = xasprintf("%srefs/heads/%s:refs/heads/%s",
			       force ? "+" : "", branch, branch);
	int rc = git(ws, ws->repo, NULL, e, "push", "--quiet", url, spec,
		     NULL);

	if (rc < 0)
		err_prefix(e, "cannot push '%s' to '%s'", branch, url);
	free(spec);
	return rc;
}

int
remote_push_lease(const struct workspace *ws, const char *url,
		  const char *commit, const char *dst, const char *expect,
		  struct err *e)
{
	char *lease = xasprintf("--force-with-lease=refs/heads/%s:%s", dst,
				expect);
	char *spec = xasprintf("%s:refs/heads/%s", commit, dst);
	int rc = git(ws, ws->repo, NULL, e, "push", "--quiet", lease, url,
		     spec, NULL);

	if (rc < 0)
		err_prefix(e, "cannot push %.12s to '%s' of '%s' (expected "
			   "at %.12s)", commit, dst, url, expect);
	free(lease);
	free(spec);
	return rc;
}

int
workspace_resolve(const struct workspace *ws, const char *ref, char **out,
		  struct err *e)
{
	return resolve(ws, ref, out, e);
}
