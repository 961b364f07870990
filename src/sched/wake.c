/*
 * Waking `baton serve` without polling. Each serve supervisor listens on
 * a FIFO of its own, .baton/wake.d/<pid>; whoever makes work writes one
 * byte into every FIFO there. A FIFO whose reader is gone (ENXIO: a
 * serve that died) is removed on the way, so the directory never fills
 * with corpses. One FIFO per serve rather than one shared: a byte in a
 * shared FIFO would wake only one of two serves.
 */
#include "util/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "sched/sched.h"
#include "sched/sched_int.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

char *
sched__wake_dir(const struct workspace *ws)
{
	return xasprintf("%s/wake.d", ws->dir);
}

void
sched_wake(const struct workspace *ws)
{
	char *dir = sched__wake_dir(ws);
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
	free(dir);
}
