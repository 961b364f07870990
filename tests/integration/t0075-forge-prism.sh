#!/bin/bash
test_description='the GitHub client and the forge double, checked by Prism against GitHub'"'"'s own OpenAPI description'
. "$(dirname "$0")/../lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/forge.sh"

# What Prism is for: each request of src/forge/github.h's wrappers and
# each answer of tests/mock/forgedouble.py goes through `prism proxy
# --errors` with api.github.com.json, and any violation fails the call
# (422 for the request, 500 for the answer) and so the test.
need_prism

UNIT_DIR=${UNIT_DIR:-$BATON_SRC_ROOT/build/tests}
T_GITHUB=$UNIT_DIR/t_github
start_forge_double || exit 1

test_expect_success 't_github is built' '
	test -x "$T_GITHUB"
'

test_expect_success 'every wrapper of the client, through Prism, with no violation' '
	"$T_GITHUB" every_wrapper_against_forge_url >out 2>&1 || {
		cat out
		forge_violations
		false
	} &&
	test_grep "^1 passed, 0 failed" out &&
	forge_no_violations
'

test_expect_success 'GitHub'"'"'s error answers (422, 404, a 403 rate limit) pass Prism' '
	"$T_GITHUB" error_answers_against_forge_url >out 2>&1 || {
		cat out
		forge_violations
		false
	} &&
	test_grep "^1 passed, 0 failed" out
'

test_expect_success 'the calls went through Prism to the double' '
	forge_requests >requests.json &&
	for want in "GET /repos/acme/app/issues?" "POST /repos/acme/app/pulls" \
		"PUT /repos/acme/app/pulls/" "GET /repos/acme/app/commits/"; do
		jq -r ".[] | \"\(.method) \(.path)\"" requests.json >lines &&
		grep -qF "$want" lines || { echo "no $want"; false; }
	done &&
	grep -q "Forwarding \"post\" request to .*/repos/acme/app/pulls" "$FORGE_PRISM_LOG"
'

test_expect_success 'a request GitHub would refuse is a 422 from Prism' '
	curl -s -o body -w "%{http_code}" -X POST \
		-H "Authorization: Bearer $FORGE_TOKEN" \
		-H "Content-Type: application/json" \
		--data "{\"text\": \"no body field\"}" \
		"$FORGE_URL/repos/acme/app/issues/1/comments" >status &&
	test "$(cat status)" = 422 &&
	jq -r ".validation[0].message" body >msg &&
	test_grep "required property .body." msg
'

# The checks are real: an answer missing what GitHub always sends fails
# each wrapper. (Prism drops a schema it cannot compile without a word;
# this is what shows tests/mock/openapi_for_prism.py made every schema
# the wrappers meet compile.)
for call in issues_with_label issue_get issue_comment pull_create pull_get \
	pulls_for_head pull_reviews pull_review_comments statuses \
	combined_status check_runs pull_merge labels_add; do
	test_expect_success "an answer without its required field fails $call" "
		\"\$T_GITHUB\" corrupt_answer_fails_$call >out 2>&1 || {
			cat out
			false
		} &&
		test_grep '^1 passed, 0 failed' out
	"
done

# baton itself: `baton forge sync` through Prism, and its request log.
export GITHUB_TOKEN=$FORGE_TOKEN

test_expect_success 'baton forge sync through Prism: issues in, no violation' '
	forge_mark &&
	make_repo repo &&
	baton_init_with_agent repo "runtime: {judge: false}
forge:
  type: github
  repo: acme/app
  token_env: GITHUB_TOKEN
  api_url: $FORGE_URL
  intake: {label: synced}" &&
	for i in 1 2 3; do
		forge_double issue "{\"title\": \"Synced $i\", \"body\": \"b\", \"labels\": [\"synced\", \"priority:2\"]}" >/dev/null || return 1
	done &&
	(cd repo && "$BATON" forge sync >../sync1.out 2>&1 &&
		"$BATON" forge sync >../sync2.out 2>&1 &&
		"$BATON" task list --json >../tasks.json) || {
		cat sync1.out sync2.out
		forge_violations
		false
	} &&
	test_jq "[.[] | select(.title | startswith(\"Synced \"))] | length == 3" tasks.json &&
	forge_no_violations
'

test_expect_success 'the sync kept its requests in a private, redacted log' '
	ls repo/.baton/forge/log-*.jsonl >logs &&
	test_line_count = 1 logs &&
	log=$(cat logs) &&
	test "$(stat -c %a "$log")" = 600 &&
	test "$(stat -c %a repo/.baton/forge)" = 700 &&
	! grep -F "$GITHUB_TOKEN" "$log" &&
	test_grep "Bearer \[redacted:GITHUB_TOKEN\]" "$log" &&
	jq -r "select(.method == \"GET\") | .path" "$log" >paths &&
	test_grep "^/repos/acme/app/issues$" paths &&
	jq -s "map(select(.status == 304)) | length" "$log" >n304 &&
	test "$(cat n304)" -ge 1
'

test_expect_success 'the double keeps its control endpoints' '
	forge_double issue "{\"title\": \"x\", \"labels\": [\"baton\"]}" >issue.json &&
	test_jq ".number > 0" issue.json &&
	jq -r ".labels[0].name" issue.json >name &&
	test_grep baton name
'

test_done
