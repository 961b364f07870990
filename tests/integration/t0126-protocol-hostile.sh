#!/bin/bash
test_description='the live protocol under attack: malformed envelopes, an oversize message, an idempotency key replayed with another payload, racing or across a restart, and sockets without the token'
. "$(dirname "$0")/../lib/test-lib.sh"

REPLAY=$BATON_SRC_ROOT/tests/lib/protoreplay.py

# every task stays in its first execute call (the file "go" never comes)
export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_WAIT_FOR=go

load_http() {
	cd "$TRASH_DIRECTORY/a" &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	HTTP_PORT=${HTTP_URL##*:} &&
	HTTP_TOKEN=$(cat .baton/token)
}

replay() {
	python3 "$REPLAY" "$HTTP_PORT" "$HTTP_TOKEN" "$@"
}

total() {
	api GET /api/v1/tasks | jq "[.counts[]] | add"
}

test_expect_success 'setup' '
	make_repo a &&
	baton_init_with_agent a "runtime: {judge: false}
server: {max_body_kb: 64}" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1
'

test_expect_success 'a socket without the token, or with a wrong one, is never opened' '
	load_http &&
	python3 "$REPLAY" "$HTTP_PORT" "" health >out && rc=0 || rc=$?; cat out; test $rc = 1 &&
	test_grep "FAIL: the handshake was answered 401" out &&
	python3 "$REPLAY" "$HTTP_PORT" "${HTTP_TOKEN%?}x" health >out && rc=0 || rc=$?; cat out; test $rc = 1 &&
	test_grep "FAIL: the handshake was answered 401" out &&
	test_expect_code 2 "$WSCLIENT" "$HTTP_PORT" /api/v1/ws --timeout 5
'

test_expect_success 'malformed envelopes: protocol_error each, and the socket goes on' '
	load_http &&
	replay malformed >out && rc=0 || rc=$?; cat out; test $rc = 0 &&
	test_grep "ok: 7 malformed envelopes: protocol_error each" out
'

test_expect_success 'a message over server.max_body_kb closes the socket with 1009, no task made' '
	load_http &&
	replay oversize 70000 >out && rc=0 || rc=$?; cat out; test $rc = 0 &&
	test_grep "closed with 1009, no task" out
'

test_expect_success 'a key replayed with another payload: idempotency_mismatch (WS and HTTP), never a second task' '
	load_http &&
	replay mismatch "mm-$$" >out && rc=0 || rc=$?; cat out; test $rc = 0 &&
	test_grep "idempotency_mismatch, no task" out
'

test_expect_success 'a malformed key or two keys that differ: 400, nothing written' '
	load_http &&
	n=$(total) &&
	long=$(printf "k%.0s" $(seq 256)) &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"idempotency_key\": \"$long\"}" >out &&
	test_jq ".error.message | test(\"1 to 255 printable\")" out &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"idempotency_key\": \"a b\"}" >/dev/null &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"x\", \"idempotency_key\": 7}" >/dev/null &&
	curl -s -o out -w "%{http_code}" -H "Authorization: Bearer $HTTP_TOKEN" \
		-H "Idempotency-Key: one" -d "{\"title\": \"x\", \"idempotency_key\": \"two\"}" \
		"$HTTP_URL/api/v1/tasks" >status &&
	test "$(cat status)" = 400 &&
	test_jq ".error.message | test(\"differ\")" out &&
	test "$(total)" = "$n"
'

test_expect_success 'a refused submission claims nothing: a corrected retry under its key is taken' '
	load_http &&
	n=$(total) &&
	api_expect 400 POST /api/v1/tasks "{\"title\": \"y\", \"after\": [999], \"idempotency_key\": \"back-$$\"}" >/dev/null &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"y\", \"idempotency_key\": \"back-$$\"}" >/dev/null &&
	test "$(total)" = $((n + 1))
'

test_expect_success 'eight racing submissions of one key: one task, seven already_running naming it' '
	load_http &&
	n=$(total) &&
	for i in 1 2 3 4 5 6 7 8; do
		curl -s -o race$i -w "%{http_code}\n" -H "Authorization: Bearer $HTTP_TOKEN" \
			-H "Idempotency-Key: race-$$" -d "{\"title\": \"Race\"}" \
			"$HTTP_URL/api/v1/tasks" >code$i &
	done &&
	wait &&
	cat code? | sort | uniq -c >codes &&
	cat codes &&
	test "$(grep -c . codes)" = 2 &&
	grep -q "1 201" codes && grep -q "7 409" codes &&
	id=$(cat race? | jq -r "select(.id) | .id") &&
	cat race? | jq -r "select(.error) | .error.code, .error.task.id // empty" | sort -u >named &&
	printf "%s\n" "$id" already_running | sort >want &&
	test_cmp want named &&
	test "$(total)" = $((n + 1))
'

# waiting SQL: the store's sessions blocked on a lock in a statement
# like SQL (PostgreSQL)
waiting() {
	db_query "SELECT count(*) FROM pg_stat_activity
		  WHERE datname = current_database()
		  AND wait_event_type = 'Lock' AND query LIKE '$1'"
}

# submit NAME KEY: a submission under KEY in the background (bg_start
# NAME), its answer in NAME.json and its status in NAME.out
submit() {
	bg_start "$1" curl -s -o "$1.json" -w "%{http_code}" \
		-H "Authorization: Bearer $HTTP_TOKEN" -H "Idempotency-Key: $2" \
		-d "{\"title\": \"Held\"}" "$HTTP_URL/api/v1/tasks"
}

# held_race KEY: the race of the case below, with a psql session that
# reads fd 9 and holds the tasks table until it is killed
held_race() {
	echo "BEGIN; LOCK TABLE tasks IN SHARE ROW EXCLUSIVE MODE;" >&9 &&
	wait_for "db_query \"SELECT count(*) FROM pg_locks
		WHERE relation = 'tasks'::regclass AND granted
		AND mode = 'ShareRowExclusiveLock'\" | grep -qx 1" 20 &&
	submit ../first "$1" &&
	wait_for 'waiting "%INSERT INTO tasks%" | grep -qx 1' 20 &&
	submit ../second "$1" &&
	# before: the second was answered at once, naming no task
	wait_for 'test -f ../second.rc ||
		waiting "INSERT INTO idempotency_keys%" | grep -qx 1' 20
}

# Only PostgreSQL can hold a submission between its statements: a
# session of psql that locks the tasks table stops the first one at its
# task's insert, after its key's.
if [ -n "${BATON_TEST_PG_ADMIN:-}" ]; then
test_expect_success 'a submission racing one stopped before its commit waits for it, and names its task' '
	load_http &&
	n=$(total) &&
	url=$(sed -n "s/^store: *//p" .baton/config.yaml) &&
	rm -f ../hold && mkfifo ../hold &&
	{ psql -q -X -v ON_ERROR_STOP=1 "$url" <../hold >../hold.out 2>&1 & } &&
	holder=$! &&
	exec 9>../hold &&
	{ held_race held-$$ && rc=0 || rc=$?; } &&
	# the lock goes with its session, whatever happened (fd 9 may stay
	# open in the submissions'"'"' shells: the session is killed)
	kill $holder && exec 9>&- &&
	test $rc = 0 &&
	test "$(bg_wait ../first 30)" = 0 && test "$(bg_wait ../second 30)" = 0 &&
	test "$(cat ../first.out)" = 201 && test "$(cat ../second.out)" = 409 &&
	id=$(jq .id ../first.json) &&
	test_jq ".error.code == \"already_running\" and .error.task.id == $id" ../second.json &&
	test "$(total)" = $((n + 1))
'
fi

test_expect_success 'the key outlives serve: after a restart it still names its task' '
	load_http &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Durable\", \"idempotency_key\": \"dur-$$\"}" >first &&
	id=$(jq .id first) &&
	# a crash: serve drains running tasks on SIGTERM, and these wait
	kill -9 "$(cat ../serve.pid)" && bg_wait ../serve 30 >/dev/null &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	curl -s -o again -w "%{http_code}" -H "Authorization: Bearer $HTTP_TOKEN" \
		-H "Idempotency-Key: dur-$$" -d "{\"title\": \"Durable\"}" \
		"$HTTP_URL/api/v1/tasks" >status &&
	test "$(cat status)" = 409 &&
	test_jq ".error.code == \"already_running\" and .error.task.id == $id" again &&
	test "$(api GET /api/v1/tasks | jq "[.tasks[] | select(.title == \"Durable\")] | length")" = 1
'

test_done
