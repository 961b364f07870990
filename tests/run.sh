#!/bin/sh
# Runs every unit test binary and every integration script, then prints
# the total as "N passed, N failed" (the line CI reads).
#   BATON_BIN  the baton binary under test (absolute path)
#   UNIT_DIR   where the unit test binaries are
#   T=pattern  run only unit binaries / scripts whose name contains pattern
#
# Then the PostgreSQL pass: a throwaway cluster (tools/pg.sh) on which
# the store conformance suites (t_store, t_queue) and the runtime scripts
# of PG_SCRIPTS run again, unchanged, each on databases of its own, and
# the scripts that need PostgreSQL (t0027) run at all. Without a server
# the pass is skipped, saying so, unless BATON_TEST_REQUIRE_PG=1 (CI).
set -u
here=$(cd "$(dirname "$0")" && pwd)
passed=0
failed=0
failures=""

tally() { # name, output file
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$2" | tail -n 1)
	if [ -z "$line" ]; then
		failed=$((failed + 1))
		failures="$failures $1(no-summary)"
		return
	fi
	p=${line%% passed*}
	f=${line#*passed, }
	f=${f%% failed}
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -eq 0 ] || failures="$failures $1"
}

out=$(mktemp)
for t in "$UNIT_DIR"/t_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	case "$name" in *"${T:-}"*) ;; *) continue ;; esac
	echo "== $name"
	"$t" >"$out" 2>&1
	cat "$out"
	tally "$name" "$out"
done
for t in "$here"/integration/t[0-9]*.sh; do
	[ -f "$t" ] || continue
	name=$(basename "$t")
	case "$name" in *"${T:-}"*) ;; *) continue ;; esac
	echo "== $name"
	bash "$t" >"$out" 2>&1
	cat "$out"
	tally "$name" "$out"
done

PG_UNITS="t_store t_queue t_token"
PG_SCRIPTS="t0018-queue t0019-serve-crash t0020-leases t0021-merge-queue
t0023-judge t0027-postgres t0042-judge-recovery t0060-forge-store
t0070-forge-webhook t0097-takeover t0100-pg-run-files t0101-pg-clock
t0114-resume-summary t0126-protocol-hostile t0150-roles"

pg_pass() {
	wanted=""
	for n in $PG_UNITS $PG_SCRIPTS; do
		case "$n" in *"${T:-}"*) wanted=1 ;; esac
	done
	[ -n "$wanted" ] || return 0
	pgdir=$(mktemp -d "${TMPDIR:-/tmp}/baton-pg.XXXXXX")
	if ! admin=$("$here/../tools/pg.sh" start "$pgdir" 2>"$out"); then
		cat "$out"
		if [ "${BATON_TEST_REQUIRE_PG:-0}" = 1 ]; then
			failed=$((failed + 1))
			failures="$failures postgres(no-server)"
		else
			echo "postgres: no server could be started: pass skipped"
		fi
		rm -rf "$pgdir"
		return
	fi
	for u in $PG_UNITS; do
		case "$u" in *"${T:-}"*) ;; *) continue ;; esac
		echo "== postgres: $u"
		dsn=$("$here/../tools/pg.sh" createdb "$pgdir" "u_$u")
		BATON_TEST_PG_DSN=$dsn "$UNIT_DIR/$u" >"$out" 2>&1
		cat "$out"
		tally "pg:$u" "$out"
	done
	for s in $PG_SCRIPTS; do
		case "$s" in *"${T:-}"*) ;; *) continue ;; esac
		echo "== postgres: $s"
		BATON_TEST_PG_ADMIN=$admin BATON_TEST_PG_DIR=$pgdir \
			bash "$here/integration/$s.sh" >"$out" 2>&1
		cat "$out"
		tally "pg:$s" "$out"
	done
	"$here/../tools/pg.sh" stop "$pgdir" || :
	rm -rf "$pgdir"
}
pg_pass

rm -f "$out"
[ -z "$failures" ] || echo "failing:$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
