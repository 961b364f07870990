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

/* One "## " section of a prompt: its heading line, then its body. */
struct psec {
	const char *head; /* the "## " line's start */
	const char *body; /* after the heading line */
	size_t body_len, keep;
};

size_t
prompt_compact(const char *prompt, size_t target, struct buf *out)
{
	struct psec *v = NULL;
	size_t nr = 0, alloc = 0, i, total = strlen(prompt), cut = 0;
	const char *p, *pre_end = NULL;

	/* the sections: each line that starts "## " begins one */
	for (p = prompt; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		const char *nl;

		if (strncmp(p, "## ", 3))
			continue;
		if (!pre_end)
			pre_end = p;
		if (nr)
			v[nr - 1].body_len = (size_t)(p - v[nr - 1].body);
		ALLOC_GROW(v, nr + 1, alloc);
		nl = strchr(p, '\n');
		v[nr].head = p;
		v[nr].body = nl ? nl + 1 : p + strlen(p);
		v[nr].body_len = 0;
		nr++;
	}
	if (nr)
		v[nr - 1].body_len = strlen(v[nr - 1].body);
	for (i = 0; i < nr; i++)
		v[i].keep = v[i].body_len;
	/* the largest body loses what is over, down to PROMPT_KEEP_MIN */
	while (total > target) {
		size_t big = nr, over = total - target, can;

		for (i = 0; i < nr; i++)
			if (v[i].keep > PROMPT_KEEP_MIN &&
			    (big == nr || v[i].keep > v[big].keep))
				big = i;
		if (big == nr)
			break;
		/* the note costs about 100 bytes */
		can = v[big].keep - PROMPT_KEEP_MIN;
		if (over + 100 < can)
			can = over + 100;
		/* no more than half of it at once, so that the others
		   share the cut when they are close in size */
		if (can < v[big].keep / 2 && over + 100 > v[big].keep / 2)
			can = v[big].keep / 2;
		v[big].keep -= can;
		total -= can;
		cut += can;
	}
	buf_add(out, prompt, pre_end ? (size_t)(pre_end - prompt) : strlen(prompt));
	for (i = 0; i < nr; i++) {
		buf_add(out, v[i].head, (size_t)(v[i].body - v[i].head));
		buf_add(out, v[i].body, v[i].keep);
		if (v[i].keep < v[i].body_len)
			buf_addf(out,
				 "\n[... %zu more bytes of this section cut to "
				 "fit the model's context window ...]\n\n",
				 v[i].body_len - v[i].keep);
	}
	free(v);
	return cut;
}
