/*
 * The provider registry: maps a provider's type to its adapter.
 */
#include "util/compat.h"

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "core/config.h"
#include "util/err.h"

static const struct agent_adapter *const adapters[] = {
	&agent_command_adapter,
};

static const struct agent_adapter *
find(const char *type)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(adapters); i++)
		if (!strcmp(adapters[i]->type, type))
			return adapters[i];
	return NULL;
}

int
agent_type_known(const char *type)
{
	return find(type) != NULL;
}

int
agent_run(const struct agent_request *req, struct agent_result *r,
	  struct err *e)
{
	const struct agent_adapter *a = find(req->provider->type);

	if (!a)
		return err_set(e, BATON_EINVAL,
			       "provider '%s': unknown type '%s'",
			       req->provider->name, req->provider->type);
	return a->run(req, r, e);
}

void
agent_result_release(struct agent_result *r)
{
	buf_release(&r->text);
	buf_release(&r->err_tail);
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
