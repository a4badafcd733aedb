/*
 * The replica channel's handshake: the store's challenge-response (the proof
 * of common/conn_proof.h) with a label of its own, so a proof made for one
 * channel is never valid on the other. Both sides send a fresh nonce and prove they
 * hold the job's token with HMAC-SHA256(token, label || client nonce ||
 * server nonce); the token never crosses the wire and a recorded exchange
 * cannot be replayed. The server answers nothing but its proof until the
 * client has proven itself.
 *
 *   client: "ELRP" u32 version u32 flags(1: token) nonce[32]
 *   server: "ELRP" u32 version u32 flags nonce[32] proof[32]
 *   client: proof[32]
 *   server: u32 status (0: accepted)
 */
#include "replica/replica.h"

#include "common/bytes.h"
#include "common/conn_proof.h"

#define NONCE_BYTES  ELASTIC__NONCE_BYTES
#define PROOF_BYTES  ELASTIC__PROOF_BYTES
#define AUTH_VERSION 1u
#define FLAG_TOKEN   1u
#define HELLO_BYTES  (4u + 4u + 4u + NONCE_BYTES)
#define ANSWER_BYTES (HELLO_BYTES + PROOF_BYTES)

static const char magic[4] = { 'E', 'L', 'R', 'P' };

/* The replica channel's label: a proof made for the store (its own label)
 * is never valid here, nor one made here valid there. */
#define REPLICA_PROOF_LABEL "elastic-replica/1"

static void put_hello(uint8_t *out, const char *token, const uint8_t *nonce)
{
    memcpy(out, magic, 4);
    bytes__set_le32(out + 4, AUTH_VERSION);
    bytes__set_le32(out + 8, token ? FLAG_TOKEN : 0);
    memcpy(out + 12, nonce, NONCE_BYTES);
}

/* The other side's hello: magic, version, and the same token setting as ours. */
static int check_hello(const uint8_t *in, const char *token, const char *who)
{
    if (memcmp(in, magic, 4) != 0)
        return elastic__fail(ELASTIC_EPROTO, "replica handshake: the %s is not a replica peer",
                             who);
    if (bytes__le32(in + 4) != AUTH_VERSION)
        return elastic__fail(ELASTIC_EPROTO, "replica handshake: the %s speaks version %u", who,
                             (unsigned)bytes__le32(in + 4));
    bool has = (bytes__le32(in + 8) & FLAG_TOKEN) != 0;
    if (has != (token != NULL))
        return elastic__fail(ELASTIC_EAUTH,
                             "replica handshake: the %s %s a token and this side %s one", who,
                             has ? "uses" : "has no", token ? "has" : "has no");
    return 0;
}

int replica__auth_client(replica_conn *c, const char *token, uint64_t deadline_ms)
{
    uint8_t nonce[NONCE_BYTES], hello[HELLO_BYTES], answer[ANSWER_BYTES], mine[PROOF_BYTES + 4];
    int rc = elastic__random_bytes(nonce, sizeof nonce);
    put_hello(hello, token, nonce);
    if (rc == 0) rc = c->ops->send(c, hello, sizeof hello, deadline_ms);
    if (rc == 0) rc = c->ops->recv(c, answer, sizeof answer, deadline_ms);
    if (rc == 0) rc = check_hello(answer, token, "server");
    if (rc) return rc;
    if (token && !elastic__proof_check(token, REPLICA_PROOF_LABEL, true, nonce, answer + 12,
                                       answer + HELLO_BYTES))
        return elastic__fail(ELASTIC_EAUTH,
                             "replica handshake: the peer does not hold the job's token");
    memset(mine, 0, PROOF_BYTES); /* without a token: zeros, never read */
    if (token) elastic__proof_make(token, REPLICA_PROOF_LABEL, false, nonce, answer + 12, mine);
    rc = c->ops->send(c, mine, PROOF_BYTES, deadline_ms);
    if (rc == 0) rc = c->ops->recv(c, mine, 4, deadline_ms);
    if (rc == ELASTIC_ECONNECT || (rc == 0 && bytes__le32(mine) != 0))
        return elastic__fail(ELASTIC_EAUTH,
                             "replica handshake: the peer refused this side's token");
    return rc;
}

int replica__auth_server(replica_conn *c, const char *token, uint64_t deadline_ms)
{
    uint8_t hello[HELLO_BYTES], answer[ANSWER_BYTES], theirs[PROOF_BYTES];
    int rc = c->ops->recv(c, hello, sizeof hello, deadline_ms);
    if (rc == 0) rc = check_hello(hello, token, "client");
    uint8_t nonce[NONCE_BYTES];
    if (rc == 0) rc = elastic__random_bytes(nonce, sizeof nonce);
    if (rc) return rc;
    put_hello(answer, token, nonce);
    memset(answer + HELLO_BYTES, 0, PROOF_BYTES); /* without a token: zeros, never read */
    if (token)
        elastic__proof_make(token, REPLICA_PROOF_LABEL, true, hello + 12, nonce,
                            answer + HELLO_BYTES);
    rc = c->ops->send(c, answer, sizeof answer, deadline_ms);
    if (rc == 0) rc = c->ops->recv(c, theirs, sizeof theirs, deadline_ms);
    if (rc) return rc;
    bool ok = token == NULL ||
              elastic__proof_check(token, REPLICA_PROOF_LABEL, false, hello + 12, nonce, theirs);
    uint8_t status[4];
    bytes__set_le32(status, ok ? 0 : 1);
    rc = c->ops->send(c, status, sizeof status, deadline_ms);
    if (!ok)
        return elastic__fail(ELASTIC_EAUTH, "replica handshake: a client without the job's token");
    return rc;
}
