/*
 * The records of the bug-fix pipeline (VCP seed 002) and what the engine
 * does with them between agents: hold each to its contract, consolidate
 * the root-cause analyses into one diagnosis, a user story and a fix
 * plan, and cut each record down to the few lines the next stage reads.
 * Pure: the caller reads and writes the files.
 *
 *   rca-claude-sonnet-1-v1.json        an analyst's RCA record
 *   diagnosis.json, user-story.json,   written by consolidation
 *   fix-plan.json
 *   code-review-codex-o3-3-v2.json     a review verdict, version 2
 *   impl-result.json                   the implementation's summary
 *
 * Every checker takes the file name it reports in errors and names the
 * field that is wrong: "rca-x-default-1-v1.json: root_cause.confidence:
 * expected high, medium or low, got 'sure'". A breach is BATON_ECONTRACT.
 */
#ifndef BATON_CORE_BUGFIX_H
#define BATON_CORE_BUGFIX_H

#include <stddef.h>

#include <jansson.h>

struct buf;
struct err;
struct strvec;

/*
 * "{type}-{provider}-{model}-{index}-v{version}.json" (the seed's naming):
 * model (or provider) NULL or empty is "default"; in provider and model
 * every character outside [A-Za-z0-9._] becomes '-'. The caller frees.
 */
char *bugfix_output_name(const char *type, const char *provider,
			 const char *model, int index, int version);

/*
 * The JSON object an agent left: text parsed whole, or else the last
 * fenced ```json block in it, or else the last {...} that parses (an
 * outermost one, never a member of a later object). Text that is whole
 * JSON but not an object is an error, and so is a broken last ```json
 * block unless an object follows it: a member of the broken block is
 * never taken for the answer. NULL when there is none, with
 * BATON_ECONTRACT in e saying why (invalid JSON at line and column of
 * the text, or not an object). text NULL is empty. The caller frees.
 */
json_t *bugfix_json_from_text(const char *file, const char *text,
			      struct err *e);

/*
 * An RCA record:
 *   {"bug_report": {"summary": S, ...},
 *    "root_cause": {"summary": S, "root_file": S, "root_line": N (>= 1,
 *                   optional), "confidence": "high"|"medium"|"low",
 *                   "category": S},
 *    "impact": {"blast_radius": S, "affected_files": [S],
 *               "regression_risk": S},            (all optional strings)
 *    "fix_constraints": {"must_preserve": [S], "safe_to_change": [S]},
 *    "recommended_approach": {"summary": S, "estimated_complexity": S,
 *                             "steps": [{"description": S,
 *                                        "files": [S]}]}}  (steps optional)
 * Objects bug_report, root_cause, impact, fix_constraints and
 * recommended_approach are required; so are the strings marked S without
 * "optional". Returns 0 when doc meets the contract.
 */
int bugfix_rca_check(const char *file, json_t *doc, struct err *e);

/* Two or more RCAs agree when they name the same root_file (a leading
 * "./" ignored) and the same category (case ignored). One (or none)
 * agrees with itself. */
int bugfix_rcas_agree(json_t *const *rcas, size_t n);

/* What consolidation chose: merge agreeing RCAs, one of them, or all. */
#define BUGFIX_MERGE (-1)	   /* they agree: one diagnosis, merged */
#define BUGFIX_ALL_CONTRIBUTING (-2) /* a person said all contribute */

struct bugfix_consolidated {
	json_t *diagnosis; /* {"agreed": B, "choice": "merge"|"all"|name,
			      "root_cause": {...}, "sources": [names]} */
	json_t *story;	   /* user-story.json, see bugfix_consolidate */
	json_t *plan;	   /* fix-plan.json */
};

/*
 * Consolidates n checked RCAs (names[i] is the stage that wrote rcas[i],
 * "rca-1") with choice BUGFIX_MERGE, BUGFIX_ALL_CONTRIBUTING or an index.
 * Merge and all-contributing take the most detailed RCA (the longest
 * root_cause.summary, the first on a tie) as the primary diagnosis and
 * merge affected files (each RCA's root_file first), fix constraints and
 * impact from all (deduplicated, the primary first, then the rest in
 * order; distinct blast radius and regression risk texts are joined with
 * "; ", "not assessed" when none has one); all-contributing also lists
 * the other diagnoses in the root cause text. A chosen index uses that
 * RCA alone. task is the bug report text (NULL: the primary's
 * bug_report.summary); checks the project's check commands (they become
 * the test plan's commands; NULL for none). BATON_EINVAL when n is 0 or
 * choice is none of these; *out is written only on success.
 *
 *   story: {"id": "story-<name>", "title": "Fix: <root cause summary,
 *           cut to 80>", "pipeline_type": "bug-fix",
 *           "bug_report": S, "requirements": {"root_cause": S,
 *           "root_file": S, "root_line": N or null},
 *           "acceptance_criteria": [{"id": "AC1", "description": ...},
 *                                   ... AC1..AC4 of the seed],
 *           "scope": {"affected_files": [S], "blast_radius": S,
 *                     "fix_constraints": {"must_preserve": [S],
 *                                         "safe_to_change": [S]}}}
 *   plan:  {"id": "plan-<name>", "title": ..., "pipeline_type": "bug-fix",
 *           "technical_approach": {"root_cause": S, "fix_strategy": S,
 *                                  "complexity": S},
 *           "steps": [{"description": S, "files": [S]}],
 *           "test_plan": {"commands": [S], "regression_test": S},
 *           "risk": {"blast_radius": S, "regression_risk": S,
 *                    "mitigation": S},
 *           "files": [S]}
 * The steps are the primary RCA's recommended_approach.steps, or the
 * seed's three (write a regression test that reproduces the bug; apply
 * the smallest fix to root_file at root_line, every distinct root file
 * for all-contributing; run the regression test and the checks). Every
 * step has a files list; the plan's files are theirs. diagnosis.sources
 * lists the primary first. name is the run id. The caller releases *out.
 */
int bugfix_consolidate(json_t *const *rcas, const char *const *names,
		       size_t n, int choice, const char *task,
		       const char *name, const struct strvec *checks,
		       struct bugfix_consolidated *out, struct err *e);
void bugfix_consolidated_release(struct bugfix_consolidated *c);

/*
 * The question for a person when RCAs disagree, as Markdown appended to
 * out: one line per RCA ("rca-1 (claude/sonnet): SUMMARY in FILE:LINE,
 * confidence C", ":LINE" only when there is one) and the options (each
 * stage name, or "all"). labels[i] is "provider/model" of rcas[i];
 * labels or labels[i] NULL leaves the parentheses out.
 */
void bugfix_disagreement(json_t *const *rcas, const char *const *names,
			 const char *const *labels, size_t n, struct buf *out);

/*
 * A fix plan as the revise stage leaves it: steps non-empty, each with a
 * description and a files list; technical_approach with root_cause and
 * fix_strategy; test_plan with a commands list. The rest of the plan
 * above is optional but, when there, of the type shown.
 */
int bugfix_plan_check(const char *file, json_t *doc, struct err *e);
/* Number of steps of a checked plan. */
size_t bugfix_plan_steps(json_t *plan);

/* What a review verdict is about: the plan, the code, or a phased batch. */
enum bugfix_review_kind {
	BUGFIX_PLAN_REVIEW,
	BUGFIX_CODE_REVIEW,
	BUGFIX_PHASED_REVIEW,
};

/*
 * A review verdict:
 *   {"status": "approved"|"needs_changes"|"needs_clarification"|"rejected",
 *    "summary": S,
 *    "findings": [{"severity": "critical"|"high"|"medium"|"low"|"info",
 *                  "description": S, "file": S, "line": N,
 *                  "fix_type": S}],     (file, line, fix_type optional)
 *    "questions": [S],                  (needs_clarification: non-empty)
 *    "acceptance_criteria_verification": [{"id": "AC1",
 *                  "verified": true|false, "evidence": S}],
 *                                       (code reviews: required)
 *    "requirements_coverage": {...}}    (plan reviews: required, any)
 * needs_changes needs at least one finding. *status gets the status
 * (a pointer into doc), on success only.
 */
int bugfix_review_check(enum bugfix_review_kind k, const char *file,
			json_t *doc, const char **status, struct err *e);

/*
 * impl-result.json: {"status": "complete"|"partial"|"failed",
 * "summary": S, "files_modified": [S], "files_created": [S]} (lists
 * optional).
 */
int bugfix_impl_check(const char *file, json_t *doc, struct err *e);

/*
 * The key results of a record for the next stage's prompt (progressive
 * enrichment), appended to out on one line of at most max bytes (cut on
 * a UTF-8 boundary, ending "..." when cut):
 *   rca     "root cause: S (FILE:LINE, confidence C, category K)"
 *   review  "STATUS: SUMMARY; N findings (H high+); AC V/T verified"
 *           ("no findings" when there are none; the AC part only when
 *           the review has acceptance_criteria_verification)
 *   impl    "STATUS: SUMMARY; files: a, b"
 *   plan    "N steps: first step description; ..."
 * type is the stage type name ("rca", "plan-review", "code-review",
 * "phased-review", "implementation", "plan" for a fix plan); any other
 * type gives the record's "summary".
 */
void bugfix_summary(const char *type, json_t *doc, size_t max,
		    struct buf *out);

/*
 * The steps in [first, last] (1-based) of a plan whose files a review's
 * findings name (a finding's file equal to, or ending in "/" plus, one of
 * the step's files; a leading "./" ignored): marks hit[i - first] = 1 and
 * the others 0 (hit has last - first + 1 slots). Returns how many; when
 * no finding names a file of any of them, all are marked. Steps past the
 * end of the plan are never marked; first < 1 or last < first gives 0.
 */
size_t bugfix_steps_hit(json_t *plan, json_t *review, int first, int last,
			int *hit);

#endif
