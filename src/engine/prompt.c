/*
 * Building an agent's prompt: the stage's template (.baton/prompts/ or
 * the built-in, rendered by core/prompt.c) with the run's variables and
 * the context its agent reads, most important first within a fixed
 * budget: guidance from people, what failed on the last try, the host
 * the agent runs on, what the call or the kind chose, the diff for a
 * kind that judges the change.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/host.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "core/plugin.h"
#include "core/prompt.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/redact.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/*
 * The host snapshot baton serve (or doctor) cached, as text, into out;
 * nothing when there is none. Only read here: making one runs programs.
 */
static void
host_context(const struct drive *d, struct buf *out)
{
	char *cache = xasprintf("%s/host.json", d->en->ws->dir);
	json_t *snap = host_snapshot_cached(cache);

	if (snap)
		host_snapshot_text(snap, out);
	json_decref(snap);
	free(cache);
}

/*
 * The context a stage's agent reads, most important first, within the
 * fixed budget: guidance from people, then what failed on the stage's
 * last try (the failure delta), then the host it runs on, then what its
 * call or its kind chose (what to fix, the plan, the design), then the
 * diff for a kind that judges the change.
 */
static void
build_context(struct drive *d, const struct stage *s, const char *steers,
	      struct buf *ctx)
{
	const struct stage_ops *ops = stage_ops_for(d->p, s);
	size_t budget = BUF_MAX_PROMPT_CONTEXT;
	struct buf diff = BUF_INIT, host = BUF_INIT;

	prompt_section(ctx, "Guidance from the people running this task",
		       steers, &budget);
	prompt_section(ctx, "What failed before", d->fail_delta, &budget);
	engine__memory_context(d, ctx, &budget);
	host_context(d, &host);
	prompt_section(ctx, "The host you run on (baton's snapshot)", host.ptr,
		       &budget);
	buf_release(&host);
	if (d->call && d->call->context && *d->call->context) {
		size_t len = strlen(d->call->context);

		buf_adds(ctx, d->call->context);
		budget -= len < budget ? len : budget;
	} else if (!d->call && ops->context) {
		ops->context(d, s, ctx, &budget);
	}
	if (kind_is(s->kind, KF_SHOWS_DIFF) && d->r.worktree &&
	    d->r.base_commit &&
	    worktree_diff(d->en->ws, d->r.worktree, d->r.base_commit, 0, &diff,
			  NULL) == 0)
		prompt_section(ctx, "The change (git diff against the base)",
			       diff.len ? diff.ptr : "(no changes)", &budget);
	buf_release(&diff);
}

/* The stage's template (its prompt: key, else its kind's name):
 * .baton/prompts/<name>.md, else the pipeline's plugin's, else the
 * built-in. */
static char *
load_template(const struct drive *d, const struct stage *s)
{
	const char *kind = d->call && d->call->template ?
				   d->call->template :
			   s->prompt ? s->prompt :
				   stage_kind_name(s->kind);
	char *tmpl = plugin_template(d->en->ws->dir, d->p, kind);

	if (!tmpl)
		BUG("no built-in prompt for kind '%s'", kind);
	return tmpl;
}

void
engine__render_prompt(struct drive *d, const struct stage *s,
		      const char *steers, const char *retry,
		      const char *out_dir, struct buf *out)
{
	struct buf ctx = BUF_INIT, retry_text = BUF_INIT;
	char *tmpl = load_template(d, s);
	struct prompt_var vars[] = {
		{ "task", d->r.task },
		{ "run_id", d->r.id },
		{ "stage", s->name },
		{ "run_dir", d->run_dir },
		{ "out_dir", out_dir },
		{ "worktree", engine__work_dir(d) },
		{ "artifact", d->call ? d->call->artifact :
					kind_info(s->kind)->artifact[0] },
		{ "context", NULL },
		{ "retry", NULL },
	};

	build_context(d, s, steers, &ctx);
	if (retry)
		buf_addf(&retry_text,
			 "\n## Your previous answer was not accepted\n\n%s\n\n"
			 "Fix this and answer again.\n",
			 retry);
	vars[7].value = ctx.ptr;
	vars[8].value = retry_text.ptr;
	prompt_render(tmpl, vars, ARRAY_SIZE(vars), out);
	free(tmpl);
	buf_release(&ctx);
	buf_release(&retry_text);
}
