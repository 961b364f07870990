/*
 * The vocabulary of gate decisions: what a person can answer a run
 * waiting at a gate or question. One registry gives each decision its
 * one spelling, which the CLI (`baton approvals DECISION RUN`), the API
 * (`POST /api/v1/approvals/{id}` {"decision"}) and the WebSocket
 * command accept, and which the store records (the `decision` of the
 * transition out of waiting_for_approval). A few other spellings are
 * accepted as aliases everywhere and mean the canonical one; they are
 * listed in docs/cli.md and docs/api.md.
 */
#ifndef BATON_CORE_GATE_H
#define BATON_CORE_GATE_H

#include <stddef.h>

struct buf;
struct err;

enum gate_decision {
	GATE_APPROVE, /* enter the gated stage */
	GATE_REJECT,  /* end the run blocked */
	GATE_CHANGES, /* re-run the stage before the gate with guidance */
	GATE_REVISE,  /* feedback: plan again with the guidance */
	GATE_DEFER,   /* pause at the gate; resuming asks again */
};
/* How many decisions there are (not an enum value, so that a switch
 * over the decisions needs no case for it). */
#define GATE_NR (GATE_DEFER + 1)

struct gate_decision_def {
	enum gate_decision d;
	const char *name;	    /* the one spelling: "request-changes" */
	const char *const *aliases; /* NULL-terminated; accepted as name */
	const char *what;	    /* one line: what it does */
};

/* The canonical spelling of d ("approve"). Static. */
const char *gate_decision_name(enum gate_decision d);
/* The registry row of d. Static. */
const struct gate_decision_def *gate_decision_def(enum gate_decision d);
/*
 * Reads word, a canonical spelling or an alias, into *out. On anything
 * else BATON_EINVAL with "'WORD' is not a gate decision: approve,
 * reject, request-changes, revise or defer" in e (word NULL: "no gate
 * decision: ..."); *out is untouched.
 */
int gate_decision_parse(const char *word, enum gate_decision *out,
			struct err *e);
/* Appends the canonical spellings: "approve, reject, ... or defer". */
void gate_decision_list(struct buf *out);

#endif
