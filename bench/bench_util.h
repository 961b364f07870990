/*
 * What the C benchmarks share: failing loudly, clocks, counts from the
 * command line, the filesystem under a directory, scratch directories
 * removed at exit, and opening a store. bench_name prefixes messages.
 */
#ifndef BATON_BENCH_UTIL_H
#define BATON_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

struct store;

extern const char *bench_name;

_Noreturn void fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* Clocks: monotonic nanoseconds, wall milliseconds since the epoch. */
int64_t mono_ns(void);
int64_t wall_ms(void);
/* Parses a positive count or exits 2 with a usage error naming what. */
long count_arg(const char *s, const char *what);
/* The name of the filesystem dir lives on, for the report. */
const char *fs_name(const char *dir, char *buf, size_t n);
/*
 * Makes a fresh directory "PARENT/NAME.XXXXXX", removed with its files by
 * bench_cleanup (register it with atexit). Borrowed until then.
 */
const char *scratch_dir(const char *parent, const char *name);
void bench_cleanup(void);
/* Removes a database file and its WAL companions; missing ones are fine. */
void remove_db(const char *path);
/* Opens the store at path or fails. */
struct store *open_store(const char *path);

#endif
