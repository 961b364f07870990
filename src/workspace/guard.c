/*
 * What an agent call did that the checkpoint's diff does not show.
 *
 * A checkpoint sees what git commits: tracked and untracked files, not
 * ignored ones (a script planted in a gitignored build/ that validation
 * then runs), not where a symbolic link points, not the repository's
 * other refs. So around each agent call baton takes two snapshots and
 * compares them:
 *
 *   before the call                      after the call
 *   ───────────────                      ──────────────
 *   every non-directory of the work      the same walk: what appeared,
 *   tree by lstat (never following a     changed or went -> *changed,
 *   link; the top .git is skipped)       for the caller's policy; a
 *                                        link made or changed that
 *                                        leaves the work tree -> breach
 *   the common git dir's config, hooks,  any change -> breach
 *   info/ and alternates
 *   every ref of the repository          any that moved, but run
 *                                        branches (baton's checkpoints,
 *                                        an agent that commits) and
 *                                        landings -> breach
 *                                        the worktree's .git file and
 *                                        admin HEAD rewritten -> breach
 *                                        (and put back)
 *
 * Under the sandbox most of these cannot happen (the repository is read
 * only there); without it they are what tells a person the agent went
 * where it should not.
 */
#include "util/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/limits.h"
#include "util/log.h"
#include "util/strvec.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"
#include "workspace/workspace_int.h"

/* Entries of a work tree compared, at most; past it only refs count. */
#define GUARD_MAX_ENTRIES (1000 * 1000)
/* Directory depth walked, at most. */
#define GUARD_MAX_DEPTH 64

struct guard_entry {
	char *path;	/* relative to the work tree */
	char *target;	/* a link's target, else NULL */
	mode_t mode;
	off_t size;
	ino_t ino;
	struct timespec mtime, ctime;
};

static int
entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct guard_entry *)a)->path,
		      ((const struct guard_entry *)b)->path);
}

static void
entry_add(struct worktree_guard *g, const char *path, const struct stat *st,
	  char *target)
{
	struct guard_entry *x;

	if (g->nr == g->alloc) {
		g->alloc = g->alloc ? g->alloc * 2 : 256;
		g->entries = xrealloc(g->entries,
				      g->alloc * sizeof(*g->entries));
	}
	x = &g->entries[g->nr++];
	x->path = xstrdup(path);
	x->target = target;
	x->mode = st->st_mode;
	x->size = st->st_size;
	x->ino = st->st_ino;
	x->mtime = st->st_mtim;
	x->ctime = st->st_ctim;
}

/*
 * Walks the directory open at dfd (prefix: its path in the work tree,
 * "" at the top), adding every entry that is not a directory. Nothing is
 * followed: directories are opened with O_NOFOLLOW relative to their
 * parent, links are read, not entered.
 */
static void
walk(struct worktree_guard *g, int dfd, const char *prefix, int depth)
{
	struct buf path = BUF_INIT;
	struct dirent *de;
	struct stat st;
	DIR *d = fdopendir(dfd);

	if (!d) {
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		const char *name = de->d_name;

		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		if (!*prefix && !strcmp(name, ".git"))
			continue;
		if (g->nr >= GUARD_MAX_ENTRIES) {
			g->truncated = 1;
			break;
		}
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		buf_reset(&path);
		buf_addf(&path, "%s%s%s", prefix, *prefix ? "/" : "", name);
		if (S_ISDIR(st.st_mode)) {
			int sub = depth < GUARD_MAX_DEPTH ?
					  openat(dirfd(d), name,
						 O_RDONLY | O_DIRECTORY |
							 O_NOFOLLOW |
							 O_CLOEXEC) :
					  -1;

			if (sub >= 0)
				walk(g, sub, path.ptr, depth + 1);
			else
				g->truncated = 1;
			continue;
		}
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlinkat(dirfd(d), name, target,
					       sizeof(target) - 1);

			target[n < 0 ? 0 : n] = '\0';
			entry_add(g, path.ptr, &st, xstrdup(target));
		} else {
			entry_add(g, path.ptr, &st, NULL);
		}
	}
	closedir(d);
	buf_release(&path);
}

/*
 * The files of the common git dir that decide what git runs and sees,
 * "<name> <stat>" a line: its config, hooks, info/ (attributes,
 * exclude, grafts) and objects/info/alternates. An agent that changed
 * one has planted something for the next git to trip over, the user's
 * included.
 */
static void
list_repo_files(const struct workspace *ws, struct buf *out)
{
	static const char *const dirs[] = { "hooks", "info" };
	static const char *const files[] = { "config",
					     "objects/info/alternates" };
	struct strvec names = STRVEC_INIT;
	struct dirent *de;
	struct stat st;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(files); i++)
		strvec_push(&names, files[i]);
	for (i = 0; i < ARRAY_SIZE(dirs); i++) {
		char *dir = xasprintf("%s/%s", ws->common, dirs[i]);
		DIR *d = opendir(dir);

		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.')
				strvec_pushf(&names, "%s/%s", dirs[i],
					     de->d_name);
		if (d)
			closedir(d);
		free(dir);
	}
	for (i = 0; i < names.nr; i++) {
		char *path = xasprintf("%s/%s", ws->common, names.v[i]);

		if (lstat(path, &st) == 0)
			buf_addf(out, "%s %o %lld %lld.%09ld %lld.%09ld\n",
				 names.v[i], (unsigned)st.st_mode,
				 (long long)st.st_size,
				 (long long)st.st_mtim.tv_sec,
				 st.st_mtim.tv_nsec,
				 (long long)st.st_ctim.tv_sec,
				 st.st_ctim.tv_nsec);
		free(path);
	}
	strvec_clear(&names);
}

/* The repository's refs, "<object> <name>" a line, sorted by name. */
static int
list_refs(const struct workspace *ws, struct buf *out, struct err *e)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct git_at at = { .read_only = 1 };
	int rc;

	workspace__git_start(ws, &at, &o);
	strvec_pushl(&o.argv, "for-each-ref",
		     "--format=%(objectname) %(refname)", NULL);
	o.timeout_ms = 60 * 1000;
	o.tail_max = BUF_MAX_GIT_OUTPUT + 1;
	rc = spawn_run(&o, &r, e);
	if (!rc && (r.status || r.timed_out ||
		    r.out_bytes > BUF_MAX_GIT_OUTPUT))
		rc = err_set(e, BATON_ECHILD, "cannot list the refs of '%s': "
			     "%s", ws->common,
			     r.err.len ? r.err.ptr : "git failed");
	if (!rc)
		buf_add(out, r.out.ptr, r.out.len);
	spawn_result_release(&r);
	spawn_opts_release(&o);
	return rc;
}

int
worktree_guard_begin(const struct workspace *ws, const char *path,
		     struct worktree_guard *g, struct err *e)
{
	int fd;

	worktree_guard_release(g);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "cannot open worktree '%s': %s",
			       path, strerror(errno));
	walk(g, fd, "", 0);
	if (g->truncated)
		log_warn("worktree %s: more than %d entries or %d levels; "
			 "files beyond are not compared", path,
			 GUARD_MAX_ENTRIES, GUARD_MAX_DEPTH);
	qsort(g->entries, g->nr, sizeof(*g->entries), entry_cmp);
	list_repo_files(ws, &g->repo_files);
	return list_refs(ws, &g->refs, e);
}

static int
same_entry(const struct guard_entry *a, const struct guard_entry *b)
{
	return a->mode == b->mode && a->size == b->size && a->ino == b->ino &&
	       a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec &&
	       !strcmp(a->target ? a->target : "", b->target ? b->target : "");
}

/*
 * Whether the link at path (relative to the work tree root) leaves it:
 * its target is absolute and not under root, or climbs above the top.
 * Lexical, so a dangling link (writing through one creates its target)
 * counts as well; a target through another link in the tree is resolved
 * by realpath when it exists.
 */
static int
link_leaves(const char *root, const char *path, const char *target)
{
	char real_root[PATH_MAX], real[PATH_MAX];
	int depth = 0, leaves = 0;
	const char *p;
	char *full;

	if (target[0] == '/') {
		size_t n = strlen(root);

		if (strncmp(target, root, n) || (target[n] && target[n] != '/'))
			return 1;
	} else {
		for (p = path; (p = strchr(p, '/')); p++)
			depth++;
		for (p = target; *p && !leaves;) {
			size_t n = strcspn(p, "/");

			if (n == 2 && !strncmp(p, "..", 2))
				leaves = --depth < 0;
			else if (n && !(n == 1 && *p == '.'))
				depth++;
			p += n + (p[n] == '/');
		}
		if (leaves)
			return 1;
	}
	full = xasprintf("%s/%s", root, path);
	if (realpath(root, real_root) && realpath(full, real)) {
		size_t n = strlen(real_root);

		leaves = strncmp(real, real_root, n) ||
			 (real[n] && real[n] != '/');
	}
	free(full);
	return leaves;
}

/* One "<object> <name>" line of a ref listing, split in place. */
struct ref_line {
	const char *sha, *name;
};

static size_t
split_refs(char *text, struct ref_line **out)
{
	size_t nr = 0, alloc = 0;
	char *line, *save = NULL;
	struct ref_line *v = NULL;

	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');

		if (!sp)
			continue;
		*sp = '\0';
		if (nr == alloc) {
			alloc = alloc ? alloc * 2 : 64;
			v = xrealloc(v, alloc * sizeof(*v));
		}
		v[nr].sha = line;
		v[nr++].name = sp + 1;
	}
	*out = v;
	return nr;
}

/*
 * A ref that may move while an agent works: the branches of other runs
 * (their checkpoints, by baton), what a worker host fetched, and the
 * run's own branch (agents that commit, aider among them, move it; the
 * checkpoint holds everything since the last one to the policy).
 */
static int
may_move(const char *name)
{
	return !strncmp(name, "refs/heads/baton/", 17) ||
	       !strncmp(name, "refs/remotes/baton/", 19);
}

static void
ref_breach(const char *name, const char *from, const char *to,
	   const struct worktree_guard_check *c, struct strvec *breaches)
{
	if (may_move(name))
		return;
	if (to && c->landed && c->landed(c->arg, to))
		return;
	if (!from)
		strvec_pushf(breaches, "the ref %s was created (at %.12s)",
			     name, to);
	else if (!to)
		strvec_pushf(breaches, "the ref %s was deleted (it was at "
			     "%.12s)", name, from);
	else
		strvec_pushf(breaches, "the ref %s was moved from %.12s to "
			     "%.12s", name, from, to);
}

static void
compare_refs(char *before, char *after, const struct worktree_guard_check *c,
	     struct strvec *breaches)
{
	struct ref_line *a = NULL, *b = NULL;
	size_t na = split_refs(before, &a), nb = split_refs(after, &b);
	size_t i = 0, j = 0;

	while (i < na || j < nb) {
		int cmp = i == na ? 1 : j == nb ? -1 :
						  strcmp(a[i].name, b[j].name);

		if (cmp < 0) {
			ref_breach(a[i].name, a[i].sha, NULL, c, breaches);
			i++;
		} else if (cmp > 0) {
			ref_breach(b[j].name, NULL, b[j].sha, c, breaches);
			j++;
		} else {
			if (strcmp(a[i].sha, b[j].sha))
				ref_breach(a[i].name, a[i].sha, b[j].sha, c,
					   breaches);
			i++;
			j++;
		}
	}
	free(a);
	free(b);
}

/* The name of a list_repo_files line, as a length. */
static size_t
file_name_len(const char *line)
{
	return strcspn(line, " \n");
}

/* Each line of a that b lacks (or has otherwise), as a breach. */
static void
files_missing(const char *a, const char *b, const char *what,
	      struct strvec *breaches)
{
	const char *line, *hit;

	for (line = a; *line; line = strchr(line, '\n') + 1) {
		size_t n = strcspn(line, "\n"), k = file_name_len(line);
		int same = 0;

		for (hit = b; *hit && !same; hit = strchr(hit, '\n') + 1)
			same = file_name_len(hit) == k &&
			       !strncmp(hit, line, k) &&
			       strcspn(hit, "\n") == n &&
			       !strncmp(hit, line, n);
		if (!same)
			strvec_pushf(breaches, "the repository's %.*s was %s",
				     (int)k, line, what);
		if (!line[n])
			break;
	}
}

static void
compare_repo_files(const char *before, const char *after,
		   struct strvec *breaches)
{
	if (!strcmp(before, after))
		return;
	/* each name once: "changed" for one in both, else made or removed */
	files_missing(after, before, "created or changed", breaches);
	files_missing(before, after, "removed or changed", breaches);
}

int
worktree_guard_end(const struct workspace *ws, const char *path,
		   struct worktree_guard *g,
		   const struct worktree_guard_check *c,
		   struct strvec *changed, struct strvec *breaches,
		   struct err *e)
{
	struct worktree_guard now = WORKTREE_GUARD_INIT;
	size_t i = 0, j = 0;
	int rc;

	rc = worktree_guard_begin(ws, path, &now, e);
	if (rc)
		goto out;
	while (!g->truncated && !now.truncated && (i < g->nr || j < now.nr)) {
		const struct guard_entry *x = i < g->nr ? &g->entries[i] : NULL;
		const struct guard_entry *y = j < now.nr ? &now.entries[j] :
							    NULL;
		int cmp = !x ? 1 : !y ? -1 : strcmp(x->path, y->path);

		if (cmp < 0) {
			strvec_push(changed, x->path);
			i++;
			continue;
		}
		if (!y)
			break; /* cmp > 0 needs a y */
		if (cmp == 0 && same_entry(x, y)) {
			i++;
			j++;
			continue;
		}
		strvec_push(changed, y->path);
		if (y->target && link_leaves(path, y->path, y->target))
			strvec_pushf(breaches, "the symbolic link %s points "
				     "out of the worktree (to %s)", y->path,
				     y->target);
		if (cmp == 0)
			i++;
		j++;
	}
	compare_refs(g->refs.ptr, now.refs.ptr, c, breaches);
	compare_repo_files(g->repo_files.ptr, now.repo_files.ptr, breaches);
	rc = worktree_restore(ws, path, breaches, e);
out:
	worktree_guard_release(&now);
	return rc;
}

void
worktree_guard_release(struct worktree_guard *g)
{
	size_t i;

	for (i = 0; i < g->nr; i++) {
		free(g->entries[i].path);
		free(g->entries[i].target);
	}
	FREE_AND_NULL(g->entries);
	g->nr = g->alloc = 0;
	g->truncated = 0;
	buf_release(&g->refs);
	buf_release(&g->repo_files);
}
