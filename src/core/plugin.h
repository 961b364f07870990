/*
 * Plugins (openTiger's plugin manifest, seed 001): folders that add
 * pipelines, prompt templates, hooks and stage kinds implemented by a
 * command, without touching baton's source.
 *
 *   .baton/plugins/<id>/plugin.yaml        the repository's (wins)
 *   ~/.config/baton/plugins/<id>/plugin.yaml   the user's
 *
 *   id: security-review          # the folder's name
 *   api_version: 1               # what baton speaks: 1
 *   description: ...
 *   version: "0.1.0"
 *   requires: [other-plugin]     # loaded first, must load
 *   pipelines: {secure: pipelines/secure.yaml}
 *   prompts: {execute: prompts/execute.md}
 *   hooks: {before_merge: ["make lint"]}
 *   kinds:
 *     - {name: security-review, status: security_reviewing,
 *        command: [sh, check.sh], timeout_seconds: 300}
 *
 * Loading, once per process (plugins_load):
 *
 *   discover   every <dir>/<id>/plugin.yaml of the plugin folders; an
 *              id in both, the repository's; an id of plugins.enabled
 *              in neither: an error entry
 *   read       the manifest; a broken one (syntax, unknown key, bad
 *              value, a file it names missing): error, with the reason
 *   check      api_version other than 1: incompatible
 *   order      by requires (ids alphabetical where free); a cycle is an
 *              error of each plugin on it
 *   enable     those in plugins.enabled, in that order: each required
 *              plugin must be enabled itself; then the plugin's kinds
 *              are registered and its pipelines parsed (clash with a
 *              built-in or another plugin's pipeline or kind: error)
 *
 * A plugin that is incompatible or in error is skipped; the others and
 * the core go on. The registry is process-wide and read-only once
 * loaded: pipelines find plugin kinds and pipelines in it
 * (pipeline_load, pipeline_parse), the CLI and the API list it.
 */
#ifndef BATON_CORE_PLUGIN_H
#define BATON_CORE_PLUGIN_H

#include <stddef.h>

#include "util/strvec.h"

struct pipeline;

/* The plugin API this baton speaks. */
#define PLUGIN_API_VERSION 1

enum plugin_status {
	PLUGIN_ENABLED,	     /* loaded: what it provides is in use */
	PLUGIN_DISABLED,     /* valid, not in plugins.enabled */
	PLUGIN_INCOMPATIBLE, /* api_version this baton does not speak */
	PLUGIN_ERROR,	     /* could not be loaded: reason says why */
	PLUGIN_LOADING,	     /* inside plugins_load only */
};

/* The hook points a plugin may add shell commands to (hooks:). */
enum plugin_hook {
	PLUGIN_HOOK_WORKTREE_SETUP,
	PLUGIN_HOOK_BEFORE_STAGE,
	PLUGIN_HOOK_AFTER_STAGE,
	PLUGIN_HOOK_BEFORE_MERGE,
	PLUGIN_HOOK_ON_TERMINAL,
	PLUGIN_HOOK_WORKTREE_TEARDOWN,
	PLUGIN_HOOK__COUNT
};

struct plugin;

/*
 * A stage kind implemented by a command (kinds:). The command runs in the
 * run's worktree as a command agent does (docs/agents.md) and must leave
 * a structured outcome (docs/pipelines.md, "Plugin kinds").
 */
struct plugin_kind {
	char *name;	       /* "security-review": the stage kind's name */
	char *status;	       /* the status while it works */
	struct strvec command; /* argv; files of the plugin folder made
				  absolute */
	int timeout_seconds;   /* 300 unless given */
	const struct plugin *plugin; /* its plugin */
};

struct plugin_file {
	char *name; /* pipeline or template name */
	char *path; /* as written, relative to the plugin folder */
	char *text; /* what it holds (read at load) */
};

struct plugin {
	char *id;
	char *dir;	   /* its folder (absolute); NULL: not found */
	char *manifest;	   /* "DIR/plugin.yaml", as errors name it */
	char *description; /* or NULL */
	char *version;	   /* or NULL */
	long api_version;  /* 0: not read */
	enum plugin_status status;
	char *reason; /* INCOMPATIBLE, ERROR: why */
	struct strvec requires;
	struct plugin_file *pipelines; /* pipelines: name -> YAML file */
	size_t nr_pipelines;
	struct plugin_file *prompts; /* prompts: template -> file */
	size_t nr_prompts;
	struct plugin_kind *kinds;
	size_t nr_kinds;
	struct strvec hooks[PLUGIN_HOOK__COUNT]; /* shell strings */
};

/*
 * Loads the process's plugin registry, replacing any before: discovers
 * the plugins in the folders dirs (in order: an id found in an earlier
 * folder hides the later ones), reads and orders them and enables the
 * ids of enabled (see above). Plugin problems are recorded in the
 * plugins' statuses, never returned: the core goes on without them.
 */
void plugins_load(const struct strvec *dirs, const struct strvec *enabled);
/* Frees the registry (tests, exit). Pipelines that point into it must
 * be gone. */
void plugins_unload(void);

/* The plugins in load order; *n gets their number. Borrowed until
 * plugins_load or plugins_unload. */
const struct plugin *plugins_all(size_t *n);

/* 1 for a plugin id or a name a plugin gives (a kind, a status): 1 to 48
 * of [a-z0-9_-], safe in file names, statuses and events. */
int plugin_name_valid(const char *s);

/* The status's name: enabled, disabled, incompatible, error. */
const char *plugin_status_name(enum plugin_status s);
/* The hook's key in hooks: ("worktree_setup"), or NULL past the end. */
const char *plugin_hook_name(enum plugin_hook h);

/*
 * The stage kind name of an enabled (or loading) plugin, or NULL.
 * Borrowed for the life of the registry.
 */
const struct plugin_kind *plugin_kind_find(const char *name);

/*
 * The definition of pipeline name from an enabled plugin: 0 with *def
 * (borrowed) and *owner set, or BATON_ENOTFOUND. The definition's file
 * is in *file ("DIR/pipelines/x.yaml", borrowed) for messages.
 */
int plugin_pipeline_find(const char *name, const struct plugin **owner,
			 const char **text, const char **file);
/* Names of the enabled plugins' pipelines, in load order, pushed on out. */
void plugin_pipeline_names(struct strvec *out);

/*
 * The template name of the plugin id (an enabled one), or NULL:
 * borrowed for the life of the registry. id may be NULL (none).
 */
const char *plugin_prompt(const char *id, const char *name);

/*
 * A template for a stage of pipeline p as a repository sees it:
 * baton_dir/prompts/NAME.md, else the template of p's plugin (when p
 * comes from one), else, for NAME a plugin kind, the template of the
 * kind's plugin, else the built-in. Caller frees; NULL when none.
 */
char *plugin_template(const char *baton_dir, const struct pipeline *p,
		      const char *name);

/*
 * The plugin as `plugin list --json` and GET /api/v1/plugins show it: id,
 * status, reason, folder, api_version, description, version, requires,
 * provides {pipelines, prompts, kinds, hooks}. A new reference.
 */
struct json_t;
struct json_t *plugin_to_json(const struct plugin *pl);

#endif
