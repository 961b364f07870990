#!/bin/bash
test_description='the real Claude Code CLI against the mock model server: a run to merge_ready, the scripted edit in the diff, usage and cost from its stream, the key kept out of the record'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents claude

export MOCK_KEY=sk-mock-claude-0123456789
feature_script script.json "hello from claude"
mock_start mock script.json --require-key "$MOCK_KEY"

test_expect_success 'setup: claude plays every role, on the mock' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  claude:
    type: claude-code
    command: [\"$AGENTS_BIN/claude\"]
    model: claude-sonnet-4-5
    base_url: \"$(mock_url mock)\"
    api_key_env: MOCK_KEY
    max_retries: 0
    timeout_seconds: 180
roles: {default: claude}" &&
	(cd repo && "$BATON" config validate)
'

test_expect_success 'baton run reaches merge_ready with claude doing every stage' '
	cd repo &&
	test_expect_code 0 "$BATON" run "Add hello.txt with a greeting" >../run.out 2>../run.err &&
	newest_run >../run-id &&
	test_grep merge_ready ../run.out
'

test_expect_success 'the worktree diff holds the scripted edit' '
	cd repo &&
	"$BATON" diff "$(cat ../run-id)" >../diff &&
	test_grep "+hello from claude" ../diff
'

test_expect_success 'every agent call is on record as claude, with usage and cost from the stream' '
	cd repo &&
	"$BATON" show --json "$(cat ../run-id)" >../show.json &&
	test_jq "[.calls[] | select(.provider == \"claude\" and .type == \"claude-code\")] | length == 5" ../show.json &&
	test_jq "[.calls[] | select(.failure == \"none\" and .tokens_in > 0 and .cost_usd > 0 and (.session | length) > 0)] | length == 5" ../show.json &&
	test_jq ".tokens_in > 0 and .tokens_out > 0 and .cost_usd > 0" ../show.json &&
	"$BATON" show "$(cat ../run-id)" >../show.txt &&
	test_grep "^usage     [$]0[.]0*[1-9]" ../show.txt &&
	test_grep "claude-code" ../show.txt
'

test_expect_success 'the mock saw the key; nothing baton kept holds it' '
	test_grep "$MOCK_KEY" mock.log &&
	test_must_fail grep -r -l "$MOCK_KEY" repo/.baton/runs repo/.baton/baton.db
'

test_expect_success 'in the sandbox, a user login (isolated: false) is ~/.claude and ~/.claude.json, written through' '
	make_repo own &&
	baton_init_with_agent own "providers:
  claude:
    type: claude-code
    command: [\"$AGENTS_BIN/claude\"]
    model: claude-sonnet-4-5
    base_url: \"$(mock_url mock)\"
    api_key_env: MOCK_KEY
    isolated: false
    max_retries: 0
    timeout_seconds: 180
roles: {default: claude}
execution: {sandbox: bwrap}" &&
	mkdir -p "$HOME/.claude" &&
	echo "{\"mark\": \"users own\"}" >"$HOME/.claude.json" &&
	cd own &&
	test_expect_code 0 "$BATON" run "Add hello.txt with a greeting" >../own.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	# the sessions went to the user home, through the sandbox
	ls "$HOME"/.claude/projects/*/*.jsonl >../sessions &&
	test_line_count -ge 5 ../sessions &&
	test_grep "users own" "$HOME/.claude.json" &&
	test_grep "numStartups\|firstStartTime" "$HOME/.claude.json" &&
	test_path_is_missing ".baton/runs/$id/agents/claude/projects"
'

test_done
