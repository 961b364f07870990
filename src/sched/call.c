/*
 * One call of a role's provider outside any run: the planner turning a
 * requirement into tasks, the judge reviewing a finished run. It is a
 * stage call without the stage (engine/call.c, engine__call): the same
 * prompt file, the same private home for a CLI, the same sandbox and the
 * same redaction, but no run to record it in and no contract to check;
 * the caller reads the answer and decides.
 *
 *   c->dir/<name>.prompt.md     the prompt (also BATON_PROMPT_FILE)
 *   c->dir/<name>.stdout        the raw stream (or the HTTP transcript)
 *   c->dir/<name>.stderr
 *   c->dir/<name>.http/         baton's own agent: each request, response
 *   c->dir/agents/<provider>/   a CLI's private home
 *   c->out_dir                  what the agent leaves (BATON_OUT_DIR)
 *
 * In the sandbox the agent reads its working directory; it writes it
 * only when it is a run's worktree, never the repository itself (a
 * planner works there), and never .baton/.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "agent/agent.h"
#include "core/config.h"
#include "sched/sched.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/redact.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/xalloc.h"

/*
 * The self-pipe of a foreground call: SIGINT, SIGTERM and SIGHUP write
 * to it, and spawn stops the agent's group when it becomes readable.
 */
static int stop_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_signal;

static void
on_stop_signal(int sig)
{
	int saved = errno;
	char c = 's';

	got_signal = sig;
	if (stop_pipe[1] >= 0 && write(stop_pipe[1], &c, 1) < 0)
		c = 0; /* full pipe: a wake-up is pending anyway */
	errno = saved;
}

/*
 * The agent runs in a session of its own, so a Ctrl-C meant for baton
 * never reaches it: were baton to die of it, the agent would go on alone
 * (and a planner would still write into the repository). So each of
 * SIGINT, SIGTERM and SIGHUP still at its default, as in a foreground
 * command, is caught for the call's duration and stops the agent; a
 * signal someone handles or ignores (serve, a background job) is left
 * alone. Returns the fd to wake on, or -1 when none was caught; *caught
 * says which were.
 */
static int
catch_signals(struct sigaction old[3], int *caught)
{
	static const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;
	int i;

	*caught = 0;
	if (stop_pipe[0] < 0 && pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	got_signal = 0;
	for (i = 0; i < 3; i++) {
		sigaction(sigs[i], NULL, &old[i]);
		if (old[i].sa_handler != SIG_DFL)
			continue;
		sigaction(sigs[i], &sa, NULL);
		*caught |= 1 << i;
	}
	return *caught ? stop_pipe[0] : -1;
}

static void
restore_signals(const struct sigaction old[3], int caught)
{
	static const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
	int i;

	for (i = 0; i < 3; i++)
		if (caught & (1 << i))
			sigaction(sigs[i], &old[i], NULL);
}

/*
 * spawn's callback: the agent started (tell the caller, who may record
 * its group), or a signal arrived (stop the agent).
 */
static int
watch_call(void *arg, enum spawn_event ev, pid_t pid)
{
	const struct role_call *c = arg;

	if (ev == SPAWN_EV_STARTED && c->on_started && pid > 0)
		c->on_started(c->arg, (int64_t)pid);
	return ev == SPAWN_EV_WAKE && got_signal;
}

/* What the agent of a role call finds in its environment. */
static void
call_env(const struct role_call *c, const char *pfile, struct strvec *env)
{
	strvec_pushf(env, "BATON_ROLE=%s", c->role);
	strvec_pushf(env, "BATON_PROMPT_FILE=%s", pfile);
	strvec_pushf(env, "BATON_WORKTREE=%s", c->cwd);
	strvec_pushf(env, "BATON_CALL_DIR=%s", c->dir);
	if (c->out_dir)
		strvec_pushf(env, "BATON_OUT_DIR=%s", c->out_dir);
}

/*
 * execution.sandbox for a role call: the user's home and the repository
 * hidden; the repository read-only again, without .baton/, when the
 * agent works in it (a planner); a run's worktree and its git admin
 * folder read-write; the output folder and the agent's home read-write.
 */
static void
call_sandbox(const struct config *cfg, const struct role_call *c,
	     const char *home, struct sandbox *sb)
{
	char *baton = NULL;

	sandbox_init(sb, sandbox_mode(cfg->sandbox, NULL), 0);
	sandbox_hide_user(sb, c->repo);
	if (c->repo)
		baton = xasprintf("%s/.baton", c->repo);
	if (c->repo && !strcmp(c->cwd, c->repo)) {
		sandbox_ro(sb, c->repo);
		sandbox_hide(sb, baton);
	} else {
		sandbox_git(sb, c->common, c->gitdir);
		sandbox_rw(sb, c->cwd);
	}
	sandbox_rw(sb, c->out_dir);
	sandbox_rw(sb, home);
	free(baton);
}

/* Keeps the environment's secrets out of everything the call left. */
static void
redact_call(const struct agent_info *info, const char *ofile,
	    const char *efile, const char *home, struct agent_result *out)
{
	redact_file(ofile, NULL);
	redact_file(efile, NULL);
	if (info && !info->is_cli)
		redact_dir(home, NULL);
	redact_buf(&out->text);
	redact_buf(&out->message);
	redact_buf(&out->err_tail);
}

int
sched_call_role(const struct config *cfg, const struct role_call *c,
		struct agent_result *out, struct err *e)
{
	const struct config_provider *prov =
		config_provider_for(cfg, c->role);
	const struct agent_info *info;
	struct agent_request req = { 0 };
	struct strvec env = STRVEC_INIT;
	struct sigaction old[3];
	struct sandbox sb = SANDBOX_INIT;
	char *pfile = NULL, *ofile = NULL, *efile = NULL, *home = NULL;
	int rc, caught;

	*out = (struct agent_result)AGENT_RESULT_INIT;
	if (!prov)
		return err_set(e, BATON_EINVAL,
			       "no provider plays the %s role: set roles.%s "
			       "or roles.default",
			       c->role, c->role);
	info = agent_info(prov->type);
	rc = fs_mkdir_p(c->dir, 0755, e);
	if (rc)
		goto out;
	pfile = xasprintf("%s/%s.prompt.md", c->dir, c->name);
	ofile = xasprintf("%s/%s.stdout", c->dir, c->name);
	efile = xasprintf("%s/%s.stderr", c->dir, c->name);
	home = info && info->is_cli ?
		       xasprintf("%s/agents/%s", c->dir, prov->name) :
		       xasprintf("%s/%s.http", c->dir, c->name);
	rc = fs_write_atomic(pfile, c->prompt, strlen(c->prompt), e);
	if (!rc && info && info->is_cli)
		rc = fs_mkdir_p(home, 0700, e);
	if (!rc && c->out_dir) {
		fs_remove_tree(c->out_dir, NULL);
		rc = fs_mkdir_p(c->out_dir, 0755, e);
	}
	if (rc)
		goto out;
	/* Output files are appended to: a name used again starts afresh. */
	fs_unlink(ofile, NULL);
	fs_unlink(efile, NULL);
	call_env(c, pfile, &env);
	call_sandbox(cfg, c, info && info->is_cli ? home : NULL, &sb);
	req.provider = prov;
	req.cwd = c->cwd;
	req.prompt = c->prompt;
	req.prompt_file = pfile;
	req.env = &env;
	req.out_path = ofile;
	req.err_path = efile;
	req.home = home;
	req.sandbox = &sb;
	req.on_event = watch_call;
	req.arg = (void *)c;
	req.wake_fd = catch_signals(old, &caught);
	rc = agent_run(&req, out, e);
	/* a no-op unless this process adopted orphans (spawn.h) */
	spawn_kill_orphans();
	restore_signals(old, caught);
	if (!rc)
		redact_call(info, ofile, efile, home, out);
out:
	sandbox_release(&sb);
	strvec_clear(&env);
	free(pfile);
	free(ofile);
	free(efile);
	free(home);
	return rc;
}
