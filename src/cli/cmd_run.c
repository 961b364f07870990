/*
 * baton run: creates a run of a task and drives it in the foreground to a
 * terminal status, printing each transition (and, on a terminal, a live
 * line with the stage, elapsed time and review loops). A second terminal
 * can pause, resume, abort, steer and approve it meanwhile.
 */
#include "util/compat.h"

#include <unistd.h>

#include "cli/cli.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/timeutil.h"
#include "util/term.h"

static int tty_line; /* a live line is on screen and must be cleared */

void
cli_progress(void *arg, enum engine_note what, const struct run *r)
{
	int tty = isatty(STDERR_FILENO);
	char age[32];

	(void)arg;
	time_fmt_age(time_now_ms() - (r->started_at ? r->started_at :
						       r->created_at),
		     age, sizeof(age));
	if (tty_line) {
		fputs("\r\033[K", stderr);
		tty_line = 0;
	}
	switch (what) {
	case ENGINE_NOTE_TRANSITION:
		term_printf(stderr, "%s  %-20s %6s  loops %d/%d\n", r->id,
			    r->status, age, r->review_loops,
			    r->max_review_loops);
		break;
	case ENGINE_NOTE_TICK:
		if (!tty)
			break;
		time_fmt_age(time_now_ms() - r->phase_started_at, age,
			     sizeof(age));
		term_printf(stderr,
			    "  %s: %s for %s  (pause, abort, steer from "
			    "another terminal)",
			    r->id, r->status, age);
		tty_line = 1;
		break;
	case ENGINE_NOTE_WAITING:
		if (!strcmp(r->status, ST_WAITING))
			term_printf(
			    stderr,
			    "%s  waiting for approval to enter %s:\n"
			    "      baton approvals approve %s   (or reject, "
			    "request-changes --guidance TEXT, defer)\n",
			    r->id, r->gate_status, r->id);
		else if (engine_gate_deferred(r))
			term_printf(stderr,
				    "%s  deferred at the gate into %s: baton "
				    "resume %s asks again\n",
				    r->id, r->gate_status, r->id);
		else
			term_printf(stderr,
				    "%s  paused before %s: baton resume %s\n",
				    r->id, r->paused_at_status, r->id);
		break;
	}
	fflush(stderr);
}

int
cli_run_exit(const struct run *r)
{
	if (!strcmp(r->status, ST_MERGE_READY) ||
	    !strcmp(r->status, ST_COMPLETED))
		return EXIT_OK;
	/* paused here means a budget stopped it (see engine_drive) */
	return status_is_terminal(r->status) || !strcmp(r->status, ST_PAUSED) ?
		       EXIT_RUN_ENDED_BAD :
		       EXIT_OK;
}

void
cli_print_run_line(const struct run *r)
{
	cli_printf("%s: %s", r->id, r->status);
	if (!strcmp(r->status, ST_MERGE_READY) && r->branch)
		cli_printf(" (branch %s; see: baton diff %s)", r->branch,
			   r->id);
	if (r->reason && status_is_terminal(r->status))
		cli_printf(": %s", r->reason);
	if (r->reason && !strcmp(r->status, ST_PAUSED))
		cli_printf(": %s (raise it in .baton/config.yaml, then: baton "
			   "resume %s)",
			   r->reason, r->id);
	putchar('\n');
}

/*
 * Another process took the run's lock first (two `baton resume` of a
 * run nobody drove, racing): that process drives it, and the run goes
 * on as asked, so this is no failure. Returns the exit code, or -1 when
 * the driver is gone already and the run may be driven here after all.
 */
static int
driven_elsewhere(struct cli *c, const char *ref)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int64_t pid;
	int rc;

	if (store_run_get(c->store, ref, &r, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	pid = engine_driver_pid(&c->en, r.id);
	rc = -1;
	if (pid > 0) {
		cli_printf("%s: resumed (%s); its driver (pid %lld) carries "
			   "on\n",
			   r.id, r.status, (long long)pid);
		rc = EXIT_OK;
	}
	run_release(&r);
	return rc;
}

/*
 * Drives ref in the foreground; shared by run and resume. A run another
 * process drives already is left to it (exit 0, its pid named).
 */
int
cli_drive(struct cli *c, const char *ref)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int rc, tries = 0;

	c->en.note = cli_progress;
	workspace_detect_identity(&c->ws);
	do {
		e = (struct err)ERR_INIT;
		rc = engine_drive(&c->en, ref, &r, &e);
		if (rc == BATON_EBUSY) {
			int code = driven_elsewhere(c, ref);

			if (code >= 0)
				return code;
		}
	} while (rc == BATON_EBUSY && ++tries < 3);
	if (rc && rc != BATON_EABORTED) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (rc == BATON_EABORTED) {
		cli_error("%s", e.msg);
		return EXIT_INTERRUPTED;
	}
	cli_print_run_line(&r);
	rc = cli_run_exit(&r);
	run_release(&r);
	return rc;
}

static int
run_exec(struct cli *c, int argc, char **argv)
{
	const char *pipeline = NULL;
	int read_only = 0, unattended = 0;
	struct cli_opt opts[] = { { "--pipeline=", NULL, &pipeline },
				  { "--read-only", &read_only, NULL },
				  { "--unattended", &unattended, NULL } };
	struct run_spec spec = { 0 };
	struct buf task = BUF_INIT;
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int n, i, rc;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	if (n == 0)
		return cli_usage(&cmd_run);
	for (i = 1; i <= n; i++)
		buf_addf(&task, "%s%s", i > 1 ? " " : "", argv[i]);
	spec.task = task.ptr;
	spec.pipeline = pipeline;
	spec.read_only = read_only;
	rc = engine_create_spec(&c->en, &spec, &r, &e);
	buf_release(&task);
	if (rc) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	term_printf(stderr, "%s  created (pipeline %s)%s\n", r.id, r.pipeline,
		    unattended ? ", unattended" : "");
	/* nobody waits on it: gates and questions block, pauses stop */
	c->en.unattended = unattended;
	rc = cli_drive(c, r.id);
	run_release(&r);
	return rc;
}

const struct cmd cmd_run = {
	.name = "run",
	.usage = "run [--pipeline NAME] [--read-only] [--unattended] "
		 "[--role ROLE=PROVIDER]... "
		 "TASK...",
	.summary = "carry a task through a pipeline in the foreground",
	.needs = CLI_NEEDS_STORE,
	.takes_roles = 1,
	.exec = run_exec,
};
