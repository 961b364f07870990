/*
 * Chat intake (chat.h, docs/chat.md): the conversation's turns and its
 * phases, over the store. The planner role answers each turn from the
 * whole conversation (the newest messages that fit the prompt); a
 * complete plan, announced by CHAT_MARKER at the very end of its answer,
 * moves the conversation to plan_proposal, and chat_start turns that
 * plan into queued tasks exactly as `baton plan` does (plan_parse,
 * plan_enqueue).
 *
 * The answer is the planner's, so it is input: the marker counts only
 * alone on the last line and outside a fenced block, and the plan must
 * pass plan_parse; a planner that claims a plan it does not give gets
 * an error message in the conversation, not a phase change.
 */
#include "util/compat.h"

#include <ctype.h>

#include <jansson.h>

#include "agent/agent.h"
#include "core/config.h"
#include "core/prompt.h"
#include "core/queue.h"
#include "sched/chat.h"
#include "sched/plan.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* Bytes of one chunk handed to chat_chunk_fn. */
#define CHUNK_BYTES 512

const struct chat_mode chat_modes[] = {
	{ "direct", "Direct", "run without the judge" },
	{ "local", "Local Git", "the judge and the local merge queue" },
	{ "github", "GitHub", "pull requests on the forge" },
};
const size_t chat_nr_modes = ARRAY_SIZE(chat_modes);

static const char greeting[] =
    "Hello. Tell me what you would like done in this repository, and "
    "I will ask what I need to know, then propose a plan of tasks.";

const struct chat_mode *
chat_mode_find(const char *name)
{
	size_t i;

	for (i = 0; name && i < chat_nr_modes; i++)
		if (!strcmp(chat_modes[i].name, name))
			return &chat_modes[i];
	return NULL;
}

/* Whether the line at p (up to its end) opens or closes a fence. */
static int
is_fence(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return !strncmp(p, "```", 3) || !strncmp(p, "~~~", 3);
}

int
chat_plan_ready(const char *text, size_t *cut)
{
	size_t n = strlen(text), m = strlen(CHAT_MARKER), at;
	const char *p;
	int fences = 0;

	while (n && isspace((unsigned char)text[n - 1]))
		n--;
	if (n < m || memcmp(text + n - m, CHAT_MARKER, m))
		return 0;
	at = n - m;
	/* alone on its line: only blanks between it and the line's start */
	for (p = text + at; p > text && (p[-1] == ' ' || p[-1] == '\t'); p--)
		;
	if (p > text && p[-1] != '\n')
		return 0;
	/* outside every fenced block: an even number of fences before it */
	for (p = text; p < text + at;) {
		const char *nl = memchr(p, '\n', (size_t)(text + at - p));

		fences += is_fence(p);
		if (!nl)
			break;
		p = nl + 1;
	}
	if (fences % 2)
		return 0;
	while (at && isspace((unsigned char)text[at - 1]))
		at--;
	*cut = at;
	return 1;
}

int
chat_new(struct sched_ctx *x, int64_t *id, struct err *e)
{
	int64_t n = 0;
	int rc;

	rc = store_chat_create(x->store, CHAT_GREETING, &n, e);
	if (!rc)
		rc = store_chat_add(x->store, n, "assistant", "text", greeting,
				    NULL, e);
	if (!rc)
		*id = n;
	return rc;
}

static int
is_closed(const char *phase)
{
	return !strcmp(phase, CHAT_EXECUTION) ||
	       !strcmp(phase, CHAT_MONITORING);
}

int
chat_say(struct sched_ctx *x, int64_t id, const char *text, struct err *e)
{
	struct chat_conv c = { 0 };
	const char *p;
	int rc;

	if (strlen(text) > CHAT_MAX_MESSAGE)
		return err_set(e, BATON_EINVAL,
			       "the message is %zu bytes, more than the %d a "
			       "chat message may hold",
			       strlen(text), CHAT_MAX_MESSAGE);
	for (p = text; isspace((unsigned char)*p); p++)
		;
	if (!*p)
		return err_set(e, BATON_EINVAL, "the message is empty");
	rc = store_chat_get(x->store, id, &c, e);
	if (rc)
		return rc;
	if (is_closed(c.phase))
		rc = err_set(e, BATON_EBADSTATE,
			     "conversation %lld is in %s: its tasks are "
			     "queued, so it takes no more requirements; start "
			     "a new conversation",
			     (long long)id, c.phase);
	if (!rc)
		rc =
		    store_chat_add(x->store, id, "user", "text", text, NULL, e);
	chat_conv_release(&c);
	return rc;
}

/*
 * The conversation as the prompt shows it: the newest messages that fit
 * BUF_MAX_PROMPT_CONTEXT, oldest first, each under who said it.
 */
static void
render_history(const struct chat_conv *c, struct buf *out)
{
	size_t i = c->nr_msgs, used = 0;

	while (i > 0) {
		const struct chat_msg *m = &c->msgs[i - 1];
		size_t len = strlen(m->content) + 32;

		if (used + len > BUF_MAX_PROMPT_CONTEXT && i < c->nr_msgs)
			break;
		used += len;
		i--;
	}
	if (i)
		buf_addf(out, "(%zu earlier messages left out)\n\n", i);
	for (; i < c->nr_msgs; i++) {
		const struct chat_msg *m = &c->msgs[i];
		const char *who = !strcmp(m->role, "user")	  ? "Person"
				  : !strcmp(m->role, "assistant") ? "You"
								  : "baton";

		buf_addf(out, "### %s\n\n%s\n\n", who, m->content);
	}
}

/* The answer, in CHUNK_BYTES pieces, to chunk. */
static void
send_chunks(chat_chunk_fn *chunk, void *arg, const char *text, size_t len)
{
	size_t off = 0, n;

	while (chunk && off < len) {
		n = len - off < CHUNK_BYTES ? len - off : CHUNK_BYTES;
		/* keep UTF-8 sequences whole */
		while (off + n < len && n > 1 &&
		       ((unsigned char)text[off + n] & 0xC0) == 0x80)
			n--;
		chunk(arg, text + off, n);
		off += n;
	}
}

/* What the mode_selection message says. */
static void
mode_text(const struct sched_ctx *x, const struct plan *p, struct buf *out)
{
	size_t i;

	buf_addf(out, "The plan is ready: %zu task%s. Choose how to run %s:\n",
		 p->nr, p->nr == 1 ? "" : "s", p->nr == 1 ? "it" : "them");
	for (i = 0; i < chat_nr_modes; i++) {
		const struct chat_mode *m = &chat_modes[i];
		int off = !strcmp(m->name, "github") && !x->cfg->forge.type;

		buf_addf(out, "- %s (%s): %s%s\n", m->label, m->name, m->about,
			 off ? " (not configured here)" : "");
	}
}

/*
 * Records the answer: plan-ready (the marker cut, the plan kept, a
 * mode_selection message) or plain text; moves the phase.
 */
static int
record_answer(struct sched_ctx *x, int64_t id, const char *text, struct err *e)
{
	struct chat_conv set = { 0 };
	struct plan p = PLAN_INIT;
	struct buf json = BUF_INIT, note = BUF_INIT;
	struct err why = ERR_INIT;
	char *found = NULL, *kept = NULL;
	size_t cut = 0;
	int ready, rc;

	ready = chat_plan_ready(text, &cut);
	if (ready) {
		kept = xstrndup(text, cut);
		found = plan_find_json(kept);
		if (!found)
			err_set(&why, BATON_EINVAL,
				"its answer holds no JSON plan");
		else if (plan_parse(found, "the plan", &p, &why))
			;
		else
			plan_to_json(&p, &json);
		ready = json.len > 0;
	}
	rc = store_chat_add(x->store, id, "assistant", "text",
			    kept ? kept : text, NULL, e);
	if (rc)
		goto out;
	if (kept && !ready) {
		buf_addf(&note,
			 "The planner said its plan is ready, but %s. Ask it "
			 "again, or say what to change.",
			 why.msg);
		rc = store_chat_add(x->store, id, "system", "error", note.ptr,
				    NULL, e);
		buf_reset(&note);
	}
	set.phase = (char *)(ready ? CHAT_PROPOSAL : CHAT_GATHERING);
	set.plan = ready ? json.ptr : NULL;
	if (!rc)
		rc = store_chat_update(x->store, id, NULL, &set, e);
	if (!rc && ready) {
		mode_text(x, &p, &note);
		rc = store_chat_add(x->store, id, "system", "mode_selection",
				    note.ptr, NULL, e);
	}
out:
	plan_release(&p);
	buf_release(&json);
	buf_release(&note);
	free(found);
	free(kept);
	return rc;
}

int
chat_reply(struct sched_ctx *x, int64_t id, chat_chunk_fn *chunk, void *arg,
	   struct err *e)
{
	struct agent_result ar = AGENT_RESULT_INIT;
	struct role_call call = { 0 };
	struct chat_conv c = { 0 };
	struct buf prompt = BUF_INIT, hist = BUF_INIT;
	struct err why = ERR_INIT;
	char *tmpl = NULL, *dir = NULL, *name = NULL, *out_dir = NULL;
	char max[16];
	struct prompt_var vars[] = {
		{ "worktree", x->ws->repo },
		{ "max_tasks", max },
		{ "conversation", NULL },
	};
	int rc;

	rc = store_chat_get(x->store, id, &c, e);
	if (rc)
		return rc;
	if (is_closed(c.phase)) {
		rc = err_set(e, BATON_EBADSTATE,
			     "conversation %lld is in %s: its tasks are queued",
			     (long long)id, c.phase);
		goto out;
	}
	render_history(&c, &hist);
	snprintf(max, sizeof(max), "%d", PLAN_MAX_TASKS);
	vars[2].value = hist.ptr;
	tmpl = prompt_template(x->ws->dir, "chat");
	if (!tmpl)
		BUG("no built-in prompt chat.md");
	prompt_render(tmpl, vars, ARRAY_SIZE(vars), &prompt);
	dir = xasprintf("%s/chat/%lld", x->ws->dir, (long long)id);
	name = xasprintf("turn-%zu", c.nr_msgs);
	out_dir = xasprintf("%s/out", dir);
	call.role = "planner";
	call.cwd = x->ws->repo;
	call.prompt = prompt.ptr;
	call.dir = dir;
	call.name = name;
	call.repo = x->ws->repo;
	call.common = x->ws->common;
	call.out_dir = out_dir;
	rc = sched_call_role(x->cfg, &call, &ar, &why);
	if (!rc &&
	    (ar.failure != AGENT_FAIL_NONE || ar.outcome == AGENT_STOPPED))
		rc = err_set(&why, BATON_ECHILD,
			     "the planner failed (%s%s%s); its output is in "
			     "%s/%s.stdout",
			     agent_failure_name(ar.failure),
			     ar.message.len ? ": " : "", ar.message.ptr, dir,
			     name);
	if (!rc && !ar.text.len)
		rc = err_set(&why, BATON_ECHILD,
			     "the planner gave an empty answer; its output is "
			     "in %s/%s.stdout",
			     dir, name);
	if (rc) {
		store_chat_add(x->store, id, "system", "error", why.msg, NULL,
			       NULL);
		*e = why;
		goto out;
	}
	{
		size_t cut = ar.text.len;

		if (!chat_plan_ready(ar.text.ptr, &cut))
			cut = ar.text.len;
		send_chunks(chunk, arg, ar.text.ptr, cut);
	}
	rc = record_answer(x, id, ar.text.ptr, e);
out:
	agent_result_release(&ar);
	chat_conv_release(&c);
	buf_release(&prompt);
	buf_release(&hist);
	free(tmpl);
	free(dir);
	free(name);
	free(out_dir);
	return rc;
}

/* {"<id>": "queued", ...} for the tasks just queued. */
static char *
tasks_json(const int64_t *ids, size_t n)
{
	json_t *o = json_object();
	char key[32], *s;
	size_t i;

	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%lld", (long long)ids[i]);
		json_object_set_new(o, key, json_string(TASK_QUEUED));
	}
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

int
chat_start(struct sched_ctx *x, int64_t id, const char *mode,
	   chat_preflight_fn *preflight, void *arg, size_t *nr, struct err *e)
{
	const struct chat_mode *m = chat_mode_find(mode);
	struct chat_conv c = { 0 }, set = { 0 };
	struct plan p = PLAN_INIT;
	struct buf note = BUF_INIT, table = BUF_INIT;
	char *source = NULL, *tasks = NULL;
	int64_t *ids = NULL, plan_id = 0;
	int version = 0, rc;

	if (!m)
		return err_set(e, BATON_EINVAL,
			       "mode must be one of direct, local, github, not "
			       "'%.40s'",
			       mode ? mode : "(none)");
	if (!strcmp(m->name, "github") && !x->cfg->forge.type)
		return err_set(e, BATON_EINVAL,
			       "mode github needs a forge, and none is "
			       "configured (forge.type in .baton/config.yaml)");
	rc = store_chat_get(x->store, id, &c, e);
	if (rc)
		return rc;
	if (strcmp(c.phase, CHAT_PROPOSAL) || !c.plan) {
		rc = err_set(e, BATON_ECONFLICT,
			     "conversation %lld is in %s, not plan_proposal: "
			     "%s",
			     (long long)id, c.phase,
			     is_closed(c.phase) ? "it was started already"
						: "there is no plan to start");
		goto out;
	}
	rc = plan_parse(c.plan, "the conversation's plan", &p, e);
	if (!rc && preflight)
		rc = preflight(arg, &note, e);
	if (rc)
		goto out;
	/* the one start that moves the phase queues the tasks */
	set.phase = (char *)CHAT_EXECUTION;
	set.mode = (char *)m->name;
	rc = store_chat_update(x->store, id, CHAT_PROPOSAL, &set, e);
	if (rc == BATON_ECONFLICT)
		err_prefix(e, "the plan was started already");
	if (rc)
		goto out;
	if (note.len)
		store_chat_add(x->store, id, "system", "progress", note.ptr,
			       NULL, NULL);
	source = xasprintf("chat/%lld", (long long)id);
	rc = store_plan_add(x->store, source, c.plan, &plan_id, &version, e);
	ids = xcalloc(p.nr, sizeof(*ids));
	if (!rc)
		rc = plan_enqueue_as(x, &p, plan_id,
				     !strcmp(m->name, "direct") ? "chat-direct"
								: "chat",
				     ids, e);
	if (rc) {
		store_chat_add(x->store, id, "system", "error", e->msg, NULL,
			       NULL);
		goto out;
	}
	plan_render(&p, ids, &table);
	buf_reset(&note);
	buf_addf(&note, "Queued %zu task%s (plan %lld, mode %s):\n\n%s", p.nr,
		 p.nr == 1 ? "" : "s", (long long)plan_id, m->label, table.ptr);
	rc = store_chat_add(x->store, id, "system", "progress", note.ptr, NULL,
			    e);
	tasks = tasks_json(ids, p.nr);
	memset(&set, 0, sizeof(set));
	set.phase = (char *)CHAT_MONITORING;
	set.tasks = tasks;
	if (!rc)
		rc = store_chat_update(x->store, id, CHAT_EXECUTION, &set, e);
	if (!rc && nr)
		*nr = p.nr;
out:
	chat_conv_release(&c);
	plan_release(&p);
	buf_release(&note);
	buf_release(&table);
	free(source);
	free(tasks);
	free(ids);
	return rc;
}

static int
is_finished(const char *status)
{
	return !strcmp(status, TASK_DONE) || !strcmp(status, TASK_FAILED) ||
	       !strcmp(status, TASK_CANCELLED);
}

int
chat_progress(struct sched_ctx *x, int64_t id, int *said, struct err *e)
{
	struct chat_conv c = { 0 }, set = { 0 };
	json_t *tasks = NULL, *v;
	struct buf note = BUF_INIT;
	const char *key;
	char *text = NULL;
	size_t total = 0, finished = 0, was_finished = 0;
	int rc, n = 0;

	rc = store_chat_get(x->store, id, &c, e);
	if (rc)
		return rc;
	if (strcmp(c.phase, CHAT_MONITORING) || !c.tasks)
		goto out;
	tasks = json_loads(c.tasks, 0, NULL);
	if (!json_is_object(tasks)) {
		rc = err_set(e, BATON_EINVAL,
			     "conversation %lld: its task list is not JSON",
			     (long long)id);
		goto out;
	}
	json_object_foreach(tasks, key, v)
	{
		struct task t = { 0 };
		const char *was = json_string_value(v);

		total++;
		was_finished += was && is_finished(was);
		if (store_task_get(x->store, strtoll(key, NULL, 10), &t,
				   NULL)) {
			finished += was && is_finished(was);
			continue;
		}
		finished += is_finished(t.status);
		if (!was || strcmp(was, t.status)) {
			buf_addf(&note, "Task t%s \"%s\" is %s%s%s%s.\n", key,
				 t.title, t.status, t.block_reason ? " (" : "",
				 t.block_reason ? t.block_reason : "",
				 t.block_reason ? ")" : "");
			json_object_set_new(tasks, key, json_string(t.status));
			n++;
		}
		task_release(&t);
	}
	if (!n)
		goto out;
	if (finished == total && was_finished < total)
		buf_addf(&note, "All %zu task%s finished.\n", total,
			 total == 1 ? " has" : "s have");
	buf_rtrim(&note);
	rc = store_chat_add(x->store, id, "system", "progress", note.ptr, NULL,
			    e);
	text = json_dumps(tasks, JSON_COMPACT | JSON_PRESERVE_ORDER);
	set.tasks = text;
	if (!rc)
		rc = store_chat_update(x->store, id, CHAT_MONITORING, &set, e);
out:
	if (!rc && said)
		*said = n;
	json_decref(tasks);
	chat_conv_release(&c);
	buf_release(&note);
	free(text);
	return rc;
}
