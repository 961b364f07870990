/*
 * Shared between cli.c, classify.c and their unit tests: the parts of the
 * CLI runner that can be exercised without starting a process.
 */
#ifndef BATON_AGENT_CLI_INT_H
#define BATON_AGENT_CLI_INT_H

#include <stddef.h>

struct agent_request;
struct buf;
struct err;
struct strvec;

/*
 * Builds what cli.c runs for req (whose provider has a CLI type): argv
 * starts with program (the resolved path of the provider's command or of
 * the type's default program), then the rest of providers.NAME.command,
 * the type's headless flags, the model, providers.NAME.args and last the
 * prompt; env gets the "K=V" entries to add to the inherited environment
 * (the type's fixed ones, base_url, key and retry settings, the private
 * home, then providers.NAME.env and req->env, later entries winning).
 * When the provider is isolated and req->home is set, creates the home
 * (0700) and writes the CLI's config files in it (0600).
 *
 * Returns 0, or a negative code with e filled: an unknown or non-CLI type
 * (BATON_EINVAL), or the home could not be written (-errno). argv and env
 * are appended to and always belong to the caller.
 */
int cli__build(const struct agent_request *req, const char *program,
	       struct strvec *argv, struct strvec *env, struct err *e);

/*
 * The first HTTP status (400-599) an error text names: "API Error: 500",
 * "unexpected status 401", "status: 429", "\"code\":401", "HTTP 503".
 * 0 when none.
 */
int agent__status_in_text(const char *text);

/*
 * A JSON stream read for display (agent_watch): the type's own line
 * parser, with each line's readable account appended to out: the
 * assistant's text, "[tool] NAME: what" per tool call, "[edit] ...",
 * "[error] ..." and "[retry] ..." lines.
 *
 * cli__view_new returns NULL when type has no JSON stream (aider, the
 * command and HTTP types, an unknown type); free it with cli__view_free.
 * cli__view_feed reads len more bytes of the stream: complete lines are
 * parsed, a partial last line waits for the next feed (a line longer than
 * CLI_LINE_MAX is dropped). cli__view_finish parses what waits as the
 * stream's last line and ends the text with a newline. Both return the
 * number of bytes appended to out; a capped out keeps what fits.
 */
struct cli_view;
struct cli_view *cli__view_new(const char *type);
size_t cli__view_feed(struct cli_view *v, const char *p, size_t len,
		      struct buf *out);
size_t cli__view_finish(struct cli_view *v, struct buf *out);
void cli__view_free(struct cli_view *v);
/* The session id the stream has named so far, or "" (borrowed). */
const char *cli__view_session(const struct cli_view *v);

#endif
