/*
 * Plugins: discovery, manifest checks, requires order and the
 * process-wide registry (see plugin.h for the manifest and the load
 * phases). Files are read once, here: a manifest, and the pipelines and
 * templates it names, whose text the registry keeps, so nothing later
 * goes back to the plugin folder except a kind's command.
 */
#include "util/compat.h"

#include <dirent.h>
#include <jansson.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "core/cnode.h"
#include "core/pipeline.h"
#include "core/plugin.h"
#include "core/prompt.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/xalloc.h"

#define DEFAULT_KIND_TIMEOUT 300
#define MAX_KIND_TIMEOUT     604800
/* More plugins than this in one folder is a mistake, not a setup. */
#define MAX_PLUGINS 256

static struct plugin *reg;
static size_t nreg;

static const char *const status_names[] = {
	[PLUGIN_ENABLED] = "enabled",		[PLUGIN_DISABLED] = "disabled",
	[PLUGIN_INCOMPATIBLE] = "incompatible", [PLUGIN_ERROR] = "error",
	[PLUGIN_LOADING] = "loading",
};

static const char *const hook_names[] = {
	[PLUGIN_HOOK_WORKTREE_SETUP] = "worktree_setup",
	[PLUGIN_HOOK_BEFORE_STAGE] = "before_stage",
	[PLUGIN_HOOK_AFTER_STAGE] = "after_stage",
	[PLUGIN_HOOK_BEFORE_MERGE] = "before_merge",
	[PLUGIN_HOOK_ON_TERMINAL] = "on_terminal",
	[PLUGIN_HOOK_WORKTREE_TEARDOWN] = "worktree_teardown",
	[PLUGIN_HOOK__COUNT] = NULL,
};

static const char *const manifest_keys[] = {
	"id",	     "api_version", "description", "version", "requires",
	"pipelines", "prompts",	    "hooks",	   "kinds",   NULL,
};

static const char *const kind_keys[] = {
	"name", "status", "command", "timeout_seconds", NULL,
};

/* Statuses no plugin kind may take: every pipeline has them. */
static const char *const reserved[] = {
	ST_CREATED, ST_WAITING, ST_PAUSED,	ST_INTERRUPTED, ST_BLOCKED,
	ST_FAILED,  ST_ABORTED, ST_MERGE_READY, ST_COMPLETED,	NULL,
};

const char *
plugin_status_name(enum plugin_status s)
{
	return status_names[s];
}

const char *
plugin_hook_name(enum plugin_hook h)
{
	return h < PLUGIN_HOOK__COUNT ? hook_names[h] : NULL;
}

int
plugin_name_valid(const char *s)
{
	const char *c;

	for (c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		      *c == '_' || *c == '-'))
			return 0;
	return *s && c - s <= 48;
}

/*
 * A relative path inside the plugin folder: not empty, not absolute,
 * no ".." part. What a manifest may name.
 */
static int
is_inside(const char *path)
{
	const char *p = path;

	if (!*path || *path == '/')
		return 0;
	while (p) {
		if (!strncmp(p, "..", 2) && (p[2] == '/' || !p[2]))
			return 0;
		p = strchr(p, '/');
		if (p)
			p++;
	}
	return 1;
}

static void
file_release(struct plugin_file *f)
{
	free(f->name);
	free(f->path);
	free(f->text);
}

/* Frees what pl provides and requires, leaving it providing nothing. */
static void
drop_provides(struct plugin *pl)
{
	size_t i;
	int h;

	strvec_clear(&pl->requires);
	for (i = 0; i < pl->nr_pipelines; i++)
		file_release(&pl->pipelines[i]);
	free(pl->pipelines);
	for (i = 0; i < pl->nr_prompts; i++)
		file_release(&pl->prompts[i]);
	free(pl->prompts);
	for (i = 0; i < pl->nr_kinds; i++) {
		free(pl->kinds[i].name);
		free(pl->kinds[i].status);
		strvec_clear(&pl->kinds[i].command);
	}
	free(pl->kinds);
	for (h = 0; h < PLUGIN_HOOK__COUNT; h++)
		strvec_clear(&pl->hooks[h]);
	pl->pipelines = pl->prompts = NULL;
	pl->kinds = NULL;
	pl->nr_pipelines = pl->nr_prompts = pl->nr_kinds = 0;
}

static void
plugin_release(struct plugin *pl)
{
	free(pl->id);
	free(pl->dir);
	free(pl->manifest);
	free(pl->description);
	free(pl->version);
	free(pl->reason);
	drop_provides(pl);
}

static void
plugin_init(struct plugin *pl, const char *id)
{
	int h;

	memset(pl, 0, sizeof(*pl));
	pl->id = xstrdup(id);
	strvec_init(&pl->requires);
	for (h = 0; h < PLUGIN_HOOK__COUNT; h++)
		strvec_init(&pl->hooks[h]);
}

void
plugins_unload(void)
{
	size_t i;

	for (i = 0; i < nreg; i++)
		plugin_release(&reg[i]);
	FREE_AND_NULL(reg);
	nreg = 0;
}

const struct plugin *
plugins_all(size_t *n)
{
	*n = nreg;
	return reg;
}

static void set_status(struct plugin *pl, enum plugin_status s, const char *fmt,
		       ...) __attribute__((format(printf, 3, 4)));

/* Marks pl with status s and the reason (printf-like; NULL: none). */
static void
set_status(struct plugin *pl, enum plugin_status s, const char *fmt, ...)
{
	va_list ap;
	struct buf b = BUF_INIT;

	pl->status = s;
	FREE_AND_NULL(pl->reason);
	if (!fmt)
		return;
	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	pl->reason = buf_detach(&b, NULL);
}

/* ---- reading a manifest ------------------------------------------------ */

/* Reads dir/rel (a file the manifest names) into *out. */
static int
read_named(const struct plugin *pl, const struct cnode *n, const char *key,
	   char **out, struct err *e)
{
	struct buf text = BUF_INIT;
	char where[256], *path;
	struct stat st;
	int rc;

	cnode_where(n, where, sizeof(where));
	if (n->type != CNODE_SCALAR || !is_inside(n->value))
		return err_set(e, BATON_EINVAL,
			       "%s: %s: expected a path inside the plugin "
			       "folder (relative, without '..')",
			       where, key);
	path = xasprintf("%s/%s", pl->dir, n->value);
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = err_set(e, BATON_EINVAL,
			     "%s: %s: '%s' is not a file in the plugin folder",
			     where, key, n->value);
		goto out;
	}
	rc = fs_read(path, &text, BUF_MAX_CONFIG, e);
	if (rc) {
		err_prefix(e, "%s: %s", where, key);
		goto out;
	}
	*out = buf_detach(&text, NULL);
out:
	buf_release(&text);
	free(path);
	return rc;
}

/* pipelines: / prompts:, maps of a name to a file of the plugin. */
static int
read_files(struct plugin *pl, const struct cnode *m, const char *key,
	   struct plugin_file **out, size_t *nr, struct err *e)
{
	char path[128], where[256];
	size_t i;
	int rc;

	if (!m)
		return 0;
	rc = cnode_expect(m, CNODE_MAP, key, e);
	if (rc)
		return rc;
	*out = xcalloc(m->nr ? m->nr : 1, sizeof(**out));
	for (i = 0; i < m->nr; i++) {
		const struct cnode *f = m->kids[i];
		struct plugin_file *pf = &(*out)[i];

		snprintf(path, sizeof(path), "%s.%s", key, f->key);
		if (!plugin_name_valid(f->key)) {
			cnode_where(f, where, sizeof(where));
			return err_set(e, BATON_EINVAL,
				       "%s: %s: '%s' is not a valid name "
				       "(lowercase letters, digits, '_' and "
				       "'-', at most 48)",
				       where, path, f->key);
		}
		rc = read_named(pl, f, path, &pf->text, e);
		if (rc)
			return rc;
		pf->name = xstrdup(f->key);
		pf->path = xstrdup(f->value);
		*nr = i + 1;
	}
	return 0;
}

/* A list of names or of non-empty strings under key. */
static int
read_list(const struct cnode *n, const char *key, int names, struct strvec *out,
	  struct err *e)
{
	char where[256];
	size_t i;
	int rc;

	if (!n)
		return 0;
	rc = cnode_expect(n, CNODE_SEQ, key, e);
	for (i = 0; !rc && i < n->nr; i++) {
		const struct cnode *k = n->kids[i];

		cnode_where(k, where, sizeof(where));
		if (k->type != CNODE_SCALAR || !*k->value)
			return err_set(e, BATON_EINVAL,
				       "%s: %s[%zu]: expected a non-empty "
				       "string",
				       where, key, i);
		if (names && !plugin_name_valid(k->value))
			return err_set(e, BATON_EINVAL,
				       "%s: %s[%zu]: '%s' is not a plugin id",
				       where, key, i, k->value);
		strvec_push(out, k->value);
	}
	return rc;
}

/* hooks: {worktree_setup: [...], ...}: the hook keys of hooks: config. */
static int
read_hooks(struct plugin *pl, const struct cnode *m, struct err *e)
{
	char path[64];
	int h, rc;

	if (!m)
		return 0;
	rc = cnode_check_keys(m, "hooks", hook_names, e);
	for (h = 0; !rc && h < PLUGIN_HOOK__COUNT; h++) {
		snprintf(path, sizeof(path), "hooks.%s", hook_names[h]);
		rc = read_list(cnode_get(m, hook_names[h]), path, 0,
			       &pl->hooks[h], e);
	}
	return rc;
}

/*
 * A kind's command: each element naming a file of the plugin folder
 * (relative, without '..') becomes its absolute path, so that the
 * command never runs a file of the worktree it works in; the first
 * element must be such a file, an absolute path, or a bare program name
 * (looked up on PATH).
 */
static int
read_command(const struct plugin *pl, const struct cnode *n, const char *key,
	     struct strvec *out, struct err *e)
{
	char where[256];
	struct stat st;
	size_t i;
	int rc;

	if (!n || n->type != CNODE_SEQ || !n->nr) {
		cnode_where(n, where, sizeof(where));
		return err_set(e, BATON_EINVAL,
			       "%s: %s: expected a non-empty list (the program "
			       "and its arguments)",
			       where, key);
	}
	for (i = 0; i < n->nr; i++) {
		const struct cnode *a = n->kids[i];
		char *path;

		cnode_where(a, where, sizeof(where));
		if (a->type != CNODE_SCALAR || !*a->value)
			return err_set(e, BATON_EINVAL,
				       "%s: %s[%zu]: expected a non-empty "
				       "string",
				       where, key, i);
		if (a->value[0] == '/' || a->value[0] == '-' ||
		    !is_inside(a->value)) {
			strvec_push(out, a->value);
			continue;
		}
		path = xasprintf("%s/%s", pl->dir, a->value);
		rc = stat(path, &st) == 0 && S_ISREG(st.st_mode);
		if (rc) {
			strvec_push(out, path);
		} else if (!i && strchr(a->value, '/')) {
			free(path);
			return err_set(e, BATON_EINVAL,
				       "%s: %s[0]: '%s' is not a file in the "
				       "plugin folder",
				       where, key, a->value);
		} else {
			strvec_push(out, a->value);
		}
		free(path);
	}
	return 0;
}

/* kinds: [{name, status, command, timeout_seconds}]. */
static int
read_kinds(struct plugin *pl, const struct cnode *n, struct err *e)
{
	char path[64], where[256];
	enum stage_kind builtin;
	size_t i, j;
	long v;
	int rc;

	if (!n)
		return 0;
	rc = cnode_expect(n, CNODE_SEQ, "kinds", e);
	if (rc)
		return rc;
	pl->kinds = xcalloc(n->nr ? n->nr : 1, sizeof(*pl->kinds));
	for (i = 0; i < n->nr; i++) {
		const struct cnode *k = n->kids[i], *f;
		struct plugin_kind *pk = &pl->kinds[i];

		strvec_init(&pk->command);
		pl->nr_kinds = i + 1;
		snprintf(path, sizeof(path), "kinds[%zu]", i);
		rc = cnode_check_keys(k, path, kind_keys, e);
		if (rc)
			return rc;
		cnode_where(k, where, sizeof(where));
		f = cnode_get(k, "name");
		if (!f || f->type != CNODE_SCALAR || !plugin_name_valid(f->value))
			return err_set(e, BATON_EINVAL,
				       "%s: %s.name: expected a kind name "
				       "(lowercase letters, digits, '_' and "
				       "'-', at most 48)",
				       where, path);
		if (!stage_kind_parse(f->value, &builtin))
			return err_set(e, BATON_EINVAL,
				       "%s: %s.name: '%s' is a built-in stage "
				       "kind",
				       where, path, f->value);
		for (j = 0; j < i; j++)
			if (!strcmp(pl->kinds[j].name, f->value))
				return err_set(e, BATON_EINVAL,
					       "%s: %s.name: kind '%s' is "
					       "declared twice",
					       where, path, f->value);
		pk->name = xstrdup(f->value);
		f = cnode_get(k, "status");
		if (f) {
			if (f->type != CNODE_SCALAR || !plugin_name_valid(f->value) ||
			    str_in_list(reserved, f->value)) {
				cnode_where(f, where, sizeof(where));
				return err_set(e, BATON_EINVAL,
					       "%s: %s.status: expected a "
					       "status name of the plugin's "
					       "own (not one every pipeline "
					       "has)",
					       where, path);
			}
			pk->status = xstrdup(f->value);
		} else {
			char *c;

			pk->status = xstrdup(pk->name);
			for (c = pk->status; *c; c++)
				if (*c == '-')
					*c = '_';
		}
		snprintf(path, sizeof(path), "kinds[%zu].command", i);
		f = cnode_get(k, "command");
		rc = read_command(pl, f ? f : k, path, &pk->command, e);
		if (rc)
			return rc;
		pk->timeout_seconds = DEFAULT_KIND_TIMEOUT;
		f = cnode_get(k, "timeout_seconds");
		if (f) {
			snprintf(path, sizeof(path),
				 "kinds[%zu].timeout_seconds", i);
			rc = cnode_int(f, path, 1, MAX_KIND_TIMEOUT, &v, e);
			if (rc)
				return rc;
			pk->timeout_seconds = (int)v;
		}
	}
	return 0;
}

static int
read_scalar(const struct cnode *n, const char *key, char **out, struct err *e)
{
	int rc;

	if (!n)
		return 0;
	rc = cnode_expect(n, CNODE_SCALAR, key, e);
	if (!rc)
		*out = xstrdup(n->value);
	return rc;
}

/*
 * Reads pl's manifest. Returns 0 (pl filled and DISABLED until enabled,
 * or INCOMPATIBLE), or an error (e says why; the caller marks it).
 * api_version is checked before anything else: a manifest for another
 * API may have keys this one does not know.
 */
static int
read_manifest(struct plugin *pl, struct err *e)
{
	struct buf text = BUF_INIT;
	struct cnode *tree = NULL;
	const struct cnode *n;
	char where[256];
	long api;
	int rc;

	if (!plugin_name_valid(pl->id)) {
		rc = err_set(e, BATON_EINVAL,
			     "'%s' is not a valid plugin id (lowercase "
			     "letters, digits, '_' and '-', at most 48): "
			     "rename its folder",
			     pl->id);
		goto out;
	}
	rc = fs_read(pl->manifest, &text, BUF_MAX_CONFIG, e);
	if (!rc)
		rc = cnode_parse_yaml(text.ptr, text.len, pl->manifest, &tree,
				      e);
	if (!rc)
		rc = cnode_expect(tree, CNODE_MAP, "plugin.yaml", e);
	if (rc)
		goto out;
	n = cnode_get(tree, "api_version");
	if (!n) {
		rc = err_set(e, BATON_EINVAL, "%s: missing api_version",
			     pl->manifest);
		goto out;
	}
	if (n->type != CNODE_SCALAR ||
	    cnode_int(n, "api_version", 1, 1000000, &api, NULL)) {
		cnode_where(n, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: api_version: expected a positive integer",
			     where);
		goto out;
	}
	pl->api_version = api;
	if (api != PLUGIN_API_VERSION) {
		set_status(pl, PLUGIN_INCOMPATIBLE,
			   "api_version %ld; this baton speaks %d", api,
			   PLUGIN_API_VERSION);
		goto out;
	}
	rc = cnode_check_keys(tree, "", manifest_keys, e);
	if (rc)
		goto out;
	n = cnode_get(tree, "id");
	if (!n || n->type != CNODE_SCALAR || strcmp(n->value, pl->id)) {
		cnode_where(n ? n : tree, where, sizeof(where));
		rc = err_set(e, BATON_EINVAL,
			     "%s: id: expected '%s' (the plugin's folder name)",
			     where, pl->id);
		goto out;
	}
	rc = read_scalar(cnode_get(tree, "description"), "description",
			 &pl->description, e);
	if (!rc)
		rc = read_scalar(cnode_get(tree, "version"), "version",
				 &pl->version, e);
	if (!rc)
		rc = read_list(cnode_get(tree, "requires"), "requires", 1,
			       &pl->requires, e);
	if (!rc && strvec_has(&pl->requires, pl->id))
		rc = err_set(e, BATON_EINVAL,
			     "%s: requires: '%s' requires "
			     "itself",
			     pl->manifest, pl->id);
	if (!rc)
		rc = read_files(pl, cnode_get(tree, "pipelines"), "pipelines",
				&pl->pipelines, &pl->nr_pipelines, e);
	if (!rc)
		rc = read_files(pl, cnode_get(tree, "prompts"), "prompts",
				&pl->prompts, &pl->nr_prompts, e);
	if (!rc)
		rc = read_hooks(pl, cnode_get(tree, "hooks"), e);
	if (!rc)
		rc = read_kinds(pl, cnode_get(tree, "kinds"), e);
	if (!rc)
		set_status(pl, PLUGIN_DISABLED, NULL);
out:
	cnode_free(tree);
	buf_release(&text);
	return rc;
}

/* ---- discovery and order ------------------------------------------------ */

static struct plugin *
find(struct plugin *v, size_t n, const char *id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(v[i].id, id))
			return &v[i];
	return NULL;
}

/* The plugin folders of dir, by id, each id once (the first dir wins). */
static void
discover(const char *dir, struct plugin **v, size_t *n, size_t *alloc)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct plugin *pl;
	char *manifest;

	if (!d)
		return;
	while ((de = readdir(d)) && *n < MAX_PLUGINS) {
		if (de->d_name[0] == '.' || find(*v, *n, de->d_name))
			continue;
		manifest = xasprintf("%s/%s/plugin.yaml", dir, de->d_name);
		if (!fs_exists(manifest)) {
			free(manifest);
			continue;
		}
		ALLOC_GROW(*v, *n + 1, *alloc);
		pl = &(*v)[(*n)++];
		plugin_init(pl, de->d_name);
		pl->dir = xasprintf("%s/%s", dir, de->d_name);
		pl->manifest = manifest;
		pl->status = PLUGIN_ERROR;
	}
	closedir(d);
}

static int
cmp_id(const void *a, const void *b)
{
	return strcmp(((const struct plugin *)a)->id,
		      ((const struct plugin *)b)->id);
}

/*
 * Whether from reaches to through requires among the unordered
 * plugins (left[i]), each visited once (seen[i]); the path found goes
 * into path as " -> b -> to".
 */
static int
reaches(struct plugin *v, size_t n, const int *left, int *seen,
	const struct plugin *from, const char *to, struct buf *path)
{
	struct plugin *r;
	struct buf b = BUF_INIT;
	size_t i;

	for (i = 0; i < from->requires.nr; i++) {
		r = find(v, n, from->requires.v[i]);
		if (!r || !left[r - v] || seen[r - v])
			continue;
		seen[r - v] = 1;
		if (strcmp(r->id, to) &&
		    !reaches(v, n, left, seen, r, to, path))
			continue;
		/* built from the far end back */
		buf_addf(&b, " -> %s%s", r->id, path->ptr);
		buf_reset(path);
		buf_adds(path, b.ptr);
		buf_release(&b);
		return 1;
	}
	return 0;
}

/*
 * Orders v by requires: a plugin after those it requires, ids in
 * alphabetical order where the order is free (v comes sorted). The ones
 * left on or behind a cycle are errors, appended.
 */
static struct plugin *
order(struct plugin *v, size_t n)
{
	struct plugin *out = xcalloc(n ? n : 1, sizeof(*out));
	int *left = xcalloc(n ? n : 1, sizeof(*left));
	size_t i, j, k = 0;
	int ready, found;

	for (i = 0; i < n; i++)
		left[i] = 1;
	while (k < n) {
		for (i = 0; i < n; i++) {
			if (!left[i])
				continue;
			ready = 1;
			for (j = 0; j < v[i].requires.nr && ready; j++) {
				struct plugin *r =
				    find(v, n, v[i].requires.v[j]);

				if (r && left[r - v])
					ready = 0;
			}
			if (ready)
				break;
		}
		if (i == n)
			break;
		out[k++] = v[i];
		left[i] = 0;
	}
	for (i = 0; i < n; i++) {
		struct buf path = BUF_INIT;
		int *seen;

		if (!left[i])
			continue;
		seen = xcalloc(n, sizeof(*seen));
		found = reaches(v, n, left, seen, &v[i], v[i].id, &path);
		free(seen);
		if (found)
			set_status(&v[i], PLUGIN_ERROR, "requires cycle: %s%s",
				   v[i].id, path.ptr);
		else
			set_status(&v[i], PLUGIN_ERROR,
				   "requires a plugin on a requires cycle");
		buf_release(&path);
	}
	for (i = 0; i < n; i++)
		if (left[i])
			out[k++] = v[i];
	free(left);
	free(v);
	return out;
}

/* ---- enabling ----------------------------------------------------------- */

/* The enabled (or loading) plugin other than self with kind name. */
static const struct plugin_kind *
kind_of_others(const struct plugin *self, const char *name)
{
	size_t i, j;

	for (i = 0; i < nreg; i++) {
		if (&reg[i] == self || (reg[i].status != PLUGIN_ENABLED &&
					reg[i].status != PLUGIN_LOADING))
			continue;
		for (j = 0; j < reg[i].nr_kinds; j++)
			if (!strcmp(reg[i].kinds[j].name, name))
				return &reg[i].kinds[j];
	}
	return NULL;
}

/* The enabled plugin other than self with pipeline name, or NULL. */
static const struct plugin *
pipeline_owner(const struct plugin *self, const char *name)
{
	size_t i, j;

	for (i = 0; i < nreg; i++) {
		if (&reg[i] == self || reg[i].status != PLUGIN_ENABLED)
			continue;
		for (j = 0; j < reg[i].nr_pipelines; j++)
			if (!strcmp(reg[i].pipelines[j].name, name))
				return &reg[i];
	}
	return NULL;
}

/*
 * Parses each of pl's pipelines (pl is LOADING: its kinds count) and
 * holds their plugin kinds to pl's own and those of the plugins it
 * requires.
 */
static int
check_pipelines(const struct plugin *pl, struct err *e)
{
	const char *const *builtin = pipeline_builtin_names();
	const struct plugin *other;
	size_t i, j;
	int rc = 0;

	for (i = 0; i < pl->nr_pipelines && !rc; i++) {
		const struct plugin_file *f = &pl->pipelines[i];
		struct cnode *tree = NULL;
		struct pipeline *p = NULL;
		char *file = xasprintf("%s/%s", pl->dir, f->path);

		if (str_in_list(builtin, f->name))
			rc = err_set(e, BATON_EINVAL,
				     "pipeline '%s' clashes with the built-in "
				     "pipeline of that name",
				     f->name);
		else if ((other = pipeline_owner(pl, f->name)))
			rc = err_set(e, BATON_EINVAL,
				     "pipeline '%s' is also provided by "
				     "plugin '%s'",
				     f->name, other->id);
		if (!rc)
			rc = cnode_parse_yaml(f->text, strlen(f->text), file,
					      &tree, e);
		if (!rc)
			rc = pipeline_parse(f->name, tree, 0, &p, e);
		for (j = 0; !rc && j < p->nr_stages; j++) {
			const struct plugin_kind *pk = p->stages[j].pkind;

			if (!pk || pk->plugin == pl ||
			    strvec_has(&pl->requires, pk->plugin->id))
				continue;
			rc = err_set(e, BATON_EINVAL,
				     "%s: pipeline '%s' uses kind '%s' of "
				     "plugin '%s', which it does not require",
				     file, f->name, pk->name, pk->plugin->id);
		}
		pipeline_free(p);
		cnode_free(tree);
		free(file);
	}
	return rc;
}

/* Enables pl, or marks why it cannot be. */
static void
enable(struct plugin *pl)
{
	struct err e = ERR_INIT;
	const struct plugin_kind *clash;
	size_t i;

	for (i = 0; i < pl->requires.nr; i++) {
		const struct plugin *r = find(reg, nreg, pl->requires.v[i]);

		if (!r) {
			set_status(pl, PLUGIN_ERROR,
				   "requires '%s', which is not installed",
				   pl->requires.v[i]);
			return;
		}
		if (r->status != PLUGIN_ENABLED) {
			set_status(pl, PLUGIN_ERROR,
				   "requires '%s', which is %s", r->id,
				   r->status == PLUGIN_DISABLED ? "not enabled"
				   : r->status == PLUGIN_ERROR
				       ? "in error"
				       : "incompatible");
			return;
		}
	}
	for (i = 0; i < pl->nr_kinds; i++) {
		clash = kind_of_others(pl, pl->kinds[i].name);
		if (clash) {
			set_status(pl, PLUGIN_ERROR,
				   "kind '%s' is also provided by plugin '%s'",
				   pl->kinds[i].name, clash->plugin->id);
			return;
		}
	}
	pl->status = PLUGIN_LOADING;
	if (check_pipelines(pl, &e))
		set_status(pl, PLUGIN_ERROR, "%s", e.msg);
	else
		set_status(pl, PLUGIN_ENABLED, NULL);
}

void
plugins_load(const struct strvec *dirs, const struct strvec *enabled)
{
	struct plugin *v = NULL;
	size_t n = 0, alloc = 0, i, j;
	struct err why = ERR_INIT;
	struct buf where = BUF_INIT;

	plugins_unload();
	for (i = 0; dirs && i < dirs->nr; i++) {
		discover(dirs->v[i], &v, &n, &alloc);
		buf_addf(&where, "%s%s", i ? " or " : "", dirs->v[i]);
	}
	for (i = 0; enabled && i < enabled->nr; i++) {
		if (find(v, n, enabled->v[i]))
			continue;
		ALLOC_GROW(v, n + 1, alloc);
		plugin_init(&v[n], enabled->v[i]);
		set_status(&v[n], PLUGIN_ERROR,
			   "enabled in plugins.enabled but not installed (no "
			   "%s/plugin.yaml in %s)",
			   enabled->v[i], where.len ? where.ptr : "any folder");
		n++;
	}
	buf_release(&where);
	if (n)
		qsort(v, n, sizeof(*v), cmp_id);
	for (i = 0; i < n; i++) {
		if (!v[i].manifest)
			continue;
		why = (struct err)ERR_INIT;
		if (read_manifest(&v[i], &why)) {
			/* what it would provide is not known: none of it */
			drop_provides(&v[i]);
			set_status(&v[i], PLUGIN_ERROR, "%s", why.msg);
		}
	}
	reg = order(v, n);
	nreg = n;
	for (i = 0; i < nreg; i++)
		for (j = 0; j < reg[i].nr_kinds; j++)
			reg[i].kinds[j].plugin = &reg[i];
	for (i = 0; i < nreg; i++) {
		if (reg[i].status != PLUGIN_DISABLED)
			continue;
		if (strvec_has(enabled, reg[i].id))
			enable(&reg[i]);
	}
}

/* ---- lookups ------------------------------------------------------------ */

const struct plugin_kind *
plugin_kind_find(const char *name)
{
	return kind_of_others(NULL, name);
}

int
plugin_pipeline_find(const char *name, const struct plugin **owner,
		     const char **text, const char **file)
{
	size_t i, j;

	for (i = 0; i < nreg; i++) {
		if (reg[i].status != PLUGIN_ENABLED)
			continue;
		for (j = 0; j < reg[i].nr_pipelines; j++) {
			if (strcmp(reg[i].pipelines[j].name, name))
				continue;
			*owner = &reg[i];
			*text = reg[i].pipelines[j].text;
			*file = reg[i].pipelines[j].path;
			return 0;
		}
	}
	return BATON_ENOTFOUND;
}

void
plugin_pipeline_names(struct strvec *out)
{
	size_t i, j;

	for (i = 0; i < nreg; i++)
		if (reg[i].status == PLUGIN_ENABLED)
			for (j = 0; j < reg[i].nr_pipelines; j++)
				strvec_push(out, reg[i].pipelines[j].name);
}

const char *
plugin_prompt(const char *id, const char *name)
{
	const struct plugin *pl = id ? find(reg, nreg, id) : NULL;
	size_t i;

	if (!pl || pl->status != PLUGIN_ENABLED)
		return NULL;
	for (i = 0; i < pl->nr_prompts; i++)
		if (!strcmp(pl->prompts[i].name, name))
			return pl->prompts[i].text;
	return NULL;
}

char *
plugin_template(const char *baton_dir, const struct pipeline *p,
		const char *name)
{
	char *own = prompt_repo_template(baton_dir, name);
	const struct plugin_kind *pk;
	const char *text;

	if (own)
		return own;
	text = plugin_prompt(p ? p->plugin : NULL, name);
	/* a plugin kind's own template, in whatever pipeline it works */
	pk = text ? NULL : plugin_kind_find(name);
	if (pk)
		text = plugin_prompt(pk->plugin->id, name);
	if (text)
		return xstrdup(text);
	text = prompt_builtin(name);
	return text ? xstrdup(text) : NULL;
}

/* ---- listing ------------------------------------------------------------ */

static json_t *
strvec_json(const struct strvec *v)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < v->nr; i++)
		json_array_append_new(a, json_string(v->v[i]));
	return a;
}

struct json_t *
plugin_to_json(const struct plugin *pl)
{
	json_t *pipes = json_array(), *prompts = json_array();
	json_t *kinds = json_array(), *hooks = json_object();
	size_t i;
	int h;

	for (i = 0; i < pl->nr_pipelines; i++)
		json_array_append_new(pipes,
				      json_string(pl->pipelines[i].name));
	for (i = 0; i < pl->nr_prompts; i++)
		json_array_append_new(prompts,
				      json_string(pl->prompts[i].name));
	for (i = 0; i < pl->nr_kinds; i++)
		json_array_append_new(
		    kinds,
		    json_pack("{s:s, s:s, s:o, s:i}", "name", pl->kinds[i].name,
			      "status", pl->kinds[i].status, "command",
			      strvec_json(&pl->kinds[i].command),
			      "timeout_seconds", pl->kinds[i].timeout_seconds));
	for (h = 0; h < PLUGIN_HOOK__COUNT; h++)
		if (pl->hooks[h].nr)
			json_object_set_new(hooks, hook_names[h],
					    strvec_json(&pl->hooks[h]));
	return json_pack(
	    "{s:s, s:s, s:s?, s:s?, s:o, s:s?, s:s?, s:o, "
	    "s:{s:o, s:o, s:o, s:o}}",
	    "id", pl->id, "status", plugin_status_name(pl->status), "reason",
	    pl->reason, "dir", pl->dir, "api_version",
	    pl->api_version ? json_integer(pl->api_version) : json_null(),
	    "description", pl->description, "version", pl->version, "requires",
	    strvec_json(&pl->requires), "provides", "pipelines", pipes,
	    "prompts", prompts, "kinds", kinds, "hooks", hooks);
}
