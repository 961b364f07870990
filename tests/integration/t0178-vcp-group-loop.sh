#!/bin/bash
test_description='VCP with scripted agents: what a parallel group hands on (enrichment), the loop stopped by its stop file and by an intent lock, and an evaluation that says blocked'
. "$(dirname "$0")/../lib/test-lib.sh"

bug='greet prints an empty greeting for an empty name'

group_yaml='pipelines:
  triple:
    type: bugfix
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}
      - {type: code-review}'

test_expect_success 'setup' '
	make_repo group &&
	baton_init_with_agent group "$group_yaml"
'

# --- parallel-group enrichment ---------------------------------------------

test_expect_success 'parallel group: the stage after it reads every member'"'"'s key results; members read the stages before the group only' '
	cd group &&
	FAKE_SLEEP_KIND=code-review FAKE_SLEEP=1 \
		test_expect_code 0 "$BATON" run --pipeline triple "$bug" >../triple.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	after=$FAKE_STATE/$id.stage-code-review-4.1.prompt &&
	test_grep "Key results of the earlier stages" "$after" &&
	for m in 1 2 3; do
		test_grep "^- code-review-$m (v1): approved: fake code-review-$m review" "$after" || return 1
	done &&
	test_grep "^- rca (v1): root cause: .*cli.sh" "$after" &&
	for m in 1 2 3; do
		p=$FAKE_STATE/$id.stage-code-review-$m.1.prompt &&
		test_grep "^- rca (v1): root cause: .*cli.sh" "$p" &&
		test_grep ! "^- code-review-[0-9] (v" "$p" || return 1
	done
'

# --- the loop: stop file, intent lock, an evaluation that says blocked -----

# A scripted loop agent (as t0033's): each iteration writes notes/N.txt;
# LOOP_STEPS iterations before the evaluation says LOOP_LAST (default
# done); with EVAL_WAIT set, the first evaluation waits for
# $FAKE_STATE/go, so that the test changes things between iterations.
write_loop_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	echo "$BATON_RUN_ID $BATON_STAGE_KIND $BATON_ITERATION" >>"$FAKE_STATE/calls"
	it=${BATON_ITERATION:-1}
	case "$BATON_STAGE_KIND" in
	loop-plan)
		if [ "$it" -gt "${LOOP_STEPS:-2}" ]; then
			echo '{"done": true, "summary": "met"}' >"$BATON_ARTIFACT"
			exit 0
		fi
		printf '{"done": false, "summary": "s", "step": "write note %s", "effects": [{"kind": "write", "target": "notes/%s.txt"}]}\n' \
			"$it" "$it" >"$BATON_ARTIFACT" ;;
	act)
		mkdir -p notes && echo "note $it" >"notes/$it.txt"
		echo "wrote notes/$it.txt" ;;
	evaluate)
		if [ -n "${EVAL_WAIT:-}" ] && [ "$it" = 1 ]; then
			n=0
			while [ ! -e "$FAKE_STATE/go" ] && [ $n -lt 600 ]; do
				sleep 0.1; n=$((n + 1))
			done
		fi
		st=continue
		[ "$it" -ge "${LOOP_STEPS:-2}" ] && st=${LOOP_LAST:-done}
		echo "{\"status\": \"$st\", \"summary\": \"iteration $it\"}" >"$BATON_ARTIFACT" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

loop_calls() {
	grep -c "^$1 $2 " "$FAKE_STATE/calls" || :
}

test_expect_success 'loop setup: a trusted-local loop with a stop file' '
	make_repo loop &&
	write_loop_agent &&
	(cd loop && "$BATON" init >/dev/null) &&
	cat >loop/.baton/config.yaml <<-EOF &&
	providers:
	  a: {type: command, command: ["$TRASH_DIRECTORY/agent"]}
	roles: {default: a}
	validate: {commands: ["make test"]}
	loop: {profile: trusted-local, max_iterations: 5, stop_file: STOP-LOOP}
	EOF
	if [ -n "${BATON_TEST_PG_ADMIN:-}" ]; then
		echo "store: $(pg_new_db)" >>loop/.baton/config.yaml
	fi
'

# loop_bg NAME ENV...: a background loop run in loop/ whose first
# evaluation waits; its id in NAME.id once it evaluates.
loop_bg() {
	local name=$1 before
	shift
	rm -f "$FAKE_STATE/go"
	before=$(cd loop && newest_run)
	(cd loop && bg_start "$TRASH_DIRECTORY/$name" env EVAL_WAIT=1 "$@" "$BATON" run --pipeline loop "write notes") &&
	(cd loop && wait_for "test \"\$(newest_run)\" != \"$before\"" && newest_run) >"$TRASH_DIRECTORY/$name.id" &&
	(cd loop && wait_for_status "$(cat "$TRASH_DIRECTORY/$name.id")" evaluating)
}

test_expect_success 'the loop stop file in the worktree stops the run before the next act, with a stop receipt' '
	loop_bg stopfile LOOP_STEPS=3 &&
	cd loop &&
	id=$(cat ../stopfile.id) &&
	wt=$(run_field "$id" worktree) &&
	test -d "$wt" &&
	touch "$wt/STOP-LOOP" &&
	touch "$FAKE_STATE/go" &&
	rc=$(bg_wait ../stopfile) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = stop_condition &&
	run_field "$id" reason >../reason &&
	test_grep "stopped before act 2: the stop file STOP-LOOP exists (loop.stop_file)" ../reason &&
	test "$(loop_calls "$id" act)" = 1 &&
	test "$(loop_calls "$id" loop-plan)" = 2 &&
	"$BATON" receipts "$id" --json >../receipts.json &&
	test_jq ".[-1].phase == \"stop\" and .[-1].decision == \"stopped\" and (.[-1].reason | contains(\"STOP-LOOP\"))" ../receipts.json &&
	"$BATON" receipts verify "$id" >/dev/null
'

test_expect_success 'a changed intent lock stops the run before the next act' '
	loop_bg lock LOOP_STEPS=3 &&
	cd loop &&
	id=$(cat ../lock.id) &&
	lock=.baton/runs/$id/intent-lock.json &&
	test_path_is_file "$lock" &&
	jq ".max_iterations = 99" "$lock" >../lock.json &&
	cat ../lock.json >"$lock" &&
	touch "$FAKE_STATE/go" &&
	rc=$(bg_wait ../lock) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = stop_condition &&
	run_field "$id" reason >../reason &&
	test_grep "intent-lock.json changed (or is gone) since the run locked it" ../reason &&
	test "$(loop_calls "$id" act)" = 1 &&
	"$BATON" receipts "$id" --json >../receipts.json &&
	test_jq ".[-1].phase == \"stop\" and .[-1].decision == \"stopped\" and (.[-1].reason | contains(\"intent-lock.json\"))" ../receipts.json
'

test_expect_success 'an evaluation that says blocked ends the run blocked at once, naming the evaluation' '
	cd loop &&
	LOOP_STEPS=1 LOOP_LAST=blocked test_expect_code 3 "$BATON" run --pipeline loop "blocked goal" >../blocked.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "the evaluation of iteration 1 says blocked: iteration 1" ../reason &&
	test "$(loop_calls "$id" act)" = 1 &&
	test "$(loop_calls "$id" evaluate)" = 1 &&
	test "$(loop_calls "$id" loop-plan)" = 1 &&
	transitions "$id" >../actual &&
	test "$(tail -n 1 ../actual)" = blocked &&
	test "$(tail -n 2 ../actual | head -n 1)" = evaluating
'

test_done
