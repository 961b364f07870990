/*
 * The merge queue: approved branches land on the base one at a time, each
 * merged onto the base as it is at that moment and checked there before
 * the base moves (workspace/merge.c does the git work). This file keeps
 * the items' lifecycle and its record:
 *
 *   enqueue ─▶ pending ──claim──▶ processing ──landed──────────▶ merged
 *                 ▲                    │
 *                 │  conflict: attempts + 1, not before
 *                 │    now + backoff * 2^(attempts - 1)
 *                 │  raced (the base moved): at once, not counted
 *                 │  error (git, local changes): after backoff,
 *                 └──  not counted, the error goes to the caller
 *                                      │
 *                                      ▼
 *     failed: a conflict after merge.retries retries (and a conflict-
 *     resolution task is queued), failing checks, a branch that is gone
 *
 * Every change is an event of the item's run (merge_queued, merge_retry,
 * merge_landed, merge_failed; the store writes merge_claimed) with a JSON
 * object saying why.
 *
 * Landings of one repository are serialised by the landing lock, which
 * is taken before the claim: a lander that finds it held leaves the queue
 * to the one holding it. So an item's claim can outlive its expiry during
 * long checks without another lander of the repository taking it over;
 * the expiry only frees the items of a lander that died.
 */
#include "util/compat.h"

#define LOG_MODULE "merge"

#include <ctype.h>
#include <jansson.h>
#include <unistd.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "engine/engine.h"
#include "engine/hooks.h"
#include "sched/sched.h"
#include "sched/sched_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/redact.h"
#include "util/sandbox.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/*
 * The failed branch's diff handed to the conflict task's agent; the whole
 * diff stays in the run folder. (A cap on text read from a child, as in
 * util/limits.h, kept here because only the merge queue uses it.)
 */
#define CONFLICT_DIFF_MAX (64 * 1024)
/* Of a failing check's summary, what goes in the item's reason. */
#define REASON_SUMMARY_MAX 2048
/* Backoff doubles at most this many times, so the shift cannot overflow. */
#define BACKOFF_MAX_SHIFT 16

/* A run whose branch may land: a code run that finished well. */
static int
can_land(const struct run *r)
{
	if (!r->branch || !*r->branch)
		return 0;
	return !strcmp(r->status, ST_MERGE_READY) ||
	       !strcmp(r->status, ST_COMPLETED);
}

/*
 * Writes m (a versioned update) with an event of type about its run;
 * data (consumed) gets the item's id and attempts added.
 */
static int
write_item(struct sched_ctx *x, struct merge_item *m, const char *type,
	   json_t *data, struct err *e)
{
	struct event ev = { 0 };
	int rc;

	json_object_set_new(data, "item", json_integer(m->id));
	json_object_set_new(data, "branch", json_string(m->branch));
	json_object_set_new(data, "attempts", json_integer(m->attempts));
	ev.run_id = m->run_id;
	ev.task_id = m->task_id;
	ev.type = (char *)type;
	ev.data = json_dumps(data, JSON_COMPACT);
	rc = store_merge_update(x->store, m, &ev, e);
	free(ev.data);
	json_decref(data);
	return rc;
}

/* Clears what belongs to a claim, as every change out of processing does. */
static void
drop_claim(struct merge_item *m)
{
	FREE_AND_NULL(m->claimed_by);
	m->claim_expires_at = 0;
}

/* The base a new item targets, when it can be told now; else NULL. */
static char *
item_base(struct sched_ctx *x)
{
	char *base = NULL;

	if (worktree_base_branch(x->ws, x->cfg->merge.base_branch, &base,
				 NULL) < 0)
		return NULL; /* detached: said again, clearly, at landing */
	return base;
}

/* A failed item goes back to pending, as new, when asked to merge again. */
static int
requeue(struct sched_ctx *x, struct merge_item *m, struct err *e)
{
	run_set(&m->status, MERGE_PENDING);
	free(m->base_ref);
	m->base_ref = item_base(x);
	m->attempts = 0;
	m->not_before = 0;
	FREE_AND_NULL(m->reason);
	FREE_AND_NULL(m->merged_commit);
	drop_claim(m);
	return write_item(x, m, "merge_queued",
			  json_pack("{s:s?, s:b}", "base", m->base_ref,
				    "requeued", 1),
			  e);
}

int
sched_merge_enqueue(struct sched_ctx *x, const struct run *run,
		    struct merge_item *out, struct err *e)
{
	struct merge_item m = { 0 };
	struct event ev = { 0 };
	int rc;

	if (!can_land(run))
		return err_set(e, BATON_EBADSTATE,
			       "run '%s' is %s: only the branch of a run that "
			       "is merge_ready can be merged",
			       run->id, run->status);
	m.run_id = xstrdup(run->id);
	m.branch = xstrdup(run->branch);
	m.base_ref = item_base(x);
	m.task_id = run->task_id;
	m.status = xstrdup(MERGE_PENDING);
	ev.run_id = run->id;
	ev.task_id = run->task_id;
	ev.type = (char *)"merge_queued";
	ev.data = json_take_text(json_pack("{s:s, s:s?}", "branch", m.branch,
				       "base", m.base_ref));
	rc = store_merge_add(x->store, &m, &ev, e);
	free(ev.data);
	if (rc == BATON_EBUSY) {
		merge_item_release(&m);
		rc = store_merge_get(x->store, 0, run->id, &m, e);
		if (!rc && !strcmp(m.status, MERGE_FAILED))
			rc = requeue(x, &m, e);
		else if (!rc)
			rc = err_set(e, BATON_EBUSY,
				     "run '%s' is already in the merge queue "
				     "(item %lld, %s)",
				     run->id, (long long)m.id, m.status);
		if (rc && rc != BATON_EBUSY)
			goto out;
	} else if (rc) {
		goto out;
	}
	*out = m;
	memset(&m, 0, sizeof(m));
	if (!rc)
		sched_wake(x->ws);
out:
	merge_item_release(&m);
	return rc;
}

/* The first line of text, at most max bytes, as a new string. */
static char *
first_line(const char *text, size_t max)
{
	size_t n = strcspn(text, "\n");

	return xstrndup(text, n < max ? n : max);
}

/*
 * The checks a landing must pass: validate.commands, then the task's own
 * verify commands (a JSON array of shell strings) when it has some.
 */
static void
landing_checks(const struct config *cfg, const struct task *t,
	       struct strvec *out)
{
	strvec_pushv(out, cfg->validate_commands.v);
	if (t && json_text_strings(t->verify, out) < 0)
		log_warn("task t%lld: verify is not a JSON array; ignored",
			 (long long)t->id);
}

/* "a.txt, b.txt" */
static char *
join(const struct strvec *names)
{
	struct buf b = BUF_INIT;
	size_t i;

	for (i = 0; i < names->nr; i++)
		buf_addf(&b, "%s%s", i ? ", " : "", names->v[i]);
	return buf_detach(&b, NULL);
}

static json_t *
json_names(const struct strvec *names)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < names->nr; i++)
		json_array_append_new(a, json_string(names->v[i]));
	return a;
}

/*
 * The landing's records, files of the run folder of run_id named by
 * names (NULL-terminated), kept in the store as a run's files are, so
 * that every host can show them; with redact, each redacted first, as a
 * call's transcript is (the checks' output, and its tails in their
 * verdict, come from code the agent wrote; a diff is git's, shown as
 * `baton diff` shows it). Best effort: the run folder has them.
 */
static void
keep_files(struct sched_ctx *x, const char *run_id,
	   const char *const *names, int redact)
{
	char *dir = workspace_run_dir(x->ws, run_id), *path;
	struct engine en;

	engine_init(&en, x->store, x->ws, x->cfg);
	for (; *names; names++) {
		path = xasprintf("%s/%s", dir, *names);
		if (redact)
			redact_file(path, NULL);
		engine_keep_file(&en, run_id, *names, NULL);
		free(path);
	}
	engine_release(&en);
	free(dir);
}

/*
 * The body of a conflict-resolution task: what failed, the files, the
 * original task and the failed branch's change against its merge base.
 */
static void
conflict_body(struct sched_ctx *x, const struct merge_item *m,
	      const char *orig, const struct land_result *res,
	      struct buf *body)
{
	char *dir = workspace_run_dir(x->ws, m->run_id);
	char *path = xasprintf("%s/merge-conflict.diff", dir);
	struct buf diff = BUF_INIT;
	struct err le = ERR_INIT;
	size_t i;
	int cut = 0, rc;

	buf_addf(body,
		 "The branch %s (run %s) could not be merged onto %s: after "
		 "%d attempts it still conflicts with what %s has now, in:\n\n",
		 m->branch, m->run_id, res->base_branch, m->attempts,
		 res->base_branch);
	for (i = 0; i < res->conflicts.nr; i++)
		buf_addf(body, "  - %s\n", res->conflicts.v[i]);
	buf_addf(body,
		 "\nStarting from the current %s, make the change the "
		 "original task asks for again, keeping what %s gained "
		 "meanwhile. The failed branch's change is below for "
		 "reference.\n\n## The original task\n\n%s\n\n",
		 res->base_branch, res->base_branch, orig);
	rc = fs_mkdir_p(dir, 0755, &le);
	if (!rc)
		rc = worktree_branch_diff(x->ws, res->base_branch, m->branch,
					  path, CONFLICT_DIFF_MAX, &diff, &cut,
					  &le);
	if (rc >= 0)
		keep_files(x, m->run_id,
			   (const char *const[]){ "merge-conflict.diff",
						  NULL },
			   0);
	buf_addf(body, "## The failed branch's change (git diff %s...%s)\n\n",
		 res->base_branch, m->branch);
	if (rc < 0) {
		buf_addf(body, "(baton could not make the diff: %s)\n", le.msg);
		goto out;
	}
	buf_addf(body, "```diff\n%s%s```\n", diff.ptr,
		 diff.len && diff.ptr[diff.len - 1] != '\n' ? "\n" : "");
	if (cut)
		buf_addf(body,
			 "\n(cut at %d KiB; the whole diff is in "
			 ".baton/runs/%s/merge-conflict.diff)\n",
			 CONFLICT_DIFF_MAX / 1024, m->run_id);
out:
	buf_release(&diff);
	free(path);
	free(dir);
}

/*
 * Queues the task that asks an agent to redo a conflicting change on the
 * current base: origin "conflict", its parent the item's task, and no
 * base_ref, so its run starts from the base as it is when it runs.
 * *id_out gets its id.
 */
static int
add_conflict_task(struct sched_ctx *x, const struct merge_item *m,
		  const struct run *r, const struct task *parent,
		  const struct land_result *res, int64_t *id_out,
		  struct err *e)
{
	struct task t = { 0 };
	struct event ev = { 0 };
	struct buf body = BUF_INIT;
	char *orig = parent ? sched__task_text(parent) : xstrdup(r->task);
	char *title = first_line(parent ? parent->title : r->task, 200);
	int rc;

	conflict_body(x, m, orig, res, &body);
	t.title = xasprintf("Resolve merge conflict: %s", title);
	t.body = buf_detach(&body, NULL);
	t.kind = xstrdup(parent && parent->kind ? parent->kind : "code");
	t.pipeline = xstrdup_or_null(parent ? parent->pipeline : r->pipeline);
	t.status = xstrdup(TASK_QUEUED);
	t.origin = xstrdup("conflict");
	t.parent_id = m->task_id;
	t.max_attempts = x->cfg->runtime.max_attempts;
	if (parent) {
		t.priority = parent->priority;
		t.depth = parent->depth;
		t.area = xstrdup_or_null(parent->area);
		t.allowed_paths = xstrdup_or_null(parent->allowed_paths);
		t.verify = xstrdup_or_null(parent->verify);
	}
	sched__task_fit(&t);
	ev.run_id = m->run_id;
	ev.type = (char *)"task_added";
	ev.data = json_take_text(
		json_pack("{s:s, s:o, s:I, s:s, s:o}", "origin", "conflict",
			  "parent",
			  m->task_id ? json_integer(m->task_id) : json_null(),
			  "merge_item",
			  (json_int_t)m->id, "run", m->run_id, "files",
			  json_names(&res->conflicts)));
	rc = store_task_add(x->store, &t, &ev, e);
	if (!rc) {
		*id_out = t.id;
		sched_wake(x->ws);
	}
	free(ev.data);
	free(orig);
	free(title);
	task_release(&t);
	return rc;
}

/* A conflict: another try after the backoff, or the end of the item. */
static int
on_conflict(struct sched_ctx *x, struct merge_item *m, const struct run *r,
	    const struct task *parent, const struct land_result *res,
	    struct err *e)
{
	const struct config_merge *mc = &x->cfg->merge;
	char *files = join(&res->conflicts);
	int64_t delay, task_id = 0;
	int rc, shift;

	m->attempts++;
	drop_claim(m);
	if (m->attempts <= mc->retries) {
		shift = m->attempts - 1 < BACKOFF_MAX_SHIFT ?
				m->attempts - 1 :
				BACKOFF_MAX_SHIFT;
		delay = ((int64_t)mc->backoff_seconds * 1000) << shift;
		run_set(&m->status, MERGE_PENDING);
		m->not_before = time_now_ms() + delay;
		free(m->reason);
		m->reason = xasprintf("conflict in %s", files);
		rc = write_item(
			x, m, "merge_retry",
			json_pack("{s:s, s:o, s:i, s:I, s:s}", "cause",
				  "conflict", "files",
				  json_names(&res->conflicts), "retries",
				  mc->retries, "delay_ms", (json_int_t)delay,
				  "base", res->base_branch),
			e);
		goto out;
	}
	rc = add_conflict_task(x, m, r, parent, res, &task_id, e);
	if (rc)
		goto out;
	run_set(&m->status, MERGE_FAILED);
	free(m->reason);
	m->reason = xasprintf("conflict in %s after %d retries; "
			      "conflict-resolution task t%lld queued",
			      files, mc->retries, (long long)task_id);
	rc = write_item(x, m, "merge_failed",
			json_pack("{s:s, s:o, s:I, s:s, s:s}", "cause",
				  "conflict", "files",
				  json_names(&res->conflicts), "task",
				  (json_int_t)task_id, "base",
				  res->base_branch, "reason", m->reason),
			e);
out:
	free(files);
	return rc;
}

/*
 * With a shared remote, the base this lander moved goes back to the
 * remote, where worker hosts fetch it to start their next runs. A push
 * the remote refuses (someone moved the base there) is on record and
 * tried again after the next landing; the landing itself stands.
 */
static void
publish_base(struct sched_ctx *x, const struct merge_item *m,
	     const char *base)
{
	struct event ev = { 0 };
	struct err e = ERR_INIT;

	if (!x->cfg->repo_url ||
	    !remote_push(x->ws, x->cfg->repo_url, base, 0, &e))
		return;
	log_warn("%s", e.msg);
	ev.run_id = m->run_id;
	ev.type = (char *)"base_push_failed";
	ev.data = json_take_text(json_pack("{s:s, s:s}", "base", base,
					   "reason", e.msg));
	e = (struct err)ERR_INIT;
	store_event_add(x->store, &ev, &e);
	free(ev.data);
}

/* Turns a landing's outcome into the item's next state. */
static int
settle(struct sched_ctx *x, struct merge_item *m, const struct run *r,
       const struct task *parent, const struct land_result *res,
       struct err *e)
{
	char *summary;
	size_t n;
	int rc;

	run_set(&m->base_ref, res->base_branch);
	switch (res->outcome) {
	case LAND_MERGED:
	case LAND_NOTHING:
		run_set(&m->status, MERGE_MERGED);
		run_set(&m->merged_commit, res->commit);
		run_set(&m->reason, res->outcome == LAND_NOTHING ?
					    "already contained in the base" :
					    NULL);
		drop_claim(m);
		rc = write_item(x, m, "merge_landed",
				json_pack("{s:s, s:s, s:s, s:b}", "commit",
					  res->commit, "base",
					  res->base_branch, "base_commit",
					  res->base_commit, "already",
					  res->outcome == LAND_NOTHING),
				e);
		if (!rc)
			sched_wake(x->ws); /* the base moved: dependants */
		return rc;
	case LAND_RACED:
		run_set(&m->status, MERGE_PENDING);
		free(m->reason);
		m->reason = xasprintf("'%s' moved while the merge was checked",
				      res->base_branch);
		m->not_before = 0;
		drop_claim(m);
		return write_item(x, m, "merge_retry",
				  json_pack("{s:s, s:s, s:s, s:I}", "cause",
					    "raced", "base", res->base_branch,
					    "tried", res->commit, "delay_ms",
					    (json_int_t)0),
				  e);
	case LAND_CONFLICT:
		return on_conflict(x, m, r, parent, res, e);
	case LAND_CHECKS_FAILED:
		break;
	}
	run_set(&m->status, MERGE_FAILED);
	free(m->reason);
	summary = xstrndup(res->summary.ptr, REASON_SUMMARY_MAX);
	n = strlen(summary);
	while (n && isspace((unsigned char)summary[n - 1]))
		summary[--n] = '\0';
	m->reason = xasprintf("checks failed on the merge with %s (%s "
			      "untouched):\n%s",
			      res->base_branch, res->base_branch, summary);
	free(summary);
	drop_claim(m);
	return write_item(x, m, "merge_failed",
			  json_pack("{s:s, s:s, s:s, s:s}", "cause", "checks",
				    "base", res->base_branch, "tried",
				    res->commit, "summary", res->summary.ptr),
			  e);
}

/*
 * A landing that could not be done. A branch that is gone ends the
 * item; anything else (git failing, local changes in the way, no base
 * branch) may pass, so the item waits a backoff without losing an
 * attempt, and the error goes to the caller, who can tell the user.
 */
static int
on_error(struct sched_ctx *x, struct merge_item *m, int cause,
	 const struct err *le, struct err *e)
{
	int64_t delay = (int64_t)x->cfg->merge.backoff_seconds * 1000;
	int rc;

	drop_claim(m);
	run_set(&m->reason, le->msg);
	if (cause == BATON_ENOTFOUND) {
		run_set(&m->status, MERGE_FAILED);
		return write_item(x, m, "merge_failed",
				  json_pack("{s:s, s:s}", "cause", "error",
					    "reason", le->msg),
				  e);
	}
	if (delay < 1000)
		delay = 1000; /* no busy loop in serve on a lasting error */
	run_set(&m->status, MERGE_PENDING);
	m->not_before = time_now_ms() + delay;
	rc = write_item(x, m, "merge_retry",
			json_pack("{s:s, s:s, s:I}", "cause", "error", "error",
				  le->msg, "delay_ms", (json_int_t)delay),
			e);
	if (rc)
		return rc;
	return err_set(e, cause, "%s", le->msg);
}

/* The merge commit's message: which run, and what it was for. */
static char *
merge_message(const struct merge_item *m, const struct run *r,
	      const struct task *t)
{
	char *title = first_line(t ? t->title : r->task, 72);
	char *msg = xasprintf("Merge %s: %s\n\nLanded by baton's merge queue "
			      "(run %s) after the checks passed on the "
			      "merged state.",
			      m->branch, title, m->run_id);

	free(title);
	return msg;
}

/*
 * The before_merge hooks (engine/hooks.h), in the run's worktree before
 * anything is merged: a veto (or hooks that cannot run, the worktree
 * being gone) ends the item failed with the reason, and 1 is returned;
 * 0 lets the landing go on.
 */
static int
merge_veto(struct sched_ctx *x, struct merge_item *m, const struct run *r,
	   struct err *e)
{
	struct engine en;
	struct hook_ctx c = HOOK_CTX_INIT;
	struct err le = ERR_INIT;
	char *why = NULL;
	int rc;

	if (!hooks_any(x->cfg, HOOK_BEFORE_MERGE))
		return 0;
	engine_init(&en, x->store, x->ws, x->cfg);
	c.en = &en;
	c.run_id = r->id;
	c.task_id = r->task_id;
	c.worktree = r->worktree;
	rc = hooks_run(HOOK_BEFORE_MERGE, &c, &why, &le);
	engine_release(&en);
	if (rc == 0)
		return 0;
	if (rc < 0 && rc != BATON_ENOTFOUND) {
		free(why);
		return err_set(e, rc, "%s", le.msg);
	}
	drop_claim(m);
	run_set(&m->status, MERGE_FAILED);
	free(m->reason);
	m->reason = xasprintf("refused by a before_merge hook: %s",
			      why ? why : le.msg);
	free(why);
	rc = write_item(x, m, "merge_failed",
			json_pack("{s:s, s:s}", "cause", "hook", "reason",
				  m->reason),
			e);
	return rc ? rc : 1;
}

/* Lands the claimed item m and records how it went. */
static int
process(struct sched_ctx *x, struct merge_item *m, struct err *e)
{
	const struct config *cfg = x->cfg;
	struct land_request rq = { 0 };
	struct land_result res = LAND_RESULT_INIT;
	struct strvec checks = STRVEC_INIT;
	struct run r = { 0 };
	struct task t = { 0 };
	struct err le = ERR_INIT;
	char *dir = NULL, *log = NULL, *json = NULL, *msg = NULL;
	int rc, have_task = 0;

	rc = store_run_get(x->store, m->run_id, &r, &le);
	if (rc == BATON_ENOTFOUND) {
		rc = on_error(x, m, rc, &le, e); /* ends the item */
		goto out;
	}
	if (rc < 0) {
		rc = err_set(e, rc, "%s", le.msg);
		goto out;
	}
	if (m->task_id) {
		rc = store_task_get(x->store, m->task_id, &t, e);
		if (rc && rc != BATON_ENOTFOUND)
			goto out;
		have_task = !rc;
	}
	rc = merge_veto(x, m, &r, e);
	if (rc) {
		rc = rc > 0 ? 0 : rc;
		goto out;
	}
	landing_checks(cfg, have_task ? &t : NULL, &checks);
	dir = workspace_run_dir(x->ws, r.id);
	fs_mkdir_p(dir, 0755, NULL);
	log = xasprintf("%s/merge.log", dir);
	json = xasprintf("%s/merge-validation.json", dir);
	msg = merge_message(m, &r, have_task ? &t : NULL);
	rq.branch = m->branch;
	rq.base_branch = m->base_ref ? m->base_ref : cfg->merge.base_branch;
	rq.message = msg;
	rq.checks = &checks;
	rq.timeout_s = cfg->validate_timeout_seconds;
	rq.log_path = log;
	rq.json_path = json;
	rq.sandbox = sandbox_mode(cfg->sandbox, NULL);
	log_info("landing %s (%s) onto %s", m->branch, m->run_id,
		 rq.base_branch ? rq.base_branch : "the checked-out branch");
	/* a worker host pushed the branch; this clone has never seen it */
	rc = cfg->repo_url ? remote_fetch_branch(x->ws, cfg->repo_url,
						 m->branch, &le) :
			     0;
	if (!rc) {
		rc = worktree_land(x->ws, &rq, &res, &le);
		keep_files(x, r.id,
			   (const char *const[]){ "merge.log",
						  "merge-validation.json",
						  NULL },
			   1);
	}
	if (!rc && res.outcome == LAND_MERGED)
		publish_base(x, m, res.base_branch);
	if (rc < 0)
		rc = on_error(x, m, rc, &le, e);
	else
		rc = settle(x, m, &r, have_task ? &t : NULL, &res, e);
out:
	land_result_release(&res);
	strvec_clear(&checks);
	run_release(&r);
	task_release(&t);
	free(dir);
	free(log);
	free(json);
	free(msg);
	return rc;
}

int
sched_merge_next(struct sched_ctx *x, struct err *e)
{
	struct merge_item m = { 0 };
	struct err busy = ERR_INIT;
	char *holder = NULL;
	int lock = -1, rc;

	rc = worktree_land_lock(x->ws, 0, &lock, &busy);
	if (rc == BATON_EBUSY)
		return 0; /* another lander works through the queue */
	if (rc < 0)
		return err_set(e, rc, "%s", busy.msg);
	holder = x->holder ? xstrdup(x->holder) :
			     xasprintf("merge:%ld", (long)getpid());
	rc = store_merge_claim(x->store, holder,
			       (int64_t)x->cfg->runtime.lease_seconds * 1000,
			       &m, e);
	if (rc == BATON_ENOTFOUND) {
		rc = 0;
		goto out;
	}
	if (rc < 0)
		goto out;
	rc = process(x, &m, e);
	if (!rc)
		rc = 1;
out:
	worktree_land_unlock(lock);
	merge_item_release(&m);
	free(holder);
	return rc;
}
