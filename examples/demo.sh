#!/bin/sh
# examples/demo.sh: baton end to end on a sample project, in one command.
#
#   make && examples/demo.sh [--fix-loop]
#
# Copies examples/sample-repo into a fresh git repository under $TMPDIR,
# runs `baton init`, configures examples/agent.sh (a scripted stand-in for
# a real agent, which knows this one task) as the agent for every stage, and
# carries "Add a --version flag to the CLI" through the feature pipeline:
# plan, architect, execute, validate (make test), review, verify. Then it
# shows `baton status`, `baton show` and `baton diff` of the run, and says
# where the repository is. --fix-loop makes the agent leave out the test at
# first, so the review requests changes and a fix round runs.
#
# The binary is $BATON, else ./baton at the top of this repository. Exits 0
# when the run reaches merge_ready, non-zero otherwise.
set -eu

TASK="Add a --version flag to the CLI"

root=$(cd "$(dirname "$0")/.." && pwd)
examples=$root/examples
BATON=${BATON:-$root/baton}

case "${1:-}" in
--fix-loop)
	EXAMPLE_AGENT_FORGET_TEST=1
	export EXAMPLE_AGENT_FORGET_TEST
	;;
'') ;;
*)
	echo "usage: examples/demo.sh [--fix-loop]" >&2
	exit 2
	;;
esac

if ! [ -x "$BATON" ]; then
	echo "demo: no baton binary at '$BATON': run 'make' first (or set BATON)" >&2
	exit 1
fi
case $BATON in /*) ;; *) BATON=$(pwd)/$BATON ;; esac

section() {
	printf '\n== %s\n' "$*"
}

# A git identity for the sample repository's commits (and baton's
# checkpoint commits), unless the user has one.
if [ -z "$(git config user.email 2>/dev/null || true)" ]; then
	: "${GIT_AUTHOR_NAME:=baton demo}" "${GIT_AUTHOR_EMAIL:=demo@example.invalid}"
	: "${GIT_COMMITTER_NAME:=baton demo}" "${GIT_COMMITTER_EMAIL:=demo@example.invalid}"
	export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL
fi

section "a sample project in a fresh git repository"
work=$(mktemp -d "${TMPDIR:-/tmp}/baton-demo.XXXXXX")
repo=$work/sample
mkdir "$repo"
cp -R "$examples/sample-repo/." "$repo/"
cd "$repo"
git init -q
git add -A
git commit -q -m "sample project: a tiny CLI"
echo "$repo"
git log --oneline

section "baton init"
"$BATON" init

section "configure examples/agent.sh as the agent of every stage"
cat >.baton/config.yaml <<EOF
# Written by examples/demo.sh. examples/agent.sh is a scripted stand-in
# that knows one task; real agents are configured the same way, as
# providers mapped to roles.
providers:
  example: {type: command, command: ["$examples/agent.sh"]}
roles: {default: example}
workflow: {pipeline: feature, max_review_loops: 2}
validate: {commands: ["make test"], timeout_seconds: 120}
EOF
cat .baton/config.yaml

section "baton run \"$TASK\""
rc=0
"$BATON" run "$TASK" || rc=$?

# The run's id: the first run of a fresh repository is r1.
id=r1
if command -v jq >/dev/null 2>&1; then
	id=$("$BATON" show r1 --json | jq -r .id) || id=r1
fi

section "baton status"
"$BATON" status || true

section "baton show $id"
"$BATON" show "$id" || true

section "baton diff $id"
"$BATON" diff "$id" || true

section "done"
if [ "$rc" -eq 0 ]; then
	echo "the run reached merge_ready; its branch holds the change:"
else
	echo "the run did not reach merge_ready ('baton run' exited $rc); look around:"
fi
echo "  cd $repo"
echo "  git log --oneline --all           # the run's branch and checkpoints"
echo "  ls .baton/runs/*/                 # plan.md, review.json, events.jsonl, ..."
echo "  $BATON events $id"
exit "$rc"
