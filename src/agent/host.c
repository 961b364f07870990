/*
 * The host snapshot (host.h): uname and /etc/os-release for the system,
 * one short program run per toolchain and per agent CLI for versions,
 * all on the trusted part of PATH and bounded in time; kept as JSON in
 * the cache file with when it was made and a fingerprint of what it was
 * made for.
 */
#include "util/compat.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/host.h"
#include "core/config.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/spawn.h"
#include "util/strvec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* The longest version line kept. */
#define VERSION_MAX 160
/* The most a cache file or os-release may hold. */
#define HOST_FILE_MAX (64 * 1024)

struct tool {
	const char *name;
	const char *arg; /* what prints its version */
};

/* The toolchains looked for, in the order shown. */
static const struct tool tools[] = {
	{ "git", "--version" },	   { "cc", "--version" },
	{ "gcc", "--version" },	   { "node", "--version" },
	{ "python3", "--version" }, { "go", "version" },
	{ "rustc", "--version" },  { "java", "-version" },
};

/* Whether the folder dir lies inside root (both absolute, resolved). */
static int
is_inside(const char *dir, const char *root)
{
	size_t n = strlen(root);

	return !strncmp(dir, root, n) && (dir[n] == '/' || dir[n] == '\0');
}

/*
 * The trusted entries of PATH, in order, resolved: absolute, existing,
 * and not inside repo (resolved too; may be NULL).
 */
static void
trusted_path(const char *repo, struct strvec *out)
{
	const char *path = getenv("PATH"), *dir, *end;
	char real[PATH_MAX], root[PATH_MAX];
	struct buf one = BUF_INIT;
	int have_root = repo && realpath(repo, root);

	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (dir = path;; dir = end + 1) {
		end = strchrnul(dir, ':');
		buf_reset(&one);
		buf_add(&one, dir, (size_t)(end - dir));
		if (one.ptr[0] == '/' && realpath(one.ptr, real) &&
		    !(have_root && is_inside(real, root)))
			strvec_push(out, real);
		if (!*end)
			break;
	}
	buf_release(&one);
}

static char *
which_in(const struct strvec *dirs, const char *program)
{
	struct stat st;
	char *p;
	size_t i;

	if (!program || !*program || strchr(program, '/'))
		return NULL;
	for (i = 0; i < dirs->nr; i++) {
		p = xasprintf("%s/%s", dirs->v[i], program);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

char *
host_which(const char *program, const char *repo)
{
	struct strvec dirs = STRVEC_INIT;
	char *p;

	trusted_path(repo, &dirs);
	p = which_in(&dirs, program);
	strvec_clear(&dirs);
	return p;
}

/* The first line of text that is not blank, trimmed, at most
 * VERSION_MAX bytes; "" when none. */
static void
first_line(const char *s, size_t len, struct buf *out)
{
	const char *end = s + len, *nl;

	while (s < end) {
		nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			nl = end;
		while (s < nl && isspace((unsigned char)*s))
			s++;
		if (s < nl) {
			size_t n = (size_t)(nl - s);

			while (n && isspace((unsigned char)s[n - 1]))
				n--;
			buf_add_cut(out, s, n, VERSION_MAX);
			return;
		}
		s = nl + 1;
	}
}

/*
 * Runs "path arg" from "/" with PATH set to the trusted one, for at most
 * HOST_PROBE_MS (less when the deadline is nearer), and puts the first
 * line it printed (stdout, else stderr: java) into out. Returns 0, or -1
 * when it could not run, failed or printed nothing.
 */
static int
probe(const char *path, const char *arg, const char *safe_path,
      int64_t deadline, struct buf *out)
{
	struct spawn_opts po = SPAWN_OPTS_INIT;
	struct spawn_result sr = SPAWN_RESULT_INIT;
	int64_t left = deadline - time_host_ms();
	int rc = -1;

	if (left <= 0)
		return -1;
	strvec_pushl(&po.argv, path, arg, NULL);
	strvec_pushf(&po.env, "PATH=%s", safe_path);
	po.cwd = "/";
	po.tail_max = 4096;
	po.timeout_ms = left < HOST_PROBE_MS ? (int)left : HOST_PROBE_MS;
	po.kill_grace_ms = 500;
	po.wake_fd = -1;
	if (spawn_run(&po, &sr, NULL) < 0 && !sr.out.len && !sr.err.len)
		goto out;
	if (sr.timed_out)
		goto out;
	first_line(sr.out.ptr, sr.out.len, out);
	if (!out->len)
		first_line(sr.err.ptr, sr.err.len, out);
	rc = out->len ? 0 : -1;
out:
	spawn_result_release(&sr);
	spawn_opts_release(&po);
	return rc;
}

/* PRETTY_NAME from /etc/os-release, or NULL. */
static char *
os_name(void)
{
	struct buf text = BUF_INIT, name = BUF_INIT;
	const char *p;
	char *out = NULL;

	if (fs_read("/etc/os-release", &text, HOST_FILE_MAX, NULL) < 0)
		goto out;
	for (p = text.ptr; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, "PRETTY_NAME=", 12)) {
			p += 12;
			if (*p == '"')
				p++;
			while (*p && *p != '"' && *p != '\n')
				buf_addch(&name, *p++);
			break;
		}
	if (name.len)
		out = buf_detach(&name, NULL);
out:
	buf_release(&text);
	buf_release(&name);
	return out;
}

/* Whether provider p's program may be run to ask its version. */
static int
probes_agent(const struct config_provider *p)
{
	const struct agent_info *info = agent_info(p->type);

	return info && info->is_cli && strcmp(p->type, "command");
}

/* What a snapshot is made for: the trusted PATH and the agents. */
static void
fingerprint(const struct host_probe *hp, const struct strvec *dirs,
	    char out[17])
{
	struct buf b = BUF_INIT;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < dirs->nr; i++)
		buf_addf(&b, "%s:", dirs->v[i]);
	for (i = 0; i < hp->nr_providers; i++) {
		const struct config_provider *p = &hp->providers[i];
		const char *prog = agent_program(p);

		buf_addf(&b, "\n%s %s %s", p->name, p->type, prog ? prog : "");
	}
	for (i = 0; i < b.len; i++) {
		h ^= (unsigned char)b.ptr[i];
		h *= 0x100000001b3ULL;
	}
	snprintf(out, 17, "%016llx", (unsigned long long)h);
	buf_release(&b);
}

static json_t *
make_snapshot(const struct host_probe *hp, const struct strvec *dirs,
	      const char *fp)
{
	struct buf ver = BUF_INIT, joined = BUF_INIT;
	json_t *o = json_object(), *list = json_array(),
	       *missing = json_array(), *agents = json_array();
	int64_t deadline = time_host_ms() + HOST_PROBE_TOTAL_MS;
	struct utsname u;
	char when[40], *os = os_name(), *path;
	size_t i;

	for (i = 0; i < dirs->nr; i++)
		buf_addf(&joined, "%s%s", i ? ":" : "", dirs->v[i]);
	time_fmt_iso(hp->now_ms, when, sizeof(when));
	json_object_set_new(o, "made_at", json_string(when));
	json_object_set_new(o, "made_at_ms", json_integer(hp->now_ms));
	json_object_set_new(o, "fingerprint", json_string(fp));
	if (os)
		json_object_set_new(o, "os", json_lossy_str(os));
	if (uname(&u) == 0) {
		json_object_set_new(o, "kernel",
				    json_lossy_str(u.sysname));
		json_object_set_new(o, "release",
				    json_lossy_str(u.release));
		json_object_set_new(o, "arch", json_lossy_str(u.machine));
	}
	for (i = 0; i < ARRAY_SIZE(tools); i++) {
		path = which_in(dirs, tools[i].name);
		buf_reset(&ver);
		if (!path) {
			json_array_append_new(missing,
					      json_string(tools[i].name));
			continue;
		}
		if (probe(path, tools[i].arg, joined.ptr, deadline, &ver) < 0)
			buf_adds(&ver, "(found; no version in time)");
		json_array_append_new(
			list, json_pack("{s:s, s:s, s:o}", "name",
					tools[i].name, "path", path, "version",
					json_lossy(ver.ptr, ver.len)));
		free(path);
	}
	for (i = 0; i < hp->nr_providers; i++) {
		const struct config_provider *p = &hp->providers[i];
		const char *prog = agent_program(p);
		json_t *a;

		if (!prog)
			continue; /* baton's own agent: no program */
		a = json_pack("{s:s, s:s, s:s}", "provider", p->name, "type",
			      p->type, "program", prog);
		buf_reset(&ver);
		path = probes_agent(p) ? which_in(dirs, prog) : NULL;
		if (!probes_agent(p))
			buf_adds(&ver, "(not asked: a command provider)");
		else if (!path)
			buf_adds(&ver, "(not found on PATH)");
		else if (probe(path, "--version", joined.ptr, deadline, &ver) <
			 0)
			buf_adds(&ver, "(found; no version in time)");
		if (path)
			json_object_set_new(a, "path", json_string(path));
		json_object_set_new(a, "version", json_lossy(ver.ptr, ver.len));
		json_array_append_new(agents, a);
		free(path);
	}
	json_object_set_new(o, "tools", list);
	json_object_set_new(o, "missing", missing);
	json_object_set_new(o, "agents", agents);
	free(os);
	buf_release(&ver);
	buf_release(&joined);
	return o;
}

json_t *
host_snapshot_cached(const char *cache)
{
	struct buf text = BUF_INIT;
	json_t *j = NULL;

	if (fs_read_nofollow(cache, &text, HOST_FILE_MAX, NULL) == 0)
		j = json_loadb(text.ptr, text.len, 0, NULL);
	buf_release(&text);
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

int
host_snapshot(const struct host_probe *hp, json_t **out, int *made,
	      struct err *e)
{
	struct strvec dirs = STRVEC_INIT;
	json_t *j = host_snapshot_cached(hp->cache);
	const char *had;
	char fp[17], *text = NULL;
	int64_t at;
	int rc = 0;

	trusted_path(hp->repo, &dirs);
	fingerprint(hp, &dirs, fp);
	if (made)
		*made = 0;
	if (j) {
		at = json_integer_value(json_object_get(j, "made_at_ms"));
		had = json_string_value(json_object_get(j, "fingerprint"));
		if (hp->ttl_seconds > 0 && at > 0 && at <= hp->now_ms &&
		    hp->now_ms - at < (int64_t)hp->ttl_seconds * 1000 && had &&
		    !strcmp(had, fp))
			goto out;
		json_decref(j);
	}
	j = make_snapshot(hp, &dirs, fp);
	if (made)
		*made = 1;
	text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	rc = fs_write_atomic(hp->cache, text, strlen(text), e);
out:
	free(text);
	strvec_clear(&dirs);
	if (rc < 0) {
		json_decref(j);
		return rc;
	}
	*out = j;
	return 0;
}

/* o's string key, or "?" */
static const char *
str(const json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "?";
}

void
host_snapshot_text(const json_t *snap, struct buf *out)
{
	const json_t *tools_ = json_object_get(snap, "tools");
	const json_t *missing = json_object_get(snap, "missing");
	const json_t *agents = json_object_get(snap, "agents");
	const json_t *one;
	const char *name;
	size_t i;

	buf_addf(out, "made at: %s\n", str(snap, "made_at"));
	buf_addf(out, "os: %s (%s %s, %s)\n", str(snap, "os"),
		 str(snap, "kernel"), str(snap, "release"), str(snap, "arch"));
	for (i = 0; i < json_array_size(tools_); i++) {
		one = json_array_get(tools_, i);
		buf_addf(out, "%s: %s (%s)\n", str(one, "name"),
			 str(one, "version"), str(one, "path"));
	}
	if (json_array_size(missing)) {
		buf_adds(out, "not found:");
		for (i = 0; i < json_array_size(missing); i++) {
			name = json_string_value(json_array_get(missing, i));
			buf_addf(out, "%s %s", i ? "," : "", name ? name : "?");
		}
		buf_addch(out, '\n');
	}
	for (i = 0; i < json_array_size(agents); i++) {
		one = json_array_get(agents, i);
		buf_addf(out, "agent %s (%s, '%s'): %s\n", str(one, "provider"),
			 str(one, "type"), str(one, "program"),
			 str(one, "version"));
	}
}
