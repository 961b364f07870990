/*
 * Why an agent call failed. Exit codes alone lie (qwen exits 0 after an
 * API error, claude exits 1 for a bad key and for an overloaded server
 * alike), so the class is read from everything an adapter gathered: how
 * the process ended, the HTTP status the agent reported, its error text
 * and the end of its stderr. The engine acts on the class (agent.h):
 *
 *   stopped ──────────────────────────────▶ none (the engine asked)
 *   timeout ──────────────────────────────▶ TIMEOUT
 *   ok, nothing reported ─────────────────▶ none
 *   otherwise: "prompt is too long"...    ▶ CONTEXT (compact, retry once)
 *              status 429 / "rate limit"... ▶ QUOTA (+ reset time)
 *              401, 403 / "invalid api key" ▶ AUTH
 *              5xx / "overloaded" ...       ▶ UNAVAILABLE
 *              anything else                ▶ CRASH
 *
 * A type's own exit codes (gemini exits with the HTTP status mod 256) are
 * mapped by its adapter before this runs (cli.c). It also reads quota
 * reset times out of the agents' messages.
 */
#include "util/compat.h"

#include <ctype.h>
#include <time.h>

#include "agent/agent.h"
#include "agent/cli_int.h"
#include "core/failclass.h"
#include "util/buf.h"
#include "util/timeutil.h"

/* Bytes at the end of stderr searched for a cause. */
#define CLASSIFY_ERR_TAIL 4096
/* Longest one-line summary taken from stderr. */
#define SUMMARY_MAX 400

static const char *const quota_words[] = {
	"rate limit",
	"rate_limit",
	"ratelimit",
	"quota",
	"usage limit",
	"resource_exhausted",
	"resource exhausted",
	"too many requests",
	NULL,
};

static const char *const auth_words[] = {
	"invalid api key",	  "invalid_api_key",
	"invalid x-api-key",	  "unauthorized",
	"unauthenticated",	  "authentication",
	"failed to authenticate", "invalid auth method",
	"not logged in",	  "/login",
	"permission_denied",	  NULL,
};

static const char *const unavailable_words[] = {
	"overloaded",	       "internal server error",
	"service unavailable", "bad gateway",
	"gateway timeout",     "server_error",
	"server error",	       "high demand",
	"unable to connect",   "connection refused",
	"econnrefused",	       "connection error",
	"fetch failed",	       NULL,
};

/* A context window too small for the prompt, as each provider says it. */
static const char *const context_words[] = {
	"context_length_exceeded",	  /* OpenAI's code */
	"maximum context length",	  /* OpenAI's message */
	"prompt is too long",		  /* Anthropic */
	"exceeds the maximum number of tokens", /* Gemini */
	"context window",		  /* "exceeds the context window" */
	"context length exceeded",	  /* Mistral, vLLM, LiteLLM */
	"model_context_window_exceeded",  /* Codex */
	"reduce the length of the messages",
	"too many tokens in the prompt",
	NULL,
};

/* Prefixes after which an error text gives its HTTP status. */
static const char *const status_prefixes[] = {
	"api error: ", "api error ", "status code: ", "status code ",
	"status: ",    "status ",    "statuscode\":", "\"code\":",
	"\"code\": ",  "http ",	     "http/1.1 ",     "error code: ",
	NULL,
};

static int
has_word(const char *text, const char *const *words)
{
	size_t i;

	if (!text || !*text)
		return 0;
	for (i = 0; words[i]; i++)
		if (strcasestr(text, words[i]))
			return 1;
	return 0;
}

/* The status at s: exactly three digits, 400-599; else 0. */
static int
status_at(const char *s)
{
	int v;

	if (!isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) ||
	    !isdigit((unsigned char)s[2]) || isdigit((unsigned char)s[3]))
		return 0;
	v = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
	return v >= 400 && v <= 599 ? v : 0;
}

int
agent__status_in_text(const char *text)
{
	const char *p, *best = NULL;
	size_t i, len;
	int v, best_v = 0;

	if (!text)
		return 0;
	/* the earliest mention wins, whichever prefix it has */
	for (i = 0; status_prefixes[i]; i++) {
		len = strlen(status_prefixes[i]);
		for (p = strcasestr(text, status_prefixes[i]); p;
		     p = strcasestr(p + 1, status_prefixes[i])) {
			v = status_at(p + len);
			if (!v)
				continue;
			if (!best || p < best) {
				best = p;
				best_v = v;
			}
			break;
		}
	}
	return best_v;
}

static enum agent_failure
by_status(int status)
{
	if (status == 429 || status == 402)
		return AGENT_FAIL_QUOTA;
	if (status == 401 || status == 403)
		return AGENT_FAIL_AUTH;
	if (status == 408 || (status >= 500 && status <= 599))
		return AGENT_FAIL_UNAVAILABLE;
	return AGENT_FAIL_NONE;
}

static enum agent_failure
by_text(const char *text)
{
	if (has_word(text, quota_words))
		return AGENT_FAIL_QUOTA;
	if (has_word(text, auth_words))
		return AGENT_FAIL_AUTH;
	if (has_word(text, unavailable_words))
		return AGENT_FAIL_UNAVAILABLE;
	return AGENT_FAIL_NONE;
}

/* The last CLASSIFY_ERR_TAIL bytes of the stderr tail. */
static const char *
err_end(const struct agent_result *r)
{
	const struct buf *b = &r->err_tail;

	return b->len > CLASSIFY_ERR_TAIL ? b->ptr + b->len - CLASSIFY_ERR_TAIL
					  : b->ptr;
}

int
agent_context_overflow(const char *text)
{
	return has_word(text, context_words);
}

static enum agent_failure
classify(const struct agent_result *r)
{
	int reported = r->message.len || r->http_status;
	enum agent_failure f;
	const char *tail;
	int status;

	switch (r->outcome) {
	case AGENT_STOPPED:
		return AGENT_FAIL_NONE;
	case AGENT_TIMEOUT:
		return AGENT_FAIL_TIMEOUT;
	case AGENT_OK:
		if (!reported)
			return AGENT_FAIL_NONE;
		break;
	case AGENT_EXIT:
	case AGENT_CRASHED:
		break;
	}
	/* before the status: a context error is a 400, or a 413 */
	if (agent_context_overflow(r->message.ptr) ||
	    (r->outcome != AGENT_OK && agent_context_overflow(err_end(r))))
		return AGENT_FAIL_CONTEXT;
	status = r->http_status;
	if (!status)
		status = agent__status_in_text(r->message.ptr);
	f = by_status(status);
	if (f == AGENT_FAIL_NONE)
		f = by_text(r->message.ptr);
	if (f == AGENT_FAIL_NONE && r->outcome != AGENT_OK) {
		tail = err_end(r);
		f = by_status(agent__status_in_text(tail));
		if (f == AGENT_FAIL_NONE)
			f = by_text(tail);
	}
	return f == AGENT_FAIL_NONE ? AGENT_FAIL_CRASH : f;
}

/* The last non-empty line of s (len bytes) into out, on one line. */
static void
last_line(const char *s, size_t len, struct buf *out)
{
	size_t end = len, start;

	while (end > 0 && isspace((unsigned char)s[end - 1]))
		end--;
	start = end;
	while (start > 0 && s[start - 1] != '\n')
		start--;
	while (start < end && isspace((unsigned char)s[start]))
		start++;
	if (end - start > SUMMARY_MAX)
		end = start + SUMMARY_MAX;
	buf_add(out, s + start, end - start);
}

static void
summarize(struct agent_result *r)
{
	if (r->outcome == AGENT_TIMEOUT) {
		buf_adds(&r->message, "timed out");
		return;
	}
	last_line(r->err_tail.ptr, r->err_tail.len, &r->message);
	if (r->message.len)
		return;
	if (r->outcome == AGENT_CRASHED)
		buf_addf(&r->message, "killed by signal %d", r->signal);
	else if (r->outcome == AGENT_EXIT)
		buf_addf(&r->message, "exited with status %d", r->status);
	else if (r->http_status)
		buf_addf(&r->message, "the API answered %d", r->http_status);
	else
		buf_adds(&r->message, "the agent reported an error");
}

void
agent_classify(struct agent_result *r)
{
	int64_t now;

	if (r->failure == AGENT_FAIL_NONE)
		r->failure = classify(r);
	if (r->failure == AGENT_FAIL_QUOTA && !r->reset_at_ms) {
		now = time_now_ms();
		r->reset_at_ms = agent_parse_reset(r->message.ptr, now);
		if (!r->reset_at_ms)
			r->reset_at_ms = agent_parse_reset(err_end(r), now);
	}
	if (r->failure != AGENT_FAIL_NONE && !r->message.len)
		summarize(r);
}

/*
 * Reset times. Four shapes are understood, tried in this order:
 *
 *   "...usage limit reached|1735689600"      epoch seconds after a '|'
 *   "resets at 2026-11-21T15:00:00Z"         RFC 3339 (or epoch seconds)
 *                                            after the word "reset"
 *   "Try again at 1:50 PM", "resets 2pm"     a clock time after a phrase:
 *                                            the next such time, today or
 *                                            else tomorrow
 *   "try again in 2 hours 5 minutes"         a duration after a phrase
 *   "retry after 30", "Retry-After: 30"      (a bare number is seconds)
 *
 * A clock time is read in the host's local time zone (TZ), as the CLIs
 * print it in the user's, unless "UTC" or "GMT" follows it. A time that
 * has passed today (or is now) means tomorrow.
 */

/* Epoch seconds as exactly ten digits at s, or 0. */
static int64_t
epoch_at(const char *s)
{
	int64_t v = 0;
	int i;

	for (i = 0; i < 10; i++) {
		if (!isdigit((unsigned char)s[i]))
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	return isdigit((unsigned char)s[10]) ? 0 : v * 1000;
}

static int64_t
epoch_after_bar(const char *text)
{
	const char *p;
	int64_t v;

	for (p = strchr(text, '|'); p; p = strchr(p + 1, '|')) {
		v = epoch_at(p + 1);
		if (v)
			return v;
	}
	return 0;
}

/* How far after "reset" a time may start ("resets at ", "reset: "). */
#define RESET_WINDOW 32

static int64_t
time_after_reset(const char *text)
{
	const char *p, *q;
	int64_t v;

	for (p = strcasestr(text, "reset"); p; p = strcasestr(p + 1, "reset")) {
		for (q = p + 5; *q && q < p + 5 + RESET_WINDOW; q++) {
			if (!isdigit((unsigned char)*q))
				continue;
			v = time_parse_iso(q);
			if (!v)
				v = epoch_at(q);
			if (v)
				return v;
			break;
		}
	}
	return 0;
}

/* Phrases a clock time follows. */
static const char *const clock_phrases[] = {
	"again at", "retry at",	    "retrying at", "resets at", "reset at",
	"resets",   "available at", "back at",	   NULL,
};

/*
 * A clock time at s: "1:50 PM", "1:50pm", "2pm", "2 p.m.", "13:50",
 * "13:50 UTC". A bare hour needs its am/pm. Sets *h (0-23), *m and *utc;
 * returns 0, or -1 when s starts with none.
 */
static int
clock_at(const char *s, int *h, int *m, int *utc)
{
	int hour = 0, min = 0, colon = 0, half = 0, n = 0;

	while (*s == ' ')
		s++;
	while (isdigit((unsigned char)*s) && n < 3) {
		hour = hour * 10 + (*s++ - '0');
		n++;
	}
	if (!n || n > 2 || isdigit((unsigned char)*s))
		return -1;
	if (*s == ':' && isdigit((unsigned char)s[1]) &&
	    isdigit((unsigned char)s[2]) && !isdigit((unsigned char)s[3])) {
		min = (s[1] - '0') * 10 + (s[2] - '0');
		colon = 1;
		s += 3;
	}
	while (*s == ' ')
		s++;
	if ((tolower((unsigned char)s[0]) == 'a' ||
	     tolower((unsigned char)s[0]) == 'p') &&
	    (tolower((unsigned char)s[1]) == 'm' ||
	     (s[1] == '.' && tolower((unsigned char)s[2]) == 'm')) ) {
		half = tolower((unsigned char)s[0]) == 'p' ? 2 : 1;
		s += s[1] == '.' ? 3 : 2;
		if (*s == '.')
			s++;
		if (isalpha((unsigned char)*s))
			return -1;
	}
	if ((!colon && !half) || min > 59 || hour > (half ? 12 : 23) ||
	    (half && hour == 0))
		return -1;
	if (half)
		hour = hour % 12 + (half == 2 ? 12 : 0);
	while (*s == ' ' || *s == '(')
		s++;
	*utc = !strncasecmp(s, "utc", 3) || !strncasecmp(s, "gmt", 3);
	*h = hour;
	*m = min;
	return 0;
}

/* The first time at h:m after now_ms (local, or UTC), in epoch ms. */
static int64_t
next_clock(int64_t now_ms, int h, int m, int utc)
{
	time_t now = (time_t)(now_ms / 1000), at;
	struct tm tm;

	if (!(utc ? gmtime_r(&now, &tm) : localtime_r(&now, &tm)))
		return 0;
	tm.tm_hour = h;
	tm.tm_min = m;
	tm.tm_sec = 0;
	tm.tm_isdst = -1;
	at = utc ? timegm(&tm) : mktime(&tm);
	if (at == (time_t)-1)
		return 0;
	if ((int64_t)at * 1000 <= now_ms) {
		/* passed: the same time tomorrow (mktime rolls the month) */
		tm.tm_mday++;
		tm.tm_hour = h;
		tm.tm_min = m;
		tm.tm_sec = 0;
		tm.tm_isdst = -1;
		at = utc ? timegm(&tm) : mktime(&tm);
		if (at == (time_t)-1)
			return 0;
	}
	return (int64_t)at * 1000;
}

static int64_t
clock_after_phrase(const char *text, int64_t now_ms)
{
	const char *p;
	size_t i, len;
	int h, m, utc;

	for (i = 0; clock_phrases[i]; i++) {
		len = strlen(clock_phrases[i]);
		for (p = strcasestr(text, clock_phrases[i]); p;
		     p = strcasestr(p + 1, clock_phrases[i]))
			if (clock_at(p + len, &h, &m, &utc) == 0)
				return next_clock(now_ms, h, m, utc);
	}
	return 0;
}

struct unit {
	const char *name;
	int64_t ms;
};

static const struct unit units[] = {
	{ "ms", 1 },	      { "millisecond", 1 }, { "milliseconds", 1 },
	{ "s", 1000 },	      { "sec", 1000 },	    { "secs", 1000 },
	{ "second", 1000 },   { "seconds", 1000 },  { "m", 60000 },
	{ "min", 60000 },     { "mins", 60000 },    { "minute", 60000 },
	{ "minutes", 60000 }, { "h", 3600000 },	    { "hr", 3600000 },
	{ "hrs", 3600000 },   { "hour", 3600000 },  { "hours", 3600000 },
	{ "d", 86400000 },    { "day", 86400000 },  { "days", 86400000 },
};

/* The unit named by the n letters at s, in ms; 0 if none. */
static int64_t
unit_ms(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(units); i++)
		if (strlen(units[i].name) == n &&
		    !strncasecmp(units[i].name, s, n))
			return units[i].ms;
	return 0;
}

/*
 * A duration at s: "2 hours 5 minutes", "1h2m", "45s", "30 seconds",
 * "1.5 hours", "2 hours and 5 minutes"; a bare number is seconds. Returns
 * ms, or 0 when s starts with none.
 */
static int64_t
duration_at(const char *s)
{
	int64_t total = 0, whole, frac, scale, mult;
	size_t n;
	int parts = 0;

	for (;;) {
		while (*s == ' ' || *s == ',')
			s++;
		if (parts && !strncasecmp(s, "and ", 4))
			s += 4;
		if (!isdigit((unsigned char)*s))
			break;
		for (whole = 0; isdigit((unsigned char)*s) && whole < 100000000;
		     s++)
			whole = whole * 10 + (*s - '0');
		frac = 0;
		scale = 1;
		if (*s == '.' && isdigit((unsigned char)s[1]))
			for (s++; isdigit((unsigned char)*s); s++)
				if (scale < 1000) {
					frac = frac * 10 + (*s - '0');
					scale *= 10;
				}
		while (*s == ' ')
			s++;
		for (n = 0; isalpha((unsigned char)s[n]); n++)
			;
		mult = n ? unit_ms(s, n) : 0;
		if (!mult) {
			/* "retry after 30", "Retry-After: 30 (seconds)" */
			if (!parts)
				total = whole * 1000 + frac * 1000 / scale;
			break;
		}
		total += whole * mult + frac * mult / scale;
		parts++;
		s += n;
	}
	return total;
}

/* Phrases a wait follows. */
static const char *const wait_phrases[] = {
	"again in",	"retry in",    "retrying in",  "resets in",
	"reset in",	"retry after", "retry-after:", "retry-after",
	"available in", "wait for",    NULL,
};

static int64_t
duration_after_phrase(const char *text)
{
	const char *p;
	size_t i, len;
	int64_t v;

	for (i = 0; wait_phrases[i]; i++) {
		len = strlen(wait_phrases[i]);
		for (p = strcasestr(text, wait_phrases[i]); p;
		     p = strcasestr(p + 1, wait_phrases[i])) {
			v = duration_at(p + len);
			if (v > 0)
				return v;
		}
	}
	return 0;
}

int64_t
agent_parse_reset(const char *text, int64_t now_ms)
{
	int64_t v;

	if (!text || !*text)
		return 0;
	v = epoch_after_bar(text);
	if (!v)
		v = time_after_reset(text);
	if (!v)
		v = clock_after_phrase(text, now_ms);
	if (v)
		return v;
	v = duration_after_phrase(text);
	return v > 0 ? now_ms + v : 0;
}

int64_t
agent_retry_at(int64_t reset_at_ms, int64_t now_ms, int backoff_seconds, int n,
	       int jitter_pct)
{
	int64_t backoff, until;

	if (reset_at_ms > now_ms) {
		until = reset_at_ms;
	} else {
		backoff = (int64_t)backoff_seconds * 1000 << (n < 6 ? n : 6);
		backoff += backoff / 10 * (jitter_pct % 100) / 100;
		until = now_ms + backoff;
	}
	if (until - now_ms > AGENT_MAX_WAIT_MS)
		until = now_ms + AGENT_MAX_WAIT_MS;
	return until;
}

/*
 * The class of a failed call (failclass.h). The agent's own class
 * decides where it is certain: a quota or an outage is flaky, a call that
 * ran out of its time is a loop;
 * credentials and a missing program are setup no retry fixes. Anything
 * else (a crash, unreadable output, a limit) is classified by what the
 * agent said: its message, else the end of its stderr.
 */
void
agent_failure_class(const struct agent_result *r, struct fail_verdict *out)
{
	switch (r->failure) {
	case AGENT_FAIL_QUOTA:
	case AGENT_FAIL_UNAVAILABLE:
		fail_classify(NULL, "transient_or_flaky_failure", out);
		return;
	case AGENT_FAIL_TIMEOUT:
		/*
		 * Not openTiger's "timed out" (a request that timed out, a
		 * flaky network): this agent used its whole timeout_seconds,
		 * which another try of the same prompt is likely to do
		 * again. One more try, as for a loop.
		 */
		fail_classify(NULL, "model_doom_loop", out);
		return;
	case AGENT_FAIL_AUTH:
	case AGENT_FAIL_MISSING:
		fail_classify(NULL, "setup_or_bootstrap_issue", out);
		out->retryable = 0;
		return;
	case AGENT_FAIL_NONE:
	case AGENT_FAIL_CRASH:
	case AGENT_FAIL_BAD_OUTPUT:
	case AGENT_FAIL_LIMIT:
	case AGENT_FAIL_CONTEXT:
		break;
	}
	fail_classify(NULL, NULL, out);
	if (r->message.len)
		fail_classify(r->message.ptr, NULL, out);
	if (out->cls == FAIL_CLASS_MODEL && r->err_tail.len)
		fail_classify(err_end(r), NULL, out);
}
