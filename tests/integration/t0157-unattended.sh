#!/bin/bash
test_description='unattended runs wait for nobody: a gate or a question without a default blocks with the question on record, a default applies at once, a budget pause is a stop; runtime.unattended under serve'
. "$(dirname "$0")/../lib/test-lib.sh"

# A scripted assistant for the assist pipeline (as in t0034): execute
# asks an escalation with a default (B) when ESCALATE=1.
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	echo "$BATON_RUN_ID $BATON_STAGE_KIND" >>"$FAKE_STATE/calls"
	case "$BATON_STAGE_KIND" in
	plan)
		printf '# Plan\n\n1. write done.txt\n' >"$BATON_OUT_DIR/plan.md" ;;
	execute)
		n=$(grep -c "^$BATON_RUN_ID execute" "$FAKE_STATE/calls")
		if [ "${ESCALATE:-}" = 1 ] && [ "$n" = 1 ]; then
			cat >"$BATON_OUT_DIR/escalation.json" <<-JSON
			{"question": "Which storage should the notes use?",
			 "options": [
			   {"id": "A", "label": "a JSON file", "tradeoffs": "simple"},
			   {"id": "B", "label": "SQLite", "recommended": true, "tradeoffs": "queries"}],
			 "default": "B", "timeout_seconds": 600}
			JSON
			echo "I need a decision"
			exit 0
		fi
		echo "done $n" >done.txt
		echo "wrote done.txt" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

test_expect_success 'setup' '
	write_agent &&
	make_repo gated &&
	baton_init_with_agent gated "policies: {require_approval_at_stages: [executing]}" &&
	make_repo assist &&
	baton_init_with_agent assist "providers:
  a: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: a}"
'

test_expect_success 'a gate ends an unattended run blocked, the gate on record, at once' '
	cd gated &&
	test_must_fail timeout 60 "$BATON" run --unattended "Gated feature" >../gate.out 2>&1 &&
	test_grep "unattended" ../gate.out &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "unattended: the gate before stage execute needs a person.s approval" ../reason &&
	"$BATON" events "$id" --json >../ev &&
	jq -s -e "[.[] | select(.type == \"unattended_stop\")] | map(.data.cause + \"/\" + .data.stage) == [\"gate/execute\"]" ../ev &&
	transitions "$id" | tail -n 2 >../path &&
	printf "waiting_for_approval\nblocked\n" >../expect &&
	test_cmp ../expect ../path &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 0 ../calls
'

test_expect_success 'without --unattended the same gate waits for a person' '
	cd gated &&
	prev=$(newest_run) &&
	bg_start "$TRASH_DIRECTORY/attended" "$BATON" run "Attended feature" &&
	id=$(wait_for_new_run "$prev") &&
	wait_for_status "$id" waiting_for_approval &&
	sleep 1 &&
	test "$(run_status "$id")" = waiting_for_approval &&
	"$BATON" approvals approve "$id" >/dev/null &&
	test "$(bg_wait ../attended)" = 0 &&
	test "$(run_status "$id")" = merge_ready
'

test_expect_success 'a question without a default (the assist feedback) blocks with the question on record' '
	cd assist &&
	test_must_fail timeout 60 "$BATON" run --unattended --pipeline assist "Keep notes" >../fb.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "unattended: stage .* asks a person and has no default answer" ../reason &&
	"$BATON" show "$id" --json >../show.json &&
	"$BATON" events "$id" --json >../ev &&
	jq -s -e "[.[] | select(.type == \"unattended_stop\")][0].data | .cause == \"question\" and (.question | length > 0)" ../ev
'

test_expect_success 'a question with a default takes it at once, without waiting its timeout' '
	cd assist &&
	test_must_fail timeout 60 env ESCALATE=1 "$BATON" run --unattended --pipeline assist "Escalating notes" >../esc.out 2>&1 &&
	id=$(newest_run) &&
	"$BATON" events "$id" --json >../ev &&
	jq -s -e "[.[] | select(.type == \"escalation_timeout\")][0].data.applied == \"B\"" ../ev &&
	# then the feedback question, which has no default, blocks it
	test "$(run_status "$id")" = blocked &&
	jq -s -e "[.[] | select(.type == \"unattended_stop\")] | length == 1" ../ev
'

test_expect_success 'a budget pause is a stop when unattended' '
	make_repo budget &&
	baton_init_with_agent budget "budget: {max_turns_per_run: 2}" &&
	cd budget &&
	test_must_fail "$BATON" run --unattended "Budget feature" >../b.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "stopped by the budget: budget.max_turns_per_run (2) reached" ../reason &&
	"$BATON" events "$id" --json >../ev &&
	jq -s -e "[.[] | select(.type == \"budget_action\")] | map(.data.action + \"/\" + .data.instead_of) == [\"stop/pause\"]" ../ev &&
	jq -s -e "[.[] | select(.type == \"budget_action\")][0].data.unattended == true" ../ev
'

test_expect_success 'runtime.unattended: serve blocks the task at the gate instead of waiting' '
	make_repo served &&
	baton_init_with_agent served "policies: {require_approval_at_stages: [executing]}
runtime: {unattended: true}" &&
	cd served &&
	"$BATON" task add "Served feature" >/dev/null &&
	bg_start "$TRASH_DIRECTORY/serve" "$BATON" serve --workers 1 &&
	wait_for "test -n \"\$(newest_run)\" && test \"\$(run_status \$(newest_run))\" = blocked" 60 &&
	id=$(newest_run) &&
	kill -TERM "$(cat ../serve.pid)" &&
	bg_wait ../serve >/dev/null &&
	run_field "$id" reason >../reason &&
	test_grep "unattended: the gate before stage execute" ../reason &&
	"$BATON" events "$id" --json >../ev &&
	jq -s -e "[.[] | select(.type == \"unattended_stop\")] | length == 1" ../ev
'

test_expect_success 'runtime.unattended must be a boolean, named with file:line:col' '
	make_repo badcfg &&
	baton_init_with_agent badcfg "runtime: {unattended: maybe}" &&
	cd badcfg &&
	test_must_fail "$BATON" config validate >../bad.out 2>&1 &&
	test_grep "config.yaml:[0-9]*:[0-9]*: runtime.unattended" ../bad.out
'

test_done
