/*
 * Shared between agent.c and the adapters: the table entry type.
 */
#ifndef BATON_AGENT_AGENT_INT_H
#define BATON_AGENT_AGENT_INT_H

struct agent_request;
struct agent_result;
struct err;

struct agent_adapter {
	const char *type;
	int (*run)(const struct agent_request *req, struct agent_result *r,
		   struct err *e);
};

extern const struct agent_adapter agent_command_adapter;

#endif
