/*
 * baton clean [RUN...] [--older-than AGE] [--status LIST] [--dry-run]
 * [--yes] [--vacuum]: removes what ended runs leave behind — their
 * worktrees (after worktree_teardown hooks, engine_remove_worktree),
 * their branches (baton/<id>) and their run folders — and keeps, with
 * the reason, whatever is not safe to remove:
 *
 *   - a run that has not ended, or that a process drives (its lock);
 *   - a run a person looks at (serve's streams of it hold a shared
 *     flock on .baton/runs/<id>/watch, workspace_watch_begin);
 *   - a worktree with changes its branch does not hold (with it the
 *     branch and the folder);
 *   - a branch with commits on no remote and not in the run's base
 *     (with it the folder);
 *   - a worktree or run folder whose path is not baton's or is a link.
 *
 * --force removes the worktrees with changes and the branches with
 * unshared commits too, never anything else kept above.
 *
 * It lists first; it removes only with --yes, or after a yes on a
 * terminal (stdin not a terminal without --yes: a dry run). Each run is
 * removed under its lock, taken as a driver would (a resume meanwhile
 * fails as busy), and the watch lock, with everything judged again
 * under them. The records stay (a "run_cleaned" event says what went);
 * --vacuum compacts the store.
 */
#include "util/compat.h"

#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "engine/hooks.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* --force: uncommitted changes and unshared commits go too */
static int c_force;

/* What clean means to do with one run, and why. */
struct judged {
	char *keep;	/* why the whole run stays; NULL: not all of it */
	int worktree;	/* remove the worktree */
	int branch;	/* remove the branch (at tip) */
	int folder;	/* remove the run folder */
	char *tip;
	char *branch_why; /* why the branch (and folder) stay */
};

static void
judged_release(struct judged *j)
{
	free(j->keep);
	free(j->tip);
	free(j->branch_why);
	memset(j, 0, sizeof(*j));
}

/* "14d", "12h", "30m", "90s", "2w" into ms; -1 when bad. */
static int64_t
parse_age(const char *s)
{
	char *end;
	long long n;
	int64_t unit;

	if (!s || !*s || *s < '0' || *s > '9')
		return -1;
	n = strtoll(s, &end, 10);
	switch (*end) {
	case 's': unit = 1000; break;
	case 'm': unit = 60 * 1000; break;
	case 'h': unit = 3600 * 1000; break;
	case 'd': unit = 86400 * 1000LL; break;
	case 'w': unit = 7 * 86400 * 1000LL; break;
	default: return -1;
	}
	if (end[1] || n < 0 || n > INT64_MAX / unit)
		return -1;
	return n * unit;
}

/* A real directory (not a link) at path. */
static int
is_real_dir(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Anything at path, a dangling link included. */
static int
exists_here(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static int
id_ok(const char *id)
{
	return id && *id && !strchr(id, '/') && strcmp(id, ".") &&
	       strcmp(id, "..") && !strchr(id, '\n');
}

/*
 * Judges r (locked: under its locks, which must not be looked at again:
 * closing another descriptor of the run's lock file would drop it).
 * Fills *j; 0 when there is nothing at all left of it (then
 * it is not listed), 1 when there is.
 */
static int
judge(struct cli *c, const struct run *r, int locked, struct judged *j)
{
	struct err e = ERR_INIT;
	char *wt = NULL, *dir = NULL, *base = NULL, *base_ref = NULL;
	int has_wt, has_dir, dirty = 0, rc = 1, fd = -1;
	long ahead = 0;
	int64_t pid;

	memset(j, 0, sizeof(*j));
	if (!id_ok(r->id)) {
		j->keep = xstrdup("its id is no folder name");
		goto out;
	}
	wt = workspace_worktree_dir(&c->ws, r->id);
	dir = workspace_run_dir(&c->ws, r->id);
	has_wt = is_real_dir(wt);
	has_dir = is_real_dir(dir);
	/* merged: into the branch landings go to (merge.base_branch) */
	if (!worktree_base_branch(&c->ws, c->cfg.merge.base_branch, &base,
				  &e))
		base_ref = xasprintf("refs/heads/%s", base);
	e = (struct err)ERR_INIT;
	if (r->branch && branch_unshared(&c->ws, r->branch, base_ref,
					 &j->tip, &ahead, &e)) {
		j->keep = xasprintf("branch: %s", e.msg);
		goto out;
	}
	if (!has_wt && !has_dir && !j->tip && !fs_exists(wt) &&
	    !fs_exists(dir)) {
		rc = 0;
		goto out;
	}
	if (!status_is_terminal(r->status)) {
		j->keep = xasprintf("it has not ended (%s)", r->status);
		goto out;
	}
	pid = locked ? 0 : engine_driver_pid(&c->en, r->id);
	if (pid) {
		j->keep = xasprintf("pid %lld drives it", (long long)pid);
		goto out;
	}
	if (!locked && has_dir && workspace_watched(&c->ws, r->id, &fd)) {
		j->keep = xstrdup("someone is watching it (serve)");
		goto out;
	}
	workspace_watch_end(fd);
	if (fs_exists(wt) && !has_wt) {
		j->keep = xasprintf("its worktree '%s' is not a directory", wt);
		goto out;
	}
	if (r->worktree && strcmp(r->worktree, wt) && exists_here(r->worktree)) {
		j->keep = xasprintf("its worktree '%s' is not where baton puts "
				    "worktrees", r->worktree);
		goto out;
	}
	if (fs_exists(dir) && !has_dir) {
		j->keep = xasprintf("its folder '%s' is not a directory", dir);
		goto out;
	}
	if (has_wt && j->tip) {
		if (worktree_dirty(&c->ws, wt, &dirty, &e)) {
			j->keep = xstrdup(e.msg);
			goto out;
		}
		if (dirty && !c_force) {
			j->keep = xstrdup("its worktree has uncommitted changes");
			goto out;
		}
	} else if (has_wt) {
		j->keep = xstrdup("its worktree has no branch to compare with");
		goto out;
	}
	j->worktree = has_wt;
	if (j->tip && ahead > 0 && !c_force) {
		j->branch_why = xasprintf("%ld commit%s on no remote and not "
					  "merged into %s", ahead,
					  ahead == 1 ? "" : "s",
					  base ? base : "a base");
	} else {
		j->branch = j->tip != NULL;
		j->folder = has_dir;
	}
out:
	free(wt);
	free(dir);
	free(base);
	free(base_ref);
	return rc;
}

/* One line for the listing: what goes and what stays. */
static void
say(const struct run *r, const struct judged *j, int done)
{
	struct buf b = BUF_INIT;

	if (j->keep) {
		cli_printf("%s: keep: %s\n", r->id, j->keep);
		return;
	}
	if (j->worktree || j->branch || j->folder)
		buf_adds(&b, done ? "removed" : "remove");
	if (j->worktree)
		buf_adds(&b, " worktree");
	if (j->branch)
		buf_addf(&b, "%s branch %s", j->worktree ? "," : "",
			 r->branch);
	if (j->folder)
		buf_addf(&b, "%s run folder",
			 j->worktree || j->branch ? "," : "");
	if (j->branch_why)
		buf_addf(&b, "%skeep branch %s: %s", b.len ? "; " : "",
			 r->branch, j->branch_why);
	if (!b.len)
		buf_adds(&b, "nothing to remove");
	cli_printf("%s: %s (%s)\n", r->id, b.ptr, r->status);
	buf_release(&b);
}

/*
 * Removes what j says, under the run's lock and the watch lock, after
 * judging the run again under them. 0, or 1 when it was kept after all
 * (said), or an error.
 */
static int
remove_run(struct cli *c, const char *ref, struct err *e)
{
	struct run r = { 0 };
	struct judged j = { 0 };
	struct event ev = { 0 };
	char *dir = NULL, *path = NULL, *data = NULL;
	char type[] = "run_cleaned";
	int lock = -1, watch = -1, rc;

	rc = store_run_get(c->store, ref, &r, e);
	if (rc)
		return rc;
	if (!id_ok(r.id))
		goto judge;
	rc = engine_lock_idle(&c->en, r.id, &lock, e);
	if (rc == BATON_EBUSY) {
		cli_printf("%s: keep: %s\n", r.id, e->msg);
		*e = (struct err)ERR_INIT;
		rc = 1;
		goto out;
	}
	if (rc == BATON_ENOTFOUND) {
		*e = (struct err)ERR_INIT; /* no folder: judged as it is */
		rc = 0;
	}
	if (rc)
		goto out;
	if (lock >= 0 && workspace_watched(&c->ws, r.id, &watch)) {
		cli_printf("%s: keep: someone is watching it (serve)\n", r.id);
		rc = 1;
		goto out;
	}
	/* under the locks: what the store and the disk say now */
	run_release(&r);
	rc = store_run_get(c->store, ref, &r, e);
	if (rc)
		goto out;
judge:
	judge(c, &r, lock >= 0, &j);
	if (j.keep || (!j.worktree && !j.branch && !j.folder)) {
		say(&r, &j, 0);
		rc = 1;
		goto out;
	}
	if (j.worktree) {
		rc = engine_remove_worktree(&c->en, r.id, &path, e);
		if (rc)
			goto out;
	}
	if (j.branch) {
		rc = branch_delete(&c->ws, r.branch, j.tip, e);
		if (rc)
			goto out;
	}
	data = json_take_text(json_pack("{s:b, s:s?, s:b}", "worktree",
					j.worktree, "branch",
					j.branch ? r.branch : NULL, "folder",
					j.folder));
	ev.run_id = r.id;
	ev.task_id = r.task_id;
	ev.type = type;
	ev.data = data;
	rc = store_event_add(c->store, &ev, e);
	if (rc)
		goto out;
	if (j.folder) {
		dir = workspace_run_dir(&c->ws, r.id);
		rc = fs_remove_tree(dir, e);
		if (rc)
			goto out;
	}
	say(&r, &j, 1);
out:
	if (watch >= 0)
		workspace_watch_end(watch);
	if (lock >= 0)
		close(lock);
	free(dir);
	free(path);
	free(data);
	judged_release(&j);
	run_release(&r);
	return rc;
}

struct pick {
	struct cli *c;
	const char *statuses; /* NULL: every status */
	int64_t before;	      /* ended before this (ms); 0: any time */
	struct strvec ids;
};

static int
in_list(const char *list, const char *s)
{
	size_t n = strlen(s);
	const char *p = list;

	while (p && *p) {
		if (!strncmp(p, s, n) && (p[n] == ',' || !p[n]))
			return 1;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return 0;
}

static int
pick_one(const struct run *r, void *arg)
{
	struct pick *pk = arg;
	int64_t at = r->ended_at ? r->ended_at : r->updated_at;

	if (pk->statuses && !in_list(pk->statuses, r->status))
		return 0;
	if (!pk->statuses && !status_is_terminal(r->status))
		return 0; /* named runs and --status show live ones */
	if (pk->before && at > pk->before)
		return 0;
	strvec_push(&pk->ids, r->id);
	return 0;
}

static int
ask(void)
{
	char line[16];

	fprintf(stderr, "Remove them? [y/N] ");
	fflush(stderr);
	if (!fgets(line, sizeof(line), stdin))
		return 0;
	return line[0] == 'y' || line[0] == 'Y';
}

/* Whether a status of the comma-separated list is none a run can have;
 * says which. */
static int
bad_status(struct cli *c, const char *list)
{
	struct err e = ERR_INIT;
	char *copy = xstrdup(list), *st, *save = NULL;
	int bad = 0;

	for (st = strtok_r(copy, ",", &save); st && !bad;
	     st = strtok_r(NULL, ",", &save))
		if (engine_check_status(&c->en, st, &e)) {
			cli_error("--status: %s", e.msg);
			bad = 1;
		}
	free(copy);
	return bad;
}

static int
clean_exec(struct cli *c, int argc, char **argv)
{
	struct err e = ERR_INIT;
	struct pick pk = { .c = c, .ids = STRVEC_INIT };
	struct store_run_filter f = { 0 };
	const char *older = NULL, *status = NULL;
	int dry = 0, yes = 0, vacuum = 0;
	const struct cli_opt opts[] = {
		{ "--older-than=", NULL, &older },
		{ "--status=", NULL, &status },
		{ "--dry-run", &dry, NULL },
		{ "--yes", &yes, NULL },
		{ "--vacuum", &vacuum, NULL },
		{ "--force", &c_force, NULL },
	};
	int i, n, rc = EXIT_OK, listed = 0, doing = 0;
	int64_t age;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	if (older) {
		age = parse_age(older);
		if (age < 0) {
			cli_error("--older-than wants an age such as 14d, 12h, "
				  "30m or 2w, not '%s'", older);
			return EXIT_USAGE;
		}
		pk.before = time_now_ms() - age;
	}
	if (status && !*status) {
		cli_error("--status wants statuses, comma-separated");
		return EXIT_USAGE;
	}
	if (status && bad_status(c, status))
		return EXIT_USAGE; /* a typo would clean nothing, in silence */
	pk.statuses = status;
	if (dry && yes) {
		cli_error("--dry-run and --yes contradict each other");
		return EXIT_USAGE;
	}
	if (!dry && !yes && !isatty(STDIN_FILENO))
		dry = 1;
	for (i = 1; i <= n; i++) {
		struct run r = { 0 };

		if (store_run_get(c->store, argv[i], &r, &e)) {
			cli_error("%s", e.msg);
			e = (struct err)ERR_INIT;
			rc = EXIT_FAIL;
			continue;
		}
		strvec_push(&pk.ids, r.id);
		run_release(&r);
	}
	if (!n && store_run_list(c->store, &f, pick_one, &pk, &e)) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	/* the listing */
	for (i = 0; i < (int)pk.ids.nr; i++) {
		struct run r = { 0 };
		struct judged j;

		if (store_run_get(c->store, pk.ids.v[i], &r, &e)) {
			cli_error("%s", e.msg);
			e = (struct err)ERR_INIT;
			rc = EXIT_FAIL;
			continue;
		}
		if (judge(c, &r, 0, &j)) {
			say(&r, &j, 0);
			listed++;
			doing += !j.keep && (j.worktree || j.branch || j.folder);
		} else if (n) {
			cli_printf("%s: nothing left to remove\n", r.id);
		}
		judged_release(&j);
		run_release(&r);
	}
	if (!listed && !n)
		cli_printf("nothing to clean\n");
	if (doing && dry) {
		cli_printf("dry run: nothing removed (--yes removes)\n");
	} else if (doing && (yes || ask())) {
		cli_printf("removing:\n");
		for (i = 0; i < (int)pk.ids.nr; i++) {
			int r = remove_run(c, pk.ids.v[i], &e);

			if (r < 0) {
				cli_error("%s: %s", pk.ids.v[i], e.msg);
				e = (struct err)ERR_INIT;
				rc = EXIT_FAIL;
			}
		}
	}
	if (vacuum && !dry) {
		if (store_vacuum(c->store, &e)) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
		} else {
			cli_printf("store compacted\n");
		}
	} else if (vacuum) {
		cli_printf("dry run: the store is not compacted\n");
	}
out:
	strvec_clear(&pk.ids);
	return rc;
}

const struct cmd cmd_clean = {
	.name = "clean",
	.usage = "clean [RUN...] [--older-than AGE] [--status LIST] "
		 "[--dry-run] [--yes] [--force] [--vacuum]",
	.summary = "remove ended runs' worktrees, branches and folders when "
		   "safe",
	.needs = CLI_NEEDS_STORE,
	.exec = clean_exec,
};
