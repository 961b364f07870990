#!/bin/bash
test_description='a run survives its host: each checkpoint goes to the shared remote; a host killed mid-stage has its run taken over by another host, which resumes it at that stage (the stages before it ran once, its branch holds every checkpoint); a hostile agent'"'"'s plants are not followed; a run killed before any checkpoint starts afresh, saying why'
. "$(dirname "$0")/../lib/test-lib.sh"

# Needs the cluster tests/run.sh starts for its PostgreSQL pass.
if [ -z "${BATON_TEST_PG_ADMIN:-}" ] || [ -z "${BATON_TEST_PG_DIR:-}" ]; then
	say "skipped: no PostgreSQL (tests/run.sh runs this in its PostgreSQL pass)"
	test_done
fi

if unshare -n true 2>/dev/null; then
	ISOLATE="unshare -n --"
else
	ISOLATE=
fi

# The agent of every stage logs "RUN STAGE HOST plan-seen|plan-missing"
# (whether its prompt held the run's plan) to agent.log. On host h1 it
# holds the stage named in hold-STAGE (its pid in held.pid) for a kill to
# land there. The implement stage plays the hostile agent on h1: a hook
# script committed in the worktree, a link in the run folder to a
# secret, a dot file there.
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-EOF
	#!/bin/sh
	T='$TRASH_DIRECTORY'
	EOF
	cat >>"$TRASH_DIRECTORY/agent" <<-\EOF
	host=$(echo "$BATON_WORKTREE" | sed -n 's,.*/\(h[0-9]\)/\.baton/.*,\1,p')
	seen=plan-missing
	grep -q "plan of $BATON_RUN_ID" "$BATON_PROMPT_FILE" 2>/dev/null && seen=plan-seen
	echo "$BATON_RUN_ID $BATON_STAGE_NAME $host $seen" >>"$T/agent.log"
	if [ "$host" = h1 ] && [ -e "$T/hold-$BATON_STAGE_NAME" ]; then
		echo $$ >"$T/held.pid"
		# the .git file pointed at a git dir of the agent's, whose
		# hook would say it ran: nobody may follow it
		mkdir -p "$T/evil.git/hooks"
		git init -q --bare "$T/evil.git"
		printf '#!/bin/sh\ntouch %s/pwned-evil-hook\n' "$T" >"$T/evil.git/hooks/pre-push"
		chmod +x "$T/evil.git/hooks/pre-push"
		echo "gitdir: $T/evil.git" >"$BATON_WORKTREE/.git"
		sleep 60
	fi
	# wait-STAGE-HOST: waits (pid in waiting-STAGE-HOST) until
	# go-STAGE-HOST is there, then says it went on (went-STAGE-HOST)
	if [ -e "$T/wait-$BATON_STAGE_NAME-$host" ]; then
		echo $$ >"$T/waiting-$BATON_STAGE_NAME-$host"
		i=0
		while [ ! -e "$T/go-$BATON_STAGE_NAME-$host" ] && [ $i -lt 1200 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		touch "$T/went-$BATON_STAGE_NAME-$host"
	fi
	case "$BATON_STAGE_NAME" in
	implement)
		echo "$BATON_RUN_ID" >"$BATON_WORKTREE/$BATON_RUN_ID.txt"
		if [ "$host" = h1 ]; then
			mkdir -p "$BATON_WORKTREE/.githooks"
			printf '#!/bin/sh\ntouch %s/pwned-hook\n' "$T" >"$BATON_WORKTREE/.githooks/pre-push"
			chmod +x "$BATON_WORKTREE/.githooks/pre-push"
			ln -sf "$T/secret.txt" "$BATON_RUN_DIR/stolen.md"
			echo hidden >"$BATON_RUN_DIR/.hidden"
		fi
		echo done ;;
	polish) echo "polished by $host" >"$BATON_WORKTREE/$BATON_RUN_ID.polish"; echo done ;;
	review) echo "DECISION: APPROVED" ;;
	*) echo "# plan of $BATON_RUN_ID" ;;
	esac
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
	  four:
	    terminal: merge_ready
	    stages:
	      - {name: plan, kind: plan}
	      - {name: implement, kind: execute}
	      - {name: polish, kind: execute}
	      - {name: review, kind: review}
	workflow: {pipeline: four}
	validate: {commands: []}
	execution: {sandbox: none}
	runtime: {judge: false, auto_merge: false, sweep_seconds: 1, lease_seconds: 4, cooldown_seconds: 1}
	repo: {url: "$TRASH_DIRECTORY/remote.git"}
	store: "$(cat "$TRASH_DIRECTORY/store-url")"
	EOF
}

# q SQL: one answer from the shared store.
q() {
	psql -q -X -A -t "$(cat "$TRASH_DIRECTORY/store-url")" -c "$1"
}

# ran RUN STAGE: how many times STAGE of RUN started (stage_started).
ran() {
	q "select count(*) from events where run_id = '$1'
		and type = 'stage_started' and data like '%\"stage\":\"$2\"%'"
}

# agent_ran RUN STAGE [HOST]: agent calls of STAGE of RUN (on HOST).
agent_ran() {
	grep -c "^$1 $2 ${3:-}" "$TRASH_DIRECTORY/agent.log"
}

start_host() {
	bg_start "$TRASH_DIRECTORY/$1" sh -c \
		"cd '$TRASH_DIRECTORY/$1' && exec $ISOLATE '$BATON' worker --workers 1"
}

# kill_host NAME: kill -9 host NAME's supervisor and its workers, and the
# held agent (the machine is gone).
kill_host() {
	sup=$(cat "$TRASH_DIRECTORY/$1.pid") &&
	kids=$(pgrep -P "$sup" | tr "\n" " ") &&
	echo "killing host $1: supervisor $sup, workers $kids" &&
	kill -9 $sup $kids &&
	kill -9 "$(cat "$TRASH_DIRECTORY/held.pid")" &&
	wait_for "! ps -p $(echo $sup $kids | tr " " ,) >/dev/null" 10
}

task_status() {
	q "select status from tasks where id = $1"
}

test_expect_success 'setup: a remote and two host clones on one database' '
	write_agent &&
	echo TOPSECRET >secret.txt &&
	url=$(pg_new_db) &&
	db=${url##*/} &&
	echo "postgresql:///$db?host=$BATON_TEST_PG_DIR&port=$(cat "$BATON_TEST_PG_DIR/port")&user=postgres" >store-url &&
	git init -q --bare remote.git &&
	make_repo seed &&
	git -C seed push -q ../remote.git main &&
	clone h1 && clone h2 &&
	(cd h1 && "$BATON" migrate) >migrate.out
'

test_expect_success 'host h1 is killed in the polish stage, after plan and implement' '
	touch hold-polish &&
	(cd h1 && "$BATON" task add "job one" >/dev/null) &&
	start_host h1 &&
	wait_for "test -s held.pid" 60 &&
	run=$(q "select run_id from tasks where id = 1") &&
	echo "$run" >run1 &&
	test -n "$run" &&
	kill_host h1 &&
	rm -f hold-polish held.pid
'

test_expect_success 'each checkpoint reached the remote before the store had it' '
	run=$(cat run1) &&
	q "select data from events where run_id = '"'"'$run'"'"' and type = '"'"'checkpoint'"'"' order by seq" >ckpts.json &&
	test_line_count = 1 ckpts.json &&
	jq -r .commit ckpts.json >ckpt-commits &&
	test "$(jq -r .pushed ckpts.json)" = true &&
	test "$(git -C remote.git rev-parse refs/baton/checkpoints/$run)" = "$(cat ckpt-commits)" &&
	git -C remote.git ls-tree --name-only refs/baton/run-files/$run >files &&
	test_grep -x plan.md files
'

test_expect_success 'what the hostile agent planted did not travel: no link followed, no dot file' '
	run=$(cat run1) &&
	test -L h1/.baton/runs/$run/stolen.md &&
	test_path_is_file h1/.baton/runs/$run/.hidden &&
	test_grep ! -x stolen.md files &&
	test_grep ! -x .hidden files &&
	! git -C remote.git grep -q TOPSECRET refs/baton/run-files/$run &&
	! git -C remote.git grep -q TOPSECRET refs/baton/checkpoints/$run
'

test_expect_success 'host h2 takes the run over and resumes it at polish' '
	start_host h2 &&
	wait_for "test \"\$(task_status 1)\" = done" 120 &&
	run=$(cat run1) &&
	test "$(q "select run_id from tasks where id = 1")" = "$run" &&
	test "$(q "select status from runs where id = '"'"'$run'"'"'")" = merge_ready &&
	q "select data from events where run_id = '"'"'$run'"'"' and type = '"'"'run_taken_over'"'"'" >over.json &&
	test_line_count = 1 over.json &&
	test_jq ".stage == \"polish\" and (.from | test(\"/h1/\")) and (.to | test(\"/h2/\")) and .files >= 1" over.json &&
	test "$(jq -r .checkpoint over.json)" = "$(cat ckpt-commits)" &&
	test "$(q "select count(*) from events where type = '"'"'run_takeover_failed'"'"'")" = 0
'

test_expect_success 'the stages before polish ran exactly once; polish again on h2, review once' '
	run=$(cat run1) &&
	test "$(ran $run plan)" = 1 &&
	test "$(ran $run implement)" = 1 &&
	test "$(ran $run polish)" = 2 &&
	test "$(ran $run review)" = 1 &&
	test "$(agent_ran $run plan)" = 1 &&
	test "$(agent_ran $run implement)" = 1 &&
	test "$(agent_ran $run polish h1)" = 1 &&
	test "$(agent_ran $run polish h2)" = 1 &&
	test "$(agent_ran $run review h2)" = 1
'

test_expect_success 'on h2 the agents read the plan h1 made (the run folder travelled)' '
	run=$(cat run1) &&
	test_grep "^$run polish h2 plan-seen" agent.log &&
	test_grep "^$run review h2 plan-seen" agent.log &&
	test_path_is_file h2/.baton/runs/$run/plan.md
'

test_expect_success 'the run'"'"'s branch on the remote holds every checkpoint' '
	run=$(cat run1) &&
	q "select data from events where run_id = '"'"'$run'"'"' and type = '"'"'checkpoint'"'"' order by seq" >all-ckpts.json &&
	test_line_count = 2 all-ckpts.json &&
	for c in $(jq -r .commit all-ckpts.json); do
		git -C remote.git merge-base --is-ancestor $c refs/heads/baton/$run ||
			{ echo "checkpoint $c is not on baton/$run"; exit 1; }
	done &&
	git -C remote.git show refs/heads/baton/$run:$run.txt >/dev/null &&
	test "$(git -C remote.git show refs/heads/baton/$run:$run.polish)" = "polished by h2"
'

test_expect_success 'no hook or git dir the agent planted ran; h2'"'"'s worktree is its own' '
	run=$(cat run1) &&
	test_path_is_missing pwned-hook &&
	test_path_is_missing pwned-evil-hook &&
	test_must_fail git -C evil.git rev-parse --verify -q refs/baton/checkpoints/$run &&
	test "$(git -C h2 rev-parse refs/heads/baton/$run)" = "$(git -C remote.git rev-parse refs/heads/baton/$run)" &&
	test_path_is_missing h2/.baton/runs/$run/stolen.md
'

test_expect_success 'the settled run'"'"'s checkpoint refs are gone from the remote' '
	run=$(cat run1) &&
	git -C remote.git for-each-ref refs/baton/ >left &&
	test_line_count = 0 left
'

test_expect_success 'a host killed in the first stage, before any checkpoint: the run starts afresh, the reason on record' '
	kill -TERM $(cat h2.pid) &&
	wait_for "test -e h2.rc" 60 &&
	touch hold-plan &&
	(cd h1 && "$BATON" task add "job two" >/dev/null) &&
	start_host h1 &&
	wait_for "test -s held.pid" 60 &&
	old=$(q "select run_id from tasks where id = 2") &&
	test -n "$old" &&
	kill_host h1 &&
	rm -f hold-plan &&
	start_host h2 &&
	wait_for "test \"\$(task_status 2)\" = done" 120 &&
	q "select data from events where run_id = '"'"'$old'"'"' and type = '"'"'run_takeover_failed'"'"'" >failed.json &&
	test_line_count = 1 failed.json &&
	test_jq ".reason | test(\"no checkpoint was pushed yet\")" failed.json &&
	test "$(q "select status from runs where id = '"'"'$old'"'"'")" = aborted &&
	q "select reason from runs where id = '"'"'$old'"'"'" >reason &&
	test_grep "cannot be taken over: no checkpoint was pushed yet" reason &&
	new=$(q "select run_id from tasks where id = 2") &&
	test "$new" != "$old" &&
	test "$(ran $new plan)" = 1 &&
	test "$(q "select count(*) from events where run_id = '"'"'$new'"'"' and type = '"'"'run_taken_over'"'"'")" = 0 &&
	test_grep "cannot take it over" h2.out
'

# A host that stalls (SIGSTOP: a swapped-out machine, a paused VM) just
# before it pushes a checkpoint, and wakes once another host has taken
# its run over and pushed a checkpoint of its own: its late push must
# not land. h1's git stops h1's worker at the push once stall-push is
# there, and pushes when go-push is.
write_gitwrap() {
	mkdir -p gitwrap &&
	cat >gitwrap/git <<-EOF &&
	#!/bin/sh
	T='$TRASH_DIRECTORY'
	REAL='$(command -v git)'
	EOF
	cat >>gitwrap/git <<-\EOF &&
	case " $* " in
	*" push "*refs/baton/checkpoints/*)
		if [ -e "$T/stall-push" ]; then
			rm -f "$T/stall-push"
			echo $PPID >"$T/stalled.pid"
			kill -STOP $PPID
			i=0
			while [ ! -e "$T/go-push" ] && [ $i -lt 1200 ]; do
				sleep 0.1
				i=$((i + 1))
			done
		fi ;;
	esac
	exec "$REAL" "$@"
	EOF
	chmod +x gitwrap/git
}

test_expect_success 'a host stalled at its push, woken after the takeover, cannot push over the new holder'"'"'s checkpoint' '
	kill -TERM $(cat h2.pid) &&
	wait_for "test -e h2.rc" 60 &&
	write_gitwrap &&
	touch wait-polish-h1 wait-review-h2 &&
	(cd h1 && "$BATON" task add "job three" >/dev/null) &&
	bg_start "$TRASH_DIRECTORY/h1" env PATH="$TRASH_DIRECTORY/gitwrap:$PATH" \
		sh -c "cd '"'"'$TRASH_DIRECTORY/h1'"'"' && exec $ISOLATE '"'"'$BATON'"'"' worker --workers 1" &&
	wait_for "test -s waiting-polish-h1" 60 &&
	run=$(q "select run_id from tasks where id = 3") &&
	touch stall-push go-polish-h1 &&
	wait_for "test -s stalled.pid" 60 &&
	start_host h2 &&
	wait_for "test -s waiting-review-h2" 120 &&
	mine=$(q "select checkpoint from runs where id = '"'"'$run'"'"'") &&
	test "$(git -C remote.git rev-parse refs/baton/checkpoints/$run)" = "$mine" &&
	touch go-push &&
	kill -CONT "$(cat stalled.pid)" &&
	wait_for "test \$(grep -c \"^t3 \" h1.out) -ge 2" 60 &&
	test_grep "moved from .* to .*, pushed by another driver of the run" h1.out &&
	test_grep "cannot push a checkpoint over it: the lease on task 3 was taken over" h1.out &&
	test "$(git -C remote.git rev-parse refs/baton/checkpoints/$run)" = "$mine" &&
	touch go-review-h2 &&
	wait_for "test \"\$(task_status 3)\" = done" 120 &&
	test "$(agent_ran $run polish h1)" = 1 &&
	test "$(agent_ran $run polish h2)" = 1 &&
	q "select data from events where run_id = '"'"'$run'"'"' and type = '"'"'checkpoint'"'"' order by seq" >ckpts3.json &&
	for c in $(jq -r .commit ckpts3.json); do
		git -C remote.git merge-base --is-ancestor $c refs/heads/baton/$run ||
			{ echo "checkpoint $c is not on baton/$run"; exit 1; }
	done &&
	test "$(git -C remote.git show refs/heads/baton/$run:$run.polish)" = "polished by h2" &&
	git -C remote.git for-each-ref refs/baton/ >left3 &&
	test_line_count = 0 left3 &&
	kill -TERM $(cat h1.pid) &&
	wait_for "test -e h1.rc" 60
'

test_expect_success 'the host drains and stops' '
	kill -TERM $(cat h2.pid) &&
	wait_for "test -e h2.rc" 60
'

test_done
