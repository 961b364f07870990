#!/bin/bash
test_description='abort during a hanging agent kills its whole process group'
. "$(dirname "$0")/../lib/test-lib.sh"

# "Gone" means not running: a zombie waiting for a reaper that a container
# may not have does not count (test-lib's process_is_alive).

# abort_hanging_agent NAME MODE: in a fresh repository NAME, starts a run in
# the background whose execute agent hangs in MODE, waits for the hang,
# aborts the run and records the run id, the agent and grandchild pids.
# Without the sandbox: these are baton's own group kills, seen by the pids
# the agent writes (in the sandbox's pid namespace they are not the
# host's; t0038 shows that nothing outlives a sandboxed call).
abort_hanging_agent() {
	local repo=$1 mode=$2
	make_repo "$repo" &&
		baton_init_with_agent "$repo" "execution: {sandbox: none}" &&
		cd "$repo" &&
		FAKE_STATE=$TRASH_DIRECTORY/$repo.state FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=$mode \
			bg_start "$TRASH_DIRECTORY/$repo.run" "$BATON" run "Hang in $mode" &&
		wait_for "test -s '$TRASH_DIRECTORY/$repo.state/hang.pid' && test -s '$TRASH_DIRECTORY/$repo.state/grandchild.pid'" &&
		newest_run >"$TRASH_DIRECTORY/$repo.id" &&
		cp "$TRASH_DIRECTORY/$repo.state/hang.pid" "$TRASH_DIRECTORY/$repo.agent" &&
		cp "$TRASH_DIRECTORY/$repo.state/grandchild.pid" "$TRASH_DIRECTORY/$repo.grandchild" &&
		process_is_alive "$(cat "$TRASH_DIRECTORY/$repo.agent")" &&
		process_is_alive "$(cat "$TRASH_DIRECTORY/$repo.grandchild")" &&
		test "$(run_status "$(cat "$TRASH_DIRECTORY/$repo.id")")" = executing &&
		"$BATON" abort "$(cat "$TRASH_DIRECTORY/$repo.id")" >"$TRASH_DIRECTORY/$repo.abort.out"
}

# group_members PGID: the live processes of process group PGID.
group_members() {
	local f line
	local -a fields
	for f in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null <"$f" || continue
		read -r -a fields <<<"${line##*) }"
		# fields: state ppid pgrp ...
		[ "${fields[2]}" = "$1" ] || continue
		case ${fields[0]} in Z | X) continue ;; esac
		echo "${f//[!0-9]/} $line"
	done
}

for mode in hang hang-ignore-term; do
	test_expect_success "$mode: baton abort ends the run aborted" '
		abort_hanging_agent r-'$mode' '$mode' &&
		id=$(cat ../r-'$mode'.id) &&
		test "$(run_status "$id")" = aborted &&
		test_grep "aborted" ../r-'$mode'.abort.out
	'

	test_expect_success "$mode: the foreground run exits 3" '
		rc=$(bg_wait r-'$mode'.run) &&
		test "$rc" = 3
	'

	test_expect_success "$mode: no survivor: the agent, its grandchild, its whole group" '
		agent=$(cat r-'$mode'.agent) &&
		grandchild=$(cat r-'$mode'.grandchild) &&
		! process_is_alive "$agent" &&
		! process_is_alive "$grandchild" &&
		group_members "$agent" >survivors &&
		test_line_count = 0 survivors
	'

	test_expect_success "$mode: the worktree is kept and the record is complete" '
		cd r-'$mode' &&
		id=$(cat ../r-'$mode'.id) &&
		wt=$(run_field "$id" worktree) &&
		test_path_is_dir "$wt" &&
		git -C "$wt" rev-parse --verify -q HEAD &&
		git rev-parse --verify -q "refs/heads/baton/$id" &&
		transitions "$id" | tail -n 2 >../actual &&
		printf "%s\n" executing aborted >../expect &&
		test_cmp ../expect ../actual &&
		test "$(run_field "$id" ended_at)" != null &&
		run_field "$id" reason >../reason &&
		test_grep "abort" ../reason &&
		"$BATON" events "$id" --json >../events &&
		jq -s -e "[.[] | select(.type == \"agent_exited\")] | last | .data.outcome | . != null and . != \"ok\"" ../events &&
		jq -s -e "[.[] | select(.type == \"abort_requested\")] | length == 1" ../events
	'
done

test_expect_success 'abort of a run with no live driver ends it aborted at once' '
	make_repo gated &&
	baton_init_with_agent gated "policies: {require_approval_at_stages: [executing]}" &&
	cd gated &&
	bg_start ../gated.run "$BATON" run "Gated, then dropped" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	kill -TERM "$(cat ../gated.run.pid)" &&
	bg_wait ../gated.run >/dev/null &&
	"$BATON" abort "$id" >../abort.out &&
	test "$(run_status "$id")" = aborted &&
	transitions "$id" | tail -n 1 >../actual &&
	echo aborted >../expect &&
	test_cmp ../expect ../actual &&
	test_path_is_dir "$(run_field "$id" worktree)"
'

test_expect_success 'abort while waiting at a gate with a live driver' '
	cd gated &&
	last=$(newest_run) &&
	bg_start ../gated2.run "$BATON" run "Gated, then aborted" &&
	wait_for "test \"\$(newest_run)\" != $last" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" abort "$id" >/dev/null &&
	rc=$(bg_wait ../gated2.run) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = aborted
'

test_expect_success 'a config broken while a run is live: status, show and abort still work, warning of it' '
	make_repo broken &&
	baton_init_with_agent broken &&
	cd broken &&
	store=$(sed -n "s/^store: //p" .baton/config.yaml) &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow \
	FAKE_WAIT_FOR=$FAKE_STATE/broken.release \
		bg_start "$TRASH_DIRECTORY/broken.run" "$BATON" run "Live" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" executing &&
	echo "workflow: {max_review_loops: 3" >>.baton/config.yaml &&
	sf= &&
	if [ -n "$store" ]; then
		# the config names its store, which it cannot tell now
		test_expect_code 1 "$BATON" status 2>../b.err &&
		test_grep "until it loads, --store SPEC reaches the runs" ../b.err &&
		sf="--store $store"
	fi &&
	"$BATON" status $sf >../b.status 2>../b.err &&
	test_grep "warning: .*config.yaml.*going on without the config" ../b.err &&
	test_grep "^$id .*executing" ../b.status &&
	"$BATON" abort "$id" $sf 2>../b.err &&
	test "$(bg_wait ../broken.run)" = 3 &&
	test "$("$BATON" show "$id" --json $sf 2>/dev/null | jq -r .status)" = aborted &&
	# a command that needs the config still refuses
	test_expect_code 1 "$BATON" run "Another" $sf 2>../b.err &&
	test_grep ! "going on without" ../b.err
'

test_done
