/*
 * libcrypto on first use (util/lazy.h): SHA-256 for receipts, HMAC-SHA256
 * for webhook signatures (sent and received), and the check that serve's
 * TLS certificate and key are PEM and belong together. Each function below is
 * defined with the prototype of the OpenSSL headers, so one that differs
 * does not compile.
 */
#include "util/compat.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "util/lazy.h"

#define CRYPTO_FUNCTIONS(X, V, H)                                              \
	X(const EVP_MD *, EVP_sha256, (void), ())                           \
	X(const EVP_MD *, EVP_sha1, (void), ())                             \
	X(int, EVP_EncodeBlock,                                             \
	  (unsigned char *t, const unsigned char *f, int n), (t, f, n))     \
	X(int, EVP_Digest,                                                  \
	  (const void *d, size_t n, unsigned char *md, unsigned int *len,  \
	   const EVP_MD *t, ENGINE *impl),                                  \
	  (d, n, md, len, t, impl))                                         \
	X(EVP_MD_CTX *, EVP_MD_CTX_new, (void), ())                         \
	V(EVP_MD_CTX_free, (EVP_MD_CTX * c), (c))                           \
	X(int, EVP_DigestInit_ex,                                           \
	  (EVP_MD_CTX * c, const EVP_MD *t, ENGINE *impl), (c, t, impl))    \
	X(int, EVP_DigestUpdate, (EVP_MD_CTX * c, const void *d, size_t n), \
	  (c, d, n))                                                        \
	X(int, EVP_DigestFinal_ex,                                          \
	  (EVP_MD_CTX * c, unsigned char *md, unsigned int *len),           \
	  (c, md, len))                                                     \
	X(unsigned char *, HMAC,                                            \
	  (const EVP_MD *t, const void *k, int kl, const unsigned char *d,  \
	   size_t n, unsigned char *md, unsigned int *len),                 \
	  (t, k, kl, d, n, md, len))                                        \
	X(int, CRYPTO_memcmp, (const void *a, const void *b, size_t n),     \
	  (a, b, n))                                                        \
	X(BIO *, BIO_new_mem_buf, (const void *b, int n), (b, n))           \
	X(int, BIO_free, (BIO * b), (b))                                    \
	X(X509 *, PEM_read_bio_X509,                                        \
	  (BIO * b, X509 **x, pem_password_cb *cb, void *u), (b, x, cb, u)) \
	X(EVP_PKEY *, PEM_read_bio_PrivateKey,                              \
	  (BIO * b, EVP_PKEY **x, pem_password_cb *cb, void *u),            \
	  (b, x, cb, u))                                                    \
	X(int, X509_check_private_key, (const X509 *x, const EVP_PKEY *k),  \
	  (x, k))                                                           \
	V(X509_free, (X509 * x), (x))                                       \
	V(EVP_PKEY_free, (EVP_PKEY * k), (k))

LAZY_LIBRARY(CRYPTO_FUNCTIONS, "libcrypto.so.3", "hashing (SHA-256, SHA-1)")

int
lazy_crypto_load(struct err *e)
{
	return lazy_load(&lib, e);
}
