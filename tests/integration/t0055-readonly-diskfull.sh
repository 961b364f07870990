#!/bin/bash
test_description='a read-only .baton/ still answers the reading commands, and a full disk leaves the run interrupted, saying to free space and resume (issue 18 item 17)'
. "$(dirname "$0")/../lib/test-lib.sh"

# Both need a mount namespace of our own (unshare -rm: a user namespace,
# so no root is needed, and root's permissions cannot be taken away by
# chmod): a read-only bind mount, a size-limited tmpfs.
if ! unshare -rm sh -c 'mount -t tmpfs -o size=1m tmpfs /mnt' 2>/dev/null; then
	echo "skipped: unshare -rm cannot make a mount namespace here"
	echo "0 passed, 0 failed"
	exit 0
fi

# ro CMD...: runs CMD with .baton/ mounted read-only over itself.
ro() {
	unshare -rm sh -c 'mount --bind -o ro .baton .baton && touch .baton/probe 2>/dev/null && exit 99; exec "$@"' ro "$@"
}

test_expect_success 'setup: a run to merge_ready' '
	make_repo repo &&
	baton_init_with_agent repo &&
	cd repo &&
	"$BATON" run "Add hello.txt" >../run.out 2>&1 &&
	newest_run >../id &&
	test "$(run_status "$(cat ../id)")" = merge_ready
'

test_expect_success 'status, show, events and diff work on a read-only .baton/' '
	cd repo &&
	id=$(cat ../id) &&
	test_path_is_missing .baton/baton.db-wal &&
	ro "$BATON" status >../ro-status.out 2>../ro-status.err &&
	test_grep "$id" ../ro-status.out &&
	ro "$BATON" show "$id" --json >../ro-show.json &&
	test_jq ".status == \"merge_ready\"" ../ro-show.json &&
	ro "$BATON" events "$id" >../ro-events.out &&
	test_grep merge_ready ../ro-events.out &&
	ro "$BATON" diff "$id" >../ro-diff.out
'

test_expect_success 'a command that writes says the store is read-only, and why' '
	cd repo &&
	test_expect_code 1 ro "$BATON" run "Add more" >../ro-run.out 2>&1 &&
	test_grep "read-only" ../ro-run.out &&
	test_grep "baton.db" ../ro-run.out
'

# The disk fills while the execute agent works: its agent writes a file
# as large as the disk lets it (once), then carries on as the fake agent.
# Everything runs in one mount namespace, on a 6 MB tmpfs holding a copy
# of the repository; what the test checks is copied out.
test_expect_success 'a full disk leaves the run interrupted, saying to free space and resume; then it resumes' '
	make_repo src &&
	cat >filler.sh <<-EOF &&
	#!/bin/sh
	if [ "\$BATON_STAGE_KIND" = execute ] && [ ! -e "$TRASH_DIRECTORY/filled" ]; then
		: >"$TRASH_DIRECTORY/filled"
		dd if=/dev/zero of=big bs=64k 2>/dev/null
	fi
	exec "$FAKE_AGENT"
	EOF
	chmod +x filler.sh &&
	baton_init_with_agent src "providers:
  filler: {type: command, command: [\"$TRASH_DIRECTORY/filler.sh\"]}
roles: {default: filler}
execution: {sandbox: none}" &&
	mkdir full out &&
	cat >inside.sh <<-EOF &&
	set -x
	mount -t tmpfs -o size=6m tmpfs "$TRASH_DIRECTORY/full" || exit 98
	cp -a "$TRASH_DIRECTORY/src" "$TRASH_DIRECTORY/full/repo" || exit 97
	cd "$TRASH_DIRECTORY/full/repo" || exit 96
	"$BATON" run "Add hello.txt" >"$TRASH_DIRECTORY/out/run.out" 2>&1
	echo \$? >"$TRASH_DIRECTORY/out/run.rc"
	"$BATON" status --json >"$TRASH_DIRECTORY/out/status.json" 2>"$TRASH_DIRECTORY/out/status.err"
	id=\$("$BATON" status --json | jq -r ".[0].id")
	echo "\$id" >"$TRASH_DIRECTORY/out/id"
	rm -f ".baton/worktrees/\$id/big"
	"$BATON" resume "\$id" >"$TRASH_DIRECTORY/out/resume.out" 2>&1
	echo \$? >"$TRASH_DIRECTORY/out/resume.rc"
	"$BATON" show "\$id" --json >"$TRASH_DIRECTORY/out/show.json"
	EOF
	unshare -rm bash inside.sh 2>inside.log &&
	test_path_is_file filled &&
	test "$(cat out/run.rc)" != 0 &&
	id=$(cat out/id) &&
	test_jq ".[0].status == \"interrupted\"" out/status.json &&
	test_grep "full" out/run.out &&
	test_grep "baton resume $id" out/run.out &&
	test "$(cat out/resume.rc)" = 0 &&
	test_jq ".status == \"merge_ready\"" out/show.json
'

test_done
