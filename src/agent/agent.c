/*
 * The provider registry: maps a provider's type to its adapter, and the
 * parts every adapter shares.
 */
#include "util/compat.h"

#include <ctype.h>
#include <jansson.h>

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "core/config.h"
#include "util/err.h"

static const struct agent_adapter *const adapters[] = {
	&agent_claude_adapter,	 &agent_codex_adapter,
	&agent_gemini_adapter,	 &agent_qwen_adapter,
	&agent_opencode_adapter, &agent_aider_adapter,
	&agent_copilot_adapter,	 &agent_pi_adapter,
	&agent_kilo_adapter,	 &agent_cline_adapter,
	&agent_continue_adapter, &agent_amp_adapter,
	&agent_auggie_adapter,	 &agent_crush_adapter,
	&agent_openai_adapter,	 &agent_anthropic_adapter,
	&agent_command_adapter,	 &agent_acp_adapter,
};

static const struct agent_info *infos[ARRAY_SIZE(adapters)];

static const struct agent_adapter *
find(const char *type)
{
	size_t i;

	for (i = 0; type && i < ARRAY_SIZE(adapters); i++)
		if (!strcmp(adapters[i]->info.type, type))
			return adapters[i];
	return NULL;
}

int
agent_type_known(const char *type)
{
	return find(type) != NULL;
}

const struct agent_info *
agent_info(const char *type)
{
	const struct agent_adapter *a = find(type);

	return a ? &a->info : NULL;
}

const struct agent_info *const *
agent_infos(size_t *n)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(adapters); i++)
		infos[i] = &adapters[i]->info;
	*n = ARRAY_SIZE(adapters);
	return infos;
}

int
agent_run(const struct agent_request *req, struct agent_result *r,
	  struct err *e)
{
	const struct agent_adapter *a = find(req->provider->type);
	int rc;

	if (!a)
		return err_set(e, BATON_EINVAL,
			       "provider '%s': unknown type '%s'",
			       req->provider->name, req->provider->type);
	rc = a->run(req, r, e);
	/* every reader of these takes them as C strings */
	buf_escape_nul(&r->text);
	buf_escape_nul(&r->message);
	buf_escape_nul(&r->err_tail);
	return rc;
}

void
agent_parse_stream(const char *type, const char *out, size_t len,
		   struct agent_result *r)
{
	const struct agent_adapter *a = find(type);

	if (a && a->parse)
		a->parse(out, len, r);
}

/* Cost from providers.NAME.pricing when the agent reported none (or 0). */
void
agent__price(const struct config_provider *p, struct agent_result *r)
{
	if (p->price_in <= 0 && p->price_out <= 0)
		return;
	if (r->cost_known &&
	    (r->cost_usd > 0 || r->tokens_in + r->tokens_out == 0))
		return;
	r->cost_usd = ((double)r->tokens_in * p->price_in +
		       (double)r->tokens_out * p->price_out) /
		      1e6;
	r->cost_known = 1;
}

void
agent_result_release(struct agent_result *r)
{
	buf_release(&r->text);
	buf_release(&r->message);
	buf_release(&r->err_tail);
	json_decref(r->refused);
	r->refused = NULL;
}

const char *
agent_outcome_name(enum agent_outcome o)
{
	static const char *const names[] = {
		[AGENT_OK] = "ok",	       [AGENT_EXIT] = "exit",
		[AGENT_CRASHED] = "crashed",   [AGENT_TIMEOUT] = "timeout",
		[AGENT_STOPPED] = "stopped",
	};

	return names[o];
}

const char *
agent_failure_name(enum agent_failure f)
{
	static const char *const names[] = {
		[AGENT_FAIL_NONE] = "none",
		[AGENT_FAIL_QUOTA] = "quota",
		[AGENT_FAIL_UNAVAILABLE] = "unavailable",
		[AGENT_FAIL_AUTH] = "auth",
		[AGENT_FAIL_MISSING] = "missing",
		[AGENT_FAIL_TIMEOUT] = "timeout",
		[AGENT_FAIL_CRASH] = "crash",
		[AGENT_FAIL_BAD_OUTPUT] = "bad_output",
		[AGENT_FAIL_LIMIT] = "limit",
		[AGENT_FAIL_CONTEXT] = "context",
	};

	return names[f];
}

int
agent_session_id_ok(const char *id)
{
	size_t i;

	if (!id || !isalnum((unsigned char)id[0]))
		return 0;
	for (i = 0; id[i]; i++) {
		unsigned char c = (unsigned char)id[i];

		if (i >= AGENT_SESSION_MAX ||
		    !(c < 0x80 && (isalnum(c) || strchr("._:-", c))))
			return 0;
	}
	return 1;
}
