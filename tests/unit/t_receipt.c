/*
 * The loop's hash-chained receipts: sha256, sealing, the canonical form,
 * and a verifier that names the receipt a change, a removal or a move
 * broke, with the run's record (its anchor, required) catching a removed
 * last receipt and the run id catching a chain moved between runs. The
 * Craik conformance cases (../shared/conformance/craik/
 * receipt-chain-cases.json) are read at run time: each case is run by
 * the handler of its name, and a case without one fails.
 */
#include "util/compat.h"

#include "core/receipt.h"
#include "test.h"
#include "util/err.h"

#define NR  3
#define RUN "r1-notes"

/* Where the shared conformance cases are: $BATON_CONFORMANCE_DIR, or
 * beside the source tree, as in CI (the tests run from its top). */
#define CONFORMANCE_DIR "../shared/conformance"

/* A chain of NR sealed receipts, as the loop writes them; events 40,
 * 41, 42 carry them. */
struct chain {
	json_t *r[NR];
	int64_t seq[NR];
};

static json_t *
receipt(int n, const char *decision)
{
	return json_pack("{s:i, s:s, s:i, s:s, s:{s:s, s:[{s:s, s:s}]}, s:s,"
			 " s:[{s:s, s:s, s:s, s:s}], s:n, s:s}",
			 "n", n, "run", RUN, "iteration", (n + 1) / 2, "phase",
			 "act", "asked", "step", "edit a.c", "effects", "kind",
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
 * verifier as run RUN, then its end against the anchor want_n and
 * want_head (NULL: RECEIPT_GENESIS, for walks that fail before the end).
 * Returns the first error code; e holds its message.
 */
static int
verify(const struct chain *c, const int *order, int want_n,
       const char *want_head, struct err *e)
{
	struct receipt_anchor a = { want_n, RECEIPT_GENESIS, 0 };
	struct receipt_chain rc;
	int i, r;

	if (want_head)
		snprintf(a.head, sizeof(a.head), "%s", want_head);
	receipt_chain_init(&rc, RUN);
	for (i = 0; order[i] >= 0; i++) {
		r = receipt_chain_next(&rc, c->r[order[i]], c->seq[order[i]],
				       e);
		if (r)
			return r;
	}
	return receipt_chain_end(&rc, &a, e);
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
	json_t *r = json_pack("{s:i, s:s, s:s}", "n", 1, "run", RUN, "reason",
			      "caf\xc3\xa9 \"x\"");
	struct receipt_chain c;
	struct err e = ERR_INIT;
	json_t *back;
	char *text;

	receipt_chain_init(&c, RUN);
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
	/* the walk advances n and head */
	receipt_chain_init(&rc, RUN);
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
	struct receipt_anchor none = { 0, RECEIPT_GENESIS, 0 };
	struct receipt_anchor one = { 1, RECEIPT_GENESIS, 0 };
	struct receipt_chain rc;
	struct err e = ERR_INIT;

	receipt_chain_init(&rc, RUN);
	ASSERT_OK(receipt_chain_end(&rc, &none, &e), &e);
	ASSERT_EQ(receipt_chain_end(&rc, &one, &e), BATON_EINVAL);
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
	/* the remaining chain is intact on its own, with its own anchor */
	ASSERT_OK(verify(&c, order, 2,
			 json_string_value(json_object_get(c.r[1], "hash")),
			 &e),
		  &e);
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
	ASSERT_OK(verify(&c, order, NR, head(&c), &e), &e);
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
	struct receipt_chain rc;
	struct err e = ERR_INIT;
	json_t *arr = json_array(), *nonum = json_pack("{s:s}", "n", "1");
	json_t *nohash = json_pack("{s:i, s:s}", "n", 1, "run", RUN);

	receipt_chain_init(&rc, RUN);

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

/* ---- the run id ---------------------------------------------------------- */

TEST(hash_covers_the_run)
{
	json_t *a = receipt(1, "granted"), *b = receipt(1, "granted");

	json_object_set_new(b, "run", json_string("r2-other"));
	receipt_seal(a, RECEIPT_GENESIS);
	receipt_seal(b, RECEIPT_GENESIS);
	ASSERT(strcmp(json_string_value(json_object_get(a, "hash")),
		      json_string_value(json_object_get(b, "hash"))));
	json_decref(a);
	json_decref(b);
}

TEST(chain_copied_into_another_run)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct receipt_chain rc;
	struct chain c;
	struct err e = ERR_INIT;
	int i;

	chain_make(&c);
	receipt_chain_init(&rc, "r2-other");
	ASSERT_EQ(receipt_chain_next(&rc, c.r[0], 40, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 1 (event 40) belongs to run 'r1-notes', "
			    "not 'r2-other': it was copied from another run");
	/* rewriting its run to this one breaks its hash */
	for (i = 0; i < NR; i++)
		json_object_set_new(c.r[i], "run", json_string("r2-other"));
	receipt_chain_init(&rc, "r2-other");
	ASSERT_EQ(receipt_chain_next(&rc, c.r[0], 40, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "receipt 1 (event 40) was changed after it was "
			       "written");
	/* and in its own run the rewritten chain is no longer intact */
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "belongs to run 'r2-other', not 'r1-notes'");
	chain_free(&c);
}

TEST(receipt_without_a_run)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;
	const char *prev = RECEIPT_GENESIS;
	int i;

	/* as written before receipts named their run: sealed, but unbound */
	chain_make(&c);
	for (i = 0; i < NR; i++) {
		json_object_del(c.r[i], "run");
		receipt_seal(c.r[i], prev);
		prev = json_string_value(json_object_get(c.r[i], "hash"));
	}
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 1 (event 40) does not name its run: it "
			    "was written before receipts were bound to their "
			    "run, or its run was removed");
	chain_free(&c);
}

/* ---- the anchor ---------------------------------------------------------- */

/* receipt_anchor_read of the JSON text loop; its message in e. */
static int
anchor(const char *loop, struct receipt_anchor *out, struct err *e)
{
	json_t *l = json_loads(loop, 0, NULL);
	int rc;

	ASSERT(l);
	rc = receipt_anchor_read(l, out, e);
	json_decref(l);
	return rc;
}

TEST(anchor_read)
{
	struct receipt_anchor a = { -1, "", -1 };
	struct err e = ERR_INIT;
	char text[256];

	snprintf(text, sizeof(text),
		 "{\"receipts\": 0, \"head\": \"%s\", \"phase\": \"act\"}",
		 RECEIPT_GENESIS);
	ASSERT_OK(anchor(text, &a, &e), &e);
	ASSERT_EQ(a.n, 0);
	ASSERT_STREQ(a.head, RECEIPT_GENESIS);
	ASSERT_EQ(a.acted, 0);
	ASSERT_OK(
	    anchor("{\"receipts\": 4, \"acted\": 2, \"head\": \"0123456789"
		   "abcdef0123456789abcdef0123456789abcdef0123456789abcd"
		   "ef\"}",
		   &a, &e),
	    &e);
	ASSERT_EQ(a.n, 4);
	ASSERT_EQ(a.acted, 2);
	ASSERT_STREQ(a.head, "0123456789abcdef0123456789abcdef"
			     "0123456789abcdef0123456789abcdef");
	/* no progress.loop at all */
	ASSERT_EQ(receipt_anchor_read(NULL, &a, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "the run's record has no receipt count "
			    "(progress.loop.receipts is missing)");
}

/*
 * Every way the anchor can be spoiled by hand is refused, with what is
 * wrong: the attack of issue 17 removed the count, or set it to null,
 * -1 or a string, and a chain cut at its end then verified.
 */
TEST(anchor_spoiled)
{
	static const struct {
		const char *receipts, *head, *acted, *want;
	} cases[] = {
		{ NULL, "\"" RECEIPT_GENESIS "\"", NULL,
		  "no receipt count (progress.loop.receipts is missing)" },
		{ "null", "\"" RECEIPT_GENESIS "\"", NULL,
		  "(progress.loop.receipts is null, not an integer)" },
		{ "-1", "\"" RECEIPT_GENESIS "\"", NULL,
		  "(progress.loop.receipts) is -1, which no chain has" },
		{ "\"3\"", "\"" RECEIPT_GENESIS "\"", NULL,
		  "(progress.loop.receipts is a string, not an integer)" },
		{ "3.0", "\"" RECEIPT_GENESIS "\"", NULL,
		  "(progress.loop.receipts is a number, not an integer)" },
		{ "true", "\"" RECEIPT_GENESIS "\"", NULL,
		  "(progress.loop.receipts is true/false, not an integer)" },
		{ "4294967296", "\"" RECEIPT_GENESIS "\"", NULL,
		  "is 4294967296, which no chain has" },
		{ "3", NULL, NULL,
		  "no receipt head (progress.loop.head is missing)" },
		{ "3", "null", NULL,
		  "(progress.loop.head is null, not a hash)" },
		{ "3", "7", NULL,
		  "(progress.loop.head is a number, not a hash)" },
		{ "3", "\"abc\"", NULL, "is not 64 lowercase hex digits" },
		{ "3",
		  "\"0123456789ABCDEF0123456789abcdef"
		  "0123456789abcdef0123456789abcdef\"",
		  NULL, "is not 64 lowercase hex digits" },
		{ "3",
		  "\"0123456789abcdef0123456789abcdef"
		  "0123456789abcdef0123456789abcdefa\"",
		  NULL, "is not 64 lowercase hex digits" },
		{ "3",
		  "\"0123456789abcdef0123456789abcdef"
		  "0123456789abcdef0123456789abcdeg\"",
		  NULL, "is not 64 lowercase hex digits" },
		{ "0",
		  "\"0123456789abcdef0123456789abcdef"
		  "0123456789abcdef0123456789abcdef\"",
		  NULL, "the run recorded 0 receipts but head 0123456789ab" },
		{ "1", "\"" RECEIPT_GENESIS "\"", "2",
		  "the run recorded act 2 done but 1 receipt: every act" },
		{ "0", "\"" RECEIPT_GENESIS "\"", "1",
		  "the run recorded act 1 done but 0 receipts" },
	};
	struct receipt_anchor a = { 7, "x", 7 };
	struct err e = ERR_INIT;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[512] = "{\"phase\": \"act\"";
		size_t len = strlen(text);

		if (cases[i].receipts)
			len +=
			    snprintf(text + len, sizeof(text) - len,
				     ", \"receipts\": %s", cases[i].receipts);
		if (cases[i].head)
			len += snprintf(text + len, sizeof(text) - len,
					", \"head\": %s", cases[i].head);
		if (cases[i].acted)
			len += snprintf(text + len, sizeof(text) - len,
					", \"acted\": %s", cases[i].acted);
		snprintf(text + len, sizeof(text) - len, "}");
		ASSERT_EQ(anchor(text, &a, &e), BATON_EINVAL);
		ASSERT_CONTAINS(e.msg, cases[i].want);
	}
	/* a refused anchor leaves *out alone */
	ASSERT_EQ(a.n, 7);
}

/* ---- Craik's cases ------------------------------------------------------- */

/* Two receipts that differ only deep inside (Craik: result.metadata, here
 * what granted an effect) have different hashes. */
static void
craik_hash_depends_on_payload(void)
{
	json_t *a = receipt(1, "granted"), *b = receipt(1, "granted");
	json_t *g = json_array_get(json_object_get(b, "grants"), 0);

	json_object_set_new(g, "by", json_string("grant write:src/*"));
	receipt_seal(a, RECEIPT_GENESIS);
	receipt_seal(b, RECEIPT_GENESIS);
	ASSERT(strcmp(json_string_value(json_object_get(a, "hash")),
		      json_string_value(json_object_get(b, "hash"))));
	json_decref(a);
	json_decref(b);
}

static void
craik_link(void)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	ASSERT_STREQ(json_string_value(json_object_get(c.r[1], "prev")),
		     json_string_value(json_object_get(c.r[0], "hash")));
	ASSERT_OK(verify(&c, order, NR, head(&c), &e), &e);
	chain_free(&c);
}

static void
craik_tampered_payload(void)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	json_object_set_new(c.r[1], "reason", json_string("Tampered reason."));
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 2 (event 41) was changed after it was "
			    "written: its content does not match its hash");
	chain_free(&c);
}

/* prev = "broken" on the second, its own hash recomputed. */
static void
craik_broken_link(void)
{
	static const int order[] = { 0, 1, 2, -1 };
	struct chain c;
	struct err e = ERR_INIT;

	chain_make(&c);
	receipt_seal(c.r[1], "broken");
	ASSERT_EQ(verify(&c, order, NR, head(&c), &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 2 (event 41): its prev does not match "
			    "receipt 1's hash: a receipt before it was changed "
			    "or removed");
	chain_free(&c);
}

/*
 * baton differs from Craik on purpose: receipts are append-only events,
 * with no upsert and so no hash history. Putting receipt 2 again with a
 * change is not a new version of it but a break: appended after the
 * original it repeats a number, and in the original's place it breaks
 * receipt 3's link.
 */
static void
craik_upsert_keeps_history(void)
{
	struct receipt_chain rc;
	struct chain c;
	struct err e = ERR_INIT;
	json_t *again, *g;

	chain_make(&c);
	again = json_deep_copy(c.r[1]);
	g = json_array_get(json_object_get(again, "grants"), 0);
	json_object_set_new(g, "by", json_string("changed"));
	receipt_seal(again, json_string_value(json_object_get(c.r[0], "hash")));
	/* appended as event 43, after the original */
	receipt_chain_init(&rc, RUN);
	ASSERT_OK(receipt_chain_next(&rc, c.r[0], 40, &e), &e);
	ASSERT_OK(receipt_chain_next(&rc, c.r[1], 41, &e), &e);
	ASSERT_EQ(receipt_chain_next(&rc, again, 43, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "receipt 3 (event 43) is numbered 2: receipt 2 "
			    "is repeated or out of order");
	/* in the original's place (event 41) */
	receipt_chain_init(&rc, RUN);
	ASSERT_OK(receipt_chain_next(&rc, c.r[0], 40, &e), &e);
	ASSERT_OK(receipt_chain_next(&rc, again, 41, &e), &e);
	ASSERT_EQ(receipt_chain_next(&rc, c.r[2], 42, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "receipt 3 (event 42): its prev does not "
			       "match receipt 2's hash");
	json_decref(again);
	chain_free(&c);
}

/*
 * The cases of receipt-chain-cases.json by name: run, or where else
 * they are run. A case added to the file fails here until it has one.
 */
static const struct {
	const char *name;
	void (*run)(void); /* NULL: not a unit case, see where */
	const char *where;
} craik_cases[] = {
	{ "hash depends on payload", craik_hash_depends_on_payload, NULL },
	{ "link", craik_link, NULL },
	{ "tampered payload", craik_tampered_payload, NULL },
	{ "broken link", craik_broken_link, NULL },
	{ "upsert keeps history", craik_upsert_keeps_history, NULL },
	/* the redaction is the loop's, before sealing */
	{ "unredacted secret", NULL, "tests/integration/t0033-loop.sh" },
};

TEST(craik_receipt_chain_cases)
{
	const char *dir = getenv("BATON_CONFORMANCE_DIR");
	json_error_t jerr;
	json_t *doc, *cases, *c;
	char path[4096];
	size_t i, j, ran = 0;

	snprintf(path, sizeof(path), "%s/craik/receipt-chain-cases.json",
		 dir ? dir : CONFORMANCE_DIR);
	doc = json_load_file(path, 0, &jerr);
	if (!doc)
		test_fail(__FILE__, __LINE__, "cannot read '%s': %s", path,
			  jerr.text);
	cases = json_object_get(doc, "cases");
	ASSERT(json_array_size(cases) > 0);
	json_array_foreach(cases, i, c)
	{
		const char *name =
		    json_string_value(json_object_get(c, "name"));

		ASSERT(name);
		for (j = 0; j < ARRAY_SIZE(craik_cases); j++)
			if (!strcmp(craik_cases[j].name, name))
				break;
		if (j == ARRAY_SIZE(craik_cases))
			test_fail(__FILE__, __LINE__,
				  "craik case '%s' has no test", name);
		if (!craik_cases[j].run)
			continue;
		fprintf(stderr, "craik case: %s\n", name);
		craik_cases[j].run();
		ran++;
	}
	ASSERT_EQ(ran, 5);
	json_decref(doc);
}
