/*
 * The HMAC proof that may run over a connection (conn.h): each side sends a
 * fresh nonce and proves it holds the shared key with
 *
 *   HMAC-SHA256(key, label || " server"|" client" || client nonce || server nonce)
 *
 * so the key never crosses the wire, a recorded exchange is useless against
 * the next one (the other side's nonce is new), a server's proof is never a
 * valid client proof, and a proof made under one label (the store's
 * "elastic-store/1", the replica channel's "elastic-replica/1") is never
 * valid under another. Proofs are compared in constant time. The framing
 * around the nonces and proofs is each protocol's own (docs/PROTOCOL.md,
 * src/replica/auth.c): this is the part they share.
 */
#ifndef ELASTIC_COMMON_CONN_PROOF_H
#define ELASTIC_COMMON_CONN_PROOF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELASTIC__NONCE_BYTES 32u
#define ELASTIC__PROOF_BYTES 32u
/* The longest label a proof takes. */
#define ELASTIC__PROOF_LABEL_MAX 48u

/* OpenSSL set up once, lazily, without its exit-time cleanup (see the .c). */
void elastic__crypto_init(void);

/* len bytes from the kernel's CSPRNG (nonces, lease ids, keys). */
int elastic__random_bytes(void *buf, size_t len);

/* The proof `from_server` (or the client) sends under label and key. A label
 * longer than ELASTIC__PROOF_LABEL_MAX, or a failing HMAC, gives bytes that
 * elastic__proof_check never accepts. */
void elastic__proof_make(const char *key, const char *label, bool from_server,
                         const uint8_t *client_nonce, const uint8_t *server_nonce,
                         uint8_t proof[ELASTIC__PROOF_BYTES]);

/* Whether `received` is the proof elastic__proof_make gives for the same
 * arguments; constant time in the proof's bytes. */
bool elastic__proof_check(const char *key, const char *label, bool from_server,
                          const uint8_t *client_nonce, const uint8_t *server_nonce,
                          const uint8_t *received);

#endif /* ELASTIC_COMMON_CONN_PROOF_H */
