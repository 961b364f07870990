/*
 * Functions baton never calls (STYLE.md section 10). Using one is a compile
 * error that names the reason, as in git's banned.h.
 *
 * fork, kill and waitpid are banned everywhere but in util/spawn.c, which
 * #undefs them: a process is started, signalled and reaped through
 * spawn.h (spawn_run, spawn_fork_call, spawn_signal, spawn_reap), so
 * that one file holds every rule about children. compat.h declares them
 * before this header is read, so the system headers are not mangled.
 */
#ifndef BATON_UTIL_BANNED_H
#define BATON_UTIL_BANNED_H

#define BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) BANNED(strncpy)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef strtok
#define strtok(x, y) BANNED(strtok)
#undef gets
#define gets(x) BANNED(gets)
#undef atoi
#define atoi(x) BANNED(atoi)
#undef system
#define system(x) BANNED(system)
#undef popen
#define popen(x, y) BANNED(popen)
#undef fork
#define fork(...) BANNED(fork)
#undef kill
#define kill(...) BANNED(kill)
#undef waitpid
#define waitpid(...) BANNED(waitpid)

#endif
