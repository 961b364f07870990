#!/bin/bash
test_description='baton tui at 80x24 and 200x60: the board shows the tasks and their states, a run moves live while it is open, its gate question appears and the a key approves it, a resize redraws, the selection stays on its run when a new one comes in above it, and the agent output streams'
. "$(dirname "$0")/../lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/tui.sh"

command -v tmux >/dev/null || {
	echo "tmux is missing (tools/deps.sh installs it)" >&2
	exit 1
}

gate='policies: {require_approval_at_stages: [executing]}'

# The fake agent, but with STREAM_GO set its execute call prints a line,
# waits (bounded) until the file STREAM_GO exists, then prints another:
# output that arrives while the TUI watches. (STREAM_GO is under
# FAKE_STATE, the one folder of the trash the sandbox lets it see.)
cat >stream-agent <<'AGENT'
#!/bin/bash
if [ -n "${STREAM_GO:-}" ] && [ "$BATON_STAGE_KIND" = execute ]; then
	echo "streamed line one"
	i=0
	while [ ! -e "$STREAM_GO" ] && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	echo "streamed line two"
fi
exec "$FAKE_AGENT" "$@"
AGENT
chmod +x stream-agent

test_expect_success 'setup: a repository with two tasks' '
	make_repo d &&
	baton_init_with_agent d "$gate
providers:
  fake: {type: command, command: [\"$TRASH_DIRECTORY/stream-agent\"]}" &&
	cd d &&
	"$BATON" task add "First task" >/dev/null &&
	"$BATON" task add "Second task" --priority 2 >/dev/null
'

test_expect_success 'at 80x24 the board shows the tasks and their states' '
	cd d &&
	tui_start 80 24 &&
	tui_wait "no runs yet" &&
	tui_wait "tasks 2: queued 2" &&
	tui_wait "questions: none" &&
	tui_keys Tab &&
	tui_wait "[TASKS]" &&
	tui_screen >../screen &&
	grep -E "^> t1 +queued +- +First task" ../screen &&
	grep -E "^  t2 +queued +- +Second task" ../screen &&
	test "$(wc -l <../screen)" -le 24 &&
	awk "length > 80 { exit 1 }" ../screen &&
	tail -n 1 ../screen | grep -F "a:approve x:reject c:changes p:pause r:resume A:abort s:steer" &&
	tui_keys Tab &&
	tui_wait "[RUNS]"
'

test_expect_success 'a run started elsewhere appears and moves while the TUI is open; its gate is asked' '
	cd d &&
	bg_start "$TRASH_DIRECTORY/run1" "$BATON" run "Live run" &&
	id=$(wait_for_new_run "") &&
	echo "$id" >../id &&
	tui_wait "$id" &&
	tui_wait "questions: $id before executing" &&
	tui_screen >../screen &&
	grep -E "^> $id +waiting_for_approval" ../screen &&
	grep -F "timeline $id" ../screen &&
	grep -F -- "-> waiting_for_approval" ../screen
'

test_expect_success 'the a key approves: the run goes on to its end, recorded as approve' '
	cd d &&
	id=$(cat ../id) &&
	tui_keys a &&
	rc=$(bg_wait ../run1) &&
	test "$rc" = 0 &&
	"$BATON" events "$id" --json |
		jq -r "select(.type == \"transition\" and .from == \"waiting_for_approval\") | .data.decision" >../actual &&
	echo approve >../expect &&
	test_cmp ../expect ../actual &&
	st=$(run_status "$id") &&
	tui_wait "questions: none" &&
	tui_wait_re "^> $id +$st" &&
	tui_wait "output 0"
'

test_expect_success 'a resize to 200x60 redraws the whole frame, panes side by side' '
	cd d &&
	id=$(cat ../id) &&
	tui_resize 200 60 &&
	wait_for "test \"\$(tui_screen | wc -l)\" = 60" &&
	tui_wait "timeline $id" &&
	tui_screen >../screen &&
	sed -n 60p ../screen | grep -F "a:approve" &&
	grep -E "^timeline $id .*\|output 0" ../screen &&
	awk "length > 200 { exit 1 }" ../screen
'

test_expect_success 'the agent output streams into the output pane as it is written' '
	cd d &&
	first=$(cat ../id) &&
	STREAM_GO="$FAKE_STATE/stream-go" \
		bg_start "$TRASH_DIRECTORY/run2" "$BATON" run "Streaming run" &&
	id=$(wait_for_new_run "$first") &&
	tui_wait "questions: $id before executing" &&
	tui_wait_re "^> $first +merge_ready" &&
	tui_wait_re "^  $id +waiting_for_approval" &&
	tui_keys g &&
	tui_wait "> $id" &&
	tui_keys a &&
	tui_wait "streamed line one" &&
	tui_screen | grep -E "\|output [0-9]+-execute-fake-0.stdout" &&
	tui_wait "|streamed line one" &&
	! tui_screen | grep -F "streamed line two" &&
	touch "$FAKE_STATE/stream-go" &&
	tui_wait "streamed line two" &&
	rc=$(bg_wait ../run2) &&
	test "$rc" = 0
'

test_expect_success 'q quits and gives the terminal back' '
	cd d &&
	tui_keys q &&
	wait_for "! tui has-session -t tui 2>/dev/null" &&
	! test -s tui.err
'

tui_stop
test_done
