/*
 * Answer link tokens (server/answer.c): what one minted opens to, and
 * every change to one refused: a flipped decision, a later expiry, a
 * byte of the signature, another key, junk, a too long one, padding.
 */
#include "util/compat.h"

#include "server/server_int.h"
#include "test.h"
#include "util/buf.h"
#include "util/xalloc.h"

#define KEY   "0123456789abcdef0123456789abcdef"
#define OTHER "fedcba9876543210fedcba9876543210"
#define NOW   1800000000LL

static char *
mint(const char *decision, int64_t expires)
{
	return answer_token_mint(KEY, "r3-gated-task", 42, decision, expires,
				 "ops-slack");
}

TEST(answer_token_round_trip)
{
	struct answer_claim c;
	char *t = mint("approve", NOW + 60);

	ASSERT_EQ(answer_token_open(KEY, t, NOW, &c), ANSWER_OK);
	ASSERT_STREQ(c.run, "r3-gated-task");
	ASSERT_EQ(c.seq, 42);
	ASSERT_STREQ(c.decision, "approve");
	ASSERT_EQ(c.expires, NOW + 60);
	ASSERT_STREQ(c.target, "ops-slack");
	ASSERT(strlen(t) < ANSWER_TOKEN_MAX);
	ASSERT(strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789-_.") == strlen(t));
	free(t);
}

TEST(answer_token_expires)
{
	struct answer_claim c;
	char *t = mint("reject", NOW + 60);

	ASSERT_EQ(answer_token_open(KEY, t, NOW + 59, &c), ANSWER_OK);
	ASSERT_EQ(answer_token_open(KEY, t, NOW + 60, &c), ANSWER_EXPIRED);
	ASSERT_STREQ(c.decision, "reject");
	free(t);
}

/* A payload swapped in under the old signature, as an attacker would. */
static char *
swap_payload(const char *good, const char *from_token)
{
	const char *sig = strchr(good, '.'), *dot = strchr(from_token, '.');
	struct buf b = BUF_INIT;

	buf_add(&b, from_token, (size_t)(dot - from_token));
	buf_adds(&b, sig);
	return buf_detach(&b, NULL);
}

TEST(answer_token_changed_is_forged)
{
	struct answer_claim c;
	char *approve = mint("approve", NOW + 60);
	char *reject_unsigned = answer_token_mint(
	    OTHER, "r3-gated-task", 42, "reject", NOW + 60, "ops-slack");
	char *later = answer_token_mint(OTHER, "r3-gated-task", 42, "approve",
					NOW + 999999, "ops-slack");
	char *t;
	size_t n;

	/* the reject payload under approve's signature */
	t = swap_payload(approve, reject_unsigned);
	ASSERT_EQ(answer_token_open(KEY, t, NOW, &c), ANSWER_FORGED);
	free(t);
	/* a later expiry under the old signature */
	t = swap_payload(approve, later);
	ASSERT_EQ(answer_token_open(KEY, t, NOW, &c), ANSWER_FORGED);
	free(t);
	/* signed with another key */
	ASSERT_EQ(answer_token_open(KEY, reject_unsigned, NOW, &c),
		  ANSWER_FORGED);
	/* one character of the signature changed (not its last, whose low
	 * bits are padding) */
	t = xstrdup(approve);
	n = strlen(t) - 5;
	t[n] = t[n] == 'A' ? 'B' : 'A';
	ASSERT_EQ(answer_token_open(KEY, t, NOW, &c), ANSWER_FORGED);
	free(t);
	/* the expired forged one is forged, not expired */
	t = swap_payload(approve, later);
	ASSERT_EQ(answer_token_open(KEY, t, NOW + 100, &c), ANSWER_FORGED);
	free(t);
	free(approve);
	free(reject_unsigned);
	free(later);
}

TEST(answer_token_junk_is_malformed)
{
	struct answer_claim c;
	char *good = mint("approve", NOW + 60), *t;
	struct buf big = BUF_INIT;
	int i;

	ASSERT_EQ(answer_token_open(KEY, "", NOW, &c), ANSWER_MALFORMED);
	ASSERT_EQ(answer_token_open(KEY, "..", NOW, &c), ANSWER_MALFORMED);
	ASSERT_EQ(answer_token_open(KEY, "..%2f..%2fanswer.key", NOW, &c),
		  ANSWER_MALFORMED);
	ASSERT_EQ(answer_token_open(KEY, "abc", NOW, &c), ANSWER_MALFORMED);
	t = xasprintf("%s=", good); /* padding is not base64url here */
	ASSERT_EQ(answer_token_open(KEY, t, NOW, &c), ANSWER_MALFORMED);
	free(t);
	t = xasprintf("%s.x", good); /* a second dot */
	ASSERT_EQ(answer_token_open(KEY, t, NOW, &c), ANSWER_MALFORMED);
	free(t);
	for (i = 0; i < 100000; i++)
		buf_addch(&big, 'A');
	buf_adds(&big, strchr(good, '.'));
	ASSERT_EQ(answer_token_open(KEY, big.ptr, NOW, &c), ANSWER_MALFORMED);
	buf_release(&big);
	free(good);
}
