/*
 * openTiger's start-up rules (docs/forge.md, "Start-up rules"), for
 * `baton doctor` and `baton serve`: the planner starts from a
 * requirement only when there is no issue backlog (open issues with the
 * intake label that no task is linked to yet) and no judge backlog
 * (tasks whose finished run waits for the judge); else the issues and
 * the judge come first and the launch says "Planner is skipped for this
 * launch".
 */
#include "util/compat.h"

#include <stdlib.h>

#include <jansson.h>

#include "core/config.h"
#include "forge/forge.h"
#include "forge/forge_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/xalloc.h"

/* The issue numbers linked to tasks. */
struct linked_issues {
	int64_t *v;
	size_t nr, alloc;
};

static int
collect_issue(const struct forge_link *l, void *arg)
{
	struct linked_issues *li = arg;

	if (l->issue_number <= 0)
		return 0;
	ALLOC_GROW(li->v, li->nr + 1, li->alloc);
	li->v[li->nr++] = l->issue_number;
	return 0;
}

static int
cmp_num(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

int
forge_issue_backlog(const struct config *cfg, struct store *s,
		    const struct workspace *ws, int *out, struct err *e)
{
	struct forge_round round = { 0 };
	struct linked_issues li = { 0 };
	struct forge_ctx fx;
	json_t *issues = NULL;
	const json_t *it;
	size_t i;
	int rc, n = 0;

	*out = 0;
	if (!cfg->forge.type || !cfg->forge.intake_label)
		return 0;
	rc = forge__begin(&fx, cfg, s, ws, &round, e);
	if (!rc)
		rc = store_forge_links(s, cfg->forge.repo, collect_issue, &li,
				       e);
	/* the whole listing, unconditionally: a 304 would not say how many */
	if (!rc)
		rc = gh_issues_with_label(&fx.gh, cfg->forge.intake_label,
					  &issues, NULL, e);
	if (rc)
		goto out;
	if (li.nr > 1)
		qsort(li.v, li.nr, sizeof(*li.v), cmp_num);
	json_array_foreach(issues, i, it) {
		int64_t num = json_integer_value(json_object_get(it, "number"));

		if (json_object_get(it, "pull_request") || num <= 0)
			continue;
		n += !li.nr ||
		     !bsearch(&num, li.v, li.nr, sizeof(*li.v), cmp_num);
	}
	*out = n;
out:
	free(li.v);
	json_decref(issues);
	forge__end(&fx, 0);
	return rc;
}

static int
count_judge_wait(const struct task *t, void *arg)
{
	if (t->block_reason && !strcmp(t->block_reason, BLOCK_AWAITING_JUDGE))
		(*(int *)arg)++;
	return 0;
}

int
forge_startup(const struct config *cfg, struct store *s,
	      const struct workspace *ws, struct forge_startup *out,
	      struct err *e)
{
	struct store_task_filter f = { .status = TASK_BLOCKED };
	int rc;

	memset(out, 0, sizeof(*out));
	rc = store_task_list(s, &f, count_judge_wait, &out->judge_backlog, e);
	if (!rc)
		rc = forge_issue_backlog(cfg, s, ws, &out->issue_backlog, e);
	out->skip_planner = out->issue_backlog > 0 || out->judge_backlog > 0;
	return rc;
}
