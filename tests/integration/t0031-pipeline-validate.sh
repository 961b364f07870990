#!/bin/bash
test_description='pipeline definitions: each validation rule of the seed names the stage and the rule; pipeline list and show for the bugfix pipeline'
. "$(dirname "$0")/../lib/test-lib.sh"

# expect_invalid NAME STAGE-RE RULE-RE STAGES-YAML [TYPE]
#
# A repository NAME whose config defines pipeline "bad" (of TYPE, default
# bugfix) with the stages STAGES-YAML (list items, indented six spaces).
# `baton pipeline validate` must fail (exit 1) with one message that names
# the stage (STAGE-RE, an extended regex) and the rule (RULE-RE), and
# points into the config file and at the pipeline. The message goes to NAME.err.
expect_invalid() {
	local name=$1 stage_re=$2 rule_re=$3 stages=$4 type=${5:-bugfix}
	make_repo "$name" &&
		baton_init_with_agent "$name" "pipelines:
  bad:
    type: $type
    stages:
$stages" &&
		(
			cd "$name" &&
				test_expect_code 1 "$BATON" pipeline validate >"../$name.out" 2>"../$name.err"
		) &&
		test_grep -E "$stage_re" "$name.err" &&
		test_grep -E "$rule_re" "$name.err" &&
		test_grep "config.yaml:[0-9]*:[0-9]*: " "$name.err" &&
		test_grep -E "pipelines\.bad|pipeline .?bad" "$name.err"
}

test_expect_success 'a valid bugfix pipeline of the repository validates' '
	make_repo good &&
	baton_init_with_agent good "pipelines:
  mine:
    type: bugfix
    description: one analyst, two reviewers at once
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}" &&
	cd good &&
	"$BATON" pipeline validate >../good.out 2>&1 &&
	"$BATON" config validate >../good2.out 2>&1
'

test_expect_success 'a type the pipeline type does not allow (plan in a bugfix pipeline)' '
	expect_invalid wrongtype "stages\[1\]|\(plan\)|.plan." "not allowed|may not|cannot" \
"      - {type: rca}
      - {type: plan}
      - {type: implementation}" &&
	test_grep "bugfix" wrongtype.err
'

test_expect_success 'a type the pipeline type does not allow (rca in a feature pipeline)' '
	expect_invalid wrongtype2 "stages\[1\]|\(rca\)|.rca." "not allowed|may not|cannot" \
"      - {type: plan}
      - {type: rca}
      - {type: execute}" feature &&
	test_grep "feature" wrongtype2.err
'

test_expect_success 'a singleton twice: two implementation stages' '
	expect_invalid twoimpl "stages\[2\]|implementation-2|\(implementation\)" "once|singleton|more than one|only one" \
"      - {type: rca}
      - {type: implementation}
      - {type: implementation}
      - {type: code-review}" &&
	test_grep "implementation" twoimpl.err
'

test_expect_success 'a singleton twice: two consolidate stages' '
	expect_invalid twocons "stages\[[0-9]\]|consolidate-2|\(consolidate\)" "once|singleton|more than one|only one" \
"      - {type: rca}
      - {type: consolidate}
      - {type: rca}
      - {type: consolidate}
      - {type: implementation}" &&
	test_grep "consolidate" twocons.err
'

test_expect_success 'no implementation stage' '
	expect_invalid noimpl "implementation" "no implementation|needs an implementation|without an implementation|must have an implementation|missing" \
"      - {type: rca}
      - {type: code-review}"
'

test_expect_success 'a provider that does not exist' '
	expect_invalid noprov "stages\[2\]|\(code-review\)|code-review" "nosuch" \
"      - {type: rca}
      - {type: implementation}
      - {type: code-review, provider: nosuch}" &&
	test_grep -E "not configured|no provider|unknown provider|does not exist" noprov.err
'

test_expect_success 'an unsafe model name: "x; rm -rf /"' '
	expect_invalid unsafe1 "stages\[2\]|\(code-review\)|code-review" "model" \
"      - {type: rca}
      - {type: implementation}
      - {type: code-review, model: \"x; rm -rf /\"}" &&
	test_grep -E "is unsafe|not a safe model name" unsafe1.err
'

test_expect_success 'an unsafe model name: "--evil"' '
	expect_invalid unsafe2 "stages\[0\]|\(rca\)|rca" "model" \
"      - {type: rca, model: \"--evil\"}
      - {type: implementation}" &&
	test_grep -E "is unsafe|not a safe model name" unsafe2.err &&
	test_grep -e "--evil" unsafe2.err
'

test_expect_success 'a lone parallel stage' '
	expect_invalid lone "stages\[2\] \(code-review-1\)" "parallel" \
"      - {type: rca}
      - {type: implementation}
      - {type: code-review, parallel: true}
      - {type: code-review}" &&
	test_grep -E "alone|lone|group|neighbour|neighbor|consecutive|at least two|2 or more|two or more" lone.err
'

test_expect_success 'phased_reviews on a stage that is not an implementation' '
	expect_invalid phasedbad "stages\[2\]|\(code-review\)|code-review" "phased_reviews" \
"      - {type: rca}
      - {type: implementation}
      - {type: code-review, phased_reviews: [{provider: fake}]}" &&
	test_grep "implementation" phasedbad.err
'

test_expect_success 'baton run refuses an invalid pipeline with the same message and creates nothing' '
	cd twoimpl &&
	test_expect_code 1 "$BATON" run --pipeline bad "A bug" >../run.out 2>../run.err &&
	test_grep -E "once|singleton|more than one|only one" ../run.err &&
	"$BATON" status --json >../status.json &&
	test_jq "length == 0" ../status.json
'

test_expect_success 'pipeline list shows feature, bugfix and the repository'"'"'s own' '
	cd good &&
	"$BATON" pipeline list >../list.txt &&
	test_grep "^feature  *built-in" ../list.txt &&
	test_grep "^bugfix  *built-in" ../list.txt &&
	test_grep "^mine  *config  *one analyst, two reviewers at once" ../list.txt &&
	"$BATON" pipeline list --json >../list.json &&
	test_jq "[.[] | .name] | sort == [\"assist\", \"bugfix\", \"express\", \"feature\", \"loop\", \"mine\", \"panel-review\", \"plan-only\", \"research\", \"security-review\"]" ../list.json &&
	test_jq "[.[] | select(.builtin) | .name] | sort == [\"assist\", \"bugfix\", \"express\", \"feature\", \"loop\", \"panel-review\", \"plan-only\", \"research\", \"security-review\"]" ../list.json
'

test_expect_success 'pipeline show bugfix: the stages with their roles' '
	cd good &&
	"$BATON" pipeline show bugfix >../show.txt &&
	for s in rca-1 rca-2 consolidate plan-review implementation \
		code-review-1 code-review-2 code-review-3 fix revise
	do
		test_grep -w -e "$s" ../show.txt || return 1
	done &&
	for r in analyst reviewer implementer fixer planner; do
		test_grep -w "$r" ../show.txt || return 1
	done &&
	"$BATON" pipeline show bugfix --json >../show.json &&
	test_jq ".name == \"bugfix\" and .terminal == \"merge_ready\"" ../show.json &&
	test_jq "[.stages[] | .name] | index(\"consolidate\") == 2" ../show.json &&
	test_jq "[.stages[] | select(.kind == \"rca\") | .role] == [\"analyst\", \"analyst\"]" ../show.json &&
	test_jq "[.stages[] | select(.kind == \"code-review\") | .status] == [\"reviewing_code_1\", \"reviewing_code_2\", \"reviewing_code_3\"]" ../show.json &&
	test_jq "[.stages[] | select(.kind == \"consolidate\")][0] | .status == \"consolidating\" and .done == \"diagnosed\"" ../show.json
'

test_expect_success 'pipeline show bugfix: the derived table has the seed loops' '
	cd good &&
	"$BATON" pipeline show bugfix --json >../show.json &&
	for e in "created analyzing_1" "analyzing_1 analyzing_2" "analyzing_2 consolidating" \
		"consolidating diagnosed" "reviewing_code_2 fixing" "fixing reviewing_code_2" \
		"reviewing_plan revising_plan" "revising_plan reviewing_plan" \
		"reviewing_code_3 merge_ready" "consolidating waiting_for_approval"
	do
		set -- $e &&
		test_jq "[.transitions[] | select(.from == \"$1\" and .to == \"$2\")] | length == 1" ../show.json || return 1
	done &&
	"$BATON" pipeline show bugfix >../show.txt &&
	test_grep "reviewing_code_2" ../show.txt &&
	test_grep "merge_ready" ../show.txt
'

test_expect_success 'pipeline show of a pipeline with a group shows the group' '
	cd good &&
	"$BATON" pipeline show mine --json >../mine.json &&
	test_jq "[.stages[] | select(.kind == \"code-review\") | .group] == [1, 1]" ../mine.json &&
	test_jq "[.stages[] | select(.kind == \"rca\") | .group // 0] == [0]" ../mine.json &&
	"$BATON" pipeline show mine >../mine.txt &&
	test_grep -i "group" ../mine.txt
'

test_done
