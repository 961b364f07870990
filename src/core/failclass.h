/*
 * Failure classes: what kind of failure a failed call or run was, read
 * from its error text (and a structured code where baton has one), and
 * how often each kind is worth trying again. The classes and their
 * default limits are openTiger's (seed 001; its own cases are in
 * ../shared/conformance/opentiger/failure-classification-cases.json):
 *
 *   class        tried again   why
 *   permission   never         the agent stopped at a permission prompt
 *   noop         never         the agent changed nothing
 *   model_loop   once          the model went round in circles
 *   setup        3             the project or the tooling is not set up
 *   policy       3             a change outside what is allowed
 *   test         3             the checks failed
 *   env          5             a service or a variable is missing
 *   flaky        6             network blips, timeouts, 5xx
 *   model        3             anything else
 *
 * A failure can also be non-retryable in a retryable class ("missing
 * script" is setup that no retry fixes). Pure: no I/O.
 */
#ifndef BATON_CORE_FAILCLASS_H
#define BATON_CORE_FAILCLASS_H

struct buf;

enum fail_class {
	FAIL_CLASS_ENV,
	FAIL_CLASS_SETUP,
	FAIL_CLASS_PERMISSION,
	FAIL_CLASS_NOOP,
	FAIL_CLASS_POLICY,
	FAIL_CLASS_TEST,
	FAIL_CLASS_FLAKY,
	FAIL_CLASS_MODEL,
	FAIL_CLASS_MODEL_LOOP,
	FAIL_CLASS_N
};

struct fail_verdict {
	enum fail_class cls;
	int retryable;	    /* 0: trying again cannot help */
	const char *reason; /* a static name: "test_failure" ... */
};

/*
 * Classifies a failure. code (may be NULL) is a structured failure code
 * ("verification_command_failed", "policy_violation"); a known code
 * decides alone, an unknown one falls through to the message. message
 * (may be NULL) is matched case-insensitively against the rules in order;
 * what matches none is "model". Always fills *out.
 */
void fail_classify(const char *message, const char *code,
		   struct fail_verdict *out);

/* "env", "setup", ...; and back (-1 for an unknown name). */
const char *fail_class_name(enum fail_class c);
int fail_class_from_name(const char *name);

/* The default retry limit of class c (the table above). */
int fail_class_default_limit(enum fail_class c);

/*
 * How often a failure of a class whose own limit is class_limit is tried
 * again under an overall cap: the class's limit when cap < 0 (none),
 * else the smaller of the two.
 */
int fail_retry_limit(int class_limit, int cap);

/*
 * The signature of a failure text: lowercased, terminal colour codes
 * dropped, uuids, paths and numbers replaced by <uuid>, <path> and <n>,
 * white space collapsed, at most 400 bytes; written to norm (appended;
 * may be NULL), and its 64-bit FNV-1a hash as 16 hex digits to hash. The
 * same failure on another attempt, file or run has the same signature.
 */
void fail_signature(const char *text, struct buf *norm, char hash[17]);

#endif
