/*
 * Shared between cli.c, classify.c and their unit tests: the parts of the
 * CLI runner that can be exercised without starting a process.
 */
#ifndef BATON_AGENT_CLI_INT_H
#define BATON_AGENT_CLI_INT_H

struct agent_request;
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

#endif
