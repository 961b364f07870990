#!/bin/bash
test_description='users and roles: named tokens, the role of every route, who decided, revocation'
. "$(dirname "$0")/../lib/test-lib.sh"

CHROMIUM=${BATON_TEST_CHROMIUM:-/usr/bin/chromium}
PLAYWRIGHT=${BATON_TEST_PLAYWRIGHT:-$BATON_SRC_ROOT/.agents/node_modules/playwright-core}
why_no_browser=
[ -x "$CHROMIUM" ] || why_no_browser="no Chromium at $CHROMIUM"
command -v node >/dev/null 2>&1 || why_no_browser="node is not installed"
[ -f "$PLAYWRIGHT/index.mjs" ] || why_no_browser="playwright-core is not installed in $PLAYWRIGHT"

nojudge='runtime: {judge: false}'
gate="$nojudge
policies: {require_approval_at_stages: [executing]}"

# as TOKEN METHOD PATH [BODY]: the status of a call with TOKEN ("" none),
# the answer in ./body
as() {
	local tok=$1 method=$2 path=$3
	shift 3
	curl -s -o body -w "%{http_code}" --max-time 2 -X "$method" \
		${tok:+-H "Authorization: Bearer $tok"} \
		${1+-H "Content-Type: application/json" --data-binary "$1"} \
		"$HTTP_URL$path" >status || test $? = 28 || return 1
	cat status
}

load() {
	cd "$TRASH_DIRECTORY/a" &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	HTTP_PORT=${HTTP_URL##*:} &&
	HTTP_TOKEN=$(cat .baton/token) &&
	VIEWER=$(cat ../viewer) && OPERATOR=$(cat ../operator) &&
	ADMIN=$(cat ../admin) && REVOKED=$(cat ../revoked)
}

test_expect_success 'token add prints the secret once; list shows name, role, use, revocation' '
	make_repo a &&
	baton_init_with_agent a "$gate" &&
	cd a &&
	"$BATON" token add vera --role viewer >../viewer 2>err &&
	test_grep "shown only now" err &&
	test "$(wc -c <../viewer)" = 65 &&
	"$BATON" token add otto --role=operator >../operator &&
	"$BATON" token add ada --role admin >../admin &&
	"$BATON" token add rex --role viewer >../revoked &&
	test_must_fail "$BATON" token add vera --role admin 2>err &&
	test_grep "exists" err &&
	test_must_fail "$BATON" token add eve --role root 2>err &&
	test_grep "viewer, operator or admin" err &&
	test_must_fail "$BATON" token add owner --role admin 2>err &&
	test_grep ".baton/token" err &&
	"$BATON" token list >list &&
	test_grep "^vera  *viewer .* never  *-$" list &&
	test_grep "^otto  *operator " list &&
	"$BATON" token revoke rex >out &&
	test_grep "revoked" out &&
	"$BATON" token list --json >list.json &&
	test_jq "map(select(.name == \"rex\"))[0].revoked_at > 0" list.json &&
	test_must_fail "$BATON" token revoke nobody 2>err &&
	test_grep "no such token" err
'

test_expect_success 'the store keeps hashes only: no secret is in .baton' '
	cd a &&
	for f in viewer operator admin revoked; do
		s=$(cat ../$f) &&
		! grep -rqF "$s" .baton || { echo "secret $f found in .baton" >&2; exit 1; }
	done &&
	if [ -z "${BATON_TEST_PG_ADMIN:-}" ]; then
		sqlite3 .baton/baton.db "SELECT secret_sha256 FROM api_tokens" >hashes &&
		test_line_count = 4 hashes &&
		grep -qF "$(printf %s "$(cat ../viewer)" | sha256sum | cut -c1-64)" hashes
	fi
'

test_expect_success 'serve starts; the old repository token is still admin' '
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	load &&
	test "$(as "$HTTP_TOKEN" GET /api/v1/tokens)" = 200 &&
	test_jq ".tokens | length == 4" body &&
	test_jq "[.tokens[] | has(\"token\") or has(\"secret_sha256\")] | any | not" body
'

test_expect_success 'every route of the table, for no token and each role: 401, 403 or let through' '
	load &&
	as "$HTTP_TOKEN" GET /api/v1 >/dev/null &&
	jq -r ".routes[] | \"\(.method) \(.path) \(.role)\"" body >routes &&
	test "$(grep -c " admin$" routes)" -ge 3 &&
	test "$(grep -c " operator$" routes)" -ge 8 &&
	test "$(grep -c " public$" routes)" -ge 1 &&
	rank() { case $1 in public) echo 0;; viewer) echo 1;; operator) echo 2;; admin) echo 3;; esac; } &&
	while read -r method path role; do
		p=$(echo "$path" | sed "s/{[a-z]*}/zz-none/g") &&
		body=${method#GET} && body=${body:+"{}"} &&
		need=$(rank "$role") &&
		got=$(as "" "$method" "$p" $body) &&
		if [ "$role" = public ]; then
			test "$got" != 401 || { echo "$method $path: 401 without token" >&2; exit 1; }
		else
			test "$got" = 401 || { echo "$method $path: $got without token" >&2; exit 1; }
		fi &&
		for who in viewer:1:$VIEWER operator:2:$OPERATOR admin:3:$ADMIN; do
			name=${who%%:*} rest=${who#*:} &&
			have=${rest%%:*} tok=${rest#*:} &&
			got=$(as "$tok" "$method" "$p" $body) &&
			if [ "$have" -lt "$need" ]; then
				test "$got" = 403 &&
				test_jq ".error.role_needed == \"$role\" and .error.role == \"$name\"" body ||
				{ echo "$method $path as $name: $got, expected 403" >&2; cat body >&2; exit 1; }
			else
				case $got in 401|403|000) echo "$method $path as $name: $got" >&2; cat body >&2; exit 1;; esac
			fi || exit 1
		done || exit 1
	done <routes
'

test_expect_success 'a revoked token and an unknown one are 401, saying which' '
	load &&
	test "$(as "$REVOKED" GET /api/v1/tasks)" = 401 &&
	test_jq ".error.message | test(\"rex.*revoked\")" body &&
	test "$(as "$(echo "$VIEWER" | tr 0-9a-f 1-9a-f0)" GET /api/v1/tasks)" = 401 &&
	test "$(as "$REVOKED" GET "/api/v1/events?access_token=$REVOKED")" = 401
'

test_expect_success 'last use is recorded and shown' '
	load &&
	"$BATON" token list >list &&
	! grep "^vera .* never " list &&
	grep "^vera  *viewer  *[0-9T:.Z-]*  *20[0-9][0-9]-" list
'

test_expect_success 'a viewer cannot decide; an operator approves, and the record says who' '
	load &&
	test "$(as "$VIEWER" POST /api/v1/tasks "{\"title\": \"Gated\"}")" = 403 &&
	test "$(as "$OPERATOR" POST /api/v1/tasks "{\"title\": \"Gated\"}")" = 201 &&
	"$BATON" events --task 1 --json >tev &&
	jq -s -e "map(select(.type == \"task_added\"))[0].data.actor == \"otto\"" tev &&
	wait_for "curl -s -H \"Authorization: Bearer $VIEWER\" $HTTP_URL/api/v1/approvals | jq -e \".approvals | length == 1\" >/dev/null" 60 &&
	as "$VIEWER" GET /api/v1/approvals >/dev/null &&
	run=$(jq -r ".approvals[0].run" body) &&
	test "$(as "$VIEWER" POST "/api/v1/approvals/$run" "{\"decision\": \"approve\"}")" = 403 &&
	test_jq ".error.role_needed == \"operator\"" body &&
	test_jq ".error.message | test(\"vera\")" body &&
	test "$(as "$OPERATOR" POST "/api/v1/runs/$run/steer" "{\"text\": \"mind the tests\"}")" = 202 &&
	test "$(as "$OPERATOR" POST "/api/v1/approvals/$run" "{\"decision\": \"approve\"}")" = 200 &&
	"$BATON" events "$run" --json >ev &&
	jq -s -e "map(select(.type == \"steer\"))[0].data.actor == \"otto\"" ev &&
	jq -s -e "map(select(.type == \"transition\" and .data.decision == \"approve\"))[0].data.actor == \"otto\"" ev &&
	echo "$run" >../run
'

test_expect_success 'the dashboard shows who decided (headless Chromium)' '
	load &&
	if [ -n "$why_no_browser" ]; then
		test "${BATON_TEST_REQUIRE_BROWSER:-0}" != 1 || { echo "$why_no_browser" >&2; exit 1; }
		echo "skipped in the browser: $why_no_browser"
	else
		env BATON_DASH_URL="$HTTP_URL/" BATON_DASH_TOKEN="$VIEWER" \
			BATON_DASH_RUN="$(cat ../run)" BATON_DASH_WHO=otto \
			BATON_PLAYWRIGHT="$PLAYWRIGHT" BATON_CHROMIUM="$CHROMIUM" \
			BATON_DASH_OUT="$TRASH_DIRECTORY" \
			node "$TEST_DIRECTORY/browser/dashboard.mjs" who >who.out 2>&1 ||
			{ cat who.out >&2; exit 1; }
		cat who.out &&
		! grep -q "^not ok" who.out
	fi
'

test_expect_success 'over the WebSocket a viewer still cannot decide' '
	load &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$VIEWER" \
		--send "{\"type\": \"task:submit\", \"id\": \"c1\", \"task\": {\"title\": \"Over WS\"}}" \
		--until "\"id\":\"c1\"" --timeout 10 >ack &&
	grep "\"type\":\"ack\"" ack >ack1 &&
	test_jq ".ok == false and .status == 403 and .error.role_needed == \"operator\"" ack1 &&
	"$WSCLIENT" "$HTTP_PORT" "/api/v1/ws?access_token=$OPERATOR" \
		--send "{\"type\": \"task:submit\", \"id\": \"c2\", \"task\": {\"title\": \"Over WS\"}}" \
		--until "\"id\":\"c2\"" --timeout 10 >ack &&
	grep "\"type\":\"ack\"" ack >ack2 &&
	test_jq ".ok == true and .status == 201" ack2
'

test_expect_success 'an admin adds and revokes a token over the API; an operator may not' '
	load &&
	test "$(as "$OPERATOR" POST /api/v1/tokens "{\"name\": \"x\", \"role\": \"admin\"}")" = 403 &&
	test "$(as "$ADMIN" POST /api/v1/tokens "{\"name\": \"ci\", \"role\": \"viewer\"}")" = 201 &&
	ci=$(jq -r .token body) &&
	test "$(as "$ci" GET /api/v1/runs)" = 200 &&
	test "$(as "$ADMIN" POST /api/v1/tokens/ci/revoke)" = 200 &&
	test "$(as "$ci" GET /api/v1/runs)" = 401 &&
	test "$(as "$ADMIN" POST /api/v1/tokens "{\"name\": \"owner\", \"role\": \"viewer\"}")" = 400
'

test_expect_success 'a token header of a megabyte is refused, and serve lives on' '
	load &&
	{ printf "Authorization: Bearer "; head -c 1000000 /dev/zero | tr "\0" a; echo; } >big &&
	code=$(curl -s -o /dev/null -w "%{http_code}" -H @big \
		"$HTTP_URL/api/v1/tasks") &&
	case $code in 401|413|431|400) ;; *) echo "got $code" >&2; exit 1;; esac &&
	head -c 300 /dev/zero | tr "\0" a >mid &&
	test "$(as "$(cat mid)" GET /api/v1/tasks)" = 401 &&
	test "$(as "$VIEWER" GET /api/v1/tasks)" = 200
'

test_expect_success 'a cancel and a retry over the API name who asked in the task'"'"'s events' '
	load &&
	test "$(as "$OPERATOR" POST /api/v1/tasks "{\"title\": \"Undone\"}")" = 201 &&
	id=$(jq .id body) &&
	wait_for "curl -s -H \"Authorization: Bearer $VIEWER\" $HTTP_URL/api/v1/tasks/$id | jq -e \".status == \\\"blocked\\\"\" >/dev/null" 120 &&
	test "$(as "$VIEWER" POST "/api/v1/tasks/$id/cancel")" = 403 &&
	test "$(as "$OPERATOR" POST "/api/v1/tasks/$id/cancel")" = 200 &&
	test_jq ".status == \"cancelled\"" body &&
	test "$(as "$OPERATOR" POST "/api/v1/tasks/$id/retry")" = 200 &&
	test_jq ".status == \"queued\"" body &&
	"$BATON" events --task "$id" --json >tev2 &&
	jq -s -e "map(select(.type == \"task_cancelled\"))[0].data.actor == \"otto\"" tev2 &&
	jq -s -e "map(select(.type == \"task_retried\"))[0].data.actor == \"otto\"" tev2
'

test_expect_success 'serve stops' '
	load &&
	kill "$(cat ../serve.pid)" && bg_wait ../serve >/dev/null
'

test_done
