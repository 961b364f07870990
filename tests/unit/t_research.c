/*
 * The research pipeline's records and state (core/research.h): claim ids,
 * the claims, evidence, challenge and judgement contracts, and the
 * claims' life from pending through a rework to their verdicts.
 *
 * JSON in these tests is written with single quotes (doc() turns them
 * into double quotes) so that it stays readable.
 */
#include "util/compat.h"

#include "core/research.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"

/* Parses text with ' for ", failing the test when it is not JSON. */
static json_t *
doc(const char *text)
{
	char *s = strdup(text), *p;
	json_error_t jerr;
	json_t *v;

	for (p = s; *p; p++)
		if (*p == '\'')
			*p = '"';
	v = json_loads(s, JSON_DECODE_ANY, &jerr);
	if (!v)
		test_fail(__FILE__, __LINE__, "bad test JSON at %d:%d: %s: %s",
			  jerr.line, jerr.column, jerr.text, s);
	free(s);
	return v;
}

/* The error research_claims_check gives for text ("" when it passes). */
static const char *
claims_error(const char *text, size_t max)
{
	static struct err e;
	json_t *d = doc(text);

	e = (struct err)ERR_INIT;
	if (research_claims_check("claims.json", d, max, &e) == 0)
		e.msg[0] = '\0';
	else
		ASSERT_EQ(e.rc, BATON_ECONTRACT);
	json_decref(d);
	return e.msg;
}

/* A state of three pending claims. */
static json_t *
three(void)
{
	json_t *c = doc("{'claims': [{'id': 'c1', 'text': 'one'},"
			" {'id': 'c2', 'text': 'two'},"
			" {'id': 'c3', 'text': 'three'}]}");
	json_t *st = research_state_new("why?", c);

	json_decref(c);
	return st;
}

TEST(research_ids)
{
	ASSERT(research_id_ok("c1"));
	ASSERT(research_id_ok("wal-mode-2"));
	ASSERT(research_id_ok("abcdefghijklmnopqrstuvwxyz012345"));
	ASSERT(!research_id_ok("abcdefghijklmnopqrstuvwxyz0123456"));
	ASSERT(!research_id_ok(""));
	ASSERT(!research_id_ok(NULL));
	ASSERT(!research_id_ok("C1"));
	ASSERT(!research_id_ok("c 1"));
	ASSERT(!research_id_ok("c_1"));
	ASSERT(!research_id_ok("../x"));
}

TEST(research_claims_contract)
{
	ASSERT_STREQ(claims_error("{'claims': [{'id': 'c1', 'text': 'x'}]}", 0),
		     "");
	ASSERT_STREQ(claims_error("{'claims': []}", 0),
		     "claims.json: claims: expected 1 to 12 claims, got an "
		     "empty list");
	ASSERT_STREQ(claims_error("{'claims': [{'id': 'a', 'text': 'x'},"
				  " {'id': 'b', 'text': 'x'},"
				  " {'id': 'c', 'text': 'x'}]}",
				  2),
		     "claims.json: claims: expected 1 to 2 claims, got 3");
	ASSERT_STREQ(claims_error("{'claim': []}", 0),
		     "claims.json: claims: expected a list, got nothing");
	ASSERT_STREQ(claims_error("[1]", 0),
		     "claims.json: the document: expected a JSON object, got "
		     "a list");
	ASSERT_STREQ(
	    claims_error("{'claims': [{'id': 'Claim 2', 'text': 'x'}]}", 0),
	    "claims.json: claims[0].id: expected an id of 1 to 32 "
	    "characters a-z, 0-9 or '-', got 'Claim 2'");
	ASSERT_STREQ(claims_error("{'claims': [{'id': 'c1', 'text': ''}]}", 0),
		     "claims.json: claims[0].text: expected a non-empty "
		     "string, got ''");
	ASSERT_STREQ(claims_error("{'claims': [{'id': 'c1', 'text': 'a'},"
				  " {'id': 'c1', 'text': 'b'}]}",
				  0),
		     "claims.json: claims[1].id: 'c1' is already the id of "
		     "claims[0]");
	ASSERT_STREQ(claims_error("{'claims': ['c1']}", 0),
		     "claims.json: claims[0]: expected an object, got 'c1'");
}

/* The error research_evidence_check gives for text ("" when it passes). */
static const char *
evidence_error(const char *text, const char *claim)
{
	static struct err e;
	json_t *d = doc(text);

	e = (struct err)ERR_INIT;
	if (research_evidence_check("evidence/c1-v1.json", d, claim, &e) == 0)
		e.msg[0] = '\0';
	json_decref(d);
	return e.msg;
}

TEST(research_evidence_contract)
{
	const char *ok = "{'claim': 'c1', 'verdict': 'supported',"
			 " 'confidence': 0.75, 'evidence': [{'source': 'a.md',"
			 " 'quote': 'q', 'supports': true}]}";

	ASSERT_STREQ(evidence_error(ok, "c1"), "");
	ASSERT_STREQ(evidence_error(ok, NULL), "");
	ASSERT_STREQ(evidence_error(ok, "c2"),
		     "evidence/c1-v1.json: claim: expected 'c2' (the claim "
		     "this evidence is for), got 'c1'");
	ASSERT_STREQ(evidence_error("{'claim': 'c1', 'verdict': 'true',"
				    " 'confidence': 1, 'evidence': []}",
				    "c1"),
		     "evidence/c1-v1.json: verdict: expected supported, "
		     "refuted or uncertain, got 'true'");
	ASSERT_STREQ(evidence_error("{'claim': 'c1', 'verdict': 'refuted',"
				    " 'confidence': 1.5, 'evidence': []}",
				    "c1"),
		     "evidence/c1-v1.json: confidence: expected a number from "
		     "0 to 1, got 1.5");
	ASSERT_STREQ(evidence_error("{'claim': 'c1', 'verdict': 'refuted',"
				    " 'confidence': 'high', 'evidence': []}",
				    "c1"),
		     "evidence/c1-v1.json: confidence: expected a number from "
		     "0 to 1, got 'high'");
	ASSERT_STREQ(evidence_error("{'claim': 'c1', 'verdict': 'uncertain',"
				    " 'confidence': 0, 'evidence': []}",
				    "c1"),
		     "evidence/c1-v1.json: evidence: expected at least one "
		     "evidence item, got an empty list");
	ASSERT_STREQ(evidence_error("{'claim': 'c1', 'verdict': 'uncertain',"
				    " 'confidence': 0, 'evidence': [{'source':"
				    " '', 'quote': 'q', 'supports': true}]}",
				    "c1"),
		     "evidence/c1-v1.json: evidence[0].source: expected a "
		     "non-empty string, got ''");
	ASSERT_STREQ(evidence_error("{'claim': 'c1', 'verdict': 'uncertain',"
				    " 'confidence': 0, 'evidence': [{'source':"
				    " 's', 'quote': 'q', 'supports': 'yes'}]}",
				    "c1"),
		     "evidence/c1-v1.json: evidence[0].supports: expected true "
		     "or false, got 'yes'");
	ASSERT_STREQ(evidence_error("{'verdict': 'supported'}", "c1"),
		     "evidence/c1-v1.json: evidence: expected a list, got "
		     "nothing");
}

TEST(research_challenge_contract)
{
	json_t *st = three();
	json_t *ok = doc("{'challenges': [{'claim': 'c2', 'counter_evidence':"
			 " 'x', 'severity': 'high'}]}");
	json_t *empty = doc("{'challenges': []}");
	json_t *unknown = doc("{'challenges': [{'claim': 'c9',"
			      " 'counter_evidence': 'x', 'severity': 'low'}]}");
	json_t *sev = doc("{'challenges': [{'claim': 'c1',"
			  " 'counter_evidence': 'x', 'severity': 'fatal'}]}");
	struct err e = ERR_INIT;

	ASSERT_OK(research_challenge_check("challenge.json", ok, st, &e), &e);
	ASSERT_OK(research_challenge_check("challenge.json", empty, st, &e),
		  &e);
	ASSERT_EQ(research_challenge_check("challenge.json", unknown, st, &e),
		  BATON_ECONTRACT);
	ASSERT_STREQ(e.msg, "challenge.json: challenges[0].claim: 'c9' is not "
			    "one of the claims");
	ASSERT_EQ(research_challenge_check("challenge.json", sev, st, &e),
		  BATON_ECONTRACT);
	ASSERT_STREQ(e.msg, "challenge.json: challenges[0].severity: expected "
			    "low, medium or high, got 'fatal'");
	json_decref(ok);
	json_decref(empty);
	json_decref(unknown);
	json_decref(sev);
	json_decref(st);
}

/* The error research_judgement_check gives for text ("" when it passes). */
static const char *
judgement_error(const char *text)
{
	static struct err e;
	json_t *st = three(), *d = doc(text);

	e = (struct err)ERR_INIT;
	if (research_judgement_check("judgement-v1.json", d, st, &e) == 0)
		e.msg[0] = '\0';
	json_decref(d);
	json_decref(st);
	return e.msg;
}

TEST(research_judgement_contract)
{
	ASSERT_STREQ(judgement_error("{'verdict': 'pass', 'reasons': 'ok'}"),
		     "");
	ASSERT_STREQ(judgement_error("{'verdict': 'pass', 'weak_claims': []}"),
		     "");
	ASSERT_STREQ(judgement_error("{'verdict': 'rework', 'weak_claims':"
				     " ['c2', 'c3'], 'reasons': 'thin'}"),
		     "");
	ASSERT_STREQ(judgement_error("{'verdict': 'maybe'}"),
		     "judgement-v1.json: verdict: expected pass or rework, got "
		     "'maybe'");
	ASSERT_STREQ(
	    judgement_error("{'verdict': 'rework', 'weak_claims': []}"),
	    "judgement-v1.json: weak_claims: a rework must name at "
	    "least one weak claim");
	ASSERT_STREQ(judgement_error("{'verdict': 'rework'}"),
		     "judgement-v1.json: weak_claims: expected a list of claim "
		     "ids, got nothing");
	ASSERT_STREQ(judgement_error("{'verdict': 'rework', 'weak_claims':"
				     " ['c2', 'c7']}"),
		     "judgement-v1.json: weak_claims[1]: 'c7' is not one of "
		     "the claims");
	ASSERT_STREQ(
	    judgement_error("{'verdict': 'rework', 'weak_claims': [2]}"),
	    "judgement-v1.json: weak_claims[0]: expected a claim id, "
	    "got 2");
}

/* Evidence for id with verdict v. */
static json_t *
evidence(const char *id, const char *v)
{
	return json_pack("{s:s, s:s, s:f, s:[{s:s, s:s, s:b}]}", "claim", id,
			 "verdict", v, "confidence", 0.5, "evidence", "source",
			 "a.md", "quote", "q", "supports", 1);
}

TEST(research_claims_life)
{
	json_t *st = three(), *ev, *j;
	char *weak;
	size_t i;

	ASSERT_STREQ(json_get_str(st, "question"), "why?");
	ASSERT_EQ(json_integer_value(json_object_get(st, "round")), 1);
	ASSERT_EQ(research_begin_round(st), 1);
	for (i = 0; i < 3; i++) {
		json_t *c = json_array_get(json_object_get(st, "claims"), i);

		ASSERT_STREQ(json_get_str(c, "status"), "pending");
		ASSERT(research_claim_wants_evidence(c));
	}
	ASSERT(research_claim(st, "c2"));
	ASSERT(!research_claim(st, "c4"));

	/* round 1: all collected */
	ev = evidence("c1", "supported");
	research_claim_collected(research_claim(st, "c1"), ev,
				 "evidence/c1-v1.json", 1);
	json_decref(ev);
	ev = evidence("c2", "refuted");
	research_claim_collected(research_claim(st, "c2"), ev,
				 "evidence/c2-v1.json", 1);
	json_decref(ev);
	ev = evidence("c3", "uncertain");
	research_claim_collected(research_claim(st, "c3"), ev,
				 "evidence/c3-v1.json", 1);
	json_decref(ev);
	ASSERT_STREQ(json_get_str(research_claim(st, "c2"), "status"),
		     "collected");
	ASSERT_STREQ(json_get_str(research_claim(st, "c2"), "file"),
		     "evidence/c2-v1.json");
	ASSERT_EQ(json_array_size(
		      json_object_get(research_claim(st, "c2"), "evidence")),
		  1);
	ASSERT(!research_claim_wants_evidence(research_claim(st, "c1")));

	/* the judge reworks c2 and c3: only they want evidence again */
	j = doc("{'verdict': 'rework', 'weak_claims': ['c2', 'c3'],"
		" 'reasons': 'thin'}");
	ASSERT_EQ(research_judge(st, j, "judgement-v1.json"), 2);
	json_decref(j);
	ASSERT_EQ(json_integer_value(json_object_get(st, "round")), 1);
	/* the next collect begins round 2, once (a re-run stays at 2) */
	ASSERT_EQ(research_begin_round(st), 2);
	ASSERT_EQ(research_begin_round(st), 2);
	ASSERT_EQ(json_integer_value(json_object_get(st, "round")), 2);
	ASSERT(!research_claim_wants_evidence(research_claim(st, "c1")));
	ASSERT(research_claim_wants_evidence(research_claim(st, "c2")));
	ASSERT_STREQ(json_get_str(research_claim(st, "c3"), "status"), "weak");
	weak = research_weak_list(st);
	ASSERT_STREQ(weak, "c2, c3");
	free(weak);

	/* round 2, then a pass settles every claim at its verdict */
	ev = evidence("c2", "supported");
	research_claim_collected(research_claim(st, "c2"), ev,
				 "evidence/c2-v2.json", 2);
	json_decref(ev);
	ev = evidence("c3", "supported");
	research_claim_collected(research_claim(st, "c3"), ev,
				 "evidence/c3-v2.json", 2);
	json_decref(ev);
	ASSERT_EQ(json_integer_value(
		      json_object_get(research_claim(st, "c2"), "rounds")),
		  2);
	j = doc("{'verdict': 'pass', 'reasons': 'holds'}");
	ASSERT_EQ(research_judge(st, j, "judgement-v2.json"), 0);
	json_decref(j);
	ASSERT_EQ(json_integer_value(json_object_get(st, "round")), 2);
	ASSERT_STREQ(json_get_str(research_claim(st, "c1"), "status"),
		     "supported");
	ASSERT_STREQ(json_get_str(research_claim(st, "c2"), "status"),
		     "supported");
	ASSERT_STREQ(json_get_str(json_object_get(st, "judgement"), "verdict"),
		     "pass");
	ASSERT_STREQ(json_get_str(json_object_get(st, "judgement"), "file"),
		     "judgement-v2.json");
	json_decref(st);
}

TEST(research_summary_lines)
{
	json_t *st = three(), *ev = evidence("c1", "supported");
	json_t *j = doc("{'verdict': 'rework', 'weak_claims': ['c2'],"
			" 'reasons': 'c2 lacks a source'}");
	json_t *long_claim = doc("{'claims': [{'id': 'c1', 'text': 'a very"
				 " long claim text that goes on and on'}]}");
	json_t *st2 = research_state_new("q", long_claim);
	struct buf out = BUF_INIT;

	research_claim_collected(research_claim(st, "c1"), ev,
				 "evidence/c1-v1.json", 1);
	research_judge(st, j, "judgement-v1.json");
	research_summary(st, 300, &out);
	ASSERT_CONTAINS(out.ptr, "- c1 [collected, supported, confidence "
				 "0.50, 1 evidence]: one\n");
	ASSERT_CONTAINS(out.ptr, "- c2 [weak]: two\n");
	ASSERT_CONTAINS(out.ptr, "- c3 [pending]: three\n");
	ASSERT_CONTAINS(out.ptr, "The judge on round 1: rework. c2 lacks a "
				 "source");

	/* each line is cut to its budget */
	buf_reset(&out);
	research_summary(st2, 30, &out);
	ASSERT_STREQ(out.ptr, "- c1 [pending]: a very long c...\n");

	/* nothing for a state without claims */
	buf_reset(&out);
	research_summary(NULL, 30, &out);
	ASSERT_STREQ(out.ptr, "");
	buf_release(&out);
	json_decref(ev);
	json_decref(j);
	json_decref(long_claim);
	json_decref(st);
	json_decref(st2);
}
