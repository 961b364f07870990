/*
 * baton receipts RUN: the receipts of a loop run, one line each, or "RUN:
 * no receipts" (--json: an array of the receipt objects). baton receipts
 * verify RUN walks the hash chain of the run's "receipt" events in order
 * and checks its end against the anchor the run recorded in its progress
 * (loop.receipts and loop.head), so a receipt changed, removed, reordered,
 * cut off the end or copied from another run is named; it exits 1 when
 * the chain is broken. The anchor is required of every loop run
 * (core/receipt.h): removing it, or the count alone, must not turn a cut
 * chain into an intact one.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "core/receipt.h"
#include "core/run.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/json.h"

/* How many hex digits of a hash a line shows. */
#define SHORT_HASH 12

/* ---- list ---- */

struct list_ctx {
	int json;
	json_t *all; /* --json: the receipts so far */
	int rows;    /* receipts read */
};

/* Appends "write src/a.c, run make test": the effects r asked for, or
 * its step when it asked for none. */
static void
add_effects(struct buf *out, const json_t *r)
{
	const json_t *asked = json_object_get(r, "asked");
	const json_t *effects = json_object_get(asked, "effects");
	const char *step = json_get_str(asked, "step");
	size_t i;

	for (i = 0; i < json_array_size(effects); i++) {
		const json_t *fx = json_array_get(effects, i);
		const char *kind = json_get_str(fx, "kind");
		const char *target = json_get_str(fx, "target");

		buf_addf(out, "%s%s %s", i ? ", " : "", kind ? kind : "?",
			 target ? target : "?");
	}
	if (!out->len)
		buf_adds(out, step ? step : "-");
}

static void
print_receipt(const struct event *ev, const json_t *r)
{
	const char *digest = json_get_str(r, "output_digest");
	const char *reason = json_get_str(r, "reason");
	const char *phase = json_get_str(r, "phase");
	const char *decision = json_get_str(r, "decision");
	struct buf fx = BUF_INIT;

	if (!json_is_object(r)) {
		cli_printf(
		    "#?  event %lld: not a receipt (its data is not a JSON"
		    " object)\n",
		    (long long)ev->seq);
		return;
	}
	add_effects(&fx, r);
	cli_printf(
	    "#%-3lld iter %-3lld %-8s %-9s %s",
	    (long long)json_integer_value(json_object_get(r, "n")),
	    (long long)json_integer_value(json_object_get(r, "iteration")),
	    phase ? phase : "?", decision ? decision : "?", fx.ptr);
	if (digest && !strncmp(digest, "sha256:", 7))
		cli_printf("  sha256:%.*s…", SHORT_HASH, digest + 7);
	if (reason)
		cli_printf("  (%s)", reason);
	putchar('\n');
	buf_release(&fx);
}

static int
list_one(const struct event *ev, void *arg)
{
	struct list_ctx *c = arg;
	json_t *r = ev->data ? json_loads(ev->data, 0, NULL) : NULL;

	c->rows++;
	if (c->json) {
		json_array_append_new(c->all, r ? r : json_null());
		return 0;
	}
	print_receipt(ev, r);
	json_decref(r);
	return 0;
}

static int
receipts_list(struct cli *c, const struct run *r, int json)
{
	struct list_ctx ctx = { json, json_array(), 0 };
	struct err e = ERR_INIT;
	char *text = NULL;
	int rc = EXIT_OK;

	if (store_event_list(c->store, r->id, 0, "receipt", list_one, &ctx,
			     &e)) {
		cli_error("%s", e.msg);
		rc = EXIT_FAIL;
		goto out;
	}
	/* text lines went out as they came; JSON goes out whole */
	if (json) {
		text = json_dumps(ctx.all, JSON_INDENT(2));
		puts(text);
		free(text);
	} else if (!ctx.rows) {
		cli_printf("%s: no receipts\n", r->id);
	}
out:
	json_decref(ctx.all);
	return rc;
}

/* ---- verify ---- */

struct verify_ctx {
	struct receipt_chain chain;
	struct err e;
	int seen;   /* receipt events read */
	int broken; /* the chain broke at a receipt, named in e */
};

static int
verify_one(const struct event *ev, void *arg)
{
	struct verify_ctx *v = arg;
	json_t *r = ev->data ? json_loads(ev->data, 0, NULL) : NULL;
	int rc;

	v->seen++;
	rc = receipt_chain_next(&v->chain, r, ev->seq, &v->e);
	json_decref(r);
	if (rc)
		v->broken = 1;
	return rc != 0;
}

static int
count_one(const struct event *ev, void *arg)
{
	(void)ev;
	(*(int *)arg)++;
	return 0;
}

/*
 * Checks the end of the walked chain against the anchor r recorded in
 * progress.loop. A run is held to an anchor when it has receipts or a
 * progress.loop, which the engine stamps on every loop run from its
 * first transition, anchor included. A run with neither may be one that
 * never started, or not a loop run, and has no receipts; but one with an
 * "evaluated" event ran an iteration, whose act left a receipt, so its
 * receipts and its record of them were removed. Returns 0, or
 * BATON_EINVAL with v->e saying what is wrong, or the store's error.
 */
static int
check_anchor(struct cli *c, const struct run *r, struct verify_ctx *v)
{
	json_t *progress =
	    r->progress ? json_loads(r->progress, 0, NULL) : NULL;
	json_t *loop = json_object_get(progress, "loop");
	struct receipt_anchor a;
	int rc = 0, evaluated = 0;

	if (!v->seen && !json_is_object(loop)) {
		rc = store_event_list(c->store, r->id, 0, "evaluated",
				      count_one, &evaluated, &v->e);
		if (!rc && evaluated)
			rc = err_set(&v->e, BATON_EINVAL,
				     "the run evaluated %d iteration%s but has"
				     " no receipts and no record of them"
				     " (progress.loop): they were removed",
				     evaluated, evaluated == 1 ? "" : "s");
		goto out;
	}
	rc = receipt_anchor_read(loop, &a, &v->e);
	if (!rc)
		rc = receipt_chain_end(&v->chain, &a, &v->e);
out:
	json_decref(progress);
	return rc;
}

static void
print_verdict(const struct run *r, const struct verify_ctx *v, int ok, int json)
{
	json_t *o;
	char *text;

	if (!json) {
		if (!ok)
			cli_error("%s: %s", r->id, v->e.msg);
		else if (!v->chain.n)
			cli_printf("%s: no receipts\n", r->id);
		else
			cli_printf(
			    "%s: %d receipt%s, chain intact (head %.*s)\n",
			    r->id, v->chain.n, v->chain.n == 1 ? "" : "s",
			    SHORT_HASH, v->chain.head);
		return;
	}
	o = json_pack("{s:s, s:b, s:i, s:s*, s:s*}", "run", r->id, "intact", ok,
		      "receipts", v->chain.n, "head",
		      v->chain.n ? v->chain.head : NULL, "error",
		      ok ? NULL : v->e.msg);
	text = json_dumps(o, JSON_INDENT(2));
	puts(text);
	free(text);
	json_decref(o);
}

static int
receipts_verify(struct cli *c, const struct run *r, int json)
{
	struct verify_ctx v = { .e = ERR_INIT };
	struct err e = ERR_INIT;
	int ok;

	receipt_chain_init(&v.chain, r->id);
	if (store_event_list(c->store, r->id, 0, "receipt", verify_one, &v,
			     &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	ok = !v.broken && !check_anchor(c, r, &v);
	print_verdict(r, &v, ok, json);
	return ok ? EXIT_OK : EXIT_FAIL;
}

static int
receipts_exec(struct cli *c, int argc, char **argv)
{
	int json = 0, n, rc, verify;
	struct cli_opt opts[] = {
		{ "--json", &json, NULL },
	};
	struct err e = ERR_INIT;
	struct run r = { 0 };

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	verify = n == 2 && !strcmp(argv[1], "verify");
	if (!verify && (n != 1 || !strcmp(argv[1], "verify")))
		return cli_usage(&cmd_receipts);
	if (store_run_get(c->store, argv[n], &r, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	rc = verify ? receipts_verify(c, &r, json) : receipts_list(c, &r, json);
	run_release(&r);
	return rc;
}

const struct cmd cmd_receipts = {
	.name = "receipts",
	.usage = "receipts [verify] RUN [--json]",
	.summary = "a loop run's receipts, or verify their hash chain",
	.needs = CLI_NEEDS_STORE,
	.exec = receipts_exec,
};
