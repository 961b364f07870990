#!/bin/bash
test_description="baton's own agent on both wire formats (OpenAI Chat Completions, Anthropic Messages): the tool loop edits the worktree, every request and response is on record, the key is not"
. "$(dirname "$0")/../lib/test-lib.sh"

export MOCK_KEY=sk-mock-http-0123456789
cat >script.json <<-\EOF
{"rules": [
  {"match": "You are the planner", "text": "# Plan\n\n1. Add hello.txt; add a hi command to cli.sh.\n"},
  {"match": "You are the architect", "text": "# Design\n\nTwo small edits.\n"},
  {"match": "You are the implementer",
   "actions": [
     {"call": {"name": "list", "args": {"path": "."}}},
     {"call": {"name": "read_file", "args": {"path": "cli.sh"}}},
     {"call": {"name": "write_file", "args": {"path": "hello.txt", "content": "hello from baton\n"}}},
     {"call": {"name": "edit", "args": {"path": "cli.sh", "old": "greet) echo", "new": "greet|hi) echo"}}},
     {"call": {"name": "search", "args": {"pattern": "hello"}}},
     {"call": {"name": "run", "args": {"argv": ["make", "test"]}}}
   ],
   "text": "Added hello.txt and the hi command."},
  {"match": "You are fixing", "text": "Nothing left to fix."},
  {"match": "You are the reviewer", "text": "Fine.\nDECISION: APPROVED"},
  {"match": "You are the verifier", "text": "Fine.\nVERIFICATION: PASSED"}
]}
EOF
mock_start mock script.json --require-key "$MOCK_KEY"

for wire in openai anthropic; do
	case $wire in
	openai) url="$(mock_url mock)/v1" ;;
	anthropic) url=$(mock_url mock) ;;
	esac
	export wire url

	test_expect_success "$wire: setup" '
		make_repo $wire &&
		baton_init_with_agent $wire "providers:
  own:
    type: $wire
    model: mock-model
    base_url: \"$url\"
    api_key_env: MOCK_KEY
    max_retries: 0
    pricing: {input: 3, output: 15}
roles: {default: own}"
	'

	test_expect_success "$wire: a run reaches merge_ready" '
		cd $wire &&
		test_expect_code 0 "$BATON" run "Add hello.txt" >../$wire.out 2>../$wire.err &&
		newest_run >../$wire.id
	'

	test_expect_success "$wire: the tools changed the worktree" '
		cd $wire &&
		"$BATON" diff "$(cat ../$wire.id)" >../$wire.diff &&
		test_grep "+hello from baton" ../$wire.diff &&
		test_grep "+greet.hi) echo" ../$wire.diff
	'

	test_expect_success "$wire: usage, cost, steps and the HTTP record" '
		cd $wire &&
		"$BATON" show --json "$(cat ../$wire.id)" >../$wire.json &&
		test_jq "[.calls[] | select(.type == \"$wire\" and .failure == \"none\")] | length == 5" ../$wire.json &&
		test_jq "[.calls[] | select(.steps == 7)] | length == 1" ../$wire.json &&
		test_jq ".tokens_in == 1100 and .tokens_out == 220 and .cost_usd > 0" ../$wire.json &&
		dir=$(jq -r .run_dir ../$wire.json) &&
		ls "$dir"/calls/*execute*.http/007-request.json &&
		ls "$dir"/calls/*execute*.http/007-response.json &&
		test_must_fail grep -r -l "$MOCK_KEY" .baton/runs
	'
done

test_done
