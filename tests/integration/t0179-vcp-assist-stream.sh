#!/bin/bash
test_description='VCP with scripted agents: assist auto-complete (a report completes the run without asking), and task:error and task:stopped (from an aborted run) on the live stream'
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

# --- task:error on the live stream -----------------------------------------

test_expect_success 'a task whose run blocks: the WebSocket stream ends it with task:error and the reason' '
	make_repo failing &&
	baton_init_with_agent failing "runtime: {judge: false}" &&
	cd failing &&
	export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit FAKE_EXIT_CODE=3 \
		FAKE_FAIL_MESSAGE="fake-agent: scripted failure" &&
	serve_http ../serve-failing --workers 1 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Doomed\"}" >../t &&
	id=$(jq .id ../t) &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN&task=$id&after=0" \
		--until "task:error" --timeout 120 >../ws &&
	grep "\"type\":\"task:error\"" ../ws >../err.json &&
	test_line_count = 1 ../err.json &&
	test_jq ".task == $id and .task_id == $id and (.run | type) == \"string\"" ../err.json &&
	test_jq "(.reason | type) == \"string\" and (.reason | length) > 0" ../err.json &&
	test_jq ".event.type == \"transition\" and (.event.to == \"blocked\" or .event.to == \"failed\")" ../err.json &&
	run=$(jq -r .run ../err.json) &&
	st=$(run_status "$run") &&
	test "$st" = "$(jq -r .event.to ../err.json)" &&
	test "$(run_field "$run" reason)" = "$(jq -r .reason ../err.json)" &&
	# no task:completed for it
	! grep -q "\"type\":\"task:completed\"" ../ws
'

test_expect_success 'a task whose run is aborted (not a task:stop): the stream ends it with task:stopped from the aborted transition' '
	make_repo held &&
	baton_init_with_agent held "runtime: {judge: false}" &&
	cd held &&
	# the execute agent stays until a file "go" appears in the worktree:
	# never, here
	export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_WAIT_FOR=go &&
	serve_http ../serve-held --workers 1 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Held\"}" >../t &&
	id=$(jq .id ../t) &&
	wait_for "test -n \"\$(newest_run)\" && test \"\$(run_status \$(newest_run))\" = executing" 60 &&
	run=$(newest_run) &&
	"$BATON" abort "$run" >../abort.out 2>&1 &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN&task=$id&after=0" \
		--until "task:stopped" --timeout 60 >../ws &&
	grep "\"type\":\"task:stopped\"" ../ws >../stopped.json &&
	test_line_count = 1 ../stopped.json &&
	test_jq ".task == $id and .run == \"$run\"" ../stopped.json &&
	test_jq ".event.type == \"transition\" and .event.from == \"executing\" and .event.to == \"aborted\"" ../stopped.json &&
	test "$(run_status "$run")" = aborted &&
	! grep -q "\"type\":\"task:error\"\|\"type\":\"task:completed\"" ../ws
'

test_done
