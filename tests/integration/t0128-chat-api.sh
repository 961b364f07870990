#!/bin/bash
test_description='chat intake over the API: a scripted planner asks, proposes a plan (---PLAN_READY---), the plan starts in a mode and becomes tasks, progress is reported; hostile answers, forged modes, unknown ids, oversized messages, a double start and a restart of serve'
. "$(dirname "$0")/../lib/test-lib.sh"

P=$FAKE_STATE/chat
mkdir -p "$P"

# The scripted planner: answers as $P/mode says, and keeps each prompt.
cat >"$TRASH_DIRECTORY/planner.sh" <<-\EOF
#!/bin/sh
P=$FAKE_STATE/chat
n=$(($(cat "$P/calls" 2>/dev/null || echo 0) + 1))
echo "$n" >"$P/calls"
cat >"$P/prompt.$n"
plan='{"tasks": [{"key": "a", "title": "Add the parser", "area": "src/parse"},
 {"key": "b", "title": "Use the parser", "area": "src/cli", "depends_on": ["a"]}],
 "summary": "parser first"}'
case $(cat "$P/mode") in
ask) echo "Which format should the export use, CSV or JSON?" ;;
plan) printf 'Here is the plan.\n\n```json\n%s\n```\n\n---PLAN_READY---\n' "$plan" ;;
mid) printf 'I will say ---PLAN_READY--- now, but more follows.\n' ;;
fenced) printf 'Look:\n\n```json\n%s\n---PLAN_READY---\n' "$plan" ;;
claim) printf 'All done, trust me.\n---PLAN_READY---\n' ;;
slow) while [ ! -e "$P/go" ]; do sleep 0.1; done; echo "Slow answer." ;;
esac
EOF
chmod +x "$TRASH_DIRECTORY/planner.sh"

load_http() {
	cd "$TRASH_DIRECTORY/repo" &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	HTTP_TOKEN=$(cat .baton/token)
}

# stream ID: the reply's events, once the stream ends, into stream.out
stream() {
	curl -s -N --max-time 30 -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/chat/conversations/$1/stream" >stream.out
}

test_expect_success 'setup: serve with the scripted planner' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  planner: {type: command, command: [\"$TRASH_DIRECTORY/planner.sh\"]}
roles: {default: fake, planner: planner}
runtime: {judge: false}" &&
	cd repo &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1
'

test_expect_success 'a new conversation greets; the planner asks; the reply streams' '
	load_http &&
	api_expect 201 POST /api/v1/chat/conversations "" >new.json &&
	test_jq ".id == 1 and .phase == \"greeting\"" new.json &&
	api_expect 200 GET /api/v1/chat/conversations/1 >c.json &&
	test_jq ".phase == \"greeting\" and (.messages | length) == 1 and .messages[0].role == \"assistant\"" c.json &&
	echo ask >"$P/mode" &&
	api_expect 202 POST /api/v1/chat/conversations/1/messages "{\"content\": \"I want an export\"}" &&
	stream 1 &&
	grep -q "^event: chunk" stream.out &&
	grep -q "CSV or JSON" stream.out &&
	grep -q "^event: done" stream.out &&
	grep -q "\"phase\":\"requirement_gathering\"" stream.out &&
	grep -q "I want an export" "$P/prompt.1" &&
	api_expect 200 GET /api/v1/chat/conversations/1 >c.json &&
	test_jq ".phase == \"requirement_gathering\" and [.messages[].role] == [\"assistant\", \"user\", \"assistant\"]" c.json
'

test_expect_success 'a stream opened after the reply replays it' '
	load_http &&
	stream 1 &&
	grep -q "CSV or JSON" stream.out &&
	grep -q "^event: done" stream.out
'

test_expect_success 'hostile: the marker mid-text or inside an open code block is no plan' '
	load_http &&
	echo mid >"$P/mode" &&
	api_expect 202 POST /api/v1/chat/conversations/1/messages "{\"content\": \"CSV\"}" &&
	stream 1 && grep -q "^event: done" stream.out &&
	api_expect 200 GET /api/v1/chat/conversations/1 >c.json &&
	test_jq ".phase == \"requirement_gathering\" and .plan == null" c.json &&
	test_jq "[.messages[].kind] | index(\"mode_selection\") == null" c.json &&
	test_jq ".messages[-1].content | test(\"---PLAN_READY--- now\")" c.json &&
	echo fenced >"$P/mode" &&
	api_expect 202 POST /api/v1/chat/conversations/1/messages "{\"content\": \"go\"}" &&
	stream 1 && grep -q "^event: done" stream.out &&
	api_expect 200 GET /api/v1/chat/conversations/1 >c.json &&
	test_jq ".phase == \"requirement_gathering\" and .plan == null" c.json &&
	test_jq "[.messages[].kind] | index(\"mode_selection\") == null" c.json
'

test_expect_success 'hostile: a marker with no plan is an error message, no plan' '
	load_http &&
	echo claim >"$P/mode" &&
	api_expect 202 POST /api/v1/chat/conversations/1/messages "{\"content\": \"well?\"}" &&
	stream 1 && grep -q "^event: done" stream.out &&
	api_expect 200 GET /api/v1/chat/conversations/1 >c.json &&
	test_jq ".phase == \"requirement_gathering\" and .plan == null" c.json &&
	test_jq ".messages[-1].kind == \"error\" and (.messages[-1].content | test(\"holds no JSON plan\"))" c.json &&
	test_jq ".messages[-2].content == \"All done, trust me.\"" c.json
'

test_expect_success 'start-execution before a plan is a conflict' '
	load_http &&
	api_expect 409 POST /api/v1/chat/conversations/1/start-execution "{\"mode\": \"direct\"}" >err.json &&
	test_jq ".error.message | test(\"there is no plan to start\")" err.json
'

test_expect_success 'the plan: marker stripped, mode_selection follows, phase plan_proposal' '
	load_http &&
	echo plan >"$P/mode" &&
	api_expect 202 POST /api/v1/chat/conversations/1/messages "{\"content\": \"JSON, please\"}" &&
	stream 1 && grep -q "\"phase\":\"plan_proposal\"" stream.out &&
	! grep -q PLAN_READY stream.out &&
	api_expect 200 GET /api/v1/chat/conversations/1 >c.json &&
	test_jq ".phase == \"plan_proposal\" and (.plan.tasks | length) == 2" c.json &&
	test_jq ".messages[-2].role == \"assistant\" and (.messages[-2].content | test(\"PLAN_READY\") | not)" c.json &&
	test_jq ".messages[-2].content | endswith(\"\`\`\`\")" c.json &&
	test_jq ".messages[-1].kind == \"mode_selection\" and .messages[-1].role == \"system\"" c.json &&
	test_jq "[.messages[-1].options[].mode] == [\"direct\", \"local\", \"github\"]" c.json &&
	test_jq ".messages[-1].options[2].available == false" c.json
'

test_expect_success 'serve restarts mid-conversation: every message survives' '
	load_http &&
	api_expect 200 GET /api/v1/chat/conversations/1 >before.json &&
	kill "$(cat ../serve.pid)" && bg_wait ../serve >/dev/null &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	api_expect 200 GET /api/v1/chat/conversations/1 >after.json &&
	jq -S "del(.replying)" before.json >b && jq -S "del(.replying)" after.json >a &&
	test_cmp b a
'

test_expect_success 'forged and unavailable modes are refused; nothing is queued' '
	load_http &&
	api_expect 400 POST /api/v1/chat/conversations/1/start-execution "{\"mode\": \"yolo\"}" >err.json &&
	test_jq ".error.message | test(\"mode must be one of direct, local, github, not .yolo.\")" err.json &&
	api_expect 400 POST /api/v1/chat/conversations/1/start-execution "{}" >err.json &&
	api_expect 400 POST /api/v1/chat/conversations/1/start-execution "{\"mode\": \"github\"}" >err.json &&
	test_jq ".error.message | test(\"needs a forge\")" err.json &&
	test "$("$BATON" task list --json | jq length)" = 0
'

test_expect_success 'unknown conversations are 404 with a clear error' '
	load_http &&
	api_expect 404 GET /api/v1/chat/conversations/999 >err.json &&
	test_jq ".error.code == \"not_found\" and .error.message == \"no conversation 999\"" err.json &&
	api_expect 404 POST /api/v1/chat/conversations/999/messages "{\"content\": \"hi\"}" >err.json &&
	test_jq ".error.message == \"no conversation 999\"" err.json &&
	api_expect 404 GET /api/v1/chat/conversations/nope >err.json &&
	test_jq ".error.code == \"not_found\"" err.json &&
	api_expect 404 POST /api/v1/chat/conversations/999/start-execution "{\"mode\": \"direct\"}" &&
	curl -s -o err.json -w "%{http_code}" -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/chat/conversations/999/stream" >status &&
	test "$(cat status)" = 404
'

test_expect_success 'oversized and empty messages are refused and not kept' '
	load_http &&
	api_expect 201 POST /api/v1/chat/conversations "" >new.json &&
	id=$(jq .id new.json) &&
	big=$(head -c 17000 /dev/zero | tr "\0" x) &&
	api_expect 413 POST /api/v1/chat/conversations/$id/messages "{\"content\": \"$big\"}" >err.json &&
	test_jq ".error.code == \"too_large\" and (.error.message | test(\"more than the 16384\"))" err.json &&
	api_expect 400 POST /api/v1/chat/conversations/$id/messages "{\"content\": \"  \"}" >err.json &&
	test_jq ".error.message == \"the message is empty\"" err.json &&
	api_expect 400 POST /api/v1/chat/conversations/$id/messages "{\"text\": \"hi\"}" &&
	api_expect 200 GET /api/v1/chat/conversations/$id >c.json &&
	test_jq "(.messages | length) == 1" c.json
'

test_expect_success 'no token: 401' '
	load_http &&
	curl -s -o /dev/null -w "%{http_code}" -X POST "$HTTP_URL/api/v1/chat/conversations" >status &&
	test "$(cat status)" = 401
'

test_expect_success 'a message while the planner answers is 409; the stream follows it live' '
	load_http &&
	api_expect 201 POST /api/v1/chat/conversations "" >new.json &&
	id=$(jq .id new.json) &&
	rm -f "$P/go" && echo slow >"$P/mode" &&
	api_expect 202 POST /api/v1/chat/conversations/$id/messages "{\"content\": \"hello\"}" &&
	api_expect 409 POST /api/v1/chat/conversations/$id/messages "{\"content\": \"again\"}" >err.json &&
	test_jq ".error.message | test(\"still answering\")" err.json &&
	bg_start live curl -s -N --max-time 30 -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/chat/conversations/$id/stream" &&
	sleep 0.5 && test ! -s live.out -o "$(grep -c "^event:" live.out)" = 0 &&
	touch "$P/go" &&
	test "$(bg_wait live)" = 0 &&
	grep -q "Slow answer" live.out && grep -q "^event: done" live.out
'

test_expect_success 'serve killed while the planner answers: the message survives, the planner is gone, the next message is answered' '
	load_http &&
	api_expect 201 POST /api/v1/chat/conversations "" >new.json &&
	id=$(jq .id new.json) &&
	rm -f "$P/go" && echo slow >"$P/mode" &&
	n=$(cat "$P/calls") &&
	api_expect 202 POST /api/v1/chat/conversations/$id/messages "{\"content\": \"before the crash\"}" &&
	wait_for "test \"\$(cat \"$P/calls\")\" = $((n + 1))" 20 &&
	kill -9 "$(cat ../serve.pid)" && bg_wait ../serve >/dev/null &&
	wait_for "! pgrep -f \"$TRASH_DIRECTORY/planner.sh\" >/dev/null" 20 &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	api_expect 200 GET /api/v1/chat/conversations/$id >c.json &&
	test_jq ".messages[-1].content == \"before the crash\" and .replying == false" c.json &&
	echo ask >"$P/mode" &&
	api_expect 202 POST /api/v1/chat/conversations/$id/messages "{\"content\": \"again\"}" &&
	stream $id && grep -q "CSV or JSON" stream.out
'

test_expect_success 'start-execution twice: one set of tasks, then monitoring reports them' '
	load_http &&
	for m in direct local; do
		bg_start start-$m curl -s -o s-$m.json -w "%{http_code}" -X POST \
			-H "Authorization: Bearer $HTTP_TOKEN" \
			-H "Content-Type: application/json" \
			--data-binary "{\"mode\": \"$m\"}" \
			"$HTTP_URL/api/v1/chat/conversations/1/start-execution" || return 1
	done &&
	bg_wait start-direct >/dev/null && bg_wait start-local >/dev/null &&
	{ cat start-direct.out; echo; cat start-local.out; echo; } | sort >statuses &&
	printf "200\n409\n" >expect && test_cmp expect statuses &&
	api_expect 409 POST /api/v1/chat/conversations/1/start-execution "{\"mode\": \"direct\"}" >err.json &&
	test_jq ".error.message | test(\"started already\")" err.json &&
	"$BATON" task list --json >tasks.json &&
	test_jq "length == 2" tasks.json &&
	test_jq "[.[].origin] | unique == [\"chat-direct\"] or unique == [\"chat\"]" tasks.json &&
	test_jq "sort_by(.id) | [.[].area] == [\"src/parse\", \"src/cli\"]" tasks.json &&
	test_jq "sort_by(.id) | .[1].depends_on == [.[0].id] and .[0].depends_on == []" tasks.json &&
	api_expect 200 GET /api/v1/chat/conversations/1 >c.json &&
	test_jq ".phase == \"monitoring\"" c.json &&
	test_jq "[.messages[].content] | map(select(test(\"Start-up preflight\"))) | length == 1" c.json &&
	test_jq "[.messages[].content] | map(select(test(\"Queued 2 tasks\"))) | length == 1" c.json &&
	wait_for "\"$BATON\" task list --json | jq -e \"[.[].status] == [\\\"done\\\", \\\"done\\\"]\" >/dev/null" 120 &&
	wait_for "curl -s -H \"Authorization: Bearer $HTTP_TOKEN\" $HTTP_URL/api/v1/chat/conversations/1 | jq -e \"[.messages[].content] | map(select(test(\\\"All 2 tasks have finished\\\"))) | length == 1\" >/dev/null" 30 &&
	api_expect 409 POST /api/v1/chat/conversations/1/messages "{\"content\": \"more\"}" >err.json &&
	test_jq ".error.message | test(\"takes no more requirements\")" err.json
'

test_done
