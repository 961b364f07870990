/*
 * The registry of event types (core/events.h): every row is well
 * formed, lookups find exactly the registered names, and the markdown
 * it prints (docs/lifecycle.md's Events section, which t0057 compares
 * line for line) has one table row per type. That the store refuses a
 * type that is not registered is a conformance case of t_store
 * (event_type_registered), run against every backend.
 */
#include "util/compat.h"

#include <ctype.h>

#include "core/events.h"
#include "test.h"
#include "util/buf.h"
#include "util/err.h"

/* The number of rows of the registry. */
static size_t
count_types(void)
{
	size_t n = 0;

	while (event_type_at(n))
		n++;
	return n;
}

/* Whether cell holds a '|' that is not written "\|" (it would end the
 * markdown table's cell) or a line break (it would end the row). */
static int
breaks_table(const char *cell)
{
	const char *p;

	for (p = cell; *p; p++) {
		if (*p == '\n' || *p == '\r')
			return 1;
		if (*p == '|' && (p == cell || p[-1] != '\\'))
			return 1;
	}
	return 0;
}

TEST(rows_are_well_formed)
{
	const struct event_type *t;
	const char *p;
	size_t i;

	ASSERT(count_types() >= 70);
	for (i = 0; (t = event_type_at(i)); i++) {
		ASSERT(t->name && *t->name);
		for (p = t->name; *p; p++)
			if (!islower((unsigned char)*p) && *p != '_')
				test_fail(__FILE__, __LINE__,
					  "type '%s' is not lower_snake",
					  t->name);
		ASSERT((unsigned)t->group < EVENT_G_NR);
		if (!t->when || !*t->when || !t->data || !*t->data)
			test_fail(__FILE__, __LINE__,
				  "type '%s' lacks when or data", t->name);
		if (breaks_table(t->when) || breaks_table(t->data))
			test_fail(__FILE__, __LINE__,
				  "a cell of type '%s' breaks the table",
				  t->name);
	}
}

TEST(names_are_unique_and_found)
{
	const struct event_type *t, *u;
	size_t i, j;

	for (i = 0; (t = event_type_at(i)); i++) {
		ASSERT(event_type_find(t->name) == t);
		for (j = i + 1; (u = event_type_at(j)); j++)
			if (!strcmp(t->name, u->name))
				test_fail(__FILE__, __LINE__,
					  "type '%s' is registered twice",
					  t->name);
	}
	ASSERT(event_type_at(count_types()) == NULL);
}

TEST(what_the_code_writes_is_found)
{
	/* one of each door: engine, run requests, scheduler, merge queue,
	 * judge, forge, webhook, and the store's own */
	static const char *const written[] = {
		"transition",	   "stage_started",   "agent_output",
		"pause_cancelled", "abort_requested", "superseded",
		"task_claimed",	   "task_settled",    "merge_claimed",
		"merge_landed",	   "judge_gone",      "judge_expired",
		"forge_answered",  "forge_webhook",   "base_push_failed",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(written); i++)
		if (!event_type_find(written[i]))
			test_fail(__FILE__, __LINE__, "'%s' not registered",
				  written[i]);
}

TEST(unknown_types_are_refused_by_name)
{
	struct err e = ERR_INIT;

	ASSERT(event_type_find("made_up") == NULL);
	ASSERT(event_type_find("") == NULL);
	ASSERT(event_type_find(NULL) == NULL);
	ASSERT(event_type_find("Transition") == NULL);
	ASSERT(event_type_find("transition ") == NULL);
	ASSERT_OK(event_type_check("steer", &e), &e);
	ASSERT_EQ(event_type_check("made_up", &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "event type 'made_up' is not in the registry "
			    "(src/core/events.c)");
	ASSERT_EQ(event_type_check(NULL, &e), BATON_EINVAL);
	ASSERT_STREQ(e.msg, "event has no type");
}

TEST(markdown_has_one_row_per_type)
{
	struct buf md = BUF_INIT, row = BUF_INIT;
	const struct event_type *t;
	const char *p;
	size_t i, rows = 0, tables = 0;
	int g;

	event_types_markdown(&md);
	for (p = md.ptr; (p = strstr(p, "\n| `")); p++)
		rows++;
	ASSERT_EQ(rows, count_types());
	for (p = md.ptr; (p = strstr(p, "|---|---|---|\n")); p++)
		tables++;
	ASSERT_EQ(tables, EVENT_G_NR);
	for (g = 0; g < EVENT_G_NR; g++) {
		ASSERT(event_group_name(g) && *event_group_name(g));
		ASSERT_CONTAINS(md.ptr, event_group_title(g));
	}
	for (i = 0; (t = event_type_at(i)); i++) {
		buf_reset(&row);
		buf_addf(&row, "| `%s` | %s | %s |\n", t->name, t->when,
			 t->data);
		ASSERT_CONTAINS(md.ptr, row.ptr);
	}
	/* the first group heads the text; groups end with a row */
	ASSERT(!strncmp(md.ptr, event_group_title(0),
			strlen(event_group_title(0))));
	ASSERT(md.len > 2 && md.ptr[md.len - 1] == '\n' &&
	       md.ptr[md.len - 2] == '|');
	buf_release(&row);
	buf_release(&md);
}
