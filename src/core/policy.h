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
 * two matches every file under src. Pure: no I/O.
 */
#ifndef BATON_CORE_POLICY_H
#define BATON_CORE_POLICY_H

struct err;
struct strvec;

/* The profile names. */
#define POLICY_STRICT	     "strict"
#define POLICY_TRUSTED_LOCAL "trusted-local"
#define POLICY_AUTOMATION    "automation"

/* What a check is held to. Every member is borrowed. */
struct policy {
	const char *profile;		    /* a POLICY_* name; NULL: strict */
	const struct strvec *grants;	    /* "kind:glob" texts; may be NULL */
	const struct strvec *allowed_paths; /* globs; NULL or empty: the whole
					       worktree */
	const struct strvec *commands;	    /* the validate commands, exact
					       strings; may be NULL */
};

/* 1 when name is one of the three profile names, else 0 (NULL too). */
int policy_profile_valid(const char *name);

/*
 * Whether p allows the effect kind on target. Returns 0 when it does,
 * with *by a new string naming what granted it: "read", "grant
 * write:*.c" (the grant's text) or "profile trusted-local". Returns
 * BATON_EINVAL when it does not -- a decision, not a failure of the
 * caller -- with *why a new sentence naming the effect, the profile and a
 * grant that would allow it:
 *
 *   run 'curl https://x' is not granted: profile strict grants nothing,
 *   and no grant in loop.grants matches (add "run:curl *" to allow it)
 *
 * An unknown kind, an empty target and a write outside the worktree are
 * denied with a sentence saying so. by and why may be NULL; each is
 * written only in its own case, and the caller frees it. A grant text
 * that policy_grant_parse would refuse never matches.
 */
int policy_check(const struct policy *p, const char *kind, const char *target,
		 char **by, char **why);

/*
 * Checks one grant text as config gives it: "<kind>:<glob>" with kind
 * write, run or network and a non-empty glob; a write glob must be
 * relative to the worktree (no leading '/', no ".." component). Returns
 * 0, or BATON_EINVAL with a sentence in e naming the grant.
 */
int policy_grant_parse(const char *text, struct err *e);

#endif
