/*
 * Shared between agent.c and the adapters: the table entry type and the
 * adapters themselves.
 */
#ifndef BATON_AGENT_AGENT_INT_H
#define BATON_AGENT_AGENT_INT_H

#include <stddef.h>

#include "agent/agent.h"

struct buf;
struct config_provider;

struct agent_adapter {
	struct agent_info info;
	int (*run)(const struct agent_request *req, struct agent_result *r,
		   struct err *e);
	/* Reads a CLI's whole stdout stream into r; NULL for the others. */
	void (*parse)(const char *out, size_t len, struct agent_result *r);
};

/*
 * Cost from providers.NAME.pricing when the agent reported none (or 0
 * for tokens it did use). Every adapter calls it before classifying.
 */
void agent__price(const struct config_provider *p, struct agent_result *r);

extern const struct agent_adapter agent_command_adapter;
extern const struct agent_adapter agent_claude_adapter;	  /* cli.c */
extern const struct agent_adapter agent_codex_adapter;	  /* cli.c */
extern const struct agent_adapter agent_gemini_adapter;	  /* cli.c */
extern const struct agent_adapter agent_qwen_adapter;	  /* cli.c */
extern const struct agent_adapter agent_opencode_adapter; /* cli.c */
extern const struct agent_adapter agent_aider_adapter;	  /* cli.c */
extern const struct agent_adapter agent_copilot_adapter;  /* cli.c */
extern const struct agent_adapter agent_pi_adapter;	  /* cli.c */
extern const struct agent_adapter agent_kilo_adapter;	  /* cli.c */
extern const struct agent_adapter agent_cline_adapter;	  /* cli.c */
extern const struct agent_adapter agent_continue_adapter; /* cli.c */
extern const struct agent_adapter agent_amp_adapter;	  /* cli.c */
extern const struct agent_adapter agent_auggie_adapter;	  /* cli.c */
extern const struct agent_adapter agent_crush_adapter;	  /* cli.c */
extern const struct agent_adapter agent_openai_adapter;	  /* http.c */
extern const struct agent_adapter agent_anthropic_adapter; /* http.c */
extern const struct agent_adapter agent_acp_adapter;	   /* acp.c */

/*
 * An ACP transcript read for display (agent_watch, type acp): each
 * session/update line as readable text (the agent's message, "[tool]
 * TITLE: status" per tool call, "[plan]" with its entries, "[thought]"),
 * each request the agent made ("[read] PATH", "[write] PATH", "[run]
 * COMMAND", "[ask] TITLE"), errors, and baton's own lines (refusals, the
 * cancel) as they are. Same contract as cli__view_* (cli_int.h).
 */
struct acp_view;
struct acp_view *acp__view_new(void);
size_t acp__view_feed(struct acp_view *v, const char *p, size_t len,
		      struct buf *out);
size_t acp__view_finish(struct acp_view *v, struct buf *out);
void acp__view_free(struct acp_view *v);

#endif
