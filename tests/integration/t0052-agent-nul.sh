#!/bin/bash
test_description='an agent whose output holds NUL bytes: nothing after the first one is lost (execution.log, the failure reason); each NUL shows as \0'
. "$(dirname "$0")/../lib/test-lib.sh"

# nul_agent NAME EXIT: a `type: command` agent that, in its execute
# stage, prints "before", a NUL byte and "after" to stdout and stderr,
# then exits EXIT (0: goes on as the fake agent does).
nul_agent() {
	cat >"$1" <<-AGENT &&
	#!/bin/sh
	if [ "\$BATON_STAGE_KIND" = execute ]; then
		printf 'out-before\0out-after\n'
		printf 'err-before\0err-after\n' >&2
		[ $2 = 0 ] || exit $2
	fi
	exec "$FAKE_AGENT"
	AGENT
	chmod +x "$1"
}

setup_repo() {
	make_repo "$1" &&
		baton_init_with_agent "$1" "providers:
  nul: {type: command, command: [\"$TRASH_DIRECTORY/$1.sh\"]}
roles: {default: nul}
runtime: {judge: false}"
}

test_expect_success 'stdout with a NUL byte: execution.log keeps what follows it' '
	nul_agent ok.sh 0 &&
	setup_repo ok &&
	cd ok &&
	"$BATON" run "Add a feature" >../ok.out 2>&1 &&
	run=$(newest_run) &&
	log=.baton/runs/$run/execution.log &&
	test_grep -F "out-before\\0out-after" "$log" &&
	test_grep "fake-agent: edited feature.txt" "$log" &&
	! grep -q -P "\\x00" "$log"
'

test_expect_success 'stderr with a NUL byte: the failure names what follows it' '
	nul_agent fail.sh 3 &&
	setup_repo fail &&
	cd fail &&
	test_must_fail "$BATON" run "Add a feature" >../fail.out 2>&1 &&
	run=$(newest_run) &&
	run_field "$run" reason >../reason &&
	test_grep -F "err-before\\0err-after" ../reason
'

test_done
