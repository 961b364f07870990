/*
 * mcpcheck: what baton mcp takes from a client: tool arguments against
 * an inputSchema, run references, text free of control characters.
 */
#include "util/compat.h"

#include <jansson.h>

#include "core/mcpcheck.h"
#include "test.h"
#include "util/buf.h"

static const char *const schema_text =
	"{\"type\": \"object\", \"properties\": {"
	"\"title\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 8},"
	"\"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 5},"
	"\"on\": {\"type\": \"boolean\"},"
	"\"mode\": {\"type\": \"string\", \"enum\": [\"a\", \"b\"]},"
	"\"list\": {\"type\": \"array\", \"maxItems\": 2, \"items\": "
	"{\"type\": \"string\"}}},"
	"\"required\": [\"title\"], \"additionalProperties\": false}";

/* 0 when args (JSON text) fits; else -1 with the message in msg. */
static int
check(const char *args, struct buf *msg)
{
	json_t *schema = json_loads(schema_text, 0, NULL);
	json_t *v = json_loads(args, JSON_DECODE_ANY, NULL);
	int rc;

	ASSERT(schema && v);
	buf_reset(msg);
	rc = mcp_schema_check(v, schema, "arguments", msg);
	json_decref(v);
	json_decref(schema);
	return rc;
}

TEST(mcp_schema_takes_what_fits)
{
	struct buf msg = BUF_INIT;

	ASSERT_EQ(check("{\"title\": \"x\"}", &msg), 0);
	ASSERT_EQ(check("{\"title\": \"12345678\", \"n\": 5, \"on\": false, "
			"\"mode\": \"b\", \"list\": [\"p\", \"q\"]}",
			&msg),
		  0);
	ASSERT_EQ(check("{\"title\": \"x\", \"list\": []}", &msg), 0);
	ASSERT_EQ(msg.len, 0);
	buf_release(&msg);
}

TEST(mcp_schema_names_what_does_not_fit)
{
	static const struct {
		const char *args, *says;
	} bad[] = {
		{ "[]", "arguments must be an object, not a list" },
		{ "\"t\"", "arguments must be an object, not a string" },
		{ "{}", "arguments needs \"title\"" },
		{ "{\"title\": 1}", "\"title\" must be a string, not a number" },
		{ "{\"title\": \"\"}", "\"title\" must not be empty" },
		{ "{\"title\": \"123456789\"}",
		  "\"title\" is longer than 8 bytes" },
		{ "{\"title\": \"x\", \"z\": 1}", "arguments has no argument \"z\"" },
		{ "{\"title\": \"x\", \"n\": 0}", "\"n\" must be from 1 to 5" },
		{ "{\"title\": \"x\", \"n\": 6}", "\"n\" must be from 1 to 5" },
		{ "{\"title\": \"x\", \"n\": 1.5}",
		  "\"n\" must be an integer, not a number" },
		{ "{\"title\": \"x\", \"n\": \"1\"}",
		  "\"n\" must be an integer, not a string" },
		{ "{\"title\": \"x\", \"on\": 1}", "\"on\" must be a boolean" },
		{ "{\"title\": \"x\", \"mode\": \"c\"}",
		  "\"mode\": 'c' is not one of a, b" },
		{ "{\"title\": \"x\", \"list\": \"p\"}",
		  "\"list\" must be an array" },
		{ "{\"title\": \"x\", \"list\": [\"p\", 2]}",
		  "\"list\" must be a string, not a number" },
		{ "{\"title\": \"x\", \"list\": [\"p\", \"q\", \"r\"]}",
		  "\"list\" has more than 2 items" },
	};
	struct buf msg = BUF_INIT;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		ASSERT_EQ(check(bad[i].args, &msg), -1);
		if (!strstr(msg.ptr, bad[i].says)) {
			fprintf(stderr, "%s: '%s' does not say '%s'\n",
				bad[i].args, msg.ptr, bad[i].says);
			ASSERT(0);
		}
	}
	buf_release(&msg);
}

TEST(mcp_refs_are_ids_not_paths)
{
	static const char *const good[] = { "r1", "7", "t12",
					    "r3-add-csv-export",
					    "r3_a.b-c" };
	static const char *const bad[] = {
		"",	     "../../etc", "r1/../x", "/etc/passwd", ".baton",
		"..",	     "-r1",	  "a b",     "r1\n",	    "r1;rm",
		"r1%2f..",   "\x1b[2J",	  "r\xc3\xa9" /* é */,
	};
	char longest[MCP_REF_MAX + 2];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(good); i++)
		ASSERT_EQ(mcp_ref_ok(good[i]), 1);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		ASSERT_EQ(mcp_ref_ok(bad[i]), 0);
	memset(longest, 'r', sizeof(longest));
	longest[MCP_REF_MAX] = '\0';
	ASSERT_EQ(mcp_ref_ok(longest), 1);
	longest[MCP_REF_MAX] = 'r';
	longest[MCP_REF_MAX + 1] = '\0';
	ASSERT_EQ(mcp_ref_ok(longest), 0);
}

TEST(mcp_text_takes_tabs_and_newlines_only)
{
	ASSERT_EQ(mcp_control_at("plain text\n\twith a tab"), -1);
	ASSERT_EQ(mcp_control_at("caf\xc3\xa9 \xe2\x80\x94 utf-8"), -1);
	ASSERT_EQ(mcp_control_at(""), -1);
	ASSERT_EQ(mcp_control_at("a\x1b[2J"), 1);
	ASSERT_EQ(mcp_control_at("ab\r"), 2);
	ASSERT_EQ(mcp_control_at("\x07"), 0);
	ASSERT_EQ(mcp_control_at("del\x7f"), 3);
	ASSERT_EQ(mcp_control_at("x\x01y\x1b"), 1);
}
