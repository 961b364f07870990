/*
 * Every cap on a buffer fed by a child, a socket or a file, in one place
 * (STYLE.md section 5), so a reader can see what baton holds in memory.
 */
#ifndef BATON_UTIL_LIMITS_H
#define BATON_UTIL_LIMITS_H

/* Tail of an agent's stdout/stderr kept in memory; the rest is on disk. */
#define BUF_MAX_AGENT_TAIL (256 * 1024)
/* Tail of each validation command's output kept for validation.json. */
#define BUF_MAX_VALIDATE_TAIL (16 * 1024)
/* Output of a git command read back (rev-parse, status, diff --stat). */
#define BUF_MAX_GIT_OUTPUT (16 * 1024 * 1024)
/* A config file or a pipeline definition. */
#define BUF_MAX_CONFIG (1024 * 1024)
/* An artifact an agent writes (plan.md, review.json ...) read back. */
#define BUF_MAX_ARTIFACT (4 * 1024 * 1024)
/*
 * A task's text (title and body), in bytes. It reaches an agent whole in
 * BATON_TASK and in the prompt (an argument of the CLI adapters), and
 * the kernel refuses any one argument or environment string over 128 KiB
 * (MAX_ARG_STRLEN): with the prompt's template and context beside it,
 * 64 KiB of task is what always fits.
 */
#define TASK_TEXT_MAX (64 * 1024)
/* Characters of context (plan, findings, guidance) handed to an agent. */
#define BUF_MAX_PROMPT_CONTEXT (48 * 1024)

/* A file baton's own agent reads with read_file (the rest is cut). */
#define TOOLS_READ_MAX (256 * 1024)
/* A file the edit and search tools load whole. */
#define TOOLS_FILE_MAX (16 * 1024 * 1024)
/* Output of the run tool handed back to the model. */
#define TOOLS_RUN_TAIL (32 * 1024)
/* One response body from a model server. */
#define HTTP_MAX_RESPONSE (32 * 1024 * 1024)
/* One line of an agent CLI's JSON stream; longer lines are dropped. */
#define CLI_LINE_MAX (16 * 1024 * 1024)

#endif
