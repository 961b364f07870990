/*
 * The bug-fix family's implementation (VCP seed 002): the fix, whole, or
 * one plan step at a time with phased reviews every review_interval
 * steps, each step a checkpoint, its progress in the run record so a
 * driver that dies mid-way is followed by one that knows the next step.
 */
#include "util/compat.h"

#include "agent/agent.h"
#include "core/bugfix.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "engine/engine.h"
#include "engine/kinds/bugfix_int.h"
#include "engine/kinds/kind.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"


/* ---- implementation -------------------------------------------------- */

/* A step of a phased implementation (call_spec.arg of its call). */
struct step_info {
	int step, version;
	int advance;	/* a new step, not a fix of one: progress moves on */
};

/* Before the step's commit: its progress, written in the same write. */
static void
step_progress(struct drive *d, const struct step_info *si)
{
	json_t *p = engine__prog_load(d), *st = bf_prog_obj(p, "steps", NULL);
	char key[16];

	snprintf(key, sizeof(key), "%d", si->step);
	json_object_set_new(bf_prog_obj(st, "versions", NULL), key,
			    json_integer(si->version));
	if (si->advance)
		json_object_set_new(st, "next", json_integer(si->step + 1));
	engine__prog_save(d, p);
	json_decref(p);
}

static int
accept_impl(struct drive *d, const struct stage *s, const char *text,
	    enum stage_result *res, char **reason, struct err *e)
{
	const char *artifact = d->call->artifact;
	struct err why = ERR_INIT;
	json_t *doc = engine__take_json(d, artifact, text, &why);
	const char *status, *blocker;
	int rc;

	(void)reason;
	if (!doc) {
		/* an agent that only edits and talks: its words are the
		 * summary */
		doc = json_pack("{s:s, s:s}", "status", "complete", "summary",
				text && *text ? text : "(no summary)");
	}
	rc = bugfix_impl_check(artifact, doc, e);
	status = json_get_str(doc, "status");
	blocker = json_get_str(doc, "blocker");
	if (blocker && !*blocker)
		blocker = NULL;
	/* the seed's "partial: continue implementation" */
	if (!rc && !strcmp(status, "partial") && !blocker)
		rc = err_set(e, BATON_ECONTRACT,
			     "%s: status partial: finish the remaining work of "
			     "the plan and report complete (or name what "
			     "stops you in \"blocker\")",
			     artifact);
	if (!rc)
		rc = engine__keep_json(d, artifact, status, doc, e);
	if (!rc && strcmp(status, "complete")) {
		/* the seed's "partial + true blocker" and "failed": a person
		 * decides how to go on */
		char *stuck = xasprintf(
			"%s: the implementer %s: %s", s->name,
			blocker ? "stopped at a blocker" : "reported failed",
			blocker ? blocker :
			json_get_str(doc, "summary") ? json_get_str(doc, "summary") :
						       "(no summary)");

		rc = bf_ask_restart(d, s, blocker ? "blocker" : "restart",
				    stuck, RUN_OUTCOME_IMPL_FAILED, s, 0, res);
		free(stuck);
	} else if (!rc) {
		if (d->call->arg)
			step_progress(d, d->call->arg);
		rc = engine__checkpoint(d, s, res, reason, e);
	}
	json_decref(doc);
	return rc;
}

/* One plan step of a phased implementation, or a fix of it. */
static int
impl_step(struct drive *d, const struct stage *s,
	  const struct config_provider *prov, const char *steers, int step,
	  int version, const char *issues, enum stage_result *res,
	  char **reason, struct err *e)
{
	struct step_info si = { step, version, !issues };
	struct strvec env = STRVEC_INIT;
	struct call_spec cs = { 0 };
	struct buf ctx = BUF_INIT;
	json_t *plan = engine__load_json(d, "fix-plan.json", NULL);
	json_t *one = json_array_get(json_object_get(plan, "steps"),
				     (size_t)step - 1);
	size_t budget = SEED_CONTEXT_MAX;
	char *text = one ? json_dumps(one, JSON_INDENT(2)) : xstrdup("");
	char *file = xasprintf("impl-steps/impl-step-%d-v%d.json", step,
			       version);
	int rc;

	strvec_pushf(&env, "BATON_STEP=%d", step);
	buf_addf(&ctx, "## Plan step %d of %zu (implement ONLY this step)\n\n"
		       "%s\n\n",
		 step, bugfix_plan_steps(plan), text);
	if (issues)
		prompt_section(&ctx, "Issues the phased review found "
				     "(fix them within this step)",
			       issues, &budget);
	bf_seed_context(d, s, &ctx, &budget);
	cs.artifact = file;
	cs.context = ctx.ptr;
	cs.template = "implementation-step";
	cs.env = &env;
	cs.version = version;
	cs.accept = accept_impl;
	cs.arg = &si;
	rc = engine__call_as(d, s, prov, steers, &cs, res, reason, e);
	json_decref(plan);
	strvec_clear(&env);
	buf_release(&ctx);
	free(text);
	free(file);
	return rc;
}

/* The progress of a phased implementation (progress.steps). */
struct steps {
	int total, next, reviewed;
	int round;	/* fix rounds of the batch under review */
	int reviews;	/* reviews of it so far: the next verdict version */
};

static void
steps_load(struct drive *d, struct steps *st, int total)
{
	json_t *p = engine__prog_load(d), *o = json_object_get(p, "steps");

	st->total = total;
	st->next = (int)json_integer_value(json_object_get(o, "next"));
	st->reviewed = (int)json_integer_value(json_object_get(o, "reviewed"));
	st->round = (int)json_integer_value(json_object_get(o, "round"));
	st->reviews = (int)json_integer_value(json_object_get(o, "reviews"));
	if (st->next < 1)
		st->next = 1;
	json_decref(p);
}

static void
steps_save(struct drive *d, const struct steps *st)
{
	json_t *p = engine__prog_load(d), *o = bf_prog_obj(p, "steps", NULL);

	json_object_set_new(o, "total", json_integer(st->total));
	json_object_set_new(o, "next", json_integer(st->next));
	json_object_set_new(o, "reviewed", json_integer(st->reviewed));
	json_object_set_new(o, "round", json_integer(st->round));
	json_object_set_new(o, "reviews", json_integer(st->reviews));
	engine__prog_save(d, p);
	json_decref(p);
}

static int
step_version(struct drive *d, int step)
{
	json_t *p = engine__prog_load(d);
	char key[16];
	int v;

	snprintf(key, sizeof(key), "%d", step);
	v = (int)json_integer_value(json_object_get(
		json_object_get(json_object_get(p, "steps"), "versions"), key));
	json_decref(p);
	return v;
}

/* What the phased reviewers of steps a..b read: the steps and their
 * implementations, then the earlier stages. */
static char *
batch_context(struct drive *d, const struct stage *s, int a, int b)
{
	json_t *plan = engine__load_json(d, "fix-plan.json", NULL);
	size_t budget = SEED_CONTEXT_MAX;
	struct buf ctx = BUF_INIT;
	int k;

	buf_addf(&ctx, "## Review plan steps %d to %d of %zu, and only "
		       "those; check that they fit together\n\n",
		 a, b, bugfix_plan_steps(plan));
	for (k = a; k <= b; k++) {
		json_t *one = json_array_get(json_object_get(plan, "steps"),
					     (size_t)k - 1);
		char *text = one ? json_dumps(one, JSON_COMPACT) : NULL;
		char *name = xasprintf("impl-steps/impl-step-%d-v%d.json", k,
				       step_version(d, k));
		char *title = xasprintf("Step %d as implemented (%s)", k,
					name);

		buf_addf(&ctx, "- step %d: %s\n", k, text ? text : "?");
		engine__add_file(d, &ctx, title, name, &budget);
		free(text);
		free(name);
		free(title);
	}
	buf_addch(&ctx, '\n');
	bf_seed_context(d, s, &ctx, &budget);
	json_decref(plan);
	return buf_detach(&ctx, NULL);
}

/*
 * The seed's synthetic verdict: a phased reviewer that gave no answer
 * (its agent exited, crashed or timed out, or wrote nothing valid, after
 * its retries) counts as needs_changes with no findings, marked
 * "synthetic" with the reason, and the loop goes on; the round counts
 * against max_phased_iterations, so a reviewer that never answers ends
 * at the person's question like any other.
 */
static int
synthetic_verdict(struct drive *d, const struct stage *s, struct member *m,
		  int version, struct err *e)
{
	char *why = xasprintf("dispatch failed: %s",
			      m->reason ? m->reason : "no answer");
	json_t *doc = json_pack("{s:s, s:b, s:s, s:s, s:[]}", "status",
				"needs_changes", "synthetic", 1, "reason", why,
				"summary", why, "findings");
	int rc;

	rc = engine__keep_json(d, m->rq.file, "needs_changes", doc, e);
	if (!rc)
		rc = engine__note(
			d, "verdict",
			json_pack("{s:s, s:i, s:s, s:s, s:i, s:b, s:s}",
				  "stage", s->name, "version", version,
				  "status", "needs_changes", "file",
				  m->rq.file, "findings", 0, "synthetic", 1,
				  "reason", why),
			e);
	if (!rc) {
		snprintf(m->rq.out.status, sizeof(m->rq.out.status), "%s",
			 "needs_changes");
		m->res = STAGE_PASS;
		free(m->reason);
		m->reason = NULL;
	}
	json_decref(doc);
	free(why);
	return rc;
}

/*
 * The phased reviewers on steps a..b, writing verdict version r + 1: the
 * parallel ones at once, the others in turn. *issues gets
 * the findings of those that want changes (NULL when all approved), and
 * hit[] the steps they concern.
 */
static int
review_batch(struct drive *d, const struct stage *s, const char *steers,
	     int a, int b, int r, char **issues, int *hit,
	     enum stage_result *res, char **reason, struct err *e)
{
	struct member *m = xcalloc(s->nr_phased, sizeof(*m));
	char *extra = batch_context(d, s, a, b);
	json_t *plan = engine__load_json(d, "fix-plan.json", NULL);
	json_t *verdicts = json_object();
	struct buf found = BUF_INIT;
	size_t i, np = 0;
	int rc = 0, want = 0;

	*issues = NULL;
	for (i = 0; i < s->nr_phased; i++) {
		const struct phased_reviewer *pr = &s->phased[i];

		if (bf_who(d, s, pr->provider, pr->model, &m[i].prov, reason)) {
			*res = STAGE_FAIL;
			goto out;
		}
		m[i].s = s;
		m[i].rq.kind = BUGFIX_PHASED_REVIEW;
		m[i].rq.version = r + 1;
		m[i].rq.file = xasprintf(
			"phased-reviews/phased-review-%s-%s-steps-%d-%d-v%d.json",
			pr->provider, pr->model ? pr->model : "default", a, b,
			r + 1);
		m[i].rq.extra = extra;
		m[i].rq.template = "phased-review";
		m[i].rq.kind_name = "phased-review";
		m[i].rq.env = (struct strvec)STRVEC_INIT;
		strvec_pushf(&m[i].rq.env, "BATON_STEPS=%d-%d", a, b);
		np += pr->parallel;
	}
	/* the parallel reviewers at once, then the others in turn */
	if (np > 1) {
		struct member *par = xcalloc(np, sizeof(*par));
		size_t k = 0;

		for (i = 0; i < s->nr_phased; i++)
			if (s->phased[i].parallel)
				par[k++] = m[i];
		rc = bf_run_members(d, par, np, steers, e);
		for (i = 0, k = 0; i < s->nr_phased; i++)
			if (s->phased[i].parallel) {
				m[i].res = par[k].res;
				m[i].reason = par[k].reason;
				m[i].rq.out = par[k].rq.out;
				m[i].unanswered = par[k].unanswered;
				m[i].refused = par[k].refused;
				k++;
			}
		free(par);
		if (rc || d->stop) {
			*res = STAGE_STOPPED;
			goto out;
		}
	}
	for (i = 0; !rc && i < s->nr_phased; i++) {
		if (np > 1 && s->phased[i].parallel)
			continue;
		rc = bf_review_call(d, s, &m[i].prov, steers, &m[i].rq, &m[i].res,
				 &m[i].reason, e);
		m[i].unanswered = m[i].res != STAGE_PASS && d->unanswered;
	}
	for (i = 0; !rc && i < s->nr_phased; i++)
		if (m[i].unanswered)
			rc = synthetic_verdict(d, s, &m[i], r + 1, e);
	if (rc)
		goto out;
	for (i = 0; i < s->nr_phased; i++)
		if (m[i].refused) {
			/* the stage asks for it (route.c) and runs again */
			*res = STAGE_BLOCK;
			*reason = m[i].reason;
			m[i].reason = NULL;
			d->needs = "credential";
			goto out;
		}
	if (bf_members_failed(m, s->nr_phased, res, reason))
		goto out;
	for (i = 0; i < s->nr_phased; i++) {
		json_t *doc;

		json_object_set_new(verdicts, m[i].rq.file,
				    json_string(m[i].rq.out.status));
		if (!strcmp(m[i].rq.out.status, "approved"))
			continue;
		want = 1;
		doc = engine__load_json(d, m[i].rq.file, NULL);
		if (doc && m[i].unanswered) {
			/* no findings: no step to fix, the batch is
			 * reviewed again next round */
			buf_addf(&found, "%s (needs_changes, synthetic): %s\n",
				 m[i].rq.file,
				 json_get_str(doc, "reason"));
		} else if (doc) {
			char *text = json_dumps(json_object_get(doc,
								"findings"),
						JSON_COMPACT);

			int *mine = xcalloc((size_t)b - (size_t)a + 1, sizeof(*mine));
			int k;

			/* the steps any reviewer's findings name */
			bugfix_steps_hit(plan, doc, a, b, mine);
			for (k = 0; k <= b - a; k++)
				hit[k] |= mine[k];
			free(mine);
			buf_addf(&found, "%s (%s): %s\n", m[i].rq.file,
				 m[i].rq.out.status, text ? text : "[]");
			free(text);
		}
		json_decref(doc);
	}
	rc = engine__note(d, "batch_review",
			  json_pack("{s:s, s:i, s:i, s:i, s:O}", "stage",
				    s->name, "first", a, "last", b, "round",
				    r, "verdicts", verdicts),
			  e);
	if (want)
		*issues = buf_detach(&found, NULL);
	*res = STAGE_PASS;
out:
	bf_members_release(m, s->nr_phased);
	json_decref(verdicts);
	json_decref(plan);
	buf_release(&found);
	free(extra);
	return rc;
}

/* Writes impl-result.json from the steps' own results. */
static int
aggregate(struct drive *d, const struct stage *s, int total, struct err *e)
{
	json_t *out = json_pack("{s:s, s:b, s:i, s:[], s:[]}", "status",
				"complete", "phased", 1, "steps_completed",
				total, "files_modified", "files_created");
	struct buf notes = BUF_INIT;
	int k, rc;

	for (k = 1; k <= total; k++) {
		char *name = xasprintf("impl-steps/impl-step-%d-v%d.json", k,
				       step_version(d, k));
		json_t *doc = engine__load_json(d, name, NULL);
		const char *lists[] = { "files_modified", "files_created" };
		size_t i, j;

		for (j = 0; j < 2; j++) {
			json_t *from = json_object_get(doc, lists[j]);

			for (i = 0; i < json_array_size(from); i++)
				json_array_append(json_object_get(out, lists[j]),
						  json_array_get(from, i));
		}
		if (json_get_str(doc, "summary"))
			buf_addf(&notes, "step %d: %s\n", k,
				 json_get_str(doc, "summary"));
		json_decref(doc);
		free(name);
	}
	json_object_set_new(out, "summary",
			    json_string(notes.len ? notes.ptr :
						    "all plan steps done"));
	rc = engine__keep_json(d, "impl-result.json", "complete", out, e);
	(void)s;
	json_decref(out);
	buf_release(&notes);
	return rc;
}

/*
 * A plan of more than PHASED_STEPS_ASK steps is implemented step by step
 * only once a person approved it (asked once; the answer is kept).
 */
static int
long_plan(struct drive *d, const struct stage *s, int total,
	  enum stage_result *res)
{
	char *agreed = bf_prog_str(d, "long_plan"), *answer, *q;
	int rc;

	if (agreed) {
		free(agreed);
		return 0;
	}
	answer = bf_take_answer(d, "long_plan");
	if (answer) {
		free(answer);
		bf_prog_set_str(d, "long_plan", "approved");
		return 0;
	}
	q = xasprintf("The fix plan has %d steps with phased reviews enabled: "
		      "%d implementation calls and %d batch reviews at the "
		      "least, more than the recommended %d steps. Consider "
		      "splitting the plan or disabling phased_reviews. "
		      "Approve to proceed anyway, or reject to end the run.",
		      total, total,
		      (total + s->review_interval - 1) / s->review_interval,
		      PHASED_STEPS_ASK);
	rc = bf_ask(d, s, "long_plan", q, json_pack("[s, s]", "proceed",
						 "reject"),
		 s->status, res);
	free(q);
	return rc;
}

/*
 * A phased implementation: one plan step at a time, each committed; the
 * phased reviewers on every review_interval steps (and the last); fixes
 * scoped to the steps the findings name; after max_phased_iterations
 * rounds a person decides (there is no skipping forward). progress.steps
 * and the checkpoint are written together, so a driver that dies goes on
 * at the step after the last committed one.
 */
static int
phased(struct drive *d, const struct stage *s,
       const struct config_provider *prov, const char *steers,
       enum stage_result *res, char **reason, struct err *e)
{
	json_t *plan = engine__load_json(d, "fix-plan.json", e);
	int total = (int)bugfix_plan_steps(plan), *hit = NULL;
	struct steps st;
	char *answer = bf_take_answer(d, "phased"), *issues = NULL;
	int rc = 0, done;

	json_decref(plan);
	if (total < 1) {
		*res = STAGE_FAIL;
		*reason = xasprintf("stage %s: no fix plan steps to implement",
				    s->name);
		free(answer);
		return 0;
	}
	if (total > PHASED_STEPS_ASK) {
		rc = long_plan(d, s, total, res);
		if (rc || *res == STAGE_ASK) {
			free(answer);
			return rc;
		}
	}
	steps_load(d, &st, total);
	if (answer)
		st.round = 0; /* a person took over: review the batch anew */
	hit = xcalloc((size_t)total, sizeof(*hit));
	d->in_steps = 1;
	*res = STAGE_PASS;
	for (;;) {
		done = st.next - 1;
		if (done > st.reviewed &&
		    (done - st.reviewed >= s->review_interval || done == total)) {
			int a = st.reviewed + 1, k;

			memset(hit, 0, (size_t)total * sizeof(*hit));
			free(issues);
			rc = review_batch(d, s, steers, a, done, st.reviews,
					  &issues, hit + a - 1, res, reason, e);
			if (rc || *res != STAGE_PASS)
				break;
			st.reviews++;
			if (!issues) {
				st.reviewed = done;
				st.round = st.reviews = 0;
				steps_save(d, &st);
				continue;
			}
			st.round++;
			steps_save(d, &st);
			if (st.round >= s->max_phased_iterations) {
				char *q = xasprintf(
					"The phased review of steps %d-%d still "
					"asks for changes after %d rounds:\n%s\n"
					"Fix it yourself in the worktree and "
					"approve (the batch is reviewed "
					"again), or reject to end the run.",
					a, done, st.round, issues);

				rc = bf_ask(d, s, "phased", q, NULL, s->status,
					 res);
				free(q);
				break;
			}
			for (k = a; !rc && k <= done && *res == STAGE_PASS; k++)
				if (hit[k - 1])
					rc = impl_step(d, s, prov, steers, k,
						       step_version(d, k) + 1,
						       issues, res, reason, e);
			if (rc || *res != STAGE_PASS)
				break;
			continue;
		}
		if (st.next > total)
			break;
		/* the step's commit and its progress go in one write */
		rc = impl_step(d, s, prov, steers, st.next, 1, NULL, res,
			       reason, e);
		if (rc || *res != STAGE_PASS)
			break;
		steps_load(d, &st, total);
		rc = engine__note(d, "step_done",
				  json_pack("{s:s, s:i, s:i}", "stage", s->name,
					    "step", st.next - 1, "of", total),
				  e);
		if (rc)
			break;
	}
	d->in_steps = 0;
	if (!rc && *res == STAGE_PASS)
		rc = aggregate(d, s, total, e);
	free(hit);
	free(issues);
	free(answer);
	return rc;
}

int
bf_implement_stage(struct drive *d, const struct stage *s, const char *steers,
		enum stage_result *res, char **reason, struct err *e)
{
	struct config_provider prov;
	struct call_spec cs = { 0 };
	struct buf ctx = BUF_INIT;
	size_t budget = SEED_CONTEXT_MAX;
	int rc;

	if (bf_who(d, s, NULL, NULL, &prov, reason)) {
		*res = STAGE_FAIL;
		return 0;
	}
	if (s->nr_phased) {
		rc = phased(d, s, &prov, steers, res, reason, e);
	} else {
		bf_seed_context(d, s, &ctx, &budget);
		cs.artifact = "impl-result.json";
		cs.context = ctx.ptr;
		cs.accept = accept_impl;
		rc = engine__call_as(d, s, &prov, steers, &cs, res, reason, e);
	}
	/* the seed's implementation_failed: whatever stopped the fix */
	if (!rc && (*res == STAGE_FAIL || *res == STAGE_BLOCK) && !d->outcome)
		d->outcome = RUN_OUTCOME_IMPL_FAILED;
	buf_release(&ctx);
	return rc;
}

const struct stage_ops bugfix_implement_ops = {
	.run = bf_implement_stage,
};
