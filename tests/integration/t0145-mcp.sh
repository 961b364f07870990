#!/bin/bash
test_description='baton mcp: an MCP client (tests/lib/mcp-cases.py) case by case: the handshake, tools and resources, every tool, protocol errors, bad params, a huge line, stdin closed mid-call, and hostile ids, text and URIs refused'
. "$(dirname "$0")/../lib/test-lib.sh"

cases() {
	python3 "$TEST_DIRECTORY/lib/mcp-cases.py" "$@"
}

test_expect_success 'setup: a repository whose runs stop at a gate before executing' '
	make_repo repo &&
	baton_init_with_agent repo "policies: {require_approval_at_stages: [executing]}"
'

test_expect_success 'initialize answers the version asked (each of three), ping; notifications get no answer' '
	cd repo && cases handshake
'

test_expect_success 'tools/list: every tool with an object inputSchema; the resource templates' '
	cd repo && cases list
'

test_expect_success 'add_task, list_tasks, show_task; the tasks are in the store' '
	cd repo &&
	cases add_task >../task-id &&
	id=$(cat ../task-id) &&
	"$BATON" task show "$id" --json >../task.json &&
	test_jq ".title == \"Add CSV export\" and .priority == 7 and .area == \"src\" and .status == \"queued\" and .verify == [\"make test\"] and .allowed_paths == [\"src/**\"]" ../task.json &&
	"$BATON" task list --json >../tasks.json &&
	test_jq "[.[] | select(.title == \"After the export\" and .depends_on == [$id])] | length == 1" ../tasks.json
'

test_expect_success 'bad params: -32602 naming the argument; the server goes on' '
	cd repo && cases bad_params
'

test_expect_success 'protocol errors: parse (-32700), not a request (-32600), unknown method (-32601)' '
	cd repo && cases protocol_errors
'

test_expect_success 'a line over 1 MiB is refused and skipped; the next is answered' '
	cd repo && cases huge_line
'

test_expect_success 'stdin closed behind a call: answered, exit 0; stdout gone: exit 1' '
	cd repo && cases stdin_closed
'

test_expect_success 'a run at the gate: list_approvals, decide approve; it finishes merge_ready' '
	cd repo &&
	bg_start "$TRASH_DIRECTORY/a" "$BATON" run "Gated task" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	newest_run >../a.id &&
	wait_for "test \"\$(run_status \$(cat ../a.id))\" = waiting_for_approval" &&
	cases gate "$(cat ../a.id)" &&
	rc=$(bg_wait ../a) &&
	test "$rc" = 0 &&
	test "$(run_status "$(cat ../a.id)")" = merge_ready &&
	"$BATON" events "$(cat ../a.id)" >../a.events &&
	test_grep "waiting_for_approval -> executing" ../a.events &&
	n=$(db_query "SELECT count(*) FROM events WHERE run_id = '\''$(cat ../a.id)'\''
		AND data LIKE '\''%\"actor\":%\"mcp\"%'\''") &&
	test "$n" -ge 1
'

test_expect_success 'list_runs, show_run, run_diff, run_report and the resources of a finished run' '
	cd repo && cases runs "$(cat ../a.id)"
'

test_expect_success 'steer, pause, resume and abort a run at the gate' '
	cd repo &&
	bg_start "$TRASH_DIRECTORY/b" "$BATON" run "Second gated task" &&
	wait_for "test \"\$(newest_run)\" != \"\$(cat ../a.id)\"" &&
	newest_run >../b.id &&
	wait_for "test \"\$(run_status \$(cat ../b.id))\" = waiting_for_approval" &&
	cases control "$(cat ../b.id)" &&
	test "$(run_status "$(cat ../b.id)")" = aborted &&
	"$BATON" show --json "$(cat ../b.id)" >../b.json &&
	test_jq "[.events[] | select(.type == \"steer\")] | length == 1" ../b.json
'

test_expect_success 'hostile: run ids with path characters, control characters in text, URIs outside baton://runs refused' '
	cd repo &&
	cases hostile "$(cat ../b.id)" &&
	test_path_is_missing ../passwd &&
	"$BATON" task list --json >../tasks-after.json &&
	test_jq "length == 2" ../tasks-after.json
'

test_done
