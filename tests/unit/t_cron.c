/*
 * core/schedule.c: the cron parser case by case (fields, lists, ranges,
 * steps, the two day fields, errors), the next and previous slots, the
 * `schedules:` config section with its errors, and a slot's fire
 * through a failing store (sched/schedule.c).
 */
#include "util/compat.h"

#include "core/cnode.h"
#include "core/config.h"
#include "core/receipt.h"
#include "core/schedule.h"
#include "sched/sched.h"
#include "store/store.h"
#include "test.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* ms of an ISO time ("2026-01-05T03:00:00Z") */
static int64_t
at(const char *iso)
{
	int64_t v = time_parse_iso(iso);

	ASSERT(v > 0);
	return v;
}

static void
iso(int64_t ms, char *out)
{
	time_fmt_iso(ms, out, 40);
}

static struct cron
must(const char *text)
{
	struct cron c;
	char why[200];

	if (cron_parse(text, &c, why, sizeof(why)))
		test_fail(__FILE__, __LINE__, "'%s': %s", text, why);
	return c;
}

static void
bad(const char *text, const char *want)
{
	struct cron c;
	char why[200] = "";

	ASSERT_EQ(cron_parse(text, &c, why, sizeof(why)), BATON_EINVAL);
	ASSERT_CONTAINS(why, want);
}

#define NEXT(expr, from, want)                                                 \
	do {                                                                   \
		struct cron c_ = must(expr);                                   \
		char got_[40];                                                 \
		iso(cron_next(&c_, at(from)), got_);                           \
		ASSERT_STREQ(got_, want);                                      \
	} while (0)

#define PREV(expr, from, want)                                                 \
	do {                                                                   \
		struct cron c_ = must(expr);                                   \
		char got_[40];                                                 \
		iso(cron_prev(&c_, at(from)), got_);                           \
		ASSERT_STREQ(got_, want);                                      \
	} while (0)

TEST(cron_fields)
{
	struct cron c = must("0 3 * * *");

	ASSERT_EQ(c.minutes, 1);
	ASSERT_EQ(c.hours, 1 << 3);
	ASSERT_EQ(c.mdays, 0xfffffffeu);
	ASSERT_EQ(c.months, 0x1ffe);
	ASSERT_EQ(c.wdays, 0x7f);
	ASSERT(c.mday_star && c.wday_star);
	c = must("1,2,5-7 */6 1-31/10 2-12/5 7");
	ASSERT_EQ(c.minutes, (1 << 1) | (1 << 2) | (1 << 5) | (1 << 6) |
				     (1 << 7));
	ASSERT_EQ(c.hours, (1 << 0) | (1 << 6) | (1 << 12) | (1 << 18));
	ASSERT_EQ(c.mdays, (1u << 1) | (1u << 11) | (1u << 21) | (1u << 31));
	ASSERT_EQ(c.months, (1 << 2) | (1 << 7) | (1 << 12));
	ASSERT_EQ(c.wdays, 1); /* 7 is Sunday, as 0 */
	c = must("5/20 0 * * 1-5");
	ASSERT_EQ(c.minutes, (1ULL << 5) | (1ULL << 25) | (1ULL << 45));
	ASSERT_EQ(c.wdays, 0x3e);
	ASSERT(!c.wday_star);
	c = must("  0\t0  *  *  0  ");
	ASSERT_EQ(c.wdays, 1);
}

TEST(cron_errors)
{
	bad("0 3 * *", "expected five fields");
	bad("0 3 * * * *", "expected five fields");
	bad("", "expected five fields");
	bad("61 * * * *", "minute '61' is out of range 0-59");
	bad("* 24 * * *", "hour '24' is out of range 0-23");
	bad("* * 0 * *", "day of month '0' is out of range 1-31");
	bad("* * * 13 *", "month '13' is out of range 1-12");
	bad("* * * * 8", "day of week '8' is out of range 0-7");
	bad("5-1 * * * *", "a range goes from low to high");
	bad("*/0 * * * *", "a step is a whole number from 1");
	bad("*/x * * * *", "a step is a whole number from 1");
	bad("a * * * *", "minute 'a' is not *, N, N-M");
	bad("1,,2 * * * *", "is not *, N, N-M");
	bad("1- * * * *", "is not *, N, N-M");
	bad("* * * jan *", "month 'jan' is not");
	bad("0 0 30 2 *", "matches no date");
	bad("0 0 31 4,6,9,11 *", "matches no date");
}

TEST(cron_next_slots)
{
	NEXT("0 3 * * *", "2026-01-05T02:59:59Z", "2026-01-05T03:00:00.000Z");
	NEXT("0 3 * * *", "2026-01-05T03:00:00Z", "2026-01-06T03:00:00.000Z");
	NEXT("*/15 * * * *", "2026-01-05T10:07:00Z",
	     "2026-01-05T10:15:00.000Z");
	NEXT("* * * * *", "2026-12-31T23:59:30Z", "2027-01-01T00:00:00.000Z");
	/* year and month wrap */
	NEXT("30 6 1 1 *", "2026-03-01T00:00:00Z", "2027-01-01T06:30:00.000Z");
	/* a leap day */
	NEXT("0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00.000Z");
	/* 2026-01-05 is a Monday: the weekdays */
	NEXT("0 9 * * 1-5", "2026-01-09T10:00:00Z", "2026-01-12T09:00:00.000Z");
	/* both day fields restricted: either one (the 15th, or a Sunday) */
	NEXT("0 0 15 * 0", "2026-01-05T00:00:00Z", "2026-01-11T00:00:00.000Z");
	NEXT("0 0 15 * 0", "2026-01-12T00:00:00Z", "2026-01-15T00:00:00.000Z");
	/* one restricted: both must hold (any day that is a Sunday) */
	NEXT("0 0 * * 0", "2026-01-12T00:00:00Z", "2026-01-18T00:00:00.000Z");
	/* the last day of a 31-day month only */
	NEXT("0 12 31 * *", "2026-04-01T00:00:00Z", "2026-05-31T12:00:00.000Z");
}

TEST(cron_prev_slots)
{
	PREV("0 3 * * *", "2026-01-05T03:00:00Z", "2026-01-05T03:00:00.000Z");
	PREV("0 3 * * *", "2026-01-05T02:59:59Z", "2026-01-04T03:00:00.000Z");
	PREV("0 3 * * *", "2026-01-05T17:20:05Z", "2026-01-05T03:00:00.000Z");
	PREV("*/15 * * * *", "2026-01-05T10:07:00Z",
	     "2026-01-05T10:00:00.000Z");
	PREV("30 6 1 1 *", "2026-03-01T00:00:00Z", "2026-01-01T06:30:00.000Z");
	PREV("0 0 29 2 *", "2027-03-01T00:00:00Z", "2024-02-29T00:00:00.000Z");
	PREV("0 9 * * 1-5", "2026-01-11T10:00:00Z", "2026-01-09T09:00:00.000Z");
	PREV("59 23 31 12 *", "2026-06-01T00:00:00Z",
	     "2025-12-31T23:59:00.000Z");
}

TEST(cron_next_and_prev_agree)
{
	static const char *const exprs[] = {
		"0 3 * * *", "*/7 */5 * * *", "0 0 15 * 0", "10-20/3 1,13 * 2-4 *",
		"0 0 29 2 *", "5 4 * * 6",
	};
	int64_t t = at("2026-01-01T00:00:00Z"), s, p;
	size_t i;
	int k;

	for (i = 0; i < ARRAY_SIZE(exprs); i++) {
		struct cron c = must(exprs[i]);

		s = t;
		for (k = 0; k < 30; k++) {
			int64_t n = cron_next(&c, s);

			ASSERT(n > s);
			p = cron_prev(&c, n);
			ASSERT_EQ(p, n);
			/* nothing between two slots */
			ASSERT_EQ(cron_prev(&c, n - 1), k ? s : cron_prev(&c, t));
			s = n;
		}
	}
}

/* A config of yaml text: 0, or the error in e. */
static int
load(const char *yaml, struct config *out, struct err *e)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	int rc;

	config_builder_init(&b);
	rc = config_add_yaml(&b, "cfg.yaml", yaml, strlen(yaml), e);
	if (!rc)
		rc = config_finish(&b, out, e);
	config_builder_release(&b);
	return rc;
}

TEST(schedules_config)
{
	struct config c;
	struct err e = ERR_INIT;
	char *title;

	ASSERT_EQ(load("schedules:\n"
		       "  - name: nightly\n"
		       "    cron: \"0 3 * * *\"\n"
		       "    task: {title: \"Nightly deps {slot}\", body: Update, "
		       "priority: 5}\n"
		       "    pipeline: quick\n"
		       "    missed: catch_up\n"
		       "  - name: weekly.sweep\n"
		       "    cron: \"0 0 * * 0\"\n"
		       "    task: {title: Sweep}\n",
		       &c, &e),
		  0);
	ASSERT_EQ(c.nr_schedules, 2);
	ASSERT_STREQ(c.schedules[0].name, "nightly");
	ASSERT_STREQ(c.schedules[0].cron_text, "0 3 * * *");
	ASSERT_STREQ(c.schedules[0].body, "Update");
	ASSERT_STREQ(c.schedules[0].pipeline, "quick");
	ASSERT_EQ(c.schedules[0].priority, 5);
	ASSERT_EQ(c.schedules[0].catch_up, 1);
	ASSERT_EQ(c.schedules[1].catch_up, 0);
	ASSERT(!c.schedules[1].pipeline);
	title = schedule_title(&c.schedules[0], at("2026-01-05T03:00:00Z"));
	ASSERT_STREQ(title, "Nightly deps 2026-01-05 03:00 UTC");
	free(title);
	config_release(&c);
	ASSERT_EQ(load("x: 1\n", &c, &e) < 0, 1);
	e = (struct err)ERR_INIT;
	ASSERT_EQ(load("providers: {}\n", &c, &e), 0);
	ASSERT_EQ(c.nr_schedules, 0);
	config_release(&c);
}

static void
config_bad(const char *yaml, const char *want)
{
	struct config c;
	struct err e = ERR_INIT;

	ASSERT(load(yaml, &c, &e) < 0);
	ASSERT_CONTAINS(e.msg, want);
}

TEST(schedules_config_errors)
{
	config_bad("schedules:\n"
		   "  - name: n\n"
		   "    cron: \"0 25 * * *\"\n"
		   "    task: {title: T}\n",
		   "cfg.yaml:3:11: schedules[0].cron: bad cron expression "
		   "'0 25 * * *': hour '25' is out of range 0-23");
	config_bad("schedules:\n"
		   "  - name: n\n"
		   "    cron: \"0 3 * *\"\n"
		   "    task: {title: T}\n",
		   "cfg.yaml:3:11: schedules[0].cron: bad cron expression");
	config_bad("schedules:\n  - name: n\n    task: {title: T}\n",
		   "schedules[0]: a schedule needs a cron expression");
	config_bad("schedules:\n  - cron: \"* * * * *\"\n    task: {title: T}\n",
		   "schedules[0]: a schedule needs a name");
	config_bad("schedules:\n  - name: n\n    cron: \"* * * * *\"\n",
		   "schedules[0]: a schedule needs a task");
	config_bad("schedules:\n  - name: n\n    cron: \"* * * * *\"\n"
		   "    task: {body: B}\n",
		   "schedules[0].task: a task needs a title");
	config_bad("schedules:\n  - name: n\n    cron: \"* * * * *\"\n"
		   "    task: {title: T}\n    missed: later\n",
		   "cfg.yaml:5:13: schedules[0].missed: expected skip or "
		   "catch_up");
	config_bad("schedules:\n  - name: n\n    cron: \"* * * * *\"\n"
		   "    task: {title: T}\n    when: now\n",
		   "when");
	config_bad("schedules:\n  - name: \"a b\"\n    cron: \"* * * * *\"\n"
		   "    task: {title: T}\n",
		   "schedules[0].name: a name is letters");
	config_bad("schedules:\n  - name: n\n    cron: \"* * * * *\"\n"
		   "    task: {title: T}\n"
		   "  - name: n\n    cron: \"0 * * * *\"\n    task: {title: U}\n",
		   "cfg.yaml:5:11: schedules[1]: another schedule has this "
		   "name");
	config_bad("schedules: {name: n}\n", "schedules");
}

/* ---- a slot's fire against a store ------------------------------------ */

static int
count_event(const struct event *ev, void *arg)
{
	(void)ev;
	(*(int *)arg)++;
	return 0;
}

/*
 * Fires slot 2026-01-05 03:00 of a schedule while write n (counted from
 * this test's start, BATON_FAULT_STORE) fails, then again as serve's
 * next turn would when the first fire failed: whichever write failed,
 * the slot ends with its task, made once, its key bound to it, and no
 * schedule_failed (a store that fails is no task that cannot be made).
 */
static void
fire_through_fault(const char *n)
{
	struct workspace ws = { 0 };
	struct config cfg;
	struct store *st;
	struct sched_ctx x;
	struct task t = { 0 };
	struct err e = ERR_INIT;
	int64_t slot = at("2026-01-05T03:00:00Z"), task = 0, id = 0;
	char sha[65], was[65], *db, *key;
	int rc, failed = 0;

	ws.repo = xstrdup(test_tmpdir());
	ws.dir = xasprintf("%s/.baton", test_tmpdir());
	ws.common = xasprintf("%s/.git", test_tmpdir());
	ASSERT_OK(fs_mkdir_p(ws.dir, 0755, &e), &e);
	ASSERT_EQ(load("schedules:\n"
		       "  - name: nightly\n"
		       "    cron: \"0 3 * * *\"\n"
		       "    task: {title: \"Nightly {slot}\"}\n",
		       &cfg, &e),
		  0);
	db = xasprintf("%s/baton.db", ws.dir);
	ASSERT_OK(store_open(db, &st, &e), &e);
	x = (struct sched_ctx){ .store = st, .ws = &ws, .cfg = &cfg };

	setenv("BATON_FAULT_STORE", n, 1);
	rc = sched_schedule_fire(&x, &cfg.schedules[0], slot, 0, &task, &e);
	unsetenv("BATON_FAULT_STORE");
	if (rc < 0) {
		ASSERT_CONTAINS(e.msg, "injected fault");
		e = (struct err)ERR_INIT;
		rc = sched_schedule_fire(&x, &cfg.schedules[0], slot, 0, &task,
					 &e);
	}
	ASSERT_EQ(rc, 1);
	ASSERT_EQ(task, 1);
	ASSERT_EQ(sched_schedule_fire(&x, &cfg.schedules[0], slot, 0, &task,
				      &e),
		  0);
	ASSERT_OK(store_task_get(st, 1, &t, &e), &e);
	ASSERT_STREQ(t.title, "Nightly 2026-01-05 03:00 UTC");
	task_release(&t);
	ASSERT_EQ(store_task_get(st, 2, &t, &e), BATON_ENOTFOUND);
	key = sched_slot_key(&cfg.schedules[0], slot);
	receipt_sha256_hex(key, strlen(key), sha);
	ASSERT_EQ(store_idem_claim(st, key, sha, &id, was, &e), 0);
	ASSERT_EQ(id, 1);
	ASSERT_OK(store_event_list(st, NULL, 0, "schedule_failed", count_event,
				   &failed, &e),
		  &e);
	ASSERT_EQ(failed, 0);
	free(key);
	free(db);
	store_close(st);
	config_release(&cfg);
	workspace_release(&ws);
}

TEST(schedule_fire_fault_1)
{
	fire_through_fault("1");
}

TEST(schedule_fire_fault_2)
{
	fire_through_fault("2");
}

TEST(schedule_fire_fault_3)
{
	fire_through_fault("3");
}
