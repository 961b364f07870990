/*
 * Text files compiled into the binary by tools/embed.sh: SQL migrations,
 * built-in pipelines and prompt templates.
 */
#ifndef BATON_UTIL_EMBED_H
#define BATON_UTIL_EMBED_H

struct embedded_file {
	const char *name; /* file name without directory: "001-init.sql" */
	const char *text;
};

/* Terminated by an entry whose name is NULL; sorted as the build lists them. */
extern const struct embedded_file embedded_files[];

/* The text of the embedded file called name, or NULL. */
const char *embed_get(const char *name);

#endif
