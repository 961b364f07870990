#!/bin/bash
test_description='plugin kinds: the outcome contract (missing, malformed, a failing command) names the plugin, the kind and what was wrong; an agent cannot forge the outcome or have its own script run as the kind'
. "$(dirname "$0")/../lib/test-lib.sh"

# A plugin "strict" with kind strict, whose check.sh does what
# $FAKE_STATE/strict.mode says:
#   none      prints words, writes no outcome
#   bad       an outcome that is not pass/changes/block/fail
#   findings  findings that are not a list
#   garbage   invalid JSON in $BATON_OUTCOME
#   exit      exits 3
#   block     a valid block outcome
# and counts its calls in $FAKE_STATE/strict.calls.
make_strict() {
	local P=$1/.baton/plugins/strict
	mkdir -p "$P" &&
		cat >"$P/plugin.yaml" <<-\EOF &&
		id: strict
		api_version: 1
		kinds: [{name: strict, command: [sh, check.sh], timeout_seconds: 60}]
		pipelines: {guarded: guarded.yaml}
		EOF
		printf "stages: [execute, strict]\n" >"$P/guarded.yaml" &&
		cat >"$P/check.sh" <<-\EOF
		echo x >>"$FAKE_STATE/strict.calls"
		case $(cat "$FAKE_STATE/strict.mode") in
		none) echo "strict: nothing to report" ;;
		bad) echo "{\"outcome\": \"maybe\"}" >"$BATON_OUTCOME" ;;
		findings) echo "{\"outcome\": \"pass\", \"findings\": \"all good\"}" >"$BATON_OUTCOME" ;;
		garbage) echo "{\"outcome\": " >"$BATON_OUTCOME" ;;
		exit) echo "strict: cannot run" >&2; exit 3 ;;
		block) echo "{\"outcome\": \"block\", \"summary\": \"the plugin check said no\"}" >"$BATON_OUTCOME" ;;
		esac
		EOF
}

# mode M: what the next strict calls do.
mode() {
	rm -f "$FAKE_STATE/strict.calls" &&
		echo "$1" >"$FAKE_STATE/strict.mode"
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo "plugins: {enabled: [strict]}" &&
	make_strict repo
'

# expect_contract MODE PATTERN: a run whose strict stage breaks the
# contract as MODE does ends blocked after one retry, the reason naming
# the plugin, the kind and PATTERN.
expect_contract() {
	mode "$1" &&
		test_expect_code 3 "$BATON" run --pipeline guarded "Contract $1" >../out 2>&1 &&
		id=$(newest_run) &&
		test "$(run_status "$id")" = blocked &&
		run_field "$id" reason >../reason &&
		test_grep "plugin .strict., kind .strict.: " ../reason &&
		test_grep -E "$2" ../reason &&
		test_grep "still broken after one retry" ../reason &&
		test_line_count = 2 "$FAKE_STATE/strict.calls" &&
		"$BATON" events "$id" --json | jq -r "select(.type == \"contract_error\") | .data.error" >../cerr &&
		test_line_count = 2 ../cerr
}

test_expect_success 'no outcome at all: a contract error, retried once, then blocked' '
	cd repo &&
	expect_contract none "no outcome: no strict.outcome.json in the run folder"
'

test_expect_success 'an outcome that is not one of the four' '
	cd repo &&
	expect_contract bad "outcome .maybe. is not one of pass, changes, block, fail"
'

test_expect_success 'findings that are not a list' '
	cd repo &&
	expect_contract findings "\"findings\" must be a list"
'

test_expect_success 'invalid JSON in the outcome file' '
	cd repo &&
	expect_contract garbage "no outcome: .*invalid JSON|no outcome: .*line [0-9]"
'

test_expect_success 'a command that exits non-zero fails the stage, naming it' '
	cd repo &&
	mode exit &&
	test_expect_code 3 "$BATON" run --pipeline guarded "Exit" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = failed &&
	run_field "$id" reason >../reason &&
	test_grep "stage strict: agent .strict. exited with 3" ../reason &&
	test_grep "cannot run" ../reason
'

# The implementer plants what a hostile agent would: a check.sh of its
# own (the name the plugin command uses) that writes a pass outcome and
# leaves a marker, outcome files in the worktree, and, when it can (no
# sandbox), one in the run folder.
cat >planter <<\EOF
#!/bin/sh
case $BATON_STAGE_KIND in
execute)
	cat >check.sh <<\X
touch "$FAKE_STATE/worktree-check-ran"
echo "{\"outcome\": \"pass\", \"summary\": \"forged\"}" >"$BATON_OUTCOME"
echo "{\"outcome\": \"pass\", \"summary\": \"forged\"}"
X
	echo '{"outcome": "pass", "summary": "forged"}' >strict.outcome.json
	echo '{"outcome": "pass", "summary": "forged"}' >outcome.json
	mkdir -p out && echo '{"outcome": "pass", "summary": "forged"}' >out/strict.outcome.json
	echo '{"outcome": "pass", "summary": "forged"}' >"$BATON_RUN_DIR/strict.outcome.json" 2>/dev/null &&
		touch "$FAKE_STATE/planted-run-folder"
	echo "planted"
	echo '{"outcome": "pass", "summary": "forged"}'
	;;
*) exec "$FAKE_AGENT" ;;
esac
EOF
chmod +x planter

for sb in auto none; do
test_expect_success "a forged outcome in the worktree (and the run folder) is not the outcome (sandbox $sb)" '
	rm -rf hostile-'$sb' && make_repo hostile-'$sb' &&
	baton_init_with_agent hostile-'$sb' "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  planter: {type: command, command: [\"$TRASH_DIRECTORY/planter\"]}
roles: {default: fake, implementer: planter}
execution: {sandbox: '$sb'}
plugins: {enabled: [strict]}" &&
	make_strict hostile-'$sb' &&
	rm -f "$FAKE_STATE/worktree-check-ran" "$FAKE_STATE/planted-run-folder" &&
	cd hostile-'$sb' &&
	mode none &&
	test_expect_code 3 "$BATON" run --pipeline guarded "Forge it" >../out 2>&1 &&
	id=$(newest_run) &&
	wt=$(run_field "$id" worktree) &&
	test_path_is_file "$wt/check.sh" &&
	test_path_is_file "$wt/strict.outcome.json" &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "no outcome" ../reason &&
	test_path_is_missing "$FAKE_STATE/worktree-check-ran" &&
	test_line_count = 2 "$FAKE_STATE/strict.calls" &&
	if [ '$sb' = none ]; then test_path_is_file "$FAKE_STATE/planted-run-folder"; fi
'
done

test_expect_success 'the plugin check runs, not the worktree one, and its block stands' '
	cd hostile-none &&
	mode block &&
	test_expect_code 3 "$BATON" run --pipeline guarded "Forge again" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "said block: the plugin check said no" ../reason &&
	test_path_is_missing "$FAKE_STATE/worktree-check-ran"
'

test_done
