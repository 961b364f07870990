#!/bin/bash
test_description='gate decisions have one spelling (src/core/gate.c): the CLI and the API take the same words and aliases, refuse others naming them, and the event records the canonical spelling'
. "$(dirname "$0")/../lib/test-lib.sh"

gate='policies: {require_approval_at_stages: [executing]}'

# The decisions recorded on run $1, one a line, in order: the decision of
# each transition out of waiting_for_approval.
decisions() {
	"$BATON" events "$1" --json |
		jq -r 'select(.type == "transition" and .from == "waiting_for_approval") | .data.decision'
}

# Waits until run $1 has stood at the gate $2 times and stands there now.
wait_at_gate() {
	wait_for "test \"\$(transitions $1 | grep -c \"^waiting_for_approval\$\")\" = $2" &&
		wait_for "test \"\$(run_status $1)\" = waiting_for_approval"
}

test_expect_success 'setup: a run waits at the gate into executing' '
	make_repo d &&
	baton_init_with_agent d "$gate" &&
	cd d &&
	bg_start "$TRASH_DIRECTORY/d" "$BATON" run "Gate words" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	newest_run >../d.id &&
	wait_at_gate "$(cat ../d.id)" 1
'

test_expect_success 'the CLI refuses a word that is no decision, naming it and the list' '
	cd d &&
	id=$(cat ../d.id) &&
	for w in approved Approve request_change changes; do
		test_expect_code 2 "$BATON" approvals "$w" "$id" --guidance x 2>../err &&
		test_grep -F "baton: '"'"'$w'"'"' is not a gate decision: approve, reject, request-changes, revise or defer" ../err &&
		test_grep "usage: baton approvals" ../err || exit 1
	done &&
	test "$(run_status "$id")" = waiting_for_approval &&
	decisions "$id" >../none &&
	test_line_count = 0 ../none
'

test_expect_success 'the CLI takes the alias request_changes and records request-changes' '
	cd d &&
	id=$(cat ../d.id) &&
	"$BATON" approvals request_changes "$id" --guidance "smaller steps" >../rc.out &&
	test_grep "$id: architecting" ../rc.out &&
	wait_at_gate "$id" 2 &&
	decisions "$id" >../actual &&
	echo request-changes >../expect &&
	test_cmp ../expect ../actual &&
	test_grep "smaller steps" "$FAKE_STATE/$id.architect.2.prompt"
'

test_expect_success 'the API refuses the same words and takes the same alias' '
	cd d &&
	id=$(cat ../d.id) &&
	serve_http "$TRASH_DIRECTORY/serve-d" --workers 1 &&
	api_expect 400 POST "/api/v1/approvals/$id" "{\"decision\": \"approved\"}" >../e1 &&
	test_jq ".error.message == \"\\\"decision\\\": '"'"'approved'"'"' is not a gate decision: approve, reject, request-changes, revise or defer\"" ../e1 &&
	api_expect 400 POST "/api/v1/approvals/$id" "{}" >../e2 &&
	test_jq ".error.message | contains(\"no gate decision: approve, \")" ../e2 &&
	test "$(run_status "$id")" = waiting_for_approval &&
	api_expect 200 POST "/api/v1/approvals/$id" "{\"decision\": \"request_changes\", \"guidance\": \"one more\"}" >../r &&
	wait_at_gate "$id" 3 &&
	decisions "$id" >../actual &&
	printf "%s\n" request-changes request-changes >../expect &&
	test_cmp ../expect ../actual
'

test_expect_success 'approve over the API: the run finishes and every decision is spelled once' '
	cd d &&
	id=$(cat ../d.id) &&
	HTTP_URL=$(sed "s|/\$||" .baton/http.url) HTTP_TOKEN=$(cat .baton/token) &&
	api_expect 200 POST "/api/v1/approvals/$id" "{\"decision\": \"approve\"}" >/dev/null &&
	rc=$(bg_wait ../d) &&
	test "$rc" = 0 &&
	decisions "$id" >../actual &&
	printf "%s\n" request-changes request-changes approve >../expect &&
	test_cmp ../expect ../actual
'

test_done
