/*
 * Git worktrees for runs: one worktree and branch per run, checkpoints
 * after stages that edit code, resets to the last checkpoint when a run is
 * recovered, and diffs. Every git call is baton's own (git.c): an argv
 * array, a timeout, no hooks, and in a run's worktree the common git dir
 * and baton's own index rather than anything the worktree says:
 *
 *   .baton/worktrees/<id>/           the work tree (the agent's)
 *   .baton/worktrees/<id>/.git       "gitdir: <common>/worktrees/<id>",
 *                                    put back after every checkpoint
 *   <common>/worktrees/<id>/         its admin dir: HEAD -> the branch,
 *                                    the agent's index; never read
 *   .baton/runs/<id>/worktree.index  baton's index of the work tree
 *   refs/heads/baton/<id>            moved only by update-ref OLD -> NEW
 */
#include "util/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ids.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/log.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"
#include "workspace/workspace_int.h"

#define GIT_TIMEOUT_MS (120 * 1000)
/* What baton reads of a file an agent could have written, at most. */
#define LINK_FILE_MAX 4096

/*
 * Runs baton's git (git.c) at at with the arguments in ap, up to a NULL;
 * stdout into out (trimmed). 0 when it exits 0, else BATON_ECHILD with
 * what it said.
 */
static int
git_va(const struct workspace *ws, const struct git_at *at, struct buf *out,
       struct err *e, va_list ap)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct buf what = BUF_INIT;
	const char *arg;
	size_t i;
	int rc;

	workspace__git_start(ws, at, &o);
	while ((arg = va_arg(ap, const char *)))
		strvec_push(&o.argv, arg);
	o.timeout_ms = GIT_TIMEOUT_MS;
	o.tail_max = out ? BUF_MAX_GIT_OUTPUT + 1 : 0;
	rc = spawn_run(&o, &r, e);
	if (rc < 0)
		goto out;
	for (i = 1; i < o.argv.nr && what.len < 200; i++)
		buf_addf(&what, "%s%s", i > 1 ? " " : "", o.argv.v[i]);
	buf_rtrim(&r.err);
	if (r.timed_out)
		rc = err_set(e, BATON_ETIMEDOUT, "'git %s' timed out after "
			     "%d s", what.ptr, GIT_TIMEOUT_MS / 1000);
	else if (r.status)
		rc = err_set(e, BATON_ECHILD, "'git %s' failed (exit %d): %s",
			     what.ptr, r.status,
			     r.err.len ? r.err.ptr : "(no message)");
	else if (out && r.out_bytes > BUF_MAX_GIT_OUTPUT)
		rc = err_set(e, BATON_ECHILD, "output of 'git %s' exceeds "
			     "%d bytes", what.ptr, BUF_MAX_GIT_OUTPUT);
	else if (out) {
		buf_add(out, r.out.ptr, r.out.len);
		buf_rtrim(out);
	}
out:
	buf_release(&what);
	spawn_result_release(&r);
	spawn_opts_release(&o);
	return rc;
}

/* git at at, as git_va(). */
static int
git_at_run(const struct workspace *ws, const struct git_at *at, struct buf *out,
	   struct err *e, ...)
{
	va_list ap;
	int rc;

	va_start(ap, e);
	rc = git_va(ws, at, out, e, ap);
	va_end(ap);
	return rc;
}

/* git in the main checkout dir (or, NULL, the common git dir). */
static int
git(const struct workspace *ws, const char *dir, struct buf *out,
    struct err *e, ...)
{
	struct git_at at = { .dir = dir };
	va_list ap;
	int rc;

	va_start(ap, e);
	rc = git_va(ws, &at, out, e, ap);
	va_end(ap);
	return rc;
}

/*
 * The names baton derives from a run's worktree path, never from what is
 * in the worktree: the run id (its last component), the branch, the
 * worktree's admin directory in the common git dir, and baton's own
 * index for it in the run folder.
 */
struct wt {
	const char *path;
	const char *id;
	char *ref;   /* refs/heads/baton/<id> */
	char *admin; /* <common>/worktrees/<id> */
	char *index; /* .baton/runs/<id>/worktree.index */
};

static int
wt_init(const struct workspace *ws, const char *path, struct wt *w,
	struct err *e)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	memset(w, 0, sizeof(*w));
	if (!slash || !slash[1] || !strcmp(slash, "/.") ||
	    !strcmp(slash, "/..")) {
		err_set(e, BATON_EINVAL, "'%s' is not a run's worktree",
			path ? path : "(none)");
		return BATON_EINVAL;
	}
	w->path = path;
	w->id = slash + 1;
	w->ref = xasprintf("refs/heads/baton/%s", w->id);
	w->admin = xasprintf("%s/worktrees/%s", ws->common, w->id);
	w->index = xasprintf("%s/runs/%s/worktree.index", ws->dir, w->id);
	return 0;
}

static void
wt_release(struct wt *w)
{
	FREE_AND_NULL(w->ref);
	FREE_AND_NULL(w->admin);
	FREE_AND_NULL(w->index);
}

/* git in the run's worktree, through the common git dir and index. */
static int
wgit(const struct workspace *ws, const struct wt *w, const char *index,
     int read_only, struct buf *out, struct err *e, ...)
{
	struct git_at at = { .work_tree = w->path, .index = index,
			     .read_only = read_only };
	va_list ap;
	int rc;

	va_start(ap, e);
	rc = git_va(ws, &at, out, e, ap);
	va_end(ap);
	return rc;
}

int
workspace_open(const char *cwd, struct workspace *out, struct err *e)
{
	struct buf top = BUF_INIT;
	char *nl, *dir = NULL, *common = NULL;
	int rc;

	/* The main checkout is the user's, and trusted: its .git says
	 * where the repository's common git directory is, read here
	 * (discover.c) or, in a layout only git can settle, by git. */
	rc = workspace__discover(cwd, &dir, &common, e);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		out->repo = dir;
		out->common = common;
		out->dir = xasprintf("%s/.baton", out->repo);
		out->identity = 0;
		return 0;
	}
	rc = git(NULL, cwd ? cwd : ".", &top, e, "rev-parse",
		 "--show-toplevel", "--path-format=absolute",
		 "--git-common-dir", NULL);
	nl = rc < 0 ? NULL : strchr(top.ptr, '\n');
	if (!nl || nl == top.ptr || !nl[1]) {
		rc = err_set(e, BATON_ENOREPO,
			     "'%s' is not inside a git repository (run "
			     "'git init' first, or cd into one)",
			     cwd ? cwd : ".");
		goto out;
	}
	*nl = '\0';
	out->repo = xstrdup(top.ptr);
	out->common = xstrdup(nl + 1);
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
	FREE_AND_NULL(ws->common);
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

/*
 * The highest run number among the names in folder dir (0 if none or no
 * such folder); the first name with a number goes to *first (when not
 * NULL and still NULL), and each one counts in *nr (may be NULL).
 */
static int64_t
highest_seq_in(const char *dir, size_t *nr, char **first)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int64_t top = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		int64_t seq = de->d_name[0] == 'r' ? run_id_seq(de->d_name) : 0;

		if (seq <= 0)
			continue;
		if (nr)
			(*nr)++;
		if (first && !*first)
			*first = xstrdup(de->d_name);
		if (seq > top)
			top = seq;
	}
	closedir(d);
	return top;
}

int
workspace_next_free_seq(const struct workspace *ws, int64_t *out,
			struct err *e)
{
	char *runs = xasprintf("%s/runs", ws->dir);
	char *trees = xasprintf("%s/worktrees", ws->dir);
	struct buf names = BUF_INIT;
	int64_t top, seq;
	const char *line;
	int rc;

	top = highest_seq_in(runs, NULL, NULL);
	seq = highest_seq_in(trees, NULL, NULL);
	if (seq > top)
		top = seq;
	rc = git(ws, NULL, &names, e, "for-each-ref",
		 "--format=%(refname:lstrip=3)", "refs/heads/baton/", NULL);
	if (rc < 0)
		goto out;
	for (line = names.ptr; *line; line = strchrnul(line, '\n')) {
		if (*line == '\n')
			line++;
		seq = *line == 'r' ? run_id_seq(line) : 0;
		if (seq > top)
			top = seq;
	}
	*out = top + 1;
out:
	buf_release(&names);
	free(runs);
	free(trees);
	return rc;
}

size_t
workspace_count_runs(const struct workspace *ws, char **first_out)
{
	char *runs = xasprintf("%s/runs", ws->dir);
	size_t nr = 0;

	highest_seq_in(runs, &nr, first_out);
	free(runs);
	return nr;
}

int
workspace_claim_run_dir(const struct workspace *ws, const char *run_id,
			struct err *e)
{
	char *runs = xasprintf("%s/runs", ws->dir);
	char *dir = xasprintf("%s/%s", runs, run_id);
	int rc = fs_mkdir_p(runs, 0755, e);

	if (!rc && mkdir(dir, 0755) < 0) {
		if (errno == EEXIST)
			rc = err_set(e, -EEXIST,
				     "run folder '%s' exists already: another "
				     "baton store in this repository made run "
				     "'%s' at the same moment; run the task "
				     "again", dir, run_id);
		else
			rc = err_set(e, -errno, "cannot create run folder "
				     "'%s': %s", dir, strerror(errno));
	}
	free(runs);
	free(dir);
	return rc;
}

void
workspace_reserve_space(const struct workspace *ws)
{
	char *path = xasprintf("%s/space.reserve", ws->dir);
	struct stat st;
	int fd;

	if (stat(path, &st) == 0 && st.st_size >= WORKSPACE_RESERVE_BYTES)
		goto out;
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out;
	/* Real blocks, not a hole: only those can be handed back. */
	if (posix_fallocate(fd, 0, WORKSPACE_RESERVE_BYTES) != 0)
		unlink(path); /* no room even for it: nothing to keep */
	close(fd);
out:
	free(path);
}

int
workspace_release_space(const struct workspace *ws)
{
	char *path = xasprintf("%s/space.reserve", ws->dir);
	int had = unlink(path) == 0;

	free(path);
	return had;
}

int
worktree_resolve_base(const struct workspace *ws, const char *base_ref,
		      char **commit_out, struct err *e)
{
	char *spec = xasprintf("%s^{commit}", base_ref ? base_ref : "HEAD");
	struct buf base = BUF_INIT;
	struct err why = ERR_INIT;
	int rc;

	rc = git(ws, ws->repo, &base, &why, "rev-parse", "--verify",
		 "--quiet", spec, NULL);
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
 * Reads at most LINK_FILE_MAX bytes of a small file an agent could have
 * written (the worktree's .git file, its admin HEAD) without following
 * a link; trimmed. 0, or negative (a link or a directory is -ELOOP or
 * -EISDIR).
 */
static int
read_small(const char *path, struct buf *out)
{
	char chunk[LINK_FILE_MAX];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	ssize_t n;
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	while (!rc && (n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || out->len + (size_t)n > LINK_FILE_MAX)
			rc = n < 0 ? -errno : -EFBIG;
		else
			buf_add(out, chunk, (size_t)n);
	}
	close(fd);
	buf_rtrim(out);
	return rc;
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
 * Whether `git worktree prune` could remove the (whole) entry: not
 * locked, and its gitdir file unreadable or naming a path that is gone
 * (git's own test). Only decides whether git is asked; git decides what
 * goes.
 */
static int
prunable(const char *entry)
{
	struct buf where = BUF_INIT;
	struct stat st;
	char *f = xasprintf("%s/locked", entry);
	int gone = 0;

	if (lstat(f, &st) < 0) {
		free(f);
		f = xasprintf("%s/gitdir", entry);
		/* a relative path (worktree.useRelativePaths) is git's to
		 * resolve: asked */
		gone = read_small(f, &where) < 0 || where.ptr[0] != '/' ||
		       lstat(where.ptr, &st) < 0;
	}
	free(f);
	buf_release(&where);
	return gone;
}

/*
 * Clears what a `git worktree add` killed halfway leaves behind, which
 * would make git refuse every later add ("failed to read .../commondir").
 * With the worktrees lock held no add is under way, so such an entry is
 * a corpse. Then lets git prune the rest, when there is any: most new
 * runs find every entry whole, and a git process less.
 */
void
worktree_repair_admin(const struct workspace *ws)
{
	struct err ignored = ERR_INIT;
	struct dirent *de;
	char *dir = xasprintf("%s/worktrees", ws->common);
	DIR *d = opendir(dir);
	int prune = 0;

	while (d && (de = readdir(d))) {
		char *entry;

		if (de->d_name[0] == '.')
			continue;
		entry = xasprintf("%s/%s", dir, de->d_name);
		if (half_made(entry)) {
			log_warn("removed the half-made worktree entry %s",
				 entry);
			fs_remove_tree(entry, &ignored);
		} else if (!prune) {
			prune = prunable(entry);
		}
		free(entry);
	}
	if (d)
		closedir(d);
	free(dir);
	if (prune)
		git(ws, ws->repo, NULL, &ignored, "worktree", "prune", NULL);
}

/*
 * Puts back the two files that tie the worktree to its run's branch, for
 * the agent's own git and the user's: the worktree's .git file and the
 * admin directory's HEAD. baton's git reads neither (git.c); an agent
 * that rewrote them gets them back, and what they said is appended to
 * changed (may be NULL) as a sentence. Both are replaced by rename, so a
 * link planted in their place is replaced, never followed.
 */
static int
restore_links(const struct workspace *ws, const struct wt *w,
	      struct strvec *changed, struct err *e)
{
	char *dotgit = xasprintf("%s/.git", w->path);
	char *head = xasprintf("%s/HEAD", w->admin);
	char *want_git = xasprintf("gitdir: %s", w->admin);
	char *want_head = xasprintf("ref: %s", w->ref);
	struct buf have = BUF_INIT;
	struct stat st;
	int rc;

	(void)ws;
	if (read_small(dotgit, &have) < 0 || strcmp(have.ptr, want_git)) {
		if (changed)
			strvec_pushf(changed, "the worktree's .git was "
				     "rewritten (it read '%.200s')", have.ptr);
		if (lstat(dotgit, &st) == 0 && S_ISDIR(st.st_mode))
			fs_remove_tree(dotgit, NULL);
		buf_reset(&have);
		buf_addf(&have, "%s\n", want_git);
		rc = fs_write_atomic(dotgit, have.ptr, have.len, e);
		if (rc)
			goto out;
	}
	buf_reset(&have);
	if (read_small(head, &have) < 0 || strcmp(have.ptr, want_head)) {
		if (changed)
			strvec_pushf(changed, "the worktree's HEAD was "
				     "pointed elsewhere ('%.200s')", have.ptr);
		buf_reset(&have);
		buf_addf(&have, "%s\n", want_head);
		rc = fs_write_atomic(head, have.ptr, have.len, e);
		if (rc)
			goto out;
	}
	rc = 0;
out:
	buf_release(&have);
	free(dotgit);
	free(head);
	free(want_git);
	free(want_head);
	return rc;
}

int
worktree_restore(const struct workspace *ws, const char *path,
		 struct strvec *changed, struct err *e)
{
	struct wt w;
	int rc;

	rc = wt_init(ws, path, &w, e);
	if (!rc)
		rc = restore_links(ws, &w, changed, e);
	wt_release(&w);
	return rc;
}

/*
 * Makes the admin index say what baton's index says (the commit a
 * checkpoint or a reset left, with the files' stat data), so that the
 * agent's `git status` in the next stage shows only its own changes and
 * need not hash every file. A copy, as git writes an index: through
 * index.lock, made with O_EXCL (a git at work on it makes this fail as
 * it would make git fail) and renamed into place, inside the admin
 * directory opened without following a link. The copy keeps the times
 * of baton's index, so git's racy-clean test of each entry against them
 * is the one git would make of baton's own.
 */
static int
sync_admin_index(const struct wt *w, struct err *e)
{
	struct timespec times[2];
	struct stat st;
	char chunk[65536];
	ssize_t n = 0;
	int dir = -1, from = -1, to = -1, rc = 0;

	from = fs_open_nofollow(w->index, O_RDONLY, 0, e);
	if (from < 0)
		return from;
	dir = open(w->admin, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir >= 0)
		to = openat(dir, "index.lock",
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0644);
	if (dir < 0 || to < 0) {
		rc = err_set(e, -errno, "cannot write '%s/index.lock': %s",
			     w->admin, strerror(errno));
		goto out;
	}
	while (!rc && (n = read(from, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		rc = n < 0 ? -errno : fs_write_all(to, chunk, (size_t)n);
	}
	if (!rc && fstat(from, &st) < 0)
		rc = -errno;
	if (!rc) {
		times[0] = st.st_atim;
		times[1] = st.st_mtim;
		if (futimens(to, times) < 0)
			rc = -errno;
	}
	if (close(to) < 0 && !rc)
		rc = -errno;
	if (!rc && renameat(dir, "index.lock", dir, "index") < 0)
		rc = -errno;
	if (rc) {
		unlinkat(dir, "index.lock", 0);
		err_set(e, rc, "cannot write '%s/index': %s", w->admin,
			strerror(-rc));
	}
out:
	if (dir >= 0)
		close(dir);
	close(from);
	return rc;
}

static void
unlink_stale(const char *lock)
{
	if (unlink(lock) == 0)
		log_warn("removed a stale %s", lock);
}

/* The run folder that holds baton's index of the worktree. */
static int
index_dir(const struct workspace *ws, const struct wt *w, struct err *e)
{
	char *dir = xasprintf("%s/runs/%s", ws->dir, w->id);
	int rc = fs_mkdir_p(dir, 0755, e);

	free(dir);
	return rc;
}

/*
 * baton's index of the worktree, made from the run's branch when there
 * is none yet (a worktree made before baton kept its own).
 */
static int
ensure_index(const struct workspace *ws, const struct wt *w, struct err *e)
{
	int rc = index_dir(ws, w, e);

	if (!rc && !fs_exists(w->index))
		rc = wgit(ws, w, w->index, 0, NULL, e, "read-tree", w->ref,
			  NULL);
	return rc;
}

/*
 * An empty start for baton's index: one left by a half-made worktree
 * says nothing of the new one, and the lock of a git killed while it
 * wrote it is stale (the caller holds the run and the worktrees lock).
 */
static int
fresh_index(const struct workspace *ws, const struct wt *w, struct err *e)
{
	char *lock = xasprintf("%s.lock", w->index);
	int rc = index_dir(ws, w, e);

	if (!rc)
		rc = fs_unlink(w->index, e);
	if (!rc)
		unlink_stale(lock);
	free(lock);
	return rc;
}

/*
 * Makes the run's branch at base by compare-and-swap (update-ref with an
 * empty old value: the ref must not exist), so that a run never takes
 * over a branch it did not make, with another run's commits on it that
 * review would judge as this run's. The base is written first to the run
 * folder (which is the run's own, workspace_claim_run_dir), so that a
 * branch this run made before a crash, still at that base, is known again.
 */
/*
 * A git killed while it made the run's branch (kill -9 of serve takes its
 * children) leaves the ref's lock file, and every later update-ref of the
 * ref fails on it. Called when the run tried before (its branch.base is
 * there): only the run's own driver makes its branch, and only under the
 * worktrees lock, so no live git holds that lock. unlink removes a link
 * planted there, never what it points to.
 */
static void
drop_stale_ref_lock(const struct workspace *ws, const struct wt *w)
{
	char *lock = xasprintf("%s/%s.lock", ws->common, w->ref);

	if (unlink(lock) == 0)
		log_warn("removed '%s', left by a git that was killed while it "
			 "made the branch",
			 lock);
	free(lock);
}

static int
make_branch(const struct workspace *ws, const struct wt *w, const char *base,
	    struct err *e)
{
	char *dir = xasprintf("%s/runs/%s", ws->dir, w->id);
	char *marker = xasprintf("%s/branch.base", dir);
	struct buf tip = BUF_INIT, made = BUF_INIT;
	struct err ignored = ERR_INIT;
	int rc;

	/* Without the marker the run never tried: the compare-and-swap
	 * below is the test, and a branch that exists fails it. */
	if (fs_exists(marker) &&
	    git(ws, NULL, &tip, &ignored, "rev-parse", "--verify", "--quiet",
		w->ref, NULL) == 0) {
		if (read_small(marker, &made) == 0 &&
		    !strcmp(made.ptr, tip.ptr)) {
			rc = 0; /* ours, from before a crash */
			goto out;
		}
		goto taken;
	}
	if (fs_exists(marker))
		drop_stale_ref_lock(ws, w);
	rc = fs_mkdir_p(dir, 0755, e);
	if (!rc)
		rc = fs_write_atomic(marker, base, strlen(base), e);
	if (rc)
		goto out;
	rc = git(ws, NULL, NULL, &ignored, "update-ref", "-m",
		 "baton: new run", w->ref, base, "", NULL);
	if (!rc)
		goto out;
	if (git(ws, NULL, NULL, e, "rev-parse", "--verify", "--quiet",
		w->ref, NULL) < 0) {
		rc = err_set(e, ignored.rc, "cannot create branch '%s': %s",
			     w->ref + strlen("refs/heads/"), ignored.msg);
		goto out;
	}
taken:
	rc = err_set(e, -EEXIST,
		     "branch '%s' exists already, and run '%s' did not make "
		     "it: baton does not work on another's branch (its "
		     "commits would be judged as this run's); start the task "
		     "again as a new run, or delete the branch if it is "
		     "stale (git branch -D %s)",
		     w->ref + strlen("refs/heads/"), w->id,
		     w->ref + strlen("refs/heads/"));
out:
	buf_release(&tip);
	buf_release(&made);
	free(marker);
	free(dir);
	return rc;
}

/*
 * A git killed with its driver leaves its lock files behind: index.lock,
 * HEAD.lock in the worktree's admin directory, baton's index lock, and
 * the lock of the run's branch. The caller holds the run, so no live git
 * of baton's works on this worktree: they are all stale. Their names come
 * from the run's id, never from the files in the worktree.
 */
static void
clear_stale_locks(const struct workspace *ws, const struct wt *w)
{
	struct dirent *de;
	DIR *d = opendir(w->admin);
	char *p;

	while (d && (de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (n > 5 && !strcmp(de->d_name + n - 5, ".lock")) {
			p = xasprintf("%s/%s", w->admin, de->d_name);
			unlink_stale(p);
			free(p);
		}
	}
	if (d)
		closedir(d);
	p = xasprintf("%s.lock", w->index);
	unlink_stale(p);
	free(p);
	p = xasprintf("%s/%s.lock", ws->common, w->ref);
	unlink_stale(p);
	free(p);
}

/*
 * Whether the worktree's files were checked out: baton's index is
 * written once they all are (make_worktree), and a worktree made before
 * baton kept its own has the index its `git worktree add` wrote. A
 * driver killed in between leaves neither.
 */
static int
populated(const struct wt *w)
{
	char *admin_index = xasprintf("%s/index", w->admin);
	int yes = fs_exists(w->index) || fs_exists(admin_index);

	free(admin_index);
	return yes;
}

/*
 * worktree_create's git work, under the worktrees lock. ours: the run
 * has this branch on record (a worktree made again by remake_lost), so
 * the branch is taken at whatever checkpoint it reached; a new run's
 * branch must be made by make_branch's compare-and-swap instead.
 */
static int
make_worktree(const struct workspace *ws, const char *path,
	      const char *branch, const char *base, int ours, struct err *e)
{
	struct err ignored = ERR_INIT;
	struct wt w;
	int rc;

	rc = wt_init(ws, path, &w, e);
	if (rc)
		return rc;
	/* Reused when git still has it whole: its admin entry (the test
	 * worktree_repair_admin makes) and the branch. What the worktree's
	 * own files say is not asked. */
	if (fs_is_dir(path) && fs_is_dir(w.admin) && !half_made(w.admin) &&
	    populated(&w) &&
	    git(ws, NULL, NULL, &ignored, "rev-parse", "--verify", "--quiet",
		w.ref, NULL) == 0) {
		/* a driver killed after the add may have left its locks */
		clear_stale_locks(ws, &w);
		rc = restore_links(ws, &w, NULL, e);
		if (!rc)
			rc = ensure_index(ws, &w, e);
		goto done;
	}
	/* A half-made worktree from a crash: forget it and start over. */
	worktree_repair_admin(ws);
	if (fs_exists(path) && (rc = fs_remove_tree(path, e)) < 0)
		goto done;
	if (fs_is_dir(w.admin) && (rc = fs_remove_tree(w.admin, e)) < 0)
		goto done; /* an entry whose files were never checked out */
	if (!ours || git(ws, NULL, NULL, &ignored, "rev-parse", "--verify",
			 "--quiet", w.ref, NULL) < 0)
		rc = make_branch(ws, &w, base, e);
	/* git checks out nothing: baton's own index does, with the stat
	 * data of every file it writes, so that the first checkpoint's add
	 * need not hash them all again (and the admin index, never trusted,
	 * is made from it) */
	if (!rc) {
		rc = git(ws, ws->repo, NULL, e, "worktree", "add", "--quiet",
			 "--no-checkout", path, branch, NULL);
		if (rc < 0)
			err_prefix(e, "cannot create worktree '%s'", path);
	}
	if (!rc)
		rc = fresh_index(ws, &w, e);
	if (!rc)
		rc = wgit(ws, &w, w.index, 0, NULL, e, "read-tree", "--reset",
			  "-u", w.ref, NULL);
	if (!rc)
		rc = sync_admin_index(&w, e);
done:
	wt_release(&w);
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
	rc = make_worktree(ws, path, branch, base, 0, e);
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

/*
 * commit-tree of tree on parent, the message on stdin: it holds the
 * task's text, which need not fit in one argument.
 */
static int
commit_tree(const struct workspace *ws, const char *message, const char *parent,
	    const char *tree, struct buf *out, struct err *e)
{
	struct git_at at = { .in = message };

	return git_at_run(ws, &at, out, e, "commit-tree", "--no-gpg-sign", "-p",
			  parent, tree, NULL);
}

/*
 * The commit ref points at and its tree, into tip and tree, with one
 * git: rev-parse prints one line a name, and fails when either is not
 * there.
 */
static int
tip_and_tree(const struct workspace *ws, const char *ref, struct buf *tip,
	     struct buf *tree, struct err *e)
{
	char *commit = xasprintf("%s^{commit}", ref);
	char *spec = xasprintf("%s^{tree}", ref);
	struct buf out = BUF_INIT;
	const char *nl;
	int rc;

	rc = git(ws, NULL, &out, e, "rev-parse", commit, spec, NULL);
	nl = rc ? NULL : strchr(out.ptr, '\n');
	if (!rc && !nl)
		rc = err_set(e, BATON_ECHILD, "git rev-parse %s said '%s'",
			     spec, out.ptr);
	if (!rc) {
		buf_add(tip, out.ptr, (size_t)(nl - out.ptr));
		buf_adds(tree, nl + 1);
	}
	buf_release(&out);
	free(commit);
	free(spec);
	return rc;
}

/*
 * The checkpoint, without a HEAD: baton's index starts from the branch's
 * tip, takes in the work tree (add --all, through the common git dir),
 * and when its tree differs a commit is made on the tip with commit-tree
 * and the branch moved by compare-and-swap (update-ref NEW OLD). No hook
 * runs, and no ref but the run's own branch can move, whatever the agent
 * did to the worktree's HEAD.
 */
int
worktree_checkpoint(const struct workspace *ws, const char *path,
		    const char *message, char **commit_out, int *changed_out,
		    struct err *e)
{
	struct buf old = BUF_INIT, tree = BUF_INIT, old_tree = BUF_INIT,
		   commit = BUF_INIT;
	int rc, changed = 0;
	struct wt w;

	rc = wt_init(ws, path, &w, e);
	if (rc)
		return rc;
	rc = tip_and_tree(ws, w.ref, &old, &old_tree, e);
	if (!rc)
		rc = ensure_index(ws, &w, e);
	/* The index starts from the tip: it is there already unless the
	 * agent committed (or it is new), and then keeps its stat data. */
	if (!rc && (wgit(ws, &w, w.index, 0, &tree, NULL, "write-tree",
			 NULL) < 0 ||
		    strcmp(tree.ptr, old_tree.ptr)))
		rc = wgit(ws, &w, w.index, 0, NULL, e, "read-tree", old.ptr,
			  NULL);
	buf_reset(&tree);
	if (!rc)
		rc = wgit(ws, &w, w.index, 0, NULL, e, "add", "--all", NULL);
	if (!rc)
		rc = wgit(ws, &w, w.index, 0, &tree, e, "write-tree", NULL);
	if (rc)
		goto out;
	if (strcmp(tree.ptr, old_tree.ptr)) {
		rc = commit_tree(ws, message, old.ptr, tree.ptr, &commit, e);
		if (!rc)
			rc = git(ws, NULL, NULL, e, "update-ref", "-m",
				 "baton: checkpoint", w.ref, commit.ptr,
				 old.ptr, NULL);
		changed = 1;
	} else {
		buf_add(&commit, old.ptr, old.len);
	}
	if (!rc)
		rc = sync_admin_index(&w, e);
	if (!rc)
		rc = restore_links(ws, &w, NULL, e);
	if (rc)
		goto out;
	*commit_out = buf_detach(&commit, NULL);
	if (changed_out)
		*changed_out = changed;
out:
	if (rc < 0)
		err_prefix(e, "cannot checkpoint worktree '%s'", path);
	buf_release(&old);
	buf_release(&tree);
	buf_release(&old_tree);
	buf_release(&commit);
	wt_release(&w);
	return rc;
}

/*
 * Makes path a worktree again when git no longer knows it: its admin
 * entry is gone (a `git worktree add` whose worker was killed went on
 * running as an orphan while the next worker, holding the lock, removed
 * its entry as half-made). The run's branch is checked out afresh there,
 * or made at commit when even the branch is missing.
 */
static int
remake_lost(const struct workspace *ws, const struct wt *w,
	    const char *commit, int *remade, struct err *e)
{
	char *branch;
	int rc = 0, lock;

	/* under the lock, as another worker's worktree_repair_admin looks
	 * at the entry, and with its test: an entry it would remove as
	 * half-made is made again here instead */
	lock = workspace_lock_worktrees(ws, e);
	if (lock < 0)
		return lock;
	if (!fs_is_dir(w->path) || !fs_is_dir(w->admin) || half_made(w->admin)) {
		log_warn("worktree %s is unknown to git or half-made; making "
			 "it again",
			 w->path);
		branch = xasprintf("baton/%s", w->id);
		rc = make_worktree(ws, w->path, branch, commit, 1, e);
		free(branch);
		if (!rc && remade)
			*remade = 1;
	}
	workspace_unlock_worktrees(lock);
	return rc;
}

int
worktree_remake(const struct workspace *ws, const char *path,
		const char *commit, int *remade_out, struct err *e)
{
	struct wt w;
	int rc;

	*remade_out = 0;
	rc = wt_init(ws, path, &w, e);
	if (rc)
		return rc;
	rc = remake_lost(ws, &w, commit, remade_out, e);
	if (rc < 0)
		err_prefix(e, "cannot make worktree '%s' again", path);
	wt_release(&w);
	return rc;
}

/*
 * The worktree goes without asking git to read it: its files are removed
 * by baton itself (never following a link), then its admin entry, named
 * from the run's id; a prune tidies git's list. An agent's rewritten
 * .git file so points git at nothing.
 */
int
worktree_remove(const struct workspace *ws, const char *path, struct err *e)
{
	struct err ignored = ERR_INIT;
	struct wt w;
	int rc, lock;

	rc = wt_init(ws, path, &w, e);
	if (rc)
		return rc;
	lock = workspace_lock_worktrees(ws, e);
	if (lock < 0) {
		rc = lock;
		goto out;
	}
	rc = fs_remove_tree(path, e);
	if (!rc)
		rc = fs_remove_tree(w.admin, e);
	if (!rc) {
		fs_unlink(w.index, NULL);
		git(ws, ws->repo, NULL, &ignored, "worktree", "prune", NULL);
	}
	workspace_unlock_worktrees(lock);
	if (rc < 0)
		err_prefix(e, "cannot remove worktree '%s'", path);
out:
	wt_release(&w);
	return rc;
}

/*
 * Back to commit without a HEAD: read-tree --reset -u puts the tracked
 * files as commit has them (removing what it does not have), clean takes
 * the untracked ones, and the branch is set to commit.
 */
int
worktree_reset(const struct workspace *ws, const char *path,
	       const char *commit, struct err *e)
{
	struct wt w;
	int rc;

	rc = wt_init(ws, path, &w, e);
	if (rc)
		return rc;
	rc = remake_lost(ws, &w, commit, NULL, e);
	if (rc < 0)
		goto out;
	clear_stale_locks(ws, &w);
	rc = ensure_index(ws, &w, e);
	if (!rc)
		rc = wgit(ws, &w, w.index, 0, NULL, e, "read-tree", "--reset",
			  "-u", commit, NULL);
	if (!rc)
		rc = wgit(ws, &w, w.index, 0, NULL, e, "clean", "-fdq", NULL);
	if (!rc)
		rc = git(ws, NULL, NULL, e, "update-ref", "-m", "baton: reset",
			 w.ref, commit, NULL);
	if (!rc)
		rc = sync_admin_index(&w, e);
	if (!rc)
		rc = restore_links(ws, &w, NULL, e);
out:
	if (rc < 0)
		err_prefix(e, "cannot reset worktree '%s' to %.12s", path,
			   commit);
	wt_release(&w);
	return rc;
}

int
worktree_diff(const struct workspace *ws, const char *path, const char *base,
	      int stat, struct buf *out, struct err *e)
{
	struct wt w;
	int rc;

	rc = wt_init(ws, path, &w, e);
	if (!rc)
		rc = ensure_index(ws, &w, e);
	if (!rc)
		rc = wgit(ws, &w, w.index, 1, out, e, "diff", "--no-ext-diff",
			  "--no-textconv", stat ? "--stat" : "--binary", base,
			  NULL);
	wt_release(&w);
	return rc;
}

int
worktree_range_diff(const struct workspace *ws, const char *from,
		    const char *to, struct buf *out, struct err *e)
{
	char *range = xasprintf("%s..%s", from, to);
	int rc = git(ws, NULL, out, e, "diff", "--no-color", "--no-ext-diff",
		     "--no-textconv", range, NULL);

	free(range);
	return rc;
}

int
worktree_changed_paths(const struct workspace *ws, const char *path,
		       const char *from, const char *to, struct strvec *out,
		       struct err *e)
{
	struct buf names = BUF_INIT;
	size_t i = 0;
	int rc;

	(void)path;
	/* --no-renames: a rename is the old path deleted and the new one
	 * added, and both are held to the policy. */
	rc = git(ws, NULL, &names, e, "diff", "--no-ext-diff", "--no-renames",
		 "--name-only", "-z", from, to, NULL);
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
worktree_history_paths(const struct workspace *ws, const char *from,
		       const char *to, struct strvec *paths,
		       struct strvec *commits, struct err *e)
{
	struct buf list = BUF_INIT, names = BUF_INIT;
	char *range = xasprintf("%s..%s", from, to), *save = NULL, *c;
	size_t i;
	int rc;

	rc = git(ws, NULL, &list, e, "rev-list", "--reverse", range, NULL);
	for (c = strtok_r(list.ptr, "\n", &save); !rc && c;
	     c = strtok_r(NULL, "\n", &save)) {
		buf_reset(&names);
		/* -m: a merge's paths against each parent; --root: none
		 * here (from is an ancestor), but never a silent empty */
		rc = git(ws, NULL, &names, e, "diff-tree", "--no-ext-diff",
			 "--no-renames", "--no-commit-id", "-r", "-m",
			 "--root", "--name-only", "-z", c, NULL);
		for (i = 0; !rc && i < names.len;) {
			size_t n = strnlen(names.ptr + i, names.len - i);

			if (n) {
				strvec_pushf(paths, "%.*s", (int)n,
					     names.ptr + i);
				strvec_push(commits, c);
			}
			i += n + 1;
		}
	}
	buf_release(&list);
	buf_release(&names);
	free(range);
	return rc;
}

int
worktree_git_dir(const struct workspace *ws, const char *path, char **out,
		 struct err *e)
{
	struct wt w;
	int rc;

	*out = NULL;
	rc = wt_init(ws, path, &w, e);
	if (rc)
		return rc;
	if (!fs_is_dir(w.admin))
		rc = err_set(e, BATON_ENOTFOUND, "worktree '%s' has no admin "
			     "directory '%s'", path, w.admin);
	else
		*out = xstrdup(w.admin);
	wt_release(&w);
	return rc;
}

/* ---- baton clean: what is safe to remove ---------------------------------- */

int
worktree_dirty(const struct workspace *ws, const char *path, int *dirty_out,
	       struct err *e)
{
	struct buf tip = BUF_INIT, tree = BUF_INIT, old_tree = BUF_INIT;
	char *spec = NULL, *index = NULL;
	struct wt w;
	int rc;

	rc = wt_init(ws, path, &w, e);
	if (rc)
		return rc;
	/* its own index, so that the run's stays as its driver left it;
	 * git reads the files through baton's git (no hook, no fsmonitor,
	 * the common dir named by baton, never the worktree's .git) */
	index = xasprintf("%s.clean", w.index);
	fs_unlink(index, NULL);
	rc = git(ws, NULL, &tip, e, "rev-parse", "--verify", w.ref, NULL);
	if (!rc) {
		spec = xasprintf("%s^{tree}", tip.ptr);
		rc = git(ws, NULL, &old_tree, e, "rev-parse", spec, NULL);
	}
	if (!rc)
		rc = wgit(ws, &w, index, 0, NULL, e, "read-tree", tip.ptr,
			  NULL);
	if (!rc)
		rc = wgit(ws, &w, index, 0, NULL, e, "add", "--all", NULL);
	if (!rc)
		rc = wgit(ws, &w, index, 0, &tree, e, "write-tree", NULL);
	if (!rc)
		*dirty_out = strcmp(tree.ptr, old_tree.ptr) != 0;
	else
		err_prefix(e, "cannot read worktree '%s'", path);
	fs_unlink(index, NULL);
	free(index);
	free(spec);
	buf_release(&tip);
	buf_release(&tree);
	buf_release(&old_tree);
	wt_release(&w);
	return rc;
}

/* A run branch's name: "baton/" then what a ref may hold, no option. */
static int
run_branch_ok(const struct workspace *ws, const char *branch)
{
	struct err ignored = ERR_INIT;
	char *ref;
	int rc;

	if (!branch || strncmp(branch, "baton/", 6) || !branch[6] ||
	    strchr(branch, '\n'))
		return 0;
	ref = xasprintf("refs/heads/%s", branch);
	rc = git(ws, NULL, NULL, &ignored, "check-ref-format", ref, NULL);
	free(ref);
	return rc == 0;
}

int
branch_unshared(const struct workspace *ws, const char *branch,
		const char *base, char **tip_out, long *count_out,
		struct err *e)
{
	struct buf tip = BUF_INIT, n = BUF_INIT;
	char *ref = NULL, *not_base = NULL;
	int rc;

	*tip_out = NULL;
	*count_out = 0;
	if (!run_branch_ok(ws, branch))
		return err_set(e, BATON_EINVAL,
			       "'%s' is not a run branch of baton", branch);
	ref = xasprintf("refs/heads/%s", branch);
	if (git(ws, NULL, &tip, NULL, "rev-parse", "-q", "--verify", ref,
		NULL)) {
		rc = 0; /* no such branch: nothing to keep or remove */
		goto out;
	}
	/* commits of the branch on no remote-tracking ref and not in the
	 * base (every argument is a full ref or a hash: no option) */
	if (base) {
		struct buf b = BUF_INIT;

		if (!git(ws, NULL, &b, NULL, "rev-parse", "-q", "--verify",
			 base, NULL))
			not_base = buf_detach(&b, NULL);
		buf_release(&b);
	}
	rc = git(ws, NULL, &n, e, "rev-list", "--count", tip.ptr, "--not",
		 "--remotes", not_base, NULL); /* not_base NULL ends the list */
	if (rc)
		goto out;
	*count_out = strtol(n.ptr, NULL, 10);
	*tip_out = buf_detach(&tip, NULL);
out:
	free(ref);
	free(not_base);
	buf_release(&tip);
	buf_release(&n);
	return rc;
}

int
branch_delete(const struct workspace *ws, const char *branch,
	      const char *tip, struct err *e)
{
	char *ref;
	int rc;

	if (!run_branch_ok(ws, branch))
		return err_set(e, BATON_EINVAL,
			       "'%s' is not a run branch of baton", branch);
	ref = xasprintf("refs/heads/%s", branch);
	/* compare-and-swap: only when it still points at what was judged */
	rc = git(ws, NULL, NULL, e, "update-ref", "-m", "baton: clean", "-d",
		 ref, tip, NULL);
	free(ref);
	return rc;
}

int
workspace_watch_begin(const struct workspace *ws, const char *run_id)
{
	char *path = xasprintf("%s/runs/%s/watch", ws->dir, run_id);
	int fd;

	fd = fs_open_nofollow(path, O_RDWR | O_CREAT, 0644, NULL);
	free(path);
	if (fd < 0)
		return -1;
	/* shared: any number of watchers; clean's exclusive try fails */
	if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void
workspace_watch_end(int fd)
{
	if (fd >= 0)
		close(fd); /* the flock goes with it */
}

int
workspace_watched(const struct workspace *ws, const char *run_id,
		  int *fd_out)
{
	char *path = xasprintf("%s/runs/%s/watch", ws->dir, run_id);
	int fd;

	*fd_out = -1;
	fd = fs_open_nofollow(path, O_RDWR | O_CREAT, 0644, NULL);
	free(path);
	if (fd < 0)
		return 0; /* no run folder: nobody can watch through it */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return 1;
	}
	*fd_out = fd;
	return 0;
}
