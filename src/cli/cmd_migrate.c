/*
 * baton migrate: brings a store's schema up to this baton's version and
 * says where it stands. Opening a store applies pending migrations in
 * any case (each in its own transaction, under a lock on PostgreSQL, so
 * hosts starting together apply each once); this command lets an
 * operator do it on purpose, before the workers of a new version start,
 * and see the result (docs/operations.md, "Upgrading").
 */
#include "util/compat.h"

#include "cli/cli.h"
#include "store/store.h"
#include "util/err.h"
#include "util/xalloc.h"

static int
migrate_exec(struct cli *c, int argc, char **argv)
{
	struct err e = ERR_INIT;
	char *label;
	int v;

	if (argc > 1)
		return cli_usage(&cmd_migrate);
	(void)argv;
	v = store_schema_version(c->store, &e);
	if (v < 0) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	label = cli_store_label(c->store_spec);
	cli_printf("%s (%s): schema version %d, up to date\n", label,
		   store_backend(c->store), v);
	free(label);
	return EXIT_OK;
}

const struct cmd cmd_migrate = {
	.name = "migrate",
	.usage = "migrate [--store SPEC]",
	.summary = "apply the store's pending schema migrations",
	.needs = CLI_NEEDS_STORE,
	.exec = migrate_exec,
};
