/*
 * strmap: linear probing over a power-of-two table that is never more
 * than half full, with FNV-1a hashes kept beside the keys so a probe
 * compares strings only when the hashes agree.
 */
#include "util/compat.h"

#include <stdint.h>

#include "util/strmap.h"
#include "util/xalloc.h"

struct strmap_slot {
	char *key; /* NULL: empty */
	uint64_t hash;
	size_t value;
};

static uint64_t
hash_of(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The slot holding key, or the empty slot where it would go. */
static struct strmap_slot *
find(const struct strmap *m, const char *key, uint64_t h)
{
	size_t i = (size_t)h & (m->cap - 1);

	while (m->slots[i].key &&
	       (m->slots[i].hash != h || strcmp(m->slots[i].key, key)))
		i = (i + 1) & (m->cap - 1);
	return &m->slots[i];
}

static void
grow(struct strmap *m)
{
	struct strmap old = *m;
	size_t i;

	m->cap = old.cap ? old.cap * 2 : 16;
	m->slots = xcalloc(m->cap, sizeof(*m->slots));
	for (i = 0; i < old.cap; i++)
		if (old.slots[i].key)
			*find(m, old.slots[i].key, old.slots[i].hash) =
				old.slots[i];
	free(old.slots);
}

void
strmap_release(struct strmap *m)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		free(m->slots[i].key);
	FREE_AND_NULL(m->slots);
	m->nr = m->cap = 0;
}

int
strmap_get(const struct strmap *m, const char *key, size_t *out)
{
	const struct strmap_slot *s;

	if (!m->cap)
		return 0;
	s = find(m, key, hash_of(key));
	if (!s->key)
		return 0;
	*out = s->value;
	return 1;
}

int
strmap_add(struct strmap *m, const char *key, size_t value)
{
	uint64_t h = hash_of(key);
	struct strmap_slot *s;

	if (2 * (m->nr + 1) > m->cap)
		grow(m);
	s = find(m, key, h);
	if (s->key)
		return 0;
	s->key = xstrdup(key);
	s->hash = h;
	s->value = value;
	m->nr++;
	return 1;
}
