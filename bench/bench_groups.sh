#!/bin/sh
#
# bench/bench_groups.sh: what a parallel review group buys (issue 7). Two
# bug-fix pipelines with three code reviews each, one a parallel group
# and one in sequence, run with the scripted agent (tests/lib/fake-agent)
# whose code reviews each take BENCH_REVIEW_SECONDS. Reports, from the
# run's events, the span from the first code review's agent_started to
# the last one's agent_exited, and the ratio.
#
# Environment: BATON_BIN, BENCH_REVIEW_SECONDS (default 3), BENCH_TMPDIR.

set -eu
BATON_BIN=${BATON_BIN:-$(pwd)/baton}
FAKE=$(cd "$(dirname "$0")/.." && pwd)/tests/lib/fake-agent
SECS=${BENCH_REVIEW_SECONDS:-3}
tmp=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/baton-bench-groups.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

repo=$tmp/repo
git init -q "$repo"
cd "$repo"
printf 'test:\n\ttrue\n' >Makefile
git add Makefile
git -c user.name=bench -c user.email=bench@localhost commit -qm init
"$BATON_BIN" init >/dev/null
cat >.baton/config.yaml <<YAML
providers:
  fake: {type: command, command: ["$FAKE"]}
roles: {default: fake}
validate: {commands: ["make test"]}
pipelines:
  par:
    type: bugfix
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}
  seq:
    type: bugfix
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review}
      - {type: code-review}
      - {type: code-review}
YAML

# span RUN: seconds from the first code review's start to the last end.
span() {
	"$BATON_BIN" events "$1" --json | jq -rs '
		def ms: (sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601) * 1000
			+ (capture("\\.(?<f>[0-9]+)Z$").f | tonumber);
		[.[] | select(.type == "agent_started" or .type == "agent_exited")
		     | select((.data.call // "") | test("code-review"))
		     | .ts | ms] | (max - min) / 1000'
}

export FAKE_SLEEP_KIND=code-review FAKE_SLEEP="$SECS"
for p in par seq; do
	"$BATON_BIN" run --pipeline "$p" "bench $p" >/dev/null 2>&1
	eval "$p=\$(span \"\$(ls -t .baton/runs | head -n 1)\")"
done
printf 'three code reviews of %s s each, first start to last end:\n' "$SECS"
printf '  parallel group  %6.2f s\n' "$par"
printf '  in sequence     %6.2f s\n' "$seq"
awk -v s="$seq" -v p="$par" 'BEGIN { printf "  ratio           %6.2fx\n", s / p }'
