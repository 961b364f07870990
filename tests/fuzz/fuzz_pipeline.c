/*
 * Fuzzes pipeline definitions on their own: the YAML becomes a cnode tree,
 * pipeline_parse checks it and derives the transition table, and the
 * table is described and asked about a few transitions, including ones
 * between statuses the definition itself names.
 */
#include "util/compat.h"

#include "core/cnode.h"
#include "core/pipeline.h"
#include "fuzz.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"

/* Transitions asked of every pipeline that parses. */
static const char *const pairs[][2] = {
	{ ST_CREATED, "planning" },	  { ST_CREATED, ST_WAITING },
	{ ST_WAITING, ST_BLOCKED },	  { "reviewing", "fixing" },
	{ "validating", ST_MERGE_READY }, { ST_MERGE_READY, ST_FAILED },
	{ ST_PAUSED, "no-such-status" },  { "", "" },
};

/*
 * Asks every status of p about a neighbour and about the terminal, and
 * checks what must hold of any derived table: each edge passes
 * pipeline_check between statuses of the pipeline, and nothing leaves a
 * terminal status.
 */
static void
check_pairs(const struct pipeline *p)
{
	struct err e = ERR_INIT;
	size_t i;

	for (i = 0; i < p->nr_edges; i++) {
		const struct edge *g = &p->edges[i];

		if (pipeline_check(p, g->from, g->to, &e) ||
		    !pipeline_has_status(p, g->to))
			BUG("edge '%s' -> '%s' fails its own check", g->from,
			    g->to);
		if (status_is_terminal(g->from))
			BUG("edge '%s' -> '%s' leaves a terminal status",
			    g->from, g->to);
	}

	for (i = 0; i < ARRAY_SIZE(pairs); i++)
		pipeline_check(p, pairs[i][0], pairs[i][1], &e);
	for (i = 0; i < p->nr_statuses; i++) {
		pipeline_check(p, p->statuses[i],
			       p->statuses[(i + 1) % p->nr_statuses], &e);
		pipeline_check(p, p->statuses[i], p->terminal, &e);
		pipeline_stage_at(p, p->statuses[i]);
		pipeline_stage_done_at(p, p->statuses[i]);
	}
	for (i = 0; i < p->nr_stages; i++)
		if (pipeline_stage_named(p, p->stages[i].name) != &p->stages[i])
			BUG("stage '%s' not found by name", p->stages[i].name);
	pipeline_first(p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cnode *node = NULL;
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;
	struct buf out = BUF_INIT;
	char *text = xmalloc(size + 1);

	memcpy(text, data, size);
	text[size] = '\0';
	if (cnode_parse_yaml(text, size, "fuzz.yaml", &node, &e) < 0)
		goto out;
	if (pipeline_parse("fuzz", node, 0, &p, &e) < 0)
		goto out;
	pipeline_describe(p, &out);
	check_pairs(p);
out:
	pipeline_free(p);
	cnode_free(node);
	buf_release(&out);
	free(text);
	return 0;
}
