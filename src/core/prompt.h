/*
 * Prompt templates: one per stage kind, compiled in (src/core/prompts/)
 * and overridable per repository in .baton/prompts/<kind>.md. A template
 * holds {{name}} placeholders: task, run_id, stage, run_dir, worktree, artifact,
 * context, retry. Context handed to an agent has a fixed
 * character budget (BUF_MAX_PROMPT_CONTEXT): each section is cut to what
 * is left, and the cut is marked.
 */
#ifndef BATON_CORE_PROMPT_H
#define BATON_CORE_PROMPT_H

#include <stddef.h>

struct buf;

struct prompt_var {
	const char *name, *value;
};

/* The built-in template for a kind name ("plan"), or NULL. */
const char *prompt_builtin(const char *kind);

/*
 * The template NAME as a repository sees it: baton_dir/prompts/NAME.md
 * when that file exists and is not empty, else the built-in. A new
 * string the caller frees; NULL when there is neither.
 */
char *prompt_template(const char *baton_dir, const char *name);
/* baton_dir/prompts/NAME.md when it exists and is not empty (a new
 * string the caller frees), else NULL. */
char *prompt_repo_template(const char *baton_dir, const char *name);

/*
 * Appends tmpl to out with each {{name}} replaced by its value from vars
 * (n entries); an unknown placeholder is kept as written.
 */
void prompt_render(const char *tmpl, const struct prompt_var *vars, size_t n,
		   struct buf *out);

/*
 * Appends "## title\n\ntext\n\n" to out when text is not empty, spending
 * from *budget: text longer than what is left keeps its end (the latest
 * lines matter most) and says how much was cut.
 */
void prompt_section(struct buf *out, const char *title, const char *text,
		    size_t *budget);

/*
 * A prompt too large for the model's context window, made to fit in
 * target bytes: the "## " sections' bodies, largest first, are cut to
 * their beginning with a note of what was cut, down to PROMPT_KEEP_MIN
 * bytes each; what comes before the first section (the instructions) is
 * kept whole. Appends the result to out; returns the bytes cut (0: none
 * could be).
 */
#define PROMPT_KEEP_MIN 512
size_t prompt_compact(const char *prompt, size_t target, struct buf *out);

#endif
