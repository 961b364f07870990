/*
 * Fuzzes what baton reads from an agent CLI after it exits: its whole
 * stdout, parsed as each type's stream (claude-code, codex, gemini, qwen,
 * opencode, aider), then classified as agent.c does, plus the reset-time
 * reader on the same bytes. The input's first byte picks the type.
 */
#include "util/compat.h"

#include "agent/agent.h"
#include "fuzz.h"
#include "util/xalloc.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const types[] = {
		"claude-code", "codex", "gemini", "qwen", "opencode", "aider",
	};
	struct agent_result r = AGENT_RESULT_INIT;
	const char *type;
	char *text;

	if (!size)
		return 0;
	type = types[data[0] % ARRAY_SIZE(types)];
	text = xmalloc(size);
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	r.outcome = data[0] & 0x80 ? AGENT_EXIT : AGENT_OK;
	r.status = r.outcome == AGENT_EXIT;
	agent_parse_stream(type, text, size - 1, &r);
	agent_classify(&r);
	if (r.failure > AGENT_FAIL_LIMIT)
		BUG("failure class %d", (int)r.failure);
	agent_parse_reset(text, 1700000000000LL);
	agent_result_release(&r);
	free(text);
	return 0;
}
