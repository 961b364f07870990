/*
 * The table of tested agent CLI versions and the version arithmetic
 * `baton doctor` uses with it (versions.h). Keep the table in step with
 * the pins in tools/agents.sh: raise a version here only after the agent
 * tests passed with it (docs/agents.md, "Versions").
 */
#include "util/compat.h"

#include <ctype.h>

#include "agent/versions.h"

static const struct tested {
	const char *type;
	const char *version;
} tested[] = {
	{ "claude-code", "2.1.197" }, { "codex", "0.169.0" },
	{ "gemini", "0.61.0" },	      { "qwen", "0.15.10" },
	{ "opencode", "1.18.33" },    { "copilot", "1.0.102" },
	{ "pi", "0.73.1" },	      { "kilo", "7.7.7" },
	{ "cline", "3.0.65" },	      { "continue", "1.5.47" },
};

const char *
agent_tested_version(const char *type)
{
	size_t i;

	for (i = 0; type && i < ARRAY_SIZE(tested); i++)
		if (!strcmp(tested[i].type, type))
			return tested[i].version;
	return NULL;
}

int
agent_version_in(const char *text, char *out, size_t n)
{
	const char *p, *end;
	size_t len;

	if (n)
		out[0] = '\0';
	for (p = text; p && *p; p++) {
		if (!isdigit((unsigned char)*p) ||
		    (p > text &&
		     (isalnum((unsigned char)p[-1]) || p[-1] == '.')))
			continue;
		end = p + strspn(p, "0123456789.");
		while (end > p && end[-1] == '.')
			end--;
		if (!memchr(p, '.', (size_t)(end - p))) {
			p = end - 1;
			continue;
		}
		len = (size_t)(end - p);
		if (!n)
			return 0;
		if (len >= n)
			len = n - 1;
		memcpy(out, p, len);
		out[len] = '\0';
		return 0;
	}
	return -1;
}

/* The number at *s (saturating), s moved past it and one '.'. */
static unsigned long long
field(const char **s)
{
	unsigned long long v = 0;

	while (isdigit((unsigned char)**s)) {
		if (v < 100000000000000000ULL)
			v = v * 10 + (unsigned long long)(**s - '0');
		(*s)++;
	}
	if (**s == '.' && isdigit((unsigned char)(*s)[1]))
		(*s)++;
	return v;
}

int
agent_version_cmp(const char *a, const char *b)
{
	unsigned long long x, y;

	while (isdigit((unsigned char)*a) || isdigit((unsigned char)*b)) {
		x = field(&a);
		y = field(&b);
		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}
