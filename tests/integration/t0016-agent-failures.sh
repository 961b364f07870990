#!/bin/bash
test_description='agent failures by class: a rate limit waits for its reset and completes, a missing program blocks with the fix named, a refused key waits for the credential, edits outside allowed_paths block, a crossed budget pauses until raised, secrets stay out of the record, the sandbox'
. "$(dirname "$0")/../lib/test-lib.sh"

export MOCK_KEY=sk-mock-fail-0123456789
feature_script script.json "hello"
mock_start limited script.json --fail 1:429:2
mock_start mock script.json --require-key "$MOCK_KEY"

# own_agent DIR URL [EXTRA_YAML]: baton's own agent plays every role.
own_agent() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "providers:
  own: {type: openai, model: mock-model, base_url: \"$2/v1\", api_key_env: MOCK_KEY, max_retries: 0}
roles: {default: own}
${3:-}"
}

test_expect_success 'a 429 with a reset time: the run waits (on record) and completes' '
	own_agent quota "$(mock_url limited)" &&
	cd quota &&
	test_expect_code 0 "$BATON" run "Add hello.txt" >../quota.out 2>&1 &&
	"$BATON" show --json "$(newest_run)" >../quota.json &&
	test_jq "[.events[] | select(.type == \"quota_wait\") | .data | select(.provider == \"own\" and .failure == \"quota\" and (.message | test(\"429\")) and .wait_ms >= 2000 and .wait_ms < 10000)] | length == 1" ../quota.json &&
	test_jq "[.calls[] | select(.failure == \"quota\")] | length == 1" ../quota.json &&
	test_jq ".status == \"merge_ready\"" ../quota.json
'

test_expect_success 'a provider that is not installed blocks the run, naming it and the fix' '
	make_repo missing &&
	baton_init_with_agent missing "providers:
  claude: {type: claude-code, command: [\"/nonexistent/bin/claude\"]}
roles: {default: claude}" &&
	cd missing &&
	test_expect_code 3 "$BATON" run "Add hello.txt" >../missing.out 2>&1 &&
	"$BATON" show --json "$(newest_run)" >../missing.json &&
	test_jq ".status == \"blocked\"" ../missing.json &&
	test_jq ".reason | test(\"provider .claude. \\\\(claude-code\\\\)\") and test(\"not installed\") and test(\"npm install\")" ../missing.json
'

test_expect_success 'a refused key: the run waits for the credential, says what to set, asks again while it is still refused' '
	own_agent auth "$(mock_url mock)" &&
	cd auth &&
	bg_start ../auth env MOCK_KEY=sk-wrong-key-0000000000 "$BATON" run "Add hello.txt" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" show --json "$id" >../auth.json &&
	test_jq "[.events[] | select(.type == \"question\")][-1].data | .kind == \"needs\" and .needs == \"credential\" and .stage == \"plan\" and (.question | test(\"provider .own. \\\\(openai\\\\)\") and test(\"OPENAI_API_KEY|api_key_env\"))" ../auth.json &&
	test_jq "[.calls[] | select(.failure == \"auth\" and .http_status == 401)] | length == 1" ../auth.json &&
	test_jq ".progress.ask.needs == \"credential\"" ../auth.json &&
	# the foreground still has the refused key: approving runs the stage
	# again, which asks again
	"$BATON" approvals approve "$id" >/dev/null &&
	wait_for "test \"\$(\"\$BATON\" events $id --json | jq -s \"[.[] | select(.type == \\\"question\\\")] | length\")\" = 2" &&
	wait_for_status "$id" waiting_for_approval &&
	kill "$(cat ../auth.pid)" &&
	bg_wait ../auth >/dev/null &&
	test "$(run_status "$id")" = waiting_for_approval
'

test_expect_success 'the credential provided, the same run goes on from the stage that asked: nothing is started over' '
	cd auth &&
	id=$(newest_run) &&
	"$BATON" approvals approve "$id" >/dev/null &&
	test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	"$BATON" show --json "$id" >../auth.json &&
	test_jq ".status == \"merge_ready\"" ../auth.json &&
	test_jq "[.calls[] | select(.failure == \"auth\")] | length == 2" ../auth.json &&
	test_jq "[.events[] | select(.type == \"transition\") | .from + \">\" + .to | select(. == \"planning>waiting_for_approval\" or . == \"waiting_for_approval>planning\")] | length == 4" ../auth.json &&
	test "$("$BATON" status --json | jq length)" = 1
'

test_expect_success 'a refused key on an unattended run ends it blocked with what to set' '
	cd auth &&
	MOCK_KEY=sk-wrong-key-0000000000 test_expect_code 3 "$BATON" run --unattended "Add bye.txt" >../unatt.out 2>&1 &&
	"$BATON" show --json "$(newest_run)" >../unatt.json &&
	test_jq ".status == \"blocked\" and .outcome == \"blocked\" and (.reason | test(\"^unattended: stage plan: provider .own. \\\\(openai\\\\)\") and test(\"OPENAI_API_KEY|api_key_env\"))" ../unatt.json &&
	test_jq "[.events[] | select(.type == \"unattended_stop\")] | length == 1" ../unatt.json
'

test_expect_success 'an unset key variable: the run waits before any request; rejected, it ends blocked naming it' '
	own_agent nokey "$(mock_url mock)" &&
	cd nokey &&
	(unset MOCK_KEY && bg_start ../nokey "$BATON" run "Add hello.txt") &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals reject "$id" >/dev/null &&
	test "$(bg_wait ../nokey)" = 3 &&
	"$BATON" show --json "$id" >../nokey.json &&
	test_jq ".status == \"blocked\" and .outcome == \"blocked\"" ../nokey.json &&
	test_jq ".reason | test(\"MOCK_KEY\")" ../nokey.json &&
	# the provider is named once
	test_jq ".reason | test(\"^stage plan: provider .own. \\\\(openai\\\\): the API key variable MOCK_KEY is not set\")" ../nokey.json &&
	test_jq "[.calls[] | select(.http_status != null)] | length == 0" ../nokey.json
'

test_expect_success 'an edit outside policies.allowed_paths blocks the run, naming the file' '
	own_agent paths "$(mock_url mock)" "policies: {allowed_paths: [src/, docs/**]}" &&
	cd paths &&
	test_expect_code 3 "$BATON" run "Add hello.txt" >../paths.out 2>&1 &&
	"$BATON" show --json "$(newest_run)" >../paths.json &&
	test_jq ".status == \"blocked\" and (.reason | test(\"outside policies.allowed_paths: hello.txt\"))" ../paths.json &&
	test_jq "[.events[] | select(.type == \"policy_violation\")] | length == 1" ../paths.json
'

test_expect_success 'a crossed budget pauses the run with the reason; raised, resume completes it' '
	own_agent budget "$(mock_url mock)" "budget: {max_tokens: 200}" &&
	cd budget &&
	test_expect_code 3 "$BATON" run "Add hello.txt" >../budget.out 2>&1 &&
	test_grep "budget.max_tokens (200) reached: 240 tokens used" ../budget.out &&
	id=$(newest_run) &&
	"$BATON" show --json "$id" >../budget.json &&
	test_jq ".status == \"paused\" and .paused_at_status == \"executing\"" ../budget.json &&
	test_jq "[.events[] | select(.type == \"transition\" and .to == \"paused\") | .data.cause] == [\"budget\"]" ../budget.json &&
	test_expect_code 1 "$BATON" resume "$id" 2>../still.err &&
	test_grep "stays paused: budget.max_tokens" ../still.err &&
	sed -i "s/max_tokens: 200/max_tokens: 100000/" .baton/config.yaml &&
	test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	"$BATON" show --json "$id" >../budget2.json &&
	test_jq ".status == \"merge_ready\"" ../budget2.json
'

# A pipeline whose fix stage may spend 100 tokens (each mock call spends
# 120); the checks pass only once the test sets CAPPED_OK=1.
capped_yaml='validate: {commands: ["test \"$CAPPED_OK\" = 1"]}
pipelines:
  capped:
    stages:
      - {name: plan, kind: plan}
      - {name: execute, kind: execute}
      - {name: validate, kind: validate, on_fail: fix}
      - {name: review, kind: review, on_changes: fix}
      - {name: verify, kind: verify}
      - {name: fix, kind: fix, side: true, next: validate, budget: {max_tokens: 100}}'

test_expect_success 'a stage budget: the fix stage pauses the run once its calls spent it; raised, resume completes it' '
	own_agent capped "$(mock_url mock)" "$capped_yaml" &&
	cd capped &&
	"$BATON" pipeline show capped >../capped.show &&
	test_grep "budget 100 tokens" ../capped.show &&
	test_expect_code 3 "$BATON" run --pipeline capped "Add hello.txt" >../capped.out 2>&1 &&
	id=$(newest_run) &&
	"$BATON" show --json "$id" >../capped.json &&
	test_jq ".status == \"paused\" and .paused_at_status == \"fixing\"" ../capped.json &&
	test_jq "[.events[] | select(.type == \"transition\" and .to == \"paused\") | .data.cause] == [\"budget\"]" ../capped.json &&
	test_jq ".reason == \"pipeline capped, stage fix: its budget.max_tokens (100) is spent: 120 tokens by its calls\"" ../capped.json &&
	test_jq "[.calls[] | select(.call | test(\"-fix-\"))] | length == 1" ../capped.json &&
	test_expect_code 1 "$BATON" resume "$id" 2>../capped-still.err &&
	test_grep "stays paused: pipeline capped, stage fix: its budget.max_tokens" ../capped-still.err &&
	sed -i "s/max_tokens: 100}/max_tokens: 100000}/" .baton/config.yaml &&
	CAPPED_OK=1 test_expect_code 0 "$BATON" resume "$id" >../capped-resume.out 2>&1 &&
	test_grep "budget changed" ../capped-resume.out &&
	"$BATON" show --json "$id" >../capped2.json &&
	test_jq ".status == \"merge_ready\" and .outcome == \"completed\"" ../capped2.json
'

test_expect_success 'secrets in the environment are redacted from agent logs and events' '
	make_repo secret &&
	cat >leaky <<-\EOF &&
	#!/bin/sh
	echo "my key is $MOCK_KEY" >&2
	case "$BATON_STAGE_KIND" in
	review) echo "DECISION: APPROVED $MOCK_KEY" ;;
	verify) echo "VERIFICATION: PASSED" ;;
	*) echo "done with $MOCK_KEY" ;;
	esac
	EOF
	chmod +x leaky &&
	baton_init_with_agent secret "providers:
  leaky: {type: command, command: [\"$PWD/leaky\"]}
roles: {default: leaky}" &&
	cd secret &&
	test_expect_code 0 "$BATON" run "Add hello.txt" >../secret.out 2>&1 &&
	test_must_fail grep -r -l "$MOCK_KEY" .baton/runs .baton/baton.db &&
	grep -r -l "\[redacted:MOCK_KEY\]" .baton/runs >../hits &&
	test_grep "calls/.*stderr" ../hits
'

if bwrap --ro-bind / / --unshare-net -- true 2>/dev/null; then
	test_expect_success 'execution.sandbox bwrap: the agent cannot write outside its worktree, checks have no network' '
		cat >sandbox.json <<-EOF &&
		{"rules": [
		  {"match": "You are the implementer",
		   "actions": [{"call": {"name": "run", "args": {"argv": ["sh", "-c", "touch $TRASH_DIRECTORY/escaped; echo hi > inside.txt"]}}}],
		   "text": "tried"},
		  {"match": "You are the reviewer", "text": "DECISION: APPROVED"},
		  {"match": "You are the verifier", "text": "VERIFICATION: PASSED"},
		  {"text": "# ok"}
		]}
		EOF
		"$MOCKLLM" --port-file sb.port --script sandbox.json --log sb.log &
		wait_for "test -s sb.port" 10 &&
		own_agent sandbox "http://127.0.0.1:$(cat sb.port)" "execution: {sandbox: bwrap}
validate: {commands: [\"make test\", \"! curl -s -m 2 http://127.0.0.1:$(cat sb.port)/v1/models\"]}" &&
		cd sandbox &&
		test_expect_code 0 "$BATON" run "Add inside.txt" >../sandbox.out 2>&1 &&
		test_path_is_missing ../escaped &&
		"$BATON" diff "$(newest_run)" >../sandbox.diff &&
		test_grep "+hi" ../sandbox.diff
	'
else
	say "# skipped the sandbox test: bwrap cannot run here"
fi

test_done
