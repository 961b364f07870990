/*
 * Lifecycle hooks (config hooks:, docs/config.md "Hooks"): the user's
 * shell strings, run with sh -c in a run's worktree at the points of
 * enum hook_point, exactly as validate.commands run: through spawn, in
 * a process group of their own killed at the timeout
 * (hooks.timeout_seconds), in the sandbox when it is on (with network,
 * the main checkout read-only but never .baton/), and with every
 * process they leave behind killed after each command. Their
 * environment adds BATON_REPO, BATON_WORKTREE, BATON_RUN_DIR,
 * BATON_RUN_ID, BATON_PORT (workspace_port), BATON_HOOK (the point),
 * BATON_STAGE at stage hooks and BATON_STATUS at on_terminal.
 *
 * Each command is a "hook" event of the run and leaves its output in the
 * run folder, hooks/<point>[-<stage>]-<i>.log, kept as a stage output
 * too. At worktree_setup, before_stage and before_merge a command that
 * fails (a non-zero exit, a timeout) is a veto: the rest of the list is
 * not run and the caller is told why; at the other points every command
 * runs and failures are only on record.
 *
 *   worktree_setup ─▶ before_stage ─▶ [stage] ─▶ after_stage ─▶ ...
 *        ─▶ on_terminal ─▶ before_merge (merge queue) ─▶ landing
 *        ─▶ worktree_teardown (baton clean) ─▶ the worktree is removed
 */
#ifndef BATON_ENGINE_HOOKS_H
#define BATON_ENGINE_HOOKS_H

#include <stdint.h>

#include "core/config.h"
#include "util/spawn.h"

struct engine;
struct err;

/* Where and for whom a point's commands run. */
struct hook_ctx {
	struct engine *en;	/* store, workspace and config (borrowed) */
	const char *run_id;
	int64_t task_id;	/* the run's task, for its events; 0: none */
	const char *worktree;	/* where they run: the run's worktree */
	const char *stage;	/* BATON_STAGE (the stage's status), or NULL */
	const char *status;	/* BATON_STATUS at on_terminal, or NULL */
	/* stop: a wake_fd (-1: none) and a callback as spawn_opts has */
	int wake_fd;
	spawn_event_cb *on_event;
	void *arg;
};

#define HOOK_CTX_INIT { .wake_fd = -1 }

/* 1 when config cfg has commands for point. */
int hooks_any(const struct config *cfg, enum hook_point point);

/*
 * Runs the commands of point (none: 0 at once). Returns 0 when they all
 * passed or point is no veto; 1 when a veto point's command failed, with
 * *reason_out (caller frees) saying which and why, "hook
 * before_stage[0] `make lint` exited 1: <the end of its output>";
 * BATON_EABORTED when on_event stopped a command; negative on errors
 * (the worktree is gone, no port, the store).
 */
int hooks_run(enum hook_point point, const struct hook_ctx *c,
	      char **reason_out, struct err *e);

/*
 * baton clean: removes terminal run ref's worktree (worktree_remove),
 * after its worktree_teardown hooks (failures on record, no veto), and
 * releases its port, with a "worktree_removed" event {path, port,
 * branch}. The branch, the run folder and the record stay.
 * BATON_EBADSTATE for a run that is not terminal; *path_out (may be
 * NULL; caller frees) gets the path removed, NULL when the run had no
 * worktree left.
 */
int engine_remove_worktree(struct engine *en, const char *ref,
			   char **path_out, struct err *e);

#endif
