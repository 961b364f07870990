#!/bin/bash
test_description='the judge: every finished run judged exactly once under racing judges; approve queues the merge, changes make a rework task (depth capped)'
. "$(dirname "$0")/../lib/test-lib.sh"

write_agents() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	echo "$BATON_RUN_ID" >>"$BATON_WORKTREE/work.txt"
	echo done
	EOF
	# the judge: records which run it judged (its cwd is the run's
	# worktree), asks for changes when the task says so (not for reworks)
	cat >"$TRASH_DIRECTORY/judge" <<-\EOF
	#!/bin/sh
	prompt=$(cat)
	echo "$(basename "$PWD")" >>"$FAKE_STATE/judged"
	sleep 0.05
	if echo "$prompt" | grep -q "please-rework" && ! echo "$prompt" | grep -q "^Task: Rework"; then
		echo "- work.txt: say more. Because it is terse."
		echo "DECISION: CHANGES_REQUESTED"
	elif echo "$prompt" | grep -q "always-rework"; then
		echo "DECISION: CHANGES_REQUESTED"
	else
		echo "Looks right."
		echo "DECISION: APPROVED"
	fi
	EOF
	chmod +x "$TRASH_DIRECTORY/agent" "$TRASH_DIRECTORY/judge"
}

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
runtime: {sweep_seconds: 1, max_rework_depth: 1}"
}

test_expect_success 'setup' '
	write_agents &&
	setup_repo repo
'

test_expect_success 'two serves racing over 100 finished runs judge each exactly once' '
	cd repo &&
	for i in $(seq 1 100); do "$BATON" task add "job $i" >/dev/null || exit 1; done &&
	: >"$FAKE_STATE/judged" &&
	bg_start ../s1 "$BATON" serve --workers 3 --exit-when-idle &&
	bg_start ../s2 "$BATON" serve --workers 3 --exit-when-idle &&
	test "$(bg_wait ../s1 600)" = 0 &&
	test "$(bg_wait ../s2 600)" = 0 &&
	"$BATON" task list --json >../all.json &&
	test_jq "length == 100 and all(.[]; .status == \"done\" and .judgement_version == 1)" ../all.json &&
	test_line_count = 100 "$FAKE_STATE/judged" &&
	sort "$FAKE_STATE/judged" | uniq -d >../dups &&
	test_line_count = 0 ../dups &&
	"$BATON" events --all --json >../ev.json &&
	jq -s "[.[] | select(.type == \"judged\")] | length" ../ev.json >../judged &&
	test "$(cat ../judged)" = 100 &&
	jq -s "[.[] | select(.type == \"judge_claimed\")] | length" ../ev.json >../claimed &&
	test "$(cat ../claimed)" = 100
'

test_expect_success 'approved runs wait in the merge queue' '
	cd repo &&
	test "$(db_query "select count(*) from merge_queue where status = '\''pending'\''")" = 100
'

test_expect_success 'requested changes make a rework task on top of the branch; its approval finishes the parent' '
	setup_repo rework &&
	cd rework &&
	"$BATON" task add "tweak please-rework" --area docs >/dev/null &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../rework.err &&
	"$BATON" task list --json >../rw.json &&
	test_jq "length == 2" ../rw.json &&
	test_jq ".[1].origin == \"rework\" and .[1].parent == 1 and .[1].depth == 1 and .[1].area == \"docs\" and .[1].status == \"done\"" ../rw.json &&
	test_jq ".[0].status == \"done\" and (.[0].reason | test(\"t2\"))" ../rw.json &&
	parent_run=$(jq -r ".[0].run" ../rw.json) &&
	child_run=$(jq -r ".[1].run" ../rw.json) &&
	# the rework started from the parent branch: both lines are there
	git show "baton/$child_run:work.txt" >../work.txt &&
	test_grep "$parent_run" ../work.txt &&
	test_grep "$child_run" ../work.txt
'

test_expect_success 'a rework of a task near the 64 KiB limit is cut to fit: the middle of its body goes, the findings stay' '
	setup_repo big &&
	cd big &&
	body=$(head -c 65400 /dev/zero | tr "\\0" x) &&
	"$BATON" task add "big please-rework" --body "START $body" >/dev/null &&
	bg_start ../big "$BATON" serve --workers 1 --exit-when-idle &&
	test "$(bg_wait ../big 120)" = 0 &&
	"$BATON" task list --json >../big.json &&
	test_jq "length == 2 and .[1].origin == \"rework\" and .[1].status == \"done\"" ../big.json &&
	"$BATON" task show t2 --json >../t2.json &&
	test_jq "(.title + \"\n\n\" + .body | utf8bytelength) <= 65536" ../t2.json &&
	test_jq ".body | startswith(\"START xxx\") and test(\"bytes cut here: a task.s text is at most 64 KiB\") and test(\"say more. Because it is terse.\")" ../t2.json
'

test_expect_success 'the rework depth is capped' '
	setup_repo capped &&
	cd capped &&
	"$BATON" task add "never good always-rework" >/dev/null &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../capped.err &&
	"$BATON" task list --json >../c.json &&
	test_jq "length == 2" ../c.json &&
	test_jq ".[1].status == \"blocked\" and .[1].block_reason == \"needs_rework\" and (.[1].reason | test(\"max_rework_depth\"))" ../c.json &&
	test_jq ".[0].status == \"blocked\" and .[0].block_reason == \"needs_rework\"" ../c.json
'

test_done
