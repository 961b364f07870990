#!/bin/bash
test_description='the real Codex CLI against the mock (Responses API): a run to merge_ready with the edit made through its shell tool, tokens read from its stream'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents codex

export MOCK_KEY=sk-mock-codex-0123456789
feature_script script.json "hello from codex"
mock_start mock script.json --require-key "$MOCK_KEY"

test_expect_success 'setup: codex plays every role, on the mock' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  codex:
    type: codex
    command: [\"$AGENTS_BIN/codex\"]
    model: mock-model
    base_url: \"$(mock_url mock)/v1\"
    api_key_env: MOCK_KEY
    max_retries: 0
    timeout_seconds: 180
    pricing: {input: 1.25, output: 10}
roles: {default: codex}"
'

test_expect_success 'baton run reaches merge_ready with codex doing every stage' '
	cd repo &&
	test_expect_code 0 "$BATON" run "Add hello.txt with a greeting" >../run.out 2>../run.err &&
	newest_run >../run-id &&
	test_grep merge_ready ../run.out
'

test_expect_success 'the worktree diff holds the edit codex made' '
	cd repo &&
	"$BATON" diff "$(cat ../run-id)" >../diff &&
	test_grep "+hello from codex" ../diff
'

test_expect_success 'tokens come from the stream, cost from the configured pricing' '
	cd repo &&
	"$BATON" show --json "$(cat ../run-id)" >../show.json &&
	test_jq "[.calls[] | select(.provider == \"codex\" and .failure == \"none\" and .tokens_in > 0 and (.session | length) > 0)] | length == 5" ../show.json &&
	test_jq ".cost_usd > 0" ../show.json &&
	test_grep "\"wire\":\"responses\"" ../mock.log
'

test_expect_success 'in the sandbox, a user login (isolated: false) is ~/.codex, written through' '
	make_repo own &&
	baton_init_with_agent own "providers:
  codex:
    type: codex
    command: [\"$AGENTS_BIN/codex\"]
    model: mock-model
    base_url: \"$(mock_url mock)/v1\"
    api_key_env: MOCK_KEY
    isolated: false
    max_retries: 0
    timeout_seconds: 180
    env: {TMPDIR: \"$HOME/.codex/tmp\"}
roles: {default: codex}
execution: {sandbox: bwrap}" &&
	# (the test home is under /tmp, where codex will not put its helpers)
	mkdir -p "$HOME/.codex/tmp" &&
	printf "check_for_update_on_startup = false\n" >"$HOME/.codex/config.toml" &&
	cd own &&
	test_expect_code 0 "$BATON" run "Add hello.txt with a greeting" >../own.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	"$BATON" diff "$id" >../own.diff &&
	test_grep "+hello from codex" ../own.diff &&
	# its sessions went to the user home, through the sandbox
	find "$HOME/.codex/sessions" -name "*.jsonl" >../sessions &&
	test_line_count -ge 5 ../sessions
'

test_done
