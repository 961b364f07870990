/*
 * baton memory list|show|add|edit|forget: the repository's memory
 * (docs/operations.md "Memory"): the entries runs wrote when they ended
 * and notes people added, which later runs read when they bear on their
 * task. Entries live in the store and as files under .baton/memory/;
 * these commands change both (engine_memory_save, engine_memory_forget).
 */
#include "util/compat.h"

#include <unistd.h>

#include "cli/cli.h"
#include "core/memory.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"
#include "util/strvec.h"
#include "util/term.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* The entry id of list, or NULL. */
static json_t *
find(json_t *list, const char *id)
{
	size_t i;

	for (i = 0; i < json_array_size(list); i++)
		if (!strcmp(json_get_str(json_array_get(list, i), "id"), id))
			return json_array_get(list, i);
	return NULL;
}

/* TEXT... as one string, or stdin for "-"; e says why not. */
static int
text_of(int argc, char **argv, struct buf *out, struct err *e)
{
	int i;

	if (argc == 1 && !strcmp(argv[0], "-")) {
		char chunk[4096];
		ssize_t n;

		while ((n = read(0, chunk, sizeof(chunk))) > 0) {
			buf_add(out, chunk, (size_t)n);
			if (out->len > MEMORY_BODY_MAX)
				break;
		}
		if (n < 0)
			return err_set(e, -errno, "cannot read stdin: %s",
				       strerror(errno));
	} else {
		for (i = 0; i < argc; i++)
			buf_addf(out, "%s%s", i ? " " : "", argv[i]);
		buf_addch(out, '\n');
	}
	if (str_blank(out->ptr))
		return err_set(e, BATON_EINVAL, "the text is empty");
	return 0;
}

static int
list_entries(struct cli *c, json_t *list)
{
	size_t i;

	if (c->json) {
		char *s = json_dumps(list, JSON_INDENT(2));

		cli_printf("%s\n", s);
		free(s);
		return EXIT_OK;
	}
	for (i = 0; i < json_array_size(list); i++) {
		json_t *m = json_array_get(list, i);
		const char *body = json_get_str(m, "body");
		struct buf line = BUF_INIT;
		char when[32];

		time_fmt_iso(
		    json_integer_value(json_object_get(m, "updated_at")), when,
		    sizeof(when));
		buf_add_cut(&line, body, strcspn(body, "\n"), 70);
		cli_printf("%-40s %-8s %s  %s\n", json_get_str(m, "id"),
			   json_get_str(m, "kind"), when, line.ptr);
		buf_release(&line);
	}
	if (!json_array_size(list))
		cli_printf("no memory yet: runs write an entry when they end; "
			   "baton memory add TEXT adds a note\n");
	return EXIT_OK;
}

static int
memory_exec(struct cli *c, int argc, char **argv)
{
	int json = 0, n, rc = EXIT_OK, r;
	struct cli_opt opts[] = { { "--json", &json, NULL } };
	struct err e = ERR_INIT;
	struct buf text = BUF_INIT;
	json_t *list = NULL, *m;
	const char *sub;

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	if (n < 1)
		return cli_usage(&cmd_memory);
	c->json |= json;
	sub = argv[1];
	if (store_memory_list(c->store, &list, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (!strcmp(sub, "list") && n == 1) {
		rc = list_entries(c, list);
	} else if (!strcmp(sub, "show") && n == 2) {
		m = find(list, argv[2]);
		if (!m) {
			cli_error("no memory entry '%s' (baton memory list)",
				  argv[2]);
			rc = EXIT_FAIL;
		} else if (c->json) {
			char *s = json_dumps(m, JSON_INDENT(2));

			cli_printf("%s\n", s);
			free(s);
		} else {
			cli_printf("%s", json_get_str(m, "body"));
		}
	} else if (!strcmp(sub, "add") && n >= 2) {
		char *id = xasprintf("note-%lld", (long long)time_now_ms());

		if (text_of(n - 1, argv + 2, &text, &e) ||
		    engine_memory_save(&c->ws, c->store, id, NULL, "note",
				       text.ptr, &e)) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
		} else {
			cli_printf("%s\n", id);
		}
		free(id);
	} else if (!strcmp(sub, "edit") && n >= 3) {
		m = find(list, argv[2]);
		if (!m) {
			cli_error("no memory entry '%s' (baton memory list)",
				  argv[2]);
			rc = EXIT_FAIL;
		} else if (text_of(n - 2, argv + 3, &text, &e) ||
			   engine_memory_save(&c->ws, c->store, argv[2],
					      json_get_str(m, "run"),
					      json_get_str(m, "kind"), text.ptr,
					      &e)) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
		} else {
			cli_printf("%s: edited\n", argv[2]);
		}
	} else if (!strcmp(sub, "forget") && n == 2) {
		r = engine_memory_forget(&c->ws, c->store, argv[2], &e);
		if (r < 0) {
			cli_error("%s", e.msg);
			rc = EXIT_FAIL;
		} else if (!r) {
			cli_error("no memory entry '%s' (baton memory list)",
				  argv[2]);
			rc = EXIT_FAIL;
		} else {
			cli_printf("%s: forgotten\n", argv[2]);
		}
	} else {
		rc = cli_usage(&cmd_memory);
	}
	buf_release(&text);
	json_decref(list);
	return rc;
}

const struct cmd cmd_memory = {
	.name = "memory",
	.usage = "memory list [--json] | show ID | add TEXT... | "
		 "edit ID TEXT... | forget ID  (TEXT '-': from stdin)",
	.summary = "list, show, add, edit and forget the repository's memory",
	.needs = CLI_NEEDS_STORE,
	.exec = memory_exec,
};
