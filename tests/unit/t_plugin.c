/*
 * The plugin registry on its own (core/plugin.h): manifests written to a
 * temporary folder, then loaded: the requires order, cycles, statuses and
 * reasons, a kind's command made absolute from the plugin folder, paths
 * that leave the folder, and a plugin's pipeline and kind as the
 * pipeline parser sees them.
 */
#include "util/compat.h"

#include <sys/stat.h>

#include "core/cnode.h"
#include "core/pipeline.h"
#include "core/plugin.h"
#include "test.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/strvec.h"
#include "util/xalloc.h"

/* Writes text to DIR/rel under the test's folder, making folders. */
static void
put(const char *rel, const char *text)
{
	char *path = xasprintf("%s/%s", test_tmpdir(), rel);
	char *dir = xstrdup(path);

	*strrchr(dir, '/') = '\0';
	fs_mkdir_p(dir, 0755, NULL);
	fs_write_atomic(path, text, strlen(text), NULL);
	free(dir);
	free(path);
}

/* Loads the plugins of <tmp>/plugins with the ids of the list enabled. */
static void
load(const char *const *enabled)
{
	struct strvec dirs = STRVEC_INIT, on = STRVEC_INIT;

	strvec_pushf(&dirs, "%s/plugins", test_tmpdir());
	for (; enabled && *enabled; enabled++)
		strvec_push(&on, *enabled);
	plugins_load(&dirs, &on);
	strvec_clear(&dirs);
	strvec_clear(&on);
}

static const struct plugin *
get(const char *id)
{
	const struct plugin *pl;
	size_t i, n;

	pl = plugins_all(&n);
	for (i = 0; i < n; i++)
		if (!strcmp(pl[i].id, id))
			return &pl[i];
	return NULL;
}

/* The position of id in the load order, or -1. */
static int
pos(const char *id)
{
	const struct plugin *pl;
	size_t i, n;

	pl = plugins_all(&n);
	for (i = 0; i < n; i++)
		if (!strcmp(pl[i].id, id))
			return (int)i;
	return -1;
}

TEST(requires_orders_and_statuses_explain)
{
	static const char *const on[] = { "a", "b",   "c",    "x",
					  "y", "old", "lost", NULL };

	/* names sort the other way round than the requires order */
	put("plugins/a/plugin.yaml", "id: a\napi_version: 1\nrequires: [b]\n");
	put("plugins/b/plugin.yaml", "id: b\napi_version: 1\nrequires: [c]\n");
	put("plugins/c/plugin.yaml", "id: c\napi_version: 1\n");
	put("plugins/x/plugin.yaml", "id: x\napi_version: 1\nrequires: [y]\n");
	put("plugins/y/plugin.yaml", "id: y\napi_version: 1\nrequires: [x]\n");
	put("plugins/old/plugin.yaml", "id: old\napi_version: 7\nnew: 1\n");
	put("plugins/off/plugin.yaml", "id: off\napi_version: 1\n");
	put("plugins/bad/plugin.yaml", "id: other\napi_version: 1\n");
	put("plugins/Bad Name/plugin.yaml", "id: Bad Name\napi_version: 1\n");
	load(on);
	ASSERT(pos("c") < pos("b"));
	ASSERT(pos("b") < pos("a"));
	ASSERT_EQ(get("a")->status, PLUGIN_ENABLED);
	ASSERT_EQ(get("c")->status, PLUGIN_ENABLED);
	ASSERT_EQ(get("x")->status, PLUGIN_ERROR);
	ASSERT_STREQ(get("x")->reason, "requires cycle: x -> y -> x");
	ASSERT_STREQ(get("y")->reason, "requires cycle: y -> x -> y");
	ASSERT_EQ(get("old")->status, PLUGIN_INCOMPATIBLE);
	ASSERT_STREQ(get("old")->reason, "api_version 7; this baton speaks 1");
	ASSERT_EQ(get("off")->status, PLUGIN_DISABLED);
	ASSERT_EQ(get("bad")->status, PLUGIN_ERROR);
	ASSERT_CONTAINS(get("bad")->reason, "plugin.yaml:1:5: id: expected "
					    "'bad' (the plugin's folder name)");
	ASSERT_EQ(get("Bad Name")->status, PLUGIN_ERROR);
	ASSERT_CONTAINS(get("Bad Name")->reason, "not a valid plugin id");
	ASSERT_EQ(get("lost")->status, PLUGIN_ERROR);
	ASSERT_CONTAINS(get("lost")->reason, "not installed");
	plugins_unload();
}

TEST(a_requirement_not_enabled_is_an_error)
{
	static const char *const on[] = { "a", NULL };

	put("plugins/a/plugin.yaml", "id: a\napi_version: 1\nrequires: [b]\n");
	put("plugins/b/plugin.yaml", "id: b\napi_version: 1\n");
	load(on);
	ASSERT_EQ(get("b")->status, PLUGIN_DISABLED);
	ASSERT_STREQ(get("a")->reason, "requires 'b', which is not enabled");
	plugins_unload();
}

TEST(kind_command_files_come_from_the_plugin_folder)
{
	static const char *const on[] = { "k", NULL };
	const struct plugin_kind *pk;
	char *want;

	put("plugins/k/plugin.yaml",
	    "id: k\napi_version: 1\nkinds:\n"
	    "  - {name: scan, command: [sh, bin/scan.sh, -v, nothere.sh]}\n");
	put("plugins/k/bin/scan.sh", "exit 0\n");
	load(on);
	ASSERT_EQ(get("k")->status, PLUGIN_ENABLED);
	pk = plugin_kind_find("scan");
	ASSERT(pk != NULL);
	ASSERT_STREQ(pk->status, "scan");
	ASSERT_EQ(pk->timeout_seconds, 300);
	ASSERT_EQ(pk->command.nr, 4);
	ASSERT_STREQ(pk->command.v[0], "sh");
	want = xasprintf("%s/plugins/k/bin/scan.sh", test_tmpdir());
	ASSERT_STREQ(pk->command.v[1], want);
	ASSERT_STREQ(pk->command.v[2], "-v");
	/* not a file of the plugin: left as written */
	ASSERT_STREQ(pk->command.v[3], "nothere.sh");
	free(want);
	plugins_unload();
	ASSERT(plugin_kind_find("scan") == NULL);
}

TEST(files_outside_the_plugin_folder_are_refused)
{
	static const char *const on[] = { "p", "q", NULL };

	put("outside.yaml", "stages: [execute]\n");
	put("plugins/p/plugin.yaml",
	    "id: p\napi_version: 1\npipelines: {up: ../../outside.yaml}\n");
	put("plugins/q/plugin.yaml",
	    "id: q\napi_version: 1\nprompts: {execute: /etc/passwd}\n");
	load(on);
	ASSERT_CONTAINS(get("p")->reason, "pipelines.up: expected a path "
					  "inside the plugin folder");
	ASSERT_CONTAINS(get("q")->reason, "prompts.execute: expected a path "
					  "inside the plugin folder");
	plugins_unload();
}

TEST(a_kind_named_like_a_builtin_is_refused)
{
	static const char *const on[] = { "r", NULL };

	put("plugins/r/plugin.yaml",
	    "id: r\napi_version: 1\nkinds: [{name: review, command: [x]}]\n");
	load(on);
	ASSERT_EQ(get("r")->status, PLUGIN_ERROR);
	ASSERT_CONTAINS(get("r")->reason,
			"kinds[0].name: 'review' is a built-in stage kind");
	plugins_unload();
}

TEST(plugin_pipelines_load_by_name_with_their_kind)
{
	static const char *const on[] = { "g", NULL };
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	const struct stage *s;

	put("plugins/g/plugin.yaml",
	    "id: g\napi_version: 1\n"
	    "kinds: [{name: gate-keep, command: [true], timeout_seconds: 9}]\n"
	    "pipelines: {gated: p.yaml}\n"
	    "prompts: {execute: e.md}\n");
	put("plugins/g/p.yaml", "stages:\n  - execute\n"
				"  - {kind: gate-keep, on_changes: fix}\n"
				"  - {name: fix, kind: fix, side: true, next: "
				"gate-keep}\n");
	put("plugins/g/e.md", "the plugin's execute template\n");
	load(on);
	ASSERT_EQ(get("g")->status, PLUGIN_ENABLED);
	ASSERT_OK(pipeline_load(NULL, "gated", &p, &e), &e);
	ASSERT_STREQ(p->plugin, "g");
	ASSERT(!p->builtin);
	s = pipeline_stage_named(p, "gate-keep");
	ASSERT(s != NULL);
	ASSERT_EQ(s->kind, KIND_PLUGIN);
	ASSERT_STREQ(stage_kind_label(s), "gate-keep");
	ASSERT_STREQ(s->status, "gate_keep");
	ASSERT_EQ(s->on_changes, 2);
	ASSERT(pipeline_edge(p, "gate_keep", "fixing") != NULL);
	ASSERT_STREQ(plugin_prompt("g", "execute"),
		     "the plugin's execute template\n");
	ASSERT(plugin_prompt("g", "review") == NULL);
	pipeline_free(p);
	/* a bug-fix pipeline may not use it; "plugin" is no kind name */
	ASSERT(pipeline_load(NULL, "nosuch", &p, &e) == BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "security-review, gated)");
	plugins_unload();
	e = (struct err)ERR_INIT;
	ASSERT(pipeline_load(NULL, "gated", &p, &e) == BATON_ENOTFOUND);
}

TEST(plugin_kinds_only_where_allowed)
{
	static const char *const on[] = { "g", NULL };
	struct cnode *n = NULL;
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	const char *bug = "type: bugfix\nstages: [rca, implementation, "
			  "gatekeep]\n";
	const char *plain = "stages: [execute, plugin]\n";

	put("plugins/g/plugin.yaml",
	    "id: g\napi_version: 1\nkinds: [{name: gatekeep, command: "
	    "[true]}]\n");
	load(on);
	ASSERT_OK(cnode_parse_yaml(bug, strlen(bug), "b.yaml", &n, &e), &e);
	ASSERT(pipeline_parse("b", n, 0, &p, &e) == BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "type 'gatekeep' is not allowed in a bugfix "
			       "pipeline");
	cnode_free(n);
	n = NULL;
	ASSERT_OK(cnode_parse_yaml(plain, strlen(plain), "c.yaml", &n, &e), &e);
	ASSERT(pipeline_parse("c", n, 0, &p, &e) == BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "unknown stage kind 'plugin'");
	ASSERT_CONTAINS(e.msg, "judge, arbiter, gatekeep)");
	cnode_free(n);
	plugins_unload();
}
