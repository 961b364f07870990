#!/bin/bash
test_description='schedules: serve makes a task per cron slot, once per slot across restarts and serves, skips or catches up missed slots, and reports'
. "$(dirname "$0")/../lib/test-lib.sh"

export TZ=UTC
# faketime preloads itself ahead of an ASan build's runtime (make asan):
# let it, as t0101 does
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

# A webhook receiver: one line per POST in hooks.log, "KIND TITLE-OR-RUN
# STATUS-OR-ERROR".
cat >"$TRASH_DIRECTORY/receiver.py" <<'PY'
import http.server, json, os, sys

log_path, port_path = sys.argv[1], sys.argv[2]

class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        note = json.loads(body)
        ev = note.get("event") or {}
        data = ev.get("data") or {}
        with open(log_path, "a") as f:
            f.write("%s|%s|%s|%s\n" % (self.headers.get("X-Baton-Event"),
                    data.get("schedule") or note.get("run"),
                    data.get("slot") or note.get("status"),
                    note.get("reason")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass

srv = http.server.HTTPServer(("127.0.0.1", 0), Hook)
with open(port_path + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(port_path + ".tmp", port_path)
srv.serve_forever()
PY
python3 "$TRASH_DIRECTORY/receiver.py" "$TRASH_DIRECTORY/hooks.log" \
	"$TRASH_DIRECTORY/hook.port" >"$TRASH_DIRECTORY/receiver.out" 2>&1 &
disown $!
wait_for "test -s '$TRASH_DIRECTORY/hook.port'" 10 || exit 1
HOOK_URL=http://127.0.0.1:$(cat "$TRASH_DIRECTORY/hook.port")/hook

# On PostgreSQL the process clock follows the database's (store_clock_sync),
# which faketime does not move: the faked-time cases run on SQLite only.
if [ -z "${BATON_TEST_PG_ADMIN:-}" ]; then FAKED=1; else FAKED=; fi

sched_config() {
	cat <<-EOF
	runtime: {judge: false}
	notify: {webhooks: [{url: "$HOOK_URL", events: [schedule, run_terminal]}]}
	schedules:
	  - name: nightly
	    cron: "0 3 * * *"
	    task: {title: "Nightly {slot}", body: "Update the dependencies"}
	    missed: catch_up
	  - name: skipper
	    cron: "0 3 * * *"
	    task: {title: "Skipper {slot}"}
	    missed: skip
	  - name: broken
	    cron: "0 3 * * *"
	    task: {title: "Broken {slot}"}
	    pipeline: no-such-pipeline
	EOF
}

# serve_at NAME TIME: serve under faketime, from TIME on (the clock runs).
serve_at() {
	bg_start "$TRASH_DIRECTORY/$1" faketime -f "@$2" "$BATON" serve \
		--listen off --workers 1
}

# The faketime wrapper, killed, leaves its semaphore and shared memory
# (named by its pid) in /dev/shm; a later wrapper that gets the same pid
# then fails with "sem_open: File exists".
stop_serve() {
	local pid
	pid=$(cat "$TRASH_DIRECTORY/$1.pid")
	kill -TERM "$pid" 2>/dev/null
	bg_wait "$TRASH_DIRECTORY/$1" 60 >/dev/null
	rm -f "/dev/shm/faketime_shm_$pid" "/dev/shm/sem.faketime_sem_$pid"
	return 0
}

titles() {
	"$BATON" task list --json | jq -r ".[].title" | sort
}

test_expect_success 'a bad cron expression is refused, naming file:line:col and the key' '
	make_repo bad &&
	baton_init_with_agent bad "schedules:
  - name: typo
    cron: \"0 25 * * *\"
    task: {title: T}" &&
	cd bad &&
	test_must_fail "$BATON" schedule list 2>../bad.err &&
	test_grep "config.yaml:[0-9]*:11: schedules\[0\].cron: bad cron expression .0 25 \* \* \*.: hour .25. is out of range 0-23" ../bad.err &&
	test_must_fail "$BATON" serve --listen off 2>../bad-serve.err &&
	test_grep "schedules\[0\].cron: bad cron expression" ../bad-serve.err
'

test_expect_success 'baton schedule list shows each schedule and its next slots' '
	make_repo repo &&
	baton_init_with_agent repo "$(sched_config)" &&
	cd repo &&
	faketime -f "@2026-01-05 02:59:00" "$BATON" schedule list >../list.out &&
	test_grep "^nightly  \"0 3 \* \* \*\"  missed: catch_up  pipeline: feature" ../list.out &&
	test_grep "^  next: 2026-01-05T03:00:00.000Z" ../list.out &&
	test_grep "^  next: 2026-01-06T03:00:00.000Z" ../list.out &&
	"$BATON" schedule list --json >../list.json &&
	jq -e ".[1].name == \"skipper\" and .[1].missed == \"skip\" and (.[1].next | length) == 3" ../list.json >/dev/null
'

if [ -n "$FAKED" ]; then
test_expect_success 'serve makes the slot'\''s tasks on time, and reports start, completion and errors' '
	cd repo &&
	serve_at serve1 "2026-01-05 02:59:52" &&
	wait_for "grep -q \"^run_terminal|r[0-9]*-nightly\" \"$TRASH_DIRECTORY/hooks.log\"" 90 &&
	stop_serve serve1 &&
	titles >../titles1 &&
	printf "%s\n" "Nightly 2026-01-05 03:00 UTC" "Skipper 2026-01-05 03:00 UTC" >../want1 &&
	test_cmp ../want1 ../titles1 &&
	"$BATON" task list --json | jq -e "all(.[]; .origin == \"schedule\")" >/dev/null &&
	"$BATON" events --all --json </dev/null >../ev1 &&
	test "$(jq -s "map(select(.type == \"schedule_fired\")) | length" ../ev1)" = 2 &&
	jq -s -e "map(select(.type == \"schedule_failed\"))[0].data | .schedule == \"broken\" and (.error | contains(\"no-such-pipeline\"))" ../ev1 >/dev/null &&
	grep -q "^schedule|nightly|2026-01-05T03:00:00.000Z|" ../hooks.log &&
	grep -q "^schedule|skipper|2026-01-05T03:00:00.000Z|" ../hooks.log &&
	grep -q "^schedule|broken|2026-01-05T03:00:00.000Z|.*no-such-pipeline" ../hooks.log
'

test_expect_success 'a restart in the same slot makes nothing again' '
	cd repo &&
	serve_at serve2 "2026-01-05 03:00:30" &&
	wait_for "grep -q \"schedule nightly: slot 2026-01-05T03:00:00.000Z was made elsewhere\" ../serve2.out" 30 &&
	wait_for "grep -q \"schedule skipper: slot 2026-01-05T03:00:00.000Z was made elsewhere\" ../serve2.out" 30 &&
	stop_serve serve2 &&
	titles >../titles2 &&
	test_cmp ../want1 ../titles2 &&
	"$BATON" events --all --json </dev/null >../ev2 &&
	test "$(jq -s "map(select(.type == \"schedule_fired\")) | length" ../ev2)" = 2
'

test_expect_success 'after a downtime: catch_up makes only the latest missed slot, skip makes none' '
	cd repo &&
	serve_at serve3 "2026-01-07 05:00:00" &&
	wait_for "grep -q \"schedule skipper: slot 2026-01-07T03:00:00.000Z was missed while serve was down: skipped\" ../serve3.out" 30 &&
	wait_for "test \"\$(\"\$BATON\" task list --json | jq length)\" = 3" 30 &&
	stop_serve serve3 &&
	titles >../titles3 &&
	printf "%s\n" "Nightly 2026-01-05 03:00 UTC" "Nightly 2026-01-07 03:00 UTC" \
		"Skipper 2026-01-05 03:00 UTC" >../want3 &&
	test_cmp ../want3 ../titles3 &&
	"$BATON" events --all --json </dev/null >../ev3 &&
	jq -s -e "map(select(.type == \"schedule_fired\")) | last | .data | .schedule == \"nightly\" and .missed == true" ../ev3 >/dev/null
'
fi

# Two serves of two clones on one store: each slot's task once. With
# faked time the slot comes in seconds; on PostgreSQL it is the next
# real minute.
test_expect_success 'two serves on one store make each slot once' '
	make_repo a &&
	if [ -n "$FAKED" ]; then cron="0 3 * * *"; else cron="* * * * *"; fi &&
	baton_init_with_agent a "runtime: {judge: false}
schedules:
  - name: both
    cron: \"$cron\"
    task: {title: \"Both {slot}\"}" &&
	store=$(sed -n "s/^store: *//p" a/.baton/config.yaml) &&
	if [ -z "$store" ]; then store=$TRASH_DIRECTORY/a/.baton/baton.db; fi &&
	git clone -q a b &&
	(cd b && "$BATON" init >/dev/null) &&
	grep -v "^store:" a/.baton/config.yaml >b/.baton/config.yaml &&
	echo "store: $store" >>b/.baton/config.yaml &&
	if [ -n "$FAKED" ]; then
		(cd a && bg_start "$TRASH_DIRECTORY/sa" faketime -f "@2026-02-01 02:59:55" "$BATON" serve --listen off --workers 1) &&
		(cd b && bg_start "$TRASH_DIRECTORY/sb" faketime -f "@2026-02-01 02:59:55" "$BATON" serve --listen off --workers 1)
	else
		(cd a && bg_start "$TRASH_DIRECTORY/sa" "$BATON" serve --listen off --workers 1) &&
		(cd b && bg_start "$TRASH_DIRECTORY/sb" "$BATON" serve --listen off --workers 1)
	fi &&
	wait_for "grep -q \"schedule both: slot .* made task\" sa.out sb.out" 90 &&
	wait_for "grep -q \"schedule both: slot .* was made elsewhere\" sa.out sb.out" 30 &&
	stop_serve sa && stop_serve sb &&
	cat sa.out sb.out | sed -n "s/.*schedule both: slot \([^ ]*\) made task.*/\1/p" | sort >made &&
	test "$(wc -l <made)" -ge 1 &&
	test "$(uniq -d made | wc -l)" = 0 &&
	(cd a && "$BATON" task list --json) >tasks &&
	test "$(jq "map(.title) | length" tasks)" = "$(jq "map(.title) | unique | length" tasks)" &&
	test "$(jq length tasks)" = "$(wc -l <made)"
'

test_done
