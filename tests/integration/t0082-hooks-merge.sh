#!/bin/bash
test_description='hooks: before_merge vetoes a landing with its reason, runs in the run worktree with its port, and lets the landing go once it passes'
. "$(dirname "$0")/../lib/test-lib.sh"

# before_merge: refuses while $FAKE_STATE/veto exists, saying why.
merge_config() {
	cat <<-EOF
	hooks:
	  before_merge:
	    - "echo \$BATON_HOOK \$BATON_RUN_ID \$BATON_PORT \$PWD >>$FAKE_STATE/merge.log"
	    - "if [ -e $FAKE_STATE/veto ]; then echo release notes missing; exit 4; fi"
	EOF
}

test_expect_success 'setup: a merge-ready run' '
	make_repo repo &&
	baton_init_with_agent repo "$(merge_config)" &&
	cd repo &&
	"$BATON" run "Add a --version flag" >/dev/null 2>&1 &&
	id=$(newest_run) && echo "$id" >../id &&
	test "$(run_status "$id")" = merge_ready &&
	git rev-parse main >../start
'

test_expect_success 'a failing before_merge hook refuses the landing, naming the hook and why' '
	cd repo &&
	id=$(cat ../id) &&
	: >"$FAKE_STATE/veto" &&
	test_expect_code 1 "$BATON" merge "$id" >../merge.out 2>&1 &&
	test_grep "before_merge\[1\] .*exited 4: release notes missing" ../merge.out &&
	test "$(git rev-parse main)" = "$(cat ../start)" &&
	"$BATON" merge --list --json >../list.json &&
	test_jq ".[0].status == \"failed\" and (.[0].reason | test(\"refused by a before_merge hook: hook before_merge\\\\[1\\\\]\"))" ../list.json &&
	"$BATON" events "$id" --json >../events &&
	jq -s -e "[.[] | select(.type == \"merge_failed\")][0].data | .cause == \"hook\" and (.reason | test(\"release notes missing\"))" ../events &&
	jq -s -e "[.[] | select(.type == \"hook\" and .data.point == \"before_merge\" and .data.index == 1)][0].data | .exit == 4" ../events &&
	# it ran in the run worktree, with the run port
	wt=$(run_field "$id" worktree) &&
	echo "before_merge $id $(cat .baton/runs/$id/port) $wt" >../expect &&
	test_cmp ../expect "$FAKE_STATE/merge.log"
'

test_expect_success 'once the hook passes, merging again lands the branch' '
	cd repo &&
	id=$(cat ../id) &&
	rm "$FAKE_STATE/veto" &&
	test_expect_code 0 "$BATON" merge "$id" >../merge2.out 2>&1 &&
	test_grep "merged as" ../merge2.out &&
	test "$(git rev-parse main)" != "$(cat ../start)" &&
	test_line_count = 2 "$FAKE_STATE/merge.log"
'

test_expect_success 'a run whose worktree is gone is refused rather than landed unchecked' '
	cd repo &&
	"$BATON" run "Another change" >/dev/null 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	wt=$(run_field "$id" worktree) &&
	git worktree remove --force "$wt" &&
	before=$(git rev-parse main) &&
	test_expect_code 1 "$BATON" merge "$id" >../gone.out 2>&1 &&
	test_grep "refused by a before_merge hook: cannot run the before_merge hooks .* worktree .* is gone" ../gone.out &&
	test "$(git rev-parse main)" = "$before"
'

test_done
