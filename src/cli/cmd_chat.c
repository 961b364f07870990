/*
 * `baton chat`: talk with the planner role until its plan is ready, then
 * start it (docs/chat.md). A line loop on the terminal: a line is a
 * message to the planner, whose reply is printed as it comes; "/start
 * MODE" queues the proposed plan's tasks; "/status" shows what happened
 * since (the tasks' progress); "/quit" or end of input leaves. With
 * --url and --token-file it talks to a remote serve's chat API, as
 * `baton tui` does; otherwise to the local store, calling the planner
 * itself. --conversation ID takes up an earlier conversation.
 *
 *   ┌▶ "[phase] > " ─ line ─┬─ text ──▶ chat_say, chat_reply ─▶ printed ─┐
 *   │                       ├─ /start MODE ─▶ chat_start ─▶ printed ─────┤
 *   └───────────────────────┴─ /status ─▶ new messages printed ──────────┘
 */
#include "util/compat.h"

#include <jansson.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/config.h"
#include "forge/forge.h"
#include "sched/chat.h"
#include "sched/sched.h"
#include "store/store.h"
#include "tui/remote.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/xalloc.h"

struct chat_cli {
	struct cli *c;
	struct tui_remote *remote; /* NULL: the local store */
	struct sched_ctx x;
	int64_t id;
	int64_t last_id; /* the newest message printed */
	char *phase;
};

/* ---- the conversation, from either side ------------------------------- */

static char *
dup_str(const json_t *o, const char *key)
{
	const char *s = json_get_str(o, key);

	return s ? xstrdup(s) : NULL;
}

/* The API's conversation JSON as a struct chat_conv. */
static void
conv_from_json(const json_t *j, struct chat_conv *out)
{
	const json_t *msgs = json_object_get(j, "messages"), *m;
	size_t i;

	memset(out, 0, sizeof(*out));
	out->id = json_integer_value(json_object_get(j, "id"));
	out->phase = dup_str(j, "phase");
	out->mode = dup_str(j, "mode");
	out->msgs = xcalloc(json_array_size(msgs) + 1, sizeof(*out->msgs));
	json_array_foreach(msgs, i, m)
	{
		struct chat_msg *cm = &out->msgs[out->nr_msgs++];

		cm->id = json_integer_value(json_object_get(m, "id"));
		cm->role = dup_str(m, "role");
		cm->kind = dup_str(m, "kind");
		cm->content = dup_str(m, "content");
	}
	if (!out->phase)
		out->phase = xstrdup("?");
}

static int
conv_load(struct chat_cli *cc, struct chat_conv *out, struct err *e)
{
	char path[96];
	json_t *j = NULL;
	int rc;

	if (!cc->remote)
		return store_chat_get(cc->x.store, cc->id, out, e);
	snprintf(path, sizeof(path), "/api/v1/chat/conversations/%lld",
		 (long long)cc->id);
	rc = tui_remote_call(cc->remote, "GET", path, NULL, (void **)&j, e);
	if (!rc)
		conv_from_json(j, out);
	json_decref(j);
	return rc;
}

/*
 * Prints the messages after the last one printed: all of them when
 * resuming, else only what the person did not see stream (no echo of
 * their own lines, no second copy of the planner's streamed reply).
 */
static int
print_new(struct chat_cli *cc, int all, struct err *e)
{
	struct chat_conv c = { 0 };
	size_t i;
	int rc = conv_load(cc, &c, e);

	if (rc)
		return rc;
	for (i = 0; i < c.nr_msgs; i++) {
		const struct chat_msg *m = &c.msgs[i];

		if (m->id <= cc->last_id)
			continue;
		cc->last_id = m->id;
		if (!strcmp(m->role, "user")) {
			if (all)
				printf("you: %s\n", m->content);
		} else if (!strcmp(m->role, "assistant")) {
			if (all)
				printf("planner: %s\n", m->content);
		} else if (!strcmp(m->kind, "mode_selection")) {
			printf("%s", m->content);
			printf("Type /start direct, /start local or /start "
			       "github to queue the tasks, or keep talking.\n");
		} else {
			printf("[%s] %s\n", m->kind, m->content);
		}
	}
	free(cc->phase);
	cc->phase = c.phase;
	c.phase = NULL;
	chat_conv_release(&c);
	fflush(stdout);
	return 0;
}

/* ---- saying something ------------------------------------------------- */

static void
print_chunk(void *arg, const char *text, size_t len)
{
	(void)arg;
	fwrite(text, 1, len, stdout);
	fflush(stdout);
}

/* An event of the remote reply's stream. */
static void
on_event(void *arg, const char *event, const char *data)
{
	struct err *e = arg;
	json_t *j = json_loads(data, 0, NULL);
	const char *s;

	if (!strcmp(event, "chunk") && (s = json_get_str(j, "text")))
		print_chunk(NULL, s, strlen(s));
	else if (!strcmp(event, "error"))
		err_set(e, BATON_ECHILD, "%s",
			(s = json_get_str(j, "message")) ? s : "failed");
	json_decref(j);
}

static int
say(struct chat_cli *cc, const char *text, struct err *e)
{
	struct err why = ERR_INIT;
	char path[128];
	json_t *j = NULL;
	int rc;

	if (!cc->remote) {
		rc = chat_say(&cc->x, cc->id, text, e);
		if (rc)
			return rc;
		fputs("planner: ", stdout);
		fflush(stdout);
		rc = chat_reply(&cc->x, cc->id, print_chunk, NULL, &why);
	} else {
		j = json_pack("{s:s}", "content", text);
		{
			char *body = json_dumps(j, JSON_COMPACT);

			snprintf(path, sizeof(path),
				 "/api/v1/chat/conversations/%lld/messages",
				 (long long)cc->id);
			rc = tui_remote_call(cc->remote, "POST", path, body,
					     NULL, e);
			free(body);
		}
		json_decref(j);
		j = NULL;
		if (rc)
			return rc;
		fputs("planner: ", stdout);
		fflush(stdout);
		snprintf(path, sizeof(path),
			 "/api/v1/chat/conversations/%lld/stream",
			 (long long)cc->id);
		rc = tui_remote_follow(cc->remote, path, on_event, &why, e);
		if (!rc && why.rc)
			rc = why.rc;
	}
	putchar('\n');
	if (rc && why.rc)
		*e = why;
	/* the error, the mode_selection: whatever did not stream */
	if (print_new(cc, 0, rc ? NULL : e) && !rc)
		rc = e->rc;
	return rc;
}

/* forge_startup's counts, as the preflight note (as serve gives it). */
static int
preflight(void *arg, struct buf *note, struct err *e)
{
	struct chat_cli *cc = arg;
	struct forge_startup fs = { 0 };
	struct err why = ERR_INIT;

	(void)e;
	if (forge_startup(&cc->c->cfg, cc->x.store, &cc->c->ws, &fs, &why))
		buf_addf(note, "Start-up preflight: %s. ", why.msg);
	buf_addf(note,
		 "Start-up preflight: %d open issue%s wait%s for intake, %d "
		 "task%s wait%s for the judge.",
		 fs.issue_backlog, fs.issue_backlog == 1 ? "" : "s",
		 fs.issue_backlog == 1 ? "s" : "", fs.judge_backlog,
		 fs.judge_backlog == 1 ? "" : "s",
		 fs.judge_backlog == 1 ? "s" : "");
	return 0;
}

static int
start(struct chat_cli *cc, const char *mode, struct err *e)
{
	char path[128], *body;
	int rc;

	if (!cc->remote) {
		rc = chat_start(&cc->x, cc->id, mode, preflight, cc, NULL, e);
		if (!rc)
			sched_wake(&cc->c->ws);
	} else {
		json_t *j = json_pack("{s:s}", "mode", mode);

		body = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		snprintf(path, sizeof(path),
			 "/api/v1/chat/conversations/%lld/start-execution",
			 (long long)cc->id);
		rc = tui_remote_call(cc->remote, "POST", path, body, NULL, e);
		free(body);
	}
	if (!rc)
		rc = print_new(cc, 0, e);
	return rc;
}

/* ---- the loop ----------------------------------------------------------- */

/* Reads one line (without its newline) into line; 0 at end of input. */
static int
read_line(struct buf *line)
{
	int ch;

	buf_reset(line);
	while ((ch = getchar()) != EOF && ch != '\n')
		buf_addch(line, (char)ch);
	return ch != EOF || line->len;
}

static int
loop(struct chat_cli *cc)
{
	struct buf line = BUF_INIT;
	struct err e = ERR_INIT;
	int code = EXIT_OK;

	for (;;) {
		e = (struct err)ERR_INIT;
		/* local: this process reports the tasks' progress */
		if (!cc->remote && cc->phase &&
		    !strcmp(cc->phase, CHAT_MONITORING) &&
		    !chat_progress(&cc->x, cc->id, NULL, &e))
			print_new(cc, 0, &e);
		printf("[%s] > ", cc->phase ? cc->phase : "?");
		fflush(stdout);
		if (!read_line(&line)) {
			putchar('\n');
			break;
		}
		buf_rtrim(&line);
		if (!line.len)
			continue;
		if (!strcmp(line.ptr, "/quit"))
			break;
		if (!strcmp(line.ptr, "/status")) {
			if (cc->remote && print_new(cc, 0, &e))
				cli_error("%s", e.msg);
			continue;
		}
		if (!strncmp(line.ptr, "/start", 6) &&
		    (!line.ptr[6] || line.ptr[6] == ' ')) {
			const char *mode = line.ptr + 6;

			while (*mode == ' ')
				mode++;
			if (start(cc, mode, &e))
				cli_error("%s", e.msg);
			continue;
		}
		if (line.ptr[0] == '/') {
			cli_error("unknown command '%s': /start MODE, /status "
				  "and /quit are known; other lines go to the "
				  "planner",
				  line.ptr);
			continue;
		}
		if (say(cc, line.ptr, &e))
			cli_error("%s", e.msg);
	}
	buf_release(&line);
	return code;
}

/* Opens conversation id (0: a new one) and prints what it holds. */
static int
open_conversation(struct chat_cli *cc, int64_t id, struct err *e)
{
	json_t *j = NULL;
	int rc;

	if (id) {
		cc->id = id;
		return print_new(cc, 1, e);
	}
	if (!cc->remote) {
		rc = chat_new(&cc->x, &cc->id, e);
	} else {
		rc = tui_remote_call(cc->remote, "POST",
				     "/api/v1/chat/conversations", "{}",
				     (void **)&j, e);
		if (!rc)
			cc->id = json_integer_value(json_object_get(j, "id"));
		json_decref(j);
	}
	if (!rc) {
		printf("conversation %lld\n", (long long)cc->id);
		rc = print_new(cc, 1, e);
	}
	return rc;
}

static int
chat_exec(struct cli *c, int argc, char **argv)
{
	const char *url = NULL, *token_file = NULL, *conv = NULL;
	struct cli_opt opts[] = {
		{ "--url=", NULL, &url },
		{ "--token-file=", NULL, &token_file },
		{ "--conversation=", NULL, &conv },
	};
	struct chat_cli cc = { .c = c };
	struct err e = ERR_INIT;
	struct buf token = BUF_INIT;
	int64_t id = 0;
	char *end = NULL;
	int n, code = EXIT_FAIL;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 0 || !url != !token_file)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_chat);
	if (conv) {
		id = strtoll(conv, &end, 10);
		if (*end || id <= 0) {
			cli_error("--conversation '%s': not a conversation id",
				  conv);
			return EXIT_USAGE;
		}
	}
	if (url) {
		if (fs_read(token_file, &token, 4096, &e)) {
			cli_error("--token-file: %s", e.msg);
			goto out;
		}
		buf_rtrim(&token);
		cc.remote = tui_remote_open(url, token.ptr, &e);
		if (!cc.remote) {
			cli_error("chat: %s", e.msg);
			goto out;
		}
	} else {
		if (!config_provider_for(&c->cfg, "planner")) {
			cli_error("no provider plays the planner role: set "
				  "roles.planner or roles.default");
			goto out;
		}
		cc.x = (struct sched_ctx){ .store = c->store,
					   .ws = &c->ws,
					   .cfg = &c->cfg };
	}
	if (open_conversation(&cc, id, &e)) {
		cli_error("chat: %s", e.msg);
		goto out;
	}
	code = loop(&cc);
out:
	tui_remote_free(cc.remote);
	buf_release(&token);
	free(cc.phase);
	return code;
}

const struct cmd cmd_chat = {
	.name = "chat",
	.usage = "chat [--conversation ID] [--url URL --token-file FILE]",
	.summary = "talk with the planner until its plan is ready, then "
		   "queue it",
	.needs = CLI_NEEDS_STORE,
	.bare_opt = "--url", /* a remote serve: no store opened here */
	.exec = chat_exec,
};
