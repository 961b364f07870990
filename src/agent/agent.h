/*
 * Providers: one interface to start an agent on a prompt in a working
 * directory, stream its output to the run folder, enforce a timeout, and
 * return how it ended, its final text, usage and cost (DESIGN.md section 5).
 * Adapters are registered in one table by provider type; this issue ships
 * `command` (any program: prompt on stdin and in BATON_PROMPT_FILE, final
 * text on stdout).
 */
#ifndef BATON_AGENT_AGENT_H
#define BATON_AGENT_AGENT_H

#include <stdint.h>

#include "util/buf.h"
#include "util/spawn.h"

struct config_provider;
struct err;
struct strvec;

/* How a call ended. */
enum agent_outcome {
	AGENT_OK,	/* exit 0 */
	AGENT_EXIT,	/* exited nonzero */
	AGENT_CRASHED,	/* killed by a signal it did not ask for */
	AGENT_TIMEOUT,	/* ran out of time; its group was killed */
	AGENT_STOPPED,	/* stopped on request (abort) */
};

struct agent_request {
	const struct config_provider *provider;
	const char *cwd;	  /* the run's worktree */
	const char *prompt;	  /* the full prompt text */
	const char *prompt_file;  /* where the prompt was saved */
	const struct strvec *env; /* BATON_* variables for the agent */
	const char *out_path;	  /* raw stdout goes here */
	const char *err_path;	  /* raw stderr goes here */
	int wake_fd, tick_ms;	  /* see spawn_opts */
	spawn_event_cb *on_event;
	void *arg;
};

struct agent_result {
	enum agent_outcome outcome;
	int status;	      /* exit code or 128+signal */
	int signal;	      /* the signal that killed it, or 0 */
	struct buf text;      /* the agent's final text (bounded) */
	struct buf err_tail;  /* end of stderr, for messages */
	uint64_t out_bytes;
	int64_t duration_ms;
	int64_t tokens_in, tokens_out;
	double cost_usd;
};

#define AGENT_RESULT_INIT { .text = BUF_INIT, .err_tail = BUF_INIT }

/*
 * Runs the provider on the request. Returns 0 when the agent ran (read
 * r->outcome), or a negative code when it could not be started, e.g. a
 * missing program or an unknown provider type. r is always filled and
 * must be released.
 */
int agent_run(const struct agent_request *req, struct agent_result *r,
	      struct err *e);
void agent_result_release(struct agent_result *r);
const char *agent_outcome_name(enum agent_outcome o);

/* The adapter table (agent_int.h has the entry type). */
int agent_type_known(const char *type);

#endif
