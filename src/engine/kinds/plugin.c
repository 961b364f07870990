/*
 * A stage of a kind a plugin implements with a command (core/plugin.h):
 * the command agent contract plus a structured outcome.
 *
 *   the command     the kind's argv (files of the plugin folder made
 *                   absolute when the manifest was read: nothing of the
 *                   worktree is run by name), started as a command agent
 *                   is: in the worktree, in the sandbox with the plugin
 *                   folder readable, the prompt on stdin, the BATON_*
 *                   variables, plus BATON_PLUGIN, BATON_PLUGIN_DIR and
 *                   BATON_OUTCOME
 *   the outcome     {"outcome": "pass"|"changes"|"block"|"fail",
 *                    "summary": "...", "findings": [...]}
 *                   written to $BATON_OUTCOME (a file of the call's own
 *                   output folder, made empty before the call, outside
 *                   the worktree), else the last JSON object of stdout
 *   routing         pass -> next; changes -> the stage's on_changes (the
 *                   fix loop, findings in plugin-findings.md for the
 *                   fixer); block -> blocked; fail -> failed
 *
 * An outcome that is missing or malformed is a contract error naming the
 * plugin, the kind and what was wrong; the call is retried once, then
 * the run is blocked. The engine routes on the result as on any other
 * stage's.
 */
#include "util/compat.h"

#include <assert.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/plugin.h"
#include "engine/engine.h"
#include "engine/kinds/kind.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/strvec.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* Where the fixer finds what a plugin stage asked to change. */
#define FINDINGS_FILE "plugin-findings.md"

/* The provider type a kind's command runs as (struct config_provider
 * holds it as char *). */
static char command_type[] = "command";

static const char *const outcomes[] = { "pass", "changes", "block", "fail",
					NULL };

/* One finding as a markdown list item: a string, or an object's text. */
static void
finding_md(json_t *f, struct buf *out)
{
	const char *keys[] = { "message", "description", "summary", "title" };
	const char *text = NULL, *file;
	json_t *line;
	char *dump;
	size_t i;

	if (json_is_string(f)) {
		buf_addf(out, "- %s\n", json_string_value(f));
		return;
	}
	for (i = 0; json_is_object(f) && i < ARRAY_SIZE(keys) && !text; i++)
		text = json_string_value(json_object_get(f, keys[i]));
	if (!text) {
		dump = json_dumps(f, JSON_COMPACT);
		buf_addf(out, "- %s\n", dump ? dump : "?");
		free(dump);
		return;
	}
	buf_addf(out, "- %s", text);
	file = json_string_value(json_object_get(f, "file"));
	line = json_object_get(f, "line");
	if (file)
		buf_addf(
		    out, " (%s%s%lld)", file, json_is_integer(line) ? ":" : "",
		    json_is_integer(line) ? (long long)json_integer_value(line)
					  : 0LL);
	buf_addch(out, '\n');
}

/*
 * The outcome doc of stage s, checked: 0 with *which its index in
 * outcomes, or BATON_ECONTRACT saying what is wrong.
 */
static int
check_outcome(const struct stage *s, json_t *doc, size_t *which, struct err *e)
{
	const struct plugin_kind *pk = s->pkind;
	json_t *o = json_object_get(doc, "outcome");
	json_t *sum = json_object_get(doc, "summary");
	json_t *fs = json_object_get(doc, "findings");
	size_t i;

	if (!json_is_string(o))
		return err_set(e, BATON_ECONTRACT,
			       "plugin '%s', kind '%s': the outcome has no "
			       "\"outcome\" string (expected pass, changes, "
			       "block or fail)",
			       pk->plugin->id, pk->name);
	for (i = 0; outcomes[i]; i++)
		if (!strcmp(outcomes[i], json_string_value(o)))
			break;
	if (!outcomes[i])
		return err_set(e, BATON_ECONTRACT,
			       "plugin '%s', kind '%s': outcome '%s' is not "
			       "one of pass, changes, block, fail",
			       pk->plugin->id, pk->name, json_string_value(o));
	if (sum && !json_is_string(sum))
		return err_set(e, BATON_ECONTRACT,
			       "plugin '%s', kind '%s': \"summary\" must be a "
			       "string",
			       pk->plugin->id, pk->name);
	if (fs && !json_is_array(fs))
		return err_set(e, BATON_ECONTRACT,
			       "plugin '%s', kind '%s': \"findings\" must be "
			       "a list",
			       pk->plugin->id, pk->name);
	*which = i;
	return 0;
}

/* Holds the command's outcome to the contract and routes on it. */
static int
accept_outcome(struct drive *d, const struct stage *s, const char *text,
	       enum stage_result *res, char **reason, struct err *e)
{
	const struct plugin_kind *pk = s->pkind;
	const struct call_spec *cs = d->call;
	struct err why = ERR_INIT;
	struct buf md = BUF_INIT;
	json_t *doc, *fs;
	const char *summary;
	char *findings = engine__run_file(d, FINDINGS_FILE);
	size_t which = 0, i, nf;
	int rc;

	doc = engine__take_json(d, cs->artifact, text, &why);
	if (!doc) {
		rc = err_set(e, BATON_ECONTRACT,
			     "plugin '%s', kind '%s': no outcome: %s",
			     pk->plugin->id, pk->name, why.msg);
		goto out;
	}
	rc = check_outcome(s, doc, &which, e);
	if (rc)
		goto out;
	summary = json_string_value(json_object_get(doc, "summary"));
	fs = json_object_get(doc, "findings");
	nf = json_is_array(fs) ? json_array_size(fs) : 0;
	rc = engine__keep_json(d, cs->artifact, outcomes[which], doc, e);
	if (!rc)
		rc = engine__note(
		    d, "plugin_outcome",
		    json_pack("{s:s, s:s, s:s, s:s, s:s?, s:i}", "stage",
			      s->name, "plugin", pk->plugin->id, "kind",
			      pk->name, "outcome", outcomes[which], "summary",
			      summary, "findings", (int)nf),
		    e);
	if (rc)
		goto out;
	switch (which) {
	case 0:
		*res = STAGE_PASS;
		break;
	case 1:
		buf_addf(&md, "# %s (plugin %s) asks for changes\n\n%s\n\n",
			 s->name, pk->plugin->id,
			 summary ? summary : "(no summary)");
		for (i = 0; i < nf; i++)
			finding_md(json_array_get(fs, i), &md);
		rc = fs_write_atomic(findings, md.ptr, md.len, e);
		if (rc)
			break;
		if (s->on_changes < 0) {
			*res = STAGE_BLOCK;
			*reason = xasprintf("stage %s (plugin %s) asks for "
					    "changes and has no on_changes "
					    "stage to send them to: %s",
					    s->name, pk->plugin->id,
					    summary ? summary : "no summary");
			break;
		}
		*res = STAGE_LOOP;
		break;
	case 2:
	case 3:
		*res = which == 2 ? STAGE_BLOCK : STAGE_FAIL;
		*reason = xasprintf("stage %s (plugin %s, kind %s) said %s%s%s",
				    s->name, pk->plugin->id, pk->name,
				    outcomes[which], summary ? ": " : "",
				    summary ? summary : "");
		break;
	}
out:
	json_decref(doc);
	buf_release(&md);
	free(findings);
	return rc;
}

static int
plugin_run(struct drive *d, const struct stage *s, const char *steers,
	   enum stage_result *res, char **reason, struct err *e)
{
	const struct plugin_kind *pk = s->pkind;
	struct config_provider prov;
	struct call_spec cs = { 0 };
	struct strvec env = STRVEC_INIT;
	char *artifact = xasprintf("%s.outcome.json", s->name);
	char *findings = engine__run_file(d, FINDINGS_FILE);
	char *own = NULL;
	int rc;

	/* the parser gives every stage of KIND_PLUGIN its kind */
	assert(pk);
	own = plugin_template(d->en->ws->dir, d->p, pk->name);
	/* the findings are this stage's to give again, or not */
	fs_unlink(findings, NULL);
	memset(&prov, 0, sizeof(prov));
	prov.name = pk->plugin->id;
	prov.type = command_type;
	prov.command = pk->command; /* borrowed: prov is not released */
	strvec_init(&prov.args);
	strvec_init(&prov.env);
	prov.timeout_seconds =
	    s->timeout_seconds ? s->timeout_seconds : pk->timeout_seconds;
	prov.max_retries = -1;
	strvec_pushf(&env, "BATON_PLUGIN=%s", pk->plugin->id);
	strvec_pushf(&env, "BATON_PLUGIN_DIR=%s", pk->plugin->dir);
	cs.artifact = artifact;
	cs.artifact_var = "BATON_OUTCOME";
	cs.kind = pk->name;
	/* the kind's own template (the repository's or the plugin's), else
	   the generic one */
	cs.template = own ? pk->name : "plugin-kind";
	cs.env = &env;
	cs.ro_dir = pk->plugin->dir;
	cs.accept = accept_outcome;
	rc = engine__call_as(d, s, &prov, steers, &cs, res, reason, e);
	strvec_clear(&env);
	free(own);
	free(findings);
	free(artifact);
	return rc;
}

const struct stage_ops plugin_ops = {
	.run = plugin_run,
};
