/*
 * The worktree tools of baton's own agent: see tools.h.
 *
 * Each tool is a row of one table (name, description, JSON schema,
 * function); tools_schema() serves the table in either wire's shape and
 * tools_call() dispatches on it. Tools never trust a path: resolve()
 * turns what the model wrote into a real path inside the worktree or
 * refuses it, and the file is then opened by that real path, so a symlink
 * cannot lead a read or a write elsewhere.
 */
#include "util/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/tools.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/limits.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* Entries list shows. */
#define TOOLS_LIST_MAX 1000
/* Matches search shows, bytes of each matching line, files it opens. */
#define TOOLS_SEARCH_MAX   200
#define TOOLS_SEARCH_LINE  240
#define TOOLS_SEARCH_FILES 50000
#define TOOLS_SEARCH_DEPTH 64
/* A file with a NUL byte in its first this many bytes is binary. */
#define TOOLS_BINARY_PROBE 8192
/* run's default timeout. */
#define TOOLS_RUN_TIMEOUT 120

struct tool {
	const char *name;
	const char *description;
	const char *schema; /* JSON Schema of the arguments */
	int (*fn)(const struct tools_ctx *ctx, json_t *args, struct buf *out);
};

/* Appends the reason to out and returns -1, for "return fail(...)". */
static int __attribute__((format(printf, 2, 3)))
fail(struct buf *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vaddf(out, fmt, ap);
	va_end(ap);
	return -1;
}

/*
 * Reads string argument key into *val (borrowed from args). A missing
 * argument is an error only when required; *val is then NULL.
 */
static int
arg_str(json_t *args, const char *key, int required, const char **val,
	struct buf *out)
{
	json_t *v = json_object_get(args, key);

	*val = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return fail(out, "missing argument '%s'", key);
		return 0;
	}
	if (!json_is_string(v))
		return fail(out, "argument '%s' must be a string", key);
	*val = json_string_value(v);
	return 0;
}

/* Reads integer argument key into *val when present (else keeps it). */
static int
arg_int(json_t *args, const char *key, long long *val, struct buf *out)
{
	json_t *v = json_object_get(args, key);

	if (!v || json_is_null(v))
		return 0;
	if (json_is_real(v) &&
	    json_real_value(v) == (long long)json_real_value(v))
		*val = (long long)json_real_value(v);
	else if (json_is_integer(v))
		*val = json_integer_value(v);
	else
		return fail(out, "argument '%s' must be an integer", key);
	return 0;
}

/* 1 if p is root or lies below it. */
static int
is_under(const char *root, const char *p)
{
	size_t n = strlen(root);

	if (n == 1 && root[0] == '/')
		return p[0] == '/';
	return !strncmp(p, root, n) && (p[n] == '\0' || p[n] == '/');
}

/* 1 if one of the '/'-separated components of p is ".git". */
static int
has_git(const char *p)
{
	const char *s = p, *e;

	while (*s) {
		while (*s == '/')
			s++;
		e = strchrnul(s, '/');
		if (e - s == 4 && !memcmp(s, ".git", 4))
			return 1;
		s = e;
	}
	return 0;
}

/*
 * 1 when rel (a path below the worktree root, '/'-separated) lies in
 * baton's own folder: its first component is ".baton" and the root is a
 * repository baton serves (a planner works in the main checkout), where
 * .baton/ holds the store and the token. A worktree's own .baton/ holds
 * only what the project committed.
 */
static int
has_baton(const struct tools_ctx *ctx, const char *rel)
{
	char *token;
	int yes;

	while (*rel == '/')
		rel++;
	if (strncmp(rel, ".baton", 6) || (rel[6] && rel[6] != '/'))
		return 0;
	token = xasprintf("%s/.baton/token", ctx->cwd);
	yes = access(token, F_OK) == 0;
	free(token);
	if (!yes) {
		token = xasprintf("%s/.baton/baton.db", ctx->cwd);
		yes = access(token, F_OK) == 0;
		free(token);
	}
	return yes;
}

/*
 * The absolute path p with "." and empty components removed and each
 * ".." taking away the component before it, lexically. A ".." after a
 * symlink thus goes back to the link's parent rather than its target's;
 * the tools open the path this gives, so the two cannot disagree.
 */
static void
normalize(const char *p, struct buf *out)
{
	const char *s = p, *e;
	char *slash;
	size_t len;

	buf_reset(out);
	while (*s) {
		while (*s == '/')
			s++;
		if (!*s)
			break;
		e = strchrnul(s, '/');
		len = (size_t)(e - s);
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			slash = strrchr(out->ptr, '/');
			if (slash)
				buf_setlen(out, (size_t)(slash - out->ptr));
		} else if (!(len == 1 && s[0] == '.')) {
			buf_addch(out, '/');
			buf_add(out, s, len);
		}
		s = e;
	}
	if (!out->len)
		buf_addch(out, '/');
}

/*
 * Turns path, as the model wrote it, into the real absolute path it names
 * inside the worktree, in res. The longest prefix that exists goes
 * through realpath(), which resolves every symlink in it; the rest does
 * not exist yet, so it holds no symlink and, once normalized, no "..".
 * Returns 0, or -1 with the reason in out: outside the worktree (directly
 * or through a symlink), a dangling symlink, under .git, or in baton's
 * own .baton/ (has_baton).
 */
int
tools_resolve(const struct tools_ctx *ctx, const char *path, struct buf *res,
	      struct buf *out)
{
	struct buf full = BUF_INIT, norm = BUF_INIT;
	char *real = NULL, *slash, save;
	struct stat st;
	size_t cut;
	int rc = -1, errnum;

	if (!*path) {
		fail(out, "the path is empty");
		goto out;
	}
	if (path[0] == '/')
		buf_adds(&full, path);
	else
		buf_addf(&full, "%s/%s", ctx->cwd, path);
	normalize(full.ptr, &norm);
	cut = norm.len;
	for (;;) {
		if (!cut) {
			real = xstrdup("/");
			break;
		}
		save = norm.ptr[cut];
		norm.ptr[cut] = '\0';
		real = realpath(norm.ptr, NULL);
		errnum = errno;
		if (!real && errnum == ENOENT && lstat(norm.ptr, &st) == 0 &&
		    S_ISLNK(st.st_mode)) {
			norm.ptr[cut] = save;
			fail(out,
			     "'%s' goes through a symlink to a path that does "
			     "not exist",
			     path);
			goto out;
		}
		norm.ptr[cut] = save;
		if (real)
			break;
		if (errnum != ENOENT) {
			fail(out, "cannot resolve '%s': %s", path,
			     strerror(errnum));
			goto out;
		}
		slash = memrchr(norm.ptr, '/', cut);
		cut = slash ? (size_t)(slash - norm.ptr) : 0;
	}
	buf_reset(res);
	if (strcmp(real, "/"))
		buf_adds(res, real);
	buf_adds(res, norm.ptr + cut);
	if (!res->len)
		buf_addch(res, '/');
	if (!is_under(ctx->cwd, res->ptr)) {
		if (is_under(ctx->cwd, norm.ptr))
			fail(out,
			     "'%s' is outside the worktree (a symlink leads "
			     "to '%s')",
			     path, real);
		else
			fail(out, "'%s' is outside the worktree", path);
		goto out;
	}
	if (has_git(res->ptr + strlen(ctx->cwd))) {
		fail(out, "'%s' is under .git, which the tools may not touch",
		     path);
		goto out;
	}
	if (has_baton(ctx, res->ptr + strlen(ctx->cwd))) {
		fail(out, "'%s' is in baton's own folder .baton/, which the "
			  "tools may not touch",
		     path);
		goto out;
	}
	rc = 0;
out:
	free(real);
	buf_release(&norm);
	buf_release(&full);
	return rc;
}

/*
 * Loads the regular file real (named shown in messages) into data.
 * Returns 0, or -1 with the reason in out.
 */
static int
load(const char *real, const char *shown, struct buf *data, struct buf *out)
{
	struct err e = ERR_INIT;
	struct stat st;

	if (stat(real, &st) < 0) {
		if (errno == ENOENT)
			return fail(out, "'%s' does not exist", shown);
		return fail(out, "cannot read '%s': %s", shown,
			    strerror(errno));
	}
	if (S_ISDIR(st.st_mode))
		return fail(out, "'%s' is a directory; use list", shown);
	if (!S_ISREG(st.st_mode))
		return fail(out, "'%s' is not a regular file", shown);
	if (st.st_size > TOOLS_FILE_MAX)
		return fail(out,
			    "'%s' is %lld bytes, more than the %d the tools "
			    "load; use search, or run head or sed",
			    shown, (long long)st.st_size, TOOLS_FILE_MAX);
	if (fs_read(real, data, TOOLS_FILE_MAX, &e) < 0)
		return fail(out, "cannot read '%s': %s", shown, e.msg);
	return 0;
}

/* 1 if the first TOOLS_BINARY_PROBE bytes of data hold a NUL. */
static int
is_binary(const char *data, size_t len)
{
	return memchr(data, '\0',
		      len < TOOLS_BINARY_PROBE ? len : TOOLS_BINARY_PROBE) !=
	       NULL;
}

/*
 * Replaces the contents of real with data, keeping the file's mode. The
 * path is real (no symlink in it), and O_NOFOLLOW keeps it so.
 */
static int
store(const char *real, const char *shown, const char *data, size_t len,
      struct buf *out)
{
	int fd, rc;

	fd = open(real, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		  0644);
	if (fd < 0)
		return fail(out, "cannot write '%s': %s", shown,
			    strerror(errno));
	rc = fs_write_all(fd, data, len);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc)
		return fail(out, "cannot write '%s': %s", shown, strerror(-rc));
	return 0;
}

/* Number of '\n' in data[0..len). */
static size_t
count_lines(const char *data, size_t len)
{
	size_t n = 0;
	const char *p = data, *end = data + len;

	while (p < end) {
		p = memchr(p, '\n', (size_t)(end - p));
		if (!p)
			break;
		n++;
		p++;
	}
	return n;
}

/* Position of the start of line n (1-based) in data, or len. */
static size_t
line_start(const char *data, size_t len, long long n)
{
	const char *p = data, *end = data + len;

	while (--n > 0 && p < end) {
		p = memchr(p, '\n', (size_t)(end - p));
		if (!p)
			return len;
		p++;
	}
	return (size_t)(p - data);
}

static int
tool_read_file(const struct tools_ctx *ctx, json_t *args, struct buf *out)
{
	struct buf res = BUF_INIT, data = BUF_INIT;
	long long offset = 1, limit = 0, last;
	size_t nlines, start, end;
	const char *path, *nl;
	int rc = -1;

	if (arg_str(args, "path", 1, &path, out) < 0 ||
	    arg_int(args, "offset", &offset, out) < 0 ||
	    arg_int(args, "limit", &limit, out) < 0)
		goto out;
	if (offset < 1 || limit < 0) {
		fail(out, "offset must be 1 or more and limit 0 or more");
		goto out;
	}
	if (tools_resolve(ctx, path, &res, out) < 0 ||
	    load(res.ptr, path, &data, out) < 0)
		goto out;
	if (is_binary(data.ptr, data.len)) {
		fail(out, "'%s' is a binary file (%zu bytes)", path, data.len);
		goto out;
	}
	if (!data.len) {
		buf_adds(out, "(empty file)\n");
		rc = 0;
		goto out;
	}
	nlines =
	    count_lines(data.ptr, data.len) + (data.ptr[data.len - 1] != '\n');
	if ((size_t)offset > nlines) {
		fail(out, "'%s' has %zu lines; offset %lld is past its end",
		     path, nlines, offset);
		goto out;
	}
	start = line_start(data.ptr, data.len, offset);
	end = limit ? start + line_start(data.ptr + start, data.len - start,
					 limit + 1)
		    : data.len;
	if (end - start <= TOOLS_READ_MAX) {
		buf_add(out, data.ptr + start, end - start);
		rc = 0;
		goto out;
	}
	/* Cut at the last whole line that fits (a huge line is cut). */
	nl = memrchr(data.ptr + start, '\n', TOOLS_READ_MAX);
	end = nl ? (size_t)(nl - data.ptr) + 1 : start + TOOLS_READ_MAX;
	buf_add(out, data.ptr + start, end - start);
	last = offset + (long long)count_lines(data.ptr + start, end - start);
	if (!nl)
		buf_addch(out, '\n');
	else
		last--;
	buf_addf(out,
		 "[truncated at %d KiB: lines %lld-%lld of %zu shown; read on "
		 "with offset=%lld]\n",
		 TOOLS_READ_MAX / 1024, offset, last, nlines, last + 1);
	rc = 0;
out:
	buf_release(&data);
	buf_release(&res);
	return rc;
}

static int
tool_write_file(const struct tools_ctx *ctx, json_t *args, struct buf *out)
{
	struct buf res = BUF_INIT;
	struct err e = ERR_INIT;
	const char *path, *content;
	char *parent = NULL, *slash;
	size_t len;
	int rc = -1, existed;

	if (arg_str(args, "path", 1, &path, out) < 0 ||
	    arg_str(args, "content", 1, &content, out) < 0)
		goto out;
	len = json_string_length(json_object_get(args, "content"));
	if (tools_resolve(ctx, path, &res, out) < 0)
		goto out;
	if (fs_is_dir(res.ptr)) {
		fail(out, "'%s' is a directory", path);
		goto out;
	}
	existed = fs_exists(res.ptr);
	parent = xstrdup(res.ptr);
	slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		if (fs_mkdir_p(parent, 0755, &e) < 0) {
			fail(out, "cannot create the parents of '%s': %s", path,
			     e.msg);
			goto out;
		}
	}
	if (store(res.ptr, path, content, len, out) < 0)
		goto out;
	buf_addf(out, "wrote %zu bytes to %s%s\n", len, path,
		 existed ? "" : " (new file)");
	rc = 0;
out:
	free(parent);
	buf_release(&res);
	return rc;
}

static int
tool_edit(const struct tools_ctx *ctx, json_t *args, struct buf *out)
{
	struct buf res = BUF_INIT, data = BUF_INIT, next = BUF_INIT;
	const char *path, *old, *new, *p, *at = NULL, *end;
	size_t olen, nlen;
	int rc = -1, found = 0;

	if (arg_str(args, "path", 1, &path, out) < 0 ||
	    arg_str(args, "old", 1, &old, out) < 0 ||
	    arg_str(args, "new", 1, &new, out) < 0 || !old || !new)
		goto out;
	olen = json_string_length(json_object_get(args, "old"));
	nlen = json_string_length(json_object_get(args, "new"));
	if (!olen) {
		fail(out, "old is empty; use write_file to create a file");
		goto out;
	}
	if (tools_resolve(ctx, path, &res, out) < 0 ||
	    load(res.ptr, path, &data, out) < 0)
		goto out;
	end = data.ptr + data.len;
	for (p = data.ptr; p < end; p += olen) {
		p = memmem(p, (size_t)(end - p), old, olen);
		if (!p)
			break;
		if (!found++)
			at = p;
	}
	if (found != 1) {
		if (!found)
			fail(out,
			     "old was not found in '%s'; it must match the "
			     "file exactly, whitespace included",
			     path);
		else
			fail(out,
			     "old was found %d times in '%s'; include more "
			     "of the text around it so that it matches once",
			     found, path);
		goto out;
	}
	buf_add(&next, data.ptr, (size_t)(at - data.ptr));
	buf_add(&next, new, nlen);
	buf_add(&next, at + olen, (size_t)(end - at - olen));
	if (store(res.ptr, path, next.ptr, next.len, out) < 0)
		goto out;
	buf_addf(out, "replaced 1 occurrence in %s\n", path);
	rc = 0;
out:
	buf_release(&next);
	buf_release(&data);
	buf_release(&res);
	return rc;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The names in directory path (real), sorted, without ".", ".." and
 * ".git"; directories get a trailing '/' when mark_dirs.
 */
static int
read_dir(const char *real, const char *shown, int mark_dirs,
	 struct strvec *names, struct buf *out)
{
	struct dirent *de;
	struct stat st;
	DIR *d;

	d = opendir(real);
	if (!d) {
		if (errno == ENOTDIR)
			return fail(out, "'%s' is a file; use read_file",
				    shown);
		if (errno == ENOENT)
			return fail(out, "'%s' does not exist", shown);
		return fail(out, "cannot list '%s': %s", shown,
			    strerror(errno));
	}
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, ".git"))
			continue;
		if (mark_dirs &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
			0 &&
		    S_ISDIR(st.st_mode))
			strvec_pushf(names, "%s/", de->d_name);
		else
			strvec_push(names, de->d_name);
	}
	closedir(d);
	qsort(names->v, names->nr, sizeof(*names->v), cmp_str);
	return 0;
}

static int
tool_list(const struct tools_ctx *ctx, json_t *args, struct buf *out)
{
	struct strvec names = STRVEC_INIT;
	struct buf res = BUF_INIT;
	const char *path;
	size_t i;
	int rc = -1;

	if (arg_str(args, "path", 0, &path, out) < 0)
		goto out;
	if (!path || !*path)
		path = ".";
	if (tools_resolve(ctx, path, &res, out) < 0 ||
	    read_dir(res.ptr, path, 1, &names, out) < 0)
		goto out;
	for (i = 0; i < names.nr && i < TOOLS_LIST_MAX; i++)
		buf_addf(out, "%s\n", names.v[i]);
	if (names.nr > TOOLS_LIST_MAX)
		buf_addf(out, "[%zu more entries not shown]\n",
			 names.nr - TOOLS_LIST_MAX);
	if (!names.nr)
		buf_adds(out, "(empty directory)\n");
	rc = 0;
out:
	strvec_clear(&names);
	buf_release(&res);
	return rc;
}

struct search {
	size_t root_len; /* strlen of the worktree root */
	const char *pat;
	size_t pat_len;
	struct buf *out;
	int matches, files;
	int full; /* a cap was reached: stop */
};

/* Appends the matching lines of file abs to s->out. */
static void
search_file(struct search *s, const char *abs)
{
	struct buf data = BUF_INIT;
	const char *p, *end, *nl, *rel = abs + s->root_len;
	size_t len, lineno = 0;

	if (++s->files > TOOLS_SEARCH_FILES) {
		buf_addf(s->out, "[stopped after %d files]\n",
			 TOOLS_SEARCH_FILES);
		s->full = 1;
		return;
	}
	if (*rel == '/')
		rel++;
	if (fs_read(abs, &data, TOOLS_FILE_MAX, NULL) < 0 ||
	    is_binary(data.ptr, data.len))
		goto out;
	end = data.ptr + data.len;
	for (p = data.ptr; p < end && !s->full; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			nl = end;
		lineno++;
		len = (size_t)(nl - p);
		if (!memmem(p, len, s->pat, s->pat_len))
			continue;
		if (len && p[len - 1] == '\r')
			len--;
		if (len > TOOLS_SEARCH_LINE)
			buf_addf(s->out, "%s:%zu: %.*s...\n", rel, lineno,
				 TOOLS_SEARCH_LINE, p);
		else
			buf_addf(s->out, "%s:%zu: %.*s\n", rel, lineno,
				 (int)len, p);
		if (++s->matches >= TOOLS_SEARCH_MAX) {
			buf_addf(s->out,
				 "[stopped at %d matches; narrow the pattern "
				 "or the path]\n",
				 TOOLS_SEARCH_MAX);
			s->full = 1;
		}
	}
out:
	buf_release(&data);
}

/*
 * Searches directory abs (a buffer, restored on return) and below, in
 * sorted order. Symlinks are skipped: a link to a file inside the
 * worktree is found under its own name, a link outside must not be read.
 */
static void
search_dir(struct search *s, struct buf *abs, int depth)
{
	struct strvec names = STRVEC_INIT;
	struct buf ignored = BUF_INIT;
	size_t i, len = abs->len;
	struct stat st;

	if (depth > TOOLS_SEARCH_DEPTH ||
	    read_dir(abs->ptr, abs->ptr, 0, &names, &ignored) < 0)
		goto out;
	for (i = 0; i < names.nr && !s->full; i++) {
		buf_setlen(abs, len);
		buf_addf(abs, "/%s", names.v[i]);
		if (lstat(abs->ptr, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			search_dir(s, abs, depth + 1);
		else if (S_ISREG(st.st_mode))
			search_file(s, abs->ptr);
	}
out:
	buf_setlen(abs, len);
	buf_release(&ignored);
	strvec_clear(&names);
}

static int
tool_search(const struct tools_ctx *ctx, json_t *args, struct buf *out)
{
	struct search s = { .out = out };
	struct buf res = BUF_INIT;
	const char *path;
	struct stat st;
	int rc = -1;

	if (arg_str(args, "pattern", 1, &s.pat, out) < 0 || !s.pat ||
	    arg_str(args, "path", 0, &path, out) < 0)
		goto out;
	s.pat_len = json_string_length(json_object_get(args, "pattern"));
	if (!s.pat_len) {
		fail(out, "pattern is empty");
		goto out;
	}
	if (!path || !*path)
		path = ".";
	if (tools_resolve(ctx, path, &res, out) < 0)
		goto out;
	if (stat(res.ptr, &st) < 0) {
		fail(out, "'%s' does not exist", path);
		goto out;
	}
	s.root_len = strlen(ctx->cwd);
	if (S_ISDIR(st.st_mode))
		search_dir(&s, &res, 0);
	else
		search_file(&s, res.ptr);
	if (!s.matches)
		buf_addf(out, "no matches for '%s' in %s\n", s.pat, path);
	rc = 0;
out:
	buf_release(&res);
	return rc;
}

static int
tool_run(const struct tools_ctx *ctx, json_t *args, struct buf *out)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result res = SPAWN_RESULT_INIT;
	struct strvec argv = STRVEC_INIT;
	struct err e = ERR_INIT;
	long long secs = TOOLS_RUN_TIMEOUT, left;
	json_t *jargv = json_object_get(args, "argv"), *v;
	size_t i;
	int rc = -1;

	if (!json_is_array(jargv) || !json_array_size(jargv)) {
		fail(out, "argument 'argv' must be a non-empty array of "
			  "strings, the program first");
		goto out;
	}
	json_array_foreach(jargv, i, v)
	{
		if (!json_is_string(v)) {
			fail(out, "argv[%zu] is not a string", i);
			goto out;
		}
		strvec_push(&argv, json_string_value(v));
	}
	if (arg_int(args, "timeout_seconds", &secs, out) < 0)
		goto out;
	if (secs <= 0 || secs > 24 * 3600) {
		fail(out, "timeout_seconds must be between 1 and 86400");
		goto out;
	}
	o.timeout_ms = (int)(secs * 1000);
	if (ctx->deadline_ms) {
		left = ctx->deadline_ms - time_mono_ms();
		if (left <= 0) {
			fail(out, "no time is left to run '%s'", argv.v[0]);
			goto out;
		}
		if (left < o.timeout_ms)
			o.timeout_ms = (int)left;
	}
	sandbox_wrap(ctx->sandbox, &argv, &o.argv);
	if (ctx->env)
		strvec_pushv(&o.env, ctx->env->v);
	o.cwd = ctx->cwd;
	o.merge_err = 1;
	o.tail_max = TOOLS_RUN_TAIL;
	o.wake_fd = ctx->wake_fd;
	o.tick_ms = ctx->tick_ms;
	o.on_event = ctx->on_event;
	o.arg = ctx->arg;
	if (spawn_run(&o, &res, &e) < 0) {
		fail(out, "%s", e.msg);
		goto out;
	}
	if (res.stopped) {
		fail(out, "'%s' was stopped", argv.v[0]);
		goto out;
	}
	if (res.timed_out)
		buf_addf(out, "exit %d (timed out after %d s)\n", res.status,
			 (o.timeout_ms + 999) / 1000);
	else
		buf_addf(out, "exit %d\n", res.status);
	if (res.out_bytes > res.out.len)
		buf_addf(out, "[output: the last %zu of %llu bytes]\n",
			 res.out.len, (unsigned long long)res.out_bytes);
	buf_add(out, res.out.ptr, res.out.len);
	rc = res.status == 0 && !res.timed_out ? 0 : -1;
out:
	spawn_result_release(&res);
	spawn_opts_release(&o);
	strvec_clear(&argv);
	return rc;
}

static const struct tool tools[] = {
	{
	    .name = "read_file",
	    .description =
		"Read a text file of the worktree. Returns its lines "
		"as they are (at most 256 KiB; a longer answer says "
		"how to read on). offset is the first line (from 1), "
		"limit the number of lines.",
	    .schema = "{\"type\":\"object\",\"properties\":{"
		      "\"path\":{\"type\":\"string\",\"description\":"
		      "\"relative to the worktree\"},"
		      "\"offset\":{\"type\":\"integer\",\"minimum\":1},"
		      "\"limit\":{\"type\":\"integer\",\"minimum\":1}},"
		      "\"required\":[\"path\"]}",
	    .fn = tool_read_file,
	},
	{
	    .name = "write_file",
	    .description = "Create or replace a file of the worktree "
			   "with content, creating missing parent "
			   "directories.",
	    .schema = "{\"type\":\"object\",\"properties\":{"
		      "\"path\":{\"type\":\"string\"},"
		      "\"content\":{\"type\":\"string\"}},"
		      "\"required\":[\"path\",\"content\"]}",
	    .fn = tool_write_file,
	},
	{
	    .name = "edit",
	    .description =
		"Replace text in a file: old must occur exactly once "
		"in it, matching whitespace exactly; it is replaced "
		"by new.",
	    .schema = "{\"type\":\"object\",\"properties\":{"
		      "\"path\":{\"type\":\"string\"},"
		      "\"old\":{\"type\":\"string\"},"
		      "\"new\":{\"type\":\"string\"}},"
		      "\"required\":[\"path\",\"old\",\"new\"]}",
	    .fn = tool_edit,
	},
	{
	    .name = "list",
	    .description = "List a directory of the worktree (default: "
			   "its root), sorted; directories end in '/'.",
	    .schema = "{\"type\":\"object\",\"properties\":{"
		      "\"path\":{\"type\":\"string\"}}}",
	    .fn = tool_list,
	},
	{
	    .name = "search",
	    .description = "Search the files under path (default: the whole "
			   "worktree) for a fixed string. Returns "
			   "\"file:line: text\" lines, at most 200.",
	    .schema = "{\"type\":\"object\",\"properties\":{"
		      "\"pattern\":{\"type\":\"string\"},"
		      "\"path\":{\"type\":\"string\"}},"
		      "\"required\":[\"pattern\"]}",
	    .fn = tool_search,
	},
	{
	    .name = "run",
	    .description =
		"Run a program in the worktree root, without a shell: "
		"argv is the program and its arguments (use "
		"[\"sh\",\"-c\",\"...\"] for a shell). Returns \"exit "
		"N\" and the end of its output (stdout and stderr). "
		"Default timeout 120 s.",
	    .schema = "{\"type\":\"object\",\"properties\":{"
		      "\"argv\":{\"type\":\"array\",\"items\":"
		      "{\"type\":\"string\"},\"minItems\":1},"
		      "\"timeout_seconds\":{\"type\":\"integer\","
		      "\"minimum\":1}},"
		      "\"required\":[\"argv\"]}",
	    .fn = tool_run,
	},
};

json_t *
tools_schema(int anthropic)
{
	json_t *arr = json_array(), *schema;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(tools); i++) {
		schema = json_loads(tools[i].schema, 0, NULL);
		if (!schema)
			BUG("tool %s: bad schema", tools[i].name);
		if (anthropic)
			json_array_append_new(
			    arr,
			    json_pack("{s:s, s:s, s:o}", "name", tools[i].name,
				      "description", tools[i].description,
				      "input_schema", schema));
		else
			json_array_append_new(
			    arr, json_pack("{s:s, s:{s:s, s:s, s:o}}", "type",
					   "function", "function", "name",
					   tools[i].name, "description",
					   tools[i].description, "parameters",
					   schema));
	}
	return arr;
}

int
tools_call(const struct tools_ctx *ctx, const char *name, json_t *args,
	   struct buf *out)
{
	json_t *empty = NULL;
	size_t i;
	int rc;

	for (i = 0; i < ARRAY_SIZE(tools); i++)
		if (!strcmp(tools[i].name, name))
			break;
	if (i == ARRAY_SIZE(tools)) {
		buf_addf(out, "unknown tool '%s'; the tools are", name);
		for (i = 0; i < ARRAY_SIZE(tools); i++)
			buf_addf(out, "%s %s", i ? "," : "", tools[i].name);
		return -1;
	}
	if (!args)
		args = empty = json_object();
	if (!json_is_object(args))
		rc = fail(out, "the arguments of %s must be a JSON object",
			  name);
	else
		rc = tools[i].fn(ctx, args, out);
	json_decref(empty);
	return rc;
}

/* Appends s up to its first newline, at most max bytes. */
static void
add_first_line(struct buf *line, const char *s, size_t max)
{
	size_t n = strcspn(s, "\n");

	if (n > max) {
		buf_add(line, s, max);
		buf_adds(line, "...");
	} else {
		buf_add(line, s, n);
	}
}

void
tools_describe(const char *name, json_t *args, int rc, const struct buf *out,
	       struct buf *line)
{
	const char *path = json_get_str(args, "path"), *pattern;
	json_t *argv = json_object_get(args, "argv"), *v;
	size_t i, start = line->len, n;

	buf_adds(line, name);
	if (!strcmp(name, "run") && json_is_array(argv)) {
		json_array_foreach(argv, i, v)
		{
			if (line->len - start > 80) {
				buf_adds(line, " ...");
				break;
			}
			if (json_is_string(v))
				buf_addf(line, " %s", json_string_value(v));
		}
	} else if (!strcmp(name, "search")) {
		pattern = json_get_str(args, "pattern");
		buf_addf(line, " '%s'", pattern ? pattern : "");
		if (path)
			buf_addf(line, " in %s", path);
	} else if (path) {
		buf_addf(line, " %s", path);
	}
	buf_adds(line, ": ");
	if (rc < 0)
		buf_adds(line, "failed: ");
	n = count_lines(out->ptr, out->len);
	if (rc == 0 && !strcmp(name, "read_file"))
		buf_addf(line, "%zu bytes", out->len);
	else if (rc == 0 && !strcmp(name, "list") && out->ptr[0] == '(')
		buf_adds(line, "empty");
	else if (rc == 0 && !strcmp(name, "list"))
		buf_addf(line, "%zu entr%s", n, n == 1 ? "y" : "ies");
	else if (rc == 0 && !strcmp(name, "search") &&
		 strncmp(out->ptr, "no matches", 10))
		buf_addf(line, "%zu lines", n);
	else
		add_first_line(line, out->ptr, 160);
}
