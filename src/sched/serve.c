/*
 * `baton serve`: the supervisor and its worker processes.
 *
 * The supervisor runs no agent and holds no lease. It sweeps (at start,
 * which turns a kill -9 of the last serve into resumed runs, then every
 * runtime.sweep_seconds or when a sweep said something falls due), and
 * it relays wake-ups: a byte in its FIFO (.baton/wake.d/<pid>, see
 * wake.c) is passed to every idle worker's control pipe. Workers report
 * "idle" on a shared status pipe (one byte: the worker's index) after a
 * claim found nothing; the supervisor knows who sleeps and whom to wake.
 *
 *   supervisor ──ctl pipe 'w' wake / 'd' drain──▶ worker i
 *   supervisor ◀──status pipe: byte i = "i is idle"── workers
 *
 * Workers are separate processes in process groups of their own (a
 * terminal's Ctrl-C reaches the supervisor alone, which decides) that
 * die with the supervisor (PR_SET_PDEATHSIG): a kill -9 of serve takes
 * the whole tree down as a crash would, and the next serve's first
 * sweep finds their tasks' holders gone.
 *
 * On PostgreSQL the workers of other machines make work too, and no
 * FIFO reaches across machines: the supervisor sleeps on the store's
 * LISTEN connection (store_watch_fd), one per host, instead. Each
 * notification says how many tasks became claimable (STORE_WATCH_UNITS)
 * and the supervisor wakes that many idle workers, not all of them: a
 * worker woken for nothing makes a claim that finds nothing. The FIFO's
 * bytes then wake nobody: every write that makes work (whoever wrote
 * it, on this host or another) is announced by the store.
 *
 * Signals: the first SIGINT/SIGTERM drains (no new claims; running runs
 * go on to their next rest), the second stops the workers at once (each
 * run is left interrupted and its task queued, for the next serve).
 */
#include "util/compat.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/config.h"
#include "sched/sched.h"
#include "sched/sched_int.h"
#include "store/store.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/spawn.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#undef LOG_MODULE
#define LOG_MODULE "serve"

/* A worker that died is replaced, but not faster than this. */
#define RESPAWN_MS 1000

struct kid {
	pid_t pid;
	int ctl;	/* write end of its control pipe */
	int idle;
	int missed;	/* a wake-up came while it was busy */
	int told_drain;	/* it has been told to go */
	int64_t died_at; /* when it died unasked; 0: alive or never */
};

struct sup {
	struct sched_ctx *x;
	const struct serve_opts *o;
	struct kid *kids;
	int nr;
	int status[2];	 /* workers -> supervisor */
	int fifo_rd, fifo_wr;
	char *fifo;
	int watch;	/* the store's change fd (PostgreSQL); -1: none */
	int draining, stopping;
	int recheck;	/* a worker went idle: is everything done? */
	int64_t next_sweep, last_sweep;
	struct sched_slots slots; /* schedules: the slots decided */
	int64_t next_slot;	  /* when a schedule's next slot comes */
	/* per companion of o->companions: its pid (0 when not running) and
	 * when it died unasked (0: alive or never) */
	pid_t companion[SERVE_MAX_COMPANIONS];
	int64_t companion_died[SERVE_MAX_COMPANIONS];
};

static int sig_pipe[2] = { -1, -1 };

static void
on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;

	if (write(sig_pipe[1], &c, 1) < 0)
		c = 0; /* full: a signal is pending anyway */
	errno = saved;
}

static void
set_handlers(void (*fn)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* ---- the worker process ------------------------------------------------- */

/* Blocks until the supervisor says wake ('w') or go ('d', or EOF). */
static int
await_word(int fd)
{
	char c;
	ssize_t n;

	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return n == 1 && c == 'w';
}

/* Between two pieces of work: has the supervisor said drain meanwhile? */
static int
told_to_go(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c = 0;

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	return read(fd, &c, 1) != 1 || c == 'd';
}

static void
worker_main(struct sup *sp, int idx, int ctl_rd, pid_t parent)
{
	struct sched_ctx x = *sp->x;
	struct worker_rec me_rec = { 0 };
	struct task next = { 0 };
	struct err e = ERR_INIT;
	char holder[300];
	unsigned char me = (unsigned char)idx;
	int rc;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_NAME, "baton worker"); /* ps and the benchmarks see it */
	if (getppid() != parent)
		_exit(0);
	setpgid(0, 0);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	/* the supervisor's connection is its own: never touch it here */
	rc = store_open(sp->x->store_spec, &x.store, &e);
	if (rc) {
		log_error("worker %d: %s", idx, e.msg);
		_exit(1);
	}
	snprintf(holder, sizeof(holder), "%s:%ld:%d", sched__host(),
		 (long)getpid(), idx);
	x.holder = holder;
	x.next = &next;
	/* on record for the API and doctor: alive, since when, on what */
	me_rec.id = holder;
	me_rec.host = (char *)sched__host();
	me_rec.pid = getpid();
	if (sched_worker_begin(&x, &me_rec, &e)) {
		log_error("worker %d: %s", idx, e.msg);
		_exit(1);
	}
	for (;;) {
		rc = sched_work_once(&x, &e);
		if (rc > 0 && told_to_go(ctl_rd))
			break;
		if (rc < 0) {
			log_error("worker %d: %s", idx, e.msg);
			e = (struct err)ERR_INIT;
			sleep(1); /* a broken store must not spin */
		}
		if (rc > 0 || next.id) /* more, or a task claimed ahead */
			continue;
		if (write(sp->status[1], &me, 1) < 0 || !await_word(ctl_rd))
			break;
	}
	sched_worker_end(&x);
	store_close(x.store);
	_exit(0);
}

/* What worker_call hands the new worker process. */
struct worker_arg {
	struct sup *sp;
	int idx;
	int ctl[2];
	pid_t parent;
};

/* The worker's side of the fork: it drops the supervisor's ends. */
static int
worker_call(void *arg)
{
	struct worker_arg *a = arg;
	struct sup *sp = a->sp;
	int i;

	close(a->ctl[1]);
	for (i = 0; i < sp->nr; i++)
		if (sp->kids[i].ctl >= 0)
			close(sp->kids[i].ctl);
	close(sp->fifo_rd);
	close(sp->fifo_wr);
	close(sp->status[0]);
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	worker_main(sp, a->idx, a->ctl[0], a->parent);
	return 0; /* not reached: worker_main exits */
}

static int
spawn_worker(struct sup *sp, int idx, struct err *e)
{
	struct worker_arg a = { .sp = sp, .idx = idx, .parent = getpid() };
	int *ctl = a.ctl, rc;
	pid_t pid;

	if (pipe2(ctl, O_CLOEXEC) < 0)
		return err_set(e, -errno, "cannot create a pipe: %s",
			       strerror(errno));
	rc = spawn_fork_call(worker_call, &a, 0, &pid);
	if (rc < 0) {
		close(ctl[0]);
		close(ctl[1]);
		return err_set(e, rc, "cannot start a worker: %s",
			       strerror(-rc));
	}
	close(ctl[0]);
	sp->kids[idx].pid = pid;
	sp->kids[idx].ctl = ctl[1];
	sp->kids[idx].idle = 0;
	sp->kids[idx].missed = 0;
	sp->kids[idx].told_drain = 0;
	sp->kids[idx].died_at = 0;
	return 0;
}

/* ---- the supervisor ------------------------------------------------------ */

static void
tell(struct kid *k, char word)
{
	if (k->ctl >= 0 && write(k->ctl, &word, 1) < 0)
		log_warn("cannot reach worker %ld: %s", (long)k->pid,
			 strerror(errno));
	k->idle = 0;
	k->missed = 0;
}

/*
 * Wakes the idle workers. A busy one may already have looked for work
 * and found none before this wake-up's work existed: it is marked, and
 * woken again the moment it reports idle (on_status).
 */
static void
wake_idle(struct sup *sp)
{
	int i;

	for (i = 0; i < sp->nr; i++) {
		struct kid *k = &sp->kids[i];

		if (k->pid <= 0)
			continue;
		if (k->idle || (sp->draining && !k->told_drain)) {
			tell(k, sp->draining ? 'd' : 'w');
			k->told_drain = sp->draining;
		} else {
			k->missed = 1;
		}
	}
}

/*
 * Wakes up to n idle workers, one per unit of work; units left over go
 * to busy workers (marked, woken when they report idle), which claim
 * again after their run anyway.
 */
static void
wake_some(struct sup *sp, unsigned n)
{
	int i;

	for (i = 0; i < sp->nr && n; i++) {
		struct kid *k = &sp->kids[i];

		if (k->pid > 0 && k->idle) {
			tell(k, 'w');
			n--;
		}
	}
	for (i = 0; i < sp->nr && n; i++) {
		struct kid *k = &sp->kids[i];

		if (k->pid > 0 && !k->idle && !k->missed) {
			k->missed = 1;
			n--;
		}
	}
}

/* Empties fd; returns whether anything was in it. */
static int
drain_fd(int fd)
{
	char buf[256];
	int any = 0;

	while (read(fd, buf, sizeof(buf)) > 0)
		any = 1;
	return any;
}

static int
open_fifo(struct sup *sp, struct err *e)
{
	char *dir = sched__wake_dir(sp->x->ws);
	int rc = fs_mkdir_p(dir, 0755, e);

	if (rc) {
		free(dir);
		return rc;
	}
	sp->fifo = xasprintf("%s/%ld", dir, (long)getpid());
	free(dir);
	unlink(sp->fifo);
	if (mkfifo(sp->fifo, 0600) < 0)
		return err_set(e, -errno, "cannot make the FIFO '%s': %s",
			       sp->fifo, strerror(errno));
	/* our own writer keeps the FIFO from ever reading as closed */
	sp->fifo_rd = open(sp->fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	sp->fifo_wr = open(sp->fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (sp->fifo_rd < 0 || sp->fifo_wr < 0)
		return err_set(e, -errno, "cannot open the FIFO '%s': %s",
			       sp->fifo, strerror(errno));
	return 0;
}

/* Reaps dead workers; one that died unasked is replaced later. */
static void
reap(struct sup *sp)
{
	int status, i;
	pid_t pid;

	while ((pid = spawn_reap(-1, &status, WNOHANG)) > 0) {
		for (i = 0; i < sp->o->nr_companions; i++) {
			if (pid != sp->companion[i])
				continue;
			log_warn("the %s (pid %ld) died; starting it again",
				 sp->o->companions[i]->name, (long)pid);
			sp->companion[i] = 0;
			sp->companion_died[i] = time_mono_ms();
		}
		for (i = 0; i < sp->nr; i++) {
			struct kid *k = &sp->kids[i];

			if (k->pid != pid)
				continue;
			k->pid = 0;
			close(k->ctl);
			k->ctl = -1;
			k->idle = 0;
			if (!sp->draining &&
			    !(WIFEXITED(status) && !WEXITSTATUS(status))) {
				log_warn("worker %d (pid %ld) died (%s %d); "
					 "replacing it",
					 i, (long)pid,
					 WIFSIGNALED(status) ? "signal" :
							       "exit",
					 WIFSIGNALED(status) ?
						 WTERMSIG(status) :
						 WEXITSTATUS(status));
				k->died_at = time_mono_ms();
				sp->next_sweep = 0; /* requeue its task */
			}
		}
	}
}

static int
alive(const struct sup *sp)
{
	int i, n = 0;

	for (i = 0; i < sp->nr; i++)
		n += sp->kids[i].pid > 0;
	return n;
}

static void
respawn(struct sup *sp)
{
	struct err e = ERR_INIT;
	int i;

	for (i = 0; i < sp->o->nr_companions; i++) {
		const struct serve_companion *c = sp->o->companions[i];

		if (!sp->companion_died[i] ||
		    time_mono_ms() - sp->companion_died[i] < RESPAWN_MS)
			continue;
		sp->companion_died[i] = 0;
		if (c->start(c->arg, &sp->companion[i], &e)) {
			log_error("%s: %s", c->name, e.msg);
			sp->companion_died[i] = time_mono_ms();
			e = (struct err)ERR_INIT;
		}
	}

	for (i = 0; i < sp->nr && !sp->draining; i++) {
		struct kid *k = &sp->kids[i];

		if (k->pid || !k->died_at ||
		    time_mono_ms() - k->died_at < RESPAWN_MS)
			continue;
		if (spawn_worker(sp, i, &e))
			log_error("%s", e.msg);
	}
}

/*
 * Nothing is left to do: every worker found nothing, no wake-up is
 * pending, and the sweep knows of nothing falling due (no running task,
 * no cooldown or quota wait, no merge waiting when serve merges).
 */
static int
idle_for_good(struct sup *sp, int64_t next)
{
	int i;

	for (i = 0; i < sp->nr; i++)
		if (sp->kids[i].pid > 0 && !sp->kids[i].idle)
			return 0;
	return !next;
}

static void
on_signals(struct sup *sp)
{
	char sigs[16];
	ssize_t n, i;
	int k;

	while ((n = read(sig_pipe[0], sigs, sizeof(sigs))) > 0) {
		for (i = 0; i < n; i++) {
			if (sigs[i] == SIGCHLD) {
				reap(sp);
				continue;
			}
			if (!sp->draining) {
				sp->draining = 1;
				fprintf(stderr,
					"serve: draining: no new work; %d "
					"worker%s finishing (Ctrl-C again to "
					"stop now; their runs resume on the "
					"next serve)\n",
					alive(sp), alive(sp) == 1 ? "" : "s");
				wake_idle(sp);
			} else if (!sp->stopping) {
				sp->stopping = 1;
				fprintf(stderr, "serve: stopping the workers\n");
				for (k = 0; k < sp->nr; k++)
					if (sp->kids[k].pid > 0)
						spawn_signal(sp->kids[k].pid,
							     SIGTERM);
			}
		}
	}
}

static void
on_status(struct sup *sp)
{
	unsigned char who[64];
	ssize_t n, i;

	while ((n = read(sp->status[0], who, sizeof(who))) > 0) {
		for (i = 0; i < n; i++) {
			struct kid *k;

			if (who[i] >= sp->nr)
				continue;
			k = &sp->kids[who[i]];
			k->idle = 1;
			sp->recheck = 1;
			if (sp->draining && !k->told_drain) {
				tell(k, 'd');
				k->told_drain = 1;
			} else if (k->missed && !sp->draining) {
				tell(k, 'w');
			}
		}
	}
}

/* The schedules' turn (schedule.c); returns when the next slot comes. */
static int64_t
schedules(struct sup *sp, int64_t now)
{
	struct err e = ERR_INIT;
	int64_t next = 0;
	int made = sched_schedules(sp->x, &sp->slots, now, &next, &e);

	if (made < 0) {
		log_error("schedules: %s", e.msg);
		return now + 5000;
	}
	if (made > 0)
		wake_idle(sp);
	return next ? next : now + 3600 * 1000;
}

/* One sweep; returns the time of the next one. */
static int64_t
sweep(struct sup *sp, int64_t *next_due)
{
	struct err e = ERR_INIT;
	int64_t next = 0, period = (int64_t)sp->x->cfg->runtime.sweep_seconds *
				     1000;
	int64_t now = time_now_ms();
	int n = sched_sweep(sp->x, sp->last_sweep, &next, &e);

	sp->last_sweep = now;
	if (n < 0)
		log_error("sweep: %s", e.msg);
	if (n > 0)
		wake_idle(sp);
	*next_due = n > 0 ? time_now_ms() : next;
	if (next && next - time_now_ms() < period)
		return next;
	return time_now_ms() + period;
}

/*
 * What the store says about work: 0 none, else its units
 * (STORE_WATCH_UNITS), or UINT_MAX when it cannot count (wake every idle
 * worker). Drained at every turn, not only when its fd is readable,
 * since a lost LISTEN connection is mended by the drain and its fd stays
 * quiet until then.
 */
static unsigned
store_woke(struct sup *sp)
{
	unsigned got;

	if (sp->watch < 0)
		return 0;
	got = store_watch_drain(sp->x->store);
	if (!(got & STORE_WATCH_WORK))
		return 0;
	return STORE_WATCH_UNITS(got) ? STORE_WATCH_UNITS(got) : UINT_MAX;
}

static int
loop(struct sup *sp)
{
	struct pollfd pf[4];
	int64_t due = 0;
	nfds_t nr = sp->watch >= 0 ? 4 : 3;

	pf[0] = (struct pollfd){ .fd = sig_pipe[0], .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = sp->status[0], .events = POLLIN };
	pf[2] = (struct pollfd){ .fd = sp->fifo_rd, .events = POLLIN };
	pf[3] = (struct pollfd){ .fd = sp->watch, .events = POLLIN };
	for (;;) {
		int64_t now = time_now_ms(), wait;
		unsigned units;
		int woke, fifo;

		if (!sp->draining && now >= sp->next_sweep)
			sp->next_sweep = sweep(sp, &due);
		if (!sp->draining && sp->slots.n && now >= sp->next_slot)
			sp->next_slot = schedules(sp, now);
		respawn(sp);
		on_signals(sp);
		on_status(sp);
		/* read the FIFO after the status pipe: a worker writes
		 * its wake-up before it says it is idle */
		fifo = drain_fd(sp->fifo_rd);
		units = store_woke(sp);
		woke = units || fifo;
		if (!sp->draining &&
		    (units == UINT_MAX || (fifo && sp->watch < 0)))
			wake_idle(sp);
		else if (!sp->draining && units)
			wake_some(sp, units);
		if (sp->draining) {
			wake_idle(sp); /* idle ones are told to go */
			if (!alive(sp))
				return 0;
		} else if (sp->o->exit_when_idle && !woke &&
			   idle_for_good(sp, sp->recheck ? 0 : due)) {
			/* make sure with a fresh sweep: the last one may
			 * have seen a task that has settled since */
			sp->recheck = 0;
			sp->next_sweep = sweep(sp, &due);
			if (idle_for_good(sp, due) && !drain_fd(sp->fifo_rd)) {
				sp->draining = 1;
				wake_idle(sp);
				continue;
			}
		}
		wait = sp->draining ? 1000 : sp->next_sweep - time_now_ms();
		if (wait < 0)
			wait = 0;
		if (!sp->draining && sp->slots.n &&
		    sp->next_slot - time_now_ms() < wait)
			wait = sp->next_slot - time_now_ms();
		if (wait < 0)
			wait = 0;
		if (wait > RESPAWN_MS)
			wait = RESPAWN_MS;
		if (poll(pf, nr, (int)wait) < 0 && errno != EINTR)
			return -errno;
	}
}

int
sched_serve(struct sched_ctx *x, const struct serve_opts *o, struct err *e)
{
	struct sup sp = { .x = x, .o = o, .fifo_rd = -1, .fifo_wr = -1,
			  .watch = -1 };
	int64_t i64_unused;
	int i, rc;

	if (o->workers < 1 || o->workers > 256)
		return err_set(e, BATON_EINVAL,
			       "--workers must be between 1 and 256, not %d",
			       o->workers);
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(sp.status, O_CLOEXEC) < 0)
		return err_set(e, -errno, "cannot create a pipe: %s",
			       strerror(errno));
	fcntl(sp.status[0], F_SETFL, O_NONBLOCK);
	rc = open_fifo(&sp, e);
	if (rc)
		goto out;
	if (!strcmp(store_backend(x->store), "postgres")) {
		sp.watch = store_watch_fd(x->store, e);
		if (sp.watch < 0) {
			rc = sp.watch;
			goto out;
		}
	}
	set_handlers(on_signal);
	sched_slots_init(&sp.slots, x->cfg, time_now_ms());
	sp.nr = o->workers;
	sp.kids = xcalloc((size_t)sp.nr, sizeof(*sp.kids));
	for (i = 0; i < sp.nr; i++)
		sp.kids[i].ctl = -1;
	/* the companions first: they are forked before anything else
	 * exists, and a port that is taken stops serve before any work
	 * starts */
	if (o->nr_companions < 0 || o->nr_companions > SERVE_MAX_COMPANIONS)
		BUG("serve has %d companions", o->nr_companions);
	for (i = 0; i < o->nr_companions && !rc; i++)
		rc = o->companions[i]->start(o->companions[i]->arg,
					     &sp.companion[i], e);
	if (rc)
		goto out;
	/* the first sweep before any worker: a crashed serve's tasks are
	 * back in the queue when the workers first look */
	sp.next_sweep = sweep(&sp, &i64_unused);
	for (i = 0; i < sp.nr && !rc; i++)
		rc = spawn_worker(&sp, i, e);
	if (!rc)
		rc = loop(&sp);
	if (rc < 0 && !e->rc)
		err_set(e, rc, "serve: %s", strerror(-rc));
	for (i = 0; i < sp.nr; i++)
		if (sp.kids[i].pid > 0)
			spawn_signal(sp.kids[i].pid, SIGTERM);
out:
	for (i = 0; i < SERVE_MAX_COMPANIONS; i++)
		if (sp.companion[i] > 0)
			spawn_signal(sp.companion[i], SIGTERM);
	while (spawn_reap(-1, NULL, 0) > 0)
		;
	set_handlers(SIG_DFL);
	sched_slots_release(&sp.slots);
	if (sp.fifo)
		unlink(sp.fifo);
	free(sp.fifo);
	if (sp.fifo_rd >= 0)
		close(sp.fifo_rd);
	if (sp.fifo_wr >= 0)
		close(sp.fifo_wr);
	for (i = 0; i < sp.nr; i++)
		if (sp.kids[i].ctl >= 0)
			close(sp.kids[i].ctl);
	free(sp.kids);
	close(sp.status[0]);
	close(sp.status[1]);
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	sig_pipe[0] = sig_pipe[1] = -1;
	return rc;
}
