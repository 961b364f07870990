#!/bin/bash
test_description='the bugfix pipeline end to end with the real Claude Code CLI against the mock model server: two analyses, consolidation, plan review, the fix written by the CLI, three code reviews'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents claude

export MOCK_KEY=sk-mock-bugfix-0123456789

# The mock's replies, one rule per stage, matched on the first line of
# baton's built-in prompt of each stage kind. The records are the final
# answer's ```json block (the contract's alternative to BATON_ARTIFACT);
# the implementer also writes the fix through the CLI's own Write tool
# (after a Read: Claude Code refuses to overwrite a file it has not read).
rca='{"bug_report": {"summary": "greet with an empty name prints a bare greeting"},
 "root_cause": {"summary": "cli.sh greets whatever $2 holds, also nothing",
  "root_file": "cli.sh", "root_line": 5, "confidence": "high", "category": "validation"},
 "impact": {"blast_radius": "the greet command", "affected_files": ["cli.sh"],
  "regression_risk": "low"},
 "fix_constraints": {"must_preserve": ["hello, NAME for a name"],
  "safe_to_change": ["cli.sh"]},
 "recommended_approach": {"summary": "refuse an empty name", "estimated_complexity": "low"}}'
plan_review='{"status": "approved", "summary": "the diagnosis holds; the plan is minimal",
 "requirements_coverage": {"AC1": "step 2", "AC2": "step 1", "AC3": "step 3", "AC4": "step 2"},
 "findings": []}'
impl='{"status": "complete", "summary": "greet refuses an empty name",
 "files_modified": ["cli.sh"], "files_created": []}'
code_review='{"status": "approved", "summary": "the empty name is refused; nothing else changed",
 "acceptance_criteria_verification": [
  {"id": "AC1", "verified": true, "evidence": "greet with no name exits 2"},
  {"id": "AC2", "verified": true, "evidence": "make test"},
  {"id": "AC3", "verified": true, "evidence": "make test passes"},
  {"id": "AC4", "verified": true, "evidence": "the check is where the name is read"}],
 "findings": []}'
fixed_cli='#!/bin/sh
# A tiny command line tool.
case "$1" in
--help) echo "usage: cli.sh [--help] [greet NAME]" ;;
greet) [ -n "$2" ] || { echo "cli.sh: greet needs a NAME" >&2; exit 2; }; echo "hello, $2" ;;
*) echo "usage: cli.sh [--help] [greet NAME]" >&2; exit 2 ;;
esac
'
block() {
	printf 'Here is the record.\n\n```json\n%s\n```\n' "$1"
}
jq -n --arg rca "$(block "$rca")" --arg pr "$(block "$plan_review")" \
	--arg impl "$(block "$impl")" --arg cr "$(block "$code_review")" \
	--arg cli "$fixed_cli" '
	{rules: [
	  {match: "You are a root-cause analyst", text: $rca},
	  {match: "You review the diagnosis and the fix plan", text: $pr},
	  {match: "You fix a bug in the current directory",
	   actions: [{call: {name: "Read", args: {file_path: "{cwd}/cli.sh"}}},
	             {write: {path: "cli.sh", content: $cli}}],
	   text: $impl},
	  {match: "You fix what a review of a bug fix found", text: "Nothing left to fix."},
	  {match: "You review the fix of a bug", text: $cr}
	]}' >script.json || exit 1
mock_start mock script.json --require-key "$MOCK_KEY"

test_expect_success 'setup: claude plays every role, on the mock' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  claude:
    type: claude-code
    command: [\"$AGENTS_BIN/claude\"]
    model: claude-sonnet-4-5
    base_url: \"$(mock_url mock)\"
    api_key_env: MOCK_KEY
    max_retries: 0
    timeout_seconds: 180
roles: {default: claude}" &&
	(cd repo && "$BATON" config validate)
'

test_expect_success 'baton run --pipeline bugfix reaches merge_ready with claude in every stage' '
	cd repo &&
	test_expect_code 0 "$BATON" run --pipeline bugfix "cli.sh greet with no name prints a bare greeting" >../run.out 2>../run.err &&
	newest_run >../run-id &&
	id=$(cat ../run-id) &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed &&
	cat >../expect <<-\EOF &&
	created
	analyzing_1
	analyzing_2
	consolidating
	diagnosed
	reviewing_plan
	implementing
	reviewing_code_1
	reviewing_code_2
	reviewing_code_3
	merge_ready
	EOF
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual
'

test_expect_success 'the records from the final answers are in the run folder under their versioned names' '
	cd repo &&
	id=$(cat ../run-id) &&
	dir=.baton/runs/$id &&
	test_jq ".root_cause.root_file == \"cli.sh\"" "$dir/rca-claude-claude-sonnet-4-5-1-v1.json" &&
	test_jq ".root_cause.category == \"validation\"" "$dir/rca-claude-claude-sonnet-4-5-2-v1.json" &&
	test_jq ".agreed == true" "$dir/diagnosis.json" &&
	test_jq ".status == \"approved\"" "$dir/plan-review-claude-claude-sonnet-4-5-1-v1.json" &&
	test_jq ".status == \"complete\"" "$dir/impl-result.json" &&
	for i in 1 2 3; do
		test_jq ".status == \"approved\" and (.acceptance_criteria_verification | length) == 4" \
			"$dir/code-review-claude-claude-sonnet-4-5-$i-v1.json" || return 1
	done
'

test_expect_success 'the fix the CLI wrote is on the branch, and the checks pass on it' '
	cd repo &&
	id=$(cat ../run-id) &&
	"$BATON" diff "$id" >../diff &&
	test_grep "greet needs a NAME" ../diff &&
	wt=$(run_field "$id" worktree) &&
	test_expect_code 2 sh "$wt/cli.sh" greet &&
	(cd "$wt" && make test)
'

test_expect_success 'seven agent calls on record, all claude, with usage' '
	cd repo &&
	"$BATON" show --json "$(cat ../run-id)" >../show.json &&
	test_jq "[.calls[] | select(.provider == \"claude\" and .type == \"claude-code\" and .failure == \"none\")] | length == 7" ../show.json &&
	test_jq ".tokens_in > 0 and .tokens_out > 0" ../show.json
'

test_expect_success 'the mock saw the key; nothing baton kept holds it' '
	test_grep "$MOCK_KEY" mock.log &&
	test_must_fail grep -r -l "$MOCK_KEY" repo/.baton/runs repo/.baton/baton.db
'

test_done
