#!/bin/bash
test_description='conditional checks: a validate command with when_changed runs only when the change from the fork point touches its globs, and is listed as skipped otherwise'
. "$(dirname "$0")/../lib/test-lib.sh"

test_expect_success 'setup: checks on docs/** and on the edited file' '
	make_repo repo &&
	baton_init_with_agent repo "validate:
  commands:
    - make test
    - {run: \"echo docs-check\", when_changed: [\"docs/**\", \"**/*.md\"]}
    - run: echo feature-check
      when_changed: [\"feat?re.txt\"]
    - {run: \"false\", when_changed: [src]}
  timeout_seconds: 60" &&
	(cd repo && "$BATON" config validate)
'

test_expect_success 'a run that edits feature.txt runs the matching check and skips the rest' '
	(cd repo && "$BATON" run "Add a flag" >../run.out 2>&1) &&
	test_grep merge_ready run.out &&
	id=$(cd repo && newest_run) &&
	v=repo/.baton/runs/$id/validation.json &&
	test "$(jq -r .passed $v)" = true &&
	test "$(jq -r .skipped $v)" = 2 &&
	test "$(jq -r ".commands[1].skipped" $v)" = true &&
	jq -r ".commands[1].reason" $v >reason &&
	test_grep "none of the 1 path changed since" reason &&
	test_grep "matches when_changed" reason &&
	test "$(jq -r ".commands[1].when_changed[0]" $v)" = "docs/**" &&
	test "$(jq -r ".commands[2].matched" $v)" = feature.txt &&
	test "$(jq -r ".commands[2].exit_code" $v)" = 0 &&
	jq -r ".commands[2].output_tail" $v >tail &&
	test_grep feature-check tail &&
	test "$(jq -r ".commands[3].skipped" $v)" = true &&
	test "$(jq -r ".commands[0].skipped" $v)" = null
'

test_expect_success 'a change under src/ runs the failing conditional check and validation fails' '
	(cd repo && mkdir src && echo base >src/x.c && git add src &&
	 git commit -qm "add src" &&
	 FAKE_EDIT_FILE=src/x.c "$BATON" run "Edit src" >../run2.out 2>&1;
	 true) &&
	test_grep blocked run2.out &&
	id=$(cd repo && newest_run) &&
	v=repo/.baton/runs/$id/validation.json &&
	test "$(jq -r .passed $v)" = false &&
	test "$(jq -r ".commands[3].matched" $v)" = src/x.c &&
	test "$(jq -r ".commands[3].exit_code" $v)" = 1 &&
	test "$(jq -r ".commands[2].skipped" $v)" = true
'

test_expect_success 'config errors name file:line:col and the key' '
	make_repo bad &&
	baton_init_with_agent bad "validate:
  commands:
    - {run: make test, when_changed: [\"../outside\"]}" &&
	(cd bad && test_must_fail "$BATON" config validate >../bad.out 2>&1) &&
	test_grep "config.yaml:[0-9]*:[0-9]*: validate.commands\[0\].when_changed\[0\]: a .\.\.. segment leaves the repository" bad.out &&
	make_repo bad2 &&
	baton_init_with_agent bad2 "validate:
  commands:
    - {when_changed: [src]}" &&
	(cd bad2 && test_must_fail "$BATON" config validate >../bad2.out 2>&1) &&
	test_grep "config.yaml:[0-9]*:[0-9]*: validate.commands\[0\]: a command in map form needs .run." bad2.out &&
	make_repo bad3 &&
	baton_init_with_agent bad3 "validate:
  commands:
    - {run: x, whenchanged: [src]}" &&
	(cd bad3 && test_must_fail "$BATON" config validate >../bad3.out 2>&1) &&
	test_grep "config.yaml:[0-9]*:[0-9]*: .*whenchanged" bad3.out &&
	make_repo bad4 &&
	baton_init_with_agent bad4 "validate:
  commands:
    - {run: x, when_changed: []}" &&
	(cd bad4 && test_must_fail "$BATON" config validate >../bad4.out 2>&1) &&
	test_grep "config.yaml:[0-9]*:[0-9]*: validate.commands\[0\].when_changed: expected a non-empty list" bad4.out
'

test_done
