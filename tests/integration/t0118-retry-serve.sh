#!/bin/bash
test_description='retries that learn under serve: "try again at 1:50 PM" parks the task until that wall-clock time (tomorrow once it has passed); a permission prompt is not retried by a new run either'
. "$(dirname "$0")/../lib/test-lib.sh"

# The clock times are read in the host's zone: pin it.
TZ=UTC
export TZ

make_repo repo &&
	baton_init_with_agent repo "runtime: {cooldown_seconds: 0}"

# serve_until TASK STATUS: runs serve in the background until the task
# reaches STATUS, then stops it (SIGTERM drains).
serve_until() {
	bg_start serve "$BATON" serve --workers 1 --listen off &&
	wait_for "\"$BATON\" task show $1 --json | jq -e \".status == \\\"$2\\\"\" >/dev/null" 60 &&
	kill -TERM "$(cat serve.pid)" &&
	bg_wait serve 60 >/dev/null
}

# quota_until TASK: the "until" of the quota_wait of the task's run.
quota_until() {
	local run
	run=$("$BATON" task show "$1" --json | jq -r .run) &&
	"$BATON" events "$run" --json |
		jq -r 'select(.type == "quota_wait") | .data.until' | tail -n 1
}

# The epoch second of HH:MM today (UTC), or tomorrow when it has passed.
next_at() {
	local at now
	at=$(date -u -d "today $1" +%s) && now=$(date -u +%s) &&
	if [ "$at" -le "$now" ]; then at=$((at + 86400)); fi &&
	echo "$at"
}

test_expect_success 'a clock time ahead: the task waits until then, today' '
	cd repo &&
	hm=$(date -u -d "+2 hours" +%H:%M) &&
	ampm=$(date -u -d "today $hm" "+%-I:%M %p") &&
	want=$(next_at "$hm") &&
	"$BATON" task add "Limited later" >/dev/null &&
	FAKE_FAIL_STAGE=plan FAKE_FAIL_MODE=exit \
	FAKE_FAIL_MESSAGE="You have hit your usage limit. Try again at $ampm." \
		serve_until 1 blocked &&
	"$BATON" task show 1 --json >../t1.json &&
	test_jq ".block_reason == \"quota_wait\"" ../t1.json &&
	until=$(quota_until 1) &&
	test "$(date -u -d "$until" +%s)" = "$((want + 1))"
'

test_expect_success 'a clock time that has passed today means tomorrow' '
	cd repo &&
	hm=$(date -u -d "-1 hour" +%H:%M) &&
	ampm=$(date -u -d "today $hm" "+%-I:%M %p") &&
	want=$(next_at "$hm") &&
	test "$want" -gt "$(date -u +%s)" &&
	"$BATON" task add "Limited until tomorrow" >/dev/null &&
	FAKE_FAIL_STAGE=plan FAKE_FAIL_MODE=exit \
	FAKE_FAIL_MESSAGE="You have hit your usage limit. Try again at $ampm." \
		serve_until 2 blocked &&
	until=$(quota_until 2) &&
	test "$(date -u -d "$until" +%s)" = "$((want + 1))" &&
	test $(( want - $(date -u +%s) )) -gt $(( 22 * 3600 ))
'

test_expect_success 'a permission prompt: blocked(needs_rework) after one run, not retried' '
	cd repo &&
	"$BATON" task add "Wants /etc" >/dev/null &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit \
	FAKE_FAIL_MESSAGE="Permission required: external_directory (/etc)" \
		serve_until 3 blocked &&
	"$BATON" task show 3 --json >../t3.json &&
	test_jq ".block_reason == \"needs_rework\" and .attempts == 1" ../t3.json &&
	test_grep "a permission failure is never tried again" ../t3.json
'

test_expect_success 'an unknown failure still gets its new runs, until the same failure thrice' '
	cd repo &&
	"$BATON" task add "Always fails" >/dev/null &&
	FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=exit \
		serve_until 4 blocked &&
	"$BATON" task show 4 --json >../t4.json &&
	test_jq ".attempts == 3 and .block_reason == \"needs_rework\"" ../t4.json &&
	test_grep "the same failure 3 times in a row: .*(a model failure, tried again 3 times)" ../t4.json
'

test_done
