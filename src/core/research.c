/*
 * The research pipeline's records and state (core/research.h): contract
 * checks for what its agents leave, and the claims' life between them.
 * Pure: no I/O.
 */
#include "util/compat.h"

#include "core/research.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/xalloc.h"

/* How much of a wrong value an error message quotes. */
#define QUOTE_MAX 60

static const char *const verdicts[] = { "supported", "refuted", "uncertain",
					NULL };
static const char *const severities[] = { "low", "medium", "high", NULL };

/* Appends at most max bytes of s (one line), ending "..." when cut. */
static void
add_cut(struct buf *out, const char *s, size_t max)
{
	size_t len = strlen(s), start = out->len, i;

	buf_add_cut(out, s, len, max);
	for (i = start; i < out->len; i++)
		if (out->ptr[i] == '\n' || out->ptr[i] == '\r')
			out->ptr[i] = ' ';
}

/*
 * "FILE: PATH: expected WANT, got GOT" as BATON_ECONTRACT; path is a
 * printf format for the field's path.
 */
static int __attribute__((format(printf, 5, 6)))
breach(struct err *e, const char *file, const char *want, const json_t *v,
       const char *path, ...)
{
	struct buf p = BUF_INIT, got = BUF_INIT;
	va_list ap;
	int rc;

	va_start(ap, path);
	buf_vaddf(&p, path, ap);
	va_end(ap);
	json_describe(v, QUOTE_MAX, &got);
	rc = err_set(e, BATON_ECONTRACT, "%s: %s: expected %s, got %s", file,
		     p.ptr, want, got.ptr);
	buf_release(&p);
	buf_release(&got);
	return rc;
}

static int
is_one_of(const char *const *values, const char *s)
{
	for (; s && *values; values++)
		if (!strcmp(*values, s))
			return 1;
	return 0;
}

/* A non-empty string member, or NULL. */
static const char *
text_of(const json_t *o, const char *key)
{
	const char *s = json_get_str(o, key);

	return s && *s ? s : NULL;
}

int
research_id_ok(const char *id)
{
	size_t n = 0;

	if (!id)
		return 0;
	for (; id[n]; n++)
		if (!((id[n] >= 'a' && id[n] <= 'z') ||
		      (id[n] >= '0' && id[n] <= '9') || id[n] == '-'))
			return 0;
	return n >= 1 && n <= RESEARCH_ID_MAX;
}

/* The top-level object and its list under key: 0 or a breach. */
static int
top_list(const char *file, json_t *doc, const char *key, json_t **out,
	 struct err *e)
{
	json_t *l;

	if (!json_is_object(doc))
		return breach(e, file, "a JSON object", doc, "the document");
	l = json_object_get(doc, key);
	if (!json_is_array(l))
		return breach(e, file, "a list", l, "%s", key);
	*out = l;
	return 0;
}

int
research_claims_check(const char *file, json_t *doc, size_t max, struct err *e)
{
	json_t *list = NULL, *c;
	size_t i, j, n;
	char want[64];
	int rc;

	if (!max)
		max = RESEARCH_MAX_CLAIMS;
	rc = top_list(file, doc, "claims", &list, e);
	if (rc)
		return rc;
	n = json_array_size(list);
	if (n < 1 || n > max) {
		snprintf(want, sizeof(want), "1 to %zu claims", max);
		if (!n)
			return breach(e, file, want, list, "claims");
		return err_set(e, BATON_ECONTRACT,
			       "%s: claims: expected %s, got %zu", file, want,
			       n);
	}
	for (i = 0; i < json_array_size(list); i++) {
		const char *id;

		c = json_array_get(list, i);
		id = json_get_str(c, "id");
		if (!json_is_object(c))
			return breach(e, file, "an object", c, "claims[%zu]",
				      i);
		if (!research_id_ok(id))
			return breach(e, file,
				      "an id of 1 to 32 characters a-z, 0-9 "
				      "or '-'",
				      json_object_get(c, "id"),
				      "claims[%zu].id", i);
		if (!text_of(c, "text"))
			return breach(e, file, "a non-empty string",
				      json_object_get(c, "text"),
				      "claims[%zu].text", i);
		for (j = 0; j < i; j++)
			if (!strcmp(id, json_get_str(json_array_get(list, j),
						     "id")))
				return err_set(e, BATON_ECONTRACT,
					       "%s: claims[%zu].id: '%s' is "
					       "already the id of claims[%zu]",
					       file, i, id, j);
	}
	return 0;
}

/* A confidence: a number from 0 to 1. */
static int
check_confidence(const char *file, const json_t *v, struct err *e)
{
	double c;

	if (!json_is_number(v))
		return breach(e, file, "a number from 0 to 1", v, "confidence");
	c = json_number_value(v);
	if (c < 0 || c > 1)
		return breach(e, file, "a number from 0 to 1", v, "confidence");
	return 0;
}

int
research_evidence_check(const char *file, json_t *doc, const char *claim,
			struct err *e)
{
	json_t *list = NULL, *it;
	const char *id;
	size_t i;
	int rc;

	rc = top_list(file, doc, "evidence", &list, e);
	if (rc)
		return rc;
	id = json_get_str(doc, "claim");
	if (!research_id_ok(id))
		return breach(e, file, "a claim id",
			      json_object_get(doc, "claim"), "claim");
	if (claim && strcmp(id, claim))
		return err_set(e, BATON_ECONTRACT,
			       "%s: claim: expected '%s' (the claim this "
			       "evidence is for), got '%s'",
			       file, claim, id);
	if (!is_one_of(verdicts, json_get_str(doc, "verdict")))
		return breach(e, file, "supported, refuted or uncertain",
			      json_object_get(doc, "verdict"), "verdict");
	rc = check_confidence(file, json_object_get(doc, "confidence"), e);
	if (rc)
		return rc;
	if (!json_array_size(list))
		return breach(e, file, "at least one evidence item", list,
			      "evidence");
	for (i = 0; i < json_array_size(list); i++) {
		it = json_array_get(list, i);
		if (!json_is_object(it))
			return breach(e, file, "an object", it, "evidence[%zu]",
				      i);
		if (!text_of(it, "source"))
			return breach(e, file, "a non-empty string",
				      json_object_get(it, "source"),
				      "evidence[%zu].source", i);
		if (!json_is_string(json_object_get(it, "quote")))
			return breach(e, file, "a string",
				      json_object_get(it, "quote"),
				      "evidence[%zu].quote", i);
		if (!json_is_boolean(json_object_get(it, "supports")))
			return breach(e, file, "true or false",
				      json_object_get(it, "supports"),
				      "evidence[%zu].supports", i);
	}
	return 0;
}

/*
 * A claim id at list[i] (or list[i].field when field is not NULL) must
 * be one of state's claims.
 */
static int
check_known(const char *file, const json_t *state, const json_t *v,
	    const char *list, size_t i, const char *field, struct err *e)
{
	const char *id = json_string_value(v);
	char at[96];

	snprintf(at, sizeof(at), "%s[%zu]%s%s", list, i, field ? "." : "",
		 field ? field : "");
	if (!id)
		return breach(e, file, "a claim id", v, "%s", at);
	if (!research_claim(state, id))
		return err_set(e, BATON_ECONTRACT,
			       "%s: %s: '%s' is not one of the claims", file,
			       at, id);
	return 0;
}

int
research_challenge_check(const char *file, json_t *doc, const json_t *state,
			 struct err *e)
{
	json_t *list = NULL, *c;
	size_t i;
	int rc;

	rc = top_list(file, doc, "challenges", &list, e);
	if (rc)
		return rc;
	for (i = 0; i < json_array_size(list); i++) {
		c = json_array_get(list, i);
		if (!json_is_object(c))
			return breach(e, file, "an object", c,
				      "challenges[%zu]", i);
		rc = check_known(file, state, json_object_get(c, "claim"),
				 "challenges", i, "claim", e);
		if (rc)
			return rc;
		if (!text_of(c, "counter_evidence"))
			return breach(e, file, "a non-empty string",
				      json_object_get(c, "counter_evidence"),
				      "challenges[%zu].counter_evidence", i);
		if (!is_one_of(severities, json_get_str(c, "severity")))
			return breach(e, file, "low, medium or high",
				      json_object_get(c, "severity"),
				      "challenges[%zu].severity", i);
	}
	return 0;
}

int
research_judgement_check(const char *file, json_t *doc, const json_t *state,
			 struct err *e)
{
	static const char *const decisions[] = { "pass", "rework", NULL };
	const char *verdict = json_get_str(doc, "verdict");
	json_t *weak;
	size_t i;
	int rc;

	if (!json_is_object(doc))
		return breach(e, file, "a JSON object", doc, "the document");
	if (!is_one_of(decisions, verdict))
		return breach(e, file, "pass or rework",
			      json_object_get(doc, "verdict"), "verdict");
	weak = json_object_get(doc, "weak_claims");
	if (!json_is_array(weak) && (weak || !strcmp(verdict, "rework")))
		return breach(e, file, "a list of claim ids", weak,
			      "weak_claims");
	if (!strcmp(verdict, "rework") && !json_array_size(weak))
		return err_set(e, BATON_ECONTRACT,
			       "%s: weak_claims: a rework must name at least "
			       "one weak claim",
			       file);
	for (i = 0; i < json_array_size(weak); i++) {
		rc = check_known(file, state, json_array_get(weak, i),
				 "weak_claims", i, NULL, e);
		if (rc)
			return rc;
	}
	if (json_object_get(doc, "reasons") &&
	    !json_is_string(json_object_get(doc, "reasons")))
		return breach(e, file, "a string",
			      json_object_get(doc, "reasons"), "reasons");
	return 0;
}

json_t *
research_state_new(const char *question, const json_t *claims_doc)
{
	json_t *list = json_object_get(claims_doc, "claims"), *c;
	json_t *claims = json_array();
	size_t i;

	for (i = 0; i < json_array_size(list); i++) {
		c = json_array_get(list, i);
		json_array_append_new(
		    claims, json_pack("{s:s, s:s, s:s, s:i}", "id",
				      json_get_str(c, "id"), "text",
				      json_get_str(c, "text"), "status",
				      "pending", "rounds", 0));
	}
	return json_pack("{s:s, s:i, s:o}", "question",
			 question ? question : "", "round", 1, "claims",
			 claims);
}

json_t *
research_claim(const json_t *state, const char *id)
{
	json_t *claims = json_object_get(state, "claims"), *c;
	size_t i;

	for (i = 0; i < json_array_size(claims); i++) {
		const char *cid;

		c = json_array_get(claims, i);
		cid = json_get_str(c, "id");
		if (cid && id && !strcmp(cid, id))
			return c;
	}
	return NULL;
}

/* 1 if claim's status is st. */
static int
status_is(const json_t *claim, const char *st)
{
	const char *have = json_get_str(claim, "status");

	return have && !strcmp(have, st);
}

int
research_claim_wants_evidence(const json_t *claim)
{
	const char *st = json_get_str(claim, "status");

	return !st || !strcmp(st, "pending") || !strcmp(st, "weak");
}

void
research_claim_collected(json_t *claim, const json_t *evidence,
			 const char *file, int round)
{
	int rounds = (int)json_integer_value(json_object_get(claim, "rounds"));

	json_object_set_new(claim, "status", json_string("collected"));
	json_object_del(claim, "gate_reasons");
	json_object_set(claim, "verdict", json_object_get(evidence, "verdict"));
	json_object_set(claim, "confidence",
			json_object_get(evidence, "confidence"));
	json_object_set(claim, "evidence",
			json_object_get(evidence, "evidence"));
	json_object_set_new(claim, "file", json_string(file));
	json_object_set_new(claim, "round", json_integer(round));
	json_object_set_new(claim, "rounds", json_integer(rounds + 1));
}

int
research_judge(json_t *state, const json_t *judgement, const char *file)
{
	const char *verdict = json_get_str(judgement, "verdict");
	json_t *weak = json_object_get(judgement, "weak_claims");
	json_t *claims = json_object_get(state, "claims"), *c;
	json_int_t round = json_integer_value(json_object_get(state, "round"));
	int rework = verdict && !strcmp(verdict, "rework"), n = 0;
	size_t i;

	json_object_set_new(
	    state, "judgement",
	    json_pack("{s:s, s:o, s:s, s:I, s:s}", "verdict",
		      rework ? "rework" : "pass", "weak",
		      json_is_array(weak) ? json_copy(weak) : json_array(),
		      "reasons",
		      json_get_str(judgement, "reasons")
			  ? json_get_str(judgement, "reasons")
			  : "",
		      "round", round ? round : 1, "file", file));
	if (!rework) {
		for (i = 0; i < json_array_size(claims); i++) {
			c = json_array_get(claims, i);
			if (json_get_str(c, "verdict"))
				json_object_set(c, "status",
						json_object_get(c, "verdict"));
		}
		return 0;
	}
	for (i = 0; i < json_array_size(weak); i++) {
		c = research_claim(state,
				   json_string_value(json_array_get(weak, i)));
		if (c && !status_is(c, "weak")) {
			json_object_set_new(c, "status", json_string("weak"));
			n++;
		}
	}
	json_object_set_new(state, "rework", json_true());
	return n;
}

int
research_begin_round(json_t *state)
{
	json_int_t round = json_integer_value(json_object_get(state, "round"));

	if (round < 1)
		round = 1;
	if (json_is_true(json_object_get(state, "rework")))
		round++;
	json_object_del(state, "rework");
	json_object_set_new(state, "round", json_integer(round));
	return (int)round;
}

char *
research_weak_list(const json_t *state)
{
	json_t *weak =
	    json_object_get(json_object_get(state, "judgement"), "weak");
	struct buf out = BUF_INIT;
	size_t i;

	for (i = 0; i < json_array_size(weak); i++)
		buf_addf(&out, "%s%s", i ? ", " : "",
			 json_string_value(json_array_get(weak, i))
			     ? json_string_value(json_array_get(weak, i))
			     : "?");
	return buf_detach(&out, NULL);
}

void
research_summary(const json_t *state, size_t line_max, struct buf *out)
{
	json_t *claims = json_object_get(state, "claims"), *c;
	json_t *j = json_object_get(state, "judgement");
	struct buf line = BUF_INIT;
	size_t i;

	for (i = 0; i < json_array_size(claims); i++) {
		json_t *conf;

		c = json_array_get(claims, i);
		conf = json_object_get(c, "confidence");

		buf_reset(&line);
		buf_addf(&line, "%s [%s", json_get_str(c, "id"),
			 json_get_str(c, "status") ? json_get_str(c, "status")
						   : "pending");
		if (json_get_str(c, "verdict"))
			buf_addf(&line, ", %s", json_get_str(c, "verdict"));
		if (json_is_number(conf))
			buf_addf(&line, ", confidence %.2f",
				 json_number_value(conf));
		if (json_object_get(c, "evidence"))
			buf_addf(
			    &line, ", %zu evidence",
			    json_array_size(json_object_get(c, "evidence")));
		buf_addf(&line, "]: %s",
			 json_get_str(c, "text") ? json_get_str(c, "text")
						 : "");
		buf_adds(out, "- ");
		add_cut(out, line.ptr, line_max);
		buf_addch(out, '\n');
	}
	if (json_is_object(j)) {
		buf_reset(&line);
		buf_addf(
		    &line, "The judge on round %lld: %s. %s",
		    (long long)json_integer_value(json_object_get(j, "round")),
		    json_get_str(j, "verdict") ? json_get_str(j, "verdict")
					       : "?",
		    json_get_str(j, "reasons") ? json_get_str(j, "reasons")
					       : "");
		add_cut(out, line.ptr, line_max * 2);
		buf_addch(out, '\n');
	}
	buf_release(&line);
}

/* ---- the quality gate (openTiger's evaluateResearchQualityGate) -------- */

const char *const research_quality_profiles[] = { "low", "mid", "high",
						  "ultra", NULL };

int
research_quality_profile(const char *name, struct research_quality *q)
{
	/* TigerResearch's profile.ts; report confidence and the verifiable
	 * ratio are its global thresholds, the same for every profile */
	static const struct research_quality table[] = {
		{ "low", 1, 1, 0, 70, 0.9 },
		{ "mid", 2, 2, 1, 70, 0.9 },
		{ "high", 3, 2, 1, 70, 0.9 },
		{ "ultra", 4, 3, 1, 70, 0.9 },
	};
	size_t i;

	for (i = 0; name && i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(table[i].profile, name)) {
			*q = table[i];
			return 0;
		}
	return -1;
}

/* Adds id to the list a once. */
static void
add_id(json_t *a, const char *id)
{
	size_t i;

	for (i = 0; i < json_array_size(a); i++)
		if (!strcmp(json_string_value(json_array_get(a, i)), id))
			return;
	json_array_append_new(a, json_string(id));
}

static json_int_t
int_of(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_number(v) ? (json_int_t)json_number_value(v) : 0;
}

json_t *
research_quality_gate(const json_t *input, const struct research_quality *q)
{
	json_t *reasons = json_array(), *weak = json_array();
	json_t *challenge = json_array(), *prog, *cov, *it;
	double conf = json_number_value(
	    json_object_get(input, "latestReportConfidence"));
	size_t i, verifiable = 0, uncited = 0;
	double ratio;

	prog = json_object_get(input, "claimProgress");
	cov = json_object_get(input, "claimCitationCoverage");
	if (!json_array_size(json_object_get(input, "claims")))
		json_array_append_new(reasons,
				      json_string("No claims were generated."));
	if (conf < q->min_report_confidence)
		json_array_append_new(
		    reasons, json_sprintf("Report confidence is below "
					  "threshold (%g < %d).",
					  conf, q->min_report_confidence));
	for (i = 0; i < json_array_size(prog); i++) {
		const char *id;
		json_int_t ev, dom, counter;
		int ok = 1;

		it = json_array_get(prog, i);
		id = json_get_str(it, "claimId");
		id = id ? id : "?";
		ev = int_of(it, "evidenceCount");
		dom = int_of(it, "distinctDomainCount");
		counter = int_of(it, "counterEvidenceCount");
		if (ev < q->min_evidence) {
			json_array_append_new(
			    reasons,
			    json_sprintf("Claim %s lacks evidence (%lld/%d).",
					 id, (long long)ev, q->min_evidence));
			add_id(weak, id);
			ok = 0;
		}
		if (dom < q->min_domains) {
			json_array_append_new(
			    reasons, json_sprintf("Claim %s lacks source "
						  "diversity (%lld/%d).",
						  id, (long long)dom,
						  q->min_domains));
			add_id(weak, id);
			ok = 0;
		}
		if (q->require_counter && counter <= 0) {
			json_array_append_new(
			    reasons, json_sprintf("Claim %s has no "
						  "counter-evidence.",
						  id));
			add_id(challenge, id);
			ok = 0;
		}
		verifiable += ok;
	}
	for (i = 0; i < json_array_size(cov); i++) {
		it = json_array_get(cov, i);
		if (json_is_true(json_object_get(it, "hasCitation")))
			continue;
		uncited++;
		if (json_get_str(it, "claimId"))
			add_id(weak, json_get_str(it, "claimId"));
	}
	if (uncited)
		json_array_append_new(
		    reasons, json_sprintf("Citation coverage is incomplete "
					  "for %zu claim(s).",
					  uncited));
	ratio = json_array_size(prog)
		    ? (double)verifiable / (double)json_array_size(prog)
		    : 0;
	if (ratio < q->min_verifiable_ratio)
		json_array_append_new(
		    reasons, json_sprintf("Verifiable claim ratio is below "
					  "threshold (%.2f < %.2f).",
					  ratio, q->min_verifiable_ratio));
	return json_pack("{s:b, s:o, s:o, s:o, s:f, s:f}", "pass",
			 !json_array_size(reasons), "reasons", reasons,
			 "insufficient", weak, "challenge", challenge,
			 "verifiable_ratio", ratio, "report_confidence", conf);
}

int
research_source_domain(const char *source, char *out, size_t size)
{
	const char *p, *end, *at;
	size_t n, i;

	if (!source)
		return -1;
	if (!strncasecmp(source, "https://", 8))
		p = source + 8;
	else if (!strncasecmp(source, "http://", 7))
		p = source + 7;
	else
		return -1;
	end = p + strcspn(p, "/?#");
	at = memchr(p, '@', (size_t)(end - p));
	if (at)
		p = at + 1;
	n = strcspn(p, ":/?#");
	if (p + n > end)
		n = (size_t)(end - p);
	if (!n || n >= size)
		return -1;
	for (i = 0; i < n; i++) {
		char c = p[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-' || c == '[' || c == ']'))
			return -1;
		out[i] = c;
	}
	out[n] = '\0';
	return 0;
}

static int
id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* 1 if text holds word as a whole word (not inside [a-z0-9-]). */
static int
has_word(const char *text, const char *word)
{
	size_t n = strlen(word);
	const char *p = text;

	if (!n)
		return 0;
	while ((p = strstr(p, word))) {
		char b = p > text ? p[-1] : ' ', a = p[n];

		if (!id_char(b) && !id_char(a))
			return 1;
		p++;
	}
	return 0;
}

json_t *
research_quality_input(const json_t *state, const json_t *challenges,
		       const char *report)
{
	json_t *claims = json_object_get(state, "claims"), *c;
	json_t *out_claims = json_array(), *prog = json_array();
	json_t *cov = json_array(), *chl;
	double sum = 0;
	size_t i, j, k;

	chl = json_object_get(challenges, "challenges");
	for (i = 0; i < json_array_size(claims); i++) {
		json_t *ev, *domains = json_object();
		const char *id;
		double conf;
		int counter = 0, cited = 0;

		c = json_array_get(claims, i);
		id = json_get_str(c, "id");
		if (!id) {
			json_decref(domains);
			continue;
		}
		ev = json_object_get(c, "evidence");
		conf = json_number_value(json_object_get(c, "confidence"));
		sum += conf;
		for (j = 0; j < json_array_size(ev); j++) {
			json_t *it = json_array_get(ev, j);
			const char *src = json_get_str(it, "source");
			char host[256];

			if (!research_source_domain(src, host, sizeof(host)))
				json_object_set_new(domains, host, json_true());
			if (json_is_false(json_object_get(it, "supports")))
				counter++;
			if (report && src && *src && strstr(report, src))
				cited = 1;
		}
		for (k = 0; k < json_array_size(chl); k++) {
			const char *cid =
			    json_get_str(json_array_get(chl, k), "claim");

			if (cid && !strcmp(cid, id))
				counter++;
		}
		if (report && has_word(report, id))
			cited = 1;
		json_array_append_new(
		    out_claims, json_pack("{s:s, s:f}", "id", id,
					  "confidence", conf * 100));
		json_array_append_new(
		    prog, json_pack("{s:s, s:f, s:I, s:I, s:i}", "claimId", id,
				    "confidence", conf * 100, "evidenceCount",
				    (json_int_t)json_array_size(ev),
				    "distinctDomainCount",
				    (json_int_t)json_object_size(domains),
				    "counterEvidenceCount", counter));
		json_array_append_new(cov, json_pack("{s:s, s:b}", "claimId",
						     id, "hasCitation", cited));
		json_decref(domains);
	}
	return json_pack("{s:o, s:o, s:f, s:o}", "claims", out_claims,
			 "claimProgress", prog, "latestReportConfidence",
			 json_array_size(claims)
			     ? sum * 100 / (double)json_array_size(claims)
			     : 0,
			 "claimCitationCoverage", cov);
}
