#!/bin/bash
test_description='answer links for the questions of the assist pipeline: its report and an escalation, over ntfy'
. "$(dirname "$0")/../lib/test-lib.sh"

python3 "$TEST_DIRECTORY/lib/notify-receiver.py" "$TRASH_DIRECTORY/notes.log" \
	"$TRASH_DIRECTORY/recv.port" >"$TRASH_DIRECTORY/recv.out" 2>&1 &
disown $!
wait_for "test -s '$TRASH_DIRECTORY/recv.port'" 10 || exit 1
RECV=http://127.0.0.1:$(cat "$TRASH_DIRECTORY/recv.port")
PUBLIC=https://baton.example.test

# The scripted assistant of t0034: a plan, then an execute that first
# escalates a choice (recommended B), then writes done.txt.
cat >"$TRASH_DIRECTORY/agent" <<-\AGENT
#!/bin/sh
echo "$BATON_RUN_ID $BATON_STAGE_KIND" >>"$FAKE_STATE/calls"
case "$BATON_STAGE_KIND" in
plan)
	printf '# Plan\n\n1. write done.txt\n' >"$BATON_OUT_DIR/plan.md" ;;
execute)
	n=$(grep -c "^$BATON_RUN_ID execute" "$FAKE_STATE/calls")
	if [ "$n" = 1 ]; then
		cat >"$BATON_OUT_DIR/escalation.json" <<-JSON
		{"question": "Which storage should the notes use?",
		 "options": [
		   {"id": "A", "label": "a JSON file", "tradeoffs": "Pro: simple."},
		   {"id": "B", "label": "SQLite", "recommended": true, "tradeoffs": "Pro: queries."}],
		 "default": "B", "timeout_seconds": 600}
		JSON
		echo "I need a decision"
		exit 0
	fi
	echo "done $n" >done.txt
	echo "wrote done.txt" ;;
esac
AGENT
chmod +x "$TRASH_DIRECTORY/agent"

# ask_kind RUN: the kind of question RUN waits on
ask_kind() {
	"$BATON" show "$1" --json | jq -r ".progress.ask.kind // empty"
}

# note_for RUN TEXT: the newest approval notification of RUN whose text
# has TEXT, as JSON (null when none)
note_for() {
	jq -s "map(select(.kind == \"approval_requested\" and (.text | contains(\"$1\")) and (.text | contains(\"$2\")))) | last" \
		"$TRASH_DIRECTORY/notes.log"
}

# questions_sent: how many approval notifications the receiver got
questions_sent() {
	jq -s "map(select(.kind == \"approval_requested\")) | length" \
		"$TRASH_DIRECTORY/notes.log"
}

# answer URL: opens the link's confirmation page and presses its button
answer() {
	local url=${1/#$PUBLIC/$HTTP_URL}
	test "$(curl -s -o page.html -w "%{http_code}" "$url")" = 200 &&
	test "$(curl -s -o page.html -w "%{http_code}" \
		--data-urlencode "token=${url##*/}" "$url")" = 200
}

test_expect_success 'the questions arrive with their links, and links answer them' '
	make_repo a &&
	baton_init_with_agent a "providers:
  a: {type: command, command: [\"$TRASH_DIRECTORY/agent\"]}
roles: {default: a}
server: {public_url: \"$PUBLIC\"}
notify:
  targets:
    - {url: \"$RECV/ntfy/baton\", format: ntfy, name: phone}" &&
	cd a &&
	serve_http ../serve --workers 1 &&
	bg_start ../run "$BATON" run --pipeline assist "Keep notes for the team" &&
	id=$(wait_for_new_run "") &&
	# the escalation: its own question in the message, with its links
	wait_for "test \"\$(ask_kind $id)\" = escalation && test \"\$(run_status $id)\" = waiting_for_approval" 60 &&
	wait_for "test \"\$(note_for $id \"Which storage\")\" != null" 30 &&
	note_for "$id" "Which storage" >../q1.json &&
	test_jq ".ok and .format == \"ntfy\" and .approve != null and .reject != null" ../q1.json &&
	answer "$(jq -r .approve ../q1.json)" &&
	test_grep "Approved" page.html &&
	# the next question: the report; the escalation s other link does
	# not answer it
	wait_for "test \"\$(ask_kind $id)\" = feedback && test \"\$(run_status $id)\" = waiting_for_approval" 60 &&
	wait_for "test \$(questions_sent) = 2" 30 &&
	url1=$(jq -r .reject ../q1.json) &&
	url1=${url1/#$PUBLIC/$HTTP_URL} &&
	test "$(curl -s -o page.html -w "%{http_code}" "$url1")" = 409 &&
	test "$(ask_kind "$id")" = feedback &&
	jq -s "map(select(.kind == \"approval_requested\")) | last" ../notes.log >../q2.json &&
	answer "$(jq -r .approve ../q2.json)" &&
	test "$(bg_wait ../run 60)" = 0 &&
	test "$(run_status "$id")" = completed &&
	"$BATON" events "$id" --json |
		jq -s "map(select(.type == \"transition\" and .from == \"waiting_for_approval\") | .data.by)" >../by.json &&
	test_jq ". == [\"link:phone\", \"link:phone\"]" ../by.json
'

test_done
