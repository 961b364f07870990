/*
 * The validation runner: the project's own checks (validate.commands), run
 * in the run's worktree one after another, each with its own timeout. The
 * result goes to validation.json for people and for the fixer's prompt.
 * Commands are shell strings the user wrote, so they run under sh -c.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <jansson.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/pathglob.h"
#include "util/strvec.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* Writes a header line before each command's output in the log. */
static void
log_header(const char *log_path, const char *cmd)
{
	int fd = fs_open_nofollow(log_path, O_WRONLY | O_CREAT | O_APPEND,
				  0644, NULL);
	struct buf line = BUF_INIT;

	if (fd < 0)
		return;
	buf_addf(&line, "\n$ %s\n", cmd);
	/* The log is best effort; validation.json is the record. */
	fs_write_all(fd, line.ptr, line.len);
	close(fd);
	buf_release(&line);
}

/*
 * Command i's when_changed globs, or NULL when it always runs. *matched
 * gets the first changed path a glob matches (NULL: none does).
 */
static const struct strvec *
condition(const struct validate_when *w, size_t i, const char **matched)
{
	const struct strvec *g;
	size_t p, k;

	*matched = NULL;
	if (!w || i >= w->nr || !w->globs[i].nr)
		return NULL;
	g = &w->globs[i];
	for (p = 0; w->changed && p < w->changed->nr; p++)
		for (k = 0; k < g->nr; k++)
			if (pathglob_match(g->v[k], w->changed->v[p])) {
				*matched = w->changed->v[p];
				return g;
			}
	return g;
}

static json_t *
json_globs(const struct strvec *g)
{
	json_t *a = json_array();
	size_t k;

	for (k = 0; k < g->nr; k++)
		json_array_append_new(a, json_lossy_str(g->v[k]));
	return a;
}

int
validate_run(const char *worktree, const struct strvec *commands,
	     int timeout_s, const char *json_path, const char *log_path,
	     const struct workspace_hooks *hooks,
	     const struct validate_when *when, struct validate_result *r,
	     struct err *e)
{
	int skipped = 0;

	json_t *doc = json_object(), *list = json_array();
	struct strvec sh = STRVEC_INIT;
	char *text = NULL;
	size_t i;
	int rc = 0;

	buf_init(&r->summary, BUF_MAX_PROMPT_CONTEXT);
	r->passed = 1;
	r->stopped = 0;
	for (i = 0; i < commands->nr && !r->stopped; i++) {
		struct spawn_opts o = SPAWN_OPTS_INIT;
		struct spawn_result res = SPAWN_RESULT_INIT;
		const char *cmd = commands->v[i], *matched;
		const struct strvec *globs = condition(when, i, &matched);
		json_t *item;
		int ok;

		if (globs && !matched) {
			size_t nc = when->changed ? when->changed->nr : 0;

			skipped++;
			json_array_append_new(
				list,
				json_pack("{s:o, s:b, s:o, s:o}", "command",
					  json_lossy_str(cmd), "skipped", 1,
					  "when_changed", json_globs(globs),
					  "reason",
					  json_str_take(xasprintf(
						  "none of the %zu path%s "
						  "changed since %.12s "
						  "matches when_changed",
						  nc, nc == 1 ? "" : "s",
						  when->since ? when->since :
								"the fork "
								"point"))));
			continue;
		}
		strvec_clear(&sh);
		strvec_pushl(&sh, "sh", "-c", cmd, NULL);
		sandbox_wrap(hooks ? hooks->sandbox : NULL, &sh, &o.argv);
		o.cwd = worktree;
		o.merge_err = 1;
		o.out_path = log_path;
		o.tail_max = BUF_MAX_VALIDATE_TAIL;
		o.timeout_ms = timeout_s * 1000;
		if (hooks) {
			o.wake_fd = hooks->wake_fd;
			o.tick_ms = hooks->tick_ms;
			o.on_event = hooks->on_event;
			o.arg = hooks->arg;
		}
		if (log_path)
			log_header(log_path, cmd);
		rc = spawn_run(&o, &res, e);
		spawn_opts_release(&o);
		if (rc < 0) {
			spawn_result_release(&res);
			goto out;
		}
		ok = res.status == 0 && !res.timed_out && !res.stopped;
		r->stopped = res.stopped;
		item = json_pack("{s:o, s:i, s:I, s:b, s:o}", "command",
				 json_lossy_str(cmd), "exit_code", res.status,
				 "duration_ms", (json_int_t)res.duration_ms,
				 "timed_out", res.timed_out, "output_tail",
				 json_lossy(res.out.ptr, res.out.len));
		if (globs) {
			json_object_set_new(item, "when_changed",
					    json_globs(globs));
			json_object_set_new(item, "matched",
					    json_lossy_str(matched));
		}
		json_array_append_new(list, item);
		if (!ok) {
			r->passed = 0;
			buf_addf(&r->summary, "$ %s\n", cmd);
			if (res.timed_out)
				buf_addf(&r->summary,
					 "(timed out after %d s)\n", timeout_s);
			else
				buf_addf(&r->summary, "(exit code %d)\n",
					 res.status);
			buf_addf(&r->summary, "%s\n", res.out.ptr);
		}
		spawn_result_release(&res);
	}
	json_object_set_new(doc, "passed", json_boolean(r->passed));
	json_object_set_new(doc, "skipped", json_integer(skipped));
	json_object_set_new(doc, "commands", list);
	list = NULL;
	text = json_dumps(doc, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	rc = fs_write_atomic(json_path, text, strlen(text), e);
out:
	strvec_clear(&sh);
	free(text);
	json_decref(list);
	json_decref(doc);
	return rc;
}

void
validate_result_release(struct validate_result *r)
{
	buf_release(&r->summary);
}
