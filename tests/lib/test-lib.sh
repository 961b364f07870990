# test-lib.sh: the library every integration script sources (git-style).
#
# A script tests/integration/tNNNN-<area>.sh looks like this:
#
#	#!/bin/bash
#	test_description='what this script covers'
#	. "$(dirname "$0")/../lib/test-lib.sh"
#
#	test_expect_success 'setup' '
#		make_repo repo &&
#		baton_init_with_agent repo
#	'
#	test_expect_success 'a run reaches merge_ready' '
#		cd repo &&
#		"$BATON" run "Add a --version flag to the CLI"
#	'
#	test_done
#
# What the library does when it is sourced:
#   - creates a fresh trash directory for the script and cd's into it; it is
#     removed at the end unless a test failed or BATON_TEST_KEEP=1;
#   - points HOME at an empty directory inside it (so ~/.config/baton and
#     ~/.gitconfig never leak in), sets GIT_CONFIG_NOSYSTEM=1, a git identity,
#     LC_ALL=C and TZ=UTC, and clears BATON_*, AGENTRY_*, FAKE_* and GIT_*
#     variables inherited from the caller;
#   - exports BATON (the binary under test: $BATON_BIN, else ./baton at the
#     top of the repository), FAKE_AGENT (tests/lib/fake-agent), FAKE_STATE
#     (the fake agent's state directory; BATON_SANDBOX_RW lets the sandbox
#     bind it read-write) and TEST_DIRECTORY (tests/);
#   - kills, at exit, every background process the script started.
#
# Each test body runs in its own subshell with `set -e` (and an ERR trap that
# names the failing command), its output captured; "ok N - desc" or
# "not ok N - desc" is printed, followed by the output, indented, for
# failures (for every test with -v or BATON_TEST_VERBOSE=1). Because the body
# is a subshell, `cd` and variables do not carry over to the next test: keep
# state in files. A body that runs longer than BATON_TEST_TIMEOUT seconds
# (default 300) is killed with everything it started and fails.
#
# Helpers (each documented where it is defined):
#   assertions  test_must_fail, test_expect_code, test_cmp, test_grep,
#               test_path_is_file/_dir/_missing, test_line_count,
#               process_is_alive (zombies count as dead)
#   waiting     wait_for CMD SECONDS (CMD is eval'd inside wait_for: $1...
#               are not the caller's), wait_for_status RUN STATUS,
#               bg_start NAME CMD..., bg_wait NAME
#   fixtures    make_repo DIR, baton_init_with_agent DIR [YAML],
#               fake_calls RUN [KIND] (see tests/lib/fake-agent)
#   baton JSON  run_field, run_status, newest_run, transitions,
#               transition_pairs, test_jq EXPR FILE (these need jq)
#
# Options (arguments to the script, or environment):
#   -v, --verbose    BATON_TEST_VERBOSE=1   show the output of passing tests too
#   -x, --trace      BATON_TEST_TRACE=1     trace test bodies with set -x
#   -k, --keep       BATON_TEST_KEEP=1      keep the trash directory
#
# The last line a script prints is "N passed, M failed" (tests/run.sh reads
# it); test_done prints it and exits non-zero if any test failed.

# --- options ------------------------------------------------------------

for _tl_arg in "$@"; do
	case $_tl_arg in
	-v | --verbose) BATON_TEST_VERBOSE=1 ;;
	-x | --trace) BATON_TEST_TRACE=1 ;;
	-k | --keep) BATON_TEST_KEEP=1 ;;
	*)
		echo "test-lib: unknown option '$_tl_arg'" >&2
		exit 2
		;;
	esac
done
unset _tl_arg

# --- locations ----------------------------------------------------------

TEST_DIRECTORY=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || exit 1
BATON_SRC_ROOT=$(cd "$TEST_DIRECTORY/.." && pwd) || exit 1
TEST_NAME=$(basename "$0" .sh)
BATON=${BATON_BIN:-$BATON_SRC_ROOT/baton}
case $BATON in
/*) ;;
*) BATON=$(cd "$(dirname "$BATON")" && pwd)/$(basename "$BATON") ;;
esac
export TEST_DIRECTORY BATON_SRC_ROOT BATON

# --- a clean environment ------------------------------------------------

# Clear what the caller's environment could leak into baton, git or the
# fake agent. BATON_BIN and the BATON_TEST_* knobs are ours and stay.
for _tl_var in $(compgen -e); do
	case $_tl_var in
	BATON_BIN | BATON_TEST_* | BATON_SRC_ROOT) ;;
	BATON_* | AGENTRY_* | FAKE_* | GIT_*) unset "$_tl_var" ;;
	esac
done
unset _tl_var XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME XDG_CACHE_HOME \
	EDITOR VISUAL PAGER CDPATH
export FAKE_AGENT=$TEST_DIRECTORY/lib/fake-agent
# `baton serve` serves no HTTP in tests unless a test asks (serve_http):
# two tests on the default port at once would fight over it.
export BATON_LISTEN=off

export LC_ALL=C LANG=C TZ=UTC
export GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME='A U Thor' GIT_AUTHOR_EMAIL='author@example.com'
export GIT_COMMITTER_NAME='C O Mitter' GIT_COMMITTER_EMAIL='committer@example.com'
export GIT_TERMINAL_PROMPT=0 GIT_ADVICE=0

if ! [ -x "$BATON" ]; then
	echo "test-lib: no baton binary at '$BATON' (run 'make' or set BATON_BIN)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

# --- the trash directory ------------------------------------------------

TRASH_DIRECTORY=$(mktemp -d "${TMPDIR:-/tmp}/baton-test.$TEST_NAME.XXXXXX") || {
	echo "test-lib: cannot create a temporary directory" >&2
	echo "0 passed, 1 failed"
	exit 1
}
export TRASH_DIRECTORY
export HOME=$TRASH_DIRECTORY/home
export XDG_CONFIG_HOME=$HOME/.config
export FAKE_STATE=$TRASH_DIRECTORY/fake-state
# The sandbox (on by default where bwrap works) hides /tmp, the home and
# the repository: the scripted agents keep their records in FAKE_STATE,
# which it binds read-write for them.
export BATON_SANDBOX_RW=$FAKE_STATE
mkdir -p "$HOME" "$FAKE_STATE"
# The one global git setting tests want: a stable initial branch name and
# no advice noise in captured output.
cat >"$HOME/.gitconfig" <<'EOF'
[init]
	defaultBranch = main
[advice]
	detachedHead = false
EOF
cd "$TRASH_DIRECTORY" || exit 1

# --- PostgreSQL ---------------------------------------------------------

# tests/run.sh runs some scripts a second time on PostgreSQL, with
# BATON_TEST_PG_ADMIN the admin URL of a throwaway cluster it started
# (tools/pg.sh). There each repository baton_init_with_agent sets up gets
# a database of its own (its config's `store:`), so the scripts run
# unchanged.

# pg_new_db: creates a fresh database in that cluster; prints its URL.
_tl_dbs=0
pg_new_db() {
	local name
	_tl_dbs=$((_tl_dbs + 1))
	name="t_$(printf '%s' "$TEST_NAME" | tr -c 'a-z0-9' _)_$$_${_tl_dbs}_$RANDOM"
	psql -q -X -v ON_ERROR_STOP=1 "$BATON_TEST_PG_ADMIN" \
		-c "CREATE DATABASE $name" >/dev/null || {
		echo "pg_new_db: cannot create database '$name'" >&2
		return 1
	}
	echo "${BATON_TEST_PG_ADMIN%/*}/$name"
}

# db_query SQL: one statement against the store of the repository in the
# current directory (its config's `store:`, else .baton/baton.db), its
# rows printed with | between columns.
db_query() {
	local url
	url=$(sed -n 's/^store: *//p' .baton/config.yaml 2>/dev/null)
	case $url in
	postgres*://*) psql -q -X -A -t -v ON_ERROR_STOP=1 "$url" -c "$1" ;;
	*) sqlite3 .baton/baton.db "$1" ;;
	esac
}

test_count=0
test_success=0
test_failure=0
_tl_done=0
_tl_pgids=$TRASH_DIRECTORY/.test-pgids

# --- cleanup ------------------------------------------------------------

# Kill everything the script started. Processes are picked so that a pid
# reused by someone else is never hit:
#   - members of a test body's process group, in this script's session
#     (whatever a body ran in the background, and bg_start wrappers);
#   - processes whose environment holds this script's TRASH_DIRECTORY: baton,
#     and the agents it starts in sessions of their own (a kill -9 of baton
#     in a test can leave one behind), with their children;
#   - the fake agent's recorded hang pids, if still a fake agent or sleep.
_tl_kill_all() {
	local sid line f pid pg rest cmd
	local -a fields victims=()
	local -A groups=()
	[ -r /proc/$$/stat ] || {
		# No /proc: kill the body groups, and hope.
		[ -f "$_tl_pgids" ] && while read -r pg; do
			kill -KILL -- "-$pg" 2>/dev/null
		done <"$_tl_pgids"
		return 0
	}
	read -r line </proc/$$/stat
	read -r -a fields <<<"${line##*) }"
	sid=${fields[3]}
	if [ -f "$_tl_pgids" ]; then
		while read -r pg; do groups[$pg]=1; done <"$_tl_pgids"
	fi
	for f in /proc/[0-9]*/stat; do
		pid=${f#/proc/}
		pid=${pid%/stat}
		[ "$pid" = $$ ] && continue
		read -r line 2>/dev/null <"$f" || continue
		read -r -a fields <<<"${line##*) }"
		# fields: state ppid pgrp session ...
		if [ "${fields[3]}" = "$sid" ] && [ -n "${groups[${fields[2]}]:-}" ]; then
			victims+=("$pid")
		fi
	done
	# shellcheck disable=SC2013 # /proc paths have no spaces
	for f in $(grep -lzxF "TRASH_DIRECTORY=$TRASH_DIRECTORY" /proc/[0-9]*/environ 2>/dev/null); do
		pid=${f#/proc/}
		victims+=("${pid%/environ}")
	done
	for f in "$FAKE_STATE"/*.pid; do
		[ -f "$f" ] || continue
		read -r pid <"$f" || continue
		case $pid in '' | *[!0-9]*) continue ;; esac
		cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || continue
		case $cmd in
		*fake-agent*)
			# A fake agent leading its own group: the group is its own.
			read -r line 2>/dev/null <"/proc/$pid/stat" || continue
			read -r -a fields <<<"${line##*) }"
			[ "${fields[2]}" = "$pid" ] && kill -KILL -- "-$pid" 2>/dev/null
			victims+=("$pid")
			;;
		"sleep 1000 ") victims+=("$pid") ;;
		esac
	done
	rest=()
	for pid in "${victims[@]}"; do
		[ "$pid" = $$ ] || rest+=("$pid")
	done
	[ ${#rest[@]} -eq 0 ] || kill -KILL "${rest[@]}" 2>/dev/null
	return 0
}

_tl_exit() {
	local rc=$?
	[ "$_tl_done" = 1 ] && return
	# Only the script itself cleans up. A subshell signalled in the
	# instant after its fork, before bash resets the traps it inherited
	# (the watchdog of a test body that ended at once, killed by
	# test_expect_success), ran this too and killed every server the
	# script had started (t0075 lost its GitHub double that way).
	[ "$BASHPID" = "$$" ] || return
	_tl_kill_all
	echo "# $TEST_NAME: exited (status $rc) before test_done; trash kept in $TRASH_DIRECTORY" >&2
}
trap _tl_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- running tests ------------------------------------------------------

say() { printf '%s\n' "$*"; }

# The ERR trap of test bodies: name the command that ended the test. When a
# link of an && chain fails, the failing command bash reports is the whole
# `eval "$body"`; the body's DEBUG trap keeps the last simple command run at
# its top level in _tl_cmd, which is the link that failed, or the one before
# it when the failing link was a subshell. A helper that fails by
# `return 1` has said why already.
_tl_err() {
	# shellcheck disable=SC2016 # the literal text of the command
	case $2 in
	'eval "$body"')
		if [ -n "${_tl_cmd:-}" ]; then
			# (a subshell or pipeline link runs no top-level command, hence
			# "or after"; only the first line of a here-document command)
			echo "error: test-lib: failed (status $1) at or after: ${_tl_cmd%%$'\n'*}" >&2
		else
			echo "error: test-lib: the test body failed (status $1)" >&2
		fi
		;;
	return*) echo "error: test-lib: the command above failed (status $1)" >&2 ;;
	*) echo "error: test-lib: command failed (status $1): $2" >&2 ;;
	esac
}

# test_expect_success DESCRIPTION BODY
#
# Runs BODY in a subshell with set -e; the test passes when BODY exits 0.
test_expect_success() {
	local desc body out pid wd rc
	if [ $# -ne 2 ]; then
		echo "test-lib: test_expect_success needs DESCRIPTION and BODY" >&2
		exit 2
	fi
	desc=$1 body=$2
	test_count=$((test_count + 1))
	out=$TRASH_DIRECTORY/.test-$test_count.out

	# The body gets its own process group (set -m only around the fork), so
	# a timeout and the exit cleanup can kill all it started at once.
	set -m
	(
		set -eE
		trap '_tl_err $? "$BASH_COMMAND"' ERR
		if [ "${BATON_TEST_TRACE:-0}" = 1 ]; then
			set -x
		else
			trap '[ "$BASH_COMMAND" = "eval \"\$body\"" ] || _tl_cmd=$BASH_COMMAND' DEBUG
		fi
		_tl_cmd=
		eval "$body"
	) >"$out" 2>&1 </dev/null &
	pid=$!
	set +m
	echo "$pid" >>"$_tl_pgids"
	# The watchdog has a group of its own too, so that killing it also
	# kills its sleep.
	set -m
	(
		sleep "${BATON_TEST_TIMEOUT:-300}" &&
			echo "error: test-lib: timed out after ${BATON_TEST_TIMEOUT:-300}s" >>"$out" &&
			kill -KILL -- "-$pid"
	) >/dev/null 2>&1 </dev/null &
	wd=$!
	set +m
	# (stderr of wait: bash's "Killed" notice for a timed-out body)
	{
		wait "$pid"
		rc=$?
	} 2>/dev/null
	kill -- "-$wd" 2>/dev/null
	wait "$wd" 2>/dev/null

	if [ "$rc" -eq 0 ]; then
		test_success=$((test_success + 1))
		say "ok $test_count - $desc"
		[ "${BATON_TEST_VERBOSE:-0}" = 1 ] && sed 's/^/    /' "$out"
	else
		test_failure=$((test_failure + 1))
		say "not ok $test_count - $desc"
		sed 's/^/    /' "$out"
		[ "$rc" -gt 128 ] && say "    (exit status $rc)"
	fi
	return 0
}

# test_done
#
# Kills leftovers, prints the summary as the last line and exits: 0 when
# every test passed, 1 otherwise. The trash directory is removed only when
# everything passed and BATON_TEST_KEEP is not set.
test_done() {
	_tl_kill_all
	_tl_done=1
	cd / || true
	if [ "$test_failure" -eq 0 ] && [ "${BATON_TEST_KEEP:-0}" != 1 ]; then
		rm -rf "$TRASH_DIRECTORY"
	else
		say "# trash directory kept: $TRASH_DIRECTORY"
	fi
	[ "$test_failure" -eq 0 ] || say "# failed $test_failure among $test_count test(s)"
	say "$test_success passed, $test_failure failed"
	[ "$test_failure" -eq 0 ] && exit 0
	exit 1
}

# --- assertions ---------------------------------------------------------

# test_must_fail CMD [ARGS...]
#
# CMD must exit non-zero, but not by a signal (status > 128) and not with
# 126/127 (not executable / not found), which mean the test is broken.
test_must_fail() {
	local rc
	# (the || keeps a body's set -e from ending the test right here)
	"$@" && rc=0 || rc=$?
	if [ "$rc" -eq 0 ]; then
		echo "test_must_fail: command succeeded: $*" >&2
		return 1
	elif [ "$rc" -gt 128 ] && [ "$rc" -le 192 ]; then
		echo "test_must_fail: died by signal $((rc - 128)): $*" >&2
		return 1
	elif [ "$rc" -eq 126 ] || [ "$rc" -eq 127 ]; then
		echo "test_must_fail: command not found or not executable: $*" >&2
		return 1
	fi
	return 0
}

# test_expect_code CODE CMD [ARGS...]
#
# CMD must exit with exactly CODE.
test_expect_code() {
	local want=$1 rc
	shift
	"$@" && rc=0 || rc=$?
	if [ "$rc" -ne "$want" ]; then
		echo "test_expect_code: command exited $rc, wanted $want: $*" >&2
		return 1
	fi
	return 0
}

# test_cmp EXPECTED ACTUAL
test_cmp() {
	if [ $# -ne 2 ]; then
		echo "test_cmp: needs EXPECTED and ACTUAL" >&2
		return 1
	fi
	diff -u -- "$1" "$2"
}

# test_grep [!] [GREP-OPTIONS...] PATTERN FILE
#
# Like grep, quiet on success; on failure says what was (not) expected and
# shows the file. With a leading "!", the pattern must NOT match.
test_grep() {
	local negate=0 file
	if [ "$1" = "!" ]; then
		negate=1
		shift
	fi
	if [ $# -lt 2 ]; then
		echo "test_grep: needs PATTERN and FILE" >&2
		return 1
	fi
	file=${!#}
	if ! [ -f "$file" ]; then
		echo "test_grep: no such file: '$file'" >&2
		return 1
	fi
	if [ "$negate" = 0 ]; then
		grep -q "$@" && return 0
		echo "test_grep: no match for: ${*:1:$#-1}" >&2
	else
		grep -q "$@" || return 0
		echo "test_grep: unexpected match for: ${*:1:$#-1}" >&2
		grep "$@" | head -n 5 | sed 's/^/    > /' >&2
	fi
	echo "test_grep: contents of '$file':" >&2
	head -n 60 "$file" | sed 's/^/    | /' >&2
	return 1
}

test_path_is_file() {
	[ -f "$1" ] && return 0
	echo "test_path_is_file: '$1' is not a file" >&2
	return 1
}

test_path_is_dir() {
	[ -d "$1" ] && return 0
	echo "test_path_is_dir: '$1' is not a directory" >&2
	return 1
}

test_path_is_missing() {
	[ -e "$1" ] || [ -L "$1" ] || return 0
	echo "test_path_is_missing: '$1' exists" >&2
	return 1
}

# test_line_count OP N FILE    e.g. test_line_count = 3 out
test_line_count() {
	local n
	if [ $# -ne 3 ]; then
		echo "test_line_count: needs OP N FILE" >&2
		return 1
	fi
	n=$(wc -l <"$3")
	# shellcheck disable=SC2086
	test $n "$1" "$2" && return 0
	echo "test_line_count: line count of '$3' is $n, wanted $1 $2" >&2
	sed 's/^/    | /' "$3" | head -n 40 >&2
	return 1
}

# process_is_alive PID
#
# True when PID runs (a zombie does not count: nothing may reap orphans in a
# container, and kill -0 succeeds on zombies).
process_is_alive() {
	local state
	[ -r "/proc/$1/stat" ] || return 1
	state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# trash_procs CMDLINE
#
# The pids of live processes this script started (their environment holds
# its TRASH_DIRECTORY) whose command line is CMDLINE, arguments joined by
# spaces ("sleep 1000"). For agents in the sandbox, whose pid namespace
# makes the pids they write of themselves useless out here.
trash_procs() {
	local f pid
	# shellcheck disable=SC2013 # /proc paths have no spaces
	for f in $(grep -lzxF "TRASH_DIRECTORY=$TRASH_DIRECTORY" /proc/[0-9]*/environ 2>/dev/null); do
		pid=${f#/proc/}
		pid=${pid%/environ}
		[ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" = "$1 " ] &&
			process_is_alive "$pid" && echo "$pid"
	done
	return 0
}

# --- waiting ------------------------------------------------------------

# Microseconds since the epoch (bash 5's EPOCHREALTIME, else date).
_tl_now_us() {
	if [ -n "${EPOCHREALTIME:-}" ]; then
		local t=${EPOCHREALTIME/,/.}
		echo $((${t%.*} * 1000000 + 10#${t#*.}))
	else
		echo $(($(date +%s) * 1000000))
	fi
}

# wait_for CMD TIMEOUT_SECONDS
#
# Evaluates CMD every 0.1s until it succeeds (return 0) or TIMEOUT_SECONDS
# (default 30; whole seconds or with a fraction, e.g. 2.5) pass (return 1,
# after showing CMD's output once for diagnosis). Only for waiting on a
# background process to reach a state, never for asserting speed.
#
# CMD is evaluated inside wait_for: the caller's variables are visible, but
# $1, $2, ... are NOT the caller's arguments. In a function, expand those
# before the call (double quotes) or copy them to variables.
wait_for() {
	local _wf_cmd=$1 _wf_timeout=${2:-30} _wf_whole _wf_frac _wf_deadline
	_wf_whole=${_wf_timeout%%.*}
	_wf_frac=0
	case $_wf_timeout in
	*.*) _wf_frac=${_wf_timeout#*.}000000 _wf_frac=${_wf_frac:0:6} ;;
	esac
	_wf_deadline=$(($(_tl_now_us) + ${_wf_whole:-0} * 1000000 + 10#$_wf_frac))
	while :; do
		if (eval "$_wf_cmd") >/dev/null 2>&1; then
			return 0
		fi
		if [ "$(_tl_now_us)" -ge "$_wf_deadline" ]; then
			echo "wait_for: timed out after ${_wf_timeout}s: $_wf_cmd" >&2
			# shellcheck disable=SC2016 # a literal $1 in CMD
			case $_wf_cmd in
			*'$'[1-9]* | *'${'[1-9]*)
				echo "wait_for: note: \$1, \$2... in CMD are not the caller's arguments" >&2
				;;
			esac
			(
				set +eE
				trap - ERR
				eval "$_wf_cmd"
			) 2>&1 | tail -n 20 | sed 's/^/    | /' >&2
			return 1
		fi
		sleep 0.1
	done
}

# bg_start NAME CMD [ARGS...]
#
# Starts CMD in the background with stdout and stderr in NAME.out; its pid
# goes to NAME.pid and, once it ends, its exit status to NAME.rc. The files
# are relative to the current directory (use absolute names when the body
# cd's). The process is killed at the end of the script if still running.
bg_start() {
	local name=$1
	shift
	rm -f "$name.rc" "$name.pid"
	(
		"$@" >"$name.out" 2>&1 </dev/null &
		echo $! >"$name.pid"
		# (stderr of wait: no "Killed" notice when the cleanup kills CMD)
		wait $! 2>/dev/null
		echo $? >"$name.rc.tmp" && mv "$name.rc.tmp" "$name.rc"
	) &
	wait_for "test -s '$name.pid'" 10
}

# bg_wait NAME [TIMEOUT_SECONDS]
#
# Waits for a command started by bg_start to end and prints its exit status.
bg_wait() {
	local name=$1
	wait_for "test -f '$name.rc'" "${2:-120}" || return 1
	cat "$name.rc"
}

# --- fixtures -----------------------------------------------------------

# make_repo DIR
#
# Creates DIR as a git repository with one commit: a README, a tiny shell
# CLI (cli.sh), and a Makefile whose `test` target passes (it fails while a
# file named BROKEN exists, which the fake agent creates under
# FAKE_BREAK_TESTS=1).
make_repo() {
	local dir=$1
	mkdir -p "$dir" &&
		git init -q "$dir" &&
		(
			cd "$dir" &&
				printf '# sample\n\nA small project for baton tests.\n' >README &&
				cat >cli.sh <<-'EOF' &&
					#!/bin/sh
					# A tiny command line tool.
					case "$1" in
					--help) echo "usage: cli.sh [--help] [greet NAME]" ;;
					greet) echo "hello, $2" ;;
					*) echo "usage: cli.sh [--help] [greet NAME]" >&2; exit 2 ;;
					esac
				EOF
				chmod +x cli.sh &&
				printf '%s\n' \
					'test:' \
					'	@test ! -e BROKEN || { echo "FAIL: BROKEN is present"; exit 1; }' \
					'	@sh ./cli.sh greet world | grep -q "hello, world"' \
					'	@echo "tests passed"' \
					'' '.PHONY: test' >Makefile &&
				git add README cli.sh Makefile &&
				git commit -q -m "initial commit"
		)
}

# baton_init_with_agent DIR [EXTRA_YAML]
#
# Runs `baton init` in DIR, then writes .baton/config.yaml: the fake agent
# as provider "fake" and default role, validate.commands ["make test"], then
# EXTRA_YAML appended. A top-level key in EXTRA_YAML (providers, roles,
# validate) replaces the default section of that name instead of repeating it.
baton_init_with_agent() {
	local dir=$1 extra=${2:-} cfg keys
	(cd "$dir" && "$BATON" init >/dev/null) || {
		echo "baton_init_with_agent: 'baton init' failed in '$dir'" >&2
		return 1
	}
	cfg=$dir/.baton/config.yaml
	keys=" $(printf '%s\n' "$extra" | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\):.*/\1/p' | tr '\n' ' ') "
	{
		echo "# written by baton_init_with_agent (tests/lib/test-lib.sh)"
		case $keys in *" providers "*) ;; *)
			echo "providers:"
			echo "  fake: {type: command, command: [\"$FAKE_AGENT\"]}"
			;;
		esac
		case $keys in *" roles "*) ;; *) echo "roles: {default: fake}" ;; esac
		case $keys in *" validate "*) ;; *)
			echo 'validate: {commands: ["make test"], timeout_seconds: 120}'
			;;
		esac
		if [ -n "$extra" ]; then printf '%s\n' "$extra"; fi
		if [ -n "${BATON_TEST_PG_ADMIN:-}" ]; then
			echo "store: $(pg_new_db)" || return 1
		fi
	} >"$cfg.tmp" && mv "$cfg.tmp" "$cfg"
}

# --- agent CLIs and the mock model server ------------------------------

# Config for baton_init_with_agent: a pipeline of two calls, the edit and
# its review, for the tests that drive a Node agent CLI (each start costs
# seconds of CPU; the default pipeline's five calls are carried by the
# tests of the fake agent and baton's own).
EDIT_REVIEW="pipelines:
  edit-review:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
      - {name: review, kind: review}
workflow: {pipeline: edit-review}"
export EDIT_REVIEW

# The CLIs tools/agents.sh installs, and the mock model server
# (tests/mock/mockllm.c) they are driven against, offline.
AGENTS_BIN=${BATON_TEST_AGENTS_BIN:-$BATON_SRC_ROOT/.agents/node_modules/.bin}
MOCKLLM=${MOCKLLM:-$BATON_SRC_ROOT/build/tests/mockllm}
export AGENTS_BIN MOCKLLM

# need_agents NAME...
#
# Call at the top of a script that drives real CLIs. When one is not
# installed the script is skipped ("0 passed, 0 failed" and why), unless
# BATON_TEST_REQUIRE_AGENTS=1 (CI sets it), where that is a failure.
need_agents() {
	local a
	for a in "$@"; do
		[ -x "$AGENTS_BIN/$a" ] && continue
		if [ "${BATON_TEST_REQUIRE_AGENTS:-0}" = 1 ]; then
			echo "test-lib: agent CLI '$a' is not installed in $AGENTS_BIN (run tools/agents.sh)" >&2
			echo "0 passed, 1 failed"
			exit 1
		fi
		echo "skipped: agent CLI '$a' is not installed (run tools/agents.sh)"
		echo "0 passed, 0 failed"
		exit 0
	done
}

# mock_start NAME SCRIPT_JSON [MOCK_ARGS...]
#
# Starts the mock model server on 127.0.0.1 with the rules in SCRIPT_JSON;
# it logs every request to NAME.log (one JSON object per line). Call it at
# the top level of a script, not inside a test body: the mock dies with
# its parent. mock_url NAME prints its base URL.
mock_start() {
	local name=$1 script=$2
	shift 2
	rm -f "$TRASH_DIRECTORY/$name.port"
	"$MOCKLLM" --port-file "$TRASH_DIRECTORY/$name.port" --script "$script" \
		--log "$TRASH_DIRECTORY/$name.log" "$@" \
		>"$TRASH_DIRECTORY/$name.mock.out" 2>&1 &
	disown $! # the cleanup kills it quietly (its environment names us)
	wait_for "test -s '$TRASH_DIRECTORY/$name.port'" 10 || {
		echo "mock_start: the mock did not start:" >&2
		cat "$TRASH_DIRECTORY/$name.mock.out" >&2
		return 1
	}
}

mock_url() {
	echo "http://127.0.0.1:$(cat "$TRASH_DIRECTORY/$1.port")"
}

# start_forge_double NAME [DOUBLE_ARGS...]
#
# Starts the GitHub double (tests/mock/forgedouble.py, repository acme/app
# unless --repo says otherwise) on 127.0.0.1 and waits for the base URL
# it prints, which it puts in FORGE_URL (and NAME.url). Its output goes
# to NAME.double.out. Call it at the top level of a script: the cleanup
# kills it at the end (its environment names this script).
start_forge_double() {
	local name=$1
	shift
	rm -f "$TRASH_DIRECTORY/$name.double.out"
	python3 "$TEST_DIRECTORY/mock/forgedouble.py" "$@" \
		>"$TRASH_DIRECTORY/$name.double.out" 2>&1 </dev/null &
	disown $!
	wait_for "grep -q '^http://' '$TRASH_DIRECTORY/$name.double.out'" 10 || {
		echo "start_forge_double: the double did not start:" >&2
		cat "$TRASH_DIRECTORY/$name.double.out" >&2
		return 1
	}
	FORGE_URL=$(grep -m1 '^http://' "$TRASH_DIRECTORY/$name.double.out")
	echo "$FORGE_URL" >"$TRASH_DIRECTORY/$name.url"
	export FORGE_URL
}

# forge_call METHOD PATH [JSON]: a request to the double at FORGE_URL
# (its control endpoints /_double/..., or GitHub's); prints the answer.
# With Prism in front (tests/lib/forge.sh), /_double/... goes to the
# double itself, FORGE_DOUBLE_URL: Prism refuses what GitHub does not have.
forge_call() {
	local base=$FORGE_URL
	case $2 in /_double/*) base=${FORGE_DOUBLE_URL:-$FORGE_URL} ;; esac
	curl -sS -X "$1" -H 'Content-Type: application/json' \
		-H "Authorization: Bearer ${GITHUB_TOKEN:-}" \
		${3:+--data "$3"} "$base$2"
}

# A mock script that carries a feature run through every stage: a plan,
# a design, one file written by the implementer (hello.txt with TEXT), an
# approving review and a passing verification. feature_script FILE TEXT
feature_script() {
	cat >"$1" <<-EOF
	{"rules": [
	  {"match": "You are the planner",
	   "text": "# Plan\n\n1. Add hello.txt with a greeting.\n"},
	  {"match": "You are the architect",
	   "text": "# Design\n\nOne new file at the top: hello.txt.\n"},
	  {"match": "You are the implementer",
	   "actions": [{"write": {"path": "hello.txt", "content": "$2\n"}}],
	   "text": "Wrote hello.txt."},
	  {"match": "You are fixing", "text": "Nothing left to fix."},
	  {"match": "You are the reviewer",
	   "text": "The change does what the task asks.\nDECISION: APPROVED"},
	  {"match": "You are the verifier",
	   "text": "hello.txt is there.\nVERIFICATION: PASSED"}
	]}
	EOF
}

# fake_calls RUN_ID [KIND]
#
# Prints the fake agent's calls for a run ("kind attempt" per line), or only
# those of KIND.
fake_calls() {
	local f=$FAKE_STATE/$1.calls
	[ -f "$f" ] || return 0
	if [ -n "${2:-}" ]; then
		grep "^$2 " "$f" || true
	else
		cat "$f"
	fi
}

# --- reading baton's JSON (jq) -------------------------------------------

# The integration tests read baton's --json output with jq (.ci/run
# installs it).
if ! command -v jq >/dev/null 2>&1; then
	echo "test-lib: jq is required (apt-get install jq)" >&2
	echo "0 passed, 1 failed"
	_tl_done=1
	exit 1
fi

# run_field RUN FIELD: one field of `baton show RUN --json` (jq -r).
run_field() {
	"$BATON" show "$1" --json | jq -r ".$2"
}

# run_status RUN: the run's status.
run_status() {
	run_field "$1" status
}

# newest_run: the id of the newest run (`baton status --json`, newest first).
newest_run() {
	"$BATON" status --json | jq -r '.[0].id // empty'
}

# wait_for_new_run PREV: waits until a run newer than PREV (the newest
# run before a background `baton run` started; empty for none) exists,
# and prints its id. Waiting for any newest run would, in a repository
# with runs, take the one before.
wait_for_new_run() {
	wait_for "test -n \"\$(newest_run)\" && test \"\$(newest_run)\" != '$1'" &&
	newest_run
}

# transitions RUN: the `to` of each transition event, one per line.
transitions() {
	"$BATON" events "$1" --json | jq -r 'select(.type == "transition") | .to'
}

# transition_pairs RUN: "from -> to" of each transition event, one per line.
transition_pairs() {
	"$BATON" events "$1" --json |
		jq -r 'select(.type == "transition") | "\(.from // "(new)") -> \(.to)"'
}

# wait_for_status RUN STATUS [TIMEOUT_SECONDS]
#
# Waits until the run RUN has status STATUS (e.g. a background `baton run`
# reaching waiting_for_approval). Prefer it to a hand-written
# `wait_for "... | jq -e ..."`: jq 1.6 exits 0 on empty input, so such a
# condition holds before the run even exists.
wait_for_status() {
	wait_for "test \"\$(run_status '$1' 2>/dev/null)\" = '$2'" "${3:-60}"
}

# test_jq EXPR FILE
#
# FILE must hold JSON for which jq's EXPR is true (neither false nor null).
# Unlike a bare `jq -e`, an empty FILE fails (jq 1.6 exits 0 on no input).
test_jq() {
	if [ $# -ne 2 ]; then
		echo "test_jq: needs EXPR and FILE" >&2
		return 1
	fi
	if ! [ -s "$2" ]; then
		echo "test_jq: '$2' is missing or empty" >&2
		return 1
	fi
	jq -e "$1" "$2" >/dev/null && return 0
	echo "test_jq: not true: $1" >&2
	echo "test_jq: contents of '$2':" >&2
	head -n 60 "$2" | sed 's/^/    | /' >&2
	return 1
}

# --- the HTTP server ----------------------------------------------------

WSCLIENT=${WSCLIENT:-$BATON_SRC_ROOT/build/tests/wsclient}
export WSCLIENT

# serve_http NAME [SERVE ARGS...]
#
# In the current repository, starts `baton serve` with its HTTP server on
# a free port of 127.0.0.1 (bg_start NAME, so NAME.out has its output),
# waits until it listens, and sets HTTP_URL (http://127.0.0.1:PORT),
# HTTP_PORT and HTTP_TOKEN.
serve_http() {
	local name=$1
	shift
	rm -f .baton/http.url
	BATON_LISTEN=127.0.0.1:0 bg_start "$name" "$BATON" serve "$@" &&
		wait_for 'test -s .baton/http.url' 20 || return 1
	HTTP_URL=$(sed 's|/$||' .baton/http.url)
	HTTP_PORT=${HTTP_URL##*:}
	HTTP_TOKEN=$(cat .baton/token)
	export HTTP_URL HTTP_PORT HTTP_TOKEN
}

# api METHOD PATH [BODY]
#
# Calls the API with the token: the body of the answer on stdout, its
# status in ./api.status. Fails only when curl cannot connect.
api() {
	local method=$1 path=$2
	shift 2
	curl -s -o api.body -w '%{http_code}' -X "$method" \
		-H "Authorization: Bearer $HTTP_TOKEN" \
		${1+-H "Content-Type: application/json" --data-binary "$1"} \
		"$HTTP_URL$path" >api.status || return 1
	cat api.body
}

# api_expect STATUS METHOD PATH [BODY]: api, and check the status.
api_expect() {
	local want=$1
	shift
	api "$@" >api.out || return 1
	if [ "$(cat api.status)" != "$want" ]; then
		echo "api $*: status $(cat api.status), expected $want: $(cat api.out)" >&2
		return 1
	fi
	cat api.out
}
