/* Straggler scoring: median / rank's step time over a window; a slow rank
 * scores lowest; persistence is counted in rounds. */
#include "test.h"
#include "probe/probe.h"

#define MS 1000000ull

/* Feeds `rounds` samples of one step each at the given step times. */
static void feed(probe__straggler *s, const uint64_t *step_ns, unsigned ranks, unsigned rounds,
                 uint64_t *sums, uint64_t *steps)
{
    for (unsigned round = 0; round < rounds; round++)
        for (unsigned r = 0; r < ranks; r++) {
            sums[r] += step_ns[r];
            steps[r] += 1;
            probe__straggler_sample(s, r, sums[r], steps[r]);
        }
}

TEST(probe_straggler_slow_rank_scores_lowest)
{
    probe__straggler *s = NULL;
    ASSERT_OK(probe__straggler_create(4, 8, &s));
    uint64_t step_ns[4] = { 100 * MS, 102 * MS, 250 * MS, 98 * MS };
    uint64_t sums[4] = { 0 }, steps[4] = { 0 };
    feed(s, step_ns, 4, 10, sums, steps);
    double scores[4];
    probe__straggler_scores(s, scores);
    for (int r = 0; r < 4; r++)
        if (r != 2) ASSERT(scores[2] < scores[r]);
    ASSERT(scores[2] > 0.35 && scores[2] < 0.45); /* median ~101 ms / 250 ms */
    ASSERT(scores[0] > 0.95 && scores[0] < 1.05);
    probe__straggler_free(s);
}

TEST(probe_straggler_window_forgets_old_samples)
{
    probe__straggler *s = NULL;
    ASSERT_OK(probe__straggler_create(2, 4, &s));
    uint64_t sums[2] = { 0 }, steps[2] = { 0 };
    uint64_t slow[2] = { 100 * MS, 400 * MS }, even[2] = { 100 * MS, 100 * MS };
    feed(s, slow, 2, 6, sums, steps);
    ASSERT(probe__straggler_step_ns(s, 1) > 350e6);
    feed(s, even, 2, 6, sums, steps); /* more than the window: the slow phase is gone */
    ASSERT(probe__straggler_step_ns(s, 1) < 101e6);
    probe__straggler_free(s);
}

TEST(probe_straggler_needs_two_ranks_with_data)
{
    probe__straggler *s = NULL;
    ASSERT_OK(probe__straggler_create(3, 4, &s));
    uint64_t sums[3] = { 0 }, steps[3] = { 0 };
    uint64_t t[1] = { 100 * MS };
    feed(s, t, 1, 5, sums, steps);
    double scores[3];
    probe__straggler_scores(s, scores);
    ASSERT(scores[0] < 0 && scores[1] < 0 && scores[2] < 0);
    probe__straggler_free(s);
}

TEST(probe_straggler_persistent_after_rounds)
{
    probe__straggler *s = NULL;
    ASSERT_OK(probe__straggler_create(3, 4, &s));
    uint64_t sums[3] = { 0 }, steps[3] = { 0 };
    uint64_t t[3] = { 100 * MS, 100 * MS, 300 * MS };
    double scores[3];
    feed(s, t, 3, 2, sums, steps);
    ASSERT_EQ(probe__straggler_evaluate(s, 0.7, 3, scores), -1);
    feed(s, t, 3, 1, sums, steps);
    ASSERT_EQ(probe__straggler_evaluate(s, 0.7, 3, scores), -1);
    feed(s, t, 3, 1, sums, steps);
    ASSERT_EQ(probe__straggler_evaluate(s, 0.7, 3, scores), 2);
    probe__straggler_reset(s);
    ASSERT_EQ(probe__straggler_evaluate(s, 0.7, 3, scores), -1);
    probe__straggler_free(s);
}

TEST(probe_straggler_restarts_on_counter_regression)
{
    probe__straggler *s = NULL;
    ASSERT_OK(probe__straggler_create(1, 4, &s));
    probe__straggler_sample(s, 0, 1000 * MS, 10);
    probe__straggler_sample(s, 0, 2000 * MS, 20);
    ASSERT(probe__straggler_step_ns(s, 0) > 99e6);
    probe__straggler_sample(s, 0, 50 * MS, 1); /* a new process in the slot */
    ASSERT(probe__straggler_step_ns(s, 0) == 0);
    probe__straggler_sample(s, 0, 100 * MS, 2);
    ASSERT(probe__straggler_step_ns(s, 0) > 49e6 && probe__straggler_step_ns(s, 0) < 51e6);
    probe__straggler_free(s);
    ASSERT_ERR(probe__straggler_create(0, 4, &s), ELASTIC_EINVAL);
    probe__straggler_free(NULL);
}
