#!/bin/bash
test_description='the bugfix pipeline with scripted agents: consolidation of agreeing and disagreeing RCAs, same-stage re-review with versioned verdicts, and every terminal outcome'
. "$(dirname "$0")/../lib/test-lib.sh"

bug='greet prints an empty greeting for an empty name'

# bugfix_run REPO NAME [ENV=VALUE...]: a foreground bugfix run in REPO with
# the fake agent's knobs ENV=VALUE; its id goes to NAME.id, its output to
# NAME.out and its exit status to NAME.rc (all in the trash directory).
bugfix_run() {
	local repo=$1 name=$2 rc=0
	shift 2
	(cd "$repo" && env "$@" "$BATON" run --pipeline bugfix "$bug") \
		>"$TRASH_DIRECTORY/$name.out" 2>&1 || rc=$?
	echo "$rc" >"$TRASH_DIRECTORY/$name.rc"
	(cd "$repo" && newest_run) >"$TRASH_DIRECTORY/$name.id"
	test -s "$TRASH_DIRECTORY/$name.id"
}

# bugfix_bg REPO NAME [ENV=VALUE...]: the same in the background
# (bg_start NAME); waits until the run exists and writes NAME.id.
bugfix_bg() {
	local repo=$1 name=$2
	shift 2
	local before
	before=$(cd "$repo" && newest_run) &&
		(cd "$repo" && bg_start "$TRASH_DIRECTORY/$name" env "$@" "$BATON" run --pipeline bugfix "$bug") &&
		(cd "$repo" && wait_for 'test "$(newest_run)" != "$before"' && newest_run) >"$TRASH_DIRECTORY/$name.id"
}

# events_of RUN: the run's events as one JSON array.
events_of() {
	"$BATON" events "$1" --json | jq -s .
}

# count_events RUN TYPE: how many events of TYPE the run has.
count_events() {
	"$BATON" events "$1" --json | jq -r "select(.type == \"$2\") | .seq" | wc -l
}

# seq_of RUN JQ-FILTER: the seq of the first event the filter selects.
seq_of() {
	"$BATON" events "$1" --json | jq -r "select($2) | .seq" | head -n 1
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo &&
	(cd repo && "$BATON" pipeline show bugfix >../bugfix.txt)
'

# --- two agreeing RCAs ---------------------------------------------------

test_expect_success 'two agreeing RCAs: the default pipeline runs to merge_ready (exit 0)' '
	bugfix_run repo agree &&
	test "$(cat agree.rc)" = 0 &&
	cd repo &&
	id=$(cat ../agree.id) &&
	test "$(run_field "$id" pipeline)" = bugfix &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed
'

test_expect_success 'the transitions: two analyses, consolidation, plan review, implementation, three code reviews' '
	cd repo &&
	id=$(cat ../agree.id) &&
	cat >../expect <<-\EOF &&
	created
	analyzing_1
	analyzing_2
	consolidating
	diagnosed
	reviewing_plan
	implementing
	reviewing_code_1
	reviewing_code_2
	reviewing_code_3
	merge_ready
	EOF
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual
'

test_expect_success 'each agent stage ran once, with its kind, name, artifact and version' '
	cd repo &&
	id=$(cat ../agree.id) &&
	cat >../expect <<-\EOF &&
	rca 0 stage=rca-1 step=- steps=- version=1
	rca 0 stage=rca-2 step=- steps=- version=1
	plan-review 0 stage=plan-review step=- steps=- version=1
	implementation 0 stage=implementation step=- steps=- version=-
	code-review 0 stage=code-review-1 step=- steps=- version=1
	code-review 0 stage=code-review-2 step=- steps=- version=1
	code-review 0 stage=code-review-3 step=- steps=- version=1
	EOF
	fake_calls "$id" >../actual &&
	test_cmp ../expect ../actual &&
	dir=$PWD/.baton/runs/$id &&
	env=$FAKE_STATE/$id.stage-rca-1.1.env &&
	test_grep "^BATON_STAGE_KIND=rca$" "$env" &&
	test_grep "^BATON_STAGE=analyzing_1$" "$env" &&
	# the file to write is in the output folder of the call; baton
	# takes it from there into the run folder
	test_grep "^BATON_ARTIFACT=$dir/out/[^/]*-rca-1-fake-0/rca-fake-default-1-v1.json$" "$env" &&
	test_path_is_file "$dir/rca-fake-default-1-v1.json" &&
	test_grep "^BATON_OUTPUT_VERSION=1$" "$env" &&
	env=$FAKE_STATE/$id.stage-code-review-3.1.env &&
	test_grep "^BATON_STAGE=reviewing_code_3$" "$env" &&
	test_grep "^BATON_ARTIFACT=$dir/out/[^/]*-code-review-3-fake-0/code-review-fake-default-3-v1.json$" "$env" &&
	test_path_is_file "$dir/code-review-fake-default-3-v1.json"
'

test_expect_success 'the run folder holds the versioned records and what consolidation wrote' '
	cd repo &&
	id=$(cat ../agree.id) &&
	dir=.baton/runs/$id &&
	for f in rca-fake-default-1-v1.json rca-fake-default-2-v1.json \
		plan-review-fake-default-1-v1.json impl-result.json \
		code-review-fake-default-1-v1.json code-review-fake-default-2-v1.json \
		code-review-fake-default-3-v1.json diagnosis.json user-story.json \
		fix-plan.json
	do
		test_path_is_file "$dir/$f" || return 1
	done &&
	test_path_is_missing "$dir/code-review-fake-default-1-v2.json" &&
	test_jq ".agreed == true and .choice == \"merge\"" "$dir/diagnosis.json" &&
	test_jq ".root_cause.root_file == \"cli.sh\"" "$dir/diagnosis.json" &&
	test_jq "(.sources | sort) == [\"rca-1\", \"rca-2\"]" "$dir/diagnosis.json" &&
	test_jq ".pipeline_type == \"bug-fix\" and .requirements.root_file == \"cli.sh\"" "$dir/user-story.json" &&
	test_jq "[.acceptance_criteria[].id] == [\"AC1\", \"AC2\", \"AC3\", \"AC4\"]" "$dir/user-story.json" &&
	test_jq "(.steps | length) == 3 and .test_plan.commands == [\"make test\"]" "$dir/fix-plan.json" &&
	test_jq ".status == \"complete\"" "$dir/impl-result.json"
'

test_expect_success 'the events: one rca per analysis, consolidated as agreed, a verdict per review' '
	cd repo &&
	id=$(cat ../agree.id) &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"rca\") | .data.stage] == [\"rca-1\", \"rca-2\"]" ../events.json &&
	test_jq "[.[] | select(.type == \"rca\") | .data.root_file] == [\"cli.sh\", \"cli.sh\"]" ../events.json &&
	test_jq "[.[] | select(.type == \"consolidated\")] | length == 1 and .[0].data.agreed == true" ../events.json &&
	test_jq "[.[] | select(.type == \"question\")] | length == 0" ../events.json &&
	jq -r ".[] | select(.type == \"verdict\") | \"\(.data.stage) v\(.data.version) \(.data.status)\"" ../events.json >../verdicts &&
	cat >../expect <<-\EOF &&
	plan-review v1 approved
	code-review-1 v1 approved
	code-review-2 v1 approved
	code-review-3 v1 approved
	EOF
	test_cmp ../expect ../verdicts
'

test_expect_success 'progressive enrichment: each stage reads the key results before it' '
	cd repo &&
	id=$(cat ../agree.id) &&
	# the second analyst sees the first one'"'"'s root cause
	test_grep "found by rca-1" "$FAKE_STATE/$id.stage-rca-2.1.prompt" &&
	# the implementer sees the plan review; the reviewers the implementation
	test_grep "fake plan-review review 1" "$FAKE_STATE/$id.implementation.1.prompt" &&
	test_grep "fake implementation 1" "$FAKE_STATE/$id.stage-code-review-1.1.prompt" &&
	test_grep "fake code-review-1 review 1" "$FAKE_STATE/$id.stage-code-review-2.1.prompt"
'

test_expect_success 'the fix is on the run branch' '
	cd repo &&
	id=$(cat ../agree.id) &&
	git show "baton/$id:feature.txt" >../feature &&
	test_grep "bugfix line from $id (implementation 1)" ../feature
'

# --- two disagreeing RCAs -------------------------------------------------

test_expect_success 'two disagreeing RCAs: the run waits at the consolidation question' '
	bugfix_bg repo split FAKE_RCA_FILES=src/a.c,src/b.c &&
	cd repo &&
	id=$(cat ../split.id) &&
	wait_for_status "$id" waiting_for_approval &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"question\")] | length == 1" ../events.json &&
	jq "[.[] | select(.type == \"question\")][0].data" ../events.json >../question.json &&
	test_jq ".kind == \"diagnosis\" and .stage == \"consolidate\"" ../question.json &&
	test_jq ".question | (contains(\"src/a.c\") and contains(\"src/b.c\"))" ../question.json &&
	test_jq ".question | (contains(\"rca-1\") and contains(\"rca-2\") and contains(\"all\"))" ../question.json &&
	test "$(run_field "$id" gate_status)" = consolidating &&
	test_jq "[.[] | select(.type == \"consolidated\")] | length == 0" ../events.json &&
	# nothing after consolidation has started
	fake_calls "$id" plan-review >../calls &&
	test_line_count = 0 ../calls &&
	test_path_is_missing ../split.rc &&
	"$BATON" approvals --json >../list.json &&
	test_jq "length == 1 and .[0].run == \"$id\"" ../list.json
'

test_expect_success 'the question event lists the options: each RCA and all' '
	cd repo &&
	id=$(cat ../split.id) &&
	events_of "$id" >../events.json &&
	jq "[.[] | select(.type == \"question\")][0].data" ../events.json >../question.json &&
	test_jq ".options == [\"rca-1\", \"rca-2\", \"all\"]" ../question.json
'

test_expect_success 'an answer that names no RCA is not taken: the same question again' '
	cd repo &&
	id=$(cat ../split.id) &&
	"$BATON" approvals approve "$id" --guidance rca-9 >../bad.out 2>&1 &&
	wait_for "test \"\$(count_events $id question)\" = 2" &&
	wait_for_status "$id" waiting_for_approval &&
	events_of "$id" >../events.json &&
	jq "[.[] | select(.type == \"question\")][1].data" ../events.json >../question.json &&
	test_jq ".kind == \"diagnosis\" and (.question | contains(\"rca-9\"))" ../question.json &&
	test_jq "[.[] | select(.type == \"consolidated\")] | length == 0" ../events.json &&
	test_path_is_missing ".baton/runs/$id/diagnosis.json" &&
	fake_calls "$id" plan-review >../calls &&
	test_line_count = 0 ../calls
'

test_expect_success 'approve --guidance rca-2: the run continues with that diagnosis to merge_ready' '
	cd repo &&
	id=$(cat ../split.id) &&
	"$BATON" approvals approve "$id" --guidance rca-2 >../approve.out &&
	rc=$(bg_wait ../split) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed &&
	dir=.baton/runs/$id &&
	test_jq ".agreed == false and .choice == \"rca-2\"" "$dir/diagnosis.json" &&
	test_jq ".root_cause.root_file == \"src/b.c\"" "$dir/diagnosis.json" &&
	test_jq ".requirements.root_file == \"src/b.c\"" "$dir/user-story.json" &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"consolidated\")][0].data | .agreed == false and .choice == \"rca-2\"" ../events.json &&
	transitions "$id" >../actual &&
	test_grep "^waiting_for_approval$" ../actual &&
	sed -n "/^waiting_for_approval$/,\$p" ../actual >../after &&
	test_grep "^diagnosed$" ../after &&
	test "$(tail -n 1 ../actual)" = merge_ready &&
	run_field "$id" progress >../progress &&
	test_jq ".choice == \"rca-2\"" ../progress &&
	fake_calls "$id" rca >../calls &&
	test_line_count = 2 ../calls
'

test_expect_success 'approve --guidance all: every RCA contributes to the diagnosis' '
	bugfix_bg repo all FAKE_RCA_FILES=src/a.c,src/b.c &&
	cd repo &&
	id=$(cat ../all.id) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals approve "$id" --guidance all >/dev/null &&
	rc=$(bg_wait ../all) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	test_jq ".choice == \"all\" and (.sources | sort) == [\"rca-1\", \"rca-2\"]" ".baton/runs/$id/diagnosis.json" &&
	test_jq "(.scope.affected_files | sort) == [\"src/a.c\", \"src/b.c\"]" ".baton/runs/$id/user-story.json"
'

# --- same-stage re-review -----------------------------------------------

test_expect_success 'code-review-2 says needs_changes, then approved: merge_ready' '
	bugfix_run repo rereview FAKE_VERDICT_CODE_REVIEW_2=needs_changes,approved &&
	test "$(cat rereview.rc)" = 0 &&
	cd repo &&
	id=$(cat ../rereview.id) &&
	test "$(run_status "$id")" = merge_ready &&
	test "$(run_field "$id" outcome)" = completed
'

test_expect_success 'both versions of its verdict are kept; the other reviews have one' '
	cd repo &&
	id=$(cat ../rereview.id) &&
	dir=.baton/runs/$id &&
	test_jq ".status == \"needs_changes\" and (.findings | length) == 1" "$dir/code-review-fake-default-2-v1.json" &&
	test_jq ".status == \"approved\"" "$dir/code-review-fake-default-2-v2.json" &&
	test_path_is_missing "$dir/code-review-fake-default-2-v3.json" &&
	test_path_is_file "$dir/code-review-fake-default-1-v1.json" &&
	test_path_is_missing "$dir/code-review-fake-default-1-v2.json" &&
	test_path_is_file "$dir/code-review-fake-default-3-v1.json" &&
	test_path_is_missing "$dir/code-review-fake-default-3-v2.json"
'

test_expect_success 'the same stage index re-reviewed the fix, with the next version' '
	cd repo &&
	id=$(cat ../rereview.id) &&
	fake_calls "$id" | grep -v "^rca \|^plan-review \|^implementation " >../actual &&
	cat >../expect <<-\EOF &&
	code-review 0 stage=code-review-1 step=- steps=- version=1
	code-review 0 stage=code-review-2 step=- steps=- version=1
	fix 0 stage=fix step=- steps=- version=-
	code-review 0 stage=code-review-2 step=- steps=- version=2
	code-review 0 stage=code-review-3 step=- steps=- version=1
	EOF
	test_cmp ../expect ../actual &&
	transition_pairs "$id" >../pairs &&
	test_grep "^reviewing_code_2 -> fixing$" ../pairs &&
	test_grep "^fixing -> reviewing_code_2$" ../pairs &&
	test_grep ! "^fixing -> reviewing_code_1$" ../pairs &&
	test_grep ! "^fixing -> reviewing_code_3$" ../pairs &&
	# the fixer read the finding
	test_grep "code-review-2 (call [0-9]*): the change misses a case" "$FAKE_STATE/$id.fix.1.prompt" &&
	test "$(run_field "$id" review_loops)" = 1 &&
	run_field "$id" progress >../progress &&
	test_jq ".stages[\"code-review-2\"].version == 2 and .stages[\"code-review-2\"].status == \"approved\"" ../progress
'

test_expect_success 'code-review-3 started only after code-review-2 approved (event order)' '
	cd repo &&
	id=$(cat ../rereview.id) &&
	events_of "$id" >../events.json &&
	jq -r ".[] | select(.type == \"verdict\") | \"\(.data.stage) v\(.data.version) \(.data.status)\"" ../events.json >../verdicts &&
	cat >../expect <<-\EOF &&
	plan-review v1 approved
	code-review-1 v1 approved
	code-review-2 v1 needs_changes
	code-review-2 v2 approved
	code-review-3 v1 approved
	EOF
	test_cmp ../expect ../verdicts &&
	approved=$(seq_of "$id" ".type == \"verdict\" and .data.stage == \"code-review-2\" and .data.status == \"approved\"") &&
	started=$(seq_of "$id" ".type == \"stage_started\" and .data.stage == \"code-review-3\"") &&
	test -n "$approved" && test -n "$started" &&
	test "$started" -gt "$approved" &&
	# code-review-2 started twice, code-review-3 once, after both
	test_jq "[.[] | select(.type == \"stage_started\") | .data.stage | select(startswith(\"code-review\"))] == [\"code-review-1\", \"code-review-2\", \"code-review-2\", \"code-review-3\"]" ../events.json
'

# --- terminal outcomes ----------------------------------------------------

test_expect_success 'outcome max_iterations_reached: reviews keep asking for changes, a person rejects going on' '
	make_repo maxit &&
	baton_init_with_agent maxit "pipelines:
  tight:
    type: bugfix
    max_iterations: 2
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review}" &&
	cd maxit &&
	before=$(newest_run) &&
	bg_start ../maxit env FAKE_VERDICT=needs_changes "$BATON" run --pipeline tight "Tight: $bug" &&
	wait_for "test \"\$(newest_run)\" != \"$before\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"question\")][-1].data | .kind == \"restart\" and .options == [\"restart-rca\", \"revise-plan\", \"continue\"] and .outcome == \"max_iterations_reached\"" ../events.json &&
	"$BATON" approvals reject "$id" >/dev/null &&
	rc=$(bg_wait ../maxit) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = max_iterations_reached &&
	run_field "$id" reason >../reason &&
	test_grep "max_iterations" ../reason &&
	test_grep "a person rejected going on" ../reason &&
	fake_calls "$id" fix >../fixes &&
	test_line_count = 2 ../fixes &&
	fake_calls "$id" code-review >../reviews &&
	test_line_count = 3 ../reviews &&
	test_path_is_file ".baton/runs/$id/code-review-fake-default-1-v3.json" &&
	test_path_is_missing ".baton/runs/$id/code-review-fake-default-1-v4.json"
'

test_expect_success 'outcome plan_rejected: the plan review rejects, the person rejects at the question' '
	bugfix_bg repo planrej FAKE_VERDICT_PLAN_REVIEW=rejected &&
	cd repo &&
	id=$(cat ../planrej.id) &&
	wait_for_status "$id" waiting_for_approval &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"question\")][-1].data.kind == \"plan_rejected\"" ../events.json &&
	fake_calls "$id" implementation >../calls &&
	test_line_count = 0 ../calls &&
	"$BATON" approvals reject "$id" >/dev/null &&
	rc=$(bg_wait ../planrej) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = plan_rejected &&
	fake_calls "$id" implementation >../calls &&
	test_line_count = 0 ../calls
'

test_expect_success 'outcome code_rejected: the last code review rejects, a person rejects going on' '
	bugfix_bg repo coderej FAKE_VERDICT_CODE_REVIEW_3=rejected &&
	cd repo &&
	id=$(cat ../coderej.id) &&
	wait_for_status "$id" waiting_for_approval &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"question\")][-1].data | .kind == \"restart\" and .stage == \"code-review-3\" and .outcome == \"code_rejected\"" ../events.json &&
	"$BATON" approvals reject "$id" >/dev/null &&
	rc=$(bg_wait ../coderej) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = code_rejected &&
	test_jq ".status == \"rejected\"" ".baton/runs/$id/code-review-fake-default-3-v1.json" &&
	fake_calls "$id" fix >../fixes &&
	test_line_count = 0 ../fixes
'

test_expect_success 'outcome implementation_failed: the implementer reports failed, a person rejects going on' '
	bugfix_bg repo implfail FAKE_IMPL_STATUS=failed &&
	cd repo &&
	id=$(cat ../implfail.id) &&
	wait_for_status "$id" waiting_for_approval &&
	events_of "$id" >../events.json &&
	test_jq "[.[] | select(.type == \"question\")][-1].data | .kind == \"restart\" and .stage == \"implementation\" and .outcome == \"implementation_failed\"" ../events.json &&
	"$BATON" approvals reject "$id" >/dev/null &&
	rc=$(bg_wait ../implfail) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = implementation_failed &&
	fake_calls "$id" code-review >../reviews &&
	test_line_count = 0 ../reviews
'

test_expect_success 'outcome gate_rejected: the person rejects at the consolidation question' '
	bugfix_bg repo gaterej FAKE_RCA_FILES=src/a.c,src/b.c &&
	cd repo &&
	id=$(cat ../gaterej.id) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals reject "$id" >/dev/null &&
	rc=$(bg_wait ../gaterej) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = blocked &&
	test "$(run_field "$id" outcome)" = gate_rejected &&
	test_path_is_missing ".baton/runs/$id/fix-plan.json" &&
	fake_calls "$id" plan-review >../calls &&
	test_line_count = 0 ../calls
'

test_expect_success 'the outcomes are distinct, and a feature run records completed too' '
	cd repo &&
	for n in agree split rereview planrej coderej implfail gaterej; do
		echo "$n $(run_field "$(cat ../$n.id)" outcome)" || return 1
	done >../actual &&
	cat >../expect <<-\EOF &&
	agree completed
	split completed
	rereview completed
	planrej plan_rejected
	coderej code_rejected
	implfail implementation_failed
	gaterej gate_rejected
	EOF
	test_cmp ../expect ../actual &&
	test_expect_code 0 "$BATON" run "A feature run" >../feature.out 2>&1 &&
	test "$(run_field "$(newest_run)" outcome)" = completed
'

test_done
