#!/bin/bash
test_description='forge intake: labelled GitHub issues become tasks exactly once (baton forge sync against the GitHub double)'
. "$(dirname "$0")/../lib/test-lib.sh"

export GITHUB_TOKEN=ghp_t0061secretTOKENvalue0123456789
start_forge_double gh --token "$GITHUB_TOKEN" || exit 1

# forge_repo DIR [EXTRA_FORGE_YAML]: a repository whose forge is the double
forge_repo() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "runtime: {judge: false}
forge:
  type: github
  repo: acme/app
  token_env: GITHUB_TOKEN
  api_url: $FORGE_URL
  intake: {label: baton}
  poll_seconds: 1${2:-}"
}

# new_issue TITLE BODY LABELS_JSON: an issue on the double; prints its number
new_issue() {
	forge_call POST /_double/issue \
		"$(jq -nc --arg t "$1" --arg b "$2" --argjson l "$3" \
			'{title: $t, body: $b, labels: $l}')" | jq -r .number
}

# tasks_of ISSUE_TITLE: how many tasks have that title
tasks_titled() {
	"$BATON" task list --json | jq --arg t "$1" '[.[] | select(.title == $t)] | length'
}

test_expect_success 'setup' '
	forge_repo repo
'

test_expect_success 'a labelled issue becomes one task after three syncs' '
	n=$(new_issue "Add a --version flag" "Print the version and exit." "[\"baton\"]") &&
	new_issue "Not for baton" "no label" "[\"bug\"]" >/dev/null &&
	(
		cd repo &&
		"$BATON" forge sync >../sync1.out &&
		"$BATON" forge sync >../sync2.out &&
		"$BATON" forge sync >../sync3.out &&
		test "$(tasks_titled "Add a --version flag")" = 1 &&
		test "$(tasks_titled "Not for baton")" = 0 &&
		"$BATON" task list --json >../tasks.json
	) &&
	test_grep "imported 1" sync1.out &&
	test_grep "imported 0" sync2.out &&
	test_grep "imported 0" sync3.out &&
	test_jq ".[0].status == \"queued\" and .[0].origin == \"issue\" and .[0].body == \"Print the version and exit.\"" tasks.json &&
	(cd repo && "$BATON" task show 1 --json) >show.json &&
	test_jq ".forge.issue == $n and .forge.repo == \"acme/app\" and (.forge.issue_url | endswith(\"/acme/app/issues/$n\"))" show.json
'

test_expect_success 'the task went through blocked(issue_linking) to queued, with events' '
	(cd repo && "$BATON" events --task 1 --json) >ev.json &&
	jq -r .type ev.json >types &&
	test_grep -x task_added types &&
	test_grep -x task_linked types &&
	test_jq "select(.type == \"task_linked\") | .data.issue == 1" ev.json
'

test_expect_success 'the listing unchanged: the next sync is one conditional request' '
	forge_call GET /_double/requests >before.json &&
	(cd repo && "$BATON" forge sync >../sync4.out) &&
	forge_call GET /_double/requests >after.json &&
	jq "length" before.json >nb &&
	jq --argjson n "$(cat nb)" "[.[\$n:][] | select(.path | startswith(\"/_double\") | not)]" after.json >new.json &&
	test_jq "length == 1 and .[0].status == 304" new.json &&
	test_grep "listing is unchanged" sync4.out &&
	(cd repo && "$BATON" forge sync --json) >sync5.json &&
	test_jq ".repo == \"acme/app\" and .unchanged == true and .imported == 0 and .calls == 1" sync5.json
'

test_expect_success 'two syncs racing make one task of an issue' '
	new_issue "Race me" "two syncs at once" "[\"baton\"]" >/dev/null &&
	(
		cd repo &&
		{ "$BATON" forge sync >../race1.out 2>&1 & p1=$!; } &&
		{ "$BATON" forge sync >../race2.out 2>&1 & p2=$!; } &&
		wait $p1 && wait $p2 &&
		test "$(tasks_titled "Race me")" = 1
	) &&
	cat race1.out race2.out >race.out &&
	test_grep "imported 1" race.out
'

test_expect_success 'priority and area labels; bad ones are told on the issue, the issue imported anyway' '
	n=$(new_issue "Labelled" "x" "[\"baton\", \"priority:7\", \"area:src//export/\"]") &&
	m=$(new_issue "Badly labelled" "y" "[\"baton\", \"priority:high\", \"area:../etc\"]") &&
	(cd repo && "$BATON" forge sync >/dev/null && "$BATON" task list --json) >labels.json &&
	test_jq "[.[] | select(.title == \"Labelled\")][0] | .priority == 7 and .area == \"src/export\"" labels.json &&
	test_jq "[.[] | select(.title == \"Badly labelled\")][0] | .priority == 0 and .area == null" labels.json &&
	forge_call GET "/repos/acme/app/issues/$m/comments" >comments.json &&
	test_jq "length == 1" comments.json &&
	jq -r ".[0].body" comments.json >comment.txt &&
	test_grep "priority:high" comment.txt &&
	test_grep "area:../etc" comment.txt &&
	forge_call GET "/repos/acme/app/issues/$n/comments" >none.json &&
	test_jq "length == 0" none.json
'

test_expect_success 'closing an issue, or taking its label off, cancels its task that has not run' '
	a=$(new_issue "Close me" "c" "[\"baton\"]") &&
	b=$(new_issue "Unlabel me" "u" "[\"baton\", \"priority:1\"]") &&
	(cd repo && "$BATON" forge sync >/dev/null) &&
	forge_call PATCH "/repos/acme/app/issues/$a" "{\"state\": \"closed\"}" >/dev/null &&
	forge_call PATCH "/repos/acme/app/issues/$b" "{\"labels\": [\"priority:1\"]}" >/dev/null &&
	(cd repo && "$BATON" forge sync >../cancel.out && "$BATON" task list --json) >cancel.json &&
	test_grep "cancelled 2" cancel.out &&
	test_jq "[.[] | select(.title == \"Close me\")][0] | .status == \"cancelled\" and (.reason | test(\"issue #$a was closed\"))" cancel.json &&
	test_jq "[.[] | select(.title == \"Unlabel me\")][0] | .status == \"cancelled\" and (.reason | test(\"issue #$b lost the label\"))" cancel.json &&
	test_jq "[.[] | select(.title == \"Race me\")][0] | .status == \"queued\"" cancel.json
'

test_expect_success 'an issue body of 1 MB is cut to fit, with a note that says so' '
	head -c 1048576 /dev/zero | tr "\0" "a" >big.txt &&
	printf "THE-END" >>big.txt &&
	jq -nc --rawfile b big.txt "{title: \"Huge\", body: (\"THE-START \" + \$b), labels: [\"baton\"]}" >big.json &&
	curl -sS -X POST --data @big.json "$FORGE_URL/_double/issue" >/dev/null &&
	(cd repo && "$BATON" forge sync >/dev/null && "$BATON" task list --json) >big-tasks.json &&
	jq -r "[.[] | select(.title == \"Huge\")][0].body" big-tasks.json >body.txt &&
	test $(wc -c <body.txt) -le 65536 &&
	test_grep "^THE-START" body.txt &&
	test_grep "THE-END" body.txt &&
	test_grep "bytes cut here: a task.s text is at most 64 KiB" body.txt
'

test_expect_success 'an issue whose text is not UTF-8 (a NUL) is refused by name; the others come in' '
	curl -sS -X POST --data "{\"title\": \"Has a NUL\", \"body\": \"a\\u0000b\", \"labels\": [\"baton\"]}" \
		"$FORGE_URL/_double/issue" | jq -r .number >nul.num &&
	new_issue "Beside the NUL" "fine" "[\"baton\"]" >/dev/null &&
	(cd repo && "$BATON" forge sync >../nul.out 2>../nul.err && "$BATON" task list --json) >nul-tasks.json &&
	test_grep "refused 1" nul.out &&
	test_grep "issue #$(cat nul.num): its body is not UTF-8 text (byte 1 of 3): not imported" nul.err &&
	test_jq "[.[] | select(.title == \"Has a NUL\")] | length == 0" nul-tasks.json &&
	test_jq "[.[] | select(.title == \"Beside the NUL\")] | length == 1" nul-tasks.json &&
	# the listing is as the sync left it (its ETag kept): the backlog
	# still counts the refused issue, asking in full
	(cd repo && "$BATON" doctor --quick >../nul-doctor.out 2>&1 || true) &&
	test_grep "Issue backlog detected (1)" nul-doctor.out &&
	forge_call PATCH "/repos/acme/app/issues/$(cat nul.num)" "{\"state\": \"closed\"}" >/dev/null
'

test_expect_success 'an intake that fails writes nothing, and the next sync makes the task (the ETag was not kept)' '
	new_issue "Fails once" "f" "[\"baton\"]" >/dev/null &&
	(
		cd repo &&
		# the first write of the sync: the intake of the new issue (the
		# issues linked already are passed over)
		test_must_fail env BATON_FAULT_STORE=1 "$BATON" forge sync 2>../fault1.err &&
		test "$(tasks_titled "Fails once")" = 0 &&
		"$BATON" forge sync >../fault1.out &&
		test "$(tasks_titled "Fails once")" = 1
	) &&
	test_grep "injected fault" fault1.err &&
	test_grep "imported 1" fault1.out
'

test_expect_success 'a failure between the intake and the queueing leaves the task blocked(issue_linking); the next sync queues it' '
	new_issue "Half linked" "h" "[\"baton\"]" >/dev/null &&
	(
		cd repo &&
		# the second: its queueing
		test_must_fail env BATON_FAULT_STORE=2 "$BATON" forge sync 2>../fault2.err &&
		"$BATON" task list --json >../half.json &&
		"$BATON" forge sync >../relink.out &&
		"$BATON" task list --json >../relinked.json
	) &&
	test_grep "injected fault" fault2.err &&
	test_jq "[.[] | select(.title == \"Half linked\")] | length == 1 and .[0].status == \"blocked\" and .[0].block_reason == \"issue_linking\"" half.json &&
	test_grep "linked 1" relink.out &&
	test_jq "[.[] | select(.title == \"Half linked\")] | length == 1 and .[0].status == \"queued\"" relinked.json
'

test_expect_success 'a rate limit GitHub asks to wait out for an hour: forge sync fails, saying so' '
	forge_call POST /_double/fail "{\"kind\": \"primary\", \"count\": 1}" >/dev/null &&
	(cd repo && test_must_fail "$BATON" forge sync 2>../rate.err) &&
	test_grep "primary rate limit" rate.err &&
	test_grep "GET /repos/acme/app/issues: 403" rate.err
'

test_expect_success 'a missing token names the variable' '
	(
		cd repo &&
		unset GITHUB_TOKEN &&
		test_must_fail "$BATON" forge sync 2>../notoken.err
	) &&
	test_grep "GITHUB_TOKEN" notoken.err &&
	test_grep "forge.token_env" notoken.err
'

test_expect_success 'a wrong token: GitHub refuses it, said with the endpoint' '
	(
		cd repo &&
		GITHUB_TOKEN=nope test_must_fail "$BATON" forge sync 2>../badtoken.err
	) &&
	test_grep "GET /repos/acme/app/issues: 401 Bad credentials" badtoken.err
'

test_expect_success 'a repository that does not exist names the endpoint' '
	forge_repo ghost &&
	sed -i "s|repo: acme/app|repo: acme/ghost|" ghost/.baton/config.yaml &&
	(cd ghost && test_must_fail "$BATON" forge sync 2>../ghost.err) &&
	test_grep "GET /repos/acme/ghost/issues: 404 Not Found" ghost.err
'

test_expect_success 'without a forge: section, forge sync says how to configure one' '
	make_repo plain &&
	baton_init_with_agent plain &&
	(cd plain && test_must_fail "$BATON" forge sync 2>../plain.err) &&
	test_grep "the forge is not configured" plain.err
'

test_expect_success 'the request log is kept under .baton/forge, with the token redacted' '
	ls repo/.baton/forge/log-*.jsonl >logs &&
	test_line_count = 1 logs &&
	test_grep "/repos/acme/app/issues" $(cat logs)
'

test_expect_success 'the token is in no file under .baton, no event and no log' '
	! grep -rlF "$GITHUB_TOKEN" repo/.baton ghost/.baton &&
	(cd repo && "$BATON" events --all --json) >all-events.json &&
	! grep -F "$GITHUB_TOKEN" all-events.json &&
	! grep -F "$GITHUB_TOKEN" *.out *.err
'

test_expect_success 'doctor and the start-up rules: the issue backlog is counted' '
	new_issue "Backlog one" "b" "[\"baton\"]" >/dev/null &&
	new_issue "Backlog two" "b" "[\"baton\"]" >/dev/null &&
	(cd repo && "$BATON" doctor --quick >../doctor.out 2>&1 || true) &&
	test_grep "Issue backlog detected (2)" doctor.out &&
	test_grep "Planner is skipped for this launch" doctor.out &&
	(cd repo && "$BATON" forge sync >/dev/null && "$BATON" doctor --quick >../doctor2.out 2>&1 || true) &&
	! grep -q "Issue backlog detected" doctor2.out &&
	test_grep "the planner may start" doctor2.out
'

test_done
