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
#include "core/pipeline.h"
#include "core/run.h"
#include "engine/engine.h"
#include "sched/sched.h"
#include "sched/sched_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

int
sched_task_add(struct sched_ctx *x, struct task *t, struct err *e)
{
	return sched_task_add_by(x, t, NULL, e);
}

/* A task's allowed paths (JSON text of a list), each held to
 * config_allow_check. */
static int
allow_check(const char *json, struct err *e)
{
	struct strvec globs = STRVEC_INIT;
	const char *why = NULL;
	size_t i;
	int rc = 0;

	json_text_strings(json, &globs);
	for (i = 0; i < globs.nr && !why; i++)
		why = config_allow_check(globs.v[i]);
	if (why)
		rc = err_set(e, BATON_EINVAL, "allowed path '%s': %s",
			     globs.v[i - 1], why);
	strvec_clear(&globs);
	return rc;
}

int
sched_task_add_keyed(struct sched_ctx *x, struct task *t, const char *actor,
		     struct store_key *k, struct err *e)
{
	struct event ev = { 0 };
	json_t *data, *deps;
	char *text, *area = NULL;
	size_t i;
	int rc;

	if (str_blank(t->title))
		return err_set(e, BATON_EINVAL, "a task needs a title");
	if (t->allowed_paths && (rc = allow_check(t->allowed_paths, e)))
		return rc;
	text = sched__task_text(t);
	rc = run_task_text_fits(strlen(text), e);
	free(text);
	if (rc)
		return rc;
	rc = sched_task_area(t->area, "area", &area, e);
	if (rc)
		return rc;
	free(t->area);
	t->area = area;
	if (!t->status)
		t->status = xstrdup(TASK_QUEUED);
	if (!t->max_attempts)
		t->max_attempts = x->cfg->runtime.max_attempts;
	deps = json_array();
	for (i = 0; i < t->nr_deps; i++)
		json_array_append_new(deps, json_integer(t->deps[i]));
	data = json_pack("{s:o, s:o, s:i, s:o, s:s?}", "title",
			 json_lossy_str(t->title), "area",
			 json_lossy_str(t->area), "priority", t->priority,
			 "depends_on", deps, "origin", t->origin);
	if (actor)
		json_object_set_new(data, "actor", json_string(actor));
	ev.type = (char *)"task_added";
	ev.data = json_dumps(data, JSON_COMPACT);
	json_decref(data);
	if (k)
		rc = store_task_add_keyed(x->store, t, &ev, k, e);
	else if (!(rc = store_task_add(x->store, t, &ev, e)))
		rc = 1;
	free(ev.data);
	if (rc == 1)
		sched_wake(x->ws);
	return rc;
}

int
sched_task_add_by(struct sched_ctx *x, struct task *t, const char *actor,
		  struct err *e)
{
	int rc = sched_task_add_keyed(x, t, actor, NULL, e);

	return rc < 0 ? rc : 0;
}

int
sched_task_area(const char *raw, const char *what, char **out, struct err *e)
{
	struct buf b = BUF_INIT;
	const char *p, *seg;
	size_t len;

	*out = NULL;
	if (!raw)
		return 0;
	if (raw[0] == '/')
		goto bad;
	for (p = raw; *p; p += strcspn(p, "/")) {
		p += strspn(p, "/");
		seg = p;
		len = strcspn(seg, "/");
		if (!len || (len == 1 && seg[0] == '.'))
			continue;
		if (len == 2 && !strncmp(seg, "..", 2))
			goto bad;
		buf_addf(&b, "%s%.*s", b.len ? "/" : "", (int)len, seg);
	}
	if (b.len)
		*out = buf_detach(&b, NULL);
	return 0;
bad:
	buf_release(&b);
	return err_set(e, BATON_EINVAL,
		       "%s '%s' must be a path inside the repository "
		       "(relative, without '..')",
		       what, raw);
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

#define FIT_TITLE_MAX 1024

void
sched__task_fit(struct task *t)
{
	static const char note[] = "\n\n[... %zu bytes cut here: a task's "
				   "text is at most %d KiB ...]\n\n";
	size_t title = strlen(t->title), body, room, head, tail, gap;
	struct buf b = BUF_INIT;

	if (title > FIT_TITLE_MAX) {
		title = utf8_cut(t->title, title, FIT_TITLE_MAX);
		t->title[title] = '\0';
	}
	body = t->body ? strlen(t->body) : 0;
	if (!body || title + 2 + body <= TASK_TEXT_MAX)
		return;
	/* room for the body: the limit less title, blank line and note
	 * (with its numbers), and the 3 bytes the tail's cut may move */
	room = TASK_TEXT_MAX - title - 2 - (sizeof(note) + 32);
	head = utf8_cut(t->body, body, room / 2);
	/* the tail starts on a whole character: utf8_cut moves back */
	tail = body - utf8_cut(t->body, body, body - (room - head));
	gap = body - head - tail;
	buf_add(&b, t->body, head);
	buf_addf(&b, note, gap, TASK_TEXT_MAX / 1024);
	buf_add(&b, t->body + body - tail, tail);
	free(t->body);
	t->body = buf_detach(&b, NULL);
}

void
sched_task_fit(struct task *t)
{
	sched__task_fit(t);
}

void
sched_task_rework_of(struct task *w, const struct task *t,
		     const char *base_ref)
{
	w->kind = xstrdup(t->kind);
	w->pipeline = t->pipeline ? xstrdup(t->pipeline) : NULL;
	w->priority = t->priority;
	w->area = t->area ? xstrdup(t->area) : NULL;
	w->allowed_paths = t->allowed_paths ? xstrdup(t->allowed_paths) : NULL;
	w->verify = t->verify ? xstrdup(t->verify) : NULL;
	w->base_ref = xstrdup(base_ref);
	w->origin = xstrdup("rework");
	w->parent_id = t->id;
	w->depth = t->depth + 1;
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

/* The ids of the runs a task has had, from its events. */
static int
collect_run(const struct event *ev, void *arg)
{
	json_t *runs = arg, *d;

	if (strcmp(ev->type, "task_run") || !ev->data)
		return 0;
	d = json_loads(ev->data, 0, NULL);
	if (d && json_is_string(json_object_get(d, "run")))
		json_array_append(runs, json_object_get(d, "run"));
	json_decref(d);
	return 0;
}

static json_t *
json_or_null(const char *text)
{
	json_t *v = text ? json_loads(text, 0, NULL) : NULL;

	return v ? v : json_null();
}

static json_t *
str_or_null(const char *s)
{
	return s ? json_lossy_str(s) : json_null();
}

/* {"actor": by} as an event's data: who asked, when a person did
 * through a named token; NULL when nobody is named. */
static char *
actor_data(const char *by)
{
	return by ? json_take_text(json_pack("{s:s}", "actor", by)) : NULL;
}

/*
 * The task's place on the forge (docs/api.md): its issue and pull
 * request, the PR's state, checks and review as the last sync saw them,
 * and the fix rounds they caused; null for a task with no link (or when
 * the link cannot be read: the task is still shown).
 */
static json_t *
forge_json(struct store *s, int64_t task_id)
{
	struct err ignored = ERR_INIT;
	struct forge_link l;
	json_t *o;

	if (store_forge_link_get(s, task_id, &l, &ignored))
		return json_null();
	o = json_object();
	json_object_set_new(o, "repo", str_or_null(l.repo));
	json_object_set_new(o, "issue", l.issue_number ?
					json_integer(l.issue_number) :
					json_null());
	json_object_set_new(o, "issue_url", str_or_null(l.issue_url));
	json_object_set_new(o, "pr", l.pr_number ? json_integer(l.pr_number) :
						   json_null());
	json_object_set_new(o, "pr_url", str_or_null(l.pr_url));
	json_object_set_new(o, "pr_state", str_or_null(l.pr_state));
	json_object_set_new(o, "checks", str_or_null(l.checks));
	json_object_set_new(o, "review", str_or_null(l.review));
	json_object_set_new(o, "rounds", json_integer(l.reaction_rounds));
	forge_link_release(&l);
	return o;
}

json_t *
sched_task_json(struct store *s, const struct task *t, int with_runs)
{
	struct err ignored = ERR_INIT;
	json_t *o = json_object(), *deps = json_array();
	size_t i;

	for (i = 0; i < t->nr_deps; i++)
		json_array_append_new(deps, json_integer(t->deps[i]));
	if (with_runs) {
		json_t *runs = json_array();

		store_task_events(s, t->id, 0, collect_run, runs, &ignored);
		json_object_set_new(o, "runs", runs);
		}
	json_object_set_new(o, "id", json_integer(t->id));
	json_object_set_new(o, "title", json_lossy_str(t->title));
	json_object_set_new(o, "body", t->body ? json_lossy_str(t->body) :
						 json_null());
	json_object_set_new(o, "pipeline",
			    t->pipeline ? json_string(t->pipeline) :
					  json_null());
	json_object_set_new(o, "status", json_string(t->status));
	json_object_set_new(o, "block_reason",
			    t->block_reason ? json_string(t->block_reason) :
					      json_null());
	json_object_set_new(o, "reason",
			    t->reason ? json_string(t->reason) : json_null());
	json_object_set_new(o, "priority", json_integer(t->priority));
	json_object_set_new(o, "area",
			    t->area ? json_string(t->area) : json_null());
	json_object_set_new(o, "depends_on", deps);
	json_object_set_new(o, "allowed_paths", json_or_null(t->allowed_paths));
	json_object_set_new(o, "verify", json_or_null(t->verify));
	json_object_set_new(o, "origin", json_string(t->origin));
	json_object_set_new(o, "parent",
			    t->parent_id ? json_integer(t->parent_id) :
					   json_null());
	json_object_set_new(o, "depth", json_integer(t->depth));
	json_object_set_new(o, "attempts", json_integer(t->attempts));
	json_object_set_new(o, "max_attempts", json_integer(t->max_attempts));
	json_object_set_new(o, "run",
			    t->run_id ? json_string(t->run_id) : json_null());
	json_object_set_new(o, "lease_holder",
			    t->lease_holder ? json_string(t->lease_holder) :
					      json_null());
	json_object_set_new(o, "judgement_version",
			    json_integer(t->judgement_version));
	json_object_set_new(o, "created_at", json_integer(t->created_at));
	json_object_set_new(o, "updated_at", json_integer(t->updated_at));
	json_object_set_new(o, "ended_at", json_integer(t->ended_at));
	json_object_set_new(o, "forge", forge_json(s, t->id));
	return o;
}

int
sched_task_cancel(struct sched_ctx *x, struct engine *en, int64_t id,
		  struct task *out, struct err *e)
{
	struct task t = { 0 };
	struct run r = { 0 };
	char *data = NULL;
	int rc = store_task_get(x->store, id, &t, e);

	if (rc)
		goto out;
	if (!strcmp(t.status, TASK_DONE) || !strcmp(t.status, TASK_FAILED) ||
	    !strcmp(t.status, TASK_CANCELLED)) {
		rc = err_set(e, BATON_EBADSTATE, "t%lld is %s already",
			     (long long)t.id, t.status);
		goto out;
	}
	if (!strcmp(t.status, TASK_RUNNING) && t.run_id) {
		/* its worker settles it cancelled when the run ends */
		rc = engine_abort(en, t.run_id, &r, e);
		goto out;
	}
	run_set(&t.status, TASK_CANCELLED);
	run_set(&t.block_reason, NULL);
	run_set(&t.reason, "cancelled on request");
	t.ended_at = time_now_ms();
	if (t.run_id && !store_run_get(x->store, t.run_id, &r, e) &&
	    !status_is_terminal(r.status)) {
		rc = engine_abort(en, t.run_id, &r, e);
		if (rc)
			goto out;
	}
	*e = (struct err)ERR_INIT;
	data = actor_data(en->actor);
	rc = sched_task_write(x, &t, "task_cancelled", data, e);
out:
	if (!rc && out)
		task_copy(out, &t);
	free(data);
	run_release(&r);
	task_release(&t);
	return rc;
}

int
sched_task_retry(struct sched_ctx *x, int64_t id, const char *by,
		 struct task *out, struct err *e)
{
	struct task t = { 0 };
	struct run r = { 0 };
	char *data = NULL;
	int rc = store_task_get(x->store, id, &t, e);

	if (rc)
		goto out;
	if (!strcmp(t.status, TASK_RUNNING) || !strcmp(t.status, TASK_QUEUED) ||
	    !strcmp(t.status, TASK_DONE)) {
		rc = err_set(e, BATON_EBADSTATE,
			     "t%lld is %s: only a failed, cancelled or blocked "
			     "task can be retried",
			     (long long)t.id, t.status);
		goto out;
	}
	/* a run that ended is not taken up again (the claim would settle
	 * the task from it at once): the retry makes a new one; a blocked
	 * run resumes */
	if (t.run_id && (store_run_get(x->store, t.run_id, &r, e) ||
			 status_is_terminal(r.status)))
		run_set(&t.run_id, NULL);
	*e = (struct err)ERR_INIT;
	run_set(&t.status, TASK_QUEUED);
	run_set(&t.block_reason, NULL);
	run_set(&t.reason, "retried on request");
	t.attempts = 0;
	t.failure_count = 0;
	t.not_before = 0;
	t.ended_at = 0;
	data = actor_data(by);
	rc = sched_task_write(x, &t, "task_retried", data, e);
out:
	if (!rc && out)
		task_copy(out, &t);
	free(data);
	run_release(&r);
	task_release(&t);
	return rc;
}

int
sched_task_rerun(void *arg, const struct run *old, const struct run *fresh,
		 struct err *e)
{
	struct sched_rerun *rr = arg;
	struct task t = { 0 };
	char *data = NULL;
	int rc = store_task_get(rr->x->store, fresh->task_id, &t, e);

	if (rc)
		goto out;
	if (!t.run_id || strcmp(t.run_id, old->id)) {
		rc = err_set(e, BATON_ECONFLICT,
			     "t%lld has gone on to run '%s' meanwhile",
			     (long long)t.id, t.run_id ? t.run_id : "(none)");
		goto out;
	}
	sched__drop_lease(&t);
	run_set(&t.run_id, fresh->id);
	free(t.reason);
	if (rr->queue) {
		run_set(&t.status, TASK_QUEUED);
		run_set(&t.block_reason, NULL);
		t.not_before = 0;
		t.reason = xasprintf("its run %s was started afresh as %s "
				     "under the changed config",
				     old->id, fresh->id);
	} else {
		run_set(&t.status, TASK_BLOCKED);
		run_set(&t.block_reason, BLOCK_PAUSED);
		t.reason = xasprintf("its run %s was started afresh as %s, "
				     "which baton resume drives",
				     old->id, fresh->id);
	}
	data = json_take_text(json_pack("{s:s, s:s}", "run", fresh->id,
					"fresh_of", old->id));
	rc = sched_task_write(rr->x, &t, "task_run", data, e);
out:
	free(data);
	task_release(&t);
	return rc;
}

int
sched_task_rewound(struct sched_rerun *rr, const char *old_id,
		   const struct run *fresh, struct err *e)
{
	struct run old = { .id = (char *)old_id };
	struct task t = { 0 };
	int rc = store_task_get(rr->x->store, fresh->task_id, &t, e);

	if (!rc && !strcmp(t.status, TASK_DONE))
		rc = 1;
	task_release(&t);
	return rc ? rc : sched_task_rerun(rr, &old, fresh, e);
}
