/*
 * Context overflow (seed 003's error table): each provider's "context
 * window exceeded" error is the class context (agent/classify.c), others
 * are not; and prompt_compact (core/prompt.h) cuts the largest sections
 * first, keeps the instructions before them, and says what it cut.
 */
#include "util/compat.h"

#include "agent/agent.h"
#include "core/prompt.h"
#include "test.h"
#include "util/buf.h"

/* The class of a call that exited with message msg. */
static enum agent_failure
class_of(const char *msg, int http_status)
{
	struct agent_result r = AGENT_RESULT_INIT;
	enum agent_failure f;

	r.outcome = AGENT_EXIT;
	r.status = 1;
	r.http_status = http_status;
	buf_adds(&r.message, msg);
	agent_classify(&r);
	f = r.failure;
	agent_result_release(&r);
	return f;
}

TEST(compact_each_providers_context_error)
{
	/* OpenAI (code and message), Anthropic, Gemini, Codex, vLLM */
	ASSERT_EQ(class_of("HTTP 400: This model's maximum context length is "
			   "8192 tokens. However, your messages resulted in "
			   "9000 tokens.",
			   400),
		  AGENT_FAIL_CONTEXT);
	ASSERT_EQ(
	    class_of("{\"error\": {\"code\": \"context_length_exceeded\"}}",
		     400),
	    AGENT_FAIL_CONTEXT);
	ASSERT_EQ(class_of("API Error: 400 {\"type\":\"error\",\"error\":"
			   "{\"type\":\"invalid_request_error\",\"message\":"
			   "\"prompt is too long: 210000 tokens > 200000 "
			   "maximum\"}}",
			   0),
		  AGENT_FAIL_CONTEXT);
	ASSERT_EQ(class_of("[API Error: The input token count (1200000) "
			   "exceeds the maximum number of tokens allowed "
			   "(1048576).]",
			   0),
		  AGENT_FAIL_CONTEXT);
	ASSERT_EQ(class_of("stream error: model_context_window_exceeded", 0),
		  AGENT_FAIL_CONTEXT);
	ASSERT_EQ(class_of("Context length exceeded: 40000 > 32768", 400),
		  AGENT_FAIL_CONTEXT);
	/* a 429 that talks about tokens is still a quota; a bare 400 a crash */
	ASSERT_EQ(
	    class_of("HTTP 429: Rate limit reached for tokens per min", 429),
	    AGENT_FAIL_QUOTA);
	ASSERT_EQ(class_of("HTTP 400: invalid_request_error: messages: "
			   "field required",
			   400),
		  AGENT_FAIL_CRASH);
	ASSERT_STREQ(agent_failure_name(AGENT_FAIL_CONTEXT), "context");
}

TEST(compact_cuts_the_largest_section_first)
{
	struct buf in = BUF_INIT, out = BUF_INIT;
	size_t i, cut;

	buf_adds(&in, "You are the planner.\nTask: x\n\n## Small\n\nkept\n\n");
	buf_adds(&in, "## Big\n\n");
	for (i = 0; i < 1000; i++)
		buf_addf(&in, "big line %04zu\n", i);
	buf_adds(&in, "\n## Medium\n\n");
	for (i = 0; i < 100; i++)
		buf_addf(&in, "medium %03zu\n", i);
	buf_adds(&in, "\n## What to leave\n\nthe plan\n");
	cut = prompt_compact(in.ptr, in.len / 2, &out);
	ASSERT(cut > 0);
	ASSERT(out.len <= in.len / 2 + 200);
	ASSERT_CONTAINS(out.ptr, "You are the planner.\nTask: x\n\n## Small");
	ASSERT_CONTAINS(out.ptr, "\n## What to leave\n\nthe plan\n");
	ASSERT_CONTAINS(out.ptr, "big line 0000");
	ASSERT(!strstr(out.ptr, "big line 0999"));
	ASSERT_CONTAINS(out.ptr, "cut to fit the model's context window");
	/* the medium section (1.1 KB) was not the largest: whole */
	ASSERT_CONTAINS(out.ptr, "medium 099");
	buf_release(&out);

	/* what fits is left alone */
	cut = prompt_compact(in.ptr, in.len, &out);
	ASSERT_EQ(cut, 0);
	ASSERT_STREQ(out.ptr, in.ptr);
	buf_release(&out);
	buf_release(&in);
}

TEST(compact_keeps_instructions_and_small_sections)
{
	struct buf in = BUF_INIT, out = BUF_INIT;
	size_t i;

	/* instructions alone: nothing can be cut */
	for (i = 0; i < 500; i++)
		buf_addf(&in, "instruction %03zu\n", i);
	ASSERT_EQ(prompt_compact(in.ptr, 100, &out), 0);
	ASSERT_STREQ(out.ptr, in.ptr);
	buf_release(&out);
	/* a section is never cut below PROMPT_KEEP_MIN */
	buf_adds(&in, "## Ctx\n\n");
	for (i = 0; i < 500; i++)
		buf_addf(&in, "context %03zu\n", i);
	prompt_compact(in.ptr, 10, &out);
	ASSERT_CONTAINS(out.ptr, "instruction 499\n## Ctx\n");
	ASSERT(out.len >= strlen("## Ctx\n") + PROMPT_KEEP_MIN);
	ASSERT(!strstr(out.ptr, "context 499"));
	/* a "## " inside a line is not a section */
	buf_release(&out);
	buf_reset(&in);
	buf_adds(&in, "intro ## not a section\n");
	ASSERT_EQ(prompt_compact(in.ptr, 5, &out), 0);
	buf_release(&out);
	buf_release(&in);
}
