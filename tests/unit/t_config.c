/*
 * Unit tests for the config model (core/config.c) and the config node tree
 * under it (core/cnode.c): YAML parsing with positions, layering and
 * origins, strict validation with errors that name file:line:col and key
 * path, `config show` output and the config hash. Under ASan every test
 * ends with a leak check, since the runner's children leave with _exit().
 */
#include "util/compat.h"

#include <limits.h>

#include "agent/agent.h"
#include "core/cnode.h"
#include "core/config.h"
#include "core/policy.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"
#include "test.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#endif

#ifdef T_ASAN
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() ASSERT_EQ(__lsan_do_recoverable_leak_check(), 0)
#else
#define LEAK_CHECK()                                                           \
	do {                                                                   \
	} while (0)
#endif

#define REPO ".baton/config.yaml"
#define USER "/home/u/.config/baton/config.yaml"

/* The example of config.h, in flow style. */
static const char example_flow[] =
    "providers:\n"
    "  scripted: {type: command, command: [\"/path/agent\", \"--x\"],\n"
    "             timeout_seconds: 1800, env: {K: V}}\n"
    "roles: {default: scripted, reviewer: scripted}\n"
    "workflow: {pipeline: feature, max_review_loops: 2}\n"
    "policies: {require_approval_at_stages: [executing]}\n"
    "validate: {commands: [\"make test\"], timeout_seconds: 600}\n"
    "pipelines: {mine: {stages: [a, b]}}\n";

/* The same config in block style, keys in another order. */
static const char example_block[] = "# the same, written out\n"
				    "workflow:\n"
				    "  max_review_loops: 2\n"
				    "  pipeline: feature\n"
				    "providers:\n"
				    "  scripted:\n"
				    "    type: command\n"
				    "    command:\n"
				    "      - /path/agent\n"
				    "      - --x\n"
				    "    timeout_seconds: 1800\n"
				    "    env:\n"
				    "      K: V\n"
				    "roles:\n"
				    "  default: scripted\n"
				    "  reviewer: scripted\n"
				    "policies:\n"
				    "  require_approval_at_stages:\n"
				    "    - executing\n"
				    "validate:\n"
				    "  commands:\n"
				    "    - make test\n"
				    "  timeout_seconds: 600\n"
				    "pipelines:\n"
				    "  mine:\n"
				    "    stages: [a, b]\n";

/* Builds a config from one YAML layer on top of the defaults. */
static int
load(const char *file, const char *yaml, struct config *c, struct err *e)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	int rc;

	config_builder_init(&b);
	rc = config_add_yaml(&b, file, yaml, strlen(yaml), e);
	if (rc < 0) {
		config_builder_release(&b);
		return rc;
	}
	return config_finish(&b, c, e);
}

/* Loads yaml expecting failure; returns the error message. */
static const char *
load_err(const char *yaml, struct err *e)
{
	struct config c;
	int rc = load(REPO, yaml, &c, e);

	if (rc == 0) {
		config_release(&c);
		test_fail(__FILE__, __LINE__, "config loaded: %s", yaml);
	}
	ASSERT_EQ(rc, BATON_EINVAL);
	return e->msg;
}

/* The line of show output starting with prefix, copied to a static. */
static const char *
show_line(const char *show, const char *prefix)
{
	static char line[512];
	const char *p = show, *nl;
	size_t n = strlen(prefix);

	while (*p) {
		nl = strchr(p, '\n');
		if (!nl)
			nl = p + strlen(p);
		if (!strncmp(p, prefix, n) && (size_t)(nl - p) < sizeof(line)) {
			memcpy(line, p, (size_t)(nl - p));
			line[nl - p] = '\0';
			return line;
		}
		p = *nl ? nl + 1 : nl;
	}
	test_fail(__FILE__, __LINE__, "no line '%s' in:\n%s", prefix, show);
}

static void
check_example(const struct config *c)
{
	const struct config_provider *p;

	ASSERT_EQ(c->nr_providers, 1);
	p = &c->providers[0];
	ASSERT_STREQ(p->name, "scripted");
	ASSERT_STREQ(p->type, "command");
	ASSERT_EQ(p->command.nr, 2);
	ASSERT_STREQ(p->command.v[0], "/path/agent");
	ASSERT_STREQ(p->command.v[1], "--x");
	ASSERT(p->command.v[2] == NULL);
	ASSERT_EQ(p->timeout_seconds, 1800);
	ASSERT_EQ(p->env.nr, 1);
	ASSERT_STREQ(p->env.v[0], "K=V");
	ASSERT(p->node == cnode_path(c->root, "providers.scripted"));
	ASSERT_EQ(c->nr_roles, 2);
	ASSERT_STREQ(c->roles[0].role, "default");
	ASSERT_EQ(c->roles[0].providers.nr, 1);
	ASSERT_STREQ(c->roles[0].providers.v[0], "scripted");
	ASSERT_STREQ(c->roles[1].role, "reviewer");
	ASSERT_STREQ(c->pipeline, "feature");
	ASSERT_EQ(c->max_review_loops, 2);
	ASSERT_EQ(c->approval_stages.nr, 1);
	ASSERT_STREQ(c->approval_stages.v[0], "executing");
	ASSERT_EQ(c->validate_commands.nr, 1);
	ASSERT_STREQ(c->validate_commands.v[0], "make test");
	ASSERT_EQ(c->validate_timeout_seconds, 600);
	ASSERT(c->store == NULL);
	ASSERT(c->pipelines != NULL);
	ASSERT(c->pipelines == cnode_get(c->root, "pipelines"));
	ASSERT(cnode_path(c->pipelines, "mine.stages.1") != NULL);
	ASSERT_STREQ(cnode_path(c->pipelines, "mine.stages.1")->value, "b");
	ASSERT_EQ(strlen(c->hash), 16);
	ASSERT_EQ(strspn(c->hash, "0123456789abcdef"), 16);
}

TEST(example_flow_style)
{
	struct err e = ERR_INIT;
	struct config c;

	ASSERT_OK(load(REPO, example_flow, &c, &e), &e);
	check_example(&c);
	ASSERT(config_provider_for(&c, "reviewer") == &c.providers[0]);
	ASSERT(config_provider_for(&c, "planner") == &c.providers[0]);
	ASSERT(config_requires_approval(&c, "executing", NULL));
	ASSERT(config_requires_approval(&c, NULL, "executing"));
	ASSERT(!config_requires_approval(&c, "planning", "review"));
	ASSERT(!config_requires_approval(&c, NULL, NULL));
	config_release(&c);
	LEAK_CHECK();
}

TEST(example_block_style)
{
	struct err e = ERR_INIT;
	struct config c;

	ASSERT_OK(load(REPO, example_block, &c, &e), &e);
	check_example(&c);
	config_release(&c);
	LEAK_CHECK();
}

TEST(parse_positions_and_quoting)
{
	struct err e = ERR_INIT;
	struct cnode *n = NULL;
	const struct cnode *v;
	const char *y = "a:\n  b: 'two'\n  c: \"3\"\n  d: 4\n  e: [x, 'y']\n";

	ASSERT_OK(cnode_parse_yaml(y, strlen(y), "f.yaml", &n, &e), &e);
	ASSERT_EQ(n->type, CNODE_MAP);
	v = cnode_path(n, "a.b");
	ASSERT_STREQ(v->value, "two");
	ASSERT_EQ(v->quoted, 1);
	ASSERT_EQ(v->line, 2);
	ASSERT_EQ(v->col, 6);
	ASSERT_EQ(v->key_line, 2);
	ASSERT_EQ(v->key_col, 3);
	ASSERT_STREQ(v->origin, "f.yaml");
	ASSERT_EQ(cnode_path(n, "a.c")->quoted, 1);
	ASSERT_EQ(cnode_path(n, "a.d")->quoted, 0);
	ASSERT_EQ(cnode_path(n, "a.e")->type, CNODE_SEQ);
	ASSERT_EQ(cnode_path(n, "a.e.1")->quoted, 1);
	ASSERT(cnode_path(n, "a.e.2") == NULL);
	ASSERT(cnode_path(n, "a.zz") == NULL);
	ASSERT(cnode_get(cnode_path(n, "a.d"), "x") == NULL);
	cnode_free(n);
	LEAK_CHECK();
}

TEST(typed_reads)
{
	struct err e = ERR_INIT;
	struct cnode *n = NULL;
	const char *y = "i: 42\nq: \"42\"\nneg: -3\nb: yes\nx: 1.5\n";
	long v = 0;
	int bv = 0;

	ASSERT_OK(cnode_parse_yaml(y, strlen(y), "t.yaml", &n, &e), &e);
	ASSERT_OK(cnode_int(cnode_get(n, "i"), "i", 0, 100, &v, &e), &e);
	ASSERT_EQ(v, 42);
	ASSERT_EQ(cnode_int(cnode_get(n, "i"), "i", 0, 10, &v, &e),
		  BATON_EINVAL);
	ASSERT_STREQ(
	    e.msg, "t.yaml:1:4: i: expected an integer from 0 to 10, got '42'");
	ASSERT_EQ(cnode_int(cnode_get(n, "q"), "q", 0, 100, &v, &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "got quoted '42'");
	ASSERT_OK(cnode_int(cnode_get(n, "neg"), "neg", -5, 5, &v, &e), &e);
	ASSERT_EQ(v, -3);
	ASSERT_EQ(cnode_int(cnode_get(n, "x"), "x", 0, LONG_MAX, &v, &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "x: expected a non-negative integer, got '1.5'");
	ASSERT_OK(cnode_bool(cnode_get(n, "b"), "b", &bv, &e), &e);
	ASSERT_EQ(bv, 1);
	ASSERT_EQ(cnode_bool(cnode_get(n, "i"), "i", &bv, &e), BATON_EINVAL);
	ASSERT_EQ(cnode_expect(n, CNODE_SEQ, "", &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "t.yaml:1:1: expected a sequence, got a mapping");
	ASSERT_EQ(cnode_expect(n, CNODE_SEQ, "top", &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "t.yaml:1:1: top: expected a sequence, "
			    "got a mapping");
	cnode_free(n);
	LEAK_CHECK();
}

TEST(empty_document_is_empty_map)
{
	struct err e = ERR_INIT;
	struct cnode *n = NULL;
	struct config c;

	ASSERT_OK(cnode_parse_yaml("", 0, "f", &n, &e), &e);
	ASSERT_EQ(n->type, CNODE_MAP);
	ASSERT_EQ(n->nr, 0);
	cnode_free(n);
	ASSERT_OK(cnode_parse_yaml("# nothing\n---\n", 14, "f", &n, &e), &e);
	ASSERT_EQ(n->type, CNODE_MAP);
	ASSERT_EQ(n->nr, 0);
	cnode_free(n);
	ASSERT_OK(load(REPO, "# only comments\n", &c, &e), &e);
	ASSERT_STREQ(c.pipeline, "feature");
	config_release(&c);
	LEAK_CHECK();
}

TEST(top_level_not_a_map)
{
	struct err e = ERR_INIT;

	load_err("- a\n- b\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:1: expected a mapping at the top level");
	load_err("hello\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:1: expected a mapping at the top level");
	LEAK_CHECK();
}

TEST(defaults_in_show)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	struct buf out = BUF_INIT;
	struct config c;

	config_builder_init(&b);
	ASSERT_OK(config_finish(&b, &c, &e), &e);
	ASSERT(b.root == NULL);
	ASSERT_STREQ(c.pipeline, "feature");
	ASSERT_EQ(c.max_review_loops, 2);
	ASSERT_EQ(c.validate_timeout_seconds, 600);
	ASSERT_EQ(c.validate_commands.nr, 0);
	ASSERT_EQ(c.approval_stages.nr, 0);
	ASSERT_EQ(c.nr_providers, 0);
	ASSERT(config_provider_for(&c, "reviewer") == NULL);
	config_show(&c, &out);
	ASSERT_CONTAINS(show_line(out.ptr, "workflow.pipeline = "),
			"workflow.pipeline = feature ");
	ASSERT_CONTAINS(show_line(out.ptr, "workflow.pipeline = "),
			"# default");
	ASSERT_CONTAINS(show_line(out.ptr, "workflow.max_review_loops = "),
			"= 2 ");
	ASSERT_CONTAINS(show_line(out.ptr, "workflow.max_review_loops = "),
			"# default");
	ASSERT_CONTAINS(show_line(out.ptr, "validate.timeout_seconds = "),
			"= 600 ");
	ASSERT_CONTAINS(show_line(out.ptr, "validate.commands = "),
			"validate.commands = [] ");
	ASSERT_CONTAINS(show_line(out.ptr, "validate.commands = "),
			"# default");
	ASSERT_CONTAINS(
	    show_line(out.ptr, "policies.require_approval_at_stages = "),
	    "= [] ");
	buf_release(&out);
	config_release(&c);
	LEAK_CHECK();
}

/* The "# ..." comments of show start in one column. */
TEST(show_is_aligned)
{
	struct err e = ERR_INIT;
	struct buf out = BUF_INIT;
	struct config c;
	const char *p, *nl, *hash;
	long col = -1;

	ASSERT_OK(load(REPO, example_block, &c, &e), &e);
	config_show(&c, &out);
	for (p = out.ptr; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		ASSERT(nl != NULL);
		hash = strstr(p, "    # ");
		ASSERT(hash != NULL && hash < nl);
		if (col < 0)
			col = hash - p;
		ASSERT_EQ(hash - p, col);
	}
	ASSERT_CONTAINS(out.ptr, "providers.scripted.command = "
				 "[\"/path/agent\", \"--x\"]");
	ASSERT_CONTAINS(show_line(out.ptr, "providers.scripted.command"),
			"# " REPO ":9:7");
	ASSERT_CONTAINS(out.ptr, "providers.scripted.env.K = V ");
	ASSERT_CONTAINS(out.ptr, "pipelines.mine.stages = [\"a\", \"b\"]");
	/* first-seen order: workflow came first (from the defaults) */
	ASSERT(strstr(out.ptr, "workflow.pipeline") <
	       strstr(out.ptr, "providers.scripted.type"));
	buf_release(&out);
	config_release(&c);
	LEAK_CHECK();
}

TEST(dump_sequence_of_maps)
{
	struct err e = ERR_INIT;
	struct buf out = BUF_INIT;
	struct cnode *n = NULL;
	const char *y = "s:\n  - name: a\n    n: 1\n  - name: \"b c\"\n"
			"  - plain\ne: {}\nq: \"2\"\nz:\n";

	ASSERT_OK(cnode_parse_yaml(y, strlen(y), "d.yaml", &n, &e), &e);
	cnode_dump(n, &out);
	ASSERT_CONTAINS(show_line(out.ptr, "s[0].name = a "), "# d.yaml:2:11");
	ASSERT_CONTAINS(show_line(out.ptr, "s[0].n = 1 "), "# d.yaml:3:8");
	ASSERT_CONTAINS(out.ptr, "s[1].name = \"b c\" ");
	ASSERT_CONTAINS(out.ptr, "s[2] = plain ");
	ASSERT_CONTAINS(out.ptr, "e = {} ");
	ASSERT_CONTAINS(out.ptr, "q = \"2\" ");
	ASSERT_CONTAINS(out.ptr, "z = null ");
	buf_release(&out);
	cnode_free(n);
	LEAK_CHECK();
}

TEST(layering_later_wins)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	struct buf out = BUF_INIT;
	struct config c;
	const char *user = "providers:\n"
			   "  a: {type: command, command: [a-agent]}\n"
			   "  b: {type: command, command: b-agent}\n"
			   "roles: {default: a}\n"
			   "workflow:\n"
			   "  pipeline: bugfix\n"
			   "  max_review_loops: 5\n"
			   "validate: {commands: [\"make\"]}\n";
	const char *repo = "roles:\n"
			   "  reviewer: b\n"
			   "workflow:\n"
			   "  max_review_loops: 3\n"
			   "validate:\n"
			   "  commands: [\"make check\", \"make lint\"]\n";
	char e1[] = "HOME=/home/u", e2[] = "BATON_PIPELINE=loop";
	char e3[] = "BATON_STORE=", e4[] = "BATON_PIPELINEX=no";
	char *envp[] = {e1, e2, e3, e4, NULL};

	config_builder_init(&b);
	ASSERT_OK(config_add_yaml(&b, USER, user, strlen(user), &e), &e);
	ASSERT_OK(config_add_yaml(&b, REPO, repo, strlen(repo), &e), &e);
	ASSERT_OK(config_add_env(&b, envp, &e), &e);
	ASSERT_OK(config_set(&b, "validate.timeout_seconds", "30",
			     "flag --validate-timeout", &e),
		  &e);
	ASSERT_OK(config_set(&b, "roles.fixer", "b", "flag --role", &e), &e);
	ASSERT_OK(config_finish(&b, &c, &e), &e);

	ASSERT_STREQ(c.pipeline, "loop");
	ASSERT_EQ(c.max_review_loops, 3);
	ASSERT_EQ(c.validate_timeout_seconds, 30);
	ASSERT_EQ(c.validate_commands.nr, 2);
	ASSERT_STREQ(c.validate_commands.v[0], "make check");
	ASSERT(c.store == NULL);
	ASSERT_EQ(c.nr_providers, 2);
	ASSERT_EQ(c.providers[1].command.nr, 1);
	ASSERT_STREQ(c.providers[1].command.v[0], "b-agent");
	ASSERT_EQ(c.providers[1].timeout_seconds, 1800);
	ASSERT_STREQ(config_provider_for(&c, "reviewer")->name, "b");
	ASSERT_STREQ(config_provider_for(&c, "fixer")->name, "b");
	ASSERT_STREQ(config_provider_for(&c, "planner")->name, "a");
	ASSERT_STREQ(config_provider_for(&c, NULL)->name, "a");

	config_show(&c, &out);
	ASSERT_CONTAINS(show_line(out.ptr, "workflow.pipeline = "), "= loop ");
	ASSERT_CONTAINS(show_line(out.ptr, "workflow.pipeline = "),
			"# env BATON_PIPELINE");
	ASSERT_CONTAINS(show_line(out.ptr, "workflow.max_review_loops = "),
			"= 3 ");
	ASSERT_CONTAINS(show_line(out.ptr, "workflow.max_review_loops = "),
			"# " REPO ":4:21");
	ASSERT_CONTAINS(show_line(out.ptr, "validate.timeout_seconds = "),
			"# flag --validate-timeout");
	ASSERT_CONTAINS(show_line(out.ptr, "validate.commands = "),
			"[\"make check\", \"make lint\"]");
	ASSERT_CONTAINS(show_line(out.ptr, "validate.commands = "),
			"# " REPO ":6:13");
	ASSERT_CONTAINS(show_line(out.ptr, "roles.default = "),
			"# " USER ":4:18");
	ASSERT_CONTAINS(show_line(out.ptr, "roles.reviewer = "),
			"# " REPO ":2:13");
	ASSERT_CONTAINS(show_line(out.ptr, "roles.fixer = "), "# flag --role");
	ASSERT_CONTAINS(show_line(out.ptr, "providers.b.command = "),
			"= b-agent ");
	ASSERT_CONTAINS(show_line(out.ptr, "providers.a.command = "),
			"= [\"a-agent\"] ");
	ASSERT(!strstr(out.ptr, "store"));
	buf_release(&out);
	config_release(&c);
	LEAK_CHECK();
}

TEST(env_values_are_checked)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	struct config c;
	char e1[] = "BATON_MAX_REVIEW_LOOPS=many";
	char e2[] = "BATON_STORE=sqlite:/tmp/x.db";
	char *envp[] = {e1, e2, NULL};

	config_builder_init(&b);
	ASSERT_OK(config_add_env(&b, envp, &e), &e);
	ASSERT_EQ(config_finish(&b, &c, &e), BATON_EINVAL);
	ASSERT(b.root == NULL);
	ASSERT_STREQ(e.msg, "env BATON_MAX_REVIEW_LOOPS: "
			    "workflow.max_review_loops: expected an integer "
			    "from 0 to 100, got 'many'");

	config_builder_init(&b);
	ASSERT_OK(config_add_env(&b, envp + 1, &e), &e);
	ASSERT_OK(config_add_env(&b, NULL, &e), &e);
	ASSERT_OK(config_finish(&b, &c, &e), &e);
	ASSERT_STREQ(c.store, "sqlite:/tmp/x.db");
	config_release(&c);
	LEAK_CHECK();
}

TEST(config_set_paths)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	struct config c;

	config_builder_init(&b);
	ASSERT_OK(config_set(&b, "providers.x.type", "command", "flag", &e),
		  &e);
	ASSERT_OK(
	    config_set(&b, "providers.x.command", "/bin/agent", "flag", &e),
	    &e);
	ASSERT_EQ(config_set(&b, "workflow.pipeline.deeper", "x", "flag", &e),
		  BATON_EINVAL);
	ASSERT_STREQ(e.msg, "cannot set 'workflow.pipeline.deeper': "
			    "'workflow.pipeline' is not a mapping");
	ASSERT_EQ(config_set(&b, "workflow..x", "x", "flag", &e), BATON_EINVAL);
	ASSERT_EQ(config_set(&b, "", "x", "flag", &e), BATON_EINVAL);
	ASSERT_OK(config_finish(&b, &c, &e), &e);
	ASSERT_EQ(c.nr_providers, 1);
	ASSERT_STREQ(c.providers[0].command.v[0], "/bin/agent");
	config_release(&c);

	/* a builder that is never finished */
	config_builder_init(&b);
	ASSERT_OK(config_set(&b, "store", "x", "flag", &e), &e);
	config_builder_release(&b);
	config_builder_release(&b);
	LEAK_CHECK();
}

TEST(malformed_flow_mapping)
{
	struct err e = ERR_INIT;

	load_err("store: x\nworkflow: {pipeline: feature\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":3:1: ");
	ASSERT_CONTAINS(e.msg, "did not find expected ',' or '}'");
	ASSERT_CONTAINS(e.msg, "(while parsing a flow mapping)");
	LEAK_CHECK();
}

TEST(malformed_tab_indent)
{
	struct err e = ERR_INIT;

	load_err("workflow:\n\tpipeline: feature\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":2:1: ");
	ASSERT_CONTAINS(e.msg, "found character that cannot start any token");
	load_err("workflow:\n  pipeline: feature\n max_review_loops: 2\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":3:");
	LEAK_CHECK();
}

TEST(malformed_utf8)
{
	struct err e = ERR_INIT;

	load_err("store: x\nworkflow: \xff\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":2:11: ");
	ASSERT_CONTAINS(e.msg, "(byte 0xff)");
	LEAK_CHECK();
}

TEST(unknown_key)
{
	struct err e = ERR_INIT;

	load_err("workflow:\n  pipeline: feature\n  max_reviw_loops: 2\n", &e);
	ASSERT_STREQ(e.msg,
		     REPO ":3:3: unknown key 'workflow.max_reviw_loops' "
			  "(expected one of: pipeline, max_review_loops)");
	load_err("store: x\nworkflw:\n  pipeline: x\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:1: unknown key 'workflw' (expected one "
				 "of: providers, roles, workflow, policies, "
				 "validate, pipelines, store, budget, "
				 "execution, runtime, merge, server, "
				 "reports, notify, repo, loop, assist, "
				 "forge, hooks, plugins, research, schedules)");
	load_err("providers:\n  a: {type: command, command: x, cmd: y}\n", &e);
	ASSERT_STREQ(e.msg,
		     REPO ":2:34: unknown key 'providers.a.cmd' "
			  "(expected one of: type, command, args, env, model, "
			  "effort, base_url, api_key_env, timeout_seconds, "
			  "max_retries, max_steps, max_tokens, pricing, "
			  "isolated)");
	load_err("roles: {boss: x}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:9: unknown key 'roles.boss' (expected "
				    "one of: default, planner, architect, ");
	LEAK_CHECK();
}

TEST(hooks_section)
{
	struct err e = ERR_INIT;
	struct config c;

	ASSERT_OK(load(REPO,
		       "hooks:\n"
		       "  worktree_setup: [\"cp ../.env .env\", \"npm ci\"]\n"
		       "  before_stage: \"make lint\"\n"
		       "  on_terminal: []\n"
		       "  timeout_seconds: 30\n",
		       &c, &e),
		  &e);
	ASSERT_EQ(c.hooks.cmds[HOOK_WORKTREE_SETUP].nr, 2);
	ASSERT_STREQ(c.hooks.cmds[HOOK_WORKTREE_SETUP].v[1], "npm ci");
	ASSERT_EQ(c.hooks.cmds[HOOK_BEFORE_STAGE].nr, 1);
	ASSERT_STREQ(c.hooks.cmds[HOOK_BEFORE_STAGE].v[0], "make lint");
	ASSERT_EQ(c.hooks.cmds[HOOK_ON_TERMINAL].nr, 0);
	ASSERT_EQ(c.hooks.cmds[HOOK_BEFORE_MERGE].nr, 0);
	ASSERT_EQ(c.hooks.timeout_seconds, 30);
	ASSERT_STREQ(config_hook_name(HOOK_WORKTREE_TEARDOWN),
		     "worktree_teardown");
	config_release(&c);

	ASSERT_OK(load(REPO, "store: x\n", &c, &e), &e);
	ASSERT_EQ(c.hooks.timeout_seconds, 600);
	config_release(&c);

	load_err("hooks:\n  before_stage: [a]\n  befor_merge: [b]\n", &e);
	ASSERT_STREQ(e.msg,
		     REPO ":3:3: unknown key 'hooks.befor_merge' (expected "
			  "one of: worktree_setup, before_stage, after_stage, "
			  "before_merge, on_terminal, worktree_teardown, "
			  "timeout_seconds)");
	load_err("hooks:\n  after_stage: [a, {b: c}]\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":2:20: hooks.after_stage[1]: ");
	load_err("hooks: {timeout_seconds: 0}\n", &e);
	ASSERT_CONTAINS(e.msg, "hooks.timeout_seconds: expected an integer "
			       "from 1 to 86400, got '0'");
	load_err("hooks: [a]\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:8: hooks: ");
	LEAK_CHECK();
}

TEST(wrong_types)
{
	struct err e = ERR_INIT;

	load_err("workflow:\n  pipeline: feature\n  max_review_loops: two\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":3:21: workflow.max_review_loops: expected "
				 "an integer from 0 to 100, got 'two'");
	load_err("workflow: {max_review_loops: 101}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:30: workflow.max_review_loops: expected "
				 "an integer from 0 to 100, got '101'");
	load_err("validate: {timeout_seconds: 0}\n", &e);
	ASSERT_CONTAINS(e.msg, "validate.timeout_seconds: expected an integer "
			       "from 1 to 86400, got '0'");
	load_err("workflow: [a]\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:11: workflow: expected a mapping, "
				 "got a sequence");
	load_err("workflow: {pipeline: [a]}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:22: workflow.pipeline: expected a "
				 "string, got a sequence");
	/* a map is a conditional check: {run, when_changed} */
	load_err("validate:\n  commands:\n    - make\n    - {a: b}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":4:8: unknown key 'validate.commands[1].a' "
				 "(expected one of: run, when_changed)");
	load_err("validate:\n  commands:\n    - make\n    - [a]\n", &e);
	ASSERT_STREQ(e.msg, REPO ":4:7: validate.commands[1]: expected a "
				 "string, got a sequence");
	load_err("pipelines: [a]\n", &e);
	ASSERT_CONTAINS(e.msg, "pipelines: expected a mapping");
	load_err("workflow:\n  max_review_loops: |\n    line one\n"
		 "    line two\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "got 'line one...'");
	load_err("store: {a: b}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:8: store: expected a string");
	load_err("providers:\n  p: {type: command, command: x, "
		 "timeout_seconds: 604801}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "providers.p.timeout_seconds: expected an "
			       "integer from 1 to 604800, got '604801'");
	load_err("providers:\n  p: {type: command, command: x, env: [a]}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "providers.p.env: expected a mapping");
	load_err("providers:\n  p: [x]\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:6: providers.p: expected a mapping, "
				 "got a sequence");
	LEAK_CHECK();
}

TEST(runtime_and_merge)
{
	struct err e = ERR_INIT;
	struct config c;

	ASSERT_OK(load(REPO, "runtime: {workers: 8, lease_seconds: 5, judge: "
			     "false, auto_merge: true, max_rework_depth: 0}\n"
			     "merge: {base_branch: trunk, retries: 1}\n",
		       &c, &e),
		  &e);
	ASSERT_EQ(c.runtime.workers, 8);
	ASSERT_EQ(c.runtime.lease_seconds, 5);
	ASSERT_EQ(c.runtime.judge, 0);
	ASSERT_EQ(c.runtime.auto_merge, 1);
	ASSERT_EQ(c.runtime.max_rework_depth, 0);
	ASSERT_EQ(c.runtime.sweep_seconds, 5);	/* default */
	ASSERT_EQ(c.runtime.max_attempts, 3);	/* default */
	ASSERT_STREQ(c.merge.base_branch, "trunk");
	ASSERT_EQ(c.merge.retries, 1);
	ASSERT_EQ(c.merge.backoff_seconds, 5); /* default */
	config_release(&c);
	load_err("runtime: {workers: 0}\n", &e);
	ASSERT_CONTAINS(e.msg, "runtime.workers: expected an integer from 1 "
			       "to 256, got '0'");
	load_err("runtime: {judge: maybe}\n", &e);
	ASSERT_CONTAINS(e.msg, "runtime.judge");
	load_err("runtime: {lease: 3}\n", &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'runtime.lease'");
	load_err("merge: {retries: -1}\n", &e);
	ASSERT_CONTAINS(e.msg, "merge.retries");
	LEAK_CHECK();
}

TEST(server_and_reports)
{
	struct err e = ERR_INIT;
	struct config c;

	ASSERT_OK(load(REPO, "store: x\n", &c, &e), &e);
	ASSERT(c.server.listen == NULL); /* serve's default: 127.0.0.1:7070 */
	ASSERT_EQ(c.server.threads, 64);
	ASSERT_EQ(c.server.max_body_kb, 1024);
	ASSERT_EQ(c.server.max_streams, 10000);
	ASSERT_EQ(c.reports.milestone_after_seconds, 300);
	ASSERT_EQ(c.reports.periodic_after_seconds, 1800);
	ASSERT_EQ(c.reports.interval_seconds, 600);
	ASSERT_EQ(c.nr_webhooks, 0);
	config_release(&c);

	ASSERT_OK(load(REPO,
		       "server: {listen: \"[::1]:0\", threads: 4, "
		       "max_body_kb: 64, max_streams: 20}\n"
		       "reports: {milestone_after_seconds: 0, "
		       "periodic_after_seconds: 60, interval_seconds: 1}\n",
		       &c, &e),
		  &e);
	ASSERT_STREQ(c.server.listen, "[::1]:0");
	ASSERT_EQ(c.server.threads, 4);
	ASSERT_EQ(c.server.max_body_kb, 64);
	ASSERT_EQ(c.server.max_streams, 20);
	ASSERT_EQ(c.reports.milestone_after_seconds, 0);
	ASSERT_EQ(c.reports.periodic_after_seconds, 60);
	ASSERT_EQ(c.reports.interval_seconds, 1);
	config_release(&c);
	ASSERT_OK(load(REPO, "server: {listen: off}\n", &c, &e), &e);
	ASSERT_STREQ(c.server.listen, "off");
	config_release(&c);
	ASSERT_OK(load(REPO,
		       "server: {tls: {cert: /etc/b.crt, key: b.key}, "
		       "insecure: true}\n",
		       &c, &e),
		  &e);
	ASSERT_STREQ(c.server.tls_cert, "/etc/b.crt");
	ASSERT_STREQ(c.server.tls_key, "b.key");
	ASSERT_EQ(c.server.insecure, 1);
	config_release(&c);

	load_err("server:\n  listen: nonsense\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:11: server.listen: expected HOST:PORT "
				 "(such as 127.0.0.1:7070) or off");
	load_err("server: {listen: \"127.0.0.1:99999\"}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:18: server.listen: expected "
				    "HOST:PORT");
	load_err("server: {listen: \"127.0.0.1:\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.listen: expected HOST:PORT");
	load_err("server: {listen: \":7070\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.listen: expected HOST:PORT");
	load_err("server: {listen: \"127.0.0.1:+80\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.listen: expected HOST:PORT");
	load_err("server: {listen: \"127.0.0.1: 80\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.listen: expected HOST:PORT");
	load_err("server: {listen: \"\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.listen: expected a non-empty string");
	load_err("server: {threads: 3}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:19: server.threads: expected an "
				    "integer from 4 to 1024, got '3'");
	load_err("server: {threads: 1025}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.threads: expected an integer from 4 "
			       "to 1024, got '1025'");
	load_err("server: {max_body_kb: 0}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.max_body_kb");
	load_err("server: {max_streams: 0}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.max_streams: expected an integer from "
			       "1 to 1000000, got '0'");
	load_err("server: {port: 7070}\n", &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'server.port' (expected one of: "
			       "listen, threads, max_body_kb, max_streams, "
			       "public_url, tls, insecure)");
	load_err("server: {tls: {cert: a.crt}}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:15: server.tls: needs both cert and "
				    "key");
	load_err("server: {tls: {key: a.key}}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.tls: needs both cert and key");
	load_err("server: {tls: {cert: a.crt, key: a.key, ca: x}}\n", &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'server.tls.ca'");
	load_err("server: {tls: {cert: \"\", key: a.key}}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.tls.cert: expected a non-empty string");
	load_err("server: {insecure: maybe}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.insecure");
	load_err("reports: {interval_seconds: 0}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:29: reports.interval_seconds: expected "
				 "an integer from 1 to 86400, got '0'");
	load_err("reports: {milestone_after_seconds: -1}\n", &e);
	ASSERT_CONTAINS(e.msg, "reports.milestone_after_seconds");
	load_err("reports: {every: 5}\n", &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'reports.every'");
	LEAK_CHECK();
}

TEST(repo_url)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	struct config c;
	char var[] = "BATON_REPO_URL=ssh://git@host/other.git";
	char *envp[] = { var, NULL };

	ASSERT_OK(load(REPO, "store: x\n", &c, &e), &e);
	ASSERT(c.repo_url == NULL); /* one repository, no worker hosts */
	config_release(&c);
	ASSERT_OK(load(REPO, "repo: {url: \"git@host:team/app.git\"}\n", &c,
		       &e),
		  &e);
	ASSERT_STREQ(c.repo_url, "git@host:team/app.git");
	config_release(&c);
	load_err("repo: {url: \"\"}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:13: repo.url: expected a non-empty "
				 "string");
	load_err("repo: {remote: origin}\n", &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'repo.remote' (expected one of: "
			       "url)");
	load_err("repo: [a]\n", &e);
	ASSERT_CONTAINS(e.msg, "repo");

	config_builder_init(&b);
	ASSERT_OK(config_add_env(&b, envp, &e), &e);
	ASSERT_OK(config_finish(&b, &c, &e), &e);
	ASSERT_STREQ(c.repo_url, "ssh://git@host/other.git");
	config_release(&c);
	LEAK_CHECK();
}

TEST(listen_from_env)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	struct config c;
	char good[] = "BATON_LISTEN=0.0.0.0:8080";
	char bad[] = "BATON_LISTEN=nonsense";
	char *envp[] = { good, NULL };

	config_builder_init(&b);
	ASSERT_OK(config_add_env(&b, envp, &e), &e);
	ASSERT_OK(config_finish(&b, &c, &e), &e);
	ASSERT_STREQ(c.server.listen, "0.0.0.0:8080");
	config_release(&c);

	envp[0] = bad;
	config_builder_init(&b);
	ASSERT_OK(config_add_env(&b, envp, &e), &e);
	ASSERT_EQ(config_finish(&b, &c, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "env BATON_LISTEN: server.listen: expected "
			    "HOST:PORT (such as 127.0.0.1:7070) or off");
	LEAK_CHECK();
}

TEST(webhooks)
{
	struct err e = ERR_INIT;
	struct config c;
	const struct config_webhook *w;

	ASSERT_OK(load(REPO,
		       "notify:\n"
		       "  webhooks:\n"
		       "    - url: https://hooks.example.com/baton\n"
		       "      events: [approval_requested, run_terminal]\n"
		       "      secret_env: BATON_WEBHOOK_SECRET\n"
		       "      retries: 0\n"
		       "      backoff_seconds: 0\n"
		       "      timeout_seconds: 3\n"
		       "    - url: http://127.0.0.1:9000/x\n"
		       "    - {url: \"http://h/y\", events: budget_crossed}\n",
		       &c, &e),
		  &e);
	ASSERT_EQ(c.nr_webhooks, 3);
	w = &c.webhooks[0];
	ASSERT_STREQ(w->url, "https://hooks.example.com/baton");
	ASSERT_EQ(w->events.nr, 2);
	ASSERT_STREQ(w->events.v[0], "approval_requested");
	ASSERT_STREQ(w->events.v[1], "run_terminal");
	ASSERT_STREQ(w->secret_env, "BATON_WEBHOOK_SECRET");
	ASSERT_EQ(w->retries, 0);
	ASSERT_EQ(w->backoff_seconds, 0);
	ASSERT_EQ(w->timeout_seconds, 3);
	w = &c.webhooks[1]; /* the defaults */
	ASSERT_STREQ(w->url, "http://127.0.0.1:9000/x");
	ASSERT_EQ(w->events.nr, 0); /* all kinds */
	ASSERT(w->secret_env == NULL);
	ASSERT_EQ(w->retries, 5);
	ASSERT_EQ(w->backoff_seconds, 1);
	ASSERT_EQ(w->timeout_seconds, 10);
	w = &c.webhooks[2];
	ASSERT_EQ(w->events.nr, 1);
	ASSERT_STREQ(w->events.v[0], "budget_crossed");
	config_release(&c);

	ASSERT_OK(load(REPO, "notify:\n  webhooks: []\n", &c, &e), &e);
	ASSERT_EQ(c.nr_webhooks, 0);
	config_release(&c);
	ASSERT_OK(load(REPO, "notify:\n", &c, &e), &e);
	ASSERT_EQ(c.nr_webhooks, 0);
	config_release(&c);

	load_err("notify:\n  webhooks:\n    - events: [run_terminal]\n", &e);
	ASSERT_STREQ(e.msg, REPO ":3:7: notify.webhooks[0]: a webhook needs "
				 "a url");
	load_err("notify:\n  webhooks:\n    - url: http://a/\n"
		 "    - url: ftp://b/\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:12: notify.webhooks[1].url: expected an "
				 "http:// or https:// URL");
	load_err("notify:\n  webhooks:\n    - url: http://a/\n"
		 "      events: [run_terminal, run_started]\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:30: notify.webhooks[0].events[1]: "
				 "'run_started' is not one of: "
				 "approval_requested, run_terminal, "
				 "budget_crossed, schedule");
	load_err("notify:\n  webhooks:\n    - url: http://a/\n"
		 "      events: everything\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:15: notify.webhooks[0].events: "
				 "'everything' is not one of: "
				 "approval_requested, run_terminal, "
				 "budget_crossed, schedule");
	load_err("notify:\n  webhooks:\n    - url: http://a/\n"
		 "      secret: hunter2\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:7: unknown key "
				 "'notify.webhooks[0].secret' (expected one "
				 "of: url, events, secret_env, format, name, "
				 "retries, backoff_seconds, timeout_seconds)");
	load_err("notify:\n  webhooks:\n    - url: http://a/\n"
		 "      secret_env: $SECRET\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:19: notify.webhooks[0].secret_env: "
				 "not a valid variable name");
	load_err("notify:\n  webhooks: {url: http://a/}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:13: notify.webhooks: expected a "
				 "sequence, got a mapping");
	load_err("notify:\n  webhooks: http://a/\n", &e);
	ASSERT_CONTAINS(e.msg, "notify.webhooks: expected a sequence");
	load_err("notify:\n  webhooks:\n    - http://a/\n", &e);
	ASSERT_CONTAINS(e.msg, "notify.webhooks[0]: expected a mapping");
	load_err("notify:\n  hooks: []\n", &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'notify.hooks' (expected one of: "
			       "webhooks, targets, link_ttl_seconds)");
	load_err("notify:\n  webhooks:\n    - url: http://a/\n"
		 "      retries: 101\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "notify.webhooks[0].retries: expected an "
			       "integer from 0 to 100, got '101'");
	load_err("notify:\n  webhooks:\n    - url: http://a/\n"
		 "      timeout_seconds: 0\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "notify.webhooks[0].timeout_seconds: expected "
			       "an integer from 1 to 600, got '0'");
	LEAK_CHECK();
}

TEST(forge_section)
{
	struct err e = ERR_INIT;
	struct config c;
	const struct config_forge *f;

	/* no section: no forge, nothing allocated */
	ASSERT_OK(load(REPO, "workflow: {pipeline: feature}\n", &c, &e), &e);
	ASSERT(c.forge.type == NULL);
	ASSERT(c.forge.repo == NULL);
	ASSERT(c.forge.api_url == NULL);
	config_release(&c);

	/* the example, with every key written */
	ASSERT_OK(load(REPO,
		       "forge:\n"
		       "  type: github\n"
		       "  repo: acme/app\n"
		       "  token_env: ACME_TOKEN\n"
		       "  api_url: https://ghe.example.com/api/v3//\n"
		       "  remote: upstream\n"
		       "  intake: {label: baton}\n"
		       "  pull_requests: {draft: false, auto_merge: true,"
		       " merge_method: rebase}\n"
		       "  reactions: {ci_failed: ask, changes_requested:"
		       " ignore, max_rounds: 0, label: help-wanted}\n"
		       "  webhook_secret_env: ACME_HOOK_SECRET\n"
		       "  poll_seconds: 0\n",
		       &c, &e),
		  &e);
	f = &c.forge;
	ASSERT_STREQ(f->type, "github");
	ASSERT_STREQ(f->repo, "acme/app");
	ASSERT_STREQ(f->token_env, "ACME_TOKEN");
	ASSERT_STREQ(f->api_url, "https://ghe.example.com/api/v3");
	ASSERT_STREQ(f->remote, "upstream");
	ASSERT_STREQ(f->intake_label, "baton");
	ASSERT_EQ(f->pr_draft, 0);
	ASSERT_EQ(f->auto_merge, 1);
	ASSERT_STREQ(f->merge_method, "rebase");
	ASSERT_STREQ(f->on_ci_failed, "ask");
	ASSERT_STREQ(f->on_changes_requested, "ignore");
	ASSERT_EQ(f->max_rounds, 0);
	ASSERT_STREQ(f->human_label, "help-wanted");
	ASSERT_STREQ(f->webhook_secret_env, "ACME_HOOK_SECRET");
	ASSERT_EQ(f->poll_seconds, 0);
	config_release(&c);

	/* the least: type and repo; the rest are the defaults */
	ASSERT_OK(load(REPO, "forge: {type: github, repo: o-1/my.app_2}\n", &c,
		       &e),
		  &e);
	f = &c.forge;
	ASSERT_STREQ(f->repo, "o-1/my.app_2");
	ASSERT_STREQ(f->token_env, "GITHUB_TOKEN");
	ASSERT_STREQ(f->api_url, "https://api.github.com");
	ASSERT_STREQ(f->remote, "origin");
	ASSERT(f->intake_label == NULL);
	ASSERT_EQ(f->pr_draft, 0);
	ASSERT_EQ(f->auto_merge, 0);
	ASSERT_STREQ(f->merge_method, "squash");
	ASSERT_STREQ(f->on_ci_failed, "fix");
	ASSERT_STREQ(f->on_changes_requested, "fix");
	ASSERT_EQ(f->max_rounds, 3);
	ASSERT_STREQ(f->human_label, "baton:needs-human");
	ASSERT(f->webhook_secret_env == NULL);
	ASSERT_EQ(f->poll_seconds, 60);
	config_release(&c);

	/* a later layer changes one key and keeps the others */
	ASSERT_OK(load(REPO,
		       "forge:\n  type: github\n  repo: acme/app\n"
		       "  api_url: http://127.0.0.1:8080/\n"
		       "  intake:\n    label:\n",
		       &c, &e),
		  &e);
	ASSERT_STREQ(c.forge.api_url, "http://127.0.0.1:8080");
	ASSERT(c.forge.intake_label == NULL);
	config_release(&c);

	/* bad input, each named with its place and key */
	load_err("forge:\n  type: github\n  token_env: T\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:3: forge: a forge needs a repo "
				 "(owner/name)");
	load_err("forge:\n  repo: acme/app\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:3: forge: a forge needs a type "
				 "(github)");
	load_err("forge:\n  type: gitlab\n  repo: acme/app\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:9: forge.type: 'gitlab' is not one of: "
				 "github");
	load_err("forge:\n  type: github\n  repo: acme\n", &e);
	ASSERT_STREQ(e.msg, REPO ":3:9: forge.repo: expected owner/name "
				 "(letters, digits, '-', '_' and '.')");
	load_err("forge: {type: github, repo: acme/app/x}\n", &e);
	ASSERT_CONTAINS(e.msg, "forge.repo: expected owner/name");
	load_err("forge: {type: github, repo: acme/..}\n", &e);
	ASSERT_CONTAINS(e.msg, "forge.repo: expected owner/name");
	load_err("forge: {type: github, repo: \"a b/c\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "forge.repo: expected owner/name");
	load_err("forge: {type: github, repo: /app}\n", &e);
	ASSERT_CONTAINS(e.msg, "forge.repo: expected owner/name");
	load_err("forge:\n  type: github\n  repo: acme/app\n"
		 "  api_url: ftp://h/\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:12: forge.api_url: expected an http:// "
				 "or https:// URL");
	load_err("forge: {type: github, repo: a/b, api_url: \"https://\"}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "forge.api_url: expected a URL with a host");
	load_err("forge: {type: github, repo: a/b, token_env: $TOKEN}\n", &e);
	ASSERT_CONTAINS(e.msg, "forge.token_env: not a valid variable name");
	load_err("forge:\n  type: github\n  repo: a/b\n"
		 "  pull_requests: {draft: true}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, ":4:26: forge.pull_requests.draft: draft PRs "
			       "are not supported");
	load_err("forge: {type: github, repo: a/b, remote: --upload-pack=x}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "forge.remote: not a valid remote name");
	load_err("forge:\n  type: github\n  repo: a/b\n"
		 "  pull_requests: {merge_method: fast-forward}\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:33: forge.pull_requests.merge_method: "
				 "'fast-forward' is not one of: merge, "
				 "squash, rebase");
	load_err("forge:\n  type: github\n  repo: a/b\n"
		 "  pull_requests: {draft: maybe}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "forge.pull_requests.draft:");
	load_err("forge:\n  type: github\n  repo: a/b\n"
		 "  reactions: {ci_failed: retry}\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:26: forge.reactions.ci_failed: 'retry' "
				 "is not one of: fix, ask, ignore");
	load_err("forge:\n  type: github\n  repo: a/b\n"
		 "  reactions: {changes_requested: later}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "forge.reactions.changes_requested: 'later' "
			       "is not one of: fix, ask, ignore");
	load_err("forge:\n  type: github\n  repo: a/b\n"
		 "  reactions: {max_rounds: 101}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "forge.reactions.max_rounds: expected an "
			       "integer from 0 to 100, got '101'");
	load_err("forge: {type: github, repo: a/b, poll_seconds: 86401}\n", &e);
	ASSERT_CONTAINS(e.msg, "forge.poll_seconds: expected an integer from "
			       "0 to 86400, got '86401'");
	load_err("forge: {type: github, repo: a/b, poll_seconds: -1}\n", &e);
	ASSERT_CONTAINS(e.msg, "forge.poll_seconds:");
	load_err("forge: {type: github, repo: a/b, intake: baton}\n", &e);
	ASSERT_CONTAINS(e.msg, "forge.intake: expected a mapping");
	load_err("forge:\n  type: github\n  repo: a/b\n"
		 "  intake: {labels: [x]}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'forge.intake.labels' (expected "
			       "one of: label)");
	load_err("forge:\n  type: github\n  repo: a/b\n  token: ghp_x\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":4:3: unknown key 'forge.token'");
	load_err("forge:\n  type: github\n  repo: a/b\n"
		 "  reactions: {ci: fix}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'forge.reactions.ci'");
	load_err("forge: {type: github, repo: a/b,"
		 " webhook_secret_env: \"A-B\"}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "forge.webhook_secret_env: not a valid "
			       "variable name");
	load_err("forge: github\n", &e);
	ASSERT_CONTAINS(e.msg, "forge: expected a mapping");
	LEAK_CHECK();
}

TEST(single_scalars_are_lists_of_one)
{
	struct err e = ERR_INIT;
	struct config c;
	const char *y =
	    "validate: {commands: make check}\n"
	    "policies: {require_approval_at_stages: merging}\n"
	    "providers:\n  p: {type: command, command: agent --x}\n";

	ASSERT_OK(load(REPO, y, &c, &e), &e);
	ASSERT_EQ(c.validate_commands.nr, 1);
	ASSERT_STREQ(c.validate_commands.v[0], "make check");
	ASSERT_EQ(c.approval_stages.nr, 1);
	ASSERT(config_requires_approval(&c, NULL, "merging"));
	ASSERT_EQ(c.providers[0].command.nr, 1);
	ASSERT_STREQ(c.providers[0].command.v[0], "agent --x");
	config_release(&c);
	LEAK_CHECK();
}

TEST(empty_sections_override_nothing)
{
	struct err e = ERR_INIT;
	struct config c;

	ASSERT_OK(
	    load(REPO, "workflow:\nroles:\nvalidate:\n  commands:\n", &c, &e),
	    &e);
	ASSERT_STREQ(c.pipeline, "feature");
	ASSERT_EQ(c.max_review_loops, 2);
	ASSERT_EQ(c.nr_roles, 0);
	ASSERT_EQ(c.validate_commands.nr, 0);
	config_release(&c);
	LEAK_CHECK();
}

TEST(role_unknown_provider)
{
	struct err e = ERR_INIT;

	load_err("providers:\n"
		 "  a: {type: command, command: [x]}\n"
		 "  b: {type: command, command: [y]}\n"
		 "roles:\n"
		 "  default: a\n"
		 "  reviewer: x\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":6:13: roles.reviewer: no provider named "
				 "'x' (providers: a, b)");
	load_err("roles: {default: a}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:18: roles.default: no provider named "
				 "'a' (no providers are configured)");
	LEAK_CHECK();
}

TEST(provider_problems)
{
	struct err e = ERR_INIT;

	load_err("providers:\n  a:\n    type: command\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":3:5: providers.a: missing required key "
				    "'command'");
	load_err("providers:\n  a: {type: command, command: []}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":2:31: providers.a.command: expected a "
				    "non-empty list of strings");
	load_err("providers:\n  a: {type: command, command: ''}\n", &e);
	ASSERT_CONTAINS(e.msg, "providers.a.command: the program name is "
			       "empty");
	load_err("providers:\n  a: {command: [x]}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:6: providers.a: missing required key "
				 "'type' (one of: claude-code, codex, gemini, "
				 "qwen, opencode, aider, copilot, pi, kilo, "
				 "cline, continue, amp, auggie, crush, openai, "
				 "anthropic, command, acp)");
	load_err("providers:\n  a: {type: http, command: [x]}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:13: providers.a.type: unknown provider "
				 "type 'http' (expected: claude-code, codex, "
				 "gemini, qwen, opencode, aider, copilot, pi, "
				 "kilo, cline, continue, amp, auggie, crush, "
				 "openai, anthropic, command, acp)");
	load_err("providers:\n  a: {type: openai}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":2:6: providers.a: missing required key "
				    "'model'");
	load_err("providers:\n  a: {type: anthropic, model: m, command: x}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "providers.a.command: baton's own agent runs "
			       "no program");
	load_err("providers:\n  a: {type: codex, base_url: ftp://x}\n", &e);
	ASSERT_CONTAINS(e.msg, "providers.a.base_url: expected an http:// or "
			       "https:// URL");
	load_err("providers:\n  a: {type: codex, effort: max}\n", &e);
	ASSERT_CONTAINS(e.msg, "providers.a.effort: 'max' is not one of: low, "
			       "medium, high");
	load_err("providers:\n  a: {type: codex, api_key_env: 1KEY}\n", &e);
	ASSERT_CONTAINS(e.msg, "providers.a.api_key_env: not a valid variable "
			       "name");
	load_err("providers:\n  a: {type: codex, pricing: {input: -1}}\n", &e);
	ASSERT_CONTAINS(e.msg, "providers.a.pricing.input: -1 is out of range");
	load_err("providers:\n  a: {type: codex, pricing: {in: 1}}\n", &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'providers.a.pricing.in'");
	load_err("providers:\n  a: {type: codex, max_steps: 0}\n", &e);
	ASSERT_CONTAINS(e.msg, "providers.a.max_steps: expected an integer "
			       "from 1 to 10000");
	load_err("execution: {sandbox: docker}\n", &e);
	ASSERT_CONTAINS(e.msg, "execution.sandbox: 'docker' is not one of: "
			       "auto, bwrap, none");
	load_err("budget: {max_cost_usd: lots}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:24: budget.max_cost_usd: expected a "
				    "number");
	LEAK_CHECK();
}

TEST(agent_providers)
{
	struct err e = ERR_INIT;
	const struct config_provider *ps[4];
	struct config c;
	const char *y =
	    "providers:\n"
	    "  claude: {type: claude-code, model: claude-sonnet-4-5}\n"
	    "  local:\n"
	    "    type: openai\n"
	    "    base_url: http://127.0.0.1:11434/v1\n"
	    "    model: qwen\n"
	    "    api_key_env: LOCAL_KEY\n"
	    "    args: [--x]\n"
	    "    max_retries: 0\n"
	    "    max_tokens: 5000\n"
	    "    pricing: {input: 1.5, output: 6}\n"
	    "roles: {default: claude, reviewer: [claude, local], "
	    "fixer: 'local, claude'}\n"
	    "budget: {max_cost_usd: 2.5, max_tokens: 100000, "
	    "max_wall_minutes: 30}\n"
	    "policies: {allowed_paths: [src/, 'docs/**', '*.md']}\n"
	    "execution: {sandbox: bwrap, quota_retries: 2}\n";

	ASSERT_OK(load(REPO, y, &c, &e), &e);
	ASSERT_EQ(c.nr_providers, 2);
	ASSERT_EQ(c.providers[0].command.nr, 0);
	ASSERT_EQ(c.providers[0].isolated, 0);
	ASSERT_EQ(c.providers[0].max_retries, -1);
	ASSERT_EQ(c.providers[0].max_steps, 50);
	ASSERT_EQ(c.providers[1].isolated, 1);
	ASSERT_STREQ(c.providers[1].api_key_env, "LOCAL_KEY");
	ASSERT_EQ(c.providers[1].max_tokens, 5000);
	ASSERT(c.providers[1].price_out == 6);
	ASSERT_EQ(config_providers_for(&c, "reviewer", ps, 4), 2);
	ASSERT_STREQ(ps[0]->name, "claude");
	ASSERT_STREQ(ps[1]->name, "local");
	ASSERT_EQ(config_providers_for(&c, "fixer", ps, 4), 2);
	ASSERT_STREQ(ps[0]->name, "local");
	ASSERT_EQ(config_providers_for(&c, "reviewer", ps, 1), 1);
	ASSERT_STREQ(config_provider_for(&c, "planner")->name, "claude");
	ASSERT(c.budget.max_cost_usd == 2.5);
	ASSERT_EQ(c.budget.max_tokens, 100000);
	ASSERT_EQ(c.budget.max_wall_minutes, 30);
	ASSERT_STREQ(c.sandbox, "bwrap");
	ASSERT_EQ(c.quota_retries, 2);
	ASSERT_EQ(c.backoff_seconds, 60);
	ASSERT(config_path_allowed(&c, "src/a/b.c"));
	ASSERT(!config_path_allowed(&c, "src"));
	ASSERT(!config_path_allowed(&c, "srcx/a.c"));
	ASSERT(config_path_allowed(&c, "docs/x/y.txt"));
	ASSERT(config_path_allowed(&c, "README.md"));
	ASSERT(config_path_allowed(&c, "notes/a.md"));
	ASSERT(!config_path_allowed(&c, "hello.txt"));
	config_release(&c);
	LEAK_CHECK();
}

/* The provider types config accepts are exactly the adapters there are. */
TEST(provider_types_match_the_adapters)
{
	static const char *const types[] = {
		"claude-code", "codex",	  "gemini", "qwen",  "opencode",
		"aider",       "copilot", "pi",	    "kilo",  "cline",
		"continue",    "amp",	  "auggie", "crush", "openai",
		"anthropic",   "command", "acp",
	};
	const struct agent_info *const *infos;
	size_t i, n;

	infos = agent_infos(&n);
	ASSERT_EQ(n, ARRAY_SIZE(types));
	for (i = 0; i < n; i++) {
		struct err e = ERR_INIT;
		struct config c;
		char *y = xasprintf("providers:\n  p: {type: %s, model: m, "
				    "command: x}\n",
				    types[i]);
		int http = !strcmp(types[i], "openai") ||
			   !strcmp(types[i], "anthropic");

		ASSERT_STREQ(infos[i]->type, types[i]);
		if (http) {
			free(y);
			y = xasprintf("providers:\n  p: {type: %s, model: "
				      "m}\n",
				      types[i]);
		}
		ASSERT_OK(load(REPO, y, &c, &e), &e);
		config_release(&c);
		free(y);
	}
	LEAK_CHECK();
}

TEST(duplicate_key)
{
	struct err e = ERR_INIT;

	load_err("workflow:\n  pipeline: a\n  pipeline: b\n", &e);
	ASSERT_STREQ(e.msg, REPO ":3:3: duplicate key 'pipeline'");
	load_err("store: a\nstore: b\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:1: duplicate key 'store'");
	LEAK_CHECK();
}

TEST(anchors_tags_documents_refused)
{
	struct err e = ERR_INIT;

	load_err("validate:\n  commands: &c [make]\npolicies:\n"
		 "  require_approval_at_stages: *c\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":2:13: anchors are not supported ('&c')");
	load_err("store: *x\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:8: ");
	load_err("store: !!str x\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:8: tags are not supported "
				 "('tag:yaml.org,2002:str')");
	load_err("store: a\n---\nstore: b\n", &e);
	ASSERT_STREQ(e.msg, REPO ":2:1: only one yaml document is allowed");
	load_err("? [a]\n: b\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:3: mapping keys must be scalars");
	LEAK_CHECK();
}

TEST(deep_nesting_refused)
{
	struct err e = ERR_INIT;
	struct buf y = BUF_INIT;
	int i;

	buf_adds(&y, "pipelines: ");
	for (i = 0; i < 200; i++)
		buf_addch(&y, '[');
	for (i = 0; i < 200; i++)
		buf_addch(&y, ']');
	buf_addch(&y, '\n');
	load_err(y.ptr, &e);
	ASSERT_CONTAINS(e.msg, "nesting too deep");
	buf_release(&y);
	LEAK_CHECK();
}

/* Loads yaml expecting success and returns its hash. */
static void
hash_of(const char *file, const char *yaml, char out[17])
{
	struct err e = ERR_INIT;
	struct config c;

	ASSERT_OK(load(file, yaml, &c, &e), &e);
	memcpy(out, c.hash, 17);
	config_release(&c);
}

TEST(hash_tracks_meaning)
{
	char a[17], b[17], c[17], d[17];

	hash_of(REPO, example_flow, a);
	hash_of(USER, example_block, b);
	ASSERT_STREQ(a, b);
	hash_of(REPO, "workflow: {max_review_loops: 3}\n", c);
	hash_of(REPO, "workflow: {max_review_loops: 2}\n", d);
	ASSERT(strcmp(c, d) != 0);
	/* 2 is the default: writing it out changes nothing */
	hash_of(USER, "", c);
	ASSERT_STREQ(c, d);
	hash_of(REPO, example_flow, c);
	ASSERT_STREQ(a, c);
	/* how serve listens is not the run's config */
	hash_of(REPO, "workflow: {max_review_loops: 3}\n", c);
	hash_of(REPO, "workflow: {max_review_loops: 3}\n"
		      "server: {listen: \"127.0.0.1:0\"}\n",
		d);
	ASSERT_STREQ(c, d);
	LEAK_CHECK();
}

TEST(merge_and_dup)
{
	struct err e = ERR_INIT;
	struct cnode *base = NULL, *over = NULL, *copy;
	const char *y1 = "a: {x: 1, y: [1, 2]}\nb: 2\n";
	const char *y2 = "a: {y: [3], z: 4}\nb: {c: 5}\nd: 6\n";

	ASSERT_OK(cnode_parse_yaml(y1, strlen(y1), "one", &base, &e), &e);
	ASSERT_OK(cnode_parse_yaml(y2, strlen(y2), "two", &over, &e), &e);
	copy = cnode_dup(base);
	cnode_merge(base, over);
	ASSERT_STREQ(cnode_path(base, "a.x")->value, "1");
	ASSERT_STREQ(cnode_path(base, "a.x")->origin, "one");
	ASSERT_EQ(cnode_path(base, "a.y")->nr, 1);
	ASSERT_STREQ(cnode_path(base, "a.y")->origin, "two");
	ASSERT_STREQ(cnode_path(base, "a.z")->value, "4");
	ASSERT_EQ(cnode_path(base, "b")->type, CNODE_MAP);
	ASSERT_STREQ(cnode_path(base, "b.c")->value, "5");
	ASSERT_STREQ(base->kids[1]->key, "b");
	ASSERT_STREQ(cnode_path(base, "d")->value, "6");
	/* the copy is untouched */
	ASSERT_EQ(cnode_path(copy, "a.y")->nr, 2);
	ASSERT_STREQ(cnode_path(copy, "b")->value, "2");
	cnode_free(copy);
	cnode_free(base);
	cnode_free(NULL);
	LEAK_CHECK();
}

TEST(where_strings)
{
	char w[64];
	struct cnode *n = cnode_new_scalar("v", "env BATON_STORE", 0, 0);

	cnode_where(n, w, sizeof(w));
	ASSERT_STREQ(w, "env BATON_STORE");
	n->line = 3;
	n->col = 7;
	cnode_where(n, w, sizeof(w));
	ASSERT_STREQ(w, "env BATON_STORE:3:7");
	cnode_free(n);
	LEAK_CHECK();
}

/* The lines of config_diff from yaml a to yaml b, joined by '\n'. */
static char *
diff_of(const char *a, const char *b)
{
	struct strvec lines = STRVEC_INIT;
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	struct config ca, cb;
	size_t i;

	ASSERT_OK(load(REPO, a, &ca, &e), &e);
	ASSERT_OK(load(REPO, b, &cb, &e), &e);
	config_diff(ca.root, cb.root, &lines);
	for (i = 0; i < lines.nr; i++)
		buf_addf(&out, "%s\n", lines.v[i]);
	strvec_clear(&lines);
	config_release(&ca);
	config_release(&cb);
	return buf_detach(&out, NULL);
}

/* config_diff of two YAML trees (NULL: none), as diff_of. */
static char *
diff_trees(const char *a, const char *b)
{
	struct cnode *ta = NULL, *tb = NULL;
	struct strvec lines = STRVEC_INIT;
	struct buf out = BUF_INIT;
	struct err e = ERR_INIT;
	size_t i;

	ASSERT_OK(cnode_parse_yaml(a, strlen(a), "a", &ta, &e), &e);
	if (b)
		ASSERT_OK(cnode_parse_yaml(b, strlen(b), "b", &tb, &e), &e);
	config_diff(ta, tb, &lines);
	for (i = 0; i < lines.nr; i++)
		buf_addf(&out, "%s\n", lines.v[i]);
	strvec_clear(&lines);
	cnode_free(ta);
	cnode_free(tb);
	return buf_detach(&out, NULL);
}

/*
 * A config through JSON and back means the same: the same hash, the
 * same typed values, every quoting and odd character kept.
 */
TEST(json_round_trip)
{
	static const char yaml[] =
	    "providers:\n"
	    "  scripted: {type: command, command: [\"/path/agent\", \"--x\"],\n"
	    "             timeout_seconds: 1800, env: {K: \"tab\\there\", "
	    "Q: 'say \"hi\" \\\\ ok'},\n"
	    "             isolated: yes, pricing: {input: 0.5, output: 1e1}}\n"
	    "  other: {type: command, command: [/bin/true], model: \"2\"}\n"
	    "roles: {default: scripted, reviewer: [scripted, other]}\n"
	    "workflow: {max_review_loops: 3}\n"
	    "policies: {allowed_paths: [src/, \"docs/**\"]}\n"
	    "budget: {max_cost_usd: 1.5, max_tokens: 100000}\n"
	    "validate: {commands: [\"make test\", \"\"], timeout_seconds: "
	    "60}\n"
	    "runtime: {auto_merge: on, judge: false}\n"
	    "merge:\n"
	    "store: \"\\u00e9t\\u00e9 \\u2028 \\x7f \\x85 \\ufeff \\U0001F600\"\n"
	    "pipelines: {mine: {stages: [a, {b: c}]}}\n";
	struct err e = ERR_INIT;
	struct config a, b;
	char *json, *again;

	ASSERT_OK(load(REPO, yaml, &a, &e), &e);
	json = config_to_json(&a);
	ASSERT_CONTAINS(json, "\"max_review_loops\": \"3\"");
	ASSERT_CONTAINS(json, "\"\u00e9t\u00e9 \\u2028 \\u007f \\u0085 "
			      "\\ufeff \U0001F600\"");
	ASSERT_OK(config_from_json(json, "snapshot", &b, &e), &e);
	ASSERT_STREQ(a.hash, b.hash);
	ASSERT_EQ(b.max_review_loops, 3);
	ASSERT_EQ(b.budget.max_tokens, 100000);
	ASSERT(b.budget.max_cost_usd == 1.5);
	ASSERT_EQ(b.runtime.auto_merge, 1);
	ASSERT_EQ(b.runtime.judge, 0);
	ASSERT_EQ(b.nr_providers, 2);
	ASSERT_EQ(b.providers[0].isolated, 1);
	ASSERT_STREQ(b.providers[0].env.v[0], "K=tab\there");
	ASSERT_STREQ(b.providers[0].env.v[1], "Q=say \"hi\" \\\\ ok");
	ASSERT_STREQ(b.providers[1].model, "2");
	ASSERT_STREQ(b.store, a.store);
	ASSERT_EQ(b.validate_commands.nr, 2);
	ASSERT(b.merge.base_branch == NULL);
	/* and again gives the same text */
	again = config_to_json(&b);
	ASSERT_STREQ(again, json);
	free(again);
	free(json);
	config_release(&b);
	/* the defaults alone */
	config_release(&a);
	ASSERT_OK(load(REPO, "", &a, &e), &e);
	json = config_to_json(&a);
	ASSERT_OK(config_from_json(json, "snapshot", &b, &e), &e);
	ASSERT_STREQ(a.hash, b.hash);
	free(json);
	config_release(&a);
	config_release(&b);
	LEAK_CHECK();
}

TEST(json_errors_name_the_label)
{
	struct err e = ERR_INIT;
	struct config c;

	ASSERT(config_from_json("{\"workflow\": {\"max_review_loops\": "
				"\"many\"}}",
				"config snapshot of r1-x", &c, &e) < 0);
	ASSERT_CONTAINS(e.msg, "config snapshot of r1-x:1:");
	ASSERT_CONTAINS(e.msg, "workflow.max_review_loops");
	ASSERT(config_from_json("{\"workflow\": ", "snap", &c, &e) < 0);
	ASSERT_CONTAINS(e.msg, "snap:");
	LEAK_CHECK();
}

TEST(diff_lines)
{
	static const char before[] =
	    "providers:\n"
	    "  x: {type: command, command: [/bin/a]}\n"
	    "roles: {default: x, reviewer: x}\n"
	    "workflow: {max_review_loops: 2}\n"
	    "policies: {allowed_paths: [a]}\n"
	    "pipelines: {p: {stages: [{type: plan}]}}\n";
	static const char after[] =
	    "providers:\n"
	    "  x: {type: command, command: [/bin/a], timeout_seconds: 60}\n"
	    "  y: {type: command, command: [/bin/b]}\n"
	    "roles: {default: x}\n"
	    "workflow: {max_review_loops: 3}\n"
	    "policies: {allowed_paths: [a, b]}\n"
	    "pipelines: {p: {stages: [{type: plan}, {type: review}]}}\n"
	    "budget: {max_tokens: 100}\n";
	char *d;

	d = diff_of(before, after);
	ASSERT_STREQ(d, "budget: added\n"
			"pipelines.p.stages: changed (1 -> 2 items)\n"
			"policies.allowed_paths: [a] -> [a, b]\n"
			"providers.x.timeout_seconds: added\n"
			"providers.y: added\n"
			"roles.reviewer: removed\n"
			"workflow.max_review_loops: 2 -> 3\n");
	free(d);
	/* how serve listens is not a change of a run's config */
	d = diff_of("server: {listen: \"127.0.0.1:7070\"}\n",
		    "server: {listen: \"127.0.0.1:0\", max_body_kb: 9}\n");
	ASSERT_STREQ(d, "");
	free(d);
	/* stages as many as before: item by item, down to the key */
	d = diff_of("pipelines: {p: {stages: [plan, {type: fix, budget: "
		    "{max_tokens: 100}}]}}\n",
		    "pipelines: {p: {stages: [plan, {type: fix, budget: "
		    "{max_tokens: 900}}]}}\n");
	ASSERT_STREQ(d, "pipelines.p.stages[1].budget.max_tokens: 100 -> "
			"900\n");
	free(d);
	/* the same meaning: nothing */
	d = diff_of(example_flow, example_block);
	ASSERT_STREQ(d, "");
	free(d);
	/* an empty section is an empty map; long values are cut */
	d = diff_of("budget:\nstore: short\n",
		    "budget: {max_tokens: 5}\n"
		    "store: /a/very/long/path/that/goes/on/and/on/and/on/and/"
		    "on/for/ever/and/a/day.db\n");
	ASSERT_STREQ(d, "budget.max_tokens: added\n"
			"store: short -> /a/very/long/path/that/goes/on/and/on/"
			"and/on/and/on/for/e...\n");
	free(d);
	/* any trees: a value cut at a line break, empty ones, a type */
	d = diff_trees("a: [x]\nb: {c: [], d: \"x\\ny\"}\ne: 1\n",
		       "a: x\nb: {c: [make], d: \"\"}\ne: {f: 1}\n");
	ASSERT_STREQ(d, "a: [x] -> x\n"
			"b.c: [] -> [make]\n"
			"b.d: x... -> \"\"\n"
			"e: 1 -> {...}\n");
	free(d);
	d = diff_trees("a: 1\n", NULL);
	ASSERT_STREQ(d, "a: removed\n");
	free(d);
	LEAK_CHECK();
}

TEST(loop_grant_mappings_and_immutable)
{
	static const char yaml[] =
	    "loop:\n"
	    "  grants:\n"
	    "    - \"run:make *\"\n"
	    "    - grant: \"write:src/**\"\n"
	    "      exclude: [\"src/gen/**\", \"*.lock\"]\n"
	    "    - {grant: \"write:docs/adr/0001.md\", override_immutable: "
	    "true}\n"
	    "  immutable: [\"docs/adr/**\", LICENSE]\n";
	struct err e = ERR_INIT;
	struct config c, d;
	char *json;

	ASSERT_OK(load(REPO, yaml, &c, &e), &e);
	ASSERT_EQ(c.loop.nr_grants, 3);
	ASSERT_STREQ(c.loop.grants[0].text, "run:make *");
	ASSERT_EQ(c.loop.grants[0].exclude.nr, 0);
	ASSERT_STREQ(c.loop.grants[1].text, "write:src/**");
	ASSERT_EQ(c.loop.grants[1].exclude.nr, 2);
	ASSERT_STREQ(c.loop.grants[1].exclude.v[1], "*.lock");
	ASSERT_EQ(c.loop.grants[1].override_immutable, 0);
	ASSERT_EQ(c.loop.grants[2].override_immutable, 1);
	ASSERT_EQ(c.loop.immutable.nr, 2);
	ASSERT_STREQ(c.loop.immutable.v[1], "LICENSE");
	/* a run keeps its grants through its snapshot */
	json = config_to_json(&c);
	ASSERT_OK(config_from_json(json, "snapshot", &d, &e), &e);
	ASSERT_STREQ(c.hash, d.hash);
	ASSERT_EQ(d.loop.nr_grants, 3);
	ASSERT_STREQ(d.loop.grants[1].exclude.v[0], "src/gen/**");
	ASSERT_EQ(d.loop.grants[2].override_immutable, 1);
	ASSERT_STREQ(d.loop.immutable.v[0], "docs/adr/**");
	free(json);
	config_release(&d);
	config_release(&c);
	LEAK_CHECK();
}

TEST(loop_grant_errors_name_their_place)
{
	struct err e = ERR_INIT;

	load_err("loop:\n  grants:\n    - \"run:make\"\n"
		 "    - {grant: \"write:*/x\", exclude: [a]}\n",
		 &e);
	ASSERT_STREQ(e.msg,
		     REPO ":4:15: loop.grants[1].grant: grant "
			  "'write:*/x': too broad: its first path segment "
			  "'*' is only wildcards, which reach every "
			  "directory of the worktree (start it with a name, "
			  "such as \"write:src/**\")");
	load_err("loop:\n  grants:\n    - grant: \"write:docs/**\"\n"
		 "      exclude: [\"docs/x\", \"../outside.md\"]\n",
		 &e);
	ASSERT_STREQ(e.msg,
		     REPO ":4:27: loop.grants[0].exclude[1]: exclude "
			  "'../outside.md' of grant 'write:docs/**': it is "
			  "outside the worktree (a '..' component)");
	load_err("loop: {grants: [{exclude: [x]}]}\n", &e);
	ASSERT_STREQ(e.msg,
		     REPO ":1:17: loop.grants[0]: a grant mapping "
			  "needs a grant (such as grant: \"write:src/**\")");
	load_err("loop: {grants: [{grant: \"run:x\", excludes: [x]}]}\n", &e);
	ASSERT_CONTAINS(e.msg, "unknown key 'loop.grants[0].excludes'");
	load_err("loop: {grants: [{grant: \"write:a\", "
		 "override_immutable: maybe}]}\n",
		 &e);
	ASSERT_CONTAINS(e.msg, "loop.grants[0].override_immutable: ");
	load_err("loop: {grants: {grant: \"write:a\"}}\n", &e);
	ASSERT_CONTAINS(e.msg, "loop.grants: expected a sequence");
	load_err("loop: {grants: [[x]]}\n", &e);
	ASSERT_CONTAINS(e.msg, "loop.grants[0]: expected a string");
	load_err("loop: {immutable: [docs, \"/etc/**\"]}\n", &e);
	ASSERT_STREQ(e.msg, REPO ":1:26: loop.immutable[1]: immutable path "
				 "'/etc/**': it is outside the worktree (an "
				 "absolute path)");
	LEAK_CHECK();
}

TEST(loop_and_assist_sections)
{
	struct config c;
	struct err e = ERR_INIT;

	ASSERT_OK(load(REPO, "loop:\n  profile: trusted-local\n"
		       "  grants: [\"write:src/**\", \"run:make test\"]\n"
		       "  stop_file: STOP\n  max_iterations: 7\n"
		       "assist: {mode: always-ask, auto_complete: true,"
		       " escalation_timeout_seconds: 60}\n",
		       &c, &e),
		  &e);
	ASSERT_STREQ(c.loop.profile, "trusted-local");
	ASSERT_EQ(c.loop.nr_grants, 2);
	ASSERT_STREQ(c.loop.grants[1].text, "run:make test");
	ASSERT_STREQ(c.loop.stop_file, "STOP");
	ASSERT_EQ(c.loop.max_iterations, 7);
	ASSERT_STREQ(c.assist.mode, "always-ask");
	ASSERT_EQ(c.assist.auto_complete, 1);
	ASSERT_EQ(c.assist.escalation_timeout_seconds, 60);
	config_release(&c);

	load_err("loop: {profile: lax}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:17: loop.profile: 'lax' is not one of: "
				    "strict, trusted-local, automation");
	load_err("loop:\n  grants: [\"write:src/*\", \"exec:x\"]\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":2:27: loop.grants[1]: ");
	ASSERT_CONTAINS(e.msg, "unknown kind 'exec'");
	load_err("loop:\n  grants: [\"run:make\", \"write:**\"]\n", &e);
	ASSERT_STREQ(e.msg,
		     REPO ":2:24: loop.grants[1]: grant 'write:**': "
			  "too broad: its first path segment '**' is only "
			  "wildcards, which reach every directory of the "
			  "worktree (start it with a name, such as "
			  "\"write:src/**\")");
	load_err("loop: {grants: \"write:*\"}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:16: loop.grants[0]: grant 'write:*': "
				    "too broad");
	load_err("loop: {grants: [\"write:../x\"]}\n", &e);
	ASSERT_CONTAINS(e.msg, "loop.grants[0]: grant 'write:../x': a write "
			       "glob cannot leave the worktree");
	load_err("loop: {grants: [\"write:/etc/*\"]}\n", &e);
	ASSERT_CONTAINS(e.msg, "loop.grants[0]: grant 'write:/etc/*': a write "
			       "glob is relative to the worktree");
	load_err("assist: {mode: sometimes}\n", &e);
	ASSERT_CONTAINS(e.msg, "assist.mode: 'sometimes' is not one of: "
			       "always-ask, agent-decides, always-execute");
	LEAK_CHECK();
}
