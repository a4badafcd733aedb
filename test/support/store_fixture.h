/*
 * Shared set-up for the store tests: a server on a free loopback port and
 * clients connected to it, each failing the test on error.
 */
#ifndef ELASTIC_TEST_STORE_FIXTURE_H
#define ELASTIC_TEST_STORE_FIXTURE_H

#include "test.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

typedef struct store_fixture {
    elastic_store_server *server;
    char endpoint[64];
} store_fixture;

static inline void fixture_start_with(store_fixture *f, const elastic_store_server_opts *opts)
{
    ASSERT_OK(elastic_store_server_start(opts, &f->server));
    snprintf(f->endpoint, sizeof f->endpoint, "127.0.0.1:%d", test_server_port(f->server));
}

static inline void fixture_start(store_fixture *f)
{
    fixture_start_with(f, NULL);
}

static inline elastic_store *fixture_connect(const store_fixture *f)
{
    elastic_store *s = NULL;
    ASSERT_OK(elastic_store_connect(f->endpoint, NULL, &s));
    return s;
}

static inline uint64_t fixture_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Reads a key that must exist and compares it with a string. */
static inline void expect_value(elastic_store *s, const char *key, const char *expected)
{
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_try_get(s, key, &value, &len));
    ASSERT_EQ(len, strlen(expected));
    ASSERT_STR_EQ((const char *)value, expected);
    elastic_free(value);
}

/* Watches (with a deadline) until the key is gone; returns the ms it took. */
static inline uint64_t wait_until_gone(elastic_store *s, const char *key, int timeout_ms)
{
    uint64_t start = fixture_now_ms(), rev = 0, next = 0;
    for (;;) {
        int rc = elastic_store_get_revision(s, key, NULL, NULL, &rev);
        if (rc == ELASTIC_ENOTFOUND) return fixture_now_ms() - start;
        ASSERT_OK(rc);
        int left = timeout_ms - (int)(fixture_now_ms() - start);
        if (left <= 0) FAIL("key %s still present after %d ms", key, timeout_ms);
        int w = elastic_store_watch(s, key, rev, left, &next);
        if (w != 0 && w != ELASTIC_ETIMEDOUT) FAIL("watch: %s", elastic_err_name(w));
    }
}

#endif
