/*
 * baton resume RUN: takes back a pause, or continues a paused run where it
 * stopped. When no process drives the run any more (it was paused and its
 * terminal closed, or its driver was killed), resume drives it here in the
 * foreground, recovering an interrupted stage from its last checkpoint.
 *
 * A run keeps the config it started under (its snapshot, see engine.h).
 * When the config has changed since, resume names what changed and asks
 * what to do, unless a flag has said it:
 *
 *   --snapshot  go on under the config the run started with (safe)
 *   --fresh     abort the run and start a new one of the same task,
 *               pipeline and base under the config as it is now
 *   --current   go on under the config as it is now
 *
 * With no flag and no terminal to ask on, it stops with exit 2.
 *
 * --from STAGE rewinds instead (engine_rewind, rewind.c): the run
 * re-enters STAGE (a name or a status) with its worktree at that stage's
 * checkpoint; a terminal run is rewound into a new run of its task. A change
 * of nothing but budget keys is taken without asking: raising a budget
 * is how a run paused by one goes on. The decision is the engine's
 * (engine_settle_drift, which the API's resume shares); this file asks
 * and prints.
 *
 * A task's run started afresh leaves its task to the new run, which is
 * driven here; the task waits blocked (paused) meanwhile, as it does
 * while a run of it resumed here is driven, and serve settles it once
 * the driver is gone (sched_task_rerun, sweep.c).
 */
#include "util/compat.h"

#include <unistd.h>

#include "cli/cli.h"
#include "core/run.h"
#include "sched/sched.h"
#include "util/err.h"
#include "util/strvec.h"
#include "util/term.h"

/* The answers, in the order the question numbers them. */
static const enum drift_choice answers[] = { DRIFT_SNAPSHOT, DRIFT_FRESH,
					     DRIFT_CURRENT };

/* Asks on the terminal; DRIFT_ASK when stdin ends first. */
static enum drift_choice
ask(void)
{
	char line[64];

	for (;;) {
		fputs("  1) resume with the original config (safe)  "
		      "2) start fresh with the new config  "
		      "3) resume with the new config\n"
		      "choose 1, 2 or 3: ",
		      stderr);
		fflush(stderr);
		if (!fgets(line, sizeof(line), stdin))
			return DRIFT_ASK;
		if (line[0] >= '1' && line[0] <= '3' &&
		    (line[1] == '\n' || !line[1]))
			return answers[line[0] - '1'];
	}
}

/* "a; b; c" of the change lines, for a note on one line. */
static void
print_joined(const struct strvec *changes)
{
	size_t i;

	for (i = 0; i < changes->nr; i++)
		term_printf(stderr, "%s%s", i ? "; " : "", changes->v[i]);
}

/* The change lines under a heading, once. */
static void
print_changes(const struct drift_outcome *o, int *shown)
{
	size_t i;

	if (*shown || !o->changes.nr || o->result == DRIFT_BUDGET)
		return;
	term_printf(stderr, "config changed since %s started:\n", o->run.id);
	for (i = 0; i < o->changes.nr; i++)
		term_printf(stderr, "  %s\n", o->changes.v[i]);
	*shown = 1;
}

/*
 * Settles run ref's config drift before it resumes (engine_settle_drift)
 * and says what became of it, asking on the terminal when nobody chose.
 * A run of a task started afresh stays its task's, which waits while the
 * new run is driven here (sched_task_rerun). Returns -1 when the resume
 * should go on, else the exit code (--fresh drove a new run, a refusal,
 * no answer).
 */
static int
settle_drift(struct cli *c, const char *ref, enum drift_choice choice)
{
	struct sched_ctx x = { .store = c->store, .ws = &c->ws,
			       .cfg = &c->cfg, .holder = "cli",
			       .store_spec = c->store_spec };
	struct sched_rerun rerun = { &x, 0 };
	struct drift_outcome o;
	struct err e = ERR_INIT;
	int shown = 0, rc;

	rc = engine_settle_drift(&c->en, ref, choice, sched_task_rerun, &rerun,
				 &o, &e);
	if (!rc && o.result == DRIFT_UNDECIDED && isatty(STDIN_FILENO)) {
		print_changes(&o, &shown);
		choice = ask();
		if (choice != DRIFT_ASK) {
			drift_outcome_release(&o);
			rc = engine_settle_drift(&c->en, ref, choice,
						 sched_task_rerun, &rerun, &o,
						 &e);
		}
	}
	if (o.no_snapshot)
		term_printf(
		    stderr,
		    "%s  note: the config changed since this run started "
		    "(hash %s, now %s); the run has no snapshot of it and "
		    "goes on under the current one\n",
		    o.run.id, o.run.config_hash, c->cfg.hash);
	print_changes(&o, &shown);
	if (rc) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	rc = -1;
	switch (o.result) {
	case DRIFT_NONE:
		break;
	case DRIFT_BUDGET:
		term_printf(
		    stderr,
		    "%s  budget changed: resuming with the new budget (",
		    o.run.id);
		print_joined(&o.changes);
		fputs(")\n", stderr);
		break;
	case DRIFT_DRIVEN:
		term_printf(
		    stderr,
		    "%s  its driver (pid %lld) goes on under the config it "
		    "started with\n",
		    o.run.id, (long long)o.driver_pid);
		break;
	case DRIFT_UNDECIDED:
		cli_error("resume %s with --snapshot (the config it started "
			  "with), --current (the config as it is now) or "
			  "--fresh (a new run under the new config)",
			  o.run.id);
		rc = EXIT_USAGE;
		break;
	case DRIFT_KEPT:
		term_printf(stderr,
			    "%s  goes on under the config it started with\n",
			    o.run.id);
		break;
	case DRIFT_ADOPTED:
		term_printf(stderr,
			    "%s  goes on under the current config (%s)\n",
			    o.run.id, c->cfg.hash);
		break;
	case DRIFT_RESTARTED:
		term_printf(stderr, "%s  %s: started afresh as %s\n", o.run.id,
			    o.run.status, o.fresh.id);
		if (o.fresh.task_id)
			term_printf(stderr, "%s  now the run of t%lld\n",
				    o.fresh.id, (long long)o.fresh.task_id);
		term_printf(stderr, "%s  created (pipeline %s)\n", o.fresh.id,
			    o.fresh.pipeline);
		rc = cli_drive(c, o.fresh.id);
		break;
	}
out:
	drift_outcome_release(&o);
	return rc;
}

/* resume --from STAGE: rewinds run ref and drives it when nobody does. */
static int
rewind_exec(struct cli *c, const char *ref, const char *from)
{
	struct rewind_outcome o;
	struct err e = ERR_INIT;
	int rc;

	rc = engine_rewind(&c->en, ref, from, &o, &e);
	if (rc) {
		cli_error("%s", e.msg);
		return rc == BATON_EINVAL ? EXIT_USAGE : EXIT_FAIL;
	}
	if (o.anew && o.run.task_id) {
		/* its task's new run, driven here: the task waits */
		struct sched_ctx x = { .store = c->store, .ws = &c->ws,
				       .cfg = &c->cfg, .holder = "cli",
				       .store_spec = c->store_spec };
		struct sched_rerun rr = { &x, 0 };

		if (sched_task_rewound(&rr, o.from, &o.run, &e) < 0) {
			cli_error("%s", e.msg);
			rewind_outcome_release(&o);
			return EXIT_FAIL;
		}
	}
	if (o.anew)
		term_printf(stderr,
			    "%s  rewound into a new run %s at %s (worktree at "
			    "%.12s)\n",
			    o.from, o.run.id, o.stage, o.checkpoint);
	else
		term_printf(stderr,
			    "%s  rewound to %s (worktree at %.12s)\n",
			    o.run.id, o.stage, o.checkpoint);
	if (!o.drive) {
		cli_printf("%s: rewound to %s; its driver (pid %lld) carries "
			   "on\n",
			   o.run.id, o.stage,
			   (long long)engine_driver_pid(&c->en, o.run.id));
		rc = EXIT_OK;
	} else {
		rc = cli_drive(c, o.run.id);
	}
	rewind_outcome_release(&o);
	return rc;
}

static int
resume_exec(struct cli *c, int argc, char **argv)
{
	int snapshot = 0, current = 0, fresh = 0, drive = 0, tries = 0, n, rc;
	const char *from = NULL;
	struct cli_opt opts[] = {
		{ "--snapshot", &snapshot, NULL },
		{ "--current", &current, NULL },
		{ "--fresh", &fresh, NULL },
		{ "--from=", NULL, &from },
	};
	enum drift_choice choice = DRIFT_ASK;
	struct err e = ERR_INIT;
	struct run r = { 0 };

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	if (n != 1 || snapshot + current + fresh > 1)
		return cli_usage(&cmd_resume);
	if (from && snapshot + current + fresh)
		return cli_usage(&cmd_resume);
	if (from)
		return rewind_exec(c, argv[1], from);
	if (snapshot)
		choice = DRIFT_SNAPSHOT;
	else if (current)
		choice = DRIFT_CURRENT;
	else if (fresh)
		choice = DRIFT_FRESH;
	/* A terminal run is refused by engine_resume, drift or not. */
	rc = settle_drift(c, argv[1], choice);
	if (rc >= 0)
		return rc;
	/* BATON_ECONFLICT: another resume moved the run first (out of its
	 * pause); read it again, to find it driven or drive it here */
	for (;;) {
		rc = engine_resume(&c->en, argv[1], &drive, &r, &e);
		if (rc != BATON_ECONFLICT || ++tries == 3)
			break;
		e = (struct err)ERR_INIT;
	}
	if (rc) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	if (!drive) {
		cli_printf(
		    "%s: resumed (%s); its driver (pid %lld) carries on\n",
		    r.id, r.status, (long long)engine_driver_pid(&c->en, r.id));
		rc = EXIT_OK;
		goto out;
	}
	term_printf(stderr, "%s  resuming at %s\n", r.id, r.status);
	rc = cli_drive(c, r.id);
out:
	run_release(&r);
	return rc;
}

const struct cmd cmd_resume = {
	.name = "resume",
	.usage = "resume [--snapshot | --current | --fresh | --from STAGE] "
		 "[--role ROLE=PROVIDER]... RUN",
	.summary = "resume a paused run, or continue one whose driver died",
	.needs = CLI_NEEDS_STORE,
	.takes_roles = 1,
	.exec = resume_exec,
};
