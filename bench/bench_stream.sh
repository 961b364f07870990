#!/bin/sh
#
# bench/bench_stream.sh: thousands of watchers on one `baton serve`, with
# bench_stream (one process, one thread, epoll). A scratch repository,
# `serve --workers 1` on a free loopback port, then bench_stream opens
# BENCH_STREAM_CLIENTS SSE streams at once (connect time: all of them
# have their answer's head), reads the HTTP process's memory before and
# with them idle (KiB a stream), appends BENCH_STREAM_EVENTS events
# through the store at BENCH_STREAM_RATE a second and takes every
# delivery's latency (p50/p99), and checks that every client got every
# event once, in order. Then the same with as many WebSockets, on a
# fresh serve (BENCH_STREAM_KINDS: "sse ws" by default).
#
# The descriptor limit is raised to its hard limit here (bench_stream
# and serve's HTTP process raise theirs too); 10,000 clients need a hard
# limit of 10,600 (the server keeps some for its threads' stores): with
# less, the run takes fewer clients and says so.
#
# Environment: BATON_BIN, BENCH_STREAM (the bench_stream binary),
# BENCH_TMPDIR, BENCH_STREAM_CLIENTS (10000), BENCH_STREAM_EVENTS (200),
# BENCH_STREAM_RATE (20), BENCH_STREAM_THREADS (server.threads; default:
# the config's default), BENCH_STREAM_KINDS ("sse ws"),
# BENCH_STREAM_PATIENCE (60: seconds serve may take to start or stop).
#
# Figures are reported, never asserted; the script stops (exit 1) when
# serve does not start or bench_stream fails (a client refused or an
# event missed).

set -eu
BATON_BIN=${BATON_BIN:-$(pwd)/baton}
BENCH_STREAM=${BENCH_STREAM:-$(pwd)/build/bench/bench_stream}
CLIENTS=${BENCH_STREAM_CLIENTS:-10000}
EVENTS=${BENCH_STREAM_EVENTS:-200}
RATE=${BENCH_STREAM_RATE:-20}
PATIENCE=${BENCH_STREAM_PATIENCE:-60}
THREADS=${BENCH_STREAM_THREADS:-}
KINDS=${BENCH_STREAM_KINDS:-sse ws}

tmp=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/baton-bench-stream.XXXXXX")
serve_pid=
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com

cleanup() {
	if [ -n "$serve_pid" ]; then
		kill -9 "$serve_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

die() {
	echo "bench_stream.sh: $*" >&2
	exit 1
}

[ -x "$BATON_BIN" ] || die "no baton binary at '$BATON_BIN'"
[ -x "$BENCH_STREAM" ] || die "no bench_stream at '$BENCH_STREAM'"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# fewer clients when the hard limit has no room for them (said, not hidden)
hard=$(ulimit -Hn)
# (serve keeps 128 + 4 per thread, 64 threads, and 64 for requests)
if [ "$hard" != unlimited ] && [ "$CLIENTS" -gt $((hard - 600)) ]; then
	echo "descriptor hard limit $hard: $((hard - 600)) clients, not $CLIENTS"
	CLIENTS=$((hard - 600))
fi

git init -q "$tmp/repo"
cd "$tmp/repo"
git commit -q --allow-empty -m init
"$BATON_BIN" init >/dev/null
printf '#!/bin/sh\necho done\n' >"$tmp/agent"
chmod +x "$tmp/agent"
cat >.baton/config.yaml <<CFG
providers: {bench: {type: command, command: ["$tmp/agent"]}}
roles: {default: bench}
validate: {commands: []}
runtime: {judge: false}
CFG
[ -z "$THREADS" ] || echo "server: {threads: $THREADS}" >>.baton/config.yaml

# start_serve: serve --workers 1 on a free loopback port; sets url,
# token and http_pid (its HTTP process, whose memory is measured).
start_serve() {
	rm -f .baton/http.url
	BATON_LISTEN=127.0.0.1:0 "$BATON_BIN" serve --workers 1 \
		2>"$tmp/serve.log" &
	serve_pid=$!
	t=0
	until [ -s .baton/http.url ]; do
		kill -0 "$serve_pid" 2>/dev/null ||
			{ cat "$tmp/serve.log" >&2; die "serve exited at start"; }
		t=$((t + 1))
		[ "$t" -lt $((PATIENCE * 100)) ] ||
			die "serve wrote no .baton/http.url"
		sleep 0.01
	done
	url=$(sed 's:/*$::' .baton/http.url)
	token=$(cat .baton/token)
	t=0
	until curl -sf --noproxy '*' -o /dev/null \
		-H "Authorization: Bearer $token" "$url/api/v1/health"; do
		t=$((t + 1))
		[ "$t" -lt $((PATIENCE * 10)) ] ||
			die "$url/api/v1/health never answered"
		sleep 0.1
	done
	http_pid=$(ps -o pid=,comm= --ppid "$serve_pid" |
		awk '/baton http/ {print $1}')
	[ -n "$http_pid" ] ||
		die "no 'baton http' process under serve ($serve_pid)"
}

stop_serve() {
	kill -TERM "$serve_pid" 2>/dev/null || true
	sleep 0.2
	kill -TERM "$serve_pid" 2>/dev/null || true
	t=0
	while kill -0 "$serve_pid" 2>/dev/null; do
		t=$((t + 1))
		[ "$t" -lt $((PATIENCE * 20)) ] ||
			die "serve (pid $serve_pid) did not exit within $PATIENCE s"
		sleep 0.05
	done
	wait "$serve_pid" 2>/dev/null || true
	serve_pid=
}

# Each kind on a serve of its own, so that each starts from the same
# memory: SSE streams, then WebSockets (bench_stream --ws).
for kind in $KINDS; do
	case $kind in
	sse) flag= ;;
	ws) flag=--ws ;;
	*) die "BENCH_STREAM_KINDS: 'sse' or 'ws', not '$kind'" ;;
	esac
	start_serve
	echo "== $kind: serve at $url (server.threads ${THREADS:-default});" \
		"HTTP process $http_pid, descriptor limit" \
		"$(awk '/Max open files/ {print $4}' /proc/"$http_pid"/limits)"
	echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	rc=0
	"$BENCH_STREAM" "${url#http://}" "$token" --store .baton/baton.db \
		--pid "$http_pid" --clients "$CLIENTS" --events "$EVENTS" \
		--rate "$RATE" $flag || rc=$?
	echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	stop_serve
	[ "$rc" = 0 ] || die "bench_stream $flag failed (exit $rc)"
done
