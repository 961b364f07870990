/*
 * The run's budget lines (config budget) and what happens at one.
 *
 *   max_cost_usd, max_tokens   what the agents reported, for the run
 *   max_wall_minutes           time spent in stages, for the run
 *   max_turns_per_run          agent calls of the run ("agent_started")
 *   max_turns_per_day          agent calls of every run in the store since
 *                              00:00 UTC, this run's included
 *
 * Each line's action (budget.actions.LINE, else budget.on_limit, else
 * pause) is taken before an agent call, once the line is reached:
 *
 *   pause          the run pauses with the reason; `baton resume` after
 *                  raising the budget goes on (also at stage boundaries,
 *                  as before; route.c)
 *   stop           the stage blocks the run with the reason
 *   downgrade      the stage's role plays budget.downgrade's provider
 *                  (or, a name that is no provider, model) for the rest of
 *                  the run; no downgrade for the role: stop
 *   reduce_effort  the providers' effort one step lower (high, medium,
 *                  low) for the rest of the run, once per line; nothing
 *                  lower, or a provider with no effort setting (acp):
 *                  stop
 *
 * each a "budget_action" event. The run's downgrades and effort are read
 * back from those events, so a resumed or taken-over run keeps them. An
 * unattended engine (en->unattended) never pauses: pause becomes stop.
 */
#include "util/compat.h"

#include "agent/agent.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/json.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define DAY_MS (24LL * 3600 * 1000)

static const char *const effort_steps[] = { "low", "medium", "high" };

struct turn_count {
	int64_t since; /* ts from which calls count */
	long long n;
};

static int
count_turn(const struct event *ev, void *arg)
{
	struct turn_count *tc = arg;

	if (ev->ts >= tc->since)
		tc->n++;
	return 0;
}

/* Agent calls of run_id (NULL: of every run) since since (ms). */
static long long
turns(struct engine *en, const char *run_id, int64_t since)
{
	struct turn_count tc = { since, 0 };

	if (store_event_list(en->store, run_id, 0, "agent_started", count_turn,
			     &tc, NULL))
		return 0; /* an unreadable journal spends no budget */
	return tc.n;
}

/* Line l's sentence when run r has reached it, else NULL. */
static char *
line_crossed(struct engine *en, const struct config *cfg, const struct run *r,
	     enum budget_line l)
{
	const struct config_budget *b = &cfg->budget;
	long long n;

	switch (l) {
	case BUDGET_COST:
		if (b->max_cost_usd > 0 && r->cost_usd >= b->max_cost_usd)
			return xasprintf("budget.max_cost_usd ($%.4f) reached: "
					 "$%.4f spent",
					 b->max_cost_usd, r->cost_usd);
		break;
	case BUDGET_TOKENS:
		if (b->max_tokens > 0 &&
		    r->tokens_in + r->tokens_out >= b->max_tokens)
			return xasprintf("budget.max_tokens (%lld) reached: "
					 "%lld tokens used",
					 b->max_tokens,
					 (long long)r->tokens_in +
					     r->tokens_out);
		break;
	case BUDGET_WALL:
		if (b->max_wall_minutes > 0 &&
		    r->active_ms >= (int64_t)b->max_wall_minutes * 60000)
			return xasprintf(
			    "budget.max_wall_minutes (%d) reached: "
			    "%lld minutes in stages",
			    b->max_wall_minutes,
			    (long long)(r->active_ms / 60000));
		break;
	case BUDGET_TURNS_RUN:
		if (en && b->max_turns_per_run > 0 &&
		    (n = turns(en, r->id, 0)) >= b->max_turns_per_run)
			return xasprintf("budget.max_turns_per_run (%lld) "
					 "reached: %lld agent call%s in this "
					 "run",
					 b->max_turns_per_run, n,
					 n == 1 ? "" : "s");
		break;
	case BUDGET_TURNS_DAY:
		if (en && b->max_turns_per_day > 0 &&
		    (n = turns(en, NULL, time_now_ms() / DAY_MS * DAY_MS)) >=
			b->max_turns_per_day)
			return xasprintf("budget.max_turns_per_day (%lld) "
					 "reached: %lld agent call%s today "
					 "(UTC), all runs",
					 b->max_turns_per_day, n,
					 n == 1 ? "" : "s");
		break;
	case BUDGET_LINE_N:
		break;
	}
	return NULL;
}

char *
engine__budget_crossed(struct engine *en, const struct config *cfg,
		       const struct run *r, enum budget_line *line)
{
	char *why = NULL;
	int l;

	for (l = 0; !why && l < BUDGET_LINE_N; l++) {
		why = line_crossed(en, cfg, r, (enum budget_line)l);
		if (why && line)
			*line = (enum budget_line)l;
	}
	return why;
}

static int
load_action(const struct event *ev, void *arg)
{
	struct drive *d = arg;
	json_t *j = ev->data ? json_loads(ev->data, 0, NULL) : NULL;
	const char *action = j ? json_get_str(j, "action") : NULL;
	const char *line = j ? json_get_str(j, "line") : NULL;
	const char *role = j ? json_get_str(j, "role") : NULL;
	const char *to = j ? json_get_str(j, "to") : NULL;
	int l;

	if (action && !strcmp(action, "downgrade") && role && to)
		strvec_pushf(&d->downgraded, "%s=%s", role, to);
	for (l = 0; action && line && l < BUDGET_LINE_N; l++)
		if (!strcmp(action, "reduce_effort") &&
		    !strcmp(line, budget_line_name(l)))
			d->reduced |= 1u << l;
	json_decref(j);
	return 0;
}

static void
load_state(struct drive *d)
{
	if (d->budget_loaded)
		return;
	d->budget_loaded = 1;
	store_event_list(d->en->store, d->r.id, 0, "budget_action", load_action,
			 d, NULL);
}

/* How many effort steps down the run is. */
static int
steps_down(const struct drive *d)
{
	int n = 0, l;

	for (l = 0; l < BUDGET_LINE_N; l++)
		n += !!(d->reduced & (1u << l));
	return n;
}

/* What the run's downgrades give role; NULL: none. */
static const char *
downgraded(const struct drive *d, const char *role)
{
	size_t i, n = role ? strlen(role) : 0;

	for (i = 0; role && i < d->downgraded.nr; i++)
		if (!strncmp(d->downgraded.v[i], role, n) &&
		    d->downgraded.v[i][n] == '=')
			return d->downgraded.v[i] + n + 1;
	return NULL;
}

static int
effort_index(const char *effort)
{
	int i;

	for (i = 0; effort && i < 3; i++)
		if (!strcmp(effort, effort_steps[i]))
			return i;
	return 2; /* unset: the provider's own, counted as high */
}

/* 1 when a provider of type takes an effort setting. */
static int
takes_effort(const char *type)
{
	return type && strcmp(type, "acp");
}

const struct config_provider *
engine__budget_provider(struct drive *d, const struct stage *s,
			const struct config_provider *prov,
			struct config_provider *tmp)
{
	const struct config_provider *p = prov, *found;
	const char *to;
	int down, cap;

	load_state(d);
	to = downgraded(d, s->role);
	if (to) {
		found = config_find_provider(d->en->cfg, to);
		*tmp = found ? *found : *prov;
		if (!found)
			tmp->model = (char *)to;
		p = tmp;
	}
	down = steps_down(d);
	if (down && takes_effort(p->type)) {
		cap = 2 - (down > 2 ? 2 : down);
		if (effort_index(p->effort) > cap) {
			if (p != tmp)
				*tmp = *p;
			tmp->effort = (char *)effort_steps[cap];
			p = tmp;
		}
	}
	return p;
}

/* The "budget_action" event. */
static int
note_action(struct drive *d, enum budget_line line, const char *action,
	    const char *why, json_t *more, struct err *e)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "line", budget_line_name(line),
			      "action", action, "reason", why);

	if (more) {
		json_object_update(o, more);
		json_decref(more);
	}
	return engine__note(d, "budget_action", o, e);
}

/* Pauses the run at stage s (it goes on with s once resumed). */
static int
pause_at(struct drive *d, const struct stage *s, const char *why, struct err *e)
{
	run_set(&d->r.paused_at_status, s->status);
	run_set(&d->r.reason, why);
	d->leave = 1;
	return engine__move(d, ST_PAUSED,
			    json_pack("{s:s, s:s, s:s}", "resume_to", s->status,
				      "cause", "budget", "reason", why),
			    e);
}

/* stop: the stage blocks the run with why (and how it came to stop). */
static int
stop(struct drive *d, enum budget_line line, const char *why, json_t *more,
     enum stage_result *res, char **reason, struct err *e)
{
	int rc = note_action(d, line, "stop", why, more, e);

	*res = STAGE_BLOCK;
	*reason = xasprintf("stopped by the budget: %s", why);
	return rc;
}

/* Line line, reached (why), takes its action; as engine__budget_check. */
static int
act_on(struct drive *d, const struct stage *s,
       const struct config_provider *prov, enum budget_line line,
       const char *why, enum stage_result *res, char **reason, int *rc,
       struct err *e)
{
	const struct config *cfg = d->en->cfg;
	const char *role = s->role ? s->role : "default", *to;
	enum budget_action act = cfg->budget.actions[line];
	const struct config_provider *adjusted;
	struct config_provider tmp;
	int stopped = 1;

	switch (act) {
	case BUDGET_PAUSE:
		if (d->en->unattended) {
			*rc = stop(d, line, why,
				   json_pack("{s:s, s:b}", "instead_of",
					     "pause", "unattended", 1),
				   res, reason, e);
			break;
		}
		*rc = note_action(d, line, "pause", why, NULL, e);
		if (!*rc)
			*rc = pause_at(d, s, why, e);
		*res = STAGE_STOPPED;
		break;
	case BUDGET_STOP:
		*rc = stop(d, line, why, NULL, res, reason, e);
		break;
	case BUDGET_DOWNGRADE:
		if (downgraded(d, role)) {
			stopped = 0; /* the role plays its cheaper choice */
			break;
		}
		to = config_downgrade_for(cfg, role);
		if (!to) {
			char *more =
			    xasprintf("%s; no budget.downgrade for the %s role",
				      why, role);

			*rc =
			    stop(d, line, more,
				 json_pack("{s:s}", "instead_of", "downgrade"),
				 res, reason, e);
			free(more);
			break;
		}
		strvec_pushf(&d->downgraded, "%s=%s", role, to);
		*rc = note_action(d, line, "downgrade", why,
				  json_pack("{s:s, s:s, s:s}", "role", role,
					    "from", prov->name, "to", to),
				  e);
		stopped = 0;
		break;
	case BUDGET_REDUCE_EFFORT:
		if (d->reduced & (1u << line)) {
			stopped = 0; /* lowered once for this line */
			break;
		}
		adjusted = engine__budget_provider(d, s, prov, &tmp);
		if (!takes_effort(adjusted->type) ||
		    effort_index(adjusted->effort) == 0) {
			char *more = xasprintf(
			    "%s; provider %s has no lower effort to go to", why,
			    prov->name);

			*rc = stop(
			    d, line, more,
			    json_pack("{s:s}", "instead_of", "reduce_effort"),
			    res, reason, e);
			free(more);
			break;
		}
		d->reduced |= 1u << line;
		adjusted = engine__budget_provider(d, s, prov, &tmp);
		*rc = note_action(
		    d, line, "reduce_effort", why,
		    json_pack("{s:s, s:s}", "provider", adjusted->name,
			      "effort",
			      adjusted->effort ? adjusted->effort : "high"),
		    e);
		stopped = 0;
		break;
	}
	return *rc ? 1 : stopped;
}

int
engine__budget_check(struct drive *d, const struct stage *s,
		     const struct config_provider *prov, enum stage_result *res,
		     char **reason, int *rc, struct err *e)
{
	int l, done = 0;

	*rc = 0;
	load_state(d);
	/* every line reached acts, in order, until one stops the stage */
	for (l = 0; !done && l < BUDGET_LINE_N; l++) {
		char *why =
		    line_crossed(d->en, d->en->cfg, &d->r, (enum budget_line)l);

		if (why)
			done = act_on(d, s, prov, (enum budget_line)l, why, res,
				      reason, rc, e);
		free(why);
	}
	return done;
}

int
engine__budget_boundary(struct drive *d, const struct stage *x, int *rc,
			struct err *e)
{
	char *why = NULL;
	int l;

	*rc = 0;
	/* the other actions (and an unattended pause) are taken before x's
	 * first agent call, where the stage can block */
	if (d->en->unattended)
		return 0;
	for (l = 0; !why && l < BUDGET_LINE_N; l++)
		if (d->en->cfg->budget.actions[l] == BUDGET_PAUSE)
			why = line_crossed(d->en, d->en->cfg, &d->r,
					   (enum budget_line)l);
	if (!why)
		return 0;
	*rc = note_action(d, (enum budget_line)(l - 1), "pause", why, NULL, e);
	if (!*rc)
		*rc = pause_at(d, x, why, e);
	free(why);
	return 1;
}
