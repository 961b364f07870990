#!/bin/bash
test_description='the loop, assist and research pipelines end to end with the real Claude Code CLI against the mock model server'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents claude

export MOCK_KEY=sk-mock-seeds-0123456789

# One rule per stage, matched on the first line of baton's built-in
# prompt of each kind; records come back as the final answer's ```json
# block, and the acting stages write through the CLI's own Write tool.
block() {
	printf 'Here is the record.\n\n```json\n%s\n```\n' "$1"
}
loop_plan='{"done": false, "summary": "nothing written yet",
 "step": "write NOTES with one line", "effects": [{"kind": "write", "target": "NOTES"}]}'
loop_eval='{"status": "done", "summary": "NOTES holds the line"}'
claims='{"claims": [{"id": "c1", "text": "SQLite is embedded in the binary"},
 {"id": "c2", "text": "WAL mode allows concurrent readers"}]}'
evidence() {
	printf '{"claim": "%s", "verdict": "supported", "confidence": 0.9,
 "evidence": [{"source": "https://sqlite.org/%s", "quote": "as documented", "supports": true}]}' "$1" "$1"
}
challenge='{"challenges": [{"claim": "c2", "counter_evidence": "a writer still blocks writers", "severity": "low"}]}'
judge='{"verdict": "pass", "weak_claims": [], "reasons": "both claims are backed"}'
jq -n --arg plan "$(block "$loop_plan")" --arg eval "$(block "$loop_eval")" \
	--arg claims "$(block "$claims")" --arg c1 "$(block "$(evidence c1)")" \
	--arg c2 "$(block "$(evidence c2)")" --arg ch "$(block "$challenge")" \
	--arg judge "$(block "$judge")" '
	{rules: [
	  {match: "The claim to research (c1)", text: $c1},
	  {match: "The claim to research (c2)", text: $c2},
	  {match: "You plan a piece of research", text: $claims},
	  {match: "You challenge a piece of research", text: $ch},
	  {match: "You write the report of a piece of research",
	   text: "# Report\n\nSQLite is embedded (c1); WAL lets readers run beside a writer (c2).\n"},
	  {match: "You judge a research report", text: $judge},
	  {match: "You are the planner of a bounded agent loop", text: $plan},
	  {match: "You are the implementer of one step of a bounded agent loop",
	   actions: [{write: {path: "NOTES", content: "one line\n"}}],
	   text: "Wrote NOTES."},
	  {match: "You evaluate one iteration of a bounded agent loop", text: $eval},
	  {match: "You are the planner of a software change",
	   text: "# Plan\n\n1. Write DONE with the word done.\n"},
	  {match: "You are the implementer of a software change",
	   actions: [{write: {path: "DONE", content: "done\n"}}],
	   text: "Wrote DONE."}
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
roles: {default: claude}
loop: {profile: strict, grants: [\"write:NOTES\"]}" &&
	(cd repo && "$BATON" config validate)
'

test_expect_success 'loop: claude plans, acts under a strict grant, is observed and evaluated: completed, receipts intact' '
	cd repo &&
	test_expect_code 0 "$BATON" run --pipeline loop "Keep a NOTES file with one line" >../loop.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = completed &&
	transitions "$id" >../actual &&
	printf "%s\n" created planning acting observing evaluating completed >../expect &&
	test_cmp ../expect ../actual &&
	git show "baton/$id:NOTES" >../notes &&
	test_grep "one line" ../notes &&
	"$BATON" receipts "$id" --json >../receipts.json &&
	test_jq ".[0].phase == \"act\" and .[0].decision == \"granted\" and .[0].grants[0].by == \"grant write:NOTES\" and .[0].files == [\"NOTES\"]" ../receipts.json &&
	"$BATON" receipts verify "$id"
'

test_expect_success 'assist: claude plans and executes, baton verifies and reports, and approval completes it' '
	cd repo &&
	bg_start ../assist "$BATON" run --pipeline assist "Leave a DONE file" &&
	wait_for "test -n \"\$(newest_run)\" && test \"\$(run_status \$(newest_run))\" = waiting_for_approval" 120 &&
	id=$(newest_run) &&
	"$BATON" show "$id" --json >../show.json &&
	test_jq ".state == \"awaiting_feedback\" and .progress.ask.kind == \"feedback\"" ../show.json &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../assist)" = 0 &&
	test "$(run_status "$id")" = completed &&
	git show "baton/$id:DONE" >../done &&
	test_grep "done" ../done &&
	"$BATON" show --json "$id" >../show2.json &&
	test_jq "[.calls[] | select(.provider == \"claude\" and .failure == \"none\")] | length == 2" ../show2.json
'

test_expect_success 'research: claims, evidence for both at once, a challenge, the report and a passing judge, all by claude, without a worktree' '
	cd repo &&
	test_expect_code 0 "$BATON" run --pipeline research "Is SQLite a good default store?" >../research.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = completed &&
	transitions "$id" >../actual &&
	printf "%s\n" created planning collecting challenging composing judging completed >../expect &&
	test_cmp ../expect ../actual &&
	"$BATON" show "$id" --json >../research.json &&
	test_jq "[.research.claims[] | .id] == [\"c1\", \"c2\"] and all(.research.claims[]; (.evidence | length) == 1)" ../research.json &&
	test_jq ".worktree == null" ../research.json &&
	test_grep "WAL lets readers" ".baton/runs/$id/report.md"
'

test_expect_success 'the mock saw the key; nothing baton kept holds it' '
	test_grep "$MOCK_KEY" mock.log &&
	test_must_fail grep -r -l "$MOCK_KEY" repo/.baton/runs repo/.baton/baton.db
'

test_done
