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
	const char *token;	/* the repository's own token (the admin "owner") */
	/* PEM text of server.tls (server_tls_load); NULL: plain HTTP */
	const char *tls_cert, *tls_key;
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
 * Reads cfg's server.tls certificate and key (a relative path from the
 * repository's top) into *cert_pem and *key_pem (the caller frees
 * them), after checking they are PEM and belong together; warns on
 * stderr when the key is readable by every user. Errors name the file.
 */
int server_tls_load(const struct workspace *ws, const struct config *cfg,
		    char **cert_pem, char **key_pem, struct err *e);

/*
 * Roles of the API's users (docs/security.md, "Users and roles"), in
 * order: each can do what the ones before it can. A route says which it
 * needs (server_int.h, struct route): public routes prove their
 * requests themselves (a signed webhook or link), viewers read,
 * operators decide and steer, admins configure. ROLE_UNSET is a route
 * that forgot to say: it needs admin.
 */
enum api_role {
	ROLE_UNSET = 0,
	ROLE_PUBLIC,
	ROLE_VIEWER,
	ROLE_OPERATOR,
	ROLE_ADMIN,
};

/* The name the repository's own token (.baton/token) acts under. */
#define API_OWNER "owner"

const char *api_role_name(enum api_role r);
/* viewer, operator or admin as its role; -1 for any other word. */
int api_role_parse(const char *word);
/* Whether name may name a token (1-64 of [A-Za-z0-9._-], not "owner"). */
int api_token_name_check(const char *name, struct err *e);
/* A new secret (64 hex digits) and its SHA-256 (64 hex digits). */
int api_token_new(char secret[65], char sha[65], struct err *e);
/* The SHA-256 of secret as 64 hex digits. */
int api_token_sha(const char *secret, char sha[65], struct err *e);

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
