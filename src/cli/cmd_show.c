/*
 * baton show RUN: the run record, its artifacts (every version of every
 * stage output), its files (the run folder's artifacts, reports and
 * agent transcripts, as the store keeps them for every host) and its
 * events. --json prints them as one object, with the config snapshot
 * the run keeps to. --file NAME prints one run file's content from the
 * store, so a run driven on another host (or whose run folder is gone)
 * shows the same.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

struct show_ctx {
	const char *run_dir;
	json_t *artifacts, *events, *calls, *files;
	int human;
};

static int
add_output(const struct store_output *o, void *arg)
{
	struct show_ctx *c = arg;
	char *path = xasprintf("%s/%s", c->run_dir, o->artifact);
	size_t bytes = o->content ? strlen(o->content) : 0;

	if (c->human)
		cli_printf("  %-10s %-22s v%-3d %-18s %7zu bytes\n", o->stage,
			   o->artifact, o->version,
			   o->decision ? o->decision : "", bytes);
	else
		json_array_append_new(
			c->artifacts,
			json_pack("{s:s, s:s, s:i, s:s*, s:I, s:s}", "stage",
				  o->stage, "artifact", o->artifact, "version",
				  o->version, "decision", o->decision, "bytes",
				  (json_int_t)bytes, "path", path));
	free(path);
	return 0;
}

static int
add_event(const struct event *ev, void *arg)
{
	struct show_ctx *c = arg;
	char *line = engine_event_line(ev);
	char ts[40];

	if (c->human) {
		time_fmt_iso(ev->ts, ts, sizeof(ts));
		if (!strcmp(ev->type, "transition"))
			cli_printf("  %5lld %s  %s -> %s\n", (long long)ev->seq,
				   ts, ev->from ? ev->from : "(new)", ev->to);
		else
			cli_printf("  %5lld %s  %s %s\n", (long long)ev->seq,
				   ts, ev->type, ev->data ? ev->data : "");
	} else {
		json_array_append_new(c->events, json_loads(line, 0, NULL));
	}
	free(line);
	return 0;
}

/*
 * One agent call (an agent_exited event): who did which stage, how it
 * ended, and what it cost.
 */
static int
add_call(const struct event *ev, void *arg)
{
	struct show_ctx *c = arg;
	json_t *o = ev->data ? json_loads(ev->data, 0, NULL) : NULL;
	json_t *cost = json_object_get(o, "cost_usd");
	const char *failure = json_get_str(o, "failure");
	char costs[32] = "-";

	if (!o)
		return 0;
	if (!c->human) {
		json_array_append(c->calls, o);
		json_decref(o);
		return 0;
	}
	if (cost)
		snprintf(costs, sizeof(costs), "$%.4f",
			 json_number_value(cost));
	cli_printf(
	    "  %-32s %-12s %-11s %-8s %7.1fs %8lld in %7lld out %9s\n",
	    json_get_str(o, "call") ? json_get_str(o, "call") : "?",
	    json_get_str(o, "provider") ? json_get_str(o, "provider") : "?",
	    json_get_str(o, "type") ? json_get_str(o, "type") : "?",
	    failure && strcmp(failure, "none") ? failure : "ok",
	    (double)json_integer_value(json_object_get(o, "duration_ms")) /
		1000,
	    (long long)json_integer_value(json_object_get(o, "tokens_in")),
	    (long long)json_integer_value(json_object_get(o, "tokens_out")),
	    costs);
	json_decref(o);
	return 0;
}

/* One run file the store keeps: its name, size and where it came from. */
static int
add_file(const struct store_file *f, void *arg)
{
	struct show_ctx *c = arg;

	if (!c->human) {
		json_array_append_new(c->files, engine_file_json(f, 0));
		return 0;
	}
	cli_printf("  %-44s %9lld bytes%s  %s:%s\n", f->name,
		   (long long)f->size, f->truncated ? " (truncated)" : "",
		   f->host, f->path);
	return 0;
}

/*
 * --file NAME: the stored content on stdout as it is; for a file the
 * store holds only the first part of, a note on stderr saying so and
 * where the whole file is.
 */
static int
show_file(struct cli *c, const struct run *r, const char *name)
{
	struct store_file f = { 0 };
	struct err e = ERR_INIT;

	if (store_file_get(c->store, r->id, name, &f, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	fwrite(f.content, 1, f.len, stdout);
	if (f.truncated)
		cli_error("'%s' is truncated: %zu of %lld bytes kept in the "
			  "store; the whole file (sha256 %s) is %s:%s",
			  name, f.len, (long long)f.size, f.sha256, f.host,
			  f.path);
	store_file_release(&f);
	return EXIT_OK;
}

/* The config snapshot as an object; null for a run made without one. */
static json_t *
snapshot_json(const char *text)
{
	json_t *o = text ? json_loads(text, 0, NULL) : NULL;

	return o ? o : json_null();
}

/* The seed's name for the status (the pipeline's states:), if any. */
static void
print_state(const struct run *r)
{
	json_t *v = engine_run_json(r);
	const char *state = json_get_str(v, "state");

	if (state && strcmp(state, r->status))
		cli_printf(" [%s]", state);
	json_decref(v);
}

/* A loop run's record: iteration, phase, receipts. */
static void
print_loop(const struct run *r)
{
	json_t *v = engine_run_json(r), *l = json_object_get(v, "loop");

	if (json_is_object(l))
		cli_printf(
		    "loop      iteration %lld of %lld, phase %s since %s, "
		    "%lld receipt%s (baton receipts %s)\n",
		    (long long)json_integer_value(
			json_object_get(l, "iteration")),
		    (long long)json_integer_value(
			json_object_get(l, "max_iterations")),
		    json_get_str(l, "phase") ? json_get_str(l, "phase") : "-",
		    json_get_str(l, "phase_started_at") ?
			json_get_str(l, "phase_started_at") :
			"-",
		    (long long)json_integer_value(
			json_object_get(l, "receipts")),
		    json_integer_value(json_object_get(l, "receipts")) == 1 ?
			"" :
			"s",
		    r->id);
	json_decref(v);
}

/* The question a waiting run asks: its kind, default and deadline. */
static void
print_question(const struct run *r)
{
	json_t *v = engine_run_json(r), *ask = json_object_get(v, "question");
	const char *dflt = json_get_str(ask, "default");

	if (!strcmp(r->status, ST_WAITING) && json_is_object(ask)) {
		cli_printf("question  %s: %s\n", json_get_str(ask, "kind"),
			   json_get_str(ask, "question") ?
			       json_get_str(ask, "question") :
			       "(see the question event)");
		if (dflt && json_object_get(ask, "deadline_ms"))
			cli_printf(
			    "          without an answer, option %s applies "
			    "at %s\n",
			    dflt,
			    json_get_str(ask, "deadline") ?
				json_get_str(ask, "deadline") :
				"?");
	}
	json_decref(v);
}

static void
print_human(const struct run *r)
{
	char ts[40];

	cli_printf("run       %s\ntask      %s\npipeline  %s\nstatus    %s",
		   r->id, r->task, r->pipeline, r->status);
	print_state(r);
	if (r->reason)
		cli_printf(" (%s)", r->reason);
	if (engine_gate_deferred(r))
		cli_printf(" (deferred at the gate into %s: baton resume %s "
			   "asks again)",
			   r->gate_status, r->id);
	if (status_is_terminal(r->status))
		cli_printf("\noutcome   %s", r->outcome ? r->outcome : "-");
	cli_printf("\nstage     %s (%s)\n", r->stage ? r->stage : "-",
		   r->phase);
	cli_printf("loops     %d of %d\n", r->review_loops,
		   r->max_review_loops);
	time_fmt_iso(r->started_at, ts, sizeof(ts));
	cli_printf("started   %s\n", ts[0] ? ts : "-");
	time_fmt_iso(r->ended_at, ts, sizeof(ts));
	cli_printf("ended     %s\n", ts[0] ? ts : "-");
	cli_printf("worktree  %s\nbranch    %s\n",
		   r->worktree ? r->worktree : "-",
		   r->branch ? r->branch : "-");
	cli_printf(
	    "usage     $%.4f, %lld tokens in, %lld out, %.1f s in stages\n",
	    r->cost_usd, (long long)r->tokens_in, (long long)r->tokens_out,
	    (double)r->active_ms / 1000);
	if (r->config_hash)
		cli_printf("config    %s%s\n", r->config_hash,
			   r->config_snapshot ? " (snapshot kept)" : "");
	print_loop(r);
	print_question(r);
}

/* ---- research runs: the claims and the report ---- */

/* The width of a claim's line in `show`; its text is cut to fit. */
#define CLAIM_LINE_MAX 100

/* Prints at most max bytes of s on one line, "..." when cut. */
static void
print_cut(const char *s, size_t max)
{
	struct buf line = BUF_INIT;
	size_t i;

	buf_add_cut(&line, s, strlen(s), max);
	for (i = 0; i < line.len; i++)
		if (line.ptr[i] == '\n' || line.ptr[i] == '\t')
			line.ptr[i] = ' ';
	cli_printf("%s", line.ptr);
	buf_release(&line);
}

/*
 * A research run's claims, one line each (id, status, confidence,
 * evidence count, text cut to fit), and where its report is. Nothing for
 * other runs.
 */
static void
print_claims(const struct run *r, const char *dir)
{
	json_t *v = engine_run_json(r);
	json_t *st = json_object_get(v, "research"), *claims;
	int w = 2;
	size_t i;

	claims = json_object_get(st, "claims");
	if (!json_is_object(st))
		goto out;
	for (i = 0; i < json_array_size(claims); i++) {
		const char *id = json_get_str(json_array_get(claims, i), "id");

		if (id && (int)strlen(id) > w)
			w = (int)strlen(id);
	}
	cli_printf("\nclaims (round %lld):\n",
		   (long long)json_integer_value(json_object_get(st, "round")));
	for (i = 0; i < json_array_size(claims); i++) {
		json_t *c = json_array_get(claims, i);
		json_t *conf = json_object_get(c, "confidence");
		char cs[16] = "-";
		int used;

		if (json_is_number(conf))
			snprintf(cs, sizeof(cs), "%.2f", json_number_value(conf));
		used = cli_printf(
		    "  %-*s %-9s %4s %3zu evidence  ", w,
		    json_get_str(c, "id") ? json_get_str(c, "id") : "?",
		    json_get_str(c, "status") ? json_get_str(c, "status") :
						"pending",
		    cs, json_array_size(json_object_get(c, "evidence")));
		print_cut(json_get_str(c, "text") ? json_get_str(c, "text") : "",
			  used < CLAIM_LINE_MAX - 20 ?
				  (size_t)(CLAIM_LINE_MAX - used) :
				  20);
		putchar('\n');
	}
	if (!json_array_size(claims))
		cli_printf("  (none yet)\n");
	if (json_get_str(st, "report"))
		cli_printf("report    %s/%s\n", dir,
			   json_get_str(st, "report"));
out:
	json_decref(v);
}

/* --json: the report's full path beside research.report. */
static void
research_paths(json_t *o, const char *dir)
{
	json_t *st = json_object_get(o, "research");
	const char *report = json_get_str(st, "report");
	char *path;

	if (!report)
		return;
	path = xasprintf("%s/%s", dir, report);
	json_object_set_new(st, "report_path", json_string(path));
	free(path);
}

static int
show_exec(struct cli *c, int argc, char **argv)
{
	int json = 0, n, rc = EXIT_OK;
	const char *file = NULL;
	struct cli_opt opts[] = { { "--json", &json, NULL },
				  { "--file=", NULL, &file } };
	struct show_ctx ctx = { 0 };
	struct err e = ERR_INIT;
	struct run r = { 0 };
	char *dir = NULL;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 1)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_show);
	if (store_run_get(c->store, argv[1], &r, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (file) {
		rc = show_file(c, &r, file);
		run_release(&r);
		return rc;
	}
	dir = workspace_run_dir(&c->ws, r.id);
	ctx.run_dir = dir;
	ctx.human = !json;
	ctx.artifacts = json_array();
	ctx.events = json_array();
	ctx.calls = json_array();
	ctx.files = json_array();
	if (!json) {
		print_human(&r);
		cli_printf("folder    %s\n", dir);
		print_claims(&r, dir);
		cli_printf("\nartifacts:\n");
	}
	if (store_output_list(c->store, r.id, add_output, &ctx, &e))
		goto fail;
	if (!json)
		cli_printf("\nfiles (kept in the store):\n");
	if (store_file_list(c->store, r.id, add_file, &ctx, &e))
		goto fail;
	if (!json)
		cli_printf("\nagent calls:\n");
	if (store_event_list(c->store, r.id, 0, "agent_exited", add_call, &ctx,
			     &e))
		goto fail;
	if (!json)
		cli_printf("\nevents:\n");
	if (store_event_list(c->store, r.id, 0, NULL, add_event, &ctx, &e))
		goto fail;
	if (json) {
		json_t *o = engine_run_json(&r);
		char *s;

		json_object_set_new(o, "run_dir", json_string(dir));
		research_paths(o, dir);
		json_object_set_new(o, "config_snapshot",
				    snapshot_json(r.config_snapshot));
		json_object_set(o, "artifacts", ctx.artifacts);
		json_object_set(o, "events", ctx.events);
		json_object_set(o, "calls", ctx.calls);
		json_object_set(o, "files", ctx.files);
		s = json_dumps(o, JSON_INDENT(2));
		puts(s);
		free(s);
		json_decref(o);
	}
	goto out;
fail:
	cli_error("%s", e.msg);
	rc = EXIT_FAIL;
out:
	json_decref(ctx.artifacts);
	json_decref(ctx.events);
	json_decref(ctx.calls);
	json_decref(ctx.files);
	free(dir);
	run_release(&r);
	return rc;
}

const struct cmd cmd_show = {
	.name = "show",
	.usage = "show RUN [--json] [--file NAME]",
	.summary = "the run record, its artifacts and its events",
	.needs = CLI_NEEDS_STORE | CLI_CONFIG_SPARE,
	.exec = show_exec,
};
