/* elasticctl's simulator (tools/elasticctl/simulate*.c): a hand-checkable
 * trace (one failure, every second of the run known), the same seed giving
 * the same run and another seed another, the best interval found agreeing
 * with Young/Daly where their assumption holds (save cost << MTBF), the
 * shipped profiles parsing, and bad profiles refused with the line named. */
#include "elasticctl/simulate.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>

#define NEAR(a, b, eps)                                                                          \
    do {                                                                                         \
        double near_a = (a), near_b = (b);                                                       \
        if (fabs(near_a - near_b) > (eps)) FAIL("%s = %.4f, expected %.4f", #a, near_a, near_b); \
    } while (0)

/* One profile with round numbers: a save costs 10 s (1 GB per GPU at
 * 0.1 GB/s), a restore 10 s, a recovery 5 + 5 + 10 + 20 s before it. */
static const char simple[] = "model\n"
                             "step_s 1 test\n"
                             "state_gb 4 test: 1 GB per GPU at 4 GPUs\n"
                             "gpus_per_node 4 test\n"
                             "rate_per_gpu_hour 0.025 test: 0.1 per hour at 4 GPUs\n"
                             "profile simple\n"
                             "detect_software_s 5 test\n"
                             "detect_gpu_s 5 test\n"
                             "detect_host_s 5 test\n"
                             "detect_hang_s 5 test\n"
                             "stop_s 5 test\n"
                             "rdzv_base_s 10 test\n"
                             "rdzv_per_node_ms 0 test\n"
                             "replace_s 0 test\n"
                             "restart_s 20 test\n"
                             "interpreter_s 0 test\n"
                             "init_s 0 test\n"
                             "restore_gbps 0.1 test\n"
                             "save_gbps 0.1 test\n"
                             "interval_s 100 test\n"
                             "every_steps 0 test\n";

TEST(ctl_simulate_one_failure_costs_what_the_hand_says)
{
    sim_profiles *all = malloc(sizeof *all);
    ASSERT(all != NULL);
    ASSERT_OK(sim__profiles_parse(simple, "simple", all));
    sim_failure trace[] = { { .at_s = 525, .cls = SIM_SOFTWARE } };
    sim_job job = {
        .gpus = 4, .duration_s = 1000, .interval_s = 100, .trace = trace, .trace_count = 1
    };
    sim_result r;
    sim__run(all, &all->p[0], &job, &r);
    /* Start: rendezvous 10 + restart 20 -> training at 30 in cycles of 100 + a
     * 10 s save. The failure at 525: 4 cycles done, 55 s trained since the
     * last save are redone. Recovery 5 + 5 + 10 + 20 + 10 -> 575; then 3
     * cycles and 95 s of training that the job's end keeps. */
    NEAR(r.lost_s[GP_RENDEZVOUS], 20, 1e-9);
    NEAR(r.lost_s[GP_RESTART], 40, 1e-9);
    NEAR(r.lost_s[GP_DETECTION], 5, 1e-9);
    NEAR(r.lost_s[GP_STOPPING], 5, 1e-9);
    NEAR(r.lost_s[GP_RESTORE], 10, 1e-9);
    NEAR(r.lost_s[GP_REDONE], 55, 1e-9);
    NEAR(r.lost_s[GP_CKPT_STALL], 70, 1e-9);
    NEAR(r.productive_s, 795, 1e-9);
    NEAR(r.ettr, 0.795, 1e-12);
    NEAR(r.failures, 1, 0);
    free(all);
}

TEST(ctl_simulate_a_seed_is_one_run_and_another_seed_another)
{
    sim_profiles *all = malloc(sizeof *all);
    ASSERT(all != NULL);
    ASSERT_OK(sim__profiles_parse(NULL, "(shipped)", all));
    ASSERT(all->count >= 4);
    sim_job job = { .gpus = 16384, .duration_s = 30 * 86400.0, .seed = 7, .interval_s = 600 };
    sim_result a, b, c;
    sim__run(all, &all->p[0], &job, &a);
    sim__run(all, &all->p[0], &job, &b);
    ASSERT(memcmp(&a, &b, sizeof a) == 0);
    job.seed = 8;
    sim__run(all, &all->p[0], &job, &c);
    ASSERT(a.ettr != c.ettr);
    /* Llama 3's rate: about 233 interruptions in 30 days at 16,384 GPUs. */
    ASSERT(a.failures > 180 && a.failures < 290);
    double sum = a.productive_s;
    for (int k = 0; k < GP_BUCKETS; k++) sum += a.lost_s[k];
    NEAR(sum, a.wall_s, 1e-3);
    free(all);
}

TEST_TIMEOUT(ctl_simulate_best_interval_agrees_with_young_daly, 120)
{
    sim_profiles *all = malloc(sizeof *all);
    ASSERT(all != NULL);
    ASSERT_OK(sim__profiles_parse(simple, "simple", all));
    /* MTBF 10 h, a save 10 s: Young/Daly sqrt(2 x 10 x 36000) = 849 s. */
    double young_daly = sim__young_daly(all, &all->p[0], 4);
    NEAR(young_daly, sqrt(2 * 10 * 36000.0), 1e-6);
    all->p[0].v[SP_INTERVAL_S] = 0;
    double best = sim__best_interval(all, &all->p[0], 4, 3650 * 86400.0, 4, 99);
    if (best < 0.75 * young_daly || best > 1.33 * young_daly)
        FAIL("best interval %.0f s, Young/Daly %.0f s", best, young_daly);
    free(all);
}

TEST(ctl_simulate_profiles_refuse_what_they_cannot_use)
{
    sim_profiles *all = malloc(sizeof *all);
    ASSERT(all != NULL);
    ASSERT_EQ(sim__profiles_parse("model\nstep_s 1\n", "p", all), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "p:2: step_s needs its source") != NULL);
    ASSERT_EQ(sim__profiles_parse("model\nwarp_s 1 x\n", "p", all), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "unknown key \"warp_s\"") != NULL);
    ASSERT_EQ(sim__profiles_parse("model\nstep_s -1 x\n", "p", all), ELASTIC_EINVAL);
    ASSERT_EQ(sim__profiles_parse("model\nstep_s nan x\n", "p", all), ELASTIC_EINVAL);
    ASSERT_EQ(sim__profiles_parse("step_s 1 x\n", "p", all), ELASTIC_EINVAL);
    ASSERT_EQ(sim__profiles_parse("model\nrestart_s 1 x\n", "p", all), ELASTIC_EINVAL);
    char missing[sizeof simple];
    snprintf(missing, sizeof missing, "%s", simple);
    char *cut = strstr(missing, "init_s");
    memmove(cut, strchr(cut, '\n') + 1, strlen(strchr(cut, '\n') + 1) + 1);
    ASSERT_EQ(sim__profiles_parse(missing, "p", all), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "profile simple has no init_s") != NULL);
    char twice[sizeof simple + 64];
    snprintf(twice, sizeof twice, "%sprofile simple\n", simple);
    ASSERT_EQ(sim__profiles_parse(twice, "p", all), ELASTIC_EINVAL);
    /* Every shipped value says where it comes from. */
    ASSERT_OK(sim__profiles_parse(NULL, "(shipped)", all));
    for (int i = 0; i < all->count; i++)
        for (int k = SP_RATE + 1; k < SP_PARAMS; k++) ASSERT(all->p[i].source[k][0] != '\0');
    free(all);
}

/* A deterministic bug's restart: the software recovery 5 + 5 + 10 + 20 + 10
 * and half the 100 s interval replayed = 100 s; at 4 GPUs torchrun's 10
 * restarts spend 10 x 100 x 4 GPU-seconds, the failure policy's one a tenth.
 * The shipped profiles carry torchrun at 30 minutes and at its best interval. */
TEST(ctl_simulate_deterministic_bug_costs_what_the_hand_says)
{
    sim_profiles *all = malloc(sizeof *all);
    ASSERT(all != NULL);
    ASSERT_OK(sim__profiles_parse(simple, "simple", all));
    NEAR(sim__bug_cycle_s(all, &all->p[0], 4, 100), 100, 1e-9);
    ASSERT_OK(sim__profiles_parse(NULL, "(shipped)", all));
    int torchrun = -1, best = -1;
    for (int i = 0; i < all->count; i++) {
        if (strcmp(all->p[i].name, "torchrun") == 0) torchrun = i;
        if (strcmp(all->p[i].name, "torchrun-best-interval") == 0) best = i;
    }
    ASSERT(torchrun >= 0 && best >= 0);
    NEAR(sim__interval(all, &all->p[torchrun], 386), 1800, 0);
    NEAR(sim__interval(all, &all->p[best], 386), 386, 0);
    /* same recovery, so the same restart but for the replayed half interval */
    NEAR(sim__bug_cycle_s(all, &all->p[torchrun], 16384, 1800) -
             sim__bug_cycle_s(all, &all->p[best], 16384, 386),
         (1800 - 386) / 2.0, 1e-6);
    free(all);
}
