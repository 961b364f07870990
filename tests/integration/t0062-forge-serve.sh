#!/bin/bash
test_description='serve runs the forge companion: issues come in without forge sync, and hear when their run starts and ends'
. "$(dirname "$0")/../lib/test-lib.sh"

export GITHUB_TOKEN=ghp_t0062secretTOKENvalue9876543210
start_forge_double gh --token "$GITHUB_TOKEN" --remote "$TRASH_DIRECTORY/remote.git" || exit 1

new_issue() {
	forge_call POST /_double/issue \
		"$(jq -nc --arg t "$1" --arg b "$2" --argjson l "$3" \
			'{title: $t, body: $b, labels: $l}')" | jq -r .number
}

# forge_procs: the pids of this script's live "baton forge" processes
forge_procs() {
	local f d
	for f in /proc/[0-9]*/comm; do
		[ "$(cat "$f" 2>/dev/null)" = "baton forge" ] || continue
		d=${f%/comm}
		grep -qzxF "TRASH_DIRECTORY=$TRASH_DIRECTORY" "$d/environ" 2>/dev/null &&
			echo "${d#/proc/}"
	done
	return 0
}

# listings: how many times the double was asked for the issue listing
listings() {
	forge_call GET /_double/requests |
		jq "[.[] | select(.path | startswith(\"/repos/acme/app/issues?\"))] | length"
}

# task_status TITLE: the status of the task of that title, or nothing
task_status() {
	"$BATON" task list --json | jq -r --arg t "$1" '.[] | select(.title == $t) | .status'
}

# with_pr TITLE: whether the task of that title finished and waits on its
# pull request, opened (forge/pr.c: a forge task ends there, not done)
with_pr() {
	"$BATON" task list --json |
		jq -e --arg t "$1" '.[] | select(.title == $t) |
			.block_reason == "pull_request" and .forge.pr != null' >/dev/null
}

# The agent: the fake agent, after it wrote its environment down.
cat >"$TRASH_DIRECTORY/env-agent" <<EOF
#!/bin/sh
env >"\$(mktemp "$FAKE_STATE/agent-env.XXXXXX")"
exec "$FAKE_AGENT" "\$@"
EOF
chmod +x "$TRASH_DIRECTORY/env-agent"

test_expect_success 'setup' '
	make_repo repo &&
	git clone -q --bare repo remote.git &&
	git -C repo remote add origin "$TRASH_DIRECTORY/remote.git" &&
	baton_init_with_agent repo "providers:
  fake: {type: command, command: [\"$TRASH_DIRECTORY/env-agent\"]}
runtime: {judge: false}
forge:
  type: github
  repo: acme/app
  token_env: GITHUB_TOKEN
  api_url: $FORGE_URL
  intake: {label: baton}
  poll_seconds: 1"
'

test_expect_success 'serve says the issue backlog and that the planner is skipped' '
	new_issue "Add a greeting file" "Write hello.txt." "[\"baton\"]" >num &&
	cd repo &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_WAIT_FOR="$FAKE_STATE/go" \
		bg_start "$TRASH_DIRECTORY/serve" "$BATON" serve &&
	wait_for "grep -q \"Planner is skipped for this launch\" \"$TRASH_DIRECTORY/serve.out\"" 30 &&
	test_grep "serve: forge acme/app" "$TRASH_DIRECTORY/serve.out" &&
	test_grep "Issue backlog detected (1)" "$TRASH_DIRECTORY/serve.out"
'

test_expect_success 'the companion imports the issue without forge sync; the issue hears that its run started' '
	n=$(cat num) &&
	(
		cd repo &&
		wait_for "test \"\$(task_status \"Add a greeting file\")\" = running" 30
	) &&
	wait_for "forge_call GET /repos/acme/app/issues/$n/comments | jq -e \"length == 1\"" 30 &&
	forge_call GET "/repos/acme/app/issues/$n/comments" >started.json &&
	test_jq ".[0].body | test(\"started run .r1-\")" started.json
'

test_expect_success 'the run ends: the issue is told once, with the status' '
	n=$(cat num) &&
	touch "$FAKE_STATE/go" &&
	(
		cd repo &&
		wait_for "with_pr \"Add a greeting file\"" 120
	) &&
	wait_for "forge_call GET /repos/acme/app/issues/$n/comments | jq -e \"length == 2\"" 30 &&
	forge_call GET "/repos/acme/app/issues/$n/comments" >comments.json &&
	test_jq "[.[] | select(.body | test(\"ended\"))] | length == 1" comments.json &&
	test_jq "[.[] | select(.body | test(\"started\"))] | length == 1" comments.json &&
	jq -r "[.[] | select(.body | test(\"ended\"))][0].body" comments.json >ended.txt &&
	test_grep "the task \*\*blocked\*\* (pull_request)" ended.txt &&
	test_grep "Pull request: " ended.txt
'

test_expect_success 'a later issue comes in while serve runs; comments are not repeated' '
	new_issue "Second issue" "Another." "[\"baton\"]" >num2 &&
	cd repo &&
	wait_for "with_pr \"Second issue\"" 120 &&
	n=$(cat ../num) &&
	forge_call GET "/repos/acme/app/issues/$n/comments" >../again.json &&
	test_jq "length == 2" ../again.json
'

test_expect_success 'serve stops, and the companion with it' '
	forge_procs >procs &&
	test_line_count = 1 procs &&
	kill -TERM "$(cat serve.pid)" &&
	bg_wait serve 60 >rc &&
	wait_for "test -z \"\$(forge_procs)\"" 10
'

test_expect_success 'a rate limit holds the companion until its reset; it logs why and lives on' '
	forge_call POST /_double/fail "{\"kind\": \"primary\", \"count\": 2}" >/dev/null &&
	(
		cd repo &&
		bg_start "$TRASH_DIRECTORY/serve2" "$BATON" serve
	) &&
	wait_for "grep -q \"the next round in\" serve2.out" 30 &&
	test_grep "serve: forge: cannot count the issue backlog: primary rate limit" serve2.out &&
	test_grep "sync: primary rate limit.*the next round in 3[0-9][0-9][0-9]s" serve2.out &&
	forge_procs >procs2 &&
	test_line_count = 1 procs2 &&
	kill -TERM "$(cat serve2.pid)" &&
	bg_wait serve2 60 >rc2 &&
	wait_for "test -z \"\$(forge_procs)\"" 10
'

test_expect_success 'with poll_seconds 0, a wake-up (baton forge wake) brings the round; an error is logged and the companion lives on' '
	sed -i "s/poll_seconds: 1/poll_seconds: 0/" repo/.baton/config.yaml &&
	n0=$(listings) &&
	(
		cd repo &&
		bg_start "$TRASH_DIRECTORY/serve3" "$BATON" serve
	) &&
	# the start-up rules count the backlog, the companion syncs once
	wait_for "test \$(listings) -ge $((n0 + 2))" 30 &&
	wait_for "grep -q \"a sync round at start and on each webhook\" serve3.out" 30 &&
	forge_procs >procs3 &&
	test_line_count = 1 procs3 &&
	(
		cd repo &&
		wait_for "test -e .baton/forge-wake.d/$(cat ../procs3)" 30 &&
		wait_for "with_pr \"Second issue\"" 10
	) &&
	new_issue "Woken" "Come in on a wake-up." "[\"baton\"]" >/dev/null &&
	forge_call POST /_double/fail "{\"kind\": \"unauthorized\", \"count\": 1}" >/dev/null &&
	(
		cd repo &&
		"$BATON" forge wake >../wake.out &&
		wait_for "grep -q \"sync: GET /repos/acme/app/issues: 401 Bad credentials\" ../serve3.out" 30 &&
		test -z "$(task_status Woken)" &&
		"$BATON" forge wake >>../wake.out &&
		wait_for "test -n \"\$(task_status Woken)\"" 30 &&
		ls .baton/forge-wake.d >../fifos
	) &&
	test_grep "asked the forge companion" wake.out &&
	test_line_count = 1 fifos &&
	kill -TERM "$(cat serve3.pid)" &&
	bg_wait serve3 120 >rc3
'

test_expect_success 'serve with a forge but no token will not start, naming the variable' '
	(
		cd repo &&
		unset GITHUB_TOKEN &&
		test_must_fail "$BATON" serve --exit-when-idle 2>../notoken.err
	) &&
	test_grep "GITHUB_TOKEN (forge.token_env) is not set" notoken.err
'

test_expect_success 'no agent had the token in its environment' '
	ls "$FAKE_STATE"/agent-env.* >envs &&
	test $(wc -l <envs) -ge 2 &&
	! grep -lF "$GITHUB_TOKEN" $(cat envs) &&
	! grep -l "^GITHUB_TOKEN=" $(cat envs)
'

test_expect_success 'the token is in no file under .baton, no event and no log' '
	! grep -rlF "$GITHUB_TOKEN" repo/.baton &&
	(cd repo && "$BATON" events --all --json) >all-events.json &&
	! grep -F "$GITHUB_TOKEN" all-events.json serve.out
'

test_done
