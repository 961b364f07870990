/*
 * baton pipeline: the pipelines this repository can run (built-in and its
 * own), and one pipeline's stages and derived transition table.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "core/pipeline.h"
#include "util/buf.h"
#include "util/err.h"

static int
list(struct cli *c, int json)
{
	struct strvec names = STRVEC_INIT;
	json_t *arr = json_array();
	struct err e = ERR_INIT;
	size_t i, nuser = engine_pipeline_names(&c->en, &names);
	int rc = EXIT_OK;

	for (i = 0; i < names.nr; i++)
		json_array_append_new(arr, json_pack("{s:s, s:b}", "name",
						     names.v[i], "builtin",
						     i >= nuser));
	strvec_clear(&names);
	for (i = 0; i < json_array_size(arr); i++) {
		json_t *o = json_array_get(arr, i);
		const char *name = json_string_value(json_object_get(o, "name"));
		struct pipeline *p = NULL;

		if (engine_pipeline(&c->en, name, &p, &e)) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
			continue;
		}
		json_object_set_new(o, "stages", json_integer((json_int_t)p->nr_stages));
		json_object_set_new(o, "description",
				    p->description ? json_string(p->description) :
						     json_null());
		if (!json)
			printf("%-12s %-10s %s\n", name,
			       p->builtin ? "built-in" : "config",
			       p->description ? p->description : "");
		pipeline_free(p);
	}
	if (json) {
		char *s = json_dumps(arr, JSON_INDENT(2));

		puts(s);
		free(s);
	}
	json_decref(arr);
	return rc;
}

static json_t *
describe_json(const struct pipeline *p)
{
	json_t *o = json_object(), *stages = json_array(), *edges = json_array();
	size_t i;

	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];

		json_array_append_new(
			stages,
			json_pack("{s:s, s:s, s:s, s:s*, s:s*, s:b, s:s, s:s*, s:s*}",
				  "name", s->name, "kind",
				  stage_kind_name(s->kind), "status", s->status,
				  "done", s->done, "role", s->role, "side",
				  s->side, "next",
				  s->next < 0 ? p->terminal :
						p->stages[s->next].name,
				  "on_fail",
				  s->on_fail < 0 ? NULL :
						   p->stages[s->on_fail].name,
				  "on_changes",
				  s->on_changes < 0 ?
					  NULL :
					  p->stages[s->on_changes].name));
	}
	for (i = 0; i < p->nr_edges; i++)
		json_array_append_new(
			edges, json_pack("{s:s, s:s, s:s}", "from",
					 p->edges[i].from, "to", p->edges[i].to,
					 "why", edge_why_name(p->edges[i].why)));
	json_object_set_new(o, "name", json_string(p->name));
	json_object_set_new(o, "terminal", json_string(p->terminal));
	json_object_set_new(o, "stages", stages);
	json_object_set_new(o, "transitions", edges);
	return o;
}

static int
show(struct cli *c, const char *name, int json)
{
	struct pipeline *p = NULL;
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;

	if (engine_pipeline(&c->en, name, &p, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (json) {
		json_t *o = describe_json(p);
		char *s = json_dumps(o, JSON_INDENT(2));

		puts(s);
		free(s);
		json_decref(o);
	} else {
		pipeline_describe(p, &out);
		fputs(out.ptr, stdout);
	}
	buf_release(&out);
	pipeline_free(p);
	return EXIT_OK;
}

static int
pipeline_exec(struct cli *c, int argc, char **argv)
{
	int json = 0, n;
	struct cli_opt opts[] = { { "--json", &json, NULL } };

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	argv++;
	if (n == 0 || (n == 1 && !strcmp(argv[0], "list")))
		return list(c, json);
	if (n == 2 && !strcmp(argv[0], "show"))
		return show(c, argv[1], json);
	return cli_usage(&cmd_pipeline);
}

const struct cmd cmd_pipeline = {
	.name = "pipeline",
	.usage = "pipeline [list | show NAME] [--json]",
	.summary = "list pipelines, or show one's stages and transition table",
	.needs = CLI_NEEDS_CONFIG,
	.exec = pipeline_exec,
};
