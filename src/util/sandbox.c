/*
 * The bubblewrap sandbox: see sandbox.h. The order of bwrap's arguments
 * is the order of its mounts: the root read-only, then a private /dev,
 * /proc and /tmp, then the read-write binds on top (a worktree under
 * /tmp stays visible because its bind comes after the tmpfs).
 */
#include "util/compat.h"

#include "util/sandbox.h"
#include "util/spawn.h"

void
sandbox_wrap(const struct sandbox *sb, const struct strvec *argv,
	     struct strvec *out)
{
	size_t i;

	if (sb && sb->on) {
		strvec_pushl(out, "bwrap", "--die-with-parent", "--ro-bind",
			     "/", "/", "--dev", "/dev", "--proc", "/proc",
			     "--tmpfs", "/tmp", NULL);
		for (i = 0; i < SANDBOX_MAX_RW && sb->rw[i]; i++)
			strvec_pushl(out, "--bind", sb->rw[i], sb->rw[i], NULL);
		if (sb->no_net)
			strvec_push(out, "--unshare-net");
		strvec_push(out, "--");
	}
	for (i = 0; i < argv->nr; i++)
		strvec_push(out, argv->v[i]);
}

int
sandbox_available(void)
{
	static const char *const argv[] = {
		"bwrap", "--die-with-parent", "--ro-bind", "/", "/",
		"--unshare-net", "--", "true", NULL,
	};

	return spawn_capture(argv, NULL, NULL, 0, 10000, NULL) == 0;
}
