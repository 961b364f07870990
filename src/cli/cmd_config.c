/*
 * baton config: `show` prints the effective config with where each value
 * came from; `validate` checks it (and every pipeline it defines) and says
 * exactly what is wrong and where.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "core/cnode.h"
#include "core/pipeline.h"
#include "engine/engine.h"
#include "util/buf.h"
#include "util/err.h"

static int
config_exec(struct cli *c, int argc, char **argv)
{
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	size_t i;
	int rc = EXIT_OK;

	if (argc != 2)
		return cli_usage(&cmd_config);
	if (cli_load_config(c, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (!strcmp(argv[1], "show")) {
		config_show(&c->cfg, &out);
		cli_printf("%s", out.ptr);
	} else if (!strcmp(argv[1], "validate")) {
		struct pipeline *p = NULL;
		const struct cnode *user = c->cfg.pipelines;

		for (i = 0; user && i < user->nr && rc == EXIT_OK; i++) {
			if (pipeline_load(user, user->kids[i]->key, &p, &e)) {
				cli_error("%s", e.msg);
				rc = EXIT_FAIL;
			}
			pipeline_free(p);
			p = NULL;
		}
		if (rc == EXIT_OK &&
		    pipeline_load(user, c->cfg.pipeline, &p, &e)) {
			cli_error("workflow.pipeline: %s", e.msg);
			rc = EXIT_FAIL;
		}
		pipeline_free(p);
		engine_init(&c->en, NULL, &c->ws, &c->cfg);
		if (rc == EXIT_OK && engine_check_gates(&c->en, &e)) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
		}
		if (rc == EXIT_OK)
			cli_printf("config ok (hash %s)\n", c->cfg.hash);
	} else {
		rc = cli_usage(&cmd_config);
	}
	buf_release(&out);
	return rc;
}

const struct cmd cmd_config = {
	.name = "config",
	.usage = "config show | validate",
	.summary = "print the effective config with origins, or check it",
	.needs = CLI_NEEDS_REPO,
	.exec = config_exec,
};
