#!/bin/bash
test_description='a daemon an agent starts outside its session and group (setsid) does not outlive the call: killed when the stage ends and on abort'
. "$(dirname "$0")/../lib/test-lib.sh"

# daemon_agent NAME: a `type: command` agent that, in its execute stage,
# starts a setsid daemon appending a line to NAME.ticks every 0.1 s (its
# pid in NAME.daemon), then does what the fake agent does (FAKE_* apply).
# Without the sandbox, whose pid namespace ends such a daemon by itself
# (t0038): here baton's subreaper must find and kill it.
daemon_agent() {
	cat >"$1.sh" <<-EOF &&
	#!/bin/sh
	if [ "\$BATON_STAGE_KIND" = execute ]; then
		setsid sh -c 'echo \$\$ >"$TRASH_DIRECTORY/$1.daemon.tmp"
			mv "$TRASH_DIRECTORY/$1.daemon.tmp" "$TRASH_DIRECTORY/$1.daemon"
			while :; do echo tick >>"$TRASH_DIRECTORY/$1.ticks"; touch daemon.txt; sleep 0.1; done' \
			</dev/null >/dev/null 2>&1 &
		while [ ! -s "$TRASH_DIRECTORY/$1.ticks" ]; do sleep 0.05; done
	fi
	exec "$FAKE_AGENT"
	EOF
	chmod +x "$1.sh" &&
		make_repo "$1" &&
		baton_init_with_agent "$1" "providers:
  hostile: {type: command, command: [\"$TRASH_DIRECTORY/$1.sh\"]}
roles: {default: hostile}
execution: {sandbox: none}"
}

# daemon_is_dead NAME: its pid is gone and its file stops changing.
daemon_is_dead() {
	local pid n
	pid=$(cat "$TRASH_DIRECTORY/$1.daemon") &&
		! process_is_alive "$pid" &&
		n=$(wc -l <"$TRASH_DIRECTORY/$1.ticks") &&
		sleep 0.3 &&
		test "$(wc -l <"$TRASH_DIRECTORY/$1.ticks")" = "$n"
}

test_expect_success 'the stage ends: the setsid daemon is killed with it' '
	daemon_agent staged &&
	cd staged &&
	test_expect_code 0 "$BATON" run "Add hello.txt" >../staged.out 2>&1 &&
	cd .. &&
	test -s staged.daemon &&
	daemon_is_dead staged
'

test_expect_success 'baton abort during the call: the daemon is killed too' '
	daemon_agent aborted &&
	cd aborted &&
	FAKE_STATE=$TRASH_DIRECTORY/aborted.state FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=hang \
		bg_start "$TRASH_DIRECTORY/aborted.run" "$BATON" run "Hang" &&
	wait_for "test -s ../aborted.state/hang.pid && test -s ../aborted.daemon" &&
	process_is_alive "$(cat ../aborted.daemon)" &&
	"$BATON" abort "$(newest_run)" >../aborted.abort.out &&
	rc=$(bg_wait "$TRASH_DIRECTORY/aborted.run") &&
	test "$rc" = 3 &&
	cd .. &&
	daemon_is_dead aborted
'

test_expect_success 'cleanup: no daemon of this script is left' '
	for f in *.daemon; do
		kill -9 "$(cat "$f")" 2>/dev/null || :
	done
'

test_done
