#!/bin/bash
test_description='baton doctor: nothing installed; claude installed but failing; all fine'
. "$(dirname "$0")/../lib/test-lib.sh"

# A PATH with git and a shell but no agent CLI.
mkdir -p bare/bin &&
	for t in git sh env cat rm; do ln -s "$(command -v $t)" bare/bin/$t; done
BARE=$TRASH_DIRECTORY/bare/bin

test_expect_success 'nothing installed: says so, lists how to install, exits 1' '
	mkdir outside && cd outside &&
	test_expect_code 1 env PATH="$BARE" "$BATON" doctor >../none.out 2>&1 &&
	test_grep "not in a git repository" ../none.out &&
	test_grep "claude-code  *claude  *not installed (npm install -g @anthropic-ai/claude-code)" ../none.out &&
	test_grep "codex  *codex  *not installed" ../none.out &&
	test_grep "no agent CLI is installed" ../none.out
'

test_expect_success 'claude installed but failing: --version fails, and the configured provider fails its call' '
	mkdir -p broken/bin &&
	cat >broken/bin/claude <<-\EOF &&
	#!/bin/sh
	echo "Error: claude is broken here" >&2
	exit 1
	EOF
	chmod +x broken/bin/claude &&
	make_repo repo &&
	(cd repo && PATH="$TRASH_DIRECTORY/broken/bin:$BARE" "$BATON" init >/dev/null) &&
	test_grep "claude: {type: claude-code}" repo/.baton/config.yaml &&
	cd repo &&
	test_expect_code 1 env PATH="$TRASH_DIRECTORY/broken/bin:$BARE" "$BATON" doctor >../broken.out 2>&1 &&
	test_grep "claude-code  *claude  *FAILING Error: claude is broken here" ../broken.out &&
	test_grep "^  claude  *claude-code  *default  *FAILING" ../broken.out &&
	test_grep "problem" ../broken.out
'

test_expect_success 'the backlog counts what serve would start at once: tasks of overlapping areas one at a time' '
	make_repo areas &&
	baton_init_with_agent areas "runtime: {workers: 4}" &&
	cd areas &&
	"$BATON" task add "first in src" --area src >/dev/null &&
	"$BATON" task add "second in src" --area src >/dev/null &&
	"$BATON" task add "under src" --area src/x >/dev/null &&
	"$BATON" task add "docs" --area docs >/dev/null &&
	"$BATON" task add "anywhere" >/dev/null &&
	"$BATON" doctor --quick >../areas.out 2>&1 || : &&
	test_grep "5 ready now: serve (4 workers) starts 3 at once (2 wait for an overlapping area)" ../areas.out
'

if [ -x "$AGENTS_BIN/claude" ] || [ "${BATON_TEST_REQUIRE_AGENTS:-0}" = 1 ]; then
	export MOCK_KEY=sk-mock-doctor-0123456789
	feature_script script.json "x"
	mock_start mock script.json --require-key "$MOCK_KEY"

	test_expect_success 'all fine: the real claude answers through the mock, exit 0' '
		make_repo good &&
		baton_init_with_agent good "providers:
  claude: {type: claude-code, command: [\"$AGENTS_BIN/claude\"], model: claude-sonnet-4-5, base_url: \"$(mock_url mock)\", api_key_env: MOCK_KEY, max_retries: 0}
roles: {default: claude}" &&
		cd good &&
		test_expect_code 0 env PATH="$AGENTS_BIN:$PATH" "$BATON" doctor >../good.out 2>&1 &&
		test_grep "claude-code  *claude  *ok  *2\.1\." ../good.out &&
		test_grep "^  claude  *claude-code  *default  *ok  *answered \"OK\"" ../good.out &&
		test_grep "all good" ../good.out
	'

	test_expect_success 'a wrong key: the provider fails as auth, with what to set' '
		cd good &&
		test_expect_code 1 env MOCK_KEY=sk-wrong-0000000000 "$BATON" doctor >../auth.out 2>&1 &&
		test_grep "FAILING auth: .*Fix: set ANTHROPIC_API_KEY" ../auth.out
	'
else
	say "# skipped the real claude checks: not installed (tools/agents.sh)"
fi

test_done
