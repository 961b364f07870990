#!/bin/bash
test_description='ACP: what an agent asks of baton is confined to the worktree and held to the policy: reads and writes outside it (absolute, "..", a planted symlink to /etc or out of the worktree), .git and .baton, terminals outside it are refused with a permission_refused event each; permissions are answered from policies.allowed_paths, for a scripted agent and for Qwen Code against the mock'
. "$(dirname "$0")/../lib/test-lib.sh"

need_agents qwen

ACP_AGENT=$TEST_DIRECTORY/lib/acp-agent.py

# some FILE COND: a line of FILE (JSON lines) for which COND holds.
some() {
	jq -e -s "any(.[]; $2)" "$1" >/dev/null && return 0
	echo "some: no line of '$1' has: $2" >&2
	sed 's/^/    | /' "$1" >&2
	return 1
}
mkdir -p outside && echo "secret outside" >outside/secret.txt
OUT=$TRASH_DIRECTORY/outside

# The implementer's turn: every request an agent could make to get out,
# then the ones it may make.
cat >"$FAKE_STATE/adversary.json" <<EOF
{"rules": [
  {"match": "You are the implementer", "text": "done", "usage": {"inputTokens": 40, "outputTokens": 4},
   "steps": [
    {"request": "fs/read_text_file", "params": {"path": "/etc/passwd"}},
    {"request": "fs/read_text_file", "params": {"path": "{cwd}/../../../../outside/secret.txt"}},
    {"request": "fs/read_text_file", "params": {"path": "../../../../outside/secret.txt"}},
    {"symlink": ["/etc", "link-etc"]},
    {"request": "fs/read_text_file", "params": {"path": "{cwd}/link-etc/passwd"}},
    {"symlink": ["$OUT", "link-out"]},
    {"request": "fs/read_text_file", "params": {"path": "link-out/secret.txt"}},
    {"request": "fs/write_text_file", "params": {"path": "link-out/pwned.txt", "content": "pwned"}},
    {"request": "fs/write_text_file", "params": {"path": "$OUT/abs-pwned.txt", "content": "pwned"}},
    {"request": "fs/write_text_file", "params": {"path": "{cwd}/sub/../../pwned.txt", "content": "pwned"}},
    {"request": "fs/write_text_file", "params": {"path": ".git", "content": "gitdir: /tmp/elsewhere\n"}},
    {"request": "fs/write_text_file", "params": {"path": ".baton/config.yaml", "content": "hooks: {}\n"}},
    {"request": "terminal/create", "params": {"command": "cat", "args": ["secret.txt"], "cwd": "$OUT"}},
    {"request": "terminal/create", "params": {"command": "ls", "cwd": "{cwd}/link-etc"}},
    {"request": "session/request_permission", "params": {
       "toolCall": {"toolCallId": "t1", "title": "Write outside", "kind": "edit",
                    "locations": [{"path": "$OUT/asked.txt"}]},
       "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                   {"optionId": "always", "name": "Always", "kind": "allow_always"},
                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
    {"request": "session/request_permission", "params": {
       "toolCall": {"toolCallId": "t2", "title": "Edit through the link", "kind": "edit",
                    "rawInput": {"file_path": "link-out/x.txt"}},
       "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
    {"request": "session/request_permission", "params": {
       "toolCall": {"toolCallId": "t3", "title": "Write hello.txt", "kind": "edit",
                    "locations": [{"path": "{cwd}/hello.txt"}]},
       "options": [{"optionId": "always", "name": "Always", "kind": "allow_always"},
                   {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
    {"request": "session/request_permission", "params": {
       "toolCall": {"toolCallId": "t4", "title": "make test", "kind": "execute",
                    "rawInput": {"command": "make test"}},
       "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
    {"request": "fs/write_text_file", "params": {"path": "{cwd}/hello.txt", "content": "hello from acp\n"}},
    {"request": "fs/write_text_file", "params": {"path": "deep/er/note.txt", "content": "note\n"}},
    {"request": "fs/read_text_file", "params": {"path": "hello.txt"}},
    {"request": "fs/read_text_file", "params": {"path": "README", "line": 3, "limit": 1}},
    {"request": "fs/read_text_file", "params": {"path": "missing.txt"}},
    {"request": "terminal/create", "params": {"command": "sh", "args": ["-c", "echo out-\$PWD; echo err >&2; exit 3"], "env": [{"name": "X", "value": "1"}]}},
    {"request": "terminal/output", "params": {"terminalId": "term-1"}},
    {"request": "terminal/wait_for_exit", "params": {"terminalId": "term-1"}},
    {"request": "terminal/release", "params": {"terminalId": "term-1"}},
    {"request": "terminal/output", "params": {"terminalId": "term-1"}},
    {"request": "no/such_method", "params": {}},
    {"unlink": "link-etc"}, {"unlink": "link-out"}
   ]},
  {"match": "You are the reviewer", "text": "DECISION: APPROVED"},
  {"match": "You are the verifier", "text": "VERIFICATION: PASSED"}
]}
EOF

test_expect_success 'setup: the scripted ACP agent plays every role' '
	make_repo repo &&
	baton_init_with_agent repo "providers:
  acp:
    type: acp
    command: [python3, \"$ACP_AGENT\"]
    env: {ACP_SCRIPT: \"$FAKE_STATE/adversary.json\", ACP_LOG: \"$FAKE_STATE/adversary.log\"}
roles: {default: acp}" &&
	cd repo && test_expect_code 0 "$BATON" run "Add hello.txt" >../run.out 2>&1 &&
	test_grep merge_ready ../run.out
'

# answer N: the Nth answer the agent logged (from 1).
answer() {
	jq -c "select(.event == \"answer\")" "$FAKE_STATE/adversary.log" | sed -n "$1p"
}

test_expect_success 'reads outside the worktree are refused: absolute, "..", a symlink to /etc, a symlink out' '
	for n in 1 2 3 4 5; do
		answer $n >a$n && test_jq ".error.message and (.result == null)" a$n || exit 1
	done &&
	test_grep "outside the worktree" a1 &&
	test_grep "outside the worktree" a3 &&
	test_grep "symlink" a4 &&
	test_grep "symlink" a5 &&
	test_must_fail grep "root:" a1 a4 &&
	test_must_fail grep "secret outside" a2 a3 a5
'

test_expect_success 'writes outside are refused and nothing lands outside: a symlink out, absolute, "..", .git, .baton' '
	for n in 6 7 8 9 10; do
		answer $n >w$n && test_jq ".error.message" w$n || exit 1
	done &&
	test_path_is_missing outside/pwned.txt &&
	test_path_is_missing outside/abs-pwned.txt &&
	wt=$(cd repo && run_field "$(newest_run)" worktree) &&
	test_path_is_missing "$wt/../pwned.txt" &&
	test_grep "under .git" w9 &&
	! grep -q elsewhere "$wt/.git" &&
	test_grep "baton" w10 &&
	! grep -qs "hooks: {}" "$wt/.baton/config.yaml"
'

test_expect_success 'a terminal outside the worktree is refused' '
	answer 11 >t11 && test_jq ".error.message | test(\"outside the worktree\")" t11 &&
	answer 12 >t12 && test_jq ".error.message | test(\"symlink\")" t12
'

test_expect_success 'permissions: an edit outside is rejected (reject_once), an edit inside allowed once (never allow_always), a command allowed' '
	answer 13 >p13 && test_jq ".result.outcome == {\"outcome\": \"selected\", \"optionId\": \"no\"}" p13 &&
	answer 14 >p14 && test_jq ".result.outcome.optionId == \"no\"" p14 &&
	answer 15 >p15 && test_jq ".result.outcome.optionId == \"yes\"" p15 &&
	answer 16 >p16 && test_jq ".result.outcome.optionId == \"yes\"" p16
'

test_expect_success 'inside the worktree fs and terminals work: writes (parents made), reads with line and limit, a missing file is "not found"' '
	answer 17 >f17 && test_jq ".error == null" f17 &&
	answer 18 >f18 && test_jq ".error == null" f18 &&
	answer 19 >f19 && test_jq ".result.content == \"hello from acp\n\"" f19 &&
	answer 20 >f20 && test_jq ".result.content == \"A small project for baton tests.\n\"" f20 &&
	answer 21 >f21 && test_jq ".error.code == -32002" f21 &&
	(cd repo && "$BATON" diff "$(newest_run)") >diff &&
	test_grep "+hello from acp" diff &&
	test_grep "+note" diff
'

test_expect_success 'a terminal runs in the worktree: output (stdout and stderr), exit status, release' '
	answer 22 >c22 && test_jq ".result.terminalId == \"term-1\"" c22 &&
	answer 23 >c23 &&
	test_jq ".result.output | test(\"out-/.*worktrees/\")" c23 &&
	test_jq ".result.output | test(\"err\")" c23 &&
	test_jq ".result.truncated == false and .result.exitStatus.exitCode == 3" c23 &&
	answer 24 >c24 && test_jq ".result.exitCode == 3" c24 &&
	answer 25 >c25 && test_jq ".error == null" c25 &&
	answer 26 >c26 && test_jq ".error.message | test(\"no terminal\")" c26 &&
	answer 27 >c27 && test_jq ".error.code == -32601" c27
'

test_expect_success 'each refusal is a permission_refused event naming the tool and the path' '
	cd repo &&
	"$BATON" events "$(newest_run)" --json >../events &&
	jq -c "select(.type == \"permission_refused\") | .data" ../events >../refused &&
	test_line_count = 14 ../refused &&
	some ../refused ".tool == \"fs/read_text_file\" and .path == \"/etc/passwd\" and .kind == \"read\" and .stage == \"execute\" and (.reason | test(\"outside the worktree\"))" &&
	some ../refused ".tool == \"Write outside\" and .kind == \"edit\" and .path == \"$OUT/asked.txt\"" &&
	some ../refused ".tool == \"terminal/create\" and .path == \"$OUT\"" &&
	out=$(ls .baton/runs/$(newest_run)/calls/*-execute-acp-0.stdout) &&
	test_grep "^\[denied\] edit Write outside $OUT/asked.txt: " "$out" &&
	jq -r "select(.type == \"agent_output\") | .data.text" ../events >../live &&
	test_grep "^\[denied\] read fs/read_text_file /etc/passwd" ../live &&
	test_grep "^\[write\] .*hello.txt" ../live &&
	test_grep "^\[run\] sh -c" ../live
'

test_expect_success 'policies.allowed_paths: an edit outside them is rejected, inside allowed' '
	cat >"$FAKE_STATE/paths.json" <<-EOF &&
	{"rules": [
	  {"match": "You are the implementer", "text": "done", "steps": [
	    {"request": "session/request_permission", "params": {
	       "toolCall": {"toolCallId": "a", "title": "Edit cli.sh", "kind": "edit",
	                    "locations": [{"path": "{cwd}/cli.sh"}]},
	       "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
	                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
	    {"request": "fs/write_text_file", "params": {"path": "cli.sh", "content": "#!/bin/sh\n"}},
	    {"request": "session/request_permission", "params": {
	       "toolCall": {"toolCallId": "b", "title": "Edit docs", "kind": "edit",
	                    "locations": [{"path": "{cwd}/docs/a.md"}]},
	       "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
	                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
	    {"request": "fs/write_text_file", "params": {"path": "docs/a.md", "content": "# a\n"}}]},
	  {"match": "You are the reviewer", "text": "DECISION: APPROVED"},
	  {"match": "You are the verifier", "text": "VERIFICATION: PASSED"}
	]}
	EOF
	make_repo paths &&
	baton_init_with_agent paths "providers:
  acp:
    type: acp
    command: [python3, \"$ACP_AGENT\"]
    env: {ACP_SCRIPT: \"$FAKE_STATE/paths.json\", ACP_LOG: \"$FAKE_STATE/paths.log\"}
roles: {default: acp}
policies: {allowed_paths: [\"docs/**\"]}" &&
	cd paths && test_expect_code 0 "$BATON" run "Document it" >../paths.out 2>&1 &&
	jq -c "select(.event == \"answer\")" "$FAKE_STATE/paths.log" >../answers &&
	sed -n 1p ../answers | jq -e ".result.outcome.optionId == \"no\"" &&
	sed -n 2p ../answers | jq -e ".error.message | test(\"outside policies.allowed_paths\")" &&
	sed -n 3p ../answers | jq -e ".result.outcome.optionId == \"yes\"" &&
	sed -n 4p ../answers | jq -e ".error == null" &&
	"$BATON" events "$(newest_run)" --json >../pevents &&
	jq -c "select(.type == \"permission_refused\") | .data" ../pevents >../prefused &&
	test_line_count = 2 ../prefused &&
	some ../prefused ".tool == \"Edit cli.sh\" and (.path | endswith(\"/cli.sh\"))" &&
	"$BATON" diff "$(newest_run)" >../pdiff &&
	test_grep "+# a" ../pdiff &&
	test_must_fail grep "cli.sh" ../pdiff
'

test_expect_success 'a loop run: the asks and writes of the act are held to the loop grants (strict: write:notes/*)' '
	cat >"$FAKE_STATE/loop.json" <<-\EOF &&
	{"rules": [
	  {"kind": "loop-plan", "text": "planned", "steps": [{"artifact":
	    "{\"done\": false, \"summary\": \"s\", \"step\": \"write a note\", \"effects\": [{\"kind\": \"write\", \"target\": \"notes/1.txt\"}]}"}]},
	  {"kind": "act", "text": "wrote notes/1.txt", "steps": [
	    {"request": "session/request_permission", "params": {
	       "toolCall": {"toolCallId": "a", "title": "Write the note", "kind": "edit",
	                    "locations": [{"path": "{cwd}/notes/1.txt"}]},
	       "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
	                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
	    {"request": "session/request_permission", "params": {
	       "toolCall": {"toolCallId": "b", "title": "Edit the CLI", "kind": "edit",
	                    "locations": [{"path": "{cwd}/cli.sh"}]},
	       "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
	                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
	    {"request": "session/request_permission", "params": {
	       "toolCall": {"toolCallId": "c", "title": "Fetch", "kind": "execute",
	                    "rawInput": {"command": "curl https://example.com"}},
	       "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
	                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}},
	    {"request": "terminal/create", "params": {"command": "make", "args": ["test"]}},
	    {"request": "fs/write_text_file", "params": {"path": "notes/1.txt", "content": "note 1\n"}},
	    {"request": "fs/write_text_file", "params": {"path": "other.txt", "content": "x\n"}}]},
	  {"kind": "evaluate", "text": "evaluated", "steps": [{"artifact":
	    "{\"status\": \"done\", \"summary\": \"the note is there\"}"}]}
	]}
	EOF
	make_repo loop &&
	baton_init_with_agent loop "providers:
  acp:
    type: acp
    command: [python3, \"$ACP_AGENT\"]
    env: {ACP_SCRIPT: \"$FAKE_STATE/loop.json\", ACP_LOG: \"$FAKE_STATE/loop.log\"}
roles: {default: acp}
loop: {profile: strict, max_iterations: 1, grants: [\"write:notes/*\"]}" &&
	cd loop && { "$BATON" run --pipeline loop "Write a note" >../loop.out 2>&1 || :; } &&
	jq -c "select(.event == \"answer\")" "$FAKE_STATE/loop.log" >../lanswers &&
	sed -n 1p ../lanswers | jq -e ".result.outcome.optionId == \"yes\"" &&
	sed -n 2p ../lanswers | jq -e ".result.outcome.optionId == \"no\"" &&
	sed -n 3p ../lanswers | jq -e ".result.outcome.optionId == \"no\"" &&
	sed -n 4p ../lanswers | jq -e ".error.message | test(\"profile strict\")" &&
	sed -n 5p ../lanswers | jq -e ".error == null" &&
	sed -n 6p ../lanswers | jq -e ".error.message | test(\"other.txt\")" &&
	id=$(newest_run) &&
	"$BATON" events "$id" --json >../levents &&
	jq -c "select(.type == \"permission_refused\") | .data" ../levents >../lrefused &&
	test_line_count = 4 ../lrefused &&
	some ../lrefused ".tool == \"Fetch\" and .kind == \"execute\" and .path == \"curl https://example.com\" and (.reason | test(\"loop.grants\"))" &&
	some ../lrefused ".tool == \"fs/write_text_file\" and .path == \"other.txt\"" &&
	test "$(cat "$(run_field "$id" worktree)/notes/1.txt")" = "note 1" &&
	test_path_is_missing "$(run_field "$id" worktree)/other.txt"
'

cat >qwen.json <<\EOF
{"rules": [
  {"match": "You are the implementer",
   "actions": [{"write": {"path": "hello.txt", "content": "hello from qwen\n"}}],
   "text": "Tried to write hello.txt."},
  {"match": "You are the reviewer", "text": "DECISION: APPROVED"},
  {"match": "You are the verifier", "text": "VERIFICATION: PASSED"}
]}
EOF
mock_start qwen qwen.json
mkdir -p qhome/.qwen
cat >qhome/.qwen/settings.json <<\EOF
{"security": {"auth": {"selectedType": "openai"}},
 "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true}}
EOF

test_expect_success 'Qwen Code asks to write outside policies.allowed_paths: refused, on record, nothing written' '
	make_repo q &&
	baton_init_with_agent q "providers:
  qwen:
    type: acp
    command: [\"$AGENTS_BIN/qwen\", --acp]
    env: {HOME: \"$TRASH_DIRECTORY/qhome\", OPENAI_BASE_URL: \"$(mock_url qwen)/v1\", OPENAI_API_KEY: sk-mock, OPENAI_MODEL: mock-model}
    timeout_seconds: 180
roles: {default: qwen}
policies: {allowed_paths: [\"docs/**\"]}" &&
	cd q && { "$BATON" run "Add hello.txt" >../q.out 2>&1 || :; } &&
	id=$(newest_run) &&
	"$BATON" events "$id" --json >../qevents &&
	jq -c "select(.type == \"permission_refused\") | .data" ../qevents >../qrefused &&
	some ../qrefused ".provider == \"qwen\" and .kind == \"edit\" and (.path | endswith(\"/hello.txt\")) and (.reason | test(\"allowed_paths\"))" &&
	out=$(ls .baton/runs/$id/calls/*-execute-qwen-0.stdout) &&
	test_grep "\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"cancel\"}" "$out" &&
	test_must_fail grep "\"method\":\"fs/write_text_file\"" "$out" &&
	test_path_is_missing "$(run_field "$id" worktree)/hello.txt"
'

test_done
