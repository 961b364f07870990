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

test_done
