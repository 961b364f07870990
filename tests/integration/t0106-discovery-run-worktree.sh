#!/bin/bash
test_description='adversarial: a baton started inside a run s worktree (written by the agent) is refused, naming the repository, and follows no .git or .baton the agent planted there'
. "$(dirname "$0")/../lib/test-lib.sh"

real_git=$(command -v git)
mkdir fakebin &&
	printf '#!/bin/sh\necho "$*" >>"%s/git.log"\nexec "%s" "$@"\n' \
		"$TRASH_DIRECTORY" "$real_git" >fakebin/git &&
	chmod +x fakebin/git
PATH=$TRASH_DIRECTORY/fakebin:$PATH
export PATH

wt=repo/.baton/worktrees/r1

# refused DIR [ENV=VAL...]: baton status in DIR exits 1 naming run r1
# and the repository, starts no git, and leaves the evil repository alone.
refused() {
	local dir=$1
	shift
	rm -f git.log
	(cd "$dir" && env "$@" "$BATON" status >"$TRASH_DIRECTORY/out" \
		2>"$TRASH_DIRECTORY/err"; echo $? >"$TRASH_DIRECTORY/rc") &&
	echo 1 >one && test_cmp one rc &&
	test_grep "inside the worktree of run r1" err &&
	test_grep "run baton in .$TRASH_DIRECTORY/repo." err &&
	test_path_is_missing git.log &&
	test_path_is_missing evil/.baton/baton.db &&
	test_path_is_missing evil/touched
}

test_expect_success 'setup: a repository, a run worktree, an evil repository' '
	make_repo repo &&
	(cd repo && "$BATON" init >/dev/null) &&
	git -C repo worktree add -q -b baton/r1 .baton/worktrees/r1 &&
	make_repo evil &&
	mkdir evil/.baton &&
	printf "hooks:\n  before_stage: touch %s/evil/touched\n" \
		"$TRASH_DIRECTORY" >evil/.baton/config.yaml
'

test_expect_success 'the worktree as git made it: refused' '
	refused "$wt" X=1
'

test_expect_success 'its .git file pointing at another repository: refused' '
	echo "gitdir: $TRASH_DIRECTORY/evil/.git" >"$wt/.git" &&
	refused "$wt" X=1 &&
	mkdir -p "$wt/deep/er" &&
	refused "$wt/deep/er" X=1
'

test_expect_success 'a .baton/ planted in the worktree is not read either' '
	cp -R evil/.baton "$wt/.baton" &&
	refused "$wt" X=1 &&
	test_path_is_missing "$wt/.baton/baton.db"
'

test_expect_success 'a whole repository planted inside the worktree: refused' '
	make_repo "$wt/sub" &&
	mkdir "$wt/sub/.baton" &&
	refused "$wt/sub" X=1 &&
	test_path_is_missing "$wt/sub/.baton/baton.db"
'

test_expect_success 'a nested .baton/worktrees/ made by the agent: the real repository is named' '
	mkdir -p "$wt/x/.baton/worktrees/r9" &&
	git init -q "$wt/x" &&
	refused "$wt/x/.baton/worktrees/r9" X=1
'

test_expect_success 'the worktree .git removed: still refused' '
	rm -f "$wt/.git" &&
	refused "$wt" X=1
'

test_expect_success 'GIT_DIR pointing at the evil repository: still refused, before git' '
	refused "$wt" GIT_DIR=$TRASH_DIRECTORY/evil/.git
'

test_expect_success 'the repository itself still answers' '
	(cd repo && "$BATON" status >../ok.out) &&
	test_grep "no runs yet" ok.out
'

test_done
