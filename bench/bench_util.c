/*
 * The helpers of bench_util.h.
 */
#include "util/compat.h"

#include <dirent.h>
#include <stdarg.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "store/store.h"
#include "util/err.h"
#include "util/xalloc.h"

/*
 * Scratch directories this process made; whatever is left in them is
 * removed at exit, so a failure halfway leaves nothing behind.
 */
static char *scratch_dirs[4];

const char *bench_name = "bench";

_Noreturn void
fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", bench_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Parses a positive count or exits with a usage error naming what. */
long
count_arg(const char *s, const char *what)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || !end || *end || v <= 0) {
		fprintf(stderr, "%s: %s must be a positive number, not '%s'\n",
			bench_name, what, s);
		exit(2);
	}
	return v;
}

/* The name of the filesystem dir lives on, for the report. */
const char *
fs_name(const char *dir, char *buf, size_t n)
{
	static const struct {
		unsigned long magic;
		const char *name;
	} names[] = {
		{ 0xEF53, "ext2/3/4" },	     { 0x01021994, "tmpfs" },
		{ 0x58465342, "xfs" },	     { 0x9123683E, "btrfs" },
		{ 0x794C7630, "overlayfs" }, { 0x2FC12FC1, "zfs" },
		{ 0x65735546, "fuse" },	     { 0x6969, "nfs" },
		{ 0xF2F52010, "f2fs" },	     { 0x858458F6, "ramfs" },
	};
	struct statfs sf;
	size_t i;

	if (statfs(dir, &sf) < 0) {
		snprintf(buf, n, "unknown");
		return buf;
	}
	for (i = 0; i < ARRAY_SIZE(names); i++)
		if ((unsigned long)sf.f_type == names[i].magic)
			return names[i].name;
	snprintf(buf, n, "fs 0x%lx", (unsigned long)sf.f_type);
	return buf;
}

/* Removes every scratch directory with the files in it (atexit). */
void
bench_cleanup(void)
{
	struct dirent *de;
	char *p;
	size_t i;
	DIR *d;

	for (i = 0; i < ARRAY_SIZE(scratch_dirs); i++) {
		if (!scratch_dirs[i])
			continue;
		d = opendir(scratch_dirs[i]);
		while (d && (de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			p = xasprintf("%s/%s", scratch_dirs[i], de->d_name);
			unlink(p);
			free(p);
		}
		if (d)
			closedir(d);
		rmdir(scratch_dirs[i]);
		FREE_AND_NULL(scratch_dirs[i]);
	}
}

/*
 * Makes a fresh directory "PARENT/NAME.XXXXXX", registered for removal at
 * exit. Returns it, borrowed until exit.
 */
const char *
scratch_dir(const char *parent, const char *name)
{
	char *dir = xasprintf("%s/%s.XXXXXX", parent, name);
	size_t i;

	if (!mkdtemp(dir))
		fail("cannot create '%s': %s", dir, strerror(errno));
	for (i = 0; i < ARRAY_SIZE(scratch_dirs); i++)
		if (!scratch_dirs[i]) {
			scratch_dirs[i] = dir;
			return dir;
		}
	BUG("more than %zu scratch directories", ARRAY_SIZE(scratch_dirs));
}

/* Removes a database file and its WAL companions; missing ones are fine. */
void
remove_db(const char *path)
{
	char *p;

	unlink(path);
	p = xasprintf("%s-wal", path);
	unlink(p);
	free(p);
	p = xasprintf("%s-shm", path);
	unlink(p);
	free(p);
}

struct store *
open_store(const char *path)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;

	if (store_open(path, &s, &e))
		fail("%s", e.msg);
	return s;
}
