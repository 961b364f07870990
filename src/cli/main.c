/*
 * baton's entry point: finds the command in the table, opens what it
 * needs (repository, config, store), runs it and turns the result into an
 * exit code. The only file allowed to exit on errors.
 */
#include "util/compat.h"

#include <signal.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/cnode.h"
#include "core/plugin.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/limits.h"
#include "util/redact.h"
#include "util/strvec.h"
#include "util/term.h"
#include "util/xalloc.h"

extern char **environ;

static const struct cmd *const commands[] = {
	&cmd_init,  &cmd_run,	&cmd_status,	&cmd_show,   &cmd_events,
	&cmd_pause, &cmd_resume, &cmd_abort,	&cmd_steer,  &cmd_approvals,
	&cmd_diff,  &cmd_pipeline, &cmd_plugin, &cmd_config, &cmd_doctor,
	&cmd_version, &cmd_merge, &cmd_receipts, &cmd_forge, &cmd_clean,
	&cmd_task,  &cmd_serve, &cmd_worker, &cmd_plan, &cmd_migrate,
	&cmd_tui,    &cmd_mcp,    &cmd_chat,   &cmd_memory, &cmd_schedule,
	&cmd_token,
	&cmd_help,
};

void
cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("baton: ", stderr);
	va_start(ap, fmt);
	term_vprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int
cli_printf(const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = term_vprintf(stdout, fmt, ap);
	va_end(ap);
	return rc;
}

int
cli_usage(const struct cmd *cmd)
{
	fprintf(stderr, "usage: baton %s\n", cmd->usage);
	return EXIT_USAGE;
}

const struct cmd *
cli_find(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(commands[i]->name, name))
			return commands[i];
	return NULL;
}

int
cli_parse(int argc, char **argv, const struct cli_opt *opts, size_t n)
{
	int i, out = 0, rest = 0;
	size_t k;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		int matched = 0;

		if (rest || a[0] != '-' || !a[1]) {
			argv[out++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--")) {
			rest = 1;
			continue;
		}
		for (k = 0; k < n && !matched; k++) {
			const char *name = opts[k].name;
			size_t len = strlen(name);

			if (name[len - 1] != '=') {
				if (!strcmp(a, name)) {
					*opts[k].flag = 1;
					matched = 1;
				}
				continue;
			}
			if (!strncmp(a, name, len)) {
				*opts[k].val = a + len;
				matched = 1;
			} else if (!strncmp(a, name, len - 1) &&
				   !a[len - 1]) {
				if (i + 1 >= argc) {
					cli_error("option '%s' needs a value",
						  a);
					return -1;
				}
				*opts[k].val = argv[++i];
				matched = 1;
			}
		}
		if (!matched) {
			cli_error("unknown option '%s'", a);
			return -1;
		}
	}
	argv[out] = NULL;
	return out;
}

/* Adds one YAML file as a config layer; a missing file is fine. */
static int
add_file(struct config_builder *b, const char *path, const char *shown,
	 struct err *e)
{
	struct buf text = BUF_INIT;
	int rc;

	rc = fs_read(path, &text, BUF_MAX_CONFIG, e);
	if (rc == -ENOENT) {
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	rc = config_add_yaml(b, shown, text.ptr, text.len, e);
out:
	buf_release(&text);
	return rc;
}

/* --role ROLE=PROVIDER[,PROVIDER...]: the flags layer of the config. */
static int
add_role_flag(struct config_builder *b, const char *arg, struct err *e)
{
	const char *eq = strchr(arg, '=');
	char *path;
	int rc;

	if (!eq || eq == arg || !eq[1])
		return err_set(e, BATON_EINVAL,
			       "--role '%s': expected ROLE=PROVIDER (e.g. "
			       "--role reviewer=claude)",
			       arg);
	path = xasprintf("roles.%.*s", (int)(eq - arg), arg);
	rc = config_set(b, path, eq + 1, "flag --role", e);
	free(path);
	return rc;
}

/* Secrets to keep out of the record: the environment's, every variable
 * a provider names as its key, and the forge's token and webhook secret
 * (whatever their variables are called). */
static void
learn_secrets(const struct config *cfg)
{
	const char *extra[64];
	size_t i, n = 0;

	for (i = 0; i < cfg->nr_providers && n + 3 < ARRAY_SIZE(extra); i++)
		if (cfg->providers[i].api_key_env)
			extra[n++] = cfg->providers[i].api_key_env;
	if (cfg->forge.token_env)
		extra[n++] = cfg->forge.token_env;
	if (cfg->forge.webhook_secret_env)
		extra[n++] = cfg->forge.webhook_secret_env;
	extra[n] = NULL;
	redact_init(environ, extra);
}

/*
 * Takes every --role ROLE=P / --role=ROLE=P out of argv into c->roles, so
 * the command's own parser never sees them. Returns -1 on a --role with
 * no value.
 */
static int
take_role_flags(struct cli *c, int *argc, char **argv)
{
	return cli_take_repeated(argc, argv, "--role", &c->roles);
}

/*
 * --store SPEC, for every command that opens the store: the same as
 * BATON_STORE (which it sets, so that the processes a command starts,
 * workers and the HTTP server, open the same store). The last one given
 * wins.
 */
static int
take_store_flag(int *argc, char **argv)
{
	struct strvec specs = STRVEC_INIT;
	int rc = cli_take_repeated(argc, argv, "--store", &specs);

	if (!rc && specs.nr && !*specs.v[specs.nr - 1]) {
		cli_error("--store wants a store: a SQLite path, sqlite:PATH "
			  "or a postgres:// URL, not ''");
		rc = -1;
	} else if (!rc && specs.nr) {
		setenv("BATON_STORE", specs.v[specs.nr - 1], 1);
	}
	strvec_clear(&specs);
	return rc;
}

int
cli_take_repeated(int *argc, char **argv, const char *name,
		  struct strvec *out)
{
	size_t len = strlen(name);
	int i, kept = 1;

	for (i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--")) {
			while (i < *argc)
				argv[kept++] = argv[i++];
			break;
		}
		if (!strncmp(argv[i], name, len) && argv[i][len] == '=') {
			strvec_push(out, argv[i] + len + 1);
			continue;
		}
		if (!strcmp(argv[i], name)) {
			if (i + 1 >= *argc) {
				cli_error("option '%s' needs a value", name);
				return -1;
			}
			strvec_push(out, argv[++i]);
			continue;
		}
		argv[kept++] = argv[i];
	}
	argv[kept] = NULL;
	*argc = kept;
	return 0;
}

/*
 * The plugin registry for the loaded config: .baton/plugins/, then the
 * user's ~/.config/baton/plugins/ (an id in both: the repository's).
 * A plugin that does not load is marked so in the registry; the command
 * goes on.
 */
static void
load_plugins(struct cli *c, const char *xdg, const char *home)
{
	struct strvec dirs = STRVEC_INIT;

	strvec_pushf(&dirs, "%s/plugins", c->ws.dir);
	if (xdg && *xdg)
		strvec_pushf(&dirs, "%s/baton/plugins", xdg);
	else if (home && *home)
		strvec_pushf(&dirs, "%s/.config/baton/plugins", home);
	plugins_load(&dirs, &c->cfg.plugins_enabled);
	strvec_clear(&dirs);
}

/* The user's config file ($XDG_CONFIG_HOME or ~/.config), or NULL. */
static char *
user_config(const char *xdg, const char *home)
{
	if (xdg && *xdg)
		return xasprintf("%s/baton/config.yaml", xdg);
	if (home && *home)
		return xasprintf("%s/.config/baton/config.yaml", home);
	return NULL;
}

int
cli_load_config(struct cli *c, struct err *e)
{
	struct config_builder b = CONFIG_BUILDER_INIT;
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	char *user = user_config(xdg, home), *repo;
	size_t i;
	int rc;

	repo = xasprintf("%s/config.yaml", c->ws.dir);
	config_builder_init(&b);
	rc = user ? add_file(&b, user, user, e) : 0;
	if (!rc)
		rc = add_file(&b, repo, ".baton/config.yaml", e);
	if (!rc)
		rc = config_add_env(&b, environ, e);
	for (i = 0; !rc && i < c->roles.nr; i++)
		rc = add_role_flag(&b, c->roles.v[i], e);
	if (!rc)
		rc = config_finish(&b, &c->cfg, e);
	else
		config_builder_release(&b);
	if (!rc) {
		c->have_cfg = 1;
		learn_secrets(&c->cfg);
		load_plugins(c, xdg, home);
	}
	free(user);
	free(repo);
	return rc;
}

char *
cli_store_spec(const struct cli *c)
{
	return c->cfg.store ? xstrdup(c->cfg.store) :
			      xasprintf("%s/baton.db", c->ws.dir);
}

char *
cli_store_label(const char *spec)
{
	const char *scheme = strstr(spec, "://"), *at, *colon;

	if (!scheme)
		return xstrdup(spec);
	at = strchr(scheme + 3, '@');
	colon = at ? memchr(scheme + 3, ':', (size_t)(at - scheme - 3)) : NULL;
	if (!colon)
		return xstrdup(spec);
	return xasprintf("%.*s:***%s", (int)(colon - spec), spec, at);
}

/* store_run_list callback: there is a run. */
static int
note_run(const struct run *r, void *arg)
{
	(void)r;
	*(int *)arg = 1;
	return 1;
}

int
cli_refuse_orphaned_runs(const struct cli *c, struct store *s, struct err *e)
{
	struct store_run_filter f = { NULL, 1, 0 };
	char *first = NULL;
	size_t nr;
	int any = 0, rc = 0;

	if (c->cfg.store)
		return 0;
	/*
	 * The folders first: a run's folder is made after its row commits
	 * (engine_create_spec), so a store read after seeing a folder sees
	 * its run. The other order refuses a store that another process
	 * gave its first run between the two looks.
	 */
	nr = workspace_count_runs(&c->ws, &first);
	if (nr && s)
		rc = store_run_list(s, &f, note_run, &any, e);
	if (nr && !rc && !any)
		rc = err_set(e, BATON_EBADSTATE,
			     "store '.baton/baton.db' %s, but '%s/runs/' holds "
			     "%zu run folder%s (%s, ...) that another store "
			     "made: put back the store that has them (or name "
			     "it with --store), or, to start afresh, move the "
			     "folder away first (mv .baton/runs "
			     ".baton/runs.old); baton does not start over at "
			     "r1 on top of them",
			     s ? "holds no runs" : "does not exist (it holds "
						   "no runs)",
			     c->ws.dir, nr, nr == 1 ? "" : "s", first);
	free(first);
	return rc;
}

/* Whether argv[1..] holds cmd's bare option (struct cmd). */
static int
bare(const struct cmd *cmd, int argc, char **argv)
{
	int i;

	for (i = 2; cmd->bare_opt && i < argc; i++)
		if (!strcmp(argv[i], cmd->bare_opt))
			return 1;
	return 0;
}

/* Whether the config file at path has a top-level store: key. */
static int
names_store(const char *path)
{
	struct buf text = BUF_INIT;
	const char *line;
	int yes = 0;

	if (fs_read(path, &text, BUF_MAX_CONFIG, NULL) == 0)
		for (line = text.ptr; line && !yes;
		     line = strchr(line, '\n'), line = line ? line + 1 : NULL)
			yes = !strncmp(line, "store:", 6);
	buf_release(&text);
	return yes;
}

/*
 * A CLI_CONFIG_SPARE command whose config did not load (e says why)
 * goes on with the defaults and the environment, the error shown as a
 * warning. The store is then BATON_STORE (--store) or the default one,
 * unless a config file names its own, which cannot be read: then e
 * stands, saying how to reach the store meanwhile.
 */
static int
spare_config(struct cli *c, struct err *e)
{
	const char *env = getenv("BATON_STORE");
	struct config_builder b = CONFIG_BUILDER_INIT;
	struct err ignored = ERR_INIT;
	char *repo = xasprintf("%s/config.yaml", c->ws.dir),
	     *user = user_config(getenv("XDG_CONFIG_HOME"), getenv("HOME"));
	int named;

	named = !(env && *env) &&
		(names_store(repo) || (user && names_store(user)));
	free(repo);
	free(user);
	if (named) {
		char *why = xstrdup(e->msg);

		err_set(e, e->rc, "%s (the config names the store: until it "
				  "loads, --store SPEC reaches the runs)",
			why);
		free(why);
		return -1;
	}
	term_printf(stderr, "baton: warning: %s; going on without the "
			    "config\n",
		    e->msg);
	config_builder_init(&b);
	if (config_add_env(&b, environ, &ignored)) {
		config_builder_release(&b);
		config_builder_init(&b);
	}
	if (config_finish(&b, &c->cfg, &ignored))
		return -1; /* e stands */
	c->have_cfg = 1;
	*e = (struct err)ERR_INIT;
	return 0;
}

/* Opens what cmd needs. */
static int
prepare(struct cli *c, const struct cmd *cmd, struct err *e)
{
	int rc = 0;

	if (!cmd->needs)
		return 0;
	rc = workspace_open(NULL, &c->ws, e);
	if (rc || !(cmd->needs & (CLI_NEEDS_CONFIG | CLI_NEEDS_STORE)))
		return rc;
	rc = cli_load_config(c, e);
	if (rc && (cmd->needs & CLI_CONFIG_SPARE) && !spare_config(c, e))
		rc = 0;
	if (rc)
		return rc;
	/* Without a store the engine can still load pipelines. */
	engine_init(&c->en, NULL, &c->ws, &c->cfg);
	if (!(cmd->needs & CLI_NEEDS_STORE))
		return 0;
	if (!fs_is_dir(c->ws.dir))
		return err_set(e, BATON_ENOTFOUND,
			       "no .baton/ in '%s': run 'baton init' first",
			       c->ws.repo);
	c->store_spec = cli_store_spec(c);
	rc = store_open(c->store_spec, &c->store, e);
	if (!rc)
		rc = cli_refuse_orphaned_runs(c, c->store, e);
	if (!rc)
		engine_init(&c->en, c->store, &c->ws, &c->cfg);
	return rc;
}

static void
release(struct cli *c)
{
	engine_release(&c->en);
	store_close(c->store);
	free(c->store_spec);
	if (c->have_cfg)
		config_release(&c->cfg);
	plugins_unload();
	workspace_release(&c->ws);
	strvec_clear(&c->roles);
	redact_reset();
}

static int
help(void)
{
	size_t i;

	printf("usage: baton COMMAND [ARGS]\n\n"
	       "baton carries coding-agent work through a governed, durable "
	       "lifecycle.\n\ncommands:\n");
	for (i = 0; i < ARRAY_SIZE(commands); i++)
		printf("  %-52s %s\n", commands[i]->usage,
		       commands[i]->summary);
	printf("\nexit codes: 0 ok, 1 failure, 2 usage, 3 the run ended "
	       "blocked, failed or aborted,\nor stopped at a budget, 130 stopped by Ctrl-C (the run "
	       "waits for 'baton resume')\ndocs: docs/cli.md\n");
	return EXIT_OK;
}

static int
help_exec(struct cli *c, int argc, char **argv)
{
	const struct cmd *cmd = argc > 1 ? cli_find(argv[1]) : NULL;

	(void)c;
	if (argc > 2 || (argc > 1 && !cmd)) {
		if (argc > 1 && !cmd)
			cli_error("'%s' is not a baton command (see 'baton "
				  "help')",
				  argv[1]);
		else
			cli_error("help takes one command: baton help "
				  "COMMAND");
		return EXIT_USAGE;
	}
	if (cmd) {
		printf("usage: baton %s\n\n%s\n", cmd->usage, cmd->summary);
		return EXIT_OK;
	}
	return help();
}

const struct cmd cmd_help = {
	.name = "help",
	.usage = "help [COMMAND]",
	.summary = "show the commands, or one command's usage",
	.exec = help_exec,
};

int
main(int argc, char **argv)
{
	struct cli c = { .store = NULL };
	struct err e = ERR_INIT;
	const struct cmd *cmd;
	int rc, i;

	/* A reader that goes away (baton events | head) is not an error. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	c.en.lock_fd = -1;
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return argc < 2 ? (help(), EXIT_USAGE) : help();
	if (!strcmp(argv[1], "--version"))
		argv[1] = (char *)"version";
	cmd = cli_find(argv[1]);
	if (!cmd) {
		cli_error("'%s' is not a baton command (see 'baton help')",
			  argv[1]);
		return EXIT_USAGE;
	}
	/* not after "--": what follows it is text (run -- --help) */
	for (i = 2; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: baton %s\n\n%s\n", cmd->usage,
			       cmd->summary);
			return EXIT_OK;
		}
	strvec_init(&c.roles);
	if (cmd->takes_roles && take_role_flags(&c, &argc, argv) < 0)
		return EXIT_USAGE;
	if (bare(cmd, argc, argv)) {
		rc = cmd->exec(&c, argc - 1, argv + 1);
		release(&c);
		fflush(stdout);
		return rc;
	}
	if ((cmd->needs & CLI_NEEDS_STORE) && take_store_flag(&argc, argv) < 0)
		return EXIT_USAGE;
	rc = prepare(&c, cmd, &e);
	if (rc) {
		cli_error("%s", e.msg);
		release(&c);
		return EXIT_FAIL;
	}
	rc = cmd->exec(&c, argc - 1, argv + 1);
	release(&c);
	fflush(stdout);
	return rc;
}
