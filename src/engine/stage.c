/*
 * Running one stage: build the prompt, call the agent (or run the project's
 * checks for a validate stage), then hold the output to its contract.
 *
 *   kind       leaves                               contract
 *   plan       plan.md (or the final text)          not empty
 *   architect  architecture.md (or the final text)  not empty
 *   execute    worktree edits, execution.log        exit 0; checkpoint
 *              (assist: escalation.json, a question)
 *   validate   validation.json                      every command exits 0
 *   review     review.json + review.md              decision APPROVED |
 *              (or a "DECISION: X" line)            CHANGES_REQUESTED | BLOCKED
 *   fix        worktree edits, finding-responses.md exit 0; checkpoint
 *   verify     verification.json + .md              decision PASSED |
 *              (or a "VERIFICATION: X" line)        FAILED | NEEDS_HUMAN
 *
 * Output that breaks its contract is retried once with the error in the
 * prompt; a second failure blocks the run with the error on record.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "core/plugin.h"
#include "core/prompt.h"
#include "core/verdict.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/redact.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/limits.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#define TICK_MS 1000
/* A quota wait never sleeps longer than this before trying again. */
#define MAX_QUOTA_WAIT_MS (24LL * 3600 * 1000)
/* Reviewers on one review stage. */
#define MAX_REVIEWERS 8

/*
 * The files each kind leaves in the run folder: [0] is the main one. The
 * agent writes them into its output folder, which they are taken from.
 */
static const char *const artifacts[KIND__COUNT][2] = {
	[KIND_PLAN] = { "plan.md", NULL },
	[KIND_ARCHITECT] = { "architecture.md", NULL },
	[KIND_EXECUTE] = { "execution.log", "escalation.json" },
	[KIND_VALIDATE] = { "validation.json", NULL },
	[KIND_REVIEW] = { "review.json", "review.md" },
	[KIND_FIX] = { "finding-responses.md", NULL },
	[KIND_VERIFY] = { "verification.json", "verification.md" },
};

const char *
engine__work_dir(const struct drive *d)
{
	return d->r.worktree ? d->r.worktree : d->run_dir;
}

/* Reads a run-folder file into out; 0, or negative when absent/too big. */
static int
read_artifact(const struct drive *d, const char *name, struct buf *out)
{
	char *path = engine__run_file(d, name);
	int rc = fs_read_nofollow(path, out, BUF_MAX_ARTIFACT, NULL);

	free(path);
	return rc;
}

static int
write_artifact(const struct drive *d, const char *name, const char *text,
	       struct err *e)
{
	char *path = engine__run_file(d, name);
	int rc = fs_write_atomic(path, text, strlen(text), e);

	free(path);
	return rc;
}

/*
 * Applies fn to each of the kind's artifacts in the run folder: fs_unlink
 * before a call, so stale ones never count; redact_file after it.
 */
static void
each_artifact(const struct drive *d, enum stage_kind k,
	      int (*fn)(const char *path, struct err *e))
{
	int i;

	if (d->call) {
		char *path = engine__run_file(d, d->call->artifact);

		fn(path, NULL);
		free(path);
		return;
	}
	for (i = 0; i < 2; i++) {
		char *path;

		if (!artifacts[k][i])
			continue;
		path = engine__run_file(d, artifacts[k][i]);
		fn(path, NULL);
		free(path);
	}
}

/* Adds a run-folder file as a prompt section, if it exists. */
static void
file_section(const struct drive *d, struct buf *ctx, const char *title,
	     const char *name, size_t *budget)
{
	struct buf text = BUF_INIT;

	if (read_artifact(d, name, &text) == 0)
		prompt_section(ctx, title, text.ptr, budget);
	buf_release(&text);
}

/*
 * The context a kind's agent reads, most important first, within the
 * fixed budget: guidance from people, then what to fix, then the plan and
 * design, then the diff.
 */
static void
build_context(struct drive *d, const struct stage *s, const char *steers,
	      struct buf *ctx)
{
	size_t budget = BUF_MAX_PROMPT_CONTEXT;
	struct buf diff = BUF_INIT;
	struct buf val = BUF_INIT;

	prompt_section(ctx, "Guidance from the people running this task",
		       steers, &budget);
	if (d->call) {
		/* a bug-fix stage: seed.c chose what it reads */
		if (d->call->context && *d->call->context) {
			buf_adds(ctx, d->call->context);
			budget -= strlen(d->call->context) < budget ?
					  strlen(d->call->context) :
					  budget;
		}
		if (KIND_IS_SEED_REVIEW(s->kind) && d->r.worktree &&
		    d->r.base_commit &&
		    worktree_diff(d->en->ws, d->r.worktree, d->r.base_commit,
				  0, &diff, NULL) == 0)
			prompt_section(ctx,
				       "The change (git diff against the base)",
				       diff.len ? diff.ptr : "(no changes)",
				       &budget);
		buf_release(&diff);
		return;
	}
	if (s->kind == KIND_FIX) {
		/* Checks run before review, so failing checks mean this
		 * round fixes them; passing checks mean review sent us. */
		if (read_artifact(d, "validation.json", &val) == 0 &&
		    strstr(val.ptr, "\"passed\": false"))
			prompt_section(ctx, "Failing checks (validation.json)",
				       val.ptr, &budget);
		else
			file_section(d, ctx, "Review findings to address",
				     "review.md", &budget);
		file_section(d, ctx, "Findings of a plugin stage to address",
			     "plugin-findings.md", &budget);
	}
	if (s->kind != KIND_PLAN)
		file_section(d, ctx, "Plan", "plan.md", &budget);
	if (s->kind == KIND_EXECUTE || s->kind == KIND_FIX)
		file_section(d, ctx, "Design", "architecture.md", &budget);
	if ((s->kind == KIND_REVIEW || s->kind == KIND_VERIFY) &&
	    d->r.worktree && d->r.base_commit &&
	    worktree_diff(d->en->ws, d->r.worktree, d->r.base_commit, 0, &diff,
			  NULL) == 0)
		prompt_section(ctx, "The change (git diff against the base)",
			       diff.len ? diff.ptr : "(no changes)", &budget);
	buf_release(&diff);
	buf_release(&val);
}

/* The stage's template: .baton/prompts/<kind>.md, else the pipeline's
 * plugin's, else the built-in. */
static char *
load_template(const struct drive *d, const struct stage *s)
{
	const char *kind = d->call && d->call->template ?
				   d->call->template :
				   stage_kind_name(s->kind);
	char *tmpl = plugin_template(d->en->ws->dir, d->p, kind);

	if (!tmpl)
		BUG("no built-in prompt for kind '%s'", kind);
	return tmpl;
}

static void
render_prompt(struct drive *d, const struct stage *s, const char *steers,
	      const char *retry, const char *out_dir, struct buf *out)
{
	struct buf ctx = BUF_INIT, retry_text = BUF_INIT;
	char *tmpl = load_template(d, s);
	struct prompt_var vars[] = {
		{ "task", d->r.task },
		{ "run_id", d->r.id },
		{ "stage", s->name },
		{ "run_dir", d->run_dir },
		{ "out_dir", out_dir },
		{ "worktree", engine__work_dir(d) },
		{ "artifact", d->call ? d->call->artifact :
					artifacts[s->kind][0] },
		{ "context", NULL },
		{ "retry", NULL },
	};

	build_context(d, s, steers, &ctx);
	if (retry)
		buf_addf(&retry_text,
			 "\n## Your previous answer was not accepted\n\n%s\n\n"
			 "Fix this and answer again.\n",
			 retry);
	vars[7].value = ctx.ptr;
	vars[8].value = retry_text.ptr;
	prompt_render(tmpl, vars, ARRAY_SIZE(vars), out);
	free(tmpl);
	buf_release(&ctx);
	buf_release(&retry_text);
}

/*
 * Reads the verdict of a review or verify stage: the JSON file first; a
 * "DECISION:" / "VERIFICATION:" line in the final text as the fallback.
 * Returns 0 with v filled, or BATON_ECONTRACT with what was wrong in e.
 */
static int
read_verdict(struct drive *d, const struct stage *s, const char *text,
	     struct verdict *v, struct err *e)
{
	enum verdict_kind k =
		s->kind == KIND_REVIEW ? VERDICT_REVIEW : VERDICT_VERIFY;
	const char *const *ds = verdict_decisions(k);
	const char *file = artifacts[s->kind][0];
	const char *prefix = verdict_line_prefix(k);
	struct err why = ERR_INIT;
	struct buf json = BUF_INIT;
	char *line = NULL;
	int rc = 0, had_json;

	had_json = read_artifact(d, file, &json) == 0;
	if (had_json && verdict_parse_json(k, file, json.ptr, v, &why) == 0)
		goto out;
	line = verdict_line(k, text);
	if (line && verdict_is_decision(k, line)) {
		v->decision = line;
		line = NULL;
		if (had_json)
			engine__note(d, "contract_warning",
				     json_pack("{s:s, s:s}", "stage", s->name,
					       "error", why.msg),
				     NULL);
		goto out;
	}
	if (had_json)
		rc = err_set(e, BATON_ECONTRACT, "%s", why.msg);
	else if (line)
		rc = err_set(e, BATON_ECONTRACT,
			     "'%s: %s' is not a verdict (expected %s, %s or %s)",
			     prefix, line, ds[0], ds[1], ds[2]);
	else
		rc = err_set(e, BATON_ECONTRACT,
			     "no %s in the run folder and no '%s: ...' line "
			     "in the agent's output",
			     file, prefix);
out:
	free(line);
	buf_release(&json);
	return rc;
}

void
engine__take_unseen(struct drive *d, struct strvec *paths)
{
	size_t i, j;

	for (i = 0; i < d->unseen.nr; i++) {
		for (j = 0; j < paths->nr; j++)
			if (!strcmp(paths->v[j], d->unseen.v[i]))
				break;
		if (j == paths->nr)
			strvec_push(paths, d->unseen.v[i]);
	}
	strvec_clear(&d->unseen);
}

/*
 * Records a checkpoint commit after a stage that edits code, then holds
 * the edits to policies.allowed_paths: a path outside them blocks the run
 * with every such path named (the commit stays, for people to look at).
 */
int
engine__checkpoint(struct drive *d, const struct stage *s,
		   enum stage_result *res, char **reason, struct err *e)
{
	const struct config *cfg = d->en->cfg;
	char *msg = xasprintf("baton %s: %s\n\nRun: %s\nTask: %s", d->r.id,
			      s->name, d->r.id, d->r.task);
	char *prev = xstrdup(d->r.checkpoint ? d->r.checkpoint :
					       d->r.base_commit);
	struct strvec paths = STRVEC_INIT;
	struct buf outside = BUF_INIT;
	char *commit = NULL;
	int changed = 0, rc;
	size_t i, n = 0;

	rc = worktree_checkpoint(d->en->ws, d->r.worktree, msg, &commit,
				 &changed, e);
	if (rc)
		goto out;
	if (changed && cfg->allowed_paths.nr && prev)
		rc = worktree_changed_paths(d->en->ws, d->r.worktree, prev,
					    commit, &paths, e);
	/* and what the calls changed that git did not commit */
	engine__take_unseen(d, &paths);
	for (i = 0; !rc && i < paths.nr; i++) {
		if (config_path_allowed(cfg, paths.v[i]))
			continue;
		buf_addf(&outside, "%s%s", n++ ? ", " : "", paths.v[i]);
	}
	if (rc)
		goto out;
	/* A stage whose edits are in and allowed is done for good: a driver
	 * killed after this write goes on from here, never re-running it. */
	run_set(&d->r.checkpoint, commit);
	if (!n && !d->in_steps)
		run_set(&d->r.phase, RUN_PHASE_CHECKPOINTED);
	rc = engine__note(d, "checkpoint",
			  json_pack("{s:s, s:s, s:b}", "stage", s->name,
				    "commit", commit, "changed", changed),
			  e);
	if (!rc && n) {
		*res = STAGE_BLOCK;
		*reason = xasprintf("stage %s edited %zu file%s outside "
				    "policies.allowed_paths: %s",
				    s->name, n, n == 1 ? "" : "s",
				    outside.ptr);
		rc = engine__note(d, "policy_violation",
				  json_pack("{s:s, s:s, s:s}", "stage",
					    s->name, "policy", "allowed_paths",
					    "paths", outside.ptr),
				  e);
	}
out:
	strvec_clear(&paths);
	buf_release(&outside);
	free(commit);
	free(prev);
	free(msg);
	return rc;
}

/*
 * Holds an agent's successful output to its kind's contract and records
 * the artifacts. Returns 0 with *res set, BATON_ECONTRACT (e says why)
 * for output to retry, or another error.
 */
static int
accept_output(struct drive *d, const struct stage *s, const char *text,
	      enum stage_result *res, char **reason, struct err *e)
{
	const char *main_file = artifacts[s->kind][0];
	struct buf body = BUF_INIT, md = BUF_INIT;
	struct verdict v = { 0 };
	int rc = 0;

	*res = STAGE_PASS;
	if (d->call)
		return d->call->accept(d, s, text, res, reason, e);
	switch (s->kind) {
	case KIND_PLAN:
	case KIND_ARCHITECT:
	case KIND_FIX:
		if (read_artifact(d, main_file, &body) < 0 || !body.len) {
			buf_reset(&body);
			buf_adds(&body, text);
			buf_rtrim(&body);
			if (!body.len && s->kind != KIND_FIX) {
				rc = err_set(e, BATON_ECONTRACT,
					     "no %s in the run folder and no "
					     "final text from the agent",
					     main_file);
				break;
			}
			if (!body.len)
				buf_adds(&body, "(the fixer left no notes)");
			buf_addch(&body, '\n');
			rc = write_artifact(d, main_file, body.ptr, e);
		}
		if (!rc)
			rc = engine__keep_output(d, main_file, NULL, body.ptr, e);
		if (!rc && s->kind == KIND_FIX)
			rc = engine__checkpoint(d, s, res, reason, e);
		break;
	case KIND_EXECUTE:
		buf_addf(&body, "# Execution of %s (%s)\n\n%s\n", d->r.id,
			 s->name, text);
		rc = write_artifact(d, main_file, body.ptr, e);
		if (!rc)
			rc = engine__keep_output(d, main_file, NULL, body.ptr, e);
		if (!rc)
			rc = engine__checkpoint(d, s, res, reason, e);
		if (!rc && *res == STAGE_PASS && !strcmp(d->p->type, "assist"))
			rc = engine__escalation(d, s, res, e);
		break;
	case KIND_REVIEW:
	case KIND_VERIFY:
		rc = read_verdict(d, s, text, &v, e);
		if (rc)
			break;
		if (read_artifact(d, artifacts[s->kind][1], &md) < 0 ||
		    !md.len) {
			buf_reset(&md);
			if (v.doc)
				verdict_markdown(&v, s->kind == KIND_REVIEW ?
							    "Review" :
							    "Verification",
						&md);
			else
				buf_addf(&md, "%s\n", text);
			rc = write_artifact(d, artifacts[s->kind][1], md.ptr,
					    e);
		}
		if (!rc)
			rc = engine__keep_output(d, artifacts[s->kind][1],
						 v.decision, md.ptr, e);
		if (!rc && v.doc) {
			char *doc = json_dumps(v.doc, JSON_INDENT(2));

			rc = engine__keep_output(d, main_file, v.decision, doc,
						 e);
			free(doc);
		}
		if (rc || !v.decision)
			break;
		if (!strcmp(v.decision, "CHANGES_REQUESTED")) {
			*res = STAGE_LOOP;
		} else if (!strcmp(v.decision, "BLOCKED") ||
			   !strcmp(v.decision, "FAILED") ||
			   !strcmp(v.decision, "NEEDS_HUMAN")) {
			*res = STAGE_BLOCK;
			*reason = xasprintf(
				"%s said %s%s%s",
				s->kind == KIND_REVIEW ? "the reviewer" :
							 "the verifier",
				v.decision, v.summary ? ": " : "",
				v.summary ? v.summary : "");
		}
		break;
	default:
		BUG("accept_output for kind %d", (int)s->kind);
	}
	verdict_release(&v);
	buf_release(&body);
	buf_release(&md);
	return rc;
}

/* Context for the spawn callback while an agent or a check runs. */
struct watch {
	struct drive *d;
	const char *stage;
	const char *provider;
	const char *call;	  /* an agent's call; NULL for the checks */
	const char *out_path;	  /* what it writes (calls/<call>.stdout) */
	struct agent_watch *aw;	  /* reads out_path as it grows; or NULL */
	int rc;
};

/*
 * Agent output goes out as "agent_output" events while the agent runs,
 * one per tick that brought some. An event carries at most
 * OUTPUT_EVENT_MAX bytes of text; a tick that brought more (a flood) is
 * cut, with a note pointing at the file that has it all.
 */
#define OUTPUT_EVENT_MAX (16 * 1024)
/* What one tick reads at most before redaction and the cut. */
#define OUTPUT_READ_MAX (64 * 1024)

/*
 * Notes what the watched output gained since the last tick (final: the
 * call has ended; take the partial last line too) as one "agent_output"
 * event, redacted before it is cut, so a secret is never half shown.
 * Nothing new, nothing noted. Returns 0 or the store's error.
 */
static int
note_output(struct watch *w, int final, struct err *e)
{
	struct buf raw, text = BUF_INIT;
	const char *slash = strrchr(w->out_path, '/');
	json_t *data;
	size_t len;
	int rc = 0;

	buf_init(&raw, OUTPUT_READ_MAX);
	if (final)
		agent_watch_finish(w->aw, &raw);
	else
		agent_watch_read(w->aw, &raw);
	if (!raw.len)
		goto out;
	buf_add(&text, raw.ptr, raw.len);
	redact_buf(&text);
	len = utf8_cut(text.ptr, text.len, OUTPUT_EVENT_MAX);
	data = json_pack("{s:s, s:s, s:s}", "stage", w->stage, "call",
			 w->call ? w->call : "validation", "provider",
			 w->provider ? w->provider : "validate");
	if (len < text.len) {
		buf_setlen(&text, len);
		buf_addf(&text,
			 "\n[baton: output cut here; all of it is in %s]\n",
			 slash ? slash + 1 : w->out_path);
		json_object_set_new(data, "cut", json_true());
	}
	json_object_set_new(data, "text", json_lossy(text.ptr, text.len));
	rc = engine__note(w->d, "agent_output", data, e);
out:
	buf_release(&raw);
	buf_release(&text);
	return rc;
}

/*
 * Called by spawn while a child runs. STARTED: record its process group
 * so that a later driver can kill it if we die. WAKE: a signal arrived;
 * stop the child if it was SIGINT/SIGTERM or an abort request. TICK:
 * progress.
 */
static int
watch_child(void *arg, enum spawn_event ev, pid_t pid)
{
	struct watch *w = arg;
	struct drive *d = w->d;
	struct run fresh = { 0 };
	struct err e = ERR_INIT;

	switch (ev) {
	case SPAWN_EV_STARTED:
		d->r.agent_pid = pid;
		if (w->call)
			w->rc = engine__note(
				d, "agent_started",
				json_pack("{s:s, s:s, s:i}", "provider",
					  w->provider, "call", w->call, "pid",
					  (int)pid),
				&e);
		return 0;
	case SPAWN_EV_WAKE:
		if (engine__signalled())
			return d->stop = 1;
		if (store_run_get(d->en->store, d->r.id, &fresh, &e) == 0 &&
		    fresh.abort_requested)
			d->stop = 1;
		run_release(&fresh);
		return d->stop;
	case SPAWN_EV_TICK:
		if (w->aw && !w->rc)
			w->rc = note_output(w, 0, &e);
		engine__report_tick(d);
		if (d->en->note)
			d->en->note(d->en->note_arg, ENGINE_NOTE_TICK, &d->r);
		return 0;
	}
	return 0;
}

/* The environment an agent sees (DESIGN.md section 5, docs/agents.md). */
static void
agent_env(const struct drive *d, const struct stage *s, const char *prompt,
	  const char *out_dir, struct strvec *env)
{
	strvec_pushf(env, "BATON_RUN_ID=%s", d->r.id);
	strvec_pushf(env, "BATON_STAGE=%s", s->status);
	strvec_pushf(env, "BATON_STAGE_NAME=%s", s->name);
	strvec_pushf(env, "BATON_STAGE_KIND=%s",
		     d->call && d->call->kind ? d->call->kind :
						stage_kind_name(s->kind));
	strvec_pushf(env, "BATON_RUN_DIR=%s", d->run_dir);
	strvec_pushf(env, "BATON_OUT_DIR=%s", out_dir);
	strvec_pushf(env, "BATON_PROMPT_FILE=%s", prompt);
	strvec_pushf(env, "BATON_WORKTREE=%s", engine__work_dir(d));
	strvec_pushf(env, "BATON_ATTEMPT=%d", d->r.attempt);
	strvec_pushf(env, "BATON_REVIEW_LOOP=%d", d->r.review_loops);
	strvec_pushf(env, "BATON_TASK=%s", d->r.task);
	if (d->call) {
		strvec_pushf(env, "BATON_ARTIFACT=%s/%s", out_dir,
			     d->call->artifact);
		if (d->call->artifact_var)
			strvec_pushf(env, "%s=%s/%s", d->call->artifact_var,
				     out_dir, d->call->artifact);
		if (d->call->version)
			strvec_pushf(env, "BATON_OUTPUT_VERSION=%d",
				     d->call->version);
		if (d->call->env && d->call->env->nr)
			strvec_pushv(env, d->call->env->v);
	}
}

/* The last line of an agent's stderr, for a failure message. */
static void
last_line(const struct buf *b, char *out, size_t n)
{
	struct buf copy = BUF_INIT;
	const char *nl;

	buf_add(&copy, b->ptr, b->len);
	buf_rtrim(&copy);
	nl = strrchr(copy.ptr, '\n');
	snprintf(out, n, "%s", nl ? nl + 1 : copy.ptr);
	buf_release(&copy);
}

/*
 * The sandbox a stage's children run in (execution.sandbox, sandbox.h):
 * the user's home and the repository (with .baton/) hidden; the git
 * objects read-only; an agent also reads its run folder; read-write
 * only the worktree, its git admin folder, the call's output folder and
 * the agent's private home (out_dir and home may be NULL).
 */
static void
sandbox_for(const struct drive *d, const char *gitdir, const char *out_dir,
	    const char *home, int no_net, struct sandbox *sb)
{
	sandbox_init(sb, sandbox_mode(d->en->cfg->sandbox, NULL), no_net);
	sandbox_hide_user(sb, d->en->ws->repo);
	sandbox_git(sb, d->en->ws->common, gitdir);
	if (!no_net)
		sandbox_ro(sb, d->run_dir);
	sandbox_rw(sb, d->r.worktree);
	sandbox_rw(sb, out_dir);
	sandbox_rw(sb, home);
}

/*
 * Opens name (relative, '/'-separated) under the folder dir without
 * following a link anywhere on the way: an agent could have put one in
 * its output folder to make baton read a file it must not. Returns the
 * fd, or -1.
 */
static int
open_below(const char *dir, const char *name)
{
	char *copy = xstrdup(name), *part = copy, *slash;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int next, flags, saved = errno;

	while (fd >= 0 && part) {
		slash = strchr(part, '/');
		if (slash)
			*slash = '\0';
		flags = slash ? O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC :
				O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
		errno = EINVAL;
		next = *part && strcmp(part, "..") ? openat(fd, part, flags) :
						     -1;
		saved = errno;
		close(fd);
		errno = saved;
		fd = next;
		part = slash ? slash + 1 : NULL;
	}
	free(copy);
	if (fd < 0)
		errno = saved;
	return fd;
}

/*
 * Takes the artifact name the agent left in its output folder into the
 * run folder: a regular file only, reached without a link, at most
 * BUF_MAX_ARTIFACT bytes, written atomically. None there: nothing (an
 * agent without a sandbox may have written the run folder itself).
 * Anything else is refused with a contract_warning.
 */
static void
take_artifact(struct drive *d, const char *out_dir, const char *name)
{
	struct buf text;
	struct stat st;
	char *to = NULL, *slash;
	const char *why = NULL;
	int fd = open_below(out_dir, name);
	ssize_t n;

	buf_init(&text, BUF_MAX_ARTIFACT);
	if (fd < 0) {
		if (errno != ENOENT)
			why = "not a regular file (a link?)";
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		why = "not a regular file";
		goto out;
	}
	for (;;) {
		char chunk[8192];

		n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (buf_add(&text, chunk, (size_t)n) < 0) {
			why = "larger than the artifact limit";
			goto out;
		}
	}
	if (n < 0) {
		why = strerror(errno);
		goto out;
	}
	to = engine__run_file(d, name);
	slash = strrchr(to, '/');
	*slash = '\0';
	fs_mkdir_p(to, 0755, NULL);
	*slash = '/';
	if (fs_write_atomic(to, text.ptr, text.len, NULL) < 0)
		why = "cannot write it into the run folder";
out:
	if (why)
		engine__note(d, "contract_warning",
			     json_pack("{s:s, s:s}", "file", name, "error",
				       why),
			     NULL);
	if (fd >= 0)
		close(fd);
	free(to);
	buf_release(&text);
}

/*
 * A call's output folder, runs/<id>/out/<call>/, empty (with the
 * folders its artifacts go in) before the call; the agent's writable
 * place besides the worktree. After the call take_artifacts brings the
 * artifacts the stage expects, and only those, into the run folder.
 */
static int
make_out_dir(const struct drive *d, const char *out_dir, struct err *e)
{
	const char *name = d->call ? d->call->artifact : NULL;
	char *sub;
	int rc;

	fs_remove_tree(out_dir, NULL);
	rc = fs_mkdir_p(out_dir, 0755, e);
	if (rc || !name || !strchr(name, '/'))
		return rc;
	sub = xasprintf("%s/%.*s", out_dir,
			(int)(strrchr(name, '/') - name), name);
	rc = fs_mkdir_p(sub, 0755, e);
	free(sub);
	return rc;
}

static void
take_artifacts(struct drive *d, const struct stage *s, const char *out_dir)
{
	int i;

	if (d->call) {
		take_artifact(d, out_dir, d->call->artifact);
		return;
	}
	for (i = 0; i < 2; i++)
		if (artifacts[s->kind][i])
			take_artifact(d, out_dir, artifacts[s->kind][i]);
}

/* Adds a call's usage to the run, for status, show and the budgets. */
static void
count_usage(struct drive *d, const struct stage *s,
	    const struct agent_result *ar)
{
	d->r.tokens_in += ar->tokens_in;
	d->r.tokens_out += ar->tokens_out;
	if (ar->cost_known)
		d->r.cost_usd += ar->cost_usd;
	engine__stage_spent(d, s, ar->tokens_in + ar->tokens_out,
			    ar->cost_known ? ar->cost_usd : 0);
}

static int
note_exit(struct drive *d, const char *call,
	  const struct config_provider *prov, const struct agent_result *ar,
	  struct err *e)
{
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:i}",
		"call", call, "provider", prov->name, "type", prov->type,
		"outcome", agent_outcome_name(ar->outcome), "failure",
		agent_failure_name(ar->failure), "exit_code", ar->status,
		"duration_ms", (json_int_t)ar->duration_ms, "output_bytes",
		(json_int_t)ar->out_bytes, "tokens_in",
		(json_int_t)ar->tokens_in, "tokens_out",
		(json_int_t)ar->tokens_out, "steps", ar->steps);

	if (prov->model)
		json_object_set_new(o, "model", json_string(prov->model));
	if (ar->cost_known)
		json_object_set_new(o, "cost_usd", json_real(ar->cost_usd));
	if (ar->session_id[0])
		json_object_set_new(o, "session",
				    json_lossy_str(ar->session_id));
	if (ar->failure != AGENT_FAIL_NONE && ar->message.len)
		json_object_set_new(o, "message",
				    json_lossy(ar->message.ptr,
					       ar->message.len));
	if (ar->http_status)
		json_object_set_new(o, "http_status",
				    json_integer(ar->http_status));
	return engine__note(d, "agent_exited", o, e);
}

/*
 * A quota or an outage: waits until the agent said the limit resets,
 * else backs off (execution.backoff_seconds, doubling, with jitter),
 * then the caller tries the stage again. *stop is set when an abort or
 * a signal cut the wait short.
 */
static int
wait_for_quota(struct drive *d, const struct stage *s,
	       const struct config_provider *prov,
	       const struct agent_result *ar, int n, int *stop, struct err *e)
{
	const struct config *cfg = d->en->cfg;
	int64_t now = time_now_ms(), until, backoff;
	char when[40];
	int rc;

	backoff = (int64_t)cfg->backoff_seconds * 1000 << (n < 6 ? n : 6);
	backoff += backoff / 10 * (rand() % 100) / 100;
	until = ar->reset_at_ms > now ? ar->reset_at_ms + 1000 : now + backoff;
	if (until - now > MAX_QUOTA_WAIT_MS)
		until = now + MAX_QUOTA_WAIT_MS;
	time_fmt_iso(until, when, sizeof(when));
	rc = engine__note(
		d, "quota_wait",
		json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:i}", "stage",
			  s->name, "provider", prov->name, "failure",
			  agent_failure_name(ar->failure), "message",
			  ar->message.len ? ar->message.ptr : "", "until", when,
			  "wait_ms", (json_int_t)(until - now), "attempt", n + 1,
			  "of",
			  cfg->quota_retries),
		e);
	if (rc)
		return rc;
	if (d->en->detach) {
		/* A worker of serve: give the run back, interrupted, and
		 * let the queue wait instead of a worker. */
		d->en->resume_after_ms = until;
		d->leave = 1;
		*stop = 1;
		return engine__move(d, ST_INTERRUPTED,
				    json_pack("{s:s, s:s, s:s}", "stage",
					      s->name, "cause", "quota_wait",
					      "until", when),
				    e);
	}
	if (d->en->note)
		d->en->note(d->en->note_arg, ENGINE_NOTE_TICK, &d->r);
	*stop = engine__sleep(d, until);
	return 0;
}

/* "provider 'p' (type): message. Fix: hint" for a run that must stop. */
static char *
setup_failure(const struct stage *s, const struct config_provider *prov,
	      const struct agent_result *ar)
{
	const struct agent_info *info = agent_info(prov->type);
	const char *hint = NULL, *msg = ar->message.len ? ar->message.ptr :
				agent_failure_name(ar->failure);
	char *who = xasprintf("provider '%s' (%s): ", prov->name, prov->type);
	char *out;

	if (ar->failure == AGENT_FAIL_AUTH && info && info->auth_hint)
		hint = info->auth_hint;
	else if (ar->failure == AGENT_FAIL_MISSING && info &&
		 info->install_hint)
		hint = info->install_hint;
	if (hint && strstr(msg, hint))
		hint = NULL;	/* the agent's message names it already */
	if (!strncmp(msg, who, strlen(who)))
		msg += strlen(who);
	out = xasprintf("stage %s: %s%s%s%s", s->name, who, msg,
			hint ? ". Fix: " : "", hint ? hint : "");
	free(who);
	return out;
}

/* What landed() looks for, and whether it found it. */
struct landing {
	const char *commit;
	int found;
};

/* store_merge_list's callback for landed(): stops at a match. */
static int
is_landing(const struct merge_item *m, void *arg)
{
	struct landing *l = arg;

	l->found = (m->merged_commit && !strcmp(m->merged_commit, l->commit)) ||
		   !strcmp(m->status, MERGE_PROCESSING);
	return l->found;
}

/*
 * Whether a branch that moved during a call moved to a landing of the
 * merge queue (or one is under way): the store, not the repository,
 * says so.
 */
static int
landed(void *arg, const char *commit)
{
	struct drive *d = arg;
	struct landing l = { commit, 0 };
	struct err ignored = ERR_INIT;

	store_merge_list(d->en->store, NULL, is_landing, &l, &ignored);
	return l.found;
}

/*
 * After a call: what the agent changed that the checkpoint's diff will
 * not show goes to d->unseen, for the stage's policy; anything it may
 * not do at all (a link out of the worktree, another ref moved, the
 * worktree's git files rewritten) gives *breach, the reason that blocks
 * the stage, with a policy_violation event naming each.
 */
static int
guard_end(struct drive *d, const struct stage *s, struct worktree_guard *g,
	  char **breach, struct err *e)
{
	struct worktree_guard_check c = { .landed = landed, .arg = d };
	struct strvec breaches = STRVEC_INIT;
	struct buf all = BUF_INIT;
	json_t *list;
	size_t i;
	int rc;

	rc = worktree_guard_end(d->en->ws, d->r.worktree, g, &c, &d->unseen,
				&breaches, e);
	if (rc || !breaches.nr)
		goto out;
	list = json_array();
	for (i = 0; i < breaches.nr; i++) {
		buf_addf(&all, "%s%s", i ? "; " : "", breaches.v[i]);
		json_array_append_new(list, json_string(breaches.v[i]));
	}
	d->outcome = RUN_OUTCOME_POLICY;
	*breach = xasprintf("stage %s: the agent went outside its worktree: "
			    "%s", s->name, all.ptr);
	rc = engine__note(d, "policy_violation",
			  json_pack("{s:s, s:s, s:o, s:s}", "stage", s->name,
				    "policy", "integrity", "breaches", list,
				    "paths", all.ptr),
			  e);
out:
	strvec_clear(&breaches);
	buf_release(&all);
	return rc;
}

/*
 * One provider on one agent stage: prompt, call, contract. Broken output
 * is retried once with the error in the prompt; a quota or an outage
 * waits and tries again (execution.quota_retries times); missing
 * programs and refused credentials block the run with the fix named.
 * The stop paths (abort, signal) return STAGE_STOPPED after moving the
 * run themselves.
 */
int
engine__call(struct drive *d, const struct stage *s,
	     const struct config_provider *prov, const char *steers,
	     enum stage_result *res, char **reason, struct err *e)
{
	const struct agent_info *info = agent_info(prov->type);
	struct agent_result ar = AGENT_RESULT_INIT;
	struct worktree_guard guard = WORKTREE_GUARD_INIT;
	struct buf prompt = BUF_INIT;
	struct strvec env = STRVEC_INIT;
	struct sandbox sb = SANDBOX_INIT;
	char *retry = NULL, *call = NULL, *pfile = NULL, *ofile = NULL,
	     *breach = NULL, *efile = NULL, *home = NULL, *gitdir = NULL,
	     *out_dir = NULL,
	     *calls_dir = engine__run_file(d, "calls");
	char tail[512];
	int rc = 0, waits = 0, stop = 0;

	d->missing = 0;
	if (d->member) {
		/* the parent checked before it forked: no pausing here */
		*reason = engine__stage_budget(d->p, s, &d->r);
		if (*reason) {
			*res = STAGE_BLOCK;
			goto out;
		}
	} else if (engine__stage_pause(d, s, s, res, &rc, e)) {
		goto out;
	}
	rc = fs_mkdir_p(calls_dir, 0755, e);
	if (rc)
		goto out;
	if (sandbox_mode(d->en->cfg->sandbox, NULL) && d->r.worktree)
		worktree_git_dir(d->en->ws, d->r.worktree, &gitdir, NULL);
	for (;;) {
		struct watch w = { .d = d, .stage = s->name,
				   .provider = prov->name };
		struct agent_request req = { 0 };
		struct err cerr = ERR_INIT;

		each_artifact(d, s->kind, fs_unlink);
		free(call);
		free(pfile);
		free(ofile);
		free(efile);
		free(home);
		free(out_dir);
		call = xasprintf("%04lld-%s-%s-%d", (long long)d->r.version,
				 s->name, prov->name, d->r.attempt);
		out_dir = xasprintf("%s/out/%s", d->run_dir, call);
		rc = make_out_dir(d, out_dir, e);
		if (rc)
			goto out;
		buf_reset(&prompt);
		render_prompt(d, s, steers, retry, out_dir, &prompt);
		pfile = xasprintf("%s/%s.prompt.md", calls_dir, call);
		ofile = xasprintf("%s/%s.stdout", calls_dir, call);
		efile = xasprintf("%s/%s.stderr", calls_dir, call);
		home = info && info->is_cli ?
			       xasprintf("%s/agents/%s", d->run_dir, prov->name) :
			       xasprintf("%s/%s.http", calls_dir, call);
		rc = fs_write_atomic(pfile, prompt.ptr, prompt.len, e);
		if (!rc && info && info->is_cli)
			rc = fs_mkdir_p(home, 0700, e);
		if (rc)
			goto out;
		strvec_clear(&env);
		agent_env(d, s, pfile, out_dir, &env);
		sandbox_release(&sb);
		/* baton's own agent: its records are baton's, not the tools' */
		sandbox_for(d, gitdir, out_dir,
			    info && info->is_cli ? home : NULL, 0, &sb);
		if (d->call && d->call->ro_dir)
			sandbox_ro(&sb, d->call->ro_dir);
		w.call = call;
		w.out_path = ofile;
		w.aw = agent_watch_new(prov->type, ofile);
		req.provider = prov;
		req.cwd = engine__work_dir(d);
		req.prompt = prompt.ptr;
		req.prompt_file = pfile;
		req.env = &env;
		req.out_path = ofile;
		req.err_path = efile;
		req.home = home;
		req.sandbox = &sb;
		req.wake_fd = d->wake_fd;
		req.tick_ms = TICK_MS;
		req.on_event = watch_child;
		req.arg = &w;
		agent_result_release(&ar);
		ar = (struct agent_result)AGENT_RESULT_INIT;
		if (d->r.worktree) {
			rc = worktree_guard_begin(d->en->ws, d->r.worktree,
						  &guard, e);
			if (rc) {
				agent_watch_free(w.aw);
				goto out;
			}
		}
		rc = agent_run(&req, &ar, e);
		d->r.agent_pid = 0;
		/* nothing the agent started outlives its call (spawn.h) */
		spawn_kill_orphans();
		take_artifacts(d, s, out_dir);
		/* the rest of the output, before agent_exited says it ended */
		if (rc == 0 && w.rc == 0)
			w.rc = note_output(&w, 1, e);
		agent_watch_free(w.aw);
		if (rc == 0 && w.rc)
			rc = w.rc;
		if (rc) {
			/* baton could not do its part: the stage fails. */
			*res = STAGE_FAIL;
			*reason = xasprintf("stage %s: %s", s->name, e->msg);
			rc = 0;
			goto out;
		}
		redact_file(ofile, NULL);
		redact_file(efile, NULL);
		if (info && !info->is_cli)
			redact_dir(home, NULL);
		redact_buf(&ar.text);
		redact_buf(&ar.message);
		redact_buf(&ar.err_tail);
		each_artifact(d, s->kind, redact_file);
		count_usage(d, s, &ar);
		rc = note_exit(d, call, prov, &ar, e);
		if (!rc && d->r.worktree)
			rc = guard_end(d, s, &guard, &breach, e);
		if (rc)
			goto out;
		if (breach) {
			*res = STAGE_BLOCK;
			*reason = breach;
			breach = NULL;
			goto out;
		}
		last_line(&ar.err_tail, tail, sizeof(tail));
		if (ar.outcome == AGENT_STOPPED) {
			*res = STAGE_STOPPED;
			goto out;
		}
		switch (ar.failure) {
		case AGENT_FAIL_NONE:
			break;
		case AGENT_FAIL_QUOTA:
		case AGENT_FAIL_UNAVAILABLE:
			if (waits >= d->en->cfg->quota_retries) {
				*res = STAGE_BLOCK;
				*reason = xasprintf(
					"stage %s: provider '%s' is still %s "
					"after %d wait%s (execution."
					"quota_retries): %s",
					s->name, prov->name,
					ar.failure == AGENT_FAIL_QUOTA ?
						"rate limited" :
						"unavailable",
					waits, waits == 1 ? "" : "s",
					ar.message.ptr);
				goto out;
			}
			rc = wait_for_quota(d, s, prov, &ar, waits++, &stop, e);
			if (rc)
				goto out;
			if (stop) {
				*res = STAGE_STOPPED;
				goto out;
			}
			continue;
		case AGENT_FAIL_AUTH:
		case AGENT_FAIL_MISSING:
		case AGENT_FAIL_LIMIT:
			*res = STAGE_BLOCK;
			*reason = setup_failure(s, prov, &ar);
			d->missing = ar.failure == AGENT_FAIL_MISSING;
			goto out;
		case AGENT_FAIL_TIMEOUT:
			*res = STAGE_FAIL;
			*reason = xasprintf("stage %s: agent '%s' timed out "
					    "after %d s",
					    s->name, prov->name,
					    prov->timeout_seconds);
			goto out;
		case AGENT_FAIL_CRASH:
			*res = STAGE_FAIL;
			*reason = xasprintf(
				"stage %s: agent '%s' %s %d%s%s", s->name,
				prov->name,
				ar.outcome == AGENT_CRASHED ?
					"was killed by signal" :
					"exited with",
				ar.outcome == AGENT_CRASHED ? ar.signal :
							      ar.status,
				ar.message.len || tail[0] ? ": " : "",
				ar.message.len ? ar.message.ptr : tail);
			goto out;
		case AGENT_FAIL_BAD_OUTPUT:
			err_set(&cerr, BATON_ECONTRACT,
				"the agent's output could not be read: %s",
				ar.message.len ? ar.message.ptr : "no result");
			break;
		}
		if (ar.failure == AGENT_FAIL_NONE)
			rc = accept_output(d, s, ar.text.ptr, res, reason,
					   &cerr);
		else
			rc = BATON_ECONTRACT;
		if (rc != BATON_ECONTRACT) {
			if (rc)
				*e = cerr;
			goto out;
		}
		rc = 0;
		engine__note(d, "contract_error",
			     json_pack("{s:s, s:s, s:b}", "stage", s->name,
				       "error", cerr.msg, "retry",
				       d->r.attempt == 0),
			     NULL);
		if (d->r.attempt > 0) {
			*res = STAGE_BLOCK;
			*reason = xasprintf("stage %s: %s (still broken after "
					    "one retry)",
					    s->name, cerr.msg);
			goto out;
		}
		d->r.attempt++;
		free(retry);
		retry = xstrdup(cerr.msg);
	}
out:
	agent_result_release(&ar);
	worktree_guard_release(&guard);
	buf_release(&prompt);
	strvec_clear(&env);
	free(retry);
	free(call);
	free(pfile);
	free(ofile);
	free(efile);
	free(home);
	free(out_dir);
	free(gitdir);
	free(calls_dir);
	sandbox_release(&sb);
	return rc;
}

/* Moves a run-folder file to its name for one of several reviewers. */
static void
keep_as(struct drive *d, const char *name, const char *provider,
	struct buf *md)
{
	char *from = engine__run_file(d, name);
	const char *dot = strrchr(name, '.');
	char *as = xasprintf("%s/%.*s-%s%s", d->run_dir, (int)(dot - name),
			     name, provider, dot);

	if (md)
		fs_read_nofollow(from, md, BUF_MAX_ARTIFACT, NULL);
	if (rename(from, as) < 0 && errno != ENOENT)
		engine__note(d, "contract_warning",
			     json_pack("{s:s, s:s}", "file", from, "error",
				       strerror(errno)),
			     NULL);
	free(from);
	free(as);
}

/*
 * Several reviewers on one review stage: each reviews in turn, its
 * review-<provider>.json/.md kept apart; all must approve. One asking for
 * changes sends the run to the fix loop with every review in review.md;
 * one blocking blocks it.
 */
static int
review_by_all(struct drive *d, const struct stage *s,
	      const struct config_provider *const *provs, size_t n,
	      const char *steers, enum stage_result *res, char **reason,
	      struct err *e)
{
	static const char *const said[] = {
		[STAGE_PASS] = "APPROVED",	 [STAGE_LOOP] = "CHANGES_REQUESTED",
		[STAGE_BLOCK] = "BLOCKED",	 [STAGE_FAIL] = "FAILED",
		[STAGE_STOPPED] = "STOPPED",
	};
	struct buf all = BUF_INIT, md = BUF_INIT;
	json_t *who = json_object();
	enum stage_result worst = STAGE_PASS;
	size_t i;
	int rc = 0;

	for (i = 0; i < n && !rc; i++) {
		enum stage_result r = STAGE_FAIL;
		char *why = NULL;

		d->r.attempt = 0;
		rc = engine__call(d, s, provs[i], steers, &r, &why, e);
		if (rc || r == STAGE_STOPPED || r == STAGE_FAIL) {
			*res = r;
			*reason = why;
			goto out;
		}
		buf_reset(&md);
		keep_as(d, "review.json", provs[i]->name, NULL);
		keep_as(d, "review.md", provs[i]->name, &md);
		buf_addf(&all, "# Review by %s: %s\n\n%s\n", provs[i]->name,
			 said[r], md.ptr);
		json_object_set_new(who, provs[i]->name, json_string(said[r]));
		if (r == STAGE_BLOCK && worst != STAGE_BLOCK) {
			worst = STAGE_BLOCK;
			free(*reason);
			*reason = why;
			why = NULL;
		} else if (r == STAGE_LOOP && worst == STAGE_PASS) {
			worst = STAGE_LOOP;
		}
		free(why);
	}
	if (rc)
		goto out;
	*res = worst;
	rc = write_artifact(d, "review.md", all.ptr, e);
	if (!rc)
		rc = engine__note(d, "reviews",
				  json_pack("{s:s, s:s, s:O}", "stage", s->name,
					    "decision", said[worst], "by", who),
				  e);
out:
	json_decref(who);
	buf_release(&all);
	buf_release(&md);
	return rc;
}

struct config_provider
engine__stage_provider(const struct stage *s, const struct config_provider *p)
{
	struct config_provider own = *p;

	if (s->model)
		own.model = s->model;
	if (s->timeout_seconds)
		own.timeout_seconds = s->timeout_seconds;
	return own;
}

/* An agent stage: the role's provider, or all of a review's reviewers. */
static int
run_agent(struct drive *d, const struct stage *s, const char *steers,
	  enum stage_result *res, char **reason, struct err *e)
{
	const struct config_provider *provs[MAX_REVIEWERS];
	struct config_provider own[MAX_REVIEWERS];
	size_t i, n = 0;

	if (KIND_IS_LOOP(s->kind))
		return engine__loop_stage(d, s, steers, res, reason, e);
	if (s->kind == KIND_INTAKE || s->kind == KIND_REPORT)
		return engine__assist_stage(d, s, steers, res, reason, e);
	if (KIND_IS_RESEARCH(s->kind))
		return engine__research_stage(d, s, steers, res, reason, e);
	if (s->kind >= KIND_RCA || s->next == STAGE_BACK)
		return engine__seed_stage(d, s, steers, res, reason, e);
	if (s->providers.nr) {
		for (; n < s->providers.nr && n < ARRAY_SIZE(provs); n++)
			provs[n] = config_find_provider(d->en->cfg,
							s->providers.v[n]);
		if (n && !provs[0])
			n = 0;
	} else {
		n = config_providers_for(d->en->cfg, s->role, provs,
					 ARRAY_SIZE(provs));
	}
	if (!n) {
		*res = STAGE_FAIL;
		*reason = xasprintf("no provider plays the %s role (set "
				    "roles.%s or roles.default)",
				    s->role, s->role);
		return 0;
	}
	for (i = 0; i < n; i++) {
		own[i] = engine__stage_provider(s, provs[i]);
		provs[i] = &own[i];
	}
	if (s->kind == KIND_REVIEW && n > 1)
		return review_by_all(d, s, provs, n, steers, res, reason, e);
	return engine__call(d, s, provs[0], steers, res, reason, e);
}

int
engine__validate(struct drive *d, const struct stage *s,
		 enum stage_result *res, struct err *e)
{
	const struct config *cfg = d->en->cfg;
	struct watch w = { .d = d, .stage = s->name };
	struct sandbox sb = SANDBOX_INIT;
	struct workspace_hooks hooks = { d->wake_fd, TICK_MS, watch_child, &w,
					 &sb };
	struct validate_result vr = { 0 };
	char *gitdir = NULL;
	char *json = engine__run_file(d, "validation.json");
	char *log = engine__run_file(d, "validation.log");
	struct buf text = BUF_INIT;
	int rc;

	fs_unlink(log, NULL);
	/* the checks' output streams as the agents' does */
	w.out_path = log;
	w.aw = agent_watch_new("command", log);
	if (sandbox_mode(cfg->sandbox, NULL))
		worktree_git_dir(d->en->ws, d->r.worktree, &gitdir, NULL);
	sandbox_for(d, gitdir, NULL, NULL, 1, &sb);
	rc = validate_run(d->r.worktree, &cfg->validate_commands,
			  cfg->validate_timeout_seconds, json, log, &hooks, &vr,
			  e);
	d->r.agent_pid = 0;
	/* the checks run code the agent wrote: the same rule as its calls */
	spawn_kill_orphans();
	if (!rc && !w.rc)
		rc = note_output(&w, 1, e);
	if (rc)
		goto out;
	if (vr.stopped) {
		*res = STAGE_STOPPED;
		goto out;
	}
	fs_read_nofollow(json, &text, BUF_MAX_ARTIFACT, NULL);
	rc = engine__keep_output(d, "validation.json",
				 vr.passed ? "PASSED" : "FAILED", text.ptr, e);
	if (!rc)
		rc = engine__note(d, "validation",
				  json_pack("{s:s, s:b, s:i}", "stage", s->name,
					    "passed", vr.passed, "commands",
					    (int)cfg->validate_commands.nr),
				  e);
	*res = vr.passed ? STAGE_PASS : STAGE_LOOP;
out:
	agent_watch_free(w.aw);
	validate_result_release(&vr);
	sandbox_release(&sb);
	free(gitdir);
	buf_release(&text);
	free(json);
	free(log);
	return rc;
}

/*
 * The stage was stopped by an abort request or a signal: end the run
 * aborted, or leave it interrupted for `baton resume`.
 */
static int
stopped(struct drive *d, struct err *e)
{
	int rc = engine__reload(d, e);

	if (rc)
		return rc;
	if (d->r.abort_requested)
		return engine__abort(d, e);
	if (!strcmp(d->r.status, ST_INTERRUPTED) ||
	    !strcmp(d->r.status, ST_PAUSED))
		return 0; /* handed back: a quota wait (detach), a budget */
	return engine__move(d, ST_INTERRUPTED,
			    json_pack("{s:s, s:s}", "stage", d->r.stage,
				      "cause", "driver stopped by signal"),
			    e);
}

int
engine__run_stage(struct drive *d, const struct stage *s,
		  enum stage_result *res, char **reason, struct err *e)
{
	struct buf steers = BUF_INIT;
	int64_t upto = d->r.steer_seq, started;
	int rc;

	*res = STAGE_FAIL;
	rc = engine__pending_steers(d, &steers, &upto, e);
	if (rc)
		goto out;
	if (!d->p->no_git && (!d->r.worktree || !fs_is_dir(d->r.worktree))) {
		*reason = xasprintf("the run's worktree '%s' is gone",
				    d->r.worktree ? d->r.worktree : "(none)");
		goto out;
	}
	run_set(&d->r.phase, RUN_PHASE_RUNNING);
	d->r.phase_started_at = time_now_ms();
	/* Guidance waits for the next stage an agent does. */
	if (!KIND_IS_ENGINES(s->kind))
		d->r.steer_seq = upto;
	rc = engine__note(d, "stage_started",
			  json_pack("{s:s, s:s, s:i, s:i}", "stage", s->name,
				    "kind", stage_kind_label(s), "attempt",
				    d->r.attempt, "review_loops",
				    d->r.review_loops),
			  e);
	if (rc)
		goto out;
	d->stop = 0;
	started = time_now_ms();
	if (s->kind == KIND_VALIDATE)
		rc = engine__validate(d, s, res, e);
	else if (s->kind == KIND_CONSOLIDATE)
		rc = engine__consolidate(d, s, res, reason, e);
	else if (s->kind == KIND_PLUGIN)
		rc = engine__plugin_stage(d, s, steers.ptr, res, reason, e);
	else
		rc = run_agent(d, s, steers.ptr, res, reason, e);
	d->r.active_ms += time_now_ms() - started;
	if (!rc && *res == STAGE_STOPPED)
		rc = stopped(d, e);
out:
	buf_release(&steers);
	return rc;
}
