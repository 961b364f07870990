/*
 * Waking `baton serve` without polling. Each serve supervisor listens on
 * a FIFO of its own, .baton/wake.d/<pid>; whoever makes work writes one
 * byte into every FIFO there. A FIFO whose reader is gone (ENXIO: a
 * serve that died) is removed on the way, so the directory never fills
 * with corpses. One FIFO per serve rather than one shared: a byte in a
 * shared FIFO would wake only one of two serves.
 */
#include "util/compat.h"

#include <stdlib.h>

#include "sched/sched.h"
#include "sched/sched_int.h"
#include "util/fs.h"
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

	fs_wake_fifos(dir);
	free(dir);
}
