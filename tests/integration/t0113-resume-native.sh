#!/bin/bash
test_description='native session resume: kill -9 of baton while the mock holds the implementer'"'"'s answer, then baton resume continues the same conversation (claude --resume, codex exec resume, gemini and qwen --resume, opencode run --session) with the edits it had made kept; a fix round continues the implementer'"'"'s session'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents claude codex gemini qwen opencode

# The implementer writes part1.txt, then the mock holds its next answer
# (hang) until baton is killed. The resumed call carries the earlier
# conversation: its first request has the first call's tool result and
# the original prompt beside baton's note, so rule 0 matches with k=1
# and the second action (part2.txt) follows.
cat >script.json <<-\EOF
{"rules": [
  {"match": "continues your earlier session of stage execute",
   "actions": [{"write": {"path": "part1.txt", "content": "one\n"}},
               {"write": {"path": "part2.txt", "content": "two\n"}}],
   "text": "Wrote both parts."},
  {"match": "You are the planner",
   "text": "# Plan\n\n1. Write part1.txt and part2.txt.\n"},
  {"match": "You are the architect",
   "text": "# Design\n\nTwo new files at the top.\n"},
  {"match": "You are the implementer",
   "actions": [{"write": {"path": "part1.txt", "content": "one\n"}}],
   "text": "never sent", "hang": true},
  {"match": "You are the reviewer",
   "text": "Both parts are there.\nDECISION: APPROVED"},
  {"match": "You are the verifier",
   "text": "part1.txt and part2.txt are there.\nVERIFICATION: PASSED"}
]}
EOF
mock_start mock script.json

# provider_yaml NAME TYPE BIN SUFFIX MODEL: the implementer on the mock,
# the fake agent elsewhere.
provider_yaml() {
	cat <<-EOF
	providers:
	  fake: {type: command, command: ["$FAKE_AGENT"]}
	  $1:
	    type: $2
	    command: ["$AGENTS_BIN/$3"]
	    model: $5
	    base_url: "$(mock_url mock)${4#-}"
	    api_key_env: MOCK_KEY
	    max_retries: 0
	    timeout_seconds: 180
	roles: {default: fake, implementer: $1}
	EOF
}
export MOCK_KEY=sk-mock-resume

# agent_saved AGENT RUN: waits until the agent has saved the turn the
# mock holds the answer to. Claude Code writes its transcript a moment
# after the request goes out; a kill before that loses the tool result
# from the session it resumes (the edit stays in the worktree), so the
# resumed call would not show it.
agent_saved() {
	case $1 in
	claude)
		wait_for "grep -qs '\"tool_result\"' \
			.baton/runs/$2/agents/claude/projects/*/*.jsonl" 30 ;;
	esac
}

# crash_in_hang REPO: starts a run in the background, waits until the
# implementer's session is on record and the mock holds its answer,
# and kill -9s baton. Leaves the run id in REPO.id.
crash_in_hang() {
	local repo=$1 id n
	n=$(grep -c '"reply":"hang"' "$TRASH_DIRECTORY/mock.log" 2>/dev/null || true)
	# where this run's requests start in the mock's log
	cat "$TRASH_DIRECTORY/mock.log" 2>/dev/null | wc -l >"$TRASH_DIRECTORY/$repo.logstart"
	cd "$TRASH_DIRECTORY/$repo" &&
		bg_start "$TRASH_DIRECTORY/$repo.run" "$BATON" run "Write the two parts" &&
		wait_for 'test -n "$(newest_run)"' &&
		id=$(newest_run) &&
		echo "$id" >"$TRASH_DIRECTORY/$repo.id" &&
		wait_for "test \$(grep -c '\"reply\":\"hang\"' '$TRASH_DIRECTORY/mock.log') -gt ${n:-0}" 120 &&
		wait_for "\"\$BATON\" events $id --json | grep -q '\"type\":\"agent_session\"'" 30 &&
		agent_saved "$repo" "$id" &&
		kill -KILL "$(cat "$TRASH_DIRECTORY/$repo.run.pid")" &&
		rc=$(bg_wait "$TRASH_DIRECTORY/$repo.run") &&
		test "$rc" = 137
}

# provider, type, program, base URL suffix, model, the wire it speaks
while read -r agent type bin suffix model wire; do
	export agent type bin suffix model wire

test_expect_success "$agent: kill -9 of baton while the mock holds the implementer's answer" '
	make_repo $agent &&
	baton_init_with_agent $agent "$(provider_yaml $agent $type $bin $suffix $model)" &&
	crash_in_hang $agent &&
	id=$(cat ../$agent.id) &&
	test "$(run_status "$id")" = executing &&
	wt=$(run_field "$id" worktree) &&
	test_path_is_file "$wt/part1.txt"
'

test_expect_success "$agent: the session the agent named mid-call is on record" '
	cd $agent &&
	id=$(cat ../$agent.id) &&
	"$BATON" events "$id" --json >../$agent.events &&
	jq -r "select(.type == \"agent_session\") | .data" ../$agent.events >../$agent.session &&
	test_jq ".stage == \"execute\" and .provider == \"$agent\" and (.session | length) > 8" ../$agent.session &&
	test_must_fail jq -e "select(.type == \"agent_exited\" and .data.stage == \"execute\")" ../$agent.events
'

test_expect_success "$agent: baton resume continues the session natively to merge_ready" '
	cd $agent &&
	id=$(cat ../$agent.id) &&
	test_expect_code 0 "$BATON" resume "$id" >../$agent.resume 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	"$BATON" events "$id" --json >../$agent.events &&
	sid=$(jq -r .session ../$agent.session) &&
	jq -c "select(.type == \"agent_resumed\") | .data" ../$agent.events >../$agent.resumed &&
	test_line_count = 1 ../$agent.resumed &&
	test_jq ".path == \"native\" and .session == \"$sid\" and .provider == \"$agent\" and .cut_off == true" ../$agent.resumed &&
	# the re-entry kept the worktree for the session
	jq -c "select(.type == \"transition\" and .from == \"interrupted\") | .data" ../$agent.events >../$agent.reentry &&
	test_jq ".worktree_kept == true and .session == \"$sid\"" ../$agent.reentry
'

test_expect_success "$agent: the mock saw the earlier conversation in the resumed call" '
	# the first request after the hang: the original prompt (rule 3)
	# and the note (rule 0) in its user text, the first tool result in it
	tail -n +$(($(cat $agent.logstart) + 1)) mock.log |
		jq -c "select(.wire == \"$wire\" and .rule == 0)" | head -n 1 >$agent.resumed-req &&
	test_line_count = 1 $agent.resumed-req &&
	test_jq "(.seen | index(0)) != null and (.seen | index(3)) != null and .tool_results >= 1" $agent.resumed-req
'

test_expect_success "$agent: the edit of the cut-off call was kept, not reset; both parts landed" '
	cd $agent &&
	id=$(cat ../$agent.id) &&
	git show "baton/$id:part1.txt" >../$agent.p1 &&
	echo one >../expect1 &&
	test_cmp ../expect1 ../$agent.p1 &&
	# gemini sends the interrupted turn'"'"'s function response twice
	# when it resumes, so the mock counts two results and answers with
	# the text at once: no part2.txt from it
	if test $agent != gemini; then
		git show "baton/$id:part2.txt" >../$agent.p2 &&
		echo two >../expect2 &&
		test_cmp ../expect2 ../$agent.p2
	fi
'

done <<EOF
claude claude-code claude - claude-sonnet-4-5 anthropic
codex codex codex /v1 mock-model responses
gemini gemini gemini - gemini-2.5-flash gemini
qwen qwen qwen /v1 mock-model chat
opencode opencode opencode /v1 mock-model chat
EOF

# A fix round of the same agent: claude implements, the review (the fake
# agent) asks for changes once, and claude, the fixer too, fixes in the
# session it implemented in.
cat >fix-script.json <<-\EOF
{"rules": [
  {"match": "continues your earlier session of stage execute",
   "actions": [{"write": {"path": "part1.txt", "content": "one\n"}},
               {"write": {"path": "fix.txt", "content": "fixed\n"}}],
   "text": "Fixed what the review asked."},
  {"match": "You are the implementer",
   "actions": [{"write": {"path": "part1.txt", "content": "one\n"}}],
   "text": "Wrote part1."}
]}
EOF
mock_start fixmock fix-script.json

test_expect_success 'a fix round continues the implementer'"'"'s session natively' '
	make_repo fixround &&
	baton_init_with_agent fixround "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  claude:
    type: claude-code
    command: [\"$AGENTS_BIN/claude\"]
    model: claude-sonnet-4-5
    base_url: \"$(mock_url fixmock)\"
    api_key_env: MOCK_KEY
    max_retries: 0
    timeout_seconds: 180
roles: {default: fake, implementer: claude, fixer: claude}" &&
	cd fixround &&
	FAKE_REVIEW=CHANGES_REQUESTED,APPROVED \
		test_expect_code 0 "$BATON" run "Write part1" >../fixround.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	"$BATON" events "$id" --json >../fixround.events &&
	sid=$(jq -r "select(.type == \"agent_exited\" and .data.stage == \"execute\") | .data.session" ../fixround.events) &&
	test -n "$sid" &&
	jq -c "select(.type == \"agent_resumed\") | .data" ../fixround.events >../fixround.resumed &&
	test_line_count = 1 ../fixround.resumed &&
	test_jq ".stage == \"fix\" and .path == \"native\" and .session == \"$sid\" and .cut_off == false and (.from_call | test(\"execute-claude\"))" ../fixround.resumed &&
	jq -c "select(.rule == 0)" ../fixmock.log | head -n 1 >../fixround.req &&
	test_jq "(.seen | index(1)) != null and .tool_results >= 1" ../fixround.req &&
	git show "baton/$id:fix.txt" >../fix.txt &&
	echo fixed >../expect-fix &&
	test_cmp ../expect-fix ../fix.txt
'

test_done
