/*
 * The loop pipeline (Craik seed 004) on the one engine: one agent in
 * bounded iterations of four stages, moved by the same checked
 * transitions as every pipeline.
 *
 *   loop-plan  the planner names the next step and the side effects it
 *              needs ({"done", "summary", "step", "effects"}), or finds
 *              the goal met (the run completes). The first plan locks the
 *              intent: goal, bounds and policy in intent-lock.json.
 *   act        before the step: the intent lock's stop conditions (the
 *              iteration bound, the budgets, the stop file, a changed
 *              lock), then the policy: every side effect needs a grant
 *              (deny by default). Denied: a denial receipt, the run
 *              blocks. Granted: the implementer does the step, and its
 *              edits are held to the write grants afterwards.
 *   observe    the engine records what the act left (files, digest) and
 *              runs the project's checks.
 *   evaluate   the reviewer says continue, done or blocked; continue
 *              past max_iterations stops the run before the next act.
 *
 * Every act and check leaves a receipt: a "receipt" event whose hash
 * covers its content, its run's id and the previous receipt's hash
 * (core/receipt.h). The run's progress keeps the count and the head (the
 * anchor, there from the run's first transition), in the same write as
 * the receipt, so `baton receipts verify` notices a changed, missing,
 * extra or borrowed receipt. Each stage records that it is done for its
 * iteration in that same write: a driver killed anywhere resumes without
 * repeating a completed step.
 */
#include "util/compat.h"

#include <jansson.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/policy.h"
#include "core/prompt.h"
#include "core/receipt.h"
#include "core/run.h"
#include "engine/engine.h"
#include "engine/kinds/kind.h"
#include "workspace/workspace.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/redact.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define INTENT_FILE "intent-lock.json"
#define LOOP_CONTEXT_MAX (16 * 1024)

static const char *const effect_kinds[] = { "read", "write", "run",
					    "network", NULL };

/* ---- progress.loop ------------------------------------------------------ */

static int
iteration(const struct drive *d)
{
	return d->r.review_loops + 1;
}

/* The phases whose end the state records, by the iteration it was in. */
enum loop_done { PLANNED, ACTED, OBSERVED, EVALUATED, NR_DONE };

static const char *const done_keys[NR_DONE] = {
	[PLANNED] = "planned", [ACTED] = "acted", [OBSERVED] = "observed",
	[EVALUATED] = "evaluated",
};

/*
 * The loop's part of the run record (progress.loop), typed: where each
 * phase got to, the intent lock, the receipt chain's anchor and this
 * iteration's documents. loop_load reads it whole from d->r; loop_keep
 * writes it back into d->r for the run's next write, keeping the keys it
 * does not own (the phase the door stamps) as they are. A field that is
 * 0 or NULL is never written: a loop's state only moves on.
 */
struct loop_state {
	int done[NR_DONE];	/* the iteration each phase last ended in */
	int receipts;		/* the chain's length */
	char *head;		/* its last hash (RECEIPT_GENESIS: none) */
	char *intent_hash;	/* intent-lock.json's hash, once locked */
	int64_t intent_at;	/* when it was locked; 0: not yet */
	/* this iteration's documents, or NULL */
	json_t *step, *granted, *observation, *evaluation;
};

#define LOOP_DOCS(X) X(step) X(granted) X(observation) X(evaluation)

static void
loop_load(const struct drive *d, struct loop_state *st)
{
	json_t *p = engine__prog_load(d), *l = json_object_get(p, "loop");
	int i;

	memset(st, 0, sizeof(*st));
	for (i = 0; i < NR_DONE; i++)
		st->done[i] = (int)json_integer_value(
			json_object_get(l, done_keys[i]));
	st->receipts = (int)json_integer_value(json_object_get(l, "receipts"));
	st->head = xstrdup_or_null(json_get_str(l, "head"));
	st->intent_hash = xstrdup_or_null(json_get_str(l, "intent_hash"));
	st->intent_at = json_integer_value(json_object_get(l, "intent_at"));
#define LOAD_DOC(f)                                                           \
	st->f = json_object_get(l, #f);                                       \
	json_incref(st->f);
	LOOP_DOCS(LOAD_DOC)
#undef LOAD_DOC
	json_decref(p);
}

static void
loop_keep(struct drive *d, const struct loop_state *st)
{
	json_t *p = engine__prog_load(d), *l = engine__prog_part(p, "loop");
	int i;

	for (i = 0; i < NR_DONE; i++)
		if (st->done[i])
			json_object_set_new(l, done_keys[i],
					    json_integer(st->done[i]));
	if (st->receipts)
		json_object_set_new(l, "receipts", json_integer(st->receipts));
	if (st->head)
		json_object_set_new(l, "head", json_string(st->head));
	if (st->intent_hash)
		json_object_set_new(l, "intent_hash",
				    json_string(st->intent_hash));
	if (st->intent_at)
		json_object_set_new(l, "intent_at",
				    json_integer(st->intent_at));
#define KEEP_DOC(f)                                                           \
	if (st->f)                                                            \
		json_object_set(l, #f, st->f);
	LOOP_DOCS(KEEP_DOC)
#undef KEEP_DOC
	json_object_set_new(l, "iteration", json_integer(iteration(d)));
	json_object_set_new(l, "max_iterations",
			    json_integer(d->r.max_review_loops));
	engine__prog_save(d, p);
	json_decref(p);
}

static void
loop_release(struct loop_state *st)
{
	free(st->head);
	free(st->intent_hash);
#define FREE_DOC(f) json_decref(st->f);
	LOOP_DOCS(FREE_DOC)
#undef FREE_DOC
	memset(st, 0, sizeof(*st));
}

/* 1 when phase k already ended in this iteration. */
static int
done_here(const struct drive *d, enum loop_done k)
{
	struct loop_state st;
	int yes;

	loop_load(d, &st);
	yes = st.done[k] == iteration(d);
	loop_release(&st);
	return yes;
}

/*
 * Phase k ended in this iteration, leaving doc (a new reference taken
 * over; NULL for an act) as what the next phases read: the plan's step,
 * the observation, the evaluation.
 */
static void
loop_ended(struct drive *d, enum loop_done k, json_t *doc)
{
	struct loop_state st;
	json_t **slot = NULL;

	loop_load(d, &st);
	switch (k) {
	case PLANNED:
		slot = &st.step;
		break;
	case OBSERVED:
		slot = &st.observation;
		break;
	case EVALUATED:
		slot = &st.evaluation;
		break;
	case ACTED:
	case NR_DONE:
		break;
	}
	if (slot) {
		json_decref(*slot);
		*slot = doc;
	}
	st.done[k] = iteration(d);
	loop_keep(d, &st);
	loop_release(&st);
}

/* What the policy granted this iteration's act (grants consumed). */
static void
loop_grant(struct drive *d, json_t *grants)
{
	struct loop_state st;

	loop_load(d, &st);
	json_decref(st.granted);
	st.granted = grants;
	loop_keep(d, &st);
	loop_release(&st);
}

/* ---- receipts ---------------------------------------------------------- */

/*
 * Seals receipt r (consumed) onto the run's chain and writes it as a
 * "receipt" event with d->r, progress and all, in one run write. Its
 * strings are redacted before sealing, so that the store keeps exactly
 * what the hash covers.
 */
static int
add_receipt(struct drive *d, json_t *r, struct err *e)
{
	struct loop_state st;
	struct buf scrub = BUF_INIT;
	json_t *clean;
	char *text;
	int rc, n;

	loop_load(d, &st);
	n = st.receipts + 1;

	json_object_set_new(r, "n", json_integer(n));
	json_object_set_new(r, "iteration", json_integer(iteration(d)));
	text = json_dumps(r, JSON_COMPACT);
	buf_adds(&scrub, text);
	free(text);
	redact_buf(&scrub);
	clean = json_loads(scrub.ptr, 0, NULL);
	buf_release(&scrub);
	if (clean) /* else a secret's mask broke the JSON: keep it as is */
		json_decref(r);
	else
		clean = r;
	/* after the redaction: the id is the run's, kept as it is anyway */
	json_object_set_new(clean, "run", json_string(d->r.id));
	receipt_seal(clean, st.head ? st.head : RECEIPT_GENESIS);
	st.receipts = n;
	free(st.head);
	st.head = xstrdup(json_get_str(clean, "hash"));
	loop_keep(d, &st);
	loop_release(&st);
	rc = engine__note(d, "receipt", clean, e);
	return rc;
}

/* A receipt of phase with the step as asked (step may be NULL). */
static json_t *
receipt_new(const char *phase, const json_t *step, const char *decision,
	    const char *reason)
{
	json_t *asked = json_object();

	if (step) {
		json_object_set(asked, "step", json_object_get(step, "step"));
		json_object_set(asked, "effects",
				json_object_get(step, "effects"));
	}
	return json_pack("{s:s, s:o, s:s, s:[], s:s?, s:n}", "phase", phase,
			 "asked", asked, "decision", decision, "grants",
			 "reason", reason, "output_digest");
}

/* ---- the intent lock --------------------------------------------------- */

static void
budget_json(const struct config *cfg, json_t *lock)
{
	const struct config_budget *b = &cfg->budget;

	json_object_set_new(lock, "budget",
			    json_pack("{s:f, s:I, s:i}", "max_cost_usd",
				      b->max_cost_usd, "max_tokens",
				      (json_int_t)b->max_tokens,
				      "max_wall_minutes", b->max_wall_minutes));
}

/*
 * The grants of the intent lock: a plain grant as its text, one with
 * excludes or the override as {grant, exclude, override_immutable}, so
 * that a lock reads as the config that made it.
 */
static json_t *
grants_json(const struct config_loop *l)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < l->nr_grants; i++) {
		const struct policy_grant *g = &l->grants[i];

		if (!g->exclude.nr && !g->override_immutable)
			json_array_append_new(a, json_string(g->text));
		else
			json_array_append_new(
			    a, json_pack("{s:s, s:o, s:b}", "grant", g->text,
					 "exclude", json_strvec(&g->exclude),
					 "override_immutable",
					 g->override_immutable));
	}
	return a;
}

/*
 * The intent lock: what the run may do and when it must stop, fixed at
 * its first plan (intent-lock.json, its hash in progress). A lock that
 * changes on disk afterwards stops the run before its next act.
 */
static int
lock_intent(struct drive *d, struct err *e)
{
	const struct config *cfg = d->en->cfg;
	struct loop_state st;
	json_t *lock;
	char *text, hash[65];
	int rc;

	loop_load(d, &st);
	if (st.intent_at) {
		loop_release(&st);
		return 0;
	}
	lock = json_pack("{s:s, s:s, s:i, s:s, s:o, s:o, s:s?}", "goal",
			 d->r.task, "pipeline", d->p->name, "max_iterations",
			 d->r.max_review_loops, "profile", cfg->loop.profile,
			 "grants", grants_json(&cfg->loop), "immutable",
			 json_strvec(&cfg->loop.immutable), "stop_file",
			 cfg->loop.stop_file);
	budget_json(cfg, lock);
	text = json_dumps(lock, JSON_INDENT(2) | JSON_SORT_KEYS);
	receipt_sha256_hex(text, strlen(text), hash);
	free(text);
	rc = engine__keep_json(d, INTENT_FILE, NULL, lock, e);
	json_decref(lock);
	if (!rc) {
		st.intent_hash = xstrdup(hash);
		st.intent_at = time_now_ms();
		loop_keep(d, &st);
	}
	loop_release(&st);
	if (rc)
		return rc;
	return engine__note(d, "intent_locked",
			    json_pack("{s:s, s:s}", "file", INTENT_FILE,
				      "hash", hash),
			    e);
}

/* The intent lock as it is on disk now, hashed as lock_intent did. */
static int
intent_changed(struct drive *d)
{
	struct loop_state st;
	json_t *lock;
	char *text = NULL, hash[65];
	int changed = 1;

	loop_load(d, &st);

	lock = engine__load_json(d, INTENT_FILE, NULL);
	if (lock && st.intent_hash) {
		text = json_dumps(lock, JSON_INDENT(2) | JSON_SORT_KEYS);
		receipt_sha256_hex(text, strlen(text), hash);
		changed = strcmp(hash, st.intent_hash) != 0;
	}
	free(text);
	json_decref(lock);
	loop_release(&st);
	return changed;
}

/*
 * The stop conditions checked before every act: a sentence and the
 * outcome when one holds (caller frees the sentence), else NULL.
 */
static char *
stop_condition(struct drive *d, const char **outcome)
{
	const struct config *cfg = d->en->cfg;
	char *why, *path;

	if (iteration(d) > d->r.max_review_loops) {
		*outcome = RUN_OUTCOME_MAX_ITERATIONS;
		return xasprintf("iteration %d is past max_iterations (%d)",
				 iteration(d), d->r.max_review_loops);
	}
	why = engine__budget_crossed(d->en, cfg, &d->r, NULL);
	if (why) {
		*outcome = RUN_OUTCOME_BUDGET;
		return why;
	}
	if (cfg->loop.stop_file && d->r.worktree) {
		path = xasprintf("%s/%s", d->r.worktree, cfg->loop.stop_file);
		if (fs_exists(path)) {
			*outcome = RUN_OUTCOME_STOPPED;
			why = xasprintf("the stop file %s exists (loop.stop_file)",
					cfg->loop.stop_file);
		}
		free(path);
		if (why)
			return why;
	}
	if (intent_changed(d)) {
		*outcome = RUN_OUTCOME_STOPPED;
		return xasprintf("%s changed (or is gone) since the run locked "
				 "it: the run's intent is no longer the one "
				 "it was granted",
				 INTENT_FILE);
	}
	return NULL;
}

/* ---- calls ------------------------------------------------------------- */

/* The current step (progress.loop.step, a new reference) or NULL. */
static json_t *
current_step(const struct drive *d)
{
	struct loop_state st;
	json_t *step;

	loop_load(d, &st);
	step = json_is_object(st.step) ? json_incref(st.step) : NULL;
	loop_release(&st);
	return step;
}

static void
add_section_json(struct buf *ctx, const char *title, const json_t *doc,
		 size_t *budget)
{
	char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;

	if (text)
		prompt_section(ctx, title, text, budget);
	free(text);
}

/* What the loop's agents read: the goal's bounds, the last evaluation,
 * the step and its grants. */
static void
loop_context(struct drive *d, struct buf *ctx)
{
	size_t budget = LOOP_CONTEXT_MAX;
	struct buf head = BUF_INIT;
	struct loop_state st;

	loop_load(d, &st);
	buf_addf(&head, "Iteration %d of at most %d.\n", iteration(d),
		 d->r.max_review_loops);
	prompt_section(ctx, "Bounds", head.ptr, &budget);
	add_section_json(ctx, "The last evaluation", st.evaluation, &budget);
	add_section_json(ctx, "What baton observed after the act",
			 st.observation, &budget);
	add_section_json(ctx, "The step to take", st.step, &budget);
	add_section_json(ctx, "What the policy granted", st.granted, &budget);
	buf_release(&head);
	loop_release(&st);
}

static void policy_of(const struct drive *d, struct policy *pol);

/* One agent call of a loop stage into artifact, held to accept(). */
static int
loop_call(struct drive *d, const struct stage *s, const char *steers,
	  struct call_spec *cs, enum stage_result *res, char **reason,
	  struct err *e)
{
	struct config_provider own;
	struct buf ctx = BUF_INIT;
	struct strvec env = STRVEC_INIT;
	struct policy pol;
	int rc;

	if (!engine__players(d, s, &own, 1, reason)) {
		*res = STAGE_FAIL;
		return 0;
	}
	loop_context(d, &ctx);
	strvec_pushf(&env, "BATON_ITERATION=%d", iteration(d));
	strvec_pushf(&env, "BATON_MAX_ITERATIONS=%d", d->r.max_review_loops);
	cs->context = ctx.ptr;
	cs->env = &env;
	/* an ACP agent's asks are held to the envelope its acts are */
	policy_of(d, &pol);
	cs->policy = &pol;
	rc = engine__call_as(d, s, &own, steers, cs, res, reason, e);
	cs->context = NULL;
	cs->env = NULL;
	cs->policy = NULL;
	strvec_clear(&env);
	buf_release(&ctx);
	return rc;
}

/* ---- plan ---------------------------------------------------------------- */

/* Holds a plan to its contract: "loop/plan-3.json: effects[1].kind ..." */
static int
check_plan(const char *file, const json_t *doc, struct err *e)
{
	json_t *fx = json_object_get(doc, "effects"), *one;
	const char *kind;
	size_t i;

	if (!json_is_object(doc))
		return err_set(e, BATON_ECONTRACT, "%s: expected an object",
			       file);
	if (!json_is_boolean(json_object_get(doc, "done")))
		return err_set(e, BATON_ECONTRACT,
			       "%s: \"done\" must be true or false", file);
	if (json_is_true(json_object_get(doc, "done")))
		return 0;
	if (!json_get_str(doc, "step") || !*json_get_str(doc, "step"))
		return err_set(e, BATON_ECONTRACT,
			       "%s: \"step\" must say what the act will do",
			       file);
	if (fx && !json_is_array(fx))
		return err_set(e, BATON_ECONTRACT,
			       "%s: \"effects\" must be a list of {kind, "
			       "target}",
			       file);
	json_array_foreach(fx, i, one) {
		kind = json_get_str(one, "kind");
		if (!kind || !json_get_str(one, "target"))
			return err_set(e, BATON_ECONTRACT,
				       "%s: effects[%zu] needs \"kind\" and "
				       "\"target\" strings",
				       file, i);
		if (!str_in_list(effect_kinds, kind))
			return err_set(e, BATON_ECONTRACT,
				       "%s: effects[%zu].kind '%s' is not one "
				       "of read, write, run, network",
				       file, i, kind);
	}
	return 0;
}

static int
accept_plan(struct drive *d, const struct stage *s, const char *text,
	    enum stage_result *res, char **reason, struct err *e)
{
	const char *file = d->call->artifact;
	json_t *doc = engine__take_json(d, file, text, e);
	int rc, done;

	(void)reason;
	if (!doc)
		return BATON_ECONTRACT;
	rc = check_plan(file, doc, e);
	if (rc) {
		json_decref(doc);
		return rc;
	}
	if (!json_object_get(doc, "effects"))
		json_object_set_new(doc, "effects", json_array());
	json_object_set_new(doc, "file", json_string(file));
	done = json_is_true(json_object_get(doc, "done"));
	rc = engine__keep_json(d, file, done ? "done" : "step", doc, e);
	if (!rc) {
		loop_ended(d, PLANNED, json_incref(doc));
		rc = engine__note(d, "step_planned",
				  json_pack("{s:s, s:i, s:b, s:O?, s:O?}",
					    "stage", s->name, "iteration",
					    iteration(d), "done", done, "step",
					    json_object_get(doc, "step"),
					    "effects",
					    json_object_get(doc, "effects")),
				  e);
	}
	json_decref(doc);
	*res = STAGE_PASS;
	return rc;
}

/* The plan's word: the goal is met, so the run ends without an act. */
static void
goal_met(struct drive *d, enum stage_result *res)
{
	json_t *step = current_step(d);

	*res = json_is_true(json_object_get(step, "done")) ? STAGE_FINISH :
							      STAGE_PASS;
	json_decref(step);
}

static int
plan_stage(struct drive *d, const struct stage *s, const char *steers,
	   enum stage_result *res, char **reason, struct err *e)
{
	struct call_spec cs = { .template = "loop-plan", .accept = accept_plan };
	char *file;
	int rc;

	if (done_here(d, PLANNED)) {
		goal_met(d, res);
		return 0;
	}
	rc = lock_intent(d, e);
	if (rc)
		return rc;
	file = xasprintf("loop/plan-%d.json", iteration(d));
	cs.artifact = file;
	rc = loop_call(d, s, steers, &cs, res, reason, e);
	free(file);
	if (!rc && *res == STAGE_PASS)
		goal_met(d, res);
	return rc;
}

/* ---- act ----------------------------------------------------------------- */

static void
policy_of(const struct drive *d, struct policy *pol)
{
	const struct config *cfg = d->en->cfg;

	pol->profile = cfg->loop.profile;
	pol->grants = cfg->loop.grants;
	pol->nr_grants = cfg->loop.nr_grants;
	pol->allowed_paths = &cfg->allowed_paths;
	pol->commands = &cfg->validate_commands;
	pol->immutable = &cfg->loop.immutable;
}

/*
 * The policy's answer for each effect of step, into the receipt's grants
 * (and granted, the ones allowed). Returns the first denial's sentence
 * (caller frees) or NULL when all are granted.
 */
static char *
judge_effects(const struct drive *d, const json_t *step, json_t *grants)
{
	json_t *fx = json_object_get(step, "effects"), *one;
	struct policy pol;
	char *first = NULL, *by, *why;
	size_t i;

	policy_of(d, &pol);
	json_array_foreach(fx, i, one) {
		const char *kind = json_get_str(one, "kind");
		const char *target = json_get_str(one, "target");
		int denied;

		by = why = NULL;
		denied = policy_check(&pol, kind, target, &by, &why) != 0;
		json_array_append_new(
			grants,
			json_pack("{s:s?, s:s?, s:s, s:s?}", "kind", kind,
				  "target", target, "decision",
				  denied ? "denied" : "granted", "by", by));
		if (denied && !first)
			first = xstrdup(why ? why : "denied");
		free(by);
		free(why);
	}
	return first;
}

/* What the policy granted this act (progress.loop.granted), a copy. */
static json_t *
granted_list(const struct drive *d)
{
	struct loop_state st;
	json_t *g;

	loop_load(d, &st);
	g = st.granted ? json_deep_copy(st.granted) : json_array();
	loop_release(&st);
	return g;
}

/* The digest of an act's output: the agent's final text and its diff. */
static char *
act_digest(struct drive *d, const char *text, const char *from,
	   const char *to)
{
	struct buf all = BUF_INIT, diff = BUF_INIT;
	struct err ignored = ERR_INIT;
	char hex[65];

	buf_adds(&all, text ? text : "");
	buf_addch(&all, '\n');
	if (from && to && strcmp(from, to) &&
	    !worktree_diff(d->en->ws, d->r.worktree, from, 0, &diff, &ignored))
		buf_add(&all, diff.ptr, diff.len);
	receipt_sha256_hex(all.ptr, all.len, hex);
	buf_release(&all);
	buf_release(&diff);
	return xasprintf("sha256:%s", hex);
}

/* The files the act changed that no write grant covers, comma-separated. */
static void
ungranted_writes(struct drive *d, const struct strvec *paths,
		 struct buf *out)
{
	struct policy pol;
	size_t i;

	policy_of(d, &pol);
	for (i = 0; i < paths->nr; i++) {
		char *by = NULL, *why = NULL;

		if (policy_check(&pol, "write", paths->v[i], &by, &why))
			buf_addf(out, "%s%s", out->len ? ", " : "",
				 paths->v[i]);
		free(by);
		free(why);
	}
}

/*
 * After the implementer's step: its edits committed, held to the write
 * grants, and the receipt written with the checkpoint in one run write,
 * which is what makes the act done for good.
 */
static int
accept_act(struct drive *d, const struct stage *s, const char *text,
	   enum stage_result *res, char **reason, struct err *e)
{
	char *prev = xstrdup_or_null(d->r.checkpoint), *commit = NULL, *msg;
	struct strvec paths = STRVEC_INIT;
	struct buf outside = BUF_INIT;
	json_t *step = current_step(d), *r;
	int rc, changed = 0;

	(void)s;
	msg = xasprintf("baton %s: act %d", d->r.id, iteration(d));
	rc = worktree_checkpoint(d->en->ws, d->r.worktree, msg, &commit,
				 &changed, e);
	free(msg);
	if (!rc && changed && prev)
		rc = worktree_changed_paths(d->en->ws, d->r.worktree, prev,
					    commit, &paths, e);
	if (rc)
		goto out;
	engine__take_unseen(d, &paths);
	ungranted_writes(d, &paths, &outside);
	r = receipt_new("act", step, outside.len ? "violation" : "granted",
			NULL);
	json_object_set_new(r, "grants", granted_list(d));
	json_object_set_new(r, "output_digest",
			    json_str_take(act_digest(d, text, prev, commit)));
	json_object_set_new(r, "files", json_strvec(&paths));
	if (outside.len)
		json_object_set_new(r, "reason",
				    json_sprintf("the act wrote %s, which no "
						 "write grant covers",
						 outside.ptr));
	engine__ckpt_push(d, commit); /* before the write that records it */
	run_set(&d->r.checkpoint, commit);
	loop_ended(d, ACTED, NULL);
	rc = add_receipt(d, r, e);
	*res = STAGE_PASS;
	if (!rc && outside.len) {
		*res = STAGE_BLOCK;
		d->outcome = RUN_OUTCOME_POLICY;
		*reason = xasprintf("act %d wrote %s, which no write grant "
				    "covers (profile %s; loop.grants)",
				    iteration(d), outside.ptr,
				    d->en->cfg->loop.profile);
	}
out:
	json_decref(step);
	strvec_clear(&paths);
	buf_release(&outside);
	free(commit);
	free(prev);
	return rc;
}

static int
deny(struct drive *d, const char *phase, json_t *step, json_t *grants,
     const char *decision, const char *why, const char *outcome,
     enum stage_result *res, char **reason, struct err *e)
{
	json_t *r = receipt_new(phase, step, decision, why);

	json_object_set_new(r, "grants", grants ? grants : json_array());
	*res = STAGE_BLOCK;
	d->outcome = outcome;
	*reason = xasprintf("%s before act %d: %s",
			    !strcmp(decision, "denied") ? "denied" : "stopped",
			    iteration(d), why);
	return add_receipt(d, r, e);
}

static int
act_stage(struct drive *d, const struct stage *s, const char *steers,
	  enum stage_result *res, char **reason, struct err *e)
{
	struct call_spec cs = { .template = "act", .accept = accept_act };
	const char *outcome = NULL;
	json_t *step, *grants;
	char *why, *file;
	int rc;

	if (done_here(d, ACTED)) {
		*res = STAGE_PASS;
		return 0;
	}
	step = current_step(d);
	if (!step) {
		*res = STAGE_FAIL;
		*reason = xstrdup("act: there is no planned step (progress.loop."
				  "step is missing)");
		return 0;
	}
	why = stop_condition(d, &outcome);
	if (why) {
		rc = deny(d, "stop", step, NULL, "stopped", why, outcome, res,
			  reason, e);
		goto out;
	}
	grants = json_array();
	why = judge_effects(d, step, grants);
	if (why) {
		rc = deny(d, "act", step, grants, "denied", why,
			  RUN_OUTCOME_POLICY, res, reason, e);
		goto out;
	}
	loop_grant(d, grants);
	file = xasprintf("loop/act-%d.md", iteration(d));
	cs.artifact = file;
	rc = loop_call(d, s, steers, &cs, res, reason, e);
	free(file);
out:
	free(why);
	json_decref(step);
	return rc;
}

/* ---- observe ------------------------------------------------------------- */

/* The digest of the checks' record (validation.json) as an observe
 * receipt's output digest. */
static char *
validation_digest(const struct drive *d)
{
	char *path = engine__run_file(d, "validation.json"), hex[65];
	struct buf text = BUF_INIT;

	fs_read_nofollow(path, &text, BUF_MAX_ARTIFACT, NULL);
	receipt_sha256_hex(text.ptr ? text.ptr : "", text.len, hex);
	buf_release(&text);
	free(path);
	return xasprintf("sha256:%s", hex);
}

/* What the act left: files, the checks, in loop/observe-N.json. */
static int
observe_stage(struct drive *d, const struct stage *s, enum stage_result *res,
	      char **reason, struct err *e)
{
	const struct config *cfg = d->en->cfg;
	struct strvec paths = STRVEC_INIT;
	struct err ignored = ERR_INIT;
	enum stage_result checks = STAGE_PASS;
	struct loop_state st;
	json_t *obs, *r;
	char *file;
	int rc = 0;

	(void)reason;
	*res = STAGE_PASS;
	if (done_here(d, OBSERVED))
		return 0;
	if (d->r.base_commit && d->r.checkpoint)
		worktree_changed_paths(d->en->ws, d->r.worktree,
				       d->r.base_commit, d->r.checkpoint,
				       &paths, &ignored);
	if (cfg->validate_commands.nr) {
		rc = engine__validate(d, s, &checks, e);
		if (rc)
			goto out;
		if (checks == STAGE_STOPPED) {
			*res = STAGE_STOPPED;
			goto out;
		}
	}
	loop_load(d, &st);
	obs = json_pack("{s:i, s:s?, s:o, s:s?, s:s}", "iteration",
			iteration(d), "act_receipt", st.head, "files_changed",
			json_strvec(&paths), "checkpoint", d->r.checkpoint,
			"checks",
			!cfg->validate_commands.nr ? "none" :
			checks == STAGE_PASS	   ? "passed" :
						     "failed");
	loop_release(&st);
	file = xasprintf("loop/observe-%d.json", iteration(d));
	rc = engine__keep_json(d, file, NULL, obs, e);
	free(file);
	if (!rc)
		loop_ended(d, OBSERVED, json_incref(obs));
	if (!rc && cfg->validate_commands.nr) {
		r = receipt_new("observe", NULL, "granted", NULL);
		json_object_set_new(r, "grants",
				    json_pack("[{s:s, s:s, s:s, s:s}]", "kind",
					      "run", "target",
					      "the project's checks", "decision",
					      "granted", "by",
					      "validate.commands"));
		json_object_set_new(r, "output_digest",
				    json_str_take(validation_digest(d)));
		rc = add_receipt(d, r, e);
	} else if (!rc) {
		rc = engine__note(d, "observed", json_incref(obs), e);
	}
	json_decref(obs);
out:
	strvec_clear(&paths);
	return rc;
}

/* ---- evaluate ------------------------------------------------------------ */

static const char *const eval_status[] = { "continue", "done", "blocked",
					   NULL };

static int
accept_eval(struct drive *d, const struct stage *s, const char *text,
	    enum stage_result *res, char **reason, struct err *e)
{
	const char *file = d->call->artifact, *status;
	json_t *doc = engine__take_json(d, file, text, e);
	int rc;

	(void)reason;
	if (!doc)
		return BATON_ECONTRACT;
	status = json_get_str(doc, "status");
	if (!status || !str_in_list(eval_status, status)) {
		json_decref(doc);
		return err_set(e, BATON_ECONTRACT,
			       "%s: \"status\" must be continue, done or "
			       "blocked",
			       file);
	}
	rc = engine__keep_json(d, file, status, doc, e);
	if (!rc) {
		loop_ended(d, EVALUATED, json_incref(doc));
		rc = engine__note(d, "evaluated",
				  json_pack("{s:s, s:i, s:s, s:O?}", "stage",
					    s->name, "iteration", iteration(d),
					    "status", status, "summary",
					    json_object_get(doc, "summary")),
				  e);
	}
	json_decref(doc);
	*res = STAGE_PASS;
	return rc;
}

/* Routes the evaluation: done, blocked, or another iteration if any. */
static int
route_eval(struct drive *d, enum stage_result *res, char **reason,
	   struct err *e)
{
	struct loop_state st;
	const char *status, *summary;
	char *why;
	int rc = 0;

	loop_load(d, &st);
	status = json_get_str(st.evaluation, "status");
	summary = json_get_str(st.evaluation, "summary");

	if (!status || !strcmp(status, "done")) {
		*res = STAGE_PASS;
	} else if (!strcmp(status, "blocked")) {
		*res = STAGE_BLOCK;
		*reason = xasprintf("the evaluation of iteration %d says "
				    "blocked: %s",
				    iteration(d), summary ? summary : "");
	} else if (iteration(d) >= d->r.max_review_loops) {
		why = xasprintf("iteration %d of %d ended without the goal "
				"met: max_iterations stops the loop before "
				"act %d",
				iteration(d), d->r.max_review_loops,
				iteration(d) + 1);
		rc = deny(d, "stop", NULL, NULL, "stopped", why,
			  RUN_OUTCOME_MAX_ITERATIONS, res, reason, e);
		free(*reason);
		*reason = why;
	} else {
		*res = STAGE_LOOP;
	}
	loop_release(&st);
	return rc;
}

static int
evaluate_stage(struct drive *d, const struct stage *s, const char *steers,
	       enum stage_result *res, char **reason, struct err *e)
{
	struct call_spec cs = { .template = "evaluate", .accept = accept_eval };
	char *file;
	int rc = 0;

	if (!done_here(d, EVALUATED)) {
		file = xasprintf("loop/evaluate-%d.json", iteration(d));
		cs.artifact = file;
		rc = loop_call(d, s, steers, &cs, res, reason, e);
		free(file);
		if (rc || *res != STAGE_PASS)
			return rc;
	}
	return route_eval(d, res, reason, e);
}

static int
loop_run(struct drive *d, const struct stage *s, const char *steers,
	 enum stage_result *res, char **reason, struct err *e)
{
	switch (s->kind) {
	case KIND_LOOP_PLAN:
		return plan_stage(d, s, steers, res, reason, e);
	case KIND_ACT:
		return act_stage(d, s, steers, res, reason, e);
	case KIND_OBSERVE:
		return observe_stage(d, s, res, reason, e);
	case KIND_EVALUATE:
		return evaluate_stage(d, s, steers, res, reason, e);
	default:
		BUG("stage %s is not a loop stage", s->name);
	}
}

/*
 * The run's view keeps the loop's phase (Craik's plan, act, observe,
 * evaluate; stop at the end) beside its status, and the receipt chain's
 * anchor, empty, from the first: verify requires one of every loop run,
 * so that removing it cannot hide removed receipts (core/receipt.h). A
 * wait or a pause leaves the phase as it was.
 */
static void
loop_stamp(json_t *prog, const struct stage *s, int terminal)
{
	const char *phase = s ? kind_info(s->kind)->phase :
			    terminal ? "stop" : NULL;
	json_t *loop;

	if (!phase)
		return;
	loop = json_object_get(prog, "loop");
	if (!json_is_object(loop)) {
		loop = json_pack("{s:i, s:s}", "receipts", 0, "head",
				 RECEIPT_GENESIS);
		json_object_set_new(prog, "loop", loop);
	}
	json_object_set_new(loop, "phase", json_string(phase));
}

const struct stage_ops loop_ops = {
	.run = loop_run,
};

const struct type_ops loop_type = {
	.type = "loop",
	.stamp = loop_stamp,
};
