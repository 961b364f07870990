#!/bin/bash
test_description='VCP bug-fix rework and resume with scripted agents: a rejected code review that is not the last is reworked like needs_changes, and a run killed during its fix resumes into the fix and on to merge_ready'
. "$(dirname "$0")/../lib/test-lib.sh"

bug='greet prints an empty greeting for an empty name'

events_of() {
	"$BATON" events "$1" --json | jq -s .
}

verdicts_of() {
	events_of "$1" | jq -r ".[] | select(.type == \"verdict\") | \"\(.data.stage) v\(.data.version) \(.data.status)\""
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo
'

# --- rework after an earlier code review ---------------------------------

test_expect_success 'code-review-1 (not the last) rejects: a fix round and code-review-1 again, not code_rejected' '
	cd repo &&
	FAKE_VERDICT_CODE_REVIEW_1=rejected,approved "$BATON" run --pipeline bugfix "$bug" >../rework.out 2>&1 &&
	id=$(newest_run) &&
	echo "$id" >../rework.id &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed &&
	fake_calls "$id" | grep -v "^rca \|^plan-review \|^implementation " >../actual &&
	cat >../expect <<-\EOF &&
	code-review 0 stage=code-review-1 step=- steps=- version=1
	fix 0 stage=fix step=- steps=- version=-
	code-review 0 stage=code-review-1 step=- steps=- version=2
	code-review 0 stage=code-review-2 step=- steps=- version=1
	code-review 0 stage=code-review-3 step=- steps=- version=1
	EOF
	test_cmp ../expect ../actual &&
	verdicts_of "$id" | grep "^code-review" >../verdicts &&
	cat >../expect <<-\EOF &&
	code-review-1 v1 rejected
	code-review-1 v2 approved
	code-review-2 v1 approved
	code-review-3 v1 approved
	EOF
	test_cmp ../expect ../verdicts &&
	transition_pairs "$id" >../pairs &&
	test_grep "^reviewing_code_1 -> fixing$" ../pairs &&
	test_grep "^fixing -> reviewing_code_1$" ../pairs &&
	# the fixer read the critical finding of the rejection
	test_grep "code-review-1" "$FAKE_STATE/$id.fix.1.prompt" &&
	test_jq ".status == \"rejected\"" ".baton/runs/$id/code-review-fake-default-1-v1.json" &&
	git show "baton/$id:feature.txt" >../feature &&
	test_grep "fix 1" ../feature &&
	test "$(run_field "$id" review_loops)" = 1
'

# --- resume during a fix -------------------------------------------------

test_expect_success 'kill -9 of baton while the fix agent works' '
	cd repo &&
	bg_start ../fixrun env FAKE_VERDICT_CODE_REVIEW_2=needs_changes,approved \
		FAKE_FAIL_STAGE=fix FAKE_FAIL_MODE=slow FAKE_FAIL_ATTEMPTS=1 \
		FAKE_WAIT_FOR="$FAKE_STATE/never" "$BATON" run --pipeline bugfix "$bug" &&
	before=$(cat ../rework.id) &&
	test -n "$before" &&
	wait_for "test \"\$(newest_run)\" != $before" &&
	wait_for "\"\$BATON\" events \"\$(newest_run)\" --json | grep -q \"agent_started.*fix\"" &&
	id=$(newest_run) &&
	echo "$id" >../fix.id &&
	test "$(run_status "$id")" = fixing &&
	"$BATON" events "$id" --json |
	jq -r "select(.type == \"agent_started\") | .data.pid" | tail -n 1 >../fix.agent &&
	process_is_alive "$(cat ../fix.agent)" &&
	kill -KILL "$(cat ../fixrun.pid)" &&
	rc=$(bg_wait ../fixrun) &&
	test "$rc" = 137 &&
	test "$(run_status "$id")" = fixing
'

test_expect_success 'baton resume runs the fix again and re-reviews code-review-2 only, to merge_ready' '
	cd repo &&
	id=$(cat ../fix.id) &&
	test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed &&
	transitions "$id" >../actual &&
	sed -n "/^fixing$/,\$p" ../actual >../after &&
	cat >../expect <<-\EOF &&
	fixing
	interrupted
	fixing
	reviewing_code_2
	reviewing_code_3
	merge_ready
	EOF
	test_cmp ../expect ../after &&
	# the analyses, plan review and implementation were not run again
	fake_calls "$id" rca >../calls && test_line_count = 2 ../calls &&
	fake_calls "$id" implementation >../calls && test_line_count = 1 ../calls &&
	fake_calls "$id" fix >../calls && test_line_count = 2 ../calls &&
	verdicts_of "$id" | grep "^code-review" >../verdicts &&
	cat >../expect <<-\EOF &&
	code-review-1 v1 approved
	code-review-2 v1 needs_changes
	code-review-2 v2 approved
	code-review-3 v1 approved
	EOF
	test_cmp ../expect ../verdicts &&
	git show "baton/$id:feature.txt" >../feature &&
	test_grep "fix" ../feature &&
	! process_is_alive "$(cat ../fix.agent)"
'

test_done
