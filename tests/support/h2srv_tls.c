/* SPDX-License-Identifier: MIT */
/* TLS for retryd-h2srv: a self-signed certificate made at startup, in
 * memory, and the server context with ALPN.
 *
 * Generating the certificate per run keeps key material out of the
 * repository and needs no openssl command line; the test gets the
 * certificate (never the key) as a PEM file through --cert-out and trusts
 * it with CURLOPT_CAINFO. It names both 127.0.0.1 (IP SAN) and localhost
 * (DNS SAN), so tests can use either URL. */
#include "h2srv.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CERT_DAYS 7

/* ALPN protocol lists in wire format (length-prefixed), in server
 * preference order; no length is 0, so strlen() gives theirs. Never
 * written: not const only because they reach select_alpn as its void *
 * argument. */
static unsigned char alpn_h2_first[] = "\x02h2\x08http/1.1";
static unsigned char alpn_http11[] = "\x08http/1.1";

static void tls_error(const char *what)
{
    fprintf(stderr, "h2srv: %s: ", what);
    ERR_print_errors_fp(stderr);
    fputc('\n', stderr);
}

/* Adds one X.509v3 extension written in openssl.cnf syntax. */
static int add_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *ext;
    int ok;

    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return -1;
    ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

/* A leaf certificate that signs itself: CA:FALSE with serverAuth, which
 * is what a real server certificate looks like. libcurl (OpenSSL) accepts
 * it as its own trust anchor when given as CAINFO. */
static X509 *make_cert(EVP_PKEY *key)
{
    X509 *x = X509_new();
    X509_NAME *name;
    uint64_t serial;

    if (!x || RAND_bytes((unsigned char *)&serial, sizeof serial) != 1)
        goto fail;
    serial >>= 1; /* positive, as RFC 5280 wants */
    name = X509_get_subject_name(x);
    if (!X509_set_version(x, X509_VERSION_3) ||
        !ASN1_INTEGER_set_uint64(X509_get_serialNumber(x), serial | 1) ||
        /* An hour of slack against clock differences, none of which
         * should exist on one machine but cost nothing. */
        !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), 86400L * CERT_DAYS) ||
        !X509_set_pubkey(x, key) ||
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                    (const unsigned char *)"localhost", -1, -1,
                                    0) ||
        !X509_set_issuer_name(x, name))
        goto fail;
    if (add_ext(x, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
        add_ext(x, NID_key_usage, "critical,digitalSignature") < 0 ||
        add_ext(x, NID_ext_key_usage, "serverAuth") < 0 ||
        add_ext(x, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(x, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1") < 0)
        goto fail;
    if (!X509_sign(x, key, EVP_sha256()))
        goto fail;
    return x;
fail:
    X509_free(x);
    return NULL;
}

/* Writes the certificate (public data only) for the client to trust:
 * to a temporary name first, then renamed, so a reader never sees half
 * a file. */
static int write_cert(X509 *x, const char *path)
{
    char tmp[4096];
    FILE *f;
    int ok;

    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return -ENAMETOOLONG;
    if (!(f = fopen(tmp, "w")))
        return -errno;
    ok = PEM_write_X509(f, x);
    if (fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        int e = ok ? errno : EIO;

        unlink(tmp);
        return -e;
    }
    return 0;
}

/* Picks the first protocol of `arg` (one of the lists above) that the
 * client offers: h2 unless the server runs --http11-only, else http/1.1.
 * No overlap: no ALPN at all, and the connection then speaks HTTP/1.1. */
static int select_alpn(SSL *ssl, const unsigned char **out,
                       unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg)
{
    const unsigned char *prefs = arg;
    unsigned int prefs_len = (unsigned int)strlen((const char *)prefs);
    unsigned char *sel;
    unsigned char sel_len;

    (void)ssl;
    if (SSL_select_next_proto(&sel, &sel_len, prefs, prefs_len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    *outlen = sel_len;
    return SSL_TLSEXT_ERR_OK;
}

/* Builds the server context: fresh P-256 key, self-signed certificate
 * written to cert_out (if not NULL), TLS >= 1.2 (RFC 9113 9.2), ALPN.
 * Returns NULL after printing why. */
SSL_CTX *h2_tls_context(const char *cert_out, bool http11_only)
{
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    X509 *cert = key ? make_cert(key) : NULL;
    SSL_CTX *ctx = NULL;
    int rc;

    if (!cert) {
        tls_error("cannot create the certificate");
        goto out;
    }
    if (cert_out && (rc = write_cert(cert, cert_out)) < 0) {
        fprintf(stderr, "h2srv: cannot write %s: %s\n", cert_out,
                strerror(-rc));
        goto out;
    }
    if (!(ctx = SSL_CTX_new(TLS_server_method())) ||
        !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        SSL_CTX_use_certificate(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        tls_error("cannot set up the TLS context");
        SSL_CTX_free(ctx);
        ctx = NULL;
        goto out;
    }
    /* Output is written from a buffer that may be compacted or grown
     * between a WANT_WRITE and the retry, and partial writes are fine. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn,
                               http11_only ? alpn_http11 : alpn_h2_first);
out:
    X509_free(cert);
    EVP_PKEY_free(key);
    return ctx;
}

void h2_tls_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}

bool h2_tls_alpn_is_h2(const struct h2_conn *c)
{
    const unsigned char *p = NULL;
    unsigned int len = 0;

    if (!c->ssl)
        return false;
    SSL_get0_alpn_selected(c->ssl, &p, &len);
    return len == 2 && memcmp(p, "h2", 2) == 0;
}
