#!/bin/bash
test_description='baton tui shows agent-written text inert (an escape sequence in the agent output or a task title neither sets the window title, clears the screen nor colours it) stays usable with 1,000 tasks at 200x60, and works against a remote baton serve with its token (a wrong token is a clear error)'
. "$(dirname "$0")/../lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/tui.sh"

command -v tmux >/dev/null || {
	echo "tmux is missing (tools/deps.sh installs it)" >&2
	exit 1
}

# An agent that prints, on every call, sequences that would set the
# window title (OSC 0 and OSC 2), clear the screen, move the cursor home
# and colour the text red, then behaves as the fake agent.
cat >term-agent <<'AGENT'
#!/bin/bash
printf 'before \033]0;PWNED-OUT\007\033]2;PWNED-OUT2\033\\\033[2J\033[H\033[31mREDTEXT\033[0m after\n'
exec "$FAKE_AGENT" "$@"
AGENT
chmod +x term-agent

test_expect_success 'setup: a run of that agent, and a task titled with escapes' '
	make_repo d &&
	baton_init_with_agent d "providers:
  fake: {type: command, command: [\"$TRASH_DIRECTORY/term-agent\"]}" &&
	cd d &&
	"$BATON" task add "$(printf "title \033]0;PWNED-TITLE\007 \033[2J end")" >/dev/null &&
	"$BATON" run "Hostile output" >../run.out 2>&1 &&
	id=$(newest_run) &&
	echo "$id" >../id &&
	grep -l REDTEXT .baton/runs/$id/calls/*.stdout >../calls &&
	test -s ../calls
'

test_expect_success 'the agent output is drawn as text: no title set, no screen cleared, no colour' '
	cd d &&
	id=$(cat ../id) &&
	tui_start 200 60 &&
	tui_wait "output 0" &&
	tui_wait "REDTEXT" &&
	tui_screen >../screen &&
	grep -F "before \\x1b]0;PWNED-OUT\\x07\\x1b]2;PWNED-OUT2\\x1b\\\\x1b[2J\\x1b[H\\x1b[31mREDTEXT\\x1b[0m after" ../screen &&
	head -n 1 ../screen | grep -F "baton tui  runs 1" &&
	title=$(tui display-message -p -t tui "#{pane_title}") &&
	case "$title" in *PWNED*) false ;; esac &&
	tui capture-pane -e -p -t tui >../screen.e &&
	! grep -F "$(printf "\033[31m")" ../screen.e &&
	grep -F "REDTEXT" ../screen.e | grep -vF "$(printf "\033[31m")"
'

test_expect_success 'a task title with escapes is drawn as text too' '
	cd d &&
	tui_keys Tab &&
	tui_wait "[TASKS]" &&
	tui_wait "title \\x1b]0;PWNED-TITLE\\x07 \\x1b[2J end" &&
	title=$(tui display-message -p -t tui "#{pane_title}") &&
	case "$title" in *PWNED*) false ;; esac &&
	head -n 1 ../screen | grep -F "baton tui"
'

# 1,000 tasks: added straight into the SQLite store (one INSERT, where
# `baton task add` a thousand times would take most of a minute); on
# PostgreSQL with `baton task add`.
add_tasks() {
	local db=.baton/baton.db now
	if [ -z "${BATON_TEST_PG_ADMIN:-}" ] && [ -f "$db" ]; then
		now=$(($(date +%s) * 1000))
		sqlite3 "$db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
			INSERT INTO tasks (title, status, created_at, updated_at, version)
			SELECT 'bulk task ' || i, 'queued', $now, $now, 1 FROM n"
	else
		for i in $(seq 1 "$1"); do
			"$BATON" task add "bulk task $i" >/dev/null || return 1
		done
	fi
}

test_expect_success 'with 1,000 more tasks the board follows live and the keys stay quick' '
	cd d &&
	add_tasks 1000 &&
	"$BATON" task list --json | jq length >../n &&
	echo 1001 >../expect &&
	test_cmp ../expect ../n &&
	tui_wait "tasks 1001: queued 1001" 10 &&
	tui_wait "(1 of 1001)" &&
	tui_keys G &&
	tui_wait "(1001 of 1001)" 5 &&
	tui_screen | grep -E "^> t1001 +queued +- +bulk task 1000" &&
	tui_keys g &&
	tui_wait "(1 of 1001)" 5 &&
	tui_keys j j j Down &&
	tui_wait "(5 of 1001)" 5 &&
	tui_keys NPage &&
	tui_wait "of 1001)" 5 &&
	tui_screen | grep -E "^> t[0-9]+ +queued" &&
	test "$(tui_screen | wc -l)" = 60
'

test_expect_success 'a new task shows without a key pressed' '
	cd d &&
	"$BATON" task add "One more task" >/dev/null &&
	tui_wait "tasks 1002: queued 1002" 10 &&
	tui_resize 80 24 &&
	wait_for "test \"\$(tui_screen | wc -l)\" = 24" &&
	tui_wait "(" &&
	tui_screen | awk "length > 80 { exit 1 }" &&
	tui_keys q &&
	wait_for "! tui has-session -t tui 2>/dev/null"
'

test_expect_success 'remote: a wrong token is refused before the screen is taken, naming the URL' '
	make_repo e &&
	baton_init_with_agent e "policies: {require_approval_at_stages: [executing]}" &&
	cd e &&
	serve_http "$TRASH_DIRECTORY/serve-e" --workers 1 &&
	echo "$HTTP_URL" >../url &&
	echo not-the-token >../bad.tok &&
	cd .. &&
	test_expect_code 1 "$BATON" tui --url "$HTTP_URL" --token-file bad.tok 2>err &&
	test_grep -F "baton: tui: '"'"'$HTTP_URL'"'"' refused the token (401): check --token-file" err &&
	test_expect_code 1 "$BATON" tui --url "$HTTP_URL" --token-file missing.tok 2>err2 &&
	test_grep "^baton: --token-file: .*missing.tok" err2 &&
	test_expect_code 2 "$BATON" tui --url "$HTTP_URL" 2>err3 &&
	test_grep "usage: baton tui" err3
'

test_expect_success 'remote: the board follows serve live and a key approves its gate' '
	cd e &&
	url=$(cat ../url) &&
	cp .baton/token ../good.tok &&
	mkdir -p ../elsewhere &&
	cd ../elsewhere &&
	tui_start 80 24 --url "$url" --token-file ../good.tok &&
	tui_wait "$url" &&
	tui_wait "no runs yet" &&
	cd ../e &&
	"$BATON" task add "Remote task" >/dev/null &&
	wait_for "test -n \"\$(newest_run)\"" &&
	id=$(newest_run) &&
	tui_wait "questions: $id before executing" &&
	tui_wait_re "^> $id +waiting_for_approval" &&
	tui_wait "output (not shown over the API)" &&
	tui_keys a &&
	tui_wait "$id: approve, now executing" &&
	wait_for "test \"\$(run_status $id)\" = merge_ready" 60 &&
	"$BATON" events "$id" --json |
		jq -r "select(.type == \"transition\" and .from == \"waiting_for_approval\") | .data.decision" >../actual &&
	echo approve >../expect &&
	test_cmp ../expect ../actual &&
	tui_wait "merge_ready" &&
	tui_wait_re "^> $id +merge_ready" &&
	tui_keys q &&
	wait_for "! tui has-session -t tui 2>/dev/null" &&
	! test -s ../elsewhere/tui.err
'

tui_stop
test_done
