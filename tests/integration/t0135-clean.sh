#!/bin/bash
test_description='baton clean: lists, then removes only what is safe (worktrees, branches, run folders of ended runs), each kept thing with its reason'
. "$(dirname "$0")/../lib/test-lib.sh"

# Holds the POSIX lock of a run's lock file, as a driver does, until the
# file $2 appears; its pid in $3.
hold_lock() {
	python3 - "$1" "$2" "$3" <<-'EOF' &
	import fcntl, os, sys, time
	fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
	fcntl.lockf(fd, fcntl.LOCK_EX)
	open(sys.argv[3], "w").write(str(os.getpid()))
	while not os.path.exists(sys.argv[2]):
	    time.sleep(0.05)
	EOF
}

test_expect_success 'setup: four ended runs, a remote' '
	make_repo repo &&
	git init -q --bare remote.git &&
	baton_init_with_agent repo &&
	cd repo &&
	git remote add origin ../remote.git &&
	for t in "Clean one" "Dirty two" "Pushed three" "Watched four"; do
		"$BATON" run "$t" >/dev/null 2>&1 || exit 1
	done &&
	"$BATON" status --json >../st &&
	test "$(jq "[.[] | select(.status == \"merge_ready\")] | length" ../st)" = 4
'

test_expect_success 'without a terminal and without --yes it is a dry run' '
	cd repo &&
	"$BATON" clean </dev/null >../dry.out &&
	test_grep "^r1-clean-one: remove worktree; keep branch baton/r1-clean-one: 1 commit on no remote and not merged into main (merge_ready)" ../dry.out &&
	test_grep "^dry run: nothing removed" ../dry.out &&
	test_path_is_dir .baton/worktrees/r1-clean-one &&
	test_expect_code 2 "$BATON" clean --dry-run --yes 2>../both.err &&
	test_grep "contradict" ../both.err
'

test_expect_success 'a dirty worktree is kept whole, with its branch and folder' '
	cd repo &&
	echo precious >.baton/worktrees/r2-dirty-two/notes.txt &&
	"$BATON" clean --yes r2 >../dirty.out &&
	test_grep "^r2-dirty-two: keep: its worktree has uncommitted changes" ../dirty.out &&
	test_path_is_file .baton/worktrees/r2-dirty-two/notes.txt &&
	git rev-parse -q --verify baton/r2-dirty-two >/dev/null &&
	test_path_is_dir .baton/runs/r2-dirty-two &&
	: a changed tracked file is dirt too &&
	rm .baton/worktrees/r2-dirty-two/notes.txt &&
	echo changed >>.baton/worktrees/r2-dirty-two/README &&
	"$BATON" clean --yes r2 >../dirty2.out &&
	test_grep "^r2-dirty-two: keep: its worktree has uncommitted changes" ../dirty2.out &&
	test_path_is_dir .baton/worktrees/r2-dirty-two
'

test_expect_success 'an unpushed branch is kept; pushed, it goes with the run folder' '
	cd repo &&
	"$BATON" clean --yes r3 >../unpushed.out &&
	test_grep "^r3-pushed-three: removed worktree; keep branch baton/r3-pushed-three: 1 commit on no remote" ../unpushed.out &&
	test_path_is_missing .baton/worktrees/r3-pushed-three &&
	git rev-parse -q --verify baton/r3-pushed-three >/dev/null &&
	test_path_is_dir .baton/runs/r3-pushed-three &&
	git push -q origin baton/r3-pushed-three &&
	"$BATON" clean --yes r3 >../pushed.out &&
	test_grep "^r3-pushed-three: removed branch baton/r3-pushed-three, run folder (merge_ready)" ../pushed.out &&
	test_must_fail git rev-parse -q --verify refs/heads/baton/r3-pushed-three &&
	test_path_is_missing .baton/runs/r3-pushed-three &&
	: the record stays, with what went &&
	"$BATON" show r3 >/dev/null &&
	"$BATON" events r3 --json </dev/null >../ev3 &&
	jq -s -e "map(select(.type == \"run_cleaned\")) | last | .data.branch == \"baton/r3-pushed-three\" and .data.folder" ../ev3 >/dev/null
'

test_expect_success 'a branch merged into the base goes' '
	cd repo &&
	git merge -q --no-edit baton/r1-clean-one &&
	"$BATON" clean --yes r1 >../merged.out &&
	test_grep "^r1-clean-one: removed worktree, branch baton/r1-clean-one, run folder (merge_ready)" ../merged.out &&
	test_path_is_missing .baton/worktrees/r1-clean-one &&
	test_path_is_missing .baton/runs/r1-clean-one &&
	git worktree list >../wl &&
	test_grep ! r1-clean-one ../wl
'

test_expect_success 'a run someone watches through serve is kept until the stream closes' '
	cd repo &&
	git push -q origin baton/r4-watched-four &&
	serve_http serve1 &&
	bg_start sse curl -s -N -H "Authorization: Bearer $HTTP_TOKEN" \
		"$HTTP_URL/api/v1/events?run=r4&after=0" &&
	wait_for "grep -q \"^event:\" sse.out" 20 &&
	"$BATON" clean --yes r4 >../watched.out &&
	test_grep "^r4-watched-four: keep: someone is watching it (serve)" ../watched.out &&
	test_path_is_dir .baton/worktrees/r4-watched-four &&
	kill "$(cat sse.pid)" && bg_wait sse >/dev/null &&
	wait_for "\"\$BATON\" clean --dry-run r4 | grep -q \"remove worktree\"" 20 &&
	"$BATON" clean --yes r4 >../unwatched.out &&
	test_grep "^r4-watched-four: removed worktree, branch baton/r4-watched-four, run folder" ../unwatched.out
'

test_expect_success 'a run that has not ended, or that a process drives, is kept' '
	cd repo &&
	git checkout -q -b side &&
	"$BATON" run "Held five" >/dev/null 2>&1 &&
	git checkout -q main &&
	id=$(newest_run) &&
	git push -q origin "baton/$id" &&
	hold_lock ".baton/runs/$id/lock" ../release5 ../holder5 &&
	wait_for "test -s ../holder5" &&
	"$BATON" clean --yes "$id" >../held.out &&
	test_grep "^$id: keep: pid $(cat ../holder5) drives it" ../held.out &&
	test_path_is_dir ".baton/worktrees/$id" &&
	: >../release5 && wait &&
	db_query "UPDATE runs SET status = '\''interrupted'\'' WHERE id = '\''$id'\''" &&
	"$BATON" clean --yes --status interrupted >../live.out &&
	test_grep "^$id: keep: it has not ended (interrupted)" ../live.out &&
	db_query "UPDATE runs SET status = '\''merge_ready'\'' WHERE id = '\''$id'\''"
'

# The race: clean lists a run as removable, and before the person says
# yes a driver takes it (as a resume would). Under the run lock clean
# judges it again, and keeps it.
test_expect_success 'a run taken by a driver between the listing and the yes is kept' '
	cd repo &&
	id=$(newest_run) &&
	python3 - "$BATON" "$id" <<-'\''EOF'\'' >../race.out &&
	import os, pty, subprocess, sys, time
	baton, rid = sys.argv[1], sys.argv[2]
	pid, fd = pty.fork()
	if pid == 0:
	    os.execv(baton, [baton, "clean", rid])
	out = b""
	while b"[y/N]" not in out:
	    out += os.read(fd, 4096)
	holder = subprocess.Popen(["python3", "-c",
	    "import fcntl,os,sys,time\n"
	    "fd=os.open(sys.argv[1],os.O_RDWR|os.O_CREAT,0o644)\n"
	    "fcntl.lockf(fd,fcntl.LOCK_EX)\n"
	    "print(os.getpid(),flush=True)\n"
	    "time.sleep(30)\n", ".baton/runs/%s/lock" % rid],
	    stdout=subprocess.PIPE)
	hpid = holder.stdout.readline().strip().decode()
	os.write(fd, b"y\n")
	try:
	    while True:
	        chunk = os.read(fd, 4096)
	        if not chunk:
	            break
	        out += chunk
	except OSError:
	    pass
	os.waitpid(pid, 0)
	holder.kill()
	sys.stdout.write(out.decode().replace("\r", "") + "holder " + hpid + "\n")
	EOF
	test_grep "^$id: remove worktree, branch" ../race.out &&
	hpid=$(sed -n "s/^holder //p" ../race.out) &&
	test_grep "^$id: keep: driven by pid $hpid" ../race.out &&
	test_path_is_dir ".baton/worktrees/$id" &&
	git rev-parse -q --verify "baton/$id" >/dev/null
'

test_expect_success 'hostile leftovers: links out of the worktree and run folder are not followed' '
	cd repo &&
	id=$(newest_run) &&
	mkdir -p ../precious &&
	echo keep >../precious/file &&
	ln -s "$TRASH_DIRECTORY/precious" ".baton/worktrees/$id/escape" &&
	ln -s "$TRASH_DIRECTORY/precious/file" ".baton/runs/$id/escape-file" &&
	"$BATON" clean --yes "$id" >../links.out &&
	test_grep "^$id: keep: its worktree has uncommitted changes" ../links.out &&
	"$BATON" clean --yes --force "$id" >../forced.out &&
	test_grep "^$id: removed worktree, branch baton/$id, run folder" ../forced.out &&
	test_path_is_file ../precious/file &&
	test_path_is_missing ".baton/worktrees/$id" &&
	test_path_is_missing ".baton/runs/$id"
'

test_expect_success 'hostile leftovers: a worktree path swapped for a link is kept' '
	cd repo &&
	"$BATON" run "Swapped six" >/dev/null 2>&1 &&
	id=$(newest_run) &&
	git push -q origin "baton/$id" &&
	mv ".baton/worktrees/$id" ../moved &&
	ln -s "$TRASH_DIRECTORY/precious" ".baton/worktrees/$id" &&
	"$BATON" clean --yes --force "$id" >../swapped.out &&
	test_grep "^$id: keep: its worktree .* is not a directory" ../swapped.out &&
	test_path_is_file ../precious/file &&
	rm ".baton/worktrees/$id" && mv ../moved ".baton/worktrees/$id"
'

test_expect_success 'a branch on record that is not a run branch is never deleted' '
	cd repo &&
	id=$(newest_run) &&
	db_query "UPDATE runs SET branch = '\''main'\'' WHERE id = '\''$id'\''" &&
	"$BATON" clean --yes --force "$id" >../notours.out &&
	test_grep "^$id: keep: branch: .main. is not a run branch of baton" ../notours.out &&
	git rev-parse -q --verify refs/heads/main >/dev/null &&
	db_query "UPDATE runs SET branch = '\''baton/--all x'\'' WHERE id = '\''$id'\''" &&
	"$BATON" clean --yes --force "$id" >../odd.out &&
	test_grep "^$id: keep: branch: .baton/--all x. is not a run branch of baton" ../odd.out &&
	db_query "UPDATE runs SET branch = '\''baton/$id'\'' WHERE id = '\''$id'\''"
'

test_expect_success 'a task title with odd characters makes a run clean can remove' '
	cd repo &&
	"$BATON" run "Odd \$(touch pwned) -- --force; \"q\" *" >/dev/null 2>&1 &&
	id=$(newest_run) &&
	git push -q origin "baton/$id" &&
	"$BATON" clean --yes "$id" >../oddtitle.out &&
	test_grep "^$id: removed worktree, branch baton/$id, run folder" ../oddtitle.out &&
	test_path_is_missing pwned &&
	test_path_is_missing ".baton/worktrees/$id"
'

test_expect_success '--older-than and --status choose the runs; bad values are refused' '
	cd repo &&
	"$BATON" clean --older-than 14d </dev/null >../old.out &&
	test_grep "^nothing to clean" ../old.out &&
	"$BATON" clean --older-than 0s </dev/null >../young.out &&
	test_grep "r2-dirty-two: keep" ../young.out &&
	"$BATON" clean --status aborted </dev/null >../aborted.out &&
	test_grep "^nothing to clean" ../aborted.out &&
	test_expect_code 2 "$BATON" clean --older-than 14x 2>../bad.err &&
	test_grep "older-than wants an age such as 14d" ../bad.err
'

test_expect_success '--vacuum compacts the store, and the records stay' '
	cd repo &&
	"$BATON" clean --yes --vacuum >../vac.out &&
	test_grep "^store compacted" ../vac.out &&
	"$BATON" show r1 >/dev/null &&
	"$BATON" clean --vacuum </dev/null >../vacdry.out &&
	test_grep "dry run: the store is not compacted" ../vacdry.out
'

test_done
