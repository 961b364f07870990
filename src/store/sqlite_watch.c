/*
 * What the HTTP server reads beside the queue: run totals for /metrics,
 * and a wake-up when the database changes.
 *
 * Every writer of a SQLite database in WAL mode appends to the -wal file
 * beside it (and a checkpoint writes the database itself), so an
 * inotify watch on the folder hears every commit of every process
 * without any of them cooperating. The folder is watched rather than
 * the files because the -wal file comes and goes; the few other files
 * written there (the token, cursors) cost a needless look at most.
 */
#include "util/compat.h"

#include <libgen.h>
#include <sqlite3.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "store/sqlite_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/xalloc.h"

int
sqlite__run_stats(struct store *s, store_run_stat_cb *cb, void *arg,
		  struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "count runs";
	sqlite3_stmt *st = NULL;
	int rc, src, stop = 0;

	rc = sqlite__prepare(ss, &st,
			     "SELECT status, COUNT(*), TOTAL(tokens_in),"
			     " TOTAL(tokens_out), TOTAL(cost_usd)"
			     " FROM runs GROUP BY status ORDER BY status",
			     0, what, e);
	if (rc < 0)
		return rc;
	while (!stop && (src = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_run_stat rs = {
			.status = (const char *)sqlite3_column_text(st, 0),
			.runs = sqlite3_column_int64(st, 1),
			.tokens_in = (int64_t)sqlite3_column_double(st, 2),
			.tokens_out = (int64_t)sqlite3_column_double(st, 3),
			.cost_usd = sqlite3_column_double(st, 4),
		};

		stop = cb(&rs, arg);
	}
	if (!stop && src != SQLITE_DONE)
		rc = sqlite__fail(ss, e, what);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__event_last_seq(struct store *s, int64_t *out, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	const char *what = "read the last event";
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite__prepare(ss, &st, "SELECT COALESCE(MAX(seq), 0) FROM events",
			     0, what, e);
	if (rc == 0)
		rc = sqlite__step_int(ss, st, out, what, e);
	sqlite3_finalize(st);
	return rc;
}

int
sqlite__watch_fd(struct store *s, struct err *e)
{
	struct sqlite_store *ss = sqlite__store(s);
	char *dir;
	int fd;

	if (ss->watch_fd >= 0)
		return ss->watch_fd;
	fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "cannot watch '%s': %s", ss->path,
			       strerror(errno));
	dir = xstrdup(ss->path);
	if (inotify_add_watch(fd, dirname(dir), IN_MODIFY | IN_CREATE) < 0) {
		int rc = err_set(e, -errno, "cannot watch the folder of '%s': %s",
				 ss->path, strerror(errno));

		free(dir);
		close(fd);
		return rc;
	}
	free(dir);
	ss->watch_fd = fd;
	return fd;
}

/* Reads every pending notification; the names do not matter. */
unsigned
sqlite__watch_drain(struct store *s)
{
	struct sqlite_store *ss = sqlite__store(s);
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	unsigned any = 0;

	if (ss->watch_fd < 0)
		return 0;
	while (read(ss->watch_fd, buf, sizeof(buf)) > 0)
		any = STORE_WATCH_EVENTS | STORE_WATCH_WORK;
	return any;
}
