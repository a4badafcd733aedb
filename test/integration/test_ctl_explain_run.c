/*
 * `elasticctl explain` over a real run's event log: the C trainer with a bad
 * batch at step 37 (test/helpers/step_bug_worker.c, rank 1 only) under
 * elasticrun with --max-restarts 10. Every failure is named with its rank,
 * generation and class (user code, from its error file: the error and its
 * frame), as the agent logged it (failure_classified); the second one is
 * the same error again: the rule "repeat" stops the job (exit 70), and its
 * end is said.
 */
#include "support/agent_harness.h"
#include "test.h"

#include <sys/wait.h>

TEST_TIMEOUT(ctl_explain_names_each_failure_of_a_real_run, 120)
{
    char events[512], worker[512];
    agent_harness_path(events, sizeof events, "explain_events.jsonl");
    snprintf(worker, sizeof worker, "%s", test_helper_path("step_bug_worker"));
    const char *argv[] = { "elasticrun",
                           "--standalone",
                           "--nproc-per-node",
                           "2",
                           "--max-restarts",
                           "10",
                           "--event-log",
                           events,
                           "--no-python",
                           worker,
                           "--fail-at-step",
                           "37",
                           "--step-ms",
                           "10",
                           "--rank-only",
                           "1",
                           NULL };
    pid_t agent = agent_harness_spawn(agent_harness_elasticrun(), argv, NULL, "explain_run");
    int status = 0;
    if (!agent_harness_wait_exit(agent, 90000, &status)) {
        kill(agent, SIGKILL);
        FAIL("elasticrun did not finish");
    }
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 70);

    const char *explain[] = { "elasticctl", "explain", events, NULL };
    pid_t ctl = agent_harness_spawn(test_bin_path("elasticctl"), explain, NULL, "explain_out");
    ASSERT(agent_harness_wait_exit(ctl, 30000, &status));
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char path[512];
    char *text = agent_harness_read_file(agent_harness_path(path, sizeof path, "explain_out.out"));
    ASSERT(text != NULL);
    if (strstr(text, "2 failures, --max-restarts 10") == NULL ||
        strstr(text, "failure 1: generation 1, rank 1 on node") == NULL ||
        strstr(text, "failure 2: generation 2, rank 1 on node") == NULL ||
        strstr(text, "failure 3:") != NULL ||
        strstr(text, "what:      exited with code 1") == NULL ||
        strstr(text, "class:     user code") == NULL ||
        strstr(text, "error:     BadBatchError at step_bug_worker.c:") == NULL ||
        strstr(text, "in check_batch: batch <n> has a NaN label") == NULL ||
        strstr(text, "decided:   restart (one of --max-restarts spent)") == NULL ||
        strstr(text, "rule:      repeat: the same error at step 37 in generations 1 and 2") ==
            NULL || /* the rank's last heartbeat step */
        strstr(text, "failure 2: generation 2, rank 1 on node") == NULL ||
        strstr(text, "decided:   stop now: a deterministic bug (exit 70)") == NULL ||
        strstr(text, "the job ended: failed, exit 70") == NULL ||
        strstr(text, "why:       stopping the job: a deterministic bug in the training code: "
                     "BadBatchError") == NULL)
        FAIL("explain said:\n%s", text);
    free(text);
}
