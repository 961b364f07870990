/*
 * baton token add NAME --role viewer|operator|admin, baton token list,
 * baton token revoke NAME: the named tokens of serve's API
 * (docs/security.md, "Users and roles"). The secret is printed once, by
 * add; the store keeps only its SHA-256. The repository's own token
 * (.baton/token) stays the admin "owner" and is not listed here.
 */
#include "util/compat.h"

#include <jansson.h>

#include "cli/cli.h"
#include "server/server.h"
#include "store/store.h"
#include "util/err.h"
#include "util/timeutil.h"

static int
token_add(struct cli *c, const char *name, const char *role)
{
	struct err e = ERR_INIT;
	char secret[65], sha[65];

	if (api_token_name_check(name, &e)) {
		cli_error("%s", e.msg);
		return EXIT_USAGE;
	}
	if (!role || api_role_parse(role) < 0) {
		cli_error(
		    "token add needs --role viewer, operator or admin%s%s",
		    role ? ", not " : "", role ? role : "");
		return EXIT_USAGE;
	}
	if (api_token_new(secret, sha, &e) ||
	    store_token_add(c->store, name, role, sha, &e)) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	cli_printf("%s\n", secret);
	fprintf(stderr,
		"token '%s' (%s) added: the line above is its secret, shown "
		"only now (send it as Authorization: Bearer SECRET)\n",
		name, role);
	return EXIT_OK;
}

static int
print_token(const struct api_token *t, void *arg)
{
	char created[40], used[40], revoked[40];
	json_t *arr = arg;

	if (arr) {
		json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I}", "name",
				      t->name, "role", t->role, "created_at",
				      (json_int_t)t->created_at, "last_used_at",
				      (json_int_t)t->last_used_at, "revoked_at",
				      (json_int_t)t->revoked_at);

		json_array_append_new(arr, o);
		return 0;
	}
	time_fmt_iso(t->created_at, created, sizeof(created));
	if (t->last_used_at)
		time_fmt_iso(t->last_used_at, used, sizeof(used));
	else
		snprintf(used, sizeof(used), "never");
	if (t->revoked_at)
		time_fmt_iso(t->revoked_at, revoked, sizeof(revoked));
	else
		snprintf(revoked, sizeof(revoked), "-");
	cli_printf("%-20s %-8s %-24s %-24s %s\n", t->name, t->role, created,
		   used, revoked);
	return 0;
}

static int
token_list(struct cli *c, int json)
{
	struct err e = ERR_INIT;
	json_t *arr = json ? json_array() : NULL;

	if (!json)
		cli_printf("%-20s %-8s %-24s %-24s %s\n", "NAME", "ROLE",
			   "CREATED", "LAST USE", "REVOKED");
	if (store_token_list(c->store, print_token, arr, &e)) {
		json_decref(arr);
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	if (json) {
		char *text = json_dumps(arr, JSON_INDENT(2));

		printf("%s\n", text);
		free(text);
		json_decref(arr);
	}
	return EXIT_OK;
}

static int
token_revoke(struct cli *c, const char *name)
{
	struct err e = ERR_INIT;
	int rc = store_token_revoke(c->store, name, &e);

	if (rc < 0) {
		cli_error("%s", e.msg);
		return EXIT_FAIL;
	}
	cli_printf("token '%s' %s\n", name,
		   rc ? "revoked" : "was revoked already");
	return EXIT_OK;
}

static int
token_exec(struct cli *c, int argc, char **argv)
{
	const char *role = NULL;
	int json = 0, n;
	struct cli_opt opts[] = {
		{ "--role=", NULL, &role },
		{ "--json", &json, NULL },
	};

	n = cli_parse(argc - 1, argv + 1, opts, ARRAY_SIZE(opts));
	if (n < 0)
		return EXIT_USAGE;
	argv++;
	if (n == 2 && !strcmp(argv[0], "add"))
		return token_add(c, argv[1], role);
	if (role)
		return cli_usage(&cmd_token);
	if (n == 1 && !strcmp(argv[0], "list"))
		return token_list(c, json);
	if (n == 2 && !strcmp(argv[0], "revoke") && !json)
		return token_revoke(c, argv[1]);
	return cli_usage(&cmd_token);
}

const struct cmd cmd_token = {
	.name = "token",
	.usage = "token add NAME --role viewer|operator|admin | token list "
		 "[--json] | token revoke NAME",
	.summary = "named API tokens for serve: add, list, revoke",
	.needs = CLI_NEEDS_STORE,
	.exec = token_exec,
};
