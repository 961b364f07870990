/*
 * Fuzzes what an agent leaves behind for a review or verify stage: the
 * review.json / verification.json contract, the Markdown rendering of a
 * verdict that passed it, and the "DECISION: X" line fallback, each for
 * both kinds, as engine/kinds/feature.c reads them.
 */
#include "util/compat.h"

#include "core/verdict.h"
#include "fuzz.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"

static void
one_kind(enum verdict_kind k, const char *text)
{
	struct verdict v = { 0 };
	struct err e = ERR_INIT;
	struct buf md = BUF_INIT;
	char *line;

	if (!verdict_parse_json(k, "review.json", text, &v, &e)) {
		if (!verdict_is_decision(k, v.decision))
			BUG("accepted decision '%s'", v.decision);
		verdict_markdown(&v, "Review", &md);
	}
	verdict_release(&v);
	line = verdict_line(k, text);
	if (line)
		verdict_is_decision(k, line);
	free(line);
	buf_release(&md);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = xmalloc(size + 1);

	memcpy(text, data, size);
	text[size] = '\0';
	one_kind(VERDICT_REVIEW, text);
	one_kind(VERDICT_VERIFY, text);
	free(text);
	return 0;
}
