#!/bin/bash
test_description='approvals defer at any gate: the run pauses at the gate, and resume asks the same question again (CLI and API alike)'
. "$(dirname "$0")/../lib/test-lib.sh"

gate='runtime: {judge: false}
policies: {require_approval_at_stages: [executing]}'

test_expect_success 'setup: a feature pipeline with a gate before executing' '
	make_repo repo &&
	baton_init_with_agent repo "$gate" &&
	(cd repo && "$BATON" pipeline show feature >../feature.txt) &&
	test_grep "waiting_for_approval *-> .*paused (defer)" feature.txt &&
	test_grep "paused *-> .*waiting_for_approval (ask again)" feature.txt
'

test_expect_success 'defer at a feature gate pauses the run at the gate; the driver stays' '
	cd repo &&
	bg_start "$TRASH_DIRECTORY/run1" "$BATON" run "Deferred task" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) && echo "$id" >../run1.id &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals defer "$id" >../defer.out 2>../defer.err &&
	echo "$id: paused" >../expect &&
	test_cmp ../expect ../defer.out &&
	"$BATON" show "$id" --json >../show.json &&
	test_jq ".status == \"paused\" and .paused_at_status == \"waiting_for_approval\" and .gate_status == \"executing\"" ../show.json &&
	"$BATON" events "$id" --json | jq -s "map(select(.type == \"transition\")) | last" >../last.json &&
	test_jq ".from == \"waiting_for_approval\" and .to == \"paused\" and .data.decision == \"defer\"" ../last.json &&
	"$BATON" approvals --json >../list.json &&
	test_jq "length == 0" ../list.json &&
	"$BATON" show "$id" >../show.txt &&
	test_grep "deferred at the gate into executing" ../show.txt &&
	test_path_is_missing ../run1.rc
'

test_expect_success 'resume asks the same question again; approve then finishes the run' '
	cd repo &&
	id=$(cat ../run1.id) &&
	"$BATON" resume "$id" >../resume.out 2>&1 &&
	wait_for_status "$id" waiting_for_approval &&
	test "$(run_field "$id" gate_status)" = executing &&
	"$BATON" approvals --json >../list.json &&
	test_jq "length == 1 and .[0].gate == \"executing\" and .[0].redo == \"architecting\"" ../list.json &&
	transitions "$id" | tail -n 3 >../path &&
	printf "%s\n" waiting_for_approval paused waiting_for_approval >../expect &&
	test_cmp ../expect ../path &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 0 ../calls &&
	"$BATON" approvals approve "$id" &&
	test "$(bg_wait ../run1)" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 1 ../calls &&
	grep "waiting for approval to enter executing" ../run1.out >../asked &&
	test_line_count = 2 ../asked
'

test_expect_success 'with no driver: defer, resume drives the run back to the gate; request-changes still knows the stage before it' '
	cd repo &&
	bg_start "$TRASH_DIRECTORY/run2" "$BATON" run "Deferred again" &&
	wait_for "test \"\$(newest_run)\" != \"$(cat ../run1.id)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	kill "$(cat ../run2.pid)" && bg_wait ../run2 >/dev/null &&
	# a pause asked for at the gate is done by the defer, not left
	# pending ("paused (pausing)")
	"$BATON" pause "$id" >/dev/null 2>&1 &&
	"$BATON" approvals defer "$id" >../defer2.out &&
	test_grep "$id: paused (no process drives it: baton resume $id)" ../defer2.out &&
	"$BATON" show "$id" --json | jq -e ".pause_requested == false" &&
	"$BATON" status >../status2.txt &&
	test_grep ! "pausing" ../status2.txt &&
	bg_start "$TRASH_DIRECTORY/resume2" "$BATON" resume "$id" &&
	wait_for "test \"\$(run_status $id)\" = waiting_for_approval && test \"\$(transitions $id | tail -n 1)\" = waiting_for_approval" &&
	"$BATON" approvals request-changes "$id" --guidance "smaller design" &&
	wait_for_status "$id" waiting_for_approval &&
	transitions "$id" >../path2 &&
	test_grep "^architecting$" ../path2 &&
	"$BATON" abort "$id" >/dev/null &&
	bg_wait ../resume2 >/dev/null
'

test_expect_success 'the API defers the same way: POST /api/v1/approvals/{id} defer, then resume asks again' '
	cd repo &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Deferred by API\"}" >../task.json &&
	t=$(jq -r .id ../task.json) &&
	wait_for "\"\$BATON\" task show $t --json | jq -e \".status == \\\"blocked\\\"\"" 60 &&
	"$BATON" task show $t --json >../t.json &&
	test_jq ".block_reason == \"awaiting_approval\"" ../t.json &&
	id=$(jq -r .run ../t.json) &&
	api_expect 200 POST "/api/v1/approvals/$id" "{\"decision\": \"defer\"}" >../d.json &&
	test_jq ".status == \"paused\" and .paused_at_status == \"waiting_for_approval\" and .gate_status == \"executing\"" ../d.json &&
	wait_for "\"\$BATON\" task show $t --json | jq -e \".block_reason == \\\"paused\\\"\"" 60 &&
	api_expect 200 POST "/api/v1/runs/$id/resume" >../r.json &&
	wait_for "\"\$BATON\" task show $t --json | jq -e \".block_reason == \\\"awaiting_approval\\\"\"" 60 &&
	test "$(run_field "$id" gate_status)" = executing &&
	api_expect 200 POST "/api/v1/approvals/$id" "{\"decision\": \"approve\"}" >../a.json &&
	wait_for "\"\$BATON\" task show $t --json | jq -e \".status == \\\"done\\\"\"" 60 &&
	test "$(run_status "$id")" = merge_ready &&
	kill "$(cat ../serve.pid)" && bg_wait ../serve >/dev/null
'

test_done
