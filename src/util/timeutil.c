/*
 * Clocks: see timeutil.h.
 */
#include "util/compat.h"

#include <ctype.h>
#include <time.h>

#include "util/timeutil.h"

/*
 * The database's clock minus this host's, in ms. Written by the store's
 * clock measurement (one thread) and read by every thread: relaxed
 * atomics are enough, a reader sees the old offset or the new one.
 */
static int64_t clock_offset;

int64_t
time_host_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
time_now_ms(void)
{
	return time_host_ms() + __atomic_load_n(&clock_offset, __ATOMIC_RELAXED);
}

void
time_set_offset_ms(int64_t offset)
{
	__atomic_store_n(&clock_offset, offset, __ATOMIC_RELAXED);
}

int64_t
time_offset_ms(void)
{
	return __atomic_load_n(&clock_offset, __ATOMIC_RELAXED);
}

int64_t
time_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
time_fmt_iso(int64_t ms, char *out, size_t n)
{
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;

	if (!ms) {
		if (n)
			out[0] = '\0';
		return;
	}
	gmtime_r(&secs, &tm);
	snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

void
time_fmt_age(int64_t ms, char *out, size_t n)
{
	int64_t s = ms < 0 ? 0 : ms / 1000;

	if (s < 60)
		snprintf(out, n, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(out, n, "%lldm%02llds", (long long)(s / 60),
			 (long long)(s % 60));
	else if (s < 86400)
		snprintf(out, n, "%lldh%02lldm", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
	else
		snprintf(out, n, "%lldd%02lldh", (long long)(s / 86400),
			 (long long)(s % 86400 / 3600));
}

/* Reads n digits at *s into *out; advances *s. */
static int
digits(const char **s, int n, int *out)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*s)[i]))
			return -1;
		v = v * 10 + ((*s)[i] - '0');
	}
	*s += n;
	*out = v;
	return 0;
}

int64_t
time_parse_iso(const char *s)
{
	struct tm tm;
	int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0, ms = 0, scale;
	time_t t;

	if (digits(&s, 4, &y) || *s++ != '-' || digits(&s, 2, &mo) ||
	    *s++ != '-' || digits(&s, 2, &d) ||
	    (*s != 'T' && *s != 't' && *s != ' '))
		return 0;
	s++;
	if (digits(&s, 2, &h) || *s++ != ':' || digits(&s, 2, &mi) ||
	    *s++ != ':' || digits(&s, 2, &sec))
		return 0;
	if (*s == '.') {
		s++;
		for (scale = 100; isdigit((unsigned char)*s); s++, scale /= 10)
			ms += (*s - '0') * scale;
	}
	if (*s == '+' || *s == '-') {
		sign = *s == '+' ? 1 : -1;
		s++;
		if (digits(&s, 2, &oh))
			return 0;
		if (*s == ':')
			s++;
		if (digits(&s, 2, &om))
			return 0;
	}
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    sec > 60)
		return 0;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return 0;
	t -= sign * (oh * 3600 + om * 60);
	return (int64_t)t * 1000 + ms;
}
