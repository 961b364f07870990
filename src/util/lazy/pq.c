/*
 * libpq on first use (util/lazy.h): only a postgres:// store needs it,
 * and with it the two dozen libraries it is linked with (Kerberos, LDAP,
 * TLS). Each function below is defined with the prototype of
 * <libpq-fe.h>, so one that differs from the header does not compile.
 */
#include "util/compat.h"

#include <libpq-fe.h>

#include "util/lazy.h"

#define PQ_FUNCTIONS(X, V, H)                                                  \
	X(PGconn *, PQconnectdbParams,                                      \
	  (const char *const *k, const char *const *v, int x), (k, v, x))  \
	V(PQfinish, (PGconn *c), (c))                                       \
	X(ConnStatusType, PQstatus, (const PGconn *c), (c))                 \
	X(PGTransactionStatusType, PQtransactionStatus, (const PGconn *c),  \
	  (c))                                                              \
	X(char *, PQerrorMessage, (const PGconn *c), (c))                   \
	X(int, PQsocket, (const PGconn *c), (c))                            \
	X(PQnoticeProcessor, PQsetNoticeProcessor,                          \
	  (PGconn * c, PQnoticeProcessor f, void *arg), (c, f, arg))        \
	X(PGresult *, PQexec, (PGconn * c, const char *q), (c, q))          \
	X(int, PQsendQuery, (PGconn * c, const char *q), (c, q))           \
	X(PGresult *, PQgetResult, (PGconn * c), (c))                       \
	X(int, PQsendQueryParams,                                           \
	  (PGconn * c, const char *q, int n, const Oid *t,                  \
	   const char *const *v, const int *l, const int *f, int rf),       \
	  (c, q, n, t, v, l, f, rf))                                        \
	X(PGresult *, PQprepare,                                            \
	  (PGconn * c, const char *name, const char *q, int n,              \
	   const Oid *t),                                                   \
	  (c, name, q, n, t))                                               \
	X(PGresult *, PQexecPrepared,                                       \
	  (PGconn * c, const char *name, int n, const char *const *v,       \
	   const int *l, const int *f, int rf),                             \
	  (c, name, n, v, l, f, rf))                                        \
	X(int, PQsendQueryPrepared,                                         \
	  (PGconn * c, const char *name, int n, const char *const *v,       \
	   const int *l, const int *f, int rf),                             \
	  (c, name, n, v, l, f, rf))                                        \
	X(int, PQenterPipelineMode, (PGconn * c), (c))                      \
	X(int, PQexitPipelineMode, (PGconn * c), (c))                       \
	X(int, PQpipelineSync, (PGconn * c), (c))                           \
	X(PGresult *, PQexecParams,                                         \
	  (PGconn * c, const char *q, int n, const Oid *t,                  \
	   const char *const *v, const int *l, const int *f, int rf),       \
	  (c, q, n, t, v, l, f, rf))                                        \
	X(int, PQconsumeInput, (PGconn * c), (c))                           \
	X(PGnotify *, PQnotifies, (PGconn * c), (c))                        \
	X(ExecStatusType, PQresultStatus, (const PGresult *r), (r))         \
	X(char *, PQresultErrorField, (const PGresult *r, int code),        \
	  (r, code))                                                        \
	X(int, PQntuples, (const PGresult *r), (r))                         \
	X(int, PQnfields, (const PGresult *r), (r))                         \
	X(char *, PQresultErrorMessage, (const PGresult *r), (r))           \
	X(int, PQgetlength, (const PGresult *r, int t, int f), (r, t, f))   \
	X(char *, PQcmdTuples, (PGresult * r), (r))                         \
	X(char *, PQgetvalue, (const PGresult *r, int t, int f), (r, t, f)) \
	X(int, PQgetisnull, (const PGresult *r, int t, int f), (r, t, f))   \
	X(char *, PQescapeLiteral, (PGconn * c, const char *s, size_t n),   \
	  (c, s, n))                                                        \
	V(PQclear, (PGresult * r), (r))                                     \
	V(PQfreemem, (void *p), (p))

LAZY_LIBRARY(PQ_FUNCTIONS, "libpq.so.5", "PostgreSQL support")

int
lazy_pq_load(struct err *e)
{
	return lazy_load(&lib, e);
}
