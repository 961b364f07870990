#!/bin/bash
test_description='a different agent per role: --role flags put codex on the implementation and claude on the review; several reviewers on one stage must all approve'
. "$(dirname "$0")/../lib/test-lib.sh"

export MOCK_KEY=sk-mock-roles-0123456789
feature_script script.json "hello from codex"
mock_start mock script.json

# A second model that asks for changes until the fixer adds fixed.txt.
cat >strict.json <<-\EOF
{"rules": [
  {"match": "fixed.txt", "text": "Now it is complete.\nDECISION: APPROVED\nVERIFICATION: PASSED"},
  {"match": "You are the reviewer", "text": "Needs a note.\nDECISION: CHANGES_REQUESTED"},
  {"match": "You are fixing",
   "actions": [{"call": {"name": "write_file", "args": {"path": "fixed.txt", "content": "a note\n"}}}],
   "text": "Added the note."},
  {"text": "OK"}
]}
EOF
mock_start strict strict.json

test_expect_success 'setup: claude, codex and two of baton'"'"'s own agents' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  claude: {type: claude-code, command: [\"$AGENTS_BIN/claude\"], model: claude-sonnet-4-5, base_url: \"$(mock_url mock)\", api_key_env: MOCK_KEY, max_retries: 0}
  codex: {type: codex, command: [\"$AGENTS_BIN/codex\"], model: mock-model, base_url: \"$(mock_url mock)/v1\", api_key_env: MOCK_KEY, max_retries: 0}
  easy: {type: openai, model: mock-model, base_url: \"$(mock_url mock)/v1\", api_key_env: MOCK_KEY, max_retries: 0}
  strict: {type: anthropic, model: mock-model, base_url: \"$(mock_url strict)\", api_key_env: MOCK_KEY, max_retries: 0}
roles: {default: easy}"
'

test_expect_success 'an unknown provider in --role is refused, naming it' '
	cd repo &&
	test_expect_code 1 "$BATON" run --role reviewer=nobody "x" 2>../bad.err &&
	test_grep "flag --role" ../bad.err &&
	test_grep "nobody" ../bad.err
'

if { [ -x "$AGENTS_BIN/claude" ] && [ -x "$AGENTS_BIN/codex" ]; } ||
	[ "${BATON_TEST_REQUIRE_AGENTS:-0}" = 1 ]; then
	test_expect_success 'implementer codex, reviewer claude: the events name who did each stage' '
		cd repo &&
		test_expect_code 0 "$BATON" run --role implementer=codex --role reviewer=claude \
			"Add hello.txt" >../mixed.out 2>../mixed.err &&
		id=$(newest_run) &&
		"$BATON" show --json "$id" >../mixed.json &&
		jq -r ".calls[] | \"\(.call | split(\"-\")[1]) \(.provider)\"" ../mixed.json >../who &&
		printf "%s\n" "plan easy" "architect easy" "execute codex" "review claude" "verify easy" >../expect &&
		test_cmp ../expect ../who &&
		"$BATON" diff "$id" >../mixed.diff &&
		test_grep "+hello from codex" ../mixed.diff
	'
else
	say "# skipped the claude+codex run: the CLIs are not installed (tools/agents.sh)"
fi

test_expect_success 'two reviewers: one asks for changes, so the run loops until both approve' '
	cd repo &&
	test_expect_code 0 "$BATON" run --role reviewer=easy,strict --role fixer=strict \
		"Add hello.txt" >../two.out 2>../two.err &&
	id=$(newest_run) &&
	"$BATON" show --json "$id" >../two.json &&
	jq -c "[.events[] | select(.type == \"reviews\") | .data]" ../two.json >../reviews &&
	echo "[{\"stage\":\"review\",\"decision\":\"CHANGES_REQUESTED\",\"by\":{\"easy\":\"APPROVED\",\"strict\":\"CHANGES_REQUESTED\"}},{\"stage\":\"review\",\"decision\":\"APPROVED\",\"by\":{\"easy\":\"APPROVED\",\"strict\":\"APPROVED\"}}]" >../expect &&
	test_cmp ../expect ../reviews &&
	dir=$(jq -r .run_dir ../two.json) &&
	test_path_is_file "$dir/review-easy.md" &&
	test_path_is_file "$dir/review-strict.md" &&
	test_grep "Review by strict" "$dir/review.md"
'


test_expect_success 'a stage'"'"'s model overrides its provider'"'"'s, for that stage only' '
	cd repo &&
	cat >>.baton/config.yaml <<-\EOF &&
	pipelines:
	  modeled:
	    stages:
	      - {name: plan, kind: plan, model: mock-planner}
	      - {name: execute, kind: execute}
	      - {name: review, kind: review, model: mock-reviewer}
	      - {name: verify, kind: verify}
	EOF
	before=$(wc -l <../mock.log) &&
	test_expect_code 0 "$BATON" run --pipeline modeled "Add hello.txt" >../modeled.out 2>&1 &&
	tail -n +$((before + 1)) ../mock.log >../modeled.log &&
	# the rule each request matched (feature_script): 0 plan, 2 implement,
	# 4 review, 5 verify
	jq -s -c "[.[] | select(.status == 200) | [.rule, .model]] | unique" ../modeled.log >../actual &&
	echo "[[0,\"mock-planner\"],[2,\"mock-model\"],[4,\"mock-reviewer\"],[5,\"mock-model\"]]" >../expect &&
	test_cmp ../expect ../actual
'

test_done
