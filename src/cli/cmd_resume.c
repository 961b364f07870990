/*
 * baton resume RUN: takes back a pause, or continues a paused run where it
 * stopped. When no process drives the run any more (it was paused and its
 * terminal closed, or its driver was killed), resume drives it here in the
 * foreground, recovering an interrupted stage from its last checkpoint.
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "core/run.h"
#include "util/err.h"

static int
resume_exec(struct cli *c, int argc, char **argv)
{
	struct err e = ERR_INIT;
	struct run r = { 0 };
	int drive = 0, rc;

	if (argc != 2)
		return cli_usage(&cmd_resume);
	if (engine_resume(&c->en, argv[1], &drive, &r, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (!drive) {
		printf("%s: resumed (%s); its driver (pid %lld) carries on\n",
		       r.id, r.status,
		       (long long)engine_driver_pid(&c->en, r.id));
		run_release(&r);
		return EXIT_OK;
	}
	if (r.config_hash && strcmp(r.config_hash, c->cfg.hash))
		fprintf(stderr,
			"%s  note: the config changed since this run started "
			"(hash %s, now %s); it continues under the current "
			"one\n",
			r.id, r.config_hash, c->cfg.hash);
	fprintf(stderr, "%s  resuming at %s\n", r.id, r.status);
	rc = cli_drive(c, r.id);
	run_release(&r);
	return rc;
}

const struct cmd cmd_resume = {
	.name = "resume",
	.usage = "resume [--role ROLE=PROVIDER]... RUN",
	.summary = "resume a paused run, or continue one whose driver died",
	.needs = CLI_NEEDS_STORE,
	.takes_roles = 1,
	.exec = resume_exec,
};
