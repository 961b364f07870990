/*
 * Shared inside the engine: the driver's context while it runs one run,
 * and helpers between engine.c, stage.c, control.c and record.c.
 */
#ifndef BATON_ENGINE_ENGINE_INT_H
#define BATON_ENGINE_ENGINE_INT_H

#include <jansson.h>

#include "core/run.h"

struct buf;
struct config;
struct engine;
struct err;
struct pipeline;
struct stage;

/* One driver working on one run. */
struct drive {
	struct engine *en;
	struct pipeline *p;
	struct run r;
	char *run_dir;
	int wake_fd;	/* read end of the self-pipe signals write to */
	int stop;	/* an abort or a signal asked the stage to stop */
	int leave;	/* hand the run back (paused at a budget): the next
			   driver starts with the config as it is then */
	int64_t report_ms; /* when the last report was due or made, for
			      the periodic ones; 0: read it from the store */
};

/* How a stage ended, as the engine routes it. */
enum stage_result {
	STAGE_PASS,	/* success: on to next */
	STAGE_LOOP,	/* checks failed or changes requested: the fix loop */
	STAGE_BLOCK,	/* the run should stop: reason set */
	STAGE_FAIL,	/* unrecoverable: reason set */
	STAGE_STOPPED,	/* stopped by abort or a signal */
};

/* stage.c: runs d->r's current stage; *reason gets a message (freed by
 * the caller) for BLOCK and FAIL. */
int engine__run_stage(struct drive *d, const struct stage *s,
		      enum stage_result *out, char **reason, struct err *e);

/* engine.c: transition with a data object (consumed; may be NULL). */
int engine__move(struct drive *d, const char *to, json_t *data,
		 struct err *e);
/* Ends the run aborted on a person's request (no agent is running). */
int engine__abort(struct drive *d, struct err *e);
/* Writes d->r with an event of type (data consumed; may be NULL). */
int engine__note(struct drive *d, const char *type, json_t *data,
		 struct err *e);
/*
 * The door engine__note uses, for callers without a driver: writes r
 * (version-checked and fenced like every run write) with an event of
 * type whose data (consumed; may be NULL) is redacted, then mirrors the
 * events to events.jsonl. r's version moves on.
 */
int engine__record(struct engine *en, struct run *r, const char *type,
		   json_t *data, struct err *e);
/* Re-reads d->r from the store. */
int engine__reload(struct drive *d, struct err *e);

/*
 * engine.c: sleeps until until_ms (epoch). Returns 1 early when the run
 * should stop (an abort request or a signal), else 0. Other wake-ups
 * (a steer, a pause request) do not end the sleep.
 */
int engine__sleep(struct drive *d, int64_t until_ms);

/*
 * engine.c: the budget line (config budget) run r has crossed, as a
 * sentence, or NULL (caller frees). Cost and tokens count what the
 * agents reported; time counts the stages.
 */
char *engine__budget_crossed(const struct config *cfg, const struct run *r);

/* engine.c: the signal (SIGINT, SIGTERM, SIGHUP) that asked the driver
 * to stop, or 0. */
int engine__signalled(void);

/* record.c */
/* Path of a file in the run folder (caller frees). */
char *engine__run_file(const struct drive *d, const char *name);
/* Stores an artifact's text as a new version of (stage, artifact). */
int engine__keep_output(struct drive *d, const char *artifact,
			const char *decision, const char *content,
			struct err *e);
/* The steer notes not yet handed to an agent, newest last; *upto gets the
 * seq of the last one. */
int engine__pending_steers(struct drive *d, struct buf *out, int64_t *upto,
			   struct err *e);

/*
 * report.c: run reports on the OpenViber cadence (config reports, see
 * docs/api.md "Reports"). engine__report records one now: a "report"
 * event (data: n, kind, elapsed_ms, status, stage, changed, blockers,
 * next, budget, evidence, file) through engine__record, and the same as
 * markdown in the run folder's reports/NNN.md. kind is "milestone",
 * "periodic" or "final". to and data (NULL: none) are a move of r about
 * to be made, with its transition data: the report describes the run as
 * it will be after it. Returns 0 or the store's error (the markdown is
 * best effort).
 */
int engine__report(struct engine *en, const struct pipeline *p,
		   struct run *r, const char *kind, const char *to,
		   const char *data, struct err *e);
/*
 * Before r moves to the terminal status to (data: the transition's, or
 * NULL): the run's final report. engine__move calls it for the driver;
 * whoever else ends a run (control.c) should call it just before its
 * engine_transition. Failures are logged.
 */
void engine__report_final(struct engine *en, const struct pipeline *p,
			  struct run *r, const char *to, const char *data);
/*
 * After r moved (engine__move): a milestone report when a stage just
 * ended (stage_ended), r is not terminal and the run is older than
 * reports.milestone_after_seconds. Failures are logged, not returned:
 * the move itself is done.
 */
void engine__report_moved(struct engine *en, const struct pipeline *p,
			  struct run *r, int stage_ended);
/*
 * On a tick of d's stage: a periodic report when the run is older than
 * reports.periodic_after_seconds and the last report is
 * reports.interval_seconds old. Failures are logged.
 */
void engine__report_tick(struct drive *d);

/* control.c: the run's lock file (caller frees). */
char *engine__lock_path(const struct engine *en, const char *run_id);
/* Wakes the live driver of run_id, if any. */
void engine__wake(const struct engine *en, const char *run_id);

#endif
