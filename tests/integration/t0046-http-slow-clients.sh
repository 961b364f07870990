#!/bin/bash
test_description='slow and idle connections cannot take the HTTP server down'
. "$(dirname "$0")/../lib/test-lib.sh"

# slow.py PORT TRICKLE IDLE SECONDS READYFILE: opens TRICKLE connections
# that send a request header one byte every half second and IDLE ones
# that send nothing, for at most SECONDS; writes READYFILE once all are
# open, and at the end how many the server closed ("closed N of M").
cat >"$TRASH_DIRECTORY/slow.py" <<'PY'
import socket, sys, threading, time

port, ntrickle, nidle = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
end = time.time() + float(sys.argv[4])
closed = []

def trickle(s):
    try:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        while time.time() < end:
            s.sendall(b"x")
            time.sleep(0.5)
    except OSError:
        closed.append(s)

def idle(s):
    s.settimeout(max(0.1, end - time.time()))
    try:
        if s.recv(1) == b"":
            closed.append(s)
    except socket.timeout:
        pass
    except OSError:
        closed.append(s)

socks = [socket.create_connection(("127.0.0.1", port))
         for _ in range(ntrickle + nidle)]
threads = [threading.Thread(target=trickle if i < ntrickle else idle,
                            args=(s,), daemon=True)
           for i, s in enumerate(socks)]
for t in threads:
    t.start()
open(sys.argv[5], "w").write("ready\n")
for t in threads:
    t.join(max(0.1, end - time.time()) + 1)
print("closed %d of %d" % (len(closed), len(socks)))
PY

# waiting.py PORT N READY GO OUT: opens N connections that say nothing;
# writes READY once all are open; once the file GO exists, asks each
# for the page and writes to OUT how many were answered
# ("answered A of N").
cat >"$TRASH_DIRECTORY/waiting.py" <<'PY'
import os, socket, sys, time

port, n = int(sys.argv[1]), int(sys.argv[2])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
open(sys.argv[3], "w").write("ready\n")
while not os.path.exists(sys.argv[4]):
    time.sleep(0.05)
for s in socks:
    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
answered = 0
for s in socks:
    s.settimeout(30)
    try:
        if s.recv(64).startswith(b"HTTP/1.1 200"):
            answered += 1
    except OSError:
        pass
open(sys.argv[5], "w").write("answered %d of %d\n" % (answered, n))
PY

# lock.py DB SECONDS FILE: holds DB's write lock for SECONDS, writing
# FILE once it has it.
cat >"$TRASH_DIRECTORY/lock.py" <<'PY'
import sqlite3, sys, time

db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
open(sys.argv[3], "w").write("locked\n")
time.sleep(float(sys.argv[2]))
db.execute("ROLLBACK")
PY

test_expect_success 'setup: serve with 4 request threads, 2 streams' '
	make_repo a &&
	baton_init_with_agent a "runtime: {judge: false}
server: {threads: 4, max_streams: 2}" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	echo "$HTTP_PORT" >../port
'

# Twice as many hostile connections as there are threads: half trickle
# a header that never ends, half never say anything. The page is still
# answered, and every hostile connection is cut: a request has a few
# seconds to arrive in full, however steadily it trickles (an idle
# timeout alone never cuts a trickle). The 25 s bound is generous on
# purpose.
test_expect_success 'trickling and idle connections do not starve a request' '
	port=$(cat port) &&
	{ python3 slow.py "$port" 4 4 40 ready >slow.out 2>&1 & } &&
	wait_for "test -s ready" 20 &&
	curl -s -o page -w "%{http_code}" --max-time 25 \
		"http://127.0.0.1:$port/" >status &&
	test "$(cat status)" = 200 &&
	wait_for "test -s slow.out" 60 &&
	test_grep "closed 8 of 8" slow.out
'

# The request timeout bounds how long a request may take to arrive, not
# how long a live stream may stay quiet: both outlive it.
test_expect_success 'quiet live streams outlive the request timeout' '
	cd a &&
	port=$(cat ../port) &&
	tok=$(cat .baton/token) &&
	{ timeout 12 curl -s -N -H "Authorization: Bearer $tok" \
		"http://127.0.0.1:$port/api/v1/events" >../sse.out; rc=$?; } &&
	test $rc = 124 &&
	test_expect_code 1 "$WSCLIENT" "$port" "/api/v1/ws?access_token=$tok" \
		--count 1000 --timeout 12
'

# Live streams are capped by server.max_streams (here 2): one more is
# 503, and requests are still answered.
test_expect_success 'live streams beyond server.max_streams are refused' '
	cd a &&
	port=$(cat ../port) &&
	tok=$(cat .baton/token) &&
	for i in 1 2; do
		{ timeout 60 curl -s -N -H "Authorization: Bearer $tok" \
			"http://127.0.0.1:$port/api/v1/events" >../sse$i.out & } ||
			return 1
	done &&
	wait_for "curl -s -H \"Authorization: Bearer $tok\" http://127.0.0.1:$port/metrics | grep -q \"^baton_stream_clients 2\"" 20 &&
	curl -s -o ../third -w "%{http_code}" --max-time 20 \
		-H "Authorization: Bearer $tok" \
		"http://127.0.0.1:$port/api/v1/events" >../status &&
	test "$(cat ../status)" = 503 &&
	test_jq ".error.code == \"too_many_streams\"" ../third &&
	test_expect_code 2 "$WSCLIENT" "$port" "/api/v1/ws?access_token=$tok" \
		--timeout 5 &&
	curl -s -o /dev/null -w "%{http_code}" --max-time 20 \
		"http://127.0.0.1:$port/" >../status &&
	test "$(cat ../status)" = 200
'

# Requests that came in time wait while every loop runs a slow handler
# (one that waits for the store's write lock, held elsewhere for 7 s),
# and are then answered: their connections are not taken for idle
# because the server was busy. The forty connections open first, so
# every loop has some; a loop that runs a slow handler accepts no other
# connection, so four slow requests, one after another, take the four
# loops. The forty send once they run.
test_expect_success 'requests waiting on busy loops are answered, not cut' '
	cd a &&
	port=$(cat ../port) &&
	tok=$(cat .baton/token) &&
	{ python3 ../waiting.py "$port" 40 ../w.ready ../w.go ../w.out & } &&
	wait_for "test -s ../w.ready" 20 &&
	{ python3 ../lock.py .baton/baton.db 7 ../locked & } &&
	wait_for "test -s ../locked" 20 &&
	for i in 1 2 3 4; do
		{ curl -s -o /dev/null -w "%{http_code}" --max-time 30 \
			-H "Authorization: Bearer $tok" \
			-H "Content-Type: application/json" \
			--data-binary "{\"title\": \"slow $i\"}" \
			"http://127.0.0.1:$port/api/v1/tasks" >../slow$i & } &&
		sleep 0.3 || return 1
	done &&
	touch ../w.go &&
	wait_for "test -s ../w.out" 40 &&
	cat ../w.out &&
	test_grep "^answered 40 of 40\$" ../w.out &&
	for i in 1 2 3 4; do
		wait_for "test -s ../slow$i" 30 &&
		test "$(cat ../slow$i)" = 201 || return 1
	done
'

test_done
