#!/bin/bash
test_description='worker hosts on PostgreSQL: a serve and two hosts (own clones, own network namespaces) drain 200 tasks, one host killed mid-run (its runs taken over, t0097 has the details); PostgreSQL restarted mid-run'
. "$(dirname "$0")/../lib/test-lib.sh"

# Draining 200 tasks through three hosts takes minutes on two loaded CPUs
# (about 10 in a full CI run on a 2-CPU machine, where the rest of the
# suite runs beside it; 7.5 alone), and the waits below allow for twice
# that (up to twenty minutes for the last merge): a body gets as long, not
# test-lib's default 300 s.
export BATON_TEST_TIMEOUT=${BATON_TEST_TIMEOUT:-1500}

# Needs the cluster tests/run.sh starts for its PostgreSQL pass.
if [ -z "${BATON_TEST_PG_ADMIN:-}" ] || [ -z "${BATON_TEST_PG_DIR:-}" ]; then
	say "skipped: no PostgreSQL (tests/run.sh runs this in its PostgreSQL pass)"
	test_done
fi

# A worker host sees the database through its unix socket and the remote
# through the file system: in a network namespace of its own (when this
# machine lets us make one) it could not lean on anything else.
if unshare -n true 2>/dev/null; then
	ISOLATE="unshare -n --"
else
	ISOLATE=
fi

# The agent of the one stage: a little slow, so that a kill lands mid-run;
# the change is a file named after the run, so no two runs conflict. (One
# stage a run: what is tested here is the queue, the hosts and the merge
# queue, and 200 runs of three stages took ten minutes of two CPUs.)
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	sleep 0.$(( 1 + $(od -An -N1 -tu1 /dev/urandom) % 3 ))
	echo "$BATON_RUN_ID" >"$BATON_WORKTREE/$BATON_RUN_ID.txt"
	echo done
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

# clone NAME: a clone of the remote, set up for baton on the shared store.
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
	      - {name: execute, kind: execute}
	workflow: {pipeline: short}
	validate: {commands: []}
	runtime: {judge: false, auto_merge: true, sweep_seconds: 1, lease_seconds: 4, cooldown_seconds: 1}
	repo: {url: "$TRASH_DIRECTORY/remote.git"}
	store: "$(cat "$TRASH_DIRECTORY/store-url")"
	EOF
}

# count SQL: one number from the shared store.
count() {
	psql -q -X -A -t "$(cat "$TRASH_DIRECTORY/store-url")" -c "$1"
}

# merged, done_tasks: how far the drain is.
merged() {
	count "select count(*) from merge_queue where status = 'merged'"
}
done_tasks() {
	count "select count(*) from tasks where status = 'done'"
}

# settled_twice: tasks settled done more than once (must stay 0), and
# settled_once: tasks settled done exactly once.
settled_twice() {
	count "select count(*) from (select task_id from events
		where type = 'task_settled' and data like '%\"status\":\"done\"%'
		group by task_id having count(*) > 1) x"
}
settled_once() {
	count "select count(distinct task_id) from events
		where type = 'task_settled' and data like '%\"status\":\"done\"%'"
}

# start_host NAME: `baton worker` in clone NAME, in the background
# (NAME.pid, NAME.out in the trash directory).
start_host() {
	bg_start "$TRASH_DIRECTORY/$1" sh -c \
		"cd '$TRASH_DIRECTORY/$1' && exec $ISOLATE '$BATON' worker --workers 2"
}

# host_workers NAME: the pids of host NAME's workers, from what they
# claimed.
host_workers() {
	sed -n 's/.* claimed by [^:]*:\([0-9]*\):.*/\1/p' \
		"$TRASH_DIRECTORY/$1.out" | sort -u
}

# mid_run HOST: the runs HOST is in the middle of (the task running, the
# run not ended, its worktree in HOST's clone).
mid_run() {
	count "select count(*) from runs r join tasks t on t.run_id = r.id
		where t.status = 'running' and r.worktree like '%/$1/.baton/%'
		and r.status not in ('merge_ready', 'completed', 'blocked',
				     'failed', 'aborted')"
}

# freeze_mid_run HOST PIDS: stop PIDS (SIGSTOP) at a moment when HOST is
# in the middle of a run, so that a kill lands mid-run and not between
# two runs; a try that finds it between runs lets it go on a little.
freeze_mid_run() {
	for try in $(seq 1 100); do
		kill -STOP $2 &&
		test "$(mid_run $1)" -ge 1 && return 0
		kill -CONT $2
		sleep 0.05
	done
	echo "$1 never seen mid-run"
	return 1
}

test_expect_success 'setup: a remote, a server clone and two host clones on one database' '
	write_agent &&
	url=$(pg_new_db) &&
	db=${url##*/} &&
	echo "postgresql:///$db?host=$BATON_TEST_PG_DIR&port=$(cat "$BATON_TEST_PG_DIR/port")&user=postgres" >store-url &&
	git init -q --bare remote.git &&
	make_repo seed &&
	git -C seed push -q ../remote.git main &&
	clone srv && clone h1 && clone h2 &&
	(cd srv && "$BATON" migrate) >migrate.out &&
	test_grep "schema version 17, up to date" migrate.out &&
	test_grep "postgres" migrate.out
'

test_expect_success 'baton doctor reports the shared store' '
	cd srv &&
	"$BATON" doctor --quick >../doctor.out 2>&1 || :
	test_grep "store .*ok .*(postgres), schema version 17" ../doctor.out
'

test_expect_success 'two hosts and a server drain 200 tasks; one host is killed mid-run' '
	cd srv &&
	for i in $(seq 1 200); do
		"$BATON" task add "job $i" >/dev/null || exit 1
	done &&
	start_host h1 && start_host h2 &&
	bg_start "$TRASH_DIRECTORY/srv" "$BATON" serve --workers 1 --listen off &&
	# kill h1 in the thick of it, once some work has landed
	wait_for "test \$(merged) -ge 5" 300 &&
	wait_for "test \$(grep -c \" claimed by\" ../h1.out) -ge 10" 120 &&
	kids=$(host_workers h1) &&
	sup=$(ps -o ppid= -p $(echo $kids | cut -d" " -f1)) &&
	freeze_mid_run h1 "$sup $kids" &&
	echo "killing host h1: supervisor $sup, workers $kids" &&
	kill -9 $sup $kids &&
	wait_for "! ps -p $(echo $sup $kids | tr " " ,) >/dev/null" 10 &&
	wait_for "test \$(merged) -eq 200" 1200 &&
	test "$(done_tasks)" = 200
'

test_expect_success 'the kill landed mid-run: its runs were taken over from their checkpoints, or started afresh' '
	test "$(count "select count(*) from events where type in
		('"'"'run_taken_over'"'"', '"'"'run_takeover_failed'"'"')")" -ge 1 &&
	test "$(count "select count(*) from events e join runs r on r.id = e.run_id
		where e.type = '"'"'run_takeover_failed'"'"' and r.status <> '"'"'aborted'"'"'")" = 0
'

test_expect_success 'every task was settled done exactly once' '
	test "$(settled_twice)" = 0 &&
	test "$(settled_once)" = 200
'

test_expect_success 'every task has its branch landed on the remote base' '
	git -C remote.git ls-tree --name-only main >landed &&
	count "select run_id from tasks order by id" >runs &&
	test_line_count = 200 runs &&
	while read -r r; do
		grep -qx "$r.txt" landed || { echo "missing $r"; exit 1; }
	done <runs &&
	test "$(count "select count(*) from merge_queue where status = '"'"'merged'"'"'")" = 200
'

test_expect_success 'the event log has no hole and no duplicate' '
	test "$(count "select count(*) - count(distinct seq) from events")" = 0
'

test_expect_success 'PostgreSQL restarted mid-run: workers reconnect, nothing lost or duplicated' '
	cd srv &&
	for i in $(seq 1 30); do
		"$BATON" task add "late job $i" >/dev/null || exit 1
	done &&
	wait_for "test \$(done_tasks) -ge 205" 120 &&
	"$TEST_DIRECTORY/../tools/pg.sh" restart "$BATON_TEST_PG_DIR" &&
	wait_for "test \$(merged) -eq 230" 600 &&
	test "$(done_tasks)" = 230 &&
	test "$(settled_twice)" = 0 &&
	test "$(settled_once)" = 230 &&
	cat ../srv.out ../h2.out >../after-restart.log &&
	test_grep "reconnected" ../after-restart.log
'

test_expect_success 'the serve and the host drain and stop' '
	kill -TERM $(cat srv.pid) $(cat h2.pid) &&
	wait_for "test -e srv.rc && test -e h2.rc" 60
'

test_done
