/* Token authentication: HMAC challenge-response both ways. */
#include "store_fixture.h"

static void start_with_token(store_fixture *f, const char *token)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.token = token;
    fixture_start_with(f, &o);
}

static int connect_with(const store_fixture *f, const char *token, elastic_store **s)
{
    elastic_store_opts o;
    elastic_store_opts_init(&o, sizeof o);
    o.token = token;
    o.connect_timeout_ms = 2000;
    return elastic_store_connect(f->endpoint, &o, s);
}

TEST(store_auth_accepts_the_right_token)
{
    store_fixture f;
    start_with_token(&f, "s3cret-token");
    elastic_store *s = NULL;
    ASSERT_OK(connect_with(&f, "s3cret-token", &s));
    ASSERT_OK(elastic_store_set(s, "k", "v", 1));
    expect_value(s, "k", "v");
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_auth_refuses_wrong_or_missing_token)
{
    store_fixture f;
    start_with_token(&f, "s3cret-token");
    elastic_store *s = NULL;
    uint64_t start = fixture_now_ms();
    ASSERT_ERR(connect_with(&f, "guess", &s), ELASTIC_EAUTH);
    ASSERT_ERR(connect_with(&f, NULL, &s), ELASTIC_EAUTH);
    ASSERT(s == NULL);
    ASSERT_LT(fixture_now_ms() - start, 1500); /* refusals are not retried */
    ASSERT_OK(connect_with(&f, "s3cret-token", &s)); /* the server is fine */
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_auth_client_with_token_refuses_server_without)
{
    store_fixture f;
    unsetenv("ELASTIC_STORE_TOKEN");
    fixture_start(&f);
    elastic_store *s = NULL;
    ASSERT_ERR(connect_with(&f, "s3cret-token", &s), ELASTIC_EAUTH); /* mutual: the server must prove too */
    elastic_store_server_close(f.server);
}

TEST(store_auth_token_from_environment)
{
    setenv("ELASTIC_STORE_TOKEN", "from-env", 1);
    store_fixture f;
    fixture_start(&f);
    elastic_store *s = NULL;
    ASSERT_OK(elastic_store_connect(f.endpoint, NULL, &s));
    ASSERT_OK(elastic_store_set(s, "k", "v", 1));
    elastic_store_close(s);
    ASSERT_ERR(connect_with(&f, "other", &s), ELASTIC_EAUTH);
    unsetenv("ELASTIC_STORE_TOKEN");
    elastic_store_server_close(f.server);
}
