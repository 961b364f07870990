#!/bin/bash
test_description='webhooks go out whether or not serve listens for HTTP'
. "$(dirname "$0")/../lib/test-lib.sh"

# A webhook receiver on 127.0.0.1: one line per POST in hooks.log,
# "KIND RUN STATUS". It writes its port to hook.port once it listens.
cat >"$TRASH_DIRECTORY/receiver.py" <<'PY'
import http.server, json, sys

log_path, port_path = sys.argv[1], sys.argv[2]

class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        note = json.loads(body)
        with open(log_path, "a") as f:
            f.write("%s %s %s\n" % (self.headers.get("X-Baton-Event"),
                                    note.get("run"), note.get("status")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass

srv = http.server.HTTPServer(("127.0.0.1", 0), Hook)
with open(port_path + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(port_path + ".tmp", port_path)
srv.serve_forever()
PY
python3 "$TRASH_DIRECTORY/receiver.py" "$TRASH_DIRECTORY/hooks.log" \
	"$TRASH_DIRECTORY/hook.port" >"$TRASH_DIRECTORY/receiver.out" 2>&1 &
disown $! # the cleanup kills it (its environment names this script)
wait_for "test -s '$TRASH_DIRECTORY/hook.port'" 10 || {
	cat "$TRASH_DIRECTORY/receiver.out" >&2
	exit 1
}
HOOK_URL=http://127.0.0.1:$(cat "$TRASH_DIRECTORY/hook.port")/hook

# repo_with_hook DIR [EXTRA_YAML]: a repository whose one webhook is the
# receiver above, for run_terminal only.
repo_with_hook() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "runtime: {judge: false}
notify: {webhooks: [{url: \"$HOOK_URL\", events: [run_terminal]}]}
${2:-}"
}

# serve_until_notified NAME RUN [SERVE ARGS...]: in the current repo,
# starts serve, waits until the receiver has RUN's run_terminal
# notification, then stops serve (two SIGTERMs: drain, stop).
serve_until_notified() {
	local name=$1 run=$2
	shift 2
	bg_start "$TRASH_DIRECTORY/$name" "$@" &&
	wait_for "grep -q \"^run_terminal $run merge_ready\$\" '$TRASH_DIRECTORY/hooks.log'" 60
	local rc=$?
	kill -TERM "$(cat "$TRASH_DIRECTORY/$name.pid")" 2>/dev/null
	bg_wait "$TRASH_DIRECTORY/$name" 60 >/dev/null
	return $rc
}

test_expect_success 'serve --listen off sends webhooks' '
	repo_with_hook off &&
	cd off &&
	"$BATON" task add "first task" >/dev/null &&
	serve_until_notified serve-off r1-first-task \
		"$BATON" serve --listen off --workers 1 &&
	test_grep ! "dashboard at" ../serve-off.out &&
	test_grep "serve: webhooks to 1 URL (notify.webhooks)" ../serve-off.out
'

test_expect_success 'server.listen: off in the config sends webhooks' '
	repo_with_hook cfgoff "server: {listen: \"off\"}" &&
	cd cfgoff &&
	"$BATON" task add "second task" >/dev/null &&
	serve_until_notified serve-cfgoff r1-second-task \
		"$BATON" serve --workers 1
'

test_expect_success 'BATON_LISTEN=off sends webhooks' '
	repo_with_hook envoff &&
	cd envoff &&
	"$BATON" task add "third task" >/dev/null &&
	serve_until_notified serve-envoff r1-third-task \
		env BATON_LISTEN=off "$BATON" serve --workers 1
'

test_expect_success 'with HTTP on, webhooks go out too' '
	repo_with_hook httpon &&
	cd httpon &&
	"$BATON" task add "fourth task" >/dev/null &&
	serve_until_notified serve-on r1-fourth-task \
		env BATON_LISTEN=127.0.0.1:0 "$BATON" serve --workers 1 &&
	test_grep "dashboard at" ../serve-on.out
'

test_done
