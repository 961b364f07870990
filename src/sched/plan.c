/*
 * The planner's task graph: reading and checking the planner's JSON,
 * ordering the tasks by their dependencies, rendering them for people
 * and putting them in the queue. See plan.h for the format.
 *
 * Checking is strict on purpose. A misspelt member ("deps") silently
 * dropped would queue tasks that should wait for each other; a clear
 * message instead lets the planner (or a person) fix the plan, and
 * nothing is queued until the whole plan holds together.
 */
#include "util/compat.h"

#include <ctype.h>

#include "core/config.h"
#include "core/run.h"
#include "sched/plan.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/xalloc.h"

/* Tasks may ask for any priority in this range. */
#define PLAN_MIN_PRIORITY (-1000)
#define PLAN_MAX_PRIORITY 1000
/* Title characters shown in the table before it is cut. */
#define RENDER_TITLE_MAX 48
/* JSON objects plan_find_json tries in a text before giving up. */
#define FIND_MAX_TRIES 256

static const char *const task_members[] = {
	"key",	      "title",	 "body",   "area",    "priority",
	"depends_on", "allowed_paths", "verify", NULL,
};
static const char *const plan_members[] = { "tasks", "summary", NULL };

/* A task while the plan is read: its dependencies as indexes. */
struct draft {
	struct plan_task t;
	size_t *deps;
	size_t nr_deps;
};

static int
is_member(const char *const *names, const char *key)
{
	for (; *names; names++)
		if (!strcmp(*names, key))
			return 1;
	return 0;
}

/* "key, title, ..." */
static void
join_names(const char *const *names, struct buf *out)
{
	const char *const *n;

	for (n = names; *n; n++)
		buf_addf(out, "%s%s", n == names ? "" : ", ", *n);
}

/*
 * Refuses a member obj does not know. where is "plan.json" or
 * "plan.json: tasks[2]".
 */
static int
check_members(const json_t *obj, const char *const *names, const char *where,
	      struct err *e)
{
	struct buf known = BUF_INIT;
	const char *key;
	json_t *v;
	int rc = 0;

	json_object_foreach((json_t *)obj, key, v) {
		if (is_member(names, key))
			continue;
		join_names(names, &known);
		rc = err_set(e, BATON_EINVAL,
			     "%s has an unknown member \"%s\" (known: %s)",
			     where, key, known.ptr);
		break;
	}
	buf_release(&known);
	return rc;
}

/* A copy of s with runs of whitespace made one space, ends trimmed. */
static char *
squeeze(const char *s)
{
	struct buf b = BUF_INIT;
	int space = 0;

	for (; *s; s++) {
		if (isspace((unsigned char)*s)) {
			space = b.len > 0;
			continue;
		}
		if (space)
			buf_addch(&b, ' ');
		space = 0;
		buf_addch(&b, *s);
	}
	return buf_detach(&b, NULL);
}

/*
 * An optional string member: NULL (absent, null or only blanks) or a
 * copy in *out; anything but a string is an error.
 */
static int
opt_string(const json_t *obj, const char *name, const char *where,
	   char **out, struct err *e)
{
	const json_t *v = json_object_get(obj, name);
	const char *s;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return err_set(e, BATON_EINVAL,
			       "%s.%s must be a string, got %s", where, name,
			       json_kind(v));
	s = json_string_value(v);
	while (isspace((unsigned char)*s))
		s++;
	if (*s)
		*out = xstrdup(json_string_value(v));
	return 0;
}

/* letters, digits, '-', '_', '.' */
static int
key_is_wellformed(const char *key)
{
	const char *p;

	for (p = key; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("-_.", *p))
			return 0;
	return 1;
}

static int
read_key(const json_t *obj, const char *where, char **out, struct err *e)
{
	const json_t *v = json_object_get(obj, "key");
	const char *key;

	if (!v)
		return err_set(e, BATON_EINVAL, "%s has no \"key\"", where);
	if (!json_is_string(v))
		return err_set(e, BATON_EINVAL,
			       "%s.key must be a string, got %s", where,
			       json_kind(v));
	key = json_string_value(v);
	if (!*key)
		return err_set(e, BATON_EINVAL, "%s.key is empty", where);
	if (strlen(key) > PLAN_MAX_KEY)
		return err_set(e, BATON_EINVAL,
			       "%s.key '%.20s...' is longer than %d characters",
			       where, key, PLAN_MAX_KEY);
	if (!key_is_wellformed(key))
		return err_set(e, BATON_EINVAL,
			       "%s.key '%s' may hold only letters, digits, "
			       "'-', '_' and '.'",
			       where, key);
	*out = xstrdup(key);
	return 0;
}

static int
read_title(const json_t *obj, const char *where, char **out, struct err *e)
{
	const json_t *v = json_object_get(obj, "title");
	char *title;

	if (!v)
		return err_set(e, BATON_EINVAL, "%s has no \"title\"", where);
	if (!json_is_string(v))
		return err_set(e, BATON_EINVAL,
			       "%s.title must be a string, got %s", where,
			       json_kind(v));
	title = squeeze(json_string_value(v));
	if (!*title) {
		free(title);
		return err_set(e, BATON_EINVAL, "%s.title is empty", where);
	}
	*out = title;
	return 0;
}

/* area: a path inside the repository, the rule of sched_task_area(). */
static int
read_area(const json_t *obj, const char *where, char **out, struct err *e)
{
	char *raw = NULL, *what;
	int rc;

	*out = NULL;
	rc = opt_string(obj, "area", where, &raw, e);
	if (rc || !raw)
		return rc;
	what = xasprintf("%s.area", where);
	rc = sched_task_area(raw, what, out, e);
	free(what);
	free(raw);
	return rc;
}

static int
read_priority(const json_t *obj, const char *where, int *out, struct err *e)
{
	const json_t *v = json_object_get(obj, "priority");
	json_int_t n;

	*out = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v))
		return err_set(e, BATON_EINVAL,
			       "%s.priority must be an integer, got %s", where,
			       json_kind(v));
	n = json_integer_value(v);
	if (n < PLAN_MIN_PRIORITY || n > PLAN_MAX_PRIORITY)
		return err_set(e, BATON_EINVAL,
			       "%s.priority %lld is out of range (%d to %d)",
			       where, (long long)n, PLAN_MIN_PRIORITY,
			       PLAN_MAX_PRIORITY);
	*out = (int)n;
	return 0;
}

/*
 * An optional list of non-empty strings: *out is the list (borrowed from
 * obj) or NULL when absent or null. what says what the strings are, for
 * messages.
 */
static int
read_strings(const json_t *obj, const char *name, const char *what,
	     const char *where, const json_t **out, struct err *e)
{
	const json_t *v = json_object_get(obj, name), *x;
	size_t i;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return err_set(e, BATON_EINVAL,
			       "%s.%s must be a list of %s, got %s", where,
			       name, what, json_kind(v));
	json_array_foreach(v, i, x) {
		const char *s = json_string_value(x);

		if (!s || !*s)
			return err_set(e, BATON_EINVAL,
				       "%s.%s[%zu] must be a non-empty string "
				       "(%s), got %s",
				       where, name, i, what,
				       s ? "an empty string" : json_kind(x));
	}
	*out = v;
	return 0;
}

/* depends_on into keys, each key once. */
static int
read_deps(const json_t *obj, const char *where, struct strvec *keys,
	  struct err *e)
{
	const json_t *list, *x;
	size_t i, k;
	int rc = read_strings(obj, "depends_on", "task keys", where, &list, e);

	json_array_foreach(list, i, x) {
		const char *s = json_string_value(x);

		for (k = 0; k < keys->nr && strcmp(keys->v[k], s); k++)
			;
		if (k == keys->nr)
			strvec_push(keys, s);
	}
	return rc;
}

/* allowed_paths or verify as compact JSON array text; NULL when empty. */
static int
read_array_text(const json_t *obj, const char *name, const char *what,
		const char *where, char **text, struct err *e)
{
	const json_t *list;
	int rc = read_strings(obj, name, what, where, &list, e);

	if (!rc && json_array_size(list))
		*text = json_dumps(list, JSON_COMPACT);
	return rc;
}

static void
task_clear(struct plan_task *t)
{
	free(t->key);
	free(t->title);
	free(t->body);
	free(t->area);
	free(t->allowed_paths);
	free(t->verify);
	strvec_clear(&t->depends_on);
	memset(t, 0, sizeof(*t));
	strvec_init(&t->depends_on);
}

/* Reads tasks[i] into t (which the caller clears either way). */
/*
 * The text a run of the task gets (sched__task_text: the title, a blank
 * line, the body) fits the limit every task is held to, so that no plan
 * is queued halfway to be refused at its first oversized task.
 */
static int
check_text_size(const struct plan_task *t, const char *where, struct err *e)
{
	size_t len = strlen(t->title);
	int rc;

	if (t->body && *t->body)
		len += 2 + strlen(t->body);
	rc = run_task_text_fits(len, e);
	if (rc)
		err_prefix(e, "%s", where);
	return rc;
}

static int
read_task(const json_t *v, const char *file, size_t i, struct plan_task *t,
	  struct err *e)
{
	char *where = xasprintf("%s: tasks[%zu]", file, i);
	int rc;

	if (!json_is_object(v)) {
		rc = err_set(e, BATON_EINVAL, "%s must be an object, got %s",
			     where, json_kind(v));
		goto out;
	}
	rc = check_members(v, task_members, where, e);
	if (!rc)
		rc = read_key(v, where, &t->key, e);
	if (!rc)
		rc = read_title(v, where, &t->title, e);
	if (!rc)
		rc = opt_string(v, "body", where, &t->body, e);
	if (!rc)
		rc = check_text_size(t, where, e);
	if (!rc)
		rc = read_area(v, where, &t->area, e);
	if (!rc)
		rc = read_priority(v, where, &t->priority, e);
	if (!rc)
		rc = read_deps(v, where, &t->depends_on, e);
	if (!rc)
		rc = read_array_text(v, "allowed_paths", "globs", where,
				     &t->allowed_paths, e);
	if (!rc)
		rc = read_array_text(v, "verify", "shell commands", where,
				     &t->verify, e);
out:
	free(where);
	return rc;
}

/* The index of the task called key among d[0..n), or n. */
static size_t
find_key(const struct draft *d, size_t n, const char *key)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(d[i].t.key, key))
			break;
	return i;
}

/* Turns every task's depends_on keys into indexes. */
static int
resolve_deps(struct draft *d, size_t n, const char *file, struct err *e)
{
	size_t i, k, j;

	for (i = 0; i < n; i++) {
		d[i].deps = xcalloc(d[i].t.depends_on.nr + 1, sizeof(size_t));
		for (k = 0; k < d[i].t.depends_on.nr; k++) {
			const char *key = d[i].t.depends_on.v[k];

			j = find_key(d, n, key);
			if (j == n)
				return err_set(e, BATON_EINVAL,
					       "%s: tasks[%zu].depends_on "
					       "names '%s', which is not a "
					       "task of this plan",
					       file, i, key);
			d[i].deps[d[i].nr_deps++] = j;
		}
	}
	return 0;
}

enum { WHITE, GREY, BLACK };

/*
 * Depth-first search from i. A dependency found grey closes a cycle: the
 * keys from it along the path back to it go in e. path holds the grey
 * tasks in order, *depth of them.
 */
static int
visit(const struct draft *d, size_t i, unsigned char *colour, size_t *path,
      size_t *depth, const char *file, struct err *e)
{
	struct buf msg = BUF_INIT;
	size_t k, at;
	int rc = 0;

	colour[i] = GREY;
	path[(*depth)++] = i;
	for (k = 0; k < d[i].nr_deps && !rc; k++) {
		size_t j = d[i].deps[k];

		if (colour[j] == BLACK)
			continue;
		if (colour[j] == WHITE) {
			rc = visit(d, j, colour, path, depth, file, e);
			continue;
		}
		for (at = 0; path[at] != j; at++)
			;
		for (; at < *depth; at++)
			buf_addf(&msg, "%s -> ", d[path[at]].t.key);
		buf_adds(&msg, d[j].t.key);
		rc = err_set(e, BATON_EINVAL,
			     "%s: the dependencies form a cycle: %s (each "
			     "depends on the next)",
			     file, msg.ptr);
	}
	(*depth)--;
	colour[i] = BLACK;
	buf_release(&msg);
	return rc;
}

static int
check_cycles(const struct draft *d, size_t n, const char *file,
	     struct err *e)
{
	unsigned char *colour = xcalloc(n, 1);
	size_t *path = xcalloc(n, sizeof(*path));
	size_t i, depth = 0;
	int rc = 0;

	for (i = 0; i < n && !rc; i++)
		if (colour[i] == WHITE)
			rc = visit(d, i, colour, path, &depth, file, e);
	free(colour);
	free(path);
	return rc;
}

/*
 * Moves the drafts into p->tasks in dependency order: each round takes
 * the first task (in the planner's order) whose dependencies are all
 * placed, so a plan already in order keeps it. Needs no cycles.
 */
static void
order_tasks(struct draft *d, size_t n, struct plan *p)
{
	unsigned char *placed = xcalloc(n, 1);
	size_t i, k;

	p->tasks = xcalloc(n, sizeof(*p->tasks));
	while (p->nr < n) {
		for (i = 0; i < n; i++) {
			if (placed[i])
				continue;
			for (k = 0; k < d[i].nr_deps && placed[d[i].deps[k]];
			     k++)
				;
			if (k == d[i].nr_deps)
				break;
		}
		if (i == n)
			BUG("order_tasks: a cycle got past check_cycles");
		placed[i] = 1;
		p->tasks[p->nr++] = d[i].t;
		memset(&d[i].t, 0, sizeof(d[i].t));
		strvec_init(&d[i].t.depends_on);
	}
	free(placed);
}

/* The members of the plan object other than the tasks. */
static int
read_top(const json_t *doc, const char *file, const json_t **tasks,
	 char **summary, struct err *e)
{
	const json_t *v;
	size_t n;
	int rc;

	if (!json_is_object(doc))
		return err_set(e, BATON_EINVAL,
			       "%s must be a JSON object with a \"tasks\" "
			       "list, got %s",
			       file, json_kind(doc));
	rc = check_members(doc, plan_members, file, e);
	if (rc)
		return rc;
	v = json_object_get(doc, "tasks");
	if (!v)
		return err_set(e, BATON_EINVAL, "%s has no \"tasks\" list",
			       file);
	if (!json_is_array(v))
		return err_set(e, BATON_EINVAL,
			       "%s: \"tasks\" must be a list, got %s", file,
			       json_kind(v));
	n = json_array_size(v);
	if (!n)
		return err_set(e, BATON_EINVAL,
			       "%s: \"tasks\" is empty: a plan has at least "
			       "one task",
			       file);
	if (n > PLAN_MAX_TASKS)
		return err_set(e, BATON_EINVAL,
			       "%s: %zu tasks, more than the %d a plan may "
			       "hold",
			       file, n, PLAN_MAX_TASKS);
	*tasks = v;
	v = json_object_get(doc, "summary");
	if (v && !json_is_null(v) && !json_is_string(v))
		return err_set(e, BATON_EINVAL,
			       "%s: \"summary\" must be a string, got %s", file,
			       json_kind(v));
	if (v && json_string_value(v) && *json_string_value(v))
		*summary = xstrdup(json_string_value(v));
	return 0;
}

int
plan_parse(const char *text, const char *file, struct plan *out,
	   struct err *e)
{
	json_error_t jerr;
	json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	const json_t *tasks = NULL;
	struct plan p = PLAN_INIT;
	struct draft *d = NULL;
	char *summary = NULL;
	size_t i, n = 0, j;
	int rc;

	if (!doc)
		return err_set(e, BATON_EINVAL,
			       "%s is not valid JSON: line %d, column %d: %s",
			       file, jerr.line, jerr.column, jerr.text);
	rc = read_top(doc, file, &tasks, &summary, e);
	if (rc)
		goto out;
	n = json_array_size(tasks);
	d = xcalloc(n, sizeof(*d));
	for (i = 0; i < n; i++)
		strvec_init(&d[i].t.depends_on);
	for (i = 0; i < n && !rc; i++) {
		rc = read_task(json_array_get(tasks, i), file, i, &d[i].t, e);
		j = rc ? i : find_key(d, i, d[i].t.key);
		if (!rc && j < i)
			rc = err_set(e, BATON_EINVAL,
				     "%s: tasks[%zu].key '%s' is also the key "
				     "of tasks[%zu]",
				     file, i, d[i].t.key, j);
	}
	if (!rc)
		rc = resolve_deps(d, n, file, e);
	if (!rc)
		rc = check_cycles(d, n, file, e);
	if (rc)
		goto out;
	order_tasks(d, n, &p);
	p.summary = summary;
	summary = NULL;
	*out = p;
out:
	for (i = 0; d && i < n; i++) {
		task_clear(&d[i].t);
		free(d[i].deps);
	}
	free(d);
	free(summary);
	json_decref(doc);
	return rc;
}

void
plan_release(struct plan *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->nr; i++)
		task_clear(&p->tasks[i]);
	free(p->tasks);
	free(p->summary);
	memset(p, 0, sizeof(*p));
}

/* ---- finding the plan in a final text -------------------------------- */

/* The start of the line after p's, or NULL at the end of the text. */
static const char *
next_line(const char *p)
{
	const char *nl = strchr(p, '\n');

	return nl ? nl + 1 : NULL;
}

/*
 * The last fenced block whose info string is "json": the lines between
 * "```json" and the closing "```" (an unclosed one runs to the end).
 */
static char *
last_json_fence(const char *text)
{
	const char *line, *body = NULL, *found = NULL, *found_end = NULL;
	int in_fence = 0, is_json = 0;

	for (line = text; line; line = next_line(line)) {
		const char *q = line + strspn(line, " \t");
		const char *info;

		if (strncmp(q, "```", 3))
			continue;
		if (in_fence) {
			if (is_json) {
				found = body;
				found_end = line;
			}
			in_fence = 0;
			continue;
		}
		info = q + strspn(q, "`");
		info += strspn(info, " \t");
		is_json = !strncasecmp(info, "json", 4) &&
			  !isalnum((unsigned char)info[4]);
		in_fence = 1;
		body = next_line(q);
	}
	if (in_fence && is_json && body) {
		found = body;
		found_end = body + strlen(body);
	}
	if (!found)
		return NULL;
	return xstrndup(found, (size_t)(found_end - found));
}

/*
 * The last JSON object that starts a line and is not inside an earlier
 * one; one with a "tasks" member wins over one without. Tries at most
 * FIND_MAX_TRIES openings, so a text full of braces costs little.
 */
static char *
last_bare_object(const char *text)
{
	const char *line, *skip_to = text, *best = NULL;
	size_t best_len = 0, len = strlen(text);
	int tries = 0, best_has_tasks = 0;

	for (line = text; line && tries < FIND_MAX_TRIES;
	     line = next_line(line)) {
		const char *q = line + strspn(line, " \t");
		json_error_t jerr;
		json_t *v;
		int has;

		if (*q != '{' || q < skip_to)
			continue;
		tries++;
		v = json_loadb(q, len - (size_t)(q - text),
			       JSON_DISABLE_EOF_CHECK, &jerr);
		if (!v)
			continue;
		if (json_is_object(v)) {
			has = json_object_get(v, "tasks") != NULL;
			if (has || !best_has_tasks) {
				best = q;
				best_len = jerr.position;
				best_has_tasks = has;
			}
			skip_to = q + jerr.position;
		}
		json_decref(v);
	}
	return best ? xstrndup(best, best_len) : NULL;
}

char *
plan_find_json(const char *text)
{
	char *s = last_json_fence(text);

	return s ? s : last_bare_object(text);
}

/* ---- output ---------------------------------------------------------- */

/* A JSON array from array text kept by plan_parse; null for NULL. */
static json_t *
array_or_null(const char *text)
{
	json_t *v = text ? json_loads(text, 0, NULL) : NULL;

	return v ? v : json_null();
}

void
plan_to_json(const struct plan *p, struct buf *out)
{
	json_t *doc = json_object(), *tasks = json_array();
	char *s;
	size_t i, k;

	for (i = 0; i < p->nr; i++) {
		const struct plan_task *t = &p->tasks[i];
		json_t *deps = json_array();

		for (k = 0; k < t->depends_on.nr; k++)
			json_array_append_new(deps,
					      json_string(t->depends_on.v[k]));
		json_array_append_new(
			tasks,
			json_pack("{s:s, s:s, s:s?, s:s?, s:i, s:o, s:o, s:o}",
				  "key", t->key, "title", t->title, "body",
				  t->body, "area", t->area, "priority",
				  t->priority, "depends_on", deps,
				  "allowed_paths",
				  array_or_null(t->allowed_paths), "verify",
				  array_or_null(t->verify)));
	}
	json_object_set_new(doc, "tasks", tasks);
	json_object_set_new(doc, "summary", json_lossy_str(p->summary));
	s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	buf_adds(out, s);
	buf_addch(out, '\n');
	free(s);
	json_decref(doc);
}

/* Characters (UTF-8 code points) in s. */
static size_t
width(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* s cut to max characters, "..." marking the cut; caller frees. */
static char *
cut(const char *s, size_t max)
{
	size_t n = 0;
	const char *p;

	if (width(s) <= max)
		return xstrdup(s);
	for (p = s; *p; p++) {
		if (((unsigned char)*p & 0xC0) != 0x80 && n++ == max - 3)
			break;
	}
	return xasprintf("%.*s...", (int)(p - s), s);
}

/* Appends s padded with spaces to w characters, then two spaces. */
static void
cell(struct buf *out, const char *s, size_t w)
{
	size_t n = width(s);

	buf_adds(out, s);
	while (n++ < w + 2)
		buf_addch(out, ' ');
}

void
plan_render(const struct plan *p, const int64_t *ids, struct buf *out)
{
	size_t wkey = 3, wtitle = 5, warea = 4, wid = 2, wnum, i, k;
	char **titles = xcalloc(p->nr + 1, sizeof(*titles));
	char num[32], id[32];
	struct buf deps = BUF_INIT, line = BUF_INIT;

	for (i = 0; i < p->nr; i++) {
		const struct plan_task *t = &p->tasks[i];

		titles[i] = cut(t->title, RENDER_TITLE_MAX);
		wkey = width(t->key) > wkey ? width(t->key) : wkey;
		wtitle = width(titles[i]) > wtitle ? width(titles[i]) : wtitle;
		if (t->area && width(t->area) > warea)
			warea = width(t->area);
		snprintf(id, sizeof(id), "t%lld",
			 ids ? (long long)ids[i] : 0LL);
		wid = strlen(id) > wid ? strlen(id) : wid;
	}
	snprintf(num, sizeof(num), "%zu", p->nr);
	wnum = strlen(num);
	cell(&line, "#", wnum);
	if (ids)
		cell(&line, "id", wid);
	cell(&line, "key", wkey);
	cell(&line, "title", wtitle);
	cell(&line, "area", warea);
	buf_adds(&line, "depends on");
	buf_addf(out, "%s\n", line.ptr);
	for (i = 0; i < p->nr; i++) {
		const struct plan_task *t = &p->tasks[i];

		buf_reset(&line);
		buf_reset(&deps);
		snprintf(num, sizeof(num), "%zu", i + 1);
		cell(&line, num, wnum);
		if (ids) {
			snprintf(id, sizeof(id), "t%lld", (long long)ids[i]);
			cell(&line, id, wid);
		}
		cell(&line, t->key, wkey);
		cell(&line, titles[i], wtitle);
		cell(&line, t->area ? t->area : "-", warea);
		for (k = 0; k < t->depends_on.nr; k++)
			buf_addf(&deps, "%s%s", k ? ", " : "",
				 t->depends_on.v[k]);
		buf_adds(&line, deps.len ? deps.ptr : "-");
		buf_addf(out, "%s\n", line.ptr);
		free(titles[i]);
	}
	free(titles);
	buf_release(&deps);
	buf_release(&line);
}

/* ---- the queue ------------------------------------------------------- */

/*
 * Adds one task of the plan; sched_task_add does the rest (the event,
 * waking serve).
 */
static int
add_task(struct sched_ctx *x, struct task *t, struct err *e)
{
	return sched_task_add(x, t, e);
}

int
plan_enqueue(struct sched_ctx *x, const struct plan *p, int64_t plan_id,
	     int64_t *ids_out, struct err *e)
{
	return plan_enqueue_as(x, p, plan_id, "plan", ids_out, e);
}

int
plan_enqueue_as(struct sched_ctx *x, const struct plan *p, int64_t plan_id,
		const char *origin, int64_t *ids_out, struct err *e)
{
	struct buf done = BUF_INIT;
	size_t i, k, j;
	int rc = 0;

	for (i = 0; i < p->nr; i++)
		ids_out[i] = 0;
	for (i = 0; i < p->nr && !rc; i++) {
		const struct plan_task *pt = &p->tasks[i];
		struct task t = { 0 };

		t.title = xstrdup(pt->title);
		t.body = xstrdup_or_null(pt->body);
		t.kind = xstrdup("code");
		t.status = xstrdup(TASK_QUEUED);
		t.priority = pt->priority;
		t.area = xstrdup_or_null(pt->area);
		t.allowed_paths = xstrdup_or_null(pt->allowed_paths);
		t.verify = xstrdup_or_null(pt->verify);
		t.origin = xstrdup(origin);
		t.plan_id = plan_id;
		t.max_attempts = x->cfg ? x->cfg->runtime.max_attempts : 3;
		t.deps = xcalloc(pt->depends_on.nr + 1, sizeof(*t.deps));
		/* Dependency order: every task named is already queued. */
		for (k = 0; k < pt->depends_on.nr; k++) {
			for (j = 0; j < i && strcmp(p->tasks[j].key,
						    pt->depends_on.v[k]);
			     j++)
				;
			if (j == i)
				BUG("plan_enqueue: '%s' is not before '%s'",
				    pt->depends_on.v[k], pt->key);
			t.deps[t.nr_deps++] = ids_out[j];
		}
		rc = add_task(x, &t, e);
		if (!rc) {
			ids_out[i] = t.id;
			buf_addf(&done, "%st%lld", i ? ", " : "",
				 (long long)t.id);
		}
		task_release(&t);
	}
	if (rc && i > 1)
		err_prefix(e, "plan %lld: queued %zu of its %zu tasks (%s), "
			      "then",
			   (long long)plan_id, i - 1, p->nr, done.ptr);
	else if (rc)
		err_prefix(e, "plan %lld: queued none of its %zu tasks",
			   (long long)plan_id, p->nr);
	buf_release(&done);
	return rc;
}
