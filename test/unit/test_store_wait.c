/* Blocking store calls: get/wait/watch wake on changes, time out, and do
 * not hold up other calls on the same handle. */
#include "store/client.h"
#include "store/server.h"
#include "support/store_fixture.h"

#include <sched.h>

/* A thread that makes one change once `parked` calls are parked on the
 * server, so the wake-up path (not the already-there path) is what runs. */
typedef struct changer {
    elastic_store *store;
    const char *what; /* "set", "add", "cas", "delete" */
    const char *key;
    elastic_store_server *server;
    size_t parked;
} changer;

static void wait_parked(const changer *c)
{
    uint64_t deadline = fixture_now_ms() + (uint64_t)test_scaled_ms(10000);
    while (store__server_parked_calls(c->server) < c->parked)
        if (fixture_now_ms() > deadline)
            FAIL("the call under test never parked on the server");
        else
            sched_yield();
}

static void *change_later(void *arg)
{
    changer *c = arg;
    wait_parked(c);
    int64_t result;
    void *current = NULL;
    size_t clen;
    if (strcmp(c->what, "set") == 0)
        elastic_store_set(c->store, c->key, "v", 1);
    else if (strcmp(c->what, "add") == 0)
        elastic_store_add(c->store, c->key, 1, &result);
    else if (strcmp(c->what, "cas") == 0)
        elastic_store_compare_set(c->store, c->key, NULL, 0, "c", 1, &current, &clen);
    else if (strcmp(c->what, "delete") == 0)
        elastic_store_delete(c->store, c->key);
    else if (strcmp(c->what, "elsewhere-then-delete") == 0) {
        elastic_store_set(c->store, "elsewhere", "v",
                          1); /* must not wake a watch on another prefix */
        elastic_store_delete(c->store, c->key);
    }
    elastic_free(current);
    return NULL;
}

static void start_changer(pthread_t *t, changer *c)
{
    ASSERT_EQ(pthread_create(t, NULL, change_later, c), 0);
}

TEST(store_get_waits_for_set_add_and_compare_set)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *waiter = fixture_connect(&f), *writer = fixture_connect(&f);
    const char *kinds[] = { "set", "add", "cas" };
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "wake-%s", kinds[i]);
        changer c = { writer, kinds[i], key, f.server, 1 };
        pthread_t t;
        start_changer(&t, &c);
        void *value = NULL;
        size_t len;
        uint64_t start = fixture_now_ms();
        ASSERT_OK(elastic_store_get(waiter, key, test_scaled_ms(10000), &value, &len));
        ASSERT_LT(fixture_now_ms() - start, (uint64_t)test_scaled_ms(5000));
        elastic_free(value);
        pthread_join(t, NULL);
    }
    elastic_store_close(waiter);
    elastic_store_close(writer);
    elastic_store_server_close(f.server);
}

TEST(store_wait_needs_every_key)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f), *writer = fixture_connect(&f);
    ASSERT_OK(elastic_store_set(writer, "a", "1", 1));
    const char *keys[] = { "a", "b", "c" };
    ASSERT_ERR(elastic_store_wait(s, keys, 3, 100), ELASTIC_ETIMEDOUT);
    ASSERT_OK(elastic_store_set(writer, "c", "1", 1));
    changer c = { writer, "set", "b", f.server, 1 };
    pthread_t t;
    start_changer(&t, &c);
    ASSERT_OK(elastic_store_wait(s, keys, 3, test_scaled_ms(10000)));
    pthread_join(t, NULL);
    elastic_store_close(s);
    elastic_store_close(writer);
    elastic_store_server_close(f.server);
}

TEST(store_wait_times_out)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    const char *keys[] = { "never" };
    uint64_t start = fixture_now_ms();
    ASSERT_ERR(elastic_store_wait(s, keys, 1, 200), ELASTIC_ETIMEDOUT);
    uint64_t took = fixture_now_ms() - start;
    ASSERT(took >= 190);
    ASSERT_LT(took, (uint64_t)test_scaled_ms(3000));
    void *value;
    size_t len;
    ASSERT_ERR(elastic_store_get(s, "never", 0, &value, &len), ELASTIC_ETIMEDOUT);
    uint64_t rev;
    ASSERT_OK(elastic_store_watch(s, "never", 1000000, 100, &rev)); /* a stale revision: at once */
    ASSERT_EQ(rev, 0);
    ASSERT_OK(elastic_store_set(s, "x", "1", 1));
    ASSERT_OK(elastic_store_get_revision(s, "x", NULL, NULL, &rev));
    ASSERT_ERR(elastic_store_watch(s, "never", rev, 100, &rev), ELASTIC_ETIMEDOUT);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_watch_wakes_on_set_and_delete_under_prefix)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f), *writer = fixture_connect(&f);
    ASSERT_OK(elastic_store_set(writer, "gen/1/a", "x", 1));
    uint64_t rev = 0;
    ASSERT_OK(elastic_store_get_revision(writer, "gen/1/a", NULL, NULL, &rev));
    /* A change elsewhere does not wake it; one under the prefix does. */
    changer both = { writer, "elsewhere-then-delete", "gen/1/a", f.server, 1 };
    pthread_t t1;
    start_changer(&t1, &both);
    uint64_t woke = 0;
    ASSERT_OK(elastic_store_watch(s, "gen/1/", rev, test_scaled_ms(10000), &woke));
    pthread_join(t1, NULL);
    ASSERT_EQ(woke, rev + 2); /* the delete, after the unrelated set */
    /* Already happened: answered at once. */
    uint64_t again = 0;
    ASSERT_OK(elastic_store_watch(s, "gen/1/", rev, 100, &again));
    ASSERT_EQ(again, woke);
    /* Nothing new since `woke`: times out. */
    ASSERT_ERR(elastic_store_watch(s, "gen/1/", woke, 100, &again), ELASTIC_ETIMEDOUT);
    elastic_store_close(s);
    elastic_store_close(writer);
    elastic_store_server_close(f.server);
}

typedef struct blocked_get {
    elastic_store *store;
    int rc;
} blocked_get;

static void *get_forever(void *arg)
{
    blocked_get *g = arg;
    void *value = NULL;
    size_t len;
    g->rc = elastic_store_get(g->store, "never-set", 60000, &value, &len);
    elastic_free(value);
    return NULL;
}

/* Waits (with a deadline) until another thread is inside a call on `s`:
 * closing a handle before a call has entered it would be a use after free. */
static void wait_for_call_in_flight(elastic_store *s)
{
    uint64_t deadline = fixture_now_ms() + (uint64_t)test_scaled_ms(10000);
    for (;;) {
        pthread_mutex_lock(&s->session->lock);
        int active = s->active_calls;
        pthread_mutex_unlock(&s->session->lock);
        if (active > 0) return;
        if (fixture_now_ms() > deadline) FAIL("the get never started");
        sched_yield();
    }
}

TEST(store_blocked_get_does_not_block_other_calls_on_the_handle)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    blocked_get g = { s, 1 };
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, get_forever, &g), 0);
    wait_for_call_in_flight(s);
    for (int i = 0; i < 100; i++) ASSERT_OK(elastic_store_set(s, "busy", "v", 1));
    /* Closing fails the parked get at once with ELASTIC_ECLOSED. */
    elastic_store_close(s);
    pthread_join(t, NULL);
    ASSERT_ERR(g.rc, ELASTIC_ECLOSED);
    elastic_store_server_close(f.server);
}

TEST(store_server_close_fails_pending_calls_promptly)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    blocked_get g = { s, 1 };
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, get_forever, &g), 0);
    changer parked = { .server = f.server, .parked = 1 };
    wait_parked(&parked); /* closing must fail a call that is really parked */
    uint64_t start = fixture_now_ms();
    elastic_store_server_close(f.server);
    pthread_join(t, NULL);
    ASSERT_LT(fixture_now_ms() - start, (uint64_t)test_scaled_ms(5000));
    ASSERT_ERR(g.rc, ELASTIC_ECONNECT);
    ASSERT_ERR(elastic_store_set(s, "k", "v", 1), ELASTIC_ECONNECT); /* reconnect refused */
    elastic_store_close(s);
}

TEST(store_reconnects_to_a_restarted_server)
{
    store_fixture f;
    fixture_start(&f);
    int port = test_server_port(f.server);
    elastic_store *s = fixture_connect(&f);
    ASSERT_OK(elastic_store_set(s, "k", "v", 1));
    elastic_store_server_close(f.server);
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.port = port;
    elastic_store_server *again = NULL;
    ASSERT_OK(elastic_store_server_start(&o, &again));
    ASSERT_OK(elastic_store_set(s, "k2", "v", 1)); /* idempotent: retried over a new connection */
    int64_t n = 0;
    ASSERT_OK(elastic_store_add(s, "n", 1, &n)); /* nothing in flight: connects first */
    ASSERT_EQ(n, 1);
    elastic_store_close(s);
    elastic_store_server_close(again);
}
