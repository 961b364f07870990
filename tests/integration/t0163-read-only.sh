#!/bin/bash
test_description='read-only runs: baton run --read-only plans, reviews and reports without edits and ends completed; an agent that writes anyway (a file, a symlink, .git) is a recorded violation and the run never ends completed'
. "$(dirname "$0")/../lib/test-lib.sh"

# An agent that, in the review, writes what HOSTILE says, then reviews as
# the fake agent would.
write_hostile() {
	cat >"$1" <<-EOF &&
	#!/bin/sh
	if [ "\$BATON_STAGE_KIND" = review ]; then
		case "\$HOSTILE" in
		file) echo planted >planted.txt ;;
		ignored) echo x >.git-ignored-build.o ;;
		symlink) ln -s /etc/passwd innocent ;;
		hook) common=\$(git rev-parse --git-common-dir) &&
		      printf "#!/bin/sh\necho owned\n" >"\$common/hooks/post-checkout" &&
		      chmod +x "\$common/hooks/post-checkout" ;;
		commit) echo c >c.txt && git add c.txt &&
		      git -c user.name=a -c user.email=a@b commit -qm sneaky ;;
		esac
		echo "hostile \$HOSTILE: \$?" >>"\$FAKE_STATE/hostile.log"
	fi
	exec "$FAKE_AGENT"
	EOF
	chmod +x "$1"
}

test_expect_success 'setup' '
	make_repo repo &&
	write_hostile "$PWD/hostile.sh" &&
	baton_init_with_agent repo "providers:
  fake: {type: command, command: [\"$PWD/hostile.sh\"]}
roles: {default: fake}
execution: {sandbox: none}" &&
	printf "*.o\n" >repo/.gitignore &&
	(cd repo && git add .gitignore && git commit -qm ignore)
'

test_expect_success 'baton run --read-only plans, reviews the plan and ends completed' '
	(cd repo && "$BATON" run --read-only "Audit the CLI" >../ro.out 2>../ro.err) &&
	id=$(cd repo && newest_run) &&
	test_grep "pipeline plan-only" ro.err &&
	test "$(cd repo && run_status "$id")" = completed &&
	test_path_is_file repo/.baton/runs/$id/plan.md &&
	test_path_is_file repo/.baton/runs/$id/review.json &&
	ls repo/.baton/runs/$id/reports/*.md &&
	base=$(cd repo && run_field "$id" base_commit) &&
	test "$(cd repo && git rev-parse "baton/$id")" = "$base" &&
	# the review was of the plan, with its own prompt
	grep -l "reviewer of a plan, not of a change" fake-state/$id.review.1.prompt
'

test_expect_success 'a pipeline that edits is refused for a read-only run' '
	(cd repo && test_must_fail "$BATON" run --read-only --pipeline feature "x" >../rof.out 2>&1) &&
	test_grep "a read-only run needs a read-only pipeline, and .feature. may edit the worktree" rof.out
'

for what in file ignored symlink hook commit
do
	test_expect_success "an agent that writes anyway ($what) is a violation and the run is blocked" '
		(cd repo && HOSTILE='$what' test_must_fail "$BATON" run --read-only "Audit" >../h-'$what'.out 2>&1) &&
		id=$(cd repo && newest_run) &&
		test "$(cd repo && run_status "$id")" = blocked &&
		(cd repo && "$BATON" events "$id" --json) >h-'$what'.events &&
		jq -r "select(.type == \"policy_violation\") | .data.policy // .policy" h-'$what'.events >h-'$what'.pol &&
		test -s h-'$what'.pol &&
		jq -r "select(.type == \"transition\") | .to" h-'$what'.events >h-'$what'.tr &&
		test_grep ! completed h-'$what'.tr &&
		test_grep ! merge_ready h-'$what'.tr
	'
done

test_expect_success 'the violations name what changed' '
	test_grep "read_only" h-file.pol &&
	test_grep "planted.txt" h-file.events &&
	test_grep "git-ignored-build.o" h-ignored.events &&
	test_grep "innocent" h-symlink.events &&
	test_grep "hook" h-hook.events &&
	test_grep "moved to\|c.txt" h-commit.events
'

test_expect_success 'under the sandbox the worktree is mounted read-only: the write fails' '
	if ! bwrap --ro-bind / / --dev /dev --proc /proc true 2>/dev/null; then
		say "# no bwrap sandbox here: skipped"; return 0
	fi
	make_repo boxed &&
	baton_init_with_agent boxed "providers:
  fake: {type: command, command: [\"$PWD/hostile.sh\"]}
roles: {default: fake}
execution: {sandbox: bwrap}" &&
	: >fake-state/hostile.log &&
	(cd boxed && HOSTILE=file "$BATON" run --read-only "Audit" >../boxed.out 2>&1) &&
	id=$(cd boxed && newest_run) &&
	test "$(cd boxed && run_status "$id")" = completed &&
	test_path_is_missing boxed/.baton/worktrees/$id/planted.txt &&
	test_grep "hostile file: [1-9]" fake-state/hostile.log
'

test_done
