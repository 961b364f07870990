/*
 * The assist pipeline (OpenViber seed 003) on the one engine. Its plan,
 * execute and verify stages are the feature pipeline's; what is its own:
 *
 *   intake      the engine classifies the task: origin (assigned by a
 *               person, or self-initiated by baton's planner or judge),
 *               execution mode, priority and scope estimate
 *               (intake.json)
 *   the gate    in always-ask mode, and in agent-decides mode when the
 *               plan says "APPROVAL: needed", a person approves the plan
 *               before executing (or revises it)
 *   escalation  an executing agent that needs a decision writes
 *               escalation.json: one question, options with the
 *               recommended one first and their trade-offs, a default and
 *               a timeout. The run waits (awaiting feedback); when the
 *               timeout passes, the engine applies the default and says
 *               so in an "escalation_timeout" event.
 *   report      the engine writes the report (what changed, blockers,
 *               next steps, budget burn, evidence) and asks for feedback:
 *               approve (completed), revise (planning again with the
 *               notes) or defer (paused; resume plans again).
 */
#include "util/compat.h"

#include <ctype.h>

#include <jansson.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "core/run.h"
#include "engine/engine.h"
#include "engine/kinds/kind.h"
#include "store/store.h"
#include "workspace/workspace.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define ESCALATION_FILE "escalation.json"
#define MAX_OPTIONS	6

/* ---- intake ------------------------------------------------------------ */

/* Who asked for the work: a person, or baton itself (planner, judge). */
static const char *
origin_of(struct drive *d, int *priority)
{
	struct task t = { 0 };
	struct err ignored = ERR_INIT;
	const char *origin = "assigned";

	*priority = 0;
	if (d->r.task_id &&
	    !store_task_get(d->en->store, d->r.task_id, &t, &ignored)) {
		*priority = t.priority;
		if (t.origin && strcmp(t.origin, "user") &&
		    strcmp(t.origin, "api"))
			origin = "self-initiated";
	}
	task_release(&t);
	return origin;
}

/*
 * The scope estimate: the configured budget when there is one, else a
 * rough size from the task's length (the seed's "rough token/cost budget
 * for the task").
 */
static json_t *
scope_of(const struct drive *d)
{
	const struct config_budget *b = &d->en->cfg->budget;
	size_t len = strlen(d->r.task);
	const char *size = len < 200 ? "small" : len < 1000 ? "medium" : "large";
	long tokens = len < 200 ? 50000 : len < 1000 ? 200000 : 500000;

	if (b->max_tokens || b->max_cost_usd > 0 || b->max_wall_minutes)
		return json_pack("{s:s, s:s, s:I, s:f, s:i}", "basis", "budget",
				 "size", size, "tokens",
				 (json_int_t)(b->max_tokens ? b->max_tokens :
							      tokens),
				 "cost_usd", b->max_cost_usd, "minutes",
				 b->max_wall_minutes);
	return json_pack("{s:s, s:s, s:I}", "basis", "estimate", "size", size,
			 "tokens", (json_int_t)tokens);
}

static int
intake_stage(struct drive *d, const struct stage *s, enum stage_result *res,
	     struct err *e)
{
	int priority;
	const char *origin = origin_of(d, &priority);
	json_t *in;
	int rc;

	in = json_pack("{s:s, s:s, s:i, s:s, s:o}", "origin", origin, "mode",
		       d->en->cfg->assist.mode, "priority", priority,
		       "priority_label",
		       priority > 0 ? "high" : priority < 0 ? "low" : "normal",
		       "scope", scope_of(d));
	rc = engine__keep_json(d, "intake.json", NULL, in, e);
	if (!rc)
		rc = engine__note(d, "intake",
				  json_pack("{s:s, s:O}", "stage", s->name,
					    "intake", in),
				  e);
	json_decref(in);
	*res = STAGE_PASS;
	return rc;
}

/* ---- the plan gate ------------------------------------------------------ */

/* 1 when plan.md asks for a person's approval ("APPROVAL: needed"). */
static int
plan_asks(const struct engine *en, const char *run_id)
{
	char *dir = workspace_run_dir(en->ws, run_id);
	char *path = xasprintf("%s/plan.md", dir);
	struct buf text = BUF_INIT;
	const char *at;
	int yes = 0;

	if (fs_read_nofollow(path, &text, BUF_MAX_ARTIFACT, NULL) == 0 &&
	    text.len)
		for (at = text.ptr; (at = strstr(at, "APPROVAL:")); at++) {
			at += strlen("APPROVAL:");
			while (*at == ' ')
				at++;
			if (!strncasecmp(at, "needed", 6) ||
			    !strncasecmp(at, "required", 8))
				yes = 1;
		}
	buf_release(&text);
	free(path);
	free(dir);
	return yes;
}

/* 1 when an assist run must have its plan approved before stage x (the
 * execution mode, or the plan asks for it). */
static int
assist_gate(const struct engine *en, const struct pipeline *p,
	    const struct run *r, const struct stage *x)
{
	const char *mode = en->cfg->assist.mode;
	const struct stage *plan;

	if (x->kind != KIND_EXECUTE)
		return 0;
	/* only out of the plan: not an answer, not a failed check */
	plan = pipeline_stage_done_at(p, r->status);
	if (!plan || plan->kind != KIND_PLAN)
		return 0;
	if (!strcmp(mode, "always-ask"))
		return 1;
	if (!strcmp(mode, "always-execute"))
		return 0;
	return plan_asks(en, r->id);
}

/* ---- escalations --------------------------------------------------------- */

static int
bad(struct err *e, const char *what)
{
	return err_set(e, BATON_ECONTRACT, "%s: %s", ESCALATION_FILE, what);
}

/*
 * Holds an escalation to the seed's format and puts the recommended
 * option first. Fills *timeout and *dflt (borrowed from doc).
 */
static int
check_escalation(json_t *doc, int fallback_timeout, int *timeout,
		 const char **dflt, struct err *e)
{
	json_t *opts = json_object_get(doc, "options"), *o, *rec = NULL;
	const char *q = json_get_str(doc, "question");
	size_t i, j;

	if (!json_is_object(doc))
		return bad(e, "expected an object");
	if (!q || !*q || strchr(q, '\n'))
		return bad(e, "\"question\" must be one question on one line");
	if (!json_is_array(opts) || json_array_size(opts) < 2 ||
	    json_array_size(opts) > MAX_OPTIONS)
		return err_set(e, BATON_ECONTRACT,
			       "%s: \"options\" must list 2 to %d options",
			       ESCALATION_FILE, MAX_OPTIONS);
	json_array_foreach(opts, i, o) {
		const char *id = json_get_str(o, "id");

		if (!id || !*id || !json_get_str(o, "label") ||
		    !json_get_str(o, "tradeoffs"))
			return err_set(e, BATON_ECONTRACT,
				       "%s: options[%zu] needs \"id\", "
				       "\"label\" and \"tradeoffs\" strings",
				       ESCALATION_FILE, i);
		for (j = 0; j < i; j++)
			if (!strcmp(id, json_get_str(json_array_get(opts, j),
						     "id")))
				return err_set(e, BATON_ECONTRACT,
					       "%s: option id '%s' is used "
					       "twice",
					       ESCALATION_FILE, id);
		if (json_is_true(json_object_get(o, "recommended"))) {
			if (rec)
				return bad(e, "only one option may be "
					      "recommended");
			rec = o;
		}
	}
	if (!rec) /* none marked: the first is the recommendation */
		rec = json_array_get(opts, 0);
	json_object_set_new(rec, "recommended", json_true());
	json_array_foreach(opts, i, o)
		if (o == rec)
			break;
	if (i) { /* the recommended option goes first */
		json_incref(rec);
		json_array_remove(opts, i);
		json_array_insert_new(opts, 0, rec);
	}
	*dflt = json_get_str(doc, "default");
	if (!*dflt)
		*dflt = json_get_str(rec, "id");
	json_array_foreach(opts, i, o)
		if (!strcmp(*dflt, json_get_str(o, "id")))
			break;
	if (i == json_array_size(opts))
		return err_set(e, BATON_ECONTRACT,
			       "%s: \"default\" '%s' names no option",
			       ESCALATION_FILE, *dflt);
	*timeout = fallback_timeout;
	if (json_object_get(doc, "timeout_seconds")) {
		json_int_t t = json_integer_value(
			json_object_get(doc, "timeout_seconds"));

		if (t < 1 || t > 7 * 86400)
			return bad(e, "\"timeout_seconds\" must be 1 to 604800");
		*timeout = (int)t;
	}
	return 0;
}

/* What an agent may lack that only a person can give (OpenViber's
 * Blocked: "account access, credentials"). */
static const char *const needs_kinds[] = {
	"credential", "access", "resource", "permission", NULL,
};

/*
 * An escalation that says what the agent lacks instead of asking a
 * question: {"needs": one of needs_kinds, "what": one line}.
 */
static int
check_needs(const json_t *doc, struct err *e)
{
	const char *n = json_get_str(doc, "needs");
	const char *what = json_get_str(doc, "what");
	size_t i;

	for (i = 0; n && needs_kinds[i]; i++)
		if (!strcmp(n, needs_kinds[i]))
			break;
	if (!n || !needs_kinds[i])
		return bad(e, "\"needs\" must be credential, access, "
			      "resource or permission");
	if (!what || !*what || strchr(what, '\n') || strlen(what) > 500)
		return bad(e, "\"what\" must say on one line (at most 500 "
			      "characters) what is needed");
	return 0;
}

/* The escalations so far (progress.escalations), and one more. */
static int
next_escalation(struct drive *d)
{
	json_t *p = engine__prog_load(d);
	int n = (int)json_integer_value(json_object_get(p, "escalations")) + 1;

	json_object_set_new(p, "escalations", json_integer(n));
	engine__prog_save(d, p);
	json_decref(p);
	return n;
}

/*
 * An execute stage's escalation (escalation.json in the run folder),
 * when the agent left one: checked (BATON_ECONTRACT), kept, and asked as
 * a question with a default and a deadline (STAGE_ASK). 0 and *res
 * untouched when there is none.
 */
static int
escalation(struct drive *d, const struct stage *s, enum stage_result *res,
	   struct err *e)
{
	char *path = engine__run_file(d, ESCALATION_FILE), *kept = NULL;
	const char *dflt = NULL;
	int64_t deadline;
	json_t *doc;
	int rc, timeout = 0, needs;

	if (!fs_exists(path)) {
		free(path);
		return 0;
	}
	doc = engine__load_json(d, ESCALATION_FILE, e);
	needs = json_object_get(doc, "needs") != NULL;
	rc = !doc   ? BATON_ECONTRACT :
	     needs ? check_needs(doc, e) :
		     check_escalation(doc,
				      d->en->cfg->assist
					      .escalation_timeout_seconds,
				      &timeout, &dflt, e);
	fs_unlink(path, NULL); /* answered once: a re-run starts clean */
	free(path);
	if (rc)
		goto out;
	kept = xasprintf("escalations/escalation-%d.json", next_escalation(d));
	rc = engine__keep_json(d, kept, NULL, doc, e);
	if (rc)
		goto out;
	if (needs) {
		/* no default and no deadline: the run waits for it */
		const char *n = json_get_str(doc, "needs");
		char *why = xasprintf("stage %s: its agent needs %s%s: %s",
				      s->name, strcmp(n, "access") ? "a " : "",
				      n, json_get_str(doc, "what"));

		rc = engine__ask_needs(d, s, n, why,
				       json_pack("{s:s, s:s}", "what",
						 json_get_str(doc, "what"),
						 "file", kept),
				       res);
		free(why);
		goto out;
	}
	deadline = time_now_ms() + (int64_t)timeout * 1000;
	rc = engine__ask(d, s, "escalation", json_get_str(doc, "question"),
			 json_incref(json_object_get(doc, "options")),
			 json_pack("{s:s, s:i, s:I, s:o, s:s}", "default", dflt,
				   "timeout_seconds", timeout, "deadline_ms",
				   (json_int_t)deadline, "deadline",
				   json_time(deadline), "file", kept),
			 s->status, res);
out:
	free(kept);
	json_decref(doc);
	return rc;
}

/* ---- report and feedback ------------------------------------------------- */

static int
report_stage(struct drive *d, const struct stage *s, enum stage_result *res,
	     struct err *e)
{
	json_t *options;
	char *q;
	int rc;

	*res = STAGE_PASS;
	if (d->en->cfg->assist.auto_complete)
		return 0; /* the move to the terminal reports */
	rc = engine__report(d->en, d->p, &d->r, "completion", NULL, NULL, e);
	if (rc)
		return rc;
	options = json_pack(
		"[{s:s, s:s, s:b}, {s:s, s:s}, {s:s, s:s}]", "id", "approve",
		"label", "accept the work: the task is completed",
		"recommended", 1, "id", "revise", "label",
		"plan again with your notes (--guidance)", "id", "defer",
		"label", "put the task aside (paused); resume plans again");
	q = xasprintf("The work is done and reported: approve it, revise it, "
		      "or defer it?");
	rc = engine__ask(d, s, "feedback", q, options, NULL, d->p->terminal,
			 res);
	free(q);
	return rc;
}

static int
assist_run(struct drive *d, const struct stage *s, const char *steers,
	   enum stage_result *res, char **reason, struct err *e)
{
	(void)steers;
	(void)reason;
	if (s->kind == KIND_INTAKE)
		return intake_stage(d, s, res, e);
	return report_stage(d, s, res, e);
}

const struct stage_ops assist_ops = {
	.run = assist_run,
};

/* The executing agent is told how to escalate (the seed's format). */
static void
assist_context(struct drive *d, const struct stage *s, struct buf *ctx,
	       size_t *budget)
{
	(void)d;
	if (s->kind != KIND_EXECUTE)
		return;
	prompt_section(
		ctx, "When you cannot go on alone",
		"If you need a person's decision, write escalation.json in "
		"$BATON_OUT_DIR and end your turn:\n\n"
		"    {\"question\": \"one question on one line\",\n"
		"     \"options\": [{\"id\": \"A\", \"label\": \"...\", "
		"\"tradeoffs\": \"Pro: ... Con: ...\",\n"
		"                  \"recommended\": true}, {\"id\": \"B\", "
		"...}],\n"
		"     \"default\": \"A\", \"timeout_seconds\": 900}\n\n"
		"If you lack something only a person can give (an account, a "
		"credential, access, a resource or a permission), write this "
		"instead, and the run waits until it is provided:\n\n"
		"    {\"needs\": \"credential\" | \"access\" | \"resource\" | "
		"\"permission\",\n"
		"     \"what\": \"what exactly, and what for, on one line\"}\n",
		budget);
}

const struct type_ops assist_type = {
	.type = "assist",
	.after_edit = escalation,
	.context = assist_context,
	.gate = assist_gate,
};
