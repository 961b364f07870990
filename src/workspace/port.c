/*
 * A TCP port of its own for each run's worktree (BATON_PORT), for the dev
 * servers and test servers its hooks, checks and agent start, so that
 * runs side by side never fight over 3000.
 *
 *   .baton/ports/<port>     the claim: holds the run id; made with
 *                           O_CREAT|O_EXCL, so of two processes picking
 *                           the same number at once exactly one gets it
 *   .baton/runs/<id>/port   the run's port, read first on every later
 *                           call (a resumed run, another process)
 *
 * A number is picked by binding 127.0.0.1:0 (the kernel hands out a port
 * nobody listens on), then claimed. The claim is the authority: a run
 * whose port file names a port claimed by another run gets a new one.
 * Both files live under .baton/, which the sandbox hides from the agent.
 * The claim goes when the worktree is removed (workspace_port_release).
 */
#include "util/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* Tries before giving up: each is a port the kernel found free. */
#define PORT_TRIES 64
#define PORT_FILE_MAX 64

/* A port nobody listens on now, from the kernel; 0 on failure. */
static int
free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd, port = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* The number in a small file, or 0. */
static int
read_number(const char *path, struct buf *text)
{
	long v;
	char *end;

	buf_reset(text);
	if (fs_read_nofollow(path, text, PORT_FILE_MAX, NULL) < 0)
		return 0;
	buf_rtrim(text);
	v = strtol(text->ptr, &end, 10);
	return *end || v <= 0 || v > 65535 ? 0 : (int)v;
}

/* 1 when the claim of port names run_id. */
static int
claimed_by(const char *dir, int port, const char *run_id)
{
	char *path = xasprintf("%s/ports/%d", dir, port);
	struct buf text = BUF_INIT;
	int ours = 0;

	if (fs_read_nofollow(path, &text, PORT_FILE_MAX, NULL) >= 0) {
		buf_rtrim(&text);
		ours = !strcmp(text.ptr, run_id);
	}
	buf_release(&text);
	free(path);
	return ours;
}

/*
 * The ports .baton/ports holds claims of run_id's on, each passed to fn
 * (its number); a claim is found so even when the run's port file was
 * lost or names another port. Returns the first port found, or 0.
 */
static int
each_claim(const char *dir, const char *run_id, void (*fn)(const char *, int))
{
	char *ports = xasprintf("%s/ports", dir);
	DIR *d = opendir(ports);
	struct dirent *de;
	char *end;
	long v;
	int first = 0;

	while (d && (de = readdir(d))) {
		v = strtol(de->d_name, &end, 10);
		if (*end || v <= 0 || v > 65535 ||
		    !claimed_by(dir, (int)v, run_id))
			continue;
		if (!first)
			first = (int)v;
		if (fn)
			fn(dir, (int)v);
	}
	if (d)
		closedir(d);
	free(ports);
	return first;
}

static void
drop_claim(const char *dir, int port)
{
	char *path = xasprintf("%s/ports/%d", dir, port);

	unlink(path);
	free(path);
}

/* Claims port for run_id: 0, -EEXIST when another has it, or an error. */
static int
claim(const char *dir, int port, const char *run_id, struct err *e)
{
	char *path = xasprintf("%s/ports/%d", dir, port);
	char *line = xasprintf("%s\n", run_id);
	int fd, rc;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0644);
	if (fd < 0) {
		rc = -errno;
		if (rc != -EEXIST)
			err_set(e, rc, "cannot claim port %d ('%s'): %s", port,
				path, strerror(errno));
		goto out;
	}
	rc = fs_write_all(fd, line, strlen(line));
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc) {
		unlink(path);
		err_set(e, rc, "cannot write '%s': %s", path, strerror(-rc));
	}
out:
	free(line);
	free(path);
	return rc;
}

int
workspace_port(const struct workspace *ws, const char *run_id, int *out,
	       struct err *e)
{
	char *run_dir = workspace_run_dir(ws, run_id);
	char *mine = xasprintf("%s/port", run_dir);
	char *ports = xasprintf("%s/ports", ws->dir);
	struct buf text = BUF_INIT;
	int port, rc, i;

	port = read_number(mine, &text);
	if (port && claimed_by(ws->dir, port, run_id))
		goto found;
	rc = fs_mkdir_p(ports, 0755, e);
	if (!rc)
		rc = fs_mkdir_p(run_dir, 0755, e);
	if (rc)
		goto out;
	/* a port file whose claim went (a crash, a hand-cleaned folder)
	 * takes its number back when nobody else has it */
	if (port && !(rc = claim(ws->dir, port, run_id, e)))
		goto write;
	if (rc && rc != -EEXIST)
		goto out;
	/* a claim of ours the port file does not name: take it back */
	port = each_claim(ws->dir, run_id, NULL);
	if (port)
		goto write;
	for (i = 0, rc = -EEXIST; i < PORT_TRIES && rc == -EEXIST; i++) {
		port = free_port();
		rc = port ? claim(ws->dir, port, run_id, e) : -EEXIST;
	}
	if (rc == -EEXIST)
		rc = err_set(e, BATON_EBUSY,
			     "no free TCP port on 127.0.0.1 for run '%s' "
			     "after %d tries",
			     run_id, PORT_TRIES);
	if (rc)
		goto out;
write:
	buf_reset(&text);
	buf_addf(&text, "%d\n", port);
	rc = fs_write_atomic(mine, text.ptr, text.len, e);
	if (rc)
		goto out;
found:
	*out = port;
	rc = 0;
out:
	buf_release(&text);
	free(ports);
	free(mine);
	free(run_dir);
	return rc;
}

int
workspace_port_get(const struct workspace *ws, const char *run_id)
{
	char *path = xasprintf("%s/runs/%s/port", ws->dir, run_id);
	struct buf text = BUF_INIT;
	int port = read_number(path, &text);

	if (port && !claimed_by(ws->dir, port, run_id))
		port = 0;
	buf_release(&text);
	free(path);
	return port;
}

void
workspace_port_release(const struct workspace *ws, const char *run_id)
{
	char *path = xasprintf("%s/runs/%s/port", ws->dir, run_id);

	each_claim(ws->dir, run_id, drop_claim);
	unlink(path);
	free(path);
}
