/*
 * Rewind: `baton resume RUN --from STAGE` (and POST .../resume with
 * {"from": STAGE}) re-enters a run at an earlier stage of its pipeline.
 *
 *   STAGE           a stage's name or the status it shows ("execute" or
 *                   "executing"); one the pipeline lacks is an error that
 *                   names the stages it has
 *   the worktree    reset to the checkpoint the run had when it first
 *                   entered STAGE (the "checkpoint" notes and the
 *                   transitions of its journal), with baton's own git
 *                   (worktree_reset: no hook, no fsmonitor, untracked
 *                   files and links removed without being followed)
 *   the artifacts   of the stages before STAGE are kept (from executing,
 *                   plan.md and architecture.md are reused and their
 *                   agents not called again); those of STAGE and after
 *                   are removed, so that nothing stale is read
 *
 * A run that is not terminal is rewound in place: it must rest (paused,
 * waiting, interrupted, created, or between stages with no driver); a
 * run whose stage is live under its driver is refused: pause it first.
 * A paused or waiting run whose driver sleeps is moved and the driver
 * woken, as resume does. A terminal run stays as it was: a new run of
 * the same task, pipeline and base is made, its worktree at the
 * checkpoint, the earlier stages' artifacts copied in, and it starts at
 * STAGE. Each rewind is a "rewound" event on the run rewound (and a
 * "rewound_from" event on the new run).
 */
#include "util/compat.h"

#include "core/config.h"
#include "core/kinds.h"
#include "core/pipeline.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* What the journal says of a stage's first entry. */
struct entry_scan {
	const char *status; /* the stage's status */
	char *cur;	    /* the checkpoint so far */
	char *found;	    /* the checkpoint at the first entry; NULL: none */
};

static int
scan_entry(const struct event *ev, void *arg)
{
	struct entry_scan *es = arg;
	json_t *j;
	const char *commit;

	if (es->found)
		return 0;
	if (!strcmp(ev->type, "transition") && ev->to &&
	    !strcmp(ev->to, es->status)) {
		es->found = xstrdup(es->cur ? es->cur : "");
		return 0;
	}
	/* a run made by a rewind starts at the checkpoint it was made at */
	if ((strcmp(ev->type, "checkpoint") &&
	     strcmp(ev->type, "rewound_from")) ||
	    !ev->data)
		return 0;
	j = json_loads(ev->data, 0, NULL);
	commit =
	    j ? json_get_str(j, ev->type[0] == 'c' ? "commit" : "checkpoint")
	      : NULL;
	if (commit && *commit) {
		free(es->cur);
		es->cur = xstrdup(commit);
	}
	json_decref(j);
	return 0;
}

/* "plan (planning), architect (architecting), ..." of p's main stages. */
static void
stage_list(const struct pipeline *p, struct buf *out)
{
	size_t i;

	for (i = 0; i < p->nr_stages; i++)
		buf_addf(out, "%s%s (%s)", i ? ", " : "", p->stages[i].name,
			 p->stages[i].status);
}

const struct stage *
engine_rewind_stage(const struct pipeline *p, const char *from, struct err *e)
{
	const struct stage *s = pipeline_stage_named(p, from);
	struct buf list = BUF_INIT;

	if (!s)
		s = pipeline_stage_at(p, from);
	if (s)
		return s;
	stage_list(p, &list);
	err_set(e, BATON_EINVAL,
		"pipeline '%s' has no stage '%s': its stages are %s", p->name,
		from, list.ptr ? list.ptr : "(none)");
	buf_release(&list);
	return NULL;
}

/* Index of s in p. */
static size_t
index_of(const struct pipeline *p, const struct stage *s)
{
	return (size_t)(s - p->stages);
}

/* 1 when stage t's artifacts stay: t comes before s on the main line. */
static int
keeps(const struct pipeline *p, const struct stage *s, const struct stage *t)
{
	return !t->side && index_of(p, t) < index_of(p, s);
}

/*
 * The artifacts of p's stages into dir_to (when not NULL, from dir_from)
 * for the stages kept, removed from dir_from for the others. Only
 * regular files are read, never through a link.
 */
static int
sort_artifacts(const struct pipeline *p, const struct stage *s,
	       const char *dir_from, const char *dir_to, struct strvec *kept,
	       struct err *e)
{
	size_t i;
	int k, rc = 0;

	for (i = 0; !rc && i < p->nr_stages; i++) {
		const struct stage *t = &p->stages[i];

		for (k = 0; !rc && k < 2; k++) {
			const char *name = kind_info(t->kind)->artifact[k];
			struct buf data = BUF_INIT;
			char *src, *dst;

			if (!name)
				continue;
			src = xasprintf("%s/%s", dir_from, name);
			if (!keeps(p, s, t)) {
				if (!dir_to)
					fs_unlink(src, NULL);
				free(src);
				continue;
			}
			if (dir_to &&
			    fs_read_nofollow(src, &data, BUF_MAX_ARTIFACT,
					     NULL) == 0) {
				dst = xasprintf("%s/%s", dir_to, name);
				rc =
				    fs_write_atomic(dst, data.ptr, data.len, e);
				free(dst);
			}
			if (!rc && fs_exists(src))
				strvec_push(kept, name);
			buf_release(&data);
			free(src);
		}
	}
	return rc;
}

static json_t *
strvec_json(const struct strvec *v)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < v->nr; i++)
		json_array_append_new(a, json_string(v->v[i]));
	return a;
}

/*
 * Moves r (at rest, not terminal) to stage s's status: through paused or
 * interrupted when it has no edge there directly.
 */
static int
move_to(struct engine *en, const struct pipeline *p, struct run *r,
	const struct stage *s, const char *data, struct err *e)
{
	int rc = 0;

	if (strcmp(r->status, ST_PAUSED) && strcmp(r->status, ST_INTERRUPTED)) {
		const char *via = pipeline_stage_at(p, r->status)
				      ? ST_INTERRUPTED
				      : ST_PAUSED;

		if (!strcmp(via, ST_PAUSED))
			run_set(&r->paused_at_status, s->status);
		rc = engine_transition(en, p, r, via, "{\"cause\":\"rewind\"}",
				       e);
	}
	if (!rc)
		rc = engine_transition(en, p, r, s->status, data, e);
	return rc;
}

/* The rewind's event data: where to and from what checkpoint. */
static char *
rewind_data(const struct stage *s, const char *from_status, const char *ckpt,
	    const struct strvec *kept, const char *run)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:o}", "stage", s->name,
			      "status", s->status, "from_status", from_status,
			      "checkpoint", ckpt, "kept", strvec_json(kept));
	char *text;

	if (run)
		json_object_set_new(j, "run", json_string(run));
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return text;
}

/* In place: r is not terminal and rests. */
static int
rewind_in_place(struct engine *en, const struct pipeline *p, struct run *r,
		const struct stage *s, const char *ckpt,
		struct rewind_outcome *o, struct err *e)
{
	struct strvec kept = STRVEC_INIT;
	char *dir = workspace_run_dir(en->ws, r->id), *data, *from;
	int64_t pid = engine_driver_pid(en, r->id);
	int rc;

	if (pid > 0 && strcmp(r->status, ST_PAUSED) &&
	    strcmp(r->status, ST_WAITING)) {
		rc = err_set(e, BATON_EBUSY,
			     "cannot rewind run '%s': it is %s under its "
			     "driver (pid %lld); pause it first (baton pause "
			     "%s) and rewind it once it is paused",
			     r->id, r->status, (long long)pid, r->id);
		goto out;
	}
	if (r->worktree && *ckpt) {
		rc = worktree_reset(en->ws, r->worktree, ckpt, e);
		if (rc) {
			err_prefix(e, "cannot rewind run '%s'", r->id);
			goto out;
		}
		run_set(&r->checkpoint, ckpt);
	}
	rc = sort_artifacts(p, s, dir, NULL, &kept, e);
	if (rc)
		goto out;
	from = xstrdup(r->status);
	data = rewind_data(s, from, ckpt, &kept, NULL);
	rc = engine__add_event(en, r->id, r->task_id, "rewound", data, e);
	r->review_loops = 0;
	r->attempt = 0;
	run_set(&r->reason, NULL);
	if (!rc)
		rc = move_to(en, p, r, s, data, e);
	free(data);
	free(from);
	if (!rc && pid > 0)
		engine__wake(en, r->id);
	o->drive = !rc && pid <= 0;
out:
	strvec_clear(&kept);
	free(dir);
	return rc;
}

/* A terminal run old: a new run of its task, at s, from ckpt. */
static int
rewind_anew(struct engine *en, const struct pipeline *p, const struct run *old,
	    const struct stage *s, const char *ckpt, struct rewind_outcome *o,
	    struct err *e)
{
	struct run_spec spec = { 0 };
	struct strvec kept = STRVEC_INIT;
	char *path = NULL, *branch = NULL, *base = NULL, *data = NULL;
	char *dir_old = workspace_run_dir(en->ws, old->id), *dir_new = NULL;
	struct run *r = &o->run;
	int rc, port = 0;

	spec.task = old->task;
	spec.task_id = old->task_id; /* a new run of its task */
	spec.pipeline = old->pipeline;
	spec.base_ref = old->base_commit ? old->base_commit : old->base_ref;
	rc = engine_create_spec(en, &spec, r, e);
	if (rc) {
		err_prefix(e, "cannot rewind '%s' into a new run", old->id);
		goto out;
	}
	dir_new = workspace_run_dir(en->ws, r->id);
	rc = fs_mkdir_p(dir_new, 0755, e);
	if (!rc && !p->no_git) {
		rc = worktree_create(en->ws, r->id, spec.base_ref, &path,
				     &branch, &base, e);
		if (!rc)
			rc = workspace_port(en->ws, r->id, &port, e);
		if (!rc && *ckpt)
			rc = worktree_reset(en->ws, path, ckpt, e);
		if (!rc) {
			run_set(&r->worktree, path);
			run_set(&r->branch, branch);
			run_set(&r->base_commit, base);
			run_set(&r->checkpoint, *ckpt ? ckpt : base);
			rc = engine__record(en, r, "worktree",
					    json_pack("{s:s, s:s, s:s, s:i}",
						      "path", path, "branch",
						      branch, "base", base,
						      "port", port),
					    e);
		}
	}
	if (!rc)
		rc = sort_artifacts(p, s, dir_old, dir_new, &kept, e);
	if (rc) {
		err_prefix(e,
			   "cannot rewind '%s' into %s (abort it with: "
			   "baton abort %s)",
			   old->id, r->id, r->id);
		goto out;
	}
	data = rewind_data(s, old->status, ckpt, &kept, r->id);
	rc = engine__add_event(en, old->id, old->task_id, "rewound", data, e);
	free(data);
	data = rewind_data(s, old->status, ckpt, &kept, old->id);
	if (!rc)
		rc = engine__add_event(en, r->id, 0, "rewound_from", data, e);
	if (!rc)
		rc = move_to(en, p, r, s, data, e);
	o->drive = !rc;
out:
	free(data);
	free(path);
	free(branch);
	free(base);
	free(dir_old);
	free(dir_new);
	strvec_clear(&kept);
	return rc;
}

int
engine_rewind(struct engine *en, const char *ref, const char *from,
	      struct rewind_outcome *o, struct err *e)
{
	struct entry_scan es = { 0 };
	struct pipeline *p = NULL;
	struct config *own = NULL;
	const struct stage *s;
	struct run r = { 0 };
	int rc;

	memset(o, 0, sizeof(*o));
	rc = store_run_get(en->store, ref, &r, e);
	if (rc)
		goto out;
	rc = engine__run_config(en, &r, &own, e);
	if (!rc)
		rc = pipeline_load(own ? own->pipelines : en->cfg->pipelines,
				   r.pipeline, &p, e);
	if (rc)
		goto out;
	s = engine_rewind_stage(p, from, e);
	if (!s) {
		rc = BATON_EINVAL;
		goto out;
	}
	if (s->side) {
		rc = err_set(e, BATON_EINVAL,
			     "cannot rewind to stage '%s': it is a side stage, "
			     "entered only from another one",
			     s->name);
		goto out;
	}
	es.status = s->status;
	es.cur = r.base_commit ? xstrdup(r.base_commit) : NULL;
	rc = store_event_list(en->store, r.id, 0, NULL, scan_entry, &es, e);
	if (rc)
		goto out;
	if (!es.found) {
		rc = err_set(e, BATON_EBADSTATE,
			     "cannot rewind run '%s' to stage '%s': it never "
			     "reached it",
			     r.id, s->name);
		goto out;
	}
	o->checkpoint = xstrdup(es.found);
	if (status_is_terminal(r.status)) {
		o->anew = 1;
		o->from = xstrdup(r.id);
		rc = rewind_anew(en, p, &r, s, es.found, o, e);
	} else {
		rc = rewind_in_place(en, p, &r, s, es.found, o, e);
		if (!rc) {
			o->run = r;
			memset(&r, 0, sizeof(r));
		}
	}
	if (!rc)
		o->stage = xstrdup(s->name);
out:
	free(es.cur);
	free(es.found);
	run_release(&r);
	pipeline_free(p);
	config_release(own);
	free(own);
	return rc;
}

void
rewind_outcome_release(struct rewind_outcome *o)
{
	run_release(&o->run);
	free(o->stage);
	free(o->checkpoint);
	free(o->from);
	memset(o, 0, sizeof(*o));
}
