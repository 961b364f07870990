#!/bin/bash
test_description='panel-review: three reviewers at once (a parallel group) and an arbiter that merges their findings over every round into one verdict'
. "$(dirname "$0")/../lib/test-lib.sh"

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo &&
	(cd repo && "$BATON" pipeline list) >list &&
	test_grep "^panel-review  *built-in  *make a change, have three reviewers review it at once" list &&
	(cd repo && "$BATON" pipeline show panel-review) >show &&
	test_grep "1: review-1, review-2, review-3 -> arbiter" show
'

test_expect_success 'all three approve: the arbiter approves and the run is merge_ready' '
	(cd repo && "$BATON" run --pipeline panel-review "Add a flag" >../ok.out 2>&1) &&
	id=$(cd repo && newest_run) &&
	test "$(cd repo && run_status "$id")" = merge_ready &&
	(cd repo && "$BATON" events "$id" --json) >ok.events &&
	jq -r "select(.type == \"group_started\") | .data.group" ok.events >groups &&
	test_grep 1 groups &&
	v=repo/.baton/runs/$id/panel-verdict.json &&
	test "$(jq -r .status $v)" = approved &&
	test "$(jq -r ".reviews | length" $v)" = 3 &&
	jq -r "select(.type == \"panel_verdict\") | .data.decision" ok.events >pv &&
	test_grep approved pv &&
	(cd repo && transitions "$id") >tr &&
	test_grep arbitrating tr
'

test_expect_success 'one reviewer asks for changes: fixed, re-reviewed, and its finding is in the verdict as resolved' '
	(cd repo && FAKE_VERDICT_REVIEW_2=needs_changes,approved "$BATON" run --pipeline panel-review "Add another" >../nc.out 2>&1) &&
	id=$(cd repo && newest_run) &&
	test "$(cd repo && run_status "$id")" = merge_ready &&
	v=repo/.baton/runs/$id/panel-verdict.json &&
	test "$(jq -r .status $v)" = approved &&
	test "$(jq -r ".reviews[] | select(.stage == \"review-2\") | .versions" $v)" = 2 &&
	test "$(jq -r ".findings | length" $v)" = 1 &&
	test "$(jq -r ".findings[0].open" $v)" = false &&
	test "$(jq -r ".findings[0].raised_by[0].stage" $v)" = review-2 &&
	test_grep "\[resolved\]" repo/.baton/runs/$id/panel-verdict.md
'

test_expect_success 'findings two reviewers raised at one place are one entry naming both' '
	(cd repo && FAKE_VERDICT_REVIEW_1=needs_changes,approved FAKE_VERDICT_REVIEW_3=needs_changes,approved \
		"$BATON" run --pipeline panel-review "Add a third" >../two.out 2>&1) &&
	id=$(cd repo && newest_run) &&
	v=repo/.baton/runs/$id/panel-verdict.json &&
	test "$(jq -r ".findings | length" $v)" = 1 &&
	test "$(jq -r ".findings[0].raised_by | map(.stage) | sort | join(\",\")" $v)" = review-1,review-3 &&
	test "$(jq -r ".findings[0].descriptions | length" $v)" = 2
'

test_expect_success 'an arbiter with no parallel group before it fails, naming why' '
	make_repo lone &&
	baton_init_with_agent lone "pipelines:
  lone:
    type: bugfix
    stages:
      - implementation
      - code-review
      - arbiter" &&
	(cd lone && test_must_fail "$BATON" run --pipeline lone "x" >../lone.out 2>&1) &&
	test_grep "an arbiter follows a parallel group of reviews, and none is before it" lone.out
'

test_done
