/*
 * baton pause RUN: asks the run to pause at its next stage boundary. The
 * request is stored and the driver woken; `baton resume` undoes it.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "core/run.h"
#include "util/err.h"

static int
pause_exec(struct cli *c, int argc, char **argv)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (argc != 2)
		return cli_usage(&cmd_pause);
	if (engine_pause(&c->en, argv[1], &r, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (!strcmp(r.status, "paused"))
		cli_printf("%s: paused (resume with: baton resume %s)\n", r.id,
			   r.id);
	else
		cli_printf(
		    "%s: pause requested; it takes effect at the next stage "
		    "boundary (now %s)\n",
		    r.id, r.status);
	run_release(&r);
	return EXIT_OK;
}

const struct cmd cmd_pause = {
	.name = "pause",
	.usage = "pause RUN",
	.summary = "pause a run at its next stage boundary",
	.needs = CLI_NEEDS_STORE | CLI_CONFIG_SPARE,
	.exec = pause_exec,
};
