#!/bin/bash
test_description='the live protocol: the five message sequences of OpenViber (protocol-messages.json) replayed against baton serve over its WebSocket, each answer asserted in order'
. "$(dirname "$0")/../lib/test-lib.sh"

# The replay client (python3, the standard library only): one scenario a
# call, "ok: ..." a check that held, "FAIL: ..." with the messages seen
# when one did not.
REPLAY=$BATON_SRC_ROOT/tests/lib/protoreplay.py

# the fake agent is no judge: a task ends done at merge_ready
nojudge='runtime: {judge: false}'

# start_repo NAME EXTRA_YAML: a repository with its serve (one worker)
start_repo() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "$nojudge
$2" &&
	(cd "$1" && serve_http "$TRASH_DIRECTORY/serve-$1" --workers 1)
}

# replay REPO SCENARIO [ARG...]: the scenario against REPO's serve
replay() {
	local repo=$1 url port token
	shift
	url=$(sed "s|/$||" "$TRASH_DIRECTORY/$repo/.baton/http.url") &&
	port=${url##*:} &&
	token=$(cat "$TRASH_DIRECTORY/$repo/.baton/token") &&
	python3 "$REPLAY" "$port" "$token" "$@"
}

test_expect_success 'setup: four repositories, each with its serve' '
	start_repo quick "" &&
	# the agent of held stays in its first execute call until the file
	# "go" appears in the run'"'"'s worktree (never, here)
	(export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_WAIT_FOR=go &&
	 start_repo held "") &&
	start_repo gate "policies: {require_approval_at_stages: [executing]}" &&
	start_repo timeout "policies: {require_approval_at_stages: [executing], approval_timeout_seconds: 2}"
'

test_expect_success '1: task:submit, task:started, task:progress*, task:completed' '
	replay quick completed >out && rc=0 || rc=$?; cat out; test $rc = 0 &&
	test_grep "ok: task:started, task:progress x[1-9]" out
'

test_expect_success '2: task:submit, task:started, task:stop, task:stopped' '
	replay held stopped "$TRASH_DIRECTORY/held/.baton/never" >out && rc=0 || rc=$?; cat out; test $rc = 0 &&
	test_grep "ok: task:stopped" out &&
	id=$(cd held && "$BATON" task list --json | jq "[.[] | select(.title == \"Sequence two\")][0].id") &&
	(cd held && "$BATON" task list --json) | jq -e "[.[] | select(.id == $id)][0].status == \"cancelled\"" >/dev/null
'

test_expect_success '3: task:submit (key K) twice while it runs: already_running, the first task, no second' '
	replay held already-running "key-K-$$" >out && rc=0 || rc=$?; cat out; test $rc = 0 &&
	test_grep "ok: repeat: already_running" out &&
	test_grep "ok: HTTP Idempotency-Key: 409" out &&
	(cd held && "$BATON" task list --json) |
		jq -e "[.[] | select(.title == \"Sequence three\")] | length == 1" >/dev/null
'

test_expect_success '4: task:submit, approval:requested, approval:response approved=false: blocked' '
	replay gate rejected >out && rc=0 || rc=$?; cat out; test $rc = 0 &&
	test_grep "ok: approval:decided approved=false: the run is blocked" out &&
	(cd gate && "$BATON" events --all --json) >ev &&
	jq -s -e "any(.[]; .type == \"transition\" and .from == \"waiting_for_approval\" and .to == \"blocked\" and .data.decision == \"reject\")" ev >/dev/null
'

test_expect_success '5: approval:requested with timeout_ms, no answer: approval_timeout, rejected' '
	replay timeout timeout 2000 >out && rc=0 || rc=$?; cat out; test $rc = 0 &&
	test_grep "ok: no answer: approval:timeout" out &&
	(cd timeout && "$BATON" events --all --json) >ev &&
	jq -s -e "any(.[]; .type == \"approval_timeout\" and .data.timeout_seconds == 2)" ev >/dev/null
'

test_expect_success 'connection:welcome, health:ping and health:status' '
	replay quick health >out && rc=0 || rc=$?; cat out; test $rc = 0 &&
	test_grep "ok: health:status" out
'

test_done
