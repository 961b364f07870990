/*
 * The PostgreSQL backend of the store (store.h, store_int.h): one
 * database shared by baton processes on any number of hosts. It keeps
 * the behaviour of the SQLite backend (sqlite.c), with three things a
 * server with concurrent writers adds:
 *
 *   - Lost connections. A server restart or a killed session ends the
 *     connection between two statements. Each operation is a try that
 *     is run again, whole, on a fresh connection (pg__again), for up to
 *     PG_RETRY_TOTAL_MS. A COMMIT whose reply was lost is resolved by
 *     asking the server what became of the transaction's xid
 *     (pg__commit), so a write is never applied twice nor lost silently.
 *
 *   - Event order. Seqs come from a sequence, drawn at insert but
 *     visible at commit, so a later seq can become visible before an
 *     earlier one. Readers stop before any event that a transaction
 *     still running could precede (the rule is explained in
 *     sql/pg/001-init.sql): what a follower has seen stays a safe
 *     cursor, as on SQLite.
 *
 *   - Concurrent writers. Every write runs under READ COMMITTED; the
 *     guarded updates (WHERE id AND version) and the row locks of the
 *     fence serialise what must be, and numbers taken as MAX + 1
 *     (versions of outputs and plans) run again when a racer took the
 *     same one (unique_violation). Run numbers stay gapless: they are
 *     taken under a transaction lock.
 *
 * As on SQLite, list callbacks run while no statement is active (rows
 * are fetched a page at a time), so a callback may write through the
 * same handle.
 *
 * The task queue, workers and the merge queue are in postgres_queue.c;
 * the watch connection and the stats in postgres_watch.c; what the files
 * share in pg_int.h.
 */
#include "util/compat.h"

#include <libpq-fe.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/ids.h"
#include "core/run.h"
#include "store/pg_int.h"
#include "store/store.h"
#include "store/store_int.h"
#include "util/buf.h"
#include "util/embed.h"
#include "util/err.h"
#include "util/lazy.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#undef LOG_MODULE
#define LOG_MODULE "store"
#include "util/log.h"

/*
 * Advisory lock keys ("bat0n" and a number, in decimal for the SQL): the
 * session lock held while migrating, and the transaction lock under
 * which run numbers are taken.
 */
#define PG_LOCK_MIGRATE "108170700680704"
#define PG_LOCK_RUN_SEQ "108170700680705"
#define PG_STR_(x)	#x
#define PG_STR(x)	PG_STR_(x)

#define RUN_COLUMNS                                                            \
	"seq, id, task, created_at, updated_at, version"                       \
	RUN_TEXT_MUTABLE(SQL_COMMA_NAME) RUN_INT_MUTABLE(SQL_COMMA_NAME)       \
	", cost_usd" RUN_REQUESTS(SQL_COMMA_NAME)

/*
 * The mutable columns by name, in the order fill_mutable() sends them:
 * the $n of the INSERT and the UPDATE are numbered from this list.
 */
#define SQL_NAME_STR(f) #f,
static const char *const run_mutable[] = {
	RUN_TEXT_MUTABLE(SQL_NAME_STR) RUN_INT_MUTABLE(SQL_NAME_STR) "cost_usd"
};
#undef SQL_NAME_STR
#define NR_RUN_MUTABLE ARRAY_SIZE(run_mutable)
/* seq, id, task, created_at, updated_at, version; then the requests. */
#define NR_RUN_PARAMS (6 + NR_RUN_MUTABLE + 2)

/* The parameters of a run insert or update, as text. */
struct run_params {
	const char *v[NR_RUN_PARAMS];
	char num[NR_RUN_PARAMS][32];
	int n;
};

/*
 * The part of the event query that finds where a reader must stop: the
 * first visible event after a hole whose horizon this snapshot has not
 * passed ($1 is after_seq). See sql/pg/001-init.sql.
 */
#define SQL_EVENTS_SAFE                                                        \
	"WITH stop AS (SELECT MIN(e.seq) AS seq FROM events e"                 \
	" WHERE e.horizon > pg_snapshot_xmin(pg_current_snapshot())"           \
	" AND e.seq > $1::bigint + 1 AND NOT EXISTS"                           \
	" (SELECT 1 FROM events p WHERE p.seq = e.seq - 1))"
#define SQL_BELOW_STOP                                                         \
	"seq < COALESCE((SELECT seq FROM stop), 9223372036854775807)"

struct pg_store *
pg__store(struct store *s)
{
	return (struct pg_store *)s;
}

const char *
pg__int(char *buf, int64_t v)
{
	snprintf(buf, 24, "%lld", (long long)v);
	return buf;
}

const char *
pg__id_param(char *buf, int64_t v)
{
	return v ? pg__int(buf, v) : NULL;
}

char *
pg__text(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return NULL;
	return xstrdup(PQgetvalue(res, row, col));
}

int64_t
pg__int64(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return 0;
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* The length of the first line of msg. */
static int
first_line(const char *msg)
{
	return (int)strcspn(msg, "\n");
}

/*
 * SQLSTATEs that say the session is gone rather than the statement
 * wrong: class 08 (connection exception) and the server shutting down,
 * crashing or still starting.
 */
static int
state_is_lost(const char *state)
{
	return state && (!strncmp(state, "08", 2) || !strcmp(state, "57P01") ||
			 !strcmp(state, "57P02") || !strcmp(state, "57P03"));
}

int
pg__fail(struct pg_store *ps, const PGresult *res, const char *what,
	 struct err *e)
{
	const char *state = NULL, *msg = NULL, *detail = NULL;

	if (res) {
		state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
		detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	}
	if (!msg || !*msg)
		msg = PQerrorMessage(ps->conn);
	if (!*msg)
		msg = "unknown error";
	snprintf(ps->state, sizeof(ps->state), "%s", state ? state : "");
	ps->lost = PQstatus(ps->conn) != CONNECTION_OK || state_is_lost(state);
	if (!ps->lost && state && !strcmp(state, PG_STATE_FENCED) && detail &&
	    store__fence_verdict(&ps->base, strtoll(detail, NULL, 10), what,
				 e) < 0)
		return BATON_EFENCED;
	return err_set(e, BATON_ESTORE, "cannot %s: %.*s", what,
		       first_line(msg), msg);
}

/* FNV-1a of s: a cheap first test before comparing statement texts. */
static uint64_t
text_hash(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

const char *
pg__prepared(struct pg_store *ps, const char *sql, int n,
	     char name[static 16])
{
	uint64_t h = text_hash(sql);
	PGresult *res;
	int i;

	for (i = 0; i < ps->nstmts; i++)
		if (ps->stmt_hash[i] == h && !strcmp(ps->stmt_sql[i], sql))
			goto found;
	if (ps->nstmts == PG_STMTS_MAX)
		return NULL;
	snprintf(name, 16, "s%d", i);
	res = PQprepare(ps->conn, name, sql, n, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		PQclear(res);
		return NULL;
	}
	PQclear(res);
	ps->stmt_sql[i] = xstrdup(sql);
	ps->stmt_hash[i] = h;
	ps->nstmts++;
found:
	snprintf(name, 16, "s%d", i);
	return name;
}

void
pg__forget_prepared(struct pg_store *ps)
{
	while (ps->nstmts > 0) {
		ps->nstmts--;
		FREE_AND_NULL(ps->stmt_sql[ps->nstmts]);
	}
}

PGresult *
pg__exec(struct pg_store *ps, const char *sql, int n,
	 const char *const *params, const char *what, struct err *e)
{
	PGresult *res;
	ExecStatusType st;
	char name[16];

	/*
	 * A statement of an aborted transaction cannot be prepared: run
	 * that one unnamed (it fails the same way).
	 */
	if (n > 0 && PQtransactionStatus(ps->conn) != PQTRANS_INERROR &&
	    pg__prepared(ps, sql, n, name))
		res = PQexecPrepared(ps->conn, name, n, params, NULL, NULL, 0);
	else
		res = PQexecParams(ps->conn, sql, n, NULL, params, NULL, NULL,
				   0);
	st = PQresultStatus(res);
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return res;
	pg__fail(ps, res, what, e);
	PQclear(res);
	return NULL;
}

int
pg__run(struct pg_store *ps, const char *sql, int n,
	const char *const *params, const char *what, struct err *e)
{
	PGresult *res = pg__exec(ps, sql, n, params, what, e);

	if (!res)
		return BATON_ESTORE;
	PQclear(res);
	return 0;
}

/* pg__exec for a query of one integer (a MAX, a COUNT) into *out. */
static int
exec_int(struct pg_store *ps, const char *sql, int n,
	 const char *const *params, int64_t *out, const char *what,
	 struct err *e)
{
	PGresult *res = pg__exec(ps, sql, n, params, what, e);

	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) > 0)
		*out = pg__int64(res, 0, 0);
	PQclear(res);
	return 0;
}

/* The number of rows an UPDATE changed. */
static int64_t
changed(const PGresult *res)
{
	return strtoll(PQcmdTuples((PGresult *)res), NULL, 10);
}

/*
 * The server's notices (NOTICE, WARNING; "relation already exists,
 * skipping") would go to stderr: baton's output is its own.
 */
static void
notice_quiet(void *arg, const char *msg)
{
	(void)arg;
	log_debug("%s: %.*s", __func__, first_line(msg), msg);
}

PGconn *
pg__connect(const struct pg_store *ps, int *pid, int64_t *offset,
	    struct err *e)
{
	const char *const keys[] = { "connect_timeout", "dbname",
				     "fallback_application_name", NULL };
	const char *const vals[] = { "10", ps->url, "baton", NULL };
	PGconn *c = NULL;
	PGresult *res = NULL;
	const char *msg;
	int64_t before, after;

	/* libpq is loaded now, the first time (util/lazy.h) */
	if (lazy_pq_load(e) < 0) {
		err_prefix(e, "cannot open store '%s'", ps->safe_url);
		return NULL;
	}
	c = PQconnectdbParams(keys, vals, 1);
	if (PQstatus(c) == CONNECTION_OK) {
		PQsetNoticeProcessor(c, notice_quiet, NULL);
		before = time_host_ms();
		res = PQexec(c, "SET TIME ZONE 'UTC';"
				" SELECT pg_backend_pid(),"
				" (extract(epoch FROM clock_timestamp())"
				" * 1000)::bigint");
		after = time_host_ms();
		if (PQresultStatus(res) == PGRES_TUPLES_OK &&
		    PQntuples(res) == 1) {
			if (pid)
				*pid = (int)pg__int64(res, 0, 0);
			if (offset)
				*offset = pg__int64(res, 0, 1) -
					  (before + after) / 2;
			PQclear(res);
			return c;
		}
	}
	msg = PQerrorMessage(c);
	err_set(e, BATON_ESTORE, "cannot open store '%s': %.*s", ps->safe_url,
		first_line(msg), msg);
	PQclear(res);
	PQfinish(c);
	return NULL;
}

/*
 * The URL for messages: the password of "user:password@" and any
 * "password=" parameter are left out.
 */
static char *
safe_url(const char *url)
{
	struct buf b = BUF_INIT;
	const char *p = strstr(url, "://"), *at, *colon, *q, *end;

	if (!p)
		return xstrdup(url);
	p += 3;
	at = p + strcspn(p, "@/?");
	colon = memchr(p, ':', at - p);
	if (*at == '@' && colon) {
		buf_add(&b, url, colon - url);
		url = at;
	}
	for (q = url; (q = strstr(q, "password=")); q = end) {
		end = q + strcspn(q, "&");
		if (q == url || (q[-1] != '?' && q[-1] != '&'))
			continue;
		buf_add(&b, url, q - url);
		url = *end ? end + 1 : end;
	}
	buf_adds(&b, url);
	if (b.len && (b.ptr[b.len - 1] == '&' || b.ptr[b.len - 1] == '?'))
		buf_setlen(&b, b.len - 1);
	return buf_detach(&b, NULL);
}

/* The wait before reconnect attempt number tries (from 0). */
static int64_t
backoff(int tries)
{
	int64_t ms = PG_RETRY_FIRST_MS;

	while (tries-- > 0 && ms < PG_RETRY_MAX_MS)
		ms *= 2;
	return ms < PG_RETRY_MAX_MS ? ms : PG_RETRY_MAX_MS;
}

static void
sleep_ms(int64_t ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Waits its turn and replaces ps->conn by a fresh connection, as many
 * times as the retry budget allows (*tries counts the waits already
 * spent). Returns 0 when connected, -1 when the budget is used up.
 */
static int
reconnect(struct pg_store *ps, int *tries)
{
	int64_t spent, delay;
	PGconn *c;
	int i, pid;

	for (;;) {
		for (spent = 0, i = 0; i < *tries; i++)
			spent += backoff(i);
		delay = backoff(*tries);
		if (spent + delay > PG_RETRY_TOTAL_MS)
			return -1;
		sleep_ms(delay);
		(*tries)++;
		c = pg__connect(ps, &pid, &ps->hello_offset, NULL);
		if (c) {
			PQfinish(ps->conn);
			ps->pid = pid;
			ps->hello_at = time_mono_ms();
			pg__forget_prepared(ps);
			ps->conn = c;
			ps->in_tx = 0;
			return 0;
		}
	}
}

int
pg__again(struct pg_store *ps, int rc, int *tries, struct err *e)
{
	int lost = ps->lost;

	ps->lost = 0;
	if (rc != BATON_ESTORE || !lost)
		return 0;
	if (*tries == 0)
		log_warn("connection to %s lost (%s); reconnecting",
			 ps->safe_url, e ? e->msg : "");
	if (reconnect(ps, tries) < 0) {
		log_warn("connection to %s lost; gave up reconnecting after "
			 "%d s",
			 ps->safe_url, PG_RETRY_TOTAL_MS / 1000);
		return 0;
	}
	log_warn("connection to %s lost; reconnected", ps->safe_url);
	if (e)
		*e = (struct err)ERR_INIT;
	return 1;
}

void
pg__rollback(struct pg_store *ps)
{
	PGTransactionStatusType ts = PQtransactionStatus(ps->conn);

	ps->in_tx = 0;
	ps->notify_events = ps->notify_work = 0;
	if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR)
		PQclear(PQexec(ps->conn, "ROLLBACK"));
}

/*
 * Every transaction's BEGIN: READ COMMITTED whatever the server's
 * default, for the event horizon and the run numbers need each statement
 * to see what committed before it.
 */
#define BEGIN_TX "BEGIN ISOLATION LEVEL READ COMMITTED"

/*
 * The statement that takes the xid and, under a fence, checks the
 * fencing row's lease_token on the server (baton_check of
 * pg/016-one-message.sql: a stale token raises PG_STATE_FENCED, which
 * aborts the transaction and pg__fail turns into check_fence's error),
 * sent in the message of the BEGIN (pg__begin_fenced, pg__begin_exec,
 * pg__exec_commit). The row lock (FOR NO KEY UPDATE) holds until the
 * commit, so a claim that would change the token waits for this write.
 * The task id and token are its parameters, held in num and p. With
 * fenced 0, or no fence set, it takes the xid alone.
 */
static struct pg_stmt
xid_fence_stmt(const struct pg_store *ps, int fenced, char num[2][24],
	       const char *p[2])
{
	if (!fenced || !ps->base.fence_task)
		return (struct pg_stmt){ "SELECT pg_current_xact_id()", 0,
					 NULL };
	p[0] = pg__int(num[0], ps->base.fence_task);
	p[1] = pg__int(num[1], ps->base.fence_token);
	return (struct pg_stmt){
		"SELECT pg_current_xact_id(),"
		" baton_check(f.t IS NOT DISTINCT FROM $2::bigint, '"
		PG_STATE_FENCED "', COALESCE(f.t, -1)::text)"
		" FROM (SELECT (SELECT lease_token FROM tasks"
		" WHERE id = $1::bigint FOR NO KEY UPDATE) AS t) AS f",
		2, p
	};
}

/* Reads xid_fence_stmt's row: the xid into ps->xid. */
static int
xid_fence_read(struct pg_store *ps, const PGresult *res, const char *what,
	       struct err *e)
{
	if (PQntuples(res) != 1)
		return err_set(e, BATON_ESTORE, "cannot %s: no xid came back",
			       what);
	snprintf(ps->xid, sizeof(ps->xid), "%s", PQgetvalue(res, 0, 0));
	return 0;
}

/*
 * After a COMMIT whose reply never came: reconnects and asks what became
 * of the transaction. Committed is success. Aborted (or forgotten: NULL)
 * sets ps->lost so that the try runs again. Still running (the old
 * session has not noticed yet) asks again after the next wait.
 */
static int
resolve_commit(struct pg_store *ps, const char *what, struct err *e)
{
	char xid[sizeof(ps->xid)];
	const char *p[] = { xid };
	PGresult *res;
	char *status;
	int tries = 0, done;

	memcpy(xid, ps->xid, sizeof(xid));
	while (reconnect(ps, &tries) == 0) {
		res = pg__exec(ps, "SELECT pg_xact_status($1::xid8)", 1, p,
			       what, NULL);
		if (!res)
			continue;
		status = pg__text(res, 0, 0);
		PQclear(res);
		done = !status || strcmp(status, "in progress");
		if (status && !strcmp(status, "committed")) {
			free(status);
			ps->lost = 0;
			return 0;
		}
		free(status);
		if (done) {
			ps->lost = 1;
			return err_set(e, BATON_ESTORE,
				       "cannot %s: the connection was lost "
				       "during COMMIT, which did not take "
				       "effect",
				       what);
		}
	}
	ps->lost = 0;
	return err_set(e, BATON_ESTORE,
		       "cannot %s: the connection was lost during COMMIT and "
		       "the outcome is unknown",
		       what);
}

/*
 * Waits until server process pid, of a session whose connection was
 * lost, runs nothing: its client is gone, but a statement it was
 * running (one waiting for a lock, say) goes on, COMMIT included, until
 * it next writes to the socket. Asks pg_stat_activity (a fresh snapshot
 * each time: each is its own transaction) after waits that grow as
 * reconnect's do, up to PG_RETRY_TOTAL_MS. 0 once it runs nothing (or
 * is gone), or an error.
 */
int
pg__wait_idle(struct pg_store *ps, int pid, const char *what, struct err *e)
{
	struct params p = { 0 };
	int64_t spent = 0, delay, busy;
	int tries;

	param_int(&p, pid);
	for (tries = 0;; tries++) {
		busy = 0;
		if (pg__query_int(ps,
				  "SELECT COUNT(*) FROM pg_stat_activity"
				  " WHERE pid = $1 AND state = 'active'"
				  " AND pid <> pg_backend_pid()",
				  &p, &busy, what, e))
			return BATON_ESTORE;
		if (!busy)
			return 0;
		delay = backoff(tries) / 10;
		if (spent + delay > PG_RETRY_TOTAL_MS)
			return err_set(e, BATON_ESTORE,
				       "cannot %s: the session that lost its "
				       "connection (server process %d) is "
				       "still running after %d s",
				       what, pid, PG_RETRY_TOTAL_MS / 1000);
		sleep_ms(delay);
		spent += delay;
	}
}

/* The most statements of one message (pipe_run). */
#define PIPE_MAX (2 + PG_EXEC_MAX + 1 + PG_NOTIFY_MAX)

/*
 * Ends pipeline mode, reading what is left up to the Sync (synced: one
 * was sent). A connection that cannot get there (it broke, or a send
 * failed and so does the Sync) has its socket shut: the next call fails
 * as a lost connection and pg__again opens a fresh one, where a session
 * left in pipeline mode would refuse every PQexec.
 */
static void
pipe_exit(struct pg_store *ps, int synced)
{
	PGresult *res;
	int nulls = 0;

	if (!synced && PQstatus(ps->conn) == CONNECTION_OK)
		synced = PQpipelineSync(ps->conn);
	while (!PQexitPipelineMode(ps->conn)) {
		if (!synced || PQstatus(ps->conn) != CONNECTION_OK ||
		    nulls > 1) {
			shutdown(PQsocket(ps->conn), SHUT_RDWR);
			return;
		}
		res = PQgetResult(ps->conn);
		nulls = res ? 0 : nulls + 1;
		PQclear(res);
	}
}

/*
 * Sends the n statements of q as one message, in libpq's pipeline mode:
 * each by the extended protocol, prepared once a session (pg__prepared;
 * the BEGIN and COMMIT too: parsed and planned again at every message
 * they cost about 60 us of the server's time a settle), else unnamed;
 * its parameters as text; one Sync at the end. So no parameter is
 * parsed as SQL. The server runs them in order; once one fails it skips
 * the rest (each comes back as PGRES_PIPELINE_ABORTED) up to the Sync,
 * as in one simple query. Reads one result a statement into res (the
 * caller's to PQclear) and returns how many the server answered: fewer
 * than n when the connection broke (PQerrorMessage says how).
 */
static int
pipe_run(struct pg_store *ps, const struct pg_stmt *q, int n,
	 PGresult **res)
{
	char names[PIPE_MAX][16];
	const char *name[PIPE_MAX];
	int aborted = PQtransactionStatus(ps->conn) == PQTRANS_INERROR;
	int i, got = 0, synced = 0;
	PGresult *more;

	assert(n <= PIPE_MAX);
	for (i = 0; i < n; i++) /* see pg__exec on an aborted one */
		name[i] = aborted ? NULL
				  : pg__prepared(ps, q[i].sql, q[i].n,
						 names[i]);
	if (!PQenterPipelineMode(ps->conn))
		return 0;
	for (i = 0; i < n; i++)
		if (!(name[i] ? PQsendQueryPrepared(ps->conn, name[i], q[i].n,
						    q[i].params, NULL, NULL, 0)
			      : PQsendQueryParams(ps->conn, q[i].sql, q[i].n,
						  NULL, q[i].params, NULL, NULL,
						  0)))
			goto out;
	if (!(synced = PQpipelineSync(ps->conn)))
		goto out;
	for (; got < n && (res[got] = PQgetResult(ps->conn)); got++) {
		while ((more = PQgetResult(ps->conn))) { /* to its end */
			if (PQresultStatus(more) == PGRES_FATAL_ERROR) {
				PQclear(res[got]);
				res[got] = more;
			} else {
				PQclear(more);
			}
		}
		if (PQstatus(ps->conn) != CONNECTION_OK) {
			PQclear(res[got]); /* the break, not an answer */
			res[got] = NULL;
			break;
		}
	}
out:
	pipe_exit(ps, synced);
	return got;
}

/*
 * The statements of pg__commit and pg__exec_commit after the COMMIT:
 * its NOTIFYs (see PG_CHANNEL_EVENTS in pg_int.h for why not inside it).
 * Only the COMMIT's result decides; a NOTIFY that fails after it is
 * logged: the write is done, and listeners fall back on their sweeps.
 */
static void
after_read(PGresult *const *res, int n, const char *what)
{
	int i;

	for (i = 0; i < n; i++)
		if (PQresultStatus(res[i]) == PGRES_FATAL_ERROR)
			log_warn("cannot notify after %s: %s", what,
				 PQresultErrorMessage(res[i]));
}

/*
 * Appends to the nq statements of q the commit (COMMIT, or ROLLBACK)
 * and after it the NOTIFYs of after (NULL: none); returns the new count.
 */
static int
commit_stmts(struct pg_stmt *q, int nq, const char *commit,
	     const struct pg_notify *after)
{
	int k;

	q[nq++] = (struct pg_stmt){ commit, 0, NULL };
	for (k = 0; after && k < after->n; k++)
		q[nq++] = after->stmts[k];
	return nq;
}

/*
 * pg__begin_fenced and pg__begin_exec (xid XID_FENCED), pg__begin
 * (XID_ONLY), pg__begin_query (XID_NONE) and exec_commit (commit: "COMMIT" or,
 * under fault injection, "ROLLBACK"; after: the NOTIFYs after it, or
 * NULL), as one message (pipe_run): the BEGIN, the xid (XID_FENCED: and
 * under a fence the fencing row, locked), the n statements, whose
 * results go into out, then the COMMIT and after.
 */
enum { XID_NONE, XID_ONLY, XID_FENCED };

static int
begin_exec(struct pg_store *ps, const struct pg_stmt *stmts, int n,
	   int xid, const char *commit, const struct pg_notify *after,
	   PGresult **out, const char *what, struct err *e)
{
	struct pg_stmt q[PIPE_MAX];
	PGresult *res[PIPE_MAX] = { NULL };
	char num[2][24];
	const char *fp[2];
	int first, last, nq = 0, got, k, rc = 0;

	assert(n >= 0 && n <= PG_EXEC_MAX);
	q[nq++] = (struct pg_stmt){ BEGIN_TX, 0, NULL };
	if (xid != XID_NONE)
		q[nq++] = xid_fence_stmt(ps, xid == XID_FENCED, num, fp);
	first = nq;
	for (k = 0; k < n; k++)
		q[nq++] = stmts[k];
	last = first + n + !!commit;
	if (commit)
		nq = commit_stmts(q, nq, commit, after);
	ps->unsure = 0;
	ps->state[0] = '\0';
	ps->notify_events = ps->notify_work = 0;
	ps->xid[0] = '\0';
	got = pipe_run(ps, q, nq, res);
	for (k = 0; k < got && k < last && rc == 0; k++) {
		ExecStatusType st = PQresultStatus(res[k]);

		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
			rc = pg__fail(ps, res[k], what, e);
		else if (k == 1 && xid != XID_NONE)
			rc = xid_fence_read(ps, res[k], what, e);
	}
	if (rc == 0 && got < last)
		rc = pg__fail(ps, NULL, what, e); /* the connection broke */
	if (rc == 0)
		after_read(res + last, got - last, what);
	if (rc < 0 && commit && ps->lost) {
		/*
		 * The COMMIT was sent and the connection is gone: with
		 * every result before the COMMIT's in, its xid says what
		 * became of it; else the caller finds out (ps->unsure).
		 */
		if (ps->xid[0] && got >= first + n)
			rc = resolve_commit(ps, what, e);
		else
			ps->unsure = 1;
	}
	ps->in_tx = PQtransactionStatus(ps->conn) != PQTRANS_IDLE;
	for (k = 0; k < nq; k++) {
		if (rc == 0 && k >= first && k < first + n)
			out[k - first] = res[k];
		else
			PQclear(res[k]);
	}
	if (rc < 0) {
		for (k = 0; k < n; k++)
			out[k] = NULL;
		pg__rollback(ps);
	}
	return rc;
}

int
pg__begin_fenced(struct pg_store *ps, const char *what, struct err *e)
{
	return begin_exec(ps, NULL, 0, XID_FENCED, NULL, NULL, NULL, what, e);
}

int
pg__begin(struct pg_store *ps, const char *what, struct err *e)
{
	return begin_exec(ps, NULL, 0, XID_ONLY, NULL, NULL, NULL, what, e);
}

int
pg__begin_exec(struct pg_store *ps, const struct pg_stmt *stmts, int n,
	       PGresult **out, const char *what, struct err *e)
{
	return begin_exec(ps, stmts, n, XID_FENCED, NULL, NULL, out, what, e);
}

/*
 * pg__exec_commit, fenced (XID_FENCED), with the xid alone (XID_ONLY) or
 * without (XID_NONE).
 */
static int
exec_commit(struct pg_store *ps, int xid, const struct pg_stmt *stmts, int n,
	    const struct pg_notify *after, PGresult **out, const char *what,
	    struct err *e)
{
	int fault = ps->base.fault, rc;

	ps->base.fault = 0;
	rc = begin_exec(ps, stmts, n, xid, fault ? "ROLLBACK" : "COMMIT",
			fault ? NULL : after, out, what, e);
	if (rc == 0 && fault) {
		for (; n > 0; n--) {
			PQclear(out[n - 1]);
			out[n - 1] = NULL;
		}
		rc = store__fault(e, what);
	}
	return rc;
}

int
pg__exec_commit(struct pg_store *ps, const struct pg_stmt *stmts, int n,
		const struct pg_notify *after, PGresult **out,
		const char *what, struct err *e)
{
	return exec_commit(ps, XID_FENCED, stmts, n, after, out, what, e);
}

int
pg__exec_commit_unfenced(struct pg_store *ps, const struct pg_stmt *stmts,
			 int n, PGresult **out, const char *what,
			 struct err *e)
{
	return exec_commit(ps, XID_ONLY, stmts, n, NULL, out, what, e);
}

int
pg__exec_commit_xidless(struct pg_store *ps, const struct pg_stmt *stmts,
			int n, const struct pg_notify *after, PGresult **out,
			const char *what, struct err *e)
{
	return exec_commit(ps, XID_NONE, stmts, n, after, out, what, e);
}

PGresult *
pg__begin_query(struct pg_store *ps, const struct pg_stmt *stmt,
		const char *what, struct err *e)
{
	PGresult *res;

	if (begin_exec(ps, stmt, 1, XID_NONE, NULL, NULL, &res, what, e))
		return NULL;
	return res;
}

void
pg__notify_add(struct pg_notify *nf, const char *sql, int nparams,
	       int64_t a, int64_t b)
{
	int i = nf->n++;

	assert(i < PG_NOTIFY_MAX && nparams <= 2);
	nf->params[i][0] = pg__int(nf->num[i][0], a);
	nf->params[i][1] = pg__int(nf->num[i][1], b);
	nf->stmts[i] = (struct pg_stmt){ sql, nparams, nf->params[i] };
}

/*
 * Commits the open transaction and sends the NOTIFYs it asked for
 * (ps->notify_events, ps->notify_work) after it, in one message.
 */
int
pg__commit(struct pg_store *ps, const char *what, struct err *e)
{
	struct pg_notify nf = { .n = 0 };
	struct pg_stmt q[1 + PG_NOTIFY_MAX];
	PGresult *res[1 + PG_NOTIFY_MAX] = { NULL };
	int rc = 0, got, k;

	if (ps->base.fault) {
		ps->base.fault = 0;
		ps->lost = 0;
		ps->notify_events = ps->notify_work = 0;
		return store__fault(e, what);
	}
	if (ps->notify_events)
		pg__notify_add(&nf, PG_NOTIFY_EVENTS_SQL, 0, 0, 0);
	if (ps->notify_work)
		pg__notify_add(&nf, PG_NOTIFY_WORK_SQL, 1, ps->notify_work, 0);
	ps->notify_events = ps->notify_work = 0;
	got = pipe_run(ps, q, commit_stmts(q, 0, "COMMIT", &nf), res);
	if (got == 0 || PQresultStatus(res[0]) != PGRES_COMMAND_OK)
		rc = pg__fail(ps, got ? res[0] : NULL, what, e);
	else
		after_read(res + 1, got - 1, what);
	for (k = 0; k < got; k++)
		PQclear(res[k]);
	ps->in_tx = 0;
	if (rc < 0 && ps->lost)
		rc = resolve_commit(ps, what, e);
	return rc;
}

void
pg__notify_work(struct pg_store *ps, int n)
{
	ps->notify_work += n;
}

/* ---- migrations ------------------------------------------------------ */

/* The number of an embedded "pg/NNN-name.sql", or 0 for any other file. */
static int
pg_migration_number(const char *name)
{
	if (strncmp(name, "pg/", 3))
		return 0;
	return store__migration_number(name + 3);
}

/* The highest migration recorded in schema_migrations, into *out. */
static int
schema_version(struct pg_store *ps, int64_t *out, struct err *e)
{
	return exec_int(ps,
			"SELECT COALESCE(MAX(version), 0)"
			" FROM schema_migrations",
			0, NULL, out, "read the schema version", e);
}

/* Applies one migration file and records it, in one transaction. */
static int
apply_migration(struct pg_store *ps, int n, const struct embedded_file *f,
		struct err *e)
{
	char what[256], nb[24], tb[24];
	const char *p[] = { pg__int(nb, n), f->name,
			    pg__int(tb, time_now_ms()) };
	PGresult *res;
	int rc;

	snprintf(what, sizeof(what), "apply migration %s", f->name);
	rc = pg__begin(ps, what, e);
	if (rc < 0)
		return rc;
	res = PQexec(ps->conn, f->text);
	if (PQresultStatus(res) != PGRES_COMMAND_OK &&
	    PQresultStatus(res) != PGRES_TUPLES_OK)
		rc = pg__fail(ps, res, what, e);
	PQclear(res);
	if (rc == 0)
		rc = pg__run(ps,
			     "INSERT INTO schema_migrations"
			     " (version, name, applied_at) VALUES ($1, $2, $3)",
			     3, p, what, e);
	if (rc == 0) {
		res = PQexec(ps->conn, "COMMIT");
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			rc = pg__fail(ps, res, what, e);
		PQclear(res);
	}
	pg__rollback(ps);
	return rc;
}

/*
 * Whether this database has every embedded migration and none newer, in
 * one round trip (a statement run once a session is not prepared): what
 * nearly every open finds, where the way through migrate's lock took
 * twenty. No (0) when it cannot tell, schema_migrations missing for one:
 * migrate then looks under its lock.
 */
static int
migrated(struct pg_store *ps, const struct buf *versions, int64_t latest)
{
	char lb[24];
	const char *p[] = { versions->ptr, pg__int(lb, latest) };
	PGresult *res = PQexecParams(
		ps->conn,
		"SELECT COUNT(*) FILTER (WHERE version = ANY ($1::int[]))"
		" = cardinality($1::int[]) AND COALESCE(MAX(version), 0) <= $2"
		" FROM schema_migrations",
		2, NULL, p, NULL, NULL, 0);
	int yes = PQresultStatus(res) == PGRES_TUPLES_OK &&
		  PQntuples(res) == 1 && !strcmp(PQgetvalue(res, 0, 0), "t");

	PQclear(res);
	return yes;
}

/*
 * Applies the embedded pg/ migrations this database has not seen, in
 * number order, under a session advisory lock so that processes opening
 * the same database at once take turns instead of racing to create the
 * same tables. A database migrated by a newer baton is refused.
 */
static int
migrate(struct pg_store *ps, struct err *e)
{
	const char *what = "read the schema version";
	const struct embedded_file *f;
	struct buf versions = BUF_INIT;
	int64_t cur = 0, latest = 0, have;
	char nb[24];
	const char *p[] = { nb };
	int rc, n, up;

	buf_adds(&versions, "{");
	for (f = embedded_files; f->name; f++) {
		n = pg_migration_number(f->name);
		if (!n)
			continue;
		buf_addf(&versions, "%s%d", versions.len > 1 ? "," : "", n);
		if (n > latest)
			latest = n;
	}
	buf_adds(&versions, "}");
	up = migrated(ps, &versions, latest);
	buf_release(&versions);
	if (up)
		return 0;
	rc = pg__run(ps, "SELECT pg_advisory_lock(" PG_LOCK_MIGRATE ")",
		     0, NULL, "lock the schema", e);
	if (rc < 0)
		return rc;
	rc = pg__run(ps,
		     "CREATE TABLE IF NOT EXISTS schema_migrations ("
		     " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
		     " applied_at BIGINT NOT NULL)",
		     0, NULL, what, e);
	if (rc == 0)
		rc = schema_version(ps, &cur, e);
	if (rc == 0 && cur > latest)
		rc = err_set(e, BATON_ESTORE,
			     "schema version %lld is newer than this baton "
			     "knows (%lld): upgrade baton",
			     (long long)cur, (long long)latest);
	for (n = 1; rc == 0 && n <= latest; n++) {
		for (f = embedded_files; f->name; f++)
			if (pg_migration_number(f->name) == n)
				break;
		if (!f->name)
			continue;
		have = 0;
		pg__int(nb, n);
		rc = exec_int(ps,
			      "SELECT COUNT(*) FROM schema_migrations"
			      " WHERE version = $1",
			      1, p, &have, what, e);
		if (rc == 0 && !have)
			rc = apply_migration(ps, n, f, e);
	}
	PQclear(PQexec(ps->conn,
		       "SELECT pg_advisory_unlock(" PG_LOCK_MIGRATE ")"));
	return rc;
}

/* ---- the handle ------------------------------------------------------ */

static void
pg_close(struct store *s)
{
	struct pg_store *ps = pg__store(s);

	PQfinish(ps->conn);
	pg__forget_prepared(ps);
	pg__watch_close(ps);
	free(ps->url);
	free(ps->safe_url);
	free(ps);
}

/*
 * Connects to url (a libpq URL, passed whole) and migrates. Every error
 * names the URL, without its password.
 */
static int
pg_open(const char *url, struct store **out, struct err *e)
{
	struct pg_store *ps = xcalloc(1, sizeof(*ps));
	int rc = 0;

	ps->base.ops = &store_postgres_ops;
	ps->url = xstrdup(url);
	ps->safe_url = safe_url(url);
	ps->watch_fd = -1;
	ps->watch_dead[0] = ps->watch_dead[1] = -1;
	ps->conn = pg__connect(ps, &ps->pid, &ps->hello_offset, e);
	ps->hello_at = time_mono_ms();
	if (!ps->conn) {
		rc = BATON_ESTORE;
		goto out;
	}
	rc = migrate(ps, e);
	if (rc < 0) {
		err_prefix(e, "cannot open store '%s'", ps->safe_url);
		goto out;
	}
	*out = &ps->base;
	ps = NULL;
out:
	if (ps)
		pg_close(&ps->base);
	return rc;
}

static int
pg_schema_version(struct store *s, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t v = 0;
	int rc, tries = 0;

	do
		rc = schema_version(ps, &v, e);
	while (pg__again(ps, rc, &tries, e));
	return rc < 0 ? rc : (int)v;
}

/* ---- runs ------------------------------------------------------------ */

/* Adds a number parameter to p. */
static void
run_param_int(struct run_params *p, int64_t v)
{
	p->v[p->n] = pg__int(p->num[p->n], v);
	p->n++;
}

/* Adds the mutable fields of r to p, in the order of run_mutable. */
static void
fill_mutable(struct run_params *p, const struct run *r)
{
#define P_TEXT(f) p->v[p->n++] = r->f;
#define P_INT(f)  run_param_int(p, (int64_t)r->f);
	RUN_TEXT_MUTABLE(P_TEXT)
	RUN_INT_MUTABLE(P_INT)
#undef P_TEXT
#undef P_INT
	snprintf(p->num[p->n], sizeof(p->num[p->n]), "%.17g", r->cost_usd);
	p->v[p->n] = p->num[p->n];
	p->n++;
}

/* The INSERT of a run: every column of RUN_COLUMNS, $1 to $n in order. */
static char *
sql_run_insert(void)
{
	struct buf b = BUF_INIT;
	size_t i;

	buf_adds(&b, "INSERT INTO runs (" RUN_COLUMNS ") VALUES ($1");
	for (i = 2; i <= NR_RUN_PARAMS; i++)
		buf_addf(&b, ", $%zu", i);
	buf_adds(&b, ")");
	return buf_detach(&b, NULL);
}

/*
 * The guarded UPDATE: $1 is updated_at, the mutable columns follow,
 * then the id, the version read and the statuses the row may have
 * ("|a|b|", store__froms). The request flags are left out.
 */
static char *
sql_run_update(void)
{
	struct buf b = BUF_INIT;
	size_t i;

	buf_adds(&b, "UPDATE runs SET version = version + 1, updated_at = $1");
	for (i = 0; i < NR_RUN_MUTABLE; i++)
		buf_addf(&b, ", %s = $%zu", run_mutable[i], i + 2);
	buf_addf(&b, " WHERE id = $%zu AND version = $%zu"
		 " AND strpos($%zu, '|' || status || '|') > 0",
		 NR_RUN_MUTABLE + 2, NR_RUN_MUTABLE + 3, NR_RUN_MUTABLE + 4);
	return buf_detach(&b, NULL);
}

/* Fills r (overwritten, not released) from row of a RUN_COLUMNS result. */
static void
read_run(const PGresult *res, int row, struct run *r)
{
	int i = 6;

	memset(r, 0, sizeof(*r));
	r->seq = pg__int64(res, row, 0);
	r->id = pg__text(res, row, 1);
	r->task = pg__text(res, row, 2);
	r->created_at = pg__int64(res, row, 3);
	r->updated_at = pg__int64(res, row, 4);
	r->version = pg__int64(res, row, 5);
#define READ_TEXT(f) r->f = pg__text(res, row, i++);
#define READ_INT(f)  r->f = pg__int64(res, row, i++);
	RUN_TEXT_MUTABLE(READ_TEXT)
	RUN_INT_MUTABLE(READ_INT)
	r->cost_usd = strtod(PQgetvalue(res, row, i++), NULL);
	RUN_REQUESTS(READ_INT)
#undef READ_TEXT
#undef READ_INT
}

/* The statement that appends an event; event_params gives its values. */
#define EVENT_ADD_SQL "SELECT baton_event_add($1, $2, $3, $4, $5, $6, $7)"

/* The parameters of EVENT_ADD_SQL for ev into p (numbers in tb, ts). */
static void
event_params(const struct event *ev, char tb[static 24], char ts[static 24],
	     const char *p[static 7])
{
	p[0] = ev->run_id;
	p[1] = pg__id_param(tb, ev->task_id);
	p[2] = pg__int(ts, ev->ts);
	p[3] = ev->type;
	p[4] = ev->from;
	p[5] = ev->to;
	p[6] = ev->data;
}

/*
 * What came of EVENT_ADD_SQL for ev, which failed when rc is
 * BATON_ESTORE: a missing run is named. Else its seq into *seq_out.
 */
static int
event_added(struct pg_store *ps, const struct event *ev, int rc,
	    int64_t seq, int64_t *seq_out, const char *what, struct err *e)
{
	if (rc == BATON_ESTORE && !strcmp(ps->state, "23503"))
		return err_set(e, BATON_ENOTFOUND, "cannot %s: no run '%s'",
			       what, ev->run_id);
	if (rc == 0) {
		*seq_out = seq;
		ps->notify_events = 1;
	}
	return rc;
}

int
pg__insert_event(struct pg_store *ps, const struct event *ev,
		 int64_t *seq_out, const char *what, struct err *e)
{
	char tb[24], ts[24];
	const char *p[7];
	int64_t seq = 0;
	int rc;

	rc = store__event_check(ev, what, e);
	if (rc < 0)
		return rc;
	event_params(ev, tb, ts, p);
	rc = exec_int(ps, EVENT_ADD_SQL, 7, p, &seq, what, e);
	return event_added(ps, ev, rc, seq, seq_out, what, e);
}

/*
 * One try of run_create: the next run number (or r->seq, when higher)
 * under the run-number lock
 * (held until the transaction ends, so numbers never
 * collide), the row and its creation event. Fills *seq and *id only
 * when it committed.
 */
static int
run_create_try(struct pg_store *ps, const struct run *r, int64_t now,
	       int64_t *seq_out, char **id_out, struct err *e)
{
	const char *what = "create run";
	int64_t seq = 0, evseq = 0;
	char type[] = "transition";
	struct event ev = { 0 };
	struct run_params p;
	char *id = NULL, *sql = NULL;
	int rc;

	rc = pg__begin_fenced(ps, what, e);
	if (rc == 0)
		rc = pg__run(ps,
			     "SELECT pg_advisory_xact_lock("
			     PG_LOCK_RUN_SEQ ")",
			     0, NULL, what, e);
	/* A statement of its own: its snapshot is taken under the lock. */
	if (rc == 0) {
		p.n = 0;
		run_param_int(&p, r->seq);
		rc = exec_int(ps, "SELECT GREATEST(COALESCE(MAX(seq), 0) + 1, "
			      "$1::bigint) FROM runs", p.n, p.v, &seq, what, e);
	}
	if (rc < 0)
		goto out;
	id = run_id_make(seq, r->task);
	p.n = 0;
	run_param_int(&p, seq);
	p.v[p.n++] = id;
	p.v[p.n++] = r->task;
	run_param_int(&p, r->created_at ? r->created_at : now);
	run_param_int(&p, now);
	run_param_int(&p, 1);
	fill_mutable(&p, r);
	run_param_int(&p, r->pause_requested);
	run_param_int(&p, r->abort_requested);
	sql = sql_run_insert();
	rc = pg__run(ps, sql, p.n, p.v, what, e);
	if (rc < 0)
		goto out;

	ev.run_id = id;
	ev.task_id = r->task_id;
	ev.ts = now;
	ev.type = type;
	ev.to = r->status;
	rc = pg__insert_event(ps, &ev, &evseq, what, e);
	if (rc == 0)
		rc = pg__commit(ps, what, e);
	if (rc < 0)
		goto out;
	*seq_out = seq;
	*id_out = id;
	id = NULL;
out:
	pg__rollback(ps);
	free(sql);
	free(id);
	return rc;
}

/* Creates r; r is changed only on success. */
static int
pg_run_create(struct store *s, struct run *r, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t now = time_now_ms(), seq = 0;
	char *id = NULL;
	int rc, tries = 0;

	do
		rc = run_create_try(ps, r, now, &seq, &id, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc < 0)
		return rc;
	free(r->id);
	r->id = id;
	r->seq = seq;
	r->version = 1;
	if (!r->created_at)
		r->created_at = now;
	r->updated_at = now;
	return 0;
}

/*
 * One lookup of a run by the single parameter of sql. Returns 1 with
 * *out filled, 0 when there is no row, or BATON_ESTORE.
 */
static int
get_run(struct pg_store *ps, const char *sql, const char *param,
	struct run *out, const char *what, struct err *e)
{
	const char *p[] = { param };
	PGresult *res = pg__exec(ps, sql, 1, p, what, e);
	int found;

	if (!res)
		return BATON_ESTORE;
	found = PQntuples(res) > 0;
	if (found)
		read_run(res, 0, out);
	PQclear(res);
	return found;
}

/*
 * One try of run_get: the exact id first, then the seq the reference
 * names (a longer reference must be a prefix of the id). Returns 1, 0
 * or BATON_ESTORE as get_run.
 */
static int
run_get_try(struct pg_store *ps, const char *ref, struct run *out,
	    const char *what, struct err *e)
{
	int64_t seq = run_id_seq(ref);
	char sb[24];
	int rc;

	rc = get_run(ps, "SELECT " RUN_COLUMNS " FROM runs WHERE id = $1",
		     ref, out, what, e);
	if (rc != 0 || seq <= 0)
		return rc;
	rc = get_run(ps, "SELECT " RUN_COLUMNS " FROM runs WHERE seq = $1",
		     pg__int(sb, seq), out, what, e);
	if (rc == 1 && !store__ref_matches(ref, out->id)) {
		run_release(out);
		rc = 0;
	}
	return rc;
}

static int
pg_run_get(struct store *s, const char *ref, struct run *out,
	   struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct run r = { 0 };
	char what[256];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "read run '%s'", ref);
	do
		rc = run_get_try(ps, ref, &r, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc == 0)
		return err_set(e, BATON_ENOTFOUND, "no run '%s'", ref);
	if (rc < 0)
		return rc;
	*out = r;
	return 0;
}

/*
 * Zero rows updated: a conflict if the run exists (another writer bumped
 * its version), BATON_ENOTFOUND if it does not, STORE_EREFUSED if its
 * version is the one read (the status guard refused: store.c says why).
 */
static int
update_missed(struct pg_store *ps, const struct run *r, const char *what,
	      struct err *e)
{
	const char *p[] = { r->id };
	int64_t found = -1;
	int rc;

	rc = exec_int(ps, "SELECT version FROM runs WHERE id = $1", 1, p,
		      &found, what, e);
	if (rc < 0)
		return rc;
	if (found < 0)
		return err_set(e, BATON_ENOTFOUND, "no run '%s'", r->id);
	if (found == r->version)
		return err_set(e, STORE_EREFUSED, "run '%s': status refused",
			       r->id);
	return err_set(e, BATON_ECONFLICT,
		       "run '%s' changed concurrently (expected version %lld)",
		       r->id, (long long)r->version);
}

/*
 * One try of run_update: the guarded UPDATE and ev (copied to row, its
 * defaults applied) in one transaction. *evseq is set on success.
 */
static int
run_update_try(struct pg_store *ps, const struct run *r, const char *froms,
	       const struct event *row, int64_t now, int64_t *evseq,
	       struct err *e)
{
	struct run_params p;
	PGresult *res = NULL;
	char what[256], *sql = sql_run_update();
	int rc;

	snprintf(what, sizeof(what), "update run '%s'", r->id);
	rc = pg__begin_fenced(ps, what, e);
	if (rc < 0)
		goto out;
	p.n = 0;
	run_param_int(&p, now);
	fill_mutable(&p, r);
	p.v[p.n++] = r->id;
	run_param_int(&p, r->version);
	p.v[p.n++] = froms;
	res = pg__exec(ps, sql, p.n, p.v, what, e);
	if (!res) {
		rc = BATON_ESTORE;
		goto out;
	}
	if (changed(res) == 0) {
		rc = update_missed(ps, r, what, e);
		goto out;
	}
	if (row)
		rc = pg__insert_event(ps, row, evseq, what, e);
	if (rc == 0)
		rc = pg__commit(ps, what, e);
out:
	PQclear(res);
	pg__rollback(ps);
	free(sql);
	return rc;
}

static int
pg_run_update(struct store *s, struct run *r, const char *froms,
	      struct event *ev, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t now = time_now_ms(), evseq = 0;
	struct event row = { 0 };
	int rc, tries = 0;

	if (ev) {
		row = *ev;
		row.run_id = ev->run_id ? ev->run_id : r->id;
		row.ts = ev->ts ? ev->ts : now;
		if (!row.task_id)
			row.task_id = r->task_id;
	}
	do
		rc = run_update_try(ps, r, froms, ev ? &row : NULL, now,
				    &evseq, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc < 0)
		return rc;
	r->version++;
	r->updated_at = now;
	if (ev) {
		ev->ts = row.ts;
		ev->seq = evseq;
	}
	return 0;
}

/* One try of run_request: the flag's UPDATE (sql) and row, together. */
static int
run_request_try(struct pg_store *ps, const char *sql, const char *run_id,
		int value, const struct event *row, int64_t now,
		int64_t *evseq, const char *what, struct err *e)
{
	char vb[24], nb[24];
	const char *p[] = { pg__int(vb, value), pg__int(nb, now), run_id };
	PGresult *res = NULL;
	int rc;

	rc = pg__begin_fenced(ps, what, e);
	if (rc < 0)
		goto out;
	res = pg__exec(ps, sql, 3, p, what, e);
	if (!res) {
		rc = BATON_ESTORE;
		goto out;
	}
	if (changed(res) == 0) {
		rc = err_set(e, BATON_ENOTFOUND, "no run '%s'", run_id);
		goto out;
	}
	if (row)
		rc = pg__insert_event(ps, row, evseq, what, e);
	if (rc == 0)
		rc = pg__commit(ps, what, e);
out:
	PQclear(res);
	pg__rollback(ps);
	return rc;
}

/*
 * Sets one request flag and appends ev, leaving the version alone (see
 * sqlite_run_request). The column comes from a fixed table, never from
 * the caller's text.
 */
static int
pg_run_request(struct store *s, const char *run_id, const char *flag,
	       int value, struct event *ev, struct err *e)
{
	static const struct {
		const char *flag, *sql;
	} requests[] = {
		{ "pause_requested", "UPDATE runs SET pause_requested = $1,"
				     " updated_at = $2 WHERE id = $3" },
		{ "abort_requested", "UPDATE runs SET abort_requested = $1,"
				     " updated_at = $2 WHERE id = $3" },
	};
	struct pg_store *ps = pg__store(s);
	int64_t now = time_now_ms(), evseq = 0;
	const char *sql = NULL;
	struct event row = { 0 };
	char what[256];
	size_t k;
	int rc, tries = 0;

	snprintf(what, sizeof(what), "set '%s' of run '%s'", flag, run_id);
	for (k = 0; k < ARRAY_SIZE(requests); k++)
		if (!strcmp(flag, requests[k].flag))
			sql = requests[k].sql;
	if (!sql)
		return err_set(e, BATON_EINVAL, "cannot %s: not a request flag",
			       what);
	if (ev) {
		/* row is only read: the cast drops no promise */
		row = *ev;
		row.run_id = ev->run_id ? ev->run_id : (char *)run_id;
		row.ts = ev->ts ? ev->ts : now;
	}
	do
		rc = run_request_try(ps, sql, run_id, value, ev ? &row : NULL,
				     now, &evseq, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc == 0 && ev) {
		ev->ts = row.ts;
		ev->seq = evseq;
	}
	return rc;
}

/*
 * One try of event_add: BEGIN (fenced) and the event in one round trip,
 * then COMMIT.
 */
static int
event_add_try(struct pg_store *ps, const struct event *row, int64_t *seq,
	      const char *what, struct err *e)
{
	char tb[24], ts[24];
	const char *p[7];
	PGresult *res = NULL;
	int64_t got = 0;
	int rc;

	rc = store__event_check(row, what, e);
	if (rc < 0)
		return rc;
	event_params(row, tb, ts, p);
	rc = pg__begin_exec(ps, &(struct pg_stmt){ EVENT_ADD_SQL, 7, p }, 1,
			    &res, what, e);
	if (rc == 0 && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
		got = pg__int64(res, 0, 0);
	rc = event_added(ps, row, rc, got, seq, what, e);
	if (rc == 0)
		rc = pg__commit(ps, what, e);
	pg__rollback(ps);
	PQclear(res);
	return rc;
}

static int
pg_event_add(struct store *s, struct event *ev, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct event row = *ev;
	int64_t seq = 0;
	char what[256];
	int rc, tries = 0;

	if (ev->run_id)
		snprintf(what, sizeof(what), "add event to run '%s'",
			 ev->run_id);
	else
		snprintf(what, sizeof(what), "add event");
	row.ts = ev->ts ? ev->ts : time_now_ms();
	do
		rc = event_add_try(ps, &row, &seq, what, e);
	while (pg__again(ps, rc, &tries, e));
	if (rc == 0) {
		ev->ts = row.ts;
		ev->seq = seq;
	}
	return rc;
}

/*
 * Fetches one page of a list: sql with its parameters, retried on a lost
 * connection. Returns the result (the caller clears it) or NULL with e
 * filled.
 */
static PGresult *
fetch_page(struct pg_store *ps, const char *sql, int n,
	   const char *const *p, const char *what, struct err *e)
{
	PGresult *res;
	int tries = 0;

	do
		res = pg__exec(ps, sql, n, p, what, e);
	while (!res && pg__again(ps, BATON_ESTORE, &tries, e));
	return res;
}

/*
 * Runs newest first, a page at a time, each page continuing below the
 * smallest seq of the previous one. The callbacks of a page run after
 * its result was read whole, so they may use the connection.
 */
static int
pg_run_list(struct store *s, const struct store_run_filter *f,
	    store_run_cb *cb, void *arg, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *sql = f->status ? "SELECT " RUN_COLUMNS " FROM runs"
				      " WHERE seq < $1 AND status = $3"
				      " ORDER BY seq DESC LIMIT $2"
				    : "SELECT " RUN_COLUMNS " FROM runs"
				      " WHERE seq < $1"
				      " ORDER BY seq DESC LIMIT $2";
	int64_t cursor = INT64_MAX;
	int remaining = f->limit > 0 ? f->limit : -1;
	char cb_[24], pb[24];
	const char *p[] = { cb_, pb, f->status };
	PGresult *res;
	struct run r;
	int n, i, page, stop = 0;

	while (!stop && remaining != 0) {
		page = remaining > 0 && remaining < PG_LIST_PAGE
			       ? remaining
			       : PG_LIST_PAGE;
		pg__int(cb_, cursor);
		pg__int(pb, page);
		res = fetch_page(ps, sql, f->status ? 3 : 2, p, "list runs",
				 e);
		if (!res)
			return BATON_ESTORE;
		n = PQntuples(res);
		for (i = 0; i < n && !stop; i++) {
			read_run(res, i, &r);
			cursor = r.seq;
			stop = cb(&r, arg);
			run_release(&r);
		}
		PQclear(res);
		if (n < page)
			break;
		if (remaining > 0)
			remaining -= n;
	}
	return 0;
}

/* Fills ev (overwritten) from a row of the event query. */
static void
read_event(const PGresult *res, int row, struct event *ev)
{
	ev->seq = pg__int64(res, row, 0);
	ev->run_id = pg__text(res, row, 1);
	ev->ts = pg__int64(res, row, 2);
	ev->type = pg__text(res, row, 3);
	ev->from = pg__text(res, row, 4);
	ev->to = pg__text(res, row, 5);
	ev->data = pg__text(res, row, 6);
	ev->task_id = pg__int64(res, row, 7);
}

/*
 * Events in seq order, a page at a time, each page continuing after the
 * last seq handed out, and none past the safe horizon (SQL_EVENTS_SAFE,
 * computed in the same statement as the rows: one snapshot).
 */
int
pg__list_events(struct pg_store *ps, const char *run_id, int64_t task_id,
		int64_t after_seq, const char *type, store_event_cb *cb,
		void *arg, struct err *e)
{
	struct buf sql = BUF_INIT;
	char ab[24], tb[24];
	const char *p[4] = { ab };
	PGresult *res;
	struct event ev;
	int np = 1, n, i, stop = 0, rc = 0;

	buf_adds(&sql, SQL_EVENTS_SAFE " SELECT seq, run_id, ts, type,"
		 " from_status, to_status, data, task_id FROM events"
		 " WHERE seq > $1 AND " SQL_BELOW_STOP);
	if (run_id) {
		p[np++] = run_id;
		buf_addf(&sql, " AND run_id = $%d", np);
	}
	if (type) {
		p[np++] = type;
		buf_addf(&sql, " AND type = $%d", np);
	}
	if (task_id) {
		p[np++] = pg__int(tb, task_id);
		buf_addf(&sql, " AND task_id = $%d", np);
	}
	buf_addf(&sql, " ORDER BY seq LIMIT %d", PG_LIST_PAGE);
	while (!stop) {
		pg__int(ab, after_seq);
		res = fetch_page(ps, sql.ptr, np, p, "list events", e);
		if (!res) {
			rc = BATON_ESTORE;
			break;
		}
		n = PQntuples(res);
		for (i = 0; i < n && !stop; i++) {
			read_event(res, i, &ev);
			after_seq = ev.seq;
			stop = cb(&ev, arg);
			event_release(&ev);
		}
		PQclear(res);
		if (n < PG_LIST_PAGE)
			break;
	}
	buf_release(&sql);
	return rc;
}

static int
pg_event_list(struct store *s, const char *run_id, int64_t after_seq,
	      const char *type, store_event_cb *cb, void *arg, struct err *e)
{
	return pg__list_events(pg__store(s), run_id, 0, after_seq, type, cb,
			       arg, e);
}

/* The newest event a follower may see now: below the safe horizon. */
static int
pg_event_last_seq(struct store *s, int64_t *out, struct err *e)
{
	static const char sql[] = SQL_EVENTS_SAFE
		" SELECT COALESCE(MAX(seq), 0) FROM events"
		" WHERE " SQL_BELOW_STOP;
	struct pg_store *ps = pg__store(s);
	const char *p[] = { "0" };
	int64_t v = 0;
	int rc, tries = 0;

	do
		rc = exec_int(ps, sql, 1, p, &v, "read the last event", e);
	while (pg__again(ps, rc, &tries, e));
	if (rc == 0)
		*out = v;
	return rc;
}

/* ---- run files and the clock ----------------------------------------- */

static const char hexdigits[] = "0123456789abcdef";

/* len bytes of p as lowercase hex (caller frees): BYTEA's text input. */
static char *
to_hex(const char *p, size_t len)
{
	char *out = xmalloc(2 * len + 1);
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = hexdigits[(unsigned char)p[i] >> 4];
		out[2 * i + 1] = hexdigits[(unsigned char)p[i] & 15];
	}
	out[2 * len] = '\0';
	return out;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The hex text of field (row, col) as bytes into *out (NUL-terminated,
 * caller frees) and *len; -1 for text that is not hex.
 */
static int
from_hex(const PGresult *res, int row, int col, char **out, size_t *len)
{
	const char *h = PQgetvalue(res, row, col);
	size_t n = (size_t)PQgetlength(res, row, col) / 2, i;
	char *b = xmalloc(n + 1);
	int hi, lo;

	for (i = 0; i < n; i++) {
		hi = hexval(h[2 * i]);
		lo = hexval(h[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			free(b);
			return -1;
		}
		b[i] = (char)(hi << 4 | lo);
	}
	b[n] = '\0';
	*out = b;
	*len = n;
	return 0;
}

static int
file_put_try(struct pg_store *ps, const struct store_file *f, int64_t now,
	     const char *hex, const char *what, struct err *e)
{
	struct params p = { 0 };
	int rc;

	param_text(&p, f->run_id);
	param_text(&p, f->name);
	param_int(&p, f->size);
	param_text(&p, f->sha256);
	param_int(&p, f->truncated ? 1 : 0);
	param_text(&p, hex);
	param_text(&p, f->host);
	param_text(&p, f->path);
	param_int(&p, now);
	rc = pg__begin(ps, what, e);
	if (rc == 0)
		rc = pg__run(ps,
			     "INSERT INTO run_files (run_id, name, size,"
			     " sha256, truncated, content, host, path,"
			     " updated_at)"
			     " VALUES ($1, $2, $3, $4, $5, decode($6, 'hex'),"
			     " $7, $8, $9)"
			     " ON CONFLICT (run_id, name) DO UPDATE SET"
			     " size = excluded.size, sha256 = excluded.sha256,"
			     " truncated = excluded.truncated,"
			     " content = excluded.content,"
			     " host = excluded.host, path = excluded.path,"
			     " updated_at = excluded.updated_at",
			     p.n, p.v, what, e);
	if (rc < 0 && !strcmp(ps->state, "23503"))
		rc = err_set(e, BATON_ENOTFOUND, "cannot %s: no run '%s'",
			     what, f->run_id);
	if (rc == 0)
		rc = pg__commit(ps, what, e);
	pg__rollback(ps);
	return rc;
}

static int
pg_file_put(struct store *s, struct store_file *f, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t now = time_now_ms();
	char *hex = to_hex(f->content ? f->content : "", f->len);
	char what[512];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "keep file '%.200s' of run '%.200s'",
		 f->name, f->run_id);
	do
		rc = file_put_try(ps, f, now, hex, what, e);
	while (pg__again(ps, rc, &tries, e));
	free(hex);
	if (rc == 0)
		f->updated_at = now;
	return rc;
}

/* Row i of a run_files query (content as hex when with_content). */
static int
read_file_row(const PGresult *res, int i, int with_content,
	      struct store_file *f)
{
	f->run_id = pg__text(res, i, 0);
	f->name = pg__text(res, i, 1);
	f->size = pg__int64(res, i, 2);
	f->sha256 = pg__text(res, i, 3);
	f->truncated = pg__int64(res, i, 4) != 0;
	f->len = (size_t)pg__int64(res, i, 5);
	f->host = pg__text(res, i, 6);
	f->path = pg__text(res, i, 7);
	f->updated_at = pg__int64(res, i, 8);
	if (with_content && from_hex(res, i, 9, &f->content, &f->len) < 0)
		return -1;
	return 0;
}

#define FILE_COLUMNS                                                           \
	"run_id, name, size, sha256, truncated, octet_length(content),"       \
	" host, path, updated_at"

static int
pg_file_get(struct store *s, const char *run_id, const char *name,
	    struct store_file *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *p[] = { run_id, name };
	struct store_file f = { 0 };
	char what[512];
	PGresult *res;
	int rc = 0;

	snprintf(what, sizeof(what), "read file '%.200s' of run '%.200s'",
		 name, run_id);
	res = fetch_page(ps,
			 "SELECT " FILE_COLUMNS ", encode(content, 'hex')"
			 " FROM run_files WHERE run_id = $1 AND name = $2",
			 2, p, what, e);
	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) == 0)
		rc = err_set(e, BATON_ENOTFOUND, "run '%s' has no file '%s'",
			     run_id, name);
	else if (read_file_row(res, 0, 1, &f) < 0)
		rc = err_set(e, BATON_ESTORE, "cannot %s: content is not hex",
			     what);
	PQclear(res);
	if (rc == 0)
		*out = f;
	else
		store_file_release(&f);
	return rc;
}

static int
pg_file_list(struct store *s, const char *run_id, store_file_cb *cb,
	     void *arg, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	const char *p[] = { run_id };
	char what[256];
	PGresult *res;
	int n, i, stop = 0;

	snprintf(what, sizeof(what), "list files of run '%.200s'", run_id);
	res = fetch_page(ps,
			 "SELECT " FILE_COLUMNS " FROM run_files"
			 " WHERE run_id = $1 ORDER BY name",
			 1, p, what, e);
	if (!res)
		return BATON_ESTORE;
	n = PQntuples(res);
	for (i = 0; i < n && !stop; i++) {
		struct store_file f = { 0 };

		read_file_row(res, i, 0, &f);
		stop = cb(&f, arg);
		store_file_release(&f);
	}
	PQclear(res);
	return 0;
}

/*
 * The server's clock against this host's: one round trip between two
 * readings of the host's clock, the server's reading taken to be at
 * their midpoint (the error is at most half the round trip). Right after
 * a connect, the reading its round trip took (pg__connect): the sync of
 * store_open costs no round trip of its own.
 */
static int
pg_clock_offset(struct store *s, int64_t *out, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t before, after, db = 0;
	int rc, tries = 0;

	/* the connect's reading, once, while fresh: the open's sync */
	if (ps->hello_at && time_mono_ms() - ps->hello_at < 1000) {
		ps->hello_at = 0;
		*out = ps->hello_offset;
		return 0;
	}
	ps->hello_at = 0;
	do {
		before = time_host_ms();
		rc = exec_int(ps,
			      "SELECT (extract(epoch FROM clock_timestamp())"
			      " * 1000)::bigint",
			      0, NULL, &db, "read the database's clock", e);
		after = time_host_ms();
	} while (pg__again(ps, rc, &tries, e));
	if (rc)
		return rc;
	*out = db - (before + after) / 2;
	return 0;
}

/* ---- outputs and plans ----------------------------------------------- */

/*
 * One try of output_add: version MAX + 1, read and written in one
 * transaction. Two writers can read the same MAX under READ COMMITTED;
 * the primary key stops the second, and a positive return tells the
 * caller to try again (with the winner's row then visible).
 */
static int
output_add_try(struct pg_store *ps, const struct store_output *o,
	       int64_t created, int64_t *version, const char *what,
	       struct err *e)
{
	char vb[24], cb_[24];
	const char *p[] = { o->run_id, o->stage, o->artifact, vb,
			    o->decision, o->content, pg__int(cb_, created) };
	int64_t v = 0;
	int rc;

	rc = pg__begin_fenced(ps, what, e);
	if (rc == 0)
		rc = exec_int(ps,
			      "SELECT COALESCE(MAX(version), 0) + 1"
			      " FROM stage_outputs WHERE run_id = $1"
			      " AND stage = $2 AND artifact = $3",
			      3, p, &v, what, e);
	if (rc < 0)
		goto out;
	pg__int(vb, v);
	rc = pg__run(ps,
		     "INSERT INTO stage_outputs (run_id, stage, artifact,"
		     " version, decision, content, created_at)"
		     " VALUES ($1, $2, $3, $4, $5, $6, $7)",
		     7, p, what, e);
	if (rc < 0 && !strcmp(ps->state, "23503"))
		rc = err_set(e, BATON_ENOTFOUND, "cannot %s: no run '%s'",
			     what, o->run_id);
	else if (rc < 0 && !strcmp(ps->state, "23505"))
		rc = 1;
	if (rc == 0)
		rc = pg__commit(ps, what, e);
	if (rc == 0)
		*version = v;
out:
	pg__rollback(ps);
	return rc;
}

static int
pg_output_add(struct store *s, struct store_output *o, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t version = 0;
	int64_t created = o->created_at ? o->created_at : time_now_ms();
	char what[512];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "add output '%s/%s' to run '%s'",
		 o->stage, o->artifact, o->run_id);
	do
		rc = output_add_try(ps, o, created, &version, what, e);
	while (rc > 0 || pg__again(ps, rc, &tries, e));
	if (rc < 0)
		return rc;
	o->version = (int)version;
	o->created_at = created;
	return 0;
}

/* A run's outputs in the order they were written (ord), page by page. */
static int
pg_output_list(struct store *s, const char *run_id, store_output_cb *cb,
	       void *arg, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	char what[256], ob[24];
	const char *p[] = { run_id, ob };
	struct store_output o;
	int64_t cursor = 0;
	PGresult *res;
	int n, i, stop = 0;

	snprintf(what, sizeof(what), "list outputs of run '%s'", run_id);
	while (!stop) {
		pg__int(ob, cursor);
		res = fetch_page(ps,
				 "SELECT ord, run_id, stage, artifact, version,"
				 " decision, content, created_at"
				 " FROM stage_outputs WHERE run_id = $1"
				 " AND ord > $2 ORDER BY ord"
				 " LIMIT " PG_STR(PG_LIST_PAGE),
				 2, p, what, e);
		if (!res)
			return BATON_ESTORE;
		n = PQntuples(res);
		for (i = 0; i < n && !stop; i++) {
			cursor = pg__int64(res, i, 0);
			o.run_id = pg__text(res, i, 1);
			o.stage = pg__text(res, i, 2);
			o.artifact = pg__text(res, i, 3);
			o.version = (int)pg__int64(res, i, 4);
			o.decision = pg__text(res, i, 5);
			o.content = pg__text(res, i, 6);
			o.created_at = pg__int64(res, i, 7);
			stop = cb(&o, arg);
			store_output_release(&o);
		}
		PQclear(res);
		if (n < PG_LIST_PAGE)
			break;
	}
	return 0;
}

/* One try of plan_add; a positive return is a lost race (see outputs). */
static int
plan_add_try(struct pg_store *ps, const char *source, const char *content,
	     int64_t *id, int64_t *version, const char *what, struct err *e)
{
	char vb[24], tb[24];
	const char *p[] = { source, vb, content, pg__int(tb, time_now_ms()) };
	PGresult *res = NULL;
	int64_t v = 0;
	int rc;

	rc = pg__begin_fenced(ps, what, e);
	if (rc == 0)
		rc = exec_int(ps,
			      "SELECT COALESCE(MAX(version), 0) + 1"
			      " FROM plans WHERE source = $1",
			      1, p, &v, what, e);
	if (rc < 0)
		goto out;
	pg__int(vb, v);
	res = pg__exec(ps,
		       "INSERT INTO plans (source, version, content,"
		       " created_at) VALUES ($1, $2, $3, $4) RETURNING id",
		       4, p, what, e);
	if (!res) {
		rc = !strcmp(ps->state, "23505") ? 1 : BATON_ESTORE;
		goto out;
	}
	rc = pg__commit(ps, what, e);
	if (rc == 0) {
		*id = pg__int64(res, 0, 0);
		*version = v;
	}
out:
	PQclear(res);
	pg__rollback(ps);
	return rc;
}

static int
pg_plan_add(struct store *s, const char *source, const char *content,
	    int64_t *id, int *version, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	int64_t pid = 0, v = 0;
	char what[256];
	int rc, tries = 0;

	snprintf(what, sizeof(what), "store a plan of '%.200s'", source);
	do
		rc = plan_add_try(ps, source, content, &pid, &v, what, e);
	while (rc > 0 || pg__again(ps, rc, &tries, e));
	if (rc < 0)
		return rc;
	*id = pid;
	*version = (int)v;
	return 0;
}

/*
 * VACUUM of baton's tables (those of the schema it migrated, the first
 * of the search path), one statement outside any transaction, as VACUUM
 * wants.
 */
static int
pg_vacuum(struct store *s, struct err *e)
{
	struct pg_store *ps = pg__store(s);
	struct buf sql = BUF_INIT;
	PGresult *res;
	int i, rc = 0;

	res = pg__exec(ps, "SELECT quote_ident(tablename) FROM pg_tables "
			   "WHERE schemaname = current_schema() "
			   "ORDER BY tablename",
		       0, NULL, "list baton's tables", e);
	if (!res)
		return BATON_ESTORE;
	buf_adds(&sql, "VACUUM");
	for (i = 0; i < PQntuples(res); i++)
		buf_addf(&sql, "%s %s", i ? "," : "", PQgetvalue(res, i, 0));
	if (PQntuples(res))
		rc = pg__run(ps, sql.ptr, 0, NULL, "vacuum the store", e);
	PQclear(res);
	buf_release(&sql);
	return rc;
}

const struct store_ops store_postgres_ops = {
	.version = STORE_OPS_VERSION,
	.name = "postgres",
	.open = pg_open,
	.close = pg_close,
	.run_create = pg_run_create,
	.run_get = pg_run_get,
	.run_update = pg_run_update,
	.run_request = pg_run_request,
	.event_add = pg_event_add,
	.run_list = pg_run_list,
	.event_list = pg_event_list,
	.output_add = pg_output_add,
	.output_list = pg_output_list,
	.schema_version = pg_schema_version,
	.task_add = pg__task_add,
	.task_get = pg__task_get,
	.task_update = pg__task_update,
	.task_list = pg__task_list,
	.task_counts = pg__task_counts,
	.task_claim = pg__task_claim,
	.task_settle_claim = pg__task_settle_claim,
	.task_claim_batch = pg__task_claim_batch,
	.task_settle_batch = pg__task_settle_batch,
	.task_settle_claim_batch = pg__task_settle_claim_batch,
	.task_renew = pg__task_renew,
	.task_next_due = pg__task_next_due,
	.forge_delivery_seen = pg__forge_delivery_seen,
	.token_add = pg__token_add,
	.token_find = pg__token_find,
	.token_list = pg__token_list,
	.token_revoke = pg__token_revoke,
	.token_used = pg__token_used,
	.idem_claim = pg__idem_claim,
	.idem_bind = pg__idem_bind,
	.chat_create = pg__chat_create,
	.chat_get = pg__chat_get,
	.chat_add = pg__chat_add,
	.chat_update = pg__chat_update,
	.chat_list = pg__chat_list,
	.memory_put = pg__memory_put,
	.memory_forget = pg__memory_forget,
	.memory_list = pg__memory_list,
	.forge_intake = pg__forge_intake,
	.forge_link_get = pg__forge_link_get,
	.forge_link_put = pg__forge_link_put,
	.forge_links = pg__forge_links,
	.forge_cursor_get = pg__forge_cursor_get,
	.forge_cursor_set = pg__forge_cursor_set,
	.forge_stats_add = pg__forge_stats_add,
	.forge_stats_get = pg__forge_stats_get,
	.task_events = pg__task_events,
	.worker_beat = pg__worker_beat,
	.worker_stop = pg__worker_stop,
	.worker_list = pg__worker_list,
	.merge_add = pg__merge_add,
	.merge_get = pg__merge_get,
	.merge_update = pg__merge_update,
	.merge_list = pg__merge_list,
	.merge_claim = pg__merge_claim,
	.plan_add = pg_plan_add,
	.event_last_seq = pg_event_last_seq,
	.run_stats = pg__run_stats,
	.watch_fd = pg__watch_fd,
	.watch_drain = pg__watch_drain,
	.file_put = pg_file_put,
	.file_get = pg_file_get,
	.file_list = pg_file_list,
	.clock_offset = pg_clock_offset,
	.vacuum = pg_vacuum,
};

int
pg__query_int(struct pg_store *ps, const char *sql, const struct params *p,
	      int64_t *out, const char *what, struct err *e)
{
	PGresult *res = pg__exec(ps, sql, p->n, p->v, what, e);

	if (!res)
		return BATON_ESTORE;
	if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		*out = pg__int64(res, 0, 0);
	PQclear(res);
	return 0;
}
