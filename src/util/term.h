/*
 * Text for a person's terminal. Task titles, agent messages, reasons and
 * event data come from people and agents baton does not control; printed
 * raw, an escape sequence in them could set the terminal's title, clear
 * the screen or overwrite what baton printed. Every human-output path of
 * the command line prints such text through term_printf (or builds it
 * with term_escape), which shows each control character as an escape
 * instead. JSON output needs none of this: JSON escapes its own.
 */
#ifndef BATON_UTIL_TERM_H
#define BATON_UTIL_TERM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

struct buf;

/*
 * Appends s (len bytes) to out with every control character shown as
 * text: C0 controls as "\x1b" ("\r" for a carriage return), DEL as
 * "\x7f", C1 controls (U+0080..U+009F) as "\u009b", and a byte that is
 * not part of valid UTF-8 as "\xNN". Newline and tab are kept: baton's
 * own lines and multi-line text need them. Everything else, valid UTF-8
 * included, is appended as it is.
 */
void term_escape(struct buf *out, const char *s, size_t len);

/*
 * fprintf to f, with the whole formatted text passed through term_escape.
 * Returns the number of bytes written, or -1 on a write error.
 */
int term_printf(FILE *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int term_vprintf(FILE *f, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

#endif
