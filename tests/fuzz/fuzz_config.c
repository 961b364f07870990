/*
 * Fuzzes the whole path a user's .baton/config.yaml takes: the YAML
 * parser, the merge over the built-in defaults, the strict checks of
 * config_finish, `baton config show`, every pipeline the file defines and
 * the one workflow.pipeline picks (built-in or not), loaded and described
 * as `baton config show` and `baton run` do, and the lookups a run makes.
 */
#include "util/compat.h"

#include "core/cnode.h"
#include "core/config.h"
#include "core/pipeline.h"
#include "fuzz.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/xalloc.h"

static const char *const roles[] = {
	"planner",  "architect", "implementer", "reviewer",
	"verifier", "fixer",	 "default",	NULL,
};

static void
load_pipeline(const struct config *c, const char *name, struct buf *out)
{
	struct pipeline *p = NULL;
	struct err e = ERR_INIT;

	if (!pipeline_load(c->pipelines, name, &p, &e))
		pipeline_describe(p, out);
	pipeline_free(p);
}

/*
 * Loads and describes each pipeline under pipelines: and the selected
 * one, as cmd_config does, then asks what engine.c asks of a config.
 */
static void
use_config(const struct config *c)
{
	struct buf out = BUF_INIT;
	size_t i;

	for (i = 0; c->pipelines && i < c->pipelines->nr; i++)
		load_pipeline(c, c->pipelines->kids[i]->key, &out);
	load_pipeline(c, c->pipeline, &out);
	for (i = 0; roles[i]; i++)
		config_provider_for(c, roles[i]);
	config_requires_approval(c, "executing", "execute");
	buf_release(&out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct config c;
	struct err e = ERR_INIT;
	struct buf out = BUF_INIT;
	char *text = xmalloc(size + 1);

	memcpy(text, data, size);
	text[size] = '\0';
	config_builder_init(&b);
	if (config_add_yaml(&b, ".baton/config.yaml", text, size, &e) < 0 ||
	    config_finish(&b, &c, &e) < 0) {
		config_builder_release(&b);
		goto out;
	}
	config_show(&c, &out);
	use_config(&c);
	config_release(&c);
out:
	buf_release(&out);
	free(text);
	return 0;
}
