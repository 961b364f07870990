/*
 * baton approvals: the runs waiting at a gate, and the decisions on them:
 * approve (enter the gated stage), reject (end blocked), request-changes
 * (re-run the stage before the gate with guidance), and on an assist
 * report's feedback question revise (plan again with guidance) and defer
 * (pause; resume plans again). The decisions and the aliases accepted
 * for them are core/gate.h's, the same as the API's.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "core/gate.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "forge/forge.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/err.h"
#include "util/timeutil.h"

static int
print_waiting(const struct run *r, void *arg)
{
	json_t *list = arg;
	char age[32];

	if (list) {
		json_array_append_new(
			list, json_pack("{s:s, s:s, s:s*, s:s*, s:I}", "run",
					r->id, "task", r->task, "gate",
					r->gate_status, "redo", r->gate_back,
					"since", (json_int_t)r->phase_started_at));
		return 0;
	}
	time_fmt_age(time_now_ms() - r->phase_started_at, age, sizeof(age));
	cli_printf("%-28s before %-13s %6s  %s\n", r->id, r->gate_status, age,
		   r->task);
	return 0;
}

/*
 * The forge's questions: tasks whose pull request waits for a person
 * (forge/pr.c: a person's push, or reactions.max_rounds reached). They
 * are answered on the PR (merge, close, push) or with `baton task`.
 */
struct forge_q {
	struct cli *c;
	json_t *list;
};

static int
print_forge_question(const struct task *t, void *arg)
{
	struct forge_q *q = arg;
	struct forge_link l = { 0 };
	struct err e = ERR_INIT;

	if (!t->block_reason || strcmp(t->block_reason, BLOCK_PULL_REQUEST) ||
	    !t->reason || strncmp(t->reason, "asks a person", 13) ||
	    store_forge_link_get(q->c->store, t->id, &l, &e))
		return 0;
	if (q->list)
		json_array_append_new(
			q->list,
			json_pack("{s:I, s:I, s:s*, s:s}", "task_id",
				  (json_int_t)t->id, "pr",
				  (json_int_t)l.pr_number, "pr_url", l.pr_url,
				  "question", t->reason));
	else
		cli_printf("t%-27lld PR #%-9lld %s\n", (long long)t->id,
			   (long long)l.pr_number, t->reason);
	forge_link_release(&l);
	return 0;
}

static int
list(struct cli *c, int json)
{
	struct store_run_filter f = { ST_WAITING, 0, 0 };
	json_t *arr = json ? json_array() : NULL;
	struct err e = ERR_INIT;
	int rc;

	rc = store_run_list(c->store, &f, print_waiting, arr, &e);
	if (!rc) {
		struct store_task_filter tf = { .status = TASK_BLOCKED };
		struct forge_q q = { c, arr };

		rc = store_task_list(c->store, &tf, print_forge_question, &q,
				     &e);
	}
	if (rc) {
		cli_error("%s", e.msg);
		json_decref(arr);
		return EXIT_FAIL;
	}
	if (arr) {
		char *s = json_dumps(arr, JSON_INDENT(2));

		puts(s);
		free(s);
		json_decref(arr);
	}
	return EXIT_OK;
}

/* A person's answer to a forge question (a task id, "t12"). */
static int
forge_decide(struct cli *c, int64_t id, enum gate_decision d)
{
	struct err e = ERR_INIT;

	if (d != GATE_APPROVE && d != GATE_REJECT) {
		cli_error("t%lld: a forge question is answered with approve or "
			  "reject",
			  (long long)id);
		return EXIT_USAGE;
	}
	if (forge_answer(c->store, &c->ws, &c->cfg, id, d == GATE_APPROVE,
			 &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	cli_printf("t%lld: %s\n", (long long)id,
		   d == GATE_APPROVE ? "goes on with its pull request"
				     : "cancelled; its pull request stays open");
	if (d == GATE_APPROVE)
		forge_wake(&c->ws);
	return EXIT_OK;
}

static int
approvals_exec(struct cli *c, int argc, char **argv)
{
	const char *guidance = NULL;
	int json = 0, n;
	struct cli_opt opts[] = {
		{ "--json", &json, NULL },
		{ "--guidance=", NULL, &guidance },
		{ "-m=", NULL, &guidance },
	};
	enum gate_decision d;
	struct err e = ERR_INIT;
	struct run r = { 0 };

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	argv++;
	if (n == 0 || !strcmp(argv[0], "list"))
		return n > 1 ? cli_usage(&cmd_approvals) : list(c, json);
	if (n != 2)
		return cli_usage(&cmd_approvals);
	/* the one registry of decisions and their aliases (core/gate.h) */
	if (gate_decision_parse(argv[0], &d, &e)) {
		cli_error("%s", e.msg);
		return cli_usage(&cmd_approvals);
	}
	if (argv[1][0] == 't' && sched_task_ref(argv[1]) > 0)
		return forge_decide(c, sched_task_ref(argv[1]), d);
	if (engine_decide(&c->en, argv[1], d, guidance, &r, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	cli_printf("%s: %s", r.id, r.status);
	if (!status_is_terminal(r.status) &&
	    !engine_driver_pid(&c->en, r.id))
		cli_printf(" (no process drives it: baton resume %s)", r.id);
	putchar('\n');
	run_release(&r);
	return EXIT_OK;
}

const struct cmd cmd_approvals = {
	.name = "approvals",
	.usage = "approvals [list [--json] | approve RUN|TASK | reject RUN|TASK "
		 "[--guidance TEXT] | request-changes RUN --guidance TEXT | "
		 "revise RUN --guidance TEXT | defer RUN]",
	.summary = "list runs waiting at a gate, or decide one",
	.needs = CLI_NEEDS_STORE,
	.exec = approvals_exec,
};
