#!/bin/bash
test_description='every host sees every run: host A drives a run on a shared PostgreSQL store; host B (another clone, no run folder of it) shows its artifacts and transcript through baton show and its API; a huge transcript is stored truncated with a pointer'
. "$(dirname "$0")/../lib/test-lib.sh"

# Needs the cluster tests/run.sh starts for its PostgreSQL pass.
if [ -z "${BATON_TEST_PG_ADMIN:-}" ] || [ -z "${BATON_TEST_PG_DIR:-}" ]; then
	say "skipped: no PostgreSQL (tests/run.sh runs this in its PostgreSQL pass)"
	test_done
fi

write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	case "$BATON_STAGE_KIND" in
	execute)
		echo "$BATON_RUN_ID" >"$BATON_WORKTREE/$BATON_RUN_ID.txt"
		if grep -q huge "$BATON_PROMPT_FILE"; then
			awk 'BEGIN { for (i = 0; i < 4000; i++) printf "line %05d %s\n", i, sprintf("%085d", 0) }'
		fi
		printf 'TRANSCRIPT-MARK execute of %s \303\251\n' "$BATON_RUN_ID" ;;
	review) echo "DECISION: APPROVED" ;;
	*) echo "# PLAN-MARK plan of $BATON_RUN_ID" ;;
	esac
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

# clone NAME: a clone of the remote, set up for baton on the shared store.
clone() {
	git clone -q "$TRASH_DIRECTORY/remote.git" "$1" &&
	(cd "$1" && "$BATON" init >/dev/null) &&
	cat >"$1/.baton/config.yaml" <<-EOF
	providers:
	  instant: {type: command, command: ["$TRASH_DIRECTORY/agent"]}
	roles: {default: instant}
	pipelines:
	  short:
	    terminal: merge_ready
	    stages:
	      - {name: plan, kind: plan}
	      - {name: execute, kind: execute}
	      - {name: review, kind: review}
	workflow: {pipeline: short}
	validate: {commands: []}
	execution: {sandbox: none}
	runtime: {judge: false, file_cap_kib: 64}
	store: "$(cat "$TRASH_DIRECTORY/store-url")"
	EOF
}

test_expect_success 'setup: a remote and two host clones on one database' '
	write_agent &&
	url=$(pg_new_db) &&
	db=${url##*/} &&
	echo "postgresql:///$db?host=$BATON_TEST_PG_DIR&port=$(cat "$BATON_TEST_PG_DIR/port")&user=postgres" >store-url &&
	git init -q --bare remote.git &&
	make_repo seed &&
	git -C seed push -q ../remote.git main &&
	clone a && clone b
'

test_expect_success 'host A drives two runs' '
	(cd a && "$BATON" run "add a note" >../run1.out 2>&1) &&
	(cd a && "$BATON" run "a huge one" >../run2.out 2>&1) &&
	(cd a && "$BATON" status --json) >status.json &&
	jq -r ".[] | select(.task == \"add a note\") | .id" status.json >r1 &&
	jq -r ".[] | select(.task == \"a huge one\") | .id" status.json >r2 &&
	test -s r1 && test -s r2 &&
	test -d "a/.baton/runs/$(cat r1)" &&
	test_path_is_missing "b/.baton/runs/$(cat r1)"
'

test_expect_success 'host B: baton show lists the files and prints the artifact and the transcript' '
	r=$(cat r1) &&
	(cd b && "$BATON" show "$r") >show.txt &&
	test_grep "plan.md" show.txt &&
	test_grep "calls/[0-9]*-execute-instant-0.stdout .*$TRASH_DIRECTORY/a/.baton/runs/$r/calls/" show.txt &&
	(cd b && "$BATON" show "$r" --file plan.md) >plan.out &&
	test_grep "PLAN-MARK plan of $r" plan.out &&
	name=$(sed -n "s/^  \(calls\/[0-9]*-execute-instant-0.stdout\) .*/\1/p" show.txt) &&
	echo "$name" >t1 &&
	(cd b && "$BATON" show "$r" --file "$name") >transcript.out &&
	test_grep "TRANSCRIPT-MARK execute of $r" transcript.out &&
	cmp transcript.out "a/.baton/runs/$r/$name"
'

test_expect_success 'host B: its API answers with the files, the transcript and the artifacts' '
	cd b &&
	serve_http serveB --workers 1 &&
	r=$(cat ../r1) && name=$(cat ../t1) &&
	api_expect 200 GET "/api/v1/runs/$r/files" >../files.json &&
	test_jq ".files | map(.name) | index(\"plan.md\") != null" ../files.json &&
	test_jq ".files | map(.name) | index(\"$name\") != null" ../files.json &&
	api_expect 200 GET "/api/v1/runs/$r/file?name=$name" >../file.json &&
	test_jq ".truncated == false and (.content | contains(\"TRANSCRIPT-MARK execute of $r\"))" ../file.json &&
	test_jq ".sha256 == \"$(sha256sum "../a/.baton/runs/$r/$name" | cut -d" " -f1)\"" ../file.json &&
	api_expect 200 GET "/api/v1/runs/$r/artifacts/plan.md" >../art.out &&
	test_grep "PLAN-MARK plan of $r" ../art.out &&
	api_expect 404 GET "/api/v1/runs/$r/file?name=nope.md" >/dev/null &&
	api_expect 400 GET "/api/v1/runs/$r/file" >/dev/null
'

test_expect_success 'host B: a huge transcript is stored truncated with its size, sha256, host and path' '
	cd b &&
	serve_http serveB2 --workers 1 &&
	r=$(cat ../r2) &&
	api_expect 200 GET "/api/v1/runs/$r/files" >../files2.json &&
	name=$(jq -r "[.files[] | select(.name | test(\"execute-instant-0.stdout$\"))][0].name" ../files2.json) &&
	full=../a/.baton/runs/$r/$name &&
	api_expect 200 GET "/api/v1/runs/$r/file?name=$name" >../file2.json &&
	test_jq ".truncated == true and .stored == 65536 and (.content | length) == 65536" ../file2.json &&
	test_jq ".size == $(wc -c <"$full" | tr -d " ")" ../file2.json &&
	test_jq ".sha256 == \"$(sha256sum "$full" | cut -d" " -f1)\"" ../file2.json &&
	test_jq ".path == \"$TRASH_DIRECTORY/a/.baton/runs/$r/$name\" and .host == \"$(hostname)\"" ../file2.json &&
	"$BATON" show "$r" --file "$name" >../part 2>../part.err &&
	head -c 65536 "$full" | cmp - ../part &&
	test_grep "truncated: 65536 of" ../part.err
'

test_done
