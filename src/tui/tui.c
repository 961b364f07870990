/*
 * The terminal UI's model and frame (tui.h). The frame is drawn whole on
 * every redraw: cursor home, each line written and cleared to its end.
 * With nothing but the visible rows formatted, a redraw costs the same
 * for 10 tasks as for 10,000 (bench/bench_tui.c measures it), and a
 * whole frame leaves nothing stale behind after a resize.
 *
 *   +--------------------------------------------------------------+
 *   | baton tui  .baton  runs 3  tasks: queued 1, running 1, ...   |  header
 *   | questions: r2-x before executing                             |  gates
 *   | [runs] tasks                                                 |
 *   | > r3-...  running      executing   Fix the thing             |  board
 *   | timeline r3-...              | output 0005-executing-fake-0  |  detail
 *   | 10:02:01 planning -> ...     | agent line                    |
 *   | message or prompt line                                       |
 *   | a:approve x:reject ...                                       |  help
 *   +--------------------------------------------------------------+
 *
 * Below 100 columns the timeline and the output are stacked instead of
 * side by side.
 */
#include "util/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/pipeline.h"
#include "core/run.h"
#include "store/store.h"
#include "tui/tui.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/term.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* Events and output lines kept for the detail panes. */
#define TUI_TIMELINE_MAX 200
#define TUI_OUTPUT_MAX	 200
/* The most of an output file read, from its end. */
#define TUI_OUTPUT_TAIL (64 * 1024)

const char tui_help[] = "a:approve x:reject c:changes p:pause r:resume "
			"A:abort s:steer Tab j/k q:quit";

static void
row_release(struct tui_row *r)
{
	free(r->id);
	free(r->status);
	free(r->stage);
	free(r->title);
	free(r->gate);
}

static void
rows_free(struct tui_row *rows, size_t nr)
{
	size_t i;

	for (i = 0; i < nr; i++)
		row_release(&rows[i]);
	free(rows);
}

void
tui_model_init(struct tui_model *m)
{
	memset(m, 0, sizeof(*m));
	strvec_init(&m->timeline);
	strvec_init(&m->output);
}

void
tui_model_release(struct tui_model *m)
{
	rows_free(m->runs, m->nr_runs);
	rows_free(m->tasks, m->nr_tasks);
	free(m->counts);
	free(m->source);
	free(m->detail_run);
	free(m->output_name);
	strvec_clear(&m->timeline);
	strvec_clear(&m->output);
	tui_model_init(m);
}

void
tui_model_add_run(struct tui_model *b, const struct run *r)
{
	struct tui_row *row;

	ALLOC_GROW(b->runs, b->nr_runs + 1, b->alloc_runs);
	row = &b->runs[b->nr_runs++];
	memset(row, 0, sizeof(*row));
	row->id = xstrdup(r->id);
	if (r->pause_requested && !status_is_terminal(r->status))
		row->status = xasprintf("%s (pausing)", r->status);
	else
		row->status = xstrdup(r->status);
	row->stage = r->stage ? xstrdup(r->stage) : NULL;
	row->title = xstrdup(r->task ? r->task : "");
	if (!strcmp(r->status, ST_WAITING) && r->gate_status)
		row->gate = xstrdup(r->gate_status);
}

void
tui_model_add_task(struct tui_model *b, const struct task *t)
{
	struct tui_row *row;

	ALLOC_GROW(b->tasks, b->nr_tasks + 1, b->alloc_tasks);
	row = &b->tasks[b->nr_tasks++];
	memset(row, 0, sizeof(*row));
	row->id = xasprintf("t%lld", (long long)t->id);
	if (t->block_reason)
		row->status = xasprintf("%s (%s)", t->status, t->block_reason);
	else
		row->status = xstrdup(t->status);
	row->stage = t->run_id ? xstrdup(t->run_id) : NULL;
	row->title = xstrdup(t->title ? t->title : "");
}

void
tui_model_take_board(struct tui_model *m, struct tui_model *from)
{
	rows_free(m->runs, m->nr_runs);
	rows_free(m->tasks, m->nr_tasks);
	m->runs = from->runs;
	m->nr_runs = from->nr_runs;
	m->alloc_runs = from->alloc_runs;
	m->tasks = from->tasks;
	m->nr_tasks = from->nr_tasks;
	m->alloc_tasks = from->alloc_tasks;
	free(m->counts);
	m->counts = from->counts;
	from->runs = from->tasks = NULL;
	from->nr_runs = from->alloc_runs = 0;
	from->nr_tasks = from->alloc_tasks = 0;
	from->counts = NULL;
}

static int
add_run(const struct run *r, void *arg)
{
	tui_model_add_run(arg, r);
	return 0;
}

static int
add_task(const struct task *t, void *arg)
{
	tui_model_add_task(arg, t);
	return 0;
}

/*
 * The runs are listed in full (not brief): the board shows the task and
 * the gate of each, which a brief listing may leave out.
 */
int
tui_load_board(struct tui_model *m, struct store *s, struct err *e)
{
	struct store_run_filter rf = { NULL, 0, 0 };
	struct store_task_filter tf = { 0 };
	struct tui_model b;
	int64_t n[NR_TASK_STATUSES];
	struct buf counts = BUF_INIT;
	size_t i;
	int rc;

	tui_model_init(&b);
	rc = store_run_list(s, &rf, add_run, &b, e);
	if (!rc)
		rc = store_task_list(s, &tf, add_task, &b, e);
	if (!rc)
		rc =
		    store_task_counts(s, task_statuses, n, NR_TASK_STATUSES, e);
	if (rc)
		goto out;
	for (i = 0; i < NR_TASK_STATUSES; i++)
		if (n[i])
			buf_addf(&counts, "%s%s %lld", counts.len ? ", " : "",
				 task_statuses[i], (long long)n[i]);
	b.counts = buf_detach(&counts, NULL);
	tui_model_take_board(m, &b);
out:
	buf_release(&counts);
	tui_model_release(&b);
	return rc;
}

/* A short text of an event's data: its message, reason or the JSON. */
static void
event_text(const char *data, struct buf *out)
{
	static const char *const keys[] = { "message", "reason",   "text",
					    "stage",   "decision", "error" };
	json_t *o = data ? json_loads(data, 0, NULL) : NULL;
	size_t i;

	for (i = 0; o && json_is_object(o) && i < ARRAY_SIZE(keys); i++) {
		const char *v = json_string_value(json_object_get(o, keys[i]));

		if (v) {
			buf_addf(out, "%s%s=%s", i ? " " : "", keys[i], v);
			json_decref(o);
			return;
		}
	}
	json_decref(o);
	if (data)
		buf_adds(out, data);
}

void
tui_timeline_add(struct strvec *tl, const struct event *ev)
{
	struct buf line = BUF_INIT;
	char ts[40];

	time_fmt_iso(ev->ts, ts, sizeof(ts));
	/* "2026-11-27T09:40:01.123Z": the time of day is enough here */
	buf_addf(&line, "%.8s ", strlen(ts) > 11 ? ts + 11 : ts);
	if (!strcmp(ev->type, "transition"))
		buf_addf(&line, "%s -> %s", ev->from ? ev->from : "(new)",
			 ev->to ? ev->to : "");
	else {
		buf_addf(&line, "%s ", ev->type);
		event_text(ev->data, &line);
	}
	if (tl->nr >= TUI_TIMELINE_MAX) {
		free((char *)tl->v[0]);
		memmove(tl->v, tl->v + 1, (tl->nr - 1) * sizeof(*tl->v));
		tl->nr--;
		tl->v[tl->nr] = NULL;
	}
	strvec_push(tl, line.ptr);
	buf_release(&line);
}

static int
add_event(const struct event *ev, void *arg)
{
	tui_timeline_add(arg, ev);
	return 0;
}

/* The newest "*.stdout" in dir (call names sort by their version). */
static char *
newest_stdout(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char *best = NULL;
	size_t len;

	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		len = strlen(de->d_name);
		if (len < 8 || strcmp(de->d_name + len - 7, ".stdout"))
			continue;
		if (!best || strcmp(de->d_name, best) > 0) {
			free(best);
			best = xstrdup(de->d_name);
		}
	}
	closedir(d);
	return best;
}

/* The last lines of path (at most TUI_OUTPUT_TAIL bytes of it). */
static void
read_tail(const char *path, struct strvec *out)
{
	struct err e = ERR_INIT;
	struct buf b = BUF_INIT;
	struct stat st;
	const char *p, *nl;
	ssize_t n;
	off_t from;
	int fd = fs_open_nofollow(path, O_RDONLY, 0, &e);

	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0)
		goto out;
	from = st.st_size > TUI_OUTPUT_TAIL ? st.st_size - TUI_OUTPUT_TAIL : 0;
	buf_init(&b, TUI_OUTPUT_TAIL);
	for (;;) {
		char chunk[8192];

		n = pread(fd, chunk, sizeof(chunk), from);
		if (n <= 0 || buf_add(&b, chunk, (size_t)n))
			break;
		from += n;
	}
	p = b.ptr;
	/* a tail that starts mid-line drops the partial line */
	if (st.st_size > TUI_OUTPUT_TAIL && (nl = memchr(p, '\n', b.len)))
		p = nl + 1;
	while (p < b.ptr + b.len) {
		size_t len;

		nl = memchr(p, '\n', (size_t)(b.ptr + b.len - p));
		len = nl ? (size_t)(nl - p) : (size_t)(b.ptr + b.len - p);
		if (out->nr >= TUI_OUTPUT_MAX) {
			free((char *)out->v[0]);
			memmove(out->v, out->v + 1,
				(out->nr - 1) * sizeof(*out->v));
			out->nr--;
			out->v[out->nr] = NULL;
		}
		strvec_pushf(out, "%.*s", (int)len, p);
		p += len + (nl ? 1 : 0);
	}
out:
	buf_release(&b);
	close(fd);
}

int
tui_load_detail(struct tui_model *m, struct store *s, const char *run_id,
		const char *run_dir, struct err *e)
{
	struct strvec tl;
	char *calls = NULL, *name = NULL, *path = NULL;
	int rc;

	strvec_init(&tl);
	rc = store_event_list(s, run_id, 0, NULL, add_event, &tl, e);
	if (rc) {
		strvec_clear(&tl);
		return rc;
	}
	strvec_clear(&m->timeline);
	m->timeline = tl;
	strvec_clear(&m->output);
	FREE_AND_NULL(m->output_name);
	if (run_dir) {
		calls = xasprintf("%s/calls", run_dir);
		name = newest_stdout(calls);
		if (name) {
			path = xasprintf("%s/%s", calls, name);
			read_tail(path, &m->output);
			m->output_name = name;
			name = NULL;
		}
	}
	if (!m->detail_run || strcmp(m->detail_run, run_id)) {
		free(m->detail_run);
		m->detail_run = xstrdup(run_id);
	}
	free(calls);
	free(name);
	free(path);
	return 0;
}

/* Header, questions, board title; message and help: the fixed lines. */
#define TUI_FIXED_LINES 5

size_t
tui_board_rows(int rows)
{
	int free_lines = rows - TUI_FIXED_LINES;

	if (free_lines < 2)
		return 1;
	/* the board takes 2/5 of the rest; the detail panes the others */
	return free_lines * 2 / 5 > 0 ? (size_t)(free_lines * 2 / 5) : 1;
}

const struct tui_row *
tui_selected(const struct tui_model *m, const struct tui_view *v)
{
	size_t nr = v->board == TUI_RUNS ? m->nr_runs : m->nr_tasks;
	const struct tui_row *rows = v->board == TUI_RUNS ? m->runs : m->tasks;

	if (!nr)
		return NULL;
	return &rows[v->sel[v->board] < nr ? v->sel[v->board] : nr - 1];
}

const char *
tui_selected_run(const struct tui_model *m, const struct tui_view *v)
{
	const struct tui_row *r = tui_selected(m, v);

	if (!r)
		return NULL;
	return v->board == TUI_RUNS ? r->id : r->stage;
}

void
tui_select_id(const struct tui_model *m, struct tui_view *v, enum tui_board b,
	      const char *id)
{
	const struct tui_row *rows = b == TUI_RUNS ? m->runs : m->tasks;
	size_t i, nr = b == TUI_RUNS ? m->nr_runs : m->nr_tasks;

	for (i = 0; id && i < nr; i++) {
		if (!strcmp(rows[i].id, id)) {
			v->sel[b] = i;
			return;
		}
	}
}

void
tui_move(const struct tui_model *m, struct tui_view *v, long delta, int rows)
{
	size_t nr = v->board == TUI_RUNS ? m->nr_runs : m->nr_tasks;
	size_t shown = tui_board_rows(rows);
	size_t *sel = &v->sel[v->board], *top = &v->top[v->board];

	if (!nr) {
		*sel = *top = 0;
		return;
	}
	if (*sel >= nr)
		*sel = nr - 1;
	if (delta < 0)
		*sel = (size_t)-delta > *sel ? 0 : *sel - (size_t)-delta;
	else
		*sel =
		    *sel + (size_t)delta >= nr ? nr - 1 : *sel + (size_t)delta;
	if (*sel < *top)
		*top = *sel;
	if (*sel >= *top + shown)
		*top = *sel - shown + 1;
	if (*top + shown > nr)
		*top = nr > shown ? nr - shown : 0;
}

/*
 * Appends text as at most width columns of one line: newlines and tabs
 * become spaces, every other control character is shown escaped
 * (term_escape), and the rest is cut at width columns, a UTF-8 sequence
 * counting one. Pads with spaces to width when pad is set. Returns the
 * columns written.
 */
static size_t
put_cell(struct buf *out, const char *text, size_t width, int pad)
{
	struct buf flat = BUF_INIT, shown = BUF_INIT;
	size_t i, cols = 0;
	const char *p;

	buf_adds(&flat, text ? text : "");
	for (i = 0; i < flat.len; i++)
		if (flat.ptr[i] == '\n' || flat.ptr[i] == '\t')
			flat.ptr[i] = ' ';
	term_escape(&shown, flat.ptr, flat.len);
	for (p = shown.ptr; *p && cols < width; cols++) {
		const char *start = p++;

		while ((*p & 0xc0) == 0x80)
			p++;
		buf_add(out, start, (size_t)(p - start));
	}
	for (; pad && cols < width; cols++)
		buf_addch(out, ' ');
	buf_release(&flat);
	buf_release(&shown);
	return cols;
}

/* Ends a line of the frame: clears to its end, then goes to the next. */
static void
end_line(struct buf *out, int last)
{
	buf_adds(out, "\033[0m\033[K");
	if (!last)
		buf_adds(out, "\r\n");
}

static void
put_line(struct buf *out, const char *text, int cols, const char *attr,
	 int last)
{
	if (attr)
		buf_adds(out, attr);
	put_cell(out, text, (size_t)cols, attr != NULL);
	end_line(out, last);
}

/* The questions line: each run waiting at a gate. */
static void
questions(const struct tui_model *m, struct buf *line)
{
	size_t i, n = 0;

	buf_adds(line, "questions: ");
	for (i = 0; i < m->nr_runs; i++) {
		if (!m->runs[i].gate)
			continue;
		if (n++ < 4)
			buf_addf(line, "%s%s before %s", n > 1 ? ", " : "",
				 m->runs[i].id, m->runs[i].gate);
	}
	if (n > 4)
		buf_addf(line, " (+%zu more)", n - 4);
	if (!n)
		buf_adds(line, "none");
	else
		buf_adds(line, "  (a approve, x reject, c request changes)");
}

static void
board_row(const struct tui_model *m, const struct tui_view *v, size_t i,
	  int cols, struct buf *out)
{
	const struct tui_row *r =
	    v->board == TUI_RUNS ? &m->runs[i] : &m->tasks[i];
	int sel = i == v->sel[v->board];
	size_t w = (size_t)cols, used;

	if (sel)
		buf_adds(out, "\033[7m");
	used = put_cell(out, sel ? "> " : "  ", w < 2 ? w : 2, 1);
	if (v->board == TUI_RUNS) {
		used += put_cell(out, r->id, w - used < 28 ? w - used : 28, 1);
		used += put_cell(out, " ", w - used < 1 ? 0 : 1, 1);
		if (r->gate)
			buf_adds(out, sel ? "" : "\033[1m");
		used +=
		    put_cell(out, r->status, w - used < 22 ? w - used : 22, 1);
		if (r->gate && !sel)
			buf_adds(out, "\033[22m");
		used += put_cell(out, r->stage ? r->stage : "-",
				 w - used < 12 ? w - used : 12, 1);
	} else {
		used += put_cell(out, r->id, w - used < 7 ? w - used : 7, 1);
		used +=
		    put_cell(out, r->status, w - used < 30 ? w - used : 30, 1);
		used += put_cell(out, r->stage ? r->stage : "-",
				 w - used < 22 ? w - used : 22, 1);
	}
	put_cell(out, r->title, w - used, sel);
	end_line(out, 0);
}

/* Line i of a detail pane: its title, then the newest lines that fit. */
static const char *
pane_line(const struct strvec *lines, size_t height, size_t i)
{
	size_t first = lines->nr > height ? lines->nr - height : 0;

	return first + i < lines->nr ? lines->v[first + i] : "";
}

void
tui_render(const struct tui_model *m, const struct tui_view *v, int rows,
	   int cols, struct buf *out)
{
	size_t nr = v->board == TUI_RUNS ? m->nr_runs : m->nr_tasks;
	size_t shown, detail, i, top = v->top[v->board];
	struct buf line = BUF_INIT, title2 = BUF_INIT;
	int side = cols >= 100, r;

	if (rows < 1 || cols < 1)
		return;
	buf_adds(out, "\033[?25l\033[H");
	if (rows < TUI_FIXED_LINES + 2 || cols < 20) {
		put_line(out, "baton tui: the terminal is too small", cols,
			 NULL, rows == 1);
		for (r = 1; r < rows; r++)
			end_line(out, r == rows - 1);
		return;
	}
	buf_addf(&line, "baton tui  runs %zu  tasks %zu%s%s  %s", m->nr_runs,
		 m->nr_tasks, m->counts && *m->counts ? ": " : "",
		 m->counts ? m->counts : "", m->source ? m->source : "");
	put_line(out, line.ptr, cols, "\033[7m", 0);
	buf_reset(&line);
	questions(m, &line);
	put_line(out, line.ptr, cols, NULL, 0);
	buf_reset(&line);
	buf_addf(&line, "%s  %s   (%zu of %zu)",
		 v->board == TUI_RUNS ? "[RUNS]" : " runs ",
		 v->board == TUI_TASKS ? "[TASKS]" : " tasks ",
		 nr ? v->sel[v->board] + 1 : 0, nr);
	put_line(out, line.ptr, cols, "\033[1m", 0);
	shown = tui_board_rows(rows);
	for (i = 0; i < shown; i++) {
		if (top + i < nr)
			board_row(m, v, top + i, cols, out);
		else if (i == 0)
			put_line(out,
				 v->board == TUI_RUNS
				     ? "  no runs yet"
				     : "  no tasks (baton task add TEXT)",
				 cols, NULL, 0);
		else
			end_line(out, 0);
	}
	detail = (size_t)rows - TUI_FIXED_LINES - shown;
	buf_reset(&line);
	buf_addf(&line, "timeline %s",
		 m->detail_run ? m->detail_run : "(no run selected)");
	buf_addf(&title2, "output %s",
		 m->output_name ? m->output_name : "(none yet)");
	if (side) {
		size_t lw = (size_t)cols / 2 - 1, rw = (size_t)cols - lw - 1;

		for (i = 0; i < detail; i++) {
			if (i == 0)
				buf_adds(out, "\033[1m");
			put_cell(out,
				 i ? pane_line(&m->timeline, detail - 1, i - 1)
				   : line.ptr,
				 lw, 1);
			buf_adds(out, "\033[0m|");
			if (i == 0)
				buf_adds(out, "\033[1m");
			put_cell(out,
				 i ? pane_line(&m->output, detail - 1, i - 1)
				   : title2.ptr,
				 rw, 0);
			end_line(out, 0);
		}
	} else {
		size_t th = detail / 2, oh = detail - th;

		for (i = 0; i < detail; i++) {
			if (i == 0)
				put_line(out, line.ptr, cols, "\033[1m", 0);
			else if (i < th)
				put_line(out,
					 pane_line(&m->timeline, th - 1, i - 1),
					 cols, NULL, 0);
			else if (i == th)
				put_line(out, title2.ptr, cols, "\033[1m", 0);
			else
				put_line(
				    out,
				    pane_line(&m->output, oh - 1, i - th - 1),
				    cols, NULL, 0);
		}
	}
	buf_reset(&line);
	if (v->prompt)
		buf_addf(&line, "%s%s", v->prompt, v->input ? v->input : "");
	else if (v->msg)
		buf_adds(&line, v->msg);
	put_line(out, line.ptr, cols, v->prompt ? "\033[1m" : NULL, 0);
	put_line(out, tui_help, cols, "\033[7m", 1);
	if (v->prompt)
		buf_adds(out, "\033[?25h");
	buf_release(&line);
	buf_release(&title2);
}
