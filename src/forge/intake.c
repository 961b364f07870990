/*
 * Intake (docs/forge.md, "Intake"): the open issues that carry the
 * intake label become tasks, exactly once each, and an issue hears from
 * baton when its task's run starts and when it ends.
 *
 *   open issues with the label ──▶ each new one: store_forge_intake
 *     (one listing request;          inserts the task blocked(issue_linking)
 *      a 304: nothing new)           with its link, in one transaction
 *                                          │
 *                                          ▼
 *                                    queued ("task_linked"), serve woken
 *
 * The store's unique (repo, issue) key makes the intake happen once
 * whatever the number of syncs, processes or hosts: of two syncs racing
 * on one issue, one makes the task and the other finds it made. A task
 * left blocked(issue_linking) by a crash between the two steps is queued
 * by the next round. A task whose issue was closed or lost the label
 * before its run started is cancelled, the reason naming the issue.
 */
#include "util/compat.h"

#define LOG_MODULE "forge"

#include <stdlib.h>

#include <jansson.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "forge/forge_int.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define ORIGIN_ISSUE "issue"
/* task add's --priority range */
#define PRIORITY_MIN (-1000)
#define PRIORITY_MAX 1000
/* the run's reason in an issue comment */
#define REASON_MAX 1000

/* The tasks linked to an issue, as one round found them. */
struct linked {
	int64_t task_id, issue;
};

struct linked_vec {
	struct linked *v;
	size_t nr, alloc;
};

static int
collect_link(const struct forge_link *l, void *arg)
{
	struct linked_vec *lv = arg;

	if (l->issue_number <= 0)
		return 0;
	ALLOC_GROW(lv->v, lv->nr + 1, lv->alloc);
	lv->v[lv->nr].task_id = l->task_id;
	lv->v[lv->nr].issue = l->issue_number;
	lv->nr++;
	return 0;
}

/* The links of this repository's issues (read first, acted on after). */
static int
issue_links(struct forge_ctx *fx, struct linked_vec *out, struct err *e)
{
	return store_forge_links(fx->s, fx->cfg->forge.repo, collect_link, out,
				 e);
}

/*
 * Where s (len bytes) stops being UTF-8 text: the offset of its first
 * invalid sequence or NUL byte, or len when it is all text.
 */
static size_t
text_end(const char *s, size_t len)
{
	size_t i = 0, n;
	unsigned int cp;

	while (i < len) {
		n = utf8_decode((const unsigned char *)s + i, len - i, &cp);
		if (!n || !cp)
			return i;
		i += n;
	}
	return len;
}

/*
 * The member key of issue number n as text (a copy in *out; NULL for a
 * JSON null when may_be_null). BATON_EINVAL naming the issue and the
 * member when it is neither, or not UTF-8 text (jansson refuses such
 * text, but a NUL escaped as \u0000 is not refused everywhere).
 */
static int
issue_text(const json_t *issue, long n, const char *key, int may_be_null,
	   char **out, struct err *e)
{
	const json_t *v = json_object_get(issue, key);
	size_t len, end;

	*out = NULL;
	if ((!v || json_is_null(v)) && may_be_null)
		return 0;
	if (!json_is_string(v))
		return err_set(e, BATON_EINVAL,
			       "issue #%ld: its %s is %s, not text", n, key, v ? json_kind(v) : "missing");
	len = json_string_length(v);
	end = text_end(json_string_value(v), len);
	if (end < len)
		return err_set(e, BATON_EINVAL,
			       "issue #%ld: its %s is not UTF-8 text (byte "
			       "%zu of %zu): not imported",
			       n, key, end, len);
	*out = xstrdup(json_string_value(v));
	return 0;
}

/* The name of label lb (an object with a name, or a plain string). */
static const char *
label_name(const json_t *lb)
{
	if (json_is_string(lb))
		return json_string_value(lb);
	return json_get_str(lb, "name");
}

/*
 * Applies the issue's `priority:N` and `area:PATH` labels to t; a label
 * that says nothing valid is left out, with why in notes (a line each):
 * the issue is imported all the same. Several priorities: the highest.
 */
static void
apply_labels(const json_t *issue, struct task *t, struct buf *notes)
{
	const json_t *labels = json_object_get(issue, "labels"), *lb;
	int have_prio = 0;
	size_t i;

	json_array_foreach(labels, i, lb) {
		const char *name = label_name(lb);
		struct err le = ERR_INIT;
		char *end = NULL, *area = NULL;
		long p;

		if (!name)
			continue;
		if (!strncmp(name, "priority:", 9)) {
			errno = 0;
			p = strtol(name + 9, &end, 10);
			if (!name[9] || *end || errno || p < PRIORITY_MIN ||
			    p > PRIORITY_MAX) {
				buf_addf(notes,
					 "- label `%s` is ignored: a priority "
					 "is a whole number from %d to %d\n",
					 name, PRIORITY_MIN, PRIORITY_MAX);
				continue;
			}
			if (!have_prio || p > t->priority)
				t->priority = (int)p;
			have_prio = 1;
		} else if (!strncmp(name, "area:", 5)) {
			if (sched_task_area(name + 5, "area", &area, &le)) {
				buf_addf(notes, "- label `%s` is ignored: %s\n",
					 name, le.msg);
				continue;
			}
			if (t->area && area && strcmp(t->area, area)) {
				buf_addf(notes,
					 "- label `%s` is ignored: the task "
					 "has area `%s` already (one area a "
					 "task)\n",
					 name, t->area);
				free(area);
				continue;
			}
			if (!t->area)
				t->area = area;
			else
				free(area);
		}
	}
}

/* The notes of apply_labels on one line, for the log (borrowed). */
static const char *
one_line(struct buf *notes)
{
	size_t i;

	for (i = 0; i + 1 < notes->len; i++)
		if (notes->ptr[i] == '\n')
			notes->ptr[i] = ';';
	if (notes->len && notes->ptr[notes->len - 1] == '\n')
		notes->ptr[--notes->len] = '\0';
	return notes->ptr;
}

/*
 * Takes task id out of blocked(issue_linking) into the queue, with a
 * "task_linked" event: its link is recorded. A task already out of it
 * (another round queued it, a person cancelled it) is left alone.
 * Returns 1 when it queued it, 0 when there was nothing to do.
 */
static int
queue_linked(struct forge_ctx *fx, int64_t id, int64_t issue, struct err *e)
{
	struct sched_ctx x = forge__sched(fx);
	int tries, rc = 0;

	for (tries = 0; tries < 3; tries++) {
		struct task t = { 0 };
		char *data;

		rc = store_task_get(fx->s, id, &t, e);
		if (rc)
			return rc;
		if (strcmp(t.status, TASK_BLOCKED) || !t.block_reason ||
		    strcmp(t.block_reason, BLOCK_ISSUE_LINKING)) {
			task_release(&t);
			return 0;
		}
		run_set(&t.status, TASK_QUEUED);
		run_set(&t.block_reason, NULL);
		run_set(&t.reason, NULL);
		data = json_take_text(json_pack("{s:I, s:s}", "issue",
						(json_int_t)issue, "repo",
						fx->cfg->forge.repo));
		rc = sched_task_write(&x, &t, "task_linked", data, e);
		free(data);
		task_release(&t);
		if (rc != BATON_ECONFLICT)
			return rc ? rc : 1;
		*e = (struct err)ERR_INIT; /* changed under us: look again */
	}
	return rc;
}

/*
 * One issue of the listing: a task unless it has one. Returns 1 when it
 * made one, 0 when the issue had one or was refused (bad text: said in
 * the log, counted in round->refused), or an error of the store.
 */
static int
import_issue(struct forge_ctx *fx, const json_t *issue, struct err *e)
{
	struct task t = { 0 };
	struct forge_link l = { 0 };
	struct event ev = { 0 };
	struct buf notes = BUF_INIT;
	struct err te = ERR_INIT;
	json_int_t n = json_integer_value(json_object_get(issue, "number"));
	const char *url = json_get_str(issue, "html_url");
	json_t *data;
	int rc;

	if (n <= 0) {
		log_warn("an issue of the listing has no number: skipped");
		return 0;
	}
	if (issue_text(issue, (long)n, "title", 0, &t.title, &te) ||
	    issue_text(issue, (long)n, "body", 1, &t.body, &te)) {
		log_warn("%s", te.msg);
		fx->round->refused++;
		rc = 0;
		goto out;
	}
	if (!t.title || !*t.title) { /* GitHub requires one; be safe */
		free(t.title);
		t.title = xasprintf("issue #%lld", (long long)n);
	}
	if (t.body && !*t.body)
		FREE_AND_NULL(t.body);
	sched_task_fit(&t); /* a 1 MB body keeps its head and tail */
	apply_labels(issue, &t, &notes);
	t.status = xstrdup(TASK_BLOCKED);
	t.block_reason = xstrdup(BLOCK_ISSUE_LINKING);
	t.reason = xasprintf("recording the link to issue #%lld", (long long)n);
	t.origin = xstrdup(ORIGIN_ISSUE);
	t.max_attempts = fx->cfg->runtime.max_attempts;
	l.repo = xstrdup(fx->cfg->forge.repo);
	l.issue_number = n;
	l.issue_url = xstrdup_or_null(url);
	data = json_pack("{s:s, s:s?, s:i, s:[], s:s, s:I}", "title", t.title,
			 "area", t.area, "priority", t.priority, "depends_on",
			 "origin", ORIGIN_ISSUE, "issue", (json_int_t)n);
	ev.type = (char *)"task_added";
	ev.data = json_take_text(data);
	rc = store_forge_intake(fx->s, &t, &l, &ev, e);
	if (rc <= 0)
		goto out;
	fx->round->imported++;
	log_info("issue #%lld became task t%lld", (long long)n,
		 (long long)t.id);
	rc = queue_linked(fx, t.id, n, e);
	if (rc < 0)
		goto out;
	rc = 1;
	if (notes.len) {
		struct buf text = BUF_INIT;

		buf_addf(&text,
			 "baton made task t%lld of this issue; some of "
			 "its labels say nothing baton can use:\n\n%s",
			 (long long)t.id, notes.ptr);
		log_warn("issue #%lld: %s", (long long)n, one_line(&notes));
		if (gh_issue_comment(&fx->gh, (long)n, text.ptr, NULL, &te))
			log_warn("issue #%lld: cannot comment: %s",
				 (long long)n, te.msg);
		buf_release(&text);
	}
out:
	free(ev.data);
	buf_release(&notes);
	forge_link_release(&l);
	task_release(&t);
	return rc;
}

static int
cmp_num(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Whether issue is still open with the intake label, asked of GitHub:
 * 1, or 0 with why not in why. */
static int
issue_still_wanted(struct forge_ctx *fx, int64_t issue, struct buf *why,
		   struct err *e)
{
	struct gh_response r = { 0 };
	char *path = xasprintf("/repos/%s/issues/%lld", fx->cfg->forge.repo,
			       (long long)issue);
	const json_t *lb;
	size_t i;
	int rc;

	/* no If-None-Match: the answer's body is what we need */
	rc = gh_request(&fx->gh, "GET", path, NULL, &r, e);
	free(path);
	if (rc < 0 && (r.status == 404 || r.status == 410)) {
		*e = (struct err)ERR_INIT;
		buf_addf(why, "issue #%lld is gone (%ld)", (long long)issue,
			 r.status);
		rc = 0;
		goto out;
	}
	if (rc < 0)
		goto out;
	if (!json_is_object(r.json)) {
		rc = 1; /* a 304 or nothing to read: keep the task */
		goto out;
	}
	if (strcmp(json_get_str(r.json, "state") ? json_get_str(r.json, "state")
						 : "",
		   "open")) {
		buf_addf(why, "issue #%lld was closed", (long long)issue);
		rc = 0;
		goto out;
	}
	json_array_foreach(json_object_get(r.json, "labels"), i, lb) {
		const char *name = label_name(lb);

		if (name && !strcmp(name, fx->cfg->forge.intake_label)) {
			rc = 1;
			goto out;
		}
	}
	buf_addf(why, "issue #%lld lost the label '%s'", (long long)issue,
		 fx->cfg->forge.intake_label);
	rc = 0;
out:
	gh_response_release(&r);
	return rc;
}

/*
 * Cancels task id, made of issue, if its run has not started: the
 * reason says why (why). A task that started meanwhile is left alone.
 */
static int
cancel_unstarted(struct forge_ctx *fx, int64_t id, int64_t issue,
		 const char *why, struct err *e)
{
	struct sched_ctx x = forge__sched(fx);
	struct task t = { 0 };
	char *data = NULL;
	int rc = store_task_get(fx->s, id, &t, e);

	if (rc)
		goto out;
	if (t.run_id ||
	    (strcmp(t.status, TASK_QUEUED) && strcmp(t.status, TASK_BLOCKED)))
		goto out;
	run_set(&t.status, TASK_CANCELLED);
	run_set(&t.block_reason, NULL);
	run_set(&t.reason, why);
	t.ended_at = time_now_ms();
	data = json_take_text(
	    json_pack("{s:s, s:I}", "reason", why, "issue", (json_int_t)issue));
	rc = sched_task_write(&x, &t, "task_cancelled", data, e);
	if (rc == BATON_ECONFLICT) {
		/* claimed or changed meanwhile: the next round looks again */
		*e = (struct err)ERR_INIT;
		rc = 0;
		goto out;
	}
	if (!rc) {
		fx->round->cancelled++;
		log_info("t%lld cancelled: %s", (long long)id, why);
	}
out:
	free(data);
	task_release(&t);
	return rc;
}

/* Whether the task of link l has not started a run yet (and may end). */
static int
unstarted(struct forge_ctx *fx, int64_t id)
{
	struct task t = { 0 };
	struct err ignored = ERR_INIT;
	int yes = 0;

	if (!store_task_get(fx->s, id, &t, &ignored))
		yes = !t.run_id && (!strcmp(t.status, TASK_QUEUED) ||
				    !strcmp(t.status, TASK_BLOCKED));
	task_release(&t);
	return yes;
}

int
forge__intake(struct forge_ctx *fx, struct err *e)
{
	struct linked_vec lv = { 0 };
	int64_t *listed = NULL, *linked = NULL;
	size_t nr_listed = 0, i;
	json_t *issues = NULL, *it;
	char *path;
	int rc, unchanged = 0;

	rc = issue_links(fx, &lv, e);
	if (rc)
		goto out;
	/* a crash between the intake and its queueing: finish it */
	for (i = 0; i < lv.nr; i++) {
		rc = queue_linked(fx, lv.v[i].task_id, lv.v[i].issue, e);
		if (rc < 0)
			goto out;
		fx->round->linked += rc;
	}
	rc = 0;
	if (!fx->cfg->forge.intake_label)
		goto out;
	path = xasprintf("/repos/%s/issues?", fx->cfg->forge.repo);
	forge__keep_etags(fx, path);
	free(path);
	rc = gh_issues_with_label(&fx->gh, fx->cfg->forge.intake_label, &issues,
				  &unchanged, e);
	if (rc)
		goto out;
	if (unchanged) {
		fx->round->unchanged = 1;
		goto out;
	}
	/* the issues linked already need no transaction each: in a
	 * backlog of a thousand, the new ones are a few */
	linked = xcalloc(lv.nr + 1, sizeof(*linked));
	for (i = 0; i < lv.nr; i++)
		linked[i] = lv.v[i].issue;
	qsort(linked, lv.nr, sizeof(*linked), cmp_num);
	listed = xcalloc(json_array_size(issues) + 1, sizeof(*listed));
	json_array_foreach(issues, i, it) {
		int64_t n = json_integer_value(json_object_get(it, "number"));

		if (json_object_get(it, "pull_request"))
			continue; /* GitHub lists pull requests as issues */
		if (n > 0)
			listed[nr_listed++] = n;
		if (n > 0 &&
		    bsearch(&n, linked, lv.nr, sizeof(*linked), cmp_num))
			continue;
		rc = import_issue(fx, it, e);
		if (rc < 0)
			goto out;
	}
	rc = 0;
	qsort(listed, nr_listed, sizeof(*listed), cmp_num);
	/* the tasks whose issue left the listing: closed or unlabelled */
	for (i = 0; i < lv.nr; i++) {
		struct buf why = BUF_INIT;
		int64_t n = lv.v[i].issue;

		if (bsearch(&n, listed, nr_listed, sizeof(*listed), cmp_num) ||
		    !unstarted(fx, lv.v[i].task_id))
			continue;
		rc = issue_still_wanted(fx, n, &why, e);
		if (rc == 0)
			rc = cancel_unstarted(fx, lv.v[i].task_id, n, why.ptr,
					      e);
		buf_release(&why);
		if (rc < 0)
			goto out;
		rc = 0;
	}
out:
	json_decref(issues);
	free(listed);
	free(linked);
	free(lv.v);
	return rc;
}

/* ---- telling the issue ------------------------------------------------ */

/*
 * What to tell issue l->issue_number of its task's run now: "started:RUN"
 * or "ended:RUN" in *mark (the link's commented field) and the text, or
 * 0 when there is nothing new. A run whose task waits for its pull
 * request to be opened has not ended for the issue yet: its end names
 * the PR.
 */
static int
run_news(struct forge_ctx *fx, const struct forge_link *l, char **mark,
	 struct buf *text, struct err *e)
{
	struct task t = { 0 };
	struct run r = { 0 };
	char *started = NULL, *ended = NULL;
	int rc, ends;

	*mark = NULL;
	rc = store_task_get(fx->s, l->task_id, &t, e);
	if (rc)
		goto out;
	if (!t.run_id)
		goto out;
	/* told already of this run's end: no need to read the run */
	if (l->commented && !strncmp(l->commented, "ended:", 6) &&
	    !strcmp(l->commented + 6, t.run_id))
		goto out;
	rc = store_run_get(fx->s, t.run_id, &r, e);
	if (rc) {
		if (rc == BATON_ENOTFOUND) {
			*e = (struct err)ERR_INIT;
			rc = 0;
		}
		goto out;
	}
	started = xasprintf("started:%s", r.id);
	ended = xasprintf("ended:%s", r.id);
	if (l->commented && !strcmp(l->commented, ended))
		goto out;
	ends = status_is_terminal(r.status) && strcmp(t.status, TASK_RUNNING);
	if (ends && !strcmp(t.status, TASK_BLOCKED) && t.block_reason &&
	    (!strcmp(t.block_reason, BLOCK_AWAITING_JUDGE) ||
	     (!strcmp(t.block_reason, BLOCK_PULL_REQUEST) && !l->pr_number)))
		ends = 0; /* the judge, or the PR, still has to speak */
	if (ends) {
		*mark = ended;
		ended = NULL;
		buf_addf(text,
			 "baton's run `%s` of task t%lld ended: the run "
			 "is **%s**, the task **%s**",
			 r.id, (long long)t.id, r.status, t.status);
		if (t.block_reason)
			buf_addf(text, " (%s)", t.block_reason);
		buf_addch(text, '.');
		if (r.reason && *r.reason) {
			/* a reason may quote a command's output: a bounded
			 * excerpt, the issue is no place for a log */
			size_t n = utf8_cut(r.reason, strlen(r.reason),
					    REASON_MAX);

			buf_addf(text, "\n\nWhy: %.*s%s", (int)n, r.reason,
				 r.reason[n] ? " [...]" : "");
		}
		if (r.cost_usd > 0)
			buf_addf(text, "\n\nCost: $%.2f", r.cost_usd);
		if (l->pr_url)
			buf_addf(text, "\n\nPull request: %s", l->pr_url);
		else if (l->pr_number)
			buf_addf(text, "\n\nPull request: #%lld",
				 (long long)l->pr_number);
	} else if (!l->commented || strcmp(l->commented, started)) {
		if (status_is_terminal(r.status))
			goto out; /* its end is told once it is known */
		*mark = started;
		started = NULL;
		buf_addf(text,
			 "baton started run `%s` of task t%lld for this "
			 "issue (attempt %d).",
			 r.id, (long long)t.id, t.attempts);
	}
out:
	free(started);
	free(ended);
	run_release(&r);
	task_release(&t);
	return rc;
}

/*
 * Tells the issue of task id about its run, once: the mark is recorded
 * first (a versioned write: of two rounds one posts), then the comment
 * posted; a failed post puts the old mark back so that the next round
 * tries again. A crash between the two loses the comment rather than
 * posting it twice.
 */
static int
tell_issue(struct forge_ctx *fx, int64_t id, struct err *e)
{
	struct forge_link l = { 0 };
	struct buf text = BUF_INIT;
	char *mark = NULL, *old = NULL;
	int rc = store_forge_link_get(fx->s, id, &l, e);

	if (rc)
		goto out;
	if (l.issue_number <= 0)
		goto out;
	rc = run_news(fx, &l, &mark, &text, e);
	if (rc || !mark)
		goto out;
	old = l.commented;
	l.commented = mark;
	mark = NULL;
	rc = store_forge_link_put(fx->s, &l, e);
	if (rc == BATON_ECONFLICT) {
		*e = (struct err)ERR_INIT; /* another round has it */
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	rc = gh_issue_comment(&fx->gh, (long)l.issue_number, text.ptr, NULL, e);
	if (rc) {
		struct err ignored = ERR_INIT;

		free(l.commented);
		l.commented = old;
		old = NULL;
		store_forge_link_put(fx->s, &l, &ignored);
		goto out;
	}
	fx->round->commented++;
out:
	free(old);
	free(mark);
	buf_release(&text);
	forge_link_release(&l);
	return rc;
}

int
forge__comments(struct forge_ctx *fx, struct err *e)
{
	struct linked_vec lv = { 0 };
	size_t i;
	int rc = issue_links(fx, &lv, e);

	for (i = 0; !rc && i < lv.nr; i++)
		rc = tell_issue(fx, lv.v[i].task_id, e);
	free(lv.v);
	return rc;
}
