/* The goodput accounting (src/common/goodput.c) of a recorded in-process
 * recovery: elasticrun --standalone --nproc-per-node 3 --memory-ckpt
 * --in-process-recovery --warm-spares 1, loop_trainer --steps 300 --step-ms 10
 * --memory-every 1, rank 1 SIGKILLed at step 152. The survivors stay, a warm
 * spare takes rank 1's place, and the job resumes at step 152 from memory.
 *
 * Until the fix, the agent measured a kept worker's progress over its whole
 * life (the probe monitor took no baseline for it): generation 2's
 * steps_started said step 1 and its steps_ended the save stalls of both
 * generations. The accounting then charged the failure 151 redone steps
 * (1.854 s) on top of its 97 ms recovery and counted generation 1's save
 * stalls twice: ETTR 24.2% instead of 74.7%. Both recordings go through the
 * accounting here, so the figures of each are pinned. */
#include "common/goodput.h"
#include "test.h"

#include <math.h>
#include <string.h>

#define NEAR_MS(a, b)                                                                          \
    do {                                                                                       \
        double near_a = (a), near_b = (b);                                                     \
        if (fabs(near_a - near_b) > 0.5) FAIL("%s = %.1f ms, expected %.1f", #a, near_a, near_b); \
    } while (0)

#define LINE(rest) "{\"run_id\":\"e3a3675e\",\"node\":\"vm-9143\"," rest "}"

/* The events the accounting reads, as the fixed agent journaled them. */
static const char *const recorded[] = {
    LINE("\"ts_ms\":1796188241539,\"event\":\"agent_started\",\"nproc_per_node\":3"),
    LINE("\"ts_ms\":1796188241539,\"event\":\"generation_formed\",\"generation\":1"),
    LINE("\"ts_ms\":1796188242401,\"event\":\"steps_started\",\"generation\":1,\"step\":1,"
         "\"first_step_ms\":1796188241673,\"restore_ms\":0"),
    LINE("\"ts_ms\":1796188244088,\"event\":\"failure\",\"generation\":1,\"rank\":1,"
         "\"local_rank\":1,\"exit_code\":-1,\"signal\":9"),
    LINE("\"ts_ms\":1796188244088,\"event\":\"steps_ended\",\"generation\":1,\"last_step\":152,"
         "\"last_step_ms\":1796188244069,\"step_us\":15867,\"save_stall_ms\":542"),
    LINE("\"ts_ms\":1796188244088,\"event\":\"generation_stopped\",\"generation\":1,"
         "\"stop_ms\":1"),
    LINE("\"ts_ms\":1796188244089,\"event\":\"generation_formed\",\"generation\":2"),
    NULL, /* generation 2's steps_started: one of the two below */
    NULL, /* generation 2's steps_ended */
    LINE("\"ts_ms\":1796188246283,\"event\":\"job_end\",\"status\":\"succeeded\","
         "\"exit_code\":0"),
};

static const char fixed_started[] =
    LINE("\"ts_ms\":1796188244404,\"event\":\"steps_started\",\"generation\":2,\"step\":152,"
         "\"first_step_ms\":1796188244166,\"restore_ms\":0");
static const char fixed_ended[] =
    LINE("\"ts_ms\":1796188246283,\"event\":\"steps_ended\",\"generation\":2,\"last_step\":300,"
         "\"last_step_ms\":1796188246221,\"step_us\":14355,\"save_stall_ms\":364");
/* The same generation as the agent said it before the fix: the survivors'
 * first beat of generation 1 (step 1) and both generations' stalls. */
static const char whole_life_started[] =
    LINE("\"ts_ms\":1796188244404,\"event\":\"steps_started\",\"generation\":2,\"step\":1,"
         "\"first_step_ms\":1796188244166,\"restore_ms\":0");
static const char whole_life_ended[] =
    LINE("\"ts_ms\":1796188246283,\"event\":\"steps_ended\",\"generation\":2,\"last_step\":300,"
         "\"last_step_ms\":1796188246221,\"step_us\":15100,\"save_stall_ms\":906");

static goodput_report report;

static void account(const char *started, const char *ended)
{
    goodput_record records[16];
    size_t n = 0;
    for (size_t i = 0; i < sizeof recorded / sizeof recorded[0]; i++) {
        const char *line = recorded[i] != NULL ? recorded[i] : i == 7 ? started : ended;
        ASSERT(goodput__record_of_line(line, strlen(line), &records[n]));
        n++;
    }
    ASSERT_EQ(goodput__account(records, n, 0, &report), 0);
}

TEST(common_goodput_in_process_recovery_loses_its_recovery_not_the_survivors_history)
{
    account(fixed_started, fixed_ended);
    NEAR_MS(report.wall_ms, 4744);
    ASSERT_EQ(report.line_count, (size_t)2);
    const goodput_line *failure = &report.lines[1];
    ASSERT_EQ(failure->cause, GP_CAUSE_FAILURE);
    ASSERT_EQ(failure->last_step, 152);
    ASSERT_EQ(failure->restored_step, 152);
    NEAR_MS(failure->ms[GP_DETECTION], 19); /* last step 244069 -> failure seen 244088 */
    NEAR_MS(failure->ms[GP_STOPPING], 0);   /* the killed worker was the only one to stop */
    NEAR_MS(failure->ms[GP_RENDEZVOUS], 1); /* stopped 244088 -> generation 2 244089 */
    NEAR_MS(failure->ms[GP_RESTART], 77);   /* promote, reconfigure, agree -> first step */
    NEAR_MS(failure->ms[GP_RESTORE], 0);    /* 72 bytes from local memory */
    NEAR_MS(failure->ms[GP_REDONE], 0);     /* memory tier every step: nothing redone */
    NEAR_MS(report.failures_ms, 97);
    NEAR_MS(report.lost_ms[GP_CKPT_STALL], 542 + 364);
    NEAR_MS(report.productive_ms, 3545);
    ASSERT(fabs(report.ettr - 0.747) < 0.001);
    /* ETTR is short of 100% mostly by the saves every step, not the failure:
     * the closing line and elasticctl name that bucket beside it. */
    ASSERT_EQ(goodput__largest_bucket(&report), GP_CKPT_STALL);
}

TEST(common_goodput_a_kept_workers_whole_life_reads_as_redone_steps)
{
    /* What the agent journaled before the fix, through the same accounting. */
    account(whole_life_started, whole_life_ended);
    const goodput_line *failure = &report.lines[1];
    ASSERT_EQ(failure->restored_step, 1);
    NEAR_MS(failure->ms[GP_REDONE], 1854); /* 151 steps of generation 1, all of them */
    NEAR_MS(report.failures_ms, 97 + 1854);
    NEAR_MS(report.lost_ms[GP_CKPT_STALL], 542 + 906); /* generation 1's 542 ms twice */
    ASSERT(fabs(report.ettr - 0.242) < 0.001);
    ASSERT_EQ(goodput__largest_bucket(&report), GP_REDONE);
}
