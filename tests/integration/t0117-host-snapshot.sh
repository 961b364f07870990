#!/bin/bash
test_description='the host snapshot: made at serve start, cached in .baton/ with a time to live, shown by doctor, offered to agents in the prompt; probing never runs what the agent could have put on PATH, and is bounded in time'
. "$(dirname "$0")/../lib/test-lib.sh"

make_repo repo &&
	baton_init_with_agent repo "execution: {host_ttl_seconds: 3600}"

# made_at: when the cached snapshot was made (epoch ms).
made_at() {
	jq -r .made_at_ms "${1:-repo}/.baton/host.json"
}

test_expect_success 'doctor makes the snapshot and shows it' '
	cd repo &&
	test_path_is_missing .baton/host.json &&
	{ "$BATON" doctor --quick >../doctor1.out 2>&1 || true; } &&
	test_grep "^host (the snapshot agents see: .baton/host.json)" ../doctor1.out &&
	test_grep "^  snapshot  *made now (execution.host_ttl_seconds: 3600)" ../doctor1.out &&
	test_grep "^  os: .*($(uname -s) $(uname -r), $(uname -m))" ../doctor1.out &&
	test_grep "^  git: git version [0-9]" ../doctor1.out &&
	test_path_is_file .baton/host.json &&
	test_jq ".arch == \"$(uname -m)\" and (.tools | map(.name) | index(\"git\")) != null" .baton/host.json
'

test_expect_success 'a second look within the TTL reuses it' '
	cd repo &&
	before=$(made_at .) &&
	{ "$BATON" doctor --quick >../doctor2.out 2>&1 || true; } &&
	test_grep "^  snapshot  *reused" ../doctor2.out &&
	test "$(made_at .)" = "$before"
'

test_expect_success 'serve start within the TTL reuses it' '
	cd repo &&
	before=$(made_at .) &&
	"$BATON" serve --workers 1 --exit-when-idle --listen off 2>../serve1.err &&
	test_grep "serve: host snapshot reused (made at $(jq -r .made_at .baton/host.json))" ../serve1.err &&
	test "$(made_at .)" = "$before"
'

test_expect_success 'serve start makes one when there is none' '
	rm repo/.baton/host.json &&
	cd repo &&
	"$BATON" serve --workers 1 --exit-when-idle --listen off 2>../serve2.err &&
	test_grep "serve: host snapshot made" ../serve2.err &&
	test_path_is_file .baton/host.json
'

test_expect_success 'an expired one is made anew (a TTL of one second)' '
	make_repo short &&
	baton_init_with_agent short "execution: {host_ttl_seconds: 1}" &&
	cd short &&
	"$BATON" serve --workers 1 --exit-when-idle --listen off 2>../short1.err &&
	test_grep "serve: host snapshot made" ../short1.err &&
	first=$(made_at .) &&
	sleep 1.2 &&
	"$BATON" serve --workers 1 --exit-when-idle --listen off 2>../short2.err &&
	test_grep "serve: host snapshot made" ../short2.err &&
	test "$(made_at .)" -gt "$first"
'

test_expect_success 'a changed set of agents makes it anew within the TTL' '
	cd repo &&
	before=$(made_at .) &&
	cat >>.baton/config.yaml <<-\EOF &&
	  other: {type: codex}
	EOF
	sed -i "s/^providers:/providers:\n  other: {type: codex}/; \$d" .baton/config.yaml &&
	"$BATON" serve --workers 1 --exit-when-idle --listen off 2>../serve3.err &&
	test_grep "serve: host snapshot made" ../serve3.err &&
	test "$(made_at .)" -gt "$before" &&
	test_jq ".agents | map(.provider) | index(\"other\") != null" .baton/host.json
'

test_expect_success 'the prompt carries the snapshot' '
	cd repo &&
	"$BATON" run "Show me the host" >../run.out 2>&1 &&
	id=$(newest_run) &&
	p=$(ls .baton/runs/$id/calls/*-execute-fake-0.prompt.md) &&
	test_grep "^## The host you run on (baton.s snapshot)" "$p" &&
	test_grep "^git: git version [0-9]" "$p" &&
	test_grep "^os: .*$(uname -m)" "$p" &&
	test_grep "^agent fake (command, .*): (not asked: a command provider)" "$p"
'

# Programs named like the toolchains and the agent CLI, each leaving a
# mark when run: in relative PATH entries, in a folder inside the
# repository, and in a worktree. None of them may run. (git is left out:
# baton runs git itself, through PATH, for everything it does.)
plant() {
	mkdir -p "$1" &&
	for t in cc gcc node python3 go rustc java claude; do
		printf "#!/bin/sh\ntouch \"%s/ran-\$(basename \$0)\"\necho 99.0-evil\n" \
			"$TRASH_DIRECTORY/marks" >"$1/$t" &&
		chmod +x "$1/$t" || return 1
	done
}

test_expect_success 'probing never runs what the agent could have put on PATH' '
	mkdir -p marks &&
	make_repo planted &&
	baton_init_with_agent planted "providers:
  claude: {type: claude-code}
roles: {default: claude}" &&
	cd planted &&
	plant bin && plant evil && plant .baton/worktrees/x/bin &&
	PATH="bin:.:$PWD/evil:$PWD/.baton/worktrees/x/bin:$PATH" \
		"$BATON" serve --workers 1 --exit-when-idle --listen off 2>../planted.err &&
	test_grep "serve: host snapshot made" ../planted.err &&
	ls ../marks >../marks.list &&
	test_line_count = 0 ../marks.list &&
	! grep "99.0-evil" .baton/host.json &&
	test_jq "all(.tools[]; .path | startswith(\"$PWD\") | not)" .baton/host.json &&
	test_jq ".agents[0].version == \"(not found on PATH)\"" .baton/host.json
'

test_expect_success 'the agent CLI version comes from a trusted PATH entry' '
	mkdir -p clis &&
	printf "#!/bin/sh\necho \"9.9.9 (Claude Code)\"\n" >clis/claude &&
	chmod +x clis/claude &&
	make_repo withcli &&
	baton_init_with_agent withcli "providers:
  claude: {type: claude-code}
roles: {default: claude}" &&
	cd withcli &&
	{ PATH="$TRASH_DIRECTORY/clis:$PATH" "$BATON" doctor --quick >../doctor4.out 2>&1 || true; } &&
	test_grep "^  agent claude (claude-code, .claude.): 9.9.9 (Claude Code)" ../doctor4.out
'

test_expect_success 'a probe that hangs is cut off: the snapshot is bounded in time' '
	mkdir -p slow &&
	printf "#!/bin/sh\nsleep 60\n" >slow/node &&
	chmod +x slow/node &&
	cd repo &&
	rm -f .baton/host.json &&
	start=$(date +%s) &&
	{ PATH="$TRASH_DIRECTORY/slow:$PATH" "$BATON" doctor --quick >../doctor5.out 2>&1 || true; } &&
	test $(( $(date +%s) - start )) -lt 15 &&
	test_grep "^  node: (found; no version in time) ($TRASH_DIRECTORY/slow/node)" ../doctor5.out &&
	! pgrep -f "$TRASH_DIRECTORY/slow/node"
'

test_done
