#!/bin/sh
#
# bench/bench_serve.sh: `baton serve` end to end, with agents that cost
# nothing, on a one-stage pipeline (execute only, no validation, no
# judge), so what is left is baton: the wake-up, the claim, the run's
# worktree and commits, the settle. Four parts:
#
#   latency     for each W in BENCH_SERVE_WORKERS: `serve --workers W`
#               idle, then BENCH_SERVE_LAT tasks added one at a time with
#               `baton task add`, each 100 ms after the one before it
#               finished (so each lands on an idle pool); enqueue-to-start
#               is task_claimed.ts - task_added.ts from `baton events`.
#   throughput  for each W: BENCH_SERVE_TP tasks queued up front, then
#               `serve --workers W --exit-when-idle`; tasks/s from serve's
#               start to the last task_settled event (serve notices it is
#               idle only at its next periodic sweep: that lag is printed
#               apart).
#   memory      BENCH_SERVE_MEM queued tasks (bench_queue --fill), serve
#               --workers 4 with agents that block; once 4 agents run and
#               a periodic sweep has passed, VmRSS, VmHWM and Pss of the
#               supervisor and of each worker, and the supervisor's CPU
#               time meanwhile. The same with 4 tasks queued, to compare.
#   recovery    BENCH_SERVE_INFLIGHT tasks, serve --workers as many, every
#               agent blocked; kill -9 of serve (the workers die with it,
#               the agents are killed as a crash would), a new serve, and
#               the time until every run has a stage_started event again.
#
# With BENCH_SERVE_STORE, a PostgreSQL admin URL (tools/pg.sh start
# prints one), every repository gets a fresh database on that server as
# its store (its config's `store:`), and the tasks of the throughput
# part are added with `baton task add` rather than --fill (which writes
# SQLite); only the latency and throughput parts run there.
#
# Environment: BATON_BIN, BENCH_QUEUE (the bench_queue binary, for its
# --fill), BENCH_TMPDIR, BENCH_SERVE_STORE, BENCH_SERVE_WORKERS (default
# "1 4 16"), BENCH_SERVE_LAT (50), BENCH_SERVE_TP (200), BENCH_SERVE_MEM
# (10000), BENCH_SERVE_INFLIGHT (100), BENCH_SERVE_PARTS (default "latency
# throughput memory recovery"), BENCH_SERVE_PATIENCE (120: seconds any
# wait may take before the script calls it a hang). Needs jq, pgrep and
# GNU tail (--pid).
#
# Figures are reported, never asserted. The script stops (exit 1) with a
# message when baton does not do what the measurement needs: a task that
# does not finish in time, a wrong count, a serve that does not exit.

set -eu
BATON_BIN=${BATON_BIN:-$(pwd)/baton}
BENCH_QUEUE=${BENCH_QUEUE:-$(pwd)/build/bench/bench_queue}
WORKERS=${BENCH_SERVE_WORKERS:-1 4 16}
LAT_N=${BENCH_SERVE_LAT:-50}
TP_N=${BENCH_SERVE_TP:-200}
MEM_N=${BENCH_SERVE_MEM:-10000}
FLIGHT=${BENCH_SERVE_INFLIGHT:-100}
PARTS=${BENCH_SERVE_PARTS:-latency throughput memory recovery}
STORE=${BENCH_SERVE_STORE:-}
# Waits give up after this many seconds: then something hangs.
PATIENCE=${BENCH_SERVE_PATIENCE:-120}

tmp=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/baton-bench-serve.XXXXXX")
serve_pid=
gate_pid=
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com

# Releases blocked agents, kills what this script started (the serve by
# its pid, the agents by their process groups) and removes the scratch.
cleanup() {
	gate_open
	if [ -n "$serve_pid" ]; then
		kill -9 "$serve_pid" 2>/dev/null || true
	fi
	kill_agents 2>/dev/null || true
	while [ -n "$STORE" ] && [ "${dbs:-0}" -gt 0 ]; do
		psql -q -X "$STORE" -c \
			"DROP DATABASE IF EXISTS baton_bench_serve_$$_$dbs WITH (FORCE)" \
			>/dev/null 2>&1 || true
		dbs=$((dbs - 1))
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

die() {
	echo "bench_serve.sh: $*" >&2
	exit 1
}

[ -x "$BATON_BIN" ] || die "no baton binary at '$BATON_BIN'"
command -v jq >/dev/null || die "needs jq"
if [ -n "$STORE" ]; then
	command -v psql >/dev/null || die "BENCH_SERVE_STORE needs psql"
	for part in $PARTS; do
		case $part in
		latency | throughput) ;;
		*) die "the $part part runs on SQLite only (BENCH_SERVE_STORE)" ;;
		esac
	done
fi
dbs=0

# The agents. instant answers at once; block waits, without spending
# CPU (a hundred agents polling with sleep(1) would fork thousands of
# times a second and slow what is measured), until the gate process
# named in $tmp/gate.pid exits, so a run stays in its stage for as long
# as the benchmark needs.
cat >"$tmp/agent-instant" <<'AGENT'
#!/bin/sh
echo done
AGENT
cat >"$tmp/agent-block" <<AGENT
#!/bin/sh
if g=\$(cat "$tmp/gate.pid" 2>/dev/null); then
	tail -s 0.1 --pid="\$g" -f /dev/null
fi
echo done
AGENT
chmod +x "$tmp/agent-instant" "$tmp/agent-block"

# gate_close: from now on blocking agents wait (for a sleep we started).
gate_close() {
	sleep 100000 &
	gate_pid=$!
	echo "$gate_pid" >"$tmp/gate.pid"
}

# gate_open: releases every blocking agent, present and future.
gate_open() {
	rm -f "$tmp/gate.pid"
	if [ -n "$gate_pid" ]; then
		kill "$gate_pid" 2>/dev/null || true
		wait "$gate_pid" 2>/dev/null || true
	fi
	gate_pid=
}

now_ms() {
	date +%s%3N
}

# new_repo NAME AGENT: a scratch git repository with baton initialised
# and the one-stage pipeline; cds into it. No sandbox: inside bubblewrap
# an agent has a /tmp and pids of its own, where the gate (a pid in
# $tmp/gate.pid) cannot reach it, and it would not block; what is
# measured here is baton, not bubblewrap.
new_repo() {
	rm -rf "${tmp:?}/$1"
	git init -q "$tmp/$1"
	cd "$tmp/$1"
	git commit -q --allow-empty -m init
	"$BATON_BIN" init >/dev/null
	cat >.baton/config.yaml <<CFG
providers: {bench: {type: command, command: ["$tmp/agent-$2"]}}
roles: {default: bench}
pipelines: {quick: {terminal: merge_ready, stages: [{name: execute, kind: execute}]}}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {judge: false}
execution: {sandbox: none}
CFG
	if [ -n "$STORE" ]; then
		dbs=$((dbs + 1))
		db="baton_bench_serve_$$_$dbs"
		psql -q -X -v ON_ERROR_STOP=1 "$STORE" -c "CREATE DATABASE $db" ||
			die "cannot create database $db on $STORE"
		echo "store: ${STORE%/*}/$db" >>.baton/config.yaml
	fi
}

# add_tasks N: N queued tasks in the store of the repository here.
add_tasks() {
	if [ -z "$STORE" ]; then
		"$BENCH_QUEUE" --fill .baton/baton.db "$1" >/dev/null
		return
	fi
	i=1
	while [ "$i" -le "$1" ]; do
		"$BATON_BIN" task add "task $i" >/dev/null ||
			die "cannot add task $i"
		i=$((i + 1))
	done
}

# start_serve LOG ARGS...: starts `baton serve ARGS` in the background
# and waits until its wake-up FIFO exists (its first sweep is done and
# its workers are starting).
start_serve() {
	log=$1
	shift
	# any free port: a serve elsewhere on 7070 must not stop the bench
	BATON_LISTEN=127.0.0.1:0 "$BATON_BIN" serve "$@" 2>"$log" &
	serve_pid=$!
	t=0
	while [ ! -p ".baton/wake.d/$serve_pid" ]; do
		kill -0 "$serve_pid" 2>/dev/null ||
			{ cat "$log" >&2; die "serve $* exited at start"; }
		t=$((t + 1))
		[ "$t" -lt $((PATIENCE * 100)) ] || die "serve $* never started"
		sleep 0.01
	done
}

# stop_serve: SIGTERM (drain), then SIGTERM again (stop the workers),
# and waits for it to exit.
stop_serve() {
	kill -TERM "$serve_pid" 2>/dev/null || true
	sleep 0.2
	kill -TERM "$serve_pid" 2>/dev/null || true
	wait_serve
}

# wait_serve: waits (at most PATIENCE s) for the serve to exit.
wait_serve() {
	t=0
	while kill -0 "$serve_pid" 2>/dev/null; do
		t=$((t + 1))
		[ "$t" -lt $((PATIENCE * 20)) ] ||
			die "serve (pid $serve_pid) did not exit within ${PATIENCE} s"
		sleep 0.05
	done
	wait "$serve_pid" 2>/dev/null || true
	serve_pid=
}

# agent_pids: the pids of the blocking agents now running (their
# command line names this script's own scratch directory).
agent_pids() {
	pgrep -f "^/bin/sh $tmp/agent-block" || true
}

# kill_agents: kills every blocking agent's process group (each agent
# is the leader of its own: baton starts it with setsid).
kill_agents() {
	for p in $(agent_pids); do
		kill -9 -- "-$p" 2>/dev/null || kill -9 "$p" 2>/dev/null || true
	done
}

# wait_agents N: waits until N blocking agents are running.
wait_agents() {
	t=0
	while [ "$(agent_pids | wc -l)" -lt "$1" ]; do
		kill -0 "$serve_pid" 2>/dev/null || die "serve exited early"
		t=$((t + 1))
		[ "$t" -lt $((PATIENCE * 10)) ] ||
			die "only $(agent_pids | wc -l) of $1 agents started" \
				"within ${PATIENCE} s"
		sleep 0.1
	done
}

# task_status ID
task_status() {
	"$BATON_BIN" task show "$1" --json | jq -r .status
}

# count_status STATUS: how many tasks have it.
count_status() {
	"$BATON_BIN" task list --status="$1" --json | jq length
}

# The events as TSV "type task run seq ts_ms" (run "-" when none).
events_tsv() {
	"$BATON_BIN" events --all --json | jq -r '[.type, (.task // 0),
		(.run // "-"), .seq, ((.ts[0:19] + "Z" | fromdateiso8601)
		* 1000 + (.ts[20:23] | tonumber))] | @tsv'
}

# stats: reads numbers, one a line; prints "n p50 p99 max mean".
stats() {
	sort -n | awk '{ v[NR] = $1; s += $1 } END {
		if (!NR) { print "0 0 0 0 0"; exit }
		r50 = int((NR * 50 + 99) / 100); r99 = int((NR * 99 + 99) / 100)
		printf "%d %g %g %g %.1f\n", NR, v[r50], v[r99], v[NR], s / NR }'
}

# ---- latency -------------------------------------------------------------

bench_latency() {
	echo "enqueue-to-start: $LAT_N tasks added one at a time to an idle"
	echo "serve (each 100 ms after the previous one finished);"
	echo "latency = task_claimed.ts - task_added.ts (ms, from baton events)"
	echo
	printf '%-8s %5s %8s %8s %8s %8s\n' workers tasks "p50 ms" "p99 ms" \
		"max ms" "mean ms"
	for w in $WORKERS; do
		new_repo "lat$w" instant
		start_serve "$tmp/lat$w.log" --workers "$w"
		sleep 1 # every worker has looked, found nothing, gone idle
		i=1
		while [ "$i" -le "$LAT_N" ]; do
			"$BATON_BIN" task add "latency probe $i" >/dev/null
			t=0
			while [ "$(task_status "$i")" != "done" ]; do
				t=$((t + 1))
				[ "$t" -lt $((PATIENCE * 50)) ] ||
					die "task $i (serve --workers $w) not done" \
						"after ${PATIENCE} s: status" \
						"$(task_status "$i")"
				sleep 0.02
			done
			sleep 0.1
			i=$((i + 1))
		done
		stop_serve
		events_tsv | awk -F'\t' '
			$1 == "task_added" { add[$2] = $5 }
			$1 == "task_claimed" && !($2 in claim) { claim[$2] = $5 }
			END { for (t in add) if (t in claim) print claim[t] - add[t] }
		' >"$tmp/lat$w.ms"
		# shellcheck disable=SC2046 # the four figures, split
		set -- $(stats <"$tmp/lat$w.ms")
		[ "$1" -eq "$LAT_N" ] ||
			die "serve --workers $w: $1 of $LAT_N tasks have a claim event"
		printf '%-8s %5s %8s %8s %8s %8s\n' "$w" "$1" "$2" "$3" "$4" "$5"
		echo "enqueue_to_start_w$w p50_ms=$2 p99_ms=$3" >>"$tmp/keys"
		cd "$tmp"
	done
	echo "(nearest rank: with fewer than 100 samples p99 is the largest; ts have 1 ms resolution)"
}

# ---- throughput ----------------------------------------------------------

bench_throughput() {
	echo "throughput: $TP_N tasks queued up front (bench_queue --fill, or"
	echo "baton task add on PostgreSQL), then"
	echo "serve --workers W --exit-when-idle; tasks/s over serve's start to"
	echo "the last task_settled event; exit lag = the last settle to exit"
	echo
	printf '%-8s %6s %8s %8s %10s %13s\n' workers tasks "busy s" \
		"tasks/s" "exit lag s" "per task p50"
	for w in $WORKERS; do
		new_repo "tp$w" instant
		add_tasks "$TP_N"
		t0=$(now_ms)
		BATON_LISTEN=127.0.0.1:0 "$BATON_BIN" serve --workers "$w" \
			--exit-when-idle 2>"$tmp/tp$w.log" || {
			cat "$tmp/tp$w.log" >&2
			die "serve --workers $w --exit-when-idle failed"
		}
		t1=$(now_ms)
		done_n=$(count_status "done")
		[ "$done_n" -eq "$TP_N" ] ||
			die "serve --workers $w: $done_n of $TP_N tasks done"
		events_tsv >"$tmp/tp$w.tsv"
		last=$(awk -F'\t' '$1 == "task_settled" && $5 > m { m = $5 }
			END { print m }' "$tmp/tp$w.tsv")
		per=$(awk -F'\t' '
			$1 == "task_claimed" { c[$2] = $5 }
			$1 == "task_settled" { s[$2] = $5 }
			END { for (t in s) print s[t] - c[t] }' "$tmp/tp$w.tsv" |
			stats | cut -d' ' -f2)
		awk -v n="$TP_N" -v w="$w" -v busy="$((last - t0))" \
			-v lag="$((t1 - last))" -v per="$per" -v keys="$tmp/keys" '
			BEGIN {
				printf "%-8s %6d %8.2f %8.1f %10.2f %10s ms\n", w, n,
				       busy / 1000, n / (busy / 1000), lag / 1000, per
				printf "tasks_per_s_w%d=%.1f exit_lag_ms=%d\n", w,
				       n / (busy / 1000), lag >>keys
			}'
		cd "$tmp"
		rm -rf "${tmp:?}/tp$w"
	done
	echo "(per task: task_claimed to task_settled of one task; the exit lag"
	echo " is serve noticing it is idle, at its next periodic sweep)"
}

# ---- memory --------------------------------------------------------------

# cpu_ticks PID: user + system CPU time of PID so far, in clock ticks.
cpu_ticks() {
	sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# rss_report LABEL: VmRSS and VmHWM (from /proc/PID/status) and Pss
# (from smaps_rollup: shared pages split among their users) of the
# serve and of each of its processes. Each names its role in its comm
# (baton worker, baton http, baton notify, baton forge): serve has more
# children than workers (the HTTP server; the webhook notifier with
# webhooks; the forge companion with a forge), so the workers are counted
# by name, and only live ones: a worker that has exited and is not yet
# reaped (state Z) keeps its name, and serve may already have started
# the one that replaces it.
rss_report() {
	kids=$(ps -o pid= --ppid "$serve_pid" | tr -s ' \n' '  ')
	nk=0
	for p in $serve_pid $kids; do
		[ -r "/proc/$p/status" ] || continue
		state=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null |
			awk '{ print $1 }')
		[ "$state" = Z ] && continue
		case $(cat "/proc/$p/comm" 2>/dev/null) in
		"baton worker") role=worker ;;
		"baton http") role=http ;;
		"baton notify") role=notify ;;
		"baton forge") role=forge ;;
		*) role=other ;;
		esac
		[ "$p" = "$serve_pid" ] && role=supervisor
		[ "$role" = other ] && continue # an agent between fork and exec
		pss=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" \
			2>/dev/null || echo 0)
		awk -v l="$1" -v r="$role" -v p="$p" -v pss="${pss:-0}" \
			-v out="$tmp/rss" '
			/^VmRSS:/ { rss = $2 } /^VmHWM:/ { hwm = $2 }
			END { printf "%-20s %-10s %7s %8.1f %8.1f %8.1f\n", l, r,
			      p, rss / 1024, hwm / 1024, pss / 1024
			      print l, r, rss, hwm, pss >>out }' \
			"/proc/$p/status"
		[ "$role" = worker ] && nk=$((nk + 1))
	done
	[ "$nk" -eq 4 ] || {
		ps -o pid=,stat=,comm= --ppid "$serve_pid" >&2
		die "serve --workers 4 has $nk live worker processes (above)"
	}
}

bench_memory() {
	echo "memory: serve --workers 4, 4 agents blocked in their stage,"
	echo "read 6 s after the 4th agent started (after a periodic sweep)"
	echo
	printf '%-20s %-10s %7s %8s %8s %8s\n' queue process pid "RSS MiB" \
		"HWM MiB" "PSS MiB"
	: >"$tmp/rss"
	: >"$tmp/cpu"
	for n in 4 "$MEM_N"; do
		gate_close
		new_repo "mem$n" block
		"$BENCH_QUEUE" --fill .baton/baton.db "$n" >/dev/null
		start_serve "$tmp/mem$n.log" --workers 4
		wait_agents 4
		c0=$(cpu_ticks "$serve_pid")
		sleep 6 # one periodic sweep (runtime.sweep_seconds: 5)
		c1=$(cpu_ticks "$serve_pid")
		running=$(count_status running)
		[ "$running" -eq 4 ] || die "$running tasks running, not 4"
		rss_report "$n queued tasks"
		echo "$n $(((c1 - c0) * 1000 / $(getconf CLK_TCK)))" >>"$tmp/cpu"
		stop_serve
		left=$(agent_pids | wc -l)
		[ "$left" -eq 0 ] || {
			echo "note: $left agents still ran after serve stopped;" \
				"killed"
			kill_agents
		}
		gate_open
		cd "$tmp"
	done
	while read -r n ms; do
		echo "supervisor CPU over those 6 s with $n queued tasks: $ms ms"
	done <"$tmp/cpu"
	db=$(du -k "$tmp/mem$MEM_N/.baton/baton.db" | awk '{ print $1 }')
	echo "(the database with $MEM_N tasks: $((db / 1024)) MiB)"
	awk -v n="$MEM_N" '$1 == n && $4 == "supervisor" {
		printf "rss_kib_supervisor_%d=%d hwm_kib=%d\n", n, $5, $6 }
		$1 == n && $4 == "worker" { if ($5 > m) m = $5; if ($6 > h) h = $6 }
		END { printf "rss_kib_worker_max_%d=%d hwm_kib=%d\n", n, m, h }' \
		"$tmp/rss" >>"$tmp/keys"
	rm -rf "${tmp:?}/mem4" "${tmp:?}/mem$MEM_N"
}

# ---- recovery ------------------------------------------------------------

bench_recovery() {
	echo "recovery: $FLIGHT runs in flight (serve --workers $FLIGHT, every"
	echo "agent blocked), kill -9 of serve, agents killed, serve again"
	echo
	gate_close
	new_repo rec block
	"$BENCH_QUEUE" --fill .baton/baton.db "$FLIGHT" >/dev/null
	t0=$(now_ms)
	start_serve "$tmp/rec1.log" --workers "$FLIGHT"
	wait_agents "$FLIGHT"
	t1=$(now_ms)
	echo "first serve: $FLIGHT agents running after $((t1 - t0)) ms"
	running=$(count_status running)
	[ "$running" -eq "$FLIGHT" ] ||
		die "$running tasks running, not $FLIGHT"
	workers=$(ps -o pid= --ppid "$serve_pid")
	last=$("$BATON_BIN" events --all --json | tail -n 1 | jq .seq)

	kill -9 "$serve_pid"
	wait "$serve_pid" 2>/dev/null || true
	serve_pid=
	# the workers die with it (PR_SET_PDEATHSIG); the agents, in
	# sessions of their own, would die with the machine: kill them
	kill_agents
	t=0
	for p in $workers; do
		while kill -0 "$p" 2>/dev/null; do
			t=$((t + 1))
			[ "$t" -lt 200 ] || die "worker $p outlived serve's kill -9"
			sleep 0.05
		done
	done
	[ "$(agent_pids | wc -l)" -eq 0 ] || die "agents survived kill -9"
	echo "after kill -9: tasks running $(count_status running)," \
		"queued $(count_status queued)"

	t2=$(now_ms)
	start_serve "$tmp/rec2.log" --workers "$FLIGHT" --exit-when-idle
	wait_agents "$FLIGHT"
	events_tsv | awk -F'\t' -v after="$last" -v t0="$t2" '
		$4 > after && $1 == "worker_gone" { gone++; if ($5 > g) g = $5 }
		$4 > after && $1 == "task_claimed" { if ($5 > c) c = $5 }
		$4 > after && $1 == "stage_started" && !($3 in s) {
			s[$3] = $5; n++; if ($5 > m) m = $5
			if (!f || $5 < f) f = $5 }
		END { printf "%d %d %d %d %d %d\n", gone, g - t0, c - t0, n,
		      f - t0, m - t0 }' >"$tmp/rec.out"
	read -r gone gone_ms claim_ms resumed first_ms all_ms <"$tmp/rec.out"
	[ "$gone" -eq "$FLIGHT" ] ||
		die "the new serve's sweep requeued $gone of $FLIGHT tasks"
	[ "$resumed" -eq "$FLIGHT" ] ||
		die "$resumed of $FLIGHT runs re-entered their stage"
	echo "restart -> all $FLIGHT tasks requeued (worker_gone): $gone_ms ms"
	echo "restart -> first run re-entered its stage:     $first_ms ms"
	echo "restart -> all $FLIGHT claimed again:               $claim_ms ms"
	echo "restart -> all $FLIGHT runs re-entered their stage: $all_ms ms" \
		"($(awk -v m="$all_ms" 'BEGIN { printf "%.2f", m / 1000 }') s)"
	echo "restart_to_resumed_ms_$FLIGHT=$all_ms" >>"$tmp/keys"

	t3=$(now_ms)
	gate_open
	wait_serve
	t4=$(now_ms)
	done_n=$(count_status "done")
	runs=$("$BATON_BIN" task list --json | jq '[.[].runs | length] | add')
	echo "released: serve exited after $((t4 - t3)) ms; tasks done" \
		"$done_n of $FLIGHT, runs $runs (one each: resumed, not restarted)"
	[ "$done_n" -eq "$FLIGHT" ] || die "$done_n of $FLIGHT tasks done"
	cd "$tmp"
	rm -rf "${tmp:?}/rec"
}

: >"$tmp/keys"
for part in $PARTS; do
	p0=$(now_ms)
	case $part in
	latency) bench_latency ;;
	throughput) bench_throughput ;;
	memory) bench_memory ;;
	recovery) bench_recovery ;;
	*) die "unknown part '$part'" ;;
	esac
	echo "($part took $((($(now_ms) - p0) / 1000)) s; load average" \
		"$(cut -d' ' -f1-3 /proc/loadavg))"
	echo
done
echo "key figures:"
cat "$tmp/keys"
