#!/bin/bash
test_description='the merge queue: branches land in order, merged and checked on the base, conflicts retried then handed to a conflict task'
. "$(dirname "$0")/../lib/test-lib.sh"

# The scripted agent: the fake agent for every stage but execute, which,
# when EDIT_LINE is set, replaces line EDIT_LINE of story.txt with
# EDIT_TEXT, so that runs can be made to touch the same file apart or at
# the same place.
write_editor() {
	cat >"$TRASH_DIRECTORY/editor" <<-EOF &&
	#!/bin/bash
	if [ "\$BATON_STAGE_KIND" = execute ] && [ -n "\${EDIT_LINE:-}" ]; then
		cat >/dev/null
		sed -i "\${EDIT_LINE}s/.*/\${EDIT_TEXT}/" story.txt
		echo "editor: line \$EDIT_LINE of story.txt is now: \$EDIT_TEXT"
		exit 0
	fi
	exec "$FAKE_AGENT" "\$@"
	EOF
	chmod +x "$TRASH_DIRECTORY/editor"
}

# The project's check (in FAKE_STATE, which the sandbox binds): fails
# while $FAKE_STATE/fail-checks exists;
# when it passes, it records the commit it passed on and where, so the
# test can tell that everything on main was checked. With race-once
# present it first commits to main behind the queue's back (once).
write_check() {
	cat >"$FAKE_STATE/check.sh" <<-EOF
	#!/bin/sh
	if [ -e "$FAKE_STATE/race-once" ]; then
		rm -f "$FAKE_STATE/race-once"
		repo=\$(cat "$FAKE_STATE/race-repo")
		sha=\$(git -C "\$repo" commit-tree -p main -m "sneaky commit" "main^{tree}") &&
			git -C "\$repo" update-ref refs/heads/main "\$sha"
	fi
	if [ -e "$FAKE_STATE/fail-checks" ]; then
		echo "checks told to fail"
		exit 1
	fi
	echo "passed \$(git rev-parse HEAD) \$PWD" >>"$FAKE_STATE/validated.log"
	EOF
}

# A repository whose story.txt has twelve lines, set up for the editor.
make_story_repo() {
	make_repo "$1" &&
		(
			cd "$1" &&
				for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
					echo "line $i"
				done >story.txt &&
				git add story.txt &&
				git commit -q -m "a story of twelve lines"
		) &&
		baton_init_with_agent "$1" "$(
			cat <<-EOF
			providers:
			  fake: {type: command, command: ["$TRASH_DIRECTORY/editor"]}
			validate: {commands: ["make test", "sh $FAKE_STATE/check.sh"], timeout_seconds: 120}
			merge: {retries: 2, backoff_seconds: 1${2:+, $2}}
			${3:-}
			EOF
		)"
}

# edit_run LINE TEXT TASK: a run to merge_ready whose change is that edit;
# prints its id.
edit_run() {
	EDIT_LINE=$1 EDIT_TEXT=$2 "$BATON" run "$3" >/dev/null 2>&1 &&
		newest_run
}

test_expect_success 'setup: three merge-ready runs editing story.txt' '
	write_editor &&
	write_check &&
	make_story_repo repo &&
	git -C repo rev-parse main >start &&
	cd repo &&
	edit_run 1 "one, from the first run" "Change line one" >../r1 &&
	edit_run 10 "ten, from the second run" "Change line ten" >../r2 &&
	edit_run 1 "one, from the third run" "Change line one differently" >../r3 &&
	for r in r1 r2 r3; do
		test "$(run_status "$(cat ../$r)")" = merge_ready || exit 1
	done &&
	# nothing has landed yet
	test "$(git rev-parse main)" = "$(cat ../start)"
'

test_expect_success 'merge --add queues the runs in order without landing them' '
	cd repo &&
	"$BATON" merge --add "$(cat ../r1)" "$(cat ../r2)" "$(cat ../r3)" >../add.out &&
	test_line_count = 3 ../add.out &&
	test_grep "queued to land on main" ../add.out &&
	"$BATON" merge --list --json >../list.json &&
	test_jq "length == 3 and all(.[]; .status == \"pending\" and .base == \"main\")" ../list.json &&
	test_jq "[.[].run] == [\"$(cat ../r1)\", \"$(cat ../r2)\", \"$(cat ../r3)\"]" ../list.json &&
	test "$(git rev-parse main)" = "$(cat ../start)" &&
	# queuing one again is no error and changes nothing
	"$BATON" merge --add "$(cat ../r1)" >../again.out &&
	test_grep "already in the merge queue (pending)" ../again.out
'

test_expect_success 'merge --queue lands 1 and 2, retries 3 with backoff, then fails it' '
	cd repo &&
	r1=$(cat ../r1) r2=$(cat ../r2) r3=$(cat ../r3) &&
	test_expect_code 1 "$BATON" merge --queue >../queue.out 2>../queue.err &&
	cat ../queue.out &&
	grep "^$r1: merged as [0-9a-f]* onto main$" ../queue.out &&
	grep "^$r2: merged as [0-9a-f]* onto main$" ../queue.out &&
	grep "^$r3: conflict in story.txt (retry 1/2 in 1 s)$" ../queue.out &&
	grep "^$r3: conflict in story.txt (retry 2/2 in 2 s)$" ../queue.out &&
	grep "^$r3: failed: conflict in story.txt after 2 retries; conflict-resolution task t[0-9]* queued$" ../queue.out &&
	test_grep "merge queue: 2 merged, 1 failed, 0 waiting" ../queue.out &&
	# in queue order: 1 before 2 before the failure of 3
	grep -n "merged as\|failed:" ../queue.out | cut -d: -f2 >../order &&
	printf "%s\n" "$r1" "$r2" "$r3" >../expect &&
	test_cmp ../expect ../order &&
	"$BATON" merge --list --json >../list.json &&
	test_jq "[.[].status] == [\"merged\", \"merged\", \"failed\"]" ../list.json &&
	test_jq ".[2].attempts == 3 and (.[2].reason | test(\"story.txt\"))" ../list.json &&
	test_jq ".[1].merged_commit == \"$(git rev-parse main)\"" ../list.json
'

test_expect_success 'main holds both landed edits, and its checkout followed' '
	cd repo &&
	git show main:story.txt >../story &&
	test "$(sed -n 1p ../story)" = "one, from the first run" &&
	test "$(sed -n 10p ../story)" = "ten, from the second run" &&
	test_grep ! "third run" ../story &&
	# main is checked out here: the files moved with it, nothing is dirty
	test_cmp ../story story.txt &&
	git status --porcelain --untracked-files=no >../dirty &&
	test_line_count = 0 ../dirty
'

test_expect_success 'main history holds only validated states: one checked merge per landing' '
	cd repo &&
	git rev-list --first-parent "$(cat ../start)..main" >../landed &&
	test_line_count = 2 ../landed &&
	while read -r c; do
		# a merge commit (two parents) whose exact state passed the checks
		# in the merge worktree
		test "$(git rev-list --parents -n 1 "$c" | wc -w)" = 3 || exit 1
		grep -q "^passed $c .*/.baton/worktrees/.merge$" "$FAKE_STATE/validated.log" || {
			echo "main commit $c was never checked"
			cat "$FAKE_STATE/validated.log"
			exit 1
		}
	done <../landed &&
	git log -1 --format=%B main >../msg &&
	test_grep "Merge baton/$(cat ../r2): Change line ten" ../msg
'

test_expect_success 'the conflict went to a queued conflict-resolution task' '
	cd repo &&
	r3=$(cat ../r3) &&
	db_query \
		"SELECT id, status, origin, CASE WHEN base_ref IS NULL THEN 1 ELSE 0 END, title FROM tasks" >../tasks &&
	test_line_count = 1 ../tasks &&
	IFS="|" read -r id status origin nobase title <../tasks &&
	test "$origin" = conflict &&
	test "$status" = queued &&
	test "$nobase" = 1 &&
	test "$title" = "Resolve merge conflict: Change line one differently" &&
	db_query "SELECT body FROM tasks WHERE id = $id" >../body &&
	test_grep "  - story.txt" ../body &&
	test_grep "^Change line one differently$" ../body &&
	test_grep "git diff main...baton/$r3" ../body &&
	test_grep "^+one, from the third run$" ../body &&
	test_grep "^-line 1$" ../body &&
	grep "t$id queued" ../queue.out &&
	"$BATON" show "$r3" --file merge-conflict.diff >../diff &&
	test_grep "^+one, from the third run$" ../diff
'

test_expect_success 'every step of the third item is an event of its run' '
	cd repo &&
	"$BATON" events "$(cat ../r3)" --json >../events.json &&
	jq -r "select(.type | test(\"^merge_|^task_added$\")) | .type" ../events.json >../types &&
	cat >../expect <<-\EOF &&
	merge_queued
	merge_claimed
	merge_retry
	merge_claimed
	merge_retry
	merge_claimed
	task_added
	merge_failed
	EOF
	test_cmp ../expect ../types &&
	jq -s "[.[] | select(.type == \"merge_retry\")]" ../events.json >../retries &&
	test_jq "all(.[]; .data.cause == \"conflict\" and .data.files == [\"story.txt\"])" ../retries &&
	test_jq "[.[].data.delay_ms] == [1000, 2000]" ../retries &&
	"$BATON" events "$(cat ../r1)" --json |
		jq -s "[.[] | select(.type == \"merge_landed\")]" >../landed.json &&
	test_jq "length == 1 and .[0].data.base == \"main\" and .[0].data.base_commit == \"$(cat ../start)\"" ../landed.json
'

test_expect_success 'failing checks leave main untouched; merging again after the fix lands it' '
	cd repo &&
	r4=$(edit_run 5 "five, from the fourth run" "Change line five") &&
	before=$(git rev-parse main) &&
	touch "$FAKE_STATE/fail-checks" &&
	test_expect_code 1 "$BATON" merge "$r4" >../fail.out 2>&1 &&
	rm "$FAKE_STATE/fail-checks" &&
	test_grep "$r4: failed: checks failed on the merge with main (main untouched)" ../fail.out &&
	test_grep "checks told to fail" ../fail.out &&
	test "$(git rev-parse main)" = "$before" &&
	test_grep ! "five, from" story.txt &&
	"$BATON" merge --list --json >../list.json &&
	test_jq ".[3].status == \"failed\"" ../list.json &&
	db_query "SELECT count(*) FROM tasks" >../count &&
	echo 1 >../expect &&
	test_cmp ../expect ../count &&
	# a failed item is queued again by merge RUN
	"$BATON" merge "$r4" >../again.out &&
	test_grep "$r4: merged as" ../again.out &&
	test "$(git rev-parse main^1)" = "$before" &&
	test_grep "five, from the fourth run" story.txt &&
	"$BATON" merge "$r4" >../third.out &&
	test_grep "$r4: already merged as" ../third.out
'

test_expect_success 'merge of a run that is not merge_ready is refused' '
	cd repo &&
	FAKE_VERIFY_MODE=line FAKE_VERIFY=FAILED \
		test_expect_code 3 "$BATON" run "Verifier blocks it" >/dev/null 2>&1 &&
	id=$(newest_run) &&
	before=$(git rev-parse main) &&
	test_expect_code 1 "$BATON" merge "$id" >../refused.out 2>../refused.err &&
	test_grep "run .$id. is blocked: only the branch of a run that is merge_ready can be merged" ../refused.err &&
	test "$(git rev-parse main)" = "$before" &&
	"$BATON" merge --list --json >../list.json &&
	test_jq "all(.[]; .run != \"$id\")" ../list.json &&
	test_expect_code 1 "$BATON" merge no-such-run 2>../nosuch.err &&
	test_grep "no-such-run" ../nosuch.err &&
	test_expect_code 2 "$BATON" merge 2>/dev/null &&
	test_expect_code 2 "$BATON" merge --queue "$id" 2>/dev/null
'

test_expect_success 'a dirty main checkout in the way is refused without losing the changes' '
	cd repo &&
	r5=$(edit_run 3 "three, from the fifth run" "Change line three") &&
	before=$(git rev-parse main) &&
	sed -i "s/^line 3$/my own uncommitted line/" story.txt &&
	echo "my staged note" >>README &&
	git add README &&
	cp story.txt ../my-story &&
	test_expect_code 1 "$BATON" merge "$r5" >../dirty.out 2>../dirty.err &&
	test_grep "local changes to story.txt would be overwritten" ../dirty.err &&
	test_grep "nothing was changed" ../dirty.err &&
	test "$(git rev-parse main)" = "$before" &&
	test_cmp ../my-story story.txt &&
	git diff --cached --name-only >../staged &&
	test_grep "^README$" ../staged &&
	# the item waits, not failed, and lands once the way is clear; the
	# unrelated staged change stays
	"$BATON" merge --list --json >../list.json &&
	test_jq ".[] | select(.run == \"$r5\") | .status == \"pending\" and .attempts == 0" ../list.json &&
	git checkout story.txt &&
	"$BATON" merge "$r5" >../clean.out &&
	test_grep "$r5: merged as" ../clean.out &&
	test_grep "three, from the fifth run" story.txt &&
	git diff --cached --name-only >../staged &&
	test_grep "^README$" ../staged &&
	test_grep "my staged note" README
'

test_expect_success 'all landings so far were checked' '
	cd repo &&
	git rev-list --first-parent "$(cat ../start)..main" >../landed &&
	test_line_count = 4 ../landed &&
	while read -r c; do
		grep -q "^passed $c .*/.baton/worktrees/.merge$" "$FAKE_STATE/validated.log" ||
			{ echo "main commit $c was never checked"; exit 1; }
	done <../landed
'

test_expect_success 'a base not checked out moves by compare-and-swap; a race retries on the new base' '
	# no sandbox: the check itself commits to main (a sandboxed one cannot)
	make_story_repo repo2 "base_branch: main" "execution: {sandbox: none}" &&
	echo "$TRASH_DIRECTORY/repo2" >"$FAKE_STATE/race-repo" &&
	git -C repo2 checkout -q -b work &&
	cd repo2 &&
	r=$(edit_run 2 "two, from repo2" "Change line two") &&
	start=$(git rev-parse main) &&
	touch "$FAKE_STATE/race-once" &&
	"$BATON" merge "$r" >../race.out &&
	test_path_is_missing "$FAKE_STATE/race-once" &&
	test_grep "$r: .main. moved while the merge was checked (retrying at once)" ../race.out &&
	test_grep "$r: merged as" ../race.out &&
	# main: the landing, on top of the sneaky commit, on top of the start
	git rev-list --first-parent "$start..main" >../chain &&
	test_line_count = 2 ../chain &&
	test "$(git log -1 --format=%s main^1)" = "sneaky commit" &&
	test "$(git rev-parse main^1^1)" = "$start" &&
	git show main:story.txt | grep -q "two, from repo2" &&
	grep -q "^passed $(git rev-parse main) " "$FAKE_STATE/validated.log" &&
	# the branch checked out here was left alone
	test "$(git rev-parse work)" = "$start" &&
	test_grep ! "two, from" story.txt &&
	"$BATON" events "$r" --json | jq -s "[.[] | select(.type == \"merge_retry\")]" >../retry.json &&
	test_jq "length == 1 and .[0].data.cause == \"raced\"" ../retry.json
'

test_expect_success 'a half-made merge worktree is made again' '
	cd repo2 &&
	r=$(edit_run 4 "four, from repo2" "Change line four") &&
	rm -f .baton/worktrees/.merge/.git &&
	echo leftover >.baton/worktrees/.merge/leftover &&
	"$BATON" merge "$r" >../remade.out &&
	test_grep "$r: merged as" ../remade.out &&
	test_path_is_missing .baton/worktrees/.merge/leftover &&
	git -C .baton/worktrees/.merge rev-parse HEAD >../mhead &&
	git rev-parse main >../expect &&
	test_cmp ../expect ../mhead
'

test_expect_success 'merge --queue --no-wait does not wait for a backoff' '
	cd repo2 &&
	r=$(edit_run 4 "four, again" "Change line four again") &&
	"$BATON" merge --add "$r" >/dev/null &&
	later=$((($(date +%s) + 3600) * 1000)) &&
	db_query "UPDATE merge_queue SET not_before = $later WHERE id = (SELECT max(id) FROM merge_queue)" &&
	test_expect_code 1 "$BATON" merge --queue --no-wait >../nowait.out &&
	test_grep "merge queue: 0 merged, 0 failed, 1 waiting" ../nowait.out &&
	"$BATON" merge --list >../list.out &&
	test_grep "$r .*pending .*retry in [0-9]* s" ../list.out
'

test_done
