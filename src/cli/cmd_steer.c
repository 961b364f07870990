/*
 * baton steer RUN TEXT: guidance for the run's next stage; the agent reads
 * it at the top of its prompt.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "util/buf.h"
#include "util/err.h"

static int
steer_exec(struct cli *c, int argc, char **argv)
{
	struct buf text = BUF_INIT;
	struct err e = ERR_INIT;
	int i, rc = EXIT_OK;

	if (argc < 3)
		return cli_usage(&cmd_steer);
	for (i = 2; i < argc; i++)
		buf_addf(&text, "%s%s", i > 2 ? " " : "", argv[i]);
	if (engine_steer(&c->en, argv[1], text.ptr, &e)) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
	} else {
		cli_printf("%s: guidance recorded for the next stage\n",
			   argv[1]);
	}
	buf_release(&text);
	return rc;
}

const struct cmd cmd_steer = {
	.name = "steer",
	.usage = "steer RUN TEXT...",
	.summary = "give the run's next stage guidance",
	.needs = CLI_NEEDS_STORE,
	.exec = steer_exec,
};
