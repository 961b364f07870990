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

# The Craik receipt chain cases (../shared beside the source tree, as in
# CI): each of its baton_port items, and its cases that need a loop run,
# is a test below, found by the item's words; one without a test fails.
CASES=${BATON_CONFORMANCE_DIR:-$TEST_DIRECTORY/../../shared/conformance}/craik/receipt-chain-cases.json

# receipt_seq RUN N: the event seq of the run's receipt N.
receipt_seq() {
	"$BATON" events "$1" --json |
		jq -r "select(.type == \"receipt\" and .data.n == $2) | .seq"
}

# receipt_data RUN N: receipt N as stored, on one line.
receipt_data() {
	"$BATON" events "$1" --json |
		jq -c "select(.type == \"receipt\" and .data.n == $2) | .data"
}

# set_event_data SEQ JSON: stores JSON as that event's data.
set_event_data() {
	db_query "UPDATE events SET data = '$(printf '%s' "$2" | sed "s/'/''/g")' WHERE seq = $1"
}

# reseal JSON: the receipt with its hash recomputed as baton does, by an
# attacker who knows the scheme: sha256(prev "\n" canonical(r - hash)).
reseal() {
	local prev body hash
	prev=$(printf '%s' "$1" | jq -r .prev) &&
	body=$(printf '%s' "$1" | jq -cS 'del(.hash)') &&
	hash=$(printf '%s\n%s' "$prev" "$body" | sha256sum | cut -d' ' -f1) &&
	printf '%s' "$1" | jq -c --arg h "$hash" '.hash = $h'
}

# progress_of RUN: the run's progress as stored.
progress_of() {
	db_query "SELECT progress FROM runs WHERE id = '$1'"
}

# set_progress RUN TEXT: stores TEXT (no single quotes) as its progress.
set_progress() {
	db_query "UPDATE runs SET progress = '$2' WHERE id = '$1'"
}

# spoil RUN FROM TO: replaces FROM with TO in the run's stored progress,
# failing when FROM is not there, so that no test passes by missing.
spoil() {
	progress_of "$1" | grep -qF -- "$2" || {
		echo "spoil: no '$2' in the progress of $1" >&2
		return 1
	}
	db_query "UPDATE runs SET progress = replace(progress, '$2', '$3') WHERE id = '$1'"
}

# verify_fails RUN MESSAGE: receipts verify exits 1, saying MESSAGE.
verify_fails() {
	test_must_fail "$BATON" receipts verify "$1" >../verify.out 2>&1 &&
	test_grep -F "$2" ../verify.out
}

# loop_run TASK: a two-iteration loop run in repo (4 receipts: act and
# observe twice), verified intact; its id in $id. Run in repo.
loop_run() {
	LOOP_STEPS=2 "$BATON" run --pipeline loop "$1" >/dev/null &&
	id=$(newest_run) &&
	"$BATON" receipts verify "$id" >/dev/null
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

test_expect_success 'trusted-local: a planned write to .baton is denied as immutable; an over-broad grant is a config error' '
	loop_config trusted-local &&
	(cd repo && LOOP_EFFECTS="{\"kind\": \"write\", \"target\": \".baton/config.yaml\"}" \
		"$BATON" run --pipeline loop "rewrite my policy"; echo $? >../imm.rc) &&
	test "$(cat imm.rc)" = 3 &&
	(cd repo &&
	 id=$(newest_run) &&
	 test "$(run_field "$id" outcome)" = policy_denied &&
	 test "$(calls_of "$id" act)" = 0 &&
	 run_field "$id" reason >../imm.reason) &&
	test_grep "is immutable (under .\.baton.)" imm.reason &&
	loop_config strict "grants: [\"write:**\"]" &&
	(cd repo && test_must_fail "$BATON" run --pipeline loop "everything" 2>../broad.err) &&
	test_grep "loop.grants\[0\]: grant .write:\*\*.: too broad" broad.err
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

test_expect_success 'a chain cut at its end does not verify when the count or head in the run record is removed, null, -1, a string or wrong (issue 17)' '
	loop_config trusted-local &&
	cd repo &&
	loop_run "to cut" &&
	orig=$(progress_of "$id") &&
	h3=$("$BATON" receipts "$id" --json | jq -r ".[2].hash") &&
	h4=$("$BATON" receipts "$id" --json | jq -r ".[3].hash") &&
	db_query "DELETE FROM events WHERE seq = $(receipt_seq "$id" 4)" &&
	verify_fails "$id" "the run recorded 4 receipts but 3 remain: receipt 4 was removed" &&
	spoil "$id" "\"receipts\":4," "" &&
	verify_fails "$id" "(progress.loop.receipts is missing)" &&
	set_progress "$id" "$orig" &&
	spoil "$id" "\"receipts\":4," "\"receipts\":null," &&
	verify_fails "$id" "(progress.loop.receipts is null, not an integer)" &&
	set_progress "$id" "$orig" &&
	spoil "$id" "\"receipts\":4," "\"receipts\":-1," &&
	verify_fails "$id" "is -1, which no chain has" &&
	set_progress "$id" "$orig" &&
	spoil "$id" "\"receipts\":4," "\"receipts\":\"3\"," &&
	verify_fails "$id" "(progress.loop.receipts is a string, not an integer)" &&
	set_progress "$id" "$orig" &&
	spoil "$id" "\"receipts\":4," "\"receipts\":3," &&
	verify_fails "$id" "the last receipt was replaced" &&
	set_progress "$id" "$orig" &&
	spoil "$id" "\"head\":\"$h4\"," "" &&
	verify_fails "$id" "(progress.loop.head is missing)" &&
	set_progress "$id" "$orig" &&
	spoil "$id" "\"head\":\"$h4\"" "\"head\":null" &&
	verify_fails "$id" "(progress.loop.head is null, not a hash)" &&
	set_progress "$id" "$orig" &&
	spoil "$id" "$h4" "$(printf %s "$h3" | tr a-f A-F)" &&
	verify_fails "$id" "is not 64 lowercase hex digits" &&
	set_progress "$id" "$orig" &&
	spoil "$id" "\"loop\":{" "\"lopp\":{" &&
	verify_fails "$id" "(progress.loop.receipts is missing)" &&
	{ "$BATON" receipts verify "$id" --json >../cut.json || :; } &&
	test_jq ".intact == false and (.error | test(\"receipts is missing\"))" ../cut.json
'

test_expect_success 'a run that acted or evaluated needs its receipts: removing them all with their record does not verify' '
	loop_config trusted-local &&
	cd repo &&
	loop_run "to empty" &&
	orig=$(progress_of "$id") &&
	h4=$("$BATON" receipts "$id" --json | jq -r ".[3].hash") &&
	db_query "DELETE FROM events WHERE run_id = '"'"'$id'"'"' AND type = '"'"'receipt'"'"'" &&
	spoil "$id" "\"receipts\":4," "\"receipts\":0," &&
	spoil "$id" "$h4" "$(printf "%064d" 0)" &&
	verify_fails "$id" "the run recorded act 2 done but 0 receipts" &&
	set_progress "$id" "$orig" &&
	spoil "$id" "\"loop\":{" "\"lopp\":{" &&
	verify_fails "$id" "the run evaluated 2 iterations but has no receipts"
'

test_expect_success 'a loop run that never acted has an empty anchor and verifies with no receipts' '
	loop_config trusted-local &&
	cd repo &&
	LOOP_STEPS=0 "$BATON" run --pipeline loop "already done" &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = completed &&
	progress_of "$id" >../empty.progress &&
	test_grep -F "\"receipts\":0,\"head\":\"$(printf "%064d" 0)\"" ../empty.progress &&
	"$BATON" receipts verify "$id" >../empty.out &&
	test_grep "no receipts" ../empty.out
'

test_expect_success 'the hash covers the run id: a chain copied into another run, with its record, does not verify' '
	loop_config trusted-local &&
	cd repo &&
	loop_run "to copy from" &&
	from=$id &&
	LOOP_STEPS=0 "$BATON" run --pipeline loop "to copy into" &&
	to=$(newest_run) &&
	db_query "INSERT INTO events (run_id, ts, type, data) SELECT '"'"'$to'"'"', ts, type, data FROM events WHERE run_id = '"'"'$from'"'"' AND type = '"'"'receipt'"'"' ORDER BY seq" &&
	set_progress "$to" "$(progress_of "$from")" &&
	first=$(receipt_seq "$to" 1) &&
	verify_fails "$to" "receipt 1 (event $first) belongs to run '"'"'$from'"'"', not '"'"'$to'"'"': it was copied from another run" &&
	"$BATON" receipts verify "$from" &&
	"$BATON" receipts "$from" --json | jq -e "all(.run == \"$from\")"
'

# The Craik cases, as data: each baton_port item and each case that
# needs a loop run, by its words. A run here has 4 receipts, not 3.
port_update() {
	loop_run "craik: update" &&
	seq=$(receipt_seq "$id" 2) &&
	set_event_data "$seq" "$(receipt_data "$id" 2 | jq -c '.reason = "Tampered reason."')" &&
	verify_fails "$id" "receipt 2 (event $seq) was changed after it was written"
}

port_delete() {
	loop_run "craik: delete" &&
	s3=$(receipt_seq "$id" 3) &&
	db_query "DELETE FROM events WHERE seq = $(receipt_seq "$id" 2)" &&
	verify_fails "$id" "receipt 2 (event $s3) is numbered 3: receipt 2 is missing or out of order"
}

port_swap() {
	loop_run "craik: swap" &&
	s2=$(receipt_seq "$id" 2) &&
	s3=$(receipt_seq "$id" 3) &&
	db_query "UPDATE events SET seq = -1 WHERE seq = $s2" &&
	db_query "UPDATE events SET seq = $s2 WHERE seq = $s3" &&
	db_query "UPDATE events SET seq = $s3 WHERE seq = -1" &&
	verify_fails "$id" "receipt 2 (event $s2) is numbered 3: receipt 2 is missing or out of order"
}

# The forgery holds at receipt 2 itself, which is what makes the break
# show at receipt 3's link.
port_reseal() {
	loop_run "craik: reseal" &&
	s2=$(receipt_seq "$id" 2) &&
	s3=$(receipt_seq "$id" 3) &&
	set_event_data "$s2" "$(reseal "$(receipt_data "$id" 2 | jq -c '.reason = "forged"')")" &&
	verify_fails "$id" "receipt 3 (event $s3): its prev does not match receipt 2's hash"
}

# baton differs from Craik on purpose: receipts are append-only events,
# so there is no upsert and no hash history; receipt 2 put again (sealed
# as a writer would) is a repeat, and the chain is broken, not revised.
port_upsert() {
	loop_run "craik: upsert" &&
	again=$(reseal "$(receipt_data "$id" 2 | jq -c '.output_digest = "sha256:00"')") &&
	db_query "INSERT INTO events (run_id, ts, type, data) VALUES ('$id', 0, 'receipt', '$(printf '%s' "$again" | sed "s/'/''/g")')" &&
	verify_fails "$id" "receipt 5 (event" &&
	test_grep -F "is numbered 2: receipt 2 is repeated or out of order" ../verify.out
}

# Receipts are redacted before they are sealed: the store keeps exactly
# what the hash covers, and no secret baton knows.
case_secret() {
	LOOP_TOKEN=hunter2-s3cret-value LOOP_STEPS=1 \
		LOOP_EXTRA=", {\"kind\": \"run\", \"target\": \"make deploy KEY=hunter2-s3cret-value\"}" \
		"$BATON" run --pipeline loop "deploy with a key" >/dev/null &&
	id=$(newest_run) &&
	"$BATON" receipts "$id" --json >../secret.json &&
	test_grep ! hunter2 ../secret.json &&
	test_grep -F "KEY=[redacted:LOOP_TOKEN]" ../secret.json &&
	"$BATON" receipts verify "$id"
}

# craik_test WHAT: the test of a case or item, by its words; "unit" when
# t_receipt.c runs it (it reads the same file).
craik_test() {
	case $1 in
	"run a loop to 3 receipts; UPDATE the event data of receipt 2"*) echo port_update ;;
	"delete receipt 2's event"*) echo port_delete ;;
	"swap two receipts' sequence numbers"*) echo port_swap ;;
	"recompute receipt 2's hash after a change"*) echo port_reseal ;;
	"Craik's 'upsert keeps history' has no baton counterpart"*) echo port_upsert ;;
	"unredacted secret") echo case_secret ;;
	"hash depends on payload" | "link" | "tampered payload" | "broken link" | "upsert keeps history") echo unit ;;
	esac
}

test_expect_success 'the Craik receipt chain cases are readable' '
	test_path_is_file "$CASES" &&
	jq -e "(.cases | length) > 0 and (.baton_port | length) > 0" "$CASES"
'

while IFS= read -r what; do
	fn=$(craik_test "$what")
	case $fn in
	unit) continue ;;
	"") test_expect_success "craik: $what" 'echo "no test for this case" >&2 && false' ;;
	*) test_expect_success "craik: $what" "loop_config trusted-local && cd repo && $fn" ;;
	esac
done <<EOT
$(jq -r '(.cases[].name), .baton_port[]' "$CASES" 2>/dev/null)
EOT

test_done
