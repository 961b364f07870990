/*
 * baton doctor: what is installed and whether it works. Three parts:
 *
 *   tools       git, and whether the sandbox is on (execution.sandbox)
 *               and why
 *   agent CLIs  each known CLI: found on PATH? does `--version` answer?
 *               is it newer than the newest version baton's tests ran
 *               against (src/agent/versions.c)? then a warning says so
 *   providers   each configured provider: its program, its key variable,
 *               and (unless --quick) one real call with a tiny prompt,
 *               its failure classified with the fix named
 *
 * Works outside a repository too (then only the first two parts). Exit 0
 * when every configured provider works, or when none is configured and
 * at least one CLI is installed; 1 otherwise, with what to do.
 */
#include "util/compat.h"

#include <stdlib.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/host.h"
#include "agent/versions.h"
#include "cli/cli.h"
#include "forge/forge.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define VERSION_TIMEOUT_MS 20000
#define PING_TIMEOUT_S	   120
#define PING_PROMPT	   "Reply with the single word OK and nothing else."

/* The first line of text, cut to fit a report line. */
static void
first_line(const char *text, char *out, size_t n)
{
	size_t len;

	while (*text == '\n' || *text == ' ')
		text++;
	len = strcspn(text, "\r\n");
	if (len >= n)
		len = n - 1;
	memcpy(out, text, len);
	out[len] = '\0';
}

/*
 * Runs `program --version`; 0 with its first line in out, or -1 with the
 * reason (its last words, or its exit status) in out.
 */
static int
program_version(const char *program, char *out, size_t n)
{
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result r = SPAWN_RESULT_INIT;
	struct err e = ERR_INIT;
	int rc;

	strvec_pushl(&o.argv, program, "--version", NULL);
	o.timeout_ms = VERSION_TIMEOUT_MS;
	o.kill_grace_ms = 1000;
	rc = spawn_run(&o, &r, &e);
	if (rc) {
		snprintf(out, n, "%s", e.msg);
		rc = -1;
	} else if (r.timed_out) {
		snprintf(out, n, "--version did not answer in %d s",
			 VERSION_TIMEOUT_MS / 1000);
		rc = -1;
	} else if (r.status) {
		buf_rtrim(&r.err);
		first_line(strrchr(r.err.ptr, '\n') ? strrchr(r.err.ptr, '\n') :
						      r.err.ptr,
			   out, n);
		if (!out[0])
			snprintf(out, n, "--version exited with %d", r.status);
		rc = -1;
	} else {
		first_line(r.out.len ? r.out.ptr : r.err.ptr, out, n);
	}
	spawn_result_release(&r);
	spawn_opts_release(&o);
	return rc;
}

/*
 * A warning when the version a CLI reports (its --version line) is newer
 * than the newest one baton's tests ran against: its output may have
 * changed in ways baton does not read. Says which, and how to pin.
 */
static void
warn_if_newer(const struct agent_info *a, const char *answer)
{
	const char *tested = agent_tested_version(a->type);
	char v[64];

	if (!tested || agent_version_in(answer, v, sizeof(v)) < 0 ||
	    agent_version_cmp(v, tested) <= 0)
		return;
	cli_printf("  %-12s %-9s WARNING %s %s is newer than %s, the newest "
		   "version baton was tested with; if it misbehaves, pin "
		   "it: %s@%s\n",
		   "", "", a->program, v, tested, a->install_hint, tested);
}

/* The agent CLIs baton knows: installed, answering, or missing. */
static int
check_clis(int *installed)
{
	const struct agent_info *const *infos;
	size_t i, n;
	char what[256];

	infos = agent_infos(&n);
	cli_printf("\nagent CLIs\n");
	for (i = 0; i < n; i++) {
		const struct agent_info *a = infos[i];
		char *path;

		if (!a->program && !strcmp(a->type, "acp")) {
			/* the program is whatever the provider names */
			cli_printf("  %-12s %-9s any agent its provider names "
				   "(%s)\n",
				   a->type, "-", a->install_hint);
			continue;
		}
		if (!a->program)
			continue;
		path = agent_which(a->program);
		if (!path) {
			cli_printf("  %-12s %-9s not installed (%s)\n", a->type,
				   a->program, a->install_hint);
			continue;
		}
		if (program_version(path, what, sizeof(what)) == 0) {
			cli_printf("  %-12s %-9s ok      %s (%s)\n", a->type,
				   a->program, what, path);
			warn_if_newer(a, what);
			(*installed)++;
		} else {
			cli_printf("  %-12s %-9s FAILING %s (%s)\n", a->type,
				   a->program, what, path);
		}
		free(path);
	}
	return 0;
}

/* The roles a provider plays, for the report. */
static void
roles_of(const struct config *cfg, const char *name, struct buf *out)
{
	size_t i, j;

	for (i = 0; i < cfg->nr_roles; i++)
		for (j = 0; j < cfg->roles[i].providers.nr; j++)
			if (!strcmp(cfg->roles[i].providers.v[j], name))
				buf_addf(out, "%s%s", out->len ? ", " : "",
					 cfg->roles[i].role);
	if (!out->len)
		buf_adds(out, "no role");
}

/*
 * One real call of provider p in a scratch directory, in the sandbox a
 * run's calls get when it is on (so a login the sandbox would hide shows
 * here). 0 when it answered; -1 with the classified failure and its fix
 * in why.
 */
static int
ping(const struct config *cfg, const char *repo,
     const struct config_provider *p, char *answer, size_t n,
     struct buf *why)
{
	struct sandbox sb = SANDBOX_INIT;
	struct config_provider quick = *p;
	struct agent_request req = { 0 };
	struct agent_result r = AGENT_RESULT_INIT;
	const struct agent_info *info = agent_info(p->type);
	struct err e = ERR_INIT;
	char dir[] = "/tmp/baton-doctor-XXXXXX";
	char *out = NULL, *errf = NULL, *home = NULL, *prompt = NULL;
	int rc = -1;

	if (!mkdtemp(dir)) {
		buf_addf(why, "cannot make a scratch directory: %s",
			 strerror(errno));
		return -1;
	}
	if (quick.timeout_seconds > PING_TIMEOUT_S)
		quick.timeout_seconds = PING_TIMEOUT_S;
	out = xasprintf("%s/stdout", dir);
	errf = xasprintf("%s/stderr", dir);
	home = xasprintf("%s/home", dir);
	prompt = xasprintf("%s/prompt.md", dir);
	fs_write_atomic(prompt, PING_PROMPT, strlen(PING_PROMPT), NULL);
	if (info && info->is_cli)
		fs_mkdir_p(home, 0700, NULL);
	sandbox_init(&sb, sandbox_mode(cfg->sandbox, NULL), 0);
	sandbox_hide_user(&sb, repo);
	sandbox_rw(&sb, dir);
	req.sandbox = &sb;
	req.provider = &quick;
	req.cwd = dir;
	req.prompt = PING_PROMPT;
	req.prompt_file = prompt;
	req.out_path = out;
	req.err_path = errf;
	req.home = home;
	req.wake_fd = -1;
	if (agent_run(&req, &r, &e)) {
		buf_addf(why, "%s", e.msg);
	} else if (r.failure != AGENT_FAIL_NONE) {
		buf_addf(why, "%s: %s", agent_failure_name(r.failure),
			 r.message.len ? r.message.ptr : "(no message)");
		if (r.failure == AGENT_FAIL_AUTH && info && info->auth_hint)
			buf_addf(why, ". Fix: %s", info->auth_hint);
		if (r.failure == AGENT_FAIL_MISSING && info &&
		    info->install_hint && !strstr(why->ptr, info->install_hint))
			buf_addf(why, ". Fix: %s", info->install_hint);
	} else if (!r.text.len) {
		buf_adds(why, "it answered with no text");
	} else {
		first_line(r.text.ptr, answer, n);
		rc = 0;
	}
	agent_result_release(&r);
	sandbox_release(&sb);
	fs_remove_tree(dir, NULL);
	free(out);
	free(errf);
	free(home);
	free(prompt);
	return rc;
}

/*
 * Whether execution.sandbox (setting; NULL outside a repository: auto)
 * puts the agents in the sandbox here, and why. Off is a problem only
 * when the config asked for bwrap; otherwise a warning that gates and
 * policies are then advisory. Returns the number of problems.
 */
static int
check_sandbox(const char *setting)
{
	struct buf why = BUF_INIT;
	int on = sandbox_mode(setting, &why), bad = 0;

	if (on && !sandbox_available(NULL)) {
		buf_reset(&why);
		sandbox_available(&why);
		cli_printf("  %-12s FAILING execution.sandbox is bwrap, but %s "
			   "(apt-get install bubblewrap; user namespaces must "
			   "be allowed)\n",
			   "sandbox", why.ptr);
		bad = 1;
	} else if (on) {
		cli_printf("  %-12s ok      on: %s\n", "sandbox", why.ptr);
	} else {
		cli_printf(
		    "  %-12s off     %s: agents can reach .baton/ (the "
		    "token, the API, other runs) and your home, so gates "
		    "and policies are advisory only\n",
		    "sandbox", why.ptr);
	}
	buf_release(&why);
	return bad;
}

/* Each configured provider; returns how many do not work. */
static int
check_providers(const struct config *cfg, const char *repo, int quick)
{
	struct buf roles = BUF_INIT, why = BUF_INIT;
	size_t i;
	int bad = 0;

	cli_printf("\nproviders (.baton/config.yaml)\n");
	if (!cfg->nr_providers)
		cli_printf("  none configured: add providers and roles to "
			   ".baton/config.yaml (see docs/agents.md)\n");
	for (i = 0; i < cfg->nr_providers; i++) {
		const struct config_provider *p = &cfg->providers[i];
		char answer[80];
		const char *key = p->api_key_env;

		buf_reset(&roles);
		buf_reset(&why);
		roles_of(cfg, p->name, &roles);
		cli_printf("  %-12s %-12s %-28s ", p->name, p->type, roles.ptr);
		if (key && !getenv(key)) {
			cli_printf("FAILING its key variable %s is not set\n",
				   key);
			bad++;
			continue;
		}
		if (quick) {
			const struct agent_info *info = agent_info(p->type);
			const char *prog = agent_program(p);
			char *path = prog ? agent_which(prog) : NULL;

			if (prog && !path) {
				cli_printf(
				    "FAILING '%s' is not installed or not "
				    "on PATH (%s)\n",
				    prog,
				    info && info->install_hint ?
					info->install_hint :
					"check providers.NAME.command");
				bad++;
			} else {
				cli_printf(
				    "ok      (not called: --quick)%s%s\n",
				    path ? " " : "", path ? path : "");
			}
			free(path);
			continue;
		}
		fflush(stdout);
		if (ping(cfg, repo, p, answer, sizeof(answer), &why) == 0) {
			cli_printf("ok      answered \"%s\"\n", answer);
		} else {
			cli_printf("FAILING %s\n", why.ptr);
			bad++;
		}
	}
	buf_release(&roles);
	buf_release(&why);
	return bad;
}

/* ---- the queue: what serve will find (the seed's preflight) ---------- */

/* A task a claim could take now, with what orders the claims. */
struct ready_task {
	int64_t id;
	int priority;
	char *area; /* NULL: none */
};

static const char *const block_reasons[] = {
	BLOCK_AWAITING_JUDGE, BLOCK_AWAITING_APPROVAL, BLOCK_PAUSED,
	BLOCK_QUOTA_WAIT,     BLOCK_NEEDS_REWORK,      BLOCK_DEPENDENCY,
	BLOCK_ISSUE_LINKING,  BLOCK_PULL_REQUEST,
};

struct backlog {
	struct store *store;
	int64_t now;
	int ready, waiting_deps, cooling, stale, judge, blocked_dep;
	int by_reason[ARRAY_SIZE(block_reasons)];
	struct ready_task *ready_tasks; /* the ready ones, ready of them */
	size_t ready_alloc;
	struct strvec held; /* areas of running tasks still leased */
};

static int
deps_done(struct backlog *b, const struct task *t)
{
	struct err ignored = ERR_INIT;
	size_t i;
	int ok = 1;

	for (i = 0; i < t->nr_deps && ok; i++) {
		struct task d = { 0 };

		ok = !store_task_get(b->store, t->deps[i], &d, &ignored) &&
		     !strcmp(d.status, TASK_DONE);
		task_release(&d);
	}
	return ok;
}

static void
note_ready(struct backlog *b, const struct task *t)
{
	struct ready_task *r;

	ALLOC_GROW(b->ready_tasks, (size_t)b->ready + 1, b->ready_alloc);
	r = &b->ready_tasks[b->ready++];
	r->id = t->id;
	r->priority = t->priority;
	r->area = t->area ? xstrdup(t->area) : NULL;
}

/* The claim's order: priority, high first, then id. */
static int
by_claim_order(const void *pa, const void *pb)
{
	const struct ready_task *a = pa, *b = pb;

	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* Whether area overlaps any of held (store_areas_overlap, the claim's
 * own rule). */
static int
area_taken(const struct strvec *held, const char *area)
{
	size_t i;

	for (i = 0; i < held->nr; i++)
		if (store_areas_overlap(held->v[i], area))
			return 1;
	return 0;
}

/*
 * How many of the ready tasks serve's workers would start at once: the
 * claims one after the other, each taking the first ready task in claim
 * order whose area overlaps no running task's nor one just claimed, up
 * to one per worker. b->held is grown with the areas claimed.
 */
static int
starts_at_once(struct backlog *b, int workers, int *held_back)
{
	int i, starts = 0;

	*held_back = 0;
	/* with none ready, ready_tasks is NULL, which qsort may not be given */
	if (b->ready > 1)
		qsort(b->ready_tasks, (size_t)b->ready,
		      sizeof(*b->ready_tasks), by_claim_order);
	for (i = 0; i < b->ready && starts < workers; i++) {
		const char *area = b->ready_tasks[i].area;

		if (area_taken(&b->held, area)) {
			(*held_back)++;
			continue;
		}
		if (area)
			strvec_push(&b->held, area);
		starts++;
	}
	return starts;
}

static void
backlog_release(struct backlog *b)
{
	int i;

	for (i = 0; i < b->ready; i++)
		free(b->ready_tasks[i].area);
	FREE_AND_NULL(b->ready_tasks);
	strvec_clear(&b->held);
}

static int
look_at_task(const struct task *t, void *arg)
{
	struct backlog *b = arg;
	size_t i;

	if (!strcmp(t->status, TASK_QUEUED)) {
		if (!deps_done(b, t))
			b->waiting_deps++;
		else if (t->not_before > b->now)
			b->cooling++;
		else
			note_ready(b, t);
	} else if (!strcmp(t->status, TASK_RUNNING)) {
		b->stale += t->lease_expires_at <= b->now;
		if (t->area && t->lease_expires_at > b->now)
			strvec_push(&b->held, t->area);
	} else if (!strcmp(t->status, TASK_BLOCKED) && t->block_reason) {
		for (i = 0; i < ARRAY_SIZE(block_reasons); i++)
			if (!strcmp(t->block_reason, block_reasons[i]))
				b->by_reason[i]++;
	}
	return 0;
}

static int
count_item(const struct merge_item *m, void *arg)
{
	(void)m;
	(*(int *)arg)++;
	return 0;
}

/*
 * The workers on record, with how long ago each was heard of and how
 * far its host's clock is from the database's (baton's own times follow
 * the database, so a skew is reported, not a failure; beyond this it is
 * pointed out, since the host's logs and its other programs are off).
 */
#define CLOCK_SKEW_WARN_MS 5000
struct workers_seen {
	int64_t now;
	int alive, silent;
};

static int
look_at_worker(const struct worker_rec *w, void *arg)
{
	struct workers_seen *ws = arg;
	char age[32];

	time_fmt_age(ws->now - w->heartbeat_at, age, sizeof(age));
	cli_printf("  %-12s %s on %s, heard of %s ago%s, clock skew %+.1f s%s\n",
		   "", w->id, w->host, age, w->task_id ? ", on a task" : "",
		   (double)w->skew_ms / 1000,
		   w->skew_ms > CLOCK_SKEW_WARN_MS ||
				   w->skew_ms < -CLOCK_SKEW_WARN_MS ?
			   " (its leases follow the database's clock)" :
			   "");
	return 0;
}

/* The store itself: which, where, its schema, who works on it. */
static void
check_store(struct store *s, const char *spec)
{
	struct workers_seen seen = { .now = time_now_ms() };
	struct err e = ERR_INIT;
	char *label = cli_store_label(spec);
	int v = store_schema_version(s, &e);

	cli_printf("  %-12s ok      %s (%s), schema version %d\n", "store",
		   label, store_backend(s), v);
	cli_printf("  %-12s %+.1f s (this host's clock minus the store's)\n",
		   "clock skew", (double)-time_offset_ms() / 1000);
	cli_printf("  %-12s\n", "workers");
	if (store_worker_list(s, look_at_worker, &seen, &e))
		cli_printf("  %-12s FAILING %s\n", "", e.msg);
	if (store_watch_fd(s, &e) < 0)
		cli_printf(
		    "  %-12s -       %s: workers wake on their own timers\n",
		    "wake-ups", e.msg);
	free(label);
}

/* Prints the backlog and what `baton serve` would start. */
static void
check_queue(struct cli *c)
{
	struct buf counts = BUF_INIT;
	struct backlog b = { .now = time_now_ms(), .held = STRVEC_INIT };
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char *spec = cli_store_spec(c);
	const struct config_runtime *rt = &c->cfg.runtime;
	int pending = 0, failed = 0, starts, held_back;
	size_t i;

	cli_printf("\nqueue\n");
	if (!fs_is_dir(c->ws.dir) || store_open(spec, &s, &e)) {
		cli_printf("  %-12s -       %s\n", "store",
			   e.msg[0] ? e.msg : "no .baton/ yet: baton init");
		free(spec);
		return;
	}
	b.store = s;
	check_store(s, spec);
	if (cli_task_counts(s, &counts, &e) ||
	    store_task_list(s, NULL, look_at_task, &b, &e)) {
		cli_printf("  %-12s FAILING %s\n", "store", e.msg);
		goto out;
	}
	cli_printf("  %-12s %s\n", "tasks", counts.ptr);
	for (i = 0; i < ARRAY_SIZE(block_reasons); i++)
		if (b.by_reason[i])
			cli_printf("  %-12s blocked(%s) %d\n", "",
				   block_reasons[i], b.by_reason[i]);
	starts = starts_at_once(&b, rt->workers, &held_back);
	cli_printf("  %-12s %d ready now: serve (%d worker%s) starts %d at "
		   "once",
		   "backlog", b.ready, rt->workers, rt->workers == 1 ? "" : "s",
		   starts);
	if (held_back)
		cli_printf(" (%d wait%s for an overlapping area)", held_back,
			   held_back == 1 ? "s" : "");
	cli_printf("; %d wait for dependencies, %d cool down\n",
		   b.waiting_deps, b.cooling);
	if (b.stale)
		cli_printf("  %-12s %d running task%s lost %s worker: serve "
			   "requeues %s and resumes the run%s\n",
			   "recovery", b.stale, b.stale == 1 ? "" : "s",
			   b.stale == 1 ? "its" : "their",
			   b.stale == 1 ? "it" : "them",
			   b.stale == 1 ? "" : "s");
	cli_printf("  %-12s %s%s\n", "judge", rt->judge ? "on" : "off",
		   rt->judge && !config_provider_for(&c->cfg, "judge") ?
		       " (FAILING: no provider plays judge or default)" :
		       "");
	store_merge_list(s, MERGE_PENDING, count_item, &pending, &e);
	store_merge_list(s, MERGE_FAILED, count_item, &failed, &e);
	cli_printf("  %-12s %d pending, %d failed; %s\n", "merge queue",
		   pending, failed,
		   rt->auto_merge ? "serve lands them" :
				    "land them with: baton merge --queue");
out:
	backlog_release(&b);
	buf_release(&counts);
	store_close(s);
	free(spec);
}

/*
 * The forge (docs/forge.md): configured, its token variable set, and
 * openTiger's start-up rules: the issue backlog (asked of GitHub) and
 * the judge backlog, and whether a launch would skip the planner.
 * Returns the problems found (0 or 1).
 */
static int
check_forge(struct cli *c)
{
	const struct config_forge *f = &c->cfg.forge;
	struct forge_startup st;
	struct err e = ERR_INIT;
	struct store *s = NULL;
	char *spec = NULL;
	int bad = 0;

	cli_printf("\nforge\n");
	if (forge_check(&c->cfg, &e)) {
		cli_printf("  %-12s FAILING %s\n", f->repo ? f->repo : "forge",
			   e.msg);
		return 1;
	}
	cli_printf("  %-12s ok      %s at %s, token in %s; intake %s\n",
		   "github", f->repo, f->api_url ? f->api_url : "?",
		   f->token_env,
		   f->intake_label ? f->intake_label : "off (no intake.label)");
	spec = cli_store_spec(c);
	if (!fs_is_dir(c->ws.dir) || store_open(spec, &s, &e)) {
		free(spec);
		return 0; /* the queue section said why */
	}
	if (forge_startup(&c->cfg, s, &c->ws, &st, &e)) {
		cli_printf("  %-12s FAILING %s\n", "backlog", e.msg);
		bad = 1;
	}
	if (st.issue_backlog)
		cli_printf("  %-12s Issue backlog detected (%d)\n", "",
			   st.issue_backlog);
	if (st.judge_backlog)
		cli_printf("  %-12s Judge backlog detected (%d)\n", "",
			   st.judge_backlog);
	if (st.skip_planner)
		cli_printf("  %-12s Planner is skipped for this launch\n", "");
	else if (!bad)
		cli_printf("  %-12s no issue or judge backlog: the planner may "
			   "start from a requirement\n",
			   "");
	store_close(s);
	free(spec);
	return bad;
}

int
cli_host_snapshot(struct cli *c, json_t **out, int *made, struct err *e)
{
	struct host_probe hp = { 0 };
	char *cache = xasprintf("%s/host.json", c->ws.dir);
	int rc;

	hp.cache = cache;
	hp.repo = c->ws.repo;
	hp.providers = c->cfg.providers;
	hp.nr_providers = c->cfg.nr_providers;
	hp.ttl_seconds = c->cfg.host_ttl_seconds;
	hp.now_ms = time_now_ms();
	rc = host_snapshot(&hp, out, made, e);
	free(cache);
	return rc;
}

/*
 * The host snapshot the agents are shown (agent/host.h): reused while
 * fresh, else made now. Returns the problems found (0 or 1).
 */
static int
check_host(struct cli *c)
{
	struct buf text = BUF_INIT;
	struct err e = ERR_INIT;
	json_t *snap = NULL;
	const char *p, *nl;
	int made = 0;

	cli_printf("\nhost (the snapshot agents see: .baton/host.json)\n");
	if (!fs_is_dir(c->ws.dir)) {
		cli_printf("  %-12s -       no .baton/ yet: baton init\n",
			   "snapshot");
		return 0;
	}
	if (cli_host_snapshot(c, &snap, &made, &e)) {
		cli_printf("  %-12s FAILING %s\n", "snapshot", e.msg);
		return 1;
	}
	cli_printf("  %-12s %s (execution.host_ttl_seconds: %d)\n", "snapshot",
		   made ? "made now" : "reused", c->cfg.host_ttl_seconds);
	host_snapshot_text(snap, &text);
	for (p = text.ptr; *p; p = nl + 1) {
		nl = strchrnul(p, '\n');
		cli_printf("  %.*s\n", (int)(nl - p), p);
		if (!*nl)
			break;
	}
	json_decref(snap);
	buf_release(&text);
	return 0;
}

static int
doctor_exec(struct cli *c, int argc, char **argv)
{
	int quick = 0, n, installed = 0, bad = 0, have_cfg = 0;
	const char *store = NULL;
	struct cli_opt opts[] = { { "--quick", &quick, NULL },
				  { "--store=", NULL, &store } };
	struct err e = ERR_INIT;
	char what[256];
	char *git;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 0)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_doctor);
	if (store)
		setenv("BATON_STORE", store, 1); /* as the config's store */

	cli_printf("tools\n");
	git = agent_which("git");
	if (git && program_version(git, what, sizeof(what)) == 0) {
		cli_printf("  %-12s ok      %s\n", "git", what);
	} else {
		cli_printf("  %-12s FAILING not found: apt-get install git\n",
			   "git");
		bad++;
	}
	free(git);
	if (workspace_open(NULL, &c->ws, &e) == 0) {
		if (cli_load_config(c, &e) == 0)
			have_cfg = 1;
		else
			cli_printf("  %-12s FAILING %s\n", "config", e.msg);
		bad += !have_cfg;
	} else {
		cli_printf("  %-12s -       not in a git repository: only the "
			   "CLIs are checked\n",
			   "repository");
	}
	bad += check_sandbox(have_cfg ? c->cfg.sandbox : NULL);
	check_clis(&installed);
	if (have_cfg)
		bad += check_providers(&c->cfg, c->ws.repo, quick);
	if (have_cfg)
		bad += check_host(c);
	if (have_cfg)
		check_queue(c);
	if (have_cfg && c->cfg.forge.type)
		bad += check_forge(c);
	if (!installed && (!have_cfg || !c->cfg.nr_providers)) {
		cli_printf(
		    "\nno agent CLI is installed: install one (for example "
		    "npm install -g @anthropic-ai/claude-code), or "
		    "configure an openai or anthropic provider for "
		    "baton's own agent\n");
		return EXIT_FAIL;
	}
	if (bad) {
		cli_printf("\n%d problem%s found\n", bad, bad == 1 ? "" : "s");
		return EXIT_FAIL;
	}
	cli_printf("\nall good\n");
	return EXIT_OK;
}

const struct cmd cmd_doctor = {
	.name = "doctor",
	.usage = "doctor [--quick] [--store SPEC]",
	.summary = "find the agent CLIs, check each configured provider "
		   "answers, say what is missing",
	.needs = 0,
	.exec = doctor_exec,
};
