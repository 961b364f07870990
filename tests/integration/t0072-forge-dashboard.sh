#!/bin/bash
test_description='the dashboard shows the forge (headless Chromium): issue and PR links and the PR check state on task cards, and the reaction rounds on the PR run timeline'

_shots=${BATON_SCREENSHOT_DIR:-}
case $_shots in '' | /*) ;; *) _shots=$PWD/$_shots ;; esac

. "$(dirname "$0")/../lib/test-lib.sh"

SHOTS=${_shots:-$BATON_SRC_ROOT/build/screenshots}
CHROMIUM=${BATON_TEST_CHROMIUM:-/usr/bin/chromium}
PLAYWRIGHT=${BATON_TEST_PLAYWRIGHT:-$BATON_SRC_ROOT/.agents/node_modules/playwright-core}
DASH=$TEST_DIRECTORY/browser/dashboard.mjs

# As t0025: skipped without Chromium, node or playwright-core, a failure
# under BATON_TEST_REQUIRE_BROWSER=1.
skip_all() {
	_tl_done=1
	cd / && rm -rf "$TRASH_DIRECTORY"
	if [ "${BATON_TEST_REQUIRE_BROWSER:-0}" = 1 ]; then
		echo "test-lib: $1 (BATON_TEST_REQUIRE_BROWSER=1)" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	echo "skipped: $1"
	echo "0 passed, 0 failed"
	exit 0
}
[ -x "$CHROMIUM" ] || skip_all "no Chromium at $CHROMIUM (tools/deps.sh installs it)"
command -v node >/dev/null 2>&1 || skip_all "node is not installed (tools/deps.sh)"
[ -f "$PLAYWRIGHT/index.mjs" ] || skip_all "playwright-core is not installed in $PLAYWRIGHT (run tools/agents.sh)"
export BATON_PLAYWRIGHT=$PLAYWRIGHT BATON_CHROMIUM=$CHROMIUM BATON_DASH_OUT=$TRASH_DIRECTORY

XSS_TITLE='Issue with a hostile URL'

# The links are written into the store by hand: the sync that makes them
# is another part of issue 19 (t0060 does the same).
link() {
	db_query "INSERT INTO forge_links (task_id, repo, issue_number,
		issue_url, pr_number, pr_url, pr_state, checks, review,
		reaction_rounds, created_at, updated_at)
		VALUES ($1, 'acme/app', $2, '$3', $4, $5, $6, $7, $8, $9, 0, 0)"
}

test_expect_success 'setup: a task run to done that has a PR with failing checks, its fix round, a plain task' '
	make_repo a &&
	baton_init_with_agent a "runtime: {judge: false}" &&
	cd a &&
	"$BATON" task add "Fix the login page" >/dev/null &&
	"$BATON" task add "Fix round: CI failed on PR #34" >/dev/null &&
	"$BATON" task add "Plain task" >/dev/null &&
	"$BATON" task add "$XSS_TITLE" >/dev/null &&
	"$BATON" task cancel t2 >/dev/null &&
	"$BATON" task cancel t3 >/dev/null &&
	"$BATON" task cancel t4 >/dev/null &&
	"$BATON" serve --workers 1 --exit-when-idle >../serve1.out 2>&1 &&
	test "$("$BATON" task show t1 --json | jq -r .status)" = done &&
	link 1 12 https://github.com/acme/app/issues/12 34 \
		"'\''https://github.com/acme/app/pull/34'\''" "'\''open'\''" \
		"'\''failure'\''" "'\''changes_requested'\''" 1 &&
	link 4 13 "javascript:window.__pwned=1" 0 NULL NULL NULL NULL 0 &&
	db_query "UPDATE tasks SET origin = '\''rework'\'', parent_id = 1 WHERE id = 2" &&
	"$BATON" task show t1 --json >../t1.json &&
	test_jq ".forge.pr == 34 and .forge.checks == \"failure\" and (.run | type) == \"string\"" ../t1.json &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1
'

test_expect_success 'the cards show issue #12 and PR #34 with its failing checks, and the run timeline its round' '
	cd a &&
	env BATON_DASH_URL="$(cat .baton/http.url)" BATON_DASH_TOKEN="$(cat .baton/token)" \
		BATON_DASH_TITLE="Fix the login page" BATON_DASH_XSS="$XSS_TITLE" \
		BATON_DASH_RUN="$(jq -r .run ../t1.json)" BATON_DASH_SHOTS="$SHOTS" \
		node "$DASH" forge
'

test_done
