/*
 * The judge: one last look at a finished code task before its branch
 * may land, taken exactly once however many workers look for work.
 *
 * The claim is the task's own version guard: the judge sets judged_at
 * and bumps judgement_version in a versioned update, so of two judges
 * that read the same task one writes and the other gets BATON_ECONFLICT
 * and moves on. A judge that cannot decide (its provider failed, its
 * answer had no decision) gives the claim back with a cooldown, which
 * the sweep watches: the workers are woken when it ends. A judge that
 * dies with its claim (serve killed) is found by the sweep too, which
 * kills the agent the judge had started (on record as "judge_started")
 * and gives the claim back (sweep.c).
 *
 *   APPROVED           task done, branch queued for merging
 *   CHANGES_REQUESTED  a rework task on top of the branch; the task
 *                      blocked(needs_rework) until the rework is judged
 *   BLOCKED            blocked(needs_rework) for a person
 */
#include "util/compat.h"

#include <jansson.h>

#include "agent/agent.h"
#include "core/config.h"
#include "core/prompt.h"
#include "core/run.h"
#include "core/verdict.h"
#include "sched/sched.h"
#include "sched/sched_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#undef LOG_MODULE
#define LOG_MODULE "judge"

struct pick {
	struct sched_ctx *x;
	struct task got;
	int64_t now;
	int found, rc;
	struct err *e;
};

/* Tries to claim the judgement of t; stops the list on success. */
static int
try_claim(const struct task *t0, void *arg)
{
	struct pick *p = arg;
	struct task t;
	char *data;
	int rc;

	if (!t0->block_reason ||
	    strcmp(t0->block_reason, BLOCK_AWAITING_JUDGE) || t0->judged_at ||
	    t0->not_before > p->now)
		return 0;
	task_copy(&t, t0);
	t.judged_at = p->now;
	t.judgement_version++;
	run_set(&t.judged_by, p->x->holder);
	data = json_take_text(json_pack("{s:s, s:i, s:s?}", "judge", p->x->holder,
				    "judgement_version", t.judgement_version,
				    "run", t.run_id));
	rc = sched_task_write(p->x, &t, "judge_claimed", data, p->e);
	free(data);
	if (rc == BATON_ECONFLICT) {
		task_release(&t);
		return 0; /* another judge has it */
	}
	if (rc) {
		task_release(&t);
		p->rc = rc;
		return 1;
	}
	p->got = t;
	p->found = 1;
	return 1;
}

/*
 * The run's change. Its worktree has it, committed or not; a run driven
 * on another worker host is judged from the branch that host pushed
 * (repo.url), fetched here.
 */
static void
run_diff(struct sched_ctx *x, const struct run *r, const char *run_dir,
	 struct buf *out)
{
	struct err ignored = ERR_INIT;
	char *path;

	if (!sched__elsewhere(x, r)) {
		worktree_diff(x->ws, r->worktree, r->base_commit, 0, out,
			      &ignored);
		return;
	}
	if (!x->cfg->repo_url || !r->branch || !r->base_commit ||
	    remote_fetch_branch(x->ws, x->cfg->repo_url, r->branch, &ignored))
		return;
	fs_mkdir_p(run_dir, 0755, &ignored);
	path = xasprintf("%s/judge.diff", run_dir);
	worktree_branch_diff(x->ws, r->base_commit, r->branch, path,
			     BUF_MAX_PROMPT_CONTEXT, out, NULL, &ignored);
	free(path);
}

/* The judge's prompt: the task, the diff, the run's last review. */
static void
judge_prompt(struct sched_ctx *x, const struct task *t, const struct run *r,
	     const char *run_dir, struct buf *out)
{
	struct buf diff = BUF_INIT, review = BUF_INIT, ctx = BUF_INIT;
	struct err ignored = ERR_INIT;
	char *text = sched__task_text(t), *path, *tmpl;
	size_t budget = BUF_MAX_PROMPT_CONTEXT;
	struct prompt_var vars[] = {
		{ "task", text },
		{ "worktree", r->worktree },
		{ "context", NULL },
	};

	run_diff(x, r, run_dir, &diff);
	path = xasprintf("%s/review.md", run_dir);
	fs_read_nofollow(path, &review, BUF_MAX_PROMPT_CONTEXT, &ignored);
	prompt_section(&ctx, "Diff against the base", diff.ptr, &budget);
	prompt_section(&ctx, "The run's last review", review.ptr, &budget);
	vars[2].value = ctx.ptr ? ctx.ptr : "";
	free(path);
	tmpl = prompt_template(x->ws->dir, "judge");
	if (!tmpl)
		BUG("no built-in prompt judge.md");
	prompt_render(tmpl, vars, ARRAY_SIZE(vars), out);
	free(tmpl);
	free(text);
	buf_release(&diff);
	buf_release(&review);
	buf_release(&ctx);
}

/*
 * The judge could not decide: give the claim back, try later; after
 * runtime.max_attempts tries in a row a person decides instead, as when
 * the judge blocks (a judge that never answers must not keep the task,
 * and serve --exit-when-idle, waiting for good). failure_count counts
 * them: a settled run reset it, a decision resets it.
 */
static int
undecided(struct sched_ctx *x, struct task *t, const char *why,
	  struct err *e)
{
	int tries = x->cfg->runtime.max_attempts;
	char *data;
	int rc;

	t->judged_at = 0;
	t->failure_count++;
	data = json_take_text(json_pack("{s:s, s:I, s:i}", "reason", why,
					"failures",
					(json_int_t)t->failure_count, "of",
					tries));
	if (t->failure_count >= tries) {
		run_set(&t->block_reason, BLOCK_NEEDS_REWORK);
		free(t->reason);
		t->reason = xasprintf("the judge could not decide %lld times "
				      "(%s): a person must decide",
				      (long long)t->failure_count, why);
	} else {
		t->not_before = time_now_ms() +
				(int64_t)x->cfg->runtime.cooldown_seconds *
					1000;
		run_set(&t->reason, why);
	}
	rc = sched_task_write(x, t, "judge_failed", data, e);
	free(data);
	return rc;
}

/* A rework task for the judge's requested changes, on top of the run. */
static int
add_rework(struct sched_ctx *x, struct task *t, const struct run *r,
	   const char *findings, int64_t *id, struct err *e)
{
	struct task w = { 0 };
	int rc;

	w.title = xasprintf("Rework t%lld: %s", (long long)t->id, t->title);
	w.body = xasprintf("%s%sThe judge asked for these changes on top of "
			   "branch %s:\n\n%s",
			   t->body ? t->body : "", t->body ? "\n\n" : "",
			   r->branch, findings);
	sched_task_rework_of(&w, t, r->branch);
	sched__task_fit(&w);
	rc = sched_task_add(x, &w, e);
	*id = w.id;
	task_release(&w);
	return rc;
}

/* A rework that was approved lands its parent's work with its own. */
static void
finish_parent(struct sched_ctx *x, const struct task *t)
{
	struct task p = { 0 };
	struct err e = ERR_INIT;

	if (!t->parent_id || strcmp(t->origin, "rework") ||
	    store_task_get(x->store, t->parent_id, &p, &e))
		return;
	if (!strcmp(p.status, TASK_BLOCKED) && p.block_reason &&
	    !strcmp(p.block_reason, BLOCK_NEEDS_REWORK)) {
		char *why = xasprintf("done through its rework t%lld",
				      (long long)t->id);

		run_set(&p.status, TASK_DONE);
		run_set(&p.block_reason, NULL);
		run_set(&p.reason, why);
		p.ended_at = time_now_ms();
		if (sched_task_write(x, &p, "task_done", NULL, &e))
			log_warn("task %lld: %s", (long long)p.id, e.msg);
		free(why);
	}
	task_release(&p);
}

/* Acts on the judge's decision. */
static int
decide(struct sched_ctx *x, struct task *t, const struct run *r,
       const char *decision, const char *text, struct err *e)
{
	const struct config_runtime *rt = &x->cfg->runtime;
	struct merge_item m = { 0 };
	int64_t rework = 0;
	char *data;
	int rc = 0;

	if (!strcmp(decision, "APPROVED") && sched__on_forge(x, t, r)) {
		/* the pull request lands it (forge/pr.c) */
		run_set(&t->block_reason, BLOCK_PULL_REQUEST);
		run_set(&t->reason, "approved by the judge; waiting for its "
				    "pull request");
	} else if (!strcmp(decision, "APPROVED")) {
		run_set(&t->status, TASK_DONE);
		run_set(&t->block_reason, NULL);
		run_set(&t->reason, NULL);
		t->ended_at = time_now_ms();
	} else if (!strcmp(decision, "CHANGES_REQUESTED") &&
		   t->depth < rt->max_rework_depth) {
		rc = add_rework(x, t, r, text, &rework, e);
		if (rc)
			return rc;
		run_set(&t->block_reason, BLOCK_NEEDS_REWORK);
		free(t->reason);
		t->reason = xasprintf("the judge requested changes: rework in "
				      "t%lld",
				      (long long)rework);
	} else {
		run_set(&t->block_reason, BLOCK_NEEDS_REWORK);
		free(t->reason);
		t->reason = !strcmp(decision, "BLOCKED") ?
				    xstrdup("the judge blocked the change: a "
					    "person must decide") :
				    xasprintf("the judge requested changes and "
					      "the rework depth cap "
					      "(runtime.max_rework_depth = "
					      "%d) is reached",
					      rt->max_rework_depth);
	}
	t->failure_count = 0;
	data = json_take_text(json_pack("{s:s, s:s, s:i, s:s, s:I}", "run", r->id,
				    "decision", decision, "judgement_version",
				    t->judgement_version, "judge", x->holder,
				    "rework", (json_int_t)rework));
	rc = sched_task_write(x, t, "judged", data, e);
	free(data);
	if (rc || strcmp(decision, "APPROVED") || sched__on_forge(x, t, r))
		return rc;
	finish_parent(x, t);
	rc = sched_merge_enqueue(x, r, &m, e);
	merge_item_release(&m);
	return rc == BATON_EBUSY ? 0 : rc;
}

/* Keeps the judge's answer as a versioned output of the run. */
static void
keep_judgement(struct sched_ctx *x, const struct run *r,
	       const char *decision, const char *text)
{
	struct store_output o = { 0 };
	struct err e = ERR_INIT;

	o.run_id = r->id;
	o.stage = (char *)"judge";
	o.artifact = (char *)"judgement.md";
	o.decision = (char *)decision;
	o.content = (char *)text;
	if (store_output_add(x->store, &o, &e))
		log_warn("run %s: cannot keep the judgement: %s", r->id, e.msg);
}

/* What on_started needs to put the judge's agent on record. */
struct judge_call {
	struct sched_ctx *x;
	const struct task *t;
};

/*
 * The judge's agent started: its process group goes on record (event
 * "judge_started", outside the task's version, which the judgement's
 * own write still needs), so that when this worker dies with the agent
 * still running, the sweep that gives the claim back can kill it.
 */
static void
judge_started(void *arg, int64_t pid)
{
	struct judge_call *jc = arg;
	struct event ev = { 0 };
	struct err e = ERR_INIT;

	ev.type = (char *)"judge_started";
	ev.task_id = jc->t->id;
	ev.run_id = jc->t->run_id;
	ev.data = json_take_text(json_pack(
		"{s:s, s:I, s:i}", "judge", jc->x->holder, "pid",
		(json_int_t)pid, "judgement_version",
		jc->t->judgement_version));
	if (store_event_add(jc->x->store, &ev, &e))
		log_warn("task %lld: cannot record the judge's pid %lld: %s",
			 (long long)jc->t->id, (long long)pid, e.msg);
	free(ev.data);
}

static int
judge(struct sched_ctx *x, struct task *t, struct err *e)
{
	struct judge_call jc = { x, t };
	struct agent_result ar = AGENT_RESULT_INIT;
	struct buf prompt = BUF_INIT;
	struct role_call c = { 0 };
	struct run r = { 0 };
	char *run_dir = NULL, *dir = NULL, *name = NULL, *decision = NULL;
	char *gitdir = NULL;
	int rc;

	rc = store_run_get(x->store, t->run_id ? t->run_id : "", &r, e);
	if (rc)
		return undecided(x, t, e->msg, e);
	run_dir = workspace_run_dir(x->ws, r.id);
	dir = xasprintf("%s/judge", run_dir);
	name = xasprintf("judge-v%d", t->judgement_version);
	judge_prompt(x, t, &r, run_dir, &prompt);
	c.role = "judge";
	/* a worktree on another host: the judge reads this clone */
	c.cwd = sched__elsewhere(x, &r) ? x->ws->repo : r.worktree;
	c.prompt = prompt.ptr;
	c.dir = dir;
	c.name = name;
	c.repo = x->ws->repo;
	c.common = x->ws->common;
	if (strcmp(c.cwd, x->ws->repo))
		worktree_git_dir(x->ws, c.cwd, &gitdir, NULL);
	c.gitdir = gitdir;
	c.on_started = judge_started;
	c.arg = &jc;
	rc = fs_mkdir_p(dir, 0755, e);
	if (!rc)
		rc = sched_call_role(x->cfg, &c, &ar, e);
	if (rc) {
		rc = undecided(x, t, e->msg, e);
	} else if (ar.failure != AGENT_FAIL_NONE) {
		char *why = xasprintf("the judge failed (%s): %s",
				      agent_failure_name(ar.failure),
				      ar.message.len ? ar.message.ptr : "");

		rc = undecided(x, t, why, e);
		free(why);
	} else if (!(decision = verdict_line(VERDICT_REVIEW, ar.text.ptr)) ||
		   !verdict_is_decision(VERDICT_REVIEW, decision)) {
		rc = undecided(x, t,
			       "the judge's answer has no DECISION: line", e);
	} else {
		keep_judgement(x, &r, decision, ar.text.ptr);
		rc = decide(x, t, &r, decision, ar.text.ptr, e);
	}
	agent_result_release(&ar);
	buf_release(&prompt);
	run_release(&r);
	free(decision);
	free(run_dir);
	free(dir);
	free(gitdir);
	free(name);
	return rc;
}

int
sched_judge_next(struct sched_ctx *x, struct err *e)
{
	struct store_task_filter f = { .status = TASK_BLOCKED };
	struct pick p = { .x = x, .now = time_now_ms(), .e = e };
	int rc;

	rc = store_task_list(x->store, &f, try_claim, &p, e);
	if (!rc)
		rc = p.rc;
	if (rc || !p.found)
		return rc;
	rc = judge(x, &p.got, e);
	task_release(&p.got);
	return rc ? rc : 1;
}
