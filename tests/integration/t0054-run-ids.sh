#!/bin/bash
test_description='a run never adopts a branch, worktree or run folder it did not create: an emptied store is refused, a second store takes the next free id, and a branch made under a new run is refused'
. "$(dirname "$0")/../lib/test-lib.sh"

# calls_sum REPO RUN: a checksum of the run folder's call files.
calls_sum() {
	(cd "$1/.baton/runs/$2/calls" && cat ./* | cksum)
}

test_expect_success 'setup: one run to merge_ready' '
	make_repo repo &&
	baton_init_with_agent repo &&
	cd repo &&
	"$BATON" run "Add hello.txt" >../run1.out 2>&1 &&
	id=$(newest_run) &&
	echo "$id" >../first.id &&
	test "$(run_status "$id")" = merge_ready &&
	git rev-parse "baton/$id" >../first.tip &&
	calls_sum . "$id" >../first.sum
'

test_expect_success 'an emptied default store over .baton/runs/ with runs is refused, naming the folder and what to do' '
	cp repo/.baton/baton.db saved.db &&
	truncate -s 0 repo/.baton/baton.db &&
	cd repo &&
	test_expect_code 1 "$BATON" status >../status.out 2>&1 &&
	test_grep "holds no runs" ../status.out &&
	test_grep "\.baton/runs/" ../status.out &&
	test_grep "$(cat ../first.id)" ../status.out &&
	test_expect_code 1 "$BATON" run "Add hello.txt" >../rerun.out 2>&1 &&
	test_grep "holds no runs" ../rerun.out &&
	# nothing of the first run was touched
	test "$(git rev-parse "baton/$(cat ../first.id)")" = "$(cat ../first.tip)" &&
	test "$(calls_sum . "$(cat ../first.id)")" = "$(cat ../first.sum)"
'

test_expect_success 'baton init does not make an empty store over those runs either' '
	rm -f repo/.baton/baton.db repo/.baton/baton.db-wal repo/.baton/baton.db-shm &&
	cd repo &&
	test_expect_code 1 "$BATON" init >../init.out 2>&1 &&
	test_grep "\.baton/runs/" ../init.out &&
	test_path_is_missing .baton/baton.db &&
	cp ../saved.db .baton/baton.db &&
	"$BATON" status >../status2.out &&
	test_grep "$(cat ../first.id)" ../status2.out
'

# A command that looks at a store with no runs while another process makes
# the first one must not take the new run's folder for an orphan's. strace
# stops the looking command at its first open of .baton/runs/ (the listing
# reads it after), the first run is made, then the command goes on.
test_expect_success 'a first run made while another command looks is not taken for an orphan' '
	make_repo fresh &&
	baton_init_with_agent fresh &&
	cd fresh &&
	bg_start "$TRASH_DIRECTORY/look" env ASAN_OPTIONS=detect_leaks=0 \
		strace -f -o "$TRASH_DIRECTORY/look.trace" -e trace=openat \
		-P "$PWD/.baton/runs" -e inject=openat:signal=SIGSTOP:when=1 \
		"$BATON" status &&
	wait_for "grep -q \"stopped by SIGSTOP\" ../look.trace" &&
	"$BATON" run "Add hello.txt" >../fresh-run.out 2>&1 &&
	test_path_is_dir ".baton/runs/$(newest_run)" &&
	kill -CONT "$(grep -m1 -o "^[0-9]*" ../look.trace)" &&
	test "$(bg_wait "$TRASH_DIRECTORY/look")" = 0 &&
	test_grep ! "holds no runs" ../look.out &&
	test_grep "$(newest_run)" ../look.out
'

test_expect_success 'a second store in the same repository takes the next free id: the first run keeps its branch and folder' '
	cd repo &&
	"$BATON" run --store "$TRASH_DIRECTORY/other.db" "Add hello.txt" >../run2.out 2>&1 &&
	id=$("$BATON" status --store "$TRASH_DIRECTORY/other.db" --json | jq -r ".[0].id") &&
	first=$(cat ../first.id) &&
	test "$id" != "$first" &&
	case $id in r2-*) : ;; *) echo "second store took $id" && false ;; esac &&
	test "$("$BATON" show --store "$TRASH_DIRECTORY/other.db" "$id" --json | jq -r .status)" = merge_ready &&
	test "$(git rev-parse "baton/$first")" = "$(cat ../first.tip)" &&
	test "$(calls_sum . "$first")" = "$(cat ../first.sum)" &&
	# and the first store goes on after both
	"$BATON" run "Add hello.txt" >../run3.out 2>&1 &&
	case $(newest_run) in r3-*) : ;; *) echo "first store took $(newest_run)" && false ;; esac
'

# A git on PATH that, at the first call naming a run branch of the
# repository "planted", makes that branch first at a foreign commit: as if
# another process made it between the run's creation and its worktree.
test_expect_success 'a branch made under a new run is refused, not adopted' '
	make_repo planted &&
	baton_init_with_agent planted &&
	(cd planted && git checkout -q -b foreign && echo theirs >theirs.txt &&
	 git add theirs.txt && git commit -q -m "another run'"'"'s commit" &&
	 git rev-parse HEAD >../foreign.sha && git checkout -q -) &&
	mkdir bin &&
	real=$(command -v git) &&
	cat >bin/git <<-EOF &&
	#!/bin/sh
	if [ ! -e "$TRASH_DIRECTORY/planted.done" ]; then
		for a in "\$@"; do
			case \$a in
			refs/heads/baton/r*) ref=\$a ;;
			baton/r*) ref=refs/heads/\$a ;;
			*) continue ;;
			esac
			: >"$TRASH_DIRECTORY/planted.done"
			"$real" -C "$TRASH_DIRECTORY/planted" update-ref "\$ref" $(cat foreign.sha)
			break
		done
	fi
	exec "$real" "\$@"
	EOF
	chmod +x bin/git &&
	cd planted &&
	test_must_fail env PATH="$TRASH_DIRECTORY/bin:$PATH" "$BATON" run "Add hello.txt" >../planted.out 2>&1 &&
	test_path_is_file ../planted.done &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = failed &&
	run_field "$id" reason >../planted.reason &&
	test_grep "branch .baton/$id. exists already" ../planted.reason &&
	# the foreign branch is as it was
	test "$(git rev-parse "baton/$id")" = "$(cat ../foreign.sha)"
'

# The git that makes a run's branch is killed with its baton (kill -9 of
# serve takes its children) and leaves the ref's lock file: the run's
# next driver must not fail on it for good.
test_expect_success 'a lock left by a git killed while making the branch does not fail the run' '
	make_repo locked &&
	baton_init_with_agent locked &&
	mkdir -p lockbin &&
	real=$(command -v git) &&
	cat >lockbin/git <<-EOF &&
	#!/bin/sh
	case " \$* " in
	*" update-ref -m baton: new run "*)
		if [ ! -e "$TRASH_DIRECTORY/locked.done" ]; then
			: >"$TRASH_DIRECTORY/locked.done"
			for a in "\$@"; do
				case \$a in
				refs/heads/baton/r*)
					mkdir -p "$TRASH_DIRECTORY/locked/.git/refs/heads/baton" &&
					: >"$TRASH_DIRECTORY/locked/.git/\$a.lock" ;;
				esac
			done
			kill -9 \$PPID
			exit 137
		fi ;;
	esac
	exec "$real" "\$@"
	EOF
	chmod +x lockbin/git &&
	cd locked &&
	test_expect_code 137 env PATH="$TRASH_DIRECTORY/lockbin:$PATH" "$BATON" run "Add hello.txt" >../locked.out 2>&1;
	test_path_is_file ../locked.done &&
	id=$(newest_run) &&
	ls .git/refs/heads/baton/*.lock &&
	"$BATON" resume "$id" >../locked-resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test_path_is_missing ".git/refs/heads/baton/$id.lock"
'

# A run's worktree whose admin entry git lost (a half-made entry removed
# by another worker's repair, after a kill) is made again on resume, on
# the run's own branch even where a checkpoint moved it past the base.
test_expect_success 'a worktree git lost is made again on the branch the run made, past its base' '
	make_repo lost &&
	baton_init_with_agent lost &&
	mkdir -p lostbin &&
	real=$(command -v git) &&
	cat >lostbin/git <<-EOF &&
	#!/bin/sh
	case " \$* " in
	*" update-ref -m baton: checkpoint "*)
		"$real" "\$@" || exit
		if [ ! -e "$TRASH_DIRECTORY/lost.done" ]; then
			: >"$TRASH_DIRECTORY/lost.done"
			kill -9 \$PPID
		fi
		exit 0 ;;
	esac
	exec "$real" "\$@"
	EOF
	chmod +x lostbin/git &&
	cd lost &&
	test_expect_code 137 env PATH="$TRASH_DIRECTORY/lostbin:$PATH" "$BATON" run "Add hello.txt" >../lost.out 2>&1;
	test_path_is_file ../lost.done &&
	id=$(newest_run) &&
	base=$(cat ".baton/runs/$id/branch.base") &&
	test "$(git rev-parse "baton/$id")" != "$base" &&
	rm -rf ".git/worktrees/$id" &&
	"$BATON" resume "$id" >../lost-resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	git show "baton/$id:feature.txt" >/dev/null
'

# The driver is killed right after `git worktree add`, while the git that
# makes baton's index of the new worktree holds its lock: the next driver
# takes the worktree as it is and must not fail on that lock later, at
# the first checkpoint (t0019 saw it under make asan).
test_expect_success 'an index lock left while a new worktree was made does not fail the run' '
	make_repo ilock &&
	baton_init_with_agent ilock &&
	mkdir -p ilockbin &&
	real=$(command -v git) &&
	cat >ilockbin/git <<-EOF &&
	#!/bin/sh
	case "\$GIT_INDEX_FILE \$*" in
	*/worktree.index\ *read-tree*)
		if [ ! -e "$TRASH_DIRECTORY/ilock.done" ]; then
			: >"$TRASH_DIRECTORY/ilock.done"
			: >"\$GIT_INDEX_FILE.lock"
			kill -9 \$PPID
			exit 137
		fi ;;
	esac
	exec "$real" "\$@"
	EOF
	chmod +x ilockbin/git &&
	cd ilock &&
	test_expect_code 137 env PATH="$TRASH_DIRECTORY/ilockbin:$PATH" "$BATON" run "Add hello.txt" >../ilock.out 2>&1;
	test_path_is_file ../ilock.done &&
	id=$(newest_run) &&
	test_path_is_file ".baton/runs/$id/worktree.index.lock" &&
	"$BATON" resume "$id" >../ilock-resume.out 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	test_path_is_missing ".baton/runs/$id/worktree.index.lock"
'

test_done
