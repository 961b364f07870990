#!/bin/bash
test_description='kill -9 of baton serve, over and over: every task ends done, no stage re-runs past its checkpoint, the event log stays whole'
. "$(dirname "$0")/../lib/test-lib.sh"

# A scripted agent that takes a little while, so the kills land in the
# middle of stages: plan, execute (edits a file), review (approves).
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	echo "$BATON_RUN_ID $BATON_STAGE_KIND" >>"$FAKE_STATE/calls"
	sleep 0.$(( $(od -An -N1 -tu1 /dev/urandom) % 4 ))
	case "$BATON_STAGE_KIND" in
	execute) echo "$BATON_RUN_ID" >>"$BATON_WORKTREE/work.txt"; echo done ;;
	review) echo "DECISION: APPROVED" ;;
	*) echo "# plan of $BATON_RUN_ID" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

test_expect_success 'setup: 50 tasks' '
	make_repo repo &&
	write_agent &&
	baton_init_with_agent repo "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: instant}
pipelines:
  short:
    terminal: merge_ready
    stages:
      - {name: plan, kind: plan}
      - {name: execute, kind: execute}
      - {name: review, kind: review}
workflow: {pipeline: short}
validate: {commands: []}
runtime: {judge: false, sweep_seconds: 1}" &&
	cd repo &&
	for i in $(seq 1 50); do
		"$BATON" task add "job $i" --area "a$((i % 5))" >/dev/null || exit 1
	done
'

test_expect_success 'kill -9 serve 20 times at random moments' '
	cd repo &&
	kills=0 &&
	: >>../serve.log &&
	while [ $kills -lt 20 ]; do
		# (a list of its own: "&" must background the serve alone)
		claims=$(grep -c " claimed by " ../serve.log || :)
		"$BATON" serve --workers 4 >>../serve.log 2>&1 &
		pid=$! &&
		# every fourth kill lands on a serve whose workers claimed a
		# task, however slow the machine is, so some kill always
		# leaves a lease behind
		if [ $((kills % 4)) = 0 ]; then
			wait_for "test \$(grep -c \" claimed by \" ../serve.log) -gt $claims" 30 || :
		fi &&
		sleep 0.$(( 3 + $(od -An -N1 -tu1 /dev/urandom) % 7 )) &&
		kill -9 $pid &&
		wait $pid 2>/dev/null || :
		kills=$((kills + 1))
	done &&
	echo $kills >../kills
'

test_expect_success 'a last serve finishes every task' '
	cd repo &&
	"$BATON" serve --workers 4 --exit-when-idle 2>>../serve.log &&
	"$BATON" task list --json >../all.json &&
	test_jq "length == 50 and all(.[]; .status == \"done\")" ../all.json &&
	"$BATON" events --all --json >../ev.json &&
	test_grep "\"worker_gone\"" ../ev.json
'

test_expect_success 'every task finished in one run, resumed across the kills' '
	cd repo &&
	test_jq "all(.[]; (.runs | length) == 1)" ../all.json || {
		# why: what each worker did with the task, and its settlements
		"$BATON" events --all --json >../ev4.json
		for id in $(jq -r ".[] | select((.runs | length) > 1) | .id" \
			    ../all.json); do
			echo "task $id:"
			grep "^t$id " ../serve.log
			jq -c "select(.task == $id and (.type | test(\"^task_\")))" \
				../ev4.json
		done
		false
	}
'

test_expect_success 'no stage ran again after its checkpoint' '
	cd repo &&
	"$BATON" events --all --json >../ev.json &&
	jq -s -r "
		[group_by(.run)[] | select(.[0].run != null) |
		 reduce .[] as \$e ({done: {}, bad: 0};
			if \$e.type == \"checkpoint\" then .done[\$e.data.stage] = true
			elif \$e.type == \"stage_started\" and .done[\$e.data.stage] then .bad += 1
			else . end) | .bad] | add // 0
	" ../ev.json >../reruns &&
	test "$(cat ../reruns)" = 0
'

test_expect_success 'each run executed exactly once past its checkpoint in the worktree' '
	cd repo &&
	for id in $(jq -r ".[].run" ../all.json); do
		n=$(git show "baton/$id:work.txt" | grep -c "$id") &&
		test "$n" = 1 || { echo "$id: $n lines"; exit 1; }
	done
'

# On PostgreSQL a transaction a kill -9 cut off leaves its seq unused
# (docs/operations.md, "The event log on PostgreSQL"): there the seqs
# only have to increase, each once.
test_expect_success 'the event sequence has no gaps and no duplicates' '
	cd repo &&
	if grep -q "^store: postgres" .baton/config.yaml; then
		jq -s -r "[.[].seq] | (length == (unique | length)) and (. == sort)" ../ev.json >seqok
	else
		jq -s -r "[.[].seq] | (length == (unique | length)) and (. == [range(.[0]; .[0] + length)])" ../ev.json >seqok
	fi &&
	test "$(cat seqok)" = true
'

test_done
