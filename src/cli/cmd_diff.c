/*
 * baton diff RUN: the run's change against the commit it branched from
 * (--stat for the summary).
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "core/run.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"

static int
diff_exec(struct cli *c, int argc, char **argv)
{
	int stat = 0, n, rc = EXIT_OK;
	struct cli_opt opts[] = { { "--stat", &stat, NULL } };
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	struct run r = { 0 };

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 1)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_diff);
	if (store_run_get(c->store, argv[1], &r, &e))
		goto fail;
	if (!r.worktree || !r.base_commit || !fs_is_dir(r.worktree)) {
		err_set(&e, BATON_ENOTFOUND, "run '%s' has no worktree yet",
			r.id);
		goto fail;
	}
	if (worktree_diff(&c->ws, r.worktree, r.base_commit, stat, &out, &e))
		goto fail;
	if (out.len)
		cli_printf("%s\n", out.ptr);
	goto out;
fail:
	cli_error("%s", e.msg);
	rc = EXIT_FAIL;
out:
	buf_release(&out);
	run_release(&r);
	return rc;
}

const struct cmd cmd_diff = {
	.name = "diff",
	.usage = "diff RUN [--stat]",
	.summary = "the run's change against its base commit",
	.needs = CLI_NEEDS_STORE,
	.exec = diff_exec,
};
