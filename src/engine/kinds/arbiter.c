/*
 * The arbiter (a bug-fix family kind the engine does itself): one verdict
 * for a panel, the parallel group of reviews just before it. It reads
 * every version each member left (a member asked for changes, was fixed
 * and re-reviewed: v1, v2, ...), merges their findings into one list by
 * place (file and line: what two reviewers raised there is one entry
 * naming both, with each description; the highest severity wins), marks
 * each open (in a reviewer's last verdict) or resolved, and decides: approved when every member's last verdict is,
 * rejected when any is, needs_changes otherwise. It writes
 * panel-verdict.json and .md; anything but approved blocks the run with
 * the open findings named.
 */
#include "util/compat.h"

#include "core/pipeline.h"
#include "engine/engine.h"
#include "engine/kinds/bugfix_int.h"
#include "engine/kinds/kind.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/xalloc.h"

static const char *const severities[] = {
	"critical", "high", "medium", "low", "info",
};

/* 0 for critical to 4 for info; 5 for anything else. */
static int
severity_rank(const char *s)
{
	size_t i;

	for (i = 0; s && i < ARRAY_SIZE(severities); i++)
		if (!strcmp(s, severities[i]))
			return (int)i;
	return (int)ARRAY_SIZE(severities);
}

/* The version v of the verdict file latest ("...-v3.json"), or NULL. */
static char *
version_file(const char *latest, int v)
{
	const char *dash = strrchr(latest, '-');

	if (!dash || dash[1] != 'v')
		return NULL;
	return xasprintf("%.*s-v%d.json", (int)(dash - latest), latest, v);
}

/* Adds the findings of one verdict of member stage to merged. */
static void
merge_findings(json_t *merged, const json_t *doc, const char *stage,
	       int version, int last)
{
	const json_t *f;
	size_t i;

	json_array_foreach(json_object_get(doc, "findings"), i, f) {
		const char *desc = json_get_str(f, "description");
		const char *file = json_get_str(f, "file");
		const char *sev = json_get_str(f, "severity");
		json_t *line = json_object_get(f, "line"), *m, *by;
		char *key = xasprintf("%s:%lld", file ? file : "",
				      (long long)json_integer_value(line));
		json_t *descs;
		size_t k;

		m = json_object_get(merged, key);
		if (!m) {
			m = json_pack("{s:s?, s:s?, s:O?, s:s?, s:[], s:[], "
				      "s:b}",
				      "severity", sev, "file", file, "line",
				      json_is_integer(line) ? line : NULL,
				      "description", desc, "descriptions",
				      "raised_by", "open", 0);
			json_object_set_new(merged, key, m);
		}
		descs = json_object_get(m, "descriptions");
		for (k = 0; desc && k < json_array_size(descs); k++)
			if (!strcmp(json_string_value(json_array_get(descs, k)),
				    desc))
				break;
		if (desc && k == json_array_size(descs))
			json_array_append_new(descs, json_string(desc));
		if (severity_rank(sev) <
		    severity_rank(json_get_str(m, "severity")))
			json_object_set_new(m, "severity", json_string(sev));
		by = json_object_get(m, "raised_by");
		json_array_append_new(by, json_pack("{s:s, s:i}", "stage",
						    stage, "version", version));
		if (last)
			json_object_set_new(m, "open", json_true());
		free(key);
	}
}

static int
arbiter_run(struct drive *d, const struct stage *s, const char *steers,
	    enum stage_result *res, char **reason, struct err *e)
{
	size_t idx = (size_t)(s - d->p->stages), first = 0, n = 0, i;
	json_t *merged = json_object(), *reviews = json_array(), *list,
	       *doc = NULL, *v;
	struct buf md = BUF_INIT, open = BUF_INIT;
	const char *decision = "approved", *key;
	int approved = 0, rejected = 0, nopen = 0, rc = 0;

	(void)steers;
	*res = STAGE_FAIL;
	if (idx > 0 && d->p->stages[idx - 1].group)
		n = pipeline_group(d->p, d->p->stages[idx - 1].group, &first);
	if (!n) {
		*reason = xasprintf("stage %s: an arbiter follows a parallel "
				    "group of reviews, and none is before it",
				    s->name);
		goto out;
	}
	for (i = first; i < first + n; i++) {
		const struct stage *m = &d->p->stages[i];
		char *latest = bf_stage_str(d, m->name, "file");
		char *vs = bf_stage_str(d, m->name, "status");
		json_t *p = engine__prog_load(d);
		int ver = (int)json_integer_value(json_object_get(
			json_object_get(json_object_get(p, "stages"), m->name),
			"version"));
		char *status = NULL;
		int k;

		json_decref(p);
		for (k = 1; latest && k <= ver; k++) {
			char *file = version_file(latest, k);
			json_t *one = file ? engine__load_json(d, file, NULL) :
					     NULL;

			if (one) {
				merge_findings(merged, one, m->name, k,
					       k == ver);
				if (k == ver)
					status = xstrdup_or_null(
						json_get_str(one, "status"));
			}
			if (k == ver && one)
				json_array_append_new(
					reviews,
					json_pack("{s:s, s:s, s:i, s:s}",
						  "stage", m->name, "status",
						  status ? status : "?",
						  "versions", ver, "file",
						  latest));
			json_decref(one);
			free(file);
		}
		if (!status) {
			*reason = xasprintf("stage %s: reviewer %s left no "
					    "verdict to arbitrate (%s)",
					    s->name, m->name,
					    vs ? vs : "never reviewed");
			free(latest);
			free(vs);
			goto out;
		}
		approved += !strcmp(status, "approved");
		rejected += !strcmp(status, "rejected");
		free(status);
		free(latest);
		free(vs);
	}
	if (rejected)
		decision = "rejected";
	else if ((size_t)approved < n)
		decision = "needs_changes";
	list = json_array();
	buf_addf(&md, "# Panel verdict: %s\n\n%zu reviewers: %d approved",
		 decision, n, approved);
	if (rejected)
		buf_addf(&md, ", %d rejected", rejected);
	buf_addf(&md, ".\n\n");
	json_object_foreach(merged, key, v) {
		int is_open = json_is_true(json_object_get(v, "open"));

		(void)key;
		json_array_append(list, v);
		buf_addf(&md, "- [%s] %s %s:%lld: %s (%zu review%s)\n",
			 is_open ? "open" : "resolved",
			 json_get_str(v, "severity") ?
				 json_get_str(v, "severity") : "?",
			 json_get_str(v, "file") ? json_get_str(v, "file") :
						   "-",
			 (long long)json_integer_value(
				 json_object_get(v, "line")),
			 json_get_str(v, "description") ?
				 json_get_str(v, "description") : "",
			 json_array_size(json_object_get(v, "raised_by")),
			 json_array_size(json_object_get(v, "raised_by")) == 1 ?
				 "" : "s");
		if (is_open) {
			buf_addf(&open, "%s%s", nopen ? "; " : "",
				 json_get_str(v, "description") ?
					 json_get_str(v, "description") : "?");
			nopen++;
		}
	}
	doc = json_pack("{s:s, s:s+, s:O, s:o}", "status", decision,
			"summary", md.ptr + 2, "", "reviews", reviews,
			"findings", list);
	rc = engine__keep_json(d, "panel-verdict.json", decision, doc, e);
	if (!rc)
		rc = engine__write_file(d, "panel-verdict.md", md.ptr, e);
	if (!rc)
		rc = engine__note(d, "panel_verdict",
				  json_pack("{s:s, s:s, s:i, s:i, s:i}",
					    "stage", s->name, "decision",
					    decision, "reviewers", (int)n,
					    "findings",
					    (int)json_array_size(list), "open",
					    nopen),
				  e);
	if (rc)
		goto out;
	if (!strcmp(decision, "approved")) {
		*res = STAGE_PASS;
		goto out;
	}
	*res = STAGE_BLOCK;
	*reason = xasprintf("the panel's verdict is %s: %d of %zu reviewers "
			    "approved; open findings: %s",
			    decision, approved, n,
			    open.len ? open.ptr : "none");
out:
	json_decref(doc);
	json_decref(merged);
	json_decref(reviews);
	buf_release(&md);
	buf_release(&open);
	return rc;
}

const struct stage_ops bugfix_arbiter_ops = {
	.run = arbiter_run,
};
