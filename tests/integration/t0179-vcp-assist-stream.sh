#!/bin/bash
test_description='VCP with scripted agents: assist auto-complete (a report completes the run without asking) and task:error on the live stream'
. "$(dirname "$0")/../lib/test-lib.sh"

# A scripted assistant (as t0034's, without escalations).
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	echo "$BATON_RUN_ID $BATON_STAGE_KIND" >>"$FAKE_STATE/calls"
	case "$BATON_STAGE_KIND" in
	plan)
		printf '# Plan\n\n1. write done.txt\n' >"$BATON_OUT_DIR/plan.md" ;;
	execute)
		echo "done" >done.txt
		echo "wrote done.txt" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

test_expect_success 'setup' '
	write_agent &&
	make_repo auto &&
	baton_init_with_agent auto "providers:
  a: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: a}
assist: {auto_complete: true}"
'

# --- assist auto-complete ----------------------------------------------------

test_expect_success 'assist auto_complete: the run reports and completes without a feedback question (exit 0)' '
	cd auto &&
	test_expect_code 0 "$BATON" run --pipeline assist "Keep notes for the team" >../auto.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = completed &&
	transitions "$id" >../path &&
	printf "%s\n" created intake planning planned executing verifying reporting completed >../expect &&
	test_cmp ../expect ../path &&
	"$BATON" events "$id" --json | jq -s . >../events.json &&
	test_jq "[.[] | select(.type == \"question\")] | length == 0" ../events.json &&
	test_jq "[.[] | select(.type == \"report\")] | length >= 1" ../events.json &&
	test_jq "[.[] | select(.type == \"report\")] | last | .data.evidence | map(select(test(\"plan.md|execution.log\"))) | length == 2" ../events.json &&
	"$BATON" approvals --json >../list.json &&
	test_jq "length == 0" ../list.json &&
	git show "baton/$id:done.txt" >../done &&
	test_grep "^done$" ../done
'

test_done
