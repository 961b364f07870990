#!/bin/bash
test_description='session resume falls back to a summary: a command agent (no session) killed mid-call, and a claude session its CLI no longer knows, each start afresh with the end of the cut-off call'"'"'s transcript in the prompt'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents claude

# A command agent for the implementer: its first call says what it
# found, leaves a partial edit and works until killed; later calls keep
# their prompt and finish the stage. It keeps its prompts outside the
# worktree: no sandbox for it.
mkdir -p impl-state &&
	cat >impl <<-EOF &&
	#!/bin/sh
	n=\$(ls "$TRASH_DIRECTORY/impl-state" | grep -c '^prompt' || true)
	cp "\$BATON_PROMPT_FILE" "$TRASH_DIRECTORY/impl-state/prompt.\$n"
	if [ "\$n" = 0 ]; then
		echo "reading cli.sh"
		echo "FOUND-7Q: the greeting lives in cli.sh, line 5"
		echo partial >>partial.txt
		exec sleep 1000
	fi
	echo feature >>feature.txt
	echo "done"
	EOF
	chmod +x impl

test_expect_success 'setup: kill -9 of baton while the command agent works' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  impl: {type: command, command: [\"$TRASH_DIRECTORY/impl\"]}
roles: {default: fake, implementer: impl}
execution: {sandbox: none}" &&
	cd repo &&
	bg_start ../run "$BATON" run "Add a feature" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	echo "$id" >../id &&
	wait_for "grep -q FOUND-7Q .baton/runs/$id/calls/*-execute-impl-0.stdout 2>/dev/null" 60 &&
	wait_for "\"\$BATON\" events $id --json | grep -q agent_output.*FOUND-7Q" 30 &&
	kill -KILL "$(cat ../run.pid)" &&
	test "$(bg_wait ../run)" = 137
'

test_expect_success 'baton resume carries the run to merge_ready with a summary, not a native resume' '
	cd repo &&
	id=$(cat ../id) &&
	test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	"$BATON" events "$id" --json >../events &&
	jq -c "select(.type == \"agent_resumed\") | .data" ../events >../resumed &&
	test_line_count = 1 ../resumed &&
	test_jq ".path == \"summary\" and .provider == \"impl\" and .cut_off == true and .session == null and (.from_call | test(\"execute-impl\")) and (.how | test(\"never ended\"))" ../resumed
'

test_expect_success 'the fresh call was told what the cut-off call did, in its prompt' '
	test_path_is_file impl-state/prompt.1 &&
	test_grep "your earlier call was cut off" impl-state/prompt.1 &&
	test_grep "FOUND-7Q: the greeting lives in cli.sh, line 5" impl-state/prompt.1 &&
	test_grep "You are the implementer" impl-state/prompt.1 &&
	test_grep ! "cut off" impl-state/prompt.0
'

test_expect_success 'without a session to continue, the worktree was reset to the checkpoint' '
	cd repo &&
	id=$(cat ../id) &&
	jq -c "select(.type == \"transition\" and .from == \"interrupted\") | .data" ../events >../reentry &&
	test_jq ".worktree_kept == null" ../reentry &&
	git diff --name-only main "baton/$id" >../changed &&
	echo feature.txt >../expect &&
	test_cmp ../expect ../changed
'

# claude as the implementer, on the mock: its first call hangs (as in
# t0113); then its session files are deleted, so that --resume fails
# and the stage falls back to a fresh call with the summary.
cat >script.json <<-\EOF
{"rules": [
  {"match": "your earlier call was cut off",
   "actions": [{"write": {"path": "part2.txt", "content": "two\n"}}],
   "text": "Wrote part2 afresh."},
  {"match": "You are the implementer",
   "actions": [{"write": {"path": "part1.txt", "content": "one\n"}}],
   "text": "never sent", "hang": true}
]}
EOF
mock_start mock script.json
export MOCK_KEY=sk-mock-summary

test_expect_success 'setup: claude cut off mid-call, then its session files lost' '
	make_repo lost &&
	baton_init_with_agent lost "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  claude:
    type: claude-code
    command: [\"$AGENTS_BIN/claude\"]
    model: claude-sonnet-4-5
    base_url: \"$(mock_url mock)\"
    api_key_env: MOCK_KEY
    max_retries: 0
    timeout_seconds: 180
roles: {default: fake, implementer: claude}" &&
	cd lost &&
	bg_start ../lost.run "$BATON" run "Write the parts" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	echo "$id" >../lost.id &&
	wait_for "grep -q \"\\\"reply\\\":\\\"hang\\\"\" ../mock.log" 120 &&
	wait_for "\"\$BATON\" events $id --json | grep -q agent_session" 30 &&
	kill -KILL "$(cat ../lost.run.pid)" &&
	test "$(bg_wait ../lost.run)" = 137 &&
	ls -d .baton/runs/$id/agents/claude/projects &&
	rm -rf .baton/runs/$id/agents/claude/projects
'

test_expect_success 'the native resume fails, and the stage falls back to the summary once' '
	cd lost &&
	id=$(cat ../lost.id) &&
	test_expect_code 0 "$BATON" resume "$id" >../lost.resume 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	"$BATON" events "$id" --json >../lost.events &&
	sid=$(jq -r "select(.type == \"agent_session\") | .data.session" ../lost.events | head -n 1) &&
	jq -c "select(.type == \"agent_resumed\") | .data" ../lost.events >../lost.resumed &&
	test_line_count = 2 ../lost.resumed &&
	head -n 1 ../lost.resumed >../first &&
	tail -n 1 ../lost.resumed >../second &&
	test_jq ".path == \"native\" and .session == \"$sid\"" ../first &&
	test_jq ".path == \"summary\" and .from_call == $(jq .from_call ../first)" ../second &&
	# the refused resume is on record as a failed call
	jq -c "select(.type == \"agent_exited\" and .data.stage == \"execute\") | .data" ../lost.events >../exits &&
	test_line_count = 2 ../exits &&
	head -n 1 ../exits >../exit1 &&
	test_jq ".failure != \"none\" and (.message | test(\"No conversation found\"))" ../exit1
'

test_expect_success 'the fresh call read the summary; the kept edit and the new one landed' '
	cd lost &&
	id=$(cat ../lost.id) &&
	prompt=$(ls .baton/runs/$id/calls/*-execute-claude-*.prompt.md | tail -n 1) &&
	test_grep "Continuing its session failed" "$prompt" &&
	test_grep "\\[tool\\] Write" "$prompt" &&
	git show "baton/$id:part1.txt" >../p1 &&
	git show "baton/$id:part2.txt" >../p2 &&
	echo one >../e1 && echo two >../e2 &&
	test_cmp ../e1 ../p1 &&
	test_cmp ../e2 ../p2
'

test_done
