#!/bin/sh
#
# bench/bench_overhead.sh: what baton itself costs per run. Runs BENCH_OH
# runs of the feature pipeline with an instant agent (a shell script that
# answers at once) and no validation commands, and reports the wall time
# of each `baton run` minus the time spent inside the agents (the sum of
# the agent_exited durations baton recorded): worktree creation, the
# durable transitions, prompts, checkpoints, artifacts and events.
#
# Environment: BATON_BIN, BENCH_OH (runs, default 20), BENCH_TMPDIR.

set -eu
BATON_BIN=${BATON_BIN:-$(pwd)/baton}
N=${BENCH_OH:-20}
tmp=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/baton-bench-oh.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

cat >"$tmp/agent" <<'AGENT'
#!/bin/sh
case "$BATON_STAGE_KIND" in
execute) echo "edit $BATON_RUN_ID" >>"$BATON_WORKTREE/notes.txt"; echo done ;;
review) echo "DECISION: APPROVED" ;;
verify) echo "VERIFICATION: PASSED" ;;
*) echo "# $BATON_STAGE_KIND of $BATON_RUN_ID" ;;
esac
AGENT
chmod +x "$tmp/agent"

repo=$tmp/repo
git init -q "$repo"
cd "$repo"
git -c user.name=b -c user.email=b@b commit -q --allow-empty -m init
"$BATON_BIN" init >/dev/null
cat >.baton/config.yaml <<CFG
providers: {instant: {type: command, command: ["$tmp/agent"]}}
roles: {default: instant}
CFG

: >"$tmp/rows"
i=0
while [ "$i" -lt "$N" ]; do
	t0=$(date +%s%N)
	GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b \
		GIT_COMMITTER_EMAIL=b@b "$BATON_BIN" run "bench $i" \
		>/dev/null 2>&1
	t1=$(date +%s%N)
	id=$("$BATON_BIN" status --json | jq -r '.[0].id')
	"$BATON_BIN" show --json "$id" | jq -r --arg wall "$(((t1 - t0) / 1000))" \
		'[($wall | tonumber), ([.calls[].duration_ms] | add) * 1000,
		  ([.events[] | select(.type == "transition")] | length),
		  (.calls | length)] | @tsv' >>"$tmp/rows"
	i=$((i + 1))
done

median=$(awk '{ print $1 - $2 }' "$tmp/rows" | sort -n |
	awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
awk -v n="$N" -v median="$median" '{
	wall += $1; agents += $2; trans += $3; calls += $4
} END {
	printf "runs: %d, each %d transitions and %d agent calls\n", n,
	       trans / n, calls / n
	printf "wall per run:            %8.1f ms\n", wall / n / 1000
	printf "inside agents per run:   %8.1f ms\n", agents / n / 1000
	printf "overhead per run:        %8.1f ms (median %.1f ms)\n",
	       (wall - agents) / n / 1000, median / 1000
	printf "overhead per transition: %8.2f ms\n", (wall - agents) / trans / 1000
	printf "overhead share of wall:  %8.1f %%\n", 100 * (wall - agents) / wall
}' "$tmp/rows"
