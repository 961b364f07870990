/*
 * serve's TLS certificate and key (server.tls, docs/security.md "TLS"):
 * read, checked and handed to libmicrohttpd, which speaks HTTPS through
 * GnuTLS (MHD_USE_TLS). Every failure names the file: missing,
 * unreadable, not PEM, an encrypted key, a key that is not the
 * certificate's. A key others may read is warned about.
 *
 * A file under the repository's top is read without following a
 * symbolic link (fs_read_nofollow): agents write in there, and one could
 * plant a link where the operator's key was. Outside it the files are
 * the operator's own, and links are followed (Let's Encrypt's live/
 * names are links).
 */
#include "util/compat.h"

#include <limits.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/config.h"
#include "server/server.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/lazy.h"
#include "util/term.h"
#include "util/xalloc.h"
#include "workspace/workspace.h"

#define PEM_MAX (1 << 20)

/* No passphrase prompt: an encrypted key is refused, never asked for. */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* Whether path (absolute) is under dir. */
static int
under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

/* Reads one PEM file of server.tls (key: server.tls.key) into out. */
static int
read_pem(const struct workspace *ws, const char *key, const char *given,
	 struct buf *out, char **where, struct err *e)
{
	char *path = given[0] == '/' ? xstrdup(given)
				     : xasprintf("%s/%s", ws->repo, given);
	char real[PATH_MAX];
	struct err re = ERR_INIT;
	struct stat st;
	int inside, rc;

	*where = path;
	/* where the path leads (or its own name when it leads nowhere) */
	inside = under(realpath(path, real) ? real : path, ws->repo) ||
		 under(path, ws->repo);
	rc = inside ? fs_read_nofollow(path, out, PEM_MAX, &re)
		    : fs_read(path, out, PEM_MAX, &re);
	if (rc == -ENOENT)
		return err_set(e, rc, "%s: '%s' does not exist", key, path);
	if (rc)
		return err_set(e, rc, "%s: cannot read '%s': %s", key, path,
			       re.msg);
	if (!strcmp(key, "server.tls.key") && !stat(path, &st) &&
	    (st.st_mode & S_IROTH))
		term_printf(stderr,
			    "serve: warning: the TLS key '%s' is readable by "
			    "every user of this machine (mode %04o): chmod "
			    "600 it\n",
			    path, (unsigned)(st.st_mode & 07777));
	return 0;
}

int
server_tls_load(const struct workspace *ws, const struct config *cfg,
		char **cert_pem, char **key_pem, struct err *e)
{
	struct buf cb = BUF_INIT, kb = BUF_INIT;
	char *cpath = NULL, *kpath = NULL;
	X509 *x = NULL;
	EVP_PKEY *k = NULL;
	BIO *bio;
	int rc;

	*cert_pem = *key_pem = NULL;
	rc = lazy_crypto_load(e);
	if (!rc)
		rc = read_pem(ws, "server.tls.cert", cfg->server.tls_cert, &cb,
			      &cpath, e);
	if (!rc)
		rc = read_pem(ws, "server.tls.key", cfg->server.tls_key, &kb,
			      &kpath, e);
	if (rc)
		goto out;
	bio = BIO_new_mem_buf(cb.ptr, (int)cb.len);
	x = bio ? PEM_read_bio_X509(bio, NULL, no_passphrase, NULL) : NULL;
	BIO_free(bio);
	if (!x) {
		rc = err_set(e, BATON_EINVAL,
			     "server.tls.cert: '%s' holds no PEM certificate "
			     "(-----BEGIN CERTIFICATE-----)",
			     cpath);
		goto out;
	}
	bio = BIO_new_mem_buf(kb.ptr, (int)kb.len);
	k = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL)
		: NULL;
	BIO_free(bio);
	if (!k) {
		rc = err_set(e, BATON_EINVAL,
			     "server.tls.key: '%s' holds no PEM private key "
			     "(or one encrypted with a passphrase, which "
			     "serve cannot ask for)",
			     kpath);
		goto out;
	}
	if (X509_check_private_key(x, k) != 1) {
		rc = err_set(e, BATON_EINVAL,
			     "server.tls: the key '%s' is not the key of the "
			     "certificate '%s'",
			     kpath, cpath);
		goto out;
	}
	*cert_pem = buf_detach(&cb, NULL);
	*key_pem = buf_detach(&kb, NULL);
out:
	X509_free(x);
	EVP_PKEY_free(k);
	buf_release(&cb);
	buf_release(&kb);
	free(cpath);
	free(kpath);
	return rc;
}
