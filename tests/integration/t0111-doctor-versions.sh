#!/bin/bash
test_description='baton doctor: a CLI newer than the newest version the tests ran against gets a warning naming it; an older or equal one does not'
. "$(dirname "$0")/../lib/test-lib.sh"

# A PATH with git and a shell but no agent CLI.
mkdir -p bare/bin &&
	for t in git sh env cat rm; do ln -s "$(command -v $t)" bare/bin/$t; done
BARE=$TRASH_DIRECTORY/bare/bin

# fake_cli DIR PROGRAM ANSWER: a program whose --version prints ANSWER.
fake_cli() {
	mkdir -p "$1" &&
	printf '#!/bin/sh\necho "%s"\n' "$3" >"$1/$2" &&
	chmod +x "$1/$2"
}

# The versions baton was tested with, as tools/agents.sh pins them.
pin() {
	sed -n "s|^[[:space:]]*$1@\([0-9][0-9.]*\)\$|\1|p" "$BATON_SRC_ROOT/tools/agents.sh"
}

# package (as pinned) and program, for each agent CLI the tests drive
cat >clis <<EOF
@anthropic-ai/claude-code claude
@openai/codex codex
@google/gemini-cli gemini
@qwen-code/qwen-code qwen
opencode-ai opencode
@github/copilot copilot
@mariozechner/pi-coding-agent pi
@kilocode/cli kilo
cline cline
@continuedev/cli cn
EOF

test_expect_success 'every pin of tools/agents.sh is the version baton knows it was tested with' '
	while read -r pkg prog; do
		v=$(pin "$pkg") &&
		test -n "$v" &&
		fake_cli at-pin "$prog" "$prog $v" &&
		fake_cli above-pin "$prog" "$prog ${v%.*}.$((${v##*.} + 1))" ||
		return 1
	done <clis &&
	mkdir outside && cd outside &&
	env PATH="$TRASH_DIRECTORY/at-pin:$BARE" "$BATON" doctor >../at-pin.out 2>&1 &&
	! grep WARNING ../at-pin.out &&
	env PATH="$TRASH_DIRECTORY/above-pin:$BARE" "$BATON" doctor >../above-pin.out 2>&1 &&
	while read -r pkg prog; do
		v=$(pin "$pkg") &&
		test_grep "WARNING $prog ${v%.*}.$((${v##*.} + 1)) is newer than $v,.* pin it: npm install -g $pkg@$v" ../above-pin.out ||
		return 1
	done <../clis &&
	test "$(grep -c WARNING ../above-pin.out)" = 10
'

test_expect_success 'newer: a warning names the CLI, both versions and the pin' '
	fake_cli newer copilot "GitHub Copilot CLI 1.0.103." &&
	fake_cli newer claude "2.2.0 (Claude Code)" &&
	fake_cli newer codex "codex-cli 0.1000.0" &&
	mkdir -p outside && cd outside &&
	env PATH="$TRASH_DIRECTORY/newer:$BARE" "$BATON" doctor >../newer.out 2>&1 &&
	test_grep "^  copilot  *copilot  *ok  *GitHub Copilot CLI 1.0.103." ../newer.out &&
	test_grep "WARNING copilot 1.0.103 is newer than 1.0.102, the newest version baton was tested with; if it misbehaves, pin it: npm install -g @github/copilot@1.0.102" ../newer.out &&
	test_grep "WARNING claude 2.2.0 is newer than 2.1.197" ../newer.out &&
	test_grep "WARNING codex 0.1000.0 is newer than 0.169.0" ../newer.out &&
	grep -c WARNING ../newer.out >../newer.count &&
	test "$(cat ../newer.count)" = 3
'

test_expect_success 'older or equal: no warning' '
	fake_cli same copilot "GitHub Copilot CLI 1.0.102." &&
	fake_cli same claude "2.1.197 (Claude Code)" &&
	fake_cli same codex "codex-cli 0.99.9" &&
	fake_cli same pi "0.9.1" &&
	fake_cli same kilo "7.7" &&
	mkdir -p outside && cd outside &&
	env PATH="$TRASH_DIRECTORY/same:$BARE" "$BATON" doctor >../same.out 2>&1 &&
	test_grep "^  copilot  *copilot  *ok  *GitHub Copilot CLI 1.0.102." ../same.out &&
	test_grep "^  pi  *pi  *ok  *0.9.1" ../same.out &&
	test_grep "^  kilo  *kilo  *ok  *7.7 " ../same.out &&
	! grep WARNING ../same.out
'

test_expect_success 'a CLI the tests do not drive, or an answer without a version: no warning' '
	fake_cli other amp "99.0.0" &&
	fake_cli other gemini "nightly build" &&
	mkdir -p outside && cd outside &&
	env PATH="$TRASH_DIRECTORY/other:$BARE" "$BATON" doctor >../other.out 2>&1 &&
	test_grep "^  amp  *amp  *ok  *99.0.0" ../other.out &&
	test_grep "^  gemini  *gemini  *ok  *nightly build" ../other.out &&
	! grep WARNING ../other.out
'

test_done
