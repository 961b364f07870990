#!/bin/bash
test_description='bug-fix pipelines: a parallel group of three reviewers (overlap, fan-in after the slowest) and a phased implementation (batches of review_interval steps, kill -9 and resume without redoing steps)'
. "$(dirname "$0")/../lib/test-lib.sh"

bug='greet prints an empty greeting for an empty name'

# Three code reviews that run at once, then a fourth on its own: the stage
# after the group.
group_yaml='pipelines:
  triple:
    type: bugfix
    description: three reviewers at once
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}
      - {type: code-review}'

# A phased implementation: the plan is cut into batches of two steps, each
# reviewed by a phased reviewer before the next batch starts.
phased_yaml='pipelines:
  phased:
    type: bugfix
    stages:
      - {type: rca}
      - type: implementation
        phased_reviews: [{provider: fake}]
        review_interval: 2
      - {type: code-review}'

# The run's events as one JSON array.
events_of() {
	"$BATON" events "$1" --json | jq -s .
}

test_expect_success 'setup' '
	make_repo group &&
	baton_init_with_agent group "$group_yaml" &&
	(cd group && "$BATON" pipeline validate >../validate.out 2>&1) &&
	make_repo phased &&
	baton_init_with_agent phased "$phased_yaml" &&
	(cd phased && "$BATON" pipeline validate >../validate2.out 2>&1)
'

# --- a parallel group -------------------------------------------------------

test_expect_success 'a group of three slow reviewers: the run reaches merge_ready' '
	cd group &&
	FAKE_SLEEP_KIND=code-review FAKE_SLEEP=2 FAKE_SLEEP_CODE_REVIEW_3=4 \
		test_expect_code 0 "$BATON" run --pipeline triple "$bug" >../triple.out 2>&1 &&
	id=$(newest_run) && echo "$id" >../triple.id &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed &&
	fake_calls "$id" code-review >../reviews &&
	test_line_count = 4 ../reviews
'

test_expect_success 'the group is announced with its three members, and done with their verdicts' '
	cd group &&
	id=$(cat ../triple.id) &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"group_started\")] | length == 1" ../events.json &&
	test_jq "[.[] | select(.type == \"group_started\")][0].data.stages == [\"code-review-1\", \"code-review-2\", \"code-review-3\"]" ../events.json &&
	test_jq "[.[] | select(.type == \"group_done\")][0].data.verdicts == {\"code-review-1\": \"approved\", \"code-review-2\": \"approved\", \"code-review-3\": \"approved\"}" ../events.json &&
	test_jq "[.[] | select(.type == \"stage_started\" and (.data.group // 0) > 0) | .data.stage] | sort == [\"code-review-1\", \"code-review-2\", \"code-review-3\"]" ../events.json
'

test_expect_success 'the members overlap in time (review_done started_ms/ended_ms)' '
	cd group &&
	id=$(cat ../triple.id) &&
	events_of "$id" >../events.json &&
	jq "[.[] | select(.type == \"review_done\") | .data]" ../events.json >../done.json &&
	test_jq "[.[] | .stage] | sort == [\"code-review-1\", \"code-review-2\", \"code-review-3\"]" ../done.json &&
	# every member started before any member ended: all three at once
	test_jq "([.[].started_ms] | max) < ([.[].ended_ms] | min)" ../done.json &&
	# the agents themselves overlapped too (the fake agent'"'"'s clock)
	grep "^code-review-[123] " "$FAKE_STATE/$id.times" >../times &&
	test_line_count = 3 ../times &&
	starts=$(cut -d" " -f2 ../times | sort -n | tail -n 1) &&
	ends=$(cut -d" " -f3 ../times | sort -n | head -n 1) &&
	test "$starts" -lt "$ends"
'

test_expect_success 'the next stage started only after the slowest member ended' '
	cd group &&
	id=$(cat ../triple.id) &&
	events_of "$id" >../events.json &&
	slowest=$(jq "[.[] | select(.type == \"review_done\") | .data.ended_ms] | max" ../events.json) &&
	test "$(jq -r "[.[] | select(.type == \"review_done\") | .data] | max_by(.ended_ms) | .stage" ../events.json)" = code-review-3 &&
	# in the event order: every member done, the group done, then code-review-4
	next=$(jq "[.[] | select(.type == \"stage_started\" and .data.stage == \"code-review-4\")][0].seq" ../events.json) &&
	last_done=$(jq "[.[] | select(.type == \"review_done\" or .type == \"group_done\") | .seq] | max" ../events.json) &&
	test "$next" -gt "$last_done" &&
	# and on the clock: its agent started after the slowest member ended
	start4=$(grep "^code-review-4 " "$FAKE_STATE/$id.times" | cut -d" " -f2) &&
	end3=$(grep "^code-review-3 " "$FAKE_STATE/$id.times" | cut -d" " -f3) &&
	test "$start4" -ge "$end3" &&
	test "$start4" -ge "$slowest"
'

test_expect_success 'each member wrote its own versioned verdict' '
	cd group &&
	id=$(cat ../triple.id) &&
	for i in 1 2 3 4; do
		test_jq ".status == \"approved\"" ".baton/runs/$id/code-review-fake-default-$i-v1.json" || return 1
	done
'

test_expect_success 'a member asks for changes: its fix and re-review run alone; the next stage waits for them' '
	cd group &&
	FAKE_VERDICT_CODE_REVIEW_2=needs_changes,approved \
		test_expect_code 0 "$BATON" run --pipeline triple "$bug" >../triple2.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	dir=.baton/runs/$id &&
	test_jq ".status == \"needs_changes\"" "$dir/code-review-fake-default-2-v1.json" &&
	test_jq ".status == \"approved\"" "$dir/code-review-fake-default-2-v2.json" &&
	test_path_is_missing "$dir/code-review-fake-default-1-v2.json" &&
	test_path_is_missing "$dir/code-review-fake-default-3-v2.json" &&
	fake_calls "$id" fix >../fixes &&
	test_line_count = 1 ../fixes &&
	fake_calls "$id" code-review >../reviews &&
	test_line_count = 5 ../reviews &&
	events_of "$id" >../events.json &&
	rereview=$(jq "[.[] | select(.type == \"verdict\" and .data.stage == \"code-review-2\" and .data.version == 2)][0].seq" ../events.json) &&
	next=$(jq "[.[] | select(.type == \"stage_started\" and .data.stage == \"code-review-4\")][0].seq" ../events.json) &&
	test "$next" -gt "$rereview" &&
	# the re-review was not part of a group: it ran on its own
	test_jq "[.[] | select(.type == \"group_started\")] | length == 1" ../events.json
'

test_expect_success 'a gate on the second member holds the whole group before any member starts' '
	cd group &&
	cat >>.baton/config.yaml <<-\EOF &&
	  gated:
	    type: bugfix
	    stages:
	      - {type: rca}
	      - {type: implementation}
	      - {type: code-review, parallel: true}
	      - {type: code-review, parallel: true, gate: true}
	EOF
	"$BATON" pipeline validate gated >../gated-validate.out 2>&1 &&
	bg_start ../gated "$BATON" run --pipeline gated "$bug" &&
	wait_for "test -n \"\$(newest_run)\" && test \"\$(run_status \$(newest_run))\" = waiting_for_approval" 60 &&
	id=$(newest_run) &&
	test "$(run_field "$id" gate_status)" = reviewing_code_1 &&
	test "$(fake_calls "$id" code-review | wc -l)" = 0 &&
	"$BATON" approvals approve "$id" >/dev/null &&
	test "$(bg_wait ../gated)" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	fake_calls "$id" code-review >../gated-reviews &&
	test_line_count = 2 ../gated-reviews &&
	events_of "$id" >../gated-events.json &&
	test_jq "[.[] | select(.type == \"group_started\")] | length == 1" ../gated-events.json
'

# --- a phased implementation -----------------------------------------------

test_expect_success 'phased: 4 plan steps, review_interval 2: merge_ready' '
	cd phased &&
	FAKE_PLAN_STEPS=4 test_expect_code 0 "$BATON" run --pipeline phased "Phased: $bug" >../phased.out 2>&1 &&
	id=$(newest_run) && echo "$id" >../phased.id &&
	test "$(run_status "$id")" = merge_ready &&
	test_jq "(.steps | length) == 4" ".baton/runs/$id/fix-plan.json"
'

test_expect_success 'phased: each step implemented once, two batch reviews (1-2, 3-4)' '
	cd phased &&
	id=$(cat ../phased.id) &&
	fake_calls "$id" | grep "^implementation \|^phased-review " | cut -d" " -f1,4,5 >../actual &&
	cat >../expect <<-\EOF &&
	implementation step=1 steps=-
	implementation step=2 steps=-
	phased-review step=- steps=1-2
	implementation step=3 steps=-
	implementation step=4 steps=-
	phased-review step=- steps=3-4
	EOF
	test_cmp ../expect ../actual &&
	dir=.baton/runs/$id &&
	for k in 1 2 3 4; do
		test_jq ".status == \"complete\"" "$dir/impl-steps/impl-step-$k-v1.json" || return 1
	done &&
	test_jq ".status == \"approved\"" "$dir/phased-reviews/phased-review-fake-default-steps-1-2-v1.json" &&
	test_jq ".status == \"approved\"" "$dir/phased-reviews/phased-review-fake-default-steps-3-4-v1.json" &&
	test_jq ".status == \"complete\"" "$dir/impl-result.json" &&
	for k in 1 2 3 4; do
		git show "baton/$id:step$k.txt" >../step || return 1
		test_line_count = 1 ../step || return 1
	done
'

test_expect_success 'phased: the events count the steps and the batches' '
	cd phased &&
	id=$(cat ../phased.id) &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"step_done\") | .data.step] == [1, 2, 3, 4]" ../events.json &&
	test_jq "[.[] | select(.type == \"step_done\") | .data.of] | unique == [4]" ../events.json &&
	test_jq "[.[] | select(.type == \"batch_review\") | [.data.first, .data.last]] == [[1, 2], [3, 4]]" ../events.json &&
	run_field "$id" progress >../progress &&
	test_jq ".steps.total == 4 and .steps.reviewed == 4" ../progress
'

test_expect_success 'phased: a batch review asking for changes fixes its step, then re-reviews the batch' '
	cd phased &&
	FAKE_PLAN_STEPS=4 FAKE_VERDICT_PHASED=needs_changes,approved FAKE_FINDING_FILE=step2.txt \
		test_expect_code 0 "$BATON" run --pipeline phased "Phased: $bug" >../phased2.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	fake_calls "$id" | grep "^implementation \|^phased-review " | cut -d" " -f1,4,5,6 >../actual &&
	cat >../expect <<-\EOF &&
	implementation step=1 steps=- version=1
	implementation step=2 steps=- version=1
	phased-review step=- steps=1-2 version=1
	implementation step=2 steps=- version=2
	phased-review step=- steps=1-2 version=2
	implementation step=3 steps=- version=1
	implementation step=4 steps=- version=1
	phased-review step=- steps=3-4 version=1
	EOF
	test_cmp ../expect ../actual &&
	dir=.baton/runs/$id &&
	test_path_is_file "$dir/impl-steps/impl-step-2-v2.json" &&
	test_path_is_missing "$dir/impl-steps/impl-step-1-v2.json" &&
	test_jq ".status == \"needs_changes\"" "$dir/phased-reviews/phased-review-fake-default-steps-1-2-v1.json" &&
	test_jq ".status == \"approved\"" "$dir/phased-reviews/phased-review-fake-default-steps-1-2-v2.json"
'

# --- kill -9 in step 4, then resume -----------------------------------------

test_expect_success 'phased: kill -9 of baton run while step 4 is implemented' '
	cd phased &&
	before=$(newest_run) &&
	FAKE_PLAN_STEPS=4 FAKE_FAIL_STAGE=implementation FAKE_FAIL_STEP=4 \
		FAKE_FAIL_MODE=slow FAKE_FAIL_ATTEMPTS=1 \
		FAKE_WAIT_FOR=$FAKE_STATE/never \
		bg_start ../crash "$BATON" run --pipeline phased "Phased: $bug" &&
	id=$(wait_for_new_run "$before") && echo "$id" >../crash.id &&
	wait_for "fake_calls $id implementation | grep -q \" step=4 \"" 60 &&
	# baton has recorded the agent it started for step 4
	wait_for "test \"\$(\"\$BATON\" events $id --json | grep -c agent_started)\" -ge \"\$(fake_calls $id | wc -l)\"" &&
	"$BATON" events "$id" --json |
		jq -r "select(.type == \"agent_started\") | .data.pid" | tail -n 1 >../crash.agent &&
	process_is_alive "$(cat ../crash.agent)" &&
	kill -KILL "$(cat ../crash.pid)" &&
	rc=$(bg_wait ../crash) &&
	test "$rc" = 137 &&
	test "$(run_status "$id")" = implementing &&
	fake_calls "$id" phased-review >../reviews &&
	test_line_count = 1 ../reviews
'

test_expect_success 'phased: baton resume finishes the run (exit 0)' '
	cd phased &&
	id=$(cat ../crash.id) &&
	FAKE_PLAN_STEPS=4 FAKE_FAIL_STAGE=implementation FAKE_FAIL_STEP=4 \
		FAKE_FAIL_MODE=slow FAKE_FAIL_ATTEMPTS=1 \
		FAKE_WAIT_FOR=$FAKE_STATE/never \
		test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	transitions "$id" >../actual &&
	test_grep "^interrupted$" ../actual &&
	! process_is_alive "$(cat ../crash.agent)"
'

test_expect_success 'phased: steps 1, 2 and 3 were implemented once each; step 4 again' '
	cd phased &&
	id=$(cat ../crash.id) &&
	for k in 1 2 3; do
		fake_calls "$id" implementation | grep " step=$k " >../calls &&
		test_line_count = 1 ../calls || return 1
	done &&
	fake_calls "$id" implementation | grep " step=4 " >../calls &&
	test_line_count = 2 ../calls &&
	fake_calls "$id" phased-review | cut -d" " -f5 >../actual &&
	printf "%s\n" steps=1-2 steps=3-4 >../expect &&
	test_cmp ../expect ../actual &&
	# one line per step on the branch: nothing was applied twice
	for k in 1 2 3 4; do
		git show "baton/$id:step$k.txt" >../step || return 1
		test_line_count = 1 ../step || return 1
	done
'

test_done
