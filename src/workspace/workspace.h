/*
 * The workspace: the repository baton serves, its .baton/ folder, one git
 * worktree and branch per run, stage checkpoints, diffs, and the runner
 * for the project's own validation commands. Git is driven through
 * util/spawn with argv arrays; nothing here decides lifecycle.
 *
 *   REPO/.baton/config.yaml        the repository's config
 *   REPO/.baton/baton.db           the SQLite store (default)
 *   REPO/.baton/runs/<id>/         the run folder: artifacts, events.jsonl,
 *                                  calls/ (each agent call's prompt and
 *                                  raw output), lock
 *   REPO/.baton/worktrees/<id>/    the run's worktree, on branch baton/<id>
 */
#ifndef BATON_WORKSPACE_WORKSPACE_H
#define BATON_WORKSPACE_WORKSPACE_H

#include <stddef.h>

#include "util/spawn.h"

struct buf;
struct err;
struct sandbox;
struct strvec;

struct workspace {
	char *repo;  /* top of the main worktree */
	char *dir;   /* repo/.baton */
	int identity; /* git needs user.name/email given on the command line */
};

/*
 * Finds the repository containing cwd (NULL: the current directory).
 * BATON_ENOREPO with a message when cwd is not inside a git work tree.
 */
int workspace_open(const char *cwd, struct workspace *out, struct err *e);
void workspace_release(struct workspace *ws);
/*
 * Checks whether git knows who commits here; if not, checkpoints commit
 * as "baton <baton@localhost>". Costs a git call, so only commands that
 * drive runs make it.
 */
void workspace_detect_identity(struct workspace *ws);

/* New strings the caller frees: the run folder, the worktree path. */
char *workspace_run_dir(const struct workspace *ws, const char *run_id);
char *workspace_worktree_dir(const struct workspace *ws, const char *run_id);

/*
 * The commit base_ref (NULL: HEAD) names, as a full hash the caller frees.
 * BATON_EINVAL with a message saying so when the repository has no
 * commits yet or base_ref is not a commit.
 */
int worktree_resolve_base(const struct workspace *ws, const char *base_ref,
			  char **commit_out, struct err *e);

/*
 * Creates the run's worktree at .baton/worktrees/<id> on a new branch
 * baton/<id> from base_ref (NULL: HEAD). Idempotent: when both already
 * exist (a resumed run) they are reused. Fills the three outputs (caller
 * frees) on success.
 */
int worktree_create(const struct workspace *ws, const char *run_id,
		    const char *base_ref, char **path_out, char **branch_out,
		    char **base_commit_out, struct err *e);

/*
 * Commits everything in the worktree (git add -A) with message, if there
 * is anything to commit. *commit_out gets HEAD afterwards (caller frees);
 * *changed_out (may be NULL) is set to 1 when a commit was made.
 */
int worktree_checkpoint(const struct workspace *ws, const char *path,
			const char *message, char **commit_out,
			int *changed_out, struct err *e);

/*
 * The paths that differ between commits from and to (git diff
 * --name-only), appended to out.
 */
int worktree_changed_paths(const struct workspace *ws, const char *path,
			   const char *from, const char *to,
			   struct strvec *out, struct err *e);

/* The worktree's own git directory (.git/worktrees/<id>); caller frees. */
int worktree_git_dir(const struct workspace *ws, const char *path,
		     char **out, struct err *e);

/* Resets the worktree to commit: reset --hard, then clean -fd. */
int worktree_reset(const struct workspace *ws, const char *path,
		   const char *commit, struct err *e);

/*
 * Appends the diff of the worktree against base (committed and
 * uncommitted changes, binary-safe) to out; stat: "--stat" form.
 */
int worktree_diff(const struct workspace *ws, const char *path,
		  const char *base, int stat, struct buf *out, struct err *e);

/*
 * Hooks that let a caller watch and stop long children (abort, ticks),
 * and the sandbox they run in (may be NULL).
 */
struct workspace_hooks {
	int wake_fd;
	int tick_ms;
	spawn_event_cb *on_event;
	void *arg;
	const struct sandbox *sandbox;
};

struct validate_result {
	int passed;	/* every command exited 0 */
	int stopped;	/* a hook stopped it (abort) */
	struct buf summary; /* failures, for the fixer's prompt */
};

/*
 * Runs each command with sh -c in the worktree, one after another (a
 * failing command does not stop the rest), each with timeout_s seconds,
 * and writes json_path atomically:
 *   {"passed": bool, "commands": [{"command", "exit_code", "duration_ms",
 *    "timed_out", "output_tail"}]}
 * Full output of every command goes to log_path. Returns 0 when the
 * commands ran (read r->passed), negative when they could not be run.
 */
int validate_run(const char *worktree, const struct strvec *commands,
		 int timeout_s, const char *json_path, const char *log_path,
		 const struct workspace_hooks *hooks,
		 struct validate_result *r, struct err *e);
void validate_result_release(struct validate_result *r);

#endif
