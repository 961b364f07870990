/*
 * Run files in the store: every file baton keeps in a run folder
 * (artifacts, reports, agent transcripts, logs) goes into the store as
 * well through engine_keep_file, so that `baton show` and the API of any
 * host answer for a run another host drove. The run folder holds the
 * local copy; the store holds at most runtime.file_cap_kib of each file,
 * and for a larger one its first part with the whole file's size,
 * sha256, host and path.
 *
 * The run folder is written by agents too, and an agent is untrusted:
 * the file is opened with fs_open_nofollow (a link as the file or as its
 * folder is refused, and so is anything but a regular file), and a name
 * that is absolute or climbs ("..") is refused before anything is
 * opened. The content is data: stored and shown, never run or followed.
 */
#include "util/compat.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include "core/config.h"
#include "engine/engine.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

/* Whether name is a plain relative path inside the run folder. */
static int
name_is_safe(const char *name)
{
	const char *p = name;

	if (!*name || *name == '/')
		return 0;
	while (p) {
		if (!strncmp(p, "..", 2) && (p[2] == '/' || !p[2]))
			return 0;
		p = strchr(p, '/');
		if (p)
			p++;
	}
	return 1;
}

/*
 * Reads the whole of fd: the first cap bytes into content, the size and
 * the sha256 (hex) of everything. 0 or -errno.
 */
static int
read_capped(int fd, size_t cap, struct buf *content, int64_t *size,
	    char *hex)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0, i;
	char chunk[65536];
	int64_t total = 0;
	int rc = 0;

	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		if (content->len < cap)
			buf_add(content, chunk,
				cap - content->len < (size_t)n ?
					cap - content->len :
					(size_t)n);
		EVP_DigestUpdate(md, chunk, (size_t)n);
		total += n;
	}
	if (!EVP_DigestFinal_ex(md, digest, &dlen)) {
		rc = -EIO;
		goto out;
	}
	for (i = 0; i < dlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", digest[i]);
	*size = total;
out:
	EVP_MD_CTX_free(md);
	return rc;
}

/* This host's name, for the pointer to a file the store holds in part. */
static const char *
host_name(void)
{
	static char host[256];

	if (!host[0] && gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "localhost");
	return host;
}

int
engine_keep_file(struct engine *en, const char *run_id, const char *name,
		 struct err *e)
{
	char *dir = NULL, *path = NULL;
	struct store_file f = { 0 };
	struct buf content = BUF_INIT;
	struct err le = ERR_INIT;
	size_t cap = (size_t)en->cfg->runtime.file_cap_kib * 1024;
	char hex[2 * EVP_MAX_MD_SIZE + 1] = "";
	int fd = -1, rc;

	if (!name_is_safe(name)) {
		rc = err_set(&le, BATON_EINVAL,
			     "'%s' is not a file of the run folder", name);
		goto out;
	}
	dir = workspace_run_dir(en->ws, run_id);
	path = xasprintf("%s/%s", dir, name);
	fd = fs_open_nofollow(path, O_RDONLY, 0, &le);
	if (fd == -ENOENT) {
		rc = 0; /* nothing written (a call without stderr) */
		goto out;
	}
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	rc = read_capped(fd, cap, &content, &f.size, hex);
	if (rc) {
		err_set(&le, rc, "cannot read '%s': %s", path, strerror(-rc));
		goto out;
	}
	f.run_id = (char *)run_id;
	f.name = (char *)name;
	f.sha256 = hex;
	f.truncated = f.size > (int64_t)content.len;
	f.content = content.ptr;
	f.len = content.len;
	f.host = (char *)host_name();
	f.path = path;
	rc = store_file_put(en->store, &f, &le);
out:
	if (rc) {
		/* the run goes on: the run folder has the file */
		log_warn("run %s: file '%s' not kept in the store: %s", run_id,
			 name, le.msg);
		if (e)
			*e = le;
	}
	if (fd >= 0)
		close(fd);
	buf_release(&content);
	free(path);
	free(dir);
	return rc;
}

json_t *
engine_file_json(const struct store_file *f, int with_content)
{
	json_t *o = json_pack(
		"{s:s, s:I, s:I, s:s, s:b, s:s, s:s, s:I}", "name", f->name,
		"size", (json_int_t)f->size, "stored", (json_int_t)f->len,
		"sha256", f->sha256 ? f->sha256 : "", "truncated",
		f->truncated, "host", f->host ? f->host : "", "path",
		f->path ? f->path : "", "updated_at",
		(json_int_t)f->updated_at);

	if (with_content)
		json_object_set_new(o, "content",
				    json_lossy(f->content ? f->content : "",
					       f->len));
	return o;
}
