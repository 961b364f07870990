#!/bin/bash
test_description='pause takes effect at the next stage boundary; resume returns there'
. "$(dirname "$0")/../lib/test-lib.sh"

# The execute agent works until the test creates its release file
# (fake-agent's FAKE_WAIT_FOR): the test, not a timer, decides when the
# stage ends.
export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow

# start_slow_run NAME TASK: a run of TASK in the background (NAME.out,
# NAME.pid, NAME.rc in the trash directory) whose execute agent works until
# NAME.release exists; waits until that agent has started. The id goes to
# NAME.id.
start_slow_run() {
	local name=$TRASH_DIRECTORY/$1 last
	last=$(newest_run)
	FAKE_WAIT_FOR=$FAKE_STATE/$1.release bg_start "$name" "$BATON" run "$2" &&
		wait_for "test -n \"\$(newest_run)\" && test \"\$(newest_run)\" != \"$last\"" &&
		newest_run >"$name.id" &&
		wait_for_status "$(cat "$name.id")" executing &&
		wait_for "\"\$BATON\" events $(cat "$name.id") --json | grep -q \"agent_started.*-execute-\""
}

test_expect_success 'setup: a run whose execute stage works, in the background' '
	make_repo repo &&
	baton_init_with_agent repo &&
	cd repo &&
	start_slow_run run "Slow execution" &&
	cp ../run.id ../id
'

test_expect_success 'pause during executing is a request: the stage goes on' '
	cd repo &&
	id=$(cat ../id) &&
	"$BATON" pause "$id" >../pause.out &&
	test_grep "next stage boundary" ../pause.out &&
	run_field "$id" pause_requested >../req &&
	echo true >../expect &&
	test_cmp ../expect ../req &&
	"$BATON" status >../status &&
	test_grep "$id.*pausing" ../status &&
	# pausing twice is harmless
	"$BATON" pause "$id" >/dev/null
'

test_expect_success 'the run stops paused at the next boundary, paused_at_status validating' '
	cd repo &&
	id=$(cat ../id) &&
	# still executing: the pause waits for the stage
	test "$(run_status "$id")" = executing &&
	touch "$FAKE_STATE/run.release" &&
	wait_for_status "$id" paused &&
	run_field "$id" paused_at_status >../at &&
	echo validating >../expect &&
	test_cmp ../expect ../at &&
	test_path_is_missing ../run.rc
'

test_expect_success 'the executing stage was not cut short' '
	cd repo &&
	id=$(cat ../id) &&
	"$BATON" events "$id" --json >../events &&
	jq -s -r "[.[] | select(.type == \"agent_exited\" and (.data.call | test(\"execute\")))] | map(.data.outcome) | join(\",\")" ../events >../outcomes &&
	echo ok >../expect &&
	test_cmp ../expect ../outcomes &&
	git -C "$(run_field "$id" worktree)" show HEAD:feature.txt >../feature &&
	test_grep "feature line from $id" ../feature &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 1 ../calls &&
	# nothing of validating ran yet
	test_path_is_missing ".baton/runs/$id/validation.json"
'

test_expect_success 'resume continues to merge_ready; the background run exits 0' '
	cd repo &&
	id=$(cat ../id) &&
	"$BATON" resume "$id" >../resume.out &&
	rc=$(bg_wait ../run) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	run_field "$id" paused_at_status >../at &&
	echo null >../expect &&
	test_cmp ../expect ../at
'

test_expect_success 'the events show executing -> paused -> validating' '
	cd repo &&
	id=$(cat ../id) &&
	cat >../expect <<-\EOF &&
	created
	planning
	planned
	architecting
	architected
	executing
	paused
	validating
	reviewing
	verifying
	merge_ready
	EOF
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual &&
	"$BATON" events "$id" --json >../events &&
	jq -s -e "[.[] | select(.type == \"pause_requested\")] | length == 1" ../events &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 1 ../calls
'

test_expect_success 'resume before the boundary cancels the pause request' '
	cd repo &&
	start_slow_run run2 "Changed my mind" &&
	id=$(cat ../run2.id) &&
	"$BATON" pause "$id" >/dev/null &&
	"$BATON" resume "$id" >../resume2.out &&
	test "$(run_field "$id" pause_requested)" = false &&
	touch "$FAKE_STATE/run2.release" &&
	rc=$(bg_wait ../run2) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	transitions "$id" >../actual &&
	test_grep ! "^paused$" ../actual &&
	"$BATON" events "$id" --json >../events &&
	jq -s -e "[.[] | select(.type == \"pause_cancelled\")] | length == 1" ../events
'

test_expect_success 'a paused run whose driver went away is driven by resume' '
	cd repo &&
	start_slow_run run3 "Terminal closes while paused" &&
	id=$(cat ../run3.id) &&
	"$BATON" pause "$id" >/dev/null &&
	touch "$FAKE_STATE/run3.release" &&
	wait_for_status "$id" paused &&
	kill -TERM "$(cat ../run3.pid)" &&
	bg_wait ../run3 >/dev/null &&
	test "$(run_status "$id")" = paused &&
	test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	transition_pairs "$id" >../pairs &&
	test_grep "^paused -> validating$" ../pairs
'

test_expect_success 'a pause requested at a gate takes effect at the boundary after it' '
	make_repo gated &&
	baton_init_with_agent gated "policies: {require_approval_at_stages: [validating]}" &&
	cd gated &&
	start_slow_run gated "Gate and pause" &&
	id=$(cat ../gated.id) &&
	touch "$FAKE_STATE/gated.release" &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" pause "$id" >/dev/null &&
	"$BATON" approvals approve "$id" >/dev/null &&
	wait_for_status "$id" paused &&
	test "$(run_field "$id" paused_at_status)" = reviewing &&
	"$BATON" resume "$id" >/dev/null &&
	rc=$(bg_wait ../gated) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	transition_pairs "$id" >../pairs &&
	test_grep "^waiting_for_approval -> validating$" ../pairs &&
	test_grep "^validating -> paused$" ../pairs &&
	test_grep "^paused -> reviewing$" ../pairs
'

test_expect_success 'a pause asked for during the last stage is dropped when the run ends' '
	make_repo late &&
	baton_init_with_agent late &&
	cd late &&
	FAKE_FAIL_STAGE=verify FAKE_WAIT_FOR=$FAKE_STATE/late.release \
		bg_start ../late "$BATON" run "Pause too late" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" verifying &&
	wait_for "\"\$BATON\" events $id --json | grep -q \"agent_started.*-verify-\"" &&
	"$BATON" pause "$id" >/dev/null &&
	test "$(run_field "$id" pause_requested)" = true &&
	touch "$FAKE_STATE/late.release" &&
	rc=$(bg_wait ../late) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" pause_requested)" = false &&
	"$BATON" status >../status &&
	! grep -q pausing ../status
'

test_done
