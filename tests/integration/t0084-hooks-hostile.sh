#!/bin/bash
test_description='hooks against a hostile agent: a .baton/config.yaml it writes in its worktree is never read, it cannot reach the repository config or the setup note, and a hook sees the main checkout but not .baton/'
. "$(dirname "$0")/../lib/test-lib.sh"

# At execute, the agent tries to take the hooks over: a config of its own
# in the worktree (hooks that would mark it pwned and no veto), the
# repository's config and the note that the worktree is set up; then it
# behaves as the fake agent.
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-EOF &&
	#!/bin/bash
	if [ "\$BATON_STAGE_KIND" = execute ] &&
		[ "\$BATON_TASK" != "Just work" ]; then
		mkdir -p .baton
		printf "%s\\n" "hooks:" \\
			"  before_stage: [\\"touch $FAKE_STATE/pwned\\"]" \\
			"  after_stage: [\\"touch $FAKE_STATE/pwned\\"]" >.baton/config.yaml
		repo=\${BATON_WORKTREE%/.baton/worktrees/*}
		cp .baton/config.yaml "\$repo/.baton/config.yaml" 2>/dev/null &&
			echo "wrote the repository config" >>"$FAKE_STATE/agent-did"
		rm -f "\$BATON_RUN_DIR/hooks/worktree_setup.done" 2>/dev/null &&
			test ! -e "\$BATON_RUN_DIR/hooks/worktree_setup.done" &&
			echo "removed the setup note" >>"$FAKE_STATE/agent-did"
		echo "agent ran" >>"$FAKE_STATE/agent-did"
		if [ -n "\${HOSTILE_LINK:-}" ]; then
			ln -s "$FAKE_STATE/precious" escape
			ln -s "\$repo" repo-link
		fi
	fi
	exec "$FAKE_AGENT" "\$@"
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

hostile_config() {
	cat <<-EOF
	providers:
	  fake: {type: command, command: ["$TRASH_DIRECTORY/agent"]}
	hooks:
	  worktree_setup:
	    - "echo setup >>$FAKE_STATE/setup.log"
	    - "if cat \"\$BATON_REPO/.baton/token\" >/dev/null 2>&1; then echo token >>$FAKE_STATE/leak; fi; cat \"\$BATON_REPO/README\" >/dev/null"
	  before_stage: ["if [ \"\$BATON_STAGE\" = verifying ]; then echo the real hook says no; exit 5; fi"]
	EOF
}

test_expect_success 'setup: a sandboxed run whose agent attacks the hooks' '
	write_agent &&
	make_repo repo &&
	baton_init_with_agent repo "$(hostile_config)" &&
	cp repo/.baton/config.yaml config.before &&
	cd repo &&
	test_expect_code 3 "$BATON" run "Take over the hooks" >../run.out 2>&1 &&
	id=$(newest_run) && echo "$id" >../id &&
	"$BATON" events "$id" --json >../events &&
	jq -s -e "map(select(.type == \"sandbox\"))[0].data.on" ../events &&
	test_grep "agent ran" "$FAKE_STATE/agent-did"
'

test_expect_success 'the hooks of the worktree config never ran; its checkpoint blocked the run, naming the file' '
	cd repo &&
	id=$(cat ../id) &&
	test_path_is_file "$(run_field "$id" worktree)/.baton/config.yaml" &&
	test_path_is_missing "$FAKE_STATE/pwned" &&
	test "$(run_status "$id")" = blocked &&
	run_field "$id" reason >../reason &&
	test_grep "stage execute edited 1 file of baton.s own config (.baton/), which no agent may change: .baton/config.yaml" ../reason &&
	jq -s -e "map(select(.type == \"policy_violation\"))[0].data | .policy == \"baton_config\" and .paths == \".baton/config.yaml\"" ../events
'


test_expect_success 'the agent could reach neither the repository config nor the setup note' '
	cd repo &&
	# (inside the sandbox the copy lands in the tmpfs over the
	# repository, which the host never sees)
	test_grep ! "removed the setup note" "$FAKE_STATE/agent-did" &&
	test_cmp ../config.before .baton/config.yaml &&
	test_path_is_file ".baton/runs/$(cat ../id)/hooks/worktree_setup.done" &&
	test_line_count = 1 "$FAKE_STATE/setup.log"
'

test_expect_success 'a hook reads the main checkout but not .baton/ (the token)' '
	cd repo &&
	test_path_is_file .baton/token &&
	test_path_is_missing "$FAKE_STATE/leak" &&
	jq -s -e "map(select(.type == \"hook\" and .data.index == 1))[0].data.exit == 0" ../events
'

test_expect_success 'baton clean removes a hostile worktree without following the links the agent left in it' '
	mkdir -p "$FAKE_STATE/precious" &&
	echo keep >"$FAKE_STATE/precious/file" &&
	make_repo links &&
	baton_init_with_agent links "$(hostile_config)" &&
	cd links &&
	HOSTILE_LINK=1 test_expect_code 3 "$BATON" run "Leave links behind" >../links.out 2>&1 &&
	id=$(newest_run) &&
	wt=$(run_field "$id" worktree) &&
	test -L "$wt/escape" &&
	"$BATON" clean --yes "$id" >../kept.out &&
	test_grep "^$id: keep: its worktree has uncommitted changes" ../kept.out &&
	test -L "$wt/escape" &&
	"$BATON" clean --yes --force "$id" >../clean.out &&
	test_path_is_missing "$wt" &&
	test_path_is_file "$FAKE_STATE/precious/file" &&
	test_path_is_file README &&
	test_path_is_file .baton/config.yaml &&
	git status --porcelain >/dev/null &&
	test_must_fail git rev-parse --verify -q "baton/$id" >/dev/null &&
	test_path_is_missing ".baton/runs/$id"
'

# Without the config in its change the agent gets past its checkpoint,
# and the repository's own veto still holds.
test_expect_success 'a tamper-free run is still vetoed by the real hook' '
	cd repo &&
	test_expect_code 3 "$BATON" run "Just work" >../run2.out 2>&1 &&
	id=$(newest_run) &&
	run_field "$id" reason >../reason2 &&
	test_grep "hook before_stage\[0\] .*exited 5: the real hook says no" ../reason2
'

test_done
