#!/bin/bash
test_description='answer links against the agent: it cannot read the key, so cannot mint a link'
. "$(dirname "$0")/../lib/test-lib.sh"

if ! bwrap --die-with-parent --unshare-pid --ro-bind / / --dev /dev \
	--proc /proc --tmpfs /tmp --unshare-net -- true 2>/dev/null; then
	echo "skipped: bwrap cannot make a sandbox here"
	echo "0 passed, 0 failed"
	exit 0
fi

python3 "$TEST_DIRECTORY/lib/notify-receiver.py" "$TRASH_DIRECTORY/notes.log" \
	"$TRASH_DIRECTORY/recv.port" >"$TRASH_DIRECTORY/recv.out" 2>&1 &
disown $!
wait_for "test -s '$TRASH_DIRECTORY/recv.port'" 10 || exit 1
RECV=http://127.0.0.1:$(cat "$TRASH_DIRECTORY/recv.port")
HOSTILE=$TEST_DIRECTORY/lib/hostile-agent

# mint KEY RUN SEQ DECISION: a token made as answer.c makes one
mint() {
	python3 - "$@" <<'PY'
import base64, hashlib, hmac, sys
key, run, seq, decision = sys.argv[1:5]
payload = ("v1|%s|%s|%s|4102444800|ops" % (run, seq, decision)).encode()
b64 = lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")
print(b64(payload) + "." + b64(hmac.new(key.encode(), payload, hashlib.sha256).digest()))
PY
}

test_expect_success 'the agent in the sandbox cannot read the answer key' '
	make_repo a &&
	baton_init_with_agent a "providers:
  bad: {type: command, command: [\"$HOSTILE\"], env: {HOSTILE_MODE: answerkey}}
roles: {default: bad}
execution: {sandbox: bwrap}
policies: {require_approval_at_stages: [executing]}
server: {public_url: \"https://baton.example.test\"}
notify:
  targets:
    - {url: \"$RECV/slack/a\", format: slack, name: ops}" &&
	cd a &&
	serve_http ../serve --workers 1 &&
	test "$(stat -c %a .baton/answer.key)" = 600 &&
	bg_start ../run "$BATON" run "Gated task" &&
	id=$(wait_for_new_run "") &&
	wait_for_status "$id" waiting_for_approval &&
	test_line_count = 3 "$FAKE_STATE/hostile.answerkey" &&
	test "$(grep -c "^answer.key: unreadable via" "$FAKE_STATE/hostile.answerkey")" = 3 &&
	test_path_is_missing "$FAKE_STATE/stolen.key" &&
	# nor is it anywhere the agent or a receiver sees
	key=$(cat .baton/answer.key) &&
	wt=$(run_field "$id" worktree) &&
	! grep -rqF "$key" "$wt" "$FAKE_STATE" ../notes.log &&
	"$BATON" events "$id" --json >../events.json &&
	! grep -qF "$key" ../events.json
'

test_expect_success 'a link minted without the key is refused; with it, the same minting works' '
	cd a &&
	id=$(newest_run) &&
	url=$(sed "s|/$||" .baton/http.url) &&
	seq=$("$BATON" events "$id" --json |
		jq -s "map(select(.type == \"transition\" and .to == \"waiting_for_approval\")) | last | .seq") &&
	guess=$(mint "0000000000000000000000000000000000000000000000000000000000000000" "$id" "$seq" approve) &&
	code=$(curl -s -o page.html -w "%{http_code}" --data-urlencode "token=$guess" "$url/api/v1/answers/$guess") &&
	test "$code" = 403 &&
	test "$(run_status "$id")" = waiting_for_approval &&
	# the token minted the same way with the real key opens the page, so
	# the refusal above is the key, not the minting
	real=$(mint "$(cat .baton/answer.key)" "$id" "$seq" approve) &&
	test "$(curl -s -o page.html -w "%{http_code}" "$url/api/v1/answers/$real")" = 200 &&
	test_grep ">Approve</button>" page.html &&
	# a link of an earlier question of the run (another seq) is refused
	old=$(mint "$(cat .baton/answer.key)" "$id" 1 approve) &&
	test "$(curl -s -o page.html -w "%{http_code}" "$url/api/v1/answers/$old")" = 409 &&
	"$BATON" abort "$id" >/dev/null
'

test_done
