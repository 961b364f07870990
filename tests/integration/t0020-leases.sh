#!/bin/bash
test_description='leases and recovery: a stalled worker is fenced out, a rate-limited provider parks tasks in quota_wait, gates block tasks until decided'
. "$(dirname "$0")/../lib/test-lib.sh"

# The agent: logs each call; waits for $FAKE_STATE/go when the task
# says "slow"; answers "rate limited" while $FAKE_STATE/limit-until
# (epoch seconds) is in the future, which its first call sets to
# $FAKE_STATE/limit-for seconds ahead (a window that opens when the work
# does, however slowly the machine got there).
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	T=$FAKE_STATE
	echo "$BATON_RUN_ID $BATON_STAGE_KIND $(date +%s)" >>"$T/calls"
	if [ -f "$T/limit-for" ] && [ ! -f "$T/limit-until" ]; then
		echo $(( $(date +%s) + $(cat "$T/limit-for") )) >"$T/limit-until"
	fi
	if grep -q keeper "$BATON_PROMPT_FILE"; then
		echo "$BATON_RUN_ID" >"$T/keeper.run"
		while [ ! -e "$T/go-$BATON_RUN_ID" ]; do sleep 0.1; done
	fi
	if grep -q slow "$BATON_PROMPT_FILE"; then
		echo $$ >"$T/slow.pid"
		while [ ! -e "$T/go" ]; do sleep 0.1; done
	fi
	if [ -f "$T/limit-until" ] && [ "$(date +%s)" -lt "$(cat "$T/limit-until")" ]; then
		echo "$BATON_RUN_ID" >>"$T/limited"
		echo "Error: 429 Too Many Requests: rate limit exceeded, try again in 2 seconds" >&2
		exit 1
	fi
	echo "$BATON_RUN_ID" >>"$BATON_WORKTREE/work.txt"
	echo done
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

setup_repo() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: instant}
pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
workflow: {pipeline: quick}
validate: {commands: []}
execution: {backoff_seconds: 1}
runtime: {${3:-judge: false, sweep_seconds: 1, lease_seconds: 2}}
$2"
}

test_expect_success 'setup' '
	write_agent &&
	setup_repo repo
'

test_expect_success 'a worker stalled past its lease loses the task to another' '
	cd repo &&
	"$BATON" task add "slow job" >/dev/null &&
	bg_start ../serveA "$BATON" serve --workers 1 &&
	wait_for "test -s \"$FAKE_STATE/slow.pid\"" 30 &&
	holder=$("$BATON" task show 1 --json | jq -r .lease_holder) &&
	old_run=$("$BATON" task show 1 --json | jq -r .run) &&
	echo "$old_run" >../old_run &&
	wpid=$(echo "$holder" | cut -d: -f2) &&
	kill -STOP "$wpid" &&
	# the lease (2 s) runs out; a second serve takes the task over
	sleep 3 &&
	touch "$FAKE_STATE/go" &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../serveB.err &&
	"$BATON" task show 1 --json >../t1.json &&
	test_jq ".status == \"done\" and (.runs | length) == 2 and .run != \"$old_run\"" ../t1.json &&
	"$BATON" events --task 1 --json >../t1.ev &&
	test_grep "\"lease_expired\"" ../t1.ev &&
	# the stalled worker wakes: its late writes are refused
	v_before=$("$BATON" show "$old_run" --json | jq .version) &&
	echo "$v_before" >../v_before &&
	kill -CONT "$wpid" &&
	wait_for "grep -q \"taken over\" ../serveA.out" 30 &&
	"$BATON" show "$old_run" --json >../old.json &&
	test_jq ".version == $v_before" ../old.json &&
	"$BATON" task show 1 --json >../t1b.json &&
	test_jq ".status == \"done\"" ../t1b.json &&
	kill -TERM "$(cat ../serveA.pid)" &&
	bg_wait ../serveA 30
'

# backends: the server processes of this repository's database but the
# asking one, "pid backend_start" a line (PostgreSQL).
backends() {
	db_query "SELECT pid || ' ' || backend_start FROM pg_stat_activity
		  WHERE datname = current_database()
		  AND pid <> pg_backend_pid() ORDER BY pid"
}

# gate_open RUN: lets the agent call of RUN (a "keeper" task) finish,
# once the lease (2 s) it holds has had to be renewed.
gate_open() {
	sleep 3 && touch "$FAKE_STATE/go-$1"
}

test_expect_success 'a worker keeps its lease keeper, and its connection, from task to task' '
	setup_repo keep &&
	cd keep &&
	"$BATON" task add "keeper one" >/dev/null &&
	"$BATON" task add "keeper two" >/dev/null &&
	bg_start ../keep "$BATON" serve --workers 1 --exit-when-idle &&
	wait_for "test -s \"$FAKE_STATE/keeper.run\"" 30 &&
	r1=$(cat "$FAKE_STATE/keeper.run") &&
	if [ -n "${BATON_TEST_PG_ADMIN:-}" ]; then backends >../keep.b1; fi &&
	# its record says which task it works on
	wait_for "test \"\$(db_query \"SELECT task_id FROM workers WHERE stopped_at = 0\")\" = 1" 10 &&
	gate_open "$r1" &&
	wait_for "! grep -qx \"$r1\" \"$FAKE_STATE/keeper.run\"" 30 &&
	r2=$(cat "$FAKE_STATE/keeper.run") &&
	if [ -n "${BATON_TEST_PG_ADMIN:-}" ]; then backends >../keep.b2; fi &&
	gate_open "$r2" &&
	test "$(bg_wait ../keep 60)" = 0 &&
	"$BATON" task list --json >../keep.json &&
	test_jq "map(.status) == [\"done\", \"done\"]" ../keep.json &&
	test_jq "map(.attempts) == [1, 1]" ../keep.json &&
	"$BATON" events --all --json >../keep.ev &&
	test_grep ! lease_expired ../keep.ev &&
	if [ -n "${BATON_TEST_PG_ADMIN:-}" ]; then
		test_line_count = 4 ../keep.b1 &&
		test_cmp ../keep.b1 ../keep.b2
	fi
'

test_expect_success 'an idle worker is heard of every third of its lease, and on no task; stopped, it says so' '
	cd keep &&
	bg_start ../idle "$BATON" serve --workers 1 &&
	wait_for "test \"\$(db_query \"SELECT COUNT(*) FROM workers WHERE stopped_at = 0\")\" = 1" 10 &&
	h1=$(db_query "SELECT heartbeat_at FROM workers WHERE stopped_at = 0") &&
	wait_for "test \"\$(db_query \"SELECT heartbeat_at FROM workers WHERE stopped_at = 0\")\" -gt $h1" 10 &&
	test "$(db_query "SELECT COALESCE(task_id, 0) FROM workers WHERE stopped_at = 0")" = 0 &&
	kill -INT "$(cat ../idle.pid)" &&
	test "$(bg_wait ../idle 30)" = 0 &&
	test "$(db_query "SELECT COUNT(*) FROM workers WHERE stopped_at = 0")" = 0
'

test_expect_success 'a rate-limited provider parks tasks in quota_wait, then all complete' '
	setup_repo quota &&
	cd quota &&
	rm -f "$FAKE_STATE/limit-until" &&
	echo 6 >"$FAKE_STATE/limit-for" &&
	: >"$FAKE_STATE/limited" &&
	for i in 1 2 3 4 5; do "$BATON" task add "q $i" >/dev/null || exit 1; done &&
	"$BATON" serve --workers 2 --exit-when-idle 2>../quota.err &&
	"$BATON" task list --json >../q.json &&
	test_jq "length == 5 and all(.[]; .status == \"done\")" ../q.json &&
	"$BATON" events --all --json >../q.ev &&
	test_grep "quota_wait" ../q.ev &&
	# no tight loop: each task was told to wait 2 s at a time, in a 6 s
	# window: a handful of refused calls per task, never dozens
	n=$(wc -l <"$FAKE_STATE/limited") &&
	echo "refused calls: $n" &&
	test "$n" -ge 5 && test "$n" -le 30 &&
	# and a quota wait never spends an attempt
	test_jq "all(.[]; .attempts == 1)" ../q.json
'

test_expect_success 'a gate blocks the task until a person decides' '
	rm -f "$FAKE_STATE/limit-until" "$FAKE_STATE/limit-for" &&
	setup_repo gated "policies: {require_approval_at_stages: [execute]}" &&
	cd gated &&
	"$BATON" task add "gated job" >/dev/null &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../gate.err &&
	"$BATON" task show 1 --json >../g.json &&
	test_jq ".status == \"blocked\" and .block_reason == \"awaiting_approval\"" ../g.json &&
	run=$(jq -r .run ../g.json) &&
	"$BATON" approvals approve "$run" &&
	"$BATON" serve --workers 1 --exit-when-idle 2>>../gate.err &&
	"$BATON" task show 1 --json >../g2.json &&
	test_jq ".status == \"done\" and (.runs | length) == 1" ../g2.json &&
	# the wait at the gate spent no attempt: one try, taken up again
	test_jq ".attempts == 1" ../g2.json
'

test_expect_success 'a dependency that fails blocks its dependents with the reason' '
	setup_repo deps "" "judge: false, sweep_seconds: 1, max_attempts: 1, cooldown_seconds: 0" &&
	cd deps &&
	cat >fail.sh <<-\EOF &&
	#!/bin/sh
	echo "broken on purpose" >&2
	exit 3
	EOF
	chmod +x fail.sh &&
	"$BATON" task add "first" >/dev/null &&
	"$BATON" task add "second" --after 1 >/dev/null &&
	sed -i "s|command: \\[\"$TRASH_DIRECTORY/agent\"\\]|command: [\"$PWD/fail.sh\"]|" .baton/config.yaml &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../deps.err &&
	"$BATON" task list --json >../d.json &&
	test_jq ".[0].status == \"failed\" and .[1].status == \"blocked\" and .[1].block_reason == \"dependency_failed\"" ../d.json &&
	test_jq ".[1].reason | test(\"t1\")" ../d.json
'

test_expect_success 'the same failure again and again asks for rework instead of retrying forever' '
	setup_repo repeat "" "judge: false, sweep_seconds: 1, max_attempts: 10, failure_repeat_limit: 3, cooldown_seconds: 0" &&
	cd repeat &&
	cat >fail.sh <<-\EOF &&
	#!/bin/sh
	echo "$BATON_RUN_ID" >>"$FAKE_STATE/repeat-calls"
	echo "the same error, run $BATON_RUN_ID" >&2
	exit 3
	EOF
	chmod +x fail.sh &&
	sed -i "s|command: \\[\"$TRASH_DIRECTORY/agent\"\\]|command: [\"$PWD/fail.sh\"]|" .baton/config.yaml &&
	"$BATON" task add "doomed" >/dev/null &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../repeat.err &&
	"$BATON" task show 1 --json >../r.json &&
	test_jq ".status == \"blocked\" and .block_reason == \"needs_rework\" and .attempts == 3" ../r.json &&
	test_jq ".reason | test(\"same failure 3 times\")" ../r.json &&
	# three runs, each trying its call again 3 times (a model failure)
	sort -u "$FAKE_STATE/repeat-calls" >../runs &&
	test_line_count = 3 ../runs &&
	test_line_count = 12 "$FAKE_STATE/repeat-calls"
'

test_expect_success 'Ctrl-C drains: the running task finishes, nothing new starts' '
	rm -f "$FAKE_STATE/go" "$FAKE_STATE/slow.pid" &&
	setup_repo drain &&
	cd drain &&
	"$BATON" task add "slow one" >/dev/null &&
	"$BATON" task add "next one" --after 1 >/dev/null &&
	bg_start ../drain "$BATON" serve --workers 2 &&
	wait_for "test -s \"$FAKE_STATE/slow.pid\"" 30 &&
	kill -INT "$(cat ../drain.pid)" &&
	wait_for "grep -q draining ../drain.out" 10 &&
	touch "$FAKE_STATE/go" &&
	test "$(bg_wait ../drain 60)" = 0 &&
	"$BATON" task list --json >../dr.json &&
	test_jq ".[0].status == \"done\" and .[1].status == \"queued\"" ../dr.json &&
	test_jq ".[1].attempts == 0 and .[1].lease_holder == null" ../dr.json
'

test_expect_success 'a worker claims its next task as it settles one; stopping, it gives it back unspent' '
	cd drain &&
	"$BATON" events --all --json | jq -c "select(.task == 2) | .type" >../dr.types &&
	printf "%s\n" "\"task_added\"" "\"task_claimed\"" "\"task_released\"" >../expect &&
	test_cmp ../expect ../dr.types &&
	"$BATON" events --all --json |
		jq -s "map(select(.type == \"task_settled\" or .type == \"task_claimed\")) | map([.task, .type])" >../order.json &&
	test_jq ". == [[1, \"task_claimed\"], [1, \"task_settled\"], [2, \"task_claimed\"]]" ../order.json &&
	"$BATON" events --all --json | jq -s "map(select(.type == \"task_released\")) | .[0].data" >../rel.json &&
	test_jq ".reason == \"the worker stopped before it started the task\" and (.worker | test(\":0$|:1$\"))" ../rel.json &&
	bg_start ../drain2 "$BATON" serve --workers 1 --exit-when-idle &&
	test "$(bg_wait ../drain2 60)" = 0 &&
	"$BATON" task show 2 --json >../t2.json &&
	test_jq ".status == \"done\" and .attempts == 1" ../t2.json
'

test_expect_success 'a second Ctrl-C stops at once; the next serve resumes the run' '
	rm -f "$FAKE_STATE/go" "$FAKE_STATE/slow.pid" &&
	setup_repo stop &&
	cd stop &&
	"$BATON" task add "slow again" >/dev/null &&
	bg_start ../stop "$BATON" serve --workers 1 &&
	wait_for "test -s \"$FAKE_STATE/slow.pid\"" 30 &&
	kill -INT "$(cat ../stop.pid)" &&
	wait_for "grep -q draining ../stop.out" 10 &&
	kill -INT "$(cat ../stop.pid)" &&
	test "$(bg_wait ../stop 60)" = 0 &&
	"$BATON" task show 1 --json >../st.json &&
	test_jq ".status == \"queued\" and .attempts == 0" ../st.json &&
	run=$(jq -r .run ../st.json) &&
	"$BATON" show "$run" --json >../st-run.json &&
	test_jq ".status == \"interrupted\"" ../st-run.json &&
	touch "$FAKE_STATE/go" &&
	"$BATON" serve --workers 1 --exit-when-idle 2>../stop2.err &&
	"$BATON" task show 1 --json >../st2.json &&
	test_jq ".status == \"done\" and .run == \"$run\" and (.runs | length) == 1" ../st2.json
'

test_done
