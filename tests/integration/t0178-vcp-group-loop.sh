#!/bin/bash
test_description='VCP with scripted agents: what a parallel group hands on (enrichment), the loop stopped by its stop file and by an intent lock, and an evaluation that says blocked'
. "$(dirname "$0")/../lib/test-lib.sh"

bug='greet prints an empty greeting for an empty name'

group_yaml='pipelines:
  triple:
    type: bugfix
    stages:
      - {type: rca}
      - {type: implementation}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}
      - {type: code-review, parallel: true}
      - {type: code-review}'

test_expect_success 'setup' '
	make_repo group &&
	baton_init_with_agent group "$group_yaml"
'

# --- parallel-group enrichment ---------------------------------------------

test_expect_success 'parallel group: the stage after it reads every member'"'"'s key results; members read the stages before the group only' '
	cd group &&
	FAKE_SLEEP_KIND=code-review FAKE_SLEEP=1 \
		test_expect_code 0 "$BATON" run --pipeline triple "$bug" >../triple.out 2>&1 &&
	id=$(newest_run) &&
	test "$(run_status "$id")" = merge_ready &&
	after=$FAKE_STATE/$id.stage-code-review-4.1.prompt &&
	test_grep "Key results of the earlier stages" "$after" &&
	for m in 1 2 3; do
		test_grep "^- code-review-$m (v1): approved: fake code-review-$m review" "$after" || return 1
	done &&
	test_grep "^- rca (v1): root cause: .*cli.sh" "$after" &&
	for m in 1 2 3; do
		p=$FAKE_STATE/$id.stage-code-review-$m.1.prompt &&
		test_grep "^- rca (v1): root cause: .*cli.sh" "$p" &&
		test_grep ! "^- code-review-[0-9] (v" "$p" || return 1
	done
'

test_done
