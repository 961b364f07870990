#!/bin/bash
test_description='fork, kill and waitpid are banned outside util/spawn.c: a file of baton that calls one does not compile, and spawn.c is the one file that lifts the ban'
. "$(dirname "$0")/../lib/test-lib.sh"

top=$BATON_SRC_ROOT
cc=${CC:-cc}

# Compiles a C file the way the Makefile compiles src/ (the first include
# util/compat.h, -Isrc, warnings as errors); only the syntax is checked.
compile() {
	$cc -std=c17 -Wall -Wextra -Werror -I"$top/src" -fsyntax-only "$1"
}

test_expect_success 'a file that goes through spawn.h compiles' '
	cat >ok.c <<-\EOF &&
	#include "util/compat.h"

	#include <signal.h>
	#include <sys/wait.h>
	#include <unistd.h>

	#include "util/spawn.h"

	static int child(void *arg) { (void)arg; return 0; }

	int
	main(void)
	{
		pid_t pid;

		if (spawn_fork_call(child, NULL, 0, &pid))
			return 1;
		spawn_signal(pid, SIGTERM);
		return spawn_reap(pid, NULL, 0) == pid ? 0 : 1;
	}
	EOF
	compile ok.c
'

for call in "fork()" "kill(1, SIGTERM)" "waitpid(-1, NULL, WNOHANG)"; do
	name=${call%%(*}
	test_expect_success "a file that calls $name itself does not compile" "
		cat >bad.c <<-EOF &&
		#include \"util/compat.h\"

		#include <signal.h>
		#include <sys/wait.h>
		#include <unistd.h>

		int
		main(void)
		{
			return (int)$call;
		}
		EOF
		test_must_fail compile bad.c 2>err &&
		grep sorry_${name}_is_a_banned_function err
	"
done

test_expect_success 'spawn.c is the only file of src/ that lifts the ban' '
	grep -rlE --exclude=banned.h "^#undef (fork|kill|waitpid)\$" "$top/src" >lifted &&
	echo "$top/src/util/spawn.c" >expect &&
	test_cmp expect lifted
'

test_done
