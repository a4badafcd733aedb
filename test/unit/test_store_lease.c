/* Leases: keys attached to a lease vanish (waking watchers) when the lease
 * is revoked, when its keep-alives stop, or when its connection closes. */
#include "support/store_fixture.h"

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
    ASSERT_OK(
        elastic_store_lease_grant(owner, 60000, 0, &lease)); /* no keep-alive list to revoke from */
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

TEST(store_lease_belongs_to_its_connection_and_clones)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *owner = fixture_connect(&f), *other = fixture_connect(&f), *clone = NULL;
    ASSERT_OK(elastic_store_clone(owner, NULL, &clone));
    uint64_t lease = 0;
    ASSERT_OK(elastic_store_lease_grant(owner, 60000, 0, &lease));
    ASSERT_OK(elastic_store_set_leased(owner, "node/1", "alive", 5, lease));
    /* Another connection may neither revoke, keep alive nor attach to it. */
    ASSERT_ERR(elastic_store_lease_revoke(other, lease), ELASTIC_EPERM);
    ASSERT_ERR(elastic_store_lease_keepalive(other, lease), ELASTIC_EPERM);
    ASSERT_ERR(elastic_store_set_leased(other, "node/2", "x", 1, lease), ELASTIC_EPERM);
    int64_t count = 0;
    ASSERT_OK(elastic_store_num_keys(other, &count));
    ASSERT_EQ(count, 1); /* node/1 still there, node/2 never written */
    /* The owner's clone shares its connection, so it may. */
    ASSERT_OK(elastic_store_lease_keepalive(clone, lease));
    ASSERT_OK(elastic_store_set_leased(clone, "node/3", "y", 1, lease));
    ASSERT_OK(elastic_store_lease_revoke(clone, lease));
    ASSERT_OK(elastic_store_num_keys(other, &count));
    ASSERT_EQ(count, 0);
    elastic_store_close(clone);
    elastic_store_close(owner);
    elastic_store_close(other);
    elastic_store_server_close(f.server);
}

TEST(store_lease_ids_are_random_not_sequential)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    uint64_t ids[16];
    int small = 0, consecutive = 0;
    for (int i = 0; i < 16; i++) {
        ASSERT_OK(elastic_store_lease_grant(s, 60000, 0, &ids[i]));
        ASSERT_NE(ids[i], 0);
        if (ids[i] < 1000000) small++;
        if (i > 0 && ids[i] == ids[i - 1] + 1) consecutive++;
        for (int j = 0; j < i; j++) ASSERT_NE(ids[i], ids[j]);
    }
    /* Random 64-bit ids: a small id or a successor has odds of ~2^-44 each. */
    ASSERT_EQ(small, 0);
    ASSERT_EQ(consecutive, 0);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}
