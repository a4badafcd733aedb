/*
 * Raw-socket helpers for the store tests that play a hostile or broken peer:
 * connect, the unauthenticated handshake by hand, frames and their answers.
 */
#ifndef ELASTIC_TEST_STORE_RAW_H
#define ELASTIC_TEST_STORE_RAW_H

#include "support/store_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

static inline int raw_connect(const store_fixture *f)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT(fd >= 0);
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_port = htons((uint16_t)test_server_port(f->server)) };
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    return fd;
}

static inline void send_bytes(int fd, const void *data, size_t len)
{
    ASSERT_EQ(send(fd, data, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* Reads until `len` bytes or EOF/timeout; returns how many arrived. */
static inline size_t recv_some(int fd, void *data, size_t len, int timeout_ms)
{
    size_t got = 0;
    uint64_t deadline = fixture_now_ms() + (uint64_t)timeout_ms;
    while (got < len) {
        int left = (int)(deadline - fixture_now_ms());
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&pfd, 1, left) <= 0) break;
        ssize_t n = recv(fd, (char *)data + got, len - got, 0);
        if (n <= 0) break;
        got += (size_t)n;
    }
    return got;
}

/* True when the server closes the connection within timeout_ms. */
static inline bool closed_by_server(int fd, int timeout_ms)
{
    char sink[4096];
    uint64_t deadline = fixture_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int left = (int)(deadline - fixture_now_ms());
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&pfd, 1, left) <= 0) return false;
        ssize_t n = recv(fd, sink, sizeof sink, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
}

/* The unauthenticated handshake, done by hand. */
static inline void raw_handshake(int fd)
{
    uint8_t hello[40] = { 'E', 'L', 'S', 'T', 1, 0, 0, 0 };
    send_bytes(fd, hello, sizeof hello);
    uint8_t welcome[72];
    ASSERT_EQ(recv_some(fd, welcome, sizeof welcome, 5000), sizeof welcome);
    ASSERT_MEM_EQ(welcome, "ELST", 4);
    uint8_t proof[32] = { 0 };
    send_bytes(fd, proof, sizeof proof);
    uint8_t ready[4];
    ASSERT_EQ(recv_some(fd, ready, sizeof ready, 5000), sizeof ready);
    ASSERT_EQ(ready[0] | ready[1] | ready[2] | ready[3], 0);
}

static inline void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Reads one response header: its status. */
static inline int read_status(int fd, uint32_t *id)
{
    uint8_t h[12];
    ASSERT_EQ(recv_some(fd, h, sizeof h, 5000), sizeof h);
    uint32_t body = h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24;
    *id = h[4] | h[5] << 8 | h[6] << 16 | (uint32_t)h[7] << 24;
    char text[512];
    ASSERT(body < sizeof text);
    ASSERT_EQ(recv_some(fd, text, body, 5000), body);
    return (int16_t)(h[8] | h[9] << 8);
}

static inline void good_client_is_served(const store_fixture *f)
{
    elastic_store *s = fixture_connect(f);
    ASSERT_OK(elastic_store_set(s, "alive", "yes", 3));
    expect_value(s, "alive", "yes");
    elastic_store_close(s);
}

#endif
