#!/bin/sh
#
# bench/run.sh: builds bench_store, bench_queue and bench_http against
# the library (make bench-bins), runs the store benchmark, a raw-SQLite reference (the
# sqlite3 CLI doing as many single-row INSERTs, each its own transaction,
# with synchronous=FULL and WAL on the same disk), the `baton status`
# benchmark, the orchestration overhead, a parallel review group
# (bench_groups.sh), the guard around agent calls (bench_guard.sh), loading
# a config with big pipelines (bench_config.sh), the task queue
# (bench_queue),
# `baton serve` end to end (bench_serve.sh), serve's HTTP API and live
# stream (bench_http.sh, with bench_http), 10,000 SSE clients on one
# serve (bench_stream.sh, with bench_stream) and a forge sync against the
# GitHub double (bench_forge.sh, with bench_forge) and the redraw of
# `baton tui` with 1,000 tasks (bench_tui); writes everything to
# bench/out/<date>.txt and prints it. `make bench` runs it.
#
# Environment:
#   BATON_BIN     the baton binary (default: ./baton at the top)
#   BENCH_N       transitions and creations per workload (default 2000)
#   BENCH_RUNS    runs for the list and status benchmarks (default 10000)
#   BENCH_TASKS   tasks per queue drain in bench_queue (default 2000)
#   BENCH_TMPDIR  where the databases go (default $TMPDIR, else /tmp);
#                 put it on the disk your repositories live on
#   BENCH_BUILD   make's build folder (default build): the benchmarks
#                 are built into BENCH_BUILD/bench/ by make bench-bins
#
# Figures are reported, never asserted: the exit status is 0 unless a
# step could not run at all.

set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"

BATON_BIN=${BATON_BIN:-$root/baton}
N=${BENCH_N:-2000}
RUNS=${BENCH_RUNS:-10000}
tmpbase=${BENCH_TMPDIR:-${TMPDIR:-/tmp}}
TASKS=${BENCH_TASKS:-2000}
BENCH_BUILD=${BENCH_BUILD:-build}
BENCH_STORE=$root/$BENCH_BUILD/bench/bench_store
BENCH_QUEUE=$root/$BENCH_BUILD/bench/bench_queue
BENCH_HTTP=$root/$BENCH_BUILD/bench/bench_http
BENCH_FORGE=$root/$BENCH_BUILD/bench/bench_forge
BENCH_STREAM=$root/$BENCH_BUILD/bench/bench_stream
BENCH_TUI=$root/$BENCH_BUILD/bench/bench_tui

die() {
	echo "bench/run.sh: $*" >&2
	exit 1
}

[ -x "$BATON_BIN" ] || die "no baton binary at '$BATON_BIN': run make"

# One recipe for the benchmarks, the Makefile's (the same flags and
# libraries as baton); a no-op under make bench, which built them.
mkdir -p bench/out
make -s BUILD="$BENCH_BUILD" bench-bins >&2 ||
	die "cannot build the benchmarks (make BUILD=$BENCH_BUILD bench-bins)"

out=bench/out/$(date +%Y-%m-%dT%H%M%S).txt
part=$(mktemp "$tmpbase/baton-bench-part.XXXXXX")
trap 'rm -f "$part"' EXIT INT TERM

# section TITLE: a heading in the results file.
section() {
	printf '\n== %s ==\n\n' "$1" >>"$out"
}

# script_part NAME: runs bench/NAME.sh with the binary and the temporary
# folder, its output appended to the report (and the run stopped, the
# report kept, when it fails).
script_part() {
	BATON_BIN=$BATON_BIN BENCH_TMPDIR=$tmpbase sh "bench/$1.sh" \
		>"$part" 2>&1 || { cat "$part" >>"$out"; die "$1.sh failed: see $out"; }
	cat "$part" >>"$out"
}

{
	echo "baton benchmarks, $(date '+%Y-%m-%d %H:%M:%S %Z')"
	echo "host: $(uname -srm), $(nproc) CPU," \
		"$(awk -F': ' '/^model name/ { print $2; exit }' \
			/proc/cpuinfo 2>/dev/null)"
	echo "baton: $("$BATON_BIN" version 2>/dev/null | head -n 1)," \
		"commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "databases under: $tmpbase ($(stat -f -c %T "$tmpbase"))"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out"

echo "bench: store (bench_store -n $N -l $RUNS) ..." >&2
section "store: bench_store -n $N -l $RUNS"
"$BENCH_STORE" -n "$N" -l "$RUNS" -d "$tmpbase" >>"$out" 2>&1 ||
	die "bench_store failed: see $out"

echo "bench: raw sqlite3 reference ..." >&2
section "reference: sqlite3 CLI, $N single-row INSERTs, each its own transaction"
if command -v sqlite3 >/dev/null 2>&1; then
	refdir=$(mktemp -d "$tmpbase/baton-sqlite-ref.XXXXXX")
	db=$refdir/ref.db
	pragmas="PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
	sqlite3 "$db" "$pragmas CREATE TABLE events (seq INTEGER PRIMARY KEY,
		run_id TEXT, ts INTEGER, type TEXT, from_status TEXT,
		to_status TEXT);" >/dev/null
	awk -v n="$N" -v p="$pragmas" 'BEGIN {
		print p
		for (i = 1; i <= n; i++)
			printf "INSERT INTO events (run_id, ts, type, " \
			       "from_status, to_status) VALUES " \
			       "(\047r1-bench\047, %d, \047transition\047, " \
			       "\047reviewing\047, \047fixing\047);\n", i
	}' >"$refdir/ins.sql"
	# Three rounds, each on a fresh table; the start-up of sqlite3 is
	# timed alone and taken off. The median round is the reference:
	# fsync latency on a shared disk wanders from run to run.
	v=$(sqlite3 --version | awk '{ print $1 }')
	: >"$refdir/rates"
	for round in 1 2 3; do
		sqlite3 "$db" "DELETE FROM events; VACUUM;" >/dev/null
		t0=$(date +%s%N)
		sqlite3 "$db" "$pragmas SELECT 1;" >/dev/null
		t1=$(date +%s%N)
		sqlite3 "$db" <"$refdir/ins.sql" >/dev/null
		t2=$(date +%s%N)
		rows=$(sqlite3 "$db" "SELECT COUNT(*) FROM events;")
		[ "$rows" -eq "$N" ] ||
			die "sqlite3 reference wrote $rows rows, not $N"
		ns=$(((t2 - t1) - (t1 - t0)))
		awk -v n="$N" -v ns="$ns" 'BEGIN {
			printf "%.1f\n", n / (ns / 1e9) }' >>"$refdir/rates"
		awk -v n="$N" -v ns="$ns" -v v="$v" -v r="$round" 'BEGIN {
			printf "round %d, sqlite3 %s: %d INSERTs in %.1f ms: " \
			       "%.1f commits/s, %.1f us each\n", r, v, n,
			       ns / 1e6, n / (ns / 1e9), ns / 1e3 / n }' >>"$out"
	done
	echo "raw_commits_per_s=$(sort -n "$refdir/rates" | sed -n 2p)" \
		"(the median round)" >>"$out"
	rm -rf "$refdir"
	raw=$(awk -F'[= ]' '/^raw_commits_per_s=/ { print $2 }' "$out")
	for k in 1run 100runs; do
		baton=$(awk -F= "/^transitions_per_s_$k=/ { print \$2 }" "$out")
		awk -v b="$baton" -v r="$raw" -v k="$k" 'BEGIN {
			printf "baton transitions (%s) / raw sqlite commits: " \
			       "%.2f\n", k, b / r }' >>"$out"
	done
else
	echo "skipped: no sqlite3 CLI (apt-get install sqlite3)" >>"$out"
fi

echo "bench: baton status with $RUNS runs ..." >&2
section "baton status with $RUNS runs"
BATON_BIN=$BATON_BIN BENCH_STORE=$BENCH_STORE BENCH_RUNS=$RUNS \
	BENCH_TMPDIR=$tmpbase sh bench/bench_status.sh >"$part" 2>&1 ||
	{ cat "$part" >>"$out"; die "bench_status.sh failed: see $out"; }
cat "$part" >>"$out"

echo "bench: orchestration overhead per run ..." >&2
section "orchestration overhead: baton run with an instant agent"
script_part bench_overhead

echo "bench: a parallel review group against three in sequence ..." >&2
section "bug-fix review groups: three 3 s code reviews, parallel and in sequence"
script_part bench_groups

echo "bench: what the guard and the checkpoint cost ..." >&2
section "the guard around agent calls and the checkpoint: 10 and 20000 files"
script_part bench_guard

echo "bench: loading a config with big pipelines ..." >&2
section "config load: pipelines of 250 to 1000 stages, 1 to 16 of them"
script_part bench_config

echo "bench: task queue (bench_queue -n $TASKS) ..." >&2
section "task queue: bench_queue -n $TASKS"
"$BENCH_QUEUE" -n "$TASKS" -d "$tmpbase" >>"$out" 2>&1 ||
	die "bench_queue failed: see $out"

echo "bench: baton tui redraw with 1000 tasks (bench_tui) ..." >&2
section "terminal UI redraw: bench_tui -t 1000"
"$BENCH_TUI" -t 1000 -d "$tmpbase" >>"$out" 2>&1 ||
	die "bench_tui failed: see $out"

echo "bench: baton serve end to end ..." >&2
section "baton serve end to end: bench_serve.sh"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out"
BATON_BIN=$BATON_BIN BENCH_QUEUE=$BENCH_QUEUE BENCH_TMPDIR=$tmpbase \
	sh bench/bench_serve.sh >"$part" 2>&1 ||
	{ cat "$part" >>"$out"; die "bench_serve.sh failed: see $out"; }
cat "$part" >>"$out"

echo "bench: HTTP API and live stream ..." >&2
section "HTTP API and live stream: bench_http.sh"
BATON_BIN=$BATON_BIN BENCH_HTTP=$BENCH_HTTP BENCH_TMPDIR=$tmpbase \
	sh bench/bench_http.sh >"$part" 2>&1 ||
	{ cat "$part" >>"$out"; die "bench_http.sh failed: see $out"; }
cat "$part" >>"$out"

echo "bench: 10,000 SSE clients on one serve ..." >&2
section "thousands of watchers: SSE and WebSocket clients on one serve (bench_stream.sh)"
BATON_BIN=$BATON_BIN BENCH_STREAM=$BENCH_STREAM BENCH_TMPDIR=$tmpbase \
	sh bench/bench_stream.sh >"$part" 2>&1 ||
	{ cat "$part" >>"$out"; die "bench_stream.sh failed: see $out"; }
cat "$part" >>"$out"

echo "bench: forge sync against the GitHub double ..." >&2
section "forge sync: 1000 labelled issues, 100 open PRs, against the GitHub double (bench_forge.sh)"
BATON_BIN=$BATON_BIN BENCH_FORGE=$BENCH_FORGE BENCH_TMPDIR=$tmpbase \
	sh bench/bench_forge.sh >"$part" 2>&1 ||
	{ cat "$part" >>"$out"; die "bench_forge.sh failed: see $out"; }
cat "$part" >>"$out"

cat "$out"
echo
echo "written to $out"
