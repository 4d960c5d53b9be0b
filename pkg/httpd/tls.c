/* SPDX-License-Identifier: Apache-2.0 */
/* httpd/tls: OpenSSL server contexts (TLS 1.2 and 1.3 only), the in-memory
 * self-signed fallback certificate, client CA stores and the file identity
 * checks behind certificate reloading.
 *
 * Contexts are reference-counted by OpenSSL: a connection keeps the context
 * it was accepted with, so replacing the server's context on reload affects
 * only new connections. Errors from the OpenSSL queue are turned into one
 * log line here, at the module boundary. */
#include "httpd-int.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <string.h>

void tls_errors(char *out, size_t len)
{
    size_t used = 0;
    unsigned long e;
    out[0] = '\0';
    while ((e = ERR_get_error()) != 0) {
        char one[256];
        ERR_error_string_n(e, one, sizeof(one));
        if (used + 3 < len) {
            int n = snprintf(out + used, len - used, "%s%s", used ? "; " : "", one);
            if (n > 0)
                used += (size_t)n;
            if (used >= len)
                used = len - 1;
        }
    }
    if (!out[0])
        snprintf(out, len, "unknown TLS error");
}

/* A P-256 key and a one-year certificate for CN=gpuscaler with
 * SAN localhost, 127.0.0.1 and ::1. */
static int self_signed(X509 **xout, EVP_PKEY **kout)
{
    int rc = -EPROTO;
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_EXTENSION *ext = NULL;
    if (!pkey || !x)
        goto out;
    unsigned char serial[16];
    if (RAND_bytes(serial, sizeof(serial)) != 1)
        goto out;
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    if (!bn)
        goto out;
    ASN1_INTEGER *sn = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    if (!sn)
        goto out;
    X509_set_version(x, 2);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 365L * 86400);
    X509_set_pubkey(x, pkey);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"gpuscaler", -1,
                               -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name,
                              "DNS:localhost,IP:127.0.0.1,IP:::1");
    if (!ext || !X509_add_ext(x, ext, -1))
        goto out;
    if (!X509_sign(x, pkey, EVP_sha256()))
        goto out;
    *xout = x;
    *kout = pkey;
    x = NULL;
    pkey = NULL;
    rc = 0;
out:
    X509_EXTENSION_free(ext);
    X509_free(x);
    EVP_PKEY_free(pkey);
    return rc;
}

SSL_CTX *tls_ctx_new(const char *subsys, const char *cert_file, const char *key_file)
{
    char err[512];
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        goto fail;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET);
    /* Sessions are not resumed: client-certificate decisions must follow the
     * CA in force when the connection is made. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 0);
    if (SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL") != 1)
        goto fail;
    if (cert_file || key_file) {
        if (!cert_file || !key_file) {
            LOG_ERROR(subsys, "TLS needs both a certificate and a key file");
            SSL_CTX_free(ctx);
            return NULL;
        }
        if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1)
            goto fail;
    } else {
        if (self_signed(&x, &k) != 0)
            goto fail;
        if (SSL_CTX_use_certificate(ctx, x) != 1 || SSL_CTX_use_PrivateKey(ctx, k) != 1)
            goto fail;
        X509_free(x);
        EVP_PKEY_free(k);
    }
    return ctx;
fail:
    tls_errors(err, sizeof(err));
    LOG_ERROR(subsys, "TLS setup failed (cert=%s key=%s): %s", cert_file ? cert_file : "-",
              key_file ? key_file : "-", err);
    X509_free(x);
    EVP_PKEY_free(k);
    SSL_CTX_free(ctx);
    return NULL;
}

X509_STORE *tls_store_from_pem(const char *pem, size_t len)
{
    if (!pem || len == 0 || len > INT32_MAX)
        return NULL;
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    X509_STORE *st = X509_STORE_new();
    int count = 0;
    if (!bio || !st)
        goto out;
    X509 *x;
    while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        if (X509_STORE_add_cert(st, x) == 1)
            count++;
        X509_free(x);
    }
out:
    ERR_clear_error(); /* the loop always ends on a "no start line" */
    BIO_free(bio);
    /* every certificate of the bundle is an anchor, as Go's x509 Verify
     * treats every certificate of Roots: a bundle may hold an intermediate
     * CA whose root is kept offline */
    if (count > 0 && X509_STORE_set_flags(st, X509_V_FLAG_PARTIAL_CHAIN) != 1)
        count = 0;
    if (count == 0) {
        X509_STORE_free(st);
        return NULL;
    }
    return st;
}

int tls_verify_cb(int ok, X509_STORE_CTX *xctx)
{
    SSL *ssl = X509_STORE_CTX_get_ex_data(xctx, SSL_get_ex_data_X509_STORE_CTX_idx());
    struct conn *c = ssl ? SSL_get_app_data(ssl) : NULL;
    if (!ok && c)
        c->verify_failed = true;
    return 1; /* never fail the handshake: the handler decides */
}

void tls_file_id(const char *path, struct file_id *out)
{
    struct stat st;
    memset(out, 0, sizeof(*out));
    if (!path || stat(path, &st) != 0)
        return;
    out->exists = true;
    out->dev = st.st_dev;
    out->ino = st.st_ino;
    out->size = st.st_size;
    out->mtime = st.st_mtim;
}

bool tls_file_id_eq(const struct file_id *a, const struct file_id *b)
{
    return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}
