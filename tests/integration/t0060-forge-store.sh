#!/bin/bash
test_description='a task linked to the forge says so: task list and task show mark its issue and PR, --json and the API carry its forge object, doctor and /metrics count blocked(pull_request); a bad forge: section is refused at its place'
. "$(dirname "$0")/../lib/test-lib.sh"

# The link is written straight into the store: the sync that makes links
# is another part of issue 19, and the store's own operations are tested
# in t_store (both backends) and t_forge_store.
link_issue() {
	db_query "INSERT INTO forge_links (task_id, repo, issue_number,
		issue_url, created_at, updated_at)
		VALUES ($1, 'acme/app', $2,
		'https://github.com/acme/app/issues/$2', 0, 0)"
}

test_expect_success 'a task from issue #12 is marked in task list, and --json has its forge object' '
	make_repo a &&
	baton_init_with_agent a &&
	cd a &&
	"$BATON" task add "Fix the login page" >/dev/null &&
	"$BATON" task add "Plain task" >/dev/null &&
	link_issue 1 12 &&
	"$BATON" task list >../list.out &&
	test_grep "^t1 .*Fix the login page  \[issue #12\]$" ../list.out &&
	test_grep "^t2 .*Plain task$" ../list.out &&
	"$BATON" task show --json t1 >../t1.json &&
	test_jq ".forge.repo == \"acme/app\" and .forge.issue == 12" ../t1.json &&
	test_jq ".forge.issue_url == \"https://github.com/acme/app/issues/12\"" ../t1.json &&
	test_jq ".forge.pr == null and .forge.pr_state == null and .forge.rounds == 0" ../t1.json &&
	"$BATON" task show --json t2 >../t2.json &&
	test_jq "has(\"forge\") and .forge == null" ../t2.json
'

test_expect_success 'with its pull request: task list and task show say PR #34, its state, checks and review' '
	cd a &&
	db_query "UPDATE forge_links SET pr_number = 34,
		pr_url = '\''https://github.com/acme/app/pull/34'\'',
		pr_state = '\''open'\'', checks = '\''failure'\'',
		review = '\''changes_requested'\'', reaction_rounds = 1,
		version = version + 1 WHERE task_id = 1" &&
	"$BATON" task list >../list2.out &&
	test_grep "Fix the login page  \[issue #12, PR #34 open\]$" ../list2.out &&
	"$BATON" task show t1 >../show.out &&
	test_grep "^forge: acme/app$" ../show.out &&
	test_grep "^  issue #12  https://github.com/acme/app/issues/12$" ../show.out &&
	test_grep "^  PR #34 .*open  https://github.com/acme/app/pull/34$" ../show.out &&
	test_grep "^  checks failure, review changes_requested, fix rounds 1$" ../show.out &&
	"$BATON" task show t2 >../show2.out &&
	test_must_fail grep "^forge:" ../show2.out &&
	"$BATON" task list --json >../list.json &&
	test_jq ".[0].forge.pr == 34 and .[0].forge.pr_url == \"https://github.com/acme/app/pull/34\"" ../list.json &&
	test_jq ".[0].forge.checks == \"failure\" and .[0].forge.review == \"changes_requested\" and .[0].forge.rounds == 1" ../list.json &&
	test_jq ".[1].forge == null" ../list.json
'

test_expect_success 'blocked(pull_request) is counted by doctor and /metrics, and the API has the forge object' '
	cd a &&
	db_query "UPDATE tasks SET status = '\''blocked'\'',
		block_reason = '\''pull_request'\'', version = version + 1
		WHERE id = 1" &&
	"$BATON" task cancel t2 >/dev/null &&
	"$BATON" doctor >../doctor.out 2>&1 || : &&
	test_grep "blocked(pull_request) 1" ../doctor.out &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	api_expect 200 GET /metrics >../metrics &&
	test_grep "^baton_tasks_blocked{reason=\"pull_request\"} 1$" ../metrics &&
	test_grep "^baton_tasks_blocked{reason=\"issue_linking\"} 0$" ../metrics &&
	api_expect 200 GET /api/v1/tasks/1 >../api1.json &&
	test_jq ".forge.issue == 12 and .forge.pr == 34 and .forge.pr_state == \"open\"" ../api1.json &&
	api_expect 200 GET /api/v1/tasks/2 >../api2.json &&
	test_jq ".forge == null" ../api2.json
'

test_expect_success 'a forge: section without a repo, or with a bad key, is refused naming the file, place and key' '
	make_repo b &&
	baton_init_with_agent b "forge:
  type: github
  token_env: GITHUB_TOKEN" &&
	cd b &&
	test_must_fail "$BATON" task list >../b.out 2>../b.err &&
	test_grep "config.yaml:[0-9]*:3: forge: a forge needs a repo (owner/name)" ../b.err &&
	cd .. &&
	make_repo c &&
	baton_init_with_agent c "forge:
  type: github
  repo: acme/app
  reactions: {ci_failed: retry}" &&
	cd c &&
	test_must_fail "$BATON" task list >../c.out 2>../c.err &&
	test_grep "config.yaml:[0-9]*:[0-9]*: forge.reactions.ci_failed: .retry. is not one of: fix, ask, ignore" ../c.err &&
	cd .. &&
	make_repo d &&
	baton_init_with_agent d "forge: {type: github, repo: acme/app, api_url: \"https://ghe.example.com/api/v3/\"}" &&
	cd d &&
	"$BATON" task list >../d.out 2>../d.err
'

test_done
