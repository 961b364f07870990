/*
 * The loop's policy envelope: see policy.h. A check walks four steps in
 * order -- the worktree fence for writes, the immutable paths, the
 * explicit grants, the profile -- and the first that decides wins.
 * Profiles are a table: what each allows and how it explains a denial,
 * so that a denied effect says exactly which rule failed and which grant
 * would have allowed it.
 */
#include "util/compat.h"

#include <fnmatch.h>
#include <strings.h>

#include "core/policy.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/strvec.h"
#include "util/xalloc.h"

/* The kinds that are side effects and need a grant. */
enum kind {
	KIND_WRITE,
	KIND_RUN,
	KIND_NETWORK,
	KIND_NR,
};

static const char *const kind_names[KIND_NR] = {
	[KIND_WRITE] = "write",
	[KIND_RUN] = "run",
	[KIND_NETWORK] = "network",
};

/* The side-effect kind named by the len bytes at s, or -1. */
static int
kind_find(const char *s, size_t len)
{
	int k;

	for (k = 0; k < KIND_NR; k++)
		if (strlen(kind_names[k]) == len &&
		    !strncmp(s, kind_names[k], len))
			return k;
	return -1;
}

/* p without any leading "./": "./src/a.c" and "src/a.c" are one path. */
static const char *
skip_dot_slash(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return p;
}

/*
 * Whether path has a component spelled name, ignoring case: a file system
 * that ignores case (macOS, Windows) opens ".GIT/config" as .git/config,
 * which is why git itself refuses such paths in a tree.
 */
static int
has_component(const char *path, const char *name)
{
	size_t n = strlen(name);
	const char *p = path;

	while (*p) {
		size_t len = strcspn(p, "/");

		if (len == n && !strncasecmp(p, name, n))
			return 1;
		p += len;
		while (*p == '/')
			p++;
	}
	return 0;
}

/* Whether path has a ".." component ("..", "../a", "a/../b", "a/.."). */
static int
has_dotdot(const char *path)
{
	return has_component(path, "..");
}

/*
 * Whether the len bytes at s hold no literal character: only '*', '?'
 * and complete bracket expressions ("[a-z]"), which is a segment that
 * matches a name whatever it is. A '[' without its ']' and a backslash
 * escape are literal, as fnmatch(3) takes them.
 */
static int
wild_only(const char *s, size_t len)
{
	size_t i = 0, j;

	while (i < len) {
		if (s[i] == '*' || s[i] == '?') {
			i++;
			continue;
		}
		if (s[i] != '[')
			return 0;
		j = i + 1;
		if (j < len && (s[j] == '!' || s[j] == '^'))
			j++;
		if (j < len && s[j] == ']')
			j++;
		while (j < len && s[j] != ']')
			j++;
		if (j >= len)
			return 0;
		i = j + 1;
	}
	return 1;
}

/* Appends the len bytes at s to out with fnmatch's special characters
 * escaped, so that the glob matches exactly them. */
static void
add_literal(struct buf *out, const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (strchr("*?[\\", s[i]))
			buf_addch(out, '\\');
		buf_addch(out, s[i]);
	}
}

/* Whether a strvec holds no string. */
static int
sv_empty(const struct strvec *sv)
{
	return !sv || !sv->nr;
}

/* Whether one of the globs of sv matches s. */
static int
sv_glob_match(const struct strvec *sv, const char *s)
{
	size_t i;

	for (i = 0; sv && i < sv->nr; i++)
		if (!fnmatch(skip_dot_slash(sv->v[i]), s, 0))
			return 1;
	return 0;
}

/* Appends the strings of sv, joined with ", ". */
static void
add_list(struct buf *out, const struct strvec *sv)
{
	size_t i;

	for (i = 0; i < sv->nr; i++)
		buf_addf(out, "%s%s", i ? ", " : "", sv->v[i]);
}

/* ---- profiles ---- */

struct profile {
	const char *name;
	/* whether the profile allows kind k on target */
	int (*allows)(const struct policy *p, enum kind k, const char *target);
	/* appends what the profile grants for kind k, after "profile NAME" */
	void (*explain)(const struct policy *p, enum kind k, struct buf *out);
};

static int
strict_allows(const struct policy *p, enum kind k, const char *target)
{
	(void)p;
	(void)k;
	(void)target;
	return 0;
}

static void
strict_explain(const struct policy *p, enum kind k, struct buf *out)
{
	(void)p;
	(void)k;
	buf_adds(out, " grants nothing");
}

/* Writes reach this only from inside the worktree and only to paths that
 * are not immutable (policy_check). */
static int
trusted_allows(const struct policy *p, enum kind k, const char *target)
{
	(void)p;
	(void)target;
	return k == KIND_WRITE || k == KIND_RUN;
}

static void
trusted_explain(const struct policy *p, enum kind k, struct buf *out)
{
	(void)p;
	(void)k;
	buf_adds(out, " grants no network access");
}

static int
automation_allows(const struct policy *p, enum kind k, const char *target)
{
	size_t i;

	switch (k) {
	case KIND_WRITE:
		return sv_empty(p->allowed_paths) ||
		       sv_glob_match(p->allowed_paths, target);
	case KIND_RUN:
		for (i = 0; p->commands && i < p->commands->nr; i++)
			if (!strcmp(p->commands->v[i], target))
				return 1;
		return 0;
	default:
		return 0;
	}
}

static void
automation_explain(const struct policy *p, enum kind k, struct buf *out)
{
	switch (k) {
	case KIND_WRITE:
		/* only reached with allowed_paths set: else every write is */
		buf_adds(out,
			 " grants writes only within policies.allowed_paths"
			 " (");
		add_list(out, p->allowed_paths);
		buf_addch(out, ')');
		break;
	case KIND_RUN:
		if (sv_empty(p->commands)) {
			buf_adds(out, " grants runs only of the project's"
				      " validate commands, and there are none");
			break;
		}
		buf_adds(out, " grants runs only of the project's validate"
			      " commands (");
		add_list(out, p->commands);
		buf_addch(out, ')');
		break;
	default:
		buf_adds(out, " grants no network access");
		break;
	}
}

static const struct profile profiles[] = {
	{ POLICY_STRICT, strict_allows, strict_explain },
	{ POLICY_TRUSTED_LOCAL, trusted_allows, trusted_explain },
	{ POLICY_AUTOMATION, automation_allows, automation_explain },
};

static const struct profile *
profile_find(const char *name)
{
	size_t i;

	for (i = 0; name && i < ARRAY_SIZE(profiles); i++)
		if (!strcmp(profiles[i].name, name))
			return &profiles[i];
	return NULL;
}

int
policy_profile_valid(const char *name)
{
	return profile_find(name) != NULL;
}

/* ---- grants ---- */

void
policy_grant_release(struct policy_grant *g)
{
	if (!g)
		return;
	FREE_AND_NULL(g->text);
	strvec_clear(&g->exclude);
	g->override_immutable = 0;
}

/* Why a write (a path without its "./", not empty) is outside the
 * worktree, or NULL. */
static const char *
outside_worktree(const char *path)
{
	if (path[0] == '/')
		return "an absolute path";
	if (has_dotdot(path))
		return "a '..' component";
	return NULL;
}

/* The write glob after "write:" of grant text: in the worktree and not
 * too broad (policy_grant_parse). */
static int
write_glob_parse(const char *text, const char *glob, struct err *e)
{
	size_t seg;

	glob = skip_dot_slash(glob);
	if (glob[0] == '/')
		return err_set(e, BATON_EINVAL,
			       "grant '%s': a write glob is relative to the"
			       " worktree, not absolute",
			       text);
	if (has_dotdot(glob))
		return err_set(e, BATON_EINVAL,
			       "grant '%s': a write glob cannot leave the"
			       " worktree (it has a '..' component)",
			       text);
	if (!*glob)
		return err_set(e, BATON_EINVAL,
			       "grant '%s': the glob after 'write:' names no"
			       " path",
			       text);
	seg = strcspn(glob, "/");
	if (wild_only(glob, seg))
		return err_set(e, BATON_EINVAL,
			       "grant '%s': too broad: its first path segment"
			       " '%.*s' is only wildcards, which reach every"
			       " directory of the worktree (start it with a"
			       " name, such as \"write:src/**\")",
			       text, (int)seg, glob);
	return 0;
}

int
policy_grant_parse(const char *text, struct err *e)
{
	const char *colon = text ? strchr(text, ':') : NULL;
	const char *glob;
	int k;

	if (!colon)
		return err_set(e, BATON_EINVAL,
			       "grant '%s': expected KIND:GLOB with KIND write,"
			       " run or network",
			       text ? text : "");
	glob = colon + 1;
	k = kind_find(text, (size_t)(colon - text));
	if (k < 0 && colon - text == 4 && !strncmp(text, "read", 4))
		return err_set(e, BATON_EINVAL,
			       "grant '%s': reads need no grant (they are"
			       " always allowed)",
			       text);
	if (k < 0)
		return err_set(e, BATON_EINVAL,
			       "grant '%s': unknown kind '%.*s': expected"
			       " write, run or network",
			       text, (int)(colon - text), text);
	if (!*glob)
		return err_set(e, BATON_EINVAL,
			       "grant '%s': the glob after '%s:' is empty",
			       text, kind_names[k]);
	if (k == KIND_WRITE)
		return write_glob_parse(text, glob, e);
	if (wild_only(glob, strlen(glob)))
		return err_set(e, BATON_EINVAL,
			       "grant '%s': too broad: a glob of only wildcards"
			       " grants every %s",
			       text,
			       k == KIND_RUN ? "command (profile trusted-local"
					       " is the way to allow any)"
					     : "host (name the hosts)");
	return 0;
}

/* The kind of grant text, which policy_grant_parse accepted. */
static enum kind
grant_kind(const char *text)
{
	return (enum kind)kind_find(text, strcspn(text, ":"));
}

int
policy_exclude_parse(const char *grant, const char *glob, struct err *e)
{
	const char *where;

	if (!glob || !*glob)
		return err_set(e, BATON_EINVAL,
			       "exclude '' of grant '%s': an exclude glob"
			       " cannot be empty",
			       grant ? grant : "");
	if (!grant || policy_grant_parse(grant, NULL) ||
	    grant_kind(grant) != KIND_WRITE)
		return 0;
	glob = skip_dot_slash(glob);
	where = *glob ? outside_worktree(glob) : NULL;
	if (where)
		return err_set(e, BATON_EINVAL,
			       "exclude '%s' of grant '%s': it is outside the"
			       " worktree (%s)",
			       glob, grant, where);
	return 0;
}

int
policy_immutable_parse(const char *glob, struct err *e)
{
	const char *where;

	if (!glob || !*skip_dot_slash(glob))
		return err_set(e, BATON_EINVAL,
			       "immutable path '%s': it names no path",
			       glob ? glob : "");
	where = outside_worktree(skip_dot_slash(glob));
	if (where)
		return err_set(e, BATON_EINVAL,
			       "immutable path '%s': it is outside the worktree"
			       " (%s)",
			       glob, where);
	return 0;
}

/*
 * A command line with one of these does more than one thing ("make x;
 * curl evil | sh"): a glob grant ("run:make *") does not cover it, only a
 * grant of exactly that line does.
 */
#define SHELL_CONTROL ";&|`$<>()\n"

/* Whether g is whole: its text and every exclude as config takes them
 * (one bad exclude voids the grant rather than widen it). */
static int
grant_valid(const struct policy_grant *g)
{
	size_t i;

	if (policy_grant_parse(g->text, NULL))
		return 0;
	for (i = 0; i < g->exclude.nr; i++)
		if (policy_exclude_parse(g->text, g->exclude.v[i], NULL))
			return 0;
	return 1;
}

/* Whether glob, of a grant of kind k, matches target. */
static int
glob_match(enum kind k, const char *glob, const char *target)
{
	if (k == KIND_WRITE)
		glob = skip_dot_slash(glob);
	return !fnmatch(glob, target, 0);
}

/* What the grants say of one target. Every pointer is borrowed from the
 * policy. */
struct grant_match {
	const struct policy_grant *grant;    /* the first that covers it */
	const struct policy_grant *excluder; /* else the first that would,
						but for its exclude */
	const char *exclude;		     /* the excluder's exclude */
};

/*
 * Fills m (zeroed first) for target: the first valid grant of kind k whose
 * glob matches target and no exclude of which does. With override set,
 * only grants that say override_immutable count.
 */
static void
grant_find(const struct policy *p, enum kind k, const char *target,
	   int override, struct grant_match *m)
{
	size_t len = strlen(kind_names[k]);
	size_t i, x;

	memset(m, 0, sizeof(*m));
	for (i = 0; p->grants && i < p->nr_grants; i++) {
		const struct policy_grant *g = &p->grants[i];
		const char *glob;

		if (override && !g->override_immutable)
			continue;
		if (!grant_valid(g) || strncmp(g->text, kind_names[k], len) ||
		    g->text[len] != ':')
			continue;
		glob = g->text + len + 1;
		if (k == KIND_RUN && strpbrk(target, SHELL_CONTROL) &&
		    strcmp(glob, target))
			continue; /* see SHELL_CONTROL */
		if (!glob_match(k, glob, target))
			continue;
		for (x = 0; x < g->exclude.nr; x++)
			if (glob_match(k, g->exclude.v[x], target))
				break;
		if (x == g->exclude.nr) {
			m->grant = g;
			return;
		}
		if (!m->excluder) {
			m->excluder = g;
			m->exclude = g->exclude.v[x];
		}
	}
}

/*
 * Appends a grant that allows kind k on target and little more: the
 * directory of a write (the directory, then "/" and two stars), the
 * program of a run ("curl *"), the host of a network access.
 */
static void
add_suggestion(struct buf *out, enum kind k, const char *target)
{
	const char *slash, *p;

	buf_addf(out, "%s:", kind_names[k]);
	switch (k) {
	case KIND_WRITE:
		slash = strrchr(target, '/');
		if (!slash) {
			add_literal(out, target, strlen(target));
			break;
		}
		add_literal(out, target, (size_t)(slash - target));
		buf_adds(out, "/**");
		break;
	case KIND_RUN:
		p = target + strspn(target, " \t");
		p += strcspn(p, " \t");
		add_literal(out, target, (size_t)(p - target));
		if (*p)
			buf_addf(out, "%c*", *p);
		break;
	default:
		add_literal(out, target, strlen(target));
		break;
	}
}

/* ---- the check ---- */

/*
 * Whether path (inside the worktree, without "./") is immutable; if so,
 * appends why to out: "a '.git' component", "under '.baton'" or
 * "loop.immutable has 'ADR-*'".
 */
static int
immutable(const struct policy *p, const char *path, struct buf *out)
{
	size_t i;

	if (has_component(path, ".git")) {
		buf_adds(out, "a '.git' component");
		return 1;
	}
	if (!strncasecmp(path, ".baton", 6) &&
	    (path[6] == '\0' || path[6] == '/')) {
		buf_adds(out, "under '.baton'");
		return 1;
	}
	for (i = 0; p->immutable && i < p->immutable->nr; i++) {
		if (glob_match(KIND_WRITE, p->immutable->v[i], path)) {
			buf_addf(out, "loop.immutable has '%s'",
				 p->immutable->v[i]);
			return 1;
		}
	}
	return 0;
}

/* A denial: *why gets the sentence in b (when why is not NULL). */
static int
deny(struct buf *b, char **why)
{
	if (why)
		*why = buf_detach(b, NULL);
	buf_release(b);
	return BATON_EINVAL;
}

/* A grant: *by gets a copy of what granted it (when by is not NULL). */
static int
allow(const char *what, const char *name, char **by)
{
	if (by)
		*by = name ? xasprintf("%s %s", what, name) : xstrdup(what);
	return 0;
}

/*
 * The decision on a write to path, an immutable path (the sentence in b
 * says why so far): only a grant that says override_immutable writes it,
 * whatever the profile.
 */
static int
check_immutable(const struct policy *p, const char *target, const char *path,
		struct buf *b, char **by, char **why)
{
	struct grant_match m;
	char *reason;

	grant_find(p, KIND_WRITE, path, 1, &m);
	if (m.grant) {
		buf_release(b);
		if (by)
			*by = xasprintf("grant %s (override_immutable)",
					m.grant->text);
		return 0;
	}
	reason = buf_detach(b, NULL);
	buf_addf(
	    b,
	    "write '%s' is not granted: it is immutable (%s), and no"
	    " grant in loop.grants with override_immutable: true covers it",
	    target, reason);
	free(reason);
	grant_find(p, KIND_WRITE, path, 0, &m);
	if (m.grant)
		buf_addf(b, " (grant %s matches it, without the override)",
			 m.grant->text);
	return deny(b, why);
}

int
policy_check(const struct policy *p, const char *kind, const char *target,
	     char **by, char **why)
{
	struct buf b = BUF_INIT;
	const struct profile *prof;
	const char *path, *where;
	struct grant_match m;
	int k;

	if (kind && !strcmp(kind, "read"))
		return allow("read", NULL, by);
	k = kind ? kind_find(kind, strlen(kind)) : -1;
	if (k < 0) {
		buf_addf(&b,
			 "effect kind '%s' is unknown: expected read, write,"
			 " run or network",
			 kind ? kind : "");
		return deny(&b, why);
	}
	path = target ? target : "";
	if (k == KIND_WRITE)
		path = skip_dot_slash(path);
	if (!*path) {
		buf_addf(&b,
			 "%s with an empty target is not granted: an effect"
			 " must name what it touches",
			 kind_names[k]);
		return deny(&b, why);
	}
	where = k == KIND_WRITE ? outside_worktree(path) : NULL;
	if (where) {
		buf_addf(&b,
			 "write '%s' is not granted: it is outside the worktree"
			 " (%s)",
			 target, where);
		return deny(&b, why);
	}
	if (k == KIND_WRITE && immutable(p, path, &b))
		return check_immutable(p, target, path, &b, by, why);
	grant_find(p, (enum kind)k, path, 0, &m);
	if (m.grant)
		return allow("grant", m.grant->text, by);
	prof = profile_find(p->profile ? p->profile : POLICY_STRICT);
	if (prof && prof->allows(p, (enum kind)k, path))
		return allow("profile", prof->name, by);

	buf_addf(&b, "%s '%s' is not granted: ", kind_names[k], target);
	if (prof) {
		buf_addf(&b, "profile %s", prof->name);
		prof->explain(p, (enum kind)k, &b);
	} else {
		buf_addf(&b, "profile '%s' is unknown and grants nothing",
			 p->profile);
	}
	buf_adds(&b, ", and no grant in loop.grants matches (");
	if (m.excluder)
		buf_addf(&b, "grant %s excludes it by '%s'; ", m.excluder->text,
			 m.exclude);
	buf_adds(&b, "add \"");
	add_suggestion(&b, (enum kind)k, path);
	buf_adds(&b, "\" to allow it)");
	return deny(&b, why);
}
