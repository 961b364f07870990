/*
 * The engine's one door and the derived tables: every pair of statuses
 * outside a pipeline's table is refused and changes nothing; every edge
 * in it is accepted; a second, different pipeline gets its own table; bad
 * pipeline definitions are refused with errors that name the stage.
 */
#include "util/compat.h"

#include <unistd.h>

#include "core/cnode.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "core/run.h"
#include "engine/engine.h"
#include "store/store.h"
#include "test.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

struct fixture {
	struct workspace ws;
	struct config cfg;
	struct store *store;
	struct engine en;
	struct pipeline *p;
};

static const char base_config[] =
	"providers: {a: {type: command, command: [\"true\"]}}\n"
	"roles: {default: a}\n"
	"pipelines:\n"
	"  quick:\n"
	"    terminal: completed\n"
	"    stages:\n"
	"      - execute\n"
	"      - {name: check, kind: validate, on_fail: repair}\n"
	"      - {name: repair, kind: fix, side: true, next: check}\n";

/* A git repository with one commit: runs branch from its HEAD. */
static void
make_repo(const char *dir)
{
	const char *init[] = { "git", "init", "-q", dir, NULL };
	const char *commit[] = { "git", "-C", dir, "-c", "user.name=t",
				 "-c", "user.email=t@t", "commit", "-q",
				 "--allow-empty", "-m", "init", NULL };
	struct err e = ERR_INIT;

	ASSERT_OK(spawn_capture(init, NULL, NULL, 0, 30000, &e), &e);
	ASSERT_OK(spawn_capture(commit, NULL, NULL, 0, 30000, &e), &e);
}

static void
setup(struct fixture *f, const char *pipeline)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err e = ERR_INIT;
	char *db;

	memset(f, 0, sizeof(*f));
	make_repo(test_tmpdir());
	f->ws.repo = xstrdup(test_tmpdir());
	f->ws.dir = xasprintf("%s/.baton", test_tmpdir());
	f->ws.common = xasprintf("%s/.git", test_tmpdir());
	ASSERT_OK(fs_mkdir_p(f->ws.dir, 0755, &e), &e);
	config_builder_init(&b);
	ASSERT_OK(config_add_yaml(&b, "test.yaml", base_config,
				  strlen(base_config), &e),
		  &e);
	ASSERT_OK(config_finish(&b, &f->cfg, &e), &e);
	db = xasprintf("%s/baton.db", f->ws.dir);
	ASSERT_OK(store_open(db, &f->store, &e), &e);
	free(db);
	engine_init(&f->en, f->store, &f->ws, &f->cfg);
	ASSERT_OK(engine_pipeline(&f->en, pipeline, &f->p, &e), &e);
}

static void
teardown(struct fixture *f)
{
	pipeline_free(f->p);
	engine_release(&f->en);
	store_close(f->store);
	config_release(&f->cfg);
	workspace_release(&f->ws);
}

/*
 * Puts a new run into status without running anything: along the
 * shortest path of the pipeline's table from created (breadth first),
 * each step a move of the store's door with nothing else changed (the
 * engine's door would also set the phase and times).
 */
static void
run_at(struct fixture *f, const char *status, struct run *out)
{
	const struct pipeline *p = f->p;
	struct err e = ERR_INIT;
	size_t *prev = xcalloc(p->nr_statuses, sizeof(*prev));
	size_t *queue = xcalloc(p->nr_statuses, sizeof(*queue));
	size_t *path = xcalloc(p->nr_statuses, sizeof(*path));
	size_t head = 0, tail = 0, n = 0, i, at, start = p->nr_statuses;

	ASSERT_OK(engine_create(&f->en, "task", p->name, out, &e), &e);
	for (i = 0; i < p->nr_statuses; i++) {
		prev[i] = p->nr_statuses; /* unseen */
		if (!strcmp(p->statuses[i], out->status))
			start = i;
	}
	ASSERT(start < p->nr_statuses);
	prev[start] = start;
	queue[tail++] = start;
	while (head < tail) {
		at = queue[head++];
		for (i = 0; i < p->nr_edges; i++)
			if (p->edges[i].from_at == at &&
			    prev[p->edges[i].to_at] == p->nr_statuses) {
				prev[p->edges[i].to_at] = at;
				queue[tail++] = p->edges[i].to_at;
			}
	}
	for (at = 0; at < p->nr_statuses; at++)
		if (!strcmp(p->statuses[at], status))
			break;
	ASSERT(at < p->nr_statuses && prev[at] != p->nr_statuses);
	for (; at != start; at = prev[at])
		path[n++] = at;
	while (n--) {
		struct run_move mv = { p, p->statuses[prev[path[n]]],
				       p->statuses[path[n]] };

		run_set(&out->status, mv.to);
		ASSERT_OK(store_run_move(f->store, out, &mv, NULL, &e), &e);
	}
	free(prev);
	free(queue);
	free(path);
}

static int
count_event(const struct event *ev, void *arg)
{
	(void)ev;
	(*(int *)arg)++;
	return 0;
}

static int
events_of(struct fixture *f, const char *run_id)
{
	struct err e = ERR_INIT;
	int n = 0;

	ASSERT_OK(store_event_list(f->store, run_id, 0, NULL, count_event, &n,
				   &e),
		  &e);
	return n;
}

/*
 * For every ordered pair of the pipeline's statuses: legal edges move the
 * run and add one event; everything else is refused with EBADSTATE and
 * leaves the stored run and its events exactly as they were.
 */
static void
check_all_pairs(const char *pipeline)
{
	struct fixture f;
	size_t i, j, legal = 0, illegal = 0;

	setup(&f, pipeline);
	for (i = 0; i < f.p->nr_statuses; i++) {
		for (j = 0; j < f.p->nr_statuses; j++) {
			const char *from = f.p->statuses[i];
			const char *to = f.p->statuses[j];
			struct run r = { 0 }, after = { 0 };
			struct err e = ERR_INIT;
			int before, rc;
			int64_t version;

			run_at(&f, from, &r);
			version = r.version;
			before = events_of(&f, r.id);
			rc = engine_transition(&f.en, f.p, &r, to, NULL, &e);
			ASSERT_OK(store_run_get(f.store, r.id, &after, &e), &e);
			if (pipeline_edge(f.p, from, to)) {
				legal++;
				if (rc)
					test_fail(__FILE__, __LINE__,
						  "%s -> %s refused: %s", from,
						  to, e.msg);
				ASSERT_STREQ(after.status, to);
				ASSERT_EQ(after.version, version + 1);
				ASSERT_EQ(events_of(&f, r.id), before + 1);
				if (status_is_terminal(to))
					ASSERT(after.ended_at > 0);
			} else {
				illegal++;
				if (rc != BATON_EBADSTATE)
					test_fail(__FILE__, __LINE__,
						  "%s -> %s: rc %d, want "
						  "EBADSTATE",
						  from, to, rc);
				ASSERT_CONTAINS(e.msg, from);
				ASSERT_CONTAINS(e.msg, to);
				ASSERT_STREQ(after.status, from);
				ASSERT_EQ(after.version, version);
				ASSERT_EQ(events_of(&f, r.id), before);
			}
			run_release(&r);
			run_release(&after);
		}
	}
	ASSERT_EQ(legal, f.p->nr_edges);
	ASSERT(illegal > legal);
	teardown(&f);
}

TEST(feature_every_pair_checked)
{
	check_all_pairs("feature");
}

TEST(second_pipeline_every_pair_checked)
{
	check_all_pairs("quick");
}

TEST(feature_has_the_seed_statuses)
{
	static const char *const want[] = {
		"created",     "planning",    "planned",
		"architecting", "architected", "executing",
		"validating",  "reviewing",   "fixing",
		"verifying",   "waiting_for_approval", "paused",
		"merge_ready", "blocked",     "failed",
		"aborted",     "interrupted",
	};
	struct fixture f;
	size_t i;

	setup(&f, "feature");
	ASSERT_EQ(f.p->nr_statuses, ARRAY_SIZE(want));
	for (i = 0; i < ARRAY_SIZE(want); i++)
		if (!pipeline_has_status(f.p, want[i]))
			test_fail(__FILE__, __LINE__, "no status '%s'",
				  want[i]);
	/* The happy path and the fix loop are edges. */
	ASSERT(pipeline_edge(f.p, "verifying", "merge_ready"));
	ASSERT(pipeline_edge(f.p, "reviewing", "fixing"));
	ASSERT(pipeline_edge(f.p, "validating", "fixing"));
	ASSERT(pipeline_edge(f.p, "fixing", "validating"));
	ASSERT(pipeline_edge(f.p, "architected", "waiting_for_approval"));
	ASSERT(pipeline_edge(f.p, "waiting_for_approval", "architecting"));
	ASSERT(!pipeline_edge(f.p, "created", "merge_ready"));
	ASSERT(!pipeline_edge(f.p, "merge_ready", "created"));
	teardown(&f);
}

TEST(bugfix_every_pair_checked)
{
	check_all_pairs("bugfix");
}

TEST(bugfix_has_the_seed_statuses)
{
	static const char *const want[] = {
		"created",	    "analyzing_1",	"analyzing_2",
		"consolidating",    "diagnosed",	"reviewing_plan",
		"implementing",	    "reviewing_code_1", "reviewing_code_2",
		"reviewing_code_3", "fixing",		"revising_plan",
		"waiting_for_approval", "paused",	"interrupted",
		"merge_ready",	    "blocked",		"failed",
		"aborted",
	};
	static const char *const edges[][2] = {
		{ "created", "analyzing_1" },
		{ "analyzing_1", "analyzing_2" },
		{ "analyzing_2", "consolidating" },
		{ "consolidating", "diagnosed" },
		{ "diagnosed", "reviewing_plan" },
		{ "reviewing_plan", "revising_plan" },
		{ "revising_plan", "reviewing_plan" },
		{ "reviewing_plan", "waiting_for_approval" },
		{ "waiting_for_approval", "analyzing_1" },
		{ "reviewing_plan", "implementing" },
		{ "implementing", "reviewing_code_1" },
		{ "reviewing_code_1", "fixing" },
		{ "reviewing_code_2", "fixing" },
		{ "fixing", "reviewing_code_2" },
		{ "reviewing_code_3", "merge_ready" },
		{ "consolidating", "waiting_for_approval" },
		{ "waiting_for_approval", "consolidating" },
		{ "reviewing_code_3", "waiting_for_approval" },
		{ "waiting_for_approval", "reviewing_code_3" },
	};
	struct fixture f;
	size_t i;

	setup(&f, "bugfix");
	ASSERT_EQ(f.p->nr_statuses, ARRAY_SIZE(want));
	for (i = 0; i < ARRAY_SIZE(want); i++)
		ASSERT_STREQ(f.p->statuses[i], want[i]);
	for (i = 0; i < ARRAY_SIZE(edges); i++)
		if (!pipeline_edge(f.p, edges[i][0], edges[i][1]))
			test_fail(__FILE__, __LINE__, "no edge %s -> %s",
				  edges[i][0], edges[i][1]);
	ASSERT_EQ(pipeline_edge(f.p, "fixing", "reviewing_code_2")->why,
		  WHY_REREVIEW);
	ASSERT_EQ(pipeline_edge(f.p, ST_WAITING, "analyzing_1")->why,
		  WHY_REEXAMINE);
	/* side stages only go back; nothing skips the reviews */
	ASSERT(!pipeline_edge(f.p, "fixing", "merge_ready"));
	ASSERT(!pipeline_edge(f.p, "revising_plan", "implementing"));
	ASSERT(!pipeline_edge(f.p, "reviewing_code_2", "merge_ready"));
	ASSERT(!pipeline_edge(f.p, "analyzing_2", "reviewing_plan"));
	ASSERT(!pipeline_edge(f.p, "implementing", "merge_ready"));
	teardown(&f);
}

TEST(second_pipeline_table_differs)
{
	struct fixture f;

	setup(&f, "quick");
	ASSERT_STREQ(f.p->terminal, "completed");
	ASSERT(pipeline_edge(f.p, "created", "executing"));
	ASSERT(pipeline_edge(f.p, "executing", "validating"));
	ASSERT(pipeline_edge(f.p, "validating", "completed"));
	ASSERT(pipeline_edge(f.p, "validating", "fixing"));
	ASSERT(!pipeline_has_status(f.p, "planning"));
	ASSERT(!pipeline_has_status(f.p, "merge_ready"));
	teardown(&f);
}

TEST(terminal_runs_never_move)
{
	struct fixture f;
	struct run r = { 0 };
	struct err e = ERR_INIT;

	setup(&f, "feature");
	run_at(&f, "merge_ready", &r);
	ASSERT_EQ(engine_transition(&f.en, f.p, &r, "failed", NULL, &e),
		  BATON_EBADSTATE);
	ASSERT_CONTAINS(e.msg, "terminal");
	run_release(&r);
	teardown(&f);
}

TEST(lost_race_changes_nothing)
{
	struct fixture f;
	struct run a = { 0 }, b = { 0 };
	struct err e = ERR_INIT;

	setup(&f, "feature");
	run_at(&f, "created", &a);
	run_copy(&b, &a);
	ASSERT_OK(engine_transition(&f.en, f.p, &a, "planning", NULL, &e), &e);
	ASSERT_EQ(engine_transition(&f.en, f.p, &b, "aborted", NULL, &e),
		  BATON_ECONFLICT);
	ASSERT_STREQ(b.status, "created");
	run_release(&b);
	ASSERT_OK(store_run_get(f.store, a.id, &b, &e), &e);
	ASSERT_STREQ(b.status, "planning");
	run_release(&a);
	run_release(&b);
	teardown(&f);
}

/* Parses a pipeline definition and returns the error message. */
static int
parse(const char *yaml, struct err *e)
{
	struct cnode *n = NULL;
	struct pipeline *p = NULL;
	int rc;

	rc = cnode_parse_yaml(yaml, strlen(yaml), "p.yaml", &n, e);
	if (!rc)
		rc = pipeline_parse("t", n, 0, &p, e);
	pipeline_free(p);
	cnode_free(n);
	return rc;
}

TEST(pipeline_errors_name_the_stage)
{
	struct err e = ERR_INIT;

	ASSERT_EQ(parse("stages: [execute, {name: r, kind: review, "
			"on_changes: fixx}]\n",
			&e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "p.yaml:1:");
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (r)");
	ASSERT_CONTAINS(e.msg, "no stage named 'fixx'");

	ASSERT_EQ(parse("stages: [execute, {kind: dance}]\n", &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "unknown stage kind 'dance'");

	ASSERT_EQ(parse("stages: [{name: a, kind: execute}, "
			"{name: a, kind: verify}]\n",
			&e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "pipelines.t.stages[1] (a)");
	ASSERT_CONTAINS(e.msg, "already exists");

	ASSERT_EQ(parse("stages: [{name: x, kind: fix, side: true, next: x}, "
			"execute]\n",
			&e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "cannot lead to itself");

	ASSERT_EQ(parse("stages: [{kind: execute, status: paused}]\n", &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "reserved");

	ASSERT_EQ(parse("stages: []\n", &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "non-empty list of stages");

	ASSERT_EQ(parse("stages: [execute, {kind: fix, side: true}]\n", &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "needs 'next'");

	ASSERT_EQ(parse("stages: [{kind: execute, on_fail: execute}]\n", &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "only for validate");

	ASSERT_EQ(parse("terminal: done\nstages: [execute]\n", &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "merge_ready or completed");

	ASSERT_EQ(parse("stages: [{kind: execute, status: 'Bad Name'}]\n", &e),
		  BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "not a valid name");
}

TEST(unknown_pipeline_lists_the_known_ones)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;

	ASSERT_EQ(pipeline_load(NULL, "nope", &p, &e), BATON_ENOTFOUND);
	ASSERT_CONTAINS(e.msg, "unknown pipeline 'nope'");
	ASSERT_CONTAINS(e.msg, "feature, bugfix");
}

TEST(create_refuses_a_pipeline_without_providers)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct fixture f;
	struct config bare;
	struct engine en;
	struct run r = { 0 };
	struct err e = ERR_INIT;

	setup(&f, "feature");
	config_builder_init(&b);
	ASSERT_OK(config_finish(&b, &bare, &e), &e);
	engine_init(&en, f.store, &f.ws, &bare);
	ASSERT_EQ(engine_create(&en, "task", NULL, &r, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "roles.planner or roles.default");
	ASSERT_EQ(engine_create(&f.en, "", NULL, &r, &e), BATON_EINVAL);
	engine_release(&en);
	config_release(&bare);
	teardown(&f);
}
