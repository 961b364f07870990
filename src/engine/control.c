/*
 * Requests from people, made from any process: pause, resume, abort,
 * steer and gate decisions. Each is written to the store first (so it
 * survives anything), then the run's live driver, if there is one, is
 * woken with SIGUSR1. The driver is found through the POSIX lock it holds
 * on .baton/runs/<id>/lock: F_GETLK names the holder's pid, and the lock
 * dies with its process, so a stale pid is never signalled.
 *
 * Config drift is here too: what changed since a run took its config
 * snapshot (snapshot.c), a run adopting the current config, and the
 * decision `baton resume` and the API's resume share before resuming
 * (engine_settle_drift). A live driver keeps the config it loaded, so a
 * run it holds cannot adopt.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cnode.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* How long abort waits for a live driver to end the run. */
#define ABORT_WAIT_MS 30000

char *
engine__lock_path(const struct engine *en, const char *run_id)
{
	return xasprintf("%s/runs/%s/lock", en->ws->dir, run_id);
}

int64_t
engine_driver_pid(const struct engine *en, const char *run_id)
{
	struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char *path;
	int64_t pid = 0;
	int fd;

	/*
	 * We drive it: our own lock is invisible to F_GETLK, and closing any
	 * descriptor of the lock file would drop the lock (POSIX record
	 * locks belong to the process and the file), so do not even open it.
	 */
	if (en->lock_fd >= 0)
		return getpid();
	path = engine__lock_path(en, run_id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return 0;
	if (fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK)
		pid = q.l_pid;
	close(fd);
	return pid;
}

int
engine_lock_idle(const struct engine *en, const char *run_id, int *fd_out,
		 struct err *e)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char *path = engine__lock_path(en, run_id), *dir;
	struct stat st;
	int fd, rc = 0;

	*fd_out = -1;
	dir = xasprintf("%s/runs/%s", en->ws->dir, run_id);
	/* the folder itself, never where a link put there points */
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = err_set(e, BATON_ENOTFOUND, "run '%s' has no folder",
			     run_id);
		goto out;
	}
	fd = fs_open_nofollow(path, O_RDWR | O_CREAT, 0644, e);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	if (fcntl(fd, F_SETLK, &fl) < 0) {
		struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

		fcntl(fd, F_GETLK, &q);
		rc = err_set(e, BATON_EBUSY, "driven by pid %ld",
			     (long)q.l_pid);
		close(fd);
		goto out;
	}
	*fd_out = fd;
out:
	free(dir);
	free(path);
	return rc;
}

void
engine_wake(const struct engine *en, const char *run_id)
{
	engine__wake(en, run_id);
}

void
engine__wake(const struct engine *en, const char *run_id)
{
	int64_t pid = engine_driver_pid(en, run_id);

	if (pid > 0 && pid != getpid())
		spawn_signal((pid_t)pid, SIGUSR1);
}

/*
 * Reads the run and its pipeline as the run's own config defines it
 * (engine__run_config); both released by the caller. A snapshot that
 * cannot be read falls back to en's config: an abort or a decision must
 * not depend on it.
 */
static int
load(struct engine *en, const char *ref, struct run *r, struct pipeline **p,
     struct err *e)
{
	struct config *own = NULL;
	int rc = store_run_get(en->store, ref, r, e);

	if (rc)
		return rc;
	engine__run_config(en, r, &own, NULL); /* own stays NULL on error */
	rc = pipeline_load((own ? own : en->cfg)->pipelines, r->pipeline, p,
			   e);
	config_release(own);
	free(own);
	return rc;
}

static int
terminal_error(const struct run *r, const char *what, struct err *e)
{
	return err_set(e, BATON_EBADSTATE,
		       "cannot %s run '%s': it is %s, which is terminal", what,
		       r->id, r->status);
}

/* BATON_EBUSY when another live process drives r. */
static int
driven_elsewhere(const struct engine *en, const struct run *r, struct err *e)
{
	int64_t pid = engine_driver_pid(en, r->id);

	if (pid <= 0 || pid == getpid())
		return 0;
	return err_set(e, BATON_EBUSY,
		       "run '%s' is driven by pid %lld, which keeps the config "
		       "it started with",
		       r->id, (long long)pid);
}

/* engine_drift for a run in hand. */
static int
drift_of(const struct engine *en, const struct run *r,
	 struct strvec *changes, struct err *e)
{
	struct cnode *old = NULL, *cur = NULL;
	struct err bad = ERR_INIT;
	char *now = NULL, *label = NULL;
	int rc;

	if (!r->config_snapshot || !r->config_hash ||
	    !strcmp(r->config_hash, en->cfg->hash))
		return 0;
	/* Both sides redacted alike: a secret is never a change, nor
	 * shown. */
	now = engine__config_snapshot(en);
	label = xasprintf("config snapshot of %s", r->id);
	rc = cnode_parse_yaml(now, strlen(now), "config", &cur, e);
	if (rc)
		goto out;
	/* A snapshot that cannot be read is a change like any other: the
	 * run can still adopt the config or start afresh. */
	if (cnode_parse_yaml(r->config_snapshot, strlen(r->config_snapshot),
			     label, &old, &bad))
		strvec_pushf(changes, "config snapshot: unreadable (%s)",
			     bad.msg);
	else
		config_diff(old, cur, changes);
out:
	cnode_free(old);
	cnode_free(cur);
	free(label);
	free(now);
	return rc;
}

static json_t *
changes_json(const struct strvec *changes)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < changes->nr; i++)
		json_array_append_new(a, json_lossy_str(changes->v[i]));
	return a;
}

/*
 * engine_adopt_config for a run in hand: r takes en's config and is
 * written. r is changed even when the write fails; the caller drops it.
 */
static int
adopt(struct engine *en, struct run *r, const struct strvec *changes,
      struct err *e)
{
	struct pipeline *p = NULL;
	json_t *data;
	int rc;

	rc = engine_pipeline(en, r->pipeline ? r->pipeline : en->cfg->pipeline,
			     &p, e);
	if (rc)
		return err_prefix(e, "run '%s' cannot take the config", r->id);
	r->max_review_loops = engine__run_bound(en->cfg, p);
	pipeline_free(p);
	data = json_pack("{s:o, s:o, s:s}", "changes", changes_json(changes),
			 "from", json_lossy_str(r->config_hash), "to",
			 en->cfg->hash);
	free(r->config_snapshot);
	r->config_snapshot = engine__config_snapshot(en);
	run_set(&r->config_hash, en->cfg->hash);
	return engine__record(en, r, "config_adopted", data, e);
}

int
engine_drift(struct engine *en, const char *ref, struct strvec *changes,
	     struct err *e)
{
	struct run r = { 0 };
	int rc = store_run_get(en->store, ref, &r, e);

	if (!rc)
		rc = drift_of(en, &r, changes, e);
	run_release(&r);
	return rc;
}

/*
 * A change line about a budget: the run's ("budget.max_tokens: ...") or a
 * pipeline stage's ("pipelines.bf.stages[3].budget.max_tokens: ...").
 */
static int
is_budget_change(const char *line)
{
	const char *key = line;

	if (!strncmp(line, "pipelines.", 10)) {
		const char *colon = strstr(line, ": ");

		key = strstr(line, "].");
		if (!key || (colon && key > colon))
			return 0;
		key += 2;
	}
	return !strncmp(key, "budget.", 7) || !strncmp(key, "budget:", 7);
}

int
engine_drift_budget_only(const struct strvec *changes)
{
	size_t i;

	for (i = 0; i < changes->nr; i++)
		if (!is_budget_change(changes->v[i]))
			return 0;
	return changes->nr > 0;
}

int
engine_adopt_config(struct engine *en, const char *ref, struct err *e)
{
	struct strvec changes = STRVEC_INIT;
	struct run r = { 0 };
	int rc = store_run_get(en->store, ref, &r, e);

	if (rc)
		goto out;
	if (status_is_terminal(r.status)) {
		rc = terminal_error(&r, "change the config of", e);
		goto out;
	}
	if (r.config_snapshot && r.config_hash &&
	    !strcmp(r.config_hash, en->cfg->hash))
		goto out;
	rc = driven_elsewhere(en, &r, e);
	if (!rc)
		rc = drift_of(en, &r, &changes, e);
	if (!rc)
		rc = adopt(en, &r, &changes, e);
out:
	strvec_clear(&changes);
	run_release(&r);
	return rc;
}

int
engine_note_drift(struct engine *en, const char *ref, const char *choice,
		  const struct strvec *changes, const char *fresh_run,
		  struct err *e)
{
	struct run r = { 0 };
	json_t *data = NULL;
	char *text;
	int rc = store_run_get(en->store, ref, &r, e);

	if (rc)
		goto out;
	data = json_pack("{s:s, s:o}", "choice", choice, "changes",
			 changes_json(changes));
	if (fresh_run)
		json_object_set_new(data, "run", json_lossy_str(fresh_run));
	text = json_dumps(data, JSON_COMPACT);
	rc = engine__add_event(en, r.id, 0, "config_drift", text, e);
	free(text);
out:
	json_decref(data);
	run_release(&r);
	return rc;
}

void
drift_outcome_release(struct drift_outcome *o)
{
	strvec_clear(&o->changes);
	run_release(&o->run);
	run_release(&o->fresh);
}

/*
 * Whether a fresh start of r attempts r's task: r is still the task's
 * current run and the task has not ended. A task that went on without r
 * (r was superseded) or is gone is left alone, and the new run is bare.
 */
static int
fresh_takes_task(struct engine *en, const struct run *r, int *out,
		 struct err *e)
{
	struct task t = { 0 };
	int rc;

	*out = 0;
	if (!r->task_id)
		return 0;
	rc = store_task_get(en->store, r->task_id, &t, e);
	if (rc == BATON_ENOTFOUND) {
		if (e)
			*e = (struct err)ERR_INIT;
		return 0;
	}
	if (rc)
		return rc;
	*out = t.run_id && !strcmp(t.run_id, r->id) &&
	       strcmp(t.status, TASK_DONE) && strcmp(t.status, TASK_FAILED) &&
	       strcmp(t.status, TASK_CANCELLED);
	task_release(&t);
	return 0;
}

/* Adds to e's message what a failed fresh start left behind; returns rc. */
static int left_behind(struct err *e, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int
left_behind(struct err *e, int rc, const char *fmt, ...)
{
	struct err cause;
	char what[256];
	va_list ap;

	if (!e)
		return rc;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	cause = *e;
	err_set(e, rc, "%s (%s)", cause.msg, what);
	return rc;
}

/*
 * DRIFT_FRESH for o->run (engine_settle_drift). The new run is made
 * first and becomes the task's before the old one is aborted: aborted
 * while still the task's current run, the old run would settle the task
 * cancelled. An error past the making names the run it leaves behind.
 */
static int
start_fresh(struct engine *en, struct drift_outcome *o, engine_rerun_cb *rerun,
	    void *rerun_arg, struct err *e)
{
	struct run_spec spec = { 0 };
	struct run done = { 0 };
	const struct run *old = &o->run;
	int task = 0, rc = 0;

	if (rerun)
		rc = fresh_takes_task(en, old, &task, e);
	if (rc)
		return rc;
	spec.task = old->task;
	spec.pipeline = old->pipeline;
	spec.base_ref = old->base_ref;
	spec.task_id = task ? old->task_id : 0;
	rc = engine_create_spec(en, &spec, &o->fresh, e);
	if (rc) {
		err_prefix(e, "cannot start '%s' afresh", old->id);
		return rc;
	}
	if (task) {
		rc = rerun(rerun_arg, old, &o->fresh, e);
		if (rc)
			return left_behind(e, rc,
					   "the new run %s is created; abort "
					   "it with: baton abort %s",
					   o->fresh.id, o->fresh.id);
	}
	rc = engine_note_drift(en, old->id, "fresh", &o->changes, o->fresh.id,
			       e);
	if (!rc)
		rc = engine_abort_reason(en, old->id,
					 "started afresh under the changed "
					 "config",
					 &done, e);
	if (rc && task) /* the task follows the new run already */
		return left_behind(e, rc,
				   "t%lld goes on with the new run %s; abort "
				   "%s with: baton abort %s",
				   (long long)old->task_id, o->fresh.id,
				   old->id, old->id);
	if (rc)
		return left_behind(e, rc,
				   "the new run %s is created; abort it with: "
				   "baton abort %s",
				   o->fresh.id, o->fresh.id);
	run_release(&o->run);
	o->run = done;
	o->result = DRIFT_RESTARTED;
	return 0;
}

int
engine_settle_drift(struct engine *en, const char *ref,
		    enum drift_choice choice, engine_rerun_cb *rerun,
		    void *rerun_arg, struct drift_outcome *out, struct err *e)
{
	struct drift_outcome *o = out; /* filled even on failure */
	struct run *r = &o->run;
	int acts = choice == DRIFT_FRESH || choice == DRIFT_CURRENT;
	int rc;

	memset(o, 0, sizeof(*o));
	strvec_init(&o->changes);
	o->result = DRIFT_NONE;
	rc = store_run_get(en->store, ref, r, e);
	if (rc || status_is_terminal(r->status))
		return rc; /* engine_resume refuses a terminal run */
	o->driver_pid = engine_driver_pid(en, r->id);
	rc = drift_of(en, r, &o->changes, e);
	if (rc)
		return rc;
	o->no_snapshot = !o->changes.nr && r->config_hash &&
			 !r->config_snapshot &&
			 strcmp(r->config_hash, en->cfg->hash);
	if (!o->changes.nr && !acts)
		return 0;
	if (choice == DRIFT_ASK && o->driver_pid <= 0 &&
	    engine_drift_budget_only(&o->changes)) {
		rc = engine_adopt_config(en, r->id, e);
		if (!rc)
			o->result = DRIFT_BUDGET;
		return rc;
	}
	if (o->driver_pid > 0 && !acts) {
		o->result = DRIFT_DRIVEN;
		return 0;
	}
	switch (choice) {
	case DRIFT_ASK:
		o->result = DRIFT_UNDECIDED;
		return 0;
	case DRIFT_SNAPSHOT:
		rc = engine_note_drift(en, r->id, "snapshot", &o->changes, NULL,
				       e);
		if (!rc)
			o->result = DRIFT_KEPT;
		return rc;
	case DRIFT_CURRENT:
		rc = engine_adopt_config(en, r->id, e);
		if (!rc)
			o->result = DRIFT_ADOPTED;
		return rc;
	case DRIFT_FRESH:
		return start_fresh(en, o, rerun, rerun_arg, e);
	}
	BUG("unknown drift choice %d", (int)choice);
}

static int
request(struct engine *en, const struct run *r, const char *flag, int value,
	const char *type, struct err *e)
{
	struct event ev = { 0 };
	int rc;

	ev.type = (char *)type;
	ev.data = engine__stamp(en, NULL);
	rc = store_run_request(en->store, r->id, flag, value, &ev, e);
	free(ev.data);
	if (!rc) {
		engine_mirror_events(en, r->id, NULL);
		engine__wake(en, r->id);
	}
	return rc;
}

int
engine_pause(struct engine *en, const char *ref, struct run *out,
	     struct err *e)
{
	struct run r = { 0 };
	int rc = store_run_get(en->store, ref, &r, e);

	if (rc)
		goto out;
	if (status_is_terminal(r.status)) {
		rc = terminal_error(&r, "pause", e);
		goto out;
	}
	if (!strcmp(r.status, ST_PAUSED) || r.pause_requested)
		goto done;
	rc = request(en, &r, "pause_requested", 1, "pause_requested", e);
	if (rc)
		goto out;
	r.pause_requested = 1;
done:
	*out = r;
	memset(&r, 0, sizeof(r));
out:
	run_release(&r);
	return rc;
}

/*
 * Why paused run r may not go on yet: the run's budget, or that of the
 * stage it is paused at (each member's, for a parallel group). NULL when
 * every budget holds; caller frees.
 */
static char *
budget_spent(struct engine *en, const struct config *cfg,
	     const struct pipeline *p, const struct run *r)
{
	const struct stage *at = NULL;
	enum budget_line line;
	char *over = engine__budget_crossed(en, cfg, r, &line);
	size_t i;

	/* a line whose action is not pause acts at the next agent call */
	if (over && cfg->budget.actions[line] != BUDGET_PAUSE)
		FREE_AND_NULL(over);
	if (r->paused_at_status)
		at = pipeline_stage_at(p, r->paused_at_status);
	for (i = 0; !over && at && i < p->nr_stages; i++) {
		const struct stage *s = &p->stages[i];

		if (s == at || (at->group && s->group == at->group))
			over = engine__stage_budget(p, s, r);
	}
	return over;
}

/*
 * The run's own config decides: its budget must allow the resume, and its
 * pipeline has the edge back. A change of nothing but budget is taken
 * first, unless a live driver holds the run (it keeps what it loaded).
 */
int
engine_resume(struct engine *en, const char *ref, int *drive_out,
	      struct run *out, struct err *e)
{
	struct strvec changes = STRVEC_INIT;
	struct pipeline *p = NULL;
	struct config *own = NULL;
	const struct config *cfg;
	struct run r = { 0 };
	char *over = NULL;
	int rc = store_run_get(en->store, ref, &r, e);

	if (rc)
		goto out;
	if (status_is_terminal(r.status)) {
		rc = terminal_error(&r, "resume", e);
		goto out;
	}
	if (r.pause_requested) {
		rc = request(en, &r, "pause_requested", 0, "pause_cancelled",
			     e);
		if (rc)
			goto out;
		r.pause_requested = 0;
	}
	if (engine_driver_pid(en, r.id) == 0) {
		rc = drift_of(en, &r, &changes, e);
		if (!rc && engine_drift_budget_only(&changes))
			rc = adopt(en, &r, &changes, e);
		if (rc)
			goto out;
	}
	rc = engine__run_config(en, &r, &own, e);
	if (rc)
		goto out;
	cfg = own ? own : en->cfg;
	rc = pipeline_load(cfg->pipelines, r.pipeline, &p, e);
	if (rc)
		goto out;
	if (!strcmp(r.status, ST_PAUSED))
		over = budget_spent(en, cfg, p, &r);
	if (over) {
		rc = err_set(e, BATON_EBADSTATE,
			     "run '%s' stays paused: %s; raise the budget in "
			     ".baton/config.yaml first",
			     r.id, over);
		free(over);
		goto out;
	}
	if (!strcmp(r.status, ST_PAUSED)) {
		char *to = xstrdup(r.paused_at_status ? r.paused_at_status :
							"");

		run_set(&r.reason, NULL); /* a budget pause said why */

		rc = engine_transition(en, p, &r, to, NULL, e);
		free(to);
		if (rc)
			goto out;
		engine__wake(en, r.id);
	}
	*drive_out = engine_driver_pid(en, r.id) == 0;
	*out = r;
	memset(&r, 0, sizeof(r));
out:
	strvec_clear(&changes);
	run_release(&r);
	pipeline_free(p);
	config_release(own);
	free(own);
	return rc;
}

int
engine_abort(struct engine *en, const char *ref, struct run *out,
	     struct err *e)
{
	return engine_abort_reason(en, ref, NULL, out, e);
}

int
engine_abort_reason(struct engine *en, const char *ref, const char *reason,
		    struct run *out, struct err *e)
{
	struct pipeline *p = NULL;
	struct run r = { 0 };
	char *data = NULL;
	int64_t deadline;
	int rc = load(en, ref, &r, &p, e);

	if (rc)
		goto out;
	if (status_is_terminal(r.status)) {
		rc = terminal_error(&r, "abort", e);
		goto out;
	}
	rc = request(en, &r, "abort_requested", 1, "abort_requested", e);
	if (rc)
		goto out;
	/* A live driver stops its agent and ends the run; wait for it. */
	deadline = time_mono_ms() + ABORT_WAIT_MS;
	while (engine_driver_pid(en, r.id) > 0 && time_mono_ms() < deadline) {
		run_release(&r);
		rc = store_run_get(en->store, ref, &r, e);
		if (rc || status_is_terminal(r.status))
			goto done;
		poll(NULL, 0, 50);
	}
	run_release(&r);
	rc = store_run_get(en->store, ref, &r, e);
	if (rc || status_is_terminal(r.status))
		goto done;
	/* Nobody drives it (or the driver is wedged): end it here, after
	 * killing whatever its agent left behind. */
	if (r.agent_pid > 0)
		spawn_kill_group((pid_t)r.agent_pid, 2000);
	if (!reason)
		reason = "aborted on request";
	run_set(&r.reason, reason);
	data = json_take_text(json_pack("{s:o}", "reason",
					json_lossy_str(reason)));
	engine__report_final(en, p, &r, ST_ABORTED, data);
	rc = engine_transition(en, p, &r, ST_ABORTED, data, e);
done:
	if (!rc) {
		*out = r;
		memset(&r, 0, sizeof(r));
	}
out:
	free(data);
	run_release(&r);
	pipeline_free(p);
	return rc;
}

static const char *const steer_modes[] = {
	[STEER_FOLLOWUP] = "followup",
	[STEER_NOW] = "steer",
	[STEER_COLLECT] = "collect",
};

int
steer_mode_parse(const char *word)
{
	size_t i;

	for (i = 0; word && i < ARRAY_SIZE(steer_modes); i++)
		if (!strcmp(word, steer_modes[i]))
			return (int)i;
	return -1;
}

const char *
steer_mode_name(enum steer_mode m)
{
	return steer_modes[m];
}

int
engine_steer(struct engine *en, const char *ref, const char *text,
	     struct err *e)
{
	return engine_steer_mode(en, ref, text, STEER_FOLLOWUP, e);
}

int
engine_steer_mode(struct engine *en, const char *ref, const char *text,
		  enum steer_mode mode, struct err *e)
{
	char *json;
	struct run r = { 0 };
	json_t *data = NULL;
	int rc;

	if (str_blank(text))
		return err_set(e, BATON_EINVAL, "the guidance is empty");
	rc = store_run_get(en->store, ref, &r, e);
	if (rc)
		goto out;
	if (status_is_terminal(r.status)) {
		rc = terminal_error(&r, "steer", e);
		goto out;
	}
	if (mode == STEER_COLLECT && !r.task_id) {
		rc = err_set(e, BATON_EINVAL,
			     "run '%s' has no task, so no next run to collect "
			     "guidance for: steer it now or as a follow-up",
			     r.id);
		goto out;
	}
	data = json_pack("{s:o}", "text", json_lossy_str(text));
	if (mode != STEER_FOLLOWUP)
		json_object_set_new(data, "mode",
				    json_string(steer_mode_name(mode)));
	json = json_dumps(data, JSON_COMPACT);
	rc = engine__add_event(en, r.id, r.task_id, "steer", json, e);
	free(json);
	/* the driver looks for it now (its host only: a signal) */
	if (!rc && mode == STEER_NOW)
		engine__wake(en, r.id);
out:
	json_decref(data);
	run_release(&r);
	return rc;
}

/* 1 when the run waits on a question of the engine of that kind. */
static int
asked(const struct run *r, const char *kind)
{
	json_t *p = r->progress ? json_loads(r->progress, 0, NULL) : NULL;
	const char *k = json_get_str(json_object_get(p, "ask"), "kind");
	int yes = k && !strcmp(k, kind);

	json_decref(p);
	return yes;
}

/*
 * A question may route its answers (progress.ask.routes, {option:
 * status}): an approval whose guidance begins with an option's name
 * ("restart-rca", or "revise-plan: keep the old API") takes that option.
 * The option, or NULL when the guidance names none; *rest the guidance
 * after it (the whole guidance when it names none).
 */
static const char *
chosen_option(const json_t *ask, const char *guidance, const char **rest)
{
	json_t *routes = json_object_get(ask, "routes");
	const char *key, *g = guidance ? guidance : "";
	json_t *v;
	size_t n = strcspn(g, ": \t\n");

	*rest = g;
	json_object_foreach(routes, key, v) {
		if (strlen(key) != n || strncmp(g, key, n))
			continue;
		g += n;
		g += strspn(g, ": \t\n");
		*rest = g;
		return key;
	}
	return NULL;
}

/*
 * An approval with guidance: the guidance reaches the next agent, and
 * when the engine asked a question (progress.ask) it is the answer the
 * asking stage reads when it runs again ({text, option?}: the option a
 * routed question's answer took, the text the rest).
 */
static int
answer(struct engine *en, struct run *r, const char *guidance,
       const char *option, struct err *e)
{
	json_t *p = r->progress ? json_loads(r->progress, 0, NULL) : NULL;
	json_t *ask = json_object_get(p, "ask"), *a;
	char *text;
	int rc = *guidance ? engine_steer(en, r->id, guidance, e) : 0;

	if (rc || !ask) {
		json_decref(p);
		return rc;
	}
	a = json_pack("{s:s}", "text", guidance);
	if (option)
		json_object_set_new(a, "option", json_string(option));
	/* a routed question is decided here, not by the stage that asked:
	 * it leaves progress, its answer stays for the stage the option
	 * enters */
	if (json_object_get(ask, "routes")) {
		json_object_set(a, "kind", json_object_get(ask, "kind"));
		json_object_del(p, "ask");
	}
	json_object_set_new(p, "answer", a);
	text = json_dumps(p, JSON_COMPACT);
	run_set(&r->progress, text);
	free(text);
	json_decref(p);
	return 0;
}

/*
 * Where approving the question in progress (may be NULL) with guidance
 * takes run r: the chosen option's status, else the question's own.
 * Taking the option named by the question's "round" (going on with the
 * fix loop) spends a round of the run's budget, and raises the budget by
 * one when it is spent: the person granted it.
 */
static char *
approved_to(struct run *r, const json_t *ask, const char *guidance,
	    const char **option, const char **rest)
{
	json_t *routes = json_object_get(ask, "routes");
	const char *to = r->gate_status ? r->gate_status : "";
	const char *round = json_get_str(routes, json_get_str(ask, "round"));

	*option = chosen_option(ask, guidance, rest);
	if (*option) {
		to = json_get_str(routes, *option);
	} else {
		const char *key;
		json_t *v;

		/* a plain approval takes the option that goes where the
		 * question does */
		json_object_foreach(routes, key, v) {
			if (!*option && !strcmp(json_string_value(v), to))
				*option = key;
		}
	}
	if (round && !strcmp(to, round)) {
		if (r->review_loops >= r->max_review_loops)
			r->max_review_loops = r->review_loops + 1;
		r->review_loops++;
	}
	return xstrdup(to);
}

/*
 * A rejection at a question that stands for an end (progress.ask's
 * "outcome" and "why": rounds spent, a rejected change, a failed
 * implementation) ends the run with that outcome and reason; any other
 * rejection is the gate's (plan_rejected at that question).
 */
static void
rejected(struct run *r, const json_t *ask, const char *guidance)
{
	const char *outcome = json_get_str(ask, "outcome");
	const char *why = json_get_str(ask, "why");
	const char *kind = json_get_str(ask, "kind");
	const char *g = guidance && *guidance ? guidance : NULL;

	free(r->reason);
	if (outcome && why) {
		run_set(&r->outcome, outcome);
		r->reason = g ? xasprintf("%s; a person rejected going on: %s",
					  why, g) :
				xasprintf("%s; a person rejected going on",
					  why);
		return;
	}
	run_set(&r->outcome, kind && !strcmp(kind, "plan_rejected") ?
				     RUN_OUTCOME_PLAN_REJECTED :
				     RUN_OUTCOME_GATE_REJECTED);
	r->reason = g ? xasprintf("rejected at the gate into %s: %s",
				  r->gate_status, g) :
			xasprintf("rejected at the gate into %s",
				  r->gate_status);
}

/*
 * The question is decided: its deadline goes, so that a later wait (a
 * gate before the same stage) is not taken for it and timed out.
 */
static void
decided(struct run *r)
{
	json_t *p = r->progress ? json_loads(r->progress, 0, NULL) : NULL;
	json_t *ask = json_object_get(p, "ask");

	if (json_object_get(ask, "deadline_ms")) {
		json_object_del(ask, "deadline_ms");
		free(r->progress);
		r->progress = json_dumps(p, JSON_COMPACT);
	}
	json_decref(p);
}

/* Where feedback sends a run back to plan: its first plan stage. */
static const struct stage *
feedback_target(const struct pipeline *p)
{
	size_t i;

	for (i = 0; i < p->nr_stages; i++)
		if (kind_is(p->stages[i].kind, KF_PLAN_ENTRY))
			return &p->stages[i];
	return NULL;
}

int
engine_decide(struct engine *en, const char *ref, enum gate_decision d,
	      const char *guidance, struct run *out, struct err *e)
{
	return engine_decide_by(en, ref, d, guidance, NULL, out, e);
}

int
engine_decide_by(struct engine *en, const char *ref, enum gate_decision d,
		 const char *guidance, const char *by, struct run *out,
		 struct err *e)
{
	const struct stage *plan;
	struct pipeline *p = NULL;
	struct run r = { 0 };
	json_t *data = NULL, *prog = NULL, *ask;
	const char *option = NULL, *rest = NULL;
	char *text = NULL, *to = NULL;
	int rc = load(en, ref, &r, &p, e);

	if (rc)
		goto out;
	if (strcmp(r.status, ST_WAITING)) {
		rc = err_set(e, BATON_EBADSTATE,
			     "run '%s' is %s, not waiting for approval", r.id,
			     r.status);
		goto out;
	}
	data = json_pack("{s:s, s:s}", "decision", gate_decision_name(d),
			 "gate", r.gate_status ? r.gate_status : "");
	if (guidance && *guidance)
		json_object_set_new(data, "guidance", json_lossy_str(guidance));
	if (by)
		json_object_set_new(data, "by", json_lossy_str(by));
	prog = r.progress ? json_loads(r.progress, 0, NULL) : NULL;
	ask = json_object_get(prog, "ask");
	switch (d) {
	case GATE_APPROVE:
		to = approved_to(&r, ask, guidance, &option, &rest);
		if (option)
			json_object_set_new(data, "option",
					    json_string(option));
		if (option || (guidance && *guidance))
			rc = answer(en, &r, rest ? rest : "", option, e);
		if (rc)
			goto out;
		break;
	case GATE_REJECT:
		to = xstrdup(ST_BLOCKED);
		rejected(&r, ask, guidance);
		break;
	case GATE_CHANGES:
		if (!r.gate_back) {
			rc = err_set(e, BATON_EBADSTATE,
				     "run '%s' waits before its first stage: "
				     "there is no earlier stage to redo "
				     "(approve it and use 'baton steer', or "
				     "reject it)",
				     r.id);
			goto out;
		}
		if (str_blank(guidance)) {
			rc = err_set(e, BATON_EINVAL,
				     "request-changes needs guidance: what "
				     "should the stage do differently? "
				     "(--guidance TEXT; \"guidance\" in the "
				     "API)");
			goto out;
		}
		to = xstrdup(r.gate_back);
		rc = engine_steer(en, r.id, guidance, e);
		if (rc)
			goto out;
		break;
	case GATE_REVISE:
	case GATE_DEFER:
		if (d == GATE_DEFER && !asked(&r, "feedback")) {
			/* Paused at the gate or question, which resume asks
			 * again: engine_transition keeps gate_status and
			 * gate_back for it. Only an assist report's
			 * feedback, deferred, plans again on resume. */
			to = xstrdup(ST_PAUSED);
			run_set(&r.paused_at_status, ST_WAITING);
			break;
		}
		plan = feedback_target(p);
		if (!plan) {
			rc = err_set(e, BATON_EBADSTATE,
				     "run '%s' (pipeline %s) has no plan stage "
				     "to %s into",
				     r.id, p->name,
				     d == GATE_REVISE ? "revise" : "defer");
			goto out;
		}
		if (d == GATE_DEFER) {
			to = xstrdup(ST_PAUSED);
			run_set(&r.paused_at_status, plan->status);
			break;
		}
		if (str_blank(guidance)) {
			rc = err_set(e, BATON_EINVAL,
				     "revise needs guidance: what should the "
				     "next plan change? (--guidance TEXT; "
				     "\"guidance\" in the API)");
			goto out;
		}
		to = xstrdup(plan->status);
		rc = engine_steer(en, r.id, guidance, e);
		if (rc)
			goto out;
		break;
	}
	decided(&r);
	text = json_dumps(data, JSON_COMPACT);
	if (status_is_terminal(to)) /* a rejection ends the run here */
		engine__report_final(en, p, &r, to, text);
	rc = engine_transition(en, p, &r, to, text, e);
	if (rc)
		goto out;
	engine__wake(en, r.id);
	*out = r;
	memset(&r, 0, sizeof(r));
out:
	json_decref(prog);
	json_decref(data);
	free(text);
	free(to);
	run_release(&r);
	pipeline_free(p);
	return rc;
}
