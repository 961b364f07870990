/*
 * Session resume: a stage's agent that was cut off (a crash, kill -9 of
 * baton, a restart of serve, a quota wait, a pause, a stop) or that
 * comes back for a fix round carries on in the conversation it had,
 * instead of starting over without what it had read and reasoned.
 *
 * The record is the run's journal, in the store on every backend:
 *
 *   agent_started  {stage, part, provider, call}     the call began
 *   agent_session  {stage, part, provider, type,     the agent named its
 *                   call, session}                   session (mid-call)
 *   agent_exited   {stage, part, provider, type,     the call ended, and
 *                   call, outcome, failure, session} how
 *
 * so a call that never ended (baton was killed under it) still has its
 * session on record. The next call of the same stage (and call part) by
 * the same provider looks the last such call up (last_call; a first fix
 * round looks at the execute stage's calls) and then:
 *
 *   a session, and the type resumes       ──▶ native: the adapter continues
 *   natively (agent_info.resumes)             it (claude --resume ...), a
 *                                             note before the prompt
 *   cut off, and no session or no native  ──▶ summary: a fresh call whose
 *   resume                                    prompt ends the cut-off call's
 *                                             transcript (its last lines)
 *   ended cleanly, no native resume       ──▶ a fresh call, as before
 *
 * each path on record as an "agent_resumed" event. A native resume the
 * agent refuses (it does not know the session) falls back to the
 * summary, once (engine__resume_fallback). A session id is the agent's
 * output: one that is not a plain token (agent_session_id_ok) is never
 * used, and a "session_refused" event says so.
 *
 * A stage re-entered after an interruption keeps its worktree when its
 * last call will be resumed natively (engine__resume_keeps_worktree):
 * the session remembers the edits it made, so resetting them to the
 * checkpoint would make it wrong about its own work.
 */
#include "util/compat.h"

#include "agent/agent.h"
#include "core/config.h"
#include "core/kinds.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/redact.h"
#include "util/xalloc.h"

/* A summary keeps at most this much of the cut-off call's transcript. */
#define RESUME_SUMMARY_MAX (6 * 1024)

/* What the journal says of the last call of one stage's provider. */
struct last_call {
	const char *stage, *provider, *part; /* the key; provider NULL: any */
	int any_part;	/* match calls whatever their part */
	char *call;	/* its name; NULL: none on record */
	char *who;	/* its provider */
	char *type;	/* its provider's type, when on record */
	char *session;	/* the session it named, as it named it */
	int ended;	/* agent_exited seen */
	int clean;	/* ended with outcome ok and no failure */
	char *how;	/* how it ended (a cut-off one), for the notes */
};

static void
last_call_release(struct last_call *lc)
{
	free(lc->call);
	free(lc->who);
	free(lc->type);
	free(lc->session);
	free(lc->how);
}

static int
same(const char *a, const char *b)
{
	return a && b ? !strcmp(a, b) : a == b;
}

static void
set(char **field, const char *value)
{
	free(*field);
	*field = value ? xstrdup(value) : NULL;
}

/* store_event_list's callback: follows the key's calls through the
 * journal, the last one winning. */
static int
scan(const struct event *ev, void *arg)
{
	struct last_call *lc = arg;
	int started = !strcmp(ev->type, "agent_started");
	json_t *j;
	const char *call, *sid, *outcome, *failure;

	if (!started && strcmp(ev->type, "agent_session") &&
	    strcmp(ev->type, "agent_exited"))
		return 0;
	j = ev->data ? json_loads(ev->data, 0, NULL) : NULL;
	if (!j || !same(json_get_str(j, "stage"), lc->stage) ||
	    (!lc->any_part && !same(json_get_str(j, "part"), lc->part)) ||
	    (lc->provider &&
	     !same(json_get_str(j, "provider"), lc->provider)))
		goto out;
	call = json_get_str(j, "call");
	if (started) {
		set(&lc->call, call);
		set(&lc->who, json_get_str(j, "provider"));
		set(&lc->type, json_get_str(j, "type"));
		FREE_AND_NULL(lc->session);
		FREE_AND_NULL(lc->how);
		lc->ended = lc->clean = 0;
		goto out;
	}
	if (!lc->call || !same(call, lc->call))
		goto out;
	if (json_get_str(j, "type"))
		set(&lc->type, json_get_str(j, "type"));
	sid = json_get_str(j, "session");
	if (sid && *sid)
		set(&lc->session, sid);
	if (!strcmp(ev->type, "agent_exited")) {
		outcome = json_get_str(j, "outcome");
		failure = json_get_str(j, "failure");
		lc->ended = 1;
		lc->clean = same(outcome, "ok") && same(failure, "none");
		free(lc->how);
		lc->how = xasprintf("it ended %s, failure %s",
				    outcome ? outcome : "?",
				    failure ? failure : "?");
	}
out:
	json_decref(j);
	return 0;
}

/* Fills lc (its key set) from the run's journal. */
static int
last_call(struct drive *d, struct last_call *lc, struct err *e)
{
	int rc = store_event_list(d->en->store, d->r.id, 0, NULL, scan, lc,
				  e);

	if (!rc && lc->call && !lc->ended) {
		free(lc->how);
		lc->how = xstrdup("it never ended: baton was stopped or "
				  "killed under it");
	}
	return rc;
}

static const char *
part_of(const struct drive *d)
{
	return d->call ? d->call->artifact : NULL;
}

void
engine__resume_release(struct resume_plan *rp)
{
	free(rp->session);
	free(rp->from_call);
	free(rp->note);
	memset(rp, 0, sizeof(*rp));
}

/* The note before a summary call's prompt: why, and the transcript's end. */
static void
summary_note(struct drive *d, const struct stage *s, const char *type,
	     const char *call, const char *how, const char *why,
	     struct buf *out)
{
	struct buf tail = BUF_INIT;
	char *path = xasprintf("%s/calls/%s.stdout", d->run_dir, call);
	size_t budget = RESUME_SUMMARY_MAX;

	agent_transcript_tail(type ? type : "command", path,
			      RESUME_SUMMARY_MAX, &tail);
	/* a call cut off before it ended was never redacted on disk */
	redact_buf(&tail);
	buf_addf(out,
		 "## baton: your earlier call was cut off\n\n"
		 "Your earlier call of stage %s (%s) was cut off: %s. %s"
		 "This call starts afresh. Its edits may have been reset to "
		 "the stage's last checkpoint: look at the worktree before "
		 "redoing anything.\n\n",
		 s->name, call, how ? how : "it did not finish",
		 why ? why : "");
	prompt_section(out, "The end of what that call did and said",
		       tail.len ? tail.ptr : "(nothing readable)", &budget);
	buf_adds(out, "## The stage's instructions\n\n");
	buf_release(&tail);
	free(path);
}

int
engine__resume_plan(struct drive *d, const struct stage *s,
		    const struct config_provider *prov,
		    struct resume_plan *rp, struct err *e)
{
	const struct agent_info *info = agent_info(prov->type);
	struct last_call lc = { .stage = s->name, .provider = prov->name,
				.part = part_of(d) };
	struct buf note = BUF_INIT;
	size_t i;
	int rc;

	engine__resume_release(rp);
	rc = last_call(d, &lc, e);
	/*
	 * The first fix round: the agent that made the change fixes it,
	 * in the session it made it in (same provider: the fixer role is
	 * often the implementer's).
	 */
	for (i = 0; !rc && !lc.call && s->kind == KIND_FIX && !d->call &&
		    i < d->p->nr_stages;
	     i++) {
		if (d->p->stages[i].kind != KIND_EXECUTE)
			continue;
		lc.stage = d->p->stages[i].name;
		rc = last_call(d, &lc, e);
	}
	if (rc || !lc.call)
		goto out;
	if (lc.session && !agent_session_id_ok(lc.session)) {
		rc = engine__note(d, "session_refused",
				  json_pack("{s:s, s:s, s:s, s:s}", "stage",
					    s->name, "provider", prov->name,
					    "call", lc.call, "reason",
					    "the session id the agent reported "
					    "is not a plain token"),
				  e);
		FREE_AND_NULL(lc.session);
		if (rc)
			goto out;
	}
	rp->from_call = xstrdup(lc.call);
	rp->cut_off = !lc.clean;
	rp->type = same(lc.type, prov->type) ? prov->type : NULL;
	if (lc.how)
		snprintf(rp->how, sizeof(rp->how), "%s", lc.how);
	if (lc.session && info && info->resumes && rp->type) {
		rp->path = "native";
		rp->session = xstrdup(lc.session);
		buf_addf(&note,
			 "## baton: this continues your earlier session\n\n"
			 "This call continues your earlier session of stage %s "
			 "(%s), which %s. Look at the worktree before you go "
			 "on: it holds what the stage has so far. Carry on from "
			 "where you stopped; the stage's instructions follow "
			 "again, with what changed since.\n\n## The stage's instructions\n\n",
			 lc.stage, lc.call,
			 lc.clean ? "ended" :
				    "was cut off before it finished");
	} else if (!lc.clean) {
		rp->path = "summary";
		summary_note(d, s, lc.type, lc.call, lc.how, NULL, &note);
	}
	if (note.len)
		rp->note = buf_detach(&note, NULL);
out:
	buf_release(&note);
	last_call_release(&lc);
	return rc;
}

void
engine__resume_fallback(struct drive *d, const struct stage *s,
			const struct config_provider *prov,
			struct resume_plan *rp, const char *why)
{
	struct buf note = BUF_INIT;
	char *because = xasprintf("Continuing its session failed (%s). ",
				  why && *why ? why : "no reason given");

	FREE_AND_NULL(rp->note);
	rp->path = "summary";
	summary_note(d, s, prov->type, rp->from_call, rp->how, because,
		     &note);
	rp->note = buf_detach(&note, NULL);
	free(because);
}

int
engine__resume_note(struct drive *d, const struct stage *s,
		    const struct config_provider *prov,
		    const struct resume_plan *rp, struct err *e)
{
	json_t *o;

	if (!rp->path)
		return 0;
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "stage", s->name,
		      "provider", prov->name, "type", prov->type, "path",
		      rp->path, "from_call", rp->from_call, "cut_off",
		      rp->cut_off);
	if (rp->session)
		json_object_set_new(o, "session", json_string(rp->session));
	if (rp->cut_off && rp->how[0])
		json_object_set_new(o, "how", json_string(rp->how));
	if (part_of(d))
		json_object_set_new(o, "part", json_string(part_of(d)));
	return engine__note(d, "agent_resumed", o, e);
}

int
engine__resume_keeps_worktree(struct drive *d, const struct stage *s,
			      char **session)
{
	struct last_call lc = { .stage = s->name, .any_part = 1 };
	const struct config_provider *p;
	const struct agent_info *info;
	struct err ignored = ERR_INIT;
	int keep = 0;

	*session = NULL;
	/* the stage's last call, whoever made it and whatever its part */
	if (last_call(d, &lc, &ignored) || !lc.call)
		goto out;
	p = lc.who ? config_find_provider(d->en->cfg, lc.who) : NULL;
	info = p ? agent_info(p->type) : NULL;
	keep = p && info && info->resumes && same(lc.type, p->type) &&
	       lc.session && agent_session_id_ok(lc.session);
	if (keep)
		*session = xstrdup(lc.session);
out:
	last_call_release(&lc);
	return keep;
}
