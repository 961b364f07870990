/*
 * Worker hosts (DESIGN.md section 3): when repo.url names a shared
 * remote, every machine keeps a clone of its own and the remote is the
 * only thing they share besides the database. A run starts from the base
 * as the remote has it now, not as this clone last saw it; a run's
 * branch travels to the remote before its task is settled, so whoever
 * judges or lands it, on whichever machine, fetches it from there; and
 * the one lander pushes the base after each landing.
 *
 * Fetched bases live under refs/remotes/baton/, out of the way of the
 * clone's own branches. Fetches never write FETCH_HEAD: workers of one
 * clone fetch side by side, and that file is one for all of them.
 */
#include "util/compat.h"

#include "util/buf.h"
#include "util/err.h"
#include "util/limits.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* A fetch or push over a slow link may take a while, but not forever. */
#define REMOTE_TIMEOUT_MS (300 * 1000)

/* Runs git in the repository; its output, trimmed, into out. */
static int
git(const struct workspace *ws, struct buf *out, struct err *e, ...)
{
	struct strvec argv = STRVEC_INIT;
	const char *arg;
	va_list ap;
	int rc;

	strvec_pushl(&argv, "git", "-C", ws->repo, NULL);
	va_start(ap, e);
	while ((arg = va_arg(ap, const char *)))
		strvec_push(&argv, arg);
	va_end(ap);
	rc = spawn_capture((const char *const *)argv.v, NULL, out,
			   BUF_MAX_GIT_OUTPUT, REMOTE_TIMEOUT_MS, e);
	if (!rc && out)
		buf_rtrim(out);
	strvec_clear(&argv);
	return rc;
}

/*
 * git fetch of one refspec. Two workers of this clone fetching the same
 * ref at once may find it locked by the other: one more try settles it.
 */
static int
fetch(const struct workspace *ws, const char *url, const char *refspec,
      struct err *e)
{
	int rc = git(ws, NULL, e, "fetch", "--quiet", "--no-write-fetch-head",
		     url, refspec, NULL);

	if (rc < 0) {
		*e = (struct err)ERR_INIT;
		rc = git(ws, NULL, e, "fetch", "--quiet",
			 "--no-write-fetch-head", url, refspec, NULL);
	}
	return rc;
}

int
remote_fetch_base(const struct workspace *ws, const char *url,
		  const char *branch, char **ref_out, struct err *e)
{
	char *ref = xasprintf("refs/remotes/baton/%s", branch);
	char *spec = xasprintf("+refs/heads/%s:%s", branch, ref);
	int rc = fetch(ws, url, spec, e);

	if (rc < 0)
		err_prefix(e, "cannot fetch the base '%s' from '%s'", branch,
			   url);
	free(spec);
	if (rc < 0) {
		free(ref);
		return rc;
	}
	*ref_out = ref;
	return 0;
}

int
remote_fetch_branch(const struct workspace *ws, const char *url,
		    const char *branch, struct err *e)
{
	struct err absent = ERR_INIT;
	char *ref = xasprintf("refs/heads/%s", branch), *spec;
	int rc;

	/* made here, or fetched before: git refuses to fetch into a branch
	 * a worktree has checked out, and there is nothing new to get */
	if (!git(ws, NULL, &absent, "rev-parse", "--verify", "--quiet", ref,
		 NULL)) {
		free(ref);
		return 0;
	}
	spec = xasprintf("+%s:%s", ref, ref);
	rc = fetch(ws, url, spec, e);
	if (rc < 0)
		err_prefix(e, "cannot fetch the branch '%s' from '%s'", branch,
			   url);
	free(spec);
	free(ref);
	return rc;
}

int
remote_push(const struct workspace *ws, const char *url, const char *branch,
	    int force, struct err *e)
{
	char *spec = xasprintf("%srefs/heads/%s:refs/heads/%s",
			       force ? "+" : "", branch, branch);
	int rc = git(ws, NULL, e, "push", "--quiet", url, spec, NULL);

	if (rc < 0)
		err_prefix(e, "cannot push '%s' to '%s'", branch, url);
	free(spec);
	return rc;
}
