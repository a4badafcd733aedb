/* Asynchronous save: the caller's buffers are copied (it may reuse them at
 * once), the save completes in the background, one is in flight at a time
 * with back-pressure, and closing during a save leaves a clean directory. */
#include "ckpt/ckpt.h"
#include "support/ckpt_content.h"
#include "test.h"

#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>

static elastic_ckpt *open_dir(void)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.chunk_bytes = 1 << 20;
    o.threads = 2;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    return c;
}

static uint8_t *filled(size_t len, uint64_t seed)
{
    uint8_t *buf = malloc(len);
    ASSERT(buf != NULL);
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = ckpt_test_mix(seed + i / 4096);
        memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
    }
    return buf;
}

TEST(ckpt_async_save_copies_the_buffers_and_commits_in_the_background)
{
    elastic_ckpt *c = open_dir();
    const size_t len = 9u << 20;
    uint8_t *weights = filled(len, 1), *expect = malloc(len);
    memcpy(expect, weights, len);
    elastic_ckpt_blob blobs[] = { { "weights", weights, len, 0 },
                                  { "rng", "seed=7", 6, ELASTIC_CKPT_REPLICATED } };
    ASSERT_OK(elastic_ckpt_save_async(c, 5, blobs, 2, 1000));
    memset(weights, 0xAB, len); /* the training step goes on with the buffer */
    uint64_t step = 0;
    ASSERT_OK(elastic_ckpt_async_wait(c, test_scaled_ms(30000), &step));
    ASSERT_EQ(step, 5);
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 5);
    void *data;
    size_t got;
    ASSERT_OK(elastic_ckpt_read(c, 5, "weights", &data, &got));
    ASSERT_EQ(got, len);
    ASSERT_MEM_EQ(data, expect, len);
    elastic_free(data);
    /* The staging buffer is reused for a second, smaller save. */
    blobs[0].len = len / 3;
    ASSERT_OK(elastic_ckpt_save_async(c, 6, blobs, 2, 1000));
    ASSERT_OK(elastic_ckpt_async_wait(c, test_scaled_ms(30000), &step));
    ASSERT_EQ(step, 6);
    ASSERT_OK(elastic_ckpt_read(c, 6, "weights", &data, &got));
    ASSERT_EQ(got, len / 3);
    ASSERT_MEM_EQ(data, weights, len / 3);
    elastic_free(data);
    free(weights);
    free(expect);
    elastic_ckpt_close(c);
}

TEST(ckpt_async_allows_one_save_in_flight_with_back_pressure)
{
    elastic_ckpt *c = open_dir();
    ASSERT_OK(elastic_ckpt_async_wait(c, 0, NULL)); /* none yet */
    ASSERT_OK(ckpt__async_hold(c, true));
    elastic_ckpt_blob blob = { "x", "hello", 5, 0 };
    ASSERT_OK(elastic_ckpt_save_async(c, 1, &blob, 1, 0));
    ASSERT_ERR(elastic_ckpt_save_async(c, 2, &blob, 1, 50), ELASTIC_EBUSY);
    ASSERT_ERR(elastic_ckpt_async_wait(c, 0, NULL), ELASTIC_ETIMEDOUT);
    elastic_ckpt_txn *txn;
    ASSERT_ERR(elastic_ckpt_begin(c, 3, &txn), ELASTIC_EBUSY); /* the async save holds the handle */
    ASSERT_OK(ckpt__async_hold(c, false));
    /* Back-pressure: this call waits for save 1 to finish, then starts save 2. */
    ASSERT_OK(elastic_ckpt_save_async(c, 2, &blob, 1, test_scaled_ms(30000)));
    uint64_t step;
    ASSERT_OK(elastic_ckpt_async_wait(c, test_scaled_ms(30000), &step));
    ASSERT_EQ(step, 2);
    uint64_t *steps;
    size_t n;
    ASSERT_OK(elastic_ckpt_list_steps(c, &steps, &n));
    ASSERT_EQ(n, 2);
    ASSERT_EQ(steps[0], 1);
    ASSERT_EQ(steps[1], 2);
    elastic_free(steps);
    ASSERT_OK(elastic_ckpt_begin(c, 3, &txn)); /* free again */
    elastic_ckpt_abort(txn);
    elastic_ckpt_close(c);
}

TEST(ckpt_async_failure_is_reported_by_wait)
{
    elastic_ckpt *c = open_dir();
    elastic_ckpt_blob blob = { "x", "hello", 5, 0 };
    ASSERT_OK(elastic_ckpt_save(c, 4, &blob, 1));
    ASSERT_OK(elastic_ckpt_save_async(c, 4, &blob, 1, 0)); /* step 4 exists: the commit must fail */
    uint64_t step;
    ASSERT_ERR(elastic_ckpt_async_wait(c, test_scaled_ms(30000), &step), ELASTIC_EEXIST);
    ASSERT_EQ(step, 4);
    ASSERT(strstr(elastic_last_error(), "already committed") != NULL);
    elastic_ckpt_close(c);
}

TEST(ckpt_close_during_async_save_leaves_a_clean_directory)
{
    for (int round = 0; round < 5; round++) {
        elastic_ckpt *c = open_dir();
        const size_t len = 16u << 20;
        uint8_t *buf = filled(len, (uint64_t)round);
        elastic_ckpt_blob blob = { "big", buf, len, 0 };
        ASSERT_OK(elastic_ckpt_save_async(c, (uint64_t)round + 1, &blob, 1, test_scaled_ms(30000)));
        elastic_ckpt_close(c); /* cancels or finishes; never half-commits */
        free(buf);
        c = open_dir();
        uint64_t latest;
        int rc = elastic_ckpt_latest(c, &latest);
        ASSERT(rc == 0 || rc == ELASTIC_ENOTFOUND);
        if (rc == 0) {
            void *data;
            size_t got;
            ASSERT_OK(elastic_ckpt_read(c, latest, "big", &data, &got));
            ASSERT_EQ(got, len);
            elastic_free(data);
        }
        elastic_ckpt_close(c);
    }
}

/* After elastic_ckpt_async_reserve the first save's copy lands in memory
 * that is already faulted in: it takes (almost) no page faults. */
TEST(ckpt_async_reserve_faults_the_staging_buffer_in_beforehand)
{
    /* Small pages, as on a host without transparent huge pages: every page
     * of a fresh buffer would fault (the test runs in its own process). */
    ASSERT_EQ(prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0), 0);
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer maps shadow memory for every byte the copy touches:
     * those faults are its own, and would hide the ones this test counts. */
    SKIP("page faults are ThreadSanitizer's shadow memory under TSan");
#endif
    elastic_ckpt *c = open_dir();
    const size_t len = 24u << 20;
    uint8_t *weights = filled(len, 3);
    ASSERT_ERR(elastic_ckpt_async_reserve(NULL, len), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_ckpt_async_reserve(c, SIZE_MAX - 16), ELASTIC_ERANGE);
    ASSERT_OK(elastic_ckpt_async_reserve(c, len));
    elastic_ckpt_blob blobs[] = { { "weights", weights, len, 0 } };
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    ASSERT_OK(elastic_ckpt_save_async(c, 1, blobs, 1, 1000));
    getrusage(RUSAGE_SELF, &after);
    long faults = after.ru_minflt - before.ru_minflt, pages = (long)(len / 4096),
         allowed = pages / 10;
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer's shadow of a fresh mapping (a byte per 8) faults in
     * when the copy is first checked: its own memory, not the buffer's. */
    allowed += pages / 8 + 16;
#endif
    if (faults > allowed)
        FAIL("the first save after reserve took %ld page faults for %ld pages", faults, pages);
    ASSERT_OK(elastic_ckpt_async_wait(c, test_scaled_ms(30000), NULL));
    void *data;
    size_t got;
    ASSERT_OK(elastic_ckpt_read(c, 1, "weights", &data, &got));
    ASSERT_EQ(got, len);
    ASSERT_MEM_EQ(data, weights, len);
    elastic_free(data);
    free(weights);
    elastic_ckpt_close(c);
}

/* The staging buffer is mapped once and kept: later saves of the same size
 * (or smaller) reuse it and take (almost) no page faults; a larger save maps
 * a bigger one. The first save's populated copy holds the right bytes. */
TEST(ckpt_async_keeps_the_staging_buffer_across_saves)
{
    ASSERT_EQ(prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0),
              0); /* count 4 KiB pages, as in the test above */
    elastic_ckpt *c = open_dir();
    ASSERT_EQ(ckpt__async_stage_maps(c), 0);
    const size_t len = 24u << 20;
    uint8_t *first = filled(len, 5), *second = filled(len, 6);
    elastic_ckpt_blob blobs[] = { { "a", first, len / 2 + 17, 0 },
                                  { "b", first + len / 2 + 17, len / 2 - 17, 0 } };
    ASSERT_OK(elastic_ckpt_save_async(c, 1, blobs, 2, 1000));
    ASSERT_EQ(ckpt__async_stage_maps(c), 1);
    ASSERT_OK(elastic_ckpt_async_wait(c, test_scaled_ms(30000), NULL));
    blobs[0].data = second;
    blobs[1].data = second + len / 2 + 17;
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    ASSERT_OK(elastic_ckpt_save_async(c, 2, blobs, 2, test_scaled_ms(30000)));
    getrusage(RUSAGE_SELF, &after);
    ASSERT_EQ(ckpt__async_stage_maps(c), 1);
#if !defined(__SANITIZE_THREAD__) /* TSan's shadow memory faults are its own */
    long faults = after.ru_minflt - before.ru_minflt, pages = (long)(len / 4096);
    if (faults * 10 > pages)
        FAIL("the second save took %ld page faults for %ld pages", faults, pages);
#endif
    ASSERT_OK(elastic_ckpt_async_wait(c, test_scaled_ms(30000), NULL));
    for (uint64_t step = 1; step <= 2; step++) {
        const uint8_t *expect = step == 1 ? first : second;
        void *data;
        size_t got;
        ASSERT_OK(elastic_ckpt_read(c, step, "a", &data, &got));
        ASSERT_EQ(got, len / 2 + 17);
        ASSERT_MEM_EQ(data, expect, got);
        elastic_free(data);
        ASSERT_OK(elastic_ckpt_read(c, step, "b", &data, &got));
        ASSERT_EQ(got, len / 2 - 17);
        ASSERT_MEM_EQ(data, expect + len / 2 + 17, got);
        elastic_free(data);
    }
    uint8_t *bigger = filled(2 * len, 7);
    elastic_ckpt_blob big = { "a", bigger, 2 * len, 0 };
    ASSERT_OK(elastic_ckpt_save_async(c, 3, &big, 1, test_scaled_ms(30000)));
    ASSERT_EQ(ckpt__async_stage_maps(c), 2);
    ASSERT_OK(elastic_ckpt_async_wait(c, test_scaled_ms(30000), NULL));
    void *data;
    size_t got;
    ASSERT_OK(elastic_ckpt_read(c, 3, "a", &data, &got));
    ASSERT_EQ(got, 2 * len);
    ASSERT_MEM_EQ(data, bigger, got);
    elastic_free(data);
    free(first);
    free(second);
    free(bigger);
    elastic_ckpt_close(c);
}
