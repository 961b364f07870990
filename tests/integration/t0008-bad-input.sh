#!/bin/bash
test_description='bad input: config, pipeline, agents that misbehave, no repository'
. "$(dirname "$0")/../lib/test-lib.sh"

test_expect_success 'setup: a repository with one finished run' '
	make_repo repo &&
	baton_init_with_agent repo &&
	cp repo/.baton/config.yaml good-config.yaml &&
	(cd repo && "$BATON" run "A good run" >/dev/null 2>&1) &&
	(cd repo && newest_run) >good-id &&
	(cd repo && run_field "$(cat ../good-id)" version) >good-version
'

# check_intact: the repository's store still holds the good run, unchanged,
# and SQLite finds nothing wrong with it.
check_intact() {
	(
		cd "$TRASH_DIRECTORY/repo" &&
			cp "$TRASH_DIRECTORY/good-config.yaml" .baton/config.yaml &&
			test "$(run_status "$(cat ../good-id)")" = merge_ready &&
			test "$(run_field "$(cat ../good-id)" version)" = "$(cat ../good-version)" &&
			if command -v sqlite3 >/dev/null; then
				test "$(sqlite3 .baton/baton.db "PRAGMA integrity_check")" = ok
			fi
	)
}

test_expect_success 'malformed config.yaml (unclosed flow mapping): exit 1, file:line:column' '
	cd repo &&
	cat >.baton/config.yaml <<-EOF &&
	providers:
	  fake: {type: command, command: ["$FAKE_AGENT"]
	roles: {default: fake}
	EOF
	for cmd in "run x" "config validate" "config show"; do
		test_expect_code 1 "$BATON" $cmd >../out 2>../err || exit 1
		test_grep "^baton: \.baton/config\.yaml:[0-9][0-9]*:[0-9][0-9]*: " ../err || exit 1
		test_grep "flow mapping" ../err || exit 1
	done &&
	# the commands on the runs there are warn and go on (cli.md)
	for cmd in status "show $(cat ../good-id)"; do
		"$BATON" $cmd >../out 2>../warn || exit 1
		test_grep "^baton: warning: \.baton/config\.yaml:[0-9][0-9]*:[0-9][0-9]*: .*flow mapping.*going on without the config" ../warn || exit 1
	done &&
	# the line is that of the mapping (line 2) or where the parser noticed
	# it was never closed (line 3), and nothing else
	sed -n "s/^baton: \.baton\/config\.yaml:\([0-9]*\):.*/\1/p" ../err >../line &&
	grep -qx "[23]" ../line &&
	check_intact &&
	"$BATON" status --json >../status.json &&
	test_jq "length == 1" ../status.json
'

test_expect_success 'an unknown key names its key path, file, line and column' '
	cd repo &&
	cp ../good-config.yaml .baton/config.yaml &&
	printf "workflow:\n  pipeline: feature\n  max_revew_loops: 3\n" >>.baton/config.yaml &&
	n=$(grep -n max_revew_loops .baton/config.yaml | cut -d: -f1) &&
	test_expect_code 1 "$BATON" run "x" >../out 2>../err &&
	test_grep "\.baton/config\.yaml:$n:3: .*workflow\.max_revew_loops" ../err &&
	test_grep "max_review_loops" ../err &&
	test_expect_code 1 "$BATON" config validate 2>../err2 &&
	test_cmp ../err ../err2 &&
	check_intact &&
	"$BATON" status --json >../status.json &&
	test_jq "length == 1" ../status.json
'

test_expect_success 'a value of the wrong type names its key and place' '
	cd repo &&
	cp ../good-config.yaml .baton/config.yaml &&
	printf "workflow: {max_review_loops: many}\n" >>.baton/config.yaml &&
	n=$(grep -n max_review_loops .baton/config.yaml | cut -d: -f1) &&
	test_expect_code 1 "$BATON" run x 2>../err &&
	test_grep "\.baton/config\.yaml:$n:[0-9]*: .*workflow\.max_review_loops" ../err &&
	check_intact
'

test_expect_success 'baton run --pipeline nope: unknown pipeline, exit 1, no run created' '
	cd repo &&
	test_expect_code 1 "$BATON" run --pipeline nope "x" >../out 2>../err &&
	test_grep "unknown pipeline .nope." ../err &&
	test_grep "feature" ../err &&
	"$BATON" status --json >../status.json &&
	test_jq "length == 1" ../status.json &&
	test_path_is_missing .baton/runs/r2-x &&
	check_intact
'

test_expect_success 'an agent printing 100 MB: the run completes, memory stays bounded' '
	test -x /usr/bin/time || { echo "needs /usr/bin/time (Debian package time)"; exit 1; }
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=flood FAKE_FLOOD_MB=100 \
		/usr/bin/time -v -o ../time.out "$BATON" run "Flood" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	kb=$(sed -n "s/.*Maximum resident set size (kbytes): *//p" ../time.out) &&
	echo "peak RSS of baton: $kb KiB" &&
	test -n "$kb" &&
	test "$kb" -lt $((100 * 1024))
'

test_expect_success 'the flood is kept in full on disk, and only a tail in the artifact' '
	cd repo &&
	id=$(newest_run) &&
	out=$(ls .baton/runs/$id/calls/*-execute-*-0.stdout) &&
	test "$(wc -c <"$out")" -ge $((100 * 1024 * 1024)) &&
	test "$(wc -c <.baton/runs/$id/execution.log)" -lt $((1024 * 1024)) &&
	test_grep "flooded 100 MB" .baton/runs/$id/execution.log &&
	"$BATON" events "$id" --json >../events &&
	jq -r "select(.type == \"agent_exited\" and (.data.call | test(\"execute\"))) | .data.output_bytes" ../events >../bytes &&
	test "$(cat ../bytes)" -ge $((100 * 1024 * 1024))
'

test_expect_success 'invalid review.json: one retry with the error, then blocked (exit 3)' '
	cd repo &&
	FAKE_REVIEW_MODE=invalid test_expect_code 3 "$BATON" run "Invalid review" >../out 2>&1 &&
	id=$(newest_run) && echo "$id" >../invalid-id &&
	test "$(run_status "$id")" = blocked &&
	fake_calls "$id" review >../calls &&
	printf "%s\n" "review 0" "review 1" >../expect &&
	test_cmp ../expect ../calls &&
	test_grep "^BATON_ATTEMPT=0$" "$FAKE_STATE/$id.review.1.env" &&
	test_grep "^BATON_ATTEMPT=1$" "$FAKE_STATE/$id.review.2.env" &&
	test_grep "review.json is not valid JSON" "$FAKE_STATE/$id.review.2.prompt" &&
	test_grep ! "review.json is not valid JSON" "$FAKE_STATE/$id.review.1.prompt" &&
	run_field "$id" reason >../reason &&
	test_grep "review.json is not valid JSON: line 1, column [0-9]*" ../reason &&
	test_grep "blocked" ../out
'

test_expect_success 'the contract errors are on record as events' '
	cd repo &&
	id=$(cat ../invalid-id) &&
	"$BATON" events "$id" --json >../events &&
	jq -r "select(.type == \"contract_error\") | .data.retry" ../events >../retries &&
	printf "%s\n" true false >../expect &&
	test_cmp ../expect ../retries &&
	transitions "$id" | tail -n 1 >../last &&
	echo blocked >../expect &&
	test_cmp ../expect ../last
'

test_expect_success 'invalid review.json once: the retry recovers to merge_ready' '
	cd repo &&
	FAKE_REVIEW_MODE=invalid-once test_expect_code 0 "$BATON" run "Invalid once" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	fake_calls "$id" review >../calls &&
	printf "%s\n" "review 0" "review 1" >../expect &&
	test_cmp ../expect ../calls &&
	test_jq ".decision == \"APPROVED\"" ".baton/runs/$id/review.json"
'

test_expect_success 'a review.json with a decision outside the contract is refused' '
	cd repo &&
	FAKE_REVIEW=LGTM test_expect_code 3 "$BATON" run "Bad decision" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "decision" ../reason &&
	test_grep "LGTM" ../reason
'

test_expect_success 'DECISION: and VERIFICATION: lines work without json files' '
	cd repo &&
	FAKE_REVIEW_MODE=line FAKE_VERIFY_MODE=line FAKE_REVIEW=CHANGES_REQUESTED,APPROVED \
		test_expect_code 0 "$BATON" run "Line verdicts" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" review_loops)" = 1 &&
	test_path_is_missing ".baton/runs/$id/review.json" &&
	test_path_is_file ".baton/runs/$id/review.md" &&
	"$BATON" show "$id" --json >../show.json &&
	test_jq "[.artifacts[] | select(.artifact == \"review.md\") | .decision] == [\"CHANGES_REQUESTED\", \"APPROVED\"]" ../show.json &&
	test_jq "[.artifacts[] | select(.artifact == \"verification.md\") | .decision] == [\"PASSED\"]" ../show.json
'

test_expect_success 'a VERIFICATION: FAILED line ends the run blocked' '
	cd repo &&
	FAKE_VERIFY_MODE=line FAKE_VERIFY=FAILED \
		test_expect_code 3 "$BATON" run "Verifier fails it" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "FAILED" ../reason
'

test_expect_success 'an agent printing garbage and no verdict: blocked after a retry' '
	cd repo &&
	FAKE_FAIL_STAGE=review FAKE_FAIL_MODE=garbage \
		test_expect_code 3 "$BATON" run "Garbage review" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	fake_calls "$id" review >../calls &&
	test_line_count = 2 ../calls &&
	run_field "$id" reason >../reason &&
	test_grep "review.json" ../reason &&
	test_grep "DECISION" ../reason &&
	# the garbage is not valid UTF-8, and the JSON outputs stay valid
	"$BATON" show "$id" --json | jq . >/dev/null &&
	"$BATON" events "$id" --json | jq . >/dev/null
'

# A crash with no known cause is a "model" failure: tried again three
# times (execution.retry_limits, t0116), then the run fails.
test_expect_success 'an agent that crashes: failed, exit 3, the reason names the signal' '
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=crash \
		test_expect_code 3 "$BATON" run "Crashing agent" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = failed &&
	run_field "$id" reason >../reason &&
	test_grep "signal 11" ../reason &&
	test_grep "execute" ../reason &&
	test_grep "a model failure, tried again 3 times" ../reason &&
	test_grep "failed" ../out &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 4 ../calls
'

test_expect_success 'an agent that exits 3: failed, exit 3, its stderr in the reason' '
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit FAKE_EXIT_CODE=3 \
		test_expect_code 3 "$BATON" run "Failing agent" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = failed &&
	run_field "$id" reason >../reason &&
	test_grep "exited with 3" ../reason &&
	test_grep "fake-agent: failing in execute with status 3" ../reason
'

test_expect_success 'an agent that outlives its timeout: failed, its group killed' '
	make_repo slow &&
	# no sandbox: the pids the agent writes must be host pids
	baton_init_with_agent slow "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"], timeout_seconds: 1}
execution: {sandbox: none}" &&
	cd slow &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=hang \
		test_expect_code 3 "$BATON" run "Hanging agent" >../out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = failed &&
	run_field "$id" reason >../reason &&
	test_grep "timed out" ../reason &&
	! process_is_alive "$(cat "$FAKE_STATE/$id.hang.pid")" &&
	! process_is_alive "$(cat "$FAKE_STATE/$id.grandchild.pid")"
'

test_expect_success 'text of white space alone is empty: run, task add, steer and memory add refuse it, writing nothing' '
	cd repo &&
	before=$("$BATON" status --json | jq length) &&
	test_expect_code 1 "$BATON" run "   " 2>../blank.err &&
	test_grep "the task is empty" ../blank.err &&
	test_expect_code 1 "$BATON" task add "  " 2>../blank.err &&
	test_grep "a task needs a title" ../blank.err &&
	test_expect_code 1 "$BATON" steer "$(cat ../good-id)" "  " 2>../blank.err &&
	test_grep "guidance is empty" ../blank.err &&
	test_expect_code 1 "$BATON" memory add "  " 2>../blank.err &&
	test_grep "the text is empty" ../blank.err &&
	printf "\n \n" | test_expect_code 1 "$BATON" memory add - 2>../blank.err &&
	test_grep "the text is empty" ../blank.err &&
	test "$("$BATON" status --json | jq length)" = "$before" &&
	"$BATON" task list --json | jq -e "length == 0" &&
	"$BATON" memory list --json | jq -e "map(select(.kind == \"note\")) | length == 0"
'

test_expect_success '"--" ends the options, --help too: run -- --help is a run of the task "--help"' '
	cd repo &&
	"$BATON" run -- --help >../dash.out 2>&1 &&
	test_grep ! "^usage:" ../dash.out &&
	test "$("$BATON" show "$(newest_run)" --json | jq -r .task)" = "--help"
'

test_expect_success 'clean --status with a status no run can have is a usage error naming it' '
	cd repo &&
	test_expect_code 2 "$BATON" clean --status merge-ready --dry-run 2>../clean.err &&
	test_grep "unknown status .merge-ready." ../clean.err
'

test_expect_success 'a path policy no path can match is refused, naming it: allowed_paths in the config, --allow of a task' '
	make_repo globs &&
	baton_init_with_agent globs "policies: {allowed_paths: [src/, ./file.txt]}" &&
	cd globs &&
	test_expect_code 1 "$BATON" config validate 2>../globs.err &&
	test_grep "config.yaml:[0-9]*:[0-9]*: policies.allowed_paths\[1\]: .*root, without" ../globs.err &&
	sed -i "s|./file.txt|../up/**|" .baton/config.yaml &&
	test_expect_code 1 "$BATON" config validate 2>../globs.err &&
	test_grep "policies.allowed_paths\[1\]" ../globs.err &&
	sed -i "s|, ../up/\*\*||" .baton/config.yaml &&
	"$BATON" config validate &&
	for g in "" "/abs/**" "../**" "[abc" "./x"; do
		test_expect_code 1 "$BATON" task add "Held" --allow "$g" 2>../allow.err &&
		test_grep "allowed path" ../allow.err || return 1
	done &&
	"$BATON" task list --json | jq -e "length == 0"
'

test_expect_success 'after all of that the store is intact' '
	check_intact &&
	cd repo &&
	"$BATON" status --json >../status.json &&
	test_jq "all(.[]; .status == \"merge_ready\" or .status == \"blocked\" or .status == \"failed\")" ../status.json
'

test_expect_success 'outside a git repository: init and status fail, exit 1' '
	mkdir -p notrepo &&
	cd notrepo &&
	for cmd in init status "run x"; do
		GIT_CEILING_DIRECTORIES=$TRASH_DIRECTORY \
			test_expect_code 1 "$BATON" $cmd >../out 2>../err || exit 1
		test_grep "not inside a git repository" ../err || exit 1
	done &&
	test_path_is_missing .baton
'

test_expect_success 'baton run before baton init says to run baton init' '
	make_repo noinit &&
	cd noinit &&
	test_expect_code 1 "$BATON" run "x" >../out 2>../err &&
	test_grep "baton init" ../err &&
	test_path_is_missing .baton &&
	test_expect_code 1 "$BATON" status 2>../err &&
	test_grep "baton init" ../err
'

test_expect_success 'an empty repository (no commits): refused before any run is recorded' '
	git init -q empty &&
	baton_init_with_agent empty &&
	cd empty &&
	test_expect_code 1 "$BATON" run "x" >../out 2>../err &&
	test_grep "no commits yet" ../err &&
	"$BATON" status --json >../runs &&
	test "$(jq length ../runs)" = 0
'

test_done
