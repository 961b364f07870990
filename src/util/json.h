/*
 * Small additions to jansson for text that comes from children: agent
 * output and command logs are not guaranteed to be UTF-8, and jansson
 * refuses strings that are not.
 */
#ifndef BATON_UTIL_JSON_H
#define BATON_UTIL_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A JSON string of s (len bytes) with every invalid UTF-8 sequence and
 * NUL byte replaced by U+FFFD. Never NULL.
 */
json_t *json_lossy(const char *s, size_t len);
/* json_lossy on a NUL-terminated string; NULL gives JSON null. */
json_t *json_lossy_str(const char *s);

/*
 * v as compact JSON text (caller frees), consuming v: for the event data
 * built with json_pack in one expression. NULL gives NULL.
 */
char *json_take_text(json_t *v);

/* The string member key of obj, or NULL. Borrowed. */
const char *json_get_str(const json_t *obj, const char *key);
/*
 * What v is, for an error message about a value that was not the one
 * wanted: 'text' (cut to max bytes), 3, true, a list, an object; NULL:
 * nothing.
 */
struct buf;
void json_describe(const json_t *v, size_t max, struct buf *out);
/*
 * What kind of value v is, for a message about a member that has the
 * wrong one: "an object", "a list", "a string", "a number",
 * "true/false" or "null". A static string.
 */
const char *json_kind(const json_t *v);
/* A JSON string of s, which it frees (NULL: JSON null). */
json_t *json_str_take(char *s);
/* The strings of v as a JSON array. */
struct strvec;
json_t *json_strvec(const struct strvec *v);
/*
 * Pushes the strings of text, a JSON array (other items skipped), onto
 * out: 1; 0 when text is NULL; -1 when it is not a JSON array.
 */
int json_text_strings(const char *text, struct strvec *out);
/* Epoch ms as an ISO 8601 UTC string; null for 0 (never). */
json_t *json_time(int64_t ms);

/*
 * The code point of the valid UTF-8 sequence at p (at most n bytes) in
 * *cp, and its length; 0 when it is not valid UTF-8 (overlong forms and
 * surrogates included).
 */
size_t utf8_decode(const unsigned char *p, size_t n, unsigned int *cp);

#endif
