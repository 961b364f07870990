#!/bin/bash
test_description='the sandbox holds against a hostile agent (issue 17)'
. "$(dirname "$0")/../lib/test-lib.sh"

# Every attack of tests/lib/hostile-agent, one mode per repository, under
# execution.sandbox: bwrap. Without a working bwrap there is nothing to
# test.
if ! bwrap --die-with-parent --unshare-pid --ro-bind / / --dev /dev \
	--proc /proc --tmpfs /tmp --unshare-net -- true 2>/dev/null; then
	echo "skipped: bwrap cannot make a sandbox here"
	echo "0 passed, 0 failed"
	exit 0
fi

HOSTILE=$TEST_DIRECTORY/lib/hostile-agent

# hostile_repo NAME MODE [EXTRA_YAML]: a repository whose one provider is
# the hostile agent in MODE, in the sandbox
hostile_repo() {
	make_repo "$1" &&
		baton_init_with_agent "$1" "providers:
  bad: {type: command, command: [\"$HOSTILE\"], env: {HOSTILE_MODE: $2}}
roles: {default: bad}
execution: {sandbox: bwrap}
${3:-}"
}

test_expect_success 'a command provider runs in the sandbox (its home is made)' '
	hostile_repo d none &&
	cd d &&
	"$BATON" run "Harmless task" >../d.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	"$BATON" events "$id" --json | jq -s . >../d.events &&
	test_jq "map(select(.type == \"sandbox\")) | .[0].data.on == true" ../d.events &&
	test_path_is_dir ".baton/runs/$id/agents/bad" &&
	# the artifacts came from the output folder into the run folder
	test_grep "^# Plan" ".baton/runs/$id/plan.md" &&
	ls .baton/runs/$id/out >../d.calls &&
	test_grep "plan-bad" ../d.calls
'

test_expect_success 'the agent cannot read the token nor approve its own gate' '
	hostile_repo a token "policies: {require_approval_at_stages: [executing]}" &&
	cd a &&
	serve_http serve &&
	bg_start "$TRASH_DIRECTORY/a-run" "$BATON" run "Gated task" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	# a daemon of the planner would post its approval every 0.2 s
	sleep 3 &&
	test "$(run_status "$id")" = waiting_for_approval &&
	test_grep "^token: unreadable" "$FAKE_STATE/hostile.token" &&
	test_grep "^http.url: unreadable" "$FAKE_STATE/hostile.token" &&
	! grep -q "^2" "$FAKE_STATE/hostile.curl" 2>/dev/null &&
	transitions "$id" >../a.transitions &&
	! grep -q "^executing$" ../a.transitions &&
	"$BATON" abort "$id" >/dev/null
'

test_expect_success 'nothing the agent starts outlives its call' '
	hostile_repo b daemon "validate: {commands: []}" &&
	cd b &&
	HOSTILE_MARK=hostile-daemon-$$ "$BATON" run "Daemon task" >../b.out 2>&1 &&
	id=$(newest_run) &&
	wt=$(run_field "$id" worktree) &&
	test_path_is_file "$wt/daemon.pid" &&
	# not in /proc (the bracket keeps grep from finding itself) ...
	! grep -lz "hostile-daemo[n]-$$" /proc/[0-9]*/cmdline 2>/dev/null &&
	# ... and its log no longer grows
	n=$(wc -l <"$wt/daemon.log") &&
	sleep 1 &&
	test "$(wc -l <"$wt/daemon.log")" = "$n"
'

test_expect_success 'the agent cannot write the run folder, .baton/, the checkout or the home' '
	hostile_repo c escape &&
	cd c &&
	cp .baton/config.yaml ../c.config &&
	FAKE_PLAN_STDOUT=1 "$BATON" run "Escape task" >../c.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	# the run folder is read-only; the rest are empty tmpfs folders in
	# the sandbox, so writes there go nowhere
	for what in run-folder-new run-folder-events run-folder-link; do
		test_grep "^$what: refused" "$FAKE_STATE/hostile.escape" || return 1
	done &&
	test_path_is_missing ".baton/runs/$id/hostile" &&
	test_path_is_missing .baton/hostile &&
	test_path_is_missing hostile &&
	test_path_is_missing "$HOME/hostile" &&
	test_cmp ../c.config .baton/config.yaml &&
	! grep -q pwned ".baton/runs/$id/events.jsonl" &&
	test_path_is_file ".baton/runs/$id/validation.json" &&
	! test -L ".baton/runs/$id/validation.json" &&
	# the link planted as plan.md was not followed: the answer is the plan
	! grep -q "^root:" ".baton/runs/$id/plan.md" &&
	test_grep "^# Plan" ".baton/runs/$id/plan.md" &&
	"$BATON" events "$id" --json | jq -s . >../c.events &&
	test_jq "any(.[]; .type == \"contract_warning\" and .data.file == \"plan.md\")" ../c.events
'

test_expect_success 'an abort ends a hanging agent in the sandbox and all it started' '
	hostile_repo e none &&
	cd e &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=hang-ignore-term \
		bg_start "$TRASH_DIRECTORY/e-run" "$BATON" run "Hang task" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for "test -s \"$FAKE_STATE/$id.grandchild.pid\"" &&
	trash_procs "sleep 1000" >../e.before &&
	test_line_count -ge 1 ../e.before &&
	"$BATON" abort "$id" >/dev/null &&
	wait_for_status "$id" aborted 30 &&
	wait_for "test -z \"\$(trash_procs \"sleep 1000\")\"" 15
'

test_done
