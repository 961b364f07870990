#!/bin/bash
test_description='the dashboard chat panel in headless Chromium: a conversation with the scripted planner, a hostile answer stays text, the plan streams in with its mode buttons, Direct queues the tasks'

_shots=${BATON_SCREENSHOT_DIR:-}
case $_shots in '' | /*) ;; *) _shots=$PWD/$_shots ;; esac

. "$(dirname "$0")/../lib/test-lib.sh"

SHOTS=${_shots:-$BATON_SRC_ROOT/build/screenshots}
CHROMIUM=${BATON_TEST_CHROMIUM:-/usr/bin/chromium}
PLAYWRIGHT=${BATON_TEST_PLAYWRIGHT:-$BATON_SRC_ROOT/.agents/node_modules/playwright-core}

why_no_browser=
[ -x "$CHROMIUM" ] || why_no_browser="no Chromium at $CHROMIUM"
command -v node >/dev/null 2>&1 || why_no_browser="node is not installed"
[ -f "$PLAYWRIGHT/index.mjs" ] || why_no_browser="playwright-core is not installed in $PLAYWRIGHT"
if [ -n "$why_no_browser" ]; then
	if [ "${BATON_TEST_REQUIRE_BROWSER:-0}" = 1 ]; then
		echo "$why_no_browser" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	echo "skipped: $why_no_browser"
	echo "0 passed, 0 failed"
	exit 0
fi

P=$FAKE_STATE/chat
mkdir -p "$P"
cat >"$TRASH_DIRECTORY/planner.sh" <<-\EOF
#!/bin/sh
P=$FAKE_STATE/chat
cat >/dev/null
case $(cat "$P/mode") in
hostile) printf '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> Which colours?\n' ;;
plan) printf 'Two steps.\n\n```json\n{"tasks": [{"key": "a", "title": "Add the parser"}, {"key": "b", "title": "Use it", "depends_on": ["a"]}]}\n```\n---PLAN_READY---\n' ;;
esac
EOF
chmod +x "$TRASH_DIRECTORY/planner.sh"

test_expect_success 'setup: serve with the scripted planner' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  planner: {type: command, command: [\"$TRASH_DIRECTORY/planner.sh\"]}
roles: {default: fake, planner: planner}
runtime: {judge: false}" &&
	cd repo &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1
'

test_expect_success 'the chat panel in Chromium' '
	cd repo &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	env BATON_DASH_URL="$HTTP_URL/" BATON_DASH_TOKEN="$(cat .baton/token)" \
		BATON_PLAYWRIGHT="$PLAYWRIGHT" BATON_CHROMIUM="$CHROMIUM" \
		BATON_DASH_OUT="$TRASH_DIRECTORY" BATON_DASH_SHOTS="$SHOTS" \
		BATON_CHAT_MODE="$P/mode" \
		node "$TEST_DIRECTORY/browser/chat.mjs" >browser.out 2>&1 ||
		{ cat browser.out; false; } &&
	cat browser.out &&
	! grep -q "^not ok" browser.out &&
	"$BATON" task list --json >tasks.json &&
	test_jq "length == 2 and ([.[].origin] | unique) == [\"chat-direct\"]" tasks.json
'

test_done
