#!/bin/bash
test_description='forge webhooks in: real GitHub payloads (@octokit/webhooks-examples) signed by the test are taken, recorded once and wake the forge companion; a bad, missing or foreign signature changes nothing; no forge, no secret: 404; /metrics counts the forge'
. "$(dirname "$0")/../lib/test-lib.sh"

# The example payloads GitHub documents, from the npm package that
# tools/agents.sh installs (pinned). Without it the script is skipped, or
# fails under BATON_TEST_REQUIRE_AGENTS=1 (CI).
EXAMPLES=${BATON_TEST_WEBHOOK_EXAMPLES:-$BATON_SRC_ROOT/.agents/node_modules/@octokit/webhooks-examples/api.github.com/index.json}
if ! [ -f "$EXAMPLES" ]; then
	_tl_done=1
	cd / && rm -rf "$TRASH_DIRECTORY"
	if [ "${BATON_TEST_REQUIRE_AGENTS:-0}" = 1 ]; then
		echo "test-lib: no webhook examples at $EXAMPLES (run tools/agents.sh)" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	echo "skipped: no webhook examples at $EXAMPLES (run tools/agents.sh)"
	echo "0 passed, 0 failed"
	exit 0
fi

# The events a delivery of which makes the forge sync now (docs/api.md).
SYNC_EVENTS="issues pull_request pull_request_review pull_request_review_comment check_run check_suite status"
SECRET='It is a secret to everybody'
export FORGE_HOOK_SECRET=$SECRET
# The token the companion of serve would use with the GitHub double.
export GITHUB_TOKEN=ghp_t0070testtoken FORGEDOUBLE_TOKEN=ghp_t0070testtoken

# The GitHub double, for serve's forge companion (its syncs find nothing
# to do): it dies with the script.
python3 "$TEST_DIRECTORY/mock/forgedouble.py" --repo acme/app \
	--port-file "$TRASH_DIRECTORY/double.port" >"$TRASH_DIRECTORY/double.out" 2>&1 &
disown $!
wait_for "test -s '$TRASH_DIRECTORY/double.port'" 10 || exit 1
DOUBLE_URL=http://127.0.0.1:$(cat "$TRASH_DIRECTORY/double.port")

forge_yaml() {
	cat <<-EOF
	forge:
	  type: github
	  repo: acme/app
	  api_url: $DOUBLE_URL
	  poll_seconds: 0
	$1
	EOF
}

# sign FILE [SECRET]: the X-Hub-Signature-256 GitHub sends for FILE.
sign() {
	python3 -c '
import hashlib, hmac, sys
body = open(sys.argv[1], "rb").read()
print("sha256=" + hmac.new(sys.argv[2].encode(), body, hashlib.sha256).hexdigest())
' "$1" "${2:-$SECRET}"
}

# sign_lines FILE: each line i of FILE into FILE.i (no newline) and its
# signature into FILE.i.sig, in one process: a python start per example
# is most of the time of a loop over 85 of them on a loaded machine.
sign_lines() {
	python3 -c '
import hashlib, hmac, sys
path, key = sys.argv[1], sys.argv[2].encode()
for i, line in enumerate(open(path, "rb").read().splitlines(), 1):
    open("%s.%d" % (path, i), "wb").write(line)
    sig = hmac.new(key, line, hashlib.sha256).hexdigest()
    open("%s.%d.sig" % (path, i), "w").write("sha256=" + sig)
' "$1" "$SECRET"
}

# hook EVENT DELIVERY FILE [SIGNATURE] [CURL-ARGS...]: POSTs FILE as
# GitHub does, with SIGNATURE ("" sends none) and the content type
# HOOK_TYPE (application/json); the answer in ./hook.body, its status on
# stdout.
hook() {
	local event=$1 delivery=$2 file=$3 sig=${4:-}
	shift 3
	if [ $# -gt 0 ]; then shift; fi
	curl -s -o hook.body -w '%{http_code}' -X POST \
		-H "Content-Type: ${HOOK_TYPE:-application/json}" \
		-H "User-Agent: GitHub-Hookshot/t0070" \
		-H "X-GitHub-Event: $event" -H "X-GitHub-Delivery: $delivery" \
		${sig:+-H "X-Hub-Signature-256: $sig"} "$@" \
		--data-binary @"$file" "$HTTP_URL/api/v1/forge/webhook"
}

# hook_expect STATUS EVENT DELIVERY FILE [SIGNATURE] [CURL-ARGS...]
hook_expect() {
	local want=$1 got
	shift
	got=$(hook "$@") || return 1
	if [ "$got" != "$want" ]; then
		echo "hook $1 $2: status $got, expected $want: $(cat hook.body)" >&2
		return 1
	fi
}

load_http() {
	cd "$TRASH_DIRECTORY/${1:-a}" &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	HTTP_PORT=${HTTP_URL##*:} &&
	HTTP_TOKEN=$(cat .baton/token)
}

# open_wake: a forge companion of the test's own: a FIFO in
# .baton/forge-wake.d, held open (read and write, so the open does not
# wait) on fd 9 of the calling shell, as forge_wake writes only to FIFOs
# someone reads.
open_wake() {
	mkdir -p .baton/forge-wake.d &&
	{ [ -p .baton/forge-wake.d/t0070 ] || mkfifo .baton/forge-wake.d/t0070; } &&
	exec 9<>.baton/forge-wake.d/t0070
}

# woken: forge_wake wrote a byte (it does before the answer is sent; the
# timeout only bounds a failure). not_woken: nothing is in the FIFO.
woken() {
	local byte
	read -r -t 5 -n 1 -u 9 byte && test "$byte" = w
}
not_woken() {
	! read -r -t 0 -u 9
}

taken() {
	"$BATON" events --all --json | jq -c 'select(.type == "forge_webhook") | .data' >taken.jsonl
	wc -l <taken.jsonl
}
deliveries() {
	db_query "SELECT count(*) FROM forge_deliveries"
}

test_expect_success 'setup: serve with a forge and a webhook secret' '
	make_repo a &&
	baton_init_with_agent a "$(forge_yaml "  webhook_secret_env: FORGE_HOOK_SECRET")" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	test "$(deliveries)" = 0
'

test_expect_success 'every real example of each event baton syncs on is taken, recorded once and wakes the forge' '
	load_http &&
	open_wake &&
	mkdir -p ../payloads &&
	n=0 &&
	for ev in $SYNC_EVENTS; do
		jq -c --arg n "$ev" ".[] | select(.name == \$n) | .examples[]" "$EXAMPLES" >../payloads/$ev.jsonl &&
		test_line_count -gt 0 ../payloads/$ev.jsonl &&
		sign_lines ../payloads/$ev.jsonl &&
		i=0 &&
		while IFS= read -r line; do
			i=$((i + 1)) &&
			hook_expect 200 "$ev" "d-$ev-$i" ../payloads/$ev.jsonl.$i "$(cat ../payloads/$ev.jsonl.$i.sig)" &&
			test_jq ".outcome == \"sync\" and .duplicate == false and .delivery == \"d-$ev-$i\" and .event == \"$ev\"" hook.body &&
			woken || { echo "$ev example $i: no wake-up" >&2; exit 1; }
		done <../payloads/$ev.jsonl &&
		n=$((n + i)) || exit 1
	done &&
	not_woken &&
	test $n -ge 40 &&
	test "$(taken)" = $n &&
	test "$(deliveries)" = $n &&
	jq -s . taken.jsonl >taken.json &&
	test_jq "map(select(.event == \"pull_request\")) | length > 0 and all(.outcome == \"sync\" and (.action | type) == \"string\")" taken.json &&
	jq -r .event taken.jsonl | sort -u | tr "\n" " " >events &&
	test "$(cat events)" = "check_run check_suite issues pull_request pull_request_review pull_request_review_comment status " &&
	echo $n >../synced
'

test_expect_success 'ping is answered 200 and other events 202, recorded, without a sync' '
	load_http &&
	open_wake &&
	before=$(taken) &&
	jq -c ".[] | select(.name == \"ping\") | .examples[0]" "$EXAMPLES" >ping.json &&
	hook_expect 200 ping d-ping-1 ping.json "$(sign ping.json)" &&
	test_jq ".outcome == \"pong\"" hook.body &&
	for ev in push star release; do
		jq -c --arg n $ev ".[] | select(.name == \$n) | .examples[0]" "$EXAMPLES" >other.json &&
		hook_expect 202 $ev d-$ev-1 other.json "$(sign other.json)" &&
		test_jq ".outcome == \"ignored\"" hook.body || exit 1
	done &&
	not_woken &&
	test "$(taken)" = $((before + 4)) &&
	tail -n 4 taken.jsonl | jq -r "\"\(.event) \(.outcome)\"" >got &&
	printf "%s\n" "ping pong" "push ignored" "star ignored" "release ignored" >want &&
	test_cmp want got
'

test_expect_success 'a bad, missing, foreign-secret or other-body signature is 401 and changes nothing' '
	load_http &&
	open_wake &&
	jq -c ".[] | select(.name == \"issues\") | .examples[0]" "$EXAMPLES" >issue.json &&
	jq -c ".[] | select(.name == \"issues\") | .examples[1]" "$EXAMPLES" >other.json &&
	good=$(sign issue.json) &&
	before=$(taken) && dbefore=$(deliveries) &&
	api_expect 200 GET /metrics >m1 &&
	# garbage, a digest one digit off, none at all, another secret,
	# the signature of another body, the legacy sha1 header alone
	hook_expect 401 issues d-bad-1 issue.json "sha256=nothex" &&
	test_jq ".error.code == \"unauthorized\" and (.error.message | test(\"X-Hub-Signature-256\"))" hook.body &&
	last=${good: -1} && if [ "$last" = 0 ]; then flip=1; else flip=0; fi &&
	hook_expect 401 issues d-bad-2 issue.json "${good%?}$flip" &&
	hook_expect 401 issues d-bad-3 issue.json "" &&
	test_jq ".error.message | test(\"no X-Hub-Signature-256\")" hook.body &&
	hook_expect 401 issues d-bad-4 issue.json "$(sign issue.json "another secret")" &&
	hook_expect 401 issues d-bad-5 issue.json "$(sign other.json)" &&
	hook_expect 401 issues d-bad-6 issue.json "" -H "X-Hub-Signature: sha1=0123456789abcdef0123456789abcdef01234567" &&
	hook_expect 401 issues d-bad-7 issue.json "${good#sha256=}" &&
	not_woken &&
	test "$(taken)" = $before &&
	test "$(deliveries)" = $dbefore &&
	api_expect 200 GET /metrics >m2 &&
	grep "^baton_forge_webhooks_total " m1 >w1 &&
	grep "^baton_forge_webhooks_total " m2 >w2 &&
	test_cmp w1 w2 &&
	# the ids refused were not kept: the genuine delivery is taken
	hook_expect 200 issues d-bad-1 issue.json "$good" &&
	test_jq ".outcome == \"sync\"" hook.body &&
	woken &&
	test "$(taken)" = $((before + 1))
'

test_expect_success 'a redelivered delivery acts once: 200 duplicate, no event, no wake-up' '
	load_http &&
	open_wake &&
	jq -c ".[] | select(.name == \"check_run\") | .examples[0]" "$EXAMPLES" >run.json &&
	hook_expect 200 check_run d-redo run.json "$(sign run.json)" &&
	woken &&
	before=$(taken) && dbefore=$(deliveries) &&
	for i in 1 2 3; do
		hook_expect 200 check_run d-redo run.json "$(sign run.json)" &&
		test_jq ".duplicate == true and .outcome == \"duplicate\"" hook.body || exit 1
	done &&
	not_woken &&
	test "$(taken)" = $before &&
	test "$(deliveries)" = $dbefore &&
	# eight copies of a new delivery at once: one is taken
	sig=$(sign run.json) &&
	for i in 1 2 3 4 5 6 7 8; do
		curl -s -o race.$i -X POST -H "Content-Type: application/json" \
			-H "X-GitHub-Event: check_run" -H "X-GitHub-Delivery: d-race" \
			-H "X-Hub-Signature-256: $sig" --data-binary @run.json \
			"$HTTP_URL/api/v1/forge/webhook" &
	done &&
	wait &&
	cat race.? | jq -r .outcome | sort | uniq -c | sed "s/^ *//" >outcomes &&
	printf "%s\n" "7 duplicate" "1 sync" >want &&
	test_cmp want outcomes &&
	woken &&
	not_woken &&
	test "$(taken)" = $((before + 1))
'

test_expect_success 'a signed body that is not JSON, or no event or delivery header, is 400 and kept nowhere' '
	load_http &&
	open_wake &&
	before=$(taken) && dbefore=$(deliveries) &&
	printf "payload=%%7B%%7D" >form.txt &&
	hook_expect 400 issues d-form form.txt "$(sign form.txt)" &&
	test_jq ".error.code == \"bad_request\" and (.error.message | test(\"not JSON\"))" hook.body &&
	HOOK_TYPE=application/x-www-form-urlencoded \
		hook_expect 400 issues d-form form.txt "$(sign form.txt)" &&
	test_jq ".error.message | test(\"form-encoded: set the webhook.s content type to application/json\")" hook.body &&
	echo "{}" >empty.json &&
	hook_expect 400 "" d-noevent empty.json "$(sign empty.json)" &&
	test_jq ".error.message | test(\"X-GitHub-Event\")" hook.body &&
	hook_expect 400 issues "" empty.json "$(sign empty.json)" &&
	test_jq ".error.message | test(\"X-GitHub-Delivery\")" hook.body &&
	hook_expect 400 issues "d/../x" empty.json "$(sign empty.json)" &&
	not_woken &&
	test "$(taken)" = $before &&
	test "$(deliveries)" = $dbefore &&
	# and then, signed and whole, the same id is taken
	hook_expect 200 issues d-form empty.json "$(sign empty.json)" &&
	woken
'

test_expect_success 'a body over the limit is 413 before anything else' '
	load_http &&
	head -c 1100000 /dev/zero | tr "\0" " " >big.json &&
	hook_expect 413 issues d-big big.json "$(sign big.json)" &&
	test_jq ".error.code == \"too_large\"" hook.body
'

test_expect_success 'the webhook needs no bearer token, every other route still does; its Host is free, its Origin is not' '
	load_http &&
	open_wake &&
	for path in /api/v1/tasks /metrics /api/v1/forge/webhook; do
		curl -s -o body -w "%{http_code}" "$HTTP_URL$path" >status &&
		test "$(cat status)" = 401 || exit 1
	done &&
	curl -s -o body -w "%{http_code}" -H "Content-Type: application/json" \
		--data-binary "{\"title\": \"no token\"}" "$HTTP_URL/api/v1/tasks" >status &&
	test "$(cat status)" = 401 &&
	echo "{\"zen\": \"x\"}" >z.json &&
	# baton s token is no signature
	hook_expect 401 issues d-token z.json "" -H "Authorization: Bearer $HTTP_TOKEN" &&
	# a delivery through a tunnel or proxy keeps its public name
	hook_expect 200 issues d-host z.json "$(sign z.json)" -H "Host: hooks.example.com" &&
	woken &&
	hook_expect 403 issues d-origin z.json "$(sign z.json)" -H "Origin: http://evil.example" &&
	test_jq ".error.code == \"forbidden_origin\"" hook.body &&
	# and the Host check still guards every other route
	curl -s -o body -w "%{http_code}" -H "Authorization: Bearer $HTTP_TOKEN" \
		-H "Host: hooks.example.com" "$HTTP_URL/api/v1/tasks" >status &&
	test "$(cat status)" = 421 &&
	api_expect 200 GET /api/v1 >routes.json &&
	test_jq ".routes | map(select(.path == \"/api/v1/forge/webhook\" and .method == \"POST\")) | length == 1" routes.json
'

test_expect_success '/metrics has the forge counters, and counts the webhooks taken' '
	load_http &&
	api_expect 200 GET /metrics >metrics &&
	for m in api_calls not_modified rate_limit_waits rate_limit_wait_seconds syncs webhooks; do
		test_grep "^# HELP baton_forge_${m}_total " metrics &&
		test_grep "^# TYPE baton_forge_${m}_total counter$" metrics &&
		test_grep "^baton_forge_${m}_total [0-9][0-9]*$" metrics || exit 1
	done &&
	# every delivery taken, sync or not, and none refused or redelivered
	test "$(sed -n "s/^baton_forge_webhooks_total //p" metrics)" = "$(deliveries)" &&
	test "$(deliveries)" = "$(taken)" &&
	# each counter shows its own column of the store (the sync adds to
	# them from its own process): millions apart, so a sync round of the
	# forge companion running meanwhile cannot blur which is which
	db_query "UPDATE forge_stats SET calls = calls + 1000000,
		not_modified = not_modified + 2000000,
		rate_waits = rate_waits + 3000000,
		rate_wait_seconds = rate_wait_seconds + 4000000,
		syncs = syncs + 5000000 WHERE id = 1" &&
	api_expect 200 GET /metrics >metrics2 &&
	grep "^baton_forge_" metrics >m1 &&
	grep "^baton_forge_" metrics2 >m2 &&
	paste -d " " m1 m2 | awk "{ print \$1, int((\$4 - \$2) / 1000000) }" >delta &&
	printf "%s\n" "baton_forge_api_calls_total 1" \
		"baton_forge_not_modified_total 2" \
		"baton_forge_rate_limit_waits_total 3" \
		"baton_forge_rate_limit_wait_seconds_total 4" \
		"baton_forge_syncs_total 5" "baton_forge_webhooks_total 0" >want &&
	test_cmp want delta
'

test_expect_success 'without a forge, or without its secret, the webhook is 404 and keeps nothing' '
	make_repo b &&
	baton_init_with_agent b &&
	cd b &&
	serve_http "$TRASH_DIRECTORY/serve-b" --workers 1 &&
	echo "{}" >e.json &&
	hook_expect 404 issues d-1 e.json "$(sign e.json)" &&
	test_jq ".error.code == \"not_found\" and (.error.message | test(\"no forge\"))" hook.body &&
	api_expect 200 GET /metrics >metrics &&
	test_must_fail grep "^baton_forge_" metrics &&
	kill "$(cat ../serve-b.pid)" && bg_wait ../serve-b >/dev/null &&
	cd .. &&
	make_repo c &&
	baton_init_with_agent c "$(forge_yaml "  webhook_secret_env: T0070_UNSET_SECRET")" &&
	cd c &&
	serve_http "$TRASH_DIRECTORY/serve-c" --workers 1 &&
	hook_expect 404 issues d-1 ../b/e.json "$(sign ../b/e.json)" &&
	test_jq ".error.message | test(\"webhook_secret_env\")" hook.body &&
	test "$(db_query "SELECT count(*) FROM forge_deliveries")" = 0 &&
	api_expect 200 GET /metrics >metrics &&
	test_grep "^baton_forge_webhooks_total 0$" metrics &&
	kill "$(cat ../serve-c.pid)" && bg_wait ../serve-c >/dev/null &&
	cd .. &&
	make_repo d &&
	baton_init_with_agent d "$(forge_yaml "")" &&
	cd d &&
	serve_http "$TRASH_DIRECTORY/serve-d" --workers 1 &&
	hook_expect 404 issues d-1 ../b/e.json "$(sign ../b/e.json)" &&
	test_jq ".error.message | test(\"no forge.webhook_secret_env\")" hook.body &&
	kill "$(cat ../serve-d.pid)" && bg_wait ../serve-d >/dev/null
'

test_expect_success 'the webhook secret is in no file baton wrote, no event and no log' '
	cd a &&
	"$BATON" events --all --json >all-events &&
	! grep -rF "$SECRET" .baton ../serve.out all-events
'

test_done
