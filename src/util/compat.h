/*
 * The one place that picks the feature-test macros; every .c file in src/
 * includes this header first so that all of them see the same libc.
 */
#ifndef BATON_UTIL_COMPAT_H
#define BATON_UTIL_COMPAT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* declared before banned.h bans fork, kill and waitpid (spawn.c alone
 * calls them): a later #include of these finds them declared already */
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/banned.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define BUG(...) baton_bug(__FILE__, __LINE__, __VA_ARGS__)
_Noreturn void baton_bug(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
