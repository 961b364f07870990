#!/bin/bash
test_description='kill -9 of baton run mid-stage, then baton resume'
. "$(dirname "$0")/../lib/test-lib.sh"

# The execute agent works until the test releases it (fake-agent's
# FAKE_WAIT_FOR), on its first call only (FAKE_FAIL_ATTEMPTS=1): the stage
# re-run after recovery goes straight through. The first call is never
# released: baton is killed under it, and recovery must kill it.
export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_FAIL_ATTEMPTS=1
export FAKE_WAIT_FOR=$FAKE_STATE/release

# crash_mid_execute REPO TASK: starts a run of TASK in REPO in the
# background, waits until its execute agent works, and kill -9s baton (not
# the agent). Leaves the id in REPO.id and the agent pid in REPO.agent.
crash_mid_execute() {
	local repo=$1 task=$2 id
	cd "$repo" &&
		bg_start "$TRASH_DIRECTORY/$repo.run" "$BATON" run "$task" &&
		wait_for 'test -n "$(newest_run)"' &&
		id=$(newest_run) &&
		echo "$id" >"$TRASH_DIRECTORY/$repo.id" &&
		wait_for_status "$id" executing &&
		wait_for "\"\$BATON\" events $id --json | grep -q agent_started.*execute" &&
		"$BATON" events "$id" --json |
		jq -r "select(.type == \"agent_started\") | .data.pid" | tail -n 1 >"$TRASH_DIRECTORY/$repo.agent" &&
			process_is_alive "$(cat "$TRASH_DIRECTORY/$repo.agent")" &&
			kill -KILL "$(cat "$TRASH_DIRECTORY/$repo.run.pid")" &&
			rc=$(bg_wait "$TRASH_DIRECTORY/$repo.run") &&
			test "$rc" = 137
}

test_expect_success 'setup: kill -9 of baton run while the execute agent works' '
	make_repo repo &&
	baton_init_with_agent repo &&
	crash_mid_execute repo "Survive a crash" &&
	id=$(cat ../repo.id) &&
	# the store still says the stage runs: nobody has noticed yet
	test "$(run_status "$id")" = executing &&
	test "$(run_field "$id" phase)" = running
'

test_expect_success 'status and show still work on the crashed run' '
	cd repo &&
	id=$(cat ../repo.id) &&
	"$BATON" status >../status &&
	test_grep "$id" ../status &&
	"$BATON" show "$id" >/dev/null
'

test_expect_success 'baton resume recovers the run and carries it to merge_ready (exit 0)' '
	cd repo &&
	id=$(cat ../repo.id) &&
	test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready
'

test_expect_success 'the events show executing -> interrupted -> executing' '
	cd repo &&
	id=$(cat ../repo.id) &&
	cat >../expect <<-\EOF &&
	created
	planning
	planned
	architecting
	architected
	executing
	interrupted
	executing
	validating
	reviewing
	verifying
	merge_ready
	EOF
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual
'

test_expect_success 'the orphan agent is gone' '
	agent=$(cat repo.agent) &&
	! process_is_alive "$agent"
'

test_expect_success 'the execute stage ran twice; the change is the second run only' '
	cd repo &&
	id=$(cat ../repo.id) &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 2 ../calls &&
	git show "baton/$id:feature.txt" >../feature &&
	echo "feature line from $id (execute 2)" >../expect &&
	test_cmp ../expect ../feature
'

test_expect_success 'the worktree is clean at the end' '
	cd repo &&
	id=$(cat ../repo.id) &&
	git -C "$(run_field "$id" worktree)" status --porcelain >../dirty &&
	test_line_count = 0 ../dirty
'

test_expect_success 'no event lost or duplicated: seqs strictly increase, events.jsonl agrees' '
	cd repo &&
	id=$(cat ../repo.id) &&
	"$BATON" events "$id" --json >../events &&
	jq -r .seq ../events >../seqs &&
	sort -n -u ../seqs >../sorted &&
	test_cmp ../sorted ../seqs &&
	# and they are consecutive: nothing missing in between
	seq 1 "$(wc -l <../seqs)" >../expect &&
	test_cmp ../expect ../seqs &&
	jq -c . ../events >../events.expect &&
	jq -c . ".baton/runs/$id/events.jsonl" >../events.actual &&
	test_cmp ../events.expect ../events.actual
'

test_expect_success 'the partial work of the killed stage is reset to the last checkpoint' '
	make_repo repo2 &&
	baton_init_with_agent repo2 &&
	FAKE_SLOW_MARKER=partial.txt,README crash_mid_execute repo2 "Crash with partial work" &&
	id=$(cat ../repo2.id) &&
	wt=$(run_field "$id" worktree) &&
	# the killed stage left a new file and an edit to a tracked one
	test_path_is_file "$wt/partial.txt" &&
	test_grep "partial work" "$wt/README" &&
	FAKE_SLOW_MARKER=partial.txt,README \
		test_expect_code 0 "$BATON" resume "$id" >../resume2.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test_path_is_missing "$wt/partial.txt" &&
	test_grep ! "partial work" "$wt/README" &&
	git diff --name-only "main" "baton/$id" >../changed &&
	echo feature.txt >../expect &&
	test_cmp ../expect ../changed
'

test_expect_success 'what the killed agent left running in its group is killed by recovery' '
	make_repo repo4 &&
	# no sandbox: the grandchild pid the agent writes must be a host pid
	baton_init_with_agent repo4 "execution: {sandbox: none}" &&
	FAKE_FAIL_MODE=hang crash_mid_execute repo4 "Crash under a hang" &&
	id=$(cat ../repo4.id) &&
	wait_for "test -s \"$FAKE_STATE/$id.grandchild.pid\"" &&
	grandchild=$(cat "$FAKE_STATE/$id.grandchild.pid") &&
	# (the agent itself may die with baton; its grandchild lives on)
	process_is_alive "$grandchild" &&
	test_expect_code 0 "$BATON" resume "$id" >../resume4.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	! process_is_alive "$grandchild"
'

test_expect_success 'lock files a killed git left in the worktree do not stop the resume' '
	make_repo repo6 &&
	baton_init_with_agent repo6 &&
	crash_mid_execute repo6 "Crash under git" &&
	id=$(cat ../repo6.id) &&
	# as if baton had died inside git commit / git reset: the
	# worktree index and HEAD and the run branch are locked
	gitdir=.git/worktrees/$id &&
	: >"$gitdir/index.lock" &&
	: >"$gitdir/HEAD.lock" &&
	: >".git/refs/heads/baton/$id.lock" &&
	test_expect_code 0 "$BATON" resume "$id" >../resume6.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test_path_is_missing "$gitdir/HEAD.lock" &&
	test_path_is_missing ".git/refs/heads/baton/$id.lock"
'

test_expect_success 'a worktree whose admin entry was removed under it is made again on resume' '
	make_repo repo8 &&
	baton_init_with_agent repo8 &&
	crash_mid_execute repo8 "Lost entry" &&
	id=$(cat ../repo8.id) &&
	# as if a prune had taken the entry while an orphaned git worktree
	# add still ran: git no longer knows the worktree
	rm -rf ".git/worktrees/$id" &&
	test_expect_code 0 "$BATON" resume "$id" >../resume8.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test_path_is_dir ".git/worktrees/$id"
'

test_expect_success 'a worktree whose folder was removed by hand is made again on resume' '
	make_repo repo12 &&
	baton_init_with_agent repo12 &&
	crash_mid_execute repo12 "Lost folder" &&
	id=$(cat ../repo12.id) &&
	wt=$(run_field "$id" worktree) &&
	# git still has the entry, whole, for a folder that is gone: a
	# worktree add at that path is refused until git prunes it
	rm -rf "$wt" &&
	test_path_is_dir ".git/worktrees/$id" &&
	git worktree list --porcelain >../list12 &&
	test_grep "^prunable" ../list12 &&
	test_expect_code 0 "$BATON" resume "$id" >../resume12.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test_path_is_file "$wt/.git" &&
	git worktree list --porcelain >../list12 &&
	test_grep ! "^prunable" ../list12
'

test_expect_success 'a worktree entry a killed git worktree add left half-made does not stop new runs' '
	make_repo repo7 &&
	baton_init_with_agent repo7 &&
	cd repo7 &&
	# as if baton had died inside git worktree add: the admin entry
	# still locked "initializing", its commondir not yet written
	e=.git/worktrees/r99-half &&
	mkdir -p $e .baton/worktrees/r99-half &&
	echo "$PWD/.baton/worktrees/r99-half/.git" >$e/gitdir &&
	echo "ref: refs/heads/baton/r99-half" >$e/HEAD &&
	: >$e/commondir &&
	echo initializing >$e/locked &&
	echo "gitdir: $PWD/$e" >.baton/worktrees/r99-half/.git &&
	FAKE_FAIL_STAGE=none test_expect_code 0 "$BATON" run "After a half-made worktree" >../run7.out 2>&1 &&
	test_path_is_missing .git/worktrees/r99-half
'

test_expect_success 'a second resume while the first drives the run leaves it to the first' '
	make_repo repo3 &&
	baton_init_with_agent repo3 &&
	crash_mid_execute repo3 "Two resumes" &&
	id=$(cat ../repo3.id) &&
	# this time the re-run works until released too
	FAKE_FAIL_ATTEMPTS=2 FAKE_WAIT_FOR=$FAKE_STATE/release3 \
		bg_start ../resume3 "$BATON" resume "$id" &&
	wait_for "transitions $id | grep -q \"^interrupted\$\"" &&
	wait_for_status "$id" executing &&
	wait_for "test \"\$(fake_calls $id execute | wc -l)\" = 2" &&
	"$BATON" resume "$id" >../resume-again.out 2>&1 &&
	test_grep "carries on" ../resume-again.out &&
	touch "$FAKE_STATE/release3" &&
	rc=$(bg_wait ../resume3) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	transitions "$id" | grep -c "^interrupted$" >../n &&
	echo 1 >../expect &&
	test_cmp ../expect ../n &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 2 ../calls
'

test_expect_success 'two resumes racing for a run nobody drives: the one that lost says who drives it and exits 0' '
	make_repo repo9 &&
	baton_init_with_agent repo9 &&
	crash_mid_execute repo9 "Racing resumes" &&
	id=$(cat ../repo9.id) &&
	# resume A is held in its first "git config user.email", which it
	# runs after it found no driver and before it takes the run lock:
	# the window of the race, held open
	mkdir -p ../holdgit &&
	real=$(command -v git) &&
	cat >../holdgit/git <<-EOF &&
	#!/bin/sh
	case " \$* " in *" config user.email "*) hold=1 ;; *) hold= ;; esac
	if [ -n "\$hold" ] && ! [ -e "$FAKE_STATE/git-held" ]; then
		: >"$FAKE_STATE/git-held"
		while ! [ -e "$FAKE_STATE/git-release" ]; do sleep 0.1; done
	fi
	exec "$real" "\$@"
	EOF
	chmod +x ../holdgit/git &&
	PATH=$TRASH_DIRECTORY/holdgit:$PATH bg_start ../resumeA "$BATON" resume "$id" &&
	wait_for "test -e \"$FAKE_STATE/git-held\"" &&
	# resume B wins: it drives the run, its agent working until released
	FAKE_FAIL_ATTEMPTS=2 FAKE_WAIT_FOR=$FAKE_STATE/release9 \
		bg_start ../resumeB "$BATON" resume "$id" &&
	wait_for "test \"\$(fake_calls $id execute | wc -l)\" = 2" &&
	touch "$FAKE_STATE/git-release" &&
	test "$(bg_wait ../resumeA)" = 0 &&
	test_grep "its driver (pid $(cat ../resumeB.pid)) carries on" ../resumeA.out &&
	touch "$FAKE_STATE/release9" &&
	test "$(bg_wait ../resumeB)" = 0 &&
	test "$(run_status "$id")" = merge_ready
'

test_expect_success 'SIGTERM (Ctrl-C) of baton run mid-stage: exit 130, run interrupted, agent stopped; resume finishes it' '
	make_repo repo5 &&
	baton_init_with_agent repo5 &&
	cd repo5 &&
	FAKE_WAIT_FOR=$FAKE_STATE/release5 \
		bg_start ../term "$BATON" run "Stop politely" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" executing &&
	wait_for "\"\$BATON\" events $id --json | grep -q agent_started" &&
	agent=$("$BATON" events "$id" --json |
		jq -r "select(.type == \"agent_started\") | .data.pid" | tail -n 1) &&
	kill -TERM "$(cat ../term.pid)" &&
	rc=$(bg_wait ../term) &&
	test "$rc" = 130 &&
	test_grep "baton resume" ../term.out &&
	test "$(run_status "$id")" = interrupted &&
	! process_is_alive "$agent" &&
	test_expect_code 0 "$BATON" resume "$id" >../resume5.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready
'

test_done
