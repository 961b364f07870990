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
	int linked;	/* tasks left blocked(issue_linking) by a crash, queued */
	int refused;	/* issues not made tasks: their text is not UTF-8 */
	int commented;	/* run started / ended comments posted */
	int unchanged;	/* the issue listing answered 304: nothing new */
	int64_t retry_at; /* a rate limit not waited out: epoch seconds
			     until which GitHub asks us to wait; else 0 */
};

/*
 * One sync round: imports the issue backlog, opens and updates pull
 * requests, reads CI and review state and turns it into work. Returns 0,
 * or an error naming the endpoint and GitHub's message: BATON_EINVAL
 * when the forge is not configured or its token variable is not set,
 * BATON_EBUSY for a rate limit not waited out (out->retry_at says until
 * when). *out is filled either way: what was done before the error.
 */
int forge_sync(const struct config *cfg, struct store *s,
	       const struct workspace *ws, struct forge_round *out,
	       struct err *e);

/*
 * A person's answer to the question the forge asked about task id's pull
 * request (`baton approvals approve|reject tN`; forge/pr.c). approve: go
 * on, taking the PR's head as it is now (a person's commits become the
 * base of the next round) with reactions.max_rounds more rounds; reject:
 * the task is cancelled (the PR stays open on GitHub, for people).
 * BATON_EINVAL, naming it, when the task asks nothing.
 */
int forge_answer(struct store *s, const struct workspace *ws,
		 const struct config *cfg, int64_t id, int approve,
		 struct err *e);

/*
 * Tells the forge companion of a serve of this repository to sync now
 * (a byte into each FIFO under .baton/forge-wake.d). Never blocks and
 * never fails.
 */
void forge_wake(const struct workspace *ws);

/* The directory of the forge companions' wake FIFOs (caller frees). */
char *forge_wake_dir(const struct workspace *ws);

/*
 * Whether a sync round could start: the forge is configured (type
 * github, a repo) and the variable forge.token_env names holds a token.
 * 0, or BATON_EINVAL with what is missing.
 */
int forge_check(const struct config *cfg, struct err *e);

/*
 * openTiger's start-up rules (docs/forge.md): the open issues with the
 * intake label that no task is linked to yet, in *out. 0 when the forge
 * has no intake (*out 0); else an error as forge_sync's. Makes one
 * listing request (or one per 100 issues), which it logs as a sync's.
 */
int forge_issue_backlog(const struct config *cfg, struct store *s,
			const struct workspace *ws, int *out, struct err *e);

/* What a launch (serve, doctor) decides before it would plan. */
struct forge_startup {
	int issue_backlog; /* open labelled issues with no task yet */
	int judge_backlog; /* tasks blocked(awaiting_judge) */
	int skip_planner;  /* either: "Planner is skipped for this launch" */
};

/*
 * Counts both backlogs (the issue one only with a forge that has intake;
 * asking GitHub as forge_issue_backlog does). *out is filled even on an
 * error (the judge backlog then still counts).
 */
int forge_startup(const struct config *cfg, struct store *s,
		  const struct workspace *ws, struct forge_startup *out,
		  struct err *e);

#endif
