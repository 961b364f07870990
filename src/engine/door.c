/*
 * The transition door: the one way a run's status changes. Every move is
 * checked against the pipeline's table (core/pipeline.h), written with
 * its event in one versioned, fenced store write, and mirrored to the
 * run folder's events.jsonl. engine__note is the same write without a
 * move; engine__add_event an event that is no run write at all.
 */
#include "util/compat.h"

#include "core/config.h"
#include "core/pipeline.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"
#include "util/redact.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/*
 * Keeps in r's progress what the run's JSON shows beside its status: the
 * seed's name for it (the pipeline's states:), and what the pipeline's
 * type keeps there (a loop's phase). s is the stage r enters, or NULL.
 */
static void
stamp_state(const struct pipeline *p, struct run *r, const struct stage *s)
{
	const char *state = pipeline_state(p, r->status);
	const struct type_ops *type = type_ops_for(p);
	json_t *prog;

	if (!state && !type->stamp)
		return;
	prog = r->progress ? json_loads(r->progress, 0, NULL) : NULL;
	if (!json_is_object(prog)) {
		json_decref(prog);
		prog = json_object();
	}
	if (state)
		json_object_set_new(prog, "state", json_string(state));
	if (type->stamp)
		type->stamp(prog, s, status_is_terminal(r->status));
	free(r->progress);
	r->progress = json_dumps(prog, JSON_COMPACT);
	json_decref(prog);
}

int
engine_transition(struct engine *en, const struct pipeline *p, struct run *r,
		  const char *to, const char *data, struct err *e)
{
	struct event ev = { 0 };
	struct run next;
	struct run_move mv;
	const struct stage *s;
	int64_t now = time_now_ms();
	int rc;

	if (status_is_terminal(r->status))
		return err_set(e, BATON_EBADSTATE,
			       "run '%s' is %s, which is terminal: it cannot "
			       "move to '%s'",
			       r->id, r->status, to);
	rc = pipeline_check(p, r->status, to, e);
	if (rc) {
		err_prefix(e, "run '%s'", r->id);
		return rc;
	}
	run_copy(&next, r);
	run_set(&next.status, to);
	next.phase_started_at = now;
	if (!next.started_at && strcmp(to, ST_CREATED))
		next.started_at = now;
	if ((s = pipeline_stage_at(p, to))) {
		run_set(&next.phase, RUN_PHASE_PENDING);
		run_set(&next.stage, s->name);
		next.agent_pid = 0;
		if (strcmp(r->status, ST_INTERRUPTED))
			next.attempt = 0;
	} else {
		run_set(&next.phase, RUN_PHASE_DONE);
	}
	if (status_is_terminal(to)) {
		next.ended_at = now;
		next.agent_pid = 0;
		if (!next.outcome)
			run_set(&next.outcome, !strcmp(to, ST_MERGE_READY) ||
							       !strcmp(to, ST_COMPLETED) ?
						       RUN_OUTCOME_COMPLETED :
						       to);
	}
	stamp_state(p, &next, s);
	if (strcmp(to, ST_PAUSED))
		run_set(&next.paused_at_status, NULL);
	if (strcmp(to, ST_WAITING) && !engine_gate_deferred(&next)) {
		run_set(&next.gate_status, NULL);
		run_set(&next.gate_back, NULL);
	}
	ev.type = (char *)"transition";
	ev.from = r->status;
	ev.to = (char *)to;
	ev.data = engine__stamp(en, data);
	/* the door: the store writes a new status only with the move */
	mv = (struct run_move){ p, r->status, to };
	rc = store_run_move(en->store, &next, &mv, &ev, e);
	free(ev.data);
	if (rc) {
		run_release(&next);
		return rc;
	}
	run_release(r);
	*r = next;
	/* A pause asked for too late to take effect dies with the run, and
	 * one the run went to some other way (deferred at a gate) is done.
	 * The flag is not versioned, so our copy may not show it: clear it. */
	if ((status_is_terminal(to) || !strcmp(to, ST_PAUSED)) &&
	    !store_run_request(en->store, r->id, "pause_requested", 0, NULL,
			       NULL))
		r->pause_requested = 0;
	engine_mirror_events(en, r->id, NULL);
	engine__tell(en, ENGINE_NOTE_TRANSITION, r);
	return 0;
}

int
engine_gate_deferred(const struct run *r)
{
	return !strcmp(r->status, ST_PAUSED) && r->paused_at_status &&
	       !strcmp(r->paused_at_status, ST_WAITING);
}

char *
engine__stamp(const struct engine *en, const char *data)
{
	json_t *j;
	char *out;

	if (!en->actor)
		return data ? xstrdup(data) : NULL;
	j = data ? json_loads(data, 0, NULL) : json_object();
	if (!json_is_object(j)) {
		json_decref(j);
		return xstrdup(data);
	}
	json_object_set_new(j, "actor", json_string(en->actor));
	out = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return out;
}

/* An event's data as text, with secrets redacted; NULL for none. */
char *
engine__event_text(const json_t *data)
{
	struct buf clean = BUF_INIT;
	char *text;

	if (!data)
		return NULL;
	text = json_dumps(data, JSON_COMPACT);
	buf_adds(&clean, text);
	free(text);
	redact_buf(&clean);
	return buf_detach(&clean, NULL);
}

/*
 * The driver's moves, with the run reports that go with them (report.c):
 * the final one (after the run's memory entry, memory.c) just before a
 * move to a terminal status, so that the
 * terminal transition stays the run's last event; a milestone one just
 * after a move out of a stage that ended (not interrupted).
 */
int
engine__move(struct drive *d, const char *to, json_t *data, struct err *e)
{
	char *text = engine__event_text(data);
	int stage_ended, rc;

	stage_ended = pipeline_stage_at(d->p, d->r.status) &&
		      strcmp(to, ST_INTERRUPTED);
	if (status_is_terminal(to) &&
	    !pipeline_check(d->p, d->r.status, to, NULL)) {
		/* the final report stays the event just before the end */
		engine__memory_record(d, to, text);
		engine__report_final(d->en, d->p, &d->r, to, text);
		engine__terminal_hooks(d, to);
	}
	/* what a stage without a checkpoint wrote (a plan, a review) goes
	 * to the shared remote with the checkpoint it rests on */
	if (stage_ended && !status_is_terminal(to))
		engine__ckpt_push(d, d->r.checkpoint);
	rc = engine_transition(d->en, d->p, &d->r, to, text, e);
	if (!rc)
		engine__report_moved(d->en, d->p, &d->r, stage_ended);
	if (!rc && status_is_terminal(to))
		engine__ckpt_forget(d); /* an ended run is not taken over */
	d->report_ms = 0; /* a report may have been made: read it anew */
	free(text);
	json_decref(data);
	return rc;
}

int
engine__record(struct engine *en, struct run *r, const char *type,
	       json_t *data, struct err *e)
{
	struct event ev = { 0 };
	char *text;
	int rc;

	ev.type = (char *)type;
	text = engine__event_text(data);
	ev.data = engine__stamp(en, text);
	free(text);
	rc = store_run_update(en->store, r, &ev, e);
	free(ev.data);
	json_decref(data);
	if (!rc)
		engine_mirror_events(en, r->id, NULL);
	return rc;
}

int
engine__note(struct drive *d, const char *type, json_t *data, struct err *e)
{
	char *text;
	int rc;

	if (!d->member)
		return engine__record(d->en, &d->r, type, data, e);
	/* a parallel member: the parent owns the run row */
	text = engine__event_text(data);
	rc = engine__add_event(d->en, d->r.id, d->r.task_id, type, text,
			       e);
	free(text);
	json_decref(data);
	return rc;
}

int
engine__add_event(struct engine *en, const char *run_id, int64_t task_id,
		  const char *type, const char *data, struct err *e)
{
	struct event ev = { 0 };
	int rc;

	ev.run_id = (char *)run_id;
	ev.task_id = task_id;
	ev.type = (char *)type;
	ev.data = engine__stamp(en, data);
	rc = store_event_add(en->store, &ev, e);
	free(ev.data);
	if (!rc)
		engine_mirror_events(en, run_id, NULL);
	return rc;
}

int
engine__reload(struct drive *d, struct err *e)
{
	struct run fresh = { 0 };
	int rc = store_run_get(d->en->store, d->r.id, &fresh, e);

	if (rc)
		return rc;
	run_release(&d->r);
	d->r = fresh;
	return 0;
}

/* Records why the run ends (reason may be NULL), then moves it to `to`. */
int
engine__move_why(struct drive *d, const char *to, const char *reason,
		 struct err *e)
{
	struct buf clean = BUF_INIT;
	int rc;

	if (reason) {
		buf_adds(&clean, reason);
		redact_buf(&clean);
		reason = clean.ptr;
	}
	run_set(&d->r.reason, reason);
	rc = engine__move(d, to,
			  reason ? json_pack("{s:s}", "reason", reason) : NULL,
			  e);
	buf_release(&clean);
	return rc;
}
