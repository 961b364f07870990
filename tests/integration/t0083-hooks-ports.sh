#!/bin/bash
test_description='hooks: each worktree gets a TCP port of its own, distinct across runs made in parallel, kept on resume, and never another run'\''s'
. "$(dirname "$0")/../lib/test-lib.sh"

# Every execute agent waits until the test releases it, so the runs overlap.
export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow
export FAKE_WAIT_FOR=$FAKE_STATE/release

# The agent notes the port it was given, then is the fake agent.
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-EOF &&
	#!/bin/sh
	echo "\$BATON_RUN_ID \$BATON_PORT" >>"$FAKE_STATE/agent.log"
	exec "$FAKE_AGENT" "\$@"
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

port_config() {
	cat <<-EOF
	providers:
	  fake: {type: command, command: ["$TRASH_DIRECTORY/agent"]}
	hooks:
	  worktree_setup: ["echo \$BATON_RUN_ID \$BATON_PORT >>$FAKE_STATE/setup.log"]
	  before_merge: ["echo \$BATON_RUN_ID \$BATON_PORT >>$FAKE_STATE/merge.log"]
	  worktree_teardown: ["echo \$BATON_RUN_ID \$BATON_PORT \$(cat feature.txt | wc -l) >>$FAKE_STATE/teardown.log"]
	EOF
}

test_expect_success 'setup: four runs started at once in one repository' '
	write_agent &&
	make_repo repo &&
	baton_init_with_agent repo "$(port_config)" &&
	cd repo &&
	for i in 1 2 3 4; do
		bg_start "$TRASH_DIRECTORY/run$i" "$BATON" run "Parallel change $i" || exit 1
	done &&
	wait_for "test \$(\"\$BATON\" status --json | jq \"[.[] | select(.status == \\\"executing\\\")] | length\") = 4" 120
'

test_expect_success 'the agents see distinct ports, the same their setup hooks saw' '
	cd repo &&
	test_line_count = 4 "$FAKE_STATE/setup.log" &&
	cut -d" " -f2 "$FAKE_STATE/setup.log" | sort -u >../ports &&
	test_line_count = 4 ../ports &&
	ls .baton/ports | sort >../claims &&
	sort -n ../ports >../p1 && sort -n ../claims >../p2 &&
	test_cmp ../p1 ../p2 &&
	sort -u "$FAKE_STATE/agent.log" >../agent-ports &&
	sort "$FAKE_STATE/setup.log" >../setup-ports &&
	test_cmp ../setup-ports ../agent-ports &&
	while read -r id port <&3; do
		test "$(cat ".baton/runs/$id/port")" = "$port" &&
		test "$(cat ".baton/ports/$port")" = "$id" &&
		"$BATON" events "$id" --json </dev/null >../ev &&
		test "$(jq -s "map(select(.type == \"worktree\"))[0].data.port" ../ev)" = "$port" ||
			exit 1
	done 3<"$FAKE_STATE/setup.log"
'

test_expect_success 'the runs finish on their ports' '
	cd repo &&
	: >"$FAKE_STATE/release" &&
	for i in 1 2 3 4; do
		test "$(bg_wait "$TRASH_DIRECTORY/run$i")" = 0 || exit 1
	done
'

test_expect_success 'a run whose port file names another run port gets a port of its own' '
	cd repo &&
	set -- $(sed -n 1p "$FAKE_STATE/setup.log") && a=$1 aport=$2 &&
	set -- $(sed -n 2p "$FAKE_STATE/setup.log") && b=$1 bport=$2 &&
	echo "$aport" >".baton/runs/$b/port" &&
	test_expect_code 0 "$BATON" merge "$b" >../merge.out 2>&1 &&
	set -- $(cat "$FAKE_STATE/merge.log") &&
	test "$1" = "$b" &&
	test "$2" != "$aport" &&
	test "$(cat ".baton/ports/$aport")" = "$a" &&
	test "$(cat ".baton/ports/$2")" = "$b"
'

test_expect_success 'baton clean runs worktree_teardown in each worktree, removes it and releases its port' '
	cd repo &&
	ids=$(cut -d" " -f1 "$FAKE_STATE/setup.log") &&
	"$BATON" clean --yes $ids >../clean.out &&
	merged=$(sed -n 2p "$FAKE_STATE/setup.log" | cut -d" " -f1) &&
	test "$(grep -c "^r[0-9]*-[^:]*: removed worktree; keep branch baton/r[0-9]*-[^:]*: 1 commit on no remote and not merged into main (merge_ready)" ../clean.out)" = 3 &&
	test_grep "^$merged: removed worktree, branch baton/$merged, run folder (merge_ready)" ../clean.out &&
	test_line_count = 4 "$FAKE_STATE/teardown.log" &&
	for id in $ids; do
		grep -q "^$id [0-9]* 1\$" "$FAKE_STATE/teardown.log" &&
		test_path_is_missing ".baton/worktrees/$id" &&
		test_path_is_missing ".git/worktrees/$id" &&
		test_path_is_missing ".baton/runs/$id/port" &&
		{ test "$id" = "$merged" ||
		  git rev-parse --verify -q "baton/$id" >/dev/null; } &&
		"$BATON" events "$id" --json </dev/null >../ev &&
		test "$(jq -s "map(select(.type == \"worktree_removed\"))[0].data.port > 0" ../ev)" = true ||
			exit 1
	done &&
	ls .baton/ports >../left &&
	test_line_count = 0 ../left &&
	git worktree list >../list &&
	test_grep ! "\.baton/worktrees/r" ../list &&
	"$BATON" clean --yes $ids >../again.out &&
	test "$(grep -c ": keep branch baton/r[0-9]*-[^:]*: 1 commit on no remote" ../again.out)" = 3 &&
	test_grep "^$merged: nothing left to remove" ../again.out
'

test_expect_success 'baton clean refuses a run that has not ended' '
	make_repo live &&
	baton_init_with_agent live &&
	cd live &&
	bg_start "$TRASH_DIRECTORY/live" "$BATON" run "Still running" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	rm -f "$FAKE_STATE/release" &&
	wait_for_status "$id" executing &&
	"$BATON" clean --yes "$id" >../refused &&
	test_grep "^$id: keep: it has not ended (executing)" ../refused &&
	test_path_is_dir ".baton/worktrees/$id" &&
	: >"$FAKE_STATE/release" &&
	test "$(bg_wait "$TRASH_DIRECTORY/live")" = 0
'

test_done
