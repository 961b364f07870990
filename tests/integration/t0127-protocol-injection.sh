#!/bin/bash
test_description='messages to a running task, in the three injection modes of OpenViber: steer (now: the agent is stopped and its call made again with the message), followup (the next stage) and collect (the task'"'"'s next run), over the WebSocket (task:message) and the CLI'
. "$(dirname "$0")/../lib/test-lib.sh"

REPLAY=$BATON_SRC_ROOT/tests/lib/protoreplay.py

# the first execute call of each run waits for the file "go" in the
# run's worktree; later calls (a steered one) go on at once
export FAKE_FAIL_STAGE=execute FAKE_FAIL_MODE=slow FAKE_WAIT_FOR=go \
	FAKE_FAIL_ATTEMPTS=1

load_http() {
	cd "$TRASH_DIRECTORY/a" &&
	HTTP_URL=$(sed "s|/$||" .baton/http.url) &&
	HTTP_PORT=${HTTP_URL##*:} &&
	HTTP_TOKEN=$(cat .baton/token)
}

# message MODE TEXT: a new task held in execute, then task:message; sets
# RUN and TASK
message() {
	python3 "$REPLAY" "$HTTP_PORT" "$HTTP_TOKEN" message "$1" "$2" >msg.out &&
		rc=0 || rc=$?
	cat msg.out
	test $rc = 0 || return 1
	RUN=$(sed -n "s/^run \([^ ]*\) task.*/\1/p" msg.out)
	TASK=$(sed -n "s/^run .* task \(.*\)/\1/p" msg.out)
	test -n "$RUN" && test -n "$TASK"
}

# prompts RUN STAGE: the run's prompt files of that stage, oldest first
prompts() {
	ls .baton/runs/"$1"/calls/*-"$2"-fake-*.prompt.md 2>/dev/null | sort
}

test_expect_success 'setup' '
	make_repo a &&
	baton_init_with_agent a "runtime: {judge: false}" &&
	cd a &&
	serve_http "$TRASH_DIRECTORY/serve" --workers 1
'

test_expect_success 'steer: the agent working is stopped and its call made again with the message' '
	load_http &&
	message steer "STEER-NOW-7" &&
	wait_for "test \$(prompts $RUN execute | wc -l) -ge 2" 60 &&
	wait_for "api GET /api/v1/tasks/$TASK | jq -e \".status == \\\"done\\\"\" >/dev/null" 90 &&
	test_path_is_missing .baton/worktrees/$RUN/go &&
	prompts $RUN execute >calls &&
	test_line_count = 2 calls &&
	! grep -q STEER-NOW-7 "$(sed -n 1p calls)" &&
	grep -q STEER-NOW-7 "$(sed -n 2p calls)" &&
	"$BATON" events $RUN --json >ev &&
	jq -s -e "any(.[]; .type == \"steer\" and .data.mode == \"steer\")" ev >/dev/null &&
	jq -s -e "any(.[]; .type == \"steer_applied\" and .data.stage == \"execute\")" ev >/dev/null &&
	# taken once: the stages after it do not read it again
	for p in $(prompts $RUN review); do ! grep -q STEER-NOW-7 "$p" || exit 1; done
'

test_expect_success 'followup: the stage working ends as it would; the next stage reads the message' '
	load_http &&
	message followup "FOLLOW-UP-8" &&
	sleep 2 &&
	prompts $RUN execute >calls &&
	test_line_count = 1 calls &&
	touch .baton/worktrees/$RUN/go &&
	wait_for "api GET /api/v1/tasks/$TASK | jq -e \".status == \\\"done\\\"\" >/dev/null" 90 &&
	prompts $RUN execute >calls &&
	test_line_count = 1 calls &&
	! grep -q FOLLOW-UP-8 "$(cat calls)" &&
	prompts $RUN review >reviews &&
	grep -q FOLLOW-UP-8 "$(sed -n 1p reviews)"
'

# A run rejected at a gate ends blocked, and the queue tries its task
# again in a new run: the next run that collected guidance is for.
test_expect_success 'collect: not for this run, but for the task'"'"'s next one, once' '
	make_repo g &&
	baton_init_with_agent g "runtime: {judge: false}
policies: {require_approval_at_stages: [executing]}" &&
	cd g &&
	serve_http "$TRASH_DIRECTORY/serve-g" --workers 1 &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"Collect\"}" >t &&
	id=$(jq .id t) &&
	wait_for "api GET /api/v1/approvals | jq -e \".approvals | length == 1\" >/dev/null" 60 &&
	run=$(api GET /api/v1/approvals | jq -r ".approvals[0].run") &&
	api_expect 202 POST /api/v1/runs/$run/steer "{\"text\": \"COLLECT-9\", \"mode\": \"collect\"}" >/dev/null &&
	api_expect 202 POST /api/v1/runs/$run/steer "{\"text\": \"COLLECT-10\", \"mode\": \"collect\"}" >/dev/null &&
	api_expect 200 POST /api/v1/approvals/$run "{\"decision\": \"reject\"}" >/dev/null &&
	# (between the two runs the task is queued without one)
	wait_for "api GET /api/v1/tasks/$id | jq -e \".run != null and .run != \\\"$run\\\"\" >/dev/null" 120 &&
	next=$(api GET /api/v1/tasks/$id | jq -r .run) &&
	wait_for "test \$(prompts $next architect | wc -l) -ge 1" 60 &&
	for p in .baton/runs/$run/calls/*.prompt.md; do ! grep -q COLLECT-9 "$p" || exit 1; done &&
	plan=$(prompts $next plan | sed -n 1p) &&
	grep -q COLLECT-9 "$plan" && grep -q COLLECT-10 "$plan" &&
	! grep -q COLLECT-9 "$(prompts $next architect | sed -n 1p)"
'

test_expect_success 'the CLI: baton steer --now | --collect, and a mode that is none' '
	load_http &&
	api_expect 201 POST /api/v1/tasks "{\"title\": \"CLI\"}" >t &&
	id=$(jq .id t) &&
	wait_for "api GET /api/v1/tasks/$id | jq -e \".run != null\" >/dev/null" 60 &&
	run=$(api GET /api/v1/tasks/$id | jq -r .run) &&
	"$BATON" steer --collect $run later please >out &&
	test_grep "guidance collected for the task.s next run" out &&
	test_must_fail "$BATON" steer --now --collect $run both 2>err &&
	test_grep -i usage err &&
	api_expect 400 POST /api/v1/runs/$run/steer "{\"text\": \"x\", \"mode\": \"sideways\"}" >out &&
	test_jq ".error.message | test(\"not an injection mode\")" out &&
	"$BATON" events $run --json >ev &&
	jq -s -e "any(.[]; .type == \"steer\" and .data.mode == \"collect\")" ev >/dev/null &&
	api_expect 200 POST /api/v1/tasks/$id/cancel >/dev/null
'

test_done
