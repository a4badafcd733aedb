/*
 * The demo trainer (examples/c/demo_trainer) under elasticrun: a worker
 * SIGKILLed midway, the group resumes from the last checkpoint, and the
 * final weights equal those of a run without the failure.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char *run_demo(const char *name, bool kill_one)
{
    char dir[512], ckpt[600], result[600];
    agent_harness_path(dir, sizeof dir, name);
    mkdir(dir, 0755);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    snprintf(result, sizeof result, "%s/result.txt", dir);
    mkdir(ckpt, 0755);
    char trainer[1024], events[600];
    snprintf(trainer, sizeof trainer, "%s", test_example_path("demo_trainer"));
    snprintf(events, sizeof events, "%s/events.jsonl", dir);
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "3", "--max-restarts", "2",
                        "--event-log", events, "--no-python", trainer, "--ckpt-dir", ckpt,
                        "--steps", "200", "--step-ms", "5", "--ckpt-every", "10", "--result",
                        result);
    pid_t agent = elasticrun_args_spawn(&cmd, NULL, name);
    if (kill_one) agent_harness_kill_rank1_after_checkpoint(events, name, "step 40 ");
    ASSERT_EQ(agent_harness_exit_code(agent, 60000), 0);
    if (kill_one) {
        const char *restarted[] = { "\"event\":\"restarted\"", NULL };
        ASSERT_EQ(agent_harness_wait_lines(events, restarted, 1, 1000), 1);
    }
    char *text = agent_harness_read_file(result);
    ASSERT(text != NULL);
    return text;
}

TEST_TIMEOUT(agent_demo_trainer_survives_a_kill_with_the_same_result, 180)
{
    char *faulty = run_demo("faulty", true);
    char *clean = run_demo("clean", false);
    ASSERT(strstr(clean, "steps=200 ") != NULL);
    ASSERT_STR_EQ(faulty, clean);
    free(faulty);
    free(clean);
}
