#!/bin/bash
test_description='chat intake modes with the judge on: a plan started in Direct runs without the judge (its tasks end done, never judged), one started in Local Git is judged'
. "$(dirname "$0")/../lib/test-lib.sh"

P=$FAKE_STATE/chat
mkdir -p "$P"
# the agent: appends the run id to work.txt
cat >"$TRASH_DIRECTORY/agent" <<-\EOF
#!/bin/sh
cat >/dev/null
echo "$BATON_RUN_ID" >>"$BATON_WORKTREE/work.txt"
echo done
EOF
# the judge: records what it judged, approves
cat >"$TRASH_DIRECTORY/judge" <<-\EOF
#!/bin/sh
cat >/dev/null
echo "$(basename "$PWD")" >>"$FAKE_STATE/judged"
echo "DECISION: APPROVED"
EOF
# the planner: a one-task plan named after the message
cat >"$TRASH_DIRECTORY/planner.sh" <<-\EOF
#!/bin/sh
key=$(grep -o "PLAN-[a-z]*" | tail -n 1)
printf '```json\n{"tasks": [{"key": "%s", "title": "Task %s"}]}\n```\n---PLAN_READY---\n' "$key" "$key"
EOF
chmod +x "$TRASH_DIRECTORY/agent" "$TRASH_DIRECTORY/judge" "$TRASH_DIRECTORY/planner.sh"

# plan WORD MODE: a conversation whose plan is started in MODE
plan() {
	api_expect 201 POST /api/v1/chat/conversations "" >new.json &&
	id=$(jq .id new.json) &&
	api_expect 202 POST /api/v1/chat/conversations/$id/messages "{\"content\": \"PLAN-$1\"}" &&
	curl -s -N --max-time 30 -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/chat/conversations/$id/stream" >stream.out &&
	grep -q "\"phase\":\"plan_proposal\"" stream.out &&
	api_expect 200 POST /api/v1/chat/conversations/$id/start-execution "{\"mode\": \"$2\"}" >/dev/null
}

test_expect_success 'setup: serve with the judge on' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
  judger: {type: command, command: [\"$TRASH_DIRECTORY/judge\"]}
  planner: {type: command, command: [\"$TRASH_DIRECTORY/planner.sh\"]}
roles: {default: instant, judge: judger, planner: planner}
pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {judge: true, sweep_seconds: 1}" &&
	cd repo &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1
'

test_expect_success 'Direct: done without the judge; Local Git: judged' '
	cd repo &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	HTTP_TOKEN=$(cat .baton/token) &&
	: >"$FAKE_STATE/judged" &&
	plan direct direct &&
	plan local local &&
	wait_for "\"$BATON\" task list --json | jq -e \"[.[].status] == [\\\"done\\\", \\\"done\\\"]\" >/dev/null" 120 &&
	"$BATON" task list --json >tasks.json &&
	test_jq "sort_by(.id) | [.[].origin] == [\"chat-direct\", \"chat\"]" tasks.json &&
	test_jq "sort_by(.id) | [.[].judgement_version] == [0, 1]" tasks.json &&
	test_line_count = 1 "$FAKE_STATE/judged"
'

test_done
