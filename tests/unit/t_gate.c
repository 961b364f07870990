/*
 * The registry of gate decisions (core/gate.h): each decision has one
 * spelling, its aliases mean it, and anything else is refused with the
 * list of what is accepted.
 */
#include "util/compat.h"

#include "core/gate.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"

static enum gate_decision
parse_ok(const char *word)
{
	enum gate_decision d = GATE_NR;
	struct err e = ERR_INIT;

	ASSERT_OK(gate_decision_parse(word, &d, &e), &e);
	return d;
}

TEST(canonical_spellings)
{
	/* the spellings the store has recorded and the tests expect */
	ASSERT_STREQ(gate_decision_name(GATE_APPROVE), "approve");
	ASSERT_STREQ(gate_decision_name(GATE_REJECT), "reject");
	ASSERT_STREQ(gate_decision_name(GATE_CHANGES), "request-changes");
	ASSERT_STREQ(gate_decision_name(GATE_REVISE), "revise");
	ASSERT_STREQ(gate_decision_name(GATE_DEFER), "defer");
}

TEST(each_name_and_alias_parses_to_its_decision)
{
	const struct gate_decision_def *def;
	const char *const *a;
	int i, aliases = 0;

	for (i = 0; i < GATE_NR; i++) {
		def = gate_decision_def(i);
		ASSERT_EQ(def->d, i);
		ASSERT(def->what && *def->what);
		ASSERT_EQ(parse_ok(def->name), i);
		for (a = def->aliases; *a; a++) {
			ASSERT_EQ(parse_ok(*a), i);
			aliases++;
		}
	}
	ASSERT_EQ(parse_ok("request_changes"), GATE_CHANGES);
	ASSERT(aliases >= 1);
}

TEST(no_spelling_means_two_decisions)
{
	const struct gate_decision_def *a, *b;
	const char *const *x, *const *y;
	int i, j;

	for (i = 0; i < GATE_NR; i++)
		for (j = 0; j < GATE_NR; j++) {
			a = gate_decision_def(i);
			b = gate_decision_def(j);
			if (i != j)
				ASSERT(strcmp(a->name, b->name));
			for (x = a->aliases; *x; x++) {
				ASSERT(strcmp(*x, b->name));
				for (y = b->aliases; i != j && *y; y++)
					ASSERT(strcmp(*x, *y));
			}
		}
}

TEST(other_words_are_refused_with_the_list)
{
	enum gate_decision d = GATE_DEFER;
	struct err e = ERR_INIT;
	struct buf list = BUF_INIT;

	gate_decision_list(&list);
	ASSERT_STREQ(list.ptr,
		     "approve, reject, request-changes, revise or defer");
	ASSERT_EQ(gate_decision_parse("approved", &d, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "'approved' is not a gate decision: approve, "
			    "reject, request-changes, revise or defer");
	ASSERT_EQ(gate_decision_parse("Approve", &d, &e), BATON_EINVAL);
	ASSERT_EQ(gate_decision_parse("", &d, &e), BATON_EINVAL);
	ASSERT_EQ(gate_decision_parse("request changes", &d, &e), BATON_EINVAL);
	ASSERT_EQ(gate_decision_parse(NULL, &d, &e), BATON_EINVAL);
	ASSERT_CONTAINS(e.msg, "no gate decision: approve, ");
	ASSERT_EQ(d, GATE_DEFER); /* untouched on failure */
	buf_release(&list);
}
