/*
 * The keep-alive interval and lease timeout a job uses: as asked up to the
 * size the store answers at RDZV__KEEPALIVES_PER_S, stretched in proportion
 * beyond it, so a large job's keep-alives cannot bury the store.
 */
#include "rdzv/rdzv.h"
#include "support/rdzv_fixture.h"

TEST(rdzv_liveness_is_as_asked_for_jobs_the_store_keeps_up_with)
{
    int sizes[] = { 1, 16, 1024, 2000 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int interval = 500, timeout = 2000;
        rdzv__scale_liveness(sizes[i], &interval, &timeout);
        ASSERT_EQ(interval, 500);
        ASSERT_EQ(timeout, 2000);
    }
    /* An interval already long enough for the size is kept too. */
    int interval = 5000, timeout = 20000;
    rdzv__scale_liveness(16384, &interval, &timeout);
    ASSERT_EQ(interval, 5000);
    ASSERT_EQ(timeout, 20000);
}

TEST(rdzv_liveness_stretches_with_the_job_past_what_the_store_answers)
{
    int interval = 500, timeout = 2000;
    rdzv__scale_liveness(16384, &interval, &timeout);
    ASSERT_EQ(interval, 16384 * 1000 / RDZV__KEEPALIVES_PER_S);
    ASSERT_EQ(timeout, interval * 4); /* the asked timeout/interval ratio holds */
    /* The job's keep-alives stay within the store's budget at any size. */
    int sizes[] = { 4096, 8192, 16384, RDZV__MAX_NODES };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int iv = 100, to = 1000;
        rdzv__scale_liveness(sizes[i], &iv, &to);
        ASSERT((int64_t)sizes[i] * 1000 / iv <=
               RDZV__KEEPALIVES_PER_S + RDZV__KEEPALIVES_PER_S / 100);
        ASSERT_EQ(to, iv * 10);
    }
}

TEST(rdzv_open_uses_the_stretched_liveness_for_a_large_job_only)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    elastic_rdzv *small = NULL, *large = NULL;
    elastic_rdzv_opts_init(&o, sizeof o); /* the defaults users get: 500 / 2000 ms */
    o.endpoint = env.endpoint;
    o.run_id = "small";
    o.max_nodes = 16;
    ASSERT_OK(elastic_rdzv_open(&o, &small));
    ASSERT_EQ(small->keepalive_interval_ms, 500);
    ASSERT_EQ(small->keepalive_timeout_ms, 2000);
    ASSERT_EQ(small->watch_slice_ms, RDZV__WATCH_SLICE_MS);
    ASSERT(!small->liveness_scaled); /* its guard asks every interval, as asked */
    o.run_id = "large";
    o.max_nodes = 16384;
    ASSERT_OK(elastic_rdzv_open(&o, &large));
    ASSERT_EQ(large->keepalive_interval_ms, 4096);
    ASSERT_EQ(large->keepalive_timeout_ms, 16384);
    ASSERT(large->liveness_scaled);
    /* Its monitor's watch is re-armed no more often than its keep-alives lapse. */
    ASSERT_EQ(large->watch_slice_ms, 2 * 16384);
    elastic_rdzv_free(small);
    elastic_rdzv_free(large);
    rdzv_env_stop(&env);
}
