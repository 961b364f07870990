#!/bin/bash
test_description='hooks: worktree_setup runs again on a worktree made again after a crash, and not on a resume that finds it whole; a resumed run keeps its port'
. "$(dirname "$0")/../lib/test-lib.sh"

# The execute agent works until the test releases it, on its first call
# only: baton is killed under it, and the re-run after recovery goes
# straight through (as in t0007).
export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_FAIL_ATTEMPTS=1
export FAKE_WAIT_FOR=$FAKE_STATE/release

# crash_mid_execute REPO TASK: as t0007's: a run in the background,
# kill -9 of baton while its execute agent works; the id in REPO.id.
crash_mid_execute() {
	local repo=$1 task=$2 id
	cd "$repo" &&
		bg_start "$TRASH_DIRECTORY/$repo.run" "$BATON" run "$task" &&
		wait_for 'test -n "$(newest_run)"' &&
		id=$(newest_run) &&
		echo "$id" >"$TRASH_DIRECTORY/$repo.id" &&
		wait_for_status "$id" executing &&
		wait_for "\"\$BATON\" events $id --json | grep -q agent_started.*execute" &&
		kill -KILL "$(cat "$TRASH_DIRECTORY/$repo.run.pid")" &&
		rc=$(bg_wait "$TRASH_DIRECTORY/$repo.run") &&
		test "$rc" = 137
}

# setup_repo DIR: a repository whose worktrees are set up by a hook; what
# the hook makes is ignored by git, as a .env or node_modules are, so a
# reset to the last checkpoint (which removes untracked files) keeps it.
setup_repo() {
	make_repo "$1" &&
		echo .set-up >"$1/.gitignore" &&
		git -C "$1" add .gitignore &&
		git -C "$1" commit -q -m "ignore what setup makes" &&
		baton_init_with_agent "$1" "$(setup_config)"
}

setup_config() {
	cat <<-EOF
	hooks:
	  worktree_setup: ["echo setup \$BATON_PORT >>$FAKE_STATE/\$BATON_RUN_ID.log; touch .set-up"]
	  before_stage: ["test -e .set-up || { echo not set up; exit 1; }"]
	EOF
}

test_expect_success 'setup: a run killed mid-execute, its worktree set up once' '
	setup_repo repo &&
	crash_mid_execute repo "Survive a crash" &&
	id=$(cat ../repo.id) &&
	test_line_count = 1 "$FAKE_STATE/$id.log"
'

test_expect_success 'a resume that finds the worktree whole does not set it up again' '
	setup_repo whole &&
	crash_mid_execute whole "Whole on resume" &&
	id=$(cat ../whole.id) &&
	test_expect_code 0 "$BATON" resume "$id" >../whole.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test_line_count = 1 "$FAKE_STATE/$id.log" &&
	"$BATON" events "$id" --json >../whole.events &&
	test_grep ! worktree_remade ../whole.events
'

test_expect_success 'a worktree lost under a crashed run is made again on resume and set up again, before its stage, on the same port' '
	cd repo &&
	id=$(cat ../repo.id) &&
	wt=$(run_field "$id" worktree) &&
	port=$(cat ".baton/runs/$id/port") &&
	# git no longer knows the worktree and its files are gone
	rm -rf ".git/worktrees/$id" "$wt" &&
	test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test_path_is_file "$wt/.set-up" &&
	printf "setup %s\nsetup %s\n" "$port" "$port" >../expect &&
	test_cmp ../expect "$FAKE_STATE/$id.log" &&
	"$BATON" events "$id" --json >../events &&
	remade=$(jq -s "[.[] | select(.type == \"worktree_remade\")][0].seq" ../events) &&
	test "$remade" != null &&
	setup2=$(jq -s "[.[] | select(.type == \"hook\" and .data.point == \"worktree_setup\")][1].seq" ../events) &&
	test "$remade" -lt "$setup2" &&
	again=$(jq -s "[.[] | select(.type == \"transition\" and .from == \"interrupted\")][0].seq" ../events) &&
	test "$again" -lt "$setup2" &&
	next=$(jq -s "[.[] | select(.type == \"stage_started\")] | last | .seq" ../events) &&
	test "$setup2" -lt "$next"
'

test_done
