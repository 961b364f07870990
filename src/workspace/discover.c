/*
 * Finding the repository without running git: every baton command starts
 * by finding the work tree it was started in and the repository's common
 * git directory, and `git rev-parse` for that was a fork and exec (and
 * git's own start-up) on every start. This walks up from the current
 * directory the way git's discovery does, for the layouts whose answer is
 * certain:
 *
 *   DIR/.git/                  a repository: DIR is the top, DIR/.git the
 *                              common git directory
 *   DIR/.git  "gitdir: G"      a linked worktree (git worktree add): G is
 *                              its admin directory, G/commondir names the
 *                              common one (without it G is the common one)
 *
 * Anything else is left to git (workspace_open falls back to rev-parse),
 * so the answer never differs from git's: GIT_DIR, GIT_WORK_TREE,
 * GIT_COMMON_DIR, GIT_CEILING_DIRECTORIES and
 * GIT_DISCOVERY_ACROSS_FILESYSTEM in the environment; a directory that is
 * itself a git directory (inside .git, a bare repository); a .git that is
 * a link, malformed, or owned by someone else (safe.directory); a config
 * that sets core.worktree, core.bare or includes other files; a walk that
 * would cross into another filesystem or reaches / without a repository.
 *
 * A run's worktree (REPO/.baton/worktrees/<id>/ and everything in it) is
 * written by the agent, its .git file included, and baton never takes
 * its repository from there: a baton started inside one is refused,
 * naming the repository to run it in, before any file in the worktree is
 * read (as before, when rev-parse found the worktree and baton then
 * looked for a .baton/ in it, which the agent could have planted).
 */
#include "util/compat.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/xalloc.h"
#include "workspace/workspace_int.h"

/* What is read of a .git file, a commondir file and a config, at most. */
#define GITFILE_MAX 4096
#define CONFIG_MAX (256 * 1024)

static const char *const git_env[] = {
	"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR",
	"GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM",
	"GIT_OBJECT_DIRECTORY",
};

/* 1 if path is a directory (not a link) owned by us. */
static int
own_dir(const char *path)
{
	struct stat st;

	return !lstat(path, &st) && S_ISDIR(st.st_mode) &&
	       st.st_uid == geteuid();
}

/* What git's is_git_directory() asks: HEAD, objects/ and refs/. */
static int
is_git_dir(const char *dir, const char *common)
{
	char *head = xasprintf("%s/HEAD", dir);
	char *objects = xasprintf("%s/objects", common);
	char *refs = xasprintf("%s/refs", common);
	struct stat st;
	int yes = !lstat(head, &st) && S_ISREG(st.st_mode) &&
		  fs_is_dir(objects) && fs_is_dir(refs);

	free(head);
	free(objects);
	free(refs);
	return yes;
}

/* Whether anything but "HEAD" exists at dir/HEAD (git would stop). */
static int
looks_like_git_dir(const char *dir)
{
	char *head = xasprintf("%s/HEAD", dir);
	int yes = fs_exists(head);

	free(head);
	return yes;
}

/*
 * 1 if the repository's config leaves the top where .git is: no
 * core.worktree, no core.bare other than false, no include; 0 if git
 * must decide. Line-wise and on the safe side: any key named worktree...
 * or bare in any section counts.
 */
static int
config_is_plain(const char *common)
{
	char *path = xasprintf("%s/config", common);
	struct buf cfg = BUF_INIT;
	struct err ignored = ERR_INIT;
	const char *line, *end;
	int plain = 0;

	if (fs_read(path, &cfg, CONFIG_MAX, &ignored) < 0)
		goto out;
	plain = 1;
	for (line = cfg.ptr; plain && *line; line = *end ? end + 1 : end) {
		const char *p = line;

		end = strchrnul(line, '\n');
		while (p < end && isspace((unsigned char)*p))
			p++;
		if (!strncasecmp(p, "worktree", 8) ||
		    !strncasecmp(p, "[include", 8)) {
			plain = 0;
		} else if (!strncasecmp(p, "bare", 4)) {
			p += 4;
			while (p < end && (*p == ' ' || *p == '\t'))
				p++;
			if (p < end && *p == '=')
				p++;
			while (p < end && (*p == ' ' || *p == '\t'))
				p++;
			plain = end - p >= 5 && !strncasecmp(p, "false", 5);
			for (p += plain ? 5 : 0; plain && p < end; p++)
				if (*p == '#' || *p == ';')
					break;
				else if (!isspace((unsigned char)*p))
					plain = 0;
		}
	}
out:
	buf_release(&cfg);
	free(path);
	return plain;
}

/*
 * The one line of a small file, without its newline, made absolute
 * against base and resolved (realpath): NULL if unreadable, empty or
 * unresolvable. prefix, when not NULL, must start the line.
 */
static char *
read_path_file(const char *path, const char *prefix, const char *base)
{
	struct buf b = BUF_INIT;
	struct err ignored = ERR_INIT;
	char *val, *abs = NULL, *real = NULL;
	size_t n = prefix ? strlen(prefix) : 0;

	if (fs_read_nofollow(path, &b, GITFILE_MAX, &ignored) < 0)
		goto out;
	buf_rtrim(&b);
	if (strlen(b.ptr) != b.len || (prefix && strncmp(b.ptr, prefix, n)))
		goto out;
	val = b.ptr + n;
	if (!*val || strchr(val, '\n'))
		goto out;
	abs = *val == '/' ? xstrdup(val) : xasprintf("%s/%s", base, val);
	real = realpath(abs, NULL);
out:
	free(abs);
	buf_release(&b);
	return real;
}

/* Refuses a cwd inside REPO/.baton/worktrees/<id>/, naming REPO. */
static int
refuse_run_worktree(const char *cwd, const char *path, struct err *e)
{
	static const char mark[] = "/.baton/worktrees/";
	const char *at;

	for (at = strstr(path, mark); at; at = strstr(at + 1, mark)) {
		const char *id = at + sizeof(mark) - 1;
		char *repo, *git, *dir;
		int baton;

		if (!*id || *id == '/')
			continue;
		repo = xstrndup(path, at - path);
		git = xasprintf("%s/.git", *repo ? repo : "");
		dir = xasprintf("%s/.baton", *repo ? repo : "");
		baton = fs_exists(git) && fs_is_dir(dir);
		free(git);
		free(dir);
		if (baton) {
			err_set(e, BATON_ENOREPO,
				"'%s' is inside the worktree of run %.*s, which "
				"its agent writes: baton takes no repository "
				"from there (run baton in '%s')",
				cwd, (int)strcspn(id, "/"), id,
				*repo ? repo : "/");
			free(repo);
			return BATON_ENOREPO;
		}
		free(repo);
	}
	return 0;
}

/*
 * dir/.git: 1 and *top, *common when it settles the question, 0 when
 * there is no .git (keep walking), -1 when git must decide.
 */
static int
probe(const char *dir, char **top, char **common)
{
	char *dotgit = xasprintf("%s/.git", dir);
	char *gitdir = NULL, *cdir = NULL, *cfile = NULL;
	struct stat st;
	int rc = -1;

	if (lstat(dotgit, &st) < 0) {
		rc = errno == ENOENT ? 0 : -1;
		goto out;
	}
	if (st.st_uid != geteuid() || !own_dir(dir))
		goto out;
	if (S_ISDIR(st.st_mode)) {
		gitdir = xstrdup(dotgit);
		cdir = xstrdup(dotgit);
	} else if (S_ISREG(st.st_mode)) {
		gitdir = read_path_file(dotgit, "gitdir: ", dir);
		if (!gitdir || !own_dir(gitdir))
			goto out;
		cfile = xasprintf("%s/commondir", gitdir);
		if (fs_exists(cfile)) {
			cdir = read_path_file(cfile, NULL, gitdir);
			if (!cdir || !own_dir(cdir))
				goto out;
		} else {
			cdir = xstrdup(gitdir);
		}
	} else {
		goto out;
	}
	if (!is_git_dir(gitdir, cdir) || !config_is_plain(cdir))
		goto out;
	*top = xstrdup(dir);
	*common = cdir;
	cdir = NULL;
	rc = 1;
out:
	free(dotgit);
	free(gitdir);
	free(cdir);
	free(cfile);
	return rc;
}

int
workspace__discover(const char *cwd, char **top, char **common,
		    struct err *e)
{
	char *path = realpath(cwd ? cwd : ".", NULL);
	struct stat st;
	dev_t dev;
	size_t i;
	int rc = 0;

	if (!path || stat(path, &st) < 0)
		goto out;
	rc = refuse_run_worktree(cwd ? cwd : ".", path, e);
	if (rc < 0)
		goto out;
	for (i = 0; i < sizeof(git_env) / sizeof(git_env[0]); i++)
		if (getenv(git_env[i]))
			goto out;
	dev = st.st_dev;
	for (;;) {
		char *slash;
		int found = probe(*path ? path : "/", top, common);

		if (found) {
			rc = found > 0;
			goto out;
		}
		if (looks_like_git_dir(*path ? path : "/") || !*path)
			goto out;
		slash = strrchr(path, '/');
		*slash = '\0';
		if (stat(*path ? path : "/", &st) < 0 || st.st_dev != dev)
			goto out;
	}
out:
	free(path);
	return rc;
}
