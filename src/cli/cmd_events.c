/*
 * baton events RUN: the run's events in order; --json prints one JSON
 * object per line; -f keeps following, printing new events as the run's
 * driver commits them, until the run is terminal. Following does not
 * poll the store: the driver appends to the run's events.jsonl after
 * every commit, and inotify wakes us when it does.
 *
 * baton events --types prints the registry of event types
 * (core/events.h) as the markdown of docs/lifecycle.md's Events section,
 * or with --json as one object per type; it needs no repository.
 */
#include "util/compat.h"

#include <jansson.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/events.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* Waits until events.jsonl of the run changes (or 5 s pass, in case the
 * file is replaced rather than appended to). */
static void
wait_for_change(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char drain[4096];

	if (fd < 0) {
		poll(NULL, 0, 200);
		return;
	}
	if (poll(&pfd, 1, 5000) > 0)
		while (read(fd, drain, sizeof(drain)) > 0)
			;
}

struct events_ctx {
	int json;
	int64_t last;
};

static int
print_event(const struct event *ev, void *arg)
{
	struct events_ctx *c = arg;
	char ts[40];

	c->last = ev->seq;
	if (c->json) {
		char *line = engine_event_line(ev);

		puts(line);
		free(line);
		return 0;
	}
	time_fmt_iso(ev->ts, ts, sizeof(ts));
	if (!strcmp(ev->type, "transition"))
		cli_printf("%5lld %s  %-14s %s -> %s\n", (long long)ev->seq, ts,
			   ev->type, ev->from ? ev->from : "(new)", ev->to);
	else
		cli_printf("%5lld %s  %-14s %s\n", (long long)ev->seq, ts,
			   ev->type, ev->data ? ev->data : "");
	return 0;
}

/* The registry of event types: markdown, or JSON lines with --json. */
static int
list_types(int json)
{
	const struct event_type *t;
	struct buf md = BUF_INIT;
	size_t i;

	if (!json) {
		event_types_markdown(&md);
		fputs(md.ptr, stdout);
		buf_release(&md);
		return EXIT_OK;
	}
	for (i = 0; (t = event_type_at(i)); i++) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "type", t->name,
				      "group", event_group_name(t->group),
				      "when", t->when, "data", t->data);
		char *line = json_dumps(o, JSON_COMPACT);

		puts(line);
		free(line);
		json_decref(o);
	}
	return EXIT_OK;
}

/* With no RUN: every event (--all) or a task's (--task ID). */
static int
list_wide(struct cli *c, struct events_ctx *ctx, const char *task)
{
	struct err e = ERR_INIT;
	int64_t id = 0;
	int rc;

	if (task && !(id = sched_task_ref(task))) {
		cli_error("--task: '%s' is not a task id", task);
		return EXIT_USAGE;
	}
	if (id) {
		struct task t = { 0 };

		rc = store_task_get(c->store, id, &t, &e);
		task_release(&t);
		if (rc == BATON_ENOTFOUND) {
			cli_error("no task t%lld (baton task list)",
				  (long long)id);
			return EXIT_FAIL;
		}
		e = (struct err)ERR_INIT;
	}
	rc = id ? store_task_events(c->store, id, 0, print_event, ctx, &e) :
		  store_event_list(c->store, NULL, 0, NULL, print_event, ctx,
				   &e);
	if (rc) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int
events_exec(struct cli *c, int argc, char **argv)
{
	int json = 0, follow = 0, all = 0, types = 0, n;
	const char *task = NULL;
	struct cli_opt opts[] = {
		{ "--json", &json, NULL },
		{ "-f", &follow, NULL },
		{ "--follow", &follow, NULL },
		{ "--all", &all, NULL },
		{ "--types", &types, NULL },
		{ "--task=", NULL, &task },
	};
	struct events_ctx ctx = { 0, 0 };
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int watch = -1;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	ctx.json = json;
	if (types && (n || follow || all || task))
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_events);
	if (types)
		return list_types(json);
	/* one selector: RUN, --all or --task, none beside another */
	if (n >= 0 && (n > 0) + !!all + !!task > 1)
		return cli_usage(&cmd_events);
	if (n == 0 && (all || task) && !follow)
		return list_wide(c, &ctx, task);
	if (n != 1)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_events);
	if (store_run_get(c->store, argv[1], &r, &e))
		goto fail;
	if (follow && !status_is_terminal(r.status)) {
		char *dir = workspace_run_dir(&c->ws, r.id);
		char *path = xasprintf("%s/events.jsonl", dir);

		/* Watch before the first read, so no append is missed. */
		watch = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
		if (watch >= 0 &&
		    inotify_add_watch(watch, path, IN_MODIFY) < 0) {
			close(watch);
			watch = -1;
		}
		free(path);
		free(dir);
	}
	for (;;) {
		if (store_event_list(c->store, r.id, ctx.last, NULL,
				     print_event, &ctx, &e))
			goto fail;
		fflush(stdout);
		if (!follow || status_is_terminal(r.status))
			break;
		wait_for_change(watch);
		run_release(&r);
		if (store_run_get(c->store, argv[1], &r, &e))
			goto fail;
	}
	if (watch >= 0)
		close(watch);
	run_release(&r);
	return EXIT_OK;
fail:
	cli_error("%s", e.msg);
	if (watch >= 0)
		close(watch);
	run_release(&r);
	return EXIT_FAIL;
}

const struct cmd cmd_events = {
	.name = "events",
	.usage = "events RUN [--json] [-f] | --all [--json] | --task ID [--json] "
		 "| --types [--json]",
	.summary = "a run's events in order (-f: follow until it ends), "
		   "every event, a task's, or the event types baton writes",
	.needs = CLI_NEEDS_STORE | CLI_CONFIG_SPARE,
	.bare_opt = "--types",
	.exec = events_exec,
};
