// OpenSSL 3.0: libcrypto's message digests through the EVP interface (SHA-256 and MD5 of downloads), and
// libssl's TLS for the http service's listeners, with its error queue. Debian: libssl-dev.
#ifndef NETLIFE_COPENSSL_SHIM_H
#define NETLIFE_COPENSSL_SHIM_H

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/err.h>

// A server context's settings. The protocol range and the modes are macros over SSL_CTX_ctrl, and the
// options are built with macros Swift does not import. Returns 1, or 0 with OpenSSL's error queue set.
//   TLS 1.2 and 1.3 only.
//   No renegotiation (a client could make the server do a handshake's work again and again), no compression.
//   A peer that closes without close_notify ends its input (SSL_ERROR_ZERO_RETURN), as a plain socket's EOF:
//     HTTP/1.1 frames its messages itself, and clients commonly close that way.
//   Partial writes: SSL_write returns after each record it wrote, so a slice is never held half-sent in
//     OpenSSL; a write refused by a full socket is retried with the same bytes, wherever the buffer now is.
//   Release buffers: an idle connection holds no read or write buffer of OpenSSL's.
static inline int netlife_ssl_ctx_configure_server(SSL_CTX *ctx) {
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return 0;
    if (SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1) return 0;
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

#endif
