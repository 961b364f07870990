#!/bin/bash
test_description='turn budgets (per run, per day) and the action each budget line takes: stop, pause, downgrade, reduce_effort'
. "$(dirname "$0")/../lib/test-lib.sh"

# repo_with NAME CONFIG: a repository with the fake agent and CONFIG.
repo_with() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "$2"
}

# calls_of RUN: the kinds its agent was called for, on one line.
calls_of() {
	fake_calls "$1" | cut -d" " -f1 | paste -sd" "
}

# actions RUN: "line action" of its budget_action events, one a line.
actions() {
	"$BATON" events "$1" --json |
		jq -r "select(.type == \"budget_action\") | .data.line + \" \" + .data.action"
}

# exits RUN FIELD: FIELD of each agent_exited event (provider, model,
# effort), in order, on one line ("-" when absent).
exits() {
	"$BATON" events "$1" --json |
		jq -r "select(.type == \"agent_exited\") | (.data.$2 // \"-\")" | paste -sd" "
}

test_expect_success 'max_turns_per_run with stop blocks the run before the third call' '
	repo_with stop "budget: {max_turns_per_run: 2, on_limit: stop}" &&
	cd stop &&
	test_must_fail "$BATON" run "Feature stop" >../stop.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "stopped by the budget: budget.max_turns_per_run (2) reached: 2 agent calls in this run" ../reason &&
	test "$(calls_of "$id")" = "plan architect" &&
	echo "max_turns_per_run stop" >../expect &&
	actions "$id" >../actual &&
	test_cmp ../expect ../actual
'

test_expect_success 'max_turns_per_run with pause (the default) pauses; raised, resume completes' '
	repo_with pause "budget: {max_turns_per_run: 2}" &&
	cd pause &&
	test_expect_code 3 "$BATON" run "Feature pause" >../pause.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = paused &&
	test "$(run_field "$id" paused_at_status)" = executing &&
	test_grep "max_turns_per_run (2) reached" ../pause.out &&
	echo "max_turns_per_run pause" >../expect &&
	actions "$id" >../actual &&
	test_cmp ../expect ../actual &&
	test_must_fail "$BATON" resume "$id" >../still.out 2>&1 &&
	test_grep "stays paused: budget.max_turns_per_run" ../still.out &&
	sed -i "s/max_turns_per_run: 2/max_turns_per_run: 20/" .baton/config.yaml &&
	"$BATON" resume "$id" >../resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(calls_of "$id")" = "plan architect execute review verify"
'

test_expect_success 'downgrade switches a role to its cheaper provider or model; a role without one stops' '
	repo_with down "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  cheap: {type: command, command: [\"$FAKE_AGENT\"]}
budget:
  max_turns_per_run: 2
  actions: {max_turns_per_run: downgrade}
  downgrade: {implementer: cheap, reviewer: small-model}" &&
	cd down &&
	test_must_fail "$BATON" run "Feature down" >../down.out 2>&1 &&
	id=$(newest_run) &&
	# execute by cheap, review by fake on small-model, verify stops
	test "$(exits "$id" provider)" = "fake fake cheap fake" &&
	test "$(exits "$id" model)" = "- - - small-model" &&
	test "$(calls_of "$id")" = "plan architect execute review" &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "no budget.downgrade for the verifier role" ../reason &&
	cat >../expect <<-\EOF &&
	max_turns_per_run downgrade
	max_turns_per_run downgrade
	max_turns_per_run stop
	EOF
	actions "$id" >../actual &&
	test_cmp ../expect ../actual &&
	"$BATON" events "$id" --json >../ev &&
	jq -s -e "[.[] | select(.type == \"budget_action\" and .data.action == \"downgrade\") | .data.role + \"=\" + .data.to] == [\"implementer=cheap\", \"reviewer=small-model\"]" ../ev &&
	jq -s -e "[.[] | select(.type == \"budget_action\" and .data.action == \"stop\")][0].data.instead_of == \"downgrade\"" ../ev
'

test_expect_success 'downgrade with no budget.downgrade at all falls back to stop' '
	repo_with down0 "budget: {max_turns_per_run: 1, on_limit: downgrade}" &&
	cd down0 &&
	test_must_fail "$BATON" run "Feature down0" >/dev/null 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	test "$(calls_of "$id")" = plan &&
	test "$(actions "$id")" = "max_turns_per_run stop"
'

test_expect_success 'reduce_effort lowers the effort once per line: high, then medium, then low' '
	repo_with effort "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"], effort: high}
budget:
  max_turns_per_run: 2
  max_turns_per_day: 4
  on_limit: reduce_effort" &&
	cd effort &&
	"$BATON" run "Feature effort" >../effort.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(exits "$id" effort)" = "high high medium medium low" &&
	cat >../expect <<-\EOF &&
	max_turns_per_run reduce_effort
	max_turns_per_day reduce_effort
	EOF
	actions "$id" >../actual &&
	test_cmp ../expect ../actual
'

test_expect_success 'reduce_effort with nothing lower left stops' '
	repo_with effort0 "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"], effort: low}
budget:
  max_turns_per_run: 1
  on_limit: reduce_effort" &&
	cd effort0 &&
	test_must_fail "$BATON" run "Feature effort0" >/dev/null 2>&1 &&
	id=$(newest_run) &&
	test "$(exits "$id" effort)" = "low" &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "provider fake has no lower effort to go to" ../reason &&
	"$BATON" events "$id" --json >../ev &&
	jq -s -e "[.[] | select(.type == \"budget_action\")] | map(.data.action + \"/\" + (.data.instead_of // \"-\")) == [\"stop/reduce_effort\"]" ../ev
'

test_expect_success 'max_turns_per_day counts the earlier runs of the day' '
	repo_with day "budget: {max_turns_per_day: 7, on_limit: stop}" &&
	cd day &&
	"$BATON" run "First" >../day1.out 2>&1 &&
	first=$(newest_run) &&
	test "$(run_status "$first")" = merge_ready &&
	test_must_fail "$BATON" run "Second" >../day2.out 2>&1 &&
	second=$(newest_run) &&
	test "$second" != "$first" &&
	test "$(calls_of "$second")" = "plan architect" &&
	run_field "$second" reason >../reason &&
	test_grep "budget.max_turns_per_day (7) reached: 7 agent calls today" ../reason &&
	test "$(actions "$second")" = "max_turns_per_day stop"
'

test_expect_success 'a line of its own: actions.LINE overrides on_limit' '
	repo_with own "budget:
  max_turns_per_run: 3
  max_turns_per_day: 100
  on_limit: pause
  actions: {max_turns_per_run: stop}" &&
	cd own &&
	test_must_fail "$BATON" run "Feature own" >/dev/null 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	test "$(calls_of "$id")" = "plan architect execute"
'

test_expect_success 'config errors name file:line:col and the key' '
	repo_with bad "" &&
	cd bad &&
	cp .baton/config.yaml ../good.yaml &&
	printf "budget:\n  on_limit: sleep\n" >>.baton/config.yaml &&
	test_must_fail "$BATON" config validate >../e1 2>&1 &&
	test_grep "config.yaml:[0-9]*:[0-9]*: budget.on_limit: .sleep. is not one of: pause, stop, downgrade, reduce_effort" ../e1 &&
	cp ../good.yaml .baton/config.yaml &&
	printf "budget:\n  actions: {max_fun: stop}\n" >>.baton/config.yaml &&
	test_must_fail "$BATON" config validate >../e2 2>&1 &&
	test_grep "config.yaml:[0-9]*:[0-9]*: .*max_fun" ../e2 &&
	cp ../good.yaml .baton/config.yaml &&
	printf "budget:\n  actions: {max_tokens: nap}\n" >>.baton/config.yaml &&
	test_must_fail "$BATON" config validate >../e3 2>&1 &&
	test_grep "config.yaml:[0-9]*:[0-9]*: budget.actions.max_tokens: .nap. is not one of" ../e3 &&
	cp ../good.yaml .baton/config.yaml &&
	printf "budget:\n  downgrade: {wizard: cheap}\n" >>.baton/config.yaml &&
	test_must_fail "$BATON" config validate >../e4 2>&1 &&
	test_grep "config.yaml:[0-9]*:[0-9]*: .*wizard" ../e4 &&
	cp ../good.yaml .baton/config.yaml &&
	printf "budget:\n  max_turns_per_run: -1\n" >>.baton/config.yaml &&
	test_must_fail "$BATON" config validate >../e5 2>&1 &&
	test_grep "config.yaml:[0-9]*:[0-9]*: budget.max_turns_per_run" ../e5
'

test_done
