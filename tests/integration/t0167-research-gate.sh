#!/bin/bash
test_description='the research quality gate before the judge: a claim from one domain is sent back to its researcher with the reason and then passes; a judge that says pass cannot carry claims the gate refuses; a bad profile is named'
. "$(dirname "$0")/../lib/test-lib.sh"

question='is write-ahead logging faster than a rollback journal'

# gate_run NAME [ENV=VALUE...]: a foreground research run in repo; its id
# to NAME.id, its output to NAME.out, its exit status to NAME.rc.
gate_run() {
	local name=$1 rc=0
	shift
	(cd repo && env "$@" "$BATON" run --pipeline research "$question") \
		>"$TRASH_DIRECTORY/$name.out" 2>&1 || rc=$?
	echo "$rc" >"$TRASH_DIRECTORY/$name.rc"
	(cd repo && newest_run) >"$TRASH_DIRECTORY/$name.id"
	test -s "$TRASH_DIRECTORY/$name.id"
}

gates_of() {
	"$BATON" events "$1" --json | jq -s '[.[] | select(.type == "quality_gate") | .data]'
}

test_expect_success 'setup: profile mid (two domains, counter-evidence)' '
	make_repo repo &&
	baton_init_with_agent repo "research: {quality_profile: mid}"
'

test_expect_success 'c2 from one domain is sent back with the reason, then passes' '
	gate_run weak FAKE_CLAIMS=2 FAKE_CHALLENGE=c1:low,c2:low \
		FAKE_DOMAINS=2 FAKE_DOMAINS_COLLECT_C2=1,2 &&
	test "$(cat weak.rc)" = 0 &&
	cd repo &&
	id=$(cat ../weak.id) &&
	test "$(run_status "$id")" = completed &&
	gates_of "$id" >../gates.json &&
	test_jq "length == 2" ../gates.json &&
	test_jq ".[0].pass == false and .[0].profile == \"mid\" and .[0].insufficient == [\"c2\"]" ../gates.json &&
	test_jq "[.[0].reasons[] | select(. == \"Claim c2 lacks source diversity (1/2).\")] | length == 1" ../gates.json &&
	test_jq ".[1].pass == true and .[1].round == 2" ../gates.json &&
	# the judge was asked once, after the gate passed
	test "$(grep -c "^judge " "$FAKE_STATE/$id.calls")" = 1 &&
	# only c2 went back, and its researcher read why
	test "$(grep -c "stage=collect-c1 " "$FAKE_STATE/$id.calls")" = 1 &&
	test "$(grep -c "stage=collect-c2 " "$FAKE_STATE/$id.calls")" = 2 &&
	test_grep "## Why the quality gate sent it back" "$FAKE_STATE/$id.stage-collect-c2.2.prompt" &&
	test_grep "Claim c2 lacks source diversity (1/2)" "$FAKE_STATE/$id.stage-collect-c2.2.prompt" &&
	! grep -q "Claim c1 " "$FAKE_STATE/$id.stage-collect-c2.2.prompt" &&
	test_path_is_file ".baton/runs/$id/evidence/c2-v2.json" &&
	test_path_is_missing ".baton/runs/$id/evidence/c1-v2.json"
'

test_expect_success 'a judge that says pass does not carry claims the gate refuses' '
	gate_run refuse FAKE_CLAIMS=2 FAKE_CHALLENGE=c1:low FAKE_DOMAINS=2 FAKE_JUDGE=pass &&
	test "$(cat refuse.rc)" != 0 &&
	cd repo &&
	id=$(cat ../refuse.id) &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = max_iterations_reached &&
	# the judge was never asked: every round stopped at the gate
	! grep -q "^judge " "$FAKE_STATE/$id.calls" &&
	gates_of "$id" >../gates.json &&
	test_jq "all(.[]; .pass == false and .challenge == [\"c2\"])" ../gates.json &&
	test_jq "[.[0].reasons[] | select(. == \"Claim c2 has no counter-evidence.\")] | length == 1" ../gates.json &&
	"$BATON" show "$id" >../show.txt &&
	test_grep "quality gate (mid) sends back" ../show.txt
'

test_expect_success 'a report that does not cite a claim sends it back' '
	gate_run uncited FAKE_CLAIMS=2 FAKE_CHALLENGE=c1:low,c2:low FAKE_DOMAINS=2 \
		FAKE_REPORT_SKIP=c2 &&
	test "$(cat uncited.rc)" = 0 &&
	cd repo &&
	id=$(cat ../uncited.id) &&
	gates_of "$id" >../gates.json &&
	test_jq ".[0].pass == false and .[0].insufficient == [\"c2\"]" ../gates.json &&
	test_jq ".[0].reasons == [\"Citation coverage is incomplete for 1 claim(s).\"]" ../gates.json &&
	test_jq ".[1].pass == true" ../gates.json &&
	test_grep "Citation coverage is incomplete" "$FAKE_STATE/$id.stage-collect-c2.2.prompt"
'

test_expect_success 'profile off: no gate; low: the fake agent passes' '
	cat >>repo/.baton/config.yaml <<-\EOF &&
	research: {quality_profile: "off"}
	EOF
	sed -i "/^research: {quality_profile: mid}/d" repo/.baton/config.yaml &&
	gate_run off FAKE_CLAIMS=1 &&
	test "$(cat off.rc)" = 0 &&
	id=$(cat off.id) &&
	(cd repo && gates_of "$id") >gates.json &&
	test_jq "length == 0" gates.json
'

test_expect_success 'an unknown profile is named with its place' '
	sed -i "s/^research: .*/research: {quality_profile: extreme}/" repo/.baton/config.yaml &&
	test_must_fail env -C repo "$BATON" run --pipeline research "$question" 2>err &&
	test_grep "config.yaml:[0-9]*:[0-9]*: research.quality_profile" err &&
	test_grep "extreme" err
'

test_done
