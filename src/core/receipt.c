/*
 * The loop's hash-chained receipts: see receipt.h. Sealing and verifying
 * share one hash function, so a receipt verifies exactly when it is
 * byte for byte (in canonical form) what was sealed. Verification says
 * which receipt broke the chain and how: a gap in the numbers, a prev
 * that does not match the receipt before it, or content that does not
 * match its own hash.
 */
#include "util/compat.h"

#include <openssl/evp.h>

#include "core/receipt.h"
#include "util/buf.h"
#include "util/err.h"

#define CANONICAL_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII)

void
receipt_sha256_hex(const void *data, size_t len, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;

	if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != 32)
		BUG("SHA-256 failed");
	for (i = 0; i < mdlen; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

/*
 * The hash of receipt r chained to prev: sha256 of prev, "\n" and the
 * canonical text of r without its "hash". Returns -1 only when r cannot
 * be encoded (jansson refuses nothing a JSON parser or json_pack made).
 */
static int
receipt_hash(const json_t *r, const char *prev, char out[65])
{
	json_t *copy = json_deep_copy(r);
	struct buf b = BUF_INIT;
	char *text;

	json_object_del(copy, "hash");
	text = json_dumps(copy, CANONICAL_FLAGS);
	json_decref(copy);
	if (!text)
		return -1;
	buf_addf(&b, "%s\n%s", prev, text);
	receipt_sha256_hex(b.ptr, b.len, out);
	buf_release(&b);
	free(text);
	return 0;
}

void
receipt_seal(json_t *r, const char *prev_hex)
{
	char hash[65];

	json_object_set_new(r, "prev", json_string(prev_hex));
	json_object_del(r, "hash");
	if (receipt_hash(r, prev_hex, hash))
		BUG("a receipt that cannot be encoded as JSON");
	json_object_set_new(r, "hash", json_string(hash));
}

void
receipt_chain_init(struct receipt_chain *c)
{
	c->n = 0;
	memcpy(c->head, RECEIPT_GENESIS, sizeof(c->head));
}

/* The error for a receipt numbered n where c->n + 1 was due. */
static int
misnumbered(const struct receipt_chain *c, json_int_t n, int64_t seq,
	    struct err *e)
{
	int want = c->n + 1;

	if (n < want)
		return err_set(e, BATON_EINVAL,
			       "receipt %d (event %lld) is numbered %lld:"
			       " receipt %lld is repeated or out of order",
			       want, (long long)seq, (long long)n,
			       (long long)n);
	if (n == want + 1)
		return err_set(e, BATON_EINVAL,
			       "receipt %d (event %lld) is numbered %lld:"
			       " receipt %d is missing or out of order",
			       want, (long long)seq, (long long)n, want);
	return err_set(e, BATON_EINVAL,
		       "receipt %d (event %lld) is numbered %lld: receipts %d"
		       " %s %lld are missing or out of order",
		       want, (long long)seq, (long long)n, want,
		       n == want + 2 ? "and" : "to", (long long)n - 1);
}

int
receipt_chain_next(struct receipt_chain *c, const json_t *r, int64_t seq,
		   struct err *e)
{
	int want = c->n + 1;
	const json_t *n = json_object_get(r, "n");
	const char *prev = json_string_value(json_object_get(r, "prev"));
	const char *hash = json_string_value(json_object_get(r, "hash"));
	char got[65];

	if (!json_is_object(r))
		return err_set(e, BATON_EINVAL,
			       "receipt %d (event %lld) is not a JSON object",
			       want, (long long)seq);
	if (!json_is_integer(n))
		return err_set(e, BATON_EINVAL,
			       "receipt %d (event %lld) has no number n", want,
			       (long long)seq);
	if (json_integer_value(n) != want)
		return misnumbered(c, json_integer_value(n), seq, e);
	if (!prev || strcmp(prev, c->head)) {
		if (want == 1)
			return err_set(e, BATON_EINVAL,
				       "receipt 1 (event %lld): its prev is not"
				       " the start of the chain (64 zeros): it"
				       " was changed after it was written",
				       (long long)seq);
		return err_set(e, BATON_EINVAL,
			       "receipt %d (event %lld): its prev does not"
			       " match receipt %d's hash: a receipt before it"
			       " was changed or removed",
			       want, (long long)seq, want - 1);
	}
	if (!hash)
		return err_set(e, BATON_EINVAL,
			       "receipt %d (event %lld) has no hash", want,
			       (long long)seq);
	if (receipt_hash(r, prev, got) || strcmp(got, hash))
		return err_set(
		    e, BATON_EINVAL,
		    "receipt %d (event %lld) was changed after it was"
		    " written: its content does not match its hash",
		    want, (long long)seq);
	c->n = want;
	memcpy(c->head, got, sizeof(c->head));
	return 0;
}

/* "s" for a count that is not 1: "1 receipt", "2 receipts". */
static const char *
plural(int n)
{
	return n == 1 ? "" : "s";
}

int
receipt_chain_end(const struct receipt_chain *c, int want_n,
		  const char *want_head, struct err *e)
{
	if (want_n < 0)
		return 0;
	if (c->n == want_n - 1)
		return err_set(e, BATON_EINVAL,
			       "the run recorded %d receipt%s but %d remain%s:"
			       " receipt %d was removed",
			       want_n, plural(want_n), c->n,
			       c->n == 1 ? "s" : "", want_n);
	if (c->n < want_n)
		return err_set(e, BATON_EINVAL,
			       "the run recorded %d receipts but %d remain%s:"
			       " receipts %d to %d were removed",
			       want_n, c->n, c->n == 1 ? "s" : "", c->n + 1,
			       want_n);
	if (c->n > want_n)
		return err_set(
		    e, BATON_EINVAL,
		    "the run recorded %d receipt%s but %d are stored:"
		    " receipt %d is not in the run's record",
		    want_n, plural(want_n), c->n, want_n + 1);
	if (want_head && strcmp(want_head, c->head))
		return err_set(e, BATON_EINVAL,
			       "the run recorded head %.12s but the chain ends"
			       " at %.12s: the last receipt was replaced",
			       want_head, c->head);
	return 0;
}
