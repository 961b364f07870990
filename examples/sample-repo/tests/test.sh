#!/bin/sh
# The checks of cli.sh. Each prints "ok - ..." or "FAIL - ..."; the script
# exits non-zero when any check fails.
cd "$(dirname "$0")/.." || exit 1
failed=0

check() {
	desc=$1
	shift
	if "$@" >/dev/null 2>&1; then
		echo "ok - $desc"
	else
		echo "FAIL - $desc"
		failed=1
	fi
}

check "--help prints the usage" sh -c './cli.sh --help | grep -q "^usage:"'
# shellcheck disable=SC2016 # expanded by the inner sh
check "greet greets by name" sh -c 'test "$(./cli.sh greet World)" = "Hello, World!"'
check "greet without a name fails" sh -c '! ./cli.sh greet'
check "an unknown command fails" sh -c '! ./cli.sh frobnicate'

exit $failed
