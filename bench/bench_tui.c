/*
 * bench_tui: how long `baton tui` takes to redraw with many tasks
 * (issue 23: "a redraw under 50 ms with 1,000 tasks"). A redraw is what
 * the TUI does when the store says something changed: read the board
 * (every run and task, the task counts), read the selected run's
 * timeline and agent output, and build the frame (tui/tui.h). The
 * terminal's own drawing is not included: the frame is one write(2).
 *
 *   bench_tui [-t TASKS] [-r RUNS] [-i ROUNDS] [-d DIR]
 *
 * Fills a fresh SQLite store in DIR (default $TMPDIR or /tmp) with TASKS
 * tasks (default 1000) and RUNS runs (default 100), then times ROUNDS
 * (default 50) redraws at 80x24 and at 200x60: the frame alone, and the
 * whole redraw. Prints the median, the 95th percentile and the slowest,
 * in milliseconds, and the frame's size. Figures only; nothing asserted.
 */
#include "util/compat.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_util.h"
#include "core/run.h"
#include "store/store.h"
#include "tui/tui.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"

static void
fill(struct store *s, long tasks, long runs)
{
	struct err e = ERR_INIT;
	long i;

	for (i = 0; i < tasks; i++) {
		struct task t = { 0 };
		char *title = xasprintf("benchmark task %ld: add a --version "
					"flag to the command line",
					i);

		t.title = title;
		t.status = (char *)TASK_QUEUED;
		t.max_attempts = 3;
		if (store_task_add(s, &t, NULL, &e))
			fail("%s", e.msg);
		t.title = NULL;
		t.status = NULL;
		task_release(&t);
		free(title);
	}
	for (i = 0; i < runs; i++) {
		struct run r = { 0 };

		r.task = xasprintf("benchmark run %ld", i);
		run_set(&r.pipeline, "feature");
		run_set(&r.status, i % 10 ? "executing" : "waiting_for_approval");
		run_set(&r.gate_status, "executing");
		run_set(&r.stage, "execute");
		run_set(&r.phase, "running");
		run_set(&r.config_hash, "3f1c0ffee0ddba11");
		r.max_review_loops = 2;
		r.created_at = wall_ms();
		if (store_run_create(s, &r, &e))
			fail("%s", e.msg);
		run_release(&r);
	}
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static void
report(const char *what, int64_t *ns, long n, size_t bytes)
{
	qsort(ns, (size_t)n, sizeof(*ns), cmp_i64);
	printf("  %-34s median %7.3f ms  p95 %7.3f ms  max %7.3f ms"
	       "  (frame %zu bytes)\n",
	       what, ns[n / 2] / 1e6, ns[(n * 95) / 100 < n ? (n * 95) / 100 :
							       n - 1] / 1e6,
	       ns[n - 1] / 1e6, bytes);
}

int
main(int argc, char **argv)
{
	static const int sizes[][2] = { { 24, 80 }, { 60, 200 } };
	long tasks = 1000, runs = 100, rounds = 50, i;
	const char *parent = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct tui_model m;
	struct tui_view v = { 0 };
	struct buf frame = BUF_INIT;
	struct err e = ERR_INIT;
	struct store *s;
	const char *dir;
	char *db, fsbuf[64];
	int64_t *ns, t0;
	size_t k;
	int opt;

	bench_name = "bench_tui";
	while ((opt = getopt(argc, argv, "t:r:i:d:")) != -1) {
		switch (opt) {
		case 't': tasks = count_arg(optarg, "-t"); break;
		case 'r': runs = count_arg(optarg, "-r"); break;
		case 'i': rounds = count_arg(optarg, "-i"); break;
		case 'd': parent = optarg; break;
		default:
			fprintf(stderr, "usage: bench_tui [-t TASKS] [-r RUNS] "
					"[-i ROUNDS] [-d DIR]\n");
			return 2;
		}
	}
	atexit(bench_cleanup);
	dir = scratch_dir(parent, "bench_tui");
	db = xasprintf("%s/baton.db", dir);
	s = open_store(db);
	t0 = mono_ns();
	fill(s, tasks, runs);
	printf("bench_tui: %ld tasks, %ld runs on %s (filled in %.1f s), "
	       "%ld rounds\n",
	       tasks, runs, fs_name(dir, fsbuf, sizeof(fsbuf)),
	       (mono_ns() - t0) / 1e9, rounds);
	ns = xcalloc((size_t)rounds, sizeof(*ns));
	tui_model_init(&m);
	m.source = xstrdup(db);
	v.board = TUI_TASKS;
	if (tui_load_board(&m, s, &e))
		fail("%s", e.msg);
	for (k = 0; k < ARRAY_SIZE(sizes); k++) {
		int rows = sizes[k][0], cols = sizes[k][1];

		printf("%dx%d:\n", cols, rows);
		/* the selection half way down the board, as after scrolling */
		v.sel[TUI_TASKS] = (size_t)tasks / 2;
		tui_move(&m, &v, 0, rows);
		for (i = 0; i < rounds; i++) {
			buf_reset(&frame);
			t0 = mono_ns();
			tui_render(&m, &v, rows, cols, &frame);
			ns[i] = mono_ns() - t0;
		}
		report("frame only (a key, a resize)", ns, rounds, frame.len);
		for (i = 0; i < rounds; i++) {
			const char *run;

			buf_reset(&frame);
			t0 = mono_ns();
			if (tui_load_board(&m, s, &e))
				fail("%s", e.msg);
			v.board = TUI_RUNS;
			run = tui_selected_run(&m, &v);
			if (run && tui_load_detail(&m, s, run, NULL, &e))
				fail("%s", e.msg);
			v.board = TUI_TASKS;
			tui_render(&m, &v, rows, cols, &frame);
			ns[i] = mono_ns() - t0;
		}
		report("store change (read all + frame)", ns, rounds,
		       frame.len);
	}
	tui_model_release(&m);
	buf_release(&frame);
	free(ns);
	free(db);
	store_close(s);
	return 0;
}
