/* The HMAC proof layer (common/conn_proof.h) the store's and the replica
 * channel's handshakes share. */
#include "test.h"
#include "common/conn_proof.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#define STORE_LABEL   "elastic-store/1"
#define REPLICA_LABEL "elastic-replica/1"

typedef struct transcript {
    uint8_t client_nonce[ELASTIC__NONCE_BYTES];
    uint8_t server_nonce[ELASTIC__NONCE_BYTES];
    uint8_t server_proof[ELASTIC__PROOF_BYTES];
    uint8_t client_proof[ELASTIC__PROOF_BYTES];
} transcript;

/* One exchange as the wire carries it: fresh nonces, both proofs. */
static void exchange(const char *key, const char *label, transcript *t)
{
    ASSERT_OK(elastic__random_bytes(t->client_nonce, sizeof t->client_nonce));
    ASSERT_OK(elastic__random_bytes(t->server_nonce, sizeof t->server_nonce));
    elastic__proof_make(key, label, true, t->client_nonce, t->server_nonce, t->server_proof);
    elastic__proof_make(key, label, false, t->client_nonce, t->server_nonce, t->client_proof);
}

TEST(common_conn_proof_accepts_the_right_key_and_label)
{
    transcript t;
    exchange("job-token", STORE_LABEL, &t);
    ASSERT(elastic__proof_check("job-token", STORE_LABEL, true, t.client_nonce, t.server_nonce,
                                t.server_proof));
    ASSERT(elastic__proof_check("job-token", STORE_LABEL, false, t.client_nonce, t.server_nonce,
                                t.client_proof));
    /* What the wire has always carried (docs/PROTOCOL.md, "Handshake"):
     * HMAC-SHA256(key, label " server" || client nonce || server nonce). */
    uint8_t message[64 + 2 * ELASTIC__NONCE_BYTES];
    size_t n = (size_t)snprintf((char *)message, 64, "%s server", STORE_LABEL);
    memcpy(message + n, t.client_nonce, ELASTIC__NONCE_BYTES);
    memcpy(message + n + ELASTIC__NONCE_BYTES, t.server_nonce, ELASTIC__NONCE_BYTES);
    uint8_t expected[ELASTIC__PROOF_BYTES];
    unsigned int len = sizeof expected;
    ASSERT(HMAC(EVP_sha256(), "job-token", 9, message, n + 2 * ELASTIC__NONCE_BYTES, expected,
                &len) != NULL);
    ASSERT_MEM_EQ(expected, t.server_proof, sizeof expected);
}

TEST(common_conn_proof_rejects_a_wrong_key)
{
    transcript t;
    exchange("job-token", REPLICA_LABEL, &t);
    ASSERT(!elastic__proof_check("job-tokem", REPLICA_LABEL, true, t.client_nonce, t.server_nonce,
                                 t.server_proof));
    ASSERT(!elastic__proof_check("", REPLICA_LABEL, false, t.client_nonce, t.server_nonce,
                                 t.client_proof));
}

/* The store's and the replica channel's labels differ: a proof made for one
 * is never valid on the other; nor is a server's proof a client's. */
TEST(common_conn_proof_rejects_a_wrong_label_or_side)
{
    transcript t;
    exchange("job-token", STORE_LABEL, &t);
    ASSERT(!elastic__proof_check("job-token", REPLICA_LABEL, true, t.client_nonce, t.server_nonce,
                                 t.server_proof));
    ASSERT(!elastic__proof_check("job-token", REPLICA_LABEL, false, t.client_nonce,
                                 t.server_nonce, t.client_proof));
    ASSERT(!elastic__proof_check("job-token", STORE_LABEL, false, t.client_nonce, t.server_nonce,
                                 t.server_proof));
    /* A label past the bound never yields an accepted proof. */
    char long_label[ELASTIC__PROOF_LABEL_MAX + 2];
    memset(long_label, 'l', sizeof long_label - 1);
    long_label[sizeof long_label - 1] = '\0';
    uint8_t proof[ELASTIC__PROOF_BYTES];
    elastic__proof_make("job-token", long_label, true, t.client_nonce, t.server_nonce, proof);
    ASSERT(!elastic__proof_check("job-token", long_label, true, t.client_nonce, t.server_nonce,
                                 proof));
}

/* A recorded exchange replayed: the other side's nonce is fresh, so the
 * recorded proof does not answer it, in either direction. */
TEST(common_conn_proof_rejects_a_replayed_transcript)
{
    transcript recorded, next;
    exchange("job-token", STORE_LABEL, &recorded);
    exchange("job-token", STORE_LABEL, &next);
    ASSERT(memcmp(recorded.server_nonce, next.server_nonce, ELASTIC__NONCE_BYTES) != 0);
    ASSERT(memcmp(recorded.client_nonce, next.client_nonce, ELASTIC__NONCE_BYTES) != 0);
    /* A client replaying its recorded hello and proof to a server whose nonce is new. */
    ASSERT(!elastic__proof_check("job-token", STORE_LABEL, false, recorded.client_nonce,
                                 next.server_nonce, recorded.client_proof));
    /* An impostor server replaying a recorded welcome to a client whose nonce is new. */
    ASSERT(!elastic__proof_check("job-token", STORE_LABEL, true, next.client_nonce,
                                 recorded.server_nonce, recorded.server_proof));
}
