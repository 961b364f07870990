/*
 * The store front end: picks a backend from the store spec, then passes
 * every call through that backend's table of operations (store_int.h).
 * What all backends have in common lives here too: argument checks, the
 * reading of run references, and fault injection for tests.
 *
 * Fault injection: when the environment variable BATON_FAULT_STORE is
 * N > 0, the Nth write operation of the process (store_run_create,
 * store_run_update, store_run_request, store_event_add and
 * store_output_add, counted together from process start) runs its
 * statements and then fails with BATON_ESTORE instead of committing, so
 * tests can show that nothing is ever half-applied.
 */
#include "util/compat.h"

#include <ctype.h>

#include "core/run.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/err.h"
#include "util/xalloc.h"

/*
 * Store specs by scheme. An entry without ops names a backend this
 * build does not have. A spec that matches no scheme is a SQLite path.
 */
static const struct backend {
	const char *scheme;
	int strip; /* pass the spec without its scheme to open */
	const struct store_ops *ops;
} backends[] = {
	{ "sqlite:", 1, &store_sqlite_ops },
	{ "postgres://", 0, NULL },
	{ "postgresql://", 0, NULL },
};

/* The write operations counted so far by fault injection. */
static long fault_writes;

/*
 * Counts one write operation and says whether it is the one that
 * BATON_FAULT_STORE asks to fail. The variable is read at every write so
 * that a test can set it in the middle of a process.
 */
static int
fault_next(void)
{
	const char *v = getenv("BATON_FAULT_STORE");
	long n;

	fault_writes++;
	if (!v || !*v)
		return 0;
	n = strtol(v, NULL, 10);
	return n > 0 && n == fault_writes;
}

int
store__fault(struct err *e, const char *what)
{
	return err_set(e, BATON_ESTORE,
		       "cannot %s: injected fault (BATON_FAULT_STORE)", what);
}

int
store__ref_matches(const char *ref, const char *id)
{
	const char *p = ref;

	if (*p == 'r')
		p++;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '\0')
		return 1; /* "7" or "r7": the seq alone decides */
	return !strncmp(id, ref, strlen(ref));
}

int
store__migration_number(const char *name)
{
	const char *p = name;
	size_t len = strlen(name);
	long n = 0;

	if (len < 5 || strcmp(name + len - 4, ".sql"))
		return 0;
	for (; isdigit((unsigned char)*p); p++) {
		if (n > 100000)
			return 0;
		n = n * 10 + (*p - '0');
	}
	if (p == name || *p != '-')
		return 0;
	return (int)n;
}

/*
 * Resolves spec to a backend and opens it. "sqlite:PATH" and a plain
 * path mean SQLite; "postgres://" and "postgresql://" name a backend
 * that is not built in yet (BATON_EINVAL); so does any other
 * "scheme://".
 */
int
store_open(const char *spec, struct store **out, struct err *e)
{
	const struct backend *b = NULL;
	const char *target = spec;
	struct store *s = NULL;
	size_t i;
	int rc;

	if (!spec || !*spec)
		return err_set(e, BATON_EINVAL, "cannot open store: no spec");
	for (i = 0; i < ARRAY_SIZE(backends); i++) {
		size_t n = strlen(backends[i].scheme);

		if (!strncmp(spec, backends[i].scheme, n)) {
			b = &backends[i];
			if (b->strip)
				target = spec + n;
			break;
		}
	}
	if (b && !b->ops)
		return err_set(e, BATON_EINVAL,
			       "cannot open store '%s': postgres stores are "
			       "not built into this baton yet",
			       spec);
	if (!b && strstr(spec, "://"))
		return err_set(e, BATON_EINVAL,
			       "cannot open store '%s': unknown kind of store",
			       spec);
	if (!b)
		b = &backends[0];
	if (!*target)
		return err_set(e, BATON_EINVAL,
			       "cannot open store '%s': no path", spec);
	if (b->ops->version != STORE_OPS_VERSION)
		BUG("store backend '%s' has ops version %d, not %d",
		    b->ops->name, b->ops->version, STORE_OPS_VERSION);
	rc = b->ops->open(target, &s, e);
	if (rc < 0)
		return rc;
	s->ops = b->ops;
	s->fault = 0;
	*out = s;
	return 0;
}

void
store_close(struct store *s)
{
	if (s)
		s->ops->close(s);
}

const char *
store_backend(const struct store *s)
{
	return s->ops->name;
}

int
store_schema_version(struct store *s, struct err *e)
{
	return s->ops->schema_version(s, e);
}

int
store_run_create(struct store *s, struct run *r, struct err *e)
{
	if (!r->task)
		return err_set(e, BATON_EINVAL, "cannot create run: no task");
	if (!r->status)
		return err_set(e, BATON_EINVAL,
			       "cannot create run: no status");
	s->fault = fault_next();
	return s->ops->run_create(s, r, e);
}

int
store_run_get(struct store *s, const char *ref, struct run *out,
	      struct err *e)
{
	if (!ref || !*ref)
		return err_set(e, BATON_ENOTFOUND, "no run ''");
	return s->ops->run_get(s, ref, out, e);
}

int
store_run_update(struct store *s, struct run *r, struct event *ev,
		 struct err *e)
{
	if (!r->id)
		return err_set(e, BATON_EINVAL, "cannot update run: no id");
	if (!r->status)
		return err_set(e, BATON_EINVAL,
			       "cannot update run '%s': no status", r->id);
	if (ev && !ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot update run '%s': event has no type",
			       r->id);
	s->fault = fault_next();
	return s->ops->run_update(s, r, ev, e);
}

/*
 * Only the two request flags may be set this way: they are the fields a
 * second process (a "baton pause" in another terminal) writes while the
 * run's driver holds the version.
 */
int
store_run_request(struct store *s, const char *run_id, const char *flag,
		  int value, struct event *ev, struct err *e)
{
	if (!run_id)
		return err_set(e, BATON_EINVAL, "cannot set '%s': no run",
			       flag ? flag : "");
	if (!flag || (strcmp(flag, "pause_requested") &&
		      strcmp(flag, "abort_requested")))
		return err_set(e, BATON_EINVAL,
			       "cannot set '%s' of run '%s': not a request "
			       "flag",
			       flag ? flag : "", run_id);
	if (ev && !ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot set '%s' of run '%s': event has no "
			       "type",
			       flag, run_id);
	s->fault = fault_next();
	return s->ops->run_request(s, run_id, flag, value, ev, e);
}

int
store_event_add(struct store *s, struct event *ev, struct err *e)
{
	if (!ev->type)
		return err_set(e, BATON_EINVAL,
			       "cannot add event: no type");
	s->fault = fault_next();
	return s->ops->event_add(s, ev, e);
}

int
store_run_list(struct store *s, const struct store_run_filter *f,
	       store_run_cb *cb, void *arg, struct err *e)
{
	static const struct store_run_filter all = { NULL, 0 };

	return s->ops->run_list(s, f ? f : &all, cb, arg, e);
}

int
store_event_list(struct store *s, const char *run_id, int64_t after_seq,
		 const char *type, store_event_cb *cb, void *arg,
		 struct err *e)
{
	return s->ops->event_list(s, run_id, after_seq, type, cb, arg, e);
}

int
store_output_add(struct store *s, struct store_output *o, struct err *e)
{
	if (!o->run_id || !o->stage || !o->artifact)
		return err_set(e, BATON_EINVAL,
			       "cannot add output: run, stage and artifact "
			       "are all required");
	s->fault = fault_next();
	return s->ops->output_add(s, o, e);
}

int
store_output_list(struct store *s, const char *run_id, store_output_cb *cb,
		  void *arg, struct err *e)
{
	return s->ops->output_list(s, run_id, cb, arg, e);
}

void
store_output_release(struct store_output *o)
{
	if (!o)
		return;
	FREE_AND_NULL(o->run_id);
	FREE_AND_NULL(o->stage);
	FREE_AND_NULL(o->artifact);
	FREE_AND_NULL(o->decision);
	FREE_AND_NULL(o->content);
}
