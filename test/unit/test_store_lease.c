/* Leases: keys attached to a lease vanish (waking watchers) when the lease
 * is revoked, when its keep-alives stop, or when its connection closes. */
#include "store_fixture.h"

TEST(store_lease_revoke_deletes_its_keys)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    uint64_t lease = 0;
    ASSERT_OK(elastic_store_lease_grant(s, 60000, 0, &lease));
    ASSERT_OK(elastic_store_set_leased(s, "node/1", "alive", 5, lease));
    ASSERT_OK(elastic_store_set_leased(s, "node/2", "alive", 5, lease));
    ASSERT_OK(elastic_store_set(s, "plain", "stays", 5));
    int64_t count = 0;
    ASSERT_OK(elastic_store_num_keys(s, &count));
    ASSERT_EQ(count, 3);
    ASSERT_OK(elastic_store_lease_revoke(s, lease));
    ASSERT_OK(elastic_store_num_keys(s, &count));
    ASSERT_EQ(count, 1);
    ASSERT_ERR(elastic_store_lease_keepalive(s, lease), ELASTIC_ENOTFOUND);
    ASSERT_ERR(elastic_store_set_leased(s, "node/3", "x", 1, lease), ELASTIC_ENOTFOUND);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_lease_expires_without_keepalives_and_wakes_watchers)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *owner = fixture_connect(&f), *observer = fixture_connect(&f);
    uint64_t lease = 0;
    ASSERT_OK(elastic_store_lease_grant(owner, 300, 0, &lease)); /* nobody keeps it alive */
    ASSERT_OK(elastic_store_set_leased(owner, "presence", "here", 4, lease));
    uint64_t took = wait_until_gone(observer, "presence", test_scaled_ms(10000));
    ASSERT(took >= 200);
    elastic_store_close(owner);
    elastic_store_close(observer);
    elastic_store_server_close(f.server);
}

TEST(store_lease_lives_on_io_thread_keepalives)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *owner = fixture_connect(&f), *observer = fixture_connect(&f);
    uint64_t lease = 0;
    ASSERT_OK(elastic_store_lease_grant(owner, 400, 50, &lease));
    ASSERT_OK(elastic_store_set_leased(owner, "presence", "here", 4, lease));
    /* The owner makes no calls for three TTLs; its I/O thread keeps it. */
    uint64_t rev = 0, woke = 0;
    ASSERT_OK(elastic_store_get_revision(observer, "presence", NULL, NULL, &rev));
    ASSERT_ERR(elastic_store_watch(observer, "presence", rev, 1200, &woke), ELASTIC_ETIMEDOUT);
    expect_value(observer, "presence", "here");
    ASSERT_OK(elastic_store_lease_keepalive(owner, lease));
    elastic_store_close(owner); /* its leases end with it */
    wait_until_gone(observer, "presence", test_scaled_ms(5000));
    elastic_store_close(observer);
    elastic_store_server_close(f.server);
}

TEST(store_lease_ends_when_its_connection_closes)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *owner = fixture_connect(&f), *observer = fixture_connect(&f);
    uint64_t lease = 0;
    ASSERT_OK(elastic_store_lease_grant(owner, 60000, 0, &lease)); /* no keep-alive list to revoke from */
    ASSERT_OK(elastic_store_set_leased(owner, "presence", "here", 4, lease));
    elastic_store_close(owner);
    uint64_t took = wait_until_gone(observer, "presence", test_scaled_ms(5000));
    ASSERT_LT(took, (uint64_t)test_scaled_ms(3000));
    elastic_store_close(observer);
    elastic_store_server_close(f.server);
}

TEST(store_plain_set_detaches_key_from_its_lease)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    uint64_t lease = 0;
    ASSERT_OK(elastic_store_lease_grant(s, 60000, 0, &lease));
    ASSERT_OK(elastic_store_set_leased(s, "k", "1", 1, lease));
    ASSERT_OK(elastic_store_set(s, "k", "2", 1));
    ASSERT_OK(elastic_store_lease_revoke(s, lease));
    expect_value(s, "k", "2");
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}
