#!/bin/bash
test_description='the forge with the judge on: an approved task waits for its pull request instead of the local merge queue, and its PR is opened; a task the judge sends back is not pushed'
. "$(dirname "$0")/../lib/test-lib.sh"

export GITHUB_TOKEN=ghp_t0064secretTOKENvalue0123456789

test_expect_success 'setup: a repository and its bare remote' '
	make_repo repo &&
	git clone -q --bare repo remote.git &&
	git -C repo remote add origin "$TRASH_DIRECTORY/remote.git"
'
start_forge_double gh --token "$GITHUB_TOKEN" --remote "$TRASH_DIRECTORY/remote.git" || exit 1

test_expect_success 'configure: a quick pipeline, a scripted judge, auto_merge on' '
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF &&
	#!/bin/sh
	echo "$BATON_RUN_ID" >>"$BATON_WORKTREE/work.txt"
	echo done
	EOF
	cat >"$TRASH_DIRECTORY/judge" <<-\EOF &&
	#!/bin/sh
	if grep -q "please-block"; then
		echo "DECISION: BLOCKED"
	else
		echo "Looks right."
		echo "DECISION: APPROVED"
	fi
	EOF
	chmod +x "$TRASH_DIRECTORY/agent" "$TRASH_DIRECTORY/judge" &&
	baton_init_with_agent repo "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
  judger: {type: command, command: [\"$TRASH_DIRECTORY/judge\"]}
roles: {default: instant, judge: judger}
pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {judge: true, auto_merge: true, sweep_seconds: 1}
forge:
  type: github
  repo: acme/app
  api_url: $FORGE_URL
  remote: origin
  poll_seconds: 0"
'

test_expect_success 'approved by the judge: blocked(pull_request), nothing landed locally' '
	cd repo &&
	base=$(git rev-parse HEAD) &&
	"$BATON" task add "Write work" >/dev/null &&
	"$BATON" task add "Hold this please-block" >/dev/null &&
	"$BATON" serve --workers 1 --exit-when-idle >../serve.out 2>&1 &&
	"$BATON" task list --json >../all.json &&
	test_jq ".[] | select(.title == \"Write work\") | .status == \"blocked\" and .block_reason == \"pull_request\"" ../all.json &&
	test_jq ".[] | select(.title == \"Hold this please-block\") | .block_reason == \"needs_rework\"" ../all.json &&
	test "$(git rev-parse HEAD)" = "$base" &&
	"$BATON" events --all --json >../ev.json &&
	! grep -q "\"merge_queued\"" ../ev.json
'

test_expect_success 'the sync opens one PR, for the approved task only' '
	cd repo &&
	"$BATON" forge sync >../sync.out &&
	forge_call GET "/repos/acme/app/pulls?state=all" >../pulls.json &&
	test_jq "length == 1 and .[0].title == \"Write work\"" ../pulls.json &&
	test_jq ".[0].body | test(\"so did the judge\")" ../pulls.json &&
	"$BATON" task list --json >../all.json &&
	test_jq ".[] | select(.title == \"Write work\") | .forge.pr == $(jq .[0].number ../pulls.json)" ../all.json
'

test_done
