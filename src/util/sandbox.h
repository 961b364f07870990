/*
 * The optional bubblewrap sandbox (execution.sandbox: bwrap): a child
 * sees the whole file system read-only except the directories it is given
 * read-write (the worktree, the run folder, its private home), a private
 * /tmp, and, when no_net is set, no network. Validation runs with no
 * network; agents keep theirs, they talk to a model.
 */
#ifndef BATON_UTIL_SANDBOX_H
#define BATON_UTIL_SANDBOX_H

#include "util/strvec.h"

#define SANDBOX_MAX_RW 6

struct sandbox {
	int on;
	int no_net;
	const char *rw[SANDBOX_MAX_RW]; /* read-write binds; NULL ends */
};

/*
 * Appends to out the argv that runs argv inside sb: "bwrap ... -- argv"
 * when sb is on, argv unchanged otherwise (sb may be NULL).
 */
void sandbox_wrap(const struct sandbox *sb, const struct strvec *argv,
		  struct strvec *out);

/* 1 when bwrap is on PATH and can create a sandbox here. */
int sandbox_available(void);

#endif
