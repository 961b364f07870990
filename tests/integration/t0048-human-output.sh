#!/bin/bash
test_description='human output: terminal escape codes in task titles and agent stderr are shown escaped, an unknown status filter is refused (CLI exit 2, API 400), a run without receipts says so'
. "$(dirname "$0")/../lib/test-lib.sh"

# A title and an agent message that would set the terminal's title (OSC 0
# ... BEL), clear the screen (CSI 2J), move the cursor back (CR) and
# send a C1 CSI (U+009B, as UTF-8), around a valid character (U+2713).
TITLE=$(printf 'Hostile \033]0;owned\007 \033[2J\r \302\233c done \342\234\223')
ESC_AGENT=$TRASH_DIRECTORY/esc-agent

# no_raw_controls FILE: FILE holds no C0 control but newline and tab, no
# DEL and no C1 control (U+0080..U+009F as UTF-8).
no_raw_controls() {
	if LC_ALL=C grep -naP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$1" >raw.lines; then
		echo "no_raw_controls: '$1' has raw control characters:" >&2
		cat -v raw.lines >&2
		return 1
	fi
}

test_expect_success 'setup: an agent whose stderr holds escape codes, and fails' '
	cat >"$ESC_AGENT" <<-EOF &&
	#!/bin/sh
	printf "agent says \\033]0;pwned\\007 \\033[2J\\r \\302\\233c ok \\342\\234\\223\\n" >&2
	exit 1
	EOF
	chmod +x "$ESC_AGENT" &&
	make_repo repo &&
	baton_init_with_agent repo "providers:
  esc: {type: command, command: [\"$ESC_AGENT\"]}
roles: {default: esc}"
'

test_expect_success 'baton run shows the title and agent stderr escaped, with no raw control byte' '
	cd repo &&
	test_expect_code 3 "$BATON" run "$TITLE" >../run.out 2>../run.err &&
	newest_run >../run.id &&
	cat ../run.out ../run.err >../run.all &&
	no_raw_controls ../run.all &&
	test_grep "agent says \\\\x1b\]0;pwned\\\\x07 \\\\x1b\[2J\\\\r \\\\u009bc ok ✓" ../run.all
'

test_expect_success 'show, status, events, approvals, task list and show escape the same text' '
	cd repo &&
	id=$(cat ../run.id) &&
	"$BATON" show "$id" >../show.out 2>&1 &&
	no_raw_controls ../show.out &&
	test_grep "task *Hostile \\\\x1b\]0;owned\\\\x07 \\\\x1b\[2J\\\\r \\\\u009bc done ✓" ../show.out &&
	test_grep "agent says \\\\x1b" ../show.out &&
	"$BATON" status >../status.out 2>&1 &&
	no_raw_controls ../status.out &&
	"$BATON" events "$id" >../events.out 2>&1 &&
	no_raw_controls ../events.out &&
	test_grep "agent says" ../events.out &&
	"$BATON" task add "$TITLE" >../add.out 2>&1 &&
	no_raw_controls ../add.out &&
	test_grep "Hostile \\\\x1b" ../add.out &&
	"$BATON" task list >../tasks.out 2>&1 &&
	no_raw_controls ../tasks.out &&
	test_grep "Hostile \\\\x1b" ../tasks.out &&
	"$BATON" task show 1 >../task.out 2>&1 &&
	no_raw_controls ../task.out &&
	# (cancelled, so that no serve below runs it)
	"$BATON" task cancel 1 >../cancel.out &&
	{ "$BATON" doctor >../doctor.out 2>&1 || :; } &&
	no_raw_controls ../doctor.out &&
	# the JSON output keeps the text itself
	"$BATON" show "$id" --json >../show.json &&
	test_jq ".task == \"$TITLE\"" ../show.json
'

test_expect_success 'a run waiting at a gate: approvals list escapes its title' '
	make_repo gated &&
	baton_init_with_agent gated "policies: {require_approval_at_stages: [planning]}" &&
	cd gated &&
	bg_start "$TRASH_DIRECTORY/gated" "$BATON" run "$TITLE" &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	wait_for_status "$id" waiting_for_approval &&
	"$BATON" approvals >../approvals.out 2>&1 &&
	no_raw_controls ../approvals.out &&
	test_grep "before planning .*Hostile \\\\x1b" ../approvals.out &&
	"$BATON" abort "$id" >/dev/null &&
	bg_wait ../gated >/dev/null &&
	no_raw_controls ../gated.out
'

test_expect_success 'status --status with an unknown status: exit 2, naming the statuses' '
	cd repo &&
	test_expect_code 2 "$BATON" status --status nope >../out 2>../err &&
	test_line_count = 0 ../out &&
	test_grep "unknown status .nope." ../err &&
	test_grep "merge_ready" ../err &&
	test_grep "waiting_for_approval" ../err &&
	"$BATON" status --status failed --json >../failed.json &&
	test_jq "length == 1" ../failed.json &&
	"$BATON" status --status merge_ready >../none.out &&
	test_grep "no runs are merge_ready" ../none.out &&
	test_expect_code 2 "$BATON" task list --status nope >../out 2>../err &&
	test_grep "unknown task status .nope. (queued, running, done, failed, blocked, cancelled)" ../err
'

test_expect_success 'GET /api/v1/runs?status=nope: 400 naming the statuses' '
	cd repo &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	api_expect 400 GET "/api/v1/runs?status=nope" >../e.json &&
	test_jq ".error.code == \"bad_request\"" ../e.json &&
	test_jq ".error.message | test(\"unknown status .nope.\") and test(\"merge_ready\")" ../e.json &&
	api_expect 200 GET "/api/v1/runs?status=failed" >../runs.json &&
	test_jq ".runs | length == 1" ../runs.json &&
	kill "$(cat ../serve.pid)" && bg_wait ../serve >/dev/null
'

test_expect_success 'receipts of a run without receipts: "RUN: no receipts"' '
	cd repo &&
	id=$(cat ../run.id) &&
	"$BATON" receipts "$id" >../receipts.out &&
	echo "$id: no receipts" >../expect &&
	test_cmp ../expect ../receipts.out &&
	"$BATON" receipts "$id" --json >../receipts.json &&
	test_jq "length == 0" ../receipts.json
'

test_done
