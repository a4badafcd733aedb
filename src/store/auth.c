/*
 * The store's challenge-response: both sides prove they know the shared
 * token with HMAC-SHA256 over both nonces (OpenSSL's libcrypto), so the
 * token never crosses the wire and a recorded exchange cannot be replayed.
 */
#include "store/store.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdlib.h>

#define TOKEN_MAX_BYTES 4096

int store__random_bytes(void *buf, size_t len)
{
    if (RAND_bytes(buf, (int)len) != 1) return elastic__fail(ELASTIC_ESYS, "RAND_bytes failed");
    return 0;
}

void store__proof(const char *token, bool from_server, const uint8_t *client_nonce, const uint8_t *server_nonce,
                  uint8_t *proof)
{
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
    if (HMAC(EVP_sha256(), token, (int)strlen(token), message, label_len + 2 * STORE__NONCE_BYTES, proof,
             &out_len) == NULL)
        memset(proof, 0, STORE__PROOF_BYTES); /* never matches a real proof */
}

bool store__proof_matches(const uint8_t *expected, const uint8_t *received)
{
    return CRYPTO_memcmp(expected, received, STORE__PROOF_BYTES) == 0;
}

int store__token_resolve(const char *option, char **token)
{
    *token = NULL;
    const char *source = option != NULL ? option : getenv("ELASTIC_STORE_TOKEN");
    if (source == NULL || source[0] == '\0') return 0;
    if (strlen(source) > TOKEN_MAX_BYTES)
        return elastic__fail(ELASTIC_EINVAL, "store token longer than %d bytes", TOKEN_MAX_BYTES);
    *token = elastic__strdup(source);
    return *token != NULL ? 0 : ELASTIC_ENOMEM;
}

void store__token_free(char *token)
{
    if (token == NULL) return;
    OPENSSL_cleanse(token, strlen(token));
    free(token);
}
