/*
 * The run record as JSON, the shape scripts rely on (docs/cli.md,
 * docs/api.md): the same object in `status --json`, `show --json` and
 * the HTTP API. The config snapshot is left out (it is the size of the
 * whole config); config_hash names it.
 */
#include "util/compat.h"

#include <jansson.h>

#include "core/run.h"
#include "engine/engine.h"
#include "util/json.h"

static json_t *
str(const char *s)
{
	return json_lossy_str(s);
}

/*
 * The run's progress as the object it is (parsed once: the views below
 * read it too), null when there is none, and as a string when the text
 * is not a JSON object (never hidden).
 */
static json_t *
progress(const char *text)
{
	json_t *o;

	if (!text)
		return json_null();
	o = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	if (json_is_object(o))
		return o;
	json_decref(o);
	return str(text);
}

/*
 * What the seeds call things, from the run's progress: "state" (the
 * pipeline's name for the status, states: in its definition) and, for a
 * loop, "loop": the Craik run record's iteration, max_iterations, phase
 * and phase_started_at, with the receipt count.
 */
static void
seed_views(const struct run *r, const json_t *p, json_t *o)
{
	json_t *loop = json_object_get(p, "loop"), *it;

	if (json_is_string(json_object_get(p, "state")))
		json_object_set(o, "state", json_object_get(p, "state"));
	if (json_is_object(loop)) {
		it = json_object_get(loop, "iteration");
		json_object_set_new(
			o, "loop",
			json_pack("{s:I, s:i, s:O?, s:o, s:O?, s:I}",
				  "iteration",
				  it ? json_integer_value(it) :
				       (json_int_t)r->review_loops + 1,
				  "max_iterations", r->max_review_loops,
				  "phase", json_object_get(loop, "phase"),
				  "phase_started_at",
				  json_time(r->phase_started_at), "state",
				  json_object_get(p, "state"), "receipts",
				  json_integer_value(json_object_get(
					  loop, "receipts"))));
	}
}

/*
 * A research run's "research": its question, round, claims with their
 * evidence, the judgement and the files (relative to the run folder:
 * report.md, challenge.json), from progress.research. Absent for other
 * runs.
 */
static void
research_view(const json_t *p, json_t *o)
{
	json_t *st = json_object_get(p, "research");

	if (json_is_object(st))
		json_object_set(o, "research", st);
}

/*
 * The question a run waiting for a person asks ("question": kind,
 * question, options, default, deadline, from progress.ask). Absent when
 * it asks none.
 */
static void
question_view(const json_t *p, json_t *o)
{
	json_t *ask = json_object_get(p, "ask");

	if (json_is_object(ask))
		json_object_set(o, "question", ask);
}

json_t *
engine_run_json(const struct run *r)
{
	json_t *o = json_object(), *prog;

	json_object_set_new(o, "id", str(r->id));
	json_object_set_new(o, "task", str(r->task));
	json_object_set_new(o, "pipeline", str(r->pipeline));
	json_object_set_new(o, "status", str(r->status));
	json_object_set_new(o, "stage", str(r->stage));
	json_object_set_new(o, "phase", str(r->phase));
	json_object_set_new(o, "review_loops", json_integer(r->review_loops));
	json_object_set_new(o, "max_review_loops",
			    json_integer(r->max_review_loops));
	json_object_set_new(o, "attempt", json_integer(r->attempt));
	json_object_set_new(o, "created_at", json_time(r->created_at));
	json_object_set_new(o, "started_at", json_time(r->started_at));
	json_object_set_new(o, "phase_started_at", json_time(r->phase_started_at));
	json_object_set_new(o, "updated_at", json_time(r->updated_at));
	json_object_set_new(o, "ended_at", json_time(r->ended_at));
	json_object_set_new(o, "worktree", str(r->worktree));
	json_object_set_new(o, "branch", str(r->branch));
	json_object_set_new(o, "base_commit", str(r->base_commit));
	json_object_set_new(o, "checkpoint", str(r->checkpoint));
	json_object_set_new(o, "paused_at_status", str(r->paused_at_status));
	json_object_set_new(o, "gate_status", str(r->gate_status));
	json_object_set_new(o, "pause_requested",
			    json_boolean(r->pause_requested));
	json_object_set_new(o, "abort_requested",
			    json_boolean(r->abort_requested));
	json_object_set_new(o, "reason", str(r->reason));
	json_object_set_new(o, "outcome", str(r->outcome));
	prog = progress(r->progress);
	json_object_set_new(o, "progress", prog); /* o keeps it alive */
	research_view(prog, o);
	seed_views(r, prog, o);
	question_view(prog, o);
	json_object_set_new(o, "tokens_in", json_integer(r->tokens_in));
	json_object_set_new(o, "tokens_out", json_integer(r->tokens_out));
	json_object_set_new(o, "cost_usd", json_real(r->cost_usd));
	json_object_set_new(o, "active_ms", json_integer(r->active_ms));
	json_object_set_new(o, "config_hash", str(r->config_hash));
	json_object_set_new(o, "version", json_integer(r->version));
	json_object_set_new(o, "task_id",
			    r->task_id ? json_integer(r->task_id) : json_null());
	return o;
}
