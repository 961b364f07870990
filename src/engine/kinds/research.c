/*
 * The research stages (openTiger's TigerResearch, seed 001) on the one
 * engine. A research run has no git: its agents work in the run folder,
 * and what it leaves is a judged report, not a branch.
 *
 *   claims     (planning)     a planner splits the question into claims:
 *                             claims.json
 *   collect    (collecting)   one researcher per claim still to collect,
 *                             all at once (at most COLLECT_AT_ONCE): each
 *                             leaves evidence/<id>-v<round>.json
 *   challenge  (challenging)  a reviewer looks for counter-evidence:
 *                             challenge.json
 *   compose    (composing)    a writer writes report.md
 *   judge      (judging)      pass: the run is completed; rework: the
 *                             claims it names are weak and go back to
 *                             collect (on_changes), one round more, until
 *                             the pipeline's max_iterations are spent
 *
 * The claims, their evidence and the verdicts live in the run record
 * (runs.progress under "research", core/research.h), written with every
 * run write, so a driver that dies anywhere is followed by one that
 * collects exactly the claims still pending or weak.
 *
 * Collecting fans out (fanout.c): each claim's researcher runs in a child
 * process of its own and writes only bare events (claim_started,
 * claim_collected); the parent merges every result into the state in one
 * run write. A member runs as a copy of the collect stage named
 * "<stage>-<claim>" ("collect-c2"), so that each has its own call files,
 * prompt and events.
 */
#include "util/compat.h"

#include "core/config.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "core/research.h"
#include "engine/engine.h"
#include "engine/kinds/kind.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* The context a research stage adds, before the stage's own sections. */
#define RESEARCH_CONTEXT_MAX (32 * 1024)
/* One claim's line in the summary every prompt reads. */
#define SUMMARY_LINE_MAX 300
/* Researchers collecting at once. */
#define COLLECT_AT_ONCE 8

/* ---- state ------------------------------------------------------------- */

/* progress.research, created when absent; borrowed from p. */
static json_t *
state_of(json_t *p)
{
	return engine__prog_part(p, "research");
}

/* ---- who does a stage ------------------------------------------------- */

/*
 * The provider of stage s: its own, or its role's, with the stage's model
 * and timeout over it. A copy sharing the config's strings; -1 with
 * *reason set when none plays it.
 */
static int
who(struct drive *d, const struct stage *s, struct config_provider *out,
    char **reason)
{
	return engine__players(d, s, out, 1, reason) ? 0 : -1;
}

/* ---- context: what each stage reads ----------------------------------- */

/* What every research prompt starts from: the claims so far. */
static void
base_context(const json_t *st, struct buf *ctx, size_t *budget)
{
	struct buf sum = BUF_INIT;

	research_summary(st, SUMMARY_LINE_MAX, &sum);
	prompt_section(ctx, "The claims so far", sum.ptr, budget);
	buf_release(&sum);
}

/* Each claim's latest evidence record, one section each. */
static void
evidence_context(struct drive *d, const json_t *st, struct buf *ctx,
		 size_t *budget)
{
	json_t *claims = json_object_get(st, "claims"), *c;
	size_t i;

	for (i = 0; i < json_array_size(claims); i++) {
		const char *file;
		char *title;

		c = json_array_get(claims, i);
		file = json_get_str(c, "file");
		if (!file)
			continue;
		title = xasprintf("Evidence for claim %s (%s)",
				  json_get_str(c, "id"), file);
		engine__add_file(d, ctx, title, file, budget);
		free(title);
	}
}

/* The challenges against claim id, as lines. */
static void
challenges_of(struct drive *d, const char *id, struct buf *out)
{
	json_t *doc = engine__load_json(d, "challenge.json", NULL), *list, *c;
	size_t i;

	list = json_object_get(doc, "challenges");
	for (i = 0; i < json_array_size(list); i++) {
		const char *cid;

		c = json_array_get(list, i);
		cid = json_get_str(c, "claim");
		if (cid && !strcmp(cid, id))
			buf_addf(out, "- (%s) %s\n",
				 json_get_str(c, "severity")
				     ? json_get_str(c, "severity")
				     : "?",
				 json_get_str(c, "counter_evidence")
				     ? json_get_str(c, "counter_evidence")
				     : "");
	}
	json_decref(doc);
}

/*
 * What a claim's researcher reads: the claim, then on a rework round why
 * the judge found it weak, the counter-evidence against it and what was
 * collected before; then the other claims. The caller frees.
 */
static char *
collect_context(struct drive *d, const json_t *st, const json_t *claim)
{
	const char *id = json_get_str(claim, "id");
	const char *file = json_get_str(claim, "file");
	const char *status = json_get_str(claim, "status");
	json_t *j = json_object_get(st, "judgement");
	size_t budget = RESEARCH_CONTEXT_MAX;
	struct buf ctx = BUF_INIT, against = BUF_INIT;
	char *title;

	title = xasprintf("The claim to research (%s)", id);
	prompt_section(&ctx, title, json_get_str(claim, "text"), &budget);
	free(title);
	if (status && !strcmp(status, "weak") &&
	    json_get_str(claim, "gate_reasons")) {
		prompt_section(&ctx, "Why the quality gate sent it back",
			       json_get_str(claim, "gate_reasons"), &budget);
		challenges_of(d, id, &against);
		prompt_section(&ctx, "Counter-evidence raised against it",
			       against.ptr, &budget);
		if (file) {
			title = xasprintf("What was collected before (%s): "
					  "find better sources, from more "
					  "domains, and evidence against it",
					  file);
			engine__add_file(d, &ctx, title, file, &budget);
			free(title);
		}
	} else if (status && !strcmp(status, "weak")) {
		prompt_section(&ctx, "Why the judge found it weak",
			       json_get_str(j, "reasons"), &budget);
		challenges_of(d, id, &against);
		prompt_section(&ctx, "Counter-evidence raised against it",
			       against.ptr, &budget);
		if (file) {
			title = xasprintf("What was collected before (%s): "
					  "find better sources",
					  file);
			engine__add_file(d, &ctx, title, file, &budget);
			free(title);
		}
	}
	base_context(st, &ctx, &budget);
	buf_release(&against);
	return buf_detach(&ctx, NULL);
}

/* ---- one agent call ----------------------------------------------------- */

/* A stage of one call: its provider, the call, and the stop paths. */
static int
one_call(struct drive *d, const struct stage *s, const char *steers,
	 struct call_spec *cs, enum stage_result *res, char **reason,
	 struct err *e)
{
	struct config_provider prov;

	if (who(d, s, &prov, reason)) {
		*res = STAGE_FAIL;
		return 0;
	}
	return engine__call_as(d, s, &prov, steers, cs, res, reason, e);
}

/* ---- claims (planning) -------------------------------------------------- */

static int
accept_claims(struct drive *d, const struct stage *s, const char *text,
	      enum stage_result *res, char **reason, struct err *e)
{
	const char *artifact = d->call->artifact;
	json_t *doc = engine__take_json(d, artifact, text, e), *p, *ids, *list;
	size_t i;
	int rc;

	(void)reason;
	if (!doc)
		return BATON_ECONTRACT;
	rc = research_claims_check(artifact, doc, RESEARCH_MAX_CLAIMS, e);
	if (!rc)
		rc = engine__keep_json(d, artifact, NULL, doc, e);
	if (rc)
		goto out;
	p = engine__prog_load(d);
	json_object_set_new(p, "research", research_state_new(d->r.task, doc));
	engine__prog_save(d, p);
	json_decref(p);
	ids = json_array();
	list = json_object_get(doc, "claims");
	for (i = 0; i < json_array_size(list); i++)
		json_array_append(
		    ids, json_object_get(json_array_get(list, i), "id"));
	rc = engine__note(d, "claims",
			  json_pack("{s:s, s:s, s:I, s:o}", "stage", s->name,
				    "file", artifact, "count",
				    (json_int_t)json_array_size(ids), "claims",
				    ids),
			  e);
	*res = STAGE_PASS;
out:
	json_decref(doc);
	return rc;
}

static int
claims_stage(struct drive *d, const struct stage *s, const char *steers,
	     enum stage_result *res, char **reason, struct err *e)
{
	struct call_spec cs = { 0 };
	char limit[96];

	snprintf(limit, sizeof(limit),
		 "## Limits\n\nAt most %d claims; ids of 1 to %d characters "
		 "a-z, 0-9 or '-'.\n\n",
		 RESEARCH_MAX_CLAIMS, RESEARCH_ID_MAX);
	cs.artifact = "claims.json";
	cs.template = "research-claims";
	cs.context = limit;
	cs.accept = accept_claims;
	return one_call(d, s, steers, &cs, res, reason, e);
}

/* ---- collect (collecting): one researcher per claim, at once ---------- */

/* One claim's researcher (fanout_member.arg). */
struct collect_job {
	const char *id, *text; /* borrowed from the state */
	char *name;	       /* the member's stage name: "collect-c2" */
	struct stage stage;    /* the collect stage under that name */
	struct config_provider prov;
	char *file; /* evidence/<id>-v<round>.json */
	char *context;
	int round;
	char verdict[16]; /* in the child: what the accept took */
	double confidence;
	size_t items;
};

static int
accept_evidence(struct drive *d, const struct stage *s, const char *text,
		enum stage_result *res, char **reason, struct err *e)
{
	struct collect_job *j = d->call->arg;
	json_t *doc = engine__take_json(d, j->file, text, e);
	int rc;

	(void)s;
	(void)reason;
	if (!doc)
		return BATON_ECONTRACT;
	rc = research_evidence_check(j->file, doc, j->id, e);
	if (!rc)
		rc = engine__keep_json(d, j->file, json_get_str(doc, "verdict"),
				       doc, e);
	if (!rc) {
		snprintf(j->verdict, sizeof(j->verdict), "%s",
			 json_get_str(doc, "verdict"));
		j->confidence =
		    json_number_value(json_object_get(doc, "confidence"));
		j->items = json_array_size(json_object_get(doc, "evidence"));
	}
	json_decref(doc);
	*res = STAGE_PASS;
	return rc;
}

/*
 * In the member's child: claim_started, the researcher's call (one retry
 * for broken output, as every call), claim_collected.
 */
static int
collect_work(struct drive *cd, struct fanout_member *m, const char *steers,
	     json_t *out, struct err *e)
{
	struct collect_job *j = m->arg;
	struct strvec env = STRVEC_INIT;
	struct call_spec cs = { 0 };
	int64_t started = time_now_ms();
	int rc;

	strvec_pushf(&env, "BATON_CLAIM_ID=%s", j->id);
	strvec_pushf(&env, "BATON_CLAIM=%s", j->text);
	strvec_pushf(&env, "BATON_ROUND=%d", j->round);
	engine__note(cd, "claim_started",
		     json_pack("{s:s, s:s, s:i, s:I}", "stage", m->s->name,
			       "claim", j->id, "round", j->round, "started_ms",
			       (json_int_t)started),
		     NULL);
	cs.artifact = j->file;
	cs.template = "research-collect";
	cs.context = j->context;
	cs.env = &env;
	cs.version = j->round;
	cs.accept = accept_evidence;
	cs.arg = j;
	rc = engine__call_as(cd, &j->stage, &j->prov, steers, &cs, &m->res,
			   &m->reason, e);
	if (!rc && m->res == STAGE_PASS) {
		json_object_set_new(out, "verdict", json_string(j->verdict));
		rc = engine__note(
		    cd, "claim_collected",
		    json_pack("{s:s, s:s, s:i, s:I, s:I, s:s, s:f, s:I, "
			      "s:s}",
			      "stage", m->s->name, "claim", j->id, "round",
			      j->round, "started_ms", (json_int_t)started,
			      "ended_ms", (json_int_t)time_now_ms(), "verdict",
			      j->verdict, "confidence", j->confidence,
			      "evidence", (json_int_t)j->items, "file",
			      j->file),
		    e);
	}
	strvec_clear(&env);
	return rc;
}

static void
jobs_release(struct collect_job *jobs, size_t n)
{
	size_t i;

	for (i = 0; jobs && i < n; i++) {
		free(jobs[i].name);
		free(jobs[i].file);
		free(jobs[i].context);
	}
	free(jobs);
}

/*
 * After the members: every evidence record that came back goes into the
 * state (one run write, with the event). The first claim whose researcher
 * failed blocks the run, named.
 */
static int
merge_evidence(struct drive *d, const struct stage *s, struct collect_job *jobs,
	       struct fanout_member *fm, size_t n, int round,
	       enum stage_result *res, char **reason, struct err *e)
{
	json_t *p = engine__prog_load(d), *st = state_of(p);
	json_t *merged = json_array();
	const char *failed = NULL;
	size_t i;
	int rc;

	*res = STAGE_PASS;
	for (i = 0; i < n; i++) {
		struct err why = ERR_INIT;
		json_t *doc = NULL;

		if (fm[i].res == STAGE_PASS)
			doc = engine__load_json(d, jobs[i].file, &why);
		if (doc) {
			research_claim_collected(research_claim(st, jobs[i].id),
						 doc, jobs[i].file, round);
			json_array_append_new(merged, json_string(jobs[i].id));
			json_decref(doc);
			continue;
		}
		if (failed)
			continue;
		failed = jobs[i].id;
		*res = STAGE_BLOCK;
		*reason =
		    xasprintf("stage %s: no evidence for claim %s: %s", s->name,
			      jobs[i].id,
			      fm[i].reason ? fm[i].reason
			      : why.msg[0] ? why.msg
					   : "its researcher did not finish");
	}
	engine__prog_save(d, p);
	rc = engine__note(d, "evidence_merged",
			  json_pack("{s:s, s:i, s:O, s:s*}", "stage", s->name,
				    "round", round, "claims", merged, "failed",
				    failed),
			  e);
	json_decref(merged);
	json_decref(p);
	return rc;
}

/* Fills a job for each claim of st still waiting for evidence. */
static size_t
plan_jobs(struct drive *d, const struct stage *s, const json_t *st,
	  const struct config_provider *prov, int round,
	  struct collect_job *jobs, struct fanout_member *fm)
{
	json_t *claims = json_object_get(st, "claims"), *c;
	size_t i, n = 0;

	for (i = 0; i < json_array_size(claims); i++) {
		struct collect_job *j = &jobs[n];

		c = json_array_get(claims, i);
		if (!research_claim_wants_evidence(c))
			continue;
		j->id = json_get_str(c, "id");
		j->text = json_get_str(c, "text");
		j->name = xasprintf("%s-%s", s->name, j->id);
		j->stage = *s;
		j->stage.name = j->name;
		j->prov = *prov;
		j->round = round;
		j->file = xasprintf("evidence/%s-v%d.json", j->id, round);
		j->context = collect_context(d, st, c);
		fm[n].s = s;
		fm[n].key = j->name;
		fm[n].label = j->name;
		fm[n].work = collect_work;
		fm[n].arg = j;
		n++;
	}
	return n;
}

static int
collect_stage(struct drive *d, const struct stage *s, const char *steers,
	      enum stage_result *res, char **reason, struct err *e)
{
	json_t *p = engine__prog_load(d), *st = state_of(p);
	size_t total = json_array_size(json_object_get(st, "claims")), n;
	int round;
	struct collect_job *jobs = NULL;
	struct fanout_member *fm = NULL;
	struct config_provider prov;
	json_t *ids = NULL;
	size_t i;
	int rc = 0;

	*res = STAGE_PASS;
	if (!total) {
		*res = STAGE_FAIL;
		*reason = xasprintf("stage %s: there are no claims to collect "
				    "evidence for (did the planning stage "
				    "run?)",
				    s->name);
		goto out;
	}
	if (who(d, s, &prov, reason)) {
		*res = STAGE_FAIL;
		goto out;
	}
	/*
	 * The researchers' calls count against s: checked before a round
	 * begins, as a review group checks before it forks.
	 */
	if (engine__stage_pause(d, s, s, res, &rc, e))
		goto out;
	round = research_begin_round(st);
	engine__prog_save(d, p); /* written with collect_started */
	jobs = xcalloc(total, sizeof(*jobs));
	fm = xcalloc(total, sizeof(*fm));
	n = plan_jobs(d, s, st, &prov, round, jobs, fm);
	if (!n)
		goto out; /* all collected before a driver died */
	ids = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(ids, json_string(jobs[i].id));
	rc = engine__note(d, "collect_started",
			  json_pack("{s:s, s:i, s:O, s:i}", "stage", s->name,
				    "round", round, "claims", ids, "at_once",
				    COLLECT_AT_ONCE),
			  e);
	if (!rc)
		rc = engine__fanout(d, fm, n, COLLECT_AT_ONCE, steers, NULL, e);
	if (rc || d->stop) {
		*res = STAGE_STOPPED;
		goto out;
	}
	rc = merge_evidence(d, s, jobs, fm, n, round, res, reason, e);
out:
	engine__fanout_release(fm, total);
	free(fm);
	jobs_release(jobs, total);
	json_decref(ids);
	json_decref(p);
	return rc;
}

/* ---- challenge (challenging) ------------------------------------------ */

static int
accept_challenge(struct drive *d, const struct stage *s, const char *text,
		 enum stage_result *res, char **reason, struct err *e)
{
	const char *artifact = d->call->artifact;
	json_t *doc = engine__take_json(d, artifact, text, e);
	json_t *p = engine__prog_load(d), *st = state_of(p), *list;
	size_t i, high = 0;
	int rc;

	(void)reason;
	if (!doc) {
		json_decref(p);
		return BATON_ECONTRACT;
	}
	rc = research_challenge_check(artifact, doc, st, e);
	if (!rc)
		rc = engine__keep_json(d, artifact, NULL, doc, e);
	if (rc)
		goto out;
	list = json_object_get(doc, "challenges");
	for (i = 0; i < json_array_size(list); i++)
		high += !strcmp(
		    json_get_str(json_array_get(list, i), "severity"), "high");
	json_object_set_new(st, "challenge", json_string(artifact));
	json_object_set_new(st, "challenges",
			    json_integer((json_int_t)json_array_size(list)));
	engine__prog_save(d, p);
	rc = engine__note(d, "challenge",
			  json_pack("{s:s, s:s, s:I, s:I}", "stage", s->name,
				    "file", artifact, "count",
				    (json_int_t)json_array_size(list), "high",
				    (json_int_t)high),
			  e);
	*res = STAGE_PASS;
out:
	json_decref(doc);
	json_decref(p);
	return rc;
}

static int
challenge_stage(struct drive *d, const struct stage *s, const char *steers,
		enum stage_result *res, char **reason, struct err *e)
{
	json_t *p = engine__prog_load(d);
	size_t budget = RESEARCH_CONTEXT_MAX;
	struct call_spec cs = { 0 };
	struct buf ctx = BUF_INIT;
	int rc;

	base_context(state_of(p), &ctx, &budget);
	evidence_context(d, state_of(p), &ctx, &budget);
	cs.artifact = "challenge.json";
	cs.template = "research-challenge";
	cs.context = ctx.ptr;
	cs.accept = accept_challenge;
	rc = one_call(d, s, steers, &cs, res, reason, e);
	buf_release(&ctx);
	json_decref(p);
	return rc;
}

/* ---- compose (composing) ---------------------------------------------- */

static int
accept_report(struct drive *d, const struct stage *s, const char *text,
	      enum stage_result *res, char **reason, struct err *e)
{
	const char *artifact = d->call->artifact;
	char *path = engine__run_file(d, artifact);
	struct buf body = BUF_INIT;
	json_t *p;
	int rc = 0;

	(void)reason;
	if (fs_read_nofollow(path, &body, BUF_MAX_ARTIFACT, NULL) < 0 ||
	    !body.len) {
		buf_reset(&body);
		buf_adds(&body, text ? text : "");
		buf_rtrim(&body);
		if (!body.len) {
			rc = err_set(e, BATON_ECONTRACT,
				     "no %s in the run folder and no final "
				     "text from the agent",
				     artifact);
			goto out;
		}
		buf_addch(&body, '\n');
		rc = fs_write_atomic(path, body.ptr, body.len, e);
	}
	if (!rc)
		rc = engine__keep_output(d, artifact, NULL, body.ptr, e);
	if (rc)
		goto out;
	p = engine__prog_load(d);
	json_object_set_new(state_of(p), "report", json_string(artifact));
	engine__prog_save(d, p);
	json_decref(p);
	rc = engine__note(d, "report_written",
			  json_pack("{s:s, s:s, s:I}", "stage", s->name, "file",
				    artifact, "bytes", (json_int_t)body.len),
			  e);
	*res = STAGE_PASS;
out:
	buf_release(&body);
	free(path);
	return rc;
}

static int
compose_stage(struct drive *d, const struct stage *s, const char *steers,
	      enum stage_result *res, char **reason, struct err *e)
{
	json_t *p = engine__prog_load(d);
	size_t budget = RESEARCH_CONTEXT_MAX;
	struct call_spec cs = { 0 };
	struct buf ctx = BUF_INIT;
	int rc;

	base_context(state_of(p), &ctx, &budget);
	engine__add_file(d, &ctx, "Counter-evidence (challenge.json)",
			 "challenge.json", &budget);
	evidence_context(d, state_of(p), &ctx, &budget);
	cs.artifact = "report.md";
	cs.template = "research-compose";
	cs.context = ctx.ptr;
	cs.accept = accept_report;
	rc = one_call(d, s, steers, &cs, res, reason, e);
	buf_release(&ctx);
	json_decref(p);
	return rc;
}

/* ---- judge (judging) --------------------------------------------------- */

static int
accept_judgement(struct drive *d, const struct stage *s, const char *text,
		 enum stage_result *res, char **reason, struct err *e)
{
	const char *artifact = d->call->artifact;
	json_t *doc = engine__take_json(d, artifact, text, e);
	json_t *p = engine__prog_load(d), *st = state_of(p);
	char *weak = NULL;
	int rc, rework;

	if (!doc) {
		json_decref(p);
		return BATON_ECONTRACT;
	}
	rc = research_judgement_check(artifact, doc, st, e);
	if (!rc)
		rc = engine__keep_json(d, artifact,
				       json_get_str(doc, "verdict"), doc, e);
	if (rc)
		goto out;
	rework = !strcmp(json_get_str(doc, "verdict"), "rework");
	research_judge(st, doc, artifact);
	engine__prog_save(d, p);
	weak = research_weak_list(st);
	rc = engine__note(
	    d, "judgement",
	    json_pack("{s:s, s:s, s:i, s:s, s:O, s:s*}", "stage", s->name,
		      "file", artifact, "round", d->call->version, "verdict",
		      rework ? "rework" : "pass", "weak",
		      json_object_get(json_object_get(st, "judgement"), "weak"),
		      "reasons", json_get_str(doc, "reasons")),
	    e);
	*res = STAGE_PASS;
	if (rework) {
		/* engine.c routes it to collect, or ends the run when the
		 * pipeline's max_iterations are spent; the reason names the
		 * weak claims there */
		*res = STAGE_LOOP;
		*reason = xasprintf("weak claims: %s", weak);
	}
out:
	free(weak);
	json_decref(doc);
	json_decref(p);
	return rc;
}

/*
 * The reasons of gate result g that concern claim id, as one line each:
 * what its researcher reads on the rework round.
 */
static char *
gate_reasons_of(const json_t *g, const char *id)
{
	json_t *list = json_object_get(g, "reasons");
	struct buf out = BUF_INIT, word = BUF_INIT;
	size_t i;

	buf_addf(&word, "Claim %s ", id);
	for (i = 0; i < json_array_size(list); i++) {
		const char *r = json_string_value(json_array_get(list, i));

		/* a claim's own reasons, and the report-wide ones */
		if (r && (!strncmp(r, word.ptr, word.len) ||
			  strncmp(r, "Claim ", 6)))
			buf_addf(&out, "- %s\n", r);
	}
	buf_release(&word);
	return buf_detach(&out, NULL);
}

/*
 * openTiger's deterministic quality gate before the judge
 * (core/research.h): with research.quality_profile not "off", the
 * claims' evidence, source domains, counter-evidence, the report's
 * citations and confidence are held to the profile. A failing gate
 * marks the claims it names weak, with its reasons, and sends the run
 * back to collect without asking the judge (*res STAGE_LOOP); else 0
 * with *res untouched. The gate's result is the event quality_gate.
 */
static int
quality_gate(struct drive *d, const struct stage *s, json_t *p,
	     enum stage_result *res, char **reason, struct err *e)
{
	const char *profile = d->en->cfg->research.quality_profile;
	json_t *st = state_of(p), *chl, *in, *g, *ids, *c;
	struct research_quality q;
	struct buf report = BUF_INIT;
	char *path, *weak;
	size_t i;
	int rc, round;

	if (!profile || research_quality_profile(profile, &q))
		return 0;
	round = (int)json_integer_value(json_object_get(st, "round"));
	chl = engine__load_json(d, "challenge.json", NULL);
	path = engine__run_file(d, "report.md");
	if (fs_read_nofollow(path, &report, BUF_MAX_ARTIFACT, NULL) < 0)
		buf_reset(&report);
	free(path);
	in = research_quality_input(st, chl, report.len ? report.ptr : NULL);
	g = research_quality_gate(in, &q);
	json_decref(in);
	json_decref(chl);
	buf_release(&report);
	ids = json_copy(json_object_get(g, "insufficient"));
	json_array_extend(ids, json_object_get(g, "challenge"));
	if (!json_is_true(json_object_get(g, "pass")) && !json_array_size(ids))
		/* report-wide reasons only: every claim goes back */
		for (i = 0; i < json_array_size(json_object_get(st, "claims"));
		     i++)
			json_array_append_new(
			    ids, json_string(json_get_str(
				     json_array_get(
					 json_object_get(st, "claims"), i),
				     "id")));
	rc = engine__note(d, "quality_gate",
			  json_pack("{s:s, s:s, s:i, s:O, s:O, s:O, s:O, "
				    "s:O, s:O}",
				    "stage", s->name, "profile", q.profile,
				    "round", round ? round : 1, "pass",
				    json_object_get(g, "pass"), "reasons",
				    json_object_get(g, "reasons"),
				    "insufficient",
				    json_object_get(g, "insufficient"),
				    "challenge",
				    json_object_get(g, "challenge"),
				    "verifiable_ratio",
				    json_object_get(g, "verifiable_ratio"),
				    "report_confidence",
				    json_object_get(g, "report_confidence")),
			  e);
	if (rc || json_is_true(json_object_get(g, "pass")))
		goto out;
	for (i = 0; i < json_array_size(ids); i++) {
		const char *id = json_string_value(json_array_get(ids, i));
		char *why;

		c = research_claim(st, id);
		if (!c)
			continue;
		why = gate_reasons_of(g, id);
		json_object_set_new(c, "status", json_string("weak"));
		json_object_set_new(c, "gate_reasons", json_string(why));
		free(why);
	}
	json_object_set_new(st, "rework", json_true());
	engine__prog_save(d, p);
	weak = json_dumps(ids, JSON_COMPACT);
	*res = STAGE_LOOP;
	*reason = xasprintf("the quality gate (%s) sends back %s: %s",
			    q.profile, weak,
			    json_string_value(json_array_get(
				json_object_get(g, "reasons"), 0)));
	free(weak);
out:
	json_decref(ids);
	json_decref(g);
	return rc;
}

static int
judge_stage(struct drive *d, const struct stage *s, const char *steers,
	    enum stage_result *res, char **reason, struct err *e)
{
	json_t *p = engine__prog_load(d), *st = state_of(p);
	int round = (int)json_integer_value(json_object_get(st, "round"));
	size_t budget = RESEARCH_CONTEXT_MAX;
	struct call_spec cs = { 0 };
	struct buf ctx = BUF_INIT;
	char *file;
	int rc;

	if (round < 1)
		round = 1;
	*res = STAGE_PASS;
	rc = quality_gate(d, s, p, res, reason, e);
	if (rc || *res == STAGE_LOOP) {
		json_decref(p);
		return rc;
	}
	file = xasprintf("judgement-v%d.json", round);
	engine__add_file(d, &ctx, "The report (report.md)", "report.md", &budget);
	base_context(st, &ctx, &budget);
	engine__add_file(d, &ctx, "Counter-evidence (challenge.json)",
			 "challenge.json", &budget);
	evidence_context(d, st, &ctx, &budget);
	cs.artifact = file;
	cs.template = "research-judge";
	cs.context = ctx.ptr;
	cs.version = round;
	cs.accept = accept_judgement;
	rc = one_call(d, s, steers, &cs, res, reason, e);
	buf_release(&ctx);
	free(file);
	json_decref(p);
	return rc;
}

static int
research_run(struct drive *d, const struct stage *s, const char *steers,
	     enum stage_result *res, char **reason, struct err *e)
{
	switch (s->kind) {
	case KIND_CLAIMS:
		return claims_stage(d, s, steers, res, reason, e);
	case KIND_COLLECT:
		return collect_stage(d, s, steers, res, reason, e);
	case KIND_CHALLENGE:
		return challenge_stage(d, s, steers, res, reason, e);
	case KIND_COMPOSE:
		return compose_stage(d, s, steers, res, reason, e);
	case KIND_JUDGE:
		return judge_stage(d, s, steers, res, reason, e);
	default:
		BUG("research stage of kind %s", stage_kind_name(s->kind));
	}
}

/* The judge still finds claims weak with the rework rounds spent. */
static char *
judge_exhausted(struct drive *d, const struct stage *s, const char *reason,
		const char **outcome)
{
	*outcome = RUN_OUTCOME_MAX_ITERATIONS;
	return xasprintf("%s still finds claims weak after %d rework round%s "
			 "(%s): the pipeline's max_iterations (%d) is spent",
			 s->name, d->r.review_loops,
			 d->r.review_loops == 1 ? "" : "s",
			 reason ? reason : "weak claims",
			 d->r.max_review_loops);
}

const struct stage_ops research_ops = {
	.run = research_run,
};

const struct stage_ops research_judge_ops = {
	.run = research_run,
	.exhausted = judge_exhausted,
};
