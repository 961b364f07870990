/*
 * The records of the research pipeline (openTiger's TigerResearch, seed
 * 001) and the run's research state: hold each record an agent leaves to
 * its contract, and keep the claims, their evidence and the judge's
 * verdict in one JSON object the engine saves in runs.progress under
 * "research". Pure: the caller reads and writes the files.
 *
 *   claims.json              the question split into claims (planning)
 *   evidence/c1-v2.json      the evidence for claim c1, round 2
 *   challenge.json           counter-evidence against the claims
 *   report.md                the composed report (markdown, no contract
 *                            beyond "not empty")
 *   judgement-v1.json        the judge's verdict on round 1
 *
 * The state (progress.research):
 *
 *   {"question": S, "round": N, "rework": true (until collect begins
 *    the round after a rework),
 *    "claims": [{"id": "c1", "text": S, "status": STATUS, "verdict": S,
 *                "confidence": 0..1, "evidence": [...],
 *                "file": "evidence/c1-v1.json", "rounds": N}],
 *    "challenge": "challenge.json", "report": "report.md",
 *    "judgement": {"verdict": "pass"|"rework", "weak": [ids],
 *                  "reasons": S, "round": N, "file": S}}
 *
 *   STATUS  pending ──collect──> collected ──judge pass──> supported |
 *           weak    ──collect──┘     │                    refuted |
 *                                    └──judge rework──> weak      uncertain
 *
 * Checkers take the file name they report in errors and name the field
 * that is wrong: "claims.json: claims[1].id: expected an id of 1 to 32
 * characters a-z, 0-9 or '-', got 'Claim 2'". A breach is BATON_ECONTRACT.
 */
#ifndef BATON_CORE_RESEARCH_H
#define BATON_CORE_RESEARCH_H

#include <stddef.h>

#include <jansson.h>

struct buf;
struct err;

/* Claims one question may be split into, at most. */
#define RESEARCH_MAX_CLAIMS 12
/* The longest claim id. */
#define RESEARCH_ID_MAX 32

/* 1 if id is 1 to RESEARCH_ID_MAX characters of [a-z0-9-]. */
int research_id_ok(const char *id);

/*
 * claims.json: {"claims": [{"id": ID, "text": S}]}, 1 to max claims
 * (max 0: RESEARCH_MAX_CLAIMS), ids valid and unique, texts not empty.
 */
int research_claims_check(const char *file, json_t *doc, size_t max,
			  struct err *e);

/*
 * An evidence record: {"claim": ID (claim, when not NULL),
 * "verdict": "supported"|"refuted"|"uncertain", "confidence": 0..1,
 * "evidence": [{"source": S, "quote": S, "supports": true|false}]} with at
 * least one evidence item; source must not be empty.
 */
int research_evidence_check(const char *file, json_t *doc, const char *claim,
			    struct err *e);

/*
 * challenge.json: {"challenges": [{"claim": ID, "counter_evidence": S,
 * "severity": "low"|"medium"|"high"}]} (the list may be empty); every
 * claim id must be one of state's claims.
 */
int research_challenge_check(const char *file, json_t *doc, const json_t *state,
			     struct err *e);

/*
 * A judgement: {"verdict": "pass"|"rework", "weak_claims": [ID],
 * "reasons": S}. A rework names at least one weak claim; every id named
 * must be one of state's claims. weak_claims may be absent on a pass.
 */
int research_judgement_check(const char *file, json_t *doc, const json_t *state,
			     struct err *e);

/*
 * A new state for question from a checked claims document: round 1,
 * every claim pending. The caller json_decref()s it.
 */
json_t *research_state_new(const char *question, const json_t *claims_doc);

/* The claim of state with id, or NULL; borrowed from state. */
json_t *research_claim(const json_t *state, const char *id);

/* 1 if claim still waits for evidence (pending or weak). */
int research_claim_wants_evidence(const json_t *claim);

/*
 * Takes a checked evidence record (file, of round) into claim: status
 * collected, its verdict, confidence and evidence, rounds + 1.
 */
void research_claim_collected(json_t *claim, const json_t *evidence,
			      const char *file, int round);

/*
 * Takes a checked judgement (file) into state. A pass settles every
 * claim at its verdict and returns 0. A rework marks the weak claims
 * weak, notes that the next collect starts a new round ("rework": true)
 * and returns the number of weak claims.
 */
int research_judge(json_t *state, const json_t *judgement, const char *file);

/*
 * Collect begins: the round it works, one more than the last after a
 * rework (the note is taken), else the same (a collect run again after
 * a driver died). Written into state; returns it.
 */
int research_begin_round(json_t *state);

/* The weak claims of the last judgement as "c2, c4" (caller frees). */
char *research_weak_list(const json_t *state);

/*
 * Appends what later stages read of the work so far: one line per
 * claim (id, status, verdict, confidence, evidence count, text), each cut
 * to line_max bytes, then the last judgement's reasons. Nothing for a
 * state without claims.
 */
void research_summary(const json_t *state, size_t line_max, struct buf *out);

/*
 * openTiger's deterministic quality gate (TigerResearch's
 * evaluateResearchQualityGate), run before the judge: thresholds set by a
 * profile.
 */
struct research_quality {
	const char *profile;		/* low | mid | high | ultra */
	int min_evidence;		/* evidence items per claim */
	int min_domains;		/* distinct source domains per claim */
	int require_counter;		/* counter-evidence for every claim */
	int min_report_confidence;	/* 0..100 */
	double min_verifiable_ratio;	/* 0..1 */
};

/* The profiles' names, NULL-terminated, for the config's choice. */
extern const char *const research_quality_profiles[];

/* Fills q from profile name; -1 for an unknown name. */
int research_quality_profile(const char *name, struct research_quality *q);

/*
 * The gate over input in openTiger's shape: {"claims": [{id, confidence}],
 * "claimProgress": [{claimId, evidenceCount, distinctDomainCount,
 * counterEvidenceCount}], "latestReportConfidence": 0..100,
 * "claimCitationCoverage": [{claimId, hasCitation}]}. Returns a new
 * {"pass": bool, "reasons": [S], "insufficient": [ids], "challenge":
 * [ids], "verifiable_ratio": R, "report_confidence": N}.
 */
json_t *research_quality_gate(const json_t *input,
			      const struct research_quality *q);

/*
 * The gate's input from baton's records: state (progress.research), the
 * challenge document (may be NULL) and the report's text (may be NULL).
 * Evidence counts the claim's items; a domain is the host of an http(s)
 * source (other sources have none, as in openTiger); counter-evidence is
 * an item with "supports": false or a challenge naming the claim; a
 * claim is cited when the report names its id as a word or quotes one
 * of its sources; the report's confidence is the claims' mean (x100).
 */
json_t *research_quality_input(const json_t *state, const json_t *challenges,
			       const char *report);

/* The host of an http(s) URL, lower-cased, into out; 0, or -1 for none. */
int research_source_domain(const char *source, char *out, size_t size);

#endif
