#!/bin/bash
test_description='the database clock: a host whose clock is off by ten minutes (faketime) holds its leases on a shared PostgreSQL store as any other: no takeover while it lives, a takeover lease_seconds after it dies (not ten minutes earlier or later); baton doctor --store shows its skew'
. "$(dirname "$0")/../lib/test-lib.sh"

# Needs the cluster tests/run.sh starts for its PostgreSQL pass.
if [ -z "${BATON_TEST_PG_ADMIN:-}" ] || [ -z "${BATON_TEST_PG_DIR:-}" ]; then
	say "skipped: no PostgreSQL (tests/run.sh runs this in its PostgreSQL pass)"
	test_done
fi
if ! command -v faketime >/dev/null 2>&1; then
	say "skipped: no faketime (apt-get install faketime; tools/deps.sh)"
	test_done
fi
# Each host gets a name of its own (a UTS namespace): two workers of one
# host name are told apart by their pids, and a dead one is given up at
# once, not by its lease, which is what this test is about.
if ! unshare -u true 2>/dev/null; then
	say "skipped: cannot make a UTS namespace (unshare -u) for a host name"
	test_done
fi

LEASE=4

# The agent: the execute stage of a task waits until $FAKE_STATE/go
# exists, so the task stays running (its lease renewed) as long as the
# test likes; its pid goes to $FAKE_STATE/agent.<run>.
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	case "$BATON_STAGE_KIND" in
	execute)
		echo $$ >"$FAKE_STATE/agent.$BATON_RUN_ID"
		while [ ! -e "$FAKE_STATE/go" ]; do sleep 0.1; done
		echo "$BATON_RUN_ID" >"$BATON_WORKTREE/$BATON_RUN_ID.txt"; echo done ;;
	review) echo "DECISION: APPROVED" ;;
	*) echo "# plan of $BATON_RUN_ID" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

clone() {
	git clone -q "$TRASH_DIRECTORY/remote.git" "$1" &&
	(cd "$1" && "$BATON" init >/dev/null) &&
	cat >"$1/.baton/config.yaml" <<-EOF
	providers:
	  instant: {type: command, command: ["$TRASH_DIRECTORY/agent"]}
	roles: {default: instant}
	pipelines:
	  short:
	    terminal: merge_ready
	    stages:
	      - {name: plan, kind: plan}
	      - {name: execute, kind: execute}
	workflow: {pipeline: short}
	validate: {commands: []}
	execution: {sandbox: none}
	runtime: {judge: false, sweep_seconds: 1, lease_seconds: $LEASE, cooldown_seconds: 1}
	store: "$(cat "$TRASH_DIRECTORY/store-url")"
	EOF
}

sql() {
	psql -q -X -A -t "$(cat "$TRASH_DIRECTORY/store-url")" -c "$1"
}

# holder TASK: who holds the task's lease ("host:pid:n"), if anyone.
holder() {
	sql "select coalesce(lease_holder, '') from tasks where id = $1"
}

# start_host NAME HOSTNAME [FAKETIME]: `baton worker` in clone NAME as
# host HOSTNAME, its clock shifted by FAKETIME ("-10m") when given.
start_host() {
	local ft=
	if [ -n "${3:-}" ]; then
		ft="faketime -f $3"
	fi
	# libfaketime is preloaded ahead of an ASan build's runtime, which
	# refuses to start unless told that this order is meant
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
	FAKETIME_DONT_FAKE_MONOTONIC=1 bg_start "$TRASH_DIRECTORY/$1" $ft unshare -u sh -c \
		"hostname $2 && cd '$TRASH_DIRECTORY/$1' && exec '$BATON' worker --workers 1"
}

# kill_host NAME: kill -9 host NAME's supervisor, its workers and the
# agent of RUN they drive, as a machine that dies.
kill_host() {
	local sup kids
	sup=$(cat "$TRASH_DIRECTORY/$1.pid") &&
	kids=$(ps -o pid= --ppid "$sup" | tr -d " ") &&
	kill -9 $sup $kids $(cat "$FAKE_STATE"/agent.* 2>/dev/null) &&
	rm -f "$FAKE_STATE"/agent.* &&
	# a faketime wrapper's semaphore and shared memory, named by its pid
	rm -f "/dev/shm/faketime_shm_$sup" "/dev/shm/sem.faketime_sem_$sup"
}

now_ms() {
	echo $(( $(date +%s%N) / 1000000 ))
}

test_expect_success 'setup: a remote, clones for three hosts, one database' '
	write_agent &&
	url=$(pg_new_db) &&
	db=${url##*/} &&
	echo "postgresql:///$db?host=$BATON_TEST_PG_DIR&port=$(cat "$BATON_TEST_PG_DIR/port")&user=postgres" >store-url &&
	git init -q --bare remote.git &&
	make_repo seed &&
	git -C seed push -q ../remote.git main &&
	clone slow && clone fast && clone b &&
	test "$(faketime -f -10m date +%s)" -lt "$(( $(date +%s) - 590 ))"
'

test_expect_success 'a host ten minutes behind holds its lease: no takeover while it lives' '
	(cd b && "$BATON" task add "job one") >/dev/null &&
	start_host slow host-slow -10m &&
	wait_for "holder 1 | grep -q ^host-slow:" 60 &&
	holder 1 >held &&
	start_host b host-b &&
	wait_for "sql \"select count(*) from workers where host = '"'"'host-b'"'"' and stopped_at = 0\" | grep -qx 1" 30 &&
	# three leases long: a lease on the host'"'"'s clock would have
	# looked ten minutes expired to host-b from the start
	sleep $((3 * LEASE)) &&
	holder 1 >still &&
	test_cmp held still &&
	test "$(sql "select count(*) from events where task_id = 1 and type in ('"'"'lease_expired'"'"', '"'"'worker_gone'"'"')")" = 0 &&
	test "$(sql "select status from tasks where id = 1")" = running
'

test_expect_success 'baton doctor --store shows the slow host ten minutes behind' '
	(cd b && "$BATON" doctor --store "$(cat ../store-url)") >doctor.out 2>&1 || :
	grep "host-slow:.*clock skew" doctor.out >slow.line &&
	sed -n "s/.*clock skew \([-+][0-9.]*\) s.*/\1/p" slow.line >skew &&
	awk "{ exit !(\$1 <= -595 && \$1 >= -605) }" skew &&
	grep "host-b:.*clock skew" doctor.out >b.line &&
	sed -n "s/.*clock skew \([-+][0-9.]*\) s.*/\1/p" b.line >skew.b &&
	awk "{ exit !(\$1 <= 5 && \$1 >= -5) }" skew.b &&
	test "$(sql "select count(*) from workers where host = '"'"'host-slow'"'"' and clock_skew_ms between -605000 and -595000")" = 1
'

test_expect_success 'when the slow host dies its task is taken after the lease, not before' '
	start=$(now_ms) &&
	kill_host slow &&
	wait_for "holder 1 | grep -q ^host-b:" 60 &&
	took=$(( $(now_ms) - start )) &&
	echo "taken over after $took ms (lease $LEASE s)" &&
	# renewed every third of the lease: at least two thirds were left
	test $took -ge $((LEASE * 2000 / 3)) &&
	test $took -le $((LEASE * 1000 + 10000)) &&
	test "$(sql "select count(*) from events where task_id = 1 and type = '"'"'lease_expired'"'"'")" -ge 1
'

test_expect_success 'a host ten minutes ahead: its dead lease is taken after lease_seconds, not ten minutes later' '
	touch "$FAKE_STATE/go" &&
	wait_for "test \"\$(sql \"select status from tasks where id = 1\")\" = done" 60 &&
	rm -f "$FAKE_STATE/go" &&
	kill_host b &&
	(cd b && "$BATON" task add "job two") >/dev/null &&
	start_host fast host-fast +10m &&
	wait_for "holder 2 | grep -q ^host-fast:" 60 &&
	(cd b && "$BATON" doctor --store "$(cat ../store-url)") >doctor2.out 2>&1 || :
	sed -n "s/.*host-fast:.*clock skew \([-+][0-9.]*\) s.*/\1/p" doctor2.out >skew2 &&
	awk "{ exit !(\$1 >= 595 && \$1 <= 605) }" skew2 &&
	start_host b host-b &&
	sleep $((2 * LEASE)) &&
	holder 2 | grep -q ^host-fast: &&
	start=$(now_ms) &&
	kill_host fast &&
	wait_for "holder 2 | grep -q ^host-b:" 60 &&
	took=$(( $(now_ms) - start )) &&
	echo "taken over after $took ms (lease $LEASE s)" &&
	test $took -ge $((LEASE * 2000 / 3)) &&
	test $took -le $((LEASE * 1000 + 10000)) &&
	touch "$FAKE_STATE/go"
'

test_done
