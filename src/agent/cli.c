/*
 * The coding-agent CLIs as providers: claude-code, codex, gemini, qwen,
 * opencode, aider, copilot, pi, kilo, cline, continue, amp, auggie and
 * crush (DESIGN.md section 5; research/agent-clis.md and docs/agents.md
 * record how each one was driven headless and offline, or why not). One runner
 * drives them all. A preset per type knows the program, its headless flags, how
 * to point it at a model server and a private home, and how to read what it
 * prints.
 *
 *   agent_which(program) ──not found──▶ failure MISSING, install hint
 *        │
 *        ▼
 *   cli__build: home files, argv, env ──▶ sandbox_wrap ──▶ spawn_run
 *                                                              │
 *   agent_classify ◀── pricing ◀── preset parser ◀── stdout file, by line
 *
 * The prompt is always the last argument, either after "--" or glued to
 * its option ("--prompt=PROMPT"). A prompt that starts with '-' and a
 * variadic option at the end of providers.NAME.args (claude's
 * --allowedTools a b) therefore cannot swallow or split it. stdin is
 * /dev/null.
 *
 * A call that continues an earlier session (req->resume_session) gets
 * it as its type takes it: glued to an option before providers.NAME.args
 * ("--resume=ID", opencode "--session=ID"), or for codex as the resume
 * subcommand's operands after every exec option ("resume -- ID PROMPT").
 * The id is checked (agent_session_id_ok) here again: it came from an
 * agent's output.
 *
 * Output streams are JSON lines; lines that are not JSON objects are
 * skipped, lines longer than CLI_LINE_MAX are dropped, and the file is
 * read in chunks, so a long session costs a bounded amount of memory.
 */
#include "util/compat.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "agent/cli_int.h"
#include "core/config.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/xalloc.h"

/* The final text kept from a stream (the head when longer). */
#define CLI_TEXT_MAX BUF_MAX_ARTIFACT
/* r->message: one line. */
#define CLI_MESSAGE_MAX 1024
/* The variable holding a placeholder key when codex needs one. */
#define CODEX_KEY_VAR "BATON_CODEX_KEY"
/* What a shown tool call says about its arguments, at most. */
#define TOOL_BRIEF_MAX 160

/* What a preset's setup needs to add its part of argv, env and home. */
struct cli_build {
	const struct agent_request *req;
	const struct config_provider *p;
	struct strvec *argv, *env;
	const char *key; /* the value of $api_key_env, or NULL */
	int isolated;	 /* p->isolated with a home to put it in */
};

/* The reading of one stream. */
struct cli_stream {
	const struct cli_preset *cp;
	struct agent_result *r;
	struct buf turn;  /* text of the current turn (gemini, opencode) or
			     the tail of plain output (aider) */
	struct buf last;  /* the last non-empty assistant text */
	struct buf error; /* the last error the stream reported */
	struct buf line;  /* the line being read */
	int skipping;	  /* the line is too long: drop it */
	int have_result;  /* a final event (or any plain output) was seen */
	int failed;	  /* the agent reported that the call failed */
	int in_turn;	  /* gemini: a model turn is open */
	double cost;
	int cost_seen;
	/*
	 * NULL, or where the parsers put a readable account of each line
	 * as it is read (agent_watch: the assistant's text, a line per
	 * tool call, errors). show_open: what was shown ends mid-line
	 * (gemini sends its text in pieces).
	 */
	struct buf *show;
	int show_open;
};

/* Preset flags. */
enum {
	/* usage.input_tokens leaves out cache reads and writes (Anthropic) */
	CLI_F_CACHE_TOKENS = 1 << 0,
	/* a result text starting "[API Error" is a failure (qwen exits 0) */
	CLI_F_API_ERROR_TEXT = 1 << 1,
	/*
	 * the prompt is the last argument as it is (pi takes no "--"); one
	 * that starts with '-' or '@' (pi's file include) gets a newline
	 * in front, so it cannot read as an option or a file
	 */
	CLI_F_BARE_PROMPT = 1 << 2,
};

struct cli_preset {
	const struct agent_adapter *adapter; /* type, program, hints */
	const char *const *argv;	     /* headless flags, after argv[0] */
	const char *const *env;		     /* fixed "K=V" */
	const char *model_flag;		     /* NULL: setup adds the model */
	const char *prompt_opt; /* "--prompt=": glued; NULL: "--" PROMPT */
	/*
	 * How a call continues req->resume_session: resume_opt glued to
	 * the id ("--resume=ID") before providers.NAME.args, or resume_sub,
	 * a subcommand that takes the id and the prompt as its operands
	 * (codex exec resume -- ID PROMPT). Neither: no native resume.
	 */
	const char *resume_opt;
	const char *resume_sub;
	unsigned flags;		/* CLI_F_* */
	/* base_url, key, retries, effort, the private home */
	int (*setup)(struct cli_build *b, struct err *e);
	/* one JSON line; NULL: plain text output */
	void (*line)(struct cli_stream *st, json_t *j);
	/* after the exit: maps the type's own exit codes (optional) */
	void (*exited)(struct agent_result *r);
};

/* ---- small helpers ---------------------------------------------------- */

/* The number member key of obj as an integer; 0 if none or absurd. */
static int64_t
jint(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	double d;

	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	d = json_number_value(v);
	/* the comparisons are false for NaN */
	return d > -9e18 && d < 9e18 ? (int64_t)d : 0;
}

static int
streq(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/* dst = s (len bytes), trimmed, at most CLI_TEXT_MAX bytes. */
static void
set_text(struct buf *dst, const char *s, size_t len)
{
	while (len && isspace((unsigned char)*s)) {
		s++;
		len--;
	}
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	buf_reset(dst);
	buf_add(dst, s, len < CLI_TEXT_MAX ? len : CLI_TEXT_MAX);
}

/* r->message = s on one line: control characters become spaces. */
static void
set_message(struct agent_result *r, const char *s)
{
	size_t i;

	set_text(&r->message, s, strlen(s));
	if (r->message.len > CLI_MESSAGE_MAX)
		buf_setlen(&r->message, CLI_MESSAGE_MAX);
	for (i = 0; i < r->message.len; i++)
		if (iscntrl((unsigned char)r->message.ptr[i]))
			r->message.ptr[i] = ' ';
}

static void
note_session(struct agent_result *r, const char *id)
{
	if (id && *id && !r->session_id[0])
		snprintf(r->session_id, sizeof(r->session_id), "%s", id);
}

/* ---- what a line shows (agent_watch) --------------------------------- */

/* Shows the assistant's text as it is, for a stream being watched. */
static void
show_text(struct cli_stream *st, const char *s)
{
	size_t len = s ? strlen(s) : 0;

	if (!st->show || !len)
		return;
	buf_add(st->show, s, len);
	st->show_open = s[len - 1] != '\n';
}

/* Shows one whole line (a newline is added), after any open text. */
static void __attribute__((format(printf, 2, 3)))
show_line(struct cli_stream *st, const char *fmt, ...)
{
	va_list ap;

	if (!st->show)
		return;
	if (st->show_open)
		buf_addch(st->show, '\n');
	va_start(ap, fmt);
	buf_vaddf(st->show, fmt, ap);
	va_end(ap);
	buf_addch(st->show, '\n');
	st->show_open = 0;
}

/* Ends the shown text's open line: what follows starts a new one. */
static void
show_close(struct cli_stream *st)
{
	if (st->show && st->show_open)
		buf_addch(st->show, '\n');
	st->show_open = 0;
}

/* Shows a block of the assistant's text on lines of its own. */
static void
show_para(struct cli_stream *st, const char *s)
{
	show_close(st);
	show_text(st, s);
	show_close(st);
}

/*
 * What a tool call was about, in a few words: the first of the usual
 * arguments (a command, a path, a pattern), else the first string one,
 * on one line and at most TOOL_BRIEF_MAX bytes (cut on a character).
 */
static void
tool_brief(const json_t *input, struct buf *out)
{
	static const char *const keys[] = {
		"command",     "cmd",	  "file_path",	   "filePath",
		"path",	       "pattern", "url",	   "query",
		"description", "prompt",  "absolute_path",
	};
	const char *s = NULL, *key;
	json_t *v;
	size_t i, len;

	for (i = 0; i < ARRAY_SIZE(keys) && !s; i++)
		s = json_get_str(input, keys[i]);
	if (!s && json_is_array(json_object_get(input, "command")))
		s = json_string_value(
		    json_array_get(json_object_get(input, "command"), 0));
	json_object_foreach((json_t *)input, key, v)
	{
		if (s)
			break;
		s = json_string_value(v);
	}
	if (!s)
		return;
	len = strlen(s);
	if (len > TOOL_BRIEF_MAX) {
		len = TOOL_BRIEF_MAX;
		while (len && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	for (i = 0; i < len; i++)
		buf_addch(out, s[i] == '\n' || s[i] == '\r' || s[i] == '\t'
				   ? ' '
				   : s[i]);
	if (len < strlen(s))
		buf_adds(out, " ...");
}

/* Shows "[tool] NAME: what it was about" for a tool call. */
static void
show_tool(struct cli_stream *st, const char *name, const json_t *input)
{
	struct buf brief = BUF_INIT;

	if (!st->show)
		return;
	tool_brief(input, &brief);
	show_line(st, "[tool] %s%s%s", name ? name : "?", brief.len ? ": " : "",
		  brief.ptr);
	buf_release(&brief);
}

/* Appends s to b as a TOML basic string, quotes included. */
static void
toml_str(struct buf *b, const char *s)
{
	buf_addch(b, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_addf(b, "\\%c", *s);
		else if ((unsigned char)*s < 0x20 || *s == 0x7f)
			buf_addf(b, "\\u%04x", (unsigned char)*s);
		else
			buf_addch(b, *s);
	}
	buf_addch(b, '"');
}

/*
 * Writes data to path readable by its owner only (it may hold a key's
 * name and settings nobody else should change), creating the parent.
 */
static int
write_private(const char *path, const char *data, struct err *e)
{
	char *dir = xstrdup(path), *slash = strrchr(dir, '/');
	int fd = -1, rc = 0;

	if (slash && slash != dir) {
		*slash = '\0';
		rc = fs_mkdir_p(dir, 0700, e);
		if (rc)
			goto out;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0) {
		rc = err_set(e, -errno, "cannot create '%s': %s", path,
			     strerror(errno));
		goto out;
	}
	if (fchmod(fd, 0600) < 0) {
		rc = err_set(e, -errno, "cannot chmod '%s': %s", path,
			     strerror(errno));
		goto out;
	}
	rc = fs_write_all(fd, data, strlen(data));
	if (rc)
		err_set(e, rc, "cannot write '%s': %s", path, strerror(-rc));
out:
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

/* Writes j (consumed) as indented JSON to home/rel. */
static int
write_json(const struct cli_build *b, const char *rel, json_t *j, struct err *e)
{
	char *path = xasprintf("%s/%s", b->req->home, rel);
	char *s = json_dumps(j, JSON_INDENT(2));
	int rc;

	if (!s)
		BUG("cannot serialize %s", rel);
	rc = write_private(path, s, e);
	free(s);
	free(path);
	json_decref(j);
	return rc;
}

/* ---- presets: argv, env and home --------------------------------------- */

/*
 * Claude Code: flags and env as verified (research section 1). As root,
 * --dangerously-skip-permissions is refused unless IS_SANDBOX=1.
 */
static int
claude_setup(struct cli_build *b, struct err *e)
{
	const struct config_provider *p = b->p;

	(void)e;
	if (geteuid() == 0)
		strvec_push(b->env, "IS_SANDBOX=1");
	if (p->effort)
		strvec_pushl(b->argv, "--effort", p->effort, NULL);
	if (p->base_url)
		strvec_pushf(b->env, "ANTHROPIC_BASE_URL=%s", p->base_url);
	if (b->key)
		strvec_pushf(b->env, "ANTHROPIC_API_KEY=%s", b->key);
	if (p->max_retries >= 0)
		strvec_pushf(b->env, "CLAUDE_CODE_MAX_RETRIES=%d",
			     p->max_retries);
	if (b->isolated)
		strvec_pushf(b->env, "CLAUDE_CONFIG_DIR=%s", b->req->home);
	return 0;
}

/*
 * Codex: everything on the command line (-c overrides), so an isolated
 * CODEX_HOME only needs a small config.toml. A base_url becomes a model
 * provider called "baton" whose key is read from api_key_env; codex
 * refuses a provider whose key variable is empty, so without one a
 * placeholder is set. Without a base_url the key goes in CODEX_API_KEY,
 * which codex exec reads for its built-in provider.
 */
static int
codex_setup(struct cli_build *b, struct err *e)
{
	const struct config_provider *p = b->p;
	const char *var = p->api_key_env ? p->api_key_env : CODEX_KEY_VAR;
	struct buf v = BUF_INIT;
	char *path;
	int rc = 0;

	if (b->req->cwd)
		strvec_pushl(b->argv, "-C", b->req->cwd, NULL);
	if (p->effort) {
		buf_adds(&v, "model_reasoning_effort=");
		toml_str(&v, p->effort);
		strvec_pushl(b->argv, "-c", v.ptr, NULL);
		buf_reset(&v);
	}
	if (p->base_url) {
		buf_adds(&v, "model_providers.baton={name=\"baton\",base_url=");
		toml_str(&v, p->base_url);
		buf_adds(&v, ",wire_api=\"responses\",env_key=");
		toml_str(&v, var);
		if (p->max_retries >= 0)
			buf_addf(&v,
				 ",request_max_retries=%d,"
				 "stream_max_retries=%d",
				 p->max_retries, p->max_retries);
		buf_addch(&v, '}');
		strvec_pushl(b->argv, "-c", "model_provider=baton", "-c", v.ptr,
			     NULL);
		if (!p->api_key_env)
			strvec_push(b->env, CODEX_KEY_VAR "=baton");
	} else if (b->key) {
		strvec_pushf(b->env, "CODEX_API_KEY=%s", b->key);
	}
	if (b->isolated) {
		path = xasprintf("%s/config.toml", b->req->home);
		rc = write_private(path,
				   "# written by baton: a private CODEX_HOME\n"
				   "check_for_update_on_startup = false\n"
				   "\n[analytics]\nenabled = false\n",
				   e);
		free(path);
		strvec_pushf(b->env, "CODEX_HOME=%s", b->req->home);
		/*
		 * codex refuses to put the helper its bubblewrap sandbox
		 * execs (codex-linux-sandbox) under the temporary directory,
		 * and without it every shell command fails. A home under
		 * /tmp (tests, scratch repos) is fine once TMPDIR is not.
		 */
		path = xasprintf("%s/tmp", b->req->home);
		if (!rc)
			rc = fs_mkdir_p(path, 0700, e);
		strvec_pushf(b->env, "TMPDIR=%s", path);
		free(path);
	}
	buf_release(&v);
	return rc;
}

/*
 * Gemini CLI: HOME is the private home, with .gemini/settings.json as in
 * research section 3. selectedType is required: with only a base URL the
 * CLI picks "gateway" auth and headless mode refuses it (exit 41).
 */
static int
gemini_setup(struct cli_build *b, struct err *e)
{
	const struct config_provider *p = b->p;
	json_t *j;

	if (p->base_url)
		strvec_pushf(b->env, "GOOGLE_GEMINI_BASE_URL=%s", p->base_url);
	if (b->key)
		strvec_pushf(b->env, "GEMINI_API_KEY=%s", b->key);
	if (!b->isolated)
		return 0;
	j = json_pack("{s:{s:{s:s}, s:{s:b}}, s:{s:b}, s:{s:b}, s:{s:b, s:b}}",
		      "security", "auth", "selectedType", "gemini-api-key",
		      "folderTrust", "enabled", 0, "privacy",
		      "usageStatisticsEnabled", 0, "telemetry", "enabled", 0,
		      "general", "disableAutoUpdate", 1, "disableUpdateNag", 1);
	if (p->max_retries >= 0)
		json_object_set_new(json_object_get(j, "general"),
				    "maxAttempts",
				    json_integer(p->max_retries + 1));
	strvec_pushf(b->env, "HOME=%s", b->req->home);
	return write_json(b, ".gemini/settings.json", j, e);
}

/*
 * Qwen Code: the OpenAI variables, and HOME with .qwen/settings.json as
 * in research section 4.
 */
static int
qwen_setup(struct cli_build *b, struct err *e)
{
	const struct config_provider *p = b->p;
	json_t *j;

	if (p->base_url)
		strvec_pushf(b->env, "OPENAI_BASE_URL=%s", p->base_url);
	if (b->key)
		strvec_pushf(b->env, "OPENAI_API_KEY=%s", b->key);
	if (p->model)
		strvec_pushf(b->env, "OPENAI_MODEL=%s", p->model);
	if (!b->isolated)
		return 0;
	j = json_pack("{s:{s:{s:s}}, s:{s:b}, s:{s:b}, s:{s:b, s:b}}",
		      "security", "auth", "selectedType", "openai", "privacy",
		      "usageStatisticsEnabled", 0, "telemetry", "enabled", 0,
		      "general", "disableAutoUpdate", 1, "disableUpdateNag", 1);
	if (p->max_retries >= 0)
		json_object_set_new(j, "model",
				    json_pack("{s:{s:i}}", "generationConfig",
					      "maxRetries", p->max_retries));
	strvec_pushf(b->env, "HOME=%s", b->req->home);
	return write_json(b, ".qwen/settings.json", j, e);
}

/*
 * What opencode and its fork Kilo call the same things: the variable
 * prefix (PREFIX_CONFIG, PREFIX_CONFIG_CONTENT), the config file, its
 * schema and the folder under each XDG directory.
 */
struct oc_names {
	const char *var;    /* "OPENCODE" */
	const char *file;   /* "opencode.json" */
	const char *schema; /* or NULL */
};

/*
 * opencode (and Kilo): baton always hands it a config (research section
 * 5): no autoupdate or sharing, edits and shell allowed (a headless run
 * cannot answer a permission prompt), and with a base_url an
 * OpenAI-compatible provider "baton" whose key it reads itself
 * ({env:VAR}). The config is home/FILE when there is a home, else it
 * travels in PREFIX_CONFIG_CONTENT. Isolation adds private XDG
 * directories.
 */
static int
oc_setup(struct cli_build *b, const struct oc_names *n, struct err *e)
{
	const struct config_provider *p = b->p;
	const char *home = b->req->home;
	json_t *j, *models;
	char *key, *s;
	int rc = 0;

	if (p->model) {
		strvec_push(b->argv, "--model");
		if (p->base_url)
			strvec_pushf(b->argv, "baton/%s", p->model);
		else
			strvec_push(b->argv, p->model);
	}
	j = json_pack("{s:b, s:s, s:{s:s, s:s, s:s}}", "autoupdate", 0, "share",
		      "disabled", "permission", "edit", "allow", "bash",
		      "allow", "webfetch", "deny");
	if (n->schema)
		json_object_set_new(j, "$schema", json_string(n->schema));
	if (p->base_url) {
		key = p->api_key_env ? xasprintf("{env:%s}", p->api_key_env)
				     : xstrdup("baton");
		models = json_object();
		if (p->model)
			json_object_set_new(models, p->model,
					    json_pack("{s:s, s:b}", "name",
						      p->model, "tool_call",
						      1));
		json_object_set_new(
		    j, "provider",
		    json_pack("{s:{s:s, s:s, s:{s:s, s:s}, s:o}}", "baton",
			      "npm", "@ai-sdk/openai-compatible", "name",
			      "baton", "options", "baseURL", p->base_url,
			      "apiKey", key, "models", models));
		if (p->model)
			json_object_set_new(j, "model",
					    json_sprintf("baton/%s", p->model));
		free(key);
	}
	if (home) {
		strvec_pushf(b->env, "%s_CONFIG=%s/%s", n->var, home, n->file);
		rc = write_json(b, n->file, j, e);
	} else {
		s = json_dumps(j, JSON_COMPACT);
		strvec_pushf(b->env, "%s_CONFIG_CONTENT=%s", n->var, s);
		free(s);
		json_decref(j);
	}
	if (b->isolated) {
		strvec_pushf(b->env, "XDG_CONFIG_HOME=%s/config", home);
		strvec_pushf(b->env, "XDG_DATA_HOME=%s/data", home);
		strvec_pushf(b->env, "XDG_CACHE_HOME=%s/cache", home);
		strvec_pushf(b->env, "XDG_STATE_HOME=%s/state", home);
	}
	return rc;
}

static int
opencode_setup(struct cli_build *b, struct err *e)
{
	static const struct oc_names n = { "OPENCODE", "opencode.json",
					   "https://opencode.ai/config.json" };

	return oc_setup(b, &n, e);
}

/*
 * Aider (not verified here: it is not installable offline). litellm needs
 * "openai/" before a model served at a custom OpenAI base. The key goes
 * through OPENAI_API_KEY rather than --openai-api-key, so it never shows
 * in the process list. Its history files go to the home, not the worktree.
 */
static int
aider_setup(struct cli_build *b, struct err *e)
{
	const struct config_provider *p = b->p;
	const char *home = b->req->home;
	int rc;

	if (p->model) {
		strvec_push(b->argv, "--model");
		if (p->base_url && !strchr(p->model, '/'))
			strvec_pushf(b->argv, "openai/%s", p->model);
		else
			strvec_push(b->argv, p->model);
	}
	if (p->base_url)
		strvec_pushl(b->argv, "--openai-api-base", p->base_url, NULL);
	if (b->key)
		strvec_pushf(b->env, "OPENAI_API_KEY=%s", b->key);
	if (!home)
		return 0;
	rc = fs_mkdir_p(home, 0700, e);
	if (rc)
		return rc;
	strvec_push(b->argv, "--input-history-file");
	strvec_pushf(b->argv, "%s/aider.input.history", home);
	strvec_push(b->argv, "--chat-history-file");
	strvec_pushf(b->argv, "%s/aider.chat.history.md", home);
	return 0;
}

/*
 * Kilo (@kilocode/cli): a fork of opencode, driven the same way, with
 * KILO_ where opencode has OPENCODE_ and kilo.json for its config.
 */
static int
kilo_setup(struct cli_build *b, struct err *e)
{
	static const struct oc_names n = { "KILO", "kilo.json", NULL };

	return oc_setup(b, &n, e);
}

/* For the presets that only talk to their vendor's service. */
static int
no_base_url(const struct cli_build *b, const char *why, struct err *e)
{
	if (!b->p->base_url)
		return 0;
	return err_set(e, BATON_EINVAL, "base_url is not supported: %s", why);
}

/*
 * GitHub Copilot CLI: a base_url is its "bring your own key" provider
 * (COPILOT_PROVIDER_*, OpenAI Chat Completions), which also lets it run
 * offline (COPILOT_OFFLINE: no GitHub login, telemetry or update check).
 * Without one the key is a GitHub token. COPILOT_HOME is the private
 * home.
 */
static int
copilot_setup(struct cli_build *b, struct err *e)
{
	const struct config_provider *p = b->p;

	(void)e;
	if (p->effort)
		strvec_pushl(b->argv, "--reasoning-effort", p->effort, NULL);
	if (p->base_url) {
		strvec_pushf(b->env, "COPILOT_PROVIDER_BASE_URL=%s",
			     p->base_url);
		strvec_push(b->env, "COPILOT_OFFLINE=true");
		if (b->key)
			strvec_pushf(b->env, "COPILOT_PROVIDER_API_KEY=%s",
				     b->key);
	} else if (b->key) {
		strvec_pushf(b->env, "COPILOT_GITHUB_TOKEN=%s", b->key);
	}
	if (b->isolated)
		strvec_pushf(b->env, "COPILOT_HOME=%s", b->req->home);
	return 0;
}

/*
 * pi: a base_url becomes a custom provider "baton" in models.json
 * (OpenAI Chat Completions, the system prompt as a system message; its
 * apiKey is the name of api_key_env, which pi resolves itself). That
 * file and settings.json (the retries) live in PI_CODING_AGENT_DIR,
 * HOME/agent, used when isolated or given a base_url.
 */
static int
pi_setup(struct cli_build *b, struct err *e)
{
	const struct config_provider *p = b->p;
	json_t *j, *models;
	int rc;

	if (p->base_url)
		strvec_pushl(b->argv, "--provider", "baton", NULL);
	if (p->effort)
		strvec_pushl(b->argv, "--thinking", p->effort, NULL);
	if (!b->req->home || (!b->isolated && !p->base_url))
		return 0;
	strvec_pushf(b->env, "PI_CODING_AGENT_DIR=%s/agent", b->req->home);
	if (p->base_url) {
		models = json_array();
		if (p->model)
			json_array_append_new(
			    models, json_pack("{s:s}", "id", p->model));
		j = json_pack("{s:{s:{s:s, s:s, s:s, s:{s:b, s:b}, s:o}}}",
			      "providers", "baton", "baseUrl", p->base_url,
			      "api", "openai-completions", "apiKey",
			      p->api_key_env ? p->api_key_env : "baton",
			      "compat", "supportsDeveloperRole", 0,
			      "supportsReasoningEffort", 0, "models", models);
		rc = write_json(b, "agent/models.json", j, e);
		if (rc)
			return rc;
	}
	j = json_object();
	if (p->max_retries >= 0)
		json_object_set_new(j, "retry",
				    json_pack("{s:b, s:i, s:{s:i}}", "enabled",
					      p->max_retries > 0, "maxRetries",
					      p->max_retries, "provider",
					      "maxRetries", p->max_retries));
	return write_json(b, "agent/settings.json", j, e);
}

/*
 * Cline: its settings and state live in --config and --data-dir, which
 * isolation (or a base_url) points into the home. A base_url becomes its
 * "openai-compatible" provider in DATA/settings/providers.json, the file
 * `cline auth` writes. Cline reads the key from that file only, so the
 * key is written there (0600, in the private home).
 */
static int
cline_setup(struct cli_build *b, struct err *e)
{
	const struct config_provider *p = b->p;
	const char *home = b->req->home;
	json_t *set;

	if (p->effort)
		strvec_pushl(b->argv, "--thinking", p->effort, NULL);
	if (!home || (!b->isolated && !p->base_url))
		return 0;
	strvec_push(b->argv, "--config");
	strvec_pushf(b->argv, "%s/config", home);
	strvec_push(b->argv, "--data-dir");
	strvec_pushf(b->argv, "%s/data", home);
	if (!p->base_url)
		return 0;
	set = json_pack("{s:s, s:s, s:s}", "provider", "openai-compatible",
			"baseUrl", p->base_url, "apiKey",
			b->key ? b->key : "baton");
	if (p->model)
		json_object_set_new(set, "model", json_string(p->model));
	return write_json(b, "data/settings/providers.json",
			  json_pack("{s:i, s:s, s:{}, s:{s:{s:o, s:s, s:s}}}",
				    "version", 1, "lastUsedProvider",
				    "openai-compatible", "modes", "providers",
				    "openai-compatible", "settings", set,
				    "updatedAt", "1970-01-01T00:00:00.000Z",
				    "tokenSource", "manual"),
			  e);
}

/*
 * Continue (cn): a base_url becomes the one model of a config file in
 * the home (JSON, which is YAML too) given with --config: provider
 * "openai", its key read by cn from the environment (${{ secrets.VAR }}).
 * Without a base_url the model is a hub slug (--model). Isolation moves
 * its global folder (sessions, permissions, logs) to the home.
 */
static int
continue_setup(struct cli_build *b, struct err *e)
{
	const struct config_provider *p = b->p;
	const char *home = b->req->home;
	json_t *model;
	char *key;
	int rc = 0;

	if (b->isolated)
		strvec_pushf(b->env, "CONTINUE_GLOBAL_DIR=%s/continue", home);
	if (!p->base_url) {
		if (p->model)
			strvec_pushl(b->argv, "--model", p->model, NULL);
		return 0;
	}
	if (!home)
		return err_set(e, BATON_EINVAL,
			       "a base_url needs a home for cn's config");
	key = p->api_key_env ? xasprintf("${{ secrets.%s }}", p->api_key_env)
			     : xstrdup("baton");
	model = json_pack("{s:s, s:s, s:s, s:s, s:s, s:[sss], s:[s]}", "name",
			  "baton", "provider", "openai", "model",
			  p->model ? p->model : "default", "apiBase",
			  p->base_url, "apiKey", key, "roles", "chat", "edit",
			  "apply", "capabilities", "tool_use");
	rc = write_json(b, "continue.yaml",
			json_pack("{s:s, s:s, s:s, s:[o]}", "name", "baton",
				  "version", "1.0.0", "schema", "v1", "models",
				  model),
			e);
	strvec_push(b->argv, "--config");
	strvec_pushf(b->argv, "%s/continue.yaml", home);
	free(key);
	return rc;
}

/*
 * Amp (not verified: it only runs against ampcode.com). The key is
 * AMP_API_KEY. Isolated, its settings file is one in the home that
 * allows every tool (a headless run cannot answer a prompt).
 */
static int
amp_setup(struct cli_build *b, struct err *e)
{
	int rc = no_base_url(b, "amp talks to the Amp service only", e);

	if (rc)
		return rc;
	if (b->key)
		strvec_pushf(b->env, "AMP_API_KEY=%s", b->key);
	if (!b->isolated)
		return 0;
	strvec_pushf(b->env, "AMP_SETTINGS_FILE=%s/settings.json",
		     b->req->home);
	return write_json(b, "settings.json",
			  json_pack("{s:b}", "amp.dangerouslyAllowAll", 1), e);
}

/*
 * Auggie (not verified: it needs an Augment account). The key variable
 * holds its session JSON (AUGMENT_SESSION_AUTH). Isolated, its cache and
 * sessions go to the home.
 */
static int
auggie_setup(struct cli_build *b, struct err *e)
{
	int rc = no_base_url(b, "auggie speaks Augment's own API only", e);

	if (rc)
		return rc;
	if (b->key)
		strvec_pushf(b->env, "AUGMENT_SESSION_AUTH=%s", b->key);
	if (b->isolated) {
		strvec_push(b->argv, "--augment-cache-dir");
		strvec_pushf(b->argv, "%s/augment", b->req->home);
	}
	return 0;
}

/*
 * Crush (not verified: its npm package downloads the program from
 * github.com when installed). Its providers are set in its own
 * crush.json; isolated, its data folder is in the home.
 */
static int
crush_setup(struct cli_build *b, struct err *e)
{
	int rc =
	    no_base_url(b, "configure crush's providers in its crush.json", e);

	if (rc)
		return rc;
	if (b->isolated) {
		strvec_push(b->argv, "--data-dir");
		strvec_pushf(b->argv, "%s/crush", b->req->home);
	}
	return 0;
}

/* ---- presets: reading the output --------------------------------------- */

/* The current turn's text becomes the last text seen; a new turn starts. */
static void
flush_turn(struct cli_stream *st)
{
	if (st->turn.len) {
		buf_reset(&st->last);
		buf_add(&st->last, st->turn.ptr, st->turn.len);
	}
	buf_reset(&st->turn);
}

/* The text blocks of a message's content (array or string) into last. */
static void
content_text(struct cli_stream *st, const json_t *content)
{
	struct buf t = BUF_INIT;
	const char *s;
	json_t *block;
	size_t i;

	if (json_is_string(content)) {
		buf_adds(&t, json_string_value(content));
	} else {
		for (i = 0; i < json_array_size(content); i++) {
			block = json_array_get(content, i);
			s = json_get_str(block, "text");
			if (streq(json_get_str(block, "type"), "tool_use"))
				show_tool(st, json_get_str(block, "name"),
					  json_object_get(block, "input"));
			if (!streq(json_get_str(block, "type"), "text") || !s ||
			    !*s)
				continue;
			if (t.len)
				buf_addch(&t, '\n');
			buf_adds(&t, s);
			show_para(st, s);
		}
	}
	if (json_is_string(content) && t.len)
		show_para(st, t.ptr);
	if (t.len) {
		buf_reset(&st->last);
		buf_add(&st->last, t.ptr, t.len);
	}
	buf_release(&t);
}

/*
 * The result line of claude and qwen: final text, usage, cost, turns,
 * and whether it failed (is_error; error_max_turns is a limit; qwen's
 * "[API Error ..." results).
 */
static void
claude_result(struct cli_stream *st, const json_t *j)
{
	struct agent_result *r = st->r;
	const json_t *usage = json_object_get(j, "usage");
	const json_t *cost = json_object_get(j, "total_cost_usd");
	const char *res = json_get_str(j, "result");
	const char *sub = json_get_str(j, "subtype");
	const char *first_error;
	int is_error = json_is_true(json_object_get(j, "is_error"));

	st->have_result = 1;
	r->tokens_in = jint(usage, "input_tokens");
	if (st->cp->flags & CLI_F_CACHE_TOKENS)
		r->tokens_in += jint(usage, "cache_creation_input_tokens") +
				jint(usage, "cache_read_input_tokens");
	r->tokens_out = jint(usage, "output_tokens");
	if (json_is_number(cost)) {
		st->cost = json_number_value(cost);
		st->cost_seen = 1;
	}
	if (jint(j, "num_turns") > 0)
		r->steps = (int)jint(j, "num_turns");
	if ((st->cp->flags & CLI_F_API_ERROR_TEXT) && res &&
	    !strncmp(res, "[API Error", 10))
		is_error = 1;
	if (streq(sub, "error_max_turns")) {
		r->failure = AGENT_FAIL_LIMIT;
		is_error = 1;
	}
	if (!is_error) {
		if (res)
			set_text(&r->text, res, strlen(res));
		return;
	}
	st->failed = 1;
	show_line(st, "[error] %s", res && *res ? res : sub ? sub : "failed");
	r->http_status = (int)jint(j, "api_error_status");
	if (!r->http_status)
		r->http_status = agent__status_in_text(res);
	first_error =
	    json_string_value(json_array_get(json_object_get(j, "errors"), 0));
	set_message(r, res && *res   ? res
		       : first_error ? first_error
		       : sub	     ? sub
				     : "the agent reported an error");
}

/*
 * Claude Code stream-json (and qwen's copy of it): system/init, one
 * assistant line per content block, system/api_retry while retrying,
 * and a result line.
 */
static void
claude_line(struct cli_stream *st, json_t *j)
{
	const char *type = json_get_str(j, "type");
	const char *error = json_get_str(j, "error");

	note_session(st->r, json_get_str(j, "session_id"));
	if (streq(type, "assistant")) {
		content_text(st, json_object_get(json_object_get(j, "message"),
						 "content"));
	} else if (streq(type, "system") &&
		   streq(json_get_str(j, "subtype"), "api_retry")) {
		/* the last of these says why a run killed mid-retry failed */
		buf_reset(&st->error);
		buf_addf(&st->error, "API error %d (%s), retrying",
			 (int)jint(j, "error_status"),
			 error ? error : "unknown");
		show_line(st, "[retry] %s", st->error.ptr);
	} else if (streq(type, "result")) {
		claude_result(st, j);
	}
}

/*
 * One codex item, started or completed: the last agent_message is the
 * answer. A watched stream shows commands as they start, and messages,
 * edits and warnings once they are complete.
 */
static void
codex_item(struct cli_stream *st, const char *type, const json_t *item)
{
	const char *kind = json_get_str(item, "type");
	const char *msg = json_get_str(item, "text");
	const json_t *change;
	size_t i;

	if (streq(type, "item.started")) {
		if (streq(kind, "command_execution"))
			show_tool(st, "shell", item);
		else if (kind && !streq(kind, "agent_message") &&
			 !streq(kind, "reasoning") && !streq(kind, "error") &&
			 !streq(kind, "file_change"))
			show_tool(st, kind, item);
		return;
	}
	if (streq(kind, "agent_message") && msg && *msg) {
		buf_reset(&st->last);
		buf_adds(&st->last, msg);
		show_para(st, msg);
	} else if (streq(kind, "file_change")) {
		json_t *changes = json_object_get(item, "changes");

		for (i = 0; i < json_array_size(changes); i++) {
			change = json_array_get(changes, i);
			show_line(st, "[edit] %s %s",
				  json_get_str(change, "kind")
					  ? json_get_str(change, "kind")
					  : "update",
				  json_get_str(change, "path")
					  ? json_get_str(change, "path")
					  : "?");
		}
	} else if (streq(kind, "error") && json_get_str(item, "message")) {
		show_line(st, "[warning] %s", json_get_str(item, "message"));
	}
}

/*
 * codex exec --json: thread.started, item.* (the last agent_message is the
 * answer), turn.completed with usage, or error and turn.failed.
 */
static void
codex_line(struct cli_stream *st, json_t *j)
{
	struct agent_result *r = st->r;
	const char *type = json_get_str(j, "type"), *msg;
	const json_t *item = json_object_get(j, "item");
	const json_t *usage = json_object_get(j, "usage");

	if (streq(type, "thread.started")) {
		note_session(r, json_get_str(j, "thread_id"));
	} else if (streq(type, "item.started") ||
		   streq(type, "item.completed")) {
		codex_item(st, type, item);
	} else if (streq(type, "turn.completed")) {
		st->have_result = 1;
		r->tokens_in += jint(usage, "input_tokens");
		r->tokens_out += jint(usage, "output_tokens");
		r->steps++;
	} else if (streq(type, "error")) {
		/* also sent for retries ("Reconnecting... 2/5") */
		msg = json_get_str(j, "message");
		if (msg) {
			buf_reset(&st->error);
			buf_adds(&st->error, msg);
			show_line(st, "[error] %s", msg);
		}
	} else if (streq(type, "turn.failed")) {
		st->have_result = 1;
		st->failed = 1;
		msg = json_get_str(json_object_get(j, "error"), "message");
		if (msg) {
			buf_reset(&st->error);
			buf_adds(&st->error, msg);
		}
		show_line(st, "[error] %s", msg ? msg : "the turn failed");
		r->http_status = agent__status_in_text(st->error.ptr);
	}
}

/* gemini: a model turn starts with its first text or tool call. */
static void
gemini_open_turn(struct cli_stream *st)
{
	if (st->in_turn)
		return;
	st->in_turn = 1;
	st->r->steps++;
	flush_turn(st);
}

/*
 * Gemini CLI stream-json: init, messages (the assistant's arrive as
 * deltas), tool_use and tool_result, and a result with stats or an error.
 * The answer is the text of the last model turn.
 */
static void
gemini_line(struct cli_stream *st, json_t *j)
{
	struct agent_result *r = st->r;
	const char *type = json_get_str(j, "type"), *s;
	const json_t *stats = json_object_get(j, "stats");

	if (streq(type, "init")) {
		note_session(r, json_get_str(j, "session_id"));
	} else if (streq(type, "message") &&
		   streq(json_get_str(j, "role"), "assistant")) {
		gemini_open_turn(st);
		if (!json_is_true(json_object_get(j, "delta")))
			buf_reset(&st->turn);
		s = json_get_str(j, "content");
		if (s)
			buf_adds(&st->turn, s);
		show_text(st, s);
	} else if (streq(type, "tool_use")) {
		gemini_open_turn(st);
		show_tool(st, json_get_str(j, "tool_name"),
			  json_object_get(j, "parameters"));
	} else if (streq(type, "tool_result")) {
		st->in_turn = 0;
		s = json_get_str(json_object_get(j, "error"), "message");
		if (!streq(json_get_str(j, "status"), "success"))
			show_line(st, "[tool failed] %s", s ? s : "error");
	} else if (streq(type, "error")) {
		s = json_get_str(j, "message");
		if (s) {
			buf_reset(&st->error);
			buf_adds(&st->error, s);
			show_line(st, "[error] %s", s);
		}
	} else if (streq(type, "result")) {
		st->have_result = 1;
		r->tokens_in = jint(stats, "input_tokens");
		r->tokens_out = jint(stats, "output_tokens");
		show_close(st);
		if (streq(json_get_str(j, "status"), "success"))
			return;
		st->failed = 1;
		s = json_get_str(json_object_get(j, "error"), "message");
		buf_reset(&st->error);
		buf_adds(&st->error, s ? s : "the agent reported an error");
		show_line(st, "[error] %s", st->error.ptr);
		r->http_status = agent__status_in_text(s);
	}
}

/*
 * opencode run --format json: step_start, text and tool parts, and
 * step_finish with tokens and cost per step; error events. There is no
 * final event: the answer is the text of the last step that had some.
 */
static void
opencode_line(struct cli_stream *st, json_t *j)
{
	struct agent_result *r = st->r;
	const char *type = json_get_str(j, "type"), *s;
	const json_t *part = json_object_get(j, "part");
	const json_t *tokens = json_object_get(part, "tokens");
	const json_t *cache = json_object_get(tokens, "cache");
	const json_t *err = json_object_get(j, "error");
	const json_t *data = json_object_get(err, "data");

	note_session(r, json_get_str(j, "sessionID"));
	if (streq(type, "step_start")) {
		flush_turn(st);
	} else if (streq(type, "text")) {
		s = json_get_str(part, "text");
		if (s && *s) {
			if (st->turn.len)
				buf_addch(&st->turn, '\n');
			buf_adds(&st->turn, s);
			show_para(st, s);
		}
	} else if (streq(type, "tool_use")) {
		show_tool(
		    st, json_get_str(part, "tool"),
		    json_object_get(json_object_get(part, "state"), "input"));
	} else if (streq(type, "step_finish")) {
		st->have_result = 1;
		r->steps++;
		r->tokens_in += jint(tokens, "input") + jint(cache, "read") +
				jint(cache, "write");
		r->tokens_out +=
		    jint(tokens, "output") + jint(tokens, "reasoning");
		if (json_is_number(json_object_get(part, "cost"))) {
			st->cost +=
			    json_number_value(json_object_get(part, "cost"));
			st->cost_seen = 1;
		}
	} else if (streq(type, "error")) {
		st->have_result = 1;
		st->failed = 1;
		s = json_get_str(data, "message");
		if (!s)
			s = json_get_str(err, "name");
		buf_reset(&st->error);
		buf_adds(&st->error, s ? s : "the agent reported an error");
		show_line(st, "[error] %s", st->error.ptr);
		r->http_status = (int)jint(data, "statusCode");
		if (!r->http_status)
			r->http_status = agent__status_in_text(s);
	}
}

/* Sets the last assistant text seen to s (when it has some), shown. */
static void
set_last(struct cli_stream *st, const char *s)
{
	if (!s || !*s)
		return;
	buf_reset(&st->last);
	buf_adds(&st->last, s);
	show_para(st, s);
}

/*
 * The HTTP status an error text starts with, as the OpenAI SDKs put it
 * ("401 Incorrect API key provided"); 0 when none.
 */
static int
lead_status(const char *s)
{
	int v;

	if (!s || !isdigit((unsigned char)s[0]) ||
	    !isdigit((unsigned char)s[1]) || !isdigit((unsigned char)s[2]) ||
	    s[3] != ' ')
		return 0;
	v = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
	return v >= 400 && v <= 599 ? v : 0;
}

/* Records a reported failure: its text, shown, and the status it names. */
static void
set_error(struct cli_stream *st, const char *s, int status)
{
	char *text = xstrdup(s && *s ? s : "the agent reported an error");

	/* s may be st->error itself */
	st->failed = 1;
	buf_reset(&st->error);
	buf_adds(&st->error, text);
	free(text);
	show_line(st, "[error] %s", st->error.ptr);
	if (!status)
		status = agent__status_in_text(st->error.ptr);
	if (!status)
		status = lead_status(st->error.ptr);
	st->r->http_status = status;
}

/*
 * pi --mode json: a session header, then agent events. Each assistant
 * message_end holds the message: its text and toolCall blocks, usage
 * with cost, and a stopReason; "error" (with errorMessage) is a failed
 * model call, and pi exits 0 all the same. A retry (auto_retry_start)
 * runs the turn again, so the last assistant message decides; agent_end
 * ends a run.
 */
static void
pi_line(struct cli_stream *st, json_t *j)
{
	struct agent_result *r = st->r;
	const char *type = json_get_str(j, "type"), *stop;
	const json_t *m = json_object_get(j, "message");
	const json_t *usage = json_object_get(m, "usage");
	const json_t *cost =
	    json_object_get(json_object_get(usage, "cost"), "total");
	const json_t *content = json_object_get(m, "content"), *block;
	struct buf text = BUF_INIT;
	size_t i;

	if (streq(type, "session")) {
		note_session(r, json_get_str(j, "id"));
	} else if (streq(type, "message_end") &&
		   streq(json_get_str(m, "role"), "assistant")) {
		r->steps++;
		r->tokens_in += jint(usage, "input") +
				jint(usage, "cacheRead") +
				jint(usage, "cacheWrite");
		r->tokens_out += jint(usage, "output");
		if (json_is_number(cost)) {
			st->cost += json_number_value(cost);
			st->cost_seen = 1;
		}
		for (i = 0; i < json_array_size(content); i++) {
			block = json_array_get(content, i);
			if (streq(json_get_str(block, "type"), "toolCall"))
				show_tool(st, json_get_str(block, "name"),
					  json_object_get(block, "arguments"));
			else if (streq(json_get_str(block, "type"), "text") &&
				 json_get_str(block, "text"))
				buf_addf(&text, "%s%s", text.len ? "\n" : "",
					 json_get_str(block, "text"));
		}
		set_last(st, text.ptr);
		stop = json_get_str(m, "stopReason");
		if (streq(stop, "error") || streq(stop, "aborted")) {
			set_error(st, json_get_str(m, "errorMessage"), 0);
		} else {
			st->failed = 0;
			r->http_status = 0;
		}
	} else if (streq(type, "auto_retry_start")) {
		show_line(st, "[retry] %s",
			  json_get_str(j, "errorMessage")
			      ? json_get_str(j, "errorMessage")
			      : "retrying");
	} else if (streq(type, "agent_end")) {
		st->have_result = 1;
	}
	buf_release(&text);
}

/*
 * copilot --output-format json: session, turn and tool events. An
 * assistant.message holds a turn's whole text and its tool requests,
 * session.error a failure (with its HTTP status), and the last line,
 * result, the session id and the exit code. It reports no tokens.
 */
static void
copilot_line(struct cli_stream *st, json_t *j)
{
	const char *type = json_get_str(j, "type");
	const json_t *data = json_object_get(j, "data");
	const json_t *reqs = json_object_get(data, "toolRequests"), *req;
	size_t i;

	if (streq(type, "assistant.message")) {
		st->r->steps++;
		set_last(st, json_get_str(data, "content"));
		for (i = 0; i < json_array_size(reqs); i++) {
			req = json_array_get(reqs, i);
			show_tool(st, json_get_str(req, "name"),
				  json_object_get(req, "arguments"));
		}
	} else if (streq(type, "session.error")) {
		set_error(st, json_get_str(data, "message"),
			  (int)jint(data, "statusCode"));
	} else if (streq(type, "result")) {
		st->have_result = 1;
		note_session(st->r, json_get_str(j, "sessionId"));
		if (jint(j, "exitCode") && !st->failed)
			set_error(st, "copilot reported a failed session", 0);
	}
}

/*
 * cline --json: hook_event lines (taskId names the session), agent_event
 * lines (content_start and content_end of text and tool calls, usage,
 * error, with an errorClass: "auth" is one) and last a run_result: the
 * answer, the usage, the cost and a finishReason, "completed" or the
 * failure (its text is the error).
 */
static void
cline_line(struct cli_stream *st, json_t *j)
{
	struct agent_result *r = st->r;
	const char *type = json_get_str(j, "type"), *s, *why;
	const json_t *ev = json_object_get(j, "event");
	const char *etype = json_get_str(ev, "type");
	const char *ctype = json_get_str(ev, "contentType");
	const json_t *usage = json_object_get(j, "aggregateUsage");
	const json_t *cost;

	if (streq(type, "hook_event")) {
		note_session(r, json_get_str(j, "taskId"));
	} else if (streq(type, "agent_event")) {
		if (streq(etype, "content_end") && streq(ctype, "text")) {
			set_last(st, json_get_str(ev, "text"));
		} else if (streq(etype, "content_start") &&
			   streq(ctype, "tool")) {
			show_tool(st, json_get_str(ev, "toolName"),
				  json_object_get(ev, "input"));
		} else if (streq(etype, "error")) {
			s = json_get_str(json_object_get(ev, "error"),
					 "message");
			buf_reset(&st->error);
			buf_adds(&st->error, s ? s : "error");
			show_line(st, "[error] %s", st->error.ptr);
			/* its own class: "Incorrect API key provided" */
			if (streq(json_get_str(ev, "errorClass"), "auth"))
				r->failure = AGENT_FAIL_AUTH;
		}
	} else if (streq(type, "run_result")) {
		st->have_result = 1;
		if (!usage)
			usage = json_object_get(j, "usage");
		r->tokens_in = jint(usage, "inputTokens");
		r->tokens_out = jint(usage, "outputTokens");
		cost = json_object_get(usage, "totalCost");
		if (json_is_number(cost)) {
			st->cost = json_number_value(cost);
			st->cost_seen = 1;
		}
		r->steps = (int)jint(j, "iterations");
		s = json_get_str(j, "text");
		why = json_get_str(j, "finishReason");
		if (streq(why, "completed")) {
			r->failure = AGENT_FAIL_NONE;
			if (s)
				set_text(&r->text, s, strlen(s));
		} else {
			set_error(st,
				  st->error.len ? st->error.ptr
				  : s		? s
				  : why		? why
						: NULL,
				  0);
		}
	}
}

/*
 * cn -p --format json: one object at the end, {"response": TEXT,
 * "status": "success"} or {"status": "error", "message": ...}. An answer
 * that is itself JSON is printed as it is: an object with no status is
 * the answer. No tokens, no session id.
 */
static void
continue_line(struct cli_stream *st, json_t *j)
{
	const char *status = json_get_str(j, "status");
	const char *s = json_get_str(j, "response");
	char *dump;

	st->have_result = 1;
	if (!status) {
		dump = json_dumps(j, JSON_COMPACT);
		set_last(st, dump);
		free(dump);
	} else if (streq(status, "success")) {
		if (s)
			set_text(&st->r->text, s, strlen(s));
		show_para(st, s);
	} else {
		set_error(st, json_get_str(j, "message"), 0);
	}
}

/* aider: plain text; the answer is the whole output (its tail). */
static void
plain_line(struct cli_stream *st, const char *s, size_t len)
{
	size_t i;

	buf_add_tail(&st->turn, s, len);
	buf_add_tail(&st->turn, "\n", 1);
	for (i = 0; i < len && !st->have_result; i++)
		if (!isspace((unsigned char)s[i]))
			st->have_result = 1;
}

static void
parse_line(struct cli_stream *st, const char *s, size_t len)
{
	json_t *j;

	if (!st->cp->line) {
		plain_line(st, s, len);
		return;
	}
	while (len && isspace((unsigned char)*s)) {
		s++;
		len--;
	}
	if (!len || *s != '{')
		return;
	j = json_loadb(s, len, 0, NULL);
	if (json_is_object(j))
		st->cp->line(st, j);
	json_decref(j);
}

static void
stream_init(struct cli_stream *st, const struct cli_preset *cp,
	    struct agent_result *r)
{
	memset(st, 0, sizeof(*st));
	st->cp = cp;
	st->r = r;
	buf_init(&st->turn, CLI_TEXT_MAX);
	buf_init(&st->last, CLI_TEXT_MAX);
	buf_init(&st->error, CLI_MESSAGE_MAX * 4);
	buf_init(&st->line, CLI_LINE_MAX);
}

static void
stream_release(struct cli_stream *st)
{
	buf_release(&st->turn);
	buf_release(&st->last);
	buf_release(&st->error);
	buf_release(&st->line);
}

/* Feeds len bytes of output; complete lines are parsed as they end. */
static void
stream_feed(struct cli_stream *st, const char *p, size_t len)
{
	const char *end = p + len, *nl;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!st->skipping &&
		    buf_add(&st->line, p, (size_t)((nl ? nl : end) - p)) < 0)
			st->skipping = 1;
		if (!nl)
			break;
		if (!st->skipping)
			parse_line(st, st->line.ptr, st->line.len);
		buf_reset(&st->line);
		st->skipping = 0;
		p = nl + 1;
	}
}

/*
 * The end of the stream: the last line, then the answer (the result's
 * text, else the last turn's, else the last assistant text seen), the
 * reported error as the message, and the reported cost.
 */
static void
stream_finish(struct cli_stream *st)
{
	struct agent_result *r = st->r;

	if (st->line.len && !st->skipping)
		parse_line(st, st->line.ptr, st->line.len);
	buf_reset(&st->line);
	if (st->failed) {
		if (!r->message.len)
			set_message(r, st->error.len
					   ? st->error.ptr
					   : "the agent reported an error");
	} else if (!r->text.len) {
		if (st->turn.len)
			set_text(&r->text, st->turn.ptr, st->turn.len);
		else
			set_text(&r->text, st->last.ptr, st->last.len);
	}
	/* no result at all (killed, crashed): say what it last reported */
	if (!st->have_result && !r->message.len && st->error.len)
		set_message(r, st->error.ptr);
	if (st->cost_seen) {
		r->cost_usd = st->cost;
		r->cost_known = 1;
	}
}

/*
 * Reads the stdout file from offset on (spawn appends: what an earlier
 * call left there is not this call's) through the preset's parser.
 */
static int
stream_read_file(struct cli_stream *st, const char *path, off_t offset,
		 struct err *e)
{
	char chunk[65536];
	struct err oe = ERR_INIT;
	ssize_t n;
	int fd, rc = 0;

	/* In the run folder: a link the agent put there is not followed. */
	fd = fs_open_nofollow(path, O_RDONLY, 0, &oe);
	if (fd < 0) {
		if (fd != -ENOENT && e)
			*e = oe;
		return fd == -ENOENT ? 0 : fd;
	}
	if (offset > 0 && lseek(fd, offset, SEEK_SET) < 0) {
		rc = err_set(e, -errno, "cannot seek in '%s': %s", path,
			     strerror(errno));
		close(fd);
		return rc;
	}
	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = err_set(e, -errno, "cannot read '%s': %s", path,
				     strerror(errno));
			break;
		}
		if (!n)
			break;
		stream_feed(st, chunk, (size_t)n);
	}
	close(fd);
	return rc;
}

/*
 * cn prints a failure on stderr, as its last line: {"status": "error",
 * "message": "401 Incorrect API key provided"}, and exits 1.
 */
static void
continue_exited(struct agent_result *r)
{
	const char *end = r->err_tail.ptr + r->err_tail.len, *line;
	const char *msg;
	json_t *j;

	if (r->outcome != AGENT_EXIT || r->message.len)
		return;
	while (end > r->err_tail.ptr && isspace((unsigned char)end[-1]))
		end--;
	line = end;
	while (line > r->err_tail.ptr && line[-1] != '\n')
		line--;
	j = json_loadb(line, (size_t)(end - line), 0, NULL);
	msg = json_get_str(j, "message");
	if (streq(json_get_str(j, "status"), "error") && msg) {
		set_message(r, msg);
		if (!r->http_status)
			r->http_status = agent__status_in_text(msg);
		if (!r->http_status)
			r->http_status = lead_status(msg);
	}
	json_decref(j);
}

/*
 * Gemini's exit codes (research section 3): 41 is an auth configuration
 * error, 53 the turn limit, and an API error exits with its HTTP status
 * mod 256 (401 → 145, 429 → 173, 500 → 244).
 */
static void
gemini_exited(struct agent_result *r)
{
	if (r->outcome != AGENT_EXIT || r->failure != AGENT_FAIL_NONE)
		return;
	if (r->status == 41) {
		r->failure = AGENT_FAIL_AUTH;
		if (!r->message.len)
			set_message(r, "gemini refused its auth configuration "
				       "(exit 41)");
	} else if (r->status == 53) {
		r->failure = AGENT_FAIL_LIMIT;
	} else if (!r->http_status && r->status >= 400 - 256 &&
		   r->status <= 599 - 256) {
		r->http_status = r->status + 256;
	}
}

/* ---- the table --------------------------------------------------------- */

static const char *const claude_flags[] = {
	"-p",
	"--output-format",
	"stream-json",
	"--verbose",
	"--dangerously-skip-permissions",
	NULL,
};
static const char *const claude_env[] = {
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	"DISABLE_AUTOUPDATER=1",
	"DISABLE_TELEMETRY=1",
	"DISABLE_ERROR_REPORTING=1",
	NULL,
};
static const char *const codex_flags[] = {
	"exec",
	"--json",
	"--skip-git-repo-check",
	"-s",
	"workspace-write",
	"-c",
	"approval_policy=\"never\"",
	"-c",
	"analytics.enabled=false",
	"--disable",
	"plugins",
	"--disable",
	"remote_plugin",
	"--disable",
	"apps",
	NULL,
};
static const char *const gemini_flags[] = {
	"--output-format", "stream-json", "--yolo", "--skip-trust", NULL,
};
static const char *const gemini_env[] = {
	"GEMINI_CLI_NO_RELAUNCH=true",
	"GEMINI_CLI_TRUST_WORKSPACE=true",
	NULL,
};
static const char *const qwen_flags[] = {
	"--output-format", "stream-json", "--yolo",
	"--auth-type",	   "openai",	  NULL,
};
static const char *const opencode_flags[] = {
	"run",
	"--format",
	"json",
	NULL,
};
static const char *const opencode_env[] = {
	"OPENCODE_DISABLE_AUTOUPDATE=1",   "OPENCODE_DISABLE_MODELS_FETCH=1",
	"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
	"OPENCODE_DISABLE_SHARE=1",	   NULL,
};
static const char *const aider_flags[] = {
	"--yes-always",	       "--no-auto-commits",	   "--no-check-update",
	"--analytics-disable", "--no-show-model-warnings", "--no-pretty",
	"--no-stream",	       "--no-gitignore",	   NULL,
};
static const char *const kilo_env[] = {
	"KILO_DISABLE_AUTOUPDATE=1",
	"KILO_DISABLE_MODELS_FETCH=1",
	"KILO_DISABLE_LSP_DOWNLOAD=1",
	"KILO_DISABLE_DEFAULT_PLUGINS=1",
	"KILO_DISABLE_SHARE=1",
	"KILO_DISABLE_SESSION_INGEST=1",
	NULL,
};
static const char *const copilot_flags[] = {
	"--output-format",
	"json",
	"--allow-all-tools",
	"--no-ask-user",
	"--no-auto-update",
	"--disable-client-telemetry",
	NULL,
};
static const char *const pi_flags[] = { "-p", "--mode", "json", NULL };
static const char *const pi_env[] = { "PI_OFFLINE=1", "PI_TELEMETRY=0", NULL };
static const char *const cline_flags[] = { "--json", "--auto-approve", "true",
					   NULL };
static const char *const continue_flags[] = { "-p", "--format", "json",
					      "--auto", NULL };
static const char *const continue_env[] = { "CONTINUE_CLI_ENABLE_TELEMETRY=0",
					    NULL };
static const char *const amp_flags[] = { "--stream-json", NULL };
static const char *const auggie_flags[] = { "--print", "--quiet", NULL };
static const char *const crush_flags[] = { "run", "--quiet", "--yolo", NULL };
static const char *const no_env[] = { NULL };

static const struct cli_preset claude_preset = {
	.adapter = &agent_claude_adapter,
	.resume_opt = "--resume=",
	.argv = claude_flags,
	.env = claude_env,
	.model_flag = "--model",
	.flags = CLI_F_CACHE_TOKENS,
	.setup = claude_setup,
	.line = claude_line,
};

static const struct cli_preset codex_preset = {
	.adapter = &agent_codex_adapter,
	.resume_sub = "resume",
	.argv = codex_flags,
	.env = no_env,
	.model_flag = "-m",
	.setup = codex_setup,
	.line = codex_line,
};

static const struct cli_preset gemini_preset = {
	.adapter = &agent_gemini_adapter,
	.resume_opt = "--resume=",
	.argv = gemini_flags,
	.env = gemini_env,
	.model_flag = "--model",
	.prompt_opt = "--prompt=",
	.setup = gemini_setup,
	.line = gemini_line,
	.exited = gemini_exited,
};

static const struct cli_preset qwen_preset = {
	.adapter = &agent_qwen_adapter,
	.resume_opt = "--resume=",
	.argv = qwen_flags,
	.env = no_env,
	.model_flag = "--model",
	.prompt_opt = "--prompt=",
	.flags = CLI_F_API_ERROR_TEXT,
	.setup = qwen_setup,
	.line = claude_line,
};

static const struct cli_preset opencode_preset = {
	.adapter = &agent_opencode_adapter,
	.resume_opt = "--session=",
	.argv = opencode_flags,
	.env = opencode_env,
	.setup = opencode_setup,
	.line = opencode_line,
};

static const struct cli_preset aider_preset = {
	.adapter = &agent_aider_adapter,
	.argv = aider_flags,
	.env = no_env,
	.prompt_opt = "--message=",
	.setup = aider_setup,
};

static const struct cli_preset copilot_preset = {
	.adapter = &agent_copilot_adapter,
	.argv = copilot_flags,
	.env = no_env,
	.model_flag = "--model",
	.prompt_opt = "--prompt=",
	.setup = copilot_setup,
	.line = copilot_line,
};

static const struct cli_preset pi_preset = {
	.adapter = &agent_pi_adapter,
	.argv = pi_flags,
	.env = pi_env,
	.model_flag = "--model",
	.flags = CLI_F_BARE_PROMPT,
	.setup = pi_setup,
	.line = pi_line,
};

static const struct cli_preset kilo_preset = {
	.adapter = &agent_kilo_adapter,
	.argv = opencode_flags,
	.env = kilo_env,
	.setup = kilo_setup,
	.line = opencode_line,
};

static const struct cli_preset cline_preset = {
	.adapter = &agent_cline_adapter,
	.argv = cline_flags,
	.env = no_env,
	.model_flag = "-m",
	.setup = cline_setup,
	.line = cline_line,
};

static const struct cli_preset continue_preset = {
	.adapter = &agent_continue_adapter,
	.argv = continue_flags,
	.env = continue_env,
	.setup = continue_setup,
	.line = continue_line,
	.exited = continue_exited,
};

static const struct cli_preset amp_preset = {
	.adapter = &agent_amp_adapter,
	.argv = amp_flags,
	.env = no_env,
	.prompt_opt = "--execute=",
	.setup = amp_setup,
	.line = claude_line,
};

static const struct cli_preset auggie_preset = {
	.adapter = &agent_auggie_adapter,
	.argv = auggie_flags,
	.env = no_env,
	.model_flag = "--model",
	.prompt_opt = "--instruction=",
	.setup = auggie_setup,
};

static const struct cli_preset crush_preset = {
	.adapter = &agent_crush_adapter,
	.argv = crush_flags,
	.env = no_env,
	.model_flag = "--model",
	.setup = crush_setup,
};

static const struct cli_preset *const presets[] = {
	&claude_preset,	  &codex_preset, &gemini_preset,   &qwen_preset,
	&opencode_preset, &aider_preset, &copilot_preset,  &pi_preset,
	&kilo_preset,	  &cline_preset, &continue_preset, &amp_preset,
	&auggie_preset,	  &crush_preset,
};

static const struct cli_preset *
preset_for(const char *type)
{
	size_t i;

	for (i = 0; type && i < ARRAY_SIZE(presets); i++)
		if (!strcmp(presets[i]->adapter->info.type, type))
			return presets[i];
	return NULL;
}

/* ---- watching a stream (agent_watch) ---------------------------------- */

/* A stream read for what it shows, not for its result. */
struct cli_view {
	struct cli_stream st;
	struct agent_result r; /* filled as a side effect; never used */
};

struct cli_view *
cli__view_new(const char *type)
{
	const struct cli_preset *cp = preset_for(type);
	struct cli_view *v;

	if (!cp || !cp->line)
		return NULL;
	v = xcalloc(1, sizeof(*v));
	v->r = (struct agent_result)AGENT_RESULT_INIT;
	stream_init(&v->st, cp, &v->r);
	return v;
}

size_t
cli__view_feed(struct cli_view *v, const char *p, size_t len, struct buf *out)
{
	size_t before = out->len;

	v->st.show = out;
	stream_feed(&v->st, p, len);
	v->st.show = NULL;
	return out->len - before;
}

size_t
cli__view_finish(struct cli_view *v, struct buf *out)
{
	size_t before = out->len;

	v->st.show = out;
	if (v->st.line.len && !v->st.skipping)
		parse_line(&v->st, v->st.line.ptr, v->st.line.len);
	buf_reset(&v->st.line);
	v->st.skipping = 0;
	show_close(&v->st);
	v->st.show = NULL;
	return out->len - before;
}

const char *
cli__view_session(const struct cli_view *v)
{
	return v->r.session_id;
}

void
cli__view_free(struct cli_view *v)
{
	if (!v)
		return;
	stream_release(&v->st);
	agent_result_release(&v->r);
	free(v);
}

/* ---- the runner -------------------------------------------------------- */

int
cli__build(const struct agent_request *req, const char *program,
	   struct strvec *argv, struct strvec *env, struct err *e)
{
	const struct config_provider *p = req->provider;
	const struct cli_preset *cp = preset_for(p->type);
	struct cli_build b = { req, p, argv, env, NULL, 0 };
	const char *resume = req->resume_session;
	size_t i;
	int rc;

	if (!cp)
		return err_set(e, BATON_EINVAL,
			       "provider '%s': '%s' is not a CLI type", p->name,
			       p->type);
	/*
	 * The id came from an agent's output: checked again here, where it
	 * goes into argv, whatever the caller did (agent_session_id_ok).
	 */
	if (resume && !agent_session_id_ok(resume))
		return err_set(e, BATON_EINVAL,
			       "provider '%s': refusing to resume a session "
			       "whose id is not a plain token",
			       p->name);
	if (resume && !cp->resume_opt && !cp->resume_sub)
		return err_set(e, BATON_EINVAL,
			       "provider '%s': type '%s' cannot resume a "
			       "session",
			       p->name, p->type);
	b.key = p->api_key_env ? getenv(p->api_key_env) : NULL;
	if (b.key && !*b.key)
		b.key = NULL;
	b.isolated = p->isolated && req->home;
	if (b.isolated) {
		rc = fs_mkdir_p(req->home, 0700, e);
		if (rc)
			return rc;
	}
	strvec_push(argv, program);
	for (i = 1; i < p->command.nr; i++)
		strvec_push(argv, p->command.v[i]);
	strvec_pushv(argv, cp->argv);
	strvec_pushv(env, cp->env);
	rc = cp->setup(&b, e);
	if (rc)
		return err_prefix(e, "provider '%s' (%s)", p->name, p->type);
	if (cp->model_flag && p->model)
		strvec_pushl(argv, cp->model_flag, p->model, NULL);
	if (resume && cp->resume_opt)
		strvec_pushf(argv, "%s%s", cp->resume_opt, resume);
	strvec_pushv(argv, p->args.v);
	if (resume && cp->resume_sub)
		strvec_pushl(argv, cp->resume_sub, "--", resume,
			     req->prompt ? req->prompt : "", NULL);
	else if (cp->prompt_opt)
		strvec_pushf(argv, "%s%s", cp->prompt_opt,
			     req->prompt ? req->prompt : "");
	else if (cp->flags & CLI_F_BARE_PROMPT)
		strvec_pushf(argv, "%s%s",
			     req->prompt && (req->prompt[0] == '-' ||
					     req->prompt[0] == '@')
				 ? "\n"
				 : "",
			     req->prompt ? req->prompt : "");
	else
		strvec_pushl(argv, "--", req->prompt ? req->prompt : "", NULL);
	strvec_pushv(env, p->env.v);
	if (req->env)
		strvec_pushv(env, req->env->v);
	return 0;
}

/*
 * What each CLI keeps of a user's own login and settings, bound into the
 * sandbox when the provider is not isolated (its $HOME there is an empty
 * tmpfs): the folder named by var when the environment sets it, else
 * $HOME/home_rel, then "/sub" when sub is set. The CLIs refresh tokens
 * and keep sessions there, so it is read-write unless ro.
 */
static const struct cli_login {
	const char *type;
	const char *var;
	const char *home_rel;
	const char *sub;
	int ro;
} logins[] = {
	{ "claude-code", "CLAUDE_CONFIG_DIR", ".claude", NULL, 0 },
	{ "claude-code", NULL, ".claude.json", NULL, 0 },
	{ "codex", "CODEX_HOME", ".codex", NULL, 0 },
	{ "gemini", NULL, ".gemini", NULL, 0 },
	{ "qwen", NULL, ".qwen", NULL, 0 },
	{ "opencode", "XDG_CONFIG_HOME", ".config", "opencode", 0 },
	{ "opencode", "XDG_DATA_HOME", ".local/share", "opencode", 0 },
	{ "opencode", "XDG_STATE_HOME", ".local/state", "opencode", 0 },
	{ "opencode", "XDG_CACHE_HOME", ".cache", "opencode", 0 },
	{ "aider", NULL, ".aider", NULL, 0 },
	{ "aider", NULL, ".aider.conf.yml", NULL, 1 },
	{ "aider", NULL, ".aider.model.settings.yml", NULL, 1 },
	{ "aider", NULL, ".aider.model.metadata.json", NULL, 1 },
	{ "copilot", "COPILOT_HOME", ".copilot", NULL, 0 },
	{ "pi", "PI_CODING_AGENT_DIR", ".pi/agent", NULL, 0 },
	{ "kilo", "XDG_CONFIG_HOME", ".config", "kilo", 0 },
	{ "kilo", "XDG_DATA_HOME", ".local/share", "kilo", 0 },
	{ "kilo", "XDG_STATE_HOME", ".local/state", "kilo", 0 },
	{ "kilo", "XDG_CACHE_HOME", ".cache", "kilo", 0 },
	{ "cline", NULL, ".cline", NULL, 0 },
	{ "continue", "CONTINUE_GLOBAL_DIR", ".continue", NULL, 0 },
	{ "amp", NULL, ".config/amp", NULL, 0 },
	{ "amp", NULL, ".local/share/amp", NULL, 0 },
	{ "auggie", NULL, ".augment", NULL, 0 },
	{ "crush", NULL, ".config/crush", NULL, 0 },
	{ "crush", NULL, ".local/share/crush", NULL, 0 },
};

/* The value of name in env ("K=V" entries, the last wins), else getenv. */
static const char *
env_get(const struct strvec *env, const char *name)
{
	size_t i, n = strlen(name);
	const char *v = NULL;

	for (i = 0; i < env->nr; i++)
		if (!strncmp(env->v[i], name, n) && env->v[i][n] == '=')
			v = env->v[i] + n + 1;
	return v ? v : getenv(name);
}

/*
 * The sandbox of a CLI call: req's, plus the program's install when it
 * lies under $HOME, plus (not isolated) the CLI's own login, so that a
 * user's real login keeps working inside. sb is filled; release it.
 */
static void
cli_sandbox(const struct agent_request *req, const char *program,
	    const struct strvec *env, struct sandbox *sb)
{
	const struct config_provider *p = req->provider;
	const char *home = getenv("HOME"), *dir;
	char *path;
	size_t i;

	sandbox_copy(sb, req->sandbox);
	sandbox_program(sb, program);
	if ((p->isolated && req->home) || !home || home[0] != '/')
		return;
	for (i = 0; i < ARRAY_SIZE(logins); i++) {
		if (strcmp(logins[i].type, p->type))
			continue;
		dir = logins[i].var ? env_get(env, logins[i].var) : NULL;
		path = dir && dir[0] == '/' ?
			       xstrdup(dir) :
			       xasprintf("%s/%s", home, logins[i].home_rel);
		if (logins[i].sub) {
			char *full = xasprintf("%s/%s", path, logins[i].sub);

			free(path);
			path = full;
		}
		if (logins[i].ro)
			sandbox_ro(sb, path);
		else
			sandbox_rw(sb, path);
		free(path);
	}
}

static int
is_executable(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode) && !access(path, X_OK);
}

const char *
agent_program(const struct config_provider *p)
{
	const struct agent_info *info = agent_info(p->type);

	if (p->command.nr)
		return p->command.v[0];
	return info ? info->program : NULL;
}

char *
agent_which(const char *program)
{
	const char *path, *dir, *end;
	struct buf b = BUF_INIT;
	char *found = NULL;

	if (!program || !*program)
		return NULL;
	if (strchr(program, '/')) {
		/* a relative path is the user's: taken as is */
		if (program[0] != '/' || is_executable(program))
			return xstrdup(program);
		return NULL;
	}
	path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (dir = path;; dir = end + 1) {
		end = strchrnul(dir, ':');
		buf_reset(&b);
		if (end == dir)
			buf_addch(&b, '.');
		else
			buf_add(&b, dir, (size_t)(end - dir));
		buf_addf(&b, "/%s", program);
		if (is_executable(b.ptr)) {
			found = b.ptr[0] == '/' ? buf_detach(&b, NULL)
						: realpath(b.ptr, NULL);
			if (found)
				break;
		}
		if (!*end)
			break;
	}
	buf_release(&b);
	return found;
}

/* hint with every "NAME" replaced by the provider's name. */
static void
add_hint(struct buf *out, const char *hint, const char *name)
{
	const char *p;

	while ((p = strstr(hint, "NAME"))) {
		buf_add(out, hint, (size_t)(p - hint));
		buf_adds(out, name);
		hint = p + 4;
	}
	buf_adds(out, hint);
}

static void
set_outcome(struct agent_result *r, const struct spawn_result *res)
{
	r->status = res->status;
	r->signal = res->signal;
	r->out_bytes = res->out_bytes;
	r->duration_ms = res->duration_ms;
	if (res->stopped)
		r->outcome = AGENT_STOPPED;
	else if (res->timed_out)
		r->outcome = AGENT_TIMEOUT;
	else if (res->signal)
		r->outcome = AGENT_CRASHED;
	else
		r->outcome = res->status ? AGENT_EXIT : AGENT_OK;
}

/*
 * The one runner (see the top of the file). A program that is not
 * installed is a result (failure MISSING), not an error; errors are
 * what baton could not do: write the home, start the process, read the
 * output back.
 */
static int
cli_run(const struct agent_request *req, struct agent_result *r, struct err *e)
{
	const struct config_provider *p = req->provider;
	const struct cli_preset *cp = preset_for(p->type);
	const struct agent_info *info;
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result res = SPAWN_RESULT_INIT;
	struct strvec argv = STRVEC_INIT;
	struct sandbox sb = SANDBOX_INIT;
	struct cli_stream st;
	const char *prog;
	char *path = NULL;
	long long timeout, offset;
	int rc;

	if (!cp)
		return err_set(e, BATON_EINVAL,
			       "provider '%s': '%s' is not a CLI type", p->name,
			       p->type);
	info = &cp->adapter->info;
	stream_init(&st, cp, r);
	prog = agent_program(p);
	path = agent_which(prog);
	if (!path) {
		r->outcome = AGENT_EXIT;
		r->status = 127;
		r->failure = AGENT_FAIL_MISSING;
		buf_reset(&r->message);
		buf_addf(
		    &r->message,
		    "provider '%s' (%s): '%s' is not installed or not on "
		    "PATH; install it with `%s` or set providers.%s.command",
		    p->name, p->type, prog, info->install_hint, p->name);
		rc = 0;
		goto out;
	}
	rc = cli__build(req, path, &argv, &o.env, e);
	if (rc)
		goto out;
	cli_sandbox(req, path, &o.env, &sb);
	sandbox_wrap(&sb, &argv, &o.argv);
	o.cwd = req->cwd;
	o.out_path = req->out_path;
	o.err_path = req->err_path;
	o.tail_max = BUF_MAX_AGENT_TAIL;
	timeout = (long long)p->timeout_seconds * 1000;
	o.timeout_ms = timeout > INT_MAX ? INT_MAX : (int)timeout;
	o.wake_fd = req->wake_fd;
	o.tick_ms = req->tick_ms;
	o.on_event = req->on_event;
	o.arg = req->arg;
	offset = req->out_path ? fs_size(req->out_path) : 0;
	if (offset < 0)
		offset = 0;
	rc = spawn_run(&o, &res, e);
	if (rc < 0) {
		r->outcome = AGENT_EXIT;
		r->status = 127;
		r->failure = AGENT_FAIL_CRASH;
		set_message(r, e ? e->msg : "cannot start the agent");
		goto out;
	}
	if (!res.signal && !res.timed_out && !res.stopped)
		res.signal = sandbox_signal(&sb, res.status);
	set_outcome(r, &res);
	buf_release(&r->err_tail);
	r->err_tail = res.err;
	res.err = (struct buf)BUF_INIT;

	if (req->out_path)
		rc = stream_read_file(&st, req->out_path, (off_t)offset, e);
	else
		stream_feed(&st, res.out.ptr, res.out.len);
	if (rc)
		goto out;
	stream_finish(&st);
	if (cp->exited)
		cp->exited(r);
	if (r->outcome == AGENT_OK && !st.have_result &&
	    r->failure == AGENT_FAIL_NONE) {
		r->failure = AGENT_FAIL_BAD_OUTPUT;
		if (!r->message.len)
			buf_addf(&r->message,
				 "provider '%s' (%s): '%s' exited 0 without a "
				 "result in its output",
				 p->name, p->type, prog);
	}
	agent__price(p, r);
	agent_classify(r);
	if (r->failure == AGENT_FAIL_AUTH && info->auth_hint) {
		buf_adds(&r->message, r->message.len ? "; " : "");
		add_hint(&r->message, info->auth_hint, p->name);
	}
out:
	stream_release(&st);
	sandbox_release(&sb);
	free(path);
	strvec_clear(&argv);
	spawn_result_release(&res);
	spawn_opts_release(&o);
	return rc;
}

/*
 * Parses a whole captured stream (agent_parse_stream). Reported failures
 * (LIMIT, an HTTP status, the message) are filled in; the class of the
 * others is left to agent_classify, which needs the exit status.
 */
static void
cli_parse(const struct cli_preset *cp, const char *out, size_t len,
	  struct agent_result *r)
{
	struct cli_stream st;

	stream_init(&st, cp, r);
	stream_feed(&st, out, len);
	stream_finish(&st);
	stream_release(&st);
}

static void
claude_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&claude_preset, out, len, r);
}

static void
codex_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&codex_preset, out, len, r);
}

static void
gemini_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&gemini_preset, out, len, r);
}

static void
qwen_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&qwen_preset, out, len, r);
}

static void
opencode_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&opencode_preset, out, len, r);
}

static void
aider_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&aider_preset, out, len, r);
}

const struct agent_adapter agent_claude_adapter = {
	.info = {
		.type = "claude-code",
		.program = "claude",
		.install_hint = "npm install -g @anthropic-ai/claude-code",
		.auth_hint = "set ANTHROPIC_API_KEY (providers.NAME.api_key_env) "
			     "or log in with `claude` once",
		.is_cli = 1,
		.resumes = 1,
	},
	.run = cli_run,
	.parse = claude_parse,
};

const struct agent_adapter agent_codex_adapter = {
	.info = {
		.type = "codex",
		.program = "codex",
		.install_hint = "npm install -g @openai/codex",
		.auth_hint = "run `codex login` or set "
			     "providers.NAME.api_key_env",
		.is_cli = 1,
		.resumes = 1,
	},
	.run = cli_run,
	.parse = codex_parse,
};

const struct agent_adapter agent_gemini_adapter = {
	.info = {
		.type = "gemini",
		.program = "gemini",
		.install_hint = "npm install -g @google/gemini-cli",
		.auth_hint = "set GEMINI_API_KEY (providers.NAME.api_key_env) "
			     "or log in with `gemini` once",
		.is_cli = 1,
		.resumes = 1,
	},
	.run = cli_run,
	.parse = gemini_parse,
};

const struct agent_adapter agent_qwen_adapter = {
	.info = {
		.type = "qwen",
		.program = "qwen",
		.install_hint = "npm install -g @qwen-code/qwen-code",
		.auth_hint = "set OPENAI_API_KEY (providers.NAME.api_key_env)",
		.is_cli = 1,
		.resumes = 1,
	},
	.run = cli_run,
	.parse = qwen_parse,
};

const struct agent_adapter agent_opencode_adapter = {
	.info = {
		.type = "opencode",
		.program = "opencode",
		.install_hint = "npm install -g opencode-ai",
		.auth_hint = "run `opencode auth login` or set "
			     "providers.NAME.api_key_env",
		.is_cli = 1,
		.resumes = 1,
	},
	.run = cli_run,
	.parse = opencode_parse,
};

const struct agent_adapter agent_aider_adapter = {
	.info = {
		.type = "aider",
		.program = "aider",
		.install_hint = "pipx install aider-chat",
		.auth_hint = "set OPENAI_API_KEY (providers.NAME.api_key_env)",
		.is_cli = 1,
	},
	.run = cli_run,
	.parse = aider_parse,
};

static void
copilot_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&copilot_preset, out, len, r);
}

static void
pi_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&pi_preset, out, len, r);
}

static void
kilo_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&kilo_preset, out, len, r);
}

static void
cline_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&cline_preset, out, len, r);
}

static void
continue_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&continue_preset, out, len, r);
}

static void
amp_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&amp_preset, out, len, r);
}

static void
auggie_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&auggie_preset, out, len, r);
}

static void
crush_parse(const char *out, size_t len, struct agent_result *r)
{
	cli_parse(&crush_preset, out, len, r);
}

const struct agent_adapter agent_copilot_adapter = {
	.info = {
		.type = "copilot",
		.program = "copilot",
		.install_hint = "npm install -g @github/copilot",
		.auth_hint = "run `copilot login`, set a GitHub token "
			     "(providers.NAME.api_key_env) or a base_url",
		.is_cli = 1,
	},
	.run = cli_run,
	.parse = copilot_parse,
};

const struct agent_adapter agent_pi_adapter = {
	.info = {
		.type = "pi",
		.program = "pi",
		.install_hint = "npm install -g @mariozechner/pi-coding-agent",
		.auth_hint = "set providers.NAME.base_url and api_key_env, or "
			     "the model vendor's key variable "
			     "(providers.NAME.env)",
		.is_cli = 1,
	},
	.run = cli_run,
	.parse = pi_parse,
};

const struct agent_adapter agent_kilo_adapter = {
	.info = {
		.type = "kilo",
		.program = "kilo",
		.install_hint = "npm install -g @kilocode/cli",
		.auth_hint = "run `kilo auth login` or set "
			     "providers.NAME.api_key_env",
		.is_cli = 1,
	},
	.run = cli_run,
	.parse = kilo_parse,
};

const struct agent_adapter agent_cline_adapter = {
	.info = {
		.type = "cline",
		.program = "cline",
		.install_hint = "npm install -g cline",
		.auth_hint = "run `cline auth` or set providers.NAME.base_url "
			     "and api_key_env",
		.is_cli = 1,
	},
	.run = cli_run,
	.parse = cline_parse,
};

const struct agent_adapter agent_continue_adapter = {
	.info = {
		.type = "continue",
		.program = "cn",
		.install_hint = "npm install -g @continuedev/cli",
		.auth_hint = "set providers.NAME.base_url and api_key_env, or "
			     "give cn a config of yours (providers.NAME.args: "
			     "[--config, FILE])",
		.is_cli = 1,
	},
	.run = cli_run,
	.parse = continue_parse,
};

const struct agent_adapter agent_amp_adapter = {
	.info = {
		.type = "amp",
		.program = "amp",
		.install_hint = "npm install -g @sourcegraph/amp",
		.auth_hint = "run `amp login` or set AMP_API_KEY "
			     "(providers.NAME.api_key_env)",
		.is_cli = 1,
	},
	.run = cli_run,
	.parse = amp_parse,
};

const struct agent_adapter agent_auggie_adapter = {
	.info = {
		.type = "auggie",
		.program = "auggie",
		.install_hint = "npm install -g @augmentcode/auggie",
		.auth_hint = "run `auggie login` or set AUGMENT_SESSION_AUTH "
			     "(providers.NAME.api_key_env)",
		.is_cli = 1,
	},
	.run = cli_run,
	.parse = auggie_parse,
};

const struct agent_adapter agent_crush_adapter = {
	.info = {
		.type = "crush",
		.program = "crush",
		.install_hint = "npm install -g @charmland/crush",
		.auth_hint = "configure a provider in crush.json or set its "
			     "key variable (providers.NAME.env)",
		.is_cli = 1,
	},
	.run = cli_run,
	.parse = crush_parse,
};
