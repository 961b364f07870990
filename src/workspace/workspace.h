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
 *   REPO/.baton/space.reserve      room held back for a full disk
 */
#ifndef BATON_WORKSPACE_WORKSPACE_H
#define BATON_WORKSPACE_WORKSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/spawn.h"

struct buf;
struct err;
struct sandbox;
struct strvec;

struct workspace {
	char *repo;  /* top of the main worktree */
	char *dir;   /* repo/.baton */
	char *common; /* the repository's common git dir, absolute: every
			 git call in a run's worktree goes through it */
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

/*
 * Serialises `git worktree` bookkeeping (add, prune) between processes:
 * an flock on .baton/worktrees.lock. Returns the fd to pass to unlock, or
 * a negative error.
 */
int workspace_lock_worktrees(const struct workspace *ws, struct err *e);
void workspace_unlock_worktrees(int fd);
/*
 * With the worktrees lock held: removes the admin entries a `git worktree
 * add` killed halfway left (git refuses every later add while one is
 * there), then `git worktree prune`.
 */
void worktree_repair_admin(const struct workspace *ws);

/* New strings the caller frees: the run folder, the worktree path. */
char *workspace_run_dir(const struct workspace *ws, const char *run_id);
char *workspace_worktree_dir(const struct workspace *ws, const char *run_id);

/*
 * The lowest run number a new run may take in this repository: one past
 * the highest that any run folder (.baton/runs/r<N>-*), worktree
 * (.baton/worktrees/r<N>-*) or run branch (refs/heads/baton/r<N>-*) has,
 * whichever store made them. Two stores in one repository (a second
 * --store, an emptied baton.db) so never hand out an id that names
 * another run's branch or folder.
 */
int workspace_next_free_seq(const struct workspace *ws, int64_t *out,
			    struct err *e);
/*
 * How many run folders (r<N>-*) .baton/runs/ holds; the first one found
 * goes to *first_out (caller frees; may stay NULL) when first_out is not
 * NULL.
 */
size_t workspace_count_runs(const struct workspace *ws, char **first_out);
/*
 * Makes the folder of a new run, .baton/runs/<run_id>, which must not
 * exist: a run never takes over another's folder. -EEXIST, naming it,
 * when it exists.
 */
int workspace_claim_run_dir(const struct workspace *ws, const char *run_id,
			    struct err *e);

/*
 * port.c: the TCP port on 127.0.0.1 of run_id's worktree (BATON_PORT),
 * claimed on first use and kept in .baton/runs/<id>/port, so a resumed
 * run keeps it; the claim (.baton/ports/<port>, made with O_EXCL) keeps
 * two runs, even of two processes allocating at once, from sharing one.
 * workspace_port gets or allocates it (BATON_EBUSY when no free port
 * could be claimed); workspace_port_get only reads it (0: none);
 * workspace_port_release drops the claim (the worktree was removed).
 */
int workspace_port(const struct workspace *ws, const char *run_id, int *out,
		   struct err *e);
int workspace_port_get(const struct workspace *ws, const char *run_id);
void workspace_port_release(const struct workspace *ws, const char *run_id);

/*
 * The space held back in .baton/space.reserve, so that a driver that
 * finds the disk full can give it back and still record that its run is
 * interrupted (the store usually lives in .baton/ too).
 */
#define WORKSPACE_RESERVE_BYTES (1024 * 1024)
/* Makes the reserve if it is not there; best effort, quietly. */
void workspace_reserve_space(const struct workspace *ws);
/* Deletes the reserve; 1 if there was one. */
int workspace_release_space(const struct workspace *ws);

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
 * exist (a resumed run) they are reused. The branch is made by
 * compare-and-swap and never taken over: -EEXIST, naming it, when it
 * exists but this run did not make it. Fills the three outputs (caller
 * frees) on success.
 */
int worktree_create(const struct workspace *ws, const char *run_id,
		    const char *base_ref, char **path_out, char **branch_out,
		    char **base_commit_out, struct err *e);

/*
 * Commits everything in the worktree (add --all into baton's own index)
 * with message on the run's branch, if there is anything to commit,
 * without using or moving any HEAD: commit-tree, then update-ref of
 * refs/heads/baton/<id> from its tip to the commit. Puts back the
 * worktree's .git file and admin HEAD should the agent have changed them.
 * *commit_out gets the branch's tip afterwards (caller frees);
 * *changed_out (may be NULL) is set to 1 when a commit was made.
 */
int worktree_checkpoint(const struct workspace *ws, const char *path,
			const char *message, char **commit_out,
			int *changed_out, struct err *e);

/*
 * Appends the diff between commits from and to (git diff from..to) to
 * out, which the caller may cap.
 */
int worktree_range_diff(const struct workspace *ws, const char *from,
			const char *to, struct buf *out, struct err *e);

/*
 * The paths that differ between commits from and to (git diff
 * --name-only --no-renames: a rename gives both names), appended to out.
 */
int worktree_changed_paths(const struct workspace *ws, const char *path,
			   const char *from, const char *to,
			   struct strvec *out, struct err *e);

/*
 * Every path each commit in from..to changed, commit by commit from the
 * oldest (git rev-list, then diff-tree -r -m --no-renames on each: a
 * merge's paths against each parent), appended to paths with the commit
 * beside each in commits. Unlike worktree_changed_paths, a path that a
 * later commit puts back as it was is still listed.
 */
int worktree_history_paths(const struct workspace *ws, const char *from,
			   const char *to, struct strvec *paths,
			   struct strvec *commits, struct err *e);

/*
 * The worktree's admin directory (<common>/worktrees/<id>), named from
 * its path, never read from its .git file; caller frees.
 * BATON_ENOTFOUND when git has no such entry.
 */
int worktree_git_dir(const struct workspace *ws, const char *path,
		     char **out, struct err *e);

/*
 * Resets the worktree and its branch to commit: read-tree --reset -u into
 * baton's index, clean -fd, update-ref (no HEAD is used). The caller
 * owns the worktree (it holds the run's lock): lock files a git killed
 * with the previous driver left (index.lock, HEAD.lock, the branch's
 * ref lock) are removed first.
 */
int worktree_reset(const struct workspace *ws, const char *path,
		   const char *commit, struct err *e);

/*
 * Makes the worktree at path again, on the run's branch (made at commit
 * when even the branch is gone), when git no longer knows it or it is
 * missing or half-made, as worktree_reset does first; *remade_out is set
 * to 1 when it did. A worktree git knows whole is left as it is.
 */
int worktree_remake(const struct workspace *ws, const char *path,
		    const char *commit, int *remade_out, struct err *e);

/*
 * Removes the run's worktree at path (its files, never following a link,
 * and git's admin entry for it) under the worktrees lock; the branch is
 * kept. A missing worktree is no error.
 */
int worktree_remove(const struct workspace *ws, const char *path,
		    struct err *e);

/*
 * baton clean: *dirty_out = 1 when the worktree at path holds what its
 * branch's tip does not (changed, new or deleted files, untracked ones
 * included), read through baton's git with a throwaway index (no hook,
 * no fsmonitor, never the worktree's .git).
 */
int worktree_dirty(const struct workspace *ws, const char *path,
		   int *dirty_out, struct err *e);

/*
 * baton clean: run branch (baton/..., refused otherwise with
 * BATON_EINVAL) has *count_out commits that no remote-tracking ref and
 * not base (a ref or commit; NULL or unknown: none) holds. *tip_out
 * gets its tip (caller frees), NULL when there is no such branch.
 */
int branch_unshared(const struct workspace *ws, const char *branch,
		    const char *base, char **tip_out, long *count_out,
		    struct err *e);

/* Deletes run branch if it still points at tip (update-ref -d). */
int branch_delete(const struct workspace *ws, const char *branch,
		  const char *tip, struct err *e);

/*
 * Someone looks at a run (serve's streams of that run): a shared flock
 * on .baton/runs/<id>/watch, held until workspace_watch_end(fd). -1 when
 * it cannot be had (no run folder, or clean is removing the run).
 */
int workspace_watch_begin(const struct workspace *ws, const char *run_id);
void workspace_watch_end(int fd);
/*
 * 1 when someone watches run_id; else 0, with *fd_out holding the
 * exclusive lock (or -1 without a run folder) that keeps new watchers
 * out until it is closed.
 */
int workspace_watched(const struct workspace *ws, const char *run_id,
		      int *fd_out);

/*
 * Appends the diff of the worktree against base (committed and
 * uncommitted changes, binary-safe) to out; stat: "--stat" form.
 */
int worktree_diff(const struct workspace *ws, const char *path,
		  const char *base, int stat, struct buf *out, struct err *e);

/*
 * Puts back the worktree's .git file and its admin HEAD when they no
 * longer tie it to the run's branch, appending a sentence per file to
 * changed (may be NULL). baton's git never reads them (it names the
 * common git dir itself); they are for the agent's git and the user's.
 */
int worktree_restore(const struct workspace *ws, const char *path,
		     struct strvec *changed, struct err *e);

/* ---- guard.c: what an agent call did that a diff does not show ------- */

struct guard_entry;

/*
 * A snapshot of a run's worktree and of the repository's refs, taken
 * before an agent call and compared after it.
 */
struct worktree_guard {
	struct guard_entry *entries; /* non-directories, by path */
	size_t nr, alloc;
	int truncated;		     /* too many entries: files not compared */
	struct buf refs;	     /* "<object> <name>" lines */
	struct buf repo_files;	     /* config, hooks, info/: "<name> <stat>" */
};

#define WORKTREE_GUARD_INIT { NULL, 0, 0, 0, BUF_INIT, BUF_INIT }

/* What worktree_guard_end holds the refs to. */
struct worktree_guard_check {
	/* 1 if commit is one the merge queue landed (a base branch may
	 * move to it); may be NULL */
	int (*landed)(void *arg, const char *commit);
	void *arg;
};

/*
 * Takes the snapshot: every entry of the work tree at path but
 * directories (by lstat; nothing is followed, the top .git is skipped),
 * and every ref. Replaces what g held. 0, or negative when the worktree
 * cannot be opened or the refs listed.
 */
int worktree_guard_begin(const struct workspace *ws, const char *path,
			 struct worktree_guard *g, struct err *e);

/*
 * Compares the worktree and the refs with g. Appended to changed: every
 * path of the work tree that appeared, changed or went, ignored files
 * included, for the caller to hold to its policy beside the checkpoint's
 * diff. Appended to breaches, a sentence each: a symbolic link made or
 * changed whose target leaves the worktree; a ref created, moved or
 * deleted other than other runs' branches and a landing (c); the common
 * git dir's config, a hook, info/ or alternates changed; the .git file
 * or admin HEAD rewritten (then put back). g is left as it was.
 */
int worktree_guard_end(const struct workspace *ws, const char *path,
		       struct worktree_guard *g,
		       const struct worktree_guard_check *c,
		       struct strvec *changed, struct strvec *breaches,
		       struct err *e);
void worktree_guard_release(struct worktree_guard *g);

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
 * Conditional checks: globs[i] (i < nr; an empty list: always) are the
 * when_changed patterns of command i, changed the paths the change
 * touches (from the fork point), since names that point for the record.
 */
struct validate_when {
	const struct strvec *globs;
	size_t nr;
	const struct strvec *changed;
	const char *since;
};

/*
 * Runs each command with sh -c in the worktree, one after another (a
 * failing command does not stop the rest), each with timeout_s seconds,
 * and writes json_path atomically:
 *   {"passed": bool, "skipped": N, "commands": [{"command", "exit_code",
 *    "duration_ms", "timed_out", "output_tail"[, "when_changed",
 *    "matched"]} or {"command", "skipped": true, "when_changed",
 *    "reason"}]}
 * A command with when_changed globs (when may be NULL) runs only when a
 * changed path matches one (util/pathglob.h); otherwise it is listed as
 * skipped with the reason. Full output of every command goes to
 * log_path. Returns 0 when the commands ran (read r->passed), negative
 * when they could not be run.
 */
int validate_run(const char *worktree, const struct strvec *commands,
		 int timeout_s, const char *json_path, const char *log_path,
		 const struct workspace_hooks *hooks,
		 const struct validate_when *when, struct validate_result *r,
		 struct err *e);
void validate_result_release(struct validate_result *r);

/* ---- merge.c: landing a branch on the base branch -------------------- */

/*
 * How a landing ended. Only LAND_MERGED changes the repository (the base
 * branch moved); every other outcome leaves the base where it was.
 */
enum land_outcome {
	LAND_MERGED,	    /* the base moved to commit */
	LAND_CONFLICT,	    /* the merge conflicts in conflicts[] */
	LAND_CHECKS_FAILED, /* the merged state failed a check: summary */
	LAND_RACED,	    /* the base moved meanwhile: try again */
	LAND_NOTHING,	    /* the branch is already in the base */
};

struct land_request {
	const char *branch;	 /* what lands: "baton/r3-x" */
	const char *base_branch; /* where; NULL: the branch checked out in
				    ws->repo */
	const char *message;	 /* of the merge commit; NULL: "Merge branch
				    'X' into B" */
	const struct strvec *checks; /* shell commands run on the merged
					state; NULL or empty: none */
	int timeout_s;		 /* per check; 0: no limit */
	const char *log_path;	 /* full output of the checks (appended);
				    NULL: not kept */
	const char *json_path;	 /* their validation.json; NULL: in the
				    merge worktree's git directory */
	int sandbox;		 /* checks under bwrap, without network */
	const struct workspace_hooks *hooks; /* wake/tick while the checks
						run (its sandbox is ignored);
						may be NULL */
};

struct land_result {
	enum land_outcome outcome;
	char *base_branch;	 /* the branch it was landed on */
	char *base_commit;	 /* the base tip it started from */
	char *commit;		 /* MERGED/NOTHING: the base's tip now;
				    CHECKS_FAILED/RACED: the merge that was
				    tried; CONFLICT: NULL */
	struct strvec conflicts; /* CONFLICT: the unmerged paths */
	struct buf summary;	 /* CHECKS_FAILED: the failures */
};

#define LAND_RESULT_INIT                                                       \
	{ .conflicts = STRVEC_INIT, .summary = BUF_INIT }

void land_result_release(struct land_result *r);

/*
 * The branch landings go to: configured (merge.base_branch; a leading
 * "refs/heads/" is dropped), else the branch checked out in ws->repo.
 * *out is a new string. BATON_EINVAL when configured is NULL and the
 * repository is on a detached HEAD.
 */
int worktree_base_branch(const struct workspace *ws, const char *configured,
			 char **out, struct err *e);

/* ---- merge.c: worker hosts sharing one remote (repo.url) ------------- */

/*
 * Fetches branch from url into refs/remotes/baton/<branch>, and gives
 * that ref's name (the caller frees) to start a run from.
 */
int remote_fetch_base(const struct workspace *ws, const char *url,
		      const char *branch, char **ref_out, struct err *e);
/*
 * Makes the branch a run pushed to url a local branch of the same name,
 * unless the repository has that branch already.
 */
int remote_fetch_branch(const struct workspace *ws, const char *url,
			const char *branch, struct err *e);
/*
 * Pushes the local branch to url under the same name; force for a run's
 * own branch, never for the base (a push the remote refuses says that
 * someone else moved it).
 */
int remote_push(const struct workspace *ws, const char *url,
		const char *branch, int force, struct err *e);

/*
 * Pushes commit to the branch dst of url with a lease: the push is
 * refused unless dst is at expect there (git push --force-with-lease),
 * so that commits someone else pushed are never overwritten. The forge
 * pushes a fix round's tip to its PR's branch this way (forge/pr.c).
 */
int remote_push_lease(const struct workspace *ws, const char *url,
		      const char *commit, const char *dst, const char *expect,
		      struct err *e);

/* ---- ckpt.c: a run's checkpoints on the shared remote ---------------- */

/* "refs/baton/checkpoints/<run_id>", the ref of a run's last pushed
 * checkpoint, here and on the remote (caller frees). */
char *ckpt_ref(const char *run_id);

/*
 * Pushes commit to url's refs/baton/checkpoints/<run_id> and, when files
 * is not NULL, that commit (ckpt_files_save) to refs/baton/run-files/
 * <run_id>, both in one atomic push, by id, from the common git dir with
 * no hook run: nothing in a run's worktree is asked. The push holds a
 * lease: it is refused, and nothing moves, unless url's checkpoint ref
 * is at expect (NULL: unless url has none), so a driver never pushes
 * over a checkpoint it did not know of. BATON_EINVAL when run_id cannot
 * name a ref or an id is not a full object id.
 */
int ckpt_push(const struct workspace *ws, const char *url, const char *run_id,
	      const char *commit, const char *files, const char *expect,
	      struct err *e);

/* Where url's checkpoint ref of the run is: *tip_out (caller frees), or
 * NULL when url has none. Errors when url cannot be read. */
int ckpt_remote_tip(const struct workspace *ws, const char *url,
		    const char *run_id, char **tip_out, struct err *e);

/*
 * Fetches the run's two refs from url into refs of the same names here:
 * *tip_out gets the checkpoint commit, *files_out the run-files commit
 * or NULL when url has none (caller frees both). BATON_ENOTFOUND when
 * url has no checkpoint of the run; other errors when url cannot be
 * read or fetched from.
 */
int ckpt_fetch(const struct workspace *ws, const char *url, const char *run_id,
	       char **tip_out, char **files_out, struct err *e);

/* 1 when commit is tip or one of its ancestors here, else 0. */
int ckpt_contains(const struct workspace *ws, const char *tip,
		  const char *commit);

/*
 * Deletes the run's two refs here and, when url is not NULL, on url
 * (only those that are there). For a run that has ended.
 */
int ckpt_forget(const struct workspace *ws, const char *url, const char *run_id,
		struct err *e);

/*
 * A commit (fixed date, no parent) of the run folder run_dir's files that
 * travel with a checkpoint: every regular top-level file of at most
 * BUF_MAX_ARTIFACT bytes without a NUL, read without following a link,
 * but the host's own (lock, port, events.jsonl, branch.base) and dot
 * files. *commit_out: its id (caller frees).
 */
int ckpt_files_save(const struct workspace *ws, const char *run_dir,
		    const char *run_id, char **commit_out, struct err *e);

/*
 * Writes the files of the run-files commit files into run_dir (made when
 * missing): regular blobs with a plain name that travels, each only when
 * run_dir has nothing of that name. *nr_out: how many were written.
 */
int ckpt_files_restore(const struct workspace *ws, const char *files,
		       const char *run_dir, size_t *nr_out, struct err *e);

/* The commit ref names (*out, the caller frees), or NULL when none. */
int workspace_resolve(const struct workspace *ws, const char *ref,
		      char **out, struct err *e);

/*
 * Takes the repository's landing lock (.baton/worktrees/.merge.lock, an
 * flock), which serialises every use of the merge worktree. wait: block
 * until it is free; else BATON_EBUSY at once when someone holds it.
 * *fd_out gets the descriptor that holds the lock; worktree_land_unlock
 * (or the process's exit) releases it.
 */
int worktree_land_lock(const struct workspace *ws, int wait, int *fd_out,
		       struct err *e);
/* Releases a lock taken by worktree_land_lock; -1 is fine. */
void worktree_land_unlock(int fd);

/*
 * Lands rq->branch on the base branch, the merge queue's git work. The
 * caller holds the landing lock. The merge commit is made as "baton"
 * when git knows nobody here, whatever ws->identity says.
 *
 * In the merge worktree (.baton/worktrees/.merge: detached, created
 * when missing, reset and cleaned, ignored files included, before each
 * use) the base tip OLD is checked out and the branch merged with
 * `git merge --no-ff`, so that each landing is one merge commit and the
 * base's first-parent history is exactly the sequence of checked states.
 * A conflict aborts the merge (LAND_CONFLICT with the paths). The checks
 * then run there (validate_run): failing, LAND_CHECKS_FAILED and the base
 * is untouched. Passing, the base moves from OLD to the merge commit by
 * compare-and-swap (git update-ref B NEW OLD), or, when B is checked out
 * in a worktree (the main one, typically), by `git merge --ff-only` there
 * so its files follow; either way a base that moved meanwhile gives
 * LAND_RACED and nothing changes. A branch already contained in the base
 * is LAND_NOTHING.
 *
 * Returns 0 and fills *out (caller releases) for every outcome; negative
 * on errors: the branch does not exist (BATON_ENOTFOUND), no base branch
 * (BATON_EINVAL), local changes in the checked-out base that the
 * fast-forward would overwrite (BATON_EBUSY, naming the files; nothing
 * was changed), checks stopped by a hook (BATON_EABORTED), git failing.
 */
int worktree_land(const struct workspace *ws, const struct land_request *rq,
		  struct land_result *out, struct err *e);

/*
 * The change branch makes against its merge base with base (git diff
 * base...branch): the whole diff is written to the file path (replaced),
 * and its first max bytes (0: all) are appended to out; *cut_out (may be
 * NULL) is set to 1 when there was more.
 */
int worktree_branch_diff(const struct workspace *ws, const char *base,
			 const char *branch, const char *path, size_t max,
			 struct buf *out, int *cut_out, struct err *e);

#endif
