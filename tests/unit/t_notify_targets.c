/*
 * notify.targets and server.public_url in the config (core/config.c):
 * formats, names, the shared list with notify.webhooks, the link
 * lifetime, and each bad value named by file:line:col and key.
 */
#include "util/compat.h"

#include "core/config.h"
#include "test.h"
#include "util/err.h"

#define REPO ".baton/config.yaml"

static int
load(const char *yaml, struct config *c, struct err *e)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	int rc;

	config_builder_init(&b);
	rc = config_add_yaml(&b, REPO, yaml, strlen(yaml), e);
	if (rc < 0) {
		config_builder_release(&b);
		return rc;
	}
	return config_finish(&b, c, e);
}

static void
load_err(const char *yaml, struct err *e)
{
	struct config c;
	int rc = load(yaml, &c, e);

	if (rc == 0) {
		config_release(&c);
		test_fail(__FILE__, __LINE__, "config loaded: %s", yaml);
	}
	ASSERT_EQ(rc, BATON_EINVAL);
}

TEST(notify_targets_formats_and_names)
{
	struct config c;
	struct err e = ERR_INIT;

	ASSERT_OK(
	    load("server: {public_url: \"https://baton.example.com/ci/\"}\n"
		 "notify:\n"
		 "  link_ttl_seconds: 600\n"
		 "  webhooks:\n"
		 "    - url: http://a/\n"
		 "  targets:\n"
		 "    - {url: \"https://hooks.slack.com/x\", format: slack,"
		 " name: ops}\n"
		 "    - {url: \"https://discord.com/api/webhooks/1/t\","
		 " format: discord}\n"
		 "    - {url: \"https://ntfy.sh/baton\", format: ntfy}\n",
		 &c, &e),
	    &e);
	ASSERT_STREQ(c.server.public_url, "https://baton.example.com/ci");
	ASSERT_EQ(c.link_ttl_seconds, 600);
	ASSERT_EQ(c.nr_webhooks, 4);
	ASSERT_EQ(c.webhooks[0].format, NOTIFY_GENERIC);
	ASSERT_STREQ(c.webhooks[0].name, "generic-1");
	ASSERT_EQ(c.webhooks[1].format, NOTIFY_SLACK);
	ASSERT_STREQ(c.webhooks[1].name, "ops");
	ASSERT_EQ(c.webhooks[2].format, NOTIFY_DISCORD);
	ASSERT_STREQ(c.webhooks[2].name, "discord-3");
	ASSERT_EQ(c.webhooks[3].format, NOTIFY_NTFY);
	ASSERT_EQ(c.webhooks[3].retries, 5);
	config_release(&c);

	ASSERT_OK(load("notify: {targets: [{url: \"http://a/\"}]}\n", &c, &e),
		  &e);
	ASSERT_EQ(c.link_ttl_seconds, 86400);
	ASSERT(c.server.public_url == NULL);
	config_release(&c);
}

TEST(notify_targets_bad_values)
{
	struct err e = ERR_INIT;

	load_err("notify:\n  targets:\n    - url: http://a/\n"
		 "      format: teams\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:15: notify.targets[0].format: 'teams' "
				 "is not one of: generic, slack, discord, "
				 "ntfy");
	load_err("notify:\n  targets:\n    - url: http://a/\n"
		 "      name: \"a b\"\n",
		 &e);
	ASSERT_STREQ(e.msg, REPO ":4:13: notify.targets[0].name: 1 to 64 "
				 "letters, digits, '-', '_' or '.'");
	load_err("notify: {targets: {url: http://a/}}\n", &e);
	ASSERT_CONTAINS(e.msg, "notify.targets: expected a sequence");
	load_err("notify: {link_ttl_seconds: 0}\n", &e);
	ASSERT_CONTAINS(e.msg, "notify.link_ttl_seconds: expected an integer "
			       "from 1 to 2592000, got '0'");
	load_err("server: {public_url: \"ftp://x\"}\n", &e);
	ASSERT_CONTAINS(e.msg, REPO ":1:22: server.public_url: expected an "
				    "http:// or https:// URL");
	load_err("server: {public_url: \"https://x/?a=1\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.public_url: a URL without query");
	load_err("server: {public_url: \"https://u:p@x/\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.public_url: a URL without query");
	load_err("server: {public_url: \"https://\"}\n", &e);
	ASSERT_CONTAINS(e.msg, "server.public_url: expected an http://");
}
