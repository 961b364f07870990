#!/bin/bash
test_description='the derived transition table, a second pipeline, and refused requests'
. "$(dirname "$0")/../lib/test-lib.sh"

# The quick pipeline of these tests: a second, different pipeline defined
# in config, to show the engine is generic.
quick='pipelines:
  quick:
    description: execute, check and review; no plan
    stages:
      - {name: execute, kind: execute}
      - {name: validate, kind: validate}
      - {name: review, kind: review, on_changes: fix}
      - {name: fix, kind: fix, side: true, next: validate}'

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo "$quick"
'

# The feature table, edge by edge, derived by hand from DESIGN.md section 2:
# the main line, the fix loop (validating/reviewing -> fixing ->
# validating), gates and pauses at every boundary into a stage (A ->
# waiting_for_approval -> the stage, the stage before it, or blocked; A ->
# paused -> the stage), every non-terminal -> failed | aborted, every stage
# -> blocked | interrupted, interrupted -> the stage again.
test_expect_success 'the feature pipeline table is pinned edge by edge' '
	cat >expect <<-\EOF &&
	architected -> aborted
	architected -> executing
	architected -> failed
	architected -> paused
	architected -> waiting_for_approval
	architecting -> aborted
	architecting -> architected
	architecting -> blocked
	architecting -> failed
	architecting -> interrupted
	architecting -> waiting_for_approval
	created -> aborted
	created -> failed
	created -> paused
	created -> planning
	created -> waiting_for_approval
	executing -> aborted
	executing -> blocked
	executing -> failed
	executing -> interrupted
	executing -> paused
	executing -> validating
	executing -> waiting_for_approval
	fixing -> aborted
	fixing -> blocked
	fixing -> failed
	fixing -> interrupted
	fixing -> paused
	fixing -> validating
	fixing -> waiting_for_approval
	interrupted -> aborted
	interrupted -> architecting
	interrupted -> executing
	interrupted -> failed
	interrupted -> fixing
	interrupted -> planning
	interrupted -> reviewing
	interrupted -> validating
	interrupted -> verifying
	paused -> aborted
	paused -> architecting
	paused -> executing
	paused -> failed
	paused -> fixing
	paused -> planning
	paused -> reviewing
	paused -> validating
	paused -> verifying
	paused -> waiting_for_approval
	planned -> aborted
	planned -> architecting
	planned -> failed
	planned -> paused
	planned -> waiting_for_approval
	planning -> aborted
	planning -> blocked
	planning -> failed
	planning -> interrupted
	planning -> planned
	planning -> waiting_for_approval
	reviewing -> aborted
	reviewing -> blocked
	reviewing -> failed
	reviewing -> fixing
	reviewing -> interrupted
	reviewing -> paused
	reviewing -> verifying
	reviewing -> waiting_for_approval
	validating -> aborted
	validating -> blocked
	validating -> failed
	validating -> fixing
	validating -> interrupted
	validating -> paused
	validating -> reviewing
	validating -> waiting_for_approval
	verifying -> aborted
	verifying -> blocked
	verifying -> failed
	verifying -> interrupted
	verifying -> merge_ready
	verifying -> waiting_for_approval
	waiting_for_approval -> aborted
	waiting_for_approval -> architecting
	waiting_for_approval -> blocked
	waiting_for_approval -> executing
	waiting_for_approval -> failed
	waiting_for_approval -> fixing
	waiting_for_approval -> paused
	waiting_for_approval -> planning
	waiting_for_approval -> reviewing
	waiting_for_approval -> validating
	waiting_for_approval -> verifying
	EOF
	(cd repo && "$BATON" pipeline show feature --json) >feature.json &&
	jq -r ".transitions[] | \"\(.from) -> \(.to)\"" feature.json | sort >actual &&
	test_cmp expect actual
'

test_expect_success 'the feature table has no duplicate edge and every edge says why' '
	jq -r ".transitions[] | \"\(.from) -> \(.to)\"" feature.json | sort | uniq -d >dups &&
	test_line_count = 0 dups &&
	test_jq "all(.transitions[]; (.why | type) == \"string\" and (.why | length) > 0)" feature.json &&
	test_jq ".name == \"feature\" and .terminal == \"merge_ready\"" feature.json
'

test_expect_success 'the feature stages are the seed vocabulary' '
	jq -r ".stages[] | \"\(.name) \(.kind) \(.status) \(.done)\"" feature.json >actual &&
	cat >expect <<-\EOF &&
	plan plan planning planned
	architect architect architecting architected
	execute execute executing null
	validate validate validating null
	review review reviewing null
	verify verify verifying null
	fix fix fixing null
	EOF
	test_cmp expect actual
'

test_expect_success 'pipeline show prints the table for people too' '
	(cd repo && "$BATON" pipeline show feature) >human &&
	test_grep "waiting_for_approval" human &&
	test_grep "interrupted" human &&
	test_grep "fixing" human
'

test_expect_success 'pipeline list names the built-in and the configured pipelines' '
	(cd repo && "$BATON" pipeline list --json) >list.json &&
	jq -r ".[].name" list.json | sort >actual &&
	printf "%s\n" assist bugfix express feature loop panel-review plan-only quick research security-review >expect &&
	test_cmp expect actual &&
	(cd repo && "$BATON" pipeline list) >list.txt &&
	test_grep "^feature" list.txt &&
	test_grep "^quick" list.txt
'

test_expect_success 'the quick pipeline table is derived from its own stages' '
	cat >expect <<-\EOF &&
	created -> aborted
	created -> executing
	created -> failed
	created -> paused
	created -> waiting_for_approval
	executing -> aborted
	executing -> blocked
	executing -> failed
	executing -> interrupted
	executing -> paused
	executing -> validating
	executing -> waiting_for_approval
	fixing -> aborted
	fixing -> blocked
	fixing -> failed
	fixing -> interrupted
	fixing -> paused
	fixing -> validating
	fixing -> waiting_for_approval
	interrupted -> aborted
	interrupted -> executing
	interrupted -> failed
	interrupted -> fixing
	interrupted -> reviewing
	interrupted -> validating
	paused -> aborted
	paused -> executing
	paused -> failed
	paused -> fixing
	paused -> reviewing
	paused -> validating
	paused -> waiting_for_approval
	reviewing -> aborted
	reviewing -> blocked
	reviewing -> failed
	reviewing -> fixing
	reviewing -> interrupted
	reviewing -> merge_ready
	reviewing -> paused
	reviewing -> waiting_for_approval
	validating -> aborted
	validating -> blocked
	validating -> failed
	validating -> interrupted
	validating -> paused
	validating -> reviewing
	validating -> waiting_for_approval
	waiting_for_approval -> aborted
	waiting_for_approval -> blocked
	waiting_for_approval -> executing
	waiting_for_approval -> failed
	waiting_for_approval -> fixing
	waiting_for_approval -> paused
	waiting_for_approval -> reviewing
	waiting_for_approval -> validating
	EOF
	(cd repo && "$BATON" pipeline show quick --json) >quick.json &&
	jq -r ".transitions[] | \"\(.from) -> \(.to)\"" quick.json | sort >actual &&
	test_cmp expect actual
'

test_expect_success 'a run of the quick pipeline reaches merge_ready through its own statuses' '
	cd repo &&
	test_expect_code 0 "$BATON" run --pipeline quick "Quick change" >../out 2>&1 &&
	id=$(newest_run) && echo "$id" >../quick-id &&
	test "$(run_field "$id" pipeline)" = quick &&
	test "$(run_status "$id")" = merge_ready &&
	printf "%s\n" created executing validating reviewing merge_ready >../expect &&
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual &&
	printf "%s\n" "execute 0" "review 0" >../expect &&
	fake_calls "$id" >../actual &&
	test_cmp ../expect ../actual &&
	git show "baton/$id:feature.txt" >../feature &&
	test_grep "feature line from $id" ../feature
'

test_expect_success 'the quick pipeline has its fix loop too' '
	cd repo &&
	FAKE_REVIEW=CHANGES_REQUESTED,APPROVED \
		test_expect_code 0 "$BATON" run --pipeline quick "Quick with a fix" >../out 2>&1 &&
	id=$(newest_run) &&
	printf "%s\n" created executing validating reviewing fixing validating reviewing merge_ready >../expect &&
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual
'

test_expect_success 'workflow.pipeline picks the pipeline of a run without --pipeline' '
	make_repo repo2 &&
	baton_init_with_agent repo2 "$quick
workflow: {pipeline: quick}" &&
	cd repo2 &&
	"$BATON" run "Default quick" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_field "$id" pipeline)" = quick
'

test_expect_success 'a pipeline whose loop edge names no stage is refused, naming the place' '
	make_repo repo3 &&
	baton_init_with_agent repo3 "pipelines:
  broken:
    stages:
      - {name: execute, kind: execute}
      - {name: review, kind: review, on_changes: fixx}" &&
	cd repo3 &&
	test_expect_code 1 "$BATON" config validate 2>../err &&
	test_grep "config.yaml:[0-9][0-9]*:[0-9][0-9]*" ../err &&
	test_grep "fixx" ../err &&
	test_expect_code 1 "$BATON" run --pipeline broken "x" 2>../err2 &&
	test_grep "fixx" ../err2 &&
	"$BATON" status --json >../status.json &&
	test_jq "length == 0" ../status.json
'

# record RUN: the run's version and event count, to compare after a refusal.
record() {
	run_field "$1" version &&
		"$BATON" events "$1" --json | wc -l &&
		run_status "$1"
}

test_expect_success 'approvals approve of a run not waiting fails clearly and changes nothing' '
	cd repo &&
	id=$(cat ../quick-id) &&
	record "$id" >../before &&
	test_expect_code 1 "$BATON" approvals approve "$id" >../out 2>../err &&
	test_grep "not waiting for approval" ../err &&
	test_grep "$id" ../err &&
	record "$id" >../after &&
	test_cmp ../before ../after &&
	for d in reject request-changes; do
		test_expect_code 1 "$BATON" approvals $d "$id" --guidance "x" 2>../err &&
		test_grep "not waiting for approval" ../err || exit 1
	done &&
	record "$id" >../after &&
	test_cmp ../before ../after
'

test_expect_success 'approve of a live paused run fails and changes nothing' '
	cd repo &&
	last=$(newest_run) &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_WAIT_FOR=$FAKE_STATE/release \
		bg_start ../paused "$BATON" run "Pause me" &&
	wait_for "test \"\$(newest_run)\" != $last" &&
	id=$(newest_run) &&
	wait_for_status "$id" executing &&
	"$BATON" pause "$id" >/dev/null &&
	touch "$FAKE_STATE/release" &&
	wait_for_status "$id" paused &&
	record "$id" >../before &&
	test_expect_code 1 "$BATON" approvals approve "$id" 2>../err &&
	test_grep "paused, not waiting for approval" ../err &&
	record "$id" >../after &&
	test_cmp ../before ../after &&
	"$BATON" resume "$id" >/dev/null &&
	rc=$(bg_wait ../paused) &&
	test "$rc" = 0
'

for cmd in pause resume abort; do
	test_expect_success "$cmd of a terminal run fails clearly and changes nothing" '
		cd repo &&
		id=$(cat ../quick-id) &&
		record "$id" >../before &&
		test_expect_code 1 "$BATON" '$cmd' "$id" >../out 2>../err &&
		test_grep "cannot '$cmd' run .$id.: it is merge_ready, which is terminal" ../err &&
		record "$id" >../after &&
		test_cmp ../before ../after
	'
done

test_expect_success 'steer of a terminal run fails clearly and changes nothing' '
	cd repo &&
	id=$(cat ../quick-id) &&
	record "$id" >../before &&
	test_expect_code 1 "$BATON" steer "$id" "too late" 2>../err &&
	test_grep "terminal" ../err &&
	record "$id" >../after &&
	test_cmp ../before ../after
'

test_expect_success 'requests on an unknown run fail with exit 1 and create nothing' '
	cd repo &&
	"$BATON" status --json | jq length >../n-before &&
	for cmd in pause resume abort show events diff; do
		test_expect_code 1 "$BATON" $cmd no-such-run 2>../err &&
		test_grep "no-such-run" ../err || exit 1
	done &&
	test_expect_code 1 "$BATON" approvals approve no-such-run 2>../err &&
	"$BATON" status --json | jq length >../n-after &&
	test_cmp ../n-before ../n-after
'

test_done
