#!/bin/bash
test_description='run files in the store: artifacts, reports and agent transcripts are shown from the store when the run folder is gone; a file over the cap is stored truncated with a pointer; a planted link is never followed'
. "$(dirname "$0")/../lib/test-lib.sh"

# The agent: a plan, a change, an approval, each saying which run it is
# for; a task that says "huge" floods its execute transcript (300 KiB);
# a task that says "sneaky" plants review.json (an artifact of the
# review stage) in the run folder as a link to a secret outside it (an
# agent without a sandbox can write there).
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	case "$BATON_STAGE_KIND" in
	execute)
		echo "$BATON_RUN_ID" >"$BATON_WORKTREE/$BATON_RUN_ID.txt"
		if grep -q huge "$BATON_PROMPT_FILE"; then
			awk 'BEGIN { for (i = 0; i < 4000; i++) printf "line %05d %s\n", i, sprintf("%085d", 0) }'
		fi
		echo "TRANSCRIPT-MARK execute of $BATON_RUN_ID" ;;
	review)
		if grep -q sneaky "$BATON_PROMPT_FILE"; then
			ln -sf "$TRASH_DIRECTORY/secret" "$BATON_RUN_DIR/review.json"
		fi
		echo "DECISION: APPROVED" ;;
	*)
		echo "# PLAN-MARK plan of $BATON_RUN_ID" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

test_expect_success 'setup' '
	write_agent &&
	echo "TOP-SECRET-VALUE" >secret &&
	make_repo repo &&
	baton_init_with_agent repo "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: instant}
pipelines:
  short:
    terminal: merge_ready
    stages:
      - {name: plan, kind: plan}
      - {name: execute, kind: execute}
      - {name: review, kind: review}
workflow: {pipeline: short}
validate: {commands: []}
execution: {sandbox: none}
runtime: {file_cap_kib: 64}"
'

test_expect_success 'a run keeps its files in the store' '
	cd repo &&
	"$BATON" run "add a note" >../run.out 2>&1 &&
	r=$(newest_run) && echo "$r" >../run-id &&
	"$BATON" show "$r" --json >../show.json &&
	test_jq ".files | map(.name) | index(\"plan.md\") != null" ../show.json &&
	test_jq "[.files[].name | select(test(\"^calls/[0-9]+-execute-instant-0.stdout$\"))] | length == 1" ../show.json &&
	test_jq "[.files[].name | select(test(\"^calls/.*prompt.md$\"))] | length == 3" ../show.json &&
	test_jq "[.files[].name | select(test(\"^reports/[0-9]+.md$\"))] | length >= 1" ../show.json &&
	test_jq "all(.files[]; .truncated == false and (.sha256 | length) == 64)" ../show.json
'

test_expect_success 'with the run folder gone, baton show still shows the artifacts and the transcript' '
	cd repo &&
	r=$(cat ../run-id) &&
	rm -rf ".baton/runs/$r" &&
	test_path_is_missing ".baton/runs/$r" &&
	"$BATON" show "$r" >../show.txt &&
	test_grep "plan.md" ../show.txt &&
	test_grep "calls/.*-execute-instant-0.stdout" ../show.txt &&
	"$BATON" show "$r" --file plan.md >../plan.md &&
	test_grep "PLAN-MARK plan of $r" ../plan.md &&
	out=$(sed -n "s/^  \(calls\/[0-9]*-execute-instant-0.stdout\) .*/\1/p" ../show.txt) &&
	"$BATON" show "$r" --file "$out" >../transcript 2>../transcript.err &&
	test_grep "TRANSCRIPT-MARK execute of $r" ../transcript &&
	test_must_fail test -s ../transcript.err &&
	test_must_fail "$BATON" show "$r" --file nope.md 2>../nope.err &&
	test_grep "has no file .nope.md." ../nope.err
'

test_expect_success 'a transcript over the cap is stored truncated, with its size, sha256, host and path' '
	cd repo &&
	"$BATON" run "a huge one" >../run2.out 2>&1 &&
	r=$(newest_run) &&
	"$BATON" show "$r" --json >../show2.json &&
	name=$(jq -r "[.files[] | select(.name | test(\"execute-instant-0.stdout$\"))][0].name" ../show2.json) &&
	test_jq "[.files[] | select(.name == \"$name\")][0] | .truncated == true and .stored == 65536 and .size > 262144" ../show2.json &&
	full=.baton/runs/$r/$name &&
	test "$(jq -r "[.files[] | select(.name == \"$name\")][0].size" ../show2.json)" = "$(wc -c <"$full" | tr -d " ")" &&
	test "$(jq -r "[.files[] | select(.name == \"$name\")][0].sha256" ../show2.json)" = "$(sha256sum "$full" | cut -d" " -f1)" &&
	test_jq "[.files[] | select(.name == \"$name\")][0].path | endswith(\"$name\")" ../show2.json &&
	"$BATON" show "$r" --file "$name" >../part 2>../part.err &&
	test "$(wc -c <../part | tr -d " ")" = 65536 &&
	head -c 65536 "$full" | cmp - ../part &&
	test_grep "truncated: 65536 of [0-9]* bytes kept in the store" ../part.err &&
	test_grep "sha256 $(sha256sum "$full" | cut -d" " -f1)" ../part.err
'

test_expect_success 'a link the agent planted in the run folder is not followed into the store' '
	cd repo &&
	"$BATON" run "a sneaky one" >../run3.out 2>&1 || :
	r=$(newest_run) &&
	test -L ".baton/runs/$r/review.json" &&
	"$BATON" show "$r" --json >../show3.json &&
	test_jq ".files | map(.name) | index(\"review.json\") == null" ../show3.json &&
	test_jq ".files | map(.name) | index(\"plan.md\") != null" ../show3.json &&
	test_must_fail grep -r TOP-SECRET-VALUE ../show3.json &&
	test "$(sqlite3 .baton/baton.db "select count(*) from run_files where instr(cast(content as text), '\''TOP-SECRET-VALUE'\'') > 0")" = 0
'

# A second repository whose run has checks and a hook, and whose branch
# is then landed: their logs are files of the run too. The checks print
# a value baton holds as a secret (DEMO_API_KEY in its environment),
# from a file of the repository, so that only redaction keeps it out.
test_expect_success 'the checks, a hook and a landing keep their logs in the store, redacted' '
	make_repo checked &&
	echo "sk-demo-0123456789abcdef" >checked/token.txt &&
	(cd checked && git add token.txt && git commit -q -m token) &&
	baton_init_with_agent checked "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: instant}
pipelines:
  short:
    terminal: merge_ready
    stages:
      - {name: plan, kind: plan}
      - {name: execute, kind: execute}
      - {name: check, kind: validate}
workflow: {pipeline: short}
validate: {commands: [\"echo CHECK-MARK; cat token.txt\"]}
hooks: {before_stage: [\"echo HOOK-MARK \$BATON_STAGE\"]}
execution: {sandbox: none}" &&
	cd checked &&
	DEMO_API_KEY=sk-demo-0123456789abcdef "$BATON" run "add a note" \
		>../checked.out 2>&1 &&
	r=$(newest_run) &&
	test "$(run_status "$r")" = merge_ready &&
	DEMO_API_KEY=sk-demo-0123456789abcdef "$BATON" merge "$r" \
		>../land.out 2>&1 &&
	"$BATON" show "$r" --json >../checked.json &&
	for f in validation.log validation.json merge.log \
		merge-validation.json hooks/before_stage-executing-0.log
	do
		test_jq ".files | map(.name) | index(\"$f\") != null" \
			../checked.json || return 1
	done &&
	rm -rf ".baton/runs/$r" &&
	"$BATON" show "$r" --file validation.log >../vlog &&
	test_grep CHECK-MARK ../vlog &&
	test_grep "redacted:DEMO_API_KEY" ../vlog &&
	"$BATON" show "$r" --file merge.log >../mlog &&
	test_grep CHECK-MARK ../mlog &&
	test_grep "redacted:DEMO_API_KEY" ../mlog &&
	"$BATON" show "$r" --file validation.json >../vjson &&
	test_jq ".passed == true" ../vjson &&
	"$BATON" show "$r" --file hooks/before_stage-executing-0.log >../hlog &&
	test_grep "HOOK-MARK executing" ../hlog &&
	test "$(sqlite3 .baton/baton.db "select count(*) from run_files where instr(cast(content as text), '\''sk-demo-0123456789abcdef'\'') > 0")" = 0 &&
	sqlite3 .baton/baton.db .dump >../dump &&
	test_grep ! sk-demo-0123456789abcdef ../dump
'

test_expect_success 'the cap is checked: runtime.file_cap_kib out of range is refused' '
	cd repo &&
	cp .baton/config.yaml ../config.keep &&
	sed -i "s/file_cap_kib: 64/file_cap_kib: 0/" .baton/config.yaml &&
	test_must_fail "$BATON" config validate >../cap.out 2>&1;
	cp ../config.keep .baton/config.yaml &&
	test_grep "runtime.file_cap_kib" ../cap.out
'

test_done
