/*
 * bench_queue: how fast worker processes drain baton's task queue, at
 * the level of the store (store.h), on a real SQLite file.
 *
 *   bench_queue [-n N] [-w LIST] [-d DIR] [--no-shm] [--host K]
 *       For each worker count W in LIST (default 1,4,16) and for two
 *       queues, N tasks (default 2000) with no area, then N tasks whose
 *       areas cycle through 8 values: adds the N tasks to a fresh
 *       database in DIR (default $TMPDIR or /tmp), forks W processes
 *       that each open their own store and loop
 *
 *           store_task_claim  ->  store_task_update (status done, lease
 *                                 fields cleared, a task_settled event)
 *
 *       until a claim finds nothing and nothing is left queued, exactly
 *       the two commits a `baton serve` worker makes around a run (its
 *       run and the agent are left out). Reports claims per second over
 *       the whole drain (from the moment every worker is ready to the
 *       last exit) and the p50/p99 latency of one claim call and of one
 *       settle call. Then, as a reference only, the same on /dev/shm
 *       (tmpfs, where fsync costs nothing).
 *
 *   bench_queue --store ADMIN_URL [-n N] [-w LIST] [-q QUEUES]
 *               [--samples S] [--analyze]
 *               [--settle-claim | --batch K [--settle-claim] |
 *                --host K [--hosts H]]
 *       The same drains on PostgreSQL. ADMIN_URL names a database of a
 *       server on which we may CREATE and DROP databases (the admin URL
 *       tools/pg.sh prints); every measurement gets a database of its
 *       own, baton_bench_<pid>_<k>, dropped after it, so no drain starts
 *       on another's dead rows. QUEUES picks "noarea", "areas8" or both
 *       (the default). Then, for each W, enqueue-to-start latency: W
 *       workers wait idle as baton serve's do on PostgreSQL: one
 *       supervisor process LISTENs (its store's store_watch_fd) and,
 *       for each unit of work store_watch_drain reports
 *       (STORE_WATCH_UNITS), wakes one idle worker through a pipe,
 *       which claims until a claim finds nothing; the
 *       bench process adds S tasks (default 200; 0: none) one at a
 *       time, each 10 to 20 ms after the previous one was settled, so
 *       each lands on an idle pool. A sample is the time the claim that
 *       took the task returned, in the worker, minus the time just
 *       before store_task_add was called, in the bench process (one
 *       monotonic clock: same machine). It includes the add's commit,
 *       the NOTIFY, the wake-up and the claim. --analyze (after
 *       --store) runs ANALYZE between the fill and each drain: not
 *       what baton does, a diagnostic (see pg_analyze).
 *       --settle-claim: every worker settles with
 *       store_task_settle_claim, which claims its next task in the
 *       settle's transaction (one commit a task on PostgreSQL): the
 *       "claim" figures are then those of the claims that settle did not
 *       make for it (the first, and after it found none), the "settle"
 *       ones include the next claim.
 *       --batch K: every worker claims up to K tasks in one transaction
 *       and settles them in one (store_task_claim_batch and
 *       store_task_settle_batch, graphile-worker's local queue); a
 *       batch's times are shared evenly over its tasks. The latency
 *       runs stay one at a time. Also without --store, on SQLite.
 *       With --settle-claim, the settle of a batch claims the next one
 *       (store_task_settle_claim_batch: one transaction a batch, the
 *       way a host's rounds go); the claim figures are then those of
 *       the claim calls the settles did not make for it.
 *       --host K: one claimer per host feeding its workers. One
 *       process (the host) holds the only store connection and forks W
 *       workers that hold none: each gets a task id through a socket,
 *       does nothing with it and hands it back. A round of the host is
 *       one store_task_settle_claim_batch (one transaction on
 *       PostgreSQL): the settles of what came back and claims for the
 *       idle workers and for up to K more to wait (0: none wait). With
 *       K, finished tasks gather while the waiting ones are handed out,
 *       up to K of them, so a round settles and claims more at once. A
 *       round's time is shared evenly over its settles and claims. The
 *       latency runs stay one worker, one claim. Also on SQLite.
 *       --hosts H (with --host): H such hosts share the queue, the W
 *       workers split evenly between them, each host with its own
 *       connection and its rounds in flight beside the others', as H
 *       machines would run.
 *
 *   bench_queue [--store ADMIN_URL | -d DIR] --keeper K
 *       What a serve worker's lease keeper costs a task, K tasks each
 *       way, on one claimed task of a fresh database: a keeper a task
 *       (store_open, one store_task_renew, store_close: what a worker did
 *       until it kept one keeper for all its tasks) against a renewal on
 *       a connection kept open (what it does now). Prints the mean and
 *       p50/p99 of each, in us.
 *
 *   bench_queue --fill DBPATH COUNT [AREAS]
 *       Replaces the database at DBPATH (the .baton/baton.db of "baton
 *       init") with one holding COUNT queued tasks, each with its
 *       task_added event as `baton task add` writes it; with AREAS, task
 *       i has the area "src/mod<i % AREAS>". The tasks are written
 *       through the store on tmpfs and copied with SQLite's backup API,
 *       so 10,000 tasks take about a second rather than 10,000 fsyncs.
 *
 * A claim that finds nothing while tasks are still queued (with areas:
 * every queued task's area is held by another worker for the moment) is
 * counted in "idle" and not in the latency figures; the worker then
 * waits until another worker settles a task, as an idle serve worker
 * waits to be woken, and claims again. After each
 * drain the benchmark checks that every task was claimed exactly once
 * and is done; if not, it says so and exits 1: that would be a bug in
 * the claim, not a figure.
 *
 * Exit status: 0 when every call succeeded, 1 when one failed (the
 * message says which), 2 for a usage error.
 */
#include "util/compat.h"

#include <dirent.h>
#include <libpq-fe.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "core/run.h"
#include "store/store.h"
#include "util/err.h"
#include "util/xalloc.h"

/* A benchmark races bare child processes against each other: banned.h keeps
 * fork and waitpid for spawn.c in baton itself, not here. */
#undef fork
#undef kill
#undef waitpid

#define DEFAULT_N    2000
#define MAX_WORKERS  64
#define AREAS	     8
#define LEASE_MS     (30 * 1000)
#define DEFAULT_LIST "1,4,16"
#define STUCK_PAUSES (5 * 10000) /* 5 s of 100 us pauses */
#define DEFAULT_SAMPLES 200
/*
 * Latency: the pause between one sample's settle and the next add, drawn
 * from [GAP_MIN_MS, GAP_MAX_MS] so that the adds do not keep step with
 * anything periodic; and how long a sample may wait for its claim before
 * we call the wake-up lost.
 */
#define GAP_MIN_MS     10
#define GAP_MAX_MS     20
#define LAT_TIMEOUT_MS 5000
/*
 * An idle latency worker also wakes this often and drains, as serve's
 * loop does (store.h: a lost LISTEN connection is mended by the drain);
 * it claims only when the drain reports work.
 */
#define WATCH_TICK_MS 1000

/*
 * What the workers of one drain write and the parent reads: shared,
 * anonymous memory mapped before the fork. Worker i owns slots
 * [i * n, i * n + count[i]) of the two latency arrays.
 */
struct shared {
	int64_t *claim_ns; /* [w * n] */
	int64_t *settle_ns;
	int64_t *count;	      /* [w]: tasks claimed by worker i */
	int64_t *empty;	      /* [w]: claims that found nothing early */
	atomic_int *seen;     /* [n + 1]: times task id was claimed */
	atomic_long *settled; /* tasks settled so far, by all workers */
	atomic_long *rounds;  /* --host: the hosts' rounds */
	void *map;
	size_t map_len;
};

/* One drain's figures. */
struct result {
	double adds_per_s; /* filling the queue, one add at a time */
	double claims_per_s;
	double claim_p50_us, claim_p99_us;
	double settle_p50_us, settle_p99_us;
	int64_t empty;
	int64_t rounds; /* --host */
};

/*
 * Parses "1,4,16" into ws[], at most max of them, each 1..MAX_WORKERS.
 * Returns how many.
 */
static size_t
worker_list(const char *s, int *ws, size_t max)
{
	char *copy = xstrdup(s), *p, *save = NULL;
	size_t n = 0;

	for (p = strtok_r(copy, ",", &save); p;
	     p = strtok_r(NULL, ",", &save)) {
		long w = count_arg(p, "a worker count");

		if (w > MAX_WORKERS || n == max) {
			fprintf(stderr,
				"bench_queue: -w takes up to %zu counts of "
				"1 to %d workers\n",
				max, MAX_WORKERS);
			exit(2);
		}
		ws[n++] = (int)w;
	}
	free(copy);
	if (!n)
		count_arg("", "a worker count");
	return n;
}


/*
 * Adds task number i to s as `baton task add` does (sched_task_add):
 * queued, max_attempts 3, one task_added event, its own durable
 * transaction. With areas, it gets "src/mod<i % areas>". Returns the
 * store's result, with e set on failure.
 */
static int
add_task(struct store *s, long i, int areas, struct err *e)
{
	struct task t = { 0 };
	struct event ev = { 0 };
	char title[80], area[32], data[200];
	int rc;

	snprintf(title, sizeof(title), "bench task %ld: add a --version flag",
		 i);
	t.title = title;
	t.status = (char *)TASK_QUEUED;
	t.max_attempts = 3;
	if (areas) {
		snprintf(area, sizeof(area), "src/mod%ld", i % areas);
		t.area = area;
	}
	snprintf(data, sizeof(data),
		 "{\"title\":\"%s\",\"area\":%s%s%s,\"priority\":0,"
		 "\"depends_on\":[],\"origin\":null}",
		 title, areas ? "\"" : "", areas ? area : "null",
		 areas ? "\"" : "");
	ev.type = (char *)"task_added";
	ev.data = data;
	rc = store_task_add(s, &t, &ev, e);
	/* the store allocated the defaults it applied */
	t.title = t.status = t.area = NULL;
	task_release(&t);
	return rc;
}

/* Adds tasks 1..count to s (add_task) or fails. */
static void
add_tasks(struct store *s, long count, int areas)
{
	struct err e = ERR_INIT;
	long i;

	for (i = 1; i <= count; i++)
		if (add_task(s, i, areas, &e))
			fail("%s", e.msg);
}

/*
 * t and ev as sched__settle makes them for a run that succeeded (data
 * holds the event's text).
 */
static void
settle_row(struct task *t, struct event *ev, char *data, size_t size)
{
	run_set(&t->status, TASK_DONE);
	run_set(&t->block_reason, NULL);
	run_set(&t->reason, NULL);
	FREE_AND_NULL(t->lease_holder);
	t->lease_token = 0;
	t->lease_expires_at = 0;
	t->failure_count = 0;
	t->ended_at = wall_ms();
	snprintf(data, size,
		 "{\"run\":\"r%lld-bench\",\"status\":\"done\","
		 "\"block_reason\":null,\"reason\":null}",
		 (long long)t->id);
	*ev = (struct event){ .type = (char *)"task_settled", .data = data };
}

/*
 * Settles t as sched__settle does for a run that succeeded: done, the
 * lease cleared, a task_settled event, one versioned update. t keeps
 * its strings (the caller releases it). With next (--settle-claim),
 * through store_task_settle_claim, which also claims the next task for
 * holder in the same transaction: next->id 0 when there was none.
 */
static int
settle_next(struct store *s, struct task *t, const char *holder,
	    struct task *next, struct err *e)
{
	struct event ev = { 0 };
	char data[120];

	settle_row(t, &ev, data, sizeof(data));
	if (next)
		return store_task_settle_claim(s, t, &ev, holder, LEASE_MS,
					       next, e);
	return store_task_update(s, t, &ev, e);
}


/* ---- where the databases are: a directory, or a PostgreSQL server ---- */

/*
 * With --store, the server's admin URL and a connection to it, the
 * number of databases made so far (for their names) and the one that
 * exists now, dropped at exit if a failure left it behind. NULL admin
 * means SQLite files in a directory.
 */
static const char *pg_admin_url;
static PGconn *pg_admin;
static int pg_made;
static char *pg_current;
/*
 * --analyze: ANALYZE the fresh database once its queue is filled, before
 * the drain. Not what baton does (autovacuum analyzes, up to a minute
 * later): a diagnostic, to tell the cost of the claim's plan on a table
 * never analyzed from the cost of the claim itself.
 */
static int pg_analyze;
/*
 * --settle-claim: workers settle through store_task_settle_claim, which
 * claims their next task in the settle's transaction (one commit a task
 * on PostgreSQL); a claim call is made only when it found none.
 */
static int batched;
/*
 * --batch K: workers claim up to K tasks at once and settle them at once
 * (store_task_claim_batch, store_task_settle_batch), graphile-worker's
 * local queue; 0: one at a time.
 */
static size_t batch_k;
/*
 * --host K: one claimer per host feeding its workers. One process (the
 * host) holds the only store connection and, in each round, settles
 * what its workers finished and claims for the idle ones in one call
 * (store_task_settle_claim_batch, one transaction on PostgreSQL),
 * keeping up to K claimed tasks waiting beyond them (0: claims only for
 * idle workers). host_mode says --host was given. --hosts H: H such
 * hosts share the queue, the W workers split evenly between them, as H
 * machines would (each its own connection, its rounds in flight at the
 * same time as the others').
 */
static int host_mode;
static size_t host_k;
static int host_count = 1;

/* Runs sql on the admin connection or fails. */
static void
admin_exec(const char *sql)
{
	PGresult *res = PQexec(pg_admin, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK &&
	    PQresultStatus(res) != PGRES_TUPLES_OK)
		fail("%s: %s", sql, PQerrorMessage(pg_admin));
	PQclear(res);
}

/* Connects to the admin URL given with --store, or fails. */
static void
admin_connect(const char *url)
{
	pg_admin_url = url;
	pg_admin = PQconnectdb(url);
	if (PQstatus(pg_admin) != CONNECTION_OK)
		fail("cannot connect to '%s': %s", url,
		     PQerrorMessage(pg_admin));
}

/*
 * The URL of database name on the admin URL's server: the admin URL
 * with its path replaced, its query (if any) kept. Caller frees.
 */
static char *
db_url(const char *admin, const char *name)
{
	const char *auth = strstr(admin, "://"), *path, *query;

	if (!auth)
		fail("--store wants a postgres:// URL, not '%s'", admin);
	auth += 3;
	query = strchr(auth, '?');
	if (!query)
		query = auth + strlen(auth);
	path = strchr(auth, '/');
	if (!path || path > query)
		path = query;
	return xasprintf("%.*s/%s%s", (int)(path - admin), admin, name, query);
}

/*
 * A fresh, empty database for one measurement: on PostgreSQL a new
 * database (CREATE DATABASE copies template1: no rows, no dead tuples,
 * a cold cache as a new deployment has), on SQLite dir/queue.db
 * removed first. Returns the store spec; caller frees it after
 * db_drop().
 */
static char *
db_fresh(const char *dir)
{
	char name[64], *sql;

	if (!pg_admin) {
		char *path = xasprintf("%s/queue.db", dir);

		remove_db(path);
		return path;
	}
	snprintf(name, sizeof(name), "baton_bench_%ld_%d", (long)getpid(),
		 ++pg_made);
	sql = xasprintf("CREATE DATABASE %s", name);
	admin_exec(sql);
	free(sql);
	pg_current = xstrdup(name);
	return db_url(pg_admin_url, name);
}

/* Drops what db_fresh made (WITH (FORCE): a dead worker's session too). */
static void
db_drop(const char *spec)
{
	char *sql;

	if (!pg_admin) {
		remove_db(spec);
		return;
	}
	if (!pg_current)
		return;
	sql = xasprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pg_current);
	FREE_AND_NULL(pg_current);
	admin_exec(sql);
	free(sql);
}

/* ANALYZE the database at url (see pg_analyze), or fail. */
static void
db_analyze(const char *url)
{
	PGconn *c = PQconnectdb(url);
	PGresult *res = NULL;

	if (PQstatus(c) == CONNECTION_OK)
		res = PQexec(c, "ANALYZE");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fail("cannot analyze '%s': %s", url, PQerrorMessage(c));
	PQclear(res);
	PQfinish(c);
}

/*
 * At exit: the database a failure left behind. Only the bench process
 * registers this; workers leave with _exit.
 */
static void
db_cleanup(void)
{
	if (pg_admin && pg_current) {
		char *sql = xasprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)",
				      pg_current);

		PQclear(PQexec(pg_admin, sql));
		free(sql);
		FREE_AND_NULL(pg_current);
	}
	PQfinish(pg_admin);
	pg_admin = NULL;
}

/* Maps the shared area for w workers draining n tasks. */
static void
shared_map(struct shared *sh, int w, size_t n)
{
	size_t lat = (size_t)w * n * sizeof(int64_t);
	size_t per = (size_t)w * sizeof(int64_t);
	char *p;

	memset(sh, 0, sizeof(*sh));
	sh->map_len = 2 * lat + 2 * per + 2 * sizeof(atomic_long) +
		      (n + 1) * sizeof(atomic_int);
	sh->map = mmap(NULL, sh->map_len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh->map == MAP_FAILED)
		fail("cannot map %zu bytes: %s", sh->map_len, strerror(errno));
	p = sh->map; /* zero-filled by the kernel */
	sh->claim_ns = (int64_t *)p;
	p += lat;
	sh->settle_ns = (int64_t *)p;
	p += lat;
	sh->count = (int64_t *)p;
	p += per;
	sh->empty = (int64_t *)p;
	p += per;
	sh->settled = (atomic_long *)p;
	p += sizeof(atomic_long);
	sh->rounds = (atomic_long *)p;
	p += sizeof(atomic_long);
	sh->seen = (atomic_int *)p;
}

static void
shared_unmap(struct shared *sh)
{
	munmap(sh->map, sh->map_len);
	memset(sh, 0, sizeof(*sh));
}

/*
 * Whether any task is still queued (a claim that found none was early);
 * -1 when the store cannot say. Called in the workers, so it does not
 * exit: exit() would run the parent's atexit cleanup in the child.
 */
static int
any_queued(struct store *s, int idx)
{
	static const char *const queued[] = { TASK_QUEUED };
	struct err e = ERR_INIT;
	int64_t n = 0;

	if (store_task_counts(s, queued, &n, 1, &e)) {
		fprintf(stderr, "bench_queue: worker %d: %s\n", idx, e.msg);
		return -1;
	}
	return n > 0;
}

/*
 * A claim found nothing while tasks are queued: every queued task's area
 * is held. Waits, as an idle serve worker does, until some task is
 * settled after settled (serve wakes its idle workers then), rather
 * than spin on the write lock and starve that settle.
 */
static void
wait_for_settle(struct shared *sh, int idx, long settled)
{
	const struct timespec pause = { 0, 100 * 1000 }; /* 100 us */
	long waited;

	for (waited = 0; atomic_load(sh->settled) == settled; waited++) {
		if (waited == STUCK_PAUSES) {
			fprintf(stderr,
				"bench_queue: worker %d: a claim finds "
				"nothing, tasks are queued and none was "
				"settled for 5 s\n",
				idx);
			_exit(1);
		}
		nanosleep(&pause, NULL);
	}
}

/*
 * A claim found nothing: 0 when the queue is drained (the worker is
 * done); 1 when tasks are still queued, every one's area held, after
 * waiting for a settle as above.
 */
static int
claimed_nothing(struct store *s, struct shared *sh, int idx, long settled)
{
	int rc = any_queued(s, idx);

	if (rc < 0)
		_exit(1);
	if (!rc)
		return 0;
	sh->empty[idx]++;
	wait_for_settle(sh, idx, settled);
	return 1;
}

/*
 * The worker of --batch K: claims up to K tasks at once
 * (store_task_claim_batch) and settles them at once
 * (store_task_settle_batch), each as settle_next does; with
 * --settle-claim, the settle of a batch claims the next one in its
 * transaction (store_task_settle_claim_batch), and a claim call is made
 * only when that found none. A batch's claim and settle times are
 * shared out evenly over its tasks.
 */
static _Noreturn void
batch_worker(struct store *s, const char *holder, int idx, size_t n,
	     struct shared *sh)
{
	struct task *got = xcalloc(batch_k, sizeof(*got));
	struct task *next = xcalloc(batch_k, sizeof(*next));
	struct store_settle *v = xcalloc(batch_k, sizeof(*v));
	struct event *ev = xcalloc(batch_k, sizeof(*ev));
	char (*data)[120] = xcalloc(batch_k, sizeof(*data));
	int64_t *claim_ns = sh->claim_ns + (size_t)idx * n;
	int64_t *settle_ns = sh->settle_ns + (size_t)idx * n;
	struct err e = ERR_INIT;
	int64_t t0, t1, t2, claimed_in = 0;
	size_t k = 0, k_next = 0, i;
	int rc;

	for (;;) {
		long settled = atomic_load(sh->settled);
		struct task *swap;

		if (k == 0) {
			t0 = mono_ns();
			rc = store_task_claim_batch(s, holder, LEASE_MS,
						    batch_k, got, &k, &e);
			claimed_in = mono_ns() - t0;
			if (rc == BATON_ENOTFOUND) {
				e = (struct err)ERR_INIT;
				k = 0;
				if (!claimed_nothing(s, sh, idx, settled))
					break;
				continue;
			}
			if (rc) {
				fprintf(stderr, "bench_queue: worker %d: %s\n",
					idx, e.msg);
				_exit(1);
			}
		}
		for (i = 0; i < k; i++) {
			struct task *t = &got[i];

			if (t->id < 1 || (size_t)t->id > n ||
			    (size_t)sh->count[idx] + i >= n) {
				fprintf(stderr,
					"bench_queue: WRONG COUNT: worker %d "
					"claimed task %lld (1..%zu queued)\n",
					idx, (long long)t->id, n);
				_exit(1);
			}
			atomic_fetch_add(&sh->seen[t->id], 1);
			v[i] = (struct store_settle){ .task = t, .ev = &ev[i],
						      .token = t->lease_token };
			settle_row(t, &ev[i], data[i], sizeof(data[i]));
		}
		t1 = mono_ns();
		k_next = 0;
		rc = batched ? store_task_settle_claim_batch(s, v, k, holder,
							     LEASE_MS, batch_k,
							     next, &k_next,
							     &e) :
			       store_task_settle_batch(s, v, k, &e);
		t2 = mono_ns();
		for (i = 0; rc == 0 && i < k; i++)
			if (v[i].rc) {
				fprintf(stderr, "bench_queue: worker %d: task "
					"%lld not settled (%d)\n",
					idx, (long long)got[i].id, v[i].rc);
				_exit(1);
			}
		if (rc) {
			fprintf(stderr, "bench_queue: worker %d: %s\n", idx,
				e.msg);
			_exit(1);
		}
		for (i = 0; i < k; i++) {
			claim_ns[sh->count[idx]] = claimed_in / (int64_t)k;
			settle_ns[sh->count[idx]++] = (t2 - t1) / (int64_t)k;
			task_release(&got[i]);
		}
		atomic_fetch_add(sh->settled, (long)k);
		swap = got, got = next, next = swap;
		k = k_next;
		claimed_in = 0;
	}
	store_close(s);
	_exit(0);
}

/*
 * A worker of --host: no store of its own. It reads a task id (8 bytes)
 * from fd, does the task's work (none: the run is left out, as in
 * every drain), writes the id back, until EOF.
 */
static _Noreturn void
host_worker(int fd)
{
	int64_t id;

	while (read(fd, &id, sizeof(id)) == sizeof(id))
		if (write(fd, &id, sizeof(id)) != sizeof(id))
			_exit(1);
	_exit(0);
}

/* The host's view of one drain (host_claimer). */
struct host {
	struct store *s;
	struct shared *sh;
	size_t n; /* tasks in the queue */
	int idx;  /* which host: its slot in sh */
	int w;
	int fd[MAX_WORKERS];
	int busy[MAX_WORKERS];
	struct task *ready; /* claimed, not yet handed out: a FIFO */
	size_t nready, cap;
	struct task *out;   /* a round's claims */
	struct task *run;   /* by worker: the task it runs */
	struct task *fin;   /* finished, to settle in the next round */
	struct store_settle *v;
	struct event *ev;
	char (*data)[120];
	size_t nfin;
};

/* Hands claimed tasks to idle workers, oldest first. */
static void
host_dispatch(struct host *h)
{
	int i;

	for (i = 0; i < h->w && h->nready; i++) {
		if (h->busy[i])
			continue;
		h->run[i] = h->ready[0];
		memmove(h->ready, h->ready + 1,
			--h->nready * sizeof(*h->ready));
		h->busy[i] = 1;
		if (write(h->fd[i], &h->run[i].id, sizeof(int64_t)) !=
		    sizeof(int64_t)) {
			fprintf(stderr, "bench_queue: host: worker %d left\n",
				i);
			_exit(1);
		}
	}
}

/*
 * Takes in what the workers finished: waits up to timeout ms (-1:
 * until one does) for the first, then takes whatever else is there.
 */
static void
host_collect(struct host *h, int timeout)
{
	struct pollfd pf[MAX_WORKERS];
	int64_t id;
	int i, k;

	for (i = 0; i < h->w; i++)
		pf[i] = (struct pollfd){ .fd = h->busy[i] ? h->fd[i] : -1,
					 .events = POLLIN };
	k = poll(pf, (nfds_t)h->w, timeout);
	for (i = 0; k > 0 && i < h->w; i++) {
		if (!pf[i].revents)
			continue;
		if (read(h->fd[i], &id, sizeof(id)) != sizeof(id) ||
		    id != h->run[i].id) {
			fprintf(stderr, "bench_queue: host: worker %d did not "
				"hand back task %lld\n", i,
				(long long)h->run[i].id);
			_exit(1);
		}
		h->fin[h->nfin++] = h->run[i];
		memset(&h->run[i], 0, sizeof(h->run[i]));
		h->busy[i] = 0;
	}
}

/*
 * One round: the finished tasks settled and claims for the idle workers
 * (and up to K waiting) in one call. Its time is shared evenly over its
 * settles and claims. Returns how many it claimed.
 */
static size_t
host_round(struct host *h)
{
	int64_t *claim_ns = h->sh->claim_ns, *settle_ns = h->sh->settle_ns;
	size_t idle = 0, want, got = 0, i, nfin = h->nfin;
	struct err e = ERR_INIT;
	int64_t t0, each;
	int rc, j;

	for (j = 0; j < h->w; j++)
		idle += !h->busy[j];
	want = idle + host_k > h->nready ? idle + host_k - h->nready : 0;
	for (i = 0; i < nfin; i++) {
		h->v[i] = (struct store_settle){ .task = &h->fin[i],
						 .ev = &h->ev[i],
						 .token = h->fin[i].lease_token };
		settle_row(&h->fin[i], &h->ev[i], h->data[i],
			   sizeof(h->data[i]));
	}
	t0 = mono_ns();
	rc = store_task_settle_claim_batch(h->s, h->v, nfin, "bench-host",
					   LEASE_MS, want, h->out, &got, &e);
	each = (mono_ns() - t0) / (int64_t)(nfin + got ? nfin + got : 1);
	for (i = 0; rc == 0 && i < nfin; i++)
		if (h->v[i].rc) {
			fprintf(stderr, "bench_queue: host: task %lld not "
				"settled (%d)\n",
				(long long)h->fin[i].id, h->v[i].rc);
			_exit(1);
		}
	if (rc) {
		fprintf(stderr, "bench_queue: host: %s\n", e.msg);
		_exit(1);
	}
	for (i = 0; i < nfin; i++)
		task_release(&h->fin[i]);
	h->nfin = 0;
	atomic_fetch_add(h->sh->settled, (long)nfin);
	for (i = 0; i < got; i++) {
		struct task *t = &h->out[i];

		if (t->id < 1 || (size_t)t->id > h->n ||
		    (size_t)h->sh->count[h->idx] >= h->n) {
			fprintf(stderr, "bench_queue: WRONG COUNT: the host "
				"claimed task %lld (1..%zu queued)\n",
				(long long)t->id, h->n);
			_exit(1);
		}
		atomic_fetch_add(&h->sh->seen[t->id], 1);
		claim_ns[(size_t)h->idx * h->n + h->sh->count[h->idx]] = each;
		settle_ns[(size_t)h->idx * h->n + h->sh->count[h->idx]++] =
			each;
		h->ready[h->nready++] = *t;
	}
	return got;
}

/*
 * The host of --host: forks its w workers, says it is ready, waits for
 * the go, then runs rounds until the queue is drained: a round settles
 * what finished and claims, the claims are handed to idle workers, and
 * the host waits for at least one to finish (taking every other one
 * that has) before the next round; with K, it hands out the waiting
 * tasks as workers finish until none is left or K have finished. A
 * round that settled and claimed nothing counts as an empty claim.
 * Host idx of --hosts writes its figures into slot idx of sh. Never
 * returns.
 */
static _Noreturn void
host_claimer(const char *path, int idx, int w, size_t n, int ready_fd,
	     int go_fd, struct shared *sh)
{
	struct host h = { .sh = sh, .n = n, .idx = idx, .w = w };
	struct err e = ERR_INIT;
	size_t got;
	int i, busy, sp[2];
	char c;

	h.cap = (size_t)w + host_k;
	h.ready = xcalloc(h.cap, sizeof(*h.ready));
	h.out = xcalloc(h.cap, sizeof(*h.out));
	h.run = xcalloc((size_t)w, sizeof(*h.run));
	h.fin = xcalloc(h.cap, sizeof(*h.fin));
	h.v = xcalloc(h.cap, sizeof(*h.v));
	h.ev = xcalloc(h.cap, sizeof(*h.ev));
	h.data = xcalloc(h.cap, sizeof(*h.data));
	for (i = 0; i < w; i++) {
		pid_t pid;

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
			_exit(1);
		pid = fork();
		if (pid < 0)
			_exit(1);
		if (pid == 0) {
			close(sp[0]);
			close(ready_fd);
			close(go_fd);
			while (i-- > 0)
				close(h.fd[i]);
			host_worker(sp[1]);
		}
		close(sp[1]);
		h.fd[i] = sp[0];
	}
	if (store_open(path, &h.s, &e)) {
		fprintf(stderr, "bench_queue: host: %s\n", e.msg);
		_exit(1);
	}
	if (write(ready_fd, "r", 1) != 1 || read(go_fd, &c, 1) != 0)
		_exit(1);
	for (;;) {
		size_t settles = h.nfin;

		got = host_round(&h);
		atomic_fetch_add(sh->rounds, 1);
		if (!settles && !got)
			sh->empty[idx]++; /* a round that did nothing */
		host_dispatch(&h);
		for (busy = 0, i = 0; i < w; i++)
			busy += h.busy[i];
		if (!busy && host_count > 1 && any_queued(h.s, 0) > 0) {
			/* another host's round holds the rest locked */
			poll(NULL, 0, 1);
			continue;
		}
		if (!busy) {
			/* nothing running, nothing waiting: drained, or a
			 * bug (a host that runs nothing holds no area) */
			if (any_queued(h.s, 0) != 0) {
				fprintf(stderr, "bench_queue: host: tasks "
					"are queued and none can be "
					"claimed\n");
				_exit(1);
			}
			break;
		}
		/* with tasks waiting, the finished ones gather for a
		 * bigger round while the workers take the waiting ones */
		do {
			host_collect(&h, -1);
			host_dispatch(&h);
		} while (h.nready && h.nfin < host_k);
	}
	for (i = 0; i < w; i++)
		close(h.fd[i]);
	while (wait(NULL) > 0)
		;
	store_close(h.s);
	_exit(0);
}

/*
 * A worker process: opens its own store, says it is ready on ready_fd,
 * waits for go_fd to close, then claims and settles until nothing is
 * left. Writes its latencies into sh; never returns.
 */
static _Noreturn void
worker(const char *path, int idx, size_t n, int ready_fd, int go_fd,
       struct shared *sh)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	struct task next = { 0 };
	char holder[64], c;
	int64_t *claim_ns = sh->claim_ns + (size_t)idx * n;
	int64_t *settle_ns = sh->settle_ns + (size_t)idx * n;
	int64_t t0, t1, t2;
	int rc;

	if (store_open(path, &s, &e)) {
		fprintf(stderr, "bench_queue: worker %d: %s\n", idx, e.msg);
		_exit(1);
	}
	snprintf(holder, sizeof(holder), "bench:%ld:%d", (long)getpid(), idx);
	if (write(ready_fd, "r", 1) != 1 || read(go_fd, &c, 1) != 0)
		_exit(1);
	if (batch_k)
		batch_worker(s, holder, idx, n, sh);
	for (;;) {
		struct task t = { 0 };
		long settled = atomic_load(sh->settled);

		t0 = mono_ns();
		if (next.id) { /* claimed by the last settle */
			t = next;
			memset(&next, 0, sizeof(next));
			rc = 0;
		} else {
			rc = store_task_claim(s, holder, LEASE_MS, &t, &e);
		}
		t1 = mono_ns();
		if (rc == BATON_ENOTFOUND) {
			e = (struct err)ERR_INIT;
			if (!claimed_nothing(s, sh, idx, settled))
				break;
			continue;
		}
		if (rc) {
			fprintf(stderr, "bench_queue: worker %d: %s\n", idx,
				e.msg);
			_exit(1);
		}
		if (t.id < 1 || (size_t)t.id > n ||
		    (size_t)sh->count[idx] == n) {
			fprintf(stderr,
				"bench_queue: WRONG COUNT: worker %d claimed "
				"task %lld (1..%zu queued), its claim number "
				"%lld\n",
				idx, (long long)t.id, n,
				(long long)sh->count[idx] + 1);
			_exit(1);
		}
		atomic_fetch_add(&sh->seen[t.id], 1);
		claim_ns[sh->count[idx]] = t1 - t0;
		rc = settle_next(s, &t, holder, batched ? &next : NULL, &e);
		t2 = mono_ns();
		if (rc) {
			fprintf(stderr, "bench_queue: worker %d: %s\n", idx,
				e.msg);
			_exit(1);
		}
		settle_ns[sh->count[idx]++] = t2 - t1;
		atomic_fetch_add(sh->settled, 1);
		task_release(&t);
	}
	store_close(s);
	_exit(0);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The nearest-rank percentile p (1..100) of sorted v[0..n), in us. */
static double
percentile_us(const int64_t *v, size_t n, unsigned p)
{
	size_t rank = (n * p + 99) / 100;

	return n ? (double)v[rank ? rank - 1 : 0] / 1e3 : 0;
}

/*
 * Gathers every worker's latencies of one kind (base: claim_ns or
 * settle_ns) into one sorted array and reads p50 and p99 off it.
 */
static void
latencies(const struct shared *sh, const int64_t *base, int w, size_t n,
	  double *p50, double *p99)
{
	int64_t *all = xcalloc(n ? n : 1, sizeof(*all));
	size_t k = 0;
	int i;

	for (i = 0; i < w; i++) {
		memcpy(all + k, base + (size_t)i * n,
		       (size_t)sh->count[i] * sizeof(*all));
		k += (size_t)sh->count[i];
	}
	qsort(all, k, sizeof(*all), cmp_i64);
	*p50 = percentile_us(all, k, 50);
	*p99 = percentile_us(all, k, 99);
	free(all);
}

/*
 * Checks what the drain must have done: n claims in all, every task
 * claimed exactly once, every task done. Exits 1 naming the first
 * thing that is wrong.
 */
static void
check_drain(const char *path, const struct shared *sh, int w, size_t n)
{
	static const char *const done[] = { TASK_DONE };
	struct err e = ERR_INIT;
	struct store *s;
	int64_t claims = 0, ndone = 0;
	size_t id;
	int i;

	for (i = 0; i < w; i++)
		claims += sh->count[i];
	for (id = 1; id <= n; id++)
		if (atomic_load(&sh->seen[id]) != 1)
			fail("WRONG COUNT: task %zu was claimed %d times "
			     "(database %s)",
			     id, atomic_load(&sh->seen[id]), path);
	if (claims != (int64_t)n)
		fail("WRONG COUNT: %lld claims for %zu tasks",
		     (long long)claims, n);
	s = open_store(path);
	if (store_task_counts(s, done, &ndone, 1, &e))
		fail("%s", e.msg);
	store_close(s);
	if (ndone != (int64_t)n)
		fail("WRONG COUNT: %lld of %zu tasks done after the drain",
		     (long long)ndone, n);
}

/*
 * One drain: n tasks (areas: 0 or AREAS) added to the fresh database
 * at path, w workers started together, timed from the go signal to the
 * last worker's exit.
 */
static void
drain(const char *path, size_t n, int areas, int w, struct result *out)
{
	struct shared sh;
	struct store *s;
	pid_t pids[MAX_WORKERS];
	int ready[2], go[2], status, i, procs, bad = 0;
	int64_t start, end, empty = 0;
	char c;

	s = open_store(path);
	start = mono_ns();
	add_tasks(s, (long)n, areas);
	out->adds_per_s = (double)n / ((double)(mono_ns() - start) / 1e9);
	store_close(s);
	if (pg_admin && pg_analyze)
		db_analyze(path);
	shared_map(&sh, w, n);
	if (pipe(ready) < 0 || pipe(go) < 0)
		fail("cannot create a pipe: %s", strerror(errno));
	fflush(NULL);
	/* a host forks its workers itself */
	procs = host_mode ? (host_count < w ? host_count : w) : w;
	for (i = 0; i < procs; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			fail("cannot fork: %s", strerror(errno));
		if (pids[i] == 0) {
			close(ready[0]);
			close(go[1]);
			if (host_mode)
				host_claimer(path, i,
					     w / procs + (i < w % procs), n,
					     ready[1], go[0], &sh);
			worker(path, i, n, ready[1], go[0], &sh);
		}
	}
	close(ready[1]);
	close(go[0]);
	for (i = 0; i < procs; i++)
		if (read(ready[0], &c, 1) != 1)
			fail("a worker died before it was ready");
	close(ready[0]);
	start = mono_ns();
	close(go[1]); /* every worker's read returns 0 at once */
	for (i = 0; i < procs; i++) {
		if (waitpid(pids[i], &status, 0) < 0)
			fail("cannot wait for a worker: %s", strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			bad++;
	}
	end = mono_ns();
	if (bad)
		fail("%d of %d workers failed (see above)", bad, procs);
	check_drain(path, &sh, w, n);
	for (i = 0; i < w; i++)
		empty += sh.empty[i];
	out->claims_per_s = (double)n / ((double)(end - start) / 1e9);
	latencies(&sh, sh.claim_ns, w, n, &out->claim_p50_us,
		  &out->claim_p99_us);
	latencies(&sh, sh.settle_ns, w, n, &out->settle_p50_us,
		  &out->settle_p99_us);
	out->empty = empty;
	out->rounds = atomic_load(sh.rounds);
	shared_unmap(&sh);
}

static void
print_header(void)
{
	printf("%-28s %3s %6s %10s %10s %10s %10s %10s %7s\n", "queue", "W",
	       "N", "claims/s", "claim p50", "claim p99", "settle p50",
	       "settle p99", "idle");
	printf("%-28s %3s %6s %10s %10s %10s %10s %10s %7s\n", "", "", "", "",
	       "us", "us", "us", "us", "");
}

/* The two queues, by the names -q takes. */
static const struct {
	const char *label, *key;
	int areas;
} queues[] = {
	{ "no areas", "noarea", 0 },
	{ "areas among 8", "areas8", AREAS },
};

/* Whether key is one of the comma-separated names in list. */
static int
in_list(const char *list, const char *key)
{
	size_t len = strlen(key);
	const char *p;

	for (p = list; (p = strstr(p, key)); p += len)
		if ((p == list || p[-1] == ',') &&
		    (p[len] == ',' || p[len] == '\0'))
			return 1;
	return 0;
}

/*
 * Runs the queues named in qlist for every worker count in ws, each
 * drain on a fresh database (in dir on SQLite, on the server with
 * --store), printing a table row per drain and a key=value line per
 * figure (tag names the disk or the server: "disk", "tmpfs",
 * "postgres").
 */
static void
run_matrix(const char *dir, const char *tag, const char *qlist, size_t n,
	   const int *ws, size_t nws)
{
	struct result r;
	char *path, label[64];
	size_t q, k;

	print_header();
	for (q = 0; q < ARRAY_SIZE(queues); q++) {
		if (!in_list(qlist, queues[q].key))
			continue;
		for (k = 0; k < nws; k++) {
			path = db_fresh(dir);
			drain(path, n, queues[q].areas, ws[k], &r);
			db_drop(path);
			free(path);
			snprintf(label, sizeof(label), "%s, %s", tag,
				 queues[q].label);
			printf("%-28s %3d %6zu %10.1f %10.1f %10.1f %10.1f "
			       "%10.1f %7lld\n",
			       label, ws[k], n, r.claims_per_s, r.claim_p50_us,
			       r.claim_p99_us, r.settle_p50_us, r.settle_p99_us,
			       (long long)r.empty);
			printf("  claims_per_s_%s_%s_w%d=%.1f "
			       "claim_p50_us=%.1f claim_p99_us=%.1f "
			       "settle_p50_us=%.1f settle_p99_us=%.1f "
			       "adds_per_s=%.1f\n",
			       tag, queues[q].key, ws[k], r.claims_per_s,
			       r.claim_p50_us, r.claim_p99_us, r.settle_p50_us,
			       r.settle_p99_us, r.adds_per_s);
			if (host_mode)
				printf("  host_rounds_%s_%s_w%d=%lld "
				       "tasks_per_round=%.1f\n",
				       tag, queues[q].key, ws[k],
				       (long long)r.rounds,
				       r.rounds ? (double)n / (double)r.rounds :
						  0);
			fflush(stdout);
		}
	}
}

/* ---- enqueue-to-start latency (PostgreSQL) ---------------------------- */

/*
 * What the latency workers write and the bench process reads, mapped
 * shared before the fork like struct shared: by task id, when the claim
 * that took it returned and how long that call took; per worker, the
 * wake-ups that reported work and the claims that found nothing.
 */
struct lat_shared {
	int64_t *claimed_at; /* [tasks + 1]: mono_ns(); 0: not yet */
	int64_t *claim_ns;   /* [tasks + 1] */
	int64_t *wakeups;    /* [w] */
	int64_t *empty;	     /* [w] */
	void *map;
	size_t map_len;
};

/* One latency run's figures, in ms but the counts. */
struct lat_result {
	double p50, p99, max;
	double add_p50, claim_p50;
	double wakeups, empty; /* per task, over all workers */
};

static void
lat_map(struct lat_shared *sh, int w, long tasks)
{
	size_t per_task = (size_t)(tasks + 1) * sizeof(int64_t);
	size_t per_worker = (size_t)w * sizeof(int64_t);
	char *p;

	memset(sh, 0, sizeof(*sh));
	sh->map_len = 2 * per_task + 2 * per_worker;
	sh->map = mmap(NULL, sh->map_len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh->map == MAP_FAILED)
		fail("cannot map %zu bytes: %s", sh->map_len, strerror(errno));
	p = sh->map;
	sh->claimed_at = (int64_t *)p;
	p += per_task;
	sh->claim_ns = (int64_t *)p;
	p += per_task;
	sh->wakeups = (int64_t *)p;
	p += per_worker;
	sh->empty = (int64_t *)p;
}

/*
 * A worker idle the way baton serve's are on PostgreSQL: asleep on a
 * control pipe of its own until the supervisor (lat_supervisor) wakes
 * it with a byte ('w'; EOF: leave). Woken, it claims until a claim finds
 * nothing, as a worker back from a run claims again, settles each task
 * it takes (with --settle-claim, settle and next claim in one call) and
 * writes the task's id (8 bytes: one atomic pipe write) to done_fd;
 * then says it is idle again: its index, one byte, on status_fd. The
 * first claim, before it says it is ready, finds the queue empty; it is
 * there so that the first sample does not pay for a cold server
 * session. Never returns; uses _exit, not fail().
 */
static _Noreturn void
lat_worker(const char *path, int idx, long tasks, int ready_fd, int ctl_fd,
	   int status_fd, int done_fd, struct lat_shared *sh)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	struct task t = { 0 }, next = { 0 };
	unsigned char me = (unsigned char)idx;
	char holder[64], c;
	int64_t t0, t1, id;
	int rc;

	signal(SIGPIPE, SIG_IGN); /* a write to a gone supervisor fails */
	if (store_open(path, &s, &e))
		goto fail;
	snprintf(holder, sizeof(holder), "bench:%ld:%d", (long)getpid(), idx);
	rc = store_task_claim(s, holder, LEASE_MS, &t, &e);
	if (rc != BATON_ENOTFOUND) {
		if (!rc)
			err_set(&e, BATON_EINVAL, "claimed task %lld before "
				"any was added", (long long)t.id);
		goto fail;
	}
	e = (struct err)ERR_INIT;
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
	while (read(ctl_fd, &c, 1) == 1) {
		sh->wakeups[idx]++;
		for (;;) {
			t0 = mono_ns();
			if (next.id) {
				t = next;
				memset(&next, 0, sizeof(next));
				rc = 0;
			} else {
				rc = store_task_claim(s, holder, LEASE_MS, &t,
						      &e);
			}
			t1 = mono_ns();
			if (rc == BATON_ENOTFOUND) {
				e = (struct err)ERR_INIT;
				sh->empty[idx]++;
				break;
			}
			if (rc)
				goto fail;
			if (t.id < 1 || t.id > tasks) {
				err_set(&e, BATON_EINVAL, "claimed task %lld, "
					"1..%ld were added", (long long)t.id,
					tasks);
				goto fail;
			}
			if (!sh->claimed_at[t.id]) {
				sh->claimed_at[t.id] = t1;
				sh->claim_ns[t.id] = t1 - t0;
			}
			rc = settle_next(s, &t, holder, batched ? &next : NULL,
					 &e);
			if (rc)
				goto fail;
			id = t.id;
			task_release(&t);
			if (write(done_fd, &id, sizeof(id)) != sizeof(id))
				_exit(1);
			if (batched && !next.id) {
				/* the settle's claim found nothing */
				sh->empty[idx]++;
				break;
			}
		}
		if (write(status_fd, &me, 1) != 1)
			break; /* the supervisor left: the run is over */
	}
	store_close(s);
	_exit(0);
fail:
	fprintf(stderr, "bench_queue: latency worker %d: %s\n", idx, e.msg);
	_exit(1);
}

/*
 * The supervisor of the latency workers, as baton serve's on
 * PostgreSQL: the one LISTEN connection (its store's store_watch_fd),
 * waking one idle worker per unit of work a drain reports
 * (STORE_WATCH_UNITS; all idle ones when the count is unknown). A unit
 * that finds no idle worker waits for the next one to report idle.
 * Leaves, closing the control pipes, when stop_fd reads EOF.
 */
static _Noreturn void
lat_supervisor(const char *path, int w, const int *ctl, int status_fd,
	       int stop_fd, int ready_fd)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;
	struct pollfd pf[3];
	unsigned char who[64];
	int idle[MAX_WORKERS] = { 0 };
	long pending = 0;
	int fd, i;
	ssize_t n, k;

	if (store_open(path, &s, &e))
		goto fail;
	fd = store_watch_fd(s, &e);
	if (fd < 0)
		goto fail;
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
	pf[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = status_fd, .events = POLLIN };
	pf[2] = (struct pollfd){ .fd = stop_fd, .events = POLLIN };
	for (i = 0; i < w; i++)
		idle[i] = 1;
	for (;;) {
		unsigned got;
		long units;

		if (poll(pf, 3, WATCH_TICK_MS) < 0 && errno != EINTR)
			_exit(1);
		if (pf[2].revents)
			break;
		if (pf[1].revents) {
			n = read(status_fd, who, sizeof(who));
			for (k = 0; k < n; k++) {
				if (who[k] >= w)
					continue;
				if (pending > 0) {
					pending--;
					if (write(ctl[who[k]], "w", 1) != 1)
						_exit(1);
				} else {
					idle[who[k]] = 1;
				}
			}
		}
		got = store_watch_drain(s);
		if (!(got & STORE_WATCH_WORK))
			continue;
		units = STORE_WATCH_UNITS(got) ? (long)STORE_WATCH_UNITS(got) :
						 w;
		for (i = 0; i < w && units > 0; i++) {
			if (!idle[i])
				continue;
			idle[i] = 0;
			units--;
			if (write(ctl[i], "w", 1) != 1)
				_exit(1);
		}
		if (STORE_WATCH_UNITS(got))
			pending += units;
	}
	store_close(s);
	_exit(0);
fail:
	fprintf(stderr, "bench_queue: latency supervisor: %s\n", e.msg);
	_exit(1);
}

/* Sleeps ms milliseconds. */
static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Sorts v[0..n) and reads percentile p (1..100) off it, in ms. */
static double
pct_ms(int64_t *v, size_t n, unsigned p)
{
	qsort(v, n, sizeof(*v), cmp_i64);
	return percentile_us(v, n, p) / 1e3;
}

/*
 * One latency run on the fresh database at path: w idle workers
 * (lat_worker), then samples + 1 tasks added one at a time by this
 * process, each once the previous one was settled and 10 to 20 ms
 * later. The first is a warm-up (the producer's session and one
 * worker's claim path are cold) and is not counted. Fails when a task
 * is not claimed within LAT_TIMEOUT_MS: that is a lost wake-up, a bug.
 */
static void
latency(const char *path, int w, long samples, struct lat_result *out)
{
	static const char *const done_st[] = { TASK_DONE };
	struct err e = ERR_INIT;
	struct lat_shared sh;
	struct store *s;
	pid_t pids[MAX_WORKERS], sup;
	int ready[2], stop[2], done[2], status_p[2], ctl_w[MAX_WORKERS];
	int status, i, j, bad = 0;
	int64_t *lat = xcalloc((size_t)samples, sizeof(*lat));
	int64_t *add = xcalloc((size_t)samples, sizeof(*add));
	int64_t *claim = xcalloc((size_t)samples, sizeof(*claim));
	int64_t t0, t1, id, ndone = 0, wakeups = 0, empty = 0;
	long k, tasks = samples + 1;
	struct pollfd pf;
	char c;

	lat_map(&sh, w, tasks);
	if (pipe(ready) < 0 || pipe(stop) < 0 || pipe(done) < 0 ||
	    pipe(status_p) < 0)
		fail("cannot create a pipe: %s", strerror(errno));
	fflush(NULL);
	for (i = 0; i < w; i++) {
		int ctl[2];

		if (pipe(ctl) < 0)
			fail("cannot create a pipe: %s", strerror(errno));
		pids[i] = fork();
		if (pids[i] < 0)
			fail("cannot fork: %s", strerror(errno));
		if (pids[i] == 0) {
			close(ready[0]);
			close(stop[1]);
			close(done[0]);
			close(status_p[0]);
			close(ctl[1]);
			for (j = 0; j < i; j++)
				close(ctl_w[j]);
			lat_worker(path, i, tasks, ready[1], ctl[0],
				   status_p[1], done[1], &sh);
		}
		close(ctl[0]);
		ctl_w[i] = ctl[1];
	}
	sup = fork();
	if (sup < 0)
		fail("cannot fork: %s", strerror(errno));
	if (sup == 0) {
		close(ready[0]);
		close(stop[1]);
		close(done[0]);
		close(done[1]);
		close(status_p[1]);
		lat_supervisor(path, w, ctl_w, status_p[0], stop[0], ready[1]);
	}
	for (i = 0; i < w; i++)
		close(ctl_w[i]);
	close(status_p[0]);
	close(status_p[1]);
	close(ready[1]);
	close(stop[0]);
	close(done[1]);
	for (i = 0; i < w + 1; i++)
		if (read(ready[0], &c, 1) != 1)
			fail("a latency worker died before it was ready");
	close(ready[0]);
	/* opened after the fork: no worker inherits this connection */
	s = open_store(path);
	srand((unsigned)mono_ns());
	sleep_ms(200);
	for (k = 0; k < tasks; k++) {
		sleep_ms(GAP_MIN_MS + rand() % (GAP_MAX_MS - GAP_MIN_MS + 1));
		t0 = mono_ns();
		if (add_task(s, k + 1, 0, &e))
			fail("%s", e.msg);
		t1 = mono_ns();
		pf = (struct pollfd){ .fd = done[0], .events = POLLIN };
		if (poll(&pf, 1, LAT_TIMEOUT_MS) == 0)
			fail("task %ld was not claimed within %d ms of its "
			     "add (%d idle workers): a wake-up was lost",
			     k + 1, LAT_TIMEOUT_MS, w);
		if (read(done[0], &id, sizeof(id)) != sizeof(id))
			fail("every latency worker died (see above)");
		if (id != k + 1)
			fail("WRONG COUNT: task %lld settled, task %ld was "
			     "the only one queued", (long long)id, k + 1);
		if (!k)
			continue;
		lat[k - 1] = sh.claimed_at[id] - t0;
		add[k - 1] = t1 - t0;
		claim[k - 1] = sh.claim_ns[id];
	}
	close(stop[1]); /* the supervisor leaves, closing the ctl pipes */
	if (waitpid(sup, &status, 0) < 0)
		fail("cannot wait for the supervisor: %s", strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		bad++;
	for (i = 0; i < w; i++) {
		if (waitpid(pids[i], &status, 0) < 0)
			fail("cannot wait for a worker: %s", strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			bad++;
	}
	close(done[0]);
	if (bad)
		fail("%d of %d latency workers failed (see above)", bad, w);
	if (store_task_counts(s, done_st, &ndone, 1, &e))
		fail("%s", e.msg);
	store_close(s);
	if (ndone != tasks)
		fail("WRONG COUNT: %lld of %ld tasks done after the latency "
		     "run", (long long)ndone, tasks);
	for (i = 0; i < w; i++) {
		wakeups += sh.wakeups[i];
		empty += sh.empty[i];
	}
	out->p50 = pct_ms(lat, (size_t)samples, 50);
	out->p99 = pct_ms(lat, (size_t)samples, 99);
	out->max = pct_ms(lat, (size_t)samples, 100);
	out->add_p50 = pct_ms(add, (size_t)samples, 50);
	out->claim_p50 = pct_ms(claim, (size_t)samples, 50);
	out->wakeups = (double)wakeups / (double)tasks;
	out->empty = (double)empty / (double)tasks;
	munmap(sh.map, sh.map_len);
	free(lat);
	free(add);
	free(claim);
}

/* The latency runs, one per worker count, each on a fresh database. */
static void
run_latency(long samples, const int *ws, size_t nws)
{
	struct lat_result r;
	char *path;
	size_t k;

	printf("\nenqueue-to-start latency: W idle workers, each asleep in "
	       "poll on its store_watch_fd;\n%ld tasks added one at a time, "
	       "%d-%d ms after the previous one settled;\nsample = claim "
	       "returned (worker) - just before store_task_add (bench)\n\n",
	       samples, GAP_MIN_MS, GAP_MAX_MS);
	printf("%3s %7s %9s %9s %9s %9s %9s %9s %9s\n", "W", "samples",
	       "p50 ms", "p99 ms", "max ms", "add p50", "claim p50",
	       "wakeups", "empty");
	printf("%3s %7s %9s %9s %9s %9s %9s %9s %9s\n", "", "", "", "", "",
	       "ms", "ms", "/task", "/task");
	for (k = 0; k < nws; k++) {
		path = db_fresh(NULL);
		latency(path, ws[k], samples, &r);
		db_drop(path);
		free(path);
		printf("%3d %7ld %9.2f %9.2f %9.2f %9.2f %9.2f %9.1f %9.1f\n",
		       ws[k], samples, r.p50, r.p99, r.max, r.add_p50,
		       r.claim_p50, r.wakeups, r.empty);
		printf("  latency_postgres_w%d: p50_ms=%.2f p99_ms=%.2f "
		       "max_ms=%.2f add_p50_ms=%.2f claim_p50_ms=%.2f "
		       "wakeups_per_task=%.1f empty_claims_per_task=%.1f\n",
		       ws[k], r.p50, r.p99, r.max, r.add_p50, r.claim_p50,
		       r.wakeups, r.empty);
		fflush(stdout);
	}
}

/* A setting of the server, for the report; "?" when it cannot say. */
static void
print_setting(const char *name)
{
	char *sql = xasprintf("SELECT current_setting('%s')", name);
	PGresult *res = PQexec(pg_admin, sql);

	printf(" %s=%s", name,
	       PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 ?
		       PQgetvalue(res, 0, 0) :
		       "?");
	PQclear(res);
	free(sql);
}

/* Prints the mean, p50 and p99 of the k times in v (ns), sorting v. */
static void
print_times(const char *what, int64_t *v, size_t k)
{
	int64_t sum = 0;
	size_t i;

	for (i = 0; i < k; i++)
		sum += v[i];
	qsort(v, k, sizeof(*v), cmp_i64);
	printf("  %-42s %10.1f %10.1f %10.1f\n", what,
	       (double)sum / (double)k / 1e3, percentile_us(v, k, 50),
	       percentile_us(v, k, 99));
}

/* --keeper: see the top of this file. */
static int
run_keeper(const char *dir, size_t k)
{
	char *path = db_fresh(dir);
	struct store *s = open_store(path), *ks;
	int64_t *v = xcalloc(k, sizeof(*v)), t0;
	struct task t = { 0 };
	struct err e = ERR_INIT;
	size_t i;

	add_tasks(s, 1, 0);
	if (store_task_claim(s, "bench", 3600 * 1000, &t, &e))
		fail("cannot claim: %s", e.msg);
	printf("%d renewals of one lease, each way (us)\n", (int)k);
	printf("  %-42s %10s %10s %10s\n", "", "mean", "p50", "p99");
	for (i = 0; i < k; i++) {
		t0 = mono_ns();
		if (store_open(path, &ks, &e) ||
		    store_task_renew(ks, t.id, t.lease_token, 3600 * 1000, &e))
			fail("cannot renew: %s", e.msg);
		store_close(ks);
		v[i] = mono_ns() - t0;
	}
	print_times("a keeper a task: open, renew, close", v, k);
	ks = open_store(path);
	for (i = 0; i < k; i++) {
		t0 = mono_ns();
		if (store_task_renew(ks, t.id, t.lease_token, 3600 * 1000, &e))
			fail("cannot renew: %s", e.msg);
		v[i] = mono_ns() - t0;
	}
	print_times("one keeper a worker: renew", v, k);
	store_close(ks);
	store_close(s);
	task_release(&t);
	free(v);
	db_drop(path);
	free(path);
	return 0;
}

/*
 * --store: the drains and the latency runs on the server of admin_url,
 * each measurement on a database of its own.
 */
static int
run_postgres(const char *admin_url, const char *qlist, size_t n,
	     long samples, const int *ws, size_t nws)
{
	admin_connect(admin_url);
	atexit(db_cleanup);
	printf("baton queue benchmark: PostgreSQL %s (libpq %d);",
	       PQparameterStatus(pg_admin, "server_version"),
	       PQlibVersion());
	print_setting("fsync");
	print_setting("synchronous_commit");
	print_setting("shared_buffers");
	printf("\neach worker its own process and store (connection); a "
	       "fresh database per measurement\n");
	if (host_mode)
		printf("one host: one process with the only connection "
		       "claims for its W workers (no connection each);\na "
		       "round = the settles of what they finished + claims "
		       "for the idle ones and up to %zu waiting\n"
		       "(store_task_settle_claim_batch, one transaction)\n\n",
		       host_k);
	else if (batch_k && batched)
		printf("a batch = up to %zu settles (to done with "
		       "task_settled events) + the next batch's claims in one "
		       "transaction (store_task_settle_claim_batch)\n\n",
		       batch_k);
	else if (batch_k)
		printf("a batch = up to %zu claims (store_task_claim_batch) in "
		       "one transaction + their settles (store_task_settle_"
		       "batch: to done with task_settled events) in one\n\n",
		       batch_k);
	else
		printf("%s", batched ?
			       "one task = settle (store_task_settle_claim: "
			       "to done with a task_settled event) + the next "
			       "claim, one transaction\n\n" :
			       "one task = claim (store_task_claim) + settle "
			       "(store_task_update to done with a "
			       "task_settled event)\n\n");
	run_matrix(NULL,
		   host_mode ? (host_k ? "postgres_hostq" : "postgres_host") :
		   batch_k ? (batched ? "postgres_batchsc" :
				      "postgres_batch") :
		   batched ? "postgres_batched" :
			     "postgres",
		   qlist, n, ws, nws);
	if (samples)
		run_latency(samples, ws, nws);
	return 0; /* db_cleanup() closes the admin connection */
}

/*
 * Opens (creating if needed) the database a fill will replace, before
 * any work, so that a wrong path fails at once.
 */
static sqlite3 *
open_target(const char *path)
{
	sqlite3 *db = NULL;

	if (sqlite3_open_v2(path, &db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
			    NULL) != SQLITE_OK)
		fail("cannot open '%s': %s", path, sqlite3_errmsg(db));
	sqlite3_busy_timeout(db, 10000);
	if (sqlite3_exec(db, "PRAGMA user_version", NULL, NULL, NULL) !=
	    SQLITE_OK)
		fail("cannot open '%s': %s", path, sqlite3_errmsg(db));
	return db;
}

/*
 * Copies the database at from over dst (named to in messages) with
 * SQLite's backup API, then closes dst.
 */
static void
copy_db(const char *from, sqlite3 *dst, const char *to)
{
	sqlite3 *src = NULL;
	sqlite3_backup *b;
	int rc;

	if (sqlite3_open_v2(from, &src, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK)
		fail("cannot open '%s': %s", from, sqlite3_errmsg(src));
	b = sqlite3_backup_init(dst, "main", src, "main");
	if (!b)
		fail("cannot copy into '%s': %s", to, sqlite3_errmsg(dst));
	rc = sqlite3_backup_step(b, -1);
	sqlite3_backup_finish(b);
	if (rc != SQLITE_DONE)
		fail("cannot copy into '%s': %s", to, sqlite3_errstr(rc));
	sqlite3_close(src);
	if (sqlite3_close(dst) != SQLITE_OK)
		fail("cannot close '%s'", to);
}

/*
 * --fill: COUNT queued tasks written through the store in a scratch
 * database on tmpfs (or $TMPDIR without /dev/shm), then copied over
 * dbpath.
 */
static int
fill(const char *dbpath, long count, int areas)
{
	const char *tmp = getenv("TMPDIR"), *dir;
	sqlite3 *target = open_target(dbpath);
	int64_t t0 = mono_ns();
	struct store *s;
	char *scratch;

	if (!tmp || !*tmp)
		tmp = "/tmp";
	dir = scratch_dir(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp,
			  "baton-fill");
	scratch = xasprintf("%s/fill.db", dir);
	s = open_store(scratch);
	add_tasks(s, count, areas);
	store_close(s);
	copy_db(scratch, target, dbpath);
	remove_db(scratch);
	printf("filled %s: %ld queued tasks%s in %.1f s\n", dbpath, count,
	       areas ? " with areas" : "", (double)(mono_ns() - t0) / 1e9);
	free(scratch);
	return 0;
}

/* --samples: a count, or 0 for no latency runs. */
static long
samples_arg(const char *s)
{
	return strcmp(s, "0") ? count_arg(s, "S") : 0;
}

/* K of --host: a count, or 0. */
static size_t
host_arg(const char *s)
{
	return strcmp(s, "0") ? (size_t)count_arg(s, "K") : 0;
}

static void
usage(void)
{
	fprintf(stderr,
		"usage: bench_queue [-n N] [-w W[,W...]] [-q QUEUES] [-d DIR] "
		"[--no-shm] [--host K]\n"
		"       bench_queue --store ADMIN_URL [-n N] [-w W[,W...]] "
		"[-q QUEUES] [--samples S] [--analyze]\n"
		"                   [--settle-claim | --batch K "
		"[--settle-claim] | --host K [--hosts H]]\n"
		"       bench_queue [--store ADMIN_URL | -d DIR] --keeper K\n"
		"       bench_queue --fill DBPATH COUNT [AREAS]\n"
		"QUEUES: noarea, areas8 or noarea,areas8 (the default)\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR"), *base = NULL, *list = DEFAULT_LIST;
	const char *dir, *shmdir, *url = NULL, *qlist = "noarea,areas8";
	size_t n = DEFAULT_N, nws, q, keeper_k = 0;
	long samples = DEFAULT_SAMPLES;
	int ws[8], i, use_shm = 1;
	char fsbuf[32];

	bench_name = "bench_queue";
	atexit(bench_cleanup);
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--fill"))
		return fill(argv[2], count_arg(argv[3], "COUNT"),
			    argc == 5 ? (int)count_arg(argv[4], "AREAS") : 0);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = (size_t)count_arg(argv[++i], "N");
		else if (!strcmp(argv[i], "-w") && i + 1 < argc)
			list = argv[++i];
		else if (!strcmp(argv[i], "-d") && i + 1 < argc)
			base = argv[++i];
		else if (!strcmp(argv[i], "--no-shm"))
			use_shm = 0;
		else if (!strcmp(argv[i], "-q") && i + 1 < argc)
			qlist = argv[++i];
		else if (!strcmp(argv[i], "--store") && i + 1 < argc)
			url = argv[++i];
		else if (!strcmp(argv[i], "--samples") && i + 1 < argc)
			samples = samples_arg(argv[++i]);
		else if (!strcmp(argv[i], "--analyze") && url)
			pg_analyze = 1;
		else if (!strcmp(argv[i], "--settle-claim"))
			batched = 1;
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch_k = (size_t)count_arg(argv[++i], "K");
		else if (!strcmp(argv[i], "--host") && i + 1 < argc)
			host_k = host_arg(argv[++i]), host_mode = 1;
		else if (!strcmp(argv[i], "--keeper") && i + 1 < argc)
			keeper_k = (size_t)count_arg(argv[++i], "K");
		else if (!strcmp(argv[i], "--hosts") && i + 1 < argc)
			host_count = (int)count_arg(argv[++i], "H");
		else
			usage();
	}
	if (host_mode + batched + (batch_k > 0) > 1 + (batched && batch_k) ||
	    (host_count > 1 && !host_mode))
		usage();
	nws = worker_list(list, ws, ARRAY_SIZE(ws));
	for (q = 0; q < ARRAY_SIZE(queues); q++)
		if (in_list(qlist, queues[q].key))
			break;
	if (q == ARRAY_SIZE(queues))
		usage();
	if (keeper_k && url) {
		admin_connect(url);
		atexit(db_cleanup);
		printf("PostgreSQL %s: ",
		       PQparameterStatus(pg_admin, "server_version"));
		return run_keeper(NULL, keeper_k);
	}
	if (url)
		return run_postgres(url, qlist, n, samples, ws, nws);
	if (!base)
		base = tmp && *tmp ? tmp : "/tmp";
	dir = scratch_dir(base, "baton-bench-queue");
	if (keeper_k) {
		printf("sqlite %s in %s (%s): ", sqlite3_libversion(), dir,
		       fs_name(dir, fsbuf, sizeof(fsbuf)));
		return run_keeper(dir, keeper_k);
	}

	printf("baton queue benchmark: sqlite %s, synchronous=FULL, WAL; "
	       "each worker its own process and connection\n",
	       sqlite3_libversion());
	if (host_mode)
		printf("one host claims for its W workers: a round = "
		       "store_task_settle_claim_batch (the settles, then up "
		       "to idle + %zu claims)\n",
		       host_k);
	else
		printf("one task = claim (store_task_claim) + settle "
		       "(store_task_update to done with a task_settled "
		       "event)\n");
	printf("database dir: %s (%s)\n\n", dir,
	       fs_name(dir, fsbuf, sizeof(fsbuf)));
	run_matrix(dir, "disk", qlist, n, ws, nws);

	if (use_shm && access("/dev/shm", W_OK) == 0) {
		shmdir = scratch_dir("/dev/shm", "baton-bench-queue");
		printf("\nreference only, not what baton uses: the same on %s "
		       "(%s), where fsync costs nothing\n\n",
		       shmdir, fs_name(shmdir, fsbuf, sizeof(fsbuf)));
		run_matrix(shmdir, "tmpfs", qlist, n, ws, nws);
	}
	return 0; /* bench_cleanup() removes the scratch directories */
}
