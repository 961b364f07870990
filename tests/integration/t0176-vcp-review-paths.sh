#!/bin/bash
test_description='VCP bug-fix review paths with scripted agents: plan-review needs_changes goes to revise and back, a rejected plan re-examined from the RCA, a needs_clarification verdict answered'
. "$(dirname "$0")/../lib/test-lib.sh"

bug='greet prints an empty greeting for an empty name'

# bugfix_bg NAME [ENV=VALUE...]: a background bugfix run in repo (bg_start
# NAME); waits until the run exists and writes NAME.id.
bugfix_bg() {
	local name=$1
	shift
	local before
	before=$(cd repo && newest_run) &&
		(cd repo && bg_start "$TRASH_DIRECTORY/$name" env "$@" "$BATON" run --pipeline bugfix "$bug") &&
		(cd repo && wait_for 'test "$(newest_run)" != "$before"' && newest_run) >"$TRASH_DIRECTORY/$name.id"
}

events_of() {
	"$BATON" events "$1" --json | jq -s .
}

verdicts_of() {
	events_of "$1" | jq -r ".[] | select(.type == \"verdict\") | \"\(.data.stage) v\(.data.version) \(.data.status)\""
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo
'

# --- plan-review revise ---------------------------------------------------

test_expect_success 'plan-review needs_changes: the plan is revised, re-reviewed as v2, the run completes' '
	cd repo &&
	FAKE_VERDICT_PLAN_REVIEW=needs_changes,approved "$BATON" run --pipeline bugfix "$bug" >../revise.out 2>&1 &&
	id=$(newest_run) &&
	echo "$id" >../revise.id &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed &&
	fake_calls "$id" | grep -v "^rca \|^code-review " >../actual &&
	cat >../expect <<-\EOF &&
	plan-review 0 stage=plan-review step=- steps=- version=1
	revise 0 stage=revise step=- steps=- version=-
	plan-review 0 stage=plan-review step=- steps=- version=2
	implementation 0 stage=implementation step=- steps=- version=-
	EOF
	test_cmp ../expect ../actual &&
	transition_pairs "$id" >../pairs &&
	test_grep "^reviewing_plan -> revising_plan$" ../pairs &&
	test_grep "^revising_plan -> reviewing_plan$" ../pairs &&
	test_grep ! "fixing" ../pairs &&
	verdicts_of "$id" | grep "^plan-review" >../verdicts &&
	printf "plan-review v1 needs_changes\nplan-review v2 approved\n" >../expect &&
	test_cmp ../expect ../verdicts &&
	dir=.baton/runs/$id &&
	test_jq ".status == \"needs_changes\"" "$dir/plan-review-fake-default-1-v1.json" &&
	test_jq ".status == \"approved\"" "$dir/plan-review-fake-default-1-v2.json" &&
	# the reviser rewrote the plan the implementer then read
	test_jq ".title | endswith(\"(revised 1)\")" "$dir/fix-plan.json" &&
	test_jq "[.steps[].description | endswith(\"(revised 1)\")] | all" "$dir/fix-plan.json" &&
	test_grep "revised 1" "$FAKE_STATE/$id.implementation.1.prompt" &&
	# the reviser read the plan review finding
	test_grep "plan-review" "$FAKE_STATE/$id.revise.1.prompt"
'

# --- plan_rejected: re-examine ------------------------------------------

test_expect_success 'a rejected plan asks plan_rejected; approve --guidance re-examines from rca-1 to merge_ready' '
	bugfix_bg reexam FAKE_VERDICT_PLAN_REVIEW=rejected,approved &&
	cd repo &&
	id=$(cat ../reexam.id) &&
	wait_for_status "$id" waiting_for_approval &&
	events_of "$id" >../events.json &&
	jq "[.[] | select(.type == \"question\")][-1].data" ../events.json >../question.json &&
	test_jq ".kind == \"plan_rejected\" and .stage == \"plan-review\"" ../question.json &&
	test_jq ".options == [\"re-examine\", \"reject\"]" ../question.json &&
	test_jq ".question | contains(\"rca-1\")" ../question.json &&
	fake_calls "$id" rca >../calls &&
	test_line_count = 2 ../calls &&
	"$BATON" approvals approve "$id" --guidance "the empty name reaches greet.sh unchecked" >/dev/null &&
	rc=$(bg_wait ../reexam) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed &&
	# both analyses ran again, then the plan was reviewed again (v2)
	fake_calls "$id" | grep -v "^code-review " >../actual &&
	cat >../expect <<-\EOF &&
	rca 0 stage=rca-1 step=- steps=- version=1
	rca 0 stage=rca-2 step=- steps=- version=1
	plan-review 0 stage=plan-review step=- steps=- version=1
	rca 0 stage=rca-1 step=- steps=- version=2
	rca 0 stage=rca-2 step=- steps=- version=2
	plan-review 0 stage=plan-review step=- steps=- version=2
	implementation 0 stage=implementation step=- steps=- version=-
	EOF
	test_cmp ../expect ../actual &&
	# the person'"'"'s context reached the re-examining analyst
	test_grep "the empty name reaches greet.sh unchecked" "$FAKE_STATE/$id.stage-rca-1.2.prompt" &&
	transition_pairs "$id" >../pairs &&
	test_grep "^waiting_for_approval -> analyzing_1$" ../pairs &&
	verdicts_of "$id" | grep "^plan-review" >../verdicts &&
	printf "plan-review v1 rejected\nplan-review v2 approved\n" >../expect &&
	test_cmp ../expect ../verdicts &&
	dir=.baton/runs/$id &&
	test_path_is_file "$dir/rca-fake-default-1-v2.json" &&
	test_jq ".status == \"rejected\"" "$dir/plan-review-fake-default-1-v1.json"
'

# --- needs_clarification ------------------------------------------------

test_expect_success 'needs_clarification: the run asks the reviewer question, the answer reaches the re-review' '
	bugfix_bg clarify FAKE_VERDICT_CODE_REVIEW_1=needs_clarification,approved &&
	cd repo &&
	id=$(cat ../clarify.id) &&
	wait_for_status "$id" waiting_for_approval &&
	events_of "$id" >../events.json &&
	jq "[.[] | select(.type == \"question\")][-1].data" ../events.json >../question.json &&
	test_jq ".kind == \"clarification\" and .stage == \"code-review-1\"" ../question.json &&
	test_jq ".question | length > 0" ../question.json &&
	verdicts_of "$id" | tail -n 1 >../last &&
	echo "code-review-1 v1 needs_clarification" >../expect &&
	test_cmp ../expect ../last &&
	fake_calls "$id" fix >../fixes &&
	test_line_count = 0 ../fixes &&
	"$BATON" approvals approve "$id" --guidance "an empty name must print Hello, world" >/dev/null &&
	rc=$(bg_wait ../clarify) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	verdicts_of "$id" | grep "^code-review-1" >../verdicts &&
	printf "code-review-1 v1 needs_clarification\ncode-review-1 v2 approved\n" >../expect &&
	test_cmp ../expect ../verdicts &&
	test_grep "an empty name must print Hello, world" "$FAKE_STATE/$id.stage-code-review-1.2.prompt" &&
	# a question, not a rework: no fix round
	fake_calls "$id" fix >../fixes &&
	test_line_count = 0 ../fixes &&
	transition_pairs "$id" >../pairs &&
	test_grep "^waiting_for_approval -> reviewing_code_1$" ../pairs
'

test_done
