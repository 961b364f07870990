/*
 * Config nodes: see cnode.h. YAML text becomes a tree of maps, sequences
 * and scalars, each stamped with the file, line and column it came from.
 * The parser walks libyaml's event stream recursively and refuses the parts
 * of YAML that make a config file hard to read or to locate errors in:
 * anchors and aliases, explicit tags and multi-document streams. Everything
 * else here (merge, typed reads, the flattened dump) works on the tree only.
 */
#include "util/compat.h"

#include <ctype.h>
#include <limits.h>
#include <yaml.h>

#include "core/cnode.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"

/* Deeper nesting than this is refused, so hostile input cannot overflow
 * the stack of the recursive parser. */
#define CNODE_MAX_DEPTH 64

/* Scalars longer than this are shortened in error messages. */
#define CNODE_SHOW_MAX 60

/* The "path = value" part of a dump line is padded to at most this. */
#define CNODE_DUMP_COL 56

struct yparse {
	yaml_parser_t parser;
	const char *file;
	const char *text;
	size_t len;
	struct err *e;
};

static struct cnode *
node_new(enum cnode_type type, const char *origin, int line, int col)
{
	struct cnode *n = xcalloc(1, sizeof(*n));

	n->type = type;
	n->origin = xstrdup_or_null(origin);
	n->line = line;
	n->col = col;
	return n;
}

struct cnode *
cnode_new_map(const char *origin, int line, int col)
{
	return node_new(CNODE_MAP, origin, line, col);
}

struct cnode *
cnode_new_seq(const char *origin, int line, int col)
{
	return node_new(CNODE_SEQ, origin, line, col);
}

struct cnode *
cnode_new_scalar(const char *value, const char *origin, int line, int col)
{
	struct cnode *n = node_new(CNODE_SCALAR, origin, line, col);

	n->value = xstrdup(value ? value : "");
	return n;
}

/* Frees everything n holds but not n itself; n is left empty. */
static void
node_release(struct cnode *n)
{
	size_t i;

	for (i = 0; i < n->nr; i++)
		cnode_free(n->kids[i]);
	FREE_AND_NULL(n->kids);
	n->nr = n->alloc = 0;
	FREE_AND_NULL(n->value);
	FREE_AND_NULL(n->origin);
}

void
cnode_free(struct cnode *n)
{
	if (!n)
		return;
	node_release(n);
	free(n->key);
	free(n);
}

static void
push_kid(struct cnode *parent, struct cnode *kid)
{
	ALLOC_GROW(parent->kids, parent->nr + 1, parent->alloc);
	parent->kids[parent->nr++] = kid;
}

/* The index of key among map n's kids, or -1. */
static long
find_key(const struct cnode *n, const char *key)
{
	size_t i;

	if (!n || n->type != CNODE_MAP || !key)
		return -1;
	for (i = 0; i < n->nr; i++)
		if (n->kids[i]->key && !strcmp(n->kids[i]->key, key))
			return (long)i;
	return -1;
}

/*
 * A map keeps its keys in first-seen order: replacing a key puts the new
 * value where the old one was, so a dump after a merge still reads in the
 * order of the first layer that named each key.
 */
void
cnode_add(struct cnode *parent, const char *key, struct cnode *kid)
{
	long i;

	if (parent->type == CNODE_SEQ) {
		push_kid(parent, kid);
		return;
	}
	if (parent->type != CNODE_MAP)
		BUG("cnode_add to a scalar");
	if (kid->key != key) {
		free(kid->key);
		kid->key = xstrdup(key);
	}
	i = find_key(parent, key);
	if (i < 0) {
		push_kid(parent, kid);
		return;
	}
	cnode_free(parent->kids[i]);
	parent->kids[i] = kid;
}

struct cnode *
cnode_dup(const struct cnode *n)
{
	struct cnode *d;
	size_t i;

	if (!n)
		return NULL;
	d = node_new(n->type, n->origin, n->line, n->col);
	d->key = xstrdup_or_null(n->key);
	d->value = xstrdup_or_null(n->value);
	d->quoted = n->quoted;
	d->key_line = n->key_line;
	d->key_col = n->key_col;
	for (i = 0; i < n->nr; i++)
		push_kid(d, cnode_dup(n->kids[i]));
	return d;
}

const struct cnode *
cnode_get(const struct cnode *n, const char *key)
{
	long i = find_key(n, key);

	return i < 0 ? NULL : n->kids[i];
}

/*
 * Walks a dotted path. A segment made only of digits also indexes a
 * sequence ("validate.commands.0"), which map keys never need to do.
 */
const struct cnode *
cnode_path(const struct cnode *n, const char *path)
{
	const char *p = path, *dot;
	char seg[256];
	size_t len;

	while (n && p) {
		dot = strchr(p, '.');
		len = dot ? (size_t)(dot - p) : strlen(p);
		if (len >= sizeof(seg))
			return NULL;
		memcpy(seg, p, len);
		seg[len] = '\0';
		if (n->type == CNODE_SEQ && len &&
		    strspn(seg, "0123456789") == len) {
			unsigned long i = strtoul(seg, NULL, 10);

			n = i < n->nr ? n->kids[i] : NULL;
		} else {
			n = cnode_get(n, seg);
		}
		p = dot ? dot + 1 : NULL;
	}
	return n;
}

/* A plain (unquoted) empty, "~" or "null" scalar: YAML's null. */
static int
is_null(const struct cnode *n)
{
	return n->type == CNODE_SCALAR && !n->quoted &&
	       (!n->value[0] || !strcmp(n->value, "~") ||
		!strcasecmp(n->value, "null"));
}

/*
 * Moves over's contents into base, dropping base's. base keeps its key
 * string (its parent finds it by that) but takes over's key position, which
 * goes with over's origin.
 */
static void
take_over(struct cnode *base, struct cnode *over)
{
	char *key = base->key;

	node_release(base);
	free(over->key);
	*base = *over;
	base->key = key;
	free(over);
}

/*
 * Deep merge. Maps merge key by key; anything else replaces base's value
 * whole and keeps over's origin, so `config show` names the layer that won.
 * One exception: an empty (null) value over a map keeps the map, because a
 * section written with nothing under it ("workflow:") overrides nothing.
 */
void
cnode_merge(struct cnode *base, struct cnode *over)
{
	size_t i;
	long j;

	if (!over)
		return;
	if (base->type == CNODE_MAP && is_null(over)) {
		cnode_free(over);
		return;
	}
	if (base->type != CNODE_MAP || over->type != CNODE_MAP) {
		take_over(base, over);
		return;
	}
	for (i = 0; i < over->nr; i++) {
		struct cnode *kid = over->kids[i];

		j = find_key(base, kid->key);
		if (j >= 0)
			cnode_merge(base->kids[j], kid);
		else
			push_kid(base, kid);
	}
	free(over->kids);
	over->kids = NULL;
	over->nr = 0;
	cnode_free(over);
}

void
cnode_where(const struct cnode *n, char *out, size_t len)
{
	const char *o = n && n->origin ? n->origin : "?";

	if (n && n->line > 0)
		snprintf(out, len, "%s:%d:%d", o, n->line, n->col);
	else
		snprintf(out, len, "%s", o);
}

/* Like cnode_where, but at the key that names n when that is known. */
static void
where_key(const struct cnode *n, char *out, size_t len)
{
	if (n->key_line > 0)
		snprintf(out, len, "%s:%d:%d", n->origin ? n->origin : "?",
			 n->key_line, n->key_col);
	else
		cnode_where(n, out, len);
}

/*
 * What n is, for "got ..." in messages: 'text', a mapping, a sequence.
 * Long text, and text from a line break or other control character on, is
 * cut and marked with "...", so a message stays on one line.
 */
static void
describe(const struct cnode *n, char *out, size_t len)
{
	size_t show;
	int cut;

	if (n->type == CNODE_MAP) {
		snprintf(out, len, "a mapping");
		return;
	}
	if (n->type == CNODE_SEQ) {
		snprintf(out, len, "a sequence");
		return;
	}
	for (show = 0; show < CNODE_SHOW_MAX && n->value[show]; show++)
		if ((unsigned char)n->value[show] < 0x20)
			break;
	cut = n->value[show] != '\0';
	snprintf(out, len, "%s'%.*s%s'", n->quoted ? "quoted " : "", (int)show,
		 n->value, cut ? "..." : "");
}

/* Fails with "WHERE: PATH: expected WHAT, got X" about node n. */
static int
type_error(const struct cnode *n, const char *path, const char *what,
	   struct err *e)
{
	char where[512], got[128];

	cnode_where(n, where, sizeof(where));
	describe(n, got, sizeof(got));
	return err_set(e, BATON_EINVAL, "%s: %s%sexpected %s, got %s", where,
		       path ? path : "", path && *path ? ": " : "", what, got);
}

int
cnode_expect(const struct cnode *n, enum cnode_type type, const char *path,
	     struct err *e)
{
	static const char *const what[] = {
	    [CNODE_SCALAR] = "a string",
	    [CNODE_SEQ] = "a sequence",
	    [CNODE_MAP] = "a mapping",
	};

	if (n->type == type)
		return 0;
	return type_error(n, path, what[type], e);
}

/*
 * Reads a plain decimal integer in [min, max]. Quoted scalars are strings
 * in YAML ("2" is not 2), so they are refused like any other non-number.
 */
int
cnode_int(const struct cnode *n, const char *path, long min, long max,
	  long *out, struct err *e)
{
	char what[128];
	const char *s;
	char *end = NULL;
	long v;

	if (min == 0 && max == LONG_MAX)
		snprintf(what, sizeof(what), "a non-negative integer");
	else
		snprintf(what, sizeof(what), "an integer from %ld to %ld", min,
			 max);
	if (n->type != CNODE_SCALAR || n->quoted)
		return type_error(n, path, what, e);
	s = n->value;
	if (!isdigit((unsigned char)s[*s == '-' || *s == '+']))
		return type_error(n, path, what, e);
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return type_error(n, path, what, e);
	*out = v;
	return 0;
}

int
cnode_number(const struct cnode *n, const char *path, double min, double max,
	     double *out, struct err *e)
{
	char where[512];
	char *end = NULL;
	double v;

	if (n->type != CNODE_SCALAR || n->quoted)
		return type_error(n, path, "a number", e);
	errno = 0;
	v = strtod(n->value, &end);
	if (!n->value[0] || *end || errno || v != v)
		return type_error(n, path, "a number", e);
	if (v < min || v > max) {
		cnode_where(n, where, sizeof(where));
		return err_set(e, BATON_EINVAL,
			       "%s: %s: %g is out of range [%g, %g]", where,
			       path, v, min, max);
	}
	*out = v;
	return 0;
}

int
cnode_bool(const struct cnode *n, const char *path, int *out, struct err *e)
{
	static const char *const yes[] = {"true", "yes", "on"};
	static const char *const no[] = {"false", "no", "off"};
	size_t i;

	if (n->type != CNODE_SCALAR || n->quoted)
		return type_error(n, path, "true or false", e);
	for (i = 0; i < ARRAY_SIZE(yes); i++) {
		if (!strcasecmp(n->value, yes[i])) {
			*out = 1;
			return 0;
		}
		if (!strcasecmp(n->value, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return type_error(n, path, "true or false", e);
}

int
cnode_check_keys(const struct cnode *n, const char *path,
		 const char *const *allowed, struct err *e)
{
	struct buf list = BUF_INIT;
	char where[512];
	const char *const *a;
	size_t i;
	int rc = 0;

	rc = cnode_expect(n, CNODE_MAP, path, e);
	if (rc < 0)
		goto out;
	for (i = 0; i < n->nr; i++) {
		const struct cnode *kid = n->kids[i];

		for (a = allowed; *a; a++)
			if (!strcmp(*a, kid->key))
				break;
		if (*a)
			continue;
		for (a = allowed; *a; a++)
			buf_addf(&list, "%s%s", a == allowed ? "" : ", ", *a);
		where_key(kid, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: unknown key '%s%s%s' (expected one of: %s)",
			     where, path && *path ? path : "",
			     path && *path ? "." : "", kid->key, list.ptr);
		goto out;
	}
out:
	buf_release(&list);
	return rc;
}

/*
 * Parsing.
 */

/* The 1-based line and column of byte offset off in the input. */
static void
offset_pos(const struct yparse *p, size_t off, int *line, int *col)
{
	size_t i, bol = 0;

	*line = 1;
	for (i = 0; i < off && i < p->len; i++) {
		if (p->text[i] == '\n') {
			(*line)++;
			bol = i + 1;
		}
	}
	*col = (int)(off - bol) + 1;
}

/* Turns libyaml's error state into "FILE:LINE:COL: problem (context)". */
static int
syntax_error(struct yparse *p)
{
	yaml_parser_t *y = &p->parser;
	const char *problem = y->problem ? y->problem : "invalid yaml";
	int line, col;

	if (y->error == YAML_MEMORY_ERROR)
		return err_set(p->e, -ENOMEM, "%s: out of memory parsing yaml",
			       p->file);
	if (y->error == YAML_READER_ERROR) {
		offset_pos(p, y->problem_offset, &line, &col);
		if (y->problem_value != -1)
			return err_set(p->e, BATON_EINVAL,
				       "%s:%d:%d: %s (byte 0x%02x)", p->file,
				       line, col, problem,
				       (unsigned)y->problem_value & 0xff);
		return err_set(p->e, BATON_EINVAL, "%s:%d:%d: %s", p->file,
			       line, col, problem);
	}
	line = (int)y->problem_mark.line + 1;
	col = (int)y->problem_mark.column + 1;
	if (y->context)
		return err_set(p->e, BATON_EINVAL, "%s:%d:%d: %s (%s)", p->file,
			       line, col, problem, y->context);
	return err_set(p->e, BATON_EINVAL, "%s:%d:%d: %s", p->file, line, col,
		       problem);
}

static int
next_event(struct yparse *p, yaml_event_t *ev)
{
	if (yaml_parser_parse(&p->parser, ev))
		return 0;
	return syntax_error(p);
}

/* Fails with a message at the start of event ev. */
static int
event_error(struct yparse *p, const yaml_event_t *ev, const char *what)
{
	return err_set(p->e, BATON_EINVAL, "%s:%d:%d: %s", p->file,
		       (int)ev->start_mark.line + 1,
		       (int)ev->start_mark.column + 1, what);
}

/* Refuses anchors, aliases and explicit tags on a node's start event. */
static int
check_props(struct yparse *p, const yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;

	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		return event_error(p, ev,
				   "aliases are not supported (write the "
				   "value out in full)");
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		return event_error(p, ev, "unexpected yaml event");
	}
	if (anchor)
		return err_set(p->e, BATON_EINVAL,
			       "%s:%d:%d: anchors are not supported ('&%s')",
			       p->file, (int)ev->start_mark.line + 1,
			       (int)ev->start_mark.column + 1,
			       (const char *)anchor);
	if (tag)
		return err_set(p->e, BATON_EINVAL,
			       "%s:%d:%d: tags are not supported ('%s')",
			       p->file, (int)ev->start_mark.line + 1,
			       (int)ev->start_mark.column + 1,
			       (const char *)tag);
	return 0;
}

static int parse_node(struct yparse *p, const yaml_event_t *ev, int depth,
		      struct cnode **out);

/*
 * Reads the items of a sequence or the pairs of a mapping up to its end
 * event; start is the start event, already consumed. Mapping keys must be
 * plain scalars and appear once.
 */
static int
parse_coll(struct yparse *p, const yaml_event_t *start, int depth,
	   struct cnode **out)
{
	int is_map = start->type == YAML_MAPPING_START_EVENT;
	yaml_event_type_t end_type =
	    is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
	struct cnode *n = NULL, *val = NULL;
	yaml_event_t ev;
	char *key = NULL;
	int have = 0, kline = 0, kcol = 0;
	int rc = 0;

	if (depth >= CNODE_MAX_DEPTH) {
		rc = event_error(p, start, "nesting too deep");
		goto out;
	}
	n = node_new(is_map ? CNODE_MAP : CNODE_SEQ, p->file,
		     (int)start->start_mark.line + 1,
		     (int)start->start_mark.column + 1);
	for (;;) {
		rc = next_event(p, &ev);
		if (rc < 0)
			goto out;
		have = 1;
		if (ev.type == end_type)
			break;
		if (is_map) {
			rc = check_props(p, &ev);
			if (rc < 0)
				goto out;
			if (ev.type != YAML_SCALAR_EVENT) {
				rc = event_error(
				    p, &ev, "mapping keys must be scalars");
				goto out;
			}
			key = xstrndup((const char *)ev.data.scalar.value,
				       ev.data.scalar.length);
			kline = (int)ev.start_mark.line + 1;
			kcol = (int)ev.start_mark.column + 1;
			if (find_key(n, key) >= 0) {
				rc = err_set(p->e, BATON_EINVAL,
					     "%s:%d:%d: duplicate key '%s'",
					     p->file, kline, kcol, key);
				goto out;
			}
			yaml_event_delete(&ev);
			have = 0;
			rc = next_event(p, &ev);
			if (rc < 0)
				goto out;
			have = 1;
		}
		rc = parse_node(p, &ev, depth + 1, &val);
		if (rc < 0)
			goto out;
		yaml_event_delete(&ev);
		have = 0;
		if (is_map) {
			/* not a duplicate, checked above: no lookup */
			val->key = key;
			val->key_line = kline;
			val->key_col = kcol;
			key = NULL;
			push_kid(n, val);
		} else {
			push_kid(n, val);
		}
		val = NULL;
	}
out:
	if (have)
		yaml_event_delete(&ev);
	free(key);
	if (rc < 0) {
		cnode_free(n);
		return rc;
	}
	*out = n;
	return 0;
}

/* Builds the node that starts with event ev (which the caller deletes). */
static int
parse_node(struct yparse *p, const yaml_event_t *ev, int depth,
	   struct cnode **out)
{
	struct cnode *n;
	int rc;

	rc = check_props(p, ev);
	if (rc < 0)
		return rc;
	if (ev->type != YAML_SCALAR_EVENT)
		return parse_coll(p, ev, depth, out);
	n = node_new(CNODE_SCALAR, p->file, (int)ev->start_mark.line + 1,
		     (int)ev->start_mark.column + 1);
	n->value = xstrndup((const char *)ev->data.scalar.value,
			    ev->data.scalar.length);
	n->quoted = ev->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
		    ev->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	*out = n;
	return 0;
}

/*
 * The stream is STREAM-START, at most one DOCUMENT-START node DOCUMENT-END,
 * STREAM-END. No document at all, or a document holding only a null, is
 * an empty map; anything at the top other than a map is an error.
 */
int
cnode_parse_yaml(const char *text, size_t len, const char *file,
		 struct cnode **out, struct err *e)
{
	struct yparse p = {
	    .file = file ? file : "<config>", .text = text, .len = len, .e = e};
	struct cnode *root = NULL;
	yaml_event_t ev;
	int have = 0, ndocs = 0, rc = 0;

	if (!yaml_parser_initialize(&p.parser))
		return err_set(e, -ENOMEM, "%s: cannot start yaml parser",
			       p.file);
	yaml_parser_set_input_string(&p.parser, (const unsigned char *)text,
				     len);
	for (;;) {
		rc = next_event(&p, &ev);
		if (rc < 0)
			goto out;
		have = 1;
		if (ev.type == YAML_STREAM_END_EVENT)
			break;
		if (ev.type == YAML_DOCUMENT_START_EVENT && ndocs++) {
			rc = event_error(&p, &ev,
					 "only one yaml document is allowed");
			goto out;
		}
		if (ev.type != YAML_STREAM_START_EVENT &&
		    ev.type != YAML_DOCUMENT_START_EVENT &&
		    ev.type != YAML_DOCUMENT_END_EVENT) {
			rc = parse_node(&p, &ev, 0, &root);
			if (rc < 0)
				goto out;
			if (is_null(root)) {
				cnode_free(root);
				root = NULL;
			} else if (root->type != CNODE_MAP) {
				rc = err_set(e, BATON_EINVAL,
					     "%s:%d:%d: expected a mapping at "
					     "the top level",
					     p.file, root->line, root->col);
				goto out;
			}
		}
		yaml_event_delete(&ev);
		have = 0;
	}
	if (!root)
		root = node_new(CNODE_MAP, p.file, 0, 0);
out:
	if (have)
		yaml_event_delete(&ev);
	yaml_parser_delete(&p.parser);
	if (rc < 0) {
		cnode_free(root);
		return rc;
	}
	*out = root;
	return 0;
}

/*
 * Dumping.
 */

struct dump_line {
	char *left;  /* "path = value" */
	char *where; /* origin[:line:col] */
};

struct dump {
	struct dump_line *v;
	size_t nr, alloc;
};

/* Appends s as a JSON string: quoted, with escapes for " \ and controls. */
static void
add_quoted(struct buf *b, const char *s)
{
	buf_addch(b, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			buf_addf(b, "\\%c", c);
		else if (c == '\n')
			buf_adds(b, "\\n");
		else if (c == '\t')
			buf_adds(b, "\\t");
		else if (c < 0x20 || c == 0x7f)
			buf_addf(b, "\\u%04x", c);
		else
			buf_addch(b, c);
	}
	buf_addch(b, '"');
}

/*
 * A leaf value as shown: plain scalars as written (null as "null"),
 * quoted ones and anything with surrounding space or control characters
 * JSON-quoted, so "2" and 2 stay distinguishable.
 */
static void
add_value(struct buf *b, const struct cnode *n)
{
	const char *s = n->value, *p;
	size_t len = strlen(s);
	int plain = !n->quoted && len && !isspace((unsigned char)s[0]) &&
		    !isspace((unsigned char)s[len - 1]);

	for (p = s; plain && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			plain = 0;
	if (plain)
		buf_adds(b, s);
	else if (is_null(n))
		buf_adds(b, "null");
	else
		add_quoted(b, s);
}

static void
dump_emit(struct dump *d, const struct buf *path, const struct cnode *n,
	  const char *value)
{
	char where[512];
	struct dump_line *l;

	ALLOC_GROW(d->v, d->nr + 1, d->alloc);
	l = &d->v[d->nr++];
	l->left =
	    path->len ? xasprintf("%s = %s", path->ptr, value) : xstrdup(value);
	cnode_where(n, where, sizeof(where));
	l->where = xstrdup(where);
}

static int
all_scalars(const struct cnode *n)
{
	size_t i;

	for (i = 0; i < n->nr; i++)
		if (n->kids[i]->type != CNODE_SCALAR)
			return 0;
	return 1;
}

/* Flattens n, whose path is in path, into one dump line per leaf. */
static void
dump_walk(struct dump *d, struct buf *path, const struct cnode *n)
{
	struct buf val = BUF_INIT;
	size_t i, mark = path->len;

	if (n->type == CNODE_SCALAR) {
		add_value(&val, n);
		dump_emit(d, path, n, val.ptr);
	} else if (n->type == CNODE_SEQ && all_scalars(n)) {
		buf_addch(&val, '[');
		for (i = 0; i < n->nr; i++) {
			if (i)
				buf_adds(&val, ", ");
			add_quoted(&val, n->kids[i]->value);
		}
		buf_addch(&val, ']');
		dump_emit(d, path, n, val.ptr);
	} else if (n->type == CNODE_SEQ) {
		for (i = 0; i < n->nr; i++) {
			buf_addf(path, "[%zu]", i);
			dump_walk(d, path, n->kids[i]);
			buf_setlen(path, mark);
		}
	} else if (!n->nr) {
		if (path->len)
			dump_emit(d, path, n, "{}");
	} else {
		for (i = 0; i < n->nr; i++) {
			buf_addf(path, "%s%s", mark ? "." : "",
				 n->kids[i]->key);
			dump_walk(d, path, n->kids[i]);
			buf_setlen(path, mark);
		}
	}
	buf_release(&val);
}

/*
 * The origins line up in one column: the widest "path = value" sets it,
 * up to CNODE_DUMP_COL, and longer lines simply run past it.
 */
void
cnode_dump(const struct cnode *n, struct buf *out)
{
	struct dump d = {NULL, 0, 0};
	struct buf path = BUF_INIT;
	size_t i, w, col = 0;

	if (n)
		dump_walk(&d, &path, n);
	for (i = 0; i < d.nr; i++) {
		w = strlen(d.v[i].left);
		if (w > col)
			col = w;
	}
	if (col > CNODE_DUMP_COL)
		col = CNODE_DUMP_COL;
	for (i = 0; i < d.nr; i++) {
		w = strlen(d.v[i].left);
		buf_addf(out, "%s%*s    # %s\n", d.v[i].left,
			 (int)(w < col ? col - w : 0), "", d.v[i].where);
		free(d.v[i].left);
		free(d.v[i].where);
	}
	free(d.v);
	buf_release(&path);
}
