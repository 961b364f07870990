/*
 * What the HTTP server reads beside the queue on PostgreSQL: run totals
 * for /metrics, and a wake-up when the database changes.
 *
 * The wake-up is a second connection that LISTENs on the channels
 * writes NOTIFY right after their commit (pg__commit: PG_CHANNEL_EVENTS
 * when events were appended, PG_CHANNEL_WORK with a count when claimable
 * work was made), whoever wrote and from whichever host. Callers poll one fd for the life of the handle, but a lost
 * connection takes its socket with it, so the fd they hold is our own
 * descriptor that we point, with dup3, at whatever stands behind it:
 *
 *	watch_fd --dup3--> the LISTEN socket     while connected
 *	         --dup3--> watch_dead[0]         while down: a pipe that
 *	                                         nobody writes, never
 *	                                         readable
 *
 * A dead socket reads as EOF, so the caller wakes and drains; the drain
 * sees the connection is gone, points the fd at the pipe (so that the
 * caller does not spin) and tries to reconnect, at most every
 * LISTEN_RETRY_MS. Once back, it says that everything may have changed:
 * what was notified meanwhile is lost.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <unistd.h>

#include "store/pg_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/timeutil.h"

#undef LOG_MODULE
#define LOG_MODULE "store"
#include "util/log.h"

/* The least time between two reconnect attempts of the LISTEN side. */
#define LISTEN_RETRY_MS 500

int
pg__run_stats(struct store *s, store_run_stat_cb *cb, void *arg,
	      struct err *e)
{
	struct pg_store *ps = pg__store(s);
	PGresult *res;
	int i, n, tries = 0, stop = 0;

	do
		res = pg__exec(ps,
			       "SELECT status, COUNT(*),"
			       " COALESCE(SUM(tokens_in), 0),"
			       " COALESCE(SUM(tokens_out), 0),"
			       " COALESCE(SUM(cost_usd), 0)"
			       " FROM runs GROUP BY status ORDER BY status",
			       0, NULL, "count runs", e);
	while (!res && pg__again(ps, BATON_ESTORE, &tries, e));
	if (!res)
		return BATON_ESTORE;
	n = PQntuples(res);
	for (i = 0; i < n && !stop; i++) {
		struct store_run_stat rs = {
			.status = PQgetvalue(res, i, 0),
			.runs = pg__int64(res, i, 1),
			.tokens_in = pg__int64(res, i, 2),
			.tokens_out = pg__int64(res, i, 3),
			.cost_usd = strtod(PQgetvalue(res, i, 4), NULL),
		};

		stop = cb(&rs, arg);
	}
	PQclear(res);
	return 0;
}

/*
 * Opens the LISTEN connection and points watch_fd at its socket.
 * Returns 0, or -1 with the fd left as it was.
 */
static int
listen_connect(struct pg_store *ps, struct err *e)
{
	PGconn *c = pg__connect(ps, NULL, NULL, e);
	PGresult *res;

	if (!c)
		return -1;
	res = PQexec(c,
		     "LISTEN " PG_CHANNEL_EVENTS "; LISTEN " PG_CHANNEL_WORK);
	if (PQresultStatus(res) != PGRES_COMMAND_OK ||
	    dup3(PQsocket(c), ps->watch_fd, O_CLOEXEC) < 0) {
		err_set(e, BATON_ESTORE, "cannot watch '%s': %s",
			ps->safe_url, PQerrorMessage(c));
		PQclear(res);
		PQfinish(c);
		return -1;
	}
	PQclear(res);
	ps->listen = c;
	return 0;
}

/*
 * The first call makes the pipe and the fd (on the pipe) and tries to
 * connect; a database that cannot be reached now is tried again by the
 * drain, so only the pipe can fail this.
 */
int
pg__watch_fd(struct store *s, struct err *e)
{
	struct pg_store *ps = pg__store(s);

	if (ps->watch_fd >= 0)
		return ps->watch_fd;
	if (pipe2(ps->watch_dead, O_CLOEXEC) < 0)
		return err_set(e, -errno, "cannot watch '%s': %s",
			       ps->safe_url, strerror(errno));
	ps->watch_fd = fcntl(ps->watch_dead[0], F_DUPFD_CLOEXEC, 0);
	if (ps->watch_fd < 0) {
		int rc = err_set(e, -errno, "cannot watch '%s': %s",
				 ps->safe_url, strerror(errno));

		pg__watch_close(ps);
		return rc;
	}
	if (listen_connect(ps, NULL) < 0)
		ps->listen_retry_at = time_mono_ms() + LISTEN_RETRY_MS;
	return ps->watch_fd;
}

/* The most units one drain reports (STORE_WATCH_UNITS). */
#define UNITS_MAX 0xffffffu

/*
 * Reads what the server sent; 0 when the connection is gone. A work
 * notification's payload is its count of units (pg__notify_work); one
 * without a number counts as one.
 */
static int
listen_read(struct pg_store *ps, unsigned *got)
{
	unsigned units = STORE_WATCH_UNITS(*got);
	PGnotify *n;

	if (!ps->listen || !PQconsumeInput(ps->listen))
		return 0;
	while ((n = PQnotifies(ps->listen))) {
		if (!strcmp(n->relname, PG_CHANNEL_EVENTS)) {
			*got |= STORE_WATCH_EVENTS;
		} else if (!strcmp(n->relname, PG_CHANNEL_WORK)) {
			long k = strtol(n->extra, NULL, 10);

			*got |= STORE_WATCH_WORK;
			units += k > 0 && k < 1000 ? (unsigned)k : 1;
			if (units > UNITS_MAX)
				units = UNITS_MAX;
		}
		PQfreemem(n);
	}
	*got = (*got & 0xffu) | units << 8;
	return PQstatus(ps->listen) == CONNECTION_OK;
}

unsigned
pg__watch_drain(struct store *s)
{
	struct pg_store *ps = pg__store(s);
	unsigned got = 0;
	int64_t now;

	if (ps->watch_fd < 0 || listen_read(ps, &got))
		return got;
	if (ps->listen) {
		log_warn("watch connection to %s lost", ps->safe_url);
		dup3(ps->watch_dead[0], ps->watch_fd, O_CLOEXEC);
		PQfinish(ps->listen);
		ps->listen = NULL;
	}
	now = time_mono_ms();
	if (now < ps->listen_retry_at)
		return got;
	ps->listen_retry_at = now + LISTEN_RETRY_MS;
	if (listen_connect(ps, NULL) < 0)
		return got;
	log_warn("watch connection to %s lost; reconnected", ps->safe_url);
	/* without a count: whatever was made meanwhile, wake everyone */
	return (got & 0xffu) | STORE_WATCH_EVENTS | STORE_WATCH_WORK;
}

void
pg__watch_close(struct pg_store *ps)
{
	PQfinish(ps->listen);
	ps->listen = NULL;
	if (ps->watch_fd >= 0)
		close(ps->watch_fd);
	if (ps->watch_dead[0] >= 0)
		close(ps->watch_dead[0]);
	if (ps->watch_dead[1] >= 0)
		close(ps->watch_dead[1]);
	ps->watch_fd = ps->watch_dead[0] = ps->watch_dead[1] = -1;
}
