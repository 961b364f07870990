/*
 * The loop pipeline's policy envelope (Craik seed 004): which side
 * effects an act may have. An act declares its effects as {kind, target}:
 *
 *   read     "src/a.c"                 never a side effect: always granted
 *   write    "src/a.c"                 a path relative to the worktree
 *   run      "make test"               a command line
 *   network  "registry.npmjs.org"      a host
 *
 * A side effect (write, run, network) needs a grant; everything is denied
 * by default. Grants come from the loop's explicit grants
 * ("write:*.c", "run:make *", "network:registry.npmjs.org"), checked
 * first, and then from the profile:
 *
 *   strict         nothing: explicit grants only
 *   trusted-local  every write inside the worktree and every run
 *   automation     writes within policies.allowed_paths (anywhere in the
 *                  worktree when there are none) and runs of exactly the
 *                  project's validate commands
 *
 * No profile grants network access. A write that is absolute, empty or
 * has a ".." component is outside the worktree and denied whatever the
 * grants say. Globs are fnmatch(3) without FNM_PATHNAME, so '*' matches
 * '/' too: "*.c" matches "src/a/b.c", and "src/" followed by one star or
 * two matches every file under src.
 *
 * A grant may exclude targets (all of src but src/gen, say). Some
 * paths are immutable: every path with a ".git" component, every path
 * under ".baton" (the project's config and prompts), and the globs of
 * loop.immutable. No profile writes them, and no grant does unless it
 * says override_immutable, so that an agent cannot rewrite the history,
 * hooks or policy that hold it however broad its grants. Pure: no I/O.
 */
#ifndef BATON_CORE_POLICY_H
#define BATON_CORE_POLICY_H

#include <stddef.h>

#include "util/strvec.h"

struct err;

/* The profile names. */
#define POLICY_STRICT	     "strict"
#define POLICY_TRUSTED_LOCAL "trusted-local"
#define POLICY_AUTOMATION    "automation"

/*
 * One grant of loop.grants. text is "kind:glob" (policy_grant_parse);
 * exclude holds globs of targets the grant does not cover even though its
 * glob matches them; override_immutable lets it write the immutable paths
 * it matches, which no grant does otherwise. Release with
 * policy_grant_release.
 */
struct policy_grant {
	char *text;
	struct strvec exclude;
	int override_immutable;
};

/* Frees g's contents and leaves it empty. NULL is accepted. */
void policy_grant_release(struct policy_grant *g);

/* What a check is held to. Every member is borrowed. */
struct policy {
	const char *profile;		   /* a POLICY_* name; NULL: strict */
	const struct policy_grant *grants; /* nr_grants of them; may be NULL
					      when there are none */
	size_t nr_grants;
	const struct strvec *allowed_paths; /* globs; NULL or empty: the whole
					       worktree */
	const struct strvec *commands;	    /* the validate commands, exact
					       strings; may be NULL */
	const struct strvec *immutable;	    /* globs of paths immutable
					       beside .git and .baton
					       (loop.immutable); may be NULL */
};

/* 1 when name is one of the three profile names, else 0 (NULL too). */
int policy_profile_valid(const char *name);

/*
 * Whether p allows the effect kind on target. Returns 0 when it does,
 * with *by a new string naming what granted it: "read", "grant
 * write:*.c" (the grant's text), "grant write:*.md
 * (override_immutable)" for an immutable path, or "profile
 * trusted-local". Returns
 * BATON_EINVAL when it does not -- a decision, not a failure of the
 * caller -- with *why a new sentence naming the effect, the profile and a
 * grant that would allow it:
 *
 *   run 'curl https://x' is not granted: profile strict grants nothing,
 *   and no grant in loop.grants matches (add "run:curl *" to allow it)
 *
 * An unknown kind, an empty target, a write outside the worktree and a
 * write to an immutable path without an override grant are denied with a
 * sentence saying so ("... is not granted: it is immutable (a '.git'
 * component) ..."). A grant whose exclude matches the target does not
 * cover it. by and why may be NULL; each is written only in its own
 * case, and the caller frees it. A grant that policy_grant_parse or
 * policy_exclude_parse would refuse never matches, whatever its other
 * parts say.
 */
int policy_check(const struct policy *p, const char *kind, const char *target,
		 char **by, char **why);

/*
 * Checks one grant text as config gives it: "<kind>:<glob>" with kind
 * write, run or network and a non-empty glob. A write glob must stay in
 * the worktree (no leading '/', no ".." component) and must not be too
 * broad: its first path segment (after any "./") must hold a literal
 * character, so "*.c", "Makefile" and "src/" then stars are grants while "*",
 * "**", "[a-z]*", and "*" or "**" followed by "/x" are not: a segment
 * made only of '*', '?' and bracket expressions reaches every directory
 * of the worktree. A run or network glob made only of wildcards ("run:*") is
 * too broad as well: it grants every command or host. Returns 0, or
 * BATON_EINVAL with a sentence in e naming the grant.
 */
int policy_grant_parse(const char *text, struct err *e);

/*
 * Checks glob, an exclude of the grant grant (its text): it must not be
 * empty and, for a write grant, it must stay in the worktree as a write
 * glob must. It may be as broad as it likes: excluding more is never a
 * risk. Returns 0, or BATON_EINVAL with a sentence in e naming both.
 */
int policy_exclude_parse(const char *grant, const char *glob, struct err *e);

/*
 * Checks glob, an entry of loop.immutable: a non-empty path glob that
 * stays in the worktree. Returns 0, or BATON_EINVAL with a sentence in e.
 */
int policy_immutable_parse(const char *glob, struct err *e);

#endif
