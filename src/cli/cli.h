/*
 * The command line: one table of commands (main.c), one file per command.
 * A command parses its arguments, asks the layers below to do the work and
 * prints the result; it holds no lifecycle logic.
 *
 * Exit codes (docs/cli.md): 0 success, 1 failure, 2 usage, 3 the run ended
 * blocked, failed or aborted, 130 the foreground driver was stopped by a
 * signal (Ctrl-C) and the run waits for `baton resume`.
 */
#ifndef BATON_CLI_CLI_H
#define BATON_CLI_CLI_H

#include "core/config.h"
#include "engine/engine.h"
#include "workspace/workspace.h"

struct run;
struct store;

enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,
	EXIT_USAGE = 2,
	EXIT_RUN_ENDED_BAD = 3,
	EXIT_INTERRUPTED = 130,
};

/* What a command needs opened before it runs. */
enum {
	CLI_NEEDS_REPO = 1 << 0,   /* inside a git repository */
	CLI_NEEDS_CONFIG = 1 << 1, /* config loaded and valid */
	CLI_NEEDS_STORE = 1 << 2,  /* the store open (implies the others) */
	/* a config that does not load is warned of, not fatal: the command
	 * works on the runs there are (status, show, events, pause, abort),
	 * and a typo in the config must not keep a person from stopping a
	 * live run */
	CLI_CONFIG_SPARE = 1 << 3,
};

struct cli {
	struct workspace ws;
	struct config cfg;
	struct store *store;
	char *store_spec; /* what the store was opened from */
	struct engine en;
	int have_cfg;
	int json;
	struct strvec roles; /* --role ROLE=PROVIDER[,PROVIDER] flags */
};

struct cmd {
	const char *name;
	const char *usage;   /* "run [--pipeline NAME] TASK" */
	const char *summary; /* one line for --help */
	int needs;
	/* an option with which the command needs nothing opened and runs
	 * anywhere ("--types" of events); NULL: none */
	const char *bare_opt;
	int takes_roles; /* accepts --role ROLE=PROVIDER (a config layer) */
	int (*exec)(struct cli *c, int argc, char **argv);
};

/*
 * Prints "baton: msg" to stderr, with control characters shown escaped
 * (util/term.h): a message may quote an agent's stderr or a task title.
 */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * printf to stdout for a person. Control characters in the text (a task
 * title, an agent's message, a reason, an event's data) are shown escaped
 * (term_escape in util/term.h), so none of it can drive the terminal.
 * Every human-output line of every command goes through it (stderr's
 * through term_printf); JSON output does not need it. Returns the bytes
 * written, or -1.
 */
int cli_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the usage of cmd and returns EXIT_USAGE. */
int cli_usage(const struct cmd *cmd);
const struct cmd *cli_find(const char *name);

/*
 * Loads the layered config for the repository: built-in defaults,
 * $XDG_CONFIG_HOME/baton/config.yaml (or ~/.config/...), .baton/config.yaml,
 * BATON_* variables. Errors name file, line, column and key.
 */
int cli_load_config(struct cli *c, struct err *e);
/*
 * Refuses the default store (.baton/baton.db, when the config names no
 * store) if it holds no runs (s NULL: it does not exist yet) while
 * .baton/runs/ holds run folders: an emptied or lost baton.db would
 * otherwise start over at r1 beside runs it knows nothing of. An error
 * naming the folder and what to do; 0 for a store given explicitly
 * (new runs there take ids past the folder's, workspace_next_free_seq).
 */
int cli_refuse_orphaned_runs(const struct cli *c, struct store *s,
			     struct err *e);
/* The store spec of the loaded config: `store`, else .baton/baton.db. */
char *cli_store_spec(const struct cli *c);
/*
 * spec as it may be shown: a URL's password ("postgres://u:pw@h/db")
 * becomes "***". The caller frees.
 */
char *cli_store_label(const char *spec);

/*
 * The host snapshot (agent/host.h) of this repository's .baton/host.json
 * for c's config: reused within execution.host_ttl_seconds, else made
 * anew. *made (may be NULL) says which. Caller json_decrefs *out.
 */
int cli_host_snapshot(struct cli *c, struct json_t **out, int *made,
		      struct err *e);

/*
 * Pulls "--json" and "-f" style flags out of argv. Returns the number of
 * arguments left in argv (compacted), or -1 on an unknown option (named in
 * the error). spec lists accepted flags; a flag ending in '=' takes a
 * value, stored in the matching vals[] entry.
 */
struct cli_opt {
	const char *name; /* "--json", "-f", "--pipeline=" */
	int *flag;	  /* set to 1 when present */
	const char **val; /* the value, for names ending in '=' */
};
int cli_parse(int argc, char **argv, const struct cli_opt *opts, size_t n);
/*
 * Takes every "NAME VALUE" and "NAME=VALUE" out of argv[1..] (an option
 * that may be given many times), pushing the values on out. Stops at
 * "--". Returns -1 (after saying why) when the last one lacks a value.
 */
struct strvec;
int cli_take_repeated(int *argc, char **argv, const char *name,
		      struct strvec *out);

/* Maps a finished run to the exit code: 0 for merge_ready/completed. */
int cli_run_exit(const struct run *r);
/* Drives a run in the foreground with progress; returns the exit code. */
int cli_drive(struct cli *c, const char *ref);
/* One-line summary of a run, for run/resume/pause/abort output. */
void cli_print_run_line(const struct run *r);
/* The progress callback used while a command drives a run. */
void cli_progress(void *arg, enum engine_note what, const struct run *r);

/* "queued 3, running 1, done 7, ..." (cmd_task.c) into out. */
struct buf;
int cli_task_counts(struct store *s, struct buf *out, struct err *e);


/* Commands, one per file. */
extern const struct cmd cmd_init, cmd_run, cmd_status, cmd_show, cmd_events,
	cmd_pause, cmd_resume, cmd_abort, cmd_steer, cmd_approvals, cmd_diff,
	cmd_pipeline, cmd_config, cmd_version, cmd_help, cmd_doctor;
extern const struct cmd cmd_task, cmd_serve, cmd_worker, cmd_migrate;
extern const struct cmd cmd_plan;
extern const struct cmd cmd_merge;
extern const struct cmd cmd_receipts;
extern const struct cmd cmd_forge;
extern const struct cmd cmd_clean;
extern const struct cmd cmd_schedule;
extern const struct cmd cmd_plugin;
extern const struct cmd cmd_tui;
extern const struct cmd cmd_mcp;
extern const struct cmd cmd_chat;
extern const struct cmd cmd_memory;
extern const struct cmd cmd_token;

#endif
