#!/bin/bash
test_description='every event type the code writes is documented with its payload: run events in docs/lifecycle.md, task events in docs/runtime.md'
. "$(dirname "$0")/../lib/test-lib.sh"

top=$TEST_DIRECTORY/..

# The literal event types handed to each door events go through: the
# engine's (engine__note, engine__record, engine__add_event), the run
# requests (request), the scheduler's (sched_task_write, requeue,
# write_item) and events built by hand (ev.type = "...").
written_types() {
	find "$top/src" -name '*.c' -exec perl -0777 -ne '
		print "$1\n" while /\b(?:engine__note|engine__record|engine__add_event|sched_task_write|requeue|write_item)\s*\([^;"]*"([a-z]+(?:_[a-z]+)*)"/g;
		print "$1\n" while /\brequest\([^;"]*"[a-z_]+",\s*[01],\s*"([a-z_]+)"/g;
		print "$1\n" while /\.type = \(char \*\)"([a-z_]+)"/g;
		print "$1\n" while /char type\[\] = "([a-z_]+)"/g;
	' {} +
}

test_expect_success 'the code writes the event types this test knows how to find' '
	written_types | sort -u >types &&
	grep -qx transition types &&
	grep -qx agent_exited types &&
	grep -qx task_claimed types &&
	grep -qx judged types &&
	test $(wc -l <types) -ge 40
'

test_expect_success 'each is documented in lifecycle.md or runtime.md' '
	: >missing &&
	while read -r t; do
		grep -qF "\`$t\`" "$top/docs/lifecycle.md" "$top/docs/runtime.md" ||
			echo "$t" >>missing
	done <types &&
	test_line_count = 0 missing
'

test_done
