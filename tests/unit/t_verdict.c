/*
 * Verdict contracts: review.json / verification.json and the DECISION: /
 * VERIFICATION: line fallback.
 */
#include "util/compat.h"

#include "core/verdict.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"

static int
parse(enum verdict_kind k, const char *text, struct err *e)
{
	struct verdict v = { 0 };
	int rc = verdict_parse_json(k, "review.json", text, &v, e);

	verdict_release(&v);
	return rc;
}

TEST(review_json_accepted)
{
	struct verdict v = { 0 };
	struct err e = ERR_INIT;
	struct buf md = BUF_INIT;

	ASSERT_OK(verdict_parse_json(
			  VERDICT_REVIEW, "review.json",
			  "{\"decision\": \"CHANGES_REQUESTED\", \"summary\": "
			  "\"two things\", \"findings\": [{\"severity\": "
			  "\"high\", \"file\": \"a.c\", \"line\": 3, "
			  "\"message\": \"off by one\"}]}",
			  &v, &e),
		  &e);
	ASSERT_STREQ(v.decision, "CHANGES_REQUESTED");
	ASSERT_STREQ(v.summary, "two things");
	verdict_markdown(&v, "Review", &md);
	ASSERT_CONTAINS(md.ptr, "**CHANGES_REQUESTED**");
	ASSERT_CONTAINS(md.ptr, "- [high] a.c:3: off by one");
	buf_release(&md);
	verdict_release(&v);
}

TEST(contract_breaches_say_what_is_wrong)
{
	struct err e = ERR_INIT;

	ASSERT_EQ(parse(VERDICT_REVIEW, "{\"decision\": ", &e),
		  BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "review.json is not valid JSON: line 1");
	ASSERT_EQ(parse(VERDICT_REVIEW, "[1, 2]", &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "must be a JSON object");
	ASSERT_EQ(parse(VERDICT_REVIEW, "{\"decision\": \"LGTM\"}", &e),
		  BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "must be one of APPROVED, CHANGES_REQUESTED or "
			       "BLOCKED, got LGTM");
	ASSERT_EQ(parse(VERDICT_REVIEW, "{}", &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "got nothing");
	ASSERT_EQ(parse(VERDICT_REVIEW,
			"{\"decision\": \"APPROVED\", \"summary\": 3}", &e),
		  BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "\"summary\" must be a string");
	ASSERT_EQ(parse(VERDICT_REVIEW,
			"{\"decision\": \"APPROVED\", \"findings\": {}}", &e),
		  BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "\"findings\" must be a list");
	ASSERT_EQ(parse(VERDICT_REVIEW,
			"{\"decision\": \"APPROVED\", \"findings\": [1]}", &e),
		  BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "findings[0] must be an object");
	/* A review decision is not a verification decision. */
	ASSERT_EQ(parse(VERDICT_VERIFY, "{\"decision\": \"APPROVED\"}", &e),
		  BATON_ECONTRACT);
	ASSERT_OK(parse(VERDICT_VERIFY, "{\"decision\": \"NEEDS_HUMAN\"}", &e),
		  &e);
}

TEST(decision_line_last_one_wins)
{
	char *v;

	v = verdict_line(VERDICT_REVIEW,
			 "thinking...\nDECISION: CHANGES_REQUESTED\n"
			 "on second thought\n**Decision:** approved\n");
	ASSERT_STREQ(v, "APPROVED");
	free(v);
	v = verdict_line(VERDICT_VERIFY, "  ## VERIFICATION: `passed`");
	ASSERT_STREQ(v, "PASSED");
	free(v);
	ASSERT(!verdict_line(VERDICT_REVIEW, "no verdict here\nDECISIONS: x"));
	ASSERT(!verdict_line(VERDICT_VERIFY, "DECISION: APPROVED"));
	v = verdict_line(VERDICT_REVIEW, "DECISION: maybe later");
	ASSERT_STREQ(v, "MAYBE");
	ASSERT(!verdict_is_decision(VERDICT_REVIEW, v));
	free(v);
}
