/*
 * The research quality gate (core/research.h) against openTiger's own
 * cases (../shared/conformance/opentiger/research-quality-gate-cases.json,
 * beside the source tree as in CI), read at run time so that they stay
 * data: each case under the file's thresholds, the profiles' table, and
 * the mapping from baton's records (evidence, challenges, report) to the
 * gate's input: domains, counter-evidence, citations.
 */
#include "util/compat.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>

#include "core/research.h"
#include "test.h"
#include "util/json.h"

static json_t *
cases(void)
{
	char rel[PATH_MAX], path[PATH_MAX];
	const char *f = __FILE__, *slash = strrchr(f, '/');
	json_error_t je;
	json_t *j;

	snprintf(rel, sizeof(rel),
		 "%.*s/../../../shared/conformance/opentiger/"
		 "research-quality-gate-cases.json",
		 slash ? (int)(slash - f) : 1, slash ? f : ".");
	if (!realpath(rel, path))
		test_fail(__FILE__, __LINE__, "no openTiger cases at '%s'",
			  rel);
	j = json_load_file(path, 0, &je);
	if (!j)
		test_fail(__FILE__, __LINE__, "%s:%d: %s", path, je.line,
			  je.text);
	return j;
}

/* The same ids in any order. */
static int
same_ids(const json_t *a, const json_t *b)
{
	size_t i, j;

	if (json_array_size(a) != json_array_size(b))
		return 0;
	for (i = 0; i < json_array_size(a); i++) {
		int found = 0;

		for (j = 0; j < json_array_size(b); j++)
			found |= json_equal(json_array_get(a, i),
					    json_array_get(b, j));
		if (!found)
			return 0;
	}
	return 1;
}

/* same_ids against a list written as JSON. */
static int
ids_are(const json_t *a, const char *want)
{
	json_t *w = json_loads(want, 0, NULL);
	int ok = same_ids(a, w);

	json_decref(w);
	return ok;
}

static void
check_case(const json_t *c, const struct research_quality *q)
{
	const json_t *x = json_object_get(c, "expect");
	const char *name = json_get_str(c, "name");
	json_t *g = research_quality_gate(json_object_get(c, "input"), q);
	size_t n = json_array_size(json_object_get(g, "reasons"));
	char *got = json_dumps(g, JSON_COMPACT);

	if (json_is_true(json_object_get(g, "pass")) !=
	    json_is_true(json_object_get(x, "pass")))
		test_fail(__FILE__, __LINE__, "case '%s': got %s", name, got);
	if (json_object_get(x, "reasons") &&
	    (json_int_t)n != json_integer_value(json_object_get(x, "reasons")))
		test_fail(__FILE__, __LINE__, "case '%s': reasons: got %s",
			  name, got);
	if (json_object_get(x, "reasons_min") &&
	    (json_int_t)n <
		json_integer_value(json_object_get(x, "reasons_min")))
		test_fail(__FILE__, __LINE__, "case '%s': reasons_min: got %s",
			  name, got);
	if (json_object_get(x, "insufficientClaimIds") &&
	    !same_ids(json_object_get(x, "insufficientClaimIds"),
		      json_object_get(g, "insufficient")))
		test_fail(__FILE__, __LINE__, "case '%s': insufficient: got %s",
			  name, got);
	if (json_object_get(x, "challengeClaimIds") &&
	    !same_ids(json_object_get(x, "challengeClaimIds"),
		      json_object_get(g, "challenge")))
		test_fail(__FILE__, __LINE__, "case '%s': challenge: got %s",
			  name, got);
	free(got);
	json_decref(g);
}

TEST(rqgate_every_case_of_opentiger)
{
	json_t *all = cases(), *t = json_object_get(all, "thresholds"), *c;
	struct research_quality q = { 0 };
	size_t i;

	q.profile = "thresholds";
	q.min_evidence =
	    (int)json_integer_value(json_object_get(t, "minEvidencePerClaim"));
	q.min_domains = (int)json_integer_value(
	    json_object_get(t, "minDistinctDomainsPerClaim"));
	q.require_counter =
	    json_is_true(json_object_get(t, "requireCounterEvidence"));
	q.min_report_confidence =
	    (int)json_integer_value(json_object_get(t, "minReportConfidence"));
	q.min_verifiable_ratio =
	    json_number_value(json_object_get(t, "minVerifiableRatio"));
	ASSERT(json_array_size(json_object_get(all, "cases")) >= 2);
	json_array_foreach(json_object_get(all, "cases"), i, c)
	    check_case(c, &q);
	json_decref(all);
}

/* The profiles agree with openTiger's strength profiles. */
TEST(rqgate_profiles_are_opentigers)
{
	json_t *all = cases(), *sp = json_object_get(all, "strength_profiles");
	json_t *t = json_object_get(all, "thresholds");
	struct research_quality q;
	const char *const *name;
	int n = 0;

	for (name = research_quality_profiles; *name; name++, n++) {
		json_t *p = json_object_get(sp, *name);

		ASSERT(p);
		ASSERT_EQ(research_quality_profile(*name, &q), 0);
		ASSERT_EQ(q.min_evidence,
			  (int)json_integer_value(
			      json_object_get(p, "minEvidencePerClaim")));
		ASSERT_EQ(q.min_domains,
			  (int)json_integer_value(json_object_get(
			      p, "minDistinctDomainsPerClaim")));
		ASSERT_EQ(q.require_counter, json_is_true(json_object_get(
						 p, "requireCounterEvidence")));
		ASSERT_EQ(q.min_report_confidence,
			  (int)json_integer_value(
			      json_object_get(t, "minReportConfidence")));
	}
	ASSERT_EQ(n, 4);
	ASSERT_EQ(research_quality_profile("extreme", &q), -1);
	ASSERT_EQ(research_quality_profile(NULL, &q), -1);
	json_decref(all);
}

/* Every case under every profile: the weak one fails each, the good one
 * passes the profiles it meets (low, mid, high; ultra wants 4 items). */
TEST(rqgate_cases_under_profiles)
{
	json_t *all = cases(), *c;
	static const char *const pass_under[] = { "low", "mid", "high", NULL };
	struct research_quality q;
	size_t i;
	const char *const *p;

	json_array_foreach(json_object_get(all, "cases"), i, c)
	{
		int want = json_is_true(
		    json_object_get(json_object_get(c, "expect"), "pass"));

		for (p = research_quality_profiles; *p; p++) {
			json_t *g;
			int ok = 0;
			const char *const *u;

			for (u = pass_under; *u; u++)
				ok |= !strcmp(*u, *p);
			research_quality_profile(*p, &q);
			g = research_quality_gate(json_object_get(c, "input"),
						  &q);
			ASSERT_EQ(json_is_true(json_object_get(g, "pass")),
				  want && ok);
			json_decref(g);
		}
	}
	json_decref(all);
}

TEST(rqgate_source_domains)
{
	char h[64];

	ASSERT_EQ(
	    research_source_domain("https://Example.ORG/a/b", h, sizeof(h)), 0);
	ASSERT_STREQ(h, "example.org");
	ASSERT_EQ(
	    research_source_domain("http://u:p@host.io:8080/x?y", h, sizeof(h)),
	    0);
	ASSERT_STREQ(h, "host.io");
	ASSERT_EQ(research_source_domain("docs/c1.md:12", h, sizeof(h)), -1);
	ASSERT_EQ(research_source_domain("ftp://x.org/", h, sizeof(h)), -1);
	ASSERT_EQ(research_source_domain("https:///nohost", h, sizeof(h)), -1);
	ASSERT_EQ(research_source_domain("https://bad host/", h, sizeof(h)),
		  -1);
	ASSERT_EQ(research_source_domain(NULL, h, sizeof(h)), -1);
}

/* baton's records mapped to the gate's input. */
TEST(rqgate_input_from_records)
{
	json_t *st = json_loads(
	    "{\"claims\": ["
	    " {\"id\": \"c1\", \"confidence\": 0.9, \"evidence\": ["
	    "  {\"source\": \"https://a.org/1\", \"supports\": true},"
	    "  {\"source\": \"https://a.org/2\", \"supports\": true},"
	    "  {\"source\": \"https://b.net/x\", \"supports\": false}]},"
	    " {\"id\": \"c12\", \"confidence\": 0.5, \"evidence\": ["
	    "  {\"source\": \"notes.txt\", \"supports\": true}]}]}",
	    0, NULL);
	json_t *chl = json_loads("{\"challenges\": [{\"claim\": \"c12\", "
				 "\"counter_evidence\": \"x\", "
				 "\"severity\": \"low\"}]}",
				 0, NULL);
	json_t *in, *p1, *p2, *g;
	struct research_quality q;

	/* "c1" inside "c12" or "c1x" is not a citation of c1 */
	in = research_quality_input(st, chl, "see c12 and c1x");
	p1 = json_array_get(json_object_get(in, "claimProgress"), 0);
	p2 = json_array_get(json_object_get(in, "claimProgress"), 1);
	ASSERT_EQ(json_integer_value(json_object_get(p1, "evidenceCount")), 3);
	ASSERT_EQ(
	    json_integer_value(json_object_get(p1, "distinctDomainCount")), 2);
	ASSERT_EQ(
	    json_integer_value(json_object_get(p1, "counterEvidenceCount")), 1);
	ASSERT_EQ(
	    json_integer_value(json_object_get(p2, "distinctDomainCount")), 0);
	ASSERT_EQ(
	    json_integer_value(json_object_get(p2, "counterEvidenceCount")), 1);
	ASSERT(!json_is_true(json_object_get(
	    json_array_get(json_object_get(in, "claimCitationCoverage"), 0),
	    "hasCitation")));
	ASSERT(json_is_true(json_object_get(
	    json_array_get(json_object_get(in, "claimCitationCoverage"), 1),
	    "hasCitation")));
	ASSERT(json_number_value(
		   json_object_get(in, "latestReportConfidence")) > 69.9 &&
	       json_number_value(
		   json_object_get(in, "latestReportConfidence")) < 70.1);
	research_quality_profile("low", &q);
	g = research_quality_gate(in, &q);
	ASSERT(!json_is_true(json_object_get(g, "pass")));
	/* c12 has no domain, c1 is not cited */
	ASSERT(
	    ids_are(json_object_get(g, "insufficient"), "[\"c12\", \"c1\"]"));
	json_decref(g);
	json_decref(in);

	/* quoting a source cites the claim too */
	in = research_quality_input(st, chl, "[1] https://b.net/x (c12)");
	g = research_quality_gate(in, &q);
	ASSERT(ids_are(json_object_get(g, "insufficient"), "[\"c12\"]"));
	json_decref(g);
	json_decref(in);
	json_decref(st);
	json_decref(chl);
}
