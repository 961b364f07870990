#!/bin/bash
test_description='the assist pipeline (OpenViber): intake, feedback by approve, revise and defer, escalations with a default applied on timeout, the plan gate of always-ask, and reports at the cadence of the run length'
. "$(dirname "$0")/../lib/test-lib.sh"

# A scripted assistant. Knobs:
#   ESCALATE=1        the first execute writes an escalation whose
#                     recommended option (B) is listed second
#   ESC_TIMEOUT=N     its timeout_seconds (default 2)
#   EXEC_SLEEP=N      each execute sleeps N seconds
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	echo "$BATON_RUN_ID $BATON_STAGE_KIND" >>"$FAKE_STATE/calls"
	case "$BATON_STAGE_KIND" in
	plan)
		n=$(grep -c "^$BATON_RUN_ID plan" "$FAKE_STATE/calls")
		cp "$BATON_PROMPT_FILE" "$FAKE_STATE/$BATON_RUN_ID.plan-$n.prompt"
		printf '# Plan %s\n\n1. write done.txt\n%s\n' "$n" "${PLAN_LINE:-}" >"$BATON_OUT_DIR/plan.md" ;;
	execute)
		n=$(grep -c "^$BATON_RUN_ID execute" "$FAKE_STATE/calls")
		cp "$BATON_PROMPT_FILE" "$FAKE_STATE/$BATON_RUN_ID.execute-$n.prompt"
		if [ "${ESCALATE:-}" = 1 ] && [ "$n" = 1 ]; then
			cat >"$BATON_OUT_DIR/escalation.json" <<-JSON
			{"question": "Which storage should the notes use?",
			 "options": [
			   {"id": "A", "label": "a JSON file", "tradeoffs": "Pro: simple. Con: no queries."},
			   {"id": "B", "label": "SQLite", "recommended": true, "tradeoffs": "Pro: queries. Con: a dependency."}],
			 "default": "B", "timeout_seconds": ${ESC_TIMEOUT:-2}}
			JSON
			echo "I need a decision"
			exit 0
		fi
		[ -n "${EXEC_SLEEP:-}" ] && sleep "$EXEC_SLEEP"
		echo "done $n" >done.txt
		echo "wrote done.txt" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

# assist_repo NAME [YAML]: a repository with the scripted assistant.
assist_repo() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "providers:
  a: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: a}
${2:-}"
}

# start NAME [ENV=VALUE...]: an assist run in NAME in the background, its
# id in NAME.id once it exists.
# The id is the first run newer than the one before: the newest run can
# still be the last case's when the new one is not made yet.
start() {
	local repo=$1 prev
	shift
	prev=$(cd "$repo" && newest_run) &&
	(cd "$repo" && bg_start "$TRASH_DIRECTORY/$repo" env "$@" "$BATON" run --pipeline assist "Keep notes for the team") &&
	(cd "$repo" && wait_for_new_run "$prev") >"$TRASH_DIRECTORY/$repo.id"
}

# wait_question REPO KIND: the run waits on a question of that kind.
wait_question() {
	local id
	id=$(cat "$TRASH_DIRECTORY/$1.id")
	(cd "$1" && wait_for "test \"\$(run_status $id)\" = waiting_for_approval && \"\$BATON\" show $id --json | jq -e '.progress.ask.kind == \"$2\"' >/dev/null" 60)
}

test_expect_success 'setup' '
	write_agent &&
	assist_repo repo &&
	(cd repo && "$BATON" pipeline show assist >../assist.txt) &&
	test_grep "waiting_for_approval *-> .*planning (revise)" assist.txt &&
	test_grep "waiting_for_approval *-> .*paused (defer)" assist.txt &&
	test_grep "waiting_for_approval *-> .*completed (approve)" assist.txt
'

test_expect_success 'intake, plan, execute, verify, report, then awaiting feedback; approve completes it' '
	start repo &&
	wait_question repo feedback &&
	cd repo &&
	id=$(cat ../repo.id) &&
	"$BATON" show "$id" --json >../show.json &&
	test_jq ".state == \"awaiting_feedback\"" ../show.json &&
	test_jq ".progress.ask.to == \"completed\"" ../show.json &&
	cp ".baton/runs/$id/intake.json" ../intake.json &&
	test_jq ".origin == \"assigned\" and .mode == \"agent-decides\" and .priority_label == \"normal\" and .scope.basis == \"estimate\"" ../intake.json &&
	"$BATON" events "$id" --json | jq -s "[.[] | select(.type == \"report\")] | last | .data" >../report.json &&
	test_jq ".kind == \"completion\" and (.evidence | map(select(test(\"plan.md|execution.log|validation.json\"))) | length) == 3" ../report.json &&
	transitions "$id" >../path &&
	printf "%s\n" created intake planning planned executing verifying reporting waiting_for_approval >../expect &&
	test_cmp ../expect ../path &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../repo)" = 0 &&
	test "$(run_status "$id")" = completed
'

test_expect_success 'revise: planning again, with the notes in the planner prompt, then approve' '
	start repo &&
	wait_question repo feedback &&
	cd repo &&
	id=$(cat ../repo.id) &&
	"$BATON" approvals revise "$id" --guidance "also keep a changelog" &&
	cd .. && wait_question repo feedback && cd repo &&
	test_grep "also keep a changelog" "$FAKE_STATE/$id.plan-2.prompt" &&
	transitions "$id" | grep -c "^planning$" >../plannings &&
	test "$(cat ../plannings)" = 2 &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../repo)" = 0 &&
	test "$(run_status "$id")" = completed
'

test_expect_success 'defer: paused until resumed, which plans again' '
	start repo &&
	wait_question repo feedback &&
	cd repo &&
	id=$(cat ../repo.id) &&
	"$BATON" approvals defer "$id" &&
	test "$(run_status "$id")" = paused &&
	test "$(run_field "$id" paused_at_status)" = planning &&
	"$BATON" resume "$id" >/dev/null &&
	cd .. && wait_question repo feedback && cd repo &&
	transitions "$id" | tail -n 9 >../path &&
	printf "%s\n" waiting_for_approval paused planning planned executing verifying reporting waiting_for_approval >../expect &&
	tail -n 8 ../expect >../expect8 && tail -n 8 ../path >../path8 &&
	test_cmp ../expect8 ../path8 &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../repo)" = 0
'

test_expect_success 'an escalation: one question, the recommended option first; after its 2 s timeout the default applies, on record' '
	start repo ESCALATE=1 ESC_TIMEOUT=2 &&
	wait_question repo feedback &&
	cd repo &&
	id=$(cat ../repo.id) &&
	"$BATON" events "$id" --json >../esc.json &&
	jq -s "[.[] | select(.type == \"question\" and .data.kind == \"escalation\")] | first | .data" ../esc.json >../q.json &&
	test_jq ".question == \"Which storage should the notes use?\" and .options[0].id == \"B\" and .options[0].recommended == true and .default == \"B\" and .timeout_seconds == 2" ../q.json &&
	jq -s "[.[] | select(.type == \"escalation_timeout\")] | first | .data" ../esc.json >../t.json &&
	test_jq ".default == \"B\" and .applied == \"B\"" ../t.json &&
	test_grep "option B" "$FAKE_STATE/$id.execute-2.prompt" &&
	transitions "$id" >../path &&
	test_grep "^waiting_for_approval$" ../path &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../repo)" = 0
'

test_expect_success 'a decided escalation leaves no deadline behind: a later gate waits for a person' '
	assist_repo gated "pipelines:
  gated:
    type: assist
    terminal: completed
    stages:
      - {name: intake, kind: intake}
      - {name: plan, kind: plan}
      - {name: execute, kind: execute}
      - {name: verify, kind: validate, status: verifying, gate: true}
      - {name: report, kind: report}" &&
	(cd gated && bg_start "$TRASH_DIRECTORY/gated" env ESCALATE=1 ESC_TIMEOUT=1 "$BATON" run --pipeline gated "Gated notes") &&
	cd gated &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) && echo "$id" >../gated.id &&
	wait_for "\"\$BATON\" events $id --json | grep -q escalation_timeout" &&
	wait_for "test \"\$(run_status $id)\" = waiting_for_approval && test \"\$(run_field $id gate_status)\" = verifying" &&
	sleep 2 &&
	test "$(run_status "$id")" = waiting_for_approval &&
	"$BATON" approvals approve "$id" &&
	cd .. && wait_question gated feedback && cd gated &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../gated)" = 0
'

test_expect_success 'an escalation answered by a person before its timeout' '
	start repo ESCALATE=1 ESC_TIMEOUT=600 &&
	wait_question repo escalation &&
	cd repo &&
	id=$(cat ../repo.id) &&
	"$BATON" approvals approve "$id" --guidance A &&
	cd .. && wait_question repo feedback && cd repo &&
	test_grep "A" "$FAKE_STATE/$id.execute-2.prompt" &&
	"$BATON" events "$id" --json | jq -s "[.[] | select(.type == \"escalation_timeout\")] | length" >../n &&
	test "$(cat ../n)" = 0 &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../repo)" = 0
'

test_expect_success 'under serve: an escalation times out while no worker holds the task, and the sweep hands it back to apply the default' '
	assist_repo served "runtime: {judge: false, sweep_seconds: 1}" &&
	cd served &&
	ESCALATE=1 ESC_TIMEOUT=2 "$BATON" task add --pipeline assist "Keep notes, served" >/dev/null &&
	ESCALATE=1 ESC_TIMEOUT=2 bg_start ../srv "$BATON" serve --workers 1 --listen off &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for "\"\$BATON\" events $id --json | grep -q escalation_timeout" 60 &&
	wait_for "test \"\$(run_status $id)\" = waiting_for_approval && \"\$BATON\" show $id --json | jq -e \".progress.ask.kind == \\\"feedback\\\"\" >/dev/null" 60 &&
	"$BATON" task list --json >../tasks.json &&
	test_jq ".[0].status == \"blocked\" and .[0].block_reason == \"awaiting_approval\"" ../tasks.json &&
	"$BATON" approvals approve "$id" &&
	wait_for "\"\$BATON\" task list --json | jq -e \".[0].status == \\\"done\\\"\" >/dev/null" 60 &&
	test "$(run_status "$id")" = completed &&
	kill "$(cat ../srv.pid)" && bg_wait ../srv >/dev/null
'

test_expect_success 'always-ask: the plan waits for approval before executing' '
	assist_repo ask "assist: {mode: always-ask}" &&
	start ask &&
	id=$(cat ask.id) &&
	(cd ask && wait_for "test \"\$(run_status $id)\" = waiting_for_approval") &&
	cd ask &&
	test "$(run_field "$id" gate_status)" = executing &&
	test_path_is_missing ".baton/runs/$id/execution.log" &&
	"$BATON" approvals approve "$id" &&
	cd .. && wait_question ask feedback && cd ask &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../ask)" = 0
'

test_expect_success 'agent-decides: a plan that says APPROVAL: needed waits too' '
	start repo PLAN_LINE="APPROVAL: needed" &&
	id=$(cat repo.id) &&
	(cd repo && wait_for "test \"\$(run_status $id)\" = waiting_for_approval") &&
	cd repo &&
	test "$(run_field "$id" gate_status)" = executing &&
	"$BATON" approvals approve "$id" &&
	cd .. && wait_question repo feedback && cd repo &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../repo)" = 0
'

test_expect_success 'reports follow the run length: a short run reports only on completion, a long one also periodically' '
	cd repo &&
	short=$(cat ../repo.id) &&
	"$BATON" events "$short" --json | jq -r "select(.type == \"report\") | .data.kind" | sort -u >../short.kinds &&
	test_must_fail grep -q "periodic\|milestone" ../short.kinds &&
	cd .. &&
	assist_repo long "reports: {milestone_after_seconds: 1, periodic_after_seconds: 2, interval_seconds: 1}" &&
	start long EXEC_SLEEP=5 &&
	wait_question long feedback &&
	cd long &&
	id=$(cat ../long.id) &&
	"$BATON" events "$id" --json | jq -s "[.[] | select(.type == \"report\") | .data]" >../long.json &&
	test_jq "(map(select(.kind == \"periodic\")) | length) >= 2 and (map(select(.kind == \"milestone\")) | length) >= 1" ../long.json &&
	test_jq "map(select(.kind == \"periodic\"))[0] | (.budget | type) == \"object\" and (.next | type) == \"array\" and (.blockers | type) == \"array\"" ../long.json &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../long)" = 0
'

test_done
