#!/bin/bash
test_description='the task queue: add, list, 200 tasks drained by 8 workers exactly once, dependencies and areas'
. "$(dirname "$0")/../lib/test-lib.sh"

# An instant agent: one execute stage per task, a line in a file of the
# task's area, a record of each call (run and stage) for counting.
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	echo "$BATON_RUN_ID $BATON_STAGE_KIND" >>"$FAKE_STATE/calls"
	area=$(sed -n "s/^AREA: //p" "$BATON_PROMPT_FILE" | head -n 1)
	mkdir -p "$BATON_WORKTREE/${area:-misc}"
	echo "$BATON_RUN_ID" >>"$BATON_WORKTREE/${area:-misc}/log.txt"
	echo "done"
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

QUICK='pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {judge: false, sweep_seconds: 1}'

test_expect_success 'setup' '
	make_repo repo &&
	write_agent &&
	baton_init_with_agent repo "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: instant}
$QUICK"
'

test_expect_success 'task add queues a task and prints its id' '
	cd repo &&
	"$BATON" task add "Add CSV export" --priority 2 --area src/export >../add.out &&
	test_grep "^t1  queued: Add CSV export" ../add.out &&
	"$BATON" task add "Document CSV export" --after 1 --json >../add2.json &&
	test_jq ".id == 2 and .depends_on == [1] and .status == \"queued\"" ../add2.json
'

test_expect_success 'task add refuses bad input and writes nothing' '
	cd repo &&
	test_expect_code 1 "$BATON" task add "x" --after 99 2>../err &&
	test_grep "99" ../err &&
	test_expect_code 2 "$BATON" task add "x" --priority lots 2>../err &&
	test_grep "priority" ../err &&
	test_expect_code 2 "$BATON" task add 2>../err &&
	test_expect_code 1 "$BATON" task add "x" --pipeline nope 2>../err &&
	test_grep "nope" ../err &&
	"$BATON" task list --json >../list.json &&
	test_jq "length == 2" ../list.json
'

test_expect_success 'task list shows status, area and dependencies' '
	cd repo &&
	"$BATON" task list >../list.out &&
	test_grep "t1 .*queued .*src/export" ../list.out &&
	test_grep "t2 .*queued .* 1 " ../list.out &&
	"$BATON" task list --json >../list.json &&
	test_jq "all(.[]; has(\"id\") and has(\"status\") and has(\"block_reason\") and has(\"attempts\") and has(\"runs\"))" ../list.json
'

test_expect_success 'cancel and retry' '
	cd repo &&
	"$BATON" task cancel 2 &&
	"$BATON" task show 2 --json >../t2.json &&
	test_jq ".status == \"cancelled\"" ../t2.json &&
	test_expect_code 1 "$BATON" task cancel 2 2>../err &&
	test_grep "cancelled already" ../err &&
	"$BATON" task retry 2 &&
	"$BATON" task show 2 --json >../t2.json &&
	test_jq ".status == \"queued\" and .attempts == 0" ../t2.json
'

test_expect_success 'serve --exit-when-idle drains the two tasks in order' '
	cd repo &&
	"$BATON" serve --workers 2 --exit-when-idle 2>../serve1.err &&
	"$BATON" task list --json >../list.json &&
	test_jq "all(.[]; .status == \"done\" and (.runs | length) == 1)" ../list.json &&
	"$BATON" events --all --json >../ev.json &&
	t1_end=$(jq -s "[.[] | select(.task == 1 and .type == \"task_settled\")][0].seq" ../ev.json) &&
	t2_claim=$(jq -s "[.[] | select(.task == 2 and .type == \"task_claimed\")][0].seq" ../ev.json) &&
	test "$t1_end" -lt "$t2_claim"
'

test_expect_success 'enqueue 200 tasks across 10 areas with dependencies' '
	cd repo &&
	for i in $(seq 1 200); do
		area=area$((i % 10))
		after=
		# every 7th task waits for the one added before it
		if [ $((i % 7)) -eq 0 ]; then after="--after $((i + 1))"; fi
		"$BATON" task add "job $i" --area "$area" --body "AREA: $area" $after >/dev/null || exit 1
	done &&
	"$BATON" task list --json --status queued >../queued.json &&
	test_jq "length == 200" ../queued.json
'

test_expect_success '8 workers run every task exactly once' '
	cd repo &&
	: >"$FAKE_STATE/calls" &&
	"$BATON" serve --workers 8 --exit-when-idle 2>../serve.err &&
	"$BATON" task list --json >../all.json &&
	test_jq "[.[] | select(.status != \"done\")] | length == 0" ../all.json &&
	test_line_count = 200 "$FAKE_STATE/calls" &&
	sort "$FAKE_STATE/calls" | uniq -d >../dups &&
	test_line_count = 0 ../dups &&
	"$BATON" events --all --json >../ev.json &&
	jq -s -r "[.[] | select(.type == \"task_claimed\") | .task] | group_by(.) | map(select(length > 1)) | length" ../ev.json >../double &&
	test "$(cat ../double)" = 0 &&
	jq -s -r "[.[] | select(.type == \"task_claimed\")] | length" ../ev.json >../claims &&
	test "$(cat ../claims)" = 202
'

test_expect_success 'a dependency always settled before its dependent was claimed' '
	cd repo &&
	jq -s -r "
		(map(select(.type == \"task_settled\")) | map({key: (.task | tostring), value: .seq}) | from_entries) as \$fin |
		(map(select(.type == \"task_claimed\")) | map({key: (.task | tostring), value: .seq}) | from_entries) as \$start |
		[range(3; 203) | select((. - 2) % 7 == 0) | {dep: (. - 1), task: .}
		 | select(\$fin[(.dep | tostring)] > \$start[(.task | tostring)])] | length
	" ../ev.json >../violations &&
	test "$(cat ../violations)" = 0
'

test_expect_success 'two tasks of one area never ran at once' '
	cd repo &&
	jq -s -r "
		(map(select(.type == \"task_added\")) | map({key: (.task | tostring), value: (.data.area // \"\")}) | from_entries) as \$area |
		[.[] | select(.type == \"task_claimed\" or .type == \"task_settled\")
		     | {task, seq, kind: .type}] | sort_by(.seq) |
		reduce .[] as \$e ({busy: {}, bad: 0};
			(\$area[(\$e.task | tostring)]) as \$a |
			if \$e.kind == \"task_claimed\" then
				(if (\$a != \"\" and (.busy[\$a] // 0) > 0) then .bad += 1 else . end) |
				.busy[\$a] = ((.busy[\$a] // 0) + 1)
			else .busy[\$a] = ((.busy[\$a] // 1) - 1) end) | .bad
	" ../ev.json >../overlaps &&
	test "$(cat ../overlaps)" = 0
'

test_expect_success 'workers ran in parallel' '
	cd repo &&
	test_grep "claimed by .*:7 " ../serve.err &&
	test_grep "claimed by .*:0 " ../serve.err
'

test_expect_success 'the event sequence has no gaps and no duplicates' '
	cd repo &&
	jq -s -r "[.[].seq] | (length == (unique | length)) and (. == [range(.[0]; .[0] + length)])" ../ev.json >../seqok &&
	test "$(cat ../seqok)" = true
'

test_expect_success 'a retried task whose run failed gets a new run, which runs' '
	make_repo retry &&
	cat >fails-once <<-EOF &&
	#!/bin/sh
	if [ -e "$FAKE_STATE/fail" ]; then echo "broken" >&2; exit 3; fi
	echo "$BATON_RUN_ID" >>"$BATON_WORKTREE/retried.txt"
	echo done
	EOF
	chmod +x fails-once &&
	baton_init_with_agent retry "providers:
  once: {type: command, command: [\"$TRASH_DIRECTORY/fails-once\"]}
roles: {default: once}
$QUICK" &&
	cd retry &&
	"$BATON" task add "Fails, then works" --max-attempts 1 >/dev/null &&
	: >"$FAKE_STATE/fail" &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../retry1.err;
	"$BATON" task show 1 --json >../r1.json &&
	test_jq ".status == \"failed\" and (.runs | length) == 1" ../r1.json &&
	first=$(jq -r .run ../r1.json) &&
	rm "$FAKE_STATE/fail" &&
	"$BATON" task retry 1 &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../retry2.err &&
	"$BATON" task show 1 --json >../r2.json &&
	test_jq ".status == \"done\" and (.runs | length) == 2" ../r2.json &&
	test "$(jq -r .run ../r2.json)" != "$first" &&
	test "$(run_status "$first")" = failed &&
	test "$(run_status "$(jq -r .run ../r2.json)")" = merge_ready
'

test_expect_success 'a task that is not there is named' '
	cd repo &&
	test_expect_code 1 "$BATON" task show 999 2>../none.err &&
	test_grep "^baton: no task t999 (baton task list)$" ../none.err &&
	test_expect_code 1 "$BATON" task cancel t999 2>../none.err &&
	test_grep "no task t999" ../none.err
'

test_done
