#!/bin/bash
test_description='a run keeps its config snapshot; resume under a changed config names the changes and keeps, adopts or starts afresh'
. "$(dirname "$0")/../lib/test-lib.sh"

# The execute agent works until the test creates the run's release file
# (fake-agent's FAKE_WAIT_FOR), so a pause lands at the boundary after it.
export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow

# paused_run NAME TASK: a run of TASK paused before validating, with no
# process driving it any more (its driver was stopped while it waited).
# The id goes to NAME.id in the trash directory.
paused_run() {
	local name=$TRASH_DIRECTORY/$1 last id
	last=$(newest_run)
	FAKE_WAIT_FOR=$name.release bg_start "$name" "$BATON" run "$2" &&
		wait_for "test -n \"\$(newest_run)\" && test \"\$(newest_run)\" != \"$last\"" &&
		id=$(newest_run) &&
		echo "$id" >"$name.id" &&
		wait_for_status "$id" executing &&
		"$BATON" pause "$id" >/dev/null &&
		touch "$name.release" &&
		wait_for_status "$id" paused &&
		kill -TERM "$(cat "$name.pid")" &&
		bg_wait "$name" >/dev/null &&
		test "$(run_status "$id")" = paused
}

# set_loops N: workflow.max_review_loops in .baton/config.yaml.
set_loops() {
	if grep -q "^workflow:" .baton/config.yaml; then
		sed -i "s/^workflow:.*/workflow: {max_review_loops: $1}/" .baton/config.yaml
	else
		echo "workflow: {max_review_loops: $1}" >>.baton/config.yaml
	fi
}

# config_hash: the hash of the config as it is now.
config_hash() {
	"$BATON" config validate | sed -n 's/.*(hash \([0-9a-f]*\)).*/\1/p'
}

test_expect_success 'setup: a run paused at a boundary, its driver gone' '
	make_repo repo &&
	baton_init_with_agent repo &&
	cd repo &&
	config_hash >../hash1 &&
	test -s ../hash1 &&
	paused_run one "Keep to the snapshot"
'

test_expect_success 'the run keeps its config snapshot beside its hash' '
	cd repo &&
	id=$(cat ../one.id) &&
	"$BATON" show "$id" --json >../one.json &&
	test_jq ".config_hash == \"$(cat ../hash1)\"" ../one.json &&
	test_jq ".config_snapshot.workflow.max_review_loops == \"2\"" ../one.json &&
	test_jq ".config_snapshot.providers.fake.type == \"command\"" ../one.json &&
	test_jq ".outcome == null and .progress == null" ../one.json &&
	"$BATON" status --json >../status.json &&
	test_jq ".[0] | has(\"outcome\") and (has(\"config_snapshot\") | not)" ../status.json
'

test_expect_success 'a changed key: resume without a flag and no terminal exits 2, naming the change and the flags' '
	cd repo &&
	id=$(cat ../one.id) &&
	set_loops 3 &&
	test_expect_code 2 "$BATON" resume "$id" </dev/null >../ask.out 2>../ask.err &&
	test_grep "config changed since $id started:" ../ask.err &&
	test_grep "^  workflow.max_review_loops: 2 -> 3$" ../ask.err &&
	test_grep -e "--snapshot" ../ask.err &&
	test_grep -e "--current" ../ask.err &&
	test_grep -e "--fresh" ../ask.err &&
	test "$(run_status "$id")" = paused &&
	"$BATON" events "$id" --json >../events &&
	test_grep ! "config_drift\|config_adopted" ../events
'

test_expect_success 'resume --snapshot finishes the run under the config it started with' '
	cd repo &&
	id=$(cat ../one.id) &&
	test_expect_code 0 "$BATON" resume --snapshot "$id" >../snap.out 2>&1 &&
	test_grep "goes on under the config it started with" ../snap.out &&
	"$BATON" show "$id" --json >../one.json &&
	test_jq ".status == \"merge_ready\" and .outcome == \"completed\"" ../one.json &&
	test_jq ".config_hash == \"$(cat ../hash1)\" and .max_review_loops == 2" ../one.json &&
	test_jq "[.events[] | select(.type == \"config_drift\") | .data] ==
		[{\"choice\": \"snapshot\",
		  \"changes\": [\"workflow.max_review_loops: 2 -> 3\"]}]" ../one.json &&
	test_jq "[.events[] | select(.type == \"config_adopted\")] == []" ../one.json &&
	"$BATON" show "$id" >../show &&
	test_grep "^outcome *completed" ../show &&
	test_grep "^config *$(cat ../hash1) (snapshot kept)" ../show
'

test_expect_success 'resume --current adopts the config: a new hash and snapshot, config_adopted' '
	cd repo &&
	paused_run two "Adopt the new config" &&
	id=$(cat ../two.id) &&
	old=$(run_field "$id" config_hash) &&
	set_loops 4 &&
	config_hash >../hash2 &&
	test "$old" != "$(cat ../hash2)" &&
	test_expect_code 0 "$BATON" resume --current "$id" >../cur.out 2>&1 &&
	test_grep "config changed since $id started:" ../cur.out &&
	test_grep "workflow.max_review_loops: 3 -> 4" ../cur.out &&
	"$BATON" show "$id" --json >../two.json &&
	test_jq ".status == \"merge_ready\"" ../two.json &&
	test_jq ".config_hash == \"$(cat ../hash2)\" and .max_review_loops == 4" ../two.json &&
	test_jq ".config_snapshot.workflow.max_review_loops == \"4\"" ../two.json &&
	test_jq "[.events[] | select(.type == \"config_adopted\") | .data] ==
		[{\"changes\": [\"workflow.max_review_loops: 3 -> 4\"],
		  \"from\": \"$old\", \"to\": \"$(cat ../hash2)\"}]" ../two.json
'

test_expect_success 'resume --fresh aborts the run and drives a new one of the same task to merge_ready' '
	cd repo &&
	paused_run three "Start over" &&
	id=$(cat ../three.id) &&
	set_loops 5 &&
	test_expect_code 0 "$BATON" resume --fresh "$id" >../fresh.out 2>../fresh.err &&
	new=$(newest_run) &&
	test "$new" != "$id" &&
	test_grep "$id  aborted: started afresh as $new" ../fresh.err &&
	test_grep "^$new: merge_ready" ../fresh.out &&
	"$BATON" show "$id" --json >../three.json &&
	test_jq ".status == \"aborted\" and .outcome == \"aborted\" and
		.reason == \"started afresh under the changed config\"" ../three.json &&
	test_jq "[.events[] | select(.type == \"config_drift\") | .data] ==
		[{\"choice\": \"fresh\", \"run\": \"$new\",
		  \"changes\": [\"workflow.max_review_loops: 4 -> 5\"]}]" ../three.json &&
	"$BATON" show "$new" --json >../new.json &&
	test_jq ".status == \"merge_ready\" and .task == \"Start over\" and
		.pipeline == \"feature\" and .max_review_loops == 5" ../new.json &&
	test_jq ".config_hash == \"$(config_hash)\"" ../new.json &&
	"$BATON" show "$id" >../show &&
	test_grep "^outcome *aborted" ../show
'

test_expect_success 'a budget-only change is taken without asking' '
	cd repo &&
	paused_run four "Raise the budget" &&
	id=$(cat ../four.id) &&
	echo "budget: {max_cost_usd: 100}" >>.baton/config.yaml &&
	test_expect_code 0 "$BATON" resume "$id" </dev/null >../budget.out 2>&1 &&
	test_grep "budget changed: resuming with the new budget" ../budget.out &&
	test_grep ! "config changed since" ../budget.out &&
	"$BATON" show "$id" --json >../four.json &&
	test_jq ".status == \"merge_ready\" and .config_hash == \"$(config_hash)\"" ../four.json &&
	test_jq "[.events[] | select(.type == \"config_adopted\") | .data.changes] ==
		[[\"budget: added\"]]" ../four.json
'

test_expect_success 'a secret in the config is redacted in the snapshot and back for the agents' '
	make_repo secret &&
	baton_init_with_agent secret "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"], env: {BATON_T_TOKEN: s3cr3t-value-123}}" &&
	cd secret &&
	export BATON_T_TOKEN=s3cr3t-value-123 &&
	paused_run six "Keep the secret" &&
	id=$(cat ../six.id) &&
	"$BATON" show "$id" --json >../six.json &&
	test_jq ".config_snapshot.providers.fake.env.BATON_T_TOKEN == \"[redacted:BATON_T_TOKEN]\"" ../six.json &&
	test_grep ! "s3cr3t-value-123" ../six.json &&
	set_loops 7 &&
	test_expect_code 0 "$BATON" resume --snapshot "$id" >../six.out 2>&1 &&
	test_grep ! "BATON_T_TOKEN" ../six.out &&
	test "$(run_status "$id")" = merge_ready &&
	test_grep "^BATON_T_TOKEN=s3cr3t-value-123$" "$FAKE_STATE/$id.review.1.env"
'

test_expect_success 'a live driver keeps its config: resume says so and lets it go on' '
	cd repo &&
	last=$(newest_run) &&
	FAKE_WAIT_FOR=$TRASH_DIRECTORY/five.release \
		bg_start ../five "$BATON" run "A driver stays" &&
	wait_for "test \"\$(newest_run)\" != \"$last\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" executing &&
	"$BATON" pause "$id" >/dev/null &&
	touch ../five.release &&
	wait_for_status "$id" paused &&
	set_loops 6 &&
	test_expect_code 1 "$BATON" resume --current "$id" </dev/null 2>../live.err &&
	test_grep "driven by pid" ../live.err &&
	test_expect_code 0 "$BATON" resume "$id" </dev/null >../live.out 2>&1 &&
	test_grep "goes on under the config it started with" ../live.out &&
	test_grep "carries on" ../live.out &&
	rc=$(bg_wait ../five) &&
	test "$rc" = 0 &&
	test "$(run_field "$id" max_review_loops)" = 5
'

test_done
