/* A node's progress from its heartbeat slots (src/probe/progress.c): the
 * step resumed from and when, the furthest step and when, the mean step time,
 * the saves' stall and the restore, and for a worker that lived through the
 * generation change (in-process recovery) only what happened since. */
#include "probe/progress.h"
#include "test.h"

TEST(probe_progress_of_two_workers_from_their_slots)
{
    channel__hb_snapshot a = { .step = 170,
                               .beats = 21,
                               .last_beat_ns = 5000000000u,
                               .interval_sum_ns = 400000000u,
                               .interval_steps = 20,
                               .ckpt_stall_ns = 30000000u,
                               .ckpt_restore_ns = 50000000u };
    channel__hb_snapshot b = { .step = 169,
                               .beats = 20,
                               .last_beat_ns = 4980000000u,
                               .interval_sum_ns = 380000000u,
                               .interval_steps = 19,
                               .ckpt_stall_ns = 20000000u,
                               .ckpt_restore_ns = 40000000u };
    channel__hb_snapshot silent = { .step = 0, .beats = 0 };
    const channel__hb_snapshot *now[] = { &a, &b, &silent, NULL };
    probe__progress p;
    probe__progress_of(now, NULL, 4, 100000, 5000000000u, &p);
    ASSERT_EQ(p.workers, 3u);
    ASSERT_EQ(p.stepping, 2u);
    ASSERT_EQ(p.first_step, 150);
    ASSERT_EQ(p.first_step_ms, 99600); /* both first beat 400 ms before now */
    ASSERT_EQ(p.last_step, 170);
    ASSERT_EQ(p.last_step_ms, 100000);
    ASSERT_EQ(p.step_us, 20000);
    ASSERT_EQ(p.save_stall_ms, 30);
    ASSERT_EQ(p.restore_ms, 50);
}

TEST(probe_progress_of_a_survivor_counts_only_its_new_generation)
{
    /* At the generation's start the slot had 100 beats up to step 99 and a
     * 500 ms stall; since then 11 beats took it from 60 (restored) to 70. */
    channel__hb_snapshot before = { .step = 99,
                                    .beats = 100,
                                    .last_beat_ns = 1000000000u,
                                    .interval_sum_ns = 990000000u,
                                    .interval_steps = 99,
                                    .ckpt_stall_ns = 500000000u };
    channel__hb_snapshot after = before;
    after.step = 70;
    after.beats = 111;
    after.last_beat_ns = 3000000000u;
    after.interval_sum_ns += 100000000u; /* 10 advancing beats, 10 ms each */
    after.interval_steps += 10;
    after.ckpt_stall_ns += 7000000u;
    const channel__hb_snapshot *now[] = { &after }, *base[] = { &before };
    probe__progress p;
    probe__progress_of(now, base, 1, 50000, 3000000000u, &p);
    ASSERT_EQ(p.stepping, 1u);
    ASSERT_EQ(p.first_step, 60);
    ASSERT_EQ(p.first_step_ms, 49900);
    ASSERT_EQ(p.step_us, 10000);
    ASSERT_EQ(p.save_stall_ms, 7);
    /* No beat since the baseline: not stepping yet. */
    const channel__hb_snapshot *still[] = { &before };
    probe__progress_of(still, base, 1, 50000, 3000000000u, &p);
    ASSERT_EQ(p.stepping, 0u);
    ASSERT_EQ(p.first_step, -1);
}
