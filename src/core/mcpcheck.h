/*
 * What baton mcp (src/cli/cmd_mcp.c) takes from a client, checked before
 * it reaches the store or the engine: a tool's arguments against its
 * inputSchema, run references, and text for an agent or a person.
 */
#ifndef BATON_CORE_MCPCHECK_H
#define BATON_CORE_MCPCHECK_H

struct buf;
struct json_t;

/* The longest run or task reference taken. */
#define MCP_REF_MAX 128

/*
 * Checks v against the subset of JSON Schema the tools' inputSchemas
 * use: type (object, string, integer, boolean, array), properties,
 * required, additionalProperties false (any property not listed is
 * refused), items, maxItems, enum of strings, minimum and maximum,
 * minLength and maxLength. 0, or -1 with what does not fit said into
 * msg, naming where ("arguments", "\"title\"").
 */
int mcp_schema_check(const struct json_t *v, const struct json_t *schema,
		     const char *where, struct buf *msg);
/*
 * 1 when ref can name a run or task: 1 to MCP_REF_MAX letters, digits,
 * '.', '_' and '-', not starting with '.' or '-'. A path, a space or a
 * control character is not one.
 */
int mcp_ref_ok(const char *ref);
/*
 * The offset of the first control character text for an agent or a
 * person may not hold (C0 but tab and newline, and DEL); -1 when none.
 */
long mcp_control_at(const char *s);

#endif
