/*
 * `baton tui --url URL --token-file FILE`: the terminal UI's model read
 * from a remote `baton serve` over its API (docs/api.md) instead of a
 * local store, and the keys' requests sent to it. Live updates come from
 * serve's SSE stream (GET /api/v1/events), followed by a thread that
 * makes a descriptor readable on every message, so the TUI's loop sleeps
 * on it as it sleeps on a local store's watch descriptor.
 */
#ifndef BATON_TUI_REMOTE_H
#define BATON_TUI_REMOTE_H

struct err;
struct tui_model;
struct tui_remote;

/*
 * Connects to url (e.g. "http://127.0.0.1:8080") with the bearer token
 * and checks that the token is taken (GET /api/v1/runs). NULL with e set
 * when libcurl cannot be loaded, serve cannot be reached, or the token
 * is refused ("URL refused the token (401): ..."). Free with
 * tui_remote_free.
 */
struct tui_remote *tui_remote_open(const char *url, const char *token,
				   struct err *e);
void tui_remote_free(struct tui_remote *r);

/*
 * Starts following the stream; returns the descriptor that becomes
 * readable when serve says something changed (drain it with
 * tui_remote_drain), or -1 with e set.
 */
int tui_remote_watch(struct tui_remote *r, struct err *e);
void tui_remote_drain(struct tui_remote *r);

/* tui_load_board and tui_load_detail, over the API (no agent output). */
int tui_remote_load_board(struct tui_remote *r, struct tui_model *m,
			  struct err *e);
int tui_remote_load_detail(struct tui_remote *r, struct tui_model *m,
			   const char *run_id, struct err *e);

/*
 * A key's request: verb "approve", "reject" or "request-changes" (POST
 * /api/v1/approvals/RUN with text as the guidance, or none), or
 * "pause", "resume", "abort", "steer" (POST /api/v1/runs/RUN/VERB, steer
 * with text). 0 with *status_out (the run's status after it, or "",
 * caller frees), or a negative error with serve's message in e.
 */
int tui_remote_act(struct tui_remote *r, const char *verb, const char *run,
		   const char *text, char **status_out, struct err *e);

/*
 * Any request of the API (`baton chat` over a remote serve): method,
 * path ("/api/v1/..."), body (JSON text, or NULL). 0 with *out the
 * answer (a jansson json_t * the caller decrefs; NULL when not JSON;
 * out NULL: the answer is dropped), or
 * a negative error with serve's message in e.
 */
int tui_remote_call(struct tui_remote *r, const char *method,
		    const char *path, const char *body, void **out,
		    struct err *e);

/*
 * Reads the SSE answer of GET path until serve ends it, with no time
 * bound (a planner may take minutes), calling fn(arg, event, data) for
 * each event as it arrives. 0, or an error with why in e.
 */
typedef void tui_remote_event_fn(void *arg, const char *event,
				 const char *data);
int tui_remote_follow(struct tui_remote *r, const char *path,
		      tui_remote_event_fn *fn, void *arg, struct err *e);

#endif
