#!/bin/bash
test_description='the web dashboard in headless Chromium: sign-in, a live board, a run page with its diff, a gate approved from the page, hostile text shown as text, screenshots'

# Where the screenshots go: BATON_SCREENSHOT_DIR (read before test-lib
# clears BATON_* variables), else build/screenshots/ in the source tree.
_shots=${BATON_SCREENSHOT_DIR:-}
case $_shots in '' | /*) ;; *) _shots=$PWD/$_shots ;; esac

. "$(dirname "$0")/../lib/test-lib.sh"

SHOTS=${_shots:-$BATON_SRC_ROOT/build/screenshots}
CHROMIUM=${BATON_TEST_CHROMIUM:-/usr/bin/chromium}
PLAYWRIGHT=${BATON_TEST_PLAYWRIGHT:-$BATON_SRC_ROOT/.agents/node_modules/playwright-core}
DASH=$TEST_DIRECTORY/browser/dashboard.mjs

# The browser tests need Chromium (tools/deps.sh), node and playwright-core
# (tools/agents.sh). Without them the script is skipped, or fails under
# BATON_TEST_REQUIRE_BROWSER=1.
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

export BATON_PLAYWRIGHT=$PLAYWRIGHT BATON_CHROMIUM=$CHROMIUM
export BATON_DASH_GO=$FAKE_STATE BATON_DASH_OUT=$TRASH_DIRECTORY
export BATON_DASH_SHOTS=$SHOTS

XSS='<img src=x onerror=window.__pwned=1>'
FORM_TITLE='WAIT-slow Add a greeting from the dashboard'
GATED_TITLE='A gated change'

# The agent: waits for $FAKE_STATE/go-hold (go-slow, go-page,
# go-drift) when its prompt says WAIT-hold (WAIT-slow, WAIT-page,
# WAIT-drift), saying so every half
# second; writes a line the diff shows, and prints
# output with markup in it.
write_agent() {
	cat >"$TRASH_DIRECTORY/agent" <<-\EOF
	#!/bin/sh
	T=$FAKE_STATE
	for w in hold slow page drift; do
		if grep -q "WAIT-$w" "$BATON_PROMPT_FILE"; then
			i=0
			while [ ! -e "$T/go-$w" ]; do
				sleep 0.1
				i=$((i + 1))
				[ $((i % 5)) = 0 ] && echo "still waiting for go-$w ($i)"
			done
		fi
	done
	echo "dashboard line from $BATON_RUN_ID" >>"$BATON_WORKTREE/work.txt"
	echo "<b>bold</b> <img src=x onerror=window.__pwned=2>" >>"$BATON_WORKTREE/work.txt"
	echo "agent says <b>bold</b> <img src=x onerror=window.__pwned=2>"
	echo "DONE"
	EOF
	chmod +x "$TRASH_DIRECTORY/agent"
}

# setup_repo DIR [EXTRA_YAML]: a repository with a one-stage pipeline
# driven by the agent above.
setup_repo() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: instant}
pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {judge: false, sweep_seconds: 1}
${2:-}"
}

# serve_http DIR NAME: `baton serve --workers 1` in DIR with HTTP on a free
# port; waits for .baton/http.url.
serve_http() {
	(cd "$1" && BATON_LISTEN=127.0.0.1:0 bg_start "$TRASH_DIRECTORY/$2" "$BATON" serve --workers 1) &&
	wait_for "test -s '$1/.baton/http.url'" 30 &&
	wait_for "grep -q 'dashboard at http' '$TRASH_DIRECTORY/$2.out'" 10
}

task_status() {
	"$BATON" task show "$1" --json | jq -r .status
}

# dash SCENARIO DIR [VAR=VALUE...]: runs a browser scenario against DIR's serve.
dash() {
	local scenario=$1 dir=$2
	shift 2
	env BATON_DASH_URL="$(cat "$dir/.baton/http.url")" \
		BATON_DASH_TOKEN="$(cat "$dir/.baton/token")" "$@" \
		node "$DASH" "$scenario"
}

test_expect_success 'setup: a repository with a busy worker, served over HTTP' '
	write_agent &&
	setup_repo board &&
	cd board &&
	"$BATON" task add "WAIT-hold keeps the worker busy" >/dev/null &&
	"$BATON" task add "$XSS" >/dev/null &&
	cd .. &&
	serve_http board serve-board &&
	grep "dashboard at http://127.0.0.1:" serve-board.out &&
	cd board &&
	wait_for "test \"\$(task_status 1)\" = running" 30
'

test_expect_success 'the page and its files need no token; the API does' '
	url=$(cat board/.baton/http.url) &&
	tok=$(cat board/.baton/token) &&
	curl -sf "$url" >index.html &&
	test_grep "<script src=\"/app.js\"" index.html &&
	curl -sf "${url}app.js" >app.js &&
	test_cmp "$BATON_SRC_ROOT/src/server/ui/app.js" app.js &&
	curl -sf "${url}app.css" >app.css &&
	test_cmp "$BATON_SRC_ROOT/src/server/ui/app.css" app.css &&
	code=$(curl -s -o /dev/null -w "%{http_code}" "${url}api/v1/health") &&
	test "$code" = 401 &&
	curl -sf -H "Authorization: Bearer $tok" "${url}api/v1/health" >health.json &&
	test_jq ".status == \"ok\"" health.json
'

test_expect_success 'the page script never turns data into markup' '
	test_grep ! -E "innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function" \
		"$BATON_SRC_ROOT/src/server/ui/app.js"
'

test_expect_success 'sign-in: the form, a refused token, the token from the URL' '
	dash login board
'

test_expect_success 'a task added from the form moves queued, running, done live' '
	dash live board BATON_DASH_TITLE="$FORM_TITLE" BATON_DASH_REPO="$TRASH_DIRECTORY/board" &&
	cd board &&
	"$BATON" task list --json >../tasks.json &&
	test_jq "any(.[]; .title == \"$FORM_TITLE\" and .status == \"done\" and .priority == 3)" ../tasks.json
'

test_expect_success 'the run page of the finished task shows its diff' '
	dash diff board BATON_DASH_TITLE="$FORM_TITLE"
'

test_expect_success 'a hostile title and hostile agent output are shown as text' '
	cd board &&
	wait_for "test \"\$(task_status 2)\" = done" 30 &&
	cd .. &&
	dash xss board BATON_DASH_XSS="$XSS"
'

test_expect_success 'a refused action shows the API error message' '
	cd board &&
	run=$("$BATON" task show 1 --json | jq -r .run) &&
	cd .. &&
	dash errors board BATON_DASH_RUN="$run"
'

test_expect_success 'screenshots of the board and of a run page' '
	cd board &&
	id=$("$BATON" task list --json | jq -r ".[] | select(.title == \"$FORM_TITLE\") | .id") &&
	run=$("$BATON" task show "$id" --json | jq -r .run) &&
	cd .. &&
	rm -f "$SHOTS/board.png" "$SHOTS/run.png" &&
	dash screens board BATON_DASH_RUN="$run" &&
	for f in board run; do
		test "$(head -c 8 "$SHOTS/$f.png" | od -An -tx1 | tr -d " \n")" = 89504e470d0a1a0a ||
			{ echo "$SHOTS/$f.png is not a PNG"; exit 1; }
	done &&
	echo "screenshots in $SHOTS"
'

test_expect_success 'a gated run: the page shows waiting_for_approval, approve finishes it' '
	setup_repo gated "policies: {require_approval_at_stages: [execute]}" &&
	cd gated &&
	"$BATON" task add "$GATED_TITLE" >/dev/null &&
	cd .. &&
	serve_http gated serve-gated &&
	cd gated &&
	wait_for "test \"\$(task_status 1)\" = blocked" 30 &&
	cd .. &&
	dash approve gated BATON_DASH_TITLE="$GATED_TITLE" &&
	cd gated &&
	"$BATON" task show 1 --json >../gated.json &&
	test_jq ".status == \"done\"" ../gated.json &&
	run=$(jq -r .run ../gated.json) &&
	test "$(run_status "$run")" = merge_ready
'

test_expect_success 'paging: 250 queued tasks, 100 at a time' '
	setup_repo many &&
	cd many &&
	"$BATON" task add "WAIT-page holds the worker" >/dev/null &&
	for i in $(seq 1 250); do
		"$BATON" task add "queued task $i" --after 1 >/dev/null || exit 1
	done &&
	cd .. &&
	serve_http many serve-many &&
	cd many &&
	wait_for "test \"\$(task_status 1)\" = running" 30 &&
	cd .. &&
	dash paging many BATON_DASH_QUEUED=250
'

test_expect_success 'a running run: steer, pause, resume, abort from its page' '
	cd many &&
	run=$("$BATON" task show 1 --json | jq -r .run) &&
	cd .. &&
	dash controls many BATON_DASH_RUN="$run" &&
	cd many &&
	test "$(run_status "$run")" = aborted &&
	"$BATON" events "$run" --json >../ctl.ev &&
	test_grep "keep the <b>public</b> API unchanged" ../ctl.ev
'

test_expect_success 'a resume refused for config drift: the page lists the changes and resumes with the original config' '
	make_repo drift &&
	baton_init_with_agent drift "providers:
  instant: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: instant}
pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
      - {name: check, kind: validate}
workflow: {pipeline: quick}
validate: {commands: []}
runtime: {judge: false, sweep_seconds: 1}" &&
	cd drift &&
	"$BATON" task add "WAIT-drift paused, then the config changes" >/dev/null &&
	cd .. &&
	serve_http drift serve-drift &&
	cd drift &&
	wait_for "test \"\$(\"\$BATON\" task show 1 --json | jq -r .run)\" != null" 30 &&
	run=$("$BATON" task show 1 --json | jq -r .run) &&
	wait_for_status "$run" executing &&
	"$BATON" pause "$run" >/dev/null &&
	: >"$FAKE_STATE/go-drift" &&
	wait_for_status "$run" paused &&
	wait_for "test \"\$(task_status 1)\" = blocked" 30 &&
	hash=$("$BATON" show "$run" --json | jq -r .config_hash) &&
	sed -i "s/^workflow: .*/workflow: {pipeline: quick, max_review_loops: 4}/" .baton/config.yaml &&
	kill -TERM "$(cat ../serve-drift.pid)" &&
	bg_wait ../serve-drift >/dev/null &&
	cd .. &&
	serve_http drift serve-drift2 &&
	dash drift drift BATON_DASH_RUN="$run" \
		BATON_DASH_CHANGE="workflow.max_review_loops: 2 -> 4" &&
	cd drift &&
	wait_for "test \"\$(task_status 1)\" = done" 60 &&
	"$BATON" show "$run" --json >../drift.json &&
	test_jq ".status == \"merge_ready\" and .config_hash == \"$hash\"" ../drift.json &&
	test_jq "[.events[] | select(.type == \"config_drift\") | .data.choice] == [\"snapshot\"]" ../drift.json
'

test_expect_success 'a research run'"'"'s claims and an assist run'"'"'s state and question on their pages' '
	make_repo facts &&
	baton_init_with_agent facts "runtime: {judge: false, sweep_seconds: 1}" &&
	cd facts &&
	FAKE_CLAIMS=3 "$BATON" run --pipeline research "Is WAL faster" >../research.out 2>&1 &&
	research=$(newest_run) &&
	test "$(run_status "$research")" = completed &&
	bg_start ../assist "$BATON" run --pipeline assist "Keep notes for the team" &&
	wait_for "test \"\$(newest_run)\" != \"$research\"" 30 &&
	assist=$(newest_run) &&
	wait_for_status "$assist" waiting_for_approval &&
	cd .. &&
	serve_http facts serve-facts &&
	dash facts facts BATON_DASH_RESEARCH="$research" BATON_DASH_ASSIST="$assist" &&
	cd facts &&
	"$BATON" approvals approve "$assist" >/dev/null &&
	test "$(bg_wait ../assist)" = 0 &&
	kill -TERM "$(cat ../serve-facts.pid)" &&
	bg_wait ../serve-facts >/dev/null
'

test_expect_success 'serve stops cleanly' '
	: >"$FAKE_STATE/go-page" &&
	for s in serve-board serve-gated serve-many serve-drift2; do
		kill -TERM "$(cat $s.pid)" &&
		rc=$(bg_wait $s 30) &&
		test "$rc" = 0 || exit 1
	done
'

test_done
