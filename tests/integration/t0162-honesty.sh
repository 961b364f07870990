#!/bin/bash
test_description='honesty: a turn that produces nothing fails its stage, a failing required step never ends merge_ready, and a blocked change committed mid-run caps the merge even when a later commit undid it'
. "$(dirname "$0")/../lib/test-lib.sh"

# An implementer that exits 0 having said, edited and left nothing.
write_silent() {
	cat >"$1" <<-\EOF &&
	#!/bin/sh
	cat >/dev/null
	exit 0
	EOF
	chmod +x "$1"
}

# An implementer that commits a change to .baton/ (a blocked path) with
# its own git, commits it away again, then does the task as the fake
# agent would: the final diff shows only feature.txt.
write_smuggler() {
	cat >"$1" <<-EOF &&
	#!/bin/sh
	if [ "\$BATON_STAGE_KIND" = execute ]; then
		mkdir -p .baton &&
		echo "evil: true" >.baton/smuggled.yaml &&
		git add .baton/smuggled.yaml &&
		git -c user.name=a -c user.email=a@b commit -qm smuggle &&
		git rm -q .baton/smuggled.yaml &&
		git -c user.name=a -c user.email=a@b commit -qm "put back" ||
		{ echo "smuggler: git failed" >&2; exit 1; }
	fi
	exec "$FAKE_AGENT"
	EOF
	chmod +x "$1"
}

test_expect_success 'an execute turn with no output, no edit and no artifact fails' '
	make_repo silent &&
	write_silent "$PWD/silent.sh" &&
	baton_init_with_agent silent "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  silent: {type: command, command: [\"$PWD/silent.sh\"]}
roles: {default: fake, implementer: silent}" &&
	(cd silent && test_must_fail "$BATON" run --pipeline express "Add a flag" >../silent.out 2>&1) &&
	id=$(cd silent && newest_run) &&
	test "$(cd silent && run_status "$id")" = blocked &&
	(cd silent && "$BATON" events "$id" --json) >silent.events &&
	test_grep "the agent produced nothing: no output, no edit in the worktree and no artifact" silent.events &&
	# it was asked twice (the retry of a broken contract), and no
	# review ever saw the untouched tree
	jq -r "select(.type == \"stage_started\") | .data.stage // .stage" silent.events >silent.stages &&
	test_grep execute silent.stages &&
	test_grep ! review silent.stages &&
	jq -r "select(.type == \"transition\") | .to" silent.events >silent.tr &&
	test_grep ! merge_ready silent.tr
'

test_expect_success 'a turn that only edits, saying nothing, still passes' '
	make_repo quiet &&
	cat >quiet.sh <<-\EOF &&
	#!/bin/sh
	cat >/dev/null
	[ "$BATON_STAGE_KIND" = execute ] && echo line >>feature.txt && exit 0
	exec "$FAKE_AGENT"
	EOF
	chmod +x quiet.sh &&
	baton_init_with_agent quiet "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  quiet: {type: command, command: [\"$PWD/quiet.sh\"]}
roles: {default: fake, implementer: quiet}" &&
	(cd quiet && "$BATON" run --pipeline express "Add a flag" >../quiet.out 2>&1) &&
	test_grep merge_ready quiet.out
'

test_expect_success 'checks that keep failing never end merge_ready' '
	make_repo broken &&
	baton_init_with_agent broken &&
	(cd broken && FAKE_BREAK_TESTS=1 FAKE_FIX_KEEPS_BROKEN=1 \
		test_must_fail "$BATON" run "Break it" >../broken.out 2>&1) &&
	id=$(cd broken && newest_run) &&
	test "$(cd broken && run_status "$id")" = blocked &&
	(cd broken && transitions "$id") >broken.tr &&
	test_grep ! merge_ready broken.tr
'

test_expect_success 'a blocked change committed and undone mid-run caps the merge after an approving review' '
	make_repo smug &&
	write_smuggler "$PWD/smuggler.sh" &&
	baton_init_with_agent smug "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  smug: {type: command, command: [\"$PWD/smuggler.sh\"]}
roles: {default: fake, implementer: smug}
execution: {sandbox: none}" &&
	(cd smug && test_must_fail "$BATON" run --pipeline express "Add a flag" >../smug.out 2>&1) &&
	id=$(cd smug && newest_run) &&
	test "$(cd smug && run_status "$id")" = blocked &&
	# the review approved: the cap came after it, from the history
	(cd smug && "$BATON" events "$id" --json) >smug.events &&
	jq -r "select(.type == \"transition\") | .to" smug.events >smug.tr &&
	test_grep verifying smug.tr &&
	test_grep ! merge_ready smug.tr &&
	jq -r "select(.type == \"policy_violation\") | .data.policy // .policy" smug.events >smug.pol &&
	test_grep history smug.pol &&
	test_grep "\.baton/smuggled.yaml (commit [0-9a-f]*)" smug.events &&
	test_grep "since its fork point" smug.events &&
	jq -r "select(.type == \"transition\" and .to == \"blocked\") | .reason // .data.reason" smug.events >smug.why &&
	test_grep "changes to blocked paths\|change to blocked paths" smug.why &&
	# the final diff alone was clean
	base=$(cd smug && run_field "$id" base_commit) &&
	(cd smug && git diff --name-only "$base" "baton/$id") >smug.diff &&
	test_grep ! smuggled smug.diff
'

test_expect_success 'a blocked path outside policies.allowed_paths in an earlier commit caps it too' '
	make_repo outside &&
	cat >outside.sh <<-EOF &&
	#!/bin/sh
	if [ "\$BATON_STAGE_KIND" = execute ]; then
		echo x >secret.txt && git add secret.txt &&
		git -c user.name=a -c user.email=a@b commit -qm one &&
		git rm -q secret.txt &&
		git -c user.name=a -c user.email=a@b commit -qm two
	fi
	exec "$FAKE_AGENT"
	EOF
	chmod +x outside.sh &&
	baton_init_with_agent outside "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  o: {type: command, command: [\"$PWD/outside.sh\"]}
roles: {default: fake, implementer: o}
policies: {allowed_paths: [feature.txt]}
execution: {sandbox: none}" &&
	(cd outside && test_must_fail "$BATON" run --pipeline express "Add a flag" >../outside.out 2>&1) &&
	id=$(cd outside && newest_run) &&
	test "$(cd outside && run_status "$id")" = blocked &&
	(cd outside && "$BATON" events "$id" --json) >outside.events &&
	test_grep "secret.txt (commit" outside.events
'

test_done
