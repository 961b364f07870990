/*
 * The loop's receipts (Craik seed 004): one "receipt" event per act,
 * observation and stop, hash-chained so that a receipt changed, removed
 * or moved after it was written is caught. A receipt is a JSON object:
 *
 *   n              1, 2, ... per run, no gaps
 *   run            the id of the run it belongs to
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
 * so the hash does not depend on the order keys were added in. The hash
 * covers "run", and the verifier requires it to be the run whose chain
 * it walks: a chain copied into another run fails at its first receipt,
 * and rewriting "run" breaks the hash. Receipts written before "run"
 * existed (baton of 2026-11-22 to 24) fail the same way, as "does not
 * name its run": such a chain cannot be told from a copy, so it is not
 * reported intact.
 *
 * The chain is anchored in the run's record: progress.loop keeps
 * "receipts" (how many, an integer >= 0) and "head" (the hash of the
 * last, RECEIPT_GENESIS while there are none), written in the same run
 * write as each receipt, so that removing the last receipts is caught
 * too (receipt_chain_end). Both are required of every loop run: the
 * engine writes 0 and RECEIPT_GENESIS with the run's first loop record,
 * so a loop run without them, or with them null, negative, not an
 * integer or not 64 lowercase hex digits, has had its record changed
 * (receipt_anchor_read). "acted" (the last iteration whose act left its
 * receipt) bounds the count from below: every act writes its receipt in
 * the write that records it done, so a run that has acted has receipts.
 *
 *   GENESIS <-prev- #1 <-prev- #2 <-prev- #3 = head (progress.loop.head)
 *
 * What this does not stop: anyone who can write the store can recompute
 * a whole chain and its anchor, since no secret is involved. The chain
 * makes a change to the record need that, and says where a partial one
 * was made.
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
	const char *run; /* the run walked, borrowed */
	int n;		 /* receipts verified so far */
	char head[65];	 /* the hash of the last, RECEIPT_GENESIS at first */
};

/* An empty chain of run (borrowed for c's life): n = 0, head =
 * RECEIPT_GENESIS. */
void receipt_chain_init(struct receipt_chain *c, const char *run);

/*
 * Verifies the next receipt r (NULL allowed: it is not an object), read
 * from event seq, against the chain so far: r is an object, its n is
 * c->n + 1, its run is c->run, its prev is c->head and its hash is that
 * of its content. Returns 0 and advances c (n and head), or BATON_EINVAL
 * with e naming the receipt and what is wrong, leaving c alone:
 *
 *   receipt 3 (event 41) is numbered 5: receipts 3 and 4 are missing or
 *   out of order
 *   receipt 1 (event 41) belongs to run 'r2-a', not 'r3-b': it was
 *   copied from another run
 *   receipt 3 (event 41): its prev does not match receipt 2's hash: a
 *   receipt before it was changed or removed
 *   receipt 3 (event 41) was changed after it was written: its content
 *   does not match its hash
 */
int receipt_chain_next(struct receipt_chain *c, const json_t *r, int64_t seq,
		       struct err *e);

/* What a run recorded about its chain (progress.loop), see above. */
struct receipt_anchor {
	int n;	       /* "receipts" */
	char head[65]; /* "head" */
	int acted;     /* "acted", 0 when absent */
};

/*
 * Reads the anchor from loop, a run's progress.loop (NULL or not an
 * object allowed: it has none). Returns 0 and fills *out, or
 * BATON_EINVAL with e saying what is wrong ("the run's record has no
 * receipt count (progress.loop.receipts): ..."): the count missing,
 * null, not an integer, negative or past INT32_MAX; the head missing,
 * not a string or not 64 lowercase hex digits; a count of 0 with a head
 * other than RECEIPT_GENESIS; fewer receipts than acts.
 */
int receipt_anchor_read(const json_t *loop, struct receipt_anchor *out,
			struct err *e);

/*
 * Checks the end of a walked chain against the anchor the run recorded:
 * the chain must hold a->n receipts and end at a->head. Returns 0, or
 * BATON_EINVAL with e saying what differs ("the run recorded 4 receipts
 * but 3 remain: receipt 4 was removed").
 */
int receipt_chain_end(const struct receipt_chain *c,
		      const struct receipt_anchor *a, struct err *e);

#endif
