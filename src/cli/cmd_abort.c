/*
 * baton abort RUN: ends a run aborted. A running agent's whole process
 * group is stopped (TERM, then KILL); the worktree is kept.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "core/run.h"
#include "util/err.h"

static int
abort_exec(struct cli *c, int argc, char **argv)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (argc != 2)
		return cli_usage(&cmd_abort);
	if (engine_abort(&c->en, argv[1], &r, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	cli_printf("%s: %s (worktree kept at %s)\n", r.id, r.status,
		   r.worktree ? r.worktree : "(none)");
	run_release(&r);
	return EXIT_OK;
}

const struct cmd cmd_abort = {
	.name = "abort",
	.usage = "abort RUN",
	.summary = "abort a run, stopping its agent; the worktree is kept",
	.needs = CLI_NEEDS_STORE | CLI_CONFIG_SPARE,
	.exec = abort_exec,
};
