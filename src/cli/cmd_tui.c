/*
 * baton tui: the board of runs and tasks, a run's timeline and its agent's
 * output, and the open questions, live in the terminal, with keys for
 * the decisions and requests of `baton approvals`, `pause`, `resume`,
 * `abort` and `steer` (docs/tui.md). Each key calls the engine function
 * the command calls (engine_decide, engine_pause, ...), so the TUI can do
 * nothing the command line cannot.
 *
 * Nothing is polled: the loop sleeps in poll(2) on the terminal, a
 * self-pipe that SIGWINCH and SIGTERM write to, the store's watch fd
 * (store_watch_fd: any process's commit wakes it) and an inotify watch
 * on the selected run's calls/ folder, where its driver writes the
 * agent's output as it comes. It also wakes every few seconds, as the
 * store's watch asks (store.h), to drain and refresh the ages.
 *
 * The drawing is tui/tui.c's; everything an agent or a person wrote is
 * escaped there before it reaches the terminal.
 */
#include "util/compat.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/gate.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "store/store.h"
#include "tui/remote.h"
#include "tui/tui.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/xalloc.h"

/* How long the loop sleeps at most (store.h: wake from time to time). */
#define TUI_IDLE_MS 5000
/* The longest text typed at a prompt. */
#define TUI_INPUT_MAX 2000

static int wake_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_winch, got_term;

static void
on_signal(int sig)
{
	int saved = errno;
	char c = 0;

	if (sig == SIGWINCH)
		got_winch = 1;
	else
		got_term = 1;
	if (write(wake_pipe[1], &c, 1) < 0) {
		/* full: a wake-up is already pending */
	}
	errno = saved;
}

/* What is being asked at the prompt line. */
enum ask { ASK_NONE, ASK_CHANGES, ASK_STEER, ASK_ABORT };

struct tui {
	struct cli *c;
	struct tui_remote *remote; /* --url: serve's API, not the store */
	struct tui_model m;
	struct tui_view v;
	int rows, cols;
	enum ask ask;
	char *ask_run;	  /* the run the prompt is about */
	char *prompt;	  /* its question */
	struct buf input; /* what was typed */
	int watch;	  /* store_watch_fd, or -1 */
	int ino;	  /* inotify on the detail run's folder, or -1 */
	char *ino_run;	  /* the run ino watches */
	struct termios saved;
	int raw;
	struct buf frame;
};

static void set_msg(struct tui *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_msg(struct tui *t, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	free(t->v.msg);
	t->v.msg = buf_detach(&b, NULL);
}

static void
term_size(struct tui *t)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row &&
	    ws.ws_col) {
		t->rows = ws.ws_row;
		t->cols = ws.ws_col;
	} else {
		t->rows = 24;
		t->cols = 80;
	}
}

static void
draw(struct tui *t)
{
	buf_reset(&t->frame);
	t->v.prompt = t->ask != ASK_NONE ? t->prompt : NULL;
	t->v.input = t->input.ptr;
	tui_render(&t->m, &t->v, t->rows, t->cols, &t->frame);
	if (fs_write_all(STDOUT_FILENO, t->frame.ptr, t->frame.len)) {
		/* the terminal is gone; the loop ends on its EOF */
	}
}

/* Watches the run's folder and its calls/ for the agent's output. */
static void
watch_run(struct tui *t, const char *run_id)
{
	char *dir, *calls;

	if (t->ino_run && run_id && !strcmp(t->ino_run, run_id))
		return;
	if (t->ino >= 0)
		close(t->ino);
	t->ino = -1;
	FREE_AND_NULL(t->ino_run);
	if (!run_id)
		return;
	dir = workspace_run_dir(&t->c->ws, run_id);
	calls = xasprintf("%s/calls", dir);
	t->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (t->ino >= 0) {
		/* the folder: calls/ appearing; calls/: output written */
		inotify_add_watch(t->ino, dir, IN_CREATE | IN_ONLYDIR);
		inotify_add_watch(t->ino, calls,
				  IN_CREATE | IN_MODIFY | IN_ONLYDIR);
	}
	t->ino_run = xstrdup(run_id);
	free(calls);
	free(dir);
}

/* Reads the selected run's timeline and output again. */
static void
load_detail(struct tui *t)
{
	const char *id = tui_selected_run(&t->m, &t->v);
	struct err e = ERR_INIT;
	char *dir;

	if (!t->remote)
		watch_run(t, id);
	if (!id) {
		FREE_AND_NULL(t->m.detail_run);
		FREE_AND_NULL(t->m.output_name);
		strvec_clear(&t->m.timeline);
		strvec_clear(&t->m.output);
		return;
	}
	if (t->remote) {
		if (tui_remote_load_detail(t->remote, &t->m, id, &e))
			set_msg(t, "%s", e.msg);
		return;
	}
	dir = workspace_run_dir(&t->c->ws, id);
	if (tui_load_detail(&t->m, t->c->store, id, dir, &e))
		set_msg(t, "%s", e.msg);
	free(dir);
}

static void
load_all(struct tui *t)
{
	enum tui_board cur = t->v.board, b;
	struct err e = ERR_INIT;
	char *sel[2] = { NULL, NULL };

	/* the selection stays on its run and task (tui_select_id) */
	for (b = TUI_RUNS; b <= TUI_TASKS; b++) {
		const struct tui_row *r;

		t->v.board = b;
		r = tui_selected(&t->m, &t->v);
		sel[b] = r ? xstrdup(r->id) : NULL;
	}
	t->v.board = cur;
	if (t->remote ? tui_remote_load_board(t->remote, &t->m, &e)
		      : tui_load_board(&t->m, t->c->store, &e))
		set_msg(t, "%s", e.msg);
	for (b = TUI_RUNS; b <= TUI_TASKS; b++) {
		tui_select_id(&t->m, &t->v, b, sel[b]);
		t->v.board = b;
		tui_move(&t->m, &t->v, 0, t->rows);
		free(sel[b]);
	}
	t->v.board = cur;
	load_detail(t);
}

static void
ask(struct tui *t, enum ask what, const char *run, const char *question)
{
	t->ask = what;
	free(t->ask_run);
	t->ask_run = xstrdup(run);
	free(t->prompt);
	t->prompt = xasprintf("%s %s: ", question, run);
	buf_reset(&t->input);
}

/* After a decision: a hint when no process drives the run on. */
static void
said_run(struct tui *t, const char *what, const struct run *r)
{
	if (!status_is_terminal(r->status) &&
	    !engine_driver_pid(&t->c->en, r->id))
		set_msg(t,
			"%s: %s, now %s (no process drives it: baton resume "
			"%s)",
			r->id, what, r->status, r->id);
	else
		set_msg(t, "%s: %s, now %s", r->id, what, r->status);
}

/* A key's request to a remote serve (tui_remote_act). Returns 1. */
static int
remote_act(struct tui *t, const char *verb, const char *id, const char *text)
{
	struct err e = ERR_INIT;
	char *status = NULL;

	if (tui_remote_act(t->remote, verb, id, text, &status, &e))
		set_msg(t, "%s", e.msg);
	else if (*status)
		set_msg(t, "%s: %s, now %s", id, verb, status);
	else
		set_msg(t, "%s: %s sent", id, verb);
	free(status);
	return 1;
}

static void
decide(struct tui *t, const char *id, enum gate_decision d,
       const char *guidance)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (t->remote) {
		remote_act(t, gate_decision_name(d), id, guidance);
		return;
	}
	if (engine_decide(&t->c->en, id, d, guidance, &r, &e))
		set_msg(t, "%s", e.msg);
	else
		said_run(t, gate_decision_name(d), &r);
	run_release(&r);
}

static void
do_pause(struct tui *t, const char *id)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };

	if (t->remote && remote_act(t, "pause", id, NULL))
		return;
	if (engine_pause(&t->c->en, id, &r, &e))
		set_msg(t, "%s", e.msg);
	else if (!strcmp(r.status, "paused"))
		set_msg(t, "%s: paused (r resumes it)", r.id);
	else
		set_msg(t,
			"%s: pause requested; it takes effect at the next "
			"stage boundary",
			r.id);
	run_release(&r);
}

static void
do_resume(struct tui *t, const char *id)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int drive = 0;

	if (t->remote && remote_act(t, "resume", id, NULL))
		return;
	if (engine_resume(&t->c->en, id, &drive, &r, &e))
		set_msg(t, "%s", e.msg);
	else if (drive)
		set_msg(t,
			"%s: resumed (%s); no process drives it: baton "
			"resume %s",
			r.id, r.status, r.id);
	else
		set_msg(t, "%s: resumed (%s)", r.id, r.status);
	run_release(&r);
}

static void
do_abort(struct tui *t, const char *id)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };

	set_msg(t, "%s: aborting...", id);
	draw(t);
	if (t->remote && remote_act(t, "abort", id, NULL))
		return;
	if (engine_abort(&t->c->en, id, &r, &e))
		set_msg(t, "%s", e.msg);
	else
		set_msg(t, "%s: %s (worktree kept)", r.id, r.status);
	run_release(&r);
}

/* The prompt's Enter: does what was asked with the text typed. */
static void
answer(struct tui *t)
{
	enum ask what = t->ask;
	struct err e = ERR_INIT;

	t->ask = ASK_NONE;
	switch (what) {
	case ASK_CHANGES:
		if (!t->input.len)
			set_msg(t, "request changes needs guidance: nothing "
				   "sent");
		else
			decide(t, t->ask_run, GATE_CHANGES, t->input.ptr);
		break;
	case ASK_STEER:
		if (!t->input.len)
			set_msg(t, "steer needs text: nothing sent");
		else if (t->remote)
			remote_act(t, "steer", t->ask_run, t->input.ptr);
		else if (engine_steer(&t->c->en, t->ask_run, t->input.ptr, &e))
			set_msg(t, "%s", e.msg);
		else
			set_msg(t, "%s: guidance recorded for the next stage",
				t->ask_run);
		break;
	case ASK_ABORT:
		if (t->input.len == 1 &&
		    (t->input.ptr[0] == 'y' || t->input.ptr[0] == 'Y'))
			do_abort(t, t->ask_run);
		else
			set_msg(t, "%s: not aborted", t->ask_run);
		break;
	case ASK_NONE:
		break;
	}
	buf_reset(&t->input);
}

/* Drops the last UTF-8 character typed. */
static void
backspace(struct buf *b)
{
	size_t n = b->len;

	while (n && (b->ptr[n - 1] & 0xc0) == 0x80)
		n--;
	if (n)
		n--;
	buf_setlen(b, n);
}

/* A key at the prompt. */
static void
prompt_key(struct tui *t, const unsigned char *k, size_t len)
{
	if (k[0] == 27) {
		if (len == 1) {
			t->ask = ASK_NONE;
			set_msg(t, "cancelled");
		}
		return; /* an arrow or other sequence: ignored */
	}
	for (; len; k++, len--) {
		if (*k == '\r' || *k == '\n') {
			answer(t);
			return;
		}
		if (*k == 127 || *k == 8)
			backspace(&t->input);
		else if (*k == 21) /* ^U */
			buf_reset(&t->input);
		else if (*k == 3) /* ^C */
			t->ask = ASK_NONE;
		else if (*k >= 32 && t->input.len < TUI_INPUT_MAX)
			buf_addch(&t->input, *k);
	}
}

/* A key on the board. Returns 1 to quit. */
static int
board_key(struct tui *t, const unsigned char *k, size_t len)
{
	const char *run = tui_selected_run(&t->m, &t->v);
	const struct tui_row *row = tui_selected(&t->m, &t->v);
	long page = (long)tui_board_rows(t->rows);

	if (len >= 3 && k[0] == 27 && k[1] == '[') {
		if (k[2] == 'A')
			tui_move(&t->m, &t->v, -1, t->rows);
		else if (k[2] == 'B')
			tui_move(&t->m, &t->v, 1, t->rows);
		else if (k[2] == '5')
			tui_move(&t->m, &t->v, -page, t->rows);
		else if (k[2] == '6')
			tui_move(&t->m, &t->v, page, t->rows);
		else if (k[2] == 'H')
			tui_move(&t->m, &t->v, -(long)1e9, t->rows);
		else if (k[2] == 'F')
			tui_move(&t->m, &t->v, (long)1e9, t->rows);
		load_detail(t);
		return 0;
	}
	switch (k[0]) {
	case 'q':
	case 3: /* ^C */
		return 1;
	case '\t':
		t->v.board = t->v.board == TUI_RUNS ? TUI_TASKS : TUI_RUNS;
		tui_move(&t->m, &t->v, 0, t->rows);
		load_detail(t);
		return 0;
	case 'j':
		tui_move(&t->m, &t->v, 1, t->rows);
		load_detail(t);
		return 0;
	case 'k':
		tui_move(&t->m, &t->v, -1, t->rows);
		load_detail(t);
		return 0;
	case 'g':
		tui_move(&t->m, &t->v, -(long)1e9, t->rows);
		load_detail(t);
		return 0;
	case 'G':
		tui_move(&t->m, &t->v, (long)1e9, t->rows);
		load_detail(t);
		return 0;
	case 12: /* ^L */
		load_all(t);
		return 0;
	case 'a':
	case 'x':
	case 'c':
	case 'p':
	case 'r':
	case 'A':
	case 's':
		break;
	default:
		return 0;
	}
	if (!run) {
		set_msg(t, "%s",
			row ? "this task has no run yet" : "nothing selected");
		return 0;
	}
	switch (k[0]) {
	case 'a':
		decide(t, run, GATE_APPROVE, NULL);
		break;
	case 'x':
		decide(t, run, GATE_REJECT, NULL);
		break;
	case 'c':
		ask(t, ASK_CHANGES, run, "request changes on");
		break;
	case 's':
		ask(t, ASK_STEER, run, "steer");
		break;
	case 'A':
		ask(t, ASK_ABORT, run, "abort (y/n)");
		break;
	case 'p':
		do_pause(t, run);
		break;
	case 'r':
		do_resume(t, run);
		break;
	}
	load_all(t);
	return 0;
}

/*
 * The length of the first key in k (len bytes): an escape sequence
 * ("\033[A", "\033[5~"), a lone Escape, or one byte. Keys typed fast,
 * or sent together by tmux, arrive in one read.
 */
static size_t
key_len(const unsigned char *k, size_t len)
{
	size_t i;

	if (k[0] != 27 || len < 2 || (k[1] != '[' && k[1] != 'O'))
		return 1;
	for (i = 2; i < len; i++)
		if (k[i] >= 0x40 && k[i] <= 0x7e)
			return i + 1;
	return len;
}

static void
restore_terminal(struct tui *t)
{
	static const char leave[] = "\033[0m\033[?25h\033[?1049l";

	if (!t->raw)
		return;
	if (fs_write_all(STDOUT_FILENO, leave, sizeof(leave) - 1)) {
		/* nothing to restore on */
	}
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
	t->raw = 0;
}

static int
enter_raw(struct tui *t)
{
	static const char enter[] = "\033[?1049h\033[H\033[2J";
	struct termios raw;

	if (tcgetattr(STDIN_FILENO, &t->saved) < 0)
		return -errno;
	raw = t->saved;
	raw.c_iflag &= ~(unsigned)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
	raw.c_oflag &= ~(unsigned)OPOST;
	raw.c_cflag |= CS8;
	raw.c_lflag &= ~(unsigned)(ECHO | ICANON | IEXTEN | ISIG);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) < 0)
		return -errno;
	t->raw = 1;
	return fs_write_all(STDOUT_FILENO, enter, sizeof(enter) - 1);
}

static void
drain_fd(int fd)
{
	char b[4096];

	while (fd >= 0 && read(fd, b, sizeof(b)) > 0)
		;
}

static int
loop(struct tui *t)
{
	unsigned char keys[256];
	size_t i, k;

	for (;;) {
		struct pollfd pfd[4] = {
			{ .fd = STDIN_FILENO, .events = POLLIN },
			{ .fd = wake_pipe[0], .events = POLLIN },
			{ .fd = t->watch, .events = POLLIN },
			{ .fd = t->ino, .events = POLLIN },
		};
		int n, changed = 0;

		draw(t);
		n = poll(pfd, 4, TUI_IDLE_MS);
		if (n < 0 && errno != EINTR)
			return EXIT_FAIL;
		if (got_term)
			return EXIT_OK;
		if (n <= 0) {
			if (t->remote)
				tui_remote_drain(t->remote);
			else if (t->watch >= 0)
				store_watch_drain(t->c->store);
			load_all(t);
			continue;
		}
		if (pfd[1].revents) {
			drain_fd(wake_pipe[0]);
			if (got_winch) {
				got_winch = 0;
				term_size(t);
				tui_move(&t->m, &t->v, 0, t->rows);
			}
		}
		if (pfd[2].revents) {
			if (t->remote)
				tui_remote_drain(t->remote);
			else
				store_watch_drain(t->c->store);
			changed = 1;
		}
		if (pfd[3].revents) {
			drain_fd(t->ino);
			changed |= 2;
		}
		if (changed & 1)
			load_all(t);
		else if (changed & 2)
			load_detail(t);
		if (pfd[0].revents & (POLLHUP | POLLERR))
			return EXIT_OK;
		if (pfd[0].revents & POLLIN) {
			ssize_t len = read(STDIN_FILENO, keys, sizeof(keys));

			if (len == 0)
				return EXIT_OK;
			if (len < 0)
				continue;
			for (i = 0; i < (size_t)len; i += k) {
				k = key_len(keys + i, (size_t)len - i);
				if (t->ask != ASK_NONE)
					prompt_key(t, keys + i, k);
				else if (board_key(t, keys + i, k))
					return EXIT_OK;
			}
		}
	}
}

static int
tui_exec(struct cli *c, int argc, char **argv)
{
	const char *url = NULL, *token_file = NULL;
	struct cli_opt opts[] = {
		{ "--url=", NULL, &url },
		{ "--token-file=", NULL, &token_file },
	};
	struct tui t = { 0 };
	struct err e = ERR_INIT;
	struct sigaction sa = { 0 };
	struct buf token = BUF_INIT;
	int rc, n;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 0 || !url != !token_file)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_tui);
	t.c = c;
	t.ino = -1;
	tui_model_init(&t.m);
	buf_init(&t.input, TUI_INPUT_MAX + 8);
	if (url) {
		/* connects and checks the token before taking the screen */
		if (fs_read(token_file, &token, 4096, &e)) {
			cli_error("--token-file: %s", e.msg);
			rc = EXIT_FAIL;
			goto out;
		}
		buf_rtrim(&token);
		t.remote = tui_remote_open(url, token.ptr, &e);
		if (!t.remote) {
			cli_error("tui: %s", e.msg);
			rc = EXIT_FAIL;
			goto out;
		}
	}
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		cli_error("tui needs a terminal on its input and output");
		rc = EXIT_FAIL;
		goto out;
	}
	if (t.remote) {
		t.m.source = xstrdup(url);
		t.watch = tui_remote_watch(t.remote, &e);
	} else {
		t.m.source = cli_store_label(c->store_spec);
		t.watch = store_watch_fd(c->store, &e);
	}
	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		cli_error("tui: cannot make a pipe: %s", strerror(errno));
		rc = EXIT_FAIL;
		goto out;
	}
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGWINCH, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	term_size(&t);
	if (t.watch < 0)
		set_msg(&t, "%s: the board refreshes every %d s", e.msg,
			TUI_IDLE_MS / 1000);
	load_all(&t);
	if (enter_raw(&t) < 0) {
		restore_terminal(&t);
		cli_error("tui: cannot set up the terminal: %s",
			  strerror(errno));
		rc = EXIT_FAIL;
		goto out;
	}
	rc = loop(&t);
	restore_terminal(&t);
out:
	if (t.ino >= 0)
		close(t.ino);
	if (wake_pipe[0] >= 0) {
		close(wake_pipe[0]);
		close(wake_pipe[1]);
	}
	tui_remote_free(t.remote);
	buf_release(&token);
	free(t.ino_run);
	free(t.ask_run);
	free(t.prompt);
	free(t.v.msg);
	buf_release(&t.input);
	buf_release(&t.frame);
	tui_model_release(&t.m);
	return rc;
}

const struct cmd cmd_tui = {
	.name = "tui",
	.usage = "tui [--url URL --token-file FILE]",
	.summary = "the board of runs and tasks, live, with keys to approve, "
		   "pause, steer...",
	.needs = CLI_NEEDS_STORE,
	.bare_opt = "--url", /* a remote serve: no store opened here */
	.exec = tui_exec,
};
