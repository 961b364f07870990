/*
 * Files: whole-file reads with a cap, atomic writes (temporary file, fsync,
 * rename, fsync of the directory: s6), directories.
 */
#ifndef BATON_UTIL_FS_H
#define BATON_UTIL_FS_H

#include <stddef.h>
#include <sys/types.h>

struct buf;
struct err;

/*
 * Replaces path with data in one step: a reader sees the old file or the
 * new one, never a mix, even across a crash. Returns 0 or -errno.
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
/* Creates path and its missing parents. An existing directory is fine. */
int fs_mkdir_p(const char *path, mode_t mode, struct err *e);
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

#endif
