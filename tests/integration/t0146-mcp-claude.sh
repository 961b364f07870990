#!/bin/bash
test_description='baton mcp driven by a real MCP client: the Claude Code CLI, configured with baton mcp as a stdio server, against the mock model server scripted to call baton tools: it adds a task (in the store afterwards) and reads a run, its record and its report, back'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents claude

export MOCK_KEY=sk-mock-mcp-0123456789
# The model's turns: each action is a tool call Claude Code makes through
# baton mcp (mcp__SERVER__TOOL), its answer going back to the mock.
cat >script.json <<'JSON'
{"rules": [
  {"match": "Queue the CSV export and tell me about run r1",
   "actions": [
     {"call": {"name": "mcp__baton__add_task",
               "args": {"title": "Add CSV export (asked over MCP)",
                        "body": "Export the table as CSV.", "priority": 4,
                        "verify": ["make test"]}}},
     {"call": {"name": "mcp__baton__list_runs", "args": {}}},
     {"call": {"name": "mcp__baton__show_run", "args": {"run": "r1"}}},
     {"call": {"name": "ReadMcpResourceTool",
               "args": {"server": "baton", "uri": "baton://runs/r1/report"}}},
     {"call": {"name": "mcp__baton__show_run", "args": {"run": "../../etc"}}},
     {"call": {"name": "mcp__baton__show_run", "args": {"run": "r99"}}}],
   "text": "MCP_DONE"},
  {"match": "How did task t1 go",
   "actions": [
     {"call": {"name": "mcp__baton__show_task", "args": {"task": "t1"}}},
     {"call": {"name": "mcp__baton__show_run", "args": {"run": "r2"}}},
     {"call": {"name": "ReadMcpResourceTool",
               "args": {"server": "baton", "uri": "baton://runs/r2/diff"}}}],
   "text": "MCP_TASK_DONE"}
]}
JSON
mock_start mock script.json --require-key "$MOCK_KEY"

# claude PROMPT: one headless turn of the real CLI in repo/, with baton mcp
# as its MCP server "baton" and nothing but baton's tools allowed.
claude_mcp() {
	(cd repo &&
		CLAUDE_CONFIG_DIR="$TRASH_DIRECTORY/claude-home" \
		ANTHROPIC_BASE_URL="$(mock_url mock)" ANTHROPIC_API_KEY="$MOCK_KEY" \
		CLAUDE_CODE_MAX_RETRIES=0 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
		DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 \
		"$AGENTS_BIN/claude" -p "$1" --output-format stream-json --verbose \
			--model claude-sonnet-4-5 --max-turns 10 \
			--mcp-config ../mcp.json --strict-mcp-config \
			--allowedTools "mcp__baton__*" ReadMcpResourceTool \
			</dev/null)
}

test_expect_success 'setup: a repository with one finished run (r1)' '
	make_repo repo &&
	baton_init_with_agent repo "runtime: {judge: false, sweep_seconds: 1}" &&
	(cd repo && "$BATON" run "Seed the history" >../seed.out) &&
	(cd repo && newest_run) >run-id &&
	id=$(cat run-id) &&
	test "$(cd repo && run_status "$id")" = merge_ready &&
	printf "{\"mcpServers\": {\"baton\": {\"type\": \"stdio\", \"command\": \"%s\", \"args\": [\"mcp\"]}}}\n" "$BATON" >mcp.json
'

test_expect_success 'claude connects to baton mcp and calls its tools' '
	claude_mcp "Queue the CSV export and tell me about run r1" >claude.out 2>claude.err &&
	jq -c "select(.type == \"system\" and .subtype == \"init\")" claude.out >init.json &&
	test_jq ".mcp_servers == [{\"name\": \"baton\", \"status\": \"connected\"}]" init.json &&
	test_jq "[.tools[] | select(startswith(\"mcp__baton__\"))] | length == 13" init.json &&
	jq -c "select(.type == \"result\")" claude.out >result.json &&
	test_jq ".result == \"MCP_DONE\" and .is_error == false and .permission_denials == []" result.json &&
	# every scripted call went out and its result came back to the model
	jq -s "[.[] | select(.tools > 0)] | last | .tool_results" mock.log >results &&
	test "$(cat results)" = 6
'

test_expect_success 'the task is in the store, as asked' '
	cd repo &&
	"$BATON" task list --json >../tasks.json &&
	test_jq "length == 1 and .[0].title == \"Add CSV export (asked over MCP)\" and .[0].priority == 4 and .[0].status == \"queued\" and .[0].verify == [\"make test\"] and .[0].body == \"Export the table as CSV.\"" ../tasks.json
'

# results [FILE]: the tool results Claude Code handed its model, in call
# order (FILE: claude.out).
results() {
	jq -c "select(.type == \"user\") | .message.content[] | select(.type == \"tool_result\")" "${1:-claude.out}"
}

test_expect_success 'the run came back: in list_runs, its record from show_run, its report from the resource' '
	id=$(cat run-id) &&
	results >results.jsonl &&
	test_line_count = 6 results.jsonl &&
	sed -n 1p results.jsonl | jq -e ".is_error != true and (.content | tostring | test(\"asked over MCP\"))" &&
	sed -n 2p results.jsonl | jq -e ".content | tostring | test(\"$id\")" &&
	sed -n 3p results.jsonl | jq -e ".is_error != true and (.content | tostring | test(\"merge_ready\")) and (.content | tostring | test(\"baton://runs/$id/report\"))" &&
	sed -n 4p results.jsonl | jq -e ".is_error != true and (.content | tostring | test(\"$id\")) and (.content | tostring | test(\"text/markdown\"))"
'

test_expect_success 'a hostile run id and a missing run come back as errors, and nothing else changed' '
	results >results.jsonl &&
	test_line_count = 6 results.jsonl &&
	sed -n 5p results.jsonl | jq -e ".is_error == true and (.content | tostring | test(\"is not a run id\"))" &&
	sed -n 6p results.jsonl | jq -e ".is_error == true and (.content | tostring | test(\"r99\"))" &&
	(cd repo && "$BATON" status --json) >runs.json &&
	test_jq "length == 1" runs.json
'

test_expect_success 'serve drains the task claude added: its run, r2, is done' '
	cd repo &&
	"$BATON" serve --listen off --exit-when-idle 2>../serve.err &&
	"$BATON" task show 1 --json >../task1.json &&
	test_jq ".status == \"done\" and (.runs | length) == 1" ../task1.json &&
	jq -r ".runs[0]" ../task1.json >../run2-id &&
	case "$(cat ../run2-id)" in r2-*) ;; *) false ;; esac
'

test_expect_success 'a second claude turn reads the task and its run, with the diff, back' '
	claude_mcp "How did task t1 go" >claude2.out 2>claude2.err &&
	jq -c "select(.type == \"result\")" claude2.out >result2.json &&
	test_jq ".result == \"MCP_TASK_DONE\" and .is_error == false" result2.json &&
	id=$(cat run2-id) &&
	case "$id" in r2-*) ;; *) false ;; esac &&
	results claude2.out >results2.jsonl &&
	test_line_count = 3 results2.jsonl &&
	sed -n 1p results2.jsonl | jq -e ".is_error != true and (.content | tostring | test(\"asked over MCP\")) and (.content | tostring | test(\"$id\"))" &&
	sed -n 2p results2.jsonl | jq -e ".is_error != true and (.content | tostring | test(\"$id\")) and (.content | tostring | test(\"\\\"task_id\\\":1\"))" &&
	sed -n 3p results2.jsonl | jq -e ".is_error != true and (.content | tostring | test(\"diff --git\"))"
'

test_done
