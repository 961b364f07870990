#!/bin/bash
test_description='ACP: baton abort in the middle of a turn sends session/cancel, waits briefly for the turn to end, then kills the agent process group; the run ends aborted. A scripted agent that ends its turn, one that ignores the cancel (and left a grandchild), and Qwen Code stuck in a shell command against the mock'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents qwen

ACP_AGENT=$TEST_DIRECTORY/lib/acp-agent.py

# group_members PGID: the live processes of process group PGID.
group_members() {
	local f line
	local -a fields
	for f in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null <"$f" || continue
		read -r -a fields <<<"${line##*) }"
		[ "${fields[2]}" = "$1" ] || continue
		case ${fields[0]} in Z | X) continue ;; esac
		echo "${f//[!0-9]/} $line"
	done
}

# log_field NAME EVENT FIELD: FIELD of the last EVENT in NAME's agent log
# (the implementer's call comes after the planner's and the architect's).
log_field() {
	jq -r "select(.event == \"$2\") | .$3" "$FAKE_STATE/$1.log" | tail -n 1
}

for mode in ends ignores; do
	ignore=false
	[ $mode = ignores ] && ignore=true
	export mode ignore
	cat >"$FAKE_STATE/$mode.json" <<-EOF
	{"rules": [{"match": "You are the implementer", "steps": [
	  {"text": "Starting on it."},
	  {"tool_call": {"toolCallId": "c1", "title": "Thinking hard", "kind": "think", "status": "in_progress"}},
	  {"grandchild": true},
	  {"wait_cancel": 120, "ignore": $ignore}]}]}
	EOF

	test_expect_success "agent that $mode the cancel: baton abort mid-turn ends the run aborted" '
		make_repo $mode &&
		baton_init_with_agent $mode "providers:
  acp:
    type: acp
    command: [python3, \"$ACP_AGENT\"]
    env: {ACP_SCRIPT: \"$FAKE_STATE/$mode.json\", ACP_LOG: \"$FAKE_STATE/$mode.log\"}
roles: {default: acp}
execution: {sandbox: none}" &&
		cd $mode &&
		bg_start ../$mode.run "$BATON" run "Take your time" &&
		wait_for "test -s \"$FAKE_STATE/$mode.log\" && grep -q waiting \"$FAKE_STATE/$mode.log\"" 60 &&
		id=$(newest_run) &&
		test "$(run_status "$id")" = executing &&
		agent=$(log_field $mode waiting pid) &&
		grandchild=$(log_field $mode grandchild pid) &&
		process_is_alive "$agent" && process_is_alive "$grandchild" &&
		echo "$agent" >../$mode.agent && echo "$grandchild" >../$mode.grandchild &&
		"$BATON" abort "$id" >../$mode.abort &&
		rc=$(bg_wait ../$mode.run) &&
		test "$rc" = 3 &&
		test "$(run_status "$id")" = aborted
	'

	test_expect_success "agent that $mode the cancel: session/cancel reached it; its group is gone" '
		test "$(log_field $mode cancel params.sessionId)" = "$(log_field $mode session id)" &&
		agent=$(cat $mode.agent) &&
		! process_is_alive "$agent" &&
		! process_is_alive "$(cat $mode.grandchild)" &&
		group_members "$agent" >survivors &&
		test_line_count = 0 survivors
	'

	test_expect_success "agent that $mode the cancel: the record says how the turn ended" '
		cd $mode &&
		id=$(newest_run) &&
		out=$(ls .baton/runs/$id/calls/*-execute-acp-0.stdout) &&
		test_grep "\"method\":\"session/cancel\"" "$out" &&
		test_grep "^\[cancel\] the run is stopping" "$out" &&
		if [ '$mode' = ends ]; then
			test_grep "\"stopReason\":\"cancelled\"" "$out" &&
			test_grep "^\[cancel\] the agent ended its turn" "$out" &&
			grep -q answered_cancelled "$FAKE_STATE/'$mode'.log"
		else
			test_grep "^\[cancel\] the agent did not end its turn in time" "$out" &&
			! grep -q answered_cancelled "$FAKE_STATE/'$mode'.log"
		fi &&
		"$BATON" events "$id" --json >../$mode.events &&
		jq -s -e "[.[] | select(.type == \"agent_exited\")] | last | .data.outcome == \"stopped\"" ../$mode.events &&
		jq -r "select(.type == \"agent_output\") | .data.text" ../$mode.events >../$mode.live &&
		test_grep "Starting on it." ../$mode.live &&
		test_grep "^\[tool\] Thinking hard (think): in_progress" ../$mode.live &&
		test_grep "^\[cancel\]" ../$mode.live
	'
done

cat >qwen.json <<\EOF
{"rules": [
  {"match": "You are the implementer",
   "actions": [{"call": {"name": "run_shell_command", "args": {"command": "echo started >started.txt; sleep 317", "description": "wait"}}}],
   "text": "done"}
]}
EOF
mock_start qwen qwen.json
mkdir -p qhome/.qwen
cat >qhome/.qwen/settings.json <<\EOF
{"security": {"auth": {"selectedType": "openai"}},
 "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true}}
EOF

test_expect_success 'Qwen Code in a long shell command: abort cancels the turn, the run ends aborted, nothing of it is left' '
	make_repo q &&
	baton_init_with_agent q "providers:
  qwen:
    type: acp
    command: [\"$AGENTS_BIN/qwen\", --acp]
    env: {HOME: \"$TRASH_DIRECTORY/qhome\", OPENAI_BASE_URL: \"$(mock_url qwen)/v1\", OPENAI_API_KEY: sk-mock, OPENAI_MODEL: mock-model}
    timeout_seconds: 300
roles: {default: qwen}
execution: {sandbox: none}" &&
	cd q &&
	bg_start ../q.run "$BATON" run "Add hello.txt" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for "test -f \"\$(run_field $id worktree)/started.txt\"" 120 &&
	"$BATON" events "$id" --json >../q.events &&
	pid=$(jq -r "select(.type == \"agent_started\") | .data.pid" ../q.events | tail -n 1) &&
	test -n "$pid" && test "$pid" != null &&
	process_is_alive "$pid" &&
	"$BATON" abort "$id" >../q.abort &&
	rc=$(bg_wait ../q.run) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = aborted &&
	! process_is_alive "$pid" &&
	group_members "$pid" >../q.survivors &&
	test_line_count = 0 ../q.survivors &&
	out=$(ls .baton/runs/$id/calls/*-execute-qwen-0.stdout) &&
	test_grep "\"method\":\"session/cancel\"" "$out" &&
	! pgrep -f "sleep 317" >/dev/null
'

test_done
