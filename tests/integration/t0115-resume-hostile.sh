#!/bin/bash
test_description='session resume with a hostile agent: a session id that is a flag, shell text, a path or two lines is never recorded as a session, never passed to the agent, and the stage goes on afresh'
. "$(dirname "$0")/../lib/test-lib.sh"

# A stand-in for claude (type claude-code, so baton would resume it
# natively): it keeps each call's argv (NUL-separated), names the session
# $HOSTILE_JSON (a JSON string) and, on its first call, either ends
# without a result (a broken answer: the stage retries) or, with
# FIRST=hang, works until killed. Later calls answer properly.
cat >fakeclaude <<-EOF
#!/bin/sh
state=$TRASH_DIRECTORY/state.\$TAG
mkdir -p "\$state"
n=\$(ls "\$state" | grep -c '^argv' || true)
printf '%s\0' "\$@" >"\$state/argv.\$n"
printf "%s\\n" "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\$HOSTILE_JSON}"
if [ "\$n" = 0 ]; then
	if [ "\$FIRST" = hang ]; then
		printf "%s\\n" "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"working on it\"}]},\"session_id\":\$HOSTILE_JSON}"
		exec sleep 1000
	fi
	exit 0
fi
echo feature >>feature.txt
printf "%s\\n" "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"done\",\"session_id\":\$HOSTILE_JSON}"
EOF
chmod +x fakeclaude

config() {
	cat <<-EOF
	providers:
	  fake: {type: command, command: ["$FAKE_AGENT"]}
	  claude: {type: claude-code, command: ["$TRASH_DIRECTORY/fakeclaude"]}
	roles: {default: fake, implementer: claude}
	execution: {sandbox: none}
	EOF
}

# no_resume_in TAG: no argument of the stand-in's calls before the
# prompt (the operand after "--") is a resume flag or holds any of the
# hostile text.
no_resume_in() {
	local f a
	for f in "$TRASH_DIRECTORY/state.$1"/argv.*; do
		while IFS= read -r -d "" a; do
			test "$a" = -- && break
			case $a in
			--resume* | -r | --session* | *PWNED* | -rf | *passwd* | *"second line"*)
				echo "argv of $f holds '$a'" >&2
				return 1
				;;
			esac
		done <"$f"
	done
}

n=0
while read -r hostile; do
	n=$((n + 1))
	export HOSTILE_JSON=$hostile TAG=$n FIRST=
	test_expect_success "session id $hostile: refused, never passed on; the stage goes on afresh" '
		make_repo repo$TAG &&
		baton_init_with_agent repo$TAG "$(config)" &&
		cd repo$TAG &&
		test_expect_code 0 "$BATON" run "Add a feature" >../run$TAG.out 2>&1 &&
		id=$(newest_run) &&
		test "$(run_status "$id")" = merge_ready &&
		test_path_is_file ../state.$TAG/argv.1 &&
		no_resume_in $TAG &&
		test_path_is_missing PWNED &&
		test_path_is_missing "$(run_field "$id" worktree)/PWNED" &&
		"$BATON" events "$id" --json >../events$TAG &&
		test_must_fail jq -e "select(.type == \"agent_session\")" ../events$TAG &&
		jq -c "select(.type == \"session_refused\") | .data" ../events$TAG >../refused$TAG &&
		test_line_count = 1 ../refused$TAG &&
		test_jq ".provider == \"claude\" and .stage == \"execute\"" ../refused$TAG &&
		jq -c "select(.type == \"agent_resumed\") | .data" ../events$TAG >../resumed$TAG &&
		test_jq ".path == \"summary\" and .session == null" ../resumed$TAG
	'
done <<\EOF
"--dangerously-skip-permissions=PWNED"
"-rf"
"x;touch PWNED"
"$(touch PWNED)"
"../../etc/passwd"
"abc\nsecond line"
"-r"
EOF

test_expect_success 'a hostile id named mid-call is not on record: after kill -9, the worktree is reset and nothing is resumed' '
	export HOSTILE_JSON="\"--resume=PWNED\"" TAG=kill FIRST=hang &&
	make_repo killed &&
	baton_init_with_agent killed "$(config)" &&
	cd killed &&
	bg_start ../killed.run "$BATON" run "Add a feature" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for "test -f ../state.kill/argv.0" 60 &&
	# its output was read while it ran, the id with it
	wait_for "\"\$BATON\" events $id --json | grep -q agent_output.*working" 30 &&
	kill -KILL "$(cat ../killed.run.pid)" &&
	test "$(bg_wait ../killed.run)" = 137 &&
	export FIRST= &&
	test_expect_code 0 "$BATON" resume "$id" >../killed.resume 2>&1 &&
	test "$(run_status "$id")" = merge_ready &&
	no_resume_in kill &&
	"$BATON" events "$id" --json >../killed.events &&
	test_must_fail jq -e "select(.type == \"agent_session\")" ../killed.events &&
	jq -c "select(.type == \"transition\" and .from == \"interrupted\") | .data" ../killed.events >../reentry &&
	test_jq ".worktree_kept == null" ../reentry &&
	jq -c "select(.type == \"agent_resumed\") | .data" ../killed.events >../killed.resumed &&
	test_jq ".path == \"summary\" and .session == null and .cut_off == true" ../killed.resumed
'

test_done
