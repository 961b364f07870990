/*
 * Failure classes (failclass.h): a structured code decides when baton
 * has one; otherwise the text is matched against rules tried in order,
 * the first that matches winning, so that the narrow rules (a permission
 * prompt, a missing script) come before the wide ones (any "enoent",
 * any "timeout"). The rules and limits follow openTiger's classifier and
 * retry policy; t_failclass checks them case by case against its tests.
 */
#include "util/compat.h"

#include <ctype.h>
#include <stdint.h>

#include "core/failclass.h"
#include "util/buf.h"

static const char *const class_names[FAIL_CLASS_N] = {
	[FAIL_CLASS_ENV] = "env",
	[FAIL_CLASS_SETUP] = "setup",
	[FAIL_CLASS_PERMISSION] = "permission",
	[FAIL_CLASS_NOOP] = "noop",
	[FAIL_CLASS_POLICY] = "policy",
	[FAIL_CLASS_TEST] = "test",
	[FAIL_CLASS_FLAKY] = "flaky",
	[FAIL_CLASS_MODEL] = "model",
	[FAIL_CLASS_MODEL_LOOP] = "model_loop",
};

static const int default_limits[FAIL_CLASS_N] = {
	[FAIL_CLASS_ENV] = 5,	     [FAIL_CLASS_SETUP] = 3,
	[FAIL_CLASS_PERMISSION] = 0, [FAIL_CLASS_NOOP] = 0,
	[FAIL_CLASS_POLICY] = 3,     [FAIL_CLASS_TEST] = 3,
	[FAIL_CLASS_FLAKY] = 6,	     [FAIL_CLASS_MODEL] = 3,
	[FAIL_CLASS_MODEL_LOOP] = 1,
};

/* Reasons, as openTiger names them. */
#define R_PERMISSION "external_directory_permission_prompt"
#define R_NOOP "no_actionable_changes"
#define R_POLICY "policy_violation"
#define R_NO_TESTS "verification_command_no_test_files"
#define R_NO_SCRIPT "verification_command_missing_script"
#define R_NO_TARGET "verification_command_missing_make_target"
#define R_FORMAT "verification_command_unsupported_format"
#define R_SEQUENCE "verification_command_sequence_issue"
#define R_SETUP "setup_or_bootstrap_issue"
#define R_ENV "environment_issue"
#define R_DIVERGED "branch_diverged_requires_recreate"
#define R_TEST "test_failure"
#define R_FLAKY "transient_or_flaky_failure"
#define R_LOOP "model_doom_loop"
#define R_MODEL "model_or_unknown_failure"

struct code_rule {
	const char *code;
	enum fail_class cls;
	int retryable;
	const char *reason;
};

static const struct code_rule code_rules[] = {
	{ R_PERMISSION, FAIL_CLASS_PERMISSION, 0, R_PERMISSION },
	{ R_NOOP, FAIL_CLASS_NOOP, 0, R_NOOP },
	{ R_POLICY, FAIL_CLASS_POLICY, 1, R_POLICY },
	{ R_NO_SCRIPT, FAIL_CLASS_SETUP, 0, R_NO_SCRIPT },
	{ R_NO_TESTS, FAIL_CLASS_SETUP, 0, R_NO_TESTS },
	{ R_NO_TARGET, FAIL_CLASS_SETUP, 0, R_NO_TARGET },
	{ R_FORMAT, FAIL_CLASS_SETUP, 0, R_FORMAT },
	{ R_SEQUENCE, FAIL_CLASS_SETUP, 0, R_SEQUENCE },
	{ R_SETUP, FAIL_CLASS_SETUP, 1, R_SETUP },
	{ R_ENV, FAIL_CLASS_ENV, 1, R_ENV },
	{ "quota_failure", FAIL_CLASS_ENV, 1, R_ENV },
	{ "verification_command_failed", FAIL_CLASS_TEST, 1, R_TEST },
	{ R_TEST, FAIL_CLASS_TEST, 1, R_TEST },
	{ R_FLAKY, FAIL_CLASS_FLAKY, 1, R_FLAKY },
	{ R_LOOP, FAIL_CLASS_MODEL_LOOP, 1, R_LOOP },
	{ R_MODEL, FAIL_CLASS_MODEL, 1, R_MODEL },
};

/* A message rule: any of words, or its test function, matches. */
struct text_rule {
	const char *const *words;
	int (*test)(const char *text);
	enum fail_class cls;
	int retryable;
	const char *reason;
};

static const char *const w_noop[] = {
	"no changes were made", "no relevant changes were made",
	"no commits between", NULL,
};
static const char *const w_policy[] = {
	"policy violation", "denied command", "outside allowed paths",
	"change to denied path", NULL,
};
static const char *const w_no_tests[] = {
	"no test files found", "no tests found", "no files found matching",
	NULL,
};
static const char *const w_no_script[] = {
	"err_pnpm_no_script", "missing script", "could not read package.json",
	"no rule to make target", NULL,
};
static const char *const w_format[] = {
	"unsupported command format", "shell operators are not allowed", NULL,
};
static const char *const w_setup[] = {
	"package.json",	     "pnpm-workspace.yaml",   "cannot find module",
	"enoent",	     "command not found",     "repository not found",
	"authentication failed", "permission denied", "no history in common",
	NULL,
};
static const char *const w_env[] = {
	"database_url", "redis_url", "connection refused", "dns", "env", NULL,
};
static const char *const w_diverged[] = {
	R_DIVERGED, "non-fast-forward", "failed to push some refs", NULL,
};
static const char *const w_test[] = {
	"vitest", "playwright", "assert", "expected", "test failed",
	"verification commands failed", NULL,
};
static const char *const w_flaky[] = {
	"rate limit", "429",	   "503",      "502",
	"timeout",    "timed out", "econnreset", "eai_again",
	"temporarily unavailable", NULL,
};
static const char *const w_loop[] = {
	"doom loop detected", "excessive planning chatter detected",
	"unsupported pseudo tool call detected: todo", NULL,
};

static const char *
skip_space(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

/* "external_directory permission prompt", "permission required:
 * external_directory" (any space after the colon). */
static int
is_permission_prompt(const char *text)
{
	const char *p;

	if (strcasestr(text, "external_directory permission prompt"))
		return 1;
	for (p = strcasestr(text, "permission required:"); p;
	     p = strcasestr(p + 1, "permission required:"))
		if (!strncasecmp(skip_space(p + 20), "external_directory", 18))
			return 1;
	return 0;
}

/* "enoent ... package.json", on one line */
static int
is_enoent_package(const char *text)
{
	const char *p = strcasestr(text, "enoent"), *q, *nl;

	if (!p)
		return 0;
	q = strcasestr(p, "package.json");
	nl = strchr(p, '\n');
	return q && (!nl || q < nl);
}

/*
 * "verification failed at <cmd> [explicit]: stderr unavailable" with
 * what: the whole failure line, for the two checks below.
 */
static const char *
explicit_unavailable(const char *text, const char **cmd_end)
{
	const char *p = strcasestr(text, "verification failed at "), *q;

	if (!p)
		return NULL;
	for (q = strcasestr(p, "[explicit]:"); q;
	     q = strcasestr(q + 1, "[explicit]:"))
		if (!strncasecmp(skip_space(q + 11), "stderr unavailable", 18)) {
			*cmd_end = q;
			return p + 23;
		}
	return NULL;
}

/* A check that failed inside a command substitution, "$(...)", or
 * "verification failed at ... shell operators". */
static int
is_bad_format(const char *text)
{
	const char *cmd, *end, *s, *v = strcasestr(text,
						   "verification failed at ");

	if (v && strcasestr(v, "shell operators"))
		return 1;
	cmd = explicit_unavailable(text, &end);
	if (!cmd)
		return 0;
	s = strstr(cmd, "$(");
	return s && s < end && memchr(s + 2, ')', (size_t)(end - s - 2));
}

/* Folders a build leaves its outputs in. */
static const char *const output_dirs[] = {
	"artifact/", "artifacts/", "build/",   "debug/",
	"dist/",     "out/",       "release/", "target/", NULL,
};

/*
 * "verification failed at test -f build/x [explicit]: stderr
 * unavailable": a check that an output exists ran before what makes it.
 */
static int
is_presence_check(const char *text)
{
	const char *cmd, *end, *p;
	size_t i;

	cmd = explicit_unavailable(text, &end);
	if (!cmd || strncasecmp(cmd, "test ", 5))
		return 0;
	p = skip_space(cmd + 5);
	if (p[0] != '-' || (tolower((unsigned char)p[1]) != 'f' &&
			    tolower((unsigned char)p[1]) != 's') ||
	    !isspace((unsigned char)p[2]))
		return 0;
	for (i = 0; output_dirs[i]; i++)
		for (p = strcasestr(text, output_dirs[i]); p;
		     p = strcasestr(p + 1, output_dirs[i]))
			if (p == text || strchr(" \t\n\"'./", p[-1]))
				return 1;
	return 0;
}

static const struct text_rule text_rules[] = {
	{ NULL, is_permission_prompt, FAIL_CLASS_PERMISSION, 0, R_PERMISSION },
	{ w_noop, NULL, FAIL_CLASS_NOOP, 0, R_NOOP },
	{ w_policy, NULL, FAIL_CLASS_POLICY, 1, R_POLICY },
	{ w_no_tests, NULL, FAIL_CLASS_SETUP, 0, R_NO_TESTS },
	{ w_no_script, is_enoent_package, FAIL_CLASS_SETUP, 0, R_NO_SCRIPT },
	{ w_format, is_bad_format, FAIL_CLASS_SETUP, 0, R_FORMAT },
	{ NULL, is_presence_check, FAIL_CLASS_SETUP, 0, R_SEQUENCE },
	{ w_setup, NULL, FAIL_CLASS_SETUP, 1, R_SETUP },
	{ w_env, NULL, FAIL_CLASS_ENV, 1, R_ENV },
	{ w_diverged, NULL, FAIL_CLASS_SETUP, 0, R_DIVERGED },
	{ w_test, NULL, FAIL_CLASS_TEST, 1, R_TEST },
	{ w_flaky, NULL, FAIL_CLASS_FLAKY, 1, R_FLAKY },
	{ w_loop, NULL, FAIL_CLASS_MODEL_LOOP, 1, R_LOOP },
};

static int
any_word(const char *text, const char *const *words)
{
	size_t i;

	for (i = 0; words && words[i]; i++)
		if (strcasestr(text, words[i]))
			return 1;
	return 0;
}

void
fail_classify(const char *message, const char *code, struct fail_verdict *out)
{
	const struct text_rule *r;
	size_t i;

	if (code && *code)
		for (i = 0; i < ARRAY_SIZE(code_rules); i++)
			if (!strcasecmp(code, code_rules[i].code)) {
				out->cls = code_rules[i].cls;
				out->retryable = code_rules[i].retryable;
				out->reason = code_rules[i].reason;
				return;
			}
	for (i = 0; message && i < ARRAY_SIZE(text_rules); i++) {
		r = &text_rules[i];
		if (any_word(message, r->words) || (r->test && r->test(message))) {
			out->cls = r->cls;
			out->retryable = r->retryable;
			out->reason = r->reason;
			return;
		}
	}
	out->cls = FAIL_CLASS_MODEL;
	out->retryable = 1;
	out->reason = R_MODEL;
}

const char *
fail_class_name(enum fail_class c)
{
	return (unsigned)c < FAIL_CLASS_N ? class_names[c] : "?";
}

int
fail_class_from_name(const char *name)
{
	int i;

	for (i = 0; name && i < FAIL_CLASS_N; i++)
		if (!strcmp(name, class_names[i]))
			return i;
	return -1;
}

int
fail_class_default_limit(enum fail_class c)
{
	return (unsigned)c < FAIL_CLASS_N ? default_limits[c] : 0;
}

int
fail_retry_limit(int class_limit, int cap)
{
	if (cap < 0)
		return class_limit;
	return cap < class_limit ? cap : class_limit;
}

/* Signatures ------------------------------------------------------------ */

#define SIGNATURE_MAX 400

/* Whether s starts a uuid ("8-4-4-4-12" hex digits), as openTiger reads
 * one: eight hex digits, a dash, then 27 of hex digits and dashes. */
static int
uuid_at(const char *s)
{
	int i;

	for (i = 0; i < 8; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	if (s[8] != '-')
		return 0;
	for (i = 9; i < 36; i++)
		if (!isxdigit((unsigned char)s[i]) && s[i] != '-')
			return 0;
	return 1;
}

static int
path_char(int c)
{
	return isalnum(c) || c == '.' || c == '_' || c == '-';
}

/* The length of a path at s ("/a/b", "/x/y/z.c": a slash, then at least
 * two names joined by slashes), or 0. */
static size_t
path_at(const char *s)
{
	size_t n = 0, names = 0, len;

	while (s[n] == '/') {
		len = 0;
		while (path_char((unsigned char)s[n + 1 + len]))
			len++;
		if (!len)
			break;
		n += 1 + len;
		names++;
	}
	return names >= 2 ? n : 0;
}

void
fail_signature(const char *text, struct buf *norm, char hash[17])
{
	struct buf b = BUF_INIT;
	const char *p = text ? text : "";
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t n, i;

	while (*p && b.len < SIGNATURE_MAX) {
		unsigned char c = (unsigned char)*p;

		if (c == 0x1b && p[1] == '[') {
			/* a colour: ESC [ digits and semicolons m */
			n = 2;
			while (isdigit((unsigned char)p[n]) || p[n] == ';')
				n++;
			if (p[n] == 'm') {
				p += n + 1;
				continue;
			}
		}
		if (uuid_at(p)) {
			buf_adds(&b, "<uuid>");
			p += 36;
		} else if (c == '/' && (n = path_at(p))) {
			buf_adds(&b, "<path>");
			p += n;
		} else if (isdigit(c)) {
			buf_adds(&b, "<n>");
			while (isdigit((unsigned char)*p))
				p++;
		} else if (isspace(c)) {
			if (b.len && b.ptr[b.len - 1] != ' ')
				buf_addch(&b, ' ');
			p++;
		} else {
			buf_addch(&b, (char)tolower(c));
			p++;
		}
	}
	if (b.len > SIGNATURE_MAX)
		buf_setlen(&b, SIGNATURE_MAX);
	while (b.len && b.ptr[b.len - 1] == ' ')
		buf_setlen(&b, b.len - 1);
	for (i = 0; i < b.len; i++) {
		h ^= (unsigned char)b.ptr[i];
		h *= 0x100000001b3ULL;
	}
	snprintf(hash, 17, "%016llx", (unsigned long long)h);
	if (norm)
		buf_add(norm, b.ptr, b.len);
	buf_release(&b);
}
