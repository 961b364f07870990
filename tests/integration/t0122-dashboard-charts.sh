#!/bin/bash
test_description='the dashboard charts: GET /api/v1/stats against a real serve (queue depth, throughput, usage per day), and in headless Chromium a run carried through a quota wait, a fix round and a gate drawn as a stages chart with its usage, a parallel group side by side, the charts page; hostile titles and stage data stay text; screenshots'

# Where the screenshots go: BATON_SCREENSHOT_DIR (read before test-lib
# clears BATON_* variables), else build/screenshots/ in the source tree,
# which .ci/run keeps.
_shots=${BATON_SCREENSHOT_DIR:-}
case $_shots in '' | /*) ;; *) _shots=$PWD/$_shots ;; esac

. "$(dirname "$0")/../lib/test-lib.sh"

SHOTS=${_shots:-$BATON_SRC_ROOT/build/screenshots}
CHROMIUM=${BATON_TEST_CHROMIUM:-/usr/bin/chromium}
PLAYWRIGHT=${BATON_TEST_PLAYWRIGHT:-$BATON_SRC_ROOT/.agents/node_modules/playwright-core}
CHARTS=$TEST_DIRECTORY/browser/charts.mjs

# Without Chromium, node or playwright-core the browser checks are skipped
# (failed under BATON_TEST_REQUIRE_BROWSER=1); the API checks always run.
browser=1
why_no_browser=
[ -x "$CHROMIUM" ] || why_no_browser="no Chromium at $CHROMIUM"
command -v node >/dev/null 2>&1 || why_no_browser="node is not installed"
[ -f "$PLAYWRIGHT/index.mjs" ] || why_no_browser="playwright-core is not installed in $PLAYWRIGHT"
[ -z "$why_no_browser" ] || browser=0
export BATON_PLAYWRIGHT=$PLAYWRIGHT BATON_CHROMIUM=$CHROMIUM
export BATON_DASH_OUT=$TRASH_DIRECTORY BATON_DASH_SHOTS=$SHOTS

XSS='<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2> Add a greeting'
bug='greet prints an empty greeting for an empty name'
HOSTILE_STAGE='<img src=x onerror=window.__pwned=4>'
HOSTILE_STATUS='<svg onload=window.__pwned=6>'

# The planner and the architect are baton's own agent on the mock model
# server, which refuses the first request with a 429 (a quota wait of
# about a second) and reports usage; the other stages are the fake agent:
# the first review asks for changes (a fix round), and a gate holds the
# run before verify.
export MOCK_KEY=sk-mock-charts-0123456789
cat >script.json <<-\EOF
{"rules": [
  {"match": "You are the planner", "text": "# Plan\n\n1. Add a greeting.\n", "usage": {"in": 1200, "out": 300}},
  {"match": "You are the architect", "text": "# Design\n\nOne edit.\n", "usage": {"in": 800, "out": 100}}
]}
EOF
mock_start mock script.json --require-key "$MOCK_KEY" --fail 1:429:1

# (serve inherits these, and its agents from it)
export FAKE_REVIEW=CHANGES_REQUESTED,APPROVED
export FAKE_SLEEP_KIND=code-review FAKE_SLEEP=1 FAKE_SLEEP_CODE_REVIEW_3=2

# charts SCENARIO [VAR=VALUE...]: a browser scenario against ./'s serve.
charts() {
	local scenario=$1
	shift
	env BATON_DASH_URL="$HTTP_URL/" BATON_DASH_TOKEN="$HTTP_TOKEN" "$@" \
		node "$CHARTS" "$scenario"
}

need_browser() {
	if [ "$browser" = 1 ]; then
		return 0
	fi
	if [ "${BATON_TEST_REQUIRE_BROWSER:-0}" = 1 ]; then
		echo "$why_no_browser (BATON_TEST_REQUIRE_BROWSER=1)" >&2
		return 1
	fi
	echo "skipped in the browser: $why_no_browser"
	return 0
}

task_status() {
	"$BATON" task show "$1" --json | jq -r .status
}

stats() {
	api_expect 200 GET "/api/v1/stats$1"
}

# serving DIR: cd DIR and set HTTP_URL and HTTP_TOKEN to its serve's (a
# test body is a subshell: serve_http's variables end with it).
serving() {
	cd "$1" &&
		HTTP_URL=$(sed 's|/$||' .baton/http.url) &&
		HTTP_TOKEN=$(cat .baton/token)
}

test_expect_success 'setup: a feature run and a parallel group, through serve' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  own: {type: openai, model: mock-model, base_url: \"$(mock_url mock)/v1\", api_key_env: MOCK_KEY, max_retries: 0, pricing: {input: 3, output: 15}}
roles: {default: fake, planner: own, architect: own}
execution: {backoff_seconds: 1}
policies: {require_approval_at_stages: [verifying]}
runtime: {judge: false, sweep_seconds: 1}
pipelines:
  triple:
    type: bugfix
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}" &&
	cd repo &&
	"$BATON" task add "$XSS" >/dev/null &&
	"$BATON" task add --pipeline triple "$bug" >/dev/null &&
	serve_http serve --workers 1 &&
	wait_for "test \"\$(\"\$BATON\" task show 1 --json | jq -r .run)\" != null" 30 &&
	run=$("$BATON" task show 1 --json | jq -r .run) &&
	echo "$run" >../feature.id &&
	wait_for_status "$run" waiting_for_approval &&
	sleep 1 &&
	"$BATON" approvals approve "$run" >/dev/null &&
	wait_for "test \"\$(task_status 1)\" = done" 60 &&
	wait_for "test \"\$(task_status 2)\" = done" 90 &&
	"$BATON" task show 2 --json | jq -r .run >../group.id &&
	test "$(run_status "$(cat ../group.id)")" = merge_ready
'

test_expect_success 'the feature run waited for quota, took a fix round and waited at the gate' '
	serving repo &&
	"$BATON" events "$(cat ../feature.id)" --json | jq -s . >../feature.ev &&
	test_jq "[.[] | select(.type == \"quota_wait\")] | length == 1" ../feature.ev &&
	test_jq "[.[] | select(.type == \"transition\" and .to == \"fixing\")] | length == 1" ../feature.ev &&
	test_jq "[.[] | select(.type == \"transition\" and .to == \"waiting_for_approval\")] | length == 1" ../feature.ev &&
	test_jq "[.[] | select(.type == \"agent_exited\" and .data.tokens_in > 0)] | length >= 2" ../feature.ev
'

test_expect_success 'GET /api/v1/stats needs the token' '
	serving repo &&
	code=$(curl -s -o /dev/null -w "%{http_code}" "$HTTP_URL/api/v1/stats") &&
	test "$code" = 401 &&
	api_expect 200 GET /api/v1 >../index.json &&
	test_jq "any(.routes[]; .path == \"/api/v1/stats\" and .method == \"GET\")" ../index.json
'

test_expect_success 'stats: the window, its buckets and the days' '
	serving repo &&
	stats "?hours=1&days=3" >../s1.json &&
	test_jq ".hours == 1 and .step_seconds == 60 and (.queue | length) == 60" ../s1.json &&
	test_jq "[.queue[].t] | . == sort and (.[1] - .[0]) == 60000" ../s1.json &&
	test_jq ".queue[-1].t <= .now and .now < .queue[-1].t + 60000 and .from == .queue[0].t" ../s1.json &&
	test_jq "(.days | length) == 3 and all(.days[]; .day | test(\"^[0-9]{4}-[0-9]{2}-[0-9]{2}$\"))" ../s1.json &&
	test_jq "(.days[1].t - .days[0].t) == 86400000" ../s1.json &&
	stats "" >../s6.json &&
	test_jq ".hours == 6 and .step_seconds == 60 and (.queue | length) == 360 and (.days | length) == 14" ../s6.json &&
	stats "?hours=48" >../s48.json &&
	test_jq ".step_seconds == 480 and (.queue | length) == 360" ../s48.json
'

test_expect_success 'stats: bad windows are refused, naming the parameter' '
	serving repo &&
	api_expect 400 GET "/api/v1/stats?hours=0" >../bad.json &&
	test_jq ".error.code == \"bad_request\" and (.error.message | test(\"^hours must be a number from 1 to 48\"))" ../bad.json &&
	api_expect 400 GET "/api/v1/stats?hours=49" >/dev/null &&
	api_expect 400 GET "/api/v1/stats?days=abc" >../bad.json &&
	test_jq ".error.message | test(\"^days must be a number from 1 to 90\")" ../bad.json
'

test_expect_success 'stats: throughput and usage agree with the store' '
	serving repo &&
	stats "" >../s.json &&
	settled=$(db_query "SELECT count(*) FROM events WHERE type = '"'"'task_settled'"'"'") &&
	claimed=$(db_query "SELECT count(*) FROM events WHERE type = '"'"'task_claimed'"'"'") &&
	test "$settled" -ge 3 &&
	test_jq "([.queue[] | .done + .failed + .blocked + .cancelled] | add) == $settled" ../s.json &&
	test_jq "([.queue[].done] | add) == 2 and ([.queue[].blocked] | add) == 2" ../s.json &&
	test_jq "([.queue[].claimed] | add) == $claimed" ../s.json &&
	test_jq ".queued == 0 and .queue[-1].queued == 0" ../s.json &&
	tokens=0 &&
	for r in $(cat ../feature.id) $(cat ../group.id); do
		"$BATON" show "$r" --json >../r.json &&
		tokens=$((tokens + $(jq ".tokens_in + .tokens_out" ../r.json))) || exit 1
	done &&
	test "$tokens" = 2400 &&
	test_jq ".days[-1].tokens_in == 2000 and .days[-1].tokens_out == 400" ../s.json &&
	calls=$(db_query "SELECT count(*) FROM events WHERE type = '"'"'agent_exited'"'"'") &&
	test_jq ".days[-1].calls == $calls" ../s.json &&
	# 2000 in at $3, 400 out at $15 per million
	test_jq ".days[-1].cost_usd > 0.01199 and .days[-1].cost_usd < 0.01201" ../s.json &&
	test_jq "all(.days[:-1][]; .calls == 0 and .cost_usd == 0)" ../s.json
'

test_expect_success 'hostile stage data in the store (an injected group and status)' '
	serving repo &&
	run=$(cat ../group.id) &&
	ts=$(db_query "SELECT max(ts) FROM events") &&
	ins() {
		db_query "INSERT INTO events (run_id, ts, type, from_status, to_status, data) VALUES ('"'"'$run'"'"', $1, '"'"'$2'"'"', $3, $4, '"'"'$5'"'"')"
	} &&
	ins $((ts + 1)) group_started NULL NULL "{\"group\": 9, \"stages\": [\"$HOSTILE_STAGE\"]}" &&
	ins $((ts + 2)) review_done NULL NULL "{\"stage\": \"$HOSTILE_STAGE\", \"status\": \"<script>window.__pwned=5</script>\", \"started_ms\": $((ts - 400)), \"ended_ms\": $((ts + 2))}" &&
	ins $((ts + 3)) group_done NULL NULL "{\"group\": 9, \"verdicts\": {}}" &&
	ins $((ts + 4)) transition "'"'"'merge_ready'"'"'" "'"'"'$HOSTILE_STATUS'"'"'" "{}" &&
	"$BATON" events "$run" --json | jq -s . >../group.ev &&
	test_jq "any(.[]; .type == \"transition\" and .to == \"$HOSTILE_STATUS\")" ../group.ev
'

test_expect_success 'browser: the feature run'"'"'s stages and usage' '
	need_browser || exit 1
	test "$browser" = 0 || {
		serving repo &&
		run=$(cat ../feature.id) &&
		calls=$(jq "[.[] | select(.type == \"agent_exited\")] | length" ../feature.ev) &&
		charts run BATON_DASH_RUN="$run" BATON_DASH_CALLS="$calls" BATON_DASH_TITLE="$XSS"
	}
'

test_expect_success 'browser: the parallel group side by side, hostile names as text' '
	need_browser || exit 1
	test "$browser" = 0 || {
		serving repo &&
		charts group BATON_DASH_RUN="$(cat ../group.id)" BATON_DASH_STAGE="$HOSTILE_STAGE"
	}
'

test_expect_success 'browser: the charts page' '
	need_browser || exit 1
	test "$browser" = 0 || {
		serving repo &&
		stats "" >../s.json &&
		settled=$(jq "[.queue[] | .done + .failed + .blocked + .cancelled] | add" ../s.json) &&
		runs=$(api_expect 200 GET "/api/v1/runs?limit=50" | jq ".runs | length") &&
		charts page BATON_DASH_QUEUED=0 BATON_DASH_SETTLED="$settled" BATON_DASH_TOKENS=2400 \
			BATON_DASH_RUNS="$runs" BATON_DASH_TITLE="$XSS"
	}
'

test_expect_success 'screenshots are PNGs in the kept directory' '
	test "$browser" = 0 || {
		for f in charts-run charts-group charts-page; do
			test "$(head -c 8 "$SHOTS/$f.png" | od -An -tx1 | tr -d " \n")" = 89504e470d0a1a0a ||
				{ echo "$SHOTS/$f.png is not a PNG"; exit 1; }
		done &&
		echo "screenshots in $SHOTS"
	}
'

test_expect_success 'stats: the queue depth while a worker is busy, then drained' '
	kill -TERM "$(cat repo/serve.pid)" &&
	test "$(bg_wait repo/serve 30)" = 0 &&
	make_repo held &&
	baton_init_with_agent held "runtime: {judge: false, sweep_seconds: 1}
pipelines:
  quick:
    terminal: merge_ready
    stages:
      - {name: execute, kind: execute}
workflow: {pipeline: quick}" &&
	cd held &&
	for i in 1 2 3 4; do "$BATON" task add "held task $i" >/dev/null || exit 1; done &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_WAIT_FOR="$FAKE_STATE/go-held" \
		serve_http serve --workers 1 &&
	wait_for "test \"\$(task_status 1)\" = running" 30 &&
	stats "?hours=1" >../h1.json &&
	test_jq ".queued == 3 and .queue[-1].queued == 3 and ([.queue[].claimed] | add) == 1" ../h1.json &&
	: >"$FAKE_STATE/go-held" &&
	wait_for "test \"\$(task_status 4)\" = done" 60 &&
	stats "?hours=1" >../h2.json &&
	test_jq ".queued == 0 and .queue[-1].queued == 0" ../h2.json &&
	test_jq "([.queue[].claimed] | add) == 4 and ([.queue[].done] | add) == 4" ../h2.json &&
	kill -TERM "$(cat serve.pid)" &&
	test "$(bg_wait serve 30)" = 0
'

test_done
