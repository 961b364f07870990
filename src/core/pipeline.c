/*
 * Pipelines: parse a definition into stages, then derive the full
 * transition table from them (see pipeline.h for the rules). The table is
 * the only authority on which status may follow which; the engine asks it
 * before every write.
 *
 * Parsing goes in passes, so that each rule sees the whole list:
 *
 *   read      each stage's keys: kind (or type), names, providers, model,
 *             parallel, phased reviewers. A kind that occurs more than
 *             once numbers its stages: "code-review-2", "reviewing_code_2"
 *   check     the kinds the pipeline's type allows, the stages that may
 *             occur once, parallel groups (numbered), and the order a
 *             bug-fix pipeline needs
 *   complete  a bug-fix pipeline gets the stages it implies: consolidate
 *             after the rca run, fix and revise as side stages
 *   link      next, on_fail and on_changes: names to indexes, defaults
 *   derive    the transition table
 */
#include "util/compat.h"

#include <limits.h>
#include <stdarg.h>

#include "core/cnode.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "core/plugin.h"
#include "util/buf.h"
#include "util/embed.h"
#include "util/err.h"
#include "util/strmap.h"
#include "util/xalloc.h"

/* The kinds each pipeline type may use, in the order errors list them. */
static const enum stage_kind feature_kinds[] = {
	KIND_PLAN,   KIND_ARCHITECT, KIND_EXECUTE, KIND_VALIDATE,
	KIND_REVIEW, KIND_FIX,	     KIND_VERIFY,  KIND_PLUGIN,
	KIND__COUNT,
};
static const enum stage_kind bugfix_kinds[] = {
	KIND_RCA,      KIND_CONSOLIDATE, KIND_PLAN_REVIEW,
	KIND_IMPLEMENT, KIND_CODE_REVIEW, KIND_VALIDATE,
	KIND_FIX,      KIND_REVISE,	 KIND_VERIFY,	KIND_ARBITER,
	KIND__COUNT,
};

static const enum stage_kind loop_kinds[] = {
	KIND_LOOP_PLAN, KIND_ACT, KIND_OBSERVE, KIND_EVALUATE, KIND__COUNT,
};
static const enum stage_kind assist_kinds[] = {
	KIND_INTAKE, KIND_PLAN,	  KIND_EXECUTE, KIND_VALIDATE, KIND_REVIEW,
	KIND_FIX,    KIND_VERIFY, KIND_REPORT,	KIND__COUNT,
};
static const enum stage_kind research_kinds[] = {
	KIND_CLAIMS,  KIND_COLLECT, KIND_CHALLENGE,
	KIND_COMPOSE, KIND_JUDGE,   KIND__COUNT,
};

struct parse;
struct derive;
static int bugfix_order(const struct parse *c);
static void bugfix_complete(struct parse *c);
static void bugfix_derive(struct pipeline *p, struct derive *d,
			  const struct stage *s);
static void assist_derive(struct pipeline *p, struct derive *d,
			  const struct stage *s);

/* Which round bound a run of the type counts against (pipeline_run_bound). */
enum bound {
	BOUND_REVIEW_LOOPS, /* the config's workflow.max_review_loops */
	BOUND_OWN,	    /* the pipeline's max_iterations */
	BOUND_LOOP,	    /* loop.max_iterations, else the pipeline's */
};

/*
 * A pipeline type: the kinds it may use and the rules of its own, as
 * hooks the generic passes call. once: the kinds a pipeline of the type
 * must have exactly once, in this order among themselves (the engine
 * keeps one record of each per round: a loop's step, a research job's
 * claims and report). returns: its side stages that may go back do so
 * (a bug-fix fix returns to the review that sent it). groups: its
 * reviews may run as parallel groups, which describe lists.
 */
static const struct pipeline_type {
	const char *name;
	const enum stage_kind *kinds; /* ends with KIND__COUNT */
	const enum stage_kind *once;  /* NULL or ends with KIND__COUNT */
	int (*check_order)(const struct parse *c);   /* NULL: none */
	void (*complete)(struct parse *c);	     /* implied stages */
	void (*derive)(struct pipeline *p, struct derive *d,
		       const struct stage *s);	     /* edges of its own */
	enum bound bound;
	int returns, groups;
} types[] = {
	{ "feature", feature_kinds, NULL, NULL, NULL, NULL,
	  BOUND_REVIEW_LOOPS, 0, 0 },
	{ "bugfix", bugfix_kinds, NULL, bugfix_order, bugfix_complete,
	  bugfix_derive, BOUND_OWN, 1, 1 },
	{ "loop", loop_kinds,
	  (const enum stage_kind[]){ KIND_LOOP_PLAN, KIND_ACT, KIND_EVALUATE,
				     KIND__COUNT },
	  NULL, NULL, NULL, BOUND_LOOP, 0, 0 },
	{ "assist", assist_kinds,
	  (const enum stage_kind[]){ KIND_INTAKE, KIND_REPORT, KIND__COUNT },
	  NULL, NULL, assist_derive, BOUND_REVIEW_LOOPS, 0, 0 },
	{ "research", research_kinds,
	  (const enum stage_kind[]){ KIND_CLAIMS, KIND_COLLECT, KIND_COMPOSE,
				     KIND_JUDGE, KIND__COUNT },
	  NULL, NULL, NULL, BOUND_OWN, 0, 0 },
};

static const char *const why_names[] = {
	[WHY_START] = "start",	     [WHY_DONE] = "done",
	[WHY_NEXT] = "next",	     [WHY_FAIL] = "checks failed",
	[WHY_CHANGES] = "changes requested",
	[WHY_GATE] = "gate",	     [WHY_APPROVE] = "approve",
	[WHY_REDO] = "request changes", [WHY_REJECT] = "reject",
	[WHY_PAUSE] = "pause",	     [WHY_RESUME] = "resume",
	[WHY_BLOCK] = "block",	     [WHY_FAILED] = "fail",
	[WHY_ABORT] = "abort",	     [WHY_INTERRUPT] = "interrupt",
	[WHY_RECOVER] = "recover",   [WHY_REREVIEW] = "re-review",
	[WHY_ASK] = "ask",	     [WHY_ANSWER] = "answer",
	[WHY_REEXAMINE] = "re-examine", [WHY_CONTINUE] = "continue",
	[WHY_GOAL] = "goal met",     [WHY_REWORK] = "rework",
	[WHY_REVISE] = "revise",     [WHY_DEFER] = "defer",
	[WHY_ASK_AGAIN] = "ask again",
};

static const char *const builtin_names[] = {
	"feature", "bugfix", "loop", "assist", "research",
	"express", "plan-only", "panel-review", "security-review", NULL,
};

static const char *const reserved[] = {
	ST_CREATED, ST_WAITING, ST_PAUSED, ST_INTERRUPTED, ST_BLOCKED,
	ST_FAILED, ST_ABORTED, ST_MERGE_READY, ST_COMPLETED, NULL,
};

const char *
stage_kind_label(const struct stage *s)
{
	return s->pkind ? s->pkind->name : stage_kind_name(s->kind);
}

const char *
edge_why_name(enum edge_why w)
{
	return why_names[w];
}

int
status_is_terminal(const char *s)
{
	return !strcmp(s, ST_MERGE_READY) || !strcmp(s, ST_COMPLETED) ||
	       !strcmp(s, ST_BLOCKED) || !strcmp(s, ST_FAILED) ||
	       !strcmp(s, ST_ABORTED);
}

static const struct pipeline_type *
find_type(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(types); i++)
		if (!strcmp(types[i].name, name))
			return &types[i];
	return NULL;
}

int
pipeline_kind_allowed(const char *type, enum stage_kind k)
{
	const struct pipeline_type *t = find_type(type ? type : "feature");
	const enum stage_kind *kp;

	if (!t)
		return 0;
	for (kp = t->kinds; *kp != KIND__COUNT; kp++)
		if (*kp == k)
			return 1;
	return 0;
}

/* The type of p, which the parser has checked. */
static const struct pipeline_type *
type_of(const struct pipeline *p)
{
	const struct pipeline_type *t = find_type(p->type ? p->type :
							  "feature");

	if (!t)
		BUG("pipeline '%s' has no type '%s'", p->name, p->type);
	return t;
}

int
pipeline_run_bound(const struct pipeline *p, int max_review_loops,
		   int loop_max_iterations)
{
	switch (type_of(p)->bound) {
	case BOUND_REVIEW_LOOPS:
		return max_review_loops;
	case BOUND_LOOP:
		if (loop_max_iterations)
			return loop_max_iterations;
		break;
	case BOUND_OWN:
		break;
	}
	return p->max_iterations;
}

/* "a, b, c": the kinds of list (ending with KIND__COUNT), or all. */
static void
kind_list(const enum stage_kind *list, struct buf *out)
{
	const struct plugin *pl;
	size_t n, i, j;
	int k, plugins = !list;

	if (list) {
		for (; *list != KIND__COUNT; list++)
			if (kind_is(*list, KF_UNNAMED))
				plugins = 1;
			else
				buf_addf(out, "%s%s", out->len ? ", " : "",
					 stage_kind_name(*list));
	} else {
		for (k = 0; k < KIND__COUNT; k++)
			if (!kind_is((enum stage_kind)k, KF_UNNAMED))
				buf_addf(out, "%s%s", k ? ", " : "",
					 stage_kind_name((enum stage_kind)k));
	}
	/* and the kinds of the enabled plugins */
	pl = plugins ? plugins_all(&n) : NULL;
	for (i = 0; pl && i < n; i++)
		for (j = 0; pl[i].status == PLUGIN_ENABLED &&
			    j < pl[i].nr_kinds;
		     j++)
			buf_addf(out, ", %s", pl[i].kinds[j].name);
}

void
pipeline_free(struct pipeline *p)
{
	size_t i, j;

	if (!p)
		return;
	for (i = 0; i < p->nr_stages; i++) {
		struct stage *s = &p->stages[i];

		free(s->name);
		free(s->status);
		free(s->done);
		free(s->role);
		free(s->where);
		free(s->model);
		free(s->prompt);
		free(s->findings);
		strvec_clear(&s->providers);
		for (j = 0; j < s->nr_phased; j++) {
			free(s->phased[j].provider);
			free(s->phased[j].model);
		}
		free(s->phased);
	}
	for (i = 0; i < p->nr_statuses; i++)
		free(p->statuses[i]);
	free(p->stages);
	free(p->statuses);
	free(p->edges);
	free(p->plugin);
	free(p->name);
	free(p->description);
	free(p->type);
	free(p->terminal);
	if (p->state_of)
		for (i = 0; i < p->nr_statuses; i++)
			free(p->state_of[i]);
	free(p->state_of);
	free(p);
}

/*
 * 1 if s is a safe status, role or provider name: 1 to 48 lowercase
 * letters, digits, '_' and '-', so it can appear in file names, branches
 * and SQL unquoted.
 */
static int
is_name(const char *s)
{
	const char *c;

	for (c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		      *c == '_' || *c == '-'))
			return 0;
	return *s && c - s <= 48;
}

/*
 * 1 if s is a safe model name: 1 to 100 of [A-Za-z0-9._:/@+-], not
 * starting with '-' (it reaches an agent's argv) and without ".." (it
 * reaches output file names).
 */
static int
is_model_name(const char *s)
{
	size_t n = strlen(s), i;

	if (!n || n > 100 || s[0] == '-' || strstr(s, ".."))
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("._:/@+-", s[i])))
			return 0;
	return 1;
}

/*
 * Reads an optional scalar key of a stage into *out (a copy), checking
 * that it is a safe name (is_name).
 */
static int
opt_name(const struct cnode *def, const char *key, const char *path,
	 char **out, struct err *e)
{
	const struct cnode *n = cnode_get(def, key);
	char where[256], full[256];
	int rc;

	if (!n)
		return 0;
	snprintf(full, sizeof(full), "%s.%s", path, key);
	rc = cnode_expect(n, CNODE_SCALAR, full, e);
	if (rc)
		return rc;
	if (!is_name(n->value)) {
		cnode_where(n, where, sizeof(where));
		return err_set(e, BATON_EINVAL,
			       "%s: %s: '%s' is not a valid name (lowercase "
			       "letters, digits, '_' and '-', at most 48)",
			       where, full, n->value);
	}
	free(*out);
	*out = xstrdup(n->value);
	return 0;
}

static int
stage_index(const struct pipeline *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->nr_stages; i++)
		if (!strcmp(p->stages[i].name, name))
			return (int)i;
	return -1;
}

/* The first stage of kind k, or -1. */
static int
first_of(const struct pipeline *p, enum stage_kind k)
{
	size_t i;

	for (i = 0; i < p->nr_stages; i++)
		if (p->stages[i].kind == k)
			return (int)i;
	return -1;
}

/* Resolves a stage reference key (next, on_fail, on_changes). */
static int
stage_ref(struct pipeline *p, const struct strmap *names,
	  const struct cnode *def, const char *key, const char *path, int *out,
	  struct err *e)
{
	const struct cnode *n = cnode_get(def, key);
	char where[256], full[256];
	size_t idx;
	int rc;

	if (!n)
		return 0;
	snprintf(full, sizeof(full), "%s.%s", path, key);
	rc = cnode_expect(n, CNODE_SCALAR, full, e);
	if (rc)
		return rc;
	if (!strcmp(key, "next") && !strcmp(n->value, p->terminal)) {
		*out = -1;
		return 0;
	}
	if (!strmap_get(names, n->value, &idx)) {
		cnode_where(n, where, sizeof(where));
		return err_set(e, BATON_EINVAL, "%s: %s: no stage named '%s'",
			       where, full, n->value);
	}
	*out = (int)idx;
	return 0;
}

/*
 * What pipeline_parse keeps while it builds a pipeline: the definition
 * behind each stage and its place in the written list, so that errors
 * point at what the user wrote even after implicit stages were added.
 */
struct parse {
	struct pipeline *p;
	const struct cnode *list;  /* the definition's stages */
	const struct cnode **defs; /* defs[i] defines stages[i]; NULL:
				      implicit */
	size_t *pos;		   /* defs[i] is list->kids[pos[i]] */
	size_t cap;		   /* slots in stages, defs and pos */
	int count[KIND__COUNT];	   /* stages of each kind written */
	int seen[KIND__COUNT];	   /* of them, read so far */
	char path[256];		   /* "pipelines.NAME.stages" */
	struct strmap names;	   /* stage name -> index (check_names) */
	struct err *e;
};

/*
 * Stage i as errors name it: "pipelines.x.stages[2] (name)", or for an
 * implicit stage "pipelines.x.stages (name, implicit)".
 */
static void
stage_path(const struct parse *c, size_t i, char *out, size_t len)
{
	const char *name = c->p->stages[i].name;

	if (!name)
		name = "?";
	if (c->defs[i])
		snprintf(out, len, "%s[%zu] (%s)", c->path, c->pos[i], name);
	else
		snprintf(out, len, "%s (%s, implicit)", c->path, name);
}

static int stage_err(const struct parse *c, size_t i, const struct cnode *at,
		     const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * Fails with BATON_EINVAL and "WHERE: PATH (name): what", WHERE being
 * where at was written, else where the stage was.
 */
static int
stage_err(const struct parse *c, size_t i, const struct cnode *at,
	  const char *fmt, ...)
{
	char where[256], sp[320], msg[640];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (at)
		cnode_where(at, where, sizeof(where));
	else
		snprintf(where, sizeof(where), "%s", c->p->stages[i].where);
	stage_path(c, i, sp, sizeof(sp));
	return err_set(c->e, BATON_EINVAL, "%s: %s: %s", where, sp, msg);
}

/*
 * Fills s with the defaults of kind k: index is its number among the
 * stages of that kind. When the kind occurs more than once (repeated),
 * the names are numbered ("code-review-2", "reviewing_code_2") so that
 * every stage and status stays unique without the user naming them.
 */
static void
stage_init(struct stage *s, enum stage_kind k, int index, int repeated,
	   const char *where)
{
	const struct kind_info *ki = kind_info(k);

	memset(s, 0, sizeof(*s));
	s->kind = k;
	s->index = index;
	s->next = s->on_fail = s->on_changes = -1;
	s->where = xstrdup(where);
	strvec_init(&s->providers);
	s->review_interval = 1;
	s->max_phased_iterations = 3;
	/* -1 until complete(): the last code review is the final gate */
	s->on_reject_stop = k == KIND_CODE_REVIEW ? -1 : 0;
	s->role = xstrdup_or_null(ki->role);
	if (repeated) {
		s->name = xasprintf("%s-%d", ki->name, index);
		s->status = xasprintf("%s_%d", ki->status, index);
		s->done = ki->done ? xasprintf("%s_%d", ki->done, index) : NULL;
	} else {
		s->name = xstrdup(ki->name);
		s->status = xstrdup(ki->status);
		s->done = xstrdup_or_null(ki->done);
	}
}

/* The node naming a stage's kind: the scalar itself, type or kind. */
static const struct cnode *
kind_node(const struct cnode *def)
{
	const struct cnode *n;

	if (def->type == CNODE_SCALAR)
		return def;
	n = cnode_get(def, "type");
	return n ? n : cnode_get(def, "kind");
}

/* key of stage i as messages name it: "pipelines.x.stages[1] (r): key". */
static void
key_path(const struct parse *c, size_t i, const char *key, char *out,
	 size_t len)
{
	char sp[320];

	stage_path(c, i, sp, sizeof(sp));
	snprintf(out, len, "%s: %s", sp, key);
}

static int
read_bool(const struct parse *c, size_t i, const char *key, int *out)
{
	const struct cnode *n = cnode_get(c->defs[i], key);
	char path[400];

	if (!n)
		return 0;
	key_path(c, i, key, path, sizeof(path));
	return cnode_bool(n, path, out, c->e);
}

static int
read_int(const struct parse *c, size_t i, const struct cnode *n,
	 const char *key, long min, long max, int *out)
{
	char path[400];
	long v;
	int rc;

	key_path(c, i, key, path, sizeof(path));
	rc = cnode_int(n, path, min, max, &v, c->e);
	if (!rc)
		*out = (int)v;
	return rc;
}

/*
 * A provider name written in a stage (n, under key). Whether the config
 * has it is for `baton pipeline validate` and run creation to say: the
 * parser does not see the config.
 */
static int
check_provider(const struct parse *c, size_t i, const struct cnode *n,
	       const char *key)
{
	if (n->type != CNODE_SCALAR)
		return stage_err(c, i, n, "%s: expected a provider name", key);
	if (!is_name(n->value))
		return stage_err(c, i, n,
				 "%s: '%s' is not a valid provider name "
				 "(lowercase letters, digits, '_' and '-', at "
				 "most 48)",
				 key, n->value);
	return 0;
}

static int
check_model(const struct parse *c, size_t i, const struct cnode *n,
	    const char *key)
{
	if (n->type != CNODE_SCALAR)
		return stage_err(c, i, n, "%s: expected a model name", key);
	if (!is_model_name(n->value))
		return stage_err(c, i, n,
				 "%s: model name '%s' is unsafe (a model name "
				 "is 1 to 100 letters, digits and . _ : / @ + "
				 "-, not starting with '-', without '..')",
				 key, n->value);
	return 0;
}

/* provider: one provider name or a non-empty list of them. */
static int
read_providers(const struct parse *c, size_t i, const struct cnode *n,
	       struct strvec *out)
{
	size_t j;
	int rc;

	if (n->type == CNODE_SCALAR) {
		rc = check_provider(c, i, n, "provider");
		if (!rc)
			strvec_push(out, n->value);
		return rc;
	}
	if (n->type != CNODE_SEQ || !n->nr)
		return stage_err(c, i, n,
				 "provider: expected a provider name or a "
				 "non-empty list of them");
	for (j = 0; j < n->nr; j++) {
		rc = check_provider(c, i, n->kids[j], "provider");
		if (rc)
			return rc;
		strvec_push(out, n->kids[j]->value);
	}
	return 0;
}

static const char *const phased_keys[] = {
	"provider", "model", "parallel", NULL,
};

/*
 * phased_reviews: who reviews a step-by-step implementation, batch by
 * batch, with review_interval (steps per batch) and max_phased_iterations
 * (fix rounds per batch before a person is asked). Only an implementation
 * stage has them, and the two numbers mean nothing without reviewers.
 */
static int
read_phased(const struct parse *c, size_t i)
{
	struct stage *s = &c->p->stages[i];
	const struct cnode *def = c->defs[i];
	const struct cnode *n = cnode_get(def, "phased_reviews");
	const struct cnode *iv = cnode_get(def, "review_interval");
	const struct cnode *mx = cnode_get(def, "max_phased_iterations");
	char key[64], path[400];
	size_t j;
	int rc;

	if (!n) {
		if (iv || mx)
			return stage_err(c, i, iv ? iv : mx,
					 "%s is only for an implementation "
					 "stage with phased_reviews",
					 iv ? "review_interval" :
					      "max_phased_iterations");
		return 0;
	}
	if (s->kind != KIND_IMPLEMENT)
		return stage_err(c, i, n,
				 "phased_reviews is only for implementation "
				 "stages");
	if (n->type != CNODE_SEQ || !n->nr)
		return stage_err(c, i, n,
				 "phased_reviews: expected a non-empty list of "
				 "reviewers ({provider, model, parallel})");
	s->phased = xcalloc(n->nr, sizeof(*s->phased));
	for (j = 0; j < n->nr; j++) {
		const struct cnode *r = n->kids[j], *pn, *mn, *bn;
		struct phased_reviewer *pr = &s->phased[j];

		s->nr_phased = j + 1;
		snprintf(key, sizeof(key), "phased_reviews[%zu]", j);
		key_path(c, i, key, path, sizeof(path));
		rc = cnode_expect(r, CNODE_MAP, path, c->e);
		if (!rc)
			rc = cnode_check_keys(r, path, phased_keys, c->e);
		if (rc)
			return rc;
		pn = cnode_get(r, "provider");
		if (!pn)
			return stage_err(c, i, r, "%s: needs a provider", key);
		snprintf(key, sizeof(key), "phased_reviews[%zu].provider", j);
		rc = check_provider(c, i, pn, key);
		if (rc)
			return rc;
		pr->provider = xstrdup(pn->value);
		mn = cnode_get(r, "model");
		if (mn) {
			snprintf(key, sizeof(key), "phased_reviews[%zu].model",
				 j);
			rc = check_model(c, i, mn, key);
			if (rc)
				return rc;
			pr->model = xstrdup(mn->value);
		}
		bn = cnode_get(r, "parallel");
		if (bn) {
			snprintf(key, sizeof(key),
				 "phased_reviews[%zu].parallel", j);
			key_path(c, i, key, path, sizeof(path));
			rc = cnode_bool(bn, path, &pr->parallel, c->e);
			if (rc)
				return rc;
		}
	}
	rc = 0;
	if (iv)
		rc = read_int(c, i, iv, "review_interval", 1, 1000,
			      &s->review_interval);
	if (!rc && mx)
		rc = read_int(c, i, mx, "max_phased_iterations", 1, 100,
			      &s->max_phased_iterations);
	return rc;
}

/* budget: {max_cost_usd, max_tokens}, for the stage's agent calls. */
static int
read_budget(const struct parse *c, size_t i)
{
	static const char *const keys[] = { "max_cost_usd", "max_tokens",
					    NULL };
	struct stage *s = &c->p->stages[i];
	const struct cnode *b = cnode_get(c->defs[i], "budget"), *n;
	char path[400];
	int rc;

	if (!b)
		return 0;
	key_path(c, i, "budget", path, sizeof(path));
	rc = cnode_expect(b, CNODE_MAP, path, c->e);
	if (!rc)
		rc = cnode_check_keys(b, path, keys, c->e);
	if (rc)
		return rc;
	n = cnode_get(b, "max_cost_usd");
	if (n) {
		key_path(c, i, "budget.max_cost_usd", path, sizeof(path));
		rc = cnode_number(n, path, 0, 1e9, &s->max_cost_usd, c->e);
		if (rc)
			return rc;
	}
	n = cnode_get(b, "max_tokens");
	if (n) {
		key_path(c, i, "budget.max_tokens", path, sizeof(path));
		rc = cnode_int(n, path, 0, LONG_MAX, &s->max_tokens, c->e);
		if (rc)
			return rc;
	}
	if (!s->max_cost_usd && !s->max_tokens)
		return stage_err(c, i, b,
				 "budget: needs max_cost_usd or max_tokens "
				 "above 0");
	return 0;
}

/* The keys of a stage after its names: who runs it, and how. */
static int
read_options(const struct parse *c, size_t i)
{
	struct stage *s = &c->p->stages[i];
	const struct cnode *def = c->defs[i], *n;
	int rc;

	rc = read_bool(c, i, "side", &s->side);
	if (!rc)
		rc = read_bool(c, i, "gate", &s->gate);
	if (!rc)
		rc = read_bool(c, i, "parallel", &s->parallel);
	if (rc)
		return rc;
	if (s->parallel && !kind_is(s->kind, KF_ROUNDS))
		return stage_err(c, i, cnode_get(def, "parallel"),
				 "parallel is only for plan-review and "
				 "code-review stages (the others run one at a "
				 "time)");
	n = cnode_get(def, "provider");
	if (n) {
		rc = read_providers(c, i, n, &s->providers);
		if (rc)
			return rc;
	}
	n = cnode_get(def, "model");
	if (n) {
		rc = check_model(c, i, n, "model");
		if (rc)
			return rc;
		s->model = xstrdup(n->value);
	}
	n = cnode_get(def, "timeout_seconds");
	if (n) {
		rc = read_int(c, i, n, "timeout_seconds", 1, 604800,
			      &s->timeout_seconds);
		if (rc)
			return rc;
	}
	rc = read_budget(c, i);
	if (rc)
		return rc;
	n = cnode_get(def, "on_reject");
	if (n) {
		if (s->kind != KIND_CODE_REVIEW)
			return stage_err(c, i, n,
					 "on_reject is only for code-review "
					 "stages");
		if (n->type != CNODE_SCALAR ||
		    (strcmp(n->value, "stop") && strcmp(n->value, "rework")))
			return stage_err(c, i, n,
					 "on_reject: expected stop or rework");
		s->on_reject_stop = !strcmp(n->value, "stop");
	}
	n = cnode_get(def, "prompt");
	if (n) {
		if (n->type != CNODE_SCALAR || !prompt_builtin(n->value) ||
		    strchr(n->value, '/'))
			return stage_err(c, i, n,
					 "prompt: expected the name of a "
					 "built-in prompt (src/core/prompts/, "
					 "e.g. security-review)");
		s->prompt = xstrdup(n->value);
	}
	n = cnode_get(def, "findings");
	if (n) {
		if (s->kind != KIND_REVIEW)
			return stage_err(c, i, n,
					 "findings is only for review stages");
		if (n->type != CNODE_SCALAR || strcmp(n->value, "security"))
			return stage_err(c, i, n,
					 "findings: expected security");
		s->findings = xstrdup(n->value);
	}
	return read_phased(c, i);
}

static const char *const stage_keys[] = {
	"name",		   "kind",	     "type",
	"status",	   "done",	     "role",
	"side",		   "next",	     "on_fail",
	"on_changes",	   "provider",	     "model",
	"parallel",	   "gate",	     "timeout_seconds",
	"on_reject",	   "phased_reviews", "review_interval",
	"max_phased_iterations", "budget",	     "prompt",
	"findings", NULL,
};

/*
 * Reads stage i from defs[i]: its kind, names and options. A stage may be
 * a bare scalar ("review"), meaning a stage of that kind with the default
 * names. The outcome keys (next, on_fail, on_changes) wait for link().
 */
static int
parse_stage(struct parse *c, size_t i)
{
	const struct cnode *def = c->defs[i], *kn, *tn;
	const struct plugin_kind *pk;
	struct stage *s = &c->p->stages[i];
	struct buf all = BUF_INIT;
	char path[300], where[256];
	enum stage_kind k;
	int rc;

	snprintf(path, sizeof(path), "%s[%zu]", c->path, c->pos[i]);
	cnode_where(def, where, sizeof(where));
	if (def->type == CNODE_SCALAR) {
		kn = def;
	} else {
		rc = cnode_expect(def, CNODE_MAP, path, c->e);
		if (!rc)
			rc = cnode_check_keys(def, path, stage_keys, c->e);
		if (rc)
			return rc;
		kn = cnode_get(def, "kind");
		tn = cnode_get(def, "type");
		if (kn && tn)
			return err_set(c->e, BATON_EINVAL,
				       "%s: %s: give 'type' or 'kind', not "
				       "both (they are the same key)",
				       where, path);
		if (!kn)
			kn = tn;
		if (!kn) {
			kind_list(NULL, &all);
			rc = err_set(c->e, BATON_EINVAL,
				     "%s: %s: missing 'type' (or 'kind'): one "
				     "of %s",
				     where, path, all.ptr);
			buf_release(&all);
			return rc;
		}
		rc = cnode_expect(kn, CNODE_SCALAR, path, c->e);
		if (rc)
			return rc;
	}
	k = KIND__COUNT;
	pk = stage_kind_parse(kn->value, &k) ? plugin_kind_find(kn->value) :
					       NULL;
	if (pk)
		k = KIND_PLUGIN;
	if (k == KIND__COUNT) {
		cnode_where(kn, where, sizeof(where));
		kind_list(NULL, &all);
		rc = err_set(c->e, BATON_EINVAL,
			     "%s: %s: unknown stage kind '%s' (expected one "
			     "of %s)",
			     where, path, kn->value, all.ptr);
		buf_release(&all);
		return rc;
	}
	if (pk) {
		/* a plugin kind: named after itself; two in one pipeline
		   need names of their own */
		stage_init(s, k, ++c->seen[k], 0, where);
		s->pkind = pk;
		free(s->name);
		free(s->status);
		s->name = xstrdup(pk->name);
		s->status = xstrdup(pk->status);
	} else {
		stage_init(s, k, ++c->seen[k], c->count[k] > 1, where);
	}
	if (def->type == CNODE_SCALAR)
		return 0;
	rc = opt_name(def, "name", path, &s->name, c->e);
	if (!rc)
		rc = opt_name(def, "status", path, &s->status, c->e);
	if (!rc)
		rc = opt_name(def, "done", path, &s->done, c->e);
	if (!rc)
		rc = opt_name(def, "role", path, &s->role, c->e);
	if (!rc)
		rc = read_options(c, i);
	return rc;
}

/* 1 if a stage of kind k is in [from, to) of p's stages. */
static int
has_kind(const struct pipeline *p, size_t from, size_t to, enum stage_kind k)
{
	for (; from < to && from < p->nr_stages; from++)
		if (p->stages[from].kind == k)
			return 1;
	return 0;
}

/* How many rca stages lead the list. */
static size_t
rca_run(const struct pipeline *p)
{
	size_t n = 0;

	while (n < p->nr_stages && p->stages[n].kind == KIND_RCA)
		n++;
	return n;
}

/*
 * The kinds a loop, assist or research pipeline has exactly once, in
 * their order: "pipelines.x.stages: a loop pipeline needs exactly one
 * act stage (it has 0)".
 */
static int
check_once(const struct parse *c)
{
	const struct pipeline *p = c->p;
	const enum stage_kind *k = find_type(p->type)->once;
	size_t i, at, last = 0;
	int n;
	char where[256];

	for (; k && *k != KIND__COUNT; k++) {
		for (i = 0, n = 0, at = 0; i < p->nr_stages; i++)
			if (p->stages[i].kind == *k && !n++)
				at = i;
		if (n == 1 && at >= last) {
			last = at;
			continue;
		}
		cnode_where(c->list, where, sizeof(where));
		if (n == 1)
			return stage_err(c, at, NULL,
					 "%s must come after %s in %s %s "
					 "pipeline",
					 stage_kind_name(*k),
					 stage_kind_name(p->stages[last].kind),
					 strchr("aeiou", p->type[0]) ? "an" :
								       "a",
					 p->type);
		return err_set(c->e, BATON_EINVAL,
			       "%s: %s: %s %s pipeline needs exactly one %s "
			       "stage (it has %d)",
			       where, c->path,
			       strchr("aeiou", p->type[0]) ? "an" : "a",
			       p->type, stage_kind_name(*k), n);
	}
	return 0;
}

/* The kinds the pipeline's type allows; the stages that occur once. */
static int
check_kinds(const struct parse *c)
{
	const struct pipeline *p = c->p;
	struct buf allowed = BUF_INIT;
	int seen[KIND__COUNT] = { 0 };
	size_t i;
	int rc;

	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];

		if (!pipeline_kind_allowed(p->type, s->kind)) {
			kind_list(find_type(p->type)->kinds, &allowed);
			rc = stage_err(c, i, NULL,
				       "type '%s' is not allowed in %s %s "
				       "pipeline (allowed: %s)",
				       stage_kind_label(s),
				       strchr("aeiou", p->type[0]) ? "an" : "a",
				       p->type,
				       allowed.ptr);
			buf_release(&allowed);
			return rc;
		}
		if (kind_info(s->kind)->once && seen[s->kind]++)
			return stage_err(c, i, NULL, "%s may appear only once: "
					 "%s", stage_kind_name(s->kind),
					 kind_info(s->kind)->once);
	}
	return check_once(c);
}

/*
 * The order a bug-fix pipeline's records need: the rca stages first, one
 * after another; consolidate right after them (it merges their records
 * into the fix plan); plan-review once the plan exists and before the
 * implementation; code-review after it. And there must be an
 * implementation.
 */
static int
bugfix_order(const struct parse *c)
{
	const struct pipeline *p = c->p;
	char where[256];
	size_t i, nrca;

	if (first_of(p, KIND_IMPLEMENT) < 0) {
		cnode_where(c->list, where, sizeof(where));
		return err_set(c->e, BATON_EINVAL,
			       "%s: %s: a bugfix pipeline needs an "
			       "implementation stage",
			       where, c->path);
	}
	nrca = rca_run(p);
	for (i = nrca; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];

		switch (s->kind) {
		case KIND_RCA:
			return stage_err(c, i, NULL,
					 "rca stages must come first, one "
					 "after another (this one comes after "
					 "'%s')",
					 p->stages[i - 1].name);
		case KIND_CONSOLIDATE:
			if (!nrca)
				return stage_err(c, i, NULL,
						 "consolidate needs rca stages "
						 "before it (it merges their "
						 "records)");
			if (i != nrca)
				return stage_err(c, i, NULL,
						 "consolidate must come "
						 "directly after the last rca "
						 "stage");
			break;
		case KIND_PLAN_REVIEW:
			if (!nrca)
				return stage_err(c, i, NULL,
						 "a plan-review needs a fix "
						 "plan: it must come after the "
						 "rca stages and consolidate");
			if (!has_kind(p, i + 1, p->nr_stages, KIND_IMPLEMENT))
				return stage_err(c, i, NULL,
						 "a plan-review must come "
						 "before the implementation "
						 "stage");
			break;
		case KIND_CODE_REVIEW:
			if (!has_kind(p, 0, i, KIND_IMPLEMENT))
				return stage_err(c, i, NULL,
						 "a code-review must come "
						 "after the implementation "
						 "stage");
			break;
		default:
			break;
		}
	}
	return 0;
}

/* Makes an implicit stage of kind k at index at, moving the rest on. */
static void
insert_stage(struct parse *c, size_t at, enum stage_kind k, int side)
{
	struct pipeline *p = c->p;
	size_t n = p->nr_stages - at;
	char where[256];

	if (p->nr_stages >= c->cap)
		BUG("no room for implicit stage '%s'", stage_kind_name(k));
	memmove(&p->stages[at + 1], &p->stages[at], n * sizeof(*p->stages));
	memmove(&c->defs[at + 1], &c->defs[at], n * sizeof(*c->defs));
	memmove(&c->pos[at + 1], &c->pos[at], n * sizeof(*c->pos));
	p->nr_stages++;
	cnode_where(c->list, where, sizeof(where));
	stage_init(&p->stages[at], k, 1, 0, where);
	p->stages[at].side = side;
	p->stages[at].implicit = 1;
	c->defs[at] = NULL;
	c->pos[at] = 0;
}

/*
 * A bug-fix pipeline writes only the stages that do work of their own;
 * this adds what they imply (the seed's orchestrator steps): consolidate
 * after the last rca when none is written, and the side stages that
 * reviews send their changes to, fix for code reviews and revise for
 * plan reviews. Then the last code review becomes the final gate unless
 * on_reject says otherwise. At most three stages are added.
 */
static void
bugfix_complete(struct parse *c)
{
	struct pipeline *p = c->p;
	size_t nrca = rca_run(p);

	if (nrca && first_of(p, KIND_CONSOLIDATE) < 0)
		insert_stage(c, nrca, KIND_CONSOLIDATE, 0);
	if (first_of(p, KIND_CODE_REVIEW) >= 0 && first_of(p, KIND_FIX) < 0)
		insert_stage(c, p->nr_stages, KIND_FIX, 1);
	if (first_of(p, KIND_PLAN_REVIEW) >= 0 &&
	    first_of(p, KIND_REVISE) < 0)
		insert_stage(c, p->nr_stages, KIND_REVISE, 1);
}

/* The type's implied stages, then the final code review's default. */
static void
complete(struct parse *c)
{
	struct pipeline *p = c->p;
	size_t i;
	int last = -1;

	if (type_of(p)->complete)
		type_of(p)->complete(c);
	for (i = 0; i < p->nr_stages; i++)
		if (p->stages[i].kind == KIND_CODE_REVIEW)
			last = (int)i;
	for (i = 0; i < p->nr_stages; i++)
		if (p->stages[i].on_reject_stop < 0)
			p->stages[i].on_reject_stop = (int)i == last;
}

/*
 * What derive() builds the table with: the statuses and edges so far,
 * each looked up by a hash rather than by a scan of the lists (a config
 * may have thousands of stages, and every one adds statuses and edges).
 */
struct derive {
	size_t salloc, ealloc;
	struct strmap status_at; /* status -> its index in p->statuses */
	struct strmap edge_seen; /* "FROM>TO" (status indexes) */
};

static void
add_status(struct pipeline *p, struct derive *d, const char *s)
{
	if (!strmap_add(&d->status_at, s, p->nr_statuses))
		return;
	ALLOC_GROW(p->statuses, p->nr_statuses + 1, d->salloc);
	p->statuses[p->nr_statuses++] = xstrdup(s);
}

static int
status_pos(const struct pipeline *p, const char *s)
{
	size_t i;

	for (i = 0; i < p->nr_statuses; i++)
		if (!strcmp(p->statuses[i], s))
			return (int)i;
	return -1;
}

/* Adds from -> to, unless the pair is there already (the first why stays). */
static void
add_edge(struct pipeline *p, struct derive *d, const char *from, const char *to,
	 enum edge_why why)
{
	size_t f, t;
	char pair[48];

	if (!strmap_get(&d->status_at, from, &f) ||
	    !strmap_get(&d->status_at, to, &t))
		BUG("edge between unknown statuses '%s' -> '%s'", from, to);
	snprintf(pair, sizeof(pair), "%zu>%zu", f, t);
	if (!strmap_add(&d->edge_seen, pair, 0))
		return;
	ALLOC_GROW(p->edges, p->nr_edges + 1, d->ealloc);
	p->edges[p->nr_edges].from = p->statuses[f];
	p->edges[p->nr_edges].to = p->statuses[t];
	p->edges[p->nr_edges].from_at = f;
	p->edges[p->nr_edges].to_at = t;
	p->edges[p->nr_edges].why = why;
	p->nr_edges++;
}

/* The status a stage rests in once it succeeded. */
static const char *
exit_status(const struct stage *s)
{
	return s->done ? s->done : s->status;
}

/* Status order: by from, then to. */
static int
edge_cmp(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	if (x->from_at != y->from_at)
		return x->from_at < y->from_at ? -1 : 1;
	if (x->to_at != y->to_at)
		return x->to_at < y->to_at ? -1 : 1;
	return 0;
}

/*
 * A boundary edge A → X enters stage X from resting point A. Around each
 * one go the gate and pause edges; `back` is the stage that ended at A
 * (NULL for created), which a gate's request-changes re-runs.
 */
static void
add_boundary(struct pipeline *p, struct derive *d, const char *a,
	     const struct stage *x, const struct stage *back, enum edge_why why)
{
	add_edge(p, d, a, x->status, why);
	add_edge(p, d, a, ST_WAITING, WHY_GATE);
	add_edge(p, d, ST_WAITING, x->status, WHY_APPROVE);
	if (back)
		add_edge(p, d, ST_WAITING, back->status, WHY_REDO);
	add_edge(p, d, a, ST_PAUSED, WHY_PAUSE);
	add_edge(p, d, ST_PAUSED, x->status, WHY_RESUME);
}

/* s's work may stop to ask a person, and the answer re-runs it. */
static void
add_question(struct pipeline *p, struct derive *d, const struct stage *s)
{
	add_edge(p, d, s->status, ST_WAITING, WHY_ASK);
	add_edge(p, d, ST_WAITING, s->status, WHY_ANSWER);
}

/*
 * An assist report waits for feedback (OpenViber seed 003): approve
 * ends the task, revise plans again with the person's notes, defer puts
 * it aside (paused) until it is resumed into planning.
 */
static void
derive_feedback(struct pipeline *p, struct derive *d, const struct stage *s)
{
	int plan = first_of(p, KIND_PLAN);
	const struct stage *again = plan >= 0 ? &p->stages[plan] :
				    pipeline_first(p);

	add_question(p, d, s);
	add_edge(p, d, ST_WAITING, p->terminal, WHY_APPROVE);
	add_edge(p, d, ST_WAITING, again->status, WHY_REVISE);
	add_edge(p, d, ST_WAITING, ST_PAUSED, WHY_DEFER);
	add_edge(p, d, ST_PAUSED, again->status, WHY_RESUME);
}

/*
 * The questions the bug-fix stages may put to a person (disagreeing
 * analyses, needs_clarification, a rejected plan, phased rounds spent):
 * the stage → waiting_for_approval, and the answer runs it again. A
 * rejected plan may also send the run back to the first analysis. They
 * are added before the flow edges so that the pairs they share with
 * gates show as what they mostly are.
 */
static void
derive_questions(struct pipeline *p, struct derive *d)
{
	void (*own)(struct pipeline *, struct derive *,
		    const struct stage *) = type_of(p)->derive;
	size_t i;

	for (i = 0; i < p->nr_stages; i++) {
		if (kind_is(p->stages[i].kind, KF_ASKS))
			add_question(p, d, &p->stages[i]);
		if (own)
			own(p, d, &p->stages[i]);
	}
}

/* A phased implementation asks; a rejected plan may re-examine. */
static void
bugfix_derive(struct pipeline *p, struct derive *d, const struct stage *s)
{
	int rca = first_of(p, KIND_RCA);

	if (s->kind == KIND_IMPLEMENT && s->nr_phased)
		add_question(p, d, s);
	if (s->kind == KIND_PLAN_REVIEW && rca >= 0)
		add_edge(p, d, ST_WAITING, p->stages[rca].status,
			 WHY_REEXAMINE);
}

/* An execute stage's escalation asks; a report takes feedback. */
static void
assist_derive(struct pipeline *p, struct derive *d, const struct stage *s)
{
	if (s->kind == KIND_EXECUTE)
		add_question(p, d, s);
	if (s->kind == KIND_REPORT)
		derive_feedback(p, d, s);
}

/*
 * Side stages that go back to the stage that sent them (each stage whose
 * on_changes or on_fail they are), and parallel groups, whose members
 * each lead to the stage after the group.
 */
static void
derive_loops(struct pipeline *p, struct derive *d)
{
	size_t i, j, first = 0, n;
	int g, after;

	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *f = &p->stages[i];

		if (f->next != STAGE_BACK)
			continue;
		for (j = 0; j < p->nr_stages; j++)
			if (p->stages[j].on_changes == (int)i ||
			    p->stages[j].on_fail == (int)i)
				add_boundary(p, d, exit_status(f),
					     &p->stages[j], f, WHY_REREVIEW);
	}
	for (g = 1;; g++) {
		n = pipeline_group(p, g, &first);
		if (!n)
			break;
		after = pipeline_after(p, &p->stages[first]);
		for (j = first; j < first + n; j++) {
			const struct stage *m = &p->stages[j];

			if (after < 0)
				add_edge(p, d, exit_status(m), p->terminal,
					 WHY_NEXT);
			else
				add_boundary(p, d, exit_status(m),
					     &p->stages[after], m, WHY_NEXT);
		}
	}
}

static void
derive(struct pipeline *p)
{
	struct derive dc = { 0, 0, STRMAP_INIT, STRMAP_INIT }, *d = &dc;
	const struct stage *first = pipeline_first(p);
	size_t i;

	add_status(p, d, ST_CREATED);
	for (i = 0; i < p->nr_stages; i++) {
		add_status(p, d, p->stages[i].status);
		if (p->stages[i].done)
			add_status(p, d, p->stages[i].done);
	}
	add_status(p, d, ST_WAITING);
	add_status(p, d, ST_PAUSED);
	add_status(p, d, ST_INTERRUPTED);
	add_status(p, d, p->terminal);
	add_status(p, d, ST_BLOCKED);
	add_status(p, d, ST_FAILED);
	add_status(p, d, ST_ABORTED);

	derive_questions(p, d);
	add_boundary(p, d, ST_CREATED, first, NULL, WHY_START);
	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];
		const char *x = exit_status(s);

		if (s->done)
			add_edge(p, d, s->status, s->done, WHY_DONE);
		if (s->next == -1)
			add_edge(p, d, x, p->terminal, WHY_NEXT);
		else if (s->next >= 0)
			add_boundary(p, d, x, &p->stages[s->next], s, WHY_NEXT);
		if (s->on_fail >= 0)
			add_boundary(p, d, s->status, &p->stages[s->on_fail], s,
				     WHY_FAIL);
		if (s->on_changes >= 0)
			add_boundary(p, d, s->status, &p->stages[s->on_changes],
				     s,
				     s->kind == KIND_EVALUATE ? WHY_CONTINUE :
				     s->kind == KIND_JUDGE	? WHY_REWORK :
								  WHY_CHANGES);
		if (s->kind == KIND_LOOP_PLAN)
			add_edge(p, d, s->status, p->terminal, WHY_GOAL);
	}
	derive_loops(p, d);
	add_edge(p, d, ST_WAITING, ST_BLOCKED, WHY_REJECT);
	/* Any gate or question may be put off; resume asks it again (an
	 * assist report's feedback, above, resumes into planning instead). */
	add_edge(p, d, ST_WAITING, ST_PAUSED, WHY_DEFER);
	add_edge(p, d, ST_PAUSED, ST_WAITING, WHY_ASK_AGAIN);
	for (i = 0; i < p->nr_stages; i++) {
		/* an agent's stage waits for a credential it lacks (added
		 * last: where a gate has the pair, it keeps its name) */
		if (!kind_is(p->stages[i].kind, KF_ENGINE))
			add_question(p, d, &p->stages[i]);
		add_edge(p, d, p->stages[i].status, ST_BLOCKED, WHY_BLOCK);
		add_edge(p, d, p->stages[i].status, ST_INTERRUPTED,
			 WHY_INTERRUPT);
		add_edge(p, d, ST_INTERRUPTED, p->stages[i].status,
			 WHY_RECOVER);
	}
	for (i = 0; i < p->nr_statuses; i++) {
		if (status_is_terminal(p->statuses[i]))
			continue;
		add_edge(p, d, p->statuses[i], ST_FAILED, WHY_FAILED);
		add_edge(p, d, p->statuses[i], ST_ABORTED, WHY_ABORT);
	}
	qsort(p->edges, p->nr_edges, sizeof(*p->edges), edge_cmp);
	strmap_release(&d->status_at);
	strmap_release(&d->edge_seen);
}

/*
 * Status names must be unique and must not reuse a shared one. Names and
 * statuses are looked up in hashes: one pass, however many stages. Fills
 * c->names for the references link_stages() resolves.
 */
static int
check_names(struct parse *c)
{
	const struct pipeline *p = c->p;
	struct strmap owner = STRMAP_INIT;
	size_t i, nmain = 0, j;
	int rc = 0;

	for (i = 0; i < p->nr_stages && !rc; i++) {
		const struct stage *s = &p->stages[i];
		const char *mine[2] = { s->status, s->done };
		int k;

		if (!s->side)
			nmain++;
		for (k = 0; k < 2 && !rc; k++) {
			if (!mine[k])
				continue;
			if (str_in_list(reserved, mine[k]))
				rc = stage_err(c, i, NULL,
					       "status '%s' is reserved for "
					       "every pipeline",
					       mine[k]);
		}
		if (rc)
			break;
		if (s->done && s->status && !strcmp(s->done, s->status)) {
			rc = stage_err(c, i, NULL, "done and status are both "
				       "'%s'", s->done);
			break;
		}
		if (!strmap_add(&c->names, s->name, i)) {
			rc = stage_err(c, i, NULL,
				       "a stage named '%s' already exists",
				       s->name);
			break;
		}
		for (k = 0; k < 2 && !rc; k++)
			if (mine[k] && strmap_get(&owner, mine[k], &j))
				rc = stage_err(c, i, NULL,
					       "status '%s' is already used "
					       "by stage '%s'",
					       mine[k], p->stages[j].name);
		for (k = 0; k < 2 && !rc; k++)
			if (mine[k])
				strmap_add(&owner, mine[k], i);
	}
	if (!rc && !nmain)
		rc = err_set(c->e, BATON_EINVAL,
			     "%s: pipeline '%s' has no stage outside the "
			     "side loops",
			     c->path, p->name);
	strmap_release(&owner);
	return rc;
}

/* 1 for the side stages that may go back to the stage that sent them. */
static int
goes_back(const struct stage *s)
{
	return s->side && kind_is(s->kind, KF_GOES_BACK);
}

/*
 * Second pass: outcome edges. The main line's default `next` is the next
 * main stage (or the terminal after the last); side stages must say where
 * they go, except a bug-fix pipeline's fix and revise, which go back to
 * the review that sent them. Plan reviews send their changes to the
 * revise stage and code reviews to the fix stage unless on_changes says.
 */
static int
link_stages(const struct parse *c)
{
	struct pipeline *p = c->p;
	int fix = first_of(p, KIND_FIX), revise = first_of(p, KIND_REVISE);
	char sp[320];
	size_t i, j;
	int rc;

	for (i = 0; i < p->nr_stages; i++) {
		struct stage *s = &p->stages[i];
		const struct cnode *def = c->defs[i], *n;

		stage_path(c, i, sp, sizeof(sp));
		s->next = -1;
		if (!s->side) {
			for (j = i + 1; j < p->nr_stages; j++)
				if (!p->stages[j].side) {
					s->next = (int)j;
					break;
				}
		} else if (goes_back(s) && type_of(p)->returns) {
			s->next = STAGE_BACK;
		}
		if (!def || def->type != CNODE_MAP) {
			if (s->side && s->next != STAGE_BACK)
				BUG("scalar stage cannot be side");
			continue;
		}
		n = cnode_get(def, "next");
		if (s->side && !n && s->next != STAGE_BACK)
			return stage_err(c, i, NULL,
					 "a side stage needs 'next' (the stage "
					 "it returns to)");
		rc = 0;
		if (n && n->type == CNODE_SCALAR && !strcmp(n->value, "back") &&
		    (goes_back(s) || !strmap_get(&c->names, "back", &j))) {
			if (!goes_back(s))
				return stage_err(c, i, n,
						 "next: back is only for side "
						 "fix and revise stages (they "
						 "return to the review that "
						 "sent them)");
			s->next = STAGE_BACK;
		} else {
			rc = stage_ref(p, &c->names, def, "next", sp, &s->next,
				       c->e);
		}
		if (!rc)
			rc = stage_ref(p, &c->names, def, "on_fail", sp,
				       &s->on_fail, c->e);
		if (!rc)
			rc = stage_ref(p, &c->names, def, "on_changes", sp,
				       &s->on_changes, c->e);
		if (rc)
			return rc;
		if (s->on_fail >= 0 && !kind_is(s->kind, KF_ON_FAIL))
			return stage_err(c, i, NULL,
					 "on_fail is only for validate stages");
		if (s->on_changes >= 0 && !kind_is(s->kind, KF_ON_CHANGES))
			return stage_err(c, i, NULL,
					 "on_changes is only for review stages "
					 "(review, plan-review, code-review), "
					 "evaluate (continue), judge (rework) "
					 "and plugin kinds (changes)");
		if (s->next == (int)i || s->on_fail == (int)i ||
		    s->on_changes == (int)i)
			return stage_err(c, i, NULL,
					 "a stage cannot lead to itself");
	}
	for (i = 0; i < p->nr_stages; i++) {
		struct stage *s = &p->stages[i];

		if (s->on_changes >= 0)
			continue;
		if (s->kind == KIND_PLAN_REVIEW && revise >= 0)
			s->on_changes = revise;
		else if (s->kind == KIND_CODE_REVIEW && fix >= 0)
			s->on_changes = fix;
	}
	return 0;
}

/* 1 if t continues the parallel group that s is in or starts. */
static int
same_group(const struct stage *s, const struct stage *t)
{
	return t->kind == s->kind && t->parallel && !t->side && !s->side;
}

/*
 * Numbers the parallel groups (the seed's parallel group detection): two
 * or more consecutive reviews of one kind, all with parallel: true, run
 * at once. A parallel stage without such a neighbour is an error rather
 * than quietly sequential.
 */
static int
assign_groups(const struct parse *c)
{
	struct pipeline *p = c->p;
	size_t i = 0, j;
	int g = 0;

	while (i < p->nr_stages) {
		const struct stage *s = &p->stages[i];

		if (!s->parallel) {
			i++;
			continue;
		}
		for (j = i + 1; j < p->nr_stages; j++)
			if (!same_group(s, &p->stages[j]))
				break;
		if (j - i < 2)
			return stage_err(c, i,
					 c->defs[i] ? cnode_get(c->defs[i],
								"parallel") :
						      NULL,
					 "a parallel group needs two or more "
					 "consecutive %s stages with parallel: "
					 "true",
					 stage_kind_name(s->kind));
		g++;
		for (; i < j; i++)
			p->stages[i].group = g;
	}
	return 0;
}

static const char *const pipeline_keys[] = {
	"name",	  "description", "type",      "terminal", "max_iterations",
	"stages", "states",	 "workspace", "read_only", NULL,
};

/* The pipeline's own keys: description, type, terminal, max_iterations. */
static int
parse_header(struct pipeline *p, const struct cnode *def, const char *path,
	     struct err *e)
{
	const struct cnode *n;
	char where[256], full[256];
	long v;
	int rc;

	n = cnode_get(def, "description");
	if (n) {
		rc = cnode_expect(n, CNODE_SCALAR, "description", e);
		if (rc)
			return rc;
		p->description = xstrdup(n->value);
	}
	n = cnode_get(def, "type");
	if (n) {
		snprintf(full, sizeof(full), "%s.type", path);
		rc = cnode_expect(n, CNODE_SCALAR, full, e);
		if (rc)
			return rc;
		if (!find_type(n->value)) {
			cnode_where(n, where, sizeof(where));
			return err_set(e, BATON_EINVAL,
				       "%s: %s: expected feature, bugfix, "
				       "loop, assist or research, got '%s'",
				       where, full, n->value);
		}
		free(p->type);
		p->type = xstrdup(n->value);
	}
	n = cnode_get(def, "max_iterations");
	if (n) {
		snprintf(full, sizeof(full), "%s.max_iterations", path);
		rc = cnode_int(n, full, 1, 1000, &v, e);
		if (rc)
			return rc;
		p->max_iterations = (int)v;
	}
	n = cnode_get(def, "terminal");
	if (n) {
		rc = cnode_expect(n, CNODE_SCALAR, "terminal", e);
		if (rc)
			return rc;
		if (strcmp(n->value, ST_MERGE_READY) &&
		    strcmp(n->value, ST_COMPLETED)) {
			cnode_where(n, where, sizeof(where));
			return err_set(e, BATON_EINVAL,
				       "%s: %s.terminal: expected merge_ready "
				       "or completed, got '%s'",
				       where, path, n->value);
		}
		free(p->terminal);
		p->terminal = xstrdup(n->value);
	}
	n = cnode_get(def, "workspace");
	if (n) {
		rc = cnode_expect(n, CNODE_SCALAR, "workspace", e);
		if (rc)
			return rc;
		if (strcmp(n->value, "git") && strcmp(n->value, "none")) {
			cnode_where(n, where, sizeof(where));
			return err_set(e, BATON_EINVAL,
				       "%s: %s.workspace: expected git or "
				       "none, got '%s'",
				       where, path, n->value);
		}
		p->no_git = !strcmp(n->value, "none");
		if (p->no_git && strcmp(p->terminal, ST_COMPLETED)) {
			cnode_where(n, where, sizeof(where));
			return err_set(e, BATON_EINVAL,
				       "%s: %s: a pipeline without a "
				       "workspace leaves no branch: its "
				       "terminal must be completed",
				       where, path);
		}
	}
	n = cnode_get(def, "read_only");
	if (n) {
		snprintf(full, sizeof(full), "%s.read_only", path);
		rc = cnode_bool(n, full, &p->read_only, e);
		if (rc)
			return rc;
		if (p->read_only && strcmp(p->terminal, ST_COMPLETED)) {
			cnode_where(n, where, sizeof(where));
			return err_set(e, BATON_EINVAL,
				       "%s: %s: a read-only pipeline changes "
				       "nothing to merge: its terminal must "
				       "be completed",
				       where, full);
		}
	}
	return 0;
}

/*
 * states: {status: name}: the seed's word for each of baton's statuses
 * ("created: pending"), after the table is derived so that every key
 * can be checked against the pipeline's statuses.
 */
static int
read_states(struct pipeline *p, const struct cnode *def, const char *path,
	    struct err *e)
{
	const struct cnode *m = cnode_get(def, "states");
	char where[256], full[256];
	size_t i;
	int at, rc;

	if (!m)
		return 0;
	snprintf(full, sizeof(full), "%s.states", path);
	rc = cnode_expect(m, CNODE_MAP, full, e);
	if (rc)
		return rc;
	p->state_of = xcalloc(p->nr_statuses, sizeof(*p->state_of));
	for (i = 0; i < m->nr; i++) {
		const struct cnode *v = m->kids[i];

		cnode_where(v, where, sizeof(where));
		at = status_pos(p, v->key);
		if (at < 0)
			return err_set(e, BATON_EINVAL,
				       "%s: %s.%s: the pipeline has no "
				       "status '%s'",
				       where, full, v->key, v->key);
		if (v->type != CNODE_SCALAR || !is_name(v->value))
			return err_set(e, BATON_EINVAL,
				       "%s: %s.%s: expected a name (lowercase "
				       "letters, digits, '_', '-')",
				       where, full, v->key);
		free(p->state_of[at]);
		p->state_of[at] = xstrdup(v->value);
	}
	return 0;
}

const char *
pipeline_state(const struct pipeline *p, const char *status)
{
	int at = p->state_of ? status_pos(p, status) : -1;

	return at >= 0 ? p->state_of[at] : NULL;
}

int
pipeline_parse(const char *name, const struct cnode *def, int builtin,
	       struct pipeline **out, struct err *e)
{
	struct pipeline *p = xcalloc(1, sizeof(*p));
	struct parse c = { .p = p, .names = STRMAP_INIT, .e = e };
	char path[200], where[256];
	enum stage_kind k;
	size_t i;
	int rc;

	snprintf(path, sizeof(path), builtin ? "%s" : "pipelines.%s", name);
	p->name = xstrdup(name);
	p->builtin = builtin;
	p->type = xstrdup("feature");
	p->max_iterations = 10;
	p->terminal = xstrdup(ST_MERGE_READY);
	rc = cnode_expect(def, CNODE_MAP, path, e);
	if (!rc)
		rc = cnode_check_keys(def, path, pipeline_keys, e);
	if (!rc)
		rc = parse_header(p, def, path, e);
	if (rc)
		goto out;
	snprintf(c.path, sizeof(c.path), "%s.stages", path);
	c.list = cnode_get(def, "stages");
	if (!c.list || c.list->type != CNODE_SEQ || !c.list->nr) {
		cnode_where(c.list ? c.list : def, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: %s: expected a non-empty list of stages",
			     where, c.path);
		goto out;
	}
	if (c.list->nr > PIPELINE_MAX_STAGES) {
		cnode_where(c.list, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: %s: %zu stages, over the limit of %d stages "
			     "in a pipeline",
			     where, c.path, c.list->nr, PIPELINE_MAX_STAGES);
		goto out;
	}
	/* room for the three implicit stages complete() may add */
	c.cap = c.list->nr + 3;
	p->stages = xcalloc(c.cap, sizeof(*p->stages));
	c.defs = xcalloc(c.cap, sizeof(*c.defs));
	c.pos = xcalloc(c.cap, sizeof(*c.pos));
	for (i = 0; i < c.list->nr; i++) {
		const struct cnode *kn = kind_node(c.list->kids[i]);

		if (kn && kn->type == CNODE_SCALAR &&
		    !stage_kind_parse(kn->value, &k))
			c.count[k]++;
	}
	for (i = 0; i < c.list->nr; i++) {
		c.defs[i] = c.list->kids[i];
		c.pos[i] = i;
		p->nr_stages = i + 1;
		rc = parse_stage(&c, i);
		if (rc)
			goto out;
	}
	/*
	 * Rules about a stage itself before rules about the order, so that a
	 * stage broken in both ways is reported for what is wrong with it.
	 */
	rc = check_kinds(&c);
	if (!rc)
		rc = assign_groups(&c);
	if (!rc && type_of(p)->check_order)
		rc = type_of(p)->check_order(&c);
	if (rc)
		goto out;
	complete(&c);
	rc = check_names(&c);
	if (!rc)
		rc = link_stages(&c);
	if (rc)
		goto out;
	derive(p);
	rc = read_states(p, def, path, e);
	if (rc)
		goto out;
	*out = p;
	p = NULL;
out:
	strmap_release(&c.names);
	free(c.defs);
	free(c.pos);
	pipeline_free(p);
	return rc;
}

const char **
pipeline_builtin_names(void)
{
	return (const char **)builtin_names;
}

int
pipeline_load(const struct cnode *user, const char *name,
	      struct pipeline **out, struct err *e)
{
	const struct cnode *def = user ? cnode_get(user, name) : NULL;
	const struct plugin *owner = NULL;
	struct strvec more = STRVEC_INIT;
	struct cnode *tree = NULL;
	char file[512];
	const char *text, *rel = NULL;
	struct buf names = BUF_INIT;
	size_t i;
	int rc;

	if (def)
		return pipeline_parse(name, def, 0, out, e);
	snprintf(file, sizeof(file), "%s.yaml", name);
	text = str_in_list(builtin_names, name) ? embed_get(file) : NULL;
	if (text) {
		snprintf(file, sizeof(file), "<built-in %s.yaml>", name);
	} else if (!plugin_pipeline_find(name, &owner, &text, &rel)) {
		snprintf(file, sizeof(file), "%s/%s", owner->dir, rel);
	} else {
		for (i = 0; user && i < user->nr; i++)
			buf_addf(&names, "%s, ", user->kids[i]->key);
		for (i = 0; builtin_names[i]; i++)
			buf_addf(&names, "%s%s", builtin_names[i],
				 builtin_names[i + 1] ? ", " : "");
		plugin_pipeline_names(&more);
		for (i = 0; i < more.nr; i++)
			buf_addf(&names, ", %s", more.v[i]);
		rc = err_set(e, BATON_ENOTFOUND,
			     "unknown pipeline '%s' (pipelines: %s)", name,
			     names.ptr);
		buf_release(&names);
		strvec_clear(&more);
		return rc;
	}
	rc = cnode_parse_yaml(text, strlen(text), file, &tree, e);
	if (!rc)
		rc = pipeline_parse(name, tree, !owner, out, e);
	if (!rc && owner)
		(*out)->plugin = xstrdup(owner->id);
	cnode_free(tree);
	return rc;
}

const struct edge *
pipeline_edge(const struct pipeline *p, const char *from, const char *to)
{
	size_t i;

	for (i = 0; i < p->nr_edges; i++)
		if (!strcmp(p->edges[i].from, from) &&
		    !strcmp(p->edges[i].to, to))
			return &p->edges[i];
	return NULL;
}

int
pipeline_check(const struct pipeline *p, const char *from, const char *to,
	       struct err *e)
{
	struct buf legal = BUF_INIT;
	size_t i;
	int rc;

	if (pipeline_edge(p, from, to))
		return 0;
	for (i = 0; i < p->nr_edges; i++)
		if (!strcmp(p->edges[i].from, from))
			buf_addf(&legal, "%s%s", legal.len ? ", " : "",
				 p->edges[i].to);
	if (!pipeline_has_status(p, from))
		rc = err_set(e, BATON_EBADSTATE,
			     "illegal transition '%s' -> '%s': pipeline '%s' "
			     "has no status '%s'",
			     from, to, p->name, from);
	else if (!legal.len)
		rc = err_set(e, BATON_EBADSTATE,
			     "illegal transition '%s' -> '%s': '%s' is "
			     "terminal",
			     from, to, from);
	else
		rc = err_set(e, BATON_EBADSTATE,
			     "illegal transition '%s' -> '%s' in pipeline "
			     "'%s' (from '%s' only: %s)",
			     from, to, p->name, from, legal.ptr);
	buf_release(&legal);
	return rc;
}

int
pipeline_has_status(const struct pipeline *p, const char *status)
{
	return status_pos(p, status) >= 0;
}

const struct stage *
pipeline_stage_at(const struct pipeline *p, const char *status)
{
	size_t i;

	for (i = 0; i < p->nr_stages; i++)
		if (!strcmp(p->stages[i].status, status))
			return &p->stages[i];
	return NULL;
}

const struct stage *
pipeline_stage_done_at(const struct pipeline *p, const char *status)
{
	size_t i;

	for (i = 0; i < p->nr_stages; i++)
		if (p->stages[i].done && !strcmp(p->stages[i].done, status))
			return &p->stages[i];
	return NULL;
}

const struct stage *
pipeline_stage_named(const struct pipeline *p, const char *name)
{
	int i = stage_index(p, name);

	return i < 0 ? NULL : &p->stages[i];
}

const struct stage *
pipeline_first(const struct pipeline *p)
{
	size_t i;

	for (i = 0; i < p->nr_stages; i++)
		if (!p->stages[i].side)
			return &p->stages[i];
	BUG("pipeline '%s' has no main stage", p->name);
}

int
pipeline_stage_index(const struct pipeline *p, const struct stage *s)
{
	return (int)(s - p->stages);
}

size_t
pipeline_group(const struct pipeline *p, int g, size_t *first)
{
	size_t i, n = 0;

	if (g <= 0)
		return 0;
	for (i = 0; i < p->nr_stages; i++) {
		if (p->stages[i].group != g)
			continue;
		if (!n++)
			*first = i;
	}
	return n;
}

int
pipeline_after(const struct pipeline *p, const struct stage *s)
{
	size_t first = 0, n;

	if (s->group) {
		n = pipeline_group(p, s->group, &first);
		if (n)
			s = &p->stages[first + n - 1];
	}
	return s->next;
}

/* Where success of s leads, by name: a stage, the terminal or "back". */
static const char *
next_name(const struct pipeline *p, const struct stage *s)
{
	if (s->next == STAGE_BACK)
		return "back";
	return s->next < 0 ? p->terminal : p->stages[s->next].name;
}

static int
widest(int w, const char *s)
{
	int n = s ? (int)strlen(s) : 0;

	return n > w ? n : w;
}

/* One stage's line, and a second one for phased reviewers. */
static void
describe_stage(const struct pipeline *p, const struct stage *s,
	       const int *w, struct buf *out)
{
	size_t j;

	buf_addf(out, "  %-*s kind %-*s status %-*s", w[0], s->name, w[1],
		 stage_kind_label(s), w[2], s->status);
	if (s->done)
		buf_addf(out, " then %-*s", w[3], s->done);
	if (s->providers.nr) {
		buf_addf(out, " providers ");
		for (j = 0; j < s->providers.nr; j++)
			buf_addf(out, "%s%s", j ? "," : "", s->providers.v[j]);
	} else {
		buf_addf(out, " role %s", s->role ? s->role : "-");
	}
	if (s->model)
		buf_addf(out, " model %s", s->model);
	buf_addf(out, "  next %s", next_name(p, s));
	if (s->on_fail >= 0)
		buf_addf(out, ", on_fail %s", p->stages[s->on_fail].name);
	if (s->on_changes >= 0)
		buf_addf(out, ", on_changes %s", p->stages[s->on_changes].name);
	if (s->kind == KIND_CODE_REVIEW)
		buf_addf(out, ", on_reject %s",
			 s->on_reject_stop ? "stop" : "rework");
	if (s->group)
		buf_addf(out, ", parallel group %d", s->group);
	if (s->gate)
		buf_addf(out, ", gate");
	if (s->timeout_seconds)
		buf_addf(out, ", timeout %ds", s->timeout_seconds);
	if (s->max_cost_usd)
		buf_addf(out, ", budget $%.2f", s->max_cost_usd);
	if (s->max_tokens)
		buf_addf(out, ", budget %ld tokens", s->max_tokens);
	if (s->side || s->implicit)
		buf_addf(out, " (%s%s%s)", s->side ? "side" : "",
			 s->side && s->implicit ? ", " : "",
			 s->implicit ? "implicit" : "");
	buf_addch(out, '\n');
	if (!s->nr_phased)
		return;
	buf_addf(out, "  %-*s phased reviews every %d step%s, at most %d "
		      "round%s a batch:",
		 w[0], "", s->review_interval,
		 s->review_interval == 1 ? "" : "s", s->max_phased_iterations,
		 s->max_phased_iterations == 1 ? "" : "s");
	for (j = 0; j < s->nr_phased; j++)
		buf_addf(out, "%s %s%s%s%s", j ? "," : "",
			 s->phased[j].provider,
			 s->phased[j].model ? "/" : "",
			 s->phased[j].model ? s->phased[j].model : "",
			 s->phased[j].parallel ? " (parallel)" : "");
	buf_addch(out, '\n');
}

/*
 * The stage lines keep their columns at least as wide as the feature
 * pipeline needs, so its listing (docs/lifecycle.md) stays as it was.
 */
/* "states: created=pending, planning=running, ..." (the seed's names). */
static void
describe_states(const struct pipeline *p, struct buf *out)
{
	size_t i, n = 0;

	for (i = 0; p->state_of && i < p->nr_statuses; i++)
		if (p->state_of[i])
			buf_addf(out, "%s%s=%s", n++ ? ", " : "\nstates: ",
				 p->statuses[i], p->state_of[i]);
	if (n)
		buf_addch(out, '\n');
}

void
pipeline_describe(const struct pipeline *p, struct buf *out)
{
	int w[4] = { 10, 9, 13, 12 }, g;
	size_t i, j, first = 0, n;

	buf_addf(out, "pipeline %s%s", p->name,
		 p->builtin ? " (built-in)" : "");
	if (p->plugin)
		buf_addf(out, " (plugin %s)", p->plugin);
	buf_addch(out, '\n');
	if (p->description)
		buf_addf(out, "  %s\n", p->description);
	if (type_of(p)->groups)
		buf_addf(out, "  type %s, terminal %s, max_iterations %d\n",
			 p->type, p->terminal, p->max_iterations);
	for (i = 0; i < p->nr_stages; i++) {
		w[0] = widest(w[0], p->stages[i].name);
		w[1] = widest(w[1], stage_kind_label(&p->stages[i]));
		w[2] = widest(w[2], p->stages[i].status);
		w[3] = widest(w[3], p->stages[i].done);
	}
	buf_addf(out, "\nstages:\n");
	for (i = 0; i < p->nr_stages; i++)
		describe_stage(p, &p->stages[i], w, out);
	if (type_of(p)->groups || pipeline_group(p, 1, &first)) {
		buf_addf(out, "\nparallel groups:%s\n",
			 pipeline_group(p, 1, &first) ? "" : " none");
		for (g = 1;; g++) {
			int after;

			n = pipeline_group(p, g, &first);
			if (!n)
				break;
			after = pipeline_after(p, &p->stages[first]);
			buf_addf(out, "  %d:", g);
			for (j = first; j < first + n; j++)
				buf_addf(out, "%s %s", j > first ? "," : "",
					 p->stages[j].name);
			buf_addf(out, " -> %s\n",
				 after < 0 ? p->terminal :
					     p->stages[after].name);
		}
	}
	describe_states(p, out);
	buf_addf(out, "\ntransitions (%zu):\n", p->nr_edges);
	for (i = 0; i < p->nr_edges; i = j) {
		buf_addf(out, "  %-21s ->", p->edges[i].from);
		for (j = i; j < p->nr_edges &&
			    !strcmp(p->edges[j].from, p->edges[i].from);
		     j++)
			buf_addf(out, "%s %s (%s)", j > i ? "," : "",
				 p->edges[j].to, edge_why_name(p->edges[j].why));
		buf_addch(out, '\n');
	}
}
