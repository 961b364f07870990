/*
 * Clocks and time formatting. Timestamps on record are milliseconds since
 * the Unix epoch (UTC); durations use the monotonic clock.
 */
#ifndef BATON_UTIL_TIMEUTIL_H
#define BATON_UTIL_TIMEUTIL_H

#include <stddef.h>
#include <stdint.h>

/*
 * Wall clock, ms since the epoch, plus the process's clock offset (see
 * time_set_offset_ms): with a shared PostgreSQL store every host's
 * leases, cooldowns and deadlines follow the database's clock, not its
 * own, so a host whose clock is off cannot expire another's lease early
 * or hold its own past its time.
 */
int64_t time_now_ms(void);
/*
 * The host's own wall clock, without the offset: for measuring the
 * offset, and nothing else.
 */
int64_t time_host_ms(void);
/*
 * Sets the offset time_now_ms adds to the host's clock (the database's
 * clock minus this host's; 0, the default, for SQLite). Process-wide and
 * safe to call from any thread.
 */
void time_set_offset_ms(int64_t offset);
/* The offset in force: the database's clock minus this host's. */
int64_t time_offset_ms(void);
/* Monotonic clock in ms, for durations and timeouts. */
int64_t time_mono_ms(void);
/* "2026-11-21T22:41:05.123Z" into out (at least 25 bytes); "" for 0. */
void time_fmt_iso(int64_t ms, char *out, size_t n);
/*
 * An RFC 3339 time at the start of s ("2026-11-21T15:00:00Z"; fraction and
 * offset optional, no offset means UTC; what follows is ignored) as epoch
 * ms, or 0 when s does not start with one.
 */
int64_t time_parse_iso(const char *s);
/* "3s", "4m12s", "2h05m", "3d04h": a short human duration. */
void time_fmt_age(int64_t ms, char *out, size_t n);

#endif
