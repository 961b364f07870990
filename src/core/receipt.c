/*
 * The loop's hash-chained receipts: see receipt.h. Sealing and verifying
 * share one hash function, so a receipt verifies exactly when it is
 * byte for byte (in canonical form) what was sealed. Verification says
 * which receipt broke the chain and how: a gap in the numbers, a receipt
 * of another run, a prev that does not match the receipt before it, or
 * content that does not match its own hash; then whether the chain ends
 * where the run's record (its anchor) says it does.
 */
#include "util/compat.h"

#include <openssl/evp.h>

#include "core/receipt.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"

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
receipt_chain_init(struct receipt_chain *c, const char *run)
{
	c->run = run;
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
	const char *run = json_string_value(json_object_get(r, "run"));
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
	/*
	 * Before the prev and the hash, so that a chain moved here from
	 * another run is named as that rather than as a changed receipt.
	 * Without a run, it cannot be told from such a chain.
	 */
	if (!run)
		return err_set(e, BATON_EINVAL,
			       "receipt %d (event %lld) does not name its run:"
			       " it was written before receipts were bound to"
			       " their run, or its run was removed",
			       want, (long long)seq);
	if (strcmp(run, c->run))
		return err_set(e, BATON_EINVAL,
			       "receipt %d (event %lld) belongs to run '%s',"
			       " not '%s': it was copied from another run",
			       want, (long long)seq, run, c->run);
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

/* 1 when s is 64 lowercase hex digits, as every hash is. */
static int
is_hash(const char *s)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!(s[i] >= '0' && s[i] <= '9') &&
		    !(s[i] >= 'a' && s[i] <= 'f'))
			return 0;
	return s[64] == '\0';
}

int
receipt_anchor_read(const json_t *loop, struct receipt_anchor *out,
		    struct err *e)
{
	const json_t *n = json_object_get(loop, "receipts");
	const json_t *head = json_object_get(loop, "head");
	const json_t *acted = json_object_get(loop, "acted");
	json_int_t count;
	int done = 0;

	if (!n)
		return err_set(e, BATON_EINVAL,
			       "the run's record has no receipt count"
			       " (progress.loop.receipts is missing)");
	if (!json_is_integer(n))
		return err_set(e, BATON_EINVAL,
			       "the run's record has no receipt count"
			       " (progress.loop.receipts is %s, not an"
			       " integer)",
			       json_kind(n));
	count = json_integer_value(n);
	if (count < 0 || count > INT32_MAX)
		return err_set(e, BATON_EINVAL,
			       "the run's receipt count"
			       " (progress.loop.receipts) is %lld, which no"
			       " chain has",
			       (long long)count);
	if (!head)
		return err_set(e, BATON_EINVAL,
			       "the run's record has no receipt head"
			       " (progress.loop.head is missing)");
	if (!json_is_string(head))
		return err_set(e, BATON_EINVAL,
			       "the run's record has no receipt head"
			       " (progress.loop.head is %s, not a hash)",
			       json_kind(head));
	if (!is_hash(json_string_value(head)))
		return err_set(e, BATON_EINVAL,
			       "the run's receipt head (progress.loop.head) is"
			       " not 64 lowercase hex digits");
	if (!count && strcmp(json_string_value(head), RECEIPT_GENESIS))
		return err_set(e, BATON_EINVAL,
			       "the run recorded 0 receipts but head %.12s:"
			       " a chain with no receipts starts at 64 zeros",
			       json_string_value(head));
	/* an act and its receipt are one write: a run that acted has them */
	if (json_is_integer(acted) && json_integer_value(acted) > 0 &&
	    json_integer_value(acted) <= INT32_MAX)
		done = (int)json_integer_value(acted);
	if (done > count)
		return err_set(e, BATON_EINVAL,
			       "the run recorded act %d done but %lld"
			       " receipt%s: every act leaves one, so receipts"
			       " were removed and the count lowered",
			       done, (long long)count, count == 1 ? "" : "s");
	out->n = (int)count;
	memcpy(out->head, json_string_value(head), sizeof(out->head));
	out->acted = done;
	return 0;
}

int
receipt_chain_end(const struct receipt_chain *c, const struct receipt_anchor *a,
		  struct err *e)
{
	int want_n = a->n;

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
	if (strcmp(a->head, c->head))
		return err_set(e, BATON_EINVAL,
			       "the run recorded head %.12s but the chain ends"
			       " at %.12s: the last receipt was replaced",
			       a->head, c->head);
	return 0;
}
