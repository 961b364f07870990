/*
 * The feature family (Vibestrate's run lifecycle): plan, architect,
 * execute, review, fix and verify, each one agent call held to its
 * contract, and validate, the project's own checks. The assist pipeline
 * uses them too.
 *
 *   kind       leaves                               contract
 *   plan       plan.md (or the final text)          not empty
 *   architect  architecture.md (or the final text)  not empty
 *   execute    worktree edits, execution.log        exit 0; checkpoint
 *              (assist: escalation.json, a question)
 *   validate   validation.json                      every command exits 0
 *   review     review.json + review.md              decision APPROVED |
 *              (or a "DECISION: X" line)            CHANGES_REQUESTED | BLOCKED
 *   fix        worktree edits, finding-responses.md exit 0; checkpoint
 *   verify     verification.json + .md              decision PASSED |
 *              (or a "VERIFICATION: X" line)        FAILED | NEEDS_HUMAN
 *
 * Output that breaks its contract is retried once with the error in the
 * prompt (engine__call); a second failure blocks the run.
 */
#include "util/compat.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/prompt.h"
#include "core/verdict.h"
#include "engine/engine.h"
#include "engine/kinds/kind.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/xalloc.h"

/* Adds a run-folder file as a prompt section, if it exists. */
static void
file_section(const struct drive *d, struct buf *ctx, const char *title,
	     const char *name, size_t *budget)
{
	struct buf text = BUF_INIT;

	if (engine__read_file(d, name, &text) == 0)
		prompt_section(ctx, title, text.ptr, budget);
	buf_release(&text);
}

/*
 * What a feature kind's agent reads after people's guidance: what to
 * fix, then the plan and the design (the diff, for review and verify,
 * comes after: kind.h's KF_SHOWS_DIFF).
 */
static void
feature_context(struct drive *d, const struct stage *s, struct buf *ctx,
		size_t *budget)
{
	struct buf val = BUF_INIT;

	if (s->kind == KIND_FIX) {
		/* Checks run before review, so failing checks mean this
		 * round fixes them; passing checks mean review sent us. */
		if (engine__read_file(d, "validation.json", &val) == 0 &&
		    strstr(val.ptr, "\"passed\": false"))
			prompt_section(ctx, "Failing checks (validation.json)",
				       val.ptr, budget);
		else
			file_section(d, ctx, "Review findings to address",
				     "review.md", budget);
		file_section(d, ctx, "Findings of a plugin stage to address",
			     "plugin-findings.md", budget);
	}
	if (s->kind == KIND_PLAN && s->side) {
		/* a plan rewritten for its review (plan-only's replan) */
		file_section(d, ctx, "Review of the plan to address",
			     "review.md", budget);
		file_section(d, ctx, "The plan to rewrite", "plan.md", budget);
	}
	if (s->kind != KIND_PLAN)
		file_section(d, ctx, "Plan", "plan.md", budget);
	if (s->kind == KIND_EXECUTE || s->kind == KIND_FIX)
		file_section(d, ctx, "Design", "architecture.md", budget);
	if (type_ops_for(d->p)->context)
		type_ops_for(d->p)->context(d, s, ctx, budget);
	buf_release(&val);
}

/*
 * Reads the verdict of a review or verify stage: the JSON file first; a
 * "DECISION:" / "VERIFICATION:" line in the final text as the fallback.
 * Returns 0 with v filled, or BATON_ECONTRACT with what was wrong in e.
 */
static int
read_verdict(struct drive *d, const struct stage *s, const char *text,
	     struct verdict *v, struct err *e)
{
	enum verdict_kind k =
		s->kind == KIND_REVIEW ? VERDICT_REVIEW : VERDICT_VERIFY;
	const char *const *ds = verdict_decisions(k);
	const char *file = kind_info(s->kind)->artifact[0];
	const char *prefix = verdict_line_prefix(k);
	struct err why = ERR_INIT;
	struct buf json = BUF_INIT;
	char *line = NULL;
	int rc = 0, had_json;

	had_json = engine__read_file(d, file, &json) == 0;
	if (had_json && verdict_parse_json(k, file, json.ptr, v, &why) == 0)
		goto out;
	line = verdict_line(k, text);
	if (line && verdict_is_decision(k, line)) {
		v->decision = line;
		line = NULL;
		if (had_json)
			engine__note(d, "contract_warning",
				     json_pack("{s:s, s:s}", "stage", s->name,
					       "error", why.msg),
				     NULL);
		goto out;
	}
	if (had_json)
		rc = err_set(e, BATON_ECONTRACT, "%s", why.msg);
	else if (line)
		rc = err_set(e, BATON_ECONTRACT,
			     "'%s: %s' is not a verdict (expected %s, %s or %s)",
			     prefix, line, ds[0], ds[1], ds[2]);
	else
		rc = err_set(e, BATON_ECONTRACT,
			     "no %s in the run folder and no '%s: ...' line "
			     "in the agent's output",
			     file, prefix);
out:
	free(line);
	buf_release(&json);
	return rc;
}

/*
 * An editing turn (execute, fix) must leave something: a final text, an
 * edit in the worktree, or an artifact of its own (a fixer's notes, an
 * escalation). A turn that exits 0 with none of them did nothing, and
 * passing it would send an untouched tree on to review as if built:
 * BATON_ECONTRACT, which is retried once and then blocks the run.
 */
static int
produced_something(struct drive *d, const struct stage *s, const char *text,
		   struct err *e)
{
	const char *p;
	struct buf notes = BUF_INIT;
	int has_notes;

	for (p = text ? text : ""; *p && isspace((unsigned char)*p); p++)
		;
	if (*p || d->ckpt_changed)
		return 0;
	has_notes = s->kind == KIND_FIX &&
		    engine__read_file(d, "finding-responses.md", &notes) == 0 &&
		    notes.len && !strstr(notes.ptr, "(the fixer left no notes)");
	buf_release(&notes);
	if (has_notes)
		return 0;
	if (s->kind == KIND_EXECUTE &&
	    engine__read_file(d, "escalation.json", &notes) == 0 && notes.len) {
		buf_release(&notes);
		return 0;
	}
	buf_release(&notes);
	return err_set(e, BATON_ECONTRACT,
		       "stage %s: the agent produced nothing: no output, no "
		       "edit in the worktree and no artifact",
		       s->name);
}

/*
 * Holds an agent's successful output to its kind's contract and records
 * the artifacts. Returns 0 with *res set, BATON_ECONTRACT (e says why)
 * for output to retry, or another error.
 */
static int
feature_accept(struct drive *d, const struct stage *s, const char *text,
	       enum stage_result *res, char **reason, struct err *e)
{
	const struct type_ops *type = type_ops_for(d->p);
	const char *const *files = kind_info(s->kind)->artifact;
	const char *main_file = files[0];
	struct buf body = BUF_INIT, md = BUF_INIT;
	struct verdict v = { 0 };
	int rc = 0;

	*res = STAGE_PASS;
	switch (s->kind) {
	case KIND_PLAN:
	case KIND_ARCHITECT:
	case KIND_FIX:
		if (engine__read_file(d, main_file, &body) < 0 || !body.len) {
			buf_reset(&body);
			buf_adds(&body, text);
			buf_rtrim(&body);
			if (!body.len && s->kind != KIND_FIX) {
				rc = err_set(e, BATON_ECONTRACT,
					     "no %s in the run folder and no "
					     "final text from the agent",
					     main_file);
				break;
			}
			if (!body.len)
				buf_adds(&body, "(the fixer left no notes)");
			buf_addch(&body, '\n');
			rc = engine__write_file(d, main_file, body.ptr, e);
		}
		if (!rc)
			rc = engine__keep_output(d, main_file, NULL, body.ptr, e);
		if (!rc && s->kind == KIND_FIX)
			rc = engine__checkpoint(d, s, res, reason, e);
		if (!rc && s->kind == KIND_FIX && *res == STAGE_PASS)
			rc = produced_something(d, s, text, e);
		break;
	case KIND_EXECUTE:
		buf_addf(&body, "# Execution of %s (%s)\n\n%s\n", d->r.id,
			 s->name, text);
		rc = engine__write_file(d, main_file, body.ptr, e);
		if (!rc)
			rc = engine__keep_output(d, main_file, NULL, body.ptr, e);
		if (!rc)
			rc = engine__checkpoint(d, s, res, reason, e);
		if (!rc && *res == STAGE_PASS)
			rc = produced_something(d, s, text, e);
		if (!rc && *res == STAGE_PASS && type->after_edit)
			rc = type->after_edit(d, s, res, e);
		break;
	case KIND_REVIEW:
	case KIND_VERIFY:
		rc = read_verdict(d, s, text, &v, e);
		if (!rc && s->findings)
			rc = verdict_check_security(v.doc, e);
		if (rc)
			break;
		if (engine__read_file(d, files[1], &md) < 0 ||
		    !md.len) {
			buf_reset(&md);
			if (v.doc)
				verdict_markdown(&v, s->kind == KIND_REVIEW ?
							    "Review" :
							    "Verification",
						&md);
			else
				buf_addf(&md, "%s\n", text);
			rc = engine__write_file(d, files[1], md.ptr,
					    e);
		}
		if (!rc)
			rc = engine__keep_output(d, files[1],
						 v.decision, md.ptr, e);
		if (!rc && v.doc) {
			char *doc = json_dumps(v.doc, JSON_INDENT(2));

			rc = engine__keep_output(d, main_file, v.decision, doc,
						 e);
			free(doc);
		}
		if (rc || !v.decision)
			break;
		if (!strcmp(v.decision, "CHANGES_REQUESTED")) {
			*res = STAGE_LOOP;
		} else if (!strcmp(v.decision, "BLOCKED") ||
			   !strcmp(v.decision, "FAILED") ||
			   !strcmp(v.decision, "NEEDS_HUMAN")) {
			*res = STAGE_BLOCK;
			*reason = xasprintf(
				"%s said %s%s%s",
				s->kind == KIND_REVIEW ? "the reviewer" :
							 "the verifier",
				v.decision, v.summary ? ": " : "",
				v.summary ? v.summary : "");
		}
		break;
	default:
		BUG("feature_accept for kind %d", (int)s->kind);
	}
	verdict_release(&v);
	buf_release(&body);
	buf_release(&md);
	return rc;
}

/* Moves a run-folder file to its name for one of several reviewers. */
static void
keep_as(struct drive *d, const char *name, const char *provider,
	struct buf *md)
{
	char *from = engine__run_file(d, name);
	const char *dot = strrchr(name, '.');
	char *as = xasprintf("%s/%.*s-%s%s", d->run_dir, (int)(dot - name),
			     name, provider, dot);

	if (md)
		fs_read_nofollow(from, md, BUF_MAX_ARTIFACT, NULL);
	if (rename(from, as) < 0 && errno != ENOENT)
		engine__note(d, "contract_warning",
			     json_pack("{s:s, s:s}", "file", from, "error",
				       strerror(errno)),
			     NULL);
	free(from);
	free(as);
}

/*
 * Several reviewers on one review stage: each reviews in turn, its
 * review-<provider>.json/.md kept apart; all must approve. One asking for
 * changes sends the run to the fix loop with every review in review.md;
 * one blocking blocks it.
 */
static int
review_by_all(struct drive *d, const struct stage *s,
	      const struct config_provider *const *provs, size_t n,
	      const char *steers, enum stage_result *res, char **reason,
	      struct err *e)
{
	static const char *const said[] = {
		[STAGE_PASS] = "APPROVED",	 [STAGE_LOOP] = "CHANGES_REQUESTED",
		[STAGE_BLOCK] = "BLOCKED",	 [STAGE_FAIL] = "FAILED",
		[STAGE_STOPPED] = "STOPPED",
	};
	struct buf all = BUF_INIT, md = BUF_INIT;
	json_t *who = json_object();
	enum stage_result worst = STAGE_PASS;
	size_t i;
	int rc = 0;

	for (i = 0; i < n && !rc; i++) {
		enum stage_result r = STAGE_FAIL;
		char *why = NULL;

		d->r.attempt = 0;
		rc = engine__call(d, s, provs[i], steers, &r, &why, e);
		if (rc || r == STAGE_STOPPED || r == STAGE_FAIL) {
			*res = r;
			*reason = why;
			goto out;
		}
		buf_reset(&md);
		keep_as(d, "review.json", provs[i]->name, NULL);
		keep_as(d, "review.md", provs[i]->name, &md);
		buf_addf(&all, "# Review by %s: %s\n\n%s\n", provs[i]->name,
			 said[r], md.ptr);
		json_object_set_new(who, provs[i]->name, json_string(said[r]));
		if (r == STAGE_BLOCK && worst != STAGE_BLOCK) {
			worst = STAGE_BLOCK;
			free(*reason);
			*reason = why;
			why = NULL;
		} else if (r == STAGE_LOOP && worst == STAGE_PASS) {
			worst = STAGE_LOOP;
		}
		free(why);
	}
	if (rc)
		goto out;
	*res = worst;
	rc = engine__write_file(d, "review.md", all.ptr, e);
	if (!rc)
		rc = engine__note(d, "reviews",
				  json_pack("{s:s, s:s, s:O}", "stage", s->name,
					    "decision", said[worst], "by", who),
				  e);
out:
	json_decref(who);
	buf_release(&all);
	buf_release(&md);
	return rc;
}

/* An agent stage: the role's provider, or all of a review's reviewers. */
static int
feature_run(struct drive *d, const struct stage *s, const char *steers,
	    enum stage_result *res, char **reason, struct err *e)
{
	const struct config_provider *provs[ENGINE_MAX_PLAYERS];
	struct config_provider own[ENGINE_MAX_PLAYERS];
	size_t i, n = engine__players(d, s, own, ARRAY_SIZE(own), reason);

	if (!n) {
		*res = STAGE_FAIL;
		return 0;
	}
	for (i = 0; i < n; i++)
		provs[i] = &own[i];
	if (s->kind == KIND_REVIEW && n > 1)
		return review_by_all(d, s, provs, n, steers, res, reason, e);
	return engine__call(d, s, provs[0], steers, res, reason, e);
}


/* validate: the project's checks, which the engine runs itself. */
static int
validate_run(struct drive *d, const struct stage *s, const char *steers,
	     enum stage_result *res, char **reason, struct err *e)
{
	(void)steers;
	(void)reason;
	return engine__validate(d, s, res, e);
}

const struct stage_ops feature_agent_ops = {
	.run = feature_run,
	.context = feature_context,
	.accept = feature_accept,
};

const struct stage_ops feature_validate_ops = {
	.run = validate_run,
};
