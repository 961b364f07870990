/*
 * The loop's hash-chained receipts: sha256, sealing, the canonical form,
 * and a verifier that names the receipt a change, a removal or a move
 * broke, with the run's record catching a removed last receipt.
 */
#include "util/compat.h"

#include "core/receipt.h"
#include "test.h"
#include "util/err.h"

#define NR 3

/* A chain of NR sealed receipts, as the loop writes them; events 40,
 * 41, 42 carry them. */
struct chain {
	json_t *r[NR];
	int64_t seq[NR];
};

static json_t *
receipt(int n, const char *decision)
{
	return json_pack("{s:i, s:i, s:s, s:{s:s, s:[{s:s, s:s}]}, s:s,"
			 " s:[{s:s, s:s, s:s, s:s}], s:n, s:s}",
			 "n", n, "iteration", (n + 1) / 2, "phase", "act",
			 "asked", "step", "edit a.c", "effects", "kind",
			 "write", "target", "src/a.c", "decision", decision,
			 "grants", "kind", "write", "target", "src/a.c",
			 "decision", decision, "by", "profile trusted-local",
			 "reason", "output_digest", "sha256:00ff");
}

static void
chain_make(struct chain *c)
{
	const char *prev = RECEIPT_GENESIS;
	int i;

	for (i = 0; i < NR; i++) {
		c->r[i] = receipt(i + 1, "granted");
		receipt_seal(c->r[i], prev);
		prev = json_string_value(json_object_get(c->r[i], "hash"));
		c->seq[i] = 40 + i;
	}
}

static void
chain_free(struct chain *c)
{
	int i;

	for (i = 0; i < NR; i++)
		json_decref(c->r[i]);
}

/*
 * Walks the receipts at the indexes in order (-1 ends) through the
 * verifier, then its end against want_n and want_head. Returns the first
 * error code; e holds its message.
 */
static int
verify(const struct chain *c, const int *order, int want_n,
       const char *want_head, struct err *e)
{
	struct receipt_chain rc;
	int i, r;

	receipt_chain_init(&rc);
	for (i = 0; order[i] >= 0; i++) {
		r = receipt_chain_next(&rc, c->r[order[i]], c->seq[order[i]],
				       e);
		if (r)
			return r;
	}
	return receipt_chain_end(&rc, want_n, want_head, e);
}

static const char *
head(const struct chain *c)
{
	return json_string_value(json_object_get(c->r[NR - 1], "hash"));
}

TEST(sha256_known_answers)
{
	char out[65];

	receipt_sha256_hex("", 0, out);
	ASSERT_STREQ(out, "e3b0c44298fc1c149afbf4c8996fb924"
			  "27ae41e4649b934ca495991b7852b855");
	receipt_sha256_hex("abc", 3, out);
	ASSERT_STREQ(out, "ba7816bf8f01cfea414140de5dae2223"
			  "b00361a396177a9cb410ff61f20015ad");
	ASSERT_EQ(strlen(RECEIPT_GENESIS), 64);
}

TEST(seal_sets_prev_and_hash)
{
	json_t *r = json_pack("{s:i, s:s}", "n", 1, "phase", "act");
	json_t *stripped;
	char *text;
	char want[65];
	char s[512];

	receipt_seal(r, RECEIPT_GENESIS);
	ASSERT_STREQ(json_string_value(json_object_get(r, "prev")),
		     RECEIPT_GENESIS);
	/* the hash is sha256(prev "\n" canonical(r without hash)) */
	stripped = json_deep_copy(r);
	json_object_del(stripped, "hash");
	text = json_dumps(stripped,
			  JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
	ASSERT_STREQ(text,
		     "{\"n\":1,\"phase\":\"act\",\"prev\":\"" RECEIPT_GENESIS
		     "\"}");
	snprintf(s, sizeof(s), "%s\n%s", RECEIPT_GENESIS, text);
	receipt_sha256_hex(s, strlen(s), want);
	ASSERT_STREQ(json_string_value(json_object_get(r, "hash")), want);
	/* sealing again replaces the hash, and gives the same one */
	receipt_seal(r, RECEIPT_GENESIS);
	ASSERT_STREQ(json_string_value(json_object_get(r, "hash")), want);
	ASSERT_EQ(json_object_size(r), 4);
	free(text);
	json_decref(stripped);
	json_decref(r);
}

TEST(canonical_form_ignores_key_order)
{
	json_t *a = json_pack("{s:i, s:s, s:{s:s, s:s}}", "n", 1, "phase",
			      "act", "asked", "step", "x", "effects", "y");
	json_t *b = json_pack("{s:{s:s, s:s}, s:s, s:i}", "asked", "effects",
			      "y", "step", "x", "phase", "act", "n", 1);

	receipt_seal(a, RECEIPT_GENESIS);
	receipt_seal(b, RECEIPT_GENESIS);
	ASSERT_STREQ(json_string_value(json_object_get(a, "hash")),
		     json_string_value(json_object_get(b, "hash")));
	json_decref(a);
	json_decref(b);
}

TEST(canonical_form_survives_a_round_trip)
{
	json_t *r =
	    json_pack("{s:i, s:s}", "n", 1, "reason", "caf\xc3\xa9 \"x\"");
	struct receipt_chain c = RECEIPT_CHAIN_INIT;
	struct err e = ERR_INIT;
	json_t *back;
	char *text;

	receipt_seal(r, RECEIPT_GENESIS);
	/* stored pretty and unsorted, as another writer might */
	text = json_dumps(r, JSON_INDENT(3));
	back = json_loads(text, 0, NULL);
	ASSERT(back);
	ASSERT_OK(receipt_chain_next(&c, back, 7, &e), &e);
	ASSERT_EQ(c.n, 1);
	free(text);
	json_decref(back);
	json_decref(r);
}

TEST(chain_of_three_verifies)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;
	struct receipt_chain rc;
	int i;

	chain_make(&c);
	ASSERT_OK(verify(&c, order, NR, head(&c), &e), &e);
	ASSERT_OK(verify(&c, order, -1, NULL, &e), &e);
	ASSERT_OK(verify(&c, order, NR, NULL, &e), &e);
	/* the walk advances n and head */
	receipt_chain_init(&rc);
	ASSERT_EQ(rc.n, 0);
	ASSERT_STREQ(rc.head, RECEIPT_GENESIS);
	for (i = 0; i < NR; i++)
		ASSERT_OK(receipt_chain_next(&rc, c.r[i], c.seq[i], &e), &e);
	ASSERT_EQ(rc.n, NR);
	ASSERT_STREQ(rc.head, head(&c));
	chain_free(&c);
}

TEST(empty_chain)
{
	struct receipt_chain rc = RECEIPT_CHAIN_INIT;
	struct err e = ERR_INIT;

	ASSERT_OK(receipt_chain_end(&rc, -1, NULL, &e), &e);
	ASSERT_OK(receipt_chain_end(&rc, 0, NULL, &e), &e);
	ASSERT_OK(receipt_chain_end(&rc, 0, RECEIPT_GENESIS, &e), &e);
	ASSERT_EQ(receipt_chain_end(&rc, 1, NULL, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "the run recorded 1 receipt but 0 remain: "
			    "receipt 1 was removed");
}

TEST(tampered_field_names_receipt)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	json_object_set_new(c.r[1], "decision", json_string("denied"));
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 2 (event 41) was changed after it was "
			    "written: its content does not match its hash");
	chain_free(&c);
}

TEST(tampered_nested_field_names_receipt)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;
	json_t *fx;

	chain_make(&c);
	fx = json_array_get(
	    json_object_get(json_object_get(c.r[2], "asked"), "effects"), 0);
	json_object_set_new(fx, "target", json_string("/etc/passwd"));
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "receipt 3 (event 42) was changed");
	chain_free(&c);
}

TEST(resealed_tamper_breaks_the_next_link)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	/* a forger who reseals receipt 2 cannot fix receipt 3's prev */
	json_object_set_new(c.r[1], "decision", json_string("denied"));
	receipt_seal(c.r[1],
		     json_string_value(json_object_get(c.r[0], "hash")));
	ASSERT_EQ(verify(&c, order, NR, NULL, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 3 (event 42): its prev does not match "
			    "receipt 2's hash: a receipt before it was "
			    "changed or removed");
	chain_free(&c);
}

TEST(tampered_prev_of_first)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	json_object_set_new(c.r[0], "prev", json_string("ab"));
	ASSERT_EQ(verify(&c, order, NR, NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "receipt 1 (event 40): its prev is not the "
			       "start of the chain");
	chain_free(&c);
}

TEST(removed_middle)
{
	static const int order[] = { 0, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 2 (event 42) is numbered 3: receipt 2 "
			    "is missing or out of order");
	chain_free(&c);
}

TEST(removed_middle_renumbered)
{
	static const int order[] = { 0, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	/* renumbered and resealed on its own prev: the link still breaks */
	json_object_set_new(c.r[2], "n", json_integer(2));
	receipt_seal(c.r[2],
		     json_string_value(json_object_get(c.r[1], "hash")));
	ASSERT_EQ(verify(&c, order, 2, NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "receipt 2 (event 42): its prev does not "
			       "match receipt 1's hash");
	chain_free(&c);
}

TEST(removed_two)
{
	static const int order[] = { 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	ASSERT_EQ(verify(&c, order, NR, NULL, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 1 (event 42) is numbered 3: receipts 1 "
			    "and 2 are missing or out of order");
	chain_free(&c);
}

TEST(removed_last_caught_by_chain_end)
{
	static const int order[] = { 0, 1, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	/* the remaining chain is intact on its own */
	ASSERT_OK(verify(&c, order, -1, NULL, &e), &e);
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "the run recorded 3 receipts but 2 remain: "
			    "receipt 3 was removed");
	chain_free(&c);
}

TEST(removed_last_two_caught_by_chain_end)
{
	static const int order[] = { 0, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "the run recorded 3 receipts but 1 remains: "
			    "receipts 2 to 3 were removed");
	chain_free(&c);
}

TEST(extra_receipt_caught_by_chain_end)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	ASSERT_EQ(verify(&c, order, 2, NULL, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "the run recorded 2 receipts but 3 are stored");
	chain_free(&c);
}

TEST(replaced_last_caught_by_head)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;
	char *old;

	chain_make(&c);
	old = strdup(head(&c));
	json_object_set_new(c.r[2], "decision", json_string("denied"));
	receipt_seal(c.r[2],
		     json_string_value(json_object_get(c.r[1], "hash")));
	ASSERT_OK(verify(&c, order, NR, NULL, &e), &e);
	ASSERT_EQ(verify(&c, order, NR, old, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "the last receipt was replaced");
	free(old);
	chain_free(&c);
}

TEST(reordered)
{
	static const int order[] = { 0, 2, 1, -1 };
	static const int back[] = { 1, 0, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "receipt 2 (event 42) is numbered 3");
	ASSERT_EQ(verify(&c, back, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "receipt 1 (event 41) is numbered 2");
	chain_free(&c);
}

TEST(repeated)
{
	static const int order[] = { 0, 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 2 (event 40) is numbered 1: receipt 1 "
			    "is repeated or out of order");
	chain_free(&c);
}

TEST(not_a_receipt)
{
	struct receipt_chain rc = RECEIPT_CHAIN_INIT;
	struct err e = ERR_INIT;
	json_t *arr = json_array(), *nonum = json_pack("{s:s}", "n", "1");
	json_t *nohash = json_pack("{s:i}", "n", 1);

	ASSERT_EQ(receipt_chain_next(&rc, NULL, 9, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 1 (event 9) is not a JSON object");
	ASSERT_EQ(receipt_chain_next(&rc, arr, 9, &e), BATON_EINVAL);
	ASSERT_EQ(receipt_chain_next(&rc, nonum, 9, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 1 (event 9) has no number n");
	json_object_set_new(nohash, "prev", json_string(RECEIPT_GENESIS));
	ASSERT_EQ(receipt_chain_next(&rc, nohash, 9, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 1 (event 9) has no hash");
	/* a failed step leaves the chain where it was */
	ASSERT_EQ(rc.n, 0);
	ASSERT_STREQ(rc.head, RECEIPT_GENESIS);
	json_decref(arr);
	json_decref(nonum);
	json_decref(nohash);
}
