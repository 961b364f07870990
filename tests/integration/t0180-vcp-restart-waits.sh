#!/bin/bash
test_description='a stuck run asks instead of ending (VCP seed 002, OpenViber seed 003): the restart question where rounds are spent, the last review rejects, the implementer fails or stops at a blocker, each of its answers (continue, restart-rca, revise-plan); an unattended run ends with the outcome the question stands for; an assist agent that lacks a credential waits for it (task:progress blocked on the live stream)'
. "$(dirname "$0")/../lib/test-lib.sh"

bug='greet prints an empty greeting for an empty name'

# bugfix_bg REPO NAME PIPELINE [ENV=VALUE...]: a foreground run of PIPELINE
# in REPO, in the background (bg_start NAME); its id goes to NAME.id.
bugfix_bg() {
	local repo=$1 name=$2 pipeline=$3 before
	shift 3
	before=$(cd "$repo" && newest_run) &&
		(cd "$repo" && bg_start "$TRASH_DIRECTORY/$name" env "$@" "$BATON" run --pipeline "$pipeline" "$bug") &&
		(cd "$repo" && wait_for 'test "$(newest_run)" != "$before"' && newest_run) >"$TRASH_DIRECTORY/$name.id"
}

# questions RUN: how many questions RUN asked.
questions() {
	"$BATON" events "$1" --json | jq -s '[.[] | select(.type == "question")] | length'
}

# last_question RUN FILE: the data of RUN's last question, in FILE.
last_question() {
	"$BATON" events "$1" --json | jq -s '[.[] | select(.type == "question")][-1].data' >"$2"
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo "pipelines:
  tight:
    type: bugfix
    max_iterations: 1
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review}"
'

# --- rounds spent: continue ----------------------------------------------------

test_expect_success 'rounds spent: the run waits at the restart question, with every way on and what a rejection ends as' '
	bugfix_bg repo more tight FAKE_VERDICT=needs_changes,needs_changes,approved &&
	cd repo &&
	id=$(cat ../more.id) &&
	wait_for_status "$id" waiting_for_approval &&
	last_question "$id" ../q.json &&
	test_jq ".kind == \"restart\" and .stage == \"code-review\" and .options == [\"restart-rca\", \"revise-plan\", \"continue\"]" ../q.json &&
	test_jq ".outcome == \"max_iterations_reached\" and (.why | test(\"max_iterations \\\\(1\\\\)\"))" ../q.json &&
	test_jq ".routes == {\"restart-rca\": \"analyzing\", \"revise-plan\": \"consolidating\", \"continue\": \"fixing\"}" ../q.json &&
	test_jq "(.question | test(\"restart-rca\")) and (.question | test(\"one more fix round\"))" ../q.json &&
	"$BATON" show --json "$id" >../show.json &&
	test_jq ".review_loops == 1 and .max_review_loops == 1" ../show.json
'

test_expect_success 'a plain approval continues: one more fix round is granted and the review runs again' '
	cd repo &&
	id=$(cat ../more.id) &&
	"$BATON" approvals approve "$id" >/dev/null &&
	rc=$(bg_wait ../more) &&
	test "$rc" = 0 &&
	"$BATON" show --json "$id" >../show.json &&
	test_jq ".status == \"merge_ready\" and .outcome == \"completed\"" ../show.json &&
	test_jq ".review_loops == 2 and .max_review_loops == 2" ../show.json &&
	test_jq "[.events[] | select(.type == \"transition\" and .from == \"waiting_for_approval\")][-1].data | .decision == \"approve\" and .option == \"continue\"" ../show.json &&
	test_jq "[.events[] | select(.type == \"transition\" and .from == \"waiting_for_approval\")][-1].to == \"fixing\"" ../show.json &&
	fake_calls "$id" fix >../fixes &&
	test_line_count = 2 ../fixes &&
	fake_calls "$id" code-review >../reviews &&
	test_line_count = 3 ../reviews &&
	test_jq ".progress.ask == null" ../show.json
'

# --- the last review rejects: restart from the RCA -------------------------------

test_expect_success 'the last code review rejects: restart-rca analyses the bug again, the guidance reaches the analysts, the run completes' '
	bugfix_bg repo again bugfix FAKE_VERDICT_CODE_REVIEW_3=rejected,approved &&
	cd repo &&
	id=$(cat ../again.id) &&
	wait_for_status "$id" waiting_for_approval &&
	last_question "$id" ../q.json &&
	test_jq ".kind == \"restart\" and .stage == \"code-review-3\" and .outcome == \"code_rejected\"" ../q.json &&
	fake_calls "$id" rca >../rcas &&
	test_line_count = 2 ../rcas &&
	"$BATON" approvals approve "$id" --guidance "restart-rca: look at how an empty name reaches greet" >/dev/null &&
	rc=$(bg_wait ../again) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	transition_pairs "$id" >../pairs &&
	test_grep "^waiting_for_approval -> analyzing_1$" ../pairs &&
	fake_calls "$id" rca >../rcas &&
	test_line_count = 4 ../rcas &&
	"$BATON" events "$id" --json | jq -s . >../events.json &&
	test_jq "[.[] | select(.type == \"steer\") | .data.text] == [\"look at how an empty name reaches greet\"]" ../events.json &&
	grep -l "look at how an empty name reaches greet" .baton/runs/$id/calls/*rca*.prompt.md >../steered &&
	test_line_count -ge 1 ../steered
'

# --- the implementer fails: revise the plan -------------------------------------

test_expect_success 'the implementer reports failed: revise-plan makes the plan again with the guidance in it, and the implementation runs again' '
	bugfix_bg repo revise bugfix FAKE_IMPL_STATUS=failed,complete &&
	cd repo &&
	id=$(cat ../revise.id) &&
	wait_for_status "$id" waiting_for_approval &&
	last_question "$id" ../q.json &&
	test_jq ".kind == \"restart\" and .stage == \"implementation\" and .outcome == \"implementation_failed\" and .routes.continue == \"implementing\"" ../q.json &&
	test_jq ".why | test(\"the implementer reported failed\")" ../q.json &&
	"$BATON" approvals approve "$id" --guidance "revise-plan: keep the greeting in one function" >/dev/null &&
	rc=$(bg_wait ../revise) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	test_jq ".revision == \"keep the greeting in one function\"" ".baton/runs/$id/fix-plan.json" &&
	"$BATON" events "$id" --json | jq -s . >../events.json &&
	test_jq "[.[] | select(.type == \"consolidated\") | .data.revised] == [false, true]" ../events.json &&
	fake_calls "$id" implementation >../impls &&
	test_line_count = 2 ../impls &&
	fake_calls "$id" rca >../rcas &&
	test_line_count = 2 ../rcas
'

# --- partial with a blocker --------------------------------------------------------

test_expect_success 'a partial implementation naming a blocker asks (kind blocker); continue runs the implementation again' '
	bugfix_bg repo blocker bugfix FAKE_IMPL_STATUS=partial,complete "FAKE_IMPL_BLOCKER=needs write access to vendor/zlib" &&
	cd repo &&
	id=$(cat ../blocker.id) &&
	wait_for_status "$id" waiting_for_approval &&
	last_question "$id" ../q.json &&
	test_jq ".kind == \"blocker\" and .outcome == \"implementation_failed\" and (.why | test(\"stopped at a blocker: needs write access to vendor/zlib\"))" ../q.json &&
	test_jq ".blocker == \"needs write access to vendor/zlib\" and .status == \"partial\"" ".baton/runs/$id/impl-result.json" &&
	"$BATON" approvals approve "$id" --guidance "continue: vendor/zlib is yours to edit now" >/dev/null &&
	rc=$(bg_wait ../blocker) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	fake_calls "$id" implementation >../impls &&
	test_line_count = 2 ../impls &&
	grep -l "vendor/zlib is yours to edit now" .baton/runs/$id/calls/*implementation*.prompt.md >../steered &&
	test_line_count = 1 ../steered
'

test_expect_success 'a partial implementation without a blocker is sent back to finish (the seed: continue implementation)' '
	cd repo &&
	FAKE_IMPL_STATUS=partial,complete test_expect_code 0 "$BATON" run --pipeline bugfix "$bug" >../partial.out 2>&1 &&
	id=$(newest_run) &&
	test "$(questions "$id")" = 0 &&
	"$BATON" events "$id" --json | jq -s . >../events.json &&
	test_jq "[.[] | select(.type == \"contract_error\") | .data.error | test(\"status partial\")] == [true]" ../events.json
'

# --- unattended -------------------------------------------------------------------

test_expect_success 'an unattended run asks nobody: it ends blocked with the outcome the question stands for' '
	cd repo &&
	FAKE_VERDICT_CODE_REVIEW_3=rejected test_expect_code 3 "$BATON" run --unattended --pipeline bugfix "$bug" >../unatt.out 2>&1 &&
	id=$(newest_run) &&
	"$BATON" show --json "$id" >../show.json &&
	test_jq ".status == \"blocked\" and .outcome == \"code_rejected\"" ../show.json &&
	test_jq ".reason | test(\"^unattended: code-review-3 rejected the change\")" ../show.json &&
	test_jq "[.events[] | select(.type == \"unattended_stop\") | .data.cause] == [\"question\"]" ../show.json
'

test_expect_success 'a rejection with guidance keeps the outcome and says why' '
	bugfix_bg repo rej bugfix FAKE_IMPL_STATUS=failed &&
	cd repo &&
	id=$(cat ../rej.id) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals reject "$id" --guidance "not worth it" >/dev/null &&
	test "$(bg_wait ../rej)" = 3 &&
	test "$(run_field "$id" outcome)" = implementation_failed &&
	run_field "$id" reason >../reason &&
	test_grep "the implementer reported failed.*a person rejected going on: not worth it" ../reason
'

# --- OpenViber: an assist agent that lacks a credential waits ----------------------

write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	n=$(grep -c "^$BATON_RUN_ID $BATON_STAGE_KIND\$" "$FAKE_STATE/calls" 2>/dev/null)
	echo "$BATON_RUN_ID $BATON_STAGE_KIND" >>"$FAKE_STATE/calls"
	case "$BATON_STAGE_KIND" in
	plan)
		printf '# Plan\n\n1. publish the notes\n' >"$BATON_OUT_DIR/plan.md" ;;
	execute)
		cp "$BATON_PROMPT_FILE" "$FAKE_STATE/execute-$n.prompt"
		if [ "$n" = 0 ]; then
			printf '{"needs": "credential", "what": "a token for the notes service, to publish"}\n' \
				>"$BATON_OUT_DIR/escalation.json"
			echo "cannot publish without a token"
		else
			echo "published" >done.txt
			echo "published the notes"
		fi ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

test_expect_success 'assist: the executing agent is told how to say what it lacks' '
	write_agent &&
	make_repo assist &&
	baton_init_with_agent assist "providers:
  a: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: a}
assist: {auto_complete: true}
runtime: {judge: false}" &&
	cd assist &&
	serve_http ../serve-assist --workers 1 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Publish the notes\", \"pipeline\": \"assist\"}" >../t &&
	id=$(jq .id ../t) &&
	echo "$id" >../task.id &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN&task=$id&after=0" \
		--until "approval:requested" --timeout 120 >../ws &&
	test_grep "When you cannot go on alone" "$FAKE_STATE/execute-0.prompt" &&
	test_grep "\"needs\": \"credential\"" "$FAKE_STATE/execute-0.prompt"
'

test_expect_success 'the stream says blocked (task:progress) with what it needs, then asks (approval:requested)' '
	cd assist &&
	grep "\"type\":\"task:progress\"" ../ws | jq -s "map(select(.status == \"blocked\"))" >../blocked.json &&
	test_jq "length == 1 and .[0].needs == \"credential\" and .[0].stage == \"execute\" and (.[0].question | test(\"a token for the notes service\"))" ../blocked.json &&
	b=$(grep -n "\"type\":\"task:progress\".*\"status\":\"blocked\"" ../ws | cut -d: -f1) &&
	a=$(grep -n "\"type\":\"approval:requested\"" ../ws | cut -d: -f1) &&
	test "$b" -lt "$a" &&
	run=$(newest_run) &&
	test "$(run_status "$run")" = waiting_for_approval &&
	"$BATON" show --json "$run" >../show.json &&
	test_jq ".progress.ask | .kind == \"needs\" and .needs == \"credential\" and .what == \"a token for the notes service, to publish\"" ../show.json &&
	test_path_is_file ".baton/runs/$run/escalations/escalation-1.json"
'

test_expect_success 'provided, the approval runs the executing stage again with the guidance, and the task completes' '
	cd assist &&
	id=$(cat ../task.id) &&
	run=$(newest_run) &&
	serve_http ../serve-assist2 --workers 1 &&
	api_expect 200 POST "/api/v1/approvals/$run" "{\"decision\": \"approve\", \"guidance\": \"the token is in NOTES_TOKEN now\"}" >../approved.json &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN&task=$id&after=0" \
		--until "task:completed" --timeout 120 >../ws2 &&
	test "$(run_status "$run")" = completed &&
	test_grep "the token is in NOTES_TOKEN now" "$FAKE_STATE/execute-1.prompt" &&
	git show "baton/$run:done.txt" >../done &&
	test_grep "^published$" ../done
'

test_expect_success 'a needs escalation that is not one (an unknown kind, a what on two lines) is a contract error, not a question' '
	make_repo badneeds &&
	cat >"$TRASH_DIRECTORY/bad-agent" <<-\EOF &&
	#!/bin/sh
	case "$BATON_STAGE_KIND" in
	plan) printf "# Plan\n\n1. x\n" >"$BATON_OUT_DIR/plan.md" ;;
	execute)
		printf "{\"needs\": \"money\", \"what\": \"a lot\"}\n" >"$BATON_OUT_DIR/escalation.json"
		echo "stuck" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/bad-agent" &&
	baton_init_with_agent badneeds "providers:
  a: {type: command, command: [\"$TRASH_DIRECTORY/bad-agent\"]}
roles: {default: a}
assist: {auto_complete: true}" &&
	cd badneeds &&
	test_expect_code 3 "$BATON" run --pipeline assist "Publish" >../bad.out 2>&1 &&
	id=$(newest_run) &&
	"$BATON" events "$id" --json | jq -s . >../events.json &&
	test_jq "[.[] | select(.type == \"contract_error\") | .data.error | test(\"needs. must be credential, access, resource or permission\")] | all and length == 2" ../events.json &&
	test_jq "[.[] | select(.type == \"question\")] | length == 0" ../events.json
'

test_done
