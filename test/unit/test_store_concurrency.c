/* Many clients and threads at once: atomic adds end exact, one handle
 * multiplexes many threads, and close races with calls in flight. */
#include "support/store_fixture.h"

#define CLIENTS            32
#define THREADS_PER_CLIENT 4
#define ADDS_PER_THREAD    50

typedef struct adder {
    elastic_store *store;
    int failures;
} adder;

static void *add_many(void *arg)
{
    adder *a = arg;
    for (int i = 0; i < ADDS_PER_THREAD; i++) {
        int64_t result;
        if (elastic_store_add(a->store, "counter", 1, &result) != 0) a->failures++;
    }
    return NULL;
}

TEST_TIMEOUT(store_concurrent_adds_from_32_clients_end_exact, 120)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *clients[CLIENTS];
    pthread_t threads[CLIENTS * THREADS_PER_CLIENT];
    adder adders[CLIENTS * THREADS_PER_CLIENT];
    for (int c = 0; c < CLIENTS; c++) clients[c] = fixture_connect(&f);
    for (int t = 0; t < CLIENTS * THREADS_PER_CLIENT; t++) {
        adders[t].store = clients[t / THREADS_PER_CLIENT];
        adders[t].failures = 0;
        ASSERT_EQ(pthread_create(&threads[t], NULL, add_many, &adders[t]), 0);
    }
    for (int t = 0; t < CLIENTS * THREADS_PER_CLIENT; t++) {
        pthread_join(threads[t], NULL);
        ASSERT_EQ(adders[t].failures, 0);
    }
    int64_t total = 0;
    ASSERT_OK(elastic_store_add(clients[0], "counter", 0, &total));
    ASSERT_EQ(total, CLIENTS * THREADS_PER_CLIENT * ADDS_PER_THREAD);
    for (int c = 0; c < CLIENTS; c++) elastic_store_close(clients[c]);
    elastic_store_server_close(f.server);
}

typedef struct getter {
    elastic_store *store;
    int index;
    int rc;
} getter;

static void *get_own_key(void *arg)
{
    getter *g = arg;
    char key[32];
    snprintf(key, sizeof key, "key-%d", g->index);
    void *value = NULL;
    size_t len = 0;
    int rc = elastic_store_get(g->store, key, test_scaled_ms(20000), &value, &len);
    if (rc == 0 && (len != strlen(key) || memcmp(value, key, len) != 0))
        rc = -100; /* crossed answers */
    __atomic_store_n(&g->rc, rc, __ATOMIC_SEQ_CST);
    elastic_free(value);
    return NULL;
}

TEST(store_one_handle_matches_out_of_order_answers)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *shared = fixture_connect(&f), *writer = fixture_connect(&f);
    enum { N = 16 };
    pthread_t threads[N];
    getter getters[N];
    for (int i = 0; i < N; i++) {
        getters[i] = (getter){ shared, i, 1 };
        ASSERT_EQ(pthread_create(&threads[i], NULL, get_own_key, &getters[i]), 0);
    }
    /* Answer them in reverse order. */
    for (int i = N - 1; i >= 0; i--) {
        char key[32];
        snprintf(key, sizeof key, "key-%d", i);
        ASSERT_OK(elastic_store_set(writer, key, key, strlen(key)));
    }
    for (int i = 0; i < N; i++) {
        pthread_join(threads[i], NULL);
        ASSERT_OK(getters[i].rc);
    }
    elastic_store_close(shared);
    elastic_store_close(writer);
    elastic_store_server_close(f.server);
}

TEST(store_pending_waits_per_connection_are_bounded)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.max_pending_waits = 4;
    store_fixture f;
    fixture_start_with(&f, &o);
    elastic_store *s = fixture_connect(&f);
    enum { N = 8 };
    pthread_t threads[N];
    getter getters[N];
    for (int i = 0; i < N; i++) {
        getters[i] = (getter){ s, 100 + i, 1 };
        ASSERT_EQ(pthread_create(&threads[i], NULL, get_own_key, &getters[i]), 0);
    }
    /* Four park, four are refused at once: wait for the refusals. */
    uint64_t deadline = fixture_now_ms() + (uint64_t)test_scaled_ms(10000);
    int refused = 0;
    while (refused < N - 4 && fixture_now_ms() < deadline) {
        refused = 0;
        for (int i = 0; i < N; i++)
            refused += __atomic_load_n(&getters[i].rc, __ATOMIC_SEQ_CST) == ELASTIC_ELIMIT;
        usleep(10 * 1000);
    }
    ASSERT_EQ(refused, N - 4);
    elastic_store_close(s); /* the parked four end with ELASTIC_ECLOSED */
    for (int i = 0; i < N; i++) {
        pthread_join(threads[i], NULL);
        ASSERT(getters[i].rc == ELASTIC_ELIMIT || getters[i].rc == ELASTIC_ECLOSED);
    }
    elastic_store_server_close(f.server);
}
