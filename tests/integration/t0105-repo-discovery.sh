#!/bin/bash
test_description='baton finds its repository without running git where the layout is certain (a .git folder, a linked worktree s .git file) and asks git where it is not (GIT_DIR, GIT_CEILING_DIRECTORIES, inside .git, core.worktree), with the same answer as git rev-parse; status loads no library it does not use'
. "$(dirname "$0")/../lib/test-lib.sh"

# Every git baton starts goes through fakebin/git, which logs its argv.
real_git=$(command -v git)
mkdir fakebin &&
	printf '#!/bin/sh\necho "$*" >>"%s/git.log"\nexec "%s" "$@"\n' \
		"$TRASH_DIRECTORY" "$real_git" >fakebin/git &&
	chmod +x fakebin/git
PATH=$TRASH_DIRECTORY/fakebin:$PATH
export PATH

# no_git_ran CMD...: CMD runs (in the current folder) and starts no git.
no_git_ran() {
	rm -f "$TRASH_DIRECTORY/git.log"
	"$@" || return 1
	test_path_is_missing "$TRASH_DIRECTORY/git.log"
}

# git_ran CMD...: CMD asks git rev-parse where the repository is; returns
# CMD's exit status (99 if it did not ask git).
git_ran() {
	local rc=0
	rm -f "$TRASH_DIRECTORY/git.log"
	"$@" || rc=$?
	test_grep "rev-parse --show-toplevel" "$TRASH_DIRECTORY/git.log" ||
		return 99
	return $rc
}

test_expect_success 'setup: a repository with .baton/' '
	make_repo repo &&
	(cd repo && "$BATON" init >/dev/null) &&
	test_path_is_dir repo/.baton &&
	mkdir -p repo/a/b/c
'

test_expect_success 'status at the top and deep in a subfolder starts no git' '
	(cd repo && no_git_ran "$BATON" status >../top.out) &&
	(cd repo/a/b/c && no_git_ran "$BATON" status >../../../../deep.out) &&
	test_grep "no runs yet" top.out &&
	test_cmp top.out deep.out
'

test_expect_success 'status loads neither libpq nor libcurl nor libcrypto' '
	(cd repo && LD_DEBUG=files "$BATON" status >/dev/null 2>../ld.out) &&
	test_grep "file=libsqlite3" ld.out &&
	test_grep ! -e "file=libpq" -e "file=libcurl" -e "file=libcrypto" ld.out
'

test_expect_success 'through a symbolic link to the repository: the same store' '
	ln -s repo/a link &&
	(cd link/b && no_git_ran "$BATON" status --json >../../../link.out) &&
	test_jq "length == 0" link.out
'

test_expect_success 'a linked worktree (git worktree add): its own top, no git' '
	git -C repo worktree add -q ../linked &&
	(cd linked && "$BATON" init >/dev/null) &&
	test_path_is_dir linked/.baton &&
	test_path_is_missing repo/a/.baton &&
	mkdir -p linked/x &&
	(cd linked/x && no_git_ran "$BATON" status >../../linked.out) &&
	test_grep "no runs yet" linked.out
'

test_expect_success 'a nested repository wins over the one around it, as in git' '
	make_repo repo/a/inner &&
	(cd repo/a/inner && test_expect_code 1 "$BATON" status 2>../../../inner.err) &&
	test_grep "no .baton/ in .*repo/a/inner" inner.err
'

test_expect_success 'GIT_DIR, GIT_WORK_TREE and GIT_CEILING_DIRECTORIES: git decides' '
	(cd repo/a && GIT_DIR=$TRASH_DIRECTORY/repo/.git GIT_WORK_TREE=$TRASH_DIRECTORY/repo \
		git_ran "$BATON" status >../../gd.out) &&
	test_grep "no runs yet" gd.out &&
	(cd repo/a && GIT_CEILING_DIRECTORIES=$TRASH_DIRECTORY/repo/a \
		git_ran "$BATON" status >../../ceil.out) &&
	test_grep "no runs yet" ceil.out &&
	mkdir norepo &&
	(cd norepo && GIT_CEILING_DIRECTORIES=$TRASH_DIRECTORY \
		test_expect_code 1 git_ran "$BATON" status 2>../norepo.err) &&
	test_grep "not inside a git repository" norepo.err
'

test_expect_success 'inside .git: git decides, and says it is no work tree' '
	(cd repo/.git/refs && test_expect_code 1 git_ran "$BATON" status 2>../../../ingit.err) &&
	test_grep "not inside a git repository" ingit.err
'

test_expect_success 'core.worktree in the config: git decides, and its answer is used' '
	make_repo split &&
	mkdir elsewhere &&
	git -C split config core.worktree "$TRASH_DIRECTORY/elsewhere" &&
	(cd split && git_ran "$BATON" init >/dev/null 2>&1 || true) &&
	test_path_is_dir elsewhere/.baton &&
	test_path_is_missing split/.baton
'

test_expect_success 'a .git that is a link, or a .git file naming nothing: git decides' '
	make_repo linked2 &&
	mv linked2/.git linked2.git &&
	ln -s ../linked2.git linked2/.git &&
	(cd linked2 && git_ran "$BATON" init >/dev/null) &&
	test_path_is_dir linked2/.baton &&
	make_repo broken &&
	rm -rf broken/.git && echo "gitdir: /nonexistent/x" >broken/.git &&
	(cd broken && test_expect_code 1 git_ran "$BATON" status 2>../broken.err) &&
	test_grep "not inside a git repository" broken.err
'

test_done
