#!/bin/bash
test_description='the event types: every type the code writes is in the registry (src/core/events.c) and every registered type is written; docs/lifecycle.md lists exactly the registry (baton events --types)'
. "$(dirname "$0")/../lib/test-lib.sh"

top=$TEST_DIRECTORY/..

# The literal event types handed to each door events go through: the
# engine's (engine__note, engine__record, engine__add_event), the run
# requests (request), the scheduler's (sched_task_write, requeue,
# write_item), the forge's (write_task, also through a ternary), types
# chosen into a variable (type = "...", not a struct's .type or
# ->type, which name agents and stream messages) and events built by hand
# (ev.type = "...", char type[] = "..." in the store). The store
# refuses a type that is not registered whatever this finds; this is
# the second line: a type written on a path no test takes.
written_types() {
	find "$top/src" -name '*.c' -exec perl -0777 -ne '
		my $door = qr/\b(?:engine__note|engine__record|engine__add_event|sched_task_write|requeue|write_item|write_task)\s*\(/;
		print "$1\n" while /$door[^;"]*"([a-z]+(?:_[a-z]+)*)"/g;
		print "$1\n$2\n" while /$door[^;"]*\?\s*"([a-z_]+)"\s*:\s*"([a-z_]+)"/g;
		print "$1\n" while /\brequest\([^;"]*"[a-z_]+",\s*[01],\s*"([a-z_]+)"/g;
		print "$1\n" while /\.type = \(char \*\)"([a-z_]+)"/g;
		print "$1\n" while /char type\[\] = "([a-z_]+)"/g;
		print "$1\n" while /(?<![.>])\btype = "([a-z_]+)"/g;
	' {} + | sort -u
}

test_expect_success 'the code writes the event types this test knows how to find' '
	written_types >written &&
	! grep -qx "" written &&
	for t in transition agent_exited task_claimed judged pause_cancelled \
		judge_gone judge_expired forge_asked forge_answered \
		task_cancelled superseded merge_claimed; do
		grep -qx "$t" written || { echo "not found: $t"; exit 1; }
	done &&
	test $(wc -l <written) -ge 70
'

test_expect_success 'baton events --types needs no repository' '
	mkdir norepo &&
	(cd norepo && "$BATON" events --types >../types.md &&
	 "$BATON" events --types --json >../types.json) &&
	jq -r .type types.json | sort >registered &&
	test $(wc -l <registered) -ge 70 &&
	test_must_fail "$BATON" events --types r1 2>err &&
	test_grep "usage: baton events" err
'

test_expect_success 'each type the code writes is registered' '
	comm -23 written registered >unregistered &&
	test_line_count = 0 unregistered
'

test_expect_success 'each registered type is written by the code' '
	comm -13 written registered >unwritten &&
	test_line_count = 0 unwritten
'

test_expect_success 'no type is registered twice' '
	jq -r .type types.json | sort | uniq -d >twice &&
	test_line_count = 0 twice
'

# What lies between the markers in docs/lifecycle.md is what baton
# events --types prints: the same types, whens and data, in order. To
# update it after changing src/core/events.c, paste the output there.
test_expect_success 'the Events section of lifecycle.md is the registry' '
	sed -n "/^<!-- baton events --types:/,/^<!-- end of baton events --types -->/p" \
		"$top/docs/lifecycle.md" | sed "1d;\$d" >documented.md &&
	test -s documented.md &&
	test_cmp types.md documented.md
'

test_expect_success 'and the section names each type once, as a table row' '
	sed -n "/^## Events/,/^### Live output/p" "$top/docs/lifecycle.md" |
		grep -o "^| \`[a-z_]*\` |" |
		sed "s/^| \`//; s/\` |\$//" | sort >rows &&
	test_cmp registered rows
'

test_done
