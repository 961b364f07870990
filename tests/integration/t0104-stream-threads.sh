#!/bin/bash
test_description='idle live streams hold no thread; a slow-loris client is cut off while they are open'
. "$(dirname "$0")/../lib/test-lib.sh"

# restore_http: the serve's address and token (serve_http set them in
# the setup's own shell), in a test that runs in a/
restore_http() {
	HTTP_PORT=$(cat ../port) &&
	HTTP_URL=http://127.0.0.1:$HTTP_PORT &&
	HTTP_TOKEN=$(cat .baton/token)
}

STREAMS=$BATON_SRC_ROOT/tests/lib/streams.py
N=1000

# trickle.py PORT: one connection that sends a request header one byte
# every half second, never ending it; prints "cut after S" (whole
# seconds) once the server closes it, "open" if it is still open after
# 30 s.
cat >"$TRASH_DIRECTORY/trickle.py" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
start = time.time()
try:
    s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    while time.time() - start < 30:
        s.sendall(b"x")
        time.sleep(0.5)
    print("open")
except OSError:
    print("cut after %d" % (time.time() - start))
PY

# threads: how many threads the HTTP process of the serve has now
threads() {
	ls "/proc/$(cat "$TRASH_DIRECTORY/http.pid")/task" | wc -l
}

test_expect_success 'setup: serve with 8 request threads' '
	make_repo a &&
	baton_init_with_agent a "runtime: {judge: false}
server: {threads: 8}" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	echo "$HTTP_PORT" >../port &&
	ps -o pid=,comm= --ppid "$(cat ../serve.pid)" |
		awk "/baton http/ {print \$1}" >../http.pid &&
	test_line_count = 1 ../http.pid &&
	threads >../threads.before &&
	cat ../threads.before
'

test_expect_success "$N open streams add no thread" '
	cd a &&
	restore_http &&
	{ python3 "$STREAMS" "$HTTP_PORT" "$HTTP_TOKEN" $N sse ../ready \
		../idle.out --timeout 45 >../idle.log 2>&1 & } &&
	wait_for "test -s ../ready" 60 &&
	wait_for "curl -s -H \"Authorization: Bearer $HTTP_TOKEN\" $HTTP_URL/metrics | grep -q \"^baton_stream_clients $N\$\"" 20 &&
	threads >../threads.open &&
	echo "threads: $(cat ../threads.before) before, $(cat ../threads.open) with $N streams" &&
	test "$(cat ../threads.open)" -le "$(cat ../threads.before)"
'

test_expect_success 'a trickling request is cut off while the streams stay' '
	cd a &&
	restore_http &&
	python3 ../trickle.py "$HTTP_PORT" >../trickle.out &&
	cat ../trickle.out &&
	test_grep "^cut after [0-9]\$" ../trickle.out &&
	api_expect 200 GET /api/v1/health &&
	curl -s -H "Authorization: Bearer $HTTP_TOKEN" $HTTP_URL/metrics |
		grep "^baton_stream_clients $N\$"
'

test_expect_success 'the idle streams were never cut' '
	wait_for "test -s idle.out" 60 &&
	cat idle.out &&
	test_grep "^heads $N\$" idle.out &&
	test_grep "^closed 0\$" idle.out
'

test_done
