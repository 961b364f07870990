/*
 * Named API tokens (issue 24 part 5): the store's api_tokens operations
 * on SQLite, and on PostgreSQL when BATON_TEST_PG_DSN names a database
 * this test may wipe; and the secrets and hashes of server/auth.c. The
 * route table's roles are in t_roles; the HTTP side in
 * tests/integration/t0150-roles.sh.
 */
#include "util/compat.h"

#include <libpq-fe.h>

#include "server/server.h"
#include "store/store.h"
#include "test.h"
#include "util/err.h"
#include "util/xalloc.h"

static struct store *
open_spec(const char *spec)
{
	struct err e = ERR_INIT;
	struct store *s = NULL;

	ASSERT_OK(store_open(spec, &s, &e), &e);
	return s;
}

static int
count(const struct api_token *t, void *arg)
{
	char **names = arg;
	size_t n = 0;

	while (names[n])
		n++;
	names[n] = xstrdup(t->name);
	return 0;
}

/* The operations every backend must agree on. */
static void
token_cases(struct store *s)
{
	struct err e = ERR_INIT;
	struct api_token t;
	char sa[65], sb[65], sc[65], secret[65], *names[8] = { 0 };
	size_t i;

	ASSERT_OK(api_token_new(secret, sa, &e), &e);
	ASSERT_OK(api_token_new(secret, sb, &e), &e);
	ASSERT_OK(api_token_new(secret, sc, &e), &e);
	ASSERT_OK(store_token_add(s, "bob", "operator", sb, &e), &e);
	ASSERT_OK(store_token_add(s, "alice", "viewer", sa, &e), &e);
	/* a name is taken, and stays taken */
	ASSERT_EQ(store_token_add(s, "alice", "admin", sc, &e), BATON_EEXIST);
	ASSERT_CONTAINS(e.msg, "exists");
	e = (struct err)ERR_INIT;
	/* so is a hash (two names for one secret) */
	ASSERT(store_token_add(s, "carol", "admin", sa, &e) < 0);
	e = (struct err)ERR_INIT;

	ASSERT_EQ(store_token_find(s, sa, &t, &e), 1);
	ASSERT_STREQ(t.name, "alice");
	ASSERT_STREQ(t.role, "viewer");
	ASSERT(t.created_at > 0);
	ASSERT_EQ(t.last_used_at, 0);
	ASSERT_EQ(t.revoked_at, 0);
	api_token_release(&t);
	ASSERT_EQ(store_token_find(s, sc, &t, &e), 0);
	/* not a hash at all: nothing, and no query */
	ASSERT_EQ(store_token_find(s, "abc", &t, &e), 0);

	/* last use: written, then not again within the minute */
	ASSERT_OK(store_token_used(s, "alice", 1000000, &e), &e);
	ASSERT_EQ(store_token_find(s, sa, &t, &e), 1);
	ASSERT_EQ(t.last_used_at, 1000000);
	api_token_release(&t);
	ASSERT_OK(store_token_used(s, "alice", 1030000, &e), &e);
	ASSERT_EQ(store_token_find(s, sa, &t, &e), 1);
	ASSERT_EQ(t.last_used_at, 1000000);
	api_token_release(&t);
	ASSERT_OK(store_token_used(s, "alice", 1070000, &e), &e);
	ASSERT_EQ(store_token_find(s, sa, &t, &e), 1);
	ASSERT_EQ(t.last_used_at, 1070000);
	api_token_release(&t);

	/* revoke: once, then "already", then an unknown name */
	ASSERT_EQ(store_token_revoke(s, "bob", &e), 1);
	ASSERT_EQ(store_token_revoke(s, "bob", &e), 0);
	ASSERT_EQ(store_token_revoke(s, "zed", &e), BATON_ENOTFOUND);
	e = (struct err)ERR_INIT;
	ASSERT_EQ(store_token_find(s, sb, &t, &e), 1);
	ASSERT(t.revoked_at > 0);
	api_token_release(&t);

	ASSERT_OK(store_token_list(s, count, names, &e), &e);
	ASSERT_STREQ(names[0], "alice");
	ASSERT_STREQ(names[1], "bob");
	ASSERT(names[2] == NULL);
	for (i = 0; names[i]; i++)
		free(names[i]);
}

TEST(sqlite_tokens)
{
	char *spec = xasprintf("sqlite:%s/baton.db", test_tmpdir());
	struct store *s = open_spec(spec);

	token_cases(s);
	store_close(s);
	free(spec);
}

TEST(postgres_tokens)
{
	const char *dsn = getenv("BATON_TEST_PG_DSN");
	PGconn *c;
	PGresult *res;
	struct store *s;

	if (!dsn || !*dsn)
		return;
	c = PQconnectdb(dsn);
	ASSERT(PQstatus(c) == CONNECTION_OK);
	res = PQexec(c, "SET client_min_messages = warning;"
			"DROP SCHEMA public CASCADE; CREATE SCHEMA public");
	ASSERT(PQresultStatus(res) == PGRES_COMMAND_OK);
	PQclear(res);
	PQfinish(c);
	s = open_spec(dsn);
	token_cases(s);
	store_close(s);
}

TEST(token_secrets_are_random_and_hashed)
{
	struct err e = ERR_INIT;
	char s1[65], h1[65], s2[65], h2[65], h[65];
	size_t i;

	ASSERT_OK(api_token_new(s1, h1, &e), &e);
	ASSERT_OK(api_token_new(s2, h2, &e), &e);
	ASSERT_EQ(strlen(s1), 64);
	ASSERT_EQ(strlen(h1), 64);
	for (i = 0; i < 64; i++)
		ASSERT(strchr("0123456789abcdef", s1[i]));
	ASSERT(strcmp(s1, s2));
	ASSERT(strcmp(s1, h1)); /* the hash is not the secret */
	ASSERT_OK(api_token_sha(s1, h, &e), &e);
	ASSERT_STREQ(h, h1);
	/* SHA-256 itself (FIPS 180-2's "abc") */
	ASSERT_OK(api_token_sha("abc", h, &e), &e);
	ASSERT_STREQ(h, "ba7816bf8f01cfea414140de5dae2223"
			"b00361a396177a9cb410ff61f20015ad");
}

TEST(token_names)
{
	struct err e = ERR_INIT;

	ASSERT_OK(api_token_name_check("ci-bot.2_x", &e), &e);
	ASSERT(api_token_name_check("", &e) < 0);
	ASSERT(api_token_name_check("a b", &e) < 0);
	ASSERT(api_token_name_check("a/b", &e) < 0);
	ASSERT(api_token_name_check("owner", &e) < 0);
	ASSERT_CONTAINS(e.msg, ".baton/token");
	ASSERT(
	    api_token_name_check("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
				 "aaaaaaaaaaaaaaaaaaaaaaaaa",
				 &e) < 0);
	ASSERT_EQ(api_role_parse("viewer"), ROLE_VIEWER);
	ASSERT_EQ(api_role_parse("operator"), ROLE_OPERATOR);
	ASSERT_EQ(api_role_parse("admin"), ROLE_ADMIN);
	ASSERT_EQ(api_role_parse("public"), -1);
	ASSERT_EQ(api_role_parse("Admin"), -1);
	ASSERT_EQ(api_role_parse(NULL), -1);
	ASSERT_STREQ(api_role_name(ROLE_UNSET), "admin");
}
