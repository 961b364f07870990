/*
 * Schedules (config `schedules:`, docs/config.md "schedules"): tasks
 * that `baton serve` makes on time, from a 5-field cron expression, a
 * task template and a pipeline. This module is the pure part: the cron
 * parser and its slot arithmetic (UTC, minute resolution), and the
 * reading of the config section. Firing is sched/schedule.c's.
 *
 * Pure: no I/O.
 */
#ifndef BATON_CORE_SCHEDULE_H
#define BATON_CORE_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

struct cnode;
struct err;

/*
 * A parsed cron expression "MIN HOUR DOM MON DOW": per field, a bit per
 * value allowed. Each field is a comma list of *, N or N-M, each with an
 * optional /STEP; day of week 0-7 (0 and 7 are Sunday). As in Vixie
 * cron, when both day fields are restricted (neither starts with *), a
 * day matches when either does.
 */
struct cron {
	uint64_t minutes; /* bits 0-59 */
	uint32_t hours;	  /* bits 0-23 */
	uint32_t mdays;	  /* bits 1-31 */
	uint32_t months;  /* bits 1-12 */
	uint32_t wdays;	  /* bits 0-6 */
	int mday_star, wday_star;
};

/*
 * Parses text into *out. On error returns BATON_EINVAL with why (NUL
 * terminated, at most n bytes) naming the field and what is wrong, e.g.
 * "minute '61' is out of range 0-59", and leaves *out unspecified. An
 * expression that matches no time ("0 0 31 2 *") is an error too.
 */
int cron_parse(const char *text, struct cron *out, char *why, size_t n);

/* The first slot (ms, a whole minute) strictly after after_ms; 0: none. */
int64_t cron_next(const struct cron *c, int64_t after_ms);

/* The last slot at or before at_ms; 0: none (within eight years). */
int64_t cron_prev(const struct cron *c, int64_t at_ms);

/* One schedules[] entry. */
struct schedule {
	char *name;	/* [A-Za-z0-9_.-]+, unique */
	char *cron_text; /* as written */
	struct cron cron;
	char *title;	/* task.title; "{slot}" becomes the slot's time */
	char *body;	/* task.body, or NULL */
	char *kind;	/* task.kind, or NULL ("code") */
	char *area;	/* task.area, or NULL */
	int priority;	/* task.priority */
	char *pipeline; /* NULL: workflow.pipeline */
	int catch_up;	/* missed: catch_up (1) or skip (0, default) */
};

/*
 * Reads the `schedules` node of the merged config (NULL or null: none)
 * into a new array *out of *n entries (schedules_free). Errors name
 * FILE:LINE:COL and the key: "config.yaml:7:11: schedules[0].cron: ...".
 */
int schedules_read(const struct cnode *node, struct schedule **out,
		   size_t *n, struct err *e);
void schedules_free(struct schedule *s, size_t n);

/* The title of s's task for slot_ms ("{slot}" replaced); caller frees. */
char *schedule_title(const struct schedule *s, int64_t slot_ms);

#endif
