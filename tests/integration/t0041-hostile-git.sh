#!/bin/bash
test_description='a hostile agent against baton'"'"'s own git and change detection: a planted .git file and fsmonitor, a HEAD pointed at the base branch, planted hooks, a rename out of the allowed paths, a replace ref, an ignored script, a link out of the worktree, a moved base branch'
. "$(dirname "$0")/../lib/test-lib.sh"

HOSTILE_AGENT=$TEST_DIRECTORY/lib/hostile-agent

# docs_repo DIR YAML: a repository with docs/keep.txt and a .gitignore of
# build/, and YAML in its config.
docs_repo() {
	make_repo "$1" &&
	mkdir -p "$1/docs" &&
	echo "kept" >"$1/docs/keep.txt" &&
	echo "build/" >"$1/.gitignore" &&
	git -C "$1" add docs/keep.txt .gitignore &&
	git -C "$1" commit -qm "docs and ignores" &&
	baton_init_with_agent "$1" "$2"
}

# hostile_repo DIR MODE [EXTRA_YAML]: docs_repo with the hostile agent in
# MODE playing every role.
hostile_repo() {
	docs_repo "$1" "providers:
  hostile: {type: command, command: [\"$HOSTILE_AGENT\"]}
roles: {default: hostile}
${3:-}" &&
	echo "$2" >"$1.mode"
}

# hostile_run DIR: baton run under the hostile agent; the exit code in
# DIR.rc, the run's record in DIR.json.
hostile_run() {
	(
		cd "$1" &&
		HOSTILE_MODE=$(cat "../$1.mode") HOSTILE_STAGE=execute \
			HOSTILE_TRAP=$FAKE_STATE/$1.trap \
			"$BATON" run "Add a feature" >"../$1.out" 2>&1
		echo $? >"../$1.rc"
		"$BATON" show --json "$(newest_run)" >"../$1.json"
	)
}

# nothing_ran DIR: no payload the agent planted was run by anyone.
nothing_ran() {
	ls "$FAKE_STATE/$1.trap" >"$1.marks" &&
	test_grep ! "^ran-" "$1.marks"
}

# The attacks on the repository's git dir need it writable: without the
# sandbox (with it, the git dir is read-only to the agent; see below).
NOSANDBOX="execution: {sandbox: none}"

test_expect_success 'a .git file pointed at the agent'"'"'s own git dir: baton never uses it, its fsmonitor never runs, the run blocks and the file is put back' '
	hostile_repo gitfile gitfile-fsmonitor &&
	base=$(git -C gitfile rev-parse HEAD) &&
	hostile_run gitfile &&
	test "$(cat gitfile.rc)" = 3 &&
	nothing_ran gitfile &&
	test_jq ".status == \"blocked\" and .outcome == \"policy_denied\"" gitfile.json &&
	test_jq ".reason | test(\"the worktree.s .git was rewritten\")" gitfile.json &&
	test_jq "[.events[] | select(.type == \"policy_violation\" and .data.policy == \"integrity\")] | length == 1" gitfile.json &&
	# nothing was committed into .evil, nor anywhere but the run branch
	branch=$(jq -r .branch gitfile.json) &&
	test_must_fail git --git-dir=gitfile/.baton/worktrees/$(jq -r .id gitfile.json)/.evil rev-parse --verify -q HEAD &&
	test "$(git -C gitfile rev-parse HEAD)" = "$base" &&
	# and the .git file ties the worktree to its branch again
	git -C gitfile/.baton/worktrees/$(jq -r .id gitfile.json) symbolic-ref HEAD >head &&
	test "$(cat head)" = "refs/heads/$branch"
'

test_expect_success 'a HEAD pointed at the base branch: the base does not move, the run blocks and the HEAD is put back' '
	hostile_repo headbase head-to-base &&
	base=$(git -C headbase rev-parse HEAD) &&
	hostile_run headbase &&
	test "$(git -C headbase rev-parse HEAD)" = "$base" &&
	test "$(cat headbase.rc)" = 3 &&
	test_jq ".reason | test(\"HEAD was pointed elsewhere\")" headbase.json &&
	# the worktree is on its run branch again
	id=$(jq -r .id headbase.json) &&
	git -C headbase/.baton/worktrees/$id symbolic-ref HEAD >head &&
	test "$(cat head)" = "refs/heads/baton/$id"
'

test_expect_success 'hooks and fsmonitor planted in the repository never run on baton'"'"'s git, and the run blocks naming them' '
	hostile_repo hooks hooks "$NOSANDBOX" &&
	hostile_run hooks &&
	nothing_ran hooks &&
	test "$(cat hooks.rc)" = 3 &&
	test_jq ".reason | test(\"hooks/post-commit was created\")" hooks.json &&
	test_jq ".reason | test(\"repository.s config was\")" hooks.json
'

test_expect_success 'under the sandbox the git dir is read-only: the hooks, the config, a replace ref and the base branch cannot even be written' '
	for m in hooks replace move-base; do
		rm -f "$FAKE_STATE/hostile.$m" &&
		hostile_repo "sb-$m" "$m" &&
		hostile_run "sb-$m" &&
		nothing_ran "sb-$m" &&
		test_grep ": refused" "$FAKE_STATE/hostile.$m" &&
		test_grep ! ": ok" "$FAKE_STATE/hostile.$m" || return 1
	done &&
	test "$(cat sb-move-base.rc)" = 0 &&
	test_jq ".status == \"merge_ready\"" sb-hooks.json
'

test_expect_success 'a rename out of the allowed paths is seen: both names are held to policies.allowed_paths' '
	hostile_repo rename rename-out "policies: {allowed_paths: [src/, feature.txt]}" &&
	hostile_run rename &&
	test "$(cat rename.rc)" = 3 &&
	test_jq ".status == \"blocked\" and (.reason | test(\"outside policies.allowed_paths: docs/keep.txt\"))" rename.json
'

test_expect_success 'a replace ref that hides an edit: baton diffs the commits themselves and the new ref is a breach' '
	hostile_repo replace replace "policies: {allowed_paths: [feature.txt]}
$NOSANDBOX" &&
	hostile_run replace &&
	test "$(cat replace.rc)" = 3 &&
	test_jq ".reason | test(\"the ref refs/replace/[0-9a-f]+ was created\")" replace.json &&
	id=$(jq -r .id replace.json) &&
	(cd replace && "$BATON" diff "$id" >../replace.diff) &&
	test_grep "changed by the agent" replace.diff
'

test_expect_success 'an ignored script the agent wrote is a change like any other' '
	hostile_repo ignored ignored-script "policies: {allowed_paths: [feature.txt]}" &&
	hostile_run ignored &&
	test "$(cat ignored.rc)" = 3 &&
	test_jq ".reason | test(\"outside policies.allowed_paths: build/evil.sh\")" ignored.json
'

test_expect_success 'a symbolic link out of the worktree blocks the run, naming it' '
	hostile_repo link symlink-out &&
	hostile_run link &&
	test "$(cat link.rc)" = 3 &&
	test_jq ".reason | test(\"symbolic link notes.txt points out of the worktree\")" link.json &&
	test_path_is_missing "$FAKE_STATE/outside.txt"
'

test_expect_success 'the base branch moved by the agent is a breach naming it' '
	hostile_repo movebase move-base "$NOSANDBOX" &&
	hostile_run movebase &&
	test "$(cat movebase.rc)" = 3 &&
	test_jq ".reason | test(\"the ref refs/heads/(master|main) was moved\")" movebase.json
'

test_expect_success 'a landing of the merge queue while an agent works is no breach: the base moved to a merge the store recorded' '
	make_repo land &&
	baton_init_with_agent land &&
	cd land &&
	FAKE_EDIT_FILE=first.txt "$BATON" run "First" >../first.out 2>&1 &&
	first=$(newest_run) &&
	FAKE_EDIT_FILE=second.txt FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow \
		FAKE_WAIT_FOR=$FAKE_STATE/go \
		bg_start ../second "$BATON" run "Second" &&
	wait_for "test \"\$(newest_run)\" != \"$first\"" &&
	second=$(newest_run) &&
	wait_for "fake_calls $second execute | grep -q ." 60 &&
	base=$(git rev-parse HEAD) &&
	"$BATON" merge --add "$first" >../add.out &&
	"$BATON" merge --queue >../queue.out 2>&1 &&
	test "$(git rev-parse HEAD)" != "$base" &&
	touch "$FAKE_STATE/go" &&
	rc=$(bg_wait ../second) &&
	test "$rc" = 0 &&
	test "$(run_status "$second")" = merge_ready
'

# The loop: every file an act changed must be granted. LOOP_ACT is what the
# act does beyond writing its granted note.
cat >"$TRASH_DIRECTORY/loop-agent" <<-\AGENT
#!/bin/sh
it=${BATON_ITERATION:-1}
case "$BATON_STAGE_KIND" in
loop-plan)
	if [ "$it" -gt 1 ]; then
		echo '{"done": true, "summary": "met"}' >"$BATON_ARTIFACT"
		exit 0
	fi
	printf '{"done": false, "summary": "s", "step": "write a note", "effects": [{"kind": "write", "target": "notes/1.txt"}]}\n' >"$BATON_ARTIFACT" ;;
act)
	mkdir -p notes && echo "note" >notes/1.txt && eval "$LOOP_ACT"
	echo "wrote notes/1.txt" ;;
evaluate)
	echo '{"status": "done", "summary": "done"}' >"$BATON_ARTIFACT" ;;
esac
AGENT
chmod +x "$TRASH_DIRECTORY/loop-agent"

# loop_run DIR ACT: a loop run granted write:notes/** whose act also does ACT.
loop_run() {
	docs_repo "$1" "providers:
  a: {type: command, command: [\"$TRASH_DIRECTORY/loop-agent\"]}
roles: {default: a}
loop: {profile: strict, max_iterations: 2, grants: [\"write:notes/**\"]}" &&
	(
		cd "$1" &&
		LOOP_ACT=$2 "$BATON" run --pipeline loop "Write a note" >"../$1.out" 2>&1
		echo $? >"../$1.rc"
		"$BATON" show --json "$(newest_run)" >"../$1.json"
		"$BATON" events "$(newest_run)" --json >"../$1.events"
	)
}

test_expect_success 'the loop: a git mv into a granted folder writes the old path too, and gets no "granted" receipt' '
	loop_run loopmv "git mv docs/keep.txt notes/keep.txt" &&
	test "$(cat loopmv.rc)" = 3 &&
	test_jq ".outcome == \"policy_denied\" and (.reason | test(\"docs/keep.txt\"))" loopmv.json &&
	jq -s "[.[] | select(.type == \"receipt\" and .data.phase == \"act\") | .data.decision]" loopmv.events >decisions &&
	test_jq ". == [\"violation\"]" decisions
'

test_expect_success 'the loop: an ignored file the act wrote must be granted like any other' '
	loop_run loopign "mkdir -p build && echo evil >build/evil.sh" &&
	test "$(cat loopign.rc)" = 3 &&
	test_jq ".outcome == \"policy_denied\" and (.reason | test(\"build/evil.sh\"))" loopign.json
'

test_done
