/*
 * A stage's state between calls, in the run record (runs.progress), and
 * the JSON records agents leave in the run folder: shared by the bug-fix,
 * loop, assist and research stages.
 */
#include "util/compat.h"

#include <jansson.h>

#include "core/bugfix.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "engine/engine_int.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/xalloc.h"

json_t *
engine__prog_load(const struct drive *d)
{
	json_t *p = d->r.progress ? json_loads(d->r.progress, 0, NULL) : NULL;

	if (json_is_object(p))
		return p;
	json_decref(p);
	return json_object();
}

void
engine__prog_save(struct drive *d, json_t *p)
{
	char *text = json_dumps(p, JSON_COMPACT);

	run_set(&d->r.progress, text);
	free(text);
}


json_t *
engine__prog_part(json_t *obj, const char *key)
{
	json_t *part = json_object_get(obj, key);

	if (!json_is_object(part)) {
		part = json_object();
		json_object_set_new(obj, key, part);
	}
	return part;
}

json_t *
engine__load_json(const struct drive *d, const char *name, struct err *e)
{
	char *path = engine__run_file(d, name);
	struct buf text = BUF_INIT;
	json_error_t je;
	json_t *doc = NULL;

	if (fs_read_nofollow(path, &text, BUF_MAX_ARTIFACT, NULL) == 0 &&
	    text.len) {
		doc = json_loads(text.ptr, 0, &je);
		if (!doc)
			err_set(e, BATON_ECONTRACT,
				"%s: invalid JSON at line %d, column %d: %s",
				name, je.line, je.column, je.text);
	} else {
		err_set(e, BATON_ENOTFOUND, "no %s in the run folder", name);
	}
	buf_release(&text);
	free(path);
	return doc;
}

/*
 * The JSON an agent left: its artifact file when it wrote one, else the
 * object at the end of its final text.
 */
json_t *
engine__take_json(struct drive *d, const char *artifact, const char *text,
	  struct err *e)
{
	struct err why = ERR_INIT;
	json_t *doc = engine__load_json(d, artifact, &why);

	if (doc)
		return doc;
	if (why.rc == BATON_ECONTRACT) {
		err_set(e, BATON_ECONTRACT, "%s", why.msg);
		return NULL;
	}
	doc = bugfix_json_from_text(artifact, text ? text : "", e);
	if (!doc)
		err_prefix(e, "no %s in the run folder, and in the final text",
			   artifact);
	return doc;
}

/* Writes doc as a run-folder file and keeps it as a stage output. */
int
engine__keep_json(struct drive *d, const char *name, const char *decision,
	  json_t *doc, struct err *e)
{
	char *text = json_dumps(doc, JSON_INDENT(2));
	char *path = engine__run_file(d, name);
	char *dir = xstrdup(path);
	int rc;

	*strrchr(dir, '/') = '\0';
	rc = fs_mkdir_p(dir, 0755, e);
	if (!rc)
		rc = fs_write_atomic(path, text, strlen(text), e);
	if (!rc)
		rc = engine__keep_output(d, name, decision, text, e);
	free(dir);
	free(path);
	free(text);
	return rc;
}

int
engine__ask(struct drive *d, const struct stage *s, const char *kind,
	    const char *question, json_t *options, json_t *extra,
	    const char *ask_to, enum stage_result *res)
{
	json_t *p = engine__prog_load(d), *q, *ev;

	q = json_pack("{s:s, s:s, s:s, s:s}", "kind", kind, "stage", s->name,
		      "to", ask_to, "question", question);
	if (extra)
		json_object_update(q, extra);
	json_object_set_new(p, "ask", q);
	engine__prog_save(d, p);
	json_decref(p);
	json_decref(d->ask);
	d->ask = json_pack("{s:s, s:s, s:s, s:o}", "gate", s->name, "question",
			   question, "kind", kind, "options",
			   options ? options : json_array());
	if (extra)
		json_object_update(d->ask, extra);
	free(d->ask_to);
	d->ask_to = xstrdup(ask_to);
	*res = STAGE_ASK;
	ev = json_deep_copy(d->ask);
	json_object_del(ev, "gate");
	json_object_set_new(ev, "stage", json_string(s->name));
	json_decref(extra);
	return engine__note(d, "question", ev, NULL);
}

int
engine__ask_needs(struct drive *d, const struct stage *s, const char *needs,
		  const char *why, json_t *extra, enum stage_result *res)
{
	char *q = xasprintf("%s\nProvide it, then approve to run %s again "
			    "(your guidance reaches its agent; a run whose "
			    "driver is gone goes on with `baton resume`), or "
			    "reject to end the run.",
			    why, s->name);
	json_t *x = json_pack("{s:s, s:s, s:s, s:{s:s}}", "needs", needs,
			      "outcome", ST_BLOCKED, "why", why, "routes",
			      "retry", s->status);
	int rc;

	if (extra)
		json_object_update(x, extra);
	json_decref(extra);
	rc = engine__ask(d, s, "needs", q, json_pack("[s]", "retry"), x,
			 s->status, res);
	free(q);
	return rc;
}

int
engine__call_as(struct drive *d, const struct stage *s,
		const struct config_provider *prov, const char *steers,
		struct call_spec *cs, enum stage_result *res, char **reason,
		struct err *e)
{
	char *path = engine__run_file(d, cs->artifact);
	int rc;

	/* impl-steps/, evidence/, loop/: the agent writes into them */
	*strrchr(path, '/') = '\0';
	rc = fs_mkdir_p(path, 0755, e);
	free(path);
	if (rc)
		return rc;
	d->call = cs;
	d->r.attempt = 0;
	rc = engine__call(d, s, prov, steers, res, reason, e);
	d->call = NULL;
	return rc;
}

void
engine__add_file(struct drive *d, struct buf *ctx, const char *title,
		 const char *name, size_t *budget)
{
	char *path = engine__run_file(d, name);
	struct buf text = BUF_INIT;

	if (fs_read_nofollow(path, &text, BUF_MAX_ARTIFACT, NULL) == 0 &&
	    text.len)
		prompt_section(ctx, title, text.ptr, budget);
	buf_release(&text);
	free(path);
}

void
engine__stage_spent(struct drive *d, const struct stage *s, int64_t tokens,
		    double cost_usd)
{
	json_t *p, *usage, *u;

	if (!s->max_cost_usd && !s->max_tokens)
		return;
	p = engine__prog_load(d);
	usage = engine__prog_part(p, "usage");
	u = json_object_get(usage, s->name); /* NULL reads as 0 */
	json_object_set_new(
		usage, s->name,
		json_pack("{s:I, s:f}", "tokens",
			  json_integer_value(json_object_get(u, "tokens")) +
				  (json_int_t)tokens,
			  "cost_usd",
			  json_number_value(json_object_get(u, "cost_usd")) +
				  cost_usd));
	engine__prog_save(d, p);
	json_decref(p);
}

char *
engine__stage_budget(const struct pipeline *pl, const struct stage *s,
		     const struct run *r)
{
	json_t *p, *u;
	json_int_t tokens;
	double cost;
	char *why = NULL;

	if (!s->max_cost_usd && !s->max_tokens)
		return NULL;
	p = r->progress ? json_loads(r->progress, 0, NULL) : NULL;
	u = json_object_get(json_object_get(p, "usage"), s->name);
	tokens = json_integer_value(json_object_get(u, "tokens"));
	cost = json_number_value(json_object_get(u, "cost_usd"));
	if (s->max_cost_usd > 0 && cost >= s->max_cost_usd)
		why = xasprintf("pipeline %s, stage %s: its budget.max_cost_usd "
				"($%.4f) is spent: $%.4f by its calls",
				pl->name, s->name, s->max_cost_usd, cost);
	else if (s->max_tokens > 0 && tokens >= s->max_tokens)
		why = xasprintf("pipeline %s, stage %s: its budget.max_tokens "
				"(%ld) is spent: %lld tokens by its calls",
				pl->name, s->name, s->max_tokens,
				(long long)tokens);
	json_decref(p);
	return why;
}
