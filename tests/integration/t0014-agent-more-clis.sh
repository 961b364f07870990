#!/bin/bash
test_description='Gemini CLI, Qwen Code and opencode against the mock: each carries a run to merge_ready with its own edit'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents gemini qwen opencode

export MOCK_KEY=sk-mock-more-0123456789
feature_script script.json "hello from a cli"
mock_start mock script.json --require-key "$MOCK_KEY"

# type, binary, base URL suffix, model
while read -r type bin suffix model; do
	export type bin suffix model

	test_expect_success "$type: a run reaches merge_ready" '
		make_repo $type &&
		baton_init_with_agent $type "providers:
  cli:
    type: $type
    command: [\"$AGENTS_BIN/$bin\"]
    model: $model
    base_url: \"$(mock_url mock)${suffix#-}\"
    api_key_env: MOCK_KEY
    max_retries: 0
    timeout_seconds: 180
roles: {default: cli}
$EDIT_REVIEW" &&
		cd $type &&
		test_expect_code 0 "$BATON" run "Add hello.txt" >../$type.out 2>../$type.err &&
		test_grep merge_ready ../$type.out
	'

	test_expect_success "$type: the edit is in the diff, the calls on record" '
		cd $type &&
		id=$(newest_run) &&
		"$BATON" diff "$id" >../$type.diff &&
		test_grep "+hello from a cli" ../$type.diff &&
		"$BATON" show --json "$id" >../$type.json &&
		test_jq "[.calls[] | select(.type == \"$type\" and .failure == \"none\" and .tokens_in > 0)] | length == 2" ../$type.json
	'
done <<EOF
gemini gemini - gemini-2.5-flash
qwen qwen /v1 mock-model
opencode opencode /v1 mock-model
EOF

test_expect_success 'in the sandbox, a user gemini login (isolated: false) is ~/.gemini, written through' '
	make_repo own &&
	baton_init_with_agent own "providers:
  cli:
    type: gemini
    command: [\"$AGENTS_BIN/gemini\"]
    model: gemini-2.5-flash
    base_url: \"$(mock_url mock)\"
    api_key_env: MOCK_KEY
    isolated: false
    max_retries: 0
    timeout_seconds: 180
roles: {default: cli}
execution: {sandbox: bwrap}
$EDIT_REVIEW" &&
	mkdir -p "$HOME/.gemini" &&
	cat >"$HOME/.gemini/settings.json" <<-\EOF &&
	{"security": {"auth": {"selectedType": "gemini-api-key"},
	              "folderTrust": {"enabled": false}},
	 "privacy": {"usageStatisticsEnabled": false},
	 "general": {"disableAutoUpdate": true}}
	EOF
	cd own &&
	test_expect_code 0 "$BATON" run "Add hello.txt" >../own.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	"$BATON" diff "$id" >../own.diff &&
	test_grep "+hello from a cli" ../own.diff &&
	# what it keeps went to the user home, through the sandbox
	find "$HOME/.gemini" -newer "$HOME/.gemini/settings.json" -type f >../kept &&
	test_line_count -ge 1 ../kept
'

test_done
