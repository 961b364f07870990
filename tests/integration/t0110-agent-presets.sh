#!/bin/bash
test_description='GitHub Copilot CLI, pi, Kilo, Cline and Continue against the mock: each carries a run to merge_ready with its own edit'
. "$(dirname "$0")/../lib/test-lib.sh"
need_agents copilot pi kilo cline cn

export MOCK_KEY=sk-mock-presets-0123456789
feature_script script.json "hello from a cli"
mock_start mock script.json --require-key "$MOCK_KEY"

# type, binary, whether it reports tokens (copilot and cn do not)
while read -r type bin tokens; do
	export type bin tokens

	test_expect_success "$type: a run reaches merge_ready" '
		make_repo $type &&
		baton_init_with_agent $type "providers:
  cli:
    type: $type
    command: [\"$AGENTS_BIN/$bin\"]
    model: mock-model
    base_url: \"$(mock_url mock)/v1\"
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
		test_jq "[.calls[] | select(.type == \"$type\" and .failure == \"none\")] | length == 2" ../$type.json &&
		if test $tokens = yes
		then
			test_jq "[.calls[] | select(.tokens_in > 0)] | length == 2" ../$type.json
		else
			test_jq "[.calls[] | select(.tokens_in == 0)] | length == 2" ../$type.json
		fi
	'

	test_expect_success "$type: every model request carried the key, none failed" '
		jq -c "select(.status != 200)" "$TRASH_DIRECTORY/mock.log" >../$type.bad &&
		test_line_count = 0 ../$type.bad
	'
done <<EOF
copilot copilot no
pi pi yes
kilo kilo yes
cline cline yes
continue cn no
EOF

# A wrong key: the mock answers 401 and the call is an auth failure with
# the type's hint, whatever the CLI's exit status (pi exits 0).
while read -r type bin; do
	export type bin
	test_expect_success "$type: a refused key is an auth failure" '
		make_repo bad-$type &&
		baton_init_with_agent bad-$type "providers:
  cli:
    type: $type
    command: [\"$AGENTS_BIN/$bin\"]
    model: mock-model
    base_url: \"$(mock_url mock)/v1\"
    api_key_env: WRONG_KEY
    max_retries: 0
    timeout_seconds: 120
roles: {default: cli}
workflow: {pipeline: feature, max_review_loops: 0}" &&
		cd bad-$type &&
		# unattended: a refused key would wait for a person otherwise
		{ WRONG_KEY=sk-wrong "$BATON" run --unattended "Add hello.txt" >../bad-$type.out 2>&1 || :; } &&
		id=$(newest_run) &&
		test "$(run_status "$id")" = blocked &&
		"$BATON" show --json "$id" >../bad-$type.json &&
		test_jq "[.calls[] | select(.type == \"$type\")][0].failure == \"auth\"" ../bad-$type.json
	'
done <<EOF
copilot copilot
pi pi
continue cn
EOF

test_done
