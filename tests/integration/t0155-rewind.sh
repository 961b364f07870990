#!/bin/bash
test_description='resume --from STAGE: rewind a run to an earlier stage of its pipeline'
. "$(dirname "$0")/../lib/test-lib.sh"

# start_slow_run NAME TASK: as in t0004, a background run whose execute
# agent works until NAME.release exists; its id goes to NAME.id.
start_slow_run() {
	local name=$TRASH_DIRECTORY/$1 last
	last=$(newest_run)
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow \
	FAKE_WAIT_FOR=$FAKE_STATE/$1.release bg_start "$name" "$BATON" run "$2" &&
		wait_for "test -n \"\$(newest_run)\" && test \"\$(newest_run)\" != \"$last\"" &&
		newest_run >"$name.id" &&
		wait_for_status "$(cat "$name.id")" executing
}

# calls_of RUN: the kinds its agent was called for, one a line.
calls_of() {
	fake_calls "$1" | cut -d" " -f1
}

test_expect_success 'setup: a run carried to merge_ready' '
	make_repo repo &&
	baton_init_with_agent repo &&
	cd repo &&
	"$BATON" run "Add the feature" >../run.out 2>&1 &&
	newest_run >../id &&
	test "$(run_status "$(cat ../id)")" = merge_ready
'

test_expect_success 'a stage the pipeline does not have is an error naming its stages' '
	cd repo &&
	id=$(cat ../id) &&
	test_expect_code 2 "$BATON" resume "$id" --from deploy >../bad.out 2>&1 &&
	test_grep "pipeline .feature. has no stage .deploy." ../bad.out &&
	test_grep "plan (planning)" ../bad.out &&
	test_grep "execute (executing)" ../bad.out &&
	test_grep "verify (verifying)" ../bad.out &&
	test "$(run_status "$id")" = merge_ready &&
	# a side stage is entered only from another one
	test_must_fail "$BATON" resume "$id" --from fix >../side.out 2>&1 &&
	test_grep "side stage" ../side.out
'

test_expect_success 'rewinding a terminal run from executing makes a new run; plan and architecture reused' '
	cd repo &&
	id=$(cat ../id) &&
	"$BATON" resume "$id" --from executing >../rw.out 2>&1 &&
	test_grep "rewound into a new run" ../rw.out &&
	new=$(newest_run) &&
	test "$new" != "$id" &&
	test "$(run_status "$new")" = merge_ready &&
	test "$(run_status "$id")" = merge_ready &&
	calls_of "$new" >../calls &&
	test_grep ! "^plan$" ../calls &&
	test_grep ! "^architect$" ../calls &&
	test "$(grep -c "^execute$" ../calls)" = 1 &&
	test_cmp .baton/runs/$id/plan.md .baton/runs/$new/plan.md &&
	test_cmp .baton/runs/$id/architecture.md .baton/runs/$new/architecture.md &&
	# the worktree started from the checkpoint before execute: only
	# the new run'"'"'s line
	git -C "$(run_field "$new" worktree)" show HEAD:feature.txt >../feature &&
	test_line_count = 1 ../feature &&
	test_grep "$new" ../feature &&
	"$BATON" events "$id" --json >../ev-old &&
	jq -s -e --arg n "$new" "[.[] | select(.type == \"rewound\" and .data.run == \$n and .data.stage == \"execute\")] | length == 1" ../ev-old &&
	"$BATON" events "$new" --json >../ev-new &&
	jq -s -e --arg o "$id" "[.[] | select(.type == \"rewound_from\" and .data.run == \$o)] | length == 1" ../ev-new &&
	jq -s -e "[.[] | select(.type == \"rewound_from\")][0].data.kept | index(\"plan.md\") != null" ../ev-new &&
	# the old run is as it was
	transitions "$id" | tail -n 1 >../last &&
	echo merge_ready >../expect &&
	test_cmp ../expect ../last
'

# Each stage of the feature pipeline: the kinds called again.
for case in "plan:plan architect execute review verify" \
	"architecting:architect execute review verify" \
	"execute:execute review verify" \
	"validate:review verify" \
	"reviewing:review verify" \
	"verify:verify"; do
	from=${case%%:*}
	want=${case#*:}
	test_expect_success "rewind from $from calls the agents of $from and after only" '
		cd repo &&
		id=$(cat ../id) &&
		"$BATON" resume "$id" --from '"$from"' >../rw-'"$from"'.out 2>&1 &&
		new=$(newest_run) &&
		test "$new" != "$id" &&
		test "$(run_status "$new")" = merge_ready &&
		calls_of "$new" | paste -sd" " >../got &&
		echo "'"$want"'" >../want &&
		test_cmp ../want ../got
	'
done

test_expect_success 'a run made by a rewind rewinds again from the checkpoint it was made at' '
	cd repo &&
	id=$(cat ../id) &&
	"$BATON" resume "$id" --from validate >/dev/null 2>&1 &&
	second=$(newest_run) &&
	test "$(run_status "$second")" = merge_ready &&
	"$BATON" resume "$second" --from validating >/dev/null 2>&1 &&
	third=$(newest_run) &&
	test "$third" != "$second" &&
	test "$(run_status "$third")" = merge_ready &&
	test "$(calls_of "$third" | paste -sd" ")" = "review verify" &&
	# both start from the first run'"'"'s execute checkpoint
	git -C "$(run_field "$third" worktree)" show HEAD:feature.txt >../feature3 &&
	test_line_count = 1 ../feature3 &&
	test_grep "$id" ../feature3
'

test_expect_success 'a run live in a stage is refused: pause it first' '
	cd repo &&
	start_slow_run live "Live run" &&
	id=$(cat ../live.id) &&
	test_must_fail "$BATON" resume "$id" --from plan >../live.out 2>&1 &&
	test_grep "pause it first" ../live.out &&
	test "$(run_status "$id")" = executing &&
	touch "$FAKE_STATE/live.release" &&
	rc=$(bg_wait ../live) &&
	test "$rc" = 0
'

test_expect_success 'a paused run is rewound in place; its driver carries on from the checkpoint' '
	cd repo &&
	start_slow_run paused "Paused run" &&
	id=$(cat ../paused.id) &&
	"$BATON" pause "$id" >/dev/null &&
	touch "$FAKE_STATE/paused.release" &&
	wait_for_status "$id" paused &&
	wt=$(run_field "$id" worktree) &&
	test_grep "$id" "$wt/feature.txt" &&
	"$BATON" resume "$id" --from execute >../inplace.out 2>&1 &&
	test_grep "driver.*carries on" ../inplace.out &&
	rc=$(bg_wait ../paused) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	calls_of "$id" >../calls &&
	test "$(grep -c "^plan$" ../calls)" = 1 &&
	test "$(grep -c "^execute$" ../calls)" = 2 &&
	git -C "$wt" show HEAD:feature.txt >../feature &&
	test_line_count = 1 ../feature &&
	"$BATON" events "$id" --json >../ev &&
	jq -s -e "[.[] | select(.type == \"rewound\" and .data.from_status == \"paused\")] | length == 1" ../ev &&
	transition_pairs "$id" >../pairs &&
	test_grep "^paused -> executing$" ../pairs
'

test_expect_success 'adversarial: the reset follows no planted link and runs no planted hook' '
	cd repo &&
	start_slow_run evil "Evil worktree" &&
	id=$(cat ../evil.id) &&
	"$BATON" pause "$id" >/dev/null &&
	touch "$FAKE_STATE/evil.release" &&
	wait_for_status "$id" paused &&
	kill -TERM "$(cat ../evil.pid)" &&
	bg_wait ../evil >/dev/null &&
	wt=$(run_field "$id" worktree) &&
	mkdir -p ../outside ../hooks &&
	echo precious >../outside/victim &&
	# a tracked file replaced by a link out of the worktree, a link
	# to a directory outside, hooks everywhere git would look
	rm -f "$wt/feature.txt" &&
	ln -s "$TRASH_DIRECTORY/outside/victim" "$wt/feature.txt" &&
	ln -s "$TRASH_DIRECTORY/outside" "$wt/escape" &&
	for h in post-checkout post-index-change reference-transaction pre-commit; do
		printf "#!/bin/sh\ntouch %s/hook-ran\n" "$TRASH_DIRECTORY" >../hooks/$h &&
		chmod +x ../hooks/$h || return 1
	done &&
	gd=$(git -C "$wt" rev-parse --git-dir) &&
	mkdir -p "$gd/hooks" && cp ../hooks/* "$gd/hooks/" &&
	git -C "$wt" config core.hooksPath "$TRASH_DIRECTORY/hooks" &&
	git -C "$wt" config core.fsmonitor "$TRASH_DIRECTORY/hooks/post-checkout" &&
	"$BATON" resume "$id" --from execute >../evil-rw.out 2>&1 &&
	git -C "$wt" config --unset core.hooksPath &&
	git -C "$wt" config --unset core.fsmonitor &&
	test "$(run_status "$id")" = merge_ready &&
	test_path_is_missing ../hook-ran &&
	echo precious >../expect &&
	test_cmp ../expect ../outside/victim &&
	test_path_is_missing "$wt/escape" &&
	test_path_is_missing ../outside/feature.txt &&
	! test -L "$wt/feature.txt" &&
	git -C "$wt" show HEAD:feature.txt >../feature &&
	test_line_count = 1 ../feature
'

test_expect_success 'the API rewinds with {"from": STAGE}; an unknown stage is a 400' '
	cd repo &&
	id=$(cat ../id) &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	api POST "/api/v1/runs/$id/resume" "{\"from\": \"deploy\"}" >../api-bad &&
	test "$(cat api.status)" = 400 &&
	test_grep "has no stage" ../api-bad &&
	test_grep "review (reviewing)" ../api-bad &&
	api POST "/api/v1/runs/$id/resume" "{\"from\": \"verifying\"}" >../api-rw &&
	test "$(cat api.status)" = 201 &&
	jq -e --arg o "$id" ".rewound_from == \$o and .rewound_to == \"verify\" and .status == \"verifying\" and .driven == false" ../api-rw &&
	new=$(jq -r .id ../api-rw) &&
	kill -TERM "$(cat ../serve.pid)" &&
	bg_wait ../serve >/dev/null &&
	"$BATON" resume "$new" >../api-drive.out 2>&1 &&
	test "$(run_status "$new")" = merge_ready &&
	test "$(calls_of "$new")" = verify
'

test_expect_success 'a task'"'"'s failed run rewound by the API is a new run of that task, queued and driven by serve; rewound_from is the whole id' '
	make_repo tasked &&
	baton_init_with_agent tasked "runtime: {judge: false, max_attempts: 1}" &&
	cd tasked &&
	"$BATON" task add "Add the queued feature" >/dev/null &&
	FAKE_FAIL_STAGE=verify FAKE_FAIL_MODE=exit \
		"$BATON" serve --workers 1 --exit-when-idle 2>../tasked1.err &&
	"$BATON" task show 1 --json >../t0.json &&
	test_jq ".status == \"failed\"" ../t0.json &&
	old=$(jq -r .run ../t0.json) &&
	test "$(run_status "$old")" = failed &&
	serve_http "$TRASH_DIRECTORY/tserve" --workers 1 &&
	api POST "/api/v1/runs/${old%%-*}/resume" "{\"from\": \"verify\"}" >../t-rw &&
	test "$(cat api.status)" = 201 &&
	jq -e --arg o "$old" ".rewound_from == \$o and .task_id == 1 and .driven == true" ../t-rw &&
	new=$(jq -r .id ../t-rw) &&
	wait_for "\"\$BATON\" task show 1 --json | jq -e \".status == \\\"done\\\"\" >/dev/null" 60 &&
	"$BATON" task show 1 --json >../t1.json &&
	test_jq ".run == \"$new\" and (.runs | length) == 2" ../t1.json &&
	test "$(run_status "$new")" = merge_ready &&
	test "$(calls_of "$new")" = verify &&
	# a done task is final: its run rewound is a new run of it that
	# waits for baton resume, and the task stays done with its run
	api POST "/api/v1/runs/$new/resume" "{\"from\": \"verify\"}" >../t-rw2 &&
	test "$(cat api.status)" = 201 &&
	jq -e ".task_id == 1 and .driven == false" ../t-rw2 &&
	"$BATON" task show 1 --json >../t2.json &&
	test_jq ".status == \"done\" and .run == \"$new\"" ../t2.json &&
	kill -TERM "$(cat ../tserve.pid)" &&
	bg_wait ../tserve >/dev/null
'

test_done
