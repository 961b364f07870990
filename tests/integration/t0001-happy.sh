#!/bin/bash
test_description='the happy path: init, run to merge_ready, and the record it leaves'
. "$(dirname "$0")/../lib/test-lib.sh"

test_expect_success 'baton init creates .baton/ with config, gitignore and store' '
	make_repo repo &&
	(cd repo && "$BATON" init >../init.out) &&
	test_path_is_file repo/.baton/config.yaml &&
	test_path_is_file repo/.baton/.gitignore &&
	test_path_is_file repo/.baton/baton.db &&
	test_grep "config.yaml" init.out &&
	# run state stays out of git: nothing under .baton/ but the
	# committable files shows up as untracked
	(cd repo && git status --porcelain --untracked-files=all) >untracked &&
	test_grep ! "baton.db" untracked &&
	test_grep "config.yaml" untracked
'

test_expect_success 'baton init is idempotent and keeps an existing config' '
	echo "# my edit" >>repo/.baton/config.yaml &&
	(cd repo && "$BATON" init >../init2.out) &&
	test_grep "kept" init2.out &&
	test_grep "# my edit" repo/.baton/config.yaml
'

test_expect_success 'baton init creates the API token, mode 0600, and keeps it' '
	test_path_is_file repo/.baton/token &&
	test "$(stat -c %a repo/.baton/token)" = 600 &&
	tok=$(cat repo/.baton/token) &&
	test ${#tok} = 64 &&
	test_grep "token" init.out &&
	(cd repo && "$BATON" init >../init3.out) &&
	test "$(cat repo/.baton/token)" = "$tok" &&
	test_grep "kept.*token" init3.out &&
	# the token is the one a serve uses, and a symlink is never taken
	make_repo linked &&
	mkdir -p linked/.baton &&
	ln -s "$PWD/elsewhere" linked/.baton/token &&
	(cd linked && test_must_fail "$BATON" init >../init4.out 2>&1) &&
	test_path_is_missing elsewhere &&
	test_grep "token" init4.out
'

test_expect_success 'setup: the fake agent plays every role' '
	baton_init_with_agent repo &&
	(cd repo && "$BATON" config validate)
'

test_expect_success 'baton run carries the task to merge_ready and exits 0' '
	cd repo &&
	test_expect_code 0 "$BATON" run "Add a --version flag to the CLI" >../run.out 2>../run.err &&
	newest_run >../run-id &&
	test -s ../run-id &&
	test_grep "merge_ready" ../run.out
'

test_expect_success 'the transitions are exactly the feature main line, in order' '
	cd repo &&
	id=$(cat ../run-id) &&
	cat >../expect <<-\EOF &&
	created
	planning
	planned
	architecting
	architected
	executing
	validating
	reviewing
	verifying
	merge_ready
	EOF
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual
'

test_expect_success 'each transition names its from, chained to the previous to' '
	cd repo &&
	id=$(cat ../run-id) &&
	"$BATON" events "$id" --json |
		jq -r "select(.type == \"transition\") | \"\(.from) \(.to)\"" >../pairs &&
	prev=null &&
	while read -r from to; do
		test "$from" = "$prev" || { echo "from $from after $prev"; exit 1; }
		prev=$to
	done <../pairs
'

test_expect_success 'every event has seq, ts and type' '
	cd repo &&
	id=$(cat ../run-id) &&
	"$BATON" events "$id" --json >../events.json &&
	jq -s . ../events.json >../events.all &&
	test_jq "length > 10 and all(.[]; (.seq | type) == \"number\" and (.ts | type) == \"string\" and (.type | type) == \"string\" and .run == \"$id\")" ../events.all
'

test_expect_success 'show --json has the record fields scripts rely on' '
	cd repo &&
	id=$(cat ../run-id) &&
	"$BATON" show "$id" --json >../show.json &&
	for k in id task status stage review_loops started_at updated_at ended_at worktree branch; do
		test_jq "has(\"$k\")" ../show.json ||
			{ echo "show --json lacks $k"; exit 1; }
	done &&
	test_jq ".id == \"$id\"" ../show.json &&
	test_jq ".task == \"Add a --version flag to the CLI\"" ../show.json &&
	test_jq ".status == \"merge_ready\"" ../show.json &&
	test_jq ".review_loops == 0" ../show.json &&
	test_jq ".branch == \"baton/$id\"" ../show.json &&
	test_jq "(.started_at | type) == \"string\" and (.updated_at | type) == \"string\" and (.ended_at | type) == \"string\"" ../show.json &&
	test_jq ".started_at <= .ended_at" ../show.json &&
	test -d "$(jq -r .worktree ../show.json)"
'

test_expect_success 'the branch baton/<id> holds a commit with the agent edit' '
	cd repo &&
	id=$(cat ../run-id) &&
	git rev-parse --verify -q "refs/heads/baton/$id" &&
	git log --format=%s "main..baton/$id" >../log &&
	test_line_count -ge 1 ../log &&
	git show "baton/$id:feature.txt" >../feature &&
	test_grep "feature line from $id" ../feature &&
	# the main branch is untouched
	test_must_fail git cat-file -e main:feature.txt
'

test_expect_success 'the worktree is clean at merge_ready' '
	cd repo &&
	id=$(cat ../run-id) &&
	wt=$(run_field "$id" worktree) &&
	git -C "$wt" status --porcelain >../dirty &&
	test_line_count = 0 ../dirty
'

test_expect_success 'baton diff shows the change' '
	cd repo &&
	id=$(cat ../run-id) &&
	"$BATON" diff "$id" >../diff &&
	test_grep "^+++ b/feature.txt" ../diff &&
	test_grep "^+feature line from $id" ../diff &&
	"$BATON" diff "$id" --stat >../diffstat &&
	test_grep "feature.txt" ../diffstat
'

test_expect_success 'events.jsonl holds exactly the events of baton events --json' '
	cd repo &&
	id=$(cat ../run-id) &&
	test_path_is_file ".baton/runs/$id/events.jsonl" &&
	"$BATON" events "$id" --json | jq -c . >../events.expect &&
	jq -c . ".baton/runs/$id/events.jsonl" >../events.actual &&
	test_cmp ../events.expect ../events.actual &&
	jq -r .seq ../events.actual >../seqs &&
	sort -n -u ../seqs >../seqs.sorted &&
	test_cmp ../seqs.sorted ../seqs
'

test_expect_success 'the run folder has every stage artifact' '
	cd repo &&
	id=$(cat ../run-id) &&
	for f in plan.md architecture.md execution.log validation.json \
		review.json review.md verification.json; do
		test_path_is_file ".baton/runs/$id/$f" || exit 1
		test -s ".baton/runs/$id/$f" || { echo "$f is empty"; exit 1; }
	done &&
	test_jq ".decision == \"APPROVED\"" ".baton/runs/$id/review.json" &&
	test_jq ".decision == \"PASSED\"" ".baton/runs/$id/verification.json" &&
	jq -e . ".baton/runs/$id/validation.json" >../validation &&
	test_grep "make test" ../validation
'

test_expect_success 'show --json lists the artifacts and the events' '
	cd repo &&
	id=$(cat ../run-id) &&
	"$BATON" show "$id" --json >../show.json &&
	jq -r ".artifacts[].artifact" ../show.json | sort -u >../arts &&
	for f in plan.md architecture.md execution.log validation.json review.json verification.json; do
		grep -qx "$f" ../arts || { echo "no $f in artifacts"; cat ../arts; exit 1; }
	done &&
	test_jq "(.events | length) == $("$BATON" events "$id" --json | wc -l)" ../show.json
'

test_expect_success 'every stage agent ran exactly once, with its environment' '
	cd repo &&
	id=$(cat ../run-id) &&
	cat >../expect <<-\EOF &&
	plan 0
	architect 0
	execute 0
	review 0
	verify 0
	EOF
	fake_calls "$id" >../actual &&
	test_cmp ../expect ../actual &&
	env=$FAKE_STATE/$id.review.1.env &&
	test_grep "^BATON_RUN_ID=$id$" "$env" &&
	test_grep "^BATON_STAGE=reviewing$" "$env" &&
	test_grep "^BATON_STAGE_KIND=review$" "$env" &&
	test_grep "^BATON_RUN_DIR=.*/.baton/runs/$id$" "$env" &&
	test_grep "^BATON_PROMPT_FILE=" "$env" &&
	test_grep "Add a --version flag to the CLI" "$FAKE_STATE/$id.plan.1.prompt"
'

test_expect_success 'status lists the run' '
	cd repo &&
	id=$(cat ../run-id) &&
	"$BATON" status >../status &&
	test_grep "^$id  *merge_ready" ../status &&
	"$BATON" status --json >../status.json &&
	test_jq "length == 1 and .[0].id == \"$id\" and .[0].status == \"merge_ready\"" ../status.json
'

test_expect_success 'a second run gets its own id, branch and worktree' '
	cd repo &&
	first=$(cat ../run-id) &&
	"$BATON" run "Add a --quiet flag" >/dev/null 2>&1 &&
	second=$(newest_run) &&
	test "$first" != "$second" &&
	git rev-parse --verify -q "refs/heads/baton/$second" &&
	test "$(run_field "$first" worktree)" != "$(run_field "$second" worktree)" &&
	"$BATON" status --json >../status.json &&
	test_jq "length == 2" ../status.json
'

test_done
