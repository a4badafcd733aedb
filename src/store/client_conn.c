/*
 * The client side of a store connection over common/conn.h: dialing with a
 * deadline, the handshake (version check, mutual HMAC proof of
 * common/conn_proof.h under the store's label, then TLS 1.3 with the token's
 * PSK when there is a token), and writing whole frames.
 */
#include "store/client.h"

#include "common/clock.h"
#include "common/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

/* The longest a frame's send may take (the server stopped reading). */
#define STORE__SEND_MS 30000

static int recv_exact(int fd, void *data, size_t len, uint64_t deadline_ms)
{
    return elastic__recv_exact(fd, data, len, deadline_ms, "store handshake");
}

int store__send_all(int fd, const void *data, size_t len)
{
    int rc = elastic__send_all(fd, data, len, elastic__deadline_ms(STORE__SEND_MS), "store send");
    if (rc == ELASTIC_ETIMEDOUT)
        return elastic__fail(rc, "store send: the server does not read (send timeout)");
    return rc;
}

/* Checks the welcome and answers with our proof. */
static int handshake(int fd, const char *token, uint64_t deadline_ms, uint16_t *welcome_flags)
{
    uint8_t hello[STORE__HELLO_BYTES] = { 0 };
    memcpy(hello, STORE__MAGIC, 4);
    bytes__set_le16(hello + 4, STORE__VERSION);
    int err = elastic__random_bytes(hello + 8, STORE__NONCE_BYTES);
    if (err == 0) err = store__send_all(fd, hello, sizeof hello);
    uint8_t welcome[STORE__WELCOME_BYTES];
    if (err == 0) err = recv_exact(fd, welcome, sizeof welcome, deadline_ms);
    if (err != 0) return err;
    if (memcmp(welcome, STORE__MAGIC, 4) != 0)
        return elastic__fail(ELASTIC_EPROTO, "the peer is not a libelastic store (wrong magic)");
    if (bytes__le16(welcome + 6) & STORE__WELCOME_REFUSED) {
        char why[STORE__WELCOME_BYTES - 8 + 1];
        memcpy(why, welcome + 8, sizeof why - 1);
        why[sizeof why - 1] = '\0';
        for (char *c = why; *c != '\0'; c++)
            if (*c < 0x20 || *c > 0x7e) *c = '?'; /* the server's words, printable */
        return elastic__fail(ELASTIC_ELIMIT, "the store refused the connection: %s", why);
    }
    if (bytes__le16(welcome + 4) != STORE__VERSION)
        return elastic__fail(ELASTIC_EPROTO, "the store speaks protocol version %u, this client %u",
                             bytes__le16(welcome + 4), STORE__VERSION);
    *welcome_flags = bytes__le16(welcome + 6);
    bool server_auth = bytes__le16(welcome + 6) & STORE__WELCOME_AUTH;
    const uint8_t *server_nonce = welcome + 8, *server_proof = welcome + 8 + STORE__NONCE_BYTES;
    if (server_auth && token == NULL)
        return elastic__fail(ELASTIC_EAUTH, "the store requires a token (opts.token, "
                                            "ELASTIC_STORE_TOKEN_FILE or ELASTIC_STORE_TOKEN)");
    if (!server_auth && token != NULL)
        return elastic__fail(ELASTIC_EAUTH,
                             "the store does not prove it knows the token (started without one?)");
    uint8_t proof[STORE__PROOF_BYTES] = { 0 };
    if (token != NULL) {
        if (!elastic__proof_check(token, STORE__PROOF_LABEL, true, hello + 8, server_nonce,
                                  server_proof))
            return elastic__fail(ELASTIC_EAUTH, "the store's proof is wrong (a different token?)");
        elastic__proof_make(token, STORE__PROOF_LABEL, false, hello + 8, server_nonce, proof);
    }
    err = store__send_all(fd, proof, sizeof proof);
    uint8_t ready[STORE__READY_BYTES];
    if (err == 0) err = recv_exact(fd, ready, sizeof ready, deadline_ms);
    if (err != 0) return err;
    int status = (int)(int32_t)bytes__le32(ready);
    if (status == ELASTIC_EAUTH) return elastic__fail(ELASTIC_EAUTH, "the store refused our token");
    if (status != 0)
        return elastic__fail(ELASTIC_EPROTO, "the store refused the handshake (%d)", status);
    return 0;
}

/* After READY with a token: the TLS handshake, within the same deadline. */
static int tls_handshake(int fd, const char *token, uint64_t deadline_ms, store__tls **out)
{
    store__tls *tls = NULL;
    int err = store__tls_new(false, token, &tls);
    uint8_t buf[16384];
    while (err == 0) {
        const char *why = NULL;
        int rc = store__tls_handshake(tls, &why);
        for (size_t n; err == 0 && (n = store__tls_take_output(tls, buf, sizeof buf)) > 0;)
            err = store__send_all(fd, buf, n);
        if (err != 0 || rc == 1) break;
        if (rc < 0) {
            err = elastic__fail(ELASTIC_EAUTH, "store TLS handshake: %s", why);
            break;
        }
        if ((err = elastic__conn_wait(fd, POLLIN, deadline_ms)) != 0) {
            err = elastic__fail(err, "store TLS handshake: no answer from the server in time");
            break;
        }
        ssize_t got = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (got <= 0)
            err = elastic__fail(ELASTIC_ECONNECT, "store TLS handshake: %s",
                                got == 0 ? "the server closed the connection" : strerror(errno));
        else if (!store__tls_feed(tls, buf, (size_t)got))
            err = elastic__fail(ELASTIC_ENOMEM, "out of memory");
    }
    if (err != 0)
        store__tls_free(tls);
    else
        *out = tls;
    return err;
}

int store__connect_socket(const char *host, int port, const char *token, uint64_t deadline_ms,
                          int *fd_out, store__tls **tls_out, uint16_t *welcome_flags)
{
    *tls_out = NULL;
    *welcome_flags = 0;
    int fd = -1;
    int err = elastic__dial(host, port, deadline_ms, "store", &fd);
    if (err != 0) return err;
    err = handshake(fd, token, deadline_ms, welcome_flags);
    if (err == 0 && token != NULL) err = tls_handshake(fd, token, deadline_ms, tls_out);
    if (err != 0) {
        close(fd);
        return err;
    }
    /* Blocking reads from here on, in slices (client.c); a send stuck on a
     * server that stops reading gives up after STORE__SEND_MS. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    struct timeval recv_slice = { .tv_usec = STORE__RECV_SLICE_MS * 1000 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &recv_slice, sizeof recv_slice);
    *fd_out = fd;
    return 0;
}
