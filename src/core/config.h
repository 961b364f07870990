/*
 * The config model: layers merged in order (built-in defaults, the user's
 * ~/.config/baton/config.yaml, the repository's .baton/config.yaml, BATON_*
 * environment variables, command-line flags; later wins), then checked
 * strictly and turned into struct config. Every value keeps its origin, so
 * `baton config show` can say where it came from and every error names
 * the file, line, column and key path (DESIGN.md section 8).
 *
 * Pure: the caller reads the files and passes their text.
 *
 *   # .baton/config.yaml
 *   providers:
 *     scripted: {type: command, command: ["/path/agent", "--x"],
 *                timeout_seconds: 1800, env: {K: V}}
 *   roles: {default: scripted, reviewer: scripted}
 *   workflow: {pipeline: feature, max_review_loops: 2}
 *   policies: {require_approval_at_stages: [executing]}
 *   validate: {commands: ["make test"], timeout_seconds: 600}
 *   hooks: {worktree_setup: ["npm ci"], before_stage: [...],
 *           timeout_seconds: 600}
 *   pipelines: {NAME: {...}}      # see pipeline.h
 *   plugins: {enabled: [ID, ...]} # see plugin.h
 */
#ifndef BATON_CORE_CONFIG_H
#define BATON_CORE_CONFIG_H

#include "core/failclass.h"

#include <stddef.h>

#include "util/strvec.h"

struct buf;
struct cnode;
struct config;
struct err;
struct policy_grant;
struct schedule;

struct config_provider {
	char *name;
	char *type;		/* see agent.h: command, claude-code, ... */
	struct strvec command;	/* argv prefix; empty: the type's program */
	struct strvec args;	/* extra argv, after baton's own */
	struct strvec env;	/* "K=V" added to the agent's environment */
	char *model;		/* NULL: the agent's default */
	char *effort;		/* low | medium | high, or NULL */
	char *base_url;		/* the model server, or NULL: the default */
	char *api_key_env;	/* the variable holding the key, or NULL */
	int timeout_seconds;	/* default 1800 */
	int max_retries;	/* the agent's own API retries; -1: default */
	int max_steps;		/* baton's agent: tool-loop steps per call */
	int isolated;		/* private home for the CLI's config; default:
				   on when base_url is set */
	long long max_tokens;	/* baton's agent: tokens per call; 0: none */
	double price_in;	/* USD per million input tokens; 0: unknown */
	double price_out;	/* USD per million output tokens */
	const struct cnode *node; /* borrowed from config.root */
};

struct config_role {
	char *role;	/* planner, architect, implementer, reviewer, fixer,
			   verifier, default */
	struct strvec providers; /* one or more; several reviewers must
				    all approve */
};

/*
 * budget: each line, once reached, takes its action (budget.actions, else
 * budget.on_limit, else pause) with the reason on record.
 */
enum budget_line {
	BUDGET_COST,		/* max_cost_usd */
	BUDGET_TOKENS,		/* max_tokens */
	BUDGET_WALL,		/* max_wall_minutes */
	BUDGET_TURNS_RUN,	/* max_turns_per_run */
	BUDGET_TURNS_DAY,	/* max_turns_per_day */
	BUDGET_LINE_N
};

enum budget_action {
	BUDGET_PAUSE,	      /* paused until resumed (raise the budget) */
	BUDGET_STOP,	      /* blocked with the reason */
	BUDGET_DOWNGRADE,     /* the role to budget.downgrade's choice */
	BUDGET_REDUCE_EFFORT, /* the providers' effort one step lower */
};

struct config_budget {
	double max_cost_usd;	/* 0: no limit */
	long long max_tokens;	/* input + output, per run; 0: no limit */
	int max_wall_minutes;	/* time spent in stages, per run; 0: none */
	long long max_turns_per_run; /* agent calls of the run; 0: none */
	long long max_turns_per_day; /* agent calls of all runs since 00:00
					UTC, from the store; 0: none */
	enum budget_action actions[BUDGET_LINE_N]; /* per line */
	struct strvec downgrade; /* "ROLE=PROVIDER_OR_MODEL" */
};

/* "max_cost_usd", ... and "stop", ... (config.c). */
const char *budget_line_name(enum budget_line l);
const char *budget_action_name(enum budget_action a);
/* budget.downgrade's choice for role (or "default"); NULL: none. */
const char *config_downgrade_for(const struct config *c, const char *role);

/* runtime: how `baton serve` drains the task queue (docs/config.md). */
struct config_runtime {
	int workers;		  /* default for serve --workers: 2 */
	int lease_seconds;	  /* a claim lasts this long unrenewed: 30 */
	int sweep_seconds;	  /* recovery sweep period: 5 */
	int max_attempts;	  /* runs per task before it fails: 3 */
	int failure_repeat_limit; /* same failure this often: needs_rework */
	int cooldown_seconds;	  /* before a failed task is retried: 10 */
	int judge;		  /* review finished runs once: on */
	int max_rework_depth;	  /* rework of rework of ...: 2 */
	int auto_merge;		  /* serve lands approved branches: off */
	int file_cap_kib;	  /* a run file's bytes kept in the store: 256 */
	int unattended;		  /* serve's runs wait for nobody: off */
};

/* merge: how approved branches land on the base branch. */
struct config_merge {
	char *base_branch; /* NULL: the branch checked out in the repo */
	int retries;	   /* a conflicting item is retried: 3 */
	int backoff_seconds; /* first retry delay, doubling: 5 */
};

/* server: the HTTP API, live stream and dashboard of `baton serve`. */
struct config_server {
	char *listen;	  /* "127.0.0.1:7070"; "off": no server */
	int threads;	  /* the HTTP server's event loops (threads): 64 */
	int max_body_kb;  /* a bigger request body is refused (413): 1024 */
	int max_streams;  /* live streams open at once (503 past): 10000 */
	char *public_url; /* where people reach serve (answer links); NULL:
			     notifications carry no links. No trailing '/' */
	/*
	 * tls: the PEM certificate (chain) and private key serve speaks
	 * HTTPS with; NULL: plain HTTP. A relative path is taken from the
	 * repository's top. Without them a listen beyond loopback is
	 * refused unless insecure is set (docs/security.md).
	 */
	char *tls_cert, *tls_key;
	int insecure;
};

/*
 * reports: periodic run reports, by the run's length (the OpenViber
 * cadence): none while it is younger than milestone_after_seconds (300),
 * then one per finished stage, and from periodic_after_seconds (1800)
 * also one every interval_seconds (600). Every run ends with one.
 */
struct config_reports {
	int milestone_after_seconds;
	int periodic_after_seconds;
	int interval_seconds;
};

/* The body a notification target gets (notify.targets[].format). */
enum notify_format {
	NOTIFY_GENERIC, /* baton's own signed JSON (docs/api.md "Webhooks") */
	NOTIFY_SLACK,	/* a Slack incoming webhook: text and blocks */
	NOTIFY_DISCORD, /* a Discord webhook: content and embeds */
	NOTIFY_NTFY,	/* an ntfy topic: text, Title, Priority, Actions */
};

/*
 * notify.webhooks[] and notify.targets[] (one list, webhooks first):
 * where lifecycle notifications are POSTed.
 */
struct config_webhook {
	char *url;		/* http:// or https:// */
	char *name;		/* who answers through its links ("link:NAME");
				   default: the format and the list index */
	enum notify_format format; /* generic */
	struct strvec events;	/* approval_requested, run_terminal,
				   budget_crossed; empty: all */
	char *secret_env;	/* variable holding the HMAC key; NULL: unsigned */
	int retries;		/* after the first try: 5 */
	int backoff_seconds;	/* first retry delay, doubling: 1 */
	int timeout_seconds;	/* per request: 10 */
};

/*
 * forge: a GitHub (or GitHub Enterprise) repository whose labelled issues
 * become tasks and which gets a pull request per finished task
 * (docs/forge.md). type NULL: no forge, and nothing below is used.
 */
struct config_forge {
	char *type;	     /* "github", or NULL */
	char *repo;	     /* "owner/name" */
	char *token_env;     /* the variable holding the token: GITHUB_TOKEN */
	char *api_url;	     /* https://api.github.com; no trailing slash */
	char *remote;	     /* where run branches are pushed: origin */
	char *intake_label;  /* intake.label; NULL: no intake */
	int pr_draft;	     /* pull_requests.draft: a draft PR at run start */
	int auto_merge;	     /* pull_requests.auto_merge: 0 */
	char *merge_method;  /* pull_requests.merge_method: merge|squash|rebase */
	char *on_ci_failed;  /* reactions.ci_failed: fix | ask | ignore */
	char *on_changes_requested; /* reactions.changes_requested: same */
	int max_rounds;	     /* reactions.max_rounds: 3 */
	char *human_label;   /* reactions.label: "baton:needs-human" */
	char *webhook_secret_env; /* NULL: POST /api/v1/forge/webhook is 404 */
	int poll_seconds;    /* 60; 0: only webhooks and `baton forge sync` */
};

/*
 * loop: the loop pipeline (Craik). profile: strict (only grants),
 * trusted-local (writes in the worktree, any command), automation
 * (writes in policies.allowed_paths, the validate commands); grants:
 * "write:GLOB", "run:GLOB", "network:GLOB", each a string or a mapping
 * {grant, exclude, override_immutable}; network needs a grant in every
 * profile. immutable: globs no write may touch without an override grant,
 * beside .git and .baton (core/policy.h). stop_file: the loop stops
 * before an act when this file exists in the worktree. max_iterations:
 * overrides the pipeline's.
 */
struct config_loop {
	char *profile;		/* "strict" */
	struct policy_grant *grants; /* nr_grants of them, each checked by
					policy_grant_parse */
	size_t nr_grants;
	struct strvec immutable;
	char *stop_file;	/* NULL: none */
	int max_iterations;	/* 0: the pipeline's */
};

/* research: the research pipeline's quality gate (openTiger). */
struct config_research {
	char *quality_profile;	/* low (default) | mid | high | ultra | off */
};

/* assist: the assist pipeline (OpenViber). */
struct config_assist {
	char *mode;		/* always-ask | agent-decides (default) |
				   always-execute */
	int auto_complete;	/* a report completes the task without
				   waiting for feedback: false */
	int escalation_timeout_seconds; /* an escalation without its own: 900 */
};

/*
 * hooks: shell strings run with sh -c in the run's worktree at lifecycle
 * points (engine/hooks.h, docs/config.md "Hooks"). The points, in the
 * order a run meets them; their names are the config keys.
 */
enum hook_point {
	HOOK_WORKTREE_SETUP,	/* after the worktree is made, and re-made */
	HOOK_BEFORE_STAGE,	/* a failure blocks the run */
	HOOK_AFTER_STAGE,
	HOOK_BEFORE_MERGE,	/* a failure refuses the landing */
	HOOK_ON_TERMINAL,
	HOOK_WORKTREE_TEARDOWN, /* before `baton clean` removes it */
	HOOK__COUNT,
};

struct config_hooks {
	struct strvec cmds[HOOK__COUNT];
	int timeout_seconds;	/* each command's: 600 */
};

/* The config key of point p ("before_stage"). */
const char *config_hook_name(enum hook_point p);

struct config {
	struct config_provider *providers;
	size_t nr_providers;
	struct config_role *roles;
	size_t nr_roles;
	char *pipeline;		/* workflow.pipeline, default "feature" */
	int max_review_loops;	/* workflow.max_review_loops, default 2 */
	struct strvec approval_stages; /* policies.require_approval_at_stages */
	int approval_timeout_seconds;  /* policies.approval_timeout_seconds:
					  a gate undecided this long is
					  rejected; 0: it waits for good */
	struct strvec allowed_paths;   /* policies.allowed_paths (globs);
					  empty: anywhere in the worktree */
	struct config_budget budget;
	char *sandbox;		/* execution.sandbox: "auto" | "bwrap" | "none" */
	int quota_retries;	/* execution.quota_retries, default 5 */
	int backoff_seconds;	/* execution.backoff_seconds, default 60 */
	/* execution.retry_limits.<class>: how often a failed call of each
	   failure class is tried again (failclass.h has the defaults) */
	int retry_limits[FAIL_CLASS_N];
	int retry_cap;		/* execution.retry_cap: over every class;
				   -1 (default): none */
	int host_ttl_seconds;	/* execution.host_ttl_seconds: how long a
				   host snapshot is reused, default 3600 */
	struct strvec validate_commands; /* shell strings, run with sh -c */
	/* validate.commands[i].when_changed, for i < validate_when_nr (an
	   empty list: the command always runs); NULL when no command has
	   one. A copy of the config whose commands gain more at the end
	   (a task's own checks) keeps these right: the rest always run. */
	struct strvec *validate_when;
	size_t validate_when_nr;
	int validate_timeout_seconds;	 /* default 600 */
	struct config_hooks hooks;
	char *store;		/* store spec; NULL: .baton/baton.db */
	char *repo_url;		/* repo.url: the remote worker hosts share;
				   NULL: this repository is the only one */
	struct config_runtime runtime;
	struct config_merge merge;
	struct config_server server;
	struct config_reports reports;
	struct config_loop loop;
	struct config_assist assist;
	struct config_research research;
	struct config_forge forge;
	struct config_webhook *webhooks; /* notify.webhooks, notify.targets */
	size_t nr_webhooks;
	int link_ttl_seconds; /* notify.link_ttl_seconds: answer links live
				 this long (86400) */
	struct schedule *schedules; /* schedules (core/schedule.h) */
	size_t nr_schedules;
	const struct cnode *pipelines; /* pipelines: map, or NULL */
	struct strvec plugins_enabled; /* plugins.enabled: ids to load */
	struct cnode *root;	/* the merged tree (owned) */
	char hash[17];		/* 16 hex digits: FNV-1a of the merged tree */
};

struct config_builder {
	struct cnode *root;
};

#define CONFIG_BUILDER_INIT { NULL }

/* Starts with the built-in defaults. */
void config_builder_init(struct config_builder *b);
void config_builder_release(struct config_builder *b);

/*
 * Adds a YAML layer (file names it in errors). Syntax errors are reported
 * here; unknown keys and bad values at config_finish.
 */
int config_add_yaml(struct config_builder *b, const char *file,
		    const char *text, size_t len, struct err *e);
/*
 * Adds the BATON_* variables of envp that map to config keys:
 * BATON_PIPELINE (workflow.pipeline), BATON_MAX_REVIEW_LOOPS
 * (workflow.max_review_loops), BATON_VALIDATE_TIMEOUT
 * (validate.timeout_seconds), BATON_STORE (store), BATON_LISTEN
 * (server.listen).
 */
int config_add_env(struct config_builder *b, char *const *envp,
		   struct err *e);
/*
 * Sets one dotted key (e.g. "roles.reviewer") to a scalar; origin is what
 * `config show` prints, such as "flag --role".
 */
int config_set(struct config_builder *b, const char *path, const char *value,
	       const char *origin, struct err *e);

/*
 * Validates the merged layers and fills *out (caller config_release()s).
 * The builder is consumed. Errors name file:line:col and key path: an
 * unknown key, a wrong type, a role naming a provider that does not exist,
 * a provider of unknown type or without a command.
 */
int config_finish(struct config_builder *b, struct config *out,
		  struct err *e);
void config_release(struct config *c);

/* What server.listen and serve --listen take, as an error says it. */
#define CONFIG_LISTEN_FORM \
	"expected HOST:PORT (such as 127.0.0.1:7070) or off"
/* Whether v is HOST:PORT (a port of 0 to 65535, digits only) or "off". */
int config_listen_ok(const char *v);
/*
 * NULL when glob can be a path policy (policies.allowed_paths, a task's
 * --allow), else why not: pathglob_check's reasons, and a leading "./",
 * which no path the policy is held to has.
 */
const char *config_allow_check(const char *glob);

/*
 * The providers that play role: roles.<role>, else roles.default. Returns
 * how many (0 when neither is set) and fills out[0..max) with borrowed
 * pointers.
 */
size_t config_providers_for(const struct config *c, const char *role,
			    const struct config_provider **out, size_t max);
/* The first of them, or NULL. */
const struct config_provider *config_provider_for(const struct config *c,
						  const char *role);
/* The provider called name, or NULL. */
const struct config_provider *config_find_provider(const struct config *c,
						   const char *name);

/* 1 if policies.require_approval_at_stages names status or stage name. */
int config_requires_approval(const struct config *c, const char *status,
			     const char *stage);

/*
 * 1 when policies.allowed_paths lets an agent change path (relative to
 * the worktree): no globs at all, or a glob that matches it ('*' crosses
 * '/'), or names one of its directories (docs, docs/ or docs/ followed by **).
 */
int config_path_allowed(const struct config *c, const char *path);
/* The same test against globs (NULL or empty: every path). */
int config_globs_allow(const struct strvec *globs, const char *path);

/* The effective config with origins (see cnode_dump). */
void config_show(const struct config *c, struct buf *out);

/*
 * Config snapshots: what a run keeps of the config it was made under
 * (runs.config_snapshot).
 *
 * config_to_json gives the merged tree c->root as JSON text (caller
 * frees): maps as objects, sequences as arrays, every scalar as a string
 * holding its text, so that config_from_json gives back the same values
 * and the same hash. What JSON cannot say is lost: origins, and whether
 * a scalar was quoted (a valid config has quoted scalars only where a
 * string is read, so that changes nothing but a quoted "", "~" or "null"
 * becoming null). Bytes that are not UTF-8 become U+FFFD.
 */
char *config_to_json(const struct config *c);
/*
 * Builds *out (caller config_release()s) from such text over the
 * built-in defaults. JSON is YAML, so this is config_add_yaml and
 * config_finish: label names the text in errors ("LABEL:1:230:
 * roles.default: ..."), and the errors are theirs.
 */
int config_from_json(const char *text, const char *label,
		     struct config *out, struct err *e);
/*
 * What changed from tree old to tree cur (either may be NULL: empty),
 * one line per changed key pushed on out, keys in sorted order at each
 * level: "workflow.max_review_loops: 2 -> 3", "providers.x: added",
 * "roles.reviewer: removed". Maps are compared key by key; sequences of
 * scalars whole ("policies.allowed_paths: [a] -> [a, b]"), others item
 * by item while their length holds ("pipelines.p.stages[1].model: a ->
 * b"), else "changed (3 -> 4 items)". The server section (how serve
 * listens) is left out: it is nothing of a run's. Quoting and origins
 * are ignored, and an empty or null scalar counts as an empty map.
 * Values are cut to about 60 characters, at the first control character
 * too, so a line stays short.
 */
void config_diff(const struct cnode *old, const struct cnode *cur,
		 struct strvec *out);

#endif
