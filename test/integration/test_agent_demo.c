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
    if (kill_one) {
        const char *started[] = { "\"event\":\"worker_started\"", "\"generation\":1,",
                                  "\"rank\":1,", NULL };
        char line[1024];
        ASSERT_EQ(agent_harness_wait_lines(events, started, 1, 30000), 1);
        ASSERT(agent_harness_nth_line(events, started, 0, line, sizeof line));
        const char *pid_at = strstr(line, "\"pid\":");
        ASSERT(pid_at != NULL);
        char console[600]; /* rank 0 prints "step N loss ... (checkpoint)" */
        snprintf(console, sizeof console, "%s/%s.out", test_tmpdir(), name);
        const char *midway[] = { "step 40 ", "(checkpoint)", NULL };
        ASSERT_EQ(agent_harness_wait_lines(console, midway, 1, 60000), 1);
        ASSERT_EQ(kill((pid_t)atoi(pid_at + 6), SIGKILL), 0);
    }
    int status = 0;
    if (!agent_harness_wait_exit(agent, 60000, &status)) {
        kill(agent, SIGKILL);
        FAIL("%s: elasticrun did not finish", name);
    }
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
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
