#!/bin/sh
#
# bench/dashboard_10k.sh: the web dashboard with 10,000 tasks, measured in
# headless Chromium (bench/dashboard_10k.mjs): time to the first board
# render, time until the page is idle, the longest main-thread task, the
# JS heap, the DOM size, the time to add a task from the form until its
# card shows, and "show more". Figures are printed, never asserted.
#
# The repository: 10,000 queued tasks, 150 of them then cancelled (so two
# columns page). The tasks go in through the store with `bench_queue
# --fill` when that binary is there (bench/run.sh builds it; about a
# second), else with `baton task add` in a loop (about 70 a second on a
# 2-CPU VM: 2-3 minutes). `baton serve --workers 1` serves HTTP on a free
# port; its one worker's agent blocks (sleeping, no CPU) until the end,
# so one task shows as running and the rest stay queued.
#
# Environment: BATON_BIN (./baton), BENCH_QUEUE (build/bench/bench_queue),
# BENCH_DASH_TASKS (10000), BENCH_DASH_FILL (auto, queue or cli),
# BENCH_DASH_ROUNDS (3 page loads), BENCH_TMPDIR, BATON_CHROMIUM
# (/usr/bin/chromium), BATON_PLAYWRIGHT (.agents/node_modules/playwright-core,
# installed by tools/agents.sh).

set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
BATON_BIN=${BATON_BIN:-$root/baton}
BENCH_QUEUE=${BENCH_QUEUE:-$root/build/bench/bench_queue}
N=${BENCH_DASH_TASKS:-10000}
FILL=${BENCH_DASH_FILL:-auto}
CHROMIUM=${BATON_CHROMIUM:-/usr/bin/chromium}
PLAYWRIGHT=${BATON_PLAYWRIGHT:-$root/.agents/node_modules/playwright-core}

die() {
	echo "dashboard_10k.sh: $*" >&2
	exit 1
}

case $BATON_BIN in /*) ;; *) BATON_BIN=$PWD/$BATON_BIN ;; esac
case $BENCH_QUEUE in /*) ;; *) BENCH_QUEUE=$PWD/$BENCH_QUEUE ;; esac
[ -x "$BATON_BIN" ] || die "no baton binary at '$BATON_BIN'"
[ -x "$CHROMIUM" ] || die "no Chromium at '$CHROMIUM' (tools/deps.sh)"
[ -f "$PLAYWRIGHT/index.mjs" ] || die "no playwright-core in '$PLAYWRIGHT' (tools/agents.sh)"
command -v node >/dev/null || die "needs node"
command -v jq >/dev/null || die "needs jq"

tmp=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/baton-bench-dash.XXXXXX")
serve_pid=
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com

cleanup() {
	: >"$tmp/go"
	if [ -n "$serve_pid" ]; then
		kill -TERM "$serve_pid" 2>/dev/null || true
		i=0
		while kill -0 "$serve_pid" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -9 "$serve_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The agent: sleeps until $tmp/go exists.
cat >"$tmp/agent" <<EOF
#!/bin/sh
while [ ! -e "$tmp/go" ]; do sleep 0.5; done
echo done
EOF
chmod +x "$tmp/agent"

repo=$tmp/repo
mkdir -p "$repo"
cd "$repo"
git init -q
echo bench >README
git add README
git commit -q -m init
"$BATON_BIN" init >/dev/null
cat >.baton/config.yaml <<EOF
providers:
  block: {type: command, command: ["$tmp/agent"]}
roles: {default: block}
pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {judge: false}
EOF

if [ "$FILL" = auto ]; then
	if [ -x "$BENCH_QUEUE" ]; then FILL=queue; else FILL=cli; fi
fi
t0=$(date +%s%N)
case $FILL in
queue)
	"$BENCH_QUEUE" --fill .baton/baton.db "$N" >/dev/null ||
		die "bench_queue --fill failed"
	;;
cli)
	i=1
	while [ $i -le "$N" ]; do
		"$BATON_BIN" task add "bench task $i: add a --version flag" >/dev/null ||
			die "task add $i failed"
		i=$((i + 1))
	done
	;;
*) die "BENCH_DASH_FILL must be auto, queue or cli" ;;
esac
t1=$(date +%s%N)
echo "filled: $N tasks with $( [ "$FILL" = queue ] && echo "bench_queue --fill (through the store)" || echo "baton task add") in $(((t1 - t0) / 1000000)) ms"
i=1
while [ $i -le 150 ]; do
	"$BATON_BIN" task cancel $((N - 200 - i)) >/dev/null 2>&1 || die "task cancel failed"
	i=$((i + 1))
done

BATON_LISTEN=127.0.0.1:0 "$BATON_BIN" serve --workers 1 >"$tmp/serve.out" 2>&1 &
serve_pid=$!
i=0
until [ -s .baton/http.url ] && grep -q 'dashboard at' "$tmp/serve.out"; do
	kill -0 "$serve_pid" 2>/dev/null || { cat "$tmp/serve.out" >&2; die "serve exited"; }
	[ $i -lt 300 ] || die "serve did not start its HTTP server"
	sleep 0.1
	i=$((i + 1))
done
url=$(cat .baton/http.url)
i=0
until [ "$(curl -s -H "Authorization: Bearer $(cat .baton/token)" "${url}api/v1/tasks?limit=1" | jq -r '.counts.running')" = 1 ]; do
	[ $i -lt 300 ] || die "no task started running"
	sleep 0.1
	i=$((i + 1))
done
echo "serve: $url ($(uname -m), $(nproc) CPUs, $("$CHROMIUM" --version 2>/dev/null | head -n 1))"

BATON_DASH_URL=$url BATON_DASH_TOKEN=$(cat .baton/token) \
	BATON_PLAYWRIGHT=$PLAYWRIGHT BATON_CHROMIUM=$CHROMIUM \
	node "$root/bench/dashboard_10k.mjs"
