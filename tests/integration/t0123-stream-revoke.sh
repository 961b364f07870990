#!/bin/bash
test_description='a revoked token loses its open streams: SSE and WebSocket streams it opened end at once when serve revokes it, when the hub next looks at the store when the CLI does, and a WebSocket command sent after the revocation is refused; streams of other tokens go on'
. "$(dirname "$0")/../lib/test-lib.sh"

STREAMS=$BATON_SRC_ROOT/tests/lib/streams.py

# ws-hold.py PORT TOKEN READY GO OUT: a WebSocket client that opens a
# stream, writes READY once welcomed, waits for the file GO, then sends
# a task:submit and writes to OUT what came back: "error MESSAGE" for an
# error message, "ack OK" for an answer, "close CODE REASON" for the
# close, one line each, until the close (or 30 s).
cat >"$TRASH_DIRECTORY/ws-hold.py" <<'PY'
import os, socket, struct, sys, time
sys.path.insert(0, os.environ["LIB"])
from protoreplay import WS, Closed

port, token, ready, go, out = sys.argv[1:6]
ws = WS(int(port), token)
assert ws.status == 101, ws.status
ws.until(lambda m: m["type"] == "connection:welcome", "welcome", 10)
open(ready, "w").write("ready\n")
deadline = time.time() + 30
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.02)
lines = []
try:
    ws.send("task:submit", {"goal": "sent after the revoke", "messages": []})
except OSError as e:
    lines.append("send failed %s" % e)
try:
    while True:
        m = ws.recv(deadline)
        if m.get("type") == "error":
            lines.append("error %s" % m["error"]["message"])
        elif m.get("type") == "ack":
            lines.append("ack %s" % m.get("ok"))
except Closed as c:
    lines.append("close %s" % c.code)
except socket.timeout:
    lines.append("silence")
open(out, "w").write("\n".join(lines) + "\n")
PY

# restore_http: the serve's address and token in a test that runs in a/
restore_http() {
	HTTP_PORT=$(cat ../port) &&
	HTTP_URL=http://127.0.0.1:$HTTP_PORT &&
	HTTP_TOKEN=$(cat .baton/token)
}

# follow NAME TOKEN MODE N [UNTIL]: N clients of MODE on TOKEN in the
# background (streams.py), out in ../NAME.out once they end: when each
# is closed, or saw UNTIL; ../NAME.ready once all are in.
follow() {
	rm -f ../$1.ready ../$1.out &&
	{ python3 "$STREAMS" "$HTTP_PORT" "$2" $4 $3 ../$1.ready ../$1.out \
		--until "${5:-never-sent}" --timeout 60 >../$1.log 2>&1 & } &&
	wait_for "test -s ../$1.ready" 30
}

task_count() {
	api_expect 200 GET /api/v1/tasks >/dev/null &&
	jq ".tasks | length" api.body
}

test_expect_success 'setup: serve and four operator tokens' '
	make_repo a &&
	baton_init_with_agent a "runtime: {judge: false}" &&
	cd a &&
	for n in rex rob ria vera; do
		"$BATON" token add $n --role operator >../$n.token || exit 1
	done &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	echo "$HTTP_PORT" >../port
'

test_expect_success 'revoked through the API: its SSE and WebSocket streams end at once (on every WebSocket loop), another token streams on' '
	cd a &&
	restore_http &&
	rex=$(cat ../rex.token) vera=$(cat ../vera.token) &&
	follow rex-sse "$rex" sse 5 &&
	follow rex-ws "$rex" ws 5 &&
	follow vera "$vera" sse 3 after-the-revoke &&
	follow vera-ws "$vera" ws 3 after-the-revoke &&
	{ curl -sN -H "Authorization: Bearer $rex" "$HTTP_URL/api/v1/events" >../rex.curl 2>&1 & } &&
	wait_for "test -s ../rex.curl" 10 &&
	api_expect 200 POST /api/v1/tokens/rex/revoke &&
	wait_for "test -s ../rex-sse.out && test -s ../rex-ws.out" 20 &&
	cat ../rex-sse.out ../rex-ws.out &&
	test_grep "^closed 5$" ../rex-sse.out &&
	test_grep "^closed 5$" ../rex-ws.out &&
	wait_for "grep -q \"^event: revoked\" ../rex.curl" 10 &&
	test_grep "token .rex. was revoked" ../rex.curl &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"after-the-revoke\"}" &&
	wait_for "test -s ../vera.out && test -s ../vera-ws.out" 20 &&
	test_grep "^done 3$" ../vera.out &&
	test_grep "^closed 0$" ../vera.out &&
	test_grep "^done 3$" ../vera-ws.out &&
	test_grep "^closed 0$" ../vera-ws.out
'

test_expect_success 'revoked by the CLI behind serve'"'"'s back: its streams end when the hub sees it' '
	cd a &&
	restore_http &&
	rob=$(cat ../rob.token) &&
	follow rob-sse "$rob" sse 2 &&
	follow rob-ws "$rob" ws 2 &&
	"$BATON" token revoke rob &&
	wait_for "test -s ../rob-sse.out && test -s ../rob-ws.out" 30 &&
	test_grep "^closed 2$" ../rob-sse.out &&
	test_grep "^closed 2$" ../rob-ws.out
'

test_expect_success 'a WebSocket command sent after the CLI revoked its token is refused, with 1008' '
	cd a &&
	restore_http &&
	before=$(task_count) &&
	rm -f ../ria.ready ../ria.go ../ria.out &&
	{ LIB=$BATON_SRC_ROOT/tests/lib python3 ../ws-hold.py "$HTTP_PORT" "$(cat ../ria.token)" \
		../ria.ready ../ria.go ../ria.out >../ria.log 2>&1 & } &&
	wait_for "test -s ../ria.ready" 20 &&
	"$BATON" token revoke ria &&
	: >../ria.go &&
	wait_for "test -s ../ria.out" 40 &&
	cat ../ria.out &&
	test_grep "^error token .ria. was revoked" ../ria.out &&
	test_grep "^close 1008$" ../ria.out &&
	! grep "^ack" ../ria.out &&
	test "$(task_count)" = "$before"
'

test_expect_success 'a revoked token opens no new stream' '
	cd a &&
	restore_http &&
	test "$(curl -s -o /dev/null -w "%{http_code}" "$HTTP_URL/api/v1/events?access_token=$(cat ../rex.token)")" = 401
'

test_done
