#!/bin/bash
test_description='the fix loop: requested changes, failed checks, the review budget'
. "$(dirname "$0")/../lib/test-lib.sh"

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo
'

test_expect_success 'CHANGES_REQUESTED twice, then APPROVED: merge_ready after two fix rounds' '
	cd repo &&
	FAKE_REVIEW=CHANGES_REQUESTED,CHANGES_REQUESTED,APPROVED \
		test_expect_code 0 "$BATON" run "Two rounds of review" >../out 2>&1 &&
	id=$(newest_run) && echo "$id" >../id1 &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" review_loops)" = 2
'

test_expect_success 'the transitions go reviewing -> fixing -> validating -> reviewing twice' '
	cd repo &&
	id=$(cat ../id1) &&
	cat >../expect <<-\EOF &&
	created
	planning
	planned
	architecting
	architected
	executing
	validating
	reviewing
	fixing
	validating
	reviewing
	fixing
	validating
	reviewing
	verifying
	merge_ready
	EOF
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual &&
	transition_pairs "$id" | grep -c "^reviewing -> fixing$" >../n &&
	echo 2 >../two &&
	test_cmp ../two ../n
'

test_expect_success 'two fix rounds on record: fix calls, artifacts and commits' '
	cd repo &&
	id=$(cat ../id1) &&
	fake_calls "$id" fix >../fixes &&
	test_line_count = 2 ../fixes &&
	fake_calls "$id" review >../reviews &&
	test_line_count = 3 ../reviews &&
	test_path_is_file ".baton/runs/$id/finding-responses.md" &&
	test_jq ".decision == \"APPROVED\"" ".baton/runs/$id/review.json" &&
	# every review.json version is kept in the store
	"$BATON" show "$id" --json >../show.json &&
	jq -r "[.artifacts[] | select(.artifact == \"review.json\") | .decision] | join(\",\")" ../show.json >../decisions &&
	echo CHANGES_REQUESTED,CHANGES_REQUESTED,APPROVED >../expect &&
	test_cmp ../expect ../decisions &&
	git show "baton/$id:feature.txt" >../feature &&
	test_grep "^fix 1$" ../feature &&
	test_grep "^fix 2$" ../feature
'

test_expect_success 'the fixer reads the review findings in its prompt' '
	id=$(cat id1) &&
	test_grep "the change needs another pass" "$FAKE_STATE/$id.fix.1.prompt"
'

test_expect_success 'a third CHANGES_REQUESTED with the default budget ends blocked (exit 3)' '
	cd repo &&
	FAKE_REVIEW=CHANGES_REQUESTED,CHANGES_REQUESTED,CHANGES_REQUESTED \
		test_expect_code 3 "$BATON" run "Never good enough" >../out 2>&1 &&
	id=$(newest_run) && echo "$id" >../id2 &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" review_loops)" = 2 &&
	run_field "$id" reason >../reason &&
	test_grep "budget" ../reason &&
	test_grep "max_review_loops" ../reason &&
	test_grep "budget" ../out
'

test_expect_success 'the blocked run went through two fix rounds, then reviewing -> blocked' '
	cd repo &&
	id=$(cat ../id2) &&
	transitions "$id" | tail -n 2 >../actual &&
	printf "%s\n" reviewing blocked >../expect &&
	test_cmp ../expect ../actual &&
	transitions "$id" | grep -c "^fixing$" >../n &&
	echo 2 >../expect &&
	test_cmp ../expect ../n &&
	fake_calls "$id" review >../reviews &&
	test_line_count = 3 ../reviews &&
	test_path_is_missing "$FAKE_STATE/$id.verify.1.prompt"
'

test_expect_success 'max_review_loops: 0 blocks on the first CHANGES_REQUESTED' '
	make_repo repo0 &&
	baton_init_with_agent repo0 "workflow: {pipeline: feature, max_review_loops: 0}" &&
	cd repo0 &&
	FAKE_REVIEW=CHANGES_REQUESTED test_expect_code 3 "$BATON" run "No budget" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	transitions "$id" >../actual &&
	test_grep ! "^fixing$" ../actual &&
	fake_calls "$id" fix >../fixes &&
	test_line_count = 0 ../fixes
'

test_expect_success 'a BLOCKED review ends the run blocked with the reviewer on record' '
	cd repo &&
	FAKE_REVIEW=BLOCKED test_expect_code 3 "$BATON" run "Reviewer says no" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "BLOCKED" ../reason
'

test_expect_success 'a failing check goes validating -> fixing, and a passing fix recovers' '
	cd repo &&
	FAKE_BREAK_TESTS=1 test_expect_code 0 "$BATON" run "Break then fix" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	transition_pairs "$id" >../pairs &&
	test_grep "^validating -> fixing$" ../pairs &&
	test_grep "^fixing -> validating$" ../pairs &&
	test "$(run_field "$id" review_loops)" = 1 &&
	fake_calls "$id" fix >../fixes &&
	test_line_count = 1 ../fixes &&
	# the fixer saw the failing check
	test_grep "BROKEN" "$FAKE_STATE/$id.fix.1.prompt" &&
	"$BATON" show "$id" --json >../show.json &&
	jq -r "[.artifacts[] | select(.artifact == \"validation.json\") | .decision] | join(\",\")" ../show.json >../decisions &&
	echo FAILED,PASSED >../expect &&
	test_cmp ../expect ../decisions
'

test_expect_success 'validation.json records the command, exit code, duration and output tail' '
	cd repo &&
	id=$(newest_run) &&
	v=.baton/runs/$id/validation.json &&
	test_jq ".passed == true" "$v" &&
	test_jq ".commands | length == 1" "$v" &&
	test_jq ".commands[0].command == \"make test\"" "$v" &&
	test_jq ".commands[0].exit_code == 0" "$v" &&
	test_jq "(.commands[0].duration_ms | type) == \"number\"" "$v" &&
	test_jq ".commands[0].output_tail | contains(\"tests passed\")" "$v"
'

test_expect_success 'a check that never passes ends blocked after the budget' '
	make_repo repo2 &&
	baton_init_with_agent repo2 "validate: {commands: [\"test -f never-there\"], timeout_seconds: 60}" &&
	cd repo2 &&
	test_expect_code 3 "$BATON" run "Checks never pass" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" review_loops)" = 2 &&
	transition_pairs "$id" >../pairs &&
	grep -c "^validating -> fixing$" ../pairs >../n &&
	echo 2 >../expect &&
	test_cmp ../expect ../n &&
	tail -n 1 ../pairs >../last &&
	echo "validating -> blocked" >../expect &&
	test_cmp ../expect ../last &&
	run_field "$id" reason >../reason &&
	test_grep "validation" ../reason &&
	test_grep "budget" ../reason &&
	fake_calls "$id" review >../reviews &&
	test_line_count = 0 ../reviews
'

test_expect_success 'a failing check is on record with its exit code and output' '
	cd repo2 &&
	id=$(newest_run) &&
	v=.baton/runs/$id/validation.json &&
	test_jq ".passed == false" "$v" &&
	test_jq ".commands[0].command == \"test -f never-there\"" "$v" &&
	test_jq ".commands[0].exit_code == 1" "$v"
'

test_expect_success 'validate commands run in the worktree and time out per command' '
	make_repo repo3 &&
	baton_init_with_agent repo3 "validate: {commands: [\"pwd > \$PWD_OUT_FILE\", \"sleep 30\"], timeout_seconds: 1}" &&
	cd repo3 &&
	# FAKE_STATE: the one folder of the trash the sandbox lets it write
	PWD_OUT_FILE=$FAKE_STATE/pwd.out \
		test_expect_code 3 "$BATON" run "Slow checks" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	test "$(cat "$FAKE_STATE/pwd.out")" = "$(run_field "$id" worktree)" &&
	v=.baton/runs/$id/validation.json &&
	test_jq ".commands[1].timed_out == true" "$v"
'

test_done
