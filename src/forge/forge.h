/*
 * The forge (issue 19, docs/forge.md): GitHub issues in, pull requests
 * out, CI and review back in. One round of work is forge_sync; serve
 * runs it in its own companion process ("baton forge"), every
 * forge.poll_seconds and whenever forge_wake is called (a webhook).
 */
#ifndef BATON_FORGE_FORGE_H
#define BATON_FORGE_FORGE_H

#include <stdint.h>

struct config;
struct err;
struct store;
struct workspace;

/* What one round did, for `baton forge sync` and the log. */
struct forge_round {
	int imported;	/* issues made tasks */
	int cancelled;	/* tasks cancelled: issue closed/unlabelled, PR closed */
	int prs_opened, pushes, rounds, merged, asked;
	int64_t calls;	/* API requests made */
};

/*
 * One sync round: imports the issue backlog, opens and updates pull
 * requests, reads CI and review state and turns it into work. Returns 0,
 * or an error naming the endpoint and GitHub's message.
 */
int forge_sync(const struct config *cfg, struct store *s,
	       const struct workspace *ws, struct forge_round *out,
	       struct err *e);

/*
 * Tells the forge companion of a serve of this repository to sync now
 * (a byte into each FIFO under .baton/forge-wake.d). Never blocks and
 * never fails.
 */
void forge_wake(const struct workspace *ws);

#endif
