#!/bin/sh
# Runs every unit test binary and every integration script, then prints
# the total as "N passed, N failed" (the line CI reads).
#   BATON_BIN  the baton binary under test (absolute path)
#   UNIT_DIR   where the unit test binaries are
#   T=pattern  run only unit binaries / scripts whose name contains pattern
#   BATON_TEST_JOBS  how many tests run at once (default: the number of
#              processors); every test has its own trash directory,
#              ports, databases and tmux server, so they share no state
#
# Then the PostgreSQL pass: a throwaway cluster (tools/pg.sh) on which
# the store conformance suites (t_store, t_queue) and the runtime scripts
# of PG_SCRIPTS run again, unchanged, each on databases of its own, and
# the scripts that need PostgreSQL (t0027) run at all. Without a server
# the pass is skipped, saying so, unless BATON_TEST_REQUIRE_PG=1 (CI).
# The cluster is started first, so its tests share the pool with the rest;
# a test that restarts its server or counts the whole server's
# transactions (PG_OWN) gets a cluster of its own.
#
# BATON_PG_BIN, when set, is the binary the PostgreSQL pass's scripts
# run (make check: the optimized build there, the sanitized one for the
# rest, so that each test runs once).
#
# Each test's output is kept and printed whole, in order, once all have
# ended; while they run, one line per test says how it went and how long
# it took. The ten slowest are listed at the end, then the end of each
# failing test's output again.
set -u
here=$(cd "$(dirname "$0")" && pwd)
passed=0
failed=0
failures=""
failed_names=""

tally() { # name, output file
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$2" | tail -n 1)
	if [ -z "$line" ]; then
		failed=$((failed + 1))
		failures="$failures $1(no-summary)"
		failed_names="$failed_names $1"
		return
	fi
	p=${line%% passed*}
	f=${line#*passed, }
	f=${f%% failed}
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -eq 0 ] || {
		failures="$failures $1"
		failed_names="$failed_names $1"
	}
}

# One test, as a pool job: --one KIND NAME. Its output goes to
# $RUN_RES/NAME.out, its duration in seconds to $RUN_RES/NAME.secs.
if [ "${1:-}" = --one ]; then
	kind=$2 name=$3 res=$RUN_RES
	o="$res/$name.out"
	t0=$(date +%s)
	case $kind in
	unit) "$UNIT_DIR/$name" >"$o" 2>&1 ;;
	script) bash "$here/integration/$name" >"$o" 2>&1 ;;
	pgunit)
		u=${name#pg:}
		case " $PG_OWN " in
		*" $u "*)
			# it counts the server's transaction ids: a cluster
			# of its own, where no other test spends them
			dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-pg.XXXXXX")
			if "$here/../tools/pg.sh" start "$dir" >/dev/null 2>"$o"; then
				dsn=$("$here/../tools/pg.sh" createdb "$dir" "u_$u")
				BATON_TEST_PG_DSN=$dsn "$UNIT_DIR/$u" >"$o" 2>&1
				"$here/../tools/pg.sh" stop "$dir" || :
			fi
			rm -rf "$dir" ;;
		*)
			dsn=$("$here/../tools/pg.sh" createdb "$PGDIR" "u_$u")
			BATON_TEST_PG_DSN=$dsn "$UNIT_DIR/$u" >"$o" 2>&1 ;;
		esac ;;
	pgscript)
		BATON_BIN=${BATON_PG_BIN:-$BATON_BIN}
		export BATON_BIN
		case " $PG_OWN " in
		*" ${name#pg:} "*)
			# it restarts its server: a cluster of its own, so
			# the tests running beside it keep theirs
			dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-pg.XXXXXX")
			if adm=$("$here/../tools/pg.sh" start "$dir" 2>"$o"); then
				BATON_TEST_PG_ADMIN=$adm BATON_TEST_PG_DIR=$dir \
					bash "$here/integration/${name#pg:}.sh" \
					>"$o" 2>&1
				"$here/../tools/pg.sh" stop "$dir" || :
			fi
			rm -rf "$dir" ;;
		*)
			BATON_TEST_PG_ADMIN=$PGADMIN BATON_TEST_PG_DIR=$PGDIR \
				bash "$here/integration/${name#pg:}.sh" \
				>"$o" 2>&1 ;;
		esac ;;
	esac
	secs=$(($(date +%s) - t0))
	echo "$secs" >"$res/$name.secs"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$o" | tail -n 1)
	printf '%s %-32s %s (%ss)\n' '--' "$name" "${line:-no summary}" "$secs"
	exit 0
fi

res=$(mktemp -d "${TMPDIR:-/tmp}/baton-run.XXXXXX")
jobs=$res/jobs
: >"$jobs"
for t in "$UNIT_DIR"/t_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	case "$name" in *"${T:-}"*) ;; *) continue ;; esac
	echo "unit $name" >>"$jobs"
done
for t in "$here"/integration/t[0-9]*.sh; do
	[ -f "$t" ] || continue
	name=$(basename "$t")
	case "$name" in *"${T:-}"*) ;; *) continue ;; esac
	echo "script $name" >>"$jobs"
done

PG_UNITS="t_store t_queue t_token"
# The tests that restart their server, or count what the whole server
# does, get a cluster each.
PG_OWN="t0027-postgres t_queue"
export PG_OWN
PG_SCRIPTS="
t0018-queue
t0019-serve-crash
t0020-leases
t0021-merge-queue
t0023-judge
t0027-postgres
t0042-judge-recovery
t0060-forge-store
t0070-forge-webhook
t0097-takeover
t0100-pg-run-files
t0101-pg-clock
t0114-resume-summary
t0126-protocol-hostile
t0145-mcp
t0128-chat-api
t0141-answer-links
t0155-rewind
t0156-turn-budgets
t0169-memory
t0135-clean
t0136-schedules
t0150-roles
t0123-stream-revoke
"

# The PostgreSQL cluster, when a test of the pass is wanted. Its jobs go
# first: they are the longest.
pgdir=""
wanted=""
for n in $PG_UNITS $PG_SCRIPTS; do
	case "$n" in *"${T:-}"*) wanted=1 ;; esac
done
if [ -n "$wanted" ]; then
	pgdir=$(mktemp -d "${TMPDIR:-/tmp}/baton-pg.XXXXXX")
	if admin=$("$here/../tools/pg.sh" start "$pgdir" 2>"$res/pg.err"); then
		export PGDIR="$pgdir" PGADMIN="$admin"
		pg=$res/pgjobs
		: >"$pg"
		for s in $PG_SCRIPTS; do
			case "$s" in *"${T:-}"*) echo "pgscript pg:$s" >>"$pg" ;; esac
		done
		for u in $PG_UNITS; do
			case "$u" in *"${T:-}"*) echo "pgunit pg:$u" >>"$pg" ;; esac
		done
		cat "$jobs" >>"$pg"
		mv "$pg" "$jobs"
	else
		cat "$res/pg.err"
		if [ "${BATON_TEST_REQUIRE_PG:-0}" = 1 ]; then
			failed=$((failed + 1))
			failures="$failures postgres(no-server)"
		else
			echo "postgres: no server could be started: pass skipped"
		fi
		rm -rf "$pgdir"
		pgdir=""
	fi
fi

export UNIT_DIR RUN_RES="$res"
njobs=${BATON_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
echo "running $(wc -l <"$jobs") tests, $njobs at a time"
xargs -P "$njobs" -L 1 sh "$here/run.sh" --one <"$jobs"

if [ -n "$pgdir" ]; then
	"$here/../tools/pg.sh" stop "$pgdir" || :
	rm -rf "$pgdir"
fi

while read -r kind name; do
	echo "== $name"
	cat "$res/$name.out"
	tally "$name" "$res/$name.out"
done <"$jobs"

echo "slowest:"
for f in "$res"/*.secs; do
	[ -f "$f" ] || continue
	n=$(basename "$f" .secs)
	echo "$(cat "$f") $n"
done | sort -rn | head -n 10 | sed 's/^/  /'

# The end of each failing test's output once more, last: a reader of only
# the tail of the log (CI's summary) still sees why.
for n in $failed_names; do
	echo "== $n failed; the end of its output:"
	tail -n 30 "$res/$n.out" | sed 's/^/  | /'
done

rm -rf "$res"
[ -z "$failures" ] || echo "failing:$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
