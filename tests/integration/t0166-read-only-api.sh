#!/bin/bash
test_description='read-only tasks over the API: "read_only": true picks plan-only, a pipeline that edits is refused with 400, and the task runs to completed without an edit'
. "$(dirname "$0")/../lib/test-lib.sh"

test_expect_success 'setup: serve with one worker' '
	make_repo a &&
	baton_init_with_agent a "runtime: {judge: false}" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1
'

# each test runs in a fresh subshell: read the address back
load_http() {
	cd "$TRASH_DIRECTORY/a" &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	HTTP_PORT=${HTTP_URL##*:} &&
	HTTP_TOKEN=$(cat .baton/token)
}

test_expect_success '"read_only": true with an editing pipeline is refused' '
	load_http &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"Audit\", \"read_only\": true, \"pipeline\": \"feature\"}" >r &&
	test_grep "a read-only task needs a read-only pipeline, and .feature. may edit the worktree" r &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"Audit\", \"read_only\": \"yes\"}" >r2 &&
	test_grep "read_only. must be true or false" r2
'

test_expect_success '"read_only": true runs plan-only and ends completed with no edit' '
	load_http &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Audit the CLI\", \"read_only\": true}" >t &&
	test "$(jq -r .pipeline t)" = plan-only &&
	wait_for "\"$BATON\" status --json | jq -e \".[] | select(.status == \\\"completed\\\")\" >/dev/null" 60 &&
	id=$("$BATON" status --json | jq -r ".[] | select(.status == \"completed\") | .id" | head -n 1) &&
	test "$(run_field "$id" pipeline)" = plan-only &&
	base=$(run_field "$id" base_commit) &&
	test "$(git rev-parse "baton/$id")" = "$base"
'

test_done
