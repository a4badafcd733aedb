/* With a token, frames after the handshake travel in TLS 1.3 (PSK from the
 * token): an on-path proxy sees no plaintext, and bytes it injects after
 * the handshake end the connection without being executed. */
#include "support/store_raw.h"

#include <pthread.h>

#define TOKEN "tls-test-token"

/* A relay between one client and the server that records what the client
 * sent and, when told, injects bytes towards the server. */
typedef struct proxy {
    int listen_fd, port, server_port;
    pthread_t thread;
    pthread_mutex_t lock;
    uint8_t inject[64];
    size_t inject_len;    /* > 0: to be written upstream */
    bool upstream_closed; /* the server hung up */
    uint8_t seen[65536];  /* client -> server bytes */
    size_t seen_len;
} proxy;

static bool relay(int from, int to, proxy *p, bool record)
{
    uint8_t buf[16384];
    ssize_t n = recv(from, buf, sizeof buf, 0);
    if (n <= 0) return false;
    if (record) {
        pthread_mutex_lock(&p->lock);
        size_t room = sizeof p->seen - p->seen_len, take = (size_t)n < room ? (size_t)n : room;
        memcpy(p->seen + p->seen_len, buf, take);
        p->seen_len += take;
        pthread_mutex_unlock(&p->lock);
    }
    return send(to, buf, (size_t)n, MSG_NOSIGNAL) == n;
}

static void *proxy_main(void *arg)
{
    proxy *p = arg;
    int client = accept(p->listen_fd, NULL, NULL);
    int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET,
                                .sin_port = htons((uint16_t)p->server_port) };
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (client < 0 || connect(upstream, (struct sockaddr *)&addr, sizeof addr) != 0) return NULL;
    uint64_t deadline = fixture_now_ms() + (uint64_t)test_scaled_ms(20000);
    bool open = true;
    while (open && fixture_now_ms() < deadline) {
        pthread_mutex_lock(&p->lock);
        if (p->inject_len > 0) {
            send(upstream, p->inject, p->inject_len, MSG_NOSIGNAL);
            p->inject_len = 0;
        }
        pthread_mutex_unlock(&p->lock);
        struct pollfd pfd[2] = { { .fd = client, .events = POLLIN },
                                 { .fd = upstream, .events = POLLIN } };
        if (poll(pfd, 2, 20) <= 0) continue;
        if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) open = relay(client, upstream, p, true);
        if (open && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
            !relay(upstream, client, p, false)) {
            pthread_mutex_lock(&p->lock);
            p->upstream_closed = true;
            pthread_mutex_unlock(&p->lock);
            open = false;
        }
    }
    close(client);
    close(upstream);
    return NULL;
}

static void proxy_start(proxy *p, int server_port)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    p->server_port = server_port;
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET };
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(p->listen_fd, (struct sockaddr *)&addr, sizeof addr), 0);
    ASSERT_EQ(listen(p->listen_fd, 1), 0);
    socklen_t len = sizeof addr;
    getsockname(p->listen_fd, (struct sockaddr *)&addr, &len);
    p->port = ntohs(addr.sin_port);
    ASSERT_EQ(pthread_create(&p->thread, NULL, proxy_main, p), 0);
}

static bool proxy_wait_upstream_closed(proxy *p, int timeout_ms)
{
    uint64_t deadline = fixture_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        bool closed = p->upstream_closed;
        pthread_mutex_unlock(&p->lock);
        if (closed || fixture_now_ms() >= deadline) return closed;
        struct timespec pause = { 0, 10 * 1000 * 1000 };
        nanosleep(&pause, NULL);
    }
}

static elastic_store *connect_via(int port)
{
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    elastic_store_opts o;
    elastic_store_opts_init(&o, sizeof o);
    o.token = TOKEN;
    elastic_store *s = NULL;
    ASSERT_OK(elastic_store_connect(endpoint, &o, &s));
    return s;
}

/* The plaintext SET frame the attacker injected: key "injected". */
static size_t plaintext_set(uint8_t *out)
{
    static const uint8_t frame[] = {
        21, 0, 0, 0, 7,   0,   0,   0,   1,   0,   0,   0, /* header: body 21, id 7, SET */
        8,  0, 0, 0, 'i', 'n', 'j', 'e', 'c', 't', 'e', 'd', 1, 0, 0, 0, 'x'
    };
    memcpy(out, frame, sizeof frame);
    return sizeof frame;
}

/* A well-formed TLS application-data record with a forged body. */
static size_t forged_record(uint8_t *out)
{
    out[0] = 23, out[1] = 3, out[2] = 3, out[3] = 0, out[4] = 40;
    for (int i = 0; i < 40; i++) out[5 + i] = (uint8_t)(i * 37 + 11);
    return 45;
}

TEST(store_tls_rejects_bytes_injected_after_the_handshake)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.token = TOKEN;
    store_fixture f;
    fixture_start_with(&f, &o);
    elastic_store *direct = connect_via(test_server_port(f.server));
    for (int round = 0; round < 2; round++) {
        proxy p;
        proxy_start(&p, test_server_port(f.server));
        elastic_store *victim = connect_via(p.port);
        static const char secret[] = "a-value-nobody-on-the-path-may-read";
        ASSERT_OK(
            elastic_store_set(victim, "before", secret, sizeof secret - 1)); /* handshake done */
        pthread_mutex_lock(&p.lock);
        p.inject_len = round == 0 ? plaintext_set(p.inject) : forged_record(p.inject);
        ASSERT(memmem(p.seen, p.seen_len, secret, sizeof secret - 1) == NULL); /* encrypted */
        pthread_mutex_unlock(&p.lock);
        /* The server drops the connection and never runs the injected SET. */
        ASSERT(proxy_wait_upstream_closed(&p, test_scaled_ms(5000)));
        void *value = NULL;
        size_t len = 0;
        ASSERT_ERR(elastic_store_try_get(direct, "injected", &value, &len), ELASTIC_ENOTFOUND);
        expect_value(direct, "before", secret);
        pthread_join(p.thread, NULL);
        close(p.listen_fd);
        elastic_store_close(victim);
    }
    elastic_store_close(direct);
    elastic_store_server_close(f.server);
}

TEST(store_tls_carries_large_values_and_many_calls)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.token = TOKEN;
    store_fixture f;
    fixture_start_with(&f, &o);
    elastic_store *a = connect_via(test_server_port(f.server));
    elastic_store *b = connect_via(test_server_port(f.server));
    size_t big = 3u << 20; /* many TLS records each way */
    uint8_t *value = malloc(big);
    ASSERT(value != NULL);
    for (size_t i = 0; i < big; i++) value[i] = (uint8_t)(i * 131 + 7);
    ASSERT_OK(elastic_store_set(a, "big", value, big));
    void *got = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_get(b, "big", 5000, &got, &len));
    ASSERT_EQ(len, big);
    ASSERT_MEM_EQ(got, value, big);
    elastic_free(got);
    for (int i = 0; i < 200; i++) {
        int64_t n = 0;
        ASSERT_OK(elastic_store_add(i % 2 ? a : b, "counter", 1, &n));
        ASSERT_EQ(n, i + 1);
    }
    free(value);
    elastic_store_close(a);
    elastic_store_close(b);
    elastic_store_server_close(f.server);
}
