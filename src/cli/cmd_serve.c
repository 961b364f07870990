/*
 * baton serve: drains the task queue with N worker processes, sweeps for
 * dead workers and expired leases, judges finished runs, and (with
 * runtime.auto_merge) lands approved branches; beside them, the HTTP
 * server (API, live stream, dashboard) in a process of its own. Ctrl-C
 * drains; a second Ctrl-C stops the workers, leaving their runs to
 * resume next time.
 *
 * baton worker: the same supervisor and workers on a worker host of a
 * PostgreSQL store, without the HTTP server, the judge and the lander:
 * it takes tasks, runs them in its own clone and pushes their branches
 * to repo.url, and one serve elsewhere judges and lands them.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "forge/forge.h"
#include "sched/sched.h"
#include "server/server.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"
#include "util/term.h"

#define DEFAULT_LISTEN "127.0.0.1:7070"

struct http {
	struct server_opts o;
	int started;
};

/* The companion's start: forks the HTTP process, says where it is. */
static int
start_http(void *arg, pid_t *pid, struct err *e)
{
	struct http *h = arg;
	char url[320];
	int rc = server_spawn(&h->o, pid, url, sizeof(url), e);

	if (rc)
		return rc;
	if (!h->started)
		term_printf(stderr,
			    "serve: dashboard at %s (token in %s/token)\n", url,
			    ".baton");
	h->started = 1;
	return 0;
}

/* The forge companion's start: forks "baton forge" (forge sync rounds). */
static int
start_forge(void *arg, pid_t *pid, struct err *e)
{
	struct http *h = arg;

	return forge_spawn(&h->o, pid, e);
}

/*
 * openTiger's start-up rules: with a forge that imports issues, the
 * issue backlog and the judge backlog come before any planning.
 */
static void
startup_rules(struct cli *c)
{
	struct forge_startup st;
	struct err e = ERR_INIT;

	if (forge_startup(&c->cfg, c->store, &c->ws, &st, &e))
		term_printf(stderr, "serve: forge: cannot count the issue "
			    "backlog: %s\n", e.msg);
	if (st.issue_backlog)
		term_printf(stderr, "serve: Issue backlog detected (%d)\n",
			    st.issue_backlog);
	if (st.judge_backlog)
		term_printf(stderr, "serve: Judge backlog detected (%d)\n",
			    st.judge_backlog);
	if (st.skip_planner)
		term_printf(stderr,
			    "serve: Planner is skipped for this launch\n");
}

/* The notifier companion's start: forks the webhook process. */
static int
start_notify(void *arg, pid_t *pid, struct err *e)
{
	struct http *h = arg;

	return notify_spawn(&h->o, pid, e);
}

static int
loopback(const char *listen)
{
	return !strncmp(listen, "127.", 4) || !strncmp(listen, "localhost:", 10) ||
	       !strncmp(listen, "[::1]:", 6);
}

/*
 * The host snapshot agents are shown (agent/host.h), made at start
 * unless a fresh one is cached. Not fatal: the prompts go without.
 */
static void
host_snapshot_note(struct cli *c)
{
	struct err e = ERR_INIT;
	json_t *snap = NULL;
	int made = 0;

	if (cli_host_snapshot(c, &snap, &made, &e)) {
		term_printf(stderr, "serve: no host snapshot: %s\n", e.msg);
		return;
	}
	term_printf(stderr, "serve: host snapshot %s (made at %s)\n",
		    made ? "made" : "reused",
		    json_string_value(json_object_get(snap, "made_at")) ?
			    json_string_value(json_object_get(snap, "made_at")) :
			    "?");
	json_decref(snap);
}

static void
print_counts(struct cli *c)
{
	struct buf line = BUF_INIT;
	struct err e = ERR_INIT;

	if (!cli_task_counts(c->store, &line, &e))
		term_printf(stderr, "serve: tasks %s\n", line.ptr);
	buf_release(&line);
}

/* serve and worker: their flags, then the supervisor until it ends. */
static int
supervise(struct cli *c, int argc, char **argv, const struct cmd *cmd)
{
	int host = cmd == &cmd_worker;
	const char *workers = NULL, *listen = NULL;
	int idle = 0, n, rc = EXIT_FAIL;
	struct cli_opt opts[] = {
		{ "--workers=", NULL, &workers },
		{ "--exit-when-idle", &idle, NULL },
		{ "--listen=", NULL, &listen },
	};
	struct http http = { { &c->ws, &c->cfg, c->store_spec, NULL, NULL,
			       NULL, NULL },
			     0 };
	char *tls_cert = NULL, *tls_key = NULL;
	struct serve_companion companion = { "HTTP server", start_http,
					     &http };
	struct serve_companion notifier = { "webhook notifier", start_notify,
					    &http };
	struct serve_companion forge = { "forge sync", start_forge, &http };
	char *token = NULL;
	struct sched_ctx x = { .store = c->store, .ws = &c->ws,
			       .cfg = &c->cfg, .holder = cmd->name,
			       .store_spec = c->store_spec, .tasks_only = host };
	struct serve_opts o = { .workers = c->cfg.runtime.workers,
				.store = c->store_spec };
	struct err e = ERR_INIT;
	char *end = NULL, *label;

	/* a worker host has no HTTP server: --listen (last) is not its */
	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts) - host);
	if (n != 0)
		return n < 0 ? EXIT_USAGE : cli_usage(cmd);
	if (workers) {
		long w = strtol(workers, &end, 10);

		if (!*workers || *end || w < 1 || w > 256) {
			cli_error("--workers wants a number from 1 to 256, "
				  "not '%s'",
				  workers);
			return EXIT_USAGE;
		}
		o.workers = (int)w;
	}
	o.exit_when_idle = idle;
	if (host)
		listen = "off";
	if (host && !c->cfg.repo_url)
		term_printf(
		    stderr,
		    "worker: repo.url is not set: branches stay in this "
		    "clone, where a serve on another machine cannot land "
		    "them\n");
	if (listen && !config_listen_ok(listen)) {
		cli_error("--listen: %s, not '%s'", CONFIG_LISTEN_FORM, listen);
		return EXIT_USAGE;
	}
	if (!listen)
		listen = c->cfg.server.listen ? c->cfg.server.listen :
						DEFAULT_LISTEN;
	if (strcmp(listen, "off")) {
		if (server_token(&c->ws, &token, &e)) {
			cli_error("%s", e.msg);
			return EXIT_FAIL;
		}
		http.o.listen = listen;
		http.o.token = token;
		if (c->cfg.server.tls_cert &&
		    server_tls_load(&c->ws, &c->cfg, &tls_cert, &tls_key,
				    &e)) {
			cli_error("%s", e.msg);
			goto out;
		}
		http.o.tls_cert = tls_cert;
		http.o.tls_key = tls_key;
		if (!loopback(listen) && !tls_cert && !c->cfg.server.insecure) {
			cli_error("serve: %s is reachable beyond this machine, "
				  "and without TLS its tokens would cross the "
				  "network in the clear: set server.tls "
				  "{cert, key} (or server.insecure: true to "
				  "allow it; docs/security.md)",
				  listen);
			goto out;
		}
		o.companions[o.nr_companions++] = &companion;
		if (!loopback(listen))
			term_printf(
			    stderr,
			    "serve: listening on %s, beyond this machine%s: "
			    "whoever reaches it with a token can drive "
			    "baton as that token's role\n",
			    listen, tls_cert ? " (TLS)" : ", WITHOUT TLS");
	}
	/* webhooks do not wait for HTTP: --listen off sends them too; a
	 * worker host leaves them to the serve that judges and lands */
	if (!host && c->cfg.nr_webhooks) {
		o.companions[o.nr_companions++] = &notifier;
		fprintf(stderr, "serve: webhooks to %zu URL%s (notify.webhooks)\n",
			c->cfg.nr_webhooks, c->cfg.nr_webhooks == 1 ? "" : "s");
	}
	/* the forge's rounds: on the serve that judges and lands, not on a
	 * worker host */
	if (!host && c->cfg.forge.type) {
		if (forge_check(&c->cfg, &e)) {
			cli_error("%s", e.msg);
			goto out;
		}
		o.companions[o.nr_companions++] = &forge;
		if (c->cfg.forge.poll_seconds > 0)
			term_printf(stderr, "serve: forge %s, a sync round "
				    "every %ds (forge.poll_seconds)\n",
				    c->cfg.forge.repo ? c->cfg.forge.repo : "?",
				    c->cfg.forge.poll_seconds);
		else
			term_printf(stderr, "serve: forge %s, a sync round "
				    "at start and on each webhook\n",
				    c->cfg.forge.repo ? c->cfg.forge.repo : "?");
		startup_rules(c);
		forge_hold_token(&c->cfg);
	}
	workspace_detect_identity(&c->ws);
	host_snapshot_note(c);
	label = cli_store_label(c->store_spec);
	if (host)
		term_printf(stderr,
			    "worker: %d worker%s on %s (%s)%s; tasks only\n",
			    o.workers, o.workers == 1 ? "" : "s", label,
			    store_backend(c->store),
			    idle ? ", exiting when idle" : "; Ctrl-C drains");
	else
		term_printf(
		    stderr,
		    "serve: %d worker%s on %s (%s)%s; judge %s, merge %s\n",
		    o.workers, o.workers == 1 ? "" : "s", label,
		    store_backend(c->store),
		    idle ? ", exiting when idle" : "; Ctrl-C drains",
		    c->cfg.runtime.judge ? "on" : "off",
		    c->cfg.runtime.auto_merge ?
			"automatic" :
			"by hand (baton merge --queue)");
	free(label);
	if (sched_serve(&x, &o, &e)) {
		cli_error("%s", e.msg);
		goto out;
	}
	print_counts(c);
	rc = EXIT_OK;
out:
	free(token);
	free(tls_cert);
	free(tls_key);
	return rc;
}

static int
serve_exec(struct cli *c, int argc, char **argv)
{
	return supervise(c, argc, argv, &cmd_serve);
}

static int
worker_exec(struct cli *c, int argc, char **argv)
{
	return supervise(c, argc, argv, &cmd_worker);
}

const struct cmd cmd_serve = {
	.name = "serve",
	.usage = "serve [--store SPEC] [--workers N] [--listen HOST:PORT|off] "
		 "[--exit-when-idle]",
	.summary = "drain the task queue with parallel workers",
	.needs = CLI_NEEDS_STORE,
	.exec = serve_exec,
};

const struct cmd cmd_worker = {
	.name = "worker",
	.usage = "worker [--store SPEC] [--workers N] [--exit-when-idle]",
	.summary = "take tasks from a shared store on a worker host",
	.needs = CLI_NEEDS_STORE,
	.exec = worker_exec,
};
