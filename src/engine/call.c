/*
 * Calls: an agent's, and the project's checks. engine__call makes one
 * call of a provider for a stage: the prompt (prompt.c), the agent in
 * the run's worktree through spawn and the sandbox, its output streamed
 * as events, its artifacts taken from its output folder, its contract
 * held (its call_spec's, else its kind's accept), retried once with the
 * error in the prompt; a second failure blocks the run with the error on
 * record. A call that fails as a process is tried again as often as its
 * failure class allows (core/failclass.h, execution.retry_limits), the
 * next prompt saying what failed: the class, its signature and the last
 * lines of the output (the failure delta). Usage, quota waits, and a
 * worktree guard that refuses what an agent did outside its worktree go
 * with it. engine__validate runs the project's checks the same way.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "core/config.h"
#include "core/failclass.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/redact.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#define TICK_MS 1000
/* What a failure delta keeps of the failed call's output and stderr. */
#define DELTA_TAIL_BYTES (8 * 1024)
#define DELTA_OUT_LINES 30
#define DELTA_ERR_LINES 15

/*
 * Agent output goes out as "agent_output" events while the agent runs,
 * one per tick that brought some. An event carries at most
 * OUTPUT_EVENT_MAX bytes of text; a tick that brought more (a flood) is
 * cut, with a note pointing at the file that has it all.
 */
#define OUTPUT_EVENT_MAX (16 * 1024)
/* What one tick reads at most before redaction and the cut. */
#define OUTPUT_READ_MAX (64 * 1024)

/* What landed() looks for, and whether it found it. */
struct landing {
	const char *commit;
	int found;
};

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

		if (!kind_info(k)->artifact[i])
			continue;
		path = engine__run_file(d, kind_info(k)->artifact[i]);
		fn(path, NULL);
		free(path);
	}
}

/*
 * Holds a call's output to its contract: its call_spec's, else its
 * kind's. Returns 0 with *res set, BATON_ECONTRACT (e says why) for
 * output to retry, or another error.
 */
static int
accept(struct drive *d, const struct stage *s, const char *text,
       enum stage_result *res, char **reason, struct err *e)
{
	const struct stage_ops *ops = stage_ops_for(d->p, s);

	*res = STAGE_PASS;
	if (d->call)
		return d->call->accept(d, s, text, res, reason, e);
	if (!ops->accept)
		BUG("stage %s (%s) has no contract", s->name,
		    stage_kind_name(s->kind));
	return ops->accept(d, s, text, res, reason, e);
}

/* Context for the spawn callback while an agent or a check runs. */
struct watch {
	struct drive *d;
	const char *stage;
	const char *provider;
	const char *call;	  /* an agent's call; NULL for the checks */
	const char *part;	  /* d->call's artifact, or NULL */
	const char *role;	  /* the stage's role, or NULL */
	const char *type;	  /* the provider's type */
	int session_noted;	  /* its agent_session event is on record */
	const char *out_path;	  /* what it writes (calls/<call>.stdout) */
	struct agent_watch *aw;	  /* reads out_path as it grows; or NULL */
	int rc;
};

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
 * Puts the session id a running call has named (sid; "" none yet) on
 * record as an "agent_session" event, once: a call cut off before it
 * ends can then still be resumed (resume.c). An id that is not a plain
 * token is not recorded. Returns 0 or the store's error.
 */
static int
note_session(struct watch *w, const char *sid, struct err *e)
{
	if (w->session_noted || !w->call || !sid || !*sid)
		return 0;
	w->session_noted = 1;
	if (!agent_session_id_ok(sid))
		return 0;
	return engine__note(w->d, "agent_session",
			    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s?}",
				      "stage", w->stage, "provider",
				      w->provider, "type", w->type, "call",
				      w->call, "session", sid, "part",
				      w->part, "role", w->role),
			    e);
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
				json_pack("{s:s, s:s, s:i, s:s, s:s, s:s?, "
					  "s:s?}",
					  "provider", w->provider, "call",
					  w->call, "pid", (int)pid, "stage",
					  w->stage, "type", w->type, "part",
					  w->part, "role", w->role),
				&e);
		return 0;
	case SPAWN_EV_WAKE:
		if (engine__signalled())
			return d->stop = 1;
		if (store_run_get(d->en->store, d->r.id, &fresh, &e) == 0 &&
		    fresh.abort_requested)
			d->stop = 1;
		run_release(&fresh);
		/* guidance to steer now: this call stops, and is made again */
		if (!d->stop && w->call && !d->member && engine__steer_now(d))
			d->steered = 1;
		return d->stop || d->steered;
	case SPAWN_EV_TICK:
		if (w->aw && !w->rc)
			w->rc = note_output(w, 0, &e);
		if (w->aw && !w->rc)
			w->rc = note_session(w, agent_watch_session(w->aw),
					     &e);
		engine__report_tick(d);
		if (d->en->note)
			d->en->note(d->en->note_arg, ENGINE_NOTE_TICK, &d->r);
		return 0;
	}
	return 0;
}

/*
 * The agent was stopped to be steered now (engine_steer_mode, NOW):
 * more gets the stage's guidance so far and what came since, the run
 * records that it was taken (steer_applied, which also moves steer_seq
 * past it), and the call is made again.
 */
static int
steer_again(struct drive *d, const struct stage *s, const char *steers,
	    struct buf *more, struct err *e)
{
	struct buf fresh = BUF_INIT;
	int64_t upto = d->r.steer_seq;
	int rc;

	d->steered = 0;
	if (!more->len && steers)
		buf_addf(more, "%s", steers);
	rc = engine__pending_steers(d, &fresh, &upto, e);
	if (!rc) {
		buf_addf(more, "%s", fresh.ptr ? fresh.ptr : "");
		d->r.steer_seq = upto;
		rc = engine__note(d, "steer_applied",
				  json_pack("{s:s, s:I}", "stage", s->name,
					    "upto", (json_int_t)upto),
				  e);
	}
	buf_release(&fresh);
	return rc;
}

/* The environment an agent sees (DESIGN.md section 5, docs/agents.md). */
static void
agent_env(const struct drive *d, const struct stage *s, const char *prompt,
	  const char *out_dir, struct strvec *env)
{
	int port = d->r.worktree ? workspace_port_get(d->en->ws, d->r.id) : 0;

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
	if (port)
		strvec_pushf(env, "BATON_PORT=%d", port);
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
 * A read-only pipeline (read_only: true): whatever the call changed in
 * the worktree (the guard's lstat snapshot, ignored files included, in
 * d->unseen) or on the run's branch (its tip, read by baton's own git,
 * against the last checkpoint or the fork point) is a policy violation
 * that blocks the run. The guard has already blocked what went outside
 * (links out, .git config and hooks, other refs). *breach gets the
 * reason, or stays NULL.
 */
static int
read_only_breach(struct drive *d, const struct stage *s, char **breach,
		 struct err *e)
{
	const char *was = d->r.checkpoint ? d->r.checkpoint : d->r.base_commit;
	char *ref = xasprintf("refs/heads/%s", d->r.branch ? d->r.branch : "");
	char *tip = NULL;
	struct buf all = BUF_INIT;
	size_t i;
	int rc = 0;

	for (i = 0; i < d->unseen.nr && i < 20; i++)
		buf_addf(&all, "%s%s", i ? ", " : "", d->unseen.v[i]);
	if (d->unseen.nr > 20)
		buf_addf(&all, " and %zu more", d->unseen.nr - 20);
	if (d->r.branch && was &&
	    workspace_resolve(d->en->ws, ref, &tip, NULL) == 0 && tip &&
	    strcmp(tip, was))
		buf_addf(&all, "%sthe branch %s (moved to %.12s)",
			 all.len ? "; " : "", d->r.branch, tip);
	if (all.len) {
		*breach = xasprintf("stage %s changed the worktree of a "
				    "read-only run (pipeline %s): %s",
				    s->name, d->p->name, all.ptr);
		rc = engine__note(d, "policy_violation",
				  json_pack("{s:s, s:s, s:s}", "stage",
					    s->name, "policy", "read_only",
					    "paths", all.ptr),
				  e);
	}
	strvec_clear(&d->unseen);
	buf_release(&all);
	free(tip);
	free(ref);
	return rc;
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
	/* a read-only pipeline's worktree and admin folder stay as
	   they are: mounted read-only (the common git dir already is) */
	sandbox_git(sb, d->en->ws->common, d->p->read_only ? NULL : gitdir);
	if (!no_net)
		sandbox_ro(sb, d->run_dir);
	if (d->p->read_only)
		sandbox_ro(sb, d->r.worktree);
	else
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
		if (kind_info(s->kind)->artifact[i])
			take_artifact(d, out_dir, kind_info(s->kind)->artifact[i]);
}

/*
 * Keeps a call's records in the store as well (engine_keep_file): its
 * prompt, its transcript (stdout, stderr) and the artifacts it left, so
 * any host can show them. After redaction, so no secret goes there.
 */
static void
keep_call_files(struct drive *d, const struct stage *s, const char *call)
{
	static const char *const ext[] = { "prompt.md", "stdout", "stderr" };
	char *name;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ext); i++) {
		name = xasprintf("calls/%s.%s", call, ext[i]);
		engine_keep_file(d->en, d->r.id, name, NULL);
		free(name);
	}
	if (d->call) {
		engine_keep_file(d->en, d->r.id, d->call->artifact, NULL);
		return;
	}
	for (i = 0; i < 2; i++)
		if (kind_info(s->kind)->artifact[i])
			engine_keep_file(d->en, d->r.id,
					 kind_info(s->kind)->artifact[i], NULL);
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
note_exit(struct drive *d, const struct stage *s, const char *call,
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

	json_object_set_new(o, "stage", json_string(s->name));
	if (s->role)
		json_object_set_new(o, "role", json_string(s->role));
	if (d->call)
		json_object_set_new(o, "part", json_string(d->call->artifact));
	if (prov->model)
		json_object_set_new(o, "model", json_string(prov->model));
	if (prov->effort)
		json_object_set_new(o, "effort", json_string(prov->effort));
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

/* What an ACP agent asked for and was refused: an event each. */
static int
note_refused(struct drive *d, const struct stage *s, const char *call,
	     const struct config_provider *prov,
	     const struct agent_result *ar, struct err *e)
{
	json_t *one, *data;
	size_t i;
	int rc = 0;

	json_array_foreach(ar->refused, i, one)
	{
		if (rc)
			break;
		data = json_deep_copy(one);
		json_object_set_new(data, "stage", json_string(s->name));
		json_object_set_new(data, "call", json_string(call));
		json_object_set_new(data, "provider", json_string(prov->name));
		rc = engine__note(d, "permission_refused", data, e);
	}
	return rc;
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
	int64_t now = time_now_ms(), until;
	char when[40];
	int rc;

	/* a second past the reset, so that the provider agrees it passed */
	until = agent_retry_at(ar->reset_at_ms ? ar->reset_at_ms + 1000 : 0,
			       now, cfg->backoff_seconds, n, rand());
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

/* The last n lines of s (len bytes), each as it was, into out. */
static void
last_lines(const char *s, size_t len, int n, struct buf *out)
{
	size_t start;

	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r' ||
		       s[len - 1] == ' '))
		len--;
	start = len;
	while (start > 0 && (s[start - 1] != '\n' || --n > 0))
		start--;
	buf_add(out, s + start, len - start);
}

/*
 * The last max bytes of the file at path (a call's stdout, redacted
 * already), from the first whole line in them, into out. Never through a
 * link. Nothing when it cannot be read.
 */
static void
file_tail(const char *path, size_t max, struct buf *out)
{
	struct stat st;
	char *nl;
	ssize_t n;
	int fd = fs_open_nofollow(path, O_RDONLY, 0, NULL);

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && (size_t)st.st_size > max &&
	    lseek(fd, st.st_size - (off_t)max, SEEK_SET) < 0)
		goto out;
	for (;;) {
		char chunk[4096];

		n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		buf_add_tail(out, chunk, (size_t)n);
	}
	if ((size_t)st.st_size > max && (nl = memchr(out->ptr, '\n', out->len))) {
		size_t skip = (size_t)(nl + 1 - out->ptr);

		memmove(out->ptr, nl + 1, out->len - skip);
		buf_setlen(out, out->len - skip);
	}
out:
	close(fd);
}

/*
 * The failure delta of a failed call (openTiger's context-delta): what
 * the call that tries again reads first. The class and why, the
 * signature (the same failure on every try has the same one), the
 * message, and the last lines of the output (its stdout as the agent
 * wrote it: a JSON-stream CLI's are events) and of stderr, both
 * redacted already. Replaces d->fail_delta.
 */
static void
make_delta(struct drive *d, const struct agent_result *ar,
	   const struct fail_verdict *v, const char *what, int tries,
	   int limit, const struct buf *out_tail)
{
	struct buf b = BUF_INIT, norm = BUF_INIT;
	char hash[17];

	fail_signature(what, &norm, hash);
	buf_addf(&b,
		 "Your previous attempt at this stage (call %d) failed; this "
		 "is try %d of %d for its kind of failure.\n\n"
		 "- failure class: %s (%s)\n"
		 "- signature: %s (%s)\n"
		 "- message: %s\n",
		 d->r.attempt, tries, limit, fail_class_name(v->cls),
		 v->reason, hash, norm.ptr, what);
	if (out_tail && out_tail->len) {
		buf_addf(&b, "\nThe last lines of its output:\n\n```\n");
		last_lines(out_tail->ptr, out_tail->len, DELTA_OUT_LINES, &b);
		buf_adds(&b, "\n```\n");
	}
	if (ar->err_tail.len) {
		buf_addf(&b, "\nThe last lines of its stderr:\n\n```\n");
		last_lines(ar->err_tail.ptr, ar->err_tail.len, DELTA_ERR_LINES,
			   &b);
		buf_adds(&b, "\n```\n");
	}
	buf_adds(&b, "\nDo not repeat what failed: find out why it failed and "
		     "work around it.\n");
	free(d->fail_delta);
	d->fail_delta = buf_detach(&b, NULL);
	buf_release(&norm);
}

/*
 * A call that failed as a process (crashed, exited non-zero, timed out,
 * stopped at a permission prompt...): tried again while its failure
 * class allows (execution.retry_limits, under execution.retry_cap;
 * tries[] counts per class within this stage), with the failure delta
 * for the next prompt and an agent_retry event. Returns 1 to try again;
 * 0 with *res and *reason set when it is over: a class that is never
 * tried again (permission, noop) or a failure no retry can fix blocks
 * the run, a class out of tries fails it. Negative: the store's error.
 */
static int
retry_failed(struct drive *d, const struct stage *s,
	     const struct config_provider *prov, const struct agent_result *ar,
	     const char *what, const struct buf *out_tail, int *tries,
	     enum stage_result *res, char **reason, struct err *e)
{
	const struct config *cfg = d->en->cfg;
	struct fail_verdict v;
	char hash[17];
	int limit, rc;

	agent_failure_class(ar, &v);
	limit = v.retryable ? fail_retry_limit(cfg->retry_limits[v.cls],
					       cfg->retry_cap) :
			      0;
	fail_signature(what, NULL, hash);
	if (tries[v.cls] < limit) {
		tries[v.cls]++;
		make_delta(d, ar, &v, what, tries[v.cls], limit, out_tail);
		rc = engine__note(
			d, "agent_retry",
			json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i}",
				  "stage", s->name, "provider", prov->name,
				  "class", fail_class_name(v.cls), "reason",
				  v.reason, "signature", hash, "try",
				  tries[v.cls], "of", limit),
			e);
		return rc < 0 ? rc : 1;
	}
	*res = v.retryable ? STAGE_FAIL : STAGE_BLOCK;
	d->unanswered = v.retryable; /* out of tries, not refused */
	*reason = xasprintf("stage %s: %s (a%s %s failure, %s)", s->name, what,
			    strchr("aeiou", fail_class_name(v.cls)[0]) ? "n" :
									 "",
			    fail_class_name(v.cls),
			    !fail_retry_limit(cfg->retry_limits[v.cls],
					      cfg->retry_cap) ?
				    "never tried again" :
				    "which no retry fixes");
	if (!tries[v.cls] || !limit)
		return 0;
	/* "... (a model failure, tried again 3 times)" */
	free(*reason);
	*reason = xasprintf("stage %s: %s (a%s %s failure, tried again %d "
			    "time%s)",
			    s->name, what,
			    strchr("aeiou", fail_class_name(v.cls)[0]) ? "n" : "",
			    fail_class_name(v.cls),
			    tries[v.cls], tries[v.cls] == 1 ? "" : "s");
	return 0;
}

/*
 * The provider said its context window is too small for the prompt: the
 * prompt's largest sections are cut until it is at most target bytes
 * (core/prompt.h), recorded as the event context_compacted.
 */
static int
compact_prompt(struct drive *d, const struct stage *s,
	       const struct config_provider *prov, size_t target,
	       struct buf *prompt, struct err *e)
{
	struct buf small = BUF_INIT;
	size_t before = prompt->len;
	int rc;

	prompt_compact(prompt->ptr, target, &small);
	buf_reset(prompt);
	buf_add(prompt, small.ptr, small.len);
	buf_release(&small);
	rc = engine__note(d, "context_compacted",
			  json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "stage",
				    s->name, "provider", prov->name, "how",
				    "prompt_sections", "before",
				    (json_int_t)before, "after",
				    (json_int_t)prompt->len, "target",
				    (json_int_t)target),
			  e);
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
	const struct agent_info *info; /* prov's, once the budget had its say */
	struct agent_result ar = AGENT_RESULT_INIT;
	struct worktree_guard guard = WORKTREE_GUARD_INIT;
	struct buf prompt = BUF_INIT, more = BUF_INIT;
	struct strvec env = STRVEC_INIT;
	struct sandbox sb = SANDBOX_INIT;
	struct resume_plan rp = { 0 };
	struct config_provider budgeted;
	char *retry = NULL, *call = NULL, *pfile = NULL, *ofile = NULL,
	     *breach = NULL, *efile = NULL, *home = NULL, *gitdir = NULL,
	     *out_dir = NULL,
	     *calls_dir = engine__run_file(d, "calls");
	char tail[512];
	struct buf out_tail, what = BUF_INIT;
	int tries[FAIL_CLASS_N] = { 0 };
	int rc = 0, waits = 0, stop = 0, contract_tries = 0, keep_plan = 0;
	/* a context overflow: the prompt is cut to this size, once */
	size_t compact_to = 0;
	int compacted = 0;

	buf_init(&out_tail, DELTA_TAIL_BYTES);
	d->missing = 0;
	d->needs = NULL;
	d->unanswered = 0;
	d->steered = 0;
	if (d->member) {
		/* the parent checked before it forked: no pausing here */
		*reason = engine__stage_budget(d->p, s, &d->r);
		if (*reason) {
			*res = STAGE_BLOCK;
			goto out;
		}
	} else if (engine__stage_pause(d, s, s, res, &rc, e) ||
		   engine__budget_check(d, s, prov, res, reason, &rc, e)) {
		goto out;
	}
	/* the role's downgrade and the effort the budget left (budget.c) */
	prov = engine__budget_provider(d, s, prov, &budgeted);
	info = agent_info(prov->type);
	rc = fs_mkdir_p(calls_dir, 0755, e);
	if (rc)
		goto out;
	if (sandbox_mode(d->en->cfg->sandbox, NULL) && d->r.worktree)
		worktree_git_dir(d->en->ws, d->r.worktree, &gitdir, NULL);
	for (;;) {
		struct watch w = { .d = d, .stage = s->name,
				   .provider = prov->name, .type = prov->type,
				   .part = d->call ? d->call->artifact : NULL,
				   .role = s->role };
		struct agent_request req = { 0 };
		struct err cerr = ERR_INIT;

		each_artifact(d, s->kind, fs_unlink);
		FREE_AND_NULL(call);
		FREE_AND_NULL(pfile);
		FREE_AND_NULL(ofile);
		FREE_AND_NULL(efile);
		FREE_AND_NULL(home);
		FREE_AND_NULL(out_dir);
		call = d->member_no ?
			       xasprintf("%04lld-%s-%s-%d-m%d",
					 (long long)d->r.version, s->name,
					 prov->name, d->r.attempt,
					 d->member_no) :
			       xasprintf("%04lld-%s-%s-%d",
					 (long long)d->r.version, s->name,
					 prov->name, d->r.attempt);
		out_dir = xasprintf("%s/out/%s", d->run_dir, call);
		pfile = xasprintf("%s/%s.prompt.md", calls_dir, call);
		ofile = xasprintf("%s/%s.stdout", calls_dir, call);
		efile = xasprintf("%s/%s.stderr", calls_dir, call);
		home = info && info->is_cli ?
			       xasprintf("%s/agents/%s", d->run_dir, prov->name) :
			       xasprintf("%s/%s.http", calls_dir, call);
		rc = make_out_dir(d, out_dir, e);
		/* an earlier call of this stage to continue (resume.c) */
		if (!rc && !keep_plan)
			rc = engine__resume_plan(d, s, prov, &rp, e);
		keep_plan = 0;
		if (!rc)
			rc = engine__resume_note(d, s, prov, &rp, e);
		if (rc)
			goto out;
		buf_reset(&prompt);
		if (rp.note)
			buf_adds(&prompt, rp.note);
		engine__render_prompt(d, s, more.len ? more.ptr : steers, retry,
				      out_dir, &prompt);
		if (compact_to && prompt.len > compact_to)
			rc = compact_prompt(d, s, prov, compact_to, &prompt, e);
		if (!rc)
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
		req.resume_session = rp.path && !strcmp(rp.path, "native") ?
					     rp.session :
					     NULL;
		req.sandbox = &sb;
		req.wake_fd = d->wake_fd;
		req.tick_ms = TICK_MS;
		req.on_event = watch_child;
		req.arg = &w;
		req.policy = d->call ? d->call->policy : NULL;
		req.allowed_paths = &d->en->cfg->allowed_paths;
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
		/* the prompt had it; a new failure makes a new one */
		FREE_AND_NULL(d->fail_delta);
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
		keep_call_files(d, s, call);
		count_usage(d, s, &ar);
		rc = note_refused(d, s, call, prov, &ar, e);
		if (!rc)
			rc = note_exit(d, s, call, prov, &ar, e);
		if (!rc && d->r.worktree)
			rc = guard_end(d, s, &guard, &breach, e);
		if (rc)
			goto out;
		if (!breach && d->p->read_only)
			rc = read_only_breach(d, s, &breach, e);
		if (rc)
			goto out;
		if (breach) {
			*res = STAGE_BLOCK;
			*reason = breach;
			breach = NULL;
			goto out;
		}
		last_line(&ar.err_tail, tail, sizeof(tail));
		if (ar.compacted_before)
			engine__note(d, "context_compacted",
				     json_pack("{s:s, s:s, s:s, s:I, s:I}",
					       "stage", s->name, "provider",
					       prov->name, "how",
					       "tool_results", "before",
					       (json_int_t)ar.compacted_before,
					       "after",
					       (json_int_t)ar.compacted_after),
				     NULL);
		if (ar.outcome == AGENT_STOPPED && d->steered && !d->stop) {
			rc = steer_again(d, s, steers, &more, e);
			if (rc)
				goto out;
			continue;
		}
		if (ar.outcome == AGENT_STOPPED) {
			*res = STAGE_STOPPED;
			goto out;
		}
		/*
		 * The agent would not continue the session (it does not
		 * know it, its files are gone): once, a fresh call told
		 * what the cut-off one did instead.
		 */
		if (req.resume_session && !ar.tokens_out &&
		    (ar.failure == AGENT_FAIL_CRASH ||
		     ar.failure == AGENT_FAIL_BAD_OUTPUT)) {
			engine__resume_fallback(d, s, prov, &rp,
						ar.message.len ? ar.message.ptr :
								 tail);
			keep_plan = 1;
			continue;
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
		case AGENT_FAIL_CONTEXT:
			/* the seed's error table: compact, then retry once */
			if (compacted) {
				*res = STAGE_BLOCK;
				*reason = xasprintf(
					"stage %s: the prompt is still too "
					"large for provider '%s''s context "
					"window after it was compacted to %zu "
					"bytes: %s",
					s->name, prov->name, prompt.len,
					ar.message.len ? ar.message.ptr : tail);
				goto out;
			}
			compacted = 1;
			compact_to = prompt.len / 2;
			d->r.attempt++;
			continue;
		case AGENT_FAIL_AUTH:
		case AGENT_FAIL_MISSING:
		case AGENT_FAIL_LIMIT:
			*res = STAGE_BLOCK;
			*reason = setup_failure(s, prov, &ar);
			d->missing = ar.failure == AGENT_FAIL_MISSING;
			if (ar.failure == AGENT_FAIL_AUTH)
				d->needs = "credential";
			goto out;
		case AGENT_FAIL_TIMEOUT:
		case AGENT_FAIL_CRASH:
			buf_reset(&what);
			if (ar.failure == AGENT_FAIL_TIMEOUT)
				buf_addf(&what, "agent '%s' timed out after %d s",
					 prov->name, prov->timeout_seconds);
			else
				buf_addf(&what, "agent '%s' %s %d%s%s",
					 prov->name,
					 ar.outcome == AGENT_CRASHED ?
						 "was killed by signal" :
						 "exited with",
					 ar.outcome == AGENT_CRASHED ?
						 ar.signal :
						 ar.status,
					 ar.message.len || tail[0] ? ": " : "",
					 ar.message.len ? ar.message.ptr : tail);
			buf_reset(&out_tail);
			file_tail(ofile, DELTA_TAIL_BYTES, &out_tail);
			rc = retry_failed(d, s, prov, &ar, what.ptr, &out_tail,
					  tries, res, reason, e);
			if (rc <= 0)
				goto out;
			rc = 0;
			d->r.attempt++;
			continue;
		case AGENT_FAIL_BAD_OUTPUT:
			err_set(&cerr, BATON_ECONTRACT,
				"the agent's output could not be read: %s",
				ar.message.len ? ar.message.ptr : "no result");
			break;
		}
		if (ar.failure == AGENT_FAIL_NONE)
			rc = accept(d, s, ar.text.ptr, res, reason,
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
				       contract_tries == 0),
			     NULL);
		if (contract_tries++ > 0) {
			*res = STAGE_BLOCK;
			d->unanswered = 1;
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
	engine__resume_release(&rp);
	FREE_AND_NULL(d->fail_delta);
	agent_result_release(&ar);
	worktree_guard_release(&guard);
	buf_release(&prompt);
	buf_release(&out_tail);
	buf_release(&what);
	buf_release(&more);
	d->steered = 0;
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
	struct strvec changed = STRVEC_INIT;
	struct validate_when when = { cfg->validate_when,
				      cfg->validate_when_nr, &changed,
				      d->r.base_commit };
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
	/* Conditional checks look at the change from the fork point to the
	   last checkpoint, names only, by baton's own git (the agent's
	   config and hooks are not read). A failure to list them runs every
	   command rather than skip one. */
	if (cfg->validate_when_nr && d->r.base_commit && d->r.checkpoint &&
	    strcmp(d->r.base_commit, d->r.checkpoint) &&
	    worktree_changed_paths(d->en->ws, d->r.worktree,
				   d->r.base_commit, d->r.checkpoint, &changed,
				   NULL) < 0)
		when.nr = 0;
	rc = validate_run(d->r.worktree, &cfg->validate_commands,
			  cfg->validate_timeout_seconds, json, log, &hooks,
			  &when, &vr, e);
	d->r.agent_pid = 0;
	/* the checks run code the agent wrote: the same rule as its calls */
	spawn_kill_orphans();
	/* their output, as a call's transcript is: redacted (the verdict
	   too: it holds the output's tails), then kept in the store for
	   every host */
	redact_file(log, NULL);
	redact_file(json, NULL);
	engine_keep_file(d->en, d->r.id, "validation.log", NULL);
	engine_keep_file(d->en, d->r.id, "validation.json", NULL);
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
	strvec_clear(&changed);
	free(gitdir);
	buf_release(&text);
	free(json);
	free(log);
	return rc;
}
