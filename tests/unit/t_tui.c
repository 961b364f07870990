/*
 * The terminal UI's frame (tui/tui.h): every line fits the terminal, the
 * only escapes in it are the frame's own, text from agents and people is
 * drawn inert, and the selection moves and stays as documented.
 */
#include "util/compat.h"

#include "test.h"
#include "tui/tui.h"
#include "util/buf.h"
#include "util/strvec.h"
#include "util/xalloc.h"

/* The escapes tui_render writes itself; anything else is a leak. */
static const char *const own[] = { "\033[?25l", "\033[?25h", "\033[H",
				   "\033[0m",	"\033[K",    "\033[7m",
				   "\033[1m",	"\033[22m" };

static const char hostile[] = "evil \033]0;PWNED\007\033[2J\033[31mred\r\n"
			      "\tnext \xc2\x9b"
			      "1m";

static void
add_row(struct tui_row **rows, size_t *nr, size_t *alloc, const char *id,
	const char *status, const char *title, const char *gate)
{
	struct tui_row *r;

	ALLOC_GROW(*rows, *nr + 1, *alloc);
	r = &(*rows)[(*nr)++];
	memset(r, 0, sizeof(*r));
	r->id = xstrdup(id);
	r->status = xstrdup(status);
	r->stage = xstrdup("execute");
	r->title = xstrdup(title);
	r->gate = gate ? xstrdup(gate) : NULL;
}

static void
model(struct tui_model *m, size_t tasks)
{
	size_t i;

	tui_model_init(m);
	m->source = xstrdup("/repo/.baton/baton.db");
	m->counts = xstrdup("queued 2");
	add_row(&m->runs, &m->nr_runs, &m->alloc_runs, "r2-evil",
		"waiting_for_approval", hostile, "executing");
	add_row(&m->runs, &m->nr_runs, &m->alloc_runs, "r1-\xc3\xa9t\xc3\xa9",
		"executing", "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93", NULL);
	for (i = 0; i < tasks; i++) {
		char id[32];

		snprintf(id, sizeof(id), "t%zu", i + 1);
		add_row(&m->tasks, &m->nr_tasks, &m->alloc_tasks, id, "queued",
			i ? "a task" : hostile, NULL);
	}
	m->detail_run = xstrdup("r2-evil");
	strvec_push(&m->timeline, hostile);
	strvec_push(&m->output, hostile);
	m->output_name = xstrdup("0001-execute-fake-0.stdout");
}

/*
 * Checks the frame for rows x cols: rows lines, none wider than cols
 * (a UTF-8 sequence counting one), no control byte but the frame's own
 * escapes. Returns the frame with those escapes taken out, to search.
 */
static char *
check_frame(const struct buf *f, int rows, int cols)
{
	struct buf plain = BUF_INIT;
	const char *p = f->ptr;
	int lines = 1, width = 0;
	size_t i;

	while (*p) {
		for (i = 0; i < ARRAY_SIZE(own); i++)
			if (!strncmp(p, own[i], strlen(own[i])))
				break;
		if (i < ARRAY_SIZE(own)) {
			p += strlen(own[i]);
			continue;
		}
		if (p[0] == '\r' && p[1] == '\n') {
			ASSERT(width <= cols);
			lines++;
			width = 0;
			buf_addch(&plain, '\n');
			p += 2;
			continue;
		}
		ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
		if ((*p & 0xc0) != 0x80)
			width++;
		buf_addch(&plain, *p++);
	}
	ASSERT(width <= cols);
	ASSERT_EQ(lines, rows);
	return buf_detach(&plain, NULL);
}

TEST(tui_frame_fits_every_size_and_leaks_no_escape)
{
	static const int sizes[][2] = { { 24, 80 }, { 60, 200 }, { 7, 20 },
					{ 6, 20 },  { 3, 10 },	 { 1, 1 },
					{ 30, 99 }, { 30, 100 } };
	struct tui_model m;
	struct tui_view v = { 0 };
	size_t k;

	model(&m, 3);
	for (k = 0; k < ARRAY_SIZE(sizes); k++) {
		struct buf f = BUF_INIT;
		char *plain;

		for (v.board = TUI_RUNS; v.board <= TUI_TASKS; v.board++) {
			buf_reset(&f);
			tui_render(&m, &v, sizes[k][0], sizes[k][1], &f);
			plain = check_frame(&f, sizes[k][0], sizes[k][1]);
			free(plain);
		}
		buf_release(&f);
	}
	tui_model_release(&m);
}

TEST(tui_frame_shows_hostile_text_as_text)
{
	struct tui_model m;
	struct tui_view v = { 0 };
	struct buf f = BUF_INIT;
	char *plain;

	model(&m, 3);
	tui_render(&m, &v, 60, 200, &f);
	plain = check_frame(&f, 60, 200);
	ASSERT(strstr(plain, "evil \\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mred\\r"));
	ASSERT(strstr(plain, "questions: r2-evil before executing"));
	ASSERT(strstr(plain, "\\u009b1m"));
	free(plain);
	buf_release(&f);
	tui_model_release(&m);
}

TEST(tui_selection_moves_and_stays_on_its_row)
{
	struct tui_model m;
	struct tui_view v = { 0 };

	model(&m, 1000);
	v.board = TUI_TASKS;
	tui_move(&m, &v, 1000000, 24);
	ASSERT_EQ(v.sel[TUI_TASKS], 999);
	ASSERT_EQ(v.top[TUI_TASKS] + tui_board_rows(24), 1000);
	ASSERT_STREQ(tui_selected(&m, &v)->id, "t1000");
	tui_move(&m, &v, -5, 24);
	ASSERT_STREQ(tui_selected(&m, &v)->id, "t995");
	tui_select_id(&m, &v, TUI_TASKS, "t10");
	tui_move(&m, &v, 0, 24);
	ASSERT_EQ(v.sel[TUI_TASKS], 9);
	ASSERT_EQ(v.top[TUI_TASKS], 9);
	tui_select_id(&m, &v, TUI_TASKS, "t99999"); /* gone: stays */
	ASSERT_EQ(v.sel[TUI_TASKS], 9);
	/* a task's run is its stage field; the runs board's is its id */
	ASSERT_STREQ(tui_selected_run(&m, &v), "execute");
	v.board = TUI_RUNS;
	ASSERT_STREQ(tui_selected_run(&m, &v), "r2-evil");
	tui_model_release(&m);
}
