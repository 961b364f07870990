/*
 * Secret redaction: see redact.h. The secrets are few and short, so a
 * plain scan per secret is fast enough for everything baton records.
 */
#include "util/compat.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/redact.h"
#include "util/strvec.h"
#include "util/xalloc.h"

/* Shorter values are too likely to be ordinary words ("true", "1"). */
#define MIN_SECRET 8
#define CHUNK	   (1024 * 1024)

static struct strvec values = STRVEC_INIT; /* the secrets */
static struct strvec names = STRVEC_INIT;  /* their variables, same order */
static size_t longest;

static int
secret_name(const char *name, size_t len, const char *const *extra)
{
	static const char *const words[] = {
		"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL",
		"AUTH",
	};
	char up[256];
	size_t i;

	if (len >= sizeof(up))
		return 0;
	for (i = 0; i < len; i++)
		up[i] = (char)toupper((unsigned char)name[i]);
	up[len] = '\0';
	for (i = 0; extra && extra[i]; i++)
		if (!strcasecmp(extra[i], up))
			return 1;
	for (i = 0; i < ARRAY_SIZE(words); i++)
		if (strstr(up, words[i]))
			return 1;
	return 0;
}

void
redact_init(char *const *envp, const char *const *extra)
{
	size_t i, j;

	redact_reset();
	for (i = 0; envp && envp[i]; i++) {
		const char *eq = strchr(envp[i], '=');
		int dup = 0;

		if (!eq || strlen(eq + 1) < MIN_SECRET || eq[1] == '/' ||
		    !secret_name(envp[i], (size_t)(eq - envp[i]), extra))
			continue;
		for (j = 0; j < values.nr; j++)
			dup |= !strcmp(values.v[j], eq + 1);
		if (dup)
			continue;
		strvec_push(&values, eq + 1);
		strvec_pushf(&names, "%.*s", (int)(eq - envp[i]), envp[i]);
		if (strlen(eq + 1) > longest)
			longest = strlen(eq + 1);
	}
}

void
redact_reset(void)
{
	strvec_clear(&values);
	strvec_clear(&names);
	longest = 0;
}

size_t
redact_count(void)
{
	return values.nr;
}

size_t
redact_buf(struct buf *b)
{
	struct buf out = BUF_INIT;
	size_t i, count = 0;

	for (i = 0; i < values.nr && b->len; i++) {
		const char *v = values.v[i], *p = b->ptr, *hit;
		size_t vlen = strlen(v);

		if (!memmem(b->ptr, b->len, v, vlen))
			continue;
		buf_reset(&out);
		while ((hit = memmem(p, b->len - (size_t)(p - b->ptr), v,
				     vlen))) {
			buf_add(&out, p, (size_t)(hit - p));
			buf_addf(&out, "[redacted:%s]", names.v[i]);
			p = hit + vlen;
			count++;
		}
		buf_add(&out, p, b->len - (size_t)(p - b->ptr));
		buf_reset(b);
		buf_add(b, out.ptr, out.len);
	}
	buf_release(&out);
	return count;
}

/* 1 when v can stand inside a quoted JSON or YAML string as it is. */
static int
plain_value(const char *v)
{
	for (; *v; v++)
		if (*v == '"' || *v == '\\' || (unsigned char)*v < 0x20 ||
		    *v == 0x7f)
			return 0;
	return 1;
}

size_t
redact_restore(struct buf *b)
{
	struct buf out = BUF_INIT, mark = BUF_INIT;
	size_t i, count = 0;

	for (i = 0; i < names.nr && b->len; i++) {
		const char *p = b->ptr, *hit;

		buf_reset(&mark);
		buf_addf(&mark, "[redacted:%s]", names.v[i]);
		if (!plain_value(values.v[i]) ||
		    !memmem(b->ptr, b->len, mark.ptr, mark.len))
			continue;
		buf_reset(&out);
		while ((hit = memmem(p, b->len - (size_t)(p - b->ptr),
				     mark.ptr, mark.len))) {
			buf_add(&out, p, (size_t)(hit - p));
			buf_adds(&out, values.v[i]);
			p = hit + mark.len;
			count++;
		}
		buf_add(&out, p, b->len - (size_t)(p - b->ptr));
		buf_reset(b);
		buf_add(b, out.ptr, out.len);
	}
	buf_release(&out);
	buf_release(&mark);
	return count;
}

/*
 * Streams path through redact_buf into a temporary file, keeping the
 * last longest-1 bytes of each chunk back so that a secret split across
 * two reads is still found.
 */
int
redact_file(const char *path, struct err *e)
{
	struct buf carry = BUF_INIT;
	struct err oe = ERR_INIT;
	char *tmp, chunk[64 * 1024];
	int in, out, rc = 0;
	size_t count = 0, keep;
	ssize_t n;

	if (!values.nr)
		return 0;
	/*
	 * The file is in the run folder, which the agent can write: a link
	 * planted in its place would have us copy, say, ~/.ssh/id_rsa into
	 * a file the agent reads. Links are refused, not followed.
	 */
	in = fs_open_nofollow(path, O_RDONLY, 0, &oe);
	if (in < 0) {
		if (in != -ENOENT && e)
			*e = oe;
		return in == -ENOENT ? 0 : in;
	}
	tmp = xasprintf("%s.redact.XXXXXX", path);
	out = mkostemp(tmp, O_CLOEXEC | O_NOFOLLOW);
	if (out >= 0 && fchmod(out, 0644) < 0) {
		close(out);
		out = -1;
	}
	if (out < 0) {
		rc = err_set(e, -errno, "cannot create '%s': %s", tmp,
			     strerror(errno));
		goto out;
	}
	for (;;) {
		n = read(in, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = err_set(e, -errno, "cannot read '%s': %s", path,
				     strerror(errno));
			goto out;
		}
		buf_add(&carry, chunk, (size_t)n);
		if (n && carry.len < CHUNK)
			continue;
		count += redact_buf(&carry);
		keep = n && carry.len >= longest ? longest - 1 : 0;
		rc = fs_write_all(out, carry.ptr, carry.len - keep);
		if (rc) {
			err_set(e, rc, "cannot write '%s': %s", tmp,
				strerror(-rc));
			goto out;
		}
		memmove(carry.ptr, carry.ptr + carry.len - keep, keep);
		buf_setlen(&carry, keep);
		if (!n)
			break;
	}
	if (count && rename(tmp, path) < 0)
		rc = err_set(e, -errno, "cannot replace '%s': %s", path,
			     strerror(errno));
out:
	if (out >= 0)
		close(out);
	close(in);
	if (rc || !count)
		unlink(tmp);
	free(tmp);
	buf_release(&carry);
	return rc;
}

int
redact_dir(const char *dir, struct err *e)
{
	struct dirent *de;
	struct stat st;
	DIR *dp;
	int rc = 0;

	if (!values.nr || !(dp = opendir(dir)))
		return 0;
	while (!rc && (de = readdir(dp))) {
		char *path;

		if (de->d_name[0] == '.')
			continue;
		path = xasprintf("%s/%s", dir, de->d_name);
		/* Regular files only: a planted link must not stop the rest. */
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
			rc = redact_file(path, e);
		free(path);
	}
	closedir(dp);
	return rc;
}
