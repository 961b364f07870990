/*
 * What the workspace's files share: baton's own git (git.c), which every
 * git call of worktree.c and merge.c starts from.
 */
#ifndef BATON_WORKSPACE_WORKSPACE_INT_H
#define BATON_WORKSPACE_WORKSPACE_INT_H

struct err;
struct spawn_opts;
struct workspace;

/*
 * Where a git call works. A run's worktree is never entered the way a
 * user's git enters it: its .git file, its admin directory (HEAD, index)
 * and everything else in it may have been written by the agent. baton
 * names the repository's common git directory and the work tree itself
 * (--git-dir, --work-tree), and keeps an index of its own.
 */
struct git_at {
	const char *dir;       /* -C dir: the main checkout or baton's own
				  merge worktree; NULL: the common git dir
				  (with work_tree: that work tree) */
	const char *work_tree; /* a run's worktree, seen through the common
				  git dir */
	const char *index;     /* GIT_INDEX_FILE; NULL: git's default */
	int read_only;	       /* GIT_OPTIONAL_LOCKS=0: never rewrites the
				  index behind a concurrent writer */
	const char *in;	       /* written to git's stdin (a commit message,
				  which could be too long for an argument);
				  NULL: none */
};

/*
 * Fills o->argv with "git" and the options every baton git call takes,
 * and o->env and o->cwd as at asks; the caller appends the subcommand.
 * Whatever the repository's config or an agent's files say, the call
 * runs no hook (core.hooksPath=/dev/null), no fsmonitor, and ignores
 * replace refs and grafts (--no-replace-objects, GIT_NO_REPLACE_OBJECTS,
 * GIT_GRAFT_FILE=/dev/null). It never prompts. ws may be NULL before the workspace is open.
 */
void workspace__git_start(const struct workspace *ws, const struct git_at *at,
			  struct spawn_opts *o);

/*
 * Finds the top of the work tree containing cwd (NULL: ".") and the
 * repository's common git directory without running git (discover.c),
 * for the layouts whose answer is certain. Returns 1 with *top and
 * *common (absolute, real paths, the caller's to free), 0 when git must
 * answer instead (an unusual layout or environment, or no repository
 * found), or BATON_ENOREPO with a message when cwd is inside a run's
 * worktree, whose files the agent writes and baton never follows.
 */
int workspace__discover(const char *cwd, char **top, char **common,
			struct err *e);

#endif
