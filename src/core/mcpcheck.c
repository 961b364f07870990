/*
 * What baton mcp takes from a client, checked before anything is done
 * with it (see mcpcheck.h).
 */
#include "util/compat.h"

#include <ctype.h>
#include <jansson.h>

#include "core/mcpcheck.h"
#include "util/buf.h"
#include "util/json.h"
#include "util/xalloc.h"

/*
 * Checks v against the subset of JSON Schema the tools' inputSchemas
 * use: type (object, string, integer, boolean, array), properties,
 * required, additionalProperties false, items, enum, minimum, maximum,
 * minLength, maxLength. A mismatch is said into msg, naming where.
 */
int
mcp_schema_check(const json_t *v, const json_t *schema, const char *where,
		 struct buf *msg)
{
	const char *type = json_get_str(schema, "type"), *key;
	const json_t *x, *sub;

	if (type && !strcmp(type, "object")) {
		const json_t *props = json_object_get(schema, "properties");
		size_t i;

		if (!json_is_object(v))
			goto type;
		x = json_object_get(schema, "required");
		for (i = 0; i < json_array_size(x); i++) {
			key = json_string_value(json_array_get(x, i));
			if (key && !json_object_get(v, key)) {
				buf_addf(msg, "%s needs \"%s\"", where, key);
				return -1;
			}
		}
		json_object_foreach((json_t *)v, key, sub) {
			const json_t *ps = json_object_get(props, key);
			char *at;
			int rc;

			if (!ps) {
				buf_addf(msg, "%s has no argument \"%s\"",
					 where, key);
				return -1;
			}
			at = xasprintf("\"%s\"", key);
			rc = mcp_schema_check(sub, ps, at, msg);
			free(at);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (type && !strcmp(type, "array")) {
		size_t i;

		if (!json_is_array(v))
			goto type;
		x = json_object_get(schema, "maxItems");
		if (x && json_array_size(v) > (size_t)json_integer_value(x)) {
			buf_addf(msg, "%s has more than %lld items", where,
				 (long long)json_integer_value(x));
			return -1;
		}
		for (i = 0; i < json_array_size(v); i++)
			if (mcp_schema_check(json_array_get(v, i),
					 json_object_get(schema, "items"),
					 where, msg))
				return -1;
		return 0;
	}
	if (type && !strcmp(type, "string")) {
		size_t len;

		if (!json_is_string(v))
			goto type;
		len = json_string_length(v);
		x = json_object_get(schema, "minLength");
		if (x && len < (size_t)json_integer_value(x)) {
			buf_addf(msg, "%s must not be empty", where);
			return -1;
		}
		x = json_object_get(schema, "maxLength");
		if (x && len > (size_t)json_integer_value(x)) {
			buf_addf(msg, "%s is longer than %lld bytes", where,
				 (long long)json_integer_value(x));
			return -1;
		}
		x = json_object_get(schema, "enum");
		if (x) {
			size_t i;

			for (i = 0; i < json_array_size(x); i++)
				if (json_equal(json_array_get(x, i),
					       (json_t *)v))
					return 0;
			buf_addf(msg, "%s: '%s' is not one of ", where,
				 json_string_value(v));
			for (i = 0; i < json_array_size(x); i++)
				buf_addf(msg, "%s%s", i ? ", " : "",
					 json_string_value(
						 json_array_get(x, i)));
			return -1;
		}
		return 0;
	}
	if (type && !strcmp(type, "integer")) {
		if (!json_is_integer(v))
			goto type;
		x = json_object_get(schema, "minimum");
		sub = json_object_get(schema, "maximum");
		if ((x && json_integer_value(v) < json_integer_value(x)) ||
		    (sub && json_integer_value(v) > json_integer_value(sub))) {
			buf_addf(msg, "%s must be from %lld to %lld", where,
				 (long long)json_integer_value(x),
				 (long long)json_integer_value(sub));
			return -1;
		}
		return 0;
	}
	if (type && !strcmp(type, "boolean") && !json_is_boolean(v))
		goto type;
	return 0;
type:
	buf_addf(msg, "%s must be %s %s, not %s", where,
		 type[0] == 'a' || type[0] == 'i' || type[0] == 'o' ? "an" :
								       "a",
		 type, json_kind(v));
	return -1;
}

/*
 * A run reference: a run id ("r3-add-csv-export"), "r3" or "3". Letters,
 * digits, '.', '_' and '-', not starting with '.'. Anything else (a
 * path, a control character) is refused before it reaches the store.
 */
int
mcp_ref_ok(const char *ref)
{
	size_t i, n = strlen(ref);

	if (!n || n > MCP_REF_MAX || ref[0] == '.' || ref[0] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)ref[i]) && ref[i] != '.' &&
		    ref[i] != '_' && ref[i] != '-')
			return 0;
	return 1;
}

/*
 * The first control character in s that text for an agent or a person
 * may not hold (C0 but tab and newline, DEL); -1 when none.
 */
long
mcp_control_at(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++) {
		unsigned char ch = (unsigned char)s[i];

		if ((ch < 0x20 && ch != '\t' && ch != '\n') || ch == 0x7f)
			return (long)i;
	}
	return -1;
}
