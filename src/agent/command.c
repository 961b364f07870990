/*
 * The `command` provider: runs any program as an agent. Its argv comes
 * from config (providers.NAME.command); the prompt arrives on stdin and in
 * the file named by BATON_PROMPT_FILE; it works in the worktree and
 * writes its artifacts into BATON_OUT_DIR (BATON_ARTIFACT names the one
 * a stage wants), from where baton takes them into the run folder; its
 * stdout is its final text.
 */
#include "util/compat.h"

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "core/config.h"
#include "util/limits.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"

static int
command_run(const struct agent_request *req, struct agent_result *r,
	    struct err *e)
{
	const struct config_provider *p = req->provider;
	struct spawn_opts o = SPAWN_OPTS_INIT;
	struct spawn_result res = SPAWN_RESULT_INIT;
	struct sandbox sb = SANDBOX_INIT;
	char *path = agent_which(p->command.v[0]);
	int rc;

	if (!path) {
		r->outcome = AGENT_EXIT;
		r->status = 127;
		r->failure = AGENT_FAIL_MISSING;
		buf_addf(&r->message, "'%s' is not an executable program "
				      "(not found, or not on PATH)",
			 p->command.v[0]);
		return 0;
	}
	/* a program under $HOME stays readable in the sandbox */
	sandbox_copy(&sb, req->sandbox);
	sandbox_program(&sb, path);
	free(path);
	sandbox_wrap(&sb, &p->command, &o.argv);
	sandbox_release(&sb);
	strvec_pushv(&o.env, p->env.v);
	if (req->env)
		strvec_pushv(&o.env, req->env->v);
	o.cwd = req->cwd;
	o.in = req->prompt;
	o.in_len = strlen(req->prompt);
	o.out_path = req->out_path;
	o.err_path = req->err_path;
	o.tail_max = BUF_MAX_AGENT_TAIL;
	o.timeout_ms = p->timeout_seconds * 1000;
	o.wake_fd = req->wake_fd;
	o.tick_ms = req->tick_ms;
	o.on_event = req->on_event;
	o.arg = req->arg;
	rc = spawn_run(&o, &res, e);
	if (!res.signal && !res.timed_out && !res.stopped)
		res.signal = sandbox_signal(req->sandbox, res.status);
	r->status = res.status;
	r->signal = res.signal;
	r->out_bytes = res.out_bytes;
	r->duration_ms = res.duration_ms;
	if (res.stopped)
		r->outcome = AGENT_STOPPED;
	else if (res.timed_out)
		r->outcome = AGENT_TIMEOUT;
	else if (res.signal)
		r->outcome = AGENT_CRASHED;
	else
		r->outcome = res.status ? AGENT_EXIT : AGENT_OK;
	buf_release(&r->text);
	buf_release(&r->err_tail);
	r->text = res.out;
	r->err_tail = res.err;
	res.out = (struct buf)BUF_INIT;
	res.err = (struct buf)BUF_INIT;
	spawn_result_release(&res);
	spawn_opts_release(&o);
	/* before classify reads them: a NUL must not hide what follows */
	buf_escape_nul(&r->text);
	buf_escape_nul(&r->err_tail);
	if (rc == 0)
		agent_classify(r);
	return rc;
}

const struct agent_adapter agent_command_adapter = {
	.info = {
		.type = "command",
		.program = NULL,
		.install_hint = "set providers.NAME.command to the program "
				"and its arguments",
		.auth_hint = NULL,
		.is_cli = 1,
	},
	.run = command_run,
};
