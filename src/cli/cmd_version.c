/*
 * baton version.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "util/version.h"

static int
version_exec(struct cli *c, int argc, char **argv)
{
	(void)c;
	(void)argc;
	(void)argv;
	cli_printf("baton %s\n", BATON_VERSION);
	return EXIT_OK;
}

const struct cmd cmd_version = {
	.name = "version",
	.usage = "version",
	.summary = "print baton's version",
	.exec = version_exec,
};
