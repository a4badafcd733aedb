/* Job-wide straggler scores: nodes scored against the job's median with the
 * per-rank rule; equal nodes, one 3x slow node, a one-off stall, warm-up,
 * and the store record's validation. */
#include "test.h"
#include "probe/probe.h"

#define MS 1000000ull

/* One round: every node advanced `step` steps at its step time; returns the verdict. */
static int round_of(probe__job_straggler *j, probe__node_stat *stats, const uint64_t *step_ns,
                    unsigned nodes, double *scores)
{
    bool present[8];
    for (unsigned i = 0; i < nodes; i++) {
        stats[i].steps += 10;
        stats[i].step_ns = step_ns[i];
        present[i] = true;
    }
    return probe__job_straggler_evaluate(j, stats, present, 20, 0.7, 3, scores);
}

TEST(probe_job_straggler_equal_nodes_evict_no_one)
{
    probe__job_straggler *j = NULL;
    ASSERT_OK(probe__job_straggler_create(3, &j));
    probe__node_stat stats[3] = { { 0 } };
    uint64_t step_ns[3] = { 300 * MS, 310 * MS, 295 * MS }; /* all slow, all alike */
    double scores[3];
    for (int r = 0; r < 20; r++) ASSERT_EQ(round_of(j, stats, step_ns, 3, scores), -1);
    for (int i = 0; i < 3; i++) ASSERT(scores[i] > 0.9 && scores[i] < 1.1);
    probe__job_straggler_free(j);
}

TEST(probe_job_straggler_3x_slow_node_found_after_rounds)
{
    probe__job_straggler *j = NULL;
    ASSERT_OK(probe__job_straggler_create(3, &j));
    probe__node_stat stats[3] = { { 0 } };
    uint64_t step_ns[3] = { 100 * MS, 300 * MS, 100 * MS };
    double scores[3];
    /* Round 1 is inside the warm-up (10 steps < 20): not scored. */
    ASSERT_EQ(round_of(j, stats, step_ns, 3, scores), -1);
    ASSERT(scores[1] < 0);
    ASSERT_EQ(round_of(j, stats, step_ns, 3, scores), -1); /* below 1 round */
    ASSERT(scores[1] > 0.3 && scores[1] < 0.36);
    ASSERT(scores[0] > 0.99 && scores[0] < 1.01);
    ASSERT_EQ(round_of(j, stats, step_ns, 3, scores), -1); /* 2 rounds */
    ASSERT_EQ(round_of(j, stats, step_ns, 3, scores), 1);  /* 3 rounds: persistent */
    probe__job_straggler_free(j);
}

TEST(probe_job_straggler_one_off_stall_tolerated)
{
    probe__job_straggler *j = NULL;
    ASSERT_OK(probe__job_straggler_create(2, &j));
    probe__node_stat stats[2] = { { 0 } };
    uint64_t normal[2] = { 100 * MS, 100 * MS }, stall[2] = { 100 * MS, 900 * MS };
    double scores[2];
    for (int r = 0; r < 5; r++) ASSERT_EQ(round_of(j, stats, normal, 2, scores), -1);
    for (int r = 0; r < 2; r++)
        ASSERT_EQ(round_of(j, stats, stall, 2, scores), -1); /* a checkpoint save */
    for (int r = 0; r < 10; r++) ASSERT_EQ(round_of(j, stats, normal, 2, scores), -1);
    /* A node that did not advance is not scored (and breaks the streak). */
    for (int r = 0; r < 2; r++) ASSERT_EQ(round_of(j, stats, stall, 2, scores), -1);
    bool present[2] = { true, true };
    stats[0].steps += 10;
    ASSERT_EQ(probe__job_straggler_evaluate(j, stats, present, 20, 0.7, 3, scores), -1);
    ASSERT(scores[1] < 0);
    ASSERT_EQ(round_of(j, stats, stall, 2, scores), -1);
    probe__job_straggler_free(j);
}

TEST(probe_job_straggler_record_round_trip_and_validation)
{
    probe__node_stat st = { .steps = 42, .step_ns = 123456789 };
    snprintf(st.node_id, sizeof st.node_id, "host-a");
    char buf[PROBE__NODE_STAT_BYTES];
    ASSERT_OK(probe__node_stat_format(&st, buf, sizeof buf));
    probe__node_stat back;
    ASSERT_OK(probe__node_stat_parse(buf, strlen(buf), &back));
    ASSERT_EQ(back.steps, 42);
    ASSERT_EQ(back.step_ns, 123456789);
    ASSERT(strcmp(back.node_id, "host-a") == 0);
    const char *bad[] = { "", "v2 1 2 a", "v1 x 2 a", "v1 1 2", "v1 1 2 a trailing",
                          "v1 1 99999999999999999 a", "v1 1 2 a\"b",
                          /* no sign, single spaces */
                          "v1 -1 2 a", "v1 +1 2 a", "v1  1 2 a", "v1 1 2  a" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ASSERT_EQ(probe__node_stat_parse(bad[i], strlen(bad[i]), &back), ELASTIC_EPROTO);
    char big[400];
    memset(big, 'a', sizeof big);
    ASSERT_EQ(probe__node_stat_parse(big, sizeof big, &back), ELASTIC_EPROTO);
}
