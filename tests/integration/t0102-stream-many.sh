#!/bin/bash
test_description='thousands of SSE clients and hundreds of WebSocket clients on one serve: every one gets every event, in order'
. "$(dirname "$0")/../lib/test-lib.sh"

# restore_http: the serve's address and token (serve_http set them in
# the setup's own shell), in a test that runs in a/
restore_http() {
	HTTP_PORT=$(cat ../port) &&
	HTTP_URL=http://127.0.0.1:$HTTP_PORT &&
	HTTP_TOKEN=$(cat .baton/token)
}

STREAMS=$BATON_SRC_ROOT/tests/lib/streams.py

# An agent that stays in its first stage: the one worker keeps it, so
# the tasks added below stay queued and the stream carries their
# task_added events (and the busy run's own, which every client gets
# too).
test_expect_success 'setup: serve with one busy worker' '
	make_repo a &&
	printf "#!/bin/sh\nsleep 100\n" >"$PWD/sleeper" &&
	chmod +x "$PWD/sleeper" &&
	baton_init_with_agent a "providers:
  sleeper: {type: command, command: [\"$PWD/sleeper\"]}
roles: {default: sleeper}
runtime: {judge: false}" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"the busy one\"}" &&
	echo "$HTTP_PORT" >../port
'

# every_event MODE N: N clients of the stream MODE (sse or ws) follow
# the stream while tasks are added between two marker tasks; every
# client must get every task_added between them, in seq order, once.
every_event() {
	mode=$1 n=$2 &&
	cd a &&
	restore_http &&
	rm -f ../ready ../$mode.out &&
	{ python3 "$STREAMS" "$HTTP_PORT" "$HTTP_TOKEN" $n $mode ../ready \
		../$mode.out --from start-of-$mode-test \
		--until end-of-$mode-test --timeout 120 \
		>../$mode.log 2>&1 & } &&
	wait_for "test -s ../ready" 90 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"start-of-$mode-test\"}" >/dev/null &&
	jq -r .id api.body >../ids &&
	for i in $(seq 1 20); do
		api_expect 201 POST /api/v1/tasks "{\"title\": \"$mode-$i\"}" >/dev/null &&
		jq -r .id api.body >>../ids || return 1
	done &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"end-of-$mode-test\"}" >/dev/null &&
	jq -r .id api.body >>../ids &&
	wait_for "test -s ../$mode.out" 120 &&
	cat ../$mode.out &&
	test_grep "^heads $n\$" ../$mode.out &&
	test_grep "^done $n\$" ../$mode.out &&
	test_grep "^lists 1\$" ../$mode.out &&
	test_grep "^ordered yes\$" ../$mode.out &&
	sed -n "s/^seqs //p" ../$mode.out | tr " " "\n" >../got &&
	for id in $(cat ../ids); do
		api_expect 200 GET "/api/v1/tasks/$id/events" >/dev/null &&
		jq -r ".events[] | select(.type == \"task_added\") | .seq" api.body \
			>../want &&
		test_line_count = 1 ../want &&
		grep -qx "$(cat ../want)" ../got || return 1
	done
}

test_expect_success '2000 SSE clients get every event, in order' '
	every_event sse 2000
'

test_expect_success '500 WebSocket clients get every event, in order' '
	every_event ws 500
'

test_expect_success 'the streams closed, the count is back to zero' '
	cd a &&
	restore_http &&
	wait_for "curl -s -H \"Authorization: Bearer $HTTP_TOKEN\" $HTTP_URL/metrics | grep -q \"^baton_stream_clients 0\"" 30
'

test_done
