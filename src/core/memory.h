/*
 * The repository's memory (OpenViber, seed 003; docs/operations.md
 * "Memory"): what earlier runs decided and how they ended, and notes
 * people add, given to later runs of the same repository in their
 * prompt. Pure: choosing the entries that bear on a task within a byte
 * budget, and writing them delimited as untrusted text. The store keeps
 * the entries (store_memory_*), engine/memory.c writes them.
 */
#ifndef BATON_CORE_MEMORY_H
#define BATON_CORE_MEMORY_H

#include <stddef.h>

#include <jansson.h>

struct buf;

/* The longest entry id, and an entry's body, in bytes. */
#define MEMORY_ID_MAX	80
#define MEMORY_BODY_MAX (16 * 1024)
/* What a prompt gives the memory at most. */
#define MEMORY_PROMPT_MAX (4 * 1024)

/* 1 if id is a memory id: 1 to MEMORY_ID_MAX of [a-z0-9-], a letter first. */
int memory_id_ok(const char *id);

/*
 * How well entry body bears on task: the number of distinct words of the
 * task (4 letters or more, lower-cased, common words left out) that are
 * words of the body. 0: it does not.
 */
int memory_relevance(const char *task, const char *body);

/*
 * The section of a prompt that carries the entries of list (store
 * order, oldest first) relevant to task: the most relevant first, the
 * newest among equals, as many as fit in max bytes (an entry too long
 * is cut). Each is between a BEGIN and an END line that carry tag, and
 * a line of a body that starts like one is defused, so that an entry
 * cannot end itself early and speak as the prompt. Nothing is appended
 * when no entry bears on the task. Returns the entries given.
 */
size_t memory_prompt(const json_t *list, const char *task, const char *tag,
		     size_t max, struct buf *out);

#endif
