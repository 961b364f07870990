/*
 * Run reports: what a person who has not watched the run needs to know,
 * on the OpenViber cadence (config reports; docs/api.md "Reports"):
 *
 *   age < milestone_after_seconds   nothing until the run ends
 *   age ≥ milestone_after_seconds   one per finished stage
 *   age ≥ periodic_after_seconds    also one every interval_seconds,
 *                                   checked on the ticks of a stage
 *   terminal                        always one, the last
 *
 * A report is a "report" event, written through the engine's one door
 * for run writes (engine__record: version-checked, fenced, redacted), and
 * the same in markdown as reports/NNN.md in the run folder. Reports only
 * add events; they never move the run. The final report is written just
 * BEFORE the move to the terminal status and describes the run as that
 * move leaves it: the terminal transition stays the run's last event,
 * and whoever stops reading there (baton events -f, a live stream, a
 * webhook) has the report too.
 *
 * The driver's moves (engine__move) make the milestone and final
 * reports, its ticks the periodic ones. engine_transition itself stays
 * one event per move; a process that ends a run it does not drive
 * (control.c: an abort with no driver, a rejection at a gate) calls
 * engine__report_final itself.
 *
 * Everything a report says is read back from the store's events: the
 * number of reports before it, the stages that ended since the last one,
 * the last checks and agent failure. A driver that restarts therefore
 * reports exactly as the one before it would have.
 */
#include "util/compat.h"

#include <jansson.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/redact.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* Sentences in a report's "changed" list before "... and N more". */
#define REPORT_CHANGED_MAX 40
/* Files named from the diffstat before "... and N more files". */
#define REPORT_FILES_MAX 20

/* The run-folder files a report names as evidence, when they exist. */
static const char *const evidence_files[] = {
	"plan.md",	     "architecture.md",	     "execution.log",
	"validation.json",   "validation.log",	     "review.md",
	"review.json",	     "finding-responses.md", "verification.md",
	"verification.json", "intake.json",	     "intent-lock.json",
	"claims.json",	     "report.md",	     "events.jsonl",
};

/* What the events since the run began say, for one report. */
struct scan {
	const struct pipeline *p;
	int reports;		/* reports before this one */
	int64_t last_report_ts; /* when the last one was made; 0: none */
	json_t *changed;	/* sentences since the last report */
	size_t dropped;		/* sentences past REPORT_CHANGED_MAX */
	char *checks;		/* the last checks, when they failed */
	char *agent_failure;	/* the last call, when it failed */
	char *quota;		/* a quota wait not yet over */
	char *last_call;	/* the last agent call's name */
};

static void
scan_release(struct scan *sc)
{
	json_decref(sc->changed);
	free(sc->checks);
	free(sc->agent_failure);
	free(sc->quota);
	free(sc->last_call);
}

static void __attribute__((format(printf, 2, 3)))
changed(struct scan *sc, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;

	if (json_array_size(sc->changed) >= REPORT_CHANGED_MAX) {
		sc->dropped++;
		return;
	}
	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	json_array_append_new(sc->changed, json_lossy(b.ptr, b.len));
	buf_release(&b);
}

/* *field = a copy of s (NULL clears it). */
static void
set_str(char **field, const char *s)
{
	free(*field);
	*field = s ? xstrdup(s) : NULL;
}

/* How a stage ended, by the edge the run took out of it. */
static const char *
stage_outcome(const struct pipeline *p, const char *from, const char *to)
{
	const struct edge *edge = pipeline_edge(p, from, to);

	switch (edge ? edge->why : WHY_NEXT) {
	case WHY_FAIL:
		return "ended with failing checks";
	case WHY_CHANGES:
		return "ended with changes requested";
	case WHY_GATE:
		return "passed and waits at a gate";
	case WHY_PAUSE:
		return "passed and the run paused";
	case WHY_BLOCK:
		return "blocked the run";
	case WHY_FAILED:
		return "failed";
	case WHY_ABORT:
		return "was aborted";
	default:
		return "passed";
	}
}

/* A transition from → to: a sentence when it ended a stage. */
static void
scan_transition(struct scan *sc, const char *from, const char *to,
		const json_t *data)
{
	const struct stage *s = from ? pipeline_stage_at(sc->p, from) : NULL;
	const char *reason = json_get_str(data, "reason");

	if (!s || !to || !strcmp(to, ST_INTERRUPTED))
		return;
	changed(sc, "stage %s %s (%s -> %s)%s%s", s->name,
		stage_outcome(sc->p, from, to), from, to, reason ? ": " : "",
		reason ? reason : "");
}

/* An agent_exited event: the last call, and whether it failed. */
static void
scan_exit(struct scan *sc, const json_t *data)
{
	const char *failure = json_get_str(data, "failure");
	const char *msg = json_get_str(data, "message");
	char *line;

	set_str(&sc->last_call, json_get_str(data, "call"));
	set_str(&sc->quota, NULL);
	if (!failure || !strcmp(failure, "none")) {
		set_str(&sc->agent_failure, NULL);
		return;
	}
	line = xasprintf(
	    "the last agent call (%s) ended %s: %s%s%s",
	    json_get_str(data, "provider") ? json_get_str(data, "provider")
					   : "?",
	    json_get_str(data, "outcome") ? json_get_str(data, "outcome") : "?",
	    failure, msg ? ": " : "", msg ? msg : "");
	free(sc->agent_failure);
	sc->agent_failure = line;
}

/* One event of the run, oldest first (store_event_list callback). */
static int
scan_event(const struct event *ev, void *arg)
{
	struct scan *sc = arg;
	json_t *data = ev->data ? json_loads(ev->data, 0, NULL) : NULL;
	const char *type = ev->type, *stage = json_get_str(data, "stage");

	if (!stage)
		stage = "?";
	if (!strcmp(type, "report")) {
		sc->reports++;
		sc->last_report_ts = ev->ts;
		json_array_clear(sc->changed);
		sc->dropped = 0;
	} else if (!strcmp(type, "transition")) {
		scan_transition(sc, ev->from, ev->to, data);
	} else if (!strcmp(type, "validation")) {
		int passed = json_is_true(json_object_get(data, "passed"));

		changed(sc, "checks %s in stage %s",
			passed ? "passed" : "failed", stage);
		free(sc->checks);
		sc->checks = passed ? NULL
				    : xasprintf("checks are failing (stage %s; "
						"see validation.json)",
						stage);
	} else if (!strcmp(type, "agent_started")) {
		set_str(&sc->last_call, json_get_str(data, "call"));
	} else if (!strcmp(type, "agent_exited")) {
		scan_exit(sc, data);
	} else if (!strcmp(type, "quota_wait")) {
		free(sc->quota);
		sc->quota = xasprintf("waiting for provider %s (%s) until %s",
				      json_get_str(data, "provider")
					  ? json_get_str(data, "provider")
					  : "?",
				      json_get_str(data, "failure")
					  ? json_get_str(data, "failure")
					  : "?",
				      json_get_str(data, "until")
					  ? json_get_str(data, "until")
					  : "?");
	} else if (!strcmp(type, "contract_error")) {
		changed(sc, "stage %s: output not accepted: %s", stage,
			json_get_str(data, "error")
			    ? json_get_str(data, "error")
			    : "?");
	} else if (!strcmp(type, "reviews")) {
		changed(sc, "reviews of stage %s: %s", stage,
			json_get_str(data, "decision")
			    ? json_get_str(data, "decision")
			    : "?");
	}
	json_decref(data);
	return 0;
}

/*
 * The worktree's diffstat against the base, as sentences: the summary
 * line, then one per file (at most REPORT_FILES_MAX).
 */
static void
add_diffstat(struct engine *en, const struct run *r, struct scan *sc)
{
	struct buf stat = BUF_INIT;
	char *line, *nl, *summary = NULL;
	char *files[REPORT_FILES_MAX];
	size_t i, nr = 0, more = 0;

	if (!r->worktree || !r->base_commit || !fs_is_dir(r->worktree) ||
	    worktree_diff(en->ws, r->worktree, r->base_commit, 1, &stat, NULL) <
		0)
		goto out;
	for (line = stat.ptr; *line; line = nl ? nl + 1 : line + strlen(line)) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		while (*line == ' ')
			line++;
		if (!*line)
			continue;
		if (!strstr(line, " | "))
			summary = line; /* "N files changed, ..." */
		else if (nr < REPORT_FILES_MAX)
			files[nr++] = line;
		else
			more++;
	}
	if (!summary) {
		changed(sc, "no files changed against the base %.7s yet",
			r->base_commit);
		goto out;
	}
	changed(sc, "%s against the base %.7s", summary, r->base_commit);
	for (i = 0; i < nr; i++)
		changed(sc, "%s", files[i]);
	if (more)
		changed(sc, "... and %zu more files", more);
out:
	buf_release(&stat);
}

/* What stands in the way of run r, in status (its own or the next). */
static json_t *
blockers(const struct run *r, const char *status, const struct scan *sc)
{
	json_t *b = json_array();

	if (!strcmp(status, ST_WAITING))
		json_array_append_new(
		    b,
		    json_sprintf("waiting for approval to enter %s "
				 "(baton approvals approve %s)",
				 r->gate_status ? r->gate_status : "?", r->id));
	if (!strcmp(status, ST_PAUSED) && r->paused_at_status &&
	    !strcmp(r->paused_at_status, ST_WAITING))
		json_array_append_new(
		    b, json_sprintf("deferred at the gate into %s (baton "
				    "resume %s asks again)",
				    r->gate_status ? r->gate_status : "?",
				    r->id));
	else if (!strcmp(status, ST_PAUSED))
		json_array_append_new(
		    b, json_sprintf("paused; resumes to %s (baton resume "
				    "%s)",
				    r->paused_at_status ? r->paused_at_status
							: "?",
				    r->id));
	if (r->reason && *r->reason)
		json_array_append_new(
		    b, json_sprintf("%s: %s", status, r->reason));
	if (sc->checks)
		json_array_append_new(b, json_string(sc->checks));
	if (sc->agent_failure)
		json_array_append_new(b, json_lossy_str(sc->agent_failure));
	if (sc->quota)
		json_array_append_new(b, json_lossy_str(sc->quota));
	if (r->abort_requested && !status_is_terminal(status))
		json_array_append_new(b, json_string("an abort is requested"));
	if (r->pause_requested && !status_is_terminal(status))
		json_array_append_new(b, json_string("a pause is requested "
						     "at the next stage "
						     "boundary"));
	return b;
}

/* The stage the run works on or goes to next in status, or NULL. */
static const struct stage *
upcoming(const struct pipeline *p, const struct run *r, const char *status)
{
	const struct stage *s;

	if (!strcmp(status, ST_CREATED))
		return pipeline_first(p);
	if ((s = pipeline_stage_at(p, status)))
		return s;
	if ((s = pipeline_stage_done_at(p, status)))
		return s->next >= 0 ? &p->stages[s->next] : NULL;
	if (!strcmp(status, ST_WAITING) && r->gate_status)
		return pipeline_stage_at(p, r->gate_status);
	if (!strcmp(status, ST_PAUSED) && r->paused_at_status &&
	    !strcmp(r->paused_at_status, ST_WAITING) && r->gate_status)
		return pipeline_stage_at(p, r->gate_status); /* deferred */
	if (!strcmp(status, ST_PAUSED) && r->paused_at_status)
		return pipeline_stage_at(p, r->paused_at_status);
	if (!strcmp(status, ST_INTERRUPTED) && r->stage)
		return pipeline_stage_named(p, r->stage);
	return NULL;
}

/* The stages still ahead on the pipeline's main line, the current first. */
static json_t *
next_steps(const struct pipeline *p, const struct run *r, const char *status)
{
	const struct stage *s = upcoming(p, r, status);
	json_t *next = json_array();
	size_t n;

	for (n = 0; s && n < p->nr_stages; n++) {
		json_array_append_new(
		    next,
		    json_sprintf("%s (%s)", s->name, stage_kind_label(s)));
		s = s->next >= 0 ? &p->stages[s->next] : NULL;
	}
	if (!status_is_terminal(status) && !s)
		json_array_append_new(next, json_sprintf("%s", p->terminal));
	if (!strcmp(status, ST_MERGE_READY))
		json_array_append_new(
		    next, json_sprintf("merge the branch %s "
				       "(baton merge %s)",
				       r->branch ? r->branch : "?", r->id));
	return next;
}

static json_t *
budget(const struct config *cfg, const struct run *r)
{
	const struct config_budget *b = &cfg->budget;
	long long used = (long long)r->tokens_in + (long long)r->tokens_out;

	return json_pack(
	    "{s:I, s:I, s:f, s:o, s:o, s:o, s:I, s:o, s:o}", "tokens_in",
	    (json_int_t)r->tokens_in, "tokens_out", (json_int_t)r->tokens_out,
	    "cost_usd", r->cost_usd, "max_cost_usd",
	    b->max_cost_usd > 0 ? json_real(b->max_cost_usd) : json_null(),
	    "max_tokens",
	    b->max_tokens > 0 ? json_integer(b->max_tokens) : json_null(),
	    "max_wall_minutes",
	    b->max_wall_minutes > 0 ? json_integer(b->max_wall_minutes)
				    : json_null(),
	    "active_ms", (json_int_t)r->active_ms, "remaining_cost_usd",
	    b->max_cost_usd > 0 ? json_real(b->max_cost_usd - r->cost_usd)
				: json_null(),
	    "remaining_tokens",
	    b->max_tokens > 0 ? json_integer(b->max_tokens - used)
			      : json_null());
}

/* path as the user sees it: relative to the repository when inside. */
static char *
shown_path(const struct engine *en, const char *path)
{
	size_t n = strlen(en->ws->repo);

	if (!strncmp(path, en->ws->repo, n) && path[n] == '/')
		return xstrdup(path + n + 1);
	return xstrdup(path);
}

/* The run-folder files that back the report, as shown paths. */
static json_t *
evidence(struct engine *en, const char *run_dir, const struct scan *sc)
{
	json_t *ev = json_array();
	char *path, *shown;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(evidence_files); i++) {
		path = xasprintf("%s/%s", run_dir, evidence_files[i]);
		if (fs_exists(path)) {
			shown = shown_path(en, path);
			json_array_append_new(ev, json_lossy_str(shown));
			free(shown);
		}
		free(path);
	}
	if (sc->last_call) {
		path = xasprintf("%s/calls/%s.stdout", run_dir, sc->last_call);
		if (fs_exists(path)) {
			shown = shown_path(en, path);
			json_array_append_new(ev, json_lossy_str(shown));
			free(shown);
		}
		free(path);
	}
	return ev;
}

/* "3m 12s" */
static void
add_duration(struct buf *b, int64_t ms)
{
	int64_t s = ms / 1000;

	if (s >= 3600)
		buf_addf(b, "%lldh %02lldm", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
	else if (s >= 60)
		buf_addf(b, "%lldm %02llds", (long long)(s / 60),
			 (long long)(s % 60));
	else
		buf_addf(b, "%llds", (long long)s);
}

/* A list section of the markdown: "- item" per string, or "- none". */
static void
md_list(struct buf *md, const char *title, const json_t *items)
{
	const json_t *v;
	size_t i;

	buf_addf(md, "\n## %s\n\n", title);
	if (!json_array_size(items))
		buf_adds(md, "- none\n");
	for (i = 0; i < json_array_size(items); i++) {
		v = json_array_get(items, i);
		buf_addf(md, "- %s\n", json_string_value(v));
	}
}

/* The report as markdown, for people reading the run folder. */
static void
markdown(const struct run *r, const json_t *rep, struct buf *md)
{
	const json_t *b = json_object_get(rep, "budget");
	json_t *v;

	buf_addf(md, "# Report %lld on %s (%s)\n\n",
		 (long long)json_integer_value(json_object_get(rep, "n")),
		 r->id, json_get_str(rep, "kind"));
	buf_addf(md, "- task: %s\n- status: %s", r->task,
		 json_get_str(rep, "status"));
	if (r->stage)
		buf_addf(md, " (stage %s)", r->stage);
	buf_adds(md, "\n- elapsed: ");
	add_duration(md,
		     json_integer_value(json_object_get(rep, "elapsed_ms")));
	buf_adds(md, ", in stages ");
	add_duration(md, r->active_ms);
	buf_addch(md, '\n');
	md_list(md, "Changed since the last report",
		json_object_get(rep, "changed"));
	md_list(md, "Blockers", json_object_get(rep, "blockers"));
	md_list(md, "Next", json_object_get(rep, "next"));
	buf_addf(md, "\n## Budget\n\n- tokens: %lld in, %lld out",
		 (long long)r->tokens_in, (long long)r->tokens_out);
	v = json_object_get(b, "max_tokens");
	if (json_is_integer(v))
		buf_addf(md, " (limit %lld, %lld left)",
			 (long long)json_integer_value(v),
			 (long long)json_integer_value(
			     json_object_get(b, "remaining_tokens")));
	buf_addf(md, "\n- cost: $%.4f", r->cost_usd);
	v = json_object_get(b, "max_cost_usd");
	if (json_is_number(v))
		buf_addf(md, " (limit $%.2f, $%.4f left)", json_number_value(v),
			 json_number_value(
			     json_object_get(b, "remaining_cost_usd")));
	v = json_object_get(b, "max_wall_minutes");
	if (json_is_integer(v))
		buf_addf(md, "\n- time in stages: limit %lld minutes",
			 (long long)json_integer_value(v));
	buf_addch(md, '\n');
	md_list(md, "Evidence", json_object_get(rep, "evidence"));
}

/* When the run began, for its age. */
static int64_t
run_start(const struct run *r)
{
	return r->started_at ? r->started_at : r->created_at;
}

int
engine__report(struct engine *en, const struct pipeline *p, struct run *r,
	       const char *kind, const char *to, const char *data,
	       struct err *e)
{
	struct scan sc = { .p = p, .changed = json_array() };
	const char *status = to ? to : r->status;
	struct err we = ERR_INIT;
	json_t *move = NULL;
	struct buf md = BUF_INIT;
	char *run_dir = workspace_run_dir(en->ws, r->id);
	char *dir = NULL, *file = NULL, *shown = NULL;
	json_t *rep = NULL;
	int rc, n;

	rc = store_event_list(en->store, r->id, 0, NULL, scan_event, &sc, e);
	if (rc)
		goto out;
	if (to) {
		/* the move this report comes just before */
		move = data ? json_loads(data, 0, NULL) : NULL;
		scan_transition(&sc, r->status, to, move);
	}
	add_diffstat(en, r, &sc);
	if (sc.dropped)
		json_array_append_new(
		    sc.changed, json_sprintf("... and %zu more", sc.dropped));
	n = sc.reports + 1;
	dir = xasprintf("%s/reports", run_dir);
	file = xasprintf("%s/%03d.md", dir, n);
	shown = shown_path(en, file);
	rep =
	    json_pack("{s:i, s:s, s:I, s:s, s:o, s:O, s:o, s:o, s:o, s:o, "
		      "s:s}",
		      "n", n, "kind", kind, "elapsed_ms",
		      (json_int_t)(time_now_ms() - run_start(r)), "status",
		      status, "stage", json_lossy_str(r->stage), "changed",
		      sc.changed, "blockers", blockers(r, status, &sc), "next",
		      next_steps(p, r, status), "budget", budget(en->cfg, r),
		      "evidence", evidence(en, run_dir, &sc), "file", shown);
	if (!rep)
		BUG("cannot build a report");
	markdown(r, rep, &md);
	redact_buf(&md);
	if (fs_mkdir_p(dir, 0755, &we) ||
	    fs_write_atomic(file, md.ptr, md.len, &we)) {
		log_warn("cannot write the report '%s': %s", file, we.msg);
	} else {
		char name[32];

		snprintf(name, sizeof(name), "reports/%03d.md", n);
		engine_keep_file(en, r->id, name, NULL);
	}
	rc = engine__record(en, r, "report", rep, e);
	rep = NULL;
out:
	json_decref(rep);
	json_decref(move);
	scan_release(&sc);
	buf_release(&md);
	free(shown);
	free(file);
	free(dir);
	free(run_dir);
	return rc;
}

void
engine__report_final(struct engine *en, const struct pipeline *p, struct run *r,
		     const char *to, const char *data)
{
	struct err e = ERR_INIT;

	if (engine__report(en, p, r, "final", to, data, &e))
		log_warn("run '%s': cannot record a report: %s", r->id, e.msg);
}

void
engine__report_moved(struct engine *en, const struct pipeline *p, struct run *r,
		     int stage_ended)
{
	const struct config_reports *c = &en->cfg->reports;
	struct err e = ERR_INIT;

	if (!stage_ended || status_is_terminal(r->status) ||
	    time_now_ms() - run_start(r) <
		(int64_t)c->milestone_after_seconds * 1000)
		return;
	if (engine__report(en, p, r, "milestone", NULL, NULL, &e))
		log_warn("run '%s': cannot record a report: %s", r->id, e.msg);
}

/* When the last report was made, else 0 (store_event_list callback). */
static int
last_report(const struct event *ev, void *arg)
{
	*(int64_t *)arg = ev->ts;
	return 0;
}

void
engine__report_tick(struct drive *d)
{
	const struct config_reports *c = &d->en->cfg->reports;
	int64_t now = time_now_ms(), start = run_start(&d->r);
	int64_t interval = (int64_t)c->interval_seconds * 1000;
	int64_t after = (int64_t)c->periodic_after_seconds * 1000;
	struct err e = ERR_INIT;

	if (interval <= 0 || now - start < after)
		return;
	if (!d->report_ms) {
		/* none yet: the first is due when the run turns `after` */
		d->report_ms = start + after - interval;
		if (store_event_list(d->en->store, d->r.id, 0, "report",
				     last_report, &d->report_ms, &e))
			log_warn("run '%s': %s", d->r.id, e.msg);
	}
	if (now - d->report_ms < interval)
		return;
	d->report_ms = now;
	if (engine__report(d->en, d->p, &d->r, "periodic", NULL, NULL, &e))
		log_warn("run '%s': cannot record a report: %s", d->r.id,
			 e.msg);
}
