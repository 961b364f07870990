/*
 * Pipelines: parse a definition into stages, then derive the full
 * transition table from them (see pipeline.h for the rules). The table is
 * the only authority on which status may follow which; the engine asks it
 * before every write.
 */
#include "util/compat.h"

#include "core/cnode.h"
#include "core/pipeline.h"
#include "util/buf.h"
#include "util/embed.h"
#include "util/err.h"
#include "util/xalloc.h"

/* What each kind is called and what it shows by default. */
static const struct kind_info {
	const char *name, *status, *done, *role;
} kinds[KIND__COUNT] = {
	[KIND_PLAN] = { "plan", "planning", "planned", "planner" },
	[KIND_ARCHITECT] = { "architect", "architecting", "architected",
			     "architect" },
	[KIND_EXECUTE] = { "execute", "executing", NULL, "implementer" },
	[KIND_VALIDATE] = { "validate", "validating", NULL, NULL },
	[KIND_REVIEW] = { "review", "reviewing", NULL, "reviewer" },
	[KIND_FIX] = { "fix", "fixing", NULL, "fixer" },
	[KIND_VERIFY] = { "verify", "verifying", NULL, "verifier" },
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
	[WHY_RECOVER] = "recover",
};

static const char *const builtin_names[] = { "feature", NULL };

static const char *const reserved[] = {
	ST_CREATED, ST_WAITING, ST_PAUSED, ST_INTERRUPTED, ST_BLOCKED,
	ST_FAILED, ST_ABORTED, ST_MERGE_READY, ST_COMPLETED, NULL,
};

const char *
stage_kind_name(enum stage_kind k)
{
	return k < KIND__COUNT ? kinds[k].name : "?";
}

int
stage_kind_parse(const char *name, enum stage_kind *out)
{
	int k;

	for (k = 0; k < KIND__COUNT; k++)
		if (!strcmp(kinds[k].name, name)) {
			*out = (enum stage_kind)k;
			return 0;
		}
	return BATON_ENOTFOUND;
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

static int
in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return 1;
	return 0;
}

void
pipeline_free(struct pipeline *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->nr_stages; i++) {
		free(p->stages[i].name);
		free(p->stages[i].status);
		free(p->stages[i].done);
		free(p->stages[i].role);
	}
	for (i = 0; i < p->nr_statuses; i++)
		free(p->statuses[i]);
	free(p->stages);
	free(p->statuses);
	free(p->edges);
	free(p->name);
	free(p->description);
	free(p->terminal);
	free(p);
}

/*
 * Reads an optional scalar key of a stage into *out (a copy), checking
 * that it is a safe status or role name: lowercase letters, digits and
 * '_' or '-', so it can appear in file names, branches and SQL unquoted.
 */
static int
opt_name(const struct cnode *def, const char *key, const char *path,
	 char **out, struct err *e)
{
	const struct cnode *n = cnode_get(def, key);
	char where[256], full[256];
	const char *c;
	int rc;

	if (!n)
		return 0;
	snprintf(full, sizeof(full), "%s.%s", path, key);
	rc = cnode_expect(n, CNODE_SCALAR, full, e);
	if (rc)
		return rc;
	for (c = n->value; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		      *c == '_' || *c == '-'))
			break;
	if (*c || !n->value[0] || strlen(n->value) > 48) {
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

/* Resolves a stage reference key (next, on_fail, on_changes). */
static int
stage_ref(struct pipeline *p, const struct cnode *def, const char *key,
	  const char *path, int *out, struct err *e)
{
	const struct cnode *n = cnode_get(def, key);
	char where[256], full[256];
	int rc, idx;

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
	idx = stage_index(p, n->value);
	if (idx < 0) {
		cnode_where(n, where, sizeof(where));
		return err_set(e, BATON_EINVAL, "%s: %s: no stage named '%s'",
			       where, full, n->value);
	}
	*out = idx;
	return 0;
}

static const char *const stage_keys[] = {
	"name", "kind", "status", "done", "role", "side",
	"next", "on_fail", "on_changes", NULL,
};

/*
 * First pass over one stage: name, kind and the status names. A stage may
 * be a bare scalar ("review"), meaning a stage of that kind named after it.
 */
static int
parse_stage(struct pipeline *p, const struct cnode *def, const char *path,
	    struct stage *s, struct err *e)
{
	const struct cnode *kn;
	const char *kind;
	char where[256];
	int rc;

	s->next = s->on_fail = s->on_changes = -1;
	if (def->type == CNODE_SCALAR) {
		kind = def->value;
		s->name = xstrdup(kind);
	} else {
		rc = cnode_expect(def, CNODE_MAP, path, e);
		if (rc)
			return rc;
		rc = cnode_check_keys(def, path, stage_keys, e);
		if (rc)
			return rc;
		kn = cnode_get(def, "kind");
		if (!kn) {
			cnode_where(def, where, sizeof(where));
			return err_set(e, BATON_EINVAL,
				       "%s: %s: missing 'kind' (one of plan, "
				       "architect, execute, validate, review, "
				       "fix, verify)",
				       where, path);
		}
		rc = cnode_expect(kn, CNODE_SCALAR, path, e);
		if (rc)
			return rc;
		kind = kn->value;
	}
	if (stage_kind_parse(kind, &s->kind)) {
		cnode_where(def->type == CNODE_MAP ? cnode_get(def, "kind") : def,
			    where, sizeof(where));
		return err_set(e, BATON_EINVAL,
			       "%s: %s: unknown stage kind '%s' (expected one "
			       "of plan, architect, execute, validate, review, "
			       "fix, verify)",
			       where, path, kind);
	}
	s->status = xstrdup(kinds[s->kind].status);
	s->done = xstrdup_or_null(kinds[s->kind].done);
	s->role = xstrdup_or_null(kinds[s->kind].role);
	if (def->type == CNODE_SCALAR)
		return 0;
	rc = opt_name(def, "name", path, &s->name, e);
	if (!rc && !s->name)
		s->name = xstrdup(kinds[s->kind].name);
	if (!rc)
		rc = opt_name(def, "status", path, &s->status, e);
	if (!rc)
		rc = opt_name(def, "done", path, &s->done, e);
	if (!rc)
		rc = opt_name(def, "role", path, &s->role, e);
	if (!rc && cnode_get(def, "side"))
		rc = cnode_bool(cnode_get(def, "side"), path, &s->side, e);
	(void)p;
	return rc;
}

static void
add_status(struct pipeline *p, size_t *alloc, const char *s)
{
	size_t i;

	for (i = 0; i < p->nr_statuses; i++)
		if (!strcmp(p->statuses[i], s))
			return;
	ALLOC_GROW(p->statuses, p->nr_statuses + 1, *alloc);
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

static void
add_edge(struct pipeline *p, size_t *alloc, const char *from, const char *to,
	 enum edge_why why)
{
	int f = status_pos(p, from), t = status_pos(p, to);
	size_t i;

	if (f < 0 || t < 0)
		BUG("edge between unknown statuses '%s' -> '%s'", from, to);
	for (i = 0; i < p->nr_edges; i++)
		if (p->edges[i].from == p->statuses[f] &&
		    p->edges[i].to == p->statuses[t])
			return;
	ALLOC_GROW(p->edges, p->nr_edges + 1, *alloc);
	p->edges[p->nr_edges].from = p->statuses[f];
	p->edges[p->nr_edges].to = p->statuses[t];
	p->edges[p->nr_edges].why = why;
	p->nr_edges++;
}

/* The status a stage rests in once it succeeded. */
static const char *
exit_status(const struct stage *s)
{
	return s->done ? s->done : s->status;
}

static const struct pipeline *sort_ctx;

static int
edge_cmp(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;
	int d = status_pos(sort_ctx, x->from) - status_pos(sort_ctx, y->from);

	return d ? d : status_pos(sort_ctx, x->to) - status_pos(sort_ctx, y->to);
}

/*
 * A boundary edge A → X enters stage X from resting point A. Around each
 * one go the gate and pause edges; `back` is the stage that ended at A
 * (NULL for created), which a gate's request-changes re-runs.
 */
static void
add_boundary(struct pipeline *p, size_t *alloc, const char *a,
	     const struct stage *x, const struct stage *back,
	     enum edge_why why)
{
	add_edge(p, alloc, a, x->status, why);
	add_edge(p, alloc, a, ST_WAITING, WHY_GATE);
	add_edge(p, alloc, ST_WAITING, x->status, WHY_APPROVE);
	if (back)
		add_edge(p, alloc, ST_WAITING, back->status, WHY_REDO);
	add_edge(p, alloc, a, ST_PAUSED, WHY_PAUSE);
	add_edge(p, alloc, ST_PAUSED, x->status, WHY_RESUME);
}

static void
derive(struct pipeline *p)
{
	size_t salloc = 0, ealloc = 0, i;
	const struct stage *first = pipeline_first(p);

	add_status(p, &salloc, ST_CREATED);
	for (i = 0; i < p->nr_stages; i++) {
		add_status(p, &salloc, p->stages[i].status);
		if (p->stages[i].done)
			add_status(p, &salloc, p->stages[i].done);
	}
	add_status(p, &salloc, ST_WAITING);
	add_status(p, &salloc, ST_PAUSED);
	add_status(p, &salloc, ST_INTERRUPTED);
	add_status(p, &salloc, p->terminal);
	add_status(p, &salloc, ST_BLOCKED);
	add_status(p, &salloc, ST_FAILED);
	add_status(p, &salloc, ST_ABORTED);

	add_boundary(p, &ealloc, ST_CREATED, first, NULL, WHY_START);
	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];
		const char *x = exit_status(s);

		if (s->done)
			add_edge(p, &ealloc, s->status, s->done, WHY_DONE);
		if (s->next < 0)
			add_edge(p, &ealloc, x, p->terminal, WHY_NEXT);
		else
			add_boundary(p, &ealloc, x, &p->stages[s->next], s,
				     WHY_NEXT);
		if (s->on_fail >= 0)
			add_boundary(p, &ealloc, s->status,
				     &p->stages[s->on_fail], s, WHY_FAIL);
		if (s->on_changes >= 0)
			add_boundary(p, &ealloc, s->status,
				     &p->stages[s->on_changes], s,
				     WHY_CHANGES);
	}
	add_edge(p, &ealloc, ST_WAITING, ST_BLOCKED, WHY_REJECT);
	for (i = 0; i < p->nr_stages; i++) {
		add_edge(p, &ealloc, p->stages[i].status, ST_BLOCKED,
			 WHY_BLOCK);
		add_edge(p, &ealloc, p->stages[i].status, ST_INTERRUPTED,
			 WHY_INTERRUPT);
		add_edge(p, &ealloc, ST_INTERRUPTED, p->stages[i].status,
			 WHY_RECOVER);
	}
	for (i = 0; i < p->nr_statuses; i++) {
		if (status_is_terminal(p->statuses[i]))
			continue;
		add_edge(p, &ealloc, p->statuses[i], ST_FAILED, WHY_FAILED);
		add_edge(p, &ealloc, p->statuses[i], ST_ABORTED, WHY_ABORT);
	}
	sort_ctx = p;
	qsort(p->edges, p->nr_edges, sizeof(*p->edges), edge_cmp);
	sort_ctx = NULL;
}

/* Status names must be unique and must not reuse a shared one. */
static int
check_names(const struct pipeline *p, const struct cnode *stages,
	    const char *path, struct err *e)
{
	size_t i, j, nmain = 0;
	char where[256];

	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];
		const char *mine[2] = { s->status, s->done };
		int k;

		cnode_where(stages->kids[i], where, sizeof(where));
		if (!s->side)
			nmain++;
		for (k = 0; k < 2; k++) {
			if (!mine[k])
				continue;
			if (in_list(reserved, mine[k]))
				return err_set(e, BATON_EINVAL,
					       "%s: %s[%zu] (%s): status '%s' "
					       "is reserved for every pipeline",
					       where, path, i, s->name, mine[k]);
		}
		if (s->done && s->status && !strcmp(s->done, s->status))
			return err_set(e, BATON_EINVAL,
				       "%s: %s[%zu] (%s): done and status are "
				       "both '%s'",
				       where, path, i, s->name, s->done);
		for (j = 0; j < i; j++) {
			const struct stage *t = &p->stages[j];
			const char *theirs[2] = { t->status, t->done };
			int a, b;

			if (!strcmp(s->name, t->name))
				return err_set(e, BATON_EINVAL,
					       "%s: %s[%zu]: a stage named '%s' "
					       "already exists",
					       where, path, i, s->name);
			for (a = 0; a < 2; a++)
				for (b = 0; b < 2; b++)
					if (mine[a] && theirs[b] &&
					    !strcmp(mine[a], theirs[b]))
						return err_set(
							e, BATON_EINVAL,
							"%s: %s[%zu] (%s): status "
							"'%s' is already used by "
							"stage '%s'",
							where, path, i, s->name,
							mine[a], t->name);
		}
	}
	if (!nmain)
		return err_set(e, BATON_EINVAL,
			       "%s: pipeline '%s' has no stage outside the "
			       "side loops",
			       path, p->name);
	return 0;
}

/*
 * Second pass: outcome edges. The main line's default `next` is the next
 * main stage (or the terminal after the last); side stages must say where
 * they go.
 */
static int
link_stages(struct pipeline *p, const struct cnode *stages, const char *path,
	    struct err *e)
{
	char sp[256], where[256];
	size_t i, j;
	int rc;

	for (i = 0; i < p->nr_stages; i++) {
		struct stage *s = &p->stages[i];
		const struct cnode *def = stages->kids[i];

		snprintf(sp, sizeof(sp), "%s[%zu] (%s)", path, i, s->name);
		cnode_where(def, where, sizeof(where));
		s->next = -1;
		if (!s->side)
			for (j = i + 1; j < p->nr_stages; j++)
				if (!p->stages[j].side) {
					s->next = (int)j;
					break;
				}
		if (def->type != CNODE_MAP) {
			if (s->side)
				BUG("scalar stage cannot be side");
			continue;
		}
		if (s->side && !cnode_get(def, "next"))
			return err_set(e, BATON_EINVAL,
				       "%s: %s: a side stage needs 'next' (the "
				       "stage it returns to)",
				       where, sp);
		rc = stage_ref(p, def, "next", sp, &s->next, e);
		if (!rc)
			rc = stage_ref(p, def, "on_fail", sp, &s->on_fail, e);
		if (!rc)
			rc = stage_ref(p, def, "on_changes", sp, &s->on_changes,
				       e);
		if (rc)
			return rc;
		if (s->on_fail >= 0 && s->kind != KIND_VALIDATE)
			return err_set(e, BATON_EINVAL,
				       "%s: %s: on_fail is only for validate "
				       "stages",
				       where, sp);
		if (s->on_changes >= 0 && s->kind != KIND_REVIEW)
			return err_set(e, BATON_EINVAL,
				       "%s: %s: on_changes is only for review "
				       "stages",
				       where, sp);
		if (s->next == (int)i || s->on_fail == (int)i ||
		    s->on_changes == (int)i)
			return err_set(e, BATON_EINVAL,
				       "%s: %s: a stage cannot lead to itself",
				       where, sp);
	}
	return 0;
}

static const char *const pipeline_keys[] = {
	"name", "description", "terminal", "stages", NULL,
};

int
pipeline_parse(const char *name, const struct cnode *def, int builtin,
	       struct pipeline **out, struct err *e)
{
	struct pipeline *p = xcalloc(1, sizeof(*p));
	const struct cnode *stages, *n;
	char path[200], where[256];
	size_t i;
	int rc;

	snprintf(path, sizeof(path), builtin ? "%s" : "pipelines.%s", name);
	p->name = xstrdup(name);
	p->builtin = builtin;
	p->terminal = xstrdup(ST_MERGE_READY);
	rc = cnode_expect(def, CNODE_MAP, path, e);
	if (!rc)
		rc = cnode_check_keys(def, path, pipeline_keys, e);
	if (rc)
		goto out;
	if ((n = cnode_get(def, "description")) &&
	    !(rc = cnode_expect(n, CNODE_SCALAR, "description", e)))
		p->description = xstrdup(n->value);
	if (rc)
		goto out;
	if ((n = cnode_get(def, "terminal"))) {
		rc = cnode_expect(n, CNODE_SCALAR, "terminal", e);
		if (rc)
			goto out;
		if (strcmp(n->value, ST_MERGE_READY) &&
		    strcmp(n->value, ST_COMPLETED)) {
			cnode_where(n, where, sizeof(where));
			rc = err_set(e, BATON_EINVAL,
				     "%s: %s.terminal: expected merge_ready or "
				     "completed, got '%s'",
				     where, path, n->value);
			goto out;
		}
		free(p->terminal);
		p->terminal = xstrdup(n->value);
	}
	snprintf(path + strlen(path), sizeof(path) - strlen(path), ".stages");
	stages = cnode_get(def, "stages");
	if (!stages || stages->type != CNODE_SEQ || !stages->nr) {
		cnode_where(stages ? stages : def, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: %s: expected a non-empty list of stages",
			     where, path);
		goto out;
	}
	p->stages = xcalloc(stages->nr, sizeof(*p->stages));
	for (i = 0; i < stages->nr; i++) {
		char sp[256];

		snprintf(sp, sizeof(sp), "%s[%zu]", path, i);
		p->nr_stages = i + 1;
		rc = parse_stage(p, stages->kids[i], sp, &p->stages[i], e);
		if (rc)
			goto out;
	}
	rc = check_names(p, stages, path, e);
	if (!rc)
		rc = link_stages(p, stages, path, e);
	if (rc)
		goto out;
	derive(p);
	*out = p;
	p = NULL;
out:
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
	struct cnode *tree = NULL;
	char file[128];
	const char *text;
	struct buf names = BUF_INIT;
	size_t i;
	int rc;

	if (def)
		return pipeline_parse(name, def, 0, out, e);
	snprintf(file, sizeof(file), "%s.yaml", name);
	text = in_list(builtin_names, name) ? embed_get(file) : NULL;
	if (!text) {
		for (i = 0; user && i < user->nr; i++)
			buf_addf(&names, "%s, ", user->kids[i]->key);
		for (i = 0; builtin_names[i]; i++)
			buf_addf(&names, "%s%s", builtin_names[i],
				 builtin_names[i + 1] ? ", " : "");
		rc = err_set(e, BATON_ENOTFOUND,
			     "unknown pipeline '%s' (pipelines: %s)", name,
			     names.ptr);
		buf_release(&names);
		return rc;
	}
	snprintf(file, sizeof(file), "<built-in %s.yaml>", name);
	rc = cnode_parse_yaml(text, strlen(text), file, &tree, e);
	if (!rc)
		rc = pipeline_parse(name, tree, 1, out, e);
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

void
pipeline_describe(const struct pipeline *p, struct buf *out)
{
	size_t i, j;

	buf_addf(out, "pipeline %s%s\n", p->name,
		 p->builtin ? " (built-in)" : "");
	if (p->description)
		buf_addf(out, "  %s\n", p->description);
	buf_addf(out, "\nstages:\n");
	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];

		buf_addf(out, "  %-10s kind %-9s status %-13s", s->name,
			 stage_kind_name(s->kind), s->status);
		if (s->done)
			buf_addf(out, " then %-12s", s->done);
		buf_addf(out, " role %s", s->role ? s->role : "-");
		buf_addf(out, "  next %s",
			 s->next < 0 ? p->terminal : p->stages[s->next].name);
		if (s->on_fail >= 0)
			buf_addf(out, ", on_fail %s",
				 p->stages[s->on_fail].name);
		if (s->on_changes >= 0)
			buf_addf(out, ", on_changes %s",
				 p->stages[s->on_changes].name);
		if (s->side)
			buf_addf(out, " (side)");
		buf_addch(out, '\n');
	}
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
