/* See conn_proof.h. */
#include "common/conn_proof.h"

#include "common/common.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

/* The store's threads (server loop, client reader and ticker) may still be
 * hashing when the process exits: an agent leaving with a rendezvous in
 * flight returns from main without joining them. libcrypto's default atexit
 * cleanup would free its locks under those threads (ThreadSanitizer caught
 * it in make tsan); the memory goes with the process anyway, so libcrypto is
 * told to skip that cleanup. Once, before any OpenSSL call of ours (a host
 * that initialised OpenSSL first keeps its own): lazily, not at load, so a
 * process that never uses a token or etcd never touches libcrypto (its
 * initialisation alone is 3.5 MB of an agent's resident memory). */
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;

static void init_crypto(void)
{
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}

void elastic__crypto_init(void)
{
    pthread_once(&crypto_once, init_crypto);
}

/* getrandom needs no library state. */
int elastic__random_bytes(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return elastic__fail(ELASTIC_ESYS, "getrandom: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The HMAC, or false (label too long, HMAC failed). */
static bool compute(const char *key, const char *label, bool from_server,
                    const uint8_t *client_nonce, const uint8_t *server_nonce, uint8_t *out)
{
    size_t label_len = strlen(label);
    const char *side = from_server ? " server" : " client";
    uint8_t message[ELASTIC__PROOF_LABEL_MAX + 7 + 2 * ELASTIC__NONCE_BYTES];
    if (label_len > ELASTIC__PROOF_LABEL_MAX) return false;
    memcpy(message, label, label_len);
    memcpy(message + label_len, side, 7);
    memcpy(message + label_len + 7, client_nonce, ELASTIC__NONCE_BYTES);
    memcpy(message + label_len + 7 + ELASTIC__NONCE_BYTES, server_nonce, ELASTIC__NONCE_BYTES);
    elastic__crypto_init();
    unsigned int out_len = ELASTIC__PROOF_BYTES;
    return HMAC(EVP_sha256(), key, (int)strlen(key), message,
                label_len + 7 + 2 * ELASTIC__NONCE_BYTES, out, &out_len) != NULL;
}

void elastic__proof_make(const char *key, const char *label, bool from_server,
                         const uint8_t *client_nonce, const uint8_t *server_nonce,
                         uint8_t proof[ELASTIC__PROOF_BYTES])
{
    if (!compute(key, label, from_server, client_nonce, server_nonce, proof))
        memset(proof, 0xff, ELASTIC__PROOF_BYTES); /* checked against, it never matches */
}

bool elastic__proof_check(const char *key, const char *label, bool from_server,
                          const uint8_t *client_nonce, const uint8_t *server_nonce,
                          const uint8_t *received)
{
    uint8_t expected[ELASTIC__PROOF_BYTES];
    bool made = compute(key, label, from_server, client_nonce, server_nonce, expected);
    bool same = CRYPTO_memcmp(expected, received, ELASTIC__PROOF_BYTES) == 0;
    OPENSSL_cleanse(expected, sizeof expected);
    return made && same;
}
