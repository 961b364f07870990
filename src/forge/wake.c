/*
 * Waking serve's forge companion (forge.h): a byte into each FIFO under
 * .baton/forge-wake.d/, one per companion, as sched_wake does for the
 * supervisors under .baton/wake.d/. The webhook route calls this; a
 * FIFO whose reader is gone (ENXIO: a companion that died) is removed on
 * the way, so the directory never fills with corpses.
 */
#include "util/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "forge/forge.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

void
forge_wake(const struct workspace *ws)
{
	char *dir = xasprintf("%s/forge-wake.d", ws->dir);
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
