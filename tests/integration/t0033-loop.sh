#!/bin/bash
test_description='the loop pipeline (Craik): bounded iterations, policy grants with a denial receipt, a receipt chain that catches tampering, and a kill -9 that repeats no completed step'
. "$(dirname "$0")/../lib/test-lib.sh"

# A scripted loop agent. Each iteration writes notes/N.txt. Knobs:
#   LOOP_STEPS   iterations before the evaluation says done (default 2)
#   LOOP_LAST    what the last evaluation says (default done)
#   LOOP_EXTRA   more effects for the plan, as JSON: ', {"kind": ...}'
#   LOOP_EFFECTS the plan's effects instead (JSON list items)
#   ACT_SLEEP, ACT_SLEEP_AT  the act of that iteration sleeps that long
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	echo "$BATON_RUN_ID $BATON_STAGE_KIND $BATON_ITERATION" >>"$FAKE_STATE/calls"
	it=${BATON_ITERATION:-1}
	case "$BATON_STAGE_KIND" in
	loop-plan)
		if [ "$it" -gt "${LOOP_STEPS:-2}" ]; then
			echo '{"done": true, "summary": "met"}' >"$BATON_ARTIFACT"
			exit 0
		fi
		fx=${LOOP_EFFECTS:-"{\"kind\": \"write\", \"target\": \"notes/$it.txt\"}${LOOP_EXTRA:-}"}
		printf '{"done": false, "summary": "s", "step": "write note %s", "effects": [%s]}\n' \
			"$it" "$fx" >"$BATON_ARTIFACT" ;;
	act)
		mkdir -p notes && echo "note $it" >"notes/$it.txt"
		if [ -n "${ACT_SLEEP:-}" ] && [ "$it" = "${ACT_SLEEP_AT:-2}" ]; then
			sleep "$ACT_SLEEP"
		fi
		echo "act $it done" >>"$FAKE_STATE/acts"
		echo "wrote notes/$it.txt" ;;
	evaluate)
		st=continue
		[ "$it" -ge "${LOOP_STEPS:-2}" ] && st=${LOOP_LAST:-done}
		echo "{\"status\": \"$st\", \"summary\": \"iteration $it\"}" >"$BATON_ARTIFACT" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

# loop_config PROFILE [MORE YAML]: the repository's config.
loop_config() {
	cat >repo/.baton/config.yaml <<-EOF
	providers:
	  a: {type: command, command: ["$TRASH_DIRECTORY/agent"]}
	roles: {default: a}
	validate: {commands: ["make test"]}
	loop: {profile: $1, max_iterations: 3${2:+, $2}}
	EOF
	if [ -n "${BATON_TEST_PG_ADMIN:-}" ]; then
		echo "store: $(pg_new_db)" >>repo/.baton/config.yaml
	fi
}

# calls_of RUN KIND: how many calls of that kind the run made.
calls_of() {
	grep -c "^$1 $2 " "$FAKE_STATE/calls" || :
}

test_expect_success 'setup' '
	make_repo repo &&
	write_agent &&
	(cd repo && "$BATON" init >/dev/null) &&
	loop_config trusted-local &&
	(cd repo && "$BATON" pipeline show loop >../loop.txt) &&
	test_grep "evaluating *-> planning (continue)" loop.txt &&
	test_grep "planning *-> .*completed (goal met)" loop.txt
'

test_expect_success 'two iterations reach completed, with iteration, phase and receipts on record' '
	(cd repo && LOOP_STEPS=2 "$BATON" run --pipeline loop "write two notes") &&
	cd repo &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = completed &&
	test "$(calls_of "$id" act)" = 2 &&
	"$BATON" show "$id" --json >../show.json &&
	test_jq ".loop.iteration == 2 and .loop.max_iterations == 3 and .loop.phase == \"stop\" and .loop.state == \"completed\" and (.loop.phase_started_at | type) == \"string\"" ../show.json &&
	"$BATON" receipts "$id" --json >../receipts.json &&
	test_jq "length == 4 and .[0].phase == \"act\" and .[0].decision == \"granted\" and (.[0].output_digest | startswith(\"sha256:\"))" ../receipts.json &&
	"$BATON" receipts verify "$id" >../verify.out &&
	test_grep "4 receipts, chain intact" ../verify.out &&
	git show "baton/$id:notes/2.txt" >../note2 &&
	test_grep "note 2" ../note2
'

test_expect_success 'max_iterations stops the run before the next act, with a stop receipt' '
	(cd repo && LOOP_STEPS=9 "$BATON" run --pipeline loop "never done"; echo $? >../max.rc) &&
	test "$(cat max.rc)" = 3 &&
	cd repo &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = max_iterations_reached &&
	test "$(calls_of "$id" act)" = 3 &&
	test "$(calls_of "$id" loop-plan)" = 3 &&
	"$BATON" receipts "$id" --json >../max.json &&
	test_jq ".[-1].phase == \"stop\" and .[-1].decision == \"stopped\" and (.[-1].reason | test(\"before act 4\"))" ../max.json &&
	"$BATON" show "$id" >../max.show &&
	test_grep "before act 4" ../max.show
'

test_expect_success 'strict: a side effect without a grant is denied, on record as a denial receipt, and the run blocks before the act' '
	loop_config strict "grants: [\"write:notes/*\"]" &&
	(cd repo && LOOP_EXTRA=", {\"kind\": \"run\", \"target\": \"curl https://example.com\"}" \
		"$BATON" run --pipeline loop "fetch something"; echo $? >../deny.rc) &&
	test "$(cat deny.rc)" = 3 &&
	cd repo &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = policy_denied &&
	test "$(calls_of "$id" act)" = 0 &&
	"$BATON" receipts "$id" --json >../deny.json &&
	test_jq "length == 1 and .[0].decision == \"denied\" and ([.[0].grants[] | select(.decision == \"denied\") | .target] == [\"curl https://example.com\"]) and ([.[0].grants[] | select(.decision == \"granted\") | .by] == [\"grant write:notes/*\"])" ../deny.json &&
	run_field "$id" reason >../deny.reason &&
	test_grep "curl" ../deny.reason
'

test_expect_success 'strict: an act that writes outside its grants blocks the run with a violation receipt' '
	loop_config strict "grants: [\"write:elsewhere/*\"]" &&
	(cd repo && LOOP_EFFECTS="{\"kind\": \"write\", \"target\": \"elsewhere/x\"}" \
		"$BATON" run --pipeline loop "write outside"; echo $? >../viol.rc) &&
	cd repo &&
	id=$(newest_run) &&
	test "$(run_field "$id" outcome)" = policy_denied &&
	"$BATON" receipts "$id" --json >../viol.json &&
	test_jq ".[-1].decision == \"violation\" and (.[-1].reason | test(\"notes/1.txt\"))" ../viol.json
'

test_expect_success 'tampering with a stored receipt makes receipts verify fail, naming the receipt' '
	loop_config trusted-local &&
	(cd repo && LOOP_STEPS=2 "$BATON" run --pipeline loop "to tamper with") &&
	cd repo &&
	id=$(newest_run) &&
	"$BATON" receipts verify "$id" &&
	seq=$("$BATON" events "$id" --json | jq -r "select(.type == \"receipt\" and .data.n == 3) | .seq") &&
	db_query "UPDATE events SET data = replace(data, '"'"'write note 2'"'"', '"'"'write note 9'"'"') WHERE seq = $seq" &&
	test_must_fail "$BATON" receipts verify "$id" >../tamper.out 2>&1 &&
	test_grep "receipt 3" ../tamper.out &&
	db_query "UPDATE events SET data = replace(data, '"'"'write note 9'"'"', '"'"'write note 2'"'"') WHERE seq = $seq" &&
	"$BATON" receipts verify "$id" &&
	last=$("$BATON" events "$id" --json | jq -r "select(.type == \"receipt\") | .seq" | tail -n 1) &&
	db_query "DELETE FROM events WHERE seq = $last" &&
	test_must_fail "$BATON" receipts verify "$id" >../gone.out 2>&1 &&
	test_grep "receipt 4" ../gone.out
'

test_expect_success 'kill -9 during act 2, then resume: no completed step runs again' '
	loop_config trusted-local &&
	cd repo &&
	: >"$FAKE_STATE/acts" &&
	before=$(newest_run) &&
	LOOP_STEPS=3 ACT_SLEEP=30 ACT_SLEEP_AT=2 bg_start "$TRASH_DIRECTORY/crash" "$BATON" run --pipeline loop "crash in the middle" &&
	wait_for "test \"\$(newest_run)\" != \"$before\"" &&
	id=$(newest_run) &&
	wait_for "test \"\$(calls_of $id act)\" = 2" &&
	kill -KILL "$(cat "$TRASH_DIRECTORY/crash.pid")" &&
	test "$(bg_wait "$TRASH_DIRECTORY/crash")" = 137 &&
	LOOP_STEPS=3 "$BATON" resume "$id" &&
	test "$(run_status "$id")" = completed &&
	test "$(calls_of "$id" loop-plan)" = 3 &&
	test "$(calls_of "$id" evaluate)" = 3 &&
	test "$(grep -c "act 1 done" "$FAKE_STATE/acts")" = 1 &&
	test "$(grep -c "act 3 done" "$FAKE_STATE/acts")" = 1 &&
	"$BATON" receipts "$id" --json >../crash.json &&
	test_jq "[.[] | select(.phase == \"act\") | .iteration] == [1, 2, 3]" ../crash.json &&
	"$BATON" receipts verify "$id"
'

test_done
