#!/bin/bash
test_description='baton plan: a requirement becomes queued tasks with dependencies and areas; plans are versioned; broken answers, cycles and unconfirmed plans queue nothing; the planner on the mock model server'
. "$(dirname "$0")/../lib/test-lib.sh"

# (in FAKE_STATE, the one folder of the trash the sandbox lets it write)
P=$FAKE_STATE/planner
mkdir -p "$P"

# The scripted planner: records each call (prompt, cwd), then answers as
# the file $P/mode says: good (writes plan.json in its output folder,
# BATON_OUT_DIR), text (the plan in a ```json block of its answer),
# garbage, cycle, slow (writes plan.json, then sleeps with its pid in
# $P/slow.pid).
cat >"$TRASH_DIRECTORY/planner.sh" <<-\EOF
#!/bin/sh
P=$FAKE_STATE/planner
here=$(pwd)
cd "${BATON_OUT_DIR:-.}" || exit 1
n=$(($(cat "$P/calls" 2>/dev/null || echo 0) + 1))
echo "$n" >"$P/calls"
cat >"$P/prompt.$n"
echo "$here" >"$P/cwd.$n"
echo "$BATON_ROLE" >"$P/role.$n"
case $(cat "$P/mode") in
good) cp "$P/good.json" plan.json && echo "Wrote plan.json." ;;
text) printf 'Here is the plan.\n\n```json\n%s\n```\n' "$(cat "$P/good.json")" ;;
garbage) echo "this is { not json" >plan.json && echo "Done." ;;
cycle) cp "$P/cycle.json" plan.json && echo "Done." ;;
slow) cp "$P/good.json" plan.json && echo $$ >"$P/slow.pid" && exec sleep 1000 ;;
esac
EOF
chmod +x "$TRASH_DIRECTORY/planner.sh"

cat >"$P/good.json" <<-\EOF
{"tasks": [
  {"key": "b", "title": "Use the parser in the CLI", "area": "src/cli",
   "depends_on": ["a"], "allowed_paths": ["src/cli/**"]},
  {"key": "a", "title": "Add the parser", "area": "./src/parse/",
   "body": "Parse the new format.", "verify": ["make test"]},
  {"key": "c", "title": "Document the format", "area": "docs",
   "priority": 2}
], "summary": "Parser first, then the CLI; the docs on the side."}
EOF
cat >"$P/cycle.json" <<-\EOF
{"tasks": [
  {"key": "a", "title": "A", "depends_on": ["b"]},
  {"key": "b", "title": "B", "depends_on": ["a"]}
]}
EOF

# q SQL: a query on the repository's store, one row per line.
q() {
	sqlite3 .baton/baton.db "$1"
}

calls() {
	cat "$P/calls" 2>/dev/null || echo 0
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  planner: {type: command, command: [\"$TRASH_DIRECTORY/planner.sh\"]}
roles: {default: planner}" &&
	printf "# Requirement\n\nSupport the new format in the CLI.\n" >repo/req.md
'

test_expect_success 'plan --yes queues the three tasks with dependencies and areas' '
	cd repo &&
	echo good >"$P/mode" &&
	"$BATON" plan req.md --yes >../plan1.out 2>../plan1.err &&
	test_grep "plan 1: req.md, version 1, 3 tasks (.baton/plans/req-v1.json)" ../plan1.out &&
	test_grep "Parser first" ../plan1.out &&
	test_grep "^#  key  title" ../plan1.out &&
	test_grep "^2  b    Use the parser in the CLI  *src/cli  *a$" ../plan1.out &&
	test_grep "^queued 3 tasks" ../plan1.out &&
	test_grep "^1  t1  a " ../plan1.out &&
	test "$(calls)" = 1 &&
	q "SELECT id, title, area, origin, plan_id, status, priority FROM tasks ORDER BY id" >../tasks &&
	cat >../expect <<-\EOF &&
	1|Add the parser|src/parse|plan|1|queued|0
	2|Use the parser in the CLI|src/cli|plan|1|queued|0
	3|Document the format|docs|plan|1|queued|2
	EOF
	test_cmp ../expect ../tasks &&
	q "SELECT task_id, depends_on FROM task_deps" >../deps &&
	echo "2|1" >../expect &&
	test_cmp ../expect ../deps &&
	q "SELECT allowed_paths, verify, body FROM tasks ORDER BY id" >../extras &&
	cat >../expect <<-\EOF &&
	|["make test"]|Parse the new format.
	["src/cli/**"]||
	||
	EOF
	test_cmp ../expect ../extras &&
	q "SELECT count(*) FROM events WHERE type = '"'"'task_added'"'"'" >../n &&
	echo 3 >../expect && test_cmp ../expect ../n
'

test_expect_success 'the planner ran in the repository root, as the planner, on the requirement' '
	cd repo &&
	test "$(cat "$P/cwd.1")" = "$(pwd)" &&
	test "$(cat "$P/role.1")" = planner &&
	test_grep "You are the planner" "$P/prompt.1" &&
	test_grep "Support the new format in the CLI." "$P/prompt.1" &&
	test_grep "Worktree: $(pwd)$" "$P/prompt.1" &&
	test_grep "plan.json" "$P/prompt.1" &&
	# its files are under .baton/plans/calls/; plan.json left the repository
	ls .baton/plans/calls/req-*-1.prompt.md &&
	ls .baton/plans/calls/req-*-1.stdout &&
	ls .baton/plans/calls/req-*-1.plan.json &&
	test_path_is_missing plan.json &&
	git status --porcelain -- . ":!.baton" >../status &&
	echo "?? req.md" >../expect &&
	test_cmp ../expect ../status
'

test_expect_success 'the plan is kept: plans table and .baton/plans/req-v1.json' '
	cd repo &&
	q "SELECT id, source, version FROM plans" >../plans &&
	echo "1|req.md|1" >../expect &&
	test_cmp ../expect ../plans &&
	test_jq ".tasks | length == 3" .baton/plans/req-v1.json &&
	test_jq "[.tasks[].key] == [\"a\", \"b\", \"c\"]" .baton/plans/req-v1.json &&
	test_jq ".tasks[0].area == \"src/parse\" and .tasks[1].depends_on == [\"a\"]" .baton/plans/req-v1.json &&
	q "SELECT content FROM plans WHERE id = 1" >../content &&
	jq -e . ../content >/dev/null &&
	test_jq ".summary == \"Parser first, then the CLI; the docs on the side.\"" ../content
'

test_expect_success 'task list shows the queued tasks of the plan' '
	cd repo &&
	"$BATON" task list --json >../list.json &&
	test_jq "length == 3" ../list.json &&
	test_jq "[.[].status] == [\"queued\", \"queued\", \"queued\"]" ../list.json &&
	test_jq "[.[].origin] == [\"plan\", \"plan\", \"plan\"]" ../list.json &&
	test_jq "[.[].area] == [\"src/parse\", \"src/cli\", \"docs\"]" ../list.json &&
	test_jq "[.[].depends_on] == [[], [1], []]" ../list.json &&
	test_jq ".[1].allowed_paths == [\"src/cli/**\"]" ../list.json
'

test_expect_success 'planning the same file again writes version 2' '
	cd repo &&
	"$BATON" plan req.md --yes >../plan2.out 2>&1 &&
	test_grep "version 2" ../plan2.out &&
	test_path_is_file .baton/plans/req-v2.json &&
	q "SELECT source, version FROM plans ORDER BY id" >../plans &&
	printf "req.md|1\nreq.md|2\n" >../expect &&
	test_cmp ../expect ../plans &&
	q "SELECT count(*) FROM tasks WHERE plan_id = 2" >../n &&
	echo 3 >../expect && test_cmp ../expect ../n &&
	q "SELECT task_id, depends_on FROM task_deps ORDER BY task_id" >../deps &&
	printf "2|1\n5|4\n" >../expect &&
	test_cmp ../expect ../deps
'

test_expect_success '--json prints the plan id, version and each task with its id' '
	cd repo &&
	"$BATON" plan req.md --yes --json >../plan3.json 2>../plan3.err &&
	test_jq ".plan_id == 3 and .version == 3 and .enqueued == true" ../plan3.json &&
	test_jq ".source == \"req.md\" and .file == \".baton/plans/req-v3.json\"" ../plan3.json &&
	test_jq "[.tasks[] | .key] == [\"a\", \"b\", \"c\"]" ../plan3.json &&
	test_jq "[.tasks[] | .id] == [7, 8, 9]" ../plan3.json &&
	test_jq ".tasks[1].depends_on == [\"a\"] and .tasks[1].depends_on_ids == [7]" ../plan3.json &&
	test_jq ".tasks[0].verify == [\"make test\"] and .tasks[2].priority == 2" ../plan3.json &&
	# the table went to stderr
	test_grep "Use the parser in the CLI" ../plan3.err
'

test_expect_success 'a planner that writes garbage gets a clear error; nothing is queued' '
	cd repo &&
	echo garbage >"$P/mode" &&
	before=$(calls) &&
	ntasks=$(q "SELECT count(*) FROM tasks") &&
	test_expect_code 1 "$BATON" plan req.md --yes >../bad.out 2>../bad.err &&
	test_grep "not a usable plan, even after one retry: plan.json is not valid JSON: line 1" ../bad.err &&
	test_grep "nothing was queued" ../bad.err &&
	test_grep "the answer is kept in .baton/plans/calls/req-.*-2.plan.json" ../bad.err &&
	# asked twice, the second time with the error
	test "$(calls)" = $((before + 2)) &&
	test_grep "Your previous answer was not accepted" "$P/prompt.$((before + 2))" &&
	test_grep "plan.json is not valid JSON" "$P/prompt.$((before + 2))" &&
	kept=$(ls .baton/plans/calls/req-*-2.plan.json | tail -n 1) &&
	test_grep "this is { not json" "$kept" &&
	test "$(q "SELECT count(*) FROM tasks")" = "$ntasks" &&
	test "$(q "SELECT count(*) FROM plans")" = 3 &&
	test_path_is_missing plan.json
'

test_expect_success 'a cycle is refused naming its keys' '
	cd repo &&
	echo cycle >"$P/mode" &&
	ntasks=$(q "SELECT count(*) FROM tasks") &&
	test_expect_code 1 "$BATON" plan req.md --yes 2>../cycle.err &&
	test_grep "plan.json: the dependencies form a cycle: a -> b -> a" ../cycle.err &&
	test "$(q "SELECT count(*) FROM tasks")" = "$ntasks"
'

test_expect_success 'the plan may come as a json block in the answer' '
	cd repo &&
	echo text >"$P/mode" &&
	"$BATON" plan req.md --yes >../text.out 2>&1 &&
	test_grep "queued 3 tasks" ../text.out &&
	ls .baton/plans/calls/req-*.answer.md
'

test_expect_success 'without a terminal and without --yes it refuses before asking the planner' '
	cd repo &&
	echo good >"$P/mode" &&
	before=$(calls) &&
	test_expect_code 2 "$BATON" plan req.md </dev/null 2>../notty.err &&
	test_grep "pass --yes" ../notty.err &&
	test "$(calls)" = "$before"
'

test_expect_success 'on a terminal it asks: n queues nothing, y queues' '
	cd repo &&
	echo good >"$P/mode" &&
	ntasks=$(q "SELECT count(*) FROM tasks") &&
	nplans=$(q "SELECT count(*) FROM plans") &&
	printf "n\n" | test_expect_code 1 script -qec "\"$BATON\" plan req.md" /dev/null >../ask-n.out &&
	test_grep "Enqueue these 3 tasks? \[y/N\]" ../ask-n.out &&
	test_grep "nothing was queued; the plan is kept in .baton/plans/req-v$((nplans + 1)).json" ../ask-n.out &&
	test "$(q "SELECT count(*) FROM tasks")" = "$ntasks" &&
	printf "y\n" | script -qec "\"$BATON\" plan req.md" /dev/null >../ask-y.out &&
	test_grep "queued 3 tasks" ../ask-y.out &&
	test "$(q "SELECT count(*) FROM tasks")" = $((ntasks + 3))
'

test_expect_success 'SIGTERM during the call stops the planner; nothing is queued' '
	cd repo &&
	echo slow >"$P/mode" &&
	rm -f "$P/slow.pid" &&
	ntasks=$(q "SELECT count(*) FROM tasks") &&
	bg_start "$TRASH_DIRECTORY/slow" "$BATON" plan req.md --yes &&
	wait_for "test -s \"$P/slow.pid\"" 10 &&
	# (its pid in the sandbox is not the host pid: found by command line)
	wait_for "test -n \"\$(trash_procs \"sleep 1000\")\"" 10 &&
	kill -TERM "$(cat "$TRASH_DIRECTORY/slow.pid")" &&
	test "$(bg_wait "$TRASH_DIRECTORY/slow")" = 130 &&
	wait_for "test -z \"\$(trash_procs \"sleep 1000\")\"" 10 &&
	test_grep "the planner was stopped; nothing was queued" "$TRASH_DIRECTORY/slow.out" &&
	test "$(q "SELECT count(*) FROM tasks")" = "$ntasks" &&
	test_path_is_missing plan.json
'

test_expect_success 'an unreadable or empty requirement is named' '
	cd repo &&
	test_expect_code 1 "$BATON" plan nosuch.md --yes 2>../err &&
	test_grep "nosuch.md" ../err &&
	: >empty.md &&
	test_expect_code 1 "$BATON" plan empty.md --yes 2>../err &&
	test_grep "the requirement in .empty.md. is empty" ../err &&
	rm empty.md
'

test_expect_success 'the requirement may come from stdin' '
	cd repo &&
	echo good >"$P/mode" &&
	"$BATON" plan - --yes <req.md >../stdin.out 2>&1 &&
	test_grep "queued 3 tasks" ../stdin.out &&
	test_path_is_file .baton/plans/stdin-v1.json &&
	test "$(q "SELECT source FROM plans ORDER BY id DESC LIMIT 1")" = -
'

test_expect_success 'a plan.json of the repository is put back as it was' '
	cd repo &&
	echo good >"$P/mode" &&
	echo "{\"mine\": true}" >plan.json &&
	cp plan.json ../mine &&
	"$BATON" plan req.md --yes >/dev/null 2>&1 &&
	test_cmp ../mine plan.json &&
	rm plan.json
'

test_expect_success 'no planner at all is a clear error' '
	make_repo none &&
	cd none &&
	"$BATON" init >/dev/null &&
	echo "providers: {}" >.baton/config.yaml &&
	echo "do it" >req.md &&
	test_expect_code 1 "$BATON" plan req.md --yes 2>../none.err &&
	test_grep "no provider plays the planner role: set roles.planner or roles.default" ../none.err
'

# baton's own agent on the mock model server: the scripted tool call
# writes plan.json in the repository root.
jq -n --arg plan "$(cat "$P/good.json")" '{rules: [
	{match: "graph of small tasks",
	 actions: [{call: {name: "write_file", args: {path: "plan.json", content: $plan}}}],
	 text: "Wrote plan.json."}]}' >"$TRASH_DIRECTORY/mock.json"
export MOCK_KEY=sk-mock-plan-0123456789
mock_start mock "$TRASH_DIRECTORY/mock.json" --require-key "$MOCK_KEY"
export MOCK_URL="$(mock_url mock)/v1"

test_expect_success 'openai agent: setup (the scripted planner stays the default)' '
	make_repo http &&
	baton_init_with_agent http "providers:
  planner: {type: command, command: [\"$TRASH_DIRECTORY/planner.sh\"]}
  own: {type: openai, model: mock-model, base_url: \"$MOCK_URL\", api_key_env: MOCK_KEY, max_retries: 0}
roles: {default: planner}" &&
	echo "Support the new format in the CLI." >http/req.md
'

test_expect_success 'openai agent: --role planner=own plans through the mock' '
	cd http &&
	before=$(calls) &&
	"$BATON" plan --role planner=own req.md --yes >../http.out 2>&1 &&
	test_grep "asking the planner (provider own)" ../http.out &&
	test_grep "queued 3 tasks" ../http.out &&
	test "$(calls)" = "$before" &&
	q "SELECT title, area FROM tasks ORDER BY id" >../tasks &&
	cat >../expect <<-\EOF &&
	Add the parser|src/parse
	Use the parser in the CLI|src/cli
	Document the format|docs
	EOF
	test_cmp ../expect ../tasks &&
	q "SELECT task_id, depends_on FROM task_deps" >../deps &&
	echo "2|1" >../expect && test_cmp ../expect ../deps &&
	test_path_is_missing plan.json &&
	# the HTTP record is kept with the call, without the key
	ls .baton/plans/calls/req-*-1.http/002-response.json &&
	test_must_fail grep -r -l "$MOCK_KEY" .baton/plans &&
	jq -s "[.[] | select(.wire == \"chat\")] | length" "$TRASH_DIRECTORY/mock.log" >../n &&
	echo 2 >../expect && test_cmp ../expect ../n
'

test_done
