#!/bin/bash
test_description='Vibestrate flows as built-in pipelines: express, plan-only and security-review end to end with the scripted agent, listed with their descriptions; the security findings contract'
. "$(dirname "$0")/../lib/test-lib.sh"

test_expect_success 'baton pipeline list shows each flow with its description' '
	make_repo repo &&
	baton_init_with_agent repo &&
	(cd repo && "$BATON" pipeline list) >list &&
	test_grep "^express  *built-in  *build, validate, review and verify a change, without a plan" list &&
	test_grep "^plan-only  *built-in  *plan a change and review the plan without editing anything" list &&
	test_grep "^security-review  *built-in  *audit the code for security weaknesses" list &&
	(cd repo && "$BATON" pipeline validate)
'

test_expect_success 'express: execute, validate, review, verify, merge_ready' '
	(cd repo && "$BATON" run --pipeline express "Add a flag" >../ex.out 2>&1) &&
	id=$(cd repo && newest_run) &&
	cat >expect <<-\EOF &&
	created
	executing
	validating
	reviewing
	verifying
	merge_ready
	EOF
	(cd repo && transitions "$id") >actual &&
	test_cmp expect actual &&
	test_path_is_missing repo/.baton/runs/$id/plan.md
'

test_expect_success 'express: its fix loop goes through fixing and back to validating' '
	(cd repo && FAKE_REVIEW=CHANGES_REQUESTED,APPROVED "$BATON" run --pipeline express "Add another" >../ex2.out 2>&1) &&
	id=$(cd repo && newest_run) &&
	(cd repo && transitions "$id") >actual2 &&
	test_grep fixing actual2 &&
	test "$(tail -n 1 actual2)" = merge_ready
'

test_expect_success 'plan-only: plan, review of the plan (changes asked: replanned), completed, no edits' '
	(cd repo && FAKE_REVIEW=CHANGES_REQUESTED,APPROVED "$BATON" run --pipeline plan-only "Plan a flag" >../po.out 2>&1) &&
	id=$(cd repo && newest_run) &&
	cat >expect <<-\EOF &&
	created
	planning
	planned
	reviewing
	replanning
	replanned
	reviewing
	completed
	EOF
	(cd repo && transitions "$id") >actual &&
	test_cmp expect actual &&
	base=$(cd repo && run_field "$id" base_commit) &&
	test "$(cd repo && git rev-parse "baton/$id")" = "$base" &&
	ls repo/.baton/runs/$id/reports/*.md >/dev/null &&
	# the replan read the review it answers
	grep -l "Review of the plan to address" fake-state/$id.plan.2.prompt
'

write_secagent() {
	cat >"$1" <<-EOF &&
	#!/bin/sh
	if [ "\$BATON_STAGE_KIND" = review ]; then
		cat >"\$FAKE_STATE/sec.prompt"
		if [ "\${SEC_MODE:-}" = line ]; then
			echo "DECISION: APPROVED"; exit 0
		fi
		case "\${SEC_MODE:-good}" in
		good) printf "%s\n" "{\"decision\": \"CHANGES_REQUESTED\", \"summary\": \"one injection\", \"findings\": [{\"severity\": \"high\", \"file\": \"cli.sh\", \"line\": 5, \"category\": \"CWE-78\", \"evidence\": \"echo of \$\$2 unquoted\", \"message\": \"quote it\"}]}" ;;
		noline) printf "%s\n" "{\"decision\": \"APPROVED\", \"summary\": \"s\", \"findings\": [{\"severity\": \"low\", \"file\": \"cli.sh\", \"category\": \"CWE-1\", \"evidence\": \"e\"}]}" ;;
		badline) printf "%s\n" "{\"decision\": \"APPROVED\", \"summary\": \"s\", \"findings\": [{\"severity\": \"low\", \"file\": \"cli.sh\", \"line\": \"x\", \"category\": \"CWE-1\", \"evidence\": \"e\"}]}" ;;
		outside) printf "%s\n" "{\"decision\": \"APPROVED\", \"summary\": \"s\", \"findings\": [{\"severity\": \"low\", \"file\": \"../etc/passwd\", \"line\": 1, \"category\": \"CWE-1\", \"evidence\": \"e\"}]}" ;;
		nocat) printf "%s\n" "{\"decision\": \"APPROVED\", \"summary\": \"s\", \"findings\": [{\"severity\": \"low\", \"file\": \"a\", \"line\": 1, \"evidence\": \"e\"}]}" ;;
		esac >"\$BATON_OUT_DIR/review.json"
		echo "reviewed"
		exit 0
	fi
	exec "$FAKE_AGENT"
	EOF
	chmod +x "$1"
}

test_expect_success 'security-review: findings with severity, file, line, category and evidence are kept' '
	write_secagent "$PWD/sec.sh" &&
	make_repo sec &&
	baton_init_with_agent sec "providers:
  fake: {type: command, command: [\"$PWD/sec.sh\"]}
roles: {default: fake}" &&
	(cd sec && "$BATON" run --pipeline security-review "Audit cli.sh" >../sec.out 2>&1; true) &&
	id=$(cd sec && newest_run) &&
	v=sec/.baton/runs/$id/review.json &&
	test "$(jq -r ".findings[0].category" $v)" = CWE-78 &&
	test "$(jq -r ".findings[0].line" $v)" = 5 &&
	# an audit with findings ends completed: the findings are its product
	test "$(cd sec && run_status "$id")" = completed &&
	test "$(cd sec && run_field "$id" outcome)" = changes_requested &&
	# the checklist prompt, and nothing edited
	test_grep "security reviewer auditing code" fake-state/sec.prompt &&
	test_grep "CWE-89" fake-state/sec.prompt &&
	base=$(cd sec && run_field "$id" base_commit) &&
	test "$(cd sec && git rev-parse "baton/$id")" = "$base"
'

test_expect_success 'security-review: an approving audit ends completed' '
	cat >approve.sh <<-EOF &&
	#!/bin/sh
	if [ "\$BATON_STAGE_KIND" = review ]; then
		cat >/dev/null
		echo "{\"decision\": \"APPROVED\", \"summary\": \"clean\", \"findings\": []}" >"\$BATON_OUT_DIR/review.json"
		exit 0
	fi
	exec "$FAKE_AGENT"
	EOF
	chmod +x approve.sh &&
	make_repo clean &&
	baton_init_with_agent clean "providers:
  fake: {type: command, command: [\"$PWD/approve.sh\"]}
roles: {default: fake}" &&
	(cd clean && "$BATON" run --pipeline security-review "Audit" >../clean.out 2>&1) &&
	id=$(cd clean && newest_run) &&
	test "$(cd clean && run_status "$id")" = completed
'

for mode in noline badline outside nocat line
do
	test_expect_success "security-review: a malformed finding ($mode) is refused with a clear error" '
		(cd sec && SEC_MODE='$mode' test_must_fail "$BATON" run --pipeline security-review "Audit" >../bad-'$mode'.out 2>&1) &&
		id=$(cd sec && newest_run) &&
		test "$(cd sec && run_status "$id")" = blocked &&
		(cd sec && "$BATON" events "$id" --json) >bad-'$mode'.events
	'
done

test_expect_success 'the errors name the finding and the field' '
	test_grep "findings\[0\]: .line. is missing" bad-noline.events &&
	test_grep "findings\[0\].line: expected an integer from 1, got \\\\\"x\\\\\"" bad-badline.events &&
	test_grep "findings\[0\].file: .\.\./etc/passwd. is not a path inside the repository" bad-outside.events &&
	test_grep "findings\[0\]: .category. is missing" bad-nocat.events &&
	test_grep "a security review needs review.json with its findings" bad-line.events
'

test_expect_success 'stage keys prompt and findings are checked with file:line:col' '
	make_repo cfg &&
	baton_init_with_agent cfg "pipelines:
  p1:
    stages:
      - {kind: review, prompt: no-such-prompt}" &&
	(cd cfg && test_must_fail "$BATON" pipeline validate >../cfg1.out 2>&1) &&
	test_grep "config.yaml:[0-9]*:[0-9]*: .*prompt: expected the name of a built-in prompt" cfg1.out &&
	baton_init_with_agent cfg "pipelines:
  p2:
    stages:
      - {kind: plan, findings: security}" &&
	(cd cfg && test_must_fail "$BATON" pipeline validate >../cfg2.out 2>&1) &&
	test_grep "config.yaml:[0-9]*:[0-9]*: .*findings is only for review stages" cfg2.out &&
	baton_init_with_agent cfg "pipelines:
  p3:
    read_only: true
    stages: [plan]" &&
	(cd cfg && test_must_fail "$BATON" pipeline validate >../cfg3.out 2>&1) &&
	test_grep "config.yaml:[0-9]*:[0-9]*: .*read_only: a read-only pipeline changes nothing to merge: its terminal must be completed" cfg3.out
'

test_done
