/*
 * The config a run keeps to (engine_int.h). A new run records the merged
 * config it was made under as JSON (runs.config_snapshot, secrets
 * redacted) beside its hash. When the config changes while the run
 * lives, the run goes on under its snapshot until a person decides
 * otherwise: `baton resume --current` adopts the new config, --fresh
 * starts over under it (control.c has drift and adoption).
 *
 * The snapshot is redacted like everything else baton records, so a
 * secret written literally in a config file is not in the database. A
 * run driven under its snapshot gets such secrets back from the
 * environment it runs in (redact_restore); one that is no longer there
 * stays "[redacted:NAME]", which the agent will notice.
 */
#include "util/compat.h"

#include "core/config.h"
#include "engine/engine.h"
#include "engine/engine_int.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/redact.h"
#include "util/xalloc.h"

char *
engine__config_snapshot(const struct engine *en)
{
	struct buf text = BUF_INIT;
	char *json = config_to_json(en->cfg);

	buf_adds(&text, json);
	free(json);
	redact_buf(&text);
	return buf_detach(&text, NULL);
}

/*
 * The snapshot is checked as strictly as a config file: one that this
 * baton no longer accepts (a key since removed) fails the run's driver
 * with the reason, rather than running it under something else.
 */
int
engine__run_config(const struct engine *en, const struct run *r,
		   struct config **own, struct err *e)
{
	struct buf text = BUF_INIT;
	struct config *c = NULL;
	char *label = NULL;
	int rc = 0;

	*own = NULL;
	if (!r->config_snapshot || !r->config_hash ||
	    !strcmp(r->config_hash, en->cfg->hash))
		return 0;
	buf_adds(&text, r->config_snapshot);
	redact_restore(&text);
	label = xasprintf("config snapshot of %s", r->id);
	c = xcalloc(1, sizeof(*c));
	rc = config_from_json(text.ptr, label, c, e);
	if (rc < 0) {
		err_prefix(e,
			   "run '%s' cannot go on under the config it "
			   "started with (baton resume --current or "
			   "--fresh)",
			   r->id);
		FREE_AND_NULL(c);
		goto out;
	}
	*own = c;
out:
	free(label);
	buf_release(&text);
	return rc;
}
