#!/bin/sh
#
# bench/bench_config.sh: what loading a config with big pipelines costs
# (issue 18, item 16: validation was quadratic in the stages, 2.8 s for
# 2,000 of them on every command). Writes configs whose pipelines have
# 250, 500 and 1000 stages (PIPELINE_MAX_STAGES), each stage naming the
# next, then 1, 4 and 16 pipelines of 1000; times `baton pipeline list`,
# which loads and checks every pipeline, and prints the median of
# BENCH_CONFIG_ROUNDS rounds and its cost per 1000 stages. A cost per
# 1000 stages that stays flat as they grow is linear validation.
#
# Environment: BATON_BIN, BENCH_CONFIG_ROUNDS (default 5), BENCH_TMPDIR.

set -eu
BATON_BIN=${BATON_BIN:-$(pwd)/baton}
ROUNDS=${BENCH_CONFIG_ROUNDS:-5}
tmp=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/baton-bench-config.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

git init -q "$tmp/repo"
cd "$tmp/repo"
git -c user.name=bench -c user.email=bench@localhost commit -q \
	--allow-empty -m init
"$BATON_BIN" init >/dev/null
cp .baton/config.yaml "$tmp/base.yaml"

# config PIPELINES STAGES: .baton/config.yaml with that many pipelines
# (big1, big2 ...) of that many execute stages, each naming the next.
config() {
	{
		cat "$tmp/base.yaml"
		awk -v np="$1" -v ns="$2" 'BEGIN {
			print "pipelines:"
			for (p = 1; p <= np; p++) {
				printf "  big%d:\n    stages:\n", p
				for (i = 0; i < ns; i++)
					printf "      - {name: s%d, kind: execute, " \
					       "status: st%d, next: %s}\n", i, i,
					       i + 1 < ns ? "s" (i + 1) : "merge_ready"
			}
		}'
	} >.baton/config.yaml
}

# measure PIPELINES STAGES: one line of figures
measure() {
	config "$1" "$2"
	"$BATON_BIN" pipeline list >/dev/null ||
		{ echo "baton pipeline list failed on $1 x $2 stages" >&2; exit 1; }
	: >"$tmp/ms"
	r=0
	while [ "$r" -lt "$ROUNDS" ]; do
		t0=$(date +%s%N)
		"$BATON_BIN" pipeline list >/dev/null
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000)) >>"$tmp/ms"
		r=$((r + 1))
	done
	sort -n "$tmp/ms" | awk -v np="$1" -v ns="$2" -v size="$(wc -c <.baton/config.yaml)" '
		{ v[NR] = $1 }
		END {
			med = v[int((NR + 1) / 2)] / 1000
			printf "%2d pipeline(s) x %4d stages (%6d stages, %7d bytes): " \
			       "baton pipeline list %7.1f ms, %6.2f ms per 1000 stages\n",
			       np, ns, np * ns, size, med, med / (np * ns / 1000)
		}'
}

echo "median of $ROUNDS rounds; each run loads and checks the whole config"
measure 1 250
measure 1 500
measure 1 1000
measure 4 1000
measure 16 1000
