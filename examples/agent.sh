#!/bin/sh
# examples/agent.sh: an example `type: command` agent for baton's demo.
#
# This is NOT an AI agent. It is a deterministic stand-in that knows exactly
# one task, "Add a --version flag to the CLI", on exactly one project, the
# sample in examples/sample-repo (examples/demo.sh sets that up). It shows
# what any command agent does: baton runs it in the run's worktree with the
# prompt on stdin and BATON_STAGE_KIND, BATON_OUT_DIR, ... in the
# environment; it edits the worktree and leaves its artifacts (plan.md,
# review.json, ...) in BATON_OUT_DIR, the call's output folder, from where
# baton takes them into the run folder (in the sandbox, the run folder is
# read-only). Real agents (Claude Code, Codex, any
# CLI or HTTP model) come in through `providers:` in .baton/config.yaml, on
# the same interface; see docs/.
#
# Set EXAMPLE_AGENT_FORGET_TEST=1 to have the execute stage "forget" the
# test, so that the review asks for changes and the fix loop runs once.
set -u

VERSION=0.1.0
TASK_HINT="Add a --version flag to the CLI"

say() { printf '%s\n' "$*"; }
die() {
	say "examples/agent.sh: $*" >&2
	exit 1
}

kind=${BATON_STAGE_KIND:?BATON_STAGE_KIND is not set: run me from baton}
run_dir=${BATON_RUN_DIR:?BATON_RUN_DIR is not set: run me from baton}
# where artifacts go (a baton without BATON_OUT_DIR took them in run_dir)
out_dir=${BATON_OUT_DIR:-$run_dir}

# The prompt: on stdin, or in BATON_PROMPT_FILE.
if [ -t 0 ] && [ -n "${BATON_PROMPT_FILE:-}" ]; then
	prompt=$(cat "$BATON_PROMPT_FILE")
else
	prompt=$(cat)
fi
# baton's prompts carry the task on a "Task: ..." line.
task=$(printf '%s\n' "$prompt" | sed -n 's/^Task: //p' | head -n 1)

# Be honest about what this stand-in can do.
if ! printf '%s\n' "${task:-$prompt}" | grep -qi -e '--version' -e 'version flag'; then
	die "I am a scripted example that only knows the task '$TASK_HINT';" \
		"for '${task:-this task}', configure a real agent provider in .baton/config.yaml"
fi
[ -n "$task" ] || task=$TASK_HINT
if ! [ -f cli.sh ] || ! [ -f tests/test.sh ]; then
	die "I only know the sample project of examples/sample-repo (cli.sh, tests/test.sh)"
fi

# write FILE: stdin to FILE atomically (temporary file, then rename).
write() {
	cat >"$1.tmp.$$" && mv "$1.tmp.$$" "$1"
}

# --- what "done" means for this task ---------------------------------------

has_flag() { grep -q -e '^--version)' cli.sh; }
has_usage() { ./cli.sh --help 2>/dev/null | grep -q -e '--version'; }
flag_works() { ./cli.sh --version 2>/dev/null | grep -q "^cli.sh [0-9][0-9.]*\$"; }
has_test() { grep -q -e '--version' tests/test.sh; }
tests_pass() { make test >"${TMPDIR:-/tmp}/agent-sh-test.$$" 2>&1; }

# --- edits -------------------------------------------------------------------

# A VERSION variable before usage(), and a --version branch first in the case.
add_flag() {
	awk -v ver="$VERSION" '
		/^usage\(\) *\{/ && !v { print "VERSION=" ver; print ""; v = 1 }
		{ print }
		/^case "\$\{1:-\}" in$/ && !c {
			print "--version)"
			print "\techo \"cli.sh $VERSION\""
			print "\t;;"
			c = 1
		}
	' cli.sh >cli.sh.new &&
		cat cli.sh.new >cli.sh && rm -f cli.sh.new
}

# The flag in the usage line and in the header comment.
add_usage() {
	awk '
		/echo "usage: cli.sh \[--help\] / && !u {
			sub(/\[--help\] /, "[--help] [--version] ")
			u = 1
		}
		{ print }
		/^#   \.\/cli\.sh --help / && !h {
			print "#   ./cli.sh --version     print the version"
			h = 1
		}
	' cli.sh >cli.sh.new &&
		cat cli.sh.new >cli.sh && rm -f cli.sh.new
}

# A check in tests/test.sh, before its final exit.
add_test() {
	awk '
		/^exit \$failed/ && !t {
			print "check \"--version prints the version\" sh -c '\''./cli.sh --version | grep -q \"^cli.sh [0-9]\"'\''"
			print ""
			t = 1
		}
		{ print }
	' tests/test.sh >tests/test.sh.new &&
		cat tests/test.sh.new >tests/test.sh && rm -f tests/test.sh.new
}

# Brings the worktree to "done", doing only what is missing; says what it
# did on stdout.
complete_change() {
	skip_test=${1:-0}
	if has_flag; then say "- cli.sh already handles --version"; else
		add_flag && say "- cli.sh: added VERSION=$VERSION and a --version branch printing 'cli.sh $VERSION'"
	fi
	if has_usage; then say "- the usage already mentions --version"; else
		add_usage && say "- cli.sh: the usage line and header comment mention --version"
	fi
	if [ "$skip_test" = 1 ]; then
		say "- (left out the test, as EXAMPLE_AGENT_FORGET_TEST asks)"
	elif has_test; then say "- tests/test.sh already checks --version"; else
		add_test && say "- tests/test.sh: added a check that --version prints the version"
	fi
}

# --- checks shared by review and verify ----------------------------------------

# Runs every check; prints one JSON finding per failed check (comma
# separated) to stdout. Returns 0 when all pass.
findings() {
	sep=""
	ok=0
	if ! flag_works; then
		printf '%s{"severity": "high", "file": "cli.sh", "line": 1, "message": "./cli.sh --version does not print cli.sh VERSION"}' "$sep"
		sep=", "
		ok=1
	fi
	if ! has_usage; then
		printf '%s{"severity": "low", "file": "cli.sh", "line": 1, "message": "the --help usage does not mention --version"}' "$sep"
		sep=", "
		ok=1
	fi
	if ! has_test; then
		printf '%s{"severity": "medium", "file": "tests/test.sh", "line": 1, "message": "no test covers --version"}' "$sep"
		sep=", "
		ok=1
	fi
	if ! tests_pass; then
		printf '%s{"severity": "high", "file": "Makefile", "line": 1, "message": "make test fails"}' "$sep"
		ok=1
	fi
	rm -f "${TMPDIR:-/tmp}/agent-sh-test.$$"
	return $ok
}

# --- the stages ----------------------------------------------------------------

case $kind in
plan)
	write "$out_dir/plan.md" <<EOF
# Plan: $task

## What changes
1. \`cli.sh\`: add a \`VERSION\` variable ($VERSION) and a \`--version\` branch
   in the argument \`case\` that prints \`cli.sh $VERSION\` and exits 0.
2. \`cli.sh\`: mention \`--version\` in the usage line and the header comment.
3. \`tests/test.sh\`: add a check that \`./cli.sh --version\` prints the
   version; \`make test\` runs it.

## How it is tested
\`make test\` (tests/test.sh) gains one check; the existing checks must keep
passing.

## Risks
- \`--help\` output changes (one more flag in the usage line); the existing
  check only looks for the \`usage:\` prefix.
EOF
	say "wrote plan.md: 3 steps in cli.sh and tests/test.sh"
	;;
architect)
	write "$out_dir/architecture.md" <<EOF
# Design: $task

- One constant, \`VERSION=$VERSION\`, at the top of \`cli.sh\`: the single place
  the version is written.
- \`--version\` is handled first in the \`case\`, like \`--help\`: it prints
  \`cli.sh \$VERSION\` on stdout and exits 0; it ignores later arguments.
- No new files, no new dependencies. The test goes in \`tests/test.sh\` with the
  existing \`check\` helper.
EOF
	say "wrote architecture.md"
	;;
execute)
	say "Implemented '$task':"
	complete_change "${EXAMPLE_AGENT_FORGET_TEST:-0}"
	;;
fix)
	say "Fixing the findings:"
	out=$(complete_change 0)
	say "$out"
	if tests_pass; then
		tests="make test passes"
	else
		tests="make test still fails: $(tail -n 5 "${TMPDIR:-/tmp}/agent-sh-test.$$" | tr '\n' ' ')"
	fi
	rm -f "${TMPDIR:-/tmp}/agent-sh-test.$$"
	say "- $tests"
	write "$out_dir/finding-responses.md" <<EOF
# Finding responses

$out
- $tests
EOF
	;;
review)
	if f=$(findings); then
		decision=APPROVED
		summary="./cli.sh --version prints cli.sh $VERSION, the usage mentions it, a test covers it, and make test passes"
	else
		decision=CHANGES_REQUESTED
		summary="the --version change is incomplete: see the findings"
	fi
	printf '{"decision": "%s", "summary": "%s", "findings": [%s]}\n' \
		"$decision" "$summary" "$f" | write "$out_dir/review.json"
	{
		say "# Review: $decision"
		say ""
		say "$summary"
	} | write "$out_dir/review.md"
	say "review: $decision"
	;;
verify)
	if findings >/dev/null; then
		decision=PASSED
		summary="ran ./cli.sh --version ($(./cli.sh --version)) and make test: both pass"
	else
		decision=FAILED
		summary="./cli.sh --version or make test does not pass"
	fi
	printf '{"decision": "%s", "summary": "%s"}\n' "$decision" "$summary" |
		write "$out_dir/verification.json"
	printf '# Verification: %s\n\n%s\n' "$decision" "$summary" |
		write "$out_dir/verification.md"
	say "verification: $decision"
	;;
*)
	die "I do not know the stage kind '$kind'"
	;;
esac
