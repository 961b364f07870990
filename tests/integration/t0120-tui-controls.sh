#!/bin/bash
test_description='baton tui keys reach the store through the commands'"'"' code paths: request changes with typed guidance, steer with typed text, pause, resume and abort of a running run, and Escape cancels a prompt'
. "$(dirname "$0")/../lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/tui.sh"

command -v tmux >/dev/null || {
	echo "tmux is missing (tools/deps.sh installs it)" >&2
	exit 1
}

gate='policies: {require_approval_at_stages: [executing]}'

# events RUN TYPE: the data of RUN's events of TYPE, one JSON a line.
events_of() {
	"$BATON" events "$1" --json | jq -c "select(.type == \"$2\") | .data"
}

test_expect_success 'setup: a run waits at its gate; the TUI is open at 80x24' '
	make_repo d &&
	baton_init_with_agent d "$gate" &&
	cd d &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow \
		FAKE_WAIT_FOR="$TRASH_DIRECTORY/go" \
		bg_start "$TRASH_DIRECTORY/run1" "$BATON" run "Controlled run" &&
	id=$(wait_for_new_run "") &&
	echo "$id" >../id &&
	wait_for "test \"\$(run_status $id)\" = waiting_for_approval" &&
	tui_start 80 24 &&
	tui_wait "questions: $id before executing"
'

test_expect_success 'Escape cancels a prompt: nothing is sent' '
	cd d &&
	id=$(cat ../id) &&
	tui_keys c &&
	tui_wait "request changes on $id:" &&
	tui_type "never sent" &&
	tui_wait "request changes on $id: never sent" &&
	tui_keys Escape &&
	tui_wait "cancelled" &&
	test "$(run_status $id)" = waiting_for_approval &&
	events_of "$id" steer >../steers &&
	test_line_count = 0 ../steers
'

test_expect_success 'c asks for guidance; Enter sends it as request-changes' '
	cd d &&
	id=$(cat ../id) &&
	tui_keys c &&
	tui_wait "request changes on $id:" &&
	tui_type "split it into smaller steps" &&
	tui_keys Enter &&
	tui_wait "$id: request-changes, now" &&
	"$BATON" events "$id" --json |
		jq -r "select(.type == \"transition\" and .from == \"waiting_for_approval\") | .data.decision + \" \" + .data.guidance" >../actual &&
	echo "request-changes split it into smaller steps" >../expect &&
	test_cmp ../expect ../actual &&
	wait_for "test -f \"$FAKE_STATE/$id.architect.2.prompt\"" &&
	test_grep "split it into smaller steps" "$FAKE_STATE/$id.architect.2.prompt" &&
	wait_for "test \"\$(run_status $id)\" = waiting_for_approval" &&
	tui_wait "questions: $id before executing"
'

test_expect_success 'a approves; the run executes (its agent waits)' '
	cd d &&
	id=$(cat ../id) &&
	tui_keys a &&
	wait_for "test \"\$(run_status $id)\" = executing" &&
	tui_wait "questions: none" &&
	tui_wait_re "^> $id +executing"
'

test_expect_success 's steers with the typed text' '
	cd d &&
	id=$(cat ../id) &&
	tui_keys s &&
	tui_wait "steer $id:" &&
	tui_type "mind the error paths" &&
	tui_keys Enter &&
	tui_wait "$id: guidance recorded for the next stage" &&
	events_of "$id" steer >../steers &&
	grep -F "\"text\":\"mind the error paths\"" ../steers &&
	tui_wait "steer  text=mind the error paths"
'

test_expect_success 'p asks the run to pause; r takes the request back' '
	cd d &&
	id=$(cat ../id) &&
	tui_keys p &&
	tui_wait "executing (pausing)" &&
	test "$(run_field $id pause_requested)" = true &&
	events_of "$id" pause_requested >../p &&
	test_line_count = 1 ../p &&
	tui_keys r &&
	tui_gone "(pausing)" &&
	events_of "$id" pause_cancelled >../pc &&
	test_line_count = 1 ../pc &&
	test "$(run_status $id)" = executing
'

test_expect_success 'A asks to confirm; n keeps the run, y aborts it' '
	cd d &&
	id=$(cat ../id) &&
	tui_keys A &&
	tui_wait "abort (y/n) $id:" &&
	tui_type n &&
	tui_keys Enter &&
	tui_wait "$id: not aborted" &&
	test "$(run_status $id)" = executing &&
	tui_keys A &&
	tui_wait "abort (y/n) $id:" &&
	tui_type y &&
	tui_keys Enter &&
	rc=$(bg_wait ../run1) &&
	test "$rc" = 3 &&
	test "$(run_status $id)" = aborted &&
	events_of "$id" abort_requested >../a &&
	test_line_count = 1 ../a &&
	tui_wait "executing -> aborted" &&
	tui_wait_re "^> $id +aborted"
'

test_expect_success 'a key on a run that cannot take it says why, as the command does' '
	cd d &&
	id=$(cat ../id) &&
	test_must_fail "$BATON" approvals approve "$id" 2>../cli.err &&
	msg=$(sed "s/^baton: //" ../cli.err) &&
	tui_keys a &&
	tui_wait "$msg" &&
	tui_screen | tail -n 2 | head -n 1 >../msg &&
	test_grep -F "$msg" ../msg &&
	test "$(run_status $id)" = aborted &&
	tui_keys q &&
	wait_for "! tui has-session -t tui 2>/dev/null"
'

tui_stop
test_done
