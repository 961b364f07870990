#!/bin/sh
# Runs every unit test binary and every integration script, then prints
# the total as "N passed, N failed" (the line CI reads).
#   BATON_BIN  the baton binary under test (absolute path)
#   UNIT_DIR   where the unit test binaries are
#   T=pattern  run only unit binaries / scripts whose name contains pattern
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
rm -f "$out"
[ -z "$failures" ] || echo "failing:$failures"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
