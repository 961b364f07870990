#!/bin/bash
test_description='agent output streams as agent_output events while the agent runs; runs report on the OpenViber cadence'
. "$(dirname "$0")/../lib/test-lib.sh"

# A secret the agent echoes: baton learns it from its environment (the
# name says TOKEN) and must never put it in an event.
export STREAM_TOKEN=tok-stream-secret-0123456789

# An agent whose plan stage talks for about 3.6 seconds, a line at a time;
# the other stages answer at once.
write_agent() {
	cat >"$1" <<-\EOF
	#!/bin/sh
	case "$BATON_STAGE_KIND" in
	plan)
		echo "line one"
		sleep 1.2
		echo "line two has $STREAM_TOKEN in it"
		sleep 1.2
		echo "line three"
		sleep 1.2
		printf "line four, unfinished"
		;;
	review) echo "DECISION: APPROVED" ;;
	verify) echo "VERIFICATION: PASSED" ;;
	*) echo "done" ;;
	esac
	EOF
	chmod +x "$1"
}

test_expect_success 'setup: a repo whose agent talks slowly while it plans' '
	make_repo repo &&
	write_agent "$PWD/talker" &&
	baton_init_with_agent repo "providers:
  talker: {type: command, command: [\"$PWD/talker\"]}
roles: {default: talker}" &&
	(cd repo && test_expect_code 0 "$BATON" run "Add hello.txt" \
		>../run.out 2>../run.err) &&
	(cd repo && newest_run >../run-id && test -s ../run-id &&
	 "$BATON" events "$(cat ../run-id)" --json >../events.json)
'

test_expect_success 'the plan stage streamed at least two agent_output events before its agent_exited' '
	jq -s "[.[] | select(.type == \"agent_exited\" and
		(.data.call | test(\"-plan-\")))][0].seq" events.json >exited &&
	jq -s "[.[] | select(.type == \"agent_output\" and
		.data.stage == \"plan\") | .seq]" events.json >outputs.json &&
	test_jq "length >= 2" outputs.json &&
	test_jq "all(. < $(cat exited))" outputs.json &&
	jq -s "[.[] | select(.type == \"agent_output\")][0].data" \
		events.json >first.json &&
	test_jq ".provider == \"talker\" and (.call | test(\"-plan-talker-\"))" \
		first.json
'

test_expect_success 'the texts, in seq order, carry the whole output, redacted' '
	jq -sj "sort_by(.seq) | .[] | select(.type == \"agent_output\" and
		.data.stage == \"plan\") | .data.text" events.json >text &&
	printf "%s\n" "line one" \
		"line two has [redacted:STREAM_TOKEN] in it" "line three" \
		>expect &&
	printf "line four, unfinished" >>expect &&
	test_cmp expect text
'

test_expect_success 'the secret is in no event, and the stdout file is redacted' '
	test_must_fail grep -F "$STREAM_TOKEN" events.json &&
	test_must_fail grep -r -F "$STREAM_TOKEN" repo/.baton/runs
'

test_expect_success 'the checks stream their output too' '
	jq -sj "[.[] | select(.type == \"agent_output\" and
		.data.stage == \"validate\")] | map(.data.text) | add" \
		events.json >checks &&
	test_grep "tests passed" checks
'

test_expect_success 'with the default cadence a short run reports once, at the end' '
	jq -s "[.[] | select(.type == \"report\")]" events.json >reports.json &&
	test_jq "length == 1" reports.json &&
	test_jq ".[0].data.n == 1 and .[0].data.kind == \"final\" and
		.[0].data.status == \"merge_ready\"" reports.json &&
	# it comes just before the terminal transition, the last event
	jq -s ".[-2:]" events.json >last.json &&
	test_jq ".[0].type == \"report\" and .[1].type == \"transition\" and
		.[1].to == \"merge_ready\"" last.json &&
	id=$(cat run-id) &&
	test_path_is_file repo/.baton/runs/$id/reports/001.md &&
	test_path_is_missing repo/.baton/runs/$id/reports/002.md &&
	test_grep "^# Report 1 on $id (final)" repo/.baton/runs/$id/reports/001.md
'

test_expect_success 'the final report names the changes, the budget and the evidence' '
	jq ".[0].data" reports.json >final.json &&
	test_jq "(.changed | map(select(test(\"^stage plan passed\"))) |
		length) == 1" final.json &&
	test_jq "(.changed | map(select(test(\"^stage verify passed\"))) |
		length) == 1" final.json &&
	test_jq ".blockers == [] and (.next | length) >= 1" final.json &&
	test_jq ".budget | has(\"tokens_in\") and has(\"cost_usd\") and
		.remaining_cost_usd == null and .remaining_tokens == null and
		(.active_ms > 0)" final.json &&
	test_jq ".evidence | any(test(\"^.baton/runs/.*/plan.md$\"))" \
		final.json &&
	test_jq ".evidence | any(test(\"calls/.*-verify-talker-0.stdout$\"))" \
		final.json &&
	test_jq ".elapsed_ms >= 3000" final.json
'

test_expect_success 'reports: milestones per stage, periodic ones, and a final one' '
	make_repo fast &&
	write_agent "$PWD/talker" &&
	baton_init_with_agent fast "providers:
  talker: {type: command, command: [\"$PWD/talker\"]}
roles: {default: talker}
budget: {max_cost_usd: 5, max_tokens: 100000}
reports: {milestone_after_seconds: 0, periodic_after_seconds: 0, interval_seconds: 1}" &&
	cd fast &&
	test_expect_code 0 "$BATON" run "Add hello.txt" >../fast.out 2>&1 &&
	id=$(newest_run) &&
	"$BATON" events "$id" --json >../fast-events.json &&
	jq -s "[.[] | select(.type == \"report\") | .data]" \
		../fast-events.json >../fast-reports.json &&
	# plan, architect, execute, validate and review end as milestones;
	# verify ends the run, with the final report
	test_jq "[.[] | select(.kind == \"milestone\")] | length == 5" \
		../fast-reports.json &&
	test_jq "[.[] | select(.kind == \"periodic\")] | length >= 2" \
		../fast-reports.json &&
	test_jq "[.[] | select(.kind == \"final\")] | length == 1" \
		../fast-reports.json &&
	test_jq "last | .kind == \"final\"" ../fast-reports.json &&
	test_jq "[.[].n] == [range(1; length + 1)]" ../fast-reports.json &&
	n=$(jq length ../fast-reports.json) &&
	test "$(ls .baton/runs/$id/reports | wc -l)" -eq "$n" &&
	test_path_is_file .baton/runs/$id/reports/$(printf %03d "$n").md
'

test_expect_success 'a milestone says what its stage did and what comes next' '
	jq "[.[] | select(.kind == \"milestone\")][0]" fast-reports.json \
		>m1.json &&
	test_jq ".changed[0] | test(\"^stage plan passed\")" m1.json &&
	test_jq ".next[0] == \"architect (architect)\"" m1.json &&
	test_jq ".budget.max_cost_usd == 5 and .budget.remaining_cost_usd == 5 and
		.budget.max_tokens == 100000 and
		.budget.remaining_tokens == 100000" m1.json &&
	jq "[.[] | select(.kind == \"periodic\")][0]" fast-reports.json \
		>p1.json &&
	test_jq ".status == \"planning\" and .stage == \"plan\"" p1.json
'

test_expect_success 'a run blocked by failing checks reports the blocker' '
	make_repo broken &&
	write_agent "$PWD/talker" &&
	baton_init_with_agent broken "providers:
  talker: {type: command, command: [\"$PWD/talker\"]}
roles: {default: talker}
validate: {commands: [\"echo checks say no; exit 1\"], timeout_seconds: 30}
pipelines:
  nofix:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
      - {name: validate, kind: validate}
workflow: {pipeline: nofix}" &&
	cd broken &&
	test_expect_code 3 "$BATON" run "Add hello.txt" >../broken.out 2>&1 &&
	id=$(newest_run) &&
	"$BATON" events "$id" --json |
		jq -s "[.[] | select(.type == \"report\")] | last | .data" \
		>../broken.json &&
	test_jq ".kind == \"final\" and .status == \"blocked\"" ../broken.json &&
	test_jq ".blockers | any(test(\"checks are failing\"))" ../broken.json &&
	test_jq ".blockers | any(test(\"^blocked: validation failed\"))" \
		../broken.json
'

test_done
