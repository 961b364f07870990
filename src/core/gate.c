/*
 * The registry of gate decisions: see gate.h. The order of the table is
 * the order of enum gate_decision and of every list shown to a person.
 */
#include "util/compat.h"

#include "core/gate.h"
#include "util/buf.h"
#include "util/err.h"

static const char *const changes_aliases[] = { "request_changes", NULL };
static const char *const none[] = { NULL };

static const struct gate_decision_def decisions[GATE_NR] = {
	[GATE_APPROVE] = { GATE_APPROVE, "approve", none,
			   "enter the gated stage (with guidance: the answer "
			   "to the run's question)" },
	[GATE_REJECT] = { GATE_REJECT, "reject", none, "end the run blocked" },
	[GATE_CHANGES] = { GATE_CHANGES, "request-changes", changes_aliases,
			   "re-run the stage before the gate with guidance" },
	[GATE_REVISE] = { GATE_REVISE, "revise", none,
			  "plan again with guidance (an assist run's "
			  "feedback or plan gate)" },
	[GATE_DEFER] = { GATE_DEFER, "defer", none,
			 "pause the run at its gate; resume asks again" },
};

const struct gate_decision_def *
gate_decision_def(enum gate_decision d)
{
	if ((unsigned)d >= GATE_NR)
		BUG("gate decision %d", (int)d);
	return &decisions[d];
}

const char *
gate_decision_name(enum gate_decision d)
{
	return gate_decision_def(d)->name;
}

void
gate_decision_list(struct buf *out)
{
	int i;

	for (i = 0; i < GATE_NR; i++) {
		if (i)
			buf_adds(out, i == GATE_NR - 1 ? " or " : ", ");
		buf_adds(out, decisions[i].name);
	}
}

int
gate_decision_parse(const char *word, enum gate_decision *out, struct err *e)
{
	struct buf list = BUF_INIT;
	const char *const *a;
	int i, rc;

	for (i = 0; word && i < GATE_NR; i++) {
		if (!strcmp(word, decisions[i].name)) {
			*out = decisions[i].d;
			return 0;
		}
		for (a = decisions[i].aliases; *a; a++)
			if (!strcmp(word, *a)) {
				*out = decisions[i].d;
				return 0;
			}
	}
	gate_decision_list(&list);
	if (word)
		rc = err_set(e, BATON_EINVAL, "'%s' is not a gate decision: %s",
			     word, list.ptr);
	else
		rc = err_set(e, BATON_EINVAL, "no gate decision: %s", list.ptr);
	buf_release(&list);
	return rc;
}
