#!/bin/sh
#
# bench/bench_pg.sh: baton's task queue on PostgreSQL side by side with
# graphile-worker and pg-boss (issue 6), all on one throwaway server.
#
# Starts a cluster with tools/pg.sh (stopped and removed at exit), then
# for each worker count W (1, 8, 32), in this order so that the three
# systems see the server in the same state:
#   - baton: build/bench/bench_queue --store ADMIN -w W: a drain of N
#     no-op tasks by W worker processes (claim + settle, two commits a
#     task), then enqueue-to-start latency with W idle workers woken
#     one per unit of work by one supervisor LISTENing on
#     store_watch_fd (SAMPLES tasks added one at a time); then the same
#     with --settle-claim (settle and next claim in one transaction: one
#     commit a task); then a drain with --batch BATCH (claims and settles
#     a batch at a time), beside graphile-worker's local queue; then
#     one process with -w 1 --batch W+1: W+1 tasks in flight in one
#     process, the shape of graphile-worker's local queue (one process
#     fetching W+1 jobs for its W slots), beside it, and the same with
#     --settle-claim (a batch's settles and the next batch's claims in
#     one transaction), and two such processes (-w 2): their
#     transactions overlap, as graphile-worker's fetches and completes
#     do on its pool's connections, and they hold 2W+2 tasks at most
#     where it holds 2W+1 (W+1 waiting in its queue, W running); then
#     --host 0 and --host BATCH: one process per host claims for its W
#     workers, settling what they finished and claiming in one
#     transaction a round (0: only for idle workers, beside
#     graphile-worker's two commits; BATCH: that many more waiting,
#     beside its local queue);
#   - graphile-worker: the peers' gw-bench.js with CONC=W (its worker
#     concurrency): process_default (one get_job and one complete_job
#     a job) and process_batched (a local queue), and its latency with
#     W idle slots woken by LISTEN/NOTIFY;
#   - pg-boss: the peers' pgboss-bench.mjs with CONC=W work() loops:
#     process_strict (batch 1: W jobs in flight, as baton's W workers)
#     and process_tuned (batch 100), and its latency with W idle loops
#     (pg-boss polls every 0.5 s).
# Each system makes a fresh database per run. Prints one table with the
# ratios and writes it, with every raw line, to bench/out/pg-<date>.txt.
#
# The peers' scripts are copied from BENCH_PG_PEERS into the work folder
# and `npm install` fetches their pinned versions there once (the
# shared folder may be read-only). Without node and npm, only baton's
# figures are printed.
#
# Environment:
#   BENCH_BUILD      build folder of make (default build): bench_queue
#                    is made there unless BENCH_QUEUE names one
#   BENCH_QUEUE      a bench_queue binary to use instead
#   BENCH_PG_N       tasks per drain, for all three (default 5000)
#   BENCH_PG_WORKERS worker counts (default "1 8 32")
#   BENCH_PG_SAMPLES latency samples for baton and graphile-worker
#                    (default 200)
#   BENCH_PG_BATCH   tasks per batch of each worker of baton's batched
#                    drain (default 16; graphile-worker's one local
#                    queue holds W+1)
#   BENCH_PG_BOSS_SAMPLES  for pg-boss (default 50: each takes ~0.5 s)
#   BENCH_PG_QUEUES  baton's queues: noarea, areas8 or both (default
#                    noarea; the peers have no areas)
#   BENCH_PG_PEERS   the peers' scripts (default ../shared/perf-peers)
#   BENCH_PG_WORK    work folder: peers and raw output (default
#                    BENCH_BUILD/bench/pg)
#   BENCH_TMPDIR     where the cluster goes (default $TMPDIR, /tmp): put
#                    it on the disk to measure, fsync is most of a commit
#
# About 8 minutes on a 2-CPU VM with the defaults, most of it pg-boss
# (its latency samples wait for a 0.5 s poll, and one loop of batch 1
# takes 2 jobs a second). Figures are printed, never judged; exit 1 if a
# step fails.

set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"

BENCH_BUILD=${BENCH_BUILD:-build}
N=${BENCH_PG_N:-5000}
WORKERS=${BENCH_PG_WORKERS:-1 8 32}
SAMPLES=${BENCH_PG_SAMPLES:-200}
BATCH=${BENCH_PG_BATCH:-16}
BOSS_SAMPLES=${BENCH_PG_BOSS_SAMPLES:-50}
QUEUES=${BENCH_PG_QUEUES:-noarea}
PEERS=${BENCH_PG_PEERS:-$(dirname "$root")/shared/perf-peers}
WORK=${BENCH_PG_WORK:-$root/$BENCH_BUILD/bench/pg}
tmpbase=${BENCH_TMPDIR:-${TMPDIR:-/tmp}}

die() {
	echo "bench_pg.sh: $*" >&2
	exit 1
}

if [ -z "${BENCH_QUEUE:-}" ]; then
	BENCH_QUEUE=$root/$BENCH_BUILD/bench/bench_queue
	make -s BUILD="$BENCH_BUILD" "$BENCH_BUILD/bench/bench_queue" >&2 ||
		die "cannot build bench_queue"
fi
[ -x "$BENCH_QUEUE" ] || die "no bench_queue at '$BENCH_QUEUE'"

stamp=$(date +%Y-%m-%dT%H%M%S)
raw=$WORK/$stamp
mkdir -p "$raw" bench/out
out=bench/out/pg-$stamp.txt

# The peers, in a folder we may write to; npm only when package.json
# changed or nothing is installed yet.
peers=""
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
	[ -f "$PEERS/gw-bench.js" ]; then
	mkdir -p "$WORK/peers"
	if ! cmp -s "$PEERS/package.json" "$WORK/peers/package.json"; then
		rm -rf "$WORK/peers/node_modules"
	fi
	for f in package.json common.js gw-bench.js pgboss-bench.mjs; do
		cp "$PEERS/$f" "$WORK/peers/$f"
		chmod u+w "$WORK/peers/$f"
	done
	if [ ! -d "$WORK/peers/node_modules" ]; then
		echo "bench_pg: npm install (pinned peers) ..." >&2
		(cd "$WORK/peers" && npm install --no-audit --no-fund >&2) ||
			die "npm install failed in $WORK/peers"
	fi
	peers=$WORK/peers
else
	echo "bench_pg: no node/npm or no peers at '$PEERS':" \
		"baton only" >&2
fi

cluster=$(mktemp -d "$tmpbase/baton-bench-pg.XXXXXX")
stop_cluster() {
	bash "$root/tools/pg.sh" stop "$cluster" >/dev/null 2>&1 || true
	rm -rf "$cluster"
}
trap stop_cluster EXIT
trap 'exit 1' INT TERM
admin=$(bash "$root/tools/pg.sh" start "$cluster") ||
	die "cannot start a cluster in $cluster"

{
	echo "baton PostgreSQL queue benchmark (bench/bench_pg.sh)," \
		"$(date '+%Y-%m-%d %H:%M:%S %Z')"
	echo "host: $(uname -srm), $(nproc) CPU," \
		"$(awk -F': ' '/^model name/ { print $2; exit }' \
			/proc/cpuinfo 2>/dev/null)"
	echo "baton: commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "server: $(psql -XAtc 'SELECT version()' "$admin" | cut -d, -f1)," \
		"data on $(stat -f -c %T "$cluster") ($cluster), settings of" \
		"tools/pg.sh (fsync=on, synchronous_commit=on," \
		"shared_buffers=256MB)"
	[ -z "$peers" ] || echo "node $(node --version);" \
		"$(cd "$peers" && node -p "'graphile-worker ' + require('graphile-worker/package.json').version + ', pg-boss ' + require('pg-boss/package.json').version")"
	echo "N=$N workers=[$WORKERS] latency samples: baton and" \
		"graphile-worker $SAMPLES, pg-boss $BOSS_SAMPLES"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out"
cat "$out" >&2

# queue_run FILE ARGS...: a drain (and its latency runs) of bench_queue with
# ARGS after the common ones, its output in $raw/FILE, both named in
# $raw/runs-W for the raw part of the output.
queue_run() {
	file=$1
	shift
	echo "$file $*" >>"$raw/runs-$w"
	echo "bench_pg: W=$w bench_queue $* ..." >&2
	"$BENCH_QUEUE" --store "$admin" -n "$N" -q "$QUEUES" "$@" \
		>"$raw/$file" 2>&1 ||
		{ cat "$raw/$file" >&2; die "bench_queue $* failed (W=$w)"; }
}
for w in $WORKERS; do
	: >"$raw/runs-$w"
	queue_run "baton-$w.txt" -w "$w" --samples "$SAMPLES"
	queue_run "baton-batched-$w.txt" -w "$w" --samples "$SAMPLES" \
		--settle-claim
	queue_run "baton-batch-$w.txt" -w "$w" --samples 0 --batch "$BATCH"
	queue_run "baton-local-$w.txt" -w 1 --samples 0 --batch $((w + 1))
	queue_run "baton-localsc-$w.txt" -w 1 --samples 0 --batch $((w + 1)) \
		--settle-claim
	queue_run "baton-local2sc-$w.txt" -w 2 --samples 0 \
		--batch $((w + 1)) --settle-claim
	for k in 0 "$BATCH"; do
		queue_run "baton-host$k-$w.txt" -w "$w" --samples 0 --host "$k"
	done
	[ -n "$peers" ] || continue
	echo "bench_pg: W=$w graphile-worker ..." >&2
	(cd "$peers" && PGBENCH_ADMIN_URL=$admin N=$N CONC=$w \
		LAT_SAMPLES=$SAMPLES node gw-bench.js) >"$raw/gw-$w.jsonl" ||
		die "gw-bench.js failed (W=$w): see $raw/gw-$w.jsonl"
	echo "bench_pg: W=$w pg-boss ..." >&2
	# batch 1 takes 2 jobs a second a loop: 10 s of it is enough
	(cd "$peers" && PGBENCH_ADMIN_URL=$admin N=$N CONC=$w \
		N_STRICT=$((20 * w)) LAT_SAMPLES=$BOSS_SAMPLES \
		node pgboss-bench.mjs) >"$raw/boss-$w.jsonl" ||
		die "pgboss-bench.mjs failed (W=$w): see $raw/boss-$w.jsonl"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out"

# Every figure as "system workers what value" lines: baton's key=value
# lines, the peers' JSON lines (through node).
facts=$raw/facts
: >"$facts"
# throughput SYS KEY FILE: the drain figure (claims_per_s_KEY_noarea_wW)
# of bench_queue's output FILE as the fact "SYS W jobs_per_s N".
throughput() {
	awk -v w="$w" -v sys="$1" -v key="  claims_per_s_$2_noarea_w" '
	index($0, key) == 1 {
		split($1, kv, "="); print sys, w, "jobs_per_s", kv[2] }
	' "$3" >>"$facts"
}
for w in $WORKERS; do
	awk -v w="$w" '
	/^  claims_per_s_postgres_noarea_w/ {
		split($1, kv, "="); print "baton", w, "jobs_per_s", kv[2] }
	/^  latency_postgres_w/ {
		for (i = 2; i <= NF; i++) {
			split($i, kv, "=")
			print "baton", w, "lat_" kv[1], kv[2]
		}
	}' "$raw/baton-$w.txt" >>"$facts"
	awk -v w="$w" '
	/^  claims_per_s_postgres_batched_noarea_w/ {
		split($1, kv, "="); print "batonb", w, "jobs_per_s", kv[2] }
	/^  latency_postgres_w/ {
		for (i = 2; i <= NF; i++) {
			split($i, kv, "=")
			print "batonb", w, "lat_" kv[1], kv[2]
		}
	}' "$raw/baton-batched-$w.txt" >>"$facts"
	throughput batonk postgres_batch "$raw/baton-batch-$w.txt"
	throughput batonl postgres_batch "$raw/baton-local-$w.txt"
	throughput batonm postgres_batchsc "$raw/baton-localsc-$w.txt"
	throughput batonn postgres_batchsc "$raw/baton-local2sc-$w.txt"
	throughput batonh postgres_host "$raw/baton-host0-$w.txt"
	throughput batonq postgres_hostq "$raw/baton-host$BATCH-$w.txt"
	[ -n "$peers" ] || continue
	cat "$raw/gw-$w.jsonl" "$raw/boss-$w.jsonl" | node -e '
		const w = process.argv[1];
		const lines = require("fs").readFileSync(0, "utf8").split("\n");
		for (const l of lines) {
			if (!l.startsWith("{")) continue;
			const r = JSON.parse(l);
			const sys = r.system.startsWith("graphile") ? "gw" : "boss";
			if (r.jobs_per_s !== undefined)
				console.log(sys, w, r.phase, r.jobs_per_s);
			if (r.p50 !== undefined)
				console.log(sys, w, r.phase + "_p50", r.p50,
					    "\n" + sys, w, r.phase + "_p99", r.p99);
		}' "$w" >>"$facts"
done

# The table: one row per system and W; ratios are baton's figure over the
# peer's (jobs/s: above 1 baton is faster; latency: below 1 it is).
awk -v workers="$WORKERS" -v batch="$BATCH" '
function get(s, w, k) { return ((s, w, k) in v) ? v[s, w, k] : "" }
function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%.2f", a / b) }
function lat(p50, p99) { return p50 == "" ? "-" : sprintf("%.2f / %.2f", p50, p99) }
function row(name, w, jobs, p50, p99,   bj, b50, b99) {
	bj = get("baton", w, "jobs_per_s")
	b50 = get("baton", w, "lat_p50_ms"); b99 = get("baton", w, "lat_p99_ms")
	printf "| %s | %d | %s | %s | %s | %s |\n", name, w,
	    jobs == "" ? "-" : sprintf("%.0f", jobs), lat(p50, p99),
	    name ~ /^baton/ ? "1" : ratio(bj, jobs),
	    name ~ /^baton/ || p50 == "" ? "-" : ratio(b50, p50) " / " ratio(b99, p99)
}
# settle+claim against graphile-worker: its two-commit mode for jobs/s,
# its latency
function brow(name, w,   bj, b50, b99, g50, g99) {
	bj = get("batonb", w, "jobs_per_s")
	b50 = get("batonb", w, "lat_p50_ms"); b99 = get("batonb", w, "lat_p99_ms")
	g50 = get("gw", w, "latency_enqueue_to_start_ms_p50")
	g99 = get("gw", w, "latency_enqueue_to_start_ms_p99")
	printf "| %s | %d | %s | %s | %s | %s |\n", name, w,
	    bj == "" ? "-" : sprintf("%.0f", bj), lat(b50, b99),
	    ratio(bj, get("gw", w, "process_default")),
	    g50 == "" ? "-" : ratio(b50, g50) " / " ratio(b99, g99)
}
# one host claiming for its W workers against the two commits of
# graphile-worker (sys batonh) or against its local queue (batonq)
function hrow(name, sys, peer, w,   bj) {
	bj = get(sys, w, "jobs_per_s")
	printf "| %s | %d | %s | - | %s | - |\n", name, w,
	    bj == "" ? "-" : sprintf("%.0f", bj),
	    ratio(bj, get("gw", w, peer)) \
	    (peer == "process_batched" ? " (vs local queue)" : "")
}
# the batches of baton (sys batonk: W workers, batonl: one process with
# W + 1 in flight, batonm: the same settling and claiming in one
# transaction, batonn: two such processes) against the local queue of
# graphile-worker
function krow(name, sys, w,   bj) {
	bj = get(sys, w, "jobs_per_s")
	printf "| %s | %d | %s | - | %s | - |\n", name, w,
	    bj == "" ? "-" : sprintf("%.0f", bj),
	    ratio(bj, get("gw", w, "process_batched")) " (vs local queue)"
}
{ v[$1, $2, $3] = $4 }
END {
	print "| system | workers | jobs/s | latency p50 / p99 ms | baton/peer jobs/s | baton/peer latency p50 / p99 |"
	print "|---|---:|---:|---:|---:|---:|"
	n = split(workers, ws, " ")
	for (i = 1; i <= n; i++) {
		w = ws[i]
		row("baton (W processes)", w, get("baton", w, "jobs_per_s"),
		    get("baton", w, "lat_p50_ms"), get("baton", w, "lat_p99_ms"))
		brow("baton (W, settle+claim)", w)
		krow("baton (W, batches of " batch ")", "batonk", w)
		krow("baton (one process, W + 1 in flight)", "batonl", w)
		krow("baton (one process, W + 1, settle+claim)", "batonm", w)
		krow("baton (two processes, W + 1 each, settle+claim)",
		    "batonn", w)
		hrow("baton (one host claims for W)", "batonh",
		    "process_default", w)
		hrow("baton (one host, W + " batch " waiting)", "batonq",
		    "process_batched", w)
		if (get("gw", w, "process_default") != "") {
			row("graphile-worker (concurrency W)", w,
			    get("gw", w, "process_default"),
			    get("gw", w, "latency_enqueue_to_start_ms_p50"),
			    get("gw", w, "latency_enqueue_to_start_ms_p99"))
			row("graphile-worker (W, local queue)", w,
			    get("gw", w, "process_batched"), "", "")
			row("pg-boss (W loops x batch 1)", w,
			    get("boss", w, "process_strict"),
			    get("boss", w, "latency_enqueue_to_start_ms_p50"),
			    get("boss", w, "latency_enqueue_to_start_ms_p99"))
			row("pg-boss (W loops x batch 100)", w,
			    get("boss", w, "process_tuned"), "", "")
		}
	}
	print ""
	print "| baton | workers | empty claims per task | wake-ups per task | add p50 ms | claim p50 ms |"
	print "|---|---:|---:|---:|---:|---:|"
	for (i = 1; i <= n; i++) {
		w = ws[i]
		printf "| two commits | %d | %s | %s | %s | %s |\n", w,
		    get("baton", w, "lat_empty_claims_per_task"),
		    get("baton", w, "lat_wakeups_per_task"),
		    get("baton", w, "lat_add_p50_ms"),
		    get("baton", w, "lat_claim_p50_ms")
		printf "| settle+claim | %d | %s | %s | %s | %s |\n", w,
		    get("batonb", w, "lat_empty_claims_per_task"),
		    get("batonb", w, "lat_wakeups_per_task"),
		    get("batonb", w, "lat_add_p50_ms"),
		    get("batonb", w, "lat_claim_p50_ms")
	}
}' "$facts" >"$raw/table.md"

{
	echo
	cat "$raw/table.md"
	echo
	echo "jobs/s: baton = claims+settles/s over a drain of $N tasks;" \
		"graphile-worker = process_default / process_batched;" \
		"pg-boss = process_strict (20 x W jobs) / process_tuned."
	echo "latency: enqueue call to claim return (baton) or handler" \
		"start (peers), idle workers; ratios below 1 mean baton is faster."
	for w in $WORKERS; do
		echo
		while read -r file args; do
			echo "== raw, W=$w: baton (bench_queue $args) =="
			cat "$raw/$file"
		done <"$raw/runs-$w"
		if [ -n "$peers" ]; then
			echo "== raw, W=$w: graphile-worker =="
			cat "$raw/gw-$w.jsonl"
			echo "== raw, W=$w: pg-boss =="
			cat "$raw/boss-$w.jsonl"
		fi
	done
} >>"$out"
cat "$raw/table.md"
echo
echo "written to $out (raw files in $raw)"
