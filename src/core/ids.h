/*
 * Run ids. They are deterministic (Craik): the same sequence number and
 * task text always give the same id, "r<seq>-<slug>", where the slug is
 * the task's first words in lowercase ASCII, joined by '-', at most 24
 * characters. Ids are safe as file names and git branch names.
 */
#ifndef BATON_CORE_IDS_H
#define BATON_CORE_IDS_H

#include <stdint.h>

/* A new string the caller frees. */
char *run_id_make(int64_t seq, const char *task);
/*
 * The seq a reference names if it is of the form "7", "r7" or "r7-...";
 * 0 if it is not.
 */
int64_t run_id_seq(const char *ref);

#endif
