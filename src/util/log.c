/*
 * Logging: see log.h.
 */
#include "util/compat.h"

#include "util/log.h"
#include "util/term.h"
#include "util/timeutil.h"

static int level = -1;

static void
load_level(void)
{
	const char *s = getenv("BATON_LOG");

	level = LOG_WARN;
	if (!s)
		return;
	if (!strcmp(s, "debug"))
		level = LOG_DEBUG;
	else if (!strcmp(s, "info"))
		level = LOG_INFO;
	else if (!strcmp(s, "error"))
		level = LOG_ERROR;
}

int
log_enabled(enum log_level lvl)
{
	if (level < 0)
		load_level();
	return (int)lvl >= level;
}

void
log_msg(enum log_level lvl, const char *module, const char *fmt, ...)
{
	static const char *const names[] = { "debug", "info", "warn", "error" };
	char ts[40];
	va_list ap;

	if (!log_enabled(lvl))
		return;
	time_fmt_iso(time_now_ms(), ts, sizeof(ts));
	fprintf(stderr, "%s %s %s ", ts, names[lvl], module);
	va_start(ap, fmt);
	term_vprintf(stderr, fmt, ap); /* messages may quote an agent */
	va_end(ap);
	fputc('\n', stderr);
}
