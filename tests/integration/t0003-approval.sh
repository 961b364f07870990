#!/bin/bash
test_description='approval gates: approve, reject, request-changes'
. "$(dirname "$0")/../lib/test-lib.sh"

gate='policies: {require_approval_at_stages: [executing]}'

# start_gated_run NAME TASK: a repository NAME with the gate, and a run of
# TASK in the background (NAME.out, NAME.rc in the trash directory), waited
# for until it stands at the gate; its id goes to NAME.id.
start_gated_run() {
	local gated=$1
	make_repo "$gated" &&
		baton_init_with_agent "$gated" "$gate" &&
		(cd "$gated" && bg_start "$TRASH_DIRECTORY/$gated" "$BATON" run "$2") &&
		cd "$gated" &&
		wait_for 'test -n "$(newest_run)"' &&
		newest_run >"$TRASH_DIRECTORY/$gated.id" &&
		wait_for 'test "$(run_status "$(cat "$TRASH_DIRECTORY/$gated.id")")" = waiting_for_approval'
}

test_expect_success 'a gate on executing stops the run at waiting_for_approval' '
	start_gated_run a "Gated task" &&
	id=$(cat ../a.id) &&
	run_field "$id" gate_status >../gate &&
	echo executing >../expect &&
	test_cmp ../expect ../gate &&
	transitions "$id" | tail -n 2 >../actual &&
	printf "%s\n" architected waiting_for_approval >../expect &&
	test_cmp ../expect ../actual &&
	# the stage behind the gate has not run
	fake_calls "$id" execute >../calls &&
	test_line_count = 0 ../calls &&
	# and the foreground run is still waiting, not finished
	test_path_is_missing ../a.rc
'

test_expect_success 'approvals lists the waiting run (--json and text)' '
	cd a &&
	id=$(cat ../a.id) &&
	"$BATON" approvals --json >../list.json &&
	test_jq "length == 1 and .[0].run == \"$id\" and .[0].gate == \"executing\"" ../list.json &&
	"$BATON" approvals list --json >../list2.json &&
	test_cmp ../list.json ../list2.json &&
	"$BATON" approvals >../list.txt &&
	test_grep "$id" ../list.txt &&
	"$BATON" status --json >../status.json &&
	test_jq ".[0].status == \"waiting_for_approval\"" ../status.json
'

test_expect_success 'approvals approve lets the background run finish merge_ready (exit 0)' '
	cd a &&
	id=$(cat ../a.id) &&
	"$BATON" approvals approve "$id" >../approve.out &&
	test_grep "$id" ../approve.out &&
	rc=$(bg_wait ../a) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	transition_pairs "$id" >../pairs &&
	test_grep "^architected -> waiting_for_approval$" ../pairs &&
	test_grep "^waiting_for_approval -> executing$" ../pairs &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 1 ../calls &&
	"$BATON" approvals --json >../list.json &&
	test_jq "length == 0" ../list.json
'

test_expect_success 'approvals reject ends the run blocked; the run exits 3' '
	start_gated_run b "Rejected task" &&
	id=$(cat ../b.id) &&
	"$BATON" approvals reject "$id" >../reject.out &&
	rc=$(bg_wait ../b) &&
	test "$rc" = 3 &&
	test "$(run_status "$id")" = blocked &&
	transitions "$id" | tail -n 2 >../actual &&
	printf "%s\n" waiting_for_approval blocked >../expect &&
	test_cmp ../expect ../actual &&
	run_field "$id" reason >../reason &&
	test_grep "reject" ../reason &&
	fake_calls "$id" execute >../calls &&
	test_line_count = 0 ../calls
'

test_expect_success 'request-changes re-runs architecting with the guidance' '
	start_gated_run c "Task needing changes" &&
	id=$(cat ../c.id) &&
	"$BATON" approvals request-changes "$id" --guidance "use a flag table" >../rc.out &&
	# back through architecting to the same gate
	wait_for "test \"\$(transition_pairs $id | grep -c \"^waiting_for_approval -> architecting\$\")\" = 1" &&
	wait_for "test \"\$(transitions $id | grep -c \"^waiting_for_approval\$\")\" = 2" &&
	test "$(run_status "$id")" = waiting_for_approval &&
	fake_calls "$id" architect >../calls &&
	test_line_count = 2 ../calls &&
	test_grep "use a flag table" "$FAKE_STATE/$id.architect.2.prompt" &&
	test_grep ! "use a flag table" "$FAKE_STATE/$id.architect.1.prompt"
'

test_expect_success 'then approve: merge_ready, and the guidance was used once' '
	cd c &&
	id=$(cat ../c.id) &&
	"$BATON" approvals approve "$id" >/dev/null &&
	rc=$(bg_wait ../c) &&
	test "$rc" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	cat >../expect <<-\EOF &&
	created
	planning
	planned
	architecting
	architected
	waiting_for_approval
	architecting
	architected
	waiting_for_approval
	executing
	validating
	reviewing
	verifying
	merge_ready
	EOF
	transitions "$id" >../actual &&
	test_cmp ../expect ../actual &&
	test_grep ! "use a flag table" "$FAKE_STATE/$id.execute.1.prompt"
'

test_expect_success 'request-changes without --guidance is refused and changes nothing' '
	start_gated_run d "Needs guidance" &&
	id=$(cat ../d.id) &&
	v=$(run_field "$id" version) &&
	test_expect_code 1 "$BATON" approvals request-changes "$id" 2>../err &&
	test_grep "guidance" ../err &&
	test "$(run_field "$id" version)" = "$v" &&
	test "$(run_status "$id")" = waiting_for_approval &&
	"$BATON" approvals approve "$id" >/dev/null &&
	rc=$(bg_wait ../d) &&
	test "$rc" = 0
'

test_expect_success 'a gate with no live driver: approve, then resume drives it' '
	make_repo e &&
	baton_init_with_agent e "$gate" &&
	cd e &&
	bg_start ../e "$BATON" run "Driver goes away" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	# the terminal closes: SIGTERM to the foreground run
	kill -TERM "$(cat ../e.pid)" &&
	rc=$(bg_wait ../e) &&
	test "$rc" != 0 &&
	test "$(run_status "$id")" = waiting_for_approval &&
	"$BATON" approvals approve "$id" >../approve.out &&
	test_grep "baton resume" ../approve.out &&
	test_expect_code 0 "$BATON" resume "$id" >../resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready
'

test_expect_success 'a gate naming no stage is refused by config validate and by run, naming it, before anything is on record' '
	make_repo typo &&
	baton_init_with_agent typo "policies: {require_approval_at_stages: [exeucting]}" &&
	cd typo &&
	test_expect_code 1 "$BATON" config validate 2>../typo.err &&
	test_grep "require_approval_at_stages: .exeucting. is no stage or stage status of any pipeline" ../typo.err &&
	test_grep "execute (executing)" ../typo.err &&
	test_expect_code 1 "$BATON" run "Gated by a typo" 2>../typo-run.err &&
	test_grep "exeucting" ../typo-run.err &&
	test -z "$(newest_run)" &&
	# a stage name of another pipeline than the workflow one is a gate
	sed -i "s/exeucting/consolidating/" .baton/config.yaml &&
	"$BATON" config validate
'

test_done
