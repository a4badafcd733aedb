/*
 * The store's challenge-response: both sides prove they know the shared
 * token with HMAC-SHA256 over both nonces (OpenSSL's libcrypto), so the
 * token never crosses the wire and a recorded exchange cannot be replayed.
 */
#include "store/store.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <errno.h>
#include <pthread.h>
#include <sys/random.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

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

void store__crypto_init(void)
{
    pthread_once(&crypto_once, init_crypto);
}

/* Nonces and lease ids come from the kernel's CSPRNG (getrandom), which
 * needs no library state. */
int store__random_bytes(void *buf, size_t len)
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

void store__proof(const char *token, bool from_server, const uint8_t *client_nonce,
                  const uint8_t *server_nonce, uint8_t *proof)
{
    store__crypto_init();
    /* Distinct labels: a server's proof is never a valid client proof. */
    static const char server_label[] = "elastic-store/1 server";
    static const char client_label[] = "elastic-store/1 client";
    const char *label = from_server ? server_label : client_label;
    uint8_t message[sizeof server_label + 2 * STORE__NONCE_BYTES];
    size_t label_len = strlen(label);
    memcpy(message, label, label_len);
    memcpy(message + label_len, client_nonce, STORE__NONCE_BYTES);
    memcpy(message + label_len + STORE__NONCE_BYTES, server_nonce, STORE__NONCE_BYTES);
    unsigned int out_len = STORE__PROOF_BYTES;
    if (HMAC(EVP_sha256(), token, (int)strlen(token), message, label_len + 2 * STORE__NONCE_BYTES,
             proof, &out_len) == NULL)
        memset(proof, 0, STORE__PROOF_BYTES); /* never matches a real proof */
}

bool store__proof_matches(const uint8_t *expected, const uint8_t *received)
{
    return CRYPTO_memcmp(expected, received, STORE__PROOF_BYTES) == 0;
}

/* Reads a token file: its bytes, less one trailing newline ("\n" or "\r\n").
 * Never truncated: empty, longer than ELASTIC_STORE_TOKEN_MAX, or holding a
 * NUL byte is an error naming the file. */
int store__token_read_file(const char *path, char **token)
{
    *token = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return elastic__fail(elastic__from_errno(errno), "token file %s: %s", path,
                             strerror(errno));
    char *buf = malloc(ELASTIC_STORE_TOKEN_MAX + 3);
    size_t len = 0;
    ssize_t n = 1;
    while (buf != NULL && len < ELASTIC_STORE_TOKEN_MAX + 3 &&
           (n = read(fd, buf + len, ELASTIC_STORE_TOKEN_MAX + 3 - len)) > 0)
        len += (size_t)n;
    int saved = errno;
    close(fd);
    if (buf == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    int err = 0;
    if (n < 0)
        err = elastic__fail(elastic__from_errno(saved), "token file %s: %s", path, strerror(saved));
    if (err == 0 && len > 0 && buf[len - 1] == '\n') len--;
    if (err == 0 && len > 0 && buf[len - 1] == '\r') len--;
    if (err == 0 && len == 0) err = elastic__fail(ELASTIC_EINVAL, "token file %s is empty", path);
    if (err == 0 && len > ELASTIC_STORE_TOKEN_MAX)
        err = elastic__fail(ELASTIC_EINVAL, "token file %s: the token is longer than %d bytes",
                            path, ELASTIC_STORE_TOKEN_MAX);
    if (err == 0 && memchr(buf, '\0', len) != NULL)
        err = elastic__fail(ELASTIC_EINVAL, "token file %s holds a NUL byte", path);
    if (err == 0)
        buf[len] = '\0', *token = buf;
    else
        OPENSSL_cleanse(buf, ELASTIC_STORE_TOKEN_MAX + 3), free(buf);
    return err;
}

int store__token_resolve(const char *option, char **token)
{
    *token = NULL;
    if (option == NULL) {
        const char *file = getenv("ELASTIC_STORE_TOKEN_FILE");
        if (file != NULL && file[0] != '\0') return store__token_read_file(file, token);
    }
    const char *source = option != NULL ? option : getenv("ELASTIC_STORE_TOKEN");
    if (source == NULL || source[0] == '\0') return 0;
    if (strlen(source) > ELASTIC_STORE_TOKEN_MAX)
        return elastic__fail(ELASTIC_EINVAL, "store token longer than %d bytes (%s)",
                             ELASTIC_STORE_TOKEN_MAX,
                             option != NULL ? "opts.token" : "ELASTIC_STORE_TOKEN");
    *token = elastic__strdup(source);
    return *token != NULL ? 0 : ELASTIC_ENOMEM;
}

void store__token_free(char *token)
{
    if (token == NULL) return;
    OPENSSL_cleanse(token, strlen(token));
    free(token);
}
