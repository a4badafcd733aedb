/*
 * Internal interface of the store module shared by its server and client
 * halves: authentication helpers and endpoint parsing. The server's and the
 * client's own structures live in server.h and client.h.
 */
#ifndef ELASTIC_STORE_INTERNAL_H
#define ELASTIC_STORE_INTERNAL_H

#include "common/common.h"
#include "common/conn_proof.h"
#include "store/protocol.h"

#include <stdio.h>

/* ---- authentication (auth.c) --------------------------------------------- */

/* The store's label for the HMAC proof of common/conn_proof.h. */
#define STORE__PROOF_LABEL "elastic-store/1"
/* Initialises libcrypto once (common/conn_proof.c); the etcd client calls
 * it before libcurl's OpenSSL. */
static inline void store__crypto_init(void)
{
    elastic__crypto_init();
}
/* The option, else the file named by ELASTIC_STORE_TOKEN_FILE, else
 * ELASTIC_STORE_TOKEN, else none (*token NULL). Never truncated: a token over
 * ELASTIC_STORE_TOKEN_MAX bytes is ELASTIC_EINVAL. */
int store__token_resolve(const char *option, char **token);
/* A token file's content less one trailing newline (see auth.c). */
int store__token_read_file(const char *path, char **token);
/* Wipes and frees a token. */
void store__token_free(char *token);

/* ---- lease liveness (client_ops.c) ------------------------------------------ */

/* One keep-alive round trip for `lease`, answered within timeout_ms: 0 alive,
 * ELASTIC_ENOTFOUND when it ended, ELASTIC_ETIMEDOUT without an answer,
 * ELASTIC_ECONNECT when the store cannot be reached (its connection and one
 * reconnect failed). Fencing (src/rdzv/guard.c) is built on it. */
int store__lease_check(elastic_store *s, uint64_t lease, int timeout_ms);

/* ---- waits an ended generation cuts short (client_handle.c) ------------------ */

/* A clone of `store` (same connection, same prefix) for waits on the peers
 * of `generation` (> 0): once that generation's end is announced on the
 * connection, its calls in flight and any later one fail at once with
 * ELASTIC_ECANCELED. A store-mode checkpoint commit waits on one
 * (src/ckpt/commit_store.c), so a peer that died does not hold it for
 * commit_timeout_ms. Close it with elastic_store_close. */
int store__clone_for_generation(elastic_store *store, uint64_t generation, elastic_store **out);
/* `generation` and every older one ended, on the connection `store` (or any
 * of its clones) uses: the worker's control thread says so when the agent
 * aborts it (in-process recovery, src/worker/control_client.c). */
void store__generation_ended(elastic_store *store, uint64_t generation);

#endif /* ELASTIC_STORE_INTERNAL_H */
