/*
 * Schedules: the cron parser, slot arithmetic and the config section
 * (schedule.h). Slots are whole minutes of UTC.
 */
#include "util/compat.h"

#include <ctype.h>
#include <time.h>

#include "core/cnode.h"
#include "core/schedule.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"

static const struct field {
	const char *name;
	int min, max;
} fields[5] = {
	{ "minute", 0, 59 },	   { "hour", 0, 23 }, { "day of month", 1, 31 },
	{ "month", 1, 12 },	   { "day of week", 0, 7 },
};

/* A number of digits only at *p, advanced; -1 when there is none. */
static long
number(const char **p)
{
	long v = 0;

	if (!isdigit((unsigned char)**p))
		return -1;
	while (isdigit((unsigned char)**p)) {
		v = v * 10 + (**p - '0');
		if (v > 1000)
			return -1;
		(*p)++;
	}
	return v;
}

/* One field's text (NUL-terminated) into *bits. */
static int
parse_field(const struct field *f, const char *text, uint64_t *bits,
	    int *star, char *why, size_t n)
{
	const char *p = text;
	long lo, hi, step, v;

	*bits = 0;
	*star = text[0] == '*';
	for (;;) {
		const char *item = p;

		if (*p == '*') {
			lo = f->min;
			hi = f->max;
			p++;
		} else {
			lo = number(&p);
			hi = lo;
			if (lo >= 0 && *p == '-') {
				p++;
				hi = number(&p);
			}
			if (lo < 0 || hi < 0)
				goto bad;
			if (lo < f->min || hi > f->max || lo > f->max ||
			    hi < f->min) {
				snprintf(why, n, "%s '%s' is out of range "
					 "%d-%d", f->name, text, f->min,
					 f->max);
				return BATON_EINVAL;
			}
			if (lo > hi) {
				snprintf(why, n, "%s '%s': a range goes from "
					 "low to high", f->name, text);
				return BATON_EINVAL;
			}
		}
		step = 1;
		if (*p == '/') {
			p++;
			step = number(&p);
			if (step < 1) {
				snprintf(why, n, "%s '%s': a step is a whole "
					 "number from 1", f->name, text);
				return BATON_EINVAL;
			}
			/* N/S: from N to the end of the range */
			if (lo == hi && item[0] != '*')
				hi = f->max;
		}
		for (v = lo; v <= hi; v += step)
			*bits |= 1ULL << v;
		if (*p == '\0')
			return 0;
		if (*p != ',')
			goto bad;
		p++;
	}
bad:
	snprintf(why, n, "%s '%s' is not *, N, N-M or a list of them, each "
		 "with an optional /STEP", f->name, text);
	return BATON_EINVAL;
}

int
cron_parse(const char *text, struct cron *out, char *why, size_t n)
{
	char copy[256], *tok[6], *save = NULL, *s;
	uint64_t bits[5];
	int star[5], nr = 0, i, rc;

	if (!text || strlen(text) >= sizeof(copy)) {
		snprintf(why, n, "expected five fields: minute hour "
			 "day-of-month month day-of-week");
		return BATON_EINVAL;
	}
	snprintf(copy, sizeof(copy), "%s", text);
	for (s = strtok_r(copy, " \t", &save); s && nr < 6;
	     s = strtok_r(NULL, " \t", &save))
		tok[nr++] = s;
	if (nr != 5) {
		snprintf(why, n, "expected five fields (minute hour "
			 "day-of-month month day-of-week), got %d", nr);
		return BATON_EINVAL;
	}
	for (i = 0; i < 5; i++) {
		rc = parse_field(&fields[i], tok[i], &bits[i], &star[i], why,
				 n);
		if (rc)
			return rc;
	}
	memset(out, 0, sizeof(*out));
	out->minutes = bits[0];
	out->hours = (uint32_t)bits[1];
	out->mdays = (uint32_t)bits[2];
	out->months = (uint32_t)bits[3];
	out->wdays = (uint32_t)(bits[4] & 0x7f) | (bits[4] & 0x80 ? 1 : 0);
	out->mday_star = star[2];
	out->wday_star = star[4];
	/* from a leap year's first day, eight years hold every date */
	if (!cron_next(out, (int64_t)946684800 * 1000 - 60000)) {
		snprintf(why, n, "'%s' matches no date", text);
		return BATON_EINVAL;
	}
	return 0;
}

static int
day_ok(const struct cron *c, const struct tm *tm)
{
	int md = (c->mdays >> tm->tm_mday) & 1,
	    wd = (c->wdays >> tm->tm_wday) & 1;

	if (c->mday_star || c->wday_star)
		return md && wd;
	return md || wd;
}

/* Minutes looked at, at most: enough for any date in eight years. */
#define CRON_STEPS 200000

int64_t
cron_next(const struct cron *c, int64_t after_ms)
{
	time_t t = (time_t)(after_ms / 60000) * 60 + 60;
	struct tm tm;
	int i;

	if (after_ms < 0)
		t = 0;
	for (i = 0; i < CRON_STEPS; i++) {
		gmtime_r(&t, &tm);
		tm.tm_sec = 0;
		if (!((c->months >> (tm.tm_mon + 1)) & 1)) {
			tm.tm_mon++;
			tm.tm_mday = 1;
			tm.tm_hour = tm.tm_min = 0;
		} else if (!day_ok(c, &tm)) {
			tm.tm_mday++;
			tm.tm_hour = tm.tm_min = 0;
		} else if (!((c->hours >> tm.tm_hour) & 1)) {
			tm.tm_hour++;
			tm.tm_min = 0;
		} else if (!((c->minutes >> tm.tm_min) & 1)) {
			tm.tm_min++;
		} else {
			return (int64_t)t * 1000;
		}
		t = timegm(&tm);
	}
	return 0;
}

int64_t
cron_prev(const struct cron *c, int64_t at_ms)
{
	time_t t = (time_t)(at_ms / 60000) * 60;
	struct tm tm;
	int i;

	for (i = 0; i < CRON_STEPS && t > 0; i++) {
		gmtime_r(&t, &tm);
		tm.tm_sec = 0;
		if (!((c->months >> (tm.tm_mon + 1)) & 1)) {
			tm.tm_mday = 1;
			tm.tm_hour = tm.tm_min = 0;
		} else if (!day_ok(c, &tm)) {
			tm.tm_hour = tm.tm_min = 0;
		} else if (!((c->hours >> tm.tm_hour) & 1)) {
			tm.tm_min = 0;
		} else if (!((c->minutes >> tm.tm_min) & 1)) {
			/* the minute before */
		} else {
			return (int64_t)t * 1000;
		}
		t = timegm(&tm) - 60; /* the last minute before that start */
	}
	return 0;
}

/* ---- the config section ------------------------------------------------ */

static const char *const schedule_keys[] = {
	"name", "cron", "task", "pipeline", "missed", NULL,
};
static const char *const task_keys[] = {
	"title", "body", "kind", "priority", "area", NULL,
};

static int
node_error(const struct cnode *n, const char *path, const char *msg,
	   struct err *e)
{
	char where[512];

	cnode_where(n, where, sizeof(where));
	return err_set(e, BATON_EINVAL, "%s: %s: %s", where, path, msg);
}

/* A non-empty string at n into *out (NULL n: nothing). */
static int
get_string(const struct cnode *n, const char *path, char **out,
	   struct err *e)
{
	int rc;

	if (!n)
		return 0;
	rc = cnode_expect(n, CNODE_SCALAR, path, e);
	if (rc < 0)
		return rc;
	if (!n->value[0])
		return node_error(n, path, "expected a non-empty string", e);
	free(*out);
	*out = xstrdup(n->value);
	return 0;
}

static int
name_ok(const char *s)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' &&
		    *s != '.')
			return 0;
	return 1;
}

static int
read_one(const struct cnode *n, const char *path, struct schedule *s,
	 struct err *e)
{
	const struct cnode *k, *t;
	struct buf sub = BUF_INIT;
	char why[200];
	char *missed = NULL;
	long prio;
	int rc;

#define SUB(key) (buf_reset(&sub), buf_addf(&sub, "%s.%s", path, key), sub.ptr)
	rc = cnode_expect(n, CNODE_MAP, path, e);
	if (rc >= 0)
		rc = cnode_check_keys(n, path, schedule_keys, e);
	if (rc < 0)
		goto out;
	if (!(k = cnode_get(n, "name"))) {
		rc = node_error(n, path, "a schedule needs a name", e);
		goto out;
	}
	rc = get_string(k, SUB("name"), &s->name, e);
	if (rc >= 0 && !name_ok(s->name))
		rc = node_error(k, SUB("name"), "a name is letters, digits, "
				"'-', '_' and '.'", e);
	if (rc < 0)
		goto out;
	if (!(k = cnode_get(n, "cron"))) {
		rc = node_error(n, path, "a schedule needs a cron expression "
				"(\"0 3 * * *\": 03:00 UTC every day)", e);
		goto out;
	}
	rc = get_string(k, SUB("cron"), &s->cron_text, e);
	if (rc >= 0 && cron_parse(s->cron_text, &s->cron, why, sizeof(why))) {
		struct buf msg = BUF_INIT;

		buf_addf(&msg, "bad cron expression '%s': %s", s->cron_text,
			 why);
		rc = node_error(k, SUB("cron"), msg.ptr, e);
		buf_release(&msg);
	}
	if (rc < 0)
		goto out;
	if (!(t = cnode_get(n, "task"))) {
		rc = node_error(n, path, "a schedule needs a task (its title "
				"at least)", e);
		goto out;
	}
	rc = cnode_expect(t, CNODE_MAP, SUB("task"), e);
	if (rc >= 0)
		rc = cnode_check_keys(t, SUB("task"), task_keys, e);
	if (rc >= 0 && !cnode_get(t, "title"))
		rc = node_error(t, SUB("task"), "a task needs a title", e);
	if (rc >= 0)
		rc = get_string(cnode_get(t, "title"), SUB("task.title"),
				&s->title, e);
	if (rc >= 0)
		rc = get_string(cnode_get(t, "body"), SUB("task.body"),
				&s->body, e);
	if (rc >= 0)
		rc = get_string(cnode_get(t, "kind"), SUB("task.kind"),
				&s->kind, e);
	if (rc >= 0)
		rc = get_string(cnode_get(t, "area"), SUB("task.area"),
				&s->area, e);
	if (rc >= 0 && (k = cnode_get(t, "priority"))) {
		rc = cnode_int(k, SUB("task.priority"), -1000, 1000, &prio, e);
		s->priority = (int)prio;
	}
	if (rc >= 0)
		rc = get_string(cnode_get(n, "pipeline"), SUB("pipeline"),
				&s->pipeline, e);
	if (rc >= 0 && (k = cnode_get(n, "missed"))) {
		rc = get_string(k, SUB("missed"), &missed, e);
		if (rc >= 0 && missed && !strcmp(missed, "catch_up"))
			s->catch_up = 1;
		else if (rc >= 0 && (!missed || strcmp(missed, "skip")))
			rc = node_error(k, SUB("missed"), "expected skip or "
					"catch_up", e);
	}
#undef SUB
out:
	free(missed);
	buf_release(&sub);
	return rc;
}

int
schedules_read(const struct cnode *node, struct schedule **out, size_t *n,
	       struct err *e)
{
	struct schedule *v = NULL;
	char path[48];
	size_t i, j;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!node || (node->type == CNODE_SCALAR &&
		      (!strcmp(node->value, "null") || !strcmp(node->value, "~") ||
		       !node->value[0])))
		return 0;
	rc = cnode_expect(node, CNODE_SEQ, "schedules", e);
	if (rc < 0)
		return rc;
	v = xcalloc(node->nr ? node->nr : 1, sizeof(*v));
	for (i = 0; i < node->nr && rc >= 0; i++) {
		snprintf(path, sizeof(path), "schedules[%zu]", i);
		rc = read_one(node->kids[i], path, &v[i], e);
		for (j = 0; rc >= 0 && j < i; j++)
			if (!strcmp(v[j].name, v[i].name))
				rc = node_error(cnode_get(node->kids[i],
							  "name"),
						path, "another schedule has "
						"this name", e);
	}
	if (rc < 0) {
		schedules_free(v, node->nr);
		return rc;
	}
	*out = v;
	*n = node->nr;
	return 0;
}

void
schedules_free(struct schedule *s, size_t n)
{
	size_t i;

	for (i = 0; s && i < n; i++) {
		free(s[i].name);
		free(s[i].cron_text);
		free(s[i].title);
		free(s[i].body);
		free(s[i].kind);
		free(s[i].area);
		free(s[i].pipeline);
	}
	free(s);
}

char *
schedule_title(const struct schedule *s, int64_t slot_ms)
{
	struct buf b = BUF_INIT;
	const char *p = s->title, *at;
	time_t secs = (time_t)(slot_ms / 1000);
	struct tm tm;
	char when[96];

	gmtime_r(&secs, &tm);
	snprintf(when, sizeof(when), "%04d-%02d-%02d %02d:%02d UTC",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min);
	while ((at = strstr(p, "{slot}"))) {
		buf_add(&b, p, (size_t)(at - p));
		buf_adds(&b, when);
		p = at + 6;
	}
	buf_adds(&b, p);
	return buf_detach(&b, NULL);
}
