/*
 * The agent CLI versions baton was tested with: for each CLI type, the
 * newest release its test suite passed against (tools/agents.sh pins
 * them), compiled in, so `baton doctor` can say when an installed CLI is
 * newer than that, and the parts of a `--version` answer that compare.
 */
#ifndef BATON_AGENT_VERSIONS_H
#define BATON_AGENT_VERSIONS_H

#include <stddef.h>

/*
 * The newest version of type's CLI the tests ran against ("2.1.197"),
 * or NULL when baton's tests do not drive that CLI (aider, amp, auggie,
 * crush, and the non-CLI types). Static storage.
 */
const char *agent_tested_version(const char *type);

/*
 * The first version number in text, a program's --version answer
 * ("codex-cli 0.169.0", "GitHub Copilot CLI 1.0.102.", "2.1.197 (Claude
 * Code)"): the first run of digits and dots that starts with a digit
 * and holds a dot, its trailing dots cut. Written to out (n bytes, cut
 * to fit); 0, or -1 when text has none (out is then "").
 */
int agent_version_in(const char *text, char *out, size_t n);

/*
 * Compares two versions as dot-separated numbers, field by field, a
 * missing field counting as 0 ("1.2" == "1.2.0"); whatever follows the
 * numbers ("-beta") is ignored. <0, 0 or >0 as a is older than, the
 * same as or newer than b.
 */
int agent_version_cmp(const char *a, const char *b);

#endif
