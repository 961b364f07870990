/*
 * Routing: where a finished stage's result takes the run. The next
 * stage, its resting status or the terminal on a pass; the stage's loop
 * edge on a loop, spending a round of the run's budget; blocked or failed
 * with the reason. Crossing a boundary into a stage meets its gate, a
 * pause request or a spent budget first. What differs by kind comes from
 * the kind table and the kind's stage_ops (kinds/kind.h); nothing here
 * names a family or a kind.
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

/* Pauses the run at stage s because a budget line is crossed (why). */
static int
budget_pause(struct drive *d, const struct stage *s, const char *why,
	     struct err *e)
{
	run_set(&d->r.paused_at_status, s->status);
	run_set(&d->r.reason, why);
	d->leave = 1;
	return engine__move(d, ST_PAUSED,
			    json_pack("{s:s, s:s, s:s}", "resume_to", s->status,
				      "cause", "budget", "reason", why),
			    e);
}

int
engine__stage_pause(struct drive *d, const struct stage *s,
		    const struct stage *at, enum stage_result *res, int *rc,
		    struct err *e)
{
	char *why = engine__stage_budget(d->p, s, &d->r);

	if (!why)
		return 0;
	*rc = budget_pause(d, at, why, e);
	*res = STAGE_STOPPED;
	free(why);
	return 1;
}

/*
 * Requests (pause, abort) are written without bumping the run's version,
 * so read them fresh at each boundary.
 */
static int
refresh_requests(struct drive *d, struct err *e)
{
	struct run fresh = { 0 };
	int rc = store_run_get(d->en->store, d->r.id, &fresh, e);

	if (rc)
		return rc;
	d->r.pause_requested = fresh.pause_requested;
	d->r.abort_requested = fresh.abort_requested;
	run_release(&fresh);
	return 0;
}

/*
 * Whether a person approves before stage x starts: its gate: key, the
 * config's require_approval_at_stages, or the assist pipeline's gate. A
 * parallel group starts as one, so entering it at its first member asks
 * for the gate of any member; a member re-reviewed alone asks for its own.
 */
static int
gated(const struct drive *d, const struct stage *x)
{
	const struct config *cfg = d->en->cfg;
	size_t at = (size_t)(x - d->p->stages), n = 1, first, i;

	const struct type_ops *type = type_ops_for(d->p);

	if (type->gate && type->gate(d->en, d->p, &d->r, x))
		return 1;
	if (x->group) {
		size_t members = pipeline_group(d->p, x->group, &first);

		if (first == at)
			n = members; /* the group starts */
	}
	for (i = at; i < at + n; i++) {
		const struct stage *m = &d->p->stages[i];

		if (m->gate || config_requires_approval(cfg, m->status, m->name))
			return 1;
	}
	return 0;
}

/*
 * Crosses the boundary from the current status into stage x: a gate,
 * a pause, or the stage itself. back is the stage that just ended (what a
 * gate's request-changes would re-run); loop marks entry into the fix
 * loop, which spends one round of the review budget.
 */
int
engine__cross(struct drive *d, const struct stage *x, const struct stage *back,
	      int loop, struct err *e)
{
	int rc;

	rc = refresh_requests(d, e);
	if (rc)
		return rc;
	if (d->r.abort_requested)
		return engine__abort(d, e);
	if (loop)
		d->r.review_loops++;
	if (gated(d, x)) {
		int secs = d->en->cfg->approval_timeout_seconds;
		json_t *data = json_pack("{s:s}", "gate", x->name);

		run_set(&d->r.gate_status, x->status);
		run_set(&d->r.gate_back, back ? back->status : NULL);
		/* undecided this long, the gate is rejected (engine.c) */
		if (secs > 0)
			json_object_set_new(data, "timeout_ms",
					    json_integer(secs * 1000LL));
		return engine__move(d, ST_WAITING, data, e);
	}
	if (d->r.pause_requested) {
		run_set(&d->r.paused_at_status, x->status);
		rc = engine__move(d, ST_PAUSED,
				  json_pack("{s:s}", "resume_to", x->status),
				  e);
		if (!rc)
			rc = store_run_request(d->en->store, d->r.id,
					       "pause_requested", 0, NULL, e);
		if (!rc)
			d->r.pause_requested = 0;
		return rc;
	}
	/* a budget line whose action is pause: the reason on record, and
	 * `baton resume` (after raising the budget) goes on with x */
	if (engine__budget_boundary(d, x, &rc, e))
		return rc;
	return engine__move(d, x->status, NULL, e);
}

/*
 * Where success of stage s leads: the next stage or the terminal. A side
 * stage that returns goes back to the review that sent it; a review of a
 * parallel group goes past the group, unless another member still waits
 * for its fix round.
 */
int
engine__after_success(struct drive *d, const struct stage *s, struct err *e)
{
	const struct stage_ops *ops = stage_ops_for(d->p, s);
	const struct stage *x;
	int next = s->group ? pipeline_after(d->p, s) : s->next;

	if (s->next == STAGE_BACK) {
		x = ops->back ? ops->back(d, s) : NULL;
		if (!x)
			return engine__move_why(
				d, ST_FAILED,
				"a fix finished but no review is waiting for "
				"it",
				e);
		return engine__cross(d, x, s, 0, e);
	}
	if (ops->pending && (x = ops->pending(d, s)))
		return engine__route(d, x, STAGE_LOOP, NULL, e);
	if (next < 0)
		return engine__finish(d, e);
	return engine__cross(d, &d->p->stages[next], s, 0, e);
}

/*
 * The round budget is spent and s asks for another round: the run
 * blocks, with s's kind's words for it or the fix loop's, unless s's
 * kind asks a person whether to go on (its stuck hook).
 */
static int
exhausted(struct drive *d, const struct stage *s, const char *reason,
	  struct err *e)
{
	const struct stage_ops *ops = stage_ops_for(d->p, s);
	const char *outcome = NULL, *still = kind_info(s->kind)->still;
	char *why;
	int rc;

	if (ops->exhausted)
		why = ops->exhausted(d, s, reason, &outcome);
	else
		why = xasprintf("%s after %d fix round%s: the review loop "
				"budget is spent (workflow.max_review_loops = "
				"%d)",
				still ? still : "review still requests changes",
				d->r.review_loops,
				d->r.review_loops == 1 ? "" : "s",
				d->r.max_review_loops);
	if (ops->stuck) {
		enum stage_result res = STAGE_BLOCK;

		rc = ops->stuck(d, s, why, outcome, &res);
		if (rc || res == STAGE_ASK) {
			free(why);
			return rc ? rc : engine__route(d, s, STAGE_ASK, NULL, e);
		}
	}
	if (outcome)
		run_set(&d->r.outcome, outcome);
	rc = engine__move_why(d, ST_BLOCKED, why, e);
	free(why);
	return rc;
}

/*
 * s blocked for want of what a person can provide (d->needs: a
 * credential the agent was refused without). The run waits at a question
 * (kind "needs") that says what and how to fix it; approving runs s
 * again, with the credential as it is then, and rejecting ends the run
 * blocked with why. OpenViber's Blocked → AwaitingFeedback, VCP's
 * missing credential.
 */
static int
wait_for(struct drive *d, const struct stage *s, const char *why,
	 struct err *e)
{
	enum stage_result res;
	int rc = engine__ask_needs(d, s, d->needs, why, NULL, &res);

	d->needs = NULL;
	return rc ? rc : engine__route(d, s, STAGE_ASK, NULL, e);
}

/*
 * Routes a finished stage's result to the next status. A loop result
 * takes s's loop edge (on_fail for a check, else on_changes) and spends
 * a round of the run's budget.
 */
int
engine__route(struct drive *d, const struct stage *s, enum stage_result res,
	      char *reason, struct err *e)
{
	const struct stage_ops *ops = stage_ops_for(d->p, s);
	const char *looped = kind_info(s->kind)->looped;
	char *why;
	int target;
	int rc;

	if (d->outcome && (res == STAGE_BLOCK || res == STAGE_FAIL))
		run_set(&d->r.outcome, d->outcome);
	d->outcome = NULL;
	switch (res) {
	case STAGE_FINISH:
		return engine__finish(d, e);
	case STAGE_PASS:
		if (s->done)
			return engine__move(d, s->done, NULL, e);
		return engine__after_success(d, s, e);
	case STAGE_ASK:
		run_set(&d->r.gate_status, d->ask_to);
		run_set(&d->r.gate_back, NULL);
		free(d->ask_to);
		d->ask_to = NULL;
		rc = engine__move(d, ST_WAITING, d->ask, e);
		d->ask = NULL;
		return rc;
	case STAGE_LOOP:
		target = kind_is(s->kind, KF_ON_FAIL) ? s->on_fail :
							s->on_changes;
		if (target < 0 && d->p->read_only &&
		    kind_is(s->kind, KF_ON_CHANGES) &&
		    !kind_is(s->kind, KF_ON_FAIL)) {
			/* an audit asked for changes: the findings are its
			   product, on record in its verdict; the run goes
			   on, its outcome says */
			run_set(&d->r.outcome, RUN_OUTCOME_FINDINGS);
			return engine__after_success(d, s, e);
		}
		if (target < 0) {
			why = xasprintf("%s and the pipeline has no fix stage",
					looped ? looped :
						 "review requested changes");
			rc = engine__move_why(d, ST_BLOCKED, why, e);
			free(why);
			return rc;
		}
		if (d->r.review_loops >= d->r.max_review_loops)
			return exhausted(d, s, reason, e);
		if (ops->on_loop)
			ops->on_loop(d, s);
		return engine__cross(d, &d->p->stages[target], s, 1, e);
	case STAGE_BLOCK:
		if (d->needs && !d->member)
			return wait_for(d, s, reason, e);
		return engine__move_why(d, ST_BLOCKED, reason, e);
	case STAGE_FAIL:
		return engine__move_why(d, ST_FAILED, reason, e);
	case STAGE_STOPPED:
		return 0; /* the loop looks at why */
	}
	BUG("unknown stage result %d", (int)res);
}
