/*
 * baton steer [--now | --collect] RUN TEXT...: guidance for a run. By
 * default the next stage's agent reads it at the top of its prompt (a
 * follow-up); --now stops the agent working and makes its call again
 * with it; --collect holds it for the task's next run
 * (engine_steer_mode; docs/cli.md "steer").
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "core/run.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"

static int
steer_exec(struct cli *c, int argc, char **argv)
{
	int now = 0, collect = 0, n, i, rc = EXIT_OK;
	struct cli_opt opts[] = {
		{ "--now", &now, NULL },
		{ "--collect", &collect, NULL },
	};
	enum steer_mode mode = STEER_FOLLOWUP;
	struct buf text = BUF_INIT;
	struct err e = ERR_INIT;
	static const char *const said[] = {
		[STEER_FOLLOWUP] = "guidance recorded for the next stage",
		[STEER_NOW] = "guidance recorded; the agent working now takes "
			      "it at once",
		[STEER_COLLECT] = "guidance collected for the task's next run",
	};

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	if (n < 2 || now + collect > 1)
		return cli_usage(&cmd_steer);
	if (now)
		mode = STEER_NOW;
	else if (collect)
		mode = STEER_COLLECT;
	for (i = 2; i <= n; i++)
		buf_addf(&text, "%s%s", i > 2 ? " " : "", argv[i]);
	if (engine_steer_mode(&c->en, argv[1], text.ptr, mode, &e)) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
	} else {
		struct run r = { 0 };

		/* the run's whole id, as every command prints it */
		if (store_run_get(c->store, argv[1], &r, &e))
			run_set(&r.id, argv[1]);
		cli_printf("%s: %s\n", r.id, said[mode]);
		run_release(&r);
	}
	buf_release(&text);
	return rc;
}

const struct cmd cmd_steer = {
	.name = "steer",
	.usage = "steer [--now | --collect] RUN TEXT...",
	.summary = "give a run guidance: for its next stage, now, or its "
		   "task's next run",
	.needs = CLI_NEEDS_STORE,
	.exec = steer_exec,
};
