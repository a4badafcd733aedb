/*
 * TLS 1.3 for store connections that have a token: an external pre-shared
 * key derived from the token (OpenSSL; no certificates), run over memory
 * BIOs so the server's libuv loop and the client's own socket code move the
 * bytes. After the handshake every frame is encrypted and authenticated by
 * TLS: a byte injected or changed on the path ends the connection.
 */
#include "store/tls.h"

#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>

#define PSK_BYTES 32
static const char psk_identity[] = "elastic-store/1";
static const unsigned char aes128gcm_sha256[] = { 0x13, 0x01 }; /* TLS_AES_128_GCM_SHA256 */

struct store__tls {
    SSL *ssl;
    BIO *rbio; /* bytes from the network, not yet decrypted */
    BIO *wbio; /* encrypted bytes for the network */
    unsigned char psk[PSK_BYTES];
};

static SSL_CTX *contexts[2]; /* [0] client, [1] server */
static pthread_once_t contexts_once = PTHREAD_ONCE_INIT;

/* The PSK for this token's session, matching the hash of the one suite. */
static SSL_SESSION *psk_session(SSL *ssl)
{
    store__tls *tls = SSL_get_app_data(ssl);
    const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes128gcm_sha256);
    SSL_SESSION *session = cipher != NULL ? SSL_SESSION_new() : NULL;
    if (session == NULL) return NULL;
    if (!SSL_SESSION_set1_master_key(session, tls->psk, PSK_BYTES) ||
        !SSL_SESSION_set_cipher(session, cipher) ||
        !SSL_SESSION_set_protocol_version(session, TLS1_3_VERSION)) {
        SSL_SESSION_free(session);
        return NULL;
    }
    return session;
}

static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *id_len,
                       SSL_SESSION **out)
{
    (void)md; /* one suite, SHA-256: the PSK always fits */
    *out = psk_session(ssl);
    *id = (const unsigned char *)psk_identity;
    *id_len = sizeof psk_identity - 1;
    return *out != NULL;
}

static int find_session(SSL *ssl, const unsigned char *id, size_t id_len, SSL_SESSION **out)
{
    *out = NULL;
    if (id_len != sizeof psk_identity - 1 || memcmp(id, psk_identity, id_len) != 0)
        return 1; /* unknown: fails */
    *out = psk_session(ssl);
    return *out != NULL;
}

static void make_contexts(void)
{
    for (int server = 0; server < 2; server++) {
        SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
        if (ctx == NULL) continue;
        if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
            !SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256")) {
            SSL_CTX_free(ctx);
            continue;
        }
        if (server) {
            SSL_CTX_set_psk_find_session_callback(ctx, find_session);
            SSL_CTX_set_num_tickets(ctx, 0); /* no resumption: every connection proves the PSK */
        } else {
            SSL_CTX_set_psk_use_session_callback(ctx, use_session);
        }
        contexts[server] = ctx;
    }
}

/* HKDF-Extract(salt = label, key material = token), i.e. one HMAC-SHA256. */
static bool derive_psk(const char *token, unsigned char *psk)
{
    static const char label[] = "elastic-store/1 tls psk";
    unsigned int len = PSK_BYTES;
    return HMAC(EVP_sha256(), label, (int)sizeof label - 1, (const unsigned char *)token,
                strlen(token), psk, &len) != NULL;
}

int store__tls_new(bool server, const char *token, store__tls **out)
{
    *out = NULL;
    store__crypto_init();
    pthread_once(&contexts_once, make_contexts);
    SSL_CTX *ctx = contexts[server];
    if (ctx == NULL)
        return elastic__fail(ELASTIC_ESYS, "TLS 1.3 with PSK is not available in this OpenSSL");
    store__tls *tls = calloc(1, sizeof *tls);
    if (tls == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    tls->ssl = SSL_new(ctx);
    tls->rbio = BIO_new(BIO_s_mem());
    tls->wbio = BIO_new(BIO_s_mem());
    if (tls->ssl == NULL || tls->rbio == NULL || tls->wbio == NULL ||
        !derive_psk(token, tls->psk)) {
        BIO_free(tls->rbio);
        BIO_free(tls->wbio);
        tls->rbio = tls->wbio = NULL;
        store__tls_free(tls);
        return elastic__fail(ELASTIC_ENOMEM, "cannot set up TLS");
    }
    BIO_set_mem_eof_return(tls->rbio, -1); /* empty means "wait for more", not end of stream */
    SSL_set_bio(tls->ssl, tls->rbio, tls->wbio);
    SSL_set_app_data(tls->ssl, tls);
    if (server)
        SSL_set_accept_state(tls->ssl);
    else
        SSL_set_connect_state(tls->ssl);
    *out = tls;
    return 0;
}

void store__tls_free(store__tls *tls)
{
    if (tls == NULL) return;
    if (tls->ssl != NULL) SSL_free(tls->ssl); /* frees both BIOs */
    OPENSSL_cleanse(tls->psk, sizeof tls->psk);
    free(tls);
}

/* Maps a failed SSL call: 0 when it only needs more input. */
static int failure(store__tls *tls, int rc, const char **why)
{
    int code = SSL_get_error(tls->ssl, rc);
    if (code == SSL_ERROR_WANT_READ) return 0;
    unsigned long detail = ERR_peek_last_error();
    ERR_clear_error();
    if (code == SSL_ERROR_ZERO_RETURN) {
        *why = "the peer closed the TLS session";
        return ELASTIC_ECONNECT;
    }
    *why = detail != 0 && ERR_GET_REASON(detail) == SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC
               ? "TLS record failed its integrity check (altered or injected on the path)"
               : "TLS failure (wrong token, or bytes altered on the path)";
    return ELASTIC_EAUTH;
}

int store__tls_handshake(store__tls *tls, const char **why)
{
    int rc = SSL_do_handshake(tls->ssl);
    if (rc == 1) return 1;
    return failure(tls, rc, why);
}

bool store__tls_feed(store__tls *tls, const void *data, size_t len)
{
    return BIO_write(tls->rbio, data, (int)len) == (int)len;
}

int store__tls_read(store__tls *tls, void *buf, size_t cap, size_t *got, const char **why)
{
    *got = 0;
    if (cap == 0) return 0;
    size_t n = 0;
    int rc = SSL_read_ex(tls->ssl, buf, cap, &n);
    if (rc == 1) {
        *got = n;
        return 0;
    }
    return failure(tls, 0, why);
}

bool store__tls_has_input(const store__tls *tls)
{
    return SSL_pending(tls->ssl) > 0 || BIO_ctrl_pending(tls->rbio) > 0;
}

size_t store__tls_input_bytes(const store__tls *tls)
{
    return BIO_ctrl_pending(tls->rbio);
}

int store__tls_write(store__tls *tls, const void *data, size_t len)
{
    size_t done = 0;
    if (len == 0) return 0;
    if (SSL_write_ex(tls->ssl, data, len, &done) != 1 || done != len) {
        ERR_clear_error();
        return elastic__fail(ELASTIC_ENOMEM, "TLS: cannot encrypt a frame");
    }
    return 0;
}

size_t store__tls_output_bytes(const store__tls *tls)
{
    return BIO_ctrl_pending(tls->wbio);
}

size_t store__tls_take_output(store__tls *tls, void *buf, size_t cap)
{
    int n = BIO_read(tls->wbio, buf, (int)(cap > INT32_MAX ? INT32_MAX : cap));
    return n > 0 ? (size_t)n : 0;
}
