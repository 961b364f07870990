#!/bin/sh
#
# bench_status.sh: how long `baton status` takes with many runs in the
# database (10,000 by default), and how much memory it needs.
#
# It makes a scratch git repository, runs `baton init`, times the read
# commands once on the empty store (the fixed cost of a baton process:
# finding the repository, config, store open), then fills .baton/baton.db
# with `bench_store --fill` (a realistic mix of statuses, about 19 events
# a run, no agents needed) and times `baton status`, `status --json`,
# `status --status=blocked`, and `baton show` of one run. The reference
# for `status`, on both stores, is a bare `sqlite3` process selecting the
# columns status prints from the same database; the two ratios are
# printed by mean and by min wall time and (with hyperfine) by mean
# user + system CPU time, the least disturbed on a shared machine.
# Timings come from hyperfine when it is installed, else from a loop of
# date +%s%N. Peak RSS comes from /usr/bin/time -v when it is
# there.
#
# Environment:
#   BATON_BIN     the baton binary (default: ../baton next to bench/)
#   BENCH_STORE   the bench_store binary (default: build/bench/bench_store)
#   BENCH_RUNS    runs to fill (default 10000)
#   BENCH_REPEAT  timed runs per command (default 20)
#   BENCH_TMPDIR  where the scratch repository goes (default $TMPDIR, /tmp)
#   HYPERFINE     the hyperfine to use (default hyperfine; empty: the loop)
#   SQLITE3       the sqlite3 CLI of the reference (default sqlite3)
#
# Figures are printed, never judged. Exit status 1 if a command fails.

set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
BATON_BIN=${BATON_BIN:-$root/baton}
BENCH_STORE=${BENCH_STORE:-$root/build/bench/bench_store}
RUNS=${BENCH_RUNS:-10000}
REPEAT=${BENCH_REPEAT:-20}
base=${BENCH_TMPDIR:-${TMPDIR:-/tmp}}
HYPERFINE=${HYPERFINE-hyperfine}

die() {
	echo "bench_status.sh: $*" >&2
	exit 1
}

[ -x "$BATON_BIN" ] || die "no baton binary at '$BATON_BIN' (run make)"
[ -x "$BENCH_STORE" ] ||
	die "no bench_store at '$BENCH_STORE' (bench/run.sh builds it)"

tmp=$(mktemp -d "$base/baton-status.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
repo=$tmp/repo
mkdir "$repo"
cd "$repo"
git init -q
git config user.email bench@example.com
git config user.name bench
git commit -q --allow-empty -m init
"$BATON_BIN" init >/dev/null || die "baton init failed in $repo"

if [ -n "$HYPERFINE" ] && command -v "$HYPERFINE" >/dev/null 2>&1; then
	tool="hyperfine $("$HYPERFINE" --version | awk '{print $2}')"
	# -N (no intermediate shell) when this hyperfine has it.
	if "$HYPERFINE" --help 2>/dev/null | grep -q -- '--shell=none'; then
		hf_shell=-N
	else
		hf_shell=
	fi
else
	tool="date +%s%N loop"
fi

# time_cmd LABEL CMD...: one table line: mean, min and max in ms.
# The command must succeed once before it is timed. Each mean also goes
# to $tmp/means as "LABEL<tab>MS" for the ratios at the end.
time_cmd() {
	label=$1
	shift
	"$@" >/dev/null 2>"$tmp/err" ||
		die "'$*' failed: $(cat "$tmp/err")"
	if [ "$tool" != "date +%s%N loop" ]; then
		# One command line for hyperfine: an argument with a space
		# (the reference's SQL, which has no quote) is single-quoted,
		# which -N and the shell both split back.
		line=
		for a in "$@"; do
			case $a in
			*" "*) a="'$a'" ;;
			esac
			line="${line:+$line }$a"
		done
		# shellcheck disable=SC2086
		"$HYPERFINE" $hf_shell --style none --warmup 3 --runs "$REPEAT" \
			--export-csv "$tmp/hf.csv" "$line" >/dev/null 2>&1 ||
			die "hyperfine failed on '$line'"
		# mean, min and max counted from the end: the command in
		# the first column may hold commas
		awk -F, -v label="$label" -v n="$REPEAT" 'NR == 2 {
			printf "%-40s %5d %9.2f %9.2f %9.2f\n", label, n,
			       $(NF - 6) * 1000, $(NF - 1) * 1000, $NF * 1000 }' \
			"$tmp/hf.csv" |
			tee -a "$tmp/lines"
		# user + system CPU time of a run, in ms (hyperfine only):
		# less disturbed than wall time on a machine others load
		cpu=$(awk -F, 'NR == 2 { printf "%.2f", ($(NF - 3) + \
			$(NF - 2)) * 1000 }' "$tmp/hf.csv")
	else
		cpu=0
		"$@" >/dev/null 2>&1
		"$@" >/dev/null 2>&1
		: >"$tmp/times"
		i=0
		while [ "$i" -lt "$REPEAT" ]; do
			t0=$(date +%s%N)
			"$@" >/dev/null 2>&1
			t1=$(date +%s%N)
			echo $((t1 - t0)) >>"$tmp/times"
			i=$((i + 1))
		done
		awk -v label="$label" 'NR == 1 { min = max = $1 }
			{ s += $1; if ($1 < min) min = $1; if ($1 > max) max = $1 }
			END { printf "%-40s %5d %9.2f %9.2f %9.2f\n", label, NR,
			      s / NR / 1e6, min / 1e6, max / 1e6 }' "$tmp/times" |
			tee -a "$tmp/lines"
	fi
	tail -n 1 "$tmp/lines" | awk -v label="$label" -v cpu="${cpu:-0}" '{
		printf "%s\t%s\t%s\t%s\n", label, $(NF - 2), $(NF - 1), cpu }' \
		>>"$tmp/means"
}

# mean LABEL [FIELD]: what time_cmd measured for LABEL, in ms: the mean
# (FIELD 2, the default), the min (3) or the CPU time (4, 0 without
# hyperfine).
mean() {
	awk -F '\t' -v label="$1" -v f="${2:-2}" '$1 == label { print $f }' \
		"$tmp/means"
}

# rss LABEL CMD...: peak resident set size of one run, in MiB.
rss() {
	label=$1
	shift
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -v "$@" >/dev/null 2>"$tmp/time" ||
			die "'$*' failed under /usr/bin/time"
		awk -v label="$label" -F: '/Maximum resident set size/ {
			printf "%-40s %9.1f MiB\n", label, $2 / 1024 }' \
			"$tmp/time"
	else
		printf "%-40s %9s\n" "$label" "n/a (no /usr/bin/time)"
	fi
}

echo "baton status benchmark: $RUNS runs, $tool, $REPEAT timed runs each"
echo "repository: $repo ($(stat -f -c %T "$repo"))"
echo
printf "%-40s %5s %9s %9s %9s\n" "command" "runs" "mean ms" "min ms" \
	"max ms"
# The reference: a bare sqlite3 process listing the columns status
# prints, in its order, from the same database (goal 5 of issue 21).
SQLITE3=${SQLITE3:-sqlite3}
ref_sql="SELECT id, status, outcome, pause_requested, stage, created_at,\
 review_loops, max_review_loops, cost_usd FROM runs ORDER BY seq DESC"
command -v "$SQLITE3" >/dev/null 2>&1 ||
	die "no sqlite3 CLI (apt-get install -y sqlite3): it is the reference"
: >"$tmp/lines"
: >"$tmp/means"
time_cmd "sqlite3, same columns (empty store)" "$SQLITE3" -readonly \
	.baton/baton.db "$ref_sql"
time_cmd "baton status (empty store)" "$BATON_BIN" status
"$BENCH_STORE" --fill .baton/baton.db "$RUNS" >"$tmp/fill" 2>&1 ||
	die "fill failed: $(cat "$tmp/fill")"

lines=$("$BATON_BIN" status | wc -l)
[ "$lines" -eq $((RUNS + 1)) ] ||
	die "baton status printed $lines lines, expected $((RUNS + 1))"
one=r$((RUNS / 2))
time_cmd "sqlite3, same columns ($RUNS runs)" "$SQLITE3" -readonly \
	.baton/baton.db "$ref_sql"
time_cmd "baton status ($RUNS runs)" "$BATON_BIN" status
time_cmd "baton status --json ($RUNS runs)" "$BATON_BIN" status --json
time_cmd "baton status --status=blocked" "$BATON_BIN" status \
	--status=blocked
time_cmd "baton show $one" "$BATON_BIN" show "$one"
time_cmd "baton show $one --json" "$BATON_BIN" show "$one" --json

echo
echo "baton status / sqlite3 (goal: at most 2x on the empty store, 1.5x"
echo "with $RUNS runs), by mean and min wall time and by mean CPU time:"
for f in 2 3 4; do
	awk -v f="$f" -v a="$(mean "baton status (empty store)" "$f")" \
		-v b="$(mean "sqlite3, same columns (empty store)" "$f")" \
		-v c="$(mean "baton status ($RUNS runs)" "$f")" \
		-v d="$(mean "sqlite3, same columns ($RUNS runs)" "$f")" \
		-v n="$RUNS" 'BEGIN {
		split("- mean min cpu", name, " ")
		if (b <= 0 || d <= 0) exit
		printf "  %-4s empty store %.2fx, %d runs %.2fx\n", name[f],
		       a / b, n, c / d
		printf "key: status_ratio_%s_empty=%.2f status_ratio_%s_%d=%.2f\n",
		       name[f], a / b, name[f], n, c / d >"/dev/stderr" }' \
		2>>"$tmp/ratio_keys"
done
cat "$tmp/ratio_keys"

echo
echo "peak RSS (/usr/bin/time -v, one run each):"
rss "baton status ($RUNS runs)" "$BATON_BIN" status
rss "baton status --json ($RUNS runs)" "$BATON_BIN" status --json
rss "baton show $one --json" "$BATON_BIN" show "$one" --json

echo
sed 's/^/(/; s/$/)/' "$tmp/fill"
printf "(database: %s KiB, %s blocked runs, output of status: %s lines, " \
	"$(($(wc -c <.baton/baton.db) / 1024))" \
	"$("$BATON_BIN" status --status=blocked | tail -n +2 | wc -l)" \
	"$lines"
printf "%s bytes; status --json: %s bytes)\n" \
	"$("$BATON_BIN" status | wc -c)" \
	"$("$BATON_BIN" status --json | wc -c)"
