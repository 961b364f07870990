/*
 * baton serve: drains the task queue with N worker processes, sweeps for
 * dead workers and expired leases, judges finished runs, and (with
 * runtime.auto_merge) lands approved branches. Ctrl-C drains; a second
 * Ctrl-C stops the workers, leaving their runs to resume next time.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"

static void
print_counts(struct cli *c)
{
	struct buf line = BUF_INIT;
	struct err e = ERR_INIT;

	if (!cli_task_counts(c->store, &line, &e))
		fprintf(stderr, "serve: tasks %s\n", line.ptr);
	buf_release(&line);
}

static int
serve_exec(struct cli *c, int argc, char **argv)
{
	const char *workers = NULL;
	int idle = 0, n;
	struct cli_opt opts[] = {
		{ "--workers=", NULL, &workers },
		{ "--exit-when-idle", &idle, NULL },
	};
	struct sched_ctx x = { c->store, &c->ws, &c->cfg, "serve",
			       c->store_spec };
	struct serve_opts o = { c->cfg.runtime.workers, 0, c->store_spec };
	struct err e = ERR_INIT;
	char *end = NULL;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 0)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_serve);
	if (workers) {
		long w = strtol(workers, &end, 10);

		if (!*workers || *end || w < 1 || w > 256) {
			cli_error("--workers wants a number from 1 to 256, "
				  "not '%s'",
				  workers);
			return EXIT_USAGE;
		}
		o.workers = (int)w;
	}
	o.exit_when_idle = idle;
	workspace_detect_identity(&c->ws);
	fprintf(stderr,
		"serve: %d worker%s on %s (%s)%s; judge %s, merge %s\n",
		o.workers, o.workers == 1 ? "" : "s", c->store_spec,
		store_backend(c->store),
		idle ? ", exiting when idle" : "; Ctrl-C drains",
		c->cfg.runtime.judge ? "on" : "off",
		c->cfg.runtime.auto_merge ? "automatic" :
					    "by hand (baton merge --queue)");
	if (sched_serve(&x, &o, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	print_counts(c);
	return EXIT_OK;
}

const struct cmd cmd_serve = {
	.name = "serve",
	.usage = "serve [--workers N] [--exit-when-idle]",
	.summary = "drain the task queue with parallel workers",
	.needs = CLI_NEEDS_STORE,
	.exec = serve_exec,
};
