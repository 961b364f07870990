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
 * With no flag and no terminal to ask on, it stops with exit 2. A change
 * of nothing but budget keys is taken without asking: raising a budget
 * is how a run paused by one goes on.
 */
#include "util/compat.h"

#include <unistd.h>

#include "cli/cli.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "store/store.h"
#include "util/err.h"
#include "util/strvec.h"

/* The answers, numbered as the question numbers them. */
enum drift_choice {
	DRIFT_ASK = 0,
	DRIFT_SNAPSHOT = 1,
	DRIFT_FRESH = 2,
	DRIFT_CURRENT = 3,
};

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
			return (enum drift_choice)(line[0] - '0');
	}
}

/* "a; b; c" of the change lines, for a note on one line. */
static void
print_joined(const struct strvec *changes)
{
	size_t i;

	for (i = 0; i < changes->nr; i++)
		fprintf(stderr, "%s%s", i ? "; " : "", changes->v[i]);
}

/*
 * --fresh: a new run of old's task, pipeline and base, made before old
 * is aborted, so that a config the new run cannot start under (a
 * pipeline gone, a role without a provider) leaves old as it was. Then
 * drives it like `baton run`. Returns the exit code.
 */
static int
start_fresh(struct cli *c, const struct run *old, const struct strvec *changes)
{
	struct run_spec spec = { 0 };
	struct err e = ERR_INIT;
	struct run fresh = { 0 }, done = { 0 };
	int rc;

	spec.task = old->task;
	spec.pipeline = old->pipeline;
	spec.base_ref = old->base_ref;
	if (engine_create_spec(&c->en, &spec, &fresh, &e)) {
		cli_error("cannot start '%s' afresh: %s", old->id, e.msg);
		return EXIT_FAIL;
	}
	if (engine_note_drift(&c->en, old->id, "fresh", changes, fresh.id,
			      &e) ||
	    engine_abort_reason(&c->en, old->id,
				"started afresh under the changed config",
				&done, &e)) {
		cli_error("%s (the new run %s is created; abort it with: "
			  "baton abort %s)",
			  e.msg, fresh.id, fresh.id);
		run_release(&fresh);
		return EXIT_FAIL;
	}
	fprintf(stderr, "%s  %s: started afresh as %s\n", old->id, done.status,
		fresh.id);
	fprintf(stderr, "%s  created (pipeline %s)\n", fresh.id,
		fresh.pipeline);
	rc = cli_drive(c, fresh.id);
	run_release(&done);
	run_release(&fresh);
	return rc;
}

/*
 * Settles r's config drift before it resumes: says what changed and acts
 * on *choice, asking for it when need be. Returns -1 when the resume
 * should go on, else the exit code (--fresh drove a new run, a refusal,
 * no answer).
 */
static int
settle_drift(struct cli *c, const struct run *r, enum drift_choice choice)
{
	struct strvec changes = STRVEC_INIT;
	struct err e = ERR_INIT;
	int64_t pid = engine_driver_pid(&c->en, r->id);
	size_t i;
	int rc = -1;

	if (engine_drift(&c->en, r->id, &changes, &e)) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	if (!changes.nr && r->config_hash && !r->config_snapshot &&
	    strcmp(r->config_hash, c->cfg.hash))
		fprintf(stderr,
			"%s  note: the config changed since this run started "
			"(hash %s, now %s); the run has no snapshot of it and "
			"goes on under the current one\n",
			r->id, r->config_hash, c->cfg.hash);
	if (!changes.nr && choice != DRIFT_FRESH && choice != DRIFT_CURRENT)
		goto out;
	if (choice == DRIFT_ASK && pid <= 0 &&
	    engine_drift_budget_only(&changes)) {
		if (engine_adopt_config(&c->en, r->id, &e)) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
			goto out;
		}
		fprintf(stderr,
			"%s  budget changed: resuming with the new budget (",
			r->id);
		print_joined(&changes);
		fputs(")\n", stderr);
		goto out;
	}
	if (changes.nr) {
		fprintf(stderr, "config changed since %s started:\n", r->id);
		for (i = 0; i < changes.nr; i++)
			fprintf(stderr, "  %s\n", changes.v[i]);
	}
	if (pid > 0 && choice != DRIFT_FRESH && choice != DRIFT_CURRENT) {
		fprintf(stderr,
			"%s  its driver (pid %lld) goes on under the config it "
			"started with\n",
			r->id, (long long)pid);
		goto out;
	}
	if (choice == DRIFT_ASK && isatty(STDIN_FILENO))
		choice = ask();
	switch (choice) {
	case DRIFT_ASK:
		cli_error("resume %s with --snapshot (the config it started "
			  "with), --current (the config as it is now) or "
			  "--fresh (a new run under the new config)",
			  r->id);
		rc = EXIT_USAGE;
		break;
	case DRIFT_SNAPSHOT:
		if (engine_note_drift(&c->en, r->id, "snapshot", &changes, NULL,
				      &e)) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
			break;
		}
		fprintf(stderr,
			"%s  goes on under the config it started with\n",
			r->id);
		break;
	case DRIFT_CURRENT:
		if (engine_adopt_config(&c->en, r->id, &e)) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
			break;
		}
		fprintf(stderr, "%s  goes on under the current config (%s)\n",
			r->id, c->cfg.hash);
		break;
	case DRIFT_FRESH:
		rc = start_fresh(c, r, &changes);
		break;
	}
out:
	strvec_clear(&changes);
	return rc;
}

static int
resume_exec(struct cli *c, int argc, char **argv)
{
	int snapshot = 0, current = 0, fresh = 0, drive = 0, n, rc;
	struct cli_opt opts[] = {
		{ "--snapshot", &snapshot, NULL },
		{ "--current", &current, NULL },
		{ "--fresh", &fresh, NULL },
	};
	enum drift_choice choice = DRIFT_ASK;
	struct err e = ERR_INIT;
	struct run r = { 0 };

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	if (n != 1 || snapshot + current + fresh > 1)
		return cli_usage(&cmd_resume);
	if (store_run_get(c->store, argv[1], &r, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (snapshot)
		choice = DRIFT_SNAPSHOT;
	else if (current)
		choice = DRIFT_CURRENT;
	else if (fresh)
		choice = DRIFT_FRESH;
	/* A terminal run is refused by engine_resume, drift or not. */
	if (!status_is_terminal(r.status)) {
		rc = settle_drift(c, &r, choice);
		if (rc >= 0)
			goto out;
	}
	run_release(&r);
	if (engine_resume(&c->en, argv[1], &drive, &r, &e)) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	if (!drive) {
		printf("%s: resumed (%s); its driver (pid %lld) carries on\n",
		       r.id, r.status,
		       (long long)engine_driver_pid(&c->en, r.id));
		rc = EXIT_OK;
		goto out;
	}
	fprintf(stderr, "%s  resuming at %s\n", r.id, r.status);
	rc = cli_drive(c, r.id);
out:
	run_release(&r);
	return rc;
}

const struct cmd cmd_resume = {
	.name = "resume",
	.usage = "resume [--snapshot | --current | --fresh] "
		 "[--role ROLE=PROVIDER]... RUN",
	.summary = "resume a paused run, or continue one whose driver died",
	.needs = CLI_NEEDS_STORE,
	.takes_roles = 1,
	.exec = resume_exec,
};
