/*
 * baton schedule list [--json]: the schedules of the config
 * (`schedules:`, core/schedule.h), each with its cron expression, what
 * happens to a missed slot, its pipeline and its next slots (UTC), as
 * `baton serve` will make them.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "core/config.h"
#include "core/schedule.h"
#include "util/json.h"
#include "util/timeutil.h"

/* Slots shown per schedule. */
#define SHOWN_SLOTS 3

static int
list(struct cli *c, int json)
{
	json_t *all = json_array();
	int64_t now = time_now_ms(), t;
	char when[40], *text;
	size_t i;
	int k;

	for (i = 0; i < c->cfg.nr_schedules; i++) {
		const struct schedule *s = &c->cfg.schedules[i];
		json_t *next = json_array();

		for (t = now, k = 0; k < SHOWN_SLOTS; k++) {
			t = cron_next(&s->cron, t);
			if (!t)
				break;
			time_fmt_iso(t, when, sizeof(when));
			json_array_append_new(next, json_string(when));
		}
		json_array_append_new(
		    all, json_pack("{s:s, s:s, s:s, s:s?, s:s, s:o}", "name",
				   s->name, "cron", s->cron_text, "title",
				   s->title, "pipeline", s->pipeline, "missed",
				   s->catch_up ? "catch_up" : "skip", "next",
				   next));
	}
	if (json) {
		text = json_dumps(all, JSON_INDENT(2));
		cli_printf("%s\n", text);
		free(text);
	} else if (!c->cfg.nr_schedules) {
		cli_printf("no schedules (config: schedules:)\n");
	}
	for (i = 0; !json && i < json_array_size(all); i++) {
		json_t *o = json_array_get(all, i), *v;
		size_t j;

		cli_printf("%s  \"%s\"  missed: %s  pipeline: %s\n  task: %s\n",
			   json_get_str(o, "name"), json_get_str(o, "cron"),
			   json_get_str(o, "missed"),
			   json_get_str(o, "pipeline") ?
				   json_get_str(o, "pipeline") :
				   c->cfg.pipeline,
			   json_get_str(o, "title"));
		v = json_object_get(o, "next");
		for (j = 0; j < json_array_size(v); j++)
			cli_printf("  next: %s\n",
				   json_string_value(json_array_get(v, j)));
	}
	json_decref(all);
	return EXIT_OK;
}

static int
schedule_exec(struct cli *c, int argc, char **argv)
{
	int json = 0, n;
	const struct cli_opt opts[] = { { "--json", &json, NULL } };

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	if (n != 1 || strcmp(argv[1], "list"))
		return cli_usage(&cmd_schedule);
	return list(c, json);
}

const struct cmd cmd_schedule = {
	.name = "schedule",
	.usage = "schedule list [--json]",
	.summary = "list the schedules of the config and their next slots",
	.needs = CLI_NEEDS_CONFIG,
	.exec = schedule_exec,
};
