/*
 * The host snapshot (openTiger's agent profile): what the machine the
 * agents run on is — OS, architecture, the versions of git and of the
 * language toolchains found, and of each agent CLI configured — made
 * at `baton serve` start and by `baton doctor`, cached in the
 * repository's .baton/ (never in a worktree, where an agent writes) for
 * execution.host_ttl_seconds, and put at the head of every prompt's
 * context so that an agent does not spend turns finding out.
 *
 * Probing runs programs, so it trusts only what the agent cannot have
 * put there: each program is looked up on PATH skipping relative
 * entries (".", "", "bin") and any folder inside the repository (its
 * worktrees included), runs with that same PATH, from "/", with no
 * input, for at most HOST_PROBE_MS each and HOST_PROBE_TOTAL_MS in all.
 * A `command` provider's program is never run: nobody knows what it
 * does with --version.
 */
#ifndef BATON_AGENT_HOST_H
#define BATON_AGENT_HOST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct buf;
struct config_provider;
struct err;

#define HOST_PROBE_MS 3000
#define HOST_PROBE_TOTAL_MS 20000

struct host_probe {
	const char *cache;  /* the snapshot file: <repo>/.baton/host.json */
	const char *repo;   /* PATH entries inside it are not trusted */
	const struct config_provider *providers; /* the agents to probe */
	size_t nr_providers;
	int ttl_seconds;    /* 0: always made anew */
	int64_t now_ms;	    /* the clock the TTL is read on */
};

/*
 * The snapshot: the cached one when it is younger than the TTL and was
 * made for the same PATH and agents (its fingerprint), else a new one,
 * probed and written atomically to the cache. *made (may be NULL) says
 * which. *out is the caller's to json_decref. Fails only when a new
 * snapshot cannot be written (e says where); reading a bad cache is not
 * an error (a new one is made).
 */
int host_snapshot(const struct host_probe *hp, json_t **out, int *made,
		  struct err *e);

/* The cached snapshot, whatever its age; NULL when there is none or it
 * cannot be read. Caller json_decrefs. */
json_t *host_snapshot_cached(const char *cache);

/*
 * The snapshot as lines of text, one fact a line ("os: Debian 13 (Linux
 * 6.1.0 x86_64)", "git: git version 2.47.2", "claude-code 'claude':
 * 2.0.14 (Claude Code)"), appended to out.
 */
void host_snapshot_text(const json_t *snap, struct buf *out);

/*
 * The absolute path of program on the trusted part of PATH (above), or
 * NULL. repo may be NULL. Caller frees.
 */
char *host_which(const char *program, const char *repo);

#endif
