/*
 * baton clean RUN...: removes the worktrees of runs that have ended,
 * after their worktree_teardown hooks, and releases their ports
 * (engine_remove_worktree). The branches stay, as do the run folders and
 * the records: `baton show` still works, `baton diff` says the run has
 * no worktree.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "engine/hooks.h"
#include "util/err.h"

static int
clean_exec(struct cli *c, int argc, char **argv)
{
	struct err e = ERR_INIT;
	char *path = NULL;
	int i, n, rc = EXIT_OK;

	n = cli_parse(argc - 1, argv + 1, NULL, 0);
	if (n < 1)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_clean);
	for (i = 1; i <= n; i++) {
		if (engine_remove_worktree(&c->en, argv[i], &path, &e)) {
			cli_error("%s", e.msg);
			e = (struct err)ERR_INIT;
			rc = EXIT_FAIL;
			continue;
		}
		if (path)
			cli_printf("%s: removed %s (the branch is kept)\n",
				   argv[i], path);
		else
			cli_printf("%s: no worktree left\n", argv[i]);
		free(path);
		path = NULL;
	}
	return rc;
}

const struct cmd cmd_clean = {
	.name = "clean",
	.usage = "clean RUN...",
	.summary = "remove ended runs' worktrees (teardown hooks, ports)",
	.needs = CLI_NEEDS_STORE,
	.exec = clean_exec,
};
