/*
 * The bug-fix pipeline's records: see bugfix.h. Each contract is a table
 * of fields that one checker walks, so every breach names its field by
 * the same path it has in the file ("recommended_approach.steps[1].files")
 * and says what was expected and what was found. Consolidation builds
 * the diagnosis, the user story and the fix plan from the RCAs the way
 * the seed's orchestrator does, and the summaries are the one-line
 * "progressive enrichment" the next stage's prompt carries.
 */
#include "util/compat.h"

#include <strings.h>

#include "core/bugfix.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/strvec.h"

/* How long a quoted value may be in an error message. */
#define QUOTE_MAX 60
/* How long the root cause may be in a story or plan title. */
#define TITLE_MAX 80

/* ---- text helpers ---- */

/*
 * Appends s on one line: every run of control characters and spaces
 * becomes one space, so that a multi-line summary cannot break a prompt
 * line or a Markdown list item.
 */
static void
add_flat(struct buf *out, const char *s)
{
	int space = 0;

	for (; s && *s; s++) {
		if ((unsigned char)*s <= ' ' || *s == 0x7f) {
			space = 1;
			continue;
		}
		if (space && out->len && out->ptr[out->len - 1] != ' ')
			buf_addch(out, ' ');
		space = 0;
		buf_addch(out, *s);
	}
}

/* p without any leading "./": "./src/a.c" and "src/a.c" are one file. */
static const char *
skip_dot_slash(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return p;
}

static int
same_path(const char *a, const char *b)
{
	return !strcmp(skip_dot_slash(a), skip_dot_slash(b));
}

/* A JSON string that is never NULL, whatever bytes s holds. */
static json_t *
jstr(const char *s)
{
	return json_lossy_str(s ? s : "");
}

/* The string doc.obj.key, or "" when there is none. Borrowed. */
static const char *
str_at(json_t *doc, const char *obj, const char *key)
{
	const char *s = json_get_str(json_object_get(doc, obj), key);

	return s ? s : "";
}

/* "PREFIX-NAME" as a JSON string: the story's and the plan's ids. */
static json_t *
jid(const char *prefix, const char *name)
{
	struct buf b = BUF_INIT;
	json_t *v;

	buf_addf(&b, "%s-%s", prefix, name);
	v = jstr(b.ptr);
	buf_release(&b);
	return v;
}

/* Appends "file:line", or "file" when line is not a positive integer. */
static void
add_file_line(struct buf *out, const char *file, json_t *line)
{
	add_flat(out, file);
	if (json_is_integer(line) && json_integer_value(line) > 0)
		buf_addf(out, ":%" JSON_INTEGER_FORMAT,
			 json_integer_value(line));
}

/* ---- output names ---- */

static void
add_name_part(struct buf *b, const char *s)
{
	if (!s || !*s)
		s = "default";
	for (; *s; s++) {
		int ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
			 (*s >= '0' && *s <= '9') || *s == '.' || *s == '_';

		buf_addch(b, ok ? *s : '-');
	}
}

char *
bugfix_output_name(const char *type, const char *provider, const char *model,
		   int index, int version)
{
	struct buf b = BUF_INIT;

	buf_addf(&b, "%s-", type);
	add_name_part(&b, provider);
	buf_addch(&b, '-');
	add_name_part(&b, model);
	buf_addf(&b, "-%d-v%d.json", index, version);
	return buf_detach(&b, NULL);
}

/* ---- finding the JSON in an agent's text ---- */

/*
 * The last balanced {...} in [p, end) that parses as an object. The scan
 * goes forward and jumps over each object it parses, so that the object
 * kept is an outermost one and never a member of a later object.
 */
static json_t *
last_object(const char *p, const char *end)
{
	json_t *best = NULL, *v;
	json_error_t jerr;

	while (p < end) {
		p = memchr(p, '{', (size_t)(end - p));
		if (!p)
			break;
		v = json_loadb(p, (size_t)(end - p), JSON_DISABLE_EOF_CHECK,
			       &jerr);
		if (json_is_object(v) && jerr.position > 0) {
			json_decref(best);
			best = v;
			p += jerr.position;
			continue;
		}
		json_decref(v);
		p++;
	}
	return best;
}

/* Lines before p in text, for an error position relative to p. */
static int
lines_before(const char *text, const char *p)
{
	int n = 0;

	for (; text < p; text++)
		n += *text == '\n';
	return n;
}

/*
 * The last ```json fence of text: *body and *body_end bound what it
 * holds (to the end of text when it is never closed), *after is where
 * the text goes on past it. 0 when there is none.
 */
static int
last_fence(const char *text, const char **body, const char **body_end,
	   const char **after)
{
	const char *p, *last = NULL, *nl, *close;

	for (p = strcasestr(text, "```json"); p;
	     p = strcasestr(p + 1, "```json"))
		last = p;
	if (!last)
		return 0;
	nl = strchr(last, '\n');
	*body = nl ? nl + 1 : last + strlen(last);
	close = strstr(*body, "```");
	*body_end = close ? close : *body + strlen(*body);
	*after = close ? close + 3 : *body_end;
	return 1;
}

json_t *
bugfix_json_from_text(const char *file, const char *text, struct err *e)
{
	const char *body, *body_end, *after, *end;
	json_error_t whole, fenced;
	json_t *v;

	if (!text)
		text = "";
	end = text + strlen(text);
	/* Without JSON_DECODE_ANY only an object or a list parses whole. */
	v = json_loads(text, 0, &whole);
	if (json_is_object(v))
		return v;
	if (v) {
		err_set(e, BATON_ECONTRACT,
			"%s: expected a JSON object, got a list", file);
		json_decref(v);
		return NULL;
	}
	if (!last_fence(text, &body, &body_end, &after)) {
		v = last_object(text, end);
		if (!v)
			err_set(e, BATON_ECONTRACT,
				"%s: no JSON object: invalid JSON at line %d, "
				"column %d: %s",
				file, whole.line, whole.column, whole.text);
		return v;
	}
	v = json_loadb(body, (size_t)(body_end - body), 0, &fenced);
	if (json_is_object(v))
		return v;
	if (v) {
		fenced.line = 1;
		fenced.column = 1;
		snprintf(fenced.text, sizeof(fenced.text), "not an object");
	}
	json_decref(v);
	/*
	 * A broken fenced block was meant to be the answer: an object
	 * after it may still be, but one of its own members must not.
	 */
	v = last_object(after, end);
	if (!v)
		err_set(e, BATON_ECONTRACT,
			"%s: invalid JSON in the ```json block at line %d, "
			"column %d: %s",
			file, lines_before(text, body) + fenced.line,
			fenced.column, fenced.text);
	return v;
}

/* ---- contracts ---- */

enum field_type {
	F_OBJECT,  /* an object; items are its fields */
	F_STRING,  /* a string, non-empty when required */
	F_STRINGS, /* a list of strings */
	F_OBJECTS, /* a list of objects; items are each one's fields */
	F_LINE,	   /* an integer >= 1 */
	F_BOOL,	   /* true or false */
	F_ENUM,	   /* one of values */
	F_ANY,	   /* anything */
};

#define FLD_REQ	     1 /* must be there and not null */
#define FLD_NONEMPTY 2 /* a list with at least one item */

/*
 * One field of a contract. A table ends with a NULL key. Optional
 * fields that are null count as absent: agents write "root_line": null.
 */
struct field {
	const char *key;
	enum field_type type;
	unsigned flags;
	const char *const *values; /* F_ENUM */
	const struct field *items; /* F_OBJECT, F_OBJECTS */
};

static int check_fields(const char *file, struct buf *path, json_t *obj,
			const struct field *fields, struct err *e);

/* What field f should have held, for an error message. */
static void
expected(const struct field *f, struct buf *out)
{
	static const char *const names[] = {
		[F_OBJECT] = "an object",
		[F_STRING] = "a string",
		[F_STRINGS] = "a list of strings",
		[F_OBJECTS] = "a list of objects",
		[F_LINE] = "a line number >= 1",
		[F_BOOL] = "true or false",
		[F_ANY] = "any value",
	};
	const char *const *v;

	if (f->type == F_ENUM) {
		for (v = f->values; *v; v++) {
			if (v != f->values)
				buf_adds(out, v[1] ? ", " : " or ");
			buf_adds(out, *v);
		}
		return;
	}
	if (f->type == F_STRING && (f->flags & FLD_REQ))
		buf_adds(out, "a non-empty string");
	else if (f->flags & FLD_NONEMPTY)
		buf_addf(out, "a non-empty %s",
			 f->type == F_STRINGS ? "list of strings"
					      : "list of objects");
	else
		buf_adds(out, names[f->type]);
}

/*
 * "FILE: PATH: expected WANT, got GOT" (v NULL: got nothing) as
 * BATON_ECONTRACT. want NULL means what f expects.
 */
static int
breach(const char *file, const struct buf *path, const struct field *f,
       const char *want, json_t *v, struct err *e)
{
	struct buf exp = BUF_INIT, got = BUF_INIT;
	int rc;

	if (want)
		buf_adds(&exp, want);
	else
		expected(f, &exp);
	if (v)
		json_describe(v, QUOTE_MAX, &got);
	else
		buf_adds(&got, "nothing");
	rc = err_set(e, BATON_ECONTRACT, "%s: %s: expected %s, got %s", file,
		     path->ptr, exp.ptr, got.ptr);
	buf_release(&exp);
	buf_release(&got);
	return rc;
}

static int
is_one_of(const char *const *values, const char *s)
{
	for (; *values; values++)
		if (!strcmp(*values, s))
			return 1;
	return 0;
}

/*
 * Checks each item of list v (path names v): a string for F_STRINGS, an
 * object meeting f->items for F_OBJECTS.
 */
static int
check_items(const char *file, struct buf *path, json_t *v,
	    const struct field *f, struct err *e)
{
	size_t len = path->len, i;
	json_t *item;
	int rc = 0;

	for (i = 0; i < json_array_size(v); i++) {
		item = json_array_get(v, i);
		buf_addf(path, "[%zu]", i);
		if (f->type == F_STRINGS && !json_is_string(item))
			rc = breach(file, path, f, "a string", item, e);
		else if (f->type == F_OBJECTS && !json_is_object(item))
			rc = breach(file, path, f, "an object", item, e);
		else if (f->type == F_OBJECTS)
			rc = check_fields(file, path, item, f->items, e);
		buf_setlen(path, len);
		if (rc)
			return rc;
	}
	return 0;
}

/* Checks v, which is there and not null, against f. */
static int
check_value(const char *file, struct buf *path, json_t *v,
	    const struct field *f, struct err *e)
{
	switch (f->type) {
	case F_OBJECT:
		if (!json_is_object(v))
			return breach(file, path, f, NULL, v, e);
		return f->items ? check_fields(file, path, v, f->items, e) : 0;
	case F_STRING:
		if (!json_is_string(v) ||
		    ((f->flags & FLD_REQ) && !json_string_length(v)))
			return breach(file, path, f, NULL, v, e);
		return 0;
	case F_STRINGS:
	case F_OBJECTS:
		if (!json_is_array(v) ||
		    ((f->flags & FLD_NONEMPTY) && !json_array_size(v)))
			return breach(file, path, f, NULL, v, e);
		return check_items(file, path, v, f, e);
	case F_LINE:
		if (!json_is_integer(v) || json_integer_value(v) < 1)
			return breach(file, path, f, NULL, v, e);
		return 0;
	case F_BOOL:
		return json_is_boolean(v) ? 0
					  : breach(file, path, f, NULL, v, e);
	case F_ENUM:
		if (!json_is_string(v) ||
		    !is_one_of(f->values, json_string_value(v)))
			return breach(file, path, f, NULL, v, e);
		return 0;
	case F_ANY:
		return 0;
	}
	BUG("field type %d", (int)f->type);
}

/* Checks the fields of obj; path names obj ("" for the document). */
static int
check_fields(const char *file, struct buf *path, json_t *obj,
	     const struct field *fields, struct err *e)
{
	size_t len = path->len;
	const struct field *f;
	json_t *v;
	int rc = 0;

	for (f = fields; f->key && !rc; f++) {
		v = json_object_get(obj, f->key);
		if (json_is_null(v) && !(f->flags & FLD_REQ))
			v = NULL;
		if (len)
			buf_addch(path, '.');
		buf_adds(path, f->key);
		if (v)
			rc = check_value(file, path, v, f, e);
		else if ((f->flags & FLD_REQ))
			rc = breach(file, path, f, NULL, v, e);
		buf_setlen(path, len);
	}
	return rc;
}

/* Checks a whole document against a table of fields. */
static int
check_doc(const char *file, json_t *doc, const struct field *fields,
	  struct err *e)
{
	struct buf path = BUF_INIT, got = BUF_INIT;
	int rc;

	if (!json_is_object(doc)) {
		if (doc)
			json_describe(doc, QUOTE_MAX, &got);
		rc = err_set(e, BATON_ECONTRACT,
			     "%s: expected a JSON object, got %s", file,
			     doc ? got.ptr : "nothing");
		goto out;
	}
	rc = check_fields(file, &path, doc, fields, e);
out:
	buf_release(&path);
	buf_release(&got);
	return rc;
}

/* A rule beyond the types: "FILE: KEY: expected WANT, got none". */
static int
missing(const char *file, const char *key, const char *want, struct err *e)
{
	return err_set(e, BATON_ECONTRACT, "%s: %s: expected %s, got none",
		       file, key, want);
}

/* ---- the RCA record ---- */

static const char *const confidences[] = { "high", "medium", "low", NULL };

static const struct field rca_bug_report[] = {
	{ "summary", F_STRING, FLD_REQ, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field rca_root_cause[] = {
	{ "summary", F_STRING, FLD_REQ, NULL, NULL },
	{ "root_file", F_STRING, FLD_REQ, NULL, NULL },
	{ "root_line", F_LINE, 0, NULL, NULL },
	{ "confidence", F_ENUM, FLD_REQ, confidences, NULL },
	{ "category", F_STRING, FLD_REQ, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field rca_impact[] = {
	{ "blast_radius", F_STRING, 0, NULL, NULL },
	{ "affected_files", F_STRINGS, 0, NULL, NULL },
	{ "regression_risk", F_STRING, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field rca_constraints[] = {
	{ "must_preserve", F_STRINGS, 0, NULL, NULL },
	{ "safe_to_change", F_STRINGS, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field rca_step[] = {
	{ "description", F_STRING, FLD_REQ, NULL, NULL },
	{ "files", F_STRINGS, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field rca_approach[] = {
	{ "summary", F_STRING, FLD_REQ, NULL, NULL },
	{ "estimated_complexity", F_STRING, FLD_REQ, NULL, NULL },
	{ "steps", F_OBJECTS, 0, NULL, rca_step },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field rca_fields[] = {
	{ "bug_report", F_OBJECT, FLD_REQ, NULL, rca_bug_report },
	{ "root_cause", F_OBJECT, FLD_REQ, NULL, rca_root_cause },
	{ "impact", F_OBJECT, FLD_REQ, NULL, rca_impact },
	{ "fix_constraints", F_OBJECT, FLD_REQ, NULL, rca_constraints },
	{ "recommended_approach", F_OBJECT, FLD_REQ, NULL, rca_approach },
	{ NULL, 0, 0, NULL, NULL },
};

int
bugfix_rca_check(const char *file, json_t *doc, struct err *e)
{
	return check_doc(file, doc, rca_fields, e);
}

static int
rca_agrees(json_t *a, json_t *b)
{
	const char *fa = str_at(a, "root_cause", "root_file");
	const char *fb = str_at(b, "root_cause", "root_file");
	const char *ca = str_at(a, "root_cause", "category");
	const char *cb = str_at(b, "root_cause", "category");

	return *fa && *ca && same_path(fa, fb) && !strcasecmp(ca, cb);
}

int
bugfix_rcas_agree(json_t *const *rcas, size_t n)
{
	size_t i;

	for (i = 1; i < n; i++)
		if (!rca_agrees(rcas[0], rcas[i]))
			return 0;
	return 1;
}

/* ---- consolidation ---- */

static const struct criterion {
	const char *id, *description;
} criteria[] = {
	{ "AC1", "Bug is resolved — expected behavior is restored" },
	{ "AC2", "Regression test covers the exact bug scenario" },
	{ "AC3", "No existing tests are broken by the fix" },
	{ "AC4", "Root cause is addressed, not just symptoms patched" },
};

/*
 * The RCAs consolidation uses, [lo, hi), and the primary among them.
 * They are visited primary first, then the others in order, so that
 * every merged list starts with what the leading diagnosis says.
 */
struct pick {
	size_t lo, hi, primary;
};

static size_t
pick_nr(const struct pick *p)
{
	return p->hi - p->lo;
}

/* The k-th RCA to visit, 0 <= k < pick_nr(p). */
static size_t
pick_at(const struct pick *p, size_t k)
{
	if (!k)
		return p->primary;
	k += p->lo - 1;
	return k < p->primary ? k : k + 1;
}

/* The most detailed RCA: the longest root cause summary, first on ties. */
static size_t
most_detailed(json_t *const *rcas, size_t n)
{
	size_t i, best = 0;

	for (i = 1; i < n; i++)
		if (strlen(str_at(rcas[i], "root_cause", "summary")) >
		    strlen(str_at(rcas[best], "root_cause", "summary")))
			best = i;
	return best;
}

/* Appends s to list unless it is there already (as a path if is_path). */
static void
add_unique(json_t *list, const char *s, int is_path)
{
	const char *have;
	size_t i;

	if (!s || !*s)
		return;
	for (i = 0; i < json_array_size(list); i++) {
		have = json_string_value(json_array_get(list, i));
		if (is_path ? same_path(have, s) : !strcmp(have, s))
			return;
	}
	json_array_append_new(list, jstr(s));
}

/* Appends every string of from to list, deduplicated. */
static void
add_all_unique(json_t *list, json_t *from, int is_path)
{
	size_t i;

	for (i = 0; i < json_array_size(from); i++)
		add_unique(list, json_string_value(json_array_get(from, i)),
			   is_path);
}

/* The distinct non-empty values of rca.obj.key over the pick, "; "-joined. */
static json_t *
join_distinct(json_t *const *rcas, const struct pick *p, const char *obj,
	      const char *key, const char *none)
{
	json_t *seen = json_array(), *v;
	struct buf b = BUF_INIT;
	size_t k;

	for (k = 0; k < pick_nr(p); k++)
		add_unique(seen, str_at(rcas[pick_at(p, k)], obj, key), 0);
	for (k = 0; k < json_array_size(seen); k++)
		buf_addf(&b, "%s%s", k ? "; " : "",
			 json_string_value(json_array_get(seen, k)));
	v = jstr(b.len ? b.ptr : none);
	buf_release(&b);
	json_decref(seen);
	return v;
}

/*
 * The consolidated root cause: the primary's summary and, when a person
 * said all contribute, every other diagnosis after it.
 */
static json_t *
root_cause_text(json_t *const *rcas, const char *const *names,
		const struct pick *p, int all)
{
	struct buf b = BUF_INIT;
	json_t *rc, *v;
	size_t k, i;

	buf_adds(&b, str_at(rcas[p->primary], "root_cause", "summary"));
	for (k = 1; all && k < pick_nr(p); k++) {
		i = pick_at(p, k);
		rc = json_object_get(rcas[i], "root_cause");
		buf_addf(&b, "%s- %s: %s (",
			 k == 1 ? "\n\nContributing factors:\n" : "\n",
			 names[i], json_get_str(rc, "summary"));
		add_file_line(&b, json_get_str(rc, "root_file"),
			      json_object_get(rc, "root_line"));
		buf_addch(&b, ')');
	}
	v = jstr(b.ptr);
	buf_release(&b);
	return v;
}

/* {"description": description, "files": files}, taking files. */
static json_t *
new_step(json_t *description, json_t *files)
{
	json_t *step = json_object();

	json_object_set_new(step, "description", description);
	json_object_set_new(step, "files", files);
	return step;
}

/* The seed's three steps, fixing the root file of every RCA used. */
static json_t *
default_steps(json_t *const *rcas, const struct pick *p)
{
	json_t *steps = json_array(), *files = json_array(), *rc, *line;
	struct buf fix = BUF_INIT;
	size_t k, before;

	buf_adds(&fix, "Apply the smallest fix to ");
	for (k = 0; k < pick_nr(p); k++) {
		rc = json_object_get(rcas[pick_at(p, k)], "root_cause");
		line = json_object_get(rc, "root_line");
		before = json_array_size(files);
		add_unique(files, json_get_str(rc, "root_file"), 1);
		if (json_array_size(files) == before)
			continue;
		if (before)
			buf_adds(&fix, ", ");
		add_flat(&fix, json_get_str(rc, "root_file"));
		if (json_integer_value(line) > 0)
			buf_addf(&fix, " at line %" JSON_INTEGER_FORMAT,
				 json_integer_value(line));
	}
	json_array_append_new(
	    steps, new_step(jstr("Write a regression test that reproduces the "
				 "bug"),
			    json_array()));
	json_array_append_new(steps, new_step(jstr(fix.ptr), files));
	json_array_append_new(
	    steps, new_step(jstr("Run the regression test and the checks; "
				 "all existing tests must still pass"),
			    json_array()));
	buf_release(&fix);
	return steps;
}

/* The primary RCA's recommended steps, or the seed's three. */
static json_t *
plan_steps(json_t *const *rcas, const struct pick *p)
{
	json_t *approach =
	    json_object_get(rcas[p->primary], "recommended_approach");
	json_t *from = json_object_get(approach, "steps");
	json_t *steps, *step, *files;
	size_t i;

	if (!json_array_size(from))
		return default_steps(rcas, p);
	steps = json_array();
	for (i = 0; i < json_array_size(from); i++) {
		step = json_array_get(from, i);
		files = json_array();
		add_all_unique(files, json_object_get(step, "files"), 1);
		json_array_append_new(
		    steps,
		    new_step(jstr(json_get_str(step, "description")), files));
	}
	return steps;
}

/* Everything both the story and the plan take from the RCAs. */
struct merged {
	json_t *root_cause;	 /* string: the consolidated root cause */
	json_t *title;		 /* string: "Fix: ..." */
	json_t *affected;	 /* root files and affected files */
	json_t *preserve, *safe; /* fix constraints */
	json_t *blast, *risk;	 /* strings */
};

static void
merge(json_t *const *rcas, const char *const *names, const struct pick *p,
      int all, struct merged *m)
{
	struct buf title = BUF_INIT, flat = BUF_INIT;
	json_t *rca, *rc, *impact;
	size_t k;

	m->root_cause = root_cause_text(rcas, names, p, all);
	m->affected = json_array();
	m->preserve = json_array();
	m->safe = json_array();
	for (k = 0; k < pick_nr(p); k++) {
		rca = rcas[pick_at(p, k)];
		rc = json_object_get(rca, "root_cause");
		impact = json_object_get(rca, "impact");
		add_unique(m->affected, json_get_str(rc, "root_file"), 1);
		add_all_unique(m->affected,
			       json_object_get(impact, "affected_files"), 1);
		rc = json_object_get(rca, "fix_constraints");
		add_all_unique(m->preserve,
			       json_object_get(rc, "must_preserve"), 0);
		add_all_unique(m->safe, json_object_get(rc, "safe_to_change"),
			       0);
	}
	m->blast =
	    join_distinct(rcas, p, "impact", "blast_radius", "not assessed");
	m->risk =
	    join_distinct(rcas, p, "impact", "regression_risk", "not assessed");
	add_flat(&flat, str_at(rcas[p->primary], "root_cause", "summary"));
	buf_adds(&title, "Fix: ");
	buf_add_cut(&title, flat.ptr, flat.len, TITLE_MAX);
	m->title = jstr(title.ptr);
	buf_release(&title);
	buf_release(&flat);
}

static void
merged_release(struct merged *m)
{
	json_decref(m->root_cause);
	json_decref(m->title);
	json_decref(m->affected);
	json_decref(m->preserve);
	json_decref(m->safe);
	json_decref(m->blast);
	json_decref(m->risk);
}

/* The parts the story and the plan begin with: id, title and type. */
static json_t *
new_record(const char *prefix, const char *name, const struct merged *m)
{
	json_t *r = json_object();

	json_object_set_new(r, "id", jid(prefix, name));
	json_object_set_new(r, "title", json_copy(m->title));
	json_object_set_new(r, "pipeline_type", jstr("bug-fix"));
	return r;
}

static json_t *
make_story(json_t *primary, const struct merged *m, const char *task,
	   const char *name)
{
	json_t *rc = json_object_get(primary, "root_cause");
	json_t *line = json_object_get(rc, "root_line");
	json_t *story = new_record("story", name, m);
	json_t *req = json_object(), *acs = json_array(), *ac;
	json_t *scope = json_object(), *constraints = json_object();
	size_t i;

	if (!task)
		task = str_at(primary, "bug_report", "summary");
	json_object_set_new(story, "bug_report", jstr(task));

	json_object_set_new(req, "root_cause", json_copy(m->root_cause));
	json_object_set_new(req, "root_file",
			    jstr(json_get_str(rc, "root_file")));
	json_object_set_new(req, "root_line",
			    json_is_integer(line) ? json_copy(line)
						  : json_null());
	json_object_set_new(story, "requirements", req);

	for (i = 0; i < ARRAY_SIZE(criteria); i++) {
		ac = json_object();
		json_object_set_new(ac, "id", jstr(criteria[i].id));
		json_object_set_new(ac, "description",
				    jstr(criteria[i].description));
		json_array_append_new(acs, ac);
	}
	json_object_set_new(story, "acceptance_criteria", acs);

	json_object_set_new(scope, "affected_files",
			    json_deep_copy(m->affected));
	json_object_set_new(scope, "blast_radius", json_copy(m->blast));
	json_object_set_new(constraints, "must_preserve",
			    json_deep_copy(m->preserve));
	json_object_set_new(constraints, "safe_to_change",
			    json_deep_copy(m->safe));
	json_object_set_new(scope, "fix_constraints", constraints);
	json_object_set_new(story, "scope", scope);
	return story;
}

static json_t *
make_plan(json_t *const *rcas, const struct pick *p, const struct merged *m,
	  const char *name, const struct strvec *checks)
{
	json_t *primary = rcas[p->primary];
	json_t *approach = json_object_get(primary, "recommended_approach");
	json_t *plan = new_record("plan", name, m),
	       *steps = plan_steps(rcas, p);
	json_t *tech = json_object(), *tests = json_object();
	json_t *risk = json_object(), *commands = json_array();
	json_t *files = json_array();
	struct buf regression = BUF_INIT;
	size_t i;

	json_object_set_new(tech, "root_cause", json_copy(m->root_cause));
	json_object_set_new(tech, "fix_strategy",
			    jstr(json_get_str(approach, "summary")));
	json_object_set_new(
	    tech, "complexity",
	    jstr(json_get_str(approach, "estimated_complexity")));
	json_object_set_new(plan, "technical_approach", tech);

	for (i = 0; i < json_array_size(steps); i++)
		add_all_unique(
		    files, json_object_get(json_array_get(steps, i), "files"),
		    1);
	json_object_set_new(plan, "steps", steps);

	for (i = 0; checks && i < checks->nr; i++)
		json_array_append_new(commands, jstr(checks->v[i]));
	buf_adds(&regression, "A test that reproduces the bug (");
	add_flat(&regression, str_at(primary, "bug_report", "summary"));
	buf_adds(&regression, ") and passes once it is fixed");
	json_object_set_new(tests, "commands", commands);
	json_object_set_new(tests, "regression_test", jstr(regression.ptr));
	json_object_set_new(plan, "test_plan", tests);

	json_object_set_new(risk, "blast_radius", json_copy(m->blast));
	json_object_set_new(risk, "regression_risk", json_copy(m->risk));
	json_object_set_new(risk, "mitigation",
			    jstr("Regression test covers the exact bug "
				 "scenario"));
	json_object_set_new(plan, "risk", risk);
	json_object_set_new(plan, "files", files);
	buf_release(&regression);
	return plan;
}

static const char *
choice_name(int choice, const char *const *names)
{
	if (choice == BUGFIX_MERGE)
		return "merge";
	if (choice == BUGFIX_ALL_CONTRIBUTING)
		return "all";
	return names[choice];
}

static json_t *
make_diagnosis(json_t *const *rcas, const char *const *names, size_t n,
	       const struct pick *p, int choice)
{
	json_t *rc = json_object_get(rcas[p->primary], "root_cause");
	json_t *d = json_object(), *sources = json_array();
	size_t k;

	for (k = 0; k < pick_nr(p); k++)
		json_array_append_new(sources, jstr(names[pick_at(p, k)]));
	json_object_set_new(d, "agreed",
			    json_boolean(bugfix_rcas_agree(rcas, n)));
	json_object_set_new(d, "choice", jstr(choice_name(choice, names)));
	json_object_set_new(d, "root_cause",
			    rc ? json_deep_copy(rc) : json_object());
	json_object_set_new(d, "sources", sources);
	return d;
}

int
bugfix_consolidate(json_t *const *rcas, const char *const *names, size_t n,
		   int choice, const char *task, const char *name,
		   const struct strvec *checks, struct bugfix_consolidated *out,
		   struct err *e)
{
	struct merged m = { 0 };
	struct pick p = { 0, n, 0 };

	if (!n)
		return err_set(e, BATON_EINVAL, "no RCA to consolidate");
	if (choice >= 0 && (size_t)choice < n)
		p = (struct pick){ (size_t)choice, (size_t)choice + 1,
				   (size_t)choice };
	else if (choice == BUGFIX_MERGE || choice == BUGFIX_ALL_CONTRIBUTING)
		p.primary = most_detailed(rcas, n);
	else
		return err_set(e, BATON_EINVAL,
			       "consolidation choice %d is not an RCA (there "
			       "are %zu), merge or all",
			       choice, n);
	merge(rcas, names, &p, choice == BUGFIX_ALL_CONTRIBUTING, &m);
	out->diagnosis = make_diagnosis(rcas, names, n, &p, choice);
	out->story = make_story(rcas[p.primary], &m, task, name);
	out->plan = make_plan(rcas, &p, &m, name, checks);
	merged_release(&m);
	return 0;
}

void
bugfix_consolidated_release(struct bugfix_consolidated *c)
{
	json_decref(c->diagnosis);
	json_decref(c->story);
	json_decref(c->plan);
	memset(c, 0, sizeof(*c));
}

void
bugfix_disagreement(json_t *const *rcas, const char *const *names,
		    const char *const *labels, size_t n, struct buf *out)
{
	json_t *rc;
	size_t i;

	buf_adds(out,
		 "The root-cause analyses disagree on the root cause:\n\n");
	for (i = 0; i < n; i++) {
		rc = json_object_get(rcas[i], "root_cause");
		buf_addf(out, "- %s", names[i]);
		if (labels && labels[i])
			buf_addf(out, " (%s)", labels[i]);
		buf_adds(out, ": ");
		add_flat(out, json_get_str(rc, "summary"));
		buf_adds(out, " in ");
		add_file_line(out, json_get_str(rc, "root_file"),
			      json_object_get(rc, "root_line"));
		buf_addf(out, ", confidence %s\n",
			 str_at(rcas[i], "root_cause", "confidence"));
	}
	buf_adds(out, "\nWhich diagnosis is more likely correct? Options:\n\n");
	for (i = 0; i < n; i++)
		buf_addf(out, "- `%s`: this diagnosis\n", names[i]);
	buf_adds(out, "- `all`: all may be contributing factors\n");
}

/* ---- the fix plan ---- */

static const struct field plan_approach[] = {
	{ "root_cause", F_STRING, FLD_REQ, NULL, NULL },
	{ "fix_strategy", F_STRING, FLD_REQ, NULL, NULL },
	{ "complexity", F_STRING, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field plan_step[] = {
	{ "description", F_STRING, FLD_REQ, NULL, NULL },
	{ "files", F_STRINGS, FLD_REQ, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field plan_tests[] = {
	{ "commands", F_STRINGS, FLD_REQ, NULL, NULL },
	{ "regression_test", F_STRING, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field plan_risk[] = {
	{ "blast_radius", F_STRING, 0, NULL, NULL },
	{ "regression_risk", F_STRING, 0, NULL, NULL },
	{ "mitigation", F_STRING, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field plan_fields[] = {
	{ "id", F_STRING, 0, NULL, NULL },
	{ "title", F_STRING, 0, NULL, NULL },
	{ "pipeline_type", F_STRING, 0, NULL, NULL },
	{ "technical_approach", F_OBJECT, FLD_REQ, NULL, plan_approach },
	{ "steps", F_OBJECTS, FLD_REQ | FLD_NONEMPTY, NULL, plan_step },
	{ "test_plan", F_OBJECT, FLD_REQ, NULL, plan_tests },
	{ "risk", F_OBJECT, 0, NULL, plan_risk },
	{ "files", F_STRINGS, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

int
bugfix_plan_check(const char *file, json_t *doc, struct err *e)
{
	return check_doc(file, doc, plan_fields, e);
}

size_t
bugfix_plan_steps(json_t *plan)
{
	return json_array_size(json_object_get(plan, "steps"));
}

/* ---- review verdicts ---- */

static const char *const review_statuses[] = {
	"approved", "needs_changes", "needs_clarification", "rejected", NULL,
};

static const char *const severities[] = {
	"critical", "high", "medium", "low", "info", NULL,
};

static const struct field review_finding[] = {
	{ "severity", F_ENUM, FLD_REQ, severities, NULL },
	{ "description", F_STRING, FLD_REQ, NULL, NULL },
	{ "file", F_STRING, 0, NULL, NULL },
	{ "line", F_LINE, 0, NULL, NULL },
	{ "fix_type", F_STRING, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

static const struct field review_criterion[] = {
	{ "id", F_STRING, FLD_REQ, NULL, NULL },
	{ "verified", F_BOOL, FLD_REQ, NULL, NULL },
	{ "evidence", F_STRING, FLD_REQ, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

/* Every review's fields; review_required names the row a kind needs. */
static const struct field review_fields[] = {
	{ "status", F_ENUM, FLD_REQ, review_statuses, NULL },
	{ "summary", F_STRING, FLD_REQ, NULL, NULL },
	{ "findings", F_OBJECTS, 0, NULL, review_finding },
	{ "questions", F_STRINGS, 0, NULL, NULL },
	{ "acceptance_criteria_verification", F_OBJECTS, 0, NULL,
	  review_criterion },
	{ "requirements_coverage", F_ANY, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

/* The field each kind of review must have beyond the common ones. */
static const char *const review_required[] = {
	[BUGFIX_PLAN_REVIEW] = "requirements_coverage",
	[BUGFIX_CODE_REVIEW] = "acceptance_criteria_verification",
	[BUGFIX_PHASED_REVIEW] = NULL,
};

/* What a status needs beyond the types: a list that is not empty. */
static const struct status_rule {
	const char *status, *key, *want;
} status_rules[] = {
	{ "needs_changes", "findings",
	  "at least one finding when status is needs_changes" },
	{ "needs_clarification", "questions",
	  "at least one question when status is needs_clarification" },
};

/* The field a kind of review must have: there and not null. */
static int
review_kind_check(enum bugfix_review_kind k, const char *file, json_t *doc,
		  struct err *e)
{
	const char *key = review_required[k];
	const struct field *f;
	struct buf path = BUF_INIT;
	json_t *v;
	int rc;

	if (!key)
		return 0;
	v = json_object_get(doc, key);
	if (v && !json_is_null(v))
		return 0;
	for (f = review_fields; strcmp(f->key, key); f++)
		;
	buf_adds(&path, key);
	rc = breach(file, &path, f, NULL, v, e);
	buf_release(&path);
	return rc;
}

int
bugfix_review_check(enum bugfix_review_kind k, const char *file, json_t *doc,
		    const char **status, struct err *e)
{
	const char *s;
	size_t i;
	int rc;

	rc = check_doc(file, doc, review_fields, e);
	if (!rc)
		rc = review_kind_check(k, file, doc, e);
	if (rc)
		return rc;
	s = json_get_str(doc, "status");
	for (i = 0; i < ARRAY_SIZE(status_rules); i++)
		if (!strcmp(s, status_rules[i].status) &&
		    !json_array_size(json_object_get(doc, status_rules[i].key)))
			return missing(file, status_rules[i].key,
				       status_rules[i].want, e);
	*status = s;
	return 0;
}

/* ---- the implementation's result ---- */

static const char *const impl_statuses[] = {
	"complete",
	"partial",
	"failed",
	NULL,
};

static const struct field impl_fields[] = {
	{ "status", F_ENUM, FLD_REQ, impl_statuses, NULL },
	{ "summary", F_STRING, FLD_REQ, NULL, NULL },
	{ "files_modified", F_STRINGS, 0, NULL, NULL },
	{ "files_created", F_STRINGS, 0, NULL, NULL },
	{ "blocker", F_STRING, 0, NULL, NULL },
	{ NULL, 0, 0, NULL, NULL },
};

int
bugfix_impl_check(const char *file, json_t *doc, struct err *e)
{
	return check_doc(file, doc, impl_fields, e);
}

/* ---- summaries for the next stage ---- */

static void
sum_rca(json_t *doc, struct buf *out)
{
	json_t *rc = json_object_get(doc, "root_cause");

	buf_adds(out, "root cause: ");
	add_flat(out, json_get_str(rc, "summary"));
	buf_adds(out, " (");
	add_file_line(out, json_get_str(rc, "root_file"),
		      json_object_get(rc, "root_line"));
	buf_adds(out, ", confidence ");
	add_flat(out, json_get_str(rc, "confidence"));
	buf_adds(out, ", category ");
	add_flat(out, json_get_str(rc, "category"));
	buf_addch(out, ')');
}

/* "STATUS: SUMMARY", shared by reviews and the implementation. */
static void
add_status_summary(json_t *doc, struct buf *out)
{
	add_flat(out, json_get_str(doc, "status"));
	buf_adds(out, ": ");
	add_flat(out, json_get_str(doc, "summary"));
}

static void
sum_review(json_t *doc, struct buf *out)
{
	json_t *findings = json_object_get(doc, "findings");
	json_t *acv = json_object_get(doc, "acceptance_criteria_verification");
	size_t i, high = 0, verified = 0;
	const char *sev;

	add_status_summary(doc, out);
	for (i = 0; i < json_array_size(findings); i++) {
		sev = json_get_str(json_array_get(findings, i), "severity");
		if (sev && (!strcmp(sev, "critical") || !strcmp(sev, "high")))
			high++;
	}
	if (json_array_size(findings))
		buf_addf(out, "; %zu finding%s (%zu high+)",
			 json_array_size(findings),
			 json_array_size(findings) == 1 ? "" : "s", high);
	else
		buf_adds(out, "; no findings");
	if (!json_is_array(acv))
		return;
	for (i = 0; i < json_array_size(acv); i++)
		if (json_is_true(
			json_object_get(json_array_get(acv, i), "verified")))
			verified++;
	buf_addf(out, "; AC %zu/%zu verified", verified, json_array_size(acv));
}

static void
sum_impl(json_t *doc, struct buf *out)
{
	static const char *const lists[] = { "files_modified",
					     "files_created" };
	const char *file;
	size_t i, j, nr = 0;
	json_t *list;

	add_status_summary(doc, out);
	for (i = 0; i < ARRAY_SIZE(lists); i++) {
		list = json_object_get(doc, lists[i]);
		for (j = 0; j < json_array_size(list); j++) {
			file = json_string_value(json_array_get(list, j));
			if (!file)
				continue;
			buf_adds(out, nr++ ? ", " : "; files: ");
			add_flat(out, file);
		}
	}
}

static void
sum_plan(json_t *doc, struct buf *out)
{
	json_t *steps = json_object_get(doc, "steps");
	size_t i;

	buf_addf(out, "%zu step%s", json_array_size(steps),
		 json_array_size(steps) == 1 ? "" : "s");
	for (i = 0; i < json_array_size(steps); i++) {
		buf_adds(out, i ? "; " : ": ");
		add_flat(out,
			 json_get_str(json_array_get(steps, i), "description"));
	}
}

/* Records of any other type: their summary, if they have one. */
static void
sum_other(json_t *doc, struct buf *out)
{
	add_flat(out, json_get_str(doc, "summary"));
}

static const struct summarizer {
	const char *type;
	void (*fn)(json_t *doc, struct buf *out);
} summarizers[] = {
	{ "rca", sum_rca },
	{ "plan-review", sum_review },
	{ "code-review", sum_review },
	{ "phased-review", sum_review },
	{ "implementation", sum_impl },
	{ "plan", sum_plan },
};

void
bugfix_summary(const char *type, json_t *doc, size_t max, struct buf *out)
{
	void (*fn)(json_t *, struct buf *) = sum_other;
	struct buf line = BUF_INIT;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(summarizers); i++)
		if (!strcmp(summarizers[i].type, type))
			fn = summarizers[i].fn;
	if (json_is_object(doc))
		fn(doc, &line);
	buf_add_cut(out, line.ptr, line.len, max);
	buf_release(&line);
}

/* ---- phased reviews ---- */

/* A finding's file names a step's file: equal, or ending in "/file". */
static int
names_file(const char *finding, const char *file)
{
	size_t fl, l;

	finding = skip_dot_slash(finding);
	file = skip_dot_slash(file);
	fl = strlen(finding);
	l = strlen(file);
	if (!l)
		return 0;
	if (fl == l)
		return !strcmp(finding, file);
	return fl > l && finding[fl - l - 1] == '/' &&
	       !strcmp(finding + fl - l, file);
}

/* 1 if some finding of review names one of step's files. */
static int
step_is_hit(json_t *step, json_t *findings)
{
	json_t *files = json_object_get(step, "files");
	const char *ff, *sf;
	size_t i, j;

	for (i = 0; i < json_array_size(findings); i++) {
		ff = json_get_str(json_array_get(findings, i), "file");
		for (j = 0; ff && j < json_array_size(files); j++) {
			sf = json_string_value(json_array_get(files, j));
			if (sf && names_file(ff, sf))
				return 1;
		}
	}
	return 0;
}

size_t
bugfix_steps_hit(json_t *plan, json_t *review, int first, int last, int *hit)
{
	json_t *steps = json_object_get(plan, "steps");
	json_t *findings = json_object_get(review, "findings");
	size_t nr = json_array_size(steps), count = 0;
	int i, end;

	if (first < 1 || last < first)
		return 0;
	end = (size_t)last > nr ? (int)nr : last;
	for (i = first; i <= last; i++)
		hit[i - first] = 0;
	for (i = first; i <= end; i++) {
		hit[i - first] =
		    step_is_hit(json_array_get(steps, i - 1), findings);
		count += hit[i - first];
	}
	if (count)
		return count;
	for (i = first; i <= end; i++)
		hit[i - first] = 1;
	return end >= first ? (size_t)(end - first + 1) : 0;
}
