#!/bin/bash
test_description='the command line: version, help, exit codes, --json, events -f, steer, config'
. "$(dirname "$0")/../lib/test-lib.sh"

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo "workflow: {pipeline: feature, max_review_loops: 3}"
'

test_expect_success 'baton version and --version print the version, exit 0' '
	"$BATON" version >out &&
	test_grep "^baton [0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*" out &&
	"$BATON" --version >out2 &&
	test_cmp out out2
'

test_expect_success 'baton help lists every command and the exit codes' '
	"$BATON" help >out &&
	for c in init run status show events pause resume abort steer approvals diff pipeline config version; do
		test_grep "^  $c" out || exit 1
	done &&
	test_grep "exit codes" out &&
	"$BATON" --help >out2 &&
	test_cmp out out2 &&
	"$BATON" help run >out3 &&
	test_grep "usage: baton run" out3 &&
	"$BATON" run --help >out4 &&
	test_grep "usage: baton run" out4 &&
	test_expect_code 2 "$BATON" help nope 2>err &&
	test_grep "'"'"'nope'"'"' is not a baton command" err &&
	test_expect_code 2 "$BATON" help run extra 2>err
'

test_expect_success 'baton with no command prints usage and exits 2' '
	test_expect_code 2 "$BATON" >out 2>err &&
	test_grep "usage" out
'

test_expect_success 'an unknown command exits 2 and says so' '
	test_expect_code 2 "$BATON" frobnicate >out 2>err &&
	test_grep "frobnicate" err &&
	test_grep "not a baton command" err
'

test_expect_success 'an unknown option or a missing argument exits 2' '
	cd repo &&
	test_expect_code 2 "$BATON" status --bogus 2>../err &&
	test_grep "unknown option .--bogus." ../err &&
	test_expect_code 2 "$BATON" show 2>../err &&
	test_grep "usage: baton show" ../err &&
	test_expect_code 2 "$BATON" run 2>../err &&
	test_grep "usage: baton run" ../err &&
	test_expect_code 2 "$BATON" run --pipeline 2>../err &&
	test_grep "needs a value" ../err
'

test_expect_success 'status with no runs: a hint, and --json is an empty array' '
	cd repo &&
	"$BATON" status >../out &&
	test_grep "no runs yet" ../out &&
	"$BATON" status --json >../status.json &&
	test_jq "type == \"array\" and length == 0" ../status.json
'

test_expect_success 'status --json is an array of run records' '
	cd repo &&
	"$BATON" run "First task" >/dev/null 2>&1 &&
	FAKE_REVIEW=BLOCKED "$BATON" run "Second task" >/dev/null 2>&1 || true
	"$BATON" status --json >../status.json &&
	test_jq "type == \"array\" and length == 2" ../status.json &&
	test_jq "all(.[]; has(\"id\") and has(\"status\") and has(\"stage\") and has(\"review_loops\"))" ../status.json &&
	test_jq "[.[].status] | sort == [\"blocked\", \"merge_ready\"]" ../status.json &&
	"$BATON" status --status blocked --json >../blocked.json &&
	test_jq "length == 1 and .[0].status == \"blocked\"" ../blocked.json
'

test_expect_success 'show of an unknown run: exit 1, "no run"' '
	cd repo &&
	test_expect_code 1 "$BATON" show r99-nothing >../out 2>../err &&
	test_grep "no run" ../err &&
	test_grep "r99-nothing" ../err &&
	test_expect_code 1 "$BATON" show r99-nothing --json >../out 2>../err &&
	test_line_count = 0 ../out
'

test_expect_success 'show without --json is for people' '
	cd repo &&
	id=$("$BATON" status --json | jq -r "map(select(.status == \"merge_ready\"))[0].id") &&
	"$BATON" show "$id" >../show &&
	test_grep "^status *merge_ready" ../show &&
	test_grep "^branch *baton/$id" ../show &&
	test_grep "plan.md" ../show &&
	test_grep "created -> planning" ../show
'

test_expect_success 'events -f on a finished run prints its events and ends' '
	cd repo &&
	id=$(newest_run) &&
	timeout 60 "$BATON" events "$id" -f --json >../follow &&
	"$BATON" events "$id" --json >../all &&
	test_cmp ../all ../follow &&
	timeout 60 "$BATON" events "$id" --follow >../follow-human &&
	test_grep "transition" ../follow-human
'

test_expect_success 'events -f on a live run follows it to the end' '
	cd repo &&
	last=$(newest_run) &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_WAIT_FOR=$FAKE_STATE/live.release \
		bg_start ../live "$BATON" run "Followed task" &&
	wait_for "test \"\$(newest_run)\" != $last" &&
	id=$(newest_run) &&
	wait_for_status "$id" executing &&
	bg_start ../follow "$BATON" events "$id" -f --json &&
	wait_for "grep -q stage_started.*execute ../follow.out" &&
	# the run is not over: the follower is still there
	test_path_is_missing ../follow.rc &&
	touch "$FAKE_STATE/live.release" &&
	rc=$(bg_wait ../live) &&
	test "$rc" = 0 &&
	rc=$(bg_wait ../follow 60) &&
	test "$rc" = 0 &&
	jq -r "select(.type == \"transition\") | .to" ../follow.out | tail -n 1 >../last &&
	echo merge_ready >../expect &&
	test_cmp ../expect ../last &&
	"$BATON" events "$id" --json >../all &&
	test_cmp ../all ../follow.out
'

# pause_after_slow KIND TASK: a run in the background whose KIND agent
# works until released, paused at the boundary after it; the id goes to
# steer.id.
pause_after_slow() {
	local kind=$1 task=$2 last id
	last=$(newest_run)
	rm -f "$FAKE_STATE/steer.release"
	FAKE_FAIL_STAGE=$kind FAKE_FAIL_MODE=slow FAKE_WAIT_FOR=$FAKE_STATE/steer.release \
		bg_start "$TRASH_DIRECTORY/steer" "$BATON" run "$task" &&
		wait_for "test \"\$(newest_run)\" != \"$last\"" &&
		id=$(newest_run) &&
		echo "$id" >"$TRASH_DIRECTORY/steer.id" &&
		wait_for "\"\$BATON\" events $id --json | grep -q \"agent_started.*-$kind-\"" &&
		"$BATON" pause "$id" >/dev/null &&
		touch "$FAKE_STATE/steer.release" &&
		wait_for_status "$id" paused
}

test_expect_success 'steer a run paused before a stage: the next stage reads the guidance' '
	cd repo &&
	pause_after_slow plan "Steered task" &&
	id=$(cat ../steer.id) &&
	test "$(run_field "$id" paused_at_status)" = architecting &&
	# named by its number, it is printed by its whole id
	"$BATON" steer "${id%%-*}" "prefer small functions" >../steer.out &&
	test_grep "^$id: guidance recorded for the next stage$" ../steer.out &&
	"$BATON" resume "$id" >/dev/null &&
	rc=$(bg_wait ../steer) &&
	test "$rc" = 0 &&
	test_grep "prefer small functions" "$FAKE_STATE/$id.architect.1.prompt" &&
	test_grep ! "prefer small functions" "$FAKE_STATE/$id.plan.1.prompt" &&
	# the guidance is for the next stage, not for every one after it
	test_grep ! "prefer small functions" "$FAKE_STATE/$id.execute.1.prompt" &&
	"$BATON" events "$id" --json >../events &&
	jq -r "select(.type == \"steer\") | .data.text" ../events >../texts &&
	echo "prefer small functions" >../expect &&
	test_cmp ../expect ../texts
'

test_expect_success 'steer before a validate stage reaches the next agent stage (review)' '
	cd repo &&
	pause_after_slow execute "Steered before checks" &&
	id=$(cat ../steer.id) &&
	test "$(run_field "$id" paused_at_status)" = validating &&
	"$BATON" steer "$id" "check the error paths" >/dev/null &&
	"$BATON" resume "$id" >/dev/null &&
	rc=$(bg_wait ../steer) &&
	test "$rc" = 0 &&
	test_grep "check the error paths" "$FAKE_STATE/$id.review.1.prompt"
'

test_expect_success 'steer while a stage works: the following stage reads it' '
	cd repo &&
	last=$(newest_run) &&
	FAKE_FAIL_STAGE=plan FAKE_FAIL_MODE=slow FAKE_WAIT_FOR=$FAKE_STATE/live2.release \
		bg_start ../live2 "$BATON" run "Steered live" &&
	wait_for "test \"\$(newest_run)\" != $last" &&
	id=$(newest_run) &&
	wait_for "\"\$BATON\" events $id --json | grep -q \"agent_started.*-plan-\"" &&
	"$BATON" steer "$id" "keep the diff small" >/dev/null &&
	touch "$FAKE_STATE/live2.release" &&
	rc=$(bg_wait ../live2) &&
	test "$rc" = 0 &&
	test_grep "keep the diff small" "$FAKE_STATE/$id.architect.1.prompt"
'

test_expect_success 'steer with no text is a usage error' '
	cd repo &&
	id=$(newest_run) &&
	test_expect_code 2 "$BATON" steer "$id" 2>../err &&
	test_grep "usage" ../err
'

test_expect_success 'config show prints each value with its origin' '
	cd repo &&
	"$BATON" config show >../config &&
	n=$(grep -n "max_review_loops" .baton/config.yaml | cut -d: -f1) &&
	test_grep "^workflow\.max_review_loops = 3 .*# \.baton/config\.yaml:$n" ../config &&
	test_grep "^validate\.timeout_seconds = 120 .*# \.baton/config\.yaml:[0-9]" ../config &&
	test_grep "^policies\.require_approval_at_stages = \[\] .*# default" ../config &&
	test_grep "# default" ../config
'

test_expect_success 'config show: the environment and the user config are origins too' '
	cd repo &&
	mkdir -p "$XDG_CONFIG_HOME/baton" &&
	printf "validate:\n  timeout_seconds: 77\n" >"$XDG_CONFIG_HOME/baton/config.yaml" &&
	printf "policies: {require_approval_at_stages: [executing]}\n" >>.baton/config.yaml &&
	BATON_MAX_REVIEW_LOOPS=5 "$BATON" config show >../config &&
	rm -f "$XDG_CONFIG_HOME/baton/config.yaml" &&
	test_grep "^workflow\.max_review_loops = 5 .*BATON_MAX_REVIEW_LOOPS" ../config &&
	test_grep "^policies\.require_approval_at_stages = \[.*executing.*\] .*\.baton/config\.yaml" ../config
'

test_expect_success 'config validate: ok, exit 0' '
	cd repo &&
	"$BATON" config validate >../out &&
	test_grep "config ok" ../out
'

test_expect_success 'config validate of a bad file: exit 1, names the place' '
	cd repo &&
	cp .baton/config.yaml ../config.bak &&
	printf "roles: [not, a, map]\n" >>.baton/config.yaml &&
	test_expect_code 1 "$BATON" config validate 2>../err &&
	test_grep "\.baton/config\.yaml:[0-9]*:[0-9]*" ../err &&
	test_grep "roles" ../err &&
	cp ../config.bak .baton/config.yaml
'

test_expect_success 'diff of a run that never got a worktree fails clearly' '
	cd repo &&
	test_expect_code 1 "$BATON" diff r99-nothing 2>../err &&
	test_grep "r99-nothing" ../err
'

test_expect_success '--store names another store, for every command that opens one' '
	cd repo &&
	"$BATON" migrate --store "$TRASH_DIRECTORY/other.db" >../out &&
	test_grep "other.db (sqlite): schema version 17, up to date" ../out &&
	"$BATON" task add "only in the other store" --store "sqlite:$TRASH_DIRECTORY/other.db" >/dev/null &&
	"$BATON" task list --store="$TRASH_DIRECTORY/other.db" >../other &&
	test_grep "only in the other store" ../other &&
	"$BATON" task list >../default &&
	test_grep ! "only in the other store" ../default &&
	test_expect_code 2 "$BATON" status --store "" 2>../err &&
	test_grep "store wants a store" ../err
'

test_expect_success 'a store URL that cannot be reached: exit 1, the URL named without its password' '
	cd repo &&
	test_expect_code 1 "$BATON" migrate --store "postgres://baton:s3cret@127.0.0.1:1/baton" 2>../err &&
	test_grep "cannot open store .postgres://baton" ../err &&
	test_grep ! "s3cret" ../err &&
	test_expect_code 2 "$BATON" migrate --store 2>../err &&
	test_grep "option .--store. needs a value" ../err
'

test_expect_success 'baton worker without repo.url says its branches stay here' '
	cd repo &&
	"$BATON" worker --workers 1 --exit-when-idle 2>../err &&
	test_grep "worker: repo.url is not set" ../err &&
	test_grep "worker: 1 worker on .* (sqlite), exiting when idle; tasks only" ../err &&
	test_expect_code 2 "$BATON" worker --listen 127.0.0.1:0 2>../err &&
	test_grep "unknown option" ../err
'

test_expect_success 'serve --listen takes HOST:PORT or off, as server.listen does: a port past 65535 or a bad form is a usage error naming it' '
	cd repo &&
	for v in 127.0.0.1:99999 bogus :7070 "127.0.0.1: 80" ""; do
		test_expect_code 2 "$BATON" serve --listen "$v" --exit-when-idle \
			</dev/null 2>../err &&
		test_grep "^baton: --listen: expected HOST:PORT (such as 127.0.0.1:7070) or off, not .$v.$" ../err &&
		test_path_is_missing .baton/http.url || return 1
	done
'

test_expect_success 'events takes one selector: RUN, --all or --task; a task that is not there is named' '
	cd repo &&
	id=$(newest_run) &&
	test_expect_code 2 "$BATON" events "$id" --all 2>../ev.err &&
	test_grep "^usage: baton events" ../ev.err &&
	test_expect_code 2 "$BATON" events --all --task 1 2>/dev/null &&
	test_expect_code 2 "$BATON" events --all extra 2>/dev/null &&
	test_expect_code 1 "$BATON" events --task 999 2>../ev.err &&
	test_grep "no task t999" ../ev.err
'

test_done
