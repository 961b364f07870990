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

# waiting.py PORT N READY GO OUT: opens N connections that say nothing,
# then one more that asks for the page: once it is answered, the loop
# that answered it has accepted the N before it. Writes READY then;
# once the file GO exists, asks for the page on each of the N and
# writes to OUT how many were answered ("answered A of N").
cat >"$TRASH_DIRECTORY/waiting.py" <<'PY'
import os, socket, sys, time

port, n = int(sys.argv[1]), int(sys.argv[2])
page = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
probe = socket.create_connection(("127.0.0.1", port))
probe.settimeout(30)
probe.sendall(page)
if not probe.recv(64).startswith(b"HTTP/1.1 200"):
    sys.exit("waiting.py: the probe was not answered")
open(sys.argv[3], "w").write("ready\n")
while not os.path.exists(sys.argv[4]):
    time.sleep(0.01)
for s in socks:
    s.sendall(page)
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

# lock.py DB SECONDS FILE [AFTER]: holds DB's write lock for SECONDS
# (with AFTER: until the file AFTER exists, then SECONDS more), writing
# FILE once it has it.
cat >"$TRASH_DIRECTORY/lock.py" <<'PY'
import os, sqlite3, sys, time

db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
open(sys.argv[3], "w").write("locked\n")
while len(sys.argv) > 4 and not os.path.exists(sys.argv[4]):
    time.sleep(0.01)
time.sleep(float(sys.argv[2]))
db.execute("ROLLBACK")
PY

# blocked_loops: how many of the HTTP process's loops (MHD-worker
# threads) sleep rather than wait for their sockets: each is in a handler
# that waits for the store's write lock (SQLite's busy handler sleeps).
# No child process: it runs in a tight loop, on a machine maybe busy.
blocked_loops() {
	local t comm wchan n=0 pid
	read -r pid <"$TRASH_DIRECTORY/http.pid"
	for t in /proc/$pid/task/*; do
		comm= wchan=
		read -r comm <"$t/comm" 2>/dev/null
		read -r wchan <"$t/wchan" 2>/dev/null # no newline at its end
		[ "$comm" = MHD-worker ] && [ "$wchan" = hrtimer_nanosleep ] &&
			n=$((n + 1))
	done
	echo "$n"
}

# slow_post I: a POST of a task, in the background, whose handler waits
# for the store's write lock; its status goes to ../slowI
slow_post() {
	{ curl -s -o /dev/null -w "%{http_code}" --max-time 30 \
		-H "Authorization: Bearer $(cat .baton/token)" \
		-H "Content-Type: application/json" \
		--data-binary "{\"title\": \"slow $1\"}" \
		"http://127.0.0.1:$(cat ../port)/api/v1/tasks" >../slow$1 & }
}

# hold_three_loops LOCKED AFTER FIRST: takes the store's write lock
# (lock.py: the file LOCKED once taken, let go 6 s after the file AFTER
# appears), then sends three slow POSTs numbered from FIRST, each once
# the one before holds its loop: three of the four loops are held.
hold_three_loops() {
	local i
	{ python3 ../lock.py .baton/baton.db 6 "$1" "$2" & } &&
	wait_for "test -s $1" 20 &&
	for i in 0 1 2; do
		slow_post $(($3 + i)) &&
		wait_for "test \$(blocked_loops) -ge $((i + 1))" 5 || return 1
	done
}

# keepalive.py PORT TOKEN HTTPPID SENT OUT: one kept-alive connection
# asks for the page; then a slow POST on a new connection (which the one
# loop not yet blocked takes, as the others are), once that loop sleeps
# in it the kept-alive connection asks again at once, within its 1 s,
# and writes the file SENT. OUT: "first S", "second S|closed", "post S"
# (the slow POST's). It looks at the loops itself, as blocked_loops
# does: waiting on the shell for it would spend that second.
cat >"$TRASH_DIRECTORY/keepalive.py" <<'PY'
import os, socket, sys, time

port, token, pid, sent, out = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                               sys.argv[4], sys.argv[5])
page = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

def answer(s):
    """The status of one whole answer read from s, or "closed"."""
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            got = s.recv(65536)
            if not got:
                return "closed"
            buf += got
        head, body = buf.split(b"\r\n\r\n", 1)
        size = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                size = int(v)
        while len(body) < size:
            got = s.recv(65536)
            if not got:
                return "closed"
            body += got
        return head.split(b" ")[1].decode()
    except OSError:
        return "closed"

def blocked():
    n = 0
    for t in os.listdir("/proc/%s/task" % pid):
        try:
            comm = open("/proc/%s/task/%s/comm" % (pid, t)).read().strip()
            wchan = open("/proc/%s/task/%s/wchan" % (pid, t)).read()
        except OSError:
            continue
        n += comm == "MHD-worker" and wchan == "hrtimer_nanosleep"
    return n

k = socket.create_connection(("127.0.0.1", port))
k.settimeout(30)
k.sendall(page)
first = answer(k)
body = b'{"title": "slow keep-alive"}'
p = socket.create_connection(("127.0.0.1", port))
p.settimeout(30)
p.sendall(b"POST /api/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
          b"Authorization: Bearer " + token.encode() + b"\r\n"
          b"Content-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
end = time.time() + 0.8
while blocked() < 4 and time.time() < end:
    time.sleep(0.005)
k.sendall(page)
open(sent, "w").write("sent\n")
second = answer(k)
open(out, "w").write("first %s\nsecond %s\npost %s\n"
                     % (first, second, answer(p)))
PY

test_expect_success 'setup: serve with 4 request threads, 2 streams' '
	make_repo a &&
	baton_init_with_agent a "runtime: {judge: false}
server: {threads: 4, max_streams: 2}" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	echo "$HTTP_PORT" >../port &&
	ps -o pid=,comm= --ppid "$(cat ../serve.pid)" |
		awk "/baton http/ {print \$1}" >../http.pid &&
	test_line_count = 1 ../http.pid
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

# Requests that came in time wait while their loop runs a slow handler
# (one that waits for the store's write lock, held elsewhere until 6 s
# after they were sent), and are then answered: their connections are
# not taken for idle because the server was busy. A loop in a slow
# handler accepts no connection: three slow requests, each sent once the
# one before holds its loop, take three loops, so the forty connections
# go to the fourth, and a fourth slow request then holds it. The forty
# send then. (The slow requests' own answers are not the point: on a
# slow machine one may give up waiting for the lock.)
test_expect_success 'requests waiting on a busy loop are answered, not cut' '
	cd a &&
	hold_three_loops ../locked ../w.go 1 &&
	{ python3 ../waiting.py "$(cat ../port)" 40 ../w.ready ../w.go \
		../w.out & } &&
	wait_for "test -s ../w.ready" 20 &&
	slow_post 4 &&
	wait_for "test \$(blocked_loops) -ge 4" 5 &&
	touch ../w.go &&
	wait_for "test -s ../w.out" 40 &&
	cat ../w.out &&
	test_grep "^answered 40 of 40\$" ../w.out
'

# The same for the next request on a kept-alive connection: sent within
# its second while its loop runs a slow handler, it waits (the lock is
# let go 6 s after it was sent) and is answered. Three slow requests
# hold three loops first, so the connection and the slow request after
# its first answer share the fourth.
test_expect_success 'a kept-alive request waiting on a busy loop is answered' '
	cd a &&
	hold_three_loops ../locked2 ../k.sent 5 &&
	python3 ../keepalive.py "$(cat ../port)" "$(cat .baton/token)" \
		"$(cat ../http.pid)" ../k.sent ../k.out &&
	cat ../k.out &&
	test_grep "^first 200\$" ../k.out &&
	test_grep "^second 200\$" ../k.out
'

test_done
