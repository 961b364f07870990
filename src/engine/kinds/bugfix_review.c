/*
 * The bug-fix family's reviews (VCP seed 002): plan-review and
 * code-review, each a versioned verdict. approved goes on; needs_changes
 * sends the run to its fix (revise for the plan) and back to the SAME
 * review; needs_clarification asks a person; rejected follows the seed's
 * table. Reviews of a parallel group (and parallel phased reviewers) run
 * at once, one child process each (fanout.c); a child writes events
 * only, and the parent takes each verdict from its result file.
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


/* ---- reviews ------------------------------------------------------------ */

static enum bugfix_review_kind
review_kind(const struct stage *s)
{
	return s->kind == KIND_PLAN_REVIEW ? BUGFIX_PLAN_REVIEW :
					     BUGFIX_CODE_REVIEW;
}

static void review_sent(struct drive *d, const struct stage *r);

/* The questions of a needs_clarification verdict, as a list. */
static char *
questions_of(struct drive *d, const char *file)
{
	json_t *doc = engine__load_json(d, file, NULL);
	json_t *qs = json_object_get(doc, "questions");
	struct buf out = BUF_INIT;
	size_t i;

	for (i = 0; i < json_array_size(qs); i++) {
		json_t *q = json_array_get(qs, i);

		if (json_is_string(q))
			buf_addf(&out, "%s%s", out.len ? "\n" : "",
				 json_string_value(q));
	}
	json_decref(doc);
	return buf_detach(&out, NULL);
}

/*
 * Routes stage s on its verdict status (the seed's result table):
 * approved goes on; needs_changes goes to the fix; needs_clarification
 * asks; rejected asks (a plan, when there are RCAs to redo), stops the
 * run (the final code review: code_rejected) or is reworked like
 * needs_changes.
 */
static int
decide(struct drive *d, const struct stage *s, const char *status,
       const char *file, enum stage_result *res, char **reason)
{
	const struct stage *rca = bf_first_of(d->p, KIND_RCA);
	char *q;
	int rc;

	if (!strcmp(status, "approved")) {
		*res = STAGE_PASS;
		return 0;
	}
	if (!strcmp(status, "needs_changes")) {
		*res = STAGE_LOOP;
		return 0;
	}
	if (!strcmp(status, "needs_clarification")) {
		q = questions_of(d, file);
		bf_set_rereview(d, s);
		rc = bf_ask(d, s, "clarification", q, NULL, s->status, res);
		free(q);
		return rc;
	}
	/* rejected */
	if (s->kind == KIND_PLAN_REVIEW && rca) {
		q = xasprintf("%s rejected the diagnosis and fix plan (%s). "
			      "Approve with guidance (more context about the "
			      "bug) to analyse it again from %s, or reject "
			      "to end the run.",
			      s->name, file, rca->name);
		rc = bf_ask(d, s, "plan_rejected", q,
			 json_pack("[s, s]", "re-examine", "reject"),
			 rca->status, res);
		free(q);
		return rc;
	}
	if (s->kind == KIND_PLAN_REVIEW) {
		d->outcome = RUN_OUTCOME_PLAN_REJECTED;
		*res = STAGE_BLOCK;
		*reason = xasprintf("%s rejected the plan (%s)", s->name, file);
		return 0;
	}
	if (s->on_reject_stop) {
		/* the seed's code_rejected: a person decides how to go on */
		q = xasprintf("%s rejected the change (%s).", s->name, file);
		review_sent(d, s);
		rc = bf_ask_restart(d, s, "restart", q,
				    RUN_OUTCOME_CODE_REJECTED,
				    &d->p->stages[s->on_changes], 1, res);
		free(q);
		return rc;
	}
	*res = STAGE_LOOP; /* a rework round, as for needs_changes */
	return 0;
}

void
bf_review_req_release(struct review_req *rq)
{
	free(rq->file);
	strvec_clear(&rq->env);
}

/* Holds a review's verdict file to its contract (call_spec.accept). */
static int
accept_verdict(struct drive *d, const struct stage *s, const char *text,
	       enum stage_result *res, char **reason, struct err *e)
{
	struct verdict_out *out = d->call->arg;
	const char *artifact = d->call->artifact;
	json_t *doc = engine__take_json(d, artifact, text, e);
	const char *status;
	int rc;

	(void)reason;
	if (!doc)
		return BATON_ECONTRACT;
	rc = bugfix_review_check(out->kind, artifact, doc, &status, e);
	if (!rc)
		rc = engine__keep_json(d, artifact, status, doc, e);
	if (!rc) {
		snprintf(out->status, sizeof(out->status), "%s", status);
		out->findings = (int)json_array_size(
			json_object_get(doc, "findings"));
		rc = engine__note(
			d, "verdict",
			json_pack("{s:s, s:i, s:s, s:s, s:i, s:s*}", "stage",
				  s->name, "version", d->call->version,
				  "status", status, "file", artifact,
				  "findings", out->findings, "summary",
				  json_get_str(doc, "summary")),
			e);
	}
	json_decref(doc);
	*res = STAGE_PASS;
	return rc;
}

/* One reviewer call for stage s. */
int
bf_review_call(struct drive *d, const struct stage *s,
	       const struct config_provider *prov, const char *steers,
	       struct review_req *rq, enum stage_result *res, char **reason,
	       struct err *e)
{
	struct buf ctx = BUF_INIT;
	size_t budget = SEED_CONTEXT_MAX;
	struct call_spec cs = { 0 };
	int rc;

	if (rq->extra)
		buf_adds(&ctx, rq->extra);
	else
		bf_seed_context(d, s, &ctx, &budget);
	rq->out.kind = rq->kind;
	cs.artifact = rq->file;
	cs.context = ctx.ptr;
	cs.template = rq->template;
	cs.kind = rq->kind_name;
	cs.env = &rq->env;
	cs.version = rq->version;
	cs.accept = accept_verdict;
	cs.arg = &rq->out;
	rc = engine__call_as(d, s, prov, steers, &cs, res, reason, e);
	buf_release(&ctx);
	return rc;
}

/* ---- parallel members -------------------------------------------------- */

/*
 * In the member's child: stage_started with its group, the review call,
 * and the verdict's status handed back to the parent.
 */
static int
member_work(struct drive *cd, struct fanout_member *fm, const char *steers,
	    json_t *out, struct err *e)
{
	struct member *m = fm->arg;
	int rc;

	engine__note(cd, "stage_started",
		     json_pack("{s:s, s:s, s:i, s:s, s:i}", "stage", m->s->name,
			       "kind",
			       m->rq.kind_name ? m->rq.kind_name :
						 stage_kind_name(m->s->kind),
			       "version", m->rq.version, "file", m->rq.file,
			       "group", m->s->group),
		     NULL);
	rc = bf_review_call(cd, m->s, &m->prov, steers, &m->rq, &fm->res,
			 &fm->reason, e);
	json_object_set_new(out, "status", json_string(m->rq.out.status));
	if (cd->missing)
		json_object_set_new(out, "missing", json_true());
	if (cd->needs)
		json_object_set_new(out, "needs", json_string(cd->needs));
	if (cd->unanswered)
		json_object_set_new(out, "unanswered", json_true());
	return rc;
}

/* In the parent as a member ends: its verdict, and "review_done". */
static int
member_done(struct drive *d, struct fanout_member *fm, struct err *e)
{
	struct member *m = fm->arg;
	const char *status = json_get_str(fm->out, "status");

	snprintf(m->rq.out.status, sizeof(m->rq.out.status), "%s",
		 status ? status : "");
	return engine__note(d, "review_done",
			    json_pack("{s:s, s:s, s:s, s:I, s:I}", "stage",
				      m->s->name, "file", m->rq.file, "status",
				      m->rq.out.status, "started_ms",
				      (json_int_t)fm->started_ms, "ended_ms",
				      (json_int_t)fm->ended_ms),
			    e);
}

/*
 * Runs the members at once, one child process each, and waits for all
 * (engine__fanout). An abort or a signal stops them all. Each member's
 * end is recorded ("review_done", with its times) as it comes.
 */
int
bf_run_members(struct drive *d, struct member *m, size_t n, const char *steers,
	       struct err *e)
{
	struct fanout_member *fm = xcalloc(n, sizeof(*fm));
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		const char *slash = strrchr(m[i].rq.file, '/');

		fm[i].s = m[i].s;
		fm[i].key = slash ? slash + 1 : m[i].rq.file;
		fm[i].label = m[i].s->name;
		fm[i].work = member_work;
		fm[i].arg = &m[i];
	}
	rc = engine__fanout(d, fm, n, 0, steers, member_done, e);
	for (i = 0; i < n; i++) {
		m[i].res = fm[i].res;
		m[i].reason = fm[i].reason;
		m[i].missing = m[i].res == STAGE_BLOCK &&
			       json_is_true(json_object_get(fm[i].out,
							    "missing"));
		m[i].refused = m[i].res == STAGE_BLOCK &&
			       json_is_string(json_object_get(fm[i].out,
							      "needs"));
		m[i].unanswered = m[i].res != STAGE_PASS &&
				  json_is_true(json_object_get(fm[i].out,
							       "unanswered"));
		fm[i].reason = NULL;
	}
	engine__fanout_release(fm, n);
	free(fm);
	return rc;
}

void
bf_members_release(struct member *m, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		bf_review_req_release(&m[i].rq);
		free(m[i].reason);
	}
	free(m);
}

/*
 * The first member that failed or was stopped, as the stage's result; a
 * missing agent or a refused credential is not a failure here (the group
 * asks about them: members_missing, members_refused).
 */
int
bf_members_failed(struct member *m, size_t n, enum stage_result *res,
		  char **reason)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (m[i].res != STAGE_PASS && !m[i].missing &&
		    !m[i].refused) {
			*res = m[i].res;
			*reason = m[i].reason;
			m[i].reason = NULL;
			return 1;
		}
	return 0;
}

/*
 * Members whose agent is not installed: one question for all of them.
 * The group stays running, so approving runs just those members again
 * (review_group's resume), and "skip" records them as skipped.
 */
static int
members_missing(struct drive *d, const struct stage *s, struct member *m,
		size_t n, enum stage_result *res)
{
	struct buf why = BUF_INIT, what = BUF_INIT;
	size_t i, k = 0;
	int rc;

	for (i = 0; i < n; i++)
		if (m[i].missing) {
			buf_addf(&why, "%s%s", k ? "\n" : "", m[i].reason);
			buf_addf(&what, "%s%s", k++ ? ", " : "", m[i].s->name);
		}
	if (!k)
		return 0;
	rc = bf_ask_install(d, s, why.ptr, what.ptr, res);
	buf_release(&why);
	buf_release(&what);
	return rc;
}

/*
 * Members whose agent was refused its credentials (a 401, "not logged
 * in", an unset key): one question (kind "needs") for all of them, as a
 * stage alone asks (route.c). The group stays running, so approving runs
 * just those members again, with the credentials as they are then;
 * rejecting ends the run blocked.
 */
static int
members_refused(struct drive *d, const struct stage *s, struct member *m,
		size_t n, enum stage_result *res)
{
	struct buf why = BUF_INIT;
	size_t i;
	int rc;

	for (i = 0; i < n; i++)
		if (m[i].refused)
			buf_addf(&why, "%s%s", why.len ? "\n" : "",
				 m[i].reason);
	if (!why.len)
		return 0;
	rc = engine__ask_needs(d, s, "credential", why.ptr, NULL, res);
	buf_release(&why);
	return rc;
}

/* ---- a review stage, alone or as its parallel group ------------------- */

static int
review_group(struct drive *d, const struct stage *s, const char *steers,
	     enum stage_result *res, char **reason, struct err *e)
{
	size_t first, n = pipeline_group(d->p, s->group, &first), i, k = 0;
	json_t *p = engine__prog_load(d), *g = bf_prog_obj(p, "groups", NULL);
	char gname[16];
	struct member *m = xcalloc(n, sizeof(*m));
	json_t *names = json_array(), *verdicts;
	char *answer = bf_take_answer(d, "agent_missing");
	int rc = 0, resumed, skip = answer && !strcmp(answer, "skip");

	free(answer);
	snprintf(gname, sizeof(gname), "%d", s->group);
	resumed = !strcmp(json_get_str(g, gname) ? json_get_str(g, gname) : "",
			  "running");
	json_decref(p);
	for (i = 0; i < n; i++) {
		const struct stage *ms = &d->p->stages[first + i];
		char *st = bf_stage_str(d, ms->name, "status");
		int pending = !resumed || !st;

		free(st);
		if (pending && resumed && skip) {
			rc = bf_mark_skipped(d, ms, e);
			if (rc)
				goto out;
			pending = 0;
		}
		if (!pending)
			continue; /* decided before the driver died */
		/* a member's budget: the group goes on when raised */
		if (engine__stage_pause(d, ms, s, res, &rc, e))
			goto out;
		if (bf_who(d, ms, NULL, NULL, &m[k].prov, reason)) {
			*res = STAGE_FAIL;
			goto out;
		}
		m[k].s = ms;
		m[k].rq.kind = review_kind(ms);
		m[k].rq.version = bf_begin_version(d, ms);
		m[k].rq.file = bugfix_output_name(stage_kind_name(ms->kind),
						  m[k].prov.name,
						  m[k].prov.model, ms->index,
						  m[k].rq.version);
		json_array_append_new(names, json_string(ms->name));
		k++;
	}
	p = engine__prog_load(d);
	json_object_set_new(bf_prog_obj(p, "groups", NULL), gname,
			    json_string("running"));
	engine__prog_save(d, p);
	json_decref(p);
	if (k)
		rc = engine__note(d, "group_started",
				  json_pack("{s:i, s:O}", "group", s->group,
					    "stages", names),
				  e);
	if (!rc && k)
		rc = bf_run_members(d, m, k, steers, e);
	for (i = 0; !rc && i < k; i++)
		if (m[i].res == STAGE_PASS)
			bf_mark(d, m[i].s->name, m[i].rq.version,
			     m[i].rq.out.status, m[i].rq.file);
	if (rc || d->stop) {
		*res = STAGE_STOPPED;
		goto out;
	}
	if (bf_members_failed(m, k, res, reason))
		goto out;
	rc = members_missing(d, s, m, k, res);
	if (!rc && *res != STAGE_ASK)
		rc = members_refused(d, s, m, k, res);
	if (rc || *res == STAGE_ASK)
		goto out;
	p = engine__prog_load(d);
	json_object_set_new(bf_prog_obj(p, "groups", NULL), gname,
			    json_string("done"));
	engine__prog_save(d, p);
	json_decref(p);
	verdicts = json_object();
	for (i = 0; i < n; i++) {
		char *st = bf_stage_str(d, d->p->stages[first + i].name,
				     "status");

		json_object_set_new(verdicts, d->p->stages[first + i].name,
				    json_string(st ? st : ""));
		free(st);
	}
	rc = engine__note(d, "group_done",
			  json_pack("{s:i, s:o}", "group", s->group,
				    "verdicts", verdicts),
			  e);
	/* stops and questions first; fix rounds after (review_pending) */
	*res = STAGE_PASS;
	for (i = 0; !rc && i < n && *res == STAGE_PASS; i++) {
		const struct stage *ms = &d->p->stages[first + i];
		char *st = bf_stage_str(d, ms->name, "status");
		char *file = bf_stage_str(d, ms->name, "file");

		if (st && (!strcmp(st, "needs_clarification") ||
			   !strcmp(st, "rejected")))
			rc = decide(d, ms, st, file, res, reason);
		if (*res == STAGE_LOOP) /* a rework: like needs_changes */
			*res = STAGE_PASS;
		free(st);
		free(file);
	}
out:
	json_decref(names);
	bf_members_release(m, n);
	return rc;
}

int
bf_review_stage(struct drive *d, const struct stage *s, const char *steers,
		enum stage_result *res, char **reason, struct err *e)
{
	struct config_provider prov;
	struct review_req rq = { .env = STRVEC_INIT };
	char *again = bf_prog_str(d, "rereview");
	int rc;

	if (s->group && (!again || strcmp(again, s->name))) {
		free(again);
		return review_group(d, s, steers, res, reason, e);
	}
	free(again);
	*res = STAGE_FAIL;
	rc = bf_skip_answered(d, s, res, e);
	if (rc || *res == STAGE_PASS)
		return rc;
	if (bf_who(d, s, NULL, NULL, &prov, reason))
		return 0;
	rq.kind = review_kind(s);
	rq.version = bf_begin_version(d, s);
	rq.file = bugfix_output_name(stage_kind_name(s->kind), prov.name,
				     prov.model, s->index, rq.version);
	rc = bf_review_call(d, s, &prov, steers, &rq, res, reason, e);
	if (!rc && *res == STAGE_PASS) {
		bf_mark(d, s->name, rq.version, rq.out.status, rq.file);
		bf_prog_set_str(d, "rereview", NULL);
		rc = decide(d, s, rq.out.status, rq.file, res, reason);
	} else if (!rc) {
		rc = bf_ask_missing(d, s, res, reason);
	}
	bf_review_req_release(&rq);
	return rc;
}

/*
 * After seed review s passed: the review in s's group still waiting for
 * a fix round, or NULL (then the run goes on past the group).
 */
static const struct stage *
review_pending(struct drive *d, const struct stage *s)
{
	const struct stage *found = NULL;
	size_t first, n, i;

	if (!s->group)
		return NULL;
	n = pipeline_group(d->p, s->group, &first);
	for (i = 0; i < n && !found; i++) {
		const struct stage *m = &d->p->stages[first + i];
		char *st = bf_stage_str(d, m->name, "status");

		if (st && (!strcmp(st, "needs_changes") ||
			   !strcmp(st, "rejected")))
			found = m;
		free(st);
	}
	return found;
}

/* Review r sends the run to its fix, which comes back to r alone (not
 * its whole parallel group). */
static void
review_sent(struct drive *d, const struct stage *r)
{
	bf_prog_set_str(d, "back", r->name);
	bf_prog_set_str(d, "rereview", NULL);
}

static char *
review_exhausted(struct drive *d, const struct stage *s, const char *reason,
		 const char **outcome)
{
	(void)reason;
	*outcome = RUN_OUTCOME_MAX_ITERATIONS;
	return xasprintf("%s still asks for changes after %d fix round%s: the "
			 "pipeline's max_iterations (%d) is spent",
			 s->name, d->r.review_loops,
			 d->r.review_loops == 1 ? "" : "s",
			 d->r.max_review_loops);
}

/* The rounds are spent: a person may restart, revise or grant one. */
static int
review_stuck(struct drive *d, const struct stage *s, const char *why,
	     const char *outcome, enum stage_result *res)
{
	if (s->on_changes < 0)
		return 0;
	review_sent(d, s);
	return bf_ask_restart(d, s, "restart", why,
			      outcome ? outcome : RUN_OUTCOME_MAX_ITERATIONS,
			      &d->p->stages[s->on_changes], 1, res);
}

const struct stage_ops bugfix_review_ops = {
	.run = bf_review_stage,
	.pending = review_pending,
	.on_loop = review_sent,
	.exhausted = review_exhausted,
	.stuck = review_stuck,
};
