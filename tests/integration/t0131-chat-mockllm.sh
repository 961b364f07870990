#!/bin/bash
test_description='chat intake with real agents on the mock model server: the Claude Code CLI, then baton'"'"'s own openai agent, play the planner through serve'"'"'s chat API; a question, then a plan that ends with the marker, then Direct queues its tasks'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents claude

# The first rule whose match occurs in the request answers: once the
# person has said PLEASE-PLAN, the plan (with the marker); before, a
# question.
cat >script.json <<-\EOF
{"rules": [
  {"match": "PLEASE-PLAN",
   "text": "Here is the plan.\n\n```json\n{\"tasks\": [{\"key\": \"parse\", \"title\": \"Add the parser\", \"area\": \"src/parse\"}, {\"key\": \"cli\", \"title\": \"Use the parser in the CLI\", \"area\": \"src/cli\", \"depends_on\": [\"parse\"]}], \"summary\": \"parser first\"}\n```\n\n---PLAN_READY---\n"},
  {"match": "You are the planner", "text": "Which format should the export use, CSV or JSON?"}
]}
EOF
export MOCK_KEY=sk-mock-chat-0123456789
mock_start mock script.json --require-key "$MOCK_KEY"

# talk PROVIDER_YAML: a fresh repository whose planner is the provider,
# serve on it, and a conversation to plan_proposal and started in Direct
talk() {
	api_expect 201 POST /api/v1/chat/conversations "" >new.json &&
	id=$(jq .id new.json) &&
	api_expect 202 POST /api/v1/chat/conversations/$id/messages "{\"content\": \"I want an export\"}" &&
	curl -s -N --max-time 200 -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/chat/conversations/$id/stream" >stream1.out &&
	grep -q "^event: done" stream1.out &&
	grep -q "CSV or JSON" stream1.out &&
	api_expect 202 POST /api/v1/chat/conversations/$id/messages "{\"content\": \"JSON. PLEASE-PLAN\"}" &&
	curl -s -N --max-time 200 -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/chat/conversations/$id/stream" >stream2.out &&
	grep -q "\"phase\":\"plan_proposal\"" stream2.out &&
	api_expect 200 GET /api/v1/chat/conversations/$id >c.json &&
	test_jq ".phase == \"plan_proposal\" and (.plan.tasks | length) == 2" c.json &&
	test_jq ".messages[-1].kind == \"mode_selection\"" c.json &&
	test_jq "[.messages[].content | test(\"PLAN_READY\")] | any | not" c.json &&
	api_expect 200 POST /api/v1/chat/conversations/$id/start-execution "{\"mode\": \"direct\"}" >s.json &&
	test_jq ".phase == \"monitoring\" and .queued == 2" s.json &&
	"$BATON" task list --json >tasks.json &&
	test_jq "length == 2 and ([.[].origin] | unique) == [\"chat-direct\"]" tasks.json
}

test_expect_success 'the Claude Code CLI plans in a conversation' '
	make_repo claude &&
	baton_init_with_agent claude "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  claude:
    type: claude-code
    command: [\"$AGENTS_BIN/claude\"]
    model: claude-sonnet-4-5
    base_url: \"$(mock_url mock)\"
    api_key_env: MOCK_KEY
    max_retries: 0
    timeout_seconds: 180
roles: {default: fake, planner: claude}
runtime: {judge: false}" &&
	cd claude &&
	serve_http "$TRASH_DIRECTORY/serve-claude" --workers 1 &&
	talk &&
	ls .baton/chat/1/turn-2.prompt.md .baton/chat/1/turn-4.stdout &&
	kill "$(cat ../serve-claude.pid)" && bg_wait ../serve-claude >/dev/null
'

test_expect_success 'baton'"'"'s own openai agent plans in a conversation' '
	make_repo own &&
	baton_init_with_agent own "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  own: {type: openai, model: mock-model, base_url: \"$(mock_url mock)/v1\", api_key_env: MOCK_KEY, max_retries: 0}
roles: {default: fake, planner: own}
runtime: {judge: false}" &&
	cd own &&
	serve_http "$TRASH_DIRECTORY/serve-own" --workers 1 &&
	talk &&
	kill "$(cat ../serve-own.pid)" && bg_wait ../serve-own >/dev/null
'

test_expect_success 'the mock saw the key; nothing baton kept holds it' '
	test_grep "$MOCK_KEY" mock.log &&
	test_must_fail grep -r -l "$MOCK_KEY" claude/.baton/chat claude/.baton/baton.db own/.baton/chat own/.baton/baton.db
'

test_done
