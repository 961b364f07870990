/*
 * The run's record outside the database: events.jsonl mirrored from the
 * store after every commit, stage outputs kept as versions, and the steer
 * notes waiting for the next stage. The store is the source of truth;
 * these files can always be rebuilt from it.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/run.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

char *
engine__run_file(const struct drive *d, const char *name)
{
	return xasprintf("%s/%s", d->run_dir, name);
}

/* One event as a JSON object; caller decrefs. */
static json_t *
event_json(const struct event *ev)
{
	json_t *o = json_object(), *data;
	char ts[40];

	time_fmt_iso(ev->ts, ts, sizeof(ts));
	json_object_set_new(o, "seq", json_integer(ev->seq));
	json_object_set_new(o, "ts", json_string(ts));
	json_object_set_new(o, "run", json_string(ev->run_id));
	if (ev->task_id) /* events of the task queue say which task */
		json_object_set_new(o, "task", json_integer(ev->task_id));
	json_object_set_new(o, "type", json_string(ev->type));
	if (!strcmp(ev->type, "transition")) {
		json_object_set_new(o, "from", json_lossy_str(ev->from));
		json_object_set_new(o, "to", json_lossy_str(ev->to));
	}
	if (ev->data && (data = json_loads(ev->data, 0, NULL)))
		json_object_set_new(o, "data", data);
	return o;
}

/* Appends one line per event to a buffer; the list callback. */
char *
engine_event_line(const struct event *ev)
{
	json_t *o = event_json(ev);
	char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);

	json_decref(o);
	return line;
}

/* Appends one line per event to a buffer; the list callback. */
static int
append_event(const struct event *ev, void *arg)
{
	char *line = engine_event_line(ev);

	buf_adds(arg, line);
	buf_addch(arg, '\n');
	free(line);
	return 0;
}

/*
 * The seq of the last complete line of the file open at fd. A torn last
 * line (a crash mid-append) is cut off so the next append starts clean.
 */
static int64_t
last_seq(int fd)
{
	char tail[8192];
	off_t size = lseek(fd, 0, SEEK_END), start;
	ssize_t n;
	char *end, *line;
	json_t *o;
	int64_t seq = 0;

	if (size <= 0)
		return 0;
	start = size > (off_t)sizeof(tail) - 1 ? size - (off_t)sizeof(tail) + 1 :
						 0;
	n = pread(fd, tail, (size_t)(size - start), start);
	if (n <= 0)
		return 0;
	tail[n] = '\0';
	end = strrchr(tail, '\n');
	if (!end) {
		if (ftruncate(fd, start) < 0)
			return 0;
		return 0;
	}
	if (end != tail + n - 1 && ftruncate(fd, start + (end - tail) + 1) < 0)
		return 0;
	*end = '\0';
	line = strrchr(tail, '\n');
	line = line ? line + 1 : tail;
	o = json_loads(line, 0, NULL);
	if (o)
		seq = json_integer_value(json_object_get(o, "seq"));
	json_decref(o);
	return seq;
}

int
engine_mirror_events(struct engine *en, const char *run_id, struct err *e)
{
	char *dir = workspace_run_dir(en->ws, run_id);
	char *path = xasprintf("%s/events.jsonl", dir);
	struct buf lines = BUF_INIT;
	struct err me = ERR_INIT;
	int fd = -1, rc;

	rc = fs_mkdir_p(dir, 0755, &me);
	if (rc)
		goto out;
	fd = fs_open_nofollow(path, O_RDWR | O_CREAT, 0644, &me);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	if (flock(fd, LOCK_EX) < 0) {
		rc = err_set(&me, -errno, "cannot lock '%s': %s", path,
			     strerror(errno));
		goto out;
	}
	rc = store_event_list(en->store, run_id, last_seq(fd), NULL,
			      append_event, &lines, &me);
	if (rc || !lines.len)
		goto out;
	if (lseek(fd, 0, SEEK_END) < 0)
		rc = -errno;
	else
		rc = fs_write_all(fd, lines.ptr, lines.len);
	if (rc)
		err_set(&me, rc, "cannot append to '%s': %s", path,
			strerror(-rc));
out:
	if (rc) {
		/* Callers go on without the mirror: the store has it all. */
		log_warn("events.jsonl of run '%s' not updated: %s", run_id,
			 me.msg);
		if (e)
			*e = me;
	}
	if (fd >= 0)
		close(fd);
	buf_release(&lines);
	free(path);
	free(dir);
	return rc;
}

int
engine__keep_output(struct drive *d, const char *artifact,
		    const char *decision, const char *content, struct err *e)
{
	struct store_output o = { 0 };

	o.run_id = d->r.id;
	o.stage = d->r.stage;
	o.artifact = (char *)artifact;
	o.decision = (char *)decision;
	o.content = (char *)content;
	return store_output_add(d->en->store, &o, e);
}

struct steer_ctx {
	struct buf *out;
	int64_t upto;
};

/* Whether a steer event's data says mode (NULL: a follow-up). */
static int
steer_is(json_t *o, const char *mode)
{
	const char *m = json_get_str(o, "mode");

	return mode ? m && !strcmp(m, mode) : !m || strcmp(m, "collect");
}

static int
collect_steer(const struct event *ev, void *arg)
{
	struct steer_ctx *c = arg;
	json_t *o = ev->data ? json_loads(ev->data, 0, NULL) : NULL;
	const char *text = json_get_str(o, "text");

	/* collected guidance is for the task's next run, not this one */
	if (text && steer_is(o, NULL)) {
		buf_addf(c->out, "- %s\n", text);
		c->upto = ev->seq;
	}
	json_decref(o);
	return 0;
}

/*
 * The guidance collected for this run (engine_steer_mode, COLLECT). A
 * task's runs follow one another, so its events are read in order up to
 * this run's first: each run that began on the way took what was
 * collected before it, and what the run before this one collected is
 * this run's.
 */
struct held_ctx {
	const char *run_id;
	struct strvec seen; /* the runs begun so far */
	struct buf text;    /* collected since the last run began */
	int64_t upto;	    /* the seq of its last message */
	int found;	    /* this run's first event was reached */
};

static int
held_steer(const struct event *ev, void *arg)
{
	struct held_ctx *c = arg;
	json_t *o;
	const char *text;

	if (!ev->run_id)
		return 0;
	if (!strvec_has(&c->seen, ev->run_id)) {
		if (!strcmp(ev->run_id, c->run_id))
			return c->found = 1; /* stops the walk */
		strvec_push(&c->seen, ev->run_id);
		buf_reset(&c->text);
		c->upto = 0;
	}
	if (strcmp(ev->type, "steer"))
		return 0;
	o = ev->data ? json_loads(ev->data, 0, NULL) : NULL;
	text = json_get_str(o, "text");
	if (text && steer_is(o, "collect")) {
		buf_addf(&c->text, "- %s\n", text);
		c->upto = ev->seq;
	}
	json_decref(o);
	return 0;
}

int
engine__pending_steers(struct drive *d, struct buf *out, int64_t *upto,
		       struct err *e)
{
	struct steer_ctx c = { out, d->r.steer_seq };
	int rc;

	if (d->r.task_id) {
		struct held_ctx h = { .run_id = d->r.id,
				      .seen = STRVEC_INIT,
				      .text = BUF_INIT };

		rc = store_task_events(d->en->store, d->r.task_id, 0,
				       held_steer, &h, e);
		/* once handed to a stage, steer_seq is past them */
		if (!rc && h.found && h.text.len && h.upto > d->r.steer_seq) {
			buf_addf(out, "%s", h.text.ptr);
			c.upto = h.upto;
		}
		buf_release(&h.text);
		strvec_clear(&h.seen);
		if (rc)
			return rc;
	}
	rc = store_event_list(d->en->store, d->r.id, d->r.steer_seq, "steer",
			      collect_steer, &c, e);
	*upto = c.upto;
	return rc;
}

static int
steer_now_seen(const struct event *ev, void *arg)
{
	int64_t *seq = arg;
	json_t *o = ev->data ? json_loads(ev->data, 0, NULL) : NULL;

	if (json_get_str(o, "text") && steer_is(o, "steer"))
		*seq = ev->seq;
	json_decref(o);
	return *seq != 0;
}

int
engine__steer_now(struct drive *d)
{
	struct err e = ERR_INIT;
	int64_t seq = 0;

	return !store_event_list(d->en->store, d->r.id, d->r.steer_seq,
				 "steer", steer_now_seen, &seq, &e) &&
	       seq;
}
