/*
 * Stage verdicts: see verdict.h.
 */
#include "util/compat.h"

#include <ctype.h>

#include "core/verdict.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/strvec.h"
#include "util/xalloc.h"

static const char *const decisions[][4] = {
	[VERDICT_REVIEW] = { "APPROVED", "CHANGES_REQUESTED", "BLOCKED", NULL },
	[VERDICT_VERIFY] = { "PASSED", "FAILED", "NEEDS_HUMAN", NULL },
};

const char *const *
verdict_decisions(enum verdict_kind k)
{
	return decisions[k];
}

const char *
verdict_line_prefix(enum verdict_kind k)
{
	return k == VERDICT_REVIEW ? "DECISION" : "VERIFICATION";
}

int
verdict_is_decision(enum verdict_kind k, const char *decision)
{
	const char *const *d;

	for (d = decisions[k]; *d; d++)
		if (!strcmp(*d, decision))
			return 1;
	return 0;
}

int
verdict_parse_json(enum verdict_kind k, const char *file, const char *text,
		   struct verdict *v, struct err *e)
{
	const char *const *d = decisions[k];
	json_error_t jerr;
	json_t *doc = json_loads(text, 0, &jerr), *f, *summary;
	const char *decision;
	size_t i;
	int rc;

	if (!doc)
		return err_set(e, BATON_ECONTRACT,
			       "%s is not valid JSON: line %d, column %d: %s",
			       file, jerr.line, jerr.column, jerr.text);
	if (!json_is_object(doc)) {
		rc = err_set(e, BATON_ECONTRACT, "%s must be a JSON object",
			     file);
		goto bad;
	}
	decision = json_get_str(doc, "decision");
	if (!decision || !verdict_is_decision(k, decision)) {
		rc = err_set(e, BATON_ECONTRACT,
			     "%s: \"decision\" must be one of %s, %s or %s, "
			     "got %s",
			     file, d[0], d[1], d[2],
			     decision ? decision : "nothing");
		goto bad;
	}
	summary = json_object_get(doc, "summary");
	if (summary && !json_is_string(summary)) {
		rc = err_set(e, BATON_ECONTRACT,
			     "%s: \"summary\" must be a string", file);
		goto bad;
	}
	f = json_object_get(doc, "findings");
	if (f && !json_is_array(f)) {
		rc = err_set(e, BATON_ECONTRACT,
			     "%s: \"findings\" must be a list", file);
		goto bad;
	}
	for (i = 0; f && i < json_array_size(f); i++)
		if (!json_is_object(json_array_get(f, i))) {
			rc = err_set(e, BATON_ECONTRACT,
				     "%s: findings[%zu] must be an object",
				     file, i);
			goto bad;
		}
	v->decision = xstrdup(decision);
	v->summary = xstrdup_or_null(json_string_value(summary));
	v->doc = doc;
	return 0;
bad:
	json_decref(doc);
	return rc;
}

char *
verdict_line(enum verdict_kind k, const char *text)
{
	const char *prefix = verdict_line_prefix(k);
	size_t plen = strlen(prefix);
	const char *p = text, *found = NULL, *end;
	struct buf v = BUF_INIT;

	while (p && *p) {
		const char *q = p;

		while (*q == ' ' || *q == '\t' || *q == '*' || *q == '#')
			q++;
		if (!strncasecmp(q, prefix, plen) && q[plen] == ':')
			found = q + plen + 1;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!found)
		return NULL;
	while (*found == ' ' || *found == '*' || *found == '`')
		found++;
	for (end = found; *end && (isalpha((unsigned char)*end) || *end == '_');
	     end++)
		buf_addch(&v, toupper((unsigned char)*end));
	return buf_detach(&v, NULL);
}

void
verdict_markdown(const struct verdict *v, const char *title, struct buf *md)
{
	json_t *f = v->doc ? json_object_get(v->doc, "findings") : NULL;
	size_t i;

	buf_addf(md, "# %s\n\nDecision: **%s**\n\n", title, v->decision);
	if (v->summary)
		buf_addf(md, "%s\n\n", v->summary);
	for (i = 0; f && i < json_array_size(f); i++) {
		json_t *x = json_array_get(f, i);
		const char *sev = json_get_str(x, "severity");
		const char *file = json_get_str(x, "file");
		const char *msg = json_get_str(x, "message");
		json_t *line = json_object_get(x, "line");

		if (!msg)
			msg = json_get_str(x, "title");
		if (!i)
			buf_adds(md, "## Findings\n\n");
		buf_addf(md, "- [%s] %s", sev ? sev : "note",
			 file ? file : "(general)");
		if (json_is_integer(line))
			buf_addf(md, ":%lld",
				 (long long)json_integer_value(line));
		buf_addf(md, ": %s\n", msg ? msg : "(no message)");
	}
}

void
verdict_release(struct verdict *v)
{
	free(v->decision);
	free(v->summary);
	json_decref(v->doc);
	memset(v, 0, sizeof(*v));
}

static const char *const severities[] = {
	"critical", "high", "medium", "low", "info", NULL,
};

/* A string field of finding i, present and not empty, or an error. */
static int
finding_text(const json_t *f, size_t i, const char *key, const char **out,
	     struct err *e)
{
	const json_t *v = json_object_get(f, key);

	*out = json_string_value(v);
	if (!v)
		return err_set(e, BATON_ECONTRACT,
			       "findings[%zu]: '%s' is missing (a security "
			       "finding needs severity, file, line, category "
			       "and evidence)",
			       i, key);
	if (!*out || !**out)
		return err_set(e, BATON_ECONTRACT,
			       "findings[%zu].%s: expected a non-empty string",
			       i, key);
	return 0;
}

int
verdict_check_security(const json_t *doc, struct err *e)
{
	const json_t *list = json_object_get(doc, "findings"), *f, *line;
	const char *sev, *file, *cat, *ev;
	size_t i;
	int rc;

	if (!doc)
		return err_set(e, BATON_ECONTRACT,
			       "a security review needs review.json with its "
			       "findings, not only a DECISION line");
	if (!json_is_array(list))
		return err_set(e, BATON_ECONTRACT,
			       "review.json: 'findings' must be a list (empty "
			       "when nothing was found)");
	json_array_foreach(list, i, f) {
		if (!json_is_object(f))
			return err_set(e, BATON_ECONTRACT,
				       "findings[%zu]: expected an object", i);
		rc = finding_text(f, i, "severity", &sev, e);
		if (!rc && !str_in_list(severities, sev))
			rc = err_set(e, BATON_ECONTRACT,
				     "findings[%zu].severity: '%s' is not one "
				     "of critical, high, medium, low, info",
				     i, sev);
		if (!rc)
			rc = finding_text(f, i, "file", &file, e);
		if (!rc && (file[0] == '/' || !strcmp(file, "..") ||
			    !strncmp(file, "../", 3) || strstr(file, "/../")))
			rc = err_set(e, BATON_ECONTRACT,
				     "findings[%zu].file: '%s' is not a path "
				     "inside the repository",
				     i, file);
		line = json_object_get(f, "line");
		if (!rc && !line)
			rc = err_set(e, BATON_ECONTRACT,
				     "findings[%zu]: 'line' is missing", i);
		if (!rc && (!json_is_integer(line) ||
			    json_integer_value(line) < 1)) {
			char *shown = json_dumps(line, JSON_ENCODE_ANY);

			rc = err_set(e, BATON_ECONTRACT,
				     "findings[%zu].line: expected an integer "
				     "from 1, got %.40s",
				     i, shown ? shown : "?");
			free(shown);
		}
		if (!rc)
			rc = finding_text(f, i, "category", &cat, e);
		if (!rc)
			rc = finding_text(f, i, "evidence", &ev, e);
		if (rc)
			return rc;
	}
	return 0;
}
