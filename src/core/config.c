/*
 * The config model: see config.h. A builder holds one cnode tree that each
 * layer (defaults, YAML files, environment, flags) is merged into, later
 * layers winning key by key. config_finish then checks the merged tree
 * strictly, against the tables of allowed keys below, and copies it into
 * struct config. Checking happens once, after merging, so that a value may
 * be completed by a later layer (a provider's type in the user's file, its
 * command in the repository's) and every error still points at the layer
 * and the line that holds the bad value.
 */
#include "util/compat.h"

#include <ctype.h>
#include <fnmatch.h>
#include <limits.h>

#include "core/cnode.h"
#include "core/config.h"
#include "core/plugin.h"
#include "core/policy.h"
#include "core/schedule.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/pathglob.h"
#include "util/xalloc.h"

#define DEFAULT_PROVIDER_TIMEOUT 1800
#define MAX_PROVIDER_TIMEOUT	 604800
#define MAX_VALIDATE_TIMEOUT	 86400
#define MAX_REVIEW_LOOPS	 100
#define DEFAULT_MAX_STEPS	 50

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL

static const char *const top_keys[] = {
    "providers", "roles",     "workflow", "policies",  "validate",
    "pipelines", "store",     "budget",	  "execution", "runtime",
    "merge",	 "server",    "reports",  "notify",	 "repo",
    "loop",	 "assist",    "forge",	  "hooks",	 "plugins",
    "research",	 "schedules", NULL,
};
static const char *const provider_keys[] = {
    "type",	"command",     "args",		  "env",	 "model",
    "effort",	"base_url",    "api_key_env",	  "timeout_seconds",
    "max_retries", "max_steps", "max_tokens",	  "pricing",	 "isolated",
    NULL,
};
/* The adapter table's types (agent.c); t_config checks they agree. */
static const char *const provider_types[] = {
    "claude-code", "codex",  "gemini",	  "qwen",    "opencode",
    "aider",	   "copilot", "pi",	  "kilo",    "cline",
    "continue",	   "amp",    "auggie",	  "crush",   "openai",
    "anthropic",   "command", "acp",     NULL,
};
/*
 * Keys an ACP provider does not take: the agent is pointed at its model
 * server, key and settings by its own command, args and env.
 */
static const char *const acp_refused_keys[] = {
    "effort",	  "base_url",  "api_key_env", "max_retries",
    "max_steps", "max_tokens", "isolated",    NULL,
};
static const char *const pricing_keys[] = {"input", "output", NULL};
static const char *const efforts[] = {"low", "medium", "high", NULL};
static const char *const budget_keys[] = {
    "max_cost_usd",	 "max_tokens", "max_wall_minutes", "max_turns_per_run",
    "max_turns_per_day", "on_limit",	"actions",	    "downgrade",
    NULL,
};
/* enum budget_line's names, in order: the keys of budget.actions */
static const char *const budget_lines[] = {
    "max_cost_usd",	 "max_tokens",	      "max_wall_minutes",
    "max_turns_per_run", "max_turns_per_day", NULL,
};
/* enum budget_action's names, in order */
static const char *const budget_actions[] = {
    "pause", "stop", "downgrade", "reduce_effort", NULL,
};
static const char *const execution_keys[] = {
    "sandbox",
    "quota_retries",
    "backoff_seconds",
    "retry_limits",
    "retry_cap",
    "host_ttl_seconds",
    NULL,
};
static const char *const sandboxes[] = {"auto", "bwrap", "none", NULL};
static const char *const role_names[] = {
    "default",	"planner", "architect", "implementer", "reviewer",
    "fixer",	"verifier", "judge",	"analyst",     "researcher",
    "writer",	NULL,
};
static const char *const runtime_keys[] = {
    "workers",	       "lease_seconds",	       "sweep_seconds",
    "max_attempts",    "failure_repeat_limit", "cooldown_seconds",
    "judge",	       "max_rework_depth",     "auto_merge",
    "file_cap_kib",    "unattended",	       NULL,
};
static const char *const merge_keys[] = {
    "base_branch",
    "retries",
    "backoff_seconds",
    NULL,
};
static const char *const server_keys[] = {
    "listen",
    "threads",
    "max_body_kb",
    "max_streams",
    "public_url",
    "tls",
    "insecure",
    NULL,
};
static const char *const server_tls_keys[] = {
    "cert",
    "key",
    NULL,
};
static const char *const reports_keys[] = {
    "milestone_after_seconds",
    "periodic_after_seconds",
    "interval_seconds",
    NULL,
};
static const char *const notify_keys[] = {
    "webhooks", "targets", "link_ttl_seconds", NULL,
};
/* notify.targets[].format, in enum notify_format's order */
static const char *const notify_formats[] = {
    "generic", "slack", "discord", "ntfy", NULL,
};
static const char *const loop_keys[] = {
    "profile", "grants", "immutable", "stop_file", "max_iterations", NULL,
};
static const char *const grant_keys[] = {
    "grant", "exclude", "override_immutable", NULL,
};
static const char *const loop_profiles[] = {
    "strict", "trusted-local", "automation", NULL,
};
static const char *const assist_keys[] = {
    "mode", "auto_complete", "escalation_timeout_seconds", NULL,
};
static const char *const assist_modes[] = {
    "always-ask", "agent-decides", "always-execute", NULL,
};
static const char *const research_keys[] = { "quality_profile", NULL };
/* research_quality_profiles (core/research.c) and "off" */
static const char *const research_profiles[] = {
    "off", "low", "mid", "high", "ultra", NULL,
};
static const char *const repo_keys[] = { "url", NULL };
static const char *const forge_keys[] = {
    "type",	     "repo",	     "token_env",	   "api_url",
    "remote",	     "intake",	     "pull_requests",	   "reactions",
    "webhook_secret_env", "poll_seconds", NULL,
};
static const char *const forge_types[] = { "github", NULL };
static const char *const forge_intake_keys[] = { "label", NULL };
static const char *const forge_pr_keys[] = {
    "draft", "auto_merge", "merge_method", NULL,
};
static const char *const merge_methods[] = {
    "merge", "squash", "rebase", NULL,
};
static const char *const forge_reaction_keys[] = {
    "ci_failed", "changes_requested", "max_rounds", "label", NULL,
};
static const char *const forge_reactions[] = { "fix", "ask", "ignore", NULL };
static const char *const webhook_keys[] = {
    "url",     "events",	  "secret_env", "format", "name",
    "retries", "backoff_seconds", "timeout_seconds",
    NULL,
};
/* What a webhook can be told of (server/notify.c sends them). */
static const char *const webhook_events[] = {
    "approval_requested",
    "run_terminal",
    "budget_crossed",
    "schedule",
    NULL,
};
static const char *const plugins_keys[] = { "enabled", NULL };
static const char *const workflow_keys[] = {
    "pipeline",
    "max_review_loops",
    NULL,
};
static const char *const policy_keys[] = {
    "require_approval_at_stages",
    "approval_timeout_seconds",
    "allowed_paths",
    NULL,
};
static const char *const validate_keys[] = {
    "commands",
    "timeout_seconds",
    NULL,
};
static const char *const validate_command_keys[] = {
    "run",
    "when_changed",
    NULL,
};

/* hooks: one key per point, in enum hook_point's order, then the rest. */
static const char *const hook_keys[] = {
    "worktree_setup", "before_stage",	   "after_stage",     "before_merge",
    "on_terminal",    "worktree_teardown", "timeout_seconds", NULL,
};
#define MAX_HOOK_TIMEOUT 86400
_Static_assert(sizeof(hook_keys) / sizeof(hook_keys[0]) == HOOK__COUNT + 2,
	       "hook_keys names every enum hook_point");

/* The BATON_* variables config_add_env understands. */
static const struct env_key {
	const char *var;
	const char *path;
} env_keys[] = {
    {"BATON_PIPELINE", "workflow.pipeline"},
    {"BATON_MAX_REVIEW_LOOPS", "workflow.max_review_loops"},
    {"BATON_VALIDATE_TIMEOUT", "validate.timeout_seconds"},
    {"BATON_STORE", "store"},
    {"BATON_LISTEN", "server.listen"},
    {"BATON_REPO_URL", "repo.url"},
};

/* The built-in layer; "[]" stands for an empty sequence. */
static const struct default_key {
	const char *path;
	const char *value;
} defaults[] = {
    {"workflow.pipeline", "feature"},
    {"workflow.max_review_loops", "2"},
    {"validate.timeout_seconds", "600"},
    {"validate.commands", "[]"},
    {"policies.require_approval_at_stages", "[]"},
    {"execution.sandbox", "auto"},
    {"execution.quota_retries", "5"},
    {"execution.backoff_seconds", "60"},
};

/*
 * Finds or creates the node at dotted path in b's tree and stores kid
 * there (consuming it). Missing maps on the way are created with origin.
 * Fails when the path is malformed or crosses a value that is not a map.
 */
static int
set_node(struct config_builder *b, const char *path, struct cnode *kid,
	 const char *origin, struct err *e)
{
	struct cnode *n = b->root, *next;
	const char *p = path, *dot;
	char *seg = NULL;
	size_t len;
	int rc = 0;

	for (;;) {
		dot = strchr(p, '.');
		len = dot ? (size_t)(dot - p) : strlen(p);
		if (!len) {
			rc = err_set(e, BATON_EINVAL, "invalid key path '%s'",
				     path);
			goto out;
		}
		free(seg);
		seg = xstrndup(p, len);
		if (!dot)
			break;
		next = (struct cnode *)cnode_get(n, seg);
		if (!next) {
			next = cnode_new_map(origin, 0, 0);
			cnode_add(n, seg, next);
		} else if (next->type != CNODE_MAP) {
			rc = err_set(e, BATON_EINVAL,
				     "cannot set '%s': '%.*s' is not a mapping",
				     path, (int)(dot - path), path);
			goto out;
		}
		n = next;
		p = dot + 1;
	}
	cnode_add(n, seg, kid);
	kid = NULL;
out:
	free(seg);
	cnode_free(kid);
	return rc;
}

/*
 * A builder set up with CONFIG_BUILDER_INIT alone gets its defaults on
 * first use, so no layer can ever be merged over a tree without them.
 */
static void
ensure_root(struct config_builder *b)
{
	if (!b->root)
		config_builder_init(b);
}

void
config_builder_init(struct config_builder *b)
{
	struct cnode *kid;
	size_t i;

	b->root = cnode_new_map("default", 0, 0);
	for (i = 0; i < ARRAY_SIZE(defaults); i++) {
		if (!strcmp(defaults[i].value, "[]"))
			kid = cnode_new_seq("default", 0, 0);
		else
			kid = cnode_new_scalar(defaults[i].value, "default", 0,
					       0);
		if (set_node(b, defaults[i].path, kid, "default", NULL) < 0)
			BUG("bad default '%s'", defaults[i].path);
	}
}

void
config_builder_release(struct config_builder *b)
{
	cnode_free(b->root);
	b->root = NULL;
}

int
config_add_yaml(struct config_builder *b, const char *file, const char *text,
		size_t len, struct err *e)
{
	struct cnode *layer = NULL;
	int rc;

	rc = cnode_parse_yaml(text, len, file, &layer, e);
	if (rc < 0)
		return rc;
	ensure_root(b);
	cnode_merge(b->root, layer);
	return 0;
}

/*
 * Empty variables are skipped, as if unset, so that BATON_STORE= in a
 * shell does not turn into an empty store spec.
 */
int
config_add_env(struct config_builder *b, char *const *envp, struct err *e)
{
	char origin[64];
	size_t i, n;
	int rc;

	ensure_root(b);
	for (; envp && *envp; envp++) {
		for (i = 0; i < ARRAY_SIZE(env_keys); i++) {
			n = strlen(env_keys[i].var);
			if (strncmp(*envp, env_keys[i].var, n) ||
			    (*envp)[n] != '=' || !(*envp)[n + 1])
				continue;
			snprintf(origin, sizeof(origin), "env %s",
				 env_keys[i].var);
			rc = config_set(b, env_keys[i].path, *envp + n + 1,
					origin, e);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

int
config_set(struct config_builder *b, const char *path, const char *value,
	   const char *origin, struct err *e)
{
	ensure_root(b);
	return set_node(b, path, cnode_new_scalar(value, origin, 0, 0), origin,
			e);
}

/*
 * Reading the merged tree.
 */

/* A plain empty, "~" or "null" scalar: a key written with no value. */
static int
is_null(const struct cnode *n)
{
	return n->type == CNODE_SCALAR && !n->quoted &&
	       (!n->value[0] || !strcmp(n->value, "~") ||
		!strcasecmp(n->value, "null"));
}

/*
 * The map under key in parent, as a section: NULL when absent or written
 * empty, an error when it is something other than a map. Its keys are
 * checked against allowed when that is not NULL.
 */
static int
get_section(const struct cnode *parent, const char *key,
	    const char *const *allowed, const struct cnode **out, struct err *e)
{
	const struct cnode *n = cnode_get(parent, key);
	int rc;

	*out = NULL;
	if (!n || is_null(n))
		return 0;
	rc = cnode_expect(n, CNODE_MAP, key, e);
	if (rc < 0)
		return rc;
	if (allowed) {
		rc = cnode_check_keys(n, key, allowed, e);
		if (rc < 0)
			return rc;
	}
	*out = n;
	return 0;
}

/* Fails with "WHERE: PATH: msg" at node n. */
static int
node_error(const struct cnode *n, const char *path, const char *msg,
	   struct err *e)
{
	char where[512];

	cnode_where(n, where, sizeof(where));
	return err_set(e, BATON_EINVAL, "%s: %s: %s", where, path, msg);
}

/* A scalar with some text in it, copied to *out (replacing what was there). */
static int
read_string(const struct cnode *n, const char *path, char **out, struct err *e)
{
	int rc;

	rc = cnode_expect(n, CNODE_SCALAR, path, e);
	if (rc < 0)
		return rc;
	if (!n->value[0] || is_null(n))
		return node_error(n, path, "expected a non-empty string", e);
	free(*out);
	*out = xstrdup(n->value);
	return 0;
}

static int
read_int(const struct cnode *n, const char *path, long min, long max, int *out,
	 struct err *e)
{
	long v;
	int rc;

	rc = cnode_int(n, path, min, max, &v, e);
	if (rc < 0)
		return rc;
	*out = (int)v;
	return 0;
}

/*
 * A list of strings: a sequence of scalars, or a single scalar standing
 * for a list of one. Nothing at all (null) is the empty list. When
 * nonempty is set an empty list is an error. Appends to out.
 */
static int
read_strings(const struct cnode *n, const char *path, int nonempty,
	     struct strvec *out, struct err *e)
{
	struct buf item = BUF_INIT;
	size_t i;
	int rc = 0;

	if (n->type == CNODE_SCALAR && !is_null(n)) {
		strvec_push(out, n->value);
		goto out;
	}
	if (n->type == CNODE_MAP) {
		rc = cnode_expect(n, CNODE_SEQ, path, e);
		goto out;
	}
	if (nonempty && !n->nr) {
		rc = node_error(n, path, "expected a non-empty list of strings",
				e);
		goto out;
	}
	for (i = 0; i < n->nr; i++) {
		buf_reset(&item);
		buf_addf(&item, "%s[%zu]", path, i);
		rc = cnode_expect(n->kids[i], CNODE_SCALAR, item.ptr, e);
		if (rc < 0)
			goto out;
		strvec_push(out, n->kids[i]->value);
	}
out:
	buf_release(&item);
	return rc;
}

/* "a, b, c" for an error message. */
static void
join_list(const char *const *list, struct buf *out)
{
	const char *const *t;

	for (t = list; *t; t++)
		buf_addf(out, "%s%s", t == list ? "" : ", ", *t);
}

/* A scalar that must be one of list. */
static int
read_choice(const struct cnode *n, const char *path, const char *const *list,
	    char **out, struct err *e)
{
	struct buf msg = BUF_INIT;
	int rc = read_string(n, path, out, e);

	if (rc < 0 || str_in_list(list, *out))
		return rc;
	buf_addf(&msg, "'%s' is not one of: ", *out);
	join_list(list, &msg);
	rc = node_error(n, path, msg.ptr, e);
	buf_release(&msg);
	return rc;
}

/* An environment variable's name: [A-Za-z_][A-Za-z0-9_]*. */
static int
is_var_name(const char *s)
{
	const char *p;

	if (!*s || isdigit((unsigned char)*s))
		return 0;
	for (p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return 0;
	return 1;
}

/* env: {NAME: value} appended to out as "NAME=value". */
static int
read_env(const struct cnode *env, const char *path, struct strvec *out,
	 struct err *e)
{
	struct buf kpath = BUF_INIT;
	size_t i;
	int rc;

	rc = cnode_expect(env, CNODE_MAP, path, e);
	for (i = 0; rc >= 0 && i < env->nr; i++) {
		const struct cnode *n = env->kids[i];

		buf_reset(&kpath);
		buf_addf(&kpath, "%s.%s", path, n->key);
		if (!is_var_name(n->key)) {
			rc = node_error(n, kpath.ptr,
					"not a valid variable name", e);
			break;
		}
		rc = cnode_expect(n, CNODE_SCALAR, kpath.ptr, e);
		if (rc >= 0)
			strvec_pushf(out, "%s=%s", n->key, n->value);
	}
	buf_release(&kpath);
	return rc;
}

/* The optional keys of a provider, after type and command. */
static int
read_provider_options(const struct cnode *pn, const char *path,
		      struct config_provider *p, struct err *e)
{
	struct buf k = BUF_INIT;
	const struct cnode *n;
	double v = 0;
	long l = 0;
	int rc = 0;

#define KEY(name) (buf_reset(&k), buf_addf(&k, "%s.%s", path, name), k.ptr)
	if ((n = cnode_get(pn, "args")) && !is_null(n))
		rc = read_strings(n, KEY("args"), 0, &p->args, e);
	if (rc >= 0 && (n = cnode_get(pn, "env")) && !is_null(n))
		rc = read_env(n, KEY("env"), &p->env, e);
	if (rc >= 0 && (n = cnode_get(pn, "model")))
		rc = read_string(n, KEY("model"), &p->model, e);
	if (rc >= 0 && (n = cnode_get(pn, "effort")))
		rc = read_choice(n, KEY("effort"), efforts, &p->effort, e);
	if (rc >= 0 && (n = cnode_get(pn, "base_url"))) {
		rc = read_string(n, KEY("base_url"), &p->base_url, e);
		if (rc >= 0 && strncmp(p->base_url, "http://", 7) &&
		    strncmp(p->base_url, "https://", 8))
			rc = node_error(n, k.ptr,
					"expected an http:// or https:// URL",
					e);
		p->isolated = 1;
	}
	if (rc >= 0 && (n = cnode_get(pn, "api_key_env"))) {
		rc = read_string(n, KEY("api_key_env"), &p->api_key_env, e);
		if (rc >= 0 && !is_var_name(p->api_key_env))
			rc = node_error(n, k.ptr,
					"not a valid variable name", e);
	}
	if (rc >= 0 && (n = cnode_get(pn, "timeout_seconds")))
		rc = read_int(n, KEY("timeout_seconds"), 1,
			      MAX_PROVIDER_TIMEOUT, &p->timeout_seconds, e);
	if (rc >= 0 && (n = cnode_get(pn, "max_retries")))
		rc = read_int(n, KEY("max_retries"), 0, 20, &p->max_retries,
			      e);
	if (rc >= 0 && (n = cnode_get(pn, "max_steps")))
		rc = read_int(n, KEY("max_steps"), 1, 10000, &p->max_steps, e);
	if (rc >= 0 && (n = cnode_get(pn, "max_tokens"))) {
		rc = cnode_int(n, KEY("max_tokens"), 0, LONG_MAX, &l, e);
		p->max_tokens = l;
	}
	if (rc >= 0 && (n = cnode_get(pn, "pricing")) && !is_null(n)) {
		rc = cnode_expect(n, CNODE_MAP, KEY("pricing"), e);
		if (rc >= 0)
			rc = cnode_check_keys(n, k.ptr, pricing_keys, e);
		if (rc >= 0 && cnode_get(n, "input")) {
			rc = cnode_number(cnode_get(n, "input"),
					  KEY("pricing.input"), 0, 1e6, &v, e);
			p->price_in = v;
		}
		if (rc >= 0 && cnode_get(n, "output")) {
			rc = cnode_number(cnode_get(n, "output"),
					  KEY("pricing.output"), 0, 1e6, &v,
					  e);
			p->price_out = v;
		}
	}
	if (rc >= 0 && (n = cnode_get(pn, "isolated")))
		rc = cnode_bool(n, KEY("isolated"), &p->isolated, e);
#undef KEY
	buf_release(&k);
	return rc;
}

/* One provider: the map pn named by its key, into p. */
static int
read_provider(const struct cnode *pn, struct config_provider *p, struct err *e)
{
	struct buf path = BUF_INIT, kpath = BUF_INIT, list = BUF_INIT;
	const struct cnode *n;
	char where[512];
	int rc, http;

	buf_addf(&path, "providers.%s", pn->key);
	p->name = xstrdup(pn->key);
	p->node = pn;
	p->timeout_seconds = DEFAULT_PROVIDER_TIMEOUT;
	p->max_retries = -1;
	p->max_steps = DEFAULT_MAX_STEPS;
	rc = cnode_check_keys(pn, path.ptr, provider_keys, e);
	if (rc < 0)
		goto out;

	n = cnode_get(pn, "type");
	if (!n) {
		cnode_where(pn, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: %s: missing required key 'type' (one of: "
			     "claude-code, codex, gemini, qwen, opencode, "
			     "aider, copilot, pi, kilo, cline, continue, amp, "
			     "auggie, crush, openai, anthropic, command, "
			     "acp)",
			     where, path.ptr);
		goto out;
	}
	buf_addf(&kpath, "%s.type", path.ptr);
	rc = read_string(n, kpath.ptr, &p->type, e);
	if (rc < 0)
		goto out;
	if (!str_in_list(provider_types, p->type)) {
		join_list(provider_types, &list);
		cnode_where(n, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: %s: unknown provider type '%s' "
			     "(expected: %s)",
			     where, kpath.ptr, p->type, list.ptr);
		goto out;
	}
	http = !strcmp(p->type, "openai") || !strcmp(p->type, "anthropic");

	n = cnode_get(pn, "command");
	if ((!n || is_null(n)) &&
	    (!strcmp(p->type, "command") || !strcmp(p->type, "acp"))) {
		cnode_where(n ? n : pn, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: %s: missing required key 'command' "
			     "(%s)",
			     where, path.ptr,
			     strcmp(p->type, "acp") ?
				     "a command provider needs the program "
				     "to run" :
				     "an ACP provider needs the agent to "
				     "start, such as [gemini, --acp]");
		goto out;
	}
	if (!strcmp(p->type, "acp")) {
		size_t i;

		for (i = 0; acp_refused_keys[i]; i++) {
			const struct cnode *k = cnode_get(pn, acp_refused_keys[i]);

			if (!k)
				continue;
			buf_reset(&kpath);
			buf_addf(&kpath, "%s.%s", path.ptr, acp_refused_keys[i]);
			rc = node_error(k, kpath.ptr,
					"an ACP agent takes no such key: point "
					"it at its model server, key and "
					"settings with its own args and env",
					e);
			goto out;
		}
	}
	if (n && !is_null(n)) {
		buf_reset(&kpath);
		buf_addf(&kpath, "%s.command", path.ptr);
		if (http) {
			rc = node_error(n, kpath.ptr,
					"baton's own agent runs no program "
					"(set base_url and model instead)",
					e);
			goto out;
		}
		rc = read_strings(n, kpath.ptr, 1, &p->command, e);
		if (rc < 0)
			goto out;
		if (!p->command.v[0][0]) {
			rc = node_error(n, kpath.ptr, "the program name is empty",
					e);
			goto out;
		}
	}
	rc = read_provider_options(pn, path.ptr, p, e);
	if (rc >= 0 && http && !p->model) {
		cnode_where(pn, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: %s: missing required key 'model' (the "
			     "model name the server at base_url serves)",
			     where, path.ptr);
	}
out:
	buf_release(&path);
	buf_release(&kpath);
	buf_release(&list);
	return rc;
}

static int
read_providers(struct config *c, struct err *e)
{
	const struct cnode *sec;
	size_t i;
	int rc;

	rc = get_section(c->root, "providers", NULL, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	c->providers = xcalloc(sec->nr ? sec->nr : 1, sizeof(*c->providers));
	for (i = 0; i < sec->nr; i++) {
		struct config_provider *p = &c->providers[c->nr_providers++];

		strvec_init(&p->command);
		strvec_init(&p->args);
		strvec_init(&p->env);
		rc = read_provider(sec->kids[i], p, e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

const struct config_provider *
config_find_provider(const struct config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nr_providers; i++)
		if (!strcmp(c->providers[i].name, name))
			return &c->providers[i];
	return NULL;
}

/* s without leading and trailing blanks (in place). */
static char *
trim(char *s)
{
	size_t n;

	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* Fails at n: no provider called name, listing those that exist. */
static int
no_such_provider(const struct config *c, const struct cnode *n,
		 const char *path, const char *name, struct err *e)
{
	struct buf list = BUF_INIT;
	char where[512];
	size_t j;
	int rc;

	for (j = 0; j < c->nr_providers; j++)
		buf_addf(&list, "%s%s", j ? ", " : "", c->providers[j].name);
	cnode_where(n, where, sizeof(where));
	rc = err_set(e, BATON_EINVAL, "%s: %s: no provider named '%s' (%s%s)",
		     where, path, name,
		     c->nr_providers ? "providers: "
				     : "no providers are configured",
		     list.ptr);
	buf_release(&list);
	return rc;
}

/*
 * roles: role name → a provider name, a list of them, or "a,b" (what
 * --role reviewer=a,b sets). Each must name a configured provider.
 */
static int
read_roles(struct config *c, struct err *e)
{
	struct buf path = BUF_INIT;
	struct strvec names = STRVEC_INIT;
	const struct cnode *sec, *n;
	size_t i, j;
	int rc;

	rc = get_section(c->root, "roles", role_names, &sec, e);
	if (rc < 0 || !sec)
		goto out;
	c->roles = xcalloc(sec->nr ? sec->nr : 1, sizeof(*c->roles));
	for (i = 0; i < sec->nr; i++) {
		struct config_role *r = &c->roles[c->nr_roles++];

		n = sec->kids[i];
		strvec_init(&r->providers);
		buf_reset(&path);
		buf_addf(&path, "roles.%s", n->key);
		r->role = xstrdup(n->key);
		strvec_clear(&names);
		rc = read_strings(n, path.ptr, 1, &names, e);
		if (rc < 0)
			goto out;
		for (j = 0; j < names.nr; j++) {
			const char *p = names.v[j], *comma;

			do {
				char *one;

				comma = strchr(p, ',');
				one = comma ? xstrndup(p, (size_t)(comma - p))
					    : xstrdup(p);
				strvec_push(&r->providers, trim(one));
				free(one);
				p = comma + 1;
			} while (comma);
		}
		for (j = 0; j < r->providers.nr; j++) {
			if (config_find_provider(c, r->providers.v[j]))
				continue;
			rc = no_such_provider(c, n, path.ptr,
					      r->providers.v[j], e);
			goto out;
		}
	}
out:
	buf_release(&path);
	strvec_clear(&names);
	return rc;
}

const char *
budget_line_name(enum budget_line l)
{
	return l < BUDGET_LINE_N ? budget_lines[l] : "?";
}

const char *
budget_action_name(enum budget_action a)
{
	return (size_t)a < ARRAY_SIZE(budget_actions) - 1 ?
		       budget_actions[a] :
		       "?";
}

const char *
config_downgrade_for(const struct config *c, const char *role)
{
	const char *any = NULL;
	size_t i, n = role ? strlen(role) : 0;

	for (i = 0; i < c->budget.downgrade.nr; i++) {
		const char *v = c->budget.downgrade.v[i];

		if (role && !strncmp(v, role, n) && v[n] == '=')
			return v + n + 1;
		if (!strncmp(v, "default=", 8))
			any = v + 8;
	}
	return any;
}

/* An action's name at n (path names it) into *out. */
static int
read_action(const struct cnode *n, const char *path, enum budget_action *out,
	    struct err *e)
{
	char *name = NULL;
	size_t i;
	int rc = read_choice(n, path, budget_actions, &name, e);

	for (i = 0; rc >= 0 && budget_actions[i]; i++)
		if (!strcmp(name, budget_actions[i]))
			*out = (enum budget_action)i;
	free(name);
	return rc;
}

/*
 * budget.on_limit (every line's action), budget.actions (a line's own)
 * and budget.downgrade (ROLE: PROVIDER_OR_MODEL). A downgrade action
 * without a downgrade for any role falls back to stop at run time, as
 * documented; a role the config does not know is an error here.
 */
static int
read_budget_actions(struct config *c, const struct cnode *sec, struct err *e)
{
	enum budget_action all = BUDGET_PAUSE;
	const struct cnode *map, *n;
	struct buf path = BUF_INIT;
	size_t i;
	int rc = 0;

	if ((n = cnode_get(sec, "on_limit")))
		rc = read_action(n, "budget.on_limit", &all, e);
	for (i = 0; i < BUDGET_LINE_N; i++)
		c->budget.actions[i] = all;
	if (rc >= 0)
		rc = get_section(sec, "actions", budget_lines, &map, e);
	for (i = 0; rc >= 0 && map && i < map->nr; i++) {
		size_t l;

		n = map->kids[i];
		buf_reset(&path);
		buf_addf(&path, "budget.actions.%s", n->key);
		for (l = 0; l < BUDGET_LINE_N; l++)
			if (!strcmp(n->key, budget_lines[l]))
				rc = read_action(n, path.ptr,
						 &c->budget.actions[l], e);
	}
	if (rc >= 0)
		rc = get_section(sec, "downgrade", role_names, &map, e);
	for (i = 0; rc >= 0 && map && i < map->nr; i++) {
		char *to = NULL;

		n = map->kids[i];
		buf_reset(&path);
		buf_addf(&path, "budget.downgrade.%s", n->key);
		rc = read_string(n, path.ptr, &to, e);
		if (rc >= 0)
			strvec_pushf(&c->budget.downgrade, "%s=%s", n->key,
				     to);
		free(to);
	}
	buf_release(&path);
	return rc;
}

static int
read_budget(struct config *c, struct err *e)
{
	const struct cnode *sec, *n;
	long l = 0;
	int rc;

	rc = get_section(c->root, "budget", budget_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	if ((n = cnode_get(sec, "max_cost_usd")))
		rc = cnode_number(n, "budget.max_cost_usd", 0, 1e9,
				  &c->budget.max_cost_usd, e);
	if (rc >= 0 && (n = cnode_get(sec, "max_tokens"))) {
		rc = cnode_int(n, "budget.max_tokens", 0, LONG_MAX, &l, e);
		c->budget.max_tokens = l;
	}
	if (rc >= 0 && (n = cnode_get(sec, "max_wall_minutes")))
		rc = read_int(n, "budget.max_wall_minutes", 0, 525600,
			      &c->budget.max_wall_minutes, e);
	if (rc >= 0 && (n = cnode_get(sec, "max_turns_per_run"))) {
		rc = cnode_int(n, "budget.max_turns_per_run", 0, 1000000, &l,
			       e);
		c->budget.max_turns_per_run = l;
	}
	if (rc >= 0 && (n = cnode_get(sec, "max_turns_per_day"))) {
		rc = cnode_int(n, "budget.max_turns_per_day", 0, 100000000, &l,
			       e);
		c->budget.max_turns_per_day = l;
	}
	if (rc >= 0)
		rc = read_budget_actions(c, sec, e);
	return rc;
}

/* execution.retry_limits: a map of failure class to 0..100. */
static int
read_retry_limits(struct config *c, const struct cnode *exec, struct err *e)
{
	static const char *names[FAIL_CLASS_N + 1];
	const struct cnode *sec, *n;
	char path[64];
	int i, rc;

	for (i = 0; i < FAIL_CLASS_N; i++)
		names[i] = fail_class_name(i);
	rc = get_section(exec, "retry_limits", names, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	for (i = 0; i < FAIL_CLASS_N && rc >= 0; i++) {
		n = cnode_get(sec, names[i]);
		if (!n)
			continue;
		snprintf(path, sizeof(path), "execution.retry_limits.%s",
			 names[i]);
		rc = read_int(n, path, 0, 100, &c->retry_limits[i], e);
	}
	return rc;
}

static int
read_execution(struct config *c, struct err *e)
{
	const struct cnode *sec, *n;
	int rc;

	rc = get_section(c->root, "execution", execution_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	if ((n = cnode_get(sec, "sandbox")))
		rc = read_choice(n, "execution.sandbox", sandboxes, &c->sandbox,
				 e);
	if (rc >= 0 && (n = cnode_get(sec, "quota_retries")))
		rc = read_int(n, "execution.quota_retries", 0, 100,
			      &c->quota_retries, e);
	if (rc >= 0 && (n = cnode_get(sec, "backoff_seconds")))
		rc = read_int(n, "execution.backoff_seconds", 1, 86400,
			      &c->backoff_seconds, e);
	if (rc >= 0 && (n = cnode_get(sec, "retry_cap")))
		rc = read_int(n, "execution.retry_cap", -1, 100,
			      &c->retry_cap, e);
	if (rc >= 0 && (n = cnode_get(sec, "host_ttl_seconds")))
		rc = read_int(n, "execution.host_ttl_seconds", 0, 30 * 86400,
			      &c->host_ttl_seconds, e);
	if (rc >= 0)
		rc = read_retry_limits(c, sec, e);
	return rc;
}

static int
read_runtime(struct config *c, struct err *e)
{
	struct config_runtime *rt = &c->runtime;
	const struct cnode *sec, *n;
	int rc;

	rc = get_section(c->root, "runtime", runtime_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	if ((n = cnode_get(sec, "workers")))
		rc = read_int(n, "runtime.workers", 1, 256, &rt->workers, e);
	if (rc >= 0 && (n = cnode_get(sec, "lease_seconds")))
		rc = read_int(n, "runtime.lease_seconds", 1, 86400,
			      &rt->lease_seconds, e);
	if (rc >= 0 && (n = cnode_get(sec, "sweep_seconds")))
		rc = read_int(n, "runtime.sweep_seconds", 1, 3600,
			      &rt->sweep_seconds, e);
	if (rc >= 0 && (n = cnode_get(sec, "max_attempts")))
		rc = read_int(n, "runtime.max_attempts", 1, 100,
			      &rt->max_attempts, e);
	if (rc >= 0 && (n = cnode_get(sec, "failure_repeat_limit")))
		rc = read_int(n, "runtime.failure_repeat_limit", 1, 100,
			      &rt->failure_repeat_limit, e);
	if (rc >= 0 && (n = cnode_get(sec, "cooldown_seconds")))
		rc = read_int(n, "runtime.cooldown_seconds", 0, 86400,
			      &rt->cooldown_seconds, e);
	if (rc >= 0 && (n = cnode_get(sec, "judge")))
		rc = cnode_bool(n, "runtime.judge", &rt->judge, e);
	if (rc >= 0 && (n = cnode_get(sec, "file_cap_kib")))
		rc = read_int(n, "runtime.file_cap_kib", 1, 65536,
			      &rt->file_cap_kib, e);
	if (rc >= 0 && (n = cnode_get(sec, "max_rework_depth")))
		rc = read_int(n, "runtime.max_rework_depth", 0, 20,
			      &rt->max_rework_depth, e);
	if (rc >= 0 && (n = cnode_get(sec, "auto_merge")))
		rc = cnode_bool(n, "runtime.auto_merge", &rt->auto_merge, e);
	if (rc >= 0 && (n = cnode_get(sec, "unattended")))
		rc = cnode_bool(n, "runtime.unattended", &rt->unattended, e);
	return rc;
}

static int
read_merge(struct config *c, struct err *e)
{
	struct config_merge *m = &c->merge;
	const struct cnode *sec, *n;
	int rc;

	rc = get_section(c->root, "merge", merge_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	if ((n = cnode_get(sec, "base_branch")) && !is_null(n))
		rc = read_string(n, "merge.base_branch", &m->base_branch, e);
	if (rc >= 0 && (n = cnode_get(sec, "retries")))
		rc = read_int(n, "merge.retries", 0, 100, &m->retries, e);
	if (rc >= 0 && (n = cnode_get(sec, "backoff_seconds")))
		rc = read_int(n, "merge.backoff_seconds", 0, 86400,
			      &m->backoff_seconds, e);
	return rc;
}

/*
 * "HOST:PORT" or "off"; port 0 takes any free port. The port is digits
 * only: strtol alone would let "127.0.0.1: 80" and ":+80" through.
 */
int
config_listen_ok(const char *v)
{
	const char *colon = strrchr(v, ':');
	char *end = NULL;
	long port = -1;

	if (!strcmp(v, "off"))
		return 1;
	if (colon && isdigit((unsigned char)colon[1]))
		port = strtol(colon + 1, &end, 10);
	return colon && colon != v && end && !*end && port >= 0 &&
	       port <= 65535;
}

static int
read_listen(const struct cnode *n, char **out, struct err *e)
{
	int rc = read_string(n, "server.listen", out, e);

	if (rc < 0 || config_listen_ok(*out))
		return rc;
	return node_error(n, "server.listen", CONFIG_LISTEN_FORM, e);
}

/*
 * server.public_url: http(s)://HOST[:PORT][/PREFIX], without query,
 * fragment or credentials, its trailing '/' dropped: answer links are
 * PUBLIC_URL/api/v1/answers/TOKEN.
 */
static int
read_public_url(const struct cnode *n, char **out, struct err *e)
{
	const char *host;
	size_t len;
	int rc = read_string(n, "server.public_url", out, e);

	if (rc < 0)
		return rc;
	host = !strncmp(*out, "https://", 8) ? *out + 8 :
	       !strncmp(*out, "http://", 7) ? *out + 7 : NULL;
	if (!host || !*host || *host == '/')
		return node_error(n, "server.public_url",
				  "expected an http:// or https:// URL, such "
				  "as https://baton.example.com",
				  e);
	if (strpbrk(*out, "?#@ \"\\<>") ||
	    strspn(*out, "!$&'()*+,-./0123456789:;=ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "[]_abcdefghijklmnopqrstuvwxyz~%") != strlen(*out))
		return node_error(n, "server.public_url",
				  "a URL without query, fragment, credentials "
				  "or characters that need quoting",
				  e);
	len = strlen(*out);
	while (len > 0 && (*out)[len - 1] == '/')
		(*out)[--len] = '\0';
	return 0;
}

static int
read_server(struct config *c, struct err *e)
{
	struct config_server *sv = &c->server;
	const struct cnode *sec, *n, *tls;
	int rc;

	rc = get_section(c->root, "server", server_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	if ((n = cnode_get(sec, "listen")))
		rc = read_listen(n, &sv->listen, e);
	if (rc >= 0 && (n = cnode_get(sec, "threads")))
		rc = read_int(n, "server.threads", 4, 1024, &sv->threads, e);
	if (rc >= 0 && (n = cnode_get(sec, "max_body_kb")))
		rc = read_int(n, "server.max_body_kb", 1, 1024 * 1024,
			      &sv->max_body_kb, e);
	if (rc >= 0 && (n = cnode_get(sec, "max_streams")))
		rc = read_int(n, "server.max_streams", 1, 1000000,
			      &sv->max_streams, e);
	if (rc >= 0 && (n = cnode_get(sec, "public_url")))
		rc = read_public_url(n, &sv->public_url, e);
	if (rc >= 0 && (n = cnode_get(sec, "insecure")))
		rc = cnode_bool(n, "server.insecure", &sv->insecure, e);
	tls = rc >= 0 ? cnode_get(sec, "tls") : NULL;
	if (!tls || is_null(tls))
		return rc;
	rc = cnode_expect(tls, CNODE_MAP, "server.tls", e);
	if (rc >= 0)
		rc = cnode_check_keys(tls, "server.tls", server_tls_keys, e);
	if (rc < 0)
		return rc;
	if ((n = cnode_get(tls, "cert")))
		rc = read_string(n, "server.tls.cert", &sv->tls_cert, e);
	if (rc >= 0 && (n = cnode_get(tls, "key")))
		rc = read_string(n, "server.tls.key", &sv->tls_key, e);
	if (rc >= 0 && !sv->tls_cert != !sv->tls_key)
		rc = node_error(tls, "server.tls",
				"needs both cert and key (PEM files)", e);
	return rc;
}

static int
read_reports(struct config *c, struct err *e)
{
	struct config_reports *r = &c->reports;
	const struct cnode *sec, *n;
	int rc;

	rc = get_section(c->root, "reports", reports_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	if ((n = cnode_get(sec, "milestone_after_seconds")))
		rc = read_int(n, "reports.milestone_after_seconds", 0,
			      86400 * 30, &r->milestone_after_seconds, e);
	if (rc >= 0 && (n = cnode_get(sec, "periodic_after_seconds")))
		rc = read_int(n, "reports.periodic_after_seconds", 0,
			      86400 * 30, &r->periodic_after_seconds, e);
	if (rc >= 0 && (n = cnode_get(sec, "interval_seconds")))
		rc = read_int(n, "reports.interval_seconds", 1, 86400,
			      &r->interval_seconds, e);
	return rc;
}

/*
 * The excludes of grant g, the node n at path (PATH.exclude): globs that
 * policy_exclude_parse takes, each error at its own item.
 */
static int
read_grant_exclude(const struct cnode *n, const char *path,
		   struct policy_grant *g, struct err *e)
{
	struct buf item = BUF_INIT;
	struct err ge = ERR_INIT;
	size_t i;
	int rc;

	rc = read_strings(n, path, 0, &g->exclude, e);
	for (i = 0; rc >= 0 && i < g->exclude.nr; i++) {
		if (!policy_exclude_parse(g->text, g->exclude.v[i], &ge))
			continue;
		buf_reset(&item);
		buf_addf(&item, "%s[%zu]", path, i);
		rc = node_error(n->type == CNODE_SEQ ? n->kids[i] : n, item.ptr,
				ge.msg, e);
	}
	buf_release(&item);
	return rc;
}

/*
 * One grant of loop.grants, the node n at path (loop.grants[I]), into g:
 * a string ("write:src/a.c") or a mapping {grant: "write:src/a.c", exclude:
 * [globs], override_immutable: bool}. Each error names the key it is at.
 */
static int
read_grant(const struct cnode *n, const char *path, struct policy_grant *g,
	   struct err *e)
{
	const struct cnode *at = n, *k;
	struct buf sub = BUF_INIT;
	struct err ge = ERR_INIT;
	int rc = 0;

	buf_adds(&sub, path);
	if (n->type == CNODE_MAP) {
		rc = cnode_check_keys(n, path, grant_keys, e);
		if (rc < 0)
			goto out;
		at = cnode_get(n, "grant");
		if (!at) {
			rc = node_error(n, path,
					"a grant mapping needs a grant (such as"
					" grant: \"write:src/**\")",
					e);
			goto out;
		}
		buf_addf(&sub, ".grant");
	}
	rc = cnode_expect(at, CNODE_SCALAR, sub.ptr, e);
	if (rc < 0)
		goto out;
	g->text = xstrdup(at->value);
	if (policy_grant_parse(g->text, &ge)) {
		rc = node_error(at, sub.ptr, ge.msg, e);
		goto out;
	}
	if (n->type != CNODE_MAP)
		goto out;
	if ((k = cnode_get(n, "exclude"))) {
		buf_reset(&sub);
		buf_addf(&sub, "%s.exclude", path);
		rc = read_grant_exclude(k, sub.ptr, g, e);
	}
	if (rc >= 0 && (k = cnode_get(n, "override_immutable"))) {
		buf_reset(&sub);
		buf_addf(&sub, "%s.override_immutable", path);
		rc = cnode_bool(k, sub.ptr, &g->override_immutable, e);
	}
out:
	buf_release(&sub);
	return rc;
}

/* loop.grants: a sequence of grants, or one grant string alone. */
static int
read_grants(const struct cnode *n, struct config_loop *l, struct err *e)
{
	char path[48];
	size_t i, nr;
	int rc = 0;

	if (is_null(n))
		return 0;
	if (n->type == CNODE_MAP)
		return cnode_expect(n, CNODE_SEQ, "loop.grants", e);
	nr = n->type == CNODE_SEQ ? n->nr : 1;
	l->grants = xcalloc(nr, sizeof(*l->grants));
	for (i = 0; i < nr && rc >= 0; i++) {
		strvec_init(&l->grants[i].exclude);
		l->nr_grants++;
		snprintf(path, sizeof(path), "loop.grants[%zu]", i);
		rc = read_grant(n->type == CNODE_SEQ ? n->kids[i] : n, path,
				&l->grants[i], e);
	}
	return rc;
}

/* loop: the loop pipeline's policy and stop conditions (docs/config.md). */
static int
read_loop(struct config *c, struct err *e)
{
	struct config_loop *l = &c->loop;
	const struct cnode *sec, *n;
	struct buf path = BUF_INIT;
	struct err ge = ERR_INIT;
	size_t i;
	int rc;

	rc = get_section(c->root, "loop", loop_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	if ((n = cnode_get(sec, "profile")))
		rc = read_choice(n, "loop.profile", loop_profiles, &l->profile,
				 e);
	if (rc >= 0 && (n = cnode_get(sec, "grants")))
		rc = read_grants(n, l, e);
	n = cnode_get(sec, "immutable");
	if (rc >= 0 && n)
		rc = read_strings(n, "loop.immutable", 0, &l->immutable, e);
	for (i = 0; rc >= 0 && n && i < l->immutable.nr; i++) {
		if (!policy_immutable_parse(l->immutable.v[i], &ge))
			continue;
		buf_reset(&path);
		buf_addf(&path, "loop.immutable[%zu]", i);
		rc = node_error(n->type == CNODE_SEQ ? n->kids[i] : n,
				path.ptr, ge.msg, e);
	}
	if (rc >= 0 && (n = cnode_get(sec, "stop_file")))
		rc = read_string(n, "loop.stop_file", &l->stop_file, e);
	if (rc >= 0 && (n = cnode_get(sec, "max_iterations")))
		rc = read_int(n, "loop.max_iterations", 1, 1000,
			      &l->max_iterations, e);
	buf_release(&path);
	return rc;
}

/* research: the research pipeline's quality gate profile. */
static int
read_research(struct config *c, struct err *e)
{
	const struct cnode *sec, *n;
	int rc;

	rc = get_section(c->root, "research", research_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	if ((n = cnode_get(sec, "quality_profile")))
		rc = read_choice(n, "research.quality_profile",
				 research_profiles, &c->research.quality_profile,
				 e);
	return rc;
}

/* assist: the assist pipeline's execution mode and escalations. */
static int
read_assist(struct config *c, struct err *e)
{
	struct config_assist *a = &c->assist;
	const struct cnode *sec, *n;
	int rc;

	rc = get_section(c->root, "assist", assist_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	if ((n = cnode_get(sec, "mode")))
		rc = read_choice(n, "assist.mode", assist_modes, &a->mode, e);
	if (rc >= 0 && (n = cnode_get(sec, "auto_complete")))
		rc = cnode_bool(n, "assist.auto_complete", &a->auto_complete, e);
	if (rc >= 0 && (n = cnode_get(sec, "escalation_timeout_seconds")))
		rc = read_int(n, "assist.escalation_timeout_seconds", 1,
			      86400 * 7, &a->escalation_timeout_seconds, e);
	return rc;
}

/*
 * A webhook's events: kinds of notification, a list or a single name.
 * An unknown one is reported at its own position, with its index.
 */
static int
read_webhook_events(const struct cnode *k, const char *path,
		    struct config_webhook *w, struct err *e)
{
	struct buf sub = BUF_INIT, msg = BUF_INIT;
	size_t i;
	int rc;

	buf_addf(&sub, "%s.events", path);
	rc = read_strings(k, sub.ptr, 0, &w->events, e);
	for (i = 0; rc >= 0 && i < w->events.nr; i++) {
		if (str_in_list(webhook_events, w->events.v[i]))
			continue;
		if (k->type == CNODE_SEQ)
			buf_addf(&sub, "[%zu]", i);
		buf_addf(&msg, "'%s' is not one of: ", w->events.v[i]);
		join_list(webhook_events, &msg);
		rc = node_error(k->type == CNODE_SEQ ? k->kids[i] : k,
				sub.ptr, msg.ptr, e);
	}
	buf_release(&sub);
	buf_release(&msg);
	return rc;
}

static int
read_webhook(const struct cnode *n, const char *path,
	     struct config_webhook *w, struct err *e)
{
	static const struct {
		const char *key;
		int min, max;
		size_t off;
	} ints[] = {
		{ "retries", 0, 100, offsetof(struct config_webhook, retries) },
		{ "backoff_seconds", 0, 3600,
		  offsetof(struct config_webhook, backoff_seconds) },
		{ "timeout_seconds", 1, 600,
		  offsetof(struct config_webhook, timeout_seconds) },
	};
	const struct cnode *k;
	struct buf sub = BUF_INIT;
	size_t i;
	int rc = cnode_expect(n, CNODE_MAP, path, e);

	if (rc >= 0)
		rc = cnode_check_keys(n, path, webhook_keys, e);
	if (rc < 0)
		goto out;
	k = cnode_get(n, "url");
	if (!k) {
		rc = node_error(n, path, "a webhook needs a url", e);
		goto out;
	}
	buf_addf(&sub, "%s.url", path);
	rc = read_string(k, sub.ptr, &w->url, e);
	if (rc >= 0 && strncmp(w->url, "http://", 7) &&
	    strncmp(w->url, "https://", 8))
		rc = node_error(k, sub.ptr,
				"expected an http:// or https:// URL", e);
	if (rc >= 0 && (k = cnode_get(n, "events")))
		rc = read_webhook_events(k, path, w, e);
	if (rc >= 0 && (k = cnode_get(n, "format"))) {
		char *f = NULL;

		buf_reset(&sub);
		buf_addf(&sub, "%s.format", path);
		rc = read_string(k, sub.ptr, &f, e);
		for (i = 0; rc >= 0 && notify_formats[i]; i++)
			if (!strcmp(f, notify_formats[i]))
				break;
		if (rc >= 0 && !notify_formats[i]) {
			struct buf msg = BUF_INIT;

			buf_addf(&msg, "'%s' is not one of: ", f);
			join_list(notify_formats, &msg);
			rc = node_error(k, sub.ptr, msg.ptr, e);
			buf_release(&msg);
		}
		if (rc >= 0)
			w->format = (enum notify_format)i;
		free(f);
	}
	if (rc >= 0 && (k = cnode_get(n, "name"))) {
		buf_reset(&sub);
		buf_addf(&sub, "%s.name", path);
		rc = read_string(k, sub.ptr, &w->name, e);
		if (rc >= 0 && (!*w->name || strlen(w->name) > 64 ||
				strspn(w->name, "abcdefghijklmnopqrstuvwxyz"
						"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
						"0123456789-_.") !=
					strlen(w->name)))
			rc = node_error(k, sub.ptr,
					"1 to 64 letters, digits, '-', '_' "
					"or '.'",
					e);
	}
	if (rc >= 0 && (k = cnode_get(n, "secret_env"))) {
		buf_reset(&sub);
		buf_addf(&sub, "%s.secret_env", path);
		rc = read_string(k, sub.ptr, &w->secret_env, e);
		if (rc >= 0 && !is_var_name(w->secret_env))
			rc = node_error(k, sub.ptr,
					"not a valid variable name", e);
	}
	for (i = 0; rc >= 0 && i < ARRAY_SIZE(ints); i++) {
		if (!(k = cnode_get(n, ints[i].key)))
			continue;
		buf_reset(&sub);
		buf_addf(&sub, "%s.%s", path, ints[i].key);
		rc = read_int(k, sub.ptr, ints[i].min, ints[i].max,
			      (int *)((char *)w + ints[i].off), e);
	}
out:
	buf_release(&sub);
	return rc;
}

/* The entries of notify.LIST (webhooks or targets) appended to c. */
static int
read_notify_list(struct config *c, const struct cnode *sec, const char *list,
		 struct err *e)
{
	const struct cnode *n = cnode_get(sec, list);
	char path[48];
	size_t i;
	int rc;

	if (!n || is_null(n))
		return 0;
	snprintf(path, sizeof(path), "notify.%s", list);
	rc = cnode_expect(n, CNODE_SEQ, path, e);
	if (rc < 0)
		return rc;
	c->webhooks = xrealloc(c->webhooks, (c->nr_webhooks + n->nr + 1) *
						    sizeof(*c->webhooks));
	for (i = 0; i < n->nr && rc >= 0; i++) {
		struct config_webhook *w = &c->webhooks[c->nr_webhooks];

		memset(w, 0, sizeof(*w));
		strvec_init(&w->events);
		w->retries = 5;
		w->backoff_seconds = 1;
		w->timeout_seconds = 10;
		c->nr_webhooks++;
		snprintf(path, sizeof(path), "notify.%s[%zu]", list, i);
		rc = read_webhook(n->kids[i], path, w, e);
		if (rc >= 0 && !w->name)
			w->name = xasprintf("%s-%zu", notify_formats[w->format],
					    c->nr_webhooks);
	}
	return rc;
}

static int
read_notify(struct config *c, struct err *e)
{
	const struct cnode *sec, *n;
	int rc;

	c->link_ttl_seconds = 86400;
	rc = get_section(c->root, "notify", notify_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	rc = read_notify_list(c, sec, "webhooks", e);
	if (rc >= 0)
		rc = read_notify_list(c, sec, "targets", e);
	if (rc >= 0 && (n = cnode_get(sec, "link_ttl_seconds")))
		rc = read_int(n, "notify.link_ttl_seconds", 1, 86400 * 30,
			      &c->link_ttl_seconds, e);
	return rc;
}

/*
 * forge.repo: "owner/name", each part of the letters, digits, '-', '_'
 * and '.' GitHub allows, and neither part "." or "..": the two go into
 * API paths (/repos/OWNER/NAME/...), so nothing else may get through.
 */
static int
valid_forge_repo(const char *s)
{
	const char *slash = strchr(s, '/'), *p;

	if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/'))
		return 0;
	if (!strcmp(slash + 1, ".") || !strcmp(slash + 1, "..") ||
	    !strncmp(s, "./", 2) || !strncmp(s, "../", 3))
		return 0;
	for (p = s; *p; p++)
		if (p != slash && !isalnum((unsigned char)*p) && *p != '-' &&
		    *p != '_' && *p != '.')
			return 0;
	return 1;
}

/* A variable's name (token_env, webhook_secret_env) at path. */
static int
read_var_name(const struct cnode *n, const char *path, char **out,
	      struct err *e)
{
	int rc = read_string(n, path, out, e);

	if (rc >= 0 && !is_var_name(*out))
		rc = node_error(n, path, "not a valid variable name", e);
	return rc;
}

/*
 * forge.api_url: http:// or https:// and a host, kept without its
 * trailing slashes (paths are appended as "/repos/...").
 */
static int
read_api_url(const struct cnode *n, char **out, struct err *e)
{
	const char *path = "forge.api_url", *host;
	size_t len;
	int rc = read_string(n, path, out, e);

	if (rc < 0)
		return rc;
	if (!strncmp(*out, "https://", 8))
		host = *out + 8;
	else if (!strncmp(*out, "http://", 7))
		host = *out + 7;
	else
		return node_error(n, path,
				  "expected an http:// or https:// URL", e);
	if (!*host || *host == '/' || strpbrk(*out, " \t\r\n"))
		return node_error(n, path, "expected a URL with a host", e);
	len = strlen(*out);
	while (len > (size_t)(host - *out) && (*out)[len - 1] == '/')
		(*out)[--len] = '\0';
	return 0;
}

/*
 * The map at key of the forge section, checked against allowed (its
 * path "forge.KEY" in messages): NULL when absent or written empty.
 */
static int
forge_sub(const struct cnode *sec, const char *key,
	  const char *const *allowed, const struct cnode **out,
	  struct err *e)
{
	const struct cnode *n = cnode_get(sec, key);
	char path[64];
	int rc;

	*out = NULL;
	if (!n || is_null(n))
		return 0;
	snprintf(path, sizeof(path), "forge.%s", key);
	rc = cnode_expect(n, CNODE_MAP, path, e);
	if (rc >= 0)
		rc = cnode_check_keys(n, path, allowed, e);
	if (rc >= 0)
		*out = n;
	return rc;
}

/* forge.pull_requests and forge.reactions. */
static int
read_forge_prs(const struct cnode *sec, struct config_forge *f,
	       struct err *e)
{
	const struct cnode *sub, *n = NULL;
	int rc;

	rc = forge_sub(sec, "pull_requests", forge_pr_keys, &sub, e);
	if (rc >= 0 && sub && (n = cnode_get(sub, "draft")))
		rc = cnode_bool(n, "forge.pull_requests.draft", &f->pr_draft,
				e);
	if (rc >= 0 && f->pr_draft)
		/* a draft would stay one: REST cannot mark it ready */
		rc = node_error(n, "forge.pull_requests.draft",
				"draft PRs are not supported: GitHub's REST "
				"API cannot mark a draft ready for review "
				"(only GraphQL can), so baton opens each PR "
				"when its run has succeeded; set it to false",
				e);
	if (rc >= 0 && sub && (n = cnode_get(sub, "auto_merge")))
		rc = cnode_bool(n, "forge.pull_requests.auto_merge",
				&f->auto_merge, e);
	if (rc >= 0 && sub && (n = cnode_get(sub, "merge_method")))
		rc = read_choice(n, "forge.pull_requests.merge_method",
				 merge_methods, &f->merge_method, e);
	if (rc < 0)
		return rc;

	rc = forge_sub(sec, "reactions", forge_reaction_keys, &sub, e);
	if (rc >= 0 && sub && (n = cnode_get(sub, "ci_failed")))
		rc = read_choice(n, "forge.reactions.ci_failed",
				 forge_reactions, &f->on_ci_failed, e);
	if (rc >= 0 && sub && (n = cnode_get(sub, "changes_requested")))
		rc = read_choice(n, "forge.reactions.changes_requested",
				 forge_reactions, &f->on_changes_requested, e);
	if (rc >= 0 && sub && (n = cnode_get(sub, "max_rounds")))
		rc = read_int(n, "forge.reactions.max_rounds", 0, 100,
			      &f->max_rounds, e);
	if (rc >= 0 && sub && (n = cnode_get(sub, "label")))
		rc = read_string(n, "forge.reactions.label", &f->human_label,
				 e);
	return rc;
}

/*
 * forge: the GitHub repository behind intake and pull requests
 * (docs/config.md). Absent, nothing is set and type stays NULL. Present,
 * it must say its type and repo, and every default is filled in here:
 * config_init allocates nothing.
 */
static int
read_forge(struct config *c, struct err *e)
{
	struct config_forge *f = &c->forge;
	const struct cnode *sec, *n, *sub;
	int rc;

	rc = get_section(c->root, "forge", forge_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	n = cnode_get(sec, "type");
	if (!n || is_null(n))
		return node_error(sec, "forge",
				  "a forge needs a type (github)", e);
	rc = read_choice(n, "forge.type", forge_types, &f->type, e);
	if (rc < 0)
		return rc;
	n = cnode_get(sec, "repo");
	if (!n || is_null(n))
		return node_error(sec, "forge",
				  "a forge needs a repo (owner/name)", e);
	rc = read_string(n, "forge.repo", &f->repo, e);
	if (rc >= 0 && !valid_forge_repo(f->repo))
		rc = node_error(n, "forge.repo",
				"expected owner/name (letters, digits, '-', "
				"'_' and '.')",
				e);
	if (rc >= 0 && (n = cnode_get(sec, "token_env")))
		rc = read_var_name(n, "forge.token_env", &f->token_env, e);
	if (rc >= 0 && (n = cnode_get(sec, "api_url")))
		rc = read_api_url(n, &f->api_url, e);
	if (rc >= 0 && (n = cnode_get(sec, "remote"))) {
		rc = read_string(n, "forge.remote", &f->remote, e);
		/* handed to git as an argument: never an option */
		if (rc >= 0 && (f->remote[0] == '-' ||
				strpbrk(f->remote, " \t\r\n")))
			rc = node_error(n, "forge.remote",
					"not a valid remote name", e);
	}
	if (rc >= 0)
		rc = forge_sub(sec, "intake", forge_intake_keys, &sub, e);
	if (rc >= 0 && sub && (n = cnode_get(sub, "label")) && !is_null(n))
		rc = read_string(n, "forge.intake.label", &f->intake_label,
				 e);
	if (rc >= 0)
		rc = read_forge_prs(sec, f, e);
	if (rc >= 0 && (n = cnode_get(sec, "webhook_secret_env")) &&
	    !is_null(n))
		rc = read_var_name(n, "forge.webhook_secret_env",
				   &f->webhook_secret_env, e);
	if (rc >= 0 && (n = cnode_get(sec, "poll_seconds")))
		rc = read_int(n, "forge.poll_seconds", 0, 86400,
			      &f->poll_seconds, e);
	if (rc < 0)
		return rc;

	if (!f->token_env)
		f->token_env = xstrdup("GITHUB_TOKEN");
	if (!f->api_url)
		f->api_url = xstrdup("https://api.github.com");
	if (!f->remote)
		f->remote = xstrdup("origin");
	if (!f->merge_method)
		f->merge_method = xstrdup("squash");
	if (!f->on_ci_failed)
		f->on_ci_failed = xstrdup("fix");
	if (!f->on_changes_requested)
		f->on_changes_requested = xstrdup("fix");
	if (!f->human_label)
		f->human_label = xstrdup("baton:needs-human");
	return 0;
}

static int
read_workflow(struct config *c, struct err *e)
{
	const struct cnode *sec, *n;
	int rc;

	rc = get_section(c->root, "workflow", workflow_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	n = cnode_get(sec, "pipeline");
	if (n) {
		rc = read_string(n, "workflow.pipeline", &c->pipeline, e);
		if (rc < 0)
			return rc;
	}
	n = cnode_get(sec, "max_review_loops");
	if (n)
		rc = read_int(n, "workflow.max_review_loops", 0,
			      MAX_REVIEW_LOOPS, &c->max_review_loops, e);
	return rc;
}

static int
read_policies(struct config *c, struct err *e)
{
	const struct cnode *sec, *n;
	size_t i;
	int rc;

	rc = get_section(c->root, "policies", policy_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	n = cnode_get(sec, "require_approval_at_stages");
	if (n)
		rc = read_strings(n, "policies.require_approval_at_stages", 0,
				  &c->approval_stages, e);
	n = cnode_get(sec, "approval_timeout_seconds");
	if (rc >= 0 && n)
		rc = read_int(n, "policies.approval_timeout_seconds", 0,
			      86400 * 30, &c->approval_timeout_seconds, e);
	n = cnode_get(sec, "allowed_paths");
	if (rc >= 0 && n)
		rc = read_strings(n, "policies.allowed_paths", 0,
				  &c->allowed_paths, e);
	for (i = 0; rc >= 0 && n && i < c->allowed_paths.nr; i++) {
		const char *why = config_allow_check(c->allowed_paths.v[i]);
		char kpath[64];

		if (!why)
			continue;
		snprintf(kpath, sizeof(kpath), "policies.allowed_paths[%zu]",
			 i);
		rc = node_error(n->type == CNODE_SEQ ? n->kids[i] : n, kpath,
				why, e);
	}
	return rc;
}

const char *
config_allow_check(const char *glob)
{
	if (!strncmp(glob, "./", 2))
		return "a path is written from the repository's root, "
		       "without './'";
	return pathglob_check(glob);
}

/*
 * One conditional check: {run: CMD, when_changed: [GLOB, ...]}. The
 * globs are checked here (util/pathglob.h) so that a bad one is named
 * with its place before anything runs.
 */
static int
read_validate_command(struct config *c, const struct cnode *n,
		      const char *path, struct strvec *when, struct err *e)
{
	const struct cnode *run, *w;
	struct buf kpath = BUF_INIT;
	char *cmd = NULL;
	const char *why;
	size_t i;
	int rc;

	rc = cnode_check_keys(n, path, validate_command_keys, e);
	if (rc < 0)
		return rc;
	buf_addf(&kpath, "%s.run", path);
	run = cnode_get(n, "run");
	if (!run) {
		rc = node_error(n, path, "a command in map form needs 'run' "
					 "(the shell command)", e);
		goto out;
	}
	rc = read_string(run, kpath.ptr, &cmd, e);
	if (rc < 0)
		goto out;
	w = cnode_get(n, "when_changed");
	buf_reset(&kpath);
	buf_addf(&kpath, "%s.when_changed", path);
	if (w) {
		rc = read_strings(w, kpath.ptr, 1, when, e);
		if (rc < 0)
			goto out;
	}
	for (i = 0; w && i < when->nr; i++) {
		const struct cnode *g = w->type == CNODE_SEQ ? w->kids[i] : w;

		why = pathglob_check(when->v[i]);
		if (!why)
			continue;
		buf_reset(&kpath);
		buf_addf(&kpath, "%s.when_changed[%zu]", path, i);
		rc = node_error(g, kpath.ptr, why, e);
		goto out;
	}
	strvec_push(&c->validate_commands, cmd);
out:
	free(cmd);
	buf_release(&kpath);
	return rc;
}

/* validate.commands: strings, or {run, when_changed} maps among them. */
static int
read_validate_commands(struct config *c, const struct cnode *n,
		       struct err *e)
{
	struct buf path = BUF_INIT;
	size_t i, j, nr;
	int rc = 0;

	if (n->type != CNODE_SEQ)
		return read_strings(n, "validate.commands", 0,
				    &c->validate_commands, e);
	nr = n->nr;
	for (i = 0; i < nr; i++)
		if (n->kids[i]->type == CNODE_MAP)
			break;
	if (i == nr)
		return read_strings(n, "validate.commands", 0,
				    &c->validate_commands, e);
	c->validate_when = xcalloc(nr, sizeof(*c->validate_when));
	c->validate_when_nr = nr;
	for (j = 0; j < nr; j++)
		strvec_init(&c->validate_when[j]);
	for (i = 0; rc >= 0 && i < nr; i++) {
		const struct cnode *k = n->kids[i];

		buf_reset(&path);
		buf_addf(&path, "validate.commands[%zu]", i);
		if (k->type == CNODE_MAP)
			rc = read_validate_command(c, k, path.ptr,
						   &c->validate_when[i], e);
		else if ((rc = cnode_expect(k, CNODE_SCALAR, path.ptr, e)) >= 0)
			strvec_push(&c->validate_commands, k->value);
	}
	buf_release(&path);
	return rc;
}

static int
read_validate(struct config *c, struct err *e)
{
	const struct cnode *sec, *n;
	int rc;

	rc = get_section(c->root, "validate", validate_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	n = cnode_get(sec, "commands");
	if (n) {
		rc = read_validate_commands(c, n, e);
		if (rc < 0)
			return rc;
	}
	n = cnode_get(sec, "timeout_seconds");
	if (n)
		rc = read_int(n, "validate.timeout_seconds", 1,
			      MAX_VALIDATE_TIMEOUT,
			      &c->validate_timeout_seconds, e);
	return rc;
}

const char *
config_hook_name(enum hook_point p)
{
	if ((unsigned)p >= HOOK__COUNT)
		BUG("bad hook point %d", (int)p);
	return hook_keys[p];
}

static int
read_hooks(struct config *c, struct err *e)
{
	const struct cnode *sec, *n;
	char path[64];
	size_t i;
	int rc = 0;

	rc = get_section(c->root, "hooks", hook_keys, &sec, e);
	if (rc < 0 || !sec)
		return rc;
	for (i = 0; i < HOOK__COUNT; i++) {
		n = cnode_get(sec, hook_keys[i]);
		if (!n)
			continue;
		snprintf(path, sizeof(path), "hooks.%s", hook_keys[i]);
		rc = read_strings(n, path, 0, &c->hooks.cmds[i], e);
		if (rc < 0)
			return rc;
	}
	n = cnode_get(sec, "timeout_seconds");
	if (n)
		rc = read_int(n, "hooks.timeout_seconds", 1, MAX_HOOK_TIMEOUT,
			      &c->hooks.timeout_seconds, e);
	return rc;
}

/*
 * plugins: {enabled: [ids]}: which of the installed plugins load
 * (core/plugin.h). Only the ids are checked here: the plugins themselves
 * are found and loaded by whoever reads the files (an id not installed
 * is that plugin's error, not the config's).
 */
static int
read_plugins(struct config *c, struct err *e)
{
	const struct cnode *sec, *n;
	size_t i;
	int rc;

	rc = get_section(c->root, "plugins", plugins_keys, &sec, e);
	if (rc < 0 || !sec || !(n = cnode_get(sec, "enabled")))
		return rc;
	rc = read_strings(n, "plugins.enabled", 0, &c->plugins_enabled, e);
	for (i = 0; rc >= 0 && i < c->plugins_enabled.nr; i++)
		if (!plugin_name_valid(c->plugins_enabled.v[i]))
			rc = node_error(n->type == CNODE_SEQ ? n->kids[i] : n,
					"plugins.enabled",
					"expected plugin ids (lowercase "
					"letters, digits, '_' and '-', at "
					"most 48)",
					e);
	return rc;
}

static int
read_rest(struct config *c, struct err *e)
{
	const struct cnode *n, *sec;
	int rc;

	rc = get_section(c->root, "pipelines", NULL, &c->pipelines, e);
	if (rc < 0)
		return rc;
	n = cnode_get(c->root, "store");
	if (n && !is_null(n))
		rc = read_string(n, "store", &c->store, e);
	if (rc < 0)
		return rc;
	rc = get_section(c->root, "repo", repo_keys, &sec, e);
	if (rc >= 0 && sec && (n = cnode_get(sec, "url")) && !is_null(n))
		rc = read_string(n, "repo.url", &c->repo_url, e);
	return rc;
}

/*
 * Hashing. The canonical form leaves out origins, quoting and key order,
 * none of which change what the config means: map keys are sorted and
 * every string is length-prefixed, so the form is unambiguous without any
 * escaping.
 */

static int
cmp_key(const void *a, const void *b)
{
	const struct cnode *x = *(const struct cnode *const *)a;
	const struct cnode *y = *(const struct cnode *const *)b;

	return strcmp(x->key, y->key);
}

/* n in canonical form; a map at the top leaves out its key skip (may be
 * NULL). */
static void
canon(struct buf *out, const struct cnode *n, const char *skip)
{
	const struct cnode **kids = NULL;
	size_t i, k = 0;

	switch (n->type) {
	case CNODE_SCALAR:
		buf_addf(out, "s%zu:%s", strlen(n->value), n->value);
		break;
	case CNODE_SEQ:
		buf_addf(out, "[%zu", n->nr);
		for (i = 0; i < n->nr; i++)
			canon(out, n->kids[i], NULL);
		buf_addch(out, ']');
		break;
	case CNODE_MAP:
		kids = xcalloc(n->nr ? n->nr : 1, sizeof(*kids));
		for (i = 0; i < n->nr; i++)
			if (!skip || strcmp(n->kids[i]->key, skip))
				kids[k++] = n->kids[i];
		qsort(kids, k, sizeof(*kids), cmp_key);
		buf_addf(out, "{%zu", k);
		for (i = 0; i < k; i++) {
			buf_addf(out, "k%zu:%s", strlen(kids[i]->key),
				 kids[i]->key);
			canon(out, kids[i], NULL);
		}
		buf_addch(out, '}');
		break;
	}
	free(kids);
}

/*
 * The hash says which config a run was made under, so it covers every
 * section but server: how serve listens is nothing of a run's (serve
 * with BATON_LISTEN set makes runs under the same config as a terminal).
 */
static void
config_hash(struct config *c)
{
	struct buf b = BUF_INIT;
	uint64_t h = FNV_OFFSET;
	size_t i;

	canon(&b, c->root, "server");
	for (i = 0; i < b.len; i++) {
		h ^= (unsigned char)b.ptr[i];
		h *= FNV_PRIME;
	}
	snprintf(c->hash, sizeof(c->hash), "%016llx", (unsigned long long)h);
	buf_release(&b);
}

static void
config_init(struct config *c)
{
	size_t i;

	memset(c, 0, sizeof(*c));
	strvec_init(&c->approval_stages);
	strvec_init(&c->validate_commands);
	strvec_init(&c->allowed_paths);
	strvec_init(&c->budget.downgrade);
	strvec_init(&c->loop.immutable);
	strvec_init(&c->plugins_enabled);
	c->max_review_loops = 2;
	c->quota_retries = 5;
	c->backoff_seconds = 60;
	for (i = 0; i < FAIL_CLASS_N; i++)
		c->retry_limits[i] = fail_class_default_limit(i);
	c->retry_cap = -1;
	c->host_ttl_seconds = 3600;
	c->validate_timeout_seconds = 600;
	for (i = 0; i < HOOK__COUNT; i++)
		strvec_init(&c->hooks.cmds[i]);
	c->hooks.timeout_seconds = 600;
	c->runtime.workers = 2;
	c->runtime.lease_seconds = 30;
	c->runtime.sweep_seconds = 5;
	c->runtime.max_attempts = 3;
	c->runtime.failure_repeat_limit = 3;
	c->runtime.cooldown_seconds = 10;
	c->runtime.judge = 1;
	c->runtime.max_rework_depth = 2;
	c->runtime.file_cap_kib = 256;
	c->merge.retries = 3;
	c->merge.backoff_seconds = 5;
	c->server.threads = 64;
	c->server.max_body_kb = 1024;
	c->server.max_streams = 10000;
	c->reports.milestone_after_seconds = 300;
	c->reports.periodic_after_seconds = 1800;
	c->reports.interval_seconds = 600;
	c->assist.escalation_timeout_seconds = 900;
	c->forge.max_rounds = 3;
	c->forge.poll_seconds = 60;
}

/*
 * Takes the tree out of the builder, checks it section by section and
 * fills a local config, which reaches *out only when everything passed.
 * On failure the tree is freed with the partial config.
 */
int
config_finish(struct config_builder *b, struct config *out, struct err *e)
{
	struct config c;
	int rc;

	config_init(&c);
	ensure_root(b);
	c.root = b->root;
	b->root = NULL;

	rc = cnode_check_keys(c.root, "", top_keys, e);
	if (rc < 0)
		goto out;
	rc = read_providers(&c, e);
	if (rc < 0)
		goto out;
	rc = read_roles(&c, e);
	if (rc < 0)
		goto out;
	rc = read_workflow(&c, e);
	if (rc < 0)
		goto out;
	rc = read_policies(&c, e);
	if (rc < 0)
		goto out;
	rc = read_validate(&c, e);
	if (rc < 0)
		goto out;
	rc = read_hooks(&c, e);
	if (rc < 0)
		goto out;
	rc = read_budget(&c, e);
	if (rc < 0)
		goto out;
	rc = read_execution(&c, e);
	if (rc < 0)
		goto out;
	rc = read_runtime(&c, e);
	if (rc < 0)
		goto out;
	rc = read_merge(&c, e);
	if (rc < 0)
		goto out;
	rc = read_server(&c, e);
	if (rc < 0)
		goto out;
	rc = read_reports(&c, e);
	if (rc < 0)
		goto out;
	rc = read_notify(&c, e);
	if (rc < 0)
		goto out;
	rc = read_loop(&c, e);
	if (rc < 0)
		goto out;
	rc = read_assist(&c, e);
	if (rc >= 0)
		rc = read_research(&c, e);
	if (rc < 0)
		goto out;
	rc = read_forge(&c, e);
	if (rc < 0)
		goto out;
	rc = read_plugins(&c, e);
	if (rc < 0)
		goto out;
	rc = schedules_read(cnode_get(c.root, "schedules"), &c.schedules,
			    &c.nr_schedules, e);
	if (rc < 0)
		goto out;
	rc = read_rest(&c, e);
	if (rc < 0)
		goto out;
	if (!c.pipeline)
		c.pipeline = xstrdup("feature");
	/* string defaults here: config_init, also run by config_release,
	   allocates nothing */
	if (!c.loop.profile)
		c.loop.profile = xstrdup("strict");
	if (!c.assist.mode)
		c.assist.mode = xstrdup("agent-decides");
	if (!c.research.quality_profile)
		c.research.quality_profile = xstrdup("low");
	config_hash(&c);
out:
	if (rc < 0) {
		config_release(&c);
		return rc;
	}
	*out = c;
	return 0;
}

void
config_release(struct config *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->nr_providers; i++) {
		free(c->providers[i].name);
		free(c->providers[i].type);
		strvec_clear(&c->providers[i].command);
		strvec_clear(&c->providers[i].args);
		strvec_clear(&c->providers[i].env);
		free(c->providers[i].model);
		free(c->providers[i].effort);
		free(c->providers[i].base_url);
		free(c->providers[i].api_key_env);
	}
	free(c->providers);
	for (i = 0; i < c->nr_roles; i++) {
		free(c->roles[i].role);
		strvec_clear(&c->roles[i].providers);
	}
	free(c->roles);
	free(c->pipeline);
	free(c->merge.base_branch);
	free(c->repo_url);
	free(c->server.listen);
	free(c->server.public_url);
	free(c->server.tls_cert);
	free(c->server.tls_key);
	for (i = 0; i < c->nr_webhooks; i++) {
		free(c->webhooks[i].url);
		free(c->webhooks[i].name);
		strvec_clear(&c->webhooks[i].events);
		free(c->webhooks[i].secret_env);
	}
	free(c->webhooks);
	schedules_free(c->schedules, c->nr_schedules);
	c->schedules = NULL;
	c->nr_schedules = 0;
	strvec_clear(&c->approval_stages);
	strvec_clear(&c->validate_commands);
	for (i = 0; i < c->validate_when_nr; i++)
		strvec_clear(&c->validate_when[i]);
	free(c->validate_when);
	for (i = 0; i < HOOK__COUNT; i++)
		strvec_clear(&c->hooks.cmds[i]);
	strvec_clear(&c->allowed_paths);
	strvec_clear(&c->budget.downgrade);
	free(c->sandbox);
	free(c->store);
	free(c->loop.profile);
	for (i = 0; i < c->loop.nr_grants; i++)
		policy_grant_release(&c->loop.grants[i]);
	free(c->loop.grants);
	strvec_clear(&c->loop.immutable);
	strvec_clear(&c->plugins_enabled);
	free(c->loop.stop_file);
	free(c->assist.mode);
	free(c->research.quality_profile);
	free(c->forge.type);
	free(c->forge.repo);
	free(c->forge.token_env);
	free(c->forge.api_url);
	free(c->forge.remote);
	free(c->forge.intake_label);
	free(c->forge.merge_method);
	free(c->forge.on_ci_failed);
	free(c->forge.on_changes_requested);
	free(c->forge.human_label);
	free(c->forge.webhook_secret_env);
	cnode_free(c->root);
	config_init(c);
}

size_t
config_providers_for(const struct config *c, const char *role,
		     const struct config_provider **out, size_t max)
{
	const struct config_role *r = NULL;
	size_t i, n = 0;

	for (i = 0; role && i < c->nr_roles; i++)
		if (!strcmp(c->roles[i].role, role))
			r = &c->roles[i];
	for (i = 0; !r && i < c->nr_roles; i++)
		if (!strcmp(c->roles[i].role, "default"))
			r = &c->roles[i];
	for (i = 0; r && i < r->providers.nr && n < max; i++)
		out[n++] = config_find_provider(c, r->providers.v[i]);
	return n;
}

const struct config_provider *
config_provider_for(const struct config *c, const char *role)
{
	const struct config_provider *p = NULL;

	config_providers_for(c, role, &p, 1);
	return p;
}

int
config_requires_approval(const struct config *c, const char *status,
			 const char *stage)
{
	size_t i;

	for (i = 0; i < c->approval_stages.nr; i++) {
		const char *s = c->approval_stages.v[i];

		if ((status && !strcmp(s, status)) ||
		    (stage && !strcmp(s, stage)))
			return 1;
	}
	return 0;
}

int
config_path_allowed(const struct config *c, const char *path)
{
	return config_globs_allow(&c->allowed_paths, path);
}

int
config_globs_allow(const struct strvec *globs, const char *path)
{
	size_t i;

	if (!globs || !globs->nr)
		return 1;
	for (i = 0; i < globs->nr; i++) {
		const char *g = globs->v[i];
		size_t n = strlen(g);

		if (n >= 3 && !strcmp(g + n - 3, "/**"))
			n -= 3;
		else if (n && g[n - 1] == '/')
			n--;
		if (!fnmatch(g, path, 0) ||
		    (n && !strncmp(path, g, n) && path[n] == '/'))
			return 1;
	}
	return 0;
}

void
config_show(const struct config *c, struct buf *out)
{
	cnode_dump(c->root, out);
}

/*
 * Snapshots. The JSON is written here rather than with jansson because
 * it must be YAML too, which libyaml reads: besides what JSON escapes,
 * DEL, the C1 controls and U+2028, U+2029, U+FEFF, U+FFFE and U+FFFF are
 * escaped, since libyaml refuses some of them raw and folds others as
 * line breaks inside a quoted scalar. Separators carry a space (", ",
 * ": "), the form every YAML reader takes as a flow mapping.
 */

#define DIFF_SHOW_MAX 60

/* 1 for a code point written as \uXXXX: see above. */
static int
json_escaped(unsigned int cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 ||
	       cp == 0x2029 || cp == 0xfeff || cp == 0xfffe || cp == 0xffff;
}

static void
quote_json(struct buf *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), len;
	unsigned int cp;

	buf_addch(out, '"');
	while (n) {
		len = utf8_decode(p, n, &cp);
		if (!len) {
			buf_adds(out, "\\ufffd");
			len = 1;
		} else if (cp == '"' || cp == '\\') {
			buf_addf(out, "\\%c", (int)cp);
		} else if (cp == '\n') {
			buf_adds(out, "\\n");
		} else if (cp == '\t') {
			buf_adds(out, "\\t");
		} else if (json_escaped(cp)) {
			buf_addf(out, "\\u%04x", cp);
		} else {
			buf_add(out, p, len);
		}
		p += len;
		n -= len;
	}
	buf_addch(out, '"');
}

static void
json_node(struct buf *out, const struct cnode *n)
{
	size_t i;

	switch (n->type) {
	case CNODE_SCALAR:
		quote_json(out, n->value);
		break;
	case CNODE_SEQ:
		buf_addch(out, '[');
		for (i = 0; i < n->nr; i++) {
			if (i)
				buf_adds(out, ", ");
			json_node(out, n->kids[i]);
		}
		buf_addch(out, ']');
		break;
	case CNODE_MAP:
		buf_addch(out, '{');
		for (i = 0; i < n->nr; i++) {
			if (i)
				buf_adds(out, ", ");
			quote_json(out, n->kids[i]->key);
			buf_adds(out, ": ");
			json_node(out, n->kids[i]);
		}
		buf_addch(out, '}');
		break;
	}
}

char *
config_to_json(const struct config *c)
{
	struct buf out = BUF_INIT;

	if (c->root)
		json_node(&out, c->root);
	else
		buf_adds(&out, "{}");
	return buf_detach(&out, NULL);
}

/*
 * Every scalar of the text was a JSON string, so all came back quoted:
 * make them plain, as the config they came from had its numbers, flags
 * and nulls (see config.h for what that costs).
 */
static void
unquote(struct cnode *n)
{
	size_t i;

	n->quoted = 0;
	for (i = 0; i < n->nr; i++)
		unquote(n->kids[i]);
}

int
config_from_json(const char *text, const char *label, struct config *out,
		 struct err *e)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	int rc;

	config_builder_init(&b);
	rc = config_add_yaml(&b, label, text, strlen(text), e);
	if (rc < 0) {
		config_builder_release(&b);
		return rc;
	}
	unquote(b.root);
	return config_finish(&b, out, e);
}

/*
 * The diff. Two nodes are the same when their canonical forms (the
 * hash's, above) are: key order, quoting and origins do not count.
 */
static int
same_node(const struct cnode *a, const struct cnode *b)
{
	struct buf x = BUF_INIT, y = BUF_INIT;
	int same;

	canon(&x, a, NULL);
	canon(&y, b, NULL);
	same = x.len == y.len && !memcmp(x.ptr, y.ptr, x.len);
	buf_release(&x);
	buf_release(&y);
	return same;
}

/* A scalar with no text, or YAML's null: a section written empty. */
static int
is_empty(const struct cnode *n)
{
	return n->type == CNODE_SCALAR &&
	       (!n->value[0] || !strcmp(n->value, "~") ||
		!strcasecmp(n->value, "null"));
}

/* Appends s, cut at DIFF_SHOW_MAX bytes or a control character. */
static void
diff_text(struct buf *out, const char *s)
{
	size_t n;

	if (!*s) {
		buf_adds(out, "\"\"");
		return;
	}
	for (n = 0; s[n] && (unsigned char)s[n] >= 0x20; n++)
		;
	if (!s[n] && n <= DIFF_SHOW_MAX) {
		buf_adds(out, s);
		return;
	}
	if (n > DIFF_SHOW_MAX - 3)
		n = DIFF_SHOW_MAX - 3;
	while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--; /* not inside a UTF-8 sequence */
	buf_add(out, s, n);
	buf_adds(out, "...");
}

/* How a value is shown in a diff line, cut as diff_text cuts. */
static void
diff_value(struct buf *out, const struct cnode *n)
{
	struct buf list = BUF_INIT;
	size_t i;

	if (n->type == CNODE_SCALAR) {
		diff_text(out, n->value);
	} else if (n->type == CNODE_MAP) {
		buf_adds(out, n->nr ? "{...}" : "{}");
	} else if (!n->nr) {
		buf_adds(out, "[]");
	} else {
		for (i = 0; i < n->nr; i++)
			buf_addf(&list, "%s%s", i ? ", " : "",
				 n->kids[i]->type == CNODE_SCALAR ?
					 n->kids[i]->value :
					 "...");
		buf_addch(out, '[');
		diff_text(out, list.ptr);
		buf_addch(out, ']');
	}
	buf_release(&list);
}

static int
all_scalar_kids(const struct cnode *n)
{
	size_t i;

	for (i = 0; i < n->nr; i++)
		if (n->kids[i]->type != CNODE_SCALAR)
			return 0;
	return 1;
}

/* The keys of map n (NULL: none) sorted, in a new array of n->nr. */
static const struct cnode **
sorted_kids(const struct cnode *n, size_t *nr)
{
	const struct cnode **kids;
	size_t i;

	*nr = n && n->type == CNODE_MAP ? n->nr : 0;
	kids = xcalloc(*nr ? *nr : 1, sizeof(*kids));
	for (i = 0; i < *nr; i++)
		kids[i] = n->kids[i];
	qsort(kids, *nr, sizeof(*kids), cmp_key);
	return kids;
}

static void diff_walk(struct buf *path, const struct cnode *old,
		      const struct cnode *cur, struct strvec *out);

/* Two maps (or empty scalars, or NULL), key by key. */
static void
diff_maps(struct buf *path, const struct cnode *old, const struct cnode *cur,
	  struct strvec *out)
{
	const struct cnode **a, **b;
	size_t na, nb, i = 0, j = 0, mark = path->len;
	int c;

	a = sorted_kids(old, &na);
	b = sorted_kids(cur, &nb);
	while (i < na || j < nb) {
		if (i == na)
			c = 1;
		else if (j == nb)
			c = -1;
		else
			c = strcmp(a[i]->key, b[j]->key);
		buf_addf(path, "%s%s", mark ? "." : "",
			 c <= 0 ? a[i]->key : b[j]->key);
		if (!strcmp(path->ptr, "server"))
			; /* how serve listens: nothing of a run's */
		else if (c < 0)
			strvec_pushf(out, "%s: removed", path->ptr);
		else if (c > 0)
			strvec_pushf(out, "%s: added", path->ptr);
		else
			diff_walk(path, a[i], b[j], out);
		buf_setlen(path, mark);
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
	free(a);
	free(b);
}

/* Two sequences of mappings, as long as each other: item by item. */
static void
diff_seqs(struct buf *path, const struct cnode *old, const struct cnode *cur,
	  struct strvec *out)
{
	size_t i, mark = path->len;

	for (i = 0; i < old->nr; i++) {
		buf_addf(path, "[%zu]", i);
		diff_walk(path, old->kids[i], cur->kids[i], out);
		buf_setlen(path, mark);
	}
}

static void
diff_walk(struct buf *path, const struct cnode *old, const struct cnode *cur,
	  struct strvec *out)
{
	struct buf line = BUF_INIT;

	if ((old->type == CNODE_MAP || is_empty(old)) &&
	    (cur->type == CNODE_MAP || is_empty(cur)) &&
	    (old->type == CNODE_MAP || cur->type == CNODE_MAP)) {
		diff_maps(path, old, cur, out);
		return;
	}
	if (same_node(old, cur))
		return;
	if (old->type == CNODE_SEQ && cur->type == CNODE_SEQ &&
	    (!all_scalar_kids(old) || !all_scalar_kids(cur))) {
		if (old->nr == cur->nr) {
			diff_seqs(path, old, cur, out);
			return;
		}
		strvec_pushf(out, "%s: changed (%zu -> %zu items)", path->ptr,
			     old->nr, cur->nr);
		return;
	}
	buf_addf(&line, "%s: ", path->ptr);
	diff_value(&line, old);
	buf_adds(&line, " -> ");
	diff_value(&line, cur);
	strvec_push(out, line.ptr);
	buf_release(&line);
}

void
config_diff(const struct cnode *old, const struct cnode *cur,
	    struct strvec *out)
{
	struct buf path = BUF_INIT;

	diff_maps(&path, old, cur, out);
	buf_release(&path);
}
