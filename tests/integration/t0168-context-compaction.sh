#!/bin/bash
test_description='a context window too small (the mock answers each provider'"'"'s own context-length error above a size): baton'"'"'s HTTP agent drops older tool results and asks again; a prompt too large has its largest sections cut and the call is tried once more; a prompt that cannot be cut enough blocks the run naming why'
. "$(dirname "$0")/../lib/test-lib.sh"

export MOCK_KEY=sk-mock-context-0123456789
cat >script.json <<-\EOF
{"rules": [
  {"match": "You are the planner", "text": "# Plan\n\n1. Read the big file twice.\n"},
  {"match": "You are the architect", "text": "# Design\n\nNothing to design.\n"},
  {"match": "You are the implementer",
   "actions": [
     {"call": {"name": "read_file", "args": {"path": "big.txt"}}},
     {"call": {"name": "read_file", "args": {"path": "big.txt"}}},
     {"call": {"name": "write_file", "args": {"path": "hello.txt", "content": "hello\n"}}}
   ],
   "text": "Read it twice and wrote hello.txt."},
  {"match": "You are fixing", "text": "Nothing left to fix."},
  {"match": "You are the reviewer", "text": "Fine.\nDECISION: APPROVED"},
  {"match": "You are the verifier", "text": "Fine.\nVERIFICATION: PASSED"}
]}
EOF
# 20000 bytes: a request with one big.txt (10 KB) fits, with two does not
mock_start mock script.json --require-key "$MOCK_KEY" --context-limit 20000
# 30000 bytes: the planner's prompt of 39 KB does not fit, half of it does
mock_start wide script.json --require-key "$MOCK_KEY" --context-limit 30000

# setup_repo NAME WIRE MOCK: a repository with big.txt whose agent is
# baton's own on WIRE against the mock MOCK.
setup_repo() {
	local name=$1 wire=$2 url
	case $wire in
	openai) url="$(mock_url $3)/v1" ;;
	*) url=$(mock_url $3) ;;
	esac
	make_repo "$name" &&
	(cd "$name" && awk "BEGIN { for (i = 0; i < 200; i++) printf \"line %03d of a big file that fills the window.....\n\", i }" >big.txt &&
		git add big.txt && git commit -qm big) &&
	baton_init_with_agent "$name" "providers:
  own:
    type: $wire
    model: mock-model
    base_url: \"$url\"
    api_key_env: MOCK_KEY
    max_retries: 0
roles: {default: own}"
}

events_of() {
	"$BATON" events "$1" --json | jq -s .
}

for wire in openai anthropic; do
	export wire
	test_expect_success "$wire: older tool results are dropped, and the run goes on" '
		setup_repo tools-$wire $wire mock &&
		cd tools-$wire &&
		test $(wc -c <big.txt) -ge 10000 &&
		test_expect_code 0 "$BATON" run "Read big.txt" >../tools-$wire.out 2>&1 &&
		id=$(newest_run) &&
		events_of "$id" >../ev.json &&
		test_jq "[.[] | select(.type == \"context_compacted\") | .data] | length == 1" ../ev.json &&
		test_jq "[.[] | select(.type == \"context_compacted\") | .data][0] | .how == \"tool_results\" and .stage == \"execute\" and .after < .before and .before - .after > 10000" ../ev.json &&
		# the mock said so once, then answered
		test "$(jq -s "[.[] | select(.reply == \"error:context\")] | length" ../mock.log)" -ge 1 &&
		dir=.baton/runs/$id &&
		grep -l "dropped to fit the model" "$dir"/calls/*execute*.http/*-request.json >../dropped &&
		test -s ../dropped &&
		"$BATON" diff "$id" >../diff &&
		test_grep "+hello" ../diff
	'
done

test_expect_success 'anthropic: a prompt too large has its largest section cut, once' '
	setup_repo prompt anthropic wide &&
	mkdir -p prompt/.baton/prompts &&
	{
		echo "You are the planner of a software change. Write the plan."
		echo
		echo "Task: {{task}}"
		echo
		echo "## Background"
		echo
		awk "BEGIN { for (i = 0; i < 800; i++) printf \"background line %03d, long enough to matter.....\n\", i }"
		echo
		echo "## What to leave"
		echo
		echo "Write the plan to {{out_dir}}/{{artifact}}."
	} >prompt/.baton/prompts/plan.md &&
	cd prompt &&
	test_expect_code 0 "$BATON" run "Plan a thing" >../prompt.out 2>&1 &&
	id=$(newest_run) &&
	events_of "$id" >../ev.json &&
	jq "[.[] | select(.type == \"context_compacted\") | .data]" ../ev.json >../cc.json &&
	test_jq "length == 1 and .[0].how == \"prompt_sections\" and .[0].stage == \"plan\"" ../cc.json &&
	test_jq ".[0].after <= .[0].target and .[0].before > 30000" ../cc.json &&
	# the first call failed as "context", the second went through
	test_jq "[.[] | select(.type == \"agent_exited\" and .data.stage == \"plan\") | .data.failure] == [\"context\", \"none\"]" ../ev.json &&
	p=$(ls .baton/runs/$id/calls/*plan*.prompt.md | tail -1) &&
	test_grep "cut to fit the model.s context window" "$p" &&
	test_grep "^## What to leave" "$p" &&
	test_grep "^Task: Plan a thing" "$p" &&
	test_grep "background line 000" "$p" &&
	! grep -q "background line 799" "$p"
'

test_expect_success 'a prompt whose instructions alone overflow: blocked, naming the context window' '
	setup_repo huge openai wide &&
	cd huge &&
	task=$(awk "BEGIN { for (i = 0; i < 900; i++) printf \"word%03d of a task far too long for the window \", i }") &&
	test_must_fail "$BATON" run "$task" >../huge.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = blocked &&
	test_grep "still too large for provider .own..s context window after it was compacted" ../huge.out &&
	test_grep "maximum context length" ../huge.out
'

test_expect_success 'a CLI agent (the fake, Claude Code'"'"'s error text): its prompt is cut, once' '
	make_repo cli &&
	baton_init_with_agent cli &&
	mkdir -p cli/.baton/prompts &&
	{
		echo "You are the planner. Task: {{task}}"
		echo
		echo "## Background"
		echo
		awk "BEGIN { for (i = 0; i < 800; i++) printf \"background line %03d, long enough to matter.....\n\", i }"
		echo
		echo "## What to leave"
		echo
		echo "Write {{out_dir}}/{{artifact}}."
	} >cli/.baton/prompts/plan.md &&
	cd cli &&
	FAKE_CONTEXT_LIMIT=25000 "$BATON" run "Plan a thing" >../cli.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	events_of "$id" >../ev.json &&
	test_jq "[.[] | select(.type == \"context_compacted\") | .data] | length == 1 and .[0].how == \"prompt_sections\"" ../ev.json &&
	test_jq "[.[] | select(.type == \"agent_exited\" and .data.stage == \"plan\") | .data.failure] == [\"context\", \"none\"]" ../ev.json &&
	test $(wc -c <"$FAKE_STATE/$id.plan.2.prompt") -le 25000
'

test_done
