/* BATCH: several operations in one request, run in order and answered in
 * one frame; the last may wait; bounded and validated; a server that does
 * not offer it is not sent one. */
#include "store/batch.h"
#include "store/server.h"
#include "support/store_raw.h"

#include <sched.h>
#include <unistd.h>

static void wait_parked(elastic_store_server *server, size_t parked)
{
    uint64_t deadline = fixture_now_ms() + (uint64_t)test_scaled_ms(10000);
    while (store__server_parked_calls(server) < parked)
        if (fixture_now_ms() > deadline)
            FAIL("the call under test never parked on the server");
        else
            sched_yield();
}

TEST(store_batch_runs_its_operations_in_order_and_answers_each)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    ASSERT(store__batch_supported(s));
    uint64_t lease = 0;
    ASSERT_OK(elastic_store_lease_grant(s, 10000, 1000, &lease));
    store__batch b;
    store__batch_begin(&b, s);
    store__batch_add(&b, "count", 1);
    store__batch_add(&b, "count", 1);
    store__batch_set_leased(&b, "rec", "node-a", 6, lease);
    store__batch_get(&b, "count");
    store__batch_get(&b, "absent");
    store__batch_keys(&b, "re", 16);
    ASSERT_OK(store__batch_run(&b, false));
    int64_t sum = 0;
    ASSERT_OK(store__batch_int(&b, 0, &sum));
    ASSERT_EQ(sum, 1);
    ASSERT_OK(store__batch_int(&b, 1, &sum));
    ASSERT_EQ(sum, 2);
    ASSERT_EQ(b.answers[2].status, 0);
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(store__batch_value(&b, 3, &value, &len));
    ASSERT_STR_EQ((const char *)value, "2"); /* the adds before it ran first */
    elastic_free(value);
    ASSERT_EQ(store__batch_value(&b, 4, &value, &len), ELASTIC_ENOTFOUND);
    ASSERT(value == NULL);
    char **names = NULL;
    size_t n = 0;
    ASSERT_OK(store__batch_keys_answer(&b, 5, &names, &n));
    ASSERT_EQ(n, 1u);
    ASSERT_STR_EQ(names[0], "rec");
    elastic_free(names);
    /* the revision after the batch: every change so far (2 adds, 1 set) */
    ASSERT_EQ(b.revision, 3u);
    store__batch_free(&b);
    expect_value(s, "rec", "node-a");
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_batch_that_stops_on_error_cancels_the_rest)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    store__batch b;
    store__batch_begin(&b, s);
    store__batch_set_leased(&b, "rec", "x", 1, 12345); /* no such lease */
    store__batch_add(&b, "after", 1);
    const char *keys[1] = { "never" };
    store__batch_multi_get(&b, keys, 1, test_scaled_ms(10000));
    uint64_t start = fixture_now_ms();
    ASSERT_OK(store__batch_run(&b, true));
    ASSERT_LT(fixture_now_ms() - start, (uint64_t)test_scaled_ms(5000)); /* the wait never ran */
    ASSERT_EQ(b.answers[0].status, ELASTIC_ENOTFOUND);
    ASSERT_EQ(b.answers[1].status, ELASTIC_ECANCELED);
    ASSERT_EQ(b.answers[2].status, ELASTIC_ECANCELED);
    store__batch_free(&b);
    void *value = NULL;
    size_t len;
    ASSERT_EQ(elastic_store_try_get(s, "after", &value, &len), ELASTIC_ENOTFOUND);
    /* without stop_on_error the rest runs */
    store__batch_begin(&b, s);
    store__batch_set_leased(&b, "rec", "x", 1, 12345);
    store__batch_add(&b, "after", 1);
    ASSERT_OK(store__batch_run(&b, false));
    ASSERT_EQ(b.answers[0].status, ELASTIC_ENOTFOUND);
    ASSERT_EQ(b.answers[1].status, 0);
    store__batch_free(&b);
    expect_value(s, "after", "1");
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

typedef struct later_set {
    elastic_store *store;
    elastic_store_server *server;
    size_t parked;
} later_set;

static void *set_once_parked(void *arg)
{
    later_set *l = arg;
    wait_parked(l->server, l->parked);
    elastic_store_set(l->store, "assignment", "rank 3", 6);
    return NULL;
}

TEST(store_batch_whose_last_operation_waits_is_answered_when_it_is)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f), *other = fixture_connect(&f);
    later_set l = { other, f.server, 1 };
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, set_once_parked, &l), 0);
    store__batch b;
    store__batch_begin(&b, s);
    store__batch_add(&b, "joined", 1);
    const char *keys[1] = { "assignment" };
    store__batch_multi_get(&b, keys, 1, test_scaled_ms(10000));
    ASSERT_OK(store__batch_run(&b, true));
    pthread_join(t, NULL);
    int64_t sum = 0;
    ASSERT_OK(store__batch_int(&b, 0, &sum));
    ASSERT_EQ(sum, 1);
    void *values[1] = { NULL };
    size_t lens[1] = { 0 };
    ASSERT_OK(store__batch_values(&b, 1, 1, values, lens));
    ASSERT_EQ(lens[0], 6u);
    ASSERT_STR_EQ((const char *)values[0], "rank 3");
    elastic_free(values[0]);
    store__batch_free(&b);
    /* a wait that times out still answers the batch, the add done */
    store__batch_begin(&b, s);
    store__batch_add(&b, "joined", 1);
    keys[0] = "not-coming";
    store__batch_multi_get(&b, keys, 1, 50);
    ASSERT_OK(store__batch_run(&b, true));
    ASSERT_OK(store__batch_int(&b, 0, &sum));
    ASSERT_EQ(sum, 2);
    ASSERT_EQ(b.answers[1].status, ELASTIC_ETIMEDOUT);
    store__batch_free(&b);
    elastic_store_close(s);
    elastic_store_close(other);
    elastic_store_server_close(f.server);
}

/* A parked batch holds its other answers: at most 64 KiB of them. */
TEST(store_batch_that_would_hold_too_much_while_it_waits_is_answered_at_once)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    size_t big = (64u << 10) + 1;
    char *value = calloc(1, big);
    ASSERT(value != NULL);
    ASSERT_OK(elastic_store_set(s, "big", value, big));
    free(value);
    store__batch b;
    store__batch_begin(&b, s);
    store__batch_get(&b, "big");
    const char *keys[1] = { "never" };
    store__batch_multi_get(&b, keys, 1, test_scaled_ms(10000));
    uint64_t start = fixture_now_ms();
    ASSERT_OK(store__batch_run(&b, false));
    ASSERT_LT(fixture_now_ms() - start, (uint64_t)test_scaled_ms(5000));
    void *got = NULL;
    size_t len = 0;
    ASSERT_OK(store__batch_value(&b, 0, &got, &len));
    ASSERT_EQ(len, big);
    elastic_free(got);
    ASSERT_EQ(b.answers[1].status, ELASTIC_ELIMIT);
    store__batch_free(&b);
    ASSERT_EQ(store__server_parked_calls(f.server), 0u);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

typedef struct clone_get {
    elastic_store *store;
    int rc;
    void *value;
} clone_get;

static void *get_on_clone(void *arg)
{
    clone_get *g = arg;
    size_t len;
    g->rc = elastic_store_get(g->store, "z", test_scaled_ms(10000), &g->value, &len);
    return NULL;
}

/* A change made by a batch wakes a call parked on the same connection: its
 * answer must come beside the batch's, not inside it. */
TEST(store_batch_waking_a_call_of_its_own_connection_answers_both)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f), *clone = NULL;
    ASSERT_OK(elastic_store_clone(s, NULL, &clone));
    clone_get g = { clone, -1, NULL };
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, get_on_clone, &g), 0);
    wait_parked(f.server, 1);
    store__batch b;
    store__batch_begin(&b, s);
    store__batch_add(&b, "z", 5);
    store__batch_get(&b, "z");
    ASSERT_OK(store__batch_run(&b, false));
    pthread_join(t, NULL);
    int64_t sum = 0;
    ASSERT_OK(store__batch_int(&b, 0, &sum));
    ASSERT_EQ(sum, 5);
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(store__batch_value(&b, 1, &value, &len));
    ASSERT_STR_EQ((const char *)value, "5");
    elastic_free(value);
    store__batch_free(&b);
    ASSERT_OK(g.rc);
    ASSERT_STR_EQ((const char *)g.value, "5");
    elastic_free(g.value);
    elastic_store_close(clone);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_batch_client_refuses_too_many_operations_or_a_wait_before_the_last)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    store__batch b;
    store__batch_begin(&b, s);
    for (unsigned i = 0; i <= STORE__MAX_BATCH; i++) store__batch_add(&b, "k", 1);
    ASSERT_EQ(store__batch_run(&b, false), ELASTIC_EINVAL);
    store__batch_free(&b);
    const char *keys[1] = { "k" };
    store__batch_begin(&b, s);
    store__batch_multi_get(&b, keys, 1, 100);
    store__batch_add(&b, "k", 1);
    ASSERT_EQ(store__batch_run(&b, false), ELASTIC_EINVAL);
    store__batch_free(&b);
    void *value = NULL;
    size_t len;
    ASSERT_EQ(elastic_store_try_get(s, "k", &value, &len), ELASTIC_ENOTFOUND); /* nothing sent */
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

/* A raw BATCH frame: u32 n, then n x (u16 op, u16 flags, u32 len, body). */
static size_t batch_frame(uint8_t *frame, uint32_t id, uint32_t n, const uint8_t *ops,
                          size_t ops_len)
{
    put32(frame, (uint32_t)(4 + ops_len));
    put32(frame + 4, id);
    frame[8] = STORE__OP_BATCH;
    frame[9] = frame[10] = frame[11] = 0;
    put32(frame + 12, n);
    memcpy(frame + 16, ops, ops_len);
    return 16 + ops_len;
}

/* One batched ADD of key "k" by 1: head and body. */
static size_t add_op(uint8_t *p, uint16_t op)
{
    p[0] = (uint8_t)op;
    p[1] = 0;
    p[2] = p[3] = 0;
    put32(p + 4, 4 + 1 + 8);
    put32(p + 8, 1);
    p[12] = 'k';
    memset(p + 13, 0, 8);
    p[13] = 1;
    return 21;
}

TEST(store_server_refuses_malformed_batches_and_serves_on)
{
    store_fixture f;
    fixture_start(&f);
    int fd = raw_connect(&f);
    raw_handshake(fd);
    uint8_t ops[24 * 18], frame[sizeof ops + 16];
    uint32_t id = 0;
    /* none, and more than 16 */
    send_bytes(fd, frame, batch_frame(frame, 7, 0, ops, 0));
    ASSERT_EQ(read_status(fd, &id), ELASTIC_ELIMIT);
    ASSERT_EQ(id, 7u);
    size_t len = 0;
    for (int i = 0; i < 17; i++) len += add_op(ops + len, STORE__OP_ADD);
    send_bytes(fd, frame, batch_frame(frame, 8, 17, ops, len));
    ASSERT_EQ(read_status(fd, &id), ELASTIC_ELIMIT);
    /* a batch inside a batch; an unknown operation inside */
    len = add_op(ops, STORE__OP_BATCH);
    send_bytes(fd, frame, batch_frame(frame, 9, 1, ops, len));
    ASSERT_EQ(read_status(fd, &id), ELASTIC_EPROTO);
    len = add_op(ops, 99);
    send_bytes(fd, frame, batch_frame(frame, 10, 1, ops, len));
    ASSERT_EQ(read_status(fd, &id), ELASTIC_EPROTO);
    /* an operation longer than what is left of the batch */
    len = add_op(ops, STORE__OP_ADD);
    put32(ops + 4, 200);
    send_bytes(fd, frame, batch_frame(frame, 11, 1, ops, len));
    ASSERT_EQ(read_status(fd, &id), ELASTIC_EPROTO);
    ASSERT_EQ(id, 11u);
    close(fd);
    /* nothing ran, and the server serves on */
    elastic_store *s = fixture_connect(&f);
    void *value = NULL;
    size_t vlen;
    ASSERT_EQ(elastic_store_try_get(s, "k", &value, &vlen), ELASTIC_ENOTFOUND);
    elastic_store_close(s);
    good_client_is_served(&f);
    elastic_store_server_close(f.server);
}

TEST(store_welcome_offers_batches_and_old_servers_are_not_sent_one)
{
    store_fixture f;
    fixture_start(&f);
    /* a client from before batches: the handshake is the same, the flag ignored */
    int fd = raw_connect(&f);
    uint8_t hello[40] = { 'E', 'L', 'S', 'T', 1, 0, 0, 0 };
    send_bytes(fd, hello, sizeof hello);
    uint8_t welcome[72];
    ASSERT_EQ(recv_some(fd, welcome, sizeof welcome, 5000), sizeof welcome);
    ASSERT_EQ(welcome[4], 1);                  /* still version 1 */
    ASSERT(welcome[6] & STORE__WELCOME_BATCH); /* and it offers batches */
    close(fd);
    good_client_is_served(&f);
    /* a server that does not offer them is sent none */
    store__server_without_batch(f.server);
    elastic_store *s = fixture_connect(&f);
    ASSERT(!store__batch_supported(s));
    store__batch b;
    store__batch_begin(&b, s);
    store__batch_add(&b, "k", 1);
    ASSERT_EQ(store__batch_run(&b, false), ELASTIC_EUNSUPPORTED);
    store__batch_free(&b);
    void *value = NULL;
    size_t len;
    ASSERT_EQ(elastic_store_try_get(s, "k", &value, &len), ELASTIC_ENOTFOUND);
    elastic_store_close(s);
    /* ...and one that is sent a batch anyway hangs up, as servers before it did */
    fd = raw_connect(&f);
    raw_handshake(fd);
    uint8_t ops[32], frame[64];
    size_t n = add_op(ops, STORE__OP_ADD);
    send_bytes(fd, frame, batch_frame(frame, 5, 1, ops, n));
    ASSERT(closed_by_server(fd, 5000));
    close(fd);
    elastic_store_server_close(f.server);
}
