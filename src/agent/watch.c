/*
 * Watching an agent's output while it runs (agent_watch in agent.h): the
 * engine calls agent_watch_read on each tick of a call and turns what it
 * returns into "agent_output" events, so people see the agent work
 * instead of a silent stage.
 *
 *   stdout file ──read from offset──▶ JSON type? ──yes──▶ cli__view_feed
 *   (spawn appends)                       │               (cli.c's parser)
 *                                         no                    │
 *                                         ▼                     ▼
 *                              whole lines as they are    readable text
 *
 * The file is the one spawn (or the HTTP agent) is writing; it is opened
 * anew on each read, so a file that appears late, or never, is fine.
 * Plain output goes out a line at a time, so a word is never split
 * between two events (nor a secret, which the engine redacts per event).
 * The HTTP agents write their transcript (a line per tool step, retries,
 * the error) to the same path while they run, so they read as plain.
 * An ACP agent's is its JSON-RPC traffic, which acp.c's view reads.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "agent/cli_int.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

/* A plain line that has not ended goes out once it is this long. */
#define WATCH_PARTIAL_MAX 4096
/* Bytes read from the file at a time. */
#define WATCH_CHUNK 65536
/* agent_transcript_tail reads this many times its max from the end,
 * and at least TAIL_READ_MIN bytes. */
#define TAIL_READ_FACTOR 16
#define TAIL_READ_MIN	 (4 << 20)

struct agent_watch {
	char *path;
	off_t offset;	       /* bytes of the file already read */
	struct cli_view *view; /* the type's JSON parser; NULL: plain */
	struct acp_view *acp;  /* type acp: its transcript's reader */
	struct buf partial;    /* plain: the line not yet ended */
};

/* A watch of path that has read its first offset bytes already. */
static struct agent_watch *
watch_at(const char *type, const char *path, off_t offset)
{
	struct agent_watch *w = xcalloc(1, sizeof(*w));

	w->path = xstrdup(path);
	w->offset = offset;
	w->view = cli__view_new(type);
	if (type && !strcmp(type, "acp"))
		w->acp = acp__view_new();
	w->partial = (struct buf)BUF_INIT;
	return w;
}

struct agent_watch *
agent_watch_new(const char *type, const char *path)
{
	long long size = fs_size(path);

	return watch_at(type, path, size > 0 ? (off_t)size : 0);
}

/*
 * Plain output: whole lines go to out at once, the rest waits in
 * w->partial until its line ends or it grows past WATCH_PARTIAL_MAX.
 */
static void
plain_feed(struct agent_watch *w, const char *p, size_t len, struct buf *out)
{
	const char *nl = memrchr(p, '\n', len);
	size_t whole;

	if (nl) {
		whole = (size_t)(nl - p) + 1;
		buf_add(out, w->partial.ptr, w->partial.len);
		buf_reset(&w->partial);
		buf_add(out, p, whole);
		p += whole;
		len -= whole;
	}
	buf_add(&w->partial, p, len);
	if (w->partial.len >= WATCH_PARTIAL_MAX) {
		buf_add(out, w->partial.ptr, w->partial.len);
		buf_reset(&w->partial);
	}
}

/* Reads what the file gained into the parser (or plain_feed). */
static void
read_new(struct agent_watch *w, struct buf *out)
{
	char *chunk = NULL;
	struct stat st;
	ssize_t n;
	int fd;

	fd = fs_open_nofollow(w->path, O_RDONLY, 0, NULL);
	if (fd < 0)
		return;
	/* a file cut shorter (rewritten) has nothing new for us */
	if (fstat(fd, &st) < 0 || st.st_size <= w->offset ||
	    lseek(fd, w->offset, SEEK_SET) < 0)
		goto out;
	chunk = xmalloc(WATCH_CHUNK);
	for (;;) {
		n = read(fd, chunk, WATCH_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		w->offset += n;
		if (w->acp)
			acp__view_feed(w->acp, chunk, (size_t)n, out);
		else if (w->view)
			cli__view_feed(w->view, chunk, (size_t)n, out);
		else
			plain_feed(w, chunk, (size_t)n, out);
	}
out:
	free(chunk);
	close(fd);
}

size_t
agent_watch_read(struct agent_watch *w, struct buf *out)
{
	size_t before = out->len;

	read_new(w, out);
	return out->len - before;
}

size_t
agent_watch_finish(struct agent_watch *w, struct buf *out)
{
	size_t before = out->len;

	read_new(w, out);
	if (w->acp) {
		acp__view_finish(w->acp, out);
	} else if (w->view) {
		cli__view_finish(w->view, out);
	} else {
		buf_add(out, w->partial.ptr, w->partial.len);
		buf_reset(&w->partial);
	}
	return out->len - before;
}

void
agent_watch_free(struct agent_watch *w)
{
	if (!w)
		return;
	cli__view_free(w->view);
	acp__view_free(w->acp);
	buf_release(&w->partial);
	free(w->path);
	free(w);
}

const char *
agent_watch_session(const struct agent_watch *w)
{
	return w && w->view ? cli__view_session(w->view) : "";
}

void
agent_transcript_tail(const char *type, const char *path, size_t max,
		      struct buf *out)
{
	struct agent_watch *w;
	struct buf all = BUF_INIT;
	long long size = fs_size(path);
	size_t cut = 0;
	const char *nl;

	/*
	 * Only the file's last TAIL_READ_MIN bytes (or TAIL_READ_FACTOR *
	 * max when more) are read, so a flood costs no more than that (a
	 * JSON stream's lines are long: a tool result can fill one). A JSON
	 * line cut at the start is not JSON and is skipped; a plain one is
	 * cut below anyway.
	 */
	long long window = (long long)TAIL_READ_FACTOR * (long long)max;

	if (window < TAIL_READ_MIN)
		window = TAIL_READ_MIN;
	w = watch_at(type, path, size > window ? (off_t)(size - window) : 0);
	agent_watch_finish(w, &all);
	agent_watch_free(w);
	if (all.len > max) {
		cut = all.len - max;
		/* from a line start: the first one at or after the cut */
		nl = memchr(all.ptr + cut - 1, '\n', all.len - cut + 1);
		cut = nl ? (size_t)(nl - all.ptr) + 1 : cut;
	}
	buf_add(out, all.ptr + cut, all.len - cut);
	buf_release(&all);
}
