/* Token authentication: HMAC challenge-response both ways. */
#include "support/store_fixture.h"

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
    ASSERT_LT(fixture_now_ms() - start, test_scaled_ms(1500)); /* refusals are not retried */
    ASSERT_OK(connect_with(&f, "s3cret-token", &s));           /* the server is fine */
    elastic_store_close(s);
    elastic_store_server_close(f.server);
}

TEST(store_auth_client_with_token_refuses_server_without)
{
    store_fixture f;
    unsetenv("ELASTIC_STORE_TOKEN");
    fixture_start(&f);
    elastic_store *s = NULL;
    ASSERT_ERR(connect_with(&f, "s3cret-token", &s),
               ELASTIC_EAUTH); /* mutual: the server must prove too */
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

static void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    ASSERT_EQ(fwrite(text, 1, len, f), len);
    fclose(f);
}

TEST(store_auth_token_file_takes_any_length_up_to_the_limit_uncut)
{
    static char token[ELASTIC_STORE_TOKEN_MAX + 2];
    for (size_t i = 0; i < ELASTIC_STORE_TOKEN_MAX; i++) token[i] = (char)('!' + i % 90);
    token[ELASTIC_STORE_TOKEN_MAX] = '\0';
    store_fixture f;
    start_with_token(&f, token);
    char path[512];
    snprintf(path, sizeof path, "%s/token", test_tmpdir());
    unsetenv("ELASTIC_STORE_TOKEN");
    setenv("ELASTIC_STORE_TOKEN_FILE", path, 1);
    elastic_store *s = NULL;
    /* Exactly the limit, with a CRLF ending: accepted, all of it. */
    token[ELASTIC_STORE_TOKEN_MAX] = '\r', token[ELASTIC_STORE_TOKEN_MAX + 1] = '\n';
    write_file(path, token, ELASTIC_STORE_TOKEN_MAX + 2);
    ASSERT_OK(elastic_store_connect(f.endpoint, NULL, &s));
    elastic_store_close(s);
    /* The same token less its last byte is another token: refused. */
    write_file(path, token, ELASTIC_STORE_TOKEN_MAX - 1);
    ASSERT_ERR(elastic_store_connect(f.endpoint, NULL, &s), ELASTIC_EAUTH);
    /* One byte over the limit: an error naming the limit, not a cut token. */
    token[ELASTIC_STORE_TOKEN_MAX] = 'x';
    write_file(path, token, ELASTIC_STORE_TOKEN_MAX + 1);
    ASSERT_ERR(elastic_store_connect(f.endpoint, NULL, &s), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "longer than 4096 bytes") != NULL);
    write_file(path, "", 0);
    ASSERT_ERR(elastic_store_connect(f.endpoint, NULL, &s), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "empty") != NULL);
    unsetenv("ELASTIC_STORE_TOKEN_FILE");
    elastic_store_server_close(f.server);
}

TEST(store_auth_long_environment_token_is_not_cut)
{
    char token[97];
    memset(token, 'z', 96);
    token[96] = '\0';
    token[95] = 'q'; /* differs only past the old 79-byte cut */
    store_fixture f;
    start_with_token(&f, token);
    setenv("ELASTIC_STORE_TOKEN", token, 1);
    elastic_store *s = NULL;
    ASSERT_OK(elastic_store_connect(f.endpoint, NULL, &s));
    elastic_store_close(s);
    token[95] = 'z';
    setenv("ELASTIC_STORE_TOKEN", token, 1);
    ASSERT_ERR(elastic_store_connect(f.endpoint, NULL, &s), ELASTIC_EAUTH);
    static char huge[ELASTIC_STORE_TOKEN_MAX + 2];
    memset(huge, 'h', ELASTIC_STORE_TOKEN_MAX + 1);
    setenv("ELASTIC_STORE_TOKEN", huge, 1);
    ASSERT_ERR(elastic_store_connect(f.endpoint, NULL, &s), ELASTIC_EINVAL);
    unsetenv("ELASTIC_STORE_TOKEN");
    elastic_store_server_close(f.server);
}
