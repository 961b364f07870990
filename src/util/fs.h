/*
 * Files: whole-file reads with a cap, atomic writes (temporary file, fsync,
 * rename, fsync of the directory: s6), directories.
 *
 * The run folder (.baton/runs/<id>/) is written by agents too, and an
 * agent is untrusted: it may plant a symbolic link where baton will open
 * a file next (calls/0007-execute-x-0.stdout -> ~/.bashrc). Files baton
 * opens there go through fs_open_nofollow and fs_read_nofollow, which
 * refuse a link as the file or as its folder and anything that is not a
 * regular file (a FIFO would hang the open); atomic writes create their
 * temporary file exclusively and rename() replaces a link rather than
 * following it; fs_mkdir_p refuses a folder that is a link.
 */
#ifndef BATON_UTIL_FS_H
#define BATON_UTIL_FS_H

#include <stddef.h>
#include <sys/types.h>

struct buf;
struct err;

/*
 * Replaces path with data in one step: a reader sees the old file or the
 * new one, never a mix, even across a crash. The temporary file beside
 * path gets a fresh random name and is created with O_EXCL and
 * O_NOFOLLOW, so nothing planted there is followed or reused; a link at
 * path itself is replaced, not followed. Returns 0 or -errno.
 */
int fs_write_atomic(const char *path, const void *data, size_t len,
		    struct err *e);
/*
 * Writes all len bytes to fd, retrying short writes and EINTR. Returns 0
 * or -errno. Only calls write(2), so a forked child may use it.
 */
int fs_write_all(int fd, const void *data, size_t len);
/*
 * Appends the contents of path to out. A file larger than max bytes
 * (0: no limit) is refused with -EFBIG. Missing file: -ENOENT.
 */
int fs_read(const char *path, struct buf *out, size_t max, struct err *e);
/*
 * Creates path and its missing parents. An existing directory is fine;
 * path itself being a symbolic link (even to a directory) is refused with
 * -ELOOP, so a folder baton writes in cannot be redirected elsewhere.
 * The parents may be links (a home folder reached through one).
 */
int fs_mkdir_p(const char *path, mode_t mode, struct err *e);
/*
 * Opens path with open(2)'s flags (O_CREAT takes mode), adding O_NOFOLLOW
 * and O_CLOEXEC, for a file in a folder an agent can write. Refused: a
 * symbolic link as path or as its folder (-ELOOP, "'path' is a symbolic
 * link"), and anything but a regular file (-EINVAL), without blocking on
 * a FIFO. Returns the descriptor (in blocking mode) or a negative error
 * with the message in e.
 */
int fs_open_nofollow(const char *path, int flags, mode_t mode,
		     struct err *e);
/*
 * fs_read for a file an agent wrote (plan.md, a verdict's JSON): opened
 * with fs_open_nofollow, so a link or a FIFO planted in its place is
 * refused, and more than max bytes is -EFBIG as in fs_read.
 */
int fs_read_nofollow(const char *path, struct buf *out, size_t max,
		     struct err *e);
/* 1 if path exists (any type), 0 if not. */
int fs_exists(const char *path);
/* 1 if path is a directory. */
int fs_is_dir(const char *path);
/* Removes a file; a missing file is not an error. */
int fs_unlink(const char *path, struct err *e);
/*
 * Removes path and everything under it (rm -rf), never following
 * symlinks; a missing path is not an error.
 */
int fs_remove_tree(const char *path, struct err *e);
/* Size of a regular file, or -errno. */
long long fs_size(const char *path);

/*
 * Writes one byte into each FIFO in dir (a wake-up for whoever reads
 * it), never blocking: a full FIFO has a wake-up pending already, and a
 * FIFO nobody reads any more (its reader died) is removed. Never fails:
 * with nobody listening there is nobody to wake.
 */
void fs_wake_fifos(const char *dir);

#endif
