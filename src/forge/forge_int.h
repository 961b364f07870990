/*
 * Inside the forge module: what one sync round shares between its parts.
 * sync.c makes the context and runs the parts in order: intake.c (issues
 * in), then pr.c (pull requests out, CI and review back in).
 */
#ifndef BATON_FORGE_FORGE_INT_H
#define BATON_FORGE_FORGE_INT_H

#include "forge/forge.h"
#include "forge/github.h"

struct forge_ctx {
	const struct config *cfg;
	struct store *s;
	const struct workspace *ws;
	struct gh_client gh;	/* token from cfg->forge.token_env */
	struct forge_round *round;
};

/*
 * intake.c: open issues with the intake label become tasks (exactly once,
 * store_forge_intake); a task of a closed or unlabelled issue that has
 * not run is cancelled; the issue is told when a run starts and ends.
 */
int forge__intake(struct forge_ctx *fx, struct err *e);

/*
 * pr.c: tasks waiting in blocked(pull_request) get their branch pushed
 * and one PR; open PRs are read (state, head, checks, reviews) and turned
 * into fix rounds, a question for a person, a merge, or the task's end.
 */
int forge__pulls(struct forge_ctx *fx, struct err *e);

#endif
