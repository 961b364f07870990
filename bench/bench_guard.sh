#!/bin/sh
#
# bench/bench_guard.sh: what watching the agent costs (issue 17). Before
# and after every agent call baton snapshots the worktree (an lstat of
# every entry) and the repository's refs, and a checkpoint takes the
# work tree into baton's own index (workspace/guard.c, worktree.c). This
# runs the feature pipeline with the scripted agent on a small repository
# and on one of BENCH_FILES tracked files plus as many ignored ones, and
# reports from the runs' events, for each size:
#
#   call prep      stage_started -> agent_started of the architect stage
#                  (the prompt, and the snapshot before the call)
#   call wrap-up   agent_exited -> the next transition, architect (the
#                  snapshot after it, compared; the artifacts taken)
#   checkpoint     agent_exited -> checkpoint of the execute stage
#
# The difference between the sizes is what the files cost.
#
# Environment: BATON_BIN, BENCH_FILES (default 20000), BENCH_SANDBOX
# (default none: bwrap's own start is not what is measured), BENCH_TMPDIR.

set -eu
BATON_BIN=${BATON_BIN:-$(pwd)/baton}
FAKE=$(cd "$(dirname "$0")/.." && pwd)/tests/lib/fake-agent
FILES=${BENCH_FILES:-20000}
tmp=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/baton-bench-guard.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
export FAKE_STATE=$tmp/state BATON_SANDBOX_RW=$tmp/state
mkdir -p "$FAKE_STATE"

# figures RUN: "prep wrap-up checkpoint" in ms, from the run's events.
figures() {
	"$BATON_BIN" events "$1" --json | jq -r '
		def ms: (sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601) * 1000
			+ (capture("\\.(?<f>[0-9]+)Z$").f | tonumber);
		"\(.ts | ms) \(.type) \(.data.stage // "-")"' |
		awk '
		$2 == "stage_started" && $3 == "architect" { a = $1; next }
		a && !prep && $2 == "agent_started" { prep = $1 - a; next }
		a && !x && $2 == "agent_exited" { x = $1; next }
		x && !wrap && $2 == "transition" { wrap = $1 - x; next }
		$2 == "agent_exited" { last = $1; next }
		$2 == "checkpoint" && $3 == "execute" { ckpt = $1 - last }
		END { print prep, wrap, ckpt }'
}

# one N: a repository with N tracked and N ignored files, one run.
one() {
	repo=$tmp/repo-$1
	git init -q "$repo"
	cd "$repo"
	git config gc.auto 0
	mkdir -p src build
	printf 'test:\n\ttrue\n' >Makefile
	echo "build/" >.gitignore
	i=0
	while [ "$i" -lt "$1" ]; do
		echo "line $i" >"src/f$i.txt"
		echo "line $i" >"build/o$i.txt"
		i=$((i + 1))
	done
	git add -A
	git -c user.name=bench -c user.email=bench@localhost commit -qm init
	git gc -q
	"$BATON_BIN" init >/dev/null
	cat >.baton/config.yaml <<-YAML
	providers:
	  fake: {type: command, command: ["$FAKE"]}
	roles: {default: fake}
	validate: {commands: ["make test"]}
	execution: {sandbox: ${BENCH_SANDBOX:-none}}
	YAML
	"$BATON_BIN" run "bench $1" >/dev/null 2>&1
	figures "$(ls -t .baton/runs | head -n 1)"
	cd "$tmp"
}

small=$(one 10)
large=$(one "$FILES")
printf 'what the guard and the checkpoint cost, in ms (sandbox %s):\n' \
	"${BENCH_SANDBOX:-none}"
printf '  %-34s %10s %10s %10s\n' "" "call prep" "wrap-up" "checkpoint"
printf '  %-34s %10s %10s %10s\n' "10 + 10 ignored files" $small
printf '  %-34s %10s %10s %10s\n' "$FILES + $FILES ignored files" $large
