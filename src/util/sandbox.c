/*
 * The bubblewrap sandbox: see sandbox.h. The order of bwrap's arguments
 * is the order of its mounts: the root read-only, then a private /dev,
 * /proc and /tmp, then the caller's mounts in the order it laid them (a
 * worktree under /tmp or under a hidden repository stays visible because
 * its bind comes after the tmpfs that hides its parent; bwrap makes the
 * mount points it needs inside a tmpfs).
 */
#include "util/compat.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/sandbox.h"
#include "util/spawn.h"
#include "util/xalloc.h"

/* The probe's argv: every flag baton's sandboxes use, running true. */
static const char *const probe_argv[] = {
	"bwrap", "--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/",
	"--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
	"--unshare-net", "--", "true", NULL,
};

void
sandbox_init(struct sandbox *sb, int on, int no_net)
{
	sb->on = on;
	sb->no_net = no_net;
	strvec_init(&sb->mounts);
}

void
sandbox_release(struct sandbox *sb)
{
	if (sb)
		strvec_clear(&sb->mounts);
}

void
sandbox_copy(struct sandbox *dst, const struct sandbox *src)
{
	sandbox_init(dst, src && src->on, src && src->no_net);
	if (src)
		strvec_pushv(&dst->mounts, src->mounts.v);
}

static void
mount_one(struct sandbox *sb, const char *how, const char *path)
{
	if (!sb->on || !path || path[0] != '/' || !fs_exists(path))
		return;
	strvec_pushl(&sb->mounts, how, path, path, NULL);
}

void
sandbox_hide(struct sandbox *sb, const char *path)
{
	if (!sb->on || !path || !strcmp(path, "/") || !fs_is_dir(path))
		return;
	strvec_pushl(&sb->mounts, "--tmpfs", path, NULL);
}

void
sandbox_ro(struct sandbox *sb, const char *path)
{
	mount_one(sb, "--ro-bind", path);
}

void
sandbox_rw(struct sandbox *sb, const char *path)
{
	mount_one(sb, "--bind", path);
}

/* $HOME when it is a real folder worth hiding, else NULL. */
static const char *
user_home(void)
{
	const char *home = getenv("HOME");

	if (!home || home[0] != '/' || !strcmp(home, "/") || !fs_is_dir(home))
		return NULL;
	return home;
}

/* 1 when path lies strictly inside dir. */
static int
is_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return !strncmp(path, dir, n) && path[n] == '/' && path[n + 1];
}

/* Applies fn to each absolute folder of the colon-separated list. */
static void
each_dir(struct sandbox *sb, const char *list, const char *under,
	 void (*fn)(struct sandbox *sb, const char *path))
{
	struct buf b = BUF_INIT;
	const char *dir, *end;

	for (dir = list; dir && *dir; dir = *end ? end + 1 : end) {
		end = strchrnul(dir, ':');
		buf_reset(&b);
		buf_add(&b, dir, (size_t)(end - dir));
		if (strstr(b.ptr, "/.."))
			continue;
		if (!under || is_under(b.ptr, under))
			fn(sb, b.ptr);
	}
	buf_release(&b);
}

void
sandbox_hide_user(struct sandbox *sb, const char *repo)
{
	const char *home = user_home();

	if (!sb->on)
		return;
	/* the user's own extra folders, hidden again where they hold these */
	each_dir(sb, getenv("BATON_SANDBOX_RW"), NULL, sandbox_rw);
	if (home) {
		sandbox_hide(sb, home);
		each_dir(sb, getenv("PATH"), home, sandbox_ro);
	}
	sandbox_hide(sb, repo);
}

void
sandbox_git(struct sandbox *sb, const char *common, const char *gitdir)
{
	char *real_common = NULL, *real_git = NULL, *admin = NULL;

	if (!sb->on || !common)
		return;
	real_common = realpath(common, NULL);
	if (!real_common)
		return;
	sandbox_ro(sb, real_common);
	admin = xasprintf("%s/worktrees", real_common);
	real_git = gitdir ? realpath(gitdir, NULL) : NULL;
	if (real_git && is_under(real_git, admin) &&
	    !strchr(real_git + strlen(admin) + 1, '/'))
		sandbox_rw(sb, real_git);
	free(admin);
	free(real_git);
	free(real_common);
}

void
sandbox_program(struct sandbox *sb, const char *path)
{
	const char *home = user_home();
	char *real, *slash, *pkg;

	if (!sb->on || !path || path[0] != '/')
		return;
	real = realpath(path, NULL);
	if (!real)
		return;
	if (!home || !is_under(real, home)) {
		/* the file alone (its folder may hold a repository), at
		 * its real path: bwrap cannot mount through a link */
		sandbox_ro(sb, real);
		free(real);
		return;
	}
	while ((slash = strrchr(real, '/')) && slash != real) {
		*slash = '\0';
		if (!is_under(real, home))
			break;
		pkg = xasprintf("%s/package.json", real);
		if (fs_exists(pkg)) {
			free(pkg);
			sandbox_ro(sb, real);
			free(real);
			return;
		}
		free(pkg);
	}
	free(real);
	real = realpath(path, NULL);
	if (real && (slash = strrchr(real, '/')) && slash != real) {
		*slash = '\0';
		sandbox_ro(sb, real);
	}
	free(real);
}

void
sandbox_wrap(const struct sandbox *sb, const struct strvec *argv,
	     struct strvec *out)
{
	size_t i;

	if (sb && sb->on) {
		strvec_pushl(out, "bwrap", "--die-with-parent",
			     "--unshare-pid", "--ro-bind", "/", "/", "--dev",
			     "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			     NULL);
		strvec_pushv(out, sb->mounts.v);
		if (sb->no_net)
			strvec_push(out, "--unshare-net");
		strvec_push(out, "--");
	}
	for (i = 0; i < argv->nr; i++)
		strvec_push(out, argv->v[i]);
}

int
sandbox_signal(const struct sandbox *sb, int status)
{
	return sb && sb->on && status > 128 && status < 128 + 65 ?
		       status - 128 :
		       0;
}

/* 1 when program is an executable file in a folder of PATH. */
static int
on_path(const char *program)
{
	const char *path = getenv("PATH"), *dir, *end;
	struct buf b = BUF_INIT;
	int found = 0;

	for (dir = path; dir && *dir && !found; dir = *end ? end + 1 : end) {
		end = strchrnul(dir, ':');
		buf_reset(&b);
		buf_add(&b, dir, (size_t)(end - dir));
		buf_addf(&b, "/%s", program);
		found = b.ptr[0] == '/' && access(b.ptr, X_OK) == 0;
	}
	buf_release(&b);
	return found;
}

int
sandbox_available(struct buf *why)
{
	static int probed = -1;
	static char reason[512];
	struct err e = ERR_INIT;

	if (probed < 0) {
		if (!on_path("bwrap")) {
			snprintf(reason, sizeof(reason),
				 "bwrap is not installed (the bubblewrap "
				 "package)");
			probed = 0;
		} else {
			probed = spawn_capture(probe_argv, NULL, NULL, 0,
					       10000, &e) == 0;
			if (!probed)
				snprintf(reason, sizeof(reason),
					 "bwrap cannot make a sandbox here (user "
					 "namespaces off?): %.400s",
					 e.msg);
		}
	}
	if (!probed && why)
		buf_adds(why, reason);
	return probed;
}

int
sandbox_mode(const char *setting, struct buf *why)
{
	if (setting && !strcmp(setting, "none")) {
		if (why)
			buf_adds(why, "execution.sandbox is none");
		return 0;
	}
	if (setting && !strcmp(setting, "bwrap")) {
		if (why)
			buf_adds(why, "execution.sandbox is bwrap");
		return 1;
	}
	if (sandbox_available(why)) {
		if (why)
			buf_adds(why, "execution.sandbox is auto and bwrap "
				      "works here");
		return 1;
	}
	return 0;
}
