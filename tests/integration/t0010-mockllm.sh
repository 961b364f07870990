#!/bin/bash
test_description='mockllm: the mock model server speaks each wire, follows its script, injects failures'
. "$(dirname "$0")/../lib/test-lib.sh"

# The runner passes MOCKLLM; by hand, the build tree's copy is used.
MOCKLLM=${MOCKLLM:-$BATON_SRC_ROOT/build/tests/mockllm}
WT=$TRASH_DIRECTORY/wt
WIRES='anthropic chat responses gemini'

# start_mock NAME [ARGS...]
#
# Starts mockllm in the background with its port in NAME.port, its log in
# NAME.log and its stderr in NAME.err, waits for the port file, and sets
# $port and $url. The mock dies with the test body that started it
# (PR_SET_PDEATHSIG), so every body starts its own.
start_mock() {
	local name=$1
	shift
	rm -f "$name.port"
	"$MOCKLLM" --port-file "$name.port" --log "$name.log" "$@" 2>"$name.err" &
	wait_for "test -s '$name.port'" 10 || return 1
	port=$(cat "$name.port")
	url=http://127.0.0.1:$port
}

# post PATH BODY_FILE OUT [CURL_ARGS...]
#
# POSTs BODY_FILE as JSON to the mock: the response body goes to OUT, its
# head to OUT.head, and the HTTP status is printed.
post() {
	local path=$1 body=$2 out=$3
	shift 3
	curl -sS --max-time 10 -o "$out" -D "$out.head" -w '%{http_code}' \
		-H 'Content-Type: application/json' --data-binary "@$body" \
		"$@" "$url$path"
}

# ask WIRE KIND STREAM OUT [CURL_ARGS...]
#
# Sends the request WIRE-KIND.json to the wire's route, streaming when
# STREAM is 1, as post does.
ask() {
	local wire=$1 body=$1-$2.json stream=$3 out=$4 path
	shift 4
	case $wire in
	anthropic) path='/v1/messages?beta=true' ;;
	chat) path=/v1/chat/completions ;;
	responses) path=/v1/responses ;;
	gemini) path=/v1beta/models/gem-x:generateContent ;;
	esac
	if [ "$stream" = 1 ]; then
		case $wire in
		gemini) path='/v1beta/models/gem-x:streamGenerateContent?alt=sse' ;;
		*) jq '.stream = true' "$body" >"$out.req" && body=$out.req ;;
		esac
	fi
	post "$path" "$body" "$out" "$@"
}

# sse_data FILE: the data: payloads of an SSE stream, as one JSON array
# (without the Chat Completions [DONE]).
sse_data() {
	sed -n 's/^data: //p' "$1" | grep -v '^\[DONE\]$' | jq -s .
}

# answer WIRE STREAM FILE
#
# Prints the reply in FILE in one shape for every wire:
# {tool, args, text, stop}.
answer() {
	local data=$3
	if [ "$2" = 1 ]; then
		sse_data "$3" >"$3.data" || return 1
		data=$3.data
	fi
	case $1.$2 in
	anthropic.0)
		jq -c '.content[0] | {tool: (if .type == "tool_use" then .name else null end),
			args: .input, text: .text}' "$data" >"$3.a1" &&
			jq -c '{stop: .stop_reason}' "$data" >"$3.a2" &&
			jq -s -c 'add' "$3.a1" "$3.a2"
		;;
	anthropic.1)
		jq -c '{tool: ([.[] | select(.type == "content_block_start") | .content_block
				| select(.type == "tool_use") | .name] | .[0]),
			args: ([.[] | select(.delta.type == "input_json_delta") | .delta.partial_json]
				| if length > 0 then join("") | fromjson else null end),
			text: ([.[] | select(.delta.type == "text_delta") | .delta.text]
				| if length > 0 then join("") else null end),
			stop: ([.[] | select(.type == "message_delta") | .delta.stop_reason] | .[0])}' "$data"
		;;
	chat.0)
		jq -c '.choices[0] | {tool: .message.tool_calls[0].function.name,
			args: (.message.tool_calls[0].function.arguments
				| if . then fromjson else null end),
			text: .message.content, stop: .finish_reason}' "$data"
		;;
	chat.1)
		jq -c '[.[] | .choices[0] // empty] | {
			tool: ([.[] | .delta.tool_calls[0].function.name // empty] | .[0]),
			args: ([.[] | .delta.tool_calls[0].function.arguments // empty]
				| if length > 0 then join("") | fromjson else null end),
			text: ([.[] | .delta.content // empty]
				| if length > 0 then join("") else null end),
			stop: ([.[] | .finish_reason // empty] | .[0])}' "$data"
		;;
	responses.0 | responses.1)
		jq -c 'if type == "array" then
				[.[] | select(.type == "response.completed")][0].response
			else . end
			| .output[0] | {tool: .name,
				args: (.arguments | if . then fromjson else null end),
				text: .content[0].text, stop: .type}' "$data"
		;;
	gemini.*)
		jq -c 'if type == "array" then .[0] else . end | .candidates[0]
			| {tool: .content.parts[0].functionCall.name,
				args: .content.parts[0].functionCall.args,
				text: .content.parts[0].text, stop: .finishReason}' "$data"
		;;
	esac
}

# make_requests PROMPT [SYSTEM]
#
# Writes, for every wire, WIRE-first.json (tools offered, no tool result
# yet), WIRE-result.json (the same after one tool call and its result) and
# WIRE-notools.json. The tools are each client's write tool.
make_requests() {
	local p=$1 s=${2:-You are a test.} w
	jq -n --arg p "$p" --arg s "$s" '{model: "claude-x", max_tokens: 100,
		system: [{type: "text", text: $s}],
		messages: [{role: "user", content: [{type: "text", text: $p}]}],
		tools: [{name: "Write", input_schema: {type: "object", properties:
			{file_path: {type: "string"}, content: {type: "string"}}}}]}' \
		>anthropic-first.json &&
		jq '.messages += [
			{role: "assistant", content: [{type: "tool_use", id: "t1", name: "probe", input: {}}]},
			{role: "user", content: [{type: "tool_result", tool_use_id: "t1", content: "ok"}]}]' \
			anthropic-first.json >anthropic-result.json &&
		jq -n --arg p "$p" --arg s "$s" '{model: "chat-x",
		stream_options: {include_usage: true},
		messages: [{role: "system", content: $s},
			{role: "user", content: [{type: "text", text: $p}]}],
		tools: [{type: "function", function: {name: "write", parameters: {type: "object",
			properties: {filePath: {type: "string"}, content: {type: "string"}}}}}]}' \
			>chat-first.json &&
		jq '.messages += [
			{role: "assistant", content: null, tool_calls: [{id: "c1", type: "function",
				function: {name: "probe", arguments: "{}"}}]},
			{role: "tool", tool_call_id: "c1", content: "ok"}]' \
			chat-first.json >chat-result.json &&
		jq -n --arg p "$p" --arg s "$s" '{model: "resp-x", input: [
		{type: "message", role: "developer", content: [{type: "input_text", text: $s}]},
		{type: "message", role: "user", content: [{type: "input_text", text: $p}]}],
		tools: [{type: "function", name: "exec_command", parameters: {type: "object",
			properties: {cmd: {type: "string"}}}}]}' >responses-first.json &&
		jq '.input += [{type: "function_call", call_id: "c1", name: "probe", arguments: "{}"},
			{type: "function_call_output", call_id: "c1", output: "ok"}]' \
			responses-first.json >responses-result.json &&
		jq -n --arg p "$p" --arg s "$s" '{contents: [{role: "user", parts: [{text: $p}]}],
		systemInstruction: {parts: [{text: $s}]},
		tools: [{functionDeclarations: [{name: "write_file", parametersJsonSchema:
			{type: "object", properties: {file_path: {type: "string"},
				content: {type: "string"}}}}]}]}' >gemini-first.json &&
		jq '.contents += [{role: "model", parts: [{functionCall: {name: "probe", args: {}}}]},
			{role: "user", parts: [{functionResponse: {name: "probe",
				response: {output: "ok"}}}]}]' gemini-first.json >gemini-result.json &&
		for w in $WIRES; do
			jq 'del(.tools)' "$w-first.json" >"$w-notools.json" || return 1
		done
}

# call_requests: make_requests for the "call-test" rule, with baton's
# "Worktree:" line (test bodies that need other requests write over them).
call_requests() {
	make_requests "please run the call-test
Worktree: $WT"
}

test_expect_success 'setup: a worktree, a script and the request bodies' '
	test -x "$MOCKLLM" &&
	mkdir wt &&
	cat >script.json <<-\EOF &&
	{"rules": [
	  {"match": "write-test",
	   "actions": [{"write": {"path": "sub/hello.txt",
	                          "content": "it\u0027s \"q\" $HOME\nline 2\n"}}],
	   "text": "WROTE"},
	  {"match": "call-test",
	   "actions": [{"call": {"name": "probe", "args": {"dir": "{cwd}", "n": 1}}}],
	   "text": "DONE {cwd}", "usage": {"in": 7, "out": 3}},
	  {"text": "FALLBACK"}
	]}
	EOF
	call_requests
'

test_expect_success 'the mock writes its port file and answers HEAD /' '
	start_mock m &&
	grep -qx "[1-9][0-9]*" m.port &&
	test_path_is_missing m.port.tmp &&
	curl -sS --max-time 10 -I "$url/" >head &&
	test_grep "^HTTP/1.1 200" head &&
	test_grep -i "^Connection: close" head &&
	curl -sS --max-time 10 "$url/v1/models" >models &&
	test_jq ".data[0].id == \"mock-model\"" models &&
	curl -sS --max-time 10 -d "{}" "$url/v1/messages/count_tokens" >count &&
	test_jq ".input_tokens == 100" count &&
	code=$(curl -sS --max-time 10 -o nf -w "%{http_code}" "$url/v1/nowhere") &&
	test "$code" = 404 &&
	test_jq ".error.message | test(\"nowhere\")" nf
'

test_expect_success 'each wire, JSON and SSE: the scripted call, then the final text' '
	start_mock wires --script "$PWD/script.json" &&
	call_requests &&
	for w in $WIRES; do
		for s in 0 1; do
			code=$(ask $w first $s out) && test "$code" = 200 &&
			answer $w $s out >got &&
			test_jq ".tool == \"probe\" and .args == {\"dir\": \"$WT\", \"n\": 1}" got &&
			code=$(ask $w result $s out) && test "$code" = 200 &&
			answer $w $s out >got &&
			test_jq ".tool == null and .text == \"DONE $WT\"" got ||
				{ echo "wire $w, stream $s"; exit 1; }
		done
	done
'

test_expect_success 'stop reasons, usage, the model echoed, unique call ids' '
	start_mock u --script "$PWD/script.json" &&
	call_requests &&
	ask anthropic first 0 a1 && answer anthropic 0 a1 >got &&
	test_jq ".stop == \"tool_use\"" got &&
	test_jq ".model == \"claude-x\" and .usage.input_tokens == 7 and .usage.output_tokens == 3" a1 &&
	ask anthropic result 1 a2 && answer anthropic 1 a2 >got &&
	test_jq ".stop == \"end_turn\"" got &&
	ask chat first 0 c1 && answer chat 0 c1 >got &&
	test_jq ".stop == \"tool_calls\"" got &&
	test_jq ".model == \"chat-x\" and .usage == {\"prompt_tokens\": 7, \"completion_tokens\": 3, \"total_tokens\": 10}" c1 &&
	ask chat result 1 c2 && answer chat 1 c2 >got &&
	test_jq ".stop == \"stop\"" got &&
	ask responses first 0 r1 &&
	test_jq ".model == \"resp-x\" and .status == \"completed\" and .usage.input_tokens == 7 and .usage.output_tokens == 3 and .usage.total_tokens == 10 and .usage.input_tokens_details.cached_tokens == 0 and .usage.output_tokens_details.reasoning_tokens == 0" r1 &&
	ask gemini first 0 g1 && answer gemini 0 g1 >got &&
	test_jq ".stop == \"STOP\"" got &&
	test_jq ".modelVersion == \"gem-x\" and .usageMetadata == {\"promptTokenCount\": 7, \"candidatesTokenCount\": 3, \"totalTokenCount\": 10}" g1 &&
	ask anthropic first 0 a3 &&
	test "$(jq -r .content[0].id a1)" != "$(jq -r .content[0].id a3)"
'

test_expect_success 'SSE framing of each wire' '
	start_mock sse --script "$PWD/script.json" &&
	call_requests &&
	for w in $WIRES; do
		ask $w first 1 $w.sse >/dev/null &&
		test_grep -i "^Content-Type: text/event-stream" $w.sse.head || exit 1
	done &&
	# anthropic: event: and data: lines, in the Messages order
	sed -n "s/^event: //p" anthropic.sse >events &&
	printf "%s\n" message_start content_block_start content_block_delta \
		content_block_stop message_delta message_stop >expect &&
	test_cmp expect events &&
	test "$(grep -c "^data: " anthropic.sse)" = 6 &&
	# chat: data: lines only, a usage chunk with no choices, then [DONE]
	test_grep ! "^event:" chat.sse &&
	test "$(grep "^data: " chat.sse | tail -n 1)" = "data: [DONE]" &&
	sse_data chat.sse >chat.data &&
	test_jq ".[-1].choices == [] and .[-1].usage.total_tokens == 10" chat.data &&
	test_jq "all(.[]; .object == \"chat.completion.chunk\" and .model == \"chat-x\")" chat.data &&
	# responses: named events with increasing sequence numbers
	sse_data responses.sse >responses.data &&
	for e in response.created response.output_item.added response.output_item.done response.completed; do
		test_grep "^event: $e$" responses.sse || exit 1
	done &&
	test_jq "[.[].sequence_number] == [range(length)]" responses.data &&
	test_jq "[.[].type] == [.[].type | select(startswith(\"response.\"))]" responses.data &&
	# gemini: a single data: chunk
	test "$(grep -c "^data: " gemini.sse)" = 1 &&
	# text answers stream too
	ask responses result 1 rt.sse >/dev/null &&
	test_grep "^event: response.output_text.delta$" rt.sse &&
	ask chat result 1 ct.sse >/dev/null &&
	sse_data ct.sse >ct.data &&
	test_jq "[.[] | .choices[0].delta.content // empty] | join(\"\") == \"DONE $WT\"" ct.data
'

test_expect_success 'no tools offered: text; no rule matching or no script: OK' '
	start_mock nt --script "$PWD/script.json" &&
	call_requests &&
	for w in $WIRES; do
		ask $w notools 0 out >/dev/null && answer $w 0 out >got &&
		test_jq ".tool == null and .text == \"DONE $WT\"" got ||
			{ echo "wire $w"; exit 1; }
	done &&
	make_requests "nothing to match" &&
	ask anthropic first 0 out >/dev/null && answer anthropic 0 out >got &&
	test_jq ".text == \"FALLBACK\"" got &&
	start_mock plain &&
	ask chat first 1 out >/dev/null && answer chat 1 out >got &&
	test_jq ".tool == null and .text == \"OK\"" got
'

test_expect_success 'write: Claude Write{file_path}, opencode write{filePath}, Codex exec_command{cmd}, Gemini and Qwen write_file' '
	start_mock w --script "$PWD/script.json" &&
	call_requests &&
	jq -j ".rules[0].actions[0].write.content" script.json >expect &&
	# the cwd as each CLI states it (Claude and opencode in the system text)
	make_requests "write-test" "Primary working directory: $WT" &&
	ask anthropic first 1 out >/dev/null && answer anthropic 1 out >got &&
	test_jq ".tool == \"Write\" and .args.file_path == \"$WT/sub/hello.txt\"" got &&
	jq -j .args.content got >actual && test_cmp expect actual &&
	make_requests "write-test" "Working directory: $WT" &&
	ask chat first 1 out >/dev/null && answer chat 1 out >got &&
	test_jq ".tool == \"write\" and .args.filePath == \"$WT/sub/hello.txt\" and (.args | keys) == [\"content\", \"filePath\"]" got &&
	make_requests "write-test <cwd>$WT</cwd>" &&
	ask responses first 1 out >/dev/null && answer responses 1 out >got &&
	test_jq ".tool == \"exec_command\" and (.args | keys) == [\"cmd\"]" got &&
	bash -c "$(jq -r .args.cmd got)" &&
	test_cmp expect wt/sub/hello.txt &&
	# Gemini CLI 0.61 lists its workspace directories
	make_requests "write-test
- **Workspace Directories:**
  - $WT
- **Directory Structure:**" &&
	ask gemini first 1 out >/dev/null && answer gemini 1 out >got &&
	test_jq ".tool == \"write_file\" and .args.file_path == \"$WT/sub/hello.txt\"" got &&
	# Qwen Code: Chat Completions with write_file
	make_requests "write-test
I'"'"'m currently working in the directory: $WT" &&
	jq ".tools[0].function.name = \"write_file\" | .tools[0].function.parameters.properties = {file_path: {}, content: {}}" \
		chat-first.json >chat-qwen.json &&
	ask chat qwen 1 out >/dev/null && answer chat 1 out >got &&
	test_jq ".tool == \"write_file\" and .args.file_path == \"$WT/sub/hello.txt\"" got
'

test_expect_success 'write: a shell tool when no write tool; text when neither; a bad cwd is ignored' '
	start_mock ws --script "$PWD/script.json" &&
	call_requests &&
	jq -j ".rules[0].actions[0].write.content" script.json >expect &&
	rm -rf wt/sub &&
	make_requests "write-test
Worktree: $WT" &&
	jq ".tools = [{name: \"Bash\", input_schema: {properties: {command: {type: \"string\"}}}}]" \
		anthropic-first.json >anthropic-bash.json &&
	ask anthropic bash 0 out >/dev/null && answer anthropic 0 out >got &&
	test_jq ".tool == \"Bash\" and (.args | keys) == [\"command\"]" got &&
	bash -c "$(jq -r .args.command got)" &&
	test_cmp expect wt/sub/hello.txt &&
	jq ".tools = [{name: \"Read\", input_schema: {}}]" anthropic-first.json >anthropic-read.json &&
	ask anthropic read 0 out >/dev/null && answer anthropic 0 out >got &&
	test_jq ".tool == null and .text == \"WROTE\"" got &&
	make_requests "write-test
Worktree: $WT/no-such-dir" &&
	ask anthropic first 0 out >/dev/null && answer anthropic 0 out >got &&
	test_jq ".args.file_path == \"sub/hello.txt\"" got
'

test_expect_success '--fail 1:429:2: a 429 with Retry-After, then 200' '
	start_mock f --script "$PWD/script.json" --fail 1:429:2 &&
	call_requests &&
	curl -sS --max-time 10 -I "$url/" >/dev/null &&
	code=$(ask anthropic first 1 out) && test "$code" = 429 &&
	test_grep -i "^Retry-After: 2" out.head &&
	test_jq ".type == \"error\" and .error.type == \"rate_limit_error\" and .error.message == \"rate limited: try again in 2 seconds\"" out &&
	code=$(ask anthropic first 1 out) && test "$code" = 200 &&
	jq -s . f.log >flog &&
	test_jq "[.[].status] == [200, 429, 200]" flog &&
	test_jq "[.[].reply] == [\"other\", \"error:429\", \"tool:probe\"]" flog
'

test_expect_success '--fail in each wire format: 500 and 401' '
	start_mock f5 --fail 4:500 &&
	call_requests &&
	for w in $WIRES; do
		code=$(ask $w first 0 $w.err) && test "$code" = 500 || exit 1
	done &&
	test_jq ".error.type == \"api_error\" and .error.message == \"mock injected HTTP 500\"" anthropic.err &&
	test_jq ".error.type == \"server_error\" and .error.message == \"mock injected HTTP 500\"" chat.err &&
	test_jq ".error.message == \"mock injected HTTP 500\"" responses.err &&
	test_jq ".error == {\"code\": 500, \"message\": \"mock injected HTTP 500\", \"status\": \"INTERNAL\"}" gemini.err &&
	code=$(ask chat first 0 out) && test "$code" = 200 &&
	start_mock f4 --fail 1:401 &&
	code=$(ask anthropic first 0 out) && test "$code" = 401 &&
	test_jq ".error.type == \"authentication_error\" and .error.message == \"invalid x-api-key\"" out
'

test_expect_success '--require-key: 401 in each wire format unless the key matches' '
	start_mock k --require-key sk-good &&
	call_requests &&
	code=$(ask anthropic first 0 out) && test "$code" = 401 &&
	test_jq ". == {\"type\": \"error\", \"error\": {\"type\": \"authentication_error\", \"message\": \"invalid x-api-key\"}}" out &&
	code=$(ask anthropic first 0 out -H "x-api-key: sk-good") && test "$code" = 200 &&
	code=$(ask chat first 1 out -H "Authorization: Bearer sk-bad") && test "$code" = 401 &&
	test_jq ". == {\"error\": {\"message\": \"Incorrect API key provided\", \"type\": \"invalid_request_error\", \"code\": \"invalid_api_key\"}}" out &&
	code=$(ask chat first 1 out -H "Authorization: Bearer sk-good") && test "$code" = 200 &&
	code=$(ask responses first 1 out) && test "$code" = 401 &&
	test_jq ".error.code == \"invalid_api_key\"" out &&
	code=$(ask responses first 1 out -H "Authorization: Bearer sk-good") && test "$code" = 200 &&
	code=$(ask gemini first 1 out -H "x-goog-api-key: nope") && test "$code" = 401 &&
	test_jq ". == {\"error\": {\"code\": 401, \"message\": \"API key not valid\", \"status\": \"UNAUTHENTICATED\"}}" out &&
	code=$(ask gemini first 1 out -H "x-goog-api-key: sk-good") && test "$code" = 200 &&
	code=$(post "/v1beta/models/g:generateContent?key=sk-good" gemini-first.json out) &&
	test "$code" = 200 &&
	# HEAD and the model list need no key
	curl -sS --max-time 10 -fI "$url/" >/dev/null &&
	curl -sS --max-time 10 -f "$url/v1/models" >/dev/null
'

test_expect_success 'the log: one valid JSON object per request, with every field' '
	start_mock l --script "$PWD/script.json" &&
	call_requests &&
	curl -sS --max-time 10 -I "$url/" >/dev/null &&
	ask anthropic first 1 out -H "x-api-key: sk-a" >/dev/null &&
	ask chat result 0 out -H "Authorization: Bearer sk-c" >/dev/null &&
	ask responses notools 1 out >/dev/null &&
	post "/v1beta/models/g:streamGenerateContent?alt=sse&key=sk-g" gemini-first.json out >/dev/null &&
	test_line_count = 5 l.log &&
	jq -s . l.log >log.all &&
	test_jq "[.[].n] == [1, 2, 3, 4, 5]" log.all &&
	test_jq "all(.[]; (keys | sort) == ([\"n\", \"method\", \"path\", \"wire\", \"model\", \"stream\", \"key\", \"tools\", \"tool_results\", \"rule\", \"reply\", \"status\", \"seen\"] | sort))" log.all &&
	test_jq "[.[].seen | length] | .[0] == 0" log.all &&
	test_jq "[.[].wire] == [\"other\", \"anthropic\", \"chat\", \"responses\", \"gemini\"]" log.all &&
	test_jq "[.[].key] == [null, \"sk-a\", \"sk-c\", null, \"sk-g\"]" log.all &&
	test_jq "[.[].stream] == [false, true, false, true, true]" log.all &&
	test_jq "[.[].tool_results] == [0, 0, 1, 0, 0]" log.all &&
	test_jq "[.[].rule] == [null, 1, 1, 1, 1]" log.all &&
	test_jq "[.[].reply] == [\"other\", \"tool:probe\", \"text\", \"text\", \"tool:probe\"]" log.all &&
	test_jq "[.[].status] == [200, 200, 200, 200, 200]" log.all &&
	test_jq ".[1] | .method == \"POST\" and .path == \"/v1/messages\" and .model == \"claude-x\" and .tools == [\"Write\"]" log.all &&
	test_jq ".[4].model == \"g\"" log.all
'

test_expect_success 'idle connections do not block a request' '
	start_mock idle --script "$PWD/script.json" &&
	call_requests &&
	exec 3<>"/dev/tcp/127.0.0.1/$port" 4<>"/dev/tcp/127.0.0.1/$port" &&
	printf "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{" >&4 &&
	code=$(ask anthropic first 0 out --max-time 5) && test "$code" = 200 &&
	code=$(ask gemini first 1 out --max-time 5) && test "$code" = 200 &&
	exec 3>&- 4>&-
'

test_expect_success 'chunked bodies, Expect: 100-continue, and the 16 MiB cap' '
	start_mock big --script "$PWD/script.json" &&
	call_requests &&
	code=$(ask anthropic first 0 out -H "Transfer-Encoding: chunked" -H "Expect: 100-continue") &&
	test "$code" = 200 &&
	test_grep "^HTTP/1.1 100 Continue" out.head &&
	answer anthropic 0 out >got &&
	test_jq ".tool == \"probe\"" got &&
	head -c 17000000 /dev/zero >huge &&
	code=$(post /v1/messages huge out) && test "$code" = 413 &&
	test_jq ".error.type == \"request_too_large\"" out &&
	code=$(post /v1/chat/completions huge out -H "Expect:") && test "$code" = 413 &&
	code=$(post /v1/messages huge out -H "Transfer-Encoding: chunked") && test "$code" = 413 &&
	code=$(ask chat first 0 out) && test "$code" = 200 &&
	printf "not json" >bad.json &&
	code=$(post /v1/responses bad.json out) && test "$code" = 400 &&
	test_jq ".error.message | startswith(\"invalid JSON body\")" out
'

test_expect_success 'a bad script or option exits 2 with a message' '
	printf "{\"rules\": [" >broken.json &&
	test_expect_code 2 "$MOCKLLM" --script broken.json 2>err &&
	test_grep "broken.json" err &&
	printf "{\"rules\": [{\"actions\": [{\"jump\": 1}]}]}" >odd.json &&
	test_expect_code 2 "$MOCKLLM" --script odd.json 2>err &&
	test_grep "neither" err &&
	test_expect_code 2 "$MOCKLLM" --fail 1:abc 2>err &&
	test_expect_code 2 "$MOCKLLM" --bogus 2>err
'

test_expect_success 'SIGTERM stops it cleanly; it dies with its parent' '
	"$MOCKLLM" --port-file t.port &
	pid=$! &&
	wait_for "test -s t.port" 10 &&
	kill -TERM "$pid" &&
	wait "$pid" &&
	(
		"$MOCKLLM" --port-file d.port &
		echo $! >d.pid
		wait_for "test -s d.port" 10
	) &&
	pid=$(cat d.pid) &&
	wait_for "! process_is_alive $pid" 10
'

test_done
