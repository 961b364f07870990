/*
 * The terminal UI's model and its drawing (`baton tui`, docs/tui.md):
 * what the screen shows, read from the store and the run folders, and
 * the frame that shows it, built as one string of ANSI escapes. The
 * terminal itself (raw mode, keys, resize, the event loop) and the
 * actions a key takes are cli/cmd_tui.c's; keeping them apart lets
 * bench/bench_tui.c time a redraw with no terminal.
 *
 * Everything shown that a person or an agent wrote (task titles, event
 * data, the agent's output) passes through term_escape (util/term.h)
 * before it reaches the frame: an escape sequence in it is drawn as
 * text ("\x1b]0;..."), never sent to the terminal.
 */
#ifndef BATON_TUI_TUI_H
#define BATON_TUI_TUI_H

#include <stddef.h>
#include <stdint.h>

#include "util/strvec.h"

struct buf;
struct err;
struct store;

/* One line of the board: a run or a task. Strings owned by the model. */
struct tui_row {
	char *id;     /* "r3-fix-it", "t12" */
	char *status; /* lifecycle or task status */
	char *stage;  /* runs: stage (or NULL); tasks: the run id (or NULL) */
	char *title;  /* what was asked */
	char *gate;   /* runs waiting at a gate: the status it would enter */
};

/* Which board the screen shows. */
enum tui_board { TUI_RUNS, TUI_TASKS };

struct tui_model {
	struct tui_row *runs, *tasks;
	size_t nr_runs, alloc_runs, nr_tasks, alloc_tasks;
	char *counts;	  /* "queued 3, running 1, ..." of the tasks */
	char *source;	  /* where the data comes from, for the header */
	char *detail_run; /* the run whose timeline and output are shown */
	struct strvec timeline; /* its events, one line each, oldest first */
	struct strvec output;	/* the tail of its newest agent call's output */
	char *output_name;	/* that call's name, or NULL */
};

/* What the person is doing on the screen. */
struct tui_view {
	enum tui_board board;
	size_t sel[2], top[2]; /* selected row and first shown, per board */
	char *msg;	       /* the message line (owned), or NULL */
	const char *prompt;    /* asking for text: the question, else NULL */
	const char *input;     /* the text typed so far */
};

void tui_model_init(struct tui_model *m);
void tui_model_release(struct tui_model *m);

/*
 * Reads the board (every run, newest first, and every task in id order,
 * with the task counts) from s into m, replacing what m held. Returns 0,
 * or a negative error with e set (m then keeps what it held).
 */
int tui_load_board(struct tui_model *m, struct store *s, struct err *e);

/*
 * Reads run_id's timeline (its last events) and the tail of its newest
 * agent call's stdout (run_dir/calls/NNNN-....stdout) into m. run_dir
 * may be NULL (no output shown). The output file is opened without
 * following a link. Returns 0 or a negative error with e set.
 */
int tui_load_detail(struct tui_model *m, struct store *s, const char *run_id,
		    const char *run_dir, struct err *e);

/*
 * For a model read from elsewhere (tui/remote.h): appends a run or a task
 * to m's board as tui_load_board shows it (copies; r and t borrowed);
 * moves from's board (rows and counts) into m, replacing m's, and leaves
 * from's empty; appends ev to a timeline as tui_load_detail writes it,
 * keeping the last 200.
 */
struct event;
struct run;
struct task;
void tui_model_add_run(struct tui_model *m, const struct run *r);
void tui_model_add_task(struct tui_model *m, const struct task *t);
void tui_model_take_board(struct tui_model *m, struct tui_model *from);
void tui_timeline_add(struct strvec *tl, const struct event *ev);

/* Lines of the board the frame has room for at rows x cols. */
size_t tui_board_rows(int rows);

/* The row selected on the current board, or NULL when it is empty. */
const struct tui_row *tui_selected(const struct tui_model *m,
				   const struct tui_view *v);
/*
 * The run the selection stands for: the run itself, or a task's current
 * run (NULL when the task has none or the board is empty). Borrowed.
 */
const char *tui_selected_run(const struct tui_model *m,
			     const struct tui_view *v);

/*
 * Selects the row of board b whose id is id, when there is one (else the
 * selection stays where it is): after the board is read again, the
 * selection stays on the run or task it was on, so that a key acts on
 * what was selected, however many rows came in above it.
 */
void tui_select_id(const struct tui_model *m, struct tui_view *v,
		   enum tui_board b, const char *id);

/* Moves the selection by delta rows, keeping it on the screen. */
void tui_move(const struct tui_model *m, struct tui_view *v, long delta,
	      int rows);

/*
 * Appends to out the whole frame for a terminal of rows x cols (cursor
 * home, every line drawn and cleared to its end). Lines never exceed
 * cols columns (a UTF-8 sequence counts as one) and hold no control
 * character but the frame's own escapes.
 */
void tui_render(const struct tui_model *m, const struct tui_view *v, int rows,
		int cols, struct buf *out);

/* The key help shown on the last line. */
extern const char tui_help[];

#endif
