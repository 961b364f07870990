#!/bin/bash
test_description='the forge: a finished task is pushed and gets one pull request that closes its issue; failing CI and requested changes come back as fix rounds on the same PR; after max_rounds a person is asked; approved and green merges; a closed PR cancels; a person'"'"'s push is never overwritten'
. "$(dirname "$0")/../lib/test-lib.sh"

export GITHUB_TOKEN=ghp_t0063secretTOKENvalue0123456789

test_expect_success 'setup: a repository, its bare remote, and the double in front of it' '
	make_repo repo &&
	git clone -q --bare repo remote.git &&
	git -C repo remote add origin "$TRASH_DIRECTORY/remote.git"
'
start_forge_double gh --token "$GITHUB_TOKEN" --remote "$TRASH_DIRECTORY/remote.git" || exit 1

new_issue() {
	forge_call POST /_double/issue \
		"$(jq -nc --arg t "$1" --arg b "$2" '{title: $t, body: $b, labels: ["baton"]}')" |
		jq -r .number
}

# task_json TITLE: the task of that title, as task list --json has it
task_json() {
	"$BATON" task list --json | jq --arg t "$1" '.[] | select(.title == $t)'
}

# pulls: the double's pull requests (all states)
pulls() {
	forge_call GET "/repos/acme/app/pulls?state=all"
}

# sync_and_run: what serve would do, a step at a time: a round of the
# forge, the tasks it made run to their rest, then another round
sync_and_run() {
	"$BATON" forge sync >>../sync.out 2>&1 &&
	"$BATON" serve --workers 1 --exit-when-idle >>../serve.out 2>&1 &&
	"$BATON" forge sync >>../sync.out 2>&1
}

# The agent writes down each prompt it is given, then does its work.
cat >"$TRASH_DIRECTORY/prompt-agent" <<EOF
#!/bin/sh
cp "\$BATON_PROMPT_FILE" "\$(mktemp "$FAKE_STATE/prompt.\$BATON_STAGE_KIND.XXXXXX")"
exec "$FAKE_AGENT" "\$@"
EOF
chmod +x "$TRASH_DIRECTORY/prompt-agent"

test_expect_success 'configure the forge' '
	baton_init_with_agent repo "providers:
  fake: {type: command, command: [\"$TRASH_DIRECTORY/prompt-agent\"]}
runtime: {judge: false}
forge:
  type: github
  repo: acme/app
  api_url: $FORGE_URL
  remote: origin
  intake: {label: baton}
  pull_requests: {auto_merge: true}
  reactions: {max_rounds: 2}
  poll_seconds: 0"
'

test_expect_success 'a finished task gets one PR that closes its issue, its branch on the remote' '
	new_issue "Add a greeting" "Write a greeting file." >issue &&
	cd repo &&
	sync_and_run &&
	task_json "Add a greeting" >../t1.json &&
	test_jq ".status == \"blocked\" and .block_reason == \"pull_request\"" ../t1.json &&
	test_jq ".forge.pr > 0 and .forge.issue == $(cat ../issue)" ../t1.json &&
	jq -r .forge.pr ../t1.json >../pr &&
	pulls >../pulls.json &&
	test_jq "length == 1" ../pulls.json &&
	test_jq ".[0].body | test(\"Closes #$(cat ../issue)\")" ../pulls.json &&
	test_jq ".[0].title == \"Add a greeting\"" ../pulls.json &&
	branch=$(jq -r ".[0].head.ref" ../pulls.json) &&
	run=$(jq -r .run ../t1.json) &&
	test "$branch" = "baton/$run" &&
	test "$(git -C ../remote.git rev-parse "refs/heads/$branch")" = "$(git rev-parse "baton/$run")"
'

test_expect_success 'more rounds make no second PR' '
	cd repo &&
	"$BATON" forge sync &&
	"$BATON" forge sync &&
	pulls >../pulls.json &&
	test_jq "length == 1" ../pulls.json
'

test_expect_success 'a round with nothing changed asks only "changed since?": every answer a 304' '
	cd repo &&
	forge_call GET /_double/requests | jq length >../before &&
	"$BATON" forge sync &&
	forge_call GET /_double/requests >../requests.json &&
	jq "[.[$(cat ../before):][] | select(.path | startswith(\"/repos/\"))]" ../requests.json >../round.json &&
	test_jq "length >= 5 and all(.[]; .method == \"GET\" and .status == 304)" ../round.json
'

test_expect_success 'a failing CI status makes a fix round whose prompt holds the failure; its commit lands on the same PR' '
	cd repo &&
	head=$(pulls | jq -r ".[0].head.sha") &&
	forge_call POST /_double/status "{\"sha\": \"$head\", \"state\": \"failure\", \"context\": \"ci/unit\", \"description\": \"3 tests failed in test_greeting\", \"target_url\": \"https://ci.example/build/77\"}" >/dev/null &&
	sync_and_run &&
	"$BATON" task list --json >../all.json &&
	test_jq "[.[] | select(.origin == \"rework\")] | length == 1" ../all.json &&
	test_jq ".[] | select(.origin == \"rework\") | .status == \"done\" and (.body | test(\"ci/unit\")) and (.body | test(\"3 tests failed\"))" ../all.json &&
	grep -l "3 tests failed in test_greeting" "$FAKE_STATE"/prompt.execute.* >/dev/null &&
	grep -l "https://ci.example/build/77" "$FAKE_STATE"/prompt.execute.* >/dev/null &&
	pulls >../pulls.json &&
	test_jq "length == 1" ../pulls.json &&
	new=$(jq -r ".[0].head.sha" ../pulls.json) &&
	test "$new" != "$head" &&
	git -C ../remote.git merge-base --is-ancestor "$head" "$new" &&
	forge_call GET "/repos/acme/app/issues/$(cat ../pr)/comments" >../comments.json &&
	test_jq "any(.[]; .body | test(\"fix round 1\"))" ../comments.json &&
	task_json "Add a greeting" >../t1.json &&
	test_jq ".forge.rounds == 1 and .status == \"blocked\"" ../t1.json
'

test_expect_success 'the same failure read again makes no second round' '
	cd repo &&
	"$BATON" forge sync &&
	"$BATON" task list --json >../all.json &&
	test_jq "[.[] | select(.origin == \"rework\")] | length == 1" ../all.json
'

test_expect_success 'changes requested with two line comments make a round carrying both' '
	cd repo &&
	head=$(pulls | jq -r ".[0].head.sha") &&
	forge_call POST /_double/status "{\"sha\": \"$head\", \"state\": \"success\", \"context\": \"ci/unit\"}" >/dev/null &&
	rv=$(forge_call POST /_double/review "{\"pull\": $(cat ../pr), \"state\": \"CHANGES_REQUESTED\", \"body\": \"Two things to change.\"}" | jq -r .id) &&
	forge_call POST /_double/review_comment "{\"pull\": $(cat ../pr), \"review\": $rv, \"path\": \"feature.txt\", \"line\": 1, \"body\": \"Say hello politely.\"}" >/dev/null &&
	forge_call POST /_double/review_comment "{\"pull\": $(cat ../pr), \"review\": $rv, \"path\": \"README\", \"line\": 3, \"body\": \"Mention the greeting here.\"}" >/dev/null &&
	sync_and_run &&
	"$BATON" task list --json >../all.json &&
	test_jq "[.[] | select(.origin == \"rework\")] | length == 2" ../all.json &&
	jq -r "[.[] | select(.origin == \"rework\")] | last | .body" ../all.json >../round2.txt &&
	test_grep "Two things to change." ../round2.txt &&
	test_grep "feature.txt. line 1: Say hello politely" ../round2.txt &&
	test_grep "README. line 3: Mention the greeting here" ../round2.txt &&
	test_jq "[.[] | select(.origin == \"rework\")] | last | .status == \"done\"" ../all.json &&
	task_json "Add a greeting" >../t1.json &&
	test_jq ".forge.rounds == 2" ../t1.json
'

test_expect_success 'after max_rounds a person is asked, and the PR is labelled' '
	cd repo &&
	head=$(pulls | jq -r ".[0].head.sha") &&
	forge_call POST /_double/status "{\"sha\": \"$head\", \"state\": \"failure\", \"context\": \"ci/unit\", \"description\": \"still red\"}" >/dev/null &&
	"$BATON" forge sync &&
	"$BATON" task list --json >../all.json &&
	test_jq "[.[] | select(.origin == \"rework\")] | length == 2" ../all.json &&
	task_json "Add a greeting" >../t1.json &&
	test_jq ".reason | test(\"asks a person\")" ../t1.json &&
	forge_call GET "/repos/acme/app/issues/$(cat ../pr)" >../pr-issue.json &&
	test_jq "any(.labels[]; .name == \"baton:needs-human\")" ../pr-issue.json &&
	"$BATON" approvals >../approvals.out &&
	test_grep "PR #$(cat ../pr)" ../approvals.out
'

test_expect_success 'approved and green with auto_merge: the PR is merged and the task done' '
	cd repo &&
	head=$(pulls | jq -r ".[0].head.sha") &&
	forge_call POST /_double/status "{\"sha\": \"$head\", \"state\": \"success\", \"context\": \"ci/unit\"}" >/dev/null &&
	forge_call POST /_double/review "{\"pull\": $(cat ../pr), \"state\": \"APPROVED\", \"user\": \"reviewer\"}" >/dev/null &&
	"$BATON" forge sync &&
	pulls >../pulls.json &&
	test_jq ".[0].merged == true" ../pulls.json &&
	task_json "Add a greeting" >../t1.json &&
	test_jq ".status == \"done\" and .forge.pr_state == \"merged\"" ../t1.json &&
	main=$(git symbolic-ref --short HEAD) &&
	git -C ../remote.git log -1 --format=%s "refs/heads/$main" >../landed &&
	test_grep "^Add a greeting (#$(cat ../pr))" ../landed &&
	test "$(git -C ../remote.git rev-parse "refs/heads/$main^{tree}")" = "$(git -C ../remote.git rev-parse "$head^{tree}")" &&
	forge_call GET "/repos/acme/app/issues/$(cat ../issue)" >../issue1.json &&
	test_jq ".state == \"closed\"" ../issue1.json
'

test_expect_success 'a closed PR cancels its task' '
	new_issue "Add a farewell" "Write a farewell file." >issue2 &&
	cd repo &&
	sync_and_run &&
	n=$(task_json "Add a farewell" | jq -r .forge.pr) &&
	test "$n" -gt "$(cat ../pr)" &&
	forge_call PATCH "/repos/acme/app/pulls/$n" "{\"state\": \"closed\"}" >/dev/null &&
	"$BATON" forge sync &&
	task_json "Add a farewell" >../t2.json &&
	test_jq ".status == \"cancelled\" and (.reason | test(\"closed without merging\"))" ../t2.json
'

test_expect_success 'a person pushed to the PR: baton stops and asks, and does not overwrite it' '
	new_issue "Add a note" "Write a note file." >issue3 &&
	cd repo &&
	sync_and_run &&
	t3=$(task_json "Add a note") &&
	n=$(echo "$t3" | jq -r .forge.pr) &&
	branch=$(pulls | jq -r ".[] | select(.number == $n) | .head.ref") &&
	git clone -q ../remote.git ../person &&
	(cd ../person && git checkout -q "$branch" && echo mine >person.txt &&
	 git add person.txt && git -c user.name=P -c user.email=p@x commit -qm "a person" &&
	 git push -q origin "$branch") &&
	theirs=$(git -C ../remote.git rev-parse "refs/heads/$branch") &&
	"$BATON" forge sync &&
	task_json "Add a note" >../t3.json &&
	test_jq ".status == \"blocked\" and (.reason | test(\"pushed by someone else\"))" ../t3.json &&
	test "$(git -C ../remote.git rev-parse "refs/heads/$branch")" = "$theirs"
'

test_expect_success 'approved by a person, baton goes on from their commit: a failing check makes a round on top of it' '
	cd repo &&
	id=$(task_json "Add a note" | jq -r .id) &&
	n=$(task_json "Add a note" | jq -r .forge.pr) &&
	branch=$(pulls | jq -r ".[] | select(.number == $n) | .head.ref") &&
	theirs=$(git -C ../remote.git rev-parse "refs/heads/$branch") &&
	test_must_fail "$BATON" approvals approve t1 2>../approve-err &&
	test_grep "t1 asks nothing" ../approve-err &&
	"$BATON" approvals approve "t$id" >../approve.out &&
	test_grep "goes on with its pull request" ../approve.out &&
	task_json "Add a note" >../t3.json &&
	test_jq ".reason == \"waiting for its pull request\"" ../t3.json &&
	"$BATON" forge sync >>../sync.out 2>&1 &&
	task_json "Add a note" >../t3.json &&
	test_jq ".reason == \"waiting for its pull request\"" ../t3.json &&
	forge_call POST /_double/status "{\"sha\": \"$theirs\", \"state\": \"failure\", \"context\": \"ci/unit\", \"description\": \"note test failed\"}" >/dev/null &&
	sync_and_run &&
	"$BATON" task list --json >../all.json &&
	test_jq "[.[] | select(.parent == $id and .origin == \"rework\")] | length == 1 and .[0].status == \"done\"" ../all.json &&
	new=$(git -C ../remote.git rev-parse "refs/heads/$branch") &&
	test "$new" != "$theirs" &&
	git -C ../remote.git merge-base --is-ancestor "$theirs" "$new" &&
	git -C ../remote.git show "$new:person.txt" >/dev/null
'

test_expect_success 'rejected by a person: the task is cancelled, its PR left open' '
	cd repo &&
	id=$(task_json "Add a note" | jq -r .id) &&
	n=$(task_json "Add a note" | jq -r .forge.pr) &&
	forge_call POST /_double/status "{\"sha\": \"$(pulls | jq -r ".[] | select(.number == $n) | .head.sha")\", \"state\": \"failure\", \"context\": \"ci/unit\", \"description\": \"red again\"}" >/dev/null &&
	sed -i "s/max_rounds: 2/max_rounds: 1/" .baton/config.yaml &&
	"$BATON" forge sync >>../sync.out 2>&1 &&
	task_json "Add a note" | jq -e ".reason | test(\"asks a person\")" >/dev/null &&
	"$BATON" approvals reject "t$id" >../reject.out &&
	task_json "Add a note" >../t3.json &&
	test_jq ".status == \"cancelled\" and (.reason | test(\"declined\"))" ../t3.json &&
	pulls | jq -e ".[] | select(.number == $n) | .state == \"open\"" >/dev/null &&
	sed -i "s/max_rounds: 1/max_rounds: 2/" .baton/config.yaml
'

test_expect_success 'a PR in conflict with its base makes a round that redoes the change on the base as the remote has it' '
	new_issue "Add a line" "Append a line." >issue4 &&
	cd repo &&
	sync_and_run &&
	n=$(task_json "Add a line" | jq -r .forge.pr) &&
	old=$(pulls | jq -r ".[] | select(.number == $n) | .head.sha") &&
	main=$(git symbolic-ref --short HEAD) &&
	git clone -q ../remote.git ../other &&
	(cd ../other && git checkout -q "$main" && echo theirs >>feature.txt &&
	 git add feature.txt && git -c user.name=O -c user.email=o@x commit -qm "moved on" &&
	 git push -q origin "$main") &&
	moved=$(git -C ../remote.git rev-parse "refs/heads/$main") &&
	forge_call POST /_double/pull "{\"number\": $n, \"mergeable\": false, \"mergeable_state\": \"dirty\"}" >/dev/null &&
	"$BATON" forge sync >>../sync.out 2>&1 &&
	"$BATON" task list --json >../all.json &&
	test_jq "[.[] | select(.origin == \"conflict\")] | length == 1" ../all.json &&
	jq -r ".[] | select(.origin == \"conflict\") | .body" ../all.json >../conflict.txt &&
	test_grep "conflicts with what $main has now" ../conflict.txt &&
	test_grep "^## The pull request.s change" ../conflict.txt &&
	"$BATON" forge sync >>../sync.out 2>&1 &&
	"$BATON" task list --json >../all.json &&
	test_jq "[.[] | select(.origin == \"conflict\")] | length == 1" ../all.json &&
	"$BATON" serve --workers 1 --exit-when-idle >>../serve.out 2>&1 &&
	"$BATON" forge sync >>../sync.out 2>&1 &&
	new=$(pulls | jq -r ".[] | select(.number == $n) | .head.sha") &&
	test "$new" != "$old" &&
	git -C ../remote.git merge-base --is-ancestor "$moved" "$new" &&
	"$BATON" task list --json >../all.json &&
	test_jq ".[] | select(.origin == \"conflict\") | .status == \"done\"" ../all.json &&
	pulls | jq -e ".[] | select(.number == $n) | .mergeable_state == \"clean\"" >/dev/null
'

test_expect_success 'a merge refused by branch protection is the task'"'"'s reason; nothing is merged' '
	new_issue "Add a sign" "Write a sign file." >issue5 &&
	cd repo &&
	sync_and_run &&
	n=$(task_json "Add a sign" | jq -r .forge.pr) &&
	head=$(pulls | jq -r ".[] | select(.number == $n) | .head.sha") &&
	main=$(git symbolic-ref --short HEAD) &&
	before=$(git -C ../remote.git rev-parse "refs/heads/$main") &&
	forge_call POST /_double/protect "{\"message\": \"Required status check \\\"deploy\\\" is expected.\"}" >/dev/null &&
	forge_call POST /_double/status "{\"sha\": \"$head\", \"state\": \"success\", \"context\": \"ci/unit\"}" >/dev/null &&
	forge_call POST /_double/review "{\"pull\": $n, \"state\": \"APPROVED\"}" >/dev/null &&
	"$BATON" forge sync >>../sync.out 2>&1 &&
	"$BATON" forge sync >>../sync.out 2>&1 &&
	forge_call POST /_double/protect "{}" >/dev/null &&
	"$BATON" events --task "$(task_json "Add a sign" | jq -r .id)" --json >../t5ev.json &&
	test "$(grep -c "\"forge_merge_refused\"" ../t5ev.json)" = 1 &&
	task_json "Add a sign" >../t5.json &&
	test_jq ".status == \"blocked\" and (.reason | contains(\"PUT /repos/acme/app/pulls/$n/merge: 405\")) and (.reason | contains(\"deploy\"))" ../t5.json &&
	pulls | jq -e ".[] | select(.number == $n) | .merged == false and .state == \"open\"" >/dev/null &&
	test "$(git -C ../remote.git rev-parse "refs/heads/$main")" = "$before"
'

test_expect_success 'a PR opened for the branch before baton recorded it (a crash in between) is adopted, never doubled' '
	new_issue "Add a map" "Write a map file." >issue6 &&
	cd repo &&
	"$BATON" forge sync >>../sync.out 2>&1 &&
	"$BATON" serve --workers 1 --exit-when-idle >>../serve.out 2>&1 &&
	run=$(task_json "Add a map" | jq -r .run) &&
	main=$(git symbolic-ref --short HEAD) &&
	git push -q origin "baton/$run" &&
	forge_call POST /repos/acme/app/pulls "{\"title\": \"Add a map\", \"head\": \"baton/$run\", \"base\": \"$main\"}" >../made.json &&
	n=$(jq -r .number ../made.json) &&
	forge_call GET /_double/requests | jq length >../before &&
	"$BATON" forge sync >>../sync.out 2>&1 &&
	test "$(task_json "Add a map" | jq -r .forge.pr)" = "$n" &&
	pulls | jq -e "[.[] | select(.head.ref == \"baton/$run\")] | length == 1" >/dev/null &&
	forge_call GET /_double/requests >../req.json &&
	test_jq "[.[$(cat ../before):][] | select(.method == \"POST\" and .path == \"/repos/acme/app/pulls\" and .status == 422)] | length == 1" ../req.json
'

test_expect_success 'the token is in no file, event or log' '
	cd repo &&
	"$BATON" events --all --json >../events.json &&
	! grep -rF "$GITHUB_TOKEN" .baton ../events.json ../sync.out ../serve.out
'

test_done
