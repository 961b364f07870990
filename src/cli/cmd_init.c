/*
 * baton init: prepares a repository: .baton/ with a commented config
 * template, the store, and a .gitignore that keeps run state out of git
 * while letting config.yaml and prompts/ be committed.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "store/store.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/xalloc.h"

static const char config_template[] =
	"# baton config for this repository (docs/config.md).\n"
	"# Each stage of a pipeline is done by a role (planner, architect,\n"
	"# implementer, reviewer, fixer, verifier); roles map to providers.\n"
	"providers:\n"
	"  # Any program can be an agent: it reads the prompt on stdin, works\n"
	"  # in the run's worktree and writes its artifacts into "
	"$BATON_RUN_DIR\n"
	"  # (docs/agents.md). For example:\n"
	"  # scripted: {type: command, command: [\"/path/to/agent\"]}\n"
	"roles:\n"
	"  # default: scripted        # any role not named here\n"
	"  # reviewer: scripted\n"
	"workflow:\n"
	"  pipeline: feature\n"
	"  max_review_loops: 2\n"
	"policies:\n"
	"  require_approval_at_stages: []   # e.g. [executing]\n"
	"validate:\n"
	"  commands: []                     # e.g. [\"make test\"]\n"
	"  timeout_seconds: 600\n";

static const char gitignore[] =
	"# Run state stays out of git; config.yaml and prompts/ may be "
	"committed.\n"
	"*\n"
	"!.gitignore\n"
	"!config.yaml\n"
	"!prompts/\n"
	"!prompts/**\n";

/* Writes path with text unless it exists; says what it did. */
static int
ensure_file(const char *path, const char *shown, const char *text,
	    struct err *e)
{
	int rc;

	if (fs_exists(path)) {
		printf("kept     %s\n", shown);
		return 0;
	}
	rc = fs_write_atomic(path, text, strlen(text), e);
	if (!rc)
		printf("created  %s\n", shown);
	return rc;
}

static int
init_exec(struct cli *c, int argc, char **argv)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char *cfg = xasprintf("%s/config.yaml", c->ws.dir);
	char *ign = xasprintf("%s/.gitignore", c->ws.dir);
	char *runs = xasprintf("%s/runs", c->ws.dir);
	char *db = xasprintf("%s/baton.db", c->ws.dir);
	int existed = fs_exists(db), rc;

	(void)argv;
	if (argc > 1) {
		rc = cli_usage(&cmd_init);
		goto out;
	}
	rc = fs_mkdir_p(runs, 0755, &e);
	if (!rc)
		rc = ensure_file(cfg, ".baton/config.yaml", config_template,
				 &e);
	if (!rc)
		rc = ensure_file(ign, ".baton/.gitignore", gitignore, &e);
	if (!rc)
		rc = store_open(db, &s, &e);
	if (!rc)
		printf("%s  .baton/baton.db (schema %d)\n",
		       existed ? "kept    " : "created ",
		       store_schema_version(s, NULL));
	if (rc) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	/* The template must load; if the user's existing file does not,
	 * say so now rather than at the first run. */
	if (cli_load_config(c, &e)) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	printf("\nbaton is ready in %s\nnext: name a provider in "
	       ".baton/config.yaml, then: baton run \"your task\"\n",
	       c->ws.repo);
out:
	store_close(s);
	free(cfg);
	free(ign);
	free(runs);
	free(db);
	return rc;
}

const struct cmd cmd_init = {
	.name = "init",
	.usage = "init",
	.summary = "create .baton/ (config template, store, .gitignore) in "
		   "this repository",
	.needs = CLI_NEEDS_REPO,
	.exec = init_exec,
};
