#!/bin/bash
test_description='the agent'"'"'s git index of its worktree: after each checkpoint it says the checkpoint, with the stat data of every file (no rehash of the worktree at the next git status), and a link the agent planted in its place is replaced, never written through'
. "$(dirname "$0")/../lib/test-lib.sh"

# The agent notes, at each stage, what its own git sees: the stat data
# the index holds for README (before any git command could refresh it)
# and `git status`; at execute it can plant a link as the admin index.
cat >agent <<EOF
#!/bin/bash
kind=\$BATON_STAGE_KIND
git ls-files --debug README | sed -n 's/^ *mtime: *//p' \
	>>"$FAKE_STATE/mtime-\$kind"
git status --porcelain --untracked-files=no >>"$FAKE_STATE/status-\$kind"
if [ "\$kind" = execute ] && [ -e "$FAKE_STATE/link-index" ]; then
	ln -sf "$FAKE_STATE/precious" "\$(git rev-parse --git-dir)/index" &&
		echo planted >>"$FAKE_STATE/planted"
fi
exec "$FAKE_AGENT" "\$@"
EOF
chmod +x agent

config="providers:
  noting: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: noting}"

test_expect_success 'setup: a run to merge_ready' '
	make_repo repo &&
	baton_init_with_agent repo "$config" &&
	(cd repo && "$BATON" run "Add hello.txt" >../run.out 2>&1) &&
	(cd repo && test "$(run_status "$(newest_run)")" = merge_ready)
'

test_expect_success 'every stage after the first checkpoint finds its index clean and with the files'"'"' stat data' '
	for kind in execute review; do
		test -s "$FAKE_STATE/mtime-$kind" &&
		! grep -qx "0:0" "$FAKE_STATE/mtime-$kind" &&
		test ! -s "$FAKE_STATE/status-$kind" || return 1
	done
'

test_expect_success 'adversarial: a link planted as the admin index is replaced by a file; what it pointed at is untouched' '
	rm -f "$FAKE_STATE"/mtime-* "$FAKE_STATE"/status-* &&
	echo "precious, not an index" >"$FAKE_STATE/precious" &&
	cp "$FAKE_STATE/precious" precious.before &&
	: >"$FAKE_STATE/link-index" &&
	(cd repo && "$BATON" run "Add hello.txt" >../run2.out 2>&1) &&
	test -s "$FAKE_STATE/planted" &&
	id=$(cd repo && newest_run) &&
	(cd repo && test "$(run_status "$id")" = merge_ready) &&
	test_cmp precious.before "$FAKE_STATE/precious" &&
	admin=$(git -C "repo/.baton/worktrees/$id" rev-parse --git-dir) &&
	test_path_is_file "$admin/index" && test ! -L "$admin/index" &&
	test ! -s "$FAKE_STATE/status-review"
'

test_done
