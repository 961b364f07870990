/*
 * baton forge: the GitHub side of baton by hand (docs/forge.md).
 *
 *   baton forge sync [--json]   one round, as serve's forge companion
 *                               runs them: import the issue backlog,
 *                               refresh PR, CI and review state; then
 *                               say what it did
 *   baton forge wake            asks the forge companion of a serve of
 *                               this repository for a round now
 *
 * Exit 1 with the error when the forge is not configured, its token
 * variable is not set or GitHub answers an error (the endpoint and
 * GitHub's message named); what the round did before that is printed.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "forge/forge.h"
#include "util/err.h"

static void
print_round(const struct config *cfg, const struct forge_round *r, int json)
{
	if (json) {
		json_t *o = json_pack(
		    "{s:s, s:i, s:i, s:i, s:i, s:i, s:b, s:i, s:i, s:i, s:i, "
		    "s:i, s:I}",
		    "repo", cfg->forge.repo, "imported", r->imported,
		    "cancelled", r->cancelled, "linked", r->linked, "refused",
		    r->refused, "commented", r->commented, "unchanged",
		    r->unchanged, "prs_opened", r->prs_opened, "pushes",
		    r->pushes, "rounds", r->rounds, "merged", r->merged,
		    "asked", r->asked, "calls", (json_int_t)r->calls);
		char *s = json_dumps(o, JSON_COMPACT);

		printf("%s\n", s ? s : "{}");
		free(s);
		json_decref(o);
		return;
	}
	cli_printf("forge %s: imported %d, cancelled %d", cfg->forge.repo,
		   r->imported, r->cancelled);
	if (r->linked)
		cli_printf(", linked %d (left by a crash)", r->linked);
	if (r->refused)
		cli_printf(", refused %d (text not UTF-8)", r->refused);
	cli_printf(", commented %d; PRs opened %d, pushes %d, fix rounds %d, "
		   "merged %d, asked %d (%lld API call%s%s)\n",
		   r->commented, r->prs_opened, r->pushes, r->rounds, r->merged,
		   r->asked, (long long)r->calls, r->calls == 1 ? "" : "s",
		   r->unchanged ? "; the issue listing is unchanged" : "");
}

static int
forge_sync_cmd(struct cli *c, int argc, char **argv)
{
	struct cli_opt opts[] = { { "--json", &c->json, NULL } };
	struct forge_round r = { 0 };
	struct err e = ERR_INIT;
	int n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));

	if (n != 0)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_forge);
	if (forge_sync(&c->cfg, c->store, &c->ws, &r, &e)) {
		if (c->cfg.forge.type && c->cfg.forge.repo && r.calls)
			print_round(&c->cfg, &r, c->json);
		cli_error("forge sync: %s", e.msg);
		return EXIT_FAIL;
	}
	print_round(&c->cfg, &r, c->json);
	return EXIT_OK;
}

static int
forge_wake_cmd(struct cli *c, int argc, char **argv)
{
	(void)argv;
	if (argc != 1)
		return cli_usage(&cmd_forge);
	if (!c->cfg.forge.type) {
		cli_error("forge wake: the forge is not configured (a forge: "
			  "section in .baton/config.yaml, docs/forge.md)");
		return EXIT_FAIL;
	}
	forge_wake(&c->ws);
	cli_printf("asked the forge companion of any serve here for a round\n");
	return EXIT_OK;
}

static int
forge_exec(struct cli *c, int argc, char **argv)
{
	if (argc < 2)
		return cli_usage(&cmd_forge);
	if (!strcmp(argv[1], "sync"))
		return forge_sync_cmd(c, argc - 1, argv + 1);
	if (!strcmp(argv[1], "wake"))
		return forge_wake_cmd(c, argc - 1, argv + 1);
	cli_error("unknown forge command '%s'", argv[1]);
	return cli_usage(&cmd_forge);
}

const struct cmd cmd_forge = {
	.name = "forge",
	.usage = "forge sync [--json]\n"
		 "       baton forge wake",
	.summary = "sync with GitHub by hand: import labelled issues, "
		   "refresh pull requests, CI and reviews",
	.needs = CLI_NEEDS_STORE,
	.exec = forge_exec,
};
