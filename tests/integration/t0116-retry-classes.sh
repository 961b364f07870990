#!/bin/bash
test_description='retries that learn: a failed call is tried again as often as its failure class allows, and the retry prompt carries the failure delta'
. "$(dirname "$0")/../lib/test-lib.sh"

make_repo repo &&
	baton_init_with_agent repo

# prompts RUN STAGE: the prompt files of the stage's calls, in call order.
prompts() {
	ls "repo/.baton/runs/$1/calls/"*"-$2-fake-"*.prompt.md 2>/dev/null | sort
}

test_expect_success 'a call that fails once is tried again; the second prompt says what failed' '
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit FAKE_FAIL_ATTEMPTS=1 \
	FAKE_FAIL_OUTPUT="$(printf "reading the tree\nedited src/widget.c\nfetching deps from registry")" \
	FAKE_FAIL_MESSAGE="Error: ECONNRESET while fetching https://registry.example/pkg/42" \
		"$BATON" run "Flaky once" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 2 ../calls &&
	cd .. &&
	prompts "$id" execute >list &&
	test_line_count = 2 list &&
	first=$(sed -n 1p list) && second=$(sed -n 2p list) &&
	! grep "What failed before" "$first" &&
	test_grep "^## What failed before" "$second" &&
	test_grep "failure class: flaky (transient_or_flaky_failure)" "$second" &&
	test_grep "try 1 of 6" "$second" &&
	test_grep "signature: [0-9a-f]\{16\} (agent .fake. exited with <n>: error: econnreset while fetching https:/<path>)" "$second" &&
	test_grep "message: agent .fake. exited with 3: Error: ECONNRESET" "$second" &&
	test_grep "^fetching deps from registry" "$second" &&
	test_grep "^edited src/widget.c" "$second" &&
	(cd repo && "$BATON" events "$id" --json) | jq -s . >events.json &&
	test_jq "[.[] | select(.type == \"agent_retry\")] | length == 1" events.json &&
	test_jq "[.[] | select(.type == \"agent_retry\")][0].data | .class == \"flaky\" and .try == 1 and .of == 6 and .stage == \"execute\" and (.signature | length) == 16" events.json
'

test_expect_success 'a model loop is tried again once, then the run fails' '
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit FAKE_FAIL_ATTEMPTS=2 \
	FAKE_FAIL_MESSAGE="doom loop detected after 41 identical tool calls" \
		test_expect_code 3 "$BATON" run "Loops" >../out 2>&1 &&
	id=$(newest_run) &&
	"$BATON" events "$id" --json | jq -s . >../events.json &&
	test_jq "[.[] | select(.type == \"agent_retry\")] | length == 1" ../events.json &&
	test "$(run_status "$id")" = failed &&
	run_field "$id" reason >../reason &&
	test_grep "a model_loop failure, tried again 1 time" ../reason &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 2 ../calls
'

test_expect_success 'a permission prompt is never tried again: blocked after one call' '
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit \
	FAKE_FAIL_MESSAGE="Permission required: external_directory (/etc/passwd)" \
		test_expect_code 3 "$BATON" run "Asks for permission" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "a permission failure, never tried again" ../reason &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 1 ../calls
'

test_expect_success 'a run that changed nothing is never tried again either' '
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit \
	FAKE_FAIL_MESSAGE="No changes were made: the feature is already there" \
		test_expect_code 3 "$BATON" run "Nothing to do" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "a noop failure, never tried again" ../reason &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 1 ../calls
'

test_expect_success 'a failure no retry fixes is not tried again (missing script)' '
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit \
	FAKE_FAIL_MESSAGE="ERR_PNPM_NO_SCRIPT Missing script: verify" \
		test_expect_code 3 "$BATON" run "No script" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "a setup failure, which no retry fixes" ../reason &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 1 ../calls
'

test_expect_success 'an unknown failure (model) is tried 3 more times, then the run fails' '
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit \
		test_expect_code 3 "$BATON" run "Always fails" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = failed &&
	run_field "$id" reason >../reason &&
	test_grep "exited with 3: fake-agent: failing in execute with status 3 (a model failure, tried again 3 times)" ../reason &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 4 ../calls
'

test_expect_success 'execution.retry_limits and retry_cap set the limits' '
	make_repo limits &&
	baton_init_with_agent limits "execution: {retry_cap: 1, retry_limits: {model: 0}}" &&
	cd limits &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit \
		test_expect_code 3 "$BATON" run "Model: none" >../out 2>&1 &&
	id=$(newest_run) &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 1 ../calls &&
	run_field "$id" reason >../reason &&
	test_grep "a model failure, never tried again" ../reason &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit \
	FAKE_FAIL_MESSAGE="Error: DATABASE_URL is not set" \
		test_expect_code 3 "$BATON" run "Env: capped at one" >../out 2>&1 &&
	id=$(newest_run) &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 2 ../calls &&
	run_field "$id" reason >../reason &&
	test_grep "an\? env failure, tried again 1 time" ../reason
'

test_expect_success 'a bad retry limit is refused, naming the file, line and key' '
	make_repo badlimits &&
	baton_init_with_agent badlimits "execution: {retry_limits: {flakey: 3}}" &&
	cd badlimits &&
	test_must_fail "$BATON" run "never" >../out 2>&1 &&
	test_grep "config.yaml:[0-9]*:[0-9]*: .*flakey" ../out
'

test_expect_success 'the delta keeps the end of a long output, within the context budget' '
	cd repo &&
	long=$(for i in $(seq 1 400); do printf "line %03d %0200d\n" "$i" 0; done) &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit FAKE_FAIL_ATTEMPTS=1 \
	FAKE_FAIL_OUTPUT="$long" FAKE_FAIL_MESSAGE="timed out waiting for the lock" \
		"$BATON" run "Long output" >../out 2>&1 &&
	id=$(newest_run) &&
	cd .. &&
	prompts "$id" execute >list &&
	second=$(sed -n 2p list) &&
	test_grep "^line 400 " "$second" &&
	test_grep "^line 371 " "$second" &&
	! grep "^line 370 " "$second" &&
	! grep "^line 001 " "$second" &&
	test "$(wc -c <"$second")" -lt 60000
'

test_expect_success 'a secret in the failed output stays out of the next prompt' '
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit FAKE_FAIL_ATTEMPTS=1 \
	FAKE_FAIL_OUTPUT="export SERVICE_TOKEN=tok-abcdefghijklmnopqrstuvwxyz0123456789" \
	FAKE_FAIL_MESSAGE="Error: ECONNRESET (token tok-abcdefghijklmnopqrstuvwxyz0123456789)" \
	SERVICE_TOKEN=tok-abcdefghijklmnopqrstuvwxyz0123456789 \
		"$BATON" run "Leaky" >../out 2>&1 &&
	id=$(newest_run) &&
	cd .. &&
	prompts "$id" execute >list &&
	second=$(sed -n 2p list) &&
	test_grep "What failed before" "$second" &&
	test_grep "redacted:SERVICE_TOKEN" "$second" &&
	! grep "abcdefghijklmnopqrstuvwxyz0123456789" "$second"
'

test_done
