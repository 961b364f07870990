/*
 * A map from strings to indexes (an open-addressing hash table), for the
 * lookups by name that would otherwise scan a list once per item: a
 * pipeline's stages and statuses, where a config can hold thousands.
 * Keys are copied in; nothing is ever removed.
 */
#ifndef BATON_UTIL_STRMAP_H
#define BATON_UTIL_STRMAP_H

#include <stddef.h>

struct strmap_slot;

struct strmap {
	struct strmap_slot *slots;
	size_t nr, cap; /* cap: 0 or a power of two */
};

#define STRMAP_INIT { NULL, 0, 0 }

/* Frees the keys and the table; m is empty and usable afterwards. */
void strmap_release(struct strmap *m);

/* 1 and *out = its value when key is in m, else 0 (*out untouched). */
int strmap_get(const struct strmap *m, const char *key, size_t *out);

/*
 * Maps a copy of key to value unless key is there already: 1 when it
 * was added, 0 when it was there (its value is left as it was).
 */
int strmap_add(struct strmap *m, const char *key, size_t value);

#endif
