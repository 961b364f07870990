/*
 * The HTTP front door of `baton serve` (DESIGN.md section 7): REST under
 * /api/v1, the live event stream (SSE at /api/v1/events, WebSocket at
 * /api/v1/ws), Prometheus /metrics and the dashboard at /; and the
 * webhooks, in a process of their own.
 *
 * It runs in a process of its own, started by the serve supervisor
 * before any thread exists (the supervisor forks workers; a process with
 * threads must not). Inside it, libmicrohttpd's event-loop threads each
 * keep a store connection of their own, and one hub thread follows the
 * store's event log and hands every new event to the live streams and
 * the webhooks (http.c, stream.c).
 *
 *   serve supervisor ─┬─ http process: event loops ── store (read, requests)
 *                     │                hub thread ── store_watch: new events
 *                     ├─ notify process (with notify.webhooks; with or
 *                     │   without HTTP): hub thread ── pokes ── notify
 *                     │   thread ── webhooks
 *                     └─ workers ...
 */
#ifndef BATON_SERVER_SERVER_H
#define BATON_SERVER_SERVER_H

#include <sys/types.h>

struct config;
struct err;
struct workspace;

struct server_opts {
	const struct workspace *ws; /* borrowed; all of these outlive the server */
	const struct config *cfg;
	const char *store_spec;
	const char *listen;	/* "HOST:PORT"; port 0: any free port */
	const char *token;	/* the bearer token every request must carry */
};

/*
 * Forks the HTTP process, which binds opts->listen and starts serving.
 * Returns once it listens (*pid set, the address it took in url, such as
 * "http://127.0.0.1:7070/") or failed to (the reason in e: the port is
 * taken, the address is bad). The process ends on SIGTERM or when its
 * parent dies; its address is in .baton/http.url while it lives.
 */
int server_spawn(const struct server_opts *o, pid_t *pid, char *url,
		 size_t url_len, struct err *e);

/*
 * Forks the webhook notifier (docs/api.md, "Webhooks"): a process that
 * follows the event log and POSTs to the URLs of opts->cfg's
 * notify.webhooks (opts->listen and opts->token are not used). serve
 * starts it whether or not HTTP listens. Returns once it runs (*pid set)
 * or with the reason in e; the config must have webhooks. It ends on
 * SIGTERM or when its parent dies.
 */
int notify_spawn(const struct server_opts *o, pid_t *pid, struct err *e);

/*
 * Forks the forge companion "baton forge" (docs/forge.md, "Sync and
 * serve"): a process that runs forge_sync at once, then every
 * forge.poll_seconds and whenever forge_wake is called; a round's error
 * is logged and never ends it. Returns once it runs (*pid set) or with
 * the reason in e (the forge is not configured, its token variable is
 * not set). opts->listen and opts->token are not used. It ends on
 * SIGTERM or when its parent dies.
 */
int forge_spawn(const struct server_opts *o, pid_t *pid, struct err *e);

/*
 * Takes the forge's token out of this process's environment, so that no
 * worker (and no agent) serve starts inherits it, and keeps it for the
 * forge companion, which alone puts it back, in its own process. Call
 * once serve has done what needs the token itself, before its workers.
 */
void forge_hold_token(const struct config *cfg);

/*
 * The bearer token of the repository: .baton/token, created (32 random
 * bytes as hex, mode 0600, O_EXCL) when missing; by baton init and by
 * serve. A symbolic link in its place (or as .baton) is refused with
 * -ELOOP, never followed. Caller frees *out.
 */
int server_token(const struct workspace *ws, char **out, struct err *e);

/*
 * The key that signs answer links (docs/api.md, "Answer links"):
 * .baton/answer.key, made and read as server_token makes and reads the
 * token. It stays in .baton/, which the sandbox hides from the agent;
 * the notifier signs links with it and the HTTP process checks them.
 */
int server_answer_key(const struct workspace *ws, char **out, struct err *e);

#endif
