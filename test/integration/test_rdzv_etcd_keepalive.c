/*
 * A lease's keep-alives on etcd's gRPC stream (src/etcd/lease_stream.c)
 * against a real etcd, counted by etcd itself (/metrics): one stream carries
 * them all, over TLS too; where gRPC does not get through (a proxy that
 * passes HTTP/1.1 only) they go through the JSON gateway, one stream each
 * inside etcd, and the lease lives on all the same.
 */
#include "support/etcd_fixture.h"
#include "rdzv/backend.h"

#include <pthread.h>

#define KEEPALIVE_METHOD "grpc_method=\"LeaseKeepAlive\""
#define TTL_MS           2000
#define INTERVAL_MS      200
#define KEEPALIVES       15 /* 3 s of them at 200 ms: past the 2 s TTL */

static double keepalive_messages(const etcd_cluster *c)
{
    return etcd_fixture_metric(c, 0, "grpc_server_msg_received_total", KEEPALIVE_METHOD);
}

static double keepalive_streams(const etcd_cluster *c)
{
    return etcd_fixture_metric(c, 0, "grpc_server_started_total", KEEPALIVE_METHOD);
}

/* Waits until etcd has received `more` keep-alives beyond `from`. */
static void await_keepalives(const etcd_cluster *c, double from, double more, int timeout_ms)
{
    uint64_t deadline = etcd_fixture_now_ms() + (uint64_t)test_scaled_ms(timeout_ms);
    for (;;) {
        double got = keepalive_messages(c);
        if (got >= from + more) return;
        if (etcd_fixture_now_ms() > deadline)
            FAIL("etcd received %.0f keep-alives within %d ms, not %.0f", got - from, timeout_ms,
                 more);
        struct timespec pause = { 0, 50 * 1000000L };
        nanosleep(&pause, NULL); /* polls etcd's counter until the deadline */
    }
}

static bool lease_lost;

static void on_lost(void *user, uint64_t lease, const char *why)
{
    (void)user;
    (void)lease;
    fprintf(stderr, "# lease lost: %s\n", why);
    __atomic_store_n(&lease_lost, true, __ATOMIC_SEQ_CST);
}

/* Keeps a lease alive for KEEPALIVES intervals through `conf`; returns how
 * many LeaseKeepAlive streams etcd opened meanwhile. The lease and its key
 * must outlive the TTL. */
static double keep_a_lease_alive(const etcd_cluster *c, const rdzv__etcd_conf *conf,
                                 const char *run_id)
{
    rdzv__backend *b = NULL, *observer = NULL;
    ASSERT_OK(rdzv__backend_etcd_open(conf, run_id, &b));
    ASSERT_OK(rdzv__backend_etcd_open(conf, run_id, &observer));
    __atomic_store_n(&lease_lost, false, __ATOMIC_SEQ_CST);
    b->on_lease_lost = on_lost;
    double streams_before = keepalive_streams(c), messages_before = keepalive_messages(c);
    ASSERT(streams_before >= 0 && messages_before >= 0);
    uint64_t lease = 0;
    ASSERT_OK(b->ops->lease_grant(b, TTL_MS, INTERVAL_MS, &lease));
    ASSERT_OK(b->ops->set_leased(b, "me", "here", 4, lease));
    await_keepalives(c, messages_before, KEEPALIVES, 20000);
    double streams = keepalive_streams(c) - streams_before;
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(observer->ops->get(observer, "me", &value, &len)); /* the lease kept its key */
    ASSERT_EQ(len, 4u);
    elastic_free(value);
    if (__atomic_load_n(&lease_lost, __ATOMIC_SEQ_CST)) FAIL("the lease was reported lost");
    ASSERT_OK(b->ops->lease_revoke(b, lease));
    observer->ops->close(observer);
    b->ops->close(b);
    return streams;
}

TEST_TIMEOUT(rdzv_etcd_keepalives_ride_one_grpc_stream, 60)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    rdzv__etcd_conf conf = { .endpoints = c.endpoints, .timeout_ms = test_scaled_ms(5000) };
    double streams = keep_a_lease_alive(&c, &conf, "stream");
    /* The gateway would have opened one stream per keep-alive. */
    if (streams != 1) FAIL("%.0f keep-alive streams for %d keep-alives, not 1", streams, KEEPALIVES);
    etcd_cluster_stop(&c);
}

TEST_TIMEOUT(rdzv_etcd_keepalives_ride_one_grpc_stream_over_tls, 90)
{
    etcd_cluster c;
    etcd_cluster_start_tls(&c);
    rdzv__etcd_conf conf = { .endpoints = c.endpoints,
                             .timeout_ms = test_scaled_ms(5000),
                             .ca_file = c.ca,
                             .cert_file = c.client_cert,
                             .key_file = c.client_key };
    double streams = keep_a_lease_alive(&c, &conf, "stream-tls");
    if (streams != 1) FAIL("%.0f keep-alive streams for %d keep-alives, not 1", streams, KEEPALIVES);
    etcd_cluster_stop(&c);
}

TEST_TIMEOUT(rdzv_etcd_keepalives_go_through_the_gateway_where_grpc_does_not_pass, 60)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    int port = 0;
    pid_t proxy = etcd_fixture_proxy(c.m[0].client_port, true, &port);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    rdzv__etcd_conf conf = { .endpoints = endpoint, .timeout_ms = test_scaled_ms(5000) };
    double streams = keep_a_lease_alive(&c, &conf, "gateway");
    /* Each keep-alive came as a gateway request: a stream of its own in etcd. */
    if (streams < KEEPALIVES)
        FAIL("%.0f keep-alive streams for %d keep-alives through an HTTP/1.1 proxy", streams,
             KEEPALIVES);
    kill(proxy, SIGKILL);
    waitpid(proxy, NULL, 0);
    etcd_cluster_stop(&c);
}
