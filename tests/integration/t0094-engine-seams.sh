#!/bin/bash
test_description='the seam between the engine and the stage kinds: the driver, the door, routing, the stage runner, the call and the prompt name no kind and no family; the families include the context API (kinds/kind.h), never the driver s engine_int.h; every kind has a registry line'
. "$(dirname "$0")/../lib/test-lib.sh"

top=$BATON_SRC_ROOT/src/engine
generic="engine.c door.c route.c stage.c call.c prompt.c control.c progress.c record.c report.c hooks.c"

test_expect_success 'the generic engine files name no kind and no family' '
	(cd "$top" && grep -nE "KIND_[A-Z]|\"(feature|bugfix|loop|assist|research)\"|engine__(seed|loop|assist|research)_" $generic) >named || true &&
	test_line_count = 0 named
'

# fanout.c is the engine service the families share (it forks members
# with the driver own signals), not a family: it may.
test_expect_success 'the families include kinds/kind.h and never engine_int.h' '
	(cd "$top/kinds" && ls *.c | grep -vx -e fanout.c -e registry.c) >families &&
	test_line_count -gt 6 families &&
	while read -r f; do
		grep -q "^#include \"engine/kinds/kind.h\"" "$top/kinds/$f" &&
		! grep -q "engine_int.h" "$top/kinds/$f" || { echo "$f"; exit 1; }
	done <families
'

test_expect_success 'every kind of the enum has a line in the registry' '
	sed -n "/^enum stage_kind {/,/^};/p" "$BATON_SRC_ROOT/src/core/kinds.h" |
		grep -oE "^	KIND_[A-Z_]+" | grep -v KIND__COUNT | tr -d "\t" | sort >kinds &&
	grep -oE "^	\[KIND_[A-Z_]+\] = &" "$top/kinds/registry.c" |
		grep -oE "KIND_[A-Z_]+" | sort >registered &&
	test_line_count -gt 20 kinds &&
	test_cmp kinds registered
'

test_done
