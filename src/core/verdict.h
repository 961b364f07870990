/*
 * Stage verdicts: the machine-checked contracts of review and verify
 * stages (DESIGN.md section 2). A review leaves review.json
 *   {"decision": "APPROVED" | "CHANGES_REQUESTED" | "BLOCKED",
 *    "summary": "...", "findings": [{...}, ...]}
 * and a verify stage verification.json
 *   {"decision": "PASSED" | "FAILED" | "NEEDS_HUMAN", "summary": "..."}
 * or, as a fallback, a "DECISION: X" / "VERIFICATION: X" line in the
 * agent's final text. Pure: the caller reads the files.
 */
#ifndef BATON_CORE_VERDICT_H
#define BATON_CORE_VERDICT_H

#include <jansson.h>

struct buf;
struct err;

enum verdict_kind { VERDICT_REVIEW, VERDICT_VERIFY };

struct verdict {
	char *decision;	/* one of verdict_decisions(kind) */
	char *summary;	/* NULL when none was given */
	json_t *doc;	/* the parsed document; NULL for a line verdict */
};

/* The decisions of a kind, NULL-terminated: [0] is the approving one. */
const char *const *verdict_decisions(enum verdict_kind k);
/* "DECISION" or "VERIFICATION". */
const char *verdict_line_prefix(enum verdict_kind k);
/* 1 if decision is one of the kind's decisions. */
int verdict_is_decision(enum verdict_kind k, const char *decision);

/*
 * Checks a review.json / verification.json text (file names it in
 * messages) and fills *v on success. A breach is BATON_ECONTRACT with what
 * was wrong in e: invalid JSON (line and column), not an object, a missing
 * or unknown decision, a summary that is not a string, findings that are
 * not a list of objects.
 */
int verdict_parse_json(enum verdict_kind k, const char *file,
		       const char *text, struct verdict *v, struct err *e);

/*
 * The value of the last "PREFIX: VALUE" line in text, uppercased (a new
 * string), tolerating Markdown around it ("**DECISION:** approved");
 * NULL when there is no such line. The caller checks the value.
 */
char *verdict_line(enum verdict_kind k, const char *text);

/* A readable Markdown rendering (review.md, verification.md). */
void verdict_markdown(const struct verdict *v, const char *title,
		      struct buf *md);
void verdict_release(struct verdict *v);

/*
 * The security findings contract (a review stage's `findings: security`):
 * doc (a review.json; NULL: a line verdict, which has no findings) has a
 * "findings" list, each an object with severity (critical, high, medium,
 * low or info), file (a relative path inside the repository), line (an
 * integer from 1), category (e.g. "CWE-89") and evidence (what in the
 * code shows it), all present and not empty. 0, or BATON_ECONTRACT naming
 * the finding and the field ("findings[2].line: expected an integer from
 * 1, got \"x\"").
 */
int verdict_check_security(const json_t *doc, struct err *e);

#endif
