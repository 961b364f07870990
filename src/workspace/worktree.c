/*
 * Git worktrees for runs: one worktree and branch per run, checkpoints
 * after stages that edit code, resets to the last checkpoint when a run is
 * recovered, and diffs. Every git call goes through spawn_capture with an
 * argv array and a timeout.
 */
#include "util/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/log.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#define GIT_TIMEOUT_MS (120 * 1000)

/* Starts "git [-c identity] -C dir" in argv. */
static void
git_argv(const struct workspace *ws, struct strvec *argv, const char *dir)
{
	strvec_push(argv, "git");
	if (ws && ws->identity)
		strvec_pushl(argv, "-c", "user.name=baton", "-c",
			     "user.email=baton@localhost", NULL);
	strvec_pushl(argv, "-C", dir, NULL);
}

/* Runs git with the arguments that follow dir; stdout into out (trimmed). */
static int
git(const struct workspace *ws, const char *dir, struct buf *out,
    struct err *e, ...)
{
	struct strvec argv = STRVEC_INIT;
	const char *arg;
	va_list ap;
	int rc;

	git_argv(ws, &argv, dir);
	va_start(ap, e);
	while ((arg = va_arg(ap, const char *)))
		strvec_push(&argv, arg);
	va_end(ap);
	rc = spawn_capture(argv.v, NULL, out, BUF_MAX_GIT_OUTPUT,
			   GIT_TIMEOUT_MS, e);
	if (!rc && out)
		buf_rtrim(out);
	strvec_clear(&argv);
	return rc;
}

int
workspace_open(const char *cwd, struct workspace *out, struct err *e)
{
	struct buf top = BUF_INIT;
	int rc;

	rc = git(NULL, cwd ? cwd : ".", &top, e, "rev-parse",
		 "--show-toplevel", NULL);
	if (rc < 0 || !top.len) {
		rc = err_set(e, BATON_ENOREPO,
			     "'%s' is not inside a git repository (run "
			     "'git init' first, or cd into one)",
			     cwd ? cwd : ".");
		goto out;
	}
	out->repo = buf_detach(&top, NULL);
	out->dir = xasprintf("%s/.baton", out->repo);
	out->identity = 0;
out:
	buf_release(&top);
	return rc;
}

void
workspace_detect_identity(struct workspace *ws)
{
	struct buf email = BUF_INIT;
	struct err ignored = ERR_INIT;

	ws->identity = git(NULL, ws->repo, &email, &ignored, "config",
			   "user.email", NULL) < 0 ||
		       !email.len;
	buf_release(&email);
}

void
workspace_release(struct workspace *ws)
{
	FREE_AND_NULL(ws->repo);
	FREE_AND_NULL(ws->dir);
}

char *
workspace_run_dir(const struct workspace *ws, const char *run_id)
{
	return xasprintf("%s/runs/%s", ws->dir, run_id);
}

char *
workspace_worktree_dir(const struct workspace *ws, const char *run_id)
{
	return xasprintf("%s/worktrees/%s", ws->dir, run_id);
}

int
worktree_resolve_base(const struct workspace *ws, const char *base_ref,
		      char **commit_out, struct err *e)
{
	char *spec = xasprintf("%s^{commit}", base_ref ? base_ref : "HEAD");
	struct buf base = BUF_INIT;
	int rc;

	rc = git(ws, ws->repo, &base, e, "rev-parse", "--verify", "--quiet",
		 spec, NULL);
	if (rc < 0 && !base_ref)
		rc = err_set(e, BATON_EINVAL,
			     "the repository '%s' has no commits yet: a run "
			     "branches from HEAD, so commit something first",
			     ws->repo);
	else if (rc < 0)
		rc = err_set(e, BATON_EINVAL, "base '%s' is not a commit in '%s'",
			     base_ref, ws->repo);
	else
		*commit_out = buf_detach(&base, NULL);
	free(spec);
	buf_release(&base);
	return rc;
}

int
workspace_lock_worktrees(const struct workspace *ws, struct err *e)
{
	char *path = xasprintf("%s/worktrees.lock", ws->dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0) {
		fd = err_set(e, -errno, "cannot open '%s': %s", path,
			     strerror(errno));
	} else {
		while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
			;
	}
	free(path);
	return fd;
}

void
workspace_unlock_worktrees(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

/*
 * Whether an entry of the common git dir's worktrees/ is what a `git
 * worktree add` killed halfway left: one of gitdir, commondir, HEAD
 * missing or empty, or still marked "initializing" (git locks an entry
 * while it adds it, so `git worktree prune` never removes it).
 */
static int
half_made(const char *entry)
{
	static const char *const needed[] = { "gitdir", "commondir", "HEAD" };
	struct buf text = BUF_INIT;
	size_t i;
	int bad = 0;
	char *f;

	for (i = 0; i < ARRAY_SIZE(needed) && !bad; i++) {
		f = xasprintf("%s/%s", entry, needed[i]);
		bad = fs_size(f) <= 0;
		free(f);
	}
	f = xasprintf("%s/locked", entry);
	if (!bad && fs_read(f, &text, 4096, NULL) == 0)
		bad = !strncmp(text.ptr, "initializing", 12);
	free(f);
	buf_release(&text);
	return bad;
}

/*
 * Clears what a `git worktree add` killed halfway leaves behind, which
 * would make git refuse every later add ("failed to read .../commondir").
 * With the worktrees lock held no add is under way, so such an entry is
 * a corpse. Then lets git prune the rest.
 */
void
worktree_repair_admin(const struct workspace *ws)
{
	struct buf common = BUF_INIT;
	struct err ignored = ERR_INIT;
	struct dirent *de;
	char *dir = NULL;
	DIR *d = NULL;

	if (git(ws, ws->repo, &common, &ignored, "rev-parse", "--path-format="
		"absolute", "--git-common-dir", NULL) == 0) {
		dir = xasprintf("%s/worktrees", common.ptr);
		d = opendir(dir);
	}
	while (d && (de = readdir(d))) {
		char *entry;

		if (de->d_name[0] == '.')
			continue;
		entry = xasprintf("%s/%s", dir, de->d_name);
		if (half_made(entry)) {
			log_warn("removed the half-made worktree entry %s",
				 entry);
			fs_remove_tree(entry, &ignored);
		}
		free(entry);
	}
	if (d)
		closedir(d);
	free(dir);
	buf_release(&common);
	git(ws, ws->repo, NULL, &ignored, "worktree", "prune", NULL);
}

/* worktree_create's git work, under the worktrees lock. */
static int
make_worktree(const struct workspace *ws, const char *path,
	      const char *branch, const char *base, struct err *e)
{
	struct buf head = BUF_INIT;
	struct err ignored = ERR_INIT;
	int rc = 0;

	if (fs_is_dir(path) &&
	    git(ws, path, &head, &ignored, "symbolic-ref", "--short", "HEAD",
		NULL) == 0 &&
	    !strcmp(head.ptr, branch))
		goto done;
	/* A half-made worktree from a crash: forget it and start over. */
	worktree_repair_admin(ws);
	if (fs_exists(path) && (rc = fs_remove_tree(path, e)) < 0)
		goto done;
	if (git(ws, ws->repo, NULL, &ignored, "rev-parse", "--verify",
		"--quiet", branch, NULL) == 0)
		rc = git(ws, ws->repo, NULL, e, "worktree", "add", "--quiet",
			 path, branch, NULL);
	else
		rc = git(ws, ws->repo, NULL, e, "worktree", "add", "--quiet",
			 "-b", branch, path, base, NULL);
	if (rc < 0)
		err_prefix(e, "cannot create worktree '%s'", path);
done:
	buf_release(&head);
	return rc;
}

int
worktree_create(const struct workspace *ws, const char *run_id,
		const char *base_ref, char **path_out, char **branch_out,
		char **base_commit_out, struct err *e)
{
	char *path = workspace_worktree_dir(ws, run_id);
	char *branch = xasprintf("baton/%s", run_id);
	char *base = NULL;
	int rc, lock;

	rc = worktree_resolve_base(ws, base_ref, &base, e);
	if (rc < 0)
		goto out;
	/* Workers make worktrees side by side: a prune must never see
	 * another's worktree half-made. */
	lock = workspace_lock_worktrees(ws, e);
	if (lock < 0) {
		rc = lock;
		goto out;
	}
	rc = make_worktree(ws, path, branch, base, e);
	workspace_unlock_worktrees(lock);
	if (rc < 0)
		goto out;
	*path_out = path;
	*branch_out = branch;
	*base_commit_out = base;
	path = branch = base = NULL;
out:
	free(path);
	free(branch);
	free(base);
	return rc;
}


int
worktree_checkpoint(const struct workspace *ws, const char *path,
		    const char *message, char **commit_out, int *changed_out,
		    struct err *e)
{
	struct buf head = BUF_INIT;
	struct err ignored = ERR_INIT;
	int rc, changed = 0;

	rc = git(ws, path, NULL, e, "add", "--all", NULL);
	if (rc < 0)
		goto out;
	if (git(ws, path, NULL, &ignored, "diff", "--cached", "--quiet",
		NULL) < 0) {
		rc = git(ws, path, NULL, e, "commit", "--quiet", "--no-verify",
			 "-m", message, NULL);
		if (rc < 0)
			goto out;
		changed = 1;
	}
	rc = git(ws, path, &head, e, "rev-parse", "HEAD", NULL);
	if (rc < 0)
		goto out;
	*commit_out = buf_detach(&head, NULL);
	if (changed_out)
		*changed_out = changed;
out:
	if (rc < 0)
		err_prefix(e, "cannot checkpoint worktree '%s'", path);
	buf_release(&head);
	return rc;
}

static void
unlink_stale(const char *lock)
{
	if (unlink(lock) == 0)
		log_warn("removed a stale %s", lock);
}

/*
 * A git killed with its driver leaves its lock files behind: index.lock,
 * HEAD.lock, ORIG_HEAD.lock in the worktree's own git directory, and the
 * lock of the branch it was moving in the common one. The caller holds
 * the run, so no live git works in this worktree: they are all stale.
 */
static void
clear_stale_locks(const struct workspace *ws, const char *path)
{
	struct buf head = BUF_INIT, common = BUF_INIT;
	struct err ignored = ERR_INIT;
	char *gitdir = NULL, *p;
	struct dirent *de;
	DIR *d;

	if (worktree_git_dir(ws, path, &gitdir, &ignored))
		return;
	d = opendir(gitdir);
	while (d && (de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (n > 5 && !strcmp(de->d_name + n - 5, ".lock")) {
			p = xasprintf("%s/%s", gitdir, de->d_name);
			unlink_stale(p);
			free(p);
		}
	}
	if (d)
		closedir(d);
	p = xasprintf("%s/HEAD", gitdir);
	fs_read(p, &head, 4096, &ignored);
	free(p);
	p = xasprintf("%s/commondir", gitdir);
	fs_read(p, &common, 4096, &ignored);
	free(p);
	buf_rtrim(&head);
	buf_rtrim(&common);
	if (head.len > 5 && !strncmp(head.ptr, "ref: ", 5) && common.len &&
	    !strstr(head.ptr, "..")) {
		p = common.ptr[0] == '/' ?
			    xasprintf("%s/%s.lock", common.ptr, head.ptr + 5) :
			    xasprintf("%s/%s/%s.lock", gitdir, common.ptr,
				      head.ptr + 5);
		unlink_stale(p);
		free(p);
	}
	buf_release(&head);
	buf_release(&common);
	free(gitdir);
}

/*
 * Makes path a worktree again when git no longer knows it: its admin
 * entry is gone (a `git worktree add` whose worker was killed went on
 * running as an orphan while the next worker, holding the lock, removed
 * its entry as half-made). The run's branch is checked out afresh there,
 * or made at commit when even the branch is missing.
 */
static int
remake_lost(const struct workspace *ws, const char *path, const char *commit,
	    struct err *e)
{
	struct buf out = BUF_INIT;
	struct err ignored = ERR_INIT;
	const char *name = strrchr(path, '/');
	char *branch;
	int rc, lock;

	rc = git(ws, path, &out, &ignored, "rev-parse", "--git-dir", NULL);
	buf_release(&out);
	if (rc == 0 || !name)
		return 0;
	log_warn("worktree %s is unknown to git; making it again", path);
	branch = xasprintf("baton/%s", name + 1);
	lock = workspace_lock_worktrees(ws, e);
	rc = lock < 0 ? lock : make_worktree(ws, path, branch, commit, e);
	if (lock >= 0)
		workspace_unlock_worktrees(lock);
	free(branch);
	return rc;
}

int
worktree_reset(const struct workspace *ws, const char *path,
	       const char *commit, struct err *e)
{
	int rc;

	rc = remake_lost(ws, path, commit, e);
	if (rc < 0)
		return err_prefix(e, "cannot reset worktree '%s' to %.12s",
				  path, commit);
	clear_stale_locks(ws, path);
	rc = git(ws, path, NULL, e, "reset", "--quiet", "--hard", commit,
		 NULL);
	if (!rc)
		rc = git(ws, path, NULL, e, "clean", "-fdq", NULL);
	if (rc < 0)
		err_prefix(e, "cannot reset worktree '%s' to %.12s", path,
			   commit);
	return rc;
}

int
worktree_diff(const struct workspace *ws, const char *path, const char *base,
	      int stat, struct buf *out, struct err *e)
{
	if (stat)
		return git(ws, path, out, e, "diff", "--stat", base, NULL);
	return git(ws, path, out, e, "diff", "--binary", base, NULL);
}

int
worktree_changed_paths(const struct workspace *ws, const char *path,
		       const char *from, const char *to, struct strvec *out,
		       struct err *e)
{
	struct buf names = BUF_INIT;
	size_t i = 0;
	int rc;

	rc = git(ws, path, &names, e, "diff", "--name-only", "-z", from, to,
		 NULL);
	while (!rc && i < names.len) {
		size_t n = strnlen(names.ptr + i, names.len - i);

		if (n)
			strvec_pushf(out, "%.*s", (int)n, names.ptr + i);
		i += n + 1;
	}
	buf_release(&names);
	return rc;
}

int
worktree_git_dir(const struct workspace *ws, const char *path, char **out,
		 struct err *e)
{
	struct buf dir = BUF_INIT;
	int rc = git(ws, path, &dir, e, "rev-parse", "--absolute-git-dir",
		     NULL);

	*out = rc ? NULL : buf_detach(&dir, NULL);
	buf_release(&dir);
	return rc;
}
