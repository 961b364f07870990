/*
 * bench_store: how fast the store commits what the engine writes, on a
 * real SQLite file, through the same interface baton uses (store.h).
 *
 *   bench_store [-n N] [-l RUNS] [-d DIR] [--no-shm]
 *       (a) transitions committed per second: store_run_update with a
 *           "transition" event, the status alternating, each one its own
 *           durable transaction; on one run, then spread over 100 runs;
 *       (b) run creation per second (store_run_create);
 *       (c) store_run_list over RUNS runs (default 10000), after creating
 *           them with --fill's mix.
 *       Then, as a reference point only, workload (a) on one run again
 *       with the database on /dev/shm (tmpfs, where fsync costs nothing),
 *       so the cost of fsync on DIR's disk can be read off.
 *       Prints a table (ops/s, mean us/op, p50 and p99 latency) and a few
 *       key=value lines for scripts. Figures are reported, never judged.
 *
 *   bench_store --fill DBPATH COUNT
 *       Replaces the database at DBPATH with one holding COUNT runs in a
 *       realistic mix of statuses (most merge_ready, some blocked, failed,
 *       aborted, waiting, paused, interrupted or in flight), each with the
 *       transition and note events the engine would have written. The
 *       runs are written through the store on tmpfs (a few seconds rather
 *       than one fsync per event) and then copied to DBPATH with SQLite's
 *       backup API, so DBPATH may be the .baton/baton.db of "baton init".
 *
 * DIR (default $TMPDIR or /tmp) should be on the disk whose cost is being
 * measured: baton keeps its database in the repository's .baton/, so the
 * repository's disk is the realistic choice. The filesystem type is
 * printed next to the figures.
 *
 * Latencies come from the monotonic clock around each call. Exit status:
 * 0 when every call succeeded, 1 when one failed (the message says which),
 * 2 for a usage error.
 */
#include "util/compat.h"

#include <dirent.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "store/store.h"
#include "util/err.h"
#include "util/xalloc.h"

#define DEFAULT_N	  2000
#define DEFAULT_LIST_RUNS 10000
#define SPREAD_RUNS	  100
#define LIST_REPEAT	  20
#define MINUTE_MS	  (60 * 1000LL)
#define DAY_MS		  (24 * 60 * MINUTE_MS)

/* One measured workload: its label and every call's latency in ns. */
struct series {
	const char *label;
	int64_t *ns;
	size_t n;
	int64_t total_ns; /* wall time of the whole loop */
	double rows;	  /* rows handed out per op (lists); 0 otherwise */
};

/* State handed to the list callback. */
struct list_ctx {
	size_t rows;
	int64_t cost_ucents; /* summed so the compiler keeps the loop */
};


/*
 * Fills r as the engine does when it creates a run (engine_create): the
 * task, pipeline, status created, phase done. created_at is given so a
 * filled database has runs of many ages. The caller releases r.
 */
static void
run_prepare(struct run *r, long i, int64_t created_at)
{
	char *task = xasprintf("benchmark task %ld: add a --version flag", i);

	memset(r, 0, sizeof(*r));
	r->task = task;
	run_set(&r->pipeline, "feature");
	run_set(&r->status, "created");
	run_set(&r->phase, "done");
	run_set(&r->config_hash, "3f1c0ffee0ddba11");
	r->max_review_loops = 2;
	r->created_at = created_at;
}

static void
create(struct store *s, struct run *r)
{
	struct err e = ERR_INIT;

	if (store_run_create(s, r, &e))
		fail("%s", e.msg);
}

/*
 * One durable transition of r to `to`, with its "transition" event, as
 * engine_transition writes it (status, phase, timestamps). ts is the
 * event's time (0: now). Exits on any failure: the benchmark measures
 * successful commits only.
 */
static void
transition(struct store *s, struct run *r, const char *to, int64_t ts,
	   const char *data)
{
	struct event ev = { 0 };
	struct err e = ERR_INIT;
	char *from = xstrdup(r->status), *statuses[2];
	struct pipeline p = { 0 };
	struct edge edge = { 0 };
	struct run_move mv;

	run_set(&r->status, to);
	r->phase_started_at = ts ? ts : wall_ms();
	if (!r->started_at)
		r->started_at = r->phase_started_at;
	ev.type = (char *)"transition";
	ev.from = from;
	ev.to = (char *)to;
	ev.ts = ts;
	ev.data = (char *)data;
	/* the door's move, with a table of that one edge: the benchmark
	 * skips stages the feature pipeline would go through */
	edge.from = from;
	edge.to = r->status;
	statuses[0] = from;
	statuses[1] = r->status;
	p.name = r->pipeline;
	p.statuses = statuses;
	p.nr_statuses = 2;
	p.edges = &edge;
	p.nr_edges = 1;
	mv = (struct run_move){ &p, from, r->status };
	if (store_run_move(s, r, &mv, &ev, &e))
		fail("%s", e.msg);
	free(ev.run_id);
	free(from);
}

/* A non-transition event written with a run update (engine__note). */
static void
note(struct store *s, struct run *r, const char *type, int64_t ts,
     const char *data)
{
	struct event ev = { 0 };
	struct err e = ERR_INIT;

	ev.type = (char *)type;
	ev.ts = ts;
	ev.data = (char *)data;
	if (store_run_update(s, r, &ev, &e))
		fail("%s", e.msg);
	free(ev.run_id);
}

static void
series_init(struct series *sr, const char *label, size_t n)
{
	memset(sr, 0, sizeof(*sr));
	sr->label = label;
	sr->ns = xcalloc(n ? n : 1, sizeof(*sr->ns));
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The nearest-rank percentile p (1..100) of sorted v[0..n). */
static int64_t
percentile(const int64_t *v, size_t n, unsigned p)
{
	size_t rank = (n * p + 99) / 100;

	return n ? v[rank ? rank - 1 : 0] : 0;
}

static void
print_header(void)
{
	printf("%-42s %6s %10s %10s %10s %10s\n", "workload", "N", "ops/s",
	       "us/op", "p50 us", "p99 us");
}

/*
 * Sorts sr's latencies and prints its table line (and, for a list, the
 * rows per second). Returns ops/s for the key=value lines at the end.
 */
static double
print_series(struct series *sr)
{
	double secs = (double)sr->total_ns / 1e9;
	double ops = secs > 0 ? (double)sr->n / secs : 0;
	double mean_us = sr->n ? (double)sr->total_ns / 1e3 / (double)sr->n : 0;

	qsort(sr->ns, sr->n, sizeof(*sr->ns), cmp_i64);
	printf("%-42s %6zu %10.1f %10.1f %10.1f %10.1f\n", sr->label, sr->n,
	       ops, mean_us, (double)percentile(sr->ns, sr->n, 50) / 1e3,
	       (double)percentile(sr->ns, sr->n, 99) / 1e3);
	if (sr->rows > 0)
		printf("%-42s %6s %10.0f rows/s\n", "", "", ops * sr->rows);
	fflush(stdout);
	return ops;
}

static void
series_release(struct series *sr)
{
	FREE_AND_NULL(sr->ns);
}

/*
 * Workload (a): n transitions, status alternating between reviewing and
 * fixing (an edge the fix loop really takes), spread round-robin over
 * nruns runs created first. Each store_run_update is one BEGIN IMMEDIATE
 * ... COMMIT with synchronous=FULL, so each is durable on return.
 */
static void
bench_transitions(const char *path, size_t n, size_t nruns, struct series *out)
{
	static const char *const statuses[2] = { "reviewing", "fixing" };
	struct store *s;
	struct run *runs = xcalloc(nruns, sizeof(*runs));
	int64_t t0, t1, start;
	size_t i;

	remove_db(path);
	s = open_store(path);
	for (i = 0; i < nruns; i++) {
		run_prepare(&runs[i], (long)i + 1, 0);
		create(s, &runs[i]);
		run_set(&runs[i].stage, "review");
		run_set(&runs[i].worktree, "/repo/.baton/worktrees/r1");
		run_set(&runs[i].branch, "baton/r1");
		transition(s, &runs[i], "reviewing", 0, NULL);
	}
	start = mono_ns();
	for (i = 0; i < n; i++) {
		struct run *r = &runs[i % nruns];

		t0 = mono_ns();
		transition(s, r, statuses[(i / nruns) % 2], 0, NULL);
		t1 = mono_ns();
		out->ns[out->n++] = t1 - t0;
	}
	out->total_ns = mono_ns() - start;
	store_close(s);
	for (i = 0; i < nruns; i++)
		run_release(&runs[i]);
	free(runs);
	remove_db(path);
}

/* Workload (b): n runs created, each with its creation event. */
static void
bench_create(const char *path, size_t n, struct series *out)
{
	struct store *s;
	struct run r;
	int64_t t0, t1, start;
	size_t i;

	remove_db(path);
	s = open_store(path);
	start = mono_ns();
	for (i = 0; i < n; i++) {
		run_prepare(&r, (long)i + 1, 0);
		t0 = mono_ns();
		create(s, &r);
		t1 = mono_ns();
		out->ns[out->n++] = t1 - t0;
		run_release(&r);
	}
	out->total_ns = mono_ns() - start;
	store_close(s);
	remove_db(path);
}

static int
count_run(const struct run *r, void *arg)
{
	struct list_ctx *c = arg;

	c->rows++;
	c->cost_ucents += (int64_t)(r->cost_usd * 1e6) + (r->status[0] != 0);
	return 0;
}

/*
 * Workload (c): every run listed, newest first, repeat times on the
 * database at path (already filled). The first list pays for the
 * page cache; all are reported.
 */
static void
bench_list(const char *path, size_t expect, size_t repeat, struct series *out)
{
	struct store_run_filter f = { NULL, 0, 0 };
	struct list_ctx c;
	struct err e = ERR_INIT;
	struct store *s = open_store(path);
	int64_t t0, t1, start;
	size_t i;

	start = mono_ns();
	for (i = 0; i < repeat; i++) {
		memset(&c, 0, sizeof(c));
		t0 = mono_ns();
		if (store_run_list(s, &f, count_run, &c, &e))
			fail("%s", e.msg);
		t1 = mono_ns();
		if (c.rows != expect)
			fail("listed %zu runs, expected %zu", c.rows, expect);
		out->ns[out->n++] = t1 - t0;
	}
	out->total_ns = mono_ns() - start;
	out->rows = (double)expect;
	store_close(s);
}

/*
 * How one filled run ends. The mix, out of 100: 55 merge_ready (every
 * third with a fix round), 12 blocked after the review budget, 8 failed
 * in validation, 7 aborted while executing, 5 waiting for approval at
 * the executing gate, 4 paused, 4 interrupted, 5 still in flight.
 */
enum fate {
	FATE_MERGED,
	FATE_BLOCKED,
	FATE_FAILED,
	FATE_ABORTED,
	FATE_WAITING,
	FATE_PAUSED,
	FATE_INTERRUPTED,
	FATE_IN_FLIGHT,
};

static enum fate
fate_of(long i)
{
	static const struct {
		int upto;
		enum fate fate;
	} mix[] = {
		{ 55, FATE_MERGED },	  { 67, FATE_BLOCKED },
		{ 75, FATE_FAILED },	  { 82, FATE_ABORTED },
		{ 87, FATE_WAITING },	  { 91, FATE_PAUSED },
		{ 95, FATE_INTERRUPTED }, { 100, FATE_IN_FLIGHT },
	};
	int k = (int)((i * 37) % 100); /* spread fates over the seqs */
	size_t j;

	for (j = 0; j < ARRAY_SIZE(mix); j++)
		if (k < mix[j].upto)
			return mix[j].fate;
	return FATE_IN_FLIGHT;
}

/* Fill state for one run: the store, the run and its event clock. */
struct filler {
	struct store *s;
	struct run r;
	int64_t ts;
	long n_events;
};

static void
fill_move(struct filler *fl, const char *to)
{
	fl->ts += 3 * MINUTE_MS;
	transition(fl->s, &fl->r, to, fl->ts, NULL);
	fl->n_events++;
}

/*
 * A working stage as the engine runs it: into the stage's status
 * (pending), stage_started, then a checkpoint note when it edits code.
 */
static void
fill_stage(struct filler *fl, const char *status, const char *stage,
	   int checkpoint)
{
	char data[160];

	run_set(&fl->r.stage, stage);
	run_set(&fl->r.phase, "pending");
	fill_move(fl, status);
	run_set(&fl->r.phase, "running");
	snprintf(data, sizeof(data), "{\"stage\":\"%s\",\"attempt\":1}", stage);
	fl->ts += MINUTE_MS;
	note(fl->s, &fl->r, "stage_started", fl->ts, data);
	fl->n_events++;
	if (checkpoint) {
		fl->ts += 4 * MINUTE_MS;
		run_set(&fl->r.checkpoint,
			"9c3a1f0e5b7d2c4a6e8f0b1d3c5e7a9b1c3d5e7f");
		note(fl->s, &fl->r, "checkpoint", fl->ts,
		     "{\"commit\":"
		     "\"9c3a1f0e5b7d2c4a6e8f0b1d3c5e7a9b1c3d5e7f\"}");
		fl->n_events++;
	}
	fl->r.tokens_in += 12000;
	fl->r.tokens_out += 3000;
	fl->r.cost_usd += 0.0825;
}

static void
fill_rest(struct filler *fl, const char *status)
{
	run_set(&fl->r.phase, "done");
	fill_move(fl, status);
}

static void
fill_end(struct filler *fl, const char *status, const char *reason)
{
	run_set(&fl->r.reason, reason);
	run_set(&fl->r.phase, "done");
	fl->r.ended_at = fl->ts + 3 * MINUTE_MS;
	fill_move(fl, status);
}

/* One fix round: reviewing -> fixing -> validating -> reviewing. */
static void
fill_fix_round(struct filler *fl)
{
	fl->r.review_loops++;
	fill_stage(fl, "fixing", "fix", 1);
	fill_stage(fl, "validating", "validate", 0);
	fill_stage(fl, "reviewing", "review", 0);
}

/* Writes run number i (1-based) with its whole history. */
static void
fill_run(struct filler *fl, long i, long count, int64_t now)
{
	enum fate fate = fate_of(i);
	char *wt = NULL, *br = NULL, *data = NULL;

	/* Oldest first, spread over the last 30 days. */
	run_prepare(&fl->r, i, now - 30 * DAY_MS + (30 * DAY_MS) * i / count);
	fl->ts = fl->r.created_at;
	create(fl->s, &fl->r);
	fl->n_events++;

	wt = xasprintf("/repo/.baton/worktrees/%s", fl->r.id);
	br = xasprintf("baton/%s", fl->r.id);
	run_set(&fl->r.worktree, wt);
	run_set(&fl->r.branch, br);
	run_set(&fl->r.base_ref, "main");
	run_set(&fl->r.base_commit, "0b1d3c5e7a9b1c3d5e7f9c3a1f0e5b7d2c4a6e8f");
	data = xasprintf("{\"path\":\"%s\",\"branch\":\"%s\"}", wt, br);
	fill_stage(fl, "planning", "plan", 0);
	fl->ts += MINUTE_MS;
	note(fl->s, &fl->r, "worktree", fl->ts, data);
	fl->n_events++;
	fill_rest(fl, "planned");
	fill_stage(fl, "architecting", "architect", 0);
	fill_rest(fl, "architected");
	if (fate == FATE_WAITING) {
		run_set(&fl->r.gate_status, "executing");
		run_set(&fl->r.gate_back, "architecting");
		fill_rest(fl, "waiting_for_approval");
		goto out;
	}
	fill_stage(fl, "executing", "execute", 1);
	if (fate == FATE_ABORTED) {
		fill_end(fl, "aborted", "aborted by user");
		goto out;
	}
	if (fate == FATE_INTERRUPTED) {
		fill_rest(fl, "interrupted");
		goto out;
	}
	fill_stage(fl, "validating", "validate", 0);
	if (fate == FATE_FAILED) {
		fill_end(fl, "failed",
			 "validation command 'make test' "
			 "exited 2");
		goto out;
	}
	fill_stage(fl, "reviewing", "review", 0);
	if (fate == FATE_IN_FLIGHT)
		goto out;
	if (fate == FATE_PAUSED) {
		run_set(&fl->r.paused_at_status, "reviewing");
		fill_rest(fl, "paused");
		goto out;
	}
	if (fate == FATE_BLOCKED) {
		fill_fix_round(fl);
		fill_fix_round(fl);
		fill_end(fl, "blocked",
			 "review budget exhausted: 2 of 2 "
			 "review loops used");
		goto out;
	}
	if (i % 3 == 0)
		fill_fix_round(fl);
	fill_stage(fl, "verifying", "verify", 0);
	fill_end(fl, "merge_ready", NULL);
out:
	run_release(&fl->r);
	free(wt);
	free(br);
	free(data);
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
	/* Touch the file: an unwritable path fails here, not at the end. */
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
 * --fill: builds COUNT runs through the store in a scratch database on
 * tmpfs (or $TMPDIR when there is no /dev/shm), then copies it over
 * dbpath. Prints how many runs and events it wrote and how long it took.
 */
static int
fill(const char *dbpath, long count)
{
	struct filler fl = { 0 };
	const char *tmp = getenv("TMPDIR"), *dir;
	sqlite3 *target = open_target(dbpath);
	int64_t now = wall_ms(), t0 = mono_ns();
	char *scratch;
	long i;

	if (!tmp || !*tmp)
		tmp = "/tmp";
	dir = scratch_dir(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp,
			  "baton-fill");
	scratch = xasprintf("%s/fill.db", dir);
	fl.s = open_store(scratch);
	for (i = 1; i <= count; i++)
		fill_run(&fl, i, count, now);
	store_close(fl.s);
	copy_db(scratch, target, dbpath);
	remove_db(scratch);
	rmdir(dir);
	printf("filled %s: %ld runs, %ld events in %.1f s\n", dbpath, count,
	       fl.n_events, (double)(mono_ns() - t0) / 1e9);
	free(scratch);
	return 0;
}

static void
usage(void)
{
	fprintf(stderr,
		"usage: bench_store [-n N] [-l RUNS] [-d DIR] [--no-shm]\n"
		"       bench_store --fill DBPATH COUNT\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct series tr1, tr100, cr, ls, shm;
	const char *tmp = getenv("TMPDIR"), *base = NULL;
	size_t n = DEFAULT_N, list_runs = DEFAULT_LIST_RUNS;
	const char *dir, *shmdir;
	char *path = NULL, fsbuf[32];
	double ops_tr1, ops_tr100, ops_cr, ops_ls, ops_shm = 0;
	int i, use_shm = 1;

	bench_name = "bench_store";
	atexit(bench_cleanup);
	if (argc == 4 && !strcmp(argv[1], "--fill"))
		return fill(argv[2], count_arg(argv[3], "COUNT"));
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = (size_t)count_arg(argv[++i], "N");
		else if (!strcmp(argv[i], "-l") && i + 1 < argc)
			list_runs = (size_t)count_arg(argv[++i], "RUNS");
		else if (!strcmp(argv[i], "-d") && i + 1 < argc)
			base = argv[++i];
		else if (!strcmp(argv[i], "--no-shm"))
			use_shm = 0;
		else
			usage();
	}
	if (!base)
		base = tmp && *tmp ? tmp : "/tmp";
	dir = scratch_dir(base, "baton-bench");

	printf("baton store benchmark: sqlite %s, synchronous=FULL, WAL\n",
	       sqlite3_libversion());
	printf("database dir: %s (%s)\n\n", dir,
	       fs_name(dir, fsbuf, sizeof(fsbuf)));
	print_header();

	series_init(&tr1, "transition, 1 run (durable)", n);
	path = xasprintf("%s/transitions1.db", dir);
	bench_transitions(path, n, 1, &tr1);
	ops_tr1 = print_series(&tr1);
	free(path);

	series_init(&tr100, "transition, 100 runs round-robin (durable)", n);
	path = xasprintf("%s/transitions100.db", dir);
	bench_transitions(path, n, SPREAD_RUNS, &tr100);
	ops_tr100 = print_series(&tr100);
	free(path);

	series_init(&cr, "run create (durable)", n);
	path = xasprintf("%s/create.db", dir);
	bench_create(path, n, &cr);
	ops_cr = print_series(&cr);
	free(path);

	series_init(&ls, "run list, all runs (one op = one full list)",
		    LIST_REPEAT);
	path = xasprintf("%s/list.db", dir);
	remove_db(path);
	fill(path, (long)list_runs);
	bench_list(path, list_runs, LIST_REPEAT, &ls);
	printf("  (listed %zu runs per op)\n", list_runs);
	ops_ls = print_series(&ls);
	remove_db(path);
	free(path);

	if (use_shm && access("/dev/shm", W_OK) == 0) {
		shmdir = scratch_dir("/dev/shm", "baton-bench");
		printf("\nreference only, not what baton uses: the same "
		       "transitions on %s (%s), where fsync costs nothing\n",
		       shmdir, fs_name(shmdir, fsbuf, sizeof(fsbuf)));
		series_init(&shm, "transition, 1 run (tmpfs, no fsync cost)",
			    n);
		path = xasprintf("%s/transitions1.db", shmdir);
		bench_transitions(path, n, 1, &shm);
		ops_shm = print_series(&shm);
		free(path);
		series_release(&shm);
	}

	printf("\nkey figures:\n");
	printf("transitions_per_s_1run=%.1f\n", ops_tr1);
	printf("transitions_per_s_100runs=%.1f\n", ops_tr100);
	printf("creates_per_s=%.1f\n", ops_cr);
	printf("list_%zu_ms=%.2f\n", list_runs,
	       ops_ls > 0 ? 1000.0 / ops_ls : 0);
	if (ops_shm > 0)
		printf("transitions_per_s_tmpfs=%.1f\n", ops_shm);

	series_release(&tr1);
	series_release(&tr100);
	series_release(&cr);
	series_release(&ls);
	return 0; /* bench_cleanup() removes the scratch directories */
}
