/*
 * baton status: every run, newest first: id, status, stage, age, review
 * loops, cost. A terminal status shows the outcome when it says more
 * ("blocked (max_iterations_reached)"). --json prints the records.
 * --status STATUS keeps the runs in it; a status no pipeline has is a
 * usage error that names the statuses.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/term.h"
#include "util/timeutil.h"

struct status_ctx {
	int json;
	int64_t now;
	int rows;
	struct buf out; /* lines not yet written (flush_rows) */
};

/* What the table gathers before it escapes and writes it, in bytes. */
#define STATUS_FLUSH (64 * 1024)

/*
 * Writes the gathered lines, escaped for the terminal as cli_printf
 * escapes (term_escape), in one write: a line at a time, the escaping
 * and stdio cost more than the query.
 */
static void
flush_rows(struct status_ctx *c)
{
	struct buf shown = BUF_INIT;

	term_escape(&shown, c->out.ptr, c->out.len);
	fwrite(shown.ptr, 1, shown.len, stdout);
	buf_release(&shown);
	buf_reset(&c->out);
}

/*
 * 1 when a terminal run's outcome is news beside its status: "blocked
 * (plan_rejected)", but not "blocked (blocked)" nor a finished run's
 * "completed".
 */
static int
outcome_says_more(const struct run *r)
{
	return r->outcome && strcmp(r->outcome, r->status) &&
	       strcmp(r->outcome, RUN_OUTCOME_COMPLETED);
}

static int
print_run(const struct run *r, void *arg)
{
	struct status_ctx *c = arg;
	char age[32], loops[16], status[64];

	if (c->json) {
		/* Streamed one run at a time, so memory stays flat however
		 * many runs there are. */
		json_t *o = engine_run_json(r);
		char *s = json_dumps(o, JSON_INDENT(2));

		printf("%s%s", c->rows++ ? ",\n" : "[\n", s);
		free(s);
		json_decref(o);
		return 0;
	}
	if (!c->rows++)
		buf_addf(&c->out, "%-28s %-21s %-10s %7s %6s %8s\n", "RUN",
			 "STATUS", "STAGE", "AGE", "LOOPS", "COST");
	time_fmt_age(c->now - r->created_at, age, sizeof(age));
	snprintf(loops, sizeof(loops), "%d/%d", r->review_loops,
		 r->max_review_loops);
	if (status_is_terminal(r->status) && outcome_says_more(r))
		snprintf(status, sizeof(status), "%s (%s)", r->status,
			 r->outcome);
	else
		snprintf(status, sizeof(status), "%s%s", r->status,
			 r->pause_requested && !status_is_terminal(r->status) ?
				 " (pausing)" :
				 "");
	buf_addf(&c->out, "%-28.28s %-21s %-10s %7s %6s %8.4f\n", r->id,
		 status, r->stage ? r->stage : "-", age, loops, r->cost_usd);
	if (c->out.len >= STATUS_FLUSH)
		flush_rows(c);
	return 0;
}

static int
status_exec(struct cli *c, int argc, char **argv)
{
	const char *only = NULL;
	int json = 0, n;
	struct cli_opt opts[] = {
		{ "--json", &json, NULL },
		{ "--status=", NULL, &only },
	};
	struct status_ctx ctx = { 0, time_now_ms(), 0, BUF_INIT };
	struct store_run_filter f = { NULL, 0, 0 };
	struct err e = ERR_INIT;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 0)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_status);
	if (only && engine_check_status(&c->en, only, &e)) {
		cli_error("%s", e.msg);
		return EXIT_USAGE;
	}
	f.status = only;
	f.brief = !json; /* the table needs no more; the JSON view does */
	ctx.json = json;
	n = store_run_list(c->store, &f, print_run, &ctx, &e);
	flush_rows(&ctx);
	buf_release(&ctx.out);
	if (n) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (json) {
		puts(ctx.rows ? "\n]" : "[]");
	} else if (!ctx.rows && only) {
		cli_printf("no runs are %s\n", only);
	} else if (!ctx.rows) {
		cli_printf("no runs yet: baton run \"your task\"\n");
	}
	return EXIT_OK;
}

const struct cmd cmd_status = {
	.name = "status",
	.usage = "status [--json] [--status STATUS]",
	.summary = "list runs: id, status, stage, age, review loops, cost",
	.needs = CLI_NEEDS_STORE | CLI_CONFIG_SPARE,
	.exec = status_exec,
};
