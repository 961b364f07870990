/*
 * Prompt rendering: see prompt.h.
 */
#include "util/compat.h"

#include "core/prompt.h"
#include "util/buf.h"
#include "util/embed.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/xalloc.h"

const char *
prompt_builtin(const char *kind)
{
	char name[64];

	snprintf(name, sizeof(name), "%s.md", kind);
	return embed_get(name);
}

char *
prompt_repo_template(const char *baton_dir, const char *name)
{
	char *path = xasprintf("%s/prompts/%s.md", baton_dir, name);
	struct buf text = BUF_INIT;

	if (fs_read(path, &text, BUF_MAX_CONFIG, NULL) == 0 && text.len) {
		free(path);
		return buf_detach(&text, NULL);
	}
	free(path);
	buf_release(&text);
	return NULL;
}

char *
prompt_template(const char *baton_dir, const char *name)
{
	char *own = prompt_repo_template(baton_dir, name);
	const char *builtin;

	if (own)
		return own;
	builtin = prompt_builtin(name);
	return builtin ? xstrdup(builtin) : NULL;
}

void
prompt_render(const char *tmpl, const struct prompt_var *vars, size_t n,
	      struct buf *out)
{
	const char *p = tmpl, *open, *close;
	size_t i;

	while ((open = strstr(p, "{{")) && (close = strstr(open + 2, "}}"))) {
		size_t len = (size_t)(close - open - 2);

		buf_add(out, p, (size_t)(open - p));
		for (i = 0; i < n; i++)
			if (strlen(vars[i].name) == len &&
			    !strncmp(vars[i].name, open + 2, len))
				break;
		if (i < n)
			buf_adds(out, vars[i].value ? vars[i].value : "");
		else
			buf_add(out, open, len + 4);
		p = close + 2;
	}
	buf_adds(out, p);
}

void
prompt_section(struct buf *out, const char *title, const char *text,
	       size_t *budget)
{
	size_t len;

	if (!text || !*text)
		return;
	len = strlen(text);
	buf_addf(out, "## %s\n\n", title);
	if (len > *budget) {
		buf_addf(out, "[... %zu earlier characters cut to fit the "
			      "context budget ...]\n",
			 len - *budget);
		text += len - *budget;
		len = *budget;
	}
	buf_add(out, text, len);
	buf_adds(out, "\n\n");
	*budget -= len;
}
