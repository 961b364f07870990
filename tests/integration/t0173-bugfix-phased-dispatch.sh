#!/bin/bash
test_description='bug-fix phased reviews: a reviewer that gives no answer gets a synthetic needs_changes (marked, with the reason) and the loop goes on; one that never answers counts against max_phased_iterations and ends at the person question'
. "$(dirname "$0")/../lib/test-lib.sh"

bug='greet prints an empty greeting for an empty name'

# one retry per call, so a review that gets no answer is two agent calls
pipelines='execution:
  retry_cap: 1
pipelines:
  phased:
    type: bugfix
    stages:
      - {type: rca}
      - type: implementation
        phased_reviews: [{provider: fake}]
        review_interval: 2
        max_phased_iterations: 2
      - {type: code-review}
  pair:
    type: bugfix
    stages:
      - {type: rca}
      - type: implementation
        phased_reviews: [{provider: fake, parallel: true}, {provider: fake, model: other, parallel: true}]
        review_interval: 2
        max_phased_iterations: 2
      - {type: code-review}'

events_of() {
	"$BATON" events "$1" --json | jq -s .
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo "$pipelines" &&
	(cd repo && "$BATON" pipeline validate >../validate.out 2>&1)
'

question() {
	"$BATON" events "$1" --json | jq -s "[.[] | select(.type == \"question\")][$2 - 1].data"
}

test_expect_success 'a reviewer that fails once then answers: a synthetic needs_changes, then the batch is reviewed again' '
	cd repo &&
	FAKE_PLAN_STEPS=2 FAKE_FAIL_STAGE=phased-review FAKE_FAIL_MODE=exit FAKE_FAIL_ATTEMPTS=2 \
		test_expect_code 0 "$BATON" run --pipeline phased "$bug" >../once.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	fake_calls "$id" | grep "^implementation \|^phased-review " | cut -d" " -f1,2,5,6 >../actual &&
	cat >../expect <<-\EOF &&
	implementation 0 steps=- version=1
	implementation 0 steps=- version=1
	phased-review 0 steps=1-2 version=1
	phased-review 1 steps=1-2 version=1
	phased-review 0 steps=1-2 version=2
	EOF
	test_cmp ../expect ../actual &&
	dir=.baton/runs/$id/phased-reviews &&
	test_jq ".status == \"needs_changes\" and .synthetic == true and .findings == []" \
		"$dir/phased-review-fake-default-steps-1-2-v1.json" &&
	test_jq ".reason | startswith(\"dispatch failed: \")" "$dir/phased-review-fake-default-steps-1-2-v1.json" &&
	test_jq ".reason | contains(\"exited with 3\")" "$dir/phased-review-fake-default-steps-1-2-v1.json" &&
	test_jq ".status == \"approved\" and .synthetic == null" "$dir/phased-review-fake-default-steps-1-2-v2.json" &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"verdict\" and .data.synthetic == true) | .data.version] == [1]" ../events.json &&
	test_jq "[.[] | select(.type == \"batch_review\") | .data.round] == [0, 1]" ../events.json &&
	# the synthetic verdict names no step: none was implemented again
	test_path_is_missing ".baton/runs/$id/impl-steps/impl-step-1-v2.json" &&
	test_path_is_missing ".baton/runs/$id/impl-steps/impl-step-2-v2.json"
'

test_expect_success 'a reviewer that never answers: max_phased_iterations rounds, then the person question, and reject ends the run' '
	before=$(cd repo && newest_run) &&
	(cd repo && FAKE_PLAN_STEPS=2 FAKE_FAIL_STAGE=phased-review FAKE_FAIL_MODE=exit \
		bg_start "$TRASH_DIRECTORY/never" "$BATON" run --pipeline phased "$bug") &&
	cd repo &&
	wait_for "test \"\$(newest_run)\" != \"$before\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 1 >../q.json &&
	test_jq ".kind == \"phased\"" ../q.json &&
	test_jq "tostring | contains(\"after 2 rounds\")" ../q.json &&
	test_jq "tostring | contains(\"synthetic\")" ../q.json &&
	fake_calls "$id" phased-review | cut -d" " -f2,6 >../actual &&
	printf "%s\n" "0 version=1" "1 version=1" "0 version=2" "1 version=2" >../expect &&
	test_cmp ../expect ../actual &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"verdict\" and .data.synthetic == true)] | length == 2" ../events.json &&
	"$BATON" approvals reject "$id" >../reject.out 2>&1 &&
	rc=$(bg_wait ../never) &&
	test "$rc" != 0 &&
	test "$(run_status "$id")" != waiting_for_approval &&
	fake_calls "$id" phased-review >../calls &&
	test_line_count = 4 ../calls
'

test_expect_success 'parallel phased reviewers that give no answer: each gets its synthetic verdict, then both answer' '
	cd repo &&
	FAKE_PLAN_STEPS=2 FAKE_FAIL_STAGE=phased-review FAKE_FAIL_MODE=exit FAKE_FAIL_ATTEMPTS=4 \
		test_expect_code 0 "$BATON" run --pipeline pair "$bug" >../pair.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	dir=.baton/runs/$id/phased-reviews &&
	ls "$dir" >../files &&
	grep -c "v1.json" ../files >../n &&
	test "$(cat ../n)" = 2 &&
	jq -s "[.[] | select(.synthetic == true)] | length" "$dir"/*-v1.json >../syn &&
	test "$(cat ../syn)" = 2 &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"batch_review\") | .data.round] == [0, 1]" ../events.json &&
	jq -s "[.[] | select(.synthetic == true)] | length" "$dir"/*-v2.json >../syn2 &&
	test "$(cat ../syn2)" = 0 &&
	# the two reviewers call one provider at once: each call has its own
	# name, prompt, transcript and out folder (they shared them, and one
	# removed the out folder the other was making)
	calls=.baton/runs/$id/calls &&
	ls "$calls" | sed -n "s/-m1\.prompt\.md\$//p" >../m1 &&
	test_line_count -ge 2 ../m1 &&
	while read -r c; do
		test -f "$calls/$c-m2.prompt.md" &&
		! cmp -s "$calls/$c-m1.prompt.md" "$calls/$c-m2.prompt.md" ||
		return 1
	done <../m1
'

test_done
