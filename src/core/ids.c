/*
 * Deterministic run ids: see ids.h.
 */
#include "util/compat.h"

#include <ctype.h>

#include "core/ids.h"
#include "util/buf.h"
#include "util/xalloc.h"

#define SLUG_MAX 24

char *
run_id_make(int64_t seq, const char *task)
{
	struct buf b = BUF_INIT;
	size_t start;
	int dash = 0;

	size_t word = 0; /* where the word being copied started */

	buf_addf(&b, "r%lld", (long long)seq);
	start = b.len;
	for (; task && *task; task++) {
		unsigned char c = (unsigned char)*task;

		if (!isalnum(c) || c >= 128) {
			dash = 1;
			continue;
		}
		if (dash || b.len == start) {
			if (b.len - start >= SLUG_MAX)
				break;
			word = b.len;
			buf_addch(&b, '-');
		}
		dash = 0;
		if (b.len - start >= SLUG_MAX) {
			/* Cut before a word that does not fit, unless it is
			 * the only one. */
			if (word > start)
				buf_setlen(&b, word);
			break;
		}
		buf_addch(&b, tolower(c));
	}
	return buf_detach(&b, NULL);
}

int64_t
run_id_seq(const char *ref)
{
	int64_t n = 0;

	if (*ref == 'r')
		ref++;
	if (!isdigit((unsigned char)*ref))
		return 0;
	for (; isdigit((unsigned char)*ref); ref++) {
		if (n > INT64_MAX / 10 - 10)
			return 0;
		n = n * 10 + (*ref - '0');
	}
	return *ref == '\0' || *ref == '-' ? n : 0;
}
