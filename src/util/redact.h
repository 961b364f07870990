/*
 * Keeping secrets out of the record. baton learns the secrets once, from
 * its own environment: the values of variables whose names say they hold
 * one (*KEY*, *TOKEN*, *SECRET*, *PASSWORD*, *CREDENTIAL*, *AUTH*) and of
 * any variable named by a provider's api_key_env. Every event, every
 * agent transcript and every HTTP record then has those values replaced
 * with [redacted:NAME] before it is kept.
 */
#ifndef BATON_UTIL_REDACT_H
#define BATON_UTIL_REDACT_H

#include <stddef.h>

struct buf;
struct err;

/* Learns the secrets of envp; extra names variables to treat as secret. */
void redact_init(char *const *envp, const char *const *extra);
/* Forgets them (tests, and at exit for leak checkers). */
void redact_reset(void);
/* The number of secrets known. */
size_t redact_count(void);

/* Replaces every secret in b. Returns how many were replaced. */
size_t redact_buf(struct buf *b);
/*
 * The reverse, for text baton kept redacted and must use again (a run's
 * config snapshot): each [redacted:NAME] whose NAME is a secret known now
 * becomes its value as it is now. A value with a quote, a backslash or a
 * control character stays redacted, so that text which was JSON or YAML
 * stays that. Returns how many were put back.
 */
size_t redact_restore(struct buf *b);
/*
 * The same for a file, rewritten atomically when something changed.
 * A missing file is fine. Files larger than the in-memory cap are
 * rewritten through a temporary file in chunks. path is opened with
 * fs_open_nofollow: a symbolic link or a FIFO in its place is refused
 * (-ELOOP, -EINVAL), so nothing outside the run folder is read or copied.
 */
int redact_file(const char *path, struct err *e);
/*
 * redact_file for each regular file directly in dir (a missing dir is
 * fine); links and other kinds are skipped.
 */
int redact_dir(const char *dir, struct err *e);

#endif
