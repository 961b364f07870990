# tui.sh: drives `baton tui` in a private tmux server, for the tests of
# the terminal UI (t0119-t0121). Source it after test-lib.sh.
#
#   tui_start COLS ROWS [ARG...]
#                         starts `baton tui ARG...` in the current
#                         directory in a detached tmux session of that
#                         size (no status line, so the pane is the whole
#                         window); its stderr goes to ./tui.err
#   tui_screen            the pane's text now (capture-pane)
#   tui_wait TEXT [SECS]  waits until TEXT (fixed string) is on the screen
#   tui_wait_re RE [SECS] waits until a line of the screen matches RE
#                         (grep -E): the TUI redraws from the events as
#                         they reach it, so one part of the frame may
#                         show a state before another does
#   tui_gone TEXT [SECS]  waits until TEXT is no longer on the screen
#   tui_keys KEY...       tmux send-keys (names such as Enter, Tab, Escape)
#   tui_type TEXT         sends TEXT literally (send-keys -l)
#   tui_resize COLS ROWS  resizes the window (the TUI gets SIGWINCH)
#   tui_stop              ends the tmux server
#
# Every wait is bounded (wait_for); none sleeps a fixed time.

TUI_SOCK=baton-tui-$$

tui() {
	tmux -L "$TUI_SOCK" -f /dev/null "$@"
}

tui_start() {
	local cols=$1 rows=$2 args=""
	shift 2
	for a in "$@"; do args="$args '$a'"; done
	tui new-session -d -s tui -x "$cols" -y "$rows" \
		"cd '$PWD' && exec '$BATON' tui$args 2>'$PWD/tui.err'" \; \
		set -g status off \; set -g window-size manual \; \
		resize-window -t tui -x "$cols" -y "$rows" || return 1
	wait_for "tui_screen | grep -qF 'q:quit'" 20
}

tui_screen() {
	tui capture-pane -p -t tui
}

# _tui_seen HOW PATTERN SECS FAILED: waits until grep HOW (-F, -E)
# finds PATTERN on the screen; else says FAILED and shows the screen.
_tui_seen() {
	_tui_how=$1 _tui_want=$2
	wait_for 'tui_screen | grep -q "$_tui_how" -e "$_tui_want"' "$3" || {
		echo "$4; the screen:" >&2
		tui_screen >&2
		return 1
	}
}

tui_wait() {
	_tui_seen -F "$1" "${2:-30}" "tui_wait: '$1' never appeared"
}

tui_wait_re() {
	_tui_seen -E "$1" "${2:-30}" "tui_wait_re: nothing matched '$1'"
}

tui_gone() {
	_tui_want=$1
	wait_for '! tui_screen | grep -qF -e "$_tui_want"' "${2:-30}" || {
		echo "tui_gone: '$1' stayed; the screen:" >&2
		tui_screen >&2
		return 1
	}
}

tui_keys() {
	tui send-keys -t tui "$@"
}

tui_type() {
	tui send-keys -t tui -l "$1"
}

tui_resize() {
	tui resize-window -t tui -x "$1" -y "$2"
}

tui_stop() {
	tui kill-server 2>/dev/null || true
}
