/*
 * The bug-fix pipeline's records: output names, finding the JSON in an
 * agent's text, the RCA, plan, review and implementation contracts,
 * consolidation, the disagreement question, summaries and the steps a
 * phased review hits.
 *
 * JSON in these tests is written with single quotes (doc() turns them
 * into double quotes) so that it stays readable.
 */
#include "util/compat.h"

#include "core/bugfix.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/strvec.h"

#define RCA_FILE "rca-x-default-1-v1.json"

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

/* A complete RCA record. */
static json_t *
rca(const char *file, int line, const char *category, const char *summary)
{
	json_t *v =
	    doc("{'bug_report': {'summary': 'crash on empty input'},"
		" 'root_cause': {'summary': '', 'root_file': '',"
		"   'confidence': 'high', 'category': ''},"
		" 'impact': {'blast_radius': 'parser callers',"
		"   'affected_files': ['src/parse.c', 'src/lex.c'],"
		"   'regression_risk': 'low'},"
		" 'fix_constraints': {'must_preserve': ['the public API'],"
		"   'safe_to_change': ['parse internals']},"
		" 'recommended_approach': {'summary': 'check the length',"
		"   'estimated_complexity': 'small'}}");
	json_t *rc = json_object_get(v, "root_cause");

	json_object_set_new(rc, "summary", json_string(summary));
	json_object_set_new(rc, "root_file", json_string(file));
	json_object_set_new(rc, "category", json_string(category));
	if (line)
		json_object_set_new(rc, "root_line", json_integer(line));
	return v;
}

/*
 * Sets (value non-NULL) or deletes the member at a dotted path of v,
 * where a number names a list item: "recommended_approach.steps.0.files".
 */
static void
set_at(json_t *v, const char *path, json_t *value)
{
	char *p = strdup(path), *seg = p, *dot;

	while ((dot = strchr(seg, '.'))) {
		*dot = 0;
		v = json_is_array(v) ? json_array_get(v, strtoul(seg, NULL, 10))
				     : json_object_get(v, seg);
		seg = dot + 1;
	}
	if (value)
		json_object_set_new(v, seg, value);
	else
		json_object_del(v, seg);
	free(p);
}

static void
free_all(json_t **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		json_decref(v[i]);
}

/* A string member at a dotted path ("story.scope.blast_radius"). */
static const char *
str_path(json_t *v, const char *path)
{
	char *p = strdup(path), *seg = p, *dot;
	const char *s;

	while ((dot = strchr(seg, '.'))) {
		*dot = 0;
		v = json_object_get(v, seg);
		seg = dot + 1;
	}
	s = json_string_value(json_object_get(v, seg));
	free(p);
	return s;
}

/* The strings of a list, joined with "|". */
static char *
joined(json_t *list)
{
	struct buf b = BUF_INIT;
	size_t i;

	for (i = 0; i < json_array_size(list); i++)
		buf_addf(&b, "%s%s", i ? "|" : "",
			 json_string_value(json_array_get(list, i)));
	return buf_detach(&b, NULL);
}

#define ASSERT_LIST(list, want)                                                \
	do {                                                                   \
		char *j_ = joined(list);                                       \
		ASSERT_STREQ(j_, want);                                        \
		free(j_);                                                      \
	} while (0)

/* ---- output names ---- */

TEST(output_name_sanitizes_provider_and_model)
{
	char *s = bugfix_output_name("rca", "anthropic subscription",
				     "claude/sonnet:4.5_x", 1, 1);

	ASSERT_STREQ(
	    s, "rca-anthropic-subscription-claude-sonnet-4.5_x-1-v1.json");
	free(s);
	s = bugfix_output_name("code-review", "codex", "o3", 3, 2);
	ASSERT_STREQ(s, "code-review-codex-o3-3-v2.json");
	free(s);
}

TEST(output_name_model_null_is_default)
{
	char *s = bugfix_output_name("plan-review", "x", NULL, 2, 1);

	ASSERT_STREQ(s, "plan-review-x-default-2-v1.json");
	free(s);
}

/* ---- json_from_text ---- */

TEST(json_from_text_whole)
{
	struct err e = ERR_INIT;
	json_t *v = bugfix_json_from_text("a.json", "  {\"a\": 1}\n", &e);

	ASSERT(v);
	ASSERT_EQ(json_integer_value(json_object_get(v, "a")), 1);
	json_decref(v);
}

TEST(json_from_text_last_fenced_block)
{
	struct err e = ERR_INIT;
	json_t *v = bugfix_json_from_text(
	    "a.json",
	    "First try:\n```json\n{\"a\": 1}\n```\nbetter:\n"
	    "```JSON\n{\"a\": 2, \"b\": {\"c\": 3}}\n```\nDone {not json}.",
	    &e);

	ASSERT(v);
	ASSERT_EQ(json_integer_value(json_object_get(v, "a")), 2);
	json_decref(v);
}

TEST(json_from_text_trailing_object)
{
	struct err e = ERR_INIT;
	json_t *v = bugfix_json_from_text(
	    "a.json",
	    "I looked at {the code}. Early {\"a\": 1}. Final answer:\n"
	    "{\"a\": 2, \"inner\": {\"b\": \"}\"}} -- hope it helps {",
	    &e);

	ASSERT(v);
	/* the outer object, not its member, and not the earlier one */
	ASSERT_EQ(json_integer_value(json_object_get(v, "a")), 2);
	ASSERT_STREQ(str_path(v, "inner.b"), "}");
	json_decref(v);
}

TEST(json_from_text_garbage_says_where)
{
	struct err e = ERR_INIT;

	ASSERT(!bugfix_json_from_text("out.json", "no json here", &e));
	ASSERT_EQ(e.rc, BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "out.json: no JSON object: invalid JSON at "
			       "line 1, column ");
	ASSERT_CONTAINS(e.msg, "near 'no'");
	ASSERT(!bugfix_json_from_text("out.json", "{\"a\":\n 1,,}", &e));
	ASSERT_CONTAINS(e.msg, "at line 2, column");
	ASSERT(!bugfix_json_from_text("out.json", "[1, 2]", &e));
	ASSERT_STREQ(e.msg, "out.json: expected a JSON object, got a list");
	/* a broken fenced block is reported, not one of its members */
	ASSERT(!bugfix_json_from_text(
	    "out.json", "text\n\n```json\n{\"a\": {\"b\": 1},\n}\n```\n", &e));
	ASSERT_CONTAINS(e.msg, "out.json: invalid JSON in the ```json block "
			       "at line 5, column");
	ASSERT(!bugfix_json_from_text("out.json", NULL, &e));
}

TEST(json_from_text_object_after_a_broken_block)
{
	struct err e = ERR_INIT;
	json_t *v = bugfix_json_from_text(
	    "out.json",
	    "```json\n{\"a\": {\"b\": 1},}\n```\nFixed: {\"a\": 3}\n", &e);

	ASSERT(v);
	ASSERT_EQ(json_integer_value(json_object_get(v, "a")), 3);
	json_decref(v);
}

/* ---- the RCA contract ---- */

TEST(rca_valid_passes)
{
	struct err e = ERR_INIT;
	json_t *v = rca("src/parse.c", 42, "logic", "reads past the end");

	ASSERT_OK(bugfix_rca_check(RCA_FILE, v, &e), &e);
	/* optional fields may be null or absent */
	set_at(v, "root_cause.root_line", json_null());
	set_at(v, "impact.blast_radius", NULL);
	set_at(v, "recommended_approach.steps",
	       doc("[{'description': 'x'}, {'description': 'y', "
		   "'files': ['a.c']}]"));
	ASSERT_OK(bugfix_rca_check(RCA_FILE, v, &e), &e);
	json_decref(v);
}

TEST(rca_contract_breaches_name_the_field)
{
	static const struct {
		const char *path, *value; /* value NULL: delete the member */
		const char *msg;
	} cases[] = {
		{ "root_cause.confidence", "'sure'",
		  "root_cause.confidence: expected high, medium or low, got "
		  "'sure'" },
		{ "bug_report", NULL,
		  "bug_report: expected an object, got nothing" },
		{ "bug_report.summary", "3",
		  "bug_report.summary: expected a non-empty string, got 3" },
		{ "root_cause", "'x'",
		  "root_cause: expected an object, got 'x'" },
		{ "root_cause.summary", "''",
		  "root_cause.summary: expected a non-empty string, got ''" },
		{ "root_cause.root_file", NULL,
		  "root_cause.root_file: expected a non-empty string, got "
		  "nothing" },
		{ "root_cause.root_line", "0",
		  "root_cause.root_line: expected a line number >= 1, got 0" },
		{ "root_cause.root_line", "'42'",
		  "root_cause.root_line: expected a line number >= 1, got "
		  "'42'" },
		{ "root_cause.confidence", "null",
		  "root_cause.confidence: expected high, medium or low, got "
		  "null" },
		{ "root_cause.category", NULL,
		  "root_cause.category: expected a non-empty string" },
		{ "impact", NULL, "impact: expected an object, got nothing" },
		{ "impact.blast_radius", "1",
		  "impact.blast_radius: expected a string, got 1" },
		{ "impact.affected_files", "'a.c'",
		  "impact.affected_files: expected a list of strings, got "
		  "'a.c'" },
		{ "impact.affected_files", "['a.c', 1.5]",
		  "impact.affected_files[1]: expected a string, got 1.5" },
		{ "impact.regression_risk", "[]",
		  "impact.regression_risk: expected a string, got an empty "
		  "list" },
		{ "fix_constraints", NULL,
		  "fix_constraints: expected an object, got nothing" },
		{ "fix_constraints.must_preserve", "{}",
		  "fix_constraints.must_preserve: expected a list of strings, "
		  "got an object" },
		{ "fix_constraints.safe_to_change", "[true]",
		  "fix_constraints.safe_to_change[0]: expected a string, got "
		  "true" },
		{ "recommended_approach", "[1]",
		  "recommended_approach: expected an object, got a list" },
		{ "recommended_approach.summary", NULL,
		  "recommended_approach.summary: expected a non-empty string" },
		{ "recommended_approach.estimated_complexity", "false",
		  "recommended_approach.estimated_complexity: expected a "
		  "non-empty string, got false" },
		{ "recommended_approach.steps", "{}",
		  "recommended_approach.steps: expected a list of objects, got "
		  "an object" },
		{ "recommended_approach.steps", "[{'description': 'a'}, 'b']",
		  "recommended_approach.steps[1]: expected an object, got "
		  "'b'" },
		{ "recommended_approach.steps", "[{'files': []}]",
		  "recommended_approach.steps[0].description: expected a "
		  "non-empty string, got nothing" },
		{ "recommended_approach.steps",
		  "[{'description': 'a', 'files': ['x', null]}]",
		  "recommended_approach.steps[0].files[1]: expected a string, "
		  "got null" },
	};
	struct err e = ERR_INIT;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		json_t *v = rca("src/parse.c", 42, "logic", "reads past");

		set_at(v, cases[i].path,
		       cases[i].value ? doc(cases[i].value) : NULL);
		e.rc = 0;
		e.msg[0] = 0;
		if (bugfix_rca_check(RCA_FILE, v, &e) != BATON_ECONTRACT)
			test_fail(__FILE__, __LINE__, "case %zu (%s) passed", i,
				  cases[i].path);
		ASSERT_EQ(e.rc, BATON_ECONTRACT);
		ASSERT_CONTAINS(e.msg, RCA_FILE ": ");
		ASSERT_CONTAINS(e.msg, cases[i].msg);
		json_decref(v);
	}
}

TEST(rca_breach_message_in_full)
{
	struct err e = ERR_INIT;
	json_t *v = rca("a.c", 0, "logic", "s");

	set_at(v, "root_cause.confidence", json_string("sure"));
	ASSERT_EQ(bugfix_rca_check(RCA_FILE, v, &e), BATON_ECONTRACT);
	ASSERT_STREQ(e.msg, "rca-x-default-1-v1.json: root_cause.confidence: "
			    "expected high, medium or low, got 'sure'");
	json_decref(v);
}

TEST(rca_not_an_object)
{
	struct err e = ERR_INIT;
	json_t *v = doc("[1]");

	ASSERT_EQ(bugfix_rca_check(RCA_FILE, v, &e), BATON_ECONTRACT);
	ASSERT_STREQ(e.msg, RCA_FILE ": expected a JSON object, got a list");
	ASSERT_EQ(bugfix_rca_check(RCA_FILE, NULL, &e), BATON_ECONTRACT);
	json_decref(v);
}

/* ---- agreement ---- */

TEST(rcas_agree_ignoring_dot_slash_and_case)
{
	json_t *r[3] = {
		rca("src/parse.c", 42, "Logic", "a"),
		rca("./src/parse.c", 40, "logic", "b"),
		rca("src/parse.c", 0, "LOGIC", "c"),
	};

	ASSERT(bugfix_rcas_agree(r, 3));
	ASSERT(bugfix_rcas_agree(r, 1));
	free_all(r, 3);
}

TEST(rcas_disagree_on_file_or_category)
{
	json_t *r[3] = {
		rca("src/parse.c", 42, "logic", "a"),
		rca("src/lex.c", 42, "logic", "b"),
		rca("src/parse.c", 42, "race", "c"),
	};
	json_t *pair[2] = { r[0], r[2] };

	ASSERT(!bugfix_rcas_agree(r, 2));
	ASSERT(!bugfix_rcas_agree(pair, 2));
	ASSERT(!bugfix_rcas_agree(r, 3));
	free_all(r, 3);
}

/* ---- consolidation ---- */

static const char *const names[] = { "rca-1", "rca-2", "rca-3" };

TEST(consolidate_merge_takes_most_detailed_and_merges)
{
	json_t *r[2] = {
		rca("src/parse.c", 42, "logic", "short"),
		rca("./src/parse.c", 41, "Logic",
		    "parse() reads one byte past the end of an empty buffer"),
	};
	struct bugfix_consolidated c = { 0 };
	struct err e = ERR_INIT;
	json_t *acs;
	char id[32];
	size_t i;

	set_at(r[1], "impact.affected_files",
	       doc("['src/lex.c', 'src/main.c', './src/parse.c']"));
	set_at(r[1], "impact.blast_radius", json_string("every caller"));
	set_at(r[1], "fix_constraints.must_preserve",
	       doc("['the public API', 'error codes']"));
	ASSERT_OK(bugfix_consolidate(r, names, 2, BUGFIX_MERGE, "it crashes",
				     "run-7", NULL, &c, &e),
		  &e);
	ASSERT(json_is_true(json_object_get(c.diagnosis, "agreed")));
	ASSERT_STREQ(str_path(c.diagnosis, "choice"), "merge");
	ASSERT_STREQ(str_path(c.diagnosis, "root_cause.summary"),
		     "parse() reads one byte past the end of an empty buffer");
	/* the primary comes first */
	ASSERT_LIST(json_object_get(c.diagnosis, "sources"), "rca-2|rca-1");

	ASSERT_STREQ(str_path(c.story, "id"), "story-run-7");
	ASSERT_STREQ(str_path(c.story, "title"),
		     "Fix: parse() reads one byte past the end of an empty "
		     "buffer");
	ASSERT_STREQ(str_path(c.story, "pipeline_type"), "bug-fix");
	ASSERT_STREQ(str_path(c.story, "bug_report"), "it crashes");
	ASSERT_STREQ(str_path(c.story, "requirements.root_file"),
		     "./src/parse.c");
	ASSERT_EQ(json_integer_value(json_object_get(
		      json_object_get(c.story, "requirements"), "root_line")),
		  41);
	ASSERT_LIST(json_object_get(json_object_get(c.story, "scope"),
				    "affected_files"),
		    "./src/parse.c|src/lex.c|src/main.c");
	ASSERT_STREQ(str_path(c.story, "scope.blast_radius"),
		     "every caller; parser callers");
	ASSERT_LIST(
	    json_object_get(json_object_get(json_object_get(c.story, "scope"),
					    "fix_constraints"),
			    "must_preserve"),
	    "the public API|error codes");
	acs = json_object_get(c.story, "acceptance_criteria");
	ASSERT_EQ(json_array_size(acs), 4);
	for (i = 0; i < json_array_size(acs); i++) {
		snprintf(id, sizeof(id), "AC%zu", i + 1);
		ASSERT_STREQ(json_get_str(json_array_get(acs, i), "id"), id);
	}
	ASSERT_STREQ(json_get_str(json_array_get(acs, 0), "description"),
		     "Bug is resolved — expected behavior is restored");
	ASSERT_STREQ(json_get_str(json_array_get(acs, 3), "description"),
		     "Root cause is addressed, not just symptoms patched");

	ASSERT_STREQ(str_path(c.plan, "id"), "plan-run-7");
	ASSERT_STREQ(str_path(c.plan, "technical_approach.fix_strategy"),
		     "check the length");
	ASSERT_STREQ(str_path(c.plan, "technical_approach.complexity"),
		     "small");
	ASSERT_STREQ(str_path(c.plan, "risk.regression_risk"), "low");
	ASSERT_OK(bugfix_plan_check("fix-plan.json", c.plan, &e), &e);
	bugfix_consolidated_release(&c);
	ASSERT(!c.plan);
	free_all(r, 2);
}

TEST(consolidate_choice_uses_that_rca_alone)
{
	json_t *r[2] = {
		rca("src/parse.c", 42, "logic",
		    "the longer summary of the first one"),
		rca("src/lex.c", 7, "race", "the lexer races"),
	};
	struct bugfix_consolidated c = { 0 };
	struct err e = ERR_INIT;

	set_at(r[1], "impact.affected_files", doc("['src/tok.c']"));
	set_at(r[1], "impact.blast_radius", NULL);
	ASSERT_OK(bugfix_consolidate(r, names, 2, 1, NULL, "r", NULL, &c, &e),
		  &e);
	ASSERT(json_is_false(json_object_get(c.diagnosis, "agreed")));
	ASSERT_STREQ(str_path(c.diagnosis, "choice"), "rca-2");
	ASSERT_LIST(json_object_get(c.diagnosis, "sources"), "rca-2");
	ASSERT_STREQ(str_path(c.story, "requirements.root_cause"),
		     "the lexer races");
	ASSERT_STREQ(str_path(c.story, "title"), "Fix: the lexer races");
	/* no task: the RCA's bug report */
	ASSERT_STREQ(str_path(c.story, "bug_report"), "crash on empty input");
	ASSERT_LIST(json_object_get(json_object_get(c.story, "scope"),
				    "affected_files"),
		    "src/lex.c|src/tok.c");
	ASSERT_STREQ(str_path(c.story, "scope.blast_radius"), "not assessed");
	bugfix_consolidated_release(&c);
	free_all(r, 2);
}

TEST(consolidate_all_contributing)
{
	json_t *r[2] = {
		rca("src/parse.c", 42, "logic", "parse reads past the end"),
		rca("src/lex.c", 0, "race", "lex races"),
	};
	struct bugfix_consolidated c = { 0 };
	struct err e = ERR_INIT;
	json_t *steps;

	ASSERT_OK(bugfix_consolidate(r, names, 2, BUGFIX_ALL_CONTRIBUTING,
				     "bug", "r", NULL, &c, &e),
		  &e);
	ASSERT_STREQ(str_path(c.diagnosis, "choice"), "all");
	ASSERT_LIST(json_object_get(c.diagnosis, "sources"), "rca-1|rca-2");
	ASSERT_STREQ(str_path(c.story, "requirements.root_cause"),
		     "parse reads past the end\n\nContributing factors:\n"
		     "- rca-2: lex races (src/lex.c)");
	ASSERT_LIST(json_object_get(json_object_get(c.story, "scope"),
				    "affected_files"),
		    "src/parse.c|src/lex.c");
	steps = json_object_get(c.plan, "steps");
	ASSERT_EQ(json_array_size(steps), 3);
	ASSERT_STREQ(json_get_str(json_array_get(steps, 1), "description"),
		     "Apply the smallest fix to src/parse.c at line 42, "
		     "src/lex.c");
	ASSERT_LIST(json_object_get(c.plan, "files"), "src/parse.c|src/lex.c");
	bugfix_consolidated_release(&c);
	free_all(r, 2);
}

TEST(consolidate_default_steps_or_the_rcas)
{
	json_t *r[1] = { rca("src/parse.c", 42, "logic", "s") };
	struct bugfix_consolidated c = { 0 };
	struct err e = ERR_INIT;
	json_t *steps;

	ASSERT_OK(bugfix_consolidate(r, names, 1, BUGFIX_MERGE, "b", "r", NULL,
				     &c, &e),
		  &e);
	steps = json_object_get(c.plan, "steps");
	ASSERT_EQ(bugfix_plan_steps(c.plan), 3);
	ASSERT_CONTAINS(json_get_str(json_array_get(steps, 0), "description"),
			"regression test that reproduces the bug");
	ASSERT_STREQ(json_get_str(json_array_get(steps, 1), "description"),
		     "Apply the smallest fix to src/parse.c at line 42");
	ASSERT_LIST(json_object_get(json_array_get(steps, 1), "files"),
		    "src/parse.c");
	ASSERT_CONTAINS(json_get_str(json_array_get(steps, 2), "description"),
			"Run the regression test and the checks");
	ASSERT_EQ(
	    json_array_size(json_object_get(json_array_get(steps, 2), "files")),
	    0);
	bugfix_consolidated_release(&c);

	set_at(r[0], "recommended_approach.steps",
	       doc("[{'description': 'add a test', 'files': ['t/p.c']},"
		   " {'description': 'guard the length',"
		   "  'files': ['src/parse.c', './t/p.c']},"
		   " {'description': 'no files'}]"));
	ASSERT_OK(bugfix_consolidate(r, names, 1, 0, "b", "r", NULL, &c, &e),
		  &e);
	steps = json_object_get(c.plan, "steps");
	ASSERT_EQ(json_array_size(steps), 3);
	ASSERT_STREQ(json_get_str(json_array_get(steps, 1), "description"),
		     "guard the length");
	ASSERT(
	    json_is_array(json_object_get(json_array_get(steps, 2), "files")));
	ASSERT_LIST(json_object_get(c.plan, "files"), "t/p.c|src/parse.c");
	ASSERT_OK(bugfix_plan_check("fix-plan.json", c.plan, &e), &e);
	bugfix_consolidated_release(&c);
	free_all(r, 1);
}

TEST(consolidate_test_plan_commands_are_the_checks)
{
	json_t *r[1] = { rca("src/parse.c", 42, "logic", "s") };
	struct bugfix_consolidated c = { 0 };
	struct strvec checks = STRVEC_INIT;
	struct err e = ERR_INIT;

	strvec_pushl(&checks, "make check", "make lint", NULL);
	ASSERT_OK(bugfix_consolidate(r, names, 1, BUGFIX_MERGE, "b", "r",
				     &checks, &c, &e),
		  &e);
	ASSERT_LIST(
	    json_object_get(json_object_get(c.plan, "test_plan"), "commands"),
	    "make check|make lint");
	ASSERT_CONTAINS(str_path(c.plan, "test_plan.regression_test"),
			"crash on empty input");
	ASSERT_STREQ(str_path(c.plan, "risk.mitigation"),
		     "Regression test covers the exact bug scenario");
	bugfix_consolidated_release(&c);
	strvec_clear(&checks);
	free_all(r, 1);
}

TEST(consolidate_title_is_cut_and_choice_checked)
{
	json_t *r[1] = { rca("a.c", 1, "logic",
			     "0123456789012345678901234567890123456789"
			     "0123456789012345678901234567890123456789"
			     "0123456789") };
	struct bugfix_consolidated c = { 0 };
	struct err e = ERR_INIT;

	ASSERT_OK(bugfix_consolidate(r, names, 1, 0, "b", "r", NULL, &c, &e),
		  &e);
	ASSERT_EQ(strlen(str_path(c.story, "title")), 5 + 80);
	ASSERT_CONTAINS(str_path(c.story, "title"), "...");
	bugfix_consolidated_release(&c);
	ASSERT_EQ(bugfix_consolidate(r, names, 1, 1, "b", "r", NULL, &c, &e),
		  BATON_EINVAL);
	ASSERT_EQ(bugfix_consolidate(r, names, 1, -3, "b", "r", NULL, &c, &e),
		  BATON_EINVAL);
	ASSERT_EQ(bugfix_consolidate(r, names, 0, BUGFIX_MERGE, "b", "r", NULL,
				     &c, &e),
		  BATON_EINVAL);
	ASSERT(!c.story);
	free_all(r, 1);
}

/* ---- the question when RCAs disagree ---- */

TEST(disagreement_lists_each_rca_and_the_options)
{
	json_t *r[2] = {
		rca("src/parse.c", 42, "logic", "reads past\nthe end"),
		rca("src/lex.c", 0, "race", "lex races"),
	};
	static const char *const labels[] = { "claude/sonnet", "codex/o3" };
	struct buf md = BUF_INIT;

	set_at(r[1], "root_cause.confidence", json_string("low"));
	bugfix_disagreement(r, names, labels, 2, &md);
	ASSERT_CONTAINS(md.ptr, "- rca-1 (claude/sonnet): reads past the end "
				"in src/parse.c:42, confidence high\n");
	ASSERT_CONTAINS(md.ptr, "- rca-2 (codex/o3): lex races in src/lex.c, "
				"confidence low\n");
	ASSERT_CONTAINS(md.ptr, "- `rca-1`");
	ASSERT_CONTAINS(md.ptr, "- `rca-2`");
	ASSERT_CONTAINS(md.ptr, "- `all`");
	buf_reset(&md);
	bugfix_disagreement(r, names, NULL, 2, &md);
	ASSERT_CONTAINS(md.ptr, "- rca-2: lex races in src/lex.c, confidence "
				"low\n");
	buf_release(&md);
	free_all(r, 2);
}

/* ---- the fix plan ---- */

TEST(plan_check_names_the_field)
{
	static const struct {
		const char *path, *value, *msg;
	} cases[] = {
		{ "steps", "[]",
		  "fix-plan.json: steps: expected a non-empty list of "
		  "objects, got an empty list" },
		{ "steps", NULL,
		  "steps: expected a non-empty list of objects, "
		  "got nothing" },
		{ "steps.1.files", NULL,
		  "steps[1].files: expected a list of strings, got nothing" },
		{ "steps.0.description", "''",
		  "steps[0].description: expected a non-empty string" },
		{ "technical_approach", NULL,
		  "technical_approach: expected an object" },
		{ "technical_approach.fix_strategy", "7",
		  "technical_approach.fix_strategy: expected a non-empty "
		  "string, got 7" },
		{ "test_plan.commands", "'make'",
		  "test_plan.commands: expected a list of strings, got "
		  "'make'" },
		{ "risk.mitigation", "[]",
		  "risk.mitigation: expected a string, got an empty list" },
	};
	json_t *r[1] = { rca("src/parse.c", 42, "logic", "s") };
	struct bugfix_consolidated c = { 0 };
	struct err e = ERR_INIT;
	size_t i;

	ASSERT_OK(bugfix_consolidate(r, names, 1, 0, "b", "r", NULL, &c, &e),
		  &e);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		json_t *plan = json_deep_copy(c.plan);

		set_at(plan, cases[i].path,
		       cases[i].value ? doc(cases[i].value) : NULL);
		if (bugfix_plan_check("fix-plan.json", plan, &e) !=
		    BATON_ECONTRACT)
			test_fail(__FILE__, __LINE__, "case %zu (%s) passed", i,
				  cases[i].path);
		ASSERT_CONTAINS(e.msg, cases[i].msg);
		json_decref(plan);
	}
	bugfix_consolidated_release(&c);
	free_all(r, 1);
}

/* ---- review verdicts ---- */

#define REVIEW_OK                                                              \
	"{'status': 'approved', 'summary': 'fine',"                            \
	" 'findings': [{'severity': 'low', 'description': 'nit',"              \
	"   'file': 'a.c', 'line': 3, 'fix_type': 'style'}],"                  \
	" 'acceptance_criteria_verification': [{'id': 'AC1',"                  \
	"   'verified': true, 'evidence': 'test passes'}],"                    \
	" 'requirements_coverage': {'covered': 4}}"

static int
review(enum bugfix_review_kind k, json_t *v, const char **status, struct err *e)
{
	return bugfix_review_check(k, "code-review-codex-o3-3-v2.json", v,
				   status, e);
}

TEST(review_valid_for_each_kind)
{
	static const enum bugfix_review_kind kinds[] = { BUGFIX_PLAN_REVIEW,
							 BUGFIX_CODE_REVIEW,
							 BUGFIX_PHASED_REVIEW };
	struct err e = ERR_INIT;
	const char *status;
	json_t *v = doc(REVIEW_OK);
	size_t i;

	for (i = 0; i < ARRAY_SIZE(kinds); i++) {
		status = NULL;
		ASSERT_OK(review(kinds[i], v, &status, &e), &e);
		ASSERT_STREQ(status, "approved");
	}
	/* a phased review needs neither coverage nor AC verification */
	set_at(v, "requirements_coverage", NULL);
	set_at(v, "acceptance_criteria_verification", NULL);
	ASSERT_OK(review(BUGFIX_PHASED_REVIEW, v, &status, &e), &e);
	json_decref(v);
}

TEST(review_needs_changes_without_findings)
{
	struct err e = ERR_INIT;
	const char *status = "untouched";
	json_t *v = doc(REVIEW_OK);

	set_at(v, "status", json_string("needs_changes"));
	ASSERT_OK(review(BUGFIX_CODE_REVIEW, v, &status, &e), &e);
	ASSERT_STREQ(status, "needs_changes");
	status = "untouched";
	set_at(v, "findings", json_array());
	ASSERT_EQ(review(BUGFIX_CODE_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_STREQ(e.msg, "code-review-codex-o3-3-v2.json: findings: "
			    "expected at least one finding when status is "
			    "needs_changes, got none");
	ASSERT_STREQ(status, "untouched");
	set_at(v, "findings", NULL);
	ASSERT_EQ(review(BUGFIX_CODE_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, ": findings: expected at least one finding");
	json_decref(v);
}

TEST(review_needs_clarification_without_questions)
{
	struct err e = ERR_INIT;
	const char *status;
	json_t *v = doc(REVIEW_OK);

	set_at(v, "status", json_string("needs_clarification"));
	ASSERT_EQ(review(BUGFIX_PLAN_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, ": questions: expected at least one question "
			       "when status is needs_clarification, got none");
	set_at(v, "questions", doc("['which input?']"));
	ASSERT_OK(review(BUGFIX_PLAN_REVIEW, v, &status, &e), &e);
	ASSERT_STREQ(status, "needs_clarification");
	set_at(v, "questions", doc("[3]"));
	ASSERT_EQ(review(BUGFIX_PLAN_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, ": questions[0]: expected a string, got 3");
	json_decref(v);
}

TEST(review_code_needs_ac_verification)
{
	struct err e = ERR_INIT;
	const char *status;
	json_t *v = doc(REVIEW_OK);

	set_at(v, "acceptance_criteria_verification", NULL);
	ASSERT_OK(review(BUGFIX_PLAN_REVIEW, v, &status, &e), &e);
	ASSERT_EQ(review(BUGFIX_CODE_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_STREQ(e.msg, "code-review-codex-o3-3-v2.json: "
			    "acceptance_criteria_verification: expected a "
			    "list of objects, got nothing");
	set_at(v, "acceptance_criteria_verification",
	       doc("[{'id': 'AC1', 'verified': 'yes', 'evidence': 'e'}]"));
	ASSERT_EQ(review(BUGFIX_CODE_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, ": acceptance_criteria_verification[0].verified:"
			       " expected true or false, got 'yes'");
	json_decref(v);
}

TEST(review_plan_needs_requirements_coverage)
{
	struct err e = ERR_INIT;
	const char *status;
	json_t *v = doc(REVIEW_OK);

	set_at(v, "requirements_coverage", json_null());
	ASSERT_OK(review(BUGFIX_CODE_REVIEW, v, &status, &e), &e);
	ASSERT_EQ(review(BUGFIX_PLAN_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, ": requirements_coverage: expected any value, "
			       "got null");
	set_at(v, "requirements_coverage", NULL);
	ASSERT_EQ(review(BUGFIX_PLAN_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "got nothing");
	json_decref(v);
}

TEST(review_bad_severity_and_status)
{
	struct err e = ERR_INIT;
	const char *status;
	json_t *v = doc(REVIEW_OK);

	set_at(v, "findings",
	       doc("[{'severity': 'high', 'description': 'a'},"
		   " {'severity': 'blocker',"
		   "  'description': 'b'}]"));
	ASSERT_EQ(review(BUGFIX_CODE_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, ": findings[1].severity: expected critical, "
			       "high, medium, low or info, got 'blocker'");
	set_at(v, "findings",
	       doc("[{'severity': 'high', 'description': 'a',"
		   " 'line': -1}]"));
	ASSERT_EQ(review(BUGFIX_CODE_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, ": findings[0].line: expected a line number");
	set_at(v, "findings", NULL);
	set_at(v, "status", json_string("lgtm"));
	ASSERT_EQ(review(BUGFIX_CODE_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, ": status: expected approved, needs_changes, "
			       "needs_clarification or rejected, got 'lgtm'");
	set_at(v, "status", json_string("rejected"));
	set_at(v, "summary", NULL);
	ASSERT_EQ(review(BUGFIX_CODE_REVIEW, v, &status, &e), BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, ": summary: expected a non-empty string");
	json_decref(v);
}

/* ---- the implementation's result ---- */

TEST(impl_check)
{
	struct err e = ERR_INIT;
	json_t *v = doc("{'status': 'complete', 'summary': 'fixed',"
			" 'files_modified': ['a.c']}");

	ASSERT_OK(bugfix_impl_check("impl-result.json", v, &e), &e);
	set_at(v, "files_created", doc("['t.c', {}]"));
	ASSERT_EQ(bugfix_impl_check("impl-result.json", v, &e),
		  BATON_ECONTRACT);
	ASSERT_STREQ(e.msg, "impl-result.json: files_created[1]: expected a "
			    "string, got an object");
	set_at(v, "files_created", NULL);
	set_at(v, "status", json_string("done"));
	ASSERT_EQ(bugfix_impl_check("impl-result.json", v, &e),
		  BATON_ECONTRACT);
	ASSERT_CONTAINS(e.msg, "status: expected complete, partial or failed, "
			       "got 'done'");
	json_decref(v);
}

/* ---- summaries ---- */

static char *
summary(const char *type, json_t *v, size_t max)
{
	struct buf b = BUF_INIT;

	bugfix_summary(type, v, max, &b);
	return buf_detach(&b, NULL);
}

TEST(summary_of_each_record)
{
	json_t *r = rca("src/parse.c", 42, "logic", "reads\npast the end");
	json_t *rv = doc(REVIEW_OK);
	json_t *im = doc("{'status': 'partial', 'summary': 'half',"
			 " 'files_modified': ['a.c'],"
			 " 'files_created': ['t/a.c']}");
	json_t *pl = doc("{'steps': [{'description': 'test', 'files': []},"
			 " {'description': 'fix', 'files': []}]}");
	char *s;

	s = summary("rca", r, 500);
	ASSERT_STREQ(s, "root cause: reads past the end (src/parse.c:42, "
			"confidence high, category logic)");
	free(s);
	set_at(rv, "findings",
	       doc("[{'severity': 'critical', 'description': 'a'},"
		   " {'severity': 'high', 'description': 'b'},"
		   " {'severity': 'low', 'description': 'c'}]"));
	set_at(rv, "acceptance_criteria_verification",
	       doc("[{'id': 'AC1', 'verified': true, 'evidence': ''},"
		   " {'id': 'AC2', 'verified': false, 'evidence': ''}]"));
	s = summary("code-review", rv, 500);
	ASSERT_STREQ(s, "approved: fine; 3 findings (2 high+); AC 1/2 "
			"verified");
	free(s);
	set_at(rv, "findings", NULL);
	set_at(rv, "acceptance_criteria_verification", NULL);
	s = summary("plan-review", rv, 500);
	ASSERT_STREQ(s, "approved: fine; no findings");
	free(s);
	s = summary("implementation", im, 500);
	ASSERT_STREQ(s, "partial: half; files: a.c, t/a.c");
	free(s);
	s = summary("plan", pl, 500);
	ASSERT_STREQ(s, "2 steps: test; fix");
	free(s);
	s = summary("verify", im, 500);
	ASSERT_STREQ(s, "half");
	free(s);
	json_decref(r);
	json_decref(rv);
	json_decref(im);
	json_decref(pl);
}

TEST(summary_cuts_on_a_utf8_boundary)
{
	/* "é" is two bytes: a cut at 10 would split the third one */
	json_t *v = doc("{'status': 'complete', 'summary': 'éééééé'}");
	char *s;

	s = summary("implementation", v, 13);
	/* "complete: " is 10 bytes; 13 - 3 leaves room for one é */
	ASSERT_STREQ(s, "complete: ...");
	free(s);
	s = summary("implementation", v, 16);
	ASSERT_STREQ(s, "complete: é...");
	free(s);
	s = summary("implementation", v, 17);
	ASSERT_STREQ(s, "complete: éé...");
	ASSERT(strlen(s) <= 17);
	free(s);
	s = summary("implementation", v, 22);
	ASSERT_STREQ(s, "complete: éééééé");
	free(s);
	json_decref(v);
}

/* ---- steps a phased review hits ---- */

#define PLAN4                                                                  \
	"{'steps': [{'description': '1', 'files': ['t/p_test.c']},"            \
	" {'description': '2', 'files': ['src/parse.c']},"                     \
	" {'description': '3', 'files': ['parse.h', 'src/lex.c']},"            \
	" {'description': '4', 'files': []}]}"

TEST(steps_hit_by_file_and_suffix)
{
	json_t *plan = doc(PLAN4);
	json_t *rv = doc("{'findings': [{'file': './src/parse.c'},"
			 " {'file': 'include/parse.h'},"
			 " {'file': 'xparse.h'}, {'description': 'x'}]}");
	int hit[4] = { 7, 7, 7, 7 };

	ASSERT_EQ(bugfix_steps_hit(plan, rv, 1, 4, hit), 2);
	ASSERT_EQ(hit[0], 0);
	ASSERT_EQ(hit[1], 1);
	ASSERT_EQ(hit[2], 1);
	ASSERT_EQ(hit[3], 0);
	/* a batch: hit[] is indexed from first */
	ASSERT_EQ(bugfix_steps_hit(plan, rv, 3, 4, hit), 1);
	ASSERT_EQ(hit[0], 1);
	ASSERT_EQ(hit[1], 0);
	json_decref(plan);
	json_decref(rv);
}

TEST(steps_hit_none_marks_all)
{
	json_t *plan = doc(PLAN4);
	/* "xparse.h" does not end in "/parse.h": it names no step */
	json_t *rv = doc("{'findings': [{'file': 'other.c'},"
			 " {'file': 'xparse.h'}]}");
	int hit[3] = { 0, 0, 0 };

	ASSERT_EQ(bugfix_steps_hit(plan, rv, 2, 4, hit), 3);
	ASSERT_EQ(hit[0] + hit[1] + hit[2], 3);
	json_decref(rv);
	rv = doc("{'status': 'needs_changes'}");
	hit[0] = hit[1] = 0;
	ASSERT_EQ(bugfix_steps_hit(plan, rv, 1, 2, hit), 2);
	ASSERT_EQ(hit[0] + hit[1], 2);
	ASSERT_EQ(bugfix_steps_hit(plan, rv, 3, 2, hit), 0);
	json_decref(plan);
	json_decref(rv);
}
