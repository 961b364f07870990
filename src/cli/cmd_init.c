/*
 * baton init: prepares a repository: .baton/ with a commented config
 * template, the store, and a .gitignore that keeps run state out of git
 * while letting config.yaml and prompts/ be committed.
 */
#include "util/compat.h"

#include "agent/agent.h"
#include "cli/cli.h"
#include "server/server.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/xalloc.h"

static const char config_head[] =
	"# baton config for this repository (docs/config.md).\n"
	"# Each stage of a pipeline is done by a role (planner, architect,\n"
	"# implementer, reviewer, fixer, verifier); roles map to providers.\n"
	"# Provider types: claude-code, codex, gemini, qwen, opencode, aider,\n"
	"# copilot, pi, kilo, cline, continue, amp, auggie, crush,\n"
	"# openai and anthropic (baton's own agent on any OpenAI-compatible or\n"
	"# Anthropic server), command (any program). See docs/agents.md.\n"
	"providers:\n";

static const char config_examples[] =
	"  # local: {type: openai, base_url: \"http://127.0.0.1:11434/v1\",\n"
	"  #         model: qwen2.5-coder}\n"
	"  # scripted: {type: command, command: [\"/path/to/agent\"]}\n";

static const char config_tail[] =
	"workflow:\n"
	"  pipeline: feature\n"
	"  max_review_loops: 2\n"
	"policies:\n"
	"  require_approval_at_stages: []   # e.g. [executing]\n"
	"  allowed_paths: []                # e.g. [src/, tests/]; empty: any\n"
	"budget: {}                         # e.g. {max_cost_usd: 5, "
	"max_tokens: 2000000}\n"
	"validate:\n"
	"  commands: []                     # e.g. [\"make test\"]\n"
	"  timeout_seconds: 600\n";

/*
 * The config template: a provider for each agent CLI found on PATH, the
 * first of them playing every role, so `baton run` works at once where a
 * CLI is installed; commented examples otherwise.
 */
static void
config_template(struct buf *out)
{
	const struct agent_info *const *infos;
	const char *first = NULL;
	size_t i, n;

	buf_adds(out, config_head);
	infos = agent_infos(&n);
	for (i = 0; i < n; i++) {
		char *path;

		if (!infos[i]->program || !(path = agent_which(infos[i]->program)))
			continue;
		buf_addf(out, "  %s: {type: %s}   # found %s\n",
			 infos[i]->program, infos[i]->type, path);
		if (!first)
			first = infos[i]->program;
		free(path);
	}
	buf_adds(out, config_examples);
	buf_adds(out, "roles:\n");
	if (first)
		buf_addf(out, "  default: %s        # any role not named here\n"
			      "  # reviewer: [%s, another]   # several must "
			      "all approve\n",
			 first, first);
	else
		buf_adds(out, "  # default: scripted        # any role not "
			      "named here\n"
			      "  # reviewer: scripted\n");
	buf_adds(out, config_tail);
}

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
		cli_printf("kept     %s\n", shown);
		return 0;
	}
	rc = fs_write_atomic(path, text, strlen(text), e);
	if (!rc)
		cli_printf("created  %s\n", shown);
	return rc;
}

/*
 * The API's bearer token, .baton/token: made here so that it exists
 * before the first serve (docs/api.md), by the very code serve uses.
 */
static int
ensure_token(struct cli *c, struct err *e)
{
	char *path = xasprintf("%s/token", c->ws.dir), *token = NULL;
	int existed = fs_exists(path), rc;

	rc = server_token(&c->ws, &token, e);
	if (!rc)
		cli_printf("%s .baton/token\n", existed ? "kept    " : "created ");
	free(token);
	free(path);
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
	struct buf tmpl = BUF_INIT;
	int existed = fs_exists(db), rc;

	(void)argv;
	if (argc > 1) {
		rc = cli_usage(&cmd_init);
		goto out;
	}
	rc = fs_mkdir_p(runs, 0755, &e);
	config_template(&tmpl);
	if (!rc)
		rc = ensure_file(cfg, ".baton/config.yaml", tmpl.ptr, &e);
	if (!rc)
		rc = ensure_file(ign, ".baton/.gitignore", gitignore, &e);
	/* Not an empty store over the runs of one that was lost. */
	if (!rc && !existed)
		rc = cli_refuse_orphaned_runs(c, NULL, &e);
	if (!rc)
		rc = store_open(db, &s, &e);
	if (!rc && existed)
		rc = cli_refuse_orphaned_runs(c, s, &e);
	if (!rc)
		cli_printf("%s  .baton/baton.db (schema %d)\n",
			   existed ? "kept    " : "created ",
			   store_schema_version(s, NULL));
	if (!rc)
		rc = ensure_token(c, &e);
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
	cli_printf("\nbaton is ready in %s\nnext: %s\n", c->ws.repo,
		   c->cfg.nr_roles ?
		       "baton doctor, then: baton run \"your task\"" :
		       "name a provider in .baton/config.yaml (no "
		       "agent CLI is on PATH), then: baton run "
		       "\"your task\"");
out:
	store_close(s);
	free(cfg);
	free(ign);
	free(runs);
	free(db);
	buf_release(&tmpl);
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
