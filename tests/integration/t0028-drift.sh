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
	FAKE_WAIT_FOR=$FAKE_STATE/$1.release bg_start "$name" "$BATON" run "$2" &&
		wait_for "test -n \"\$(newest_run)\" && test \"\$(newest_run)\" != \"$last\"" &&
		id=$(newest_run) &&
		echo "$id" >"$name.id" &&
		wait_for_status "$id" executing &&
		"$BATON" pause "$id" >/dev/null &&
		touch "$FAKE_STATE/$1.release" &&
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
	FAKE_WAIT_FOR=$FAKE_STATE/five.release \
		bg_start ../five "$BATON" run "A driver stays" &&
	wait_for "test \"\$(newest_run)\" != \"$last\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" executing &&
	"$BATON" pause "$id" >/dev/null &&
	touch "$FAKE_STATE/five.release" &&
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

# --- the HTTP API's resume ----------------------------------------------

# serve_http listens where BATON_LISTEN says (server.listen) while the
# runs below are made without it: how serve listens is no drift of a run.

# load_http DIR: the address and token of the serve running in DIR (each
# test body is a subshell of its own).
load_http() {
	cd "$TRASH_DIRECTORY/$1" &&
		HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
		HTTP_TOKEN=$(cat .baton/token)
}

# task_json ID: `baton task show ID --json`.
task_json() {
	"$BATON" task show "$1" --json
}

test_expect_success 'API setup: paused runs, then a changed config and budget, then serve' '
	make_repo api &&
	baton_init_with_agent api "runtime: {judge: false}" &&
	cd api &&
	config_hash >../api-hash1 &&
	paused_run a1 "API keeps the snapshot" &&
	paused_run a2 "API starts afresh" &&
	paused_run a4 "API adopts the config" &&
	set_loops 3 &&
	paused_run a3 "API raises the budget" &&
	echo "budget: {max_cost_usd: 100}" >>.baton/config.yaml &&
	serve_http "$TRASH_DIRECTORY/api-serve" --workers 1
'

test_expect_success 'API: resume without a body on a drifted run is 409 config_drift naming the changes' '
	load_http api &&
	id=$(cat ../a1.id) &&
	api_expect 409 POST "/api/v1/runs/$id/resume" >../a1.409 &&
	test_jq ".error.code == \"config_drift\"" ../a1.409 &&
	test_jq ".error.changes | index(\"workflow.max_review_loops: 2 -> 3\") != null" ../a1.409 &&
	test_jq ".error.changes | index(\"budget: added\") != null" ../a1.409 &&
	test_jq ".error.message | startswith(\"config changed since $id started: \")" ../a1.409 &&
	test_jq ".error.message | contains(\"workflow.max_review_loops: 2 -> 3\")" ../a1.409 &&
	test_jq ".error.message | endswith(\"; resume with {\\\"config\\\": \\\"snapshot\\\"} (the config it started with), \\\"current\\\" or \\\"fresh\\\"\")" ../a1.409 &&
	api_expect 409 POST "/api/v1/runs/$id/resume" "{}" >../a1.409b &&
	test_jq ".error.code == \"config_drift\"" ../a1.409b &&
	test "$(run_status "$id")" = paused &&
	"$BATON" events "$id" --json >../a1.events &&
	test_grep ! "config_drift\|config_adopted" ../a1.events
'

test_expect_success 'API: a bad "config" is 400 naming the field and its values' '
	load_http api &&
	id=$(cat ../a1.id) &&
	api_expect 400 POST "/api/v1/runs/$id/resume" "{\"config\": \"bogus\"}" >../bad.json &&
	test_jq ".error.code == \"bad_request\"" ../bad.json &&
	test_jq ".error.message | contains(\"config\") and contains(\"snapshot\") and
		contains(\"current\") and contains(\"fresh\") and contains(\"bogus\")" ../bad.json &&
	api_expect 400 POST "/api/v1/runs/$id/resume" "{\"config\": 2}" >../bad2.json &&
	test_jq ".error.message | contains(\"config\")" ../bad2.json &&
	test "$(run_status "$id")" = paused
'

test_expect_success 'API: {"config": "snapshot"} resumes under the snapshot (200), which the run keeps to the end' '
	load_http api &&
	id=$(cat ../a1.id) &&
	api_expect 200 POST "/api/v1/runs/$id/resume" "{\"config\": \"snapshot\"}" >../a1.json &&
	test_jq ".id == \"$id\" and .status != \"paused\" and .driven == false" ../a1.json &&
	test_jq ".config_hash == \"$(cat ../api-hash1)\"" ../a1.json &&
	"$BATON" show "$id" --json >../a1.show &&
	test_jq "[.events[] | select(.type == \"config_drift\") | .data.choice] == [\"snapshot\"]" ../a1.show &&
	test_jq "[.events[] | select(.type == \"config_adopted\")] == []" ../a1.show &&
	test_expect_code 0 "$BATON" resume --snapshot "$id" >../a1.out 2>&1 &&
	"$BATON" show "$id" --json >../a1.show &&
	test_jq ".status == \"merge_ready\" and .max_review_loops == 2" ../a1.show &&
	test_jq ".config_hash == \"$(cat ../api-hash1)\"" ../a1.show
'

test_expect_success 'API: {"config": "current"} adopts the config the server loaded (200)' '
	load_http api &&
	id=$(cat ../a4.id) &&
	api_expect 200 POST "/api/v1/runs/$id/resume" "{\"config\": \"current\"}" >../a4.json &&
	test_jq ".config_hash == \"$(config_hash)\" and .max_review_loops == 3" ../a4.json &&
	"$BATON" show "$id" --json >../a4.show &&
	test_jq "[.events[] | select(.type == \"config_adopted\")] | length == 1" ../a4.show
'

test_expect_success 'API: {"config": "fresh"} answers 201 with a new bare run, not driven; the old one is aborted' '
	load_http api &&
	id=$(cat ../a2.id) &&
	api_expect 201 POST "/api/v1/runs/$id/resume" "{\"config\": \"fresh\"}" >../a2.json &&
	new=$(jq -r .id ../a2.json) &&
	test -n "$new" && test "$new" != "$id" &&
	test_jq ".fresh_of == \"$id\" and .driven == false and .task_id == null" ../a2.json &&
	test_jq ".status == \"created\" and .task == \"API starts afresh\"" ../a2.json &&
	test_jq ".config_hash == \"$(config_hash)\" and .max_review_loops == 3" ../a2.json &&
	"$BATON" show "$id" --json >../a2.show &&
	test_jq ".status == \"aborted\" and
		.reason == \"started afresh under the changed config\"" ../a2.show &&
	test_jq "[.events[] | select(.type == \"config_drift\") | .data.run] == [\"$new\"]" ../a2.show &&
	test "$(run_status "$new")" = created
'

test_expect_success 'API: a budget-only change is taken without a choice (200)' '
	load_http api &&
	id=$(cat ../a3.id) &&
	api_expect 200 POST "/api/v1/runs/$id/resume" >../a3.json &&
	test_jq ".config_hash == \"$(config_hash)\"" ../a3.json &&
	"$BATON" show "$id" --json >../a3.show &&
	test_jq "[.events[] | select(.type == \"config_adopted\") | .data.changes] ==
		[[\"budget: added\"]]" ../a3.show &&
	kill "$(cat ../api-serve.pid)" &&
	bg_wait ../api-serve >/dev/null
'

# --- a task's run started afresh ------------------------------------------

# paused_task_run NAME TITLE: under the serve running in the current
# repository, a task whose run pauses after its execute stage, which the
# worker hands back (the task blocked, paused). The task id goes to
# NAME.task, the run id to NAME.id.
paused_task_run() {
	local name=$TRASH_DIRECTORY/$1 task id
	rm -f "$FAKE_STATE/release" &&
		task=$("$BATON" task add "$2" --json | jq .id) &&
		echo "$task" >"$name.task" &&
		wait_for "task_json $task | jq -e \".run != null\"" 30 &&
		id=$(task_json "$task" | jq -r .run) &&
		echo "$id" >"$name.id" &&
		wait_for_status "$id" executing &&
		"$BATON" pause "$id" >/dev/null &&
		touch "$FAKE_STATE/release" &&
		wait_for_status "$id" paused &&
		wait_for "task_json $task | jq -e \".status == \\\"blocked\\\" and .block_reason == \\\"paused\\\"\"" 30
}

test_expect_success 'task setup: three tasks paused under serve, then a changed config and serve again' '
	make_repo tasks &&
	baton_init_with_agent tasks "runtime: {judge: false, sweep_seconds: 1}" &&
	cd tasks &&
	export FAKE_WAIT_FOR=$FAKE_STATE/release &&
	serve_http "$TRASH_DIRECTORY/tasks-serve" --workers 1 &&
	paused_task_run t1 "Start the task over" &&
	paused_task_run t2 "Start the task over from the API" &&
	paused_task_run t3 "Resume the task in a terminal" &&
	kill "$(cat ../tasks-serve.pid)" &&
	bg_wait ../tasks-serve >/dev/null &&
	set_loops 3 &&
	serve_http "$TRASH_DIRECTORY/tasks-serve2" --workers 1
'

test_expect_success 'resume --fresh of a task'"'"'s run: the new run is the task'"'"'s, driven here while serve runs; the task ends done' '
	cd tasks &&
	id=$(cat ../t1.id) &&
	task=$(cat ../t1.task) &&
	test_expect_code 0 "$BATON" resume --fresh "$id" >../t1.out 2>../t1.err &&
	new=$(sed -n "s/^$id  aborted: started afresh as //p" ../t1.err) &&
	test -n "$new" && test "$new" != "$id" &&
	test_grep "^$new  now the run of t$task$" ../t1.err &&
	test_grep "^$new: merge_ready" ../t1.out &&
	test "$(run_field "$new" task_id)" = "$task" &&
	test "$(run_field "$new" max_review_loops)" = 3 &&
	test "$(run_status "$id")" = aborted &&
	"$BATON" events "$new" --json >../t1-new.events &&
	test_grep ! "superseded\|abort_requested" ../t1-new.events &&
	wait_for "task_json $task | jq -e \".status == \\\"done\\\"\"" 60 &&
	task_json "$task" >../t1.json &&
	test_jq ".run == \"$new\" and .runs == [\"$id\", \"$new\"]" ../t1.json &&
	"$BATON" events --task "$task" --json | jq -s . >../t1.tevents &&
	test_jq "[.[] | select(.type == \"task_run\") | .data] ==
		[{\"run\": \"$id\"}, {\"run\": \"$new\", \"fresh_of\": \"$id\"}]" ../t1.tevents &&
	test_jq "[.[] | select(.type == \"task_settled\") | .data.status] |
		all(. != \"cancelled\" and . != \"failed\")" ../t1.tevents
'

test_expect_success 'API {"config": "fresh"} of a task'"'"'s run: 201, the task queued with the new run, which a worker drives to done' '
	load_http tasks &&
	id=$(cat ../t2.id) &&
	task=$(cat ../t2.task) &&
	api_expect 201 POST "/api/v1/runs/$id/resume" "{\"config\": \"fresh\"}" >../t2.json &&
	new=$(jq -r .id ../t2.json) &&
	test "$new" != "$id" &&
	test_jq ".fresh_of == \"$id\" and .driven == true and .task_id == $task" ../t2.json &&
	test "$(run_status "$id")" = aborted &&
	wait_for "task_json $task | jq -e \".status == \\\"done\\\"\"" 90 &&
	task_json "$task" >../t2.task.json &&
	test_jq ".run == \"$new\" and .runs == [\"$id\", \"$new\"]" ../t2.task.json &&
	test "$(run_status "$new")" = merge_ready &&
	test "$(run_field "$new" max_review_loops)" = 3 &&
	"$BATON" events --task "$task" --json | jq -s . >../t2.tevents &&
	test_jq "[.[] | select(.type == \"task_settled\") | .data.status] |
		all(. != \"cancelled\" and . != \"failed\")" ../t2.tevents
'

test_expect_success 'resume of a task'"'"'s run in a terminal while serve runs: no worker takes it over' '
	cd tasks &&
	id=$(cat ../t3.id) &&
	task=$(cat ../t3.task) &&
	# slow stages: sweeps come and go while it is driven here
	FAKE_FAIL_STAGE=any FAKE_SLEEP=2 \
		test_expect_code 0 "$BATON" resume --snapshot "$id" >../t3.out 2>&1 &&
	test_grep "^$id: merge_ready" ../t3.out &&
	"$BATON" events "$id" --json >../t3.events &&
	test_grep ! "superseded\|abort_requested" ../t3.events &&
	wait_for "task_json $task | jq -e \".status == \\\"done\\\"\"" 60 &&
	task_json "$task" >../t3.json &&
	test_jq ".run == \"$id\" and .runs == [\"$id\"]" ../t3.json
'

test_expect_success 'resume --fresh of a task'"'"'s run a worker is driving: the worker lets go, the new run is driven here; the task ends done' '
	cd tasks &&
	rm -f "$FAKE_STATE/release" &&
	task=$("$BATON" task add "Start over under a live worker" --json | jq .id) &&
	wait_for "task_json $task | jq -e \".run != null\"" 30 &&
	id=$(task_json "$task" | jq -r .run) &&
	wait_for_status "$id" executing &&
	set_loops 4 &&
	test_expect_code 0 "$BATON" resume --fresh "$id" >../t4.out 2>../t4.err &&
	new=$(sed -n "s/^$id  aborted: started afresh as //p" ../t4.err) &&
	test -n "$new" && test "$new" != "$id" &&
	test_grep "^$new: merge_ready" ../t4.out &&
	test "$(run_field "$new" max_review_loops)" = 4 &&
	# the worker stopped its agent (still waiting for the release) and let go
	test "$(run_status "$id")" = aborted &&
	wait_for "task_json $task | jq -e \".status == \\\"done\\\"\"" 60 &&
	task_json "$task" >../t4.json &&
	test_jq ".run == \"$new\" and .runs == [\"$id\", \"$new\"]" ../t4.json &&
	"$BATON" events --task "$task" --json | jq -s . >../t4.tevents &&
	test_jq "[.[] | select(.type == \"task_settled\") | .data.status] ==
		[\"done\"]" ../t4.tevents &&
	"$BATON" events "$new" --json >../t4-new.events &&
	test_grep ! "superseded\|abort_requested" ../t4-new.events &&
	touch "$FAKE_STATE/release" &&
	kill "$(cat ../tasks-serve2.pid)" &&
	bg_wait ../tasks-serve2 >/dev/null
'


test_expect_success 'a task'"'"'s --allow holds its run when resumed in a terminal under its snapshot' '
	make_repo pol &&
	baton_init_with_agent pol "runtime: {judge: false, sweep_seconds: 1}" &&
	cd pol &&
	task=$("$BATON" task add "Keep to the docs" --allow "docs/**" --json | jq .id) &&
	export FAKE_FAIL_STAGE=plan FAKE_FAIL_MODE=slow FAKE_WAIT_FOR=$FAKE_STATE/pol-release &&
	serve_http "$TRASH_DIRECTORY/pol-serve" --workers 1 &&
	wait_for "task_json $task | jq -e \".run != null\"" 30 &&
	id=$(task_json "$task" | jq -r .run) &&
	wait_for_status "$id" planning &&
	"$BATON" pause "$id" >/dev/null &&
	touch "$FAKE_STATE/pol-release" &&
	wait_for_status "$id" paused &&
	wait_for "task_json $task | jq -e \".status == \\\"blocked\\\"\"" 30 &&
	kill "$(cat ../pol-serve.pid)" &&
	bg_wait ../pol-serve >/dev/null &&
	unset FAKE_FAIL_STAGE FAKE_FAIL_MODE FAKE_WAIT_FOR &&
	set_loops 3 &&
	# the execute stage edits feature.txt, outside docs/**
	test_expect_code 3 "$BATON" resume --snapshot "$id" >../pol.out 2>&1 &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../pol.reason &&
	test_grep "outside policies.allowed_paths: feature.txt" ../pol.reason
'

test_done
