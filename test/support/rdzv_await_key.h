/*
 * Tests that look at a run's rendezvous keys through a backend handle of
 * their own (an observer): waiting, with a deadline, until a key appears or
 * goes.
 */
#ifndef ELASTIC_TEST_RDZV_AWAIT_KEY_H
#define ELASTIC_TEST_RDZV_AWAIT_KEY_H

#include "test.h"
#include "rdzv/backend.h"

#include <time.h>

/* Waits until key exists (present) or is gone (!present); fails the test
 * after timeout_ms (scaled) or on any other answer than found / not found. */
static inline void rdzv_await_key(rdzv__backend *b, const char *key, bool present, int timeout_ms)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t start_ms = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
    uint64_t deadline = start_ms + (uint64_t)test_scaled_ms(timeout_ms);
    for (;;) {
        void *value = NULL;
        size_t len = 0;
        int rc = b->ops->get(b, key, &value, &len);
        elastic_free(value);
        if (rc == 0 && present) return;
        if (rc == ELASTIC_ENOTFOUND && !present) return;
        if (rc != 0 && rc != ELASTIC_ENOTFOUND) FAIL("get %s: %s", key, elastic_last_error());
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u > deadline)
            FAIL("%s still %s after %d ms", key, present ? "missing" : "there", timeout_ms);
        struct timespec pause = { 0, 20 * 1000000L };
        nanosleep(&pause, NULL);
    }
}

#endif /* ELASTIC_TEST_RDZV_AWAIT_KEY_H */
