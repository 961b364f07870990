/*
 * The loop's receipts (Craik seed 004): one "receipt" event per act,
 * observation and stop, hash-chained so that a receipt changed, removed
 * or moved after it was written is caught. A receipt is a JSON object:
 *
 *   n              1, 2, ... per run, no gaps
 *   iteration      the loop iteration (1-based)
 *   phase          "act" | "observe" | "stop"
 *   asked          {"step": S, "effects": [{"kind": K, "target": S}]}
 *   decision       "granted" | "denied" | "stopped" | "violation"
 *   grants         one per asked effect: {"kind", "target", "decision",
 *                  "by": what granted it or null}
 *   reason         why it was denied or stopped, or null
 *   output_digest  "sha256:<hex>" of a granted act's output, or null
 *   prev           the previous receipt's hash; RECEIPT_GENESIS first
 *   hash           sha256 hex of prev + "\n" + canonical(the receipt
 *                  without "hash")
 *
 *   canonical(x) = json_dumps(x, JSON_COMPACT | JSON_SORT_KEYS |
 *                                JSON_ENSURE_ASCII)
 *
 * so the hash does not depend on the order keys were added in. The run's
 * progress keeps "loop": {"receipts": N, "head": hash of receipt N}, so
 * that removing the last receipt is caught too (receipt_chain_end).
 *
 *   GENESIS <-prev- #1 <-prev- #2 <-prev- #3 = head (progress.loop.head)
 *
 * Pure: the caller reads the events and the run.
 */
#ifndef BATON_CORE_RECEIPT_H
#define BATON_CORE_RECEIPT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct err;

/* The prev of the first receipt: 64 zeros. */
#define RECEIPT_GENESIS                                                        \
	"0000000000000000000000000000000000000000000000000000000000000000"

/* The lowercase hex sha256 of the len bytes at data, NUL-terminated. */
void receipt_sha256_hex(const void *data, size_t len, char out[65]);

/*
 * Seals r, a receipt object: sets "prev" to prev_hex and "hash" to the
 * hash above, replacing any "hash" and "prev" r had. Every other member
 * is covered by the hash, so set them all first. r stays the caller's.
 */
void receipt_seal(json_t *r, const char *prev_hex);

/*
 * The state of a verification walking a run's receipts in order:
 * receipt_chain_init, then receipt_chain_next for each receipt, then
 * receipt_chain_end.
 */
struct receipt_chain {
	int n;	       /* receipts verified so far */
	char head[65]; /* the hash of the last, RECEIPT_GENESIS at first */
};

/* An empty chain: n = 0, head = RECEIPT_GENESIS. */
#define RECEIPT_CHAIN_INIT { 0, RECEIPT_GENESIS }
void receipt_chain_init(struct receipt_chain *c);

/*
 * Verifies the next receipt r (NULL allowed: it is not an object), read
 * from event seq, against the chain so far: r is an object, its n is
 * c->n + 1, its prev is c->head and its hash is that of its content.
 * Returns 0 and advances c (n and head), or BATON_EINVAL with e naming
 * the receipt and what is wrong, leaving c alone:
 *
 *   receipt 3 (event 41) is numbered 5: receipts 3 and 4 are missing or
 *   out of order
 *   receipt 3 (event 41): its prev does not match receipt 2's hash: a
 *   receipt before it was changed or removed
 *   receipt 3 (event 41) was changed after it was written: its content
 *   does not match its hash
 */
int receipt_chain_next(struct receipt_chain *c, const json_t *r, int64_t seq,
		       struct err *e);

/*
 * Checks the end of a walked chain against what the run recorded: when
 * want_n >= 0, the chain must hold want_n receipts and, when want_head is
 * not NULL, end at want_head. want_n < 0 (a run that recorded nothing)
 * checks nothing. Returns 0, or BATON_EINVAL with e saying what differs
 * ("the run recorded 4 receipts but 3 remain: receipt 4 was removed").
 */
int receipt_chain_end(const struct receipt_chain *c, int want_n,
		      const char *want_head, struct err *e);

#endif
