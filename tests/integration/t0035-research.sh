#!/bin/bash
test_description='the research pipeline with scripted agents: claims collected at once, a judge rework of only the weak claims, show and the API, max_iterations, and broken claims'
. "$(dirname "$0")/../lib/test-lib.sh"

export MOCK_KEY=sk-mock-research-0123456789
question='is write-ahead logging faster than a rollback journal'

# research_run REPO NAME [ENV=VALUE...]: a foreground research run in REPO
# with the fake agent's knobs ENV=VALUE; its id goes to NAME.id, its
# output to NAME.out and its exit status to NAME.rc (in the trash
# directory).
research_run() {
	local repo=$1 name=$2 rc=0
	shift 2
	(cd "$repo" && env "$@" "$BATON" run --pipeline research "$question") \
		>"$TRASH_DIRECTORY/$name.out" 2>&1 || rc=$?
	echo "$rc" >"$TRASH_DIRECTORY/$name.rc"
	(cd "$repo" && newest_run) >"$TRASH_DIRECTORY/$name.id"
	test -s "$TRASH_DIRECTORY/$name.id"
}

# events_of RUN: the run's events as one JSON array.
events_of() {
	"$BATON" events "$1" --json | jq -s .
}

# collect_calls RUN CLAIM: first-attempt collect calls for CLAIM.
collect_calls() {
	grep -c "^collect 0 stage=collect-$2 " "$FAKE_STATE/$1.calls" || true
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo &&
	(cd repo && "$BATON" pipeline show research >../research.txt) &&
	test_grep "planning" research.txt &&
	test_grep "judging" research.txt
'

# --- five claims, collected at once ---------------------------------------

test_expect_success 'five claims: the run goes planning to completed (exit 0)' '
	research_run repo five FAKE_CLAIMS=5 FAKE_SLEEP_KIND=collect FAKE_SLEEP=2 &&
	test "$(cat five.rc)" = 0 &&
	cd repo &&
	id=$(cat ../five.id) &&
	test "$(run_field "$id" pipeline)" = research &&
	test "$(run_status "$id")" = completed &&
	test "$(run_field "$id" outcome)" = completed &&
	cat >../expect <<-\EOF &&
	created
	planning
	collecting
	challenging
	composing
	judging
	completed
	EOF
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual
'

test_expect_success 'the five researchers ran at once (claim_collected times overlap)' '
	cd repo &&
	id=$(cat ../five.id) &&
	events_of "$id" >../events.json &&
	jq "[.[] | select(.type == \"claim_collected\") | .data]" ../events.json >../collected.json &&
	test_jq "[.[].claim] | sort == [\"c1\", \"c2\", \"c3\", \"c4\", \"c5\"]" ../collected.json &&
	test_jq "all(.[]; .round == 1 and .verdict == \"supported\")" ../collected.json &&
	# every researcher started before any ended
	test_jq "([.[].started_ms] | max) < ([.[].ended_ms] | min)" ../collected.json &&
	test_jq "[.[] | select(.type == \"claim_started\")] | length == 5" ../events.json &&
	# the parent merged them in one write, after the last one
	test_jq "[.[] | select(.type == \"evidence_merged\")] | length == 1" ../events.json &&
	test_jq "([.[] | select(.type == \"claim_collected\") | .seq] | max) < ([.[] | select(.type == \"evidence_merged\") | .seq] | max)" ../events.json
'

test_expect_success 'ten claims: at most eight researchers at a time' '
	research_run repo ten FAKE_CLAIMS=10 FAKE_SLEEP_KIND=collect FAKE_SLEEP=1 &&
	test "$(cat ten.rc)" = 0 &&
	cd repo &&
	id=$(cat ../ten.id) &&
	events_of "$id" >../events.json &&
	jq "[.[] | select(.type == \"claim_collected\") | .data] | sort_by(.started_ms)" ../events.json >../collected.json &&
	test_jq "length == 10" ../collected.json &&
	# the first eight at once; the last two only after one of them ended
	test_jq "(.[0:8] | map(.started_ms) | max) < (.[0:8] | map(.ended_ms) | min)" ../collected.json &&
	test_jq ".[8].started_ms >= (.[0:8] | map(.ended_ms) | min)" ../collected.json
'

test_expect_success 'each claim has its evidence file; no worktree was made' '
	cd repo &&
	id=$(cat ../five.id) &&
	dir=.baton/runs/$id &&
	for c in c1 c2 c3 c4 c5; do
		test_path_is_file "$dir/evidence/$c-v1.json" || return 1
	done &&
	test_path_is_file "$dir/claims.json" &&
	test_path_is_file "$dir/challenge.json" &&
	test_path_is_file "$dir/judgement-v1.json" &&
	test_jq ".verdict == \"pass\"" "$dir/judgement-v1.json" &&
	test "$(run_field "$id" worktree)" = null &&
	test "$(run_field "$id" branch)" = null &&
	git worktree list >../wt &&
	test_line_count = 1 ../wt
'

test_expect_success 'baton show lists the claims and the report' '
	cd repo &&
	id=$(cat ../five.id) &&
	"$BATON" show "$id" >../show.txt &&
	test_grep "^claims (round 1):" ../show.txt &&
	for c in c1 c2 c3 c4 c5; do
		grep -E "^  $c +supported +0\.80 +2 evidence  claim ${c#c} about" ../show.txt || return 1
	done &&
	test_grep "^report    .*/runs/$id/report.md$" ../show.txt &&
	test_path_is_file ".baton/runs/$id/report.md" &&
	test_grep "^# Report" ".baton/runs/$id/report.md"
'

test_expect_success 'show --json has research.claims with their evidence and the report path' '
	cd repo &&
	id=$(cat ../five.id) &&
	"$BATON" show "$id" --json >../show.json &&
	test_jq ".research.question == \"$question\"" ../show.json &&
	test_jq ".research.claims | length == 5" ../show.json &&
	test_jq "all(.research.claims[]; .status == \"supported\" and (.evidence | length) == 2 and .confidence == 0.8)" ../show.json &&
	test_jq ".research.claims[0].evidence[0].source | startswith(\"https://example.org/c1\")" ../show.json &&
	test_jq ".research.report == \"report.md\"" ../show.json &&
	test_jq ".research.report_path == (.run_dir + \"/report.md\")" ../show.json &&
	test_jq ".research.judgement.verdict == \"pass\"" ../show.json
'

test_expect_success 'every prompt reads the question; a collector reads its claim' '
	cd repo &&
	id=$(cat ../five.id) &&
	for k in claims challenge compose judge; do
		grep -q "^Question: $question" "$FAKE_STATE/$id.$k.1.prompt" || return 1
	done &&
	test_grep "## The claim to research (c3)" "$FAKE_STATE/$id.stage-collect-c3.1.prompt" &&
	test_grep "BATON_CLAIM_ID=c3" "$FAKE_STATE/$id.stage-collect-c3.1.env" &&
	test_grep "BATON_CLAIM=claim 3 about" "$FAKE_STATE/$id.stage-collect-c3.1.env" &&
	# the judge reads the report and the evidence
	test_grep "## The report (report.md)" "$FAKE_STATE/$id.judge.1.prompt" &&
	test_grep "## Evidence for claim c5" "$FAKE_STATE/$id.judge.1.prompt"
'

test_expect_success 'agents that answer in their final text (```json blocks, the report) are understood too' '
	research_run repo stdout FAKE_CLAIMS=2 FAKE_STDOUT_KINDS=any FAKE_COMPOSE_STDOUT=1 &&
	test "$(cat stdout.rc)" = 0 &&
	cd repo &&
	id=$(cat ../stdout.id) &&
	test "$(run_status "$id")" = completed &&
	test_jq ".claims | length == 2" ".baton/runs/$id/claims.json" &&
	test_jq ".claim == \"c2\"" ".baton/runs/$id/evidence/c2-v1.json" &&
	test_grep "^# Report" ".baton/runs/$id/report.md"
'

# --- a rework of the weak claims --------------------------------------------

test_expect_success 'a judge rework of c2 and c4: only they are collected again, then the run completes' '
	research_run repo rework FAKE_CLAIMS=5 FAKE_JUDGE=rework:c2,c4 &&
	test "$(cat rework.rc)" = 0 &&
	cd repo &&
	id=$(cat ../rework.id) &&
	test "$(run_status "$id")" = completed &&
	test "$(collect_calls "$id" c1)" = 1 &&
	test "$(collect_calls "$id" c2)" = 2 &&
	test "$(collect_calls "$id" c3)" = 1 &&
	test "$(collect_calls "$id" c4)" = 2 &&
	test "$(collect_calls "$id" c5)" = 1 &&
	test "$(grep -c "^judge 0 " "$FAKE_STATE/$id.calls")" = 2 &&
	transition_pairs "$id" >../pairs &&
	test_grep "^judging -> collecting$" ../pairs &&
	test "$(run_field "$id" review_loops)" = 1
'

test_expect_success 'the rework round is round 2, with versioned evidence and judgements' '
	cd repo &&
	id=$(cat ../rework.id) &&
	"$BATON" show "$id" --json >../rework.json &&
	test_jq ".research.round == 2" ../rework.json &&
	test_jq "[.research.claims[] | select(.rounds == 2) | .id] == [\"c2\", \"c4\"]" ../rework.json &&
	test_jq "[.research.claims[] | .file] == [\"evidence/c1-v1.json\", \"evidence/c2-v2.json\", \"evidence/c3-v1.json\", \"evidence/c4-v2.json\", \"evidence/c5-v1.json\"]" ../rework.json &&
	test_path_is_file ".baton/runs/$id/judgement-v1.json" &&
	test_jq ".verdict == \"rework\" and .weak_claims == [\"c2\", \"c4\"]" ".baton/runs/$id/judgement-v1.json" &&
	test_jq ".verdict == \"pass\"" ".baton/runs/$id/judgement-v2.json" &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"claim_collected\" and .data.round == 2) | .data.claim] | sort == [\"c2\", \"c4\"]" ../events.json &&
	# the second researcher of c2 was told why it was weak
	test_grep "## Why the judge found it weak" "$FAKE_STATE/$id.stage-collect-c2.2.prompt" &&
	test_grep "thin evidence for c2, c4" "$FAKE_STATE/$id.stage-collect-c2.2.prompt" &&
	test_grep "What was collected before (evidence/c2-v1.json)" "$FAKE_STATE/$id.stage-collect-c2.2.prompt"
'

# --- the API ------------------------------------------------------------------

test_expect_success 'the API serves the run with its research view, and the report' '
	cd repo &&
	id=$(cat ../rework.id) &&
	serve_http "$TRASH_DIRECTORY/srv" &&
	api_expect 200 GET "/api/v1/runs/$id" >../run.json &&
	test_jq ".research.claims | length == 5" ../run.json &&
	test_jq "all(.research.claims[]; (.evidence | length) > 0)" ../run.json &&
	test_jq ".research.report == \"report.md\"" ../run.json &&
	api_expect 200 GET "/api/v1/runs/$id/artifacts/report.md" >../report.md &&
	test_grep "^# Report" ../report.md &&
	kill "$(cat "$TRASH_DIRECTORY/srv.pid")" &&
	bg_wait "$TRASH_DIRECTORY/srv" >/dev/null
'

# --- the quality gate never passes --------------------------------------------

test_expect_success 'a judge that always asks for rework ends blocked: max_iterations_reached' '
	research_run repo always FAKE_CLAIMS=2 FAKE_JUDGE=rework-always:c1 &&
	test "$(cat always.rc)" = 3 &&
	cd repo &&
	id=$(cat ../always.id) &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = max_iterations_reached &&
	test "$(run_field "$id" max_review_loops)" = 3 &&
	test "$(run_field "$id" review_loops)" = 3 &&
	run_field "$id" reason >../reason &&
	test_grep "weak claims: c1" ../reason &&
	test_grep "max_iterations (3) is spent" ../reason &&
	# the first round and max_iterations rework rounds, c1 alone after the first
	test "$(grep -c "^judge 0 " "$FAKE_STATE/$id.calls")" = 4 &&
	test "$(collect_calls "$id" c1)" = 4 &&
	test "$(collect_calls "$id" c2)" = 1 &&
	test "$(run_field "$id" research.round)" = 4
'

# --- broken output --------------------------------------------------------------

test_expect_success 'a broken claims.json is retried once, then blocks the run naming the problem' '
	research_run repo broken FAKE_CLAIMS_MODE=invalid &&
	test "$(cat broken.rc)" = 3 &&
	cd repo &&
	id=$(cat ../broken.id) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "claims.json: invalid JSON at line 1" ../reason &&
	test_grep "still broken after one retry" ../reason &&
	test "$(grep -c "^claims " "$FAKE_STATE/$id.calls")" = 2 &&
	test_path_is_missing ".baton/runs/$id/evidence"
'

test_expect_success 'claims with one id twice block the run naming the id' '
	research_run repo dup FAKE_CLAIMS_MODE=dup &&
	test "$(cat dup.rc)" = 3 &&
	cd repo &&
	id=$(cat ../dup.id) &&
	run_field "$id" reason >../reason &&
	test_grep "claims.json: claims\[1\].id: .c1. is already the id of claims\[0\]" ../reason
'

test_expect_success 'a researcher that fails blocks the run naming its claim' '
	research_run repo failing FAKE_CLAIMS=3 FAKE_FAIL_STAGE=collect-c2 FAKE_FAIL_MODE=exit &&
	test "$(cat failing.rc)" = 3 &&
	cd repo &&
	id=$(cat ../failing.id) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "no evidence for claim c2" ../reason &&
	# the others are kept
	test "$(run_field "$id" "research.claims[0].status")" = collected &&
	test "$(run_field "$id" "research.claims[1].status")" = pending
'


# --- a stage budget on the collectors -----------------------------------------

# research_script FILE: a mock script for a research run of one claim whose
# judge always asks for rework (the mock keeps no state).
research_script() {
	jq -n '"```json\n" as $o | "\n```" as $c | {rules: [
	  {match: "You plan a piece of research",
	   text: ($o + ({claims: [{id: "c1", text: "WAL allows readers during a write"}]} | tojson) + $c)},
	  {match: "You are a researcher gathering evidence",
	   text: ($o + ({claim: "c1", verdict: "supported", confidence: 0.9,
			 evidence: [{source: "sqlite.org/wal.html", quote: "readers do not block writers", supports: true}]} | tojson) + $c)},
	  {match: "You challenge a piece of research",
	   text: ($o + ({challenges: []} | tojson) + $c)},
	  {match: "You write the report", text: "# Report\n\nYes.\n"},
	  {match: "You judge a research report",
	   text: ($o + ({verdict: "rework", weak_claims: ["c1"], reasons: "one source"} | tojson) + $c)}
	]}' >"$1"
}

test_expect_success 'a collect budget: the next round pauses once the researchers spent it; raised, resume goes on' '
	research_script budget-script.json &&
	mock_start budget budget-script.json &&
	make_repo budget &&
	baton_init_with_agent budget "providers:
  own: {type: openai, model: mock-model, base_url: \"$(mock_url budget)/v1\", api_key_env: MOCK_KEY, max_retries: 0}
roles: {default: own}
pipelines:
  capped:
    type: research
    workspace: none
    terminal: completed
    max_iterations: 3
    stages:
      - {name: plan, kind: claims}
      - {name: collect, kind: collect, budget: {max_tokens: 100}}
      - {name: challenge, kind: challenge}
      - {name: compose, kind: compose}
      - {name: judge, kind: judge, on_changes: collect}" &&
	cd budget &&
	test_expect_code 3 "$BATON" run --pipeline capped "$question" >../budget.out 2>&1 &&
	id=$(newest_run) &&
	"$BATON" show --json "$id" >../budget.json &&
	test_jq ".status == \"paused\" and .paused_at_status == \"collecting\"" ../budget.json &&
	test_jq ".reason == \"pipeline capped, stage collect: its budget.max_tokens (100) is spent: 120 tokens by its calls\"" ../budget.json &&
	# one round collected, the judge asked for another, which did not begin
	test_jq ".research.round == 1" ../budget.json &&
	test_jq "[.events[] | select(.type == \"claim_started\")] | length == 1" ../budget.json &&
	test_expect_code 1 "$BATON" resume "$id" 2>../budget-still.err &&
	test_grep "stays paused: pipeline capped, stage collect" ../budget-still.err &&
	sed -i "s/max_tokens: 100}/max_tokens: 100000}/" .baton/config.yaml &&
	test_expect_code 3 "$BATON" resume "$id" >../budget-resume.out 2>&1 &&
	"$BATON" show --json "$id" >../budget2.json &&
	test_grep "resuming at collecting" ../budget-resume.out &&
	# the run kept its pipeline'"'"'s bound when it took the raised budget
	test_jq ".max_review_loops == 3" ../budget2.json &&
	# rounds 2 to 4, until max_iterations (3 reworks) is spent
	test_jq ".research.round == 4" ../budget2.json &&
	test_jq "[.events[] | select(.type == \"claim_started\")] | length == 4" ../budget2.json &&
	test_jq ".status == \"blocked\" and .outcome == \"max_iterations_reached\"" ../budget2.json
'

test_done
