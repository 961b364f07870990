#!/bin/bash
test_description='the HTTP API: every route, its errors, the live stream over SSE and WebSocket'
. "$(dirname "$0")/../lib/test-lib.sh"

# the fake agent is no judge: tasks end done at merge_ready
nojudge='runtime: {judge: false}'
gate="$nojudge
policies: {require_approval_at_stages: [executing]}"

test_expect_success 'serve prints where the dashboard is and listens on 127.0.0.1' '
	make_repo a &&
	baton_init_with_agent a "$nojudge" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 2 &&
	test_grep "dashboard at http://127.0.0.1:[0-9]*/ (token in .baton/token)" ../serve.out &&
	test "$(stat -c %a .baton/token)" = 600 &&
	echo "$HTTP_URL" >../url
'

# each test runs in a fresh subshell: read the address back
load_http() {
	cd "$TRASH_DIRECTORY/${1:-a}" &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	HTTP_PORT=${HTTP_URL##*:} &&
	HTTP_TOKEN=$(cat .baton/token)
}

test_expect_success 'no token, a wrong token, a token one character short: 401' '
	load_http &&
	curl -s -o body -w "%{http_code}" "$HTTP_URL/api/v1/runs" >status &&
	test "$(cat status)" = 401 &&
	test_jq ".error.code == \"unauthorized\"" body &&
	curl -s -o body -w "%{http_code}" -H "Authorization: Bearer nope" \
		"$HTTP_URL/api/v1/runs" >status &&
	test "$(cat status)" = 401 &&
	short=${HTTP_TOKEN%?} &&
	curl -s -o body -w "%{http_code}" -H "Authorization: Bearer $short" \
		"$HTTP_URL/metrics" >status &&
	test "$(cat status)" = 401 &&
	curl -s -o body -w "%{http_code}" "$HTTP_URL/api/v1/events?access_token=wrong" >status &&
	test "$(cat status)" = 401 &&
	test_jq ".error.message | test(\"a bearer token is required\")" body &&
	# the page itself holds no data and needs none
	curl -s -o page -w "%{http_code}" "$HTTP_URL/" >status &&
	test "$(cat status)" = 200 &&
	curl -s -D headers -o /dev/null "$HTTP_URL/" &&
	test_grep "Content-Security-Policy: default-src .none.; script-src .self." headers
'

# guard_expect STATUS CURL-ARGS...: the status of a token-bearing request
# (its body in ./body, its headers in ./headers)
guard_expect() {
	local want=$1
	shift
	curl -s -o body -D headers -w "%{http_code}" \
		-H "Authorization: Bearer $HTTP_TOKEN" "$@" >status || return 1
	if [ "$(cat status)" != "$want" ]; then
		echo "curl $*: status $(cat status), expected $want: $(cat body)" >&2
		return 1
	fi
}

# ws_expect STATUS CURL-ARGS...: guard_expect for a WebSocket upgrade
# of /api/v1/ws (a 101 is cut off after a second)
ws_expect() {
	local want=$1
	shift
	curl -s -o body -w "%{http_code}" --max-time 1 \
		-H "Connection: Upgrade" -H "Upgrade: websocket" \
		-H "Sec-WebSocket-Version: 13" \
		-H "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==" \
		"$@" >status || test $? = 28 || return 1
	if [ "$(cat status)" != "$want" ]; then
		echo "curl $*: status $(cat status), expected $want: $(cat body)" >&2
		return 1
	fi
}

test_expect_success 'a Host that is not this server is 421 on every route (DNS rebinding)' '
	load_http &&
	for path in / /app.js /api/v1/health /api/v1/runs /metrics; do
		guard_expect 421 -H "Host: evil.example:$HTTP_PORT" "$HTTP_URL$path" &&
		test_jq ".error.code == \"misdirected_request\" and (.error.message | test(\"Host header .evil.example:$HTTP_PORT.\"))" body ||
		exit 1
	done &&
	guard_expect 421 -H "Host: 127.0.0.1:1" "$HTTP_URL/api/v1/health" &&
	guard_expect 421 -H "Host: 127.0.0.1.evil.example:$HTTP_PORT" "$HTTP_URL/api/v1/health" &&
	guard_expect 421 -H "Host: [::2]:$HTTP_PORT" "$HTTP_URL/api/v1/health" &&
	guard_expect 421 -H "Host: 127.0.0.1:${HTTP_PORT}x" "$HTTP_URL/api/v1/health" &&
	guard_expect 421 -H "Host:" "$HTTP_URL/api/v1/health" &&
	test_jq ".error.message | test(\"no Host header\")" body &&
	# the address it listens on, and the loopback names, with its port
	for host in "127.0.0.1:$HTTP_PORT" "localhost:$HTTP_PORT" \
		"LocalHost:$HTTP_PORT" "[::1]:$HTTP_PORT" 127.0.0.1 localhost; do
		guard_expect 200 -H "Host: $host" "$HTTP_URL/api/v1/health" || exit 1
	done &&
	ws_expect 421 -H "Host: evil.example:$HTTP_PORT" \
		"$HTTP_URL/api/v1/ws?access_token=$HTTP_TOKEN" &&
	test_jq ".error.code == \"misdirected_request\"" body
'

test_expect_success 'a foreign Origin is 403; no Origin (curl, the CLI) passes; no CORS' '
	load_http &&
	"$BATON" task list --json | jq length >before &&
	guard_expect 403 -H "Origin: http://evil.example" -H "Content-Type: application/json" \
		--data-binary "{\"title\": \"from a foreign page\"}" "$HTTP_URL/api/v1/tasks" &&
	test_jq ".error.code == \"forbidden_origin\" and (.error.message | test(\"Origin header .http://evil.example.\"))" body &&
	! grep -i "^Access-Control-" headers &&
	"$BATON" task list --json | jq length >after &&
	test_cmp before after &&
	for origin in "http://127.0.0.1:1" "http://127.0.0.1" "https://127.0.0.1:$HTTP_PORT" \
		"http://evil.example:$HTTP_PORT" null "http://127.0.0.1:$HTTP_PORT/x"; do
		guard_expect 403 -H "Origin: $origin" -X POST "$HTTP_URL/api/v1/runs/r1/pause" ||
		exit 1
	done &&
	guard_expect 403 -H "Origin: http://evil.example" -X DELETE "$HTTP_URL/api/v1/tasks" &&
	guard_expect 403 -H "Origin: http://evil.example" -X PUT "$HTTP_URL/api/v1/tasks" &&
	guard_expect 403 -H "Origin: http://evil.example" -X PATCH "$HTTP_URL/api/v1/tasks" &&
	# its own origin and no origin reach the route (the body is bad: 400)
	for origin in "http://127.0.0.1:$HTTP_PORT" "http://localhost:$HTTP_PORT" ""; do
		guard_expect 400 ${origin:+-H "Origin: $origin"} -H "Content-Type: application/json" \
			--data-binary "[1]" "$HTTP_URL/api/v1/tasks" &&
		test_jq ".error.code == \"bad_request\"" body &&
		! grep -i "^Access-Control-" headers || exit 1
	done &&
	guard_expect 200 -H "Origin: http://127.0.0.1:$HTTP_PORT" "$HTTP_URL/api/v1/health" &&
	! grep -i "^Access-Control-" headers &&
	guard_expect 403 -H "Origin: http://evil.example" "$HTTP_URL/api/v1/runs" &&
	guard_expect 403 -H "Origin: http://evil.example" -X OPTIONS \
		-H "Access-Control-Request-Method: POST" "$HTTP_URL/api/v1/tasks" &&
	! grep -i "^Access-Control-" headers &&
	! grep -rn "Access-Control-" "$BATON_SRC_ROOT/src" &&
	ws_expect 403 -H "Origin: http://evil.example" \
		"$HTTP_URL/api/v1/ws?access_token=$HTTP_TOKEN" &&
	test_jq ".error.code == \"forbidden_origin\"" body &&
	ws_expect 101 -H "Origin: http://127.0.0.1:$HTTP_PORT" \
		"$HTTP_URL/api/v1/ws?access_token=$HTTP_TOKEN"
'

test_expect_success '?access_token= opens the live stream only; elsewhere it is 401' '
	load_http &&
	for path in /api/v1/runs /api/v1/health /metrics /api/v1/tasks/1/events; do
		curl -s -o body -w "%{http_code}" "$HTTP_URL$path?access_token=$HTTP_TOKEN" >status &&
		test "$(cat status)" = 401 &&
		test_jq ".error.code == \"unauthorized\" and (.error.message | test(\"access_token= opens the live stream only.*Authorization: Bearer\"))" body ||
		exit 1
	done &&
	curl -s -o body -w "%{http_code}" -H "Content-Type: application/json" \
		--data-binary "{\"title\": \"by query\"}" \
		"$HTTP_URL/api/v1/tasks?access_token=$HTTP_TOKEN" >status &&
	test "$(cat status)" = 401 &&
	# beside a header'"'"'s token too: the URL'"'"'s would end up in logs
	curl -s -o body -w "%{http_code}" -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/tasks?access_token=$HTTP_TOKEN" >status &&
	test "$(cat status)" = 401 &&
	test_jq ".error.message | test(\"opens the live stream only\")" body &&
	{ curl -s -o body -w "%{http_code}" --max-time 1 \
		"$HTTP_URL/api/v1/events?access_token=$HTTP_TOKEN" >status ||
		test $? = 28; } &&
	test "$(cat status)" = 200 &&
	ws_expect 101 "$HTTP_URL/api/v1/ws?access_token=$HTTP_TOKEN"
'

test_expect_success 'on every address (0.0.0.0) it answers to IP addresses, not to names' '
	make_repo w &&
	baton_init_with_agent w "$nojudge
server: {insecure: true}" &&
	cd w &&
	serve_http "$TRASH_DIRECTORY/serve-w" --workers 1 --listen 0.0.0.0:0 &&
	for host in "10.1.2.3:$HTTP_PORT" "0.0.0.0:$HTTP_PORT" \
		"[fe80::1]:$HTTP_PORT" "localhost:$HTTP_PORT"; do
		guard_expect 200 -H "Host: $host" "$HTTP_URL/api/v1/health" || exit 1
	done &&
	guard_expect 421 -H "Host: evil.example:$HTTP_PORT" "$HTTP_URL/api/v1/health" &&
	guard_expect 421 -H "Host: 10.1.2.3:1" "$HTTP_URL/api/v1/health" &&
	guard_expect 403 -H "Origin: http://evil.example:$HTTP_PORT" \
		-X POST "$HTTP_URL/api/v1/runs/r1/pause" &&
	guard_expect 404 -H "Origin: http://10.1.2.3:$HTTP_PORT" \
		-X POST "$HTTP_URL/api/v1/runs/r1/pause" &&
	kill "$(cat ../serve-w.pid)" && bg_wait ../serve-w >/dev/null
'

test_expect_success 'docs/api.md lists exactly the routes of the route table' '
	load_http &&
	api_expect 200 GET /api/v1 >routes.json &&
	jq -r ".routes[] | \"\(.method) \(.path)\"" routes.json | sort >served &&
	sed -n "s/^### \(GET\|POST\) \(\/[^ ]*\)$/\1 \2/p" "$BATON_SRC_ROOT/docs/api.md" |
		sort >documented &&
	test_line_count -gt 20 served &&
	test_cmp documented served
'

test_expect_success 'health, unknown routes (404) and methods (405)' '
	load_http &&
	api_expect 200 GET /api/v1/health >h &&
	test_jq ".status == \"ok\" and .store == \"sqlite\" and .schema >= 3" h &&
	api_expect 404 GET /api/v1/nothing >e &&
	test_jq ".error.code == \"not_found\"" e &&
	api_expect 405 DELETE /api/v1/tasks >e &&
	test_jq ".error.code == \"method_not_allowed\"" e &&
	api_expect 405 GET /api/v1/runs/r1/pause >e
'

test_expect_success 'POST /api/v1/tasks adds a task; bad input is refused and writes nothing' '
	load_http &&
	api_expect 400 POST /api/v1/tasks "{\"title\": " >e &&
	test_jq ".error.code == \"bad_request\" and (.error.message | test(\"not JSON\"))" e &&
	api_expect 400 POST /api/v1/tasks "[1, 2]" >e &&
	api_expect 400 POST /api/v1/tasks "{\"body\": \"no title\"}" >e &&
	test_jq ".error.message | test(\"title\")" e &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"priority\": \"high\"}" >e &&
	test_jq ".error.message | test(\"priority\")" e &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"after\": [99]}" >e &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"pipeline\": \"nope\"}" >e &&
	test_jq ".error.message | test(\"nope\")" e &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"allow\": \"src/*\"}" >e &&
	# the record'"'"'s own name for a field, or a typo, is not dropped
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"depends_on\": [1]}" >e &&
	test_jq ".error.message | test(\"key .depends_on. that this route does not take .*after\")" e &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"priorty\": 5}" >e &&
	test_jq ".error.message | test(\"priorty\")" e &&
	api_expect 200 GET /api/v1/tasks >list &&
	test_jq ".tasks == [] and .counts.queued == 0" list &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Add a version flag <b>\", \"priority\": 2, \"verify\": [\"true\"]}" >t &&
	test_jq ".id == 1 and .status == \"queued\" and .priority == 2 and .title == \"Add a version flag <b>\"" t
'

test_expect_success 'a body over server.max_body_kb is 413 and nothing is read into memory' '
	load_http &&
	head -c 1100000 /dev/zero | tr "\0" a >big &&
	curl -s -o body -w "%{http_code}" -H "Authorization: Bearer $HTTP_TOKEN" \
		--data-binary @big "$HTTP_URL/api/v1/tasks" >status &&
	test "$(cat status)" = 413 &&
	test_jq ".error.code == \"too_large\"" body
'

test_expect_success 'the task runs to done; tasks, runs and their parts are served' '
	load_http &&
	wait_for "api GET /api/v1/tasks/1 | jq -e \".status == \\\"done\\\"\" >/dev/null" 60 &&
	api_expect 200 GET /api/v1/tasks/1 >t &&
	test_jq ".runs | length == 1" t &&
	run=$(jq -r .run t) &&
	api_expect 200 GET "/api/v1/tasks?status=done&limit=5" >l &&
	test_jq ".tasks[0].id == 1 and .counts.done == 1 and .next == null" l &&
	api_expect 400 GET "/api/v1/tasks?status=nonsense" >e &&
	api_expect 400 GET "/api/v1/tasks?limit=0" >e &&
	api_expect 404 GET /api/v1/tasks/99 >e &&
	api_expect 404 GET /api/v1/tasks/x7 >e &&
	api_expect 200 GET /api/v1/tasks/1/events >ev &&
	test_jq "[.events[].type] | index(\"task_claimed\") != null" ev &&
	api_expect 200 GET /api/v1/runs >runs &&
	test_jq ".runs[0].id == \"$run\" and .runs[0].task_id == 1" runs &&
	api_expect 200 GET "/api/v1/runs?status=merge_ready" >runs &&
	test_jq ".runs | length == 1" runs &&
	api_expect 200 GET "/api/v1/runs/$run" >r &&
	test_jq ".status == \"merge_ready\"" r &&
	num=${run%%-*} &&
	api_expect 200 GET "/api/v1/runs/$num" >r2 &&
	test_jq ".id == \"$run\"" r2 &&
	api_expect 404 GET /api/v1/runs/r99 >e &&
	api_expect 200 GET "/api/v1/runs/$run/events?limit=3" >p1 &&
	test_jq ".events | length == 3" p1 &&
	next=$(jq .next p1) &&
	api_expect 200 GET "/api/v1/runs/$run/events?after=$next" >p2 &&
	test_jq ".events[0].seq > $next" p2 &&
	api_expect 200 GET "/api/v1/runs/$run/artifacts" >a &&
	test_jq "[.artifacts[].artifact] | index(\"plan.md\") != null" a &&
	api_expect 200 GET "/api/v1/runs/$run/artifacts/plan.md" >plan &&
	test -s plan &&
	api_expect 404 GET "/api/v1/runs/$run/artifacts/nothing.md" >e &&
	api_expect 200 GET "/api/v1/runs/$run/diff" >diff &&
	test_grep "^+" diff &&
	api_expect 200 GET "/api/v1/runs/$run/reports" >rep &&
	test_jq ".reports | type == \"array\"" rep
'

test_expect_success 'illegal transitions are 409 and change nothing' '
	load_http &&
	run=$(api GET /api/v1/tasks/1 | jq -r .run) &&
	api_expect 409 POST "/api/v1/runs/$run/pause" >e &&
	test_jq ".error.code == \"illegal_transition\"" e &&
	api_expect 409 POST "/api/v1/runs/$run/abort" >e &&
	api_expect 409 POST /api/v1/tasks/1/cancel >e &&
	test_jq ".error.code == \"illegal_transition\"" e &&
	api_expect 409 POST /api/v1/tasks/1/retry >e &&
	api_expect 409 POST "/api/v1/approvals/$run" "{\"decision\": \"approve\"}" >e &&
	api_expect 400 POST "/api/v1/approvals/$run" "{\"decision\": \"maybe\"}" >e &&
	api_expect 400 POST "/api/v1/runs/$run/steer" "{}" >e &&
	api_expect 400 POST "/api/v1/runs/$run/steer" "{\"text\": \"hi\", \"mdoe\": \"now\"}" >e &&
	test_jq ".error.message | test(\"mdoe\")" e &&
	api_expect 200 GET "/api/v1/runs/$run" >r &&
	test_jq ".status == \"merge_ready\"" r
'

test_expect_success 'pipelines, workers, merges, metrics' '
	load_http &&
	api_expect 200 GET /api/v1/pipelines >p &&
	test_jq "[.pipelines[].name] | index(\"feature\") != null" p &&
	api_expect 200 GET /api/v1/pipelines/feature >f &&
	test_jq ".stages | length > 3" f &&
	test_jq ".transitions | length > 5" f &&
	api_expect 404 GET /api/v1/pipelines/nope >e &&
	api_expect 200 GET /api/v1/workers >w &&
	test_jq ".workers | length >= 1" w &&
	api_expect 200 GET /api/v1/merges >m &&
	test_jq ".merges == []" m &&
	api_expect 200 GET /metrics >metrics &&
	test_grep "^baton_tasks{status=\"done\"} 1$" metrics &&
	test_grep "^baton_runs{status=\"merge_ready\"} 1$" metrics &&
	test_grep "^baton_queue_depth 0$" metrics &&
	test_grep "^baton_stage_duration_seconds_count{stage=\"planning\"} 1$" metrics &&
	test_grep "^baton_http_requests_total{code=\"4xx\"} [1-9]" metrics
'

test_expect_success 'a gated task waits; it is approved over the API and ends done' '
	make_repo g &&
	baton_init_with_agent g "$gate" &&
	cd g &&
	serve_http "$TRASH_DIRECTORY/serve-g" --workers 1 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Gated\"}" >t &&
	wait_for "api GET /api/v1/approvals | jq -e \".approvals | length == 1\" >/dev/null" 60 &&
	api GET /api/v1/approvals >ap &&
	test_jq ".approvals[0].gate == \"executing\" and .approvals[0].task_id == 1" ap &&
	run=$(jq -r ".approvals[0].run" ap) &&
	api_expect 400 POST "/api/v1/approvals/$run" "{\"decision\": \"request-changes\"}" >e &&
	api_expect 200 POST "/api/v1/approvals/$run" "{\"decision\": \"approve\"}" >r &&
	wait_for "api GET /api/v1/tasks/1 | jq -e \".status == \\\"done\\\"\" >/dev/null" 60
'

test_expect_success 'pause and resume a running run over the API' '
	load_http g &&
	export FAKE_FAIL_STAGE=any FAKE_FAIL_MODE=slow FAKE_SLEEP=1 &&
	kill "$(cat ../serve-g.pid)" && bg_wait ../serve-g >/dev/null &&
	sed -i "/require_approval_at_stages/d" .baton/config.yaml &&
	serve_http "$TRASH_DIRECTORY/serve-g2" --workers 1 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Pausable\"}" >t &&
	wait_for "api GET /api/v1/tasks/2 | jq -e \".run != null\" >/dev/null" 30 &&
	run=$(api GET /api/v1/tasks/2 | jq -r .run) &&
	api_expect 200 POST "/api/v1/runs/$run/pause" >r &&
	test_jq ".pause_requested == true" r &&
	wait_for "api GET /api/v1/runs/$run | jq -e \".status == \\\"paused\\\"\" >/dev/null" 60 &&
	api_expect 202 POST "/api/v1/runs/$run/steer" "{\"text\": \"keep it small\"}" >s &&
	api_expect 200 POST "/api/v1/runs/$run/resume" >r &&
	test_jq ".driven == true" r &&
	wait_for "api GET /api/v1/tasks/2 | jq -e \".status == \\\"done\\\"\" >/dev/null" 90 &&
	api GET "/api/v1/runs/$run/events?limit=5000" >ev &&
	test_jq "[.events[].type] | index(\"steer\") != null" ev
'

# seqs NAME: the seq of each message a client received (SSE id: lines
# or WebSocket JSON lines), one per line.
sse_seqs() { sed -n "s/^id: //p" "$1"; }
ws_seqs() { jq -r "select(.seq != null) | .seq" "$1"; }

test_expect_success 'SSE: disconnect mid-run, reconnect with Last-Event-ID: every event exactly once' '
	load_http g &&
	export FAKE_FAIL_STAGE=any FAKE_FAIL_MODE=slow FAKE_SLEEP=1 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Streamed\"}" >t &&
	id=$(jq .id t) &&
	# the first client listens from before the task started, then drops
	# once the run has started (created -> its first stage: task:started;
	# the run entering created is a task:progress before it)
	bg_start sse1 curl -s -N -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/events?task=$id&after=0" &&
	wait_for "grep -q \"^event: task:started\" sse1.out" 60 &&
	kill "$(cat sse1.pid)" && bg_wait sse1 >/dev/null &&
	last=$(sse_seqs sse1.out | tail -n 1) &&
	test -n "$last" &&
	api GET /api/v1/tasks/$id | jq -e ".status == \"running\"" >/dev/null &&
	# the second comes back with what it had, as a browser does: the
	# same URL, after=0 and all, and Last-Event-ID
	bg_start sse2 curl -s -N -H "Authorization: Bearer $HTTP_TOKEN" \
		-H "Last-Event-ID: $last" \
		"$HTTP_URL/api/v1/events?task=$id&after=0" &&
	wait_for "grep -q \"^event: task:completed\" sse2.out" 90 &&
	wait_for "api GET /api/v1/tasks/$id | jq -e \".status == \\\"done\\\"\" >/dev/null" 60 &&
	sleep 1 && kill "$(cat sse2.pid)" && bg_wait sse2 >/dev/null &&
	{ sse_seqs sse1.out; sse_seqs sse2.out; } >got &&
	sort -n got | uniq -d >dups &&
	test_line_count = 0 dups &&
	"$BATON" events --task "$id" --json | jq -r ".seq" | sort -n >want &&
	sort -n got >got.sorted &&
	test_cmp want got.sorted &&
	test_grep "^event: task:started" sse1.out &&
	test_grep "^event: task:delta" sse2.out &&
	curl -s -o bad.json -w "%{http_code}" --max-time 10 \
		-H "Authorization: Bearer $HTTP_TOKEN" -H "Last-Event-ID: abc" \
		"$HTTP_URL/api/v1/events?after=0" >code &&
	test "$(cat code)" = 400 &&
	test_jq ".error.message == \"Last-Event-ID must be an event seq, not '"'"'abc'"'"'\"" bad.json
'

test_expect_success 'WebSocket: the same stream, resumed with after=, exactly once' '
	load_http g &&
	export FAKE_FAIL_STAGE=any FAKE_FAIL_MODE=slow FAKE_SLEEP=1 &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN" \
		--send "{\"type\": \"task:submit\", \"id\": \"c1\", \"task\": {\"title\": \"Over WS\"}}" \
		--until "\"id\":\"c1\"" --timeout 10 >ack &&
	grep "\"type\":\"ack\"" ack >ack1 &&
	test_jq ".ok == true and .status == 201" ack1 &&
	id=$(jq .result.id ack1) &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN&task=$id&after=0" \
		--until "task:progress" --timeout 60 >ws1 &&
	last=$(ws_seqs ws1 | tail -n 1) &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN&task=$id&after=$last" \
		--until "task:completed" --timeout 90 >ws2 &&
	wait_for "api GET /api/v1/tasks/$id | jq -e \".status == \\\"done\\\"\" >/dev/null" 60 &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN&task=$id&after=$(ws_seqs ws2 | tail -n 1)" \
		--timeout 2 >ws3 || test $? = 1;
	{ ws_seqs ws1; ws_seqs ws2; ws_seqs ws3; } >got &&
	sort -n got | uniq -d >dups &&
	test_line_count = 0 dups &&
	"$BATON" events --task "$id" --json | jq -r ".seq" | sort -n >want &&
	sort -n got >got.sorted &&
	test_cmp want got.sorted &&
	# commands: a bad one is refused with a reason, stop cancels
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN" \
		--send "{\"type\": \"task:fly\", \"id\": \"c2\"}" \
		--until "\"id\":\"c2\"" --timeout 10 >bad &&
	grep "\"type\":\"ack\"" bad >bad1 &&
	test_jq ".ok == false and .error.code == \"bad_request\"" bad1 &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN" \
		--send "{\"type\": \"task:stop\", \"id\": \"c3\", \"task\": $id}" \
		--until "\"id\":\"c3\"" --timeout 10 >stop &&
	grep "\"type\":\"ack\"" stop >stop1 &&
	test_jq ".ok == false and .error.code == \"illegal_transition\"" stop1 &&
	test_expect_code 2 "$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=wrong" --timeout 5
'

test_expect_success 'WebSocket: a bad cursor is told why before the close' '
	load_http g &&
	# the close used to overtake the message (libwslay sends control
	# frames first): the client saw the close and nothing else
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN&after=soon" \
		--until "after must be an event seq" --timeout 10 >badafter &&
	test_jq ".type == \"error\" and .error.code == \"bad_request\"" badafter &&
	test_grep "not '"'"'soon'"'"'" badafter
'

test_expect_success 'a lone commit by a writer that stays connected reaches the stream at once' '
	load_http g &&
	bg_start lone curl -s -N -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/events" &&
	sleep 1 &&
	# sqlite3 commits one event and keeps its connection for 5 s: the
	# commit is readable only after its WAL write that woke the hub
	printf "%s\n" "PRAGMA busy_timeout = 5000;" "PRAGMA synchronous = FULL;" \
		"INSERT INTO events (ts, type) VALUES (1, '"'"'lone_probe'"'"');" \
		".shell sleep 5" >lone.sql &&
	bg_start writer sh -c "sqlite3 .baton/baton.db <lone.sql" &&
	wait_for "grep -q lone_probe lone.out" 3 &&
	kill "$(cat lone.pid)" && bg_wait lone >/dev/null
'

test_done
