/* Semantics of each store operation against a real server on loopback. */
#include "support/store_fixture.h"

#include <inttypes.h>

TEST(store_set_then_get_returns_the_value)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    ASSERT_OK(elastic_store_set(s, "greeting", "hello", 5));
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_get(s, "greeting", 1000, &value, &len));
    ASSERT_EQ(len, 5);
    ASSERT_STR_EQ((char *)value, "hello");
    elastic_free(value);
    ASSERT_OK(elastic_store_set(s, "greeting", "", 0)); /* empty values are values */
    ASSERT_OK(elastic_store_get(s, "greeting", 1000, &value, &len));
    ASSERT_EQ(len, 0);
    ASSERT_STR_EQ((char *)value, "");
    elastic_free(value);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_values_are_binary)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    uint8_t blob[300];
    for (size_t i = 0; i < sizeof blob; i++) blob[i] = (uint8_t)(i * 7);
    ASSERT_OK(elastic_store_set(s, "blob", blob, sizeof blob));
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_try_get(s, "blob", &value, &len));
    ASSERT_EQ(len, sizeof blob);
    ASSERT_MEM_EQ(value, blob, sizeof blob);
    elastic_free(value);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_try_get_of_absent_key_is_not_found)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    void *value = NULL;
    size_t len = 0;
    ASSERT_ERR(elastic_store_try_get(s, "nothing", &value, &len), ELASTIC_ENOTFOUND);
    ASSERT(value == NULL);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_add_counts_from_zero_and_rejects_non_integers)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    int64_t result = 0;
    ASSERT_OK(elastic_store_add(s, "counter", 5, &result));
    ASSERT_EQ(result, 5);
    ASSERT_OK(elastic_store_add(s, "counter", -7, &result));
    ASSERT_EQ(result, -2);
    expect_value(s, "counter", "-2");
    ASSERT_OK(elastic_store_set(s, "text", "abc", 3));
    ASSERT_ERR(elastic_store_add(s, "text", 1, &result), ELASTIC_EINVAL);
    ASSERT_OK(elastic_store_set(s, "big", "9223372036854775807", 19));
    ASSERT_ERR(elastic_store_add(s, "big", 1, &result), ELASTIC_ERANGE);
    expect_value(s, "big", "9223372036854775807");
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_compare_set_swaps_only_on_match)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    void *current = NULL;
    size_t clen = 0;
    /* expected NULL: only when absent */
    ASSERT_OK(elastic_store_compare_set(s, "leader", NULL, 0, "a", 1, &current, &clen));
    ASSERT_EQ(clen, 1);
    ASSERT_STR_EQ((char *)current, "a");
    elastic_free(current);
    ASSERT_OK(elastic_store_compare_set(s, "leader", NULL, 0, "b", 1, &current, &clen));
    ASSERT_STR_EQ((char *)current, "a"); /* lost: someone holds it */
    elastic_free(current);
    ASSERT_OK(elastic_store_compare_set(s, "leader", "x", 1, "b", 1, &current, &clen));
    ASSERT_STR_EQ((char *)current, "a");
    elastic_free(current);
    ASSERT_OK(elastic_store_compare_set(s, "leader", "a", 1, "b", 1, &current, &clen));
    ASSERT_STR_EQ((char *)current, "b");
    elastic_free(current);
    /* absent key and a non-NULL expected: nothing happens, current is NULL */
    ASSERT_OK(elastic_store_compare_set(s, "other", "a", 1, "b", 1, &current, &clen));
    ASSERT(current == NULL);
    ASSERT_EQ(clen, 0);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_delete_removes_and_reports_absent)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    ASSERT_OK(elastic_store_set(s, "k", "v", 1));
    ASSERT_OK(elastic_store_delete(s, "k"));
    ASSERT_ERR(elastic_store_delete(s, "k"), ELASTIC_ENOTFOUND);
    void *value;
    size_t len;
    ASSERT_ERR(elastic_store_try_get(s, "k", &value, &len), ELASTIC_ENOTFOUND);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_append_and_multi_ops)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    ASSERT_OK(elastic_store_append(s, "log", "ab", 2));
    ASSERT_OK(elastic_store_append(s, "log", "cd", 2));
    expect_value(s, "log", "abcd");
    const char *keys[] = { "m1", "m2", "m3" };
    const void *values[] = { "one", "", "three" };
    size_t lens[] = { 3, 0, 5 };
    ASSERT_OK(elastic_store_multi_set(s, keys, values, lens, 3));
    void *got[3];
    size_t got_lens[3];
    ASSERT_OK(elastic_store_multi_get(s, keys, 3, 1000, got, got_lens));
    ASSERT_STR_EQ((char *)got[0], "one");
    ASSERT_EQ(got_lens[1], 0);
    ASSERT_STR_EQ((char *)got[2], "three");
    for (int i = 0; i < 3; i++) elastic_free(got[i]);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_prefix_scopes_keys_num_keys_and_keys)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store_opts o;
    elastic_store_opts_init(&o, sizeof o);
    o.prefix = "job7/";
    elastic_store *job = NULL, *plain = fixture_connect(&f), *gen = NULL;
    ASSERT_OK(elastic_store_connect(f.endpoint, &o, &job));
    ASSERT_OK(elastic_store_clone(job, "gen3/", &gen));
    ASSERT_OK(elastic_store_set(plain, "outside", "x", 1));
    ASSERT_OK(elastic_store_set(job, "a", "1", 1));
    ASSERT_OK(elastic_store_set(gen, "b", "2", 1));
    ASSERT_OK(elastic_store_set(gen, "c", "3", 1));
    expect_value(plain, "job7/gen3/b", "2");
    expect_value(job, "gen3/c", "3");
    int64_t count = 0;
    ASSERT_OK(elastic_store_num_keys(gen, &count));
    ASSERT_EQ(count, 2);
    ASSERT_OK(elastic_store_num_keys(job, &count));
    ASSERT_EQ(count, 3);
    ASSERT_OK(elastic_store_num_keys(plain, &count));
    ASSERT_EQ(count, 4);
    char **keys = NULL;
    size_t n = 0;
    ASSERT_OK(elastic_store_keys(job, "gen3/", 10, &keys, &n));
    ASSERT_EQ(n, 2);
    bool saw_b = false, saw_c = false;
    for (size_t i = 0; i < n; i++) {
        saw_b |= strcmp(keys[i], "gen3/b") == 0;
        saw_c |= strcmp(keys[i], "gen3/c") == 0;
    }
    ASSERT(saw_b && saw_c);
    elastic_free(keys);
    ASSERT_OK(elastic_store_keys(job, "", 1, &keys, &n)); /* max bounds the answer */
    ASSERT_EQ(n, 1);
    elastic_free(keys);
    elastic_store_close(gen);
    ASSERT_OK(elastic_store_set(job, "still", "works", 5)); /* the clone shared the connection */
    elastic_store_close(job);
    elastic_store_close(plain);
    elastic_store_server_close(f.server);
}

TEST(store_get_revision_tracks_changes)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    uint64_t rev = 99;
    ASSERT_ERR(elastic_store_get_revision(s, "k", NULL, NULL, &rev), ELASTIC_ENOTFOUND);
    ASSERT_EQ(rev, 0);
    ASSERT_OK(elastic_store_set(s, "k", "1", 1));
    uint64_t first = 0, second = 0;
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_get_revision(s, "k", &value, &len, &first));
    ASSERT_STR_EQ((char *)value, "1");
    elastic_free(value);
    ASSERT_OK(elastic_store_set(s, "other", "x", 1));
    ASSERT_OK(elastic_store_set(s, "k", "2", 1));
    ASSERT_OK(elastic_store_get_revision(s, "k", NULL, NULL, &second));
    ASSERT_LT(first, second);
    ASSERT_EQ(second, first + 2);
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_ipv6_loopback_works)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.host = "::1";
    elastic_store_server *server = NULL;
    int rc = elastic_store_server_start(&o, &server);
    if (rc != 0) SKIP("no IPv6 loopback here");
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "[::1]:%d", test_server_port(server));
    elastic_store *s = NULL;
    ASSERT_OK(elastic_store_connect(endpoint, NULL, &s));
    ASSERT_OK(elastic_store_set(s, "v6", "yes", 3));
    expect_value(s, "v6", "yes");
    elastic_store_close(s);
    elastic_store_server_close(server);
}

TEST(store_rejects_bad_arguments)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = fixture_connect(&f);
    ASSERT_ERR(elastic_store_set(s, NULL, "v", 1), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_store_set(s, "", "v", 1),
               ELASTIC_EINVAL); /* the server refuses empty keys */
    ASSERT_ERR(elastic_store_set(NULL, "k", "v", 1), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_store_wait(s, NULL, 0, 10), ELASTIC_EINVAL);
    elastic_store *other = NULL;
    ASSERT_ERR(elastic_store_connect("no-port", NULL, &other), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_store_connect("127.0.0.1:99999", NULL, &other), ELASTIC_EINVAL);
    elastic_store_server_opts so;
    elastic_store_server_opts_init(&so, sizeof so);
    so.port = 70000;
    elastic_store_server *bad = NULL;
    ASSERT_ERR(elastic_store_server_start(&so, &bad), ELASTIC_EINVAL);
    ASSERT_OK(elastic_store_set(s, "after", "ok", 2)); /* still served */
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_value_limit_is_enforced)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.max_value_bytes = 1000;
    o.max_key_bytes = 16;
    o.max_connection_buffer = 1 << 20;
    store_fixture f;
    fixture_start_with(&f, &o);
    elastic_store *s = fixture_connect(&f);
    char big[2000];
    memset(big, 'x', sizeof big);
    ASSERT_ERR(elastic_store_set(s, "k", big, sizeof big), ELASTIC_ELIMIT);
    ASSERT_ERR(elastic_store_set(s, "a-key-longer-than-16", "v", 1), ELASTIC_ELIMIT);
    ASSERT_OK(elastic_store_set(s, "k", big, 1000));
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_total_bytes_limit_is_enforced)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.max_total_bytes = 10000;
    store_fixture f;
    fixture_start_with(&f, &o);
    elastic_store *s = fixture_connect(&f);
    char chunk[1000];
    memset(chunk, 'y', sizeof chunk);
    int rc = 0, stored = 0;
    for (int i = 0; i < 100 && rc == 0; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        rc = elastic_store_set(s, key, chunk, sizeof chunk);
        stored += rc == 0;
    }
    ASSERT_ERR(rc, ELASTIC_ELIMIT);
    ASSERT(stored >= 5 && stored < 10);
    ASSERT_OK(elastic_store_delete(s, "k0")); /* room again */
    ASSERT_OK(elastic_store_set(s, "again", chunk, sizeof chunk));
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}
