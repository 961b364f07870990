#!/bin/bash
test_description='lifecycle hooks: worktree_setup before the first stage, before_stage and after_stage around each, on_terminal, their environment, events and artifacts; a veto blocks with its reason; a hanging hook times out; what a hook daemonizes dies'
. "$(dirname "$0")/../lib/test-lib.sh"

# Every hook appends a line to $FAKE_STATE/hooks.log (the sandbox binds
# FAKE_STATE read-write): its point, stage and status.
log_hook() {
	echo "echo \"\$BATON_HOOK \${BATON_STAGE:--} \${BATON_STATUS:--}\" >>$FAKE_STATE/hooks.log"
}

# The config of the first repository: a hook at each point of a run.
hooks_config() {
	cat <<-EOF
	hooks:
	  worktree_setup:
	    - '$(log_hook)'
	    - "cp \"\$BATON_REPO/main.env\" .env"
	    - "env | grep ^BATON_ | sort >$FAKE_STATE/setup.env; echo set up in \$PWD"
	  before_stage: ['$(log_hook)']
	  after_stage: ['$(log_hook)']
	  on_terminal: ['$(log_hook)', "exit 9"]
	EOF
}

test_expect_success 'setup: a repository whose config has a hook at each point' '
	make_repo repo &&
	echo "SECRET_FROM_MAIN=1" >repo/main.env &&
	baton_init_with_agent repo "$(hooks_config)" &&
	(cd repo && "$BATON" config validate)
'

test_expect_success 'a run goes to merge_ready with its hooks run in order' '
	cd repo &&
	test_expect_code 0 "$BATON" run "Add a --version flag" >../run.out 2>&1 &&
	id=$(newest_run) && echo "$id" >../id &&
	test "$(run_status "$id")" = merge_ready &&
	cat >../expect <<-\EOF &&
	worktree_setup - -
	before_stage planning -
	after_stage planning -
	before_stage architecting -
	after_stage architecting -
	before_stage executing -
	after_stage executing -
	before_stage validating -
	after_stage validating -
	before_stage reviewing -
	after_stage reviewing -
	before_stage verifying -
	after_stage verifying -
	on_terminal - merge_ready
	EOF
	test_cmp ../expect "$FAKE_STATE/hooks.log"
'

test_expect_success 'setup ran in the worktree before the first agent call, with the documented environment' '
	cd repo &&
	id=$(cat ../id) &&
	wt=$(run_field "$id" worktree) &&
	test_grep "SECRET_FROM_MAIN=1" "$wt/.env" &&
	"$BATON" events "$id" --json >../events &&
	setup=$(jq -s "[.[] | select(.type == \"hook\" and .data.point == \"worktree_setup\")][0].seq" ../events) &&
	agent=$(jq -s "[.[] | select(.type == \"agent_started\")][0].seq" ../events) &&
	test "$setup" -lt "$agent" &&
	port=$(jq -r "select(.type == \"worktree\") | .data.port" ../events) &&
	test "$port" -gt 0 &&
	test_grep "^BATON_PORT=$port\$" "$FAKE_STATE/setup.env" &&
	test_grep "^BATON_WORKTREE=$wt\$" "$FAKE_STATE/setup.env" &&
	test_grep "^BATON_REPO=$PWD\$" "$FAKE_STATE/setup.env" &&
	test_grep "^BATON_RUN_ID=$id\$" "$FAKE_STATE/setup.env" &&
	test_grep "^BATON_RUN_DIR=$PWD/.baton/runs/$id\$" "$FAKE_STATE/setup.env" &&
	test_grep "^BATON_HOOK=worktree_setup\$" "$FAKE_STATE/setup.env" &&
	test_grep ! "^BATON_STAGE=" "$FAKE_STATE/setup.env"
'

test_expect_success 'each hook is an event, and its output an artifact of the run' '
	cd repo &&
	id=$(cat ../id) &&
	jq -s -e "[.[] | select(.type == \"hook\")] | length == 17" ../events &&
	jq -s -e "[.[] | select(.type == \"hook\" and .data.point == \"worktree_setup\" and .data.index == 2)][0].data |
		.exit == 0 and .passed and .artifact == \"hooks/worktree_setup-2.log\" and (.output_tail | test(\"set up in /\")) and .duration_ms >= 0" ../events &&
	test_grep "set up in" ".baton/runs/$id/hooks/worktree_setup-2.log" &&
	test_path_is_file ".baton/runs/$id/hooks/before_stage-executing-0.log" &&
	# a failing on_terminal hook is on record; the run stands
	jq -s -e "[.[] | select(.type == \"hook\" and .data.point == \"on_terminal\" and .data.index == 1)][0].data |
		.exit == 9 and (.passed | not)" ../events &&
	# the terminal transition came after on_terminal
	jq -s -e "(map(select(.type == \"hook\" and .data.point == \"on_terminal\")) | last | .seq) <
		(map(select(.type == \"transition\")) | last | .seq)" ../events &&
	"$BATON" show "$id" --json >../show &&
	sqlite3 .baton/baton.db "select artifact, decision from stage_outputs where run_id = '\''$id'\'' and artifact like '\''hooks/%'\''" >../outputs &&
	test_grep "hooks/worktree_setup-2.log|PASSED" ../outputs &&
	test_grep "hooks/on_terminal-1.log|FAILED" ../outputs
'

test_expect_success 'a failing before_stage hook blocks the run at its stage, naming the hook and why' '
	make_repo veto &&
	baton_init_with_agent veto "$(
		cat <<-EOF
		hooks:
		  before_stage:
		    - "true"
		    - "if [ \"\$BATON_STAGE\" = executing ]; then echo lint says no; echo line two; exit 3; fi"
		  after_stage: ["echo after \$BATON_STAGE >>$FAKE_STATE/veto.log"]
		EOF
	)" &&
	cd veto &&
	test_expect_code 3 "$BATON" run "Blocked by a hook" >../veto.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "hook before_stage\[1\] .*exited 3: lint says no" ../reason &&
	test_grep "line two" ../reason &&
	# the stage never started, so no agent ran and no after_stage
	"$BATON" events "$id" --json >../veto.events &&
	test "$(jq -s "[.[] | select(.type == \"agent_started\" and .data.call != null)] | map(select(.data.call | test(\"execut\"))) | length" ../veto.events)" = 0 &&
	test_grep ! "after executing" "$FAKE_STATE/veto.log" &&
	test_grep "after architecting" "$FAKE_STATE/veto.log" &&
	test_grep "exited 3" ../veto.out
'

test_expect_success 'a hanging hook times out and blocks; what it daemonized is killed' '
	make_repo hang &&
	baton_init_with_agent hang "$(
		cat <<-EOF
		execution: {sandbox: none}
		hooks:
		  timeout_seconds: 2
		  worktree_setup: ["setsid sleep 1000 >/dev/null 2>&1 & echo \$! >$FAKE_STATE/daemon.pid"]
		  before_stage: ["if [ \"\$BATON_STAGE\" = architecting ]; then echo waiting forever; sleep 1000; fi"]
		EOF
	)" &&
	cd hang &&
	start=$(date +%s) &&
	test_expect_code 3 "$BATON" run "Hang in a hook" >../hang.out 2>&1 &&
	test $(( $(date +%s) - start )) -lt 60 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "hook before_stage\[0\] .*timed out after 2 s: waiting forever" ../reason &&
	test -s "$FAKE_STATE/daemon.pid" &&
	! process_is_alive "$(cat "$FAKE_STATE/daemon.pid")"
'

test_done
