/*
 * baton pipeline: the pipelines this repository can run (built-in and its
 * own), one pipeline's stages and derived transition table, and a check
 * of its providers and roles against the config.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "core/cnode.h"
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
		json_object_set_new(o, "builtin", json_boolean(p->builtin));
		json_object_set_new(o, "plugin", p->plugin ?
						 json_string(p->plugin) :
						 json_null());
		json_object_set_new(o, "stages", json_integer((json_int_t)p->nr_stages));
		json_object_set_new(o, "description",
				    p->description ? json_string(p->description) :
						     json_null());
		if (!json)
			cli_printf("%-16s %-10s %s\n", name,
				   p->builtin ? "built-in" :
				   p->plugin  ? "plugin" :
						"config",
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

/* Where success of s leads, by name: a stage, the terminal or "back". */
static const char *
next_name(const struct pipeline *p, const struct stage *s)
{
	if (s->next == STAGE_BACK)
		return "back";
	return s->next < 0 ? p->terminal : p->stages[s->next].name;
}

static json_t *
stage_json(const struct pipeline *p, const struct stage *s)
{
	json_t *o, *provs = json_array(), *phased = json_array();
	size_t j;

	o = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s*, s:s*, s:b, s:s, s:s*, "
		      "s:s*}",
		      "name", s->name, "kind", stage_kind_label(s),
		      "type", stage_kind_label(s), "index", s->index,
		      "status", s->status, "done", s->done, "role", s->role,
		      "side", s->side, "next", next_name(p, s), "on_fail",
		      s->on_fail < 0 ? NULL : p->stages[s->on_fail].name,
		      "on_changes",
		      s->on_changes < 0 ? NULL : p->stages[s->on_changes].name);
	for (j = 0; j < s->providers.nr; j++)
		json_array_append_new(provs, json_string(s->providers.v[j]));
	for (j = 0; j < s->nr_phased; j++)
		json_array_append_new(
			phased, json_pack("{s:s, s:s*, s:b}", "provider",
					  s->phased[j].provider, "model",
					  s->phased[j].model, "parallel",
					  s->phased[j].parallel));
	json_object_set_new(o, "providers", provs);
	json_object_set_new(o, "model",
			    s->model ? json_string(s->model) : json_null());
	json_object_set_new(o, "parallel", json_boolean(s->parallel));
	json_object_set_new(o, "group", json_integer(s->group));
	json_object_set_new(o, "gate", json_boolean(s->gate));
	json_object_set_new(o, "timeout_seconds",
			    json_integer(s->timeout_seconds));
	json_object_set_new(
		o, "budget",
		s->max_cost_usd || s->max_tokens ?
			json_pack("{s:f, s:I}", "max_cost_usd",
				  s->max_cost_usd, "max_tokens",
				  (json_int_t)s->max_tokens) :
			json_null());
	json_object_set_new(o, "on_reject",
			    s->kind != KIND_CODE_REVIEW ? json_null() :
			    s->on_reject_stop	       ? json_string("stop") :
							 json_string("rework"));
	json_object_set_new(o, "phased_reviews", phased);
	json_object_set_new(o, "review_interval",
			    json_integer(s->review_interval));
	json_object_set_new(o, "max_phased_iterations",
			    json_integer(s->max_phased_iterations));
	json_object_set_new(o, "implicit", json_boolean(s->implicit));
	json_object_set_new(o, "where", json_string(s->where ? s->where : ""));
	return o;
}

static json_t *
describe_json(const struct pipeline *p)
{
	json_t *o = json_object(), *stages = json_array(), *edges = json_array();
	json_t *groups = json_array();
	size_t i, j, first = 0, n;
	int g;

	for (i = 0; i < p->nr_stages; i++)
		json_array_append_new(stages, stage_json(p, &p->stages[i]));
	for (g = 1;; g++) {
		json_t *members = json_array();
		int after;

		n = pipeline_group(p, g, &first);
		if (!n) {
			json_decref(members);
			break;
		}
		for (j = first; j < first + n; j++)
			json_array_append_new(members,
					      json_string(p->stages[j].name));
		after = pipeline_after(p, &p->stages[first]);
		json_array_append_new(
			groups,
			json_pack("{s:i, s:o, s:s}", "group", g, "stages",
				  members, "next",
				  after < 0 ? p->terminal :
					      p->stages[after].name));
	}
	for (i = 0; i < p->nr_edges; i++)
		json_array_append_new(
			edges, json_pack("{s:s, s:s, s:s}", "from",
					 p->edges[i].from, "to", p->edges[i].to,
					 "why", edge_why_name(p->edges[i].why)));
	json_object_set_new(o, "name", json_string(p->name));
	json_object_set_new(o, "description",
			    p->description ? json_string(p->description) :
					     json_null());
	json_object_set_new(o, "builtin", json_boolean(p->builtin));
	json_object_set_new(o, "type", json_string(p->type));
	json_object_set_new(o, "max_iterations",
			    json_integer(p->max_iterations));
	json_object_set_new(o, "terminal", json_string(p->terminal));
	json_object_set_new(o, "stages", stages);
	json_object_set_new(o, "groups", groups);
	json_object_set_new(o, "transitions", edges);
	json_object_set_new(o, "workspace",
			    json_string(p->no_git ? "none" : "git"));
	if (p->state_of) {
		json_t *states = json_object();

		for (i = 0; i < p->nr_statuses; i++)
			if (p->state_of[i])
				json_object_set_new(states, p->statuses[i],
						    json_string(p->state_of[i]));
		json_object_set_new(o, "states", states);
	}
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
		cli_printf("%s", out.ptr);
	}
	buf_release(&out);
	pipeline_free(p);
	return EXIT_OK;
}

/*
 * Stage i as the parser names it in errors: "pipelines.NAME.stages[2]
 * (name)", counting only the stages that were written.
 */
static void
stage_path(const struct pipeline *p, size_t i, struct buf *out)
{
	const struct stage *s = &p->stages[i];
	size_t j, pos = 0;

	buf_addf(out, "%s%s.stages", p->builtin ? "" : "pipelines.", p->name);
	if (s->implicit) {
		buf_addf(out, " (%s, implicit)", s->name);
		return;
	}
	for (j = 0; j < i; j++)
		if (!p->stages[j].implicit)
			pos++;
	buf_addf(out, "[%zu] (%s)", pos, s->name);
}

/*
 * What the parser cannot know, since it does not see the config: that
 * each provider a stage or a phased reviewer names exists, and that each
 * role a stage needs (when it names no provider) is played by one. Pushes
 * one message per problem on errs.
 */
static void
check_providers(const struct config *cfg, const struct pipeline *p,
		struct strvec *errs)
{
	struct buf known = BUF_INIT, sp = BUF_INIT;
	size_t i, j;

	for (i = 0; i < cfg->nr_providers; i++)
		buf_addf(&known, "%s%s", i ? ", " : "", cfg->providers[i].name);
	if (!known.len)
		buf_adds(&known, "none are configured");
	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];

		buf_reset(&sp);
		stage_path(p, i, &sp);
		for (j = 0; j < s->providers.nr; j++)
			if (!config_find_provider(cfg, s->providers.v[j]))
				strvec_pushf(errs,
					     "%s: %s: provider '%s' does not "
					     "exist (providers: %s)",
					     s->where, sp.ptr,
					     s->providers.v[j], known.ptr);
		for (j = 0; j < s->nr_phased; j++)
			if (!config_find_provider(cfg, s->phased[j].provider))
				strvec_pushf(errs,
					     "%s: %s: phased_reviews[%zu]: "
					     "provider '%s' does not exist "
					     "(providers: %s)",
					     s->where, sp.ptr, j,
					     s->phased[j].provider, known.ptr);
		if (s->role && !s->providers.nr &&
		    !config_provider_for(cfg, s->role))
			strvec_pushf(errs,
				     "%s: %s: needs a %s, but no provider "
				     "plays that role: set roles.%s or "
				     "roles.default, or the stage's provider",
				     s->where, sp.ptr, s->role, s->role);
	}
	buf_release(&sp);
	buf_release(&known);
}

static int
has_name(const struct strvec *v, const char *s)
{
	size_t i;

	for (i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return 1;
	return 0;
}

/*
 * Checks the named pipeline, or every pipeline of the repository's config
 * and workflow.pipeline: each must parse, and its providers and roles
 * must exist in the config. Prints "pipeline NAME: ok (N stages)" or
 * every problem; EXIT_FAIL when any pipeline has one.
 */
static int
validate(struct cli *c, const char *name, int json)
{
	struct strvec names = STRVEC_INIT, errs = STRVEC_INIT;
	const struct cnode *user = c->cfg.pipelines;
	json_t *arr = json_array();
	size_t i, j;
	int rc = EXIT_OK;

	if (name) {
		strvec_push(&names, name);
	} else {
		for (i = 0; user && i < user->nr; i++)
			strvec_push(&names, user->kids[i]->key);
		if (c->cfg.pipeline && !has_name(&names, c->cfg.pipeline))
			strvec_push(&names, c->cfg.pipeline);
	}
	for (i = 0; i < names.nr; i++) {
		struct pipeline *p = NULL;
		struct err e = ERR_INIT;
		json_t *o, *list = json_array();

		if (engine_pipeline(&c->en, names.v[i], &p, &e))
			strvec_push(&errs, e.msg);
		else
			check_providers(&c->cfg, p, &errs);
		if (errs.nr)
			rc = EXIT_FAIL;
		for (j = 0; j < errs.nr; j++) {
			json_array_append_new(list, json_string(errs.v[j]));
			if (!json)
				cli_error("pipeline %s: %s", names.v[i],
					  errs.v[j]);
		}
		if (!json && !errs.nr)
			cli_printf("pipeline %s: ok (%zu stages)\n", names.v[i],
				   p->nr_stages);
		o = json_pack("{s:s, s:b}", "name", names.v[i], "ok",
			      !errs.nr);
		json_object_set_new(o, "stages",
				    p ? json_integer((json_int_t)p->nr_stages) :
					json_null());
		json_object_set_new(o, "errors", list);
		json_array_append_new(arr, o);
		strvec_clear(&errs);
		pipeline_free(p);
	}
	if (json) {
		char *s = json_dumps(arr, JSON_INDENT(2));

		puts(s);
		free(s);
	}
	json_decref(arr);
	strvec_clear(&names);
	return rc;
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
	if ((n == 1 || n == 2) && !strcmp(argv[0], "validate"))
		return validate(c, n == 2 ? argv[1] : NULL, json);
	return cli_usage(&cmd_pipeline);
}

const struct cmd cmd_pipeline = {
	.name = "pipeline",
	.usage = "pipeline [list | show NAME | validate [NAME]] [--json]",
	.summary = "list pipelines, show one's stages and transition table, or "
		   "check them against the config",
	.needs = CLI_NEEDS_CONFIG,
	.exec = pipeline_exec,
};
