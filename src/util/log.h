/*
 * Logging to stderr: one line per message, "ts level module msg". The
 * level comes from BATON_LOG (debug, info, warn, error; default warn) so
 * that the CLI stays quiet and a daemon or a test can ask for more.
 */
#ifndef BATON_UTIL_LOG_H
#define BATON_UTIL_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_msg(enum log_level lvl, const char *module, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Nonzero when messages at lvl are printed. */
int log_enabled(enum log_level lvl);

#ifndef LOG_MODULE
#define LOG_MODULE "baton"
#endif
#define log_debug(...) log_msg(LOG_DEBUG, LOG_MODULE, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, LOG_MODULE, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, LOG_MODULE, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, LOG_MODULE, __VA_ARGS__)

#endif
