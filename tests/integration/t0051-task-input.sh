#!/bin/bash
test_description='task input is checked where it comes in (task add, baton run, the API): text over the named limit and areas outside the repository are refused, a body with a key twice is refused; a task just under the limit runs'
. "$(dirname "$0")/../lib/test-lib.sh"

nojudge='runtime: {judge: false}'

# text N: N bytes of a task title (no newline)
text() {
	head -c "$1" /dev/zero | tr '\0' x
}

test_expect_success 'task add: a title or body over 64 KiB is refused, naming the limit and the size' '
	make_repo a &&
	baton_init_with_agent a "$nojudge" &&
	cd a &&
	test_must_fail "$BATON" task add "$(text 128000)" >../big.out 2>../big.err &&
	test_grep "task text is 128000 bytes, over the limit of 65536 bytes (64 KiB)" ../big.err &&
	test_must_fail "$BATON" task add "short" --body "$(text 70000)" >../body.out 2>../body.err &&
	test_grep "task text is 70007 bytes, over the limit of 65536" ../body.err &&
	"$BATON" task list --json >../list.json &&
	test_jq "length == 0" ../list.json
'

test_expect_success 'baton run: text over 64 KiB is refused before a run is made' '
	cd a &&
	test_must_fail "$BATON" run "$(text 128000)" >../run.out 2>../run.err &&
	test_grep "task text is 128000 bytes, over the limit of 65536 bytes (64 KiB)" ../run.err &&
	test -z "$(ls .baton/runs)"
'

test_expect_success 'a task just under the limit runs to the end (its text is in the checkpoint commit and BATON_TASK)' '
	cd a &&
	"$BATON" run "$(text 65000)" >../near.out 2>&1 &&
	run=$(newest_run) &&
	test "$(run_status $run)" = merge_ready &&
	git log -1 --format=%B "baton/$run" >../msg &&
	test_grep "^Task: xxxx" ../msg
'

test_expect_success 'task add: an area outside the repository is refused; one inside is normalised' '
	cd a &&
	test_must_fail "$BATON" task add "abs" --area /etc >/dev/null 2>../abs.err &&
	test_grep "area ./etc. must be a path inside the repository" ../abs.err &&
	test_must_fail "$BATON" task add "up" --area ../x >/dev/null 2>../up.err &&
	test_grep "area .\.\./x. must be a path inside the repository" ../up.err &&
	test_must_fail "$BATON" task add "up" --area src/../.. >/dev/null 2>../up2.err &&
	"$BATON" task add "fine" --area ./src//cli/ --json >../fine.json &&
	test_jq ".area == \"src/cli\"" ../fine.json &&
	"$BATON" task list --json >../list.json &&
	test_jq "length == 1" ../list.json
'

test_expect_success 'the API refuses oversized text, areas outside the repository and keys given twice (400), and adds nothing' '
	cd a &&
	"$BATON" task cancel t1 >/dev/null &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	{ printf "{\"title\": \"" && text 200000 && printf "\"}"; } >../huge.json &&
	curl -s -o ../huge.out -w "%{http_code}" -X POST \
		-H "Authorization: Bearer $HTTP_TOKEN" \
		-H "Content-Type: application/json" \
		--data-binary @../huge.json "$HTTP_URL/api/v1/tasks" >../huge.status &&
	test "$(cat ../huge.status)" = 400 &&
	test_jq ".error.message | test(\"task text is 200000 bytes, over the limit of 65536 bytes\")" ../huge.out &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"area\": \"/etc\"}" >../e &&
	test_jq ".error.message | test(\"area ./etc. must be a path inside the repository\")" ../e &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"area\": \"../x\"}" >../e &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"title\": \"y\"}" >../e &&
	test_jq ".error.message | test(\"key .title. more than once\")" ../e &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"area\": \"a\", \"area\": \"/etc\"}" >../e &&
	test_jq ".error.message | test(\"area\")" ../e &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$HTTP_TOKEN" \
		--send "{\"type\": \"task:submit\", \"id\": \"c1\", \"task\": {\"title\": \"a\", \"title\": \"b\"}}" \
		--until "\"type\":\"ack\"" --timeout 10 >../ws &&
	grep "\"type\":\"ack\"" ../ws >../ack &&
	test_jq ".ok == false and (.error.message | test(\"key .title. more than once\"))" ../ack &&
	api_expect 200 GET /api/v1/tasks >../list &&
	test_jq ".tasks | length == 1" ../list
'

test_done
