#!/bin/bash
test_description='thousands of SSE clients on one serve: every one gets every event, in order'
. "$(dirname "$0")/../lib/test-lib.sh"

# restore_http: the serve's address and token (serve_http set them in
# the setup's own shell), in a test that runs in a/
restore_http() {
	HTTP_PORT=$(cat ../port) &&
	HTTP_URL=http://127.0.0.1:$HTTP_PORT &&
	HTTP_TOKEN=$(cat .baton/token)
}

STREAMS=$BATON_SRC_ROOT/tests/lib/streams.py
N=2000

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

test_expect_success "$N SSE clients get every event, in order" '
	cd a &&
	restore_http &&
	{ python3 "$STREAMS" "$HTTP_PORT" "$HTTP_TOKEN" $N sse ../ready \
		../sse.out --from start-of-stream-test \
		--until end-of-stream-test --timeout 120 \
		>../sse.log 2>&1 & } &&
	wait_for "test -s ../ready" 90 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"start-of-stream-test\"}" >/dev/null &&
	jq -r .id api.body >../ids &&
	for i in $(seq 1 20); do
		api_expect 201 POST /api/v1/tasks "{\"title\": \"t$i\"}" >/dev/null &&
		jq -r .id api.body >>../ids || return 1
	done &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"end-of-stream-test\"}" >/dev/null &&
	jq -r .id api.body >>../ids &&
	wait_for "test -s ../sse.out" 120 &&
	cat ../sse.out &&
	test_grep "^heads $N\$" ../sse.out &&
	test_grep "^done $N\$" ../sse.out &&
	test_grep "^lists 1\$" ../sse.out &&
	test_grep "^ordered yes\$" ../sse.out &&
	sed -n "s/^seqs //p" ../sse.out | tr " " "\n" >../got &&
	for id in $(cat ../ids); do
		api_expect 200 GET "/api/v1/tasks/$id/events" >/dev/null &&
		jq -r ".events[] | select(.type == \"task_added\") | .seq" api.body \
			>../want &&
		test_line_count = 1 ../want &&
		grep -qx "$(cat ../want)" ../got || return 1
	done
'

test_expect_success 'the streams closed, the count is back to zero' '
	cd a &&
	restore_http &&
	wait_for "curl -s -H \"Authorization: Bearer $HTTP_TOKEN\" $HTTP_URL/metrics | grep -q \"^baton_stream_clients 0\"" 30
'

test_done
