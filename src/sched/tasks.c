/*
 * Tasks: adding them, naming them, and the small rules every writer of a
 * task follows (the lease fields go with the running status; a change
 * is written with its event and wakes serve).
 */
#include "util/compat.h"

#include <ctype.h>
#include <stdlib.h>

#include <jansson.h>

#include "core/config.h"
#include "core/run.h"
#include "sched/sched.h"
#include "sched/sched_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"

int
sched_task_add(struct sched_ctx *x, struct task *t, struct err *e)
{
	struct event ev = { 0 };
	json_t *data, *deps;
	size_t i;
	int rc;

	if (!t->title || !*t->title)
		return err_set(e, BATON_EINVAL, "a task needs a title");
	if (!t->status)
		t->status = xstrdup(TASK_QUEUED);
	if (!t->max_attempts)
		t->max_attempts = x->cfg->runtime.max_attempts;
	deps = json_array();
	for (i = 0; i < t->nr_deps; i++)
		json_array_append_new(deps, json_integer(t->deps[i]));
	data = json_pack("{s:s, s:s?, s:i, s:o, s:s?}", "title", t->title,
			 "area", t->area, "priority", t->priority, "depends_on",
			 deps, "origin", t->origin);
	ev.type = (char *)"task_added";
	ev.data = json_dumps(data, JSON_COMPACT);
	json_decref(data);
	rc = store_task_add(x->store, t, &ev, e);
	free(ev.data);
	if (!rc)
		sched_wake(x->ws);
	return rc;
}

int64_t
sched_task_ref(const char *ref)
{
	char *end;
	long long id;

	if (!ref)
		return 0;
	if (*ref == 't')
		ref++;
	if (!isdigit((unsigned char)*ref))
		return 0;
	errno = 0;
	id = strtoll(ref, &end, 10);
	return *end || errno || id <= 0 ? 0 : (int64_t)id;
}

char *
sched__task_text(const struct task *t)
{
	if (t->body && *t->body)
		return xasprintf("%s\n\n%s", t->title, t->body);
	return xstrdup(t->title);
}

/* Skips a run of characters of class cls; returns where it stopped. */
static const char *
skip(const char *p, int (*cls)(int))
{
	while (*p && cls((unsigned char)*p))
		p++;
	return p;
}

void
sched__failure_sig(const char *reason, char out[17])
{
	uint64_t h = 0xcbf29ce484222325ULL;
	const char *p = reason ? reason : "";

	while (*p) {
		unsigned char c = (unsigned char)*p;

		if (isxdigit(c) && (isdigit(c) || skip(p, isxdigit) - p >= 7)) {
			/* a number or a hash: the same failure either way */
			p = skip(p, isxdigit);
			c = '#';
		} else if (c == '\'' || c == '"') {
			const char *q = strchr(p + 1, c);

			/* quoted names (files, runs) vary between tries */
			p = q ? q + 1 : p + 1;
			c = 'q';
		} else {
			p++;
			c = (unsigned char)tolower(c);
		}
		h ^= c;
		h *= 0x100000001b3ULL;
	}
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

void
sched__drop_lease(struct task *t)
{
	free(t->lease_holder);
	t->lease_holder = NULL;
	t->lease_token = 0;
	t->lease_expires_at = 0;
}

int
sched_task_write(struct sched_ctx *x, struct task *t, const char *type,
		  const char *data, struct err *e)
{
	struct event ev = { 0 };
	int rc;

	ev.type = (char *)type;
	ev.data = (char *)data;
	rc = store_task_update(x->store, t, &ev, e);
	if (!rc)
		sched_wake(x->ws);
	return rc;
}
