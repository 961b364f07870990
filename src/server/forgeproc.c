/*
 * serve's forge companion, the process "baton forge" (docs/forge.md,
 * "Sync and serve"): one forge_sync round at start, then one every
 * forge.poll_seconds and whenever someone calls forge_wake (a webhook),
 * which writes a byte into the FIFO this process reads,
 * .baton/forge-wake.d/<pid>.
 *
 *   start ──▶ round ──▶ wait: poll_seconds, or a byte in the FIFO ──▶ round
 *               │ error: logged, next round after a minute (or the poll)
 *               │ rate limit not waited out: no round (wake-ups too)
 *               ▼ until the reset GitHub named
 *
 * A round's error never ends the process. serve's SIGTERM (or its
 * death: PDEATHSIG) ends it at once, in the middle of a round if need
 * be: every step of a round is safe to cut (an intake is one
 * transaction, a task left blocked(issue_linking) is queued by the next
 * round, a run comment is marked before it is posted). Its FIFO is then
 * removed by the next forge_wake, which finds no reader.
 */
#include "util/compat.h"

#define LOG_MODULE "forge"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "forge/forge.h"
#include "server/server.h"
#include "server/server_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* A failed round is tried again after this, or poll_seconds if longer. */
#define FORGE_RETRY_MS (60 * 1000)
/* A rate limit's reset further away than this is not believed. */
#define FORGE_MAX_HOLD_MS (3600 * 1000)

/*
 * The token, taken out of serve's environment by forge_hold_token: only
 * the companion, in its own process, puts it back.
 */
static char *held_env, *held_token;

void
forge_hold_token(const struct config *cfg)
{
	const char *v;

	if (!cfg->forge.token_env || !(v = getenv(cfg->forge.token_env)))
		return;
	free(held_env);
	free(held_token);
	held_env = xstrdup(cfg->forge.token_env);
	held_token = xstrdup(v);
	unsetenv(held_env);
}

/* The FIFO of this process: made, opened for reading and writing (our
 * own writer keeps it from ever reading as closed). */
static int
open_fifo(const struct workspace *ws, int *rd, int *wr, struct err *e)
{
	char *dir = forge_wake_dir(ws), *path = NULL;
	int rc = fs_mkdir_p(dir, 0700, e);

	if (rc)
		goto out;
	path = xasprintf("%s/%ld", dir, (long)getpid());
	unlink(path);
	if (mkfifo(path, 0600) < 0) {
		rc = err_set(e, -errno, "cannot make the FIFO '%s': %s", path,
			     strerror(errno));
		goto out;
	}
	*rd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	*wr = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (*rd < 0 || *wr < 0)
		rc = err_set(e, -errno, "cannot open the FIFO '%s': %s", path,
			     strerror(errno));
out:
	free(path);
	free(dir);
	return rc;
}

/* One round, logged; returns when the next one is due (time_mono_ms). */
static int64_t
round_once(const struct server_opts *o, struct store *s, int64_t *hold)
{
	const struct config *cfg = o->cfg;
	struct forge_round r;
	struct err e = ERR_INIT;
	int64_t poll_ms = (int64_t)cfg->forge.poll_seconds * 1000;
	int64_t now = time_mono_ms(), wait_ms;
	int rc = forge_sync(cfg, s, o->ws, &r, &e);

	*hold = 0;
	if (r.imported || r.cancelled || r.linked || r.commented ||
	    r.prs_opened || r.merged)
		log_info("sync: imported %d, cancelled %d, linked %d, "
			 "commented %d, PRs opened %d, merged %d (%lld calls)",
			 r.imported, r.cancelled, r.linked, r.commented,
			 r.prs_opened, r.merged, (long long)r.calls);
	if (rc == BATON_EBUSY) {
		wait_ms = (r.retry_at - (int64_t)time(NULL)) * 1000;
		if (wait_ms < 1000)
			wait_ms = 1000;
		if (wait_ms > FORGE_MAX_HOLD_MS)
			wait_ms = FORGE_MAX_HOLD_MS;
		log_warn("sync: %s; the next round in %llds", e.msg,
			 (long long)(wait_ms / 1000));
		*hold = now + wait_ms;
		return now + wait_ms;
	}
	if (rc) {
		/* an error is not hammered at: a minute at least (a
		 * wake-up still brings a round sooner) */
		log_error("sync: %s", e.msg);
		return now + (poll_ms > FORGE_RETRY_MS ? poll_ms :
							 FORGE_RETRY_MS);
	}
	return poll_ms > 0 ? now + poll_ms : -1; /* -1: only wake-ups */
}

static void __attribute__((noreturn))
forge_main(const struct server_opts *o, int ready_fd)
{
	struct store *s = NULL;
	struct err e = ERR_INIT;
	int rd = -1, wr = -1;
	int64_t next, hold = 0;
	sigset_t stop;

	/*
	 * The stop signals end this process where it is (see the top of
	 * the file): their default action, unblocked.
	 */
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	if (held_env)
		setenv(held_env, held_token, 1);
	if (forge_check(o->cfg, &e) || store_open(o->store_spec, &s, &e) ||
	    open_fifo(o->ws, &rd, &wr, &e)) {
		dprintf(ready_fd, "ERR %s\n", e.msg);
		_exit(1);
	}
	dprintf(ready_fd, "OK %s\n", o->cfg->forge.repo);
	close(ready_fd);
	pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
	next = time_mono_ms(); /* a round at once: the backlog first */
	for (;;) {
		struct pollfd p = { rd, POLLIN, 0 };
		int64_t now = time_mono_ms();
		int timeout = -1, n;
		char drain[64];

		if (next >= 0 && now >= next)
			next = round_once(o, s, &hold);
		now = time_mono_ms();
		if (next >= 0) {
			int64_t left = next > now ? next - now : 0;

			/* poll takes an int: look again hourly at most */
			timeout =
			    (int)(left < FORGE_MAX_HOLD_MS ? left
							   : FORGE_MAX_HOLD_MS);
		}
		n = poll(&p, 1, timeout);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && (p.revents & POLLIN)) {
			while (read(rd, drain, sizeof(drain)) > 0)
				;
			/* a wake-up asks for a round now, not during a
			 * rate limit's hold */
			if (!hold || time_mono_ms() >= hold)
				next = time_mono_ms();
		}
	}
	log_error("the forge companion stops: poll: %s", strerror(errno));
	store_close(s);
	_exit(1);
}

int
forge_spawn(const struct server_opts *o, pid_t *pid, struct err *e)
{
	char detail[256];

	return server__fork_ready(forge_main, o, "baton forge", "forge sync",
				  pid, detail, sizeof(detail), e);
}
