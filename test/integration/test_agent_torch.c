/*
 * A real PyTorch job under elasticrun: torch.distributed with gloo and
 * init_process_group("env://"), a worker SIGKILLed, the group restarted with
 * correct ranks. Skipped (with the reason) when /usr/bin/python3 lacks torch.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#define TORCH_PYTHON "/usr/bin/python3"

TEST_TIMEOUT(agent_restarts_a_pytorch_gloo_job_after_a_kill, 300)
{
    if (system(TORCH_PYTHON " -c 'import torch.distributed' >/dev/null 2>&1") != 0)
        SKIP(TORCH_PYTHON " cannot import torch (install python3-torch)");
    char report[512], script[1024], err_path[512];
    agent_harness_path(report, sizeof report, "report");
    snprintf(script, sizeof script, "%s/test/helpers/agent_torch_train.py", test_source_dir());
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                        script, report);
    const char *env[] = { "PYTHON_EXEC=" TORCH_PYTHON, "GLOO_SOCKET_IFNAME=lo", NULL };
    pid_t agent = elasticrun_args_spawn(&cmd, env, "agent");
    const char *first[] = { "torch ", "restart=0 ", "world=2 ", "sum=1 ", NULL };
    if (agent_harness_wait_lines(report, first, 2, 180000) != 2) {
        kill(agent, SIGKILL);
        char *err =
            agent_harness_read_file(agent_harness_path(err_path, sizeof err_path, "agent.err"));
        FAIL("the first generation did not all-reduce:\n%s", err ? err : "");
    }
    const char *rank1[] = { "torch ", "restart=0 ", "rank=1 ", NULL };
    char line[256];
    ASSERT(agent_harness_nth_line(report, rank1, 0, line, sizeof line));
    ASSERT_EQ(kill((pid_t)agent_harness_line_field(line, "pid"), SIGKILL), 0);
    int status = 0;
    if (!agent_harness_wait_exit(agent, 180000, &status)) {
        kill(agent, SIGKILL);
        FAIL("elasticrun did not finish after the restart");
    }
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    for (int rank = 0; rank < 2; rank++) {
        char needle[32];
        snprintf(needle, sizeof needle, "rank=%d ", rank);
        const char *second[] = { "torch ", "restart=1 ", "world=2 ", "sum=1 ", needle, NULL };
        ASSERT_EQ(agent_harness_wait_lines(report, second, 1, 1000), 1);
    }
}
