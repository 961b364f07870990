# forge.sh: the GitHub double for integration tests (issue 19), sourced
# after test-lib.sh:
#
#	. "$(dirname "$0")/../lib/test-lib.sh"
#	. "$TEST_DIRECTORY/lib/forge.sh"
#	start_forge_double --remote "$TRASH_DIRECTORY/remote.git"
#	# FORGE_URL: baton's forge.api_url; FORGE_DOUBLE_URL: /_double/*
#
# start_forge_double starts tests/mock/forgedouble.py and, when Prism is
# installed (tools/forge-tools.sh), `prism proxy --errors` in front of it,
# checking every request baton sends and every answer the double gives
# against GitHub's own OpenAPI description (@octokit/openapi,
# api.github.com.json). A request GitHub would refuse then answers 422,
# an answer GitHub would never give 500, both application/problem+json
# naming the violation (and Prism's log, forge_violations, lists them),
# so the test fails where the double or the client is wrong.
#
# GitHub's description names one server, https://api.github.com, with no
# path: Prism matches the client's /repos/... as they come and forwards
# each to the double's URL with the same path and query. A path GitHub
# does not have (the double's /_double/*) is refused, hence
# FORGE_DOUBLE_URL.
#
# Without Prism the test talks to the double directly (FORGE_URL is the
# double's URL and FORGE_PRISM is empty), unless BATON_TEST_REQUIRE_PRISM=1
# (CI sets it), where a missing Prism fails the script.
#
# Call it at the top level of a script, not inside a test body (a body is
# a subshell: the variables would not outlive it). Both processes carry
# the script's TRASH_DIRECTORY in their environment, so test-lib's
# cleanup kills them at exit like every server a test starts;
# stop_forge_double stops them earlier.

# where tools/forge-tools.sh installed Prism (its BATON_FORGE_TOOLS_DIR;
# test-lib clears BATON_* but BATON_TEST_*)
FORGE_TOOLS=${BATON_TEST_FORGE_TOOLS:-$BATON_SRC_ROOT/.forge-tools}
FORGE_PRISM_BIN=$FORGE_TOOLS/node_modules/.bin/prism
FORGE_OPENAPI=$FORGE_TOOLS/node_modules/@octokit/openapi/generated/api.github.com.json
FORGE_TOKEN=${FORGE_TOKEN:-ghp_forge_test_secret_0123456789}
export FORGE_TOOLS FORGE_PRISM_BIN FORGE_OPENAPI FORGE_TOKEN

# True when Prism and GitHub's description are installed.
prism_available() {
	[ -x "$FORGE_PRISM_BIN" ] && [ -f "$FORGE_OPENAPI" ]
}

# need_prism: at the top of a script that means nothing without Prism:
# skips the script ("0 passed, 0 failed" and why) when it is missing,
# fails it under BATON_TEST_REQUIRE_PRISM=1.
need_prism() {
	prism_available && return 0
	if [ "${BATON_TEST_REQUIRE_PRISM:-0}" = 1 ]; then
		echo "forge.sh: Prism is not installed in $FORGE_TOOLS (run tools/forge-tools.sh)" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	echo "skipped: Prism is not installed (run tools/forge-tools.sh)"
	echo "0 passed, 0 failed"
	exit 0
}

# _forge_wait_line FILE PID PATTERN SECONDS
#
# Prints the first line of FILE matching the extended regular expression
# PATTERN, waiting for it as PID writes FILE (tail -F wakes on each
# write, read -t bounds the wait: no polling). Fails, showing FILE's tail,
# when PID ends or SECONDS pass first. (No timeout(1) here: on its signal
# it signals its whole process group, which was this script's.)
_forge_wait_line() {
	local file=$1 pid=$2 pattern=$3 secs=$4 fd tailpid line= got left
	local end=$((SECONDS + secs))
	# (the subshell must not run test-lib's EXIT trap, which kills every
	# process of the script, should it be stopped before its exec)
	exec {fd}< <(
		trap - EXIT INT TERM
		exec tail -n +1 -F --pid="$pid" "$file" 2>/dev/null
	)
	tailpid=$!
	while left=$((end - SECONDS)) && [ "$left" -gt 0 ] &&
		IFS= read -r -t "$left" got <&"$fd"; do
		if [[ $got =~ $pattern ]]; then
			line=$got
			break
		fi
	done
	kill "$tailpid" 2>/dev/null
	exec {fd}<&-
	if [ -z "$line" ]; then
		echo "forge.sh: no line matching '$pattern' in $file within ${secs}s:" >&2
		tail -n 20 "$file" | sed 's/^/    | /' >&2
		return 1
	fi
	printf '%s\n' "$line"
}

# GitHub's description as Prism can check it (tests/mock/openapi_for_prism.py
# explains why), made once per installed description and kept beside it.
_forge_openapi_for_prism() {
	local out=$FORGE_TOOLS/api.github.com.prism.json
	local fixer=$TEST_DIRECTORY/mock/openapi_for_prism.py
	if ! [ -s "$out" ] || [ "$out" -ot "$fixer" ] || [ "$out" -ot "$FORGE_OPENAPI" ]; then
		[ -w "$FORGE_TOOLS" ] || out=$TRASH_DIRECTORY/api.github.com.prism.json
		# Written aside and renamed: tests running at once may make it
		# together, and none must read a half-written description.
		python3 "$fixer" "$FORGE_OPENAPI" "$out.$$" >&2 || return 1
		mv -f "$out.$$" "$out" || return 1
	fi
	printf '%s\n' "$out"
}

# start_forge_double [NAME] [--remote PATH] [--no-prism] [DOUBLE_ARGS...]
#
# Starts the double (repository acme/app, token $FORGE_TOKEN unless
# DOUBLE_ARGS has --token; --remote: the bare repository it fronts) and,
# when Prism is there, Prism in front of it. Exports FORGE_URL (what
# baton's forge.api_url should be), FORGE_DOUBLE_URL (the double itself,
# for POST /_double/* and GET /_double/requests: Prism refuses paths
# GitHub does not have), FORGE_PRISM (Prism's URL, empty without it) and
# FORGE_PRISM_LOG (its output). The same go to $TRASH_DIRECTORY/forge.env
# for test bodies that source it, and FORGE_URL to NAME.url. It replaces
# test-lib.sh's start_forge_double NAME [DOUBLE_ARGS...], which starts the
# double alone, and takes the same arguments.
start_forge_double() {
	local use_prism=1 name=forge spec pid line
	local -a args=()
	case ${1:-} in
	-* | '') ;;
	*) name=$1 && shift ;;
	esac
	while [ $# -gt 0 ]; do
		case $1 in
		--remote) args+=(--remote "$2") && shift 2 ;;
		--token) FORGE_TOKEN=$2 && shift 2 ;;
		--no-prism) use_prism=0 && shift ;;
		*) args+=("$1") && shift ;;
		esac
	done
	args+=(--token "$FORGE_TOKEN")
	export FORGE_TOKEN
	if [ "$use_prism" = 1 ] && ! prism_available; then
		if [ "${BATON_TEST_REQUIRE_PRISM:-0}" = 1 ]; then
			echo "start_forge_double: Prism is not installed in $FORGE_TOOLS (run tools/forge-tools.sh)" >&2
			return 1
		fi
		use_prism=0
	fi
	python3 "$TEST_DIRECTORY/mock/forgedouble.py" "${args[@]}" \
		>"$TRASH_DIRECTORY/forgedouble.out" 2>"$TRASH_DIRECTORY/forgedouble.err" &
	pid=$!
	disown "$pid"
	echo "$pid" >"$TRASH_DIRECTORY/forgedouble.pid"
	line=$(_forge_wait_line "$TRASH_DIRECTORY/forgedouble.out" "$pid" \
		'^http://127\.0\.0\.1:[0-9]+$' 20) || {
		cat "$TRASH_DIRECTORY/forgedouble.err" >&2
		return 1
	}
	FORGE_DOUBLE_URL=$line
	FORGE_URL=$line
	FORGE_PRISM=
	FORGE_PRISM_LOG=
	if [ "$use_prism" = 1 ]; then
		spec=$(_forge_openapi_for_prism) || return 1
		FORGE_PRISM_LOG=$TRASH_DIRECTORY/prism.log
		# --errors: a violation is the answer (422 for a request, 500
		# for a response), not only a line in the log. -p 0: a free port,
		# which the "listening on" line names.
		"$FORGE_PRISM_BIN" proxy --errors -h 127.0.0.1 -p 0 \
			"$spec" "$FORGE_DOUBLE_URL" >"$FORGE_PRISM_LOG" 2>&1 &
		pid=$!
		disown "$pid"
		echo "$pid" >"$TRASH_DIRECTORY/prism.pid"
		line=$(_forge_wait_line "$FORGE_PRISM_LOG" "$pid" \
			'Prism is listening on http://127\.0\.0\.1:[0-9]+' 120) ||
			return 1
		FORGE_PRISM=$(printf '%s\n' "$line" | grep -oE 'http://127\.0\.0\.1:[0-9]+')
		FORGE_URL=$FORGE_PRISM
		# the Link headers and API URLs the double writes: Prism's, as
		# GitHub's name api.github.com, so that pages come back through it
		curl -sf -X POST -d "{\"public_url\": \"$FORGE_PRISM\"}" \
			"$FORGE_DOUBLE_URL/_double/config" >/dev/null || {
			echo "start_forge_double: the double refused its config" >&2
			return 1
		}
	fi
	export FORGE_URL FORGE_DOUBLE_URL FORGE_PRISM FORGE_PRISM_LOG
	{
		printf 'FORGE_URL=%s\n' "$FORGE_URL"
		printf 'FORGE_DOUBLE_URL=%s\n' "$FORGE_DOUBLE_URL"
		printf 'FORGE_PRISM=%s\n' "$FORGE_PRISM"
		printf 'FORGE_PRISM_LOG=%s\n' "$FORGE_PRISM_LOG"
		printf 'FORGE_TOKEN=%s\n' "$FORGE_TOKEN"
	} >"$TRASH_DIRECTORY/forge.env"
	echo "$FORGE_URL" >"$TRASH_DIRECTORY/$name.url"
}

# stop_forge_double: stops Prism and the double (test-lib's cleanup does
# it at exit anyway).
stop_forge_double() {
	local f pid
	for f in prism forgedouble; do
		[ -f "$TRASH_DIRECTORY/$f.pid" ] || continue
		read -r pid <"$TRASH_DIRECTORY/$f.pid"
		kill "$pid" 2>/dev/null
		rm -f "$TRASH_DIRECTORY/$f.pid"
	done
	return 0
}

# forge_double VERB JSON: a control request (POST /_double/VERB); prints
# the answer.
forge_double() {
	curl -sf -X POST -H 'Content-Type: application/json' --data-binary "$2" \
		"$FORGE_DOUBLE_URL/_double/$1"
}

# forge_requests: the requests the double answered, as JSON.
forge_requests() {
	curl -sf "$FORGE_DOUBLE_URL/_double/requests"
}

# forge_mark: later forge_violations see only what Prism logs from now
# on (a test that provoked violations on purpose is behind the mark).
forge_mark() {
	[ -n "${FORGE_PRISM_LOG:-}" ] && [ -f "$FORGE_PRISM_LOG" ] || return 0
	wc -l <"$FORGE_PRISM_LOG" >"$TRASH_DIRECTORY/prism.mark"
}

# forge_violations: Prism's violations since forge_mark (or the start;
# nothing without Prism). A test shows them when it fails;
# forge_no_violations fails when there is one.
forge_violations() {
	local from=0
	[ -n "${FORGE_PRISM_LOG:-}" ] && [ -f "$FORGE_PRISM_LOG" ] || return 0
	[ -f "$TRASH_DIRECTORY/prism.mark" ] && read -r from <"$TRASH_DIRECTORY/prism.mark"
	tail -n +$((from + 1)) "$FORGE_PRISM_LOG" | grep -E 'error +Violation:|Request terminated with error' |
		sed 's/^.*\] *//'
	return 0
}

forge_no_violations() {
	local v
	v=$(forge_violations)
	[ -z "$v" ] && return 0
	echo "Prism found what GitHub would not send or accept:" >&2
	printf '%s\n' "$v" | sed 's/^/    /' >&2
	return 1
}
