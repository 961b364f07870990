#!/bin/bash
test_description='a pipeline has at most 1000 stages: one more is refused by every command that loads the config, naming the limit; 1000 load'
. "$(dirname "$0")/../lib/test-lib.sh"

# stages N: a pipeline "big" of N execute stages, each naming the next
stages() {
	awk -v ns="$1" 'BEGIN {
		print "pipelines:\n  big:\n    stages:"
		for (i = 0; i < ns; i++)
			printf "      - {name: s%d, kind: execute, status: st%d, " \
			       "next: %s}\n", i, i,
			       i + 1 < ns ? "s" (i + 1) : "merge_ready"
	}'
}

test_expect_success 'a pipeline of 1000 stages loads' '
	make_repo a &&
	baton_init_with_agent a "$(stages 1000)" &&
	cd a &&
	"$BATON" pipeline show big >../show.out &&
	test_grep "^  *s999 " ../show.out &&
	"$BATON" status >/dev/null
'

test_expect_success 'a pipeline of 1001 stages is refused, naming the limit' '
	make_repo b &&
	baton_init_with_agent b "$(stages 1001)" &&
	cd b &&
	test_must_fail "$BATON" pipeline list >../list.out 2>../list.err &&
	test_grep "pipelines.big.stages: 1001 stages, over the limit of 1000 stages in a pipeline" ../list.err &&
	test_must_fail "$BATON" run --pipeline big "anything" >../run.out 2>../run.err &&
	test_grep "over the limit of 1000 stages" ../run.err
'

test_done
