#!/bin/bash
test_description='the run folder is baton'"'"'s: links an agent plants there (for the next call'"'"'s output, events.jsonl, validation.log, reports/, an artifact) are refused, not followed, and the run names them'
. "$(dirname "$0")/../lib/test-lib.sh"

# A file and a folder the agent "could not write": they sit outside the
# repository, and nothing baton does may change them.
printf 'precious\n' >victim
mkdir victim-dir
printf 'SECRET-%s\n' 0123456789 >secret

# hostile_agent NAME BODY: a `type: command` agent that runs BODY (shell)
# during its plan stage, then behaves as the fake agent does.
hostile_agent() {
	{
		echo '#!/bin/sh'
		echo 'if [ "$BATON_STAGE_KIND" = plan ]; then'
		printf '%s\n' "$2"
		echo 'fi'
		echo "exec \"$FAKE_AGENT\""
	} >"$1" &&
		chmod +x "$1"
}

# setup_repo NAME: a repository whose agent is ./NAME.sh, without the
# sandbox: under it the run folder is read-only to the agent (t0038), so
# only without it can the agent plant links there for baton to trip over.
setup_repo() {
	make_repo "$1" &&
		baton_init_with_agent "$1" "providers:
  hostile: {type: command, command: [\"$TRASH_DIRECTORY/$1.sh\"]}
roles: {default: hostile}
execution: {sandbox: none}"
}

victim_untouched() {
	printf 'precious\n' >expect-victim &&
		test_cmp expect-victim "$TRASH_DIRECTORY/victim" &&
		test -z "$(ls -A "$TRASH_DIRECTORY/victim-dir")"
}

test_expect_success 'links planted for the next calls'"'"' stdout and stderr: the call is refused and the run fails, naming the link' '
	hostile_agent calls.sh "
for n in \$(seq 0 60); do
	for s in execute review verify fix; do
		for a in 0 1; do
			f=\$BATON_RUN_DIR/calls/\$(printf %04d \$n)-\$s-hostile-\$a
			ln -sf \"$TRASH_DIRECTORY/victim\" \$f.stdout
			ln -sf \"$TRASH_DIRECTORY/victim\" \$f.stderr
		done
	done
done" &&
	setup_repo calls &&
	cd calls &&
	test_must_fail "$BATON" run "Add hello.txt" >../calls.out 2>&1 &&
	cd .. &&
	victim_untouched &&
	(cd calls && "$BATON" show --json "$(newest_run)") >calls.json &&
	test_jq ".status == \"failed\"" calls.json &&
	test_jq ".reason | test(\"stage execute: .*calls/[0-9]{4}-execute-hostile-0.std(out|err). is a symbolic link\")" calls.json
'

test_expect_success 'events.jsonl, validation.log and reports/ as links: nothing is written through them' '
	hostile_agent record.sh "
# baton appends events meanwhile: swap in the link atomically
ln -s \"$TRASH_DIRECTORY/victim\" \$BATON_RUN_DIR/link.tmp
mv -fT \$BATON_RUN_DIR/link.tmp \$BATON_RUN_DIR/events.jsonl
ln -s \"$TRASH_DIRECTORY/victim\" \$BATON_RUN_DIR/validation.log
rm -rf \$BATON_RUN_DIR/reports
ln -s \"$TRASH_DIRECTORY/victim-dir\" \$BATON_RUN_DIR/reports" &&
	setup_repo record &&
	cd record &&
	"$BATON" run "Add hello.txt" >../record.out 2>&1 &&
	cd .. &&
	victim_untouched &&
	# the mirror and the report are refused, saying why; the store
	# keeps the whole record, and validation.log is baton'"'"'s again
	test_grep "events.jsonl. is a symbolic link" record.out &&
	test_grep "reports. is a symbolic link" record.out &&
	test -L record/.baton/runs/*/events.jsonl &&
	test ! -L record/.baton/runs/*/validation.log &&
	(cd record && "$BATON" events "$(newest_run)" --json) >record.events &&
	jq -s -e "[.[] | select(.type == \"transition\")] | length > 2" record.events
'

test_expect_success 'an artifact that is a link to a file outside is not read' '
	hostile_agent artifact.sh "
\"$FAKE_AGENT\" >/dev/null
rm -f \$BATON_RUN_DIR/plan.md
ln -s \"$TRASH_DIRECTORY/secret\" \$BATON_RUN_DIR/plan.md
echo planned
exit 0" &&
	setup_repo artifact &&
	cd artifact &&
	"$BATON" run "Add hello.txt" >../artifact.out 2>&1
	cd "$TRASH_DIRECTORY" &&
	test_must_fail grep -r -l "SECRET-0123456789" artifact/.baton/runs artifact/.baton/baton.db
'

test_done
