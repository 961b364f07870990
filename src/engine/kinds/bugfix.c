/*
 * The bug-fix stages (VCP seed 002) on the one engine: each is a stage of
 * the pipeline like any other, moved by the same checked transitions; what
 * differs is what its agent reads and leaves, and how its verdict routes.
 *
 *   rca            an analyst writes an RCA record, versioned
 *   consolidate    the engine merges agreeing RCAs, or asks a person to
 *                  pick between disagreeing ones, and writes diagnosis,
 *                  user story and fix plan
 *   plan-review,   a verdict, versioned: approved goes on; needs_changes
 *   code-review    sends the run to its fix (revise for the plan) and back
 *                  to the SAME review; needs_clarification asks a person;
 *                  rejected follows the seed's table
 *   implementation the fix, whole or one plan step at a time with phased
 *                  reviews every review_interval steps
 *
 * The state between stages lives in the run record (runs.progress, one
 * JSON object written with every run write), so a driver that dies
 * anywhere is followed by one that knows the versions, the verdicts, the
 * fix round's review and the next plan step.
 *
 * Reviews that run at once (a parallel group, parallel phased reviewers)
 * each run in a child process with a store handle of its own (fanout.c).
 * A child writes events only; the parent owns the run record and takes
 * each child's verdict, usage and time from a result file when it exits.
 */
#include "util/compat.h"

#include "agent/agent.h"
#include "core/bugfix.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "engine/engine.h"
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

/* What the next stage reads of each earlier one (progressive enrichment). */
#define SUMMARY_MAX 500
#define GROUP_SUMMARY_MAX 250
/* The context a bug-fix stage adds, before the stage's own sections. */
#define SEED_CONTEXT_MAX (32 * 1024)
/* A phased implementation of more steps asks a person first (the seed's
 * "Recommended maximum: 20-30 plan steps"). */
#define PHASED_STEPS_ASK 30

/* ---- progress: the run's bug-fix state ------------------------------- */

/* progress.<key>.<name>, created when absent; borrowed from p. */
static json_t *
prog_obj(json_t *p, const char *key, const char *name)
{
	json_t *map = json_object_get(p, key), *o;

	if (!json_is_object(map)) {
		map = json_object();
		json_object_set_new(p, key, map);
	}
	if (!name)
		return map;
	o = json_object_get(map, name);
	if (!json_is_object(o)) {
		o = json_object();
		json_object_set_new(map, name, o);
	}
	return o;
}

/* A string of progress (a copy; NULL when absent). */
static char *
prog_str(const struct drive *d, const char *key)
{
	json_t *p = engine__prog_load(d);
	char *v = xstrdup_or_null(json_get_str(p, key));

	json_decref(p);
	return v;
}

static void
prog_set_str(struct drive *d, const char *key, const char *value)
{
	json_t *p = engine__prog_load(d);

	if (value)
		json_object_set_new(p, key, json_string(value));
	else
		json_object_del(p, key);
	engine__prog_save(d, p);
	json_decref(p);
}

/* The review a fix round works for (progress.back), or NULL. */
static const struct stage *
sender(struct drive *d)
{
	char *name = prog_str(d, "back");
	const struct stage *s = name ? pipeline_stage_named(d->p, name) : NULL;

	free(name);
	return s;
}

/* Review r is re-reviewed alone after its fix round; NULL: no longer. */
static void
set_rereview(struct drive *d, const struct stage *r)
{
	prog_set_str(d, "rereview", r ? r->name : NULL);
}

/*
 * The version a stage's next output gets: its current one while no
 * verdict was taken on it (a re-run after a crash writes it again), else
 * the next. Recorded, with the verdict cleared.
 */
static int
begin_version(struct drive *d, const struct stage *s)
{
	json_t *p = engine__prog_load(d), *st = prog_obj(p, "stages", s->name);
	int v = (int)json_integer_value(json_object_get(st, "version"));

	if (!v)
		v = 1;
	else if (json_get_str(st, "status"))
		v++;
	json_object_set_new(st, "version", json_integer(v));
	json_object_del(st, "status");
	engine__prog_save(d, p);
	json_decref(p);
	return v;
}

/* Records the verdict (or "complete") on a stage's current version. */
static void
mark(struct drive *d, const char *stage, int version, const char *status,
     const char *file)
{
	json_t *p = engine__prog_load(d), *st = prog_obj(p, "stages", stage);

	json_object_set_new(st, "version", json_integer(version));
	json_object_set_new(st, "status", json_string(status));
	json_object_set_new(st, "file", json_string(file));
	json_object_del(st, "pending");
	engine__prog_save(d, p);
	json_decref(p);
}

/* progress.stages[name].<key> as a string (a copy), or NULL. */
static char *
stage_str(const struct drive *d, const char *name, const char *key)
{
	json_t *p = engine__prog_load(d);
	json_t *st = json_object_get(json_object_get(p, "stages"), name);
	char *v = xstrdup_or_null(json_get_str(st, key));

	json_decref(p);
	return v;
}

/* ---- reading what agents leave --------------------------------------- */

/* A run-folder JSON file, or NULL (e says why when it exists). */
/* ---- who does a stage ------------------------------------------------- */

/*
 * A stage's provider list is an order of preference: the first whose
 * program is installed (an HTTP agent always is), else the first, whose
 * call then finds it missing.
 */
static const struct config_provider *
preferred(const struct config *cfg, const struct strvec *names)
{
	size_t i;

	for (i = 0; i < names->nr; i++) {
		const struct config_provider *p =
			config_find_provider(cfg, names->v[i]);
		const char *prog = p ? agent_program(p) : NULL;
		char *path = prog ? agent_which(prog) : NULL;
		int installed = !prog || path;

		free(path);
		if (p && installed)
			return p;
	}
	return config_find_provider(cfg, names->v[0]);
}

/*
 * The provider of a bug-fix call: named (a phased reviewer), the stage's
 * own, or its role's; with the stage's model and timeout over it. A copy
 * sharing the config's strings. NULL with *reason set when none plays it.
 */
static int
who(struct drive *d, const struct stage *s, const char *name,
    const char *model, struct config_provider *out, char **reason)
{
	const struct config *cfg = d->en->cfg;
	const struct config_provider *p;

	if (name)
		p = config_find_provider(cfg, name);
	else if (s->providers.nr)
		p = preferred(cfg, &s->providers);
	else
		p = config_provider_for(cfg, s->role);
	if (!p) {
		*reason = xasprintf("stage %s: no provider %s%s%s (set "
				    "roles.%s or name one in the pipeline)",
				    s->name, name ? "named '" : "plays the ",
				    name ? name : s->role,
				    name ? "'" : " role", s->role);
		return -1;
	}
	*out = *p;
	if (model)
		out->model = (char *)model;
	else if (s->model && !name)
		out->model = s->model;
	if (s->timeout_seconds)
		out->timeout_seconds = s->timeout_seconds;
	return 0;
}

/* ---- context: what each stage reads ----------------------------------- */

/*
 * Progressive enrichment: one line per earlier stage with a record, its
 * key results cut to a fixed size (smaller for members of a parallel
 * group, so a group never crowds out the rest).
 */
static void
enrich(struct drive *d, const struct stage *upto, struct buf *ctx,
       size_t *budget)
{
	struct buf lines = BUF_INIT, one = BUF_INIT;
	json_t *p = engine__prog_load(d), *stages = json_object_get(p, "stages");
	size_t i;

	for (i = 0; i < d->p->nr_stages; i++) {
		const struct stage *s = &d->p->stages[i];
		json_t *st = json_object_get(stages, s->name), *doc;
		const char *file = json_get_str(st, "file");

		if (s == upto)
			break;
		if (!file || !json_get_str(st, "status"))
			continue;
		doc = engine__load_json(d, file, NULL);
		if (!doc)
			continue;
		buf_reset(&one);
		bugfix_summary(stage_kind_name(s->kind), doc,
			       s->group ? GROUP_SUMMARY_MAX : SUMMARY_MAX,
			       &one);
		buf_addf(&lines, "- %s (v%lld): %s\n", s->name,
			 (long long)json_integer_value(
				 json_object_get(st, "version")),
			 one.ptr);
		json_decref(doc);
	}
	prompt_section(ctx, "Key results of the earlier stages", lines.ptr,
		       budget);
	json_decref(p);
	buf_release(&lines);
	buf_release(&one);
}

/* The documents a stage of kind k works from. */
static void
seed_context(struct drive *d, const struct stage *s, struct buf *ctx,
	     size_t *budget)
{
	enrich(d, s, ctx, budget);
	if (s->kind == KIND_RCA)
		return;
	if (s->kind == KIND_PLAN_REVIEW || s->kind == KIND_REVISE)
		engine__add_file(d, ctx,
				 "The consolidated diagnosis (diagnosis.json)",
				 "diagnosis.json", budget);
	engine__add_file(d, ctx, "The user story (user-story.json)",
			 "user-story.json", budget);
	engine__add_file(d, ctx, "The fix plan (fix-plan.json)",
			 "fix-plan.json", budget);
	if (s->kind == KIND_CODE_REVIEW)
		engine__add_file(d, ctx,
				 "The implementation (impl-result.json)",
				 "impl-result.json", budget);
}

/* ---- one agent call ----------------------------------------------------- */

/* What a verdict call leaves for its caller (call_spec.arg). */
struct verdict_out {
	enum bugfix_review_kind kind;
	char status[32];
	int findings;
};

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

static int
accept_rca(struct drive *d, const struct stage *s, const char *text,
	   enum stage_result *res, char **reason, struct err *e)
{
	const char *artifact = d->call->artifact;
	json_t *doc = engine__take_json(d, artifact, text, e), *rc_obj;
	int rc;

	(void)reason;
	if (!doc)
		return BATON_ECONTRACT;
	rc = bugfix_rca_check(artifact, doc, e);
	if (!rc)
		rc = engine__keep_json(d, artifact, "complete", doc, e);
	rc_obj = json_object_get(doc, "root_cause");
	if (!rc)
		rc = engine__note(
			d, "rca",
			json_pack("{s:s, s:i, s:s, s:s*, s:s*, s:s*}", "stage",
				  s->name, "version", d->call->version, "file",
				  artifact, "root_file",
				  json_get_str(rc_obj, "root_file"), "category",
				  json_get_str(rc_obj, "category"), "label",
				  (const char *)d->call->arg),
			e);
	json_decref(doc);
	*res = STAGE_PASS;
	return rc;
}

/* ---- questions for a person ------------------------------------------ */

/*
 * Ends the stage with a question: the run waits for approval, an answer
 * (approve with guidance) enters ask_to, a rejection ends the run.
 */
static int
ask(struct drive *d, const struct stage *s, const char *kind,
    const char *question, json_t *options, const char *ask_to,
    enum stage_result *res)
{
	return engine__ask(d, s, kind, question, options, NULL, ask_to, res);
}

/*
 * The person's answer to the question of that kind the run waited on,
 * taken (the question and its answer leave progress): a copy, "" when
 * it was approved without guidance, NULL when it was not asked.
 */
static char *
take_answer(struct drive *d, const char *kind)
{
	json_t *p = engine__prog_load(d), *a = json_object_get(p, "answer");
	const char *asked = json_get_str(json_object_get(p, "ask"), "kind");
	char *text = NULL;

	if (asked && !strcmp(asked, kind)) {
		text = xstrdup(json_get_str(a, "text") ?
				       json_get_str(a, "text") :
				       "");
		json_object_del(p, "answer");
		json_object_del(p, "ask");
		engine__prog_save(d, p);
	}
	json_decref(p);
	return text;
}

/* ---- an agent that is not installed ------------------------------------ */

/* Whether progress.stages (stages) records the stage named as skipped. */
static int
was_skipped(const json_t *stages, const char *name)
{
	const char *st = json_get_str(json_object_get(stages, name), "status");

	return st && !strcmp(st, "skipped");
}

/*
 * Whether a person may go on without stage s: a review, or an RCA while
 * another RCA stage is not skipped (consolidation needs one record).
 */
static int
skippable(struct drive *d, const struct stage *s)
{
	json_t *p, *stages;
	size_t i, others = 0;

	if (s->kind == KIND_PLAN_REVIEW || s->kind == KIND_CODE_REVIEW)
		return 1;
	if (s->kind != KIND_RCA)
		return 0;
	p = engine__prog_load(d);
	stages = json_object_get(p, "stages");
	for (i = 0; i < d->p->nr_stages; i++) {
		const struct stage *r = &d->p->stages[i];

		if (r->kind == KIND_RCA && r != s &&
		    !was_skipped(stages, r->name))
			others++;
	}
	json_decref(p);
	return others > 0;
}

/*
 * The seed's "Codex error: ask to skip or install": stage s waits for a
 * person, who installs the agent and approves to run it again, or
 * approves with "skip" to go on without it. why names what is missing.
 */
static int
ask_install(struct drive *d, const struct stage *s, const char *why,
	    const char *what, enum stage_result *res)
{
	char *q = xasprintf("%s\nInstall it and approve to run %s again, "
			    "approve with guidance 'skip' to go on without "
			    "%s, or reject to end the run.",
			    why, what, what);
	int rc = ask(d, s, "agent_missing", q,
		     json_pack("[s, s]", "install", "skip"), s->status, res);

	free(q);
	return rc;
}

/* A call of s that blocked on a missing agent asks, when s may be
 * skipped. */
static int
ask_missing(struct drive *d, const struct stage *s, enum stage_result *res,
	    char **reason)
{
	int rc;

	if (*res != STAGE_BLOCK || !d->missing || !skippable(d, s))
		return 0;
	rc = ask_install(d, s, *reason, s->name, res);
	free(*reason);
	*reason = NULL;
	return rc;
}

/* Records stage s as skipped by a person. */
static int
mark_skipped(struct drive *d, const struct stage *s, struct err *e)
{
	json_t *p = engine__prog_load(d), *st = prog_obj(p, "stages", s->name);

	json_object_set_new(st, "status", json_string("skipped"));
	json_object_del(st, "file");
	engine__prog_save(d, p);
	json_decref(p);
	return engine__note(d, "stage_skipped",
			    json_pack("{s:s, s:s}", "stage", s->name, "why",
				      "its agent is not installed, and a "
				      "person chose to go on without it"),
			    e);
}

/*
 * On entering stage s after an agent_missing question: when the person
 * said "skip", the stage is recorded as skipped and *res is PASS. Any
 * other answer runs the stage again (*res is left alone).
 */
static int
skip_answered(struct drive *d, const struct stage *s, enum stage_result *res,
	      struct err *e)
{
	char *answer = take_answer(d, "agent_missing");
	int yes = answer && !strcmp(answer, "skip");

	free(answer);
	if (!yes)
		return 0;
	*res = STAGE_PASS;
	prog_set_str(d, "rereview", NULL); /* as a review that passed */
	return mark_skipped(d, s, e);
}

/* ---- reviews ------------------------------------------------------------ */

static enum bugfix_review_kind
review_kind(const struct stage *s)
{
	return s->kind == KIND_PLAN_REVIEW ? BUGFIX_PLAN_REVIEW :
					     BUGFIX_CODE_REVIEW;
}

static const struct stage *
first_rca(const struct pipeline *p)
{
	size_t i;

	for (i = 0; i < p->nr_stages; i++)
		if (p->stages[i].kind == KIND_RCA)
			return &p->stages[i];
	return NULL;
}

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
	const struct stage *rca = first_rca(d->p);
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
		set_rereview(d, s);
		rc = ask(d, s, "clarification", q, NULL, s->status, res);
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
		rc = ask(d, s, "plan_rejected", q,
			 json_pack("[s, s]", "re-examine", "reject"),
			 rca->status, res);
		free(q);
		return rc;
	}
	if (s->kind == KIND_PLAN_REVIEW || s->on_reject_stop) {
		d->outcome = s->kind == KIND_PLAN_REVIEW ?
				     RUN_OUTCOME_PLAN_REJECTED :
				     RUN_OUTCOME_CODE_REJECTED;
		*res = STAGE_BLOCK;
		*reason = xasprintf("%s rejected the %s (%s)", s->name,
				    s->kind == KIND_PLAN_REVIEW ? "plan" :
								  "change",
				    file);
		return 0;
	}
	*res = STAGE_LOOP; /* a rework round, as for needs_changes */
	return 0;
}

/* One review to make: of a stage, or of a batch of plan steps. */
struct review_req {
	enum bugfix_review_kind kind;
	int version;
	char *file;		/* the verdict file it writes */
	const char *extra;	/* context before the stage's own; or NULL */
	const char *template;	/* NULL: the stage kind's */
	const char *kind_name;	/* BATON_STAGE_KIND; NULL: the stage's */
	struct strvec env;	/* extra environment */
	struct verdict_out out;
};

static void
review_req_release(struct review_req *rq)
{
	free(rq->file);
	strvec_clear(&rq->env);
}

/* One reviewer call for stage s. */
static int
review_call(struct drive *d, const struct stage *s,
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
		seed_context(d, s, &ctx, &budget);
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

/* One reviewer among several that run at once (fanout.c). */
struct member {
	const struct stage *s;	   /* the stage it reviews for */
	struct config_provider prov;
	struct review_req rq;	   /* what it reviews, and its verdict */
	enum stage_result res;
	char *reason;
	int missing;		   /* blocked: its agent is not installed */
};

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
	rc = review_call(cd, m->s, &m->prov, steers, &m->rq, &fm->res,
			 &fm->reason, e);
	json_object_set_new(out, "status", json_string(m->rq.out.status));
	if (cd->missing)
		json_object_set_new(out, "missing", json_true());
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
static int
run_members(struct drive *d, struct member *m, size_t n, const char *steers,
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
		fm[i].reason = NULL;
	}
	engine__fanout_release(fm, n);
	free(fm);
	return rc;
}

static void
members_release(struct member *m, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		review_req_release(&m[i].rq);
		free(m[i].reason);
	}
	free(m);
}

/*
 * The first member that failed or was stopped, as the stage's result; a
 * missing agent is not a failure here (members_missing asks about it).
 */
static int
members_failed(struct member *m, size_t n, enum stage_result *res,
	       char **reason)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (m[i].res != STAGE_PASS && !m[i].missing) {
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
	rc = ask_install(d, s, why.ptr, what.ptr, res);
	buf_release(&why);
	buf_release(&what);
	return rc;
}

/* ---- a review stage, alone or as its parallel group ------------------- */

static int
review_group(struct drive *d, const struct stage *s, const char *steers,
	     enum stage_result *res, char **reason, struct err *e)
{
	size_t first, n = pipeline_group(d->p, s->group, &first), i, k = 0;
	json_t *p = engine__prog_load(d), *g = prog_obj(p, "groups", NULL);
	char gname[16];
	struct member *m = xcalloc(n, sizeof(*m));
	json_t *names = json_array(), *verdicts;
	char *answer = take_answer(d, "agent_missing");
	int rc = 0, resumed, skip = answer && !strcmp(answer, "skip");

	free(answer);
	snprintf(gname, sizeof(gname), "%d", s->group);
	resumed = !strcmp(json_get_str(g, gname) ? json_get_str(g, gname) : "",
			  "running");
	json_decref(p);
	for (i = 0; i < n; i++) {
		const struct stage *ms = &d->p->stages[first + i];
		char *st = stage_str(d, ms->name, "status");
		int pending = !resumed || !st;

		free(st);
		if (pending && resumed && skip) {
			rc = mark_skipped(d, ms, e);
			if (rc)
				goto out;
			pending = 0;
		}
		if (!pending)
			continue; /* decided before the driver died */
		/* a member's budget: the group goes on when raised */
		if (engine__stage_pause(d, ms, s, res, &rc, e))
			goto out;
		if (who(d, ms, NULL, NULL, &m[k].prov, reason)) {
			*res = STAGE_FAIL;
			goto out;
		}
		m[k].s = ms;
		m[k].rq.kind = review_kind(ms);
		m[k].rq.version = begin_version(d, ms);
		m[k].rq.file = bugfix_output_name(stage_kind_name(ms->kind),
						  m[k].prov.name,
						  m[k].prov.model, ms->index,
						  m[k].rq.version);
		json_array_append_new(names, json_string(ms->name));
		k++;
	}
	p = engine__prog_load(d);
	json_object_set_new(prog_obj(p, "groups", NULL), gname,
			    json_string("running"));
	engine__prog_save(d, p);
	json_decref(p);
	if (k)
		rc = engine__note(d, "group_started",
				  json_pack("{s:i, s:O}", "group", s->group,
					    "stages", names),
				  e);
	if (!rc && k)
		rc = run_members(d, m, k, steers, e);
	for (i = 0; !rc && i < k; i++)
		if (m[i].res == STAGE_PASS)
			mark(d, m[i].s->name, m[i].rq.version,
			     m[i].rq.out.status, m[i].rq.file);
	if (rc || d->stop) {
		*res = STAGE_STOPPED;
		goto out;
	}
	if (members_failed(m, k, res, reason))
		goto out;
	rc = members_missing(d, s, m, k, res);
	if (rc || *res == STAGE_ASK)
		goto out;
	p = engine__prog_load(d);
	json_object_set_new(prog_obj(p, "groups", NULL), gname,
			    json_string("done"));
	engine__prog_save(d, p);
	json_decref(p);
	verdicts = json_object();
	for (i = 0; i < n; i++) {
		char *st = stage_str(d, d->p->stages[first + i].name,
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
		char *st = stage_str(d, ms->name, "status");
		char *file = stage_str(d, ms->name, "file");

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
	members_release(m, n);
	return rc;
}

static int
review_stage(struct drive *d, const struct stage *s, const char *steers,
	     enum stage_result *res, char **reason, struct err *e)
{
	struct config_provider prov;
	struct review_req rq = { .env = STRVEC_INIT };
	char *again = prog_str(d, "rereview");
	int rc;

	if (s->group && (!again || strcmp(again, s->name))) {
		free(again);
		return review_group(d, s, steers, res, reason, e);
	}
	free(again);
	*res = STAGE_FAIL;
	rc = skip_answered(d, s, res, e);
	if (rc || *res == STAGE_PASS)
		return rc;
	if (who(d, s, NULL, NULL, &prov, reason))
		return 0;
	rq.kind = review_kind(s);
	rq.version = begin_version(d, s);
	rq.file = bugfix_output_name(stage_kind_name(s->kind), prov.name,
				     prov.model, s->index, rq.version);
	rc = review_call(d, s, &prov, steers, &rq, res, reason, e);
	if (!rc && *res == STAGE_PASS) {
		mark(d, s->name, rq.version, rq.out.status, rq.file);
		prog_set_str(d, "rereview", NULL);
		rc = decide(d, s, rq.out.status, rq.file, res, reason);
	} else if (!rc) {
		rc = ask_missing(d, s, res, reason);
	}
	review_req_release(&rq);
	return rc;
}

/* ---- rca ---------------------------------------------------------------- */

static int
rca_stage(struct drive *d, const struct stage *s, const char *steers,
	  enum stage_result *res, char **reason, struct err *e)
{
	struct config_provider prov;
	struct call_spec cs = { 0 };
	struct buf ctx = BUF_INIT;
	size_t budget = SEED_CONTEXT_MAX;
	char *file, *label;
	int v, rc;

	*res = STAGE_FAIL;
	rc = skip_answered(d, s, res, e);
	if (rc || *res == STAGE_PASS)
		return rc;
	if (who(d, s, NULL, NULL, &prov, reason))
		return 0;
	v = begin_version(d, s);
	file = bugfix_output_name("rca", prov.name, prov.model, s->index, v);
	label = xasprintf("%s/%s", prov.name,
			  prov.model ? prov.model : "default");
	seed_context(d, s, &ctx, &budget);
	cs.artifact = file;
	cs.context = ctx.ptr;
	cs.version = v;
	cs.accept = accept_rca;
	cs.arg = label;
	rc = engine__call_as(d, s, &prov, steers, &cs, res, reason, e);
	if (!rc && *res == STAGE_PASS) {
		json_t *p;

		mark(d, s->name, v, "complete", file);
		p = engine__prog_load(d);
		json_object_set_new(prog_obj(p, "stages", s->name), "label",
				    json_string(label));
		engine__prog_save(d, p);
		json_decref(p);
	} else if (!rc) {
		rc = ask_missing(d, s, res, reason);
	}
	buf_release(&ctx);
	free(label);
	free(file);
	return rc;
}

/* ---- consolidation: the engine's own stage ----------------------------- */

/* The engine's own stage, consolidating the RCAs. */
static int
consolidate(struct drive *d, const struct stage *s,
		    enum stage_result *res, char **reason, struct err *e)
{
	json_t *docs[16], *p = engine__prog_load(d), *stages;
	const char *names[16], *labels[16];
	struct bugfix_consolidated c = { 0 };
	struct buf q = BUF_INIT;
	char *answer = NULL;
	size_t i, n = 0;
	int choice = BUGFIX_MERGE, agreed, rc = 0;

	stages = json_object_get(p, "stages");
	for (i = 0; i < d->p->nr_stages && n < ARRAY_SIZE(docs); i++) {
		const struct stage *r = &d->p->stages[i];
		json_t *st = json_object_get(stages, r->name);

		if (r->kind != KIND_RCA || was_skipped(stages, r->name))
			continue;
		docs[n] = json_get_str(st, "file") ?
				  engine__load_json(d, json_get_str(st, "file"), e) :
				  NULL;
		if (!docs[n]) {
			*res = STAGE_FAIL;
			*reason = xasprintf("stage %s: %s has no RCA record "
					    "to consolidate",
					    s->name, r->name);
			goto out;
		}
		names[n] = r->name;
		labels[n] = json_get_str(st, "label") ?
				    json_get_str(st, "label") :
				    r->name;
		n++;
	}
	if (!n) {
		*res = STAGE_FAIL;
		*reason = xasprintf("stage %s: the pipeline has no rca stage",
				    s->name);
		goto out;
	}
	agreed = bugfix_rcas_agree(docs, n);
	if (!agreed) {
		answer = take_answer(d, "diagnosis");
		bugfix_disagreement(docs, names, labels, n, &q);
		if (answer && !strcmp(answer, "all"))
			choice = BUGFIX_ALL_CONTRIBUTING;
		else
			for (choice = -3, i = 0; answer && i < n; i++)
				if (!strcmp(answer, names[i]))
					choice = (int)i;
		if (choice == -3) {
			json_t *opts = json_array();

			for (i = 0; i < n; i++)
				json_array_append_new(opts,
						      json_string(names[i]));
			json_array_append_new(opts, json_string("all"));
			if (answer && *answer)
				buf_addf(&q, "\n('%s' is not one of the "
					     "options.)\n", answer);
			rc = ask(d, s, "diagnosis", q.ptr, opts, s->status,
				 res);
			goto out;
		}
	}
	rc = bugfix_consolidate(docs, names, n, choice, d->r.task, d->r.id,
				&d->en->cfg->validate_commands, &c, e);
	if (rc) {
		*res = STAGE_FAIL;
		*reason = xasprintf("stage %s: %s", s->name, e->msg);
		rc = 0;
		goto out;
	}
	rc = engine__keep_json(d, "diagnosis.json", agreed ? "agreed" : "chosen",
		       c.diagnosis, e);
	if (!rc)
		rc = engine__keep_json(d, "user-story.json", NULL, c.story, e);
	if (!rc)
		rc = engine__keep_json(d, "fix-plan.json", NULL, c.plan, e);
	if (rc)
		goto out;
	prog_set_str(d, "choice",
		     agreed ? "merge" :
		     choice == BUGFIX_ALL_CONTRIBUTING ? "all" :
							 names[choice]);
	rc = engine__note(
		d, "consolidated",
		json_pack("{s:b, s:s, s:I, s:O*}", "agreed", agreed, "choice",
			  agreed ? "merge" :
			  choice == BUGFIX_ALL_CONTRIBUTING ? "all" :
							      names[choice],
			  "steps", (json_int_t)bugfix_plan_steps(c.plan),
			  "sources",
			  json_object_get(c.diagnosis, "sources")),
		e);
	*res = STAGE_PASS;
out:
	for (i = 0; i < n; i++)
		json_decref(docs[i]);
	bugfix_consolidated_release(&c);
	buf_release(&q);
	free(answer);
	json_decref(p);
	return rc;
}

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
	json_t *p = engine__prog_load(d), *st = prog_obj(p, "steps", NULL);
	char key[16];

	snprintf(key, sizeof(key), "%d", si->step);
	json_object_set_new(prog_obj(st, "versions", NULL), key,
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
	const char *status;
	int rc;

	if (!doc) {
		/* an agent that only edits and talks: its words are the
		 * summary */
		doc = json_pack("{s:s, s:s}", "status", "complete", "summary",
				text && *text ? text : "(no summary)");
	}
	rc = bugfix_impl_check(artifact, doc, e);
	status = json_get_str(doc, "status");
	if (!rc && !strcmp(status, "partial"))
		rc = err_set(e, BATON_ECONTRACT,
			     "%s: status partial: finish the remaining work of "
			     "the plan and report complete",
			     artifact);
	if (!rc)
		rc = engine__keep_json(d, artifact, status, doc, e);
	if (!rc && !strcmp(status, "failed")) {
		/* the seed's "implementation blocked": a person decides */
		*res = STAGE_BLOCK;
		*reason = xasprintf("%s: the implementer reported failed: %s",
				    s->name,
				    json_get_str(doc, "summary") ?
					    json_get_str(doc, "summary") :
					    "(no summary)");
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
	seed_context(d, s, &ctx, &budget);
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
	json_t *p = engine__prog_load(d), *o = prog_obj(p, "steps", NULL);

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
	seed_context(d, s, &ctx, &budget);
	json_decref(plan);
	return buf_detach(&ctx, NULL);
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

		if (who(d, s, pr->provider, pr->model, &m[i].prov, reason)) {
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
		rc = run_members(d, par, np, steers, e);
		for (i = 0, k = 0; i < s->nr_phased; i++)
			if (s->phased[i].parallel) {
				m[i].res = par[k].res;
				m[i].reason = par[k].reason;
				m[i].rq.out = par[k].rq.out;
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
		rc = review_call(d, s, &m[i].prov, steers, &m[i].rq, &m[i].res,
				 &m[i].reason, e);
	}
	if (rc)
		goto out;
	if (members_failed(m, s->nr_phased, res, reason))
		goto out;
	for (i = 0; i < s->nr_phased; i++) {
		json_t *doc;

		json_object_set_new(verdicts, m[i].rq.file,
				    json_string(m[i].rq.out.status));
		if (!strcmp(m[i].rq.out.status, "approved"))
			continue;
		want = 1;
		doc = engine__load_json(d, m[i].rq.file, NULL);
		if (doc) {
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
	members_release(m, s->nr_phased);
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
	char *agreed = prog_str(d, "long_plan"), *answer, *q;
	int rc;

	if (agreed) {
		free(agreed);
		return 0;
	}
	answer = take_answer(d, "long_plan");
	if (answer) {
		free(answer);
		prog_set_str(d, "long_plan", "approved");
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
	rc = ask(d, s, "long_plan", q, json_pack("[s, s]", "proceed",
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
	char *answer = take_answer(d, "phased"), *issues = NULL;
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

				rc = ask(d, s, "phased", q, NULL, s->status,
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

static int
implement_stage(struct drive *d, const struct stage *s, const char *steers,
		enum stage_result *res, char **reason, struct err *e)
{
	struct config_provider prov;
	struct call_spec cs = { 0 };
	struct buf ctx = BUF_INIT;
	size_t budget = SEED_CONTEXT_MAX;
	int rc;

	if (who(d, s, NULL, NULL, &prov, reason)) {
		*res = STAGE_FAIL;
		return 0;
	}
	if (s->nr_phased) {
		rc = phased(d, s, &prov, steers, res, reason, e);
	} else {
		seed_context(d, s, &ctx, &budget);
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

static int
accept_notes(struct drive *d, const struct stage *s, const char *text,
	     enum stage_result *res, char **reason, struct err *e)
{
	char *path = engine__run_file(d, d->call->artifact);
	struct buf body = BUF_INIT;
	int rc = 0;

	if (fs_read_nofollow(path, &body, BUF_MAX_ARTIFACT, NULL) < 0 ||
	    !body.len) {
		buf_reset(&body);
		buf_addf(&body, "%s\n", text && *text ? text :
							"(the fixer left no notes)");
		rc = fs_write_atomic(path, body.ptr, body.len, e);
	}
	if (!rc)
		rc = engine__keep_output(d, d->call->artifact, NULL, body.ptr,
					 e);
	if (!rc)
		rc = engine__checkpoint(d, s, res, reason, e);
	buf_release(&body);
	free(path);
	return rc;
}

static int
accept_plan(struct drive *d, const struct stage *s, const char *text,
	    enum stage_result *res, char **reason, struct err *e)
{
	json_t *doc = engine__take_json(d, d->call->artifact, text, e);
	int rc;

	(void)s;
	(void)reason;
	if (!doc)
		return BATON_ECONTRACT;
	rc = bugfix_plan_check(d->call->artifact, doc, e);
	if (!rc)
		rc = engine__keep_json(d, d->call->artifact, "revised", doc, e);
	if (!rc) /* the plan every later stage reads */
		rc = engine__keep_json(d, "fix-plan.json", "revised", doc, e);
	json_decref(doc);
	*res = STAGE_PASS;
	return rc;
}

/*
 * A fix round for the review that sent the run here (progress.back):
 * the code for a code review (fix), the plan for a plan review (revise).
 */
static int
fix_stage(struct drive *d, const struct stage *s, const char *steers,
	  enum stage_result *res, char **reason, struct err *e)
{
	const struct stage *back = sender(d);
	struct config_provider prov;
	struct call_spec cs = { 0 };
	struct buf ctx = BUF_INIT;
	size_t budget = SEED_CONTEXT_MAX;
	char *file = NULL, *verdict = NULL, *title;
	int rc;

	if (!back) {
		*res = STAGE_FAIL;
		*reason = xasprintf("stage %s: no review sent the run here",
				    s->name);
		return 0;
	}
	if (who(d, s, NULL, NULL, &prov, reason)) {
		*res = STAGE_FAIL;
		return 0;
	}
	verdict = stage_str(d, back->name, "file");
	title = xasprintf("What %s asks you to address (%s)", back->name,
			  verdict ? verdict : "?");
	if (verdict)
		engine__add_file(d, &ctx, title, verdict, &budget);
	free(title);
	seed_context(d, s, &ctx, &budget);
	if (s->kind == KIND_REVISE) {
		file = xasprintf("fix-plan-v%d.json", d->r.review_loops + 1);
		cs.accept = accept_plan;
	} else {
		file = xasprintf("fix-%d.md", d->r.review_loops);
		cs.accept = accept_notes;
		cs.template = "fix-review";
	}
	cs.artifact = file;
	cs.context = ctx.ptr;
	rc = engine__call_as(d, s, &prov, steers, &cs, res, reason, e);
	buf_release(&ctx);
	free(verdict);
	free(file);
	return rc;
}

static int
bugfix_run(struct drive *d, const struct stage *s, const char *steers,
	   enum stage_result *res, char **reason, struct err *e)
{
	switch (s->kind) {
	case KIND_RCA:
		return rca_stage(d, s, steers, res, reason, e);
	case KIND_PLAN_REVIEW:
	case KIND_CODE_REVIEW:
		return review_stage(d, s, steers, res, reason, e);
	case KIND_IMPLEMENT:
		return implement_stage(d, s, steers, res, reason, e);
	case KIND_FIX:
	case KIND_REVISE:
		return fix_stage(d, s, steers, res, reason, e);
	default:
		BUG("bug-fix stage of kind %s", stage_kind_name(s->kind));
	}
}

static int
consolidate_run(struct drive *d, const struct stage *s, const char *steers,
		enum stage_result *res, char **reason, struct err *e)
{
	(void)steers;
	return consolidate(d, s, res, reason, e);
}

/* The fix round went back: the review that sent it reviews again. */
static const struct stage *
fix_back(struct drive *d, const struct stage *s)
{
	const struct stage *x = sender(d);

	(void)s;
	if (x)
		set_rereview(d, x);
	return x;
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
		char *st = stage_str(d, m->name, "status");

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
	prog_set_str(d, "back", r->name);
	prog_set_str(d, "rereview", NULL);
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

/* A bug-fix pipeline's fix stage returns to its review: its own code. */
static const struct stage_ops *
bugfix_stage_ops(const struct stage *s)
{
	return s->next == STAGE_BACK ? &bugfix_back_ops : NULL;
}

const struct stage_ops bugfix_ops = {
	.run = bugfix_run,
};

const struct stage_ops bugfix_back_ops = {
	.run = bugfix_run,
	.back = fix_back,
};

const struct stage_ops bugfix_review_ops = {
	.run = bugfix_run,
	.pending = review_pending,
	.on_loop = review_sent,
	.exhausted = review_exhausted,
};

const struct stage_ops bugfix_consolidate_ops = {
	.run = consolidate_run,
};

const struct type_ops bugfix_type = {
	.type = "bugfix",
	.ops = bugfix_stage_ops,
};
