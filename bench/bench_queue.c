/*
 * bench_queue: how fast worker processes drain baton's task queue, at
 * the level of the store (store.h), on a real SQLite file.
 *
 *   bench_queue [-n N] [-w LIST] [-d DIR] [--no-shm]
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
#include <sched.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "core/run.h"
#include "store/store.h"
#include "util/err.h"
#include "util/xalloc.h"

#define DEFAULT_N    2000
#define MAX_WORKERS  64
#define AREAS	     8
#define LEASE_MS     (30 * 1000)
#define DEFAULT_LIST "1,4,16"
#define STUCK_PAUSES (5 * 10000) /* 5 s of 100 us pauses */

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
	void *map;
	size_t map_len;
};

/* One drain's figures. */
struct result {
	double claims_per_s;
	double claim_p50_us, claim_p99_us;
	double settle_p50_us, settle_p99_us;
	int64_t empty;
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
 * Adds tasks 1..count to s as `baton task add` does (sched_task_add):
 * queued, max_attempts 3, one task_added event each, every add its own
 * durable transaction. With areas, task i gets "src/mod<i % areas>".
 */
static void
add_tasks(struct store *s, long count, int areas)
{
	struct err e = ERR_INIT;
	char title[80], area[32], data[200];
	long i;

	for (i = 1; i <= count; i++) {
		struct task t = { 0 };
		struct event ev = { 0 };

		snprintf(title, sizeof(title),
			 "bench task %ld: add a --version flag", i);
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
		if (store_task_add(s, &t, &ev, &e))
			fail("%s", e.msg);
		/* the store allocated the defaults it applied */
		t.title = t.status = t.area = NULL;
		task_release(&t);
	}
}

/* Maps the shared area for w workers draining n tasks. */
static void
shared_map(struct shared *sh, int w, size_t n)
{
	size_t lat = (size_t)w * n * sizeof(int64_t);
	size_t per = (size_t)w * sizeof(int64_t);
	char *p;

	memset(sh, 0, sizeof(*sh));
	sh->map_len = 2 * lat + 2 * per + sizeof(atomic_long) +
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
 * A worker process: opens its own store, says it is ready on ready_fd,
 * waits for go_fd to close, then claims and settles until nothing is
 * left. Writes its latencies into sh; never returns.
 */
static _Noreturn void
worker(const char *path, int idx, size_t n, int ready_fd, int go_fd,
       struct shared *sh)
{
	const struct timespec pause = { 0, 100 * 1000 }; /* 100 us */
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char holder[64], c;
	int64_t *claim_ns = sh->claim_ns + (size_t)idx * n;
	int64_t *settle_ns = sh->settle_ns + (size_t)idx * n;
	int64_t t0, t1, t2;
	long waited;
	int rc;

	if (store_open(path, &s, &e)) {
		fprintf(stderr, "bench_queue: worker %d: %s\n", idx, e.msg);
		_exit(1);
	}
	snprintf(holder, sizeof(holder), "bench:%ld:%d", (long)getpid(), idx);
	if (write(ready_fd, "r", 1) != 1 || read(go_fd, &c, 1) != 0)
		_exit(1);
	for (;;) {
		struct task t = { 0 };
		struct event ev = { 0 };
		long settled = atomic_load(sh->settled);
		char data[120];

		t0 = mono_ns();
		rc = store_task_claim(s, holder, LEASE_MS, &t, &e);
		t1 = mono_ns();
		if (rc == BATON_ENOTFOUND) {
			e = (struct err)ERR_INIT;
			rc = any_queued(s, idx);
			if (rc < 0)
				_exit(1);
			if (!rc)
				break;
			/*
			 * Every queued task's area is held: wait, as an idle
			 * serve worker does, until some task is settled
			 * (serve wakes its idle workers then), rather than
			 * spin on the write lock and starve that settle.
			 */
			sh->empty[idx]++;
			for (waited = 0; atomic_load(sh->settled) == settled;
			     waited++) {
				if (waited == STUCK_PAUSES) {
					fprintf(stderr,
						"bench_queue: worker %d: a "
						"claim finds nothing, tasks "
						"are queued and none was "
						"settled for 5 s\n",
						idx);
					_exit(1);
				}
				nanosleep(&pause, NULL);
			}
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

		/* settle as sched__settle does for a run that succeeded */
		run_set(&t.status, TASK_DONE);
		run_set(&t.block_reason, NULL);
		run_set(&t.reason, NULL);
		FREE_AND_NULL(t.lease_holder);
		t.lease_token = 0;
		t.lease_expires_at = 0;
		t.failure_count = 0;
		t.ended_at = wall_ms();
		snprintf(data, sizeof(data),
			 "{\"run\":\"r%lld-bench\",\"status\":\"done\","
			 "\"block_reason\":null,\"reason\":null}",
			 (long long)t.id);
		ev.type = (char *)"task_settled";
		ev.data = data;
		rc = store_task_update(s, &t, &ev, &e);
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
 * One drain: a fresh database at path with n tasks (areas: 0 or AREAS),
 * w workers started together, timed from the go signal to the last
 * worker's exit.
 */
static void
drain(const char *path, size_t n, int areas, int w, struct result *out)
{
	struct shared sh;
	struct store *s;
	pid_t pids[MAX_WORKERS];
	int ready[2], go[2], status, i, bad = 0;
	int64_t start, end, empty = 0;
	char c;

	remove_db(path);
	s = open_store(path);
	add_tasks(s, (long)n, areas);
	store_close(s);
	shared_map(&sh, w, n);
	if (pipe(ready) < 0 || pipe(go) < 0)
		fail("cannot create a pipe: %s", strerror(errno));
	fflush(NULL);
	for (i = 0; i < w; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			fail("cannot fork: %s", strerror(errno));
		if (pids[i] == 0) {
			close(ready[0]);
			close(go[1]);
			worker(path, i, n, ready[1], go[0], &sh);
		}
	}
	close(ready[1]);
	close(go[0]);
	for (i = 0; i < w; i++)
		if (read(ready[0], &c, 1) != 1)
			fail("a worker died before it was ready");
	close(ready[0]);
	start = mono_ns();
	close(go[1]); /* every worker's read returns 0 at once */
	for (i = 0; i < w; i++) {
		if (waitpid(pids[i], &status, 0) < 0)
			fail("cannot wait for a worker: %s", strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			bad++;
	}
	end = mono_ns();
	if (bad)
		fail("%d of %d workers failed (see above)", bad, w);
	check_drain(path, &sh, w, n);
	for (i = 0; i < w; i++)
		empty += sh.empty[i];
	out->claims_per_s = (double)n / ((double)(end - start) / 1e9);
	latencies(&sh, sh.claim_ns, w, n, &out->claim_p50_us,
		  &out->claim_p99_us);
	latencies(&sh, sh.settle_ns, w, n, &out->settle_p50_us,
		  &out->settle_p99_us);
	out->empty = empty;
	shared_unmap(&sh);
	remove_db(path);
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

/*
 * Runs both queues for every worker count in ws on a fresh database in
 * dir, printing a table row per drain and a key=value line per figure
 * (tag names the disk: "disk" or "tmpfs").
 */
static void
run_matrix(const char *dir, const char *tag, size_t n, const int *ws,
	   size_t nws)
{
	static const struct {
		const char *label, *key;
		int areas;
	} queues[] = {
		{ "no areas", "noarea", 0 },
		{ "areas among 8", "areas8", AREAS },
	};
	struct result r;
	char *path = xasprintf("%s/queue.db", dir), label[64];
	size_t q, k;

	print_header();
	for (q = 0; q < ARRAY_SIZE(queues); q++) {
		for (k = 0; k < nws; k++) {
			drain(path, n, queues[q].areas, ws[k], &r);
			snprintf(label, sizeof(label), "%s, %s", tag,
				 queues[q].label);
			printf("%-28s %3d %6zu %10.1f %10.1f %10.1f %10.1f "
			       "%10.1f %7lld\n",
			       label, ws[k], n, r.claims_per_s, r.claim_p50_us,
			       r.claim_p99_us, r.settle_p50_us, r.settle_p99_us,
			       (long long)r.empty);
			printf("  claims_per_s_%s_%s_w%d=%.1f "
			       "claim_p50_us=%.1f claim_p99_us=%.1f\n",
			       tag, queues[q].key, ws[k], r.claims_per_s,
			       r.claim_p50_us, r.claim_p99_us);
			fflush(stdout);
		}
	}
	free(path);
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

static void
usage(void)
{
	fprintf(stderr,
		"usage: bench_queue [-n N] [-w W[,W...]] [-d DIR] [--no-shm]\n"
		"       bench_queue --fill DBPATH COUNT [AREAS]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR"), *base = NULL, *list = DEFAULT_LIST;
	const char *dir, *shmdir;
	size_t n = DEFAULT_N, nws;
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
		else
			usage();
	}
	nws = worker_list(list, ws, ARRAY_SIZE(ws));
	if (!base)
		base = tmp && *tmp ? tmp : "/tmp";
	dir = scratch_dir(base, "baton-bench-queue");

	printf("baton queue benchmark: sqlite %s, synchronous=FULL, WAL; "
	       "each worker its own process and connection\n",
	       sqlite3_libversion());
	printf("one task = claim (store_task_claim) + settle "
	       "(store_task_update to done with a task_settled event)\n");
	printf("database dir: %s (%s)\n\n", dir,
	       fs_name(dir, fsbuf, sizeof(fsbuf)));
	run_matrix(dir, "disk", n, ws, nws);

	if (use_shm && access("/dev/shm", W_OK) == 0) {
		shmdir = scratch_dir("/dev/shm", "baton-bench-queue");
		printf("\nreference only, not what baton uses: the same on %s "
		       "(%s), where fsync costs nothing\n\n",
		       shmdir, fs_name(shmdir, fsbuf, sizeof(fsbuf)));
		run_matrix(shmdir, "tmpfs", n, ws, nws);
	}
	return 0; /* bench_cleanup() removes the scratch directories */
}
