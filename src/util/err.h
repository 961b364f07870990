/*
 * Error codes and the error buffer. Functions that can fail return 0 or a
 * negative code: -errno for OS failures, BATON_E* for baton's own. Human
 * detail goes in an optional struct err passed last (NULL is allowed).
 */
#ifndef BATON_UTIL_ERR_H
#define BATON_UTIL_ERR_H

enum {
	BATON_EFIRST = -1100,
	BATON_ENOTFOUND,  /* no such run, stage, key, file ... */
	BATON_ECONFLICT,  /* lost a race: the row changed under us */
	BATON_EBADSTATE,  /* transition not in the table */
	BATON_ETIMEDOUT,  /* a child or wait ran out of time */
	BATON_EINVAL,     /* bad input: config, arguments, agent output */
	BATON_EBUSY,      /* someone else holds it (a run's driver) */
	BATON_ECONTRACT,  /* a stage's output broke its contract */
	BATON_EAMBIGUOUS, /* a prefix matched more than one */
	BATON_ESTORE,     /* the database failed */
	BATON_ECHILD,     /* a child process failed */
	BATON_EABORTED,   /* stopped on request */
	BATON_ENOREPO,    /* not inside a git repository */
	BATON_EFENCED,    /* our lease was taken over: we may not write */
	BATON_EEXIST,     /* another record holds that key already */
	BATON_ELAST
};

struct err {
	int rc;
	char msg[1024];
};

#define ERR_INIT { 0, "" }

/*
 * Records rc and a message (lowercase, no trailing period, subject first)
 * in e, which may be NULL. Returns rc so that "return err_set(...)" reads.
 */
int err_set(struct err *e, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefixes the message already in e with more context ("ctx: old"). */
int err_prefix(struct err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The name of any code: baton's own or -errno. */
const char *baton_strerror(int rc);

#endif
