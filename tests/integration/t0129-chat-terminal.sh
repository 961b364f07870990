#!/bin/bash
test_description='baton chat in a terminal (tmux): the planner asks, proposes a plan, /start queues it, progress is reported; on the local store and against a remote serve with its token; bad commands and modes are told, a conversation is taken up again'
. "$(dirname "$0")/../lib/test-lib.sh"
. "$TEST_DIRECTORY/lib/tui.sh"

command -v tmux >/dev/null || {
	echo "tmux is missing (tools/deps.sh installs it)" >&2
	exit 1
}

P=$FAKE_STATE/chat
mkdir -p "$P"
cat >"$TRASH_DIRECTORY/planner.sh" <<-\EOF
#!/bin/sh
P=$FAKE_STATE/chat
cat >/dev/null
case $(cat "$P/mode") in
ask) echo "Which format, CSV or JSON?" ;;
plan) printf 'Two steps.\n\n```json\n{"tasks": [{"key": "a", "title": "Add the parser"}, {"key": "b", "title": "Use it", "depends_on": ["a"]}]}\n```\n---PLAN_READY---\n' ;;
esac
EOF
chmod +x "$TRASH_DIRECTORY/planner.sh"

# chat_open [ARG...]: `baton chat ARG...` in a 120x40 tmux pane
chat_open() {
	tui_stop
	local args=""
	for a in "$@"; do args="$args '$a'"; done
	tui new-session -d -s tui -x 120 -y 40 \
		"cd '$PWD' && '$BATON' chat$args 2>'$PWD/chat.err'; echo EXITED \$?; sleep 600" \; \
		set -g status off || return 1
	tui_wait "] >" 20
}

test_expect_success 'setup' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  fake: {type: command, command: [\"$FAKE_AGENT\"]}
  planner: {type: command, command: [\"$TRASH_DIRECTORY/planner.sh\"]}
roles: {default: fake, planner: planner}
runtime: {judge: false}"
'

test_expect_success 'local: greeting, a question, a plan, /start direct, the tasks queued' '
	cd repo &&
	chat_open &&
	tui_wait "conversation 1" &&
	tui_wait "planner: Hello." &&
	tui_wait "[greeting] >" &&
	echo ask >"$P/mode" &&
	tui_type "I want an export" && tui_keys Enter &&
	tui_wait "planner: Which format, CSV or JSON?" &&
	tui_wait "[requirement_gathering] >" &&
	echo plan >"$P/mode" &&
	tui_type "JSON" && tui_keys Enter &&
	tui_wait "The plan is ready: 2 tasks." &&
	tui_wait "Type /start direct" &&
	tui_wait "[plan_proposal] >" &&
	! tui_screen | grep -q PLAN_READY &&
	tui_type "/start yolo" && tui_keys Enter &&
	wait_for "grep -q \"mode must be one of direct, local, github, not .yolo.\" chat.err" 10 &&
	tui_type "/frobnicate" && tui_keys Enter &&
	wait_for "grep -q \"unknown command ./frobnicate.\" chat.err" 10 &&
	tui_type "/start direct" && tui_keys Enter &&
	tui_wait "Queued 2 tasks (plan 1, mode Direct)" &&
	tui_wait "[monitoring] >" &&
	tui_type "/start local" && tui_keys Enter &&
	wait_for "grep -q \"started already\" chat.err" 10 &&
	"$BATON" task list --json >tasks.json &&
	test_jq "length == 2 and ([.[].origin] | unique) == [\"chat-direct\"]" tasks.json &&
	tui_type "/quit" && tui_keys Enter &&
	tui_wait "EXITED 0" &&
	tui_stop
'

test_expect_success 'local: progress is reported once the tasks finish' '
	cd repo &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1 &&
	wait_for "\"$BATON\" task list --json | jq -e \"[.[].status] == [\\\"done\\\", \\\"done\\\"]\" >/dev/null" 120 &&
	chat_open --conversation=1 &&
	tui_wait "you: I want an export" &&
	tui_wait "All 2 tasks have finished." &&
	tui_stop
'

test_expect_success 'remote: the same conversation over serve with its token' '
	cd repo &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	chat_open --url="$HTTP_URL" --token-file=.baton/token &&
	tui_wait "conversation 2" &&
	echo ask >"$P/mode" &&
	tui_type "Another feature" && tui_keys Enter &&
	tui_wait "planner: Which format, CSV or JSON?" &&
	echo plan >"$P/mode" &&
	tui_type "CSV" && tui_keys Enter &&
	tui_wait "The plan is ready: 2 tasks." &&
	tui_type "/start github" && tui_keys Enter &&
	wait_for "grep -q \"needs a forge\" chat.err" 10 &&
	tui_type "/start local" && tui_keys Enter &&
	tui_wait "Queued 2 tasks (plan 2, mode Local Git)" &&
	tui_wait "[monitoring] >" &&
	tui_type "/quit" && tui_keys Enter &&
	tui_wait "EXITED 0" &&
	tui_stop
'

test_expect_success 'remote: a wrong token and an unknown conversation are told' '
	cd repo &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	echo nope >bad-token &&
	test_expect_code 1 "$BATON" chat --url="$HTTP_URL" --token-file=bad-token </dev/null 2>err &&
	test_grep "refused the token (401)" err &&
	test_expect_code 1 "$BATON" chat --url="$HTTP_URL" --token-file=.baton/token --conversation=99 </dev/null 2>err &&
	test_grep "no conversation 99" err &&
	test_expect_code 1 "$BATON" chat --conversation=99 </dev/null 2>err &&
	test_grep "no conversation 99" err &&
	test_expect_code 2 "$BATON" chat --conversation=x </dev/null 2>err &&
	test_grep "not a conversation id" err
'

test_done
