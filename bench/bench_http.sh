#!/bin/sh
#
# bench/bench_http.sh: `baton serve`'s HTTP API and live stream under
# load, with bench_http (libcurl multi, one thread). A scratch repository
# with BENCH_HTTP_RUNS runs in its store (bench_http fill), `serve
# --workers 1` listening on a free loopback port (BATON_LISTEN=
# 127.0.0.1:0, the URL read from .baton/http.url), then:
#
#   get   for each C in BENCH_HTTP_CONNS: C keep-alive connections
#         issuing GET back to back for BENCH_HTTP_SECONDS, against
#         /api/v1/health (the floor: routing, auth, one small store read)
#         and /api/v1/runs (the 100 newest runs as JSON).
#   sse   BENCH_HTTP_CLIENTS streams on /api/v1/events, then
#         BENCH_HTTP_EVENTS events appended through the store by the
#         bench_http process itself, each its own transaction; the time
#         from the first append until every stream has every event.
#
# The config sets server.threads to BENCH_HTTP_THREADS (default: the
# clients plus 28), as when each open stream held a request thread (with
# civetweb, before issue 21); streams hold none now, and the figures stay
# comparable with the earlier ones. bench_stream.sh measures thousands.
#
# Environment: BATON_BIN, BENCH_HTTP (the bench_http binary),
# BENCH_TMPDIR, BENCH_HTTP_CONNS (default "1 8"), BENCH_HTTP_SECONDS (5),
# BENCH_HTTP_RUNS (100), BENCH_HTTP_CLIENTS (100), BENCH_HTTP_EVENTS
# (5000), BENCH_HTTP_THREADS, BENCH_HTTP_PATIENCE (60: seconds serve may
# take to start or stop). Everything talks to 127.0.0.1 only.
#
# Figures are reported, never asserted; the script stops (exit 1) when
# serve does not start or stop, or bench_http cannot run.

set -eu
BATON_BIN=${BATON_BIN:-$(pwd)/baton}
BENCH_HTTP=${BENCH_HTTP:-$(pwd)/build/bench/bench_http}
CONNS=${BENCH_HTTP_CONNS:-1 8}
SECONDS_EACH=${BENCH_HTTP_SECONDS:-5}
RUNS=${BENCH_HTTP_RUNS:-100}
CLIENTS=${BENCH_HTTP_CLIENTS:-100}
EVENTS=${BENCH_HTTP_EVENTS:-5000}
THREADS=${BENCH_HTTP_THREADS:-$((CLIENTS + 28))}
PATIENCE=${BENCH_HTTP_PATIENCE:-60}

tmp=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/baton-bench-http.XXXXXX")
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
	echo "bench_http.sh: $*" >&2
	exit 1
}

[ -x "$BATON_BIN" ] || die "no baton binary at '$BATON_BIN'"
[ -x "$BENCH_HTTP" ] || die "no bench_http at '$BENCH_HTTP'"
command -v curl >/dev/null || die "needs curl"

# The repository: an agent that answers at once (no task is queued, so
# it never runs), one-stage pipeline, the request threads the streams
# need.
git init -q "$tmp/repo"
cd "$tmp/repo"
git commit -q --allow-empty -m init
"$BATON_BIN" init >/dev/null
printf '#!/bin/sh\necho done\n' >"$tmp/agent"
chmod +x "$tmp/agent"
cat >.baton/config.yaml <<CFG
providers: {bench: {type: command, command: ["$tmp/agent"]}}
roles: {default: bench}
pipelines: {quick: {terminal: merge_ready, stages: [{name: execute, kind: execute}]}}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {judge: false}
server: {threads: $THREADS}
CFG
"$BENCH_HTTP" fill .baton/baton.db "$RUNS"

rm -f .baton/http.url
BATON_LISTEN=127.0.0.1:0 "$BATON_BIN" serve --workers 1 2>"$tmp/serve.log" &
serve_pid=$!
t=0
until [ -s .baton/http.url ]; do
	kill -0 "$serve_pid" 2>/dev/null ||
		{ cat "$tmp/serve.log" >&2; die "serve exited at start"; }
	t=$((t + 1))
	[ "$t" -lt $((PATIENCE * 100)) ] || die "serve wrote no .baton/http.url"
	sleep 0.01
done
url=$(sed 's:/*$::' .baton/http.url)
case $url in
http://127.0.0.1:*) ;;
*) die "serve listens on '$url', not on 127.0.0.1" ;;
esac
token=$(cat .baton/token)
t=0
until curl -sf --noproxy '*' -o /dev/null \
	-H "Authorization: Bearer $token" "$url/api/v1/health"; do
	t=$((t + 1))
	[ "$t" -lt $((PATIENCE * 10)) ] || die "$url/api/v1/health never answered"
	sleep 0.1
done
n=$(curl -sf --noproxy '*' -H "Authorization: Bearer $token" \
	"$url/api/v1/runs" | grep -o '"id": *"r[0-9]' | wc -l)
echo "serve at $url (server.threads $THREADS); GET /api/v1/runs" \
	"answers $n runs," \
	"$(curl -sf --noproxy '*' -o /dev/null -w '%{size_download}' \
		-H "Authorization: Bearer $token" "$url/api/v1/runs") bytes"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

: >"$tmp/keys"
for path in health runs; do
	for c in $CONNS; do
		"$BENCH_HTTP" get "$url/api/v1/$path" "$token" --conns "$c" \
			--seconds "$SECONDS_EACH" >"$tmp/get.out" ||
			echo "(bench_http get reported errors)"
		cat "$tmp/get.out"
		sed -n "s/^key: /get_${path}_c$c /p" "$tmp/get.out" >>"$tmp/keys"
		echo
	done
done
for c in $CONNS; do
	awk -v c="$c" '
		$1 == "get_health_c" c { split($2, a, "="); h = a[2] }
		$1 == "get_runs_c" c { split($2, a, "="); r = a[2] }
		END { if (h > 0) printf "GET /runs vs /health, %s connections:" \
			" %.2f of the floor\n", c, r / h }' "$tmp/keys"
done
if command -v wrk >/dev/null 2>&1; then
	echo
	for path in health runs; do
		echo "wrk -t1 -c8 -d${SECONDS_EACH}s $url/api/v1/$path"
		wrk -t1 -c8 -d"${SECONDS_EACH}s" \
			-H "Authorization: Bearer $token" "$url/api/v1/$path" ||
			true
	done
fi
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BENCH_HTTP" sse "$url/api/v1/events" "$token" --clients "$CLIENTS" \
	--events "$EVENTS" --store .baton/baton.db >"$tmp/sse.out" ||
	echo "(bench_http sse reported a failure)"
cat "$tmp/sse.out"
sed -n "s/^key: /sse_c${CLIENTS}_e$EVENTS /p" "$tmp/sse.out" >>"$tmp/keys"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# Stop: SIGTERM (drain), SIGTERM again, then wait.
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
echo
echo "key figures:"
cat "$tmp/keys"
