/*
 * baton task: the queue `baton serve` drains.
 *
 *   task add TITLE [--body TEXT] [--priority N] [--after ID[,ID]]
 *            [--area PATH] [--allow GLOB]... [--verify CMD]...
 *            [--pipeline NAME] [--max-attempts N] [--json]
 *   task list [--status S] [--json]
 *   task show ID [--json]
 *   task cancel ID
 *   task retry ID
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

int
cli_task_counts(struct store *s, struct buf *out, struct err *e)
{
	int64_t n[NR_TASK_STATUSES];
	size_t i;
	int rc;

	rc = store_task_counts(s, task_statuses, n, NR_TASK_STATUSES, e);
	for (i = 0; !rc && i < NR_TASK_STATUSES; i++)
		buf_addf(out, "%s%s %lld", i ? ", " : "", task_statuses[i],
			 (long long)n[i]);
	return rc;
}

static struct sched_ctx
ctx_of(struct cli *c)
{
	struct sched_ctx x = { .store = c->store, .ws = &c->ws,
			       .cfg = &c->cfg, .holder = "cli",
			       .store_spec = c->store_spec };

	return x;
}

/* A number option: "" when absent. Returns -1 (said) when malformed. */
static int
number(const char *opt, const char *val, long min, long max, int *out)
{
	char *end;
	long v;

	if (!val)
		return 0;
	errno = 0;
	v = strtol(val, &end, 10);
	if (!*val || *end || errno || v < min || v > max) {
		cli_error("%s wants a number from %ld to %ld, not '%s'", opt,
			  min, max, val);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* "1,t2, 3" into ids; -1 (said) on a bad one. */
static int
parse_after(const char *list, struct task *t)
{
	char *copy = xstrdup(list), *save = NULL, *p;
	size_t n = 1;
	int rc = 0;

	for (p = copy; *p; p++)
		n += *p == ',';
	t->deps = xcalloc(n, sizeof(*t->deps));
	for (p = strtok_r(copy, ", ", &save); p;
	     p = strtok_r(NULL, ", ", &save)) {
		int64_t id = sched_task_ref(p);

		if (!id) {
			cli_error("--after: '%s' is not a task id", p);
			rc = -1;
			break;
		}
		t->deps[t->nr_deps++] = id;
	}
	free(copy);
	return rc;
}

/* A strvec as JSON array text, or NULL when empty. */
static char *
json_list(const struct strvec *v)
{
	json_t *a;
	char *s;
	size_t i;

	if (!v->nr)
		return NULL;
	a = json_array();
	for (i = 0; i < v->nr; i++)
		json_array_append_new(a, json_string(v->v[i]));
	s = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	return s;
}

static int
print_json(json_t *o)
{
	char *s = json_dumps(o, JSON_INDENT(2));

	puts(s);
	free(s);
	json_decref(o);
	return EXIT_OK;
}

static int
task_add(struct cli *c, int argc, char **argv)
{
	const char *body = NULL, *prio = NULL, *after = NULL, *area = NULL,
		   *pipeline = NULL, *attempts = NULL;
	struct strvec allow = STRVEC_INIT, verify = STRVEC_INIT;
	int json = 0, n, rc = EXIT_USAGE;
	struct cli_opt opts[] = {
		{ "--body=", NULL, &body },
		{ "--priority=", NULL, &prio },
		{ "--after=", NULL, &after },
		{ "--area=", NULL, &area },
		{ "--pipeline=", NULL, &pipeline },
		{ "--max-attempts=", NULL, &attempts },
		{ "--json", &json, NULL },
	};
	struct sched_ctx x = ctx_of(c);
	struct task t = { 0 };
	struct err e = ERR_INIT;

	if (cli_take_repeated(&argc, argv, "--allow", &allow) < 0 ||
	    cli_take_repeated(&argc, argv, "--verify", &verify) < 0)
		goto out;
	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 1) {
		if (n >= 0)
			cli_error("task add takes one title (quote it): baton "
				  "task add \"Add CSV export\"");
		goto out;
	}
	if (number("--priority", prio, -1000, 1000, &t.priority) < 0 ||
	    number("--max-attempts", attempts, 1, 100, &t.max_attempts) < 0 ||
	    (after && parse_after(after, &t) < 0))
		goto out;
	if (pipeline) {
		struct pipeline *p = NULL;

		if (engine_pipeline(&c->en, pipeline, &p, &e)) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
			goto out;
		}
		pipeline_free(p);
	}
	t.title = xstrdup(argv[1]);
	t.body = body ? xstrdup(body) : NULL;
	t.area = area && *area ? xstrdup(area) : NULL;
	t.pipeline = pipeline ? xstrdup(pipeline) : NULL;
	t.allowed_paths = json_list(&allow);
	t.verify = json_list(&verify);
	if (sched_task_add(&x, &t, &e)) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	if (json)
		print_json(sched_task_json(c->store, &t, 1));
	else
		cli_printf("t%lld  queued: %s\n", (long long)t.id, t.title);
	rc = EXIT_OK;
out:
	task_release(&t);
	strvec_clear(&allow);
	strvec_clear(&verify);
	return rc;
}

struct list_ctx {
	struct cli *c;
	int json, rows;
	int details; /* task show: the forge link's lines */
};

/* task show: where the task is on the forge, a line per thing known. */
static void
print_forge(const struct forge_link *l)
{
	cli_printf("\nforge: %s\n", l->repo);
	if (l->issue_number)
		cli_printf("  issue #%lld  %s\n", (long long)l->issue_number,
			   l->issue_url ? l->issue_url : "");
	if (l->pr_number)
		cli_printf("  PR #%lld     %s%s%s\n", (long long)l->pr_number,
			   l->pr_state ? l->pr_state : "",
			   l->pr_url ? "  " : "", l->pr_url ? l->pr_url : "");
	if (l->pr_number)
		cli_printf("  checks %s, review %s, fix rounds %d\n",
			   l->checks ? l->checks : "-",
			   l->review ? l->review : "-", l->reaction_rounds);
}

/*
 * "  [issue #12, PR #34 open]" for a task with a forge link, into out;
 * "" without one. *link gets the link (all zero without one); the
 * caller releases it.
 */
static void
forge_mark(struct store *s, const struct task *t, char *out, size_t len,
	   struct forge_link *link)
{
	struct err ignored = ERR_INIT;
	struct forge_link l;
	size_t at = 0;

	*out = '\0';
	memset(link, 0, sizeof(*link));
	if (store_forge_link_get(s, t->id, &l, &ignored))
		return;
	if (l.issue_number || l.pr_number) {
		at = (size_t)snprintf(out, len, "  [");
		if (l.issue_number && at < len)
			at += (size_t)snprintf(out + at, len - at, "issue #%lld",
					       (long long)l.issue_number);
		if (l.pr_number && at < len)
			at += (size_t)snprintf(out + at, len - at,
					       "%sPR #%lld%s%s",
					       l.issue_number ? ", " : "",
					       (long long)l.pr_number,
					       l.pr_state ? " " : "",
					       l.pr_state ? l.pr_state : "");
		if (at < len)
			snprintf(out + at, len - at, "]");
	}
	*link = l;
}

static int
print_task(const struct task *t, void *arg)
{
	struct list_ctx *l = arg;
	char status[64], deps[64] = "-", mark[96];
	struct forge_link link;
	size_t i, at = 0;

	if (l->json) {
		json_t *o = sched_task_json(l->c->store, t, 1);
		char *s = json_dumps(o, JSON_INDENT(2));

		printf("%s%s", l->rows++ ? ",\n" : "[\n", s);
		free(s);
		json_decref(o);
		return 0;
	}
	if (!l->rows++)
		cli_printf("%-6s %-28s %4s %-16s %-8s %-24s %s\n", "TASK",
			   "STATUS", "PRI", "AREA", "AFTER", "RUN", "TITLE");
	snprintf(status, sizeof(status), "%s%s%s%s", t->status,
		 t->block_reason ? "(" : "",
		 t->block_reason ? t->block_reason : "",
		 t->block_reason ? ")" : "");
	for (i = 0; i < t->nr_deps && at < sizeof(deps) - 12; i++)
		at += (size_t)snprintf(deps + at, sizeof(deps) - at, "%s%lld",
				       i ? "," : "", (long long)t->deps[i]);
	forge_mark(l->c->store, t, mark, sizeof(mark), &link);
	cli_printf("t%-5lld %-28s %4d %-16.16s %-8.8s %-24.24s %s%s\n",
		   (long long)t->id, status, t->priority,
		   t->area ? t->area : "-", deps, t->run_id ? t->run_id : "-",
		   t->title, mark);
	if (t->reason && strcmp(t->status, TASK_DONE))
		cli_printf("       %s\n", t->reason);
	if (l->details && link.task_id)
		print_forge(&link);
	forge_link_release(&link);
	return 0;
}

static int
task_list(struct cli *c, int argc, char **argv)
{
	const char *only = NULL;
	struct list_ctx l = { c, 0, 0, 0 };
	struct cli_opt opts[] = {
		{ "--json", &l.json, NULL },
		{ "--status=", NULL, &only },
	};
	struct store_task_filter f = { 0 };
	struct err e = ERR_INIT;
	int n;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 0)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_task);
	if (only && task_status_check(only, &e)) {
		cli_error("%s", e.msg);
		return EXIT_USAGE;
	}
	f.status = only;
	if (store_task_list(c->store, &f, print_task, &l, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (l.json)
		puts(l.rows ? "\n]" : "[]");
	else if (!l.rows)
		cli_printf("no tasks%s%s: baton task add \"your task\"\n",
			   only ? " " : "", only ? only : "");
	return EXIT_OK;
}

/* Reads the task named by ref, saying why not. */
static int
load(struct cli *c, const char *ref, struct task *t)
{
	struct err e = ERR_INIT;
	int64_t id = sched_task_ref(ref);

	if (!id) {
		cli_error("'%s' is not a task id (t7 or 7)", ref);
		return -1;
	}
	if (store_task_get(c->store, id, t, &e)) {
		if (e.rc == BATON_ENOTFOUND)
			cli_error("no task t%lld (baton task list)",
				  (long long)id);
		else
			cli_error("%s", e.msg);
		return -1;
	}
	return 0;
}

static int
print_event(const struct event *ev, void *arg)
{
	char when[40];

	(void)arg;
	time_fmt_iso(ev->ts, when, sizeof(when));
	cli_printf("  %6lld %s %-16s %s\n", (long long)ev->seq, when, ev->type,
		   ev->data ? ev->data : "");
	return 0;
}

static int
task_show(struct cli *c, int argc, char **argv)
{
	int json = 0, n;
	struct cli_opt opts[] = { { "--json", &json, NULL } };
	struct list_ctx l = { c, 0, 0, 1 };
	struct err e = ERR_INIT;
	struct task t = { 0 };

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 1)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_task);
	if (load(c, argv[1], &t))
		return EXIT_FAIL;
	if (json) {
		print_json(sched_task_json(c->store, &t, 1));
	} else {
		print_task(&t, &l);
		if (t.body)
			cli_printf("\n%s\n", t.body);
		cli_printf("\nevents:\n");
		store_task_events(c->store, t.id, 0, print_event, NULL, &e);
	}
	task_release(&t);
	return EXIT_OK;
}

/*
 * Cancels a task that is not running; a running one has its run
 * aborted, and the worker settles the task cancelled.
 */
static int
task_cancel(struct cli *c, int argc, char **argv)
{
	struct sched_ctx x = ctx_of(c);
	struct err e = ERR_INIT;
	struct task t = { 0 }, after = { 0 };
	int rc = EXIT_FAIL;

	if (argc != 2)
		return cli_usage(&cmd_task);
	if (load(c, argv[1], &t))
		return EXIT_FAIL;
	if (sched_task_cancel(&x, &c->en, t.id, &after, &e)) {
		cli_error("%s", e.msg);
		goto out;
	}
	if (!strcmp(after.status, TASK_CANCELLED))
		cli_printf("t%lld  cancelled\n", (long long)t.id);
	else
		cli_printf("t%lld  its run %s was aborted; the task ends "
			   "cancelled\n",
			   (long long)t.id, t.run_id);
	rc = EXIT_OK;
out:
	task_release(&after);
	task_release(&t);
	return rc;
}

/* Puts a failed, cancelled or blocked task back in the queue afresh. */
static int
task_retry(struct cli *c, int argc, char **argv)
{
	struct sched_ctx x = ctx_of(c);
	struct err e = ERR_INIT;
	struct task t = { 0 };
	int rc = EXIT_FAIL;

	if (argc != 2)
		return cli_usage(&cmd_task);
	if (load(c, argv[1], &t))
		return EXIT_FAIL;
	if (sched_task_retry(&x, t.id, NULL, NULL, &e)) {
		cli_error("%s", e.msg);
		goto out;
	}
	cli_printf("t%lld  queued again\n", (long long)t.id);
	rc = EXIT_OK;
out:
	task_release(&t);
	return rc;
}

static int
task_exec(struct cli *c, int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(struct cli *, int, char **);
	} subs[] = {
		{ "add", task_add },	   { "list", task_list },
		{ "show", task_show },	   { "cancel", task_cancel },
		{ "retry", task_retry },
	};
	size_t i;

	if (argc < 2)
		return cli_usage(&cmd_task);
	for (i = 0; i < ARRAY_SIZE(subs); i++)
		if (!strcmp(argv[1], subs[i].name))
			return subs[i].fn(c, argc - 1, argv + 1);
	cli_error("unknown task command '%s'", argv[1]);
	return cli_usage(&cmd_task);
}

const struct cmd cmd_task = {
	.name = "task",
	.usage = "task add TITLE [--body TEXT] [--priority N] [--after ID,...] "
		 "[--area PATH] [--allow GLOB]... [--verify CMD]... "
		 "[--pipeline NAME] [--max-attempts N] [--json]\n"
		 "       baton task list [--status S] [--json]\n"
		 "       baton task show ID [--json]\n"
		 "       baton task cancel ID | retry ID",
	.summary = "add, list, show, cancel and retry queued tasks",
	.needs = CLI_NEEDS_STORE,
	.exec = task_exec,
};
