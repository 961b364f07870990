#!/bin/bash
test_description='notification formats: generic, Slack, Discord and ntfy, each in its service'"'"'s shape'
. "$(dirname "$0")/../lib/test-lib.sh"

# One receiver for every format (tests/lib/notify-receiver.py): it checks
# each POST against the service's published shape and writes one JSON
# line per POST to notes.log, with "ok" and the links it found.
python3 "$TEST_DIRECTORY/lib/notify-receiver.py" "$TRASH_DIRECTORY/notes.log" \
	"$TRASH_DIRECTORY/recv.port" >"$TRASH_DIRECTORY/recv.out" 2>&1 &
disown $!
wait_for "test -s '$TRASH_DIRECTORY/recv.port'" 10 || {
	cat "$TRASH_DIRECTORY/recv.out" >&2
	exit 1
}
RECV=http://127.0.0.1:$(cat "$TRASH_DIRECTORY/recv.port")
PUBLIC=https://baton.example.test/ci

# notes KIND: the receiver's lines for KIND as one JSON array
notes() {
	jq -s "map(select(.kind == \"$1\"))" "$TRASH_DIRECTORY/notes.log"
}

test_expect_success 'a question goes to each target in its format, with answer links' '
	make_repo a &&
	baton_init_with_agent a "policies: {require_approval_at_stages: [executing]}
server: {public_url: \"$PUBLIC/\"}
notify:
  webhooks:
    - {url: \"$RECV/generic/hook\", events: [approval_requested, run_terminal]}
  targets:
    - {url: \"$RECV/slack/T000/B000/XXXX\", format: slack, name: ops-slack}
    - {url: \"$RECV/discord/api/webhooks/1/tok\", format: discord, name: ops-discord}
    - {url: \"$RECV/ntfy/baton-gates\", format: ntfy}" &&
	cd a &&
	serve_http ../serve-a --workers 1 &&
	test_path_is_file .baton/answer.key &&
	test "$(stat -c %a .baton/answer.key)" = 600 &&
	bg_start ../run-a "$BATON" run "Gate <b>this</b> & that" &&
	id=$(wait_for_new_run "") &&
	wait_for_status "$id" waiting_for_approval &&
	wait_for "test \$(notes approval_requested | jq length) -ge 4" 30 &&
	notes approval_requested >../q.json &&
	test_jq "length == 4" ../q.json &&
	test_jq "all(.ok)" ../q.json &&
	test_jq "map(.format) | sort == [\"discord\", \"generic\", \"ntfy\", \"slack\"]" ../q.json &&
	# every format carries both answer links and the run, under public_url
	test_jq "all(.approve | startswith(\"$PUBLIC/api/v1/answers/\"))" ../q.json &&
	test_jq "all(.reject | startswith(\"$PUBLIC/api/v1/answers/\"))" ../q.json &&
	test_jq "all(.run == \"$PUBLIC/#/runs/$id\")" ../q.json &&
	test_jq "all(.approve != .reject)" ../q.json &&
	# the question, and Slack mrkdwn with its three characters escaped
	test_jq "map(select(.format == \"slack\"))[0].text | contains(\"&lt;b&gt;this&lt;/b&gt; &amp; that\")" ../q.json &&
	test_jq "all(.text | test(\"approval needed before stage .execute.\"; \"i\"))" ../q.json &&
	# the links of each target are its own (signed with its name)
	test_jq "map(.approve) | unique | length == 4" ../q.json
'

test_expect_success 'the end of the run goes out too, without answer links' '
	cd a &&
	id=$(newest_run) &&
	"$BATON" approvals approve "$id" >/dev/null &&
	test "$(bg_wait ../run-a 120)" = 0 &&
	wait_for "test \$(notes run_terminal | jq length) -ge 4" 30 &&
	notes run_terminal >../t.json &&
	test_jq "all(.ok)" ../t.json &&
	test_jq "all(.approve == null and .reject == null)" ../t.json &&
	test_jq "all(.run == \"$PUBLIC/#/runs/$id\")" ../t.json
'

test_expect_success 'without server.public_url messages carry no links, and no key is made' '
	make_repo b &&
	baton_init_with_agent b "policies: {require_approval_at_stages: [executing]}
notify:
  targets:
    - {url: \"$RECV/slack/nolinks\", format: slack}
    - {url: \"$RECV/ntfy/nolinks\", format: ntfy}" &&
	cd b &&
	serve_http ../serve-b --workers 1 &&
	bg_start ../run-b "$BATON" run "Unlinked gate" &&
	id=$(wait_for_new_run "") &&
	wait_for_status "$id" waiting_for_approval &&
	wait_for "test \$(jq -s \"map(select(.path | endswith(\\\"nolinks\\\")))|length\" ../notes.log) -ge 2" 30 &&
	jq -s "map(select(.path | endswith(\"nolinks\")))" ../notes.log >../b.json &&
	test_jq "all(.ok)" ../b.json &&
	test_jq "all(.approve == null and .run == null)" ../b.json &&
	test_path_is_missing .baton/answer.key &&
	"$BATON" abort "$id" >/dev/null
'

test_done
