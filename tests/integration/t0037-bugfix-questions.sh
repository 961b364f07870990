#!/bin/bash
test_description='bug-fix questions: an agent that is not installed asks to skip or install (a review, a parallel member, one of two RCAs), a parallel member refused its credentials asks for them, and a phased plan of more than 30 steps asks before it starts'
. "$(dirname "$0")/../lib/test-lib.sh"

bug='greet prints an empty greeting for an empty name'

# codex is named but not installed: every stage it plays blocks on it.
# locked is refused its credentials (as a 401 reads) until the file key
# exists in the fake agents' state (the sandbox lets it see that);
# then it is the fake agent.
providers='providers:
  fake: {type: command, command: ["'"$FAKE_AGENT"'"]}
  codex: {type: codex, command: ["/nonexistent/bin/codex"]}
  locked: {type: command, command: ["'"$TRASH_DIRECTORY/locked-agent"'"]}'

cat >"$TRASH_DIRECTORY/locked-agent" <<EOF
#!/bin/sh
if [ -f "$FAKE_STATE/key" ]; then
	exec "$FAKE_AGENT" "\$@"
fi
echo "Error: 401 Unauthorized: invalid api key" >&2
exit 1
EOF
chmod +x "$TRASH_DIRECTORY/locked-agent"

pipelines='pipelines:
  review-missing:
    type: bugfix
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review}
      - {type: code-review, provider: codex}
  group-missing:
    type: bugfix
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true, provider: codex}
      - {type: code-review, parallel: true}
  group-refused:
    type: bugfix
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true, provider: locked}
      - {type: code-review, parallel: true}
  phased-refused:
    type: bugfix
    stages:
      - {type: rca}
      - type: implementation
        phased_reviews: [{provider: fake, parallel: true}, {provider: locked, parallel: true}]
        review_interval: 2
      - {type: code-review}
  rca-missing:
    type: bugfix
    stages:
      - {type: rca}
      - {type: rca, provider: codex}
      - {type: implementation}
      - {type: code-review}
  only-rca-missing:
    type: bugfix
    stages:
      - {type: rca, provider: codex}
      - {type: implementation}
      - {type: code-review}
  prefer:
    type: bugfix
    stages:
      - {type: rca, provider: [codex, fake]}
      - {type: implementation}
      - {type: code-review, provider: [codex, fake]}
  long:
    type: bugfix
    stages:
      - {type: rca}
      - type: implementation
        phased_reviews: [{provider: fake}]
        review_interval: 40
      - {type: code-review}
  stuck:
    type: bugfix
    stages:
      - {type: rca}
      - type: implementation
        phased_reviews: [{provider: fake}]
        review_interval: 2
        max_phased_iterations: 2
      - {type: code-review}'

# start PIPELINE NAME [ENV=VALUE...]: a background run of PIPELINE in repo
# (bg_start NAME); its id goes to NAME.id.
start() {
	local pipeline=$1 name=$2 before
	shift 2
	before=$(cd repo && newest_run) &&
		(cd repo && bg_start "$TRASH_DIRECTORY/$name" env "$@" "$BATON" run --pipeline "$pipeline" "$bug") &&
		(cd repo && wait_for 'test "$(newest_run)" != "$before"' && newest_run) >"$TRASH_DIRECTORY/$name.id"
}

# question RUN N: the data of the run's Nth question event (from 1).
question() {
	"$BATON" events "$1" --json | jq -s "[.[] | select(.type == \"question\")][$2 - 1].data"
}

count_events() {
	"$BATON" events "$1" --json | jq -r "select(.type == \"$2\") | .seq" | wc -l
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo "$providers
roles: {default: fake}
$pipelines" &&
	(cd repo && "$BATON" pipeline validate >../validate.out 2>&1)
'

# --- a review whose agent is not installed -----------------------------------

test_expect_success 'a review with a missing agent asks to install or skip, naming the program and the fix' '
	start review-missing review &&
	cd repo &&
	id=$(cat ../review.id) &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 1 >../q.json &&
	test_jq ".kind == \"agent_missing\" and .stage == \"code-review-2\"" ../q.json &&
	test_jq ".options == [\"install\", \"skip\"]" ../q.json &&
	test_jq ".question | test(\"provider .codex.\") and test(\"not installed\") and test(\"npm install -g @openai/codex\") and test(\"skip\")" ../q.json &&
	# the provider is named once, not by baton and again by the agent
	test_jq ".question | test(\"[(]codex[)]: provider\") | not" ../q.json &&
	test "$(run_field "$id" gate_status)" = reviewing_code_2 &&
	test_path_is_missing ../review.rc
'

test_expect_success 'approve without guidance runs the review again: still missing, the same question' '
	cd repo &&
	id=$(cat ../review.id) &&
	"$BATON" approvals approve "$id" >../approve.out 2>&1 &&
	wait_for "test \"\$(count_events $id question)\" = 2" &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 2 >../q.json &&
	test_jq ".kind == \"agent_missing\" and .stage == \"code-review-2\"" ../q.json &&
	test "$(count_events "$id" stage_skipped)" = 0
'

test_expect_success 'approve --guidance skip: the review is skipped and the run reaches merge_ready' '
	cd repo &&
	id=$(cat ../review.id) &&
	"$BATON" approvals approve "$id" --guidance skip >../approve.out 2>&1 &&
	rc=$(bg_wait ../review) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed &&
	"$BATON" events "$id" --json | jq -s "[.[] | select(.type == \"stage_skipped\")]" >../skipped.json &&
	test_jq "length == 1 and .[0].data.stage == \"code-review-2\"" ../skipped.json &&
	run_field "$id" progress >../progress &&
	test_jq ".stages[\"code-review-2\"].status == \"skipped\"" ../progress &&
	test_jq ".stages[\"code-review-1\"].status == \"approved\"" ../progress &&
	test_jq "has(\"ask\") | not" ../progress
'

test_expect_success 'reject ends the run with gate_rejected' '
	start review-missing reject &&
	cd repo &&
	id=$(cat ../reject.id) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals reject "$id" >../reject.out 2>&1 &&
	bg_wait ../reject >/dev/null &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = gate_rejected
'

# --- a member of a parallel group --------------------------------------------

test_expect_success 'a parallel member with a missing agent: the others review, then one question' '
	start group-missing group &&
	cd repo &&
	id=$(cat ../group.id) &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 1 >../q.json &&
	test_jq ".kind == \"agent_missing\" and (.question | test(\"code-review-2\"))" ../q.json &&
	run_field "$id" progress >../progress &&
	test_jq ".stages[\"code-review-1\"].status == \"approved\" and .stages[\"code-review-3\"].status == \"approved\"" ../progress &&
	test_jq ".stages[\"code-review-2\"] | has(\"status\") | not" ../progress
'

test_expect_success 'skip: the member is skipped, the others are not reviewed again' '
	cd repo &&
	id=$(cat ../group.id) &&
	"$BATON" approvals approve "$id" --guidance skip >../approve.out 2>&1 &&
	rc=$(bg_wait ../group) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	fake_calls "$id" code-review >../calls &&
	test_line_count = 2 ../calls &&
	run_field "$id" progress >../progress &&
	test_jq ".stages[\"code-review-2\"].status == \"skipped\"" ../progress &&
	test_jq ".groups[\"1\"] == \"done\"" ../progress
'

# A member refused its credentials used to block the whole group; it
# asks now, as a stage alone does, and approving runs just that member.
test_expect_success 'a parallel member refused its credentials: the others review, then one question for it' '
	start group-refused refused &&
	cd repo &&
	id=$(cat ../refused.id) &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 1 >../q.json &&
	test_jq ".kind == \"needs\" and .needs == \"credential\"" ../q.json &&
	test_jq ".question | test(\"code-review-2\") and test(\"locked\")" ../q.json &&
	run_field "$id" progress >../progress &&
	test_jq ".stages[\"code-review-1\"].status == \"approved\" and .stages[\"code-review-3\"].status == \"approved\"" ../progress &&
	test_jq ".stages[\"code-review-2\"] | has(\"status\") | not" ../progress
'

test_expect_success 'approved while still refused: it asks again, the others are not reviewed again' '
	cd repo &&
	id=$(cat ../refused.id) &&
	"$BATON" approvals approve "$id" >../approve.out 2>&1 &&
	wait_for "test \"\$(count_events $id question)\" = 2" &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 2 >../q.json &&
	test_jq ".kind == \"needs\"" ../q.json &&
	fake_calls "$id" code-review >../calls &&
	test_line_count = 2 ../calls
'

test_expect_success 'the credential provided, approved: that member reviews and the run is ready' '
	cd repo &&
	id=$(cat ../refused.id) &&
	: >"$FAKE_STATE/key" &&
	"$BATON" approvals approve "$id" >../approve.out 2>&1 &&
	rc=$(bg_wait ../refused) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	fake_calls "$id" code-review >../calls &&
	test_line_count = 3 ../calls &&
	run_field "$id" progress >../progress &&
	test_jq ".stages[\"code-review-2\"].status == \"approved\"" ../progress
'

test_expect_success 'rejected: the run ends blocked, naming the refusal' '
	rm -f "$FAKE_STATE/key" &&
	start group-refused refused2 &&
	cd repo &&
	id=$(cat ../refused2.id) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals reject "$id" >../reject.out 2>&1 &&
	rc=$(bg_wait ../refused2) &&
	test "$rc" != 0 &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "locked" ../reason
'

test_expect_success 'a parallel phased reviewer refused its credentials: the batch asks, and runs again once provided' '
	rm -f "$FAKE_STATE/key" &&
	start phased-refused phased FAKE_PLAN_STEPS=2 &&
	cd repo &&
	id=$(cat ../phased.id) &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 1 >../q.json &&
	test_jq ".kind == \"needs\" and .needs == \"credential\" and .stage == \"implementation\"" ../q.json &&
	: >"$FAKE_STATE/key" &&
	"$BATON" approvals approve "$id" >../approve.out 2>&1 &&
	rc=$(bg_wait ../phased) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready
'

# --- RCAs ----------------------------------------------------------------------

test_expect_success 'one of two RCAs missing: skip it and consolidation uses the other' '
	start rca-missing rca &&
	cd repo &&
	id=$(cat ../rca.id) &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 1 >../q.json &&
	test_jq ".kind == \"agent_missing\" and .stage == \"rca-2\"" ../q.json &&
	"$BATON" approvals approve "$id" --guidance skip >../approve.out 2>&1 &&
	rc=$(bg_wait ../rca) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	dir=.baton/runs/$id &&
	test_jq ".sources | length == 1" "$dir/diagnosis.json"
'

test_expect_success 'the only RCA missing cannot be skipped: the run blocks with the fix named' '
	cd repo &&
	test_expect_code 3 "$BATON" run --pipeline only-rca-missing "$bug" >../only.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	test "$(count_events "$id" question)" = 0 &&
	"$BATON" show --json "$id" >../only.json &&
	test_jq ".reason | test(\"not installed\") and test(\"npm install -g @openai/codex\")" ../only.json
'

test_expect_success 'a provider list is an order of preference: the first installed one runs, nobody is asked' '
	cd repo &&
	"$BATON" run --pipeline prefer "$bug" >../prefer.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(count_events "$id" question)" = 0 &&
	"$BATON" show --json "$id" >../prefer.json &&
	test_jq "[.calls[] | .provider] | unique == [\"fake\"]" ../prefer.json &&
	test_path_is_file ".baton/runs/$id/code-review-fake-default-1-v1.json"
'

# --- a long phased plan ------------------------------------------------------

test_expect_success 'a phased plan of 31 steps asks before the first step' '
	start long long FAKE_PLAN_STEPS=31 &&
	cd repo &&
	id=$(cat ../long.id) &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 1 >../q.json &&
	test_jq ".kind == \"long_plan\" and .stage == \"implementation\"" ../q.json &&
	test_jq ".question | test(\"31 steps\") and test(\"recommended 30\")" ../q.json &&
	fake_calls "$id" implementation >../calls &&
	test_line_count = 0 ../calls
'

test_expect_success 'approve: all 31 steps are implemented, and it is not asked again' '
	cd repo &&
	id=$(cat ../long.id) &&
	"$BATON" approvals approve "$id" >../approve.out 2>&1 &&
	rc=$(bg_wait ../long 300) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(count_events "$id" question)" = 1 &&
	fake_calls "$id" implementation >../calls &&
	test_line_count = 31 ../calls
'

test_expect_success 'reject: the run ends gate_rejected before any step' '
	start long long2 FAKE_PLAN_STEPS=31 &&
	cd repo &&
	id=$(cat ../long2.id) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals reject "$id" >../reject.out 2>&1 &&
	bg_wait ../long2 >/dev/null &&
	test "$(run_field "$id" outcome)" = gate_rejected &&
	fake_calls "$id" implementation >../calls &&
	test_line_count = 0 ../calls
'

# --- a phased batch a person takes over ---------------------------------------

test_expect_success 'a batch still failing after max_phased_iterations asks; approve without guidance gives the agent its rounds again' '
	start stuck stuck FAKE_PLAN_STEPS=2 FAKE_FINDING_FILE=step2.txt \
		FAKE_VERDICT_PHASED=needs_changes,needs_changes,needs_changes,approved &&
	cd repo &&
	id=$(cat ../stuck.id) &&
	wait_for_status "$id" waiting_for_approval &&
	question "$id" 1 >../q.json &&
	test_jq ".kind == \"phased\"" ../q.json &&
	"$BATON" approvals approve "$id" >../approve.out 2>&1 &&
	rc=$(bg_wait ../stuck) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(count_events "$id" question)" = 1 &&
	fake_calls "$id" | grep "^implementation \|^phased-review " | cut -d" " -f1,4,5,6 >../actual &&
	cat >../expect <<-\EOF &&
	implementation step=1 steps=- version=1
	implementation step=2 steps=- version=1
	phased-review step=- steps=1-2 version=1
	implementation step=2 steps=- version=2
	phased-review step=- steps=1-2 version=2
	phased-review step=- steps=1-2 version=3
	implementation step=2 steps=- version=3
	phased-review step=- steps=1-2 version=4
	EOF
	test_cmp ../expect ../actual
'

test_done
