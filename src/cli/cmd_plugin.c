/*
 * baton plugin list: the plugins found in .baton/plugins/ and
 * ~/.config/baton/plugins/, in load order, each with its status
 * (enabled, disabled, incompatible, error and why) and what it provides:
 * pipelines, prompt templates, stage kinds, hooks (core/plugin.h).
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "core/plugin.h"
#include "util/buf.h"

/* "a, b, c" of v into out, or "-" when empty. */
static void
join(const struct strvec *v, struct buf *out)
{
	size_t i;

	for (i = 0; i < v->nr; i++)
		buf_addf(out, "%s%s", i ? ", " : "", v->v[i]);
	if (!v->nr)
		buf_adds(out, "-");
}

/* What pl provides, one line per sort, indented. */
static void
describe(const struct plugin *pl)
{
	struct buf b = BUF_INIT;
	size_t i;
	int h;

	if (pl->description)
		cli_printf("    %s\n", pl->description);
	if (pl->dir)
		cli_printf("    folder     %s\n", pl->dir);
	if (pl->reason)
		cli_printf("    reason     %s\n", pl->reason);
	if (pl->requires.nr) {
		join(&pl->requires, &b);
		cli_printf("    requires   %s\n", b.ptr);
	}
	for (i = 0; i < pl->nr_pipelines; i++)
		cli_printf("    pipeline   %s (%s)\n", pl->pipelines[i].name,
			   pl->pipelines[i].path);
	for (i = 0; i < pl->nr_kinds; i++) {
		buf_reset(&b);
		join(&pl->kinds[i].command, &b);
		cli_printf("    kind       %s, status %s, timeout %ds: %s\n",
			   pl->kinds[i].name, pl->kinds[i].status,
			   pl->kinds[i].timeout_seconds, b.ptr);
	}
	for (i = 0; i < pl->nr_prompts; i++)
		cli_printf("    prompt     %s (%s)\n", pl->prompts[i].name,
			   pl->prompts[i].path);
	for (h = 0; h < PLUGIN_HOOK__COUNT; h++) {
		if (!pl->hooks[h].nr)
			continue;
		buf_reset(&b);
		join(&pl->hooks[h], &b);
		cli_printf("    hook       %s: %s\n",
			   plugin_hook_name((enum plugin_hook)h), b.ptr);
	}
	buf_release(&b);
}

static int
list(int json)
{
	const struct plugin *pl;
	json_t *arr;
	size_t i, n;
	char *s;

	pl = plugins_all(&n);
	if (json) {
		arr = json_array();
		for (i = 0; i < n; i++)
			json_array_append_new(arr, plugin_to_json(&pl[i]));
		s = json_dumps(arr, JSON_INDENT(2));
		puts(s);
		free(s);
		json_decref(arr);
		return EXIT_OK;
	}
	if (!n)
		cli_printf("no plugins (none in .baton/plugins/ or "
			   "~/.config/baton/plugins/)\n");
	for (i = 0; i < n; i++) {
		cli_printf("%-24s %-12s %s%s\n", pl[i].id,
			   plugin_status_name(pl[i].status),
			   pl[i].version ? "version " : "",
			   pl[i].version ? pl[i].version : "");
		describe(&pl[i]);
	}
	return EXIT_OK;
}

static int
plugin_exec(struct cli *c, int argc, char **argv)
{
	int json = 0, n;
	struct cli_opt opts[] = { { "--json", &json, NULL } };

	(void)c;
	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	if (n == 0 || (n == 1 && !strcmp(argv[1], "list")))
		return list(json);
	return cli_usage(&cmd_plugin);
}

const struct cmd cmd_plugin = {
	.name = "plugin",
	.usage = "plugin [list] [--json]",
	.summary = "list the plugins with their status and what they provide",
	.needs = CLI_NEEDS_CONFIG,
	.exec = plugin_exec,
};
