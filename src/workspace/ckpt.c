/*
 * A run's checkpoints on the shared remote (repo.url), so that the run
 * survives its host: another host fetches them and goes on where the run
 * stopped (engine/takeover.c).
 *
 *   refs/baton/checkpoints/<run>   the run's last checkpoint commit
 *   refs/baton/run-files/<run>     a commit of the run folder's files
 *                                  (plan.md, review.md, ...): what the
 *                                  later stages read
 *
 * Both are pushed by commit id to an explicit ref, through the common git
 * directory with baton's own git (git.c: no hook, no fsmonitor, no
 * replace refs; and no submodule recursion): nothing of a run's worktree (its .git file, its admin
 * directory, a ref the agent made) is asked what to push or where. The
 * run folder's files are read without following links and only regular
 * files are kept; on the way back only regular files with plain names are
 * written, never over a file that is there.
 */
#include "util/compat.h"

#include <dirent.h>
#include <sys/stat.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/log.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"
#include "workspace/workspace_int.h"

#define GIT_TIMEOUT_MS (120 * 1000)
/* The run-files commit has a fixed date, so the same files make the
 * same commit and pushing them again is a no-op. */
#define FILES_DATE "GIT_COMMITTER_DATE=1970-01-01T00:00:00Z"
#define FILES_ADATE "GIT_AUTHOR_DATE=1970-01-01T00:00:00Z"

/* Run-folder entries that belong to one host and never travel. */
static const char *const host_own[] = {
	"lock", "port", "events.jsonl", "branch.base", NULL,
};

/*
 * baton's git on the common git directory with the arguments of argv
 * (after "git" and baton's options); in: stdin (may be NULL); env: more
 * "K=V" (may be NULL). stdout into out (may be NULL; trimmed unless
 * raw), stderr's tail into errout (may be NULL). 0 when git exits 0;
 * BATON_ECHILD naming the command and what git said otherwise.
 */
static int
run_git_raw(const struct workspace *ws, const char *const *argv,
	    const char *in, const char *const *env, struct buf *out,
	    struct buf *errout, int raw, struct err *e)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct git_at at = { .in = in };
	int rc;

	workspace__git_start(ws, &at, &o);
	strvec_pushv(&o.argv, argv);
	if (env)
		strvec_pushv(&o.env, env);
	o.timeout_ms = GIT_TIMEOUT_MS;
	o.tail_max = BUF_MAX_GIT_OUTPUT;
	rc = spawn_run(&o, &r, e);
	if (rc < 0)
		goto out;
	buf_rtrim(&r.err);
	if (errout)
		buf_add(errout, r.err.ptr, r.err.len);
	if (r.timed_out)
		rc = err_set(e, BATON_ETIMEDOUT, "'git %s' timed out after "
			     "%d s", argv[0], GIT_TIMEOUT_MS / 1000);
	else if (r.status)
		rc = err_set(e, BATON_ECHILD, "'git %s' failed (exit %d): %s",
			     argv[0], r.status,
			     r.err.len ? r.err.ptr : "(no message)");
	else if (out) {
		buf_add(out, r.out.ptr, r.out.len);
		if (!raw)
			buf_rtrim(out);
	}
out:
	spawn_result_release(&r);
	spawn_opts_release(&o);
	return rc;
}

/* run_git_raw, its output trimmed. */
static int
run_git(const struct workspace *ws, const char *const *argv, const char *in,
	const char *const *env, struct buf *out, struct buf *errout,
	struct err *e)
{
	return run_git_raw(ws, argv, in, env, out, errout, 0, e);
}

/* 1 when s is a full object id (hex, SHA-1 or SHA-256 long). */
static int
is_object_id(const char *s)
{
	size_t n = s ? strspn(s, "0123456789abcdef") : 0;

	return s && !s[n] && (n == 40 || n == 64);
}

/* 1 when id can name a ref of its own: a run id, never a path. */
static int
ref_safe(const char *id)
{
	size_t n = id ? strspn(id, "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") :
			0;

	return id && n && !id[n];
}

static int
bad_run(const char *run_id, struct err *e)
{
	return err_set(e, BATON_EINVAL, "'%s' cannot name a checkpoint ref",
		       run_id ? run_id : "(null)");
}

char *
ckpt_ref(const char *run_id)
{
	return xasprintf("refs/baton/checkpoints/%s", run_id);
}

static char *
files_ref(const char *run_id)
{
	return xasprintf("refs/baton/run-files/%s", run_id);
}

int
ckpt_push(const struct workspace *ws, const char *url, const char *run_id,
	  const char *commit, const char *files, const char *expect,
	  struct err *e)
{
	char *ref = ckpt_ref(run_id), *fref = files_ref(run_id);
	char *spec = NULL, *fspec = NULL, *lease = NULL;
	int rc;

	if (!ref_safe(run_id)) {
		rc = bad_run(run_id, e);
		goto out;
	}
	if (!is_object_id(commit) || (files && !is_object_id(files)) ||
	    (expect && !is_object_id(expect))) {
		rc = err_set(e, BATON_EINVAL, "cannot push checkpoint '%s' of "
			     "run '%s': not a commit id",
			     commit ? commit : "(null)", run_id);
		goto out;
	}
	/* the lease, not a '+' (which would override it), lets the ref
	 * move anywhere from where we expect it, and nowhere else; the
	 * files go with it or not at all */
	lease = xasprintf("--force-with-lease=%s:%s", ref,
			  expect ? expect : "");
	spec = xasprintf("%s:%s", commit, ref);
	fspec = files ? xasprintf("+%s:%s", files, fref) : NULL;
	{
		const char *argv[] = { "push", "--quiet", "--no-verify",
				       "--no-recurse-submodules", "--atomic",
				       lease, url, spec, fspec, NULL };

		rc = run_git(ws, argv, NULL, NULL, NULL, NULL, e);
	}
	if (rc < 0)
		err_prefix(e, "cannot push checkpoint %.12s of run '%s' to '%s' "
			   "(its ref expected at %.12s)",
			   commit, run_id, url, expect ? expect : "none");
out:
	free(lease);
	free(spec);
	free(fspec);
	free(ref);
	free(fref);
	return rc;
}

/*
 * What url has at the run's two refs: *tip and *files (caller frees;
 * NULL when the ref is not there). Errors when url cannot be read.
 */
static int
remote_refs(const struct workspace *ws, const char *url, const char *run_id,
	    char **tip, char **files, struct err *e)
{
	char *ref = ckpt_ref(run_id), *fref = files_ref(run_id);
	const char *argv[] = { "ls-remote", "--refs", url, ref, fref, NULL };
	struct buf out = BUF_INIT;
	char *line, *save = NULL;
	int rc;

	*tip = *files = NULL;
	rc = run_git(ws, argv, NULL, NULL, &out, NULL, e);
	for (line = rc ? NULL : strtok_r(out.ptr, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *tab = strchr(line, '\t');

		if (!tab)
			continue;
		*tab = '\0';
		if (!is_object_id(line))
			continue;
		if (!strcmp(tab + 1, ref) && !*tip)
			*tip = xstrdup(line);
		else if (!strcmp(tab + 1, fref) && !*files)
			*files = xstrdup(line);
	}
	if (rc < 0)
		err_prefix(e, "cannot read the checkpoints of run '%s' at '%s'",
			   run_id, url);
	buf_release(&out);
	free(ref);
	free(fref);
	return rc;
}

int
ckpt_remote_tip(const struct workspace *ws, const char *url,
		const char *run_id, char **tip_out, struct err *e)
{
	char *files = NULL;
	int rc;

	*tip_out = NULL;
	if (!ref_safe(run_id))
		return bad_run(run_id, e);
	rc = remote_refs(ws, url, run_id, tip_out, &files, e);
	free(files);
	return rc;
}

int
ckpt_fetch(const struct workspace *ws, const char *url, const char *run_id,
	   char **tip_out, char **files_out, struct err *e)
{
	char *tip = NULL, *files = NULL, *spec = NULL, *fspec = NULL;
	char *ref = ckpt_ref(run_id), *fref = files_ref(run_id);
	int rc;

	if (!ref_safe(run_id)) {
		rc = bad_run(run_id, e);
		goto out;
	}
	rc = remote_refs(ws, url, run_id, &tip, &files, e);
	if (rc)
		goto out;
	if (!tip) {
		rc = err_set(e, BATON_ENOTFOUND, "'%s' has no checkpoint of "
			     "run '%s' (%s)", url, run_id, ref);
		goto out;
	}
	/* the ids ls-remote gave, into refs of the same names here */
	spec = xasprintf("+%s:%s", ref, ref);
	fspec = files ? xasprintf("+%s:%s", fref, fref) : NULL;
	{
		const char *argv[] = { "fetch", "--quiet",
				       "--no-write-fetch-head", "--no-tags",
				       "--no-recurse-submodules", url, spec,
				       fspec, NULL };

		rc = run_git(ws, argv, NULL, NULL, NULL, NULL, e);
	}
	if (rc < 0) {
		err_prefix(e, "cannot fetch the checkpoint of run '%s' from "
			   "'%s'", run_id, url);
		goto out;
	}
	/* what was fetched, which may have moved since ls-remote */
	free(tip);
	tip = NULL;
	rc = workspace_resolve(ws, ref, &tip, e);
	if (!rc && files) {
		free(files);
		files = NULL;
		rc = workspace_resolve(ws, fref, &files, e);
	}
	if (!rc && !tip)
		rc = err_set(e, BATON_ENOTFOUND, "the checkpoint of run '%s' "
			     "fetched from '%s' is not here", run_id, url);
	if (rc)
		goto out;
	*tip_out = tip;
	*files_out = files;
	tip = files = NULL;
out:
	free(tip);
	free(files);
	free(spec);
	free(fspec);
	free(ref);
	free(fref);
	return rc;
}

int
ckpt_contains(const struct workspace *ws, const char *tip, const char *commit)
{
	const char *argv[] = { "merge-base", "--is-ancestor", commit, tip,
			       NULL };
	struct err ignored = ERR_INIT;

	if (!is_object_id(tip) || !is_object_id(commit))
		return 0;
	return run_git(ws, argv, NULL, NULL, NULL, NULL, &ignored) == 0;
}

int
ckpt_forget(const struct workspace *ws, const char *url, const char *run_id,
	    struct err *e)
{
	char *tip = NULL, *files = NULL, *ref = ckpt_ref(run_id),
	     *fref = files_ref(run_id), *del = NULL, *fdel = NULL;
	struct err ignored = ERR_INIT;
	int rc = 0;

	if (!ref_safe(run_id)) {
		rc = bad_run(run_id, e);
		goto out;
	}
	{
		const char *argv[] = { "update-ref", "-d", ref, NULL };
		const char *fargv[] = { "update-ref", "-d", fref, NULL };

		run_git(ws, argv, NULL, NULL, NULL, NULL, &ignored);
		run_git(ws, fargv, NULL, NULL, NULL, NULL, &ignored);
	}
	if (!url)
		goto out;
	rc = remote_refs(ws, url, run_id, &tip, &files, e);
	if (rc || (!tip && !files))
		goto out;
	/* only what is there: git refuses to delete a ref that is not */
	del = tip ? xasprintf(":%s", ref) : NULL;
	fdel = files ? xasprintf(":%s", fref) : NULL;
	{
		const char *argv[] = { "push", "--quiet", "--no-verify",
				       "--no-recurse-submodules", url,
				       del ? del : fdel, del ? fdel : NULL,
				       NULL };

		rc = run_git(ws, argv, NULL, NULL, NULL, NULL, e);
	}
	if (rc < 0)
		err_prefix(e, "cannot delete the checkpoints of run '%s' at "
			   "'%s'", run_id, url);
out:
	free(tip);
	free(files);
	free(del);
	free(fdel);
	free(ref);
	free(fref);
	return rc;
}

/* 1 when name is a run-folder file that travels with the checkpoint. */
static int
travels(const char *name)
{
	size_t i;

	if (name[0] == '.' || strchr(name, '/') || strchr(name, '\n') ||
	    strchr(name, '\t'))
		return 0;
	for (i = 0; host_own[i]; i++)
		if (!strcmp(name, host_own[i]))
			return 0;
	return 1;
}

/* Adds name's file (read without following a link) to the tree lines. */
static int
add_file(const struct workspace *ws, const char *dir, const char *name,
	 struct buf *tree, struct err *e)
{
	char *path = xasprintf("%s/%s", dir, name);
	const char *argv[] = { "hash-object", "-w", "--no-filters", "--stdin",
			       NULL };
	struct buf text = BUF_INIT, id = BUF_INIT;
	struct stat st;
	int rc = 0;

	/* a link, a folder, a fifo: not a file of the run's */
	if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > BUF_MAX_ARTIFACT)
		goto out;
	if (fs_read_nofollow(path, &text, BUF_MAX_ARTIFACT, NULL) < 0)
		goto out;
	if (memchr(text.ptr, '\0', text.len)) /* stdin is text: skip it */
		goto out;
	rc = run_git(ws, argv, text.ptr, NULL, &id, NULL, e);
	if (!rc && is_object_id(id.ptr))
		buf_addf(tree, "100644 blob %s\t%s\n", id.ptr, name);
out:
	buf_release(&text);
	buf_release(&id);
	free(path);
	return rc;
}

int
ckpt_files_save(const struct workspace *ws, const char *run_dir,
		const char *run_id, char **commit_out, struct err *e)
{
	const char *env[] = { FILES_DATE, FILES_ADATE, NULL };
	const char *mktree[] = { "mktree", NULL };
	struct buf tree = BUF_INIT, id = BUF_INIT, commit = BUF_INIT;
	struct strvec names = STRVEC_INIT;
	struct dirent *de;
	char *msg = NULL;
	DIR *d = opendir(run_dir);
	size_t i;
	int rc = 0;

	if (!d) {
		rc = err_set(e, -errno, "cannot open '%s': %s", run_dir,
			     strerror(errno));
		goto out;
	}
	while ((de = readdir(d)))
		if (travels(de->d_name))
			strvec_push(&names, de->d_name);
	closedir(d);
	for (i = 0; !rc && i < names.nr; i++)
		rc = add_file(ws, run_dir, names.v[i], &tree, e);
	if (!rc)
		rc = run_git(ws, mktree, tree.ptr, NULL, &id, NULL, e);
	if (rc)
		goto out;
	msg = xasprintf("baton %s: run folder\n", run_id);
	{
		const char *argv[] = { "commit-tree", "--no-gpg-sign", id.ptr,
				       NULL };

		rc = run_git(ws, argv, msg, env, &commit, NULL, e);
	}
	if (!rc && !is_object_id(commit.ptr))
		rc = err_set(e, BATON_ECHILD, "git commit-tree gave '%.80s'",
			     commit.ptr);
	if (rc)
		goto out;
	*commit_out = buf_detach(&commit, NULL);
out:
	if (rc < 0)
		err_prefix(e, "cannot save the run folder of '%s'", run_id);
	strvec_clear(&names);
	buf_release(&tree);
	buf_release(&id);
	buf_release(&commit);
	free(msg);
	return rc;
}

/* Writes the blob id as dir/name unless a file is there: 1 when it
 * wrote it, 0 when one was there. */
static int
restore_one(const struct workspace *ws, const char *dir, const char *name,
	    const char *id, struct err *e)
{
	const char *argv[] = { "cat-file", "blob", id, NULL };
	char *path = xasprintf("%s/%s", dir, name);
	struct buf text = BUF_INIT;
	struct stat st;
	int rc = 0;

	if (lstat(path, &st) == 0)
		goto out; /* this host's own is newer */
	rc = run_git_raw(ws, argv, NULL, NULL, &text, NULL, 1, e);
	if (!rc)
		rc = fs_write_atomic(path, text.ptr, text.len, e);
	if (!rc)
		rc = 1;
out:
	buf_release(&text);
	free(path);
	return rc;
}

int
ckpt_files_restore(const struct workspace *ws, const char *files,
		   const char *run_dir, size_t *nr_out, struct err *e)
{
	const char *argv[] = { "ls-tree", "-z", files, NULL };
	struct buf out = BUF_INIT;
	size_t at = 0, nr = 0;
	int rc;

	*nr_out = 0;
	if (!is_object_id(files))
		return err_set(e, BATON_EINVAL, "'%s' is not a commit id",
			       files ? files : "(null)");
	rc = run_git_raw(ws, argv, NULL, NULL, &out, NULL, 1, e);
	if (!rc)
		rc = fs_mkdir_p(run_dir, 0755, e);
	/* "<mode> <type> <id>\t<name>\0" per entry */
	while (!rc && at < out.len) {
		char *entry = out.ptr + at, *tab, *sp;

		at += strlen(entry) + 1;
		tab = strchr(entry, '\t');
		sp = strchr(entry, ' ');
		if (!tab || !sp || strncmp(entry, "100644 blob ", 12))
			continue;
		*tab = '\0';
		if (!travels(tab + 1) || !is_object_id(entry + 12))
			continue;
		rc = restore_one(ws, run_dir, tab + 1, entry + 12, e);
		if (rc > 0) {
			nr++;
			rc = 0;
		}
	}
	if (rc < 0)
		err_prefix(e, "cannot restore the run folder '%s'", run_dir);
	else
		*nr_out = nr;
	buf_release(&out);
	return rc;
}
