/*
 * The driver: takes a run from wherever it is to a terminal status,
 * one checked transition at a time (see engine.h for the model), each
 * through the door (door.c).
 *
 * Each pass of the loop looks at the run as stored and does one thing:
 *
 *   created                 make the worktree, then cross the boundary
 *                           into the first stage
 *   a stage, phase pending  run the stage (stage.c) and route its result
 *                           (route.c)
 *   a resting status        ("planned") cross the boundary into the next
 *   waiting / paused        sleep until another process wakes us
 *   interrupted             reset the worktree to the last checkpoint
 *                           (unless the stage's agent session will be
 *                           continued: resume.c) and re-enter the stage
 *
 * Crossing a boundary A → X (route.c): a gate on X sends the run to
 * waiting_for_approval; else a pause request sends it to paused (resume
 * goes to X); else the run enters X. Because every step starts from the
 * stored record, a driver that dies anywhere is replaced by the next one
 * without losing or repeating a transition.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include "core/cnode.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "core/plugin.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/redact.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* The self-pipe the driver's signal handlers write to. */
static int wake_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_signal;

static void
on_wake_signal(int sig)
{
	int saved = errno;
	char c = 'w';

	if (sig != SIGUSR1)
		got_signal = sig;
	if (wake_pipe[1] >= 0 && write(wake_pipe[1], &c, 1) < 0)
		c = 0; /* full pipe: a wake-up is pending anyway */
	errno = saved;
}

int
engine__signalled(void)
{
	return got_signal;
}

static int
install_signals(struct err *e)
{
	struct sigaction sa;

	if (wake_pipe[0] < 0 && pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return err_set(e, -errno, "cannot create a pipe: %s",
			       strerror(errno));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_wake_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	got_signal = 0;
	return 0;
}

int
engine__child_signals(struct err *e)
{
	close(wake_pipe[0]);
	close(wake_pipe[1]);
	wake_pipe[0] = wake_pipe[1] = -1;
	if (install_signals(e))
		return -1;
	return wake_pipe[0];
}

static void
restore_signals(void)
{
	signal(SIGUSR1, SIG_IGN);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
}

void
engine_init(struct engine *en, struct store *s, const struct workspace *ws,
	    const struct config *cfg)
{
	memset(en, 0, sizeof(*en));
	en->store = s;
	en->ws = ws;
	en->cfg = cfg;
	en->lock_fd = -1;
}

void
engine_release(struct engine *en)
{
	if (en->lock_fd >= 0)
		close(en->lock_fd);
	en->lock_fd = -1;
}

int
engine_pipeline(const struct engine *en, const char *name,
		struct pipeline **out, struct err *e)
{
	return pipeline_load(en->cfg->pipelines, name, out, e);
}

size_t
engine_pipeline_names(const struct engine *en, struct strvec *out)
{
	const struct cnode *user = en->cfg->pipelines;
	const char **builtin = pipeline_builtin_names();
	struct strvec more = STRVEC_INIT;
	size_t i, nuser = user ? user->nr : 0;

	for (i = 0; i < nuser; i++)
		strvec_push(out, user->kids[i]->key);
	for (i = 0; builtin[i]; i++)
		if (!user || !cnode_get(user, builtin[i]))
			strvec_push(out, builtin[i]);
	plugin_pipeline_names(&more);
	for (i = 0; i < more.nr; i++)
		if (!user || !cnode_get(user, more.v[i]))
			strvec_push(out, more.v[i]);
	strvec_clear(&more);
	return nuser;
}

/* Pushes each of p's statuses that all does not hold yet. */
static void
add_statuses(struct strvec *all, const struct pipeline *p)
{
	size_t i, j;

	for (i = 0; i < p->nr_statuses; i++) {
		for (j = 0; j < all->nr; j++)
			if (!strcmp(all->v[j], p->statuses[i]))
				break;
		if (j == all->nr)
			strvec_push(all, p->statuses[i]);
	}
}

/* Marks in hit[] the gates that name a stage or a stage's status of p. */
static void
gates_in(const struct pipeline *p, const struct strvec *gates, char *hit)
{
	size_t i, k;

	for (i = 0; i < p->nr_stages; i++)
		for (k = 0; k < gates->nr; k++)
			if (!strcmp(gates->v[k], p->stages[i].name) ||
			    !strcmp(gates->v[k], p->stages[i].status))
				hit[k] = 1;
}

int
engine_check_gates(const struct engine *en, struct err *e)
{
	const struct strvec *gates = &en->cfg->approval_stages;
	const char *workflow = en->cfg->pipeline;
	struct strvec names = STRVEC_INIT;
	struct err ignored = ERR_INIT;
	struct pipeline *p = NULL;
	struct buf known = BUF_INIT;
	char *hit;
	size_t i, k;
	int rc = 0;

	if (!gates->nr)
		return 0;
	hit = xcalloc(gates->nr, 1);
	engine_pipeline_names(en, &names);
	for (i = 0; i < names.nr; i++) {
		if (!engine_pipeline(en, names.v[i], &p, &ignored))
			gates_in(p, gates, hit);
		pipeline_free(p);
		p = NULL;
	}
	for (k = 0; k < gates->nr && hit[k]; k++)
		;
	if (k < gates->nr) {
		if (workflow && !engine_pipeline(en, workflow, &p, &ignored))
			for (i = 0; i < p->nr_stages; i++)
				buf_addf(&known, "%s%s (%s)", i ? ", " : "",
					 p->stages[i].name,
					 p->stages[i].status);
		rc = err_set(e, BATON_EINVAL,
			     "policies.require_approval_at_stages: '%s' is no "
			     "stage or stage status of any pipeline, so it "
			     "would gate nothing%s%s%s%s",
			     gates->v[k], known.len ? "; the stages of " : "",
			     known.len ? workflow : "",
			     known.len ? " are " : "",
			     known.len ? known.ptr : "");
	}
	pipeline_free(p);
	buf_release(&known);
	strvec_clear(&names);
	free(hit);
	return rc;
}

int
engine_check_status(const struct engine *en, const char *status, struct err *e)
{
	struct strvec names = STRVEC_INIT, all = STRVEC_INIT;
	struct buf list = BUF_INIT;
	struct err ignored = ERR_INIT;
	int rc = 0;
	size_t i;

	engine_pipeline_names(en, &names);
	for (i = 0; i < names.nr; i++) {
		struct pipeline *p = NULL;

		if (engine_pipeline(en, names.v[i], &p, &ignored))
			continue;
		add_statuses(&all, p);
		pipeline_free(p);
	}
	for (i = 0; i < all.nr; i++)
		if (!strcmp(all.v[i], status))
			goto out;
	for (i = 0; i < all.nr; i++)
		buf_addf(&list, "%s%s", i ? ", " : "", all.v[i]);
	rc = err_set(e, BATON_EINVAL,
		     "unknown status '%s' (a run's status is one of %s)",
		     status, list.ptr);
out:
	buf_release(&list);
	strvec_clear(&all);
	strvec_clear(&names);
	return rc;
}

void
engine__tell(struct engine *en, enum engine_note what, const struct run *r)
{
	if (en->note)
		en->note(en->note_arg, what, r);
}

int
engine_create(struct engine *en, const char *task, const char *pipeline,
	      struct run *out, struct err *e)
{
	struct run_spec spec = { .task = task, .pipeline = pipeline };

	return engine_create_spec(en, &spec, out, e);
}

/* Every provider a stage names (and its phased reviewers) exists. */
static int
check_stage_providers(const struct engine *en, const struct pipeline *p,
		      const struct stage *s, struct err *e)
{
	size_t i;

	for (i = 0; i < s->providers.nr + s->nr_phased; i++) {
		const char *name = i < s->providers.nr ?
					   s->providers.v[i] :
					   s->phased[i - s->providers.nr].provider;

		if (!config_find_provider(en->cfg, name))
			return err_set(e, BATON_EINVAL,
				       "%s%sstage '%s' of pipeline '%s' names "
				       "provider '%s', which .baton/config.yaml "
				       "does not define",
				       s->where, *s->where ? ": " : "",
				       s->name, p->name, name);
	}
	return 0;
}

int
engine__run_bound(const struct config *cfg, const struct pipeline *p)
{
	return pipeline_run_bound(p, cfg->max_review_loops,
				  cfg->loop.max_iterations);
}

/*
 * Makes the new run r's folder, which must not exist: another store in
 * the repository may have made a run of the same id at the same moment.
 * Then r is failed, saying so, and the error returned.
 */
static int
claim_run_dir(struct engine *en, const struct pipeline *p, struct run *r,
	      struct err *e)
{
	struct err ignored = ERR_INIT;
	json_t *data;
	char *text;
	int rc;

	rc = workspace_claim_run_dir(en->ws, r->id, e);
	if (rc != -EEXIST)
		return rc;
	run_set(&r->reason, e->msg);
	data = json_pack("{s:s}", "reason", e->msg);
	text = engine__event_text(data);
	engine_transition(en, p, r, ST_FAILED, text, &ignored);
	free(text);
	json_decref(data);
	return rc;
}

int
engine_create_spec(struct engine *en, const struct run_spec *spec,
		   struct run *out, struct err *e)
{
	const char *task = spec->task, *pipeline = spec->pipeline;
	struct pipeline *p = NULL;
	struct run r = { 0 };
	char *base = NULL;
	size_t i;
	int rc;

	if (!pipeline)
		pipeline = spec->read_only ? "plan-only" : en->cfg->pipeline;
	if (str_blank(task))
		return err_set(e, BATON_EINVAL, "the task is empty");
	rc = run_task_text_fits(strlen(task), e);
	if (rc)
		return rc;
	rc = engine_pipeline(en, pipeline, &p, e);
	if (rc)
		return rc;
	if (spec->read_only && !p->read_only) {
		rc = err_set(e, BATON_EINVAL,
			     "a read-only run needs a read-only pipeline, and "
			     "'%s' may edit the worktree (it has no read_only: "
			     "true); built in: plan-only, security-review",
			     p->name);
		goto out;
	}
	for (i = 0; i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];

		if (s->providers.nr) {
			rc = check_stage_providers(en, p, s, e);
			if (rc)
				goto out;
			continue;
		}
		if (s->role && !config_provider_for(en->cfg, s->role)) {
			rc = err_set(e, BATON_EINVAL,
				     "stage '%s' of pipeline '%s' needs a %s, "
				     "but no provider plays that role: set "
				     "roles.%s or roles.default in "
				     ".baton/config.yaml",
				     s->name, p->name, s->role, s->role);
			goto out;
		}
	}
	/* Refuse what cannot start before anything is on record. */
	rc = engine_check_gates(en, e);
	if (rc)
		goto out;
	rc = worktree_resolve_base(en->ws, spec->base_ref, &base, e);
	free(base);
	if (rc)
		goto out;
	r.task = xstrdup(task);
	r.base_ref = spec->base_ref ? xstrdup(spec->base_ref) : NULL;
	r.task_id = spec->task_id;
	r.pipeline = xstrdup(p->name);
	r.status = xstrdup(ST_CREATED);
	r.phase = xstrdup(RUN_PHASE_DONE);
	r.config_hash = xstrdup(en->cfg->hash);
	r.config_snapshot = engine__config_snapshot(en);
	/* the seed's reviews count their rounds against the pipeline's
	 * max_iterations; the feature loop against the config's */
	r.max_review_loops = engine__run_bound(en->cfg, p);
	/* Past every run folder, worktree and branch in the repository,
	 * whichever store made them: a run never takes over another's. */
	rc = workspace_next_free_seq(en->ws, &r.seq, e);
	if (!rc)
		rc = store_run_create(en->store, &r, e);
	if (!rc)
		rc = claim_run_dir(en, p, &r, e);
	if (rc)
		goto out;
	engine_mirror_events(en, r.id, NULL);
	*out = r;
	memset(&r, 0, sizeof(r));
out:
	run_release(&r);
	pipeline_free(p);
	return rc;
}

/* Takes the run's lock: fails with BATON_EBUSY naming the holder. */
static int
lock_run(struct drive *d, struct err *e)
{
	char *path = engine__lock_path(d->en, d->r.id);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd, rc = 0;

	fd = fs_open_nofollow(path, O_RDWR | O_CREAT, 0644, e);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	if (fcntl(fd, F_SETLK, &fl) < 0) {
		struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

		fcntl(fd, F_GETLK, &q);
		rc = err_set(e, BATON_EBUSY,
			     "run '%s' is being driven by another baton "
			     "process (pid %ld)",
			     d->r.id, (long)q.l_pid);
		close(fd);
		goto out;
	}
	d->en->lock_fd = fd;
out:
	free(path);
	return rc;
}

/* Empties the wake pipe (non-blocking): the wake-ups have been seen. */
static void
drain_wakes(struct drive *d)
{
	char drain[64];

	while (read(d->wake_fd, drain, sizeof(drain)) > 0)
		;
}

/*
 * Sleeps until a signal writes to the wake pipe. Wake-ups that arrive
 * between the caller's read of the run and this call are not lost: the
 * byte waits in the pipe.
 */
static void
sleep_until_woken(struct drive *d, int64_t deadline)
{
	struct pollfd pfd = { .fd = d->wake_fd, .events = POLLIN };
	int64_t left;
	int ms;

	engine__tell(d->en, ENGINE_NOTE_WAITING, &d->r);
	for (;;) {
		left = deadline ? deadline - time_now_ms() : -1;
		if (deadline && left <= 0)
			break;
		ms = left < 0 ? -1 : left > INT_MAX ? INT_MAX : (int)left;
		if (poll(&pfd, 1, ms) >= 0 || errno != EINTR || got_signal)
			break;
	}
	drain_wakes(d);
}

/*
 * When the question the run waits on times out (an escalation's
 * deadline_ms in progress.ask), or 0 when it never does.
 */
static int64_t
ask_deadline(const struct run *r)
{
	json_t *p, *ask;
	int64_t when = 0;

	if (strcmp(r->status, ST_WAITING) || !r->progress)
		return 0;
	p = json_loads(r->progress, 0, NULL);
	ask = json_object_get(p, "ask");
	if (json_get_str(ask, "default"))
		when = json_integer_value(json_object_get(ask, "deadline_ms"));
	json_decref(p);
	return when;
}

int64_t
engine_ask_deadline(const struct run *r)
{
	return ask_deadline(r);
}

int64_t
engine_gate_deadline(const struct config *c, const struct run *r)
{
	json_t *p;
	int asking;
	int64_t since = r->phase_started_at ? r->phase_started_at :
					      r->updated_at;

	if (!c || c->approval_timeout_seconds <= 0 ||
	    strcmp(r->status, ST_WAITING))
		return 0;
	p = r->progress ? json_loads(r->progress, 0, NULL) : NULL;
	asking = json_object_get(p, "ask") != NULL;
	json_decref(p);
	return asking ? 0 : since + c->approval_timeout_seconds * 1000LL;
}

/*
 * Nobody decided the gate in time (policies.approval_timeout_seconds):
 * it is rejected, on record first as an "approval_timeout" event.
 */
static int
gate_timed_out(struct drive *d, struct err *e)
{
	struct run out = { 0 };
	char *data, *why;
	int secs = d->en->cfg->approval_timeout_seconds;
	int rc;

	data = json_take_text(json_pack(
		"{s:s, s:i}", "gate", d->r.gate_status ? d->r.gate_status : "",
		"timeout_seconds", secs));
	why = xasprintf("No decision came within policies."
			"approval_timeout_seconds (%d s): the gate is "
			"rejected.",
			secs);
	rc = engine__add_event(d->en, d->r.id, d->r.task_id,
			       "approval_timeout", data, e);
	if (!rc)
		rc = engine_decide(d->en, d->r.id, GATE_REJECT, why, &out, e);
	run_release(&out);
	free(why);
	free(data);
	return rc ? rc : engine__reload(d, e);
}

/*
 * Nobody answered in time: the question's default is the answer, on
 * record first as an "escalation_timeout" event that names it.
 */
static int
apply_default(struct drive *d, struct err *e)
{
	json_t *p = json_loads(d->r.progress, 0, NULL);
	json_t *ask = json_object_get(p, "ask");
	const char *dflt = json_get_str(ask, "default");
	struct run out = { 0 };
	char *data, *guidance;
	int rc;

	data = json_take_text(json_pack(
		"{s:s?, s:s, s:O?, s:s}", "stage", json_get_str(ask, "stage"),
		"default", dflt, "timeout_seconds",
		json_object_get(ask, "timeout_seconds"), "applied", dflt));
	guidance = xasprintf("No answer came within the escalation's timeout: "
			     "its default, option %s, applies.",
			     dflt);
	rc = engine__add_event(d->en, d->r.id, d->r.task_id,
			       "escalation_timeout", data, e);
	if (!rc)
		rc = engine_decide(d->en, d->r.id, GATE_APPROVE, guidance,
				   &out, e);
	run_release(&out);
	free(guidance);
	free(data);
	json_decref(p);
	return rc ? rc : engine__reload(d, e);
}

/*
 * An unattended run (en->unattended) waits for nobody: a question with a
 * default takes it now; a gate, or a question without a default, ends
 * the run blocked with the question on record (an "unattended_stop"
 * event, the question kept in the run's progress); one that stands for
 * an end (its "outcome" and "why") ends with that outcome. A run paused
 * by a person's request stays paused: a person asked for it.
 */
static int
unattended_wait(struct drive *d, struct err *e)
{
	json_t *p = d->r.progress ? json_loads(d->r.progress, 0, NULL) : NULL;
	json_t *ask = json_object_get(p, "ask");
	const char *question = json_get_str(ask, "question");
	const char *stage = json_get_str(ask, "stage");
	char *data, *why;
	int rc;

	if (ask && json_get_str(ask, "default")) {
		json_decref(p);
		return apply_default(d, e);
	}
	if (ask && json_get_str(ask, "outcome") && json_get_str(ask, "why")) {
		/* a question that stands for an end: that end, as if nobody
		 * had been asked */
		why = xasprintf("unattended: %s", json_get_str(ask, "why"));
		run_set(&d->r.outcome, json_get_str(ask, "outcome"));
		data = json_take_text(json_pack("{s:s, s:s?, s:s?}", "cause",
						"question", "stage", stage,
						"question", question));
	} else if (ask) {
		why = xasprintf("unattended: stage %s asks a person and has no "
				"default answer: %s",
				stage ? stage : "?",
				question ? question : "(no text)");
		data = json_take_text(json_pack("{s:s, s:s?, s:s?}", "cause",
						"question", "stage", stage,
						"question", question));
	} else {
		const struct stage *g =
		    d->r.gate_status ? pipeline_stage_at(d->p, d->r.gate_status)
				     : NULL;

		why = xasprintf("unattended: the gate before stage %s needs a "
				"person's approval",
				g ? g->name : d->r.gate_status ? d->r.gate_status :
								 "?");
		data = json_take_text(json_pack("{s:s, s:s?}", "cause", "gate",
						"stage", g ? g->name : NULL));
	}
	rc = engine__add_event(d->en, d->r.id, d->r.task_id, "unattended_stop",
			       data, e);
	if (!rc)
		rc = engine__move_why(d, ST_BLOCKED, why, e);
	free(data);
	free(why);
	json_decref(p);
	return rc;
}

int
engine__sleep(struct drive *d, int64_t until_ms)
{
	struct pollfd pfd = { .fd = d->wake_fd, .events = POLLIN };
	struct run fresh = { 0 };
	struct err ignored = ERR_INIT;
	int64_t left;

	while ((left = until_ms - time_now_ms()) > 0) {
		int n = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);

		if (n < 0 && errno != EINTR)
			return 0;
		drain_wakes(d);
		if (got_signal)
			return 1;
		if (n > 0 &&
		    store_run_get(d->en->store, d->r.id, &fresh, &ignored) == 0 &&
		    fresh.abort_requested) {
			run_release(&fresh);
			return 1;
		}
		run_release(&fresh);
	}
	return 0;
}

/*
 * A run found in a stage at phase running has no driver (we hold the
 * lock now): its agent may even live on. Kill what is left of it and mark
 * the run interrupted.
 */
static int
recover_orphan(struct drive *d, struct err *e)
{
	if (d->r.agent_pid > 0)
		spawn_kill_group((pid_t)d->r.agent_pid, 2000);
	return engine__move(d, ST_INTERRUPTED,
			    json_pack("{s:s, s:s}", "stage", d->r.stage,
				      "cause", "driver lost"),
			    e);
}

/* Re-enters an interrupted stage from its last checkpoint. */
static int
resume_interrupted(struct drive *d, struct err *e)
{
	const struct stage *s = pipeline_stage_named(d->p, d->r.stage);
	char *session = NULL;
	json_t *data;
	int rc, keep;

	if (!s)
		return engine__move_why(d, ST_FAILED,
					   "interrupted in an unknown stage",
					   e);
	/* a session that will be continued remembers its edits: keep them */
	keep = engine__resume_keeps_worktree(d, s, &session);
	if (d->r.worktree && d->r.checkpoint) {
		rc = engine__hooks_remake(d, e);
		if (!rc && !keep)
			rc = worktree_reset(d->en->ws, d->r.worktree,
					    d->r.checkpoint, e);
		if (rc) {
			free(session);
			return rc;
		}
	}
	data = json_pack("{s:s}", "checkpoint",
			 d->r.checkpoint ? d->r.checkpoint : "");
	if (keep) {
		json_object_set_new(data, "worktree_kept", json_true());
		json_object_set_new(data, "session", json_string(session));
	}
	free(session);
	return engine__move(d, s->status, data, e);
}

/*
 * Where a new run starts. With a shared remote (repo.url) that is the
 * base branch as the remote has it now, fetched: this clone's own copy
 * may be far behind what the lander pushed since. *fetched gets the
 * fetched ref (the caller frees) or stays NULL.
 */
static int
run_base(struct drive *d, char **fetched, struct err *e)
{
	const struct config *cfg = d->en->cfg;
	char *branch = NULL;
	int rc;

	*fetched = NULL;
	if (!cfg->repo_url)
		return 0;
	rc = worktree_base_branch(d->en->ws,
				  d->r.base_ref ? d->r.base_ref :
						  cfg->merge.base_branch,
				  &branch, e);
	if (!rc)
		rc = remote_fetch_base(d->en->ws, cfg->repo_url, branch,
				       fetched, e);
	free(branch);
	return rc;
}

/* Creates the worktree of a new run and records it as the checkpoint. */
static int
make_worktree(struct drive *d, struct err *e)
{
	char *path = NULL, *branch = NULL, *base = NULL, *fetched;
	int rc, port = 0;

	rc = run_base(d, &fetched, e);
	if (!rc)
		rc = worktree_create(d->en->ws, d->r.id,
				     fetched ? fetched : d->r.base_ref, &path,
				     &branch, &base, e);
	free(fetched);
	/* the worktree's own TCP port (BATON_PORT), claimed with it */
	if (!rc)
		rc = workspace_port(d->en->ws, d->r.id, &port, e);
	if (rc)
		return rc;
	run_set(&d->r.worktree, path);
	run_set(&d->r.branch, branch);
	run_set(&d->r.base_commit, base);
	run_set(&d->r.checkpoint, base);
	rc = engine__note(d, "worktree",
			  json_pack("{s:s, s:s, s:s, s:i}", "path", path,
				    "branch", branch, "base", base, "port",
				    port),
			  e);
	free(path);
	free(branch);
	free(base);
	return rc;
}

int
engine__abort(struct drive *d, struct err *e)
{
	return engine__move_why(d, ST_ABORTED, "aborted on request", e);
}

/* One step of the driver loop; see the comment at the top of the file. */
static int
step(struct drive *d, struct err *e)
{
	const struct stage *s;
	enum stage_result res;
	char *reason = NULL;
	int rc;

	if (d->r.abort_requested)
		return engine__abort(d, e);
	if (!strcmp(d->r.status, ST_CREATED)) {
		if (!d->r.worktree && !d->p->no_git) {
			rc = make_worktree(d, e);
			if (rc)
				return rc;
		}
		return engine__cross(d, pipeline_first(d->p), NULL, 0, e);
	}
	if (!strcmp(d->r.status, ST_WAITING) ||
	    !strcmp(d->r.status, ST_PAUSED)) {
		int64_t before = d->r.version, deadline = ask_deadline(&d->r),
			gate = engine_gate_deadline(d->en->cfg, &d->r);

		if (d->en->unattended && !strcmp(d->r.status, ST_WAITING))
			return unattended_wait(d, e);
		if (deadline && time_now_ms() >= deadline)
			return apply_default(d, e);
		if (gate && time_now_ms() >= gate)
			return gate_timed_out(d, e);
		if (gate)
			deadline = gate;
		if (d->en->detach) {
			d->leave = 1; /* the worker blocks the task */
			return 0;
		}
		sleep_until_woken(d, deadline);
		rc = engine__reload(d, e);
		/* Another process moved it (approve, resume): say so. */
		if (!rc && d->r.version != before)
			engine__tell(d->en, ENGINE_NOTE_TRANSITION, &d->r);
		return rc;
	}
	if (!strcmp(d->r.status, ST_INTERRUPTED))
		return resume_interrupted(d, e);
	if ((s = pipeline_stage_done_at(d->p, d->r.status)))
		return engine__after_success(d, s, e);
	s = pipeline_stage_at(d->p, d->r.status);
	if (!s)
		return engine__move_why(d, ST_FAILED,
					   "the run is in a status its "
					   "pipeline does not know",
					   e);
	if (!strcmp(d->r.phase, RUN_PHASE_CHECKPOINTED))
		return engine__route(d, s, STAGE_PASS, NULL, e); /* see engine__checkpoint() */
	rc = engine__stage_hooks(d, HOOK_BEFORE_STAGE, &res, &reason, e);
	if (!rc && res == STAGE_PASS) {
		rc = engine__run_stage(d, s, &res, &reason, e);
		if (!rc && res != STAGE_STOPPED)
			rc = engine__stage_hooks(d, HOOK_AFTER_STAGE, NULL,
						 NULL, e);
	}
	if (!rc)
		rc = engine__route(d, s, res, reason, e);
	free(reason);
	return rc;
}

/*
 * A stage that could not even start its work (the worktree vanished, the
 * disk is full) ends the run failed with the error on record, rather than
 * leaving it half-way with nobody to notice.
 */
static int
fail_with(struct drive *d, const struct err *cause, struct err *e)
{
	struct err ignored = ERR_INIT;
	char *why = xasprintf("%s", cause->msg);
	int rc;

	if (engine__reload(d, &ignored) || status_is_terminal(d->r.status)) {
		free(why);
		return cause->rc;
	}
	rc = engine__move_why(d, ST_FAILED, why, e);
	free(why);
	return rc ? rc : cause->rc;
}

/* Whether a step failed because the disk (or the quota) is full. */
static int
is_out_of_space(const struct err *cause)
{
	return cause->rc == -ENOSPC || cause->rc == -EDQUOT ||
	       strstr(cause->msg, strerror(ENOSPC)) ||
	       strstr(cause->msg, strerror(EDQUOT)) ||
	       strstr(cause->msg, "disk is full");
}

/*
 * The disk is full: the run is not at fault, so it is not failed but
 * left interrupted in its stage, to be resumed once there is room. The
 * reserve is given back first (workspace_reserve_space) so that the
 * store has room to say so. The error says what to do either way.
 */
static int
interrupt_for_space(struct drive *d, const struct err *cause, struct err *e)
{
	struct err ignored = ERR_INIT;
	const char *where = "stopped";

	workspace_release_space(d->en->ws);
	if (engine__reload(d, &ignored) == 0) {
		if (!strcmp(d->r.status, ST_INTERRUPTED))
			where = "is interrupted";
		else if (pipeline_stage_at(d->p, d->r.status) &&
			 engine__move(d, ST_INTERRUPTED,
				      json_pack("{s:s, s:s, s:s}", "stage",
						d->r.stage ? d->r.stage : "",
						"cause", "disk full", "reason",
						cause->msg),
				      &ignored) == 0)
			where = "is interrupted";
	}
	return err_set(e, -ENOSPC,
		       "%s; run '%s' %s: free space on the disk, then "
		       "continue with: baton resume %s",
		       cause->msg, d->r.id, where, d->r.id);
}

/*
 * A run keeps to the config it started under: when the config changed
 * since, the driver works with the run's snapshot (and its pipeline), so
 * a run never mixes two configs. `baton resume --current` adopts the new
 * one instead (control.c).
 */
static int
keep_to_snapshot(struct drive *d, struct config **own, struct err *e)
{
	struct pipeline *p = NULL;
	int rc = engine__run_config(d->en, &d->r, own, e);

	if (rc || !*own)
		return rc;
	d->en->cfg = *own;
	rc = engine_pipeline(d->en, d->r.pipeline, &p, e);
	if (rc)
		return rc;
	pipeline_free(d->p);
	d->p = p;
	return 0;
}

/* The task's own policy laid over a config (task_policy()). */
struct task_policy {
	struct config cfg; /* a shallow copy: borrows all but these two */
	struct strvec paths, checks;
};

/*
 * A task's run works under the task's own policy (`baton task add
 * --allow/--verify`, a plan's allowed_paths and verify): its allowed
 * paths instead of the config's, its verification commands after the
 * config's checks. Laid over the config the run keeps to, the current one
 * or its snapshot, by whoever drives it: a worker, `baton resume`, a
 * fresh start.
 */
static int
task_policy(struct drive *d, struct task_policy *tp, struct err *e)
{
	struct task t = { 0 };
	int rc;

	if (!d->r.task_id)
		return 0;
	rc = store_task_get(d->en->store, d->r.task_id, &t, e);
	if (rc)
		return err_prefix(e, "the policy of task t%lld",
				  (long long)d->r.task_id);
	tp->cfg = *d->en->cfg;
	if (json_text_strings(t.allowed_paths, &tp->paths) > 0)
		tp->cfg.allowed_paths = tp->paths;
	strvec_pushv(&tp->checks,
		     (const char *const *)d->en->cfg->validate_commands.v);
	if (json_text_strings(t.verify, &tp->checks) > 0)
		tp->cfg.validate_commands = tp->checks;
	d->en->cfg = &tp->cfg;
	task_release(&t);
	return 0;
}

/*
 * Says, as a "sandbox" event each time a driver takes the run, whether
 * its agents and checks run in the sandbox (execution.sandbox) and why.
 * Off, baton's gates and policies are advisory only: an agent can read
 * the token and call the API, or write the run folder; that is also
 * logged as a warning, which `baton run` shows.
 */
static int
note_sandbox(struct drive *d, struct err *e)
{
	struct buf why = BUF_INIT;
	int on = sandbox_mode(d->en->cfg->sandbox, &why), rc;
	json_t *o = json_pack("{s:b, s:s, s:s}", "on", on, "mode",
			      d->en->cfg->sandbox ? d->en->cfg->sandbox : "auto",
			      "why", why.ptr);

	if (!on) {
		json_object_set_new(o, "advisory",
				    json_string("gates and policies are "
						"advisory only: agents can "
						"reach .baton/ and the API"));
		log_warn("run %s: no sandbox (%s): gates and policies are "
			 "advisory only",
			 d->r.id, why.ptr);
	}
	rc = engine__note(d, "sandbox", o, e);
	buf_release(&why);
	return rc;
}

int
engine_drive(struct engine *en, const char *ref, struct run *out,
	     struct err *e)
{
	struct drive d = { .en = en,
			   .wake_fd = -1,
			   .unseen = STRVEC_INIT,
			   .downgraded = STRVEC_INIT };
	const struct config *cfg = en->cfg;
	struct config *own = NULL;
	struct task_policy tp = { .paths = STRVEC_INIT, .checks = STRVEC_INIT };
	int rc;

	rc = store_run_get(en->store, ref, &d.r, e);
	if (rc)
		return rc;
	d.run_dir = workspace_run_dir(en->ws, d.r.id);
	/* what an agent daemonizes is reparented to us, to be killed */
	spawn_adopt_orphans();
	rc = fs_mkdir_p(d.run_dir, 0755, e);
	if (!rc)
		rc = engine_pipeline(en, d.r.pipeline, &d.p, e);
	if (!rc)
		workspace_reserve_space(en->ws);
	if (!rc)
		rc = install_signals(e);
	if (!rc)
		rc = lock_run(&d, e);
	if (rc)
		goto out;
	d.wake_fd = wake_pipe[0];
	/* The record may have moved before we held the lock. */
	rc = engine__reload(&d, e);
	if (!rc)
		rc = keep_to_snapshot(&d, &own, e);
	if (!rc)
		rc = task_policy(&d, &tp, e);
	if (rc)
		goto out;
	engine_mirror_events(en, d.r.id, NULL);
	if (!status_is_terminal(d.r.status))
		rc = note_sandbox(&d, e);
	if (rc)
		goto out;
	if (pipeline_stage_at(d.p, d.r.status) &&
	    !strcmp(d.r.phase, RUN_PHASE_RUNNING)) {
		rc = recover_orphan(&d, e);
		if (rc)
			goto out;
	}
	while (!status_is_terminal(d.r.status) && !d.leave) {
		if (got_signal) {
			rc = err_set(e, BATON_EABORTED,
				     "stopped by signal %d; run '%s' is %s "
				     "(continue with: baton resume %s)",
				     (int)got_signal, d.r.id, d.r.status,
				     d.r.id);
			break;
		}
		rc = step(&d, e);
		if (rc == BATON_ECONFLICT) {
			/* Someone else wrote the run (a pause, an abort,
			 * a decision): read it again and decide anew. */
			rc = engine__reload(&d, e);
		}
		if (rc) {
			struct err cause = *e;

			if (is_out_of_space(&cause))
				rc = interrupt_for_space(&d, &cause, e);
			else
				rc = fail_with(&d, &cause, e);
			if (!rc)
				rc = cause.rc;
			break;
		}
	}
	if (!rc || status_is_terminal(d.r.status) || d.leave) {
		run_copy(out, &d.r);
		rc = rc == BATON_EABORTED ? rc : 0;
	}
out:
	restore_signals();
	engine_release(en);
	en->cfg = cfg;
	if (own) {
		config_release(own);
		free(own);
	}
	strvec_clear(&tp.paths);
	strvec_clear(&tp.checks);
	json_decref(d.ask);
	free(d.ask_to);
	run_release(&d.r);
	strvec_clear(&d.unseen);
	strvec_clear(&d.downgraded);
	pipeline_free(d.p);
	free(d.run_dir);
	free(d.ckpt_tip);
	return rc;
}
