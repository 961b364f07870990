#!/bin/bash
test_description='answer links: a confirmation page, then one decision; expired, reused and forged links refused'
. "$(dirname "$0")/../lib/test-lib.sh"

python3 "$TEST_DIRECTORY/lib/notify-receiver.py" "$TRASH_DIRECTORY/notes.log" \
	"$TRASH_DIRECTORY/recv.port" >"$TRASH_DIRECTORY/recv.out" 2>&1 &
disown $!
wait_for "test -s '$TRASH_DIRECTORY/recv.port'" 10 || {
	cat "$TRASH_DIRECTORY/recv.out" >&2
	exit 1
}
RECV=http://127.0.0.1:$(cat "$TRASH_DIRECTORY/recv.port")
# The links name the public URL a proxy would answer under; the test is
# that proxy: it sends them to serve with the public Host.
PUBLIC=https://baton.example.test

# gated_repo NAME [EXTRA_YAML]: a gate before execute, one Slack target
# "ops" (the receiver), public_url set
gated_repo() {
	make_repo "$1" &&
	baton_init_with_agent "$1" "policies: {require_approval_at_stages: [executing]}
server: {public_url: \"$PUBLIC\"}
notify:
  targets:
    - {url: \"$RECV/slack/$1\", format: slack, name: ops}
${2:-}"
}

# link RUN approve|reject: the link the receiver got for RUN's newest
# question, made local (the public URL replaced by serve's own)
link() {
	jq -rs "map(select(.path == \"/slack/$REPO\" and .kind == \"approval_requested\" and (.text | contains(\"$1\"))))
		| last | .$2" "$TRASH_DIRECTORY/notes.log" |
		sed "s|^$PUBLIC|$HTTP_URL|"
}

# in_repo NAME: into repository NAME, whose serve is up (each test body
# is a subshell of its own: what serve_http set is gone)
in_repo() {
	cd "$TRASH_DIRECTORY/$1" &&
	REPO=$1 &&
	HTTP_URL=$(sed 's|/$||' .baton/http.url)
}

# fetch METHOD URL [FORM]: the page in page.html, the status printed
fetch() {
	curl -s -o page.html -w "%{http_code}" -X "$1" \
		-H "Host: baton.example.test" \
		${3+--data-urlencode "$3"} "$2"
}

# token_of URL: the last path segment
token_of() {
	printf "%s\n" "${1##*/}"
}

# start_gate NAME TASK: serve, a run of TASK waiting at the gate and its
# question notified; the run's id in ../NAME.id
start_gate() {
	bg_start "../run-$1" "$BATON" run "$2" &&
	id=$(wait_for_new_run "$(cat ../last 2>/dev/null)") &&
	echo "$id" >../last &&
	echo "$id" >"../$1.id" &&
	wait_for_status "$id" waiting_for_approval &&
	wait_for "test -n \"\$(link $id approve)\"" 30
}

test_expect_success 'GET opens a confirmation page and decides nothing' '
	REPO=a && gated_repo a &&
	cd a &&
	serve_http ../serve-a --workers 1 &&
	start_gate first "First gated task" &&
	id=$(cat ../first.id) &&
	url=$(link "$id" approve) &&
	test "$(fetch GET "$url")" = 200 &&
	test_grep "<form method=\"post\">" page.html &&
	test_grep "name=\"token\" value=\"$(token_of "$url")\"" page.html &&
	test_grep "First gated task" page.html &&
	test_grep ">Approve</button>" page.html &&
	# an unfurler fetches it again: still nothing decided
	test "$(fetch GET "$url")" = 200 &&
	sleep 1 &&
	test "$(run_status "$id")" = waiting_for_approval &&
	# the page runs no script, and is not cached
	curl -s -D headers.txt -o /dev/null "$url" &&
	test_grep -i "content-security-policy: default-src .none." headers.txt &&
	test_grep -i "cache-control: no-store" headers.txt
'

test_expect_success 'a POST without the confirmation form decides nothing' '
	in_repo a &&
	id=$(cat ../first.id) &&
	url=$(link "$id" approve) &&
	test "$(fetch POST "$url")" = 400 &&
	test_grep "press its button" page.html &&
	test "$(fetch POST "$url" "token=wrong")" = 400 &&
	test "$(run_status "$id")" = waiting_for_approval
'

test_expect_success 'forged links are refused: a bad signature, a swapped decision' '
	in_repo a &&
	id=$(cat ../first.id) &&
	url=$(link "$id" approve) &&
	rej=$(link "$id" reject) &&
	tok=$(token_of "$url") &&
	# one character of the signature changed
	sig=${tok#*.} &&
	c=${sig:5:1} && if [ "$c" = A ]; then c=B; else c=A; fi &&
	bad=${tok%%.*}.${sig:0:5}$c${sig:6} &&
	test "$(fetch POST "$HTTP_URL/api/v1/answers/$bad" "token=$bad")" = 403 &&
	test_grep "signature does not hold" page.html &&
	# the reject payload under the approve signature
	rtok=$(token_of "$rej") &&
	swap=${rtok%%.*}.${tok#*.} &&
	test "$(fetch POST "$HTTP_URL/api/v1/answers/$swap" "token=$swap")" = 403 &&
	# a payload written by hand (the run, a far expiry) signed with junk
	payload=$(printf "v1|%s|1|approve|4102444800|ops" "$id" | base64 -w0 | tr "+/" "-_" | tr -d "=") &&
	mine=$payload.$(printf "%043d" 0 | tr 0 A) &&
	test "$(fetch POST "$HTTP_URL/api/v1/answers/$mine" "token=$mine")" = 403 &&
	test "$(run_status "$id")" = waiting_for_approval
'

test_expect_success 'junk in the path: traversal, a huge token, bad characters' '
	in_repo a &&
	id=$(cat ../first.id) &&
	# libmicrohttpd decodes %2f: no route, no token, 401
	code=$(fetch GET "$HTTP_URL/api/v1/answers/..%2f..%2fanswer.key") &&
	case $code in 4??) ;; *) false ;; esac &&
	! grep -q "$(cat .baton/answer.key)" page.html &&
	code=$(curl -s -o page.html -w "%{http_code}" --path-as-is \
		"$HTTP_URL/api/v1/answers/../../../.baton/answer.key") &&
	case $code in 4??) ;; *) false ;; esac &&
	! grep -q "$(cat .baton/answer.key)" page.html &&
	huge=$(head -c 100000 /dev/zero | tr "\0" A).AAAA &&
	code=$(fetch GET "$HTTP_URL/api/v1/answers/$huge") &&
	case $code in 4??) ;; *) false ;; esac &&
	big=$(head -c 600 /dev/zero | tr "\0" A).AAAA &&
	test "$(fetch POST "$HTTP_URL/api/v1/answers/$big" "token=$big")" = 400 &&
	test_grep "not an answer link" page.html &&
	test "$(fetch GET "$HTTP_URL/api/v1/answers/%3Cscript%3E.x")" = 400 &&
	! grep -q "<script>" page.html &&
	# serve still answers, and nothing was decided
	test "$(fetch GET "$(link "$id" approve)")" = 200 &&
	test "$(run_status "$id")" = waiting_for_approval
'

test_expect_success 'the form POST approves; the run goes on; who decided is on record' '
	in_repo a &&
	id=$(cat ../first.id) &&
	url=$(link "$id" approve) &&
	test "$(fetch POST "$url" "token=$(token_of "$url")")" = 200 &&
	test_grep "Approved" page.html &&
	test "$(bg_wait ../run-first 120)" = 0 &&
	test "$(run_status "$id")" = merge_ready &&
	"$BATON" events "$id" --json |
		jq -s "map(select(.type == \"transition\" and .from == \"waiting_for_approval\"))" >../decided.json &&
	test_jq "length == 1 and .[0].data.by == \"link:ops\" and .[0].data.decision == \"approve\"" ../decided.json
'

test_expect_success 'the link acts once: reused, or the other link of the question, refused' '
	in_repo a &&
	id=$(cat ../first.id) &&
	url=$(link "$id" approve) &&
	test "$(fetch POST "$url" "token=$(token_of "$url")")" = 409 &&
	test_grep "used before" page.html &&
	rej=$(link "$id" reject) &&
	test "$(fetch POST "$rej" "token=$(token_of "$rej")")" = 409 &&
	test_grep "another of its links" page.html &&
	test "$(fetch GET "$url")" = 409 &&
	test "$(run_status "$id")" = merge_ready
'

test_expect_success 'the use is in the store: refused after serve restarts' '
	in_repo a &&
	id=$(cat ../first.id) &&
	kill -TERM "$(cat ../serve-a.pid)" &&
	bg_wait ../serve-a 60 >/dev/null &&
	serve_http ../serve-a2 --workers 1 &&
	in_repo a &&
	url=$(link "$id" approve) &&
	test "$(fetch POST "$url" "token=$(token_of "$url")")" = 409 &&
	test_grep "used before" page.html
'

test_expect_success 'a reject link ends the run blocked' '
	in_repo a &&
	start_gate second "Second gated task" &&
	id=$(cat ../second.id) &&
	rej=$(link "$id" reject) &&
	test "$(fetch GET "$rej")" = 200 &&
	test_grep ">Reject</button>" page.html &&
	test "$(fetch POST "$rej" "token=$(token_of "$rej")")" = 200 &&
	test_grep "Rejected" page.html &&
	bg_wait ../run-second 60 >/dev/null &&
	test "$(run_status "$id")" = blocked &&
	"$BATON" events "$id" --json |
		jq -s "map(select(.type == \"transition\" and .to == \"blocked\"))" >../rejected.json &&
	test_jq ".[0].data.by == \"link:ops\" and .[0].data.decision == \"reject\"" ../rejected.json
'

test_expect_success 'an expired link is refused and decides nothing' '
	REPO=b && gated_repo b "  link_ttl_seconds: 1" &&
	cd b &&
	rm -f ../last &&
	serve_http ../serve-b --workers 1 &&
	start_gate third "Third gated task" &&
	id=$(cat ../third.id) &&
	url=$(link "$id" approve) &&
	sleep 2 &&
	test "$(fetch GET "$url")" = 410 &&
	test_grep "expired" page.html &&
	test "$(fetch POST "$url" "token=$(token_of "$url")")" = 410 &&
	test "$(run_status "$id")" = waiting_for_approval &&
	"$BATON" abort "$id" >/dev/null
'

test_done
