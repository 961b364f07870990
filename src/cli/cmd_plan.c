/*
 * baton plan: turns a requirement into a graph of tasks and queues them.
 *
 *   requirement ──▶ planner role (in the repository root; it only reads)
 *     ──▶ plan.json (or a ```json block in its answer) ──▶ plan_parse
 *     ──▶ plans table + .baton/plans/<name>-v<N>.json ──▶ the table
 *     ──▶ "Enqueue these N tasks? [y/N]" (or --yes) ──▶ plan_enqueue
 *
 * An answer that is not a usable plan is sent back once with the error,
 * as a stage's broken output is; a second one ends the command with the
 * error and nothing queued. Every call's prompt and output stays in
 * .baton/plans/calls/, the planner's answer beside them.
 */
#include "util/compat.h"

#include <ctype.h>
#include <jansson.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "core/prompt.h"
#include "sched/plan.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/redact.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

struct planning {
	struct cli *c;
	const char *source;	/* FILE as given; "-" is stdin */
	char *stem;		/* its base name without the extension */
	char *requirement;
	char *calls_dir;	/* .baton/plans/calls */
	char *stamp;		/* when this plan started, for file names */
	const struct config_provider *prov;
	FILE *talk;		/* where the table and questions go */
};

/* path relative to the repository when it lies inside; borrowed. */
static const char *
shown(const struct planning *pl, const char *path)
{
	size_t n = strlen(pl->c->ws.repo);

	if (!strncmp(path, pl->c->ws.repo, n) && path[n] == '/')
		return path + n + 1;
	return path;
}

/* The requirement: FILE, or stdin for "-"; neither empty nor too big. */
static int
read_requirement(struct planning *pl, struct err *e)
{
	const char *path = strcmp(pl->source, "-") ? pl->source : "/dev/stdin";
	const char *name = strcmp(pl->source, "-") ? pl->source : "stdin";
	struct buf text = BUF_INIT;
	struct err why = ERR_INIT;
	int rc;

	rc = fs_read(path, &text, BUF_MAX_PROMPT_CONTEXT, &why);
	if (rc == -EFBIG)
		rc = err_set(e, rc,
			     "the requirement in '%s' is larger than %d bytes: "
			     "split it, or plan its parts one by one",
			     name, BUF_MAX_PROMPT_CONTEXT);
	else if (rc)
		rc = err_set(e, rc, "cannot read the requirement from '%s': %s",
			     name, strerror(-rc));
	if (rc)
		goto out;
	buf_rtrim(&text);
	if (!text.len) {
		rc = err_set(e, BATON_EINVAL,
			     "the requirement in '%s' is empty", name);
		goto out;
	}
	pl->requirement = buf_detach(&text, NULL);
out:
	buf_release(&text);
	return rc;
}

/* "docs/req.md" -> "req"; "-" -> "stdin": names .baton/plans/ files. */
static char *
source_stem(const char *source)
{
	const char *base = strrchr(source, '/');
	const char *dot;
	struct buf b = BUF_INIT;

	if (!strcmp(source, "-"))
		return xstrdup("stdin");
	base = base ? base + 1 : source;
	dot = strrchr(base, '.');
	if (!dot || dot == base)
		dot = base + strlen(base);
	for (; base < dot; base++)
		buf_addch(&b, isalnum((unsigned char)*base) ||
					      strchr("._-", *base) ?
				      *base :
				      '-');
	if (!b.len)
		buf_adds(&b, "plan");
	return buf_detach(&b, NULL);
}

/* "20251122-013300.123": now, in UTC, for the names of call files. */
static char *
stamp_now(void)
{
	int64_t ms = time_now_ms();
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	char s[32];

	gmtime_r(&secs, &tm);
	strftime(s, sizeof(s), "%Y%m%d-%H%M%S", &tm);
	return xasprintf("%s.%03d", s, (int)(ms % 1000));
}

/* .baton/prompts/plan-tasks.md, else the built-in template. */
static char *
load_template(const struct planning *pl)
{
	char *tmpl = prompt_template(pl->c->ws.dir, "plan-tasks");

	if (!tmpl)
		BUG("no built-in prompt plan-tasks.md");
	return tmpl;
}

static void
render_prompt(const struct planning *pl, const char *retry,
	      const char *out_dir, struct buf *out)
{
	struct buf retry_text = BUF_INIT;
	char *tmpl = load_template(pl);
	char max[16];
	struct prompt_var vars[] = {
		{ "task", pl->requirement },
		{ "source", strcmp(pl->source, "-") ? pl->source : "stdin" },
		{ "worktree", pl->c->ws.repo },
		{ "out_dir", out_dir },
		{ "max_tasks", max },
		{ "retry", NULL },
	};

	snprintf(max, sizeof(max), "%d", PLAN_MAX_TASKS);
	if (retry)
		buf_addf(&retry_text,
			 "\n## Your previous answer was not accepted\n\n%s\n\n"
			 "Fix this and answer again.\n",
			 retry);
	vars[5].value = retry_text.ptr;
	prompt_render(tmpl, vars, ARRAY_SIZE(vars), out);
	free(tmpl);
	buf_release(&retry_text);
}

/*
 * plan.json in the repository root, as it was before the call. The
 * planner writes it there, but the repository is the user's: a file the
 * planner created moves to the call folder, and one the user had is put
 * back as it was.
 */
struct root_file {
	char *path;
	int existed;
	struct buf before;
};

static void
root_file_snapshot(const struct planning *pl, struct root_file *f)
{
	f->path = xasprintf("%s/plan.json", pl->c->ws.repo);
	f->before = (struct buf)BUF_INIT;
	f->existed = fs_read(f->path, &f->before, BUF_MAX_ARTIFACT, NULL) == 0;
}

/*
 * Takes what the planner left in plan.json, if it wrote it, into out
 * and returns 1; keep is where it goes. Returns 0 when it did not.
 */
static int
root_file_take(struct root_file *f, const char *keep, struct buf *out)
{
	int rc = fs_read(f->path, out, BUF_MAX_ARTIFACT, NULL);

	if (rc || (f->existed && out->len == f->before.len &&
		   !memcmp(out->ptr, f->before.ptr, out->len))) {
		buf_reset(out);
		return 0;
	}
	redact_buf(out);
	fs_write_atomic(keep, out->ptr, out->len, NULL);
	if (f->existed)
		fs_write_atomic(f->path, f->before.ptr, f->before.len, NULL);
	else
		fs_unlink(f->path, NULL);
	return 1;
}

/*
 * Takes plan.json from the call's output folder into out (and keep), if
 * the planner wrote it there: a regular file reached without a link, at
 * most BUF_MAX_ARTIFACT bytes. Returns 1 when it did.
 */
static int
out_file_take(const char *out_dir, const char *keep, struct buf *out)
{
	struct buf text;
	char *path = xasprintf("%s/plan.json", out_dir);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char chunk[8192];
	ssize_t n = 0;
	int took = 0;

	buf_init(&text, BUF_MAX_ARTIFACT);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		while ((n = read(fd, chunk, sizeof(chunk))) > 0 &&
		       buf_add(&text, chunk, (size_t)n) == 0)
			;
	else
		n = -1;
	if (fd >= 0 && n == 0) {
		buf_reset(out);
		buf_add(out, text.ptr, text.len);
		redact_buf(out);
		fs_write_atomic(keep, out->ptr, out->len, NULL);
		took = 1;
	}
	if (fd >= 0)
		close(fd);
	buf_release(&text);
	free(path);
	return took;
}

static void
root_file_release(struct root_file *f)
{
	free(f->path);
	buf_release(&f->before);
}

/* Why the planner's call failed, with the fix when baton knows it. */
static int
call_failed(const struct planning *pl, const struct agent_result *ar,
	    const char *name, struct err *e)
{
	const struct agent_info *info = agent_info(pl->prov->type);
	const char *hint = NULL;

	if (ar->outcome == AGENT_STOPPED)
		return err_set(e, BATON_EABORTED,
			       "the planner was stopped; nothing was queued");
	if (ar->failure == AGENT_FAIL_AUTH && info)
		hint = info->auth_hint;
	else if (ar->failure == AGENT_FAIL_MISSING && info)
		hint = info->install_hint;
	return err_set(e, BATON_ECHILD,
		       "the planner, provider '%s' (%s), failed (%s%s%s)%s%s; "
		       "nothing was queued; its output is in %s/%s.stdout",
		       pl->prov->name, pl->prov->type,
		       agent_failure_name(ar->failure),
		       ar->message.len ? ": " : "", ar->message.ptr,
		       hint ? ". Fix: " : "", hint ? hint : "",
		       shown(pl, pl->calls_dir), name);
}

/*
 * One call of the planner and the reading of its answer. Returns 0 with
 * *out filled; BATON_EINVAL when the answer is no usable plan (e says
 * why, *kept where the answer was kept, or NULL: worth a retry);
 * another error when the call itself failed.
 */
static int
ask_planner(struct planning *pl, int attempt, const char *retry,
	    struct plan *out, char **kept, struct err *e)
{
	struct agent_result ar = AGENT_RESULT_INIT;
	struct role_call call = { 0 };
	struct root_file root = { 0 };
	struct buf prompt = BUF_INIT, answer = BUF_INIT;
	char *name = xasprintf("%s-%s-%d", pl->stem, pl->stamp, attempt + 1);
	char *keep_json = xasprintf("%s/%s.plan.json", pl->calls_dir, name);
	char *keep_text = xasprintf("%s/%s.answer.md", pl->calls_dir, name);
	char *out_dir = xasprintf("%s/out/%s", pl->calls_dir, name);
	char *found = NULL;
	int rc, wrote;

	render_prompt(pl, retry, out_dir, &prompt);
	call.role = "planner";
	call.cwd = pl->c->ws.repo;
	call.prompt = prompt.ptr;
	call.dir = pl->calls_dir;
	call.name = name;
	call.repo = pl->c->ws.repo;
	call.common = pl->c->ws.common;
	call.out_dir = out_dir;
	root_file_snapshot(pl, &root);
	fprintf(pl->talk, "asking the planner (provider %s)...\n",
		pl->prov->name);
	fflush(pl->talk);
	rc = sched_call_role(&pl->c->cfg, &call, &ar, e);
	/* Whatever happened, plan.json leaves the repository; the one in
	 * the output folder wins (in the sandbox, the only one). */
	wrote = root_file_take(&root, keep_json, &answer);
	if (out_file_take(out_dir, keep_json, &answer))
		wrote = 1;
	if (rc)
		goto out;
	if (ar.text.len)
		fs_write_atomic(keep_text, ar.text.ptr, ar.text.len, NULL);
	if (ar.failure != AGENT_FAIL_NONE || ar.outcome == AGENT_STOPPED) {
		rc = call_failed(pl, &ar, name, e);
		goto out;
	}
	if (wrote) {
		rc = plan_parse(answer.ptr, "plan.json", out, e);
		*kept = rc ? xstrdup(keep_json) : NULL;
		goto out;
	}
	found = plan_find_json(ar.text.ptr);
	*kept = ar.text.len ? xstrdup(keep_text) : NULL;
	if (!found)
		rc = err_set(e, BATON_EINVAL,
			     "the planner wrote no plan.json and its answer "
			     "holds no JSON plan%s",
			     ar.text.len ? "" : " (it was empty)");
	else
		rc = plan_parse(found, "the plan in the planner's answer", out,
				e);
	if (!rc)
		FREE_AND_NULL(*kept);
out:
	root_file_release(&root);
	agent_result_release(&ar);
	buf_release(&prompt);
	buf_release(&answer);
	free(found);
	free(name);
	free(keep_json);
	free(keep_text);
	free(out_dir);
	return rc;
}

/*
 * The planner's plan, asking a second time, with the error, when the
 * first answer is not usable (as a stage's broken output is retried).
 */
static int
make_plan(struct planning *pl, struct plan *out, struct err *e)
{
	struct err why = ERR_INIT;
	char *kept = NULL;
	int rc;

	rc = ask_planner(pl, 0, NULL, out, &kept, &why);
	if (rc == BATON_EINVAL) {
		fprintf(pl->talk, "the plan is not usable (%s); asking again\n",
			why.msg);
		free(kept);
		kept = NULL;
		rc = ask_planner(pl, 1, why.msg, out, &kept, &why);
	}
	if (rc == BATON_EINVAL)
		err_set(e, rc,
			"the planner's answer is not a usable plan, even "
			"after one retry: %s; nothing was queued%s%s",
			why.msg, kept ? "; the answer is kept in " : "",
			kept ? shown(pl, kept) : "");
	else if (rc)
		*e = why;
	free(kept);
	return rc;
}

/*
 * Records the plan as the next version of its source and writes it to
 * .baton/plans/<stem>-v<N>.json. Fills *id, *version and *file.
 */
static int
keep_plan(struct planning *pl, const struct plan *p, int64_t *id,
	  int *version, char **file, struct err *e)
{
	struct buf json = BUF_INIT;
	char *path = NULL;
	int rc;

	plan_to_json(p, &json);
	rc = store_plan_add(pl->c->store, pl->source, json.ptr, id, version,
			    e);
	if (rc)
		goto out;
	path = xasprintf("%s/plans/%s-v%d.json", pl->c->ws.dir, pl->stem,
			 *version);
	rc = fs_write_atomic(path, json.ptr, json.len, e);
	if (!rc) {
		*file = path;
		path = NULL;
	}
out:
	free(path);
	buf_release(&json);
	return rc;
}

/* Asks on the terminal; 1 for yes. */
static int
confirm(const struct planning *pl, size_t n)
{
	char line[64];

	fprintf(pl->talk, "Enqueue these %zu task%s? [y/N] ", n,
		n == 1 ? "" : "s");
	fflush(pl->talk);
	if (!fgets(line, sizeof(line), stdin))
		return 0;
	return line[0] == 'y' || line[0] == 'Y';
}

/* plan.json plus the ids, for --json. */
static void
print_json(const struct planning *pl, const struct plan *p,
	   const int64_t *ids, int64_t id, int version, const char *file)
{
	struct buf text = BUF_INIT;
	json_t *doc, *tasks, *o, *t, *deps;
	char *s;
	size_t i, k, j;

	plan_to_json(p, &text);
	doc = json_loads(text.ptr, 0, NULL);
	tasks = json_object_get(doc, "tasks");
	for (i = 0; i < p->nr; i++) {
		t = json_array_get(tasks, i);
		o = json_pack("{s:s, s:o}", "key", p->tasks[i].key, "id",
			      ids ? json_integer(ids[i]) : json_null());
		deps = ids ? json_array() : json_null();
		for (k = 0; ids && k < p->tasks[i].depends_on.nr; k++) {
			for (j = 0; strcmp(p->tasks[j].key,
					   p->tasks[i].depends_on.v[k]);
			     j++)
				;
			json_array_append_new(deps, json_integer(ids[j]));
		}
		json_object_update(o, t);
		json_object_set_new(o, "depends_on_ids", deps);
		json_array_set_new(tasks, i, o);
	}
	o = json_pack("{s:I, s:i, s:s, s:s, s:b, s:O, s:O}", "plan_id",
		      (json_int_t)id, "version", version, "source", pl->source,
		      "file", shown(pl, file), "enqueued", ids != NULL,
		      "summary", json_object_get(doc, "summary"), "tasks",
		      tasks);
	s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	printf("%s\n", s);
	free(s);
	json_decref(o);
	json_decref(doc);
	buf_release(&text);
}

/* Everything after the options were read. */
static int
plan_run(struct planning *pl, int yes, int json)
{
	struct sched_ctx x = { .store = pl->c->store,
			       .ws = &pl->c->ws,
			       .cfg = &pl->c->cfg };
	struct plan p = PLAN_INIT;
	struct err e = ERR_INIT;
	struct buf table = BUF_INIT;
	int64_t *ids = NULL, id = 0;
	char *file = NULL;
	int version = 0, rc, code = EXIT_FAIL;

	rc = fs_mkdir_p(pl->calls_dir, 0755, &e);
	if (!rc)
		rc = make_plan(pl, &p, &e);
	if (!rc)
		rc = keep_plan(pl, &p, &id, &version, &file, &e);
	if (rc) {
		cli_error("%s", e.msg);
		code = rc == BATON_EABORTED ? EXIT_INTERRUPTED : EXIT_FAIL;
		goto out;
	}
	plan_render(&p, NULL, &table);
	fprintf(pl->talk, "plan %lld: %s, version %d, %zu task%s (%s)\n",
		(long long)id, pl->source, version, p.nr, p.nr == 1 ? "" : "s",
		shown(pl, file));
	if (p.summary)
		fprintf(pl->talk, "%s\n", p.summary);
	fprintf(pl->talk, "\n%s\n", table.ptr);
	if (!yes && !confirm(pl, p.nr)) {
		fprintf(pl->talk,
			"nothing was queued; the plan is kept in %s\n",
			shown(pl, file));
		if (json)
			print_json(pl, &p, NULL, id, version, file);
		goto out;
	}
	ids = xcalloc(p.nr, sizeof(*ids));
	rc = plan_enqueue(&x, &p, id, ids, &e);
	if (rc) {
		cli_error("%s", e.msg);
		goto out;
	}
	code = EXIT_OK;
	if (json) {
		print_json(pl, &p, ids, id, version, file);
		goto out;
	}
	buf_reset(&table);
	plan_render(&p, ids, &table);
	cli_printf("queued %zu task%s:\n\n%s", p.nr, p.nr == 1 ? "" : "s",
		   table.ptr);
out:
	plan_release(&p);
	buf_release(&table);
	free(ids);
	free(file);
	return code;
}

static int
plan_exec(struct cli *c, int argc, char **argv)
{
	struct planning pl = { .c = c };
	int yes = 0, json = 0, n, code;
	struct cli_opt opts[] = {
		{ "--yes", &yes, NULL },
		{ "-y", &yes, NULL },
		{ "--json", &json, NULL },
	};
	struct err e = ERR_INIT;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n != 1)
		return n < 0 ? EXIT_USAGE : cli_usage(&cmd_plan);
	pl.source = argv[1];
	/* Asked before the planner runs: its call costs time and money. */
	if (!yes && (!strcmp(pl.source, "-") || !isatty(STDIN_FILENO))) {
		cli_error("no terminal to confirm the plan on: pass --yes to "
			  "queue the tasks the planner proposes");
		return EXIT_USAGE;
	}
	pl.prov = config_provider_for(&c->cfg, "planner");
	if (!pl.prov) {
		cli_error("no provider plays the planner role: set "
			  "roles.planner or roles.default");
		return EXIT_FAIL;
	}
	if (read_requirement(&pl, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	pl.talk = json ? stderr : stdout;
	pl.stem = source_stem(pl.source);
	pl.stamp = stamp_now();
	pl.calls_dir = xasprintf("%s/plans/calls", c->ws.dir);
	code = plan_run(&pl, yes, json);
	free(pl.requirement);
	free(pl.stem);
	free(pl.stamp);
	free(pl.calls_dir);
	return code;
}

const struct cmd cmd_plan = {
	.name = "plan",
	.usage = "plan [--yes] [--json] [--role ROLE=PROVIDER]... FILE",
	.summary = "turn a requirement (FILE, or - for stdin) into queued "
		   "tasks, through the planner role",
	.needs = CLI_NEEDS_STORE,
	.takes_roles = 1,
	.exec = plan_exec,
};
