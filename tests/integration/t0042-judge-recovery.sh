#!/bin/bash
test_description='the judge recovers: a judge killed with serve is judged again by the next serve (its agent group killed); a judge that could not decide is tried again once its cooldown ends, and serve --exit-when-idle waits for it'
. "$(dirname "$0")/../lib/test-lib.sh"

# The worker: one line of work, committed by baton.
cat >"$TRASH_DIRECTORY/agent" <<-\EOF
#!/bin/sh
echo "$BATON_RUN_ID" >>"$BATON_WORKTREE/work.txt"
echo done
EOF
# The judge. MODE=hang: the first call starts a grandchild and waits on it
# (a judge in mid-judgement; in the sandbox its pids are of another
# namespace, so the test finds it by its command line); MODE=undecided: the first answer has no
# DECISION line; MODE=never: no answer has one. Every later call approves.
cat >"$TRASH_DIRECTORY/judge" <<-\EOF
#!/bin/sh
cat >/dev/null
n=$(cat "$FAKE_STATE/judge.calls" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$FAKE_STATE/judge.calls"
if [ "$n" = 1 ] && [ "$JUDGE_MODE" = hang ]; then
	sleep 61 &
	: >"$FAKE_STATE/judge.started"
	wait
fi
if { [ "$n" = 1 ] && [ "$JUDGE_MODE" = undecided ]; } ||
	[ "$JUDGE_MODE" = never ]; then
	echo "I cannot tell."
	exit 0
fi
echo "Looks right."
echo "DECISION: APPROVED"
EOF
chmod +x "$TRASH_DIRECTORY/agent" "$TRASH_DIRECTORY/judge"

setup_repo() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
  judger: {type: command, command: [\"$TRASH_DIRECTORY/judge\"]}
roles: {default: instant, judge: judger}
pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {cooldown_seconds: 1, sweep_seconds: 1, lease_seconds: 3${3:-}}
${2:-}"
}

task_field() {
	"$BATON" task show "$1" --json | jq -r "$2"
}

test_expect_success 'a judge killed with serve is judged by the next serve, and its agent group is killed' '
	# no sandbox: bwrap would take the agent down with its worker, and
	# the agent must outlive it as it does without one
	setup_repo killed "execution: {sandbox: none}" &&
	cd killed &&
	rm -f "$FAKE_STATE/judge.calls" "$FAKE_STATE/judge.started" &&
	"$BATON" task add "one job" >/dev/null &&
	JUDGE_MODE=hang bg_start ../s1 "$BATON" serve --listen off &&
	wait_for "test -f \"$FAKE_STATE/judge.started\"" 60 &&
	test -n "$(trash_procs "sleep 61")" &&
	kill -9 "$(cat ../s1.pid)" &&
	test "$(bg_wait ../s1 30)" = 137 &&
	test "$(task_field 1 .block_reason)" = awaiting_judge &&
	test "$(task_field 1 .judged_at)" != 0 &&
	bg_start ../s2 "$BATON" serve --listen off --exit-when-idle &&
	test "$(bg_wait ../s2 120)" = 0 &&
	test "$(task_field 1 .status)" = done &&
	test "$(cat "$FAKE_STATE/judge.calls")" = 2 &&
	wait_for "test -z \"\$(trash_procs \"sleep 61\")\"" 10 &&
	"$BATON" events --all --json >../ev.json &&
	jq -s -e "[.[] | select(.type == \"judge_gone\")] | length == 1" ../ev.json
'

test_expect_success 'an undecided judge is tried again after its cooldown, before serve --exit-when-idle stops' '
	setup_repo undecided &&
	cd undecided &&
	rm -f "$FAKE_STATE/judge.calls" &&
	"$BATON" task add "one job" >/dev/null &&
	JUDGE_MODE=undecided bg_start ../s3 "$BATON" serve --listen off --exit-when-idle &&
	test "$(bg_wait ../s3 120)" = 0 &&
	test "$(cat "$FAKE_STATE/judge.calls")" = 2 &&
	test "$(task_field 1 .status)" = done &&
	"$BATON" events --all --json >../ev.json &&
	jq -s -e "[.[] | select(.type == \"judge_failed\")] | length == 1" ../ev.json
'

test_expect_success 'a judge that never decides gives the task to a person after runtime.max_attempts tries, and serve --exit-when-idle stops' '
	setup_repo never "" ", max_attempts: 2" &&
	cd never &&
	rm -f "$FAKE_STATE/judge.calls" &&
	"$BATON" task add "one job" >/dev/null &&
	JUDGE_MODE=never bg_start ../s4 "$BATON" serve --listen off --exit-when-idle &&
	test "$(bg_wait ../s4 120)" = 0 &&
	test "$(cat "$FAKE_STATE/judge.calls")" = 2 &&
	test "$(task_field 1 .status)" = blocked &&
	test "$(task_field 1 .block_reason)" = needs_rework &&
	task_field 1 .reason | grep -q "the judge could not decide 2 times" &&
	"$BATON" events --all --json >../ev4.json &&
	jq -s -e "[.[] | select(.type == \"judge_failed\")] | length == 2 and .[-1].data.failures == 2" ../ev4.json
'

test_done
