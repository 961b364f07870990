/*
 * File helpers: see fs.h.
 */
#include "util/compat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/xalloc.h"

int
fs_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void
fsync_dir_of(const char *path)
{
	char *copy = xstrdup(path);
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

int
fs_write_atomic(const char *path, const void *data, size_t len, struct err *e)
{
	char *tmp = xasprintf("%s.tmp.XXXXXX", path);
	int fd = -1, rc;

	/* O_CREAT | O_EXCL under a random name: never a planted file. */
	fd = mkostemp(tmp, O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = err_set(e, -errno, "cannot create '%s': %s", tmp,
			     strerror(errno));
		goto out;
	}
	rc = fchmod(fd, 0644) < 0 ? -errno : 0;
	if (!rc)
		rc = fs_write_all(fd, data, len);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	fd = -1;
	if (rc) {
		err_set(e, rc, "cannot write '%s': %s", tmp, strerror(-rc));
		unlink(tmp);
		goto out;
	}
	/* rename() replaces a link at path; it does not follow it. */
	if (rename(tmp, path) < 0) {
		rc = err_set(e, -errno, "cannot rename '%s' to '%s': %s", tmp,
			     path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	fsync_dir_of(path);
out:
	if (fd >= 0)
		close(fd);
	free(tmp);
	return rc;
}

/* -ELOOP with a message naming path when it is a symbolic link, else 0. */
static int
refuse_link(const char *path, struct err *e)
{
	struct stat st;

	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
		return err_set(e, -ELOOP,
			       "'%s' is a symbolic link; baton does not "
			       "follow links in folders an agent can write",
			       path);
	return 0;
}

/*
 * The error for a failed fs_open_nofollow of path: a link or a file of
 * another kind (a FIFO without a reader fails with ENXIO) is named as
 * such, anything else is the system's reason.
 */
static int
open_error(const char *path, int errnum, struct err *e)
{
	struct stat st;
	int rc = refuse_link(path, e);

	if (rc)
		return rc;
	if (errnum != ENOENT && lstat(path, &st) == 0 &&
	    !S_ISREG(st.st_mode))
		return err_set(e, -EINVAL, "'%s' is not a regular file", path);
	return err_set(e, -errnum, "cannot open '%s': %s", path,
		       strerror(errnum));
}

int
fs_open_nofollow(const char *path, int flags, mode_t mode, struct err *e)
{
	char *dir = xstrdup(path);
	struct stat st;
	int fd = -1, fl, rc;

	rc = refuse_link(dirname(dir), e);
	if (rc)
		goto out;
	/* O_NONBLOCK: a FIFO in the file's place must not hang the open. */
	fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode);
	if (fd < 0) {
		rc = open_error(path, errno, e);
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = err_set(e, -errno, "cannot stat '%s': %s", path,
			     strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = err_set(e, -EINVAL, "'%s' is not a regular file", path);
		goto out;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		rc = err_set(e, -errno, "cannot open '%s': %s", path,
			     strerror(errno));
out:
	free(dir);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	return fd;
}

/* Reads fd (opened from path) to its end into out; see fs_read. */
static int
read_fd(int fd, const char *path, struct buf *out, size_t max,
	struct err *e)
{
	char chunk[65536];
	size_t total = 0;
	int rc = 0;

	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = err_set(e, -errno, "cannot read '%s': %s", path,
				     strerror(errno));
			break;
		}
		if (!n)
			break;
		total += (size_t)n;
		if (max && total > max) {
			rc = err_set(e, -EFBIG,
				     "'%s' is larger than %zu bytes", path,
				     max);
			break;
		}
		buf_add(out, chunk, (size_t)n);
	}
	return rc;
}

int
fs_read(const char *path, struct buf *out, size_t max, struct err *e)
{
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, -errno, "cannot open '%s': %s", path,
			       strerror(errno));
	rc = read_fd(fd, path, out, max, e);
	close(fd);
	return rc;
}

int
fs_read_nofollow(const char *path, struct buf *out, size_t max,
		 struct err *e)
{
	int fd = fs_open_nofollow(path, O_RDONLY, 0, e), rc;

	if (fd < 0)
		return fd;
	rc = read_fd(fd, path, out, max, e);
	close(fd);
	return rc;
}

int
fs_mkdir_p(const char *path, mode_t mode, struct err *e)
{
	char *p = xstrdup(path), *s;
	int rc = 0;

	for (s = p + 1;; s++) {
		int end = *s == '\0';

		if (*s != '/' && !end)
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST) {
			rc = err_set(e, -errno, "cannot create directory '%s': %s",
				     p, strerror(errno));
			break;
		}
		if (end)
			break;
		*s = '/';
	}
	if (!rc)
		rc = refuse_link(path, e);
	if (!rc && !fs_is_dir(path))
		rc = err_set(e, -ENOTDIR, "'%s' exists and is not a directory",
			     path);
	free(p);
	return rc;
}

int
fs_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

int
fs_is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int
fs_unlink(const char *path, struct err *e)
{
	if (unlink(path) < 0 && errno != ENOENT)
		return err_set(e, -errno, "cannot remove '%s': %s", path,
			       strerror(errno));
	return 0;
}

static int
remove_one(const char *path, const struct stat *st, int type,
	   struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (type == FTW_DP ? rmdir(path) : unlink(path)) < 0 &&
			       errno != ENOENT ?
		       -1 :
		       0;
}

int
fs_remove_tree(const char *path, struct err *e)
{
	if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0 &&
	    errno != ENOENT)
		return err_set(e, -errno, "cannot remove '%s': %s", path,
			       strerror(errno));
	return 0;
}

long long
fs_size(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	return (long long)st.st_size;
}

void
fs_wake_fifos(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	while (d && (de = readdir(d))) {
		char *path;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		path = xasprintf("%s/%s", dir, de->d_name);
		fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 && errno == ENXIO)
			unlink(path); /* nobody reads it any more */
		if (fd >= 0) {
			/* EAGAIN: the FIFO is full, a wake-up is pending */
			if (write(fd, "w", 1) < 0 && errno != EAGAIN)
				unlink(path);
			close(fd);
		}
		free(path);
	}
	if (d)
		closedir(d);
}
