/*
 * jansson helpers: see json.h.
 */
#include "util/compat.h"

#include "util/buf.h"
#include "util/json.h"
#include "util/strvec.h"
#include "util/timeutil.h"

size_t
utf8_decode(const unsigned char *p, size_t n, unsigned int *cp)
{
	size_t len, i;
	unsigned int v;

	if (!n)
		return 0;
	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if ((p[0] & 0xe0) == 0xc0) {
		len = 2;
		v = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		len = 3;
		v = p[0] & 0x0f;
	} else if ((p[0] & 0xf8) == 0xf0) {
		len = 4;
		v = p[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3f);
	}
	if ((len == 2 && v < 0x80) || (len == 3 && v < 0x800) ||
	    (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
	    (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0; a NUL
 * is not valid here (jansson strings end at one). */
static size_t
utf8_len(const unsigned char *p, size_t n)
{
	unsigned int cp;

	if (n && !p[0])
		return 0;
	return utf8_decode(p, n, &cp);
}

json_t *
json_lossy(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	struct buf b = BUF_INIT;
	size_t i = 0, run = 0, n;
	json_t *j;

	/* valid text, nearly always: jansson checks it as it copies it (the
	 * same rules as utf8_decode), so only a NUL is looked for here */
	if (!memchr(s, '\0', len) && (j = json_stringn(s, len)))
		return j;
	while (i < len) {
		n = utf8_len(p + i, len - i);
		if (n) {
			i += n;
			continue;
		}
		buf_add(&b, p + run, i - run);
		buf_adds(&b, "\xef\xbf\xbd");
		run = ++i;
	}
	buf_add(&b, p + run, i - run);
	j = json_stringn(b.ptr, b.len);
	buf_release(&b);
	return j ? j : json_string("");
}

json_t *
json_lossy_str(const char *s)
{
	return s ? json_lossy(s, strlen(s)) : json_null();
}

const char *
json_get_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

json_t *
json_time(int64_t ms)
{
	char ts[40];

	if (!ms)
		return json_null();
	time_fmt_iso(ms, ts, sizeof(ts));
	return json_string(ts);
}

char *
json_take_text(json_t *v)
{
	char *text;

	if (!v)
		return NULL;
	text = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	return text;
}

json_t *
json_str_take(char *s)
{
	json_t *v = s ? json_string(s) : json_null();

	free(s);
	return v ? v : json_null();
}

json_t *
json_strvec(const struct strvec *v)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; v && i < v->nr; i++)
		json_array_append_new(a, json_string(v->v[i]));
	return a;
}

int
json_text_strings(const char *text, struct strvec *out)
{
	json_t *a, *v;
	size_t i;

	if (!text)
		return 0;
	a = json_loads(text, 0, NULL);
	if (!json_is_array(a)) {
		json_decref(a);
		return -1;
	}
	json_array_foreach(a, i, v) {
		if (json_is_string(v))
			strvec_push(out, json_string_value(v));
	}
	json_decref(a);
	return 1;
}

void
json_describe(const json_t *v, size_t max, struct buf *out)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_STRING:
		buf_addch(out, '\'');
		buf_add_cut(out, json_string_value(v), json_string_length(v),
			    max);
		buf_addch(out, '\'');
		break;
	case JSON_INTEGER:
		buf_addf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		buf_addf(out, "%g", json_real_value(v));
		break;
	case JSON_TRUE:
		buf_adds(out, "true");
		break;
	case JSON_FALSE:
		buf_adds(out, "false");
		break;
	case JSON_NULL:
		buf_adds(out, v ? "null" : "nothing");
		break;
	case JSON_ARRAY:
		buf_adds(out, json_array_size(v) ? "a list" : "an empty list");
		break;
	case JSON_OBJECT:
		buf_adds(out, "an object");
		break;
	}
}

const char *
json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "a list";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "true/false";
	case JSON_NULL:
	default:
		return "null";
	}
}
