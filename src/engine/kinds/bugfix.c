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


/* ---- progress: the run's bug-fix state ------------------------------- */

/* progress.<key>.<name>, created when absent; borrowed from p. */
json_t *
bf_prog_obj(json_t *p, const char *key, const char *name)
{
	json_t *map = engine__prog_part(p, key);

	return name ? engine__prog_part(map, name) : map;
}

/* A string of progress (a copy; NULL when absent). */
char *
bf_prog_str(const struct drive *d, const char *key)
{
	json_t *p = engine__prog_load(d);
	char *v = xstrdup_or_null(json_get_str(p, key));

	json_decref(p);
	return v;
}

void
bf_prog_set_str(struct drive *d, const char *key, const char *value)
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
	char *name = bf_prog_str(d, "back");
	const struct stage *s = name ? pipeline_stage_named(d->p, name) : NULL;

	free(name);
	return s;
}

/* Review r is re-reviewed alone after its fix round; NULL: no longer. */
void
bf_set_rereview(struct drive *d, const struct stage *r)
{
	bf_prog_set_str(d, "rereview", r ? r->name : NULL);
}

/*
 * The version a stage's next output gets: its current one while no
 * verdict was taken on it (a re-run after a crash writes it again), else
 * the next. Recorded, with the verdict cleared.
 */
int
bf_begin_version(struct drive *d, const struct stage *s)
{
	json_t *p = engine__prog_load(d), *st = bf_prog_obj(p, "stages", s->name);
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
void
bf_mark(struct drive *d, const char *stage, int version, const char *status,
	const char *file)
{
	json_t *p = engine__prog_load(d), *st = bf_prog_obj(p, "stages", stage);

	json_object_set_new(st, "version", json_integer(version));
	json_object_set_new(st, "status", json_string(status));
	json_object_set_new(st, "file", json_string(file));
	json_object_del(st, "pending");
	engine__prog_save(d, p);
	json_decref(p);
}

/* progress.stages[name].<key> as a string (a copy), or NULL. */
char *
bf_stage_str(const struct drive *d, const char *name, const char *key)
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
int
bf_who(struct drive *d, const struct stage *s, const char *name,
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
void
bf_seed_context(struct drive *d, const struct stage *s, struct buf *ctx,
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
int
bf_ask(struct drive *d, const struct stage *s, const char *kind,
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
char *
bf_take_answer(struct drive *d, const char *kind)
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

/* ---- going on when the fix is stuck ------------------------------------ */

const struct stage *
bf_first_of(const struct pipeline *p, enum stage_kind k)
{
	size_t i;

	for (i = 0; i < p->nr_stages; i++)
		if (p->stages[i].kind == k)
			return &p->stages[i];
	return NULL;
}

/*
 * VCP's "Suggesting Restart": the fix cannot go on as it is (why;
 * outcome: rounds spent, a rejected change, a failed or blocked
 * implementation), so s asks a person instead of ending the run. The
 * answer's first word picks the way on: restart-rca (analyse the bug
 * again from the first RCA), revise-plan (consolidate the fix plan again,
 * the rest of the answer added to it) or continue (cont, also what a
 * plain approval does; round: it spends a fix round, granted when the
 * budget is spent). A rejection ends the run with outcome and why.
 */
int
bf_ask_restart(struct drive *d, const struct stage *s, const char *kind,
	       const char *why, const char *outcome, const struct stage *cont,
	       int round, enum stage_result *res)
{
	const struct stage *rca = bf_first_of(d->p, KIND_RCA);
	const struct stage *plan = bf_first_of(d->p, KIND_CONSOLIDATE);
	json_t *routes = json_object(), *opts = json_array(), *extra;
	struct buf q = BUF_INIT;
	int rc;

	buf_addf(&q, "%s\nThe bug fix has fundamental issues. Approve with "
		     "guidance starting with one of:\n",
		 why);
	if (rca) {
		json_object_set_new(routes, "restart-rca",
				    json_string(rca->status));
		json_array_append_new(opts, json_string("restart-rca"));
		buf_addf(&q, "  restart-rca   analyse the bug again from %s\n",
			 rca->name);
	}
	if (plan) {
		json_object_set_new(routes, "revise-plan",
				    json_string(plan->status));
		json_array_append_new(opts, json_string("revise-plan"));
		buf_adds(&q, "  revise-plan   make the fix plan again, with "
			     "what follows 'revise-plan:' added to it\n");
	}
	json_object_set_new(routes, "continue", json_string(cont->status));
	json_array_append_new(opts, json_string("continue"));
	buf_addf(&q, "  continue      go on with %s%s (a plain approval does "
		     "the same)\n"
		     "or reject to end the run (%s).",
		 cont->name, round ? ", one more fix round" : "", outcome);
	extra = json_pack("{s:o, s:s, s:s}", "routes", routes, "outcome",
			  outcome, "why", why);
	if (round)
		json_object_set_new(extra, "round", json_string("continue"));
	rc = engine__ask(d, s, kind, q.ptr, opts, extra, cont->status, res);
	buf_release(&q);
	return rc;
}

/*
 * The answer a person gave at a routed question (progress.answer, which
 * the decision left there), taken: a copy of its text when its option
 * was option, else NULL.
 */
char *
bf_take_option(struct drive *d, const char *option)
{
	json_t *p = engine__prog_load(d), *a = json_object_get(p, "answer");
	const char *o = json_get_str(a, "option");
	char *text = NULL;

	if (o && !strcmp(o, option))
		text = xstrdup(json_get_str(a, "text") ?
				       json_get_str(a, "text") :
				       "");
	if (o) {
		json_object_del(p, "answer");
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
int
bf_ask_install(struct drive *d, const struct stage *s, const char *why,
	       const char *what, enum stage_result *res)
{
	char *q = xasprintf("%s\nInstall it and approve to run %s again, "
			    "approve with guidance 'skip' to go on without "
			    "%s, or reject to end the run.",
			    why, what, what);
	int rc = bf_ask(d, s, "agent_missing", q,
		     json_pack("[s, s]", "install", "skip"), s->status, res);

	free(q);
	return rc;
}

/* A call of s that blocked on a missing agent asks, when s may be
 * skipped. */
int
bf_ask_missing(struct drive *d, const struct stage *s, enum stage_result *res,
	       char **reason)
{
	int rc;

	if (*res != STAGE_BLOCK || !d->missing || !skippable(d, s))
		return 0;
	rc = bf_ask_install(d, s, *reason, s->name, res);
	free(*reason);
	*reason = NULL;
	return rc;
}

/* Records stage s as skipped by a person. */
int
bf_mark_skipped(struct drive *d, const struct stage *s, struct err *e)
{
	json_t *p = engine__prog_load(d), *st = bf_prog_obj(p, "stages", s->name);

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
int
bf_skip_answered(struct drive *d, const struct stage *s, enum stage_result *res,
		 struct err *e)
{
	char *answer = bf_take_answer(d, "agent_missing");
	int yes = answer && !strcmp(answer, "skip");

	free(answer);
	if (!yes)
		return 0;
	*res = STAGE_PASS;
	bf_prog_set_str(d, "rereview", NULL); /* as a review that passed */
	return bf_mark_skipped(d, s, e);
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
	rc = bf_skip_answered(d, s, res, e);
	if (rc || *res == STAGE_PASS)
		return rc;
	if (bf_who(d, s, NULL, NULL, &prov, reason))
		return 0;
	v = bf_begin_version(d, s);
	file = bugfix_output_name("rca", prov.name, prov.model, s->index, v);
	label = xasprintf("%s/%s", prov.name,
			  prov.model ? prov.model : "default");
	bf_seed_context(d, s, &ctx, &budget);
	cs.artifact = file;
	cs.context = ctx.ptr;
	cs.version = v;
	cs.accept = accept_rca;
	cs.arg = label;
	rc = engine__call_as(d, s, &prov, steers, &cs, res, reason, e);
	if (!rc && *res == STAGE_PASS) {
		json_t *p;

		bf_mark(d, s->name, v, "complete", file);
		p = engine__prog_load(d);
		json_object_set_new(bf_prog_obj(p, "stages", s->name), "label",
				    json_string(label));
		engine__prog_save(d, p);
		json_decref(p);
	} else if (!rc) {
		rc = bf_ask_missing(d, s, res, reason);
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
	char *answer = NULL, *revision = NULL;
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
		answer = bf_take_answer(d, "diagnosis");
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
			rc = bf_ask(d, s, "diagnosis", q.ptr, opts, s->status,
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
	/* a person chose to revise the plan: their words are part of it */
	revision = bf_take_option(d, "revise-plan");
	if (revision && *revision)
		json_object_set_new(c.plan, "revision",
				    json_lossy_str(revision));
	if (!rc)
		rc = engine__keep_json(d, "fix-plan.json", NULL, c.plan, e);
	if (rc)
		goto out;
	bf_prog_set_str(d, "choice",
		     agreed ? "merge" :
		     choice == BUGFIX_ALL_CONTRIBUTING ? "all" :
							 names[choice]);
	rc = engine__note(
		d, "consolidated",
		json_pack("{s:b, s:s, s:I, s:O*, s:b}", "agreed", agreed,
			  "choice",
			  agreed ? "merge" :
			  choice == BUGFIX_ALL_CONTRIBUTING ? "all" :
							      names[choice],
			  "steps", (json_int_t)bugfix_plan_steps(c.plan),
			  "sources", json_object_get(c.diagnosis, "sources"),
			  "revised", revision && *revision),
		e);
	*res = STAGE_PASS;
out:
	for (i = 0; i < n; i++)
		json_decref(docs[i]);
	bugfix_consolidated_release(&c);
	buf_release(&q);
	free(revision);
	free(answer);
	json_decref(p);
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
	if (bf_who(d, s, NULL, NULL, &prov, reason)) {
		*res = STAGE_FAIL;
		return 0;
	}
	verdict = bf_stage_str(d, back->name, "file");
	title = xasprintf("What %s asks you to address (%s)", back->name,
			  verdict ? verdict : "?");
	if (verdict)
		engine__add_file(d, &ctx, title, verdict, &budget);
	free(title);
	bf_seed_context(d, s, &ctx, &budget);
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
		bf_set_rereview(d, x);
	return x;
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

const struct stage_ops bugfix_consolidate_ops = {
	.run = consolidate_run,
};

const struct type_ops bugfix_type = {
	.type = "bugfix",
	.ops = bugfix_stage_ops,
};
