// OpenSSL 3.0: libcrypto's message digests through the EVP interface (SHA-256 and MD5 of downloads), and
// libssl's TLS for the http service's listeners, with its error queue. Debian: libssl-dev.
#ifndef NETLIFE_COPENSSL_SHIM_H
#define NETLIFE_COPENSSL_SHIM_H

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <string.h>

// A server context's settings. The protocol range and the modes are macros over SSL_CTX_ctrl, and the
// options are built with macros Swift does not import. Returns 1, or 0 with OpenSSL's error queue set.
//   TLS 1.2 and 1.3 only.
//   No renegotiation (a client could make the server do a handshake's work again and again), no compression.
//   A peer that closes without close_notify ends its input (SSL_ERROR_ZERO_RETURN), as a plain socket's EOF:
//     HTTP/1.1 frames its messages itself, and clients commonly close that way.
//   Partial writes: SSL_write returns after each record it wrote, so a slice is never held half-sent in
//     OpenSSL; a write refused by a full socket is retried with the same bytes, wherever the buffer now is.
//   Release buffers: an idle connection holds no read or write buffer of OpenSSL's.
//   TLS 1.2 suites and key-exchange groups as Mozilla's "intermediate" profile (version 5.7) lists them: AEAD
//     suites with forward secrecy only (no CBC, no static RSA), groups X25519, P-256 and P-384 (OpenSSL's
//     defaults add X448, P-521 and CBC suites, which sslyze reports). TLS 1.3's suites are OpenSSL's, all AEAD.
static inline int netlife_ssl_ctx_configure_server(SSL_CTX *ctx) {
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return 0;
    if (SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1) return 0;
    if (SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                     "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                     "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
                                     "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305") != 1) return 0;
    if (SSL_CTX_set1_groups_list(ctx, "X25519:prime256v1:secp384r1") != 1) return 0;
    SSL_CTX_set_dh_auto(ctx, 1);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF
                             | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER
                          | SSL_MODE_RELEASE_BUFFERS);
    return 1;
}

// ALPN: the server speaks http/1.1 only. A client that offers it gets it; one that offers only other
// protocols gets no ALPN answer and may go on or give up (RFC 7301 allows either).
static const unsigned char netlife_alpn_http11[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };

static inline int netlife_alpn_select_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                             const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl; (void)arg;
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, outlen, netlife_alpn_http11, sizeof netlife_alpn_http11, in, inlen)
        != OPENSSL_NPN_NEGOTIATED) return SSL_TLSEXT_ERR_NOACK;
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
}

static inline void netlife_ssl_ctx_select_http11(SSL_CTX *ctx) {
    SSL_CTX_set_alpn_select_cb(ctx, netlife_alpn_select_http11, NULL);
}

// A pass-phrase callback that gives none: OpenSSL asks for one when a key is encrypted, and its default
// prompts on the terminal (and blocks the caller until someone types). Returning 0 makes the read fail.
static inline int netlife_refuse_passphrase(char *buf, int size, int rwflag, void *userdata) {
    (void)buf; (void)size; (void)rwflag; (void)userdata;
    return 0;
}

// Whether PEM text holds an encrypted private key (PKCS#8 "ENCRYPTED PRIVATE KEY", or a traditional key with
// a "Proc-Type: 4,ENCRYPTED" header).
static inline int netlife_pem_is_encrypted_key(const char *data, size_t length) {
    static const char *markers[] = { "-----BEGIN ENCRYPTED PRIVATE KEY-----", "Proc-Type: 4,ENCRYPTED" };
    for (size_t m = 0; m < 2; m++) {
        size_t n = strlen(markers[m]);
        for (size_t i = 0; i + n <= length; i++) {
            if (memcmp(data + i, markers[m], n) == 0) return 1;
        }
    }
    return 0;
}

// SSL_CTX_use_certificate_chain_file, from PEM text already read (the file is read by the caller, without
// blocking and within a bound): the first certificate is the server's, the rest its chain. Returns 1, or 0
// with OpenSSL's error queue set. Never prompts.
static inline int netlife_ssl_ctx_use_chain_pem(SSL_CTX *ctx, const void *data, int length) {
    SSL_CTX_set_default_passwd_cb(ctx, netlife_refuse_passphrase);
    BIO *bio = BIO_new_mem_buf(data, length);
    if (bio == NULL) return 0;
    X509 *leaf = PEM_read_bio_X509_AUX(bio, NULL, netlife_refuse_passphrase, NULL);
    int ok = leaf != NULL && SSL_CTX_use_certificate(ctx, leaf) == 1 && SSL_CTX_clear_chain_certs(ctx) == 1;
    X509_free(leaf);
    while (ok) {
        X509 *next = PEM_read_bio_X509(bio, NULL, netlife_refuse_passphrase, NULL);
        if (next == NULL) {
            // The end of the text: the queue holds PEM_R_NO_START_LINE, which is no error here.
            unsigned long error = ERR_peek_last_error();
            if (ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE) ERR_clear_error();
            else ok = 0;
            break;
        }
        if (SSL_CTX_add0_chain_cert(ctx, next) != 1) { X509_free(next); ok = 0; }
    }
    BIO_free(bio);
    return ok;
}

// SSL_CTX_use_PrivateKey_file for PEM text already read. Returns 1, or 0 with OpenSSL's error queue set.
// Never prompts: an encrypted key fails.
static inline int netlife_ssl_ctx_use_key_pem(SSL_CTX *ctx, const void *data, int length) {
    BIO *bio = BIO_new_mem_buf(data, length);
    if (bio == NULL) return 0;
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, netlife_refuse_passphrase, NULL);
    BIO_free(bio);
    if (key == NULL) return 0;
    int ok = SSL_CTX_use_PrivateKey(ctx, key);
    EVP_PKEY_free(key);
    return ok;
}

#endif
