#!/bin/bash
test_description='ACP providers (type: acp) against the mock model server: Gemini CLI (gemini --acp), Qwen Code (qwen --acp) and the Claude Code adapter (claude-code-acp) each carry a run to merge_ready; the edit in the diff, permissions granted, fs and terminal requests served, usage and the session on record, the live output readable'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents gemini qwen claude-code-acp

# acp_script FILE IMPLEMENTER VERIFIER [REVIEWER]: the feature run's
# script with the tool calls (actions) of those stages given.
acp_script() {
	cat >"$1" <<-EOF
	{"rules": [
	  {"match": "You are the planner",
	   "text": "# Plan\n\n1. Add hello.txt with a greeting.\n"},
	  {"match": "You are the architect",
	   "text": "# Design\n\nOne new file at the top: hello.txt.\n"},
	  {"match": "You are the implementer", "actions": $2,
	   "text": "Wrote hello.txt.", "usage": {"in": 120, "out": 30}},
	  {"match": "You are fixing", "text": "Nothing left to fix."},
	  {"match": "You are the reviewer", "actions": ${4:-[]},
	   "text": "The change does what the task asks.\nDECISION: APPROVED"},
	  {"match": "You are the verifier", "actions": $3,
	   "text": "hello.txt is there.\nVERIFICATION: PASSED"}
	]}
	EOF
}

# Gemini CLI 0.61 cannot create a file through a client's
# fs/write_text_file (it reads the file first, and takes the client's
# "not found" error for a failure: google-gemini/gemini-cli#17588), so
# its implementer writes through its shell tool, which it asks leave for.
acp_script gemini.json \
	'[{"call": {"name": "run_shell_command", "args": {"command": "printf '"'"'hello from gemini\\n'"'"' > hello.txt", "description": "write hello.txt"}}}]' \
	'[{"call": {"name": "read_file", "args": {"file_path": "hello.txt"}}}]'
acp_script qwen.json \
	'[{"write": {"path": "hello.txt", "content": "hello from qwen\n"}}]' \
	'[{"call": {"name": "read_file", "args": {"file_path": "{cwd}/hello.txt"}}}]'
acp_script claude.json \
	'[{"call": {"name": "mcp__acp__Write", "args": {"file_path": "{cwd}/hello.txt", "content": "hello from claude\n"}}}]' \
	'[{"call": {"name": "mcp__acp__Bash", "args": {"command": "cat hello.txt && echo term-ok", "description": "show hello.txt", "timeout": 60000}}}]' \
	'[{"call": {"name": "mcp__acp__Read", "args": {"file_path": "{cwd}/hello.txt"}}}]'
for a in gemini qwen claude; do
	mock_start $a $a.json || exit 1
done

# Each agent's own home, named in its env (the sandbox binds it).
mkdir -p ghome/.gemini qhome/.qwen chome/.claude
cat >ghome/.gemini/settings.json <<-\EOF
{"security": {"auth": {"selectedType": "gemini-api-key"},
              "folderTrust": {"enabled": false}},
 "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true,
             "maxAttempts": 1}}
EOF
cat >qhome/.qwen/settings.json <<-\EOF
{"security": {"auth": {"selectedType": "openai"}},
 "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true}}
EOF

provider() {
	case $1 in
	gemini) cat <<-EOF ;;
	    command: ["$AGENTS_BIN/gemini", --acp]
	    model: gemini-2.5-flash
	    env: {HOME: "$TRASH_DIRECTORY/ghome", GOOGLE_GEMINI_BASE_URL: "$(mock_url gemini)", GEMINI_API_KEY: sk-mock}
	EOF
	qwen) cat <<-EOF ;;
	    command: ["$AGENTS_BIN/qwen", --acp]
	    model: mock-model
	    env: {HOME: "$TRASH_DIRECTORY/qhome", OPENAI_BASE_URL: "$(mock_url qwen)/v1", OPENAI_API_KEY: sk-mock, OPENAI_MODEL: mock-model}
	EOF
	claude) cat <<-EOF ;;
	    command: ["$AGENTS_BIN/claude-code-acp"]
	    env: {HOME: "$TRASH_DIRECTORY/chome", CLAUDE_CONFIG_DIR: "$TRASH_DIRECTORY/chome/.claude", ANTHROPIC_BASE_URL: "$(mock_url claude)", ANTHROPIC_API_KEY: sk-mock, IS_SANDBOX: "1", DISABLE_AUTOUPDATER: "1"}
	EOF
	esac
}

for a in gemini qwen claude; do
	export a
	# claude-code-acp (0.16.2) reports no usage over ACP
	usage='.tokens_in > 0'
	[ $a = claude ] && usage='.tokens_in == 0'
	export usage

	test_expect_success "$a: a run over ACP reaches merge_ready" '
		make_repo $a &&
		baton_init_with_agent $a "providers:
  acp:
    type: acp
$(provider $a)
    timeout_seconds: 180
roles: {default: acp}" &&
		(cd $a && "$BATON" config validate) &&
		cd $a &&
		test_expect_code 0 "$BATON" run "Add hello.txt" >../$a.out 2>../$a.err &&
		test_grep merge_ready ../$a.out
	'

	test_expect_success "$a: the edit is in the diff, every call on record" '
		cd $a &&
		id=$(newest_run) &&
		"$BATON" diff "$id" >../$a.diff &&
		test_grep "+hello from $a" ../$a.diff &&
		"$BATON" show --json "$id" >../$a.json &&
		test_jq "[.calls[] | select(.type == \"acp\" and .failure == \"none\" and $usage and (.session | length) > 0)] | length == 5" ../$a.json
	'

	test_expect_success "$a: the transcript is the JSON-RPC traffic, the live output readable" '
		cd $a &&
		id=$(newest_run) &&
		out=$(ls .baton/runs/$id/calls/*-execute-acp-0.stdout) &&
		test_grep "\"method\":\"initialize\"" "$out" &&
		test_grep "\"method\":\"session/new\"" "$out" &&
		test_grep "\"method\":\"session/prompt\"" "$out" &&
		test_grep "\"stopReason\":\"end_turn\"" "$out" &&
		"$BATON" events "$id" --json >../$a.events &&
		jq -r "select(.type == \"agent_output\") | .data.text" ../$a.events >../$a.live &&
		test_grep "^\[tool\] " ../$a.live &&
		test_grep "Wrote hello.txt." ../$a.live &&
		test_must_fail grep "\"jsonrpc\"" ../$a.live
	'
done

test_expect_success 'qwen: the permission asked before the edit was granted with allow_once, the file written through fs/write_text_file and read back through fs/read_text_file' '
	cd qwen &&
	out=$(ls .baton/runs/$(newest_run)/calls/*-execute-acp-0.stdout) &&
	test_grep "\"method\":\"session/request_permission\"" "$out" &&
	test_grep "\"result\":{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"proceed_once\"}}" "$out" &&
	test_must_fail grep "\"optionId\":\"proceed_always\"}}" "$out" &&
	test_grep "\"method\":\"fs/write_text_file\"" "$out" &&
	ver=$(ls .baton/runs/$(newest_run)/calls/*-verify-acp-0.stdout) &&
	test_grep "\"method\":\"fs/read_text_file\"" "$ver" &&
	test_grep "\"content\":\"hello from qwen" "$ver"
'

test_expect_success 'gemini: the shell command was asked for and granted, the model set over ACP' '
	cd gemini &&
	out=$(ls .baton/runs/$(newest_run)/calls/*-execute-acp-0.stdout) &&
	test_grep "\"method\":\"session/request_permission\".*\"kind\":\"execute\"" "$out" &&
	test_grep "\"optionId\":\"proceed_once\"}}" "$out" &&
	test_grep "\"method\":\"session/set_model\".*\"modelId\":\"gemini-2.5-flash\"" "$out" &&
	jq -e -s "any(.[]; .model == \"gemini-2.5-flash\")" ../gemini.log
'

test_expect_success 'claude-code-acp: its reviewer read through fs/read_text_file, its verifier ran a command in a baton terminal' '
	cd claude &&
	id=$(newest_run) &&
	rev=$(ls .baton/runs/$id/calls/*-review-acp-0.stdout) &&
	test_grep "\"method\":\"fs/read_text_file\"" "$rev" &&
	test_grep "\"content\":\"hello from claude" "$rev" &&
	ver=$(ls .baton/runs/$id/calls/*-verify-acp-0.stdout) &&
	test_grep "\"method\":\"terminal/create\"" "$ver" &&
	test_grep "\"method\":\"terminal/output\"\|\"method\":\"terminal/wait_for_exit\"" "$ver" &&
	test_grep "term-ok" "$ver"
'

test_done
